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
//! is the title) and a way to say done, which is mapped onto whatever the
//! database has ([`StatusMap`]): the `Status` property (name configurable)
//! of type `status` (Notion's groups: to-do / in progress / complete — the
//! default "Not started / In progress / Done" works as made), of type
//! `select` (options matched to "not done" / "done" by configurable names),
//! or a `checkbox` (Notion's own "Done" tick box); with no property of
//! that name, the first `status` property, else the first `checkbox`. The
//! kind decides the JSON shape of every write, which is why the schema is
//! read first; a database none of this fits is a clear error, never a
//! guess. `doctor` prints the mapping in use.

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
/// The status property looked for by default (`tools.notion_status_property`).
pub const STATUS_PROP: &str = "Status";
pub const STATUS_TODO: &str = "To Do";
pub const STATUS_DONE: &str = "Done";
/// Option names read as "not done" by default (`tools.notion_open_names`),
/// first preferred for new items.
pub const OPEN_NAMES: &[&str] = &["To Do", "Not started", "Todo", "Open", "Backlog"];
/// Option names read as "done" by default (`tools.notion_done_names`).
pub const DONE_NAMES: &[&str] = &["Done", "Complete", "Completed", "Finished"];
/// Most query pages read for one list (100 items each).
const MAX_QUERY_PAGES: usize = 5;

/// How "done" is stored in this database.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusMap {
    /// A `status` or `select` property: new items get `open`, completed
    /// ones `done`; an item is done when its option is one of `done_all`.
    Options {
        prop: String,
        /// "status" or "select".
        kind: String,
        open: String,
        done: String,
        done_all: Vec<String>,
    },
    /// A `checkbox` property: ticked is done.
    Checkbox { prop: String },
}

impl StatusMap {
    fn prop(&self) -> &str {
        match self {
            StatusMap::Options { prop, .. } | StatusMap::Checkbox { prop } => prop,
        }
    }

    /// The property value to write.
    fn value(&self, done: bool) -> Value {
        match self {
            StatusMap::Options {
                kind,
                open,
                done: d,
                ..
            } => json!({ kind.clone(): {"name": if done { d } else { open }} }),
            StatusMap::Checkbox { .. } => json!({ "checkbox": done }),
        }
    }

    /// Whether a page's property value says done.
    fn is_done(&self, value: &Value) -> bool {
        match self {
            StatusMap::Options { kind, done_all, .. } => {
                let name = value[kind.as_str()]
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                done_all.iter().any(|d| d.eq_ignore_ascii_case(name))
            }
            StatusMap::Checkbox { .. } => value["checkbox"].as_bool() == Some(true),
        }
    }

    /// One line for `doctor`.
    pub fn describe(&self) -> String {
        match self {
            StatusMap::Options {
                prop,
                kind,
                open,
                done,
                ..
            } => format!("{kind} property \"{prop}\": new items \"{open}\", done \"{done}\""),
            StatusMap::Checkbox { prop } => format!("checkbox property \"{prop}\": ticked is done"),
        }
    }
}

/// Which names and property to look for (from `[tools]`).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusNames {
    pub property: String,
    pub open: Vec<String>,
    pub done: Vec<String>,
}

impl Default for StatusNames {
    fn default() -> Self {
        Self {
            property: STATUS_PROP.into(),
            open: OPEN_NAMES.iter().map(|s| s.to_string()).collect(),
            done: DONE_NAMES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// What the database's schema told us.
#[derive(Debug, Clone, PartialEq)]
struct Schema {
    title_prop: String,
    status: StatusMap,
}

/// A Notion-database to-do list.
pub struct NotionTodos {
    base_url: String,
    api_key: String,
    database_id: String,
    http: JsonHttp,
    names: StatusNames,
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
            names: StatusNames::default(),
            schema: Mutex::new(None),
        }
    }

    /// Look for this status property and these option names.
    pub fn with_names(mut self, names: StatusNames) -> Self {
        self.names = names;
        self
    }

    /// How this database stores "done" (reads the schema): for `doctor`.
    pub fn mapping(&self) -> Result<StatusMap, TodoError> {
        Ok(self.schema()?.status)
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
        let schema = parse_schema(&db, &self.names)?;
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
}

/// Read the title and status properties from a database object.
fn parse_schema(db: &Value, names: &StatusNames) -> Result<Schema, TodoError> {
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
    let wanted = names.property.as_str();
    let found = props
        .get(wanted)
        .map(|p| (wanted.to_string(), p))
        .or_else(|| {
            ["status", "checkbox"].iter().find_map(|k| {
                props
                    .iter()
                    .find(|(_, p)| kind(p) == *k)
                    .map(|(n, p)| (n.clone(), p))
            })
        });
    let Some((prop, status)) = found else {
        return Err(TodoError::Backend(format!(
            "the Notion database has no \"{wanted}\" property; add one of type Status (Notion's default options work), Select or Checkbox, or set tools.notion_status_property"
        )));
    };
    let status_kind = kind(status);
    let status = match status_kind.as_str() {
        "checkbox" => StatusMap::Checkbox { prop },
        "status" | "select" => options_map(prop, &status_kind, status, names)?,
        other => {
            return Err(TodoError::Backend(format!(
                "the Notion database's \"{prop}\" property is of type {}, not Status, Select or Checkbox",
                if other.is_empty() { "unknown" } else { other }
            )))
        }
    };
    Ok(Schema { title_prop, status })
}

/// A `status` or `select` property mapped onto not done / done.
///
/// Status: Notion groups its options into "To-do", "In progress" and
/// "Complete"; every option of the Complete group is done, new items take
/// the first To-do option (a configured open name preferred) and completed
/// ones the first Complete option (a configured done name preferred).
/// Without groups, and for a select, the options are matched by the
/// configured names; a select gains a missing option on first use, a
/// status property cannot.
fn options_map(
    prop: String,
    kind: &str,
    status: &Value,
    names: &StatusNames,
) -> Result<StatusMap, TodoError> {
    let options: Vec<(String, String)> = status[kind]["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter_map(|x| {
                    let name = x.get("name").and_then(Value::as_str)?;
                    let id = x.get("id").and_then(Value::as_str).unwrap_or("");
                    Some((id.to_string(), name.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let group = |group_name: &str| -> Vec<String> {
        status[kind]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| {
                g.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.eq_ignore_ascii_case(group_name))
            })
            .flat_map(|g| g["option_ids"].as_array().cloned().unwrap_or_default())
            .filter_map(|id| {
                let id = id.as_str()?;
                options
                    .iter()
                    .find(|(i, _)| i == id)
                    .map(|(_, n)| n.clone())
            })
            .collect()
    };
    // Of `among`, the first with a configured name, else the first.
    let pick = |among: &[String], preferred: &[String]| -> Option<String> {
        preferred
            .iter()
            .find_map(|p| among.iter().find(|o| o.eq_ignore_ascii_case(p)))
            .or_else(|| among.first())
            .cloned()
    };
    let all: Vec<String> = options.iter().map(|(_, n)| n.clone()).collect();
    let named = |wanted: &[String]| -> Vec<String> {
        all.iter()
            .filter(|o| wanted.iter().any(|w| w.eq_ignore_ascii_case(o)))
            .cloned()
            .collect()
    };
    let (to_do, complete) = (group("To-do"), group("Complete"));
    let (open, done, done_all) = if kind == "status" && !to_do.is_empty() && !complete.is_empty() {
        (
            pick(&to_do, &names.open),
            pick(&complete, &names.done),
            complete,
        )
    } else {
        let done_all = named(&names.done);
        (
            pick(&named(&names.open), &names.open),
            pick(&done_all, &names.done),
            done_all,
        )
    };
    let first = |v: &[String]| v.first().cloned().unwrap_or_default();
    match (open, done) {
        (Some(open), Some(done)) => Ok(StatusMap::Options {
            prop,
            kind: kind.into(),
            open,
            done,
            done_all,
        }),
        (open, done) if kind == "select" => {
            let done = done.unwrap_or_else(|| first(&names.done));
            Ok(StatusMap::Options {
                prop,
                kind: kind.into(),
                open: open.unwrap_or_else(|| first(&names.open)),
                done_all: vec![done.clone()],
                done,
            })
        }
        _ => Err(TodoError::Backend(format!(
            "the Notion database's \"{prop}\" property needs an option for not done ({}) and one for done ({}); its options are {}; set tools.notion_open_names / tools.notion_done_names to match",
            names.open.join(", "),
            names.done.join(", "),
            if all.is_empty() { "none".to_string() } else { all.join(", ") }
        ))),
    }
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
    let done = schema.status.is_done(&props[schema.status.prop()]);
    Some(TodoItem {
        id,
        title: if title.trim().is_empty() {
            "(untitled)".into()
        } else {
            title.trim().to_string()
        },
        done,
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
                schema.status.prop(): schema.status.value(false),
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
        let body = json!({"properties": {schema.status.prop(): schema.status.value(true)}});
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

    fn parse(status: Value) -> Result<StatusMap, TodoError> {
        parse_schema(&db(status), &StatusNames::default()).map(|s| s.status)
    }

    fn options(open: &str, done: &str, done_all: &[&str]) -> StatusMap {
        StatusMap::Options {
            prop: "Status".into(),
            kind: "status".into(),
            open: open.into(),
            done: done.into(),
            done_all: done_all.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn schema_maps_status_select_or_checkbox_and_explains_the_rest() {
        // Notion's default status property: groups decide.
        let default_status = json!({"id": "s", "name": "Status", "type": "status", "status": {
            "options": [{"id": "1", "name": "Not started"}, {"id": "2", "name": "In progress"},
                        {"id": "3", "name": "Done"}, {"id": "4", "name": "Shipped"}],
            "groups": [{"name": "To-do", "option_ids": ["1"]},
                       {"name": "In progress", "option_ids": ["2"]},
                       {"name": "Complete", "option_ids": ["3", "4"]}]}});
        let map = parse(default_status).unwrap();
        assert_eq!(map, options("Not started", "Done", &["Done", "Shipped"]));
        assert!(map.is_done(&json!({"status": {"name": "Shipped"}})));
        assert!(!map.is_done(&json!({"status": {"name": "In progress"}})));
        // Without groups: by name.
        let s = parse(json!({"id": "s", "name": "Status", "type": "status", "status": {
            "options": [{"id": "1", "name": "To do", "color": "red"}, {"id": "2", "name": "Done", "color": "green"}],
            "groups": []}}))
        .unwrap();
        assert_eq!(s, options("To do", "Done", &["Done"]));
        // A select gains missing options on first use.
        let s = parse(
            json!({"id": "s", "name": "Status", "type": "select", "select": {"options": []}}),
        )
        .unwrap();
        assert_eq!(s.value(false), json!({"select": {"name": "To Do"}}));
        assert_eq!(s.value(true), json!({"select": {"name": "Done"}}));
        let s = parse(json!({"type": "select", "select": {"options": [{"name": "Open"}, {"name": "Finished"}]}})).unwrap();
        assert_eq!(s.value(true), json!({"select": {"name": "Finished"}}));
        // A checkbox.
        let s = parse(json!({"id": "s", "name": "Status", "type": "checkbox", "checkbox": {}}))
            .unwrap();
        assert_eq!(
            s,
            StatusMap::Checkbox {
                prop: "Status".into()
            }
        );
        assert_eq!(s.value(true), json!({"checkbox": true}));
        assert!(s.describe().contains("checkbox"));
        // A status with nothing that reads as done: the options are named.
        let e = parse(json!({"id": "s", "name": "Status", "type": "status", "status": {"options": [{"name": "Not started"}]}})).unwrap_err();
        assert!(e.to_string().contains("its options are Not started"), "{e}");
        let e = parse(json!({"type": "number", "number": {}})).unwrap_err();
        assert!(e.to_string().contains("type number"), "{e}");
        let e = parse_schema(
            &json!({"properties": {"Name": {"type": "title", "title": {}}}}),
            &StatusNames::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("no \"Status\" property"), "{e}");
        // Another name: Notion's "Done" checkbox is found by its type.
        let s = parse_schema(
            &json!({"properties": {"Name": {"type": "title", "title": {}}, "Done": {"type": "checkbox", "checkbox": {}}}}),
            &StatusNames::default(),
        )
        .unwrap();
        assert_eq!(
            s.status,
            StatusMap::Checkbox {
                prop: "Done".into()
            }
        );
        // Configured names for a select.
        let names = StatusNames {
            property: "State".into(),
            open: vec!["Pending".into()],
            done: vec!["Closed".into()],
        };
        let s = parse_schema(
            &json!({"properties": {"Name": {"type": "title", "title": {}}, "State": {"type": "select", "select": {"options": [{"name": "Closed"}, {"name": "Pending"}]}}}}),
            &names,
        )
        .unwrap();
        assert_eq!(
            s.status.value(false),
            json!({"select": {"name": "Pending"}})
        );
    }
}
