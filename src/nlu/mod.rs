//! On-device understanding: the MiniLM embedder, classifiers over its
//! embeddings, and the router that picks a path for every request.
//!
//! The two seams here are [`Embedder`] (text → unit vectors) and
//! [`Classifier`] (`classify(text) -> Option<(label, confidence)>`, R-KNN):
//! any classifier implementing it plugs into the router and the intent
//! tree unchanged.

pub mod cache;
pub mod embedder;
pub mod examples;
pub mod hybrid;
pub mod knn;
pub mod lbfgs;
pub mod linalg;
pub mod linear;
pub mod numbers;
pub mod when;
/// ONNX Runtime is a leaf of its own (`crate::onnx`); kept here for old paths.
pub use crate::onnx;
pub mod router;
pub mod routes;
pub mod scorer;
pub mod words;

pub use embedder::{embed_all, files_status, load_embedder};
pub use onnx::onnxruntime_status;

use serde::{Deserialize, Serialize};

/// `[nlu]`: the embedder and the on-device classifiers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NluConfig {
    /// `EMBEDDING_MODEL`; only all-MiniLM-L6-v2 (384 dims) ships.
    pub embedding_model: String,
    /// ONNX model file under `models_dir`.
    pub model_file: String,
    /// tokenizer.json under `models_dir`.
    pub tokenizer_file: String,
    /// Path of libonnxruntime.so (`ORT_DYLIB_PATH`); empty = look in
    /// `models_dir` and the usual places.
    pub onnxruntime_lib: String,
    /// Global acceptance threshold of the tree's classify nodes (those
    /// without `min_confidence`), compared with the scorer's confidence.
    pub threshold: f32,
    /// Neighbours per intent (R-KNN: 3).
    pub k: usize,
    /// Intra-op threads for the embedder (1 is fastest for one utterance).
    pub threads: usize,
    /// The one on-device scorer, for the router *and* the tree's classify
    /// nodes (one setting, so both compare the same kind of confidence
    /// with their thresholds): `hybrid` (default; calibrated logistic
    /// regression over embedding + words), `knn` (R-KNN) or `softmax`.
    /// Older files spell it `route_scorer`, still read (issue 16 point 5).
    #[serde(alias = "route_scorer")]
    pub scorer: Scorer,
}

crate::choice! {
    /// The on-device scorer (`nlu.scorer`, formerly `nlu.route_scorer`).
    pub enum Scorer("scorer") {
        Hybrid = "hybrid" | "": "calibrated logistic regression over the embedding and its words, trained at start",
        Knn = "knn": "nearest neighbours over the examples (R-KNN)",
        Softmax = "softmax": "a linear head over the embedding, trained at start",
    }
}

/// The old name of [`Scorer`], when it chose the router's scorer only.
pub type RouteScorer = Scorer;

/// Training labels that mean "none of these intents" (out-of-scope
/// examples). A classifier learns them like any intent; predicting one is
/// a rejection (`eval intents` counts it so; the device tree branches
/// `other` to the router graph).
pub const REJECT_LABELS: &[&str] = &["oos", "other"];

/// Whether `label` is a reject class ([`REJECT_LABELS`]).
pub fn is_reject_label(label: &str) -> bool {
    REJECT_LABELS.contains(&label)
}

impl Default for NluConfig {
    fn default() -> Self {
        Self {
            embedding_model: "all-MiniLM-L6-v2".into(),
            model_file: "all-MiniLM-L6-v2-int8-nbits.onnx".into(),
            tokenizer_file: "all-MiniLM-L6-v2-tokenizer.json".into(),
            onnxruntime_lib: String::new(),
            threshold: 0.65,
            k: 3,
            threads: 1,
            scorer: Scorer::Hybrid,
        }
    }
}

/// The router graph (R-ROUTE).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// Whole words/phrases that send a request straight to `context`. The
    /// 11 seed keywords are always included; these are extra.
    pub extra_keywords: Vec<String>,
    /// Below this on-device classifier confidence the LLM is asked.
    pub classifier_threshold: f32,
    /// Ask the LLM when the classifier is absent or unsure.
    pub llm_fallback: bool,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            extra_keywords: Vec::new(),
            classifier_threshold: 0.65,
            llm_fallback: true,
        }
    }
}

/// Text → L2-normalised vectors (cosine = dot product).
pub trait Embedder: Send + Sync {
    /// Embed a batch; one vector per input, each of [`Embedder::dims`].
    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>>;
    /// Embed one utterance without padding.
    fn embed_one(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        self.embed(&[text])?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("the embedder returned no vector"))
    }
    /// Embed one utterance with the model itself, never from a vector
    /// remembered for the same text (benchmarks time the model).
    fn embed_fresh(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        self.embed_one(text)
    }
    fn dims(&self) -> usize;
    /// Identifies the model for cache keys (name + file hash).
    fn model_id(&self) -> String;
}

/// The R-KNN contract: the best label and its confidence, or `None` when
/// the classifier cannot answer (no model loaded) — the caller falls back.
pub trait Classifier: Send + Sync {
    fn classify(&self, text: &str) -> Option<(String, f32)>;
}
