//! Stop the decoder when it starts the utterance over.
//!
//! With a reduced encoder context (the fast path) whisper.cpp often says
//! the whole utterance and then, instead of ending, says it again from the
//! start until the token budget runs out: "What time is it? What time is
//! it? What time…". The repeat was already trimmed from the text
//! (`text::periodic_prefix`), but every repeated token cost a decoder step
//! (measured: 14 of 19 tokens for a 1 s "What time is it?"). A logits
//! filter now sees each step's tokens so far and, once the words after a
//! sentence end repeat the utterance's first words, leaves the decoder no
//! choice but the end-of-text token.
//!
//! The rule is narrow so real speech is never cut: the repeat must follow a
//! sentence end (`.`, `?`, `!`) and be at least [`MIN_REPEAT_WORDS`] words
//! long (all of the first sentence when that is shorter), so "Stop. Stop
//! it." or "Hey Jarvis. What time is it?" go on.

use std::ffi::CStr;

use whisper_rs::whisper_rs_sys as sys;

/// Words of a restart before the decoder is stopped.
pub const MIN_REPEAT_WORDS: usize = 3;

/// Whether `words` (as decoded so far) end with a restart: after some
/// word that ends a sentence, the words that follow say the utterance
/// again from its first word — all of it and at least one word more, and
/// never fewer than [`MIN_REPEAT_WORDS`] — so a person who repeats the
/// start of a sentence to correct it ("Set a timer. Set a timer for ten
/// minutes.") is heard out. The last word may still be cut mid-word.
pub fn restarted<S: AsRef<str>>(words: &[S]) -> bool {
    let keys: Vec<String> = words.iter().map(|w| key(w.as_ref())).collect();
    for (end, word) in words.iter().enumerate() {
        if !word
            .as_ref()
            .trim_end_matches(['"', '\'', ')'])
            .ends_with(['.', '?', '!'])
        {
            continue;
        }
        let period = end + 1;
        let tail = &keys[period..];
        if tail.len() < MIN_REPEAT_WORDS.max(period + 1) {
            continue;
        }
        let last = tail.len() - 1;
        let again = tail.iter().enumerate().all(|(i, k)| {
            let want = &keys[i % period];
            !k.is_empty() && (k == want || (i == last && want.starts_with(k.as_str())))
        });
        if again {
            return true;
        }
    }
    false
}

/// A word as compared: its letters and digits, lowercased.
fn key(word: &str) -> String {
    word.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The logits filter for `FullParams::set_filter_logits_callback`: when the
/// text tokens so far have [`restarted`], every token but end-of-text is
/// masked, so the decoder ends here.
///
/// # Safety
/// Called by whisper.cpp with its context, `n_tokens` valid token records
/// and a logits array of the vocabulary's size; it reads the vocabulary
/// only.
pub unsafe extern "C" fn stop_at_restart(
    ctx: *mut sys::whisper_context,
    _state: *mut sys::whisper_state,
    tokens: *const sys::whisper_token_data,
    n_tokens: std::os::raw::c_int,
    logits: *mut f32,
    _user_data: *mut std::ffi::c_void,
) {
    if ctx.is_null() || tokens.is_null() || logits.is_null() || n_tokens < 4 {
        return;
    }
    // SAFETY: whisper.cpp passes `n_tokens` records at `tokens`.
    let tokens = unsafe { std::slice::from_raw_parts(tokens, n_tokens as usize) };
    // SAFETY: a live context, read-only calls.
    let eot = unsafe { sys::whisper_token_eot(ctx) };
    let mut text = String::new();
    for t in tokens.iter().filter(|t| t.id < eot) {
        // SAFETY: a valid token id of this context; the string is owned by
        // the vocabulary and lives as long as the context.
        let piece = unsafe { sys::whisper_token_to_str(ctx, t.id) };
        if !piece.is_null() {
            text.push_str(&unsafe { CStr::from_ptr(piece) }.to_string_lossy());
        }
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    if !restarted(&words) {
        return;
    }
    // SAFETY: the logits array holds one value per vocabulary entry.
    let n_vocab = unsafe { sys::whisper_n_vocab(ctx) };
    if n_vocab <= 0 || eot < 0 || eot >= n_vocab {
        return;
    }
    let logits = unsafe { std::slice::from_raw_parts_mut(logits, n_vocab as usize) };
    for (id, l) in logits.iter_mut().enumerate() {
        if id as i32 != eot {
            *l = f32::NEG_INFINITY;
        }
    }
    logits[eot as usize] = 0.0;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn a_restart_after_the_sentence_is_seen() {
        assert!(restarted(&words("What time is it? What time is it? What")));
        assert!(restarted(&words(
            "Set a timer for five minutes. Set a timer for five minutes. Set a tim"
        )));
        // Never on fewer than three words of a repeat.
        assert!(!restarted(&words("Stop. Stop. Stop")));
        assert!(restarted(&words("Stop. Stop. Stop. Stop")));
        assert!(restarted(&words("Cancel it. Cancel it. Can")));
        // After a second sentence.
        assert!(restarted(&words(
            "What time is it? In Tokyo? What time is it? In Tokyo? What"
        )));
    }

    #[test]
    fn real_speech_goes_on() {
        // Every prefix is checked: the filter sees the words one by one.
        for s in [
            "Set a timer. Set a timer for ten minutes.",
            "What time is it? What time is it in Tokyo?",
            "Stop. Stop. Stop the music.",
            "What time is it? What time",
            "Stop. Stop it.",
            "Hey Jarvis. What time is it?",
            "Yes. Yes, please.",
            "What time is it",
            "Set a timer. Set an alarm",
            "It is. It is not",
            "Cancel it. Cancel the other one",
        ] {
            let w = words(s);
            for n in 1..=w.len() {
                assert!(!restarted(&w[..n]), "{:?}", &w[..n]);
            }
        }
    }
}
