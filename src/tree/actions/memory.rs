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
    /// The memories the language model would be given for `question`
    /// (the memory's own recall rule). Empty means no memory is near it.
    fn recall(&self, user_id: &str, question: &str) -> Result<Vec<String>, MemoryOpsError>;
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
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let Some(memory) = &env.memory else {
            return Ok(ActionOutput::failed(UNAVAILABLE));
        };
        let items = memory.list(&env.user_id)?;
        // "what's my wifi password?": the memory that names it, said back
        // to the speaker; none fails, so the tree hands the question on.
        if let Some(subject) = crate::tree::fit::memory_subject(&call.text) {
            return Ok(match about(&items, &subject) {
                Some(found) => ActionOutput::said(format!(
                    "You told me {}.",
                    to_the_listener(found.trim_end_matches('.'))
                )),
                // What an account, an app or a sensor holds ("my credit
                // score", "my blood type", "my order"): not something the
                // speaker tells me, so the language model and its tools
                // answer it.
                None if held_elsewhere(&subject) => ActionOutput::failed(""),
                None => match memory.recall(&env.user_id, &call.text) {
                    // Nothing near it by meaning either: the language
                    // model would have only its guesses to go on, and a
                    // made-up fact about the speaker is a wrong answer.
                    Ok(near) if near.is_empty() => ActionOutput::said(not_told(&subject)),
                    // A memory near it ("my partner is Sam" for "my
                    // wife's name"), or no recall by meaning here: the
                    // language model answers, with its own recall.
                    _ => ActionOutput::failed(""),
                },
            });
        }
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
        let fact = fact_of(call);
        if fact.is_empty() {
            return Ok(ActionOutput::failed(ASK_FACT));
        }
        let stored = memory.remember(&env.user_id, &fact)?;
        Ok(ActionOutput::said(remembered_reply(&stored)))
    }
    fn preview(
        &self,
        call: &ActionCall,
        env: &ActionEnv,
    ) -> Option<Result<ActionOutput, ActionError>> {
        if env.memory.is_none() {
            return Some(Ok(ActionOutput::failed(UNAVAILABLE)));
        }
        let fact = fact_of(call);
        if fact.is_empty() {
            return Some(Ok(ActionOutput::failed(ASK_FACT)));
        }
        // The text the memory stores (its own "remember that" stripped);
        // the same fact already stored in other capitals is said as
        // stored, and the prepared words go unused.
        let stored = crate::memory::phrases::strip_remember(&fact).trim();
        Some(Ok(ActionOutput::said(remembered_reply(stored))))
    }
}

/// Said when "remember" names nothing to remember.
const ASK_FACT: &str = "What should I remember?";

/// The fact a `memory_remember` call names: a tag's or node's `fact` as
/// given, the utterance only through the gate's frame ("remember that
/// …"), so "remember the titans" names none.
fn fact_of(call: &ActionCall) -> String {
    match call.arg("fact").and_then(serde_json::Value::as_str) {
        Some(f) => fact_to_remember(f),
        None => crate::tree::fit::memory_fact(&call.text).unwrap_or_default(),
    }
}

/// "Okay, I'll remember that my locker code is 412."
fn remembered_reply(stored: &str) -> String {
    format!("Okay, I'll remember that {}.", stored.trim_end_matches('.'))
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

/// The newest memory that holds every word of `subject` ("wifi
/// password" in "my wifi password is blue42"; a name in "… is called
/// Ana"), plurals and possessives aside.
fn about<'a>(items: &'a [String], subject: &str) -> Option<&'a str> {
    let stem = |w: &str| {
        let w = w.trim_end_matches("'s").trim_end_matches('\'');
        w.strip_suffix('s')
            .filter(|s| s.len() > 2)
            .unwrap_or(w)
            .to_string()
    };
    let words_of = |s: &str| -> Vec<String> {
        s.to_lowercase()
            .split(|c: char| !c.is_alphanumeric() && c != '\'')
            .filter(|w| !w.is_empty())
            .map(stem)
            .collect()
    };
    let wanted: Vec<String> = words_of(subject)
        .into_iter()
        .filter(|w| !matches!(w.as_str(), "the" | "a" | "an" | "of" | "my" | "our"))
        .collect();
    if wanted.is_empty() {
        return None;
    }
    // "called" names someone only with the someone asked about: "what's
    // my sister's name" finds "my sister is called Ana"; "what's my name"
    // must not.
    let by_called = wanted.len() > 1;
    items.iter().map(String::as_str).find(|item| {
        let have = words_of(item);
        wanted.iter().all(|w| {
            have.contains(w)
                || (by_called && w == "name" && have.iter().any(|h| h == "called" || h == "named"))
        })
    })
}

/// A subject an account, an app or a measurement knows rather than the
/// speaker's own word: banking, orders and travel, health readings,
/// the network.
fn held_elsewhere(subject: &str) -> bool {
    static HELD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(r"\b(?:credit|score|balance|account|bill|bills|order|orders|package|parcel|delivery|flight|booking|reservation|blood|heart|pulse|steps|weight|bmi|temperature|ip|data plan|subscription|points|rank|ranking|grade|grades|results?)\b")
            .expect("a valid regex")
    });
    HELD.is_match(&subject.to_lowercase())
}

/// "You haven't told me your wifi password yet." for a question no memory
/// is near; "what is my dog called" asks for "what your dog is called".
fn not_told(subject: &str) -> String {
    let subject = subject.trim();
    let asked = match subject
        .strip_suffix(" called")
        .or_else(|| subject.strip_suffix(" named"))
    {
        Some(who) => format!("what your {} is called", who.trim()),
        None => format!("your {subject}"),
    };
    format!("You haven't told me {asked} yet. Say \"remember that…\" and I'll keep it.")
}

/// A memory as the listener hears it: "my wifi password is blue42" →
/// "your wifi password is blue42", "I like jazz" → "you like jazz".
fn to_the_listener(text: &str) -> String {
    let mut out = Vec::new();
    let mut after_i = false;
    for word in text.split(' ') {
        let lower = word.to_lowercase();
        let swapped = match lower.as_str() {
            "my" => Some("your"),
            "mine" => Some("yours"),
            "me" => Some("you"),
            "myself" => Some("yourself"),
            "i" => Some("you"),
            "i'm" => Some("you're"),
            "i've" => Some("you've"),
            "i'd" => Some("you'd"),
            "i'll" => Some("you'll"),
            "am" if after_i => Some("are"),
            "was" if after_i => Some("were"),
            _ => None,
        };
        after_i = lower == "i";
        out.push(swapped.map_or_else(|| word.to_string(), str::to_string));
    }
    out.join(" ")
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

    fn recall(&self, user_id: &str, question: &str) -> Result<Vec<String>, MemoryOpsError> {
        crate::memory::Memory::recall(self, user_id, question)
            .map(|kept| kept.into_iter().map(|s| s.item.text).collect())
            .map_err(|e| MemoryOpsError::List(format!("{e:#}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_question_finds_the_memory_that_names_it() {
        let items: Vec<String> = [
            "I like jazz",
            "my wifi password is blue42",
            "my sister is called Ana",
            "my car is a blue Golf",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            about(&items, "wifi password"),
            Some("my wifi password is blue42")
        );
        assert_eq!(
            about(&items, "sister's name"),
            Some("my sister is called Ana")
        );
        assert_eq!(about(&items, "cars"), Some("my car is a blue Golf"));
        assert_eq!(about(&items, "brother's name"), None);
        assert_eq!(about(&items, "name"), None);
        assert_eq!(about(&items, "password for the bank"), None);
        assert_eq!(
            to_the_listener("my wifi password is blue42"),
            "your wifi password is blue42"
        );
        assert_eq!(
            to_the_listener("I am allergic to nuts and my son is too"),
            "you are allergic to nuts and your son is too"
        );
    }

    /// Memories in a list; recall returns those sharing a word with the
    /// question (a stand-in for the memory's recall by meaning).
    struct Listed(Vec<String>);
    impl MemoryOps for Listed {
        fn list(&self, _: &str) -> Result<Vec<String>, MemoryOpsError> {
            Ok(self.0.clone())
        }
        fn remember(&self, _: &str, text: &str) -> Result<String, MemoryOpsError> {
            Ok(text.to_string())
        }
        fn forget(&self, _: &str, _: &str) -> Result<Option<String>, MemoryOpsError> {
            Ok(None)
        }
        fn recall(&self, _: &str, question: &str) -> Result<Vec<String>, MemoryOpsError> {
            let q = question.to_lowercase();
            Ok(self
                .0
                .iter()
                .filter(|m| m.split(' ').any(|w| w.len() > 3 && q.contains(w)))
                .cloned()
                .collect())
        }
    }

    fn ask(memories: &[&str], question: &str) -> ActionOutput {
        let dir = tempfile::tempdir().unwrap();
        let mut env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        env.memory = Some(std::sync::Arc::new(Listed(
            memories.iter().map(|s| s.to_string()).collect(),
        )));
        let call = ActionCall {
            text: question.to_string(),
            ..ActionCall::default()
        };
        MemoryList.run(&call, &env).unwrap()
    }

    #[test]
    fn a_question_nothing_in_memory_answers_is_not_guessed() {
        let out = ask(&[], "What's my wife's name?");
        assert!(out.ok);
        assert_eq!(
            out.say,
            "You haven't told me your wife's name yet. Say \"remember that…\" and I'll keep it."
        );
        let out = ask(&["I like jazz"], "What is my dog called?");
        assert!(
            out.say
                .starts_with("You haven't told me what your dog is called yet."),
            "{}",
            out.say
        );
        // The memory that names it is said back.
        let out = ask(&["my dog is called Rex"], "What is my dog called?");
        assert_eq!(out.say, "You told me your dog is called Rex.");
        // What an account or a sensor holds: the language model answers.
        assert!(!ask(&[], "what is my credit score").ok);
        assert!(!ask(&[], "what's my blood type").ok);
        // One near it by meaning: the language model answers.
        let out = ask(
            &["my partner Sam loves my wife's cooking"],
            "What's my wife's maiden name?",
        );
        assert!(!out.ok);
    }

    #[test]
    fn a_remember_preview_says_what_remembering_would_and_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let memory = std::sync::Arc::new(crate::memory::testing::memory(dir.path()));
        let mut env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        env.memory = Some(memory.clone());
        for text in [
            "Remember that my locker code is 412.",
            "remember my bike is in the shed",
            "don't forget that the plumber comes on Tuesday",
            "remember",
        ] {
            let call = ActionCall {
                text: text.to_string(),
                ..ActionCall::default()
            };
            let said = MemoryRemember.preview(&call, &env).unwrap().unwrap().say;
            assert!(memory.list("user-1").unwrap().is_empty(), "{text}: stored");
            let done = MemoryRemember.run(&call, &env).unwrap().say;
            assert_eq!(said, done, "{text}");
            for item in memory.list("user-1").unwrap() {
                memory.forget("user-1", &item.text).unwrap();
            }
        }
    }

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
