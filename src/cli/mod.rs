//! The commands behind `earshot <subcommand>`: each file renders one
//! command's output; `main.rs` only parses arguments and dispatches here.

pub mod apps;
pub mod bench_latency;
pub mod bench_llm;
pub mod bench_speak;
pub mod bench_stop;
pub mod bench_stt;
pub mod bench_wake;
pub mod calendar;
pub mod chat;
pub mod config_cmd;
pub mod devices;
pub mod doctor;
pub mod esphome;
pub mod eval;
pub mod eval_retrieval;
pub mod eval_wake;
pub mod export;
pub mod feedback;
pub mod history;
pub mod ingest;
pub mod knowledge;
pub mod log;
pub mod memory;
pub mod mute;
pub mod review;
pub mod route;
pub mod run;
pub mod say;
pub mod serve;
pub mod timers;
pub mod tool;
pub mod transcribe;
pub mod tree;
pub mod wyoming;

use std::path::Path;

use anyhow::Result;

use crate::agent::Services;
use crate::config::{self, Loaded};

/// Load the config (file + env) for a command.
pub fn load_config(path: Option<&Path>) -> Result<Loaded> {
    config::load(path)
}

/// Load the config and build the services a turn needs.
pub fn services(path: Option<&Path>) -> Result<Services> {
    let loaded = load_config(path)?;
    crate::app::build(&loaded.config)
}

/// Print one JSON value on its own line (for `--json` outputs).
pub fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string(value).unwrap_or_else(|_| "null".into())
    );
}

/// Ctrl-C / SIGTERM cancel the current turn instead of killing the process
/// mid-write; a second signal exits at once.
pub fn install_interrupt(cancel: &crate::cancel::CancelToken) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, flag.clone());
        let _ = signal_hook::flag::register(signal, flag.clone());
    }
    let cancel = cancel.clone();
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            if flag.load(Ordering::SeqCst) {
                cancel.cancel();
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        });
}
