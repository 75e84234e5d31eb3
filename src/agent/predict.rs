//! The answer a turn *would* give, found without acting, so the voice can
//! be ready before the turn runs (issue 21).
//!
//! The voice loop transcribes a command at a pause inside the hang-over
//! and, when it reads complete, waits for the rest of a short pause before
//! it ends the utterance. That wait is idle time: a dry run of the intent
//! tree can find the answer then — a question that only reads the device
//! (the time, the list, a timer's time left) answers as it will; an action
//! that would change something answers with its preview
//! ([`crate::tree::actions::Action::preview`]: "Timer set for 5 minutes.",
//! "Volume 40 percent.") and changes nothing — and the first sentence is
//! synthesised while the pause completes. The real turn still runs, and
//! its own answer is what is spoken: the prediction only lets the speaker
//! find that sentence already made.
//!
//! A wrong prediction costs one wasted synthesis and nothing else, so the
//! rule is strict: the conversation is on the intent tree, and the dry run
//! skipped nothing that speaks — no action without a preview, no language
//! model — nothing fell through, and it said something. A device setting
//! or an event the walk would write is not written (a dry run is never
//! saved); it does not change what is said.

use super::{Mode, Services};
use crate::events::CollectSink;
use crate::tree::interpreter::{NoLlm, WalkInput};

/// The answer the tree would give `text` in conversation
/// `conversation_id` (`None`: a new one), found without acting; `None`
/// when an action's words can't be known without acting, a language
/// model would answer, or the walk fails.
pub fn answer_without_acting(
    services: &Services,
    conversation_id: Option<i64>,
    text: &str,
) -> Option<String> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > super::turn::MAX_INPUT_CHARS {
        return None;
    }
    if mode(services, conversation_id)? != Mode::Tree {
        return None;
    }
    let engine = services.tree.as_ref()?;
    let input = previewing_walk(services, conversation_id, text)?;
    let outcome = engine
        .run(input, &mut NoLlm, &mut CollectSink::default())
        .ok()?;
    // The interpreter's notes for an action or an LLM a dry run skipped
    // (`tree::interpreter`): their words would be missing.
    let skipped = outcome
        .notes
        .iter()
        .any(|n| n.starts_with("dry run: skipped"));
    let answer = outcome.answer.trim();
    (!skipped
        && outcome.llm.is_none()
        && outcome.fell_through.is_empty()
        && !outcome.actions.is_empty()
        && !answer.is_empty())
    .then(|| answer.to_string())
}

/// Begin, in the background, the language-model request the turn for
/// `text` in conversation `conversation_id` will send, so its answer is on
/// its way while the hang-over runs out (issue 21: open questions). The
/// request is built by the turn's own code — history, recalled memories,
/// the tree walked dry to the `llm_stream` node it reaches (or the router
/// graph), the node's system prompt — and is only ever *adopted* by a
/// turn that sends exactly the same ([`crate::llm::speculate`]); nothing
/// is acted on or written. `false` when no request can be known without
/// acting or asking a model: the tree acts first (an action without a
/// preview on the way), the router would ask the model, the route runs
/// the agent's tools, or the conversation can't be read.
pub fn begin_llm_answer(
    services: &Services,
    conversation_id: Option<i64>,
    text: &str,
    epoch: u64,
) -> bool {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > super::turn::MAX_INPUT_CHARS {
        return false;
    }
    let user_id = services.settings.user_id.clone();
    let history = match conversation_id {
        Some(id) => match services.store.conversation(id) {
            Ok(Some(_)) => {
                let max = services.settings.llm.history_turns * 2;
                match services.store.recent_messages(id, max) {
                    Ok(messages) => super::turn::as_chat(messages),
                    Err(_) => return false,
                }
            }
            _ => return false,
        },
        None => Vec::new(),
    };
    let memory_block = services
        .recall
        .as_ref()
        .and_then(|recall| recall.recall(&user_id, text).ok())
        .and_then(|recalled| recalled.block);
    let mut ctx = super::turn::TurnContext {
        services,
        user_id,
        conversation_id,
        missing_conversation: None,
        text: text.to_string(),
        memory_block,
        tag_rules: None,
        history,
        record: crate::telemetry::TurnRecord::new("prediction", text),
        effects: Default::default(),
        cancel: crate::cancel::CancelToken::new(),
        started: std::time::Instant::now(),
    };
    let Some(request) = turn_request(services, conversation_id, text, &mut ctx) else {
        return false;
    };
    use crate::llm::speculate::Begun;
    let begins = |request| {
        matches!(
            services.speculation.begin(request, text, epoch),
            Begun::Started | Begun::AlreadyFlying
        )
    };
    if !begins(request) {
        return false;
    }
    // A route guessed for the request is confirmed while it flies. When
    // the model names another route, the turn will ask on that one: its
    // request begins now (and the guessed one is cancelled), instead of a
    // whole reply after the end of speech.
    if services.router.confirm_ahead(text) {
        if let Some(confirmed) = turn_request(services, conversation_id, text, &mut ctx) {
            begins(confirmed);
        }
    }
    true
}

/// The request the turn for `text` will send first, built by the turn's
/// own code (see [`begin_llm_answer`]); `None` when it can't be known
/// without acting or asking a model.
fn turn_request(
    services: &Services,
    conversation_id: Option<i64>,
    text: &str,
    ctx: &mut super::turn::TurnContext<'_>,
) -> Option<crate::llm::ChatRequest> {
    match (mode(services, conversation_id), services.tree.as_ref()) {
        (Some(Mode::Tree), Some(engine)) => {
            let input = previewing_walk(services, conversation_id, text)?;
            let mut host = RequestHost { ctx, request: None };
            let outcome = engine
                .run(input, &mut host, &mut CollectSink::default())
                .ok()?;
            // An action on the way whose words can't be known without
            // acting: the turn may well go elsewhere.
            let acts_first = outcome
                .notes
                .iter()
                .any(|n| n.starts_with("dry run: skipped action"));
            host.request.filter(|_| !acts_first)
        }
        (Some(Mode::Tree), None) | (Some(_), _) => graph_request(ctx),
        (None, _) => None,
    }
}

/// The first piece the turn will speak of the answer begun by
/// [`begin_llm_answer`] for `text` (cleaned and split as the turn's
/// speech does), once the first sentence is whole (a second one has
/// begun, or the answer ended); `None` after `wait` or when there is no
/// such answer.
pub fn first_llm_piece(
    services: &Services,
    text: &str,
    wait: std::time::Duration,
) -> Option<String> {
    let clean = |raw: &str| super::cleanup::StreamCleaner::new().push(raw);
    let whole_first = |raw: &str| crate::tts::sentences::split(&clean(raw)).len() >= 2;
    let raw = services.speculation.first_text(text, &whole_first, wait)?;
    crate::tts::speaker::TurnSpeech::first_piece(&clean(&raw))
}

/// The request the router graph's node would send for `ctx.text`, when
/// the route is known without a model and its node answers through the
/// main LLM.
fn graph_request(ctx: &mut super::turn::TurnContext<'_>) -> Option<crate::llm::ChatRequest> {
    let route = ctx.services.router.decide_ahead(&ctx.text)?;
    super::nodes::first_request(ctx, route)
}

/// A tree host that answers nothing and keeps the request the first
/// `llm_stream` node would send (as the turn's `TurnHost` builds it).
struct RequestHost<'a, 'b> {
    ctx: &'a mut super::turn::TurnContext<'b>,
    request: Option<crate::llm::ChatRequest>,
}

impl crate::tree::interpreter::Host for RequestHost<'_, '_> {
    fn llm_stream(
        &mut self,
        prompt: &str,
        _tags: bool,
        _: &mut dyn crate::events::EventSink,
    ) -> Result<crate::tree::interpreter::LlmAnswer, crate::tree::interpreter::HostError> {
        NoLlm.llm_stream(prompt, false, &mut CollectSink::default())
    }

    fn preview_llm(&mut self, prompt: &str, tags: bool) {
        if self.request.is_some() {
            return;
        }
        self.ctx.tag_rules = tags.then(crate::tree::tags::prompt_rules);
        let system = match prompt {
            "router" => graph_request(self.ctx),
            other => Some(super::nodes::main_request(
                self.ctx,
                super::dispatcher::llm_stream_system(other),
            )),
        };
        self.request = system;
        self.ctx.tag_rules = None;
    }
}

/// A dry, previewing walk of `text` from the conversation's tree state
/// (as the turn will load it); `None` when the state can't be read.
fn previewing_walk(
    services: &Services,
    conversation_id: Option<i64>,
    text: &str,
) -> Option<WalkInput> {
    let (state, _) = crate::tree::state::load(&services.store, conversation_id).ok()?;
    Some(WalkInput {
        text: text.to_string(),
        conversation_id,
        phase: state.phase,
        state: state.state,
        dry_run: true,
        preview: true,
    })
}

/// The conversation's dispatch mode as the turn resolves it; `None` when
/// it cannot be read (the turn would then note why and use the graph).
fn mode(services: &Services, conversation_id: Option<i64>) -> Option<Mode> {
    super::dispatcher::conversation_mode(services, conversation_id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::CancelToken;
    use crate::config::Config;
    use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError};
    use crate::store::Store;
    use std::sync::Arc;

    /// "what…" reads (the `say` action changes nothing); "louder" sets the
    /// volume (a change the action only returns) and publishes it;
    /// "pause…" completes a to-do (no preview); "count…" writes a device
    /// setting after saying; "remind…" says, then completes a to-do;
    /// "add…" adds one (its preview says what it would); anything else
    /// asks the LLM.
    const TREE: &str = r#"{"version":"t","entry":"start","nodes":{
        "start":{"type":"entry","next":"what"},
        "what":{"type":"condition","expression":"text matches '^what'","on_true":"noon","on_false":"louder"},
        "louder":{"type":"condition","expression":"text matches '^louder'","on_true":"up","on_false":"pause"},
        "up":{"type":"action","name":"volume_up","on_success":"event","on_fail":"done"},
        "event":{"type":"publish_event","event":"volume","data":{"level":"{device.volume}"},"next":"done"},
        "noon":{"type":"action","name":"say","args":{"text":"It is noon. Lunch is at one."},"on_success":"done","on_fail":"done"},
        "pause":{"type":"condition","expression":"text matches '^pause'","on_true":"dnd","on_false":"count"},
        "dnd":{"type":"action","name":"todo_complete","args":{"item":"milk"},"on_success":"done","on_fail":"done"},
        "count":{"type":"condition","expression":"text matches '^count'","on_true":"three","on_false":"remind"},
        "remind":{"type":"condition","expression":"text matches '^remind'","on_true":"okay","on_false":"add"},
        "okay":{"type":"action","name":"say","args":{"text":"Okay."},"on_success":"milk","on_fail":"done"},
        "milk":{"type":"action","name":"todo_complete","args":{"item":"milk"},"on_success":"done","on_fail":"done"},
        "add":{"type":"condition","expression":"text matches '^add'","on_true":"add_it","on_false":"llm"},
        "add_it":{"type":"action","name":"todo_add","on_success":"done","on_fail":"done"},
        "three":{"type":"action","name":"say","args":{"text":"Three."},"on_success":"volume","on_fail":"done"},
        "volume":{"type":"set_state","key":"device.volume","value":"30","next":"done"},
        "llm":{"type":"llm_stream","prompt":"simple","next":"done"},
        "done":{"type":"end"}}}"#;

    /// Never asked: a prediction never calls the LLM.
    struct NoChat;
    impl ChatModel for NoChat {
        fn chat(
            &self,
            _: &ChatRequest,
            _: &mut dyn FnMut(&str),
            _: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            panic!("a prediction called the LLM")
        }
    }

    fn services(dir: &std::path::Path, mode: Mode) -> Services {
        services_with(dir, mode, Arc::new(NoChat))
    }

    /// Tells a story after a moment; counts the requests it was sent.
    struct Storyteller {
        calls: std::sync::atomic::AtomicUsize,
    }
    impl ChatModel for Storyteller {
        fn chat(
            &self,
            _: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            _: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(30));
            let story = "**Once** upon a time, a fox. The end.";
            for token in story.split_inclusive(' ') {
                on_token(token);
            }
            Ok(ChatResponse {
                content: story.into(),
                ..Default::default()
            })
        }
    }

    /// Run the turn for `words` and check it spoke the storyteller's
    /// answer.
    fn the_turn_tells_the_story(s: &Services, words: &str) {
        let outcome = super::super::turn::run_turn(
            s,
            super::super::turn::TurnInput::text(words),
            &mut CollectSink::default(),
            &CancelToken::new(),
        );
        assert!(outcome.ok, "{}", outcome.response);
        assert_eq!(outcome.response, "Once upon a time, a fox. The end.");
    }

    #[test]
    fn the_turns_request_begun_early_is_the_one_it_sends() {
        for mode in [Mode::Tree, Mode::Graph] {
            let dir = tempfile::tempdir().unwrap();
            let teller = Arc::new(Storyteller {
                calls: Default::default(),
            });
            let s = services_with(dir.path(), mode, teller.clone());
            assert!(
                begin_llm_answer(&s, None, " tell me a story ", s.speculation.epoch()),
                "{mode:?}"
            );
            // The first piece the turn will speak, cleaned as it cleans.
            assert_eq!(
                first_llm_piece(&s, "tell me a story", std::time::Duration::from_secs(5))
                    .as_deref(),
                Some("Once upon a time, a fox."),
                "{mode:?}"
            );
            the_turn_tells_the_story(&s, "tell me a story");
            let calls = teller.calls.load(std::sync::atomic::Ordering::SeqCst);
            assert_eq!(calls, 1, "{mode:?}: the turn adopted the early request");
        }
        // The tree acts before it would ask (a to-do completed), or answers
        // without a model: nothing is begun, nothing sent.
        let dir = tempfile::tempdir().unwrap();
        let teller = Arc::new(Storyteller {
            calls: Default::default(),
        });
        let s = services_with(dir.path(), Mode::Tree, teller.clone());
        assert!(!begin_llm_answer(
            &s,
            None,
            "remind me",
            s.speculation.epoch()
        ));
        assert!(!begin_llm_answer(
            &s,
            None,
            "what time is it",
            s.speculation.epoch()
        ));
        assert!(!begin_llm_answer(
            &s,
            Some(999),
            "tell me a story",
            s.speculation.epoch()
        ));
        assert_eq!(teller.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn the_agents_first_request_on_the_context_route_is_begun_and_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let teller = Arc::new(Storyteller {
            calls: Default::default(),
        });
        let s = services_with(dir.path(), Mode::Graph, teller.clone());
        // "calendar" routes to the context path: the agent, with tools.
        let words = "what is on my calendar";
        assert!(begin_llm_answer(&s, None, words, s.speculation.epoch()));
        the_turn_tells_the_story(&s, words);
        assert_eq!(
            teller.calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the agent adopted the early request"
        );
    }

    /// Routes every question to the agent (`context`) when asked, and
    /// tells a story otherwise; records which thread sent each answer's
    /// request.
    struct RoutesToTheAgent {
        answers_from: std::sync::Mutex<Vec<String>>,
    }
    impl ChatModel for RoutesToTheAgent {
        fn chat(
            &self,
            request: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            _: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            let asks_route = request.to_json()["messages"][0]["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("Classify"));
            if asks_route {
                return Ok(ChatResponse {
                    content: "context".into(),
                    ..Default::default()
                });
            }
            let thread = std::thread::current().name().unwrap_or("").to_string();
            self.answers_from.lock().unwrap().push(thread);
            let story = "Once upon a time, a fox. The end.";
            on_token(story);
            Ok(ChatResponse {
                content: story.into(),
                ..Default::default()
            })
        }
    }

    #[test]
    fn a_request_begun_on_a_guessed_route_is_begun_again_on_the_models_route() {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(RoutesToTheAgent {
            answers_from: Default::default(),
        });
        let mut s = services_with(dir.path(), Mode::Graph, model.clone());
        // No classifier here: the router guesses `simple` and the model,
        // asked while that answer flies, says `context`.
        let router = crate::nlu::router::Router::new(
            &[],
            None,
            0.65,
            Some((model.clone() as Arc<dyn ChatModel>, "m".into())),
        );
        s.router = Arc::new(router);
        let words = "who invented the telephone";
        assert_eq!(
            s.router.decide_ahead(words),
            Some(crate::nlu::router::Route::Simple)
        );
        assert!(begin_llm_answer(&s, None, words, s.speculation.epoch()));
        the_turn_tells_the_story(&s, words);
        let from = model.answers_from.lock().unwrap().clone();
        assert!(
            from.iter().all(|t| t == "llm-speculation"),
            "the turn sent its own request instead of adopting one begun on its route: {from:?}"
        );
        // The answer the turn spoke came from a request begun early (the
        // guessed one may or may not have reached the model yet).
        assert!(!from.is_empty());
    }

    fn services_with(dir: &std::path::Path, mode: Mode, llm: Arc<dyn ChatModel>) -> Services {
        let store = Store::open_in(dir).unwrap();
        let file = dir.join("tree.json");
        std::fs::write(&file, TREE).unwrap();
        let mut config = Config {
            models_dir: dir.join("no-models"),
            ..Default::default()
        };
        config.router.llm_fallback = false;
        config.memory.enabled = false;
        config.mode = mode;
        config.tree.file = file.display().to_string();
        let services = crate::app::assemble(&config, store, llm, None, None);
        assert!(services.tree.is_some(), "{:?}", services.tree_error);
        services
    }

    #[test]
    fn an_answer_is_predicted_without_acting_when_its_words_are_known() {
        let dir = tempfile::tempdir().unwrap();
        let s = services(dir.path(), Mode::Tree);
        assert_eq!(
            answer_without_acting(&s, None, "  what time is it  ").as_deref(),
            Some("It is noon. Lunch is at one.")
        );
        // A change the action only returns is said, not made; nor is the
        // event published or a setting a node writes.
        assert_eq!(
            answer_without_acting(&s, None, "louder").as_deref(),
            Some("Volume 60 percent.")
        );
        assert_eq!(
            answer_without_acting(&s, None, "count to three").as_deref(),
            Some("Three.")
        );
        // An action that writes answers with its preview, unwritten.
        assert_eq!(
            answer_without_acting(&s, None, "add eggs to my list").as_deref(),
            Some("Added \"eggs\" to your to-do list.")
        );
        // An action that writes and has no preview (alone, or after words
        // already said), a language model: nothing predicted.
        assert_eq!(answer_without_acting(&s, None, "pause please"), None);
        assert_eq!(answer_without_acting(&s, None, "remind me"), None);
        assert_eq!(answer_without_acting(&s, None, "tell me a story"), None);
        assert_eq!(answer_without_acting(&s, None, ""), None);
        assert_eq!(s.store.device_state("volume").unwrap(), None);
        let todos: i64 = s
            .store
            .with_conn(|c| c.query_row("SELECT COUNT(*) FROM todos", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(todos, 0);
        // A conversation that does not exist would start on the graph.
        assert_eq!(
            answer_without_acting(&s, Some(999), "what time is it"),
            None
        );
    }

    #[test]
    fn a_conversation_on_the_router_graph_is_not_predicted() {
        let dir = tempfile::tempdir().unwrap();
        let s = services(dir.path(), Mode::Graph);
        assert_eq!(answer_without_acting(&s, None, "what time is it"), None);
    }
}
