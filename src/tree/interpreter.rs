//! One walk of the tree (R-TREE, seed 004's `TreeInterpreter`): from the
//! entry, node by node, at most `max_steps` steps, until an `end` node.
//!
//! The walk reports through the R-SSE events: `thinking {tool}` for each
//! device action it runs, one `content` event per sentence a device action
//! says (LLM answers stream their own `content`), and the suggested
//! follow-ups it collected; `done`/`error` belong to the caller, which
//! also persists the message, the turn log and the tree state.
//!
//! Device settings (`set_state` on a device key, the device actions) are
//! not written by the walk: they collect in [`WalkOutcome::device_state`]
//! (later nodes of the walk see them) and the turn saves them with itself.
//!
//! Dry-run: actions that change stored data (todos, device settings,
//! memories), `set_state` on device keys and LLM calls are skipped and
//! noted; read-only actions (time, maths, listing) still run, so a dry run
//! shows what the tree would say.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};

use super::actions::{run_bounded, ActionCall, ActionOutput};
use super::engine::{Engine, Published};
use super::expr::{self, ExprError, Scope};
use super::model::Node;
use super::{tags, StateKey};
use crate::events::{Event, EventSink};
use crate::llm::LlmError;
use crate::store::Store;

/// Utterances longer than this never match a device intent: a device
/// command is a short phrase, and embedding 10k characters would only cost
/// time. Classify nodes take their fallback instead.
pub const MAX_CLASSIFY_CHARS: usize = 500;

/// What one walk starts from.
#[derive(Debug, Clone, Default)]
pub struct WalkInput {
    pub text: String,
    pub conversation_id: Option<i64>,
    pub phase: String,
    pub state: Map<String, Value>,
    pub dry_run: bool,
    /// With `dry_run`: an action that changes state answers with its
    /// [`super::actions::Action::preview`] (what it would say) instead of
    /// being skipped, where it has one. Still nothing is written: a dry
    /// run's outcome is never saved.
    pub preview: bool,
}

/// What an `llm_stream` node got back from the host.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LlmAnswer {
    pub text: String,
    pub model: String,
    /// The route that answered (`simple`, `context`, `persona` or `tree`).
    pub route: String,
}

/// The world outside the tree: how an `llm_stream` node gets an answer.
pub trait Host {
    /// `prompt` is `router` (the router graph answers), `simple`,
    /// `persona`, or a literal system prompt. `tags`: the answer goes
    /// through `execute_tags`, so the system prompt should add
    /// [`tags::prompt_rules`] (the walk removes the tags from the streamed
    /// `content`). Streams `content` to `sink`. An error ends the walk; its
    /// message is the sentence the user hears.
    fn llm_stream(
        &mut self,
        prompt: &str,
        tags: bool,
        sink: &mut dyn EventSink,
    ) -> Result<LlmAnswer, HostError>;

    /// A previewing dry run reached an `llm_stream` node with this
    /// `prompt` (and `tags`, as for [`Host::llm_stream`]): the walk skips
    /// it, and a host may prepare the request the real walk will send
    /// (`agent::predict` begins it early). Nothing is streamed.
    fn preview_llm(&mut self, _prompt: &str, _tags: bool) {}
}

/// A host that never calls a language model: dry runs (which skip
/// `llm_stream` nodes anyway) and on-device recognition.
pub struct NoLlm;

impl Host for NoLlm {
    fn llm_stream(
        &mut self,
        prompt: &str,
        _tags: bool,
        _: &mut dyn EventSink,
    ) -> Result<LlmAnswer, HostError> {
        Err(HostError::NoLlm(format!(
            "dry run: no LLM is called (prompt '{prompt}')"
        )))
    }
}

/// Why a [`Host`] gave no answer to an `llm_stream` node. The walk stops
/// with it ([`WalkFailure::Host`]); callers branch on the variant (the
/// turn keeps the language model's technical error in its log, a dry run
/// just notes that no LLM was called).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    /// This host never calls a language model (a dry run, on-device
    /// recognition); the text says so.
    #[error("{0}")]
    NoLlm(String),
    /// The language model failed; the message is the sentence said for
    /// it ([`LlmError::user_sentence`]).
    #[error("{}", .0.user_sentence())]
    Llm(LlmError),
    /// The host answered through a path that failed with its own
    /// sentence (the router graph's agent, e.g. a malformed tool call).
    #[error("{0}")]
    Failed(String),
}

/// The result of a classify node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    pub node: String,
    pub classifier: String,
    pub intent: String,
    pub confidence: f32,
    pub threshold: f32,
    /// Whether the walk took the intent's branch.
    pub accepted: bool,
}

/// What a finished walk produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WalkOutcome {
    /// Everything said, in order, tags removed.
    pub answer: String,
    /// Set when an LLM answered (its model and route).
    pub llm: Option<LlmAnswer>,
    /// The last classification made (accepted or not).
    pub classification: Option<Classification>,
    /// Device actions that produced the answer (or its effect): those that
    /// succeeded, and those that failed with a sentence of their own ("I
    /// couldn't find …"). An action that failed silently and let the walk
    /// go on (e.g. `calculate` on "what's the square root of a banana",
    /// which then goes to the router graph) is in [`Self::fell_through`]
    /// instead, so `done.actions` never claims the device answered.
    pub actions: Vec<String>,
    /// The intent a frame decided when the classifier was unsure or
    /// picked a neighbour (see [`super::fit`]); `None` when the classifier
    /// decided or nothing did.
    pub rule_intent: Option<String>,
    /// Actions tried that failed without a sentence: the walk fell through
    /// to another branch (the turn log's `tree_fell_through`).
    pub fell_through: Vec<String>,
    pub recommendations: Vec<String>,
    pub phase: String,
    pub state: Map<String, Value>,
    /// Device settings the walk changed (key → value, `None` removes it),
    /// not written yet: the caller saves them with the turn.
    pub device_state: BTreeMap<String, Option<String>>,
    /// Node ids visited, in order.
    pub path: Vec<String>,
    /// Why fallbacks and skips happened, in words (for the turn log).
    pub notes: Vec<String>,
    pub events: Vec<Published>,
    /// The node whose output was said last.
    pub answered_by: Option<String>,
}

/// A walk that could not finish: becomes the turn's `error` frame. Its
/// message is [`WalkError::failure`]'s one sentence for the user.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{failure}")]
pub struct WalkError {
    /// What went wrong (callers branch on it).
    pub failure: WalkFailure,
    /// Node ids visited before the failure, in order.
    pub path: Vec<String>,
    pub notes: Vec<String>,
}

/// Why a walk stopped before an `end` node. A broken tree is a fault of
/// the tree file (`earshot tree check` finds most of them before a walk);
/// the step bound and the host are run-time failures.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WalkFailure {
    #[error("The intent tree is broken: node '{node}' does not exist.")]
    MissingNode { node: String },
    /// `field` is the branch that was needed (`next`, `default`, …).
    #[error("The intent tree is broken: node '{node}' has no '{field}'.")]
    MissingBranch { node: String, field: String },
    #[error("The intent tree is broken: node '{node}': {error}.")]
    BadExpression { node: String, error: ExprError },
    #[error("The intent tree is broken: node '{node}' has a bad key '{key}'.")]
    BadKey { node: String, key: String },
    /// `last` is the tail of the path, `a → b → c`.
    #[error("The intent tree took more than {max_steps} steps without reaching an end node (last: {last}).")]
    TooManySteps { max_steps: usize, last: String },
    /// An `llm_stream` node's host failed.
    #[error(transparent)]
    Host(#[from] HostError),
}

struct WalkScope<'a> {
    text: &'a str,
    phase: &'a str,
    classification: Option<&'a Classification>,
    state: &'a Map<String, Value>,
    device: &'a BTreeMap<String, Option<String>>,
    store: &'a Store,
}

impl Scope for WalkScope<'_> {
    fn lookup(&self, path: &[String]) -> Value {
        match path.first().map(String::as_str) {
            Some("text") => Value::String(self.text.into()),
            Some("phase") => Value::String(self.phase.into()),
            Some("intent") => self
                .classification
                .filter(|c| c.accepted)
                .map(|c| Value::String(c.intent.clone()))
                .unwrap_or(Value::Null),
            Some("confidence") => self
                .classification
                .map(|c| serde_json::json!(c.confidence))
                .unwrap_or(Value::Null),
            Some("state") => {
                let mut v = self.state.get(&path[1]).cloned().unwrap_or(Value::Null);
                for key in &path[2..] {
                    v = v.get(key).cloned().unwrap_or(Value::Null);
                }
                v
            }
            Some("device") => device_value(self.store, self.device, &path[1]),
            _ => Value::Null,
        }
    }
}

/// A device setting as the walk sees it: its own unsaved change, else the
/// stored value.
fn device_value(store: &Store, pending: &BTreeMap<String, Option<String>>, key: &str) -> Value {
    if let Some(value) = pending.get(key) {
        return value.clone().map(Value::String).unwrap_or(Value::Null);
    }
    match store.device_state(key) {
        Ok(Some(v)) => Value::String(v),
        Ok(None) => Value::Null,
        Err(e) => {
            tracing::warn!(key, error = %e, "cannot read device state; treating it as unset");
            Value::Null
        }
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Fill `{text}`, `{intent}`, `{phase}`, `{state.KEY}`, `{device.KEY}` in
/// every string of `value`.
fn fill(value: &Value, scope: &WalkScope<'_>) -> Value {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        crate::small_regex::new(r"\{((?:text|intent|phase|confidence)|(?:state|device)\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\}")
            .expect("static regex")
    });
    match value {
        Value::String(s) => Value::String(
            re.replace_all(s, |c: &regex::Captures<'_>| {
                let path: Vec<String> = c[1].split('.').map(str::to_string).collect();
                as_text(&scope.lookup(&path))
            })
            .into_owned(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, scope)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, scope)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The walk's mutable state.
struct Walk<'e> {
    engine: &'e Engine,
    input: WalkInput,
    out: WalkOutcome,
    parts: Vec<String>,
    said_any: bool,
    classified: HashMap<String, Option<(String, f32)>>,
    /// Every action run: (name, succeeded, said a sentence of its own).
    attempts: Vec<(String, bool, bool)>,
}

impl Walk<'_> {
    fn scope(&self) -> WalkScope<'_> {
        WalkScope {
            text: &self.input.text,
            phase: &self.out.phase,
            classification: self.out.classification.as_ref(),
            state: &self.out.state,
            device: &self.out.device_state,
            store: &self.engine.env().store,
        }
    }

    fn say(&mut self, node: &str, text: &str, sink: &mut dyn EventSink) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let data = if self.said_any {
            format!(" {text}")
        } else {
            text.to_string()
        };
        sink.emit(&Event::Content { data });
        self.said_any = true;
        self.parts.push(text.to_string());
        self.out.answered_by = Some(node.to_string());
    }

    fn apply(&mut self, output: &ActionOutput) {
        for (k, v) in &output.set_state {
            if v.is_null() {
                self.out.state.remove(k);
            } else {
                self.out.state.insert(k.clone(), v.clone());
            }
        }
        if let Some(p) = &output.phase {
            self.out.phase = p.clone();
        }
        self.out.device_state.extend(output.device_state.clone());
        self.out
            .recommendations
            .extend(output.recommendations.iter().cloned());
    }

    /// Run one action by name; `Ok(ok)` is the branch to take.
    fn action(
        &mut self,
        node: &str,
        name: &str,
        args: Value,
        speak: bool,
        sink: &mut dyn EventSink,
    ) -> bool {
        let Some(action) = self.engine.actions().get(name) else {
            self.out
                .notes
                .push(format!("node '{node}': action '{name}' does not exist"));
            return false;
        };
        let call = ActionCall {
            text: self.input.text.clone(),
            args: if args.is_object() {
                args
            } else {
                Value::Object(Map::new())
            },
            phase: self.out.phase.clone(),
            state: self.out.state.clone(),
            device: self.out.device_state.clone(),
        };
        let result = if self.input.dry_run && action.changes_state() {
            // A dry run changes nothing; a preview may still learn what
            // the action would say.
            let previewed = if self.input.preview {
                action.preview(&call, self.engine.env())
            } else {
                None
            };
            let Some(result) = previewed else {
                self.out
                    .notes
                    .push(format!("dry run: skipped action '{name}' at node '{node}'"));
                return true;
            };
            result
        } else {
            sink.emit(&Event::Thinking { tool: name.into() });
            run_bounded(
                action,
                call,
                self.engine.env().clone(),
                self.engine.action_timeout(),
            )
        };
        match result {
            Ok(output) => {
                self.attempts
                    .push((name.to_string(), output.ok, !output.say.trim().is_empty()));
                self.apply(&output);
                if speak {
                    self.say(node, &output.say, sink);
                } else if !output.ok && !output.say.is_empty() {
                    self.out
                        .notes
                        .push(format!("action '{name}': {}", output.say));
                }
                output.ok
            }
            Err(e) => {
                self.attempts.push((name.to_string(), false, speak));
                let sentence = e.to_string();
                self.out.notes.push(format!(
                    "action '{name}' at node '{node}' failed: {sentence}"
                ));
                if speak {
                    self.say(node, &sentence, sink);
                }
                false
            }
        }
    }

    /// A classify node: the set's classifier, then the no-wrong-action
    /// gate ([`super::fit::gate`]): the intent is taken only when the
    /// classifier is confident and the utterance fits the intent's frame,
    /// or when one unambiguous frame fits on its own (also on a board
    /// without the classifier). `allowed` is the node's branches.
    fn classify(
        &mut self,
        node: &str,
        set: &str,
        min: Option<f32>,
        allowed: &dyn Fn(&str) -> bool,
    ) -> Option<String> {
        let threshold = min.unwrap_or(self.engine.default_threshold());
        let text = self.input.text.trim().to_string();
        if text.is_empty() {
            self.out
                .notes
                .push(format!("node '{node}': empty utterance; took the fallback"));
            return None;
        }
        if text.chars().count() > MAX_CLASSIFY_CHARS {
            self.out.notes.push(format!(
                "node '{node}': utterance longer than {MAX_CLASSIFY_CHARS} characters is not a device command; took the fallback"
            ));
            return None;
        }
        let hit = match self.classified.get(set) {
            Some(hit) => hit.clone(),
            None => {
                let hit = match self.engine.classifier(set) {
                    Ok(c) => {
                        let hit = c.classify(&text);
                        if hit.is_none() {
                            self.out.notes.push(format!(
                                "node '{node}': classifier '{set}' gave no answer; took the fallback"
                            ));
                        }
                        hit
                    }
                    Err(e) => {
                        let why = e.reason();
                        self.out.notes.push(format!(
                            "node '{node}': classifier '{set}' is unavailable ({why}); took the fallback"
                        ));
                        None
                    }
                };
                self.classified.insert(set.to_string(), hit.clone());
                hit
            }
        };
        let decision = super::fit::gate(
            &text,
            hit.as_ref().map(|(i, c)| (i.as_str(), *c)),
            threshold,
            allowed,
        );
        if let Some(note) = &decision.note {
            self.out.notes.push(format!("node '{node}': {note}"));
        }
        if let Some((intent, confidence)) = &hit {
            let accepted = decision.intent.as_deref() == Some(intent.as_str());
            self.out.classification = Some(Classification {
                node: node.into(),
                classifier: set.into(),
                intent: intent.clone(),
                confidence: *confidence,
                threshold,
                accepted,
            });
            if !accepted && decision.intent.is_none() && *confidence < threshold {
                self.out.notes.push(format!(
                        "node '{node}': intent '{intent}' at {confidence:.2} is below {threshold:.2}; took the fallback"
                    ));
            }
        }
        if decision.by == "rule" {
            self.out.rule_intent = decision.intent.clone();
        }
        decision.intent
    }
}

/// Does the answer of an `llm_stream` node whose `next` is this reach an
/// `execute_tags` node before another LLM call or the end? Then its tags
/// are applied, so the model is told about them and they are kept out of
/// the streamed `content`.
fn tags_follow(tree: &super::model::Tree, next: Option<&str>) -> bool {
    let mut queue: Vec<&str> = next.into_iter().collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = queue.pop() {
        if !seen.insert(id) {
            continue;
        }
        match tree.nodes.get(id).map(|d| &d.node) {
            Some(Node::ExecuteTags { .. }) => return true,
            Some(Node::LlmStream { .. }) | None => {}
            Some(node) => queue.extend(node.edges().into_iter().filter_map(|(_, t)| t)),
        }
    }
    false
}

/// The sink an `llm_stream` node streams through when tags follow: its
/// `content` passes through a [`tags::StreamStripper`].
struct TagFilter<'s> {
    inner: &'s mut dyn EventSink,
    stripper: tags::StreamStripper,
}

impl EventSink for TagFilter<'_> {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::Content { data } => {
                let data = self.stripper.push(data);
                if !data.is_empty() {
                    self.inner.emit(&Event::Content { data });
                }
            }
            other => self.inner.emit(other),
        }
    }
}

/// Walk `engine`'s tree for one utterance.
pub fn walk(
    engine: &Engine,
    input: WalkInput,
    host: &mut dyn Host,
    sink: &mut dyn EventSink,
) -> Result<WalkOutcome, WalkError> {
    let tree = engine.tree();
    let mut w = Walk {
        engine,
        out: WalkOutcome {
            phase: if input.phase.is_empty() {
                super::state::IDLE.into()
            } else {
                input.phase.clone()
            },
            state: input.state.clone(),
            ..Default::default()
        },
        input,
        parts: Vec::new(),
        said_any: false,
        classified: HashMap::new(),
        attempts: Vec::new(),
    };
    let max_steps = engine.max_steps();
    let mut current = tree.entry.clone();
    let fail = |w: &Walk<'_>, failure: WalkFailure| WalkError {
        failure,
        path: w.out.path.clone(),
        notes: w.out.notes.clone(),
    };
    for _ in 0..max_steps {
        let Some(def) = tree.nodes.get(&current) else {
            return Err(fail(
                &w,
                WalkFailure::MissingNode {
                    node: current.clone(),
                },
            ));
        };
        w.out.path.push(current.clone());
        w.out
            .recommendations
            .extend(def.recommendations.iter().cloned());
        let missing = |field: &str| WalkFailure::MissingBranch {
            node: current.clone(),
            field: field.into(),
        };
        let next: Option<String> = match &def.node {
            Node::End {} => {
                // A failed action counts as the answer only when it said
                // why and no LLM answered after it.
                for (name, ok, said) in std::mem::take(&mut w.attempts) {
                    if ok || (said && w.out.llm.is_none()) {
                        w.out.actions.push(name);
                    } else {
                        w.out.fell_through.push(name);
                    }
                }
                let answer = w.parts.join(" ");
                w.out.answer = answer;
                w.out.recommendations.dedup();
                return Ok(w.out);
            }
            Node::Entry { next } => next.clone(),
            Node::StateCheck {
                key,
                equals,
                on_true,
                on_false,
            } => {
                let value = match StateKey::parse(key) {
                    Some(StateKey::Device(k)) => {
                        device_value(&engine.env().store, &w.out.device_state, &k)
                    }
                    Some(StateKey::Conversation(k)) => {
                        w.out.state.get(&k).cloned().unwrap_or(Value::Null)
                    }
                    None => Value::Null,
                };
                let hit = match equals {
                    Some(want) => as_text(&value).eq_ignore_ascii_case(&as_text(want)),
                    None => expr::truthy(&value),
                };
                if hit {
                    on_true.clone()
                } else {
                    on_false.clone()
                }
            }
            Node::Condition {
                expression,
                on_true,
                on_false,
            } => {
                let parsed = expr::parse_cached(expression).map_err(|error| {
                    fail(
                        &w,
                        WalkFailure::BadExpression {
                            node: current.clone(),
                            error,
                        },
                    )
                })?;
                if expr::truthy(&expr::eval(&parsed, &w.scope())) {
                    on_true.clone()
                } else {
                    on_false.clone()
                }
            }
            Node::PhaseSwitch { branches, default } => branches
                .get(&w.out.phase)
                .cloned()
                .or_else(|| default.clone()),
            Node::Classify {
                classifier,
                min_confidence,
                branches,
                fallback,
            } => {
                let allowed = |i: &str| branches.contains_key(i);
                match w.classify(&current, classifier, *min_confidence, &allowed) {
                    Some(intent) => match branches.get(&intent) {
                        Some(target) => Some(target.clone()),
                        None => {
                            w.out.notes.push(format!("node '{current}': intent '{intent}' has no branch; took the fallback"));
                            fallback.clone()
                        }
                    },
                    None => fallback.clone(),
                }
            }
            Node::Action {
                name,
                args,
                on_success,
                on_fail,
            } => {
                let args = fill(args, &w.scope());
                if w.action(&current, name, args, true, sink) {
                    on_success.clone()
                } else {
                    on_fail.clone()
                }
            }
            Node::LlmStream { prompt, next } => {
                if w.input.dry_run {
                    if w.input.preview {
                        host.preview_llm(prompt, tags_follow(tree, next.as_deref()));
                    }
                    w.out.notes.push(format!(
                        "dry run: skipped the LLM at node '{current}' (prompt '{prompt}')"
                    ));
                } else {
                    let tags = tags_follow(tree, next.as_deref());
                    let answer = if tags {
                        let mut filtered = TagFilter {
                            inner: sink,
                            stripper: tags::StreamStripper::new(),
                        };
                        let answer = host.llm_stream(prompt, true, &mut filtered);
                        let rest = filtered.stripper.finish();
                        if !rest.is_empty() {
                            sink.emit(&Event::Content { data: rest });
                        }
                        answer
                    } else {
                        host.llm_stream(prompt, false, sink)
                    };
                    match answer {
                        Ok(answer) => {
                            if !answer.text.trim().is_empty() {
                                w.said_any = true;
                                w.parts.push(answer.text.trim().to_string());
                                w.out.answered_by = Some(current.clone());
                            }
                            w.out.llm = Some(answer);
                        }
                        Err(e) => return Err(fail(&w, WalkFailure::Host(e))),
                    }
                }
                next.clone()
            }
            Node::ExecuteTags {
                on_changes,
                on_no_changes,
            } => {
                let (clean, found) = tags::extract(&w.parts.join(" "));
                w.parts = if clean.is_empty() {
                    Vec::new()
                } else {
                    vec![clean]
                };
                let mut changed = false;
                for tag in found {
                    match tags::action_for(&tag.name) {
                        Some((action, arg)) => {
                            let mut args = Map::new();
                            if !arg.is_empty() && !tag.arg.is_empty() {
                                args.insert(arg.into(), Value::String(tag.arg.clone()));
                            }
                            w.action(&current, action, Value::Object(args), false, sink);
                            changed = true;
                        }
                        None => w.out.notes.push(format!(
                            "node '{current}': unknown tag [[{}]] ignored",
                            tag.name
                        )),
                    }
                }
                if changed {
                    on_changes.clone()
                } else {
                    on_no_changes.clone()
                }
            }
            Node::PhaseTransition { to, next } => {
                w.out.phase = to.clone();
                next.clone()
            }
            Node::PublishEvent { event, data, next } => {
                let published = Published {
                    event: event.clone(),
                    data: fill(data, &w.scope()),
                    conversation_id: w.input.conversation_id,
                };
                if w.input.dry_run {
                    w.out
                        .notes
                        .push(format!("dry run: event '{event}' not published"));
                } else {
                    engine.publish(&published);
                    // The turn's own stream carries it too (a companion
                    // app on `/api/chat/stream` sees it in order).
                    sink.emit(&Event::Published {
                        event: published.event.clone(),
                        data: published.data.clone(),
                        conversation_id: published.conversation_id,
                    });
                }
                w.out.events.push(published);
                next.clone()
            }
            Node::SetState { key, value, next } => {
                let value = fill(value, &w.scope());
                match StateKey::parse(key) {
                    Some(StateKey::Conversation(k)) => {
                        if value.is_null() {
                            w.out.state.remove(&k);
                        } else {
                            w.out.state.insert(k, value);
                        }
                    }
                    Some(StateKey::Device(k)) if w.input.dry_run => {
                        w.out
                            .notes
                            .push(format!("dry run: device state '{k}' not written"));
                    }
                    Some(StateKey::Device(k)) => {
                        let value = (!value.is_null()).then(|| as_text(&value));
                        w.out.device_state.insert(k, value);
                    }
                    None => {
                        return Err(fail(
                            &w,
                            WalkFailure::BadKey {
                                node: current.clone(),
                                key: key.clone(),
                            },
                        ))
                    }
                }
                next.clone()
            }
        };
        current = match next {
            Some(n) => n,
            None => {
                let field = match &def.node {
                    Node::PhaseSwitch { .. } => "default",
                    Node::Classify { .. } => "fallback",
                    _ => "next branch",
                };
                return Err(fail(&w, missing(field)));
            }
        };
    }
    let tail: Vec<&str> = w
        .out
        .path
        .iter()
        .rev()
        .take(6)
        .rev()
        .map(String::as_str)
        .collect();
    Err(fail(
        &w,
        WalkFailure::TooManySteps {
            max_steps,
            last: tail.join(" → "),
        },
    ))
}

#[cfg(test)]
mod tests {
    //! Every node kind's effect, on a test-double classifier and LLM host
    //! (the real MiniLM classifier runs in tests/tree.rs).
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::events::CollectSink;
    use crate::nlu::Classifier;
    use crate::tree::actions::ActionEnv;
    use crate::tree::engine::{check, ClassifierSlot};
    use crate::tree::model::Tree;

    /// "time" → time_now, "date" → date_today, "add" → todo_add, else
    /// other at 0.3.
    struct Keywords;
    impl Classifier for Keywords {
        fn classify(&self, text: &str) -> Option<(String, f32)> {
            let t = text.to_lowercase();
            for (k, intent) in [
                ("time", "time_now"),
                ("date", "date_today"),
                ("add", "todo_add"),
                ("yes", "yes"),
                ("no", "no"),
            ] {
                if t.split_whitespace().any(|w| w == k) {
                    return Some((intent.into(), 0.9));
                }
            }
            Some(("other".into(), 0.3))
        }
    }

    struct FakeLlm {
        reply: String,
        prompts: Vec<String>,
        /// The `tags` flag of each call.
        tags: Vec<bool>,
    }
    impl Host for FakeLlm {
        fn llm_stream(
            &mut self,
            prompt: &str,
            tags: bool,
            sink: &mut dyn EventSink,
        ) -> Result<LlmAnswer, HostError> {
            self.prompts.push(prompt.into());
            self.tags.push(tags);
            sink.emit(&Event::Content {
                data: self.reply.clone(),
            });
            Ok(LlmAnswer {
                text: self.reply.clone(),
                model: "fake-model".into(),
                route: "simple".into(),
            })
        }
    }

    struct Setup {
        _dir: tempfile::TempDir,
        engine: Engine,
        store: Store,
    }

    fn setup(json: &str, classifier_ok: bool, max_steps: usize) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let tree = Tree::parse(json, "test.json").unwrap();
        let checked = check(tree, "test.json", None).unwrap();
        let mut config = Config::default();
        config.tree.max_steps = max_steps;
        config.tree.action_timeout_ms = 2000;
        let env = ActionEnv::local(store.clone(), "user-1");
        let make = |_: &str, _: &crate::nlu::examples::Examples| -> ClassifierSlot {
            if classifier_ok {
                Ok(Arc::new(Keywords))
            } else {
                Err("ONNX Runtime is not installed".into())
            }
        };
        Setup {
            _dir: dir,
            engine: Engine::new(checked, &config.tree, &config.nlu, env, &make),
            store,
        }
    }

    fn go(
        s: &Setup,
        text: &str,
        phase: &str,
        dry_run: bool,
    ) -> (Result<WalkOutcome, WalkError>, CollectSink, FakeLlm) {
        let mut sink = CollectSink::default();
        let mut host = FakeLlm {
            reply: "From the LLM [[todo.add: buy milk]].".into(),
            prompts: vec![],
            tags: vec![],
        };
        let input = WalkInput {
            text: text.into(),
            phase: phase.into(),
            dry_run,
            ..Default::default()
        };
        let r = s.engine.run(input, &mut host, &mut sink);
        (r, sink, host)
    }

    fn say(id: &str, text: &str, next: &str) -> String {
        format!(
            r#""{id}":{{"type":"action","name":"say","args":{{"text":"{text}"}},"on_success":"{next}","on_fail":"{next}"}}"#
        )
    }

    /// A tree exercising every kind: entry → state_check → phase_switch →
    /// condition → classify → action / llm_stream → execute_tags →
    /// set_state → phase_transition → publish_event → end.
    fn all_kinds() -> String {
        format!(
            r#"{{"version":"t","entry":"start","nodes":{{
            "start":{{"type":"entry","next":"dnd"}},
            "dnd":{{"type":"state_check","key":"device.dnd","on_true":"paused","on_false":"phase"}},
            {paused},
            "phase":{{"type":"phase_switch","branches":{{"confirm":"confirming"}},"default":"hello"}},
            {confirming},
            "hello":{{"type":"condition","expression":"text matches '^hello'","on_true":"greet","on_false":"classify"}},
            {greet},
            "classify":{{"type":"classify","classifier":"device","min_confidence":0.5,
               "branches":{{"time_now":"time","todo_add":"add"}},"fallback":"llm"}},
            "time":{{"type":"action","name":"time_now","on_success":"remember","on_fail":"done","recommendations":["What's the date?"]}},
            "add":{{"type":"action","name":"todo_add","on_success":"done","on_fail":"done"}},
            "remember":{{"type":"set_state","key":"state.asked","value":"{{text}}","next":"to_confirm"}},
            "to_confirm":{{"type":"phase_transition","to":"confirm","next":"announce"}},
            "announce":{{"type":"publish_event","event":"answered","data":{{"said":"{{state.asked}}"}},"next":"done"}},
            "llm":{{"type":"llm_stream","prompt":"router","next":"tags"}},
            "tags":{{"type":"execute_tags","on_changes":"changed","on_no_changes":"done"}},
            "changed":{{"type":"set_state","key":"device.last_tagged","value":"yes","next":"done"}},
            "done":{{"type":"end"}}}}}}"#,
            paused = say("paused", "I am paused.", "done"),
            confirming = say("confirming", "Still confirming.", "done"),
            greet = say("greet", "Hello to you.", "done"),
        )
    }

    #[test]
    fn entry_classify_action_set_state_phase_transition_publish_end() {
        let s = setup(&all_kinds(), true, 50);
        let events = s.engine.subscribe();
        /// The voice loop's feedback seam, as a light would see it.
        struct Lights(std::sync::Mutex<Vec<String>>);
        impl crate::tree::engine::Feedback for Lights {
            fn published(&self, event: &Published) {
                self.0.lock().unwrap().push(event.event.clone());
            }
        }
        let lights = std::sync::Arc::new(Lights(Default::default()));
        s.engine.add_feedback(lights.clone());
        let (r, sink, host) = go(&s, "what time is it", "idle", false);
        let out = r.unwrap();
        assert_eq!(
            out.path,
            [
                "start",
                "dnd",
                "phase",
                "hello",
                "classify",
                "time",
                "remember",
                "to_confirm",
                "announce",
                "done"
            ]
        );
        assert!(out.answer.starts_with("It's "), "{}", out.answer);
        assert_eq!(out.actions, ["time_now"]);
        assert!(host.prompts.is_empty(), "no LLM for a device intent");
        assert_eq!(
            out.classification
                .as_ref()
                .map(|c| (c.intent.as_str(), c.accepted)),
            Some(("time_now", true))
        );
        // set_state with a template, phase_transition, publish_event.
        assert_eq!(out.state.get("asked"), Some(&json!("what time is it")));
        assert_eq!(out.phase, "confirm");
        let published = events.try_recv().unwrap();
        assert_eq!(published.event, "answered");
        assert_eq!(published.data, json!({"said": "what time is it"}));
        assert_eq!(*lights.0.lock().unwrap(), ["answered"]);
        // …and the turn's own stream carries it, before the answer's end.
        assert!(
            sink.events.contains(&Event::Published {
                event: "answered".into(),
                data: json!({"said": "what time is it"}),
                conversation_id: None,
            }),
            "{:?}",
            sink.events
        );
        // R-SSE: thinking for the action, one content sentence.
        assert_eq!(
            sink.events[0],
            Event::Thinking {
                tool: "time_now".into()
            }
        );
        assert_eq!(sink.content(), out.answer);
        assert_eq!(out.recommendations, ["What's the date?"]);
    }

    #[test]
    fn state_check_phase_switch_and_condition_branch() {
        let s = setup(&all_kinds(), true, 50);
        let (r, ..) = go(&s, "what time is it", "confirm", false);
        assert_eq!(
            r.unwrap().answer,
            "Still confirming.",
            "phase_switch took the phase branch"
        );
        let (r, ..) = go(&s, "hello there", "idle", false);
        assert_eq!(r.unwrap().answer, "Hello to you.", "condition matched");
        s.store.set_device_state("dnd", "on").unwrap();
        let (r, ..) = go(&s, "what time is it", "idle", false);
        assert_eq!(
            r.unwrap().answer,
            "I am paused.",
            "state_check saw device.dnd"
        );
        s.store.set_device_state("dnd", "off").unwrap();
        let (r, ..) = go(&s, "what time is it", "idle", false);
        assert!(r.unwrap().answer.starts_with("It's "));
    }

    #[test]
    fn classify_fallback_llm_stream_and_execute_tags() {
        let s = setup(&all_kinds(), true, 50);
        let (r, sink, host) = go(&s, "explain photosynthesis", "idle", false);
        let out = r.unwrap();
        assert_eq!(host.prompts, ["router"]);
        // Its answer reaches execute_tags: the host is told, and the
        // streamed content never shows the tag.
        assert_eq!(host.tags, [true]);
        assert_eq!(sink.content(), "From the LLM.");
        assert_eq!(out.path.last().map(String::as_str), Some("done"));
        assert!(
            out.path.contains(&"changed".to_string()),
            "on_changes taken: {:?}",
            out.path
        );
        assert_eq!(out.answer, "From the LLM.", "the tag is stripped");
        assert_eq!(out.actions, ["todo_add"]);
        assert!(
            out.notes.iter().any(|n| n.contains("below 0.50")),
            "{:?}",
            out.notes
        );
        assert_eq!(
            out.llm.as_ref().map(|l| l.model.as_str()),
            Some("fake-model")
        );
        let titles = crate::tools::todos::LocalTodos::new(s.store.clone(), "user-1");
        use crate::tools::todos::TodoBackend;
        assert_eq!(titles.list(false).unwrap()[0].title, "buy milk");
        // Device settings are the turn's to save, not the walk's.
        assert_eq!(
            out.device_state.get("last_tagged"),
            Some(&Some("yes".to_string()))
        );
        assert_eq!(s.store.device_state("last_tagged").unwrap(), None);
        assert!(sink.events.contains(&Event::Thinking {
            tool: "todo_add".into()
        }));
    }

    #[test]
    fn no_classifier_takes_the_fallback_and_says_why() {
        let s = setup(&all_kinds(), false, 50);
        // Not one of the unambiguous frames, so only a classifier could
        // take it.
        let (r, _, host) = go(&s, "how long is the flight to Paris", "idle", false);
        let out = r.unwrap();
        assert_eq!(host.prompts, ["router"]);
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("ONNX Runtime is not installed")),
            "{:?}",
            out.notes
        );
        let long = "what time is it ".repeat(700);
        let s = setup(&all_kinds(), true, 50);
        let (r, ..) = go(&s, &long, "idle", false);
        assert!(r.unwrap().notes.iter().any(|n| n.contains("longer than")));
    }

    #[test]
    fn dry_run_skips_state_changes_and_the_llm() {
        let s = setup(&all_kinds(), true, 50);
        let (r, _, host) = go(&s, "add buy milk", "idle", true);
        let out = r.unwrap();
        assert!(out.actions.is_empty());
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("dry run: skipped action 'todo_add'")),
            "{:?}",
            out.notes
        );
        use crate::tools::todos::TodoBackend;
        assert!(
            crate::tools::todos::LocalTodos::new(s.store.clone(), "user-1")
                .list(true)
                .unwrap()
                .is_empty()
        );
        let (r, _, _) = go(&s, "what time is it", "idle", true);
        assert!(
            r.unwrap().answer.starts_with("It's "),
            "read-only actions still run"
        );
        let (r, _, _) = go(&s, "explain photosynthesis", "idle", true);
        assert!(r
            .unwrap()
            .notes
            .iter()
            .any(|n| n.contains("dry run: skipped the LLM")));
        assert!(host.prompts.is_empty());
        assert_eq!(s.store.device_state("last_tagged").unwrap(), None);
    }

    #[test]
    fn later_nodes_see_the_walks_own_device_changes() {
        let json = format!(
            r#"{{"version":"t","entry":"start","nodes":{{
            "start":{{"type":"entry","next":"pause"}},
            "pause":{{"type":"action","name":"dnd_on","on_success":"check","on_fail":"done"}},
            "check":{{"type":"state_check","key":"device.dnd","equals":"on","on_true":"vol","on_false":"done"}},
            "vol":{{"type":"set_state","key":"device.volume","value":"20","next":"louder"}},
            "louder":{{"type":"action","name":"volume_up","on_success":"drop","on_fail":"done"}},
            "drop":{{"type":"set_state","key":"device.last_answer","value":null,"next":"tell"}},
            {tell},
            "done":{{"type":"end"}}}}}}"#,
            tell = say("tell", "dnd {device.dnd}", "done"),
        );
        let s = setup(&json, true, 50);
        s.store.set_device_state("last_answer", "old").unwrap();
        let (r, ..) = go(&s, "pause", "idle", false);
        let out = r.unwrap();
        assert!(out.answer.contains("Volume 30 percent."), "{}", out.answer);
        assert!(out.answer.ends_with("dnd on"), "{}", out.answer);
        let on = |v: &str| Some(v.to_string());
        assert_eq!(
            out.device_state,
            BTreeMap::from([
                ("dnd".to_string(), on("on")),
                ("last_answer".to_string(), None),
                ("volume".to_string(), on("30")),
            ])
        );
        assert_eq!(s.store.device_state("dnd").unwrap(), None);
        assert_eq!(s.store.device_state("last_answer").unwrap(), on("old"));
    }

    #[test]
    fn default_tree_without_onnx_still_stops_and_falls_back_with_a_reason() {
        let s = setup(crate::tree::DEFAULT_TREE, false, 50);
        let (r, ..) = go(&s, "Stop!", "idle", false);
        let out = r.unwrap();
        assert_eq!(out.answer, "Okay.");
        assert!(
            out.path.contains(&"stop_words".to_string())
                && out.path.contains(&"stop_event".to_string()),
            "{:?}",
            out.path
        );
        assert_eq!(out.events[0].event, "stop");
        // An unambiguous frame answers without the classifier...
        let (r, _, host) = go(&s, "what time is it", "idle", false);
        let out = r.unwrap();
        assert!(host.prompts.is_empty(), "{:?}", out.notes);
        assert_eq!(out.actions, ["time_now"]);
        assert_eq!(out.rule_intent.as_deref(), Some("time_now"));
        // ...anything else falls back with the reason.
        let (r, _, host) = go(&s, "how long is the flight to Paris", "idle", false);
        let out = r.unwrap();
        assert_eq!(host.prompts, ["router"], "the router graph answers");
        assert!(
            out.notes.iter().any(|n| n
                .contains("classifier 'device' is unavailable (ONNX Runtime is not installed)")),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn the_step_bound_is_an_error_not_a_hang() {
        // A legal cycle (it contains a classify node) that never ends.
        let json = r#"{"version":"t","entry":"c","nodes":{
            "c":{"type":"classify","branches":{"time_now":"s"},"fallback":"c2"},
            "s":{"type":"set_state","key":"state.n","value":1,"next":"c"},
            "c2":{"type":"end"}}}"#;
        let s = setup(json, true, 50);
        let (r, ..) = go(&s, "what time is it", "idle", false);
        let err = r.unwrap_err();
        assert!(err.to_string().contains("more than 50 steps"), "{err}");
        assert!(matches!(
            err.failure,
            WalkFailure::TooManySteps { max_steps: 50, .. }
        ));
        assert_eq!(err.path.len(), 50);
        let s = setup(json, true, 7);
        let (r, ..) = go(&s, "what time is it", "idle", false);
        assert!(r.unwrap_err().to_string().contains("more than 7 steps"));
    }
}
