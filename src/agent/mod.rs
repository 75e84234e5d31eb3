//! The turn: from a user's text to a stored, spoken answer.
//!
//! [`Services`] is everything built once at start by the composition root
//! ([`crate::app`]: store, LLM client, classifier, tools, memory); [`turn::run_turn`] runs one turn over them
//! and reports through the R-SSE [`crate::events::Event`] stream. Every
//! front door (CLI, voice loop, HTTP, Wyoming) calls `run_turn`.

/// Speech cleanup lives with speech (`tts`); the turn uses it too.
pub use crate::tts::cleanup;
pub mod dispatcher;
pub mod nodes;
pub mod predict;
pub mod prompts;
pub mod tool_loop;
pub mod turn;

use std::sync::Arc;

use crate::llm::{ChatModel, LlmConfig};
use crate::memory::Recall;
use crate::nlu::router::Router;
use crate::nlu::{Classifier, Embedder};
use crate::store::Store;
use crate::tools::ToolRegistry;

crate::choice! {
    /// How a turn is dispatched (`mode`, and a conversation's override).
    pub enum Mode("mode") {
        Tree = "tree": "the intent tree first, the router graph as its fallback",
        Graph = "graph": "the router graph only (keywords, classifier, LLM)",
    }
}

/// The settings a turn reads, taken from their sections by the
/// composition root ([`crate::app`]): the turn never sees the whole config.
#[derive(Debug, Clone)]
pub struct TurnSettings {
    /// Whose turn it is (`user_id`).
    pub user_id: String,
    /// The default dispatch mode (`mode`).
    pub mode: Mode,
    /// The chat endpoint, models and history length (`[llm]`).
    pub llm: LlmConfig,
    /// Shadow classification on every turn (`tree.shadow`).
    pub shadow: bool,
}

/// Everything a turn needs, built once by [`crate::app`] (the composition
/// root) in one pass.
#[derive(Clone)]
pub struct Services {
    pub settings: Arc<TurnSettings>,
    pub store: Store,
    /// The device's model, through [`Services::speculation`]: a turn's
    /// request that was begun early is adopted, any other is sent.
    pub llm: Arc<dyn ChatModel>,
    /// Begins a turn's LLM request before the turn (issue 21); the same
    /// object as `llm`.
    pub speculation: Arc<crate::llm::speculate::Speculative>,
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The route classifier (simple/context/persona) on device.
    pub route_classifier: Option<Arc<dyn Classifier>>,
    pub router: Arc<Router>,
    pub tools: Arc<ToolRegistry>,
    pub recall: Option<Arc<dyn Recall>>,
    /// Long-term memory and the conversation index (R-MEM, R-VEC): list /
    /// remember / forget for the intent tree, the background worker's
    /// target. `None` when disabled or the database could not host it.
    pub memory: Option<Arc<crate::memory::Memory>>,
    /// The intent tree (R-TREE), built once; `None` when it could not be
    /// built — the dispatcher then uses the router graph (`tree_error` says why).
    pub tree: Option<Arc<crate::tree::Engine>>,
    pub tree_error: Option<String>,
    /// The calendar (SQLite, synced over CalDAV when configured).
    pub calendar: crate::calendar::Calendar,
    /// Timers, alarms and reminders: the one service the tools, the tree,
    /// the API and the device's scheduler share.
    pub timers: crate::timers::Timers,
    /// Issue 22: the speakers of other rooms announcements reach (the
    /// ESPHome devices register while connected); the tree and the
    /// `announce` tool send into it.
    pub announcements: crate::device::announce::Announcements,
    /// The wall clock every LLM prompt states the time from (its "Now:"
    /// line); the system clock, pinned by tests.
    pub clock: WallClock,
}

/// A source of the current wall-clock time (UTC; the prompt converts it
/// to the device's local zone).
pub type WallClock = Arc<dyn Fn() -> chrono::DateTime<chrono::Utc> + Send + Sync>;

/// The system's wall clock.
pub fn system_clock() -> WallClock {
    Arc::new(chrono::Utc::now)
}

/// The background worker's view of the services.
impl crate::memory::WorkerParts for Services {
    fn memory(&self) -> Option<Arc<crate::memory::Memory>> {
        self.memory.clone()
    }
    fn llm(&self) -> Arc<dyn ChatModel> {
        self.llm.clone()
    }
    fn llm_config(&self) -> LlmConfig {
        self.settings.llm.clone()
    }
}

/// Why a conversation's mode could not be set.
#[derive(Debug, thiserror::Error)]
pub enum ModeError {
    #[error("conversation {0} does not exist; `earshot history` lists them")]
    NoSuchConversation(i64),
    #[error("could not store the mode: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// Set how a conversation's turns are dispatched (seed 004's per-conversation
/// mode; `None` goes back to the configured default). With no conversation
/// a new one is made for `user_id`, so its first turn already runs in that
/// mode. Returns the conversation's id. Used by `earshot chat --mode` and
/// `PATCH /api/conversations/ID`.
pub fn set_mode(
    store: &Store,
    user_id: &str,
    conversation: Option<i64>,
    mode: Option<Mode>,
) -> Result<i64, ModeError> {
    let id = match conversation {
        Some(id) => id,
        None => store.create_conversation(user_id)?,
    };
    if store.set_conversation_mode(id, mode.map(|m| m.name()))? == 0 {
        return Err(ModeError::NoSuchConversation(id));
    }
    Ok(id)
}
