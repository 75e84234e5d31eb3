//! `earshot run` as the host of Wyoming satellites, against a real
//! `wyoming-satellite` 1.0.0 server (PyPI, in .venv/wyoming-satellite —
//! `scripts/venv-wyoming-satellite.sh` makes it) with file-backed
//! microphone and speaker commands: one full spoken turn whose played
//! answer transcribes back to the time, while a dead satellite is retried
//! with doubling waits and a satellite that stops reading is dropped on its
//! own, then a clean exit on SIGTERM; a scripted satellite for the events
//! 1.0.0 doesn't send; and the local microphone answering beside failing
//! satellites.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The satellite venv's python, or a failure saying how to make it.
fn satellite_python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/wyoming-satellite/bin/python");
    assert!(
        py.is_file(),
        "{} is missing: run scripts/venv-wyoming-satellite.sh",
        py.display()
    );
    py
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/wyoming")
        .join(name)
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills a child process on every path out of the test.
struct Reaper(Option<Child>);

impl Reaper {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sigterm(child: &Child) {
    // SAFETY: signalling a child we spawned.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Collects a child's log lines and waits for the ones a test needs.
struct Log {
    rx: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    fn new(rx: mpsc::Receiver<String>) -> Log {
        Log {
            rx,
            seen: Vec::new(),
        }
    }

    /// Wait until `pred` holds for the lines seen so far.
    fn wait_until(&mut self, limit: Duration, pred: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if pred(&self.seen) {
                return true;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            match self.rx.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
                Err(mpsc::RecvTimeoutError::Disconnected) => return pred(&self.seen),
            }
        }
    }

    /// Read until the stream ends (the child exited), at most `limit`.
    fn read_to_end(&mut self, limit: Duration) {
        self.wait_until(limit, |_| false);
    }

    fn drain(&mut self) {
        while let Ok(line) = self.rx.try_recv() {
            self.seen.push(line);
        }
    }

    fn text(&self) -> String {
        self.seen.join("\n")
    }
}

/// Wait for a file to exist (the speaker script renames it into place
/// when complete).
fn wait_file(path: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if path.is_file() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Wait until something accepts connections on `port`.
fn wait_listening(port: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// "What time is it?" spoken by earshot's own Piper voice, as 16 kHz mono.
fn spoken_request(dir: &Path) -> Vec<i16> {
    spoken(dir, "What time is it?")
}

/// `text` spoken by earshot's own Piper voice, as 16 kHz mono.
fn spoken(dir: &Path, text: &str) -> Vec<i16> {
    let name: String = text.chars().filter(char::is_ascii_alphanumeric).collect();
    let wav = dir.join(format!("{name}.wav"));
    let out = common::run(
        common::earshot(dir)
            .args(["say", text, "--engine", "piper", "--out"])
            .arg(&wav),
    );
    assert!(out.status.success(), "say failed: {}", common::stderr(&out));
    let (samples, _) = earshot::audio::wav::read_16k_mono(&wav, None).expect("read request wav");
    earshot::audio::to_i16(&samples)
}

fn le_bytes(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// A minimal 16-bit mono WAV around raw PCM, for `earshot transcribe`.
fn write_wav(path: &Path, rate: u32, pcm: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    let len = pcm.len() as u32;
    f.write_all(b"RIFF").unwrap();
    f.write_all(&(36 + len).to_le_bytes()).unwrap();
    f.write_all(b"WAVEfmt ").unwrap();
    f.write_all(&16u32.to_le_bytes()).unwrap();
    f.write_all(&1u16.to_le_bytes()).unwrap(); // PCM
    f.write_all(&1u16.to_le_bytes()).unwrap(); // mono
    f.write_all(&rate.to_le_bytes()).unwrap();
    f.write_all(&(rate * 2).to_le_bytes()).unwrap();
    f.write_all(&2u16.to_le_bytes()).unwrap();
    f.write_all(&16u16.to_le_bytes()).unwrap();
    f.write_all(b"data").unwrap();
    f.write_all(&len.to_le_bytes()).unwrap();
    f.write_all(pcm).unwrap();
}

/// A Wyoming frame: header line, then the payload.
fn frame(kind: &str, data: serde_json::Value, payload: &[u8]) -> Vec<u8> {
    let mut header = serde_json::json!({"type": kind, "data": data});
    if !payload.is_empty() {
        header["payload_length"] = payload.len().into();
    }
    let mut out = serde_json::to_vec(&header).unwrap();
    out.push(b'\n');
    out.extend_from_slice(payload);
    out
}

/// A satellite that accepts and streams a spoken request (again every few
/// seconds) but never reads a byte — so the answer earshot sends it piles
/// up until earshot's write times out. Its receive buffer is made tiny so
/// that happens within one answer. Counts the connections it accepted.
struct StallingSatellite {
    port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl StallingSatellite {
    fn start(request: Vec<i16>) -> StallingSatellite {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        {
            use std::os::fd::AsRawFd;
            let size: libc::c_int = 4096;
            // SAFETY: setsockopt on our own listener with a live c_int;
            // accepted sockets inherit the receive buffer size.
            let rc = unsafe {
                libc::setsockopt(
                    listener.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUF,
                    (&size as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0);
        }
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (acc, stp) = (accepted.clone(), stop.clone());
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !stp.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        acc.fetch_add(1, Ordering::SeqCst);
                        let request = request.clone();
                        let stop = stp.clone();
                        std::thread::spawn(move || stream_forever(stream, &request, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        StallingSatellite {
            port,
            accepted,
            stop,
        }
    }
}

impl Drop for StallingSatellite {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// run-pipeline, then real-time audio: the request, 4 s of silence,
/// repeated, until the peer hangs up. Never reads.
fn stream_forever(mut stream: TcpStream, request: &[i16], stop: &AtomicBool) {
    let fmt = serde_json::json!({"rate": 16000, "width": 2, "channels": 1});
    if stream
        .write_all(&frame(
            "run-pipeline",
            serde_json::json!({"start_stage": "asr", "end_stage": "tts"}),
            &[],
        ))
        .is_err()
    {
        return;
    }
    let mut cycle: Vec<i16> = request.to_vec();
    cycle.extend(std::iter::repeat_n(0i16, 16_000 * 4));
    let started = Instant::now();
    let mut sent = 0usize;
    while !stop.load(Ordering::SeqCst) {
        for piece in cycle.chunks(1024) {
            if stop.load(Ordering::SeqCst)
                || stream
                    .write_all(&frame("audio-chunk", fmt.clone(), &le_bytes(piece)))
                    .is_err()
            {
                return;
            }
            sent += piece.len();
            let due = started + Duration::from_secs_f64(sent as f64 / 16_000.0);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
}

/// `HH:MM:SS.ffffff` of a log line's RFC 3339 stamp, in seconds.
fn stamp_seconds(line: &str) -> Option<f64> {
    let t = line.split_whitespace().next()?.split('T').nth(1)?;
    let t = t.trim_end_matches('Z');
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// `retrying in N ms` of a log line.
fn retry_ms(line: &str) -> Option<u64> {
    let rest = line.split("retrying in ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// `6:27` in a sentence → (6, 27).
fn clock_in(text: &str) -> Option<(u32, u32)> {
    let re = regex::Regex::new(r"(\d{1,2}):(\d{2})").unwrap();
    let c = re.captures(text)?;
    Some((c[1].parse().ok()?, c[2].parse().ok()?))
}

#[test]
fn drives_a_real_wyoming_satellite_through_a_spoken_turn_beside_a_dead_and_a_stalled_one() {
    let py = satellite_python();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let request = spoken_request(d);
    // The microphone: the request once earshot has the satellite
    // streaming, then silence.
    let req_raw = d.join("request.raw");
    std::fs::write(&req_raw, le_bytes(&request)).unwrap();
    let trigger = d.join("streaming");
    let snd_dir = d.join("played");
    std::fs::create_dir(&snd_dir).unwrap();
    let sat_port = free_port();
    let mut satellite = Reaper(Some(
        Command::new(&py)
            .args(["-m", "wyoming_satellite", "--uri"])
            .arg(format!("tcp://127.0.0.1:{sat_port}"))
            .args(["--no-zeroconf", "--debug", "--name", "kitchen"])
            .arg("--mic-command")
            .arg(format!(
                "{} {} {} {}",
                py.display(),
                script("sat_mic.py").display(),
                req_raw.display(),
                trigger.display()
            ))
            .arg("--snd-command")
            .arg(format!(
                "{} {} {}",
                py.display(),
                script("sat_snd.py").display(),
                snd_dir.display()
            ))
            // The satellite converts our 22 kHz answer to what its
            // speaker takes.
            .args(["--snd-command-rate", "16000"])
            .arg("--streaming-start-command")
            .arg(format!("touch {}", trigger.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wyoming-satellite"),
    ));
    let mut sat_log = Log::new(common::lines(satellite.child().stderr.take().unwrap()));
    assert!(
        wait_listening(sat_port, Duration::from_secs(30)),
        "wyoming-satellite never listened; its log:\n{}",
        {
            sat_log.drain();
            sat_log.text()
        }
    );
    let dead_port = free_port();
    let stall = StallingSatellite::start(request.clone());

    let real = format!("tcp://127.0.0.1:{sat_port}");
    let dead = format!("tcp://127.0.0.1:{dead_port}");
    let stalled = format!("tcp://127.0.0.1:{}", stall.port);
    let config = d.join("earshot.toml");
    std::fs::write(
        &config,
        format!(
            r#"[wyoming]
satellites = ["{real}", "{dead}", "{stalled}"]
reconnect_min_ms = 100
reconnect_max_ms = 800
request_timeout_ms = 2000
"#
        ),
    )
    .unwrap();
    let mut earshot = Reaper(Some(
        common::earshot(d)
            .arg("--config")
            .arg(&config)
            .args(["run", "--json", "--input", "none", "--output"])
            .arg(d.join("local.wav"))
            .env("EARSHOT_LOG", "info")
            // No LLM is reachable: the tree answers on device.
            .env("LLM_BASE_URL", "http://127.0.0.1:9")
            // A time tiny.en hears back reliably (as tests/voice.rs).
            .env("EARSHOT_TEST_CLOCK", "15:27")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut out = Log::new(common::lines(earshot.child().stdout.take().unwrap()));
    let mut log = Log::new(common::lines(earshot.child().stderr.take().unwrap()));

    // One full turn with the real satellite: its answer file appears once
    // the satellite's speaker command got the whole answer.
    let answer_raw = snd_dir.join("answer-1.raw");
    let turn_line = format!("\"satellite\":\"{real}\"");
    let got_turn = out.wait_until(Duration::from_secs(240), |seen| {
        seen.iter().any(|l| l.contains(&turn_line))
    });
    let played = got_turn && wait_file(&answer_raw, Duration::from_secs(30));
    // The stalled satellite's answer never drains: its write times out and
    // it is dropped (then reconnected), on its own thread.
    let stall_lost = format!("satellite {stalled}: lost: cannot send");
    let stall_dropped = log.wait_until(Duration::from_secs(120), |seen| {
        seen.iter().any(|l| l.contains(&stall_lost))
    });
    // ... and reconnected after its backoff.
    let stall_connected = format!("satellite {stalled}: connected");
    log.wait_until(Duration::from_secs(30), |seen| {
        seen.iter().filter(|l| l.contains(&stall_connected)).count() >= 2
    });
    // Enough retries of the dead one to see the waits double to the cap.
    let dead_retry = format!("satellite {dead}: cannot connect");
    log.wait_until(Duration::from_secs(30), |seen| {
        seen.iter().filter(|l| l.contains(&dead_retry)).count() >= 6
    });

    sigterm(earshot.child());
    let status = wait_exit(earshot.child(), Duration::from_secs(30));
    log.drain();
    out.drain();
    sat_log.drain();
    let all = log.text();
    assert!(
        got_turn && played,
        "no spoken turn with the satellite (turn line: {got_turn}, answer file: {played}); stdout:\n{}\nearshot log:\n{all}\nsatellite log:\n{}",
        out.text(),
        sat_log.text()
    );
    let status = status.unwrap_or_else(|| panic!("earshot did not exit on SIGTERM; log:\n{all}"));
    assert!(status.success(), "exit {status:?}; log:\n{all}");
    assert!(all.contains("stopped (signal)"), "{all}");
    assert!(
        all.contains(&format!("satellite {real}: disconnected (stopping)")),
        "{all}"
    );

    // The turn: heard the request, answered the pinned time by the tree.
    let turn: serde_json::Value = serde_json::from_str(
        out.seen
            .iter()
            .find(|l| l.contains(&turn_line))
            .expect("turn line"),
    )
    .unwrap();
    let heard = turn["text"].as_str().unwrap().to_lowercase();
    assert!(heard.contains("what time is it"), "{turn}");
    assert_eq!(turn["intent"], "time_now", "{turn}");
    assert_eq!(turn["ok"], true, "{turn}");
    let answer = turn["answer"].as_str().unwrap();
    assert_eq!(clock_in(answer), Some((3, 27)), "answered {answer:?}");
    assert!(
        turn["after_audio_end_ms"]["first_audio"].as_f64().is_some(),
        "{turn}"
    );
    // The latency stamps (BENCHMARKS.md sets them beside the ESPHome
    // host's).
    eprintln!("wyoming satellite turn: {}", turn["after_audio_end_ms"]);
    // The satellite received the transcript and the answer's text.
    let sat = sat_log.text();
    assert!(
        sat.contains("type='transcript'") && sat.contains("What time is it"),
        "{sat}"
    );
    assert!(sat.contains("type='synthesize'"), "{sat}");

    // What the satellite's speaker got is the spoken time.
    let pcm = std::fs::read(&answer_raw).unwrap();
    assert!(
        pcm.len() > 16_000 * 2,
        "only {} bytes of answer audio",
        pcm.len()
    );
    let wav = d.join("answer.wav");
    write_wav(&wav, 16_000, &pcm);
    let tr = common::run(common::earshot(d).args(["transcribe", "--json"]).arg(&wav));
    assert!(tr.status.success(), "{}", common::stderr(&tr));
    let tr: serde_json::Value = serde_json::from_str(common::stdout(&tr).trim()).unwrap();
    let spoken = tr["text"].as_str().unwrap();
    let digits: String = spoken.chars().filter(char::is_ascii_digit).collect();
    assert!(
        digits.contains("327"),
        "the satellite played {spoken:?} for the answer {answer:?}"
    );

    // The dead satellite: one line per attempt, waits doubling from
    // reconnect_min_ms to reconnect_max_ms, and really waited.
    let retries: Vec<&String> = log
        .seen
        .iter()
        .filter(|l| l.contains(&dead_retry))
        .collect();
    assert!(retries.len() >= 6, "{all}");
    let waits: Vec<u64> = retries.iter().filter_map(|l| retry_ms(l)).collect();
    assert_eq!(&waits[..5], &[100, 200, 400, 800, 800], "{all}");
    for pair in retries.windows(2).take(5) {
        let (a, b) = (stamp_seconds(pair[0]), stamp_seconds(pair[1]));
        let waited_ms = (b.unwrap() - a.unwrap()) * 1000.0;
        let announced = retry_ms(pair[0]).unwrap() as f64;
        assert!(
            waited_ms >= announced * 0.9,
            "retried after {waited_ms} ms, announced {announced} ms:\n{}\n{}",
            pair[0],
            pair[1]
        );
    }

    // Each satellite that spoke has its own conversation.
    let db = rusqlite::Connection::open(d.join("earshot.db")).unwrap();
    let mut q = db
        .prepare(
            "SELECT json_extract(extra_json, '$.satellite'), COUNT(DISTINCT conversation_id)
             FROM turn_log WHERE source = 'wyoming' GROUP BY 1 ORDER BY 1",
        )
        .unwrap();
    let per_satellite: Vec<(String, i64)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = per_satellite.iter().map(|(s, _)| s.as_str()).collect();
    assert!(
        names.contains(&real.as_str()) && names.contains(&stalled.as_str()),
        "{per_satellite:?}"
    );
    assert!(
        per_satellite.iter().all(|(_, n)| *n == 1),
        "{per_satellite:?}"
    );
    let conversations: i64 = db
        .query_row(
            "SELECT COUNT(DISTINCT conversation_id) FROM turn_log WHERE source = 'wyoming'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(conversations as usize, per_satellite.len());

    // The stalled satellite was dropped by its write timeout and retried,
    // without holding up the real satellite's turn.
    assert!(
        stall_dropped,
        "the stalled satellite was never dropped:\n{all}"
    );
    assert!(
        stall.accepted.load(Ordering::SeqCst) >= 2,
        "not reconnected after the stall:\n{all}"
    );
}

#[test]
fn no_microphone_and_no_satellite_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::run(common::earshot(dir.path()).args(["run", "--input", "none"]));
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains("wyoming.satellites") && err.contains("audio.input"),
        "{err}"
    );
}

/// One Wyoming event read by the scripted satellite.
#[derive(Debug)]
struct Frame {
    kind: String,
    data: serde_json::Value,
    payload: Vec<u8>,
}

/// Read one frame: header line, additional data merged over `data`, then
/// the payload. `None` at EOF.
fn read_frame(r: &mut impl BufRead) -> Option<Frame> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let header: serde_json::Value = serde_json::from_str(line.trim()).expect("header JSON");
    let mut data = header
        .get("data")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(n) = header.get("data_length").and_then(|v| v.as_u64()) {
        let mut buf = vec![0u8; n as usize];
        r.read_exact(&mut buf).ok()?;
        let extra: serde_json::Value = serde_json::from_slice(&buf).expect("data JSON");
        for (k, v) in extra.as_object().unwrap() {
            data[k] = v.clone();
        }
    }
    let mut payload = Vec::new();
    if let Some(n) = header.get("payload_length").and_then(|v| v.as_u64()) {
        payload = vec![0u8; n as usize];
        r.read_exact(&mut payload).ok()?;
    }
    Some(Frame {
        kind: header["type"].as_str().unwrap().to_string(),
        data,
        payload,
    })
}

/// The scripted satellite's view of earshot: frames as they arrive.
struct Peer {
    stream: TcpStream,
    rx: mpsc::Receiver<Frame>,
    seen: Vec<String>,
}

impl Peer {
    fn send(&mut self, kind: &str, data: serde_json::Value, payload: &[u8]) {
        self.stream.write_all(&frame(kind, data, payload)).unwrap();
    }

    /// Stream 16 kHz audio as a satellite does (1024-sample chunks),
    /// unpaced: earshot must not depend on real time.
    fn send_audio(&mut self, samples: &[i16]) {
        self.send_audio_as(samples, 16_000, 1);
    }

    /// The same audio declared as `rate` Hz with `channels` interleaved
    /// channels (from 16 kHz mono by repeating samples: a crude but
    /// honest upsampling that earshot must resample back).
    fn send_audio_as(&mut self, samples: &[i16], rate: u32, channels: u16) {
        let factor = (rate / 16_000) as usize;
        let fmt = serde_json::json!({"rate": rate, "width": 2, "channels": channels});
        let wide: Vec<i16> = samples
            .iter()
            .flat_map(|&s| std::iter::repeat_n(s, factor * usize::from(channels)))
            .collect();
        let mut bytes = Vec::new();
        for piece in wide.chunks(1024 * usize::from(channels)) {
            bytes.extend(frame("audio-chunk", fmt.clone(), &le_bytes(piece)));
        }
        self.stream.write_all(&bytes).unwrap();
    }

    /// The next frame that is not an `audio-chunk` (chunks are appended
    /// to `audio`).
    fn next(&mut self, limit: Duration, audio: &mut Vec<u8>) -> Frame {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no event from earshot; so far: {:?}", self.seen));
            let f = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no event from earshot; so far: {:?}", self.seen));
            if f.kind == "audio-chunk" {
                audio.extend_from_slice(&f.payload);
                continue;
            }
            self.seen.push(format!("{} {}", f.kind, f.data));
            return f;
        }
    }

    /// One request's events, in the order a satellite must see them;
    /// returns (transcript, answer text, answer audio bytes, audio rate).
    fn expect_turn(&mut self) -> (String, String, Vec<u8>, u64) {
        let limit = Duration::from_secs(120);
        let mut audio = Vec::new();
        let kinds: Vec<Frame> = (0..6).map(|_| self.next(limit, &mut audio)).collect();
        let order: Vec<&str> = kinds.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(
            order,
            [
                "voice-started",
                "voice-stopped",
                "transcript",
                "synthesize",
                "audio-start",
                "audio-stop"
            ],
            "{:?}",
            self.seen
        );
        let rate = kinds[4].data["rate"].as_u64().unwrap();
        assert_eq!(kinds[4].data["width"], 2);
        assert_eq!(kinds[4].data["channels"], 1);
        (
            kinds[2].data["text"].as_str().unwrap().to_lowercase(),
            kinds[3].data["text"].as_str().unwrap().to_string(),
            audio,
            rate,
        )
    }
}

/// The events newer satellites and Home Assistant use, scripted byte for
/// byte against the real binary: `audio-stop` ends a request with no
/// trailing silence, `played` ends the wait for playback at once (the next
/// request, sent right after it, is heard), `pause-satellite` makes
/// earshot drop audio until the satellite runs again, and the answer comes
/// as voice-started, voice-stopped, transcript, synthesize, audio-start,
/// audio-chunks, audio-stop.
#[test]
fn scripted_satellite_audio_stop_played_and_pause() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let time = spoken(d, "What time is it?");
    let day = spoken(d, "What day is it?");
    let paused = spoken(d, "Tell me the time.");
    let date = spoken(d, "What's the date today?");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = d.join("earshot.toml");
    std::fs::write(
        &config,
        format!("[wyoming]\nsatellites = [\"tcp://127.0.0.1:{port}\"]\n"),
    )
    .unwrap();
    let mut earshot = Reaper(Some(
        common::earshot(d)
            .arg("--config")
            .arg(&config)
            .args(["run", "--input", "none", "--output"])
            .arg(d.join("local.wav"))
            .env("EARSHOT_LOG", "info")
            .env("LLM_BASE_URL", "http://127.0.0.1:9")
            .env("EARSHOT_TEST_CLOCK", "15:27")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut log = Log::new(common::lines(earshot.child().stderr.take().unwrap()));
    let (stream, _) = listener.accept().unwrap();
    let reader = stream.try_clone().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(reader);
        while let Some(f) = read_frame(&mut r) {
            if tx.send(f).is_err() {
                return;
            }
        }
    });
    let mut peer = Peer {
        stream,
        rx,
        seen: Vec::new(),
    };
    let mut ignored = Vec::new();
    // earshot asks who we are, then tells us to run.
    let first = peer.next(Duration::from_secs(120), &mut ignored);
    assert_eq!(first.kind, "describe", "{:?}", peer.seen);
    assert_eq!(
        peer.next(Duration::from_secs(5), &mut ignored).kind,
        "run-satellite"
    );

    // 1. Local wake word heard: the request, then audio-stop at once.
    peer.send(
        "run-pipeline",
        serde_json::json!({"start_stage": "asr", "end_stage": "tts"}),
        &[],
    );
    peer.send_audio(&time);
    peer.send("audio-stop", serde_json::json!({}), &[]);
    let (heard, answer, audio, rate) = peer.expect_turn();
    assert!(heard.contains("what time"), "{heard}");
    assert_eq!(clock_in(&answer), Some((3, 27)), "{answer}");
    // About the length the answer takes to say (a second or more).
    assert!(
        audio.len() as u64 > rate * 2,
        "{} bytes at {rate} Hz",
        audio.len()
    );

    // 2. `played` right away, then the next request immediately: heard
    // (sent as 48 kHz stereo, which earshot converts to 16 kHz mono).
    peer.send("played", serde_json::json!({}), &[]);
    peer.send(
        "run-pipeline",
        serde_json::json!({"start_stage": "asr", "end_stage": "tts"}),
        &[],
    );
    peer.send_audio_as(&day, 48_000, 2);
    peer.send("audio-stop", serde_json::json!({}), &[]);
    let (heard, _, audio, _) = peer.expect_turn();
    assert!(heard.contains("day"), "{heard}");
    assert!(!audio.is_empty());
    peer.send("played", serde_json::json!({}), &[]);

    // 3. Paused: a request (with trailing silence, so it would end) is
    // dropped; after run-pipeline the next one is the one heard.
    peer.send("pause-satellite", serde_json::json!({}), &[]);
    let mut with_silence = paused.clone();
    with_silence.extend(std::iter::repeat_n(0i16, 16_000 * 2));
    peer.send_audio(&with_silence);
    peer.send("audio-stop", serde_json::json!({}), &[]);
    peer.send(
        "run-pipeline",
        serde_json::json!({"start_stage": "asr", "end_stage": "tts"}),
        &[],
    );
    peer.send_audio(&date);
    peer.send("audio-stop", serde_json::json!({}), &[]);
    let (heard, _, _, _) = peer.expect_turn();
    assert!(
        heard.contains("date") && !heard.contains("tell"),
        "heard {heard:?} after the pause"
    );

    // 4. Shutdown: earshot tells the satellite to pause, then hangs up.
    sigterm(earshot.child());
    let bye = peer.next(Duration::from_secs(30), &mut ignored);
    assert_eq!(bye.kind, "pause-satellite", "{:?}", peer.seen);
    let status = wait_exit(earshot.child(), Duration::from_secs(30));
    log.drain();
    let status = status.unwrap_or_else(|| panic!("no exit; log:\n{}", log.text()));
    assert!(status.success(), "{status:?}; log:\n{}", log.text());
    // Three turns, one conversation (the satellite's).
    let db = rusqlite::Connection::open(d.join("earshot.db")).unwrap();
    let (turns, conversations): (i64, i64) = db
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT conversation_id) FROM turn_log WHERE source = 'wyoming'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((turns, conversations), (3, 1), "{}", log.text());
}

/// The local microphone keeps working beside satellites that fail: with a
/// dead satellite and one that never reads configured, `earshot run
/// --input request.wav` answers the spoken request locally and stops
/// cleanly at the end of its input, the satellite threads retrying on
/// their own meanwhile.
#[test]
fn the_local_microphone_answers_beside_a_dead_and_a_stalled_satellite() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let request = spoken_request(d);
    let stall = StallingSatellite::start(request.clone());
    let mut input: Vec<i16> = vec![0; 8_000];
    input.extend(&request);
    input.extend(std::iter::repeat_n(0, 16_000 * 2));
    let local_wav = d.join("local.wav");
    write_wav(&local_wav, 16_000, &le_bytes(&input));
    let dead = format!("tcp://127.0.0.1:{}", free_port());
    let stalled = format!("tcp://127.0.0.1:{}", stall.port);
    let config = d.join("earshot.toml");
    std::fs::write(
        &config,
        format!(
            "[wyoming]\nsatellites = [\"{dead}\", \"{stalled}\"]\nreconnect_min_ms = 100\nreconnect_max_ms = 800\nrequest_timeout_ms = 2000\n"
        ),
    )
    .unwrap();
    let mut earshot = Reaper(Some(
        common::earshot(d)
            .arg("--config")
            .arg(&config)
            .args(["run", "--json", "--no-barge-in", "--input"])
            .arg(&local_wav)
            .arg("--output")
            .arg(d.join("answer.wav"))
            .env("EARSHOT_LOG", "info")
            .env("LLM_BASE_URL", "http://127.0.0.1:9")
            .env("EARSHOT_TEST_CLOCK", "15:27")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut out = Log::new(common::lines(earshot.child().stdout.take().unwrap()));
    let mut log = Log::new(common::lines(earshot.child().stderr.take().unwrap()));
    // The run ends by itself at the end of the WAV input.
    let status = wait_exit(earshot.child(), Duration::from_secs(240));
    log.read_to_end(Duration::from_secs(5));
    out.read_to_end(Duration::from_secs(5));
    let all = log.text();
    let status = status.unwrap_or_else(|| panic!("no exit at the end of input; log:\n{all}"));
    assert!(status.success(), "{status:?}; log:\n{all}");
    assert!(all.contains("voice loop stopped"), "{all}");
    // The local turn's line has no "source" (satellite turns say
    // "source":"wyoming").
    let turn = out
        .seen
        .iter()
        .find(|l| l.contains("\"answer\"") && !l.contains("\"source\":\"wyoming\""))
        .unwrap_or_else(|| panic!("no local turn; stdout:\n{}\nlog:\n{all}", out.text()));
    let turn: serde_json::Value = serde_json::from_str(turn).unwrap();
    assert_eq!(turn["intent"], "time_now", "{turn}");
    assert_eq!(
        clock_in(turn["answer"].as_str().unwrap()),
        Some((3, 27)),
        "{turn}"
    );
    // The satellites were being driven (and failing) in the same run.
    assert!(
        all.contains(&format!("satellite {dead}: cannot connect")),
        "{all}"
    );
    assert!(
        all.contains(&format!("satellite {stalled}: connected")),
        "{all}"
    );
    assert!(stall.accepted.load(Ordering::SeqCst) >= 1);
}
