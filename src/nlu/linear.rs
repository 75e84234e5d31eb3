//! A softmax (multinomial logistic regression) head over MiniLM
//! embeddings: a trained alternative to R-KNN for large intent sets.
//!
//! kNN compares a query with individual examples, so one stray example of
//! the wrong intent can win; a linear head learns, per intent, which
//! directions of the embedding matter, from all its examples at once. On
//! CLINC150 it beats the R-KNN scorer's in-scope accuracy (notes/nlu.md),
//! still fully on device: 384 × intents weights, one matrix multiply per
//! query. Its confidence is the softmax probability of the best intent.
//!
//! Training is full-batch Adam on cross-entropy with L2 weight decay,
//! starting from zero weights, so it is deterministic.

use std::sync::Arc;

use anyhow::{anyhow, Result};

use super::linalg::matmul;
use super::{Classifier, Embedder};

/// Training knobs (defaults: 300 full-batch epochs, enough to converge on
/// CLINC150's 15k examples; see notes/nlu.md).
#[derive(Debug, Clone, Copy)]
pub struct TrainOptions {
    pub epochs: usize,
    pub learning_rate: f32,
    pub l2: f32,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            epochs: 300,
            learning_rate: 0.05,
            l2: 1e-4,
        }
    }
}

/// Weights `[dims, classes]` and biases of a trained head.
#[derive(Debug, Clone)]
pub struct SoftmaxHead {
    labels: Vec<String>,
    dims: usize,
    w: Vec<f32>,
    b: Vec<f32>,
}

/// Row-wise softmax in place over `[rows, classes]` logits.
fn softmax_rows(logits: &mut [f32], classes: usize) {
    for row in logits.chunks_exact_mut(classes) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for v in row.iter_mut() {
            *v = (*v - max).exp();
            sum += *v;
        }
        if sum > 0.0 {
            row.iter_mut().for_each(|v| *v /= sum);
        }
    }
}

impl SoftmaxHead {
    /// Train on `x` (`[n, dims]` row-major) with `y[i]` indexing `labels`.
    pub fn train(
        x: &[f32],
        y: &[usize],
        labels: Vec<String>,
        dims: usize,
        options: TrainOptions,
    ) -> Result<Self> {
        let n = y.len();
        let c = labels.len();
        if n == 0 || c == 0 || dims == 0 || x.len() != n * dims {
            return Err(anyhow!(
                "cannot train on {n} examples of {dims} dims and {c} labels"
            ));
        }
        if let Some(bad) = y.iter().find(|&&l| l >= c) {
            return Err(anyhow!("label index {bad} is out of range ({c} labels)"));
        }
        // xᵀ [dims, n] for the weight gradient.
        let mut xt = vec![0.0f32; dims * n];
        for (i, row) in x.chunks_exact(dims).enumerate() {
            for (d, v) in row.iter().enumerate() {
                xt[d * n + i] = *v;
            }
        }
        let mut w = vec![0.0f32; dims * c];
        let mut b = vec![0.0f32; c];
        let (mut mw, mut vw) = (vec![0.0f32; dims * c], vec![0.0f32; dims * c]);
        let (mut mb, mut vb) = (vec![0.0f32; c], vec![0.0f32; c]);
        let (beta1, beta2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        let inv_n = 1.0 / n as f32;
        for epoch in 1..=options.epochs {
            // Probabilities, then P - Y.
            let mut g = matmul(x, n, &w, dims, c);
            for row in g.chunks_exact_mut(c) {
                row.iter_mut().zip(&b).for_each(|(v, bias)| *v += bias);
            }
            softmax_rows(&mut g, c);
            for (row, &label) in g.chunks_exact_mut(c).zip(y) {
                row[label] -= 1.0;
            }
            let mut gw = matmul(&xt, dims, &g, n, c);
            for (gwi, wi) in gw.iter_mut().zip(&w) {
                *gwi = *gwi * inv_n + options.l2 * wi;
            }
            let mut gb = vec![0.0f32; c];
            for row in g.chunks_exact(c) {
                gb.iter_mut().zip(row).for_each(|(s, v)| *s += v * inv_n);
            }
            let t = epoch as i32;
            let lr = options.learning_rate * (1.0 - beta2.powi(t)).sqrt() / (1.0 - beta1.powi(t));
            adam(&mut w, &gw, &mut mw, &mut vw, lr, beta1, beta2, eps);
            adam(&mut b, &gb, &mut mb, &mut vb, lr, beta1, beta2, eps);
        }
        Ok(Self { labels, dims, w, b })
    }

    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Class probabilities for `[n, dims]` queries → `[n, classes]`.
    pub fn probabilities(&self, x: &[f32], n: usize) -> Vec<f32> {
        let c = self.labels.len();
        let mut logits = matmul(x, n, &self.w, self.dims, c);
        for row in logits.chunks_exact_mut(c) {
            row.iter_mut().zip(&self.b).for_each(|(v, bias)| *v += bias);
        }
        softmax_rows(&mut logits, c);
        logits
    }

    /// Best class index and its probability for each of `n` queries.
    pub fn predict_many(&self, x: &[f32], n: usize) -> Vec<(usize, f32)> {
        super::linalg::argmax_rows(&self.probabilities(x, n), self.labels.len())
    }
}

#[allow(clippy::too_many_arguments)]
fn adam(
    p: &mut [f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    lr: f32,
    b1: f32,
    b2: f32,
    eps: f32,
) {
    for i in 0..p.len() {
        m[i] = b1 * m[i] + (1.0 - b1) * g[i];
        v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
        p[i] -= lr * m[i] / (v[i].sqrt() + eps);
    }
}

/// A trained head behind the `Classifier` seam (embeds, then predicts).
pub struct HeadClassifier {
    embedder: Arc<dyn Embedder>,
    head: SoftmaxHead,
}

impl HeadClassifier {
    pub fn new(embedder: Arc<dyn Embedder>, head: SoftmaxHead) -> Self {
        Self { embedder, head }
    }
}

impl Classifier for HeadClassifier {
    fn classify(&self, text: &str) -> Option<(String, f32)> {
        let v = match self.embedder.embed_one(text) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("classification failed: {e:#}");
                return None;
            }
        };
        let (i, p) = *self.head.predict_many(&v, 1).first()?;
        Some((self.head.labels.get(i)?.clone(), p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_a_separable_toy_problem() {
        // Two classes on the unit circle: up-ish and right-ish.
        let x = [0.1, 0.99, -0.1, 0.99, 0.99, 0.1, 0.99, -0.1];
        let y = [0, 0, 1, 1];
        let head = SoftmaxHead::train(
            &x,
            &y,
            vec!["up".into(), "right".into()],
            2,
            TrainOptions {
                epochs: 200,
                ..Default::default()
            },
        )
        .unwrap();
        let p = head.predict_many(&[0.0, 1.0, 1.0, 0.0], 2);
        assert_eq!((p[0].0, p[1].0), (0, 1));
        assert!(p[0].1 > 0.9 && p[1].1 > 0.9, "{p:?}");
        let probs = head.probabilities(&[0.6, 0.8], 1);
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(SoftmaxHead::train(&[1.0], &[0], vec!["a".into()], 2, Default::default()).is_err());
        assert!(
            SoftmaxHead::train(&[1.0, 0.0], &[3], vec!["a".into()], 2, Default::default()).is_err()
        );
    }
}
