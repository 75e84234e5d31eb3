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
