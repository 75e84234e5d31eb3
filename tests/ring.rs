//! Time on the device (issue 15, the ring helper's part): every LLM prompt
//! states the local date and time as its last line (point 6), `doctor`
//! shows the clock (point 7), and timers ring through the speaker in
//! `earshot run` (point 2).

mod common;

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Local, TimeZone, Utc};
use common::http::{openai_completion, openai_stream_chunks, Reply, Request, TestServer};
use earshot::agent::turn::{run_turn, TurnInput};
use earshot::agent::Services;
use earshot::cancel::CancelToken;
use earshot::config::Config;
use earshot::events::CollectSink;
use earshot::llm::openai::OpenAiClient;
use earshot::store::Store;
use serde_json::{json, Value};

// ---------------------------------------------------------------- point 6

/// Answer like an OpenAI-compatible server: streamed or not, as asked.
fn answer(req: &Request, content: &str) -> Reply {
    if req.json()["stream"] == json!(true) {
        let chunks = openai_stream_chunks("test-model", &[content]);
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        Reply::sse(&refs)
    } else {
        Reply::json(200, &openai_completion("test-model", content))
    }
}

/// Services over a fake LLM, with the wall clock pinned at `now`.
fn services(state: &Path, llm_url: &str, now: DateTime<Utc>) -> Services {
    let mut config = Config {
        state_dir: state.to_path_buf(),
        models_dir: state.join("no-models"),
        mode: earshot::agent::Mode::Graph,
        ..Default::default()
    };
    config.llm.base_url = format!("{llm_url}/v1");
    config.llm.api_key = String::new();
    config.llm.max_retries = 0;
    config.memory.enabled = false;
    let store = Store::open(&config.database_path()).unwrap();
    let llm = Arc::new(OpenAiClient::new(&config.llm));
    let mut s = earshot::app::assemble(&config, store, llm, None, None);
    s.clock = Arc::new(move || now);
    s
}

fn messages(req: &Request) -> Vec<Value> {
    req.json()["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The line the prompt must end with, computed here with chrono from the
/// pinned instant in this process's zone (the code under test uses the C
/// library's `localtime_r`).
fn expected_prefix_and_zone(now: DateTime<Utc>) -> (String, String) {
    let local = Local.from_utc_datetime(&now.naive_utc());
    let secs = local.offset().local_minus_utc();
    let sign = if secs < 0 { '-' } else { '+' };
    let zone = format!(
        "(UTC{sign}{:02}:{:02}).",
        secs.unsigned_abs() / 3600,
        secs.unsigned_abs() % 3600 / 60
    );
    (
        format!("Now: {}", local.format("%A %-d %B %Y, %H:%M")),
        zone,
    )
}

#[test]
fn every_main_llm_prompt_ends_with_the_local_date_and_time() {
    // 2026-12-02 12:34 UTC is a Wednesday in every zone from UTC-12 to
    // UTC+11; the minute is exact (the clock is pinned, not read).
    let now = Utc.with_ymd_and_hms(2026, 12, 2, 12, 34, 56).unwrap();
    let server = TestServer::start(|req: &Request| {
        let body = req.json();
        if body.get("tools").is_some() {
            return Reply::json(200, &openai_completion("agent", "Added."));
        }
        answer(req, "Sure, here you go.")
    });
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path(), &server.url(), now);
    for text in [
        "tell me something nice about autumn",
        "add oat milk to my todo list",
        "pretend you are a pirate and greet me",
    ] {
        let mut sink = CollectSink::default();
        let outcome = run_turn(&s, TurnInput::text(text), &mut sink, &CancelToken::new());
        assert!(outcome.ok, "{text}: {}", outcome.response);
    }
    let (prefix, zone) = expected_prefix_and_zone(now);
    let local_day = Local.from_utc_datetime(&now.naive_utc()).date_naive();
    if local_day == chrono::NaiveDate::from_ymd_opt(2026, 12, 2).unwrap() {
        assert!(
            prefix.starts_with("Now: Wednesday 2 December 2026, "),
            "{prefix}"
        );
    }
    let answered: Vec<Request> = server
        .requests()
        .into_iter()
        .filter(|r| {
            messages(r)
                .first()
                .and_then(|m| m["content"].as_str())
                .is_some_and(|c| c.starts_with("You are earshot"))
        })
        .collect();
    // The simple node and the tool loop at least (persona may be routed
    // to simple by the LLM fallback's reply).
    assert!(answered.len() >= 2, "{:#?}", server.requests());
    assert!(answered.iter().any(|r| r.json().get("tools").is_some()));
    for r in &answered {
        let msgs = messages(r);
        let system = msgs[0]["content"].as_str().unwrap();
        let last = system.lines().last().unwrap();
        assert!(
            last.starts_with(&prefix) && last.ends_with(&zone),
            "last line {last:?}, wanted {prefix}… {zone}"
        );
        // Exactly once, and the fixed instructions come before it.
        assert_eq!(system.matches("Now: ").count(), 1);
        assert!(system.find("Plain text only").unwrap() < system.find("Now: ").unwrap());
        // The user's text is untouched.
        let user = msgs.last().unwrap()["content"].as_str().unwrap();
        assert!(!user.contains("Now: "), "{user}");
    }
    // The pinned clock moves: the next prompt says the new minute.
    let later = now + chrono::Duration::minutes(61);
    let s = services(dir.path(), &server.url(), later);
    let mut sink = CollectSink::default();
    run_turn(
        &s,
        TurnInput::text("tell me a fact"),
        &mut sink,
        &CancelToken::new(),
    );
    let last_request = server.requests().pop().unwrap();
    let system = messages(&last_request)[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let (prefix, zone) = expected_prefix_and_zone(later);
    let last = system.lines().last().unwrap();
    assert!(last.starts_with(&prefix) && last.ends_with(&zone), "{last}");
}

// ---------------------------------------------------------------- point 7

/// `earshot doctor --json` with `env`; the clock row.
fn doctor_clock(dir: &Path, env: &[(&str, &str)]) -> Value {
    let mut cmd = common::earshot(dir);
    cmd.args(["doctor", "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = common::run(&mut cmd);
    let report: Value = serde_json::from_str(common::stdout(&out).trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", common::stdout(&out)));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "clock")
        .cloned()
        .unwrap_or_else(|| panic!("no clock row in {report}"))
}

#[test]
fn doctor_shows_the_time_zone_and_ntp_state() {
    let dir = tempfile::tempdir().unwrap();
    let row = doctor_clock(dir.path(), &[("TZ", "Europe/Berlin")]);
    let detail = row["detail"].as_str().unwrap();
    // CET or CEST, whichever is in force today.
    assert!(
        detail.starts_with("Europe/Berlin CET (UTC+01:00, from TZ)")
            || detail.starts_with("Europe/Berlin CEST (UTC+02:00, from TZ)"),
        "{detail}"
    );
    assert!(detail.contains("; NTP "), "{detail}");
    // Synced or not, it says which; here (a container) it cannot tell.
    if std::path::Path::new("/.dockerenv").exists() {
        assert!(
            detail.contains("NTP sync unknown: in a container"),
            "{detail}"
        );
    }
    if detail.contains("NTP not synced") {
        assert_eq!(row["status"], "warn");
        assert!(row["fix"]
            .as_str()
            .unwrap()
            .contains("timedatectl set-ntp true"));
    }

    // A zone the system does not know: a WARN with the fix.
    let row = doctor_clock(dir.path(), &[("TZ", "Mars/Olympus_Mons")]);
    assert_eq!(row["status"], "warn", "{row}");
    assert!(row["detail"]
        .as_str()
        .unwrap()
        .starts_with("Mars/Olympus_Mons (from TZ) is not a known zone"));
    assert!(row["fix"]
        .as_str()
        .unwrap()
        .contains("timedatectl set-timezone"));
}

#[test]
fn the_binary_states_the_zone_by_name_from_tz() {
    let server = TestServer::start(|req: &Request| answer(req, "It is Wednesday."));
    let dir = tempfile::tempdir().unwrap();
    let before = Utc::now();
    let mut cmd = common::earshot(dir.path());
    cmd.args(["chat", "what day is friday", "--json"])
        .env("TZ", "America/New_York")
        .env("LLM_BASE_URL", format!("{}/v1", server.url()))
        .env("GROQ_API_KEY", "gsk_test")
        .env("EARSHOT_MODE", "graph")
        .env("EARSHOT_MODELS_DIR", dir.path().join("no-models"));
    let out = common::run(&mut cmd);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let after = Utc::now();
    let prompt = server
        .requests()
        .iter()
        .map(|r| messages(r)[0]["content"].as_str().unwrap_or("").to_string())
        .find(|c| c.starts_with("You are earshot"))
        .unwrap_or_else(|| panic!("no answer request: {:#?}", server.requests()));
    let last = prompt.lines().last().unwrap();
    // New York is UTC-5 (EST) or UTC-4 (EDT); the minute is one of the
    // two the process ran in.
    let ny = |t: DateTime<Utc>| {
        let edt = chrono::FixedOffset::west_opt(4 * 3600).unwrap();
        let est = chrono::FixedOffset::west_opt(5 * 3600).unwrap();
        [
            format!(
                "Now: {} EDT (UTC-04:00).",
                t.with_timezone(&edt).format("%A %-d %B %Y, %H:%M")
            ),
            format!(
                "Now: {} EST (UTC-05:00).",
                t.with_timezone(&est).format("%A %-d %B %Y, %H:%M")
            ),
        ]
    };
    let wanted: Vec<String> = ny(before).into_iter().chain(ny(after)).collect();
    assert!(
        wanted.iter().any(|w| w == last),
        "{last:?} not one of {wanted:?}"
    );
}

// ---------------------------------------------------------------- point 2

use std::io::Write;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Whisper, loaded once for this test binary.
fn whisper() -> &'static earshot::stt::Stt {
    static STT: OnceLock<earshot::stt::Stt> = OnceLock::new();
    STT.get_or_init(|| {
        let config = Config {
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

fn stop_and_wait(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: signalling our own child by pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("earshot did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A device on ALSA's file plugin: silence in, 16 kHz s16 mono out to
/// `out.raw`; a scripted button on a FIFO.
struct Device {
    child: Child,
    stderr: mpsc::Receiver<String>,
    seen: Vec<String>,
    button: Option<std::fs::File>,
}

fn start_device(dir: &Path, out_raw: &Path) -> Device {
    launch_device(dir, out_raw, None)
}

/// As [`start_device`], but the microphone is `mic` (a FIFO a
/// [`PacedMic`] feeds) and whisper transcribes what it hears.
fn launch_device(dir: &Path, out_raw: &Path, mic: Option<&Path>) -> Device {
    spawn_device(dir, device_command(dir, out_raw, mic))
}

/// The `earshot run` of [`launch_device`], not started (a test may add
/// arguments and environment).
fn device_command(dir: &Path, out_raw: &Path, mic: Option<&Path>) -> std::process::Command {
    let in_raw = match mic {
        Some(fifo) => fifo.to_path_buf(),
        None => {
            let in_raw = dir.join("in.raw");
            // ALSA's file capture is not paced and repeats its last buffer
            // once the file runs out: silence in, silence forever.
            std::fs::write(&in_raw, vec![0u8; 32_000]).unwrap();
            in_raw
        }
    };
    let conf = common::alsa_file_config(dir, &in_raw, out_raw);
    let fifo = dir.join("button");
    if !fifo.exists() {
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: creating a FIFO at a fresh path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
    // Only the voice: no MiniLM (no intent tree to train) and speech-to-
    // text in the cloud (no whisper to load and warm up): nothing is said
    // to the device here, so it starts in well under a second.
    let models = dir.join("models");
    if !models.exists() {
        std::fs::create_dir(&models).unwrap();
        for f in [
            "en_US-joe-medium.onnx",
            "en_US-joe-medium.onnx.json",
            "libonnxruntime.so.1.31.1",
            "ggml-tiny.en.bin",
        ] {
            std::os::unix::fs::symlink(common::models_dir().join(f), models.join(f)).unwrap();
        }
    }
    let config = dir.join("earshot.toml");
    let order = if mic.is_some() {
        "local-only"
    } else {
        "cloud-only"
    };
    let mut toml = format!("[stt]\norder = \"{order}\"\n");
    if mic.is_some() {
        // The lights as a file: one line per state change.
        toml.push_str(&format!(
            "[device]\nleds = \"file:{}\"\n",
            dir.join("leds").display()
        ));
    }
    std::fs::write(&config, toml).unwrap();
    let mut cmd = common::earshot(dir);
    cmd.arg("--config").arg(&config).arg("run");
    if mic.is_none() {
        cmd.arg("--no-barge-in");
    }
    cmd.arg("--button")
        .arg(format!("script:{}", fifo.display()))
        .env("ALSA_CONFIG_PATH", &conf)
        // The interrupter's passes and verdicts, for a failure's log.
        .env(
            "EARSHOT_LOG",
            "info,earshot::voice_loop::interrupt=debug,earshot::stt=debug",
        )
        .env("EARSHOT_MODELS_DIR", &models)
        .env("GROQ_API_KEY", "gsk_test")
        .env("STT_BASE_URL", "http://127.0.0.1:9")
        // No LLM: nothing here needs one.
        .env("LLM_BASE_URL", "http://127.0.0.1:9")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn spawn_device(dir: &Path, mut cmd: std::process::Command) -> Device {
    let fifo = dir.join("button");
    let mut child = cmd.spawn().unwrap();
    let stderr = common::lines(child.stderr.take().unwrap());
    let button = open_fifo_writer(&fifo, &mut child, &stderr);
    Device {
        child,
        stderr,
        seen: Vec::new(),
        button: Some(button),
    }
}

impl Device {
    fn wait(&mut self, needle: &str, limit: Duration) {
        if common::wait_for(&self.stderr, needle, limit, &mut self.seen).is_none() {
            let _ = self.child.kill();
            panic!(
                "no {needle:?} within {limit:?}; stderr:\n{}",
                self.seen.join("\n")
            );
        }
    }
    fn stop(mut self) -> Vec<String> {
        drop(self.button.take());
        let status = stop_and_wait(&mut self.child);
        self.seen.extend(self.stderr.try_iter());
        assert!(
            status.success(),
            "exit {status:?}:\n{}",
            self.seen.join("\n")
        );
        self.seen
    }
}

/// Open a FIFO for writing once its reader is there.
fn open_fifo_writer(
    fifo: &Path,
    child: &mut Child,
    stderr: &mpsc::Receiver<String>,
) -> std::fs::File {
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
            std::thread::sleep(Duration::from_millis(200));
            let log: Vec<String> = stderr.try_iter().collect();
            panic!(
                "earshot exited ({status:?}) before opening its button script:\n{}",
                log.join("\n")
            );
        }
        assert!(
            Instant::now() < deadline,
            "the button script was never opened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn timers(dir: &Path) -> earshot::timers::Timers {
    let config = Config {
        state_dir: dir.to_path_buf(),
        ..Default::default()
    };
    let store = Store::open(&config.database_path()).unwrap();
    earshot::timers::Timers::new(&config.timers, &config.paths(), store)
}

fn add_timer(dir: &Path, secs: u64, label: &str) -> i64 {
    timers(dir)
        .add(earshot::timers::NewTimer {
            kind: earshot::timers::Kind::Timer,
            label: Some(label.into()),
            when: earshot::timers::When::In(Duration::from_secs(secs)),
            repeat: None,
        })
        .unwrap()
        .id
}

/// A timer row's state as stored.
fn state_of(dir: &Path, id: i64) -> String {
    let db = rusqlite::Connection::open(dir.join("earshot.db")).unwrap();
    db.query_row("SELECT state FROM timers WHERE id = ?1", [id], |r| r.get(0))
        .unwrap()
}

#[test]
fn timers_ring_through_the_speaker_and_missed_ones_are_announced_once() {
    let dir = tempfile::tempdir().unwrap();
    let out_raw = dir.path().join("out.raw");
    // A timer that comes due while earshot is not running.
    let pasta = add_timer(dir.path(), 1, "pasta");
    let due = timers(dir.path()).get(pasta).unwrap().unwrap().due;
    while Utc::now() <= due {
        std::thread::sleep(Duration::from_millis(50));
    }

    let mut device = start_device(dir.path(), &out_raw);
    device.wait(
        "announcing: While I was off, your pasta timer finished.",
        Duration::from_secs(120),
    );
    // ALSA's file plugin starts its file again each time the output is
    // reopened (after every pause): take what was played as it ends.
    device.wait("announcement played", Duration::from_secs(30));
    let announced = common::played_raw(&out_raw);
    // A live one, set with the CLI (another process) while it runs.
    let out = common::run(
        common::earshot(dir.path()).args(["timers", "add", "--in", "2s", "--label", "rice"]),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let rice: i64 = rusqlite::Connection::open(dir.path().join("earshot.db"))
        .unwrap()
        .query_row("SELECT id FROM timers WHERE label = 'rice'", [], |r| {
            r.get(0)
        })
        .unwrap();
    device.wait(
        "ring round: Your rice timer is done.",
        Duration::from_secs(30),
    );
    device.wait("ring round played", Duration::from_secs(30));
    let rang = common::played_raw(&out_raw);
    // The round repeats after its pause.
    device.wait("round=2", Duration::from_secs(30));
    // The button stops it, here and in the scheduler.
    let button = device.button.as_mut().unwrap();
    writeln!(button, "press").unwrap();
    writeln!(button, "release").unwrap();
    device.wait("ringing stopped on the device", Duration::from_secs(10));
    device.wait("event=stopped", Duration::from_secs(10));
    let log = device.stop();
    assert_eq!(
        log.iter().filter(|l| l.contains("announcing:")).count(),
        1,
        "{}",
        log.join("\n")
    );
    assert_eq!(state_of(dir.path(), rice), "done");
    assert_eq!(state_of(dir.path(), pasta), "missed");

    // What the speaker played: each time the chime first, then the words
    // (one transcription of both, with a second of silence between).
    let mut both = Vec::new();
    for audio in [&announced, &rang] {
        assert!(
            audio.len() > 16_000 * 2,
            "only {} samples played",
            audio.len()
        );
        // The output may start with silence (a loaded machine opens the
        // stream before the first samples are queued): the chime is what
        // follows the first sound, a tone at its first note's pitch.
        let start = audio
            .iter()
            .position(|s| s.abs() > 0.02)
            .expect("nothing audible played");
        let note = &audio[start..(start + 2_400).min(audio.len())];
        let tone = common::tone_share(note, 1318.5, 16_000.0);
        assert!(tone > 0.5, "no chime first (tone share {tone:.2})");
        both.extend_from_slice(audio);
        both.extend(std::iter::repeat_n(0.0, 16_000));
    }
    let heard = common::words(&whisper().transcribe(&both).unwrap().text);
    let pasta = heard
        .find("pasta")
        .unwrap_or_else(|| panic!("heard {heard:?}"));
    let rice = heard
        .find("rice timer")
        .unwrap_or_else(|| panic!("heard {heard:?}"));
    assert!(
        heard.contains("while i was off") && pasta < rice,
        "heard {heard:?}"
    );

    // Started again, it says nothing about the pasta.
    std::fs::remove_file(&out_raw).unwrap();
    let mut device = start_device(dir.path(), &out_raw);
    device.wait("timers ready", Duration::from_secs(120));
    device.wait("listening", Duration::from_secs(60));
    // The ringer takes in what the scheduler found on the loop's first
    // ticks; give it a moment to (not) speak.
    std::thread::sleep(Duration::from_millis(800));
    let log = device.stop();
    assert!(
        !log.iter()
            .any(|l| l.contains("announcing") || l.contains("ring round")),
        "{}",
        log.join("\n")
    );
    let audio = common::played_raw(&out_raw);
    let loud = audio.iter().filter(|s| s.abs() > 0.05).count();
    assert!(loud < 100, "{loud} loud samples played on the second start");
}

/// The state of the timer labelled `label` in the device's database.
fn timer_state(dir: &Path, label: &str) -> String {
    rusqlite::Connection::open(dir.join("earshot.db"))
        .unwrap()
        .query_row("SELECT state FROM timers WHERE label = ?1", [label], |r| {
            r.get(0)
        })
        .unwrap()
}

/// A microphone on a FIFO that ALSA's file plugin reads as its capture
/// file, fed at real-time pace like a real one: silence, and, when asked,
/// an utterance (written whole, so no read inside it comes up short).
struct PacedMic {
    say: mpsc::Sender<Vec<i16>>,
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PacedMic {
    fn start(fifo: &Path) -> PacedMic {
        use std::os::unix::fs::OpenOptionsExt;
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: creating a FIFO at a fresh path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (say, heard) = mpsc::channel::<Vec<i16>>();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let fifo = fifo.to_path_buf();
        let thread = std::thread::spawn(move || {
            let quit = || stop.load(std::sync::atomic::Ordering::SeqCst);
            let start = Instant::now();
            let mut sent = 0usize;
            // ALSA opens the capture file more than once (probing, then the
            // stream): each time it closes, open the FIFO again.
            while !quit() {
                // Wait for a reader without blocking for ever if none comes.
                let file = match std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&fifo)
                {
                    Ok(f) => f,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                use std::os::fd::AsRawFd;
                // SAFETY: clearing O_NONBLOCK on a descriptor this thread owns.
                unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) };
                let mut file = file;
                while !quit() {
                    let chunk = heard.try_recv().unwrap_or_else(|_| vec![0i16; 320]);
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
        });
        PacedMic {
            say,
            done,
            thread: Some(thread),
        }
    }

    /// Say `samples` (16 kHz mono) into the microphone, then silence.
    fn say(&self, samples: &[f32]) {
        let pcm: Vec<i16> = samples
            .iter()
            .map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16)
            .collect();
        self.say.send(pcm).unwrap();
    }
}

impl Drop for PacedMic {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// "Stop." in the Piper voice, 16 kHz mono.
fn spoken(dir: &Path, text: &str) -> Vec<f32> {
    let wav = dir.join("spoken.wav");
    let out = common::run(
        common::earshot(dir)
            .args(["say", text, "--engine", "piper", "--out"])
            .arg(&wav)
            .env("EARSHOT_MODELS_DIR", common::models_dir()),
    );
    assert!(out.status.success(), "say: {}", common::stderr(&out));
    earshot::audio::wav::read_16k_mono(&wav, None).unwrap().0
}

#[test]
fn saying_stop_while_a_timer_rings_stops_it_with_no_wake_word_and_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out_raw = dir.path().join("out.raw");
    let stop = spoken(dir.path(), "Stop.");
    let mic = PacedMic::start(&dir.path().join("mic"));
    let mut device = launch_device(dir.path(), &out_raw, Some(&dir.path().join("mic")));
    device.wait("listening", Duration::from_secs(120));
    let out = common::run(
        common::earshot(dir.path()).args(["timers", "add", "--in", "1s", "--label", "tea"]),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    device.wait(
        "ring round: Your tea timer is done.",
        Duration::from_secs(30),
    );
    // With no echo cancelling (barge-in off, the default) the microphone
    // is not taken while a round sounds: "stop" is said in the pause
    // between rounds.
    device.wait("ring round played", Duration::from_secs(30));
    let said_at = Instant::now();
    mic.say(&stop);
    device.wait("while ringing: stopping it", Duration::from_secs(30));
    device.wait("event=stopped", Duration::from_secs(10));
    let took = said_at.elapsed();
    drop(mic);
    let log = device.stop();
    assert_eq!(timer_state(dir.path(), "tea"), "done");
    // Stopped by the word, long before ring_secs (60 s) would have.
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let heard = log
        .iter()
        .find(|l| l.contains("while ringing: stopping it"))
        .unwrap();
    assert!(heard.to_lowercase().contains("stop"), "{heard}");
    // No turn: nothing was sent to a model, nothing answered.
    assert!(
        !log.iter().any(|l| l.contains("turn timings:")),
        "{}",
        log.join("\n")
    );
    let turns: i64 = rusqlite::Connection::open(dir.path().join("earshot.db"))
        .unwrap()
        .query_row("SELECT COUNT(*) FROM turn_log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(turns, 0, "a turn was run for \"stop\"");
    // The lights followed: ringing, then listening to "stop", thinking
    // (its transcription), and back to idle; each line a state and a time.
    let leds = std::fs::read_to_string(dir.path().join("leds")).unwrap();
    let states: Vec<&str> = leds
        .lines()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    for l in leds.lines() {
        let ts = l.split(' ').nth(1).unwrap_or("");
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{l}");
    }
    let after_ring = states
        .iter()
        .position(|s| *s == "ringing")
        .unwrap_or_else(|| panic!("{leds}"));
    let rest = &states[after_ring..];
    let listening = rest.iter().position(|s| *s == "listening");
    let thinking = rest.iter().position(|s| *s == "thinking");
    assert!(
        matches!((listening, thinking), (Some(a), Some(b)) if a < b),
        "{leds}"
    );
    assert_eq!(states.last(), Some(&"idle"), "{leds}");
    let rounds_after = log
        .iter()
        .skip_while(|l| !l.contains("while ringing: stopping it"))
        .filter(|l| l.contains("ring round:"))
        .count();
    assert_eq!(rounds_after, 0, "{}", log.join("\n"));
}

// ------------------------------------------------- the API's event stream

#[test]
fn timer_events_reach_the_api_event_stream() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        state_dir: dir.path().to_path_buf(),
        models_dir: dir.path().join("no-models"),
        ..Default::default()
    };
    config.memory.enabled = false;
    config.api.bind = "127.0.0.1:0".into();
    config.api.keepalive_secs = 1;
    let store = Store::open(&config.database_path()).unwrap();
    let llm = Arc::new(OpenAiClient::new(&config.llm));
    let s = earshot::app::assemble(&config, store, llm, None, None);
    let speech = Arc::new(earshot::api::speech::Speech::new(
        Err("no speech here".into()),
        earshot::tts::Tts::with_engines(Vec::new()),
    ));
    let server =
        earshot::api::ApiServer::start_with_speech(s.clone(), speech, &config.api).unwrap();
    let addr = server.local_addr();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let api = std::thread::spawn(move || {
        server.run_until(|| stopped.load(std::sync::atomic::Ordering::SeqCst))
    });

    let mut client = std::net::TcpStream::connect(addr).unwrap();
    client
        .write_all(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The stream is open once its headers (and a first keep-alive) came.
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut read_until = |needle: &str, seen: &mut String| {
        while !seen.contains(needle) {
            let n = client.read(&mut buf).unwrap_or(0);
            assert!(n > 0, "stream ended before {needle:?}: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    };
    read_until("text/event-stream", &mut seen);
    read_until(": thinking", &mut seen);

    let _scheduler = s.timers.start_scheduler().unwrap();
    let timer = add_timer(dir.path(), 1, "tea");
    // Set from "another process" (a fresh Timers on the same file): the
    // scheduler notices it and tells, then rings it.
    read_until(r#""event":"ringing""#, &mut seen);
    s.timers.stop_ringing(None).unwrap();
    read_until(r#""event":"stopped""#, &mut seen);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    api.join().unwrap();
    let frames: Vec<Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let ringing = frames
        .iter()
        .find(|f| f["event"] == "ringing")
        .unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(ringing["type"], "timer");
    assert_eq!(ringing["id"], timer);
    assert_eq!(ringing["kind"], "timer");
    assert_eq!(ringing["label"], "tea");
    assert!(
        chrono::DateTime::parse_from_rfc3339(ringing["due"].as_str().unwrap()).is_ok(),
        "{ringing}"
    );
    let keys: Vec<&String> = ringing.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["type", "event", "id", "kind", "label", "due"]);
}

// ------------------------------------ issue 17 point 5: the stop word

/// An LLM that streams a long answer (twelve sentences, ~40 s of speech).
fn long_story_llm() -> TestServer {
    TestServer::start(|req: &Request| {
        let sentences: Vec<String> = (1..=12)
            .map(|i| format!("This is sentence number {i} of a long story about the sea. "))
            .collect();
        let pieces: Vec<&str> = sentences.iter().map(String::as_str).collect();
        if req.json()["stream"] == json!(true) {
            let chunks = openai_stream_chunks("test-model", &pieces);
            let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
            Reply::sse(&refs)
        } else {
            Reply::json(200, &openai_completion("test-model", &pieces.concat()))
        }
    })
}

/// Seconds in a WAV being written in real time.
fn wav_seconds(path: &Path) -> f64 {
    hound::WavReader::open(path)
        .map(|r| f64::from(r.len()) / f64::from(r.spec().sample_rate))
        .unwrap_or(0.0)
}

/// The device talks (a paced output, as a loudspeaker); "stop" is said
/// into the paced microphone while it does. Returns the device, the time
/// from the end of "stop" to the log line `needle`, and the seconds the
/// output had written then and half a second later.
fn stop_while_sounding(
    dir: &Path,
    start: impl FnOnce(&mut Device, &PacedMic),
    needle: &str,
    llm: Option<&str>,
) -> (Vec<String>, Duration, f64, f64) {
    let out_raw = dir.join("out.raw");
    let out_wav = dir.join("speaker.wav");
    let stop = spoken(dir, "Stop.");
    let mic = PacedMic::start(&dir.join("mic"));
    let mut cmd = device_command(dir, &out_raw, Some(&dir.join("mic")));
    cmd.arg("--output")
        .arg(format!("paced:{}", out_wav.display()));
    if let Some(url) = llm {
        cmd.env("LLM_BASE_URL", url);
    }
    let mut device = spawn_device(dir, cmd);
    device.wait("listening", Duration::from_secs(120));
    start(&mut device, &mic);
    // Let it sound for a moment, then "stop" over it.
    std::thread::sleep(Duration::from_millis(800));
    let said_at = Instant::now();
    mic.say(&stop);
    device.wait(needle, Duration::from_secs(30));
    let spoken_for = Duration::from_secs_f64(stop.len() as f64 / 16_000.0);
    let took = said_at.elapsed().saturating_sub(spoken_for);
    let at_stop = wav_seconds(&out_wav);
    std::thread::sleep(Duration::from_millis(500));
    let later = wav_seconds(&out_wav);
    drop(mic);
    (device.stop(), took, at_stop, later)
}

#[test]
fn saying_stop_while_it_answers_cuts_the_answer_off() {
    let dir = tempfile::tempdir().unwrap();
    let request = spoken(dir.path(), "Tell me a long story about the sea.");
    let llm = long_story_llm();
    let (log, took, at_stop, later) = stop_while_sounding(
        dir.path(),
        |device, mic| {
            mic.say(&request);
            device.wait("speaking", Duration::from_secs(120));
        },
        "barge-in: stop word",
        Some(&llm.url()),
    );
    // Nothing more after the stop (one 10 ms tick may be in flight), and
    // the twelve sentences (~40 s) were cut after a few.
    assert!(later - at_stop <= 0.011, "{at_stop} s, then {later} s");
    assert!(at_stop < 15.0, "{at_stop} s of the answer played");
    // The end of "stop" → silence: hang-over plus a short transcription
    // (a debug build on a busy machine; the release figure is in
    // BENCHMARKS.md).
    assert!(
        took < Duration::from_secs(6),
        "took {took:?}:\n{}",
        log.join("\n")
    );
    let turn = log
        .iter()
        .find(|l| l.contains("turn timings:"))
        .unwrap_or_else(|| panic!("{}", log.join("\n")));
    assert!(turn.contains(r#""barge_in":"stop_word""#), "{turn}");
    let heard = log
        .iter()
        .find(|l| l.contains("barge-in: stop word"))
        .unwrap();
    assert!(heard.to_lowercase().contains("stop"), "{heard}");
    // "Stop" was not a request: one turn only.
    let turns = log.iter().filter(|l| l.contains("turn timings:")).count();
    assert_eq!(turns, 1, "{}", log.join("\n"));
}

#[test]
fn saying_stop_over_a_ring_round_cuts_the_round() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_path_buf();
    let (log, took, at_stop, later) = stop_while_sounding(
        dir.path(),
        |device, _| {
            let out = common::run(
                common::earshot(&state).args(["timers", "add", "--in", "1s", "--label", "tea"]),
            );
            assert!(out.status.success(), "{}", common::stderr(&out));
            device.wait(
                "ring round: Your tea timer is done.",
                Duration::from_secs(30),
            );
        },
        "over the ringing: stopping it",
        None,
    );
    assert!(later - at_stop <= 0.011, "{at_stop} s, then {later} s");
    assert!(
        took < Duration::from_secs(6),
        "took {took:?}:\n{}",
        log.join("\n")
    );
    assert_eq!(timer_state(dir.path(), "tea"), "done");
    // Cut mid-round: no "round played" for the round it was said over,
    // no round after, and no turn.
    let after: Vec<&String> = log
        .iter()
        .skip_while(|l| !l.contains("over the ringing: stopping it"))
        .collect();
    assert!(
        !after.iter().any(|l| l.contains("ring round:")),
        "{}",
        log.join("\n")
    );
    assert!(
        !log.iter().any(|l| l.contains("turn timings:")),
        "{}",
        log.join("\n")
    );
}
