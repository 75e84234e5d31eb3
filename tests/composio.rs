//! Apps through Composio (issue 18) end to end: the real binary against a
//! loopback fake of our own that speaks Composio's REST API v3.1 Tool
//! Router format (`x-api-key`; session, search with `tool_schemas` in
//! their camelCase `hasFullSchema` / `schemaRef` form, `GET /tools/{slug}`
//! with `input_parameters`, execute, link), and its bad days: 401, 429 with
//! `Retry-After`, 500 with an HTML page, malformed, cut-short, huge and
//! slow replies. A scripted LLM turn searches, executes and connects.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::http::{Piece, Reply, Request, TestServer};
use serde_json::{json, Value};

const KEY: &str = "ak_test_planted_key";

/// What the fake remembers between requests.
#[derive(Default)]
struct Fake {
    sessions: Vec<String>,
    /// Sessions Composio no longer accepts.
    expired: Vec<String>,
    connected: Vec<String>,
    /// Answer the next search with this fault.
    fault: Option<&'static str>,
    /// A 429 with Retry-After: 1 was sent already.
    limited_once: bool,
}

fn error(status: u16, message: &str, fix: &str) -> Reply {
    Reply::json(
        status,
        &json!({"error": {"message": message, "status": status, "request_id": "req_42", "suggested_fix": fix}}).to_string(),
    )
}

fn composio(fake: Arc<Mutex<Fake>>) -> TestServer {
    TestServer::start(move |req: &Request| {
        let mut f = fake.lock().unwrap();
        if req.header("x-api-key") != Some(KEY) {
            return error(
                401,
                "Invalid API key",
                "Check your API key in the dashboard.",
            );
        }
        let path = req.path.as_str();
        if req.method == "POST" && path == "/api/v3.1/tool_router/session" {
            let body = req.json();
            assert_eq!(body["workbench"], json!({"enable": false}), "{body}");
            assert!(
                body["user_id"].is_string() && body["toolkits"]["enable"].is_array(),
                "{body}"
            );
            let id = format!("trs_{}", f.sessions.len() + 1);
            f.sessions.push(id.clone());
            return Reply::json(
                201,
                &json!({"session_id": id, "mcp": {"type": "http", "url": format!("https://backend.composio.dev/tool_router/{id}/mcp")},
                        "tool_router_tools": ["COMPOSIO_SEARCH_TOOLS"], "config": {"user_id": body["user_id"]}})
                .to_string(),
            );
        }
        if req.method == "GET" && path == "/api/v3.1/tools/GOOGLECALENDAR_CREATE_EVENT" {
            return Reply::json(
                200,
                &json!({"slug": "GOOGLECALENDAR_CREATE_EVENT", "name": "Create Event", "toolkit": {"slug": "googlecalendar"},
                        "description": "Create an event in a Google Calendar.",
                        "input_parameters": {"type": "object", "properties": {"summary": {"type": "string"}, "start_datetime": {"type": "string"}},
                                              "required": ["summary", "start_datetime"]},
                        "output_parameters": {}})
                .to_string(),
            );
        }
        let Some(rest) = path.strip_prefix("/api/v3.1/tool_router/session/") else {
            return error(404, "Not found", "");
        };
        let (id, action) = rest.split_once('/').unwrap();
        if !f.sessions.iter().any(|s| s == id) || f.expired.iter().any(|s| s == id) {
            return error(
                404,
                &format!("Tool router session {id} not found or expired"),
                "Create a new session.",
            );
        }
        let body = req.json();
        match action {
            "search" => {
                assert!(body["queries"][0]["use_case"].is_string(), "{body}");
                match f.fault.take() {
                    Some("429") if !f.limited_once => {
                        f.limited_once = true;
                        f.fault = Some("429");
                        return error(429, "Rate limit exceeded", "").header("Retry-After", "1");
                    }
                    Some("429") => {}
                    Some("429long") => {
                        return error(429, "Rate limit exceeded", "").header("Retry-After", "120")
                    }
                    Some("500") => return Reply::bytes(
                        500,
                        "text/html",
                        b"<html><body><h1>500 Internal Server Error</h1><p>nginx</p></body></html>",
                    ),
                    Some("html200") => {
                        return Reply::bytes(
                            200,
                            "text/html",
                            b"<!doctype html><html><body>Maintenance</body></html>",
                        )
                    }
                    Some("malformed") => {
                        return Reply::json(200, r#"{"results": [{"primary_tool_slugs": ["GMAIL_"#)
                    }
                    Some("truncated") => {
                        return Reply::new(200)
                            .header("Content-Type", "application/json")
                            .header("Content-Length", "5000")
                            .streamed()
                            .piece(Piece::Bytes(
                                br#"{"results": [], "tool_schemas": {"#.to_vec(),
                            ))
                            .piece(Piece::Close)
                    }
                    Some("huge") => {
                        let big = format!(
                            r#"{{"results": [], "tool_schemas": {{}}, "padding": "{}"}}"#,
                            "x".repeat(3 * 1024 * 1024)
                        );
                        return Reply::json(200, &big);
                    }
                    Some("slow") => {
                        return Reply::new(200)
                            .header("Content-Type", "application/json")
                            .streamed()
                            .piece(Piece::Stall(Duration::from_secs(30)))
                    }
                    _ => {}
                }
                Reply::json(
                    200,
                    &json!({
                        "results": [{
                            "index": 1, "use_case": body["queries"][0]["use_case"],
                            "primary_tool_slugs": ["GMAIL_FETCH_EMAILS"],
                            "related_tool_slugs": ["GOOGLECALENDAR_CREATE_EVENT", "GMAIL_LIST_LABELS"],
                            "toolkits": ["gmail", "googlecalendar"],
                            "plan_id": "plan_1", "difficulty": "easy"
                        }],
                        "tool_schemas": {
                            "GMAIL_FETCH_EMAILS": {
                                "tool_slug": "GMAIL_FETCH_EMAILS", "toolkit": "gmail",
                                "description": "Fetches a list of email messages from a Gmail account, supporting filtering, pagination and optional full content retrieval.",
                                "hasFullSchema": true,
                                "input_schema": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}}, "required": ["query"]}
                            },
                            "GOOGLECALENDAR_CREATE_EVENT": {
                                "tool_slug": "GOOGLECALENDAR_CREATE_EVENT", "toolkit": "googlecalendar",
                                "description": "Create an event in a Google Calendar.",
                                "hasFullSchema": false,
                                "schemaRef": {"args": {"tool_slugs": ["GOOGLECALENDAR_CREATE_EVENT"]}, "message": "Fetch the full schema", "tool": "COMPOSIO_GET_TOOL_SCHEMAS"}
                            }
                        },
                        "toolkit_connection_statuses": [{"toolkit": "gmail", "has_active_connection": f.connected.iter().any(|c| c == "gmail")}],
                        "next_steps_guidance": ["Connect gmail first"],
                        "success": true, "error": null
                    })
                    .to_string(),
                )
            }
            "execute" => {
                let slug = body["tool_slug"].as_str().unwrap_or("");
                assert!(body["arguments"].is_object(), "{body}");
                let toolkit = slug.split('_').next().unwrap_or("").to_lowercase();
                if slug == "GITHUB_GET_REPO" {
                    return Reply::json(
                        200,
                        &json!({"data": {}, "error": "Repository not found", "log_id": "log_2"})
                            .to_string(),
                    );
                }
                if !f.connected.contains(&toolkit) {
                    return error(
                        400,
                        &format!("No active connection found for toolkit {toolkit} and user"),
                        "Authorize the toolkit with a Connect Link.",
                    );
                }
                let messages: Vec<Value> = (0..7)
                    .map(|i| json!({
                        "messageId": format!("18c{i}"), "threadId": format!("t{i}"),
                        "sender": "Priya Shah <priya@example.org>", "subject": format!("Dinner plan {i}"),
                        "messageText": "Let's meet at seven. ".repeat(30),
                        "preview": {"body": "Let's meet", "subject": "Dinner"},
                        "display_url": format!("https://mail.google.com/mail/u/0/#inbox/18c{i}"),
                        "labelIds": ["INBOX", "UNREAD", "CATEGORY_PERSONAL", "IMPORTANT", "STARRED", "Label_9"]
                    }))
                    .collect();
                Reply::json(200, &json!({"data": {"messages": messages, "nextPageToken": "abc", "resultSizeEstimate": 201}, "error": null, "log_id": "log_1"}).to_string())
            }
            "link" => {
                let toolkit = body["toolkit"].as_str().unwrap_or("").to_string();
                let n = f.connected.len() + 1;
                // The person opens the link and authorises: the fake marks
                // the toolkit connected.
                f.connected.push(toolkit);
                Reply::json(
                    201,
                    &json!({"link_token": format!("lt_{n}"), "redirect_url": format!("https://connect.composio.dev/link/lt_{n}"), "connected_account_id": format!("ca_{n}")}).to_string(),
                )
            }
            _ => error(404, "Not found", ""),
        }
    })
}

fn base_env(server: &TestServer) -> Vec<(&'static str, String)> {
    vec![
        ("COMPOSIO_API_KEY", KEY.to_string()),
        ("COMPOSIO_BASE_URL", server.url()),
        ("COMPOSIO_TOOLKITS", "gmail,googlecalendar".into()),
    ]
}

fn cmd(dir: &Path, env: &[(&'static str, String)], args: &[&str]) -> (i32, String, String) {
    let mut c = common::earshot(dir);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = common::run(&mut c);
    (
        out.status.code().unwrap_or(-1),
        common::stdout(&out).trim_end().to_string(),
        common::stderr(&out).trim_end().to_string(),
    )
}

#[test]
fn search_execute_and_connect_through_the_binary() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let server = composio(fake.clone());
    let dir = tempfile::tempdir().unwrap();
    let env = base_env(&server);
    let d = dir.path();

    let (code, out, err) = cmd(
        d,
        &env,
        &[
            "tool",
            "composio_search",
            r#"{"query": "read my latest gmail"}"#,
        ],
    );
    assert_eq!(code, 0, "{out} {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("GMAIL_FETCH_EMAILS (gmail): Fetches a list of email messages")
            && lines[0].ends_with("| required: query"),
        "{out}"
    );
    assert_eq!(lines[1], "GOOGLECALENDAR_CREATE_EVENT (googlecalendar): Create an event in a Google Calendar. | required: summary, start_datetime");
    assert_eq!(lines[2], "GMAIL_LIST_LABELS");
    // The session was made once, with the toolkits, and is reused from the
    // database by the next process.
    cmd(
        d,
        &env,
        &["tool", "composio_search", r#"{"query": "calendar"}"#],
    );
    assert_eq!(fake.lock().unwrap().sessions, ["trs_1"]);
    let reqs = server.requests();
    let create = reqs
        .iter()
        .find(|r| r.path == "/api/v3.1/tool_router/session")
        .unwrap();
    assert_eq!(
        create.json()["toolkits"],
        json!({"enable": ["gmail", "googlecalendar"]})
    );
    assert_eq!(create.json()["user_id"], "user-1");
    assert!(reqs.iter().all(|r| r.header("x-api-key") == Some(KEY)));
    assert_eq!(
        reqs.iter()
            .find(|r| r.path.ends_with("/search"))
            .unwrap()
            .json(),
        json!({"queries": [{"use_case": "read my latest gmail"}]})
    );
    // The missing schema was fetched once per process at most.
    assert_eq!(reqs.iter().filter(|r| r.method == "GET").count(), 2);

    // Not connected: a 400 that tells the model to connect, not retry.
    let (code, out, _) = cmd(
        d,
        &env,
        &[
            "tool",
            "composio_execute",
            r#"{"tool_slug": "GMAIL_FETCH_EMAILS", "arguments": {"query": "is:unread"}}"#,
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(out, "The user's Gmail account is not connected yet. Do not retry this tool: call composio_connect with toolkit \"gmail\" so they get a link.");

    let (code, out, _) = cmd(
        d,
        &env,
        &["tool", "composio_connect", r#"{"toolkit": "gmail"}"#],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("I've put a link to connect Gmail in the earshot app."),
        "{out}"
    );
    let (_, links, _) = cmd(d, &env, &["apps", "links", "--json"]);
    let links: Value = serde_json::from_str(&links).unwrap();
    assert_eq!(links.as_array().unwrap().len(), 1, "{links}");
    assert_eq!(links[0]["toolkit"], "gmail");
    assert_eq!(links[0]["url"], "https://connect.composio.dev/link/lt_1");
    assert!(links[0]["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(links[0].as_object().unwrap().len(), 3);

    // Connected: arguments as a string holding JSON are accepted too; the
    // data is compacted.
    let (code, out, _) = cmd(
        d,
        &env,
        &[
            "tool",
            "composio_execute",
            r#"{"tool_slug": "GMAIL_FETCH_EMAILS", "arguments": "{\"query\": \"is:unread\"}"}"#,
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.chars().count() <= 2000, "{}", out.chars().count());
    assert!(
        !out.contains("display_url") && !out.contains("mail.google.com"),
        "{out}"
    );
    assert!(
        out.contains("Priya Shah") && out.contains("resultSizeEstimate")
            || out.contains("characters in all"),
        "{out}"
    );
    let data: Option<Value> = serde_json::from_str(&out).ok();
    if let Some(data) = data {
        assert_eq!(data["messages"].as_array().unwrap().len(), 6);
        assert_eq!(data["messages"][5], "...(2 more items)");
    }
    // The link is used now.
    let (_, links, _) = cmd(d, &env, &["apps", "links", "--json"]);
    assert_eq!(links, "[]");

    // config show masks the key.
    let (_, shown, _) = cmd(d, &env, &["config", "show"]);
    assert!(
        shown.contains("composio.api_key") && !shown.contains(KEY),
        "{shown}"
    );

    // A 200 with `error` set is one sentence.
    let (code, out, _) = cmd(
        d,
        &env,
        &[
            "tool",
            "composio_execute",
            r#"{"tool_slug": "GITHUB_GET_REPO", "arguments": {}}"#,
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "The app tool GITHUB_GET_REPO failed: Repository not found"
    );
}

#[test]
fn a_rejected_session_is_created_once_again() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let server = composio(fake.clone());
    let dir = tempfile::tempdir().unwrap();
    let env = base_env(&server);
    let (code, _, _) = cmd(
        dir.path(),
        &env,
        &["tool", "composio_search", r#"{"query": "x"}"#],
    );
    assert_eq!(code, 0);
    fake.lock().unwrap().expired.push("trs_1".into());
    let (code, out, _) = cmd(
        dir.path(),
        &env,
        &["tool", "composio_search", r#"{"query": "x"}"#],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(fake.lock().unwrap().sessions, ["trs_1", "trs_2"]);
    // And the new one is kept.
    cmd(
        dir.path(),
        &env,
        &["tool", "composio_search", r#"{"query": "x"}"#],
    );
    assert_eq!(fake.lock().unwrap().sessions.len(), 2);
}

#[test]
fn bad_replies_are_one_sentence_in_bounded_time() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let server = composio(fake.clone());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("earshot.toml"),
        "[composio]\ntimeout_ms = 1500\n",
    )
    .unwrap();
    let env = base_env(&server);
    let search = |env: &[(&'static str, String)]| {
        cmd(
            dir.path(),
            env,
            &[
                "--config",
                "earshot.toml",
                "tool",
                "composio_search",
                r#"{"query": "x"}"#,
            ],
        )
    };

    let mut wrong = env.clone();
    wrong[0].1 = "ak_wrong_planted".into();
    let (code, out, err) = search(&wrong);
    assert_eq!(
        (code, out.as_str()),
        (
            1,
            "App search failed: Composio refused the API key; check COMPOSIO_API_KEY."
        ),
        "{err}"
    );
    assert!(!format!("{out}{err}").contains("planted"));

    for (fault, want) in [
        ("429long", "App search failed: Composio is limiting requests; try again in 60 seconds."),
        ("500", "App search failed: Composio answered HTTP 500: an HTML page instead of JSON (a proxy or outage page?)"),
        ("html200", "App search failed: Composio sent a reply that could not be read (an HTML page instead of JSON)."),
        ("malformed", "App search failed: Composio sent a reply that could not be read (JSON that is cut short or malformed)."),
        ("huge", "App search failed: Composio sent a reply that could not be read (larger than 1024 KB)."),
    ] {
        fake.lock().unwrap().fault = Some(fault);
        let (code, out, err) = search(&env);
        assert_eq!((code, out.as_str()), (1, want), "{fault}: {err}");
    }
    fake.lock().unwrap().fault = Some("truncated");
    let (code, out, _) = search(&env);
    assert!(
        code == 1
            && out.starts_with("App search failed: Composio sent a reply that could not be read"),
        "{out}"
    );

    // A slow server: our deadline, not the registry's.
    fake.lock().unwrap().fault = Some("slow");
    let started = Instant::now();
    let (code, out, _) = search(&env);
    assert_eq!(
        (code, out.as_str()),
        (1, "App search failed: Composio did not answer in time.")
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // A short Retry-After is waited once, then the search goes through.
    fake.lock().unwrap().fault = Some("429");
    let (code, out, _) = search(&env);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("GMAIL_FETCH_EMAILS"));
    // Nothing half-stored: still the one session.
    assert_eq!(fake.lock().unwrap().sessions, ["trs_1"]);
}

/// A chat-completions reply for the scripted agent.
fn completion(content: Option<&str>, calls: &[(&str, &str, &str)]) -> Reply {
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
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
            "id": "chatcmpl-test", "object": "chat.completion", "created": 1_764_000_000, "model": "agent-test",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string(),
    )
}

fn last_tool_result(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// The model searches, executes (not connected), connects; the link
/// reaches the turn's event stream and `earshot apps links`.
#[test]
fn a_scripted_turn_searches_executes_and_connects() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let server = composio(fake.clone());
    let turns = Arc::new(AtomicUsize::new(0));
    let seen = turns.clone();
    let results = Arc::new(Mutex::new(Vec::new()));
    let log = results.clone();
    let llm = TestServer::start(move |req: &Request| {
        let body = req.json();
        if body.get("tools").is_none() {
            return completion(Some("context"), &[]);
        }
        let offered: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert!(
            offered.contains(&"composio_search") && offered.contains(&"composio_connect"),
            "{offered:?}"
        );
        let n = seen.fetch_add(1, Ordering::SeqCst);
        if n > 0 {
            log.lock().unwrap().push(last_tool_result(&body));
        }
        match n {
            0 => completion(
                None,
                &[(
                    "c1",
                    "composio_search",
                    r#"{"query": "fetch my latest gmail"}"#,
                )],
            ),
            1 => completion(
                None,
                &[(
                    "c2",
                    "composio_execute",
                    r#"{"tool_slug": "GMAIL_FETCH_EMAILS", "arguments": {"query": "newer_than:1d"}}"#,
                )],
            ),
            2 => completion(
                None,
                &[("c3", "composio_connect", r#"{"toolkit": "gmail"}"#)],
            ),
            _ => completion(
                Some("I've put a link to connect Gmail in the earshot app."),
                &[],
            ),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut c = common::earshot(dir.path());
    c.args(["chat", "check my gmail", "--json"])
        .env("LLM_BASE_URL", format!("{}/openai/v1", llm.url()))
        .env("GROQ_API_KEY", "gsk_test")
        .env("GROQ_AGENT_MODEL", "agent-test")
        .env("EARSHOT_MODE", "graph")
        .env("EARSHOT_MODELS_DIR", dir.path().join("no-models"));
    for (k, v) in base_env(&server) {
        c.env(k, v);
    }
    let out = common::run(&mut c);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let events: Vec<Value> = common::stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "content")
        .map(|e| e["data"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        said.trim(),
        "I've put a link to connect Gmail in the earshot app."
    );
    let link = events
        .iter()
        .find(|e| e["type"] == "event" && e["event"] == "app_link")
        .unwrap_or_else(|| panic!("no app_link event in {events:#?}"));
    assert_eq!(link["data"]["toolkit"], "gmail");
    assert_eq!(
        link["data"]["url"],
        "https://connect.composio.dev/link/lt_1"
    );
    let results = results.lock().unwrap().clone();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains("GMAIL_FETCH_EMAILS (gmail)"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("call composio_connect with toolkit \"gmail\""),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("I've put a link to connect Gmail in the earshot app."),
        "{}",
        results[2]
    );
    let (_, links, _) = cmd(dir.path(), &base_env(&server), &["apps", "links"]);
    assert!(
        links.contains("Gmail") && links.contains("https://connect.composio.dev/link/lt_1"),
        "{links}"
    );
}

#[test]
fn doctor_makes_a_session_or_names_the_key() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let server = composio(fake.clone());
    let dir = tempfile::tempdir().unwrap();
    let line = |env: &[(&'static str, String)]| {
        let mut env = env.to_vec();
        env.push((
            "EARSHOT_MODELS_DIR",
            dir.path().join("no-models").display().to_string(),
        ));
        let (_, out, _) = cmd(dir.path(), &env, &["doctor", "--json"]);
        assert!(!out.contains("planted"), "the key leaked: {out}");
        let report: Value = serde_json::from_str(&out).unwrap();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "composio")
            .cloned()
            .unwrap()
    };
    let ok = line(&base_env(&server));
    assert_eq!(ok["status"], "ok", "{ok}");
    assert!(
        ok["detail"]
            .as_str()
            .unwrap()
            .contains("session created (gmail, googlecalendar)"),
        "{ok}"
    );
    let mut wrong = base_env(&server);
    wrong[0].1 = "ak_wrong_planted".into();
    let bad = line(&wrong);
    assert_eq!(bad["status"], "fail", "{bad}");
    assert!(
        bad["fix"].as_str().unwrap().contains("COMPOSIO_API_KEY"),
        "{bad}"
    );
    let off = line(&[]);
    assert_eq!(off["status"], "ok");
    assert!(off["detail"].as_str().unwrap().starts_with("off"), "{off}");
}
