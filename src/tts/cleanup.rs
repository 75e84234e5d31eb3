//! Answers are spoken: markdown, emoji, code fences and `<think>` blocks
//! are removed before an answer is stored or spoken (R-NODE).

use std::sync::OnceLock;

use regex::Regex;

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| crate::small_regex::new(pattern).expect("static regex"))
}

/// Whether a character is an emoji or pictograph (dropped from speech).
pub fn is_emoji(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF   // pictographs, emoticons, transport, symbols
        | 0x2600..=0x27BF   // misc symbols, dingbats
        | 0x2B00..=0x2BFF   // arrows, stars
        | 0xFE0F | 0xFE0E   // variation selectors
        | 0x200D            // zero-width joiner
        | 0xE0020..=0xE007F // tags
    )
}

/// Clean a whole answer for speech and storage.
pub fn for_speech(text: &str) -> String {
    static FENCE: OnceLock<Regex> = OnceLock::new();
    static LINK: OnceLock<Regex> = OnceLock::new();
    static IMAGE: OnceLock<Regex> = OnceLock::new();
    static HEADING: OnceLock<Regex> = OnceLock::new();
    static BULLET: OnceLock<Regex> = OnceLock::new();
    static NUMBERED: OnceLock<Regex> = OnceLock::new();
    static EMPH: OnceLock<Regex> = OnceLock::new();
    static UNDER: OnceLock<Regex> = OnceLock::new();
    static RULE: OnceLock<Regex> = OnceLock::new();
    static TABLE: OnceLock<Regex> = OnceLock::new();
    static URL: OnceLock<Regex> = OnceLock::new();

    let text = crate::llm::think::strip_think(text);
    // Code is not read aloud.
    let text = re(&FENCE, r"(?s)```.*?(```|$)").replace_all(&text, " ");
    let text = re(&IMAGE, r"!\[([^\]]*)\]\([^)]*\)").replace_all(&text, "$1");
    let text = re(&LINK, r"\[([^\]]+)\]\([^)]*\)").replace_all(&text, "$1");
    let text = re(&RULE, r"(?m)^\s*([-*_]\s*){3,}$").replace_all(&text, " ");
    let text = re(&TABLE, r"(?m)^\s*\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*$").replace_all(&text, " ");
    let text = re(&HEADING, r"(?m)^\s{0,3}#{1,6}\s*").replace_all(&text, "");
    let text = re(&BULLET, r"(?m)^\s*[-*+•]\s+").replace_all(&text, "");
    let text = re(&NUMBERED, r"(?m)^\s*\d+[.)]\s+").replace_all(&text, "");
    let text = re(&EMPH, r"\*{1,3}([^*\n]+?)\*{1,3}").replace_all(&text, "$1");
    let text = re(&UNDER, r"(^|\W)_{1,3}([^_\n]+?)_{1,3}(\W|$)").replace_all(&text, "$1$2$3");
    let text = re(&URL, r"https?://\S+").replace_all(&text, "");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.trim().trim_start_matches('>').trim().replace('|', " ");
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            // A line break ends a sentence when the line has no punctuation.
            let last = out.chars().last().unwrap_or(' ');
            if !matches!(last, '.' | '!' | '?' | ':' | ',' | ';') {
                out.push('.');
            }
            out.push(' ');
        }
        out.push_str(&line);
    }
    let cleaned: String = out
        .chars()
        .filter(|c| !is_emoji(*c) && !matches!(c, '*' | '`' | '#' | '~'))
        .collect();
    let collapsed = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed
        .replace(" .", ".")
        .replace(" ,", ",")
        .replace(" !", "!")
        .replace(" ?", "?")
        .replace("..", ".")
        .trim()
        .to_string()
}

/// A cheap per-token filter for streamed display: drops emphasis marks,
/// backticks, heading marks and emoji as they arrive. The stored answer
/// still goes through [`for_speech`].
#[derive(Debug, Default)]
pub struct StreamCleaner {
    at_line_start: bool,
}

impl StreamCleaner {
    pub fn new() -> Self {
        Self {
            at_line_start: true,
        }
    }

    pub fn push(&mut self, token: &str) -> String {
        let mut out = String::with_capacity(token.len());
        for c in token.chars() {
            if is_emoji(c) || matches!(c, '*' | '`') {
                continue;
            }
            if c == '#' && self.at_line_start {
                continue;
            }
            if c == '\n' {
                self.at_line_start = true;
            } else if !c.is_whitespace() {
                self.at_line_start = false;
            }
            out.push(c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_flattened_to_sentences() {
        let md = "## Answer\n\n**Paris** is the *capital* of France.\n- It has the `Louvre`\n- And [the Eiffel Tower](https://x.y)\n";
        assert_eq!(
            for_speech(md),
            "Answer. Paris is the capital of France. It has the Louvre. And the Eiffel Tower"
        );
    }

    #[test]
    fn code_emoji_and_think_are_removed() {
        let text = "<think>let me see</think>Sure 😀! Here:\n```python\nprint(1)\n```\nDone 👍🏽.";
        assert_eq!(for_speech(text), "Sure! Here: Done.");
        assert_eq!(for_speech("Unclosed <think>secret"), "Unclosed");
    }

    #[test]
    fn plain_text_is_unchanged() {
        let plain = "It is 3 pm. Your meeting with Ana is at 4, don't be late!";
        assert_eq!(for_speech(plain), plain);
        assert_eq!(for_speech("snake_case stays"), "snake_case stays");
        assert_eq!(for_speech("2 * 3 = 6"), "2 3 = 6");
    }

    #[test]
    fn stream_cleaner_drops_marks() {
        let mut c = StreamCleaner::new();
        let got: String = ["## Ti", "tle\n", "**bo", "ld** 🎉 `x`"]
            .iter()
            .map(|t| c.push(t))
            .collect();
        assert_eq!(got, " Title\nbold  x");
    }
}
