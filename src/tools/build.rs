//! Building the tool set from the config: which tools exist on this
//! device, over which backends (R-TOOL).
//!
//! Built once when the services start, and rebuilt only when the inputs
//! change ([`fingerprint`]): constructing HTTP clients and reading the
//! Notion schema per turn would add latency to every agent turn.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use super::calculator::CalculatorTool;
use super::search_conversations::{ConversationSearch, SearchConversations};
use super::todos::{self, LocalTodos, TodoBackend};
use super::todos_notion::NotionTodos;
use super::web_search::WebSearch;
use super::ToolRegistry;
use crate::config::Config;
use crate::store::Store;

/// Every tool name this build knows.
pub const KNOWN_TOOLS: &[&str] = &[
    "calculator",
    "web_search",
    "search_conversations",
    "add_todo",
    "list_todos",
    "complete_todo",
    "delete_todo",
];

const TODO_TOOLS: &[&str] = &["add_todo", "list_todos", "complete_todo", "delete_todo"];

/// A hash of everything the tool set depends on (tool config incl. keys,
/// user id, whether a conversation index is supplied). Keys are only
/// hashed, never stored or logged.
pub fn fingerprint(config: &Config, has_conversation_search: bool) -> u64 {
    let t = &config.tools;
    let mut h = DefaultHasher::new();
    (
        &t.enabled,
        &t.tavily_api_key,
        &t.tavily_base_url,
        &t.notion_api_key,
        &t.notion_database_id,
        &t.notion_base_url,
        t.timeout_ms,
        &config.user_id,
        has_conversation_search,
    )
        .hash(&mut h);
    h.finish()
}

/// Whether the Notion backend is configured (both values set).
pub fn notion_configured(config: &Config) -> bool {
    !config.tools.notion_api_key.trim().is_empty()
        && !config.tools.notion_database_id.trim().is_empty()
}

/// The to-do backend the config selects: Notion when both Notion values
/// are set, else the local list.
pub fn todo_backend(config: &Config, store: &Store) -> Arc<dyn TodoBackend> {
    let t = &config.tools;
    if notion_configured(config) {
        Arc::new(NotionTodos::new(
            &t.notion_base_url,
            &t.notion_api_key,
            &t.notion_database_id,
            http_deadline(config),
        ))
    } else {
        if !t.notion_api_key.trim().is_empty() || !t.notion_database_id.trim().is_empty() {
            tracing::warn!(
                "only one of NOTION_API_KEY and NOTION_DATABASE_ID is set; using the local to-do list"
            );
        }
        Arc::new(LocalTodos::new(store.clone(), config.user_id.clone()))
    }
}

/// Each HTTP exchange ends a little before the registry abandons the call,
/// so the model reads "did not answer in time" rather than a bare timeout.
fn http_deadline(config: &Config) -> Duration {
    Duration::from_millis(config.tools.timeout_ms.saturating_sub(250).max(500))
}

/// Build the registry: configured, enabled tools are offered; known tools
/// that are off or unconfigured answer with a sentence saying why.
pub fn build_registry(
    config: &Config,
    store: &Store,
    conversations: Option<Arc<dyn ConversationSearch>>,
) -> ToolRegistry {
    let t = &config.tools;
    let mut reg = ToolRegistry::new(Duration::from_millis(t.timeout_ms.max(1)));
    reg.fingerprint = fingerprint(config, conversations.is_some());
    for name in &t.enabled {
        if !KNOWN_TOOLS.contains(&name.as_str()) {
            tracing::warn!(tool = %name, "tools.enabled names an unknown tool; ignored");
        }
    }
    let enabled = |name: &str| t.enabled.iter().any(|e| e == name);

    if enabled("calculator") {
        reg.register(Arc::new(CalculatorTool));
    }
    if enabled("web_search") {
        if t.tavily_api_key.trim().is_empty() {
            reg.mark_unavailable(
                "web_search",
                "Web search is unavailable: no TAVILY_API_KEY is set.",
            );
        } else {
            reg.register(Arc::new(WebSearch::new(
                &t.tavily_base_url,
                t.tavily_api_key.trim(),
                http_deadline(config),
            )));
        }
    }
    if TODO_TOOLS.iter().any(|n| enabled(n)) {
        for tool in todos::tools(todo_backend(config, store)) {
            if enabled(tool.name()) {
                reg.register(tool);
            }
        }
    }
    if enabled("search_conversations") {
        match conversations {
            Some(search) => reg.register(Arc::new(SearchConversations::new(
                search,
                config.user_id.clone(),
            ))),
            None => reg.mark_unavailable(
                "search_conversations",
                "Searching past conversations is unavailable: the conversation index is not set up on this device.",
            ),
        }
    }
    for name in KNOWN_TOOLS {
        if !enabled(name) {
            reg.mark_unavailable(
                name,
                format!("The {name} tool is unavailable: it is turned off in the config (tools.enabled)."),
            );
        }
    }
    reg
}

/// `current` when the config still matches it, else a freshly built set.
pub fn rebuild_if_changed(
    current: &Arc<ToolRegistry>,
    config: &Config,
    store: &Store,
    conversations: Option<Arc<dyn ConversationSearch>>,
) -> Arc<ToolRegistry> {
    if current.fingerprint() == fingerprint(config, conversations.is_some()) {
        current.clone()
    } else {
        tracing::info!("tool configuration changed; rebuilding the tool set");
        Arc::new(build_registry(config, store, conversations))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Store, Config) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        (dir, store, Config::default())
    }

    #[test]
    fn unconfigured_tools_are_not_offered_and_say_why() {
        let (_dir, store, config) = setup();
        let reg = build_registry(&config, &store, None);
        let names = reg.names();
        assert!(names.contains(&"calculator".to_string()));
        assert!(names.contains(&"add_todo".to_string()));
        assert!(!names.contains(&"web_search".to_string()));
        assert!(!names.contains(&"search_conversations".to_string()));
        assert!(reg.specs().iter().all(|s| s.name != "web_search"));
        let err = reg.call("web_search", r#"{"query":"x"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Web search is unavailable: no TAVILY_API_KEY is set."
        );
        assert_eq!(
            reg.call("calculator", r#"{"expression":"2**10"}"#).unwrap(),
            "1024"
        );
    }

    #[test]
    fn configured_tools_are_offered_and_rebuilt_only_on_change() {
        let (_dir, store, mut config) = setup();
        config.tools.enabled.retain(|n| n != "delete_todo");
        let first = Arc::new(build_registry(&config, &store, None));
        assert!(!first.names().contains(&"delete_todo".to_string()));
        assert!(first
            .call("delete_todo", r#"{"task":"x"}"#)
            .unwrap_err()
            .to_string()
            .contains("turned off"));
        let same = rebuild_if_changed(&first, &config, &store, None);
        assert!(Arc::ptr_eq(&first, &same));
        config.tools.tavily_api_key = "tvly-test".into();
        let changed = rebuild_if_changed(&first, &config, &store, None);
        assert!(!Arc::ptr_eq(&first, &changed));
        assert!(changed.names().contains(&"web_search".to_string()));
    }
}
