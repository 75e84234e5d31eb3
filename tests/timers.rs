//! Timers through the real binary (issue 15): the `earshot timers` CLI
//! contract and its one-line errors, local time in `TZ=Europe/Berlin`
//! across both DST transitions, `GET /api/timers`, and kill -9 at any
//! moment of a running scheduler (`earshot timers watch`): nothing rings
//! twice, nothing due is dropped silently, what was ringing at the kill
//! or came due while stopped is announced once as `missed`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `earshot timers ARGS…` in `dir` (its own state), optionally in a zone.
fn timers(dir: &Path, args: &[&str], tz: Option<&str>) -> Command {
    let mut cmd = common::earshot(dir);
    cmd.arg("timers").args(args);
    if let Some(tz) = tz {
        cmd.env("TZ", tz);
    }
    cmd
}

/// Run and return (exit code, stdout, stderr).
fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = common::run(cmd);
    (
        out.status.code().unwrap_or(-1),
        common::stdout(&out),
        common::stderr(&out),
    )
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
}

fn list(dir: &Path) -> Vec<Value> {
    let (code, out, err) = run(&mut timers(dir, &["list", "--json"], None));
    assert_eq!(code, 0, "{err}");
    json_of(&out).as_array().unwrap().clone()
}

fn add(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["add"];
    all.extend_from_slice(args);
    all.push("--json");
    let (code, out, err) = run(&mut timers(dir, &all, None));
    assert_eq!(code, 0, "{args:?}: {err}");
    json_of(&out)
}

#[test]
fn cli_contract_and_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rice = add(d, &["--in", "18m", "--label", "rice"]);
    let keys: Vec<&str> = rice
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["id", "kind", "label", "due", "remaining_s", "repeat"]
    );
    assert_eq!(rice["kind"], "timer");
    assert_eq!(rice["label"], "rice");
    assert_eq!(rice["repeat"], Value::Null);
    let left = rice["remaining_s"].as_i64().unwrap();
    assert!((1075..=1080).contains(&left), "{rice}");
    // "due" is RFC 3339 with the local offset, about 18 minutes ahead.
    let due = chrono::DateTime::parse_from_rfc3339(rice["due"].as_str().unwrap()).unwrap();
    let ahead = due.with_timezone(&chrono::Utc) - chrono::Utc::now();
    assert!((1070..=1080).contains(&ahead.num_seconds()), "{rice}");

    let alarm = add(d, &["--at", "07:00", "--repeat", "weekdays"]);
    assert_eq!(
        (alarm["kind"].as_str(), alarm["repeat"].as_str()),
        (Some("alarm"), Some("weekdays"))
    );
    assert!(
        alarm["due"].as_str().unwrap().contains("T07:00:00"),
        "{alarm}"
    );
    let reminder = add(
        d,
        &[
            "--in",
            "1h30m",
            "--kind",
            "reminder",
            "--label",
            "check the oven",
        ],
    );
    assert_eq!(reminder["kind"], "reminder");
    // Human output says what was set.
    let (code, out, _) = run(&mut timers(d, &["add", "--in", "90s"], None));
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Set ") && out.contains("1 minute 30 seconds"),
        "{out}"
    );

    let all = list(d);
    assert_eq!(all.len(), 4);
    assert!(all
        .windows(2)
        .all(|w| w[0]["remaining_s"].as_i64() <= w[1]["remaining_s"].as_i64()));

    for (args, says) in [
        (&["add", "--in", "5x"][..], "not a length"),
        (&["add", "--in", "90"], "not a length"),
        (&["add", "--in", "1000h"], "one second to 24 hours"),
        (&["add", "--in", "0s"], "one second to 24 hours"),
        (&["add", "--at", "25:00"], "not a time"),
        (&["add", "--at", "2027-02-31 10:00"], "not a time"),
        (&["add", "--at", "2020-01-01 10:00"], "already passed"),
        (&["add", "--in", "5m", "--kind", "bogus"], "unknown kind"),
        (
            &["add", "--in", "5m", "--repeat", "daily"],
            "--repeat needs --at",
        ),
        (&["add", "--label", "x"], "--in"),
        (&["add", "--in", "5m", "--at", "07:00"], "one of"),
        (&["cancel", "999"], "no timer, alarm or reminder number 999"),
    ] {
        let (code, out, err) = run(&mut timers(d, args, None));
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let long = "x".repeat(5000);
    let (code, _, err) = run(&mut timers(
        d,
        &["add", "--in", "5m", "--label", &long],
        None,
    ));
    assert_eq!(code, 2);
    assert!(err.contains("too long") && err.len() < 200, "{err}");
    assert_eq!(list(d).len(), 4, "nothing stored by bad input");

    let id = rice["id"].to_string();
    let (code, out, err) = run(&mut timers(d, &["cancel", &id], None));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Cancelled"), "{out}");
    assert!(list(d).iter().all(|t| t["id"] != rice["id"]));
}

#[test]
fn local_time_follows_tz_across_both_dst_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let berlin = Some("Europe/Berlin");
    let at = |when: &str| {
        let (code, out, err) = run(&mut timers(
            dir.path(),
            &["add", "--at", when, "--kind", "reminder", "--json"],
            berlin,
        ));
        assert_eq!(code, 0, "{when}: {err}");
        json_of(&out)["due"].as_str().unwrap().to_string()
    };
    // The next such dates after today (within the year a reminder may be
    // ahead), so the test means the same on any day: Europe's clocks go
    // forward on March's last Sunday and back on October's.
    use chrono::Datelike;
    let today = chrono::Utc::now().date_naive();
    let next = |pick: &dyn Fn(i32) -> chrono::NaiveDate| {
        let d = pick(today.year());
        if d > today { d } else { pick(today.year() + 1) }
            .format("%Y-%m-%d")
            .to_string()
    };
    let last_sunday = |month: u32| {
        move |y: i32| {
            let mut d = chrono::NaiveDate::from_ymd_opt(y, month, 31).unwrap();
            while d.weekday() != chrono::Weekday::Sun {
                d = d.pred_opt().unwrap();
            }
            d
        }
    };
    let day = |month: u32| move |y: i32| chrono::NaiveDate::from_ymd_opt(y, month, 15).unwrap();
    let (winter, summer) = (next(&day(1)), next(&day(7)));
    let (spring, fall) = (next(&last_sunday(3)), next(&last_sunday(10)));
    // Winter and summer offsets.
    assert_eq!(
        at(&format!("{winter} 07:00")),
        format!("{winter}T07:00:00+01:00")
    );
    assert_eq!(
        at(&format!("{summer} 07:00")),
        format!("{summer}T07:00:00+02:00")
    );
    // Spring forward: 02:30 does not exist; read with the offset before
    // the gap, it rings at 03:30 on the new clock.
    assert_eq!(
        at(&format!("{spring} 02:30")),
        format!("{spring}T03:30:00+02:00")
    );
    assert_eq!(
        at(&format!("{spring} 01:59")),
        format!("{spring}T01:59:00+01:00")
    );
    // Fall back: 02:30 happens twice; the first one rings.
    assert_eq!(
        at(&format!("{fall} 02:30")),
        format!("{fall}T02:30:00+02:00")
    );
    assert_eq!(
        at(&format!("{fall} 03:30")),
        format!("{fall}T03:30:00+01:00")
    );
    // A clock time is a local wall time: if the device's zone changes,
    // a 02:30 reminder still rings at 02:30 on the new clock.
    let (_, out, _) = run(&mut timers(dir.path(), &["list", "--json"], Some("UTC")));
    let dues: Vec<String> = json_of(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["due"].as_str().unwrap().to_string())
        .collect();
    assert!(dues.contains(&format!("{fall}T02:30:00+00:00")), "{dues:?}");
}

/// A running `earshot timers watch --json` whose stdout lines are
/// collected as they come.
struct Watch {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Watch {
    /// Start it; with `ready`, return once it says it is watching (its
    /// start-up, missed rows included, is done).
    fn start(dir: &Path, ready: bool) -> Watch {
        let mut child = timers(dir, &["watch", "--json"], None)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn earshot timers watch");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        if ready {
            let line = rx
                .recv_timeout(Duration::from_secs(15))
                .expect("watch started");
            assert!(line.contains("watching timers"), "{line}");
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(json_of(&line));
            }
        });
        Watch { child, lines }
    }

    /// Wait (bounded) until `pred` holds for the lines seen so far.
    fn wait_for(&self, what: &str, pred: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !pred(&self.lines.lock().unwrap()) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                self.lines.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill9(mut self) -> Vec<Value> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.settle_lines()
    }

    fn term(mut self) -> Vec<Value> {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status:?}");
        self.settle_lines()
    }

    /// The reader thread ends at EOF; give it a moment to push the last line.
    fn settle_lines(&self) -> Vec<Value> {
        let mut last = usize::MAX;
        loop {
            std::thread::sleep(Duration::from_millis(30));
            let now = self.lines.lock().unwrap().len();
            if now == last {
                return self.lines.lock().unwrap().clone();
            }
            last = now;
        }
    }
}

fn events_of(lines: &[Value], id: &Value) -> Vec<String> {
    lines
        .iter()
        .filter(|e| &e["id"] == id)
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

fn has(lines: &[Value], event: &str, id: &Value) -> bool {
    lines.iter().any(|e| e["event"] == event && &e["id"] == id)
}

/// Wait until every row is finished (nothing pending or ringing).
fn wait_until_all_finished(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !list(dir).is_empty() {
        assert!(Instant::now() < deadline, "still set: {:?}", list(dir));
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn quick_ring_config(dir: &Path) {
    std::fs::write(dir.join("earshot.toml"), "[timers]\nring_secs = 1\n").unwrap();
}

#[test]
fn ringing_at_a_kill_or_due_while_stopped_is_missed_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    quick_ring_config(d);
    let first = Watch::start(d, true);
    let a = add(d, &["--in", "1s", "--label", "tea"])["id"].clone();
    first.wait_for("A ringing", |l| has(l, "ringing", &a));
    // Keep it ringing: the next rows ring a second later.
    let run1 = first.kill9();
    assert_eq!(
        events_of(&run1, &a).last().map(String::as_str),
        Some("ringing")
    );
    let event = run1.iter().find(|e| e["event"] == "ringing").unwrap();
    let keys: Vec<&str> = event
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["type", "event", "id", "kind", "label", "due"]);
    assert_eq!(
        (event["type"].as_str(), event["label"].as_str()),
        (Some("timer"), Some("tea"))
    );

    // Due while nothing runs.
    let b = add(d, &["--in", "1s", "--label", "eggs"])["id"].clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while list(d)
        .iter()
        .any(|t| t["id"] == b && t["remaining_s"] != 0)
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = Watch::start(d, true);
    second.wait_for("A and B missed", |l| {
        has(l, "missed", &a) && has(l, "missed", &b)
    });
    let run2 = second.term();
    assert_eq!(events_of(&run2, &a), ["missed"], "{run2:?}");
    assert_eq!(events_of(&run2, &b), ["missed"], "{run2:?}");

    // A third start announces nothing again: C rings and stops, alone.
    let third = Watch::start(d, true);
    let c = add(d, &["--in", "1s"])["id"].clone();
    third.wait_for("C stopped", |l| has(l, "stopped", &c));
    let run3 = third.term();
    assert!(run3.iter().all(|e| e["id"] == c), "{run3:?}");
    assert_eq!(events_of(&run3, &c), ["set", "ringing", "stopped"]);
}

#[test]
fn kill_9_at_any_moment_never_rings_twice_and_never_drops_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    quick_ring_config(d);
    let mut ids = Vec::new();
    for (i, len) in ["1s", "1s", "2s", "2s", "3s", "4s"].iter().enumerate() {
        ids.push(add(d, &["--in", len, "--label", &format!("t{i}")])["id"].clone());
    }
    // Kill the scheduler at pseudo-random moments for a while.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut runs = Vec::new();
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let watch = Watch::start(d, false);
        std::thread::sleep(Duration::from_millis(30 + seed % 1400));
        runs.push(watch.kill9());
    }
    let last = Watch::start(d, true);
    wait_until_all_finished(d);
    runs.push(last.term());

    let all: Vec<Value> = runs.concat();
    eprintln!("{} runs", runs.len());
    for id in &ids {
        let seen = events_of(&all, id);
        eprintln!("{id}: {seen:?}");
        let count = |e: &str| seen.iter().filter(|s| *s == e).count();
        assert!(
            count("ringing") <= 1,
            "{id} rang twice: {seen:?} (runs {runs:?})"
        );
        assert!(count("missed") <= 1, "{id} missed twice: {seen:?}");
        assert!(count("stopped") <= 1, "{id} stopped twice: {seen:?}");
        assert!(
            count("ringing") + count("missed") >= 1,
            "{id} was dropped silently: {seen:?} (runs {runs:?})"
        );
        if count("missed") == 1 && count("ringing") == 1 {
            assert_eq!(
                seen,
                ["ringing", "missed"],
                "{id}: missed only after a kill mid-ring"
            );
        }
        if count("stopped") == 1 {
            assert_eq!(seen, ["ringing", "stopped"], "{id}");
        }
    }
}

#[test]
fn api_timers_is_the_same_array() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    add(d, &["--in", "5m", "--label", "pasta"]);
    add(d, &["--at", "07:00"]);
    // No models: the API starts in a moment and timers need none.
    let no_models = tempfile::tempdir().unwrap();
    let mut child = common::earshot(d)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("EARSHOT_MODE", "graph")
        .env("EARSHOT_MODELS_DIR", no_models.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Bounded: a server that never listens or never stops is killed after
    // a minute, so the test fails (EOF, or a refused request) instead of
    // hanging the suite.
    let pid = child.id() as i32;
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        let fired = watchdog.recv_timeout(Duration::from_secs(60)).is_err();
        if fired {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        fired
    });
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("earshot: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut resp = agent.get(format!("{base}/api/timers")).call().unwrap();
    let status = resp.status().as_u16();
    let body = resp.body_mut().read_to_string().unwrap();
    let mut wrong = agent
        .post(format!("{base}/api/timers"))
        .header("Content-Type", "application/json")
        .send("{}")
        .unwrap();
    let wrong_status = wrong.status().as_u16();
    let _ = wrong.body_mut().read_to_string();
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let _ = child.wait();
    let _ = done.send(());
    assert!(
        !guard.join().unwrap(),
        "earshot serve was still running after 60 s (killed)"
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(wrong_status, 405);
    let api = json_of(&body);
    let cli = list(d);
    assert_eq!(api.as_array().unwrap().len(), 2, "{api}");
    for (a, c) in api.as_array().unwrap().iter().zip(&cli) {
        for key in ["id", "kind", "label", "due", "repeat"] {
            assert_eq!(a[key], c[key], "{key}");
        }
        let keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["id", "kind", "label", "due", "remaining_s", "repeat"]
        );
    }
}
