//! The mode dispatcher (R-TREE, seed 004's `ModeDispatchingChatAiResponder`):
//! per conversation, the intent tree or the router graph.
//!
//! Two fail-opens to the router graph, each logged with a warning and a
//! turn-log note: the mode cannot be resolved (the conversation is missing
//! or the database errs), or tree mode is asked for but the tree (or its
//! tree state) is unavailable. Shadow mode (`[tree] shadow`) records the
//! device classifier's intent + confidence on every turn in both modes.

use serde_json::{json, Value};

use super::nodes::{self, NodeAnswer};
use super::prompts;
use super::turn::TurnContext;
use crate::events::EventSink;
use crate::llm::LlmError;
use crate::nlu::router::Route;
use crate::tree::interpreter::{Host, HostError, LlmAnswer, WalkError, WalkInput};
use crate::tree::state::{self, Origin, TreeState};
use crate::tree::Engine;

/// Why the dispatcher (intent tree or router graph) produced no answer.
/// The turn fails with the message as its `error` sentence; the technical
/// error, where there is one, is already in the turn log (`error`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum DispatchError {
    /// The language model failed; the message is the sentence said for it
    /// ([`LlmError::user_sentence`]).
    #[error("{}", .0.user_sentence())]
    Llm(LlmError),
    /// The agent's model kept producing malformed tool calls (Groq's
    /// `tool_use_failed`) through every retry.
    #[error(
        "I had trouble using my tools for that request. Please try asking in a different way."
    )]
    ToolUse(LlmError),
    /// The turn was cancelled between tool calls (barge-in, "stop").
    #[error("Okay, stopped.")]
    Cancelled,
    /// The intent tree's walk stopped (a broken tree, the step bound, or
    /// its `llm_stream` host failed).
    #[error(transparent)]
    Tree(#[from] WalkError),
}

impl From<DispatchError> for HostError {
    /// The router graph answering an `llm_stream` node: a language-model
    /// failure stays one, anything else keeps its sentence.
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::Llm(e) => HostError::Llm(e),
            other => HostError::Failed(other.to_string()),
        }
    }
}

/// Why a conversation's mode could not be read; the turn notes it and
/// uses the router graph.
#[derive(Debug)]
pub enum UnreadMode {
    /// No conversation with that id.
    Missing,
    /// The store failed.
    Store(String),
    /// The stored name is no mode (the parse error).
    Unknown { mode: String, error: String },
}

/// A conversation's dispatch mode: its override, else the config
/// default. Shared by the turn and by the answer a pause predicts
/// (`agent::predict`), so both walk the same way.
pub fn conversation_mode(
    services: &super::Services,
    conversation_id: Option<i64>,
) -> Result<super::Mode, UnreadMode> {
    let default = services.settings.mode;
    let Some(id) = conversation_id else {
        return Ok(default);
    };
    match services.store.conversation(id) {
        Ok(Some(c)) => match c.mode {
            Some(mode) => mode
                .parse::<super::Mode>()
                .map_err(|e| UnreadMode::Unknown {
                    mode,
                    error: e.to_string(),
                }),
            None => Ok(default),
        },
        Ok(None) => Err(UnreadMode::Missing),
        Err(e) => Err(UnreadMode::Store(e.to_string())),
    }
}

/// The resolved mode of this turn: the conversation's override, else the
/// config default. An unresolvable mode falls back to `graph`.
pub fn resolve_mode(ctx: &mut TurnContext<'_>) -> &'static str {
    if ctx.missing_conversation.is_some() {
        // The turn already warned and noted it: a new conversation, graph.
        return "graph";
    }
    match conversation_mode(ctx.services, ctx.conversation_id) {
        Ok(mode) => mode.name(),
        Err(UnreadMode::Missing) => {
            tracing::warn!(
                conversation = ?ctx.conversation_id,
                "conversation not found; using the router graph"
            );
            ctx.record
                .note("mode could not be resolved for the conversation; using the router graph");
            "graph"
        }
        Err(UnreadMode::Store(e)) => {
            tracing::warn!(conversation = ?ctx.conversation_id, error = %e, "cannot resolve the mode; using the router graph");
            ctx.record.note(format!(
                "mode could not be resolved ({e}); using the router graph"
            ));
            "graph"
        }
        Err(UnreadMode::Unknown { mode, error }) => {
            tracing::warn!(mode = %mode, "unknown mode; using the router graph");
            ctx.record.note(format!("{error}; using the router graph"));
            "graph"
        }
    }
}

/// Answer the turn in the resolved mode.
pub fn dispatch(
    ctx: &mut TurnContext<'_>,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, DispatchError> {
    let mode = resolve_mode(ctx);
    ctx.record.mode = Some(mode.into());
    let answer = match (mode, ctx.services.tree.clone()) {
        ("tree", Some(engine)) => run_tree(ctx, &engine, sink),
        ("tree", None) => {
            let why = ctx
                .services
                .tree_error
                .clone()
                .unwrap_or_else(|| "it was not built".into());
            tracing::warn!("tree mode requested but the intent tree is unavailable ({why}); using the router graph");
            ctx.record.note(format!(
                "tree mode requested but the intent tree is unavailable ({why}); used the router graph"
            ));
            graph(ctx, sink)
        }
        _ => graph(ctx, sink),
    };
    shadow(ctx);
    if let Ok(a) = &answer {
        remember_last_answer(ctx, a);
    }
    answer
}

/// The router graph: decide the route, run its node.
pub fn graph(
    ctx: &mut TurnContext<'_>,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, DispatchError> {
    let decision = ctx.services.router.decide(&ctx.text, &ctx.cancel);
    ctx.record.set_ms("route", decision.elapsed_ms);
    ctx.record.route = Some(decision.route.as_str().into());
    ctx.record.route_by = Some(
        serde_json::to_value(decision.by)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    );
    ctx.record.confidence = decision.confidence;
    if let Some(note) = &decision.note {
        ctx.record.note(note.clone());
    }
    ctx.record.node = Some(decision.route.as_str().into());
    nodes::run(ctx, decision.route, sink)
}

/// The system prompt of an `llm_stream` node's `prompt` other than
/// `router` (which the router graph answers): a named one or the literal.
pub fn llm_stream_system(prompt: &str) -> String {
    match prompt {
        "simple" => prompts::simple(),
        "persona" => prompts::persona(),
        literal => literal.to_string(),
    }
}

/// How `llm_stream` nodes reach a language model during a turn.
struct TurnHost<'a, 'b> {
    ctx: &'a mut TurnContext<'b>,
}

impl Host for TurnHost<'_, '_> {
    fn llm_stream(
        &mut self,
        prompt: &str,
        tags: bool,
        sink: &mut dyn EventSink,
    ) -> Result<LlmAnswer, HostError> {
        // The tree applies this answer's tags: its prompt says which exist.
        self.ctx.tag_rules = tags.then(crate::tree::tags::prompt_rules);
        let answer = self.answer(prompt, sink);
        self.ctx.tag_rules = None;
        answer
    }
}

impl TurnHost<'_, '_> {
    fn answer(&mut self, prompt: &str, sink: &mut dyn EventSink) -> Result<LlmAnswer, HostError> {
        let to_answer = |a: NodeAnswer| LlmAnswer {
            text: a.text,
            model: a.model,
            route: a.route,
        };
        let failed = |ctx: &mut TurnContext<'_>, e: LlmError| {
            ctx.record.error = Some(e.to_string());
            HostError::Llm(e)
        };
        if prompt == "router" {
            return graph(self.ctx, sink)
                .map(to_answer)
                .map_err(HostError::from);
        }
        let system = llm_stream_system(prompt);
        let route = if prompt == "persona" {
            Route::Persona
        } else {
            Route::Simple
        };
        self.ctx.record.node = Some("llm_stream".into());
        match nodes::main_llm(self.ctx, system, route, sink) {
            Ok(a) => Ok(LlmAnswer {
                route: "tree".into(),
                ..to_answer(a)
            }),
            Err(e) => Err(failed(self.ctx, e)),
        }
    }
}

/// Run the tree for this turn: load the conversation's tree state, walk,
/// record what happened, hand the new state to the turn.
///
/// Persistence: nothing is written here. The new tree state and the device
/// settings the walk changed go into the turn's effects, which the turn's
/// save writes in its transaction (a new conversation's state under the id
/// that save creates); a turn that is not saved changes neither. The state
/// is also recorded in the turn log (`extra.tree_state`) for traces.
pub fn run_tree(
    ctx: &mut TurnContext<'_>,
    engine: &Engine,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, DispatchError> {
    let (loaded, origin) = match state::load(&ctx.services.store, ctx.conversation_id) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the tree state; using the router graph");
            ctx.record.note(format!(
                "the tree state could not be read ({e}); used the router graph"
            ));
            return graph(ctx, sink);
        }
    };
    let started = std::time::Instant::now();
    let input = WalkInput {
        text: ctx.text.clone(),
        conversation_id: ctx.conversation_id,
        phase: loaded.phase.clone(),
        state: loaded.state.clone(),
        dry_run: false,
        preview: false,
    };
    let result = {
        let mut host = TurnHost { ctx: &mut *ctx };
        engine.run(input, &mut host, sink)
    };
    ctx.record.stage("tree", started);
    ctx.record.extra.insert(
        "tree".into(),
        json!({"version": engine.tree().version, "source": engine.label()}),
    );
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            ctx.record.notes.extend(e.notes.iter().cloned());
            ctx.record.extra.insert("tree_path".into(), json!(e.path));
            return Err(DispatchError::Tree(e));
        }
    };
    ctx.record.notes.extend(outcome.notes.iter().cloned());
    ctx.record
        .extra
        .insert("tree_path".into(), json!(outcome.path));
    // A tree action that failed and let the walk go on (to the router
    // graph, usually) is not the answer: the turn log keeps it here, not
    // in `actions`.
    if !outcome.fell_through.is_empty() {
        ctx.record
            .extra
            .insert("tree_fell_through".into(), json!(outcome.fell_through));
    }
    if !outcome.events.is_empty() {
        ctx.record.extra.insert(
            "tree_events".into(),
            serde_json::to_value(&outcome.events).unwrap_or(Value::Null),
        );
    }
    if let Some(c) = &outcome.classification {
        if c.accepted || ctx.services.settings.shadow {
            ctx.record.intent = Some(c.intent.clone());
            ctx.record.intent_confidence = Some(c.confidence);
        }
    }
    let new_state = TreeState {
        phase: outcome.phase.clone(),
        state: outcome.state.clone(),
    };
    ctx.record.extra.insert(
        "tree_state".into(),
        serde_json::to_value(&new_state).unwrap_or(Value::Null),
    );
    if new_state != loaded || origin == Origin::TurnLog {
        ctx.effects.tree_state = Some(new_state);
    }
    ctx.effects
        .device_state
        .extend(outcome.device_state.clone());
    // The accepted classification names the intent first.
    let mut intent = outcome
        .classification
        .as_ref()
        .filter(|c| c.accepted)
        .map(|c| c.intent.clone());
    // Else a frame decided (the gate's rule), or a rule (condition) led to
    // a device action without classifying: that names the intent.
    if intent.is_none() {
        let by_rule = outcome.rule_intent.as_ref().or(outcome
            .llm
            .is_none()
            .then(|| outcome.actions.last())
            .flatten());
        if let Some(action) = by_rule {
            intent = Some(action.clone());
            ctx.record.intent = Some(action.clone());
            ctx.record.intent_confidence = None;
            ctx.record
                .extra
                .insert("intent_by".into(), Value::String("rule".into()));
        }
    }
    match &outcome.llm {
        Some(llm) => {
            // The router graph already set route, route_by and node.
            if ctx.record.route.is_none() {
                ctx.record.route = Some(llm.route.clone());
            }
        }
        None => {
            ctx.record.route = Some("tree".into());
            ctx.record.route_by = Some("tree".into());
            ctx.record.node = outcome.answered_by.clone();
        }
    }
    Ok(NodeAnswer {
        text: outcome.answer,
        model: outcome
            .llm
            .as_ref()
            .map(|l| l.model.clone())
            .unwrap_or_else(|| "device".into()),
        route: outcome
            .llm
            .as_ref()
            .map(|l| l.route.clone())
            .unwrap_or_else(|| "tree".into()),
        intent,
        actions: outcome.actions,
        recommendations: outcome.recommendations,
    })
}

/// Shadow mode: the device intent and its confidence for every turn,
/// whichever engine answered (R-KNN).
fn shadow(ctx: &mut TurnContext<'_>) {
    if !ctx.services.settings.shadow || ctx.record.intent.is_some() {
        return;
    }
    let Some(engine) = &ctx.services.tree else {
        return;
    };
    if let Some((intent, confidence)) = engine.shadow_classify(&ctx.text) {
        ctx.record.intent = Some(intent);
        ctx.record.intent_confidence = Some(confidence);
        ctx.record
            .extra
            .insert("intent_shadow".into(), Value::Bool(true));
    }
}

/// Keep the answer for "repeat that" (device-wide: the voice loop has one
/// speaker), saved with the turn: the save points the device at the
/// answer's message, so the answer is stored once.
fn remember_last_answer(ctx: &mut TurnContext<'_>, answer: &NodeAnswer) {
    if super::cleanup::for_speech(&answer.text).is_empty() {
        return;
    }
    ctx.effects.answer_is_last = true;
}
