//! all-MiniLM-L6-v2 (int8 ONNX) through ort + tokenizers: text → unit
//! vectors (R-KNN).
//!
//! Mean pooling over the attention mask, then L2 normalisation, so a cosine
//! is a dot product. A single utterance runs with no padding at all: the
//! shipped tokenizer.json pads every input to 128 tokens, which costs ~10×
//! on a short command. Batches are padded to their longest member only
//! (the mask keeps the padding out of the mean). Inputs are truncated at the
//! model's 256-token maximum (sentence-transformers' `max_seq_length`), so a
//! 10k-character utterance is cut, not an error.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Context, Result};

use super::Embedder;
use super::NluConfig;
use crate::paths::Paths;

/// Tokens per input the model sees (sentence-transformers' max_seq_length).
pub const MAX_TOKENS: usize = 256;
/// The fix we print for a missing or broken model/tokenizer file.
pub const MODEL_HINT: &str = "run scripts/fetch-embedder.sh";

/// Model and tokenizer paths from the config (`models_dir` + file names).
pub fn model_paths(nlu: &NluConfig, paths: &Paths) -> (PathBuf, PathBuf) {
    (
        paths.model_path(&nlu.model_file),
        paths.model_path(&nlu.tokenizer_file),
    )
}

/// For `earshot doctor`: whether ONNX Runtime, the model and the tokenizer
/// are all in place (file checks only, nothing is loaded), as a one-line
/// summary or a one-line reason with the fix.
pub fn files_status(nlu: &NluConfig, paths: &Paths) -> Result<String, String> {
    let lib = crate::onnx::onnxruntime_status(paths)?;
    let (model, tokenizer) = model_paths(nlu, paths);
    for (what, path) in [("embedding model", &model), ("tokenizer", &tokenizer)] {
        if !path.is_file() {
            return Err(format!("{what} {} not found; {MODEL_HINT}", path.display()));
        }
    }
    Ok(format!(
        "{} with {} (ONNX Runtime {})",
        model.display(),
        tokenizer.display(),
        lib.display()
    ))
}

/// A cheap identity of a model file for cache keys: sha256 over its size,
/// its first and last 256 KiB. Hashing all 23 MB would add ~60 ms to every
/// CLI start; an edited or replaced model changes these bytes in practice.
pub fn file_fingerprint(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek, SeekFrom};
    const SPAN: u64 = 256 * 1024;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata()?.len();
    let mut hasher = Sha256::new();
    hasher.update(len.to_le_bytes());
    let mut buf = Vec::with_capacity(SPAN as usize);
    file.by_ref().take(SPAN).read_to_end(&mut buf)?;
    hasher.update(&buf);
    if len > SPAN {
        buf.clear();
        file.seek(SeekFrom::Start(len.saturating_sub(SPAN).max(SPAN)))?;
        file.read_to_end(&mut buf)?;
        hasher.update(&buf);
    }
    Ok(hex::encode(&hasher.finalize()[..8]))
}

/// Tokenizer with the shipped padding removed and truncation at
/// [`MAX_TOKENS`].
pub fn load_tokenizer(path: &Path) -> Result<tokenizers::Tokenizer> {
    if !path.is_file() {
        return Err(anyhow!(
            "tokenizer {} not found; {MODEL_HINT}",
            path.display()
        ));
    }
    let mut tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|e| {
        anyhow!(
            "tokenizer {} is not a valid tokenizer.json ({}); {MODEL_HINT}",
            path.display(),
            one_line(&e.to_string())
        )
    })?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: MAX_TOKENS,
            ..Default::default()
        }))
        .map_err(|e| anyhow!("tokenizer {}: {e}", path.display()))?;
    Ok(tokenizer)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Token ids of one input, unpadded.
#[cfg(feature = "onnx")]
struct Tokens {
    ids: Vec<i64>,
    types: Vec<i64>,
}

#[cfg(feature = "onnx")]
fn tokenize(tokenizer: &tokenizers::Tokenizer, text: &str) -> Result<Tokens> {
    let encoding = tokenizer.encode(text, true).map_err(|e| {
        anyhow!(
            "cannot tokenize the utterance: {}",
            one_line(&e.to_string())
        )
    })?;
    Ok(Tokens {
        ids: encoding.get_ids().iter().map(|&i| i64::from(i)).collect(),
        types: encoding
            .get_type_ids()
            .iter()
            .map(|&i| i64::from(i))
            .collect(),
    })
}

/// Mean of `hidden[b, t, :]` over positions with `mask[b, t] == 1`, then
/// L2-normalised. `hidden` is `[batch, seq, dims]` row-major.
pub fn mean_pool_normalise(
    hidden: &[f32],
    mask: &[i64],
    batch: usize,
    seq: usize,
    dims: usize,
) -> Vec<Vec<f32>> {
    (0..batch)
        .map(|b| {
            let mut sum = vec![0f32; dims];
            let mut count = 0f32;
            for t in 0..seq {
                if mask.get(b * seq + t).copied().unwrap_or(0) == 0 {
                    continue;
                }
                let start = (b * seq + t) * dims;
                if let Some(row) = hidden.get(start..start + dims) {
                    for (s, v) in sum.iter_mut().zip(row) {
                        *s += v;
                    }
                    count += 1.0;
                }
            }
            if count > 0.0 {
                sum.iter_mut().for_each(|s| *s /= count);
            }
            let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt();
            if norm > 1e-12 {
                sum.iter_mut().for_each(|s| *s /= norm);
            }
            sum
        })
        .collect()
}

/// Embed many texts in length-sorted batches of `batch` (little padding),
/// returning vectors in the input order. For building example matrices and
/// evaluations.
pub fn embed_all(embedder: &dyn Embedder, texts: &[&str], batch: usize) -> Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
    for chunk in order.chunks(batch.max(1)) {
        let items: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
        let vectors = embedder.embed(&items)?;
        if vectors.len() != chunk.len() {
            return Err(anyhow!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                chunk.len()
            ));
        }
        for (&i, v) in chunk.iter().zip(vectors) {
            out[i] = v;
        }
    }
    Ok(out)
}

/// How many single texts [`RecentVectors`] remembers: more than one turn
/// embeds (its look, the answer prepared meanwhile, recall, the turn's own
/// router and tree).
pub const RECENT_TEXTS: usize = 8;

/// The vectors of the last few texts embedded one at a time. A voice turn
/// embeds the same words several times: the look at a pause classifies
/// them, the prepared answer's dry run classifies them and recalls
/// memories with them, and the turn then does all of it again on the
/// transcript it reused (issue 21: each pass is ~5–8 ms of MiniLM on the
/// path to the first answer audio). The model is deterministic, so a
/// remembered vector is the vector.
#[derive(Default)]
pub struct RecentVectors {
    items: std::collections::VecDeque<(String, Vec<f32>)>,
}

impl RecentVectors {
    /// The vector of `text`, if it is one of the last ones embedded.
    pub fn get(&mut self, text: &str) -> Option<Vec<f32>> {
        let at = self.items.iter().position(|(t, _)| t == text)?;
        // Most recently used last, so the oldest use is dropped first.
        let item = self.items.remove(at)?;
        let vector = item.1.clone();
        self.items.push_back(item);
        Some(vector)
    }

    /// Remember `vector` as `text`'s, forgetting the least recently used.
    pub fn put(&mut self, text: &str, vector: &[f32]) {
        if let Some(at) = self.items.iter().position(|(t, _)| t == text) {
            self.items.remove(at);
        }
        if self.items.len() >= RECENT_TEXTS {
            self.items.pop_front();
        }
        self.items.push_back((text.to_string(), vector.to_vec()));
    }
}

#[cfg(feature = "onnx")]
mod onnx_impl {
    use std::borrow::Cow;

    use ort::session::builder::GraphOptimizationLevel;
    use ort::session::{Session, SessionInputValue};
    use ort::value::Tensor;

    use super::*;

    /// The MiniLM embedder. The session is behind a mutex because ort's
    /// `run` needs `&mut`; one utterance at a time is what a voice device
    /// does anyway.
    pub struct OnnxEmbedder {
        session: Mutex<Session>,
        tokenizer: tokenizers::Tokenizer,
        input_names: Vec<String>,
        dims: usize,
        model_id: String,
        /// Texts embedded one at a time lately (see [`RecentVectors`]).
        recent: Mutex<RecentVectors>,
    }

    impl OnnxEmbedder {
        /// Load from the config: library, model, tokenizer; each missing
        /// part is a one-line error with its fix.
        pub fn from_config(nlu: &NluConfig, paths: &Paths) -> Result<Self> {
            let (model, tokenizer) = model_paths(nlu, paths);
            Self::load(nlu, paths, &model, &tokenizer)
        }

        /// Load a specific model + tokenizer (ONNX Runtime from `paths`).
        pub fn load(
            nlu: &NluConfig,
            paths: &Paths,
            model: &Path,
            tokenizer: &Path,
        ) -> Result<Self> {
            if !model.is_file() {
                return Err(anyhow!(
                    "embedding model {} not found; {MODEL_HINT}",
                    model.display()
                ));
            }
            let tokenizer = load_tokenizer(tokenizer)?;
            let env = crate::onnx::environment(paths)?;
            let threads = nlu.threads.max(1);
            let bad = |e: ort::Error| {
                anyhow!(
                    "embedding model {} cannot be loaded ({}); {MODEL_HINT}",
                    model.display(),
                    one_line(&e.to_string())
                )
            };
            // Basic graph optimisations: measured here, the full level only
            // adds ~200 ms to every start (session creation 470 → 270 ms)
            // for no gain per utterance on this model (notes/nlu.md).
            let session = Session::builder(&env)
                .map_err(bad)?
                .with_optimization_level(GraphOptimizationLevel::Level1)
                .map_err(|e| bad(e.into()))?
                // One planned memory pattern per input length is kept for
                // ever; texts come in every length (see tts/piper.rs).
                .with_memory_pattern(false)
                .map_err(|e| bad(e.into()))?
                .with_intra_threads(threads)
                .map_err(|e| bad(e.into()))?
                .with_inter_threads(1)
                .map_err(|e| bad(e.into()))?
                .commit_from_file(model)
                .map_err(bad)?;
            let input_names: Vec<String> = session
                .inputs()
                .iter()
                .map(|i| i.name().to_string())
                .collect();
            if !input_names.iter().any(|n| n == "input_ids") {
                return Err(anyhow!(
                    "embedding model {} has no input_ids input (inputs: {}); {MODEL_HINT}",
                    model.display(),
                    input_names.join(", ")
                ));
            }
            let name = nlu.embedding_model.trim();
            let model_id = format!("{name}:{}", file_fingerprint(model)?);
            let embedder = Self {
                session: Mutex::new(session),
                tokenizer,
                input_names,
                dims: 0,
                model_id,
                recent: Mutex::new(RecentVectors::default()),
            };
            // Probe once: learns the output width and proves the model runs.
            let probe = embedder.run(&[tokenize(&embedder.tokenizer, "hello")?])?;
            let dims = probe.first().map(Vec::len).unwrap_or(0);
            if dims == 0 {
                return Err(anyhow!(
                    "embedding model {} produced no output; {MODEL_HINT}",
                    model.display()
                ));
            }
            Ok(Self { dims, ..embedder })
        }

        /// One forward pass over already tokenized inputs, padded to the
        /// longest.
        fn run(&self, items: &[Tokens]) -> Result<Vec<Vec<f32>>> {
            if items.is_empty() {
                return Ok(Vec::new());
            }
            let batch = items.len();
            let seq = items.iter().map(|t| t.ids.len()).max().unwrap_or(0).max(1);
            let mut ids = vec![0i64; batch * seq];
            let mut mask = vec![0i64; batch * seq];
            let mut types = vec![0i64; batch * seq];
            for (b, t) in items.iter().enumerate() {
                let row = b * seq;
                ids[row..row + t.ids.len()].copy_from_slice(&t.ids);
                types[row..row + t.types.len()].copy_from_slice(&t.types);
                mask[row..row + t.ids.len()].iter_mut().for_each(|m| *m = 1);
            }
            let err = |e: ort::Error| anyhow!("embedding failed: {}", one_line(&e.to_string()));
            let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::new();
            for name in &self.input_names {
                let data = match name.as_str() {
                    "input_ids" => ids.clone(),
                    "attention_mask" => mask.clone(),
                    "token_type_ids" => types.clone(),
                    other => {
                        return Err(anyhow!("embedding model wants an unknown input {other:?}"))
                    }
                };
                let tensor = Tensor::from_array(([batch, seq], data)).map_err(err)?;
                inputs.push((Cow::Owned(name.clone()), tensor.into()));
            }
            let mut session = self
                .session
                .lock()
                .map_err(|_| anyhow!("the embedder is unusable after an earlier crash"))?;
            let outputs = session.run(inputs).map_err(err)?;
            let (shape, hidden) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
            let dims = match shape.as_ref() {
                [b, s, d] if *b as usize == batch && *s as usize == seq => *d as usize,
                other => {
                    return Err(anyhow!(
                        "embedding model returned shape {other:?}, expected [{batch}, {seq}, dims]"
                    ))
                }
            };
            Ok(mean_pool_normalise(hidden, &mask, batch, seq, dims))
        }
    }

    impl Embedder for OnnxEmbedder {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            if let [text] = texts {
                return Ok(vec![self.embed_one(text)?]);
            }
            let items = texts
                .iter()
                .map(|t| tokenize(&self.tokenizer, t))
                .collect::<Result<Vec<_>>>()?;
            self.run(&items)
        }

        fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
            if let Some(vector) = self.recent.lock().ok().and_then(|mut r| r.get(text)) {
                return Ok(vector);
            }
            let vector = self.embed_fresh(text)?;
            if let Ok(mut recent) = self.recent.lock() {
                recent.put(text, &vector);
            }
            Ok(vector)
        }

        fn embed_fresh(&self, text: &str) -> Result<Vec<f32>> {
            let tokens = tokenize(&self.tokenizer, text)?;
            self.run(std::slice::from_ref(&tokens))?
                .pop()
                .ok_or_else(|| anyhow!("the embedder returned no vector"))
        }

        fn dims(&self) -> usize {
            self.dims
        }

        fn model_id(&self) -> String {
            self.model_id.clone()
        }
    }
}

#[cfg(feature = "onnx")]
pub use onnx_impl::OnnxEmbedder;

/// The process-wide embedder for this config's model: loaded once (ONNX
/// Runtime and the session are the expensive part), shared by the router,
/// the intent tree and memory. A failure is remembered too, so a device
/// without the model does not retry on every turn.
pub fn load_embedder(nlu: &NluConfig, paths: &Paths) -> Result<Arc<dyn Embedder>> {
    /// Model path → the loaded embedder or why it could not be loaded.
    type Loaded = Vec<(PathBuf, Result<Arc<dyn Embedder>, String>)>;
    static CACHE: OnceLock<Mutex<Loaded>> = OnceLock::new();
    let (model, _) = model_paths(nlu, paths);
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut cache = cache
        .lock()
        .map_err(|_| anyhow!("the embedder cache is unusable after an earlier crash"))?;
    if let Some((_, result)) = cache.iter().find(|(p, _)| *p == model) {
        return result.clone().map_err(|e| anyhow!("{e}"));
    }
    let result = build(nlu, paths).map_err(|e| format!("{e:#}"));
    cache.push((model, result.clone()));
    result.map_err(|e| anyhow!("{e}"))
}

#[cfg(feature = "onnx")]
fn build(nlu: &NluConfig, paths: &Paths) -> Result<Arc<dyn Embedder>> {
    Ok(Arc::new(OnnxEmbedder::from_config(nlu, paths)?))
}

#[cfg(not(feature = "onnx"))]
fn build(_nlu: &NluConfig, paths: &Paths) -> Result<Arc<dyn Embedder>> {
    Err(anyhow!(
        "{}",
        crate::onnx::onnxruntime_status(paths)
            .err()
            .unwrap_or_else(|| "no ONNX Runtime in this build".into())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_ignores_masked_positions_and_normalises() {
        // batch 1, seq 3, dims 2; the third position is padding.
        let hidden = [1.0, 0.0, 3.0, 4.0, 100.0, 100.0];
        let mask = [1, 1, 0];
        let v = mean_pool_normalise(&hidden, &mask, 1, 3, 2);
        // mean = (2, 2) → normalised (0.7071, 0.7071)
        assert!((v[0][0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!((v[0][1] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    }

    #[test]
    fn recent_vectors_keep_the_last_texts_used() {
        let mut recent = RecentVectors::default();
        assert_eq!(recent.get("what time is it"), None);
        recent.put("what time is it", &[1.0, 0.0]);
        assert_eq!(recent.get("what time is it"), Some(vec![1.0, 0.0]));
        // Exact text only: another spelling is another input.
        assert_eq!(recent.get("What time is it?"), None);
        for i in 1..RECENT_TEXTS {
            recent.put(&format!("text {i}"), &[i as f32]);
        }
        // Used again, the first is kept when the next one comes in …
        assert!(recent.get("what time is it").is_some());
        recent.put("one more", &[9.0]);
        assert_eq!(recent.get("what time is it"), Some(vec![1.0, 0.0]));
        // … and the least recently used is forgotten.
        assert_eq!(recent.get("text 1"), None);
        assert_eq!(recent.get("text 2"), Some(vec![2.0]));
        // Put again, a text replaces its old vector, not a second entry.
        recent.put("one more", &[8.0]);
        assert_eq!(recent.get("one more"), Some(vec![8.0]));
        assert_eq!(recent.items.len(), RECENT_TEXTS);
    }

    #[test]
    fn all_masked_gives_zero_vector_not_nan() {
        let v = mean_pool_normalise(&[1.0, 2.0], &[0], 1, 1, 2);
        assert_eq!(v[0], vec![0.0, 0.0]);
    }

    #[test]
    fn missing_tokenizer_is_one_line_with_fix() {
        let err = load_tokenizer(Path::new("/nope/tok.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nope/tok.json") && err.contains("fetch-embedder.sh"),
            "{err}"
        );
    }

    #[test]
    fn corrupt_tokenizer_is_one_line_with_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let err = load_tokenizer(&path).unwrap_err().to_string();
        assert!(
            err.contains("tokenizer.json") && !err.contains('\n'),
            "{err}"
        );
    }
}
