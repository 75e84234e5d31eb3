//! Long-term memory by voice (issue 5): "what do you remember about me",
//! "remember that …", "forget …". The memory module provides the
//! operations through [`MemoryOps`]; without it these actions say so.

use std::sync::OnceLock;

use regex::Regex;

use super::{Action, ActionCall, ActionEnv, ActionOutput};

/// The memory operations the tree needs, implemented over the memory
/// module (so the tree does not know how memories are stored or indexed).
pub trait MemoryOps: Send + Sync {
    /// The user's memories, newest first.
    fn list(&self, user_id: &str) -> Result<Vec<String>, String>;
    /// Store a fact as said; returns the stored text.
    fn remember(&self, user_id: &str, text: &str) -> Result<String, String>;
    /// Delete the memory that best matches `query`; returns its text, or
    /// `None` when nothing matches.
    fn forget(&self, user_id: &str, query: &str) -> Result<Option<String>, String>;
}

/// Said when no memory module is wired in.
pub const UNAVAILABLE: &str = "Memory isn't available on this device yet.";

/// Most memories read out at once.
const MAX_LISTED: usize = 5;

pub struct MemoryList;
pub struct MemoryRemember;
pub struct MemoryForget;

fn strip_lead(cell: &'static OnceLock<Regex>, alternatives: &str, text: &str) -> String {
    let re = cell.get_or_init(|| {
        Regex::new(&format!(
            r"(?i)^(?:(?:please|hey|okay|ok|can you|could you)[\s,]+)*(?:{alternatives})\b[\s,:]*"
        ))
        .expect("static regex")
    });
    re.replace(text.trim().trim_end_matches(['.', '!', '?']), "")
        .trim()
        .to_string()
}

/// "remember that my sister is called Ana" → "my sister is called Ana".
pub fn fact_to_remember(text: &str) -> String {
    static LEAD: OnceLock<Regex> = OnceLock::new();
    strip_lead(
        &LEAD,
        r"remember that|remember this|remember|don't forget that|do not forget that|keep in mind that|note that|make a note that|for future reference",
        text,
    )
}

/// "forget that I like jazz" → "I like jazz".
pub fn memory_to_forget(text: &str) -> String {
    static LEAD: OnceLock<Regex> = OnceLock::new();
    strip_lead(
        &LEAD,
        r"forget that|forget about|forget what i said about|forget|delete the memory that|delete the memory about|stop remembering that|stop remembering|erase the memory (?:that|about)",
        text,
    )
}

impl Action for MemoryList {
    fn name(&self) -> &'static str {
        "memory_list"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, _: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, String> {
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
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, String> {
        let Some(memory) = &env.memory else {
            return Ok(ActionOutput::failed(UNAVAILABLE));
        };
        let fact = fact_to_remember(&call.arg_or_text("fact"));
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
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, String> {
        let Some(memory) = &env.memory else {
            return Ok(ActionOutput::failed(UNAVAILABLE));
        };
        let query = memory_to_forget(&call.arg_or_text("query"));
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

/// The memory operations of a running device, when the memory module
/// provides them.
pub fn for_services(services: &crate::agent::Services) -> Option<std::sync::Arc<dyn MemoryOps>> {
    services
        .memory
        .clone()
        .map(|m| m as std::sync::Arc<dyn MemoryOps>)
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
        let env = ActionEnv {
            store: Store::open_in(dir.path()).unwrap(),
            user_id: "user-1".into(),
            memory: None,
        };
        let out = MemoryList.run(&ActionCall::default(), &env).unwrap();
        assert_eq!(out.say, UNAVAILABLE);
    }
}
