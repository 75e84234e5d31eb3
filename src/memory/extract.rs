//! Long-term memory extraction after each exchange, the way Mem0 does it:
//! 1. the main LLM lists the durable facts in the exchange (the custom
//!    instructions decide what counts);
//! 2. the facts and the most similar existing memories (with short ids)
//!    go back to the LLM, which answers ADD / UPDATE / DELETE / NONE per
//!    memory — so a newer fact supersedes an older one.
//!
//! Replies are parsed leniently (code fences, prose around the JSON, ids
//! as numbers or strings); a reply that is not the expected JSON is logged
//! and ignored — never a crash, never a deleted memory.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{json, Value};

use super::Memory;
use crate::cancel::CancelToken;
use crate::llm::LlmConfig;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// The seed's MEM0_CUSTOM_INSTRUCTIONS: what to keep, by priority, and
/// what never to keep.
pub const DEFAULT_INSTRUCTIONS: &str = "Extract durable facts about the user, in this order of priority:
1. Health restrictions and allergies, especially anything a doctor advised (it applies to the user, even when phrased as \"my doctor said…\").
2. Schedule: meetings, appointments, reminders, with their day and time.
3. Preferences and personal details (likes, dislikes, family, work, places).
Never extract: the assistant's own answers, recipes, explanations or suggestions; one-off, transient requests (\"what time is it\", \"tell me a joke\", \"set the volume\").";

/// Characters of each side of the exchange sent to the LLM.
const MAX_EXCHANGE_CHARS: usize = 4000;
/// Characters of one fact or memory kept from the LLM's reply.
const MAX_FACT_CHARS: usize = 1000;

/// The fact prompt; `now_line` (the device's local date and time) is its
/// last line so the rest stays a cacheable prefix.
fn fact_prompt(instructions: &str, now_line: &str) -> String {
    format!(
        "You are a personal information organizer for a voice assistant. You read one exchange between the user and the assistant and list the facts about the user worth remembering for future conversations.\n\n\
{instructions}\n\n\
Rules:\n\
- Take facts only from what the USER said; the assistant's text is context, never a source of facts.\n\
- Write each fact as a short, self-contained sentence about the user (e.g. \"Is allergic to peanuts\", \"Has a dentist appointment on Friday at 10am\").\n\
- Resolve relative dates (\"tomorrow\", \"on Friday\") against the date on the last line, when the user gives one.\n\
- If there is nothing worth remembering, return an empty list.\n\n\
Answer with JSON only, in exactly this shape: {{\"facts\": [\"fact one\", \"fact two\"]}}\n\
{now_line}"
    )
}

const UPDATE_PROMPT: &str = "You manage a user's long-term memory. You get the existing memories (each with an id) and newly learned facts. Decide, for every existing memory and every new fact, one event:\n\
- ADD: a new fact that no existing memory covers. Give it a new id (any string not used yet).\n\
- UPDATE: an existing memory about the same subject that the new fact changes or refines. Keep its id and give the new text (the newer fact wins; keep details that are still true).\n\
- DELETE: an existing memory that a new fact contradicts or cancels (e.g. \"the meeting was cancelled\", \"I'm no longer vegetarian\"). Keep its id.\n\
- NONE: an existing memory that stays as it is, or a new fact already covered.\n\n\
Answer with JSON only, in exactly this shape:\n\
{\"memory\": [{\"id\": \"0\", \"text\": \"...\", \"event\": \"ADD|UPDATE|DELETE|NONE\", \"old_memory\": \"... (UPDATE only)\"}]}";

/// What the LLM decided for one memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpEvent {
    Add,
    Update,
    Delete,
    None,
}

/// One operation from the LLM's reply; `id` is the short id it was shown.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryOp {
    pub id: Option<String>,
    pub text: String,
    pub event: OpEvent,
}

fn cut(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}

/// The first JSON value in an LLM reply: the whole reply, a ```json fence,
/// or the span from the first `{`/`[` to the last `}`/`]`.
fn find_json(reply: &str) -> Option<Value> {
    let trimmed = reply.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Some(v);
    }
    if let Some(start) = trimmed.find("```") {
        let rest = &trimmed[start + 3..];
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        if let Some(end) = rest.find("```") {
            if let Ok(v) = serde_json::from_str::<Value>(rest[..end].trim()) {
                return Some(v);
            }
        }
    }
    for (open, close) in [('{', '}'), ('[', ']')] {
        if let (Some(s), Some(e)) = (trimmed.find(open), trimmed.rfind(close)) {
            if s < e {
                if let Ok(v) = serde_json::from_str::<Value>(&trimmed[s..=e]) {
                    return Some(v);
                }
            }
        }
    }
    None
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => ["text", "fact", "memory"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string)),
        _ => None,
    }
}

/// Facts from step 1's reply; `None` when the reply is not the expected JSON.
pub fn parse_facts(reply: &str) -> Option<Vec<String>> {
    let v = find_json(reply)?;
    let list = match &v {
        Value::Array(a) => a,
        Value::Object(o) => o.get("facts").and_then(Value::as_array)?,
        _ => return None,
    };
    Some(
        list.iter()
            .filter_map(value_text)
            .map(|t| cut(&t, MAX_FACT_CHARS))
            .filter(|t| !t.is_empty())
            .collect(),
    )
}

/// Operations from step 2's reply; `None` when it is not the expected JSON.
pub fn parse_operations(reply: &str) -> Option<Vec<MemoryOp>> {
    let v = find_json(reply)?;
    let list = match &v {
        Value::Array(a) => a,
        Value::Object(o) => ["memory", "memories", "operations"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_array))?,
        _ => return None,
    };
    Some(
        list.iter()
            .filter_map(|op| {
                let o = op.as_object()?;
                let event = match o
                    .get("event")
                    .and_then(Value::as_str)?
                    .trim()
                    .to_uppercase()
                    .as_str()
                {
                    "ADD" => OpEvent::Add,
                    "UPDATE" => OpEvent::Update,
                    "DELETE" => OpEvent::Delete,
                    "NONE" => OpEvent::None,
                    _ => return None,
                };
                let id = match o.get("id") {
                    Some(Value::String(s)) => Some(s.trim().to_string()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                };
                let text = o
                    .get("text")
                    .and_then(Value::as_str)
                    .map(|t| cut(t, MAX_FACT_CHARS))
                    .unwrap_or_default();
                Some(MemoryOp { id, text, event })
            })
            .collect(),
    )
}

/// What one extraction changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtractReport {
    pub added: usize,
    pub updated: usize,
    pub deleted: usize,
}

fn ask(
    llm: &dyn ChatModel,
    config: &LlmConfig,
    system: String,
    user: String,
) -> Result<String, LlmError> {
    let request = ChatRequest {
        model: config.model.clone(),
        messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
        temperature: 0.0,
        max_completion_tokens: config.max_completion_tokens,
        top_p: config.top_p,
        tools: Vec::new(),
        stream: false,
    };
    llm.chat(&request, &mut |_| {}, &CancelToken::new())
        .map(|r| r.content)
}

/// Run the two steps for one exchange and apply the operations.
/// `Err(LlmError)` means "try again later" (the job is kept).
pub fn extract(
    memory: &Memory,
    llm: &dyn ChatModel,
    llm_config: &LlmConfig,
    user_id: &str,
    user_text: &str,
    assistant_text: &str,
) -> Result<ExtractReport, ExtractError> {
    let now_line = crate::device::clock::now_line_system();
    let exchange = format!(
        "user: {}\nassistant: {}",
        cut(user_text, MAX_EXCHANGE_CHARS),
        cut(assistant_text, MAX_EXCHANGE_CHARS)
    );
    let reply = ask(
        llm,
        llm_config,
        fact_prompt(memory.config().instructions(), &now_line),
        format!("Input:\n{exchange}"),
    )?;
    let Some(facts) = parse_facts(&reply) else {
        tracing::warn!(reply = %cut(&reply, 200), "memory extraction: the LLM did not answer with the expected JSON; ignored");
        return Ok(ExtractReport::default());
    };
    if facts.is_empty() {
        return Ok(ExtractReport::default());
    }

    // The existing memories most similar to any of the facts, with short ids.
    let mut similar: BTreeMap<i64, String> = BTreeMap::new();
    for fact in &facts {
        match memory.search(user_id, fact, memory.config().similar_memories) {
            Ok(hits) => {
                for h in hits {
                    similar.entry(h.item.id).or_insert(h.item.text);
                }
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "memory extraction: could not look up similar memories");
            }
        }
    }
    let shown: Vec<(String, i64, String)> = similar
        .into_iter()
        .take(memory.config().similar_memories.max(1) * 2)
        .enumerate()
        .map(|(i, (id, text))| (i.to_string(), id, cut(&text, MAX_FACT_CHARS)))
        .collect();
    let existing: Vec<Value> = shown
        .iter()
        .map(|(short, _, text)| json!({"id": short, "text": text}))
        .collect();
    let user = format!(
        "Existing memories:\n{}\n\nNew facts:\n{}",
        Value::Array(existing),
        Value::Array(facts.iter().map(|f| json!(f)).collect())
    );
    let reply = ask(llm, llm_config, UPDATE_PROMPT.to_string(), user)?;
    let Some(ops) = parse_operations(&reply) else {
        tracing::warn!(reply = %cut(&reply, 200), "memory extraction: the LLM's add/update/delete answer was not the expected JSON; ignored");
        return Ok(ExtractReport::default());
    };
    apply(memory, user_id, &shown, &ops).map_err(ExtractError::Store)
}

/// Apply the operations; ids refer to `shown` (short id → memory id).
/// An UPDATE of an unknown id becomes an ADD (no fact is lost); a DELETE
/// of an unknown id is ignored.
fn apply(
    memory: &Memory,
    user_id: &str,
    shown: &[(String, i64, String)],
    ops: &[MemoryOp],
) -> Result<ExtractReport> {
    let mut report = ExtractReport::default();
    let resolve = |id: &Option<String>| {
        id.as_ref()
            .and_then(|id| shown.iter().find(|(short, _, _)| short == id))
            .map(|(_, real, _)| *real)
    };
    for op in ops {
        match op.event {
            OpEvent::None => {}
            OpEvent::Add => {
                if !op.text.is_empty() && memory.remember_as_is(user_id, &op.text)?.created {
                    report.added += 1;
                }
            }
            OpEvent::Update => {
                if op.text.is_empty() {
                    continue;
                }
                match resolve(&op.id) {
                    Some(real) if memory.update(user_id, real, &op.text)?.is_some() => {
                        report.updated += 1
                    }
                    _ => {
                        if memory.remember_as_is(user_id, &op.text)?.created {
                            report.added += 1;
                        }
                    }
                }
            }
            OpEvent::Delete => {
                if let Some(real) = resolve(&op.id) {
                    if memory.delete(user_id, real)?.is_some() {
                        report.deleted += 1;
                    }
                }
            }
        }
    }
    Ok(report)
}

/// Why an extraction did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{0}")]
    Llm(#[from] LlmError),
    #[error("{0:#}")]
    Store(anyhow::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_parsed_leniently() {
        assert_eq!(
            parse_facts(r#"{"facts": ["Likes jazz"]}"#).unwrap(),
            vec!["Likes jazz"]
        );
        assert_eq!(
            parse_facts("Sure! ```json\n{\"facts\": [\"A\", {\"fact\": \"B\"}]}\n``` done")
                .unwrap(),
            vec!["A", "B"]
        );
        assert_eq!(parse_facts("Here: [\"x\", \"\", 3]").unwrap(), vec!["x"]);
        assert_eq!(
            parse_facts(r#"{"facts": []}"#).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(parse_facts("I could not find any facts."), None);
        assert_eq!(parse_facts(r#"{"facts": "nope"}"#), None);
        assert_eq!(parse_facts("{\"facts\": [\"unterminated"), None);
        let big = format!("{{\"facts\": [\"{}\"]}}", "y".repeat(50_000));
        assert_eq!(parse_facts(&big).unwrap()[0].len(), MAX_FACT_CHARS);
    }

    #[test]
    fn operations_are_parsed_leniently() {
        let ops = parse_operations(
            r#"{"memory": [{"id": 0, "text": "Meeting moved to Friday", "event": "update", "old_memory": "x"},
                           {"id": "1", "text": "", "event": "DELETE"},
                           {"id": "7", "text": "Likes tea", "event": "ADD"},
                           {"id": "2", "text": "x", "event": "MAYBE"},
                           "junk"]}"#,
        )
        .unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].event, OpEvent::Update);
        assert_eq!(ops[0].id.as_deref(), Some("0"));
        assert_eq!(ops[1].event, OpEvent::Delete);
        assert_eq!(ops[2].text, "Likes tea");
        assert!(parse_operations("no json here").is_none());
        assert!(parse_operations(r#"{"other": []}"#).is_none());
    }

    #[test]
    fn apply_supersedes_and_never_loses_a_fact() {
        let dir = tempfile::tempdir().unwrap();
        let m = super::super::testing::memory(dir.path());
        let old = m.add("user-1", "Meeting with Ana on Monday").unwrap();
        let gone = m.add("user-1", "Is vegetarian").unwrap();
        let shown = vec![
            ("0".to_string(), old.id, old.text.clone()),
            ("1".to_string(), gone.id, gone.text.clone()),
        ];
        let ops = vec![
            MemoryOp {
                id: Some("0".into()),
                text: "Meeting with Ana on Friday".into(),
                event: OpEvent::Update,
            },
            MemoryOp {
                id: Some("1".into()),
                text: String::new(),
                event: OpEvent::Delete,
            },
            MemoryOp {
                id: Some("9".into()),
                text: "Likes tea".into(),
                event: OpEvent::Update,
            },
            MemoryOp {
                id: Some("5".into()),
                text: String::new(),
                event: OpEvent::Delete,
            },
            MemoryOp {
                id: None,
                text: "Likes tea".into(),
                event: OpEvent::Add,
            },
        ];
        let report = apply(&m, "user-1", &shown, &ops).unwrap();
        assert_eq!(
            report,
            ExtractReport {
                added: 1,
                updated: 1,
                deleted: 1
            }
        );
        let texts: Vec<String> = m
            .list("user-1")
            .unwrap()
            .into_iter()
            .map(|i| i.text)
            .collect();
        assert_eq!(texts.len(), 2);
        assert!(texts.contains(&"Meeting with Ana on Friday".to_string()));
        assert!(texts.contains(&"Likes tea".to_string()));
        let updated = m
            .list("user-1")
            .unwrap()
            .into_iter()
            .find(|i| i.id == old.id)
            .unwrap();
        assert_eq!(updated.created_at, old.created_at);
    }
}
