//! A chunk of a few words ranks lower in the order.
//!
//! A document's title line, a man page's NAME or SYNOPSIS, a PDF page's
//! running header ("SORT(1) User Commands SORT(1)") are all topic and no
//! answer: their few words are the document's subject, so their cosine to
//! any question about that document is high, and they took the first
//! place (or two of the three places the per-source cap leaves a
//! document) from the passage that answers ("how do I sort lines in
//! reverse order" → "NAME sort − sort lines of text files" over
//! `--reverse`). A chunk shorter than [`SHORT_CHARS`] loses [`DISCOUNT`]
//! on its ordering score (the fusion's P(holds the answer)); the cut does
//! not read it (it reads `rerank`), so nothing more or less passes.
//!
//! Chosen on sets A and B (A 14 → 15 first of 24, hit@3 16 → 18; B
//! unchanged; any threshold from 80 to 160 characters with a discount of
//! 0.3 gives the same, so the lowest that catches a NAME line), validated
//! on set E (22 → 23 first of 40, 28 → 30 in the first three) before sets
//! C and D were run; BENCHMARKS.md "Short chunks discounted" has the
//! passage-level figures.

use super::retrieve::Candidate;

/// Below this many characters a chunk is a title, a NAME line or a page
/// header rather than a passage. An answer can be that short (a last
/// option before the next heading): of the answering chunks of sets A–E,
/// the shortest have 88, 89 and 129 characters, so the threshold stays
/// low.
pub const SHORT_CHARS: usize = 120;

/// Taken off a short chunk's ordering score (P(holds the answer), so
/// 0.3 moves it below a passage the fusion thought a little less likely).
pub const DISCOUNT: f32 = 0.3;

/// Lower the `relevance` (and `score`) of every short candidate by
/// [`DISCOUNT`]; returns how many were. The caller sorts again.
pub fn discount_short(candidates: &mut [Candidate]) -> usize {
    let mut n = 0;
    for c in candidates
        .iter_mut()
        .filter(|c| c.text.trim().chars().count() < SHORT_CHARS)
    {
        c.relevance -= DISCOUNT;
        c.score = c.relevance;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: i64, text: &str, relevance: f32) -> Candidate {
        Candidate {
            chunk_id: id,
            document_id: 1,
            ordinal: id,
            path: "sort.pdf".into(),
            title: "sort".into(),
            section: None,
            page: None,
            tier: 3,
            vector: 0.6,
            bm25: 0.5,
            coverage: 0.5,
            rerank: 0.9,
            relevance,
            score: relevance,
            paragraph: None,
            text: text.into(),
        }
    }

    #[test]
    fn a_name_line_no_longer_outranks_the_option_that_answers() {
        let option = "−r, −−reverse\nreverse the result of comparisons\n".repeat(4);
        let mut cs = vec![
            cand(1, "NAME\nsort − sort lines of text files", 0.23),
            cand(2, &option, 0.19),
        ];
        assert_eq!(discount_short(&mut cs), 1);
        cs.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
        assert_eq!(cs[0].chunk_id, 2);
        assert!((cs[1].relevance - (0.23 - DISCOUNT)).abs() < 1e-6);
        assert_eq!(cs[1].score, cs[1].relevance);
        assert_eq!(cs[1].rerank, 0.9, "the cut's score is untouched");
    }

    #[test]
    fn a_passage_of_ordinary_length_keeps_its_score() {
        let text = "The default signal for kill is TERM. ".repeat(5);
        let mut cs = vec![cand(1, &text, 0.4)];
        assert_eq!(discount_short(&mut cs), 0);
        assert_eq!(cs[0].relevance, 0.4);
    }
}
