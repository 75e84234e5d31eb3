//! `earshot serve [--bind ADDR:PORT]`: the local HTTP API as a service.
//!
//! Start-up: load the config, build the services once (database, models),
//! bind, then tell systemd `READY=1`. The main loop polls the API and pings
//! the watchdog; SIGTERM/SIGINT stop accepting, finish in-flight turns and
//! exit 0 (a second signal exits at once).
//!
//! Test-only: `EARSHOT_DEBUG_STALL_LOOP_MS=N` makes the main loop hang for
//! N ms once, right after its first watchdog ping, so a test can see the
//! pings stop while the loop is stuck. Never set it in production.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::api::ApiServer;
use crate::device::notify::{Heartbeat, Notifier};

/// Run the API until a signal. Returns whether it stopped cleanly.
pub fn run(config: Option<&Path>, bind: Option<String>) -> Result<bool> {
    let notifier = Notifier::from_env();
    notifier.status("loading config and models");
    let mut loaded = super::load_config(config)?;
    if let Some(bind) = bind {
        loaded.config.api.bind = bind;
    }
    let api = loaded.config.api.clone();
    // Check the address before the (slow) model load.
    crate::api::server::check_bind(&api.bind, &api.token)?;
    let services = crate::app::build(&loaded.config)?;
    // Summaries, memory extraction and index upserts run beside the API.
    let _background = crate::memory::start_background(&services);
    let speech = Arc::new(crate::app::speech(&loaded.config));
    let server = ApiServer::start_with_speech(services, speech, &api)?;
    let addr = server.local_addr();
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "earshot: listening on http://{addr}");
        let _ = out.flush();
    }
    let stop = stop_flag();
    notifier.ready();
    notifier.status(&format!("serving the HTTP API on {addr}"));

    let mut stall = debug_stall();
    let mut heartbeat = Heartbeat::new(&notifier);
    while !stop.load(Ordering::SeqCst) {
        if heartbeat.beat() {
            if let Some(ms) = stall.take() {
                tracing::warn!(
                    ms,
                    "EARSHOT_DEBUG_STALL_LOOP_MS: stalling the main loop (test only)"
                );
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
        server.poll(heartbeat.max_wait(Duration::from_millis(250)));
    }
    notifier.stopping();
    notifier.status("finishing in-flight requests");
    tracing::info!("stopping: finishing in-flight requests");
    server.shutdown();
    Ok(true)
}

/// Set on SIGTERM/SIGINT; a second signal exits at once with 130.
fn stop_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, flag.clone());
        let _ = signal_hook::flag::register(signal, flag.clone());
    }
    flag
}

fn debug_stall() -> Option<u64> {
    std::env::var("EARSHOT_DEBUG_STALL_LOOP_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
}
