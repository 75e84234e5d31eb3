//! The knowledge base and the quality loop (issue 8) through the real
//! `earshot` binary: ingest a folder of mixed documents (and bad ones),
//! retrieval with citations, exact-match lookups, an ONNX cross-encoder
//! this test builds, an agent turn calling `search_knowledge` against a
//! loopback LLM, the turn log's R-OBS fields, feedback, review, export and
//! retrieval metrics.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use common::http::{Reply, Request, TestServer};
use common::{data, earshot, run, stderr, stdout};
use serde_json::{json, Value};

// ---------------------------------------------------------------- helpers

fn corpus() -> PathBuf {
    data("knowledge/corpus")
}

/// Run the binary in `dir` with `args`; (exit code, stdout, stderr).
fn es(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = earshot(dir);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// One state dir with the test corpus ingested, shared by the read-only
/// tests (ingesting embeds every chunk: done once per test binary).
fn shared_state() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (code, out, err) = es(
            dir.path(),
            &["ingest", corpus().to_str().unwrap(), "--json"],
            &[],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        dir
    })
    .path()
}

fn search(dir: &Path, query: &str, env: &[(&str, &str)]) -> Value {
    let (code, out, err) = es(dir, &["knowledge", "search", query, "--json"], env);
    assert_eq!(code, 0, "{err}");
    json_of(&out)
}

fn step_names(r: &Value) -> Vec<String> {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

fn open_store(dir: &Path) -> earshot::store::Store {
    earshot::store::Store::open_in(dir).unwrap()
}

fn chunk_text(dir: &Path, id: i64) -> String {
    open_store(dir)
        .with_conn(|c| {
            c.query_row(
                "SELECT text FROM knowledge_chunks WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
        })
        .unwrap()
}

/// One file's line of an `ingest --json` report, by the end of its path.
fn file_report<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no {name} in {report:#}"))
}

fn count(dir: &Path, sql: &str) -> i64 {
    open_store(dir)
        .with_conn(|c| c.query_row(sql, [], |r| r.get(0)))
        .unwrap()
}

// ------------------------------------------------------------------ ingest

#[test]
fn ingest_mixed_folder_plan_then_apply_bad_files_reported_rest_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    // The corpus, copied so a file can change.
    for entry in walk(&corpus()) {
        let rel = entry.strip_prefix(corpus()).unwrap();
        let to = docs.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    // The bad ones.
    let bad = docs.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(data("knowledge/bad/notext.pdf"), bad.join("notext.pdf")).unwrap();
    std::fs::copy(
        data("knowledge/bad/encrypted.pdf"),
        bad.join("encrypted.pdf"),
    )
    .unwrap();
    let good_pdf = std::fs::read(corpus().join("houseplants.pdf")).unwrap();
    std::fs::write(bad.join("truncated.pdf"), &good_pdf[..good_pdf.len() / 2]).unwrap();
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(bad.join("junk.md"), junk).unwrap();
    // 200 MB, sparse: costs no disk and must cost no memory either.
    std::fs::File::create(bad.join("huge.txt"))
        .unwrap()
        .set_len(200 * 1024 * 1024)
        .unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (docs_s, empty_s) = (docs.to_str().unwrap(), empty.to_str().unwrap());

    // --plan: analysis only, nothing indexed.
    let (code, out, err) = es(
        dir.path(),
        &["ingest", docs_s, empty_s, "--plan", "--json"],
        &[],
    );
    assert_eq!(code, 1, "failures make the exit code 1: {out}\n{err}");
    let report = json_of(&out);
    let plan_path = PathBuf::from(report["plan"].as_str().unwrap());
    assert_eq!(
        count(dir.path(), "SELECT COUNT(*) FROM knowledge_chunks"),
        0
    );
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(*) FROM vectors WHERE collection = 'knowledge'"
        ),
        0
    );
    assert!(err.contains("ingest [1/"), "progress on stderr: {err}");
    let mut plan: Value = json_of(&std::fs::read_to_string(&plan_path).unwrap());
    assert_eq!(plan["documents"].as_array().unwrap().len(), 6, "{plan:#}");
    assert_eq!(plan["problems"].as_array().unwrap().len(), 6, "{plan:#}");
    // A reviewer moves the sourdough notes to tier 2 and tags them.
    for d in plan["documents"].as_array_mut().unwrap() {
        let path = d["path"].as_str().unwrap().to_string();
        if path.ends_with("sourdough.txt") {
            assert_eq!(d["tier"], 3, "no rule says otherwise: {d}");
            d["tier"] = json!(2);
            d["tags"] = json!(["baking"]);
        }
        if path.ends_with("bike_maintenance.md") {
            assert_eq!(d["tier"], 1, "front matter: {d}");
            assert_eq!(d["tags"], json!(["bike", "repair"]));
            assert_eq!(d["strategy"], "section");
        }
        if path.ends_with("tier1_espresso_machine.md") {
            assert_eq!(d["tier"], 1, "file-name rule: {d}");
        }
    }
    std::fs::write(&plan_path, serde_json::to_string_pretty(&plan).unwrap()).unwrap();

    // --apply: every good file indexed, every bad one reported on its own.
    let (code, out, _) = es(
        dir.path(),
        &["ingest", docs_s, empty_s, "--apply", "--json"],
        &[],
    );
    assert_eq!(code, 1);
    let report = json_of(&out);
    let status = |name: &str| -> (String, String) {
        let f = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("{name} not reported: {report:#}"));
        (
            f["status"].as_str().unwrap().to_string(),
            f["error"].as_str().unwrap_or("").to_string(),
        )
    };
    for good in [
        "sourdough.txt",
        "houseplants.pdf",
        "tomatoes.md",
        "bike_maintenance.md",
    ] {
        assert_eq!(status(good).0, "indexed", "{good}: {report:#}");
    }
    let expect_error = [
        ("notext.pdf", "no text layer"),
        ("encrypted.pdf", "encrypted"),
        ("truncated.pdf", "damaged or truncated"),
        ("junk.md", "not a text file"),
        ("huge.txt", "too large (200 MB"),
        ("empty", "no txt, md or pdf files"),
    ];
    for (name, words) in expect_error {
        let (s, e) = status(name);
        assert_eq!(s, "failed", "{name}");
        assert!(e.contains(words), "{name}: {e}");
        assert!(!e.contains('\n'));
    }
    assert_eq!(
        count(dir.path(), "SELECT COUNT(*) FROM knowledge_documents"),
        6
    );
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(*) FROM knowledge_documents WHERE path LIKE '%/bad/%'"
        ),
        0,
        "nothing of a failed file is stored"
    );
    let store = open_store(dir.path());
    let sourdough: (i64, String, String) = store
        .with_conn(|c| {
            c.query_row(
                "SELECT tier, tags_json, analysed_by FROM knowledge_documents WHERE path LIKE '%sourdough.txt'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })
        .unwrap();
    assert_eq!((sourdough.0, sourdough.1.as_str()), (2, "[\"baking\"]"));
    assert!(sourdough.2.starts_with("plan"), "{}", sourdough.2);
    let chunks = count(dir.path(), "SELECT COUNT(*) FROM knowledge_chunks");
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(*) FROM vectors WHERE collection = 'knowledge' AND embedding IS NOT NULL"
        ),
        chunks,
        "one stored embedding per chunk"
    );
    assert!(dir.path().join("index/knowledge.usearch").is_file());

    // Unchanged files are skipped; a changed one has its chunks replaced.
    let tomatoes = docs.join("garden/tomatoes.md");
    let old_ids: Vec<i64> = store
        .with_conn(|c| {
            let mut s = c.prepare("SELECT c.id FROM knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id WHERE d.path LIKE '%tomatoes.md'")?;
            let rows = s.query_map([], |r| r.get(0))?;
            rows.collect()
        })
        .unwrap();
    let mut text = std::fs::read_to_string(&tomatoes).unwrap();
    text.push_str("\n## Harvesting\n\nPick tomatoes when they are fully coloured and slightly soft; a cherry tomato plant gives fruit for ten weeks.\n");
    std::fs::write(&tomatoes, text).unwrap();
    let (_, out, _) = es(dir.path(), &["ingest", docs_s, "--json"], &[]);
    let report = json_of(&out);
    let statuses: Vec<(String, String)> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] != "failed")
        .map(|f| {
            (
                f["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                f["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, s) in &statuses {
        let expected = if name == "tomatoes.md" {
            "replaced"
        } else {
            "unchanged"
        };
        assert_eq!(s, expected, "{name}: {statuses:?}");
    }
    let placeholders = old_ids
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        count(
            dir.path(),
            &format!("SELECT COUNT(*) FROM knowledge_chunks WHERE id IN ({placeholders})")
        ),
        0
    );
    assert_eq!(
        count(dir.path(), &format!("SELECT COUNT(*) FROM vectors WHERE collection = 'knowledge' AND item_id IN ({placeholders}) AND embedding IS NOT NULL")),
        0,
        "old vectors are tombstoned"
    );
    let r = search(
        dir.path(),
        "how long does a cherry tomato plant give fruit",
        &[],
    );
    let first = &r["passages"][0];
    assert!(
        first["path"].as_str().unwrap().ends_with("tomatoes.md"),
        "{r:#}"
    );
    assert!(
        first["text"].as_str().unwrap().contains("ten weeks"),
        "{first}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

// --------------------------------------------------------------- retrieval

#[test]
fn a_question_cites_the_chunk_that_holds_the_answer_with_every_step_traced() {
    let dir = shared_state();
    let r = search(dir, "How often should I descale the espresso machine?", &[]);
    assert_eq!(
        step_names(&r),
        [
            "rewrite",
            "exact_detect",
            "filters",
            "vector_search",
            "keyword_search",
            "rerank",
            "short_chunks",
            "paragraphs",
            "drop_below",
            "boost_tier1",
            "cap_per_source",
            "take_top",
            "merge_adjacent",
            "context"
        ]
    );
    assert_eq!(r["reranker"], "fusion");
    // The first candidates were ordered by their best paragraph, from the
    // vectors ingest stored: nothing was embedded at question time.
    let paragraphs = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "paragraphs")
        .unwrap();
    assert_eq!(paragraphs["out"], 0, "{paragraphs}");
    let stored = count(dir, "SELECT COUNT(*) FROM knowledge_paragraph_vectors");
    assert!(stored > 0, "ingest stores paragraph vectors");
    let vector_out = r["steps"][3]["out"].as_u64().unwrap();
    assert!(vector_out <= 30 && vector_out > 0);
    let passages = r["passages"].as_array().unwrap();
    assert!(!passages.is_empty() && passages.len() <= 7);
    // The answer's chunk is cited, and its citation number is in the text.
    let citations = r["context"]["citations"].as_array().unwrap();
    let holder = citations
        .iter()
        .find(|c| {
            c["chunk_ids"]
                .as_array()
                .unwrap()
                .iter()
                .any(|id| chunk_text(dir, id.as_i64().unwrap()).contains("every 200 cups"))
        })
        .unwrap_or_else(|| panic!("no citation holds the answer: {r:#}"));
    assert!(holder["path"]
        .as_str()
        .unwrap()
        .ends_with("manuals/tier1_espresso_machine.md"));
    assert_eq!(holder["tier"], 1);
    let n = holder["n"].as_u64().unwrap();
    let context = r["context"]["text"].as_str().unwrap();
    assert!(
        context.contains(&format!("[{n}] Barista One Espresso Machine Manual")),
        "{context}"
    );
    assert!(context.contains("every 200 cups"));
    assert!(context.contains("cite each fact with its number"));
    // Tier 1 is listed before tier 2; each kept chunk scored ≥ 0.3; ≤ 3 per source (max_per_source).
    if let (Some(t1), Some(t2)) = (context.find("Tier 1"), context.find("Tier 2")) {
        assert!(t1 < t2);
    }
    let mut per_source = std::collections::HashMap::new();
    for p in passages {
        assert!(p["rerank"].as_f64().unwrap() >= 0.3, "{p}");
        *per_source
            .entry(p["document_id"].as_i64().unwrap())
            .or_insert(0) += p["chunk_ids"].as_array().unwrap().len();
    }
    assert!(per_source.values().all(|&n| n <= 3), "{per_source:?}");
    // Every dropped candidate really was under the cut.
    let kept: Vec<i64> = passages
        .iter()
        .flat_map(|p| {
            p["chunk_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_i64().unwrap())
        })
        .collect();
    for c in r["candidates"].as_array().unwrap() {
        if !kept.contains(&c["chunk_id"].as_i64().unwrap()) && c["rerank"].as_f64().unwrap() >= 0.3
        {
            // Kept out by the per-source cap or the top-7 cut, not the score.
            let doc = c["document_id"].as_i64().unwrap();
            assert!(
                per_source.get(&doc).copied().unwrap_or(0) == 2 || kept.len() == 7,
                "{c}"
            );
        }
    }
}

#[test]
fn exact_references_go_straight_to_their_chunks() {
    let dir = shared_state();
    let r = search(dir, "section 4.2", &[]);
    assert_eq!(r["exact"], json!({"kind": "section", "value": "4.2"}));
    let names = step_names(&r);
    assert!(
        names.contains(&"exact_lookup".to_string())
            && !names.contains(&"vector_search".to_string()),
        "{names:?}"
    );
    let p = &r["passages"][0];
    assert!(
        p["section"]
            .as_str()
            .unwrap()
            .ends_with("4.2 Replacing the water filter"),
        "{p}"
    );
    assert!(p["text"]
        .as_str()
        .unwrap()
        .contains("Replace the water filter every three months"));

    let r = search(dir, "What is in chapter 3 of the bike guide?", &[]);
    assert_eq!(r["exact"]["kind"], "chapter");
    let text = r["passages"][0]["text"].as_str().unwrap();
    assert!(text.contains("Rim brake pads"), "{r:#}");

    let r = search(
        dir,
        "where does it say \"bed them in with ten firm stops\"",
        &[],
    );
    assert_eq!(
        r["exact"],
        json!({"kind": "phrase", "value": "bed them in with ten firm stops"})
    );
    assert_eq!(r["passages"].as_array().unwrap().len(), 1);
    assert!(r["passages"][0]["text"]
        .as_str()
        .unwrap()
        .contains("bed them in with ten firm stops"));

    // A reference nothing matches falls back to the vector search.
    let r = search(dir, "what does section 9.9 say about tyre pressure", &[]);
    assert!(step_names(&r).contains(&"vector_search".to_string()));
    assert!(r["steps"].as_array().unwrap().iter().any(|s| s["note"]
        .as_str()
        .is_some_and(|n| n.contains("falling back"))));
    assert!(
        r["passages"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Road tyres need 6 to 8 bar"),
        "{r:#}"
    );
}

#[test]
fn a_question_the_documents_do_not_cover_says_so() {
    let dir = shared_state();
    let r = search(dir, "What is the capital of Peru?", &[]);
    assert!(r["passages"].as_array().unwrap().is_empty(), "{r:#}");
    let text = r["context"]["text"].as_str().unwrap();
    assert!(text.contains("do not cover it"), "{text}");
    // Tag filters come from the question; tier filters from the caller.
    let r = search(dir, "bike chain oil", &[]);
    assert_eq!(r["filters"]["tags"], json!(["bike"]));
    assert!(r["passages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["path"].as_str().unwrap().ends_with("bike_maintenance.md")));
    let (_, out, _) = es(
        dir,
        &[
            "knowledge",
            "search",
            "does hard water clog the espresso machine",
            "--tier",
            "2",
            "--json",
        ],
        &[],
    );
    let r = json_of(&out);
    assert!(!r["passages"].as_array().unwrap().is_empty());
    assert!(
        r["passages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["tier"] == 2),
        "{r:#}"
    );
}

#[test]
fn eval_retrieval_reports_precision_recall_latency_spread_and_diversity() {
    let dir = shared_state();
    let labels = data("knowledge/labels.jsonl");
    let (code, out, err) = es(
        dir,
        &[
            "eval",
            "retrieval",
            "--labels",
            labels.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let s = json_of(&out);
    let lines = std::fs::read_to_string(&labels)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(s["queries"].as_u64().unwrap() as usize, lines);
    let (p, r, f1) = (
        s["precision"].as_f64().unwrap(),
        s["recall"].as_f64().unwrap(),
        s["f1"].as_f64().unwrap(),
    );
    // Issue 19: the cut now reads P(the chunk comes from a document that
    // answers), so more chunks of the right documents pass it: recall
    // stays, precision over chunks fell from 0.87 to about 0.6.
    assert!(p >= 0.5 && r >= 0.9, "precision {p} recall {r}");
    assert!((f1 - 2.0 * p * r / (p + r)).abs() < 1e-9);
    assert!(s["latency_p50_ms"].as_f64().unwrap() > 0.0);
    let spread: f64 = s["tier_spread"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((spread - 1.0).abs() < 1e-9);
    let d = s["context_diversity"].as_f64().unwrap();
    assert!(d > 0.0 && d <= 1.0);
    assert_eq!(s["per_query"].as_array().unwrap().len(), lines);
    // A bad labels file is one clear line.
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "{\"query\": 3}\n").unwrap();
    let (code, _, err) = es(
        dir,
        &[
            "eval",
            "retrieval",
            "--labels",
            bad.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 2);
    assert!(err.contains("line 1") && err.lines().count() == 1, "{err}");
}

// ------------------------------------------------------- ONNX cross-encoder

/// A minimal protobuf writer for the few ONNX messages the test model needs.
mod pb {
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    pub fn int(out: &mut Vec<u8>, field: u32, v: i64) {
        varint(out, (field as u64) << 3);
        varint(out, v as u64);
    }
    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, ((field as u64) << 3) | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
    pub fn string(out: &mut Vec<u8>, field: u32, s: &str) {
        bytes(out, field, s.as_bytes());
    }
    /// TensorProto: dims=1, data_type=2, name=8, raw_data=9.
    pub fn tensor(name: &str, dims: &[i64], data_type: i64, raw: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        for d in dims {
            int(&mut t, 1, *d);
        }
        int(&mut t, 2, data_type);
        string(&mut t, 8, name);
        bytes(&mut t, 9, raw);
        t
    }
    /// ValueInfoProto with a tensor type: elem_type and dims (value or name).
    pub fn value_info(name: &str, elem_type: i64, dims: &[Result<i64, &str>]) -> Vec<u8> {
        let mut shape = Vec::new();
        for d in dims {
            let mut dim = Vec::new();
            match d {
                Ok(v) => int(&mut dim, 1, *v),
                Err(p) => string(&mut dim, 2, p),
            }
            bytes(&mut shape, 1, &dim);
        }
        let mut tensor_type = Vec::new();
        int(&mut tensor_type, 1, elem_type);
        bytes(&mut tensor_type, 2, &shape);
        let mut type_proto = Vec::new();
        bytes(&mut type_proto, 1, &tensor_type);
        let mut vi = Vec::new();
        string(&mut vi, 1, name);
        bytes(&mut vi, 2, &type_proto);
        vi
    }
    /// NodeProto: input=1, output=2, name=3, op_type=4, attribute=5.
    pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut n = Vec::new();
        for i in inputs {
            string(&mut n, 1, i);
        }
        for o in outputs {
            string(&mut n, 2, o);
        }
        string(&mut n, 3, &format!("{op}_{}", outputs[0]));
        string(&mut n, 4, op);
        for a in attrs {
            bytes(&mut n, 5, a);
        }
        n
    }
    /// AttributeProto of type INT: name=1, i=3, type=20 (INT = 2).
    pub fn int_attr(name: &str, v: i64) -> Vec<u8> {
        let mut a = Vec::new();
        string(&mut a, 1, name);
        int(&mut a, 3, v);
        int(&mut a, 20, 2);
        a
    }
}

const FLOAT: i64 = 1;
const INT64: i64 = 7;

/// A cross-encoder-shaped ONNX model: inputs input_ids / attention_mask /
/// token_type_ids (int64 [1, seq]), output logits (float [1, 1]) =
/// Σ over passage tokens (type 1, mask 1) of weight[token] + bias. It
/// scores a passage by how often it contains the weighted tokens — enough
/// to prove the pair encoding, type ids, mask and output are wired right.
fn build_cross_encoder(weights: &[(u32, f32)], vocab: usize, bias: f32) -> Vec<u8> {
    let mut table = vec![0f32; vocab];
    for (id, w) in weights {
        table[*id as usize] = *w;
    }
    let raw: Vec<u8> = table.iter().flat_map(|f| f.to_le_bytes()).collect();
    let mut graph = Vec::new();
    let nodes = [
        pb::node(
            "Gather",
            &["table", "input_ids"],
            &["w"],
            &[pb::int_attr("axis", 0)],
        ),
        pb::node(
            "Cast",
            &["token_type_ids"],
            &["types"],
            &[pb::int_attr("to", FLOAT)],
        ),
        pb::node(
            "Cast",
            &["attention_mask"],
            &["mask"],
            &[pb::int_attr("to", FLOAT)],
        ),
        pb::node("Mul", &["types", "mask"], &["passage"], &[]),
        pb::node("Mul", &["w", "passage"], &["wp"], &[]),
        pb::node(
            "ReduceSum",
            &["wp", "axes"],
            &["sum"],
            &[pb::int_attr("keepdims", 1)],
        ),
        pb::node("Add", &["sum", "bias"], &["logits"], &[]),
    ];
    for n in &nodes {
        pb::bytes(&mut graph, 1, n);
    }
    pb::string(&mut graph, 2, "test_cross_encoder");
    pb::bytes(
        &mut graph,
        5,
        &pb::tensor("table", &[vocab as i64], FLOAT, &raw),
    );
    pb::bytes(
        &mut graph,
        5,
        &pb::tensor("axes", &[1], INT64, &1i64.to_le_bytes()),
    );
    pb::bytes(
        &mut graph,
        5,
        &pb::tensor("bias", &[1], FLOAT, &bias.to_le_bytes()),
    );
    for name in ["input_ids", "attention_mask", "token_type_ids"] {
        pb::bytes(
            &mut graph,
            11,
            &pb::value_info(name, INT64, &[Ok(1), Err("seq")]),
        );
    }
    pb::bytes(
        &mut graph,
        12,
        &pb::value_info("logits", FLOAT, &[Ok(1), Ok(1)]),
    );
    let mut model = Vec::new();
    pb::int(&mut model, 1, 8); // ir_version
    pb::string(&mut model, 2, "earshot-test");
    pb::bytes(&mut model, 7, &graph);
    let mut opset = Vec::new();
    pb::string(&mut opset, 1, "");
    pb::int(&mut opset, 2, 13);
    pb::bytes(&mut model, 8, &opset);
    model
}

#[test]
fn an_onnx_cross_encoder_in_models_reranks() {
    let dir = shared_state();
    let models = common::models_dir();
    let tokenizer_path = models.join("all-MiniLM-L6-v2-tokenizer.json");
    let mut tokenizer = tokenizers::Tokenizer::from_file(&tokenizer_path).unwrap();
    // As the reranker sets it up: no padding, pairs cut at 512 tokens.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: 512,
            strategy: tokenizers::TruncationStrategy::LongestFirst,
            ..Default::default()
        }))
        .unwrap();
    let vocab = tokenizer.get_vocab_size(true);
    let id_of = |w: &str| {
        let e = tokenizer.encode(w, false).unwrap();
        assert_eq!(e.get_ids().len(), 1, "{w} is one token");
        e.get_ids()[0]
    };
    let filter = id_of("filter");
    let months = id_of("months");
    let model = build_cross_encoder(&[(filter, 3.0), (months, 1.0)], vocab, -2.0);
    // A models dir with everything of the real one plus the reranker.
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&models).unwrap() {
        let p = e.unwrap().path();
        std::os::unix::fs::symlink(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(tmp.path().join("reranker.onnx"), &model).unwrap();
    std::fs::copy(&tokenizer_path, tmp.path().join("reranker-tokenizer.json")).unwrap();
    let query = "When do I replace the water filter cartridge?";
    let r = search(
        dir,
        query,
        &[("EARSHOT_MODELS_DIR", tmp.path().to_str().unwrap())],
    );
    assert_eq!(r["reranker"], "cross-encoder:reranker.onnx", "{r:#}");
    let candidates = r["candidates"].as_array().unwrap();
    assert!(candidates.len() >= 5);
    for c in candidates {
        let text = chunk_text(dir, c["chunk_id"].as_i64().unwrap());
        // Expected from the pair encoding: only passage tokens count.
        let enc = tokenizer.encode((query, text.as_str()), true).unwrap();
        let logit: f32 = enc
            .get_ids()
            .iter()
            .zip(enc.get_type_ids())
            .take(512)
            .filter(|(_, t)| **t == 1)
            .map(|(id, _)| {
                if *id == filter {
                    3.0
                } else if *id == months {
                    1.0
                } else {
                    0.0
                }
            })
            .sum::<f32>()
            - 2.0;
        let expected = 1.0 / (1.0 + (-logit).exp());
        let got = c["rerank"].as_f64().unwrap() as f32;
        assert!(
            (got - expected).abs() < 1e-4,
            "chunk {}: got {got}, expected {expected}",
            c["chunk_id"]
        );
    }
    // The filter section has the most weighted tokens: it leads.
    let top = &r["passages"][0];
    assert!(
        top["text"]
            .as_str()
            .unwrap()
            .contains("Replace the water filter every three months"),
        "{r:#}"
    );
    // Passages without any weighted token score σ(−2) = 0.12 and are dropped.
    assert!(r["passages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["rerank"].as_f64().unwrap() >= 0.3));
    // A broken reranker file falls back to the fusion, with a warning.
    std::fs::write(tmp.path().join("reranker.onnx"), b"not onnx").unwrap();
    let r = search(
        dir,
        query,
        &[("EARSHOT_MODELS_DIR", tmp.path().to_str().unwrap())],
    );
    assert_eq!(r["reranker"], "fusion");
}

// ------------------------------------------- agent, turn log, quality loop

fn completion(content: Option<&str>, calls: &[(&str, &str, &str)]) -> Reply {
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
    }
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 1_764_000_000, "model": "agent-test",
            "choices": [{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string(),
    )
}

#[test]
fn agent_cites_search_knowledge_and_the_turn_flows_through_log_feedback_review_export() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = es(dir.path(), &["ingest", corpus().to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    let agent_calls = std::sync::Arc::new(AtomicUsize::new(0));
    let calls = agent_calls.clone();
    let llm = TestServer::start(move |req: &Request| {
        let body = req.json();
        if body.get("tools").is_none() {
            return completion(Some("simple"), &[]);
        }
        let offered: Vec<String> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect();
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 if offered.contains(&"search_knowledge".to_string()) => completion(
                None,
                &[(
                    "call_1",
                    "search_knowledge",
                    r#"{"query":"how often to descale the espresso machine"}"#,
                )],
            ),
            0 => completion(
                Some(&format!("search_knowledge was not offered: {offered:?}")),
                &[],
            ),
            _ => {
                let tool = body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "tool")
                    .cloned()
                    .unwrap_or_default();
                let content = tool["content"].as_str().unwrap_or("");
                let answer = if content.contains("every 200 cups") && content.contains("[1]") {
                    "Descale it every 200 cups or every two months [1]."
                } else {
                    "The tool result lacked the passage."
                };
                completion(Some(answer), &[])
            }
        }
    });
    let env = [
        ("LLM_BASE_URL", format!("{}/openai/v1", llm.url())),
        ("GROQ_API_KEY", "gsk_test".to_string()),
        ("GROQ_AGENT_MODEL", "agent-test".to_string()),
        ("EARSHOT_MODE", "graph".to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // "schedule" sends it to the context path by keyword (R-ROUTE).
    let (code, out, err) = es(
        dir.path(),
        &[
            "chat",
            "what does my maintenance schedule say about descaling the espresso machine?",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let events: Vec<Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(json_of)
        .collect();
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "content")
        .map(|e| e["data"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        answer, "Descale it every 200 cups or every two months [1].",
        "{events:#?}"
    );
    assert!(events
        .iter()
        .any(|e| e["type"] == "thinking" && e["tool"] == "search_knowledge"));
    let done = events.iter().find(|e| e["type"] == "done").unwrap();
    let turn = done["turn_id"].as_i64().unwrap();

    // The turn log carries the retrieval: ids, scores, rerank scores, snippets.
    let (_, out, _) = es(dir.path(), &["log", "--last", "1", "--json"], &[]);
    let row = json_of(out.lines().last().unwrap());
    assert_eq!(row["id"], turn);
    let retrieval = &row["retrieval_json"][0];
    assert_eq!(
        retrieval["query"],
        "how often to descale the espresso machine"
    );
    // The manual is among the first two passages (the issue-19 fusion
    // orders the owner's review of the same machine, which also speaks
    // of descaling, first on this question).
    let chunk = retrieval["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .take(2)
        .find(|c| {
            c["source"]
                .as_str()
                .unwrap()
                .ends_with("tier1_espresso_machine.md")
        })
        .unwrap_or_else(|| panic!("{row:#}"));
    assert!(
        chunk["score"].as_f64().is_some()
            && chunk["rerank"].as_f64().is_some()
            && chunk["ids"].is_array()
    );
    assert!(chunk["snippet"].as_str().unwrap().len() > 20);
    assert!(row["timings_json"]["total"].as_f64().unwrap() > 0.0);
    assert_eq!(row["route"], "context");
    assert!(row["models_json"].is_object());
    assert!(row.get("memories_json").is_some());
    let (_, human, _) = es(dir.path(), &["log", "--last", "1"], &[]);
    assert!(
        human.contains("retrieval \"how often to descale") && human.contains("rerank"),
        "{human}"
    );

    // Feedback: errors first in the queue.
    let (code, out, err) = es(dir.path(), &["chat", "hello there", "--json"], &env);
    assert_eq!(code, 0, "{err}");
    let second = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(json_of)
        .find(|e| e["type"] == "done")
        .and_then(|e| e["turn_id"].as_i64())
        .unwrap_or_else(|| panic!("no done: {out}"));
    assert_eq!(
        es(
            dir.path(),
            &[
                "feedback",
                &second.to_string(),
                "not_helpful",
                "too",
                "short"
            ],
            &[]
        )
        .0,
        0
    );
    assert_eq!(
        es(
            dir.path(),
            &["feedback", &turn.to_string(), "error", "wrong interval"],
            &[]
        )
        .0,
        0
    );
    let (code, _, err) = es(dir.path(), &["feedback", "999", "error"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("turn 999 does not exist"), "{err}");
    let (code, _, err) = es(dir.path(), &["feedback", &turn.to_string(), "meh"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("not_helpful or error"), "{err}");
    let (_, out, _) = es(dir.path(), &["review", "queue", "--json"], &[]);
    let queue = json_of(&out);
    assert_eq!(queue[0]["turn_id"], turn);
    assert_eq!(queue[0]["feedback"], "error");
    assert_eq!(queue[1]["turn_id"], second);

    // Review: the verdict is computed, per reviewer.
    let review = |turn: i64, c: &str, comp: &str, who: &str| {
        let (code, out, err) = es(
            dir.path(),
            &[
                "review",
                &turn.to_string(),
                "--correctness",
                c,
                "--completeness",
                comp,
                "--clarity",
                "1",
                "--efficiency",
                "0",
                "--reviewer",
                who,
                "--json",
            ],
            &[],
        );
        assert_eq!(code, 0, "{err}");
        json_of(&out)["verdict"].as_str().unwrap().to_string()
    };
    assert_eq!(review(turn, "1", "1", "ana"), "GOOD");
    assert_eq!(review(turn, "0.5", "1", "bo"), "BAD");
    assert_eq!(review(turn, "1", "0", "cy"), "BAD");
    let (code, _, err) = es(
        dir.path(),
        &[
            "review",
            &turn.to_string(),
            "--correctness",
            "0.7",
            "--completeness",
            "1",
            "--clarity",
            "1",
            "--efficiency",
            "1",
            "--reviewer",
            "x",
        ],
        &[],
    );
    assert_eq!(code, 2);
    assert!(err.contains("correctness must be 0, 0.5 or 1"), "{err}");
    let (_, out, _) = es(dir.path(), &["review", "queue", "--json"], &[]);
    assert_eq!(
        json_of(&out).as_array().unwrap().len(),
        1,
        "reviewed turns leave the queue"
    );

    // Export: CSV with the full column set, JSONL with native types.
    let (code, csv_out, err) = es(
        dir.path(),
        &["export", "--format", "csv", "--reviewed"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let mut reader = csv::Reader::from_reader(csv_out.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    assert!(headers.len() >= 30, "{headers:?}");
    for col in [
        "question",
        "answer",
        "route",
        "intent",
        "route_confidence",
        "retrieval_sources",
        "retrieval_rerank_scores",
        "latency_total_ms",
        "feedback",
        "correctness",
        "verdict",
        "reviewers",
    ] {
        assert!(headers.contains(&col.to_string()), "{col}");
    }
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1, "--reviewed keeps only the reviewed turn");
    let get = |name: &str| {
        rows[0]
            .get(headers.iter().position(|h| h == name).unwrap())
            .unwrap()
            .to_string()
    };
    assert_eq!(get("turn_id"), turn.to_string());
    assert_eq!(
        get("answer"),
        "Descale it every 200 cups or every two months [1]."
    );
    assert!(get("retrieval_sources").contains("tier1_espresso_machine.md"));
    assert_eq!(get("reviewers"), "ana;bo;cy");
    assert_eq!(get("verdict"), "GOOD;BAD;BAD");
    assert_eq!(get("verdict_consensus"), "SPLIT");
    assert_eq!(get("feedback"), "error");
    assert_eq!(get("feedback_notes"), "wrong interval");
    let (_, jsonl, _) = es(dir.path(), &["export", "--format", "jsonl"], &[]);
    let lines: Vec<Value> = jsonl.lines().map(json_of).collect();
    assert_eq!(lines.len(), 2, "every turn without --reviewed");
    assert_eq!(lines[0]["correctness"], json!([1.0, 0.5, 1.0]));
    assert_eq!(lines[1]["feedback"], json!(["not_helpful"]));
    assert_eq!(lines[1]["verdict_consensus"], Value::Null);
    assert_eq!(
        lines[0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        headers
    );
}

#[test]
fn llm_analysis_is_paced_and_llm_rewrite_feeds_the_search() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::copy(
        corpus().join("notes/sourdough.txt"),
        docs.join("sourdough.txt"),
    )
    .unwrap();
    std::fs::copy(
        corpus().join("garden/tomatoes.md"),
        docs.join("tomatoes.md"),
    )
    .unwrap();
    let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    let llm = TestServer::start(move |req: &Request| {
        let body = req.json();
        let system = body["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let user = body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if system.contains("You classify documents") {
            seen.lock().unwrap().push(std::time::Instant::now());
            if user.contains("File: sourdough.txt") {
                completion(Some("Here you go:\n```json\n{\"title\": \"Sourdough baking notes\", \"tier\": 1, \"tags\": [\"Baking\", \"bread\"], \"strategy\": \"paragraph\"}\n```"), &[])
            } else {
                completion(Some("I cannot classify this."), &[])
            }
        } else if system.contains("Rewrite the user's question") {
            completion(Some("sourdough starter feeding flour water ratio"), &[])
        } else {
            completion(Some("simple"), &[])
        }
    });
    let config = dir.path().join("earshot.toml");
    std::fs::write(&config, "[knowledge]\nrewrite_query = true\n").unwrap();
    let env = [
        ("LLM_BASE_URL", format!("{}/openai/v1", llm.url())),
        ("GROQ_API_KEY", "gsk_test".to_string()),
        ("EARSHOT_CONFIG", config.to_str().unwrap().to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, out, err) = es(
        dir.path(),
        &[
            "ingest",
            docs.to_str().unwrap(),
            "--plan",
            "--pause-ms",
            "400",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let times = arrivals.lock().unwrap().clone();
    assert_eq!(times.len(), 2);
    let gap = times[1] - times[0];
    assert!(
        gap >= std::time::Duration::from_millis(400),
        "LLM calls {gap:?} apart"
    );
    let report = json_of(&out);
    let file = |name: &str| file_report(&report, name).clone();
    let s = file("sourdough.txt");
    assert_eq!(s["analysis"]["tier"], 1);
    assert_eq!(s["analysis"]["tags"], json!(["baking", "bread"]));
    assert_eq!(s["analysis"]["title"], "Sourdough baking notes");
    assert!(
        s["analysis"]["analysed_by"]
            .as_str()
            .unwrap()
            .starts_with("llm:"),
        "{s}"
    );
    // An unusable reply falls back to the heuristics, saying why.
    let t = file("tomatoes.md");
    assert_eq!(t["analysis"]["tier"], 3);
    assert!(
        t["analysis"]["analysed_by"]
            .as_str()
            .unwrap()
            .contains("LLM analysis failed"),
        "{t}"
    );
    assert_eq!(report["llm_calls"], 2);

    let (code, _, err) = es(
        dir.path(),
        &["ingest", docs.to_str().unwrap(), "--apply"],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let r = search(dir.path(), "como alimento mi masa madre?", &env);
    assert_eq!(
        r["rewritten"],
        "sourdough starter feeding flour water ratio"
    );
    assert!(
        r["passages"][0]["text"]
            .as_str()
            .unwrap()
            .contains("feed it twice a day"),
        "{r:#}"
    );
    assert_eq!(r["passages"][0]["tier"], 1, "the reviewed plan's tier");
}

#[test]
fn a_long_file_shows_progress_inside_it_and_sigterm_stops_it_within_a_second() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    // ~600 KB of distinct paragraphs: thousands of chunks to embed.
    let mut text = String::from("# Long notes\n\n");
    for i in 0..4000 {
        text.push_str(&format!(
            "Paragraph {i} talks about filter number {i} and the pump schedule for week {}.\n\n",
            i % 52
        ));
        if i % 100 == 0 {
            text.push_str(&format!("## Part {i}\n\n"));
        }
    }
    std::fs::write(docs.join("long.md"), &text).unwrap();
    let mut child = earshot(dir.path())
        .args(["ingest", docs.to_str().unwrap(), "--apply"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Wait for a progress line from inside the file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .unwrap_or_else(|_| panic!("no progress inside the file: {seen:?}"));
        if line.contains("long.md: chunk ") {
            break;
        }
        seen.push(line);
    }
    let signalled = std::time::Instant::now();
    // SAFETY: plain kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < std::time::Duration::from_secs(3),
            "ingest ignored SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let took = signalled.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "stopped {took:?} after SIGTERM"
    );
    let _ = status;
    // Nothing of the half-embedded file was stored.
    let db = dir.path().join("earshot.db");
    if db.exists() {
        assert_eq!(
            count(dir.path(), "SELECT COUNT(*) FROM knowledge_documents"),
            0
        );
    }
}

/// A stand-in embedder: the disk fills before any vector matters.
struct FlatEmbedder;

impl earshot::nlu::Embedder for FlatEmbedder {
    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|_| vec![1.0 / 8f32.sqrt(); 8]).collect())
    }
    fn dims(&self) -> usize {
        8
    }
    fn model_id(&self) -> String {
        "flat-8".into()
    }
}

/// Issue 23: `ingest` on a full disk reports the file as not indexed
/// because the disk is full — not "the last turn was not saved".
#[test]
fn ingest_on_a_full_disk_names_the_disk_not_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("notes.md");
    std::fs::write(
        &doc,
        format!(
            "# Notes\n\n{}",
            "The boiler is serviced every spring. ".repeat(2000)
        ),
    )
    .unwrap();
    let store = open_store(dir.path());
    store
        .with_conn(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            c.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
        })
        .unwrap();
    let knowledge = earshot::knowledge::KnowledgeConfig::default();
    let ingest = earshot::knowledge::ingest::Ingest {
        knowledge: &knowledge,
        user_id: "user-1",
        store: &store,
        embedder: Some(std::sync::Arc::new(FlatEmbedder)),
        llm: None,
        pause: std::time::Duration::ZERO,
        plan_path: dir.path().join("plan.json"),
        cancel: earshot::cancel::CancelToken::new(),
    };
    let report = ingest
        .run(&[doc], earshot::knowledge::ingest::Mode::Apply)
        .unwrap();
    let file = &report.files[0];
    assert_eq!(file.status, "failed");
    let error = file.error.clone().unwrap_or_default();
    assert!(
        error.contains("not indexed (nothing was changed)")
            && error.contains("disk holding")
            && error.contains("free some space"),
        "{error}"
    );
    assert!(!error.contains("turn"), "{error}");
    assert_eq!(
        count(dir.path(), "SELECT COUNT(*) FROM knowledge_documents"),
        0
    );
}

// ------------------------------------------------- PDFs and bad input (issue 19)

/// Lower-case words with their counts.
fn word_counts(text: &str) -> std::collections::HashMap<String, usize> {
    let mut out = std::collections::HashMap::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *out.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    out
}

/// poppler's own text of a PDF, the reference.
fn pdftotext(path: &Path) -> String {
    let out = std::process::Command::new("pdftotext")
        .args(["-enc", "UTF-8"])
        .arg(path)
        .arg("-")
        .output()
        .expect("pdftotext is installed by scripts/knowledge-tools.sh");
    assert!(out.status.success(), "{}", path.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every test PDF (scripts/make-test-pdfs.sh): ghostscript (enscript, groff
/// → ps2pdf), gropdf, reportlab, fpdf2, LibreOffice Writer, pdfTeX,
/// Chromium's print-to-PDF (Skia, with its header and footer) and hand-made.
#[test]
fn pdfs_from_each_producer_keep_98_percent_of_pdftotext_words_and_their_pages() {
    use earshot::knowledge::{loader, splitter};
    let dir = data("knowledge/pdfs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for producer in [
        "enscript-",
        "gropdf-",
        "libreoffice-",
        "pdftex-",
        "chromium-",
    ] {
        assert!(
            files.iter().any(|f| f
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(producer)),
            "no {producer}*.pdf in {files:?}"
        );
    }
    let limits = earshot::knowledge::KnowledgeConfig::default().pdf_limits();
    for pdf in files {
        let reference = pdftotext(&pdf);
        let pages = reference.trim_end_matches('\u{c}').matches('\u{c}').count() as u32 + 1;
        let loaded = loader::load(&pdf, loader::Kind::Pdf, 20, &limits)
            .unwrap_or_else(|e| panic!("{}: {e}", pdf.display()));
        // What is indexed: the chunks' text.
        let pieces = splitter::split(&loaded.text, splitter::Strategy::Section, 700);
        let ours: String = pieces.iter().map(|p| format!("{}\n", p.text)).collect();
        let (want, got) = (word_counts(&reference), word_counts(&ours));
        let total: usize = want.values().sum();
        let kept: usize = want
            .iter()
            .map(|(w, n)| (*n).min(got.get(w).copied().unwrap_or(0)))
            .sum();
        let share = kept as f64 / total as f64;
        eprintln!(
            "{}: {kept} of {total} words ({:.2} %), {pages} pages",
            pdf.file_name().unwrap().to_string_lossy(),
            share * 100.0
        );
        assert!(
            share >= 0.98,
            "{}: {kept} of {total} words ({:.1} %)",
            pdf.display(),
            share * 100.0
        );
        // Pages: in order, within the document, and the last page reached.
        let seen: Vec<u32> = pieces.iter().map(|p| p.page).collect();
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert!(seen.iter().all(|p| (1..=pages).contains(p)), "{seen:?}");
        if pages > 2 {
            assert!(
                *seen.last().unwrap() >= pages - 1,
                "{}: {pages} pages, chunks reach {seen:?}",
                pdf.display()
            );
        }
    }
}

/// The enscript (ghostscript) PDF the issue found as one header-only chunk:
/// its body is searchable, the passage cites its page, and a man page's
/// sections name the citation.
#[test]
fn a_ghostscript_pdf_and_a_man_page_are_searchable_with_pages_and_sections() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for name in ["enscript-triggers.pdf", "gropdf-gzip.pdf"] {
        std::fs::copy(data(&format!("knowledge/pdfs/{name}")), docs.join(name)).unwrap();
    }
    let ingest = || {
        let (code, out, err) = es(
            dir.path(),
            &["ingest", docs.to_str().unwrap(), "--json"],
            &[],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        json_of(&out)
    };
    let report = ingest();
    for f in report["files"].as_array().unwrap() {
        assert!(f["chunks"].as_u64().unwrap() > 10, "{f}");
    }
    let r = search(
        dir.path(),
        "what does gzip do with the original file's name and timestamp",
        &[],
    );
    let top = &r["passages"][0];
    assert!(
        top["path"].as_str().unwrap().ends_with("gropdf-gzip.pdf"),
        "{r:#}"
    );
    assert!(top["page"].as_u64().is_some(), "{top}");
    assert!(top["section"].as_str().is_some(), "{top}");
    let r = search(dir.path(), "how are trigger cycles detected", &[]);
    let hit = r["passages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["path"]
                .as_str()
                .unwrap()
                .ends_with("enscript-triggers.pdf")
        })
        .unwrap_or_else(|| panic!("{r:#}"));
    let page = hit["page"].as_u64().unwrap();
    assert!(page > 1, "the body past page 1 is indexed: {hit}");
    assert!(
        hit["text"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("cycle"),
        "{hit}"
    );
    let cites = r["context"]["text"].as_str().unwrap();
    assert!(cites.contains(", p. "), "citations carry the page: {cites}");

    // A knowledge base indexed before paragraph vectors were stored (here:
    // all of them removed) has its documents of several paragraphs indexed
    // again by the next ingest, and left unchanged by the one after.
    let vectors_of = |name: &str| {
        count(
            dir.path(),
            &format!(
                "SELECT COUNT(*) FROM knowledge_paragraph_vectors pv
                 JOIN knowledge_chunks c ON c.id = pv.chunk_id
                 JOIN knowledge_documents d ON d.id = c.document_id
                 WHERE d.path LIKE '%{name}'"
            ),
        )
    };
    let before = vectors_of("gropdf-gzip.pdf");
    assert!(before > 0, "ingest stored gzip's paragraph vectors");
    open_store(dir.path())
        .with_conn(|c| c.execute("DELETE FROM knowledge_paragraph_vectors", []))
        .unwrap();
    let report = ingest();
    assert_eq!(
        file_report(&report, "gropdf-gzip.pdf")["status"],
        "replaced",
        "{report:#}"
    );
    assert_eq!(vectors_of("gropdf-gzip.pdf"), before);
    let again = ingest();
    assert!(
        again["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["status"] == "unchanged"),
        "{again:#}"
    );
}

/// Headings set only in a larger type (as word processors write them)
/// become the sections a passage is cited under, title above section.
#[test]
fn a_pdf_whose_headings_are_only_larger_type_cites_them() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::copy(
        data("knowledge/pdfs/sized-headings-boiler.pdf"),
        docs.join("boiler.pdf"),
    )
    .unwrap();
    let (code, out, err) = es(dir.path(), &["ingest", docs.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    for (question, section, page) in [
        (
            "what pressure should the boiler gauge show",
            "Wall Boiler User Guide > Water pressure",
            1,
        ),
        (
            "how often does the boiler need servicing",
            "Wall Boiler User Guide > Annual service",
            2,
        ),
    ] {
        let r = search(dir.path(), question, &[]);
        let top = &r["passages"][0];
        assert_eq!(top["section"].as_str(), Some(section), "{question}: {r:#}");
        assert_eq!(top["page"].as_u64(), Some(page), "{question}: {top}");
    }
}

/// A PDF whose one content stream inflates to `mb` MB of text operators.
fn stream_bomb(mb: usize) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let line = b"BT /F1 12 Tf 72 700 Td (bomb) Tj ET\n".repeat(28_000);
    for _ in 0..mb {
        z.write_all(&line).unwrap();
    }
    let stream = z.finish().unwrap();
    let mut content = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    content.extend(&stream);
    content.extend(b"\nendstream");
    pdf_of(vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>".to_vec(),
        content,
    ])
}

/// A PDF with an object nested 100 000 arrays deep.
fn recursion_bomb() -> Vec<u8> {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    pdf_of(vec![
        format!("<< /Type /Catalog /Pages 2 0 R /Deep {deep} >>").into_bytes(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>".to_vec(),
    ])
}

fn pdf_of(objects: Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend(o);
        out.extend(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for off in offsets {
        out.extend(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[test]
fn bad_input_is_one_line_per_file_bounded_and_the_rest_is_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let put = |name: &str, bytes: &[u8]| std::fs::write(docs.join(name), bytes).unwrap();
    std::fs::copy(
        data("knowledge/pdfs/handmade-three-lines.pdf"),
        docs.join("boiler.pdf"),
    )
    .unwrap();
    std::fs::copy(
        data("knowledge/bad/encrypted.pdf"),
        docs.join("encrypted.pdf"),
    )
    .unwrap();
    std::fs::copy(
        data("knowledge/bad/scan-reportlab.pdf"),
        docs.join("scan.pdf"),
    )
    .unwrap();
    let good = std::fs::read(data("knowledge/pdfs/gropdf-gzip.pdf")).unwrap();
    put("truncated.pdf", &good[..good.len() / 3]);
    put("bomb-stream.pdf", &stream_bomb(400));
    put("bomb-deep.pdf", &recursion_bomb());
    put(
        "program.txt",
        &std::fs::read(common::earshot_bin()).unwrap()[..64 * 1024],
    );
    put(
        "latin1.txt",
        b"Caf\xe9 menu\n\nThe cr\xe8me br\xfbl\xe9e is served cold, with a caramelised top.\n",
    );
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(
        "Kettle notes\n\nDescale the kettle every month with citric acid.\n"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes()),
    );
    put("utf16.txt", &utf16);
    // 1 GB, sparse: refused from its size alone.
    std::fs::File::create(docs.join("huge.txt"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::fs::write(
        dir.path().join("earshot.toml"),
        "[knowledge]\npdf_timeout_s = 20\npdf_memory_mb = 256\n",
    )
    .unwrap();
    let config = dir.path().join("earshot.toml");
    let started = std::time::Instant::now();
    let (code, out, err) = es(
        dir.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "ingest",
            docs.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    let took = started.elapsed();
    assert_eq!(code, 1, "failures make the exit code 1: {out}\n{err}");
    assert!(took.as_secs() < 60, "bounded in time: {took:?}");
    let report = json_of(&out);
    let file = |name: &str| -> Value { file_report(&report, name).clone() };
    for name in ["boiler.pdf", "latin1.txt", "utf16.txt"] {
        assert_eq!(file(name)["status"], "indexed", "{name}: {report:#}");
    }
    assert!(file("latin1.txt")["note"]
        .as_str()
        .unwrap()
        .contains("latin-1"));
    for (name, words) in [
        ("encrypted.pdf", "encrypted"),
        ("scan.pdf", "no text layer; OCR is not supported"),
        ("truncated.pdf", "damaged or truncated"),
        ("bomb-stream.pdf", "PDF bomb"),
        ("bomb-deep.pdf", "damaged"),
        ("program.txt", "not a text file"),
        ("huge.txt", "too large (1024 MB"),
    ] {
        let f = file(name);
        assert_eq!(f["status"], "failed", "{name}: {f}");
        let e = f["error"].as_str().unwrap();
        assert!(e.contains(words), "{name}: {e}");
        assert!(!e.contains('\n'), "{name}: {e}");
    }
    // The decoded texts are searchable as written.
    let r = search(dir.path(), "how is the crème brûlée served", &[]);
    assert!(
        r["passages"][0]["text"]
            .as_str()
            .unwrap()
            .contains("crème brûlée"),
        "{r:#}"
    );
    let r = search(dir.path(), "what pressure should my boiler be at", &[]);
    let top = &r["passages"][0];
    assert!(top["text"].as_str().unwrap().contains("1.5 bar"), "{r:#}");
    assert_eq!(top["page"], 1);
    // doctor counts what was indexed and what yielded no text.
    let store = open_store(dir.path());
    let stats = store.with_conn(earshot::knowledge::store::stats).unwrap();
    assert_eq!((stats.documents, stats.no_text), (3, 1), "{stats:?}");
    let (_, out, err) = es(
        dir.path(),
        &["--config", config.to_str().unwrap(), "doctor", "--json"],
        &[],
    );
    let doctor = json_of(&out);
    let check = |name: &str| -> Value {
        doctor["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} check: {out}\n{err}"))
            .clone()
    };
    assert_eq!(check("PDF reader")["status"], "ok");
    let reranker = check("reranker")["detail"].as_str().unwrap().to_string();
    assert!(
        reranker.contains("calibrated fusion") && reranker.contains("questions-A"),
        "{reranker}"
    );
    let kb = check("knowledge base");
    let detail = kb["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("3 documents") && detail.contains("1 files yielded no text"),
        "{detail}"
    );
    assert_eq!(kb["status"], "warn");
}
