//! The composition root: every service of the device built once, in one
//! pass, from the config. Each part gets its own config section plus the
//! shared [`Paths`]; nothing below this module sees the whole
//! [`Config`]. Every front door (`run`, `serve`, `wyoming serve`, `chat`,
//! `tree run`, `doctor`) and the tests build their services here.
//!
//! Order matters only where a part needs another: the store first, then
//! the LLM client and the on-device embedder, then memory (it supplies
//! recall and the conversation index), the one to-do backend (shared by
//! the agent's tools and the intent tree), the tool set (with the
//! knowledge tool), and last the intent tree over all of them.

pub mod backends;
pub mod device;
pub mod doctor;

use std::sync::Arc;

use anyhow::Result;

use crate::agent::{Services, TurnSettings};
use crate::config::Config;
use crate::llm::failover::{Failover, Member};
use crate::llm::local::LocalModel;
use crate::llm::openai::OpenAiClient;
use crate::llm::{ChatModel, LlmConfig, Source};
use crate::memory::{Memory, Recall};
use crate::nlu::router::Router;
use crate::nlu::{Classifier, Embedder};
use crate::paths::Paths;
use crate::store::Store;
use crate::tools::search_conversations::ConversationSearch;
use crate::tree::actions::memory::MemoryOps;
use crate::tree::actions::ActionEnv;

/// Build every service from config: open the database, the LLM client and
/// whatever on-device parts are available. Missing optional parts are
/// logged and left out; only the database is required.
pub fn build(config: &Config) -> Result<Services> {
    let paths = config.paths();
    let store = Store::open(&paths.database_path())?;
    let llm = build_llm(&config.llm, &paths).model;
    // On-device understanding is optional: without ONNX Runtime or the
    // model the router asks the LLM instead (logged once here).
    let embedder = match crate::nlu::load_embedder(&config.nlu, &paths) {
        Ok(e) => Some(e),
        Err(e) => {
            tracing::warn!("on-device embedder unavailable, routing by LLM: {e:#}");
            None
        }
    };
    let route_classifier = embedder.as_ref().and_then(|e| {
        crate::nlu::routes::route_classifier(&config.nlu, &config.router, &paths, e.clone())
            .map_err(|err| tracing::warn!("route classifier unavailable: {err:#}"))
            .ok()
    });
    Ok(assemble(config, store, llm, embedder, route_classifier))
}

/// The language models of `[llm] order` (issue 20), built once.
pub struct Llms {
    /// What the turn, the router and the memory worker ask.
    pub model: Arc<dyn ChatModel>,
    /// The chain itself (doctor: which member answers).
    pub chain: Arc<Failover>,
    /// The on-device model when `local` is in the order (bench: its pid and
    /// memory).
    pub local: Option<Arc<LocalModel>>,
}

/// Build the models of `llm.order`: the remote client, the on-device model
/// (its load starts in the background when its files are there, so start-up
/// never waits for it), chained in order.
pub fn build_llm(cfg: &LlmConfig, paths: &Paths) -> Llms {
    let mut members = Vec::new();
    let mut local = None;
    for source in &cfg.order {
        match source {
            Source::Remote => members.push(Member {
                source: *source,
                model: Arc::new(OpenAiClient::new(cfg)),
            }),
            Source::Local => {
                let model = LocalModel::new(&cfg.local, paths);
                model.start_in_background();
                local = Some(model.clone());
                members.push(Member {
                    source: *source,
                    model,
                });
            }
        }
    }
    let chain = Arc::new(Failover::new(members, crate::agent::prompts::no_tools()));
    Llms {
        model: chain.clone(),
        chain,
        local,
    }
}

/// Wire the parts together over a given store, LLM and embedder (tests
/// pass their own LLM): memory, the to-do backend, the tools, the
/// knowledge tool and the intent tree, each built once.
pub fn assemble(
    config: &Config,
    store: Store,
    llm: Arc<dyn ChatModel>,
    embedder: Option<Arc<dyn Embedder>>,
    route_classifier: Option<Arc<dyn Classifier>>,
) -> Services {
    let paths = config.paths();
    let user_id = config.user_id.as_str();
    // Issue 20: with only the on-device model every route answers the same
    // way (no tools), so asking it to route would cost a model call for
    // nothing: the router then defaults to `simple` when unsure.
    let router_llm = (config.router.llm_fallback && llm.can_use_tools())
        .then(|| (llm.clone(), config.llm.model.clone()));
    let router = Router::new(
        &config.router.extra_keywords,
        route_classifier.clone(),
        config.router.classifier_threshold,
        router_llm,
    );
    let memory = open_memory(config, &store, embedder.clone());
    // Recall and the conversation index need the embedder.
    let indexed = memory.clone().filter(|_| embedder.is_some());
    let recall = indexed.clone().map(|m| m as Arc<dyn Recall>);
    let conversations = indexed.map(|m| m as Arc<dyn ConversationSearch>);
    let todos = crate::tools::todo_backend(&config.tools, user_id, &store);
    let timers = crate::timers::Timers::new(&config.timers, &paths, store.clone());
    let calendar = crate::calendar::Calendar::new(&config.calendar, store.clone());
    let announcements = crate::device::announce::Announcements::default();
    let mut tools =
        crate::tools::build_registry(&config.tools, user_id, todos.clone(), conversations);
    crate::tools::timers::offer(&mut tools, &config.tools, &timers);
    crate::tools::calendar::offer(&mut tools, &config.tools, &calendar);
    crate::tools::email::offer(&mut tools, &config.tools, &config.email);
    crate::tools::announce::offer(&mut tools, &config.tools, &announcements);
    crate::tools::composio::offer(&mut tools, &config.tools, &config.composio, user_id, &store);
    crate::knowledge::tool::offer(
        &mut tools,
        knowledge_settings(config, &paths),
        &store,
        embedder.clone(),
        llm.clone(),
    );
    let env = ActionEnv {
        store: store.clone(),
        user_id: user_id.to_string(),
        todos,
        memory: memory.clone().map(|m| m as Arc<dyn MemoryOps>),
        timers: Some(timers.clone()),
        calendar: calendar.clone(),
        mail: crate::tools::email::Mailbox::new(&config.email),
        announcements: announcements.clone(),
        mail_by_tree: !llm.can_use_tools(),
    };
    // The turn's model, able to adopt a request begun before the turn.
    let speculation = Arc::new(crate::llm::speculate::Speculative::new(llm.clone()));
    let (tree, tree_error) = match build_tree(config, &paths, env, embedder.as_ref()) {
        Ok(engine) => (Some(Arc::new(engine)), None),
        Err(e) => {
            tracing::warn!("intent tree unavailable, using the router graph: {e}");
            (None, Some(e.to_string()))
        }
    };
    Services {
        settings: Arc::new(TurnSettings {
            user_id: config.user_id.clone(),
            mode: config.mode,
            llm: config.llm.clone(),
            shadow: config.tree.shadow,
        }),
        store,
        llm: speculation.clone(),
        speculation,
        embedder,
        route_classifier,
        router: Arc::new(router),
        tools: Arc::new(tools),
        recall,
        memory,
        tree,
        tree_error,
        calendar,
        clock: crate::agent::system_clock(),
        timers,
        announcements,
    }
}

/// The timers service alone, over the configured database (`earshot
/// timers`: no models needed). The device's services carry the same
/// service, built in [`assemble`].
pub fn timers(config: &Config) -> Result<crate::timers::Timers> {
    let store = Store::open(&config.database_path())?;
    Ok(crate::timers::Timers::new(
        &config.timers,
        &config.paths(),
        store,
    ))
}

/// The calendar alone over the configured database (`earshot calendar`,
/// doctor): no models, no LLM.
pub fn calendar(config: &Config) -> Result<crate::calendar::Calendar> {
    let store = Store::open(&config.database_path())?;
    Ok(crate::calendar::Calendar::new(&config.calendar, store))
}

/// Speech-to-text as `[stt]` says (a Wyoming ASR service of `[wyoming]`
/// in front; the Groq key shared with `[llm]`).
pub fn stt(config: &Config) -> Result<crate::stt::Stt, crate::stt::SttError> {
    crate::stt::Stt::from_config(
        &config.stt,
        &config.paths(),
        &config.llm.api_key,
        &config.wyoming,
    )
}

/// Text-to-speech engines of `tts.order`.
pub fn tts(config: &Config) -> crate::tts::Tts {
    crate::tts::Tts::from_config(
        &config.tts,
        &config.paths(),
        &config.llm.api_key,
        &config.wyoming,
    )
}

/// Speech-to-text and text-to-speech for the HTTP API as the config says;
/// a failed STT is kept as its reason (text endpoints still work).
pub fn speech(config: &Config) -> crate::api::speech::Speech {
    let stt = stt(config).map_err(|e| {
        tracing::warn!(error = %e, "speech-to-text unavailable for the HTTP API");
        e.to_string()
    });
    crate::api::speech::Speech::new(stt, tts(config))
}

/// `wyoming serve` stops an unused on-device LLM after this long (when
/// `llm.local.idle_release_secs` is 0); it loads again on the next request.
pub const WYOMING_LLM_IDLE_RELEASE_SECS: u64 = 300;

/// `earshot wyoming serve`'s service: the agent, whisper and the voices,
/// loaded once (seconds: call before announcing readiness).
pub fn wyoming_service(config: &Config) -> Result<crate::wyoming::service::Service> {
    let stt = stt(config);
    let settings = crate::wyoming::service::ServiceSettings {
        tts: config.tts.clone(),
        language: config.stt.language.clone(),
        whisper_model: config.stt.whisper_model.clone(),
        llm_model: config.llm.model.clone(),
        models_dir: config.models_dir.clone(),
    };
    let paths = config.paths();
    let make_tts = |tts: &crate::tts::TtsConfig| {
        crate::tts::Tts::from_config(tts, &paths, &config.llm.api_key, &config.wyoming)
    };
    // Issue 20: a Wyoming service mostly transcribes and speaks; its
    // on-device LLM gives its memory back when unused for a while.
    let mut config_llm = config.clone();
    if config_llm.llm.local.idle_release_secs == 0 {
        config_llm.llm.local.idle_release_secs = WYOMING_LLM_IDLE_RELEASE_SECS;
    }
    Ok(crate::wyoming::service::Service::new(
        build(&config_llm)?,
        stt,
        &settings,
        &make_tts,
    ))
}

/// What the knowledge base takes from the config.
pub fn knowledge_settings(config: &Config, paths: &Paths) -> crate::knowledge::KnowledgeSettings {
    crate::knowledge::KnowledgeSettings {
        knowledge: config.knowledge.clone(),
        paths: paths.clone(),
        user_id: config.user_id.clone(),
        rewrite_model: config.llm.model.clone(),
        threads: config.nlu.threads,
    }
}

/// Long-term memory over the store and the embedder; a failure is logged
/// and turns go on without memory (R-MEM).
fn open_memory(
    config: &Config,
    store: &Store,
    embedder: Option<Arc<dyn Embedder>>,
) -> Option<Arc<Memory>> {
    if !config.memory.enabled {
        return None;
    }
    match Memory::open(store.clone(), embedder, config.memory.clone()) {
        Ok(memory) => Some(Arc::new(memory)),
        Err(e) => {
            tracing::warn!("long-term memory unavailable: {e:#}");
            None
        }
    }
}

/// The intent tree over the device's actions; its classifiers use the
/// embedder (or carry the reason it is missing).
fn build_tree(
    config: &Config,
    paths: &Paths,
    env: ActionEnv,
    embedder: Option<&Arc<dyn Embedder>>,
) -> Result<crate::tree::Engine, crate::tree::TreeError> {
    let embedder = match embedder {
        Some(e) => Ok(e.clone()),
        None => Err(match crate::nlu::load_embedder(&config.nlu, paths) {
            Ok(_) => "the embedder was not loaded".to_string(),
            Err(e) => format!("{e:#}").replace('\n', " "),
        }),
    };
    crate::tree::Engine::build(&config.tree, &config.nlu, paths, env, embedder)
}
