//! "Tell the kitchen dinner is ready": announcements on the other rooms'
//! speakers (issue 22), through the device's one
//! [`crate::device::announce::Announcements`] hub.
//!
//! The frame is read ahead of the classifier, and only fits forms that
//! cannot mean anything else:
//! - "announce …", "broadcast …", "make an announcement …", optionally
//!   "to/on/in/over <speaker or everyone>" and "that";
//! - "tell / let <a connected speaker's name, or everyone> (know) (that|to) …";
//! - "say … in/on/through <a connected speaker's name>".
//!
//! "tell me a joke", "tell the time", "say hello" name no speaker and fall
//! through to the classifier. A speaker named after "announce to/in" that
//! is not connected, or an empty message, is a question back — never a
//! guess. `announce_read` only reads (a dry run changes nothing);
//! `announce_send` sends what it flagged.

use serde_json::{json, Value};

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::device::announce::{AnnounceError, Announcements};

/// The conversation state key `announce_read` leaves for `announce_send`.
pub const SEND_FLAG: &str = "announce";

/// Where an announcement goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Every connected speaker.
    All,
    /// The connected speaker of this (hub) name.
    Named(String),
}

/// What an announcement sentence says, or the question to ask back.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnounceFrame {
    Send {
        target: Target,
        message: String,
    },
    /// The sentence is an announcement but cannot be sent as said: the
    /// sentence to say instead.
    Ask(String),
}

/// Words that mean every speaker.
const EVERYONE: &[&str] = &[
    "everyone",
    "everybody",
    "all",
    "all speakers",
    "all the speakers",
    "every speaker",
    "every room",
    "all rooms",
    "all the rooms",
    "everywhere",
    "the house",
    "the whole house",
    "whole house",
    "the family",
    "the household",
];

const POLITE: &[&str] = &[
    "please",
    "can you",
    "could you",
    "would you",
    "will you",
    "go ahead and",
];

/// Read the frame; `None`: not an announcement.
pub fn frame(text: &str, hub: &Announcements) -> Option<AnnounceFrame> {
    let mut s = clean(text);
    loop {
        let before = s.len();
        for p in POLITE.iter().chain(&[","]) {
            if let Some(rest) = strip_word(&s, p) {
                s = rest.to_string();
            }
        }
        if s.len() == before {
            break;
        }
    }
    let s = s.trim_end_matches(" please").to_string();
    for verb in [
        "make an announcement",
        "make announcement",
        "announce",
        "broadcast",
    ] {
        if let Some(rest) = strip_word(&s, verb) {
            return Some(announce_form(rest, hub));
        }
    }
    for verb in ["tell", "let"] {
        if let Some(rest) = strip_word(&s, verb) {
            return tell_form(rest, verb == "let", hub);
        }
    }
    if let Some(rest) = strip_word(&s, "say") {
        return say_form(rest, hub);
    }
    None
}

/// Lower case, spaces squeezed, outer punctuation off; "," and ":" kept as
/// separators (`" , "`).
fn clean(text: &str) -> String {
    let lower = text.to_lowercase().replace(['’', '‘'], "'");
    let spaced = lower.replace(',', " , ").replace(':', " : ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    words
        .join(" ")
        .trim_matches(|c: char| c.is_ascii_punctuation() && c != '\'' || c == ' ')
        .to_string()
}

/// `s` without the leading words `w` (whole words only).
fn strip_word<'a>(s: &'a str, w: &str) -> Option<&'a str> {
    let rest = s.strip_prefix(w)?;
    if rest.is_empty() {
        return Some(rest);
    }
    rest.strip_prefix(' ').map(str::trim_start)
}

/// Drop a leading separator and "that".
fn message_of(rest: &str) -> String {
    let mut m = rest.trim();
    loop {
        let before = m.len();
        for sep in [",", ":", "that", "-"] {
            if let Some(r) = strip_word(m, sep) {
                m = r;
            }
        }
        if m.len() == before {
            break;
        }
    }
    m.replace(" , ", ", ")
        .replace(" : ", ": ")
        .trim()
        .to_string()
}

/// The longest leading run of 1–4 words (after an optional "the") naming a
/// connected speaker or everyone: the target and the rest.
fn leading_target<'a>(rest: &'a str, hub: &Announcements) -> Option<(Target, &'a str)> {
    let words: Vec<(usize, &str)> = rest
        .split(' ')
        .scan(0usize, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .collect();
    for n in (1..=words.len().min(5)).rev() {
        let end = words[n - 1].0 + words[n - 1].1.len();
        let phrase = &rest[..end];
        let after = rest[end..].trim_start();
        if EVERYONE.contains(&phrase) {
            return Some((Target::All, after));
        }
        if let Some(name) = hub.find(phrase) {
            return Some((Target::Named(name), after));
        }
    }
    None
}

/// "announce [to|on|in|over|through X] [that] message".
fn announce_form(rest: &str, hub: &Announcements) -> AnnounceFrame {
    let mut rest = rest.trim();
    let mut target = Target::All;
    for prep in ["to", "on", "in", "over", "through", "across"] {
        if let Some(after) = strip_word(rest, prep) {
            match leading_target(after, hub) {
                Some((t, tail)) => {
                    target = t;
                    rest = tail;
                }
                None => {
                    // A speaker that is not connected: name it back,
                    // never announce somewhere else.
                    let named = after
                        .split([',', ':'])
                        .next()
                        .unwrap_or("")
                        .split(" that ")
                        .next()
                        .unwrap_or("")
                        .split(' ')
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(" ");
                    let named = named.trim_start_matches("the ").trim();
                    return AnnounceFrame::Ask(unknown(named, hub));
                }
            }
            break;
        }
    }
    let message = message_of(rest);
    if message.is_empty() {
        return AnnounceFrame::Ask("What should I announce?".into());
    }
    AnnounceFrame::Send { target, message }
}

/// "tell X (that|to) message", "let X know (that) message": only when X is
/// a connected speaker or everyone.
fn tell_form(rest: &str, let_form: bool, hub: &Announcements) -> Option<AnnounceFrame> {
    let (target, tail) = leading_target(rest, hub)?;
    let tail = if let_form {
        strip_word(tail, "know")?
    } else {
        tail
    };
    // "tell the kitchen to come down" → "Come down."
    let tail = strip_word(tail, "to").unwrap_or(tail);
    let message = message_of(tail);
    if message.is_empty() {
        return Some(AnnounceFrame::Ask(format!(
            "What should I tell {}?",
            target_words(&target)
        )));
    }
    Some(AnnounceFrame::Send { target, message })
}

/// "say message in|on|through|over X": only when X is a connected speaker
/// or everyone.
fn say_form(rest: &str, hub: &Announcements) -> Option<AnnounceFrame> {
    for prep in [" in ", " on ", " through ", " over ", " to "] {
        let mut from = 0;
        while let Some(at) = rest[from..].find(prep) {
            let at = from + at;
            let tail = &rest[at + prep.len()..];
            if let Some((target, after)) = leading_target(tail, hub) {
                if after.is_empty() || after == "speaker" || after == "speakers" {
                    let message = message_of(&rest[..at]);
                    if message.is_empty() {
                        return None;
                    }
                    return Some(AnnounceFrame::Send { target, message });
                }
            }
            from = at + 1;
        }
    }
    None
}

fn target_words(target: &Target) -> String {
    match target {
        Target::All => "everyone".into(),
        Target::Named(n) => format!("the {n}"),
    }
}

fn unknown(named: &str, hub: &Announcements) -> String {
    let known = hub.names();
    if known.is_empty() {
        return AnnounceError::NoSpeakers.to_string();
    }
    if named.is_empty() {
        return "Which speaker should I announce on?".into();
    }
    hub.send(Some(named), "x")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| "Which speaker should I announce on?".into())
}

/// Reads an announcement sentence; flags it for `announce_send`.
pub struct AnnounceRead;

impl Action for AnnounceRead {
    fn name(&self) -> &'static str {
        "announce_read"
    }

    fn changes_state(&self) -> bool {
        false
    }

    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let out = match frame(&call.text, &env.announcements) {
            None => ActionOutput::failed(""),
            Some(AnnounceFrame::Ask(question)) => ActionOutput::said(question),
            Some(AnnounceFrame::Send { .. }) if !env.announcements.any() => {
                ActionOutput::said(AnnounceError::NoSpeakers.to_string())
            }
            Some(AnnounceFrame::Send { target, message }) => {
                let target = match target {
                    Target::All => Value::Null,
                    Target::Named(n) => Value::String(n),
                };
                return Ok(ActionOutput::said("")
                    .with_state(SEND_FLAG, json!({"target": target, "message": message})));
            }
        };
        Ok(out.with_state(SEND_FLAG, Value::Null))
    }
}

/// Sends what `announce_read` flagged.
pub struct AnnounceSend;

impl Action for AnnounceSend {
    fn name(&self) -> &'static str {
        "announce_send"
    }

    fn changes_state(&self) -> bool {
        true
    }

    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let flagged = call.state.get(SEND_FLAG).cloned().unwrap_or(Value::Null);
        let message = flagged
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let target = flagged.get("target").and_then(Value::as_str);
        let said = match env.announcements.send(target, &message) {
            Ok(sent) => match target {
                Some(_) => format!("Okay, I told the {}.", sent.join(" and the ")),
                None if sent.len() == 1 => format!("Okay, announced on the {}.", sent[0]),
                None => "Okay, announced on every speaker.".to_string(),
            },
            Err(e) => e.to_string(),
        };
        Ok(ActionOutput::said(said).with_state(SEND_FLAG, Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub() -> (Announcements, Vec<crate::device::announce::Registration>) {
        let hub = Announcements::default();
        let regs = vec![
            hub.register(&["kitchen", "Kitchen Voice"]),
            hub.register(&["kids room", "Satellite One"]),
        ];
        (hub, regs)
    }

    fn send(target: Option<&str>, message: &str) -> Option<AnnounceFrame> {
        Some(AnnounceFrame::Send {
            target: target.map_or(Target::All, |t| Target::Named(t.into())),
            message: message.into(),
        })
    }

    #[test]
    fn the_forms_that_announce() {
        let (h, _r) = hub();
        let cases = [
            (
                "Tell the kitchen dinner is ready",
                send(Some("kitchen"), "dinner is ready"),
            ),
            (
                "tell the kitchen that dinner is ready.",
                send(Some("kitchen"), "dinner is ready"),
            ),
            (
                "Please tell the kitchen speaker to come down",
                send(Some("kitchen"), "come down"),
            ),
            (
                "let the kids room know it's bedtime",
                send(Some("kids room"), "it's bedtime"),
            ),
            ("Announce dinner is ready", send(None, "dinner is ready")),
            (
                "announce that the car is here!",
                send(None, "the car is here"),
            ),
            (
                "Can you announce in the kitchen that the food's here",
                send(Some("kitchen"), "the food's here"),
            ),
            (
                "broadcast to everyone: we leave in five minutes",
                send(None, "we leave in five minutes"),
            ),
            (
                "make an announcement on the kitchen voice, lunch time",
                send(Some("kitchen voice"), "lunch time"),
            ),
            (
                "say dinner is ready in the kitchen",
                send(Some("kitchen"), "dinner is ready"),
            ),
            (
                "tell everyone the movie starts now",
                send(None, "the movie starts now"),
            ),
            (
                "Please, tell the kitchen, dinner is ready.",
                send(Some("kitchen"), "dinner is ready"),
            ),
            (
                "Announce: we leave in 5 minutes",
                send(None, "we leave in 5 minutes"),
            ),
            (
                "could you let everybody know that the car's here",
                send(None, "the car's here"),
            ),
        ];
        for (said, want) in cases {
            assert_eq!(frame(said, &h), want, "{said}");
        }
    }

    #[test]
    fn sentences_that_are_not_announcements_fall_through() {
        let (h, _r) = hub();
        for said in [
            "tell me a joke",
            "tell me the time",
            "tell the time",
            "tell me about the kitchen",
            "say hello",
            "say something funny",
            "let me know when the timer ends",
            "what did the kitchen say",
            "set a timer for dinner",
            "tell the garage dinner is ready",
            "say hello in french",
        ] {
            assert_eq!(frame(said, &h), None, "{said}");
        }
    }

    #[test]
    fn unsure_means_asking_back() {
        let (h, _r) = hub();
        assert_eq!(
            frame("announce in the garage that dinner is ready", &h),
            Some(AnnounceFrame::Ask(
                "I don't know a speaker called garage; I can announce on kids room or kitchen."
                    .into()
            ))
        );
        assert_eq!(
            frame("announce", &h),
            Some(AnnounceFrame::Ask("What should I announce?".into()))
        );
        assert_eq!(
            frame("tell the kitchen", &h),
            Some(AnnounceFrame::Ask("What should I tell the kitchen?".into()))
        );
        let empty = Announcements::default();
        assert_eq!(
            frame("announce to the kitchen that hi", &empty),
            Some(AnnounceFrame::Ask(AnnounceError::NoSpeakers.to_string()))
        );
        // With no speaker at all, "tell the kitchen …" is not known as one.
        assert_eq!(frame("tell the kitchen hi", &empty), None);
    }

    #[test]
    fn read_flags_and_send_delivers_only_there() {
        let (h, regs) = hub();
        let dir = tempfile::tempdir().unwrap();
        let mut env = ActionEnv::local(crate::store::Store::open_in(dir.path()).unwrap(), "u");
        env.announcements = h.clone();
        let call = ActionCall {
            text: "tell the kitchen dinner is ready".into(),
            ..Default::default()
        };
        let read = AnnounceRead.run(&call, &env).unwrap();
        assert!(read.ok);
        assert!(regs[0].pending().is_empty(), "reading sends nothing");
        let mut call = call;
        call.state = read.set_state.clone().into_iter().collect();
        let sent = AnnounceSend.run(&call, &env).unwrap();
        assert_eq!(sent.say, "Okay, I told the kitchen.");
        assert_eq!(regs[0].pending()[0].text, "Dinner is ready.");
        assert!(regs[1].pending().is_empty());
        // Not an announcement: fails silently, nothing flagged.
        let call = ActionCall {
            text: "tell me a joke".into(),
            ..Default::default()
        };
        let out = AnnounceRead.run(&call, &env).unwrap();
        assert!(!out.ok);
    }
}
