//! A question → the passages that answer it, one function per step, each
//! step traced (name, milliseconds, what came out) so `earshot knowledge
//! search --json` shows the whole decision:
//!
//! 1. [`rewrite_query`] — optional LLM rewrite (translate, expand);
//! 2. [`detect_exact`] — a quoted phrase, "section 4.2", "chapter 3"…
//!    goes straight to [`exact_lookup`];
//! 3. [`filters_for`] — tiers allowed by config/caller, tags named in the
//!    question;
//! 4. [`vector_search`] — top 30 within the filters, plus
//!    [`keyword_search`] — up to 10 BM25 hits it missed;
//! 5. [`rerank`] — cross-encoder or calibrated fusion, scores in [0, 1];
//!    with the fusion, [`brevity`] lowers chunks of a few words (titles,
//!    NAME lines, page headers) in the order and [`paragraph`] orders the
//!    first three again by their best paragraph;
//! 6. [`drop_below`] 0.3, [`boost_tier1`], [`cap_per_source`] (2), then
//!    [`take_top`] 7 — the cap comes before the cut so the 7 stay diverse;
//! 7. [`merge_adjacent`] — neighbouring chunks of one document become one
//!    passage;
//! 8. [`super::context::build`] — grouped by tier, numbered citations.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Instant;

use anyhow::{Context, Result};
use regex::Regex;
use serde::Serialize;

use super::bm25;
use super::brevity;
use super::context::{self, Context as Built};
use super::paragraph;
use super::rerank::RerankInput;
use super::store::{self as kstore, ChunkRow};
use super::KnowledgeBase;
use crate::cancel::CancelToken;
use crate::llm::{ChatMessage, ChatRequest};

/// What the caller may narrow the search to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchOptions {
    /// Only these tiers (empty = the config's `allowed_tiers`).
    pub tiers: Vec<u8>,
    /// Only documents with one of these tags (added to those in the question).
    pub tags: Vec<String>,
    /// Skip the LLM rewrite even when the config enables it.
    pub no_rewrite: bool,
}

/// An exact reference found in the question.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Exact {
    /// A quoted phrase: chunks containing it verbatim.
    Phrase(String),
    /// "section 4.2", "§ 4.2".
    Section(String),
    /// "chapter 3".
    Chapter(String),
}

/// The filters actually applied.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Filters {
    pub tiers: Vec<u8>,
    pub tags: Vec<String>,
}

/// One candidate through the pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub chunk_id: i64,
    pub document_id: i64,
    pub ordinal: i64,
    pub path: String,
    pub title: String,
    pub section: Option<String>,
    /// The PDF page the chunk starts on (None for txt/md).
    pub page: Option<u32>,
    pub tier: u8,
    /// Cosine similarity to the query.
    pub vector: f32,
    /// Normalised BM25.
    pub bm25: f32,
    /// Share of the question's words (stemmed, stop words left out) found
    /// in the chunk and its section.
    pub coverage: f32,
    /// The reranker's score in [0, 1] (the 0.3 cut applies to this).
    pub rerank: f32,
    /// The reranker's order among the kept (the fusion: P(holds the
    /// answer); a cross-encoder: its score).
    pub relevance: f32,
    /// relevance + tier-1 boost: the order used after reranking.
    pub score: f32,
    /// The cosine of the chunk's best paragraph, for the first few
    /// candidates ([`super::paragraph`]); absent when not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paragraph: Option<f32>,
    #[serde(skip)]
    pub text: String,
}

/// Neighbouring chunks of one document, merged.
#[derive(Debug, Clone, Serialize)]
pub struct Passage {
    pub chunk_ids: Vec<i64>,
    pub document_id: i64,
    pub path: String,
    pub title: String,
    pub section: Option<String>,
    /// The PDF page of the passage's best chunk (None for txt/md), for
    /// citations: where the answer most likely is, not where a merged
    /// passage starts.
    pub page: Option<u32>,
    pub tier: u8,
    pub score: f32,
    pub rerank: f32,
    pub text: String,
}

/// One traced step.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub name: &'static str,
    pub ms: f64,
    /// Items out of this step.
    pub out: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The whole answer to one search.
#[derive(Debug, Clone, Serialize)]
pub struct Retrieval {
    pub query: String,
    pub rewritten: Option<String>,
    pub exact: Option<Exact>,
    pub filters: Filters,
    pub reranker: String,
    pub steps: Vec<Step>,
    /// Every reranked candidate, best first (dropped ones included).
    pub candidates: Vec<Candidate>,
    pub passages: Vec<Passage>,
    pub context: Built,
    pub total_ms: f64,
}

impl Retrieval {
    /// The R-OBS summary kept in the turn log: ids, scores, rerank scores,
    /// snippets.
    pub fn telemetry(&self) -> serde_json::Value {
        serde_json::json!({
            "query": self.query,
            "rewritten": self.rewritten,
            "exact": self.exact,
            "reranker": self.reranker,
            "total_ms": self.total_ms,
            "chunks": self.passages.iter().map(|p| serde_json::json!({
                "ids": p.chunk_ids,
                "source": p.path,
                "section": p.section,
                "tier": p.tier,
                "score": p.score,
                "rerank": p.rerank,
                "snippet": p.text.chars().take(160).collect::<String>(),
            })).collect::<Vec<_>>(),
            "candidates": self.candidates.iter().map(|c| serde_json::json!({
                "id": c.chunk_id, "vector": c.vector, "bm25": c.bm25, "rerank": c.rerank,
            })).collect::<Vec<_>>(),
        })
    }
}

struct Tracer {
    steps: Vec<Step>,
}

impl Tracer {
    fn step(&mut self, name: &'static str, since: Instant, out: usize, note: Option<String>) {
        self.steps.push(Step {
            name,
            ms: since.elapsed().as_secs_f64() * 1000.0,
            out,
            note,
        });
    }
}

/// Run the pipeline.
pub fn search(
    kb: &KnowledgeBase,
    query: &str,
    options: &SearchOptions,
    cancel: &CancelToken,
) -> Result<Retrieval> {
    let started = Instant::now();
    let cfg = &kb.settings.knowledge;
    let mut t = Tracer { steps: Vec::new() };
    let query = query.trim();

    let s = Instant::now();
    let (rewritten, note) = if cfg.rewrite_query && !options.no_rewrite {
        match &kb.llm {
            Some(llm) => {
                match rewrite_query(llm.as_ref(), &kb.settings.rewrite_model, query, cancel) {
                    Ok(r) => (Some(r), None),
                    Err(e) => (None, Some(format!("rewrite skipped: {e}"))),
                }
            }
            None => (None, Some("rewrite skipped: no LLM".into())),
        }
    } else {
        (None, Some("off".into()))
    };
    t.step("rewrite", s, 1, note);
    let search_text = rewritten.as_deref().unwrap_or(query).to_string();

    let s = Instant::now();
    let exact = detect_exact(query);
    t.step(
        "exact_detect",
        s,
        exact.is_some() as usize,
        exact.as_ref().map(|e| format!("{e:?}")),
    );

    let s = Instant::now();
    let known = kb.store.with_conn(kstore::known_tags)?;
    let filters = filters_for(query, &known, options, &cfg.allowed_tiers);
    t.step(
        "filters",
        s,
        filters.tags.len(),
        Some(format!(
            "tiers {:?}, tags {:?}",
            filters.tiers, filters.tags
        )),
    );

    let query_vec = kb
        .embedder
        .embed_one(&search_text)
        .context("cannot embed the question")?;

    let mut exact_rows = Vec::new();
    if let Some(e) = &exact {
        let s = Instant::now();
        exact_rows = exact_lookup(kb, e, &filters)?;
        let note = exact_rows
            .is_empty()
            .then(|| "no chunk matches; falling back to vector search".to_string());
        t.step("exact_lookup", s, exact_rows.len(), note);
    }

    let (mut candidates, exact_hit) = if !exact_rows.is_empty() {
        let s = Instant::now();
        let scored = rerank(kb, &search_text, &query_vec, exact_rows)?;
        t.step(
            "rerank",
            s,
            scored.len(),
            Some("exact matches are kept whatever their score".into()),
        );
        (scored, true)
    } else {
        let s = Instant::now();
        let mut hits = vector_search(kb, &query_vec, &filters, cfg.vector_top_k)?;
        let mut note = None;
        if hits.is_empty() && !filters.tags.is_empty() {
            // A tag named in passing must not hide every document.
            let wider = Filters {
                tiers: filters.tiers.clone(),
                tags: Vec::new(),
            };
            hits = vector_search(kb, &query_vec, &wider, cfg.vector_top_k)?;
            note = Some("nothing under the tags; searched without them".to_string());
        }
        t.step("vector_search", s, hits.len(), note);
        let s = Instant::now();
        let extra = keyword_search(kb, &search_text, &filters, KEYWORD_TOP_K, &hits)?;
        t.step(
            "keyword_search",
            s,
            extra.len(),
            Some("BM25 hits the vector search missed".into()),
        );
        let mut rows: Vec<RowWithScore> = hits.into_iter().map(Into::into).collect();
        rows.extend(extra.into_iter().map(RowWithScore::from));
        let s = Instant::now();
        let scored = rerank(kb, &search_text, &query_vec, rows)?;
        t.step("rerank", s, scored.len(), None);
        (scored, false)
    };
    if !exact_hit && kb.reranker.orders_by_fusion() {
        let s = Instant::now();
        let n = brevity::discount_short(&mut candidates);
        t.step(
            "short_chunks",
            s,
            n,
            Some(format!(
                "under {} characters: -{} on the order",
                brevity::SHORT_CHARS,
                brevity::DISCOUNT
            )),
        );
    }
    candidates.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    if !exact_hit && cfg.paragraph_top_k > 0 && kb.reranker.orders_by_fusion() {
        let s = Instant::now();
        let model = kb.embedder.model_id();
        let stored = |id: i64| {
            Ok(kb
                .store
                .with_conn(|c| kstore::paragraph_vectors(c, id, &model))?)
        };
        // A failure here costs the finer order, not the answer.
        let (embedded, note) = match paragraph::refine(
            kb.embedder.as_ref(),
            stored,
            &query_vec,
            &mut candidates,
            cfg.paragraph_top_k,
        ) {
            Ok(embedded) => (
                embedded,
                format!(
                    "first {} by their best paragraph; out = paragraphs embedded now (stored at ingest: 0)",
                    cfg.paragraph_top_k
                ),
            ),
            Err(e) => (0, format!("skipped: {e:#}")),
        };
        t.step("paragraphs", s, embedded, Some(note));
    }
    let all = candidates.clone();

    if !exact_hit {
        let s = Instant::now();
        candidates = drop_below(candidates, cfg.min_score);
        t.step(
            "drop_below",
            s,
            candidates.len(),
            Some(format!("min {}", cfg.min_score)),
        );
    }
    let s = Instant::now();
    candidates = boost_tier1(candidates, cfg.tier1_boost);
    if exact_hit {
        // A direct lookup outranks any similarity: exact matches get +1
        // on their ordering score (their order among themselves is kept).
        for c in &mut candidates {
            c.score += 1.0;
        }
    }
    t.step(
        "boost_tier1",
        s,
        candidates.len(),
        Some(format!("+{}", cfg.tier1_boost)),
    );
    if !exact_hit {
        let s = Instant::now();
        candidates = cap_per_source(candidates, cfg.max_per_source);
        t.step(
            "cap_per_source",
            s,
            candidates.len(),
            Some(format!("max {}", cfg.max_per_source)),
        );
    }
    let s = Instant::now();
    candidates = take_top(candidates, cfg.rerank_top_n);
    t.step(
        "take_top",
        s,
        candidates.len(),
        Some(format!("top {}", cfg.rerank_top_n)),
    );
    let s = Instant::now();
    let passages = merge_adjacent(candidates);
    t.step("merge_adjacent", s, passages.len(), None);
    let s = Instant::now();
    let built = context::build(&passages);
    t.step("context", s, built.citations.len(), None);

    Ok(Retrieval {
        query: query.to_string(),
        rewritten,
        exact,
        filters,
        reranker: kb.reranker.name(),
        steps: t.steps,
        candidates: all,
        passages,
        context: built,
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

const REWRITE_PROMPT: &str = "Rewrite the user's question as a search query for an English document collection: translate it to English if needed, keep every name, number and quoted phrase, add up to five closely related keywords. Answer with the query only, one line.";

/// Ask the LLM for a better search query (translation + expansion).
pub fn rewrite_query(
    llm: &dyn crate::llm::ChatModel,
    model: &str,
    query: &str,
    cancel: &CancelToken,
) -> Result<String> {
    let request = ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system(REWRITE_PROMPT),
            ChatMessage::user(query),
        ],
        temperature: 0.0,
        max_completion_tokens: 120,
        top_p: 1.0,
        tools: Vec::new(),
        stream: false,
    };
    let response = llm
        .chat(&request, &mut |_| {}, cancel)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let line = response
        .content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .trim_matches('"')
        .to_string();
    if line.is_empty() {
        anyhow::bail!("the LLM returned an empty rewrite");
    }
    Ok(line.chars().take(400).collect())
}

static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([^"]{3,200})"|“([^”]{3,200})”"#).expect("static regex"));
static SECTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\bsection|§)\s*(\d{1,3}(?:\.\d{1,3}){0,4})\b").expect("static regex")
});
static CHAPTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bchapter\s+(\d{1,3}|[ivxlc]{1,6})\b").expect("static regex")
});
static TIER_IN_QUERY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\btier[- ]?([123])\b").expect("static regex"));

/// A quoted phrase, a section or a chapter number in the question.
pub fn detect_exact(query: &str) -> Option<Exact> {
    if let Some(c) = QUOTED.captures(query) {
        let phrase = c.get(1).or_else(|| c.get(2))?.as_str().trim().to_string();
        if !phrase.is_empty() {
            return Some(Exact::Phrase(phrase));
        }
    }
    if let Some(c) = SECTION.captures(query) {
        return Some(Exact::Section(c[1].to_string()));
    }
    if let Some(c) = CHAPTER.captures(query) {
        return Some(Exact::Chapter(c[1].to_lowercase()));
    }
    None
}

/// Whether one component of a section path is the numbered heading asked for.
fn heading_matches(component: &str, exact: &Exact) -> bool {
    let c = component.trim().to_lowercase();
    let numbered = |n: &str| {
        c.strip_prefix(n).is_some_and(|rest| {
            rest.is_empty()
                || rest.starts_with(' ')
                || (rest.starts_with('.') && !rest[1..].starts_with(|ch: char| ch.is_ascii_digit()))
        })
    };
    match exact {
        Exact::Section(n) => {
            numbered(n)
                || ["section ", "§ ", "§"].iter().any(|p| {
                    c.strip_prefix(p).is_some_and(|rest| {
                        rest.strip_prefix(n.as_str()).is_some_and(|r| {
                            !r.starts_with(|ch: char| ch.is_ascii_digit() || ch == '.')
                                || r.starts_with(". ")
                                || r == "."
                        })
                    })
                })
        }
        Exact::Chapter(n) => {
            c.strip_prefix("chapter ")
                .and_then(|rest| rest.strip_prefix(n.as_str()))
                .is_some_and(|r| r.is_empty() || !r.starts_with(|ch: char| ch.is_alphanumeric()))
                || (n.chars().all(|ch| ch.is_ascii_digit()) && numbered(n))
        }
        Exact::Phrase(_) => false,
    }
}

/// Chunks that match the exact reference, within the filters.
pub fn exact_lookup(kb: &KnowledgeBase, exact: &Exact, filters: &Filters) -> Result<Vec<ChunkRow>> {
    let rows = match exact {
        Exact::Phrase(p) => kb
            .store
            .with_conn(|c| kstore::chunks_containing(c, p, 50))?,
        Exact::Section(_) | Exact::Chapter(_) => kb
            .store
            .with_conn(kstore::all_chunks)?
            .into_iter()
            .filter(|r| {
                r.section
                    .as_deref()
                    .is_some_and(|s| s.split(" > ").any(|part| heading_matches(part, exact)))
            })
            .collect(),
    };
    Ok(rows.into_iter().filter(|r| allowed(r, filters)).collect())
}

/// The filters for this question: the caller's tiers (else the config's),
/// a "tier N" in the question, the caller's tags plus every known tag the
/// question names as a whole word.
pub fn filters_for(
    query: &str,
    known_tags: &[String],
    options: &SearchOptions,
    config_tiers: &[u8],
) -> Filters {
    let mut tiers: Vec<u8> = if options.tiers.is_empty() {
        config_tiers.to_vec()
    } else {
        options.tiers.clone()
    };
    if let Some(c) = TIER_IN_QUERY.captures(query) {
        if let Ok(t) = c[1].parse::<u8>() {
            if tiers.contains(&t) {
                tiers = vec![t];
            }
        }
    }
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .map(|w| w.to_lowercase())
        .collect();
    let mut tags = super::analysis::clean_tags(options.tags.clone());
    for tag in known_tags {
        let tag = tag.to_lowercase();
        let named = if tag.contains(' ') {
            query.to_lowercase().contains(&tag)
        } else {
            words.contains(&tag)
        };
        if named && !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    tiers.sort_unstable();
    tiers.dedup();
    Filters { tiers, tags }
}

fn allowed(row: &ChunkRow, filters: &Filters) -> bool {
    filters.tiers.contains(&row.tier)
        && (filters.tags.is_empty() || row.tags.iter().any(|t| filters.tags.contains(t)))
}

/// Top `k` chunks by cosine within the filters. Unfiltered, one usearch
/// query; filtered, usearch is asked for 10× more (at least 300) and the
/// filters applied to those, so a filter on a small share of a large
/// corpus can return fewer than `k`.
pub fn vector_search(
    kb: &KnowledgeBase,
    query_vec: &[f32],
    filters: &Filters,
    k: usize,
) -> Result<Vec<(ChunkRow, f32)>> {
    let user = &kb.settings.user_id;
    let unfiltered = filters.tags.is_empty() && [1, 2, 3].iter().all(|t| filters.tiers.contains(t));
    let ask = if unfiltered { k } else { (k * 10).max(300) };
    let hits = kb.index.search(user, query_vec, ask)?;
    let ids: Vec<i64> = hits.iter().map(|h| h.item_id).collect();
    let score: HashMap<i64, f32> = hits.iter().map(|h| (h.item_id, h.score)).collect();
    let rows = kb.store.with_conn(|c| kstore::chunks_by_ids(c, &ids))?;
    Ok(rows
        .into_iter()
        .filter(|r| allowed(r, filters))
        .map(|r| {
            let s = score.get(&r.id).copied().unwrap_or(0.0);
            (r, s)
        })
        .take(k)
        .collect())
}

/// Keyword candidates added to the vector ones.
pub const KEYWORD_TOP_K: usize = 10;

/// The best `k` chunks by BM25 within the filters that the vector search
/// did not return. Approximate vector search can miss a chunk that shares
/// the question's rare words (a large corpus of near-duplicate chunks
/// crowds it out); the reranker then judges both channels alike.
pub fn keyword_search(
    kb: &KnowledgeBase,
    query: &str,
    filters: &Filters,
    k: usize,
    already: &[(ChunkRow, f32)],
) -> Result<Vec<ChunkRow>> {
    let hits = kb.store.with_conn(|c| bm25::top(c, query, k * 4))?;
    let ids: Vec<i64> = hits
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !already.iter().any(|(r, _)| r.id == *id))
        .collect();
    let rows = kb.store.with_conn(|c| kstore::chunks_by_ids(c, &ids))?;
    Ok(rows
        .into_iter()
        .filter(|r| allowed(r, filters))
        .take(k)
        .collect())
}

/// Score each candidate with the reranker (vector cosine and BM25 are
/// computed for every one, whichever backend reranks).
pub fn rerank<R: Into<RowWithScore>>(
    kb: &KnowledgeBase,
    query: &str,
    query_vec: &[f32],
    rows: Vec<R>,
) -> Result<Vec<Candidate>> {
    let rows: Vec<RowWithScore> = rows.into_iter().map(Into::into).collect();
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = rows.iter().map(|r| r.row.id).collect();
    let bm = kb.store.with_conn(|c| bm25::scores(c, query, &ids))?;
    // Exact-lookup rows have no cosine yet: take it from the stored vector.
    let missing: Vec<i64> = rows
        .iter()
        .filter(|r| r.vector.is_none())
        .map(|r| r.row.id)
        .collect();
    let stored: HashMap<i64, Vec<f32>> = if missing.is_empty() {
        HashMap::new()
    } else {
        kb.store
            .with_conn(|c| kstore::embeddings(c, &missing))?
            .into_iter()
            .collect()
    };
    let cos = |v: &[f32]| v.iter().zip(query_vec).map(|(a, b)| a * b).sum::<f32>();
    let vectors: Vec<f32> = rows
        .iter()
        .map(|r| {
            r.vector
                .unwrap_or_else(|| stored.get(&r.row.id).map(|v| cos(v)).unwrap_or(0.0))
        })
        .collect();
    let bm25s: Vec<f32> = rows
        .iter()
        .map(|r| bm.get(&r.row.id).copied().unwrap_or(0.0))
        .collect();
    let coverages: HashMap<i64, f32> = rows
        .iter()
        .map(|r| {
            let section = r.row.section.as_deref().unwrap_or("");
            (
                r.row.id,
                super::rerank::coverage(query, &format!("{section}\n{}", r.row.text)),
            )
        })
        .collect();
    let scores = {
        let inputs: Vec<RerankInput<'_>> = rows
            .iter()
            .zip(vectors.iter().zip(&bm25s))
            .map(|(r, (v, b))| RerankInput {
                text: &r.row.text,
                vector: *v,
                bm25: *b,
                coverage: coverages.get(&r.row.id).copied().unwrap_or(0.0),
            })
            .collect();
        let cut = kb.reranker.score(query, &inputs)?;
        let order = kb
            .reranker
            .order(query, &inputs)?
            .unwrap_or_else(|| cut.clone());
        (cut, order)
    };
    Ok(rows
        .into_iter()
        .zip(vectors.into_iter().zip(bm25s))
        .zip(scores.0.into_iter().zip(scores.1))
        .map(|((r, (vector, bm25)), (rerank, relevance))| Candidate {
            chunk_id: r.row.id,
            document_id: r.row.document_id,
            ordinal: r.row.ordinal,
            path: r.row.path,
            title: r.row.title,
            section: r.row.section,
            page: r.row.page,
            tier: r.row.tier,
            vector,
            bm25,
            coverage: coverages.get(&r.row.id).copied().unwrap_or(0.0),
            rerank,
            relevance,
            score: relevance,
            paragraph: None,
            text: r.row.text,
        })
        .collect())
}

/// A row with its cosine when the vector search already knows it.
pub struct RowWithScore {
    pub row: ChunkRow,
    pub vector: Option<f32>,
}

impl From<ChunkRow> for RowWithScore {
    fn from(row: ChunkRow) -> Self {
        Self { row, vector: None }
    }
}

impl From<(ChunkRow, f32)> for RowWithScore {
    fn from((row, v): (ChunkRow, f32)) -> Self {
        Self {
            row,
            vector: Some(v),
        }
    }
}

/// Keep candidates whose rerank score reaches `min`.
pub fn drop_below(candidates: Vec<Candidate>, min: f32) -> Vec<Candidate> {
    candidates.into_iter().filter(|c| c.rerank >= min).collect()
}

/// Tier-1 (practical) chunks get `boost` added to their ordering score.
pub fn boost_tier1(mut candidates: Vec<Candidate>, boost: f32) -> Vec<Candidate> {
    for c in &mut candidates {
        c.score = c.relevance + if c.tier == 1 { boost } else { 0.0 };
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    candidates
}

/// At most `max` chunks per document, best first.
pub fn cap_per_source(candidates: Vec<Candidate>, max: usize) -> Vec<Candidate> {
    let mut seen: HashMap<i64, usize> = HashMap::new();
    candidates
        .into_iter()
        .filter(|c| {
            let n = seen.entry(c.document_id).or_insert(0);
            *n += 1;
            *n <= max
        })
        .collect()
}

/// The best `n`.
pub fn take_top(mut candidates: Vec<Candidate>, n: usize) -> Vec<Candidate> {
    candidates.truncate(n);
    candidates
}

/// Chunks of one document with consecutive ordinals become one passage
/// (text in document order; the best chunk's score, section and page);
/// passages best first.
pub fn merge_adjacent(candidates: Vec<Candidate>) -> Vec<Passage> {
    let mut sorted = candidates;
    sorted.sort_by_key(|c| (c.document_id, c.ordinal));
    let mut passages: Vec<(Passage, i64)> = Vec::new();
    for c in sorted {
        if let Some((p, last)) = passages.last_mut() {
            if p.document_id == c.document_id && *last + 1 == c.ordinal {
                p.chunk_ids.push(c.chunk_id);
                p.text.push_str("\n\n");
                p.text.push_str(&c.text);
                if c.score > p.score {
                    // The citation names where the answer most likely is:
                    // the best chunk's section and page.
                    p.score = c.score;
                    p.rerank = c.rerank;
                    if c.section.is_some() {
                        p.section = c.section.clone();
                    }
                    if c.page.is_some() {
                        p.page = c.page;
                    }
                }
                if p.section.is_none() {
                    p.section = c.section.clone();
                }
                *last = c.ordinal;
                continue;
            }
        }
        passages.push((
            Passage {
                chunk_ids: vec![c.chunk_id],
                document_id: c.document_id,
                path: c.path,
                title: c.title,
                section: c.section,
                page: c.page,
                tier: c.tier,
                score: c.score,
                rerank: c.rerank,
                text: c.text,
            },
            c.ordinal,
        ));
    }
    let mut out: Vec<Passage> = passages.into_iter().map(|(p, _)| p).collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: i64, doc: i64, ordinal: i64, tier: u8, rerank: f32) -> Candidate {
        Candidate {
            chunk_id: id,
            document_id: doc,
            ordinal,
            path: format!("/d{doc}"),
            title: format!("D{doc}"),
            section: None,
            page: None,
            tier,
            vector: 0.5,
            bm25: 0.1,
            coverage: 0.5,
            rerank,
            relevance: rerank,
            score: rerank,
            paragraph: None,
            text: format!("chunk {id}"),
        }
    }

    #[test]
    fn exact_references_are_detected() {
        assert_eq!(
            detect_exact("what does \"descale every 200 cups\" mean"),
            Some(Exact::Phrase("descale every 200 cups".into()))
        );
        assert_eq!(
            detect_exact("summarise section 4.2 please"),
            Some(Exact::Section("4.2".into()))
        );
        assert_eq!(
            detect_exact("what is in § 3"),
            Some(Exact::Section("3".into()))
        );
        assert_eq!(
            detect_exact("Chapter 3: what is it about?"),
            Some(Exact::Chapter("3".into()))
        );
        assert_eq!(detect_exact("how do I descale it"), None);
        assert_eq!(
            detect_exact("it's \"ok\""),
            None,
            "too short to be a phrase"
        );
    }

    #[test]
    fn headings_match_numbers_exactly() {
        let s42 = Exact::Section("4.2".into());
        assert!(heading_matches("4.2 Replacing the filter", &s42));
        assert!(heading_matches("Section 4.2 Filters", &s42));
        assert!(!heading_matches("4.21 Other", &s42));
        let c3 = Exact::Chapter("3".into());
        assert!(heading_matches("Chapter 3 Storage", &c3));
        assert!(heading_matches("3 Storage", &c3));
        assert!(!heading_matches("Chapter 30", &c3));
        assert!(!heading_matches("3.1 Shelves", &c3));
    }

    #[test]
    fn post_rerank_steps_in_order() {
        let c = vec![
            cand(1, 1, 0, 2, 0.9),
            cand(2, 1, 1, 2, 0.8),
            cand(3, 1, 2, 2, 0.7),
            cand(4, 2, 5, 1, 0.75),
            cand(5, 3, 0, 3, 0.2),
        ];
        let kept = drop_below(c, 0.3);
        assert_eq!(kept.len(), 4);
        let boosted = boost_tier1(kept, 0.1);
        // Tier 1 at 0.75 + 0.1 passes 0.8 but not 0.9.
        assert_eq!(
            boosted.iter().map(|c| c.chunk_id).collect::<Vec<_>>(),
            vec![1, 4, 2, 3]
        );
        let capped = cap_per_source(boosted, 2);
        assert_eq!(
            capped.iter().map(|c| c.chunk_id).collect::<Vec<_>>(),
            vec![1, 4, 2]
        );
        let passages = merge_adjacent(take_top(capped, 7));
        assert_eq!(passages.len(), 2);
        assert_eq!(passages[0].chunk_ids, vec![1, 2]);
        assert_eq!(passages[0].text, "chunk 1\n\nchunk 2");
        assert_eq!(passages[1].chunk_ids, vec![4]);
    }

    #[test]
    fn a_merged_passage_cites_its_best_chunks_section_and_page() {
        let mut a = cand(1, 1, 3, 3, 0.4);
        a.section = Some("Guide > Topping up".into());
        a.page = Some(1);
        let mut b = cand(2, 1, 4, 3, 0.9);
        b.section = Some("Guide > Annual service".into());
        b.page = Some(2);
        let mut c = cand(3, 1, 5, 3, 0.5);
        c.section = Some("Guide > Warranty".into());
        c.page = Some(3);
        let passages = merge_adjacent(vec![a, b, c]);
        assert_eq!(passages.len(), 1);
        let p = &passages[0];
        assert_eq!(p.chunk_ids, vec![1, 2, 3]);
        assert_eq!(p.text, "chunk 1\n\nchunk 2\n\nchunk 3");
        assert_eq!(p.section.as_deref(), Some("Guide > Annual service"));
        assert_eq!(p.page, Some(2));
        assert_eq!(p.score, 0.9);
    }

    #[test]
    fn filters_take_tags_named_in_the_question() {
        let known = vec!["coffee".to_string(), "garden".to_string()];
        let f = filters_for(
            "how do I water the garden in tier 1",
            &known,
            &SearchOptions::default(),
            &[1, 2, 3],
        );
        assert_eq!(
            f,
            Filters {
                tiers: vec![1],
                tags: vec!["garden".into()]
            }
        );
        let f = filters_for("gardening tips", &known, &SearchOptions::default(), &[1, 2]);
        assert_eq!(
            f,
            Filters {
                tiers: vec![1, 2],
                tags: vec![]
            }
        );
    }
}
