//! Conversations and their messages; the atomic save of a turn.

use std::collections::BTreeMap;

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::{now, Result, Store, TreeState};
use crate::telemetry::TurnRecord;

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMessage {
    pub id: i64,
    pub role: String,
    pub content: String,
    pub timestamp: String,
}

/// A conversation row.
#[derive(Debug, Clone, Serialize)]
pub struct Conversation {
    pub id: i64,
    pub user_id: String,
    pub title: Option<String>,
    pub overview: Option<String>,
    pub action_items: Option<String>,
    pub mode: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub messages: i64,
    /// The first words of its first user message, so a conversation is
    /// recognisable before its summary (and title) exists.
    pub preview: Option<String>,
}

/// Longest preview, in characters (cut at a word, with "…").
pub const PREVIEW_CHARS: usize = 60;

/// The first words of `text`, at most [`PREVIEW_CHARS`] characters, cut
/// at a word boundary with "…" when cut; whitespace collapsed.
pub fn preview(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let whole = words.join(" ");
    if whole.chars().count() <= PREVIEW_CHARS {
        return whole;
    }
    let mut out = String::new();
    for w in words {
        let add = usize::from(!out.is_empty()) + w.chars().count();
        if out.chars().count() + add > PREVIEW_CHARS - 1 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if out.is_empty() {
        // One very long word.
        out = whole.chars().take(PREVIEW_CHARS - 1).collect();
    }
    out.push('…');
    out
}

/// The columns [`row_to_conversation`] reads.
const CONVERSATION_COLUMNS: &str =
    "id, user_id, title, overview, action_items, mode, created_at, updated_at,
     (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = conversations.id),
     (SELECT substr(content, 1, 400) FROM messages m
        WHERE m.conversation_id = conversations.id AND m.role = 'user' ORDER BY m.id LIMIT 1)";

/// Everything one finished turn writes, in one transaction.
#[derive(Debug, Clone)]
pub struct SaveTurn<'a> {
    pub user_id: &'a str,
    /// `None` creates a new conversation.
    pub conversation_id: Option<i64>,
    pub user_text: &'a str,
    pub answer: &'a str,
    pub record: &'a TurnRecord,
    /// Background work to run after the reply: (kind, JSON payload).
    pub jobs: Vec<(super::JobKind, String)>,
    /// What else the turn changed (tree state, device settings).
    pub effects: TurnEffects,
}

/// What a turn changes besides its messages and turn-log row, gathered
/// while it runs and written by [`Store::save_turn`] in the turn's
/// transaction: a turn that is not saved (it failed, was cancelled, or its
/// save failed) changes none of it. The turn's retrievals and tool timings
/// travel on its [`TurnRecord`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnEffects {
    /// The conversation's new intent-tree state. For a new conversation it
    /// is written under the id the save creates.
    pub tree_state: Option<TreeState>,
    /// Device settings (`dnd`, `volume`, `last_answer`…): key → new value,
    /// `None` removes the key.
    pub device_state: BTreeMap<String, Option<String>>,
    /// This turn's answer is what "repeat that" says next: the save points
    /// the `last_answer_message` setting at the answer's message (the
    /// answer is stored once, in `messages`).
    pub answer_is_last: bool,
}

impl Store {
    /// Create a conversation now (used when a caller needs an id before the
    /// first turn finishes, e.g. tree state).
    pub fn create_conversation(&self, user_id: &str) -> Result<i64> {
        self.with_conn(|c| {
            ensure_user(c, user_id)?;
            let ts = now();
            c.execute(
                "INSERT INTO conversations (user_id, created_at, updated_at) VALUES (?1, ?2, ?2)",
                params![user_id, ts],
            )?;
            Ok(c.last_insert_rowid())
        })
    }

    pub fn conversation(&self, id: i64) -> Result<Option<Conversation>> {
        self.with_conn(|c| {
            c.query_row(
                &format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1"),
                [id],
                row_to_conversation,
            )
            .optional()
        })
    }

    /// Conversations of a user, most recently updated first.
    pub fn conversations(&self, user_id: &str, limit: usize) -> Result<Vec<Conversation>> {
        self.with_conn(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {CONVERSATION_COLUMNS}
                 FROM conversations WHERE user_id = ?1 ORDER BY updated_at DESC, id DESC LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![user_id, limit as i64], row_to_conversation)?;
            rows.collect()
        })
    }

    /// All messages of a conversation, oldest first.
    pub fn messages(&self, conversation_id: i64) -> Result<Vec<StoredMessage>> {
        self.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT id, role, content, timestamp FROM messages
                 WHERE conversation_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([conversation_id], row_to_message)?;
            rows.collect()
        })
    }

    /// The last `max_messages` messages of a conversation, oldest first.
    pub fn recent_messages(
        &self,
        conversation_id: i64,
        max_messages: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT id, role, content, timestamp FROM messages
                 WHERE conversation_id = ?1 ORDER BY id DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(
                params![conversation_id, max_messages as i64],
                row_to_message,
            )?;
            let mut out: Vec<StoredMessage> = rows.collect::<rusqlite::Result<_>>()?;
            out.reverse();
            Ok(out)
        })
    }

    /// Per-conversation dispatch mode override (`tree`/`graph`), if set.
    pub fn set_conversation_mode(&self, id: i64, mode: Option<&str>) -> Result<usize> {
        self.with_conn(|c| {
            c.execute(
                "UPDATE conversations SET mode = ?2 WHERE id = ?1",
                params![id, mode],
            )
        })
    }

    /// Save a finished turn atomically: the conversation (created if new),
    /// both messages, the turn-log row (with its retrievals), its background
    /// jobs, its tree state and device settings — all or nothing. Returns
    /// (conversation id, turn id).
    pub fn save_turn(&self, turn: &SaveTurn<'_>) -> Result<(i64, i64)> {
        self.with_tx(|tx| {
            ensure_user(tx, turn.user_id)?;
            let ts = now();
            let conversation_id = match turn.conversation_id {
                Some(id) => {
                    tx.execute(
                        "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
                        params![id, ts],
                    )?;
                    id
                }
                None => {
                    tx.execute(
                        "INSERT INTO conversations (user_id, created_at, updated_at) VALUES (?1, ?2, ?2)",
                        params![turn.user_id, ts],
                    )?;
                    tx.last_insert_rowid()
                }
            };
            tx.execute(
                "INSERT INTO messages (conversation_id, role, content, timestamp) VALUES (?1, 'user', ?2, ?3)",
                params![conversation_id, turn.user_text, ts],
            )?;
            tx.execute(
                "INSERT INTO messages (conversation_id, role, content, timestamp) VALUES (?1, 'assistant', ?2, ?3)",
                params![conversation_id, turn.answer, now()],
            )?;
            // The answer is stored once, here; everything else names it.
            let answer_id = tx.last_insert_rowid();
            let turn_id = super::turn_log::insert(
                tx,
                Some(conversation_id),
                turn.user_id,
                turn.record,
                Some(answer_id),
            )?;
            for (kind, payload) in &turn.jobs {
                // The conversation and answer ids are only known here.
                let payload = match serde_json::from_str::<serde_json::Value>(payload) {
                    Ok(serde_json::Value::Object(mut map)) => {
                        map.insert("conversation_id".into(), conversation_id.into());
                        map.insert("assistant_message_id".into(), answer_id.into());
                        serde_json::Value::Object(map).to_string()
                    }
                    _ => payload.clone(),
                };
                super::jobs::enqueue_in(tx, *kind, &payload)?;
            }
            if let Some(state) = &turn.effects.tree_state {
                super::tree_state::put(tx, conversation_id, state)?;
            }
            for (key, value) in &turn.effects.device_state {
                super::put_device_state(tx, key, value.as_deref())?;
            }
            if turn.effects.answer_is_last {
                super::put_device_state(tx, super::LAST_ANSWER, None)?;
                super::put_device_state(
                    tx,
                    super::LAST_ANSWER_MESSAGE,
                    Some(&answer_id.to_string()),
                )?;
            }
            Ok((conversation_id, turn_id))
        })
    }

    /// Log a turn that produced no answer (error, cancelled, or its save
    /// failed): only the turn-log row (with the retrievals it made), never
    /// half a conversation and none of its [`TurnEffects`].
    pub fn log_turn_only(
        &self,
        conversation_id: Option<i64>,
        user_id: &str,
        record: &TurnRecord,
    ) -> Result<i64> {
        self.with_tx(|tx| super::turn_log::insert(tx, conversation_id, user_id, record, None))
    }
}

fn ensure_user(c: &rusqlite::Connection, user_id: &str) -> rusqlite::Result<()> {
    c.execute("INSERT OR IGNORE INTO users (id) VALUES (?1)", [user_id])
        .map(|_| ())
}

fn row_to_message(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredMessage> {
    Ok(StoredMessage {
        id: r.get(0)?,
        role: r.get(1)?,
        content: r.get(2)?,
        timestamp: r.get(3)?,
    })
}

fn row_to_conversation(r: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: r.get(0)?,
        user_id: r.get(1)?,
        title: r.get(2)?,
        overview: r.get(3)?,
        action_items: r.get(4)?,
        mode: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        messages: r.get(8)?,
        preview: r.get::<_, Option<String>>(9)?.map(|t| preview(&t)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_is_the_first_words_cut_at_a_word() {
        assert_eq!(
            preview("  remind me\n to call   Ana "),
            "remind me to call Ana"
        );
        let long = "what is the difference between a crocodile and an alligator when you see one in the wild";
        let p = preview(long);
        assert_eq!(
            p,
            "what is the difference between a crocodile and an alligator…"
        );
        assert!(p.chars().count() <= PREVIEW_CHARS);
        let word = "x".repeat(100);
        assert_eq!(preview(&word).chars().count(), PREVIEW_CHARS);
    }

    fn save(store: &Store, conv: Option<i64>, q: &str, a: &str) -> (i64, i64) {
        let record = TurnRecord::new("text", q);
        store
            .save_turn(&SaveTurn {
                user_id: "user-1",
                conversation_id: conv,
                user_text: q,
                answer: a,
                record: &record,
                jobs: vec![(crate::store::JobKind::Summarize, "{}".into())],
                effects: TurnEffects::default(),
            })
            .unwrap()
    }

    #[test]
    fn history_is_in_order_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let (conv, _) = save(&store, None, "q0", "a0");
        for i in 1..15 {
            save(&store, Some(conv), &format!("q{i}"), &format!("a{i}"));
        }
        let recent = store.recent_messages(conv, 20).unwrap();
        assert_eq!(recent.len(), 20);
        assert_eq!(recent[0].content, "q5");
        assert_eq!(recent[0].role, "user");
        assert_eq!(recent[19].content, "a14");
        assert_eq!(recent[19].role, "assistant");
        assert_eq!(store.messages(conv).unwrap().len(), 30);
        let c = store.conversation(conv).unwrap().unwrap();
        assert_eq!(c.messages, 30);
    }

    fn effects() -> TurnEffects {
        TurnEffects {
            tree_state: Some(TreeState {
                phase: "confirm_delete".into(),
                state: serde_json::Map::new(),
            }),
            device_state: BTreeMap::from([
                ("dnd".to_string(), Some("on".to_string())),
                ("volume".to_string(), None),
            ]),
            answer_is_last: true,
        }
    }

    #[test]
    fn a_saved_turn_writes_its_effects_under_the_new_conversation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        store.set_device_state("volume", "70").unwrap();
        let record = TurnRecord::new("text", "q");
        let (conv, _) = store
            .save_turn(&SaveTurn {
                user_id: "user-1",
                conversation_id: None,
                user_text: "q",
                answer: "a",
                record: &record,
                jobs: vec![],
                effects: effects(),
            })
            .unwrap();
        let phase: String = store
            .with_conn(|c| {
                c.query_row(
                    "SELECT phase FROM tree_state WHERE conversation_id = ?1",
                    [conv],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(phase, "confirm_delete");
        assert_eq!(store.device_state("dnd").unwrap().as_deref(), Some("on"));
        assert_eq!(store.device_state("volume").unwrap(), None);
    }

    /// How many text cells of the whole database contain `needle`.
    fn copies_in_database(store: &Store, needle: &str) -> usize {
        store
            .with_conn(|c| {
                let tables: Vec<String> = c
                    .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                let mut copies = 0;
                for table in tables {
                    let mut stmt = c.prepare(&format!("SELECT * FROM \"{table}\""))?;
                    let width = stmt.column_count();
                    let mut rows = stmt.query([])?;
                    while let Some(row) = rows.next()? {
                        for i in 0..width {
                            if let rusqlite::types::ValueRef::Text(t) = row.get_ref(i)? {
                                copies += usize::from(String::from_utf8_lossy(t).contains(needle));
                            }
                        }
                    }
                }
                Ok(copies)
            })
            .unwrap()
    }

    #[test]
    fn an_answer_is_stored_once_and_read_back_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let answer = format!("ANSWER-MARK {}", "long words ".repeat(2000));
        let mut record = TurnRecord::new("text", "q");
        record.response = Some(answer.clone());
        let (_, turn) = store
            .save_turn(&SaveTurn {
                user_id: "user-1",
                conversation_id: None,
                user_text: "q",
                answer: &answer,
                record: &record,
                jobs: vec![(
                    crate::store::JobKind::ExtractMemory,
                    serde_json::json!({"user_id": "user-1", "user": "q"}).to_string(),
                )],
                effects: effects(),
            })
            .unwrap();
        assert_eq!(copies_in_database(&store, "ANSWER-MARK"), 1);
        // Read back through every reader: the turn log, "repeat", the job.
        let row = store.turn_log_row(turn).unwrap().unwrap();
        assert_eq!(row["response"].as_str(), Some(answer.as_str()));
        assert!(row.get("stored_answer").is_none());
        assert_eq!(
            store.last_answer().unwrap().as_deref(),
            Some(answer.as_str())
        );
        let job = store
            .next_job(&[crate::store::JobKind::ExtractMemory], 3)
            .unwrap()
            .unwrap();
        let payload: serde_json::Value = serde_json::from_str(&job.payload).unwrap();
        let id = payload["assistant_message_id"].as_i64().unwrap();
        assert_eq!(
            store.message_text(id).unwrap().as_deref(),
            Some(answer.as_str())
        );
        // A text written later (a tree's set_state) is what "repeat" says,
        // until the next saved answer points at its message again.
        store
            .set_device_state("last_answer", "set by a tree")
            .unwrap();
        assert_eq!(
            store.last_answer().unwrap().as_deref(),
            Some("set by a tree")
        );
        let (_, _) = store
            .save_turn(&SaveTurn {
                user_id: "user-1",
                conversation_id: None,
                user_text: "again",
                answer: "the newer answer",
                record: &TurnRecord::new("text", "again"),
                jobs: vec![],
                effects: effects(),
            })
            .unwrap();
        assert_eq!(
            store.last_answer().unwrap().as_deref(),
            Some("the newer answer")
        );
        // A failed turn has no message: its row keeps its own sentence.
        let mut failed = TurnRecord::new("text", "boom");
        failed.response = Some("Sorry, that failed.".into());
        let id = store.log_turn_only(None, "user-1", &failed).unwrap();
        assert_eq!(
            store.turn_log_row(id).unwrap().unwrap()["response"],
            "Sorry, that failed."
        );
    }

    #[test]
    fn a_failed_save_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let record = TurnRecord::new("text", "q");
        // Conversation 999 does not exist: the FK makes the message insert
        // fail, and the whole transaction rolls back.
        let err = store.save_turn(&SaveTurn {
            user_id: "user-1",
            conversation_id: Some(999),
            user_text: "q",
            answer: "a",
            record: &record,
            jobs: vec![],
            effects: effects(),
        });
        assert!(err.is_err());
        let n: i64 = store
            .with_conn(|c| {
                c.query_row(
                    "SELECT (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM turn_log)
                        + (SELECT COUNT(*) FROM tree_state) + (SELECT COUNT(*) FROM device_state)",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(n, 0);
    }
}
