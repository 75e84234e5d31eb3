//! Versioned schema migrations. Each entry runs once, in order, in its own
//! transaction, and bumps `PRAGMA user_version`. Never edit a shipped
//! entry: add a new one.
//!
//! Numbers are reserved per concern so parallel work does not collide:
//! 2 intent tree, 3 tools, 4 memory, 5 voice, 6 api/device, 7 knowledge
//! and review. A gap is fine: versions only need to increase.

use rusqlite::Connection;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/001_core.sql")),
    (4, include_str!("migrations/004_memory_vectors.sql")),
    (7, include_str!("migrations/007_knowledge_review.sql")),
];

/// The schema version this build creates.
pub fn latest() -> i64 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// Apply every migration newer than the database's `user_version`.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    for (version, sql) in MIGRATIONS {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Re-read inside the write lock: another process may have migrated.
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current >= *version {
            continue;
        }
        tx.execute_batch(sql)?;
        tx.execute_batch(&format!("PRAGMA user_version = {version}"))?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_strictly_increase() {
        // `migrate` skips entries at or below user_version, so an entry
        // appended out of order would silently never run.
        for pair in MIGRATIONS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} before {}", pair[0].0, pair[1].0);
        }
    }
}
