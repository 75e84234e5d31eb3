//! Keyword relevance of chunks to a query: SQLite FTS5's BM25 over the
//! whole knowledge corpus (so IDF is the corpus's), squashed to [0, 1) the
//! way R-MEM does it: s = x / (1 + x) with x = −bm25().
//!
//! The query is cut into lower-case word terms, stop words dropped, each
//! term quoted (FTS5 syntax characters in a question can never break the
//! MATCH) and OR-ed, so a chunk matching any term scores.

use std::collections::HashMap;

use rusqlite::Connection;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "should", "that", "the", "this",
    "to", "was", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
    "there", "their", "about", "into", "than", "then", "them", "they", "we", "our", "if", "so",
    "tell", "say", "does", "did", "has", "have", "had", "not", "no", "any", "much", "many",
];

/// The query's search terms: lower-case words of 2+ characters, no stop words.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .map(|w| w.to_lowercase())
    {
        if word.chars().count() >= 2 && !STOP_WORDS.contains(&word.as_str()) && !out.contains(&word)
        {
            out.push(word);
        }
    }
    out
}

/// An FTS5 MATCH expression OR-ing the quoted terms; `None` without terms.
pub fn match_expression(query: &str) -> Option<String> {
    let t = terms(query);
    if t.is_empty() {
        return None;
    }
    Some(
        t.iter()
            .map(|w| format!("\"{}\"", w.replace('"', "")))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// x / (1 + x): raw BM25 (larger = better) to [0, 1).
pub fn squash(raw: f64) -> f32 {
    let x = raw.max(0.0);
    (x / (1.0 + x)) as f32
}

/// Normalised BM25 score of each of `ids` for `query` (absent = 0).
pub fn scores(c: &Connection, query: &str, ids: &[i64]) -> rusqlite::Result<HashMap<i64, f32>> {
    let mut out = HashMap::new();
    let Some(expr) = match_expression(query) else {
        return Ok(out);
    };
    if ids.is_empty() {
        return Ok(out);
    }
    let list = ids
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut stmt = c.prepare(&format!(
        "SELECT rowid, bm25(knowledge_fts) FROM knowledge_fts WHERE knowledge_fts MATCH ?1 AND rowid IN ({list})"
    ))?;
    let rows = stmt.query_map([expr], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?)))?;
    for row in rows {
        let (id, bm25) = row?;
        out.insert(id, squash(-bm25));
    }
    Ok(out)
}

/// The best `k` chunks by BM25 alone (the keyword channel of the eval).
pub fn top(c: &Connection, query: &str, k: usize) -> rusqlite::Result<Vec<(i64, f32)>> {
    let Some(expr) = match_expression(query) else {
        return Ok(Vec::new());
    };
    let mut stmt = c.prepare(
        "SELECT rowid, bm25(knowledge_fts) FROM knowledge_fts WHERE knowledge_fts MATCH ?1 ORDER BY bm25(knowledge_fts) LIMIT ?2",
    )?;
    let rows = stmt.query_map(rusqlite::params![expr, k as i64], |r| {
        Ok((r.get::<_, i64>(0)?, squash(-r.get::<_, f64>(1)?)))
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stop_words_and_fts_syntax() {
        assert_eq!(
            terms("How do I clean the \"filter\" (NEAR/2)?"),
            vec!["clean", "filter", "near"]
        );
        assert_eq!(match_expression("the of"), None);
        assert_eq!(
            match_expression("Filter* AND x-ray").unwrap(),
            "\"filter\" OR \"ray\""
        );
        assert!((squash(1.0) - 0.5).abs() < 1e-6);
        assert_eq!(squash(-3.0), 0.0);
    }
}
