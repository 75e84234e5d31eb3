//! `earshot esphome serve [--bind ADDR:PORT]`: earshot as an ESPHome voice
//! device that Home Assistant's ESPHome integration adopts.
//!
//! Start-up: config, bind (off loopback only with `[esphome]
//! encryption_key`: one-line error otherwise), print `earshot: listening
//! on esphome://ADDR:PORT (encrypted|plaintext)`, then systemd `READY=1`.
//! SIGTERM/SIGINT stop it.

use std::path::Path;

use anyhow::Result;

use crate::cancel::CancelToken;
use crate::device::notify::{Heartbeat, Notifier};
use crate::esphome::server::Server;

/// The `esphome` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum EsphomeCommand {
    /// Answer Home Assistant's ESPHome integration as a voice device
    /// (hello, device info with the voice assistant features, entities).
    Serve {
        /// ADDR:PORT to listen on (default: [esphome] bind, 0.0.0.0:6053;
        /// port 0 picks a free one). Off loopback it needs [esphome]
        /// encryption_key.
        #[arg(long, value_name = "ADDR:PORT")]
        bind: Option<String>,
    },
}

/// Run one `esphome` subcommand.
pub fn run(config: Option<&Path>, command: EsphomeCommand) -> Result<bool> {
    match command {
        EsphomeCommand::Serve { bind } => serve(config, bind),
    }
}

fn serve(config: Option<&Path>, bind: Option<String>) -> Result<bool> {
    let notifier = Notifier::from_env();
    let config = super::load_config(config)?.config;
    let bind = bind.unwrap_or_else(|| config.esphome.bind.clone());
    let shutdown = CancelToken::new();
    super::install_interrupt(&shutdown);
    let server = Server::bind(&bind, &config.esphome)?;
    let addr = server.local_addr();
    let _mdns = server.announce_listening();
    notifier.ready();
    notifier.status(&format!("serving the ESPHome API on {addr}"));
    let mut heartbeat = Heartbeat::new(&notifier);
    server.run(&shutdown, &mut || {
        heartbeat.beat();
    })?;
    notifier.stopping();
    tracing::info!("esphome: stopped");
    Ok(true)
}
