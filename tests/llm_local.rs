//! Issue 20: the on-device LLM — the real llama-server (built by
//! scripts/fetch-llm.sh from the llama-cpp-python sdist) on the real GGUF
//! in `models_dir`. With no key it answers; a failing remote hands over to
//! it; a device command gets "I can't do that yet"; a child killed or hung
//! mid-answer is a bounded error, reaped, and restarted on the next
//! request; a runaway answer stops at its token cap; a prompt larger than
//! the window still gets an answer; two requests at once both finish.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::http::{Reply, TestServer};
use common::{earshot, models_dir, run, stderr, stdout};
use earshot::cancel::CancelToken;
use earshot::llm::local::LocalModel;
use earshot::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, LocalConfig};
use earshot::paths::Paths;

const GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// One real model at a time: two llama-servers on two busy cores make
/// each other (and the timings) slow.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// The models dir, checked: a missing file fails with the fix.
fn models() -> PathBuf {
    let dir = models_dir();
    for f in [GGUF, "llama-server"] {
        assert!(
            dir.join(f).exists(),
            "{} is missing: run scripts/fetch-llm.sh (MODELS_DIR={})",
            dir.join(f).display(),
            dir.display()
        );
    }
    dir
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn chat(dir: &Path, config: &str, text: &str) -> std::process::Output {
    std::fs::write(dir.join("earshot.toml"), config).unwrap();
    run(earshot(dir)
        .env("EARSHOT_LLM_ORDER", "remote,local")
        .args(["chat", "--json", text]))
}

fn done(out: &std::process::Output) -> serde_json::Value {
    json_lines(&stdout(out))
        .into_iter()
        .find(|e| e["type"] == "done")
        .unwrap_or_else(|| panic!("no done event: {}\n{}", stdout(out), stderr(out)))
}

#[test]
fn with_no_key_an_open_question_is_answered_on_device_silently() {
    let _one = serial();
    models();
    let dir = tempfile::tempdir().unwrap();
    // The default config (tree mode), as on a fresh clone.
    let out = chat(dir.path(), "", "What is the capital of France?");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "no warning on stderr");
    let d = done(&out);
    assert_eq!(d["model"], format!("local/{GGUF}"));
    let answer = d["response"].as_str().unwrap();
    assert!(answer.contains("Paris"), "{answer}");
    // The turn log names the model too.
    let log = run(earshot(dir.path()).args(["log", "--json"]));
    assert!(
        stdout(&log).contains(&format!("local/{GGUF}")),
        "{}",
        stdout(&log)
    );
}

#[test]
fn a_failing_remote_hands_over_to_the_local_model() {
    let _one = serial();
    models();
    let server = TestServer::start(|_| Reply::json(500, r#"{"error":{"message":"down"}}"#));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "mode = \"graph\"\n[llm]\nbase_url = \"{}/v1\"\napi_key = \"gsk_test_secret_value_123\"\nretry_backoff_ms = 50\n",
        server.url()
    );
    let out = chat(dir.path(), &config, "Why is the sky blue?");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(done(&out)["model"], format!("local/{GGUF}"));
    assert!(!server.requests().is_empty(), "the remote was tried first");
}

#[test]
fn a_device_command_with_only_the_local_model_is_declined_plainly() {
    let _one = serial();
    models();
    let dir = tempfile::tempdir().unwrap();
    let out = chat(
        dir.path(),
        "mode = \"graph\"\n",
        "turn on the kitchen lights",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let answer = done(&out)["response"].as_str().unwrap().to_string();
    assert!(answer.starts_with("I can't do that yet."), "{answer}");
    assert!(answer.contains("timers"), "{answer}");
    // A question only a live tool can answer is not made up.
    let out = chat(
        dir.path(),
        "mode = \"graph\"\n",
        "what's the weather like tomorrow in Paris",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let answer = done(&out)["response"].as_str().unwrap().to_string();
    assert!(
        answer.starts_with("I can't look that up right now"),
        "{answer}"
    );
}

#[test]
fn summaries_and_memory_extraction_run_on_device_with_no_key() {
    let _one = serial();
    models();
    let dir = tempfile::tempdir().unwrap();
    let out = chat(
        dir.path(),
        "mode = \"graph\"\n",
        "I have a cat called Miso. What do cats like to eat?",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(earshot(dir.path())
        .env("EARSHOT_LLM_ORDER", "remote,local")
        .args(["memory", "process", "--json"]));
    let report: serde_json::Value = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|_| panic!("{}\n{}", stdout(&out), stderr(&out)));
    assert!(report["done"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(report["retry_later"], 0, "{report}");
    assert_eq!(report["pending"], 0, "{report}");
    let notes = report["notes"].to_string();
    assert!(!notes.contains("no LLM"), "{notes}");
}

fn model(cfg: LocalConfig) -> (tempfile::TempDir, Arc<LocalModel>) {
    let state = tempfile::tempdir().unwrap();
    let paths = Paths::new(state.path(), models());
    (state, LocalModel::new(&cfg, &paths))
}

fn ask(text: &str, tokens: u32) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages: vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user(text),
        ],
        temperature: 0.0,
        max_completion_tokens: tokens,
        top_p: 1.0,
        tools: Vec::new(),
        stream: true,
    }
}

fn is_gone_or_reaped(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => !stat.contains(") Z "),
    }
}

#[test]
fn a_child_killed_mid_answer_is_a_bounded_error_and_restarts() {
    let _one = serial();
    let (_state, m) = model(LocalConfig::default());
    m.ensure_running().unwrap();
    let pid = m.pid().unwrap();
    let started = Instant::now();
    let mut killed = false;
    let r = m.chat(
        &ask("Write a long story about a dragon and a knight.", 160),
        &mut |_| {
            if !killed {
                killed = true;
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        },
        &CancelToken::new(),
    );
    assert!(killed, "no token came");
    assert!(matches!(r, Err(LlmError::Local(_))), "{r:?}");
    assert!(r.unwrap_err().user_sentence().ends_with('.'));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(m.pid(), None);
    assert!(is_gone_or_reaped(pid), "zombie child");
    // The next request starts a new child and answers.
    let r = m
        .chat(&ask("Say hello.", 8), &mut |_| {}, &CancelToken::new())
        .unwrap();
    assert!(!r.content.is_empty());
    assert_eq!(m.starts(), 2);
    m.stop();
}

#[test]
fn runaway_answers_stop_at_the_cap_and_big_prompts_still_fit() {
    let _one = serial();
    // Greedy decoding: at the default temperature the small model
    // sometimes answers a short "Sure!" and stops before the cap.
    let (_state, m) = model(LocalConfig {
        max_tokens: 12,
        context_size: 512,
        temperature: 0.0,
        ..LocalConfig::default()
    });
    let mut tokens = 0;
    let r = m
        .chat(
            &ask("Count from one to five hundred, one number per line.", 2048),
            &mut |_| tokens += 1,
            &CancelToken::new(),
        )
        .unwrap();
    assert!(tokens <= 13, "{tokens} tokens");
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
    // Far larger than the 512-token window: history and the front are cut.
    let mut req = ask(
        &format!("{} What is two plus two?", "blah ".repeat(4000)),
        12,
    );
    for _ in 0..20 {
        req.messages
            .insert(1, ChatMessage::user("old question ".repeat(40)));
        req.messages
            .insert(2, ChatMessage::assistant("old answer ".repeat(40)));
    }
    let r = m.chat(&req, &mut |_| {}, &CancelToken::new());
    assert!(r.is_ok(), "{r:?}");
    m.stop();
}

#[test]
fn two_requests_at_once_both_finish() {
    let _one = serial();
    let (_state, m) = model(LocalConfig::default());
    let m2 = m.clone();
    let other = std::thread::spawn(move || {
        m2.chat(&ask("Name a fruit.", 8), &mut |_| {}, &CancelToken::new())
    });
    let here = m.chat(&ask("Name a colour.", 8), &mut |_| {}, &CancelToken::new());
    assert!(here.is_ok(), "{here:?}");
    let there = other.join().unwrap();
    assert!(there.is_ok(), "{there:?}");
    assert_eq!(m.starts(), 1);
    m.stop();
}

/// A stand-in llama-server that loads, answers /health, then hangs after
/// the first token of an answer.
const HANGING_SERVER: &str = r#"#!/usr/bin/env python3
import sys, time, json
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"content": "Hello"}}]}
        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n"); self.wfile.flush()
        time.sleep(3600)
HTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

/// A local model whose "llama-server" is [`HANGING_SERVER`] (and a fake
/// GGUF), with `cfg`'s limits; the temp dirs live as long as the first value.
fn hanging_model(cfg: LocalConfig) -> ((tempfile::TempDir, tempfile::TempDir), Arc<LocalModel>) {
    let models = tempfile::tempdir().unwrap();
    std::fs::write(models.path().join("m.gguf"), b"GGUF fake").unwrap();
    let prog = models.path().join("hanging-server");
    std::fs::write(&prog, HANGING_SERVER).unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let cfg = LocalConfig {
        model_file: "m.gguf".into(),
        server_program: "hanging-server".into(),
        ..cfg
    };
    let m = LocalModel::new(&cfg, &Paths::new(state.path(), models.path()));
    ((models, state), m)
}

#[test]
fn a_child_that_hangs_mid_answer_is_killed_within_its_read_timeout() {
    let (_dirs, m) = hanging_model(LocalConfig {
        read_timeout_secs: 1,
        ..LocalConfig::default()
    });
    m.ensure_running().unwrap();
    let pid = m.pid().unwrap();
    let started = Instant::now();
    let mut said = String::new();
    let r = m.chat(
        &ask("hi", 8),
        &mut |t| said.push_str(t),
        &CancelToken::new(),
    );
    assert_eq!(said, "Hello");
    assert_eq!(r, Err(LlmError::Timeout));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(m.pid(), None, "the hung child was stopped");
    assert!(is_gone_or_reaped(pid), "zombie child");
}

#[test]
fn the_child_dies_with_earshot() {
    let _one = serial();
    models();
    // A one-shot chat exits; its llama-server must not outlive it.
    let dir = tempfile::tempdir().unwrap();
    let out = chat(dir.path(), "mode = \"graph\"\n", "Say hi.");
    assert!(out.status.success(), "{}", stderr(&out));
    // The child inherits earshot's environment, so its state dir names it.
    let mark = format!("EARSHOT_STATE_DIR={}", dir.path().display());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read(e.path().join("environ")).ok())
            .any(|env| String::from_utf8_lossy(&env).split('\0').any(|v| v == mark));
        if !alive {
            break;
        }
        assert!(Instant::now() < deadline, "llama-server outlived earshot");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_unused_child_is_stopped_to_release_its_memory() {
    let (_dirs, m) = hanging_model(LocalConfig {
        idle_release_secs: 1,
        ..LocalConfig::default()
    });
    m.ensure_running().unwrap();
    let pid = m.pid().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.pid().is_some() {
        assert!(Instant::now() < deadline, "the idle child was not stopped");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(is_gone_or_reaped(pid), "zombie child");
    // It loads again when asked.
    m.ensure_running().unwrap();
    assert_eq!(m.starts(), 2);
    m.stop();
}

#[test]
fn a_cut_short_gguf_is_a_bounded_sentence_from_the_real_server() {
    let real = models();
    let models = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(real.join(GGUF)).unwrap();
    std::fs::write(models.path().join(GGUF), &bytes[..1 << 20]).unwrap();
    std::os::unix::fs::symlink(
        real.join("llama-server"),
        models.path().join("llama-server"),
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let m = LocalModel::new(
        &LocalConfig::default(),
        &Paths::new(state.path(), models.path()),
    );
    let started = Instant::now();
    let e = m
        .chat(&ask("hi", 8), &mut |_| {}, &CancelToken::new())
        .unwrap_err();
    assert!(matches!(e, LlmError::Local(_)), "{e:?}");
    assert!(e.to_string().contains("exited while loading"), "{e}");
    assert!(e.user_sentence().contains("earshot doctor"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(m.pid(), None);
}
