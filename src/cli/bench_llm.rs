//! `earshot bench llm` (issue 20): the on-device model as earshot runs it
//! (`llm::local::LocalModel`: its supervised llama-server child, spoken to
//! by earshot's client) side by side with a plain `llama-server` started
//! here with its own defaults, on the same GGUF, threads, context and
//! prompt, in one run. The prompt is a voice turn: the no-tools system
//! prompt with its "Now:" line, 9 turns of history and a memory block;
//! then the conversation's next turn (10 turns: its prefix is cached).
//! Figures: time to the first token, generation tokens/s (content deltas
//! after the first, over the time after it), resident memory of each
//! server and of earshot itself. Then the questions file (50 everyday
//! open questions) through earshot's model, each answer printed for
//! reading.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::agent::prompts;
use crate::cancel::CancelToken;
use crate::llm::local::LocalModel;
use crate::llm::{ChatMessage, ChatModel, ChatRequest};

/// Arguments of `earshot bench llm`.
#[derive(Debug, clap::Args)]
pub struct BenchLlmArgs {
    /// Open questions, one a line (`#` comments).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "tests/data/llm_questions.txt"
    )]
    pub questions: PathBuf,
    /// Only the side-by-side figures.
    #[arg(long)]
    pub no_questions: bool,
    /// Conversations timed per side (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Tokens generated per timed answer.
    #[arg(long, default_value_t = 64)]
    pub tokens: u32,
    /// JSON objects instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One timed answer.
#[derive(Debug, Clone, Copy, Default)]
struct Timing {
    first_ms: f64,
    tokens_per_s: f64,
    tokens: usize,
}

const HISTORY: &[(&str, &str)] = &[
    ("Good morning.", "Good morning! How can I help you today?"),
    (
        "What's a quick breakfast idea?",
        "Try oats with banana and a spoon of peanut butter. It takes five minutes.",
    ),
    (
        "Is coffee bad for me?",
        "For most people a few cups a day is fine. Too much late in the day can hurt your sleep.",
    ),
    (
        "How long should I walk each day?",
        "About thirty minutes of brisk walking most days is a good target.",
    ),
    (
        "What's the capital of Spain?",
        "The capital of Spain is Madrid.",
    ),
    (
        "Tell me a fun fact.",
        "Octopuses have three hearts and blue blood.",
    ),
    (
        "How do I keep basil alive?",
        "Give it lots of sun, water when the top of the soil is dry, and pinch off the flowers.",
    ),
    (
        "What rhymes with cat?",
        "Hat, bat, mat and sat all rhyme with cat.",
    ),
    ("Thanks, that's helpful.", "You're welcome! Anything else?"),
    (
        "What's the tallest tree species?",
        "The coast redwood is the tallest, reaching over one hundred metres.",
    ),
    (
        "Why do we yawn?",
        "Nobody knows for sure; it may help cool the brain or signal tiredness.",
    ),
];

const MEMORY_BLOCK: &str = "Relevant context from your past conversations:\n- The user is vegetarian (created 2026-11-20)\n- The user's sister is called Anna (created 2026-11-28)\n- The user likes short answers (created 2026-12-01)";

/// The voice prompt of a conversation: system + `turns` of history
/// (starting at `offset`, so each run is a new conversation) + memory
/// block and question.
fn voice_messages(offset: usize, turns: usize, question: &str) -> Vec<ChatMessage> {
    let now = crate::device::clock::local(chrono::Utc::now());
    let mut m = vec![ChatMessage::system(prompts::with_now(
        prompts::no_tools(),
        &crate::device::clock::now_line(&now),
    ))];
    for i in 0..turns {
        let (q, a) = HISTORY[(offset + i) % HISTORY.len()];
        m.push(ChatMessage::user(q));
        m.push(ChatMessage::assistant(a));
    }
    m.push(ChatMessage::user(format!("{MEMORY_BLOCK}\n\n{question}")));
    m
}

fn request(messages: Vec<ChatMessage>, tokens: u32) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages,
        temperature: 0.0,
        max_completion_tokens: tokens,
        top_p: 1.0,
        tools: Vec::new(),
        stream: true,
    }
}

fn timing(started: Instant, token_times: &[Instant]) -> Timing {
    let (Some(first), Some(last)) = (token_times.first(), token_times.last()) else {
        return Timing::default();
    };
    let gen = last.duration_since(*first).as_secs_f64();
    Timing {
        first_ms: first.duration_since(started).as_secs_f64() * 1000.0,
        tokens_per_s: if gen > 0.0 {
            (token_times.len() - 1) as f64 / gen
        } else {
            0.0
        },
        tokens: token_times.len(),
    }
}

/// One answer through earshot's model; the text comes back too.
fn earshot_turn(model: &LocalModel, req: &ChatRequest) -> Result<(Timing, String)> {
    let mut times = Vec::new();
    let started = Instant::now();
    let response = model
        .chat(
            req,
            &mut |_| times.push(Instant::now()),
            &CancelToken::new(),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((timing(started, &times), response.content))
}

/// One answer from the plain server: raw HTTP, SSE read line by line.
fn plain_turn(base: &str, req: &ChatRequest) -> Result<(Timing, String)> {
    let mut body = req.to_json();
    body["max_tokens"] = json!(req.max_completion_tokens);
    let agent = crate::http::HttpSettings::with_deadline(Duration::from_secs(120)).agent();
    let started = Instant::now();
    let response = agent
        .post(format!("{base}/v1/chat/completions"))
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .context("the plain llama-server did not answer")?;
    let mut times = Vec::new();
    let mut text = String::new();
    for line in BufReader::new(response.into_body().into_reader()).lines() {
        let line = line?;
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data.trim() == "[DONE]" {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            if !c.is_empty() {
                times.push(Instant::now());
                text.push_str(c);
            }
        }
    }
    Ok((timing(started, &times), text))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// The plain llama-server, killed and reaped on drop.
struct Plain(Child);

impl Drop for Plain {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_plain(
    program: &Path,
    model: &Path,
    threads: usize,
    ctx: usize,
) -> Result<(Plain, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(program)
        .arg("-m")
        .arg(model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-t", &threads.to_string(), "-c", &ctx.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    let mut plain = Plain(child);
    let base = format!("http://127.0.0.1:{port}");
    let agent = crate::http::HttpSettings::with_deadline(Duration::from_secs(2)).agent();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = plain.0.try_wait() {
            bail!("the plain llama-server exited while loading ({status})");
        }
        if agent
            .get(format!("{base}/health"))
            .call()
            .is_ok_and(|r| r.status().as_u16() == 200)
        {
            return Ok((plain, base));
        }
        if Instant::now() > deadline {
            bail!("the plain llama-server did not load within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `earshot bench llm`.
pub fn run(config_path: Option<&Path>, args: BenchLlmArgs) -> Result<bool> {
    let loaded = super::load_config(config_path)?;
    let config = loaded.config;
    let paths = config.paths();
    let mut local_cfg = config.llm.local.clone();
    local_cfg.idle_release_secs = 0;
    local_cfg.max_tokens = local_cfg.max_tokens.max(args.tokens);
    // Side by side: the same request as the plain server gets (greedy, no
    // sentence cap); the questions below use the configured settings.
    let product_cfg = local_cfg.clone();
    local_cfg.temperature = 0.0;
    local_cfg.max_sentences = 0;
    let threads = if local_cfg.threads == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        local_cfg.threads
    };
    let model = LocalModel::new(&local_cfg, &paths);
    model.check_files().map_err(|e| anyhow::anyhow!("{e}"))?;
    let load_started = Instant::now();
    model.ensure_running().map_err(|e| anyhow::anyhow!("{e}"))?;
    let earshot_load_ms = load_started.elapsed().as_secs_f64() * 1000.0;
    let program = if Path::new(&local_cfg.server_program).is_absolute() {
        PathBuf::from(&local_cfg.server_program)
    } else {
        paths.model_path(&local_cfg.server_program)
    };
    let gguf = paths.model_path(&local_cfg.model_file);
    let load_started = Instant::now();
    let (plain, base) = start_plain(&program, &gguf, threads, local_cfg.context_size)?;
    let plain_load_ms = load_started.elapsed().as_secs_f64() * 1000.0;

    let runs = args.runs.max(1);
    let mut rows: [Vec<(Timing, Timing)>; 2] = [Vec::new(), Vec::new()];
    for run in 0..runs {
        // Alternate which side goes first so neither always meets a warm CPU.
        let order: [usize; 2] = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let first = request(
                voice_messages(run, 9, "What's a good vegetarian dinner for tonight?"),
                args.tokens,
            );
            let (t1, answer) = if side == 0 {
                earshot_turn(&model, &first)?
            } else {
                plain_turn(&base, &first)?
            };
            let mut next = first.messages.clone();
            next.push(ChatMessage::assistant(answer));
            next.push(ChatMessage::user("And what could I have for dessert?"));
            let second = request(next, args.tokens);
            let (t2, _) = if side == 0 {
                earshot_turn(&model, &second)?
            } else {
                plain_turn(&base, &second)?
            };
            rows[side].push((t1, t2));
        }
    }
    let sum = |side: usize| {
        let r = &rows[side];
        (
            median(r.iter().map(|(a, _)| a.first_ms).collect()),
            median(r.iter().map(|(a, _)| a.tokens_per_s).collect()),
            median(r.iter().map(|(_, b)| b.first_ms).collect()),
            median(r.iter().map(|(_, b)| b.tokens_per_s).collect()),
        )
    };
    let (e_first, e_tps, e_first2, e_tps2) = sum(0);
    let (p_first, p_tps, p_first2, p_tps2) = sum(1);
    let e_rss = model.rss_kib().unwrap_or(0) / 1024;
    let p_rss = rss_kib(plain.0.id()).unwrap_or(0) / 1024;
    let own_rss = rss_kib(std::process::id()).unwrap_or(0) / 1024;
    drop(plain);
    let summary = json!({
        "model": local_cfg.model_file,
        "threads": threads,
        "context_size": local_cfg.context_size,
        "tokens": args.tokens,
        "runs": runs,
        "earshot": {"load_ms": earshot_load_ms, "first_token_ms": e_first, "tokens_per_s": e_tps,
                     "second_turn_first_token_ms": e_first2, "second_turn_tokens_per_s": e_tps2, "model_rss_mb": e_rss},
        "llama_server": {"load_ms": plain_load_ms, "first_token_ms": p_first, "tokens_per_s": p_tps,
                          "second_turn_first_token_ms": p_first2, "second_turn_tokens_per_s": p_tps2, "rss_mb": p_rss},
        "first_token_ratio": e_first / p_first.max(1e-9),
        "tokens_per_s_ratio": e_tps / p_tps.max(1e-9),
        "second_turn_ratio": e_first2 / e_first.max(1e-9),
        "earshot_own_rss_mb": own_rss,
    });
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "voice prompt (no-tools system prompt + Now line, 9 turns + memory block; then turn 10), {} threads, context {}, {} tokens, median of {runs}",
            threads, local_cfg.context_size, args.tokens
        );
        println!(
            "{:<28} {:>10} {:>10} {:>14} {:>10}",
            "", "1st tok ms", "tok/s", "turn-2 1st ms", "RSS MB"
        );
        println!(
            "{:<28} {:>10.0} {:>10.1} {:>14.0} {:>10}",
            "earshot (llm/local.rs)", e_first, e_tps, e_first2, e_rss
        );
        println!(
            "{:<28} {:>10.0} {:>10.1} {:>14.0} {:>10}",
            "llama-server (plain)", p_first, p_tps, p_first2, p_rss
        );
        println!(
            "first token {:.2}x the server's (target <= 1.1), tokens/s {:.2}x (target >= 0.9), turn 2 first token {:.2}x turn 1 (target <= 0.5); earshot itself {own_rss} MB",
            e_first / p_first.max(1e-9),
            e_tps / p_tps.max(1e-9),
            e_first2 / e_first.max(1e-9)
        );
    }

    model.stop();
    let model = LocalModel::new(&product_cfg, &paths);
    if !args.no_questions {
        let text = std::fs::read_to_string(&args.questions)
            .with_context(|| format!("cannot read {}", args.questions.display()))?;
        let now = crate::device::clock::local(chrono::Utc::now());
        let system = prompts::with_now(prompts::no_tools(), &crate::device::clock::now_line(&now));
        for (i, q) in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .enumerate()
        {
            let req = request(
                vec![ChatMessage::system(system.clone()), ChatMessage::user(q)],
                config.llm.local.max_tokens,
            );
            let started = Instant::now();
            let (t, answer) = earshot_turn(&model, &req)?;
            let answer = crate::tts::cleanup::for_speech(&answer);
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            if args.json {
                println!(
                    "{}",
                    json!({"n": i + 1, "question": q, "answer": answer, "first_token_ms": t.first_ms, "total_ms": ms, "tokens": t.tokens})
                );
            } else {
                println!(
                    "{:>2}. {q}\n    {answer}\n    ({:.0} ms first token, {:.0} ms total)",
                    i + 1,
                    t.first_ms,
                    ms
                );
            }
        }
    }
    model.stop();
    Ok(true)
}
