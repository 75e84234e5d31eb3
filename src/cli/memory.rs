//! `earshot memory list|add|forget|search|process|check|reindex`: the
//! device's long-term memory from the terminal (R-MEM). `search` shows
//! each memory's score breakdown and the keep decision recall would take.

use std::path::Path;

use anyhow::{anyhow, Result};
use serde_json::json;

use crate::memory::{format_block, Memory};
use crate::store::Store;

/// The `memory` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum MemoryCommand {
    /// List the user's memories, newest first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remember a fact now (no LLM): earshot memory add "I am allergic to peanuts".
    Add {
        text: String,
        #[arg(long)]
        json: bool,
    },
    /// Forget the memory that best matches the words ("that" = the newest).
    Forget {
        query: String,
        #[arg(long)]
        json: bool,
    },
    /// Show the top memories for a request with {semantic, bm25} and keep.
    Search {
        query: String,
        /// How many memories to score (recall uses 5).
        #[arg(long, default_value_t = 5)]
        k: usize,
        #[arg(long)]
        json: bool,
    },
    /// Run the queued background jobs (memory extraction, summaries) now.
    Process {
        #[arg(long)]
        json: bool,
    },
    /// Compare the vector indexes with SQLite; fails when they disagree.
    Check {
        #[arg(long)]
        json: bool,
    },
    /// Rebuild the vector index files from SQLite.
    Reindex {
        #[arg(long)]
        json: bool,
    },
}

/// Open the memory over the configured state dir (no LLM, no classifiers).
fn open(config: Option<&Path>) -> Result<(String, Memory)> {
    let loaded = super::load_config(config)?;
    let config = loaded.config;
    let store = Store::open(&config.database_path())?;
    let embedder = match crate::nlu::load_embedder(&config.nlu, &config.paths()) {
        Ok(e) => Some(e),
        Err(e) => {
            tracing::warn!("on-device embedder unavailable; memories can be listed, added and forgotten by keyword only: {e:#}");
            None
        }
    };
    let memory = Memory::open(store, embedder, config.memory.clone())?;
    Ok((config.user_id, memory))
}

/// Run one subcommand; `Ok(false)` means "ran, but the answer is no"
/// (nothing forgotten, index inconsistent) for the exit code.
pub fn run(config: Option<&Path>, command: MemoryCommand) -> Result<bool> {
    match command {
        MemoryCommand::Process { json } => {
            let services = super::services(config)?;
            let report = crate::memory::process_pending(&services)?;
            if json {
                super::print_json(&serde_json::to_value(&report)?);
            } else {
                for note in &report.notes {
                    println!("{note}");
                }
                println!(
                    "{} done, {} failed, {} waiting for the language model, {} still queued",
                    report.done, report.failed, report.retry_later, report.pending
                );
            }
            Ok(report.failed == 0)
        }
        command => {
            let (user, memory) = open(config)?;
            run_on(&memory, &user, command)
        }
    }
}

fn run_on(memory: &Memory, user: &str, command: MemoryCommand) -> Result<bool> {
    match command {
        MemoryCommand::List { json } => {
            let items = memory.list(user)?;
            if json {
                super::print_json(&serde_json::to_value(&items)?);
            } else if items.is_empty() {
                println!("No memories yet. Add one with: earshot memory add \"I am allergic to peanuts\"");
            } else {
                for m in items {
                    println!("{:>5}  {}  {}", m.id, date(&m.created_at), short(&m.text));
                }
            }
            Ok(true)
        }
        MemoryCommand::Add { text, json } => {
            let r = memory.remember(user, &text)?;
            if json {
                super::print_json(&serde_json::to_value(&r)?);
            } else if r.created {
                println!("Remembered #{}: {}", r.item.id, r.item.text);
            } else if let Some(old) = &r.superseded {
                println!("Updated #{}: {} (was: {old})", r.item.id, r.item.text);
            } else {
                println!("Already remembered as #{}: {}", r.item.id, r.item.text);
            }
            Ok(true)
        }
        MemoryCommand::Forget { query, json } => {
            let gone = memory.forget(user, &query)?;
            if json {
                super::print_json(&json!({"forgotten": gone}));
            } else {
                match &gone {
                    Some(m) => println!("Forgot #{}: {}", m.id, m.text),
                    None => {
                        println!("No memory matches that closely enough; nothing was forgotten.")
                    }
                }
            }
            Ok(gone.is_some())
        }
        MemoryCommand::Search { query, k, json } => {
            let scored = memory.search(user, &query, k.max(1))?;
            let mut kept: Vec<_> = scored.iter().filter(|s| s.keep).cloned().collect();
            kept.sort_by(|a, b| {
                b.item
                    .created_at
                    .cmp(&a.item.created_at)
                    .then(b.item.id.cmp(&a.item.id))
            });
            let block = format_block(&kept, memory.config().max_block_chars);
            if json {
                let results: Vec<_> = scored
                    .iter()
                    .map(|s| {
                        json!({
                            "id": s.item.id,
                            "text": s.item.text,
                            "created_at": s.item.created_at,
                            "score": {"semantic": s.semantic, "bm25": s.bm25},
                            "keep": s.keep,
                        })
                    })
                    .collect();
                super::print_json(&json!({"query": query, "results": results, "block": block}));
            } else if scored.is_empty() {
                println!("No memories to search yet.");
            } else {
                for s in &scored {
                    println!(
                        "{:>5}  semantic {:.3}  bm25 {:.3}  {}  {}",
                        s.item.id,
                        s.semantic,
                        s.bm25,
                        if s.keep { "keep" } else { "drop" },
                        short(&s.item.text)
                    );
                }
                match block {
                    Some(b) => println!("\n{b}"),
                    None => println!("\n(nothing would be recalled)"),
                }
            }
            Ok(true)
        }
        MemoryCommand::Check { json } => {
            let stats = memory.index_stats()?;
            if stats.is_empty() {
                return Err(anyhow!(
                    "the on-device embedder is not loaded, so there are no vector indexes to check; run `earshot doctor` for the fix"
                ));
            }
            let consistent = stats
                .iter()
                .all(|s| s.missing == 0 && s.extra == 0 && s.indexed == s.stored);
            if json {
                super::print_json(&json!({"consistent": consistent, "indexes": stats}));
            } else {
                for s in &stats {
                    println!(
                        "{:<14} {} indexed, {} in SQLite, {} missing, {} extra, generation {} ({})",
                        s.collection,
                        s.indexed,
                        s.stored,
                        s.missing,
                        s.extra,
                        s.generation,
                        s.path.display()
                    );
                }
                println!(
                    "{}",
                    if consistent {
                        "consistent"
                    } else {
                        "INCONSISTENT: run `earshot memory reindex`"
                    }
                );
            }
            Ok(consistent)
        }
        MemoryCommand::Reindex { json } => {
            let n = memory.reindex()?;
            if json {
                super::print_json(&json!({"vectors": n}));
            } else {
                println!("Rebuilt the vector indexes from SQLite: {n} vectors.");
            }
            Ok(true)
        }
        MemoryCommand::Process { .. } => unreachable_process(),
    }
}

/// `process` needs the full services and is handled in [`run`].
fn unreachable_process() -> Result<bool> {
    Err(anyhow!(
        "internal: `memory process` is dispatched before opening the memory"
    ))
}

/// One terminal line per memory (the JSON output has the whole text).
fn short(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

fn date(ts: &str) -> &str {
    ts.get(..10).unwrap_or(ts)
}
