//! On-device understanding against the real int8 MiniLM model and ONNX
//! Runtime in `models/`: reference cosines, kNN arithmetic, the disk cache,
//! error texts, and `earshot route --json` through the real binary.

mod common;

use std::sync::{Arc, OnceLock};

use earshot::config::Config;

use earshot::nlu::{load_embedder, Embedder};

fn config() -> Config {
    let mut config = Config::default();
    config.models_dir = common::models_dir();
    config
}

/// One embedder per test binary (loading ONNX Runtime + the model is the
/// slow part).
fn embedder() -> Arc<dyn Embedder> {
    static E: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    E.get_or_init(|| load_embedder(&config()).expect("embedder loads from models/"))
        .clone()
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn cosines_match_the_python_reference() {
    let e = embedder();
    assert_eq!(e.dims(), 384);
    let light = e.embed_one("turn on the light").unwrap();
    let lamp = e.embed_one("switch the lamp on").unwrap();
    let paris = e.embed_one("what is the capital of France").unwrap();
    let c1 = cos(&light, &lamp);
    let c2 = cos(&light, &paris);
    assert!((c1 - 0.7116).abs() < 0.002, "light/lamp {c1}");
    assert!((c2 - -0.0353).abs() < 0.002, "light/paris {c2}");
    let norm = cos(&light, &light).sqrt();
    assert!((norm - 1.0).abs() < 1e-5);
}

#[test]
fn batch_equals_single_despite_padding() {
    let e = embedder();
    let texts = [
        "hi",
        "turn on the light in the kitchen please",
        "what is the capital of France",
    ];
    let batch = e.embed(&texts).unwrap();
    for (t, v) in texts.iter().zip(&batch) {
        let one = e.embed_one(t).unwrap();
        assert!(cos(&one, v) > 0.9999, "{t}: {}", cos(&one, v));
    }
}

#[test]
fn odd_inputs_do_not_panic() {
    let e = embedder();
    let empty = e.embed_one("").unwrap();
    assert_eq!(empty.len(), 384);
    let huge = "turn on the light ".repeat(600); // ~10.8k chars
    assert_eq!(e.embed_one(&huge).unwrap().len(), 384);
    let lossy = String::from_utf8_lossy(&[0xff, 0xfe, b'h', b'i', 0x80, 0]).into_owned();
    assert_eq!(e.embed_one(&lossy).unwrap().len(), 384);
    assert_eq!(e.embed(&[]).unwrap().len(), 0);
}
