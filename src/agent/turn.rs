//! One turn: conversation → history + recall → dispatch → cleaned answer →
//! saved atomically with its turn log → `done` (R-STORE, R-PIPE 4–8).
//!
//! A turn's side effects carry its id: its retrievals and tool timings ride
//! on its [`TurnRecord`], its tree state and device settings (`dnd`,
//! `volume`, `last_answer`) on its [`TurnEffects`]; the save writes them in
//! the turn's transaction. A turn that fails writes only its log row (with
//! its retrievals) and changes no state.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;

use super::cleanup;
use super::dispatcher;
use super::Services;
use crate::cancel::CancelToken;
use crate::events::{Done, Event, EventSink};
use crate::llm::ChatMessage;
use crate::store::{JobKind, SaveTurn, TurnEffects};
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
    /// The conversation the input named that does not exist: this turn
    /// starts a new one (`conversation_id` is `None`) on the router graph.
    pub missing_conversation: Option<i64>,
    /// The user's text (without the memory block).
    pub text: String,
    pub memory_block: Option<String>,
    /// The action tags the model may write (set while an intent-tree
    /// `llm_stream` node whose answer goes through `execute_tags` runs);
    /// added to the system prompt before its "Now:" line.
    pub tag_rules: Option<String>,
    /// The last turns of this conversation, oldest first.
    pub history: Vec<ChatMessage>,
    pub record: TurnRecord,
    /// Tree state and device settings the turn changes: written by its
    /// save, in its transaction, or not at all.
    pub effects: TurnEffects,
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
    /// What the answer did (the tree's actions, e.g. `timer_set`); empty
    /// for words only. The intent alone is the router's label, which an
    /// answer by the language model carries too.
    pub actions: Vec<String>,
}

/// Stored messages as the LLM sees them (the turn's history).
pub(crate) fn as_chat(messages: Vec<crate::store::StoredMessage>) -> Vec<ChatMessage> {
    messages
        .into_iter()
        .map(|m| {
            if m.role == "user" {
                ChatMessage::user(m.content)
            } else {
                ChatMessage::assistant(m.content)
            }
        })
        .collect()
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
            actions: Vec::new(),
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

    // A named conversation that does not exist is not an error (seed 004's
    // dispatcher): the turn starts a new conversation on the router graph,
    // logs a warning and names the new id in `done`.
    let mut conversation_id = input.conversation_id;
    let mut missing_conversation = None;
    let history = match input.conversation_id {
        Some(id) => match services.store.conversation(id) {
            Ok(Some(_)) => {
                let max = services.settings.llm.history_turns * 2;
                match services.store.recent_messages(id, max) {
                    Ok(messages) => as_chat(messages),
                    Err(e) => {
                        return fail(
                            &mut record,
                            sink,
                            None,
                            format!("I couldn't read this conversation: {e}"),
                        )
                    }
                }
            }
            Ok(None) => {
                tracing::warn!(
                    conversation = id,
                    "conversation not found; starting a new one on the router graph"
                );
                record.note(format!(
                    "conversation {id} not found; started a new one on the router graph"
                ));
                conversation_id = None;
                missing_conversation = Some(id);
                Vec::new()
            }
            Err(e) => {
                return fail(
                    &mut record,
                    sink,
                    None,
                    format!("I couldn't open the database: {e}"),
                )
            }
        },
        None => Vec::new(),
    };

    // Recall before routing; failures are logged and ignored (R-MEM).
    let recall_started = Instant::now();
    let recalled = services
        .recall
        .as_ref()
        .map(|recall| match recall.recall(&user_id, &text) {
            Ok(recalled) => recalled,
            Err(e) => {
                tracing::warn!(error = %e, "memory recall failed; continuing without memories");
                Default::default()
            }
        })
        .unwrap_or_default();
    record.stage("recall", recall_started);
    // The turn log's `memories_json` (lifted from `extra.memories`): the
    // memories in the block every LLM request of this turn carries.
    if recalled.block.is_some() {
        record
            .extra
            .insert("memories".into(), recalled.log_entries());
    }
    let memory_block = recalled.block;

    let mut ctx = TurnContext {
        services,
        user_id: user_id.clone(),
        conversation_id,
        missing_conversation,
        text: text.clone(),
        memory_block,
        tag_rules: None,
        history,
        record,
        effects: TurnEffects::default(),
        cancel: cancel.clone(),
        started,
    };
    let answer = dispatcher::dispatch(&mut ctx, sink);
    let mut record = ctx.record;
    let effects = ctx.effects;
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => return fail(&mut record, sink, conversation_id, e.to_string()),
    };
    if cancel.is_cancelled() {
        return fail(&mut record, sink, conversation_id, "Okay, stopped.".into());
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

    let jobs = after_turn_jobs(&user_id, &text);
    let saved = services.store.save_turn(&SaveTurn {
        user_id: &user_id,
        conversation_id,
        user_text: &text,
        answer: &response,
        record: &record,
        jobs,
        effects,
    });
    let (conversation_id, turn_id) = match saved {
        Ok(ids) => ids,
        Err(e) => {
            record.error = Some(e.to_string());
            return fail(
                &mut record,
                sink,
                conversation_id,
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
        actions: answer.actions,
    }
}

/// Background work after the reply, enqueued in the turn's transaction:
/// memory extraction for every exchange and the conversation summary (the
/// worker skips conversations under 2 turns). The store adds the
/// conversation id to each payload.
fn after_turn_jobs(user_id: &str, text: &str) -> Vec<(JobKind, String)> {
    vec![
        (
            JobKind::ExtractMemory,
            // The answer itself is stored once, in `messages`: the save
            // adds `assistant_message_id` to the payload.
            json!({"user_id": user_id, "user": text}).to_string(),
        ),
        (JobKind::Summarize, json!({"user_id": user_id}).to_string()),
    ]
}

#[cfg(test)]
mod tests {
    //! A turn's side effects (retrievals, tree state, device state, the last
    //! answer) belong to that turn: written with its id in its transaction,
    //! or not at all when it fails.
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    use serde_json::{json, Value};

    use super::*;
    use crate::config::Config;
    use crate::events::CollectSink;
    use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ToolCall};
    use crate::store::Store;
    use crate::tools::{Tool, ToolError, ToolOutput};
    use crate::tree::state::{self, Origin, TreeState};

    /// Holds each caller until `n` have arrived (fails the test instead of
    /// hanging when one never comes).
    struct Rendezvous {
        n: usize,
        arrived: Mutex<usize>,
        all_here: Condvar,
    }

    impl Rendezvous {
        fn new(n: usize) -> Self {
            Self {
                n,
                arrived: Mutex::new(0),
                all_here: Condvar::new(),
            }
        }

        fn wait(&self) {
            let mut arrived = self.arrived.lock().unwrap();
            *arrived += 1;
            self.all_here.notify_all();
            let (arrived, timeout) = self
                .all_here
                .wait_timeout_while(arrived, Duration::from_secs(20), |a| *a < self.n)
                .unwrap();
            assert!(
                !timeout.timed_out(),
                "only {} of {} arrived",
                *arrived,
                self.n
            );
        }
    }

    /// Two turns in lock-step: both have started before either asks for the
    /// search, and both searches are done before either answers.
    struct LockStep {
        started: Rendezvous,
        searched: Rendezvous,
    }

    impl ChatModel for LockStep {
        fn chat(
            &self,
            request: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            _cancel: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            let last = request.messages.last().unwrap();
            if last.role == "tool" {
                self.searched.wait();
                let content = format!("Found {}.", last.content.clone().unwrap_or_default());
                on_token(&content);
                return Ok(ChatResponse {
                    content,
                    ..Default::default()
                });
            }
            self.started.wait();
            let text = last.content.clone().unwrap_or_default();
            let word = text.split_whitespace().last().unwrap_or("").to_string();
            Ok(ChatResponse {
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "search_knowledge".into(),
                    arguments: json!({ "query": word }).to_string(),
                }],
                ..Default::default()
            })
        }
    }

    /// `search_knowledge` without a knowledge base: the retrieval is the
    /// query, handed to the turn as the real tool does.
    struct FakeSearch;

    impl Tool for FakeSearch {
        fn name(&self) -> &str {
            "search_knowledge"
        }
        fn description(&self) -> &str {
            "search"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn call(&self, args: &Value) -> Result<String, ToolError> {
            self.call_output(args).map(|o| o.text)
        }
        fn call_output(&self, args: &Value) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput {
                text: args["query"].as_str().unwrap_or("").to_string(),
                retrieval: Some(json!({"query": args["query"]})),
                ..Default::default()
            })
        }
    }

    fn config(dir: &std::path::Path) -> Config {
        let mut config = Config {
            // No on-device models: nothing slow is loaded.
            models_dir: dir.join("no-models"),
            ..Default::default()
        };
        config.router.llm_fallback = false;
        config.memory.enabled = false;
        config
    }

    #[test]
    fn two_turns_at_once_each_get_exactly_their_own_retrievals() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let mut config = config(dir.path());
        config.mode = crate::agent::Mode::Graph;
        let llm = Arc::new(LockStep {
            started: Rendezvous::new(2),
            searched: Rendezvous::new(2),
        });
        let mut services = crate::app::assemble(&config, store.clone(), llm, None, None);
        let mut tools = (*services.tools).clone();
        tools.register(Arc::new(FakeSearch));
        services.tools = Arc::new(tools);

        let outcomes: Vec<(String, TurnOutcome)> = std::thread::scope(|s| {
            let turns: Vec<_> = ["alpha", "beta"]
                .into_iter()
                .map(|word| {
                    let services = &services;
                    s.spawn(move || {
                        // "schedule" sends both to the agent (R-ROUTE keyword).
                        let input = TurnInput::text(format!("check my schedule for {word}"));
                        let mut sink = CollectSink::default();
                        let outcome = run_turn(services, input, &mut sink, &CancelToken::new());
                        (word.to_string(), outcome)
                    })
                })
                .collect();
            turns.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for (word, outcome) in outcomes {
            assert!(outcome.ok, "{word}: {}", outcome.response);
            let turn = outcome.turn_id.unwrap();
            let row = store.turn_log_row(turn).unwrap().unwrap();
            assert_eq!(
                row["retrieval_json"],
                json!([{ "query": word }]),
                "turn {turn} ({word})"
            );
            let claimed: Vec<String> = store
                .with_conn(|c| {
                    let mut stmt = c.prepare(
                        "SELECT payload FROM knowledge_retrievals WHERE turn_id = ?1 ORDER BY id",
                    )?;
                    let rows = stmt.query_map([turn], |r| r.get(0))?;
                    rows.collect()
                })
                .unwrap();
            assert_eq!(
                claimed,
                [json!({ "query": word }).to_string()],
                "turn {turn}"
            );
        }
    }

    /// Pause: dnd on, a state key, a phase, a device setting; else `end`.
    const PAUSE_TREE: &str = r#"{"version":"t","entry":"start","nodes":{
        "start":{"type":"entry","next":"pause"},
        "pause":{"type":"condition","expression":"text matches '^pause'","on_true":"dnd","on_false":"done"},
        "dnd":{"type":"action","name":"dnd_on","on_success":"remember","on_fail":"done"},
        "remember":{"type":"set_state","key":"state.paused_by","value":"{text}","next":"phase"},
        "phase":{"type":"phase_transition","to":"paused","next":"volume"},
        "volume":{"type":"set_state","key":"device.volume","value":"30","next":"done"},
        "done":{"type":"end"}}}"#;

    fn tree_services(dir: &std::path::Path) -> Services {
        let store = Store::open_in(dir).unwrap();
        let file = dir.join("tree.json");
        std::fs::write(&file, PAUSE_TREE).unwrap();
        let mut config = config(dir);
        config.mode = crate::agent::Mode::Tree;
        config.tree.file = file.display().to_string();
        let llm = Arc::new(LockStep {
            started: Rendezvous::new(1),
            searched: Rendezvous::new(1),
        });
        let services = crate::app::assemble(&config, store, llm, None, None);
        assert!(services.tree.is_some(), "{:?}", services.tree_error);
        services
    }

    fn device(services: &Services, key: &str) -> Option<String> {
        services.store.device_state(key).unwrap()
    }

    fn pause(services: &Services, conversation_id: Option<i64>) -> TurnOutcome {
        let mut input = TurnInput::text("pause please");
        input.conversation_id = conversation_id;
        run_turn(
            services,
            input,
            &mut CollectSink::default(),
            &CancelToken::new(),
        )
    }

    #[test]
    fn a_turn_that_fails_to_save_changes_no_tree_or_device_state() {
        let dir = tempfile::tempdir().unwrap();
        let services = tree_services(dir.path());
        let store = &services.store;
        let conv = store.create_conversation("user-1").unwrap();
        let before = TreeState {
            phase: "idle".into(),
            state: json!({"kept": 1}).as_object().unwrap().clone(),
        };
        state::save(store, conv, &before).unwrap();
        store.set_device_state("dnd", "off").unwrap();
        store.set_device_state("volume", "50").unwrap();
        store
            .set_device_state("last_answer", "an older answer")
            .unwrap();
        store
            .with_conn(|c| {
                c.execute_batch(
                    "CREATE TRIGGER no_messages BEFORE INSERT ON messages
                     BEGIN SELECT RAISE(ABORT, 'the disk is on fire'); END;",
                )
            })
            .unwrap();

        let outcome = pause(&services, Some(conv));
        assert!(!outcome.ok);
        assert!(
            outcome.response.contains("couldn't save"),
            "{}",
            outcome.response
        );
        assert_eq!(
            state::load(store, Some(conv)).unwrap(),
            (before, Origin::Table)
        );
        assert_eq!(device(&services, "dnd").as_deref(), Some("off"));
        assert_eq!(device(&services, "volume").as_deref(), Some("50"));
        assert_eq!(
            device(&services, "last_answer").as_deref(),
            Some("an older answer")
        );
        assert_eq!(
            store.last_answer().unwrap().as_deref(),
            Some("an older answer")
        );
    }

    #[test]
    fn a_saved_turn_writes_its_tree_and_device_state() {
        let dir = tempfile::tempdir().unwrap();
        let services = tree_services(dir.path());
        let store = &services.store;
        store.set_device_state("dnd", "off").unwrap();

        // A new conversation: its first turn's save creates it and its state.
        let outcome = pause(&services, None);
        assert!(outcome.ok, "{}", outcome.response);
        let conv = outcome.conversation_id.unwrap();
        let (saved, origin) = state::load(store, Some(conv)).unwrap();
        assert_eq!(origin, Origin::Table);
        assert_eq!(saved.phase, "paused");
        assert_eq!(saved.state["paused_by"], "pause please");
        assert_eq!(device(&services, "dnd").as_deref(), Some("on"));
        assert_eq!(device(&services, "volume").as_deref(), Some("30"));
        // "repeat" reads the answer through the message it is stored in.
        assert_eq!(device(&services, "last_answer"), None);
        assert_eq!(
            store.last_answer().unwrap().as_deref(),
            Some(outcome.response.as_str())
        );

        // An existing conversation.
        state::save(store, conv, &TreeState::default()).unwrap();
        store.set_device_state("dnd", "off").unwrap();
        let outcome = pause(&services, Some(conv));
        assert!(outcome.ok, "{}", outcome.response);
        assert_eq!(state::load(store, Some(conv)).unwrap().0.phase, "paused");
        assert_eq!(device(&services, "dnd").as_deref(), Some("on"));
    }
}
