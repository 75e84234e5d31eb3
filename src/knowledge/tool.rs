//! `search_knowledge`: the knowledge base as an agent tool (R-RAG, R-TOOL).
//!
//! The result is the tier-grouped, numbered context plus the instruction
//! to cite `[n]` and to say when the documents do not cover the question.
//! Each call also hands its retrieval (ids, scores, rerank scores,
//! snippets) to the turn that made it ([`ToolOutput::retrieval`]); the
//! turn writes it to `knowledge_retrievals` and its log row with its own id.

use std::sync::Arc;

use serde_json::{json, Value};

use super::retrieve::{search, SearchOptions};
use super::{KnowledgeBase, KnowledgeSettings};
use crate::cancel::CancelToken;
use crate::llm::ChatModel;
use crate::nlu::Embedder;
use crate::store::Store;
use crate::tools::{Tool, ToolError, ToolOutput, ToolRegistry};

pub struct SearchKnowledge {
    kb: Arc<KnowledgeBase>,
}

impl SearchKnowledge {
    pub fn new(kb: Arc<KnowledgeBase>) -> Self {
        Self { kb }
    }
}

impl Tool for SearchKnowledge {
    fn name(&self) -> &str {
        "search_knowledge"
    }

    fn description(&self) -> &str {
        "Search the documents stored on this device (manuals, notes, guides). Returns numbered passages; answer from them citing [n], and say so when they do not cover the question."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The question or keywords. Quote a phrase or name a section (\"section 4.2\") for an exact lookup."},
                "tier": {"type": "integer", "enum": [1, 2, 3], "description": "Only this source tier (1 practical, 2 commentary, 3 other)."}
            },
            "required": ["query"]
        })
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        self.call_output(args).map(|o| o.text)
    }

    fn call_output(&self, args: &Value) -> Result<ToolOutput, ToolError> {
        let query = args["query"]
            .as_str()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| ToolError::BadArguments("query must be a non-empty string".into()))?;
        let mut options = SearchOptions::default();
        if let Some(t) = args["tier"].as_u64().filter(|t| (1..=3).contains(t)) {
            options.tiers = vec![t as u8];
        }
        let retrieval = search(&self.kb, query, &options, &CancelToken::new())
            .map_err(|e| ToolError::Failed(format!("the knowledge search failed: {e:#}")))?;
        Ok(ToolOutput {
            retrieval: Some(retrieval.telemetry()),
            text: retrieval.context.text,
            ..Default::default()
        })
    }
}

/// Offer `search_knowledge` in `registry` when the embedder is loaded and
/// at least one document is ingested (an empty knowledge base would only
/// cost the model a useless call; a service started before the first
/// `earshot ingest` offers it after a restart). The composition root calls
/// this once, while it builds the tool set. `llm` is used for query
/// rewrite when `knowledge.rewrite_query` is on.
pub fn offer(
    registry: &mut ToolRegistry,
    settings: KnowledgeSettings,
    store: &Store,
    embedder: Option<Arc<dyn Embedder>>,
    llm: Arc<dyn ChatModel>,
) {
    let Some(embedder) = embedder else {
        return;
    };
    let documents: i64 = match store
        .with_conn(|c| c.query_row("SELECT COUNT(*) FROM knowledge_documents", [], |r| r.get(0)))
    {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "knowledge base unavailable");
            return;
        }
    };
    if documents == 0 {
        registry.mark_unavailable(
            "search_knowledge",
            "The knowledge base is empty: add documents with `earshot ingest FOLDER`.",
        );
        return;
    }
    let llm = settings.knowledge.rewrite_query.then_some(llm);
    match KnowledgeBase::open(settings, store.clone(), embedder, llm) {
        Ok(kb) => registry.register(Arc::new(SearchKnowledge::new(Arc::new(kb)))),
        Err(e) => tracing::warn!("search_knowledge unavailable: {e:#}"),
    }
}
