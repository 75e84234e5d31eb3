//! The device's source of truth: one SQLite file (R-STORE).
//!
//! Versioned migrations (PRAGMA user_version), WAL so the service and a CLI
//! command can use the same file at once, a busy timeout instead of
//! "database is locked", foreign keys on. Derived data (vector indexes)
//! lives elsewhere and is rebuilt from here.
//!
//! A damaged database is never written to (issue 23): [`health`] checks
//! the file read-only before it is opened for writing, and a corruption
//! error met later marks the handle damaged so every further call is
//! refused with the same one line (the file and the fix).

mod conversations;
pub mod health;
mod jobs;
mod migrations;
pub mod tree_state;
mod turn_log;
pub mod vector;

pub use conversations::{Conversation, SaveTurn, StoredMessage, TurnEffects};
pub use jobs::{Job, JobKind};
pub use tree_state::TreeState;
pub use turn_log::{merge_answer, TURN_ROWS};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// Failures a caller may branch on; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the database {path} was written by a newer earshot (schema v{found}, this build knows v{known}); upgrade earshot — the file was left untouched")]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    /// Not a SQLite file at all (its header is wrong).
    #[error("the database {path} is not a readable SQLite file ({reason}); it was left untouched — {}", fix(path, backup.as_deref()))]
    Corrupt {
        path: PathBuf,
        reason: String,
        /// The newest backup, which the fix points to.
        backup: Option<PathBuf>,
    },
    /// A SQLite file with damaged pages (quick_check, or a "malformed"
    /// error met later), or one truncated to 0 bytes: refused, never
    /// written to.
    #[error("the database {path} is damaged ({reason}); it was left untouched — {}", fix(path, backup.as_deref()))]
    Damaged {
        path: PathBuf,
        reason: String,
        /// The newest backup, which the fix points to.
        backup: Option<PathBuf>,
    },
    #[error("cannot open the database {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    /// SQLite could not grow the file. Whatever was being written was
    /// rolled back; the caller says what that was (a turn, a memory, a
    /// document).
    #[error("the disk holding {} is full; free some space (old logs, apt caches: sudo apt-get clean) and try again — nothing was written", path.display())]
    DiskFull { path: PathBuf },
}

/// The one fix for a refused database: restore the newest backup, or move
/// the file aside (with its `-wal`/`-shm`, which belong to it) and start
/// fresh. One line.
fn fix(path: &Path, backup: Option<&Path>) -> String {
    let aside = "stop earshot and move it aside (with its -wal and -shm files, if any)";
    match backup {
        Some(b) => format!(
            "{aside}, then restore the newest backup with `cp {} {}`, or let earshot create a new one",
            b.display(),
            path.display()
        ),
        None => format!(
            "{aside} and earshot will create a new one (`sqlite3 FILE .recover` can salvage rows from the moved file)"
        ),
    }
}

/// A SQLite error met while opening `path`: damage (a non-database file, a
/// malformed page) becomes [`StoreError::Corrupt`]/[`StoreError::Damaged`]
/// with the fix; the rest stays as it is.
fn damage_of(path: &Path, e: rusqlite::Error) -> StoreError {
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    match code {
        Some(rusqlite::ErrorCode::NotADatabase) => StoreError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
            backup: health::newest_backup(path),
        },
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => StoreError::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
            backup: health::newest_backup(path),
        },
        Some(rusqlite::ErrorCode::DiskFull) => StoreError::DiskFull {
            path: path.to_path_buf(),
        },
        _ => StoreError::Sql(e),
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A handle to the database; cheap to clone, safe to share across threads.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    /// Set when SQLite reported damage: every later call is refused, so a
    /// damaged file is not written to and readers do not get partial data.
    damaged: Arc<AtomicBool>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating if missing) and migrate the database at `path`.
    ///
    /// An existing file is checked first, read-only ([`health`]): one that
    /// is not a database, is damaged, is newer than this build, or is
    /// empty while its indexes or backups say it held data is refused with
    /// one line naming it and the fix, and is left byte for byte as it was.
    /// A file that passed the check gets its daily backup.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: path.to_path_buf(),
                reason: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        let verdict = health::check_before_open(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let damage = |e: rusqlite::Error| damage_of(path, e);
        conn.busy_timeout(Duration::from_secs(5)).map_err(damage)?;
        // Reading the header again (the file may have changed since the
        // check): a non-database file fails here, before anything could
        // write to it.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(damage)?;
        let known = migrations::latest();
        if version > known {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                known,
            });
        }
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(damage)?;
        conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;")
            .map_err(damage)?;
        let mut conn = conn;
        migrations::migrate(&mut conn).map_err(damage)?;
        if verdict == health::Verdict::Checked {
            health::backup_if_due(&conn, path);
        }
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_path_buf(),
            damaged: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Open the database in a state dir (`<dir>/earshot.db`).
    pub fn open_in(state_dir: &Path) -> Result<Store> {
        Self::open(&state_dir.join("earshot.db"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version this database is at.
    pub fn schema_version(&self) -> Result<i64> {
        self.with_conn(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent
        // (transactions roll back on drop), so a poisoned lock is usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A SQLite error as a [`StoreError`] naming this file; damage also
    /// marks the handle so nothing more is read from or written to it.
    fn error_of(&self, e: rusqlite::Error) -> StoreError {
        if health::is_damage(&e) {
            self.damaged.store(true, Ordering::SeqCst);
        }
        damage_of(&self.path, e)
    }

    /// Refuse every call once the file is known to be damaged.
    fn refuse_if_damaged(&self) -> Result<()> {
        if self.damaged.load(Ordering::SeqCst) {
            return Err(StoreError::Damaged {
                path: self.path.clone(),
                reason: "SQLite reported it malformed earlier".into(),
                backup: health::newest_backup(&self.path),
            });
        }
        Ok(())
    }

    /// Run `f` with the connection.
    pub fn with_conn<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.refuse_if_damaged()?;
        let conn = self.lock();
        f(&conn).map_err(|e| self.error_of(e))
    }

    /// Run `f` inside one IMMEDIATE transaction: all of it lands or none.
    pub fn with_tx<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        self.refuse_if_damaged()?;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.error_of(e))?;
        let value = f(&tx).map_err(|e| self.error_of(e))?;
        tx.commit().map_err(|e| self.error_of(e))?;
        Ok(value)
    }

    /// `PRAGMA quick_check`: "ok" or the first problems found.
    pub fn integrity_check(&self) -> Result<String> {
        self.with_conn(|c| c.query_row("PRAGMA quick_check", [], |r| r.get(0)))
    }

    /// A device-wide setting (do-not-disturb, last answer, volume…).
    pub fn device_state(&self, key: &str) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        self.with_conn(|c| {
            c.query_row(
                "SELECT value FROM device_state WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// What "repeat that" says: the last answer, read from the one place
    /// it is stored. A turn's answer lives in `messages` and the
    /// `last_answer_message` setting names it; a `last_answer` text
    /// (written by a tree's `set_state`, or by a build before v11) is newer
    /// when present, because every save that points at a message clears it.
    pub fn last_answer(&self) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        if let Some(text) = self.device_state(LAST_ANSWER)? {
            return Ok(Some(text));
        }
        self.with_conn(|c| {
            c.query_row(
                "SELECT m.content FROM device_state d JOIN messages m ON m.id = CAST(d.value AS INTEGER)
                 WHERE d.key = ?1",
                [LAST_ANSWER_MESSAGE],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// The text of one stored message.
    pub fn message_text(&self, id: i64) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        self.with_conn(|c| {
            c.query_row("SELECT content FROM messages WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
        })
    }

    /// Set one device setting now. A turn's changes go through its save
    /// instead ([`TurnEffects::device_state`]).
    pub fn set_device_state(&self, key: &str, value: &str) -> Result<()> {
        self.with_conn(|c| put_device_state(c, key, Some(value)))
    }
}

/// The device setting holding the last answer as text (a tree's
/// `set_state device.last_answer`, or rows from before v11).
pub const LAST_ANSWER: &str = "last_answer";
/// The device setting naming the message that holds the last answer.
pub const LAST_ANSWER_MESSAGE: &str = "last_answer_message";

/// Write (`Some`) or remove (`None`) one device setting on `c`.
pub(crate) fn put_device_state(
    c: &Connection,
    key: &str,
    value: Option<&str>,
) -> rusqlite::Result<()> {
    match value {
        Some(value) => c.execute(
            "INSERT INTO device_state (key, value, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            rusqlite::params![key, value, now()],
        ),
        None => c.execute("DELETE FROM device_state WHERE key = ?1", [key]),
    }
    .map(|_| ())
}

/// Timestamps in the database: RFC 3339 UTC with milliseconds.
pub fn now() -> String {
    crate::events::timestamp_now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_migrates_and_seeds_user_1() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        assert_eq!(store.schema_version().unwrap(), migrations::latest());
        let user: String = store
            .with_conn(|c| c.query_row("SELECT id FROM users", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(user, "user-1");
        let mode: String = store
            .with_conn(|c| c.query_row("PRAGMA journal_mode", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store
            .with_conn(|c| c.query_row("PRAGMA foreign_keys", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(fk, 1);
        drop(store);
        // Re-opening is a no-op migration.
        let again = Store::open_in(dir.path()).unwrap();
        assert_eq!(again.schema_version().unwrap(), migrations::latest());
    }

    #[test]
    fn newer_schema_is_refused_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("earshot.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch("CREATE TABLE x(y); PRAGMA user_version = 999;")
                .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::NewerSchema { found: 999, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade earshot"));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn corrupt_file_is_refused_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("earshot.db");
        let junk = b"this is not a database at all, just some text padding it out".repeat(100);
        std::fs::write(&path, &junk).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
        assert_eq!(std::fs::read(&path).unwrap(), junk);
    }

    #[test]
    fn device_state_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        assert_eq!(store.device_state("dnd").unwrap(), None);
        store.set_device_state("dnd", "on").unwrap();
        store.set_device_state("dnd", "off").unwrap();
        assert_eq!(store.device_state("dnd").unwrap().as_deref(), Some("off"));
    }
}
