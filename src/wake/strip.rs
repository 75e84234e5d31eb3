//! The wake word out of the transcript.
//!
//! After a detection the loop hands STT the audio from a little before the
//! wake word (so a request said in the same breath loses no word), which
//! means whisper usually hears the wake word too: "Hey Jarvis, what time
//! is it?". [`strip`] removes it — and anything before it — when the
//! word's last part (the name: `jarvis`, `alexa`, `mycroft`) is among the
//! first few words, spelled as heard or close to it ("Jervis", "Alexa's").

/// Words at the start of a transcript the name may be found among.
const LOOK: usize = 6;

/// The transcript without the wake word. `words` are the configured wake
/// words (`hey_jarvis`, `hey_jarvis_v0.1`); the result is trimmed of the
/// punctuation that followed the name and starts with a capital.
pub fn strip(text: &str, words: &[String]) -> String {
    let names: Vec<String> = words.iter().filter_map(|w| name_of(w)).collect();
    if names.is_empty() {
        return text.trim().to_string();
    }
    // Word spans: (start, end) byte offsets of alphanumeric runs.
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let inside = c.is_alphanumeric() || c == '\'';
        match (inside, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    let hit = spans.iter().take(LOOK).position(|&(s, e)| {
        let word = normalise(&text[s..e]);
        names.iter().any(|n| close(&word, n))
    });
    let Some(i) = hit else {
        return text.trim().to_string();
    };
    let rest = text[spans[i].1..]
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .trim_end();
    capitalise(rest)
}

/// Whether `text` says the name of wake word `word` (`hey_jarvis` →
/// "Jarvis", "Jarvis's", or a spelling within [`close`] of it) anywhere:
/// the device's own answer that does will fire its own detector.
pub fn mentions(text: &str, word: &str) -> bool {
    let Some(name) = name_of(word) else {
        return false;
    };
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .any(|w| close(&normalise(w), &name))
}

/// The part of a wake word people hear as a name: `hey_jarvis_v0.1` →
/// `jarvis`, `alexa` → `alexa`.
fn name_of(word: &str) -> Option<String> {
    let stem = match word.find("_v") {
        Some(i) if word[i + 2..].starts_with(|c: char| c.is_ascii_digit()) => &word[..i],
        _ => word,
    };
    stem.split(['_', ' ', '-'])
        .rfind(|p| !p.is_empty())
        .map(|p| p.to_lowercase())
}

fn normalise(word: &str) -> String {
    let w = word.to_lowercase();
    let w = w.strip_suffix("'s").unwrap_or(&w);
    w.trim_matches('\'').to_string()
}

/// Same word, or one edit away (two for long names): whisper's spelling of
/// a name it doesn't know.
fn close(heard: &str, name: &str) -> bool {
    if heard == name {
        return true;
    }
    let allowed = if name.chars().count() >= 6 { 2 } else { 1 };
    heard.chars().count() >= 3 && levenshtein(heard, name) <= allowed
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> Vec<String> {
        vec!["hey_jarvis".into(), "alexa_v0.1".into()]
    }

    #[test]
    fn the_wake_word_and_its_punctuation_go() {
        assert_eq!(
            strip("Hey Jarvis, what time is it?", &words()),
            "What time is it?"
        );
        assert_eq!(
            strip("Hey, Jarvis. What time is it?", &words()),
            "What time is it?"
        );
        assert_eq!(strip("hey jarvis set a timer", &words()), "Set a timer");
        assert_eq!(strip("Alexa, stop.", &words()), "Stop.");
    }

    #[test]
    fn near_spellings_and_words_before_it_go_too() {
        assert_eq!(
            strip("Hey Jervis, what's the weather?", &words()),
            "What's the weather?"
        );
        assert_eq!(
            strip("Okay, hey Jarvis's lights off", &words()),
            "Lights off"
        );
    }

    #[test]
    fn only_the_wake_word_leaves_nothing() {
        assert_eq!(strip("Hey Jarvis.", &words()), "");
        assert_eq!(strip("  Jarvis!  ", &words()), "");
    }

    #[test]
    fn a_request_without_it_is_kept_whole() {
        assert_eq!(strip("What time is it?", &words()), "What time is it?");
        // The name late in a long sentence is part of the request.
        let late = "please tell me a story about a robot called Jarvis";
        assert_eq!(strip(late, &words()), late);
        // Short words are not near-misses of a name.
        assert_eq!(
            strip("Hey, is it raining?", &words()),
            "Hey, is it raining?"
        );
    }

    #[test]
    fn an_answer_mentions_the_name_anywhere_in_it() {
        let answer = "Okay. Hey Jarvis is the wake word I listen for.";
        assert!(mentions(answer, "hey_jarvis_v0.1"));
        assert!(mentions("That's Jarvis's timer.", "hey_jarvis"));
        assert!(mentions("I am Jervis.", "hey_jarvis"));
        assert!(!mentions(answer, "alexa"));
        assert!(!mentions("Hey, it's twenty past three.", "hey_jarvis"));
        assert!(!mentions("", "hey_jarvis"));
        assert!(mentions("ALEXA, stop", "alexa_v0.1"));
    }

    #[test]
    fn names_come_from_model_names() {
        assert_eq!(name_of("hey_jarvis_v0.1").as_deref(), Some("jarvis"));
        assert_eq!(name_of("hey_mycroft").as_deref(), Some("mycroft"));
        assert_eq!(name_of("alexa").as_deref(), Some("alexa"));
    }
}
