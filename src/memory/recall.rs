//! The R-MEM keep rule and the exact block prepended to the user's text.

use serde::Serialize;

use super::{MemoryConfig, MemoryItem};

/// The first line of the recall block (exact, R-MEM).
pub const BLOCK_HEADER: &str = "Relevant context from your past conversations:";

/// A memory with its score breakdown and the keep decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredMemory {
    pub item: MemoryItem,
    /// Cosine similarity to the query.
    pub semantic: f32,
    /// FTS5 bm25 normalised to [0, 1): x / (1 + x), x = −bm25().
    pub bm25: f32,
    pub keep: bool,
}

/// Keep if semantic ≥ 0.28, or semantic ≥ 0.24 with a keyword hit
/// (bm25 > 0.01) — thresholds from the config, defaults per R-MEM.
pub fn keep(config: &MemoryConfig, semantic: f32, bm25: f32) -> bool {
    semantic >= config.semantic_threshold
        || (semantic >= config.weak_semantic_threshold && bm25 > config.bm25_threshold)
}

/// `Relevant context from your past conversations:` then one
/// `- <text> (created YYYY-MM-DD)` per memory, in the order given (the
/// caller sorts newest first); `None` when there is nothing to say. A
/// memory longer than `max_chars` is cut with "…" (stored text is whole).
pub fn format_block(kept: &[ScoredMemory], max_chars: usize) -> Option<String> {
    if kept.is_empty() {
        return None;
    }
    let mut out = String::from(BLOCK_HEADER);
    for m in kept {
        let text = m.item.text.split_whitespace().collect::<Vec<_>>().join(" ");
        let text = match text.char_indices().nth(max_chars.max(1)) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text,
        };
        let date = m.item.created_at.get(..10).unwrap_or(&m.item.created_at);
        out.push_str(&format!("\n- {text} (created {date})"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str, created: &str) -> ScoredMemory {
        ScoredMemory {
            item: MemoryItem {
                id: 1,
                user_id: "user-1".into(),
                text: text.into(),
                created_at: created.into(),
                updated_at: created.into(),
            },
            semantic: 0.5,
            bm25: 0.0,
            keep: true,
        }
    }

    #[test]
    fn keep_rule_table() {
        let c = MemoryConfig::default();
        // (semantic, bm25) → keep, from the reference's two-tier check.
        let cases = [
            (0.90, 0.00, true),
            (0.28, 0.00, true),
            (0.2799, 0.00, false),
            (0.2799, 0.02, true),
            (0.24, 0.0101, true),
            (0.24, 0.01, false), // bm25 must be strictly above 0.01
            (0.2399, 0.90, false),
            (0.10, 0.99, false),
            (0.26, 0.00, false),
            (0.26, 0.50, true),
            (-0.3, 0.0, false),
        ];
        for (semantic, bm25, want) in cases {
            assert_eq!(
                keep(&c, semantic, bm25),
                want,
                "semantic {semantic} bm25 {bm25}"
            );
        }
    }

    #[test]
    fn block_format_is_exact() {
        assert_eq!(format_block(&[], 500), None);
        let block = format_block(
            &[
                item("Prefers oat milk", "2026-08-30T10:00:00.000Z"),
                item("Doctor said\nno  peanuts", "2026-08-01T09:00:00.000Z"),
            ],
            500,
        )
        .unwrap();
        assert_eq!(
            block,
            "Relevant context from your past conversations:\n- Prefers oat milk (created 2026-08-30)\n- Doctor said no peanuts (created 2026-08-01)"
        );
        let long = format_block(&[item(&"é".repeat(20), "2026-01-02T00:00:00Z")], 5).unwrap();
        assert!(long.ends_with("- ééééé… (created 2026-01-02)"), "{long}");
    }
}
