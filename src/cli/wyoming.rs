//! `earshot wyoming serve [--uri tcp://HOST:PORT] [--max-connections N]
//! [--drain-secs S]`:
//! earshot's ASR, TTS, intent recognition and agent as a Wyoming service
//! Home Assistant adds with its Wyoming Protocol integration.
//!
//! Start-up mirrors `earshot serve`: config, models loaded once (whisper,
//! the voices, the embedder and tree), bind, print `earshot: listening on
//! tcp://ADDR:PORT` (the real port when 0 was asked), then systemd
//! `READY=1`. The accept loop pings the watchdog; SIGTERM/SIGINT stop
//! accepting, let in-flight requests finish and exit 0 (a second signal
//! exits at once).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Result};

use crate::cancel::CancelToken;
use crate::device::notify::{Heartbeat, Notifier};
use crate::wyoming::server::Server;
use crate::wyoming_proto::WyomingUri;

/// The `wyoming` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum WyomingCommand {
    /// Serve speech-to-text, text-to-speech, intent recognition and the
    /// agent over the Wyoming protocol (for Home Assistant).
    Serve {
        /// tcp://HOST:PORT to listen on (default: [wyoming] serve_uri,
        /// tcp://127.0.0.1:10700; port 0 picks a free one).
        #[arg(long, value_name = "tcp://HOST:PORT")]
        uri: Option<String>,
        /// Most connections served at once; more are refused with a
        /// `busy` error.
        #[arg(long, default_value_t = 16, value_name = "N")]
        max_connections: usize,
        /// Most connections one address may hold (Wyoming has no
        /// authentication: one host cannot take every slot).
        #[arg(long, default_value_t = crate::wyoming::server::MAX_PER_ADDRESS, value_name = "N")]
        max_per_address: usize,
        /// A new connection that sends no whole event within this long is
        /// closed (it never counted against the caps).
        #[arg(long, default_value_t = 5000, value_name = "MS")]
        first_event_ms: u64,
        /// On SIGTERM, how long requests in progress get to finish before
        /// the process exits anyway (keep it under systemd's
        /// TimeoutStopSec).
        #[arg(long, default_value_t = 20, value_name = "SECONDS")]
        drain_secs: u64,
    },
}

/// Run one `wyoming` subcommand.
pub fn run(config: Option<&Path>, command: WyomingCommand) -> Result<bool> {
    match command {
        WyomingCommand::Serve {
            uri,
            max_connections,
            max_per_address,
            first_event_ms,
            drain_secs,
        } => serve(
            config,
            uri,
            Caps {
                max_connections,
                max_per_address,
                first_event: std::time::Duration::from_millis(first_event_ms.max(1)),
            },
            std::time::Duration::from_secs(drain_secs),
        ),
    }
}

/// The connection limits of `wyoming serve`.
struct Caps {
    max_connections: usize,
    max_per_address: usize,
    first_event: std::time::Duration,
}

fn serve(
    config: Option<&Path>,
    uri: Option<String>,
    caps: Caps,
    drain: std::time::Duration,
) -> Result<bool> {
    let notifier = Notifier::from_env();
    notifier.status("loading config and models");
    let config = super::load_config(config)?.config;
    let uri_text = uri.unwrap_or_else(|| config.wyoming.serve_uri.clone());
    let uri = WyomingUri::parse(&uri_text).map_err(|e| anyhow!("--uri: {e}"))?;
    let limits = config.wyoming.limits();
    let shutdown = CancelToken::new();
    super::install_interrupt(&shutdown);
    // Bind before the slow model load, so a taken port fails at once.
    let server = Server::bind(&uri, limits, caps.max_connections)?
        .max_per_address(caps.max_per_address)
        .first_event_timeout(caps.first_event)
        .drain(drain);
    let addr = server.local_addr();

    let service = Arc::new(crate::app::wyoming_service(&config)?);
    // Summaries, memory extraction and index upserts of handled turns run
    // beside the server, never inside a request.
    let _background = crate::memory::start_background(service.services());
    if let Some(warm) = service.warm_up() {
        let _ = warm.join();
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "earshot: listening on tcp://{addr}");
        let _ = out.flush();
    }
    notifier.ready();
    notifier.status(&format!("serving Wyoming on tcp://{addr}"));
    let mut heartbeat = Heartbeat::new(&notifier);
    server.run(service, &shutdown, &mut || {
        heartbeat.beat();
    });
    notifier.stopping();
    tracing::info!("wyoming: stopped");
    Ok(true)
}
