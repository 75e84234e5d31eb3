//! The training-data export (R-OBS): one row per turn with its full
//! context — question, answer, route, intent, confidences, models,
//! latencies, tool calls, memories, retrieval (sources, chunk ids, scores,
//! rerank scores, snippets), user feedback, and the reviewers' rubric and
//! verdict — as CSV (quoted by the `csv` crate) or JSON lines.
//!
//! A turn reviewed by several reviewers keeps one row: the per-reviewer
//! fields list each reviewer's value in the same order (`;`-joined in CSV,
//! arrays in JSONL) and `verdict_consensus` says GOOD, BAD or SPLIT.

use std::io::Write;

use anyhow::{Context, Result};
use rusqlite::params;
use serde_json::{json, Map, Value};

use crate::store::Store;

/// The columns, in order.
pub const COLUMNS: &[&str] = &[
    "turn_id",
    "started_at",
    "conversation_id",
    "user_id",
    "source",
    "question",
    "answer",
    "mode",
    "route",
    "route_by",
    "route_confidence",
    "intent",
    "intent_confidence",
    "node",
    "model",
    "models",
    "outcome",
    "error",
    "latency_total_ms",
    "latency_stt_ms",
    "latency_recall_ms",
    "latency_route_ms",
    "latency_first_token_ms",
    "timings",
    "tools",
    "memories",
    "retrieval_query",
    "retrieval_sources",
    "retrieval_chunk_ids",
    "retrieval_scores",
    "retrieval_rerank_scores",
    "retrieval_snippets",
    "feedback",
    "feedback_notes",
    "reviewers",
    "correctness",
    "completeness",
    "clarity",
    "efficiency",
    "verdict",
    "verdict_consensus",
];

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Jsonl,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            _ => None,
        }
    }
}

fn sql_value(v: rusqlite::types::Value, json_column: bool) -> Value {
    use rusqlite::types::Value as V;
    match v {
        V::Null => Value::Null,
        V::Integer(n) => n.into(),
        V::Real(f) => json!(f),
        V::Text(t) if json_column => serde_json::from_str(&t).unwrap_or(Value::String(t)),
        V::Text(t) => t.into(),
        V::Blob(_) => Value::Null,
    }
}

/// Every turn (or only reviewed ones) as ordered field maps, oldest first.
pub fn rows(store: &Store, reviewed_only: bool) -> Result<Vec<Map<String, Value>>> {
    let turns: Vec<Map<String, Value>> = store.with_conn(|c| {
        let mut stmt = c.prepare(
            &format!(
                "{} WHERE NOT ?1 OR EXISTS (SELECT 1 FROM reviews r WHERE r.turn_id = t.id) ORDER BY t.id",
                crate::store::TURN_ROWS
            ),
        )?;
        let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
        let rows = stmt.query_map([reviewed_only], |row| {
            let mut m = Map::new();
            for (i, name) in names.iter().enumerate() {
                m.insert(name.clone(), sql_value(row.get(i)?, name.ends_with("_json")));
            }
            crate::store::merge_answer(&mut m);
            Ok(m)
        })?;
        rows.collect()
    })?;
    let mut out = Vec::with_capacity(turns.len());
    for t in turns {
        let id = t.get("id").and_then(Value::as_i64).unwrap_or(0);
        let (feedback, notes, reviews) = store.with_conn(|c| {
            let mut f = c.prepare("SELECT kind, note FROM feedback WHERE turn_id = ?1 ORDER BY id")?;
            let fb: Vec<(String, Option<String>)> = f
                .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            let mut r = c.prepare(
                "SELECT reviewer, correctness, completeness, clarity, efficiency, verdict FROM reviews WHERE turn_id = ?1 ORDER BY reviewer",
            )?;
            let rv: Vec<(String, f64, i64, i64, i64, String)> = r
                .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
                .collect::<rusqlite::Result<_>>()?;
            Ok((
                fb.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
                fb.into_iter().filter_map(|(_, n)| n).collect::<Vec<_>>(),
                rv,
            ))
        })?;
        out.push(row(&t, feedback, notes, &reviews));
    }
    Ok(out)
}

fn row(
    t: &Map<String, Value>,
    feedback: Vec<String>,
    notes: Vec<String>,
    reviews: &[(String, f64, i64, i64, i64, String)],
) -> Map<String, Value> {
    let get = |k: &str| t.get(k).cloned().unwrap_or(Value::Null);
    let timing = |k: &str| {
        t.get("timings_json")
            .and_then(|v| v.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let retrieval = t.get("retrieval_json").cloned().unwrap_or(json!([]));
    let calls: Vec<&Value> = retrieval
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let chunks: Vec<&Value> = calls
        .iter()
        .flat_map(|r| r["chunks"].as_array().into_iter().flatten())
        .collect();
    let pick = |k: &str| Value::Array(chunks.iter().map(|c| c[k].clone()).collect());
    let queries: Vec<Value> = calls.iter().map(|r| r["query"].clone()).collect();
    let verdicts: Vec<&str> = reviews.iter().map(|r| r.5.as_str()).collect();
    let consensus = if verdicts.is_empty() {
        Value::Null
    } else if verdicts.iter().all(|v| *v == "GOOD") {
        "GOOD".into()
    } else if verdicts.iter().all(|v| *v == "BAD") {
        "BAD".into()
    } else {
        "SPLIT".into()
    };
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("turn_id", get("id"));
    put("started_at", get("started_at"));
    put("conversation_id", get("conversation_id"));
    put("user_id", get("user_id"));
    put("source", get("source"));
    put("question", get("input"));
    put("answer", get("response"));
    put("mode", get("mode"));
    put("route", get("route"));
    put("route_by", get("route_by"));
    put("route_confidence", get("confidence"));
    put("intent", get("intent"));
    put("intent_confidence", get("intent_confidence"));
    put("node", get("node"));
    put("model", get("model"));
    put("models", get("models_json"));
    put("outcome", get("outcome"));
    put("error", get("error"));
    put("latency_total_ms", timing("total"));
    put("latency_stt_ms", timing("stt"));
    put("latency_recall_ms", timing("recall"));
    put("latency_route_ms", timing("route"));
    put("latency_first_token_ms", timing("first_token"));
    put("timings", get("timings_json"));
    put("tools", get("tools_json"));
    put("memories", get("memories_json"));
    put("retrieval_query", Value::Array(queries));
    put("retrieval_sources", pick("source"));
    put("retrieval_chunk_ids", pick("ids"));
    put("retrieval_scores", pick("score"));
    put("retrieval_rerank_scores", pick("rerank"));
    put("retrieval_snippets", pick("snippet"));
    put("feedback", json!(feedback));
    put("feedback_notes", json!(notes));
    put(
        "reviewers",
        json!(reviews.iter().map(|r| r.0.clone()).collect::<Vec<_>>()),
    );
    put(
        "correctness",
        json!(reviews.iter().map(|r| r.1).collect::<Vec<_>>()),
    );
    put(
        "completeness",
        json!(reviews.iter().map(|r| r.2).collect::<Vec<_>>()),
    );
    put(
        "clarity",
        json!(reviews.iter().map(|r| r.3).collect::<Vec<_>>()),
    );
    put(
        "efficiency",
        json!(reviews.iter().map(|r| r.4).collect::<Vec<_>>()),
    );
    put("verdict", json!(verdicts));
    put("verdict_consensus", consensus);
    m
}

/// A CSV cell: text as is, null empty, a list of scalars `;`-joined, any
/// other structure as compact JSON.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|i| !i.is_array() && !i.is_object()) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(";"),
        other => other.to_string(),
    }
}

/// Write the export; returns the number of rows.
pub fn write(
    store: &Store,
    format: Format,
    reviewed_only: bool,
    out: &mut dyn Write,
) -> Result<usize> {
    let rows = rows(store, reviewed_only)?;
    match format {
        Format::Csv => {
            let mut w = csv::Writer::from_writer(out);
            w.write_record(COLUMNS)
                .context("cannot write the CSV header")?;
            for r in &rows {
                w.write_record(
                    COLUMNS
                        .iter()
                        .map(|c| cell(r.get(*c).unwrap_or(&Value::Null))),
                )
                .context("cannot write a CSV row")?;
            }
            w.flush().context("cannot write the CSV")?;
        }
        Format::Jsonl => {
            for r in &rows {
                serde_json::to_writer(&mut *out, r).context("cannot write a JSON line")?;
                out.write_all(b"\n").context("cannot write a JSON line")?;
            }
        }
    }
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_flatten_lists_and_keep_text() {
        assert_eq!(cell(&json!(["a", 1, 0.5])), "a;1;0.5");
        assert_eq!(cell(&json!({"x": 1})), "{\"x\":1}");
        assert_eq!(cell(&Value::Null), "");
        assert_eq!(cell(&json!("say \"hi\", ok")), "say \"hi\", ok");
        assert!(COLUMNS.len() >= 30);
    }
}
