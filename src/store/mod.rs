//! The device's source of truth: one SQLite file (R-STORE).
//!
//! Versioned migrations (PRAGMA user_version), WAL so the service and a CLI
//! command can use the same file at once, a busy timeout instead of
//! "database is locked", foreign keys on. Derived data (vector indexes)
//! lives elsewhere and is rebuilt from here.

mod conversations;
mod jobs;
mod migrations;
pub mod tree_state;
mod turn_log;
pub mod vector;

pub use conversations::{Conversation, SaveTurn, StoredMessage, TurnEffects};
pub use jobs::{Job, JobKind};
pub use tree_state::TreeState;

use std::path::{Path, PathBuf};
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
    #[error("the database {path} is not a readable SQLite file ({reason}); move it aside and earshot will create a new one — it was left untouched")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot open the database {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("the disk is full; free some space (the last turn was not saved)")]
    DiskFull,
}

impl StoreError {
    fn from_sql(e: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(f, _) = &e {
            if f.code == rusqlite::ErrorCode::DiskFull {
                return StoreError::DiskFull;
            }
        }
        StoreError::Sql(e)
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A handle to the database; cheap to clone, safe to share across threads.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating if missing) and migrate the database at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: path.to_path_buf(),
                reason: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
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
        let corrupt = |e: rusqlite::Error| StoreError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        conn.busy_timeout(Duration::from_secs(5)).map_err(corrupt)?;
        // Reading the header first: a non-database file fails here, before
        // anything could write to it.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(corrupt)?;
        let known = migrations::latest();
        if version > known {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                known,
            });
        }
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .map_err(corrupt)?;
        conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;")
            .map_err(corrupt)?;
        let mut conn = conn;
        migrations::migrate(&mut conn).map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
                ) =>
            {
                StoreError::Corrupt {
                    path: path.to_path_buf(),
                    reason: "malformed database".into(),
                }
            }
            other => StoreError::from_sql(other),
        })?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_path_buf(),
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

    /// Run `f` with the connection.
    pub fn with_conn<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        let conn = self.lock();
        f(&conn).map_err(StoreError::from_sql)
    }

    /// Run `f` inside one IMMEDIATE transaction: all of it lands or none.
    pub fn with_tx<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(StoreError::from_sql)?;
        let value = f(&tx).map_err(StoreError::from_sql)?;
        tx.commit().map_err(StoreError::from_sql)?;
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

    /// Set one device setting now. A turn's changes go through its save
    /// instead ([`TurnEffects::device_state`]).
    pub fn set_device_state(&self, key: &str, value: &str) -> Result<()> {
        self.with_conn(|c| put_device_state(c, key, Some(value)))
    }
}

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
