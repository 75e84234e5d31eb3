//! mDNS (issue 22), only ever inside a network namespace the test makes:
//! `unshare -rn` (a user + network namespace, so root is not needed where
//! user namespaces are allowed) holding a veth pair, 10.77.0.1 (`v0`) and
//! 10.77.0.2 (`v1`), and `lo`; every peer is started in it with `nsenter`.
//! No test sends multicast on a real interface. Where namespaces cannot
//! be made the tests fail saying so, never pass without having run.
//!
//! The other side is python-zeroconf (`tests/esphome/mdns_peer.py`), the
//! library Home Assistant browses with.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::{common, python, repo, KEY};

/// earshot's side of the veth pair.
const EARSHOT_IP: &str = "10.77.0.1";
/// The peers' side.
const PEER_IP: &str = "10.77.0.2";

/// A user + network namespace with a veth pair, alive while this is.
struct Netns {
    holder: Child,
    _stdin: ChildStdin,
}

impl Netns {
    fn new() -> Netns {
        let script = format!(
            "set -e
             ip link set lo up
             ip link add v0 type veth peer name v1
             ip addr add {EARSHOT_IP}/24 dev v0
             ip addr add {PEER_IP}/24 dev v1
             ip link set v0 up
             ip link set v1 up
             echo ready
             exec cat >/dev/null"
        );
        let mut holder = Command::new("unshare")
            .args(["-rn", "sh", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run unshare ({e}): the mDNS tests need a network namespace")
            });
        let stdin = holder.stdin.take().unwrap();
        let mut line = String::new();
        let _ = BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line);
        if line.trim() != "ready" {
            let _ = holder.kill();
            let out = holder.wait_with_output().unwrap();
            panic!(
                "cannot make a network namespace with a veth pair (`unshare -rn` + `ip link add … type veth`): {}\n\
                 The mDNS tests run only inside one (they must never multicast on a real interface); \
                 allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, \
                 kernel.apparmor_restrict_unprivileged_userns=0) or run them as root.",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Netns {
            holder,
            _stdin: stdin,
        }
    }

    /// `cmd`, run inside the namespace (same program, arguments,
    /// environment and directory).
    fn inside(&self, cmd: &Command) -> Command {
        let mut wrapped = Command::new("nsenter");
        wrapped
            .arg("-t")
            .arg(self.holder.id().to_string())
            .args(["-U", "-n", "--preserve-credentials", "--"])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (key, value) in cmd.get_envs() {
            match value {
                Some(v) => wrapped.env(key, v),
                None => wrapped.env_remove(key),
            };
        }
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A process in the namespace, killed on drop, its lines on a channel.
struct Peer {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Peer {
    /// Start `cmd` in `ns`; stdout or (`stderr`) stderr becomes the lines.
    fn start(ns: &Netns, cmd: &Command, stderr: bool) -> Peer {
        let mut cmd = ns.inside(cmd);
        cmd.stdin(Stdio::null());
        if stderr {
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        } else {
            cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?} in the namespace: {e}", cmd));
        let lines = if stderr {
            common::lines(child.stderr.take().unwrap())
        } else {
            common::lines(child.stdout.take().unwrap())
        };
        Peer {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line containing `needle` (already seen, or within
    /// `limit`), or a failure showing every line seen.
    fn expect(&mut self, needle: &str, limit: Duration, what: &str) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        match common::wait_for(&self.lines, needle, limit, &mut self.seen) {
            Some(line) => line,
            None => panic!(
                "{what}: no line with {needle:?} within {} s; saw:\n{}",
                limit.as_secs(),
                self.seen.join("\n")
            ),
        }
    }

    /// Every line that arrives within `limit`.
    fn drain(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn peer_script(args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/esphome/mdns_peer.py"))
        .args(args);
    cmd
}

/// `earshot esphome serve --bind BIND` with `section` as `[esphome]`.
fn serve(ns: &Netns, dir: &Path, bind: &str, section: &str) -> Peer {
    let config = dir.join("earshot.toml");
    std::fs::write(&config, format!("[esphome]\n{section}\n")).unwrap();
    let mut cmd = common::earshot(dir);
    cmd.env("EARSHOT_LOG", "info")
        .arg("--config")
        .arg(&config)
        .args(["esphome", "serve", "--bind", bind]);
    let mut served = Peer::start(ns, &cmd, false);
    served.expect(
        "earshot: listening on esphome://",
        Duration::from_secs(30),
        &format!("earshot esphome serve --bind {bind}"),
    );
    served
}

fn found(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn announced_only_on_the_bound_interface_and_never_on_loopback() {
    let ns = Netns::new();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let _veth = serve(
        &ns,
        dirs[0].path(),
        &format!("{EARSHOT_IP}:6053"),
        &format!("name = \"kitchen\"\nencryption_key = \"{KEY}\""),
    );
    let _quiet = serve(&ns, dirs[1].path(), "127.0.0.1:6054", "name = \"quiet\"");
    let _all = serve(
        &ns,
        dirs[2].path(),
        "0.0.0.0:6055",
        &format!("name = \"everywhere\"\nencryption_key = \"{KEY}\""),
    );
    let mut browser = Peer::start(&ns, &peer_script(&["browse"]), false);
    let limit = Duration::from_secs(15);
    browser.expect("\"browsing\"", limit, "the zeroconf browser");
    // The browser hears loopback (the control), so silence from the
    // loopback-bound server means it sent nothing.
    browser.expect("\"found\": \"loopback-control\"", limit, "the control");

    let kitchen = found(&browser.expect("\"found\": \"kitchen\"", limit, "bound to v0"));
    assert_eq!(kitchen["port"], 6053, "{kitchen}");
    assert_eq!(kitchen["addresses"], serde_json::json!([EARSHOT_IP]));
    let txt = &kitchen["txt"];
    assert_eq!(txt["platform"], "earshot", "{kitchen}");
    assert_eq!(txt["friendly_name"], "kitchen", "{kitchen}");
    assert_eq!(
        txt["api_encryption"], "Noise_NNpsk0_25519_ChaChaPoly_SHA256",
        "{kitchen}"
    );
    assert_eq!(txt["mac"].as_str().unwrap_or("").len(), 12, "{kitchen}");

    // 0.0.0.0: the non-loopback interfaces (v0 and v1 are both ours; a
    // report may carry either or both), never 127.0.0.1.
    browser.expect("\"found\": \"everywhere\"", limit, "bound to 0.0.0.0");
    // A few more seconds for the loopback-bound one to show up if it were
    // announcing (it answers queries at once when it does), and for every
    // report of the others.
    browser.drain(Duration::from_secs(3));
    for line in browser.seen.iter().filter(|l| l.contains("\"everywhere\"")) {
        let all = found(line);
        assert_eq!(all["port"], 6055, "{all}");
        let addresses = all["addresses"].as_array().unwrap();
        assert!(
            !addresses.is_empty()
                && addresses
                    .iter()
                    .all(|a| a.as_str().is_some_and(|a| a.starts_with("10.77.0."))),
            "{all}"
        );
    }
    let heard_quiet: Vec<_> = browser
        .seen
        .iter()
        .filter(|l| l.contains("\"quiet\""))
        .collect();
    assert!(
        heard_quiet.is_empty(),
        "bound to loopback, yet announced: {heard_quiet:?}"
    );
}

#[test]
fn earshot_run_discovers_a_device_and_connects_with_its_key_by_name() {
    let ns = Netns::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("earshot.toml");
    std::fs::write(
        &config,
        format!(
            r#"[esphome]
discover = true
audio_bind = "{EARSHOT_IP}:0"
reconnect_min_ms = 100
reconnect_max_ms = 800

[[esphome.devices]]
name = "Kitchen"
encryption_key = "{KEY}"
"#
        ),
    )
    .unwrap();
    let mut cmd = common::earshot(d);
    cmd.arg("--config")
        .arg(&config)
        .args(["run", "--input", "none", "--output"])
        .arg(d.join("local.wav"))
        .env("EARSHOT_LOG", "info")
        .env("LLM_BASE_URL", "http://127.0.0.1:9");
    let started = Instant::now();
    let mut earshot = Peer::start(&ns, &cmd, true);
    earshot.expect(
        "looking for devices over mDNS",
        Duration::from_secs(60),
        "earshot run",
    );
    let browsing = started.elapsed();

    // The device comes up after earshot (powered on later): its
    // announcement alone must be enough. "porch" is encrypted with no key
    // configured: named in the log, not hosted.
    let started = Instant::now();
    let mut device = Peer::start(
        &ns,
        &peer_script(&["device", PEER_IP, "kitchen", KEY, "porch"]),
        false,
    );
    let limit = Duration::from_secs(20);
    let registered = found(&device.expect("\"registered\"", limit, "the simulated device"));
    let port = registered["port"].as_u64().unwrap();
    let address = format!("{PEER_IP}:{port}");

    earshot.expect(
        &format!("discovered \"kitchen\" at {address} (encrypted); hosting it"),
        limit,
        "earshot run",
    );
    earshot.expect(
        &format!("esphome {address}: connected to \"kitchen\""),
        limit,
        "earshot run",
    );
    let subscribed = found(&device.expect("\"subscribed\"", limit, "the simulated device"));
    assert_eq!(subscribed["subscribed"], true, "{subscribed}");
    assert_eq!(
        subscribed["flags"], 5,
        "API audio, both encodings: {subscribed}"
    );
    let connected = started.elapsed();
    let porch = earshot.expect("\"porch\"", limit, "earshot run");
    assert!(
        porch.contains("no key is configured") && porch.contains("name = \"porch\""),
        "{porch}"
    );

    // Re-announcements and the second service add nothing more.
    earshot.drain(Duration::from_millis(500));
    let log = earshot.seen.join("\n");
    assert_eq!(log.matches("discovered \"kitchen\"").count(), 1, "{log}");
    assert!(
        !log.lines()
            .any(|l| l.contains("\"porch\"") && l.contains("hosting it")),
        "{log}"
    );
    // One connection: kitchen's (porch shares its port, never dialled).
    device.drain(Duration::from_millis(100));
    let connections = device
        .seen
        .iter()
        .filter(|l| l.contains("\"connected\""))
        .count();
    assert_eq!(connections, 1, "{:?}", device.seen);
    assert!(!log.contains(KEY), "the key reached the log");
    assert!(!log.contains("panicked"), "{log}");
    eprintln!(
        "earshot run browsing after {} ms; device announced → connected in {} ms",
        browsing.as_millis(),
        connected.as_millis()
    );
}
