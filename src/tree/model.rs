//! The tree file format (R-TREE): `{"version", "entry", "nodes": {id: {"type": …}}}`.
//!
//! Parsing is done node by node so that a mistake names the node it is in
//! ("node 'ask': unknown field `on_ture`"). Branch targets are optional at
//! parse time on purpose: a missing branch is a *validation* issue reported
//! with the node id and its path from the entry (see [`super::validate`]),
//! not an opaque serde message.
//!
//! Every node may also carry `"description"` (documentation, ignored) and
//! `"recommendations"` (suggested follow-ups sent in the `recommendation`
//! frame when the walk passes the node).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::TreeError;

/// A parsed tree file.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub version: String,
    /// The node id the walk starts at.
    pub entry: String,
    pub description: String,
    /// Intent example files for classify nodes: set name → path (relative to
    /// the tree file). The shipped sets (`device`, `confirm`) need no entry.
    pub intent_sets: BTreeMap<String, String>,
    pub nodes: BTreeMap<String, NodeDef>,
}

/// One node: its kind plus the fields every kind may carry.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub node: Node,
    pub recommendations: Vec<String>,
}

/// The twelve node kinds of R-TREE and their device meanings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Node {
    /// Start marker: go to `next`.
    Entry { next: Option<String> },
    /// Test a stored flag: `key` is `device.<k>` (device_state, e.g.
    /// `device.dnd`) or `state.<k>` (this conversation's tree state); a bare
    /// key means `device.`. True when the value equals `equals` if given,
    /// else when it is truthy (not missing, "", "0", "off", "false", null).
    StateCheck {
        key: String,
        #[serde(default)]
        equals: Option<Value>,
        on_true: Option<String>,
        on_false: Option<String>,
    },
    /// A small boolean expression over `text`, `phase`, `intent`,
    /// `confidence`, `state.*`, `device.*` (see [`super::expr`]).
    Condition {
        expression: String,
        on_true: Option<String>,
        on_false: Option<String>,
    },
    /// Branch on the conversation's phase (idle, confirm_delete, …).
    PhaseSwitch {
        #[serde(default)]
        branches: BTreeMap<String, String>,
        default: Option<String>,
    },
    /// Classify the utterance with the intent set `classifier`; go to
    /// `branches[intent]` when the confidence reaches `min_confidence`
    /// (default: `[nlu] threshold`), else (or with no model) to `fallback`.
    Classify {
        #[serde(default = "default_classifier")]
        classifier: String,
        #[serde(default)]
        min_confidence: Option<f32>,
        #[serde(default)]
        branches: BTreeMap<String, String>,
        fallback: Option<String>,
    },
    /// Run a device action by name (5 s timeout; state-changing actions are
    /// skipped under dry-run). String args may use `{text}`, `{intent}`,
    /// `{phase}`, `{state.KEY}` templates.
    Action {
        name: String,
        #[serde(default)]
        args: Value,
        on_success: Option<String>,
        on_fail: Option<String>,
    },
    /// Let a language model answer, streaming `content`. `prompt` is
    /// `router` (hand the turn to the router graph: simple / context /
    /// persona), `simple`, `persona`, or a literal system prompt.
    LlmStream {
        prompt: String,
        next: Option<String>,
    },
    /// Apply the `[[name: arg]]` tags the LLM wrote (e.g. `[[todo.add:
    /// milk]]`), strip them from what is spoken.
    ExecuteTags {
        on_changes: Option<String>,
        on_no_changes: Option<String>,
    },
    /// Set the conversation's phase; the next turn's `phase_switch` sees it.
    PhaseTransition { to: String, next: Option<String> },
    /// Publish an event to subscribers (LEDs, API clients): see
    /// [`super::Engine::subscribe`].
    PublishEvent {
        event: String,
        #[serde(default)]
        data: Value,
        next: Option<String>,
    },
    /// Write `value` at `key` (`state.<k>` conversation state, or
    /// `device.<k>`); `null` removes it.
    SetState {
        key: String,
        value: Value,
        next: Option<String>,
    },
    /// Finish the walk.
    End {},
}

fn default_classifier() -> String {
    "device".into()
}

impl Node {
    /// The kind's name as written in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Entry { .. } => "entry",
            Node::StateCheck { .. } => "state_check",
            Node::Condition { .. } => "condition",
            Node::PhaseSwitch { .. } => "phase_switch",
            Node::Classify { .. } => "classify",
            Node::Action { .. } => "action",
            Node::LlmStream { .. } => "llm_stream",
            Node::ExecuteTags { .. } => "execute_tags",
            Node::PhaseTransition { .. } => "phase_transition",
            Node::PublishEvent { .. } => "publish_event",
            Node::SetState { .. } => "set_state",
            Node::End {} => "end",
        }
    }

    /// Every outgoing edge: (field name, target if present). Fields that a
    /// kind requires appear even when missing, so the validator can report
    /// them.
    pub fn edges(&self) -> Vec<(String, Option<&str>)> {
        fn one<'a>(name: &str, t: &'a Option<String>) -> (String, Option<&'a str>) {
            (name.to_string(), t.as_deref())
        }
        match self {
            Node::Entry { next }
            | Node::LlmStream { next, .. }
            | Node::PhaseTransition { next, .. }
            | Node::PublishEvent { next, .. }
            | Node::SetState { next, .. } => vec![one("next", next)],
            Node::StateCheck {
                on_true, on_false, ..
            }
            | Node::Condition {
                on_true, on_false, ..
            } => vec![one("on_true", on_true), one("on_false", on_false)],
            Node::PhaseSwitch { branches, default } => {
                let mut out: Vec<_> = branches
                    .iter()
                    .map(|(k, v)| (format!("branches.{k}"), Some(v.as_str())))
                    .collect();
                out.push(one("default", default));
                out
            }
            Node::Classify {
                branches, fallback, ..
            } => {
                let mut out: Vec<_> = branches
                    .iter()
                    .map(|(k, v)| (format!("branches.{k}"), Some(v.as_str())))
                    .collect();
                out.push(one("fallback", fallback));
                out
            }
            Node::Action {
                on_success,
                on_fail,
                ..
            } => vec![one("on_success", on_success), one("on_fail", on_fail)],
            Node::ExecuteTags {
                on_changes,
                on_no_changes,
            } => vec![
                one("on_changes", on_changes),
                one("on_no_changes", on_no_changes),
            ],
            Node::End {} => Vec::new(),
        }
    }

    /// Nodes that may legitimately sit on a cycle: each visit waits on new
    /// input (a classification or an LLM answer).
    pub fn breaks_cycles(&self) -> bool {
        matches!(self, Node::Classify { .. } | Node::LlmStream { .. })
    }
}

/// The top-level object, before the nodes are parsed one by one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTree {
    version: String,
    entry: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    intent_sets: BTreeMap<String, String>,
    nodes: serde_json::Map<String, Value>,
}

impl Tree {
    /// Parse tree JSON; `label` names the source in errors (a file path or
    /// "the default tree").
    pub fn parse(json: &str, label: &str) -> Result<Tree, TreeError> {
        let parse_err = |message: String| TreeError::Parse {
            file: label.to_string(),
            message,
        };
        let raw: RawTree = serde_json::from_str(json).map_err(|e| parse_err(e.to_string()))?;
        let mut nodes = BTreeMap::new();
        for (id, value) in raw.nodes {
            let Value::Object(mut map) = value else {
                return Err(parse_err(format!("node '{id}' is not a JSON object")));
            };
            map.remove("description");
            let recommendations = match map.remove("recommendations") {
                None => Vec::new(),
                Some(v) => serde_json::from_value::<Vec<String>>(v).map_err(|_| {
                    parse_err(format!(
                        "node '{id}': recommendations must be a list of strings"
                    ))
                })?,
            };
            let node: Node = serde_json::from_value(Value::Object(map))
                .map_err(|e| parse_err(format!("node '{id}': {e}")))?;
            nodes.insert(
                id,
                NodeDef {
                    node,
                    recommendations,
                },
            );
        }
        Ok(Tree {
            version: raw.version,
            entry: raw.entry,
            description: raw.description,
            intent_sets: raw.intent_sets,
            nodes,
        })
    }

    /// Read and parse a tree file.
    pub fn load(path: &Path) -> Result<Tree, TreeError> {
        let label = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| TreeError::Parse {
            file: label.clone(),
            message: format!("cannot read it ({e})"),
        })?;
        let text = String::from_utf8(bytes).map_err(|_| TreeError::Parse {
            file: label.clone(),
            message: "it is not UTF-8 text".into(),
        })?;
        Self::parse(&text, &label)
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.get(id).map(|d| &d.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_names_the_bad_node() {
        let json = r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"entry","next":"c","description":"start"},
            "c":{"type":"end","recommendations":["again"]}}}"#;
        let tree = Tree::parse(json, "t.json").unwrap();
        assert_eq!(tree.node("e").unwrap().kind(), "entry");
        assert_eq!(tree.nodes["c"].recommendations, vec!["again"]);

        let bad = r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"state_check","key":"dnd","on_ture":"x"}}}"#;
        let err = Tree::parse(bad, "t.json").unwrap_err().to_string();
        assert!(
            err.contains("t.json") && err.contains("node 'e'") && err.contains("on_ture"),
            "{err}"
        );
        assert!(!err.contains('\n'));

        let unknown = r#"{"version":"1","entry":"e","nodes":{"e":{"type":"teleport"}}}"#;
        let err = Tree::parse(unknown, "t.json").unwrap_err().to_string();
        assert!(err.contains("teleport"), "{err}");

        let not_json = Tree::parse("{nope", "t.json").unwrap_err().to_string();
        assert!(not_json.starts_with("t.json"), "{not_json}");
    }
}
