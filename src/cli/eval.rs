//! `earshot eval intents`: accuracy, threshold sweep and latency of the
//! on-device intent classifiers on a labelled set (CLINC150 works as-is).
//!
//! Output (`--json`): `{"scorer", "accuracy", "thresholds": [{"threshold",
//! "accepted_correct", "oos_recall"}…], "latency_ms": {"p50", "p95"}, …}` —
//! in-scope accuracy (best intent, no threshold); per threshold the share
//! of in-scope test queries accepted *and* correct and the share of
//! out-of-scope queries rejected; the single-utterance latency (unpadded
//! embed + score) over the first `--latency-samples` test queries.
//! The sweep runs 0.00–1.00 in steps of 0.01 over the confidence the
//! device compares with its thresholds; a predicted reject label (`oos`,
//! `other`, see `nlu::REJECT_LABELS`) counts as a rejection at every
//! threshold. Extra keys: `best_threshold` (largest min of the two
//! shares), `temperature` (hybrid's calibration), counts and timings.
//! Embeddings are cached under `state_dir/cache`, so a rerun only trains
//! and scores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::nlu::hybrid::HybridHead;
use crate::nlu::knn::KnnClassifier;
use crate::nlu::linear::{SoftmaxHead, TrainOptions};
use crate::nlu::scorer::hybrid_head;
use crate::nlu::{cache, is_reject_label, load_embedder};

/// The trained scorer under evaluation (the kNN is always built: it holds
/// the cached example matrix the heads train on).
enum Model {
    Knn,
    Softmax(SoftmaxHead),
    Hybrid(HybridHead),
}

/// The sweep entry with the largest `min(accepted_correct, oos_recall)`
/// (the balanced operating point), or `null` without out-of-scope data.
fn best_threshold(entries: &[Value]) -> Value {
    entries
        .iter()
        .filter_map(|e| {
            let a = e["accepted_correct"].as_f64()?;
            let o = e["oos_recall"].as_f64()?;
            Some((a.min(o), e))
        })
        .max_by(|x, y| x.0.total_cmp(&y.0))
        .map_or(Value::Null, |(_, e)| e.clone())
}

/// Which scorer to evaluate (the device's `nlu.scorer` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scorer {
    /// The device default: calibrated logistic regression over the
    /// embedding and tf-idf words (`nlu::hybrid`).
    Hybrid,
    /// R-KNN exactly: k = 3, 0.9·max + 0.1·mean of the top-k cosines.
    Knn,
    /// A softmax head trained on the train set's embeddings.
    Softmax,
}

impl Scorer {
    fn name(self) -> &'static str {
        match self {
            Scorer::Hybrid => "hybrid",
            Scorer::Knn => "knn",
            Scorer::Softmax => "softmax",
        }
    }
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
    /// CLINC150 data_full.json: train (+ oos_train as the reject label
    /// `oos`), test and oos_test from one file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["train", "test", "oos"])]
    pub clinc: Option<PathBuf>,
    /// With --clinc: leave oos_train out of training (the protocol of the
    /// older knn/softmax figures).
    #[arg(long, requires = "clinc")]
    pub no_oos_train: bool,
    #[arg(long, value_enum, default_value = "hybrid")]
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
        let mut train = part("train", true)?;
        if !args.no_oos_train {
            // Out-of-scope training examples become the reject class `oos`.
            train.extend(
                part("oos_train", false)?
                    .into_iter()
                    .map(|(text, _)| (text, "oos".to_string())),
            );
        }
        return Ok((train, part("test", true)?, part("oos_test", false)?));
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

/// The thresholds swept: 0.00–1.00 in steps of 0.01, compared (`>=`) with
/// the very confidence the device compares with its thresholds (kNN scores
/// and probabilities share the 0–1 range).
pub fn thresholds() -> impl Iterator<Item = f64> {
    (0..=100).map(|i| f64::from(i) / 100.0)
}

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
    let model = match args.scorer {
        Scorer::Knn => Model::Knn,
        Scorer::Softmax => {
            let (matrix, labels, dims) = knn.examples_matrix();
            Model::Softmax(SoftmaxHead::train(
                matrix,
                labels,
                knn.intents().to_vec(),
                dims,
                TrainOptions::default(),
            )?)
        }
        Scorer::Hybrid => Model::Hybrid(hybrid_head(&knn, &examples, None)?),
    };
    let train_secs = train_started.elapsed().as_secs_f64();
    let predict = |vecs: &[Vec<f32>], pairs: &Pairs| -> Vec<(usize, f32)> {
        let flat = || -> Vec<f32> { vecs.iter().flatten().copied().collect() };
        match &model {
            Model::Knn => knn.classify_many(vecs),
            Model::Softmax(h) => h.predict_many(&flat(), vecs.len()),
            Model::Hybrid(h) => {
                let texts: Vec<&str> = pairs.iter().map(|p| p.0.as_str()).collect();
                h.predict_many(&flat(), &texts)
            }
        }
    };
    let test_pred = predict(&test_vecs, &test);
    let oos_pred = predict(&oos_vecs, &oos);
    // A predicted reject label (`oos`, `other`) is a rejection at every
    // threshold, as on the device.
    let rejected_label: Vec<bool> = knn.intents().iter().map(|l| is_reject_label(l)).collect();
    let is_rejection = |i: usize| rejected_label.get(i).copied().unwrap_or(false);

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
    let thresholds: Vec<Value> = thresholds()
        .map(|t| {
            let accepted_correct = test_pred
                .iter()
                .zip(&correct)
                .filter(|((_, s), c)| **c && *s >= t as f32)
                .count() as f64
                / n_test;
            let oos_recall = (!oos.is_empty()).then(|| {
                oos_pred
                    .iter()
                    .filter(|(i, s)| is_rejection(*i) || *s < t as f32)
                    .count() as f64
                    / oos.len() as f64
            });
            json!({
                "threshold": t,
                "accepted_correct": round4(accepted_correct),
                "oos_recall": oos_recall.map(round4),
            })
        })
        .collect();
    let best = best_threshold(&thresholds);

    // Single-utterance latency: unpadded embed + score, as a turn does it.
    let mut latencies = Vec::new();
    for (text, _) in test.iter().take(args.latency_samples.max(1)) {
        let t0 = Instant::now();
        let v = embedder.embed_one(text)?;
        let _ = match &model {
            Model::Knn => knn.classify_vector(&v).map(|x| x.1),
            Model::Softmax(h) => h.predict_many(&v, 1).first().map(|x| x.1),
            Model::Hybrid(h) => h.predict_many(&v, &[text.as_str()]).first().map(|x| x.1),
        };
        latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    let scorer = args.scorer.name();
    let temperature = match &model {
        Model::Hybrid(h) => Some(h.temperature()),
        _ => None,
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
        "best_threshold": best,
        "temperature": temperature,
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
        // Text output: every 0.05 of the sweep (--json has all 101).
        let coarse =
            |t: &&Value| (t["threshold"].as_f64().unwrap_or(0.0) * 100.0).round() as i64 % 5 == 0;
        for t in thresholds.iter().filter(coarse) {
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
