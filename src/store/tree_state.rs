//! The `tree_state` table: one conversation's intent-tree phase and state.
//! Read by [`crate::tree::state`]; written by a turn's save (in its
//! transaction, see [`super::TurnEffects`]).

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// The row of a conversation: (phase, state_json).
pub(crate) fn get(
    c: &Connection,
    conversation_id: i64,
) -> rusqlite::Result<Option<(String, String)>> {
    c.query_row(
        "SELECT phase, state_json FROM tree_state WHERE conversation_id = ?1",
        [conversation_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Insert or replace a conversation's state.
pub(crate) fn put(c: &Connection, conversation_id: i64, s: &TreeState) -> rusqlite::Result<()> {
    let json = Value::Object(s.state.clone()).to_string();
    c.execute(
        "INSERT INTO tree_state (conversation_id, phase, state_json, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(conversation_id) DO UPDATE SET phase = excluded.phase,
             state_json = excluded.state_json, updated_at = excluded.updated_at",
        params![conversation_id, s.phase, json, super::now()],
    )
    .map(|_| ())
}
