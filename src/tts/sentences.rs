//! Cut a streamed answer into sentences as its tokens arrive, so each one
//! can be spoken as soon as it is complete (R-PIPE 7: speech starts before
//! the LLM is done).
//!
//! A sentence ends at `.`, `!`, `?` or `…` followed by whitespace, or at a
//! line break. Decimals (`3.5`), times (`6:05`), list numbers (`1. `) and
//! common abbreviations (`Dr. `) don't end one. A very long sentence is cut
//! at a comma so the first audio never waits for a rambling paragraph.
//! Each sentence is cleaned with [`super::cleanup::for_speech`]
//! (and action tags like `[[todo.add: milk]]` are dropped) before it is
//! returned.

use std::sync::OnceLock;

use regex::Regex;

use super::cleanup;

/// Past this many characters without a sentence end, cut at a comma or
/// space.
const MAX_CHARS: usize = 220;

const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "st", "vs", "etc", "e.g", "i.e", "jr", "sr", "prof", "approx", "no",
];

/// Incremental splitter: [`push`](Self::push) tokens, get finished
/// sentences; [`finish`](Self::finish) returns the rest.
#[derive(Debug, Default)]
pub struct SentenceSplitter {
    buffer: String,
}

impl SentenceSplitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a token; return every sentence it completed, cleaned for speech
    /// (empty ones are skipped).
    pub fn push(&mut self, token: &str) -> Vec<String> {
        self.buffer.push_str(token);
        let mut out = Vec::new();
        while let Some(cut) = find_cut(&self.buffer) {
            let rest = self.buffer.split_off(cut);
            let sentence = std::mem::replace(&mut self.buffer, rest);
            if let Some(clean) = clean(&sentence) {
                out.push(clean);
            }
        }
        out
    }

    /// The unfinished tail, cleaned (the answer ended without a final
    /// period).
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buffer);
        clean(&rest)
    }

    /// Whether any text is waiting for its sentence to end.
    pub fn is_empty(&self) -> bool {
        self.buffer.trim().is_empty()
    }
}

/// Split a whole text at once (for `earshot say` and non-streamed answers).
pub fn split(text: &str) -> Vec<String> {
    let mut s = SentenceSplitter::new();
    let mut out = s.push(text);
    out.extend(s.finish());
    out
}

/// Cut a long first sentence at its first clause break (`,` `;` `:`) so
/// the first audio comes after synthesising a few words, not the whole
/// sentence. Both halves keep at least three words; short sentences and
/// sentences without a break come back whole. From six words on: a device
/// answer like "Today is Wednesday, December 2, 2026." took Piper ~200 ms
/// whole and about half that to its first clause (issue 21).
pub fn first_clause(sentence: &str) -> (String, Option<String>) {
    let words = sentence.split_whitespace().count();
    if words < 6 {
        return (sentence.to_string(), None);
    }
    let mut seen_words = 0;
    let mut prev_space = true;
    for (i, c) in sentence.char_indices() {
        if c.is_whitespace() {
            prev_space = true;
            continue;
        }
        if prev_space {
            seen_words += 1;
            prev_space = false;
        }
        if matches!(c, ',' | ';' | ':') && seen_words >= 3 {
            let rest = sentence[i + c.len_utf8()..].trim();
            let next_is_space = sentence[i + c.len_utf8()..]
                .chars()
                .next()
                .is_some_and(char::is_whitespace);
            if next_is_space && rest.split_whitespace().count() >= 3 {
                return (sentence[..=i].trim().to_string(), Some(rest.to_string()));
            }
        }
    }
    (sentence.to_string(), None)
}

/// Clean one sentence for speech; `None` when nothing speakable is left.
pub fn clean(sentence: &str) -> Option<String> {
    static TAG: OnceLock<Regex> = OnceLock::new();
    let tag = TAG.get_or_init(|| crate::small_regex::new(r"\[\[[^\]]*\]\]").expect("static regex"));
    let without_tags = tag.replace_all(sentence, " ");
    let cleaned = cleanup::for_speech(&without_tags);
    cleaned
        .chars()
        .any(char::is_alphanumeric)
        .then_some(cleaned)
}

/// Byte index just after the first sentence end in `text`, if complete.
fn find_cut(text: &str) -> Option<usize> {
    // Inside an unclosed code fence nothing is final yet.
    let limit = match text.matches("```").count() % 2 {
        0 => text.len(),
        _ => text.rfind("```").unwrap_or(text.len()),
    };
    // An unclosed action tag ("[[todo.add: mi") holds back what follows it.
    let limit = match (text[..limit].rfind("[["), text[..limit].rfind("]]")) {
        (Some(open), Some(close)) if close > open => limit,
        (Some(open), _) => open,
        _ => limit,
    };
    let scan = &text[..limit];
    let fences = closed_fences(scan);
    let chars: Vec<(usize, char)> = scan.char_indices().collect();
    for (i, &(pos, c)) in chars.iter().enumerate() {
        if let Some(&(_, end)) = fences
            .iter()
            .find(|(start, end)| pos >= *start && pos < *end)
        {
            // A whole code block is one (unspoken) piece.
            if pos + 1 == end {
                return Some(end);
            }
            continue;
        }
        if c == '\n' {
            if scan[..pos].trim().is_empty() {
                continue;
            }
            return Some(pos + 1);
        }
        let closing = matches!(c, '"' | '\'' | ')' | '”' | '’')
            && i > 0
            && matches!(chars[i - 1].1, '.' | '!' | '?' | '…');
        if !closing && !matches!(c, '.' | '!' | '?' | '…') {
            continue;
        }
        // Need to see what follows to know it ends the sentence.
        let Some(&(next_pos, next)) = chars.get(i + 1) else {
            break;
        };
        if matches!(next, '.' | '!' | '?' | '…' | '"' | '\'' | ')' | '”' | '’') {
            continue; // the run or the closing quote ends it
        }
        if !next.is_whitespace() {
            continue;
        }
        if c == '.' && !closing && !ends_sentence_at(&scan[..pos]) {
            continue;
        }
        return Some(next_pos);
    }
    if scan.chars().count() > MAX_CHARS {
        return long_cut(scan);
    }
    None
}

/// Byte ranges of complete ``` code blocks (from the opening fence to just
/// after the closing one).
fn closed_fences(text: &str) -> Vec<(usize, usize)> {
    let marks: Vec<usize> = text.match_indices("```").map(|(i, _)| i).collect();
    marks
        .chunks_exact(2)
        .map(|pair| (pair[0], pair[1] + 3))
        .collect()
}

/// Whether a `.` after `before` ends a sentence (not an abbreviation or a
/// list number).
fn ends_sentence_at(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    if word.is_empty() {
        return true;
    }
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return false;
    }
    // "1. " at the start of a line is a list number; a lone capital is an
    // initial ("J. R. R.").
    let line_start = before[..before.len() - word.len()]
        .chars()
        .rev()
        .find(|c| !c.is_whitespace() || *c == '\n')
        .is_none_or(|c| c == '\n');
    if word.chars().all(|c| c.is_ascii_digit()) && line_start {
        return false;
    }
    !(word.chars().count() == 1 && word.chars().all(char::is_uppercase))
}

/// Cut a too-long run at its last comma/semicolon (else its last space).
fn long_cut(scan: &str) -> Option<usize> {
    let window: usize = scan
        .char_indices()
        .nth(MAX_CHARS)
        .map(|(i, _)| i)
        .unwrap_or(scan.len());
    let head = &scan[..window];
    head.rfind([',', ';'])
        .map(|i| i + 1)
        .or_else(|| head.rfind(' ').map(|i| i + 1))
        .filter(|&i| i > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(tokens: &[&str]) -> Vec<String> {
        let mut s = SentenceSplitter::new();
        let mut out = Vec::new();
        for t in tokens {
            out.extend(s.push(t));
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn a_sentence_is_ready_as_soon_as_the_next_token_shows_its_end() {
        let mut s = SentenceSplitter::new();
        assert!(s.push("It is").is_empty());
        assert!(s.push(" 6:05 PM.").is_empty()); // could still be "PM.5"
        assert_eq!(s.push(" Anything"), vec!["It is 6:05 PM."]);
        assert!(s.push(" else?").is_empty());
        assert_eq!(s.finish().as_deref(), Some("Anything else?"));
    }

    #[test]
    fn numbers_abbreviations_and_lists_stay_whole() {
        assert_eq!(
            stream(&["Pi is 3.14 roughly. Dr. Smith agrees!", " Ok"]),
            vec!["Pi is 3.14 roughly.", "Dr. Smith agrees!", "Ok"]
        );
        assert_eq!(
            stream(&["Steps:\n1. Buy milk\n2. Call **Bob**\n"]),
            vec!["Steps:", "Buy milk", "Call Bob"]
        );
    }

    #[test]
    fn markdown_emoji_tags_and_code_are_not_spoken() {
        assert_eq!(
            stream(&[
                "Sure! 😀 ",
                "Added [[todo.add: ",
                "milk]] to your list. ",
                "```rust\nfn main() {}\n",
                "```",
                " Done."
            ]),
            vec!["Sure!", "Added to your list.", "Done."]
        );
    }

    #[test]
    fn quotes_and_runs_end_with_the_sentence() {
        assert_eq!(
            stream(&["He said \"go.\" Then?! left"]),
            vec!["He said \"go.\"", "Then?!", "left"]
        );
    }

    #[test]
    fn long_runs_are_cut_at_a_comma() {
        let long = format!("{}, and then {}", "word ".repeat(30), "more ".repeat(30));
        let out = stream(&[&long]);
        assert!(out.len() >= 2, "{out:?}");
        assert!(out.iter().all(|s| s.chars().count() <= MAX_CHARS + 5));
    }

    #[test]
    fn a_long_first_sentence_starts_with_its_first_clause() {
        assert_eq!(
            first_clause("Sure, I added milk and bread to your shopping list."),
            (
                "Sure, I added milk and bread to your shopping list.".to_string(),
                None
            )
        );
        assert_eq!(
            first_clause("The capital of France is Paris, a city on the Seine known for museums."),
            (
                "The capital of France is Paris,".to_string(),
                Some("a city on the Seine known for museums.".to_string())
            )
        );
        assert_eq!(
            first_clause("It's 6:05 PM."),
            ("It's 6:05 PM.".to_string(), None)
        );
        assert_eq!(
            first_clause("Today is Wednesday, December 2, 2026."),
            (
                "Today is Wednesday,".to_string(),
                Some("December 2, 2026.".to_string())
            )
        );
        // Five words: whole.
        assert_eq!(
            first_clause("Okay, the timer is cancelled."),
            ("Okay, the timer is cancelled.".to_string(), None)
        );
        assert_eq!(
            first_clause("One two three four five six seven 3,5 eight nine"),
            (
                "One two three four five six seven 3,5 eight nine".to_string(),
                None
            )
        );
    }

    #[test]
    fn split_never_panics_on_odd_text() {
        for text in [
            "",
            "...",
            "…",
            "\n\n",
            "é.ü!ß?",
            "[[",
            "]]x.",
            "```",
            "a.\u{200d} b",
        ] {
            let _ = split(text);
        }
    }
}
