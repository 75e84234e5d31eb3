//! The hybrid intent tree (R-TREE, seed 004): a JSON graph of nodes that
//! answers device intents without an LLM and falls back to the router graph.

use serde::{Deserialize, Serialize};

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
