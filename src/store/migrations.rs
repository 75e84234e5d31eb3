//! Versioned schema migrations. Each entry runs once, in order, in its own
//! transaction, and bumps `PRAGMA user_version`. Never edit a shipped
//! entry: add a new one.
//!
//! Numbers are reserved per concern so parallel work does not collide:
//! 2 intent tree, 3 tools, 4 memory, 5 voice, 6 api/device, 7 knowledge
//! and review, 8 a turn's side effects, 9 timers, 10 calendar, 11 the
//! answer stored once, 14 knowledge pages, 15 apps (Composio sessions and links). A gap is fine: versions only need to increase, but
//! a number below one already shipped never runs on an existing database.

use rusqlite::Connection;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/001_core.sql")),
    (4, include_str!("migrations/004_memory_vectors.sql")),
    (7, include_str!("migrations/007_knowledge_review.sql")),
    (8, include_str!("migrations/008_turn_effects.sql")),
    (9, include_str!("migrations/009_timers.sql")),
    (10, include_str!("migrations/010_calendar.sql")),
    (11, include_str!("migrations/011_answer_once.sql")),
    (12, include_str!("migrations/012_memory_history.sql")),
    (14, include_str!("migrations/014_knowledge_pages.sql")),
    (15, include_str!("migrations/015_apps.sql")),
    (16, include_str!("migrations/016_knowledge_paragraphs.sql")),
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

    /// What a turn-log row and the retrievals table hold for `turn`.
    fn retrievals_of(c: &Connection, turn: i64) -> (String, Vec<String>) {
        let json: String = c
            .query_row(
                "SELECT retrieval_json FROM turn_log WHERE id = ?1",
                [turn],
                |r| r.get(0),
            )
            .unwrap();
        let mut stmt = c
            .prepare("SELECT payload FROM knowledge_retrievals WHERE turn_id = ?1 ORDER BY id")
            .unwrap();
        let rows = stmt.query_map([turn], |r| r.get(0)).unwrap();
        (json, rows.collect::<rusqlite::Result<_>>().unwrap())
    }

    #[test]
    fn a_v7_database_keeps_its_rows_and_stops_claiming_retrievals_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("earshot.db");
        let log = |c: &Connection, started: &str| {
            c.execute(
                "INSERT INTO turn_log (user_id, started_at, source, input, outcome)
                 VALUES ('user-1', ?1, 'api', 'q', 'ok')",
                [started],
            )
            .unwrap();
            c.last_insert_rowid()
        };
        let old_turn = {
            let mut c = Connection::open(&path).unwrap();
            for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 <= 7) {
                let tx = c.transaction().unwrap();
                tx.execute_batch(sql).unwrap();
                tx.execute_batch(&format!("PRAGMA user_version = {version}"))
                    .unwrap();
                tx.commit().unwrap();
            }
            c.execute(
                "INSERT INTO knowledge_retrievals (created_at, payload)
                 VALUES ('2026-01-01T10:00:01.000Z', '{\"query\":\"old\"}')",
                [],
            )
            .unwrap();
            // v7's trigger claims by time.
            let turn = log(&c, "2026-01-01T10:00:00.000Z");
            assert_eq!(
                retrievals_of(&c, turn),
                (
                    r#"[{"query":"old"}]"#.to_string(),
                    vec![r#"{"query":"old"}"#.to_string()]
                )
            );
            // Written by a turn that never got logged.
            c.execute(
                "INSERT INTO knowledge_retrievals (created_at, payload)
                 VALUES ('2026-01-01T11:00:00.000Z', '{\"query\":\"stray\"}')",
                [],
            )
            .unwrap();
            turn
        };

        let store = crate::store::Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), latest());
        store
            .with_conn(|c| {
                assert_eq!(
                    retrievals_of(c, old_turn),
                    (
                        r#"[{"query":"old"}]"#.to_string(),
                        vec![r#"{"query":"old"}"#.to_string()]
                    ),
                    "old rows are kept"
                );
                // A turn that started before the stray row does not take it.
                let turn = log(c, "2026-01-01T10:30:00.000Z");
                assert_eq!(retrievals_of(c, turn), ("[]".to_string(), vec![]));
                let unclaimed: i64 = c.query_row(
                    "SELECT COUNT(*) FROM knowledge_retrievals WHERE turn_id IS NULL",
                    [],
                    |r| r.get(0),
                )?;
                assert_eq!(unclaimed, 1);
                Ok(())
            })
            .unwrap();
    }
}
