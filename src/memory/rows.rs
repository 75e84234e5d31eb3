//! The SQL over `memories` and `memories_fts` (schema v1) — the source of
//! truth for long-term memory.

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde::Serialize;

use crate::store::vector::VectorHit;
use crate::store::{now, Result, Store};

/// One stored memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryItem {
    pub id: i64,
    pub user_id: String,
    pub text: String,
    /// RFC 3339 UTC; the recall block shows its date.
    pub created_at: String,
    pub updated_at: String,
}

const COLUMNS: &str = "id, user_id, text, created_at, updated_at";

fn row_to_item(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryItem> {
    Ok(MemoryItem {
        id: r.get(0)?,
        user_id: r.get(1)?,
        text: r.get(2)?,
        created_at: r.get(3)?,
        updated_at: r.get(4)?,
    })
}

/// Lower-case alphanumeric words, for "same text" comparisons.
fn normalise(text: &str) -> String {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn list(store: &Store, user_id: &str) -> Result<Vec<MemoryItem>> {
    store.with_conn(|c| {
        let mut stmt = c.prepare(&format!(
            "SELECT {COLUMNS} FROM memories WHERE user_id = ?1 ORDER BY created_at DESC, id DESC"
        ))?;
        let rows = stmt.query_map([user_id], row_to_item)?;
        rows.collect()
    })
}

/// A memory of the user with the same words (case and punctuation ignored).
pub fn find_same_text(store: &Store, user_id: &str, text: &str) -> Result<Option<MemoryItem>> {
    let wanted = normalise(text);
    Ok(list(store, user_id)?
        .into_iter()
        .find(|m| normalise(&m.text) == wanted))
}

pub fn insert(c: &Connection, user_id: &str, text: &str) -> rusqlite::Result<MemoryItem> {
    c.execute("INSERT OR IGNORE INTO users (id) VALUES (?1)", [user_id])?;
    let ts = now();
    c.execute(
        "INSERT INTO memories (user_id, text, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
        params![user_id, text, ts],
    )?;
    Ok(MemoryItem {
        id: c.last_insert_rowid(),
        user_id: user_id.to_string(),
        text: text.to_string(),
        created_at: ts.clone(),
        updated_at: ts,
    })
}

pub fn update(
    c: &Connection,
    user_id: &str,
    id: i64,
    text: &str,
) -> rusqlite::Result<Option<MemoryItem>> {
    let n = c.execute(
        "UPDATE memories SET text = ?3, updated_at = ?4 WHERE id = ?1 AND user_id = ?2",
        params![id, user_id, text, now()],
    )?;
    if n == 0 {
        return Ok(None);
    }
    c.query_row(
        &format!("SELECT {COLUMNS} FROM memories WHERE id = ?1"),
        [id],
        row_to_item,
    )
    .optional()
}

pub fn delete(c: &Connection, user_id: &str, id: i64) -> rusqlite::Result<Option<MemoryItem>> {
    let item = c
        .query_row(
            &format!("SELECT {COLUMNS} FROM memories WHERE id = ?1 AND user_id = ?2"),
            params![id, user_id],
            row_to_item,
        )
        .optional()?;
    if item.is_some() {
        c.execute("DELETE FROM memories WHERE id = ?1", [id])?;
    }
    Ok(item)
}

/// Memories with no live embedding of `model` (backfill).
pub fn unembedded(store: &Store, model: &str, limit: usize) -> Result<Vec<MemoryItem>> {
    store.with_conn(|c| {
        let mut stmt = c.prepare(
            "SELECT m.id, m.user_id, m.text, m.created_at, m.updated_at FROM memories m
             WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.collection = 'memories'
                 AND v.item_id = m.id AND v.model = ?1 AND v.embedding IS NOT NULL)
             ORDER BY m.id LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![model, limit as i64], row_to_item)?;
        rows.collect()
    })
}

/// Words that make poor keyword evidence; dropped from the FTS query so a
/// bm25 hit means a content word matched.
const STOPWORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "have", "has", "how", "i", "if", "in", "is", "it", "its", "me",
    "my", "of", "on", "or", "please", "should", "so", "that", "the", "their", "there", "this",
    "to", "was", "we", "what", "when", "where", "which", "who", "why", "will", "with", "would",
    "you", "your",
];

/// An FTS5 query matching any content word of `text` (each quoted, so
/// user text can never be FTS syntax); `None` when there is no such word.
pub fn fts_query(text: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
        if w.chars().count() < 2 || STOPWORDS.contains(&w) || words.iter().any(|x| x == w) {
            continue;
        }
        words.push(w.to_string());
        if words.len() == 32 {
            break;
        }
    }
    (!words.is_empty()).then(|| {
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

/// FTS5 bm25() (negative, unbounded) → [0, 1): s = x / (1 + x), x = −bm25.
pub fn normalise_bm25(raw: Option<f64>) -> f32 {
    match raw {
        Some(b) => {
            let x = (-b).max(0.0);
            (x / (1.0 + x)) as f32
        }
        None => 0.0,
    }
}

/// The items of `hits` (still present and owned by the user), in hit
/// order, with (semantic, bm25) — one SQL query.
pub fn fetch_scored(
    store: &Store,
    user_id: &str,
    hits: &[VectorHit],
    query: &str,
) -> Result<Vec<(MemoryItem, f32, f32)>> {
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let fts = fts_query(query);
    let placeholders = vec!["?"; hits.len()].join(",");
    let bm25_expr = if fts.is_some() {
        "(SELECT bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?2 AND memories_fts.rowid = m.id)"
    } else {
        "(SELECT NULL WHERE ?2 IS NULL)"
    };
    let sql = format!(
        "SELECT m.id, m.user_id, m.text, m.created_at, m.updated_at, {bm25_expr}
         FROM memories m WHERE m.user_id = ?1 AND m.id IN ({placeholders})"
    );
    let rows: Vec<(MemoryItem, Option<f64>)> = store.with_conn(|c| {
        let mut stmt = c.prepare(&sql)?;
        let mut values: Vec<rusqlite::types::Value> = vec![
            user_id.to_string().into(),
            match &fts {
                Some(q) => q.clone().into(),
                None => rusqlite::types::Value::Null,
            },
        ];
        values.extend(hits.iter().map(|h| rusqlite::types::Value::from(h.item_id)));
        let rows = stmt.query_map(params_from_iter(values), |r| {
            Ok((row_to_item(r)?, r.get::<_, Option<f64>>(5)?))
        })?;
        rows.collect()
    })?;
    Ok(hits
        .iter()
        .filter_map(|h| {
            rows.iter()
                .find(|(m, _)| m.id == h.item_id)
                .map(|(m, b)| (m.clone(), h.score, normalise_bm25(*b)))
        })
        .collect())
}

/// The user's memory with the best keyword match (forget without an embedder).
pub fn best_keyword_match(store: &Store, user_id: &str, query: &str) -> Result<Option<MemoryItem>> {
    let Some(fts) = fts_query(query) else {
        return Ok(None);
    };
    store.with_conn(|c| {
        c.query_row(
            "SELECT m.id, m.user_id, m.text, m.created_at, m.updated_at
             FROM memories_fts f JOIN memories m ON m.id = f.rowid
             WHERE memories_fts MATCH ?1 AND m.user_id = ?2
             ORDER BY bm25(memories_fts) LIMIT 1",
            params![fts, user_id],
            row_to_item,
        )
        .optional()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_query_quotes_content_words_only() {
        assert_eq!(
            fts_query("What is my dentist's NAME?").unwrap(),
            "\"dentist\" OR \"name\""
        );
        assert_eq!(fts_query("what is it"), None);
        assert_eq!(
            fts_query("\"peanut\" OR NEAR(x)").unwrap(),
            "\"peanut\" OR \"near\""
        );
    }

    #[test]
    fn bm25_is_normalised_into_0_1() {
        assert_eq!(normalise_bm25(None), 0.0);
        assert_eq!(normalise_bm25(Some(0.0)), 0.0);
        assert!((normalise_bm25(Some(-1.0)) - 0.5).abs() < 1e-6);
        assert!((normalise_bm25(Some(-3.0)) - 0.75).abs() < 1e-6);
        assert!(normalise_bm25(Some(-1e4)) < 1.0);
        assert_eq!(normalise_bm25(Some(2.0)), 0.0);
    }

    #[test]
    fn scores_come_from_one_query_and_respect_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let ids: Vec<i64> = store
            .with_tx(|tx| {
                let mut ids = Vec::new();
                for t in [
                    "allergic to peanuts",
                    "meeting on monday",
                    "likes jazz",
                    "likes rock",
                ] {
                    ids.push(insert(tx, "user-1", t)?.id);
                }
                ids.push(insert(tx, "user-2", "peanuts are fine")?.id);
                Ok(ids)
            })
            .unwrap();
        let hits: Vec<VectorHit> = ids
            .iter()
            .map(|&id| VectorHit {
                item_id: id,
                score: 0.5,
            })
            .collect();
        let scored = fetch_scored(&store, "user-1", &hits, "peanuts please").unwrap();
        assert_eq!(scored.len(), 4);
        assert!(scored[0].2 > 0.01, "{:?}", scored[0]);
        assert_eq!(scored[1].2, 0.0);
        let none = fetch_scored(&store, "user-1", &hits, "is it").unwrap();
        assert!(none.iter().all(|s| s.2 == 0.0));
        assert_eq!(
            best_keyword_match(&store, "user-1", "my peanuts")
                .unwrap()
                .unwrap()
                .text,
            "allergic to peanuts"
        );
    }
}
