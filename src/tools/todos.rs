//! The to-do list: one [`TodoBackend`] trait, a local SQLite backend
//! ([`LocalTodos`], the default, shared with the intent tree's todo
//! intents) and a Notion backend ([`super::todos_notion::NotionTodos`]),
//! plus the four agent tools over whichever backend is configured.
//!
//! Why matching lives here: "complete the milk one" must pick the same item
//! whether the list is local or in Notion, and must never guess. An exact
//! title wins; otherwise every word of the query must appear as a word of
//! the title; several candidates are [`TodoError::Ambiguous`] so the caller
//! asks which one.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{Tool, ToolError};

pub use super::todos_local::LocalTodos;

/// Longest title accepted (a spoken to-do is a short phrase).
pub const MAX_TITLE_CHARS: usize = 200;

/// One item of the list. `id` is the backend's key (a row id or a Notion
/// page id).
#[derive(Debug, Clone, PartialEq)]
pub struct TodoItem {
    pub id: String,
    pub title: String,
    pub done: bool,
}

/// Why a to-do operation did not happen. Callers branch on these: the
/// device asks "which one?" on `Ambiguous`, says so on `NotFound`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TodoError {
    #[error("the to-do needs a title")]
    EmptyTitle,
    #[error("the to-do title is too long (over {MAX_TITLE_CHARS} characters)")]
    TitleTooLong,
    #[error("no to-do matches \"{0}\"")]
    NotFound(String),
    #[error("several to-dos match: {}", .0.join(", "))]
    Ambiguous(Vec<String>),
    #[error("\"{0}\" is already done")]
    AlreadyDone(String),
    /// The words name one part of an item that joins several things
    /// ("eggs" of "eggs and cheese"): marking the whole item done would
    /// tick off what was not bought.
    #[error("\"{0}\" is one item on the list; say all of it")]
    PartOf(String),
    #[error("{0}")]
    Backend(String),
}

/// A to-do list store. Every method is all-or-nothing: a failure leaves the
/// list as it was.
pub trait TodoBackend: Send + Sync {
    /// "local" or "Notion", for messages.
    fn label(&self) -> &str;
    fn add(&self, title: &str) -> Result<TodoItem, TodoError>;
    /// Open items (oldest first), then done items when `include_done`.
    fn list(&self, include_done: bool) -> Result<Vec<TodoItem>, TodoError>;
    /// Mark the open item matching `query` done.
    fn complete(&self, query: &str) -> Result<TodoItem, TodoError>;
    /// Remove the item matching `query` (open items are preferred).
    fn delete(&self, query: &str) -> Result<TodoItem, TodoError>;
    /// Remove every open item ("clear my shopping list"), returning how
    /// many went. The default removes them one by one by title, so a
    /// failure part-way leaves the rest; a backend that can do it in one
    /// transaction overrides it.
    fn clear(&self) -> Result<usize, TodoError> {
        let mut removed = 0;
        for item in self.list(false)? {
            match self.delete(&item.title) {
                Ok(_) => removed += 1,
                // Gone meanwhile, or a title several items share: left
                // out of the count, the rest still go.
                Err(TodoError::Ambiguous(_)) | Err(TodoError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }
    /// The item `delete(query)` would remove, without removing it (for a
    /// yes/no confirmation first).
    fn find(&self, query: &str) -> Result<TodoItem, TodoError> {
        let items = self.list(true)?;
        pick_preferring_open(&items, query).cloned()
    }
}

/// Check and tidy a new title.
pub fn clean_title(title: &str) -> Result<String, TodoError> {
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    let title = title
        .trim_matches(|c: char| c == '.' || c == '"' || c == '\'')
        .trim();
    if title.is_empty() {
        return Err(TodoError::EmptyTitle);
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(TodoError::TitleTooLong);
    }
    Ok(title.to_string())
}

/// Words that say nothing about which item is meant.
const FILLER: &[&str] = &[
    "the", "a", "an", "my", "to", "item", "task", "todo", "one", "list", "off",
];

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn normal(s: &str) -> String {
    words(s).join(" ")
}

/// Pick the one item `query` means among `items`: an exact title
/// (case-insensitive, punctuation ignored) wins; else every query word
/// must be a word of the title; one candidate is the answer, several are
/// `Ambiguous`, none is `NotFound`.
pub fn pick<'a>(items: &'a [TodoItem], query: &str) -> Result<&'a TodoItem, TodoError> {
    let q = normal(query);
    if q.is_empty() {
        return Err(TodoError::NotFound(query.trim().to_string()));
    }
    if let Some(exact) = items.iter().find(|i| normal(&i.title) == q) {
        return Ok(exact);
    }
    let mut wanted: Vec<String> = words(query)
        .into_iter()
        .filter(|w| !FILLER.contains(&w.as_str()))
        .collect();
    if wanted.is_empty() {
        wanted = words(query);
    }
    let matches: Vec<&TodoItem> = items
        .iter()
        .filter(|item| {
            let title = words(&item.title);
            wanted.iter().all(|w| {
                title.iter().any(|t| {
                    t == w || t.strip_suffix('s') == Some(w) || w.strip_suffix('s') == Some(t)
                })
            })
        })
        .collect();
    match matches.as_slice() {
        [] => Err(TodoError::NotFound(query.trim().to_string())),
        [one] => Ok(one),
        many => {
            let mut titles: Vec<String> = many.iter().map(|i| i.title.clone()).collect();
            titles.dedup();
            if titles.len() == 1 {
                // Duplicates of one title: the oldest is as good as any.
                return Ok(many[0]);
            }
            Err(TodoError::Ambiguous(titles))
        }
    }
}

/// As [`pick`], preferring open items: an exact title anywhere wins (an
/// open one first), then word matches among open items, then among done
/// ones.
pub fn pick_preferring_open<'a>(
    items: &'a [TodoItem],
    query: &str,
) -> Result<&'a TodoItem, TodoError> {
    let q = normal(query);
    let exact = |done: bool| {
        items
            .iter()
            .find(|i| i.done == done && !q.is_empty() && normal(&i.title) == q)
    };
    if let Some(found) = exact(false).or_else(|| exact(true)) {
        return Ok(found);
    }
    let open: Vec<TodoItem> = items.iter().filter(|i| !i.done).cloned().collect();
    let found = match pick(&open, query) {
        Err(TodoError::NotFound(_)) => {
            let done: Vec<TodoItem> = items.iter().filter(|i| i.done).cloned().collect();
            pick(&done, query)?.clone()
        }
        other => other?.clone(),
    };
    items
        .iter()
        .find(|i| i.id == found.id)
        .ok_or_else(|| TodoError::NotFound(query.to_string()))
}

/// For `complete`: the open item, or `AlreadyDone` when only a done item
/// matches.
pub fn pick_open<'a>(items: &'a [TodoItem], query: &str) -> Result<&'a TodoItem, TodoError> {
    let found = pick_preferring_open(items, query)?;
    if found.done {
        return Err(TodoError::AlreadyDone(found.title.clone()));
    }
    if names_one_part(&found.title, query) {
        return Err(TodoError::PartOf(found.title.clone()));
    }
    Ok(found)
}

/// Whether `query` names only one of the things a `title` joins with
/// "and", "&" or commas ("eggs" of "eggs and cheese", "milk" of "oat milk
/// and bananas"): another part has none of the query's words ("milk and
/// eggs" names both parts of "buy milk and eggs").
fn names_one_part(title: &str, query: &str) -> bool {
    let said: Vec<String> = words(query);
    let joined = title
        .to_lowercase()
        .replace(" & ", ",")
        .replace(" and ", ",");
    let parts: Vec<Vec<String>> = joined
        .split(',')
        .map(words)
        .filter(|p| !p.is_empty())
        .collect();
    parts.len() > 1
        && parts.iter().any(|part| {
            !part.iter().any(|w| {
                !FILLER.contains(&w.as_str())
                    && said.iter().any(|s| {
                        s == w || s.strip_suffix('s') == Some(w) || w.strip_suffix('s') == Some(s)
                    })
            })
        })
}

/// The list as one short sentence for the model or the speaker.
pub fn describe_list(items: &[TodoItem]) -> String {
    let open: Vec<&str> = items
        .iter()
        .filter(|i| !i.done)
        .map(|i| i.title.as_str())
        .collect();
    let done: Vec<&str> = items
        .iter()
        .filter(|i| i.done)
        .map(|i| i.title.as_str())
        .collect();
    let mut out = if open.is_empty() {
        "Your to-do list is empty.".to_string()
    } else {
        format!(
            "Your to-do list has {} item{}: {}.",
            open.len(),
            if open.len() == 1 { "" } else { "s" },
            open.join("; ")
        )
    };
    if !done.is_empty() {
        out.push_str(&format!(" Done: {}.", done.join("; ")));
    }
    out
}

/// What the model reads for a non-failure outcome (not found and
/// ambiguous are answers, not tool failures).
fn outcome(result: Result<String, TodoError>) -> Result<String, ToolError> {
    match result {
        Ok(s) => Ok(s),
        Err(TodoError::Ambiguous(titles)) => Ok(format!(
            "Several to-dos match: {}. Ask the user which one they mean.",
            titles.join("; ")
        )),
        Err(e @ (TodoError::NotFound(_) | TodoError::AlreadyDone(_) | TodoError::PartOf(_))) => {
            let mut s = e.to_string();
            if let Some(first) = s.get(..1) {
                s = first.to_uppercase() + &s[1..];
            }
            Ok(format!("{s}."))
        }
        Err(e @ (TodoError::EmptyTitle | TodoError::TitleTooLong)) => {
            Err(ToolError::BadArguments(e.to_string()))
        }
        Err(TodoError::Backend(e)) => Err(ToolError::Failed(e)),
    }
}

fn string_arg(args: &Value, names: &[&str]) -> Result<String, ToolError> {
    for name in names {
        match args.get(*name) {
            Some(Value::String(s)) if !s.trim().is_empty() => return Ok(s.clone()),
            Some(Value::String(_)) => {
                return Err(ToolError::BadArguments(format!("'{name}' is empty")))
            }
            Some(Value::Null) | None => continue,
            Some(_) => {
                return Err(ToolError::BadArguments(format!(
                    "'{name}' must be a string"
                )))
            }
        }
    }
    Err(ToolError::BadArguments(format!(
        "missing the '{}' field",
        names[0]
    )))
}

fn task_schema(description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"task": {"type": "string", "description": description}},
        "required": ["task"]
    })
}

/// `add_todo {"task": …}`
pub struct AddTodo(pub Arc<dyn TodoBackend>);
/// `list_todos {"include_done"?: bool}`
pub struct ListTodos(pub Arc<dyn TodoBackend>);
/// `complete_todo {"task": …}`
pub struct CompleteTodo(pub Arc<dyn TodoBackend>);
/// `delete_todo {"task": …}`
pub struct DeleteTodo(pub Arc<dyn TodoBackend>);

impl Tool for AddTodo {
    fn name(&self) -> &str {
        "add_todo"
    }
    fn description(&self) -> &str {
        "Add a task to the user's to-do list."
    }
    fn parameters(&self) -> Value {
        task_schema("The task, e.g. 'buy milk'")
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let task = string_arg(args, &["task", "title"])?;
        outcome(
            self.0
                .add(&task)
                .map(|item| format!("Added \"{}\" to the to-do list.", item.title)),
        )
    }
}

impl Tool for ListTodos {
    fn name(&self) -> &str {
        "list_todos"
    }
    fn description(&self) -> &str {
        "List the open tasks on the user's to-do list (optionally the done ones too)."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"include_done": {"type": "boolean", "description": "Also list finished tasks"}},
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let include_done = match args.get("include_done") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ToolError::BadArguments(
                    "'include_done' must be true or false".into(),
                ))
            }
        };
        outcome(self.0.list(include_done).map(|items| describe_list(&items)))
    }
}

impl Tool for CompleteTodo {
    fn name(&self) -> &str {
        "complete_todo"
    }
    fn description(&self) -> &str {
        "Mark a task on the user's to-do list as done. Pass the task name or a keyword."
    }
    fn parameters(&self) -> Value {
        task_schema("The task name or a keyword from it")
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let task = string_arg(args, &["task", "title", "query"])?;
        outcome(
            self.0
                .complete(&task)
                .map(|item| format!("Marked \"{}\" as done.", item.title)),
        )
    }
}

impl Tool for DeleteTodo {
    fn name(&self) -> &str {
        "delete_todo"
    }
    fn description(&self) -> &str {
        "Delete a task from the user's to-do list. Pass the task name or a keyword."
    }
    fn parameters(&self) -> Value {
        task_schema("The task name or a keyword from it")
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let task = string_arg(args, &["task", "title", "query"])?;
        outcome(
            self.0
                .delete(&task)
                .map(|item| format!("Deleted \"{}\" from the to-do list.", item.title)),
        )
    }
}

/// The four tools over one backend.
pub fn tools(backend: Arc<dyn TodoBackend>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(AddTodo(backend.clone())),
        Arc::new(ListTodos(backend.clone())),
        Arc::new(CompleteTodo(backend.clone())),
        Arc::new(DeleteTodo(backend)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: u32, title: &str, done: bool) -> TodoItem {
        TodoItem {
            id: id.to_string(),
            title: title.into(),
            done,
        }
    }

    #[test]
    fn exact_title_wins_then_words_then_ambiguity() {
        let items = vec![
            item(1, "Buy milk", false),
            item(2, "Buy milk and eggs", false),
            item(3, "Call mom", false),
            item(4, "Milkshake recipe", false),
        ];
        assert_eq!(pick(&items, "buy milk").unwrap().id, "1");
        assert_eq!(pick(&items, "BUY MILK.").unwrap().id, "1");
        assert_eq!(pick(&items, "eggs").unwrap().id, "2");
        assert_eq!(pick(&items, "the mom one").unwrap().id, "3");
        assert_eq!(
            pick(&items, "milk").unwrap_err(),
            TodoError::Ambiguous(vec!["Buy milk".into(), "Buy milk and eggs".into()])
        );
        assert!(matches!(pick(&items, "bread"), Err(TodoError::NotFound(_))));
        assert!(matches!(pick(&items, "  "), Err(TodoError::NotFound(_))));
    }

    #[test]
    fn complete_prefers_open_items_and_knows_done_ones() {
        let items = vec![item(1, "water plants", true), item(2, "pay rent", false)];
        assert_eq!(pick_open(&items, "rent").unwrap().id, "2");
        assert_eq!(
            pick_open(&items, "plants").unwrap_err(),
            TodoError::AlreadyDone("water plants".into())
        );
        assert_eq!(pick_preferring_open(&items, "plants").unwrap().id, "1");
        // An exact title that is done beats a partial match that is open.
        let items = vec![
            item(1, "buy milk", true),
            item(2, "buy milk and eggs", false),
        ];
        assert_eq!(
            pick_open(&items, "Buy milk").unwrap_err(),
            TodoError::AlreadyDone("buy milk".into())
        );
        // One part of an item that joins two things is not the item:
        // ticking "buy milk and eggs" off for "eggs" would tick the milk.
        assert_eq!(
            pick_open(&items, "eggs").unwrap_err(),
            TodoError::PartOf("buy milk and eggs".into())
        );
        assert_eq!(pick_open(&items, "milk and eggs").unwrap().id, "2");
        let items = vec![
            item(1, "oat milk & bananas", false),
            item(2, "free range eggs", false),
            item(3, "bread, butter", false),
        ];
        assert_eq!(
            pick_open(&items, "milk").unwrap_err(),
            TodoError::PartOf("oat milk & bananas".into())
        );
        assert_eq!(
            pick_open(&items, "butter").unwrap_err(),
            TodoError::PartOf("bread, butter".into())
        );
        // A word of a single thing still finds it.
        assert_eq!(pick_open(&items, "eggs").unwrap().id, "2");
        assert_eq!(pick_open(&items, "Oat milk & bananas").unwrap().id, "1");
    }

    #[test]
    fn titles_are_tidied_and_bounded() {
        assert_eq!(clean_title("  buy   milk. ").unwrap(), "buy milk");
        assert_eq!(clean_title(" . ").unwrap_err(), TodoError::EmptyTitle);
        assert_eq!(
            clean_title(&"x".repeat(300)).unwrap_err(),
            TodoError::TitleTooLong
        );
    }
}
