//! Regexes for short texts: an utterance, a reply, a sentence to speak.
//!
//! A `regex::Regex` keeps a search cache per thread that used it (up to
//! eight, by thread id), and each cache holds a lazy DFA: two sparse sets
//! sized to the pattern's NFA, which Unicode classes under `(?i)` make
//! thousands of states long, plus the DFA states it built, up to 2 MB.
//! earshot's understanding runs a few hundred static patterns on the
//! turn's thread, the look's and the prepared answer's (threads that come
//! and go), so those caches were ~35 MB of `earshot run`'s resident memory
//! after 48 turns and grew with every new thread (issue 21, point 4;
//! heaptrack in notes/latency.md, stop 60).
//!
//! Without the lazy DFA a search on text this short runs the bounded
//! backtracker or the PikeVM: the same matches (the crate guarantees it
//! for every engine) in about twice the time of a tiny search — ~0.3 µs
//! instead of ~0.17 µs per search on the understanding set, measured —
//! and a cache of a few kilobytes. Documents (knowledge, mail bodies)
//! keep the crate's defaults: on long text the lazy DFA is worth its
//! memory.

use regex::{Regex, RegexBuilder};

/// Lazy-DFA cache capacity: below any pattern's minimum, so the lazy DFA
/// is never built and a search never allocates its cache.
const NO_LAZY_DFA: usize = 1;

/// `Regex::new` for patterns run on short texts (see the module doc).
pub fn new(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .dfa_size_limit(NO_LAZY_DFA)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_the_default_regex_finds() {
        let patterns = [
            r"(?i)\b(?:set|start)\s+(?:a\s+)?timer\s+for\s+(?P<n>\w+)\s+(?P<u>minutes?|hours?)\b",
            r"(?i)^(?:what'?s|what is)\s+the\s+time\s+in\s+(?P<p>[\w' .-]+?)\??$",
            r"(?i)\bcrème\s+fraîche\b",
            r"[^\s,.!?]+",
        ];
        let texts = [
            "Set a timer for ten minutes please",
            "what's the time in São Paulo?",
            "Add CRÈME fraîche to my list",
            "start timer for 3 hours.",
            "",
        ];
        for p in patterns {
            let small = new(p).unwrap();
            let default = Regex::new(p).unwrap();
            for t in texts {
                let a: Vec<_> = small.captures_iter(t).map(|c| format!("{c:?}")).collect();
                let b: Vec<_> = default.captures_iter(t).map(|c| format!("{c:?}")).collect();
                assert_eq!(a, b, "{p} on {t:?}");
            }
        }
        assert!(new("(unclosed").is_err());
    }
}
