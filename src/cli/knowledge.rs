//! `earshot knowledge search "…" [--json]` and `earshot knowledge list`.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;

use crate::knowledge::retrieve::{search, SearchOptions};
use crate::knowledge::KnowledgeBase;
use crate::llm::openai::OpenAiClient;
use crate::llm::ChatModel;

#[derive(Debug, clap::Subcommand)]
pub enum KnowledgeCommand {
    /// Search the knowledge base and show every retrieval step.
    Search {
        query: String,
        /// Only these tiers (repeatable).
        #[arg(long = "tier")]
        tiers: Vec<u8>,
        /// Only documents with this tag (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Skip the LLM query rewrite.
        #[arg(long)]
        no_rewrite: bool,
        /// Print the whole retrieval (steps, candidates, passages, context) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List ingested documents.
    List {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(config_path: Option<&Path>, command: KnowledgeCommand) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    match command {
        KnowledgeCommand::List { json } => {
            let store = crate::store::Store::open(&config.database_path())?;
            let docs = store.with_conn(crate::knowledge::store::documents)?;
            if json {
                super::print_json(&serde_json::to_value(&docs)?);
            } else if docs.is_empty() {
                println!("The knowledge base is empty. Add documents with: earshot ingest FOLDER");
            } else {
                for d in docs {
                    println!(
                        "{:>4}  tier {}  {:>3} chunks  {:<9}  {}  [{}]",
                        d.id,
                        d.tier,
                        d.chunk_count,
                        d.strategy,
                        d.path,
                        d.tags.join(", ")
                    );
                }
            }
            Ok(true)
        }
        KnowledgeCommand::Search {
            query,
            tiers,
            tags,
            no_rewrite,
            json,
        } => {
            let llm = (config.knowledge.rewrite_query && config.llm.is_usable())
                .then(|| Arc::new(OpenAiClient::new(&config.llm)) as Arc<dyn ChatModel>);
            let kb = KnowledgeBase::standalone(
                crate::app::knowledge_settings(&config, &config.paths()),
                &config.nlu,
                llm,
            )?;
            let options = SearchOptions {
                tiers,
                tags,
                no_rewrite,
            };
            let r = search(&kb, &query, &options, &crate::cancel::CancelToken::new())?;
            if json {
                super::print_json(&serde_json::to_value(&r)?);
            } else {
                for s in &r.steps {
                    println!(
                        "{:<15} {:>7.1} ms  {:>3} out  {}",
                        s.name,
                        s.ms,
                        s.out,
                        s.note.as_deref().unwrap_or("")
                    );
                }
                println!();
                println!("{}", r.context.text);
            }
            Ok(true)
        }
    }
}
