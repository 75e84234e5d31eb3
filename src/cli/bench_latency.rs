//! `earshot bench latency`: end of speech → first answer audio, as a person
//! feels it, measured from outside the voice loop (issue 21, point 1).
//!
//! The bench starts a real `earshot run` as a child process and talks to
//! it the way a room does:
//! - **The microphone** is ALSA's file plugin reading a FIFO that this
//!   process feeds at the sample rate, 20 ms at a time: silence, then each
//!   utterance (spoken by the local TTS, resampled to 16 kHz). The instant
//!   the last voiced sample of an utterance is written is its end of speech.
//! - **The speaker** is `paced:FILE.wav` (written in real time, like a
//!   loudspeaker); the bench tails the file and times the first non-silent
//!   sample of each answer.
//! - **The LLM** is a stub on a loopback port that speaks the OpenAI chat
//!   wire format and answers after a fixed delay, so open questions measure
//!   earshot, not a cloud.
//!
//! The child's `--json` turn line says where, after the VAD's end, the
//! transcript, the decision and the first audio were; anchored on the first
//! audio measured here, those give each stage counted from the end of
//! speech. The loop runs with `[wake] mode = "always"` (the wake word's own
//! latency is the hands-free issue's figure); `--wake` runs it with its
//! wake word instead, the detector's models loaded (issue 21's memory
//! figure is taken that way), and says a recorded wake word before each
//! utterance. The child runs the STT
//! model and weights and the endpointing (`[audio.vad]`) of the config
//! given here, so `--config` compares settings side by side.
//!
//! `--stop N` adds the stop word as the hands-free issue measures it: N
//! rounds of a question the stub answers at length, "stop" (in a few
//! phrasings) said 1.2 s into the answer's sound, and the time from the
//! word's last voiced sample leaving the microphone to the speaker file's
//! last loud sample.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::audio::SAMPLE_RATE;

/// The default utterances: device commands and open questions.
pub const DEFAULT_UTTERANCES: &str = include_str!("../../benches/latency-utterances.txt");

/// A sample at least this loud is sound (≈ −34 dBFS).
const AUDIBLE: f32 = 0.02;
/// 20 ms of 16 kHz audio per FIFO write.
const CHUNK: usize = 320;
/// Longest wait for one turn's answer.
const TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// The output is quiet again after this long without a new sample.
const QUIET_AFTER: Duration = Duration::from_millis(900);

/// Arguments of `earshot bench latency`.
#[derive(Debug, clap::Args)]
pub struct BenchLatencyArgs {
    /// One utterance per line (default: the shipped set of commands and
    /// open questions).
    #[arg(long, value_name = "FILE")]
    pub utterances: Option<PathBuf>,
    /// Hold one core with an unrelated busy process while measuring.
    #[arg(long)]
    pub busy_core: bool,
    /// The stub LLM's delay before its first sentence, in ms.
    #[arg(long, default_value_t = 300)]
    pub llm_delay_ms: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Say the set this many times (memory over many turns: `--rounds 10`
    /// is 100 turns of the default set).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Copy the voice loop's log here (`EARSHOT_LOG=debug` shows each
    /// speculative transcript).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// After the set, this many rounds of "stop" said over a long answer:
    /// from the stop word's last voiced sample to the speaker going
    /// silent (issue 17, point 5), measured on the same paced capture.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub stop: usize,
    /// Run the loop with its wake word (`[wake] mode = "wake"`, the
    /// in-process detector and its models loaded) and say the wake word
    /// before each utterance: a real recording, `oww-hey_jarvis.wav` in
    /// `models_dir`, then half a second of silence. For issue 21's memory
    /// figure, which is taken with the wake-word models loaded; times are
    /// still counted from the end of the utterance.
    #[arg(long)]
    pub wake: bool,
}

/// The wake word said before each utterance with `--wake`, and the
/// silence after it.
const WAKE_RECORDING: &str = "oww-hey_jarvis.wav";
const AFTER_WAKE: Duration = Duration::from_millis(500);

/// What the stop rounds ask (the stub answers it at length) and say over
/// the answer, in turn.
const STOP_QUESTION: &str = "Tell me a story about the sea.";
const STOP_WORDS: &[&str] = &["Stop.", "Stop!", "Okay, stop.", "Enough.", "Stop it."];
/// How long into the answer's sound the stop word starts.
const STOP_AFTER: Duration = Duration::from_millis(1200);
/// Playback has gone silent when nothing loud was written for this long.
const SILENT_FOR: Duration = Duration::from_millis(600);

/// One measured utterance.
#[derive(Debug, Clone)]
struct Measured {
    text: String,
    kind: &'static str,
    endpoint_ms: Option<f64>,
    transcript_ms: Option<f64>,
    decision_ms: Option<f64>,
    first_audio_ms: Option<f64>,
    transcript: String,
    actions: Vec<String>,
    /// How the voice loop found the end (`early`, `silence`, …) and
    /// whether it reused the transcript made at a pause.
    endpoint: Value,
    /// How long before the turn asked its LLM request had been begun (at
    /// the pause, `agent::predict::begin_llm_answer`); `None` when the
    /// turn sent its own or asked no model.
    llm_begun_early_ms: Option<f64>,
}

pub fn run(config_path: Option<&Path>, args: BenchLatencyArgs) -> Result<bool> {
    let loaded = super::load_config(config_path)?;
    let config = loaded.config;
    let texts: Vec<String> = match &args.utterances {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the utterances file {}", path.display()))?,
        None => DEFAULT_UTTERANCES.to_string(),
    }
    .lines()
    .map(str::trim)
    .filter(|l| !l.is_empty() && !l.starts_with('#'))
    .map(String::from)
    .collect();
    if texts.is_empty() {
        bail!("the utterances file has no lines; put one sentence per line");
    }

    // Speak every utterance first (the local TTS), so synthesis never
    // overlaps a measurement.
    let mut tts = crate::app::tts(&config);
    if tts.engine_names().is_empty() {
        bail!(
            "no text-to-speech engine is available to speak the utterances ({}); run scripts/fetch-piper.sh",
            tts.skipped.join("; ")
        );
    }
    let mut spoken = Vec::new();
    for line in std::iter::once("Hello there.".to_string()).chain(texts.iter().cloned()) {
        let mut samples = Vec::new();
        for part in parts(&line) {
            match part {
                Part::Words(words) => {
                    let clip = tts
                        .synthesize(&words)
                        .map_err(|e| anyhow!("cannot speak {words:?}: {e}"))?
                        .clip
                        .resampled(SAMPLE_RATE);
                    // Only the sounding part: a pause is what the line says.
                    let end = speech_end(&clip.samples).unwrap_or(0);
                    samples.extend_from_slice(&clip.samples[..end]);
                }
                Part::Pause(ms) => samples.extend(std::iter::repeat_n(
                    0.0,
                    (ms * u64::from(SAMPLE_RATE) / 1000) as usize,
                )),
            }
        }
        let end = speech_end(&samples).ok_or_else(|| anyhow!("{line:?} came out silent"))?;
        samples.extend(std::iter::repeat_n(0.0, SAMPLE_RATE as usize / 5));
        spoken.push((words_of(&line), samples, end));
    }
    let mut stop_clips = Vec::new();
    if args.stop > 0 {
        for line in std::iter::once(STOP_QUESTION).chain(STOP_WORDS.iter().copied()) {
            let clip = tts
                .synthesize(line)
                .map_err(|e| anyhow!("cannot speak {line:?}: {e}"))?
                .clip
                .resampled(SAMPLE_RATE);
            let end =
                speech_end(&clip.samples).ok_or_else(|| anyhow!("{line:?} came out silent"))?;
            let mut samples = clip.samples[..end].to_vec();
            samples.extend(std::iter::repeat_n(0.0, SAMPLE_RATE as usize / 5));
            stop_clips.push((line.to_string(), samples, end));
        }
    }
    drop(tts);
    if args.wake {
        let path = config.models_dir.join(WAKE_RECORDING);
        let (word, _) = crate::audio::wav::read_16k_mono(&path, None)
            .context("--wake needs the wake word's recording; run scripts/fetch-wake.sh")?;
        let gap = (AFTER_WAKE.as_millis() as usize) * SAMPLE_RATE as usize / 1000;
        // Every request, and the stop rounds' question (the stop words
        // themselves are heard during the answer, without a wake word).
        for (i, (_, samples, end)) in spoken
            .iter_mut()
            .chain(stop_clips.iter_mut().take(1))
            .enumerate()
        {
            // The detector hears ~2 s of history before it can fire; the
            // warm-up comes right after the loop starts listening.
            let lead = if i == 0 { 2 * SAMPLE_RATE as usize } else { 0 };
            let mut with_word = vec![0.0; lead];
            with_word.extend_from_slice(&word);
            with_word.extend(std::iter::repeat_n(0.0, gap));
            *end += with_word.len();
            with_word.append(samples);
            *samples = with_word;
        }
    }

    // ALSA closes and reopens the FIFO (probing, then the stream): a write
    // that meets no reader must be an error here, not a signal that ends us.
    // SAFETY: ignoring SIGPIPE process-wide has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let work = WorkDir::create()?;
    let llm = StubLlm::start(Duration::from_millis(args.llm_delay_ms))?;
    let mic_path = work.path().join("mic.fifo");
    make_fifo(&mic_path)?;
    let out_path = work.path().join("out.wav");
    let asound = work.path().join("asound.conf");
    std::fs::write(&asound, alsa_capture_config(&mic_path))
        .with_context(|| format!("cannot write {}", asound.display()))?;
    let child_config = work.path().join("earshot.toml");
    std::fs::write(
        &child_config,
        format!(
            "[stt]\norder = \"local-only\"\nwhisper_model = {}\nwhisper_weights = \"{}\"\nthreads = {}\n\
             [llm]\nbase_url = \"{}/v1\"\napi_key = \"bench-stub\"\norder = [\"remote\"]\n\
             [wake]\nfollow_up_ms = 0\n\
             [audio.vad]\n{}",
            toml::Value::String(config.stt.whisper_model.clone()),
            match config.stt.whisper_weights {
                crate::stt::Weights::Q8_0 => "q8_0",
                crate::stt::Weights::File => "file",
            },
            config.stt.threads,
            llm.url(),
            // The endpointing under test is the one configured here.
            toml::to_string(&config.audio.vad).context("cannot write [audio.vad]")?
        ),
    )
    .context("cannot write the bench's config")?;
    let models_dir = std::fs::canonicalize(&config.models_dir).unwrap_or(config.models_dir.clone());

    let _busy = if args.busy_core {
        Some(BusyCore::start()?)
    } else {
        None
    };
    let exe = std::env::current_exe().context("cannot find the earshot binary")?;
    // A first start on a fresh state directory (the database is created,
    // the classifiers' example embeddings computed and cached), on a
    // second of silence; the measured run then starts as a device
    // restarts: models in the page cache, its state kept.
    let first_start_ms = first_start(&exe, &work, &child_config, &models_dir)?;
    let mic = PacedMic::start(&mic_path);
    let spawned = Instant::now();
    let mut child = ChildGuard(
        Command::new(&exe)
            .arg("--config")
            .arg(&child_config)
            .args(["run", "--input", "default", "--no-barge-in", "--json"])
            .arg("--output")
            .arg(format!("paced:{}", out_path.display()))
            .env("EARSHOT_STATE_DIR", work.path().join("state"))
            .env("EARSHOT_MODELS_DIR", &models_dir)
            .env(
                "EARSHOT_WAKE_MODE",
                if args.wake { "wake" } else { "always" },
            )
            // The bench waits for the loop's "listening" line.
            .env("EARSHOT_LOG", child_log_filter())
            .env("ALSA_CONFIG_PATH", &asound)
            .env_remove("EARSHOT_CONFIG")
            .env_remove("GROQ_API_KEY")
            .env_remove("LLM_BASE_URL")
            .env_remove("EARSHOT_LLM_ORDER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start `earshot run`")?,
    );
    let turns = lines_of(child.0.stdout.take());
    let logs = lines_of(child.0.stderr.take());
    wait_for_line(&logs, "listening", Duration::from_secs(120))
        .context("`earshot run` did not start listening")?;
    let cold_start_ms = ms(spawned.elapsed());
    let pid = child.0.id();
    let rss_after_start = rss_mb(pid, "VmRSS");
    let mut log_file = match &args.log {
        Some(path) => Some(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create the log file {}", path.display()))?,
        ),
        None => None,
    };
    // Drained as it comes (with or without a file), so the pipe never fills.
    std::thread::spawn(move || {
        for line in logs {
            if let Some(f) = log_file.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    });

    let mut results = Vec::new();
    let rounds = args.rounds.max(1);
    let mut rss_after_round = Vec::new();
    // After every turn: the RSS, and the peak so far (VmHWM), so a long
    // run shows when memory grew, not only that it did.
    let mut rss_after_turn = Vec::new();
    let mut peak_after_turn = Vec::new();
    let mut timers_cleared = 0;
    for (i, (text, samples, end)) in std::iter::once(&spoken[0])
        .chain((0..rounds).flat_map(|_| spoken[1..].iter()))
        .enumerate()
    {
        let warm_up = i == 0;
        let m = measure(&mic, &out_path, &turns, text, samples, *end)?;
        if !warm_up {
            if !args.json {
                print_row(&m);
            }
            results.push(m);
            rss_after_turn.push(rss_mb(pid, "VmRSS"));
            peak_after_turn.push(rss_mb(pid, "VmHWM"));
            if results.len() % (spoken.len() - 1) == 0 {
                rss_after_round.push(rss_mb(pid, "VmRSS"));
                // Each round starts as the first did: the timers a round
                // set would otherwise ring ten minutes into a long run,
                // and a ringing loop listens for "stop", not requests.
                timers_cleared +=
                    cancel_timers(&exe, &child_config, &work.path().join("state"), &models_dir)?;
            }
        }
    }
    let mut stops = Vec::new();
    if let Some((question, rest)) = stop_clips.split_first() {
        for round in 0..args.stop {
            let word = &rest[round % rest.len()];
            let latency = measure_stop(&mic, &out_path, &turns, question, word)?;
            if !args.json {
                let show = latency.map_or("missed".into(), |v| format!("{v:.0} ms"));
                println!(
                    "stop round {round}: {:?} over the answer → silent after {show}",
                    word.0
                );
            }
            stops.push(latency);
        }
    }
    drop(mic);
    let rss_peak = rss_mb(pid, "VmHWM");
    let rss_end = rss_mb(pid, "VmRSS");
    drop(child);

    let load = if args.busy_core { "busy" } else { "quiet" };
    let heard: Vec<f64> = stops.iter().flatten().copied().collect();
    let (stop_p50, stop_p95) = percentiles(heard.iter().copied());
    let stop_report = json!({
        "rounds": stops.len(),
        "heard": heard.len(),
        "missed": stops.len() - heard.len(),
        "p50_ms": stop_p50,
        "p95_ms": stop_p95,
        "max_ms": heard.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
        "latencies_ms": stops,
    });
    let (p50, p95) = percentiles(results.iter().filter_map(|m| m.first_audio_ms));
    let by_kind = |kind: &str| {
        let (p50, p95) = percentiles(
            results
                .iter()
                .filter(|m| m.kind == kind)
                .filter_map(|m| m.first_audio_ms),
        );
        json!({"p50_ms": p50, "p95_ms": p95})
    };
    if args.json {
        super::print_json(&json!({
            "load": load,
            "wake": args.wake,
            "utterances": results.iter().map(|m| json!({
                "text": m.text, "kind": m.kind,
                "endpoint_ms": m.endpoint_ms, "transcript_ms": m.transcript_ms,
                "decision_ms": m.decision_ms, "first_audio_ms": m.first_audio_ms,
                "transcript": m.transcript, "actions": m.actions,
                "endpoint": m.endpoint, "llm_begun_early_ms": m.llm_begun_early_ms,
            })).collect::<Vec<_>>(),
            "p50_ms": p50, "p95_ms": p95,
            "by_kind": {"command": by_kind("command"), "open": by_kind("open")},
            "turns": results.len(),
            "cold_start_ms": cold_start_ms,
            "first_start_ms": first_start_ms,
            "rss_mb": {"after_start": rss_after_start, "peak": rss_peak, "end": rss_end,
                       "after_each_round": rss_after_round,
                       "after_each_turn": rss_after_turn,
                       "peak_after_each_turn": peak_after_turn},
            "timers_cancelled_between_rounds": timers_cleared,
            "stop": if args.stop > 0 { stop_report.clone() } else { Value::Null },
        }));
    } else {
        let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        println!(
            "\n{load}: speech end → first answer audio p50 {} ms · p95 {} ms (commands: {}, open: {})",
            show(p50),
            show(p95),
            by_kind("command"),
            by_kind("open")
        );
        println!(
            "{} turns · cold start {cold_start_ms:.0} ms (first start, fresh state: {first_start_ms:.0} ms) · RSS after start {} MB, peak {} MB, at the end {} MB",
            results.len(),
            show(rss_after_start),
            show(rss_peak),
            show(rss_end)
        );
        if args.stop > 0 {
            println!("stop word over an answer → speaker silent: {stop_report}");
        }
    }
    Ok(results.iter().all(|m| m.first_audio_ms.is_some()))
}

/// Cancel every timer, alarm and reminder in the bench's state directory
/// through the CLI (the running loop notices rows another process
/// cancelled); returns how many.
fn cancel_timers(exe: &Path, config: &Path, state: &Path, models_dir: &Path) -> Result<usize> {
    let cli = |args: &[&str]| -> Result<String> {
        let out = Command::new(exe)
            .arg("--config")
            .arg(config)
            .arg("timers")
            .args(args)
            .env("EARSHOT_STATE_DIR", state)
            .env("EARSHOT_MODELS_DIR", models_dir)
            .env_remove("EARSHOT_CONFIG")
            .env("EARSHOT_LOG", "error")
            .stdin(Stdio::null())
            .output()
            .context("cannot run `earshot timers`")?;
        if !out.status.success() {
            bail!(
                "`earshot timers {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let listed: Value = serde_json::from_str(&cli(&["list", "--json"])?)
        .context("`earshot timers list --json` printed something that is not JSON")?;
    let ids: Vec<String> = listed
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| match &r["id"] {
                    Value::Number(n) => Some(n.to_string()),
                    Value::String(s) => Some(s.clone()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for id in &ids {
        cli(&["cancel", id])?;
    }
    Ok(ids.len())
}

/// Start `earshot run` once on a second of silence with the bench's
/// state directory, and return the time from exec to its "listening" line
/// (ms). It ends by itself at the end of the input.
fn first_start(exe: &Path, work: &WorkDir, config: &Path, models_dir: &Path) -> Result<f64> {
    let silence = work.path().join("silence.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: SAMPLE_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut wav = hound::WavWriter::create(&silence, spec)
        .with_context(|| format!("cannot write {}", silence.display()))?;
    for _ in 0..SAMPLE_RATE {
        wav.write_sample(0i16)?;
    }
    wav.finalize()?;
    let started = Instant::now();
    let mut child = ChildGuard(
        Command::new(exe)
            .arg("--config")
            .arg(config)
            .args(["run", "--no-barge-in", "--input"])
            .arg(&silence)
            .arg("--output")
            .arg(work.path().join("first-start.wav"))
            .env("EARSHOT_STATE_DIR", work.path().join("state"))
            .env("EARSHOT_MODELS_DIR", models_dir)
            .env("EARSHOT_WAKE_MODE", "always")
            .env("EARSHOT_LOG", child_log_filter())
            .env_remove("EARSHOT_CONFIG")
            .env_remove("GROQ_API_KEY")
            .env_remove("LLM_BASE_URL")
            .env_remove("EARSHOT_LLM_ORDER")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start `earshot run`")?,
    );
    let logs = lines_of(child.0.stderr.take());
    wait_for_line(&logs, "listening", Duration::from_secs(120))
        .context("`earshot run` did not start listening on its first start")?;
    let ms = ms(started.elapsed());
    // Its warm-up and caches finish before it ends on its own.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.0.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(ms)
}

/// Say one utterance and time its answer.
fn measure(
    mic: &PacedMic,
    out: &Path,
    turns: &mpsc::Receiver<String>,
    text: &str,
    samples: &[f32],
    end: usize,
) -> Result<Measured> {
    // Anything left from the last turn is drained first.
    while turns.try_recv().is_ok() {}
    let mut tail = Tail::at_end(out);
    let speech_end = mic.say(samples, end)?;
    let mut first_audio = None;
    let mut last_sound = Instant::now();
    let mut turn: Option<Value> = None;
    let deadline = Instant::now() + TURN_TIMEOUT;
    loop {
        if let Some(at) = tail.poll(AUDIBLE) {
            if first_audio.is_none() && at > speech_end {
                first_audio = Some(at);
            }
        }
        if tail.grew() {
            last_sound = Instant::now();
        }
        if turn.is_none() {
            if let Ok(line) = turns.try_recv() {
                turn = serde_json::from_str(&line).ok();
            }
        }
        if turn.is_some() && last_sound.elapsed() > QUIET_AFTER {
            break;
        }
        if Instant::now() > deadline {
            tracing::warn!("no answer to {text:?} within {} s", TURN_TIMEOUT.as_secs());
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let turn = turn.unwrap_or(Value::Null);
    let first_audio_ms = first_audio.map(|at| ms(at.duration_since(speech_end)));
    let after = |key: &str| turn["after_vad_end_ms"][key].as_f64();
    // The VAD's end, placed by the first audio measured here.
    let endpoint_ms = match (first_audio_ms, after("first_audio")) {
        (Some(outside), Some(inside)) => Some(outside - inside),
        _ => None,
    };
    let plus = |v: Option<f64>| endpoint_ms.zip(v).map(|(a, b)| a + b);
    let route = turn["route"].as_str().unwrap_or("");
    // What the turn did, not the router's label: "Did I put eggs on the
    // list?" is labelled todo_add and answered in words, adding nothing.
    let actions: Vec<String> = turn["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Ok(Measured {
        text: text.to_string(),
        kind: if route == "tree" { "command" } else { "open" },
        endpoint_ms,
        transcript_ms: plus(after("stt_done")),
        decision_ms: plus(after("decision")),
        first_audio_ms,
        transcript: turn["text"].as_str().unwrap_or("").to_string(),
        actions,
        endpoint: turn["endpoint"].clone(),
        llm_begun_early_ms: turn["timings"]["llm_begun_early"].as_f64(),
    })
}

/// One stop round: ask `question` (the stub answers at length), say
/// `word` [`STOP_AFTER`] into the answer's sound, and time from the word's
/// last voiced sample leaving the microphone to the speaker file's last
/// loud sample before [`SILENT_FOR`] of quiet. `None` when the loop did
/// not stop the answer for the word (its turn line names the barge-in).
fn measure_stop(
    mic: &PacedMic,
    out: &Path,
    turns: &mpsc::Receiver<String>,
    question: &(String, Vec<f32>, usize),
    word: &(String, Vec<f32>, usize),
) -> Result<Option<f64>> {
    while turns.try_recv().is_ok() {}
    let mut tail = Tail::at_end(out);
    let asked = mic.say(&question.1, question.2)?;
    let deadline = Instant::now() + TURN_TIMEOUT;
    let sounding = loop {
        if let Some(at) = tail.poll(AUDIBLE) {
            if at > asked {
                break at;
            }
        }
        if Instant::now() > deadline {
            bail!(
                "no answer to {:?} within {} s",
                question.0,
                TURN_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if let Some(wait) = (sounding + STOP_AFTER).checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    let said = mic.say(&word.1, word.2)?;
    // Everything written up to now was still sounding when the word ended
    // (the paced speaker writes in real time).
    let mut last_loud = tail.poll(AUDIBLE).map(|_| said);
    let deadline = Instant::now() + TURN_TIMEOUT;
    loop {
        if let Some(at) = tail.poll(AUDIBLE) {
            last_loud = Some(at);
        }
        let quiet_since = last_loud.unwrap_or(said);
        if quiet_since.elapsed() > SILENT_FOR || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let turn = turns
        .recv_timeout(Duration::from_secs(10))
        .ok()
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .unwrap_or(Value::Null);
    // Let the loop settle before the next round.
    std::thread::sleep(Duration::from_millis(500));
    if turn["barge_in"].as_str() != Some("stop_word") {
        return Ok(None);
    }
    Ok(Some(
        last_loud.map_or(0.0, |at| ms(at.saturating_duration_since(said))),
    ))
}

/// The child's log filter: the caller's, with the voice loop at info at
/// least (its "listening" line is what the bench waits for).
fn child_log_filter() -> String {
    match std::env::var("EARSHOT_LOG").or_else(|_| std::env::var("RUST_LOG")) {
        // A filter that names the voice loop itself ("…voice_loop=debug")
        // is taken as it is: appending would override it.
        Ok(f) if f.contains("voice_loop") => f,
        Ok(f) if !f.trim().is_empty() => format!("{f},earshot::voice_loop=info"),
        _ => "info".into(),
    }
}

/// A memory figure of a process from `/proc/PID/status`, in MB.
fn rss_mb(pid: u32, key: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn print_row(m: &Measured) {
    let show = |v: Option<f64>| v.map_or("    -".into(), |v| format!("{v:>5.0}"));
    println!(
        "{:<8} endpoint {} transcript {} decision {} first audio {} ms  {:?} → {:?} {:?}",
        m.kind,
        show(m.endpoint_ms),
        show(m.transcript_ms),
        show(m.decision_ms),
        show(m.first_audio_ms),
        m.text,
        m.transcript,
        m.actions
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A piece of an utterance line: words to speak, or a pause written
/// `<pause MS>` ("Add batteries <pause 450> to my list.").
#[derive(Debug, PartialEq)]
enum Part {
    Words(String),
    Pause(u64),
}

fn parts(line: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find("<pause") {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let words = rest[..open].trim();
        if !words.is_empty() {
            out.push(Part::Words(words.to_string()));
        }
        let ms = rest[open + 6..open + close].trim().parse().unwrap_or(400);
        out.push(Part::Pause(ms));
        rest = &rest[open + close + 1..];
    }
    if !rest.trim().is_empty() {
        out.push(Part::Words(rest.trim().to_string()));
    }
    out
}

/// The words of a line, pauses left out.
fn words_of(line: &str) -> String {
    parts(line)
        .into_iter()
        .filter_map(|p| match p {
            Part::Words(w) => Some(w),
            Part::Pause(_) => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// p50 and p95 (nearest rank) of some figures; `None` when there are none.
fn percentiles(values: impl Iterator<Item = f64>) -> (Option<f64>, Option<f64>) {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return (None, None);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (Some(rank(0.5)), Some(rank(0.95)))
}

/// The index just past the last 10 ms frame that holds sound.
fn speech_end(samples: &[f32]) -> Option<usize> {
    let frame = (SAMPLE_RATE / 100) as usize;
    samples
        .chunks(frame)
        .enumerate()
        .filter(|(_, f)| f.iter().any(|s| s.abs() >= AUDIBLE))
        .map(|(i, f)| i * frame + f.len())
        .next_back()
}

fn make_fifo(path: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow!("{} holds a NUL byte", path.display()))?;
    // SAFETY: mkfifo on a fresh path in our own temp dir.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        bail!(
            "cannot create the FIFO {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// ALSA's default capture device: its file plugin reading `fifo` as raw
/// 16 kHz mono S16_LE.
fn alsa_capture_config(fifo: &Path) -> String {
    format!(
        "pcm.!default {{\n  type asym\n  capture.pcm {{ type plug slave {{ pcm {{ type file slave.pcm {{ type null }} infile \"{}\" file \"/dev/null\" format \"raw\" }} format S16_LE rate 16000 channels 1 }} }}\n  playback.pcm {{ type null }}\n}}\n",
        fifo.display()
    )
}

/// Lines a child writes on one of its pipes, on a channel.
fn lines_of(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

fn wait_for_line(lines: &mpsc::Receiver<String>, needle: &str, max: Duration) -> Result<()> {
    let deadline = Instant::now() + max;
    let mut last = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return Ok(()),
            Ok(line) => {
                last.push(line);
                if last.len() > 5 {
                    last.remove(0);
                }
            }
            Err(_) => bail!("its last lines: {}", last.join(" | ")),
        }
    }
}

/// A scratch directory, removed when the bench ends.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create() -> Result<WorkDir> {
        let dir =
            std::env::temp_dir().join(format!("earshot-bench-latency-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(WorkDir(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The child, killed when the bench ends however it ends.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // SIGTERM first (it stops cleanly), then kill.
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An unrelated process holding one core (`--busy-core`).
struct BusyCore(Child);

impl BusyCore {
    fn start() -> Result<BusyCore> {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .context("cannot start the busy process (sh)")?;
        Ok(BusyCore(child))
    }
}

impl Drop for BusyCore {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A microphone fed in real time through a FIFO.
struct PacedMic {
    say: mpsc::Sender<(Vec<i16>, usize, mpsc::Sender<Instant>)>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PacedMic {
    fn start(fifo: &Path) -> PacedMic {
        let (say, said) = mpsc::channel::<(Vec<i16>, usize, mpsc::Sender<Instant>)>();
        let stop = Arc::new(AtomicBool::new(false));
        let quit = stop.clone();
        let fifo = fifo.to_path_buf();
        let thread = std::thread::spawn(move || feed(&fifo, &said, &quit));
        PacedMic {
            say,
            stop,
            thread: Some(thread),
        }
    }

    /// Say `samples`; returns when its sample `end` (the end of speech)
    /// has been written, with that instant.
    fn say(&self, samples: &[f32], end: usize) -> Result<Instant> {
        let pcm: Vec<i16> = samples
            .iter()
            .map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16)
            .collect();
        let (tx, rx) = mpsc::channel();
        self.say
            .send((pcm, end, tx))
            .map_err(|_| anyhow!("the microphone feeder stopped"))?;
        rx.recv_timeout(Duration::from_secs(120))
            .map_err(|_| anyhow!("the voice loop stopped reading the microphone"))
    }
}

impl Drop for PacedMic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Write silence, or the utterance asked for, 20 ms at a time at the
/// sample rate; ALSA opens the capture file more than once (probing, then
/// the stream), so the FIFO is opened again whenever its reader closes it.
fn feed(
    fifo: &Path,
    said: &mpsc::Receiver<(Vec<i16>, usize, mpsc::Sender<Instant>)>,
    stop: &AtomicBool,
) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let start = Instant::now();
    let mut sent = 0usize;
    let mut pending: Option<(Vec<i16>, usize, usize, mpsc::Sender<Instant>)> = None;
    while !stop.load(Ordering::SeqCst) {
        let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        // SAFETY: clearing O_NONBLOCK on a descriptor this thread owns.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) };
        let mut file = file;
        while !stop.load(Ordering::SeqCst) {
            if pending.is_none() {
                if let Ok((pcm, end, reply)) = said.try_recv() {
                    pending = Some((pcm, end, 0, reply));
                }
            }
            let chunk: Vec<i16> = match &mut pending {
                Some((pcm, end, at, reply)) => {
                    let to = (*at + CHUNK).min(pcm.len());
                    let chunk = pcm[*at..to].to_vec();
                    if *at < *end && to >= *end {
                        // The end of speech leaves the FIFO with this write,
                        // at this chunk's real time plus its offset in it.
                        let when = start
                            + Duration::from_secs_f64((sent + (*end - *at)) as f64 / 16_000.0);
                        let _ = reply.send(when);
                    }
                    *at = to;
                    if to >= pcm.len() {
                        pending = None;
                    }
                    chunk
                }
                None => vec![0i16; CHUNK],
            };
            let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
            if file.write_all(&bytes).is_err() {
                break; // the reader closed it
            }
            sent += chunk.len();
            let at = start + Duration::from_secs_f64(sent as f64 / 16_000.0);
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
}

/// The paced output file, read as it is written.
struct Tail {
    path: PathBuf,
    /// Bytes of the file already looked at.
    offset: u64,
    grew: bool,
}

impl Tail {
    fn at_end(path: &Path) -> Tail {
        let offset = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        Tail {
            path: path.to_path_buf(),
            offset: offset.max(44),
            grew: false,
        }
    }

    /// Whether the last poll found new samples.
    fn grew(&self) -> bool {
        self.grew
    }

    /// Read what was written since the last poll; the instant, if any of
    /// it is at least `level` loud.
    fn poll(&mut self, level: f32) -> Option<Instant> {
        self.grew = false;
        let now = Instant::now();
        let mut file = std::fs::File::open(&self.path).ok()?;
        let len = file.metadata().ok()?.len();
        if len < self.offset {
            // Started again (a new file): from its data.
            self.offset = 44;
        }
        if len <= self.offset + 1 {
            return None;
        }
        file.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut buf = Vec::new();
        file.take((len - self.offset) & !1)
            .read_to_end(&mut buf)
            .ok()?;
        self.offset += buf.len() as u64;
        self.grew = !buf.is_empty();
        let loud = buf
            .chunks_exact(2)
            .any(|b| (f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0).abs() >= level);
        loud.then_some(now)
    }
}

/// A stand-in for the remote LLM: OpenAI chat completions on a loopback
/// port, the first sentence after `delay`, streamed or not as asked.
struct StubLlm {
    addr: std::net::SocketAddr,
}

/// What the stub says to every question.
const STUB_ANSWER: &[&str] = &[
    "Here is a short answer.",
    " It comes from the benchmark's stand-in model.",
];

/// What the stub says when asked for a story (the stop rounds).
const STUB_STORY: &[&str] = &[
    "Once upon a time a small boat sailed out of the harbour at dawn.",
    " The wind was steady and the sea was calm and grey.",
    " By noon the sailors could no longer see the land behind them.",
    " Then the clouds gathered and the waves grew tall and dark.",
    " They held on through the night and reached an island in the morning.",
];

impl StubLlm {
    fn start(delay: Duration) -> Result<StubLlm> {
        let listener =
            TcpListener::bind("127.0.0.1:0").context("cannot bind the stub LLM's port")?;
        let addr = listener.local_addr()?;
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = serve_one(stream, delay);
                });
            }
        });
        Ok(StubLlm { addr })
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn serve_one(mut stream: TcpStream, delay: Duration) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length.min(4 << 20)];
    reader.read_exact(&mut body)?;
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let classify = request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("Classify"));
    let stream_it = request["stream"].as_bool().unwrap_or(false);
    // A story is long, so a stop word has an answer to cut.
    let story = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|s| s.to_lowercase().contains("story"));
    let answer: &[&str] = if story { STUB_STORY } else { STUB_ANSWER };
    std::thread::sleep(delay);
    if classify || !stream_it {
        let content = if classify {
            "simple".to_string()
        } else {
            answer.concat()
        };
        let body = json!({
            "id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })
        .to_string();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        return Ok(());
    }
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    )?;
    for piece in answer {
        let chunk = json!({
            "id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "stub",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}],
        });
        write!(stream, "data: {chunk}\n\n")?;
        stream.flush()?;
    }
    let last = json!({
        "id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "stub",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    });
    write!(stream, "data: {last}\n\ndata: [DONE]\n\n")?;
    stream.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_ends_after_the_last_loud_frame() {
        let mut s = vec![0.0f32; 16_000];
        s[4_000] = 0.5;
        s[8_005] = -0.3;
        assert_eq!(speech_end(&s), Some(8_160));
        assert_eq!(speech_end(&[0.0; 800]), None);
    }

    #[test]
    fn a_line_may_hold_pauses() {
        assert_eq!(
            parts("Add batteries <pause 450> to my list."),
            vec![
                Part::Words("Add batteries".into()),
                Part::Pause(450),
                Part::Words("to my list.".into())
            ]
        );
        assert_eq!(
            parts("What time is it?"),
            vec![Part::Words("What time is it?".into())]
        );
        assert_eq!(
            words_of("Put <pause 600> batteries on my list."),
            "Put batteries on my list."
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let (p50, p95) = percentiles((1..=20).map(f64::from));
        assert_eq!((p50, p95), (Some(10.0), Some(19.0)));
        assert_eq!(percentiles(std::iter::empty()), (None, None));
    }

    #[test]
    fn the_stub_streams_the_openai_wire_format() {
        let llm = StubLlm::start(Duration::from_millis(10)).unwrap();
        let ask = |question: &str| {
            let body = format!(
                r#"{{"model":"m","stream":true,"messages":[{{"role":"system","content":"be brief"}},{{"role":"user","content":"{question}"}}]}}"#
            );
            let mut s = TcpStream::connect(llm.addr).unwrap();
            write!(
                s,
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let mut reply = String::new();
            s.read_to_string(&mut reply).unwrap();
            assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
            assert!(reply.trim_end().ends_with("data: [DONE]"), "{reply}");
            reply
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter(|l| *l != "[DONE]")
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|v| {
                    v["choices"][0]["delta"]["content"]
                        .as_str()
                        .map(String::from)
                })
                .collect::<String>()
        };
        assert_eq!(ask("hi"), STUB_ANSWER.concat());
        // The stop rounds' question gets the long answer to cut.
        assert_eq!(ask(STOP_QUESTION), STUB_STORY.concat());
    }
}
