//! Memory benchmarks (issue 5), figures in notes/memory.md:
//! 1. usearch top-10 recall against exact search at 100k vectors, and the
//!    time of both — random 384-d unit vectors (a hard case for HNSW; real
//!    MiniLM embeddings cluster and are easier);
//! 2. full recall latency (one real MiniLM embed + one index search + one
//!    SQL query with bm25) with 10k and 100k stored memories. The stored
//!    memories have synthetic texts and random unit vectors (embedding
//!    100k texts would take ~10 min); the queries are embedded for real.
//!
//! Run: `cargo bench --bench memory` (needs models/; `-- --quick` uses
//! 20k instead of 100k).

use std::sync::Arc;
use std::time::Instant;

use earshot::config::Config;
use earshot::memory::{Memory, MemoryConfig};
use earshot::nlu::Embedder;
use earshot::store::{vector, Store};

const DIMS: usize = 384;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Approximately Gaussian (sum of uniforms), for uniform directions.
    fn gauss(&mut self) -> f32 {
        (0..4)
            .map(|_| (self.next() % 1_000_000) as f32 / 1e6)
            .sum::<f32>()
            - 2.0
    }
    fn unit(&mut self) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIMS).map(|_| self.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Build an index over `n` vectors and compare HNSW top-10 with exact
/// search for several `expansion_search` values. `clustered`: the vectors
/// come from 2000 topics (cosine ≈ 0.7 to their topic, like sentence
/// embeddings of related facts) and each query is a stored vector with
/// noise (cosine ≈ 0.9), i.e. "ask about something that was stored";
/// otherwise vectors and queries are uniform on the sphere (worst case:
/// in 384 dimensions every point is almost equally far from every other).
fn index_recall(n: usize, queries: usize, clustered: bool) {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let centers: Vec<Vec<f32>> = (0..2000).map(|_| rng.unit()).collect();
    let mix = |a: &[f32], b: &[f32], w: f32| -> Vec<f32> {
        let mut v: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + w * y).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    };
    let data: Vec<Vec<f32>> = (0..n)
        .map(|_| {
            if clustered {
                let c = &centers[(rng.next() % centers.len() as u64) as usize];
                mix(c, &rng.unit(), 1.0)
            } else {
                rng.unit()
            }
        })
        .collect();
    let index = vector::new_index(DIMS).expect("index");
    index.reserve(n).expect("reserve");
    let t = Instant::now();
    for (i, v) in data.iter().enumerate() {
        index.add(i as u64, v).expect("add");
    }
    let build = t.elapsed().as_secs_f64();
    let qs: Vec<Vec<f32>> = (0..queries)
        .map(|_| {
            if clustered {
                let d = &data[(rng.next() % n as u64) as usize];
                mix(d, &rng.unit(), 0.5)
            } else {
                rng.unit()
            }
        })
        .collect();
    // Ground truth: a plain Rust brute force, checked against usearch's exact search.
    let (mut exact_ms, mut brute_ms) = (Vec::new(), Vec::new());
    let mut truths = Vec::new();
    for q in &qs {
        let t = Instant::now();
        let e = index.exact_search(q, 10).expect("exact");
        exact_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let mut scored: Vec<(f32, usize)> = data
            .iter()
            .enumerate()
            .map(|(i, v)| (v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), i))
            .collect();
        scored.select_nth_unstable_by(9, |x, y| y.0.total_cmp(&x.0));
        brute_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let truth: Vec<u64> = scored[..10].iter().map(|s| s.1 as u64).collect();
        let agree = e.keys.iter().filter(|k| truth.contains(k)).count();
        assert!(
            agree >= 9,
            "usearch exact search disagrees with brute force"
        );
        truths.push(truth);
    }
    exact_ms.sort_by(f64::total_cmp);
    brute_ms.sort_by(f64::total_cmp);
    println!(
        "index n={n} {}: build {build:.1} s ({:.0} adds/s); exact top-10: usearch exact_search p50 {:.2} ms, Rust brute force p50 {:.2} ms",
        if clustered { "clustered" } else { "uniform" },
        n as f64 / build,
        pct(&exact_ms, 0.5),
        pct(&brute_ms, 0.5)
    );
    for ef in [64, 128, 256, 512] {
        index.change_expansion_search(ef);
        let mut ms = Vec::new();
        let mut hits = 0usize;
        for (q, truth) in qs.iter().zip(&truths) {
            let t = Instant::now();
            let a = index.search(q, 10).expect("search");
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            hits += a.keys.iter().filter(|k| truth.contains(k)).count();
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "  expansion_search {ef:>3}: recall@10 {:.4}, HNSW search p50 {:.3} ms p95 {:.3} ms ({queries} queries)",
            hits as f64 / (queries * 10) as f64,
            pct(&ms, 0.5),
            pct(&ms, 0.95)
        );
    }
}

const WORDS: &[&str] = &[
    "meeting",
    "dentist",
    "doctor",
    "allergic",
    "peanuts",
    "coffee",
    "jazz",
    "sister",
    "brother",
    "monday",
    "friday",
    "gym",
    "flight",
    "lisbon",
    "tea",
    "oat",
    "milk",
    "birthday",
    "garden",
    "running",
    "piano",
    "vegetarian",
    "office",
    "school",
    "dog",
    "cat",
    "book",
    "movie",
    "train",
];

fn recall_latency(embedder: Arc<dyn Embedder>, n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open_in(dir.path()).expect("store");
    let model = embedder.model_id();
    let mut rng = Rng(n as u64 * 7919 + 1);
    let t = Instant::now();
    for chunk in 0..n.div_ceil(5000) {
        store
            .with_tx(|tx| {
                for i in chunk * 5000..((chunk + 1) * 5000).min(n) {
                    let text = format!(
                        "memory {i}: {} {} {} {}",
                        WORDS[(rng.next() % WORDS.len() as u64) as usize],
                        WORDS[(rng.next() % WORDS.len() as u64) as usize],
                        WORDS[(rng.next() % WORDS.len() as u64) as usize],
                        WORDS[(rng.next() % WORDS.len() as u64) as usize]
                    );
                    tx.execute(
                        "INSERT INTO memories (user_id, text, created_at, updated_at) VALUES ('user-1', ?1, '2026-11-30T00:00:00.000Z', '2026-11-30T00:00:00.000Z')",
                        [&text],
                    )?;
                    let id = tx.last_insert_rowid();
                    vector::put_in(tx, "memories", "user-1", id, &model, &rng.unit())?;
                }
                Ok(())
            })
            .expect("insert");
    }
    let insert = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let memory =
        Memory::open(store, Some(embedder.clone()), MemoryConfig::default()).expect("open");
    let rebuild = t.elapsed().as_secs_f64();
    let t = Instant::now();
    drop(memory);
    let store = Store::open_in(dir.path()).expect("store");
    let memory =
        Memory::open(store, Some(embedder.clone()), MemoryConfig::default()).expect("open");
    let reopen = t.elapsed().as_secs_f64();
    let queries = [
        "when is my dentist appointment",
        "am I allergic to anything",
        "what does my sister like",
        "do I have a meeting on friday",
        "what kind of coffee do I drink",
    ];
    let (mut total, mut embed) = (Vec::new(), Vec::new());
    for round in 0..40 {
        for q in queries {
            let q = format!("{q} {round}");
            let t = Instant::now();
            let _ = earshot::memory::Recall::recall_block(&memory, "user-1", &q).expect("recall");
            total.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            // The model's time: recall just embedded `q`, and a repeated
            // text would come from the embedder's recent vectors.
            let _ = embedder.embed_fresh(&q).expect("embed");
            embed.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    total.sort_by(f64::total_cmp);
    embed.sort_by(f64::total_cmp);
    println!(
        "recall n={n}: p50 {:.2} ms p95 {:.2} ms (of which MiniLM embed p50 {:.2} ms) over {} requests; insert {insert:.1} s, first open (index rebuilt from SQLite) {rebuild:.1} s, reopen from file {reopen:.2} s",
        pct(&total, 0.5),
        pct(&total, 0.95),
        pct(&embed, 0.5),
        total.len()
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let big = if quick { 20_000 } else { 100_000 };
    let config = Config {
        models_dir: std::env::var_os("EARSHOT_MODELS_DIR")
            .map(Into::into)
            .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models")),
        ..Default::default()
    };
    let uniform = std::env::args().any(|a| a == "--uniform");
    index_recall(big, 300, !uniform);
    if std::env::args().any(|a| a == "--index-only") {
        return;
    }
    let embedder =
        earshot::nlu::load_embedder(&config.nlu, &config.paths()).expect("MiniLM model in models/");
    recall_latency(embedder.clone(), 10_000);
    recall_latency(embedder, big);
}
