//! `earshot tree check [FILE] [--intents DIR] [--json]` and `earshot tree
//! run FILE "TEXT" [--dry-run] [--conversation ID] [--json]`: validate a
//! tree and the user's examples files, or run one turn through a tree.
//!
//! `run` without `--dry-run` is a real turn (saved, tree state persisted)
//! with FILE as the tree and mode forced to `tree`. With `--dry-run`
//! nothing is saved: state-changing actions and LLM calls are skipped, and
//! the `done` frame carries conversation and turn id 0. Both end with a
//! `{"type":"trace", …}` line (JSON) — the nodes walked, the phase and state
//! after the turn, the notes — which is not part of the R-SSE stream.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use crate::agent::turn::{run_turn, TurnInput};
use crate::cancel::CancelToken;
use crate::events::{Done, Event, EventSink};
use crate::telemetry::TurnRecord;
use crate::tree::engine::{check_intents_alone, check_with, read_tree};
use crate::tree::interpreter::{NoLlm, WalkInput};
use crate::tree::user_intents;
use crate::tree::validate::Severity;

/// `earshot tree check [FILE] [--intents DIR]`: FILE defaults to the
/// configured tree (`[tree] file`, else the shipped one), DIR to
/// `$STATE_DIR/intents`. Exit 0 when the tree loads and no examples file
/// has an error (warnings are printed), 1 with one line per problem
/// otherwise. The config is read only for a default it needs.
pub fn check_file(
    config_path: Option<&Path>,
    file: Option<&Path>,
    intents: Option<&Path>,
    json: bool,
) -> Result<bool> {
    let config = match (file, intents) {
        (Some(_), Some(_)) => None,
        _ => Some(super::load_config(config_path)?.config),
    };
    let label = match (file, &config) {
        (Some(f), _) => f.display().to_string(),
        (None, Some(c)) => c.tree.file.clone(),
        (None, None) => String::new(),
    };
    let dir = match (intents, &config) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(c)) => user_intents::dir(&c.paths()),
        (None, None) => PathBuf::new(),
    };
    let user = user_intents::read_dir(&dir);
    let (result, problems) = match read_tree(&label) {
        Ok((tree, label, base)) => check_with(tree, &label, base.as_deref(), &user),
        Err(e) => (Err(e), check_intents_alone(&user)),
    };
    let label = match &result {
        Ok(checked) => checked.label.clone(),
        Err(_) if label.is_empty() => "the default tree".to_string(),
        Err(_) => label,
    };
    let intents_ok = problems.iter().all(|p| p.severity != Severity::Error);
    let intents_json = serde_json::to_value(&problems)?;
    let dir_label = dir.display().to_string();
    let tree_ok = match &result {
        Ok(checked) => {
            if json {
                super::print_json(&json!({
                    "ok": intents_ok,
                    "file": label,
                    "version": checked.tree.version,
                    "nodes": checked.tree.nodes.len(),
                    "warnings": checked.warnings,
                    "intents_dir": dir_label,
                    "intents": intents_json,
                }));
            } else {
                println!(
                    "{label}: ok ({} nodes, version {})",
                    checked.tree.nodes.len(),
                    checked.tree.version
                );
                for w in &checked.warnings {
                    println!("warning: {w}");
                }
            }
            true
        }
        Err(e) => {
            let issues = match e {
                crate::tree::TreeError::Invalid { issues, .. } => serde_json::to_value(issues)?,
                _ => Value::Array(Vec::new()),
            };
            if json {
                super::print_json(&json!({
                    "ok": false, "file": label, "error": e.to_string(), "issues": issues,
                    "intents_dir": dir_label, "intents": intents_json,
                }));
            } else if let crate::tree::TreeError::Invalid { file, issues } = e {
                for i in issues {
                    eprintln!("{file}: {i}");
                }
            } else {
                eprintln!("earshot: {e}");
            }
            false
        }
    };
    if !json {
        for p in &problems {
            match p.severity {
                Severity::Error => eprintln!("{p}"),
                Severity::Warning => println!("warning: {p}"),
            }
        }
        let files = user.files.len();
        if intents_ok && files > 0 {
            let s = if files == 1 { "" } else { "s" };
            println!("{dir_label}: ok ({files} examples file{s})");
        }
    }
    Ok(tree_ok && intents_ok)
}

/// Print events as `chat` does: JSON frames, or the text.
struct Printer {
    json: bool,
    printed_content: bool,
}

impl EventSink for Printer {
    fn emit(&mut self, event: &Event) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if self.json {
            if let Some(frame) = event.to_frame() {
                let _ = writeln!(out, "{frame}");
            }
            return;
        }
        match event {
            Event::Content { data } => {
                self.printed_content = true;
                let _ = write!(out, "{data}");
            }
            Event::Done(done) => {
                if !self.printed_content {
                    let _ = write!(out, "{}", done.response);
                }
                let _ = writeln!(out);
            }
            Event::Error { message } => eprintln!("earshot: {message}"),
            Event::Thinking { tool } => eprintln!("[{tool}]"),
            _ => {}
        }
        let _ = out.flush();
    }
}

/// `earshot tree run FILE TEXT`.
pub fn run(
    config_path: Option<&Path>,
    file: &Path,
    text: &str,
    conversation: Option<i64>,
    dry_run: bool,
    json: bool,
) -> Result<bool> {
    let mut loaded = super::load_config(config_path)?;
    loaded.config.tree.file = file.display().to_string();
    loaded.config.mode = crate::agent::Mode::Tree;
    let services = crate::app::build(&loaded.config)?;
    let Some(engine) = services.tree.clone() else {
        let why = services.tree_error.clone().unwrap_or_default();
        eprintln!("earshot: {why}");
        return Ok(false);
    };
    if let Err(why) = engine.classifiers_ready() {
        tracing::warn!("classify nodes will take their fallback: {why}");
    }
    let mut printer = Printer {
        json,
        printed_content: false,
    };
    if !dry_run {
        let mut input = TurnInput::text(text);
        input.conversation_id = conversation;
        let cancel = CancelToken::new();
        super::install_interrupt(&cancel);
        let outcome = run_turn(&services, input, &mut printer, &cancel);
        if json {
            let row = outcome
                .turn_id
                .and_then(|id| services.store.turn_log_row(id).ok().flatten())
                .unwrap_or(Value::Null);
            let extra = row.get("extra_json").cloned().unwrap_or(Value::Null);
            super::print_json(&json!({
                "type": "trace",
                "dry_run": false,
                "path": extra.get("tree_path").cloned().unwrap_or(Value::Null),
                "tree_state": extra.get("tree_state").cloned().unwrap_or(Value::Null),
                "events": extra.get("tree_events").cloned().unwrap_or(json!([])),
                "notes": row.get("notes").cloned().unwrap_or(Value::Null),
                "conversation_id": outcome.conversation_id,
            }));
        }
        return Ok(outcome.ok);
    }

    // Dry run: the walk only, nothing saved.
    let (state, _) = crate::tree::state::load(&services.store, conversation)
        .map_err(|e| anyhow!("cannot read the tree state: {e}"))?;
    let started = std::time::Instant::now();
    let input = WalkInput {
        text: text.trim().to_string(),
        conversation_id: conversation,
        phase: state.phase,
        state: state.state,
        dry_run: true,
        preview: false,
    };
    let mut record = TurnRecord::new("text", text);
    match engine.run(input, &mut NoLlm, &mut printer) {
        Ok(outcome) => {
            if !outcome.recommendations.is_empty() {
                printer.emit(&Event::Recommendation {
                    items: outcome.recommendations.clone(),
                });
            }
            let intent = outcome
                .classification
                .as_ref()
                .filter(|c| c.accepted)
                .map(|c| c.intent.clone());
            record.notes = outcome.notes.clone();
            printer.emit(&Event::Done(Done {
                latency_ms: started.elapsed().as_millis() as u64,
                model: "device".into(),
                route: "tree".into(),
                intent,
                actions: outcome.actions.clone(),
                conversation_id: 0,
                turn_id: 0,
                response: crate::agent::cleanup::for_speech(&outcome.answer),
            }));
            if json {
                super::print_json(&json!({
                    "type": "trace",
                    "dry_run": true,
                    "path": outcome.path,
                    "tree_state": {"phase": outcome.phase, "state": outcome.state},
                    "classification": outcome.classification,
                    "events": outcome.events,
                    "notes": record.notes,
                }));
            } else {
                eprintln!("path: {}", outcome.path.join(" → "));
                for n in &record.notes {
                    eprintln!("note: {n}");
                }
            }
            Ok(true)
        }
        Err(e) => {
            printer.emit(&Event::Error {
                message: e.to_string(),
            });
            if json {
                super::print_json(&json!({
                    "type": "trace", "dry_run": true, "path": e.path, "notes": e.notes,
                }));
            }
            Ok(false)
        }
    }
}
