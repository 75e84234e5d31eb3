//! The one JSON-over-HTTP helper the cloud tools (Tavily, Notion) share.
//!
//! Why: every cloud tool needs the same bounded request (a deadline below
//! the registry's tool timeout, a body size limit) and the same mapping of
//! failures to a short sentence the model can read — an HTML error page, a
//! timeout or a refused key must never reach the model as a wall of text.
//! The agent and the bounded read are [`crate::http`]'s; this adds the
//! JSON and the per-service sentences.

use std::time::Duration;

use serde_json::Value;

use crate::http::{self as shared, HttpError as SharedError, HttpSettings};

/// Largest response body read.
const MAX_BODY: u64 = 2 * 1024 * 1024;

/// Why a request failed, already phrased for the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HttpError {
    #[error("could not reach {service}: {reason}")]
    Unreachable { service: String, reason: String },
    #[error("{service} did not answer in time")]
    Timeout { service: String },
    /// A non-2xx status; `message` is the API's own error text when it sent
    /// JSON, else a note that it sent something else (e.g. an HTML page).
    #[error("{service} answered HTTP {status}: {message}")]
    Status {
        service: String,
        status: u16,
        code: Option<String>,
        message: String,
    },
    #[error("{service} sent a reply that is not JSON")]
    NotJson { service: String },
}

/// A small blocking JSON client for one service.
#[derive(Clone)]
pub struct JsonHttp {
    service: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for JsonHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonHttp")
            .field("service", &self.service)
            .finish()
    }
}

impl JsonHttp {
    /// `deadline` bounds the whole exchange (connect to last byte).
    pub fn new(service: &str, deadline: Duration) -> Self {
        Self {
            service: service.to_string(),
            agent: HttpSettings::with_deadline(deadline).agent(),
        }
    }

    /// Send `method url` with `headers` and an optional JSON body; the
    /// parsed JSON reply on 2xx. Header values are never logged.
    pub fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, HttpError> {
        let result = match method {
            "GET" => {
                let mut req = self.agent.get(url);
                for (k, v) in headers {
                    req = req.header(*k, v.as_str());
                }
                req.call()
            }
            _ => {
                let mut req = match method {
                    "PATCH" => self.agent.patch(url),
                    _ => self.agent.post(url),
                };
                req = req.header("Content-Type", "application/json");
                for (k, v) in headers {
                    req = req.header(*k, v.as_str());
                }
                let text = body.map(Value::to_string).unwrap_or_else(|| "{}".into());
                req.send(text.as_bytes())
            }
        };
        let response = result.map_err(|e| self.convert(e.into()))?;
        let reply = shared::read_reply(response, MAX_BODY).map_err(|e| self.convert(e))?;
        let status = reply.head.status;
        let parsed: Option<Value> = serde_json::from_slice(&reply.body).ok();
        if !reply.is_success() {
            let (code, message) = match &parsed {
                Some(v) => error_text(v),
                None => (None, "it sent an error page instead of JSON".to_string()),
            };
            return Err(HttpError::Status {
                service: self.service.clone(),
                status,
                code,
                message,
            });
        }
        parsed.ok_or_else(|| HttpError::NotJson {
            service: self.service.clone(),
        })
    }

    /// The shared transport error as this service's sentence.
    fn convert(&self, e: SharedError) -> HttpError {
        let service = self.service.clone();
        match e {
            SharedError::Timeout => HttpError::Timeout { service },
            SharedError::Connect { reason } => HttpError::Unreachable {
                service,
                reason: one_line(&reason, 120),
            },
            SharedError::Interrupted { reason } => HttpError::Unreachable {
                service,
                reason: format!("the connection broke ({reason})"),
            },
            // Larger than any JSON answer we expect: not the JSON we want.
            SharedError::TooLarge { .. } | SharedError::Decode { .. } => {
                HttpError::NotJson { service }
            }
            SharedError::Status {
                status,
                body_excerpt,
                ..
            } => HttpError::Status {
                service,
                status,
                code: None,
                message: body_excerpt,
            },
        }
    }
}

/// The code and message of the common JSON error shapes: Notion's
/// `{"code","message"}`, Tavily's `{"detail":{"error"}}`, OpenAI-style
/// `{"error":{"message"}}`.
fn error_text(v: &Value) -> (Option<String>, String) {
    let code = v.get("code").and_then(Value::as_str).map(str::to_string);
    let message = v
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| v["detail"].get("error").and_then(Value::as_str))
        .or_else(|| v.get("detail").and_then(Value::as_str))
        .or_else(|| v["error"].get("message").and_then(Value::as_str))
        .or_else(|| v.get("error").and_then(Value::as_str))
        .unwrap_or("no details given");
    (code, one_line(message, 200))
}

/// Collapse whitespace and cut to `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::stalling::{start, Stall};
    use serde_json::json;
    use std::time::Instant;

    /// Every cloud tool (web search, Notion, …) goes through `JsonHttp`: a
    /// dead, trickling or rate-limiting API is a tool error within the
    /// deadline (issue 23 point 4).
    #[test]
    fn a_stalled_api_is_an_error_within_the_deadline() {
        for stall in [Stall::Silent, Stall::Trickle, Stall::RetryTomorrow] {
            let http = JsonHttp::new("Test API", Duration::from_millis(800));
            let url = format!("{}/search", start(stall));
            let t = Instant::now();
            let err = http
                .send(
                    "POST",
                    &url,
                    &[("Authorization", "Bearer k".into())],
                    Some(&json!({"q": 1})),
                )
                .unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
            let msg = err.to_string();
            assert!(msg.contains("Test API") || !msg.is_empty(), "{msg}");
            assert!(!msg.contains("Bearer k"), "{msg}");
        }
    }

    #[test]
    fn error_shapes_are_read() {
        let notion = json!({"object":"error","status":400,"code":"validation_error","message":"body failed validation"});
        assert_eq!(
            error_text(&notion),
            (
                Some("validation_error".into()),
                "body failed validation".into()
            )
        );
        let tavily = json!({"detail": {"error": "Unauthorized: missing or invalid API key."}});
        assert_eq!(
            error_text(&tavily).1,
            "Unauthorized: missing or invalid API key."
        );
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
