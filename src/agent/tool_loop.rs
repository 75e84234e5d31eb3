//! The context path's tool-calling agent (R-NODE context, R-TOOL).
//!
//! Until the agent lands, `run` returns `None` and the context route is
//! answered by the simple node (the turn log says so).

use super::nodes::NodeAnswer;
use super::turn::TurnContext;
use crate::events::EventSink;

/// Run the agent loop; `None` when no agent is available on this build.
pub fn run(
    _ctx: &mut TurnContext<'_>,
    _sink: &mut dyn EventSink,
) -> Option<Result<NodeAnswer, String>> {
    None
}
