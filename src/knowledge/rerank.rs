//! Rerank the vector candidates to a relevance score in [0, 1] that the
//! 0.3 cut applies to. Two backends behind one trait:
//!
//! - [`CrossEncoder`]: an ONNX cross-encoder in `models_dir`
//!   (`knowledge.reranker_model` + its tokenizer), the seed's choice. The
//!   query and passage are encoded as a pair (`input_ids`,
//!   `attention_mask`, `token_type_ids`, int64 `[1, seq]`); the model's
//!   first output is one logit per pair (`[1, 1]` or `[1]`), turned into a
//!   probability with the logistic function (the ms-marco cross-encoders'
//!   calibration). No registry we can reach ships one, so the device
//!   usually runs:
//! - [`Fusion`]: a calibrated mix of the vector cosine and BM25: a
//!   logistic model of "this chunk is relevant", fitted on the labelled
//!   candidates of tests/data/knowledge (363 candidates of 19 questions,
//!   19 relevant): p = σ(−15 + 7.5·cosine + 14.5·bm25), bm25 from the
//!   Porter-stemmed FTS5 index squashed to [0, 1) as in [`super::bm25`].
//!   The score is an estimated probability, so the seed's 0.3 cut means
//!   "at least a 30 % chance of being relevant". In 2-fold
//!   cross-validation over the questions the cut kept 18 of 19 held-out
//!   relevant candidates and 4 of 344 irrelevant ones; the table per cut
//!   is in notes/knowledge.md (`earshot eval retrieval`).

use std::path::PathBuf;

use anyhow::Result;

use super::KnowledgeConfig;
use crate::paths::Paths;

/// What a reranker sees of one candidate.
#[derive(Debug, Clone)]
pub struct RerankInput<'a> {
    pub text: &'a str,
    /// Cosine similarity to the (rewritten) query.
    pub vector: f32,
    /// Normalised BM25 in [0, 1).
    pub bm25: f32,
}

/// Scores candidates for a query, one score in [0, 1] each, same order.
pub trait Reranker: Send + Sync {
    /// `cross-encoder:<file>` or `fusion`.
    fn name(&self) -> String;
    fn score(&self, query: &str, candidates: &[RerankInput<'_>]) -> Result<Vec<f32>>;
}

/// Where the fusion's calibration came from, for `doctor` and the notes.
pub const FUSION_CALIBRATION: &str = "logistic fit on the repository's labelled corpus (tests/data/knowledge, 19 questions)";

/// Logistic intercept, cosine weight and BM25 weight (see the module doc).
pub const FUSION_BIAS: f32 = -15.0;
pub const FUSION_COSINE: f32 = 7.5;
pub const FUSION_BM25: f32 = 14.5;

/// The calibrated BM25 + vector fusion (see the module doc).
#[derive(Debug, Default, Clone, Copy)]
pub struct Fusion;

impl Fusion {
    /// Estimated probability that a chunk with this cosine and BM25 is relevant.
    pub fn fuse(vector: f32, bm25: f32) -> f32 {
        let z = FUSION_BIAS
            + FUSION_COSINE * vector.clamp(-1.0, 1.0)
            + FUSION_BM25 * bm25.clamp(0.0, 1.0);
        1.0 / (1.0 + (-z).exp())
    }
}

impl Reranker for Fusion {
    fn name(&self) -> String {
        "fusion".into()
    }
    fn score(&self, _query: &str, candidates: &[RerankInput<'_>]) -> Result<Vec<f32>> {
        Ok(candidates
            .iter()
            .map(|c| Self::fuse(c.vector, c.bm25))
            .collect())
    }
}

/// The model and tokenizer paths for this config.
pub fn cross_encoder_paths(knowledge: &KnowledgeConfig, paths: &Paths) -> (PathBuf, PathBuf) {
    (
        paths.model_path(&knowledge.reranker_model),
        paths.model_path(&knowledge.reranker_tokenizer),
    )
}

/// The cross-encoder when its files are installed and load, else the
/// fusion (a load failure is logged with its reason).
/// `threads`: ONNX intra-op threads (`nlu.threads`).
pub fn choose(knowledge: &KnowledgeConfig, paths: &Paths, threads: usize) -> Box<dyn Reranker> {
    let (model, tokenizer) = cross_encoder_paths(knowledge, paths);
    if !model.is_file() {
        return Box::new(Fusion);
    }
    match CrossEncoder::load(paths, threads, &model, &tokenizer) {
        Ok(ce) => Box::new(ce),
        Err(e) => {
            tracing::warn!(
                "cross-encoder {} unusable, reranking by BM25+vector fusion: {e:#}",
                model.display()
            );
            Box::new(Fusion)
        }
    }
}

#[cfg(feature = "onnx")]
mod onnx_impl {
    use std::borrow::Cow;
    use std::path::Path;
    use std::sync::Mutex;

    use anyhow::{anyhow, Result};
    use ort::session::{Session, SessionInputValue};
    use ort::value::Tensor;

    use super::{RerankInput, Reranker};
    use crate::paths::Paths;

    /// Longest pair fed to the model (BERT-style models take 512).
    const MAX_TOKENS: usize = 512;

    /// An ONNX cross-encoder: (query, passage) → relevance logit.
    pub struct CrossEncoder {
        session: Mutex<Session>,
        tokenizer: tokenizers::Tokenizer,
        input_names: Vec<String>,
        file: String,
    }

    impl CrossEncoder {
        pub fn load(paths: &Paths, threads: usize, model: &Path, tokenizer: &Path) -> Result<Self> {
            let mut tokenizer = crate::nlu::embedder::load_tokenizer(tokenizer)?;
            tokenizer
                .with_truncation(Some(tokenizers::TruncationParams {
                    max_length: MAX_TOKENS,
                    strategy: tokenizers::TruncationStrategy::LongestFirst,
                    ..Default::default()
                }))
                .map_err(|e| anyhow!("cannot set up the reranker tokenizer: {e}"))?;
            tokenizer.with_padding(None);
            let env = crate::onnx::environment(paths)?;
            let bad = |e: ort::Error| {
                anyhow!(
                    "cannot load the reranker {}: {}",
                    model.display(),
                    e.to_string().replace('\n', " ")
                )
            };
            let session = Session::builder(&env)
                .map_err(bad)?
                .with_intra_threads(threads.max(1))
                .map_err(|e| bad(e.into()))?
                .commit_from_file(model)
                .map_err(bad)?;
            let input_names: Vec<String> = session
                .inputs()
                .iter()
                .map(|i| i.name().to_string())
                .collect();
            for name in &input_names {
                if !matches!(
                    name.as_str(),
                    "input_ids" | "attention_mask" | "token_type_ids"
                ) {
                    return Err(anyhow!(
                        "the reranker {} wants an input {name:?}; a cross-encoder takes input_ids, attention_mask, token_type_ids",
                        model.display()
                    ));
                }
            }
            if !input_names.iter().any(|n| n == "input_ids") {
                return Err(anyhow!(
                    "the reranker {} has no input_ids input",
                    model.display()
                ));
            }
            let file = model
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("reranker")
                .to_string();
            Ok(Self {
                session: Mutex::new(session),
                tokenizer,
                input_names,
                file,
            })
        }

        fn logit(&self, query: &str, passage: &str) -> Result<f32> {
            let enc = self
                .tokenizer
                .encode((query, passage), true)
                .map_err(|e| anyhow!("cannot tokenize for the reranker: {e}"))?;
            let seq = enc.get_ids().len().max(1);
            let ids: Vec<i64> = enc.get_ids().iter().map(|&x| x as i64).collect();
            let mask: Vec<i64> = enc.get_attention_mask().iter().map(|&x| x as i64).collect();
            let types: Vec<i64> = enc.get_type_ids().iter().map(|&x| x as i64).collect();
            let err =
                |e: ort::Error| anyhow!("reranking failed: {}", e.to_string().replace('\n', " "));
            let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::new();
            for name in &self.input_names {
                let data = match name.as_str() {
                    "input_ids" => ids.clone(),
                    "attention_mask" => mask.clone(),
                    _ => types.clone(),
                };
                let tensor = Tensor::from_array(([1usize, seq], data)).map_err(err)?;
                inputs.push((Cow::Owned(name.clone()), tensor.into()));
            }
            let mut session = self
                .session
                .lock()
                .map_err(|_| anyhow!("the reranker is unusable after an earlier crash"))?;
            let outputs = session.run(inputs).map_err(err)?;
            let (_, values) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
            values
                .first()
                .copied()
                .filter(|v| v.is_finite())
                .ok_or_else(|| anyhow!("the reranker returned no score"))
        }
    }

    impl Reranker for CrossEncoder {
        fn name(&self) -> String {
            format!("cross-encoder:{}", self.file)
        }
        fn score(&self, query: &str, candidates: &[RerankInput<'_>]) -> Result<Vec<f32>> {
            candidates
                .iter()
                .map(|c| self.logit(query, c.text).map(|l| 1.0 / (1.0 + (-l).exp())))
                .collect()
        }
    }
}

#[cfg(feature = "onnx")]
pub use onnx_impl::CrossEncoder;

/// Without ONNX Runtime support there is no cross-encoder.
#[cfg(not(feature = "onnx"))]
pub struct CrossEncoder;

#[cfg(not(feature = "onnx"))]
impl CrossEncoder {
    pub fn load(_: &Paths, _: usize, _: &std::path::Path, _: &std::path::Path) -> Result<Self> {
        Err(anyhow::anyhow!("this build has no ONNX Runtime support"))
    }
}

#[cfg(not(feature = "onnx"))]
impl Reranker for CrossEncoder {
    fn name(&self) -> String {
        "cross-encoder".into()
    }
    fn score(&self, _: &str, _: &[RerankInput<'_>]) -> Result<Vec<f32>> {
        Err(anyhow::anyhow!("this build has no ONNX Runtime support"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_is_bounded_and_monotonic() {
        assert!(Fusion::fuse(0.0, 0.0) < 0.001);
        assert!(Fusion::fuse(1.0, 1.0) > 0.99);
        assert!(Fusion::fuse(0.5, 0.2) > Fusion::fuse(0.4, 0.2));
        assert!(Fusion::fuse(0.4, 0.6) > Fusion::fuse(0.4, 0.2));
        // A typical relevant chunk (cosine 0.6, bm25 0.85) passes the cut;
        // a topical but irrelevant one (0.45, 0.65) does not.
        assert!(Fusion::fuse(0.6, 0.85) > 0.3);
        assert!(Fusion::fuse(0.45, 0.65) < 0.3);
    }
}
