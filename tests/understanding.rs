//! The no-wrong-action gate by effect (issue 16 point 2): every utterance
//! of tests/data/understanding.tsv runs one whole turn (`run_turn`, the
//! default tree, the real MiniLM classifier, no LLM) on a fresh, seeded
//! state, and the state afterwards is compared with what was asked. Models
//! are loaded once for the binary; the device's state is reset to the same
//! seed before each utterance and every turn is a new conversation.
//!
//! Counted: commands understood (the asked effect happened), wrong actions
//! (a state change nobody asked for, the wrong item, or a device answer to
//! a trap), and the rest (handed to the router graph or a question asked).
//! Targets: 0 wrong actions, ≥ 95 % of commands understood.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use earshot::agent::turn::{run_turn, TurnInput};
use earshot::cancel::CancelToken;
use earshot::config::Config;
use earshot::events::{CollectSink, Event};
use earshot::nlu::Embedder;
use earshot::store::Store;
use earshot::tools::todos::{LocalTodos, TodoBackend};
use earshot::tree::actions::memory::MemoryOps;

const TODOS: &[&str] = &[
    "eggs",
    "milk",
    "call mum",
    "book the dentist",
    "pay the gas bill",
    "water the plants",
    "bread",
];
const MEMORIES: &[&str] = &[
    "my sister is called Ana",
    "I like jazz",
    "my car is a blue Golf",
];
const USER: &str = "user-1";

fn embedder() -> Arc<dyn Embedder> {
    static E: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    E.get_or_init(|| {
        let config = Config {
            models_dir: common::models_dir(),
            ..Default::default()
        };
        earshot::nlu::load_embedder(&config.nlu, &config.paths()).expect("MiniLM model in models/")
    })
    .clone()
}

/// What the device's state looked like: open and done to-dos, memories,
/// volume and do-not-disturb.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    open: BTreeSet<String>,
    done: BTreeSet<String>,
    memories: BTreeSet<String>,
    volume: Option<String>,
    dnd: Option<String>,
}

fn snapshot(store: &Store, memory: &dyn MemoryOps) -> Snapshot {
    let items = LocalTodos::new(store.clone(), USER).list(true).unwrap();
    Snapshot {
        open: items
            .iter()
            .filter(|i| !i.done)
            .map(|i| i.title.clone())
            .collect(),
        done: items
            .iter()
            .filter(|i| i.done)
            .map(|i| i.title.clone())
            .collect(),
        memories: memory.list(USER).unwrap().into_iter().collect(),
        volume: store.device_state("volume").unwrap(),
        dnd: store.device_state("dnd").unwrap(),
    }
}

fn normal(s: &str) -> String {
    let s = s.to_lowercase();
    let s = s.trim_matches(|c: char| !c.is_alphanumeric());
    s.strip_prefix("the ")
        .or_else(|| s.strip_prefix("some "))
        .or_else(|| s.strip_prefix("a "))
        .unwrap_or(s)
        .to_string()
}

enum Verdict {
    Understood,
    Wrong(String),
    NotUnderstood(String),
}

fn judge(
    expect: &str,
    arg: &str,
    before: &Snapshot,
    after: &Snapshot,
    actions: &[String],
    answer: &str,
) -> Verdict {
    let device_actions: Vec<&String> = actions.iter().collect();
    let changed = before != after;
    let what = format!("actions {actions:?}, answer {answer:?}");
    if expect == "trap" {
        return if changed {
            Verdict::Wrong(format!("state changed: {before:?} → {after:?}; {what}"))
        } else if !device_actions.is_empty() {
            Verdict::Wrong(format!("a device action answered: {what}"))
        } else {
            Verdict::Understood
        };
    }
    let other_action = device_actions.iter().any(|a| {
        let a = a.as_str();
        let ok = match expect {
            "todo_delete" => a == "todo_delete_request",
            "pause" => a == "dnd_on",
            "resume" => a == "dnd_off",
            "volume_up" | "volume_down" => a.starts_with("volume_"),
            e => a == e,
        };
        !ok
    });
    if other_action {
        return Verdict::Wrong(format!("another action: {what}"));
    }
    let mut want = before.clone();
    match expect {
        "todo_add" => {
            let added: Vec<&String> = after.open.difference(&before.open).collect();
            if !changed {
                return Verdict::NotUnderstood(what);
            }
            return if added.len() == 1
                && normal(added[0]) == normal(arg)
                && after.done == before.done
                && after.memories == before.memories
            {
                Verdict::Understood
            } else {
                Verdict::Wrong(format!("added {added:?}, wanted {arg:?}; {what}"))
            };
        }
        "todo_complete" => {
            want.open.remove(arg);
            want.done.insert(arg.to_string());
        }
        "memory_remember" => {
            let new: Vec<&String> = after.memories.difference(&before.memories).collect();
            if !changed {
                return Verdict::NotUnderstood(what);
            }
            return if new.len() == 1
                && new[0].to_lowercase().contains(&arg.to_lowercase())
                && after.open == before.open
            {
                Verdict::Understood
            } else {
                Verdict::Wrong(format!("remembered {new:?}, wanted {arg:?}; {what}"))
            };
        }
        "memory_forget" => {
            let gone: Vec<&String> = before.memories.difference(&after.memories).collect();
            if !changed {
                return Verdict::NotUnderstood(what);
            }
            return if gone.len() == 1
                && gone[0].to_lowercase().contains(&arg.to_lowercase())
                && after.memories.len() + 1 == before.memories.len()
            {
                Verdict::Understood
            } else {
                Verdict::Wrong(format!("forgot {gone:?}, wanted {arg:?}; {what}"))
            };
        }
        "volume_up" | "volume_down" => {
            if !changed {
                return Verdict::NotUnderstood(what);
            }
            let level: i64 = after.volume.as_deref().unwrap_or("").parse().unwrap_or(-1);
            let ok = if !arg.is_empty() {
                level.to_string() == arg
            } else if expect == "volume_up" {
                level > 50
            } else {
                (0..50).contains(&level)
            };
            let rest_same = after.open == before.open && after.memories == before.memories;
            return if ok && rest_same {
                Verdict::Understood
            } else {
                Verdict::Wrong(format!("volume {level}; {what}"))
            };
        }
        "pause" => want.dnd = Some("on".into()),
        "resume" => want.dnd = Some("off".into()),
        _ => {}
    }
    if *after == want
        && (changed || !device_actions.is_empty())
        && (arg.is_empty() || expect != "calculate" || answer.contains(arg))
    {
        let named = match expect {
            "todo_delete" => answer.to_lowercase().contains(&arg.to_lowercase()),
            _ => true,
        };
        if named {
            return Verdict::Understood;
        }
        return Verdict::Wrong(format!("asked about another item, wanted {arg:?}; {what}"));
    }
    if changed {
        return Verdict::Wrong(format!("state {before:?} → {after:?}; {what}"));
    }
    if expect == "calculate" && !device_actions.is_empty() {
        return Verdict::Wrong(format!("wrong result, wanted {arg}; {what}"));
    }
    Verdict::NotUnderstood(what)
}

/// One device for the whole run (models and classifiers built once), its
/// state reset to the seed before every utterance; every turn starts a new
/// conversation, so no phase or pending question carries over.
struct Device {
    _dir: tempfile::TempDir,
    services: earshot::agent::Services,
    store: Store,
}

impl Device {
    fn new() -> Device {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            state_dir: dir.path().to_path_buf(),
            models_dir: common::models_dir(),
            ..Default::default()
        };
        let store = Store::open(&config.database_path()).unwrap();
        let llm = Arc::new(earshot::llm::openai::OpenAiClient::new(&config.llm));
        let services = earshot::app::assemble(&config, store.clone(), llm, Some(embedder()), None);
        Device {
            _dir: dir,
            services,
            store,
        }
    }

    fn memory(&self) -> Arc<earshot::memory::Memory> {
        self.services.memory.clone().expect("memory module")
    }

    fn reset(&self, dnd: bool) {
        let todos = LocalTodos::new(self.store.clone(), USER);
        for item in todos.list(true).unwrap() {
            todos.delete(&item.title).unwrap();
        }
        for t in TODOS {
            todos.add(t).unwrap();
        }
        let memory = self.memory();
        for m in MemoryOps::list(memory.as_ref(), USER).unwrap() {
            MemoryOps::forget(memory.as_ref(), USER, &m).unwrap();
        }
        for m in MEMORIES {
            MemoryOps::remember(memory.as_ref(), USER, m).unwrap();
        }
        self.store.set_device_state("volume", "50").unwrap();
        self.store
            .set_device_state("dnd", if dnd { "on" } else { "off" })
            .unwrap();
    }

    fn run(&self, expect: &str, text: &str) -> (Snapshot, Snapshot, Vec<String>, String) {
        self.reset(expect == "resume");
        let memory = self.memory();
        let before = snapshot(&self.store, memory.as_ref());
        assert_eq!(before.open.len(), TODOS.len(), "reset failed");
        assert_eq!(before.memories.len(), MEMORIES.len(), "reset failed");
        let mut sink = CollectSink::default();
        run_turn(
            &self.services,
            TurnInput::text(text),
            &mut sink,
            &CancelToken::new(),
        );
        let (actions, answer) = sink
            .events
            .iter()
            .find_map(|e| match e {
                Event::Done(d) => Some((d.actions.clone(), d.response.clone())),
                _ => None,
            })
            .unwrap_or_default();
        let after = snapshot(&self.store, memory.as_ref());
        (before, after, actions, answer)
    }
}

#[test]
fn held_out_commands_and_traps_by_effect() {
    let device = Device::new();
    let data = std::fs::read_to_string(common::data("understanding.tsv")).unwrap();
    let rows: Vec<(String, String, String)> = data
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let expect = f.next().unwrap().to_string();
            let arg = f.next().unwrap_or_default().to_string();
            let text = f
                .next()
                .unwrap_or_else(|| panic!("bad row {l:?}"))
                .to_string();
            (expect, arg, text)
        })
        .collect();
    let started = std::time::Instant::now();
    let (mut commands, mut understood, mut traps) = (0, 0, 0);
    let mut wrong = Vec::new();
    let mut missed = Vec::new();
    for (expect, arg, text) in &rows {
        let (before, after, actions, answer) = device.run(expect, text);
        if expect == "trap" {
            traps += 1;
        } else {
            commands += 1;
        }
        match judge(expect, arg, &before, &after, &actions, &answer) {
            Verdict::Understood => {
                if expect != "trap" {
                    understood += 1;
                }
            }
            Verdict::Wrong(why) => wrong.push(format!("{expect} {text:?}: {why}")),
            Verdict::NotUnderstood(why) => missed.push(format!("{expect} {text:?}: {why}")),
        }
    }
    let pct = understood as f64 * 100.0 / commands.max(1) as f64;
    eprintln!(
        "understanding: {commands} commands, {understood} understood ({pct:.1} %), {traps} traps, {} wrong actions, {:.1} s\nwrong: {wrong:#?}\nnot understood: {missed:#?}",
        wrong.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        commands >= 300 && traps >= 120,
        "{commands} commands, {traps} traps"
    );
    assert!(wrong.is_empty(), "wrong actions: {wrong:#?}");
    assert!(pct >= 95.0, "only {pct:.1} % understood: {missed:#?}");
}
