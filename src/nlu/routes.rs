//! The router's on-device classifier: the configured scorer over the
//! shipped simple / context / persona examples (`intents/routes.txt`, compiled into
//! the binary so a device needs no extra files).

use std::sync::Arc;

use anyhow::{Context, Result};

use super::examples::{parse_examples, Examples};
use super::knn::KnnClassifier;
use super::{Classifier, Embedder, NluConfig, RouterConfig};
use crate::paths::Paths;

/// The shipped route examples (≥ 40 per route, written for speech).
pub const ROUTE_EXAMPLES: &str = include_str!("intents/routes.txt");

/// The parsed route examples.
pub fn route_examples() -> Result<Examples> {
    parse_examples(ROUTE_EXAMPLES, "src/nlu/intents/routes.txt")
        .context("the built-in route examples are invalid")
}

/// Build the route classifier (labels `simple`, `context`, `persona`); the
/// example matrix is cached under `state_dir/cache`, so after the first run
/// this costs a file read, not 150 embeddings.
pub fn route_knn(
    nlu: &NluConfig,
    router: &RouterConfig,
    paths: &Paths,
    embedder: Arc<dyn Embedder>,
) -> Result<KnnClassifier> {
    Ok(
        KnnClassifier::build(embedder, &route_examples()?, Some(&paths.state_dir))?
            .with_k(nlu.k)
            .with_threshold(router.classifier_threshold),
    )
}

/// The router's classifier behind the `Classifier` seam: the configured
/// scorer (`nlu.scorer`, default `hybrid`) over the route examples, trained
/// on their cached embeddings (milliseconds for ~150 examples). The
/// router compares its confidence with `router.classifier_threshold`.
pub fn route_classifier(
    nlu: &NluConfig,
    _router: &RouterConfig,
    paths: &Paths,
    embedder: Arc<dyn Embedder>,
) -> Result<Arc<dyn Classifier>> {
    super::scorer::build_classifier(
        nlu.scorer,
        nlu.k,
        embedder,
        &route_examples()?,
        Some(&paths.state_dir),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_examples_parse_with_forty_per_route() {
        let ex = route_examples().unwrap();
        assert_eq!(
            ex.keys().collect::<Vec<_>>(),
            ["context", "persona", "simple"]
        );
        for (route, list) in &ex {
            assert!(list.len() >= 40, "{route}: {}", list.len());
        }
    }
}
