//! Is the database file fit to open? (issue 23, point 7)
//!
//! Before [`super::Store::open`] opens the file for writing, a separate
//! read-only connection reads its header and runs `PRAGMA quick_check`
//! under a time budget. A read-only connection never checkpoints or writes
//! the file, so a damaged database is refused byte for byte untouched. A
//! 0-byte file next to derived data (the `index/` directory, backups, a
//! non-empty `-wal`) is a truncated database, not a new one, and is refused
//! the same way. A passing check is remembered for the rest of the process
//! (keyed by the file's size and modification time), so a service or a
//! test that opens the same file again does not pay for it twice.
//!
//! After a full passing check the database is backed up at most once a
//! day (`VACUUM INTO`, a consistent online copy) into `backups/` beside
//! it; the newest few are kept, and the refusal message names the newest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OpenFlags};

use super::StoreError;

/// Longest `quick_check` at open. Measured 250 MB/s on the dev box
/// (notes/hardening-db.md), so this covers a database far beyond what a
/// device accumulates; a larger one is opened unchecked with a warning
/// (runtime corruption errors still refuse it, see `Store::error_of`).
pub const CHECK_BUDGET: Duration = Duration::from_secs(2);
/// Longest daily backup before it is abandoned (the open goes on).
pub const BACKUP_BUDGET: Duration = Duration::from_secs(10);
/// A new backup is taken when the newest one is older than this.
pub const BACKUP_EVERY: Duration = Duration::from_secs(24 * 3600);
/// How many backups are kept.
pub const BACKUPS_KEPT: usize = 3;
/// Most quick_check problems quoted in the refusal (it stays one line).
const PROBLEMS_QUOTED: usize = 3;

/// What the pre-open check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No file (or an empty one with nothing around it): a new database.
    New,
    /// The file passed quick_check (now, or earlier in this process).
    Checked,
    /// The file is readable but quick_check ran out of time.
    Unchecked,
}

/// A file's size and modification time: a passing check holds while they
/// stay the same.
type Stamp = (u64, Option<SystemTime>);

/// Files that passed a check in this process, with their stamp then.
fn passed() -> &'static Mutex<HashMap<PathBuf, Stamp>> {
    static PASSED: OnceLock<Mutex<HashMap<PathBuf, Stamp>>> = OnceLock::new();
    PASSED.get_or_init(|| Mutex::new(HashMap::new()))
}

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    (meta.len(), meta.modified().ok())
}

/// The directory the database's backups go to.
pub fn backup_dir(db: &Path) -> PathBuf {
    db.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("backups")
}

/// `earshot` for `earshot.db`: backups are `<stem>-YYYY-MM-DD.db`.
fn stem(db: &Path) -> String {
    db.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "earshot".into())
}

/// This database's backups, oldest first (the date in the name sorts).
fn backups(db: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}-", stem(db));
    let Ok(entries) = std::fs::read_dir(backup_dir(db)) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".db"))
        })
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() > 0))
        .collect();
    found.sort();
    found
}

/// The newest backup of `db`, the one a refusal points to.
pub fn newest_backup(db: &Path) -> Option<PathBuf> {
    backups(db).pop()
}

/// Why a 0-byte `db` is a truncated database rather than a new one, if it
/// is: something derived from it is still beside it.
fn left_behind(db: &Path) -> Option<String> {
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let index = dir.join("index");
    if std::fs::read_dir(&index).is_ok_and(|mut e| e.next().is_some()) {
        return Some(format!(
            "{} still holds its vector indexes",
            index.display()
        ));
    }
    if let Some(b) = newest_backup(db) {
        return Some(format!("a backup of it exists ({})", b.display()));
    }
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        return Some(format!("{} holds pages written to it", wal.display()));
    }
    None
}

/// Check `db` before it is opened for writing; see the module doc.
pub(crate) fn check_before_open(db: &Path) -> Result<Verdict, StoreError> {
    let meta = match std::fs::metadata(db) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Verdict::New),
        Err(e) => {
            return Err(StoreError::Open {
                path: db.to_path_buf(),
                reason: e.to_string(),
            })
        }
    };
    if !meta.is_file() {
        return Err(StoreError::Open {
            path: db.to_path_buf(),
            reason: "it is not a regular file".into(),
        });
    }
    if meta.len() == 0 {
        return match left_behind(db) {
            Some(why) => Err(StoreError::Damaged {
                path: db.to_path_buf(),
                reason: format!("it is empty (0 bytes) although {why}, so it was truncated"),
                backup: newest_backup(db),
            }),
            None => Ok(Verdict::New),
        };
    }
    let key = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    if passed()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .is_some_and(|s| *s == stamp(&meta))
    {
        return Ok(Verdict::Checked);
    }
    let verdict = quick_check(db)?;
    if verdict == Verdict::Checked {
        // The stamp after the check: a read-only connection may have
        // created the -shm file but never touches the database itself.
        if let Ok(meta) = std::fs::metadata(db) {
            passed()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, stamp(&meta));
        }
    }
    Ok(verdict)
}

/// Whether a SQLite error says the file is damaged.
pub(crate) fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase)
}

/// Run `f` on `conn`, interrupting it once `budget` has passed. Returns
/// `None` when it was interrupted.
fn within<T>(
    conn: &Connection,
    budget: Duration,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> Option<rusqlite::Result<T>> {
    let handle = conn.get_interrupt_handle();
    let (done, wait) = crossbeam_channel::bounded::<()>(1);
    let watchdog = std::thread::Builder::new()
        .name("db-check-budget".into())
        .spawn(move || {
            if wait.recv_timeout(budget).is_err() {
                // Timed out (or the sender vanished): stop the statement.
                handle.interrupt();
            }
        });
    let result = f(conn);
    let _ = done.send(());
    if let Ok(w) = watchdog {
        let _ = w.join();
    }
    match result {
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::OperationInterrupted =>
        {
            None
        }
        other => Some(other),
    }
}

/// How often a check that failed for a reason other than damage is tried
/// again, and how long apart: another process creating or migrating the
/// same file (several CLI commands started at once on a new state dir)
/// makes FTS5's constructor fail for a moment ("vtable constructor
/// failed"), which says nothing about the file.
const TRANSIENT_TRIES: u32 = 10;
const TRANSIENT_PAUSE: Duration = Duration::from_millis(100);

/// [`quick_check_once`], tried again while it fails for a reason that is
/// not damage; if that never clears, the file is opened unchecked with a
/// warning (the writable open reports a real problem itself).
fn quick_check(db: &Path) -> Result<Verdict, StoreError> {
    let mut last = None;
    for attempt in 0..TRANSIENT_TRIES {
        if attempt > 0 {
            std::thread::sleep(TRANSIENT_PAUSE);
        }
        match quick_check_once(db) {
            Err(StoreError::Open { reason, .. }) => last = Some(reason),
            other => return other,
        }
    }
    tracing::warn!(
        "could not check {} before opening it ({}); opening it unchecked",
        db.display(),
        last.unwrap_or_default()
    );
    Ok(Verdict::Unchecked)
}

/// The header, the schema version and `PRAGMA quick_check`, read-only.
fn quick_check_once(db: &Path) -> Result<Verdict, StoreError> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::Open {
        path: db.to_path_buf(),
        reason: e.to_string(),
    })?;
    let unreadable = |e: rusqlite::Error| {
        if is_not_a_database(&e) {
            StoreError::Corrupt {
                path: db.to_path_buf(),
                reason: e.to_string(),
                backup: newest_backup(db),
            }
        } else if is_damage(&e) {
            StoreError::Damaged {
                path: db.to_path_buf(),
                reason: e.to_string(),
                backup: newest_backup(db),
            }
        } else {
            StoreError::Open {
                path: db.to_path_buf(),
                reason: e.to_string(),
            }
        }
    };
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(unreadable)?;
    // The header first: a file that is not a database fails here.
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(unreadable)?;
    let known = super::migrations::latest();
    if version > known {
        return Err(StoreError::NewerSchema {
            path: db.to_path_buf(),
            found: version,
            known,
        });
    }
    let rows = within(&conn, CHECK_BUDGET, |c| {
        let mut stmt = c.prepare(&format!("PRAGMA quick_check({PROBLEMS_QUOTED})"))?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
    });
    match rows {
        None => {
            tracing::warn!(
                "quick_check of {} did not finish within {} s; opening it unchecked",
                db.display(),
                CHECK_BUDGET.as_secs()
            );
            Ok(Verdict::Unchecked)
        }
        Some(Ok(rows)) if rows.len() == 1 && rows[0] == "ok" => Ok(Verdict::Checked),
        Some(Ok(rows)) => Err(StoreError::Damaged {
            path: db.to_path_buf(),
            reason: format!("quick_check: {}", one_line(&rows.join("; "), 300)),
            backup: newest_backup(db),
        }),
        Some(Err(e)) if is_damage(&e) => Err(StoreError::Damaged {
            path: db.to_path_buf(),
            reason: format!("quick_check: {e}"),
            backup: newest_backup(db),
        }),
        Some(Err(e)) => Err(unreadable(e)),
    }
}

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.replace(['\n', '\r'], " ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Take today's backup of the (just checked) database on `conn` if the
/// newest one is older than [`BACKUP_EVERY`], then prune to
/// [`BACKUPS_KEPT`]. Failures are logged, never returned: a backup must
/// not stop the device.
pub(crate) fn backup_if_due(conn: &Connection, db: &Path) {
    if let Err(e) = try_backup(conn, db) {
        tracing::warn!("daily backup of {} skipped: {e}", db.display());
    }
}

fn try_backup(conn: &Connection, db: &Path) -> Result<(), String> {
    let existing = backups(db);
    if let Some(newest) = existing.last() {
        let age = std::fs::metadata(newest)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        if age.is_some_and(|a| a < BACKUP_EVERY) {
            return Ok(());
        }
    }
    let dir = backup_dir(db);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let day: String = super::now().chars().take(10).collect();
    let target = dir.join(format!("{}-{day}.db", stem(db)));
    // Per process: two commands starting at once must not share it.
    let tmp = dir.join(format!(".{}-{day}.{}.db.tmp", stem(db), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let tmp_str = tmp
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", tmp.display()))?;
    match within(conn, BACKUP_BUDGET, |c| {
        c.execute("VACUUM INTO ?1", [tmp_str]).map(|_| ())
    }) {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.to_string());
        }
        None => {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!(
                "it did not finish within {} s",
                BACKUP_BUDGET.as_secs()
            ));
        }
    }
    let synced = std::fs::File::open(&tmp).and_then(|f| f.sync_all());
    if let Err(e) = synced.and_then(|_| std::fs::rename(&tmp, &target)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", target.display()));
    }
    let all = backups(db);
    let surplus = all.len().saturating_sub(BACKUPS_KEPT);
    for old in &all[..surplus] {
        let _ = std::fs::remove_file(old);
    }
    tracing::info!("backed up {} to {}", db.display(), target.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Store, StoreError};
    use std::path::Path;

    /// A database holding `rows` device settings of 1 KB each, closed (so
    /// its WAL is checkpointed into the file).
    fn filled(dir: &Path, rows: usize) -> std::path::PathBuf {
        let store = Store::open_in(dir).unwrap();
        let value = "v".repeat(1000);
        for i in 0..rows {
            store
                .set_device_state(&format!("key{i:04}"), &value)
                .unwrap();
        }
        let path = store.path().to_path_buf();
        drop(store);
        path
    }

    /// Overwrite one leaf page of `table` (its root's first child) with
    /// junk: the "one corrupt page" of issue 23.
    fn corrupt_a_leaf(path: &Path, table: &str) {
        let (page_size, root): (usize, usize) = {
            let c = rusqlite::Connection::open(path).unwrap();
            let ps: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
            let root: i64 = c
                .query_row(
                    "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                    [table],
                    |r| r.get(0),
                )
                .unwrap();
            (ps as usize, root as usize)
        };
        let mut bytes = std::fs::read(path).unwrap();
        let page = |n: usize| (n - 1) * page_size;
        let at = page(root);
        assert_eq!(bytes[at], 0x05, "{table}'s root is not an interior page");
        let cell = u16::from_be_bytes([bytes[at + 12], bytes[at + 13]]) as usize;
        let child = u32::from_be_bytes([
            bytes[at + cell],
            bytes[at + cell + 1],
            bytes[at + cell + 2],
            bytes[at + cell + 3],
        ]) as usize;
        bytes[page(child)..page(child) + page_size].fill(0x55);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_damaged_page_is_refused_and_the_file_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path(), 40);
        corrupt_a_leaf(&path, "device_state");
        let before = std::fs::read(&path).unwrap();
        for _ in 0..2 {
            let err = Store::open(&path).unwrap_err();
            assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
            let line = err.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.contains(&path.display().to_string())
                    && line.contains("quick_check")
                    && line.contains("move it aside"),
                "{line}"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn damage_met_after_open_refuses_every_later_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path(), 40);
        // The first open takes the day's backup, reading every page into
        // that connection's cache; the second reads only what it needs.
        drop(Store::open(&path).unwrap());
        let store = Store::open(&path).unwrap();
        // Damaged under an open handle (the check at open passed).
        corrupt_a_leaf(&path, "device_state");
        let before = std::fs::read(&path).unwrap();
        let err = store.device_state("key0001").unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
        // A write, even to a healthy page, is refused, and so is a read.
        let err = store.set_device_state("dnd", "on").unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
        assert!(err.to_string().contains(&path.display().to_string()));
        assert!(store.schema_version().is_err());
        drop(store);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn an_empty_file_beside_indexes_or_backups_is_refused() {
        // Nothing around it: a new database.
        let fresh = tempfile::tempdir().unwrap();
        std::fs::write(fresh.path().join("earshot.db"), b"").unwrap();
        Store::open_in(fresh.path()).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("earshot.db");
        std::fs::write(&path, b"").unwrap();
        std::fs::create_dir_all(dir.path().join("index")).unwrap();
        std::fs::write(dir.path().join("index/memories.usearch"), b"x").unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
        let line = err.to_string();
        assert!(
            line.contains("0 bytes") && line.contains("index") && line.contains("move it aside"),
            "{line}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);

        // A backup beside it is named in the fix.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("earshot.db");
        std::fs::create_dir_all(dir.path().join("backups")).unwrap();
        let backup = dir.path().join("backups/earshot-2026-01-01.db");
        std::fs::write(&backup, b"SQLite format 3\0").unwrap();
        std::fs::write(&path, b"").unwrap();
        let line = Store::open(&path).unwrap_err().to_string();
        assert!(
            line.contains(&format!("cp {} {}", backup.display(), path.display())),
            "{line}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn a_checked_database_is_backed_up_once_a_day_and_the_backup_restores() {
        let dir = tempfile::tempdir().unwrap();
        // A new database is not backed up (nothing to keep yet).
        let path = filled(dir.path(), 3);
        assert!(super::newest_backup(&path).is_none());
        // Opening it again checks it, then backs it up; a third open the
        // same day does not take another.
        drop(Store::open(&path).unwrap());
        let backup = super::newest_backup(&path).expect("a backup");
        drop(Store::open(&path).unwrap());
        assert_eq!(super::backups(&path), vec![backup.clone()]);
        let name = backup.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("earshot-20") && name.ends_with(".db"),
            "{name}"
        );
        // The backup is a whole database holding the rows.
        let copy = rusqlite::Connection::open_with_flags(
            &backup,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let value: String = copy
            .query_row(
                "SELECT value FROM device_state WHERE key = 'key0002'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(value.len(), 1000);
        let ok: String = copy
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        drop(copy);
        // Once the database is damaged, the refusal points to it.
        corrupt_the_last_page(&path);
        let line = Store::open(&path).unwrap_err().to_string();
        assert!(line.contains(&format!("cp {}", backup.display())), "{line}");
    }

    /// Damage a small database (too few rows for an interior page): the
    /// last page, some table's or index's root, becomes junk.
    fn corrupt_the_last_page(path: &Path) {
        let mut bytes = std::fs::read(path).unwrap();
        let page_size = 4096;
        let pages = bytes.len() / page_size;
        assert!(pages >= 2);
        let last = (pages - 1) * page_size;
        bytes[last..last + page_size].fill(0x55);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_full_disk_names_the_file_and_no_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        // SQLite reports SQLITE_FULL at max_page_count exactly as on a
        // full disk.
        store
            .with_conn(|c| {
                let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                c.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
            })
            .unwrap();
        let err = store
            .set_device_state("big", &"x".repeat(100_000))
            .unwrap_err();
        assert!(matches!(err, StoreError::DiskFull { .. }), "{err}");
        let line = err.to_string();
        assert!(
            line.contains("disk holding") && line.contains("free some space"),
            "{line}"
        );
        assert!(!line.contains("turn"), "{line}");
        // Nothing was written, and the handle still works.
        assert_eq!(store.device_state("big").unwrap(), None);
    }
}
