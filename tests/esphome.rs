//! Issue 22: the ESPHome native API against real peers.
//!
//! Home Assistant's side is `aioesphomeapi` from PyPI (the client library
//! Home Assistant's ESPHome integration uses), pinned in
//! `scripts/venv-esphome.sh`, connecting to `earshot esphome serve`
//! plaintext and encrypted; bad input (a 2^31 length, an unknown message
//! type, a wrong key, a peer that stalls) closes only that connection.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const VENV_SCRIPT: &str = "scripts/venv-esphome.sh";
/// A fixed test key (base64 of 32 bytes).
const KEY: &str = "px7tsbK3C7bpXHr2OevEV2ZMg/FrNBw2+O2pNPbedtA=";
const WRONG_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The test venv's Python, or a failure saying how to create it.
fn python() -> PathBuf {
    let py = repo().join(".venv/esphome/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run {VENV_SCRIPT}",
        py.display()
    );
    py
}

/// `earshot esphome serve`, killed on drop; its stderr goes to a file.
struct Served {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(esphome_section: &str) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("earshot.toml");
        std::fs::write(&config, format!("[esphome]\n{esphome_section}\n")).unwrap();
        let log = dir.path().join("stderr.log");
        let mut cmd = common::earshot(dir.path());
        cmd.env("EARSHOT_LOG", "info")
            .arg("--config")
            .arg(&config)
            .args(["esphome", "serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut child = cmd.spawn().expect("spawn earshot esphome serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("earshot: listening on esphome://") {
                    let addr = rest.split(' ').next().unwrap_or("");
                    let _ = tx.send(addr.rsplit(':').next().unwrap_or("").parse::<u16>().ok());
                }
            }
            let _ = tx.send(None);
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Some(port)) => Served {
                child,
                port,
                log,
                _dir: dir,
            },
            other => {
                let _ = child.kill();
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("earshot esphome serve did not start ({other:?}); stderr:\n{log}");
            }
        }
    }

    /// Home Assistant's client against this server: its JSON line.
    fn home_assistant(&self, key: Option<&str>, password: Option<&str>) -> serde_json::Value {
        let out = Command::new(python())
            .arg(repo().join("tests/esphome/ha_client.py"))
            .arg(self.port.to_string())
            .arg(key.unwrap_or("-"))
            .arg(password.unwrap_or("-"))
            .output()
            .expect("run the aioesphomeapi client");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or("");
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "client printed no JSON ({e}): {text}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Wait (generously) until the server's log has a line containing
    /// `needle`.
    fn log_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {needle:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read until the server closes the connection (a generous deadline: the
/// point is that it closes, not how fast).
fn closed_by_server(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn entities(reply: &serde_json::Value) -> Vec<String> {
    reply["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}", e[0].as_str().unwrap(), e[1].as_str().unwrap()))
        .collect()
}

#[test]
fn home_assistant_adopts_earshot_over_plaintext_on_loopback() {
    let served = Served::start("name = \"kitchen\"");
    let reply = served.home_assistant(None, None);
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["name"], "kitchen");
    assert_eq!(reply["api"], serde_json::json!([1, 15]));
    // voice assistant | speaker | API audio | timers | announce
    assert_eq!(reply["flags"], 0b11111, "{reply}");
    assert_eq!(reply["encryption"], false);
    assert!(
        entities(&reply).contains(&"BinarySensorInfo:assist_in_progress".to_string()),
        "{reply}"
    );
    // The same MAC every time (Home Assistant keys devices by it).
    let again = served.home_assistant(None, None);
    assert_eq!(again["mac"], reply["mac"]);
    // A password, when set, is checked.
    drop(served);
    let guarded = Served::start("password = \"open sesame\"");
    assert_eq!(
        guarded.home_assistant(None, Some("open sesame"))["ok"],
        true
    );
    let wrong = guarded.home_assistant(None, Some("nope"));
    assert_eq!(wrong["ok"], false, "{wrong}");
    // The client does not wait for the refusal (it learns of it as the
    // connection drops): either error, and the server names the cause.
    assert!(
        ["InvalidAuthAPIError", "APIConnectionError"].contains(&wrong["error"].as_str().unwrap()),
        "{wrong}"
    );
    guarded.log_line("wrong API password");
}

#[test]
fn encrypted_with_the_key_and_refused_with_a_wrong_key_or_none() {
    let served = Served::start(&format!("encryption_key = \"{KEY}\"\nname = \"hall\""));
    let reply = served.home_assistant(Some(KEY), None);
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["name"], "hall");
    assert_eq!(reply["encryption"], true);
    assert_eq!(reply["flags"], 0b11111, "{reply}");

    let wrong = served.home_assistant(Some(WRONG_KEY), None);
    assert_eq!(wrong["ok"], false, "{wrong}");
    assert_eq!(wrong["error"], "InvalidEncryptionKeyAPIError", "{wrong}");
    served.log_line("wrong encryption key");

    let plain = served.home_assistant(None, None);
    assert_eq!(plain["ok"], false, "{plain}");
    // Still serving the right key after both.
    assert_eq!(served.home_assistant(Some(KEY), None)["ok"], true);
    // The key never reaches the log.
    let log = std::fs::read_to_string(&served.log).unwrap();
    assert!(!log.contains(KEY) && !log.contains(WRONG_KEY), "{log}");
}

#[test]
fn off_loopback_without_a_key_refuses_to_start_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        common::run(common::earshot(dir.path()).args(["esphome", "serve", "--bind", "0.0.0.0:0"]));
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("encryption_key"), "{err}");
    // A malformed key is one line too, without the key.
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[esphome]\nencryption_key = \"c2hvcnQ=\"\n").unwrap();
    let out = common::run(
        common::earshot(dir.path())
            .arg("--config")
            .arg(&config)
            .args(["esphome", "serve", "--bind", "127.0.0.1:0"]),
    );
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains("esphome.encryption_key") && !err.contains("c2hvcnQ="),
        "{err}"
    );
}

#[test]
fn bad_frames_close_only_their_connection() {
    let served = Served::start("");
    let addr = format!("127.0.0.1:{}", served.port);
    // A peer that connects and says nothing holds no one up.
    let _stalled = TcpStream::connect(&addr).unwrap();

    // A frame announcing 2^31 bytes: refused unread.
    let mut huge = TcpStream::connect(&addr).unwrap();
    let mut frame = vec![0u8];
    varint(&mut frame, 1 << 31);
    varint(&mut frame, 1);
    huge.write_all(&frame).unwrap();
    assert!(closed_by_server(&mut huge));
    served.log_line("2147483648");

    // A message type ESPHome does not have.
    let mut unknown = TcpStream::connect(&addr).unwrap();
    let mut frame = vec![0u8];
    varint(&mut frame, 0);
    varint(&mut frame, 9999);
    unknown.write_all(&frame).unwrap();
    assert!(closed_by_server(&mut unknown));
    served.log_line("message type 9999");

    // The encrypted preamble to a plaintext server.
    let mut noisy = TcpStream::connect(&addr).unwrap();
    noisy.write_all(&[1, 0, 0]).unwrap();
    assert!(closed_by_server(&mut noisy));

    // Home Assistant is served all the while.
    assert_eq!(served.home_assistant(None, None)["ok"], true);
}

/// A simulated ESPHome device (`tests/esphome/device.py`), killed on drop;
/// its JSON lines on a channel.
struct SimDevice {
    child: Child,
    port: u16,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl SimDevice {
    fn start(mode: &str, pcm: &Path, key: Option<&str>) -> SimDevice {
        SimDevice::start_as(mode, pcm, key, "kitchen", 0b11111)
    }

    /// A device of another name and feature flags.
    fn start_as(mode: &str, pcm: &Path, key: Option<&str>, name: &str, flags: u32) -> SimDevice {
        let mut child = Command::new(python())
            .arg(repo().join("tests/esphome/device.py"))
            .arg(mode)
            .arg(pcm)
            .arg(key.unwrap_or("-"))
            .arg(name)
            .arg(flags.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the simulated device");
        let lines = common::lines(child.stdout.take().unwrap());
        let first = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the simulated device printed no port");
        let v: serde_json::Value = serde_json::from_str(&first).unwrap();
        let port = v["port"].as_u64().unwrap() as u16;
        SimDevice {
            child,
            port,
            lines,
            seen: Vec::new(),
        }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Wait (generously) for a line containing `needle`.
    fn wait_for(&mut self, needle: &str, limit: Duration) -> bool {
        common::wait_for(&self.lines, needle, limit, &mut self.seen).is_some()
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// "What time is it?" in earshot's own Piper voice, 16 kHz mono s16le.
fn spoken_pcm(dir: &Path) -> PathBuf {
    let wav = dir.join("request.wav");
    let out = common::run(
        common::earshot(dir)
            .args(["say", "What time is it?", "--engine", "piper", "--out"])
            .arg(&wav),
    );
    assert!(out.status.success(), "say failed: {}", common::stderr(&out));
    let (samples, _) = earshot::audio::wav::read_16k_mono(&wav, None).expect("read request wav");
    let pcm: Vec<u8> = earshot::audio::to_i16(&samples)
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    let path = dir.join("request.raw");
    std::fs::write(&path, pcm).unwrap();
    path
}

#[test]
fn earshot_hosts_esphome_devices_one_stalling_one_corrupt_one_off() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pcm = spoken_pcm(d);
    let mut speaker = SimDevice::start("speak", &pcm, Some(KEY));
    let mut stalled = SimDevice::start("stall", &pcm, None);
    let mut corrupt = SimDevice::start("corrupt", &pcm, None);
    // voice assistant | API audio | announce: no speaker of its own over
    // the API, no timers.
    let mut office = SimDevice::start_as("idle", &pcm, None, "office", 0b10101);
    // Cut off mid-request (once), then back.
    let mut cut = SimDevice::start_as("cut", &pcm, None, "porch", 0b11111);
    let free_port = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let off = format!("127.0.0.1:{}", free_port());
    let api = format!("127.0.0.1:{}", free_port());
    let config = d.join("earshot.toml");
    std::fs::write(
        &config,
        format!(
            r#"[api]
enabled = true
bind = "{api}"

[esphome]
audio_bind = "127.0.0.1:0"
request_timeout_ms = 4000
reconnect_min_ms = 100
reconnect_max_ms = 800

[[esphome.devices]]
address = "{}"
encryption_key = "{KEY}"

[[esphome.devices]]
address = "{}"

[[esphome.devices]]
address = "{}"

[[esphome.devices]]
address = "{off}"

[[esphome.devices]]
address = "{}"

[[esphome.devices]]
address = "{}"
"#,
            speaker.address(),
            stalled.address(),
            corrupt.address(),
            office.address(),
            cut.address()
        ),
    )
    .unwrap();
    let log_path = d.join("earshot.log");
    let mut earshot = common::earshot(d)
        .arg("--config")
        .arg(&config)
        .args(["run", "--input", "none", "--output"])
        .arg(d.join("local.wav"))
        .env("EARSHOT_LOG", "info")
        // No LLM is reachable: the tree answers on device.
        .env("LLM_BASE_URL", "http://127.0.0.1:9")
        .env("EARSHOT_TEST_CLOCK", "15:27")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    // Wait for the request to finish, or for earshot to exit early.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut finished = false;
    while Instant::now() < deadline {
        if speaker.wait_for("\"done\"", Duration::from_millis(500)) {
            finished = true;
            break;
        }
        if earshot.try_wait().unwrap().is_some() {
            break;
        }
    }
    // A timer set through the CLI rings on the device.
    let timer_rang = finished && {
        let out =
            common::run(common::earshot(d).args(["timers", "add", "--in", "1s", "--label", "tea"]));
        assert!(out.status.success(), "{}", common::stderr(&out));
        speaker.wait_for("VOICE_ASSISTANT_TIMER_FINISHED", Duration::from_secs(60))
    };
    // Announcements: "tell the office …" reaches the office only; a
    // speaker that is not there is named back, nothing sent.
    let chat = |text: &str| -> serde_json::Value {
        let mut reply = ureq::post(&format!("http://{api}/api/chat"))
            .send_json(serde_json::json!({ "text": text }))
            .expect("POST /api/chat");
        reply.body_mut().read_json().expect("chat JSON")
    };
    let office_ready = office.wait_for("subscribed", Duration::from_secs(60));
    let told = chat("Please, tell the office that dinner is ready");
    let office_heard = office.wait_for("\"announce\"", Duration::from_secs(60));
    let unknown = chat("announce in the garage that dinner is ready");
    let kitchen_heard_it = speaker.wait_for("\"announce\"", Duration::from_secs(2))
        || speaker.seen.iter().any(|l| l.contains("\"announce\""));
    // The office has no timers: it got none of their events.
    let office_timers = office.wait_for("timer_event", Duration::from_secs(2))
        || office.seen.iter().any(|l| l.contains("timer_event"));
    let stall_seen = stalled.wait_for("stalling", Duration::from_secs(60));
    let _ = corrupt.wait_for("connected", Duration::from_secs(60));
    // The stalled device is dropped after request_timeout_ms and comes back.
    let deadline = Instant::now() + Duration::from_secs(60);
    let stall_lost = format!("esphome {}: lost: stalled", stalled.address());
    let corrupt_lost = format!(
        "esphome {}: lost: bad frame preamble 0x07",
        corrupt.address()
    );
    let off_lost = format!("esphome {off}: lost: cannot connect");
    let cut_seen = cut.wait_for("\"cut\"", Duration::from_secs(60));
    let cut_lost = format!(
        "esphome {}: lost: the peer closed the connection",
        cut.address()
    );
    let back = |text: &str, device: &SimDevice| {
        text.matches(&format!("esphome {}: connected", device.address()))
            .count()
            >= 2
    };
    while Instant::now() < deadline {
        let text = log();
        if [&stall_lost, &corrupt_lost, &off_lost, &cut_lost]
            .iter()
            .all(|n| text.contains(n.as_str()))
            && back(&text, &stalled)
            && back(&text, &cut)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = earshot.kill();
    let _ = earshot.wait();
    let text = log();
    assert!(
        finished,
        "the request never finished; device saw {:?}\nearshot log:\n{text}",
        speaker.seen
    );
    assert!(stall_seen, "{text}");
    assert!(
        timer_rang,
        "the timer did not ring on the device: {:?}\n{text}",
        speaker.seen
    );
    let started = speaker
        .seen
        .iter()
        .any(|l| l.contains("VOICE_ASSISTANT_TIMER_STARTED") && l.contains("\"tea\""));
    assert!(started, "no timer started event: {:?}", speaker.seen);

    let events: Vec<serde_json::Value> = speaker
        .seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        names,
        [
            "VOICE_ASSISTANT_RUN_START",
            "VOICE_ASSISTANT_STT_START",
            "VOICE_ASSISTANT_STT_VAD_START",
            "VOICE_ASSISTANT_STT_VAD_END",
            "VOICE_ASSISTANT_STT_END",
            "VOICE_ASSISTANT_INTENT_START",
            "VOICE_ASSISTANT_INTENT_END",
            "VOICE_ASSISTANT_TTS_START",
            "VOICE_ASSISTANT_TTS_END",
            "VOICE_ASSISTANT_TTS_STREAM_START",
            "VOICE_ASSISTANT_TTS_STREAM_END",
            "VOICE_ASSISTANT_RUN_END",
        ],
        "{:?}",
        speaker.seen
    );
    let data = |name: &str, key: &str| -> String {
        events
            .iter()
            .find(|e| e["event"] == name)
            .and_then(|e| e["data"][key].as_str())
            .unwrap_or("")
            .to_string()
    };
    let heard = common::words(&data("VOICE_ASSISTANT_STT_END", "text"));
    assert!(heard.contains("what time is it"), "heard {heard:?}");
    let answer = data("VOICE_ASSISTANT_TTS_START", "text");
    assert!(
        answer.contains("3:27") || answer.contains("15:27"),
        "answer {answer:?}"
    );
    let url = data("VOICE_ASSISTANT_TTS_END", "url");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with(".wav"),
        "{url}"
    );
    let fetch = |k: &str| events.iter().find_map(|e| e.get(k).cloned()).unwrap();
    let first = fetch("fetch1");
    assert_eq!(first["status"], 200, "{first}");
    assert_eq!(first["riff"], true);
    assert!(first["bytes"].as_u64().unwrap() > 10_000, "{first}");
    assert_eq!(fetch("fetch2")["status"], 404, "a URL serves once");
    // The device has a speaker: the answer came over the API too, as
    // audible 16 kHz speech (at least half a second of it).
    let streamed = fetch("streamed");
    assert!(streamed["bytes"].as_u64().unwrap() > 16_000, "{streamed}");
    assert!(streamed["rms"].as_f64().unwrap() > 0.01, "{streamed}");

    assert!(office_ready, "the office device never subscribed");
    assert_eq!(told["response"], "Okay, I told the office.", "{told}");
    assert!(
        office_heard,
        "no announcement reached the office: {:?}\n{text}",
        office.seen
    );
    let announce = office
        .seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("announce").cloned())
        .unwrap();
    assert_eq!(announce["text"], "Dinner is ready.", "{announce}");
    assert_eq!(announce["fetch"]["status"], 200, "{announce}");
    assert_eq!(announce["fetch"]["riff"], true, "{announce}");
    assert!(text.contains("announcement played"), "{text}");
    assert!(
        !kitchen_heard_it,
        "the kitchen got the office's announcement"
    );
    assert!(
        !office_timers,
        "a device without the timers flag got timer events: {:?}",
        office.seen
    );
    let unknown = unknown["response"].as_str().unwrap_or("");
    assert!(
        unknown.starts_with("I don't know a speaker called garage")
            && unknown.contains("kitchen")
            && unknown.contains("office"),
        "{unknown}"
    );
    assert!(!url.contains(KEY));

    for needle in [&stall_lost, &corrupt_lost, &off_lost, &cut_lost] {
        assert!(text.contains(needle.as_str()), "no {needle:?} in:\n{text}");
    }
    // Cut off mid-request: one line, then connected again.
    assert!(cut_seen, "the cut device never started: {:?}", cut.seen);
    assert_eq!(text.matches(cut_lost.as_str()).count(), 1, "{text}");
    if let Some(line) = text.lines().find(|l| l.contains(cut_lost.as_str())) {
        eprintln!("{line}");
    }
    assert!(
        back(&text, &cut),
        "the cut-off device was not reconnected:\n{text}"
    );
    assert!(
        text.matches(&format!("esphome {}: connected", stalled.address()))
            .count()
            >= 2,
        "the stalled device was not reconnected:\n{text}"
    );
    assert!(!text.contains(KEY), "the key reached the log");
    assert!(!text.contains("panicked"), "{text}");
    // The latency line (BENCHMARKS.md quotes it).
    if let Some(line) = text.lines().find(|l| l.contains("audio URL sent")) {
        eprintln!("{line}");
    }
}

#[test]
fn config_show_masks_the_device_keys_and_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("earshot.toml");
    std::fs::write(
        &config,
        format!(
            "[esphome]\nencryption_key = \"{KEY}\"\n[[esphome.devices]]\naddress = \"a:6053\"\nencryption_key = \"{WRONG_KEY}\"\npassword = \"hunter2secret\"\n"
        ),
    )
    .unwrap();
    let out = common::run(
        common::earshot(dir.path())
            .arg("--config")
            .arg(&config)
            .args(["config", "show"]),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let shown = common::stdout(&out);
    assert!(shown.contains("esphome.devices"), "{shown}");
    for secret in [KEY, WRONG_KEY, "hunter2secret"] {
        assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
    }
}

/// mDNS discovery and announcement, inside a network namespace.
#[path = "esphome/mdns.rs"]
mod mdns;

/// `[esphome] serve = true` in `earshot run`: Home Assistant's pipeline
/// through earshot's microphone and speaker.
#[path = "esphome/satellite.rs"]
mod satellite;
