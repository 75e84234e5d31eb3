//! The agent's calendar tools over the device's calendar (SQLite, synced
//! over CalDAV): the same set the seed's reference agent had on Google's
//! API — list, quick add, create, update, delete, find free time. Times go
//! in and out as local ISO 8601 with the offset; every failure is one
//! sentence the model can read back.

use std::sync::Arc;

use chrono::{DateTime, Duration, Local, Utc};
use serde_json::{json, Value};

use super::{Tool, ToolError, ToolRegistry, ToolsConfig};
use crate::calendar::{self, Calendar, CalendarError, EventChange, NewEvent, Occurrence};

/// The calendar tool names (in `tools::TOOLS`).
pub const NAMES: &[&str] = &[
    "list_events",
    "quick_add_event",
    "create_event",
    "update_event",
    "delete_event",
    "find_free_time",
];

/// Register the enabled calendar tools over `calendar`.
pub fn offer(registry: &mut ToolRegistry, config: &ToolsConfig, calendar: &Calendar) {
    let calendar = Arc::new(calendar.clone());
    for name in NAMES {
        if config.enabled.iter().any(|e| e == name) {
            registry.register(Arc::new(CalendarTool {
                name,
                calendar: calendar.clone(),
            }));
        }
    }
}

struct CalendarTool {
    name: &'static str,
    calendar: Arc<Calendar>,
}

fn failed(e: CalendarError) -> ToolError {
    match e {
        CalendarError::BadInput(m) => ToolError::BadArguments(m),
        other => ToolError::Failed(other.to_string()),
    }
}

fn text<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn when(args: &Value, key: &str) -> Result<Option<DateTime<Utc>>, ToolError> {
    text(args, key)
        .map(calendar::parse_when)
        .transpose()
        .map_err(failed)
}

fn show(o: &Occurrence) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// A date and time written inside free text ("Haircut 2026-12-03 11:00"):
/// the rest is the title.
fn split_quick(text: &str) -> Option<(String, String)> {
    let re = regex::Regex::new(r"(\d{4}-\d{2}-\d{2})(?:[T\s]+(?:at\s+)?(\d{1,2}:\d{2}))?").ok()?;
    let m = re.captures(text)?;
    let whole = m.get(0)?;
    let when = match m.get(2) {
        Some(t) => format!("{} {:0>5}", &m[1], t.as_str()),
        None => m[1].to_string(),
    };
    let title = format!("{} {}", &text[..whole.start()], &text[whole.end()..]);
    let title = title
        .split_whitespace()
        .filter(|w| !matches!(w.to_lowercase().as_str(), "on" | "at"))
        .collect::<Vec<_>>()
        .join(" ");
    Some((title, when))
}

impl Tool for CalendarTool {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        match self.name {
            "list_events" => "List calendar events between two local times (ISO 8601, e.g. 2026-12-03T00:00); default today through the next 7 days. Recurring events are expanded.",
            "quick_add_event" => "Add an event from one line such as 'Haircut 2026-12-03 11:00' (title plus local date and time); it lasts an hour.",
            "create_event" => "Create a calendar event: title, start and end (local ISO 8601), optional location.",
            "update_event" => "Change an event named by its id, UID or title words: new title, start, end or location.",
            "delete_event" => "Delete an event (every occurrence) named by its id, UID or title words.",
            "find_free_time" => "Find free stretches of at least `minutes` between two local times (ISO 8601).",
            _ => "calendar",
        }
    }

    fn parameters(&self) -> Value {
        let s = |d: &str| json!({"type": "string", "description": d});
        match self.name {
            "list_events" => json!({"type": "object", "properties": {
                "from": s("start, local ISO 8601"), "to": s("end, local ISO 8601")}}),
            "quick_add_event" => json!({"type": "object", "properties": {
                "text": s("title and local date/time, e.g. 'Haircut 2026-12-03 11:00'")},
                "required": ["text"]}),
            "create_event" => json!({"type": "object", "properties": {
                "title": s("what"), "start": s("local ISO 8601"), "end": s("local ISO 8601"),
                "location": s("where (optional)")}, "required": ["title", "start", "end"]}),
            "update_event" => json!({"type": "object", "properties": {
                "event": s("id, UID or title words"), "title": s("new title"),
                "start": s("new start"), "end": s("new end"), "location": s("new location")},
                "required": ["event"]}),
            "delete_event" => json!({"type": "object", "properties": {
                "event": s("id, UID or title words")}, "required": ["event"]}),
            _ => json!({"type": "object", "properties": {
                "from": s("start, local ISO 8601"), "to": s("end, local ISO 8601"),
                "minutes": {"type": "integer", "description": "shortest useful stretch"}},
                "required": ["from", "to"]}),
        }
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let cal = &self.calendar;
        match self.name {
            "list_events" => {
                let from =
                    when(args, "from")?.unwrap_or_else(|| calendar::default_window(Local::now()).0);
                let to = when(args, "to")?.unwrap_or(from + Duration::days(7));
                let events = cal.list(from, to).map_err(failed)?;
                if events.is_empty() {
                    return Ok("No events in that time.".into());
                }
                Ok(Value::Array(events.iter().map(show).collect()).to_string())
            }
            "quick_add_event" => {
                let line = text(args, "text")
                    .ok_or_else(|| ToolError::BadArguments("text is required".into()))?;
                let (title, start) = split_quick(line).ok_or_else(|| {
                    ToolError::BadArguments(
                        "the text needs a date as YYYY-MM-DD (and a time as HH:MM)".into(),
                    )
                })?;
                let start = calendar::parse_when(&start).map_err(failed)?;
                let added = cal
                    .add(&NewEvent {
                        title,
                        start,
                        end: start + Duration::hours(1),
                        location: String::new(),
                    })
                    .map_err(failed)?;
                Ok(format!("Added: {}", show(&added)))
            }
            "create_event" => {
                let title = text(args, "title").unwrap_or("").to_string();
                let start = when(args, "start")?
                    .ok_or_else(|| ToolError::BadArguments("start is required".into()))?;
                let end = when(args, "end")?.unwrap_or(start + Duration::hours(1));
                let location = text(args, "location").unwrap_or("").to_string();
                let added = cal
                    .add(&NewEvent {
                        title,
                        start,
                        end,
                        location,
                    })
                    .map_err(failed)?;
                Ok(format!("Created: {}", show(&added)))
            }
            "update_event" => {
                let key = text(args, "event")
                    .ok_or_else(|| ToolError::BadArguments("event is required".into()))?;
                let change = EventChange {
                    title: text(args, "title").map(str::to_string),
                    start: when(args, "start")?,
                    end: when(args, "end")?,
                    location: args
                        .get("location")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                };
                let updated = cal.update(key, &change).map_err(failed)?;
                Ok(format!("Updated: {}", show(&updated)))
            }
            "delete_event" => {
                let key = text(args, "event")
                    .ok_or_else(|| ToolError::BadArguments("event is required".into()))?;
                let (_, title) = cal.remove(key).map_err(failed)?;
                Ok(format!("Deleted: {title}"))
            }
            _ => {
                let from = when(args, "from")?
                    .ok_or_else(|| ToolError::BadArguments("from is required".into()))?;
                let to = when(args, "to")?
                    .ok_or_else(|| ToolError::BadArguments("to is required".into()))?;
                let minutes = args
                    .get("minutes")
                    .and_then(Value::as_i64)
                    .unwrap_or(30)
                    .clamp(1, 24 * 60);
                let free = cal
                    .free_time(from, to, Duration::minutes(minutes))
                    .map_err(failed)?;
                if free.is_empty() {
                    return Ok("No free time of that length.".into());
                }
                let spans: Vec<Value> = free
                    .iter()
                    .map(|(a, b)| json!({"start": a.to_rfc3339(), "end": b.to_rfc3339()}))
                    .collect();
                Ok(Value::Array(spans).to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::CalendarConfig;
    use crate::store::Store;

    #[test]
    fn tools_add_list_move_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let cal = Calendar::new(
            &CalendarConfig::default(),
            Store::open_in(dir.path()).unwrap(),
        );
        let mut reg = ToolRegistry::default();
        let mut config = ToolsConfig::default();
        config.enabled.retain(|n| n != "find_free_time");
        offer(&mut reg, &config, &cal);
        assert!(reg.get("find_free_time").is_none());
        let out = reg
            .call(
                "quick_add_event",
                r#"{"text":"Haircut on 2030-12-03 at 11:00"}"#,
            )
            .unwrap();
        assert!(out.contains("\"title\":\"Haircut\""), "{out}");
        let out = reg
            .call(
                "update_event",
                r#"{"event":"haircut","start":"2030-12-03T12:00"}"#,
            )
            .unwrap();
        assert!(out.contains("T12:00:00"), "{out}");
        let listed = reg
            .call("list_events", r#"{"from":"2030-12-03","to":"2030-12-04"}"#)
            .unwrap();
        assert!(listed.contains("Haircut"), "{listed}");
        let bad = reg
            .call(
                "create_event",
                r#"{"title":"X","start":"2031-02-31 10:00"}"#,
            )
            .unwrap_err();
        assert!(bad.to_string().contains("no such day"), "{bad}");
        assert_eq!(
            reg.call("delete_event", r#"{"event":"haircut"}"#).unwrap(),
            "Deleted: Haircut"
        );
    }
}
