//! The turn-log table: one row per turn, kept apart from conversations.
//! A row is written with what its turn recorded: tool calls and their
//! latencies (`tools_json`) and its knowledge retrievals (`retrieval_json`,
//! and one `knowledge_retrievals` row each, carrying the turn id).

use rusqlite::{params, Connection, OptionalExtension};

use super::{Result, Store};
use crate::telemetry::TurnRecord;

pub(super) fn insert(
    c: &Connection,
    conversation_id: Option<i64>,
    user_id: &str,
    r: &TurnRecord,
    answer_message_id: Option<i64>,
) -> rusqlite::Result<i64> {
    let json = |v: &dyn erased::Json| v.to_json();
    // A saved answer is in `messages` (named by answer_message_id); the
    // row keeps its own text only when there is no message.
    let response = match answer_message_id {
        Some(_) => None,
        None => r.response.as_deref(),
    };
    c.execute(
        "INSERT INTO turn_log (conversation_id, user_id, started_at, source, input, response, mode,
            route, route_by, confidence, intent, intent_confidence, node, model, outcome, error,
            notes, timings_json, tools_json, extra_json, retrieval_json, answer_message_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
        params![
            conversation_id,
            user_id,
            r.started_at,
            r.source,
            r.input,
            response,
            r.mode,
            r.route,
            r.route_by,
            r.confidence,
            r.intent,
            r.intent_confidence,
            r.node,
            r.model,
            r.outcome,
            r.error,
            if r.notes.is_empty() { None } else { Some(r.notes.join("; ")) },
            json(&r.timings),
            json(&r.tools),
            json(&r.extra),
            json(&r.retrievals),
            answer_message_id,
        ],
    )?;
    let turn_id = c.last_insert_rowid();
    // The turn's own retrievals, with its id, in the caller's transaction.
    let ts = super::now();
    for payload in &r.retrievals {
        c.execute(
            "INSERT INTO knowledge_retrievals (turn_id, created_at, payload) VALUES (?1, ?2, ?3)",
            params![turn_id, ts, payload.to_string()],
        )?;
    }
    Ok(turn_id)
}

mod erased {
    pub trait Json {
        fn to_json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> String {
            serde_json::to_string(self).unwrap_or_else(|_| "null".into())
        }
    }
}

/// Every turn-log column plus `stored_answer`, the text of the message the
/// row names; [`merge_answer`] folds it into `response`. Readers select
/// through this so a turn's answer, stored once in `messages`, reads as
/// it did when the row kept its own copy. Append `WHERE`/`ORDER BY` on `t`.
pub const TURN_ROWS: &str = "SELECT t.*, m.content AS stored_answer FROM turn_log t
     LEFT JOIN messages m ON m.id = t.answer_message_id";

/// Move `stored_answer` into `response` when the row has no text of its
/// own (a saved turn since v11), and drop it either way.
pub fn merge_answer(row: &mut serde_json::Map<String, serde_json::Value>) {
    let stored = row.remove("stored_answer");
    if row.get("response").is_none_or(serde_json::Value::is_null) {
        if let Some(answer) = stored.filter(|a| !a.is_null()) {
            row.insert("response".into(), answer);
        }
    }
}

impl Store {
    /// One turn-log row as JSON (all columns), for `earshot log` and tests.
    pub fn turn_log_row(&self, turn_id: i64) -> Result<Option<serde_json::Value>> {
        self.with_conn(|c| {
            let mut stmt = c.prepare(&format!("{TURN_ROWS} WHERE t.id = ?1"))?;
            let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
            stmt.query_row([turn_id], |row| {
                let mut map = serde_json::Map::new();
                for (i, name) in names.iter().enumerate() {
                    let v: rusqlite::types::Value = row.get(i)?;
                    let v = match v {
                        rusqlite::types::Value::Null => serde_json::Value::Null,
                        rusqlite::types::Value::Integer(n) => n.into(),
                        rusqlite::types::Value::Real(f) => f.into(),
                        rusqlite::types::Value::Text(t) => {
                            if name.ends_with("_json") {
                                serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t))
                            } else {
                                t.into()
                            }
                        }
                        rusqlite::types::Value::Blob(_) => serde_json::Value::Null,
                    };
                    map.insert(name.clone(), v);
                }
                merge_answer(&mut map);
                Ok(serde_json::Value::Object(map))
            })
            .optional()
        })
    }

    /// Ids of the most recent turns, newest first.
    pub fn recent_turn_ids(&self, limit: usize) -> Result<Vec<i64>> {
        self.with_conn(|c| {
            let mut stmt = c.prepare("SELECT id FROM turn_log ORDER BY id DESC LIMIT ?1")?;
            let rows = stmt.query_map([limit as i64], |r| r.get(0))?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_turn_row_carries_its_own_retrievals_and_tool_timings() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let mut searched = TurnRecord::new("api", "q");
        searched.retrievals = vec![json!({"query": "a"}), json!({"query": "b"})];
        searched.tools.push(crate::telemetry::ToolCallRecord {
            name: "search_knowledge".into(),
            ms: 12.5,
            ok: true,
        });
        // A failed turn's row keeps what it retrieved, too.
        searched.outcome = "error".into();
        let first = store.log_turn_only(None, "user-1", &searched).unwrap();
        let second = store
            .log_turn_only(None, "user-1", &TurnRecord::new("api", "q2"))
            .unwrap();
        let row = store.turn_log_row(first).unwrap().unwrap();
        assert_eq!(
            row["retrieval_json"],
            json!([{"query": "a"}, {"query": "b"}])
        );
        assert_eq!(row["tools_json"][0]["ms"], 12.5);
        let row = store.turn_log_row(second).unwrap().unwrap();
        assert_eq!(row["retrieval_json"], json!([]));
        let rows: Vec<(Option<i64>, String)> = store
            .with_conn(|c| {
                let mut stmt =
                    c.prepare("SELECT turn_id, payload FROM knowledge_retrievals ORDER BY id")?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.collect()
            })
            .unwrap();
        assert_eq!(
            rows,
            [
                (Some(first), json!({"query": "a"}).to_string()),
                (Some(first), json!({"query": "b"}).to_string()),
            ]
        );
    }
}
