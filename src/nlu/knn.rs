//! The R-KNN classifier: k nearest examples per intent over MiniLM
//! embeddings.
//!
//! For a query, the cosine to every example is computed; per intent, its
//! top-k similarities (k = 3) give the score `0.9·max + 0.1·mean`; the best
//! intent and its score are returned. Callers decide acceptance with a
//! threshold (global default 0.65; a tree's classify node may set its own)
//! — [`KnnClassifier::classify_with_threshold`] does both.
//!
//! Building embeds every example once; the matrix is cached on disk under
//! `state_dir/cache/knn-<key>.bin`, the key being a hash of the model id and
//! every intent + utterance, so changing one example (or the model) makes a
//! new key, and a corrupt or truncated cache file is ignored and rebuilt.
//!
//! ```no_run
//! # use std::{collections::BTreeMap, sync::Arc};
//! # fn demo(config: &earshot::config::Config) -> anyhow::Result<()> {
//! use earshot::nlu::{knn::KnnClassifier, load_embedder};
//! let examples = earshot::nlu::examples::parse_examples(
//!     "## time\nwhat's the time\nwhat time is it\n## stop\nstop\nbe quiet\n", "inline")?;
//! let knn = KnnClassifier::build(load_embedder(&config.nlu, &config.paths())?, &examples, Some(&config.state_dir))?;
//! let hit = knn.classify_with_threshold("what's the time now", 0.75); // Some(("time", 0.9…))
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Result};

use super::examples::Examples;
use super::{cache, linalg, Classifier, Embedder};

/// R-KNN: neighbours per intent.
pub const DEFAULT_K: usize = 3;
/// R-KNN: global acceptance threshold.
pub const DEFAULT_THRESHOLD: f32 = 0.65;

/// Per-intent score from its similarities: `0.9·max + 0.1·mean` of the top
/// `k` (fewer when the intent has fewer examples). `None` for no examples.
pub fn knn_score(sims: &[f32], k: usize) -> Option<f32> {
    let mut top: Vec<f32> = sims.iter().copied().filter(|s| s.is_finite()).collect();
    top.sort_by(|a, b| b.total_cmp(a));
    top.truncate(k.max(1));
    let max = *top.first()?;
    let mean = top.iter().sum::<f32>() / top.len() as f32;
    Some(0.9 * max + 0.1 * mean)
}

/// A kNN classifier over one intent set.
pub struct KnnClassifier {
    embedder: Arc<dyn Embedder>,
    intents: Vec<String>,
    /// Intent index of each example row.
    labels: Vec<usize>,
    /// Example embeddings, row-major `[examples, dims]`.
    matrix: Vec<f32>,
    dims: usize,
    k: usize,
    threshold: f32,
}

impl KnnClassifier {
    /// Embed `examples` (or read them from the cache under
    /// `state_dir/cache`; `None` = no disk cache) with k = 3 and threshold
    /// 0.65.
    pub fn build(
        embedder: Arc<dyn Embedder>,
        examples: &Examples,
        state_dir: Option<&Path>,
    ) -> Result<Self> {
        let intents: Vec<String> = examples.keys().cloned().collect();
        let mut labels = Vec::new();
        let mut texts: Vec<&str> = Vec::new();
        for (i, utterances) in examples.values().enumerate() {
            for u in utterances {
                labels.push(i);
                texts.push(u.as_str());
            }
        }
        if texts.is_empty() {
            return Err(anyhow!("a kNN classifier needs at least one example"));
        }
        let dims = embedder.dims();
        let path = state_dir.map(|d| cache_path(d, &embedder.model_id(), examples));
        let matrix = cache::embeddings_cached(embedder.as_ref(), &texts, path.as_deref())?;
        Ok(Self {
            embedder,
            intents,
            labels,
            matrix,
            dims,
            k: DEFAULT_K,
            threshold: DEFAULT_THRESHOLD,
        })
    }

    /// Use `k` neighbours per intent instead of 3.
    pub fn with_k(mut self, k: usize) -> Self {
        self.k = k.max(1);
        self
    }

    /// The default acceptance threshold of [`Self::classify_accepted`].
    pub fn with_threshold(mut self, threshold: f32) -> Self {
        self.threshold = threshold;
        self
    }

    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// The intent names, sorted.
    pub fn intents(&self) -> &[String] {
        &self.intents
    }

    /// The example matrix (`[examples, dims]`, row-major) and each row's
    /// intent index — e.g. to train another scorer on the same embeddings.
    pub fn examples_matrix(&self) -> (&[f32], &[usize], usize) {
        (&self.matrix, &self.labels, self.dims)
    }

    /// The embedder, to embed once and score several classifiers.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// Every intent's score for an embedded query, best first.
    pub fn scores_for(&self, query: &[f32]) -> Vec<(String, f32)> {
        let sims = linalg::dot_rows(query, 1, &self.matrix, self.labels.len(), self.dims);
        let mut scores: Vec<(String, f32)> = self
            .intent_scores(&sims)
            .into_iter()
            .zip(&self.intents)
            .filter_map(|(s, name)| s.map(|s| (name.clone(), s)))
            .collect();
        scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scores
    }

    /// Per intent (in [`Self::intents`] order), the R-KNN score from one
    /// row of similarities to every example.
    fn intent_scores(&self, sims: &[f32]) -> Vec<Option<f32>> {
        let k = self.k;
        // top[i*k..(i+1)*k]: intent i's best sims, descending.
        let mut top = vec![f32::NEG_INFINITY; self.intents.len() * k];
        let mut counts = vec![0usize; self.intents.len()];
        for (&sim, &label) in sims.iter().zip(&self.labels) {
            counts[label] += 1;
            let slot = &mut top[label * k..(label + 1) * k];
            if sim > slot[k - 1] {
                let mut j = k - 1;
                while j > 0 && slot[j - 1] < sim {
                    slot[j] = slot[j - 1];
                    j -= 1;
                }
                slot[j] = sim;
            }
        }
        (0..self.intents.len())
            .map(|i| {
                let n = counts[i].min(k);
                knn_score(&top[i * k..i * k + n], k)
            })
            .collect()
    }

    /// Best intent index and score for many embedded queries at once
    /// (evaluations): one matrix multiply per chunk of queries.
    pub fn classify_many(&self, queries: &[Vec<f32>]) -> Vec<(usize, f32)> {
        let n = self.labels.len();
        let mut out = Vec::with_capacity(queries.len());
        for chunk in queries.chunks(256) {
            let flat: Vec<f32> = chunk.iter().flatten().copied().collect();
            let sims = linalg::dot_rows(&flat, chunk.len(), &self.matrix, n, self.dims);
            for row in sims.chunks_exact(n.max(1)) {
                let best = self
                    .intent_scores(row)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.map(|s| (i, s)))
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or((0, f32::NEG_INFINITY));
                out.push(best);
            }
        }
        out
    }

    /// The best intent and its score for an embedded query.
    pub fn classify_vector(&self, query: &[f32]) -> Option<(String, f32)> {
        self.scores_for(query).into_iter().next()
    }

    /// Best intent and score for `text`, whatever the score.
    pub fn classify_text(&self, text: &str) -> Result<(String, f32)> {
        let query = self.embedder.embed_one(text)?;
        self.classify_vector(&query)
            .ok_or_else(|| anyhow!("the classifier has no intents"))
    }

    /// The best intent only when its score reaches `threshold` (a classify
    /// node's own, or [`Self::threshold`]); `None` means "fall back".
    pub fn classify_with_threshold(&self, text: &str, threshold: f32) -> Option<(String, f32)> {
        self.classify(text).filter(|(_, score)| *score >= threshold)
    }

    /// [`Self::classify_with_threshold`] at this classifier's threshold.
    pub fn classify_accepted(&self, text: &str) -> Option<(String, f32)> {
        self.classify_with_threshold(text, self.threshold)
    }
}

impl Classifier for KnnClassifier {
    /// R-KNN contract: best intent + score; `None` only when embedding
    /// fails (logged), so the caller falls back.
    fn classify(&self, text: &str) -> Option<(String, f32)> {
        match self.classify_text(text) {
            Ok(hit) => Some(hit),
            Err(e) => {
                tracing::warn!("kNN classification failed: {e:#}");
                None
            }
        }
    }
}

/// Hash of the model id and every intent + utterance (in order).
pub fn cache_key(model_id: &str, examples: &Examples) -> String {
    let parts = examples.iter().flat_map(|(intent, utterances)| {
        std::iter::once(intent.as_str()).chain(
            utterances
                .iter()
                .map(String::as_str)
                .chain(std::iter::once("\u{1}")),
        )
    });
    cache::key(model_id, parts)
}

/// The cache path a classifier over `examples` would use.
pub fn cache_path(state_dir: &Path, model_id: &str, examples: &Examples) -> PathBuf {
    cache::path_in(state_dir, "knn", &cache_key(model_id, examples))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn score_is_point_nine_max_plus_point_one_mean_of_top_k() {
        let s = knn_score(&[0.2, 0.9, 0.5, 0.7], 3).unwrap();
        assert!((s - (0.9 * 0.9 + 0.1 * (0.9 + 0.7 + 0.5) / 3.0)).abs() < 1e-6);
        let s = knn_score(&[0.4], 3).unwrap();
        assert!((s - 0.4).abs() < 1e-6);
        assert_eq!(knn_score(&[], 3), None);
    }

    /// A toy embedder: fixed 2-d vectors per known text, counting calls.
    struct Toy(AtomicUsize);
    impl Embedder for Toy {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| {
                    let a = (t.len() as f32) / 10.0;
                    let n = (a * a + 1.0).sqrt();
                    vec![a / n, 1.0 / n]
                })
                .collect())
        }
        fn dims(&self) -> usize {
            2
        }
        fn model_id(&self) -> String {
            "toy".into()
        }
    }

    #[test]
    fn cache_round_trips_and_corruption_rebuilds() {
        let dir = tempfile::tempdir().unwrap();
        let mut ex = Examples::new();
        ex.insert("a".into(), vec!["x".into(), "xx".into()]);
        ex.insert("b".into(), vec!["xxxxxxxxxx".into()]);
        let toy = Arc::new(Toy(AtomicUsize::new(0)));
        let first = KnnClassifier::build(toy.clone(), &ex, Some(dir.path())).unwrap();
        assert_eq!(toy.0.load(Ordering::SeqCst), 3);
        let again = KnnClassifier::build(toy.clone(), &ex, Some(dir.path())).unwrap();
        assert_eq!(
            toy.0.load(Ordering::SeqCst),
            3,
            "second build read the cache"
        );
        assert_eq!(first.matrix, again.matrix);
        let path = cache_path(dir.path(), "toy", &ex);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let rebuilt = KnnClassifier::build(toy.clone(), &ex, Some(dir.path())).unwrap();
        assert_eq!(toy.0.load(Ordering::SeqCst), 6);
        assert_eq!(first.matrix, rebuilt.matrix);
        ex.get_mut("b").unwrap()[0] = "xxxxxxxxx".into();
        assert_ne!(cache_path(dir.path(), "toy", &ex), path);
    }
}
