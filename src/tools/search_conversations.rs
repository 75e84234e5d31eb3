//! `search_conversations`: the user's own past conversations, found by
//! meaning (R-VEC).
//!
//! The tool only formats; the search itself is the [`ConversationSearch`]
//! seam, implemented by the memory module over its vector index (query →
//! embedding → nearest conversation summaries). Keeping the seam here means
//! the tools never depend on how vectors are stored, and the tool is simply
//! not registered on a device without an index.

use std::sync::Arc;

use serde_json::{json, Value};

use super::http::one_line;
use super::{Tool, ToolError};

/// One past conversation that matched, with its similarity score.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationHit {
    pub conversation_id: i64,
    pub title: String,
    /// The conversation's summary (overview).
    pub summary: String,
    /// Similarity in [0, 1] (higher is closer).
    pub score: f32,
    /// When the conversation was last updated (RFC 3339), if known.
    pub updated_at: Option<String>,
}

/// Search a user's conversation summaries by meaning. Implemented by the
/// memory module; must be safe to call from any thread.
pub trait ConversationSearch: Send + Sync {
    /// The `k` closest conversations of `user_id` to `query`, best first.
    fn search(&self, user_id: &str, query: &str, k: usize) -> anyhow::Result<Vec<ConversationHit>>;
}

/// Results returned when the model does not say how many.
pub const DEFAULT_LIMIT: usize = 5;
/// Most results the model may ask for.
pub const MAX_LIMIT: usize = 10;

/// The tool over one search implementation and one user.
pub struct SearchConversations {
    search: Arc<dyn ConversationSearch>,
    user_id: String,
}

impl SearchConversations {
    pub fn new(search: Arc<dyn ConversationSearch>, user_id: impl Into<String>) -> Self {
        Self {
            search,
            user_id: user_id.into(),
        }
    }
}

/// One line per hit: title, summary, score with two decimals.
pub fn format_hits(hits: &[ConversationHit]) -> String {
    if hits.is_empty() {
        return "No matching past conversations found.".into();
    }
    hits.iter()
        .map(|h| {
            let title = if h.title.trim().is_empty() {
                "(untitled)".to_string()
            } else {
                one_line(&h.title, 100)
            };
            let when = h
                .updated_at
                .as_deref()
                .and_then(|t| t.get(..10))
                .map(|d| format!(", {d}"))
                .unwrap_or_default();
            format!(
                "- {title}: {} (score {:.2}{when})",
                one_line(&h.summary, 300),
                h.score
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Tool for SearchConversations {
    fn name(&self) -> &str {
        "search_conversations"
    }

    fn description(&self) -> &str {
        "Search the user's own past conversations with you (what was discussed or decided \
earlier). Not for the web."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the past conversation was about"},
                "limit": {"type": "integer", "description": "How many conversations (1-10, default 5)"}
            },
            "required": ["query"]
        })
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let query = match args.get("query") {
            Some(Value::String(q)) if !q.trim().is_empty() => q.trim().to_string(),
            Some(Value::String(_)) => {
                return Err(ToolError::BadArguments("'query' is empty".into()))
            }
            Some(_) => return Err(ToolError::BadArguments("'query' must be a string".into())),
            None => return Err(ToolError::BadArguments("missing the 'query' field".into())),
        };
        let limit = match args.get("limit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(v) => match v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)) {
                Some(n) => (n as usize).clamp(1, MAX_LIMIT),
                None => {
                    return Err(ToolError::BadArguments(
                        "'limit' must be a whole number".into(),
                    ))
                }
            },
        };
        let hits = self
            .search
            .search(&self.user_id, &query, limit)
            .map_err(|e| {
                ToolError::Failed(format!(
                    "Conversation search failed: {}",
                    one_line(&format!("{e:#}"), 160)
                ))
            })?;
        Ok(format_hits(&hits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<ConversationHit>);
    impl ConversationSearch for Fixed {
        fn search(
            &self,
            user_id: &str,
            _q: &str,
            k: usize,
        ) -> anyhow::Result<Vec<ConversationHit>> {
            if user_id != "user-1" {
                anyhow::bail!("index not built");
            }
            Ok(self.0.iter().take(k).cloned().collect())
        }
    }

    fn hit(id: i64, title: &str, score: f32) -> ConversationHit {
        ConversationHit {
            conversation_id: id,
            title: title.into(),
            summary: format!("about {title}"),
            score,
            updated_at: Some("2026-11-02T10:00:00.000Z".into()),
        }
    }

    #[test]
    fn hits_are_listed_with_scores_and_limits_are_clamped() {
        let search = Arc::new(Fixed(vec![
            hit(1, "Trip to Lisbon", 0.8312),
            hit(2, "", 0.5),
        ]));
        let tool = SearchConversations::new(search.clone(), "user-1");
        let out = tool.call(&json!({"query": "holiday"})).unwrap();
        assert_eq!(
            out,
            "- Trip to Lisbon: about Trip to Lisbon (score 0.83, 2026-11-02)\n- (untitled): about (score 0.50, 2026-11-02)"
        );
        assert_eq!(
            tool.call(&json!({"query": "x", "limit": 0}))
                .unwrap()
                .lines()
                .count(),
            1
        );
        assert!(matches!(
            tool.call(&json!({})),
            Err(ToolError::BadArguments(_))
        ));
        let other = SearchConversations::new(search, "user-2");
        let err = other.call(&json!({"query": "x"})).unwrap_err().to_string();
        assert!(err.contains("index not built"), "{err}");
    }
}
