//! Long-term memory and the conversation index (issue 5), with the real
//! MiniLM model, a real SQLite file, real usearch files and a loopback
//! OpenAI-compatible server speaking the chat-completions wire format.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::http::{openai_completion, openai_stream_chunks, Reply, Request, TestServer};
use earshot::agent::turn::{run_turn, TurnInput};
use earshot::agent::Services;
use earshot::cancel::CancelToken;
use earshot::config::Config;
use earshot::events::CollectSink;
use earshot::llm::openai::OpenAiClient;
use earshot::nlu::Embedder;
use earshot::store::Store;
use serde_json::{json, Value};

/// The real embedder, loaded once for this test binary.
fn embedder() -> Arc<dyn Embedder> {
    static E: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    E.get_or_init(|| {
        let config = Config {
            models_dir: common::models_dir(),
            ..Default::default()
        };
        earshot::nlu::load_embedder(&config.nlu, &config.paths())
            .expect("MiniLM model in models/ (scripts/fetch-embedder.sh)")
    })
    .clone()
}

fn services(state: &Path, llm_url: &str) -> Services {
    let mut config = Config {
        state_dir: state.to_path_buf(),
        models_dir: common::models_dir(),
        mode: earshot::agent::Mode::Graph,
        ..Default::default()
    };
    config.llm.base_url = format!("{llm_url}/v1");
    config.llm.api_key = String::new();
    config.llm.max_retries = 0;
    config.memory.worker_poll_ms = 50;
    let store = Store::open(&config.database_path()).unwrap();
    let llm = Arc::new(OpenAiClient::new(&config.llm));
    let s = earshot::app::assemble(&config, store, llm, Some(embedder()), None);
    assert!(s.memory.is_some() && s.recall.is_some());
    s
}

fn system_prompt(req: &Request) -> String {
    req.json()["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn user_prompt(req: &Request) -> String {
    let v = req.json();
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    msgs.last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

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

/// The scripted LLM: extraction steps, summaries, and plain answers.
fn scripted(req: &Request) -> Reply {
    let system = system_prompt(req);
    let user = user_prompt(req);
    if system.contains("personal information organizer") {
        let facts = if user.contains("Monday") {
            json!({"facts": ["Has a meeting with Ana on Monday at 10am"]})
        } else if user.contains("Friday") {
            json!({"facts": ["Meeting with Ana moved to Friday at 3pm"]})
        } else if user.contains("jazz") {
            // Not JSON at all: must be ignored.
            return answer(req, "Sure! The user seems to like jazz a lot.");
        } else {
            json!({"facts": []})
        };
        return answer(req, &format!("```json\n{facts}\n```"));
    }
    if system.contains("You manage a user's long-term memory") {
        // Find the existing memory about Monday and supersede it.
        let existing: Vec<Value> = user
            .split("Existing memories:\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\nNew facts:").next())
            .and_then(|j| serde_json::from_str(j).ok())
            .unwrap_or_default();
        let old = existing
            .iter()
            .find(|m| m["text"].as_str().unwrap_or_default().contains("Monday"));
        let ops = match (old, user.contains("Friday")) {
            (Some(old), true) => {
                json!({"memory": [{"id": old["id"], "text": "Has a meeting with Ana on Friday at 3pm", "event": "UPDATE", "old_memory": old["text"]}]})
            }
            _ => {
                json!({"memory": [{"id": "new", "text": "Has a meeting with Ana on Monday at 10am", "event": "ADD"}]})
            }
        };
        return answer(req, &ops.to_string());
    }
    if system.contains("Summarize this conversation") {
        return answer(
            req,
            "Title: Meeting with Ana\nOverview: The user rescheduled the meeting with Ana from Monday to Friday afternoon.\nAction items: confirm the new time with Ana",
        );
    }
    answer(req, "Noted.")
}

/// The newest turn-log row's id.
fn last_turn_id(s: &Services) -> i64 {
    s.store
        .with_conn(|c| c.query_row("SELECT max(id) FROM turn_log", [], |r| r.get(0)))
        .unwrap()
}

fn turn(s: &Services, text: &str, conversation: Option<i64>) -> i64 {
    let mut sink = CollectSink::default();
    let mut input = TurnInput::text(text);
    input.conversation_id = conversation;
    let out = run_turn(s, input, &mut sink, &CancelToken::new());
    assert!(out.ok, "{:?}", sink.events);
    out.conversation_id.unwrap()
}

#[test]
fn a_later_fact_supersedes_an_earlier_one_and_recall_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(scripted);
    let s = services(dir.path(), &server.url());
    let memory = s.memory.clone().unwrap();

    let conv = turn(&s, "I have a meeting with Ana on Monday at 10.", None);
    let report = earshot::memory::process_pending(&s).unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    let texts: Vec<String> = memory
        .list("user-1")
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, vec!["Has a meeting with Ana on Monday at 10am"]);
    let first = memory.list("user-1").unwrap()[0].clone();

    turn(
        &s,
        "The meeting with Ana moved to Friday at 3pm.",
        Some(conv),
    );
    // A reply that is not JSON is logged and ignored.
    turn(&s, "I like jazz", Some(conv));
    let report = earshot::memory::process_pending(&s).unwrap();
    assert_eq!((report.failed, report.pending), (0, 0), "{report:?}");

    // The update step was shown the Monday memory (found by MiniLM) with a short id.
    let update_requests: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| system_prompt(r).contains("You manage a user's long-term memory"))
        .map(user_prompt)
        .collect();
    assert!(
        update_requests.last().unwrap().contains("Monday at 10am"),
        "{update_requests:?}"
    );

    let items = memory.list("user-1").unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].text, "Has a meeting with Ana on Friday at 3pm");
    assert_eq!(items[0].id, first.id);
    assert_eq!(items[0].created_at, first.created_at);

    // Recall before routing: the new fact, exact block format, prepended.
    let block = memory.recall_block_for_test("when is my meeting with Ana?");
    let today = &earshot::store::now()[..10];
    assert_eq!(
        block,
        format!("Relevant context from your past conversations:\n- Has a meeting with Ana on Friday at 3pm (created {today})")
    );
    let before = server.requests().len();
    turn(&s, "when is my meeting with Ana?", Some(conv));
    let sent: Vec<String> = server.requests()[before..]
        .iter()
        .map(user_prompt)
        .collect();
    assert!(
        sent.iter()
            .any(|u| u.starts_with(&format!("{block}\n\nwhen is my meeting with Ana?"))),
        "{sent:?}"
    );
    // The turn log and the export name the memory sent, with its scores,
    // in graph mode and (the same conversation switched) in tree mode.
    let memory_id = items[0].id;
    let logged = |turn_id: i64| {
        let row = s.store.turn_log_row(turn_id).unwrap().unwrap();
        let memories = row["memories_json"].clone();
        assert_eq!(memories.as_array().map(Vec::len), Some(1), "{row}");
        assert_eq!(memories[0]["id"], json!(memory_id));
        assert_eq!(
            memories[0]["text"],
            "Has a meeting with Ana on Friday at 3pm"
        );
        let semantic = memories[0]["semantic"].as_f64().unwrap();
        assert!(semantic >= 0.24, "{memories}");
        assert!(memories[0]["bm25"].as_f64().unwrap() > 0.0, "{memories}");
        (row["mode"].clone(), memories)
    };
    let graph_turn = last_turn_id(&s);
    let (mode, graph_memories) = logged(graph_turn);
    assert_eq!(mode, "graph");
    s.store.set_conversation_mode(conv, Some("tree")).unwrap();
    let before = server.requests().len();
    turn(&s, "when is my meeting with Ana?", Some(conv));
    assert!(
        server.requests()[before..]
            .iter()
            .any(|r| user_prompt(r).starts_with(&block)),
        "tree mode sent no memory block"
    );
    let (mode, _) = logged(last_turn_id(&s));
    assert_eq!(mode, "tree");
    s.store.set_conversation_mode(conv, None).unwrap();
    let export = earshot::review::export::rows(&s.store, false).unwrap();
    let exported = export
        .iter()
        .find(|r| r["turn_id"] == json!(graph_turn))
        .unwrap();
    assert_eq!(exported["memories"], graph_memories);
    assert!(
        export
            .iter()
            .filter(|r| r["question"] == "I like jazz")
            .all(|r| r["memories"] == json!([])),
        "a turn with nothing recalled logs no memories"
    );

    // Unrelated requests recall nothing.
    assert_eq!(
        memory.recall_block_for_test("what's the weather in Lisbon"),
        ""
    );
    let scored = memory
        .search("user-1", "what's the weather in Lisbon", 5)
        .unwrap();
    assert!(
        scored.iter().all(|m| !m.keep && m.semantic < 0.28),
        "{scored:?}"
    );
}

#[test]
fn summaries_worker_indexes_conversations_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(scripted);
    let s = services(dir.path(), &server.url());
    let memory = s.memory.clone().unwrap();

    let short = turn(&s, "hello there", None);
    let conv = turn(&s, "I have a meeting with Ana on Monday at 10.", None);
    turn(
        &s,
        "The meeting with Ana moved to Friday at 3pm.",
        Some(conv),
    );
    assert!(s.store.pending_jobs().unwrap() >= 6);

    let worker = earshot::memory::start_background(&s).unwrap();
    worker.notify();
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.store.pending_jobs().unwrap() > 0 {
        assert!(Instant::now() < deadline, "worker did not drain the queue");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(worker.shutdown(Duration::from_secs(10)));

    let c = s.store.conversation(conv).unwrap().unwrap();
    assert_eq!(c.title.as_deref(), Some("Meeting with Ana"));
    assert!(c.overview.unwrap().contains("Friday"));
    assert_eq!(
        c.action_items.as_deref(),
        Some(r#"["confirm the new time with Ana"]"#)
    );
    // Under 2 turns: skipped.
    assert_eq!(s.store.conversation(short).unwrap().unwrap().title, None);
    // Only one summary request: the first summarize job of `conv` was
    // superseded by the second.
    let summaries = server
        .requests()
        .iter()
        .filter(|r| system_prompt(r).contains("Summarize this conversation"))
        .count();
    assert_eq!(summaries, 1);

    let hits = memory
        .search_conversations("user-1", "rescheduling my meeting with Ana", 5)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].conversation_id, conv);
    assert!(hits[0].score > 0.5, "{hits:?}");
    assert!(memory
        .search_conversations("user-2", "meeting with Ana", 5)
        .unwrap()
        .is_empty());
    // The agent's tool is wired to this index.
    let out = s
        .tools
        .call("search_conversations", r#"{"query": "meeting with Ana"}"#)
        .unwrap();
    assert!(
        out.starts_with("- Meeting with Ana: The user rescheduled"),
        "{out}"
    );
}

#[test]
fn jobs_wait_for_an_unreachable_llm_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let server = TestServer::start(scripted);
    {
        let s = services(dir.path(), &server.url());
        turn(&s, "I have a meeting with Ana on Monday at 10.", None);
    }
    {
        let s = services(dir.path(), &dead);
        let report = earshot::memory::process_pending(&s).unwrap();
        assert_eq!(report.retry_later, 1, "{report:?}");
        assert_eq!(report.pending, 2);
    }
    // Restart with the LLM back: nothing was lost.
    let s = services(dir.path(), &server.url());
    let report = earshot::memory::process_pending(&s).unwrap();
    assert_eq!((report.done, report.pending), (2, 0), "{report:?}");
    assert_eq!(s.memory.as_ref().unwrap().list("user-1").unwrap().len(), 1);
}

fn cli(state: &Path, args: &[&str]) -> std::process::Output {
    common::run(common::earshot(state).args(args))
}

#[test]
fn cli_add_search_forget_with_scores() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(
        dir.path(),
        &[
            "memory",
            "add",
            "remember that my doctor said I must avoid peanuts",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert_eq!(v["created"], true);
    assert_eq!(v["item"]["text"], "my doctor said I must avoid peanuts");
    assert!(cli(
        dir.path(),
        &["memory", "add", "I prefer oat milk in my coffee"]
    )
    .status
    .success());
    // A 50k-character memory is stored whole.
    let long = format!("my notes: {}", "lorem ipsum ".repeat(4200));
    assert!(cli(dir.path(), &["memory", "add", &long]).status.success());

    let out = cli(
        dir.path(),
        &["memory", "search", "can I eat peanut butter?", "--json"],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let top = &results[0];
    assert_eq!(top["text"], "my doctor said I must avoid peanuts");
    assert!(top["score"]["semantic"].as_f64().unwrap() >= 0.28, "{top}");
    assert!(top["score"]["bm25"].as_f64().unwrap() >= 0.0);
    assert_eq!(top["keep"], true);
    let block = v["block"].as_str().unwrap();
    assert!(block.starts_with("Relevant context from your past conversations:\n- "));
    assert!(
        block.contains("\n- my doctor said I must avoid peanuts (created "),
        "{block}"
    );
    assert!(!block.contains("lorem"), "{block}");
    for r in results {
        let (s, b) = (
            r["score"]["semantic"].as_f64().unwrap(),
            r["score"]["bm25"].as_f64().unwrap(),
        );
        assert_eq!(
            r["keep"],
            json!(s >= 0.28 || (s >= 0.24 && b > 0.01)),
            "{r}"
        );
    }

    let out = cli(dir.path(), &["memory", "list", "--json"]);
    let items: Vec<Value> = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert_eq!(items.len(), 3);
    assert!(items
        .iter()
        .any(|i| i["text"].as_str().unwrap().len() > 50_000));

    let out = cli(
        dir.path(),
        &["memory", "forget", "forget that I like oat milk", "--json"],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert_eq!(v["forgotten"]["text"], "I prefer oat milk in my coffee");
    let out = cli(
        dir.path(),
        &["memory", "forget", "the price of tea in China", "--json"],
    );
    assert!(!out.status.success());
    assert_eq!(
        serde_json::from_str::<Value>(&common::stdout(&out)).unwrap()["forgotten"],
        Value::Null
    );
    let out = cli(dir.path(), &["memory", "check", "--json"]);
    assert!(out.status.success(), "{}", common::stdout(&out));
}

#[test]
fn kill_9_while_indexing_then_restart_is_consistent_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut acknowledged = Vec::new();
    // Kill `earshot memory add` processes at spread-out moments: while
    // loading, inside the SQLite write, inside the index file write.
    for i in 0..24u64 {
        let text = format!("fact number {i}: the locker code is {}", 1000 + i * 7);
        let mut child = common::earshot(dir.path())
            .args(["memory", "add", &text])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let wait = Duration::from_millis(20 + (i * 37) % 400);
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() >= wait {
                let _ = child.kill(); // SIGKILL
                break child.wait().ok().filter(|s| s.success());
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if status.is_some_and(|s| s.success()) {
            acknowledged.push(text);
        }
    }
    // Restart: every acknowledged fact is there and the index agrees.
    let out = cli(dir.path(), &["memory", "check", "--json"]);
    let v: Value = serde_json::from_str(&common::stdout(&out)).unwrap_or(Value::Null);
    assert!(out.status.success(), "{v} {}", common::stderr(&out));
    assert_eq!(v["consistent"], true);
    let out = cli(dir.path(), &["memory", "list", "--json"]);
    let items: Vec<Value> = serde_json::from_str(&common::stdout(&out)).unwrap();
    let stored: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    for fact in &acknowledged {
        assert!(stored.contains(&fact.as_str()), "lost {fact}");
    }
    assert_eq!(
        v["indexes"][0]["indexed"].as_u64().unwrap() as usize,
        stored.len()
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("index"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn truncated_index_is_rebuilt_with_a_log_line_and_service_sees_cli_writes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(scripted);
    for fact in [
        "I am allergic to shellfish",
        "My sister is called Ana",
        "I work night shifts",
    ] {
        assert!(cli(dir.path(), &["memory", "add", fact]).status.success());
    }
    let path = dir.path().join("index/memories.usearch");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = cli(
        dir.path(),
        &["memory", "search", "shellfish allergy", "--json"],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("vector index file is unusable; rebuilding it from SQLite"),
        "{}",
        common::stderr(&out)
    );
    let v: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert_eq!(v["results"][0]["text"], "I am allergic to shellfish");
    // The rebuilt file is whole again.
    let out = cli(dir.path(), &["memory", "check"]);
    assert!(out.status.success());
    assert!(
        !common::stderr(&out).contains("rebuilding"),
        "{}",
        common::stderr(&out)
    );

    // A running service and a CLI command share the state dir.
    let s = services(dir.path(), &server.url());
    let memory = s.memory.clone().unwrap();
    assert!(memory
        .recall_block_for_test("do I have a sister")
        .contains("My sister is called Ana"));
    assert!(
        cli(dir.path(), &["memory", "add", "My brother is called Rui"])
            .status
            .success()
    );
    assert!(memory
        .recall_block_for_test("what's my brother's name")
        .contains("My brother is called Rui"));
    let out = cli(
        dir.path(),
        &["memory", "forget", "forget that I work night shifts"],
    );
    assert!(out.status.success());
    assert!(!memory
        .list("user-1")
        .unwrap()
        .iter()
        .any(|m| m.text.contains("night")));
    let hits = memory.search("user-1", "night shifts at work", 5).unwrap();
    assert!(hits.iter().all(|h| !h.item.text.contains("night")));
}

trait BlockForTest {
    fn recall_block_for_test(&self, text: &str) -> String;
}

impl BlockForTest for earshot::memory::Memory {
    fn recall_block_for_test(&self, text: &str) -> String {
        earshot::memory::Recall::recall_block(self, "user-1", text)
            .unwrap()
            .unwrap_or_default()
    }
}

/// Make `store`'s connection hit SQLITE_FULL at its next new page, as a
/// full disk does.
fn fill_the_disk(store: &Store) {
    store
        .with_conn(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            c.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
        })
        .unwrap();
}

/// Issue 23: `memory add` on a full disk says so for the memory, not "the
/// last turn was not saved".
#[test]
fn memory_add_on_a_full_disk_names_the_disk_not_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let memory = earshot::memory::Memory::open(store.clone(), None, Default::default()).unwrap();
    fill_the_disk(&store);
    let long = format!("I keep {}", "a very long list of things ".repeat(800));
    let err = memory.remember("user-1", &long).unwrap_err();
    let line = format!("{err:#}");
    assert!(
        line.contains("disk holding")
            && line.contains("is full")
            && line.contains("free some space"),
        "{line}"
    );
    assert!(!line.contains("turn"), "{line}");
    assert!(memory.list("user-1").unwrap().is_empty());
}

/// With no LLM, a statement about the same thing supersedes the older one
/// (kept as history, not recalled); the real MiniLM decides closeness.
#[test]
fn a_statement_about_the_same_thing_supersedes_without_an_llm() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path(), "http://127.0.0.1:9");
    let memory = s.memory.clone().unwrap();
    let must = [
        ("my car is on level 3", "my car is parked on level 5"),
        ("I live in Porto", "I live in Lisbon"),
        ("my locker number is 12", "my locker number is 31"),
        (
            "the meeting with Ana is on Monday",
            "the meeting with Ana is on Friday at 3pm",
        ),
        ("I work at Siemens", "I work at Bosch"),
    ];
    let must_not = [
        ("my car is blue", "my car is parked on level 5"),
        ("I am allergic to peanuts", "I am a teacher"),
        ("my sister lives in Lisbon", "my brother lives in Lisbon"),
        ("I like jazz", "I like rock"),
        ("my mother is a nurse", "my mother is 64"),
        ("my birthday is in May", "my wife's birthday is in May"),
    ];
    for (i, (old, new)) in must.iter().enumerate() {
        let user = format!("must-{i}");
        let first = memory.remember(&user, old).unwrap();
        let second = memory.remember(&user, new).unwrap();
        assert_eq!(second.superseded.as_deref(), Some(*old), "{old} → {new}");
        assert_eq!(second.item.id, first.item.id);
        let texts: Vec<String> = memory
            .list(&user)
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(texts, [*new], "{old} → {new}");
        assert_eq!(memory.history(first.item.id).unwrap(), [*old]);
    }
    for (i, (old, new)) in must_not.iter().enumerate() {
        let user = format!("must-not-{i}");
        memory.remember(&user, old).unwrap();
        let second = memory.remember(&user, new).unwrap();
        assert_eq!(second.superseded, None, "{old} → {new}");
        assert_eq!(memory.list(&user).unwrap().len(), 2, "{old} → {new}");
    }
    // Recall says the new fact only.
    let block = earshot::memory::Recall::recall_block(&*memory, "must-0", "where is my car parked")
        .unwrap()
        .unwrap_or_default();
    assert!(
        block.contains("level 5") && !block.contains("level 3"),
        "{block}"
    );
}
