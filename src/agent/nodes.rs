//! The router graph's nodes: simple, persona, context (R-NODE).

use std::time::Instant;

use super::cleanup::StreamCleaner;
use super::dispatcher::DispatchError;
use super::prompts;
use super::turn::TurnContext;
use crate::events::{Event, EventSink};
use crate::llm::{ChatMessage, ChatRequest, LlmError};
use crate::nlu::router::Route;

/// What a node produced.
#[derive(Debug, Clone, Default)]
pub struct NodeAnswer {
    /// The raw answer (cleaned for speech by the turn).
    pub text: String,
    pub model: String,
    pub route: String,
    pub intent: Option<String>,
    pub actions: Vec<String>,
    pub recommendations: Vec<String>,
}

/// Messages for a main-LLM node: system (its fixed instructions, then the
/// local date and time as its last line, so the fixed part stays a
/// cacheable prefix), history in order, user (memory block + text).
pub fn build_messages(system: String, ctx: &TurnContext<'_>) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(ctx.history.len() + 2);
    let now = crate::device::clock::local((ctx.services.clock)());
    let system = match &ctx.tag_rules {
        Some(rules) => format!("{}\n{rules}", system.trim_end()),
        None => system,
    };
    messages.push(ChatMessage::system(prompts::with_now(
        system,
        &crate::device::clock::now_line(&now),
    )));
    messages.extend(ctx.history.iter().cloned());
    messages.push(ChatMessage::user(ctx.user_message()));
    messages
}

/// Stream an answer from the main LLM with the given system prompt.
pub fn main_llm(
    ctx: &mut TurnContext<'_>,
    system: String,
    route: Route,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, LlmError> {
    let cfg = &ctx.services.settings.llm;
    let request = ChatRequest {
        model: cfg.model.clone(),
        messages: build_messages(system, ctx),
        temperature: cfg.temperature,
        max_completion_tokens: cfg.max_completion_tokens,
        top_p: cfg.top_p,
        tools: Vec::new(),
        stream: cfg.stream,
    };
    let started = Instant::now();
    let mut cleaner = StreamCleaner::new();
    let response = ctx.services.llm.chat(
        &request,
        &mut |token| {
            let shown = cleaner.push(token);
            if !shown.is_empty() {
                sink.emit(&Event::Content { data: shown });
            }
        },
        &ctx.cancel,
    )?;
    if let Some(ms) = response.first_token_ms {
        ctx.record.set_ms("first_token", ms);
    }
    ctx.record.stage("llm", started);
    Ok(NodeAnswer {
        text: response.content,
        model: if response.model.is_empty() {
            request.model
        } else {
            response.model
        },
        route: route.as_str().into(),
        ..Default::default()
    })
}

/// Run the node for a route.
pub fn run(
    ctx: &mut TurnContext<'_>,
    route: Route,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, DispatchError> {
    match route {
        Route::Simple => {
            main_llm(ctx, prompts::simple(), route, sink).map_err(|e| sentence(&mut ctx.record, e))
        }
        Route::Persona => {
            main_llm(ctx, prompts::persona(), route, sink).map_err(|e| sentence(&mut ctx.record, e))
        }
        Route::Context => match super::tool_loop::run(ctx, sink) {
            Some(result) => result,
            None => {
                ctx.record
                    .note("context route answered by the simple node: no agent on this build");
                ctx.record.node = Some("simple".into());
                main_llm(ctx, prompts::simple(), route, sink)
                    .map_err(|e| sentence(&mut ctx.record, e))
            }
        },
    }
}

/// Keep the technical error in the turn log; the error says the sentence.
fn sentence(record: &mut crate::telemetry::TurnRecord, e: LlmError) -> DispatchError {
    record.error = Some(e.to_string());
    DispatchError::Llm(e)
}
