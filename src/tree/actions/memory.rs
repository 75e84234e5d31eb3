//! Long-term memory by voice (issue 5): "what do you remember about me",
//! "remember that …", "forget …". The memory module provides the
//! operations through [`MemoryOps`]; without it these actions say so.

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};

/// The memory operations the tree needs, implemented over the memory
/// module (so the tree does not know how memories are stored or indexed).
pub trait MemoryOps: Send + Sync {
    /// The user's memories, newest first.
    fn list(&self, user_id: &str) -> Result<Vec<String>, MemoryOpsError>;
    /// Store a fact as said; returns the stored text.
    fn remember(&self, user_id: &str, text: &str) -> Result<String, MemoryOpsError>;
    /// Delete the memory that best matches `query`; returns its text, or
    /// `None` when nothing matches (not an error: the action says so).
    fn forget(&self, user_id: &str, query: &str) -> Result<Option<String>, MemoryOpsError>;
}

/// Why a [`MemoryOps`] call failed: one variant per operation, so the
/// sentence says what could not be done; `0` is the memory module's
/// one-line error (database, embedder, index). The memory actions pass it
/// on as [`ActionError::Memory`]; the user hears the message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryOpsError {
    #[error("I couldn't read my memory: {0}")]
    List(String),
    #[error("I couldn't remember that: {0}")]
    Remember(String),
    #[error("I couldn't forget that: {0}")]
    Forget(String),
}

/// Said when no memory module is wired in.
pub const UNAVAILABLE: &str = "Memory isn't available on this device yet.";

/// Most memories read out at once.
const MAX_LISTED: usize = 5;

pub struct MemoryList;
pub struct MemoryRemember;
pub struct MemoryForget;

/// "remember that my sister is called Ana" → "my sister is called Ana"
/// (one parser for every caller: [`crate::memory::phrases`]).
pub use crate::memory::phrases::fact_to_remember;
/// "forget that I like jazz" → "I like jazz".
pub use crate::memory::phrases::memory_to_forget;

impl Action for MemoryList {
    fn name(&self) -> &'static str {
        "memory_list"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, _: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let Some(memory) = &env.memory else {
            return Ok(ActionOutput::failed(UNAVAILABLE));
        };
        let items = memory.list(&env.user_id)?;
        Ok(ActionOutput::said(match items.len() {
            0 => "I don't remember anything about you yet.".to_string(),
            n => {
                let shown: Vec<&str> = items
                    .iter()
                    .take(MAX_LISTED)
                    .map(|s| s.trim_end_matches('.'))
                    .collect();
                let more = if n > MAX_LISTED {
                    format!(" And {} more.", n - MAX_LISTED)
                } else {
                    String::new()
                };
                format!("I remember that {}.{more}", shown.join("; "))
            }
        }))
    }
}

impl Action for MemoryRemember {
    fn name(&self) -> &'static str {
        "memory_remember"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let Some(memory) = &env.memory else {
            return Ok(ActionOutput::failed(UNAVAILABLE));
        };
        // A tag's or node's `fact` is taken as given; the utterance only
        // through the gate's frame ("remember that …"), so "remember the
        // titans" stores nothing.
        let fact = match call.arg("fact").and_then(serde_json::Value::as_str) {
            Some(f) => fact_to_remember(f),
            None => crate::tree::fit::memory_fact(&call.text).unwrap_or_default(),
        };
        if fact.is_empty() {
            return Ok(ActionOutput::failed("What should I remember?"));
        }
        let stored = memory.remember(&env.user_id, &fact)?;
        Ok(ActionOutput::said(format!(
            "Okay, I'll remember that {}.",
            stored.trim_end_matches('.')
        )))
    }
}

impl Action for MemoryForget {
    fn name(&self) -> &'static str {
        "memory_forget"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let Some(memory) = &env.memory else {
            return Ok(ActionOutput::failed(UNAVAILABLE));
        };
        // "never mind, forget it" names no memory: nothing is forgotten.
        let query = match call.arg("query").and_then(serde_json::Value::as_str) {
            Some(q) => memory_to_forget(q),
            None => crate::tree::fit::memory_target(&call.text).unwrap_or_default(),
        };
        if query.is_empty() {
            return Ok(ActionOutput::failed("What should I forget?"));
        }
        Ok(match memory.forget(&env.user_id, &query)? {
            Some(text) => ActionOutput::said(format!(
                "Okay, I forgot that {}.",
                text.trim_end_matches('.')
            )),
            None => ActionOutput::failed(format!("I don't have a memory about \"{query}\".")),
        })
    }
}

/// The device's memory module fills the seam (the tree sits above memory,
/// so the implementation lives here and memory knows nothing of the tree).
impl MemoryOps for crate::memory::Memory {
    fn list(&self, user_id: &str) -> Result<Vec<String>, MemoryOpsError> {
        crate::memory::Memory::list(self, user_id)
            .map(|items| items.into_iter().map(|m| m.text).collect())
            .map_err(|e| MemoryOpsError::List(format!("{e:#}")))
    }

    fn remember(&self, user_id: &str, text: &str) -> Result<String, MemoryOpsError> {
        crate::memory::Memory::remember(self, user_id, text)
            .map(|r| r.item.text)
            .map_err(|e| MemoryOpsError::Remember(format!("{e:#}")))
    }

    fn forget(&self, user_id: &str, query: &str) -> Result<Option<String>, MemoryOpsError> {
        crate::memory::Memory::forget(self, user_id, query)
            .map(|item| item.map(|m| m.text))
            .map_err(|e| MemoryOpsError::Forget(format!("{e:#}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn phrases_and_unavailable() {
        assert_eq!(
            fact_to_remember("Remember that my sister is called Ana."),
            "my sister is called Ana"
        );
        assert_eq!(
            memory_to_forget("please forget that I like jazz"),
            "I like jazz"
        );
        assert_eq!(
            memory_to_forget("forget about my dentist appointment"),
            "my dentist appointment"
        );
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let out = MemoryList.run(&ActionCall::default(), &env).unwrap();
        assert_eq!(out.say, UNAVAILABLE);
    }
}
