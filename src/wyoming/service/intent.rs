//! Intent recognition and handling over Wyoming.
//!
//! - `recognize {text}` → `intent {name, entities, text}` or
//!   `not-recognized {text}`. The decision is the intent tree's, made on
//!   the device with no LLM: a dry-run walk (nothing is changed, no LLM is
//!   called) classifies the text with the tree's kNN classifier and its
//!   own per-node threshold. An intent below its threshold, the `other`
//!   intent (not a device command) or a walk that never classifies is
//!   not recognised. `intent.text` is what earshot would answer (e.g. the
//!   time), so Home Assistant can speak it; entities are the arguments
//!   the tree's actions parse from the utterance (`item`, `expression`,
//!   `fact`).
//! - `transcript {text}` → a full earshot turn (tree, memory, tools, LLM;
//!   source `wyoming`, one conversation per connection) → `handled {text}`
//!   with the answer, or `not-handled {text}` with the error sentence the
//!   turn produced.

use std::net::SocketAddr;

use serde_json::{json, Value};

use crate::agent::turn::{run_turn, TurnInput};
use crate::agent::Services;
use crate::cancel::CancelToken;
use crate::events::CollectSink;
use crate::tree::interpreter::{NoLlm, WalkInput};
use crate::wyoming::server::Flow;
use crate::wyoming_proto::client::EventWriter;
use crate::wyoming_proto::protocol::{Event, ProtocolError};

/// The catch-all intent of the device set: "not a device command".
const OTHER: &str = "other";

/// Handle `recognize`.
pub fn recognize(
    services: &Services,
    event: &Event,
    out: &EventWriter,
) -> Result<Flow, ProtocolError> {
    let text = event.str("text").unwrap_or_default().trim().to_string();
    let reply = recognition(services, &text);
    out.send(&reply)?;
    Ok(Flow::Continue)
}

/// The `intent` / `not-recognized` event for `text`.
pub fn recognition(services: &Services, text: &str) -> Event {
    let not_recognized = |why: String| {
        tracing::debug!("wyoming: not recognized: {why}");
        Event::with_data(
            "not-recognized",
            json!({"text": "Sorry, I don't know that command.", "context": {"reason": why}}),
        )
    };
    if text.is_empty() {
        return not_recognized("empty text".into());
    }
    let Some(engine) = services.tree.as_ref() else {
        let why = services
            .tree_error
            .clone()
            .unwrap_or_else(|| "the intent tree is not loaded".into());
        return not_recognized(format!("the intent tree is unavailable: {why}"));
    };
    let input = WalkInput {
        text: text.to_string(),
        conversation_id: None,
        phase: crate::tree::state::IDLE.into(),
        state: serde_json::Map::new(),
        dry_run: true,
        preview: false,
    };
    let mut sink = CollectSink::default();
    let outcome = match engine.run(input, &mut NoLlm, &mut sink) {
        Ok(o) => o,
        Err(e) => return not_recognized(format!("the tree walk failed: {e}")),
    };
    let Some(c) = outcome.classification else {
        return not_recognized(format!("no classification ({})", outcome.notes.join("; ")));
    };
    if !c.accepted || c.intent == OTHER {
        return not_recognized(format!(
            "best intent '{}' at {:.2} (threshold {:.2})",
            c.intent, c.confidence, c.threshold
        ));
    }
    let mut data = json!({
        "name": c.intent,
        "context": {"confidence": c.confidence, "threshold": c.threshold},
    });
    let entities = entities(&c.intent, text);
    if !entities.is_empty() {
        data["entities"] = Value::Array(entities);
    }
    let answer = crate::agent::cleanup::for_speech(&outcome.answer);
    if !answer.trim().is_empty() {
        data["text"] = answer.trim().into();
    }
    Event::with_data("intent", data)
}

/// The arguments the tree's actions would parse from the utterance.
fn entities(intent: &str, text: &str) -> Vec<Value> {
    use crate::tree::actions::{memory, todo};
    let (name, value) = match intent {
        "todo_add" => ("item", todo::item_to_add(text)),
        "todo_complete" => ("item", todo::item_to_complete(text)),
        "todo_delete" => ("item", todo::item_to_delete(text)),
        "memory_remember" => ("fact", memory::fact_to_remember(text)),
        "memory_forget" => ("fact", memory::memory_to_forget(text)),
        "calculate" => match crate::tree::spoken_math::to_expression(text) {
            Some(e) => ("expression", e),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    if value.trim().is_empty() {
        return Vec::new();
    }
    vec![json!({"name": name, "value": value})]
}

/// Handle `transcript`: one full turn in this connection's conversation.
pub fn handle(
    services: &Services,
    conversation_id: &mut Option<i64>,
    peer: SocketAddr,
    event: &Event,
    out: &EventWriter,
) -> Result<Flow, ProtocolError> {
    let text = event.str("text").unwrap_or_default().to_string();
    let mut input = TurnInput {
        text,
        conversation_id: *conversation_id,
        source: "wyoming".into(),
        ..Default::default()
    };
    input
        .extra
        .insert("wyoming_peer".into(), peer.to_string().into());
    let mut sink = CollectSink::default();
    let outcome = run_turn(services, input, &mut sink, &CancelToken::new());
    if outcome.conversation_id.is_some() {
        *conversation_id = outcome.conversation_id;
    }
    tracing::info!(
        %peer,
        ok = outcome.ok,
        route = outcome.route.as_deref().unwrap_or("-"),
        intent = outcome.intent.as_deref().unwrap_or("-"),
        "wyoming: handled a transcript"
    );
    let kind = if outcome.ok { "handled" } else { "not-handled" };
    let mut data = json!({"text": outcome.response});
    if let Some(id) = outcome.conversation_id {
        data["context"] = json!({"conversation_id": id});
    }
    out.send(&Event::with_data(kind, data))?;
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_what_the_tree_actions_parse() {
        assert_eq!(
            entities("todo_add", "add milk to my shopping list"),
            vec![json!({"name": "item", "value": "milk"})]
        );
        assert_eq!(
            entities("memory_remember", "remember that my sister is called Ana"),
            vec![json!({"name": "fact", "value": "my sister is called Ana"})]
        );
        let calc = entities("calculate", "what is two plus three");
        assert_eq!(calc.len(), 1, "{calc:?}");
        assert_eq!(calc[0]["name"], "expression");
        assert!(entities("time_now", "what time is it").is_empty());
        // Nothing parsed: no empty entity.
        assert!(entities("calculate", "do some maths").is_empty());
    }
}
