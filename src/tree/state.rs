//! The tree's per-conversation state (R-TREE): the phase (`idle`,
//! `confirm_delete`, …) and a JSON object, in the `tree_state` table.
//!
//! A turn never writes it while it runs: the new state goes into the
//! turn's [`crate::store::TurnEffects`] and is written by the turn's save,
//! in its transaction (for a new conversation, under the id that save
//! creates). So a turn that fails, or whose save fails, leaves it as it was.
//!
//! Databases written before that kept a new conversation's first state in
//! that turn's log row (`extra_json.tree_state`); [`load`] still reads it
//! there when the conversation has no `tree_state` row ([`Origin::TurnLog`]).

use rusqlite::OptionalExtension;
use serde_json::{Map, Value};

pub use crate::store::tree_state::{TreeState, IDLE};
use crate::store::{tree_state, Store, StoreError};

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
    let row = store.with_conn(|c| tree_state::get(c, id))?;
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
            "SELECT extra_json FROM turn_log WHERE conversation_id = ?1 AND outcome = 'ok'
             ORDER BY id DESC LIMIT 1",
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

/// Write a conversation's state now (insert or replace). Turns do not
/// call this: their state is saved with them ([`crate::store::TurnEffects`]).
pub fn save(store: &Store, conversation_id: i64, s: &TreeState) -> Result<(), StoreError> {
    store.with_conn(|c| tree_state::put(c, conversation_id, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SaveTurn, TurnEffects};
    use crate::telemetry::TurnRecord;

    #[test]
    fn an_older_first_turn_via_the_log_then_the_table() {
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
                effects: TurnEffects::default(),
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
