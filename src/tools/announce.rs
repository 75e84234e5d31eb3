//! `announce {"message", "speaker"?}`: the agent's way to say something on
//! the speakers of other rooms (issue 22), through the device's one
//! [`Announcements`] hub — the same the intent tree's "tell the kitchen …"
//! uses. Which speakers are connected changes while earshot runs, so the
//! tool is always offered and answers "no speaker is connected" itself.

use serde_json::{json, Value};

use super::{Tool, ToolError, ToolRegistry, ToolsConfig};
use crate::device::announce::{AnnounceError, Announcements};

/// Register `announce` when `tools.enabled` names it.
pub fn offer(reg: &mut ToolRegistry, t: &ToolsConfig, hub: &Announcements) {
    if t.enabled.iter().any(|e| e == "announce") {
        reg.register(std::sync::Arc::new(Announce(hub.clone())));
    }
}

/// The tool over the hub.
pub struct Announce(pub Announcements);

impl Tool for Announce {
    fn name(&self) -> &str {
        "announce"
    }
    fn description(&self) -> &str {
        "Say a message out loud on the speakers of other rooms (e.g. 'tell the kitchen dinner is ready'). Without speaker it goes to every connected speaker."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "What to say, as a sentence, e.g. 'Dinner is ready.'"},
                "speaker": {"type": "string", "description": "The room or speaker name, e.g. 'kitchen'; omit for every speaker"}
            },
            "required": ["message"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let message = args
            .get("message")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::BadArguments("message (a string) is required".into()))?;
        let speaker = args
            .get("speaker")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty() && !matches!(*s, "all" | "everyone" | "every speaker"));
        match self.0.send(speaker, message) {
            Ok(sent) => Ok(format!("Announced on: {}.", sent.join(", "))),
            Err(e @ (AnnounceError::Empty | AnnounceError::Unknown { .. })) => {
                Err(ToolError::BadArguments(e.to_string()))
            }
            Err(e) => Err(ToolError::Failed(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_reaches_the_named_speaker_and_says_why_when_it_cannot() {
        let hub = Announcements::default();
        let tool = Announce(hub.clone());
        let err = tool.call(&json!({"message": "hi"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "No other speaker is connected to announce on."
        );
        let kitchen = hub.register(&["kitchen"]);
        let office = hub.register(&["office"]);
        assert_eq!(
            tool.call(&json!({"message": "dinner is ready", "speaker": "Kitchen"}))
                .unwrap(),
            "Announced on: kitchen."
        );
        assert_eq!(kitchen.pending()[0].text, "Dinner is ready.");
        assert!(office.pending().is_empty());
        let err = tool
            .call(&json!({"message": "hi", "speaker": "garage"}))
            .unwrap_err();
        assert!(matches!(err, ToolError::BadArguments(_)), "{err}");
        assert!(tool.call(&json!({})).is_err());
        tool.call(&json!({"message": "bye", "speaker": "everyone"}))
            .unwrap();
        assert_eq!(office.pending().len(), 1);
    }
}
