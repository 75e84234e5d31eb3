//! Ending a command before the hang-over, judged on the words (issue 21):
//! every utterance of the understanding set (tests/data/understanding.tsv,
//! written for the no-wrong-action gate, not for this) is cut after each of
//! its words and written as whisper writes a sentence at a pause (capital,
//! full stop), then classified by the real device classifier and put to
//! `voice_loop::speculate::early_end`.
//!
//! A whole command that ends early saves the listener the hang-over; a
//! fragment that ends early is a sentence cut in two when the speaker
//! pauses there, which can act on half a request. Traps (the same words,
//! not a command) must never end early. The bounds sit just under / over
//! what the rules do today (notes/latency.md, stops 48, 53 and 54: 445/479
//! whole commands and 271/1981 fragments end before the hang-over, 366
//! and 191 of them at the first pause, once a strong frame vouches for a
//! command the classifier is less sure of), so a change that ends fewer
//! whole commands or more fragments early, or either sooner, fails here.
//! Words that may not end early but read whole end at `settle_ms`
//! (`speculate::settles`, 600 ms) instead of the hang-over; their count is
//! bounded too. `EARSHOT_SHOW_EARLY=1 cargo test --test endpointing --
//! --nocapture` prints the fragments that end early or settle.

mod common;

use earshot::voice_loop::speculate::{early_end, settles, EarlyEnd};

fn sentence(words: &[&str]) -> String {
    let text = words.join(" ");
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}

#[test]
fn whole_commands_mostly_end_early_and_their_fragments_rarely_do() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::default_tree_engine(dir.path());
    engine.classifiers_ready().unwrap();

    let data = std::fs::read_to_string(common::data("understanding.tsv")).unwrap();
    let (mut whole, mut whole_early, mut whole_at_pause) = (0usize, 0usize, 0usize);
    let (mut fragments, mut fragments_early, mut fragments_at_pause) = (0usize, 0usize, 0usize);
    // Ending at `audio.vad.settle_ms` instead of the hang-over.
    let (mut whole_settled, mut fragments_settled) = (0usize, 0usize);
    let mut traps_early = Vec::new();
    for line in data
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let cols: Vec<&str> = line.split('\t').collect();
        let [expect, _, utterance, ..] = cols[..] else {
            continue;
        };
        let words: Vec<&str> = utterance
            .trim()
            .trim_end_matches(['.', '?', '!'])
            .split_whitespace()
            .collect();
        for k in 1..=words.len() {
            let text = sentence(&words[..k]);
            let classified = engine.shadow_classify(&text);
            let end = early_end(&text, classified.clone());
            let early = end != EarlyEnd::Never;
            let settled = !early && settles(&text, classified.as_ref());
            let at_pause = end == EarlyEnd::AtPause;
            match (expect == "trap", k == words.len()) {
                (true, true) if early => traps_early.push(text),
                (true, _) => {}
                (false, true) => {
                    whole += 1;
                    whole_early += usize::from(early);
                    whole_at_pause += usize::from(at_pause);
                    whole_settled += usize::from(settled);
                }
                (false, false) => {
                    fragments += 1;
                    fragments_early += usize::from(early);
                    fragments_at_pause += usize::from(at_pause);
                    fragments_settled += usize::from(settled);
                    if (early || settled) && std::env::var_os("EARSHOT_SHOW_EARLY").is_some() {
                        let how = if early {
                            format!("{end:?}")
                        } else {
                            "settles".into()
                        };
                        println!("fragment ends early ({how}): {text}");
                    }
                }
            }
        }
    }
    let whole_share = whole_early as f64 / whole as f64;
    let fragment_share = fragments_early as f64 / fragments as f64;
    let whole_pause_share = whole_at_pause as f64 / whole as f64;
    let fragment_pause_share = fragments_at_pause as f64 / fragments as f64;
    let fragment_settle_share = fragments_settled as f64 / fragments as f64;
    println!(
        "whole commands ending early {whole_early}/{whole} ({whole_share:.3}), \
         at the pause {whole_at_pause} ({whole_pause_share:.3}), \
         {whole_settled} more settling; \
         fragments {fragments_early}/{fragments} ({fragment_share:.3}), \
         at the pause {fragments_at_pause} ({fragment_pause_share:.3}), \
         settling {fragments_settled} ({fragment_settle_share:.3})"
    );
    assert!(whole > 300 && fragments > 1000, "the set shrank");
    assert!(traps_early.is_empty(), "traps end early: {traps_early:?}");
    assert!(
        whole_share >= 0.92,
        "{whole_early}/{whole} whole commands end early"
    );
    assert!(
        whole_pause_share >= 0.75,
        "{whole_at_pause}/{whole} whole commands end at the pause"
    );
    assert!(
        fragment_pause_share <= 0.10,
        "{fragments_at_pause}/{fragments} fragments end at the pause"
    );
    assert!(
        fragment_share <= 0.14,
        "{fragments_early}/{fragments} fragments end early"
    );
    // A fragment that settles (`audio.vad.settle_ms`, 600 ms, instead of
    // the 700 ms hang-over) is cut only by a pause between the two; most
    // are questions' heads ("How many days.") and deletions that ask
    // first. Measured 66 (0.033) when the rule came (stop 56).
    assert!(
        fragment_settle_share <= 0.04,
        "{fragments_settled}/{fragments} fragments settle"
    );
    assert!(
        whole_settled >= 5,
        "only {whole_settled} whole commands the early end misses settle"
    );
}
