//! The foundation through the real binary: `earshot chat`, `route`,
//! `history`, `config show`, against an OpenAI-compatible server on a real
//! loopback socket speaking Groq's exact wire format — including its
//! failures.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::http::{openai_completion, openai_stream_chunks, Piece, Reply, Request, TestServer};
use common::{earshot, run, stderr, stdout};
use serde_json::Value;

const MODEL: &str = "qwen/qwen3.6-27b";

/// Is this the router's one-word classification request?
fn is_classification(req: &Request) -> bool {
    let body = req.json();
    body["stream"] == false
        && body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("Classify the user's request"))
}

/// Answer classification with `simple`, anything else with `reply`.
fn llm_server(reply: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> TestServer {
    TestServer::start(move |req| {
        if is_classification(req) {
            return Reply::json(200, &openai_completion(MODEL, "simple"));
        }
        reply(req)
    })
}

fn sse_answer(pieces: &[&str]) -> Reply {
    let chunks = openai_stream_chunks(MODEL, pieces);
    let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
    Reply::sse(&refs)
}

/// A state dir with an earshot.toml (found as ./earshot.toml).
fn state(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("earshot.toml"), config).unwrap();
    dir
}

fn config_for(server: &TestServer, extra: &str) -> String {
    // graph mode: these tests exercise the router graph, not the tree.
    format!(
        "mode = \"graph\"\n[llm]\nbase_url = \"{}/openai/v1\"\napi_key = \"gsk_test_secret_value_123\"\nretry_backoff_ms = 10\n{extra}",
        server.url()
    )
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l} ({e})")))
        .collect()
}

fn count(dir: &Path, sql: &str) -> i64 {
    let c = rusqlite::Connection::open(dir.join("earshot.db")).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn streamed_turn_prints_tokens_and_stores_the_cleaned_answer() {
    let server =
        llm_server(|_| sse_answer(&["<think>hmm</think>", "**Paris** is ", "the capital. ", "😀"]));
    let dir = state(&config_for(&server, ""));
    let out = run(earshot(dir.path()).args(["chat", "what is the capital of France"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Paris is the capital."), "{text}");
    assert!(!text.contains("hmm") && !text.contains("**"), "{text}");
    // Stored: both messages, cleaned for speech.
    let c = rusqlite::Connection::open(dir.path().join("earshot.db")).unwrap();
    let answer: String = c
        .query_row(
            "SELECT content FROM messages WHERE role='assistant'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(answer, "Paris is the capital.");
    // The request followed R-MODEL and the seed's message layout.
    let reqs = server.requests();
    let answer_req = reqs.iter().find(|r| !is_classification(r)).unwrap();
    let body = answer_req.json();
    assert_eq!(answer_req.path, "/openai/v1/chat/completions");
    assert_eq!(
        answer_req.header("authorization"),
        Some("Bearer gsk_test_secret_value_123")
    );
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["temperature"], 0.7);
    assert_eq!(body["max_completion_tokens"], 2048);
    assert_eq!(body["top_p"], 1.0);
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["messages"].as_array().unwrap().last().unwrap()["content"],
        "what is the capital of France"
    );
}

#[test]
fn json_events_are_timestamped_and_end_in_done() {
    let server = llm_server(|_| sse_answer(&["Hello ", "there."]));
    let dir = state(&config_for(&server, ""));
    let out = run(earshot(dir.path()).args(["chat", "hi", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&stdout(&out));
    let contents: String = events
        .iter()
        .filter(|e| e["type"] == "content")
        .map(|e| e["data"].as_str().unwrap())
        .collect();
    assert_eq!(contents, "Hello there.");
    for e in &events {
        let ts = e["timestamp"].as_str().expect("timestamp");
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
        assert_eq!(ts.len(), 24, "RFC 3339 UTC with milliseconds: {ts}");
    }
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["route"], "simple");
    assert_eq!(done["model"], MODEL);
    assert!(done["latency_ms"].is_u64());
    assert!(done["conversation_id"].as_i64().unwrap() > 0);
}

#[test]
fn non_streamed_mode_works_too() {
    let server = llm_server(|req| {
        assert_eq!(req.json()["stream"], false);
        Reply::json(200, &openai_completion(MODEL, "Four."))
    });
    let dir = state(&config_for(&server, "stream = false\n"));
    let out = run(earshot(dir.path()).args(["chat", "two plus two, explain"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Four.");
}

#[test]
fn history_is_sent_in_order_and_conversation_continues() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let server = llm_server(move |_| {
        let i = n2.fetch_add(1, Ordering::SeqCst);
        sse_answer(&[&format!("answer {i}.")])
    });
    let dir = state(&config_for(&server, ""));
    let first = run(earshot(dir.path()).args(["chat", "first question", "--json"]));
    assert!(first.status.success(), "{}", stderr(&first));
    let conv = json_lines(&stdout(&first)).last().unwrap()["conversation_id"]
        .as_i64()
        .unwrap();
    for q in ["second question", "third question"] {
        let out = run(earshot(dir.path()).args(["chat", q, "--conversation", &conv.to_string()]));
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let last = server
        .requests()
        .into_iter()
        .rfind(|r| !is_classification(r))
        .unwrap();
    let msgs = last.json()["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    let contents: Vec<&str> = msgs[1..]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "first question",
            "answer 0.",
            "second question",
            "answer 1.",
            "third question"
        ]
    );
    let hist = run(earshot(dir.path()).args(["history", &conv.to_string(), "--json"]));
    let v: Value = serde_json::from_str(&stdout(&hist)).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 6);
    let list = run(earshot(dir.path()).args(["history"]));
    assert!(stdout(&list).contains("6 messages"), "{}", stdout(&list));
}

#[test]
fn rate_limit_with_retry_after_is_retried() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let server = llm_server(move |_| {
        if n2.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::json(429, r#"{"error":{"message":"Rate limit reached for model","type":"tokens","code":"rate_limit_exceeded"}}"#)
                .header("retry-after", "0.2")
        } else {
            sse_answer(&["Recovered."])
        }
    });
    let dir = state(&config_for(&server, ""));
    let started = Instant::now();
    let out = run(earshot(dir.path()).args(["chat", "hello"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Recovered.");
    assert_eq!(n.load(Ordering::SeqCst), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "retry-after honoured"
    );
}

#[test]
fn server_errors_become_one_sentence_and_nothing_is_stored() {
    let server = llm_server(|_| {
        Reply::json(
            500,
            r#"{"error":{"message":"Internal Server Error","type":"internal_server_error"}}"#,
        )
    });
    let dir = state(&config_for(&server, "max_retries = 1\n"));
    let out = run(earshot(dir.path()).args(["chat", "hello", "--json"]));
    assert!(!out.status.success());
    let events = json_lines(&stdout(&out));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error");
    let msg = last["message"].as_str().unwrap();
    assert!(msg.contains("HTTP 500") && !msg.contains('\n'), "{msg}");
    // One try + one retry.
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|r| !is_classification(r))
            .count(),
        2
    );
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM messages"), 0);
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM conversations"), 0);
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(*) FROM turn_log WHERE outcome='error'"
        ),
        1
    );
}

#[test]
fn broken_sse_chunk_is_a_clear_error() {
    let server = llm_server(|_| Reply::sse(&["{\"choices\":[{\"delta\":{\"content\":\"Hel"]));
    let dir = state(&config_for(&server, ""));
    let out = run(earshot(dir.path()).args(["chat", "hello"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("couldn't read"), "{err}");
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM messages"), 0);
}

#[test]
fn stalled_stream_times_out() {
    let server = llm_server(|_| {
        let chunks = openai_stream_chunks(MODEL, &["Hel"]);
        Reply::sse(&[&chunks[0], &chunks[1]]).piece(Piece::Stall(Duration::from_secs(60)))
    });
    let dir = state(&config_for(
        &server,
        "read_timeout_secs = 1\nmax_retries = 0\n",
    ));
    let started = Instant::now();
    let out = run(earshot(dir.path()).args(["chat", "hello"]));
    assert!(!out.status.success());
    // Far below the 60 s stall, with room for a loaded machine's start-up.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert!(stderr(&out).contains("took too long"), "{}", stderr(&out));
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM messages"), 0);
}

#[test]
fn unreachable_or_unconfigured_llm_is_one_line_with_the_fix() {
    // Nothing listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = state(&format!(
        "mode = \"graph\"\n[llm]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmax_retries = 0\n"
    ));
    let out = run(earshot(dir.path()).args(["chat", "explain photosynthesis"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("can't reach the language model") && err.contains("LLM_BASE_URL"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // Default config: Groq with no key.
    let dir = state("mode = \"graph\"\n");
    let out = run(earshot(dir.path()).args(["chat", "explain photosynthesis"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("GROQ_API_KEY"), "{err}");
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM messages"), 0);
}

#[test]
fn killing_mid_stream_leaves_only_complete_turns() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let server = llm_server(move |_| {
        if n2.fetch_add(1, Ordering::SeqCst) == 0 {
            sse_answer(&["Complete answer."])
        } else {
            // Second turn: a slow stream that never finishes in time.
            let chunks = openai_stream_chunks(MODEL, &["Partial ", "answer"]);
            Reply::sse(&[&chunks[0], &chunks[1]])
                .piece(Piece::Pause(Duration::from_secs(30)))
                .piece(Piece::Bytes(
                    format!("data: {}\n\n", chunks[2]).into_bytes(),
                ))
        }
    });
    let dir = state(&config_for(&server, ""));
    let first = run(earshot(dir.path()).args(["chat", "one", "--json"]));
    assert!(first.status.success(), "{}", stderr(&first));
    let conv = json_lines(&stdout(&first)).last().unwrap()["conversation_id"]
        .as_i64()
        .unwrap();

    let mut child = earshot(dir.path())
        .args(["chat", "two", "--json", "--conversation", &conv.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first streamed token, then kill -9.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stream ended early"
        );
        if line.contains("\"content\"") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // The database opens and holds only the complete first turn.
    let out = run(earshot(dir.path()).args(["history", &conv.to_string(), "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let contents: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["one", "Complete answer."]);
    let c = rusqlite::Connection::open(dir.path().join("earshot.db")).unwrap();
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn route_json_reports_keyword_decisions() {
    let dir = state("");
    for (text, keyword) in [
        ("add milk to my todo list", "todo"),
        ("what's on my Calendar tomorrow", "calendar"),
        ("set a reminder for 5pm", "reminder"),
        ("please note down my idea", "note down"),
    ] {
        let out = run(earshot(dir.path()).args(["route", text, "--json"]));
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(v["route"], "context", "{text}");
        assert_eq!(v["by"], "keyword", "{text}");
        assert_eq!(v["keyword"], keyword, "{text}");
        assert_eq!(v["confidence"], 1.0);
    }
}

#[test]
fn route_json_uses_the_llm_when_asked_and_normalises() {
    let server = TestServer::start(|req| {
        assert!(is_classification(req));
        Reply::json(
            200,
            &openai_completion(MODEL, "<think>it asks for a style</think> Persona."),
        )
    });
    // No on-device classifier threshold can be met at 1.01: always asks the LLM.
    let dir = state(&config_for(
        &server,
        "[router]\nclassifier_threshold = 1.0\n",
    ));
    let out = run(earshot(dir.path()).args(["route", "talk to me like a pirate", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["route"], "persona");
    assert_eq!(v["by"], "llm");
    // "tell me about mastodons" has no keyword: it is not context-by-keyword.
    let out = run(earshot(dir.path()).args(["route", "tell me about mastodons", "--json"]));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_ne!(v["by"], "keyword");
}

#[test]
fn config_show_masks_secrets_and_names_sources() {
    let dir = state("[llm]\nmodel = \"from-file\"\n");
    let out = run(earshot(dir.path())
        .args(["config", "show", "--json"])
        .env("GROQ_API_KEY", "gsk_live_abcdefghijkl9876")
        .env("GROQ_AGENT_MODEL", "env-agent"));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("abcdefghijkl"), "secret leaked: {text}");
    let v: Value = serde_json::from_str(text.trim()).unwrap();
    let find = |k: &str| {
        v["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == k)
            .unwrap()
            .clone()
    };
    assert_eq!(find("llm.api_key")["value"], "****9876");
    assert_eq!(find("llm.api_key")["source"], "env GROQ_API_KEY");
    assert_eq!(find("llm.model")["value"], "from-file");
    assert!(find("llm.model")["source"]
        .as_str()
        .unwrap()
        .starts_with("file "));
    assert_eq!(find("llm.agent_model")["value"], "env-agent");
    assert_eq!(find("llm.temperature")["source"], "default");
    // A choice key lists what its name table accepts; a free-form key not.
    assert_eq!(
        find("tts.order")["choices"],
        serde_json::json!(["piper", "espeak", "cloud", "wyoming"])
    );
    assert_eq!(
        find("mode")["choices"],
        serde_json::json!(["tree", "graph"])
    );
    assert!(find("llm.model").get("choices").is_none());
}

#[test]
fn devices_and_config_show_read_the_same_name_tables() {
    let dir = state("");
    let out = run(earshot(dir.path()).args(["devices", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let devices: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(devices["devices"].is_array(), "{devices}");
    let out = run(earshot(dir.path()).args(["config", "show", "--json"]));
    let shown: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let families = devices["backends"].as_array().unwrap();
    for key in [
        "audio.input",
        "device.button",
        "stt.order",
        "tts.order",
        "tools.enabled",
        "mode",
        "nlu.scorer",
        "llm.order",
        "llm.local.backend",
    ] {
        let family = families
            .iter()
            .find(|f| f["key"] == key)
            .unwrap_or_else(|| panic!("no family for {key} in {devices}"));
        let forms: Vec<Value> = family["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["form"].clone())
            .collect();
        assert!(!forms.is_empty(), "{key}");
        if let Some(setting) = shown["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
        {
            assert_eq!(setting["choices"], Value::Array(forms), "{key}");
        }
    }
}

#[test]
fn a_bad_choice_is_refused_at_load_naming_key_line_and_the_table() {
    let dir = state("[tts]\norder = [\"piper\", \"sam\"]\n");
    let out = run(earshot(dir.path()).args(["chat", "hi"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "line 2: tts.order[1]: unknown engine 'sam'; use piper, espeak, cloud or wyoming"
        ),
        "{err}"
    );
    let dir = state("[device]\nbutton = \"gpoi:/dev/gpiochip0:17\"\n");
    let out = run(earshot(dir.path()).args(["chat", "hi"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("line 2: device.button:") && err.contains("unknown button kind 'gpoi'"),
        "{err}"
    );
}

#[test]
fn broken_config_is_one_line_naming_key_and_line() {
    let dir = state("[llm]\nmodel = \"x\"\ntemprature = 0.2\n");
    let out = run(earshot(dir.path()).args(["chat", "hi"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("line 3") && err.contains("temprature"),
        "{err}"
    );
}

#[test]
fn corrupt_database_is_reported_and_left_alone() {
    let dir = state("mode = \"graph\"\n");
    let junk = b"definitely not sqlite ".repeat(300);
    std::fs::write(dir.path().join("earshot.db"), &junk).unwrap();
    let out = run(earshot(dir.path()).args(["history"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("not a readable SQLite file") && err.contains("move it aside"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.path().join("earshot.db")).unwrap(), junk);
}

/// The sha256 of a file, as the probe of issue 23 compared them.
fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// A database with a conversation of 200 messages and 30 memories, closed.
fn database_with_rows(dir: &Path) -> std::path::PathBuf {
    let store = earshot::store::Store::open_in(dir).unwrap();
    let conversation = store.create_conversation("user-1").unwrap();
    store
        .with_tx(|tx| {
            for i in 0..200 {
                tx.execute(
                    "INSERT INTO messages (conversation_id, role, content, timestamp)
                     VALUES (?1, ?2, ?3, '2026-01-01T10:00:00.000Z')",
                    rusqlite::params![
                        conversation,
                        if i % 2 == 0 { "user" } else { "assistant" },
                        format!("message {i} {}", "words ".repeat(40))
                    ],
                )?;
            }
            for i in 0..30 {
                tx.execute(
                    "INSERT INTO memories (user_id, text, created_at, updated_at)
                     VALUES ('user-1', ?1, '2026-01-01T10:00:00.000Z', '2026-01-01T10:00:00.000Z')",
                    [format!("fact number {i}")],
                )?;
            }
            Ok(())
        })
        .unwrap();
    let path = store.path().to_path_buf();
    drop(store);
    path
}

/// Overwrite one leaf page of `table` (its root's first child) with junk.
fn corrupt_a_leaf(path: &Path, table: &str) {
    let (page_size, root) = {
        let c = rusqlite::Connection::open(path).unwrap();
        let ps: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        let root: i64 = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        (ps as usize, root as usize)
    };
    let mut bytes = std::fs::read(path).unwrap();
    let at = (root - 1) * page_size;
    assert_eq!(bytes[at], 0x05, "{table}'s root is not an interior page");
    let cell = u16::from_be_bytes([bytes[at + 12], bytes[at + 13]]) as usize;
    let child = u32::from_be_bytes([
        bytes[at + cell],
        bytes[at + cell + 1],
        bytes[at + cell + 2],
        bytes[at + cell + 3],
    ]) as usize;
    let leaf = (child - 1) * page_size;
    bytes[leaf..leaf + page_size].fill(0x55);
    std::fs::write(path, bytes).unwrap();
}

/// Issue 23: one corrupt page. `chat` is refused before it writes
/// anything (the file's sha256 is unchanged), and the readers report the
/// damage with the same one line instead of partial data with exit 0.
#[test]
fn a_damaged_database_is_refused_by_writers_and_readers_and_never_written() {
    let dir =
        state("mode = \"graph\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"k\"\n");
    let db = database_with_rows(dir.path());
    // Healthy, the readers see it all.
    let out = run(earshot(dir.path()).args(["history", "1", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    corrupt_a_leaf(&db, "messages");
    let before = sha256_of(&db);
    let mut lines = Vec::new();
    for args in [
        &["chat", "hello there"][..],
        &["history"],
        &["history", "1", "--json"],
        &["memory", "list"],
        &["memory", "add", "I like tea"],
    ] {
        let out = run(earshot(dir.path()).args(args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            stdout(&out).trim().is_empty(),
            "{args:?} printed data: {}",
            stdout(&out)
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(&db.display().to_string())
                && err.contains("is damaged")
                && err.contains("move it aside"),
            "{args:?}: {err}"
        );
        // The healthy `history` above took the day's backup: the fix
        // points to it.
        assert!(
            err.contains("cp ") && err.contains("backups/earshot-"),
            "{args:?}: {err}"
        );
        lines.push(err.trim().to_string());
        assert_eq!(sha256_of(&db), before, "{args:?} wrote to the damaged file");
    }
    assert!(lines.windows(2).all(|w| w[0] == w[1]), "{lines:#?}");
}

/// Issue 23: a database truncated to 0 bytes beside its vector indexes is
/// refused, not silently replaced by an empty one.
#[test]
fn an_empty_database_beside_its_indexes_is_refused_not_replaced() {
    let dir = state("mode = \"graph\"\n");
    std::fs::create_dir_all(dir.path().join("index")).unwrap();
    std::fs::write(dir.path().join("index/memories.usearch"), vec![1u8; 64]).unwrap();
    let db = dir.path().join("earshot.db");
    std::fs::write(&db, b"").unwrap();
    for args in [&["memory", "list"][..], &["history"], &["chat", "hi"]] {
        let out = run(earshot(dir.path()).args(args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("0 bytes") && err.contains("index") && err.contains("move it aside"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "{args:?}");
    }
}

/// Issue 23: a WAV hound cannot read ("Failed to read enough bytes.")
/// names the file and what would work, on one line.
#[test]
fn a_bad_wav_names_the_file_and_what_would_work() {
    let dir = state("");
    let wav = dir.path().join("short.wav");
    std::fs::write(&wav, b"RIFF\x24\0\0\0WAVE").unwrap();
    let out = run(earshot(dir.path()).arg("transcribe").arg(&wav));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "{}: not a WAV file, or truncated (Failed to read enough bytes); give a 16-bit PCM WAV, e.g. `ffmpeg -i in -ar 16000 -ac 1 out.wav`",
            wav.display()
        )),
        "{err}"
    );
}

#[test]
fn secrets_never_reach_logs() {
    let server = llm_server(|_| {
        Reply::json(
            401,
            r#"{"error":{"message":"Invalid API Key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        )
    });
    let dir = state(&config_for(&server, ""));
    let out = run(earshot(dir.path())
        .args(["chat", "hello", "--verbose"])
        .env("EARSHOT_LOG", "debug"));
    assert!(!out.status.success());
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.contains("GROQ_API_KEY"), "{all}");
    assert!(
        !all.contains("gsk_test_secret_value_123"),
        "secret leaked: {all}"
    );
}

#[test]
fn two_processes_share_one_state_dir() {
    let server = llm_server(|_| sse_answer(&["Okay."]));
    let dir = state(&config_for(&server, ""));
    // Several CLI turns at once on the same database (WAL + busy timeout):
    // none fails with "database is locked", every turn is stored whole.
    let children: Vec<_> = (0..6)
        .map(|i| {
            earshot(dir.path())
                .args(["chat", &format!("question {i}")])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM conversations"), 6);
    assert_eq!(count(dir.path(), "SELECT COUNT(*) FROM messages"), 12);
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(*) FROM turn_log WHERE outcome='ok'"
        ),
        6
    );
}

// ---- every LLM fault is bounded in time and size (issue 23) ---------------

/// When the first non-classification request arrived (faults are timed
/// from there, not from process start: model loading varies with load).
type FirstSeen = Arc<std::sync::Mutex<Option<Instant>>>;

fn timed_llm_server(
    reply: impl Fn(&Request) -> Reply + Send + Sync + 'static,
) -> (TestServer, FirstSeen) {
    let first: FirstSeen = Arc::new(std::sync::Mutex::new(None));
    let seen = first.clone();
    let server = llm_server(move |req| {
        seen.lock().unwrap().get_or_insert_with(Instant::now);
        reply(req)
    });
    (server, first)
}

fn since(first: &FirstSeen) -> Duration {
    first
        .lock()
        .unwrap()
        .expect("the LLM was never asked")
        .elapsed()
}

/// Non-classification requests the server saw.
fn answer_requests(server: &TestServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| !is_classification(r))
        .count()
}

#[test]
fn a_server_that_accepts_and_never_answers_is_a_sentence_by_the_first_byte_deadline() {
    // Accepts every connection and holds it, never sending a byte.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let seen = accepted.clone();
    let first: FirstSeen = Arc::new(std::sync::Mutex::new(None));
    let first_accept = first.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().map_while(Result::ok) {
            seen.fetch_add(1, Ordering::SeqCst);
            first_accept
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
            held.push(s);
        }
    });
    let dir = state(&format!(
        "mode = \"graph\"\n[llm]\nbase_url = \"http://127.0.0.1:{port}/v1\"\napi_key = \"gsk_x\"\nfirst_byte_timeout_secs = 1\nmax_retries = 2\nretry_backoff_ms = 10\n[router]\nllm_fallback = false\n"
    ));
    let out = run(earshot(dir.path()).args(["chat", "tell me a story about a fox"]));
    assert!(!out.status.success());
    let took = since(&first);
    assert!(
        took < Duration::from_secs(4),
        "took {took:?} after connecting"
    );
    assert!(stderr(&out).contains("took too long"), "{}", stderr(&out));
    // Not retried: a server that did not answer in time won't answer again.
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn a_trickling_stream_ends_at_the_total_deadline_keeping_its_words() {
    let (server, first) = timed_llm_server(|_| {
        let words: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let chunks = openai_stream_chunks(MODEL, &refs);
        let mut reply = Reply::new(200)
            .header("Content-Type", "text/event-stream")
            .streamed();
        // Role chunk, then one word every 200 ms: never idle, never done.
        for chunk in chunks.iter().take(150) {
            reply = reply
                .piece(Piece::Bytes(format!("data: {chunk}\n\n").into_bytes()))
                .piece(Piece::Pause(Duration::from_millis(200)));
        }
        reply
    });
    let dir = state(&config_for(
        &server,
        "total_timeout_secs = 2\nread_timeout_secs = 5\nmax_retries = 0\n",
    ));
    let out = run(earshot(dir.path()).args(["chat", "hello"]));
    let took = since(&first);
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("word0"), "{said}");
    assert!(
        !said.contains("word140"),
        "the stream was read to its end: {said}"
    );
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(*) FROM messages WHERE role='assistant'"
        ),
        1
    );
}

#[test]
fn a_retry_after_past_the_cap_is_not_waited_for() {
    let (server, first) = timed_llm_server(|_| {
        Reply::json(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}"#,
        )
        .header("Retry-After", "86400")
    });
    let dir = state(&config_for(&server, "max_retries = 2\n"));
    let out = run(earshot(dir.path()).args(["chat", "hello"]));
    assert!(!out.status.success());
    let waited = since(&first);
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
    assert!(stderr(&out).contains("rate limited"), "{}", stderr(&out));
    assert_eq!(answer_requests(&server), 1);
}

#[test]
fn an_oversized_reply_stops_being_read_at_the_cap() {
    let server = llm_server(|_| {
        let piece = "x".repeat(1000);
        let pieces: Vec<&str> = (0..2000).map(|_| piece.as_str()).collect();
        sse_answer(&pieces)
    });
    let dir = state(&config_for(&server, "max_reply_chars = 5000\n"));
    let out = run(earshot(dir.path()).args(["chat", "hello"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let stored = count(
        dir.path(),
        "SELECT MAX(LENGTH(content)) FROM messages WHERE role='assistant'",
    );
    assert!(stored > 0 && stored <= 5000, "stored {stored} characters");
    let everything = count(
        dir.path(),
        "SELECT COALESCE(SUM(LENGTH(content)), 0) FROM messages",
    );
    assert!(everything < 10_000, "{everything}");
    // Stored once: the turn log, the background jobs and the device state
    // name the message instead of copying it (`earshot log` reads it back).
    let copies = count(
        dir.path(),
        "SELECT (SELECT COUNT(*) FROM turn_log WHERE response LIKE '%xxxxxxxx%')
              + (SELECT COUNT(*) FROM jobs WHERE payload LIKE '%xxxxxxxx%')
              + (SELECT COUNT(*) FROM device_state WHERE value LIKE '%xxxxxxxx%')",
    );
    assert_eq!(copies, 0, "the answer is copied outside `messages`");
    let log = run(earshot(dir.path()).args(["log", "--json"]));
    assert!(log.status.success(), "{}", stderr(&log));
    assert!(
        stdout(&log).contains(&"x".repeat(1000)),
        "the turn log reads the answer back"
    );
}

#[test]
fn an_error_inside_the_stream_is_named_as_such_not_as_http_500() {
    let server = llm_server(|_| {
        let chunks = openai_stream_chunks(MODEL, &["Hel"]);
        Reply::sse(&[
            &chunks[0],
            r#"{"error":{"message":"The model is overloaded","type":"server_error"}}"#,
        ])
    });
    let dir = state(&config_for(&server, "max_retries = 0\n"));
    let out = run(earshot(dir.path()).args(["chat", "hello", "--json"]));
    assert!(!out.status.success());
    let events = json_lines(&stdout(&out));
    let msg = events.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!msg.contains("HTTP 500"), "{msg}");
    assert!(msg.contains("stopped with an error"), "{msg}");
}

#[test]
fn no_secret_in_a_trace_log_of_a_real_request() {
    let server = llm_server(|_| sse_answer(&["Fine, thanks."]));
    // No on-device classifier (nothing for ONNX Runtime to trace at
    // length): the router asks the LLM, so two real requests carry the key.
    let dir = state(&(config_for(&server, "") + "[nlu]\nmodel_file = \"absent.onnx\"\n"));
    let out = run(earshot(dir.path())
        .args(["chat", "how are you"])
        .env_remove("EARSHOT_LOG")
        .env("RUST_LOG", "trace"));
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stderr(&out);
    // A real request went out, with the key in its header.
    assert!(server
        .requests()
        .iter()
        .any(|r| r.header("authorization") == Some("Bearer gsk_test_secret_value_123")));
    let key = "gsk_test_secret_value_123";
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    let spaced: String = key.bytes().map(|b| format!("{b:02x} ")).collect();
    for window in 6..=key.len() {
        for start in 0..=key.len() - window {
            let piece = &key[start..start + window];
            if piece.len() >= 8 {
                assert!(
                    !log.contains(piece),
                    "a piece of the key ({piece}) is in the log"
                );
            }
        }
    }
    assert!(!log.contains(&hex[..16]), "the key is in a hex dump");
    assert!(
        !log.contains(spaced[..24].trim_end()),
        "the key is in a hex dump"
    );
    assert!(!log.to_ascii_lowercase().contains("bearer gsk"), "{log}");
}

/// A tree with no classify node (no model needed): the LLM answers.
const LLM_TREE: &str = r#"{"version":"t","entry":"start","nodes":{
    "start":{"type":"entry","next":"llm"},
    "llm":{"type":"llm_stream","prompt":"simple","next":"done"},
    "done":{"type":"end"}}}"#;

fn last_turn(dir: &Path) -> (Option<i64>, String, String) {
    let c = rusqlite::Connection::open(dir.join("earshot.db")).unwrap();
    c.query_row(
        "SELECT conversation_id, mode, COALESCE(notes, '') FROM turn_log ORDER BY id DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

#[test]
fn the_mode_is_set_per_conversation_and_a_missing_one_starts_anew_on_the_graph() {
    let server = llm_server(|_| sse_answer(&["Fine."]));
    let tree = tempfile::tempdir().unwrap();
    let tree_file = tree.path().join("tree.json");
    std::fs::write(&tree_file, LLM_TREE).unwrap();
    let extra = format!("[tree]\nfile = {:?}\n", tree_file.display().to_string());
    let dir = state(&config_for(&server, &extra));
    // No on-device models: nothing here needs them, and loading them costs
    // seconds per process.
    let chat = |args: &[&str]| {
        let mut cmd = earshot(dir.path());
        cmd.env("EARSHOT_MODELS_DIR", tree.path())
            .arg("chat")
            .args(args);
        run(&mut cmd)
    };
    let done = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", stderr(out));
        json_lines(&stdout(out)).last().unwrap().clone()
    };
    // --mode without --conversation: a new conversation already in it.
    let said = "please remind me to water the tomatoes before the heatwave arrives on Saturday";
    let first = done(&chat(&[said, "--mode", "tree", "--json"]));
    let conv = first["conversation_id"].as_i64().unwrap();
    assert_eq!(last_turn(dir.path()).1, "tree");
    let c = conv.to_string();
    // Before any summary, `history` shows the first words, not "(untitled)".
    let want = "\"please remind me to water the tomatoes before the heatwave…\"";
    let listed = stdout(&run(earshot(dir.path()).args(["history"])));
    assert!(listed.trim_end().ends_with(want), "{listed}");
    let v: Value = serde_json::from_str(&stdout(&run(
        earshot(dir.path()).args(["history", "--json"])
    )))
    .unwrap();
    assert_eq!(v[0]["preview"], want.trim_matches('"'));
    assert_eq!(v[0]["title"], Value::Null);
    let v: Value = serde_json::from_str(&stdout(&run(
        earshot(dir.path()).args(["history", &c, "--json"])
    )))
    .unwrap();
    assert_eq!(v["conversation"]["mode"], "tree");

    // Switched on an existing conversation, and shown by `history ID`.
    let second = done(&chat(&[
        "second",
        "--conversation",
        &c,
        "--mode",
        "graph",
        "--json",
    ]));
    assert_eq!(second["conversation_id"], conv);
    assert_eq!(last_turn(dir.path()).1, "graph");
    let shown = run(earshot(dir.path()).args(["history", &c]));
    assert!(
        stdout(&shown)
            .lines()
            .next()
            .unwrap()
            .ends_with("mode graph"),
        "{}",
        stdout(&shown)
    );

    // A conversation that does not exist: a new one, on the graph, a warning.
    let out = chat(&["third", "--conversation", "999", "--json"]);
    let third = done(&out);
    let new = third["conversation_id"].as_i64().unwrap();
    assert!(new != 999 && new != conv, "{third}");
    assert!(
        stderr(&out).contains("conversation not found"),
        "{}",
        stderr(&out)
    );
    let (logged_conv, mode, notes) = last_turn(dir.path());
    assert_eq!((logged_conv, mode.as_str()), (Some(new), "graph"));
    assert!(notes.contains("conversation 999 not found"), "{notes}");

    // A bad mode: one line naming the choices, before anything is loaded.
    let out = chat(&["x", "--mode", "trees"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("tree") && stderr(&out).contains("graph"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
}
