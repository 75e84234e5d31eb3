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

fn patch_json(url: &str, body: &str) -> (u16, Value) {
    let mut resp = agent()
        .patch(url)
        .header("Content-Type", "application/json")
        .send(body)
        .unwrap();
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

    // The mode of one conversation (seed 004): set, shown, cleared.
    let one_url = serve.url(&format!("/api/conversations/{id}"));
    let (status, v) = patch_json(&one_url, r#"{"mode": "tree"}"#);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["conversation"]["mode"], "tree");
    assert_eq!(get_json(&one_url, None).1["conversation"]["mode"], "tree");
    let (status, v) = patch_json(&one_url, r#"{"mode": null}"#);
    assert_eq!((status, &v["conversation"]["mode"]), (200, &Value::Null));
    for (body, want_status, want) in [
        (r#"{"mode": "trees"}"#, 400, "tree"),
        (r#"{"mode": 1}"#, 400, "must be"),
        ("{}", 400, "missing field \"mode\""),
    ] {
        let (status, v) = patch_json(&one_url, body);
        assert_eq!(status, want_status, "{body} → {v}");
        assert!(error_of(&v).contains(want), "{body} → {v}");
    }
    let (status, v) = patch_json(
        &serve.url("/api/conversations/99999"),
        r#"{"mode": "tree"}"#,
    );
    assert_eq!(status, 404, "{v}");
    let resp = agent().delete(&one_url).call().unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers().get("allow").unwrap(), "GET, PATCH");

    // A conversation that does not exist: the turn starts a new one on the
    // router graph (seed 004's fail-open), with a warning in the log.
    let chat = serve.url("/api/chat");
    let (status, v) = post_json(&chat, r#"{"text": "hi", "conversation_id": 99999}"#, None);
    assert_eq!(status, 200, "{v}");
    let new = v["conversation_id"].as_i64().unwrap();
    assert!(new != 99999 && new != id, "{v}");
    assert!(
        serve
            .output
            .lock()
            .unwrap()
            .contains("conversation not found"),
        "no warning logged"
    );

    // Errors: each a 4xx with a JSON sentence.
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

// ---------------------------------------------------------------------
// Hardening (issue 23): floods, header limits, browser pages, input caps.
// Raw sockets, so every byte (Host, Origin, half requests) is the test's.
// ---------------------------------------------------------------------

/// Speech engines off: these servers start fast and need no models.
const NO_SPEECH: &str =
    "[stt]\norder = \"local-only\"\nwhisper_model = \"missing.bin\"\n[tts]\norder = []\n";

fn addr_of(serve: &Serve) -> String {
    serve.base.trim_start_matches("http://").to_string()
}

/// A parsed raw answer.
#[derive(Debug)]
struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {:?}", String::from_utf8_lossy(&self.body)))
    }
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

fn parse_raw(bytes: &[u8]) -> Option<Raw> {
    let text = String::from_utf8_lossy(bytes);
    let end = text.find("\r\n\r\n")?;
    let head = text[..end].to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Raw {
        status,
        head,
        body: bytes[end + 4..].to_vec(),
    })
}

/// Read what the server sends until it closes (every answer closes), or
/// `wait` passes; `None` if nothing parseable came.
fn read_answer(stream: &mut std::net::TcpStream, wait: Duration) -> Option<Raw> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    parse_raw(&bytes)
}

/// Send `request` as is and read the answer.
fn raw(addr: &str, request: &[u8]) -> Raw {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request).unwrap();
    read_answer(&mut stream, Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no answer to {:?}", String::from_utf8_lossy(request)))
}

/// A request with a Host of `addr` and the given extra header lines.
fn req(method: &str, path: &str, addr: &str, headers: &[&str], body: &str) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

/// Poll GET /api/health until it answers 200; panics after `limit`.
/// Returns how long it took.
fn health_within(addr: &str, limit: Duration) -> Duration {
    use std::io::Write;
    let start = Instant::now();
    loop {
        let ok = std::net::TcpStream::connect(addr)
            .ok()
            .and_then(|mut s| {
                s.write_all(&req("GET", "/api/health", addr, &[], ""))
                    .ok()?;
                read_answer(&mut s, Duration::from_millis(250))
            })
            .is_some_and(|r| r.status == 200);
        if ok {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "/api/health did not answer within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A connection that sent half a request head and waits.
fn slow_connection(addr: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let _ = s.write_all(format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").as_bytes());
    s
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Point 1: slow connections beyond `api.max_connections` get a 503 at
/// once, the ones inside it a 408 at `api.header_timeout_ms`, and health
/// answers within 1 s of the flood ending — while the attacker still holds
/// every socket open. Header blocks over 16 KiB or 64 fields are a 431 and
/// cost no memory.
#[test]
fn slow_connection_flood_is_capped_timed_out_and_health_recovers() {
    let llm = fake_llm(Duration::ZERO);
    let config = format!(
        "[api]\nmax_connections = 8\nheader_timeout_ms = 300\nmax_tts_chars = 10\n{NO_SPEECH}"
    );
    let serve = Serve::start(&llm, &config, &[], "127.0.0.1:0");
    let addr = addr_of(&serve);
    health_within(&addr, Duration::from_secs(5));

    // 40 half requests, held open.
    let mut flood: Vec<std::net::TcpStream> = (0..40).map(|_| slow_connection(&addr)).collect();
    health_within(&addr, Duration::from_secs(1));
    // Every flood connection got an answer: 503 (over the cap) or 408.
    let mut statuses = std::collections::BTreeMap::new();
    for s in &mut flood {
        let answer = read_answer(s, Duration::from_secs(2)).expect("an answer, not a hang");
        if answer.status == 503 {
            assert!(
                error_of(&answer.json()).contains("api.max_connections = 8"),
                "{answer:?}"
            );
        }
        if answer.status == 408 {
            assert!(
                error_of(&answer.json()).contains("api.header_timeout_ms"),
                "{answer:?}"
            );
        }
        *statuses.entry(answer.status).or_insert(0) += 1;
    }
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert!(statuses[&503] >= 30, "{statuses:?}");
    assert!((1..=8).contains(&statuses[&408]), "{statuses:?}");
    drop(flood);

    // Header block over 16 KiB: 431, read no further (a 20 MB header line
    // sent in the background leaves the server's memory where it was).
    let rss_before = rss_kib(serve.child.id());
    let mut big = std::net::TcpStream::connect(&addr).unwrap();
    let mut writer = big.try_clone().unwrap();
    let head = format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nX-Big: ");
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        let _ = writer.write_all(head.as_bytes());
        let line = vec![b'a'; 1024 * 1024];
        for _ in 0..20 {
            if writer.write_all(&line).is_err() {
                break;
            }
        }
    });
    let answer = read_answer(&mut big, Duration::from_secs(10)).expect("an answer");
    assert_eq!(answer.status, 431, "{answer:?}");
    assert!(
        error_of(&answer.json()).contains("16384 bytes"),
        "{answer:?}"
    );
    sender.join().unwrap();
    let grown = rss_kib(serve.child.id()).saturating_sub(rss_before);
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");

    // Too many header fields: 431.
    let fields: Vec<String> = (0..100).map(|i| format!("X-F{i}: 1")).collect();
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let answer = raw(&addr, &req("GET", "/api/health", &addr, &fields, ""));
    assert_eq!(answer.status, 431, "{answer:?}");
    assert!(error_of(&answer.json()).contains("64 header fields"));
    // A request line that never ends is a 431 too, not a hang.
    let answer = raw(
        &addr,
        format!("GET /{} HTTP/1.1\r\n", "a".repeat(20_000)).as_bytes(),
    );
    assert_eq!(answer.status, 431, "{answer:?}");

    // TTS text over the configured limit (10 here): 413 naming it.
    let answer = raw(
        &addr,
        &req(
            "POST",
            "/api/tts",
            &addr,
            &["Content-Type: application/json"],
            r#"{"text": "eleven char"}"#,
        ),
    );
    assert_eq!(answer.status, 413, "{answer:?}");
    assert!(
        error_of(&answer.json()).contains("limit is 10 (api.max_tts_chars)"),
        "{answer:?}"
    );
    // Still serving.
    health_within(&addr, Duration::from_secs(1));
}

/// Point 1: out of file descriptors (EMFILE), the accept loop logs it,
/// sheds, and keeps going; once the flood closes, health answers within
/// 1 s.
#[test]
fn out_of_file_descriptors_the_api_lives_on() {
    let llm = fake_llm(Duration::ZERO);
    let config = format!("[api]\nmax_connections = 500\nheader_timeout_ms = 20000\n{NO_SPEECH}");
    let serve = Serve::start(&llm, &config, &[], "127.0.0.1:0");
    let addr = addr_of(&serve);
    health_within(&addr, Duration::from_secs(5));
    let pid = serve.child.id();
    // Leave the server 12 free descriptors (the limit caps the lowest
    // free number, and some libraries hold high ones).
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .collect();
    let mut limit = 0u64;
    let mut free = 0;
    while free < 12 {
        if !open.contains(&limit) {
            free += 1;
        }
        limit += 1;
    }
    // SAFETY: prlimit with valid pointers on our own child.
    let rc = unsafe {
        let mut current: libc::rlimit = std::mem::zeroed();
        libc::prlimit(
            pid as i32,
            libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut current,
        );
        let lowered = libc::rlimit {
            rlim_cur: limit,
            rlim_max: current.rlim_max,
        };
        libc::prlimit(
            pid as i32,
            libc::RLIMIT_NOFILE,
            &lowered,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit failed: {}", std::io::Error::last_os_error());

    let flood: Vec<std::net::TcpStream> = (0..60).map(|_| slow_connection(&addr)).collect();
    // The server said so (once, not once per connection).
    let deadline = Instant::now() + Duration::from_secs(5);
    let said = || {
        serve
            .output
            .lock()
            .unwrap()
            .matches("out of file descriptors")
            .count()
    };
    while said() == 0 {
        assert!(Instant::now() < deadline, "no EMFILE log line");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(flood);
    health_within(&addr, Duration::from_secs(1));
    let output = serve.output.lock().unwrap().clone();
    assert_eq!(said(), 1, "{output}");
    assert!(output.contains("Too many open files"), "{output}");
}

/// Point 1: the token is checked on the head, before the body: a
/// tokenless request declaring a 1 MB body gets its 401 without sending
/// any of it, and `Expect: 100-continue` only gets "100 Continue" once the
/// token is right. Also the cap: closing slow connections frees their
/// slots at once (the header deadline here is long).
#[test]
fn the_token_is_checked_before_the_body_is_read_and_closing_frees_slots() {
    use std::io::Write;
    let llm = fake_llm(Duration::ZERO);
    let token = "hardening-token";
    let config = format!(
        "[api]\ntoken = \"{token}\"\nmax_connections = 3\nheader_timeout_ms = 20000\n{NO_SPEECH}"
    );
    let serve = Serve::start(&llm, &config, &[], "127.0.0.1:0");
    let addr = addr_of(&serve);
    health_within(&addr, Duration::from_secs(5));
    // The cap: 3 slow connections on this 3-slot server, a 4th gets 503;
    // closing the 3 frees the slots at once (no deadline involved).
    let mut held: Vec<std::net::TcpStream> = (0..3).map(|_| slow_connection(&addr)).collect();
    // One of the three may have met a health probe's connection still
    // open (then it got the 503, and a slot is free again): a connection
    // that gets no answer holds a slot too, and the next one is tried,
    // until the server is full.
    let answer = loop {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        match read_answer(&mut s, Duration::from_secs(2)) {
            Some(answer) => break answer,
            None => {
                assert!(
                    held.len() < 6,
                    "no 503 with {} connections held",
                    held.len()
                );
                held.push(s);
            }
        }
    };
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(answer.header("retry-after").as_deref(), Some("1"));
    drop(held);
    health_within(&addr, Duration::from_secs(1));

    let head = |auth: &str| {
        format!(
            "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n{auth}\r\n"
        )
    };
    // Health answering means one slot is free; the probes' own
    // connections may hold the others a moment longer, and the server
    // says so with its 503 + Retry-After: a client tries again.
    let admitted_within = Duration::from_secs(2);
    for auth in ["", "Authorization: Bearer wrong\r\n"] {
        let since = Instant::now();
        let (answer, started) = loop {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.write_all(head(auth).as_bytes()).unwrap();
            let started = Instant::now();
            let answer = read_answer(&mut s, Duration::from_secs(5)).expect("a 401");
            if answer.status != 503 || since.elapsed() > admitted_within {
                break (answer, started);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(answer.status, 401, "{answer:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!answer.head.contains("100 Continue"), "{answer:?}");
        assert_eq!(answer.header("www-authenticate").as_deref(), Some("Bearer"));
    }
    // The right token: "100 Continue", then the body is read.
    let body = r#"{"text": "hi"}"#;
    let since = Instant::now();
    let (mut s, first) = loop {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(
            format!(
                "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nAuthorization: Bearer {token}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
        let mut first = [0u8; 25];
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.read_exact(&mut first).unwrap();
        if !first.starts_with(b"HTTP/1.1 503") || since.elapsed() > admitted_within {
            break (s, first);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(&first, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(body.as_bytes()).unwrap();
    let answer = read_answer(&mut s, Duration::from_secs(20)).expect("an answer");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["response"], "Hello there, friend.");
    assert!(!serve.output.lock().unwrap().contains(token));
}

/// Point 2: what a web page could send to the token-less loopback API is
/// refused, and nothing is stored: a `text/plain` POST (no preflight), a
/// foreign `Origin`, a rebinding `Host`. Listed hosts and origins work,
/// with CORS headers and a preflight for the origin.
///
/// Point 3 on the same server: every text input has a limit with a clear
/// 413: TTS text at 2,000 characters by default (the configured value is
/// checked in the flood test), chat text at 8,000, a feedback note at the
/// chat limit.
#[test]
fn browser_pages_cannot_drive_the_api_and_text_inputs_are_capped() {
    let llm = fake_llm(Duration::ZERO);
    let config = format!(
        "[api]\nallowed_hosts = [\"earshot.local\"]\nallowed_origins = [\"http://localhost:3000\"]\n{NO_SPEECH}"
    );
    let serve = Serve::start(&llm, &config, &[], "127.0.0.1:0");
    let addr = addr_of(&serve);
    let port = addr.rsplit(':').next().unwrap().to_string();
    let chat = r#"{"text": "remember that my pin is 1234"}"#;

    // The cross-origin "simple request" a page sends without a preflight.
    let answer = raw(
        &addr,
        &req(
            "POST",
            "/api/chat",
            &addr,
            &["Content-Type: text/plain;charset=UTF-8"],
            chat,
        ),
    );
    assert_eq!(answer.status, 415, "{answer:?}");
    assert!(error_of(&answer.json()).contains("application/json"));
    // Same with a foreign Origin, even as JSON.
    for content_type in ["text/plain", "application/json"] {
        let answer = raw(
            &addr,
            &req(
                "POST",
                "/api/chat",
                &addr,
                &[
                    &format!("Content-Type: {content_type}"),
                    "Origin: https://evil.example",
                ],
                chat,
            ),
        );
        assert_eq!(answer.status, 403, "{answer:?}");
        assert!(error_of(&answer.json()).contains("allowed_origins"));
        assert!(answer.header("access-control-allow-origin").is_none());
    }
    // Forms and multipart on JSON routes are refused too.
    let answer = raw(
        &addr,
        &req(
            "POST",
            "/api/tts",
            &addr,
            &["Content-Type: application/x-www-form-urlencoded"],
            "text=hi",
        ),
    );
    assert_eq!(answer.status, 415, "{answer:?}");
    // Voice takes multipart only.
    let answer = raw(
        &addr,
        &req(
            "POST",
            "/api/voice",
            &addr,
            &["Content-Type: text/plain"],
            "x",
        ),
    );
    assert_eq!(answer.status, 415, "{answer:?}");
    // DNS rebinding: the page's own name as Host, reading conversations.
    let rebound = format!("rebind.evil.example:{port}");
    let answer = raw(&addr, &req("GET", "/api/conversations", &rebound, &[], ""));
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(error_of(&answer.json()).contains("allowed_hosts"));
    // Nothing reached the LLM and nothing was stored.
    assert!(llm.requests().is_empty(), "{:?}", llm.requests());
    let answer = raw(&addr, &req("GET", "/api/conversations", &addr, &[], ""));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["conversations"], json!([]));

    // Allowed: localhost and a listed name, any port.
    for host in [format!("localhost:{port}"), "earshot.local".to_string()] {
        let answer = raw(&addr, &req("GET", "/api/conversations", &host, &[], ""));
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }
    // A listed origin: preflight, then the call, both with CORS headers.
    let answer = raw(
        &addr,
        &req(
            "OPTIONS",
            "/api/chat",
            &addr,
            &[
                "Origin: http://localhost:3000",
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: content-type",
            ],
            "",
        ),
    );
    assert_eq!(answer.status, 204, "{answer:?}");
    assert_eq!(
        answer.header("access-control-allow-origin").as_deref(),
        Some("http://localhost:3000")
    );
    assert!(answer
        .header("access-control-allow-headers")
        .unwrap()
        .contains("Content-Type"));
    let answer = raw(
        &addr,
        &req(
            "POST",
            "/api/chat",
            &addr,
            &[
                "Content-Type: application/json",
                "Origin: http://localhost:3000",
            ],
            r#"{"text": "hello"}"#,
        ),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.header("access-control-allow-origin").as_deref(),
        Some("http://localhost:3000")
    );

    // Point 3: over-limit texts never reach the LLM.
    let llm_seen = llm.requests().len();
    let post = |path: &str, body: &Value| post_json(&serve.url(path), &body.to_string(), None);
    let (status, v) = post("/api/tts", &json!({"text": "é".repeat(2001)}));
    assert_eq!(status, 413, "{v}");
    assert!(
        error_of(&v).contains("2001 characters; the limit is 2000 (api.max_tts_chars)"),
        "{v}"
    );
    // At the limit it goes on to synthesis (no engine here: 503).
    let (status, v) = post("/api/tts", &json!({"text": "a".repeat(2000)}));
    assert_eq!(status, 503, "{v}");
    for path in ["/api/chat", "/api/chat/stream"] {
        let (status, v) = post(path, &json!({"text": "a".repeat(8001)}));
        assert_eq!(status, 413, "{path}: {v}");
        assert!(
            error_of(&v).contains("limit is 8000 (api.max_chat_chars)"),
            "{v}"
        );
    }
    let (status, v) = post(
        "/api/feedback",
        &json!({"turn_id": 1, "kind": "error", "note": "n".repeat(8001)}),
    );
    assert_eq!(status, 413, "{v}");
    assert!(error_of(&v).contains("api.max_chat_chars"), "{v}");
    assert_eq!(llm.requests().len(), llm_seen);
}

/// Point 1: the unit raises the descriptor limit well above the API's
/// connection cap (and the rest of the process).
#[test]
fn the_unit_sets_a_descriptor_limit() {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/earshot.service"),
    )
    .unwrap();
    let limit: u64 = unit
        .lines()
        .find_map(|l| l.trim().strip_prefix("LimitNOFILE="))
        .expect("LimitNOFILE= in the unit")
        .trim()
        .parse()
        .unwrap();
    let cap = earshot::api::ApiConfig::default().max_connections as u64;
    assert!(limit >= 4096 && limit >= 16 * cap, "LimitNOFILE={limit}");
}

/// A tree whose LLM answer goes through `execute_tags` (no classify node,
/// so no model is needed).
const TAGS_TREE: &str = r#"{"version":"t","entry":"start","nodes":{
    "start":{"type":"entry","next":"light"},
    "light":{"type":"publish_event","event":"listening","data":{"heard":"{text}"},"next":"llm"},
    "llm":{"type":"llm_stream","prompt":"simple","next":"tags"},
    "tags":{"type":"execute_tags","on_changes":"done","on_no_changes":"done"},
    "done":{"type":"end"}}}"#;

#[test]
fn stream_keeps_action_tags_out_of_content_frames_and_carries_tree_events() {
    use std::io::Write;
    // The tag arrives cut in three pieces.
    let llm = TestServer::start(|req: &Request| {
        if req.json()["stream"] == json!(true) {
            let chunks = openai_stream_chunks(
                MODEL,
                &[
                    "Sure, I added it [",
                    "[todo",
                    ".add: buy fl",
                    "our]]. Done!",
                ],
            );
            let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
            Reply::sse(&refs)
        } else {
            Reply::json(200, &openai_completion(MODEL, "simple"))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree.json");
    std::fs::write(&tree, TAGS_TREE).unwrap();
    let config = format!(
        "[api]\nkeepalive_secs = 1\n[tree]\nfile = {:?}\n",
        tree.display().to_string()
    );
    // No on-device models: this tree needs none, and loading them costs
    // seconds at start-up.
    let no_models = dir.path().to_str().unwrap();
    let serve = Serve::start(
        &llm,
        &config,
        &[("EARSHOT_MODE", "tree"), ("EARSHOT_MODELS_DIR", no_models)],
        "127.0.0.1:0",
    );
    // A companion app listening on the device's event stream.
    let mut events = std::net::TcpStream::connect(addr_of(&serve)).unwrap();
    events
        .write_all(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    events
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut seen = String::new();
    let mut read_until = |needle: &str, seen: &mut String| {
        let mut buf = [0u8; 4096];
        while !seen.contains(needle) {
            let n = events.read(&mut buf).unwrap_or(0);
            assert!(n > 0, "stream ended before {needle:?}: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    };
    read_until("text/event-stream", &mut seen);
    let (status, _, items) = post_stream(
        &serve.url("/api/chat/stream"),
        r#"{"text":"put flour on my list"}"#,
    );
    assert_eq!(status, 200);
    let frames: Vec<&Value> = items
        .iter()
        .filter_map(|i| match i {
            Sse::Data(v, _) => Some(v),
            _ => None,
        })
        .collect();
    let content: Vec<&str> = frames
        .iter()
        .filter(|f| f["type"] == "content")
        .map(|f| f["data"].as_str().unwrap())
        .collect();
    assert!(content.iter().all(|c| !c.contains('[')), "{content:?}");
    assert_eq!(content.concat(), "Sure, I added it. Done!");
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["response"], "Sure, I added it. Done!");
    // The tag ran, and the prompt said which tags exist.
    assert!(done["actions"].to_string().contains("todo_add"), "{done}");
    let system = llm
        .requests()
        .iter()
        .find(|r| r.json()["stream"] == json!(true))
        .map(|r| {
            r.json()["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .unwrap();
    assert!(system.contains("[[todo.add: ITEM]]"), "{system}");
    assert!(
        system.lines().last().unwrap().starts_with("Now:"),
        "{system}"
    );

    // The tree's publish_event: a frame in the turn's stream, before its
    // answer, and the same on GET /api/events.
    let event = frames.iter().position(|f| f["type"] == "event").unwrap();
    let first_content = frames.iter().position(|f| f["type"] == "content").unwrap();
    assert!(event < first_content, "{frames:?}");
    let f = frames[event];
    assert_eq!(f["event"], "listening");
    assert_eq!(f["data"], json!({"heard": "put flour on my list"}));
    assert!(chrono::DateTime::parse_from_rfc3339(f["timestamp"].as_str().unwrap()).is_ok());
    read_until("\"listening\"", &mut seen);
    let pushed: Value = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|v| v["type"] == "event")
        .unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(pushed["event"], "listening");
    assert_eq!(pushed["data"], f["data"]);
    assert_eq!(pushed["conversation_id"], Value::Null);
    assert!(pushed["timestamp"].is_string(), "{pushed}");
}
