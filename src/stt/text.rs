//! Text helpers around transcripts: cleaning whisper's output, the
//! normalisation used to compare transcripts, word error rate, and the
//! repetition test that flags a looping decoder.

/// Remove whisper's non-speech annotations (`[BLANK_AUDIO]`, `(music)`,
/// `*laughs*`) and collapse whitespace. Empty result = no speech.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth_sq = 0u32;
    let mut depth_par = 0u32;
    let mut star = false;
    for c in text.chars() {
        match c {
            '[' => depth_sq += 1,
            ']' => depth_sq = depth_sq.saturating_sub(1),
            '(' => depth_par += 1,
            ')' => depth_par = depth_par.saturating_sub(1),
            '*' => star = !star,
            _ if depth_sq == 0 && depth_par == 0 && !star => out.push(c),
            _ => {}
        }
    }
    let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    // Only punctuation left (e.g. "." or "-") is no speech either.
    if joined.chars().any(char::is_alphanumeric) {
        joined
    } else {
        String::new()
    }
}

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

fn number_words(n: u64) -> Option<String> {
    match n {
        0..=19 => Some(ONES[n as usize].to_string()),
        20..=99 => {
            let t = TENS[(n / 10) as usize];
            Some(if n % 10 == 0 {
                t.to_string()
            } else {
                format!("{t} {}", ONES[(n % 10) as usize])
            })
        }
        100..=999 => {
            let rest = n % 100;
            let head = format!("{} hundred", ONES[(n / 100) as usize]);
            Some(if rest == 0 {
                head
            } else {
                format!("{head} {}", number_words(rest)?)
            })
        }
        _ => None,
    }
}

/// Lower-case words without punctuation, numbers spelled out (up to 999),
/// hyphens split, common abbreviations expanded — so "Mr. Dashwood went
/// 10 meters" and "mister dashwood went ten meters" compare equal.
pub fn normalise(text: &str) -> Vec<String> {
    let lowered = text.to_lowercase().replace(['-', '—', '–', '/'], " ");
    let mut words = Vec::new();
    for raw in lowered.split_whitespace() {
        let w: String = raw
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '\'')
            .collect();
        let w = w.trim_matches('\'').to_string();
        if w.is_empty() {
            continue;
        }
        let expanded = match w.as_str() {
            "mr" => "mister".to_string(),
            "mrs" => "missus".to_string(),
            "dr" => "doctor".to_string(),
            "st" => "saint".to_string(),
            _ => match w.parse::<u64>().ok().and_then(number_words) {
                Some(n) => n,
                None => w,
            },
        };
        words.extend(expanded.split(' ').map(str::to_string));
    }
    words
}

/// Word error rate of `hypothesis` against `reference` after
/// [`normalise`]: (substitutions + deletions + insertions) / reference
/// words. An empty reference gives 0 for an empty hypothesis, else 1.
pub fn wer(reference: &str, hypothesis: &str) -> f64 {
    let r = normalise(reference);
    let h = normalise(hypothesis);
    if r.is_empty() {
        return if h.is_empty() { 0.0 } else { 1.0 };
    }
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    let mut cur = vec![0; h.len() + 1];
    for (i, rw) in r.iter().enumerate() {
        cur[0] = i + 1;
        for (j, hw) in h.iter().enumerate() {
            let sub = prev[j] + usize::from(rw != hw);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[h.len()] as f64 / r.len() as f64
}

/// The longest run of a word n-gram (n = 1..=4) repeated back to back, if
/// it reaches `times` ("go to go to go to" = "go to" ×3). Whisper's
/// failure mode on a too-small context is exactly this loop.
pub fn repetition(text: &str, times: u32) -> Option<String> {
    let words = normalise(text);
    if times < 2 {
        return None;
    }
    let times = times as usize;
    for n in 1..=4usize {
        if words.len() < n * times {
            continue;
        }
        for start in 0..=words.len() - n * times {
            let gram = &words[start..start + n];
            let mut reps = 1;
            let mut pos = start + n;
            while pos + n <= words.len() && &words[pos..pos + n] == gram {
                reps += 1;
                pos += n;
            }
            if reps >= times {
                return Some(format!("\"{}\" ×{reps}", gram.join(" ")));
            }
        }
    }
    None
}

/// The words of `text` as written, and each one lower-case with only its
/// letters and digits: what [`periodic_prefix`] and [`looping_tail`]
/// compare ("Minutes." and "minutes" are the same word in a loop).
fn loop_words(text: &str) -> (Vec<&str>, Vec<String>) {
    let raw: Vec<&str> = text.split_whitespace().collect();
    let key = raw
        .iter()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric())
                .collect::<String>()
                .to_lowercase()
        })
        .collect();
    (raw, key)
}

/// When the whole text is one phrase said again and again ("Go forward
/// 10 meters. Go forward 10 meters. Go for…") — whisper's loop on a
/// shrunken context after it has already said everything — return the
/// phrase once. `None` when the text is not such a loop.
pub fn periodic_prefix(text: &str) -> Option<String> {
    let (raw, key) = loop_words(text);
    let n = key.len();
    for p in 1..=n / 2 {
        if p == 1 && n < 3 {
            continue;
        }
        // The cap may cut the last word: a prefix of its twin counts.
        let same =
            |i: usize| key[i] == key[i - p] || (i == n - 1 && key[i - p].starts_with(&key[i]));
        if (p..n).all(same) {
            return Some(raw[..p].join(" "));
        }
    }
    None
}

/// When the text says something and then loops on its last words ("Set a
/// timer for 20 minutes. 20 minutes. 20 minutes. 20 min…") — the same
/// loop as [`periodic_prefix`]'s, begun after the first words instead of
/// at the start — return the text up to the first repeat. The loop must
/// be a phrase of two words or more said at least three times, so a
/// speaker's own "no, no, no" or "very very" is kept.
pub fn looping_tail(text: &str) -> Option<String> {
    let (raw, key) = loop_words(text);
    let n = key.len();
    for start in 1..n {
        for p in 2..=(n - start) / 3 {
            // The cap may cut the last word: a prefix of its twin counts.
            let same =
                |i: usize| key[i] == key[i - p] || (i == n - 1 && key[i - p].starts_with(&key[i]));
            if (start + p..n).all(same) {
                return Some(raw[..start + p].join(" "));
            }
        }
    }
    None
}

/// When the first sentence is said again whole and the rest is only
/// pieces of it ("How far away is the moon? How far away is the moon? Is
/// the moon? How far away…") — the restart loop of [`periodic_prefix`]
/// with a jump back into the middle, which whisper makes on a shrunken
/// context — return that first sentence once. The sentence must be three
/// words or more and said again whole at least once, and every other
/// sentence after it must be a run of its words (the last may be cut
/// mid-word), so "Set a timer. Set a timer for ten minutes." and "What is
/// it? Is it?" are kept as said.
pub fn repeated_sentence(text: &str) -> Option<String> {
    let (raw, key) = loop_words(text);
    let first_end = raw.iter().position(|w| ends_sentence(w))?;
    let sentence = &key[..=first_end];
    if sentence.len() < 3 || sentence.iter().any(String::is_empty) {
        return None;
    }
    let rest = &raw[first_end + 1..];
    let rest_keys = &key[first_end + 1..];
    if rest.is_empty() {
        return None;
    }
    let mut whole_again = false;
    let mut start = 0;
    while start < rest.len() {
        let end = rest[start..]
            .iter()
            .position(|w| ends_sentence(w))
            .map_or(rest.len(), |i| start + i + 1);
        let piece = &rest_keys[start..end];
        let cut = end == rest.len() && !rest.last().is_some_and(|w| ends_sentence(w));
        if !is_run_of(piece, sentence, cut) {
            return None;
        }
        whole_again |= piece == sentence;
        start = end;
    }
    whole_again.then(|| raw[..=first_end].join(" "))
}

/// Whether `word` ends a sentence (a closing quote or bracket may follow).
fn ends_sentence(word: &str) -> bool {
    word.trim_end_matches(['"', '\'', ')'])
        .ends_with(['.', '?', '!'])
}

/// Whether `piece` is a contiguous run of `sentence`'s words; when `cut`,
/// its last word may be the start of the word it stands for.
fn is_run_of(piece: &[String], sentence: &[String], cut: bool) -> bool {
    if piece.is_empty() || piece.len() > sentence.len() || piece.iter().any(String::is_empty) {
        return false;
    }
    let last = piece.len() - 1;
    (0..=sentence.len() - piece.len()).any(|at| {
        piece.iter().enumerate().all(|(i, k)| {
            let want = &sentence[at + i];
            k == want || (cut && i == last && want.starts_with(k.as_str()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_a_loop_on_the_last_words() {
        assert_eq!(
            looping_tail("Set a timer for 20 minutes. 20 minutes. 20 minutes. 20 minutes. 20")
                .as_deref(),
            Some("Set a timer for 20 minutes.")
        );
        // Said twice, or a word said three times: the speaker's own.
        assert_eq!(
            looping_tail("Set a timer for 20 minutes. 20 minutes."),
            None
        );
        assert_eq!(looping_tail("I said no, no, no."), None);
        assert_eq!(
            looping_tail("ask not what your country can do for you"),
            None
        );
        assert_eq!(looping_tail(""), None);
    }

    #[test]
    fn cleans_annotations() {
        assert_eq!(clean(" [BLANK_AUDIO]"), "");
        assert_eq!(clean("(buzzing) Hello there. [Music]"), "Hello there.");
        assert_eq!(clean(" ."), "");
    }

    #[test]
    fn normalises_numbers_and_titles() {
        assert_eq!(
            normalise("Go forward 10 meters."),
            ["go", "forward", "ten", "meters"]
        );
        assert_eq!(
            normalise("Mr. John ill-disposed"),
            ["mister", "john", "ill", "disposed"]
        );
        assert_eq!(normalise("42"), ["forty", "two"]);
    }

    #[test]
    fn wer_counts_edits() {
        assert_eq!(wer("a b c d", "a b c d"), 0.0);
        assert_eq!(wer("a b c d", "a x c d"), 0.25);
        assert_eq!(wer("a b c d", "a b c"), 0.25);
        assert_eq!(wer("a b", "a b c d"), 1.0);
        assert_eq!(wer("", ""), 0.0);
    }

    #[test]
    fn a_sentence_said_again_with_pieces_of_it_is_kept_once() {
        let looped = "How far away is the moon? How far away is the moon? Is the moon? How far away is the moon? Is the moon";
        assert_eq!(
            repeated_sentence(looped).as_deref(),
            Some("How far away is the moon?")
        );
        assert_eq!(
            repeated_sentence("Turn it up a bit. Up a bit. Turn it up a bit. Tu").as_deref(),
            Some("Turn it up a bit.")
        );
        // Said again with more words, or only a piece said again: as said.
        assert_eq!(
            repeated_sentence("Set a timer. Set a timer for ten minutes."),
            None
        );
        assert_eq!(repeated_sentence("What is it? Is it?"), None);
        // Too short to be sure it is a loop, or nothing after it.
        assert_eq!(repeated_sentence("Stop it. Stop it. Stop it."), None);
        assert_eq!(repeated_sentence("How far away is the moon?"), None);
        // Another sentence after the repeat is the speaker's.
        assert_eq!(
            repeated_sentence("Is it raining? Is it raining? Take an umbrella."),
            None
        );
        assert_eq!(repeated_sentence(""), None);
    }

    #[test]
    fn trims_a_sentence_loop() {
        assert_eq!(
            periodic_prefix("Go forward 10 meters. go forward 10 meters. Go forward").as_deref(),
            Some("Go forward 10 meters.")
        );
        assert_eq!(
            periodic_prefix("ask not what your country can do for you"),
            None
        );
        assert_eq!(periodic_prefix("no no"), None);
        assert_eq!(
            periodic_prefix("Stop. Stop. Stop. St").as_deref(),
            Some("Stop.")
        );
    }

    #[test]
    fn finds_loops() {
        assert!(repetition("go to go to go to the store", 3).is_some());
        assert!(repetition("the the the", 3).is_some());
        assert!(repetition(
            "ask not what your country can do for you ask what you can do",
            3
        )
        .is_none());
    }
}
