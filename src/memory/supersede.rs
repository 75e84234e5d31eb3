//! Supersession on the device, without an LLM: "my car is parked on level
//! 5" after "my car is on level 3" replaces the older memory (its old text
//! is kept in `memory_history`, never recalled).
//!
//! Two statements are about the same thing when they have the same
//! *frame* — the same subject (the words before the verb: "my car", "i",
//! "the meeting with ana") and the same single-valued verb ("is/are/am",
//! "live", "work") — and their embeddings are close
//! (`memory.supersede_similarity`, cosine). The frame keeps apart what
//! similarity alone confuses ("my sister lives in Lisbon" / "my brother
//! lives in Lisbon" are close in meaning); the similarity keeps apart two
//! facts about one subject ("my car is blue" / "my car is parked on level
//! 5"). Verbs that add rather than replace ("I like jazz", "I have a dog")
//! never supersede.

/// A statement's subject and verb, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub subject: String,
    pub verb: &'static str,
}

/// The single-valued verbs: a new statement with one replaces the old.
const VERBS: &[(&str, &str)] = &[
    ("is", "be"),
    ("are", "be"),
    ("am", "be"),
    ("was", "be"),
    ("were", "be"),
    ("live", "live"),
    ("lives", "live"),
    ("work", "work"),
    ("works", "work"),
];

/// Longest subject, in words: past this it is not a short statement.
const MAX_SUBJECT_WORDS: usize = 6;

/// Lower-case words, contractions opened ("i'm" → "i am", "car's on" is
/// left alone: "'s" is read as a possessive).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text
        .to_lowercase()
        .replace('’', "'")
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
    {
        let w = raw.trim_matches('\'');
        if w.is_empty() {
            continue;
        }
        match w {
            "i'm" => out.extend(["i".to_string(), "am".to_string()]),
            "we're" | "they're" | "you're" => {
                let (s, _) = w.split_once('\'').unwrap_or((w, ""));
                out.extend([s.to_string(), "are".to_string()]);
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

/// The statement's frame, or `None` when it has no single-valued verb
/// after a short subject.
pub fn frame(text: &str) -> Option<Frame> {
    let words = words(text);
    let at = words
        .iter()
        .position(|w| VERBS.iter().any(|(v, _)| v == w))?;
    if at == 0 || at > MAX_SUBJECT_WORDS || at + 1 >= words.len() {
        return None;
    }
    let verb = VERBS.iter().find(|(v, _)| *v == words[at])?.1;
    Some(Frame {
        subject: words[..at].join(" "),
        verb,
    })
}

/// Does `new` replace `old`, given the cosine of their embeddings?
pub fn supersedes(old: &str, new: &str, cosine: f32, threshold: f32) -> bool {
    if cosine < threshold {
        return false;
    }
    match (frame(old), frame(new)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        let f = |s: &str, v: &'static str| {
            Some(Frame {
                subject: s.into(),
                verb: v,
            })
        };
        assert_eq!(frame("My car is parked on level 5."), f("my car", "be"));
        assert_eq!(frame("I'm allergic to peanuts"), f("i", "be"));
        assert_eq!(frame("I live in Porto"), f("i", "live"));
        assert_eq!(
            frame("The meeting with Ana is on Friday"),
            f("the meeting with ana", "be")
        );
        assert_eq!(
            frame("my wife's birthday is in May"),
            f("my wife's birthday", "be")
        );
        assert_eq!(frame("I like jazz"), None);
        assert_eq!(frame("is it"), None);
        assert_eq!(frame("my car is"), None);
    }

    #[test]
    fn the_frame_decides_when_the_meaning_is_close() {
        // Cosines as MiniLM gives them (tests/memory.rs checks the real model).
        assert!(supersedes(
            "my car is on level 3",
            "my car is parked on level 5",
            0.80,
            0.55
        ));
        assert!(!supersedes(
            "my sister lives in Lisbon",
            "my brother lives in Lisbon",
            0.88,
            0.55
        ));
        assert!(!supersedes("I like jazz", "I like rock", 0.60, 0.55));
        assert!(!supersedes(
            "my car is blue",
            "my car is parked on level 5",
            0.46,
            0.55
        ));
        assert!(!supersedes(
            "my birthday is in May",
            "my wife's birthday is in May",
            0.9,
            0.55
        ));
    }
}
