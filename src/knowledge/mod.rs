//! The local knowledge base (R-RAG): documents the user drops on the
//! device (txt, md, pdf) become chunks with embeddings, and questions are
//! answered from them with numbered citations.
//!
//! The data flows in the order of the files:
//! [`loader`] (bytes → text, one document at a time, bounded) →
//! [`analysis`] (tier, tags, chunking strategy; LLM or heuristics, written
//! to a reviewable plan) → [`splitter`] (by section / by paragraph) →
//! [`store`] (one transaction per document: chunks, FTS, vectors) — and for
//! a question: [`retrieve`] (rewrite, exact match, filters, vector top 30,
//! [`rerank`], tier boost, per-source cap, merge) → [`context`] (grouped by
//! tier, numbered citations). [`tool`] offers it to the agent as
//! `search_knowledge`; [`eval`] measures it against labels.
//!
//! Architecture invariant: nothing here knows about turns or the agent;
//! the only link to the turn log is the retrieval the tool hands back with
//! its text (`ToolOutput::retrieval`), which the turn that called it saves
//! to `knowledge_retrievals` with its own id (migrations 7 and 8).

pub mod analysis;
pub mod bm25;
pub mod brevity;
pub mod context;
pub mod eval;
pub mod ingest;
pub mod loader;
pub mod paragraph;
pub mod pdf;
pub mod pdf_headings;
pub mod rerank;
pub mod retrieve;
pub mod splitter;
pub mod store;
pub mod tool;

use std::sync::Arc;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::llm::ChatModel;
use crate::nlu::Embedder;
use crate::paths::Paths;
use crate::store::vector::VectorIndex;
use crate::store::Store;

/// The vector collection (and usearch file name) of knowledge chunks.
pub const COLLECTION: &str = "knowledge";

/// `[knowledge]`: ingestion and retrieval settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KnowledgeConfig {
    /// Tiers searched by default (1 practical, 2 commentary, 3 other). The
    /// seed searched tiers 1 and 2 only; a device without LLM analysis
    /// files everything as tier 3, so all three are searched by default.
    pub allowed_tiers: Vec<u8>,
    /// Vector search candidates (seed: 30).
    pub vector_top_k: usize,
    /// Chunks kept after reranking (seed: 7).
    pub rerank_top_n: usize,
    /// Reranked chunks scoring below this are dropped (seed: 0.3).
    pub min_score: f32,
    /// Most chunks taken from one document (seed: 2; 3 since issue 19: a
    /// question about one long manual then gets its three best passages).
    pub max_per_source: usize,
    /// Added to a tier-1 chunk's score when ordering (seed: "boost tier 1").
    pub tier1_boost: f32,
    /// The first this many reranked candidates are read again paragraph by
    /// paragraph and reordered among themselves by their best paragraph
    /// ([`paragraph`]); 0 = off. Only with the fusion reranker.
    pub paragraph_top_k: usize,
    /// Ask the LLM to rewrite the query (translate to the corpus language,
    /// expand) before searching. Off by default: it costs a round trip.
    pub rewrite_query: bool,
    /// Ask the LLM to analyse each document at ingest when one is usable;
    /// otherwise (or when it fails) heuristics decide.
    pub analyse_with_llm: bool,
    /// Pause between two LLM analysis calls (seed: 10 s), for rate limits.
    pub llm_pause_ms: u64,
    /// Characters of a document sent to the LLM for analysis.
    pub analysis_chars: usize,
    /// Files larger than this are refused (bounded memory per document).
    pub max_file_mb: u64,
    /// Target chunk size in characters.
    pub chunk_chars: usize,
    /// Cross-encoder under `models_dir`; used when present, else the
    /// calibrated BM25 + vector fusion (see [`rerank`]).
    pub reranker_model: String,
    /// Its tokenizer.json under `models_dir` (pair encoding).
    pub reranker_tokenizer: String,
    /// Where `earshot ingest --plan` writes the analysis for review; empty
    /// = `<state_dir>/knowledge-plan.json`.
    pub plan_file: String,
    /// The program that reads PDFs (poppler's pdftotext, Debian
    /// `poppler-utils`); see `knowledge::pdf` for why.
    pub pdf_program: String,
    /// A PDF taking longer than this to read is refused (a PDF bomb).
    pub pdf_timeout_s: u64,
    /// Memory the PDF reader may take per file, MB (a decompression bomb
    /// fails here instead of taking the device's memory).
    pub pdf_memory_mb: u64,
}

impl Default for KnowledgeConfig {
    fn default() -> Self {
        Self {
            allowed_tiers: vec![1, 2, 3],
            vector_top_k: 30,
            rerank_top_n: 7,
            min_score: 0.3,
            max_per_source: 3,
            tier1_boost: 0.1,
            paragraph_top_k: 3,
            rewrite_query: false,
            analyse_with_llm: true,
            llm_pause_ms: 10_000,
            analysis_chars: 12_000,
            max_file_mb: 20,
            chunk_chars: 700,
            reranker_model: "reranker.onnx".into(),
            reranker_tokenizer: "reranker-tokenizer.json".into(),
            plan_file: String::new(),
            pdf_program: pdf::PROGRAM.into(),
            pdf_timeout_s: 120,
            pdf_memory_mb: 1024,
        }
    }
}

impl KnowledgeConfig {
    /// How the PDF reader may run.
    pub fn pdf_limits(&self) -> pdf::PdfLimits {
        pdf::PdfLimits {
            program: self.pdf_program.clone(),
            timeout: std::time::Duration::from_secs(self.pdf_timeout_s.max(1)),
            memory_mb: self.pdf_memory_mb.max(64),
            max_text_mb: self.max_file_mb.saturating_mul(4).max(16),
        }
    }

    /// The plan file for this config.
    pub fn plan_path(&self, paths: &Paths) -> std::path::PathBuf {
        if self.plan_file.trim().is_empty() {
            paths.state_dir.join("knowledge-plan.json")
        } else {
            std::path::PathBuf::from(self.plan_file.trim())
        }
    }
}

/// What the knowledge base needs beside its own section: where files
/// live, whose data it is, the model for query rewrite and the ONNX thread
/// count (`nlu.threads`) for the cross-encoder.
#[derive(Debug, Clone)]
pub struct KnowledgeSettings {
    pub knowledge: KnowledgeConfig,
    pub paths: Paths,
    pub user_id: String,
    /// The LLM model asked to rewrite queries (`llm.model`).
    pub rewrite_model: String,
    pub threads: usize,
}

/// Everything a search needs, built once (embedder, index, reranker).
pub struct KnowledgeBase {
    pub settings: KnowledgeSettings,
    pub store: Store,
    pub embedder: Arc<dyn Embedder>,
    pub index: VectorIndex,
    pub reranker: Box<dyn rerank::Reranker>,
    /// For query rewrite (only when `rewrite_query` is on).
    pub llm: Option<Arc<dyn ChatModel>>,
}

impl KnowledgeBase {
    /// Open the knowledge collection's vector index and pick the reranker.
    pub fn open(
        settings: KnowledgeSettings,
        store: Store,
        embedder: Arc<dyn Embedder>,
        llm: Option<Arc<dyn ChatModel>>,
    ) -> Result<KnowledgeBase> {
        let index = VectorIndex::open(
            &store,
            &settings.paths.index_dir(),
            COLLECTION,
            embedder.dims(),
            &embedder.model_id(),
        )
        .context("cannot open the knowledge index")?;
        let reranker = rerank::choose(&settings.knowledge, &settings.paths, settings.threads);
        Ok(KnowledgeBase {
            settings,
            store,
            embedder,
            index,
            reranker,
            llm,
        })
    }

    /// Open on its own (CLI commands): opens the database and loads the
    /// embedder.
    pub fn standalone(
        settings: KnowledgeSettings,
        nlu: &crate::nlu::NluConfig,
        llm: Option<Arc<dyn ChatModel>>,
    ) -> Result<KnowledgeBase> {
        let store = Store::open(&settings.paths.database_path())?;
        let embedder = crate::nlu::load_embedder(nlu, &settings.paths)
            .context("the knowledge base needs the on-device embedder")?;
        Self::open(settings, store, embedder, llm)
    }
}
