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
pub mod knn;
pub mod linalg;
pub mod linear;
pub mod numbers;
/// ONNX Runtime is a leaf of its own (`crate::onnx`); kept here for old paths.
pub use crate::onnx;
pub mod router;
pub mod routes;

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
    /// Global kNN acceptance threshold (R-KNN); classify nodes may override.
    pub threshold: f32,
    /// Neighbours per intent (R-KNN: 3).
    pub k: usize,
    /// Intra-op threads for the embedder (1 is fastest for one utterance).
    pub threads: usize,
    /// The router's on-device scorer over the route examples: `knn` (R-KNN,
    /// the spec's default) or `softmax` (a linear head trained at start on
    /// the same examples; more confident on unseen phrasings, see
    /// notes/nlu.md).
    pub route_scorer: RouteScorer,
}

crate::choice! {
    /// The router's on-device scorer (`nlu.route_scorer`).
    pub enum RouteScorer("route scorer") {
        Knn = "knn" | "": "nearest neighbours over the route examples (R-KNN)",
        Softmax = "softmax": "a linear head trained at start on the same examples",
    }
}

impl Default for NluConfig {
    fn default() -> Self {
        Self {
            embedding_model: "all-MiniLM-L6-v2".into(),
            model_file: "all-MiniLM-L6-v2-int8.onnx".into(),
            tokenizer_file: "all-MiniLM-L6-v2-tokenizer.json".into(),
            onnxruntime_lib: String::new(),
            threshold: 0.65,
            k: 3,
            threads: 1,
            route_scorer: RouteScorer::Knn,
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
    fn dims(&self) -> usize;
    /// Identifies the model for cache keys (name + file hash).
    fn model_id(&self) -> String;
}

/// The R-KNN contract: the best label and its confidence, or `None` when
/// the classifier cannot answer (no model loaded) — the caller falls back.
pub trait Classifier: Send + Sync {
    fn classify(&self, text: &str) -> Option<(String, f32)>;
}
