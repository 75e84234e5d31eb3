//! Checks a tree before it runs (R-TREE): unknown node ids, missing
//! branches, unreachable nodes, cycles that contain no `classify` or
//! `llm_stream` node (such a cycle would spin without new input), unknown
//! intents/actions/classifiers and bad expressions — each reported with the
//! node id and the path from the entry to it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::Serialize;

use super::model::{Node, Tree};

/// How bad an issue is: errors stop the tree from loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// What kind of problem, for callers and tests that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    UnknownId,
    MissingBranch,
    Unreachable,
    Cycle,
    UnknownIntent,
    UncoveredIntent,
    UnknownAction,
    UnknownClassifier,
    BadExpression,
    BadValue,
}

/// One problem found in a tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Issue {
    pub severity: Severity,
    pub kind: IssueKind,
    /// The node the problem is in.
    pub node: String,
    /// Node ids from the entry to `node` (just `[node]` when unreachable).
    pub path: Vec<String>,
    pub message: String,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node '{}' (path {}): {}",
            self.node,
            self.path.join(" → "),
            self.message
        )
    }
}

/// What the validator needs to know beyond the file itself.
pub struct Known<'a> {
    /// Action names the engine can run.
    pub actions: &'a [String],
    /// Intent set name → its intents; `None` when the set does not exist.
    pub intents: &'a dyn Fn(&str) -> Option<Vec<String>>,
}

/// Every issue of `tree`, errors first.
pub fn validate(tree: &Tree, known: &Known<'_>) -> Vec<Issue> {
    let mut issues = Vec::new();
    let paths = shortest_paths(tree);
    let path_to = |id: &str| -> Vec<String> {
        paths
            .get(id)
            .cloned()
            .unwrap_or_else(|| vec![id.to_string()])
    };
    let mut push = |severity, kind, node: &str, message: String| {
        issues.push(Issue {
            severity,
            kind,
            node: node.to_string(),
            path: path_to(node),
            message,
        })
    };

    if !tree.nodes.contains_key(&tree.entry) {
        push(
            Severity::Error,
            IssueKind::UnknownId,
            &tree.entry,
            format!("the tree's entry '{}' is not a node", tree.entry),
        );
    }

    for (id, def) in &tree.nodes {
        for (field, target) in def.node.edges() {
            match target {
                None => push(
                    Severity::Error,
                    IssueKind::MissingBranch,
                    id,
                    format!("{} node is missing its '{field}' branch", def.node.kind()),
                ),
                Some(t) if !tree.nodes.contains_key(t) => push(
                    Severity::Error,
                    IssueKind::UnknownId,
                    id,
                    format!("'{field}' points to '{t}', which is not a node"),
                ),
                Some(_) => {}
            }
        }
        match &def.node {
            Node::PhaseSwitch { branches, .. } if branches.is_empty() => push(
                Severity::Error,
                IssueKind::MissingBranch,
                id,
                "phase_switch has no branches (add e.g. {\"confirm_delete\": \"…\"})".into(),
            ),
            Node::Classify {
                classifier,
                branches,
                min_confidence,
                ..
            } => {
                if branches.is_empty() {
                    push(
                        Severity::Error,
                        IssueKind::MissingBranch,
                        id,
                        "classify has no branches".into(),
                    );
                }
                if let Some(m) = min_confidence {
                    if !(0.0..=1.0).contains(m) {
                        push(
                            Severity::Error,
                            IssueKind::BadValue,
                            id,
                            format!("min_confidence {m} is outside 0..1"),
                        );
                    }
                }
                match (known.intents)(classifier) {
                    None => push(
                        Severity::Error,
                        IssueKind::UnknownClassifier,
                        id,
                        format!("classifier '{classifier}' is not an intent set (declare it in \"intent_sets\")"),
                    ),
                    Some(intents) => {
                        for intent in branches.keys() {
                            if !intents.contains(intent) {
                                push(
                                    Severity::Error,
                                    IssueKind::UnknownIntent,
                                    id,
                                    format!("branch intent '{intent}' is not an intent of classifier '{classifier}'"),
                                );
                            }
                        }
                        let uncovered: Vec<&str> = intents
                            .iter()
                            .filter(|i| !branches.contains_key(*i))
                            .map(String::as_str)
                            .collect();
                        if !uncovered.is_empty() {
                            push(
                                Severity::Warning,
                                IssueKind::UncoveredIntent,
                                id,
                                format!(
                                    "intents of '{classifier}' without a branch take the fallback: {}",
                                    uncovered.join(", ")
                                ),
                            );
                        }
                    }
                }
            }
            Node::Action { name, args, .. } => {
                if !known.actions.iter().any(|a| a == name) {
                    push(
                        Severity::Error,
                        IssueKind::UnknownAction,
                        id,
                        format!(
                            "action '{name}' does not exist (known: {})",
                            known.actions.join(", ")
                        ),
                    );
                }
                if !(args.is_null() || args.is_object()) {
                    push(
                        Severity::Error,
                        IssueKind::BadValue,
                        id,
                        "args must be a JSON object".into(),
                    );
                }
            }
            Node::Condition { expression, .. } => {
                if let Err(e) = super::expr::parse(expression) {
                    push(
                        Severity::Error,
                        IssueKind::BadExpression,
                        id,
                        format!("expression '{expression}': {e}"),
                    );
                }
            }
            Node::StateCheck { key, .. } | Node::SetState { key, .. }
                if super::StateKey::parse(key).is_none() =>
            {
                push(
                    Severity::Error,
                    IssueKind::BadValue,
                    id,
                    format!("key '{key}' must be 'device.NAME', 'state.NAME' or 'NAME'"),
                );
            }
            Node::PhaseTransition { to, .. } if to.trim().is_empty() => push(
                Severity::Error,
                IssueKind::BadValue,
                id,
                "phase_transition needs a phase in 'to'".into(),
            ),
            Node::LlmStream { prompt, .. } if prompt.trim().is_empty() => push(
                Severity::Error,
                IssueKind::BadValue,
                id,
                "llm_stream needs a prompt ('router', 'simple', 'persona' or a system prompt)"
                    .into(),
            ),
            _ => {}
        }
    }

    if tree.nodes.contains_key(&tree.entry) {
        for id in tree.nodes.keys() {
            if !paths.contains_key(id) {
                push(
                    Severity::Error,
                    IssueKind::Unreachable,
                    id,
                    format!("no path from the entry '{}' reaches this node", tree.entry),
                );
            }
        }
    }

    for cycle in bare_cycles(tree) {
        let node = cycle[0].clone();
        push(
            Severity::Error,
            IssueKind::Cycle,
            &node,
            format!(
                "cycle {} has no classify or llm_stream node, so a walk would spin until the step limit",
                cycle.join(" → ")
            ),
        );
    }

    issues.sort_by_key(|i| i.severity != Severity::Error);
    issues
}

/// Shortest path (node ids) from the entry to each reachable node.
fn shortest_paths(tree: &Tree) -> HashMap<String, Vec<String>> {
    let mut paths: HashMap<String, Vec<String>> = HashMap::new();
    if !tree.nodes.contains_key(&tree.entry) {
        return paths;
    }
    paths.insert(tree.entry.clone(), vec![tree.entry.clone()]);
    let mut queue = VecDeque::from([tree.entry.clone()]);
    while let Some(id) = queue.pop_front() {
        let Some(node) = tree.node(&id) else { continue };
        let here = paths.get(&id).cloned().unwrap_or_default();
        for (_, target) in node.edges() {
            let Some(t) = target else { continue };
            if tree.nodes.contains_key(t) && !paths.contains_key(t) {
                let mut p = here.clone();
                p.push(t.to_string());
                paths.insert(t.to_string(), p);
                queue.push_back(t.to_string());
            }
        }
    }
    paths
}

/// Cycles among nodes that are neither classify nor llm_stream: remove
/// those nodes, and any cycle left is one that never waits for new input.
/// Each cycle is listed once, closed (`a → b → a`).
fn bare_cycles(tree: &Tree) -> Vec<Vec<String>> {
    let keep: BTreeSet<&str> = tree
        .nodes
        .iter()
        .filter(|(_, d)| !d.node.breaks_cycles())
        .map(|(id, _)| id.as_str())
        .collect();
    let succ: BTreeMap<&str, Vec<&str>> = keep
        .iter()
        .map(|id| {
            let next = tree
                .node(id)
                .map(|n| {
                    n.edges()
                        .into_iter()
                        .filter_map(|(_, t)| t)
                        .filter(|t| keep.contains(t))
                        .collect()
                })
                .unwrap_or_default();
            (*id, next)
        })
        .collect();
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut color: HashMap<&str, u8> = HashMap::new();
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut cycles = Vec::new();
    for start in &keep {
        if color.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        // Iterative DFS: (node, index of the next successor to visit).
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        color.insert(start, 1);
        while let Some((node, idx)) = stack.last().copied() {
            let next = succ.get(node).and_then(|s| s.get(idx)).copied();
            let Some(next) = next else {
                color.insert(node, 2);
                stack.pop();
                continue;
            };
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            match color.get(next).copied().unwrap_or(0) {
                0 => {
                    color.insert(next, 1);
                    stack.push((next, 0));
                }
                1 => {
                    let from = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|(n, _)| n.to_string()).collect();
                    let mut key = cycle.clone();
                    key.sort();
                    if seen.insert(key) {
                        cycle.push(next.to_string());
                        cycles.push(cycle);
                    }
                }
                _ => {}
            }
        }
    }
    cycles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str) -> Vec<Issue> {
        let tree = Tree::parse(json, "t.json").unwrap();
        let actions = vec!["say".to_string()];
        let intents =
            |set: &str| (set == "device").then(|| vec!["time".to_string(), "date".to_string()]);
        validate(
            &tree,
            &Known {
                actions: &actions,
                intents: &intents,
            },
        )
    }

    fn only(issues: &[Issue], kind: IssueKind) -> &Issue {
        let found: Vec<_> = issues.iter().filter(|i| i.kind == kind).collect();
        assert_eq!(found.len(), 1, "{issues:#?}");
        found[0]
    }

    #[test]
    fn a_good_tree_has_no_errors() {
        let issues = check(
            r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"entry","next":"c"},
            "c":{"type":"classify","branches":{"time":"say","date":"say"},"fallback":"end"},
            "say":{"type":"action","name":"say","args":{"text":"hi"},"on_success":"end","on_fail":"end"},
            "end":{"type":"end"}}}"#,
        );
        assert!(issues.is_empty(), "{issues:#?}");
    }

    #[test]
    fn unknown_id_names_node_field_and_path() {
        let issues = check(
            r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"entry","next":"chk"},
            "chk":{"type":"state_check","key":"dnd","on_true":"end","on_false":"nowhere"},
            "end":{"type":"end"}}}"#,
        );
        let i = only(&issues, IssueKind::UnknownId);
        assert_eq!(i.node, "chk");
        assert_eq!(i.path, vec!["e", "chk"]);
        assert!(
            i.to_string().contains("'on_false' points to 'nowhere'"),
            "{i}"
        );
    }

    #[test]
    fn missing_branch_unreachable_and_unknown_intent() {
        let issues = check(
            r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"entry","next":"cond"},
            "cond":{"type":"condition","expression":"phase == 'idle'","on_true":"c"},
            "c":{"type":"classify","branches":{"time":"end","weather":"end"},"fallback":"end"},
            "orphan":{"type":"end"},
            "end":{"type":"end"}}}"#,
        );
        let m = only(&issues, IssueKind::MissingBranch);
        assert_eq!(
            (m.node.as_str(), m.path.clone()),
            ("cond", vec!["e".into(), "cond".into()])
        );
        assert!(m.message.contains("on_false"));
        let u = only(&issues, IssueKind::Unreachable);
        assert_eq!(
            (u.node.as_str(), u.path.clone()),
            ("orphan", vec!["orphan".to_string()])
        );
        let w = only(&issues, IssueKind::UnknownIntent);
        assert_eq!(w.node, "c");
        assert_eq!(w.path, vec!["e", "cond", "c"]);
        assert!(w.message.contains("'weather'"));
        let cover = only(&issues, IssueKind::UncoveredIntent);
        assert_eq!(cover.severity, Severity::Warning);
    }

    #[test]
    fn cycles_without_classify_are_errors_with_classify_are_not() {
        let bad = check(
            r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"entry","next":"a"},
            "a":{"type":"set_state","key":"state.n","value":1,"next":"b"},
            "b":{"type":"condition","expression":"state.n","on_true":"a","on_false":"end"},
            "end":{"type":"end"}}}"#,
        );
        let c = only(&bad, IssueKind::Cycle);
        assert!(c.message.contains("a → b → a"), "{}", c.message);
        assert_eq!(c.path, vec!["e", "a"]);

        let ok = check(
            r#"{"version":"1","entry":"e","nodes":{
            "e":{"type":"entry","next":"c"},
            "c":{"type":"classify","branches":{"time":"a","date":"end"},"fallback":"end"},
            "a":{"type":"set_state","key":"state.n","value":1,"next":"c"},
            "end":{"type":"end"}}}"#,
        );
        assert!(ok.iter().all(|i| i.kind != IssueKind::Cycle), "{ok:#?}");
    }

    #[test]
    fn unknown_action_classifier_expression_and_entry() {
        let issues = check(
            r#"{"version":"1","entry":"start","nodes":{
            "e":{"type":"entry","next":"x"},
            "x":{"type":"action","name":"launch","on_success":"y","on_fail":"y"},
            "y":{"type":"condition","expression":"foo ==","on_true":"z","on_false":"z"},
            "z":{"type":"classify","classifier":"nope","branches":{"a":"e"},"fallback":"e"}}}"#,
        );
        let kinds: Vec<IssueKind> = issues.iter().map(|i| i.kind).collect();
        for k in [
            IssueKind::UnknownId,
            IssueKind::UnknownAction,
            IssueKind::BadExpression,
            IssueKind::UnknownClassifier,
        ] {
            assert!(kinds.contains(&k), "{k:?} in {issues:#?}");
        }
        assert!(issues
            .iter()
            .any(|i| i.node == "start" && i.message.contains("entry")));
    }
}
