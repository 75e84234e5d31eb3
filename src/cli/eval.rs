//! `earshot eval intents`: accuracy, threshold sweep and latency of the
//! on-device intent classifiers on a labelled set (CLINC150 works as-is).
//!
//! Output (`--json`): `{"scorer", "accuracy", "thresholds": [{"threshold",
//! "accepted_correct", "oos_recall"}…], "latency_ms": {"p50", "p95"}, …}` —
//! in-scope accuracy (best intent, no threshold); per threshold the share
//! of in-scope test queries accepted *and* correct and the share of
//! out-of-scope queries rejected; the single-utterance latency (unpadded
//! embed + score) over the first `--latency-samples` test queries.
//! Embeddings are cached under `state_dir/cache`, so a rerun only trains
//! and scores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::nlu::knn::KnnClassifier;
use crate::nlu::linear::{SoftmaxHead, TrainOptions};
use crate::nlu::{cache, load_embedder};

/// Which scorer to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scorer {
    /// R-KNN exactly: k = 3, 0.9·max + 0.1·mean of the top-k cosines.
    Knn,
    /// A softmax head trained on the train set's embeddings.
    Softmax,
}

/// Arguments of `earshot eval intents`.
#[derive(Debug, Clone, clap::Args)]
pub struct IntentsArgs {
    /// Training examples: a JSON list of [text, label], or an intent
    /// examples file (`## intent` headers, one utterance a line).
    #[arg(long, value_name = "FILE", required_unless_present = "clinc")]
    pub train: Option<PathBuf>,
    /// Test queries: a JSON list of [text, label].
    #[arg(long, value_name = "FILE", required_unless_present = "clinc")]
    pub test: Option<PathBuf>,
    /// Out-of-scope queries: a JSON list of [text, label] or of strings.
    #[arg(long, value_name = "FILE")]
    pub oos: Option<PathBuf>,
    /// CLINC150 data_full.json (train, test and oos_test from one file).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["train", "test", "oos"])]
    pub clinc: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "softmax")]
    pub scorer: Scorer,
    /// Embedder intra-op threads for this run (default: nlu.threads).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Single-utterance latency is timed over this many test queries.
    #[arg(long, default_value_t = 300)]
    pub latency_samples: usize,
    #[arg(long)]
    pub json: bool,
}

type Pairs = Vec<(String, String)>;

/// Parse a JSON list of `[text, label]` (or bare strings when `labels` is
/// false); errors name the file and the item.
fn parse_pairs(value: &Value, origin: &str, labels: bool) -> Result<Pairs> {
    let items = value
        .as_array()
        .ok_or_else(|| anyhow!("{origin}: expected a JSON list of [text, label]"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = item
                .as_str()
                .or_else(|| item.get(0).and_then(Value::as_str));
            let label = item.get(1).and_then(Value::as_str);
            match (text, label) {
                (Some(t), Some(l)) => Ok((t.to_string(), l.to_string())),
                (Some(t), None) if !labels => Ok((t.to_string(), String::new())),
                _ => Err(anyhow!(
                    "{origin}: item {i} is not [text, label]: {}",
                    preview(&item.to_string())
                )),
            }
        })
        .collect()
}

fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| anyhow!("{} is not valid JSON: {e}", path.display()))
}

/// (train, test, oos) from the arguments.
fn load_sets(args: &IntentsArgs) -> Result<(Pairs, Pairs, Pairs)> {
    if let Some(clinc) = &args.clinc {
        let v = read_json(clinc)?;
        let origin = clinc.display().to_string();
        let part = |key: &str, labels: bool| -> Result<Pairs> {
            let value = v.get(key).ok_or_else(|| {
                anyhow!("{origin} has no {key:?} list (is it CLINC150 data_full.json?)")
            })?;
            parse_pairs(value, &format!("{origin} [{key}]"), labels)
        };
        return Ok((
            part("train", true)?,
            part("test", true)?,
            part("oos_test", false)?,
        ));
    }
    let (Some(train), Some(test)) = (&args.train, &args.test) else {
        bail!("give --train FILE and --test FILE, or --clinc FILE");
    };
    // Training examples may also be an intent examples file (`## intent`
    // headers, one utterance a line), e.g. src/nlu/intents/routes.txt.
    let train = if train.extension().is_some_and(|e| e == "json") {
        parse_pairs(&read_json(train)?, &train.display().to_string(), true)?
    } else {
        crate::nlu::examples::load_examples(train)?
            .into_iter()
            .flat_map(|(label, utterances)| utterances.into_iter().map(move |u| (u, label.clone())))
            .collect()
    };
    let test = parse_pairs(&read_json(test)?, &test.display().to_string(), true)?;
    let oos = match &args.oos {
        Some(p) => parse_pairs(&read_json(p)?, &p.display().to_string(), false)?,
        None => Vec::new(),
    };
    Ok((train, test, oos))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The thresholds swept (kNN scores and probabilities share the 0–1 range).
pub const THRESHOLDS: &[f64] = &[
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95,
];

/// Run `earshot eval intents`. Returns Ok(true) when it ran.
pub fn intents(config_path: Option<&Path>, args: IntentsArgs) -> Result<bool> {
    let mut config = super::load_config(config_path)?.config;
    if let Some(t) = args.threads {
        config.nlu.threads = t.max(1);
    }
    let (train, test, oos) = load_sets(&args)?;
    if train.is_empty() || test.is_empty() {
        bail!("the train and test sets must not be empty");
    }
    let embedder = load_embedder(&config.nlu, &config.paths())?;
    let started = Instant::now();
    let mut examples: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (text, label) in &train {
        examples
            .entry(label.clone())
            .or_default()
            .push(text.clone());
    }
    let knn = KnnClassifier::build(embedder.clone(), &examples, Some(&config.state_dir))?
        .with_k(config.nlu.k);
    let index: BTreeMap<&str, usize> = knn
        .intents()
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let embed_set = |pairs: &Pairs, name: &str| -> Result<Vec<Vec<f32>>> {
        let texts: Vec<&str> = pairs.iter().map(|p| p.0.as_str()).collect();
        let key = cache::key(&embedder.model_id(), texts.iter().copied());
        let file = cache::path_in(&config.state_dir, &format!("eval-{name}"), &key);
        let flat = cache::embeddings_cached(embedder.as_ref(), &texts, Some(&file))?;
        Ok(flat
            .chunks_exact(embedder.dims().max(1))
            .map(<[f32]>::to_vec)
            .collect())
    };
    let test_vecs = embed_set(&test, "test")?;
    let oos_vecs = embed_set(&oos, "oos")?;
    let embed_secs = started.elapsed().as_secs_f64();

    let train_started = Instant::now();
    let head = match args.scorer {
        Scorer::Knn => None,
        Scorer::Softmax => {
            let (matrix, labels, dims) = knn.examples_matrix();
            Some(SoftmaxHead::train(
                matrix,
                labels,
                knn.intents().to_vec(),
                dims,
                TrainOptions::default(),
            )?)
        }
    };
    let train_secs = train_started.elapsed().as_secs_f64();
    let predict = |vecs: &[Vec<f32>]| -> Vec<(usize, f32)> {
        match &head {
            None => knn.classify_many(vecs),
            Some(h) => {
                let flat: Vec<f32> = vecs.iter().flatten().copied().collect();
                h.predict_many(&flat, vecs.len())
            }
        }
    };
    let test_pred = predict(&test_vecs);
    let oos_pred = predict(&oos_vecs);

    let correct: Vec<bool> = test
        .iter()
        .zip(&test_pred)
        .map(|((_, label), (i, _))| index.get(label.as_str()) == Some(i))
        .collect();
    let unknown_labels = test
        .iter()
        .filter(|(_, l)| !index.contains_key(l.as_str()))
        .count();
    let n_test = test.len() as f64;
    let accuracy = correct.iter().filter(|c| **c).count() as f64 / n_test;
    let thresholds: Vec<Value> = THRESHOLDS
        .iter()
        .map(|&t| {
            let accepted_correct = test_pred
                .iter()
                .zip(&correct)
                .filter(|((_, s), c)| **c && *s >= t as f32)
                .count() as f64
                / n_test;
            let oos_recall = (!oos.is_empty()).then(|| {
                oos_pred.iter().filter(|(_, s)| *s < t as f32).count() as f64 / oos.len() as f64
            });
            json!({
                "threshold": t,
                "accepted_correct": round4(accepted_correct),
                "oos_recall": oos_recall.map(round4),
            })
        })
        .collect();

    // Single-utterance latency: unpadded embed + score, as a turn does it.
    let mut latencies = Vec::new();
    for (text, _) in test.iter().take(args.latency_samples.max(1)) {
        let t0 = Instant::now();
        let v = embedder.embed_one(text)?;
        let _ = match &head {
            None => knn.classify_vector(&v).map(|x| x.1),
            Some(h) => h.predict_many(&v, 1).first().map(|x| x.1),
        };
        latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    let scorer = match args.scorer {
        Scorer::Knn => "knn",
        Scorer::Softmax => "softmax",
    };
    let out = json!({
        "scorer": scorer,
        "accuracy": round4(accuracy),
        "thresholds": thresholds,
        "latency_ms": {
            "p50": round4(percentile(&latencies, 50.0)),
            "p95": round4(percentile(&latencies, 95.0)),
        },
        "train": train.len(),
        "test": test.len(),
        "oos": oos.len(),
        "intents": knn.intents().len(),
        "unknown_test_labels": unknown_labels,
        "embed_seconds": round4(embed_secs),
        "train_seconds": round4(train_secs),
        "threads": config.nlu.threads,
    });
    if args.json {
        super::print_json(&out);
    } else {
        println!(
            "{scorer}: in-scope accuracy {:.1}% on {} test queries ({} intents, {} training examples)",
            accuracy * 100.0,
            test.len(),
            knn.intents().len(),
            train.len()
        );
        for t in &thresholds {
            println!(
                "  threshold {:.2}: accepted+correct {:.1}%, out-of-scope rejected {}",
                t["threshold"].as_f64().unwrap_or(0.0),
                t["accepted_correct"].as_f64().unwrap_or(0.0) * 100.0,
                t["oos_recall"]
                    .as_f64()
                    .map(|v| format!("{:.1}%", v * 100.0))
                    .unwrap_or_else(|| "n/a".into())
            );
        }
        println!(
            "  latency (embed + score, one utterance): p50 {:.2} ms, p95 {:.2} ms",
            percentile(&latencies, 50.0),
            percentile(&latencies, 95.0)
        );
    }
    Ok(true)
}

fn preview(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if s.chars().count() > 60 {
        out.push('…');
    }
    out
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_parse_and_errors_name_the_item() {
        let v: Value = serde_json::from_str(r#"[["hi", "greet"], ["bye", "leave"]]"#).unwrap();
        assert_eq!(parse_pairs(&v, "f", true).unwrap().len(), 2);
        let v: Value = serde_json::from_str(r#"[["hi", "greet"], [3]]"#).unwrap();
        let e = parse_pairs(&v, "f.json", true).unwrap_err().to_string();
        assert!(e.starts_with("f.json: item 1"), "{e}");
        let v: Value = serde_json::from_str(r#"["just text", ["t", "oos"]]"#).unwrap();
        assert_eq!(parse_pairs(&v, "f", false).unwrap().len(), 2);
    }

    #[test]
    fn percentiles() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&s, 50.0), 3.0);
        assert_eq!(percentile(&s, 95.0), 5.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
