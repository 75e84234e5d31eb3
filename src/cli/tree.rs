//! `earshot tree check FILE` and `earshot tree run FILE "TEXT" [--dry-run]
//! [--conversation ID] [--json]`: validate a tree file, or run one turn
//! through it.
//!
//! `run` without `--dry-run` is a real turn (saved, tree state persisted)
//! with FILE as the tree and mode forced to `tree`. With `--dry-run`
//! nothing is saved: state-changing actions and LLM calls are skipped, and
//! the `done` frame carries conversation and turn id 0. Both end with a
//! `{"type":"trace", …}` line (JSON) — the nodes walked, the phase and state
//! after the turn, the notes — which is not part of the R-SSE stream.

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use crate::agent::turn::{run_turn, TurnInput};
use crate::cancel::CancelToken;
use crate::events::{Done, Event, EventSink};
use crate::telemetry::TurnRecord;
use crate::tree::engine::{check, read_tree};
use crate::tree::interpreter::{Host, HostError, LlmAnswer, WalkInput};

/// `earshot tree check FILE`: exit 0 when the tree loads (warnings are
/// printed), 1 with one line per problem when it does not.
pub fn check_file(file: &Path, json: bool) -> Result<bool> {
    let label = file.display().to_string();
    let result =
        read_tree(&label).and_then(|(tree, label, base)| check(tree, &label, base.as_deref()));
    match result {
        Ok(checked) => {
            if json {
                super::print_json(&json!({
                    "ok": true,
                    "file": label,
                    "version": checked.tree.version,
                    "nodes": checked.tree.nodes.len(),
                    "warnings": checked.warnings,
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
            Ok(true)
        }
        Err(e) => {
            let issues = match &e {
                crate::tree::TreeError::Invalid { issues, .. } => serde_json::to_value(issues)?,
                _ => Value::Array(Vec::new()),
            };
            if json {
                super::print_json(
                    &json!({"ok": false, "file": label, "error": e.to_string(), "issues": issues}),
                );
            } else if let crate::tree::TreeError::Invalid { file, issues } = &e {
                for i in issues {
                    eprintln!("{file}: {i}");
                }
            } else {
                eprintln!("earshot: {e}");
            }
            Ok(false)
        }
    }
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

/// No LLM in a dry run.
struct NoLlm;

impl Host for NoLlm {
    fn llm_stream(&mut self, prompt: &str, _: &mut dyn EventSink) -> Result<LlmAnswer, HostError> {
        Err(HostError::NoLlm(format!(
            "dry run: no LLM is called (prompt '{prompt}')"
        )))
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
