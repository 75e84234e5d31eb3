//! Words after a pause inside an utterance, which whisper can drop.
//!
//! On its shrunken-context fast pass (and without timestamp tokens, so in
//! one segment), tiny.en reads a sentence head that sounds finished as the
//! whole: "Why do we have <pause> leap years?" became "Why do we have?"
//! with a pause of 150 ms or more, and "Why is the ocean <pause 800>
//! salty?" became "Why is the ocean?" — the decoder says the end of text
//! and never looks at the speech after the pause. Nothing in the pass
//! itself shows it (it is sure of the words it gave), so the check is
//! outside it: the speech after the last long pause is transcribed alone,
//! and when the whole's reading does not end with those words they were
//! lost. The whole is then read again with its pauses shortened (100 ms or
//! less of silence did not end the reading early), and if it still lacks
//! them the words after the pause are added to it.
//!
//! The pieces here are pure: where the pauses are, the audio with them
//! closed, whether a reading holds a tail's words, and the two joined.

use super::text;
use crate::audio::vad::{voiced_frames, VOICED_FRAME_MS};
use crate::audio::SAMPLE_RATE;

/// A pause inside speech at least this long may end whisper's reading
/// early (measured: 150 ms of silence after "Why do we have" did, 100 ms
/// did not).
pub const MIN_GAP_MS: u64 = 150;

/// Voiced audio on each side of a pause for it to be inside speech: a
/// word, not a click or a breath (the shortest word measured here, "Put",
/// holds ~150 ms; the voice loop's `WORDS_AFTER_MS` is the same).
pub const MIN_WORDS_MS: u64 = 120;

/// Silence a closed pause keeps: ~30 ms after the words before it and
/// ~30 ms before the words after it (the VAD's unvoiced frames already
/// hold the words' soft edges: a pause it measured at 690 ms was 800 ms
/// of silence, and 90 ms kept still ended the reading early).
const KEEP_BEFORE_FRAMES: usize = 1;
const KEEP_AFTER_FRAMES: usize = 1;

/// webrtc-vad's aggressiveness for finding pauses (the loop's own
/// "did words come after" uses the same).
const AGGRESSIVENESS: u8 = 2;

/// A pause inside speech, in whole VAD frames: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub start: usize,
    pub end: usize,
}

impl Gap {
    /// Its length in ms.
    pub fn ms(&self) -> u64 {
        (self.end - self.start) as u64 * VOICED_FRAME_MS
    }
}

fn frame_samples() -> usize {
    (u64::from(SAMPLE_RATE) * VOICED_FRAME_MS / 1000) as usize
}

/// The pauses of at least [`MIN_GAP_MS`] inside `audio` (16 kHz) with
/// words ([`MIN_WORDS_MS`] voiced) both before and after them; leading
/// and trailing silence are not pauses.
pub fn inner_gaps(audio: &[f32]) -> Vec<Gap> {
    let frames = voiced_frames(&crate::audio::to_i16(audio), AGGRESSIVENESS);
    gaps_in(&frames)
}

fn gaps_in(frames: &[bool]) -> Vec<Gap> {
    let min_gap = MIN_GAP_MS.div_ceil(VOICED_FRAME_MS) as usize;
    let words = MIN_WORDS_MS.div_ceil(VOICED_FRAME_MS) as usize;
    let total_voiced = frames.iter().filter(|&&v| v).count();
    let mut gaps = Vec::new();
    let mut voiced_before = 0;
    let mut i = 0;
    while i < frames.len() {
        if frames[i] {
            voiced_before += 1;
            i += 1;
            continue;
        }
        let start = i;
        while i < frames.len() && !frames[i] {
            i += 1;
        }
        let after = total_voiced - voiced_before;
        if i - start >= min_gap && voiced_before >= words && after >= words && i < frames.len() {
            gaps.push(Gap { start, end: i });
        }
    }
    gaps
}

/// Where the words after the last pause begin (a sample index into
/// `audio`, one frame before the VAD's onset, whose first frame is often
/// judged unvoiced).
pub fn tail_start(gaps: &[Gap]) -> Option<usize> {
    gaps.last()
        .map(|g| g.end.saturating_sub(1).max(g.start) * frame_samples())
}

/// Where the words before the last pause end (a sample index: the
/// pause's start and the little silence [`close`] keeps after them).
pub fn head_end(gaps: &[Gap]) -> usize {
    gaps.last()
        .map(|g| (g.start + KEEP_BEFORE_FRAMES).min(g.end) * frame_samples())
        .unwrap_or(0)
}

/// `audio` with every pause in `gaps` shortened to ~90 ms of its own
/// silence.
pub fn close(audio: &[f32], gaps: &[Gap]) -> Vec<f32> {
    let n = frame_samples();
    let mut out = Vec::with_capacity(audio.len());
    let mut from = 0;
    for g in gaps {
        let keep_to = (g.start + KEEP_BEFORE_FRAMES) * n;
        let resume = g.end.saturating_sub(KEEP_AFTER_FRAMES) * n;
        if resume <= keep_to || resume > audio.len() {
            continue;
        }
        out.extend_from_slice(&audio[from..keep_to]);
        from = resume;
    }
    out.extend_from_slice(&audio[from.min(audio.len())..]);
    out
}

/// Two words that are the same word heard twice: equal after
/// [`text::normalise`], or close in spelling ("piers" and "peers", "eat"
/// and "seat": the tail alone and the whole are separate readings of the
/// same sound). Half the letters is not close: "late" is not "have".
fn same_word(a: &str, b: &str) -> bool {
    a == b || (a.len().min(b.len()) >= 3 && strsim::normalized_levenshtein(a, b) >= 0.6)
}

/// Whether the reading `whole` holds the words `tail` (the same speech
/// read alone) at its end: its last word is one of the tail's last two,
/// and at least half of the tail's words are among its last words. A
/// tail with no words is held by anything. (Half alone is not enough: a
/// tail read "So the..." matched "the" in "Why is the ocean?".)
pub fn holds(whole: &str, tail: &str) -> bool {
    let tail = text::normalise(tail);
    if tail.is_empty() {
        return true;
    }
    let whole = text::normalise(whole);
    let Some(last) = whole.last() else {
        return false;
    };
    let ends_alike = tail.iter().rev().take(2).any(|t| same_word(t, last));
    let window = &whole[whole.len().saturating_sub(tail.len() + 2)..];
    let found = tail
        .iter()
        .filter(|t| window.iter().any(|w| same_word(t, w)))
        .count();
    ends_alike && found * 2 >= tail.len()
}

/// `whole` with `tail` after it, as one sentence: the whole's closing
/// mark gives way to the tail's, whose first letter is lowered unless it
/// is "I" or a name-like capital inside the tail's own reading.
pub fn join(whole: &str, tail: &str) -> String {
    let head = whole
        .trim()
        .trim_end_matches(['.', '?', '!', ',', '…'])
        .trim_end();
    let tail = tail.trim();
    if head.is_empty() {
        return tail.to_string();
    }
    let mut words = tail.split_whitespace();
    let first = words.next().unwrap_or_default();
    let keep_capital =
        first == "I" || first.starts_with("I'") || first.chars().skip(1).any(char::is_uppercase);
    let first = if keep_capital {
        first.to_string()
    } else {
        let mut chars = first.chars();
        match chars.next() {
            Some(c) => c.to_lowercase().chain(chars).collect(),
            None => String::new(),
        }
    };
    let rest: Vec<&str> = words.collect();
    let mut out = format!("{head} {first}");
    if !rest.is_empty() {
        out.push(' ');
        out.push_str(&rest.join(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(pattern: &str) -> Vec<bool> {
        pattern.chars().map(|c| c == '#').collect()
    }

    #[test]
    fn only_a_long_pause_between_words_is_a_gap() {
        // 5 frames (150 ms) between two words of 4 frames: a gap.
        assert_eq!(
            gaps_in(&frames("..####.....####..")),
            vec![Gap { start: 6, end: 11 }]
        );
        // 4 frames is a breath between words, not a gap.
        assert!(gaps_in(&frames("..####....####..")).is_empty());
        // Leading and trailing silence are not gaps, however long.
        assert!(gaps_in(&frames("..........####..........")).is_empty());
        // A click (one voiced frame) after a pause is not words after it.
        assert!(gaps_in(&frames("####......#......")).is_empty());
        // Several gaps, in order.
        let g = gaps_in(&frames("####......####.......####"));
        assert_eq!(g.len(), 2);
        assert_eq!(g[1], Gap { start: 14, end: 21 });
        assert_eq!(g[1].ms(), 210);
        assert_eq!(tail_start(&g), Some(20 * frame_samples()));
        assert_eq!(head_end(&g), 15 * frame_samples());
    }

    #[test]
    fn closing_a_gap_keeps_the_words_and_a_little_of_the_silence() {
        let n = frame_samples();
        // Word (4 frames of 1.0), gap of 10 frames (0.0), word (4 frames of 2.0).
        let mut audio = vec![1.0f32; 4 * n];
        audio.extend(vec![0.0; 10 * n]);
        audio.extend(vec![2.0; 4 * n]);
        let gaps = [Gap { start: 4, end: 14 }];
        let closed = close(&audio, &gaps);
        assert_eq!(closed.len(), (4 + 2 + 4) * n);
        assert_eq!(closed.iter().filter(|&&s| s == 1.0).count(), 4 * n);
        assert_eq!(closed.iter().filter(|&&s| s == 2.0).count(), 4 * n);
        assert_eq!(closed.iter().filter(|&&s| s == 0.0).count(), 2 * n);
        // No gaps: the same audio.
        assert_eq!(close(&audio, &[]), audio);
    }

    #[test]
    fn a_reading_holds_a_tail_it_ends_with_even_misheard_a_little() {
        assert!(holds("Why do we have leap years?", "leap years?"));
        assert!(holds("Why do we have late peers?", "Late piers."));
        assert!(holds("Set a timer for 10 minutes.", "for ten minutes"));
        assert!(holds("What does a platypa seat?", "platypus eat?"));
        assert!(!holds("Why do we have?", "leap years?"));
        assert!(!holds("Why do we have?", "Late peers."));
        assert!(!holds("Why is the ocean?", "Salty."));
        assert!(!holds("Why is the ocean?", "So the..."));
        // The tail's words must be near the end, not anywhere.
        assert!(!holds("Salty water, why is the ocean", "salty"));
        assert!(holds("anything", ""));
    }

    #[test]
    fn a_lost_tail_joins_its_head_as_one_sentence() {
        assert_eq!(
            join("Why do we have?", "Leap years?"),
            "Why do we have leap years?"
        );
        assert_eq!(
            join("Why is the ocean.", "Salty."),
            "Why is the ocean salty."
        );
        assert_eq!(join("Can", "I go?"), "Can I go?");
        assert_eq!(join("Play music by", "ABBA."), "Play music by ABBA.");
        assert_eq!(join("", "Salty."), "Salty.");
    }
}
