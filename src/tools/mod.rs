//! Tools the agent (and the intent tree's actions) can call (R-TOOL).
//!
//! One trait, one file per tool, one registry looked up by name. A tool
//! never crashes the agent: every failure becomes a short string the model
//! can read, and a tool that is not configured is not offered at all.

pub mod announce;
mod build;
pub mod calculator;
pub mod calendar;
pub mod composio;
pub mod composio_api;
pub mod email;
pub mod email_imap;
pub mod email_text;
pub mod http;
pub mod search_conversations;
pub mod timers;
pub mod todos;
pub mod todos_local;
pub mod todos_notion;
pub mod web_search;

pub use build::{
    build_registry, fingerprint, is_known_tool, notion_configured, notion_todos,
    rebuild_if_changed, todo_backend, TOOLS,
};

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[tools]` (Debug is hand-written: it never prints the keys)
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Tool names offered to the agent (those not configured are skipped).
    pub enabled: Vec<String>,
    /// `TAVILY_API_KEY`
    pub tavily_api_key: String,
    /// `TAVILY_BASE_URL`
    pub tavily_base_url: String,
    /// `NOTION_API_KEY`
    pub notion_api_key: String,
    /// `NOTION_DATABASE_ID`
    pub notion_database_id: String,
    /// `NOTION_BASE_URL`
    pub notion_base_url: String,
    /// The Notion property that says whether an item is done (status,
    /// select or checkbox); missing: the first status, else checkbox one.
    pub notion_status_property: String,
    /// Option names that mean "not done" (the first found is used for new
    /// items when the status property has no To-do group).
    pub notion_open_names: Vec<String>,
    /// Option names that mean "done".
    pub notion_done_names: Vec<String>,
    /// Longest a single tool call may take.
    pub timeout_ms: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            enabled: vec![
                "calculator".into(),
                "web_search".into(),
                "search_conversations".into(),
                "add_todo".into(),
                "list_todos".into(),
                "complete_todo".into(),
                "delete_todo".into(),
                "set_timer".into(),
                "list_timers".into(),
                "cancel_timer".into(),
                "extend_timer".into(),
                "set_alarm".into(),
                "set_reminder".into(),
                "list_events".into(),
                "quick_add_event".into(),
                "create_event".into(),
                "update_event".into(),
                "delete_event".into(),
                "find_free_time".into(),
                // Issue 18: offered once `[email]` is configured.
                "list_emails".into(),
                "read_email".into(),
                "mark_read".into(),
                // Issue 18: offered once COMPOSIO_API_KEY is set.
                "composio_search".into(),
                "composio_execute".into(),
                "composio_connect".into(),
                // Issue 22: the speakers of other rooms.
                "announce".into(),
            ],
            tavily_api_key: String::new(),
            tavily_base_url: "https://api.tavily.com".into(),
            notion_api_key: String::new(),
            notion_database_id: String::new(),
            notion_base_url: "https://api.notion.com".into(),
            notion_status_property: todos_notion::STATUS_PROP.into(),
            notion_open_names: todos_notion::OPEN_NAMES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            notion_done_names: todos_notion::DONE_NAMES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            timeout_ms: 5000,
        }
    }
}

impl std::fmt::Debug for ToolsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exhaustive, so a new field has to be placed here (secret or not).
        let Self {
            enabled,
            tavily_api_key: _,
            tavily_base_url,
            notion_api_key: _,
            notion_database_id,
            notion_base_url,
            notion_status_property,
            notion_open_names,
            notion_done_names,
            timeout_ms,
        } = self;
        f.debug_struct("ToolsConfig")
            .field("enabled", enabled)
            .field("tavily_api_key", &"***")
            .field("tavily_base_url", tavily_base_url)
            .field("notion_api_key", &"***")
            .field("notion_database_id", notion_database_id)
            .field("notion_base_url", notion_base_url)
            .field("notion_status_property", notion_status_property)
            .field("notion_open_names", notion_open_names)
            .field("notion_done_names", notion_done_names)
            .field("timeout_ms", timeout_ms)
            .finish()
    }
}

/// A typed tool failure; its text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    BadArguments(String),
    #[error("{0}")]
    Failed(String),
    /// A whole sentence: which tool, and why (e.g. the key that is missing).
    #[error("{0}")]
    Unavailable(String),
}

/// What one call produced: the text the model reads, and what the call
/// hands to the turn that made it (saved with that turn, never shared).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    /// A knowledge retrieval (query, chunks, scores, snippets) for the turn
    /// log; the turn writes it with its own id in its own transaction.
    pub retrieval: Option<Value>,
    /// Events for the turn's stream (`(event, data)`, sent as R-SSE
    /// `event` frames), e.g. the link `composio_connect` made.
    pub published: Vec<(String, Value)>,
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self {
            text,
            ..Default::default()
        }
    }
}

/// One callable tool, described in the OpenAI tool-calling format.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    /// One sentence the model reads to decide when to call it.
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;
    /// Run it. Arguments are already parsed JSON.
    fn call(&self, args: &Value) -> Result<String, ToolError>;
    /// Run it for a turn: the text plus what the turn keeps of the call
    /// (see [`ToolOutput`]). Only tools that report more than text override it.
    fn call_output(&self, args: &Value) -> Result<ToolOutput, ToolError> {
        self.call(args).map(ToolOutput::from)
    }
}

/// How often a running tool's caller is ticked (keep-alives).
const TICK: Duration = Duration::from_secs(1);

/// The tools available on this device, by name.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Known tools that are not configured: name → the sentence said when
    /// the model calls one anyway. Never offered in [`ToolRegistry::specs`].
    unavailable: Vec<(String, String)>,
    timeout: Duration,
    /// What the registry was built from (see [`fingerprint`]).
    fingerprint: u64,
}

impl Default for ToolRegistry {
    /// Empty, with the default 5 s per-call timeout (a zero timeout would
    /// abandon every call).
    fn default() -> Self {
        Self::new(Duration::from_secs(5))
    }
}

impl ToolRegistry {
    pub fn new(timeout: Duration) -> Self {
        Self {
            tools: Vec::new(),
            unavailable: Vec::new(),
            timeout,
            fingerprint: 0,
        }
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.unavailable.retain(|(n, _)| n != tool.name());
        self.tools.push(tool);
    }

    /// Record a known tool that is not configured, with the sentence to
    /// answer if the model calls it anyway.
    pub fn mark_unavailable(&mut self, name: &str, sentence: impl Into<String>) {
        if self.get(name).is_none() {
            self.unavailable.retain(|(n, _)| n != name);
            self.unavailable.push((name.to_string(), sentence.into()));
        }
    }

    /// Why `name` is not offered, if it is a known but unconfigured tool.
    pub fn unavailable_reason(&self, name: &str) -> Option<&str> {
        self.unavailable
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.as_str())
    }

    /// Every tool name this registry knows: offered ones, then those that
    /// only answer "…unavailable".
    pub fn known_names(&self) -> Vec<String> {
        let mut names = self.names();
        names.extend(self.unavailable.iter().map(|(n, _)| n.clone()));
        names
    }

    /// The fingerprint of the configuration this registry was built from.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools in the chat-completions `tools` format.
    pub fn specs(&self) -> Vec<crate::llm::ToolSpec> {
        self.tools
            .iter()
            .map(|t| crate::llm::ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    /// Call a tool by name with raw JSON arguments, bounded by the timeout.
    /// Always returns a string for the model: failures are short sentences.
    pub fn call(&self, name: &str, raw_args: &str) -> Result<String, ToolError> {
        self.call_with_ticks(name, raw_args, &mut || {})
    }

    /// As [`ToolRegistry::call`], calling `tick` about once a second while
    /// the tool runs (the agent sends SSE keep-alives with it, so a slow
    /// tool does not look like a dead connection).
    pub fn call_with_ticks(
        &self,
        name: &str,
        raw_args: &str,
        tick: &mut dyn FnMut(),
    ) -> Result<String, ToolError> {
        self.call_output_with_ticks(name, raw_args, tick)
            .map(|o| o.text)
    }

    /// As [`ToolRegistry::call_with_ticks`], with what the call hands to
    /// the turn ([`ToolOutput`]); a call abandoned at the timeout hands
    /// nothing.
    pub fn call_output_with_ticks(
        &self,
        name: &str,
        raw_args: &str,
        tick: &mut dyn FnMut(),
    ) -> Result<ToolOutput, ToolError> {
        let tool = match self.get(name) {
            Some(tool) => tool.clone(),
            None => {
                return Err(ToolError::Unavailable(
                    self.unavailable_reason(name)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("There is no tool named {name}.")),
                ))
            }
        };
        let args: Value = if raw_args.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(raw_args)
                .map_err(|e| ToolError::BadArguments(format!("arguments are not JSON ({e})")))?
        };
        if !args.is_object() {
            return Err(ToolError::BadArguments(
                "arguments must be a JSON object".into(),
            ));
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        let spawned = std::thread::Builder::new()
            .name(format!("tool-{name}"))
            .spawn(move || {
                let _ = tx.send(tool.call_output(&args));
            });
        if spawned.is_err() {
            return Err(ToolError::Failed("could not start the tool".into()));
        }
        let deadline = std::time::Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(ToolError::Failed(format!(
                    "{name} took longer than {} s and was abandoned",
                    self.timeout.as_secs_f32()
                )));
            }
            match rx.recv_timeout(left.min(TICK)) {
                Ok(result) => return result,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if std::time::Instant::now() < deadline {
                        tick();
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return Err(ToolError::Failed(format!("{name} stopped unexpectedly")))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Echo;
    impl Tool for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn description(&self) -> &str {
            "echo"
        }
        fn parameters(&self) -> Value {
            json!({"type":"object"})
        }
        fn call(&self, args: &Value) -> Result<String, ToolError> {
            if args.get("hang").is_some() {
                std::thread::sleep(Duration::from_secs(5));
            }
            Ok(args.to_string())
        }
    }

    #[test]
    fn bad_json_and_unknown_tools_are_errors_not_panics() {
        let mut reg = ToolRegistry::new(Duration::from_millis(200));
        reg.register(Arc::new(Echo));
        assert!(matches!(
            reg.call("echo", "{not json"),
            Err(ToolError::BadArguments(_))
        ));
        assert!(matches!(
            reg.call("echo", "[1]"),
            Err(ToolError::BadArguments(_))
        ));
        assert!(matches!(
            reg.call("nope", "{}"),
            Err(ToolError::Unavailable(_))
        ));
        assert_eq!(reg.call("echo", "{\"a\":1}").unwrap(), "{\"a\":1}");
    }

    #[test]
    fn a_hanging_tool_times_out() {
        let mut reg = ToolRegistry::new(Duration::from_millis(1200));
        reg.register(Arc::new(Echo));
        let start = std::time::Instant::now();
        let mut ticks = 0;
        let err = reg
            .call_with_ticks("echo", "{\"hang\":true}", &mut || ticks += 1)
            .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(err.to_string().contains("longer than"), "{err}");
        // One keep-alive tick per second of waiting.
        assert_eq!(ticks, 1);
    }

    #[test]
    fn debug_hides_the_keys() {
        let cfg = ToolsConfig {
            tavily_api_key: "tvly-planted-secret".into(),
            notion_api_key: "ntn_planted_secret".into(),
            notion_database_id: "db-visible".into(),
            ..Default::default()
        };
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("planted"), "{shown}");
        assert!(
            shown.contains("db-visible") && shown.contains("***"),
            "{shown}"
        );
    }
}
