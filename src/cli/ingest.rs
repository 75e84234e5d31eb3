//! `earshot ingest PATH… [--plan|--apply]`: documents into the knowledge base.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::knowledge::ingest::{Ingest, Mode};
use crate::llm::openai::OpenAiClient;
use crate::llm::ChatModel;
use crate::store::vector::VectorIndex;
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Files and folders (txt, md, pdf; folders are walked).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only analyse and write the plan for review; build no vectors.
    #[arg(long, conflicts_with = "apply")]
    pub plan: bool,
    /// Build chunks and vectors (the default), using the reviewed plan.
    #[arg(long)]
    pub apply: bool,
    /// The plan file (default: knowledge.plan_file or <state_dir>/knowledge-plan.json).
    #[arg(long, value_name = "FILE")]
    pub plan_file: Option<PathBuf>,
    /// Pause between LLM analysis calls (default: knowledge.llm_pause_ms).
    #[arg(long, value_name = "MS")]
    pub pause_ms: Option<u64>,
    /// Analyse by heuristics even when an LLM is configured.
    #[arg(long)]
    pub no_llm: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Ok(false) when any file failed (the others were still processed).
pub fn run(config_path: Option<&Path>, args: IngestArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let mode = if args.plan { Mode::Plan } else { Mode::Apply };
    let store = Store::open(&config.database_path())?;
    let embedder = match mode {
        Mode::Plan => None,
        Mode::Apply => Some(
            crate::nlu::load_embedder(&config.nlu, &config.paths())
                .map_err(|e| anyhow!("ingest needs the on-device embedder: {e:#}"))?,
        ),
    };
    let llm =
        (!args.no_llm && config.knowledge.analyse_with_llm && config.llm.is_usable()).then(|| {
            let client: Arc<dyn ChatModel> = Arc::new(OpenAiClient::new(&config.llm));
            (client, config.llm.model.clone())
        });
    if llm.is_none() && !args.json {
        eprintln!("ingest: no LLM analysis ({}); tier, tags and strategy come from front matter, file names and headings",
            if args.no_llm { "--no-llm" } else if !config.knowledge.analyse_with_llm { "knowledge.analyse_with_llm is off" } else { "no language model is configured" });
    }
    let plan_path = args
        .plan_file
        .clone()
        .unwrap_or_else(|| config.knowledge.plan_path(&config.paths()));
    let cancel = crate::cancel::CancelToken::new();
    super::install_interrupt(&cancel);
    let ingest = Ingest {
        knowledge: &config.knowledge,
        user_id: &config.user_id,
        store: &store,
        embedder: embedder.clone(),
        llm,
        pause: Duration::from_millis(args.pause_ms.unwrap_or(config.knowledge.llm_pause_ms)),
        plan_path,
        cancel,
    };
    let report = ingest.run(&args.paths, mode)?;
    if let Some(embedder) = &embedder {
        // Bring the usearch file up to date now rather than at the first search.
        let index = VectorIndex::open(
            &store,
            &config.index_dir(),
            crate::knowledge::COLLECTION,
            embedder.dims(),
            &embedder.model_id(),
        )?;
        index.flush()?;
    }
    if args.json {
        super::print_json(&serde_json::to_value(&report)?);
    } else {
        for f in &report.files {
            match &f.error {
                Some(e) => println!("FAILED     {}: {e}", f.path.display()),
                None => {
                    let a = f
                        .analysis
                        .as_ref()
                        .map(|a| {
                            format!(
                                " tier {} {} [{}] ({})",
                                a.tier,
                                a.strategy.as_str(),
                                a.tags.join(", "),
                                a.analysed_by
                            )
                        })
                        .unwrap_or_default();
                    let note = f
                        .note
                        .as_deref()
                        .map(|n| format!("; {n}"))
                        .unwrap_or_default();
                    println!(
                        "{:<10} {} — {} chunks{a}{note}",
                        f.status,
                        f.path.display(),
                        f.chunks
                    );
                }
            }
        }
        if let Some(plan) = &report.plan {
            println!(
                "Plan written to {}; review it, then run: earshot ingest {} --apply",
                plan.display(),
                args.paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        let failed = report.failures();
        if failed > 0 {
            println!(
                "{failed} of {} failed; the others were processed.",
                report.files.len()
            );
        }
    }
    Ok(report.failures() == 0)
}
