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
use super::{ToolRegistry, ToolsConfig};
use crate::choice::Entry;
use crate::store::Store;

/// The tool name table: every tool `tools.enabled` can name (read by the
/// registry, `earshot devices`, `config show` and `doctor`).
/// `search_knowledge` is not here: it is offered whenever the knowledge
/// base is loaded (`knowledge::tool::offer`), whatever `tools.enabled` says.
/// The timer tools are offered over the device's one `timers::Timers` by
/// [`super::timers::offer`] (the composition root has it).
pub const TOOLS: &[Entry] = &[
    tool("calculator", "arithmetic, exactly (no LLM maths)"),
    tool("web_search", "Tavily web search (TAVILY_API_KEY)"),
    tool(
        "search_conversations",
        "search this device's past conversations",
    ),
    tool(
        "add_todo",
        "add to the to-do list (local, or Notion when configured)",
    ),
    tool("list_todos", "read the to-do list"),
    tool("complete_todo", "tick an item off the to-do list"),
    tool("delete_todo", "remove an item from the to-do list"),
    tool(
        "set_timer",
        "start a countdown timer (1 s to 24 h), optionally named",
    ),
    tool(
        "list_timers",
        "the timers, alarms and reminders set, with time left",
    ),
    tool("cancel_timer", "cancel a timer, alarm or reminder (or all)"),
    tool("extend_timer", "add time to (or take time off) a timer"),
    tool(
        "set_alarm",
        "an alarm at a local clock time, once or repeating",
    ),
    tool("set_reminder", "say something at a time or after a delay"),
    tool("list_events", "list calendar events (expanded recurrences)"),
    tool(
        "quick_add_event",
        "add an event from one line: title, date, time",
    ),
    tool("create_event", "create a calendar event"),
    tool("update_event", "change a calendar event"),
    tool("delete_event", "delete a calendar event"),
    tool("find_free_time", "free stretches in the calendar"),
    tool("list_emails", "list emails over IMAP ([email])"),
    tool(
        "read_email",
        "read one email as plain text (never marks it read)",
    ),
    tool(
        "mark_read",
        "mark an email read ([email] read_only = false)",
    ),
    tool(
        "composio_search",
        "find app tools through Composio (COMPOSIO_API_KEY)",
    ),
    tool("composio_execute", "run a Composio app tool by slug"),
    tool(
        "composio_connect",
        "a link that connects an app account (Gmail, GitHub, …)",
    ),
    tool(
        "announce",
        "say a message on other rooms' speakers (ESPHome devices)",
    ),
];

const fn tool(name: &'static str, summary: &'static str) -> Entry {
    Entry {
        name,
        aliases: &[],
        form: name,
        summary,
    }
}

/// Whether `name` is in [`TOOLS`].
pub fn is_known_tool(name: &str) -> bool {
    TOOLS.iter().any(|t| t.name == name)
}

const TODO_TOOLS: &[&str] = &["add_todo", "list_todos", "complete_todo", "delete_todo"];

/// A hash of everything the tool set depends on (tool config incl. keys,
/// user id, whether a conversation index is supplied). Keys are only
/// hashed, never stored or logged.
pub fn fingerprint(t: &ToolsConfig, user_id: &str, has_conversation_search: bool) -> u64 {
    let mut h = DefaultHasher::new();
    (
        &t.enabled,
        &t.tavily_api_key,
        &t.tavily_base_url,
        &t.notion_api_key,
        &t.notion_database_id,
        &t.notion_base_url,
        (
            &t.notion_status_property,
            &t.notion_open_names,
            &t.notion_done_names,
        ),
        t.timeout_ms,
        user_id,
        has_conversation_search,
    )
        .hash(&mut h);
    h.finish()
}

/// The Notion to-do list the config names (both Notion values set), with
/// its status property and option names.
pub fn notion_todos(t: &ToolsConfig) -> NotionTodos {
    NotionTodos::new(
        &t.notion_base_url,
        &t.notion_api_key,
        &t.notion_database_id,
        http_deadline(t),
    )
    .with_names(super::todos_notion::StatusNames {
        property: t.notion_status_property.trim().to_string(),
        open: t.notion_open_names.clone(),
        done: t.notion_done_names.clone(),
    })
}

/// Whether the Notion backend is configured (both values set).
pub fn notion_configured(t: &ToolsConfig) -> bool {
    !t.notion_api_key.trim().is_empty() && !t.notion_database_id.trim().is_empty()
}

/// The to-do backend the config selects: Notion when both Notion values
/// are set, else the local list.
/// Built once by the composition root and shared by the agent's todo tools
/// and the intent tree's todo actions.
pub fn todo_backend(t: &ToolsConfig, user_id: &str, store: &Store) -> Arc<dyn TodoBackend> {
    if notion_configured(t) {
        Arc::new(notion_todos(t))
    } else {
        if !t.notion_api_key.trim().is_empty() || !t.notion_database_id.trim().is_empty() {
            tracing::warn!(
                "only one of NOTION_API_KEY and NOTION_DATABASE_ID is set; using the local to-do list"
            );
        }
        Arc::new(LocalTodos::new(store.clone(), user_id.to_string()))
    }
}

/// Each HTTP exchange ends a little before the registry abandons the call,
/// so the model reads "did not answer in time" rather than a bare timeout.
fn http_deadline(t: &ToolsConfig) -> Duration {
    Duration::from_millis(t.timeout_ms.saturating_sub(250).max(500))
}

/// Build the registry: configured, enabled tools are offered; known tools
/// that are off or unconfigured answer with a sentence saying why. `todos`
/// is the device's one to-do backend ([`todo_backend`]).
pub fn build_registry(
    t: &ToolsConfig,
    user_id: &str,
    todos: Arc<dyn TodoBackend>,
    conversations: Option<Arc<dyn ConversationSearch>>,
) -> ToolRegistry {
    let mut reg = ToolRegistry::new(Duration::from_millis(t.timeout_ms.max(1)));
    reg.fingerprint = fingerprint(t, user_id, conversations.is_some());
    for name in &t.enabled {
        if !is_known_tool(name) {
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
                http_deadline(t),
            )));
        }
    }
    if TODO_TOOLS.iter().any(|n| enabled(n)) {
        for tool in todos::tools(todos) {
            if enabled(tool.name()) {
                reg.register(tool);
            }
        }
    }
    if enabled("search_conversations") {
        match conversations {
            Some(search) => reg.register(Arc::new(SearchConversations::new(
                search,
                user_id.to_string(),
            ))),
            None => reg.mark_unavailable(
                "search_conversations",
                "Searching past conversations is unavailable: the conversation index is not set up on this device.",
            ),
        }
    }
    for name in TOOLS.iter().map(|t| t.name) {
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
    t: &ToolsConfig,
    user_id: &str,
    store: &Store,
    conversations: Option<Arc<dyn ConversationSearch>>,
) -> Arc<ToolRegistry> {
    if current.fingerprint() == fingerprint(t, user_id, conversations.is_some()) {
        current.clone()
    } else {
        tracing::info!("tool configuration changed; rebuilding the tool set");
        Arc::new(build_registry(
            t,
            user_id,
            todo_backend(t, user_id, store),
            conversations,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Store, ToolsConfig) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        (dir, store, ToolsConfig::default())
    }

    fn build(config: &ToolsConfig, store: &Store) -> ToolRegistry {
        build_registry(
            config,
            "user-1",
            todo_backend(config, "user-1", store),
            None,
        )
    }

    #[test]
    fn unconfigured_tools_are_not_offered_and_say_why() {
        let (_dir, store, config) = setup();
        let reg = build(&config, &store);
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
        config.enabled.retain(|n| n != "delete_todo");
        let first = Arc::new(build(&config, &store));
        assert!(!first.names().contains(&"delete_todo".to_string()));
        assert!(first
            .call("delete_todo", r#"{"task":"x"}"#)
            .unwrap_err()
            .to_string()
            .contains("turned off"));
        let same = rebuild_if_changed(&first, &config, "user-1", &store, None);
        assert!(Arc::ptr_eq(&first, &same));
        config.tavily_api_key = "tvly-test".into();
        let changed = rebuild_if_changed(&first, &config, "user-1", &store, None);
        assert!(!Arc::ptr_eq(&first, &changed));
        assert!(changed.names().contains(&"web_search".to_string()));
    }
}
