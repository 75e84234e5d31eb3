//! The context path's tool-calling agent (R-NODE context, R-TOOL).
//!
//! The OpenAI tool-calling loop: offer the configured tools, run every
//! `tool_calls` entry of a reply (several may come at once), answer each
//! with a `tool` message carrying its `tool_call_id`, and ask again — at
//! most [`MAX_ITERATIONS`] times, then a fixed friendly answer instead of
//! looping forever. Groq's transient `tool_use_failed` is retried; every
//! other failure becomes a sentence the user hears, never a crash. Each
//! call is announced (`thinking`) and recorded with its latency in the
//! turn log; what a call hands to the turn (a knowledge retrieval) goes on
//! the turn's record and is saved with it.

use std::time::{Duration, Instant};

use super::cleanup::StreamCleaner;
use super::dispatcher::DispatchError;
use super::nodes::{build_messages, NodeAnswer};
use super::prompts;
use super::turn::TurnContext;
use crate::events::{Event, EventSink};
use crate::llm::{ChatMessage, ChatRequest, ChatResponse, LlmError, ToolCall};
use crate::telemetry::ToolCallRecord;
use crate::tools::{ToolError, ToolRegistry};

/// Model requests per turn before giving up.
pub const MAX_ITERATIONS: usize = 10;
/// What is said when the model keeps calling tools.
pub const LIMIT_ANSWER: &str =
    "I hit my limit of steps for this request. Please try asking in a simpler way.";
/// Attempts for a request that fails with `tool_use_failed`.
pub const TOOL_USE_FAILED_ATTEMPTS: u32 = 3;
/// Pause between those attempts.
pub const TOOL_USE_FAILED_PAUSE: Duration = Duration::from_secs(1);
/// Longest tool result passed back to the model, in characters.
const MAX_RESULT_CHARS: usize = 4000;

/// The request the agent sends first for this turn (its messages as they
/// stand before any tool ran): `agent::predict` begins it before the turn.
pub fn first_request(ctx: &TurnContext<'_>) -> ChatRequest {
    let tools = &ctx.services.tools;
    agent_request(
        ctx,
        build_messages(prompts::agent(&tools.names()), ctx),
        tools.specs(),
    )
}

fn agent_request(
    ctx: &TurnContext<'_>,
    messages: Vec<ChatMessage>,
    specs: Vec<crate::llm::ToolSpec>,
) -> ChatRequest {
    let cfg = &ctx.services.settings.llm;
    ChatRequest {
        model: cfg.agent_model.clone(),
        messages,
        temperature: cfg.agent_temperature,
        max_completion_tokens: cfg.max_completion_tokens,
        top_p: cfg.top_p,
        tools: specs,
        stream: cfg.stream,
    }
}

/// Run the agent loop. Always `Some` now that the agent exists.
pub fn run(
    ctx: &mut TurnContext<'_>,
    sink: &mut dyn EventSink,
) -> Option<Result<NodeAnswer, DispatchError>> {
    Some(run_agent(ctx, sink))
}

fn run_agent(
    ctx: &mut TurnContext<'_>,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, DispatchError> {
    let services = ctx.services;
    let tools = services.tools.clone();
    let cfg = &services.settings.llm;
    ctx.record.node = Some("context".into());
    let mut messages = build_messages(prompts::agent(&tools.names()), ctx);
    let specs = tools.specs();
    let started = Instant::now();
    let mut cleaner = StreamCleaner::new();
    // Everything emitted as content, so the stored answer is what was said.
    let mut said = String::new();
    let mut model = String::new();

    for iteration in 0..MAX_ITERATIONS {
        let request = agent_request(ctx, messages.clone(), specs.clone());
        let response = chat_with_retry(ctx, &request, &mut |token| {
            let shown = cleaner.push(token);
            if !shown.is_empty() {
                said.push_str(&shown);
                sink.emit(&Event::Content { data: shown });
            }
        })
        .map_err(|e| {
            ctx.record.error = Some(e.to_string());
            ctx.record
                .note(format!("agent stopped at step {}", iteration + 1));
            failure(e)
        })?;
        if iteration == 0 {
            if let Some(ms) = response.first_token_ms {
                ctx.record.set_ms("first_token", ms);
            }
        }
        if !response.model.is_empty() {
            model = response.model.clone();
        }
        if response.tool_calls.is_empty() {
            ctx.record.stage("llm", started);
            return Ok(answer(said, model, &cfg.agent_model));
        }
        if !said.is_empty() && !said.ends_with(char::is_whitespace) {
            // Text said before a tool call is kept apart from what follows.
            said.push(' ');
            sink.emit(&Event::Content { data: " ".into() });
        }
        let calls = with_ids(response.tool_calls, iteration);
        let content = Some(response.content).filter(|c| !c.is_empty());
        messages.push(ChatMessage::assistant_tool_calls(content, calls.clone()));
        for call in &calls {
            if ctx.cancel.is_cancelled() {
                return Err(DispatchError::Cancelled);
            }
            let result = run_tool(ctx, &tools, call, sink);
            messages.push(ChatMessage::tool_result(call.id.clone(), result));
        }
    }
    ctx.record.stage("llm", started);
    ctx.record
        .note(format!("agent hit its limit of {MAX_ITERATIONS} steps"));
    if !said.is_empty() && !said.ends_with(char::is_whitespace) {
        said.push(' ');
        sink.emit(&Event::Content { data: " ".into() });
    }
    said.push_str(LIMIT_ANSWER);
    sink.emit(&Event::Content {
        data: LIMIT_ANSWER.into(),
    });
    Ok(answer(said, model, &cfg.agent_model))
}

fn answer(text: String, model: String, fallback_model: &str) -> NodeAnswer {
    NodeAnswer {
        text,
        model: if model.is_empty() {
            fallback_model.to_string()
        } else {
            model
        },
        route: "context".into(),
        ..Default::default()
    }
}

/// An agent failure: malformed tool calls past the retries are their own
/// kind (with their own sentence), anything else is the model's failure.
fn failure(e: LlmError) -> DispatchError {
    if e.is_tool_use_failed() {
        DispatchError::ToolUse(e)
    } else {
        DispatchError::Llm(e)
    }
}

/// One request, retrying `tool_use_failed` up to
/// [`TOOL_USE_FAILED_ATTEMPTS`] times, [`TOOL_USE_FAILED_PAUSE`] apart.
fn chat_with_retry(
    ctx: &mut TurnContext<'_>,
    request: &ChatRequest,
    on_token: &mut dyn FnMut(&str),
) -> Result<ChatResponse, LlmError> {
    let mut attempt = 1;
    loop {
        match ctx.services.llm.chat(request, on_token, &ctx.cancel) {
            Err(e) if e.is_tool_use_failed() && attempt < TOOL_USE_FAILED_ATTEMPTS => {
                tracing::warn!(
                    attempt,
                    "the model produced a malformed tool call; retrying"
                );
                ctx.record
                    .note(format!("tool_use_failed on attempt {attempt}; retried"));
                attempt += 1;
                let until = Instant::now() + TOOL_USE_FAILED_PAUSE;
                while Instant::now() < until {
                    if ctx.cancel.is_cancelled() {
                        return Err(LlmError::Cancelled);
                    }
                    std::thread::sleep(
                        Duration::from_millis(20)
                            .min(until.saturating_duration_since(Instant::now())),
                    );
                }
            }
            other => return other,
        }
    }
}

/// Calls without an id get one, so each `tool` message can answer its call.
fn with_ids(calls: Vec<ToolCall>, iteration: usize) -> Vec<ToolCall> {
    calls
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            if c.id.trim().is_empty() {
                c.id = format!("call_{iteration}_{i}");
            }
            c
        })
        .collect()
}

/// Run one call: announce it, time it, record it; the model always gets a
/// short string back.
fn run_tool(
    ctx: &mut TurnContext<'_>,
    tools: &ToolRegistry,
    call: &ToolCall,
    sink: &mut dyn EventSink,
) -> String {
    let name = if call.name.trim().is_empty() {
        "unnamed".to_string()
    } else {
        call.name.trim().to_string()
    };
    sink.emit(&Event::Thinking { tool: name.clone() });
    sink.emit(&Event::KeepAlive);
    let started = Instant::now();
    let result = if call.name.trim().is_empty() {
        Err(ToolError::BadArguments("the tool call has no name".into()))
    } else {
        tools.call_output_with_ticks(&name, &call.arguments, &mut || sink.emit(&Event::KeepAlive))
    };
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    ctx.record.tools.push(ToolCallRecord {
        name: name.clone(),
        ms,
        ok: result.is_ok(),
    });
    let text = match result {
        Ok(output) => {
            // Kept on this turn's record: saved with its id, never claimed
            // by another turn running at the same time.
            ctx.record.retrievals.extend(output.retrieval);
            // Issue 18: e.g. the link composio_connect made, for whoever
            // watches the turn (chat --json, the API's SSE stream).
            for (event, data) in output.published {
                sink.emit(&Event::Published {
                    event,
                    data,
                    conversation_id: ctx.conversation_id,
                });
            }
            output.text
        }
        Err(ToolError::Unavailable(sentence)) => sentence,
        Err(e) => {
            tracing::info!(tool = %name, error = %e, "tool call failed");
            let e = e.to_string();
            if e.starts_with("Error") {
                e
            } else {
                format!("Error: {e}")
            }
        }
    };
    clip(&text, MAX_RESULT_CHARS)
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::cancel::CancelToken;
    use crate::config::Config;
    use crate::events::CollectSink;
    use crate::llm::ChatModel;
    use crate::store::Store;
    use crate::telemetry::TurnRecord;

    /// Answers from a script; records every request.
    struct Scripted {
        replies: Mutex<Vec<Result<ChatResponse, LlmError>>>,
        seen: Mutex<Vec<ChatRequest>>,
    }

    impl ChatModel for Scripted {
        fn chat(
            &self,
            request: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            _cancel: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            self.seen.lock().unwrap().push(request.clone());
            let next = self.replies.lock().unwrap().remove(0);
            if let Ok(r) = &next {
                if !r.content.is_empty() {
                    on_token(&r.content);
                }
            }
            next
        }
    }

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn run_script(
        replies: Vec<Result<ChatResponse, LlmError>>,
        cancel: CancelToken,
    ) -> (
        Result<NodeAnswer, DispatchError>,
        CollectSink,
        TurnRecord,
        Arc<Scripted>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let llm = Arc::new(Scripted {
            replies: Mutex::new(replies),
            seen: Mutex::new(Vec::new()),
        });
        let services = crate::app::assemble(&Config::default(), store, llm.clone(), None, None);
        let mut ctx = TurnContext {
            services: &services,
            user_id: "user-1".into(),
            conversation_id: None,
            text: "what is 6 times 7".into(),
            memory_block: None,
            tag_rules: None,
            missing_conversation: None,
            history: Vec::new(),
            record: TurnRecord::new("text", "what is 6 times 7"),
            effects: Default::default(),
            cancel,
            started: Instant::now(),
        };
        let mut sink = CollectSink::default();
        let result = run(&mut ctx, &mut sink).unwrap();
        (result, sink, ctx.record, llm)
    }

    #[test]
    fn each_call_is_announced_kept_alive_and_recorded() {
        let (result, sink, record, llm) = run_script(
            vec![
                Ok(ChatResponse {
                    tool_calls: vec![call("", "calculator", r#"{"expression":"6*7"}"#)],
                    ..Default::default()
                }),
                Ok(ChatResponse {
                    content: "It is 42.".into(),
                    ..Default::default()
                }),
            ],
            CancelToken::new(),
        );
        assert_eq!(result.unwrap().text, "It is 42.");
        assert_eq!(
            &sink.events[..2],
            &[
                Event::Thinking {
                    tool: "calculator".into()
                },
                Event::KeepAlive
            ]
        );
        assert_eq!(record.tools.len(), 1);
        assert!(record.tools[0].ok);
        let seen = llm.seen.lock().unwrap();
        assert_eq!(seen[0].temperature, 0.0);
        assert_eq!(seen[0].model, Config::default().llm.agent_model);
        // A call without an id gets one, and its result answers that id.
        let last = seen[1].messages.last().unwrap();
        assert_eq!(last.tool_call_id.as_deref(), Some("call_0_0"));
        assert_eq!(last.content.as_deref(), Some("42"));
    }

    #[test]
    fn cancellation_stops_before_the_next_tool() {
        let cancel = CancelToken::new();
        cancel.cancel();
        let (result, sink, record, _) = run_script(
            vec![Ok(ChatResponse {
                tool_calls: vec![call("c1", "list_todos", "{}")],
                ..Default::default()
            })],
            cancel,
        );
        let err = result.unwrap_err();
        assert!(matches!(err, DispatchError::Cancelled), "{err:?}");
        assert_eq!(err.to_string(), "Okay, stopped.");
        assert!(sink.events.is_empty());
        assert!(record.tools.is_empty());
    }
}
