//! Retrieval metrics against labels (R-OBS): precision, recall and F1 of
//! the reranked chunks, latency p50, tier spread and context diversity —
//! plus a calibration table of the rerank score over every candidate, the
//! evidence for where the 0.3 cut sits.
//!
//! Labels are JSON lines: `{"query": "...", "relevant": [{"source":
//! "path/in/corpus.md", "contains": "a phrase of the chunk"}]}`. A chunk is
//! relevant when its document path ends with `source` and its text
//! contains the phrase (case and white space ignored). An empty
//! `relevant` list labels a question the corpus cannot answer: nothing
//! retrieved is then a perfect score.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

use super::retrieve::{search, SearchOptions};
use super::KnowledgeBase;
use crate::cancel::CancelToken;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Relevant {
    pub source: String,
    pub contains: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Label {
    pub query: String,
    #[serde(default)]
    pub relevant: Vec<Relevant>,
}

/// Read a labels file; a bad line names its number.
pub fn read_labels(path: &Path) -> Result<Vec<Label>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the labels {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let label: Label = serde_json::from_str(line)
            .map_err(|e| anyhow!("{} line {}: not a label ({e}); expected {{\"query\":…,\"relevant\":[{{\"source\":…,\"contains\":…}}]}}", path.display(), i + 1))?;
        out.push(label);
    }
    if out.is_empty() {
        return Err(anyhow!("{} has no labels", path.display()));
    }
    Ok(out)
}

fn squash_ws(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether a chunk (document path, text) is what a label points at.
pub fn matches(label: &Relevant, path: &str, text: &str) -> bool {
    let source = label.source.trim_start_matches("./");
    (path == source || path.ends_with(&format!("/{source}")))
        && squash_ws(text).contains(&squash_ws(&label.contains))
}

/// One query's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct QueryResult {
    pub query: String,
    pub retrieved: usize,
    pub relevant_retrieved: usize,
    pub labels: usize,
    pub labels_found: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub ms: f64,
    pub sources: Vec<String>,
}

/// One row of the calibration table: candidates at or above a cut.
#[derive(Debug, Clone, Serialize)]
pub struct CutRow {
    pub cut: f32,
    pub relevant_kept: usize,
    pub irrelevant_kept: usize,
    /// Share of relevant candidates kept.
    pub recall: f64,
    /// Share of kept candidates that are relevant.
    pub precision: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub queries: usize,
    pub reranker: String,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    /// Retrieved chunks per source tier, and their share.
    pub tier_spread: BTreeMap<String, f64>,
    /// Mean over queries of distinct documents / passages (1 = every
    /// passage from a different document).
    pub context_diversity: f64,
    pub calibration: Vec<CutRow>,
    pub per_query: Vec<QueryResult>,
}

fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Run every label's query through the real pipeline and score it.
pub fn evaluate(kb: &KnowledgeBase, labels: &[Label]) -> Result<Summary> {
    let cancel = CancelToken::new();
    let options = SearchOptions::default();
    let mut per_query = Vec::new();
    let mut tiers: BTreeMap<u8, usize> = BTreeMap::new();
    let mut diversity = Vec::new();
    // (rerank score, relevant) of every candidate, for the calibration table.
    let mut scored: Vec<(f32, bool)> = Vec::new();
    for label in labels {
        let r = search(kb, &label.query, &options, &cancel)?;
        let texts: Vec<(String, String)> = chunk_texts(kb, &r.passages)?;
        let retrieved = texts.len();
        let relevant_retrieved = texts
            .iter()
            .filter(|(p, t)| label.relevant.iter().any(|l| matches(l, p, t)))
            .count();
        let labels_found = label
            .relevant
            .iter()
            .filter(|l| texts.iter().any(|(p, t)| matches(l, p, t)))
            .count();
        let (precision, recall) = if label.relevant.is_empty() {
            let clean = if retrieved == 0 { 1.0 } else { 0.0 };
            (clean, clean)
        } else {
            (
                if retrieved == 0 {
                    0.0
                } else {
                    relevant_retrieved as f64 / retrieved as f64
                },
                labels_found as f64 / label.relevant.len() as f64,
            )
        };
        for p in &r.passages {
            *tiers.entry(p.tier).or_default() += p.chunk_ids.len();
        }
        if !r.passages.is_empty() {
            let mut docs: Vec<i64> = r.passages.iter().map(|p| p.document_id).collect();
            docs.sort_unstable();
            docs.dedup();
            diversity.push(docs.len() as f64 / r.passages.len() as f64);
        }
        for c in &r.candidates {
            let rel = label.relevant.iter().any(|l| matches(l, &c.path, &c.text));
            scored.push((c.rerank, rel));
        }
        let mut sources: Vec<String> = r.passages.iter().map(|p| p.path.clone()).collect();
        sources.dedup();
        per_query.push(QueryResult {
            query: label.query.clone(),
            retrieved,
            relevant_retrieved,
            labels: label.relevant.len(),
            labels_found,
            precision,
            recall,
            f1: f1(precision, recall),
            ms: r.total_ms,
            sources,
        });
    }
    let n = per_query.len().max(1) as f64;
    let precision = per_query.iter().map(|q| q.precision).sum::<f64>() / n;
    let recall = per_query.iter().map(|q| q.recall).sum::<f64>() / n;
    let mut lat: Vec<f64> = per_query.iter().map(|q| q.ms).collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let total_chunks: usize = tiers.values().sum();
    let tier_spread = tiers
        .iter()
        .map(|(t, c)| (format!("tier{t}"), *c as f64 / total_chunks.max(1) as f64))
        .collect();
    let relevant_total = scored.iter().filter(|(_, r)| *r).count();
    let calibration = [0.1f32, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6]
        .iter()
        .map(|&cut| {
            let rk = scored.iter().filter(|(s, r)| *r && *s >= cut).count();
            let ik = scored.iter().filter(|(s, r)| !*r && *s >= cut).count();
            CutRow {
                cut,
                relevant_kept: rk,
                irrelevant_kept: ik,
                recall: rk as f64 / relevant_total.max(1) as f64,
                precision: rk as f64 / (rk + ik).max(1) as f64,
            }
        })
        .collect();
    Ok(Summary {
        queries: per_query.len(),
        reranker: kb.reranker.name(),
        precision,
        recall,
        f1: f1(precision, recall),
        latency_p50_ms: percentile(&lat, 0.5),
        latency_p95_ms: percentile(&lat, 0.95),
        tier_spread,
        context_diversity: if diversity.is_empty() {
            0.0
        } else {
            diversity.iter().sum::<f64>() / diversity.len() as f64
        },
        calibration,
        per_query,
    })
}

/// (document path, chunk text) of every chunk in the passages.
fn chunk_texts(
    kb: &KnowledgeBase,
    passages: &[super::retrieve::Passage],
) -> Result<Vec<(String, String)>> {
    let ids: Vec<i64> = passages
        .iter()
        .flat_map(|p| p.chunk_ids.iter().copied())
        .collect();
    let rows = kb
        .store
        .with_conn(|c| super::store::chunks_by_ids(c, &ids))?;
    Ok(rows.into_iter().map(|r| (r.path, r.text)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_matching_ignores_case_space_and_needs_the_source() {
        let l = Relevant {
            source: "manuals/kettle.md".into(),
            contains: "Descale  every month".into(),
        };
        assert!(matches(
            &l,
            "/tmp/x/manuals/kettle.md",
            "You should descale\nevery month."
        ));
        assert!(!matches(
            &l,
            "/tmp/x/other/kettle.md",
            "descale every month"
        ));
        assert!(!matches(&l, "/tmp/x/manuals/kettle.md", "descale yearly"));
        assert_eq!(f1(0.5, 1.0), 2.0 / 3.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 0.5), 2.0);
    }
}
