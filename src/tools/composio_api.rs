//! Composio's REST API v3.1 (Tool Router), exactly as the agent uses it:
//! `x-api-key` on every request; a session per user made lazily with
//! `POST /api/v3.1/tool_router/session` and kept in the state database
//! until Composio rejects it (then made once again); `search`, `execute`
//! and `link` under `/api/v3.1/tool_router/session/{id}/…`; a tool's full
//! schema from `GET /api/v3.1/tools/{slug}`.
//!
//! Every failure is one sentence (a refused key, a rate limit with its
//! wait, an HTML or cut-short reply, a slow server); a reply is read
//! within a byte limit and a deadline, so a huge or stalled answer costs
//! bounded memory and time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::OptionalExtension;
use serde_json::{json, Value};

use super::composio::ComposioConfig;
use crate::http::{self as shared, HttpError as SharedError, HttpSettings};
use crate::store::Store;

/// Largest reply read (a bigger one is refused, never buffered whole).
pub const MAX_REPLY_BYTES: u64 = 1024 * 1024;

/// Longest `Retry-After` waited for once before giving up with a sentence.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

/// Why a Composio request failed, phrased for the model (and a person).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ComposioError {
    #[error("Composio refused the API key; check COMPOSIO_API_KEY.")]
    KeyRefused,
    #[error("Composio is limiting requests; try again in {0} seconds.")]
    RateLimited(u64),
    #[error("Composio did not answer in time.")]
    Timeout,
    #[error("I couldn't reach Composio at {url}: {reason}.")]
    Unreachable { url: String, reason: String },
    #[error("Composio sent a reply that could not be read ({0}).")]
    Unreadable(String),
    /// A non-2xx reply with Composio's own message (and its fix, if any).
    #[error("Composio answered HTTP {status}: {message}")]
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("{0}")]
    Store(String),
}

impl ComposioError {
    /// Whether this says the stored session is no longer valid.
    fn rejects_session(&self) -> bool {
        match self {
            ComposioError::KeyRefused => true,
            ComposioError::Status {
                status: 404 | 410, ..
            } => true,
            ComposioError::Status {
                status: 400 | 403,
                message,
                ..
            } => {
                let m = message.to_lowercase();
                m.contains("session") && !no_active_connection(&m)
            }
            _ => false,
        }
    }
}

/// Whether an error text is Composio's "the account is not connected".
pub fn no_active_connection(text: &str) -> bool {
    let t = text.to_lowercase();
    t.contains("no active connection")
        || t.contains("noactiveconnection")
        || t.contains("no_active_connection")
        || t.contains("no connected account")
}

/// The client: one per registry, cheap to clone.
#[derive(Clone)]
pub struct ComposioApi {
    cfg: Arc<ComposioConfig>,
    user_id: String,
    /// Where the session is kept; `None` for doctor's one-off probe.
    store: Option<Store>,
    agent: ureq::Agent,
    /// slug → required argument names (fetched schemas are kept).
    schemas: Arc<Mutex<HashMap<String, Vec<String>>>>,
}

impl std::fmt::Debug for ComposioApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComposioApi")
            .field("cfg", &self.cfg)
            .field("user_id", &self.user_id)
            .finish()
    }
}

impl ComposioApi {
    pub fn new(cfg: &ComposioConfig, user_id: &str, store: Store) -> Self {
        Self {
            agent: HttpSettings::with_deadline(Duration::from_millis(cfg.timeout_ms.max(100)))
                .agent(),
            cfg: Arc::new(cfg.clone()),
            user_id: user_id.to_string(),
            store: Some(store),
            schemas: Arc::default(),
        }
    }

    /// Doctor: can a session be made with this key at this URL? Nothing
    /// is stored. The new session's id on success.
    pub fn probe(cfg: &ComposioConfig, user_id: &str) -> Result<String, ComposioError> {
        Self {
            agent: HttpSettings::with_deadline(Duration::from_millis(cfg.timeout_ms.max(100)))
                .agent(),
            cfg: Arc::new(cfg.clone()),
            user_id: user_id.to_string(),
            store: None,
            schemas: Arc::default(),
        }
        .create_session()
    }

    pub fn config(&self) -> &ComposioConfig {
        &self.cfg
    }

    /// The state database (always there outside doctor's probe).
    pub fn store(&self) -> Result<&Store, ComposioError> {
        self.store
            .as_ref()
            .ok_or_else(|| ComposioError::Store("no state database".into()))
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    fn base(&self) -> &str {
        self.cfg.base_url.trim().trim_end_matches('/')
    }

    /// Which server and toolkits a stored session belongs to.
    fn scope(&self) -> String {
        format!("{} {}", self.base(), self.cfg.toolkit_list().join(","))
    }

    /// One request; a short `Retry-After` is waited once.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ComposioError> {
        match self.request_once(method, path, body) {
            Err(ComposioError::Status {
                status: 429,
                retry_after: Some(wait),
                ..
            }) if wait <= MAX_RETRY_WAIT => {
                std::thread::sleep(wait);
                self.request_once(method, path, body)
            }
            other => other,
        }
    }

    fn request_once(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ComposioError> {
        let url = format!("{}{path}", self.base());
        let key = self.cfg.api_key.trim();
        let result = if method == "GET" {
            self.agent
                .get(&url)
                .header("x-api-key", key)
                .header("Accept", "application/json")
                .call()
        } else {
            let text = body.map(Value::to_string).unwrap_or_else(|| "{}".into());
            self.agent
                .post(&url)
                .header("x-api-key", key)
                .header("Accept", "application/json")
                .header("Content-Type", "application/json")
                .send(text.as_bytes())
        };
        let response = result.map_err(|e| self.transport(e.into()))?;
        let reply = shared::read_reply(response, MAX_REPLY_BYTES).map_err(|e| self.transport(e))?;
        let status = reply.head.status;
        let parsed: Option<Value> = serde_json::from_slice(&reply.body).ok();
        if !reply.is_success() {
            if status == 401 {
                return Err(ComposioError::KeyRefused);
            }
            let message = match &parsed {
                Some(v) => error_sentence(v),
                None => shared::describe_error_body(&String::from_utf8_lossy(&reply.body)),
            };
            if status == 429 {
                let wait = reply.head.retry_after.unwrap_or(Duration::from_secs(30));
                if wait > MAX_RETRY_WAIT {
                    return Err(ComposioError::RateLimited(wait.as_secs().max(1)));
                }
            }
            return Err(ComposioError::Status {
                status,
                message,
                retry_after: reply.head.retry_after,
            });
        }
        match parsed {
            Some(v) if v.is_object() => Ok(v),
            Some(_) => Err(ComposioError::Unreadable("not a JSON object".into())),
            None => {
                let text = String::from_utf8_lossy(&reply.body);
                let t = text.trim_start();
                Err(ComposioError::Unreadable(if t.starts_with('<') {
                    "an HTML page instead of JSON".into()
                } else if t.is_empty() {
                    "an empty body".into()
                } else {
                    "JSON that is cut short or malformed".into()
                }))
            }
        }
    }

    fn transport(&self, e: SharedError) -> ComposioError {
        match e {
            SharedError::Timeout => ComposioError::Timeout,
            SharedError::Connect { reason } => ComposioError::Unreachable {
                url: self.base().to_string(),
                reason: super::http::one_line(&reason, 120),
            },
            SharedError::Interrupted { reason } => ComposioError::Unreadable(format!(
                "the connection broke: {}",
                super::http::one_line(&reason, 80)
            )),
            SharedError::TooLarge { limit } => {
                ComposioError::Unreadable(format!("larger than {} KB", limit / 1024))
            }
            SharedError::Decode { reason } => ComposioError::Unreadable(reason),
            SharedError::Status {
                status,
                retry_after,
                body_excerpt,
            } => ComposioError::Status {
                status,
                message: body_excerpt,
                retry_after,
            },
        }
    }

    /// The stored session, or a new one (stored).
    fn session(&self, fresh: bool) -> Result<String, ComposioError> {
        let scope = self.scope();
        if !fresh {
            let stored: Option<String> = self
                .store()?
                .with_conn(|c| {
                    c.query_row(
                        "SELECT session_id FROM composio_sessions WHERE user_id = ?1 AND scope = ?2",
                        rusqlite::params![self.user_id, scope],
                        |r| r.get(0),
                    )
                    .optional()
                })
                .map_err(|e| ComposioError::Store(e.to_string()))?;
            if let Some(id) = stored {
                return Ok(id);
            }
        }
        let id = self.create_session()?;
        self.store()?
            .with_conn(|c| {
                c.execute(
                    "INSERT INTO composio_sessions (user_id, scope, session_id, created_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (user_id, scope) DO UPDATE SET session_id = excluded.session_id, created_at = excluded.created_at",
                    rusqlite::params![self.user_id, scope, id, now()],
                )
            })
            .map_err(|e| ComposioError::Store(e.to_string()))?;
        Ok(id)
    }

    /// `POST /api/v3.1/tool_router/session` → its `session_id`.
    pub fn create_session(&self) -> Result<String, ComposioError> {
        let reply = self.request(
            "POST",
            "/api/v3.1/tool_router/session",
            Some(&json!({
                "user_id": self.user_id,
                "toolkits": {"enable": self.cfg.toolkit_list()},
                "workbench": {"enable": false},
            })),
        )?;
        reply
            .get("session_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 200 && !s.contains(['/', '?', '#']))
            .map(str::to_string)
            .ok_or_else(|| ComposioError::Unreadable("the session reply has no session_id".into()))
    }

    /// `POST …/session/{id}/{action}`, with the session made or remade as
    /// needed (once).
    pub fn session_call(&self, action: &str, body: &Value) -> Result<Value, ComposioError> {
        let id = self.session(false)?;
        let path = |id: &str| format!("/api/v3.1/tool_router/session/{id}/{action}");
        match self.request("POST", &path(&id), Some(body)) {
            Err(e) if e.rejects_session() => {
                tracing::info!("Composio rejected the stored session; creating a new one");
                let id = self.session(true)?;
                self.request("POST", &path(&id), Some(body))
            }
            other => other,
        }
    }

    /// Required argument names of `slug` from `GET /api/v3.1/tools/{slug}`
    /// (`input_parameters`), kept once fetched; empty when unknown.
    pub fn required_of(&self, slug: &str) -> Vec<String> {
        if let Ok(cache) = self.schemas.lock() {
            if let Some(known) = cache.get(slug) {
                return known.clone();
            }
        }
        if slug.is_empty()
            || !slug
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Vec::new();
        }
        let required = match self.request("GET", &format!("/api/v3.1/tools/{slug}"), None) {
            Ok(tool) => required_names(tool.get("input_parameters")),
            Err(_) => return Vec::new(),
        };
        if let Ok(mut cache) = self.schemas.lock() {
            cache.insert(slug.to_string(), required.clone());
        }
        required
    }
}

/// The `required` list of a JSON schema.
pub fn required_names(schema: Option<&Value>) -> Vec<String> {
    schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .take(20)
                .map(|s| super::http::one_line(s, 60))
                .collect()
        })
        .unwrap_or_default()
}

/// Composio's error object `{"error": {"message", "status", "request_id",
/// "suggested_fix"}}` (or a plain `error`/`message` string) as one line.
pub fn error_sentence(v: &Value) -> String {
    let error = v.get("error").unwrap_or(v);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .or_else(|| v.get("message").and_then(Value::as_str))
        .unwrap_or("no details given");
    let mut out = super::http::one_line(message, 200);
    if let Some(fix) = error.get("suggested_fix").and_then(Value::as_str) {
        let fix = super::http::one_line(fix, 150);
        if !fix.is_empty() {
            out = format!("{} ({fix})", out.trim_end_matches('.'));
        }
    }
    out
}

/// Now, RFC 3339 UTC.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_objects_become_one_line() {
        let v = json!({"error": {"message": "Tool GMAIL_X not found", "status": 404, "request_id": "r1", "suggested_fix": "Search for the tool first."}});
        assert_eq!(
            error_sentence(&v),
            "Tool GMAIL_X not found (Search for the tool first.)"
        );
        assert_eq!(error_sentence(&json!({"error": "boom"})), "boom");
        assert!(no_active_connection(
            "No active connection found for toolkit gmail"
        ));
        assert!(!ComposioError::Status {
            status: 400,
            message: "No active connection for session user".into(),
            retry_after: None
        }
        .rejects_session());
        assert!(ComposioError::Status {
            status: 404,
            message: "Session not found".into(),
            retry_after: None
        }
        .rejects_session());
    }
}
