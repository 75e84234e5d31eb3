//! `earshot eval retrieval --labels FILE [--json]`: retrieval metrics.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::knowledge::eval::{evaluate, read_labels};
use crate::knowledge::KnowledgeBase;

#[derive(Debug, clap::Args)]
pub struct RetrievalArgs {
    /// JSON lines: {"query": …, "relevant": [{"source": …, "contains": …}]}.
    #[arg(long, value_name = "FILE")]
    pub labels: PathBuf,
    /// Print the summary (with per-query results) as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_path: Option<&Path>, args: RetrievalArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let labels = read_labels(&args.labels)?;
    // The eval measures retrieval itself: no LLM rewrite, no network.
    let kb = KnowledgeBase::standalone(
        crate::app::knowledge_settings(&config, &config.paths()),
        &config.nlu,
        None,
    )?;
    let s = evaluate(&kb, &labels)?;
    if args.json {
        super::print_json(&serde_json::to_value(&s)?);
        return Ok(true);
    }
    println!("{} queries, reranker {}", s.queries, s.reranker);
    println!(
        "precision {:.3}  recall {:.3}  F1 {:.3}",
        s.precision, s.recall, s.f1
    );
    println!(
        "latency p50 {:.1} ms  p95 {:.1} ms",
        s.latency_p50_ms, s.latency_p95_ms
    );
    println!(
        "tier spread {:?}  context diversity {:.3}",
        s.tier_spread, s.context_diversity
    );
    println!("rerank cut  relevant kept  irrelevant kept  recall  precision");
    for c in &s.calibration {
        println!(
            "{:>10.2}  {:>13}  {:>15}  {:>6.3}  {:>9.3}",
            c.cut, c.relevant_kept, c.irrelevant_kept, c.recall, c.precision
        );
    }
    for q in &s.per_query {
        println!(
            "  P {:.2} R {:.2} {:>6.1} ms  {}",
            q.precision, q.recall, q.ms, q.query
        );
    }
    Ok(true)
}
