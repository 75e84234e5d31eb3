//! On-device understanding benchmarks (real int8 MiniLM + ONNX Runtime from
//! `models/`).
//!
//! `cargo bench --bench nlu` runs criterion groups: single-utterance
//! unpadded embed, embed + route classification, and the router's decision
//! by classifier vs by an LLM round trip (against a loopback server that
//! answers at once — a lower bound for a real LLM).
//!
//! `cargo bench --bench nlu -- --p50 [--iters N]` prints one JSON line of
//! p50 figures over the shared utterance list instead; scripts/bench-nlu.py
//! runs it next to Python onnxruntime on the same model and inputs.

#[path = "../tests/common/http.rs"]
mod http;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use criterion::{black_box, Criterion};
use earshot::cancel::CancelToken;
use earshot::config::{Config, LlmConfig};
use earshot::llm::openai::OpenAiClient;
use earshot::llm::ChatModel;
use earshot::nlu::router::Router;
use earshot::nlu::{load_embedder, routes, Classifier, Embedder};

/// The utterances both sides time (also in scripts/bench-nlu.py).
const UTTERANCES: &[&str] = &[
    "what's the weather in paris",
    "turn on the light",
    "set a timer for ten minutes",
    "what's twelve times seven",
    "add oat milk to my shopping list",
    "talk like a pirate",
    "why is the sky blue",
    "what time is it",
    "remind me to call mum tomorrow at six in the evening",
    "could you please tell me a short story about a dragon who loves to bake bread",
];

// More utterances than the embedder remembers, so classifying them in
// turn times the model, not its recent vectors.
const _: () = assert!(UTTERANCES.len() > earshot::nlu::embedder::RECENT_TEXTS);

struct Parts {
    embedder: Arc<dyn Embedder>,
    classifier: Arc<dyn Classifier>,
    router_classifier: Router,
    router_llm: Router,
    _server: http::TestServer,
    _state: tempfile::TempDir,
}

fn parts() -> Parts {
    let state = tempfile::tempdir().expect("temp dir");
    let mut config = Config {
        models_dir: std::env::var_os("EARSHOT_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models")),
        state_dir: state.path().to_path_buf(),
        ..Config::default()
    };
    if let Some(t) = std::env::var("NLU_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        config.nlu.threads = t;
    }
    let embedder = load_embedder(&config.nlu, &config.paths())
        .expect("embedder (run scripts/fetch-embedder.sh)");
    let classifier = routes::route_classifier(
        &config.nlu,
        &config.router,
        &config.paths(),
        embedder.clone(),
    )
    .expect("route classifier");
    let server = http::TestServer::start(|_| {
        http::Reply::json(200, &http::openai_completion("bench", "context"))
    });
    let llm_config = LlmConfig {
        base_url: server.url(),
        api_key: "bench".into(),
        model: "bench".into(),
        ..LlmConfig::default()
    };
    let llm: Arc<dyn ChatModel> = Arc::new(OpenAiClient::new(&llm_config));
    let router_classifier = Router::new(&[], Some(classifier.clone()), 0.0, None);
    let router_llm = Router::new(&[], None, 0.65, Some((llm, "bench".into())));
    Parts {
        embedder,
        classifier,
        router_classifier,
        router_llm,
        _server: server,
        _state: state,
    }
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Time `f` over every utterance, `iters` rounds (after one warm-up round).
fn timed(iters: usize, mut f: impl FnMut(&str)) -> f64 {
    UTTERANCES.iter().for_each(|u| f(u));
    let mut times = Vec::with_capacity(iters * UTTERANCES.len());
    for _ in 0..iters {
        for u in UTTERANCES {
            let t = Instant::now();
            f(u);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    p50(times)
}

fn print_p50(iters: usize) {
    let p = parts();
    let cancel = CancelToken::new();
    let embed = timed(iters, |u| {
        black_box(p.embedder.embed_fresh(u).expect("embed"));
    });
    let embed_classify = timed(iters, |u| {
        black_box(p.classifier.classify(u));
    });
    let router_classifier = timed(iters, |u| {
        black_box(p.router_classifier.decide(u, &cancel));
    });
    let router_llm = timed(iters.min(50), |u| {
        black_box(p.router_llm.decide(u, &cancel));
    });
    println!(
        "{}",
        serde_json::json!({
            "utterances": UTTERANCES.len(),
            "iters": iters,
            "embed_ms_p50": embed,
            "embed_classify_ms_p50": embed_classify,
            "router_classifier_ms_p50": router_classifier,
            "router_llm_loopback_ms_p50": router_llm,
        })
    );
}

fn criterion_benches(c: &mut Criterion) {
    let p = parts();
    let cancel = CancelToken::new();
    let mut g = c.benchmark_group("nlu");
    g.bench_function("embed_one_unpadded", |b| {
        b.iter(|| {
            for u in UTTERANCES {
                black_box(p.embedder.embed_fresh(u).expect("embed"));
            }
        })
    });
    g.bench_function("embed_and_route_classify", |b| {
        b.iter(|| {
            for u in UTTERANCES {
                black_box(p.classifier.classify(u));
            }
        })
    });
    g.bench_function("router_decide_by_classifier", |b| {
        b.iter(|| {
            for u in UTTERANCES {
                black_box(p.router_classifier.decide(u, &cancel));
            }
        })
    });
    g.bench_function("router_decide_by_llm_loopback", |b| {
        b.iter(|| {
            for u in UTTERANCES {
                black_box(p.router_llm.decide(u, &cancel));
            }
        })
    });
    g.finish();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--p50") {
        let iters = args
            .iter()
            .position(|a| a == "--iters")
            .and_then(|i| args.get(i + 1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(100);
        print_p50(iters);
        return;
    }
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
}
