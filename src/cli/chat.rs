//! `earshot chat ["TEXT"] [--conversation ID] [--mode tree|graph] [--json]`:
//! one turn, or a REPL when no text is given. `--mode` sets the
//! conversation's mode first (a new conversation without `--conversation`).

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{anyhow, Result};

use crate::agent::turn::{run_turn, TurnInput};
use crate::agent::Services;
use crate::cancel::CancelToken;
use crate::events::Event;

/// Run one turn, printing as it streams. Returns whether it succeeded.
fn one_turn(
    services: &Services,
    text: &str,
    conversation: &mut Option<i64>,
    json: bool,
    cancel: &CancelToken,
) -> bool {
    let stdout = std::io::stdout();
    let mut printed_content = false;
    let mut sink = |event: &Event| {
        let mut out = stdout.lock();
        if json {
            if let Some(frame) = event.to_frame() {
                let _ = writeln!(out, "{frame}");
                let _ = out.flush();
            }
            return;
        }
        match event {
            Event::Content { data } => {
                printed_content = true;
                let _ = write!(out, "{data}");
                let _ = out.flush();
            }
            Event::Done(done) => {
                if !printed_content {
                    let _ = write!(out, "{}", done.response);
                }
                let _ = writeln!(out);
            }
            Event::Error { message } => {
                if printed_content {
                    let _ = writeln!(out);
                }
                eprintln!("earshot: {message}");
            }
            _ => {}
        }
    };
    let mut input = TurnInput::text(text);
    input.conversation_id = *conversation;
    let outcome = run_turn(services, input, &mut sink, cancel);
    if outcome.ok {
        *conversation = outcome.conversation_id;
    }
    outcome.ok
}

pub fn run(
    config: Option<&Path>,
    text: Option<String>,
    conversation: Option<i64>,
    mode: Option<&str>,
    json: bool,
) -> Result<bool> {
    let mode = mode
        .map(|m| m.parse::<crate::agent::Mode>())
        .transpose()
        .map_err(|e| anyhow!("--mode: {e}"))?;
    let services = super::services(config)?;
    let cancel = CancelToken::new();
    crate::cli::install_interrupt(&cancel);
    let mut conversation = conversation;
    if let Some(mode) = mode {
        let id = crate::agent::set_mode(
            &services.store,
            &services.settings.user_id,
            conversation,
            Some(mode),
        )?;
        if conversation.is_none() && !json {
            eprintln!("earshot: conversation {id} is in {} mode", mode.name());
        }
        conversation = Some(id);
    }
    match text {
        Some(text) => Ok(one_turn(&services, &text, &mut conversation, json, &cancel)),
        None => {
            // A REPL is long-lived: summaries and memory extraction run
            // behind it (a one-shot turn leaves its jobs queued instead).
            let worker = crate::memory::start_background(&services);
            let stdin = std::io::stdin();
            let interactive = std::io::IsTerminal::is_terminal(&stdin);
            let mut all_ok = true;
            loop {
                if interactive {
                    eprint!("you> ");
                    let _ = std::io::stderr().flush();
                }
                let mut line = String::new();
                let n = stdin
                    .lock()
                    .read_line(&mut line)
                    .map_err(|e| anyhow!("cannot read from the terminal: {e}"))?;
                if n == 0 {
                    break;
                }
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                if matches!(line, "/quit" | "/exit") {
                    break;
                }
                cancel.reset();
                all_ok &= one_turn(&services, line, &mut conversation, json, &cancel);
                if let Some(worker) = &worker {
                    worker.notify();
                }
            }
            Ok(all_ok)
        }
    }
}
