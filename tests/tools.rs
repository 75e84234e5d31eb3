//! The context path end to end (issue 4): the real `earshot` binary against
//! loopback servers speaking the exact wire formats of Groq/OpenAI tool
//! calling, Tavily and Notion, and the calculator against a table of
//! expressions whose expected values came from Python.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::http::{Piece, Reply, Request, TestServer};
use common::{data, earshot, run, stderr, stdout};
use serde_json::{json, Value};

// ---------------------------------------------------------------- helpers

/// `earshot tool NAME ARGS` in `dir` with extra env; (exit code, stdout, stderr).
fn tool(dir: &Path, env: &[(&str, &str)], name: &str, args: &str) -> (i32, String, String) {
    let mut cmd = earshot(dir);
    cmd.args(["tool", name, args]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    (
        out.status.code().unwrap_or(-1),
        stdout(&out).trim_end().to_string(),
        stderr(&out).trim_end().to_string(),
    )
}

/// `earshot chat TEXT --json` against `llm`; the JSON event lines.
fn chat(dir: &Path, llm: &TestServer, text: &str, env: &[(&str, &str)]) -> Vec<Value> {
    let mut cmd = earshot(dir);
    cmd.args(["chat", text, "--json"])
        .env("LLM_BASE_URL", format!("{}/openai/v1", llm.url()))
        .env("GROQ_API_KEY", "gsk_test")
        .env("GROQ_AGENT_MODEL", "agent-test")
        // The router graph (the intent tree would answer todo requests on
        // device without the agent).
        .env("EARSHOT_MODE", "graph")
        // No on-device models: the todo keywords route to the agent without
        // them, and each process skips ~1 s of model loading. The streamed
        // test passes the real models dir back in.
        .env("EARSHOT_MODELS_DIR", dir.join("no-models"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    stdout(&out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn content(events: &[Value]) -> String {
    events_of(events, "content")
        .iter()
        .map(|e| e["data"].as_str().unwrap_or(""))
        .collect()
}

fn done(events: &[Value]) -> Value {
    events_of(events, "done")
        .first()
        .map(|v| (*v).clone())
        .unwrap_or_else(|| panic!("no done event in {events:#?}"))
}

fn open_store(dir: &Path) -> earshot::store::Store {
    earshot::store::Store::open_in(dir).unwrap()
}

fn todo_titles(dir: &Path) -> Vec<(String, bool)> {
    open_store(dir)
        .with_conn(|c| {
            let mut s = c.prepare("SELECT title, done FROM todos ORDER BY id")?;
            let rows = s.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0)))?;
            rows.collect()
        })
        .unwrap()
}

/// A chat-completions SSE chunk.
fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_764_000_000,
        "model": "agent-test",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
    })
    .to_string()
}

/// A non-streamed chat completion with optional tool calls.
fn completion(content: Option<&str>, calls: &[(&str, &str, &str)]) -> Reply {
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 1_764_000_000,
            "model": "agent-test",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string(),
    )
}

/// A streamed final answer in a few pieces.
fn streamed_answer(pieces: &[&str]) -> Reply {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for p in pieces {
        chunks.push(chunk(json!({"content": p}), None));
    }
    chunks.push(chunk(json!({}), Some("stop")));
    chunks.push("[DONE]".into());
    let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
    Reply::sse(&refs)
}

/// An LLM server: requests offering tools go to `agent` with their index
/// among such requests; anything else (router, memory) gets a plain reply.
fn llm_server(agent: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) -> TestServer {
    let count = AtomicUsize::new(0);
    TestServer::start(move |req: &Request| {
        let body = req.json();
        if req.path.ends_with("/chat/completions") && body.get("tools").is_some() {
            let n = count.fetch_add(1, Ordering::SeqCst);
            agent(n, &body)
        } else {
            completion(Some("simple"), &[])
        }
    })
}

fn agent_requests(server: &TestServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(Request::json)
        .filter(|b| b.get("tools").is_some())
        .collect()
}

fn tool_messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn turn_row(dir: &Path, done: &Value) -> Value {
    let id = done["turn_id"].as_i64().unwrap();
    open_store(dir).turn_log_row(id).unwrap().unwrap()
}

// ------------------------------------------------------------- calculator

#[test]
fn calculator_table_matches_python_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let table = std::fs::read_to_string(data("calculator_cases.tsv")).unwrap();
    let started = Instant::now();
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let mut cols = line.split('\t');
        let (expr, kind, want) = (
            cols.next().unwrap(),
            cols.next().unwrap(),
            cols.next().unwrap(),
        );
        let args = json!({ "expression": expr }).to_string();
        let (code, out, err) = tool(dir.path(), &[], "calculator", &args);
        let ok = match kind {
            "exact" => code == 0 && out == want,
            "approx" => {
                let got: f64 = out.parse().unwrap_or(f64::NAN);
                let want: f64 = want.parse().unwrap();
                code == 0 && ((got - want).abs() <= want.abs() * 1e-9 || got == want)
            }
            "error" => {
                let keys: &[&str] = match want {
                    "zero" => &["by zero", "negative power"],
                    "large" => &["too large"],
                    "complex" => &["no real result"],
                    _ => &[
                        "invalid expression",
                        "only numbers",
                        "empty",
                        "nested too deeply",
                        "too long",
                    ],
                };
                code == 1 && out.starts_with("Error: ") && keys.iter().any(|k| out.contains(k))
            }
            other => panic!("unknown kind {other}"),
        };
        if !ok {
            failures.push(format!(
                "{expr:?} ({kind} {want}) -> exit {code}: {out} {err}"
            ));
        }
        checked += 1;
    }
    assert!(checked >= 400, "only {checked} cases");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "calculator: {checked} cases through the binary in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn tool_command_rejects_bad_requests_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (name, args, want) in [
        ("calc", "{}", "unknown tool"),
        ("calculator", "{not json", "not JSON"),
        ("calculator", "[1]", "JSON object"),
        ("calculator", "{}", "missing the 'expression' field"),
        ("add_todo", r#"{"task": 5}"#, "must be a string"),
    ] {
        let (code, out, err) = tool(dir.path(), &[], name, args);
        assert_eq!(code, 2, "{name} {args}: {out} {err}");
        assert!(err.contains(want) && err.lines().count() == 1, "{err}");
    }
    let (code, out, _) = tool(dir.path(), &[], "web_search", r#"{"query":"x"}"#);
    assert_eq!(code, 1);
    assert_eq!(out, "Web search is unavailable: no TAVILY_API_KEY is set.");
}

// ------------------------------------------------------------ agent loop

#[test]
fn streamed_tool_calls_split_across_chunks_run_and_are_logged() {
    let dir = tempfile::tempdir().unwrap();
    let llm = llm_server(|n, _body| match n {
        0 => {
            // Two calls in one reply, arguments split mid-token.
            let chunks = [
                chunk(
                    json!({"role": "assistant", "content": null, "tool_calls": [
                    {"index": 0, "id": "call_calc", "type": "function",
                     "function": {"name": "calculator", "arguments": ""}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"expre"}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "ssion\": \"2**"}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "10\"}"}},
                    {"index": 1, "id": "call_todo", "type": "function",
                     "function": {"name": "add_todo", "arguments": "{\"task\":"}}]}),
                    None,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 1, "function": {"arguments": " \"milk\"}"}}]}),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
                "[DONE]".to_string(),
            ];
            let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
            let mut reply = Reply::sse(&[]);
            for r in refs {
                reply = reply
                    .piece(Piece::Bytes(format!("data: {r}\n\n").into_bytes()))
                    .piece(Piece::Pause(Duration::from_millis(5)));
            }
            reply
        }
        _ => streamed_answer(&[
            "**2 to the 10** is 1024",
            ", and I added",
            " milk to your list.",
        ]),
    });
    let models = common::models_dir();
    let events = chat(
        dir.path(),
        &llm,
        "add milk to my todo list and what is 2 to the 10",
        &[("EARSHOT_MODELS_DIR", models.to_str().unwrap())],
    );
    let thinking: Vec<&str> = events_of(&events, "thinking")
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(thinking, ["calculator", "add_todo"], "{events:#?}");
    assert_eq!(
        content(&events),
        "2 to the 10 is 1024, and I added milk to your list."
    );
    let d = done(&events);
    assert_eq!(d["route"], "context");
    assert_eq!(d["model"], "agent-test");
    assert_eq!(
        d["response"],
        "2 to the 10 is 1024, and I added milk to your list."
    );

    let reqs = agent_requests(&llm);
    assert_eq!(reqs.len(), 2);
    let first = &reqs[0];
    assert_eq!(first["model"], "agent-test");
    assert_eq!(first["temperature"], 0.0);
    assert_eq!(first["tool_choice"], "auto");
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"calculator") && offered.contains(&"add_todo"));
    assert!(
        !offered.contains(&"web_search"),
        "unconfigured tool offered: {offered:?}"
    );
    assert!(first["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("no markdown"));
    // The second request carries the assistant's calls and both results.
    let second = &reqs[1];
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
        .unwrap();
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"expression\": \"2**10\"}"
    );
    assert_eq!(
        tool_messages(second),
        vec![
            ("call_calc".to_string(), "1024".to_string()),
            (
                "call_todo".to_string(),
                "Added \"milk\" to the to-do list.".to_string()
            )
        ]
    );
    assert_eq!(todo_titles(dir.path()), vec![("milk".to_string(), false)]);

    let row = turn_row(dir.path(), &d);
    let tools = row["tools_json"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["name"], "calculator");
    assert_eq!(tools[1]["name"], "add_todo");
    assert!(tools
        .iter()
        .all(|t| t["ok"] == true && t["ms"].as_f64().unwrap() >= 0.0));
    assert_eq!(row["route"], "context");
    assert_eq!(row["response"], d["response"]);
}

#[test]
fn non_streamed_tool_calls_and_malformed_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let llm = llm_server(|n, body| match n {
        0 => completion(
            None,
            &[
                ("call_bad", "calculator", "{\"expression\": "),
                ("call_missing", "complete_todo", "{}"),
                ("call_nameless", "", "{}"),
            ],
        ),
        1 => {
            let results = tool_messages(body);
            assert_eq!(results.len(), 3, "{body}");
            completion(Some("Sorry, I could not work that out."), &[])
        }
        _ => completion(Some("unexpected"), &[]),
    });
    let events = chat(dir.path(), &llm, "check my todo list", &[]);
    assert_eq!(
        done(&events)["response"],
        "Sorry, I could not work that out."
    );
    let reqs = agent_requests(&llm);
    assert_eq!(reqs.len(), 2);
    let results = tool_messages(&reqs[1]);
    assert_eq!(results[0].0, "call_bad");
    assert!(
        results[0]
            .1
            .starts_with("Error: invalid arguments: arguments are not JSON"),
        "{results:?}"
    );
    assert_eq!(
        results[1].1,
        "Error: invalid arguments: missing the 'task' field"
    );
    assert!(results[2].1.contains("no name"), "{results:?}");
    let row = turn_row(dir.path(), &done(&events));
    let tools = row["tools_json"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert!(tools.iter().all(|t| t["ok"] == false));
    assert!(todo_titles(dir.path()).is_empty());
}

#[test]
fn tool_use_failed_is_retried_a_second_apart_then_answers() {
    let dir = tempfile::tempdir().unwrap();
    let times = Arc::new(Mutex::new(Vec::new()));
    let t = times.clone();
    let llm = llm_server(move |n, _| {
        t.lock().unwrap().push(Instant::now());
        match n {
            0 => Reply::json(
                400,
                r#"{"error":{"message":"Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.","type":"invalid_request_error","code":"tool_use_failed","failed_generation":"<function=calculator{\"expression\": 2+2}</function>"}}"#,
            ),
            _ => streamed_answer(&["Your list is empty."]),
        }
    });
    let events = chat(dir.path(), &llm, "what is on my todo list", &[]);
    assert_eq!(done(&events)["response"], "Your list is empty.");
    let times = times.lock().unwrap();
    assert_eq!(times.len(), 2);
    assert!(
        times[1] - times[0] >= Duration::from_millis(950),
        "{:?}",
        times[1] - times[0]
    );

    // Three failures in a row: a sentence, no crash, three attempts.
    let dir = tempfile::tempdir().unwrap();
    let llm = llm_server(|_, _| {
        Reply::json(
            400,
            r#"{"error":{"message":"Failed to call a function.","type":"invalid_request_error","code":"tool_use_failed"}}"#,
        )
    });
    let events = chat(dir.path(), &llm, "what is on my todo list", &[]);
    let error = events_of(&events, "error");
    assert_eq!(error.len(), 1, "{events:#?}");
    assert!(error[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("I had trouble using my tools"));
    assert_eq!(agent_requests(&llm).len(), 3);
}

#[test]
fn ten_useless_calls_end_with_the_limit_answer() {
    let dir = tempfile::tempdir().unwrap();
    let llm = llm_server(|n, _| {
        let id = format!("call_{n}");
        completion(None, &[(id.as_str(), "list_todos", "{}")])
    });
    let events = chat(dir.path(), &llm, "keep checking my todo list", &[]);
    let d = done(&events);
    assert!(
        d["response"]
            .as_str()
            .unwrap()
            .starts_with("I hit my limit"),
        "{d}"
    );
    assert_eq!(agent_requests(&llm).len(), 10);
    assert_eq!(events_of(&events, "thinking").len(), 10);
    let row = turn_row(dir.path(), &d);
    assert_eq!(row["tools_json"].as_array().unwrap().len(), 10);
}

#[test]
fn other_llm_errors_become_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let llm = llm_server(|_, _| {
        Reply::json(
            401,
            r#"{"error":{"message":"Invalid API Key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        )
    });
    let events = chat(dir.path(), &llm, "add eggs to my todo list", &[]);
    let error = events_of(&events, "error");
    assert_eq!(error.len(), 1);
    assert!(error[0]["message"]
        .as_str()
        .unwrap()
        .contains("GROQ_API_KEY"));
    assert!(todo_titles(dir.path()).is_empty());
}

// ---------------------------------------------------------------- Tavily

fn tavily_results(n: usize) -> String {
    let results: Vec<Value> = (1..=n)
        .map(|i| {
            json!({"title": format!("Result {i}"), "url": format!("https://example.com/{i}"),
                   "content": format!("{} {}", "word".repeat(100), i), "score": 0.9 - i as f64 / 100.0,
                   "raw_content": null})
        })
        .collect();
    json!({"query": "q", "follow_up_questions": null, "answer": null, "images": [],
           "results": results, "response_time": 0.42})
    .to_string()
}

#[test]
fn tavily_success_unauthorized_html_and_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        TestServer::start(
            |req: &Request| match req.json()["query"].as_str().unwrap_or("") {
                "lisbon weather" => Reply::json(200, &tavily_results(5)),
                "bad key" => Reply::json(
                    401,
                    r#"{"detail":{"error":"Unauthorized: missing or invalid API key."}}"#,
                ),
                "html" => Reply::bytes(
                    502,
                    "text/html",
                    b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                ),
                _ => Reply::json(200, "{}").piece(Piece::Stall(Duration::from_secs(5))),
            },
        );
    let base = server.url();
    let env = [
        ("TAVILY_API_KEY", "tvly-test-key"),
        ("TAVILY_BASE_URL", base.as_str()),
    ];
    let (code, out, err) = tool(
        dir.path(),
        &env,
        "web_search",
        r#"{"query":"lisbon weather"}"#,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("https://example.com/").count(), 3, "{out}");
    assert!(
        out.starts_with("1. Result 1\n   https://example.com/1\n   wordword"),
        "{out}"
    );
    assert!(out.lines().all(|l| l.chars().count() < 320), "{out}");
    let req = &server.requests()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/search")
    );
    assert_eq!(req.header("Authorization"), Some("Bearer tvly-test-key"));
    assert_eq!(req.json()["max_results"], 3);
    assert_eq!(req.json()["api_key"], "tvly-test-key");

    let (code, out, _) = tool(dir.path(), &env, "web_search", r#"{"query":"bad key"}"#);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Web search failed: Tavily refused the API key; check TAVILY_API_KEY."
    );
    let (code, out, _) = tool(dir.path(), &env, "web_search", r#"{"query":"html"}"#);
    assert_eq!(code, 1);
    assert!(out.contains("HTTP 502") && !out.contains("<html>"), "{out}");

    let config = dir.path().join("earshot.toml");
    std::fs::write(&config, "[tools]\ntimeout_ms = 1000\n").unwrap();
    let started = Instant::now();
    let mut cmd = earshot(dir.path());
    cmd.args([
        "--config",
        config.to_str().unwrap(),
        "tool",
        "web_search",
        r#"{"query":"slow"}"#,
    ])
    .env("TAVILY_API_KEY", "tvly-test-key")
    .env("TAVILY_BASE_URL", &base);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("did not answer in time"),
        "{}",
        stdout(&out)
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

// ---------------------------------------------------------------- Notion

/// A Notion API fake with the real JSON shapes: a database whose Status is
/// `status` or `select` (or missing), pages in memory.
struct NotionFake {
    server: TestServer,
    pages: Arc<Mutex<Vec<Value>>>,
}

fn rich_text(s: &str) -> Value {
    json!([{"type": "text", "text": {"content": s, "link": null},
            "annotations": {"bold": false, "italic": false, "strikethrough": false,
                            "underline": false, "code": false, "color": "default"},
            "plain_text": s, "href": null}])
}

/// A fake database shape: (done property, its type, the option new items get).
fn shape(kind: &str) -> (&'static str, &'static str, &'static str) {
    match kind {
        "status" => ("Status", "status", "To Do"),
        "select" => ("Status", "select", "To Do"),
        "status-default" => ("Status", "status", "Not started"),
        "select-custom" => ("Status", "select", "Open"),
        "checkbox" => ("Done", "checkbox", ""),
        _ => ("Priority", "number", ""),
    }
}

fn notion_error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({"object": "error", "status": status, "code": code, "message": message,
                "request_id": "8f2c4a9e-0000-0000-0000-000000000000"})
        .to_string(),
    )
}

impl NotionFake {
    fn start(status_kind: &'static str) -> Self {
        let pages: Arc<Mutex<Vec<Value>>> = Arc::new(Mutex::new(Vec::new()));
        let p = pages.clone();
        let server = TestServer::start(move |req: &Request| {
            if req.header("Authorization") != Some("Bearer secret_test")
                || req.header("Notion-Version") != Some("2022-06-28")
            {
                return notion_error(401, "unauthorized", "API token is invalid.");
            }
            let db = "d9824bdc-8445-4327-be8b-5b47500af6ce";
            let mut pages = p.lock().unwrap();
            match (req.method.as_str(), req.path.as_str()) {
                ("GET", path) if path == format!("/v1/databases/{db}") => {
                    let mut props = json!({
                        "Task": {"id": "title", "name": "Task", "type": "title", "title": {}},
                    });
                    let options = json!([
                        {"id": "a1", "name": "To Do", "color": "red"},
                        {"id": "a2", "name": "Done", "color": "green"}]);
                    match status_kind {
                        "status" => {
                            props["Status"] = json!({"id": "s%3D", "name": "Status", "type": "status",
                            "status": {"options": options, "groups": [
                                {"id": "g1", "name": "To-do", "color": "gray", "option_ids": ["a1"]},
                                {"id": "g2", "name": "Complete", "color": "green", "option_ids": ["a2"]}]}})
                        }
                        "select" => {
                            props["Status"] = json!({"id": "s%3D", "name": "Status", "type": "select",
                            "select": {"options": options}})
                        }
                        // A database made in Notion with its default Status.
                        "status-default" => {
                            props["Status"] = json!({"id": "s%3D", "name": "Status", "type": "status",
                            "status": {"options": [
                                {"id": "b1", "name": "Not started", "color": "default"},
                                {"id": "b2", "name": "In progress", "color": "blue"},
                                {"id": "b3", "name": "Done", "color": "green"}], "groups": [
                                {"id": "g1", "name": "To-do", "color": "gray", "option_ids": ["b1"]},
                                {"id": "g2", "name": "In progress", "color": "blue", "option_ids": ["b2"]},
                                {"id": "g3", "name": "Complete", "color": "green", "option_ids": ["b3"]}]}})
                        }
                        "select-custom" => {
                            props["Status"] = json!({"id": "s%3D", "name": "Status", "type": "select",
                            "select": {"options": [
                                {"id": "c1", "name": "Open", "color": "red"},
                                {"id": "c2", "name": "Finished", "color": "green"}]}})
                        }
                        "checkbox" => {
                            props["Done"] = json!({"id": "c", "name": "Done", "type": "checkbox", "checkbox": {}})
                        }
                        _ => {
                            props["Priority"] = json!({"id": "p", "name": "Priority", "type": "number", "number": {}})
                        }
                    }
                    Reply::json(
                        200,
                        &json!({"object": "database", "id": db,
                        "title": rich_text("To-Do List"), "properties": props, "archived": false,
                        "url": "https://www.notion.so/d9824bdc84454327be8b5b47500af6ce"})
                        .to_string(),
                    )
                }
                ("POST", path) if path == format!("/v1/databases/{db}/query") => {
                    let live: Vec<Value> = pages
                        .iter()
                        .filter(|p| p["archived"] == false)
                        .cloned()
                        .collect();
                    // Two results per page, so the client must follow cursors.
                    let start: usize = req.json()["start_cursor"]
                        .as_str()
                        .and_then(|c| c.strip_prefix("cursor-"))
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    let end = (start + 2).min(live.len());
                    let has_more = end < live.len();
                    let next = if has_more {
                        json!(format!("cursor-{end}"))
                    } else {
                        Value::Null
                    };
                    Reply::json(
                        200,
                        &json!({"object": "list", "results": live[start.min(end)..end],
                        "next_cursor": next, "has_more": has_more,
                        "type": "page_or_database", "page_or_database": {}})
                        .to_string(),
                    )
                }
                ("POST", "/v1/pages") => {
                    let body = req.json();
                    if body["parent"]["database_id"] != db {
                        return notion_error(404, "object_not_found", "Could not find database.");
                    }
                    let title = body["properties"]["Task"]["title"][0]["text"]["content"]
                        .as_str()
                        .unwrap_or("");
                    if title.contains("invalid") {
                        return notion_error(400, "validation_error", "body.properties.Task.title[0].text.content.length should be ≤ `2000`, instead was `2001`.");
                    }
                    let (prop, kind, open) = shape(status_kind);
                    let value = &body["properties"][prop];
                    let stored = if kind == "checkbox" {
                        if value["checkbox"] != false {
                            return notion_error(
                                400,
                                "validation_error",
                                "Done is expected to be checkbox.",
                            );
                        }
                        json!({"id": "c", "type": "checkbox", "checkbox": false})
                    } else {
                        if value[kind]["name"] != open {
                            return notion_error(
                                400,
                                "validation_error",
                                &format!(
                                    "Invalid status option. Status option \"{}\" does not exist.",
                                    value[kind]["name"]
                                ),
                            );
                        }
                        json!({"id": "s%3D", "type": kind, kind: {"id": "o1", "name": open, "color": "red"}})
                    };
                    let id = format!("59833787-2cf9-4fdf-8782-e53db20768{:02}", pages.len());
                    let page = json!({"object": "page", "id": id, "created_time": "2026-11-30T18:00:00.000Z",
                        "archived": false, "in_trash": false, "parent": {"type": "database_id", "database_id": db},
                        "properties": {
                            "Task": {"id": "title", "type": "title", "title": rich_text(title)},
                            prop: stored},
                        "url": "https://www.notion.so/x"});
                    pages.push(page.clone());
                    Reply::json(200, &page.to_string())
                }
                ("PATCH", path) if path.starts_with("/v1/pages/") => {
                    let id = &path["/v1/pages/".len()..];
                    let body = req.json();
                    let Some(page) = pages.iter_mut().find(|p| p["id"] == id) else {
                        return notion_error(404, "object_not_found", "Could not find page.");
                    };
                    if body.get("archived") == Some(&json!(true)) {
                        page["archived"] = json!(true);
                    }
                    let (prop, kind, _) = shape(status_kind);
                    if let Some(name) = body["properties"][prop][kind].get("name") {
                        page["properties"][prop][kind] =
                            json!({"id": "a2", "name": name, "color": "green"});
                    }
                    if let Some(ticked) = body["properties"][prop].get("checkbox") {
                        page["properties"][prop]["checkbox"] = ticked.clone();
                    }
                    Reply::json(200, &page.to_string())
                }
                _ => Reply::bytes(
                    404,
                    "text/html",
                    b"<!doctype html><html><body>Not found</body></html>",
                ),
            }
        });
        NotionFake { server, pages }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("NOTION_API_KEY", "secret_test".to_string()),
            (
                "NOTION_DATABASE_ID",
                "d9824bdc-8445-4327-be8b-5b47500af6ce".to_string(),
            ),
            ("NOTION_BASE_URL", self.server.url()),
        ]
    }

    fn writes(&self) -> Vec<(String, String, Value)> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.method == "PATCH" || r.path == "/v1/pages")
            .map(|r| (r.method.clone(), r.path.clone(), r.json()))
            .collect()
    }
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn notion_round_trip_with_status_and_select_properties() {
    for kind in ["status", "select"] {
        let dir = tempfile::tempdir().unwrap();
        let notion = NotionFake::start(kind);
        let env = notion.env();
        let env = env_refs(&env);
        let t = |name: &str, args: &str| tool(dir.path(), &env, name, args);
        assert_eq!(
            t("add_todo", r#"{"task":"Buy milk"}"#).1,
            "Added \"Buy milk\" to the to-do list."
        );
        assert_eq!(t("add_todo", r#"{"task":"Buy milk and eggs"}"#).0, 0);
        assert_eq!(t("add_todo", r#"{"task":"Call mom"}"#).0, 0);
        assert_eq!(
            t("list_todos", "{}").1,
            "Your to-do list has 3 items: Buy milk; Buy milk and eggs; Call mom."
        );
        // Three items came back over two query pages (cursor followed).
        assert!(notion
            .server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/query") && r.json()["start_cursor"] == "cursor-2"));
        // Ambiguous: asks, writes nothing.
        let writes_before = notion.writes().len();
        let (code, out, _) = t("complete_todo", r#"{"task":"milk"}"#);
        assert_eq!(code, 0);
        assert!(
            out.starts_with("Several to-dos match: Buy milk; Buy milk and eggs."),
            "{out}"
        );
        assert_eq!(notion.writes().len(), writes_before);
        // One part of an item that joins two things is not the item: it
        // is said back and nothing is written.
        let writes_before = notion.writes().len();
        assert_eq!(
            t("complete_todo", r#"{"task":"eggs"}"#).1,
            "\"Buy milk and eggs\" is one item on the list; say all of it."
        );
        assert_eq!(notion.writes().len(), writes_before);
        assert_eq!(
            t("complete_todo", r#"{"task":"milk and eggs"}"#).1,
            "Marked \"Buy milk and eggs\" as done."
        );
        assert_eq!(
            t("delete_todo", r#"{"task":"mom"}"#).1,
            "Deleted \"Call mom\" from the to-do list."
        );
        assert_eq!(
            t("list_todos", r#"{"include_done":true}"#).1,
            "Your to-do list has 1 item: Buy milk. Done: Buy milk and eggs."
        );
        assert_eq!(
            t("delete_todo", r#"{"task":"mom"}"#).1,
            "No to-do matches \"mom\"."
        );

        let writes = notion.writes();
        let (_, _, create) = &writes[0];
        assert_eq!(
            create["parent"]["database_id"],
            "d9824bdc-8445-4327-be8b-5b47500af6ce"
        );
        assert_eq!(
            create["properties"]["Task"]["title"][0]["text"]["content"],
            "Buy milk"
        );
        assert_eq!(
            create["properties"]["Status"],
            json!({kind: {"name": "To Do"}})
        );
        let patches: Vec<&(String, String, Value)> =
            writes.iter().filter(|w| w.0 == "PATCH").collect();
        assert_eq!(patches.len(), 2);
        // The second page created ("Buy milk and eggs") was completed.
        assert!(patches[0].1.ends_with("e53db2076801"), "{}", patches[0].1);
        assert_eq!(
            patches[0].2,
            json!({"properties": {"Status": {kind: {"name": "Done"}}}})
        );
        assert_eq!(patches[1].2, json!({"archived": true}));
        assert!(notion.pages.lock().unwrap()[2]["archived"] == true);
        // The local list was not touched.
        assert!(todo_titles(dir.path()).is_empty());
    }
}

/// Notion's own defaults and other shapes: the status maps onto whatever
/// the database has, and `doctor` names the mapping.
#[test]
fn notion_maps_default_status_custom_select_and_checkbox() {
    for (kind, created, completed, mapping) in [
        (
            "status-default",
            json!({"status": {"name": "Not started"}}),
            json!({"status": {"name": "Done"}}),
            "status property \"Status\": new items \"Not started\", done \"Done\"",
        ),
        (
            "select-custom",
            json!({"select": {"name": "Open"}}),
            json!({"select": {"name": "Finished"}}),
            "select property \"Status\": new items \"Open\", done \"Finished\"",
        ),
        (
            "checkbox",
            json!({"checkbox": false}),
            json!({"checkbox": true}),
            "checkbox property \"Done\": ticked is done",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let notion = NotionFake::start(kind);
        let env = notion.env();
        let env = env_refs(&env);
        let t = |name: &str, args: &str| tool(dir.path(), &env, name, args);
        assert_eq!(t("add_todo", r#"{"task":"Buy flour"}"#).0, 0, "{kind}");
        assert_eq!(t("add_todo", r#"{"task":"Call Ana"}"#).0, 0, "{kind}");
        assert_eq!(
            t("complete_todo", r#"{"task":"flour"}"#).1,
            "Marked \"Buy flour\" as done.",
            "{kind}"
        );
        assert_eq!(
            t("list_todos", r#"{"include_done":true}"#).1,
            "Your to-do list has 1 item: Call Ana. Done: Buy flour.",
            "{kind}"
        );
        let (prop, ..) = shape(kind);
        let writes = notion.writes();
        assert_eq!(writes[0].2["properties"][prop], created, "{kind}");
        let patch = writes.iter().find(|w| w.0 == "PATCH").unwrap();
        assert_eq!(patch.2, json!({"properties": {prop: completed}}), "{kind}");
        if kind == "checkbox" {
            // `doctor` says which mapping is in use (once: it probes much).
            let mut cmd = common::earshot(dir.path());
            cmd.args(["doctor", "--json"]);
            for (k, v) in &env {
                cmd.env(k, v);
            }
            let out = common::run(&mut cmd);
            let report: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
            let check = report["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "notion todos")
                .cloned()
                .unwrap_or_else(|| panic!("no notion line: {report}"));
            assert_eq!(check["status"], "ok", "{check}");
            assert_eq!(check["detail"], mapping, "{check}");
        } else {
            let names = earshot::tools::todos_notion::StatusNames::default();
            let map = earshot::tools::todos_notion::NotionTodos::new(
                &notion.server.url(),
                "secret_test",
                "d9824bdc-8445-4327-be8b-5b47500af6ce",
                std::time::Duration::from_secs(5),
            )
            .with_names(names)
            .mapping()
            .unwrap();
            assert_eq!(map.describe(), mapping, "{kind}");
        }
    }
}

#[test]
fn notion_errors_are_sentences_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A database with no status, select or checkbox property: clear
    // error, no page created.
    let notion = NotionFake::start("none");
    let env = notion.env();
    let (code, out, _) = tool(
        dir.path(),
        &env_refs(&env),
        "add_todo",
        r#"{"task":"Buy milk"}"#,
    );
    assert_eq!(code, 1);
    assert!(out.contains("has no \"Status\" property"), "{out}");
    assert!(notion.writes().is_empty());

    // Notion's validation error body is read.
    let notion = NotionFake::start("status");
    let env = notion.env();
    let (code, out, _) = tool(
        dir.path(),
        &env_refs(&env),
        "add_todo",
        r#"{"task":"an invalid one"}"#,
    );
    assert_eq!(code, 1);
    assert!(
        out.starts_with("Notion rejected the change: body.properties.Task"),
        "{out}"
    );
    assert!(notion.pages.lock().unwrap().is_empty());

    // A wrong key and a wrong database id.
    let mut bad = notion.env();
    bad[0].1 = "secret_wrong".into();
    let (_, out, _) = tool(dir.path(), &env_refs(&bad), "list_todos", "{}");
    assert_eq!(out, "Notion refused the API key; check NOTION_API_KEY");
    let mut bad = notion.env();
    bad[1].1 = "00000000-0000-0000-0000-000000000000".into();
    let (_, out, _) = tool(dir.path(), &env_refs(&bad), "list_todos", "{}");
    assert!(out.starts_with("Notion cannot find the database"), "{out}");

    // A server answering HTML: a short sentence, no markup.
    let html = TestServer::start(|_: &Request| {
        Reply::bytes(
            502,
            "text/html",
            b"<html><head><title>502</title></head><body>Bad gateway</body></html>",
        )
    });
    let mut env = notion.env();
    env[2].1 = html.url();
    let (code, out, _) = tool(dir.path(), &env_refs(&env), "list_todos", "{}");
    assert_eq!(code, 1);
    assert!(out.contains("HTTP 502") && !out.contains('<'), "{out}");
}

#[test]
fn local_todos_through_the_agent_and_the_tool_command() {
    let dir = tempfile::tempdir().unwrap();
    let t = |name: &str, args: &str| tool(dir.path(), &[], name, args);
    assert_eq!(t("add_todo", r#"{"task":"water the plants"}"#).0, 0);
    assert_eq!(t("add_todo", r#"{"task":"   "}"#).0, 2);
    assert_eq!(
        todo_titles(dir.path()),
        vec![("water the plants".to_string(), false)]
    );
    // The agent completes it by keyword.
    let llm = llm_server(|n, _| match n {
        0 => completion(None, &[("call_1", "complete_todo", r#"{"task":"plants"}"#)]),
        _ => completion(Some("Done, the plants are ticked off."), &[]),
    });
    let events = chat(dir.path(), &llm, "mark plants done on my todo list", &[]);
    assert_eq!(
        done(&events)["response"],
        "Done, the plants are ticked off."
    );
    assert_eq!(
        tool_messages(&agent_requests(&llm)[1])[0].1,
        "Marked \"water the plants\" as done."
    );
    assert_eq!(
        todo_titles(dir.path()),
        vec![("water the plants".to_string(), true)]
    );
}

#[test]
fn agent_uses_notion_and_survives_a_hanging_search() {
    let dir = tempfile::tempdir().unwrap();
    let notion = NotionFake::start("select");
    let tavily = TestServer::start(|_: &Request| {
        Reply::json(200, "{").piece(Piece::Stall(Duration::from_secs(6)))
    });
    let config = dir.path().join("earshot.toml");
    std::fs::write(&config, "[tools]\ntimeout_ms = 1000\n").unwrap();
    let llm = llm_server(|n, _| match n {
        0 => completion(
            None,
            &[
                ("call_add", "add_todo", r#"{"task":"bread"}"#),
                ("call_web", "web_search", r#"{"query":"bread prices"}"#),
            ],
        ),
        _ => completion(Some("I added bread; the web search timed out."), &[]),
    });
    let mut env: Vec<(&str, String)> = notion.env();
    env.push(("TAVILY_API_KEY", "tvly-test-key".into()));
    env.push(("TAVILY_BASE_URL", tavily.url()));
    let mut cmd = earshot(dir.path());
    cmd.args(["--config", config.to_str().unwrap()]);
    cmd.args(["chat", "add bread to my notion todo list", "--json"])
        .env("LLM_BASE_URL", format!("{}/openai/v1", llm.url()))
        .env("GROQ_API_KEY", "gsk_test")
        .env("GROQ_AGENT_MODEL", "agent-test")
        .env("EARSHOT_MODE", "graph");
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let d = done(&events);
    assert_eq!(d["response"], "I added bread; the web search timed out.");
    let results = tool_messages(&agent_requests(&llm)[1]);
    assert_eq!(results[0].1, "Added \"bread\" to the to-do list.");
    assert!(
        results[1].1.contains("did not answer in time"),
        "{results:?}"
    );
    // Written to Notion (select shape), not to the local list.
    let created = notion.writes();
    assert_eq!(created.len(), 1);
    assert_eq!(
        created[0].2["properties"]["Status"],
        json!({"select": {"name": "To Do"}})
    );
    assert!(todo_titles(dir.path()).is_empty());
    let row = turn_row(dir.path(), &d);
    let tools = row["tools_json"].as_array().unwrap();
    assert_eq!(
        (tools[0]["ok"].clone(), tools[1]["ok"].clone()),
        (json!(true), json!(false))
    );
    // Abandoned at the HTTP deadline (timeout 1000 ms − 250 ms), not 6 s later.
    let ms = tools[1]["ms"].as_f64().unwrap();
    assert!((500.0..2000.0).contains(&ms), "{tools:?}");
}

#[test]
fn an_html_error_page_from_the_model_server_is_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let llm = llm_server(|_, _| {
        Reply::bytes(
            502,
            "text/html",
            b"<html><body><h1>502 Bad Gateway</h1></body></html>",
        )
    });
    let events = chat(dir.path(), &llm, "what is on my todo list", &[]);
    let error = events_of(&events, "error");
    assert_eq!(error.len(), 1, "{events:#?}");
    let message = error[0]["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 502") && !message.contains('<'),
        "{message}"
    );
}

/// Architecture point 5: one to-do backend for the intent tree and the
/// agent. With Notion configured, a spoken todo (answered on device by the
/// tree, no LLM) and the agent's `add_todo` land in the same Notion list,
/// and nothing is written to the local list.
#[test]
fn a_spoken_todo_and_add_todo_share_the_notion_list() {
    let dir = tempfile::tempdir().unwrap();
    let notion = NotionFake::start("status");
    let env = notion.env();
    let env = env_refs(&env);
    let mut cmd = earshot(dir.path());
    cmd.args(["chat", "add oat milk to my to do list", "--json"])
        .env("EARSHOT_MODE", "tree")
        // No LLM at all: the tree must answer on device.
        .env("LLM_BASE_URL", "http://127.0.0.1:9/v1");
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let done: Value = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "done")
        .unwrap_or_else(|| panic!("no done event: {}", stdout(&out)));
    assert_eq!(done["route"], "tree", "{done}");
    assert_eq!(done["actions"], json!(["todo_add"]), "{done}");
    let (code, _, err) = tool(
        dir.path(),
        &env,
        "add_todo",
        r#"{"task":"Call the plumber"}"#,
    );
    assert_eq!(code, 0, "{err}");
    let created: Vec<String> = notion
        .writes()
        .into_iter()
        .filter(|(method, path, _)| method == "POST" && path == "/v1/pages")
        .map(|(_, _, body)| {
            body["properties"]["Task"]["title"][0]["text"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(created.len(), 2, "{created:?}");
    assert!(
        created[0].to_lowercase().contains("oat milk"),
        "{created:?}"
    );
    assert_eq!(created[1], "Call the plumber");
    // The local list stayed empty: both went to Notion.
    let (code, listed, err) = tool(dir.path(), &env, "list_todos", "{}");
    assert_eq!(code, 0, "{err}");
    assert!(
        listed.contains("oat milk") && listed.contains("Call the plumber"),
        "{listed}"
    );
    let db = rusqlite::Connection::open(dir.path().join("earshot.db")).unwrap();
    let local: i64 = db
        .query_row("SELECT COUNT(*) FROM todos", [], |r| r.get(0))
        .unwrap_or(0);
    assert_eq!(local, 0, "the spoken todo went to the local list");
}
