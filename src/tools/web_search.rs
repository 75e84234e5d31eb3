//! `web_search`: live information through the Tavily search API.
//!
//! `POST {base}/search` with `{"query", "max_results": 3, "search_depth":
//! "basic"}` and the key as `Authorization: Bearer …` (Tavily's current
//! scheme; the key is also sent as the body's `api_key`, the scheme older
//! accounts and proxies still expect). The reply's `results[]` carry
//! `title`, `url`, `content`; the top three are returned with their content
//! trimmed, because the model only needs a gist and every extra token is
//! latency on a voice device.

use std::time::Duration;

use serde_json::{json, Value};

use super::http::{one_line, HttpError, JsonHttp};
use super::{Tool, ToolError};

/// Results returned to the model.
pub const MAX_RESULTS: usize = 3;
/// Characters of each result's content kept.
pub const MAX_CONTENT_CHARS: usize = 300;

/// The Tavily-backed search tool.
#[derive(Clone)]
pub struct WebSearch {
    base_url: String,
    api_key: String,
    http: JsonHttp,
}

impl std::fmt::Debug for WebSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("WebSearch")
            .field("base_url", &self.base_url)
            .field("api_key", &"***")
            .field("http", &self.http)
            .finish()
    }
}

impl WebSearch {
    /// `deadline` bounds one search (keep it under the tool timeout).
    pub fn new(base_url: &str, api_key: &str, deadline: Duration) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
            http: JsonHttp::new("Tavily", deadline),
        }
    }

    /// Search and format the top results.
    pub fn search(&self, query: &str) -> Result<String, ToolError> {
        let body = json!({
            "api_key": self.api_key,
            "query": query,
            "max_results": MAX_RESULTS,
            "search_depth": "basic",
            "include_answer": false,
        });
        let reply = self
            .http
            .send(
                "POST",
                &format!("{}/search", self.base_url),
                &[("Authorization", format!("Bearer {}", self.api_key))],
                Some(&body),
            )
            .map_err(|e| match e {
                HttpError::Status {
                    status: 401 | 403, ..
                } => ToolError::Failed(
                    "Web search failed: Tavily refused the API key; check TAVILY_API_KEY.".into(),
                ),
                HttpError::Status {
                    status: 429 | 432 | 433,
                    ..
                } => ToolError::Failed(
                    "Web search failed: the Tavily plan's limit is reached; try again later."
                        .into(),
                ),
                other => ToolError::Failed(format!("Web search failed: {other}.")),
            })?;
        let results = match reply.get("results") {
            Some(Value::Array(r)) => r,
            _ => {
                return Err(ToolError::Failed(
                    "Web search failed: Tavily's reply has no results list.".into(),
                ))
            }
        };
        if results.is_empty() {
            return Ok(format!("No web results found for \"{query}\"."));
        }
        let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let lines: Vec<String> = results
            .iter()
            .take(MAX_RESULTS)
            .enumerate()
            .map(|(i, r)| {
                format!(
                    "{}. {}\n   {}\n   {}",
                    i + 1,
                    one_line(&text(r, "title"), 120),
                    text(r, "url"),
                    one_line(&text(r, "content"), MAX_CONTENT_CHARS)
                )
            })
            .collect();
        Ok(lines.join("\n\n"))
    }
}

impl Tool for WebSearch {
    fn name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        "Search the web for current, up-to-date information: news, prices, weather, \
recent events, facts that may have changed."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to search for"}},
            "required": ["query"]
        })
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        match args.get("query") {
            Some(Value::String(q)) if !q.trim().is_empty() => self.search(q.trim()),
            Some(Value::String(_)) => Err(ToolError::BadArguments("'query' is empty".into())),
            Some(_) => Err(ToolError::BadArguments("'query' must be a string".into())),
            None => Err(ToolError::BadArguments("missing the 'query' field".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_key() {
        let s = WebSearch::new(
            "https://api.tavily.com",
            "tvly-planted-secret",
            Duration::from_secs(1),
        );
        let shown = format!("{s:?}");
        assert!(!shown.contains("tvly-planted-secret"), "{shown}");
        assert!(
            shown.contains("api.tavily.com") && shown.contains("***"),
            "{shown}"
        );
    }
}
