//! The intent tree's memory actions ("what do you remember about me",
//! "remember that …", "forget …") over [`Memory`]: the tree defines the
//! seam ([`MemoryOps`]), this file fills it.

use super::Memory;
use crate::tree::actions::memory::MemoryOps;

impl MemoryOps for Memory {
    fn list(&self, user_id: &str) -> Result<Vec<String>, String> {
        Memory::list(self, user_id)
            .map(|items| items.into_iter().map(|m| m.text).collect())
            .map_err(|e| format!("I couldn't read my memory: {e:#}"))
    }

    fn remember(&self, user_id: &str, text: &str) -> Result<String, String> {
        Memory::remember(self, user_id, text)
            .map(|r| r.item.text)
            .map_err(|e| format!("I couldn't remember that: {e:#}"))
    }

    fn forget(&self, user_id: &str, query: &str) -> Result<Option<String>, String> {
        Memory::forget(self, user_id, query)
            .map(|item| item.map(|m| m.text))
            .map_err(|e| format!("I couldn't forget that: {e:#}"))
    }
}
