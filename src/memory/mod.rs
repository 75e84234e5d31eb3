//! Long-term memory and searchable past conversations, on the device
//! (R-MEM, R-VEC): what Mem0 and Pinecone did in the seed.
//!
//! Code map:
//! - [`Memory`] (this file): the public API every caller uses — recall
//!   before routing, list / remember / forget / search for the intent tree
//!   and the CLI, conversation search for the `search_conversations` tool.
//! - `rows.rs`: the SQL over `memories` (+ FTS5 bm25) — one query per recall.
//! - `recall.rs`: the score breakdown, the keep rule and the block format.
//! - `extract.rs`: Mem0-style extraction (facts → add/update/delete).
//! - `summary.rs`: conversation titles/overviews and their vectors.
//! - `worker.rs`: the background thread draining the `jobs` table.
//!
//! Invariants: SQLite is the source of truth (the vector files under
//! `<state>/index/` are caches rebuilt from it, see
//! [`crate::store::vector`]); nothing here runs on the voice loop except
//! [`Memory::recall`] (one embed, one index search, one SQL query); every
//! failure is logged and the turn goes on.

mod extract;
pub mod phrases;
mod recall;
mod rows;
mod summary;
pub mod supersede;
mod worker;

pub use extract::{parse_facts, parse_operations, MemoryOp, OpEvent, DEFAULT_INSTRUCTIONS};
pub use recall::{format_block, keep, ScoredMemory, BLOCK_HEADER};
pub use rows::MemoryItem;
pub use summary::{parse_summary, Summary};
pub use worker::{process_pending, start_background, BackgroundHandle, DrainReport, WorkerParts};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

use crate::nlu::Embedder;
use crate::store::vector::{self, VectorIndex};
use crate::store::Store;
use crate::tools::search_conversations::{ConversationHit, ConversationSearch};

/// The vector collection of long-term memories.
pub const MEMORIES: &str = "memories";
/// The vector collection of conversation summaries (R-VEC).
pub const CONVERSATIONS: &str = "conversations";
/// Characters of a text handed to the embedder (the model reads 256
/// tokens anyway; this keeps a 50k-character memory cheap).
const EMBED_CHARS: usize = 2000;

/// `[memory]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    pub enabled: bool,
    /// `MEM0_CUSTOM_INSTRUCTIONS`: replaces the extraction instructions
    /// (what to keep, by priority, and what never to keep).
    pub custom_instructions: String,
    /// Memories considered per recall (R-MEM: 5).
    pub top_k: usize,
    /// Keep a memory at or above this cosine…
    pub semantic_threshold: f32,
    /// …or at or above this one with a keyword hit above `bm25_threshold`.
    pub weak_semantic_threshold: f32,
    pub bm25_threshold: f32,
    /// Conversations with fewer user turns are not summarised (R-VEC: 2).
    pub min_summary_turns: usize,
    /// Existing memories shown to the LLM when it decides add/update/delete.
    pub similar_memories: usize,
    /// Characters of one memory shown in the recall block (the stored text
    /// is never cut).
    pub max_block_chars: usize,
    /// Attempts per background job before it is dropped (transient LLM
    /// outages do not count).
    pub max_job_attempts: i64,
    /// How often the idle worker looks for jobs written by other processes.
    pub worker_poll_ms: u64,
    /// A remembered statement with the same subject and verb as an older
    /// memory supersedes it at or above this cosine (no LLM needed).
    pub supersede_similarity: f32,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            custom_instructions: String::new(),
            top_k: 5,
            semantic_threshold: 0.28,
            weak_semantic_threshold: 0.24,
            bm25_threshold: 0.01,
            min_summary_turns: 2,
            similar_memories: 10,
            max_block_chars: 500,
            max_job_attempts: 3,
            worker_poll_ms: 2000,
            supersede_similarity: 0.55,
        }
    }
}

impl MemoryConfig {
    /// The extraction instructions in effect (custom ones win).
    pub fn instructions(&self) -> &str {
        if self.custom_instructions.trim().is_empty() {
            DEFAULT_INSTRUCTIONS
        } else {
            &self.custom_instructions
        }
    }
}

/// Recall before routing (R-MEM): the formatted memory block to prepend to
/// the user's text, or `None` when nothing relevant is kept.
pub trait Recall: Send + Sync {
    fn recall_block(&self, user_id: &str, text: &str) -> anyhow::Result<Option<String>>;

    /// The block and the memories in it, for the turn log (R-OBS: every
    /// turn's row names the memories sent, with their scores). The default
    /// knows only the block.
    fn recall(&self, user_id: &str, text: &str) -> anyhow::Result<Recalled> {
        Ok(Recalled {
            block: self.recall_block(user_id, text)?,
            memories: Vec::new(),
        })
    }
}

/// What recall handed to the turn: the block prepended to the user's text
/// and the memories it holds, in block order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recalled {
    pub block: Option<String>,
    pub memories: Vec<ScoredMemory>,
}

impl Recalled {
    /// The turn log's `memories` entries: id, text and the score breakdown.
    pub fn log_entries(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.memories
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "id": m.item.id,
                        "text": m.item.text,
                        "created_at": m.item.created_at,
                        "semantic": m.semantic,
                        "bm25": m.bm25,
                    })
                })
                .collect(),
        )
    }
}

/// What [`Memory::remember`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Remembered {
    pub item: MemoryItem,
    /// false: the same text was already stored (nothing added).
    pub created: bool,
    /// The text `item` had before this statement superseded it (same
    /// subject, close meaning: [`supersede`]); kept in `memory_history`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded: Option<String>,
}

/// The device's long-term memory and conversation index. Cheap to share
/// (`Arc`); every method is safe from any thread.
pub struct Memory {
    store: Store,
    config: MemoryConfig,
    embedder: Option<Arc<dyn Embedder>>,
    memories: Option<VectorIndex>,
    conversations: Option<VectorIndex>,
    index_dir: PathBuf,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("index_dir", &self.index_dir)
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id()))
            .finish()
    }
}

/// `<dir of the database>/index`: the indexes live beside the database
/// they are derived from.
pub fn index_dir(store: &Store) -> PathBuf {
    store
        .path()
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("index")
}

fn embed_text(text: &str) -> &str {
    match text.char_indices().nth(EMBED_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

pub use phrases::{strip_forget, strip_remember};

/// The explicit-memory request in `text` ("remember that …"), if it is one.
pub fn explicit_memory(text: &str) -> Option<&str> {
    let stripped = strip_remember(text);
    (stripped.len() < text.trim().len()
        && !stripped
            .trim_matches(|c: char| !c.is_alphanumeric())
            .is_empty())
    .then_some(stripped)
}

impl Memory {
    /// Open over a store. With an embedder, the two vector indexes are
    /// opened (created, rebuilt or caught up as needed) and memories stored
    /// without a current-model embedding are embedded now; without one,
    /// listing, explicit remember and keyword forget still work.
    pub fn open(
        store: Store,
        embedder: Option<Arc<dyn Embedder>>,
        config: MemoryConfig,
    ) -> Result<Memory> {
        let dir = index_dir(&store);
        let (memories, conversations) = match &embedder {
            Some(e) => {
                let model = e.model_id();
                let m = VectorIndex::open(&store, &dir, MEMORIES, e.dims(), &model)
                    .context("cannot open the memory index")?;
                let c = VectorIndex::open(&store, &dir, CONVERSATIONS, e.dims(), &model)
                    .context("cannot open the conversation index")?;
                (Some(m), Some(c))
            }
            None => (None, None),
        };
        let memory = Memory {
            store,
            config,
            embedder,
            memories,
            conversations,
            index_dir: dir,
        };
        if let Err(e) = memory.backfill() {
            tracing::warn!(error = %format!("{e:#}"), "could not embed memories stored without a vector; they are found by keyword only until the next start");
        }
        Ok(memory)
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where the index files live.
    pub fn index_dir(&self) -> &Path {
        &self.index_dir
    }

    fn embedder(&self) -> Result<&Arc<dyn Embedder>> {
        self.embedder.as_ref().ok_or_else(|| {
            anyhow!("the on-device embedder is not loaded, so memories cannot be searched by meaning; run `earshot doctor` for the fix")
        })
    }

    pub(crate) fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let cut: Vec<&str> = texts.iter().map(|t| embed_text(t)).collect();
        self.embedder()?.embed(&cut)
    }

    fn model_id(&self) -> String {
        self.embedder
            .as_ref()
            .map(|e| e.model_id())
            .unwrap_or_default()
    }

    /// Embed every memory and summary that has no embedding of the current
    /// model (stored while the embedder was missing, or by another model).
    fn backfill(&self) -> Result<usize> {
        if self.embedder.is_none() {
            return Ok(0);
        }
        let model = self.model_id();
        let mut done = 0;
        loop {
            let batch = rows::unembedded(&self.store, &model, 32)?;
            if batch.is_empty() {
                break;
            }
            let texts: Vec<&str> = batch.iter().map(|m| m.text.as_str()).collect();
            let vectors = self.embed(&texts)?;
            self.store.with_tx(|tx| {
                for (m, v) in batch.iter().zip(&vectors) {
                    vector::put_in(tx, MEMORIES, &m.user_id, m.id, &model, v)?;
                }
                Ok(())
            })?;
            done += batch.len();
        }
        done += summary::backfill(self)?;
        if done > 0 {
            tracing::info!(items = done, "embedded items that had no vector");
            self.flush();
        }
        Ok(done)
    }

    /// Write index files that are due (cheap when nothing changed).
    pub fn flush(&self) {
        for index in [&self.memories, &self.conversations].into_iter().flatten() {
            index.flush_if_due();
        }
    }

    /// Every memory of a user, newest first.
    pub fn list(&self, user_id: &str) -> Result<Vec<MemoryItem>> {
        Ok(rows::list(&self.store, user_id)?)
    }

    /// Store `text` as a memory now, with no LLM ("remember that …"; a
    /// leading "remember that" is removed). The same text already stored
    /// (ignoring case and punctuation) is not added twice.
    ///
    /// A statement about the same thing as an older memory ("my car is
    /// parked on level 5" after "my car is on level 3") supersedes it on
    /// the device: the older memory takes the new text, its old text goes
    /// to `memory_history` (see [`supersede`]). The LLM extraction decides
    /// that itself and adds through [`Memory::remember_as_is`].
    pub fn remember(&self, user_id: &str, text: &str) -> Result<Remembered> {
        self.remember_with(user_id, text, true)
    }

    /// [`Memory::remember`] without supersession (the LLM already chose ADD).
    pub fn remember_as_is(&self, user_id: &str, text: &str) -> Result<Remembered> {
        self.remember_with(user_id, text, false)
    }

    fn remember_with(&self, user_id: &str, text: &str, supersede: bool) -> Result<Remembered> {
        let text = strip_remember(text);
        if text.trim_matches(|c: char| !c.is_alphanumeric()).is_empty() {
            return Err(anyhow!("there is nothing to remember in that"));
        }
        if let Some(item) = rows::find_same_text(&self.store, user_id, text)? {
            return Ok(Remembered {
                item,
                created: false,
                superseded: None,
            });
        }
        if supersede && self.memories.is_some() && supersede::frame(text).is_some() {
            let candidates = self.search(user_id, text, self.config.similar_memories)?;
            let older = candidates.into_iter().find(|c| {
                supersede::supersedes(
                    &c.item.text,
                    text,
                    c.semantic,
                    self.config.supersede_similarity,
                )
            });
            if let Some(older) = older {
                if let Some(item) = self.replace(user_id, &older, text)? {
                    return Ok(Remembered {
                        item,
                        created: false,
                        superseded: Some(older.item.text),
                    });
                }
            }
        }
        let item = self.add(user_id, text)?;
        Ok(Remembered {
            item,
            created: true,
            superseded: None,
        })
    }

    /// Supersede `older` with `text`: its old text to the history, the new
    /// text and embedding in its place, in one transaction.
    fn replace(
        &self,
        user_id: &str,
        older: &ScoredMemory,
        text: &str,
    ) -> Result<Option<MemoryItem>> {
        let embedding = self.embed(&[text])?.remove(0);
        let model = self.model_id();
        let item = self.store.with_tx(|tx| {
            tx.execute(
                "INSERT INTO memory_history (memory_id, text, replaced_at, similarity)
                 VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    older.item.id,
                    older.item.text,
                    crate::store::now(),
                    f64::from(older.semantic)
                ],
            )?;
            let item = rows::update(tx, user_id, older.item.id, text)?;
            if item.is_some() {
                vector::put_in(tx, MEMORIES, user_id, older.item.id, &model, &embedding)?;
            }
            Ok(item)
        })?;
        self.after_write();
        Ok(item)
    }

    /// The texts a memory had before it was superseded, oldest first.
    pub fn history(&self, memory_id: i64) -> Result<Vec<String>> {
        Ok(self.store.with_conn(|c| {
            let mut stmt =
                c.prepare("SELECT text FROM memory_history WHERE memory_id = ?1 ORDER BY id")?;
            let rows = stmt.query_map([memory_id], |r| r.get(0))?;
            rows.collect()
        })?)
    }

    /// Insert a memory (and its vector, in the same transaction).
    pub fn add(&self, user_id: &str, text: &str) -> Result<MemoryItem> {
        let embedding = match &self.embedder {
            Some(_) => Some(self.embed(&[text])?.remove(0)),
            None => None,
        };
        let model = self.model_id();
        let item = self.store.with_tx(|tx| {
            let item = rows::insert(tx, user_id, text)?;
            if let Some(v) = &embedding {
                vector::put_in(tx, MEMORIES, user_id, item.id, &model, v)?;
            }
            Ok(item)
        })?;
        self.after_write();
        Ok(item)
    }

    /// Replace a memory's text (the fact superseding it); `created_at` is
    /// kept, `updated_at` moves. `None` when the memory is gone.
    pub fn update(&self, user_id: &str, id: i64, text: &str) -> Result<Option<MemoryItem>> {
        let embedding = match &self.embedder {
            Some(_) => Some(self.embed(&[text])?.remove(0)),
            None => None,
        };
        let model = self.model_id();
        let item = self.store.with_tx(|tx| {
            let item = rows::update(tx, user_id, id, text)?;
            if let (Some(_), Some(v)) = (&item, &embedding) {
                vector::put_in(tx, MEMORIES, user_id, id, &model, v)?;
            }
            Ok(item)
        })?;
        self.after_write();
        Ok(item)
    }

    /// Delete one memory of the user; returns it, or `None` if it was not there.
    pub fn delete(&self, user_id: &str, id: i64) -> Result<Option<MemoryItem>> {
        // The delete trigger tombstones the vector in the same transaction.
        let item = self.store.with_tx(|tx| rows::delete(tx, user_id, id))?;
        self.after_write();
        Ok(item)
    }

    fn after_write(&self) {
        if let Some(index) = &self.memories {
            if let Err(e) = index.sync() {
                tracing::warn!(error = %format!("{e:#}"), "memory index could not catch up; it will on the next search");
            }
            index.flush_if_due();
        }
    }

    /// Forget the memory that best matches `query` ("forget that I like
    /// jazz"); "forget that" / an empty query forgets the newest memory.
    /// Returns what was deleted, or `None` when nothing matched well enough
    /// (the same keep rule as recall).
    pub fn forget(&self, user_id: &str, query: &str) -> Result<Option<MemoryItem>> {
        let query = strip_forget(query);
        let bare = query
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        let target = if bare.is_empty() || matches!(bare.as_str(), "that" | "it" | "this") {
            rows::list(&self.store, user_id)?
                .into_iter()
                .max_by(|a, b| a.updated_at.cmp(&b.updated_at).then(a.id.cmp(&b.id)))
        } else if self.embedder.is_some() {
            self.search(user_id, query, self.config.top_k)?
                .into_iter()
                .find(|s| s.keep)
                .map(|s| s.item)
        } else {
            rows::best_keyword_match(&self.store, user_id, query)?
        };
        match target {
            Some(item) => self.delete(user_id, item.id),
            None => Ok(None),
        }
    }

    /// The top `k` memories by meaning, best first, each with its score
    /// breakdown and the keep decision (for `earshot memory search`).
    pub fn search(&self, user_id: &str, query: &str, k: usize) -> Result<Vec<ScoredMemory>> {
        let index = self.memories.as_ref().ok_or_else(|| {
            anyhow!("the on-device embedder is not loaded, so memories cannot be searched by meaning; run `earshot doctor` for the fix")
        })?;
        let q = self.embed(&[query])?.remove(0);
        let hits = index.search(user_id, &q, k)?;
        let scored = rows::fetch_scored(&self.store, user_id, &hits, query)?;
        Ok(scored
            .into_iter()
            .map(|(item, semantic, bm25)| ScoredMemory {
                keep: keep(&self.config, semantic, bm25),
                item,
                semantic,
                bm25,
            })
            .collect())
    }

    /// R-MEM recall: top-k by meaning, kept by the score rule, newest first.
    pub fn recall(&self, user_id: &str, text: &str) -> Result<Vec<ScoredMemory>> {
        let mut kept: Vec<ScoredMemory> = self
            .search(user_id, text, self.config.top_k)?
            .into_iter()
            .filter(|s| s.keep)
            .collect();
        kept.sort_by(|a, b| {
            b.item
                .created_at
                .cmp(&a.item.created_at)
                .then(b.item.id.cmp(&a.item.id))
        });
        Ok(kept)
    }

    /// Past conversations of a user by meaning (R-VEC read path): embed,
    /// search filtered to the user, fetch the summaries from SQLite.
    pub fn search_conversations(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<ConversationHit>> {
        let index = self.conversations.as_ref().ok_or_else(|| {
            anyhow!("the on-device embedder is not loaded, so past conversations cannot be searched; run `earshot doctor` for the fix")
        })?;
        let q = self.embed(&[query])?.remove(0);
        let hits = index.search(user_id, &q, k)?;
        summary::fetch_hits(&self.store, user_id, &hits)
    }

    /// Index statistics for `earshot memory check` and the tests.
    pub fn index_stats(&self) -> Result<Vec<vector::IndexStats>> {
        [&self.memories, &self.conversations]
            .into_iter()
            .flatten()
            .map(|i| i.stats())
            .collect()
    }

    /// Rebuild both index files from SQLite.
    pub fn reindex(&self) -> Result<usize> {
        let mut n = 0;
        for index in [&self.memories, &self.conversations].into_iter().flatten() {
            n += index.rebuild()?;
        }
        Ok(n)
    }

    pub(crate) fn conversation_index(&self) -> Option<&VectorIndex> {
        self.conversations.as_ref()
    }

    pub(crate) fn model(&self) -> String {
        self.model_id()
    }
}

impl Recall for Memory {
    fn recall_block(&self, user_id: &str, text: &str) -> Result<Option<String>> {
        Ok(Recall::recall(self, user_id, text)?.block)
    }

    fn recall(&self, user_id: &str, text: &str) -> Result<Recalled> {
        let kept = Memory::recall(self, user_id, text)?;
        Ok(Recalled {
            block: format_block(&kept, self.config.max_block_chars),
            memories: kept,
        })
    }
}

impl ConversationSearch for Memory {
    fn search(&self, user_id: &str, query: &str, k: usize) -> Result<Vec<ConversationHit>> {
        self.search_conversations(user_id, query, k)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A deterministic bag-of-words embedder for unit tests (the
    //! integration tests use the real MiniLM model).
    use super::*;

    pub struct Bow;

    impl Embedder for Bow {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0f32; 64];
                    for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                        if w.is_empty() {
                            continue;
                        }
                        let h = w.bytes().fold(1469598103934665603u64, |h, b| {
                            (h ^ b as u64).wrapping_mul(1099511628211)
                        });
                        v[(h % 64) as usize] += 1.0;
                    }
                    v[63] += 0.01;
                    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.iter().map(|x| x / n).collect()
                })
                .collect())
        }
        fn dims(&self) -> usize {
            64
        }
        fn model_id(&self) -> String {
            "bow-test".into()
        }
    }

    pub fn memory(dir: &Path) -> Memory {
        let store = Store::open_in(dir).unwrap();
        Memory::open(store, Some(Arc::new(Bow)), MemoryConfig::default()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::memory;
    use super::*;

    #[test]
    fn strips_remember_and_forget_prefixes() {
        assert_eq!(strip_remember("Remember that I like jazz"), "I like jazz");
        assert_eq!(
            strip_remember("please remember: dentist at 5"),
            "dentist at 5"
        );
        assert_eq!(strip_remember("I like jazz"), "I like jazz");
        assert_eq!(
            explicit_memory("remember that my wife is Ana"),
            Some("my wife is Ana")
        );
        assert_eq!(explicit_memory("what do you remember"), None);
        assert_eq!(explicit_memory("remember that"), None);
        assert_eq!(strip_forget("forget that I like jazz"), "I like jazz");
        assert_eq!(strip_forget("Forget about my dentist"), "my dentist");
    }

    #[test]
    fn remember_list_forget_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let m = memory(dir.path());
        let a = m
            .remember("user-1", "remember that I am allergic to peanuts")
            .unwrap();
        assert!(a.created);
        assert_eq!(a.item.text, "I am allergic to peanuts");
        let again = m.remember("user-1", "I am allergic to peanuts!").unwrap();
        assert!(!again.created);
        m.remember("user-1", "my dentist appointment is on friday")
            .unwrap();
        m.remember("user-2", "user two likes tea").unwrap();
        assert_eq!(m.list("user-1").unwrap().len(), 2);
        let forgotten = m
            .forget("user-1", "forget my dentist appointment")
            .unwrap()
            .unwrap();
        assert_eq!(forgotten.text, "my dentist appointment is on friday");
        assert_eq!(m.list("user-1").unwrap().len(), 1);
        // Nothing close enough: nothing deleted.
        assert!(m
            .forget("user-1", "quantum chromodynamics")
            .unwrap()
            .is_none());
        // "forget that" removes the newest.
        assert!(m.forget("user-1", "forget that").unwrap().is_some());
        assert!(m.list("user-1").unwrap().is_empty());
        assert_eq!(m.list("user-2").unwrap().len(), 1);
        let stats = m.index_stats().unwrap();
        assert_eq!((stats[0].indexed, stats[0].stored), (1, 1));
    }

    #[test]
    fn recall_block_is_exact_and_filtered_to_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let m = memory(dir.path());
        m.add("user-1", "allergic to peanuts").unwrap();
        m.add("user-2", "allergic to peanuts too").unwrap();
        let block = m
            .recall_block("user-1", "am I allergic to peanuts")
            .unwrap()
            .unwrap();
        let today = &crate::store::now()[..10];
        assert_eq!(
            block,
            format!("Relevant context from your past conversations:\n- allergic to peanuts (created {today})")
        );
        assert!(m.recall_block("user-3", "peanuts").unwrap().is_none());
        // A 50k-character memory is stored whole and shown cut.
        let long = "x".repeat(50_000);
        let item = m.add("user-1", &format!("peanuts {long}")).unwrap();
        assert_eq!(
            m.list("user-1")
                .unwrap()
                .iter()
                .find(|i| i.id == item.id)
                .unwrap()
                .text
                .len(),
            50_008
        );
    }
}
