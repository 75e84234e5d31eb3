//! Mail by voice when no language model can call tools (issue 18): the
//! commonest spoken forms answered through the same [`Mailbox`] the
//! agent's `list_emails` / `read_email` use, in one short sentence.
//!
//! - "do I have any new emails?", "check my inbox" → the unread count and
//!   the newest one's sender and subject;
//! - "any emails from Priya today?" → the same, filtered by sender and day;
//! - "read my newest email", "read the email from Sam" → who, what about,
//!   and the first sentences of the text.
//!
//! When a model that can call tools is there, `mail_read` fails silently
//! so the walk hands the sentence to the router graph (the keyword
//! precheck knows `email`, `inbox`, `mail`) and the agent answers with the
//! tools. It only ever reads (`BODY.PEEK`), so a dry run changes nothing.

use chrono::{Duration, Local, NaiveDate};

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::tools::email::{self, Filter, MailError};

/// What a mail sentence asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MailFrame {
    /// Read one message aloud (else: count and name the newest).
    pub read: bool,
    pub from: Option<String>,
    pub unread: bool,
    pub since: Option<NaiveDate>,
}

static MAIL_WORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    crate::small_regex::new(r"(?i)\b(e-?mails?|mail|inbox|mailbox)\b").expect("static regex")
});

/// Words after "from" that end the sender's name.
const NAME_STOP: &[&str] = &[
    "today",
    "yesterday",
    "this",
    "last",
    "since",
    "in",
    "on",
    "about",
    "please",
    "recently",
    "lately",
    "at",
    "the",
    "for",
    "me",
    "to",
];

/// Read the frame from a sentence that names mail; `None` when it names
/// none ("what's on the calendar").
pub fn frame(text: &str, today: NaiveDate) -> Option<MailFrame> {
    if !MAIL_WORD.is_match(text) {
        return None;
    }
    let lower = text.to_lowercase();
    let lower = lower.replace(['?', '!', ',', '.'], " ");
    let words: Vec<&str> = lower.split_whitespace().collect();
    let has = |w: &str| words.contains(&w);
    let from = words.iter().position(|w| *w == "from").and_then(|at| {
        let name: Vec<String> = words[at + 1..]
            .iter()
            .take_while(|w| !NAME_STOP.contains(w))
            .take(3)
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        (!name.is_empty()).then(|| name.join(" "))
    });
    let singular = words
        .iter()
        .any(|w| matches!(*w, "email" | "e-mail" | "mail" | "message"));
    let read = has("read")
        || has("open")
        || lower.contains("what does")
        || lower.contains("what did")
        || has("say")
        || has("says")
        || (singular
            && (has("latest") || has("newest") || has("last") || lower.contains("most recent"))
            && !has("any"));
    let since = if has("today") {
        Some(today)
    } else if has("yesterday") {
        Some(today - Duration::days(1))
    } else if lower.contains("this week") {
        Some(today - Duration::days(6))
    } else {
        None
    };
    let asked_unread = has("new") || has("unread") || has("unopened");
    Some(MailFrame {
        read,
        unread: asked_unread || (from.is_none() && since.is_none() && !read),
        from,
        since,
    })
}

/// Answers mail sentences (see the module doc).
pub struct MailRead;

impl Action for MailRead {
    fn name(&self) -> &'static str {
        "mail_read"
    }

    fn changes_state(&self) -> bool {
        false
    }

    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        if !env.mail_by_tree {
            // A model with tools answers it (router graph → agent).
            return Ok(ActionOutput::failed(""));
        }
        let Some(frame) = frame(&call.text, Local::now().date_naive()) else {
            return Ok(ActionOutput::failed(""));
        };
        let Some(mailbox) = env.mail.as_ref() else {
            return Ok(ActionOutput::said(MailError::NotConfigured.to_string()));
        };
        let filter = Filter {
            limit: if frame.read { 1 } else { 20 },
            unread: frame.unread.then_some(true),
            from: frame.from.clone(),
            subject: None,
            since: frame.since,
        };
        let said = if frame.read {
            match mailbox.read_newest(&filter) {
                Ok(Some(m)) => email::spoken_message(&m),
                Ok(None) => email::spoken_list(&[], frame.unread, frame.from.as_deref()),
                Err(e) => e.to_string(),
            }
        } else {
            match mailbox.list(&filter) {
                Ok(found) => email::spoken_list(&found, frame.unread, frame.from.as_deref()),
                Err(e) => e.to_string(),
            }
        };
        Ok(ActionOutput::said(said))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(text: &str) -> Option<MailFrame> {
        frame(text, NaiveDate::from_ymd_opt(2026, 12, 2).unwrap())
    }

    #[test]
    fn the_common_forms_are_read() {
        let new = f("Do I have any new emails?").unwrap();
        assert!(new.unread && !new.read && new.from.is_none());
        let check = f("check my inbox").unwrap();
        assert!(check.unread && !check.read);
        let newest = f("read my newest email").unwrap();
        assert!(newest.read && !newest.unread);
        let latest = f("what's my latest email").unwrap();
        assert!(latest.read);
        let priya = f("any emails from Priya today?").unwrap();
        assert_eq!(priya.from.as_deref(), Some("Priya"));
        assert_eq!(priya.since, NaiveDate::from_ymd_opt(2026, 12, 2));
        assert!(!priya.unread && !priya.read);
        let sam = f("read the email from sam lee please").unwrap();
        assert!(sam.read);
        assert_eq!(sam.from.as_deref(), Some("Sam Lee"));
        assert!(f("what's on my calendar").is_none());
        assert!(f("emailing is boring").is_none());
    }
}
