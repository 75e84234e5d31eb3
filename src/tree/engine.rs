//! The tree, built once: the parsed and validated file, one classifier per
//! intent set, the device actions, and the subscribers of `publish_event`.
//!
//! Building never half-succeeds: a tree with errors is refused with a
//! one-line [`TreeError`] (the caller falls back to the router graph). A
//! classifier that cannot be built (no ONNX Runtime on this board, model
//! missing) does *not* refuse the tree: its classify nodes take their
//! fallback and the turn log says why. Nor does a broken user examples
//! file ([`super::user_intents`]): it is left out of its set and reported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::actions::{ActionEnv, ActionRegistry};
use super::interpreter::{self, Host, WalkError, WalkInput, WalkOutcome};
use super::model::Tree;
use super::user_intents::{self, Problem, UserIntents};
use super::validate::{self, Issue, Known, Severity};
use super::{TreeError, DEFAULT_TREE};
use crate::events::EventSink;
use crate::nlu::examples::{load_examples, parse_examples, Examples};
use crate::nlu::NluConfig;
use crate::nlu::{Classifier, Embedder};
use crate::paths::Paths;

/// The intent sets that ship with the device (usable from any tree).
pub const BUILTIN_SETS: &[(&str, &str)] = &[
    ("device", include_str!("intents/device.txt")),
    ("confirm", include_str!("intents/confirm.txt")),
];

/// An event a `publish_event` node sent (LEDs, API clients listen).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Published {
    pub event: String,
    pub data: Value,
    pub conversation_id: Option<i64>,
}

impl Published {
    /// As the R-SSE `event` frame (`{"type":"event",…,"timestamp"}`).
    pub fn to_event(&self) -> crate::events::Event {
        crate::events::Event::Published {
            event: self.event.clone(),
            data: self.data.clone(),
            conversation_id: self.conversation_id,
        }
    }
}

/// The device's feedback layer (lights, earcons) as the tree sees it: told
/// of every `publish_event` at once, on the walking thread, so it must not
/// block. The voice loop is meant to implement it; there is no LED or
/// earcon layer yet, so nothing does today (API clients listen through
/// [`Engine::subscribe`]).
pub trait Feedback: Send + Sync {
    fn published(&self, event: &Published);
}

/// A classifier, or why there is none (the builder's one-line reason).
pub type ClassifierSlot = Result<Arc<dyn Classifier>, String>;

/// Why an intent set has no classifier. Not fatal: the set's classify
/// nodes take their fallback and the turn log says why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClassifierError {
    /// Building it failed (no ONNX Runtime on this board, the embedding
    /// model missing); `reason` is the builder's one-line error and names
    /// the fix.
    #[error("intent set '{set}': {reason}")]
    Unavailable { set: String, reason: String },
    /// The tree never classifies with this set, so none was built.
    #[error("no classifier was built for intent set '{set}'")]
    NotBuilt { set: String },
}

impl ClassifierError {
    /// Why, without the set's name (for notes that already name it).
    pub fn reason(&self) -> String {
        match self {
            ClassifierError::Unavailable { reason, .. } => reason.clone(),
            other => other.to_string(),
        }
    }
}

/// A loaded, validated tree with what it needs to run.
pub struct Engine {
    tree: Tree,
    label: String,
    sets: BTreeMap<String, Examples>,
    classifiers: BTreeMap<String, ClassifierSlot>,
    actions: ActionRegistry,
    env: ActionEnv,
    max_steps: usize,
    action_timeout: Duration,
    default_threshold: f32,
    subscribers: Mutex<Vec<crossbeam_channel::Sender<Published>>>,
    feedback: Mutex<Vec<Arc<dyn Feedback>>>,
    warnings: Vec<Issue>,
    intent_problems: Vec<Problem>,
}

/// A parsed tree, its intent sets and its warnings: what `tree check`
/// reports and what [`Engine`] is built from.
pub struct Checked {
    pub tree: Tree,
    pub label: String,
    pub sets: BTreeMap<String, Examples>,
    pub warnings: Vec<Issue>,
}

/// Read the configured tree: `file`, or the shipped default when empty.
/// Returns the tree, its label for messages and the directory its
/// relative paths are resolved against.
pub fn read_tree(file: &str) -> Result<(Tree, String, Option<PathBuf>), TreeError> {
    if file.trim().is_empty() {
        let tree = Tree::parse(DEFAULT_TREE, "the default tree")?;
        return Ok((tree, "the default tree".into(), None));
    }
    let path = Path::new(file);
    let tree = Tree::load(path)?;
    Ok((
        tree,
        path.display().to_string(),
        path.parent().map(Path::to_path_buf),
    ))
}

/// Parse `tree`'s intent sets (built-in ones plus its `intent_sets` files),
/// then validate it. Errors refuse the tree; warnings are returned. No
/// user files: see [`check_with`].
pub fn check(tree: Tree, label: &str, base: Option<&Path>) -> Result<Checked, TreeError> {
    check_with(tree, label, base, &UserIntents::default()).0
}

/// [`check`] with the user's examples files ([`user_intents`]) merged
/// into the sets before the tree is validated (so a custom tree may
/// branch on an intent only a user file defines). The second value is
/// every problem of those files: they never refuse the tree — a file with
/// an error is left out of its set — so they come back whatever the
/// tree's verdict.
pub fn check_with(
    tree: Tree,
    label: &str,
    base: Option<&Path>,
    user: &UserIntents,
) -> (Result<Checked, TreeError>, Vec<Problem>) {
    let mut sets = match tree_sets(&tree, label, base) {
        Ok(sets) => sets,
        Err(e) => return (Err(e), user.problems.clone()),
    };
    let mut problems = user.problems.clone();
    problems.extend(user_intents::merge(&mut sets, user));
    let used = used_sets(&tree);
    for file in &user.files {
        if !used.contains(&file.set) {
            problems.push(Problem {
                file: file.path.display().to_string(),
                line: 0,
                message: format!(
                    "no classify node of {label} uses set '{}'; rename the file after a set the tree classifies with (e.g. device.txt)",
                    file.set
                ),
                severity: Severity::Warning,
            });
        }
    }
    problems.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    (validated(tree, label, sets), problems)
}

/// The shipped sets, parsed (they are tested, so an error here is a bug
/// in the build, reported as one).
pub fn builtin_sets(label: &str) -> Result<BTreeMap<String, Examples>, TreeError> {
    let mut sets = BTreeMap::new();
    for (name, text) in BUILTIN_SETS {
        let examples = parse_examples(text, &format!("intents/{name}.txt")).map_err(|e| {
            TreeError::Intents {
                file: label.into(),
                set: (*name).into(),
                message: e.to_string(),
            }
        })?;
        sets.insert(name.to_string(), examples);
    }
    Ok(sets)
}

/// The built-in sets plus `tree`'s `intent_sets` files (relative to `base`).
fn tree_sets(
    tree: &Tree,
    label: &str,
    base: Option<&Path>,
) -> Result<BTreeMap<String, Examples>, TreeError> {
    let mut sets = builtin_sets(label)?;
    for (name, rel) in &tree.intent_sets {
        let path = match base {
            Some(dir) if Path::new(rel).is_relative() => dir.join(rel),
            _ => PathBuf::from(rel),
        };
        let examples = load_examples(&path).map_err(|e| TreeError::Intents {
            file: label.into(),
            set: name.clone(),
            message: format!("{e:#}").replace('\n', " "),
        })?;
        sets.insert(name.clone(), examples);
    }
    Ok(sets)
}

/// The sets a tree classifies with: its classify nodes' and `device`
/// (shadow classification uses it whatever the tree).
pub fn used_sets(tree: &Tree) -> BTreeSet<String> {
    tree.nodes
        .values()
        .filter_map(|d| match &d.node {
            super::Node::Classify { classifier, .. } => Some(classifier.clone()),
            _ => None,
        })
        .chain(std::iter::once("device".to_string()))
        .collect()
}

/// Validate `tree` against `sets`: errors refuse it.
fn validated(
    tree: Tree,
    label: &str,
    sets: BTreeMap<String, Examples>,
) -> Result<Checked, TreeError> {
    let actions = ActionRegistry::device().names();
    let intents = |set: &str| {
        sets.get(set)
            .map(|e: &Examples| e.keys().cloned().collect())
    };
    let issues = validate::validate(
        &tree,
        &Known {
            actions: &actions,
            intents: &intents,
        },
    );
    let (errors, warnings): (Vec<Issue>, Vec<Issue>) = issues
        .into_iter()
        .partition(|i| i.severity == Severity::Error);
    if !errors.is_empty() {
        return Err(TreeError::Invalid {
            file: label.into(),
            issues: errors,
        });
    }
    Ok(Checked {
        tree,
        label: label.into(),
        sets,
        warnings,
    })
}

/// The problems of `user`'s files merged into the built-in sets only: the
/// check `tree check` runs when the tree itself cannot be read.
pub fn check_intents_alone(user: &UserIntents) -> Vec<Problem> {
    let mut problems = user.problems.clone();
    if let Ok(mut sets) = builtin_sets("the built-in sets") {
        problems.extend(user_intents::merge(&mut sets, user));
    }
    problems.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    problems
}

/// Log the user files' problems: an error says the file was left out, so
/// the reader of the log knows why a phrasing is not understood.
fn log_problems(problems: &[Problem]) {
    for p in problems {
        match p.severity {
            Severity::Error => tracing::warn!(
                "{p} (this examples file is left out; `earshot tree check` lists every problem)"
            ),
            Severity::Warning => tracing::info!("{p}"),
        }
    }
}

impl Engine {
    /// Build from a checked tree; `make` builds the classifier of each
    /// intent set the tree uses (its error becomes the fallback reason).
    pub fn new(
        checked: Checked,
        config: &super::TreeConfig,
        nlu: &NluConfig,
        env: ActionEnv,
        make: &dyn Fn(&str, &Examples) -> ClassifierSlot,
    ) -> Engine {
        let used = used_sets(&checked.tree);
        let classifiers = used
            .into_iter()
            .filter_map(|name| {
                let examples = checked.sets.get(&name)?;
                let slot = make(&name, examples);
                if let Err(why) = &slot {
                    tracing::warn!(set = %name, "intent classifier unavailable, its classify nodes will take their fallback: {why}");
                }
                Some((name, slot))
            })
            .collect();
        for w in &checked.warnings {
            tracing::debug!("{}: {w}", checked.label);
        }
        Engine {
            tree: checked.tree,
            label: checked.label,
            sets: checked.sets,
            classifiers,
            actions: ActionRegistry::device(),
            env,
            max_steps: config.max_steps.max(1),
            action_timeout: Duration::from_millis(config.action_timeout_ms.max(1)),
            default_threshold: nlu.threshold,
            subscribers: Mutex::new(Vec::new()),
            feedback: Mutex::new(Vec::new()),
            warnings: checked.warnings,
            intent_problems: Vec::new(),
        }
    }

    /// The device's engine: the configured tree with R-KNN classifiers over
    /// `embedder` (its embeddings cached under the state dir). `embedder`
    /// is the embedder or why it could not be loaded. The user's examples
    /// files (`$STATE_DIR/intents/*.txt`) are read here, at every build,
    /// so a new phrasing needs a restart, not a rebuild; their problems are
    /// logged and kept in [`Engine::intent_problems`].
    pub fn build(
        config: &super::TreeConfig,
        nlu: &NluConfig,
        paths: &Paths,
        env: ActionEnv,
        embedder: Result<Arc<dyn Embedder>, String>,
    ) -> Result<Engine, TreeError> {
        let (tree, label, base) = read_tree(&config.file)?;
        let user = user_intents::read_dir(&user_intents::dir(paths));
        let (checked, problems) = check_with(tree, &label, base.as_deref(), &user);
        log_problems(&problems);
        let checked = checked?;
        let state_dir = paths.state_dir.clone();
        let k = nlu.k;
        let make = |name: &str, examples: &Examples| -> ClassifierSlot {
            // The router's scorer (`nlu.scorer`), so `min_confidence` and
            // `nlu.threshold` are read against one kind of confidence.
            let embedder = embedder.clone()?;
            crate::nlu::scorer::build_classifier(
                nlu.scorer,
                k,
                embedder,
                examples,
                Some(&state_dir),
            )
            .map_err(|e| format!("intent set '{name}': {e:#}").replace('\n', " "))
        };
        let mut engine = Engine::new(checked, config, nlu, env, &make);
        engine.intent_problems = problems;
        Ok(engine)
    }

    /// Walk the tree for one utterance.
    pub fn run(
        &self,
        input: WalkInput,
        host: &mut dyn Host,
        sink: &mut dyn EventSink,
    ) -> Result<WalkOutcome, WalkError> {
        interpreter::walk(self, input, host, sink)
    }

    /// Shadow classification (R-KNN): the `device` set's best intent and
    /// confidence for any turn, whichever engine answers it.
    pub fn shadow_classify(&self, text: &str) -> Option<(String, f32)> {
        if text.trim().is_empty() || text.chars().count() > interpreter::MAX_CLASSIFY_CHARS {
            return None;
        }
        self.classifier("device").ok()?.classify(text)
    }

    /// Receive every event `publish_event` nodes send from now on.
    pub fn subscribe(&self) -> crossbeam_channel::Receiver<Published> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tx);
        rx
    }

    /// Tell `feedback` of every event `publish_event` nodes send from now on.
    pub fn add_feedback(&self, feedback: Arc<dyn Feedback>) {
        self.feedback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(feedback);
    }

    pub(crate) fn publish(&self, event: &Published) {
        {
            let mut subs = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
            subs.retain(|s| s.send(event.clone()).is_ok());
        }
        let feedback = self
            .feedback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for f in feedback {
            f.published(event);
        }
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }
    /// The tree's source, for messages ("the default tree" or a path).
    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn warnings(&self) -> &[Issue] {
        &self.warnings
    }
    /// Problems of the user's examples files found at build (files with
    /// errors were left out of their sets).
    pub fn intent_problems(&self) -> &[Problem] {
        &self.intent_problems
    }
    /// The intents of a set, if the tree knows it.
    pub fn intents(&self, set: &str) -> Option<Vec<String>> {
        self.sets.get(set).map(|e| e.keys().cloned().collect())
    }
    /// A set's classifier, or why it is unavailable.
    pub fn classifier(&self, set: &str) -> Result<Arc<dyn Classifier>, ClassifierError> {
        match self.classifiers.get(set) {
            Some(Ok(c)) => Ok(c.clone()),
            Some(Err(why)) => Err(ClassifierError::Unavailable {
                set: set.into(),
                reason: why.clone(),
            }),
            None => Err(ClassifierError::NotBuilt { set: set.into() }),
        }
    }
    /// Whether every classifier the tree uses is available (the first one
    /// that is not, otherwise).
    pub fn classifiers_ready(&self) -> Result<(), ClassifierError> {
        for (name, slot) in &self.classifiers {
            if let Err(why) = slot {
                return Err(ClassifierError::Unavailable {
                    set: name.clone(),
                    reason: why.clone(),
                });
            }
        }
        Ok(())
    }
    pub(crate) fn actions(&self) -> &ActionRegistry {
        &self.actions
    }
    pub(crate) fn env(&self) -> &ActionEnv {
        &self.env
    }
    pub(crate) fn max_steps(&self) -> usize {
        self.max_steps
    }
    pub(crate) fn action_timeout(&self) -> Duration {
        self.action_timeout
    }
    pub(crate) fn default_threshold(&self) -> f32 {
        self.default_threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(files: &[(&str, &str)]) -> (tempfile::TempDir, UserIntents) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let u = user_intents::read_dir(dir.path());
        (dir, u)
    }

    const CUSTOM: &str = r#"{"version":"1","entry":"c","nodes":{
        "c":{"type":"classify","classifier":"house","branches":{"lights_on":"z"},"fallback":"z"},
        "z":{"type":"end"}}}"#;

    #[test]
    fn user_files_add_phrasings_intents_and_sets_a_tree_can_branch_on() {
        let (_d, u) = user(&[
            (
                "device.txt",
                "## time_now\ngimme the hour\n## weather\nis it raining\n",
            ),
            ("house.txt", "## lights_on\nlights on please\n"),
        ]);
        let tree = Tree::parse(CUSTOM, "custom.json").unwrap();
        let (checked, problems) = check_with(tree, "custom.json", None, &u);
        assert!(problems.is_empty(), "{problems:?}");
        let checked = checked.unwrap();
        assert!(checked.sets["device"]["time_now"].contains(&"gimme the hour".to_string()));
        assert_eq!(checked.sets["device"]["weather"], ["is it raining"]);
        assert_eq!(checked.sets["house"]["lights_on"], ["lights on please"]);
        // Without the file the custom tree's set does not exist.
        let tree = Tree::parse(CUSTOM, "custom.json").unwrap();
        assert!(check(tree, "custom.json", None).is_err());
    }

    #[test]
    fn a_broken_or_unused_file_is_reported_and_never_refuses_the_tree() {
        let (_d, u) = user(&[
            (
                "device.txt",
                "gimme the hour\n## time_now\nok then\n## pause\nStop\n",
            ),
            ("house.txt", "## lights_on\nlights on please\n"),
        ]);
        let tree = Tree::parse(DEFAULT_TREE, "the default tree").unwrap();
        let (checked, problems) = check_with(tree, "the default tree", None, &u);
        let checked = checked.unwrap();
        assert_eq!(
            checked.sets["device"],
            builtin_sets("x").unwrap()["device"],
            "the broken file was left out"
        );
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(shown.len(), 3, "{shown:#?}");
        assert!(shown[0].contains("device.txt:1: utterance \"gimme the hour\" comes before"));
        assert!(
            shown[1].contains("device.txt:5: \"Stop\" is already an example of stop"),
            "a broken file is still checked against its set: {}",
            shown[1]
        );
        assert!(
            shown[2].contains("house.txt: no classify node of the default tree uses set 'house'")
        );
        assert_eq!(problems[2].severity, Severity::Warning);
        // An unreadable tree: the files are still checked, alone.
        assert_eq!(check_intents_alone(&u).len(), 2);
    }
}
