//! Action tags an LLM may write in its answer (R-TREE `execute_tags`):
//! `[[todo.add: milk]]`, `[[volume.up]]`. They are applied as device
//! actions and removed from what is stored and spoken.

use std::sync::OnceLock;

use regex::Regex;

/// One tag found in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub name: String,
    pub arg: String,
}

fn tag_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        crate::small_regex::new(
            r"\[\[\s*([A-Za-z_]+(?:\.[A-Za-z_]+)*)\s*(?::\s*([^\[\]]*?))?\s*\]\]",
        )
        .expect("static regex")
    })
}

/// The answer without its tags (spaces tidied) and the tags in order.
pub fn extract(text: &str) -> (String, Vec<Tag>) {
    let tags = tag_re()
        .captures_iter(text)
        .map(|c| Tag {
            name: c[1].to_ascii_lowercase(),
            arg: c
                .get(2)
                .map(|m| m.as_str().trim().to_string())
                .unwrap_or_default(),
        })
        .collect();
    let stripped = tag_re().replace_all(text, " ");
    let clean = stripped
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" .", ".")
        .replace(" ,", ",");
    (clean.trim().to_string(), tags)
}

/// Every tag the tree applies: (tag, device action, argument it fills,
/// when the model should write it). [`action_for`] and [`prompt_rules`]
/// read this one table, so the prompt never names a tag that does nothing.
pub const TAGS: &[(&str, &str, &str, &str)] = &[
    (
        "todo.add",
        "todo_add",
        "item",
        "[[todo.add: ITEM]] when the user asks you to add ITEM to their to-do list",
    ),
    (
        "todo.complete",
        "todo_complete",
        "item",
        "[[todo.complete: ITEM]] when they say ITEM on the list is done",
    ),
    (
        "todo.delete",
        "todo_delete_request",
        "item",
        "[[todo.delete: ITEM]] when they ask to remove ITEM from the list (they are asked to confirm)",
    ),
    (
        "memory.remember",
        "memory_remember",
        "fact",
        "[[memory.remember: FACT]] when they ask you to remember FACT about them",
    ),
    (
        "volume.up",
        "volume_up",
        "level",
        "[[volume.up]] when they ask you to speak louder",
    ),
    (
        "volume.down",
        "volume_down",
        "level",
        "[[volume.down]] when they ask you to speak more quietly",
    ),
    (
        "dnd.on",
        "dnd_on",
        "",
        "[[dnd.on]] when they ask not to be disturbed",
    ),
    (
        "dnd.off",
        "dnd_off",
        "",
        "[[dnd.off]] when they ask to end do-not-disturb",
    ),
];

/// The device action a tag runs and the argument name it fills.
pub fn action_for(tag: &str) -> Option<(&'static str, &'static str)> {
    TAGS.iter()
        .find(|(name, ..)| *name == tag)
        .map(|(_, action, arg, _)| (*action, *arg))
}

/// The lines added to the system prompt of an `llm_stream` node whose
/// answer goes through `execute_tags`: which tags exist and when to write
/// them (without this the model never knows it can act).
pub fn prompt_rules() -> String {
    let mut out = String::from(
        "You can change the device by writing an action tag anywhere in your answer; \
the device carries it out and never speaks it. Write a tag only when the user asks for that \
change in this message, at most one per change, and also say in words what you did. The tags:",
    );
    for (_, _, _, when) in TAGS {
        out.push_str("\n- ");
        out.push_str(when);
    }
    out
}

/// Longest `[[…` held back waiting for its `]]`; longer is not a tag.
const MAX_TAG_BYTES: usize = 256;

/// Removes action tags from streamed text as it arrives (R-TREE
/// `execute_tags`: the `content` frames carry what is spoken, never a
/// tag). Text from an unclosed `[[` is held back until its `]]` comes (a
/// tag split across chunks included); a `[[…]]` that is no tag, or an
/// unclosed one, is let through unchanged. Around a removed tag, spaces
/// are tidied as [`extract`] does: one space stays, none before `.`, `,`
/// or the end. Text without tags comes out exactly as it went in.
#[derive(Debug, Default)]
pub struct StreamStripper {
    /// Raw text not yet decided: an open `[[…` or a lone trailing `[`.
    held: String,
    /// Whitespace after the last shown text, not shown yet (a tag after
    /// it may swallow it).
    spaces: String,
    /// A tag was removed and no visible text has followed yet.
    after_tag: bool,
    /// Some visible text was shown.
    shown: bool,
}

impl StreamStripper {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed a chunk; returns the text that can be shown now.
    pub fn push(&mut self, chunk: &str) -> String {
        self.held.push_str(chunk);
        let mut out = String::new();
        loop {
            let Some(start) = self.held.find("[[") else {
                // A trailing '[' may start a tag in the next chunk.
                let cut = self.held.len() - usize::from(self.held.ends_with('['));
                let text: String = self.held.drain(..cut).collect();
                self.show(&text, &mut out);
                return out;
            };
            let before: String = self.held.drain(..start).collect();
            self.show(&before, &mut out);
            match self.held.find("]]") {
                Some(len) => {
                    let candidate: String = self.held.drain(..len + 2).collect();
                    let whole_tag = tag_re()
                        .find(&candidate)
                        .is_some_and(|m| m.len() == candidate.len());
                    if whole_tag {
                        self.after_tag = true;
                    } else {
                        self.show(&candidate, &mut out);
                    }
                }
                None if self.held.len() > MAX_TAG_BYTES => {
                    // Not a tag: show the brackets and go on after them.
                    let brackets: String = self.held.drain(..2).collect();
                    self.show(&brackets, &mut out);
                }
                None => return out,
            }
        }
    }

    /// The stream ended: whatever is still held (an unclosed `[[…` is not
    /// a tag and is shown as it is).
    pub fn finish(&mut self) -> String {
        let held = std::mem::take(&mut self.held);
        let mut out = String::new();
        self.show(&held, &mut out);
        if !self.after_tag {
            out.push_str(&self.spaces);
        }
        self.spaces.clear();
        out
    }

    /// Show `text`, settling the spaces around a removed tag; its trailing
    /// spaces wait in `spaces`.
    fn show(&mut self, text: &str, out: &mut String) {
        let body = text.trim_start_matches(char::is_whitespace);
        self.spaces.push_str(&text[..text.len() - body.len()]);
        let visible = body.trim_end_matches(char::is_whitespace);
        if visible.is_empty() {
            return;
        }
        if self.after_tag {
            let punct = visible.starts_with(['.', ',']);
            if !self.spaces.is_empty() && !punct && self.shown {
                out.push(' ');
            }
            self.after_tag = false;
        } else {
            out.push_str(&self.spaces);
        }
        self.spaces.clear();
        out.push_str(visible);
        self.spaces.push_str(&body[visible.len()..]);
        self.shown = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_and_strips() {
        let (clean, tags) = extract("Sure, I added it [[todo.add: buy milk]]. [[volume.up]] Done!");
        assert_eq!(clean, "Sure, I added it. Done!");
        assert_eq!(
            tags,
            vec![
                Tag {
                    name: "todo.add".into(),
                    arg: "buy milk".into()
                },
                Tag {
                    name: "volume.up".into(),
                    arg: String::new()
                },
            ]
        );
        let (clean, tags) = extract("No tags [here] at all.");
        assert_eq!((clean.as_str(), tags.len()), ("No tags [here] at all.", 0));
        assert_eq!(action_for("todo.add"), Some(("todo_add", "item")));
        assert_eq!(action_for("rm.rf"), None);
    }

    /// Every way of cutting `text` into two or three chunks (at every char
    /// boundary) streams the same as one push.
    fn every_split(text: &str) -> Vec<Vec<&str>> {
        let cuts: Vec<usize> = (0..=text.len())
            .filter(|i| text.is_char_boundary(*i))
            .collect();
        let mut out = Vec::new();
        for &i in &cuts {
            out.push(vec![&text[..i], &text[i..]]);
            for &j in cuts.iter().filter(|j| **j >= i) {
                out.push(vec![&text[..i], &text[i..j], &text[j..]]);
            }
        }
        out
    }

    fn stream(chunks: &[&str]) -> String {
        let mut s = StreamStripper::new();
        let mut out: String = chunks.iter().map(|c| s.push(c)).collect();
        out.push_str(&s.finish());
        out
    }

    #[test]
    fn streamed_tags_are_removed_at_every_split() {
        let tagged = "Sure, I added it [[todo.add: buy flour]]. [[volume.up]] Done – ça va!";
        let (clean, _) = extract(tagged);
        assert_eq!(clean, "Sure, I added it. Done – ça va!");
        for chunks in every_split(tagged) {
            assert_eq!(stream(&chunks), clean, "{chunks:?}");
        }
        // Byte by byte (one char per chunk).
        let chars: Vec<String> = tagged.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(stream(&refs), clean);
    }

    #[test]
    fn text_without_tags_streams_unchanged() {
        for text in [
            "No tags [here] at all.  ",
            "A list [[1, 2], [3]] stays.",
            "Unclosed [[todo.add: milk and then it ends",
            "Ends with [",
            "[[not a tag!]] stays",
        ] {
            for chunks in every_split(text) {
                assert_eq!(stream(&chunks), text, "{chunks:?}");
            }
        }
        let long = format!("[[{}", "x".repeat(MAX_TAG_BYTES + 10));
        let mut s = StreamStripper::new();
        assert_eq!(s.push(&long), long, "an overlong [[ is not held");
    }

    #[test]
    fn a_leading_tag_leaves_no_space() {
        assert_eq!(stream(&["[[dnd.on]] ", "Okay."]), "Okay.");
        assert_eq!(stream(&["Okay. ", "[[dnd.on]]"]), "Okay.");
    }

    #[test]
    fn the_prompt_names_every_tag_that_runs() {
        let rules = prompt_rules();
        for (tag, action, ..) in TAGS {
            assert!(rules.contains(&format!("[[{tag}")), "{tag}");
            assert_eq!(action_for(tag).map(|a| a.0), Some(*action));
        }
    }
}
