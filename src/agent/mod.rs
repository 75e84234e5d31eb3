//! The turn: from a user's text to a stored, spoken answer.
//!
//! [`Services`] is everything built once at start (store, LLM client,
//! classifier, tools, memory); [`turn::run_turn`] runs one turn over them
//! and reports through the R-SSE [`crate::events::Event`] stream. Every
//! front door (CLI, voice loop, HTTP, Wyoming) calls `run_turn`.

pub mod cleanup;
pub mod dispatcher;
pub mod nodes;
pub mod prompts;
pub mod tool_loop;
pub mod turn;

use std::sync::Arc;

use anyhow::Result;

use crate::config::Config;
use crate::llm::openai::OpenAiClient;
use crate::llm::ChatModel;
use crate::memory::Recall;
use crate::nlu::router::Router;
use crate::nlu::{Classifier, Embedder};
use crate::store::Store;
use crate::tools::ToolRegistry;

/// Everything a turn needs, built once.
#[derive(Clone)]
pub struct Services {
    pub config: Arc<Config>,
    pub store: Store,
    pub llm: Arc<dyn ChatModel>,
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
}

impl Services {
    /// Build from config: open the database, the LLM client and whatever
    /// on-device parts are available. Missing optional parts are logged and
    /// left out; only the database is required.
    pub fn build(config: Config) -> Result<Services> {
        let store = Store::open(&config.database_path())?;
        let llm: Arc<dyn ChatModel> = Arc::new(OpenAiClient::new(&config.llm));
        // On-device understanding is optional: without ONNX Runtime or the
        // model the router asks the LLM instead (logged once here).
        let embedder = match crate::nlu::load_embedder(&config) {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::warn!("on-device embedder unavailable, routing by LLM: {e:#}");
                None
            }
        };
        let route_classifier = embedder.as_ref().and_then(|e| {
            crate::nlu::routes::route_classifier(&config, e.clone())
                .map_err(|err| tracing::warn!("route classifier unavailable: {err:#}"))
                .ok()
        });
        let mut services = Self::assemble(config, store, llm, embedder, route_classifier);
        services.attach_memory();
        crate::knowledge::tool::attach(&mut services);
        services.attach_tree();
        Ok(services)
    }

    /// Build the intent tree over these services (its classifiers use the
    /// embedder). A failure is logged and leaves `tree` empty: tree mode
    /// then falls back to the router graph (seed 004's second fail-open).
    pub fn attach_tree(&mut self) {
        match crate::tree::engine::for_services(self) {
            Ok(engine) => {
                self.tree = Some(Arc::new(engine));
                self.tree_error = None;
            }
            Err(e) => {
                tracing::warn!("intent tree unavailable, using the router graph: {e}");
                self.tree = None;
                self.tree_error = Some(e.to_string());
            }
        }
    }

    /// Wire the parts together (tests pass their own LLM).
    pub fn assemble(
        config: Config,
        store: Store,
        llm: Arc<dyn ChatModel>,
        embedder: Option<Arc<dyn Embedder>>,
        route_classifier: Option<Arc<dyn Classifier>>,
    ) -> Services {
        let router_llm = config
            .router
            .llm_fallback
            .then(|| (llm.clone(), config.llm.model.clone()));
        let router = Router::new(
            &config.router.extra_keywords,
            route_classifier.clone(),
            config.router.classifier_threshold,
            router_llm,
        );
        // Built once here; `set_conversation_search` rebuilds it when the
        // memory module supplies its index.
        let tools = crate::tools::build_registry(&config, &store, None);
        Services {
            config: Arc::new(config),
            store,
            llm,
            embedder,
            route_classifier,
            router: Arc::new(router),
            tools: Arc::new(tools),
            recall: None,
            memory: None,
            tree: None,
            tree_error: Some("the intent tree was not built (Services::attach_tree)".into()),
        }
    }

    /// Open long-term memory over the store and the embedder; recall and
    /// `search_conversations` are wired when the embedder is present.
    /// Failures are logged: turns go on without memory (R-MEM).
    pub fn attach_memory(&mut self) {
        if !self.config.memory.enabled {
            return;
        }
        match crate::memory::Memory::open(
            self.store.clone(),
            self.embedder.clone(),
            self.config.memory.clone(),
        ) {
            Ok(memory) => {
                let memory = Arc::new(memory);
                if self.embedder.is_some() {
                    self.recall = Some(memory.clone());
                    self.set_conversation_search(memory.clone());
                }
                self.memory = Some(memory);
            }
            Err(e) => tracing::warn!("long-term memory unavailable: {e:#}"),
        }
    }

    /// Supply the conversation index (the memory module's vector search)
    /// and rebuild the tool set so `search_conversations` is offered.
    pub fn set_conversation_search(
        &mut self,
        search: Arc<dyn crate::tools::search_conversations::ConversationSearch>,
    ) {
        self.tools = Arc::new(crate::tools::build_registry(
            &self.config,
            &self.store,
            Some(search),
        ));
    }
}
