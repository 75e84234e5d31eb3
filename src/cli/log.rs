//! `earshot log [--last N] [--json]`: recent turns with their R-OBS fields.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// How many of the most recent turns.
    #[arg(long, default_value_t = 10)]
    pub last: usize,
    /// One JSON object per turn (all columns, JSON columns parsed).
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_path: Option<&Path>, args: LogArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let store = crate::store::Store::open(&config.database_path())?;
    let mut ids = store.recent_turn_ids(args.last)?;
    ids.reverse();
    if ids.is_empty() && !args.json {
        println!("No turns logged yet.");
    }
    for id in ids {
        let Some(row) = store.turn_log_row(id)? else {
            continue;
        };
        if args.json {
            super::print_json(&row);
            continue;
        }
        print_human(&row);
    }
    Ok(true)
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(t) => t.clone(),
        other => other.to_string(),
    }
}

fn print_human(row: &Value) {
    let conf = row["confidence"]
        .as_f64()
        .map(|c| format!(" {c:.2}"))
        .unwrap_or_default();
    println!(
        "#{} {} [{}] route {}{} by {} intent {} model {} — {}",
        s(&row["id"]),
        s(&row["started_at"]),
        s(&row["outcome"]),
        s(&row["route"]),
        conf,
        s(&row["route_by"]),
        s(&row["intent"]),
        s(&row["model"]),
        s(&row["source"])
    );
    println!("  Q: {}", s(&row["input"]));
    println!("  A: {}", s(&row["response"]));
    if let Some(t) = row["timings_json"].as_object().filter(|t| !t.is_empty()) {
        let parts: Vec<String> = t
            .iter()
            .map(|(k, v)| format!("{k} {:.0}", v.as_f64().unwrap_or(0.0)))
            .collect();
        println!("  ms: {}", parts.join(", "));
    }
    if let Some(tools) = row["tools_json"].as_array().filter(|a| !a.is_empty()) {
        let parts: Vec<String> = tools
            .iter()
            .map(|t| {
                format!(
                    "{} {:.0} ms{}",
                    s(&t["name"]),
                    t["ms"].as_f64().unwrap_or(0.0),
                    if t["ok"] == Value::Bool(false) {
                        " FAILED"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        println!("  tools: {}", parts.join(", "));
    }
    if let Some(m) = row["memories_json"].as_array().filter(|a| !a.is_empty()) {
        println!("  memories: {}", Value::Array(m.clone()));
    }
    if let Some(r) = row["retrieval_json"].as_array().filter(|a| !a.is_empty()) {
        for call in r {
            println!(
                "  retrieval \"{}\" ({}):",
                s(&call["query"]),
                s(&call["reranker"])
            );
            for c in call["chunks"].as_array().into_iter().flatten() {
                println!(
                    "    {} score {:.2} rerank {:.2} {} — {}",
                    s(&c["ids"]),
                    c["score"].as_f64().unwrap_or(0.0),
                    c["rerank"].as_f64().unwrap_or(0.0),
                    s(&c["source"]),
                    s(&c["snippet"]).chars().take(80).collect::<String>()
                );
            }
        }
    }
    if let Some(m) = row["models_json"].as_object().filter(|m| !m.is_empty()) {
        println!("  models: {}", Value::Object(m.clone()));
    }
    if let Some(e) = row["error"].as_str() {
        println!("  error: {e}");
    }
}
