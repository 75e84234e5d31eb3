//! The intent tree through the real binary (R-TREE): `earshot tree
//! check/run`, the default tree answering device intents with the real
//! MiniLM classifier and NO language model configured, the confirm-delete
//! phase across two turns, fail-opens to the router graph, shadow mode.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use common::{earshot, run, stderr, stdout};

/// A kNN cache warmed once and shared (symlinked) by every state dir, so
/// each test does not re-embed the intent examples.
fn shared_cache() -> &'static Path {
    static CACHE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = CACHE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let o = run(earshot(dir.path()).args([
            "tree",
            "run",
            &default_tree(),
            "what time is it",
            "--dry-run",
            "--json",
        ]));
        assert!(o.status.success(), "warm-up failed: {}", stderr(&o));
        let cache = dir.path().join("cache");
        assert!(cache.is_dir(), "the kNN cache was not written");
        (dir, cache)
    });
    path
}

fn state_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(shared_cache(), dir.path().join("cache")).unwrap();
    dir
}

fn default_tree() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/tree/default_tree.json")
        .display()
        .to_string()
}

fn frames(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l} ({e})")))
        .collect()
}

fn frame<'a>(frames: &'a [Value], kind: &str) -> &'a Value {
    frames
        .iter()
        .find(|f| f["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} frame in {frames:#?}"))
}

fn chat(dir: &Path, text: &str, conversation: Option<i64>) -> Output {
    let mut cmd = earshot(dir);
    cmd.args(["chat", text, "--json"]);
    if let Some(id) = conversation {
        cmd.args(["--conversation", &id.to_string()]);
    }
    run(&mut cmd)
}

/// A device turn: succeeds with no LLM, answered by the tree.
fn device_turn(dir: &Path, text: &str, conversation: Option<i64>) -> Value {
    let o = chat(dir, text, conversation);
    assert!(
        o.status.success(),
        "{text}: exit {:?}, stderr {}, stdout {}",
        o.status,
        stderr(&o),
        stdout(&o)
    );
    let f = frames(&o);
    let done = frame(&f, "done").clone();
    assert_eq!(done["model"], "device", "{text}: {done}");
    assert_eq!(done["route"], "tree", "{text}: {done}");
    // One content frame carries the sentence for streaming clients.
    let content: String = f
        .iter()
        .filter(|x| x["type"] == "content")
        .filter_map(|x| x["data"].as_str())
        .collect();
    assert_eq!(content, done["response"].as_str().unwrap(), "{text}");
    done
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("earshot.db")).unwrap()
}

fn last_turn(
    dir: &Path,
) -> (
    Option<String>,
    Option<String>,
    Option<f64>,
    Option<String>,
    String,
) {
    db(dir)
        .query_row(
            "SELECT mode, intent, intent_confidence, notes, outcome FROM turn_log ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap()
}

#[test]
fn time_date_and_arithmetic_with_no_llm() {
    let dir = state_dir();
    let d = dir.path();
    let before = chrono::Local::now();
    let done = device_turn(d, "what's the time", None);
    let after = chrono::Local::now();
    assert_eq!(done["intent"], "time_now");
    // The device clock, said as "It's 6:05 PM." (either side of a minute change).
    let said = done["response"].as_str().unwrap();
    use earshot::tree::actions::clock::say_time;
    assert!(
        said == say_time(&before) || said == say_time(&after),
        "{said}"
    );
    let now = after;
    let done = device_turn(d, "what's the date today", None);
    assert_eq!(done["intent"], "date_today");
    assert!(
        done["response"]
            .as_str()
            .unwrap()
            .contains(&now.format("%Y").to_string()),
        "{done}"
    );
    for (text, answer) in [
        ("what's twelve times seven", "That's 84."),
        ("15 percent of 80", "That's 12."),
        ("square root of 144", "That's 12."),
        ("what is 2 to the power of 10", "That's 1024."),
    ] {
        let done = device_turn(d, text, None);
        assert_eq!(done["intent"], "calculate", "{text}: {done}");
        assert_eq!(done["response"], answer, "{text}");
    }
    let (mode, intent, conf, _, outcome) = last_turn(d);
    assert_eq!(
        (mode.as_deref(), intent.as_deref(), outcome.as_str()),
        (Some("tree"), Some("calculate"), "ok")
    );
    assert!(conf.unwrap() >= 0.75);
}

#[test]
fn todos_add_list_complete_and_confirmed_delete_across_turns() {
    let dir = state_dir();
    let d = dir.path();
    let done = device_turn(d, "remind me to buy milk", None);
    assert_eq!(done["intent"], "todo_add");
    assert_eq!(done["response"], "Added \"buy milk\" to your to-do list.");
    assert!(done["actions"]
        .as_array()
        .unwrap()
        .contains(&Value::from("todo_add")));
    device_turn(d, "add walk the dog to my to do list", None);
    let done = device_turn(d, "what's on my to do list", None);
    assert_eq!(done["intent"], "todo_list");
    assert!(
        done["response"]
            .as_str()
            .unwrap()
            .contains("buy milk; walk the dog"),
        "{done}"
    );
    let done = device_turn(d, "mark walk the dog as done", None);
    assert_eq!(done["intent"], "todo_complete", "{done}");

    // Delete asks first; nothing is deleted until the next turn says yes.
    let o = chat(d, "delete the milk item", None);
    assert!(o.status.success(), "{}", stderr(&o));
    let f = frames(&o);
    let done = frame(&f, "done");
    assert!(
        done["response"]
            .as_str()
            .unwrap()
            .contains("Delete \"buy milk\""),
        "{done}"
    );
    assert_eq!(
        frame(&f, "recommendation")["items"],
        serde_json::json!(["yes", "no"])
    );
    let conversation = done["conversation_id"].as_i64().unwrap();
    let open: i64 = db(d)
        .query_row(
            "SELECT COUNT(*) FROM todos WHERE title = 'buy milk'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open, 1);

    let done = device_turn(d, "yes", Some(conversation));
    assert_eq!(done["response"], "Deleted \"buy milk\".", "{done}");
    assert_eq!(done["conversation_id"].as_i64(), Some(conversation));
    let left: i64 = db(d)
        .query_row(
            "SELECT COUNT(*) FROM todos WHERE title = 'buy milk'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
    let (phase, state): (String, String) = db(d)
        .query_row(
            "SELECT phase, state_json FROM tree_state WHERE conversation_id = ?1",
            [conversation],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((phase.as_str(), state.as_str()), ("idle", "{}"));

    // "no" keeps the item; the phase is persisted in tree_state in between.
    device_turn(d, "remind me to call mom", Some(conversation));
    let done = device_turn(d, "remove call mom from my list", Some(conversation));
    assert!(
        done["response"].as_str().unwrap().contains("call mom"),
        "{done}"
    );
    let phase: String = db(d)
        .query_row(
            "SELECT phase FROM tree_state WHERE conversation_id = ?1",
            [conversation],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(phase, "confirm_delete");
    let done = device_turn(d, "no keep it", Some(conversation));
    assert_eq!(done["response"], "Okay, I'll keep \"call mom\".");
    let kept: i64 = db(d)
        .query_row(
            "SELECT COUNT(*) FROM todos WHERE title = 'call mom'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 1);
}

#[test]
fn stop_repeat_pause_resume_and_volume() {
    let dir = state_dir();
    let d = dir.path();
    assert_eq!(device_turn(d, "stop", None)["response"], "Okay.");
    let first = device_turn(d, "what's twelve times seven", None);
    let again = device_turn(d, "say that again", None);
    assert_eq!(again["intent"], "repeat");
    assert_eq!(again["response"], first["response"]);
    let done = device_turn(d, "turn the volume up", None);
    assert_eq!(done["intent"], "volume_up");
    let vol: String = db(d)
        .query_row(
            "SELECT value FROM device_state WHERE key = 'volume'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(vol, "60");
    device_turn(d, "quieter", None);
    let vol: String = db(d)
        .query_row(
            "SELECT value FROM device_state WHERE key = 'volume'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(vol, "50");

    let done = device_turn(d, "do not disturb", None);
    assert_eq!(done["intent"], "pause");
    let paused = device_turn(d, "what time is it", None);
    assert_eq!(
        paused["response"],
        "I'm paused. Say resume when you want me back."
    );
    let done = device_turn(d, "resume", None);
    assert_eq!(done["intent"], "resume");
    assert!(device_turn(d, "what time is it", None)["response"]
        .as_str()
        .unwrap()
        .starts_with("It's "));
}

#[test]
fn memory_intents_remember_list_and_forget() {
    let dir = state_dir();
    let d = dir.path();
    let done = device_turn(d, "remember that my sister is called ana", None);
    assert_eq!(done["intent"], "memory_remember", "{done}");
    assert_eq!(
        done["response"],
        "Okay, I'll remember that my sister is called ana."
    );
    device_turn(d, "remember that i'm allergic to peanuts", None);
    let done = device_turn(d, "what do you remember about me", None);
    assert_eq!(done["intent"], "memory_list");
    let said = done["response"].as_str().unwrap();
    assert!(
        said.contains("my sister is called ana") && said.contains("allergic to peanuts"),
        "{said}"
    );
    let done = device_turn(d, "forget that my sister is called ana", None);
    assert_eq!(done["intent"], "memory_forget", "{done}");
    assert_eq!(
        done["response"],
        "Okay, I forgot that my sister is called ana."
    );
    let said = device_turn(d, "what do you know about me", None)["response"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !said.contains("sister") && said.contains("peanuts"),
        "{said}"
    );
    let left: i64 = db(d)
        .query_row("SELECT COUNT(*) FROM memories", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 1);
}

#[test]
fn everything_else_falls_back_to_the_graph_and_fails_clearly_without_an_llm() {
    let dir = state_dir();
    let d = dir.path();
    let o = chat(d, "explain photosynthesis", None);
    assert!(!o.status.success());
    let f = frames(&o);
    let err = frame(&f, "error");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("language model") && !message.contains('\n'),
        "{message}"
    );
    assert!(f.iter().all(|x| x["type"] != "done"));
    let (mode, _, _, _, outcome) = last_turn(d);
    assert_eq!((mode.as_deref(), outcome.as_str()), (Some("tree"), "error"));

    // A 10k-character utterance: no panic, the fallback, the reason logged.
    let huge = "please ".repeat(1500);
    let o = chat(d, &huge, None);
    assert!(!o.status.success());
    assert!(frame(&frames(&o), "error")["message"]
        .as_str()
        .unwrap()
        .contains("language model"));
    let (_, _, _, notes, _) = last_turn(d);
    assert!(
        notes.unwrap_or_default().contains("longer than 500"),
        "notes explain the fallback"
    );
}

#[test]
fn graph_mode_per_conversation_and_config_with_shadow_intents() {
    let dir = state_dir();
    let d = dir.path();
    let conversation = device_turn(d, "what time is it", None)["conversation_id"]
        .as_i64()
        .unwrap();
    db(d)
        .execute(
            "UPDATE conversations SET mode = 'graph' WHERE id = ?1",
            [conversation],
        )
        .unwrap();
    let o = chat(d, "what time is it", Some(conversation));
    assert!(!o.status.success(), "graph mode needs the LLM");
    let (mode, intent, conf, _, _) = last_turn(d);
    assert_eq!(mode.as_deref(), Some("graph"));
    assert_eq!(
        intent.as_deref(),
        Some("time_now"),
        "shadow mode logs the intent in graph mode too"
    );
    assert!(conf.unwrap() > 0.75);

    let o =
        run(earshot(d)
            .env("EARSHOT_MODE", "graph")
            .args(["chat", "what's the date", "--json"]));
    assert!(!o.status.success());
    let (mode, intent, ..) = last_turn(d);
    assert_eq!(
        (mode.as_deref(), intent.as_deref()),
        (Some("graph"), Some("date_today"))
    );
}

#[test]
fn a_broken_tree_falls_back_to_the_graph_and_says_why() {
    let dir = state_dir();
    let d = dir.path();
    let bad = d.join("bad.json");
    std::fs::write(&bad, r#"{"version":"1","entry":"e","nodes":{"e":{"type":"classify","branches":{"weather":"x"},"fallback":"x"},"x":{"type":"end"}}}"#).unwrap();
    let config = d.join("earshot.toml");
    std::fs::write(
        &config,
        format!("[tree]\nfile = {:?}\n", bad.display().to_string()),
    )
    .unwrap();
    let o = run(earshot(d).args([
        "--config",
        config.to_str().unwrap(),
        "chat",
        "what time is it",
        "--json",
    ]));
    assert!(!o.status.success(), "graph without an LLM fails");
    let (mode, _, _, notes, _) = last_turn(d);
    assert_eq!(mode.as_deref(), Some("tree"));
    let notes = notes.unwrap();
    assert!(
        notes.contains("intent tree is unavailable")
            && notes.contains("bad.json")
            && notes.contains("'weather'"),
        "{notes}"
    );
}

#[test]
fn tree_check_good_and_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = run(earshot(d).args(["tree", "check", &default_tree()]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(": ok ("), "{}", stdout(&o));

    let bad = d.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"version":"1","entry":"e","nodes":{
        "e":{"type":"entry","next":"c"},
        "c":{"type":"classify","branches":{"time_now":"t","weather":"t"},"fallback":"nowhere"},
        "t":{"type":"action","name":"time_now","on_success":"z","on_fail":"z"},
        "z":{"type":"end"},
        "lost":{"type":"end"},
        "a":{"type":"set_state","key":"state.x","value":1,"next":"b"},
        "b":{"type":"phase_transition","to":"idle","next":"a"}}}"#,
    )
    .unwrap();
    let o = run(earshot(d).args(["tree", "check", bad.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    for needle in [
        "node 'c' (path e → c): 'fallback' points to 'nowhere'",
        "node 'c' (path e → c): branch intent 'weather' is not an intent of classifier 'device'",
        "node 'lost' (path lost): no path from the entry",
        "cycle a → b → a has no classify or llm_stream node",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    assert!(
        err.lines().all(|l| l.starts_with(bad.to_str().unwrap())),
        "{err}"
    );

    let o = run(earshot(d).args(["tree", "check", bad.to_str().unwrap(), "--json"]));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["issues"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["kind"] == "unknown_intent" && i["node"] == "c"));

    std::fs::write(&bad, "{\"version\": 1,").unwrap();
    let o = run(earshot(d).args(["tree", "check", bad.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    let o = run(earshot(d).args(["tree", "check", "/no/such/tree.json"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/no/such/tree.json"));
}

#[test]
fn tree_run_dry_run_changes_nothing_and_real_run_persists() {
    let dir = state_dir();
    let d = dir.path();
    let o = run(earshot(d).args([
        "tree",
        "run",
        &default_tree(),
        "remind me to buy eggs",
        "--dry-run",
        "--json",
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let f = frames(&o);
    assert_eq!(frame(&f, "done")["intent"], "todo_add");
    let trace = frame(&f, "trace");
    assert!(
        trace["notes"]
            .to_string()
            .contains("dry run: skipped action 'todo_add'"),
        "{trace}"
    );
    assert_eq!(trace["path"][0], "start");
    let n: i64 = db(d)
        .query_row("SELECT COUNT(*) FROM todos", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0, "dry run wrote a todo");
    let turns: i64 = db(d)
        .query_row("SELECT COUNT(*) FROM turn_log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(turns, 0, "dry run saved a turn");

    let o = run(earshot(d).args([
        "tree",
        "run",
        &default_tree(),
        "remind me to buy eggs",
        "--json",
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let f = frames(&o);
    assert_eq!(frame(&f, "thinking")["tool"], "todo_add");
    assert_eq!(frame(&f, "trace")["events"][0]["event"], "todos_changed");
    let n: i64 = db(d)
        .query_row("SELECT COUNT(*) FROM todos", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);

    // A step-bound tree: the error frame, exit 1.
    let looping = d.join("loop.json");
    std::fs::write(
        &looping,
        r#"{"version":"1","entry":"c","nodes":{
        "c":{"type":"classify","branches":{"time_now":"s"},"fallback":"z"},
        "s":{"type":"set_state","key":"state.n","value":1,"next":"c"},
        "z":{"type":"end"}}}"#,
    )
    .unwrap();
    let o = run(earshot(d).args([
        "tree",
        "run",
        looping.to_str().unwrap(),
        "what time is it",
        "--dry-run",
        "--json",
    ]));
    assert_eq!(o.status.code(), Some(1));
    let f = frames(&o);
    assert!(frame(&f, "error")["message"]
        .as_str()
        .unwrap()
        .contains("more than 50 steps"));
}

/// The whole default tree (guards, thresholds, the real MiniLM kNN) on
/// utterances that are not in its examples (tests/data/tree_heldout.json):
/// how many reach the right device action, fall back to the router graph,
/// or misfire. Figures are in notes/tree.md.
#[test]
fn default_tree_on_held_out_utterances() {
    use earshot::tree::interpreter::{Host, HostError, LlmAnswer, WalkInput};
    struct NoLlm;
    impl Host for NoLlm {
        fn llm_stream(
            &mut self,
            _: &str,
            _: bool,
            _: &mut dyn earshot::events::EventSink,
        ) -> Result<LlmAnswer, HostError> {
            Err(HostError::NoLlm("no LLM in this test".into()))
        }
    }
    let dir = state_dir();
    let engine = common::default_tree_engine(dir.path());
    engine.classifiers_ready().unwrap();
    let data: Vec<(String, String)> =
        serde_json::from_str(&std::fs::read_to_string(common::data("tree_heldout.json")).unwrap())
            .unwrap();
    let intents = engine.intents("device").unwrap();
    let (mut correct, mut fallback, mut misfire) = (0, 0, Vec::new());
    for (text, label) in &data {
        let input = WalkInput {
            text: text.clone(),
            phase: "idle".into(),
            dry_run: true,
            preview: false,
            ..Default::default()
        };
        let out = engine
            .run(input, &mut NoLlm, &mut |_: &earshot::events::Event| {})
            .unwrap();
        let decided = if out.path.iter().any(|n| n == "llm") {
            "other".to_string()
        } else {
            out.path
                .iter()
                .find(|n| intents.contains(n))
                .cloned()
                .unwrap_or_else(|| "other".into())
        };
        if &decided == label {
            correct += 1;
        } else if decided == "other" {
            fallback += 1;
        } else {
            misfire.push(format!("{text:?}: {label} → {decided}"));
        }
    }
    let n = data.len();
    eprintln!("held-out {n}: correct {correct}, fallback to the graph {fallback}, misfire {}: {misfire:#?}", misfire.len());
    assert!(n >= 150);
    assert!(correct * 100 >= n * 75, "only {correct}/{n} correct");
    assert!(
        misfire.len() * 100 <= n * 3,
        "too many misfires: {misfire:#?}"
    );
}

/// A board without ONNX Runtime (e.g. armv7): the tree still loads, rules
/// (stop words) still answer, classify nodes take their fallback and the
/// turn log says why.
#[test]
fn without_onnx_runtime_classify_falls_back_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let no_ort = |cmd: &mut std::process::Command| {
        cmd.env("ORT_DYLIB_PATH", d.join("missing/libonnxruntime.so.1.31.1"));
    };
    let mut cmd = earshot(d);
    no_ort(&mut cmd);
    let o = run(cmd.args(["chat", "stop", "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(frame(&frames(&o), "done")["response"], "Okay.");

    let mut cmd = earshot(d);
    no_ort(&mut cmd);
    // An unambiguous frame needs no classifier...
    let o = run(cmd.args(["chat", "what time is it", "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(frame(&frames(&o), "done")["actions"][0], "time_now");
    // ...anything else falls back to the graph, which needs an LLM.
    let mut cmd = earshot(d);
    no_ort(&mut cmd);
    let o = run(cmd.args(["chat", "how long is the flight to Paris", "--json"]));
    assert!(
        !o.status.success(),
        "falls back to the graph, which needs an LLM"
    );
    let (mode, _, _, notes, _) = last_turn(d);
    assert_eq!(mode.as_deref(), Some("tree"));
    let notes = notes.unwrap_or_default();
    assert!(
        notes.contains("classifier 'device' is unavailable") && notes.contains("ONNX Runtime"),
        "{notes}"
    );
}

/// The JSON Schema names the same node kinds and actions as the code.
#[test]
fn the_schema_matches_the_code() {
    let schema: Value = serde_json::from_str(earshot::tree::TREE_SCHEMA).unwrap();
    let kinds: Vec<&str> = schema["$defs"]["node"]["properties"]["type"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 12);
    for kind in &kinds {
        assert!(
            schema["$defs"][kind]["properties"]["type"]["const"] == *kind,
            "{kind}"
        );
    }
    let mut actions: Vec<String> = schema["$defs"]["action"]["properties"]["name"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        earshot::tree::actions::ActionRegistry::device().names()
    );
    // Every kind the default tree uses is one of the schema's.
    let tree: Value = serde_json::from_str(earshot::tree::DEFAULT_TREE).unwrap();
    for (id, node) in tree["nodes"].as_object().unwrap() {
        assert!(kinds.contains(&node["type"].as_str().unwrap()), "{id}");
    }
}

/// A valid tree of `n` nodes as JSON: the entry, then a chain in which
/// every 10th node is a classify, the others conditions, actions and
/// set_states (each branch going on down the chain or to the end), then
/// the end node. The deepest node is n − 1 edges from the entry.
fn big_tree(n: usize) -> String {
    let id = |i: usize| format!("n{i:06}");
    let inner = n - 2;
    let mut nodes = Vec::with_capacity(n);
    nodes.push(format!(r#""e":{{"type":"entry","next":"{}"}}"#, id(0)));
    for i in 0..inner {
        let next = if i + 1 < inner {
            id(i + 1)
        } else {
            "end".into()
        };
        let node = match i % 10 {
            0 => format!(
                r#"{{"type":"classify","classifier":"device","branches":{{"time_now":"{next}","stop":"end"}},"fallback":"{next}"}}"#
            ),
            3 => format!(
                r#"{{"type":"action","name":"say","args":{{"text":"step {i}"}},"on_success":"{next}","on_fail":"end"}}"#
            ),
            6 => {
                format!(r#"{{"type":"set_state","key":"state.step","value":{i},"next":"{next}"}}"#)
            }
            _ => format!(
                r#"{{"type":"condition","expression":"state.step != {i}","on_true":"{next}","on_false":"end"}}"#
            ),
        };
        nodes.push(format!(r#""{}":{node}"#, id(i)));
    }
    nodes.push(r#""end":{"type":"end"}"#.into());
    format!(
        r#"{{"version":"big","entry":"e","nodes":{{{}}}}}"#,
        nodes.join(",")
    )
}

/// Issue 23: `tree check` grew roughly cubically (20k nodes 62 s). A 100k
/// node tree — 10k classify nodes with a warning each, paths 100k deep —
/// is now checked by the debug binary in a few seconds (release: see
/// BENCHMARKS.md), and an error deep down still names its node and path.
#[test]
fn a_100k_node_tree_is_checked_in_near_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.json");
    std::fs::write(&file, big_tree(100_000)).unwrap();
    let started = std::time::Instant::now();
    let o = run(earshot(dir.path()).args(["tree", "check", file.to_str().unwrap(), "--json"]));
    let took = started.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["nodes"], 100_000);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 10_000);
    assert!(
        took < std::time::Duration::from_secs(20),
        "100k nodes took {took:?}"
    );

    // One broken edge at the bottom: the error names it, its path elided.
    let broken = big_tree(100_000).replace(
        r#""n099997":{"type":"condition","expression":"state.step != 99997","on_true":"end""#,
        r#""n099997":{"type":"condition","expression":"state.step != 99997","on_true":"nowhere""#,
    );
    std::fs::write(&file, broken).unwrap();
    let o = run(earshot(dir.path()).args(["tree", "check", file.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("node 'n099997' (path e → n000000 →")
            && err.contains(" → … → ")
            && err.contains("→ n099997): 'on_true' points to 'nowhere'"),
        "{err}"
    );
}

/// `earshot tree run` on the default tree, dry run: the `done` frame's
/// intent (null when nothing was accepted) and the whole output.
fn dry_run_intent(dir: &Path, text: &str) -> (Value, Output) {
    let o = run(earshot(dir).args(["tree", "run", &default_tree(), text, "--dry-run", "--json"]));
    assert!(o.status.success(), "{text}: {}", stderr(&o));
    let intent = frame(&frames(&o), "done")["intent"].clone();
    (intent, o)
}

/// Issue 16 point 6: a phrasing added in `$STATE_DIR/intents/device.txt`
/// is understood at the next start, no rebuild.
#[test]
fn a_user_phrasing_is_understood_without_rebuilding() {
    let dir = state_dir();
    let d = dir.path();
    let odd = "what does the clock say";
    let (intent, _) = dry_run_intent(d, odd);
    assert_ne!(
        intent, "time_now",
        "pick a phrasing the shipped examples do not cover"
    );
    std::fs::create_dir(d.join("intents")).unwrap();
    std::fs::write(
        d.join("intents/device.txt"),
        format!("# my phrasings\n## time_now\n{odd}\nwhat time is it\n"),
    )
    .unwrap();
    let (intent, o) = dry_run_intent(d, odd);
    assert_eq!(intent, "time_now", "{}", stdout(&o));
    let (intent, _) = dry_run_intent(d, "remind me to buy milk");
    assert_eq!(intent, "todo_add", "the shipped examples still work");
    let o = run(earshot(d).args(["tree", "check"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("intents: ok (1 examples file)"),
        "{}",
        stdout(&o)
    );
}

/// `tree check --intents DIR`: every problem of every examples file, one
/// line each with file:line, exit 1; `--json` adds them under `intents`.
#[test]
fn tree_check_reports_broken_examples_files_one_line_per_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let intents = d.join("my-intents");
    std::fs::create_dir(&intents).unwrap();
    let long = "lala ".repeat(120);
    std::fs::write(
        intents.join("device.txt"),
        format!("stray line\n##\n## time_now\n## stop\n{long}\n## pause\nWhat time is it\n"),
    )
    .unwrap();
    std::fs::write(intents.join("bin.txt"), b"## a\n\xff\xfe\n").unwrap();
    std::fs::write(intents.join("house.txt"), "## lights_on\nlights on\n").unwrap();
    let device = intents.join("device.txt").display().to_string();
    let o = run(earshot(d).args(["tree", "check", "--intents", intents.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    let wanted = [
        format!(
            "{}: not UTF-8 text (first bad byte on line 2)",
            intents.join("bin.txt").display()
        ),
        format!("{device}:1: utterance \"stray line\" comes before any `## intent` header"),
        format!("{device}:2: `##` needs an intent name after it"),
        format!("{device}:3: intent time_now has no examples"),
        format!("{device}:5: line is 599 characters"),
        format!("{device}:7: \"What time is it\" is already an example of time_now"),
    ];
    assert_eq!(lines.len(), wanted.len(), "{err}");
    for (line, want) in lines.iter().zip(&wanted) {
        assert!(
            line.starts_with(want.as_str()),
            "{line:?} should start with {want:?}"
        );
    }
    let out = stdout(&o);
    assert!(out.contains("the default tree: ok ("), "{out}");
    assert!(
        out.contains("warning: ")
            && out.contains("house.txt: no classify node")
            && out.contains("'house'"),
        "{out}"
    );

    // The same with an explicit tree file, as JSON: the tree keys as before.
    let o = run(earshot(d).args([
        "tree",
        "check",
        &default_tree(),
        "--intents",
        intents.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert!(
        v["nodes"].as_u64().unwrap() > 0 && v["warnings"].is_array(),
        "{v}"
    );
    let problems = v["intents"].as_array().unwrap();
    assert_eq!(problems.len(), wanted.len() + 1, "{v}");
    assert!(problems
        .iter()
        .any(|p| p["file"] == device.as_str() && p["line"] == 7 && p["severity"] == "error"));
    assert!(problems
        .iter()
        .any(|p| p["severity"] == "warning" && p["message"].as_str().unwrap().contains("'house'")));

    // Fixed: exit 0. A file as large as a log is refused in one line.
    std::fs::remove_file(intents.join("bin.txt")).unwrap();
    std::fs::write(
        intents.join("device.txt"),
        "## time_now\nwhat does the clock say\n",
    )
    .unwrap();
    let o = run(earshot(d).args(["tree", "check", "--intents", intents.to_str().unwrap()]));
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(intents.join("device.txt"), "## time_now\n".repeat(200_000)).unwrap();
    let o = run(earshot(d).args(["tree", "check", "--intents", intents.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("larger than"), "{}", stderr(&o));
}

/// A broken examples file is left out, logged with its file:line, and the
/// device still answers from the shipped examples.
#[test]
fn a_broken_examples_file_does_not_stop_tree_run_answering() {
    let dir = state_dir();
    let d = dir.path();
    std::fs::create_dir(d.join("intents")).unwrap();
    std::fs::write(
        d.join("intents/device.txt"),
        "gimme the hour\n## time_now\n",
    )
    .unwrap();
    std::fs::write(d.join("intents/confirm.txt"), b"\xff\xff\xff").unwrap();
    let (intent, o) = dry_run_intent(d, "what time is it");
    assert_eq!(intent, "time_now");
    assert!(
        frame(&frames(&o), "done")["response"]
            .as_str()
            .unwrap()
            .starts_with("It's "),
        "{}",
        stdout(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains("intents/device.txt:1: utterance \"gimme the hour\"")
            && err.contains("confirm.txt: not UTF-8")
            && err.contains("left out"),
        "{err}"
    );
}
