//! One turn: conversation → history + recall → dispatch → cleaned answer →
//! saved atomically with its turn log → `done` (R-STORE, R-PIPE 4–8).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;

use super::cleanup;
use super::dispatcher;
use super::Services;
use crate::cancel::CancelToken;
use crate::events::{Done, Event, EventSink};
use crate::llm::ChatMessage;
use crate::store::SaveTurn;
use crate::telemetry::TurnRecord;

/// Longest user text a turn accepts (the rest is cut, with a note).
pub const MAX_INPUT_CHARS: usize = 8000;

/// What the user said and where it came from.
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    pub text: String,
    pub conversation_id: Option<i64>,
    /// text | voice | api | wyoming
    pub source: String,
    /// Stages measured before the turn (capture, vad, stt…), in ms.
    pub timings: BTreeMap<String, f64>,
    /// Facts about those stages for the turn log (e.g. the STT engine and
    /// path), stored under the turn log's `extra_json`.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl TurnInput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            source: "text".into(),
            ..Default::default()
        }
    }
}

/// The state a turn carries down to its nodes.
pub struct TurnContext<'a> {
    pub services: &'a Services,
    pub user_id: String,
    pub conversation_id: Option<i64>,
    /// The user's text (without the memory block).
    pub text: String,
    pub memory_block: Option<String>,
    /// The last turns of this conversation, oldest first.
    pub history: Vec<ChatMessage>,
    pub record: TurnRecord,
    pub cancel: CancelToken,
    pub started: Instant,
}

impl TurnContext<'_> {
    /// The user message sent to an LLM: memory block, then the text.
    pub fn user_message(&self) -> String {
        match &self.memory_block {
            Some(block) => format!("{block}\n\n{}", self.text),
            None => self.text.clone(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    pub conversation_id: Option<i64>,
    pub turn_id: Option<i64>,
    /// The stored (cleaned) answer, or the error sentence.
    pub response: String,
    pub ok: bool,
    pub route: Option<String>,
    pub intent: Option<String>,
}

/// Run one turn. Never panics on input; every failure becomes an `error`
/// event with a sentence, and nothing half-done is stored.
pub fn run_turn(
    services: &Services,
    input: TurnInput,
    sink: &mut dyn EventSink,
    cancel: &CancelToken,
) -> TurnOutcome {
    let started = Instant::now();
    let mut text = input.text.trim().to_string();
    let mut record = TurnRecord::new(
        if input.source.is_empty() {
            "text"
        } else {
            &input.source
        },
        &text,
    );
    record.timings.extend(input.timings.clone());
    record.extra.extend(input.extra.clone());
    if text.chars().count() > MAX_INPUT_CHARS {
        text = text.chars().take(MAX_INPUT_CHARS).collect();
        record.note(format!("input cut to {MAX_INPUT_CHARS} characters"));
    }
    let user_id = services.settings.user_id.clone();
    let fail = |record: &mut TurnRecord,
                sink: &mut dyn EventSink,
                conversation_id: Option<i64>,
                message: String| {
        record.outcome = if cancel.is_cancelled() {
            "cancelled"
        } else {
            "error"
        }
        .into();
        if record.error.is_none() {
            record.error = Some(message.clone());
        }
        record.set_ms("total", started.elapsed().as_secs_f64() * 1000.0);
        let turn_id = services
            .store
            .log_turn_only(conversation_id, &user_id, record)
            .map_err(|e| tracing::warn!(error = %e, "could not write the turn log"))
            .ok();
        sink.emit(&Event::Error {
            message: message.clone(),
        });
        TurnOutcome {
            conversation_id,
            turn_id,
            response: message,
            ok: false,
            route: record.route.clone(),
            intent: record.intent.clone(),
        }
    };
    if text.is_empty() {
        return fail(
            &mut record,
            sink,
            input.conversation_id,
            "I didn't catch anything to answer.".into(),
        );
    }

    // The conversation must exist when one is named.
    let history = match input.conversation_id {
        Some(id) => match services.store.conversation(id) {
            Ok(Some(_)) => {
                let max = services.settings.llm.history_turns * 2;
                match services.store.recent_messages(id, max) {
                    Ok(messages) => messages
                        .into_iter()
                        .map(|m| {
                            if m.role == "user" {
                                ChatMessage::user(m.content)
                            } else {
                                ChatMessage::assistant(m.content)
                            }
                        })
                        .collect(),
                    Err(e) => {
                        return fail(&mut record, sink, None, format!("I couldn't read this conversation: {e}"))
                    }
                }
            }
            Ok(None) => {
                return fail(
                    &mut record,
                    sink,
                    None,
                    format!("Conversation {id} does not exist; leave out --conversation to start a new one."),
                )
            }
            Err(e) => return fail(&mut record, sink, None, format!("I couldn't open the database: {e}")),
        },
        None => Vec::new(),
    };

    // Recall before routing; failures are logged and ignored (R-MEM).
    let recall_started = Instant::now();
    let memory_block =
        services
            .recall
            .as_ref()
            .and_then(|recall| match recall.recall_block(&user_id, &text) {
                Ok(block) => block,
                Err(e) => {
                    tracing::warn!(error = %e, "memory recall failed; continuing without memories");
                    None
                }
            });
    record.stage("recall", recall_started);

    let mut ctx = TurnContext {
        services,
        user_id: user_id.clone(),
        conversation_id: input.conversation_id,
        text: text.clone(),
        memory_block,
        history,
        record,
        cancel: cancel.clone(),
        started,
    };
    let answer = dispatcher::dispatch(&mut ctx, sink);
    let mut record = ctx.record;
    let answer = match answer {
        Ok(answer) => answer,
        Err(message) => return fail(&mut record, sink, input.conversation_id, message),
    };
    if cancel.is_cancelled() {
        return fail(
            &mut record,
            sink,
            input.conversation_id,
            "Okay, stopped.".into(),
        );
    }
    let response = cleanup::for_speech(&answer.text);
    let response = if response.is_empty() {
        "Sorry, I don't have an answer for that.".to_string()
    } else {
        response
    };
    record.response = Some(response.clone());
    record.model = Some(answer.model.clone());
    if record.route.is_none() {
        record.route = Some(answer.route.clone());
    }
    if answer.intent.is_some() {
        record.intent = answer.intent.clone();
    }
    record.set_ms("total", started.elapsed().as_secs_f64() * 1000.0);

    let jobs = after_turn_jobs(&user_id, &text, &response);
    let saved = services.store.save_turn(&SaveTurn {
        user_id: &user_id,
        conversation_id: input.conversation_id,
        user_text: &text,
        answer: &response,
        record: &record,
        jobs,
    });
    let (conversation_id, turn_id) = match saved {
        Ok(ids) => ids,
        Err(e) => {
            record.error = Some(e.to_string());
            return fail(
                &mut record,
                sink,
                input.conversation_id,
                format!("I answered but couldn't save it: {e}"),
            );
        }
    };
    if !answer.recommendations.is_empty() {
        sink.emit(&Event::Recommendation {
            items: answer.recommendations.clone(),
        });
    }
    sink.emit(&Event::Done(Done {
        latency_ms: started.elapsed().as_millis() as u64,
        model: answer.model.clone(),
        route: record.route.clone().unwrap_or_default(),
        intent: record.intent.clone(),
        actions: answer.actions.clone(),
        conversation_id,
        turn_id,
        response: response.clone(),
    }));
    TurnOutcome {
        conversation_id: Some(conversation_id),
        turn_id: Some(turn_id),
        response,
        ok: true,
        route: record.route,
        intent: record.intent,
    }
}

/// Background work after the reply, enqueued in the turn's transaction:
/// memory extraction for every exchange and the conversation summary (the
/// worker skips conversations under 2 turns). The store adds the
/// conversation id to each payload.
fn after_turn_jobs(user_id: &str, text: &str, answer: &str) -> Vec<(String, String)> {
    vec![
        (
            "extract_memory".to_string(),
            json!({"user_id": user_id, "user": text, "assistant": answer}).to_string(),
        ),
        (
            "summarize".to_string(),
            json!({"user_id": user_id}).to_string(),
        ),
    ]
}
