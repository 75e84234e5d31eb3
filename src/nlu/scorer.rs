//! One place that turns an intent set into the configured classifier, so
//! the router and every classify node of the tree use the same scorer
//! (`nlu.scorer`) and therefore the same kind of confidence.
//!
//! Every scorer starts from the kNN's example matrix, which is cached on
//! disk under `state_dir/cache`: after the first start a set costs a file
//! read plus (for the trained scorers) a few milliseconds of training.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;

use super::examples::Examples;
use super::hybrid::{HybridClassifier, HybridHead, HybridOptions};
use super::knn::KnnClassifier;
use super::linear::{HeadClassifier, SoftmaxHead, TrainOptions};
use super::{Classifier, Embedder, Scorer};

/// The texts of `examples` in the order of the kNN's example rows
/// (intents sorted, utterances in file order).
pub fn example_texts(examples: &Examples) -> Vec<&str> {
    examples.values().flatten().map(String::as_str).collect()
}

/// Train the hybrid head on a built kNN's cached matrix (its weights
/// kept in `state_dir/cache` when there is one).
pub fn hybrid_head(
    knn: &KnnClassifier,
    examples: &Examples,
    state_dir: Option<&Path>,
) -> Result<HybridHead> {
    let (matrix, labels, dims) = knn.examples_matrix();
    HybridHead::train_cached(
        matrix,
        &example_texts(examples),
        labels,
        knn.intents().to_vec(),
        dims,
        HybridOptions::default(),
        state_dir,
    )
}

/// Build `scorer` over `examples`. `k` is the kNN's neighbours per intent.
pub fn build_classifier(
    scorer: Scorer,
    k: usize,
    embedder: Arc<dyn Embedder>,
    examples: &Examples,
    state_dir: Option<&Path>,
) -> Result<Arc<dyn Classifier>> {
    let knn = KnnClassifier::build(embedder.clone(), examples, state_dir)?.with_k(k);
    Ok(match scorer {
        Scorer::Knn => Arc::new(knn),
        Scorer::Softmax => {
            let (matrix, labels, dims) = knn.examples_matrix();
            let head = SoftmaxHead::train(
                matrix,
                labels,
                knn.intents().to_vec(),
                dims,
                TrainOptions::default(),
            )?;
            Arc::new(HeadClassifier::new(embedder, head))
        }
        Scorer::Hybrid => Arc::new(HybridClassifier::new(
            embedder,
            hybrid_head(&knn, examples, state_dir)?,
        )),
    })
}
