//! The order among the best few candidates, refined by their best
//! paragraph.
//!
//! A chunk is ~700 characters: in a man page's option list that is four
//! or five options, and the chunk's one vector is their average. The
//! chunk holding the asked-for option then ranks second or third behind
//! a chunk that is about the question's words in general (an EXAMPLES
//! section, a neighbouring option list), and hit@1 suffers while hit@3
//! holds (notes/kb.md, "score a chunk by its best paragraph"). So after
//! the reranker has ordered the candidates, the first few are read again
//! paragraph by paragraph: each paragraph is embedded as ingest embeds a
//! chunk (title, innermost heading, text), and a candidate whose best
//! paragraph is closer to the question than the chunk as a whole moves
//! up by [`WEIGHT`] × the difference. Only the first
//! [`KnowledgeConfig::paragraph_top_k`](super::KnowledgeConfig) move, among
//! themselves, so what the first three passages hold is unchanged; only
//! their order is. The cut does not read this (it reads `rerank`).
//!
//! Measured on the fusion's candidates (chunk level, answer first), the
//! weight chosen on set A and checked on set B, set C untouched until
//! then: A 9 → 13 of 24, B 10 → 11 of 16, C 36 → 40 of 62; BENCHMARKS.md
//! has the passage-level figures.

use std::sync::LazyLock;

use anyhow::Result;
use regex::Regex;

use super::retrieve::Candidate;
use crate::nlu::Embedder;

/// How far a candidate moves per unit of (best paragraph's cosine − the
/// chunk's cosine). Chosen on set A (2 and 4 tie there; B prefers 2).
pub const WEIGHT: f32 = 2.0;

/// The paragraphs of a chunk: blank-line separated, empty ones left out.
pub fn paragraphs(text: &str) -> Vec<&str> {
    BLANK_LINE
        .split(text)
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// A line break, then a line of nothing but white space, then another.
static BLANK_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\n[ \t\r]*\n").expect("static regex"));

/// What is embedded for a chunk or one of its paragraphs: the document
/// title and the innermost heading give it its subject, then the text.
/// Chunk and paragraph share the shape, so their cosines compare.
pub fn paragraph_text(title: &str, section: Option<&str>, paragraph: &str) -> String {
    let heading = section
        .and_then(|s| s.rsplit(" > ").next())
        .filter(|h| !paragraph.starts_with(h))
        .map(|h| format!(" — {h}"))
        .unwrap_or_default();
    format!("{title}{heading}\n{paragraph}")
}

/// Set each of the first `top_k` candidates' `paragraph` (its best
/// paragraph's cosine to the question), raise its `relevance` by
/// [`WEIGHT`] × (paragraph − chunk cosine), and re-sort those `top_k`
/// among themselves. `candidates` must be in order already; a chunk of
/// one paragraph keeps its cosine. The paragraphs' vectors come from
/// `stored` (written at ingest); a chunk without them (ingested before
/// they were stored) has its paragraphs embedded here. Returns how many
/// paragraphs had to be embedded. On an error the candidates are left as
/// they were.
pub fn refine(
    embedder: &dyn Embedder,
    stored: impl Fn(i64) -> Result<Vec<Vec<f32>>>,
    query_vec: &[f32],
    candidates: &mut [Candidate],
    top_k: usize,
) -> Result<usize> {
    let k = top_k.min(candidates.len());
    if k < 2 {
        return Ok(0);
    }
    let cos = |v: &[f32]| -> f32 { v.iter().zip(query_vec).map(|(a, b)| a * b).sum() };
    // Every best paragraph first, so a failure leaves the order untouched.
    let mut embedded = 0;
    let mut bests = Vec::with_capacity(k);
    for c in &candidates[..k] {
        let paras = paragraphs(&c.text);
        if paras.len() < 2 {
            bests.push(None);
            continue;
        }
        let mut vectors = stored(c.chunk_id)?;
        if vectors.len() != paras.len() {
            // One at a time: a padded batch costs every paragraph the
            // longest one's length.
            vectors = paras
                .iter()
                .map(|p| embedder.embed_one(&paragraph_text(&c.title, c.section.as_deref(), p)))
                .collect::<Result<Vec<_>>>()?;
            embedded += vectors.len();
        }
        let best = vectors
            .iter()
            .map(|v| cos(v))
            .fold(f32::NEG_INFINITY, f32::max);
        bests.push(best.is_finite().then_some(best));
    }
    for (c, best) in candidates[..k].iter_mut().zip(bests) {
        if let Some(best) = best {
            c.paragraph = Some(best);
            c.relevance += WEIGHT * (best - c.vector);
            c.score = c.relevance;
        }
    }
    candidates[..k].sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    Ok(embedded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_split_on_blank_lines() {
        let t = "-a, --all\nshow all\n\n  \n-b, --brief\nbe brief\n\n";
        assert_eq!(
            paragraphs(t),
            vec!["-a, --all\nshow all", "-b, --brief\nbe brief"]
        );
        assert_eq!(paragraphs("one line"), vec!["one line"]);
        assert!(paragraphs("\n \n").is_empty());
    }

    #[test]
    fn a_paragraph_is_embedded_with_its_title_and_heading() {
        assert_eq!(
            paragraph_text("tar", Some("OPTIONS > Extraction"), "-x  extract"),
            "tar — Extraction\n-x  extract"
        );
        assert_eq!(
            paragraph_text("tar", Some("OPTIONS"), "OPTIONS\n-x"),
            "tar\nOPTIONS\n-x"
        );
        assert_eq!(paragraph_text("tar", None, "-x"), "tar\n-x");
    }

    /// Vectors by keyword, so the test says which paragraph is close.
    struct Keyed;
    impl Embedder for Keyed {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            Ok(texts
                .iter()
                .map(|t| {
                    if t.contains("--directory") {
                        vec![1.0, 0.0]
                    } else {
                        vec![0.0, 1.0]
                    }
                })
                .collect())
        }
        fn dims(&self) -> usize {
            2
        }
        fn model_id(&self) -> String {
            "keyed".into()
        }
    }

    fn cand(id: i64, text: &str, vector: f32, relevance: f32) -> Candidate {
        Candidate {
            chunk_id: id,
            document_id: 1,
            ordinal: id,
            path: "tar.txt".into(),
            title: "tar".into(),
            section: Some("OPTIONS".into()),
            page: None,
            tier: 3,
            vector,
            bm25: 0.0,
            coverage: 0.0,
            rerank: 0.9,
            relevance,
            score: relevance,
            paragraph: None,
            text: text.into(),
        }
    }

    #[test]
    fn the_chunk_whose_one_paragraph_answers_moves_up_among_the_first() {
        let query = [1.0, 0.0];
        let mut cs = vec![
            cand(1, "EXAMPLES\ntar -xf a.tar", 0.6, 0.5),
            cand(
                2,
                "-A  append\n\n-C, --directory=DIR\nchange to DIR\n\n-v  verbose",
                0.4,
                0.4,
            ),
            cand(3, "-x  extract\n\n-t  list", 0.3, 0.3),
            cand(4, "-C, --directory again\n\nmore", 0.1, 0.1),
        ];
        let none = |_| Ok(Vec::new());
        let embedded = refine(&Keyed, none, &query, &mut cs, 3).unwrap();
        // Chunk 1 has one paragraph: not embedded again; 2 and 3: 3 + 2.
        assert_eq!(embedded, 5);
        let order: Vec<i64> = cs.iter().map(|c| c.chunk_id).collect();
        assert_eq!(order, vec![2, 1, 3, 4], "only the first three move");
        assert_eq!(cs[0].paragraph, Some(1.0));
        assert!((cs[0].relevance - (0.4 + WEIGHT * 0.6)).abs() < 1e-6);
        assert_eq!(cs[1].paragraph, None);
        assert_eq!(cs[3].paragraph, None, "the fourth is not read");
    }

    #[test]
    fn stored_vectors_are_used_when_they_cover_every_paragraph() {
        let query = [1.0, 0.0];
        let mut cs = vec![cand(1, "x\n\ny", 0.6, 0.5), cand(2, "p\n\nq", 0.4, 0.4)];
        // Chunk 2's stored second paragraph is the close one (the keyed
        // embedder would call every paragraph here far).
        let stored = |id: i64| {
            Ok(match id {
                2 => vec![vec![0.0, 1.0], vec![1.0, 0.0]],
                _ => vec![vec![0.0, 1.0]], // fewer than its paragraphs: stale
            })
        };
        let embedded = refine(&Keyed, stored, &query, &mut cs, 3).unwrap();
        assert_eq!(embedded, 2, "only chunk 1 is embedded again");
        assert_eq!(cs[0].chunk_id, 2);
        assert_eq!(cs[0].paragraph, Some(1.0));
        assert_eq!(cs[1].paragraph, Some(0.0));
    }

    #[test]
    fn a_failure_leaves_the_order_as_it_was() {
        let mut cs = vec![cand(1, "x\n\ny", 0.6, 0.5), cand(2, "p\n\nq", 0.4, 0.4)];
        let stored = |id: i64| match id {
            1 => Ok(vec![vec![1.0, 0.0], vec![1.0, 0.0]]),
            _ => Err(anyhow::anyhow!("database is locked")),
        };
        assert!(refine(&Keyed, stored, &[1.0, 0.0], &mut cs, 3).is_err());
        assert_eq!(cs[0].relevance, 0.5);
        assert_eq!(cs[0].paragraph, None);
    }

    #[test]
    fn nothing_to_refine_is_no_work() {
        let none = |_| Ok(Vec::new());
        let mut one = vec![cand(1, "a\n\nb", 0.5, 0.5)];
        assert_eq!(refine(&Keyed, none, &[1.0, 0.0], &mut one, 3).unwrap(), 0);
        let mut cs = vec![cand(1, "a", 0.5, 0.5), cand(2, "b", 0.4, 0.4)];
        assert_eq!(refine(&Keyed, none, &[1.0, 0.0], &mut cs, 0).unwrap(), 0);
        assert_eq!(refine(&Keyed, none, &[1.0, 0.0], &mut cs, 3).unwrap(), 0);
    }
}
