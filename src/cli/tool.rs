//! `earshot tool NAME 'JSON-ARGS'`: run one tool directly and print what
//! the model would read.
//!
//! For users checking a setup ("is my Notion key right?") and for tests.
//! Exit codes: 0 the tool answered, 1 the tool ran and reported a failure
//! (its message is printed like a result), 2 the request itself was wrong
//! (unknown tool, arguments not a JSON object) — one line on stderr.

use std::path::Path;

use anyhow::{bail, Result};

use crate::store::Store;
use crate::tools::{build_registry, ToolError, KNOWN_TOOLS};

/// Run `name` with `args` (a JSON object; empty means `{}`). `Ok(true)` when
/// the tool succeeded, `Ok(false)` when it reported a failure.
pub fn run(config_path: Option<&Path>, name: &str, args: Option<&str>) -> Result<bool> {
    let args = args.unwrap_or("{}");
    if !KNOWN_TOOLS.contains(&name) {
        bail!(
            "unknown tool \"{name}\"; the tools are: {}",
            KNOWN_TOOLS.join(", ")
        );
    }
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(v) if v.is_object() => {}
        Ok(_) => bail!("the arguments must be a JSON object, e.g. '{{\"expression\":\"2+2\"}}'"),
        Err(e) => bail!("the arguments are not JSON ({e}); pass one JSON object in single quotes"),
    }
    let loaded = super::load_config(config_path)?;
    let config = loaded.config;
    let store = Store::open(&config.database_path())?;
    let registry = build_registry(&config, &store, None);
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
