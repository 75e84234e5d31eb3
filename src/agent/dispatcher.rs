//! The mode dispatcher (R-TREE): per conversation, the intent tree or the
//! router graph. Fails open to the graph.

use super::nodes::{self, NodeAnswer};
use super::turn::TurnContext;
use crate::events::EventSink;

/// The resolved mode of this turn: the conversation's override, else the
/// config default. An unresolvable mode falls back to `graph`.
pub fn resolve_mode(ctx: &mut TurnContext<'_>) -> &'static str {
    let default = ctx.services.config.mode.as_str();
    let mode = match ctx.conversation_id {
        Some(id) => match ctx.services.store.conversation(id) {
            Ok(Some(c)) => c.mode.unwrap_or_else(|| default.to_string()),
            Ok(None) | Err(_) => {
                ctx.record.note(
                    "mode could not be resolved for the conversation; using the router graph",
                );
                "graph".into()
            }
        },
        None => default.to_string(),
    };
    if mode == "tree" {
        "tree"
    } else {
        "graph"
    }
}

/// Answer the turn in the resolved mode.
pub fn dispatch(ctx: &mut TurnContext<'_>, sink: &mut dyn EventSink) -> Result<NodeAnswer, String> {
    let mode = resolve_mode(ctx);
    ctx.record.mode = Some(mode.into());
    if mode == "tree" {
        tracing::debug!("tree mode requested but no tree is built yet; using the router graph");
        ctx.record.note(
            "tree mode requested but the intent tree is not available; used the router graph",
        );
    }
    graph(ctx, sink)
}

/// The router graph: decide the route, run its node.
pub fn graph(ctx: &mut TurnContext<'_>, sink: &mut dyn EventSink) -> Result<NodeAnswer, String> {
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
