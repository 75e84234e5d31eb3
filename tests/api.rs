//! The HTTP API end to end: the real `earshot serve` on a loopback port, a
//! real HTTP client (ureq), and an OpenAI-compatible loopback server as the
//! LLM. Every endpoint, every error class, the SSE frames as a client
//! parses them, the token rules, and graceful shutdown.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::http::{openai_completion, openai_stream_chunks, Piece, Reply, Request, TestServer};
use serde_json::{json, Value};

const MODEL: &str = "test-model";

/// The fake LLM: classification requests (non-streamed) answer `simple`;
/// streamed requests answer "Hello there, friend." in pieces, pausing
/// `pause` between them.
fn fake_llm(pause: Duration) -> TestServer {
    TestServer::start(move |req: &Request| {
        if req.path.ends_with("/models") {
            return Reply::json(200, r#"{"object":"list","data":[]}"#);
        }
        let body = req.json();
        if body["stream"] == json!(true) {
            let chunks = openai_stream_chunks(MODEL, &["Hello", " there,", " friend."]);
            let mut reply = Reply::new(200)
                .header("Content-Type", "text/event-stream")
                .streamed();
            for (i, c) in chunks.iter().enumerate() {
                if i > 0 && i < chunks.len() - 1 && !pause.is_zero() {
                    reply = reply.piece(Piece::Pause(pause));
                }
                reply = reply.piece(Piece::Bytes(format!("data: {c}\n\n").into_bytes()));
            }
            reply
        } else {
            Reply::json(200, &openai_completion(MODEL, "simple"))
        }
    })
}

/// A running `earshot serve`.
struct Serve {
    child: Child,
    base: String,
    _state: tempfile::TempDir,
    output: Arc<Mutex<String>>,
}

impl Serve {
    fn start(llm: &TestServer, config: &str, extra_env: &[(&str, &str)], bind: &str) -> Serve {
        let state = tempfile::tempdir().unwrap();
        let config_path = state.path().join("earshot.toml");
        std::fs::write(&config_path, config).unwrap();
        let mut cmd = common::earshot(state.path());
        cmd.arg("--config")
            .arg(&config_path)
            .args(["serve", "--bind", bind])
            .env("LLM_BASE_URL", llm.url())
            .env("EARSHOT_MODE", "graph")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn earshot serve");
        let output = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let mut reader = BufReader::new(stderr);
            while reader.read_line(&mut text).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&text);
                text.clear();
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        output.lock().unwrap().push_str(&line);
        let base = line
            .trim()
            .strip_prefix("earshot: listening on ")
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; stderr: {}",
                    output.lock().unwrap()
                )
            })
            .to_string();
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stdout.read_to_string(&mut rest);
            sink.lock().unwrap().push_str(&rest);
        });
        Serve {
            child,
            base,
            _state: state,
            output,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// (status, parsed JSON body)
fn post_json(url: &str, body: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = agent().post(url).header("Content-Type", "application/json");
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let mut resp = req.send(body).unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}")),
    )
}

fn get_json(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = agent().get(url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let mut resp = req.call().unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}")),
    )
}

fn error_of(v: &Value) -> &str {
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field in {v}"))
}

/// One SSE item as a client sees it.
#[derive(Debug)]
enum Sse {
    Data(Value, Instant),
    Comment(String),
}

/// POST and parse the SSE body item by item, timing each arrival.
fn post_stream(url: &str, body: &str) -> (u16, String, Vec<Sse>) {
    let resp = agent()
        .post(url)
        .header("Content-Type", "application/json")
        .send(body)
        .unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut reader = BufReader::new(resp.into_body().into_reader());
    let mut items = Vec::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        let l = line.trim_end_matches(['\r', '\n']);
        if let Some(data) = l.strip_prefix("data: ") {
            items.push(Sse::Data(
                serde_json::from_str(data).unwrap(),
                Instant::now(),
            ));
        } else if let Some(comment) = l.strip_prefix(':') {
            items.push(Sse::Comment(comment.trim().to_string()));
        } else {
            assert!(l.is_empty(), "unexpected SSE line {l:?}");
        }
        line.clear();
    }
    (status, content_type, items)
}

fn wav_bytes() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for i in 0..16000 {
        w.write_sample(((i as f32 * 0.05).sin() * 3000.0) as i16)
            .unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

fn silent_wav() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for _ in 0..16000 {
        w.write_sample(0i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

fn multipart(field: &str, data: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----earshot-test-boundary";
    let mut body = Vec::new();
    body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"clip.wav\"\r\nContent-Type: audio/wav\r\n\r\n").as_bytes());
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn post_raw(url: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
    let mut resp = agent()
        .post(url)
        .header("Content-Type", content_type)
        .send(body)
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}")),
    )
}

#[test]
fn chat_conversations_and_every_error() {
    let llm = fake_llm(Duration::ZERO);
    let serve = Serve::start(&llm, "", &[], "127.0.0.1:0");
    assert!(
        serve.base.starts_with("http://127.0.0.1:"),
        "{}",
        serve.base
    );

    // Health.
    let (status, body) = get_json(&serve.url("/api/health"), None);
    assert_eq!((status, body), (200, json!({"status": "ok"})));

    // A turn through the real router + node + fake LLM, stored in SQLite.
    let (status, body) = post_json(
        &serve.url("/api/chat"),
        r#"{"text":"tell me something nice"}"#,
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["response"], "Hello there, friend.");
    assert_eq!(body["route"], "simple");
    assert!(body.get("intent").is_some(), "{body}");
    let id = body["conversation_id"].as_i64().unwrap();
    let turn = body["turn_id"].as_i64().unwrap();

    // Feedback on that turn (R-OBS): an error lands in the review queue.
    let (status, fb) = post_json(
        &serve.url("/api/feedback"),
        &json!({"turn_id": turn, "kind": "error", "note": "wrong"}).to_string(),
        None,
    );
    assert_eq!(status, 200, "{fb}");
    assert!(fb["feedback_id"].as_i64().unwrap() > 0, "{fb}");
    let (status, fb) = post_json(
        &serve.url("/api/feedback"),
        &json!({"turn_id": turn, "kind": "meh"}).to_string(),
        None,
    );
    assert_eq!(status, 400, "{fb}");
    assert!(error_of(&fb).contains("not_helpful"), "{fb}");
    let (status, fb) = post_json(
        &serve.url("/api/feedback"),
        &json!({"turn_id": 999_999, "kind": "error"}).to_string(),
        None,
    );
    assert_eq!(status, 404, "{fb}");

    // Continue the same conversation.
    let (status, body) = post_json(
        &serve.url("/api/chat"),
        &json!({"text": "and again", "conversation_id": id}).to_string(),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["conversation_id"], id);
    // The LLM saw the history of the first turn.
    let last = llm
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.json()["stream"] == json!(true))
        .unwrap();
    assert!(
        last.text().contains("tell me something nice"),
        "{}",
        last.text()
    );

    // Conversations list and one conversation.
    let (status, list) = get_json(&serve.url("/api/conversations"), None);
    assert_eq!(status, 200);
    let ids: Vec<i64> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![id]);
    let (status, one) = get_json(&serve.url(&format!("/api/conversations/{id}")), None);
    assert_eq!(status, 200);
    let messages: Vec<(String, String)> = one["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(messages.len(), 4, "{one}");
    assert_eq!(
        messages[0],
        ("user".into(), "tell me something nice".into())
    );
    assert_eq!(
        messages[1],
        ("assistant".into(), "Hello there, friend.".into())
    );

    // Errors: each a 4xx with a JSON sentence.
    let chat = serve.url("/api/chat");
    let cases: &[(&str, u16, &str)] = &[
        (r#"{"conversation_id": 1}"#, 400, "missing field \"text\""),
        (r#"{"text": 42}"#, 400, "must be a string, not a number"),
        (r#"{"text": ["a"]}"#, 400, "not an array"),
        (r#"{"text": "   "}"#, 400, "empty"),
        (
            r#"{"text": "hi", "conversation_id": "7"}"#,
            400,
            "must be an integer",
        ),
        (
            r#"{"text": "hi", "conversation_id": 1.5}"#,
            400,
            "positive integer",
        ),
        (r#"{"text": "hi""#, 400, "not valid JSON"),
        (r#"["text"]"#, 400, "must be a JSON object"),
        ("", 400, "empty"),
        (
            r#"{"text": "hi", "conversation_id": 99999}"#,
            404,
            "does not exist",
        ),
    ];
    for (body, want_status, want_text) in cases {
        let (status, v) = post_json(&chat, body, None);
        assert_eq!(status, *want_status, "{body} → {v}");
        assert!(error_of(&v).contains(want_text), "{body} → {v}");
    }
    let (status, v) = get_json(&serve.url("/api/conversations/99999"), None);
    assert_eq!(status, 404, "{v}");
    let (status, v) = get_json(&serve.url("/api/conversations/abc"), None);
    assert_eq!(status, 400, "{v}");
    let (status, v) = get_json(&serve.url("/api/nope"), None);
    assert_eq!(status, 404, "{v}");
    assert!(error_of(&v).contains("no such endpoint"));
    let mut resp = agent().get(&chat).call().unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers().get("allow").unwrap(), "POST");
    assert!(resp
        .body_mut()
        .read_to_string()
        .unwrap()
        .contains("use POST"));
    let (status, v) = post_json(&serve.url("/api/health"), "{}", None);
    assert_eq!(status, 405, "{v}");

    // A 10 MB body is refused with 413 (limit 8 MiB) — declared length and
    // streamed (chunked, no length) alike — and the server keeps serving.
    let big = format!(r#"{{"text": "{}"}}"#, "a".repeat(10 * 1024 * 1024));
    let (status, v) = post_json(&chat, &big, None);
    assert_eq!(status, 413, "{v}");
    assert!(error_of(&v).contains("max_body_bytes"));
    let resp = agent()
        .post(&chat)
        .header("Content-Type", "application/json")
        .send(ureq::SendBody::from_reader(&mut big.as_bytes()))
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let (status, _) = get_json(&serve.url("/api/health"), None);
    assert_eq!(status, 200);

    // Voice: multipart checks happen before speech is needed.
    let voice = serve.url("/api/voice");
    let (status, v) = post_raw(&voice, "application/json", b"{}");
    assert_eq!(status, 415, "{v}");
    let (ct, body) = multipart("file", &wav_bytes());
    let (status, v) = post_raw(&voice, &ct, &body);
    assert_eq!(status, 400, "{v}");
    assert!(error_of(&v).contains("\"audio\""));
    let (ct, body) = multipart("audio", b"this is not a wav file");
    let (status, v) = post_raw(&voice, &ct, &body);
    assert_eq!(status, 400, "{v}");
    assert!(error_of(&v).contains("not a WAV"));
    let (status, v) = post_raw(&voice, "multipart/form-data; boundary=x", b"garbage");
    assert_eq!(status, 400, "{v}");

    // TTS: body validation.
    let (status, v) = post_json(&serve.url("/api/tts"), r#"{"txt": "hi"}"#, None);
    assert_eq!(status, 400, "{v}");
    assert!(error_of(&v).contains("missing field \"text\""));
}

fn decode_header(headers: &ureq::http::HeaderMap, name: &str) -> String {
    let raw = headers
        .get(name)
        .unwrap_or_else(|| panic!("missing {name}"))
        .to_str()
        .unwrap();
    assert!(raw.is_ascii());
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .unwrap()
        .into_owned()
}

/// Piper speaks a question through POST /api/tts; that WAV goes back in
/// through POST /api/voice (whisper → turn → Piper): the reply is a WAV
/// with the transcript, the answer and the conversation in its headers.
#[test]
fn tts_then_voice_round_trip_through_real_speech_engines() {
    let llm = fake_llm(Duration::ZERO);
    let serve = Serve::start(&llm, "", &[], "127.0.0.1:0");
    let mut resp = agent()
        .post(&serve.url("/api/tts"))
        .header("Content-Type", "application/json")
        .send(r#"{"text": "What time is it?"}"#)
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        200,
        "{}",
        resp.body_mut().read_to_string().unwrap_or_default()
    );
    assert_eq!(resp.headers().get("content-type").unwrap(), "audio/wav");
    let question = resp.body_mut().read_to_vec().unwrap();
    let reader = hound::WavReader::new(&question[..]).unwrap();
    let seconds = reader.duration() as f32 / reader.spec().sample_rate as f32;
    assert!((0.5..5.0).contains(&seconds), "{seconds} s of speech");

    let (ct, body) = multipart("audio", &question);
    let mut resp = agent()
        .post(&serve.url("/api/voice"))
        .header("Content-Type", &ct)
        .send(&body[..])
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let answer = resp.body_mut().read_to_vec().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(headers.get("content-type").unwrap(), "audio/wav");
    assert!(hound::WavReader::new(&answer[..]).unwrap().duration() > 0);
    let transcript = decode_header(&headers, "x-transcript").to_lowercase();
    assert!(transcript.contains("time"), "{transcript}");
    assert_eq!(
        decode_header(&headers, "x-response"),
        "Hello there, friend."
    );
    let id: i64 = decode_header(&headers, "x-conversation-id")
        .parse()
        .unwrap();
    let (status, one) = get_json(&serve.url(&format!("/api/conversations/{id}")), None);
    assert_eq!(status, 200);
    assert!(
        one["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("time"),
        "{one}"
    );

    // A recording with no speech (a second of silence): a spoken "didn't
    // catch" and no turn.
    let (ct, body) = multipart("audio", &silent_wav());
    let mut resp = agent()
        .post(&serve.url("/api/voice"))
        .header("Content-Type", &ct)
        .send(&body[..])
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let headers = resp.headers().clone();
    assert!(decode_header(&headers, "x-response").contains("didn't catch"));
    assert_eq!(decode_header(&headers, "x-conversation-id"), "");
    let _ = resp.body_mut().read_to_vec().unwrap();
}

/// Without speech engines the endpoints say why (503) and text still works.
#[test]
fn voice_and_tts_without_engines_are_a_clear_503() {
    let llm = fake_llm(Duration::ZERO);
    let config =
        "[stt]\norder = \"local-only\"\nwhisper_model = \"missing.bin\"\n[tts]\norder = []\n";
    let serve = Serve::start(&llm, config, &[], "127.0.0.1:0");
    let (ct, body) = multipart("audio", &wav_bytes());
    let (status, v) = post_raw(&serve.url("/api/voice"), &ct, &body);
    assert_eq!(status, 503, "{v}");
    assert!(
        error_of(&v).contains("speech-to-text is not available"),
        "{v}"
    );
    let (status, v) = post_json(&serve.url("/api/tts"), r#"{"text": "hi"}"#, None);
    assert_eq!(status, 503, "{v}");
    assert!(
        error_of(&v).contains("text-to-speech is not available"),
        "{v}"
    );
    let (status, _) = post_json(&serve.url("/api/chat"), r#"{"text": "hi"}"#, None);
    assert_eq!(status, 200);
}

#[test]
fn stream_sends_timestamped_frames_as_the_turn_runs_and_keepalives() {
    // 1.2 s between LLM pieces, keep-alive after 1 s of silence.
    let llm = fake_llm(Duration::from_millis(1200));
    let serve = Serve::start(&llm, "[api]\nkeepalive_secs = 1\n", &[], "127.0.0.1:0");
    let (status, content_type, items) = post_stream(
        &serve.url("/api/chat/stream"),
        r#"{"text":"stream please"}"#,
    );
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );

    let frames: Vec<(&Value, Instant)> = items
        .iter()
        .filter_map(|i| match i {
            Sse::Data(v, t) => Some((v, *t)),
            _ => None,
        })
        .collect();
    for (f, _) in &frames {
        let ts = f["timestamp"]
            .as_str()
            .unwrap_or_else(|| panic!("no timestamp in {f}"));
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
    }
    let content: String = frames
        .iter()
        .filter(|(f, _)| f["type"] == "content")
        .map(|(f, _)| f["data"].as_str().unwrap())
        .collect();
    assert_eq!(content, "Hello there, friend.");
    let (done, done_at) = frames.last().copied().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    for key in ["latency_ms", "model", "route", "intent", "actions"] {
        assert!(done.get(key).is_some(), "done lacks {key}: {done}");
    }
    assert_eq!(done["route"], "simple");
    assert_eq!(done["model"], MODEL);
    assert!(done["latency_ms"].as_u64().unwrap() >= 2000, "{done}");
    // Streamed while the turn ran: the first piece arrived well before done.
    let (_, first_at) = frames
        .iter()
        .find(|(f, _)| f["type"] == "content")
        .copied()
        .unwrap();
    assert!(
        done_at.duration_since(first_at) >= Duration::from_millis(1500),
        "content arrived only at the end"
    );
    // The keep-alive comment is sent during the silences.
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Sse::Comment(c) if c == "thinking")),
        "{items:?}"
    );

    // A bad request is a JSON 4xx, not a stream.
    let (status, v) = post_json(&serve.url("/api/chat/stream"), r#"{"text": false}"#, None);
    assert_eq!(status, 400, "{v}");
}

#[test]
fn stream_reports_llm_failure_as_an_error_frame() {
    let llm = TestServer::start(|req: &Request| {
        if req.json()["stream"] == json!(true) {
            Reply::json(500, r#"{"error":{"message":"boom"}}"#)
        } else {
            Reply::json(200, &openai_completion(MODEL, "simple"))
        }
    });
    let serve = Serve::start(&llm, "[llm]\nmax_retries = 0\n", &[], "127.0.0.1:0");
    let (status, _, items) = post_stream(&serve.url("/api/chat/stream"), r#"{"text":"hello"}"#);
    assert_eq!(status, 200);
    let last = items.iter().rev().find_map(|i| match i {
        Sse::Data(v, _) => Some(v),
        _ => None,
    });
    let last = last.expect("at least one frame");
    assert_eq!(last["type"], "error", "{last}");
    assert!(!last["message"].as_str().unwrap().is_empty());
    assert!(last["timestamp"].is_string());
    // /api/chat turns the same failure into a JSON error.
    let (status, v) = post_json(&serve.url("/api/chat"), r#"{"text":"hello"}"#, None);
    assert_eq!(status, 503, "{v}");
    assert!(!error_of(&v).is_empty());
}

#[test]
fn token_is_required_off_loopback_and_checked() {
    let llm = fake_llm(Duration::ZERO);
    // Off loopback without a token: refuses to start, says why.
    let state = tempfile::tempdir().unwrap();
    let out = common::run(common::earshot(state.path()).args(["serve", "--bind", "0.0.0.0:0"]));
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains("token") && err.contains("0.0.0.0"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // With a token: starts on all interfaces; every route but health needs it.
    let token = "t0ken-for-tests";
    let serve = Serve::start(
        &llm,
        &format!("[api]\ntoken = \"{token}\"\n"),
        &[],
        "0.0.0.0:0",
    );
    let port = serve.base.rsplit(':').next().unwrap().to_string();
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");
    assert_eq!(get_json(&url("/api/health"), None).0, 200);
    let (status, v) = get_json(&url("/api/conversations"), None);
    assert_eq!(status, 401, "{v}");
    assert!(error_of(&v).contains("Bearer"));
    let (status, v) = get_json(&url("/api/conversations"), Some("wrong"));
    assert_eq!(status, 401, "{v}");
    assert!(error_of(&v).contains("wrong bearer token"));
    let (status, v) = post_json(
        &url("/api/chat"),
        r#"{"text":"hi"}"#,
        Some("t0ken-for-test"),
    );
    assert_eq!(status, 401, "{v}");
    let (status, v) = get_json(&url("/api/conversations"), Some(token));
    assert_eq!(status, 200, "{v}");
    let (status, v) = post_json(&url("/api/chat"), r#"{"text":"hi"}"#, Some(token));
    assert_eq!(status, 200, "{v}");
    // The token never shows up in the logs.
    assert!(!serve.output.lock().unwrap().contains(token));
}

#[test]
fn sigterm_finishes_the_in_flight_turn_and_keeps_secrets_out_of_logs() {
    let secret = "sk-secret-0123456789abcdef";
    let llm = fake_llm(Duration::from_millis(400));
    let mut serve = Serve::start(
        &llm,
        "",
        &[("GROQ_API_KEY", secret), ("EARSHOT_LOG", "debug")],
        "127.0.0.1:0",
    );
    let url = serve.url("/api/chat/stream");
    let client = std::thread::spawn(move || post_stream(&url, r#"{"text":"a slow one"}"#));
    // Wait until the turn is under way (the LLM got the streamed request).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !llm
        .requests()
        .iter()
        .any(|r| r.json()["stream"] == json!(true))
    {
        assert!(Instant::now() < deadline, "the turn never reached the LLM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = serve.terminate();
    assert!(status.success(), "exit status {status:?}");
    let (code, _, items) = client.join().unwrap();
    assert_eq!(code, 200);
    let done = items.iter().find_map(|i| match i {
        Sse::Data(v, _) if v["type"] == "done" => Some(v.clone()),
        _ => None,
    });
    let done = done.expect("the in-flight turn finished after SIGTERM");
    assert_eq!(done["response"], "Hello there, friend.");
    // The key reached the LLM (so it was in use) but never the output.
    assert!(llm
        .requests()
        .iter()
        .any(|r| r.header("authorization") == Some(&format!("Bearer {secret}"))));
    std::thread::sleep(Duration::from_millis(100));
    let output = serve.output.lock().unwrap().clone();
    assert!(
        output.contains("DEBUG") || output.contains("INFO"),
        "logging was on: {output}"
    );
    assert!(
        !output.contains("0123456789abcdef"),
        "secret leaked: {output}"
    );
}
