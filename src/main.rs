//! The `earshot` command line: parse arguments and dispatch into the
//! library (`earshot::cli`). Nothing else lives here.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "earshot", version = earshot_version(), about = "A private, fast voice assistant for a Raspberry Pi")]
struct Cli {
    /// Config file (default: $EARSHOT_CONFIG, ./earshot.toml, /etc/earshot/earshot.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// More logging (debug level).
    #[arg(long, short, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Long-term memory: list, add, forget, search (with scores), process jobs, check indexes.
    Memory {
        #[command(subcommand)]
        action: earshot::cli::memory::MemoryCommand,
    },
    /// The calendar: list, add, remove, sync with CalDAV.
    Calendar {
        #[command(subcommand)]
        action: earshot::cli::calendar::CalendarCommand,
    },
    /// Take one text turn (or a REPL with no TEXT), streaming the answer.
    Chat {
        text: Option<String>,
        /// Continue this conversation (one that does not exist: a new one,
        /// on the router graph, with a warning).
        #[arg(long)]
        conversation: Option<i64>,
        /// Set the conversation's mode from now on: tree or graph (with no
        /// --conversation, a new conversation in that mode).
        #[arg(long)]
        mode: Option<String>,
        /// Print the R-SSE events, one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show how the router decides a request.
    Route {
        text: String,
        #[arg(long)]
        json: bool,
    },
    /// List conversations, or print one.
    History {
        id: Option<i64>,
        #[arg(long)]
        json: bool,
    },
    /// Check microphone, speaker, models, keys, network, disk, database and button.
    Doctor {
        /// Print {"checks":[…],"ok":bool}.
        #[arg(long)]
        json: bool,
    },
    /// Wyoming protocol: `serve` earshot's ASR, TTS, intents and agent to Home Assistant.
    Wyoming {
        #[command(subcommand)]
        action: earshot::cli::wyoming::WyomingCommand,
    },
    /// ESPHome native API: `serve` earshot as a voice device Home Assistant adopts.
    Esphome {
        #[command(subcommand)]
        action: earshot::cli::esphome::EsphomeCommand,
    },
    /// Serve the local HTTP API (chat, SSE stream, voice, TTS, history).
    Serve {
        /// ADDR:PORT to listen on (default: [api] bind, 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR:PORT")]
        bind: Option<String>,
    },
    /// The voice loop: listen, transcribe, answer, speak — until SIGTERM/SIGINT.
    Run {
        /// Input: an ALSA/cpal device name, `default`, FILE.wav, or `none` (only wyoming.satellites listen).
        #[arg(long, value_name = "DEV|FILE.wav")]
        input: Option<String>,
        /// Output: a device name, `default`, FILE.wav, or paced:FILE.wav (real time).
        #[arg(long, value_name = "DEV|FILE.wav")]
        output: Option<String>,
        /// Button: none, enter, gpio:/dev/gpiochip0:17, input:/dev/input/eventN:KEY, script:PATH.
        #[arg(long, value_name = "SPEC")]
        button: Option<String>,
        /// Listen only while the button is held.
        #[arg(long)]
        push_to_talk: bool,
        /// Don't let speech interrupt the answer (a press still does).
        #[arg(long)]
        no_barge_in: bool,
        /// Print one JSON line per turn (text, answer, stage timings).
        #[arg(long)]
        json: bool,
        /// What opens the microphone: wake (the wake word or a press),
        /// button, or always (every sentence); over EARSHOT_WAKE_MODE and [wake] mode.
        #[arg(long, value_name = "MODE")]
        wake: Option<String>,
    },
    /// Mute or unmute the running `earshot run` (on, off, toggle, status; default toggle).
    Mute {
        #[arg(value_name = "on|off|toggle|status")]
        action: Option<String>,
    },
    /// Speak TEXT with the configured voice (Piper, espeak-ng, cloud).
    Say {
        text: String,
        /// Write a WAV file instead of playing it.
        #[arg(long, value_name = "FILE.wav")]
        out: Option<PathBuf>,
        /// Use only this engine: piper, espeak or cloud.
        #[arg(long)]
        engine: Option<earshot::tts::Engine>,
        /// Print engine and timings as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Evaluate on-device understanding.
    Eval {
        #[command(subcommand)]
        what: EvalWhat,
    },
    /// Run one agent tool directly and print its result, e.g.
    /// `earshot tool calculator '{"expression":"2**10"}'`.
    Tool {
        /// calculator, web_search, add_todo, list_todos, complete_todo,
        /// delete_todo, search_conversations, set_timer, list_timers,
        /// cancel_timer, extend_timer, set_alarm or set_reminder.
        name: String,
        /// The arguments as one JSON object (default `{}`).
        args: Option<String>,
    },
    /// Apps through Composio: `apps links` lists the links that connect an account.
    Apps {
        #[command(subcommand)]
        action: earshot::cli::apps::AppsCommand,
    },
    /// Timers, alarms and reminders: list, add (--in 5m | --at 07:00), cancel; watch rings them here.
    Timers {
        #[command(subcommand)]
        action: earshot::cli::timers::TimersCommand,
    },
    /// Transcribe a WAV file (or --input DEVICE) with the configured STT.
    Transcribe(earshot::cli::transcribe::TranscribeArgs),
    /// List audio inputs and outputs with the names audio.input/output accept.
    Devices {
        #[arg(long)]
        json: bool,
    },
    /// Add documents (txt, md, pdf) to the knowledge base: --plan writes the analysis for review, --apply builds vectors.
    Ingest(earshot::cli::ingest::IngestArgs),
    /// The knowledge base: search (with every retrieval step), list documents.
    Knowledge {
        #[command(subcommand)]
        action: earshot::cli::knowledge::KnowledgeCommand,
    },
    /// Recent turns with latencies, route, intent, memories, retrieval and models.
    Log(earshot::cli::log::LogArgs),
    /// Mark an answer not_helpful or error (errors go first in the review queue).
    Feedback(earshot::cli::feedback::FeedbackArgs),
    /// `review queue`, or score a turn with the rubric (the verdict is computed).
    Review(earshot::cli::review::ReviewArgs),
    /// Export turns with their full context as CSV or JSON lines.
    Export(earshot::cli::export::ExportArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// The intent tree: validate a tree file or run a turn through it.
    Tree {
        #[command(subcommand)]
        action: TreeAction,
    },
}

#[derive(Subcommand)]
enum TreeAction {
    /// Validate a tree and the user's examples files (exit 1 with one line per problem).
    Check {
        /// The tree file; default: `[tree] file` of the config, else the shipped tree.
        file: Option<PathBuf>,
        /// The directory of `<set>.txt` examples files; default: `$STATE_DIR/intents`.
        #[arg(long)]
        intents: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Run one turn through a tree file.
    Run {
        file: PathBuf,
        text: String,
        /// Skip state-changing actions and LLM calls; save nothing.
        #[arg(long)]
        dry_run: bool,
        /// Continue this conversation (its phase and state).
        #[arg(long)]
        conversation: Option<i64>,
        /// Print the R-SSE events and a final trace line as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum EvalWhat {
    /// Intent classification: accuracy, threshold sweep, latency (CLINC150 via --clinc).
    Intents(earshot::cli::eval::IntentsArgs),
    /// Knowledge retrieval: precision, recall, F1, latency, tier spread, diversity.
    Retrieval(earshot::cli::eval_retrieval::RetrievalArgs),
    /// The wake word: false rejects on clips with it, false accepts per hour without.
    Wake(earshot::cli::eval_wake::EvalWakeArgs),
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Local STT vs whisper.cpp's default decoding, clip by clip.
    Stt(earshot::cli::bench_stt::BenchSttArgs),
    /// First complete sentence → first audio queued, through the real speaker.
    Speak(earshot::cli::bench_speak::BenchSpeakArgs),
    /// The on-device LLM side by side with a plain llama-server, then open questions.
    Llm(earshot::cli::bench_llm::BenchLlmArgs),
    /// End of speech → first answer audio, through a real `earshot run` paced in real time.
    Latency(earshot::cli::bench_latency::BenchLatencyArgs),
    /// The in-process wake word side by side with wyoming-openwakeword.
    Wake(earshot::cli::bench_wake::BenchWakeArgs),
    /// The stop word and the wake word during playback: latency and false triggers.
    Stop(earshot::cli::bench_stop::BenchStopArgs),
}

#[derive(Subcommand)]
enum ConfigAction {
    /// Print the effective config (secrets masked) and where each value came from.
    Show {
        #[arg(long)]
        json: bool,
    },
}

fn earshot_version() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (",
        env!("EARSHOT_GIT_HASH"),
        "; features: ",
        env!("EARSHOT_FEATURES"),
        ")"
    )
}

fn main() -> ExitCode {
    // `earshot … | head` should end quietly like any Unix tool, not panic
    // on a closed pipe: restore the default SIGPIPE action Rust ignores.
    // SAFETY: called first thing in main, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // At most two malloc arenas: glibc gives every thread that allocates
    // its own arena (up to 8 per core), and the model runtimes' threads
    // then keep their peaks apart; `earshot run`'s RSS grew by ~120 MB
    // more over 20 turns without this (notes/latency.md).
    // A value the user set through GLIBC_TUNABLES wins.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max")) {
        // SAFETY: mallopt before any thread exists only sets a malloc option.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
    // Large blocks come from mmap and go back when freed: glibc's sliding
    // threshold otherwise rises to the largest block ever freed (up to
    // 32 MB), so whisper's per-pass buffers and ONNX Runtime's activations
    // stayed in the heap as resident memory until the next trim. Peak RSS
    // of `earshot bench latency` 404–411 → 316–328 MB (notes/latency.md).
    // A value the user set through GLIBC_TUNABLES wins.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold")) {
        // SAFETY: as above, one thread, a malloc option.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, earshot::memtrim::MMAP_THRESHOLD);
        }
    }
    // ONNX Runtime 1.31 on Linux keeps a device id and telemetry events
    // in ~/.cache/Microsoft/DeveloperTools/.onnxruntime for upload to
    // Microsoft's collector, whatever its API's DisableTelemetryEvents
    // says (strace: it opens that database in every `earshot run`). A
    // private device sends nothing; a value the user set wins.
    if std::env::var_os("ORT_DISABLE_TELEMETRY").is_none() {
        // Still one thread here: nothing reads the environment meanwhile.
        std::env::set_var("ORT_DISABLE_TELEMETRY", "1");
    }
    let cli = Cli::parse();
    // Long-running services log progress; one-shot commands only warnings.
    let service = matches!(
        cli.command,
        Command::Run { .. } | Command::Serve { .. } | Command::Wyoming { .. }
    );
    let service = service || matches!(cli.command, Command::Esphome { .. });
    earshot::telemetry::init_logging(cli.verbose, service);
    let config = cli.config.as_deref();
    let result: anyhow::Result<bool> = match cli.command {
        Command::Chat {
            text,
            conversation,
            mode,
            json,
        } => earshot::cli::chat::run(config, text, conversation, mode.as_deref(), json),
        Command::Route { text, json } => {
            earshot::cli::route::run(config, &text, json).map(|_| true)
        }
        Command::Memory { action } => earshot::cli::memory::run(config, action),
        Command::Calendar { action } => earshot::cli::calendar::run(config, action),
        Command::History { id, json } => earshot::cli::history::run(config, id, json).map(|_| true),
        Command::Doctor { json } => earshot::cli::doctor::run(config, json),
        Command::Serve { bind } => earshot::cli::serve::run(config, bind),
        Command::Mute { action } => earshot::cli::mute::run(config, action),
        Command::Wyoming { action } => earshot::cli::wyoming::run(config, action),
        Command::Esphome { action } => earshot::cli::esphome::run(config, action),
        Command::Run {
            input,
            output,
            button,
            push_to_talk,
            no_barge_in,
            json,
            wake,
        } => earshot::cli::run::run(
            config,
            earshot::cli::run::RunArgs {
                input,
                output,
                button,
                push_to_talk,
                no_barge_in,
                json,
                wake,
            },
        ),
        Command::Say {
            text,
            out,
            engine,
            json,
        } => earshot::cli::say::run(config, &text, out, engine, json),
        Command::Eval { what } => match what {
            EvalWhat::Intents(args) => earshot::cli::eval::intents(config, args),
            EvalWhat::Retrieval(args) => earshot::cli::eval_retrieval::run(config, args),
            EvalWhat::Wake(args) => earshot::cli::eval_wake::run(config, args),
        },
        Command::Tool { name, args } => earshot::cli::tool::run(config, &name, args.as_deref()),
        Command::Timers { action } => earshot::cli::timers::run(config, action),
        Command::Apps { action } => earshot::cli::apps::run(config, action),
        Command::Transcribe(args) => earshot::cli::transcribe::run(config, args),
        Command::Devices { json } => earshot::cli::devices::run(config, json),
        Command::Tree { action } => match action {
            TreeAction::Check {
                file,
                intents,
                json,
            } => earshot::cli::tree::check_file(config, file.as_deref(), intents.as_deref(), json),
            TreeAction::Run {
                file,
                text,
                dry_run,
                conversation,
                json,
            } => earshot::cli::tree::run(config, &file, &text, conversation, dry_run, json),
        },
        Command::Ingest(args) => earshot::cli::ingest::run(config, args),
        Command::Knowledge { action } => earshot::cli::knowledge::run(config, action),
        Command::Log(args) => earshot::cli::log::run(config, args),
        Command::Feedback(args) => earshot::cli::feedback::run(config, args),
        Command::Review(args) => earshot::cli::review::run(config, args),
        Command::Export(args) => earshot::cli::export::run(config, args),
        Command::Bench { what } => match what {
            BenchWhat::Stt(args) => earshot::cli::bench_stt::run(config, args),
            BenchWhat::Speak(args) => earshot::cli::bench_speak::run(config, args),
            BenchWhat::Llm(args) => earshot::cli::bench_llm::run(config, args),
            BenchWhat::Latency(args) => earshot::cli::bench_latency::run(config, args),
            BenchWhat::Wake(args) => earshot::cli::bench_wake::run(config, args),
            BenchWhat::Stop(args) => earshot::cli::bench_stop::run(config, args),
        },
        Command::Config { action } => match action {
            ConfigAction::Show { json } => {
                earshot::cli::config_cmd::show(config, json).map(|_| true)
            }
        },
    };
    let code: u8 = match result {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            // One line: the outermost context and its cause.
            let mut message = e.to_string();
            if let Some(cause) = e.chain().nth(1) {
                message = format!("{message}: {cause}");
            }
            eprintln!("earshot: {}", message.replace('\n', " "));
            2
        }
    };
    exit_now(code)
}

/// End the process without running C/C++ static destructors.
///
/// Some native work runs on threads nobody joins: whisper.cpp's next clean
/// state is built in the background after every pass, a speaker thread may
/// be inside Piper, the memory worker inside ONNX Runtime. When `main`
/// returns, `exit()` tears down ggml's and ONNX Runtime's globals under
/// those threads' feet — seen as a SIGSEGV at the very end of `earshot
/// run` with satellites. Everything that must last is already durable
/// (SQLite commits each turn; files are renamed into place), and every
/// command has joined the threads whose work matters, so after flushing
/// our own output `_exit` is the safe way out.
fn exit_now(code: u8) -> ExitCode {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` only ends the process; output is flushed above.
    unsafe { libc::_exit(i32::from(code)) }
}
