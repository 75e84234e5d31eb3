//! `earshot tool NAME 'JSON-ARGS'`: run one tool directly and print what
//! the model would read.
//!
//! For users checking a setup ("is my Notion key right?") and for tests.
//! Exit codes: 0 the tool answered, 1 the tool ran and reported a failure
//! (its message is printed like a result), 2 the request itself was wrong
//! (unknown tool, arguments not a JSON object or missing fields) — one line
//! on stderr.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Result};

use crate::store::Store;
use crate::tools::{build_registry, ToolError, ToolRegistry};

/// Tools that need nothing but the config and the database: built without
/// loading the on-device models, so a call takes milliseconds.
const LIGHT_TOOLS: &[&str] = &[
    "calculator",
    "web_search",
    "add_todo",
    "list_todos",
    "complete_todo",
    "delete_todo",
    "set_timer",
    "list_timers",
    "cancel_timer",
    "extend_timer",
    "set_alarm",
    "set_reminder",
    "list_emails",
    "read_email",
    "mark_read",
    "composio_search",
    "composio_execute",
    "composio_connect",
];

/// Run `name` with `args` (a JSON object; empty means `{}`). `Ok(true)` when
/// the tool succeeded, `Ok(false)` when it reported a failure.
pub fn run(config_path: Option<&Path>, name: &str, args: Option<&str>) -> Result<bool> {
    let args = args.unwrap_or("{}");
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(v) if v.is_object() => {}
        Ok(_) => bail!("the arguments must be a JSON object, e.g. '{{\"expression\":\"2+2\"}}'"),
        Err(e) => bail!("the arguments are not JSON ({e}); pass one JSON object in single quotes"),
    }
    let config = super::load_config(config_path)?.config;
    // Other tools (conversation and knowledge search) need the services'
    // models and indexes: the same registry the agent uses.
    let registry: Arc<ToolRegistry> = if LIGHT_TOOLS.contains(&name) {
        let store = Store::open(&config.database_path())?;
        let todos = crate::tools::todo_backend(&config.tools, &config.user_id, &store);
        let timers = crate::timers::Timers::new(&config.timers, &config.paths(), store.clone());
        let mut registry = build_registry(&config.tools, &config.user_id, todos, None);
        crate::tools::timers::offer(&mut registry, &config.tools, &timers);
        crate::tools::email::offer(&mut registry, &config.tools, &config.email);
        crate::tools::composio::offer(
            &mut registry,
            &config.tools,
            &config.composio,
            &config.user_id,
            &store,
        );
        Arc::new(registry)
    } else {
        crate::app::build(&config)?.tools
    };
    if registry.get(name).is_none() && registry.unavailable_reason(name).is_none() {
        bail!(
            "unknown tool \"{name}\"; the tools are: {}",
            registry.known_names().join(", ")
        );
    }
    match registry.call(name, args) {
        Ok(text) => {
            println!("{text}");
            Ok(true)
        }
        Err(ToolError::BadArguments(e)) => bail!("bad arguments for {name}: {e}"),
        Err(e) => {
            println!("{e}");
            Ok(false)
        }
    }
}
