//! The speaking half and the voice loop, through the real binary: Piper
//! speech that whisper understands, `earshot run` end to end through
//! ALSA's file plugin (cpal capture → VAD → whisper → the default tree →
//! Piper → rodio → ALSA), barge-in with a scripted button on a real-time
//! output, and the cloud TTS failing in every way we know (loopback
//! server) with the local voice taking over.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::http::{openai_completion, openai_stream_chunks, Piece, Reply, Request, TestServer};
use earshot::stt::Stt;

/// Whisper, loaded once for this test binary.
fn stt() -> &'static Stt {
    static STT: OnceLock<Stt> = OnceLock::new();
    STT.get_or_init(|| {
        let config = earshot::config::Config {
            models_dir: common::models_dir(),
            stt: earshot::stt::SttConfig {
                order: earshot::stt::Order::LocalOnly,
                ..Default::default()
            },
            ..Default::default()
        };
        earshot::app::stt(&config).expect("whisper model in models/")
    })
}

fn transcribe_16k(samples: &[f32]) -> String {
    let t = stt().transcribe(samples).expect("transcribe");
    t.text
}

/// `earshot say TEXT --out FILE` with the local Piper voice; made once per
/// phrase and kept under target/ for this test binary.
fn piper_utterance(text: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    // Tests run in parallel and share phrases: one makes a file while no
    // other reads it half-written.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    let path = dir
        .path()
        .join(format!("{}.wav", common::words(text).replace(' ', "_")));
    if !path.exists() {
        let out = common::run(
            common::earshot(dir.path())
                .args(["say", text, "--engine", "piper", "--json", "--out"])
                .arg(&path),
        );
        assert!(out.status.success(), "say failed: {}", common::stderr(&out));
        let json: serde_json::Value =
            serde_json::from_str(common::stdout(&out).trim()).expect("say --json");
        assert_eq!(json["engine"], "piper", "{json}");
    }
    path
}

/// 16 kHz mono f32 from a WAV file.
fn wav_16k(path: &Path) -> Vec<f32> {
    earshot::audio::wav::read_16k_mono(path, None)
        .expect("read wav")
        .0
}

fn sigterm(child: &Child) {
    // SAFETY: signalling our own child by pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("earshot did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn say_speaks_with_piper_and_whisper_understands_it() {
    let path = piper_utterance("Please add bread and butter to my shopping list.");
    let reader = hound::WavReader::open(&path).unwrap();
    assert_eq!(reader.spec().sample_rate, 22_050);
    assert_eq!(reader.spec().channels, 1);
    let heard = common::words(&transcribe_16k(&wav_16k(&path)));
    assert!(
        heard.contains("add bread and butter to my shopping list"),
        "whisper heard {heard:?}"
    );
}

/// The shipped voice is cut in two by `scripts/split-piper.py`, and its
/// decoder run in windows gives the whole decoder's samples (issue 21's
/// bounded memory must not change the voice), seams and margins included.
#[test]
fn piper_decodes_in_windows_that_match_the_whole_decoder() {
    let state = tempfile::tempdir().unwrap();
    let paths = earshot::paths::Paths::new(state.path(), common::models_dir());
    let mut piper =
        earshot::tts::piper::Piper::load(&earshot::tts::TtsConfig::default(), &paths).unwrap();
    assert!(piper.decodes_in_windows());
    let text = "Your list has five items: batteries, milk, bread, eggs and coffee.";
    for window in [earshot::tts::piper::WINDOW_FRAMES, 7, 1] {
        let difference = piper.window_difference(text, window).unwrap();
        assert!(difference < 1e-4, "window {window}: {difference}");
    }
}

/// The issue's end-to-end check: a spoken "what time is it" in a WAV goes
/// in through ALSA's file plugin, the answer comes out through it, and
/// what came out transcribes to the time the tree answered.
#[test]
fn run_through_alsa_files_answers_the_time_out_loud() {
    let dir = tempfile::tempdir().unwrap();
    // The request at 16 kHz mono s16le, padded with silence: ALSA's file
    // device is not paced and repeats stale data once the file runs out.
    let request = earshot::audio::to_i16(&wav_16k(&piper_utterance("What time is it?")));
    let mut input: Vec<i16> = vec![0; 8_000];
    input.extend(&request);
    input.extend(std::iter::repeat_n(0, 16_000 * 60));
    let in_raw = dir.path().join("in.raw");
    let out_raw = dir.path().join("out.raw");
    std::fs::write(
        &in_raw,
        input
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let conf = common::alsa_file_config(dir.path(), &in_raw, &out_raw);
    let mut child = common::earshot(dir.path())
        .args(["run", "--json", "--no-barge-in"])
        .env("ALSA_CONFIG_PATH", &conf)
        .env("EARSHOT_LOG", "info")
        // No LLM is reachable: the tree must answer on device.
        .env("LLM_BASE_URL", "http://127.0.0.1:9")
        // A time whose spoken form tiny.en hears back reliably (some, such
        // as "eight eleven", it does not); tests/tree.rs checks the real clock.
        .env("EARSHOT_TEST_CLOCK", "15:27")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    // The turn line is printed once the answer has played.
    let turn = common::wait_for(&stdout, "\"answer\"", Duration::from_secs(300), &mut seen);
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let log: Vec<String> = stderr.try_iter().collect();
    let turn = turn.unwrap_or_else(|| panic!("no turn; stderr:\n{}", log.join("\n")));
    assert!(
        status.success(),
        "exit {status:?}; stderr:\n{}",
        log.join("\n")
    );
    assert!(
        log.iter().any(|l| l.contains("voice loop stopped")),
        "{}",
        log.join("\n")
    );
    let turn: serde_json::Value = serde_json::from_str(&turn).unwrap();
    assert_eq!(
        common::words(turn["text"].as_str().unwrap()),
        "what time is it",
        "{turn}"
    );
    assert_eq!(turn["intent"], "time_now", "{turn}");
    let answer = turn["answer"].as_str().unwrap();
    let (hour, minute) = clock_in(answer).unwrap_or_else(|| panic!("no time in {answer:?}"));
    assert_eq!((hour, minute), (3, 27), "answered {answer:?}");
    // Stage timings were logged and stored with the turn.
    for stage in [
        "capture",
        "stt",
        "first_audio",
        "first_sentence_to_audio",
        "spoken_done",
        "total",
    ] {
        assert!(
            turn["timings"][stage].as_f64().is_some(),
            "no {stage} in {turn}"
        );
    }
    // The turn log keeps the STT engine and path (issue 9.5).
    let db = rusqlite::Connection::open(dir.path().join("earshot.db")).unwrap();
    let extra: String = db
        .query_row(
            "SELECT extra_json FROM turn_log WHERE source = 'voice' ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let extra: serde_json::Value = serde_json::from_str(&extra).unwrap();
    assert_eq!(extra["stt"]["engine"], "whisper", "{extra}");
    assert!(
        ["fast", "fast+wide", "fast+wide+full", "fast+full", "full"]
            .contains(&extra["stt"]["path"].as_str().unwrap_or("")),
        "{extra}"
    );
    // What ALSA played back is the spoken time.
    let played: Vec<f32> = std::fs::read(&out_raw)
        .unwrap()
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();
    assert!(
        played.len() > 16_000,
        "only {} samples played",
        played.len()
    );
    let heard = transcribe_16k(&played);
    let digits: String = heard.chars().filter(char::is_ascii_digit).collect();
    assert!(
        digits.contains(&format!("{hour}{minute:02}")),
        "played audio says {heard:?}, answer was {answer:?}"
    );
}

/// `6:27` in a sentence → (6, 27).
fn clock_in(text: &str) -> Option<(i64, i64)> {
    let re = regex::Regex::new(r"(\d{1,2}):(\d{2})").unwrap();
    let c = re.captures(text)?;
    Some((c[1].parse().ok()?, c[2].parse().ok()?))
}

/// An LLM that streams a long answer (the router's one-word question gets
/// `simple`).
fn long_answer_llm() -> TestServer {
    TestServer::start(|req: &Request| {
        let body = req.json();
        if body["stream"] == true {
            let sentences: Vec<String> = (1..=12)
                .map(|i| format!("This is sentence number {i} of a long story about the sea. "))
                .collect();
            let pieces: Vec<&str> = sentences.iter().map(String::as_str).collect();
            let chunks = openai_stream_chunks("test-model", &pieces);
            let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
            Reply::sse(&chunks)
        } else {
            Reply::json(200, &openai_completion("test-model", "simple"))
        }
    })
}

/// A press while it speaks stops the speech at once: on a real-time output
/// nothing more is written after the press, and the long answer was cut.
#[test]
fn button_press_while_speaking_stops_speech_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = long_answer_llm();
    let request = piper_utterance("Tell me a long story about the sea.");
    let fifo = dir.path().join("button");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: creating a FIFO at a fresh path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = dir.path().join("out.wav");
    let mut child = common::earshot(dir.path())
        .args(["run", "--json", "--input"])
        .arg(&request)
        .arg("--output")
        .arg(format!("paced:{}", out.display()))
        .arg("--button")
        .arg(format!("script:{}", fifo.display()))
        .env("EARSHOT_LOG", "info")
        .env("LLM_BASE_URL", server.url())
        .env("GROQ_API_KEY", "test-key")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    // The button thread opens the FIFO for reading at start; never block
    // on it if earshot died first.
    let mut button = open_fifo_writer(&fifo, &mut child);
    let mut seen = Vec::new();
    let speaking = common::wait_for(&stderr, "speaking", Duration::from_secs(300), &mut seen);
    assert!(
        speaking.is_some(),
        "never spoke; stderr:\n{}",
        seen.join("\n")
    );
    // Let it talk for a moment, then press.
    std::thread::sleep(Duration::from_millis(600));
    writeln!(button, "press").unwrap();
    button.flush().unwrap();
    let pressed_at = Instant::now();
    let barged = common::wait_for(
        &stderr,
        "barge-in: button pressed",
        Duration::from_secs(10),
        &mut seen,
    );
    assert!(
        barged.is_some(),
        "no barge-in; stderr:\n{}",
        seen.join("\n")
    );
    let reacted_ms = pressed_at.elapsed().as_millis();
    let written_at_stop = wav_seconds(&out);
    std::thread::sleep(Duration::from_millis(500));
    let written_later = wav_seconds(&out);
    // The loop may already have finished (its input file ran out after the
    // barge-in) and closed the FIFO: a failed release write is fine.
    let _ = writeln!(button, "release");
    drop(button);
    let turn = common::wait_for(&stdout, "\"answer\"", Duration::from_secs(30), &mut seen)
        .unwrap_or_else(|| panic!("no turn line; {}", seen.join("\n")));
    let status = wait_exit(&mut child, Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let turn: serde_json::Value = serde_json::from_str(&turn).unwrap();
    assert_eq!(turn["barge_in"], "button", "{turn}");
    assert!(
        reacted_ms < 500,
        "the loop took {reacted_ms} ms to see the press"
    );
    // Nothing more after the stop (one 10 ms tick may be in flight).
    assert!(
        written_later - written_at_stop <= 0.011,
        "{written_at_stop} s at the stop, {written_later} s 0.5 s later"
    );
    // Twelve sentences are ~40 s of speech; we heard about a second.
    assert!(
        (0.3..5.0).contains(&written_later),
        "{written_later} s of speech written"
    );
}

/// Open a FIFO for writing once its reader is there (non-blocking tries,
/// so a child that exited early fails the test instead of hanging it).
fn open_fifo_writer(fifo: &Path, child: &mut Child) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(file) => return file,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("cannot open {}: {e}", fifo.display()),
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("earshot exited ({status:?}) before opening its button script");
        }
        assert!(
            Instant::now() < deadline,
            "the button script was never opened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wav_seconds(path: &Path) -> f64 {
    hound::WavReader::open(path)
        .map(|r| f64::from(r.len()) / f64::from(r.spec().sample_rate))
        .unwrap_or(0.0)
}

/// A minimal 16-bit mono WAV, as the speech API returns.
fn wav_bytes(seconds: f32) -> Vec<u8> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut cursor, spec).unwrap();
    for i in 0..(24_000.0 * seconds) as usize {
        w.write_sample(((i as f32 * 0.05).sin() * 8000.0) as i16)
            .unwrap();
    }
    w.finalize().unwrap();
    cursor.into_inner()
}

fn say_with_cloud(server: &TestServer, dir: &Path) -> (serde_json::Value, String) {
    std::fs::write(
        dir.join("earshot.toml"),
        format!(
            "[tts]\norder = [\"cloud\", \"espeak\"]\ncloud_base_url = \"{}/openai/v1\"\ncloud_timeout_ms = 800\n",
            server.url()
        ),
    )
    .unwrap();
    let out = common::run(
        common::earshot(dir)
            .args(["say", "Hello from the cloud.", "--json", "--out"])
            .arg(dir.join("out.wav"))
            .env("GROQ_API_KEY", "gsk-test-secret")
            .env("EARSHOT_CONFIG", dir.join("earshot.toml")),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    (
        serde_json::from_str(common::stdout(&out).trim()).unwrap(),
        common::stderr(&out),
    )
}

#[test]
fn cloud_speech_uses_groqs_wire_format() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        TestServer::start(|_req: &Request| Reply::bytes(200, "audio/wav", &wav_bytes(0.5)));
    let (json, _) = say_with_cloud(&server, dir.path());
    assert_eq!(json["engine"], "cloud", "{json}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/openai/v1/audio/speech");
    assert_eq!(
        reqs[0].header("authorization"),
        Some("Bearer gsk-test-secret")
    );
    let body = reqs[0].json();
    assert_eq!(body["model"], "canopylabs/orpheus-v1-english");
    assert_eq!(body["voice"], "autumn");
    assert_eq!(body["response_format"], "wav");
    assert_eq!(body["input"], "Hello from the cloud.");
    let written = wav_seconds(&dir.path().join("out.wav"));
    assert!((written - 0.5).abs() < 0.01, "{written}");
}

#[test]
fn cloud_speech_failures_fall_back_to_the_local_voice_with_a_log_line() {
    type Handler = Box<dyn Fn(&Request) -> Reply + Send + Sync>;
    let cases: Vec<(&str, Handler, &str)> = vec![
        (
            "500",
            Box::new(|_: &Request| {
                Reply::json(500, r#"{"error":{"message":"upstream overloaded"}}"#)
            }),
            "HTTP 500: upstream overloaded",
        ),
        (
            "html",
            Box::new(|_: &Request| Reply::bytes(200, "text/html", b"<html>captive portal</html>")),
            "text/html instead of audio",
        ),
        (
            "timeout",
            Box::new(|_: &Request| {
                Reply::new(200)
                    .header("Content-Type", "audio/wav")
                    .piece(Piece::Stall(Duration::from_secs(5)))
            }),
            "timed out",
        ),
        (
            "truncated",
            Box::new(|_: &Request| Reply::bytes(200, "audio/wav", b"RIFF\x10\0\0\0WAVEfmt ")),
            "unreadable",
        ),
    ];
    for (name, handler, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(handler);
        let started = Instant::now();
        let (json, stderr) = say_with_cloud(&server, dir.path());
        assert_eq!(json["engine"], "espeak", "{name}: {json}");
        assert!(stderr.contains(expected), "{name}: stderr {stderr}");
        assert!(!stderr.contains("gsk-test-secret"), "{name}: key leaked");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{name}: too slow"
        );
        assert!(wav_seconds(&dir.path().join("out.wav")) > 0.5, "{name}");
    }
}

#[test]
fn no_output_device_is_a_clear_error_and_run_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("earshot.toml"),
        "[audio]\noutput = \"no-such-speaker\"\n",
    )
    .unwrap();
    let out = common::run(
        common::earshot(dir.path())
            .args(["say", "hello", "--engine", "espeak"])
            .env("EARSHOT_CONFIG", dir.path().join("earshot.toml")),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(
        err.contains("no sound output called 'no-such-speaker'"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // The loop answers anyway and says in the log why it is silent. The
    // recording holds two requests: each gets its own turn, in order.
    let request = dir.path().join("two-requests.wav");
    let mut samples = wav_16k(&piper_utterance("What time is it?"));
    samples.extend(std::iter::repeat_n(0.0, 16_000 * 3 / 2));
    // "Turn the volume down", not "Turn it down": under the suite's load
    // whisper once heard the shorter one as "Purn it down" (this test is
    // about the turns, not the ears).
    samples.extend(wav_16k(&piper_utterance("Turn the volume down.")));
    samples.extend(std::iter::repeat_n(0.0, 16_000));
    std::fs::write(
        &request,
        earshot::audio::wav::write_16k_mono(&earshot::audio::to_i16(&samples)),
    )
    .unwrap();
    let out = common::run(
        common::earshot(dir.path())
            .args(["run", "--json", "--input"])
            .arg(&request)
            .env("EARSHOT_CONFIG", dir.path().join("earshot.toml"))
            .env("LLM_BASE_URL", "http://127.0.0.1:9"),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let turns: Vec<serde_json::Value> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    let turn = &turns[0];
    assert!(
        clock_in(turn["answer"].as_str().unwrap()).is_some(),
        "{turn}"
    );
    assert_eq!(turns[1]["intent"], "volume_down", "{}", turns[1]);
    assert_eq!(turns[1]["answer"], "Volume 40 percent.", "{}", turns[1]);
    assert!(
        common::stderr(&out).contains("cannot speak"),
        "{}",
        common::stderr(&out)
    );
}

/// Issue 17: a fresh install (`[wake] mode = "wake"`, the in-process
/// openWakeWord) driven through ALSA's file device, read faster than real
/// time, answers only after "Hey Jarvis": the same request without it is
/// not even transcribed, the one in the same breath is answered without
/// the wake word in its text.
#[test]
fn run_through_alsa_files_answers_only_after_the_wake_word() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = silence(1.0);
    input.extend(pcm("What time is it?"));
    input.extend(silence(2.5));
    input.extend(pcm("Hey Jarvis, what time is it?"));
    input.extend(silence(60.0));
    let in_raw = dir.path().join("in.raw");
    let out_raw = dir.path().join("out.raw");
    std::fs::write(
        &in_raw,
        input
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let conf = common::alsa_file_config(dir.path(), &in_raw, &out_raw);
    // The speaker as a WAV file: every clip in order (ALSA's file plugin
    // starts its file again at each reopen).
    let out_wav = dir.path().join("speaker.wav");
    let mut child = common::earshot(dir.path())
        .args(["run", "--json", "--no-barge-in", "--output"])
        .arg(&out_wav)
        .env("EARSHOT_WAKE_MODE", "wake")
        .env("ALSA_CONFIG_PATH", &conf)
        .env("EARSHOT_LOG", "info")
        .env("LLM_BASE_URL", "http://127.0.0.1:9")
        .env("EARSHOT_TEST_CLOCK", "15:27")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let turn = common::wait_for(&stdout, "\"answer\"", Duration::from_secs(300), &mut seen);
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let log: Vec<String> = stderr.try_iter().collect();
    let turn = turn.unwrap_or_else(|| panic!("no turn; stderr:\n{}", log.join("\n")));
    assert!(status.success(), "{status:?}");
    let turn: serde_json::Value = serde_json::from_str(&turn).unwrap();
    assert_eq!(
        common::words(turn["text"].as_str().unwrap()),
        "what time is it",
        "{turn}"
    );
    assert_eq!(turn["intent"], "time_now", "{turn}");
    // Nothing was transcribed before the wake word: "What time is it?"
    // without it never reached speech-to-text.
    let at = |needle: &str| {
        log.iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in the log:\n{}", log.join("\n")))
    };
    let transcribed = log
        .iter()
        .position(|l| l.contains("heard: ") && l.contains("engine="))
        .unwrap_or_else(|| panic!("nothing transcribed:\n{}", log.join("\n")));
    assert!(at("wake word heard") < transcribed, "{}", log.join("\n"));
    assert!(log[at("listening input=")].contains("wake=onnx hey_jarvis_v0.1"));
    // The earcon first (E5 then B5, 70 ms each), then the answer; the
    // earcon never became part of the request (its text is exact above).
    let played = wav_16k(&out_wav);
    let first = played
        .iter()
        .position(|s| s.abs() > 0.02)
        .unwrap_or_else(|| panic!("nothing played"));
    let note = |from_ms: usize| &played[first + from_ms * 16..first + (from_ms + 50) * 16];
    let low = common::tone_share(note(10), 659.25, 16_000.0);
    let high = common::tone_share(note(80), 987.77, 16_000.0);
    assert!(low > 0.5 && high > 0.5, "earcon notes: {low} {high}");
    assert!(
        played.len() > first + 16_000,
        "only the earcon was played: {} samples",
        played.len() - first
    );
}

/// The same with `--input FILE.wav` (the mode governs it too), to the end
/// of the file: exactly two turns — the request in the same breath, and
/// the one after "Hey Jarvis." and a pause — and none for the request
/// without the wake word.
#[test]
fn run_from_a_wav_answers_after_the_wake_word_in_the_same_breath_or_after_a_pause() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = silence(1.0);
    input.extend(pcm("What time is it?"));
    input.extend(silence(2.5));
    input.extend(pcm("Hey Jarvis, what time is it?"));
    input.extend(silence(2.5));
    input.extend(pcm("Hey Jarvis."));
    input.extend(silence(1.0));
    input.extend(pcm("Add milk to my shopping list."));
    input.extend(silence(2.0));
    let (turns, log) = run_wav(dir.path(), &input, "wake");
    assert_eq!(turns.len(), 2, "{turns:?}\n{log}");
    assert_eq!(
        common::words(turns[0]["text"].as_str().unwrap()),
        "what time is it"
    );
    let text = common::words(turns[1]["text"].as_str().unwrap());
    assert!(
        text.ends_with("to my shopping list") && !text.contains("jarvis"),
        "{text}"
    );
    assert!(log.contains("heard only the wake word"), "{log}");
}

/// `earshot run --json --wake MODE` over `input` (16 kHz) as a WAV file,
/// the LLM unreachable and the clock at 15:27: its turns and its log.
fn run_wav(dir: &Path, input: &[i16], wake: &str) -> (Vec<serde_json::Value>, String) {
    let wav = dir.join("in.wav");
    std::fs::write(&wav, earshot::audio::wav::write_16k_mono(input)).unwrap();
    let out = common::run(
        common::earshot(dir)
            .args(["run", "--json", "--wake", wake, "--input"])
            .arg(&wav)
            .arg("--output")
            .arg(dir.join("out.wav"))
            .env("EARSHOT_LOG", "info")
            .env("LLM_BASE_URL", "http://127.0.0.1:9")
            .env("EARSHOT_TEST_CLOCK", "15:27"),
    );
    let log = common::stderr(&out);
    assert!(out.status.success(), "{log}");
    let turns = common::stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (turns, log)
}

fn pcm(text: &str) -> Vec<i16> {
    earshot::audio::to_i16(&wav_16k(&piper_utterance(text)))
}

fn silence(seconds: f32) -> Vec<i16> {
    vec![0i16; (seconds * 16_000.0) as usize]
}

/// Issue 17 point 8: `earshot mute` reaches the running loop through the
/// control socket in the state directory: the capture is closed, the
/// lights show red (`muted` from the file backend), unmute opens it again;
/// a long press of the button mutes too (a short one while muted does
/// not unmute); with no loop running it says so in one line.
#[test]
fn mute_reaches_the_running_loop_and_says_when_none_runs() {
    let dir = tempfile::tempdir().unwrap();
    let in_raw = dir.path().join("in.raw");
    let out_raw = dir.path().join("out.raw");
    std::fs::write(&in_raw, vec![0u8; 16_000 * 2 * 120]).unwrap();
    let conf = common::alsa_file_config(dir.path(), &in_raw, &out_raw);
    let leds = dir.path().join("leds.txt");
    let config = dir.path().join("earshot.toml");
    std::fs::write(
        &config,
        format!("[device]\nleds = \"file:{}\"\n", leds.display()),
    )
    .unwrap();
    let mute = |action: &str| {
        common::run(
            common::earshot(dir.path())
                .args(["mute", action])
                .env("EARSHOT_CONFIG", &config),
        )
    };
    let fifo = dir.path().join("button");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: creating a FIFO at a fresh path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut run = common::earshot(dir.path());
    run.args(["run", "--no-barge-in", "--button"])
        .arg(format!("script:{}", fifo.display()))
        .env("EARSHOT_CONFIG", &config);
    let (mut child, stderr, mut seen) = run_until_listening(run, &conf);
    let out = mute("on");
    assert_eq!(
        common::stdout(&out).trim(),
        "muted",
        "{}",
        common::stderr(&out)
    );
    let muted = common::wait_for(
        &stderr,
        "muted: the microphone is off",
        Duration::from_secs(60),
        &mut seen,
    );
    assert!(muted.is_some(), "{}", seen.join("\n"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&leds)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("muted "))
    {
        assert!(Instant::now() < deadline, "no muted line in {leds:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(common::stdout(&mute("status")).trim(), "muted");
    let out = mute("off");
    assert_eq!(common::stdout(&out).trim(), "unmuted");
    let on = common::wait_for(
        &stderr,
        "unmuted: the microphone is on",
        Duration::from_secs(60),
        &mut seen,
    );
    assert!(on.is_some(), "{}", seen.join("\n"));
    let before_long_press = seen.len();
    // A long press (held past device.long_press_ms, 1500) mutes too; a
    // short one doesn't unmute.
    let mut button = open_fifo_writer(&fifo, &mut child);
    writeln!(button, "press").unwrap();
    button.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1800));
    writeln!(button, "release").unwrap();
    button.flush().unwrap();
    let long = common::wait_for(
        &stderr,
        "long press: muted",
        Duration::from_secs(30),
        &mut seen,
    );
    assert!(long.is_some(), "{}", seen.join("\n"));
    // The loop's line and the button's may come in either order.
    let muted = seen[before_long_press..]
        .iter()
        .any(|l| l.contains("muted: the microphone is off"))
        || common::wait_for(
            &stderr,
            "muted: the microphone is off",
            Duration::from_secs(60),
            &mut seen,
        )
        .is_some();
    assert!(muted, "{}", seen.join("\n"));
    writeln!(button, "click").unwrap();
    button.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(common::stdout(&mute("status")).trim(), "muted");
    drop(button);
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    // No loop: one line, exit code 1.
    let out = mute("on");
    assert_eq!(out.status.code(), Some(1));
    let err = common::stderr(&out);
    assert!(
        err.contains("earshot run is not running") && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// Issue 17 point 5, the stop word's ears: the user's "stop" said during
/// playback interrupts; the device's own "Stop." coming back into the
/// microphone (60 ms late, at 40 %, with noise) does not — unless the
/// input is echo-cancelled, when nothing is checked and it would.
#[test]
fn a_stop_word_in_its_own_voice_is_ignored_and_the_users_is_heard() {
    use earshot::audio::echo::EchoReference;
    use earshot::audio::playback::Clip;
    use earshot::audio::VadConfig;
    use earshot::voice_loop::interrupt::{Interrupter, Interruption};

    let own_stop = wav_16k(&piper_utterance("Stop."));
    let story = wav_16k(&piper_utterance("Tell me a long story about the sea."));
    // The user is not the device's voice: the same Piper voice, 10 %
    // higher and faster (a "stop" in the very voice the speaker just
    // played is, rightly, what the echo check may drop).
    let users_stop =
        earshot::audio::resample::to_16k(&wav_16k(&piper_utterance("Please stop.")), 17_600)
            .unwrap();
    let hello = wav_16k(&piper_utterance("Hello."));
    // What the speaker played: a sentence that ends in "Stop."
    let mut played = story.clone();
    played.extend(&own_stop);
    let reference = EchoReference::new(20);
    reference.record(&Clip::new(played, 16_000));

    let mut seed = 12345u64;
    let mut noise = move |n: usize, level: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                level * (((seed >> 33) as f32 / (1u64 << 30) as f32) - 1.0)
            })
            .collect()
    };
    let framed = |speech: &[f32], delay: usize, gain: f32, noise: Vec<f32>| -> Vec<f32> {
        let mut mic = vec![0.0f32; 8_000 + delay];
        mic.extend(speech.iter().map(|s| s * gain));
        mic.extend(vec![0.0f32; 8_000]);
        mic.iter()
            .zip(noise.iter().cycle())
            .map(|(s, n)| s + n)
            .collect()
    };
    let hear = |interrupter: &mut Interrupter, mic: &[f32]| -> Option<Interruption> {
        let pcm: Vec<i16> = mic
            .iter()
            .map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16)
            .collect();
        pcm.chunks(320)
            .find_map(|chunk| interrupter.hear(chunk, stt(), None))
    };
    let vad = VadConfig::default();
    let echo_of_own_stop = framed(&own_stop, 960, 0.4, noise(16_000, 0.01));

    let mut checked = Interrupter::new(&vad, Some(reference.clone())).unwrap();
    assert_eq!(hear(&mut checked, &echo_of_own_stop), None);
    // The same audio with an echo-cancelled input: heard as "stop", so the
    // silence above was the echo check, not deaf ears.
    let mut unchecked = Interrupter::new(&vad, None).unwrap();
    assert!(
        matches!(
            hear(&mut unchecked, &echo_of_own_stop),
            Some(Interruption::Stop(_))
        ),
        "whisper did not hear the echo as stop"
    );
    // The user's own words over a quieter echo of the story (under the
    // words only: speech that runs on is not a stop word).
    let mut mic = framed(&users_stop, 0, 1.0, noise(16_000, 0.005));
    let under = users_stop.len().min(story.len() - 16_000);
    for (m, s) in mic.iter_mut().skip(8_000).take(under).zip(&story[16_000..]) {
        *m += 0.15 * s;
    }
    let mut checked = Interrupter::new(&vad, Some(reference.clone())).unwrap();
    match hear(&mut checked, &mic) {
        Some(Interruption::Stop(text)) => assert!(text.to_lowercase().contains("stop"), "{text}"),
        other => panic!(
            "the user's stop was not heard: {other:?} ({:?})",
            checked.stats()
        ),
    }
    // A short word that is not a stop word.
    let mut checked = Interrupter::new(&vad, Some(reference)).unwrap();
    assert_eq!(
        hear(&mut checked, &framed(&hello, 0, 1.0, noise(16_000, 0.005))),
        None
    );
}

/// The resident set of a running process, in MB (from `/proc`).
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Issue 21 (bad input: bounded memory): ALSA's file plugin on a plain
/// file delivers audio as fast as it is read, far faster than real time.
/// An idle loop on it holds steady; the capture once moved everything the
/// device delivered into its queue on every read, and grew by ~10 MB/s.
#[test]
fn a_faster_than_real_time_input_leaves_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let in_raw = dir.path().join("in.raw");
    let out_raw = dir.path().join("out.raw");
    std::fs::write(&in_raw, vec![0u8; 16_000 * 2 * 120]).unwrap();
    let conf = common::alsa_file_config(dir.path(), &in_raw, &out_raw);
    let mut run = common::earshot(dir.path());
    run.args(["run", "--no-barge-in"]);
    let (mut child, _stderr, _) = run_until_listening(run, &conf);
    // Past the start-up loads (the voices, whisper's warm-up).
    std::thread::sleep(Duration::from_secs(6));
    let before = rss_mb(child.id());
    std::thread::sleep(Duration::from_secs(8));
    let after = rss_mb(child.id());
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(30));
    assert!(before > 0.0, "no RSS read for the child");
    assert!(
        after - before < 30.0,
        "RSS grew from {before:.0} to {after:.0} MB in 8 s of idle listening"
    );
    assert!(status.success(), "{status:?}");
}

/// Start `run` (an `earshot run` command) on the ALSA file devices of
/// `alsa_conf` and wait for its "listening" line; the child is killed if
/// that never comes. Returns the child, its stderr lines and what was seen.
fn run_until_listening(
    mut run: std::process::Command,
    alsa_conf: &std::path::Path,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    Vec<String>,
) {
    let mut child = run
        .env("ALSA_CONFIG_PATH", alsa_conf)
        .env("EARSHOT_LOG", "info")
        .env("LLM_BASE_URL", "http://127.0.0.1:9")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = common::lines(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let ready = common::wait_for(
        &stderr,
        "listening input=",
        Duration::from_secs(300),
        &mut seen,
    );
    if ready.is_none() {
        let _ = child.kill();
        panic!("never listened:\n{}", seen.join("\n"));
    }
    (child, stderr, seen)
}

/// Household sounds with no word in them, made here and repeatable: a
/// mains hum, clicks, a tune of plucked notes and hiss, 3 s each.
fn household_noise() -> Vec<i16> {
    let rate = 16_000usize;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
    };
    let tau = std::f32::consts::TAU;
    let mut out = Vec::new();
    // Hum: 50 Hz and its harmonics.
    out.extend((0..3 * rate).map(|i| {
        let t = i as f32 / rate as f32;
        0.3 * (tau * 50.0 * t).sin() + 0.15 * (tau * 150.0 * t).sin()
    }));
    // Clicks: short noise bursts, four a second.
    out.extend((0..3 * rate).map(|i| {
        let k = i % (rate / 4);
        if k < 300 {
            random() * 0.5 * (-(k as f32) / 40.0).exp()
        } else {
            0.0
        }
    }));
    // A tune: a plucked note every quarter second.
    let notes = [262.0f32, 294.0, 330.0, 392.0, 440.0, 523.0];
    out.extend((0..3 * rate).map(|i| {
        let note = notes[(i / (rate / 4)) % notes.len()];
        let t = (i % (rate / 4)) as f32 / rate as f32;
        0.4 * (tau * note * t).sin() * (-t * 8.0).exp()
    }));
    // Hiss.
    out.extend((0..3 * rate).map(|_| random() * 0.2));
    out.into_iter().map(|x| (x * 32767.0) as i16).collect()
}

/// `[audio.vad] speech_check`: Silero VAD hears speech in Piper's voice
/// and in a real recording, and none in household noise.
#[test]
fn the_speech_check_tells_speech_from_noise() {
    let paths = earshot::config::Config {
        models_dir: common::models_dir(),
        ..Default::default()
    }
    .paths();
    let mut silero = earshot::audio::silero::Silero::load(&paths).expect("models/silero_vad.onnx");
    for (what, audio) in [
        ("Piper", wav_16k(&piper_utterance("Stop the timer."))),
        (
            "a recording",
            wav_16k(&common::data("speech/goforward.wav")),
        ),
    ] {
        let v = silero.check(&audio, 5).unwrap();
        assert!(v.speech_frames >= 5, "{what}: {v:?}");
    }
    let noise = earshot::audio::to_f32(&household_noise());
    for (i, part) in noise.chunks(3 * 16_000).enumerate() {
        let v = silero.check(part, 5).unwrap();
        assert!(v.speech_frames < 5, "noise {i}: {v:?}");
    }
}

/// Issue 21: the speech check runs while the request is being said, so
/// the look at its pause and its end don't wait for the detector; its
/// verdict is the one a check of the whole utterance gives, for speech and
/// for noise, and one utterance's verdict never passes to the next.
#[test]
fn the_speech_check_ahead_gives_the_whole_utterance_s_verdict() {
    let config = earshot::config::Config {
        models_dir: common::models_dir(),
        ..Default::default()
    };
    let new_check = || {
        earshot::voice_loop::speech_check::SpeechCheck::from_config(
            &config.audio.vad,
            &config.paths(),
        )
        .expect("models/silero_vad.onnx")
    };
    let mut speech = silence(0.3);
    speech.extend(pcm("Put batteries on my shopping list."));
    let noise = household_noise();
    let mut check = new_check();
    // The loop offers the speech so far after every 20 ms read.
    let said =
        |check: &mut earshot::voice_loop::speech_check::SpeechCheck, start, audio: &[i16]| {
            check.forget();
            for end in (320..=audio.len()).step_by(320) {
                check.check_ahead(start, &audio[..end]);
            }
        };
    said(&mut check, 1_000, &speech);
    let runs = check.detector_runs();
    assert!(runs >= 1, "the check ahead never ran");
    assert!(check.holds_speech(1_000, &speech));
    assert_eq!(check.detector_runs(), runs, "checked again at the end");
    assert!(
        new_check().holds_speech(1_000, &speech),
        "a whole check disagrees"
    );
    // Noise never passes ahead, is read again at the end, and is refused
    // as a whole check refuses it. The tries ahead are bounded.
    for (i, part) in noise.chunks(3 * 16_000).enumerate() {
        let tried = check.detector_runs();
        said(&mut check, 5_000, part);
        let before = check.detector_runs();
        assert!(
            before - tried <= 10,
            "noise {i}: {} runs ahead",
            before - tried
        );
        assert!(!check.holds_speech(5_000, part), "noise {i}");
        assert_eq!(check.detector_runs(), before + 1);
        assert!(!new_check().holds_speech(5_000, part));
    }
    // New speech at the start the passed one had: its own verdict, with
    // the check ahead forgotten (a new utterance) or not (a fresh
    // endpointer starts the stream position again).
    said(&mut check, 1_000, &noise[..3 * 16_000]);
    assert!(!check.holds_speech(1_000, &noise[..3 * 16_000]));
    said(&mut check, 1_000, &speech);
    assert!(!check.holds_speech(1_000, &noise[..3 * 16_000]));
}

/// Issue 21, bad input: in `always` mode, noise that webrtc-vad lets
/// through is dropped before transcription (logged), not answered; the
/// request after it is answered as usual.
#[test]
fn household_noise_is_not_answered_and_the_request_after_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = silence(1.0);
    input.extend(household_noise());
    input.extend(silence(1.0));
    input.extend(pcm("What time is it?"));
    input.extend(silence(2.0));
    let (turns, log) = run_wav(dir.path(), &input, "always");
    assert_eq!(turns.len(), 1, "{turns:?}\n{log}");
    assert_eq!(
        common::words(turns[0]["text"].as_str().unwrap()),
        "what time is it"
    );
    assert!(log.contains("not speech (the speech check)"), "{log}");
}

/// A transcriber that holds every call for `hold` unless cancelled, then
/// hears with the real whisper; it keeps how long each call ran and
/// whether it was cancelled.
struct SlowEar {
    hold: Duration,
    calls: std::sync::Mutex<Vec<(Duration, bool)>>,
}

impl earshot::stt::Transcriber for SlowEar {
    fn name(&self) -> &'static str {
        "slow"
    }

    fn transcribe(
        &self,
        audio: &[f32],
    ) -> Result<earshot::stt::Transcript, earshot::stt::SttError> {
        self.transcribe_drafting(audio, &mut |_| false, &earshot::cancel::CancelToken::new())
    }

    fn transcribe_drafting(
        &self,
        audio: &[f32],
        _draft: &mut dyn FnMut(&str) -> bool,
        cancel: &earshot::cancel::CancelToken,
    ) -> Result<earshot::stt::Transcript, earshot::stt::SttError> {
        let started = Instant::now();
        while started.elapsed() < self.hold {
            if cancel.is_cancelled() {
                self.calls.lock().unwrap().push((started.elapsed(), true));
                return Err(earshot::stt::SttError::Cancelled);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.calls.lock().unwrap().push((started.elapsed(), false));
        stt().transcribe(audio)
    }
}

/// A Piper clip without its quiet lead-in and tail.
fn trimmed(mut clip: Vec<i16>) -> Vec<i16> {
    let loud = |s: &i16| s.unsigned_abs() > 300;
    let end = clip.iter().rposition(loud).map_or(0, |i| i + 1);
    clip.truncate(end);
    let start = clip.iter().position(loud).unwrap_or(0);
    clip.split_off(start)
}

/// Issue 21: the look at a pause transcribes on a thread of its own while
/// the microphone is read on, and speech that goes on drops it at once —
/// a look at a short gap inside a sentence no longer holds the loop (so
/// looks may start at a short pause). The look at the real pause is kept,
/// and its transcript is the turn's.
#[test]
fn a_look_at_a_gap_inside_a_sentence_is_dropped_when_speech_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let config = earshot::config::Config {
        models_dir: common::models_dir(),
        state_dir: dir.path().to_path_buf(),
        llm: earshot::llm::LlmConfig {
            base_url: "http://127.0.0.1:9".into(),
            order: vec![earshot::llm::Source::Remote],
            ..Default::default()
        },
        ..Default::default()
    };
    let services = earshot::app::build(&config).unwrap();
    let ear = Arc::new(SlowEar {
        hold: Duration::from_millis(800),
        calls: Default::default(),
    });
    let mut mic = silence(1.0);
    mic.extend(trimmed(pcm("Add batteries.")));
    mic.extend(silence(0.15));
    mic.extend(trimmed(pcm("to my shopping list.")));
    mic.extend(silence(2.0));
    let mut voice = common::voice_loop(
        &services,
        &config,
        Stt::with_engines(vec![ear.clone()], 0),
        mic,
        None,
    );
    let summary = voice.run(&mut || {}).unwrap();
    assert_eq!(summary.reason, "end of input");

    let calls = ear.calls.lock().unwrap().clone();
    // The look at the gap: dropped as soon as "to my…" was heard, long
    // before the transcriber would have finished.
    assert!(
        calls
            .iter()
            .any(|(ran, cancelled)| *cancelled && *ran < Duration::from_millis(400)),
        "{calls:?}"
    );
    // The look at the real pause ran whole, once: the turn used its words.
    assert_eq!(calls.iter().filter(|(_, c)| !c).count(), 1, "{calls:?}");
    let heard = common::voice_inputs(&services);
    assert!(
        heard.len() == 1 && heard[0].contains("batter") && heard[0].contains("shopping list"),
        "{heard:?}"
    );
}
