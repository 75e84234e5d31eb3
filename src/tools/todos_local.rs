//! The local to-do list in the device's SQLite file (table `todos`).
//!
//! The default backend: it works offline, and the intent tree's todo
//! intents and the agent's todo tools read and write the same rows. Each
//! change runs in one IMMEDIATE transaction, so a lookup and the write it
//! leads to cannot interleave with another writer and a failure writes
//! nothing.

use rusqlite::{params, Connection};

use super::todos::{
    clean_title, pick_open, pick_preferring_open, TodoBackend, TodoError, TodoItem,
};
use crate::store::{now, Store};

/// The to-do list of one user in the local database.
#[derive(Clone, Debug)]
pub struct LocalTodos {
    store: Store,
    user_id: String,
}

impl LocalTodos {
    pub fn new(store: Store, user_id: impl Into<String>) -> Self {
        Self {
            store,
            user_id: user_id.into(),
        }
    }

    /// Every item (open first, oldest first within each group).
    fn all(conn: &Connection, user_id: &str) -> rusqlite::Result<Vec<TodoItem>> {
        let mut stmt =
            conn.prepare("SELECT id, title, done FROM todos WHERE user_id = ?1 ORDER BY done, id")?;
        let rows = stmt.query_map([user_id], |r| {
            Ok(TodoItem {
                id: r.get::<_, i64>(0)?.to_string(),
                title: r.get(1)?,
                done: r.get::<_, i64>(2)? != 0,
            })
        })?;
        rows.collect()
    }

    /// Find an item with `choose`, then write with `apply`, in one
    /// transaction; nothing is written when the lookup fails.
    fn change(
        &self,
        choose: impl FnOnce(&[TodoItem]) -> Result<TodoItem, TodoError>,
        apply: impl FnOnce(&Connection, i64) -> rusqlite::Result<usize>,
    ) -> Result<TodoItem, TodoError> {
        let user_id = self.user_id.clone();
        self.store
            .with_tx(|tx| {
                let items = Self::all(tx, &user_id)?;
                let chosen = match choose(&items) {
                    Ok(item) => item,
                    Err(e) => return Ok(Err(e)),
                };
                let id: i64 = chosen.id.parse().unwrap_or(-1);
                if apply(tx, id)? != 1 {
                    return Ok(Err(TodoError::NotFound(chosen.title)));
                }
                Ok(Ok(chosen))
            })
            .map_err(store_error)?
    }
}

fn store_error(e: crate::store::StoreError) -> TodoError {
    TodoError::Backend(format!("the local to-do list could not be used: {e}"))
}

impl TodoBackend for LocalTodos {
    fn label(&self) -> &str {
        "local"
    }

    fn add(&self, title: &str) -> Result<TodoItem, TodoError> {
        let title = clean_title(title)?;
        let user_id = self.user_id.clone();
        self.store
            .with_tx(|tx| {
                // The user row may not exist yet on a device with a
                // configured user id; the foreign key needs it.
                tx.execute(
                    "INSERT OR IGNORE INTO users (id, created_at) VALUES (?1, ?2)",
                    params![user_id, now()],
                )?;
                tx.execute(
                    "INSERT INTO todos (user_id, title, done, created_at) VALUES (?1, ?2, 0, ?3)",
                    params![user_id, title, now()],
                )?;
                Ok(TodoItem {
                    id: tx.last_insert_rowid().to_string(),
                    title: title.clone(),
                    done: false,
                })
            })
            .map_err(store_error)
    }

    fn list(&self, include_done: bool) -> Result<Vec<TodoItem>, TodoError> {
        let items = self
            .store
            .with_conn(|c| Self::all(c, &self.user_id))
            .map_err(store_error)?;
        Ok(items
            .into_iter()
            .filter(|i| include_done || !i.done)
            .collect())
    }

    fn complete(&self, query: &str) -> Result<TodoItem, TodoError> {
        self.change(
            |items| {
                pick_open(items, query).map(|i| TodoItem {
                    done: true,
                    ..i.clone()
                })
            },
            |tx, id| {
                tx.execute(
                    "UPDATE todos SET done = 1, completed_at = ?2 WHERE id = ?1 AND done = 0",
                    params![id, now()],
                )
            },
        )
    }

    fn delete(&self, query: &str) -> Result<TodoItem, TodoError> {
        self.change(
            |items| pick_preferring_open(items, query).cloned(),
            |tx, id| tx.execute("DELETE FROM todos WHERE id = ?1", [id]),
        )
    }

    /// Every open item in one statement: all or nothing.
    fn clear(&self) -> Result<usize, TodoError> {
        let user_id = self.user_id.clone();
        self.store
            .with_tx(|tx| {
                tx.execute(
                    "DELETE FROM todos WHERE user_id = ?1 AND done = 0",
                    [user_id],
                )
            })
            .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> (tempfile::TempDir, LocalTodos) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        (dir, LocalTodos::new(store, "user-1"))
    }

    #[test]
    fn add_list_complete_delete_round_trip() {
        let (_dir, todos) = list();
        todos.add("buy milk").unwrap();
        todos.add("buy milk and eggs").unwrap();
        todos.add("call mom").unwrap();
        assert_eq!(todos.list(false).unwrap().len(), 3);
        assert!(matches!(
            todos.complete("milk"),
            Err(TodoError::Ambiguous(t)) if t.len() == 2
        ));
        assert_eq!(todos.complete("Buy Milk").unwrap().title, "buy milk");
        assert_eq!(todos.list(false).unwrap().len(), 2);
        assert_eq!(todos.list(true).unwrap().len(), 3);
        assert_eq!(
            todos.complete("buy milk").unwrap_err(),
            TodoError::AlreadyDone("buy milk".into())
        );
        assert_eq!(todos.find("mom").unwrap().title, "call mom");
        assert_eq!(todos.delete("mom").unwrap().title, "call mom");
        assert!(matches!(todos.delete("mom"), Err(TodoError::NotFound(_))));
        let left: Vec<String> = todos
            .list(true)
            .unwrap()
            .into_iter()
            .map(|i| i.title)
            .collect();
        assert_eq!(left, vec!["buy milk and eggs", "buy milk"]);
    }

    #[test]
    fn failures_write_nothing_and_users_are_separate() {
        let (_dir, todos) = list();
        assert_eq!(todos.add("   ").unwrap_err(), TodoError::EmptyTitle);
        assert!(todos.list(true).unwrap().is_empty());
        todos.add("water plants").unwrap();
        let other = LocalTodos::new(todos.store.clone(), "someone-else");
        other.add("their task").unwrap();
        assert_eq!(todos.list(true).unwrap().len(), 1);
        assert!(matches!(
            other.delete("plants"),
            Err(TodoError::NotFound(_))
        ));
        assert_eq!(todos.list(true).unwrap().len(), 1);
    }
}
