//! Apps through Composio (issue 18, the seed's tool table): three small
//! tools instead of Composio's own meta tools, so the schemas stay at
//! ~150 tokens — `composio_search` (find app tools for a request),
//! `composio_execute` (run one by slug) and `composio_connect` (a link that
//! authorises a toolkit such as Gmail). Offered only when
//! `COMPOSIO_API_KEY` is set. The wire format is `composio_api.rs`.
//!
//! A voice device cannot show a link: `composio_connect` stores it in the
//! state database (`earshot apps links`, any process), hands it to the
//! turn as an `app_link` event (chat `--json`, the API's SSE stream) and
//! tells the model to say it was put in the earshot app.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::composio_api::{self, ComposioApi, ComposioError};
use super::http::one_line;
use super::{Tool, ToolError, ToolOutput, ToolRegistry, ToolsConfig};
use crate::store::Store;

/// The Composio tool names (in `tools::TOOLS`).
pub const NAMES: &[&str] = &["composio_search", "composio_execute", "composio_connect"];

/// Most tools a search answers with.
pub const MAX_TOOLS: usize = 10;
/// Characters of each tool description kept.
const MAX_DESC: usize = 120;
/// Longest execute result handed to the model.
pub const MAX_RESULT: usize = 2000;
/// Longest string inside a result.
const MAX_STR: usize = 200;
/// Items of a list kept (plus a count of the rest).
const MAX_ITEMS: usize = 5;

/// `[composio]`. The key may sit in the file, but prefer the environment
/// (`COMPOSIO_API_KEY`); `Debug` and `config show` never print it.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ComposioConfig {
    /// `COMPOSIO_API_KEY`; empty = no app tools.
    pub api_key: String,
    /// `COMPOSIO_BASE_URL`.
    pub base_url: String,
    /// `COMPOSIO_TOOLKITS`: the toolkits a session may use, comma-separated
    /// (e.g. `gmail,googlecalendar,github`); empty = Composio's default.
    pub toolkits: String,
    /// Longest one Composio request may take.
    pub timeout_ms: u64,
}

impl Default for ComposioConfig {
    fn default() -> Self {
        Self {
            api_key: String::new(),
            base_url: "https://backend.composio.dev".into(),
            toolkits: String::new(),
            timeout_ms: 4000,
        }
    }
}

impl std::fmt::Debug for ComposioConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exhaustive, so a new field has to be placed here (secret or not).
        let Self {
            api_key: _,
            base_url,
            toolkits,
            timeout_ms,
        } = self;
        f.debug_struct("ComposioConfig")
            .field("api_key", &"***")
            .field("base_url", base_url)
            .field("toolkits", toolkits)
            .field("timeout_ms", timeout_ms)
            .finish()
    }
}

impl ComposioConfig {
    /// Whether the key is set.
    pub fn configured(&self) -> bool {
        !self.api_key.trim().is_empty()
    }

    /// The toolkit slugs, lower-case, no empties.
    pub fn toolkit_list(&self) -> Vec<String> {
        self.toolkits
            .split(',')
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .collect()
    }
}

/// Register the enabled Composio tools when the key is set; else each
/// answers with the sentence naming the key.
pub fn offer(
    registry: &mut ToolRegistry,
    tools: &ToolsConfig,
    cfg: &ComposioConfig,
    user_id: &str,
    store: &Store,
) {
    let enabled = |name: &str| tools.enabled.iter().any(|e| e == name);
    if !cfg.configured() {
        for name in NAMES {
            if enabled(name) {
                registry.mark_unavailable(
                    name,
                    "App tools are unavailable: no COMPOSIO_API_KEY is set.",
                );
            }
        }
        return;
    }
    let api = ComposioApi::new(cfg, user_id, store.clone());
    for name in NAMES {
        if enabled(name) {
            registry.register(Arc::new(ComposioTool {
                name,
                api: api.clone(),
            }));
        }
    }
}

struct ComposioTool {
    name: &'static str,
    api: ComposioApi,
}

fn text_arg(args: &Value, key: &str) -> Result<String, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= 500 => {
            Ok(s.trim().to_string())
        }
        Some(Value::String(s)) if !s.trim().is_empty() => {
            Err(ToolError::BadArguments(format!("{key} is too long")))
        }
        _ => Err(ToolError::BadArguments(format!("{key} (text) is required"))),
    }
}

fn failed(e: ComposioError) -> ToolError {
    ToolError::Failed(e.to_string())
}

impl Tool for ComposioTool {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        match self.name {
            "composio_search" => "Find app tools (Gmail, Google Calendar, GitHub, …) for a request: slugs with their required arguments. Call first, then composio_execute.",
            "composio_execute" => "Run an app tool by a slug from composio_search, with its arguments as a JSON object.",
            _ => "Get a link that lets the user connect an app account (a toolkit such as gmail); call it when a tool says the account is not connected.",
        }
    }

    fn parameters(&self) -> Value {
        match self.name {
            "composio_search" => {
                json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
            }
            "composio_execute" => json!({"type": "object", "properties": {
                "tool_slug": {"type": "string"},
                "arguments": {"type": "object"}
            }, "required": ["tool_slug", "arguments"]}),
            _ => {
                json!({"type": "object", "properties": {"toolkit": {"type": "string"}}, "required": ["toolkit"]})
            }
        }
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        self.call_output(args).map(|o| o.text)
    }

    fn call_output(&self, args: &Value) -> Result<ToolOutput, ToolError> {
        match self.name {
            "composio_search" => search(&self.api, &text_arg(args, "query")?).map(ToolOutput::from),
            "composio_execute" => execute(
                &self.api,
                &text_arg(args, "tool_slug")?,
                args.get("arguments"),
            )
            .map(ToolOutput::from),
            _ => connect(&self.api, &text_arg(args, "toolkit")?),
        }
    }
}

/// `composio_search`: at most ten tools, each "SLUG (toolkit): description
/// | required: a, b".
pub fn search(api: &ComposioApi, query: &str) -> Result<String, ToolError> {
    let reply = api
        .session_call("search", &json!({"queries": [{"use_case": query}]}))
        .map_err(|e| ToolError::Failed(format!("App search failed: {e}")))?;
    let schemas: Map<String, Value> = match reply.get("tool_schemas") {
        Some(Value::Object(m)) => m.clone(),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|s| {
                let slug = s.get("tool_slug").or_else(|| s.get("slug"))?.as_str()?;
                Some((slug.to_string(), s.clone()))
            })
            .collect(),
        _ => Map::new(),
    };
    let mut slugs: Vec<String> = Vec::new();
    let results = reply
        .get("results")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for key in ["primary_tool_slugs", "related_tool_slugs"] {
        for r in &results {
            for s in r.get(key).and_then(Value::as_array).into_iter().flatten() {
                if let Some(s) = s.as_str() {
                    if !slugs.iter().any(|x| x == s) {
                        slugs.push(s.to_string());
                    }
                }
            }
        }
    }
    for slug in schemas.keys() {
        if !slugs.contains(slug) {
            slugs.push(slug.clone());
        }
    }
    let lines: Vec<String> = slugs
        .iter()
        .filter(|s| !s.trim().is_empty())
        .take(MAX_TOOLS)
        .map(|slug| {
            let slug_shown = one_line(slug, 80);
            let Some(ts) = schemas.get(slug) else {
                return slug_shown;
            };
            let toolkit = ts
                .get("toolkit")
                .and_then(|t| t.as_str().or_else(|| t.get("slug").and_then(Value::as_str)))
                .unwrap_or("");
            let desc = one_line(
                ts.get("description").and_then(Value::as_str).unwrap_or(""),
                MAX_DESC,
            );
            let mut required = composio_api::required_names(ts.get("input_schema"));
            let full = ts.get("hasFullSchema").and_then(Value::as_bool);
            if required.is_empty() && ts.get("input_schema").is_none() && full == Some(false) {
                required = api.required_of(slug);
            }
            let mut line = slug_shown;
            if !toolkit.is_empty() {
                line.push_str(&format!(" ({})", one_line(toolkit, 40)));
            }
            if !desc.is_empty() {
                line.push_str(&format!(": {desc}"));
            }
            if !required.is_empty() {
                line.push_str(&format!(" | required: {}", required.join(", ")));
            }
            line
        })
        .collect();
    if lines.is_empty() {
        Ok("No matching app tools found.".into())
    } else {
        Ok(lines.join("\n"))
    }
}

/// The toolkit a slug belongs to (`GMAIL_FETCH_EMAILS` → `gmail`).
pub fn toolkit_of(slug: &str, cfg: &ComposioConfig) -> String {
    match slug.split_once('_') {
        Some((prefix, _)) if !prefix.is_empty() => prefix.to_lowercase(),
        _ => cfg
            .toolkit_list()
            .into_iter()
            .next()
            .unwrap_or_else(|| "the app".into()),
    }
}

/// `composio_execute`: the compacted `data`, or one sentence.
pub fn execute(
    api: &ComposioApi,
    slug: &str,
    arguments: Option<&Value>,
) -> Result<String, ToolError> {
    let arguments = match arguments {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(m)) => Value::Object(m.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => json!({}),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return Err(ToolError::BadArguments(
                    "arguments must be a JSON object (or a string holding one)".into(),
                ))
            }
        },
        Some(_) => {
            return Err(ToolError::BadArguments(
                "arguments must be a JSON object".into(),
            ))
        }
    };
    let toolkit = toolkit_of(slug, api.config());
    let reply = match api.session_call(
        "execute",
        &json!({"tool_slug": slug, "arguments": arguments}),
    ) {
        Ok(r) => r,
        Err(ComposioError::Status {
            status: 400,
            message,
            ..
        }) if composio_api::no_active_connection(&message) => {
            return Err(not_connected(&toolkit));
        }
        Err(e) => {
            return Err(ToolError::Failed(format!(
                "The app tool {} failed: {e}",
                one_line(slug, 80)
            )))
        }
    };
    match reply.get("error") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(error) => {
            let text = match error {
                Value::String(s) => one_line(s, 200),
                other => composio_api::error_sentence(&json!({ "error": other })),
            };
            if composio_api::no_active_connection(&text) {
                return Err(not_connected(&toolkit));
            }
            return Err(ToolError::Failed(format!(
                "The app tool {} failed: {text}",
                one_line(slug, 80)
            )));
        }
    }
    // A tool of this toolkit ran: its open links have been used.
    let _ = api.store().map(|store| store.with_conn(|c| {
        c.execute(
            "UPDATE app_links SET used_at = ?1 WHERE user_id = ?2 AND toolkit = ?3 AND used_at IS NULL",
            rusqlite::params![composio_api::now(), api.user_id(), toolkit],
        )
    }));
    Ok(compact_text(reply.get("data").unwrap_or(&Value::Null)))
}

fn not_connected(toolkit: &str) -> ToolError {
    ToolError::Failed(format!(
        "The user's {} account is not connected yet. Do not retry this tool: call composio_connect with toolkit \"{toolkit}\" so they get a link.",
        display_name(toolkit)
    ))
}

/// `composio_connect`: the link stored and handed to the turn.
pub fn connect(api: &ComposioApi, toolkit: &str) -> Result<ToolOutput, ToolError> {
    let toolkit = toolkit.trim().to_lowercase();
    if toolkit.len() > 60
        || !toolkit
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(ToolError::BadArguments(
            "toolkit must be a toolkit slug such as gmail".into(),
        ));
    }
    let reply = api
        .session_call("link", &json!({"toolkit": toolkit}))
        .map_err(|e| {
            ToolError::Failed(format!(
                "I couldn't get a link to connect {}: {e}",
                display_name(&toolkit)
            ))
        })?;
    let url = reply
        .get("redirect_url")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|u| {
            (u.starts_with("https://") || u.starts_with("http://"))
                && u.len() <= 2000
                && !u.contains(char::is_whitespace)
        })
        .ok_or_else(|| {
            failed(ComposioError::Unreadable(
                "the link reply has no redirect_url".into(),
            ))
        })?
        .to_string();
    let created_at = composio_api::now();
    api.store()
        .map_err(failed)?
        .with_conn(|c| {
            c.execute(
                "INSERT INTO app_links (user_id, toolkit, url, created_at) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![api.user_id(), toolkit, url, created_at],
            )
        })
        .map_err(|e| ToolError::Failed(format!("I couldn't keep the link: {e}")))?;
    let name = display_name(&toolkit);
    Ok(ToolOutput {
        text: format!(
            "The link is stored in the earshot app (do not read it out). Tell the user: \"I've put a link to connect {name} in the earshot app.\" Link: {url}"
        ),
        published: vec![(
            "app_link".into(),
            json!({"toolkit": toolkit, "url": url, "created_at": created_at}),
        )],
        ..Default::default()
    })
}

/// How a toolkit is said: "Gmail", "Google Calendar", "GitHub".
pub fn display_name(toolkit: &str) -> String {
    match toolkit {
        "gmail" => "Gmail".into(),
        "googlecalendar" => "Google Calendar".into(),
        "googledrive" => "Google Drive".into(),
        "googlesheets" => "Google Sheets".into(),
        "googledocs" => "Google Docs".into(),
        "github" => "GitHub".into(),
        "gitlab" => "GitLab".into(),
        "linkedin" => "LinkedIn".into(),
        "youtube" => "YouTube".into(),
        "hubspot" => "HubSpot".into(),
        other => {
            let mut c = other.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        }
    }
}

/// A stored link not used yet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppLink {
    pub toolkit: String,
    pub url: String,
    pub created_at: String,
}

/// The links not used yet, newest first (`earshot apps links`).
pub fn open_links(store: &Store, user_id: &str) -> Result<Vec<AppLink>, crate::store::StoreError> {
    store.with_conn(|c| {
        let mut s = c.prepare(
            "SELECT toolkit, url, created_at FROM app_links WHERE user_id = ?1 AND used_at IS NULL ORDER BY id DESC LIMIT 100",
        )?;
        let rows = s.query_map([user_id], |r| {
            Ok(AppLink {
                toolkit: r.get(0)?,
                url: r.get(1)?,
                created_at: r.get(2)?,
            })
        })?;
        rows.collect()
    })
}

/// Shrink a tool result for the model: `*_url` strings dropped, strings
/// ≤ 200 characters, lists ≤ 5 items plus a count, nesting ≤ 5 levels,
/// and the whole ≤ 2,000 characters.
pub fn compact_text(data: &Value) -> String {
    let text = serde_json::to_string(&compact(data, 0).unwrap_or(Value::Null)).unwrap_or_default();
    let total = text.chars().count();
    if total <= MAX_RESULT {
        return text;
    }
    let note = format!("… (cut; {total} characters in all)");
    let keep = MAX_RESULT.saturating_sub(note.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&note);
    out
}

fn compact(v: &Value, depth: usize) -> Option<Value> {
    if depth > 4 {
        return None;
    }
    Some(match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if k.ends_with("_url") && v.is_string() {
                    continue;
                }
                if let Some(c) = compact(v, depth + 1) {
                    out.insert(k.clone(), c);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out: Vec<Value> = items
                .iter()
                .take(MAX_ITEMS)
                .filter_map(|x| compact(x, depth + 1))
                .collect();
            if items.len() > MAX_ITEMS {
                out.push(Value::String(format!(
                    "...({} more items)",
                    items.len() - MAX_ITEMS
                )));
            }
            Value::Array(out)
        }
        Value::String(s) if s.chars().count() > MAX_STR => {
            Value::String(s.chars().take(MAX_STR).collect::<String>() + "...")
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_compacted() {
        let data = json!({
            "html_url": "https://github.com/x", "stargazers_count": 42,
            "items": [1, 2, 3, 4, 5, 6, 7],
            "body": "x".repeat(500),
            "deep": {"a": {"b": {"c": {"d": {"e": 1}}}}}
        });
        let text = compact_text(&data);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v.get("html_url").is_none());
        assert_eq!(v["stargazers_count"], 42);
        assert_eq!(v["items"].as_array().unwrap().len(), 6);
        assert_eq!(v["items"][5], "...(2 more items)");
        assert_eq!(v["body"].as_str().unwrap().chars().count(), 203);
        assert!(v["deep"]["a"]["b"]["c"].get("d").is_none());
        let huge = json!((0..5).map(|i| json!({"t": "y".repeat(190), "i": i, "more": (0..5).map(|j| "z".repeat(150 + j)).collect::<Vec<_>>()})).collect::<Vec<_>>());
        let text = compact_text(&huge);
        assert!(
            text.chars().count() <= MAX_RESULT,
            "{}",
            text.chars().count()
        );
        assert!(text.ends_with("characters in all)"));
    }

    #[test]
    fn toolkits_and_names() {
        let cfg = ComposioConfig {
            toolkits: " Gmail, googlecalendar ,,github".into(),
            ..Default::default()
        };
        assert_eq!(cfg.toolkit_list(), ["gmail", "googlecalendar", "github"]);
        assert_eq!(
            toolkit_of("GOOGLECALENDAR_CREATE_EVENT", &cfg),
            "googlecalendar"
        );
        assert_eq!(display_name("googlecalendar"), "Google Calendar");
        assert_eq!(display_name("trello"), "Trello");
        let shown = format!(
            "{:?}",
            ComposioConfig {
                api_key: "ak_planted".into(),
                ..cfg
            }
        );
        assert!(!shown.contains("planted"), "{shown}");
    }
}
