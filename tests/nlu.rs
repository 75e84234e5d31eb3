//! On-device understanding against the real int8 MiniLM model and ONNX
//! Runtime in `models/`: reference cosines, kNN arithmetic, the disk cache,
//! error texts, and `earshot route --json` through the real binary.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use earshot::config::Config;

use earshot::nlu::embedder::OnnxEmbedder;
use earshot::nlu::knn::{cache_path, knn_score, KnnClassifier};
use earshot::nlu::{load_embedder, Classifier, Embedder};

fn config() -> Config {
    Config {
        models_dir: common::models_dir(),
        ..Config::default()
    }
}

/// One embedder per test binary (loading ONNX Runtime + the model is the
/// slow part).
fn embedder() -> Arc<dyn Embedder> {
    static E: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    E.get_or_init(|| {
        load_embedder(&config().nlu, &config().paths()).expect("embedder loads from models/")
    })
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
    // ONNX Runtime's Python API on the same file (models/README.md): the
    // int8-in-memory model (scripts/convert-embedder.py) gives 0.7079 and
    // -0.0351; the original weight-only int8 file 0.7116 and -0.0353.
    assert!((c1 - 0.7079).abs() < 0.002, "light/lamp {c1}");
    assert!((c2 - -0.0351).abs() < 0.002, "light/paris {c2}");
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

/// Wraps the real embedder and counts how many texts it embedded.
struct Counting(Arc<dyn Embedder>, AtomicUsize);
impl Embedder for Counting {
    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        self.1.fetch_add(texts.len(), Ordering::SeqCst);
        self.0.embed(texts)
    }
    fn dims(&self) -> usize {
        self.0.dims()
    }
    fn model_id(&self) -> String {
        self.0.model_id()
    }
}

fn small_set() -> BTreeMap<String, Vec<String>> {
    let mut ex = BTreeMap::new();
    ex.insert(
        "lights".to_string(),
        vec![
            "turn on the light".to_string(),
            "switch the lamp on".to_string(),
            "lights on please".to_string(),
            "make it brighter in here".to_string(),
        ],
    );
    ex.insert(
        "weather".to_string(),
        vec![
            "what's the weather like".to_string(),
            "is it going to rain".to_string(),
        ],
    );
    ex
}

#[test]
fn knn_scores_are_exactly_point_nine_max_plus_point_one_mean() {
    let e = embedder();
    let ex = small_set();
    let knn = KnnClassifier::build(e.clone(), &ex, None).unwrap();
    let query = "could you turn the lamp on";
    let q = e.embed_one(query).unwrap();
    // By hand: cosines to every example, top 3 per intent.
    for (intent, utterances) in &ex {
        let mut sims: Vec<f32> = utterances
            .iter()
            .map(|u| cos(&q, &e.embed_one(u).unwrap()))
            .collect();
        sims.sort_by(|a, b| b.total_cmp(a));
        sims.truncate(3);
        let expected = 0.9 * sims[0] + 0.1 * sims.iter().sum::<f32>() / sims.len() as f32;
        let got = knn
            .scores_for(&q)
            .into_iter()
            .find(|(name, _)| name == intent)
            .unwrap()
            .1;
        assert!(
            (got - expected).abs() < 1e-4,
            "{intent}: {got} vs {expected}"
        );
        assert!((knn_score(&sims, 3).unwrap() - expected).abs() < 1e-6);
    }
    let (best, score) = knn.classify(query).unwrap();
    assert_eq!(best, "lights");
    assert!(score > 0.65, "{score}");
    assert_eq!(
        knn.classify_with_threshold(query, score + 0.01),
        None,
        "a node threshold above the score falls back"
    );
    assert_eq!(knn.classify("is it raining outside").unwrap().0, "weather");
}

#[test]
fn example_cache_is_reused_and_invalidated() {
    let dir = tempfile::tempdir().unwrap();
    let counting = Arc::new(Counting(embedder(), AtomicUsize::new(0)));
    let mut ex = small_set();
    let first = KnnClassifier::build(counting.clone(), &ex, Some(dir.path())).unwrap();
    assert_eq!(counting.1.load(Ordering::SeqCst), 6);
    let path = cache_path(dir.path(), &counting.model_id(), &ex);
    assert!(path.is_file());
    let q = embedder().embed_one("lights on").unwrap();
    let again = KnnClassifier::build(counting.clone(), &ex, Some(dir.path())).unwrap();
    assert_eq!(counting.1.load(Ordering::SeqCst), 6, "read from the cache");
    assert_eq!(first.scores_for(&q), again.scores_for(&q));
    // A changed example is a different key: everything is embedded again.
    ex.get_mut("weather").unwrap()[1] = "will it rain today".into();
    KnnClassifier::build(counting.clone(), &ex, Some(dir.path())).unwrap();
    assert_eq!(counting.1.load(Ordering::SeqCst), 12);
    assert_ne!(cache_path(dir.path(), &counting.model_id(), &ex), path);
    // A corrupt file is ignored and rebuilt.
    std::fs::write(&path, b"garbage").unwrap();
    let rebuilt = KnnClassifier::build(counting.clone(), &small_set(), Some(dir.path())).unwrap();
    assert_eq!(counting.1.load(Ordering::SeqCst), 18);
    assert_eq!(first.scores_for(&q), rebuilt.scores_for(&q));
}

#[test]
fn bad_model_and_tokenizer_paths_are_one_line_errors_with_the_fix() {
    let config = config();
    let (model, tokenizer) = earshot::nlu::embedder::model_paths(&config.nlu, &config.paths());
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.onnx");
    let err = OnnxEmbedder::load(&config.nlu, &config.paths(), &missing, &tokenizer)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("missing.onnx") && err.contains("scripts/fetch-embedder.sh"),
        "{err}"
    );
    let corrupt = dir.path().join("corrupt.onnx");
    std::fs::write(&corrupt, vec![7u8; 4096]).unwrap();
    let err = OnnxEmbedder::load(&config.nlu, &config.paths(), &corrupt, &tokenizer)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("corrupt.onnx") && !err.contains('\n'), "{err}");
    let bad_tok = dir.path().join("tokenizer.json");
    std::fs::write(&bad_tok, b"{\"version\": ").unwrap();
    let err = OnnxEmbedder::load(&config.nlu, &config.paths(), &model, &bad_tok)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("tokenizer.json") && err.contains("fetch-embedder.sh"),
        "{err}"
    );
}

fn route_json(
    state: &std::path::Path,
    text: &str,
    extra_env: &[(&str, &str)],
) -> (serde_json::Value, String) {
    let mut cmd = common::earshot(state);
    cmd.args(["route", text, "--json"]);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = common::run(&mut cmd);
    let stdout = common::stdout(&out);
    assert!(out.status.success(), "{stdout} {}", common::stderr(&out));
    (
        serde_json::from_str(stdout.trim()).unwrap(),
        common::stderr(&out),
    )
}

#[test]
fn earshot_route_json_decides_on_device() {
    let state = tempfile::tempdir().unwrap();
    for (text, route) in [
        ("what's the weather in Paris", "context"),
        ("please talk to me like a pirate", "persona"),
        ("hello, how are you doing", "simple"),
    ] {
        let (v, _) = route_json(state.path(), text, &[]);
        assert_eq!(v["by"], "classifier", "{text}: {v}");
        assert_eq!(v["route"], route, "{text}: {v}");
        let confidence = v["confidence"].as_f64().unwrap();
        assert!((0.65..=1.0).contains(&confidence), "{text}: {v}");
    }
    // The route examples' embeddings were cached on the first call (other
    // classifiers, e.g. the intent tree's, may add their own files).
    let routes = earshot::nlu::routes::route_examples().unwrap();
    let cache = cache_path(state.path(), &embedder().model_id(), &routes);
    assert!(cache.is_file(), "{} missing", cache.display());
}

/// ONNX Runtime 1.31 records telemetry (a device id, events for
/// Microsoft's collector) under `$HOME/.cache` unless told not to; earshot
/// loads it and leaves nothing there.
#[test]
fn onnx_runtime_keeps_no_telemetry_in_the_home_directory() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let home_dir = home.path().to_str().unwrap();
    let cache = home.path().join("cache");
    let (v, _) = route_json(
        state.path(),
        "hello, how are you doing",
        &[
            ("HOME", home_dir),
            ("XDG_CACHE_HOME", cache.to_str().unwrap()),
        ],
    );
    assert_eq!(v["by"], "classifier", "ONNX Runtime ran: {v}");
    let mut left = Vec::new();
    let mut dirs = vec![home.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            left.push(path.display().to_string());
            if path.is_dir() {
                dirs.push(path);
            }
        }
    }
    assert!(
        !left.iter().any(|p| p.contains("onnxruntime")),
        "telemetry files: {left:?}"
    );
}

#[test]
fn without_onnx_runtime_the_router_falls_back_and_says_why() {
    let state = tempfile::tempdir().unwrap();
    let (v, stderr) = route_json(
        state.path(),
        "what's the weather in Paris",
        &[
            ("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so"),
            ("EARSHOT_LOG", "warn"),
        ],
    );
    assert_ne!(v["by"], "classifier", "{v}");
    assert!(stderr.contains("fetch-onnxruntime.sh"), "{stderr}");
}

#[test]
fn eval_intents_reports_the_contract_fields() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.json");
    let test = dir.path().join("test.json");
    let oos = dir.path().join("oos.json");
    std::fs::write(
        &train,
        r#"[["turn on the light","lights"],["switch the lamp on","lights"],["lights on please","lights"],
            ["what's the weather like","weather"],["is it going to rain","weather"],["how hot is it outside","weather"]]"#,
    )
    .unwrap();
    std::fs::write(
        &test,
        r#"[["put the lights on","lights"],["will it rain tomorrow","weather"]]"#,
    )
    .unwrap();
    std::fs::write(&oos, r#"[["who wrote hamlet","oos"]]"#).unwrap();
    for scorer in ["knn", "softmax"] {
        let mut cmd = common::earshot(dir.path());
        cmd.args(["eval", "intents", "--train"])
            .arg(&train)
            .arg("--test")
            .arg(&test)
            .arg("--oos")
            .arg(&oos)
            .args(["--scorer", scorer, "--json"]);
        let out = common::run(&mut cmd);
        assert!(out.status.success(), "{}", common::stderr(&out));
        let v: serde_json::Value = serde_json::from_str(common::stdout(&out).trim()).unwrap();
        assert_eq!(v["scorer"], scorer);
        assert_eq!(v["accuracy"], 1.0, "{v}");
        let t = v["thresholds"].as_array().unwrap();
        assert!(t.len() > 5);
        for row in t {
            assert!(row["threshold"].is_number() && row["accepted_correct"].is_number());
            assert!(row["oos_recall"].is_number());
        }
        assert!(v["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
        assert!(
            v["latency_ms"]["p95"].as_f64().unwrap() >= v["latency_ms"]["p50"].as_f64().unwrap()
        );
    }
    std::fs::write(&test, r#"[["no label"]]"#).unwrap();
    let mut cmd = common::earshot(dir.path());
    cmd.args(["eval", "intents", "--train"])
        .arg(&train)
        .arg("--test")
        .arg(&test);
    let out = common::run(&mut cmd);
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("test.json: item 0"),
        "{}",
        common::stderr(&out)
    );
}

#[test]
fn route_classifier_scorers_hybrid_knn_and_softmax() {
    let state = tempfile::tempdir().unwrap();
    let mut config = config();
    config.state_dir = state.path().to_path_buf();
    for scorer in ["hybrid", "knn", "softmax"] {
        config.nlu.scorer = scorer.parse().unwrap();
        let c = earshot::nlu::routes::route_classifier(
            &config.nlu,
            &config.router,
            &config.paths(),
            embedder(),
        )
        .unwrap();
        let (label, score) = c.classify("is it going to snow in oslo tomorrow").unwrap();
        assert_eq!(label, "context", "{scorer}: {score}");
        let (label, _) = c.classify("pretend you are a cowboy").unwrap();
        assert_eq!(label, "persona", "{scorer}");
    }
    // An unknown scorer is refused when the config is read (name table),
    // naming the key and the line.
    let file = state.path().join("earshot.toml");
    std::fs::write(&file, "[nlu]\nroute_scorer = \"magic\"\n").unwrap();
    let err = earshot::config::load_with_env(Some(&file), &Default::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(
        err.contains("route_scorer") && err.contains("magic"),
        "{err}"
    );
    // Old files' `route_scorer` still chooses the one scorer; the default
    // is hybrid.
    std::fs::write(&file, "[nlu]\nroute_scorer = \"softmax\"\n").unwrap();
    let old = earshot::config::load_with_env(Some(&file), &Default::default()).unwrap();
    assert_eq!(old.config.nlu.scorer, earshot::nlu::Scorer::Softmax);
    std::fs::write(&file, "[nlu]\nscorer = \"knn\"\n").unwrap();
    let new = earshot::config::load_with_env(Some(&file), &Default::default()).unwrap();
    assert_eq!(new.config.nlu.scorer, earshot::nlu::Scorer::Knn);
    assert_eq!(
        earshot::nlu::NluConfig::default().scorer,
        earshot::nlu::Scorer::Hybrid
    );
}
