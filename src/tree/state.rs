//! The tree's per-conversation state (R-TREE): the phase (`idle`,
//! `confirm_delete`, …) and a JSON object, in the `tree_state` table.
//!
//! A conversation only gets an id when its first turn is saved, after the
//! tree ran. So the first turn's state travels in that turn's log row
//! (`extra_json.tree_state`, written in the same transaction as the
//! messages), and the next turn that names the conversation adopts it into
//! `tree_state`. From then on `tree_state` is read and written directly.

use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::store::{now, Store, StoreError};

/// The phase of a conversation with nothing pending.
pub const IDLE: &str = "idle";

/// Phase + state of one conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeState {
    pub phase: String,
    pub state: Map<String, Value>,
}

impl Default for TreeState {
    fn default() -> Self {
        Self {
            phase: IDLE.into(),
            state: Map::new(),
        }
    }
}

impl TreeState {
    pub fn is_default(&self) -> bool {
        self.phase == IDLE && self.state.is_empty()
    }
}

/// Where a loaded state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The `tree_state` row.
    Table,
    /// The conversation's last turn-log row (its first tree turn).
    TurnLog,
    /// Nothing stored: idle.
    Fresh,
}

/// The state of a conversation (`None` = a new conversation: idle).
pub fn load(
    store: &Store,
    conversation_id: Option<i64>,
) -> Result<(TreeState, Origin), StoreError> {
    let Some(id) = conversation_id else {
        return Ok((TreeState::default(), Origin::Fresh));
    };
    let row: Option<(String, String)> = store.with_conn(|c| {
        c.query_row(
            "SELECT phase, state_json FROM tree_state WHERE conversation_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
    })?;
    if let Some((phase, json)) = row {
        let state = match serde_json::from_str::<Value>(&json) {
            Ok(Value::Object(map)) => map,
            _ => {
                tracing::warn!(
                    conversation = id,
                    "tree_state.state_json is not a JSON object; starting from an empty state"
                );
                Map::new()
            }
        };
        return Ok((TreeState { phase, state }, Origin::Table));
    }
    let extra: Option<String> = store.with_conn(|c| {
        c.query_row(
            "SELECT extra_json FROM turn_log WHERE conversation_id = ?1 ORDER BY id DESC LIMIT 1",
            [id],
            |r| r.get(0),
        )
        .optional()
    })?;
    let from_log = extra
        .and_then(|e| serde_json::from_str::<Value>(&e).ok())
        .and_then(|v| v.get("tree_state").cloned())
        .and_then(|v| serde_json::from_value::<TreeState>(v).ok());
    Ok(match from_log {
        Some(s) => (s, Origin::TurnLog),
        None => (TreeState::default(), Origin::Fresh),
    })
}

/// Write a conversation's state (insert or replace).
pub fn save(store: &Store, conversation_id: i64, s: &TreeState) -> Result<(), StoreError> {
    let json = Value::Object(s.state.clone()).to_string();
    store.with_conn(|c| {
        c.execute(
            "INSERT INTO tree_state (conversation_id, phase, state_json, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(conversation_id) DO UPDATE SET phase = excluded.phase,
                 state_json = excluded.state_json, updated_at = excluded.updated_at",
            rusqlite::params![conversation_id, s.phase, json, now()],
        )
        .map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SaveTurn;
    use crate::telemetry::TurnRecord;

    #[test]
    fn first_turn_via_the_log_then_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let mut record = TurnRecord::new("text", "delete milk");
        let pending = TreeState {
            phase: "confirm_delete".into(),
            state: serde_json::json!({"pending_delete": {"title": "milk"}})
                .as_object()
                .unwrap()
                .clone(),
        };
        record
            .extra
            .insert("tree_state".into(), serde_json::to_value(&pending).unwrap());
        let (conv, _) = store
            .save_turn(&SaveTurn {
                user_id: "user-1",
                conversation_id: None,
                user_text: "delete milk",
                answer: "sure?",
                record: &record,
                jobs: vec![],
            })
            .unwrap();
        assert_eq!(
            load(&store, Some(conv)).unwrap(),
            (pending.clone(), Origin::TurnLog)
        );
        save(&store, conv, &TreeState::default()).unwrap();
        assert_eq!(
            load(&store, Some(conv)).unwrap(),
            (TreeState::default(), Origin::Table)
        );
        assert_eq!(load(&store, None).unwrap().1, Origin::Fresh);
        assert_eq!(load(&store, Some(999)).unwrap().1, Origin::Fresh);
    }
}
