//! Long-term memory and searchable past conversations, on the device
//! (R-MEM, R-VEC): what Mem0 and Pinecone did in the seed.

use serde::{Deserialize, Serialize};

/// `[memory]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    pub enabled: bool,
    /// `MEM0_CUSTOM_INSTRUCTIONS`: replaces the extraction instructions.
    pub custom_instructions: String,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            custom_instructions: String::new(),
        }
    }
}

/// Recall before routing (R-MEM): the formatted memory block to prepend to
/// the user's text, or `None` when nothing relevant is kept.
pub trait Recall: Send + Sync {
    fn recall_block(&self, user_id: &str, text: &str) -> anyhow::Result<Option<String>>;
}
