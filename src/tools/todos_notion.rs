//! The to-do list in a Notion database (when `NOTION_API_KEY` and
//! `NOTION_DATABASE_ID` are set).
//!
//! Wire format: Notion API version 2022-06-28, `Authorization: Bearer`.
//! `GET /v1/databases/{id}` (the schema, read once and cached),
//! `POST /v1/databases/{id}/query` (the items), `POST /v1/pages` (add),
//! `PATCH /v1/pages/{id}` (status change; delete = `{"archived": true}`, so
//! a mistaken delete can be restored from Notion's trash).
//!
//! The database needs a title property (`Task`, or else whichever property
//! is the title) and a `Status` property of type `status` or `select` with
//! the options "To Do" and "Done". Which type it is decides the JSON shape
//! of every write, which is why the schema is read first; a database
//! without these properties is a clear error, never a guess.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use super::http::{HttpError, JsonHttp};
use super::todos::{
    clean_title, pick_open, pick_preferring_open, TodoBackend, TodoError, TodoItem,
};

/// The Notion API version this client speaks.
pub const NOTION_VERSION: &str = "2022-06-28";
/// The title property we look for first.
pub const TASK_PROP: &str = "Task";
/// The status property.
pub const STATUS_PROP: &str = "Status";
pub const STATUS_TODO: &str = "To Do";
pub const STATUS_DONE: &str = "Done";
/// Most query pages read for one list (100 items each).
const MAX_QUERY_PAGES: usize = 5;

/// What the database's schema told us.
#[derive(Debug, Clone, PartialEq)]
struct Schema {
    title_prop: String,
    /// "status" or "select".
    status_kind: String,
    /// The option names as spelled in the database.
    todo_name: String,
    done_name: String,
}

/// A Notion-database to-do list.
pub struct NotionTodos {
    base_url: String,
    api_key: String,
    database_id: String,
    http: JsonHttp,
    schema: Mutex<Option<Schema>>,
}

impl std::fmt::Debug for NotionTodos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("NotionTodos")
            .field("base_url", &self.base_url)
            .field("database_id", &self.database_id)
            .finish()
    }
}

impl NotionTodos {
    /// `deadline` bounds each HTTP exchange.
    pub fn new(base_url: &str, api_key: &str, database_id: &str, deadline: Duration) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.trim().to_string(),
            database_id: database_id.trim().to_string(),
            http: JsonHttp::new("Notion", deadline),
            schema: Mutex::new(None),
        }
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Authorization", format!("Bearer {}", self.api_key)),
            ("Notion-Version", NOTION_VERSION.to_string()),
        ]
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, TodoError> {
        let url = format!("{}/v1/{}", self.base_url, path);
        self.http
            .send(method, &url, &self.headers(), body)
            .map_err(notion_error)
    }

    /// The schema, read once per process (not cached on failure).
    fn schema(&self) -> Result<Schema, TodoError> {
        let mut cached = self.schema.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = cached.as_ref() {
            return Ok(s.clone());
        }
        let db = self.call("GET", &format!("databases/{}", self.database_id), None)?;
        let schema = parse_schema(&db)?;
        *cached = Some(schema.clone());
        Ok(schema)
    }

    /// Every (non-archived) item, oldest first, open before done.
    fn all(&self, schema: &Schema) -> Result<Vec<TodoItem>, TodoError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_QUERY_PAGES {
            let mut body = json!({
                "page_size": 100,
                "sorts": [{"timestamp": "created_time", "direction": "ascending"}],
            });
            if let Some(c) = &cursor {
                body["start_cursor"] = json!(c);
            }
            let reply = self.call(
                "POST",
                &format!("databases/{}/query", self.database_id),
                Some(&body),
            )?;
            let Some(results) = reply.get("results").and_then(Value::as_array) else {
                return Err(TodoError::Backend(
                    "Notion's query reply has no results list".into(),
                ));
            };
            items.extend(results.iter().filter_map(|p| page_item(p, schema)));
            match (
                reply.get("has_more").and_then(Value::as_bool),
                reply.get("next_cursor").and_then(Value::as_str),
            ) {
                (Some(true), Some(next)) => cursor = Some(next.to_string()),
                _ => break,
            }
        }
        items.sort_by_key(|i| i.done);
        Ok(items)
    }

    fn status_value(schema: &Schema, name: &str) -> Value {
        json!({ schema.status_kind.clone(): {"name": name} })
    }
}

/// Read the title and status properties from a database object.
fn parse_schema(db: &Value) -> Result<Schema, TodoError> {
    let Some(props) = db.get("properties").and_then(Value::as_object) else {
        return Err(TodoError::Backend(
            "Notion sent a database without properties; check NOTION_DATABASE_ID".into(),
        ));
    };
    let kind = |p: &Value| {
        p.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let title_prop = if props.get(TASK_PROP).map(kind).as_deref() == Some("title") {
        TASK_PROP.to_string()
    } else {
        match props.iter().find(|(_, p)| kind(p) == "title") {
            Some((name, _)) => name.clone(),
            None => {
                return Err(TodoError::Backend(
                    "the Notion database has no title property; add a \"Task\" title property"
                        .into(),
                ))
            }
        }
    };
    let Some(status) = props.get(STATUS_PROP) else {
        return Err(TodoError::Backend(format!(
            "the Notion database has no \"{STATUS_PROP}\" property; add one of type Status or Select with the options \"{STATUS_TODO}\" and \"{STATUS_DONE}\""
        )));
    };
    let status_kind = kind(status);
    if status_kind != "status" && status_kind != "select" {
        return Err(TodoError::Backend(format!(
            "the Notion database's \"{STATUS_PROP}\" property is of type {}, not Status or Select",
            if status_kind.is_empty() {
                "unknown"
            } else {
                &status_kind
            }
        )));
    }
    let options: Vec<String> = status[&status_kind]["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter_map(|x| x.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let find = |want: &str| {
        options
            .iter()
            .find(|o| o.eq_ignore_ascii_case(want))
            .cloned()
    };
    // A select property gains new options on first use; a status property
    // cannot, so its options must already exist.
    let (todo_name, done_name) = match (find(STATUS_TODO), find(STATUS_DONE)) {
        (Some(t), Some(d)) => (t, d),
        (t, d) if status_kind == "select" => (
            t.unwrap_or_else(|| STATUS_TODO.into()),
            d.unwrap_or_else(|| STATUS_DONE.into()),
        ),
        _ => {
            return Err(TodoError::Backend(format!(
                "the Notion database's \"{STATUS_PROP}\" property needs the options \"{STATUS_TODO}\" and \"{STATUS_DONE}\""
            )))
        }
    };
    Ok(Schema {
        title_prop,
        status_kind,
        todo_name,
        done_name,
    })
}

/// A page as an item (`None` for a page without our properties).
fn page_item(page: &Value, schema: &Schema) -> Option<TodoItem> {
    let id = page.get("id")?.as_str()?.to_string();
    if page.get("archived").and_then(Value::as_bool) == Some(true)
        || page.get("in_trash").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let props = page.get("properties")?;
    let title: String = props[&schema.title_prop]["title"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|t| {
                    t.get("plain_text")
                        .or_else(|| t["text"].get("content"))
                        .and_then(Value::as_str)
                })
                .collect()
        })
        .unwrap_or_default();
    let status = props[STATUS_PROP][&schema.status_kind]
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Some(TodoItem {
        id,
        title: if title.trim().is_empty() {
            "(untitled)".into()
        } else {
            title.trim().to_string()
        },
        done: status.eq_ignore_ascii_case(&schema.done_name),
    })
}

/// A Notion failure as one sentence with the fix.
fn notion_error(e: HttpError) -> TodoError {
    let text = match &e {
        HttpError::Status { status: 401, .. } => {
            "Notion refused the API key; check NOTION_API_KEY".to_string()
        }
        HttpError::Status {
            status: 403 | 404,
            code,
            ..
        } if code.as_deref() != Some("validation_error") => {
            "Notion cannot find the database; check NOTION_DATABASE_ID and share the database with the integration".to_string()
        }
        HttpError::Status { status: 429, .. } => {
            "Notion is rate limiting requests; try again in a minute".to_string()
        }
        HttpError::Status {
            status: 400 | 409,
            message,
            ..
        } => format!("Notion rejected the change: {message}"),
        other => other.to_string(),
    };
    TodoError::Backend(text)
}

impl TodoBackend for NotionTodos {
    fn label(&self) -> &str {
        "Notion"
    }

    fn add(&self, title: &str) -> Result<TodoItem, TodoError> {
        let title = clean_title(title)?;
        let schema = self.schema()?;
        let body = json!({
            "parent": {"database_id": self.database_id},
            "properties": {
                schema.title_prop.clone(): {"title": [{"type": "text", "text": {"content": title}}]},
                STATUS_PROP: Self::status_value(&schema, &schema.todo_name),
            }
        });
        let page = self.call("POST", "pages", Some(&body))?;
        let id = page
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| TodoError::Backend("Notion's reply has no page id".into()))?;
        Ok(TodoItem {
            id: id.to_string(),
            title,
            done: false,
        })
    }

    fn list(&self, include_done: bool) -> Result<Vec<TodoItem>, TodoError> {
        let schema = self.schema()?;
        Ok(self
            .all(&schema)?
            .into_iter()
            .filter(|i| include_done || !i.done)
            .collect())
    }

    fn complete(&self, query: &str) -> Result<TodoItem, TodoError> {
        let schema = self.schema()?;
        let items = self.all(&schema)?;
        let item = pick_open(&items, query)?.clone();
        let body =
            json!({"properties": {STATUS_PROP: Self::status_value(&schema, &schema.done_name)}});
        self.call("PATCH", &format!("pages/{}", item.id), Some(&body))?;
        Ok(TodoItem { done: true, ..item })
    }

    fn delete(&self, query: &str) -> Result<TodoItem, TodoError> {
        let schema = self.schema()?;
        let items = self.all(&schema)?;
        let item = pick_preferring_open(&items, query)?.clone();
        self.call(
            "PATCH",
            &format!("pages/{}", item.id),
            Some(&json!({"archived": true})),
        )?;
        Ok(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(status: Value) -> Value {
        json!({"object": "database", "id": "db1", "properties": {
            "Task": {"id": "title", "name": "Task", "type": "title", "title": {}},
            "Status": status,
        }})
    }

    #[test]
    fn schema_accepts_status_or_select_and_explains_the_rest() {
        let s = parse_schema(&db(json!({"id": "s", "name": "Status", "type": "status", "status": {
            "options": [{"id": "1", "name": "To do", "color": "red"}, {"id": "2", "name": "Done", "color": "green"}],
            "groups": []}})))
        .unwrap();
        assert_eq!(s.status_kind, "status");
        assert_eq!(s.todo_name, "To do");
        let s = parse_schema(&db(
            json!({"id": "s", "name": "Status", "type": "select", "select": {"options": []}}),
        ))
        .unwrap();
        assert_eq!(
            (s.todo_name.as_str(), s.done_name.as_str()),
            ("To Do", "Done")
        );
        let e = parse_schema(&db(json!({"id": "s", "name": "Status", "type": "status", "status": {"options": [{"name": "Not started"}]}}))).unwrap_err();
        assert!(e.to_string().contains("needs the options"), "{e}");
        let e = parse_schema(&db(
            json!({"id": "s", "name": "Status", "type": "checkbox", "checkbox": {}}),
        ))
        .unwrap_err();
        assert!(e.to_string().contains("type checkbox"), "{e}");
        let e = parse_schema(&json!({"properties": {"Name": {"type": "title", "title": {}}}}))
            .unwrap_err();
        assert!(e.to_string().contains("no \"Status\" property"), "{e}");
    }
}
