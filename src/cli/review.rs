//! `earshot review queue` and `earshot review TURN --correctness … --reviewer NAME`.

use std::path::Path;

use anyhow::{anyhow, Result};

use crate::review::{queue, review, verdict, Rubric};

#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// `queue`, or the turn id to score.
    pub target: String,
    /// 0, 0.5 or 1.
    #[arg(long)]
    pub correctness: Option<f32>,
    /// 0 or 1.
    #[arg(long)]
    pub completeness: Option<u8>,
    /// 0 or 1.
    #[arg(long)]
    pub clarity: Option<u8>,
    /// 0 or 1.
    #[arg(long)]
    pub efficiency: Option<u8>,
    #[arg(long)]
    pub reviewer: Option<String>,
    /// With `queue`: also list turns already reviewed.
    #[arg(long)]
    pub all: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_path: Option<&Path>, args: ReviewArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let store = crate::store::Store::open(&config.database_path())?;
    if args.target == "queue" {
        let items = queue(&store, args.all, 200)?;
        if args.json {
            super::print_json(&serde_json::to_value(&items)?);
        } else if items.is_empty() {
            println!("Nothing to review: no turn has feedback waiting.");
        } else {
            for i in items {
                println!(
                    "#{:<5} {:<11} {}  Q: {}",
                    i.turn_id,
                    i.feedback.to_uppercase(),
                    i.started_at,
                    i.input
                );
                println!("       A: {}", i.response.as_deref().unwrap_or("-"));
                for n in &i.notes {
                    println!("       note: {n}");
                }
            }
        }
        return Ok(true);
    }
    let turn: i64 = args
        .target
        .parse()
        .map_err(|_| anyhow!("review takes `queue` or a turn id (got {:?})", args.target))?;
    let missing = |name: &str| {
        anyhow!("--{name} is required to review a turn (the verdict is computed from the rubric)")
    };
    let rubric = Rubric::new(
        args.correctness.ok_or_else(|| missing("correctness"))?,
        args.completeness.ok_or_else(|| missing("completeness"))?,
        args.clarity.ok_or_else(|| missing("clarity"))?,
        args.efficiency.ok_or_else(|| missing("efficiency"))?,
    )?;
    let reviewer = args.reviewer.ok_or_else(|| missing("reviewer"))?;
    let v = review(&store, turn, &reviewer, &rubric)?;
    debug_assert_eq!(v, verdict(&rubric));
    if args.json {
        super::print_json(
            &serde_json::json!({"turn_id": turn, "reviewer": reviewer, "rubric": rubric, "verdict": v}),
        );
    } else {
        println!("Turn {turn} reviewed by {reviewer}: {}", v.as_str());
    }
    Ok(true)
}
