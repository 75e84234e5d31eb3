//! `earshot apps links [--json]`: the links that connect an app account
//! (Gmail, GitHub, …) which `composio_connect` made and no tool of that
//! app has used yet, newest first. A voice device cannot show a link, so
//! this (and the chat/API event) is where a person opens it. Reads the
//! state database only: works while `earshot run` is running.

use std::path::Path;

use anyhow::Result;

use crate::store::Store;
use crate::tools::composio;

/// The `apps` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum AppsCommand {
    /// Links not used yet, newest first.
    Links {
        /// Print the JSON array [{"toolkit","url","created_at"}].
        #[arg(long)]
        json: bool,
    },
}

/// Run an `apps` subcommand.
pub fn run(config: Option<&Path>, command: AppsCommand) -> Result<bool> {
    let config = super::load_config(config)?.config;
    match command {
        AppsCommand::Links { json } => {
            let store = Store::open(&config.database_path())?;
            let links = composio::open_links(&store, &config.user_id)?;
            if json {
                println!("{}", serde_json::to_string(&links)?);
            } else if links.is_empty() {
                println!("No app links waiting.");
            } else {
                for l in &links {
                    println!(
                        "{}  {}  {}",
                        l.created_at,
                        composio::display_name(&l.toolkit),
                        l.url
                    );
                }
            }
            Ok(true)
        }
    }
}
