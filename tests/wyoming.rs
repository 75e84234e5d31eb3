//! `earshot wyoming serve` against Home Assistant's own Wyoming client
//! library (wyoming 1.10.2 from PyPI, in .venv/wyoming-client, created by
//! scripts/venv-wyoming-client.sh), plus malformed frames sent raw to the
//! server and received by earshot's client.
//!
//! One server process (models loaded once) serves every test of this
//! binary; it is started by a thread that lives as long as the test
//! process, with PR_SET_PDEATHSIG so it never outlives us.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use earshot::wyoming_proto::protocol::{read_event, write_event, Event, Limits, ProtocolError};
use earshot::wyoming_proto::{Connection, WyomingUri};
use serde_json::{json, Value};

/// The shared server: its port, state dir and stderr log file.
struct Served {
    port: u16,
    state: PathBuf,
    stderr: PathBuf,
}

fn venv_python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/wyoming-client/bin/python");
    assert!(
        py.is_file(),
        "{} is missing: run scripts/venv-wyoming-client.sh (it installs wyoming==1.10.2 from PyPI)",
        py.display()
    );
    py
}

/// Start `earshot wyoming serve --uri tcp://127.0.0.1:0` in `state` with
/// stderr in `state/stderr.log`; returns the child and its port once it
/// prints its listening line.
fn start_server(state: &Path, extra: &[&str]) -> (Child, u16) {
    std::fs::create_dir_all(state).unwrap();
    let stderr = std::fs::File::create(state.join("stderr.log")).unwrap();
    let mut cmd = common::earshot(state);
    cmd.args(["wyoming", "serve", "--uri", "tcp://127.0.0.1:0"])
        .args(extra)
        .env("EARSHOT_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to
    // SIGTERM the server when the thread that spawned it exits.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn earshot wyoming serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("earshot: listening on tcp://") {
                let _ = tx.send(addr.rsplit(':').next().unwrap_or("").parse::<u16>().ok());
            }
        }
        let _ = tx.send(None);
    });
    match rx.recv_timeout(Duration::from_secs(180)) {
        Ok(Some(port)) => (child, port),
        other => {
            let _ = child.kill();
            let log = std::fs::read_to_string(state.join("stderr.log")).unwrap_or_default();
            panic!("earshot wyoming serve did not start ({other:?}); stderr:\n{log}");
        }
    }
}

fn server() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        venv_python();
        let state = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wyoming-svc");
        let _ = std::fs::remove_dir_all(&state);
        let (tx, rx) = std::sync::mpsc::channel();
        let st = state.clone();
        // The owner thread outlives every test (PDEATHSIG fires when the
        // spawning thread exits, i.e. with the test process).
        std::thread::spawn(move || {
            let (child, port) = start_server(&st, &[]);
            tx.send(port).unwrap();
            let _child = child;
            loop {
                std::thread::park();
            }
        });
        let port = rx.recv().expect("server start");
        Served {
            port,
            stderr: state.join("stderr.log"),
            state,
        }
    })
}

/// Run tests/wyoming/svc_client.py ACTION ARGS against the server.
fn client(action: &str, args: &[&str]) -> Value {
    let s = server();
    let out = Command::new(venv_python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wyoming/svc_client.py"))
        .args(["127.0.0.1", &s.port.to_string(), action])
        .args(args)
        .output()
        .expect("run svc_client.py");
    assert!(
        out.status.success(),
        "svc_client.py {action} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "svc_client.py printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Share of `expected` words found in `got`.
fn recall(expected: &str, got: &str) -> f64 {
    let want = words(expected);
    let have = words(got);
    let hits = want.iter().filter(|w| have.contains(w)).count();
    hits as f64 / want.len().max(1) as f64
}

fn expected_transcript(file: &str) -> String {
    let tsv = std::fs::read_to_string(common::data("speech/transcripts.tsv")).unwrap();
    tsv.lines()
        .find_map(|l| l.strip_prefix(&format!("{file}\t")).map(str::to_string))
        .unwrap()
}

#[test]
fn describe_reports_asr_tts_intent_and_handle_as_info_parses_them() {
    let info = client("describe", &[]);
    let asr = &info["asr"][0];
    assert_eq!(asr["name"], "earshot");
    assert_eq!(asr["installed"], true);
    assert_eq!(asr["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(asr["models"][0]["name"], "ggml-tiny.en.bin", "{info}");
    assert_eq!(asr["models"][0]["languages"], json!(["en"]));
    let tts = &info["tts"][0];
    assert_eq!(tts["streaming"], true);
    let voices: Vec<&str> = tts["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(voices, ["en_US-joe-medium", "espeak-ng-en-us"], "{info}");
    assert_eq!(tts["voices"][0]["languages"], json!(["en_US"]));
    assert_eq!(tts["voices"][0]["speakers"], Value::Null);
    let intent = &info["intent"][0]["models"][0];
    assert_eq!(intent["installed"], true);
    let description = intent["description"].as_str().unwrap();
    for name in ["time_now", "todo_add", "calculate"] {
        assert!(description.contains(name), "{description}");
    }
    assert!(!description.contains("other"), "{description}");
    assert_eq!(info["handle"][0]["models"], json!(["earshot-agent"]));
    let pong = client("ping", &[]);
    assert_eq!(pong, json!({"type": "pong", "text": "hi"}));
}

#[test]
fn transcribes_jfk_sent_in_1024_sample_chunks() {
    let wav = common::data("speech/jfk.wav");
    let t = client("transcribe", &[wav.to_str().unwrap(), "1024"]);
    let expected = expected_transcript("jfk.wav");
    let text = t["text"].as_str().unwrap();
    assert!(
        recall(&expected, text) >= 0.8,
        "transcript {text:?} vs {expected:?}"
    );
    assert_eq!(t["language"], "en");
    assert!(t["chunks"].as_u64().unwrap() > 150, "{t}");
}

#[test]
fn transcribes_any_pcm_format_the_protocol_allows() {
    // A 16 kHz mono clip re-encoded by the library's AudioChunkConverter
    // as 48 kHz 32-bit stereo and as 8 kHz 8-bit (unsigned) mono: earshot
    // mixes to mono, decodes the width and resamples to 16 kHz.
    let name = "sense_and_sensibility_01_austen_64kb-0870.wav";
    let wav = common::data(&format!("speech/{name}"));
    let expected = expected_transcript(name);
    for format in [["48000", "4", "2"], ["8000", "1", "1"]] {
        let mut args = vec![wav.to_str().unwrap(), "1024"];
        args.extend(format);
        let t = client("transcribe", &args);
        let want: Vec<u64> = format.iter().map(|v| v.parse().unwrap()).collect();
        assert_eq!(t["format"], json!(want));
        let text = t["text"].as_str().unwrap();
        assert!(
            recall(&expected, text) >= 0.8,
            "{format:?}: {text:?} vs {expected:?}"
        );
    }
}

#[test]
fn unknown_events_are_dropped_and_the_connection_goes_on() {
    let uri = WyomingUri::parse(&format!("tcp://127.0.0.1:{}", server().port)).unwrap();
    let conn = Connection::connect(&uri, Duration::from_secs(2), Limits::default()).unwrap();
    conn.send(&Event::with_data(
        "select-program",
        json!({"name": "earshot"}),
    ))
    .unwrap();
    conn.send(&Event::with_data("from-the-future", json!({"x": [1, 2]})).payload(vec![0; 100]))
        .unwrap();
    conn.send(&Event::new("ping")).unwrap();
    let pong = conn.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert_eq!(pong.kind, "pong");
    conn.send(&Event::new("describe")).unwrap();
    let info = conn.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert_eq!(info.kind, "info");
}

#[test]
fn synthesizes_sentence_by_sentence_and_the_audio_transcribes_back() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("said.wav");
    let text = "The weather is nice today. Please open the window.";
    let s = client("synthesize", &[text, wav.to_str().unwrap()]);
    assert_eq!(s["rate"], 22050, "the Piper voice's own rate: {s}");
    assert_eq!(
        (s["width"].as_u64(), s["channels"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(s["audio_starts"], 1);
    assert_eq!(s["max_chunk_samples"], 1024, "{s}");
    let seconds = s["samples"].as_f64().unwrap() / 22050.0;
    assert!((1.5..10.0).contains(&seconds), "{seconds} s of audio");
    let back = client("transcribe", &[wav.to_str().unwrap()]);
    let heard = back["text"].as_str().unwrap();
    assert!(recall(text, heard) >= 0.7, "said {text:?}, heard {heard:?}");
}

#[test]
fn streaming_synthesis_speaks_each_sentence_as_it_completes() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("stream.wav");
    let s = client(
        "stream",
        &[
            wav.to_str().unwrap(),
            "The weather ",
            "is nice today. Please op",
            "en the window.",
        ],
    );
    // One audio stream per sentence, then synthesize-stopped; the
    // compatibility `synthesize` inside the stream is not spoken again.
    assert_eq!(s["audio_starts"], 2, "{s}");
    assert_eq!(s["audio_stops"], 2, "{s}");
    let back = client("transcribe", &[wav.to_str().unwrap()]);
    let heard = back["text"].as_str().unwrap();
    let said = "The weather is nice today. Please open the window.";
    assert!(recall(said, heard) >= 0.7, "heard {heard:?}");
}

#[test]
fn recognizes_device_intents_on_device_and_refuses_gibberish() {
    let r = client("recognize", &["what time is it"]);
    assert_eq!(r["type"], "intent", "{r}");
    assert_eq!(r["name"], "time_now");
    let said = r["text"].as_str().unwrap_or_default();
    assert!(
        regex::Regex::new(r"\d{1,2}:\d{2}").unwrap().is_match(said),
        "{said}"
    );
    let c = r["context"]["confidence"].as_f64().unwrap();
    assert!(c >= r["context"]["threshold"].as_f64().unwrap(), "{r}");

    let r = client("recognize", &["add milk to my shopping list"]);
    assert_eq!(r["name"], "todo_add", "{r}");
    assert_eq!(r["entities"], json!([{"name": "item", "value": "milk"}]));

    let r = client("recognize", &["florp zindle quax borp"]);
    assert_eq!(r["type"], "not-recognized", "{r}");
    // An open question is not a device command either.
    let r = client("recognize", &["what is the capital of france"]);
    assert_eq!(r["type"], "not-recognized", "{r}");
}

#[test]
fn handles_a_transcript_with_a_full_turn_in_one_conversation() {
    let r = client("handle", &["what time is it", "what's the date today"]);
    assert_eq!(r[0]["type"], "handled", "{r}");
    let time = r[0]["text"].as_str().unwrap();
    assert!(
        regex::Regex::new(r"\d{1,2}:\d{2}").unwrap().is_match(time),
        "{time}"
    );
    assert_eq!(r[1]["type"], "handled", "{r}");
    let id = &r[0]["context"]["conversation_id"];
    assert!(id.is_i64(), "{r}");
    assert_eq!(
        &r[1]["context"]["conversation_id"], id,
        "one conversation per connection"
    );
    // A turn that needs the LLM, with none configured: not-handled with
    // the turn's own error sentence.
    let r = client("handle", &["tell me a story about a dragon"]);
    assert_eq!(r[0]["type"], "not-handled", "{r}");
    let why = r[0]["text"].as_str().unwrap();
    assert!(why.contains("GROQ_API_KEY"), "{why}");
    // The turn is in earshot's turn log with source "wyoming" and the peer.
    let out =
        common::run(common::earshot(&server().state).args(["log", "--json", "--last", "100"]));
    let turns: Vec<Value> = common::stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|t: &Value| &t["conversation_id"] == id)
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    for t in &turns {
        assert_eq!(t["source"], "wyoming", "{t}");
        assert_eq!(t["route"], "tree", "answered on device: {t}");
        assert!(t["extra_json"]["wyoming_peer"].is_string(), "{t}");
    }
}

/// The next event of `kind` on `conn` within `within`, skipping others;
/// panics naming `what` when none comes.
fn expect_event(conn: &Connection, kind: &str, within: Duration, what: &str) -> Event {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            panic!(
                "{what}: no {kind} within {} s (is the server serving one connection at a time?)",
                within.as_secs()
            );
        }
        match conn.recv_timeout(left) {
            Ok(Some(e)) if e.kind == kind => return e,
            Ok(Some(e)) => assert_ne!(e.kind, "error", "{what}: {e:?}"),
            Ok(None) => {}
            Err(e) => panic!("{what}: the connection failed before {kind}: {e}"),
        }
    }
}

#[test]
fn two_clients_are_served_at_once() {
    // The first client is being served (its describe was answered) and
    // then holds its connection open in the middle of a transcription:
    // half the audio sent, no audio-stop. A server that serves one
    // connection after the other never reads the second client's request
    // until this one ends, so the bounded waits below fail for it.
    let name = "jfk.wav";
    let samples: Vec<i16> = hound::WavReader::open(common::data(&format!("speech/{name}")))
        .unwrap()
        .into_samples::<i16>()
        .map(Result::unwrap)
        .collect();
    let (first_half, second_half) = samples.split_at(samples.len() / 2);
    let uri = WyomingUri::parse(&format!("tcp://127.0.0.1:{}", server().port)).unwrap();
    let held = Connection::connect(&uri, Duration::from_secs(5), Limits::default()).unwrap();
    held.send(&Event::new("describe")).unwrap();
    expect_event(&held, "info", Duration::from_secs(30), "first client");
    held.send(&Event::new("transcribe")).unwrap();
    held.send(&earshot::wyoming_proto::audio::audio_start(
        earshot::wyoming_proto::audio::AudioFormat::EARSHOT,
        None,
    ))
    .unwrap();
    for chunk in first_half.chunks(1024) {
        held.send(&earshot::wyoming_proto::audio::audio_chunk_i16(
            16000, chunk, None,
        ))
        .unwrap();
    }

    // Meanwhile a second client gets its full answer, in bounded time.
    let second = Connection::connect(&uri, Duration::from_secs(5), Limits::default()).unwrap();
    second.send(&Event::new("describe")).unwrap();
    let info = expect_event(
        &second,
        "info",
        Duration::from_secs(30),
        "second client, while the first holds its request open",
    );
    assert!(info.data.get("asr").is_some(), "{info:?}");
    second.close();

    // And Home Assistant's client transcribes and handles at once on two
    // more connections, still beside the held one (its reads time out
    // after 120 s, so this too fails rather than hangs for a serial server).
    let wav = common::data("speech/jfk.wav");
    let r = client("parallel", &[wav.to_str().unwrap(), "what time is it"]);
    let text = r["transcript"]["text"].as_str().unwrap();
    assert!(recall(&expected_transcript("jfk.wav"), text) >= 0.8, "{r}");
    assert_eq!(r["handled"][0]["type"], "handled", "{r}");

    // Then the first client finishes its request and gets its transcript.
    for chunk in second_half.chunks(1024) {
        held.send(&earshot::wyoming_proto::audio::audio_chunk_i16(
            16000, chunk, None,
        ))
        .unwrap();
    }
    held.send(&earshot::wyoming_proto::audio::audio_stop(None))
        .unwrap();
    let transcript = expect_event(
        &held,
        "transcript",
        Duration::from_secs(150),
        "first client",
    );
    let text = transcript.str("text").unwrap_or_default();
    assert!(recall(&expected_transcript(name), text) >= 0.8, "{text:?}");
}

#[test]
fn fifty_stalled_connections_do_not_lock_out_home_assistants_client() {
    // Each sends half an event and stalls (Wyoming has no authentication):
    // they never count against the connection cap, and each is closed once
    // the first-event deadline (5 s) passes.
    let port = server().port;
    let mut stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"{\"type\": \"desc").unwrap();
            s
        })
        .collect();
    let started = Instant::now();
    let info = client("describe", &[]);
    assert_eq!(info["asr"][0]["name"], "earshot", "{info}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "describe took {:?} beside 50 stalled connections",
        started.elapsed()
    );
    for s in &mut stalled {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 512];
        let closed = loop {
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        assert!(closed, "a stalled connection was still open after 15 s");
    }
}

/// Send `bytes` raw (then, if `close_write`, half-close), and read what
/// the server answers until it hangs up.
fn send_raw(bytes: &[u8], close_write: bool) -> Vec<Event> {
    let mut s = TcpStream::connect(("127.0.0.1", server().port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A peer flooding past the limit may see its write cut off: fine.
    let _ = s.write_all(bytes);
    if close_write {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut r = BufReader::new(s);
    let mut got = Vec::new();
    loop {
        match read_event(&mut r, &Limits::default()) {
            Ok(e) => got.push(e),
            Err(ProtocolError::Closed) => return got,
            Err(e) if e.is_timeout() => panic!("the server kept the connection open"),
            // A reset after our flood counts as hung up.
            Err(ProtocolError::Io(_)) => return got,
            Err(e) => panic!("the server sent a malformed frame: {e}"),
        }
    }
}

fn assert_dropped_with(events: &[Event], code: &str, what: &str) {
    let errors: Vec<&Event> = events.iter().filter(|e| e.kind == "error").collect();
    assert_eq!(errors.len(), 1, "{what}: {events:?}");
    assert_eq!(errors[0].str("code"), Some(code), "{what}: {events:?}");
    assert!(!errors[0].str("text").unwrap_or_default().is_empty());
}

#[test]
fn malformed_frames_drop_only_their_connection() {
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("bad JSON", b"{\"type\": \"describe\",,}\n".to_vec(), false),
        (
            "huge data_length",
            b"{\"type\":\"describe\",\"data_length\":99999999999}\n".to_vec(),
            false,
        ),
        (
            "huge payload_length",
            b"{\"type\":\"audio-chunk\",\"payload_length\":1000000000000}\n".to_vec(),
            false,
        ),
        (
            "negative length",
            b"{\"type\":\"audio-chunk\",\"payload_length\":-5}\n".to_vec(),
            false,
        ),
        ("no type", b"{\"data\":{}}\n".to_vec(), false),
        ("not an object", b"[\"describe\"]\n".to_vec(), false),
        // One byte over the 64 KiB limit, so the server reads every byte
        // we sent (unread bytes would turn its close into a reset that
        // can swallow the error event).
        ("header line over the limit", vec![b'a'; 64 * 1024 + 1], false),
        (
            "binary garbage",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .filter(|b| *b != b'\n')
                .chain(*b"\n")
                .collect(),
            false,
        ),
        (
            "truncated payload, then close",
            b"{\"type\":\"audio-chunk\",\"data\":{\"rate\":16000,\"width\":2,\"channels\":1},\"payload_length\":2048}\n0123456789".to_vec(),
            true,
        ),
        (
            "truncated additional data, then close",
            b"{\"type\":\"transcript\",\"data_length\":50}\n{\"text\":".to_vec(),
            true,
        ),
    ];
    for (what, bytes, close) in cases {
        let events = send_raw(&bytes, close);
        assert_dropped_with(&events, "bad-frame", what);
    }

    // A valid frame with a bad audio format, and more than 60 s of audio:
    // an error naming the problem, then the connection closes.
    let bad_format = Event::with_data(
        "audio-start",
        json!({"rate": 16000, "width": 3, "channels": 1}),
    );
    let events = send_raw(&bad_format.to_bytes(), false);
    assert_dropped_with(&events, "bad-audio", "width 3");
    let mut long = Event::new("transcribe").to_bytes();
    let second =
        earshot::wyoming_proto::audio::audio_chunk_i16(16000, &[0i16; 16000], None).to_bytes();
    // Exactly 61 one-second chunks: the last one crosses the bound, so the
    // server has read everything we sent when it closes.
    for _ in 0..61 {
        long.extend_from_slice(&second);
    }
    let events = send_raw(&long, false);
    assert_dropped_with(&events, "audio-too-long", "61 s of audio");

    let huge = Event::with_data("synthesize", json!({"text": "word ".repeat(3000)}));
    let events = send_raw(&huge.to_bytes(), false);
    assert_dropped_with(&events, "text-too-long", "15000 characters to say");
    assert!(
        events.iter().all(|e| !e.kind.starts_with("audio")),
        "nothing spoken"
    );

    // The server still answers, with Home Assistant's client.
    let info = client("describe", &[]);
    assert_eq!(info["asr"][0]["name"], "earshot");
    let log = std::fs::read_to_string(&server().stderr).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    let warned = log
        .lines()
        .filter(|l| l.contains("malformed frame, disconnecting"))
        .count();
    assert!(warned >= 10, "one warn line per malformed frame:\n{log}");
}

/// earshot's client reading from a raw socket server that misbehaves.
#[test]
fn earshot_client_rejects_malformed_frames_from_a_raw_server() {
    type Check = fn(&ProtocolError) -> bool;
    let cases: Vec<(&[u8], Check)> = vec![
        (b"{oops\n", |e| matches!(e, ProtocolError::BadJson(_))),
        (b"{\"type\":\"info\",\"data_length\":99999999999}\n", |e| {
            matches!(
                e,
                ProtocolError::TooLarge {
                    field: "data_length",
                    ..
                }
            )
        }),
        (
            b"{\"type\":\"audio-chunk\",\"payload_length\":99999999999}\n",
            |e| {
                matches!(
                    e,
                    ProtocolError::TooLarge {
                        field: "payload_length",
                        ..
                    }
                )
            },
        ),
        (
            b"{\"type\":\"audio-chunk\",\"payload_length\":100}\nshort",
            |e| matches!(e, ProtocolError::Truncated("payload")),
        ),
        (b"{\"type\":\"info\",\"data_length\":10}\n{}", |e| {
            matches!(e, ProtocolError::Truncated("additional data"))
        }),
        (b"{\"type\":\"info\",\"data_length\":2}\n[]", |e| {
            matches!(e, ProtocolError::NotAnObject("additional data"))
        }),
        (&[b'x'; 70 * 1024], |e| {
            matches!(e, ProtocolError::HeaderTooLong { .. })
        }),
        (b"{\"type\":\"info\"", |e| {
            matches!(e, ProtocolError::Truncated("header line"))
        }),
    ];
    for (bytes, check) in cases {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = bytes.to_vec();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // A well-formed event first: the client reads it fine.
            write_event(&mut s, &Event::new("pong")).unwrap();
            let _ = s.write_all(&sent);
            let _ = s.shutdown(Shutdown::Write);
            // Drain until the client hangs up.
            let _ = s.read_to_end(&mut Vec::new());
        });
        let uri = WyomingUri::parse(&format!("tcp://{addr}")).unwrap();
        let conn = Connection::connect(&uri, Duration::from_secs(2), Limits::default()).unwrap();
        let first = conn.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(first.map(|e| e.kind).as_deref(), Some("pong"));
        let err = conn
            .recv_timeout(Duration::from_secs(10))
            .expect_err("a malformed frame is an error");
        assert!(
            check(&err),
            "{:?}: got {err:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        );
        conn.close();
        peer.join().unwrap();
    }
}

#[test]
fn sigterm_finishes_in_flight_requests_then_exits_0_and_start_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::run(common::earshot(dir.path()).args([
        "wyoming",
        "serve",
        "--uri",
        "pi-zero:10700",
    ]));
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains("tcp://HOST:PORT"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // A taken port is reported at once (before loading any model), in one
    // line naming the address.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let uri = format!("tcp://{}", taken.local_addr().unwrap());
    let out = common::run(common::earshot(dir.path()).args(["wyoming", "serve", "--uri", &uri]));
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains(&uri) && err.contains("cannot listen"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // A long drain: on a machine shared with other test runs a
    // transcription can take longer than the default 20 s, and this test
    // is about the request being finished, not about speed.
    let (mut child, port) = start_server(dir.path(), &["--drain-secs", "150"]);
    // An open, idle connection does not hold the shutdown up…
    let idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // …and a request whose audio was sent before the signal is finished.
    // A short clip, so it is answered well within the 20 s drain even when
    // the other tests keep both cores busy.
    let name = "goforward.wav";
    let samples: Vec<i16> = hound::WavReader::open(common::data(&format!("speech/{name}")))
        .unwrap()
        .into_samples::<i16>()
        .map(Result::unwrap)
        .collect();
    let uri = WyomingUri::parse(&format!("tcp://127.0.0.1:{port}")).unwrap();
    let busy = Connection::connect(&uri, Duration::from_secs(2), Limits::default()).unwrap();
    busy.send(&Event::new("transcribe")).unwrap();
    busy.send(&earshot::wyoming_proto::audio::audio_start(
        earshot::wyoming_proto::audio::AudioFormat::EARSHOT,
        None,
    ))
    .unwrap();
    for chunk in samples.chunks(1024) {
        busy.send(&earshot::wyoming_proto::audio::audio_chunk_i16(
            16000, chunk, None,
        ))
        .unwrap();
    }
    busy.send(&earshot::wyoming_proto::audio::audio_stop(None))
        .unwrap();
    // SAFETY: plain kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let log = || std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default();
    let transcript = match busy.recv_timeout(Duration::from_secs(150)) {
        Ok(Some(e)) => e,
        other => panic!(
            "the in-flight transcription was not answered: {other:?}\n{}",
            log()
        ),
    };
    assert_eq!(transcript.kind, "transcript", "{transcript:?}");
    let text = transcript.str("text").unwrap_or_default();
    // "go forward ten meters" (tiny.en writes "10").
    assert!(recall(&expected_transcript(name), text) >= 0.75, "{text:?}");
    assert!(matches!(
        busy.recv_timeout(Duration::from_secs(10)),
        Err(ProtocolError::Closed)
    ));
    // Then the process exits 0, at once (nothing is left to wait for).
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("earshot wyoming serve did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    // A new peer is no longer accepted.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    drop(idle);
    let log = log();
    assert!(log.contains("wyoming: stopped"), "{log}");
    assert!(!log.contains("still busy"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
