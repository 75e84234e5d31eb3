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
