//! Removes `<think>…</think>` reasoning that some models (Qwen, DeepSeek)
//! put before the answer — also an unclosed one — from a token stream.

/// Incremental filter: push pieces, get the visible text back. Holds back
/// only the few bytes that could be the start of a tag.
#[derive(Debug, Default)]
pub struct ThinkFilter {
    pending: String,
    inside: bool,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkFilter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed a piece of text; returns what can be shown now.
    pub fn push(&mut self, piece: &str) -> String {
        self.pending.push_str(piece);
        let mut out = String::new();
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            if let Some(pos) = self.pending.find(tag) {
                if !self.inside {
                    out.push_str(&self.pending[..pos]);
                }
                self.pending.drain(..pos + tag.len());
                self.inside = !self.inside;
                continue;
            }
            // Keep a suffix that could still become the tag.
            let keep = partial_suffix(&self.pending, tag);
            let cut = self.pending.len() - keep;
            if !self.inside {
                out.push_str(&self.pending[..cut]);
            }
            self.pending.drain(..cut);
            return out;
        }
    }

    /// End of stream: a held-back partial tag is shown if we are outside a
    /// think block; an unclosed think block is dropped.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        if self.inside {
            String::new()
        } else {
            rest
        }
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            text.len() >= n
                && text.is_char_boundary(text.len() - n)
                && tag.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

/// Remove think blocks from a whole text.
pub fn strip_think(text: &str) -> String {
    let mut f = ThinkFilter::new();
    let mut out = f.push(text);
    out.push_str(&f.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_closed_and_unclosed_blocks() {
        assert_eq!(strip_think("<think>hmm</think>Hello"), "Hello");
        assert_eq!(strip_think("A<think>x</think>B<think>y</think>C"), "ABC");
        assert_eq!(strip_think("Hi <think>never closed"), "Hi ");
        assert_eq!(strip_think("a < b and <thin"), "a < b and <thin");
    }

    #[test]
    fn token_by_token_matches_whole() {
        let text = "<think>reason about it</think>The answer is 4. <think>more";
        let whole = strip_think(text);
        let mut f = ThinkFilter::new();
        let mut streamed = String::new();
        for ch in text.chars() {
            streamed.push_str(&f.push(&ch.to_string()));
        }
        streamed.push_str(&f.finish());
        assert_eq!(streamed, whole);
        assert_eq!(whole, "The answer is 4. ");
    }
}
