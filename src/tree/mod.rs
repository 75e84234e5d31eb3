//! The hybrid intent tree (R-TREE, seed 004): a JSON graph of nodes that
//! answers device intents without an LLM and falls back to the router graph.
//!
//! Code map, in the order a turn uses it:
//! - [`model`]: the file format (`{"version", "entry", "nodes"}`), parsed
//!   node by node so errors name the node; JSON Schema in `tree.schema.json`.
//! - [`validate`]: unknown ids, missing branches, unreachable nodes, cycles
//!   without a classify/llm_stream node — each with the node id and path.
//! - [`engine`]: the tree + its classifiers + its actions, built once.
//! - [`interpreter`]: one walk from the entry, at most `max_steps` steps.
//! - [`actions`]: what `action` nodes run (clock, maths, todos, device,
//!   memory), each bounded by a timeout.
//! - [`state`]: the per-conversation phase + state JSON in SQLite.
//! - [`spoken_math`], [`tags`], [`expr`]: small parsers the nodes use.
//!
//! The shipped tree is `default_tree.json` with its intent examples in
//! `intents/`; `[tree] file` replaces it.

pub mod actions;
pub mod engine;
pub mod expr;
pub mod fit;
pub mod fit_calendar;
pub mod fit_time;
pub mod interpreter;
pub mod model;
pub mod spoken_math;
pub mod state;
pub mod tags;
pub mod units;
pub mod user_intents;
pub mod validate;

pub use engine::Engine;
pub use interpreter::{Host, HostError, LlmAnswer, WalkError, WalkFailure, WalkInput, WalkOutcome};
pub use model::{Node, Tree};

use serde::{Deserialize, Serialize};

/// The shipped tree (loaded when `[tree] file` is empty).
pub const DEFAULT_TREE: &str = include_str!("default_tree.json");
/// The JSON Schema of the tree format.
pub const TREE_SCHEMA: &str = include_str!("tree.schema.json");

/// `[tree]`: which tree runs and how it is bounded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TreeConfig {
    /// A tree JSON file; empty = the device's shipped default tree.
    pub file: String,
    /// Most interpreter steps per turn before an `error` frame.
    pub max_steps: usize,
    /// Timeout of one `action` node.
    pub action_timeout_ms: u64,
    /// Log intent + confidence for every turn whichever engine answered.
    pub shadow: bool,
}

impl Default for TreeConfig {
    fn default() -> Self {
        Self {
            file: String::new(),
            max_steps: 50,
            action_timeout_ms: 5000,
            shadow: true,
        }
    }
}

/// Why a tree could not be loaded. One line each, naming the file (and the
/// node, where there is one).
#[derive(Debug, Clone, thiserror::Error)]
pub enum TreeError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: {} problem{}: {}", issues.len(), if issues.len() == 1 { "" } else { "s" }, issues.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid {
        file: String,
        issues: Vec<validate::Issue>,
    },
    #[error("{file}: intent set '{set}': {message}")]
    Intents {
        file: String,
        set: String,
        message: String,
    },
}

/// Where a `state_check` / `set_state` key lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateKey {
    /// Device-wide (`device_state` table): `device.dnd`, `device.volume`.
    Device(String),
    /// This conversation's tree state (`tree_state.state_json`).
    Conversation(String),
}

impl StateKey {
    /// `device.NAME`, `state.NAME` or a bare `NAME` (device).
    pub fn parse(key: &str) -> Option<StateKey> {
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        match key.split_once('.') {
            Some(("device", k)) if valid(k) => Some(StateKey::Device(k.into())),
            Some(("state", k)) if valid(k) => Some(StateKey::Conversation(k.into())),
            None if valid(key) => Some(StateKey::Device(key.into())),
            _ => None,
        }
    }
}

/// Device-state keys the shipped actions use (the voice layer reads them).
pub mod keys {
    /// "on" while paused (do-not-disturb).
    pub const DND: &str = "dnd";
    /// The last spoken answer, for "repeat that".
    pub const LAST_ANSWER: &str = crate::store::LAST_ANSWER;
    /// Output volume 0–100.
    pub const VOLUME: &str = "volume";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys() {
        assert_eq!(StateKey::parse("dnd"), Some(StateKey::Device("dnd".into())));
        assert_eq!(
            StateKey::parse("state.pending_delete"),
            Some(StateKey::Conversation("pending_delete".into()))
        );
        assert_eq!(StateKey::parse("other.x"), None);
        assert_eq!(StateKey::parse("state."), None);
        assert_eq!(StateKey::parse("a b"), None);
    }
}
