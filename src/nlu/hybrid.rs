//! The default on-device scorer (`hybrid`): a calibrated multinomial
//! logistic regression over the MiniLM embedding *and* tf-idf word
//! features, trained to convergence with L-BFGS.
//!
//! Why each part (figures in notes/nlu.md):
//! - **Converged, weakly regularised LR** — the softmax head (`linear.rs`)
//!   stops after 300 Adam epochs with a strong L2, under-fitting large
//!   intent sets. The objective here is sklearn's `C` form, mean
//!   cross-entropy + `‖W‖² / (2·C·n)`, so regularisation fades as examples
//!   grow and one `C` suits 150 examples and 15 000 alike.
//! - **Word features** ([`super::words`]) next to the embedding: the
//!   embedding blurs intents that differ by one content word.
//! - **Reject classes** — a training label named in
//!   [`super::REJECT_LABELS`] (`oos`, `other`) is learned like any intent;
//!   predicting it means "no intent here", which separates out-of-scope
//!   queries far better than a low top probability alone.
//! - **Temperature calibration** — with few examples per intent a
//!   regularised LR is under-confident (max probabilities near 0.5 for
//!   answers that are right 98 % of the time), and the device compares the
//!   confidence with fixed thresholds. For sets up to
//!   [`HybridOptions::calibrate_max_examples`] the head is re-trained on
//!   k folds, and one temperature is fitted to the out-of-fold logits by
//!   likelihood, so "0.8" means right about 80 % of the time. Larger sets
//!   (CLINC150) have enough examples per intent to be near-calibrated and
//!   would pay k extra trainings; they keep temperature 1.
//!
//! The confidence is `softmax(logits / T)` of the best label, in 0–1.
//! Training is deterministic (zero init, fixed folds, no randomness).

use std::sync::Arc;

use anyhow::{anyhow, Result};

use super::lbfgs;
use super::linalg::matmul;
use super::words::{Sparse, Vocabulary};
use super::{Classifier, Embedder};

/// Training knobs; the defaults are the measured configuration.
#[derive(Debug, Clone, Copy)]
pub struct HybridOptions {
    /// Inverse regularisation strength (sklearn's `C`).
    pub c: f32,
    /// Length of the tf-idf vector next to the unit-length embedding.
    pub word_weight: f32,
    /// Calibrate the temperature by cross-validation up to this many
    /// training examples (start-up sets); above it, temperature 1.
    pub calibrate_max_examples: usize,
    /// Folds of that cross-validation.
    pub folds: usize,
    pub lbfgs: lbfgs::Options,
}

impl Default for HybridOptions {
    fn default() -> Self {
        Self {
            c: 10.0,
            word_weight: 0.5,
            calibrate_max_examples: 4000,
            folds: 5,
            lbfgs: lbfgs::Options::default(),
        }
    }
}

/// A trained hybrid head.
#[derive(Debug, Clone)]
pub struct HybridHead {
    labels: Vec<String>,
    dims: usize,
    vocab: Vocabulary,
    word_weight: f32,
    /// `[dims, classes]`, then `[words, classes]`, then `[classes]` biases.
    params: Vec<f32>,
    temperature: f32,
}

/// The training problem in the shape the objective wants.
struct Problem<'a> {
    x: &'a [f32],
    /// `xᵀ`, `[dims, n]`, for the weight gradient.
    xt: Vec<f32>,
    words: Vec<Sparse>,
    y: Vec<usize>,
    n: usize,
    dims: usize,
    vocab: usize,
    classes: usize,
    lambda: f32,
}

/// Row-wise log-sum-exp normalisation: logits → probabilities in place,
/// returning each row's `ln Σ exp`.
fn softmax_rows(z: &mut [f32], classes: usize) -> Vec<f64> {
    z.chunks_exact_mut(classes)
        .map(|row| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f64;
            for v in row.iter_mut() {
                *v = (*v - max).exp();
                sum += f64::from(*v);
            }
            let inv = (1.0 / sum) as f32;
            row.iter_mut().for_each(|v| *v *= inv);
            f64::from(max) + sum.ln()
        })
        .collect()
}

/// `[n, classes]` logits of dense rows + sparse word vectors.
fn logits(
    x: &[f32],
    words: &[Sparse],
    n: usize,
    dims: usize,
    vocab: usize,
    classes: usize,
    params: &[f32],
) -> Vec<f32> {
    let (wd, rest) = params.split_at(dims * classes);
    let (ws, b) = rest.split_at(vocab * classes);
    let mut z = matmul(x, n, wd, dims, classes);
    for (row, sparse) in z.chunks_exact_mut(classes).zip(words) {
        row.iter_mut().zip(b).for_each(|(v, bias)| *v += bias);
        for &(j, value) in sparse {
            let w = &ws[j as usize * classes..(j as usize + 1) * classes];
            row.iter_mut().zip(w).for_each(|(v, wj)| *v += value * wj);
        }
    }
    z
}

impl Problem<'_> {
    /// Mean cross-entropy + λ/2 ‖W‖², and its gradient.
    fn evaluate(&self, params: &[f32], grad: &mut [f32]) -> f64 {
        let (n, d, c) = (self.n, self.dims, self.classes);
        let mut g = logits(self.x, &self.words, n, d, self.vocab, c, params);
        let mut z_true = Vec::with_capacity(n);
        for (row, &label) in g.chunks_exact(c).zip(&self.y) {
            z_true.push(f64::from(row[label]));
        }
        let lse = softmax_rows(&mut g, c);
        let mut loss: f64 = lse.iter().zip(&z_true).map(|(l, t)| l - t).sum::<f64>() / n as f64;
        let inv_n = 1.0 / n as f32;
        for (row, &label) in g.chunks_exact_mut(c).zip(&self.y) {
            row[label] -= 1.0;
            row.iter_mut().for_each(|v| *v *= inv_n);
        }
        let (gd, rest) = grad.split_at_mut(d * c);
        let (gs, gb) = rest.split_at_mut(self.vocab * c);
        gd.copy_from_slice(&matmul(&self.xt, d, &g, n, c));
        gs.iter_mut().for_each(|v| *v = 0.0);
        gb.iter_mut().for_each(|v| *v = 0.0);
        for (row, sparse) in g.chunks_exact(c).zip(&self.words) {
            gb.iter_mut().zip(row).for_each(|(s, v)| *s += v);
            for &(j, value) in sparse {
                let gj = &mut gs[j as usize * c..(j as usize + 1) * c];
                gj.iter_mut().zip(row).for_each(|(s, v)| *s += value * v);
            }
        }
        let weights = (d + self.vocab) * c;
        let mut penalty = 0.0f64;
        for (gi, wi) in grad[..weights].iter_mut().zip(&params[..weights]) {
            *gi += self.lambda * wi;
            penalty += f64::from(*wi) * f64::from(*wi);
        }
        loss += 0.5 * f64::from(self.lambda) * penalty;
        loss
    }
}

/// A hex key over everything a head's training reads.
fn training_key(
    x: &[f32],
    texts: &[&str],
    y: &[usize],
    labels: &[String],
    dims: usize,
    options: &HybridOptions,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"earshot-hybrid-head-v1\0");
    h.update(format!("{options:?}").as_bytes());
    h.update(dims.to_le_bytes());
    for label in labels {
        h.update(label.len().to_le_bytes());
        h.update(label.as_bytes());
    }
    for &l in y {
        h.update(l.to_le_bytes());
    }
    for t in texts {
        h.update(t.len().to_le_bytes());
        h.update(t.as_bytes());
    }
    for v in x {
        h.update(v.to_le_bytes());
    }
    hex::encode(&h.finalize()[..12])
}

/// Fit the weights on rows `rows` of `x` / `texts` / `y`.
fn fit(
    x: &[f32],
    texts: &[&str],
    y: &[usize],
    rows: &[usize],
    dims: usize,
    classes: usize,
    options: &HybridOptions,
) -> (Vocabulary, Vec<f32>) {
    let n = rows.len();
    let vocab = Vocabulary::fit(rows.iter().map(|&i| texts[i]));
    let mut xs = Vec::with_capacity(n * dims);
    for &i in rows {
        xs.extend_from_slice(&x[i * dims..(i + 1) * dims]);
    }
    let mut xt = vec![0.0f32; dims * n];
    for (i, row) in xs.chunks_exact(dims).enumerate() {
        for (k, v) in row.iter().enumerate() {
            xt[k * n + i] = *v;
        }
    }
    let problem = Problem {
        x: &xs,
        xt,
        words: rows
            .iter()
            .map(|&i| vocab.vector(texts[i], options.word_weight))
            .collect(),
        y: rows.iter().map(|&i| y[i]).collect(),
        n,
        dims,
        vocab: vocab.len(),
        classes,
        lambda: 1.0 / (options.c.max(1e-6) * n as f32),
    };
    let mut params = vec![0.0f32; (dims + vocab.len() + 1) * classes];
    let outcome = lbfgs::minimize(&mut params, options.lbfgs, |p, g| problem.evaluate(p, g));
    tracing::debug!(
        examples = n,
        classes,
        words = vocab.len(),
        ?outcome,
        "hybrid head trained"
    );
    (vocab, params)
}

/// The temperature minimising the negative log-likelihood of `y` under
/// `softmax(z / T)`, searched on a log grid over 0.05–5.
fn fit_temperature(z: &[f32], y: &[usize], classes: usize) -> f32 {
    let nll = |t: f32| -> f64 {
        z.chunks_exact(classes)
            .zip(y)
            .map(|(row, &label)| {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum: f64 = row.iter().map(|v| f64::from((v - max) / t).exp()).sum();
                sum.ln() - f64::from((row[label] - max) / t)
            })
            .sum()
    };
    let steps = 200;
    let (lo, hi) = (0.05f32.ln(), 5.0f32.ln());
    (0..=steps)
        .map(|i| (lo + (hi - lo) * i as f32 / steps as f32).exp())
        .map(|t| (t, nll(t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(1.0, |(t, _)| t)
}

impl HybridHead {
    /// Train on embeddings `x` (`[n, dims]`), their texts and `y[i]`
    /// indexing `labels`.
    pub fn train(
        x: &[f32],
        texts: &[&str],
        y: &[usize],
        labels: Vec<String>,
        dims: usize,
        options: HybridOptions,
    ) -> Result<Self> {
        let n = y.len();
        let classes = labels.len();
        if n == 0 || classes == 0 || dims == 0 || x.len() != n * dims || texts.len() != n {
            return Err(anyhow!(
                "cannot train on {n} examples ({} texts) of {dims} dims and {classes} labels",
                texts.len()
            ));
        }
        if let Some(bad) = y.iter().find(|&&l| l >= classes) {
            return Err(anyhow!(
                "label index {bad} is out of range ({classes} labels)"
            ));
        }
        let all: Vec<usize> = (0..n).collect();
        let (vocab, params) = fit(x, texts, y, &all, dims, classes, &options);
        let mut head = Self {
            labels,
            dims,
            vocab,
            word_weight: options.word_weight,
            params,
            temperature: 1.0,
        };
        let folds = options.folds.max(2);
        if n <= options.calibrate_max_examples && n >= 2 * folds && classes >= 2 {
            // Out-of-fold logits: fold k holds examples i with i % folds == k
            // (examples arrive grouped by intent, so every fold sees most).
            // The folds are independent: fitted side by side (a start-up
            // cost on the critical path to listening, issue 21); each
            // writes only its own held-out rows, so the result is the
            // same as in sequence.
            let fold_logits = |k: usize| {
                let (held, kept): (Vec<usize>, Vec<usize>) =
                    all.iter().partition(|&&i| i % folds == k);
                let (vocab, params) = fit(x, texts, y, &kept, dims, classes, &options);
                let fold = Self {
                    labels: Vec::new(),
                    dims,
                    vocab,
                    word_weight: options.word_weight,
                    params,
                    temperature: 1.0,
                };
                let hx: Vec<f32> = held
                    .iter()
                    .flat_map(|&i| x[i * dims..(i + 1) * dims].iter().copied())
                    .collect();
                let ht: Vec<&str> = held.iter().map(|&i| texts[i]).collect();
                (held, fold.raw_logits(&hx, &ht, classes))
            };
            let fold_logits = &fold_logits;
            let results: Vec<(Vec<usize>, Vec<f32>)> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..folds)
                    .map(|k| scope.spawn(move || fold_logits(k)))
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            if results.len() != folds {
                return Err(anyhow!("a calibration fold failed to train"));
            }
            let mut z = vec![0.0f32; n * classes];
            for (held, hz) in results {
                for (row, &i) in hz.chunks_exact(classes).zip(&held) {
                    z[i * classes..(i + 1) * classes].copy_from_slice(row);
                }
            }
            head.temperature = fit_temperature(&z, y, classes);
        }
        Ok(head)
    }

    /// [`HybridHead::train`], with the trained weights kept in
    /// `state_dir/cache` (issue 21's cold start: training the start-up
    /// heads took ~0.4 s of the ~1 s to listening). The file's key hashes
    /// every input of the training (embeddings, texts, labels, options),
    /// and training is deterministic, so a hit is the head training would
    /// give; a missing, corrupt or mismatched file means training again.
    pub fn train_cached(
        x: &[f32],
        texts: &[&str],
        y: &[usize],
        labels: Vec<String>,
        dims: usize,
        options: HybridOptions,
        state_dir: Option<&std::path::Path>,
    ) -> Result<Self> {
        let Some(dir) = state_dir else {
            return Self::train(x, texts, y, labels, dims, options);
        };
        let file = super::cache::path_in(
            dir,
            "hybrid",
            &training_key(x, texts, y, &labels, dims, &options),
        );
        let classes = labels.len();
        let vocab = Vocabulary::fit(texts.iter().copied());
        let len = (dims + vocab.len() + 1) * classes;
        if let Some(mut saved) = super::cache::read(&file, 1, len + 1) {
            let temperature = saved.pop().unwrap_or(1.0);
            if temperature.is_finite() && temperature > 0.0 {
                return Ok(Self {
                    labels,
                    dims,
                    vocab,
                    word_weight: options.word_weight,
                    params: saved,
                    temperature,
                });
            }
        }
        let head = Self::train(x, texts, y, labels, dims, options)?;
        if head.params.len() == len {
            let mut saved = head.params.clone();
            saved.push(head.temperature);
            if let Err(e) = super::cache::write(&file, 1, len + 1, &saved) {
                tracing::warn!("cannot keep the trained head in {}: {e}", file.display());
            }
        }
        Ok(head)
    }

    fn raw_logits(&self, x: &[f32], texts: &[&str], classes: usize) -> Vec<f32> {
        let words: Vec<Sparse> = texts
            .iter()
            .map(|t| self.vocab.vector(t, self.word_weight))
            .collect();
        logits(
            x,
            &words,
            texts.len(),
            self.dims,
            self.vocab.len(),
            classes,
            &self.params,
        )
    }

    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The fitted temperature (1 when not calibrated).
    pub fn temperature(&self) -> f32 {
        self.temperature
    }

    /// Calibrated class probabilities, `[n, classes]`, for embeddings `x`
    /// and their texts.
    pub fn probabilities(&self, x: &[f32], texts: &[&str]) -> Vec<f32> {
        let classes = self.labels.len();
        let mut z = self.raw_logits(x, texts, classes);
        let inv_t = 1.0 / self.temperature;
        z.iter_mut().for_each(|v| *v *= inv_t);
        softmax_rows(&mut z, classes);
        z
    }

    /// Best label index and its calibrated probability for each query.
    pub fn predict_many(&self, x: &[f32], texts: &[&str]) -> Vec<(usize, f32)> {
        super::linalg::argmax_rows(&self.probabilities(x, texts), self.labels.len())
    }
}

/// A trained hybrid head behind the `Classifier` seam (embeds, then
/// predicts). A reject label (`oos`, `other`) is returned as such, so a
/// tree can branch on it; the router has none.
pub struct HybridClassifier {
    embedder: Arc<dyn Embedder>,
    head: HybridHead,
}

impl HybridClassifier {
    pub fn new(embedder: Arc<dyn Embedder>, head: HybridHead) -> Self {
        Self { embedder, head }
    }

    pub fn head(&self) -> &HybridHead {
        &self.head
    }
}

impl Classifier for HybridClassifier {
    fn classify(&self, text: &str) -> Option<(String, f32)> {
        let v = match self.embedder.embed_one(text) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("classification failed: {e:#}");
                return None;
            }
        };
        let (i, p) = *self.head.predict_many(&v, &[text]).first()?;
        Some((self.head.labels.get(i)?.clone(), p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three intents on a 3-d sphere plus a reject class near the origin
    /// of their words; 12 examples each, so calibration runs.
    fn toy() -> (Vec<f32>, Vec<String>, Vec<usize>, Vec<String>) {
        let mut x = Vec::new();
        let mut texts = Vec::new();
        let mut y = Vec::new();
        let words = ["lights on", "volume up", "weather today", "tell me a story"];
        for class in 0..4 {
            for i in 0..12 {
                let jitter = (i as f32 - 5.5) * 0.02;
                let mut v = [jitter, -jitter, 0.1];
                if class < 3 {
                    v[class] += 1.0;
                } else {
                    v = [0.5 + jitter, 0.5, 0.5 - jitter];
                }
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
                x.extend(v.iter().map(|a| a / norm));
                texts.push(format!("{} please {i}", words[class]));
                y.push(class);
            }
        }
        let labels = ["lights", "volume", "weather", "oos"]
            .map(String::from)
            .to_vec();
        (x, texts, y, labels)
    }

    fn train_toy() -> HybridHead {
        let (x, texts, y, labels) = toy();
        let t: Vec<&str> = texts.iter().map(String::as_str).collect();
        HybridHead::train(&x, &t, &y, labels, 3, HybridOptions::default()).unwrap()
    }

    #[test]
    fn learns_separable_intents_and_the_reject_class() {
        let head = train_toy();
        let p = head.predict_many(
            &[0.98, 0.1, 0.1, 0.1, 0.1, 0.98, 0.55, 0.6, 0.58],
            &["lights on now", "weather today", "tell me a story"],
        );
        let labels: Vec<&str> = p.iter().map(|(i, _)| head.labels()[*i].as_str()).collect();
        assert_eq!(labels, ["lights", "weather", "oos"], "{p:?}");
        assert!(crate::nlu::is_reject_label(labels[2]));
        for (_, conf) in &p {
            assert!((0.0..=1.0).contains(conf) && *conf > 0.5, "{p:?}");
        }
        // Calibrated (48 examples ≤ the limit): a temperature was fitted.
        assert!(head.temperature() != 1.0, "{}", head.temperature());
        let probs = head.probabilities(&[0.6, 0.8, 0.0], &["volume up"]);
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    }

    #[test]
    fn a_cached_head_is_the_trained_one_and_a_corrupt_cache_retrains() {
        let dir = tempfile::tempdir().unwrap();
        let x = [
            1.0, 0.0, 0.9, 0.1, 0.0, 1.0, 0.1, 0.9, 0.95, 0.05, 0.05, 0.95,
        ];
        let t = [
            "turn it up",
            "louder",
            "what time",
            "the time",
            "up",
            "time now",
        ];
        let y = [0, 0, 1, 1, 0, 1];
        let labels = vec!["volume".to_string(), "time".to_string()];
        let train = || {
            HybridHead::train_cached(
                &x,
                &t,
                &y,
                labels.clone(),
                2,
                HybridOptions::default(),
                Some(dir.path()),
            )
            .unwrap()
        };
        let first = train();
        let files: Vec<_> = std::fs::read_dir(dir.path().join("cache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let second = train();
        assert_eq!(first.params, second.params);
        assert_eq!(first.temperature, second.temperature);
        let plain =
            HybridHead::train(&x, &t, &y, labels.clone(), 2, HybridOptions::default()).unwrap();
        assert_eq!(second.params, plain.params);
        // A corrupt file is ignored and the head trained again.
        let mut bytes = std::fs::read(&files[0]).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&files[0], &bytes).unwrap();
        let third = train();
        assert_eq!(third.params, plain.params);
        // Other examples are another file, not this head.
        let y2 = [0, 1, 1, 1, 0, 1];
        let other = HybridHead::train_cached(
            &x,
            &t,
            &y2,
            labels.clone(),
            2,
            HybridOptions::default(),
            Some(dir.path()),
        )
        .unwrap();
        assert_ne!(other.params, plain.params);
        assert_eq!(
            std::fs::read_dir(dir.path().join("cache")).unwrap().count(),
            2
        );
    }

    #[test]
    fn training_is_deterministic() {
        let (a, b) = (train_toy(), train_toy());
        assert_eq!(a.params, b.params);
        assert_eq!(a.temperature, b.temperature);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let one = ["a"];
        assert!(
            HybridHead::train(&[1.0], &one, &[0], vec!["a".into()], 2, Default::default()).is_err()
        );
        assert!(HybridHead::train(
            &[1.0, 0.0],
            &one,
            &[3],
            vec!["a".into()],
            2,
            Default::default()
        )
        .is_err());
        assert!(HybridHead::train(
            &[1.0, 0.0],
            &[],
            &[0],
            vec!["a".into()],
            2,
            Default::default()
        )
        .is_err());
    }

    #[test]
    fn temperature_sharpens_under_confident_logits() {
        // Logits that are always right but soft want T < 1.
        let z = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0];
        let t = fit_temperature(&z, &[0, 1, 0], 2);
        assert!(t < 0.2, "{t}");
    }
}
