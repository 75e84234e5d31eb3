//! On-disk usearch vector indexes, one file per collection (memories,
//! conversation summaries, later knowledge chunks), derived from SQLite.
//!
//! SQLite is the source of truth: every embedding is stored in the
//! `vectors` table (migration 4) with the collection's generation counter
//! at the time of the change. An index file records the generation it
//! reflects, so:
//! - a missing, truncated or corrupt file, or one ahead of the database,
//!   is rebuilt from the stored embeddings (no re-embedding), with a log
//!   line;
//! - a file behind the database catches up with one query
//!   (`generation > ?`) — this is also how a long-running service sees
//!   the writes of a CLI command sharing the state dir, and vice versa.
//!
//! Writes to the file go to a temp file, are fsynced and renamed over the
//! old one while holding an exclusive `flock` on `<collection>.lock`, so a
//! reader in another process sees either the old or the new index, never
//! half of one. Keys are `(users.rowid << 40) | item_id`: stable per
//! (user, item), and a search is filtered to one user by the key alone.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::Store;

/// Bits of a key that hold the item id; the user's ordinal sits above.
const ITEM_BITS: u32 = 40;
const ITEM_MASK: u64 = (1u64 << ITEM_BITS) - 1;
/// First bytes of an index file written by this module.
const MAGIC: &[u8; 8] = b"ESHTVEC1";
/// HNSW parameters (notes/memory.md): at 100k clustered 384-d vectors
/// (sentence-embedding-like) top-10 recall against exact search is 1.0
/// from expansion_search 64 up; uniform random vectors, the worst case,
/// only reach 0.15 at 128 — real embeddings are clustered.
const CONNECTIVITY: usize = 16;
const EXPANSION_ADD: usize = 128;
const EXPANSION_SEARCH: usize = 128;
/// Flush at least this often when there are unsaved changes…
const FLUSH_EVERY: Duration = Duration::from_secs(30);
/// …or after this many unsaved changes; small indexes flush every change.
const FLUSH_AFTER_CHANGES: usize = 256;
const SMALL_INDEX: usize = 20_000;

/// The usearch key of an item owned by the user with `users.rowid = user_ordinal`.
pub fn vector_key(user_ordinal: i64, item_id: i64) -> u64 {
    ((user_ordinal as u64) << ITEM_BITS) | (item_id as u64 & ITEM_MASK)
}

/// The item id inside a key.
pub fn item_of(key: u64) -> i64 {
    (key & ITEM_MASK) as i64
}

/// `users.rowid` of a user (the key prefix), if the user exists.
pub fn user_ordinal(conn: &Connection, user_id: &str) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT rowid FROM users WHERE id = ?1", [user_id], |r| {
        r.get(0)
    })
    .optional()
}

/// Bump a collection's generation (creating the collection) and return it.
fn bump_generation(conn: &Connection, collection: &str) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO vector_collections (name, generation) VALUES (?1, 1)
         ON CONFLICT(name) DO UPDATE SET generation = generation + 1",
        [collection],
    )?;
    conn.query_row(
        "SELECT generation FROM vector_collections WHERE name = ?1",
        [collection],
        |r| r.get(0),
    )
}

/// Store (or replace) an item's embedding, inside the caller's transaction
/// so the item and its vector land together.
pub fn put_in(
    conn: &Connection,
    collection: &str,
    user_id: &str,
    item_id: i64,
    model: &str,
    embedding: &[f32],
) -> rusqlite::Result<()> {
    let ordinal = user_ordinal(conn, user_id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    let key = vector_key(ordinal, item_id) as i64;
    let generation = bump_generation(conn, collection)?;
    conn.execute(
        "INSERT INTO vectors (collection, item_id, user_id, key, model, embedding, generation)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(collection, item_id) DO UPDATE SET user_id = excluded.user_id,
             key = excluded.key, model = excluded.model, embedding = excluded.embedding,
             generation = excluded.generation",
        params![
            collection,
            item_id,
            user_id,
            key,
            model,
            to_blob(embedding),
            generation
        ],
    )?;
    Ok(())
}

/// Mark an item's vector deleted (a tombstone readers catch up with).
pub fn delete_in(conn: &Connection, collection: &str, item_id: i64) -> rusqlite::Result<()> {
    let generation = bump_generation(conn, collection)?;
    conn.execute(
        "UPDATE vectors SET embedding = NULL, generation = ?3 WHERE collection = ?1 AND item_id = ?2",
        params![collection, item_id, generation],
    )?;
    Ok(())
}

/// The stored embedding of an item (e.g. to compare without re-embedding).
pub fn get_in(
    conn: &Connection,
    collection: &str,
    item_id: i64,
) -> rusqlite::Result<Option<Vec<f32>>> {
    let blob: Option<Option<Vec<u8>>> = conn
        .query_row(
            "SELECT embedding FROM vectors WHERE collection = ?1 AND item_id = ?2",
            params![collection, item_id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(blob.flatten().map(|b| from_blob(&b)))
}

/// f32 little-endian bytes.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn from_blob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHit {
    pub item_id: i64,
    /// Cosine similarity (1 − cosine distance).
    pub score: f32,
}

/// Sizes for `earshot memory stats` and the consistency test.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IndexStats {
    pub collection: String,
    pub path: PathBuf,
    /// Vectors in the in-memory index.
    pub indexed: usize,
    /// Live vectors in SQLite for this model.
    pub stored: usize,
    pub generation: i64,
    /// Keys in SQLite that the index lacks, plus indexed keys SQLite lacks.
    pub missing: usize,
    pub extra: usize,
}

/// The header written before the usearch payload.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    collection: String,
    dims: usize,
    model: String,
    generation: i64,
    count: usize,
    payload_len: usize,
    checksum: u64,
}

struct State {
    index: Index,
    generation: i64,
    /// Changes applied since the file was last written.
    dirty: usize,
    last_flush: Instant,
    /// users.id → users.rowid (never changes for a user).
    ordinals: HashMap<String, i64>,
}

/// One collection's index, kept in memory and mirrored to a file.
pub struct VectorIndex {
    store: Store,
    collection: String,
    path: PathBuf,
    lock_path: PathBuf,
    dims: usize,
    model: String,
    state: Mutex<State>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("collection", &self.collection)
            .field("path", &self.path)
            .finish()
    }
}

/// An empty index with the parameters every collection uses (384-d
/// MiniLM, cosine, f32, the HNSW settings above); public for the bench.
pub fn new_index(dims: usize) -> Result<Index> {
    let options = IndexOptions {
        dimensions: dims,
        metric: MetricKind::Cos,
        quantization: ScalarKind::F32,
        connectivity: CONNECTIVITY,
        expansion_add: EXPANSION_ADD,
        expansion_search: EXPANSION_SEARCH,
        multi: false,
    };
    Index::new(&options).map_err(|e| anyhow!("cannot create a vector index: {e}"))
}

/// A fast 64-bit checksum (word-wise multiply-xor) so a truncated or
/// scribbled file is detected before usearch reads it.
fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl VectorIndex {
    /// Open the collection's index under `dir` (`<dir>/<collection>.usearch`),
    /// creating the directory and the file when missing, rebuilding it from
    /// SQLite when it is unreadable or inconsistent, and catching up with
    /// changes made since it was written.
    pub fn open(
        store: &Store,
        dir: &Path,
        collection: &str,
        dims: usize,
        model: &str,
    ) -> Result<VectorIndex> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the index directory {}", dir.display()))?;
        let path = dir.join(format!("{collection}.usearch"));
        let lock_path = dir.join(format!("{collection}.lock"));
        let loaded = match Self::read_file(&path, collection, dims, model) {
            Ok(Some((index, generation))) => Some((index, generation)),
            Ok(None) => {
                tracing::info!(collection, path = %path.display(), "no vector index file yet; building it from SQLite");
                None
            }
            Err(e) => {
                tracing::warn!(collection, path = %path.display(), error = %e, "vector index file is unusable; rebuilding it from SQLite");
                None
            }
        };
        let (index, generation, rebuilt) = match loaded {
            Some((index, generation)) => (index, generation, false),
            None => (new_index(dims)?, 0, true),
        };
        let this = VectorIndex {
            store: store.clone(),
            collection: collection.to_string(),
            path,
            lock_path,
            dims,
            model: model.to_string(),
            state: Mutex::new(State {
                index,
                generation,
                dirty: 0,
                last_flush: Instant::now(),
                ordinals: HashMap::new(),
            }),
        };
        this.clean_up_after_crash();
        {
            let mut state = this.lock();
            if rebuilt {
                this.rebuild_locked(&mut state)?;
            } else {
                this.sync_locked(&mut state)?;
                let stored = this.stored_count()?;
                if stored != state.index.size() {
                    tracing::warn!(
                        collection,
                        indexed = state.index.size(),
                        stored,
                        "vector index disagrees with SQLite; rebuilding it from SQLite"
                    );
                    this.rebuild_locked(&mut state)?;
                }
            }
            if state.dirty > 0 {
                // Best effort: a read-only state dir still answers searches.
                if let Err(e) = this.save_locked(&mut state) {
                    tracing::warn!(collection, error = %e, "could not write the vector index file");
                }
            }
        }
        Ok(this)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // usearch calls cannot leave the index half-updated on a Rust panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// Vectors in the in-memory index.
    pub fn len(&self) -> usize {
        self.lock().index.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Read and validate a file; `Ok(None)` when there is none.
    fn read_file(
        path: &Path,
        collection: &str,
        dims: usize,
        model: &str,
    ) -> Result<Option<(Index, i64)>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(anyhow!("cannot read it: {e}")),
        };
        if bytes.len() < 12 || &bytes[..8] != MAGIC {
            bail!("not an earshot index file ({} bytes)", bytes.len());
        }
        let header_len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let header_end = 12usize
            .checked_add(header_len)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| anyhow!("truncated header"))?;
        let header: Header = serde_json::from_slice(&bytes[12..header_end])
            .map_err(|e| anyhow!("unreadable header: {e}"))?;
        let payload = &bytes[header_end..];
        if header.collection != collection || header.dims != dims {
            bail!(
                "written for collection {} with {} dims",
                header.collection,
                header.dims
            );
        }
        if header.model != model {
            bail!("written with another embedding model ({})", header.model);
        }
        if payload.len() != header.payload_len {
            bail!(
                "truncated: {} of {} payload bytes",
                payload.len(),
                header.payload_len
            );
        }
        if checksum(payload) != header.checksum {
            bail!("checksum mismatch");
        }
        let index = new_index(dims)?;
        index
            .load_from_buffer(payload)
            .map_err(|e| anyhow!("usearch cannot load it: {e}"))?;
        index.change_expansion_search(EXPANSION_SEARCH);
        index.change_expansion_add(EXPANSION_ADD);
        if index.size() != header.count || index.dimensions() != dims {
            bail!(
                "holds {} vectors, header says {}",
                index.size(),
                header.count
            );
        }
        Ok(Some((index, header.generation)))
    }

    fn stored_count(&self) -> Result<usize> {
        let n: i64 = self.store.with_conn(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM vectors WHERE collection = ?1 AND model = ?2 AND embedding IS NOT NULL",
                params![self.collection, self.model],
                |r| r.get(0),
            )
        })?;
        Ok(n as usize)
    }

    fn ensure_capacity(index: &Index, extra: usize) -> Result<()> {
        let needed = index.size() + extra;
        if needed >= index.capacity() {
            let target = (needed * 2).max(64);
            index
                .reserve(target)
                .map_err(|e| anyhow!("cannot grow the vector index to {target}: {e}"))?;
        }
        Ok(())
    }

    fn upsert_locked(&self, index: &Index, key: u64, embedding: &[f32]) -> Result<()> {
        if index.contains(key) {
            index
                .remove(key)
                .map_err(|e| anyhow!("cannot replace vector {key}: {e}"))?;
        }
        if embedding.len() != self.dims {
            tracing::warn!(collection = %self.collection, key, len = embedding.len(), "stored embedding has the wrong size; skipped");
            return Ok(());
        }
        Self::ensure_capacity(index, 1)?;
        index
            .add(key, embedding)
            .map_err(|e| anyhow!("cannot add vector {key}: {e}"))
    }

    /// Apply every change SQLite has beyond the index's generation; a
    /// database behind the index (restored backup) forces a rebuild.
    fn sync_locked(&self, state: &mut State) -> Result<usize> {
        let current: i64 = self.store.with_conn(|c| {
            c.query_row(
                "SELECT COALESCE((SELECT generation FROM vector_collections WHERE name = ?1), 0)",
                [&self.collection],
                |r| r.get(0),
            )
        })?;
        if current == state.generation {
            return Ok(0);
        }
        if current < state.generation {
            tracing::warn!(collection = %self.collection, index = state.generation, database = current,
                "vector index is ahead of the database; rebuilding it from SQLite");
            return self.rebuild_locked(state);
        }
        // One read transaction: the rows and the generation are one snapshot.
        let (generation, rows) = self.store.with_conn(|c| {
            let tx = c.unchecked_transaction()?;
            let generation: i64 = tx.query_row(
                "SELECT COALESCE((SELECT generation FROM vector_collections WHERE name = ?1), 0)",
                [&self.collection],
                |r| r.get(0),
            )?;
            let mut stmt = tx.prepare(
                "SELECT key, model, embedding FROM vectors
                 WHERE collection = ?1 AND generation > ?2 AND generation <= ?3",
            )?;
            let rows = stmt
                .query_map(
                    params![self.collection, state.generation, generation],
                    |r| {
                        Ok((
                            r.get::<_, i64>(0)? as u64,
                            r.get::<_, String>(1)?,
                            r.get::<_, Option<Vec<u8>>>(2)?,
                        ))
                    },
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(stmt);
            tx.commit()?;
            Ok((generation, rows))
        })?;
        let n = rows.len();
        for (key, model, embedding) in rows {
            match embedding {
                Some(blob) if model == self.model => {
                    self.upsert_locked(&state.index, key, &from_blob(&blob))?
                }
                _ => {
                    if state.index.contains(key) {
                        state
                            .index
                            .remove(key)
                            .map_err(|e| anyhow!("cannot remove vector {key}: {e}"))?;
                    }
                }
            }
        }
        state.generation = generation;
        state.dirty += n;
        Ok(n)
    }

    /// Build the index again from every stored embedding of this model.
    fn rebuild_locked(&self, state: &mut State) -> Result<usize> {
        let started = Instant::now();
        let (generation, rows) = self.store.with_conn(|c| {
            let tx = c.unchecked_transaction()?;
            let generation: i64 = tx.query_row(
                "SELECT COALESCE((SELECT generation FROM vector_collections WHERE name = ?1), 0)",
                [&self.collection],
                |r| r.get(0),
            )?;
            let mut stmt = tx.prepare(
                "SELECT key, embedding FROM vectors
                 WHERE collection = ?1 AND model = ?2 AND embedding IS NOT NULL",
            )?;
            let rows = stmt
                .query_map(params![self.collection, self.model], |r| {
                    Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Vec<u8>>(1)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(stmt);
            tx.commit()?;
            Ok((generation, rows))
        })?;
        let index = new_index(self.dims)?;
        // Keys are unique in SQLite, so the rows can be added from several
        // threads at once (usearch adds are thread-safe once the capacity
        // and thread slots are reserved).
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8);
        index
            .reserve_capacity_and_threads(rows.len().max(64), threads)
            .map_err(|e| anyhow!("cannot size the vector index: {e}"))?;
        let n = rows.len();
        let chunk = n.div_ceil(threads).max(1);
        let dims = self.dims;
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = rows
                .chunks(chunk)
                .map(|part| {
                    let index = &index;
                    scope.spawn(move || -> Result<()> {
                        for (key, blob) in part {
                            let v = from_blob(blob);
                            if v.len() != dims {
                                continue;
                            }
                            index
                                .add(*key, &v)
                                .map_err(|e| anyhow!("cannot add vector {key}: {e}"))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a rebuild thread panicked")))
                })
                .collect()
        });
        for r in results {
            r?;
        }
        state.index = index;
        state.generation = generation;
        state.dirty += n.max(1);
        tracing::info!(collection = %self.collection, vectors = n, ms = started.elapsed().as_millis() as u64, "vector index rebuilt from SQLite");
        Ok(n)
    }

    /// Rebuild from SQLite now and write the file.
    pub fn rebuild(&self) -> Result<usize> {
        let mut state = self.lock();
        let n = self.rebuild_locked(&mut state)?;
        self.save_locked(&mut state)?;
        Ok(n)
    }

    /// Catch up with SQLite (changes from this or another process).
    pub fn sync(&self) -> Result<usize> {
        let mut state = self.lock();
        self.sync_locked(&mut state)
    }

    /// Top-`k` items of `user_id` nearest to `query` (a unit vector),
    /// after catching up with SQLite.
    pub fn search(&self, user_id: &str, query: &[f32], k: usize) -> Result<Vec<VectorHit>> {
        if query.len() != self.dims {
            bail!(
                "the query vector has {} dimensions, the index {}",
                query.len(),
                self.dims
            );
        }
        let mut state = self.lock();
        self.sync_locked(&mut state)?;
        let ordinal = match state.ordinals.get(user_id) {
            Some(o) => *o,
            None => match self.store.with_conn(|c| user_ordinal(c, user_id))? {
                Some(o) => {
                    state.ordinals.insert(user_id.to_string(), o);
                    o
                }
                None => return Ok(Vec::new()),
            },
        };
        if state.index.size() == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let prefix = ordinal as u64;
        let matches = state
            .index
            .filtered_search(query, k, |key| key >> ITEM_BITS == prefix)
            .map_err(|e| anyhow!("vector search failed: {e}"))?;
        Ok(matches
            .keys
            .iter()
            .zip(matches.distances.iter())
            .filter(|(key, _)| *key >> ITEM_BITS == prefix)
            .map(|(key, d)| VectorHit {
                item_id: item_of(*key),
                score: 1.0 - d,
            })
            .collect())
    }

    /// Write the file if there are unsaved changes and it is due (every
    /// change for small indexes; batched for large ones). Errors are logged:
    /// the file is only a cache of SQLite.
    pub fn flush_if_due(&self) {
        let mut state = self.lock();
        let due = state.dirty > 0
            && (state.index.size() < SMALL_INDEX
                || state.dirty >= FLUSH_AFTER_CHANGES
                || state.last_flush.elapsed() >= FLUSH_EVERY);
        if due {
            if let Err(e) = self.save_locked(&mut state) {
                tracing::warn!(collection = %self.collection, error = %e, "could not write the vector index file; it will be rebuilt or caught up next start");
            }
        }
    }

    /// Write the file now if there are unsaved changes.
    pub fn flush(&self) -> Result<()> {
        let mut state = self.lock();
        if state.dirty > 0 {
            self.save_locked(&mut state)?;
        }
        Ok(())
    }

    /// Temp file + fsync + rename under an exclusive flock. A file already
    /// at or beyond our generation (written by another process) is kept.
    fn save_locked(&self, state: &mut State) -> Result<()> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .with_context(|| format!("cannot open the lock file {}", self.lock_path.display()))?;
        let _guard = FileLock::exclusive(&lock)?;
        self.remove_stale_temp_files();
        if let Some(on_disk) = self.file_generation() {
            if on_disk > state.generation {
                state.dirty = 0;
                state.last_flush = Instant::now();
                return Ok(());
            }
        }
        let mut payload = vec![0u8; state.index.serialized_length()];
        state
            .index
            .save_to_buffer(&mut payload)
            .map_err(|e| anyhow!("cannot serialise the vector index: {e}"))?;
        let header = Header {
            collection: self.collection.clone(),
            dims: self.dims,
            model: self.model.clone(),
            generation: state.generation,
            count: state.index.size(),
            payload_len: payload.len(),
            checksum: checksum(&payload),
        };
        let header = serde_json::to_vec(&header)?;
        let tmp = self.temp_path();
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&(header.len() as u32).to_le_bytes())?;
            f.write_all(&header)?;
            f.write_all(&payload)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(anyhow!("cannot write {}: {e}", self.path.display()));
        }
        state.dirty = 0;
        state.last_flush = Instant::now();
        Ok(())
    }

    /// Remove temp files a writer killed mid-write left behind.
    fn clean_up_after_crash(&self) {
        let Ok(lock) = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
        else {
            return;
        };
        let guard = FileLock::exclusive(&lock);
        if guard.is_ok() {
            self.remove_stale_temp_files();
        }
        drop(guard);
    }

    fn temp_path(&self) -> PathBuf {
        self.path
            .with_extension(format!("usearch.tmp.{}", std::process::id()))
    }

    /// Temp files left by a writer killed mid-write (we hold the lock, so
    /// no live writer owns one).
    fn remove_stale_temp_files(&self) {
        let Some(dir) = self.path.parent() else {
            return;
        };
        let prefix = format!("{}.usearch.tmp.", self.collection);
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }

    /// The generation recorded in the file on disk, if it has a readable header.
    fn file_generation(&self) -> Option<i64> {
        use std::io::Read;
        let mut f = File::open(&self.path).ok()?;
        let mut head = [0u8; 12];
        f.read_exact(&mut head).ok()?;
        if &head[..8] != MAGIC {
            return None;
        }
        let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
        if len > 1 << 20 {
            return None;
        }
        let mut header = vec![0u8; len];
        f.read_exact(&mut header).ok()?;
        let header: Header = serde_json::from_slice(&header).ok()?;
        (header.model == self.model && header.dims == self.dims).then_some(header.generation)
    }

    /// Compare the index with SQLite key by key (for `earshot memory check`
    /// and tests); catches up first.
    pub fn stats(&self) -> Result<IndexStats> {
        let mut state = self.lock();
        self.sync_locked(&mut state)?;
        let keys: Vec<u64> = self.store.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT key FROM vectors WHERE collection = ?1 AND model = ?2 AND embedding IS NOT NULL",
            )?;
            let rows = stmt.query_map(params![self.collection, self.model], |r| {
                r.get::<_, i64>(0).map(|k| k as u64)
            })?;
            rows.collect()
        })?;
        let missing = keys.iter().filter(|k| !state.index.contains(**k)).count();
        let extra = state.index.size().saturating_sub(keys.len() - missing);
        Ok(IndexStats {
            collection: self.collection.clone(),
            path: self.path.clone(),
            indexed: state.index.size(),
            stored: keys.len(),
            generation: state.generation,
            missing,
            extra,
        })
    }
}

impl Drop for VectorIndex {
    fn drop(&mut self) {
        let mut state = self.lock();
        if state.dirty > 0 {
            if let Err(e) = self.save_locked(&mut state) {
                tracing::warn!(collection = %self.collection, error = %e, "could not write the vector index file on exit");
            }
        }
    }
}

/// An exclusive `flock` held until dropped.
struct FileLock<'a> {
    file: &'a File,
}

impl<'a> FileLock<'a> {
    fn exclusive(file: &'a File) -> Result<Self> {
        loop {
            // SAFETY: flock on a valid, open descriptor owned by `file`.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(FileLock { file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(anyhow!("cannot lock the vector index: {err}"));
            }
        }
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor we locked; closing would also do it.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dims: usize) -> Vec<f32> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut v: Vec<f32> = (0..dims)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2000) as f32 / 1000.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter_mut().for_each(|a| *a /= n);
        v
    }

    fn put(store: &Store, user: &str, item: i64, v: &[f32]) {
        store
            .with_tx(|tx| {
                tx.execute("INSERT OR IGNORE INTO users (id) VALUES (?1)", [user])?;
                put_in(tx, "memories", user, item, "m", v)
            })
            .unwrap();
    }

    #[test]
    fn keys_are_stable_and_filter_by_user() {
        assert_eq!(item_of(vector_key(3, 42)), 42);
        assert_ne!(vector_key(1, 42), vector_key(2, 42));
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let idx = VectorIndex::open(&store, &dir.path().join("index"), "memories", 8, "m").unwrap();
        put(&store, "user-1", 1, &unit(1, 8));
        put(&store, "user-2", 2, &unit(1, 8));
        let hits = idx.search("user-1", &unit(1, 8), 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].item_id, 1);
        assert!((hits[0].score - 1.0).abs() < 1e-4);
        // Upsert replaces.
        put(&store, "user-1", 1, &unit(7, 8));
        let hits = idx.search("user-1", &unit(7, 8), 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert!((hits[0].score - 1.0).abs() < 1e-4);
        assert_eq!(idx.len(), 2);
        // Deletion through SQLite reaches the index.
        store.with_conn(|c| delete_in(c, "memories", 1)).unwrap();
        assert!(idx.search("user-1", &unit(7, 8), 5).unwrap().is_empty());
        assert!(idx.search("nobody", &unit(7, 8), 5).unwrap().is_empty());
    }

    #[test]
    fn reopen_catches_up_and_corrupt_files_are_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let index_dir = dir.path().join("index");
        let store = Store::open_in(dir.path()).unwrap();
        {
            let idx = VectorIndex::open(&store, &index_dir, "memories", 8, "m").unwrap();
            for i in 1..=20 {
                put(&store, "user-1", i, &unit(i as u64, 8));
            }
            idx.sync().unwrap();
            idx.flush().unwrap();
        }
        // Changes made while no index is open are caught up on open.
        put(&store, "user-1", 21, &unit(21, 8));
        let idx = VectorIndex::open(&store, &index_dir, "memories", 8, "m").unwrap();
        let s = idx.stats().unwrap();
        assert_eq!((s.indexed, s.stored, s.missing, s.extra), (21, 21, 0, 0));
        drop(idx);
        // Truncate the file: rebuilt, nothing lost.
        let path = index_dir.join("memories.usearch");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let idx = VectorIndex::open(&store, &index_dir, "memories", 8, "m").unwrap();
        assert_eq!(idx.stats().unwrap().indexed, 21);
        assert_eq!(idx.search("user-1", &unit(5, 8), 1).unwrap()[0].item_id, 5);
        drop(idx);
        // Garbage, and an empty file, too.
        std::fs::write(&path, b"garbage").unwrap();
        assert_eq!(
            VectorIndex::open(&store, &index_dir, "memories", 8, "m")
                .unwrap()
                .len(),
            21
        );
        std::fs::write(&path, b"").unwrap();
        assert_eq!(
            VectorIndex::open(&store, &index_dir, "memories", 8, "m")
                .unwrap()
                .len(),
            21
        );
        // Another model's file is not trusted.
        let other = VectorIndex::open(&store, &index_dir, "memories", 8, "other").unwrap();
        assert_eq!(other.len(), 0);
    }

    #[test]
    fn two_handles_see_each_others_writes() {
        let dir = tempfile::tempdir().unwrap();
        let index_dir = dir.path().join("index");
        let a_store = Store::open_in(dir.path()).unwrap();
        let b_store = Store::open_in(dir.path()).unwrap();
        let a = VectorIndex::open(&a_store, &index_dir, "memories", 8, "m").unwrap();
        let b = VectorIndex::open(&b_store, &index_dir, "memories", 8, "m").unwrap();
        put(&a_store, "user-1", 1, &unit(1, 8));
        a.flush_if_due();
        assert_eq!(b.search("user-1", &unit(1, 8), 3).unwrap()[0].item_id, 1);
        put(&b_store, "user-1", 2, &unit(2, 8));
        assert_eq!(a.search("user-1", &unit(2, 8), 1).unwrap()[0].item_id, 2);
    }
}
