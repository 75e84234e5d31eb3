//! `[esphome] serve = true` in `earshot run`: earshot as Home Assistant's
//! voice satellite. Home Assistant is `tests/esphome/ha_satellite.py` on
//! aioesphomeapi's APIClient (the library HA's ESPHome integration runs);
//! earshot's microphone is a WAV of real (Piper) speech written into a
//! FIFO once HA is subscribed, so the order is fixed without sleeps: the
//! input opens only when the test writes it.
//!
//! One `earshot run` (models loaded once) covers: an announcement and a
//! finished HA timer played before the first request; a request streamed
//! to HA (whisper hears it in what HA received) and HA's answer WAV played
//! from its URL; an answer streamed over the API; a 404, a non-WAV and a
//! too-large answer (one log line each, back to listening); HA not
//! answering in time and HA unsubscribed, both answered locally.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common;

/// A child killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The test venv's Python running `ha_satellite.py`, killed on drop.
fn home_assistant(
    port: u16,
    outdir: &Path,
    plan: Option<&str>,
) -> (Killed, std::sync::mpsc::Receiver<String>) {
    home_assistant_with_key(port, outdir, plan, None)
}

/// The same, encrypted with `key`.
fn home_assistant_with_key(
    port: u16,
    outdir: &Path,
    plan: Option<&str>,
    key: Option<&str>,
) -> (Killed, std::sync::mpsc::Receiver<String>) {
    let mut cmd = Command::new(super::python());
    if let Some(key) = key {
        cmd.env("HA_NOISE_PSK", key);
    }
    let mut child = cmd
        .arg(super::repo().join("tests/esphome/ha_satellite.py"))
        .arg(port.to_string())
        .arg(outdir)
        .args(plan)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the Home Assistant client");
    let lines = common::lines(child.stdout.take().unwrap());
    (Killed(child), lines)
}

/// Wait for a log line containing `needle` (or the process to end).
fn log_line(log: &Path, needle: &str, limit: Duration, child: &mut Child) -> Option<String> {
    let deadline = Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(needle)) {
            return Some(line.to_string());
        }
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Open a FIFO for writing once its reader is there (non-blocking tries,
/// so an earshot that died fails the test instead of hanging it), then
/// make it blocking for the write.
/// Wait for a line of earshot's log containing `needle`; fail with the
/// log when it does not come.
fn expect_log(log: &Path, needle: &str, limit: Duration, child: &mut Child) {
    assert!(
        log_line(log, needle, limit, child).is_some(),
        "no {needle:?} in earshot's log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// Wait until Home Assistant's client says it subscribed.
fn expect_subscribed(ha_lines: &std::sync::mpsc::Receiver<String>, ha_seen: &mut Vec<String>) {
    assert!(
        common::wait_for(ha_lines, "\"subscribed\"", Duration::from_secs(60), ha_seen).is_some(),
        "HA never subscribed: {ha_seen:?}"
    );
}

/// Write `input` as earshot's microphone (a 16 kHz WAV into the FIFO).
fn speak_into(fifo: &Path, child: &mut Child, input: &[i16]) {
    let mut mic = fifo_writer(fifo, child);
    mic.write_all(&earshot::audio::wav::write_16k_mono(input))
        .unwrap();
}

fn fifo_writer(fifo: &Path, child: &mut Child) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(file) => {
                // SAFETY: fcntl on a descriptor we own.
                unsafe {
                    let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
                }
                return file;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("cannot open {}: {e}", fifo.display()),
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("earshot exited ({status:?}) before opening its input");
        }
        assert!(Instant::now() < deadline, "the input was never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whisper, to hear what Home Assistant received.
fn transcribe(samples: &[i16]) -> String {
    let config = earshot::config::Config {
        models_dir: common::models_dir(),
        stt: earshot::stt::SttConfig {
            order: earshot::stt::Order::LocalOnly,
            ..Default::default()
        },
        ..Default::default()
    };
    let stt = earshot::app::stt(&config).expect("whisper model");
    stt.transcribe(&earshot::audio::to_f32(samples))
        .expect("transcribe")
        .text
}

/// Seconds of `samples` (50 ms windows) where `freq` carries most of the
/// energy, and the first such window.
fn tone_windows(samples: &[f32], rate: u32, freq: f32) -> (usize, Option<usize>) {
    let window = rate as usize / 20;
    let mut count = 0;
    let mut first = None;
    for (i, w) in samples.chunks_exact(window).enumerate() {
        let energy: f32 = w.iter().map(|x| x * x).sum::<f32>() / w.len() as f32;
        if energy > 1e-4 && common::tone_share(w, freq, rate as f32) > 0.8 {
            count += 1;
            first.get_or_insert(i);
        }
    }
    (count, first)
}

/// `earshot run --json` with `[esphome] serve` on a free loopback port,
/// its microphone a FIFO (`mic.wav`) the test writes when it is ready,
/// answers to `out.wav`, no LLM (the tree answers local turns).
struct Earshot {
    process: Killed,
    stdout: std::sync::mpsc::Receiver<String>,
    log: PathBuf,
    port: u16,
    fifo: PathBuf,
    seen: Vec<String>,
}

impl Earshot {
    fn start(d: &Path, args: &[&str]) -> Earshot {
        Earshot::start_with(d, args, "")
    }

    /// With more of the `[esphome]` section (`encryption_key = …`).
    fn start_with(d: &Path, args: &[&str], esphome: &str) -> Earshot {
        let fifo = d.join("mic.wav");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: creating a FIFO at a fresh path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let config = d.join("earshot.toml");
        std::fs::write(
            &config,
            format!(
                "[esphome]\nserve = true\nbind = \"127.0.0.1:0\"\nname = \"kitchen\"\n{esphome}\n"
            ),
        )
        .unwrap();
        let log = d.join("earshot.log");
        let mut child = common::earshot(d)
            .arg("--config")
            .arg(&config)
            .args(["run", "--json", "--input"])
            .arg(&fifo)
            .arg("--output")
            .arg(d.join("out.wav"))
            .args(args)
            .env("EARSHOT_LOG", "info")
            .env("LLM_BASE_URL", "http://127.0.0.1:9")
            .env("EARSHOT_TEST_CLOCK", "15:27")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = common::lines(child.stdout.take().unwrap());
        let process = Killed(child);
        let mut seen = Vec::new();
        // Bound before any model loads: the line comes first.
        let listening = common::wait_for(
            &stdout,
            "earshot: listening on esphome://",
            Duration::from_secs(60),
            &mut seen,
        )
        .unwrap_or_else(|| {
            panic!(
                "no listening line; stdout {seen:?}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        assert!(listening.contains("127.0.0.1:"), "{listening}");
        let how = if esphome.contains("encryption_key") {
            "(encrypted)"
        } else {
            "(plaintext)"
        };
        assert!(listening.ends_with(how), "{listening}");
        let port: u16 = listening
            .split("esphome://")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("a port");
        Earshot {
            process,
            stdout,
            log,
            port,
            fifo,
            seen,
        }
    }
}

/// Wait for the process to end by itself.
fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 16 kHz mono samples of a raw s16le file.
fn raw_i16(path: &Path) -> Vec<i16> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// `text` in earshot's Piper voice, 16 kHz mono.
fn piper(d: &Path, text: &str) -> Vec<i16> {
    let wav = d.join("phrase.wav");
    let out = common::run(
        common::earshot(d)
            .args(["say", text, "--engine", "piper", "--out"])
            .arg(&wav),
    );
    assert!(out.status.success(), "say failed: {}", common::stderr(&out));
    let (samples, _) = earshot::audio::wav::read_16k_mono(&wav, None).expect("read the phrase");
    earshot::audio::to_i16(&samples)
}

#[test]
fn home_assistant_runs_its_pipeline_through_earshots_microphone_and_speaker() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let request = raw_i16(&super::spoken_pcm(d));
    // Seven requests, each followed by more silence than the hang-over.
    let mut input = vec![0i16; 8_000];
    for _ in 0..7 {
        input.extend(&request);
        input.extend(std::iter::repeat_n(0i16, 24_000));
    }
    let Earshot {
        process: mut earshot,
        stdout,
        log,
        port,
        fifo,
        mut seen,
    } = Earshot::start(d, &[]);
    let out = d.join("out.wav");
    let (_ha, ha_lines) = home_assistant(port, d, None);
    let mut ha_seen = Vec::new();
    expect_subscribed(&ha_lines, &mut ha_seen);
    // The announcement is fetched and waiting before the microphone has
    // anything: it plays first.
    expect_log(
        &log,
        "announcement ready",
        Duration::from_secs(60),
        &mut earshot.0,
    );
    speak_into(&fifo, &mut earshot.0, &input);
    // The input ends after the seventh request: earshot stops by itself.
    let status = wait_exit(&mut earshot.0, Duration::from_secs(120));
    let done = common::wait_for(&ha_lines, "\"done\"", Duration::from_secs(10), &mut ha_seen);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        done.is_some(),
        "HA did not see every request: {ha_seen:?}\n{text}"
    );
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{text}");
    while let Ok(line) = stdout.try_recv() {
        seen.push(line);
    }
    let ha: Vec<serde_json::Value> = ha_seen
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let find = |key: &str, n: u64| {
        ha.iter()
            .find(|v| v[key] == n)
            .cloned()
            .unwrap_or_else(|| panic!("no {key} {n} in {ha_seen:?}"))
    };

    // The announcement was played and finished.
    assert!(
        ha.iter().any(|v| v["announced"] == true),
        "{ha_seen:?}\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("playing for Home Assistant") && l.contains("timer")),
        "the finished timer did not ring:\n{text}"
    );
    // Six requests went to HA, in order, the conversation carried on.
    for (n, plan) in ["url", "stream", "missing", "hang", "notwav", "huge"]
        .iter()
        .enumerate()
    {
        let start = find("start", n as u64 + 1);
        assert_eq!(start["plan"], *plan, "{start}");
    }
    assert_eq!(find("start", 1)["conversation_id"], "");
    assert_eq!(find("start", 2)["conversation_id"], "conv-1");
    assert!(
        !ha.iter().any(|v| v["start"] == 7),
        "the seventh request went to HA after it unsubscribed: {ha_seen:?}"
    );
    // The request's audio: plausible length, real speech, the words.
    let first = find("run", 1);
    let bytes = first["audio_bytes"].as_u64().unwrap() as usize;
    let received = raw_i16(&d.join("run1.raw"));
    assert_eq!(received.len() * 2, bytes);
    let seconds = received.len() as f32 / 16_000.0;
    let speech = request.len() as f32 / 16_000.0;
    assert!(
        seconds >= speech * 0.6 && seconds <= speech + 2.0,
        "{seconds} s sent for {speech} s of speech"
    );
    let rms = (received.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>()
        / received.len().max(1) as f64)
        .sqrt();
    assert!(rms > 300.0, "silent audio (rms {rms})");
    let heard = common::words(&transcribe(&received));
    assert!(heard.contains("what time is it"), "HA got {heard:?}");
    // The hung request was given up with the stop, not left running.
    let hang_stop = find("stop", 4);
    assert_eq!(hang_stop["abort"], true, "{hang_stop}");
    assert_eq!(hang_stop["audio_bytes"], 0, "{hang_stop}");

    // Two requests were answered locally: HA too slow, HA gone.
    assert!(
        text.contains("Home Assistant did not answer the request in 3 s; answering locally"),
        "{text}"
    );
    assert!(
        text.contains("Home Assistant unsubscribed; answering locally"),
        "{text}"
    );
    let (remote, turns): (Vec<serde_json::Value>, Vec<serde_json::Value>) = seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .partition(|v| v["pipeline"] == "remote");
    assert_eq!(turns.len(), 2, "{seen:?}\n{text}");
    // The remote turns' lines carry what HA heard and answered.
    let answers: Vec<&str> = remote
        .iter()
        .map(|v| v["answer"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        answers,
        [
            "Answer 1.",
            "Answer 2.",
            "Answer 3.",
            "Answer 5.",
            "Answer 6."
        ],
        "{seen:?}"
    );
    assert!(
        remote.iter().all(|v| v["text"] == "What time is it?"),
        "{remote:?}"
    );
    for turn in &turns {
        assert_eq!(
            common::words(turn["text"].as_str().unwrap()),
            "what time is it"
        );
        let answer = turn["answer"].as_str().unwrap();
        assert!(answer.contains("3:27"), "{answer}");
    }

    // Bad answers: one line each, nothing played, back to listening.
    let bad = |needle: &str| {
        text.lines()
            .filter(|l| {
                l.contains("cannot play the answer from http://127.0.0.1:") && l.contains(needle)
            })
            .count()
    };
    assert_eq!(
        bad("HTTP 404"),
        1,
        "the streamed answer's URL is not fetched:\n{text}"
    );
    assert_eq!(bad("not a WAV file"), 1, "{text}");
    assert_eq!(bad("larger than"), 1, "{text}");
    assert!(!text.contains("panicked"), "{text}");

    // What the speaker played: the announcement (440 Hz), then the URL's
    // answer (1000 Hz), then the streamed one (1500 Hz).
    let reader = hound::WavReader::open(&out).expect("the output WAV");
    let rate = reader.spec().sample_rate;
    let played: Vec<f32> = reader
        .into_samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32768.0)
        .collect();
    let (chime, chime_at) = tone_windows(&played, rate, 440.0);
    let (answer, answer_at) = tone_windows(&played, rate, 1000.0);
    let (streamed, streamed_at) = tone_windows(&played, rate, 1500.0);
    assert!(chime >= 8, "announcement: {chime} windows");
    assert!(answer >= 10, "answer from the URL: {answer} windows");
    assert!(streamed >= 10, "streamed answer: {streamed} windows");
    assert!(
        chime_at < answer_at && answer_at < streamed_at,
        "order {chime_at:?} {answer_at:?} {streamed_at:?}"
    );
    for line in text
        .lines()
        .filter(|l| l.contains("esphome satellite") || l.contains("remote turn"))
    {
        eprintln!("{line}");
    }
    eprintln!("satellite test: {:.1} s", started.elapsed().as_secs_f32());
}

/// After the wake word, HA gets the request without it (as firmware
/// streams after its detection) and the wake word's name.
#[test]
fn after_the_wake_word_home_assistant_gets_the_request_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut input = vec![0i16; 16_000];
    input.extend(piper(d, "Hey Jarvis, what time is it?"));
    input.extend(std::iter::repeat_n(0i16, 32_000));
    // HA's answer asks for a reply: this needs no wake word.
    input.extend(raw_i16(&super::spoken_pcm(d)));
    input.extend(std::iter::repeat_n(0i16, 32_000));
    let Earshot {
        process: mut earshot,
        log,
        port,
        fifo,
        // Kept: a closed stdout would end earshot at its next turn line.
        stdout: _stdout,
        ..
    } = Earshot::start(d, &["--wake", "wake"]);
    let (_ha, ha_lines) = home_assistant(port, d, Some("follow,url"));
    let mut ha_seen = Vec::new();
    expect_subscribed(&ha_lines, &mut ha_seen);
    // The subscription is in before the microphone has anything.
    expect_log(
        &log,
        "Home Assistant subscribed",
        Duration::from_secs(30),
        &mut earshot.0,
    );
    speak_into(&fifo, &mut earshot.0, &input);
    let status = wait_exit(&mut earshot.0, Duration::from_secs(120));
    let done = common::wait_for(&ha_lines, "\"done\"", Duration::from_secs(10), &mut ha_seen);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(done.is_some(), "{ha_seen:?}\n{text}");
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{text}");
    assert!(text.contains("wake word heard"), "{text}");
    let run: serde_json::Value = ha_seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["run"] == 1)
        .expect("a run");
    assert!(
        run["wake_word"]
            .as_str()
            .is_some_and(|w| w.contains("jarvis")),
        "{run}"
    );
    let heard = common::words(&transcribe(&raw_i16(&d.join("run1.raw"))));
    for line in text.lines().filter(|l| l.contains("wake word heard")) {
        eprintln!("{line}");
    }
    eprintln!("HA heard {heard:?}");
    assert!(heard.contains("what time is it"), "HA got {heard:?}");
    assert!(!heard.contains("jarvis"), "HA got the wake word: {heard:?}");
    // HA's continue_conversation opened the microphone for the reply.
    assert!(
        text.contains("follow-up: listening without the wake word"),
        "{text}"
    );
    let second: serde_json::Value = ha_seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["start"] == 2)
        .unwrap_or_else(|| panic!("the reply did not reach HA: {ha_seen:?}\n{text}"));
    assert_eq!(second["conversation_id"], "conv-1", "{second}");
}

/// SIGTERM while Home Assistant holds a request (it took the audio and
/// went quiet): the remote turn is cancelled, HA is told to stop, earshot
/// exits at once. Encrypted, as off loopback it must be.
#[test]
fn sigterm_during_a_remote_turn_stops_it_and_tells_home_assistant() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut input = vec![0i16; 8_000];
    input.extend(raw_i16(&super::spoken_pcm(d)));
    input.extend(std::iter::repeat_n(0i16, 32_000));
    let Earshot {
        process: mut earshot,
        log,
        port,
        fifo,
        // Kept: a closed stdout would end earshot at its next turn line.
        stdout: _stdout,
        ..
    } = Earshot::start_with(d, &[], &format!("encryption_key = \"{}\"", super::KEY));
    let (_ha, ha_lines) = home_assistant_with_key(port, d, Some("silent"), Some(super::KEY));
    let mut ha_seen = Vec::new();
    expect_log(
        &log,
        "Home Assistant subscribed",
        Duration::from_secs(60),
        &mut earshot.0,
    );
    speak_into(&fifo, &mut earshot.0, &input);
    // HA has the whole request (the end of audio, not an abort).
    let ended = common::wait_for(&ha_lines, "\"stop\"", Duration::from_secs(60), &mut ha_seen)
        .unwrap_or_else(|| panic!("{ha_seen:?}"));
    assert!(ended.contains("\"abort\": false"), "{ended}");
    // SAFETY: signalling our own child by pid.
    unsafe {
        libc::kill(earshot.0.id() as i32, libc::SIGTERM);
    }
    let signalled = Instant::now();
    let status = wait_exit(&mut earshot.0, Duration::from_secs(20));
    let took = signalled.elapsed();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{text}");
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after SIGTERM\n{text}"
    );
    let aborted = common::wait_for(
        &ha_lines,
        "\"abort\": true",
        Duration::from_secs(5),
        &mut ha_seen,
    );
    assert!(
        aborted.is_some(),
        "HA was not told to stop: {ha_seen:?}\n{text}"
    );
    assert!(text.contains("cancelling the remote turn"), "{text}");
    assert!(!text.contains(super::KEY), "the key reached the log");
}

/// Off loopback without a key, `earshot run` refuses at once, in one line
/// (the bind comes before any model).
#[test]
fn serve_off_loopback_without_a_key_refuses_to_start_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("earshot.toml");
    std::fs::write(&config, "[esphome]\nserve = true\nbind = \"0.0.0.0:0\"\n").unwrap();
    let started = Instant::now();
    let out = common::run(
        common::earshot(dir.path())
            .arg("--config")
            .arg(&config)
            .args(["run", "--input", "none-such.wav"]),
    );
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("encryption_key"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused only after {:?}",
        started.elapsed()
    );
}
