//! The knowledge tables (migration 7): documents, chunks (+ FTS5), and the
//! chunks' embeddings in the shared `vectors` table.
//!
//! A document and all its chunks and vectors land in ONE transaction, and
//! replacing a changed document deletes its old chunks in that same
//! transaction: a failure at any point leaves the previous version whole,
//! never half of one.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::analysis::Analysis;
use super::splitter::Piece;
use super::COLLECTION;
use crate::store::{vector, Store};

/// A stored document.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DocumentRow {
    pub id: i64,
    pub path: String,
    pub title: String,
    pub content_hash: String,
    pub tier: u8,
    pub tags: Vec<String>,
    pub strategy: String,
    pub analysed_by: String,
    pub chunk_count: i64,
}

/// A chunk with its document's metadata.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChunkRow {
    pub id: i64,
    pub document_id: i64,
    pub ordinal: i64,
    pub section: Option<String>,
    pub text: String,
    pub path: String,
    pub title: String,
    pub tier: u8,
    pub tags: Vec<String>,
    /// The PDF page the chunk starts on (None for txt/md).
    pub page: Option<u32>,
}

fn tags_of(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}

pub fn document_by_path(c: &Connection, path: &str) -> rusqlite::Result<Option<DocumentRow>> {
    c.query_row(
        "SELECT id, path, title, content_hash, tier, tags_json, strategy, analysed_by, chunk_count
         FROM knowledge_documents WHERE path = ?1",
        [path],
        |r| {
            Ok(DocumentRow {
                id: r.get(0)?,
                path: r.get(1)?,
                title: r.get(2)?,
                content_hash: r.get(3)?,
                tier: r.get(4)?,
                tags: tags_of(&r.get::<_, String>(5)?),
                strategy: r.get(6)?,
                analysed_by: r.get(7)?,
                chunk_count: r.get(8)?,
            })
        },
    )
    .optional()
}

/// Everything to write for one document.
pub struct NewDocument<'a> {
    pub path: &'a str,
    pub kind: &'a str,
    pub bytes: u64,
    pub hash: &'a str,
    pub analysis: &'a Analysis,
    pub pieces: &'a [Piece],
    pub embeddings: &'a [Vec<f32>],
    /// Per piece, its paragraphs' vectors (empty for a piece of one
    /// paragraph; `knowledge::paragraph`). May be shorter than `pieces`.
    pub paragraph_embeddings: &'a [Vec<Vec<f32>>],
    pub model: &'a str,
    /// Vector keys are per user; the knowledge base is the device's user's.
    pub user_id: &'a str,
}

/// Insert or replace a document with its chunks and vectors, atomically.
pub fn replace_document(store: &Store, doc: &NewDocument<'_>) -> crate::store::Result<i64> {
    store.with_tx(|tx| {
        if let Some(old) = document_by_path(tx, doc.path)? {
            // The delete trigger tombstones each chunk's vector.
            tx.execute("DELETE FROM knowledge_chunks WHERE document_id = ?1", [old.id])?;
            tx.execute("DELETE FROM knowledge_documents WHERE id = ?1", [old.id])?;
        }
        tx.execute(
            "INSERT INTO knowledge_documents (path, title, content_hash, bytes, kind, tier, tags_json,
                strategy, analysed_by, chunk_count, ingested_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                doc.path,
                doc.analysis.title,
                doc.hash,
                doc.bytes as i64,
                doc.kind,
                doc.analysis.tier,
                serde_json::to_string(&doc.analysis.tags).unwrap_or_else(|_| "[]".into()),
                doc.analysis.strategy.as_str(),
                doc.analysis.analysed_by,
                doc.pieces.len() as i64,
                crate::store::now(),
            ],
        )?;
        let doc_id = tx.last_insert_rowid();
        tx.execute("DELETE FROM knowledge_skipped WHERE path = ?1", [doc.path])?;
        let paged = doc.kind == "pdf";
        tx.execute("INSERT OR IGNORE INTO users (id) VALUES (?1)", [doc.user_id])?;
        for (ordinal, (piece, embedding)) in doc.pieces.iter().zip(doc.embeddings).enumerate() {
            tx.execute(
                "INSERT INTO knowledge_chunks (document_id, ordinal, section, text, page) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![doc_id, ordinal as i64, piece.section, piece.text, paged.then_some(piece.page)],
            )?;
            let chunk_id = tx.last_insert_rowid();
            vector::put_in(tx, COLLECTION, doc.user_id, chunk_id, doc.model, embedding)?;
            for (i, v) in doc
                .paragraph_embeddings
                .get(ordinal)
                .into_iter()
                .flatten()
                .enumerate()
            {
                tx.execute(
                    "INSERT INTO knowledge_paragraph_vectors (chunk_id, ordinal, model, embedding)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![chunk_id, i as i64, doc.model, vector::to_blob(v)],
                )?;
            }
        }
        Ok(doc_id)
    })
}

const CHUNK_SELECT: &str =
    "SELECT c.id, c.document_id, c.ordinal, c.section, c.text, d.path, d.title, d.tier, d.tags_json, c.page
     FROM knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id";

fn chunk_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChunkRow> {
    Ok(ChunkRow {
        id: r.get(0)?,
        document_id: r.get(1)?,
        ordinal: r.get(2)?,
        section: r.get(3)?,
        text: r.get(4)?,
        path: r.get(5)?,
        title: r.get(6)?,
        tier: r.get(7)?,
        tags: tags_of(&r.get::<_, String>(8)?),
        page: r.get(9)?,
    })
}

/// Remember a file the ingest could not index (`no_text`: it yielded no
/// text: a scan, an empty file), for `doctor`; replaces an earlier row.
pub fn record_skipped(
    c: &Connection,
    path: &str,
    reason: &str,
    no_text: bool,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO knowledge_skipped (path, reason, no_text, at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(path) DO UPDATE SET reason = excluded.reason, no_text = excluded.no_text, at = excluded.at",
        params![path, reason, no_text as i64, crate::store::now()],
    )?;
    Ok(())
}

/// What the knowledge base holds, for `doctor`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    pub documents: i64,
    pub chunks: i64,
    /// Files whose last ingest yielded no text (scans, empty files).
    pub no_text: i64,
    /// Files whose last ingest failed for another reason.
    pub failed: i64,
}

/// Count documents, chunks and the files that were not indexed.
pub fn stats(c: &Connection) -> rusqlite::Result<Stats> {
    let count = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0));
    Ok(Stats {
        documents: count("SELECT COUNT(*) FROM knowledge_documents")?,
        chunks: count("SELECT COUNT(*) FROM knowledge_chunks")?,
        no_text: count("SELECT COUNT(*) FROM knowledge_skipped WHERE no_text = 1")?,
        failed: count("SELECT COUNT(*) FROM knowledge_skipped WHERE no_text = 0")?,
    })
}

/// Chunks by id, in the order asked (missing ids are left out).
pub fn chunks_by_ids(c: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<ChunkRow>> {
    let mut stmt = c.prepare(&format!("{CHUNK_SELECT} WHERE c.id = ?1"))?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(row) = stmt.query_row([id], chunk_row).optional()? {
            out.push(row);
        }
    }
    Ok(out)
}

/// Every chunk (for exact lookups and exact vector search on small
/// corpora), in document order.
pub fn all_chunks(c: &Connection) -> rusqlite::Result<Vec<ChunkRow>> {
    let mut stmt = c.prepare(&format!("{CHUNK_SELECT} ORDER BY d.id, c.ordinal"))?;
    let rows = stmt.query_map([], chunk_row)?;
    rows.collect()
}

/// Chunks whose text contains `phrase` (case-insensitive), in document order.
pub fn chunks_containing(
    c: &Connection,
    phrase: &str,
    limit: usize,
) -> rusqlite::Result<Vec<ChunkRow>> {
    let mut stmt = c.prepare(&format!(
        "{CHUNK_SELECT} WHERE instr(lower(c.text), lower(?1)) > 0 ORDER BY d.id, c.ordinal LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![phrase, limit as i64], chunk_row)?;
    rows.collect()
}

/// Every tag in use, for the question's dimension filters.
pub fn known_tags(c: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = c.prepare(
        "SELECT DISTINCT value FROM knowledge_documents, json_each(knowledge_documents.tags_json)",
    )?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// All documents, for `earshot knowledge list`-style output and tests.
pub fn documents(c: &Connection) -> rusqlite::Result<Vec<DocumentRow>> {
    let mut stmt = c.prepare("SELECT path FROM knowledge_documents ORDER BY id")?;
    let paths: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::new();
    for p in paths {
        if let Some(d) = document_by_path(c, &p)? {
            out.push(d);
        }
    }
    Ok(out)
}

/// Stored embeddings of the given chunks (exact search over a filtered set).
pub fn embeddings(c: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<(i64, Vec<f32>)>> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(v) = vector::get_in(c, COLLECTION, *id)? {
            out.push((*id, v));
        }
    }
    Ok(out)
}

/// The paragraph vectors stored for a chunk by `model`, in paragraph
/// order; empty when none were stored (a chunk of one paragraph, one
/// ingested before schema v16, or another model's).
pub fn paragraph_vectors(
    c: &Connection,
    chunk_id: i64,
    model: &str,
) -> rusqlite::Result<Vec<Vec<f32>>> {
    let mut stmt = c.prepare_cached(
        "SELECT embedding FROM knowledge_paragraph_vectors
         WHERE chunk_id = ?1 AND model = ?2 ORDER BY ordinal",
    )?;
    let rows = stmt.query_map(params![chunk_id, model], |r| r.get::<_, Vec<u8>>(0))?;
    rows.map(|b| b.map(|b| vector::from_blob(&b))).collect()
}

/// Whether a document has chunks of several paragraphs but no paragraph
/// vector at all: it was indexed before schema v16 stored them.
pub fn lacks_paragraph_vectors(c: &Connection, document_id: i64) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM knowledge_chunks
                        WHERE document_id = ?1 AND instr(text, char(10) || char(10)) > 0)
            AND NOT EXISTS (SELECT 1 FROM knowledge_paragraph_vectors pv
                            JOIN knowledge_chunks c ON c.id = pv.chunk_id
                            WHERE c.document_id = ?1)",
        [document_id],
        |r| r.get(0),
    )
}

/// The canonical form a path is stored under (absolute, symlinks resolved).
pub fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::analysis::Analysis;
    use crate::knowledge::splitter::Strategy;

    fn piece(text: &str) -> Piece {
        Piece {
            section: None,
            text: text.into(),
            page: 1,
        }
    }

    #[test]
    fn a_failed_replacement_leaves_the_previous_version_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let analysis = Analysis {
            title: "Doc".into(),
            tier: 1,
            tags: vec![],
            strategy: Strategy::Paragraph,
            analysed_by: "test".into(),
        };
        let write = |texts: &[&str], hash: &str| {
            let pieces: Vec<Piece> = texts.iter().map(|t| piece(t)).collect();
            let embeddings: Vec<Vec<f32>> = texts.iter().map(|_| vec![1.0, 0.0]).collect();
            let paragraphs: Vec<Vec<Vec<f32>>> = texts
                .iter()
                .map(|_| vec![vec![0.0, 1.0], vec![1.0, 0.0]])
                .collect();
            replace_document(
                &store,
                &NewDocument {
                    path: "/d.md",
                    kind: "md",
                    bytes: 1,
                    hash,
                    analysis: &analysis,
                    pieces: &pieces,
                    embeddings: &embeddings,
                    paragraph_embeddings: &paragraphs,
                    model: "m",
                    user_id: "user-1",
                },
            )
        };
        let count = |sql: &str| -> i64 {
            store
                .with_conn(|c| c.query_row(sql, [], |r| r.get(0)))
                .unwrap()
        };
        const LIVE: &str =
            "SELECT COUNT(*) FROM vectors WHERE collection = 'knowledge' AND embedding IS NOT NULL";
        const PARAGRAPHS: &str = "SELECT COUNT(*) FROM knowledge_paragraph_vectors";
        write(&["one", "two"], "v1").unwrap();
        store
            .with_conn(|c| {
                c.execute_batch(
                    "CREATE TEMP TRIGGER boom BEFORE INSERT ON knowledge_chunks WHEN new.text = 'boom'
                     BEGIN SELECT RAISE(ABORT, 'disk trouble'); END;",
                )
            })
            .unwrap();
        assert!(write(&["three", "boom"], "v2").is_err());
        let doc = store
            .with_conn(|c| document_by_path(c, "/d.md"))
            .unwrap()
            .unwrap();
        assert_eq!(doc.content_hash, "v1");
        let texts: Vec<String> = store
            .with_conn(all_chunks)
            .unwrap()
            .into_iter()
            .map(|c| c.text)
            .collect();
        assert_eq!(texts, vec!["one", "two"]);
        assert_eq!(
            count(PARAGRAPHS),
            4,
            "a failed replacement keeps the paragraph vectors"
        );
        assert_eq!(count(LIVE), 2);
        // A successful replacement swaps chunks and tombstones old vectors.
        store
            .with_conn(|c| c.execute_batch("DROP TRIGGER boom"))
            .unwrap();
        write(&["three"], "v3").unwrap();
        assert_eq!(count(LIVE), 1);
        // The old chunks' paragraph vectors went with them.
        assert_eq!(count(PARAGRAPHS), 2);
        let id = store.with_conn(all_chunks).unwrap()[0].id;
        let stored = store.with_conn(|c| paragraph_vectors(c, id, "m")).unwrap();
        assert_eq!(stored, vec![vec![0.0, 1.0], vec![1.0, 0.0]]);
        assert!(store
            .with_conn(|c| paragraph_vectors(c, id, "other-model"))
            .unwrap()
            .is_empty());
    }
}
