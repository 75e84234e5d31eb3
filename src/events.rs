//! The one event stream of a turn (R-SSE).
//!
//! Every front door — `earshot chat`, the HTTP SSE stream, the voice loop,
//! Wyoming — consumes the same [`Event`]s through an [`EventSink`]. The JSON
//! shape of an event *is* the wire contract: `{"type": …, …, "timestamp": …}`.

use serde::Serialize;
use serde_json::Value;

/// One event of a turn, serialised 1:1 as an SSE `data:` frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A piece of the answer as it is produced (a token or a sentence).
    Content { data: String },
    /// A tool call started (the agent path) or a device action ran (tree).
    Thinking { tool: String },
    /// Keep-alive while tools run: a `: thinking` comment on the SSE wire,
    /// never a data frame and never printed as JSON.
    KeepAlive,
    /// Suggested follow-ups (tree mode), before `done`.
    Recommendation { items: Vec<String> },
    /// The turn finished and was saved.
    Done(Done),
    /// The turn failed; `message` is a sentence a user understands.
    Error { message: String },
    /// An intent-tree `publish_event` node fired (`{"type":"event",
    /// "event","data","conversation_id"}`): for companion apps on
    /// `/api/chat/stream` and `GET /api/events`, and the device's feedback
    /// (lights, earcons) through `tree::engine::Feedback`.
    #[serde(rename = "event")]
    Published {
        event: String,
        data: Value,
        conversation_id: Option<i64>,
    },
}

/// The payload of the final `done` frame.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Done {
    pub latency_ms: u64,
    pub model: String,
    pub route: String,
    pub intent: Option<String>,
    pub actions: Vec<String>,
    pub conversation_id: i64,
    pub turn_id: i64,
    /// The whole answer as stored (cleaned for speech).
    pub response: String,
}

impl Event {
    /// The JSON frame with its RFC 3339 UTC millisecond timestamp, or `None`
    /// for the keep-alive (which is an SSE comment, not data).
    pub fn to_frame(&self) -> Option<Value> {
        if matches!(self, Event::KeepAlive) {
            return None;
        }
        let mut value = serde_json::to_value(self).ok()?;
        if let Value::Object(map) = &mut value {
            map.insert("timestamp".into(), Value::String(timestamp_now()));
        }
        Some(value)
    }

    /// The SSE wire text of this event (`data: …\n\n` or `: thinking\n\n`).
    pub fn to_sse(&self) -> String {
        match self.to_frame() {
            Some(frame) => format!("data: {frame}\n\n"),
            None => ": thinking\n\n".to_string(),
        }
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-30T17:48:32.123Z`.
pub fn timestamp_now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Where a turn's events go. Implemented for closures so callers can write
/// `&mut |e: &Event| …`.
pub trait EventSink {
    fn emit(&mut self, event: &Event);
}

impl<F: FnMut(&Event)> EventSink for F {
    fn emit(&mut self, event: &Event) {
        self(event)
    }
}

/// A sink that keeps every event, for tests and for callers that need the
/// whole answer at once (e.g. POST /api/chat).
#[derive(Debug, Default)]
pub struct CollectSink {
    pub events: Vec<Event>,
}

impl EventSink for CollectSink {
    fn emit(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
}

impl CollectSink {
    /// Concatenated `content` pieces.
    pub fn content(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Content { data } => Some(data.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The final `done` payload, if the turn finished.
    pub fn done(&self) -> Option<&Done> {
        self.events.iter().find_map(|e| match e {
            Event::Done(d) => Some(d),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_type_and_millisecond_timestamp() {
        let frame = Event::Thinking {
            tool: "calculator".into(),
        }
        .to_frame()
        .unwrap();
        assert_eq!(frame["type"], "thinking");
        assert_eq!(frame["tool"], "calculator");
        let ts = frame["timestamp"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
        assert_eq!(ts.len(), "2026-11-30T17:48:32.123Z".len(), "{ts}");
        assert!(ts.ends_with('Z'));
    }

    #[test]
    fn keepalive_is_a_comment_not_data() {
        assert!(Event::KeepAlive.to_frame().is_none());
        assert_eq!(Event::KeepAlive.to_sse(), ": thinking\n\n");
        assert!(Event::Content { data: "hi".into() }
            .to_sse()
            .starts_with("data: {\"type\":\"content\",\"data\":\"hi\""));
    }

    #[test]
    fn done_is_flat() {
        let frame = Event::Done(Done {
            latency_ms: 12,
            route: "simple".into(),
            ..Default::default()
        })
        .to_frame()
        .unwrap();
        assert_eq!(frame["type"], "done");
        assert_eq!(frame["latency_ms"], 12);
        assert_eq!(frame["route"], "simple");
        assert!(frame["actions"].is_array());
    }
}
