//! The local HTTP API with the SSE stream (R-SSE), for companion apps.
//!
//! `earshot serve` (and `earshot run` when `[api] enabled = true`) answers
//! on 127.0.0.1 by default. Every request that talks to the assistant runs
//! the same [`crate::agent::turn::run_turn`] as the voice loop, on a small
//! bounded pool of worker threads so a burst of requests queues or gets a
//! clear 503 instead of starving the device.
//!
//! Every input is bounded before it costs anything: at most
//! `api.max_connections` open connections (503 beyond), header blocks of
//! 16 KiB / 64 fields within `api.header_timeout_ms` (431 / 408), the token
//! and a browser page's `Host`/`Origin`/`Content-Type` checked before the
//! body (401 / 403 / 415), bodies within `api.max_body_bytes` and
//! `api.body_timeout_ms`, texts within `api.max_tts_chars` /
//! `api.max_chat_chars` and recordings within `api.max_voice_secs` (413).
//!
//! Code map: [`server`] binds, accepts within the cap (surviving EMFILE),
//! runs one short-lived thread per connection and feeds the pool;
//! [`wire`] reads heads and bodies within their limits and writes answers;
//! [`guard`] holds the `Host`/`Origin`/JSON-only rules; [`routes`] admits
//! a request from its head, maps method + path to a handler and turns
//! every failure into a JSON `{"error": …}`; [`body`] reads bodies within
//! the size limit and validates JSON fields; [`sse`] streams a turn's
//! events as they happen; [`multipart`] takes the `audio` field out of a
//! form upload; [`speech`] is the seam to speech-to-text and
//! text-to-speech.

pub mod body;
pub mod guard;
pub mod multipart;
pub mod routes;
pub mod server;
pub mod speech;
pub mod sse;
pub mod wire;

use serde::{Deserialize, Serialize};

pub use server::ApiServer;

/// `[api]` (Debug is hand-written: it never prints the token)
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Start the API with `earshot run`.
    pub enabled: bool,
    /// `ADDR:PORT`; anything but loopback requires `token`.
    pub bind: String,
    /// Bearer token; required when binding off loopback. When set, every
    /// route but `/api/health` needs `Authorization: Bearer <token>`.
    pub token: String,
    /// Largest request body accepted; bigger bodies get a 413.
    pub max_body_bytes: usize,
    /// Worker threads running requests; each runs one turn at a time.
    pub workers: usize,
    /// Seconds without an event before the stream sends a `: thinking`
    /// keep-alive comment (proxies drop silent connections).
    pub keepalive_secs: u64,
    /// Open connections at most (reading, queued, running or streaming);
    /// one more is answered 503 and closed, so a flood cannot use up the
    /// process's file descriptors.
    pub max_connections: usize,
    /// Milliseconds a client has to send its whole header block; a slower
    /// one gets a 408 and is closed (slow-connection attacks).
    pub header_timeout_ms: u64,
    /// Milliseconds a client has to send its whole body once the headers
    /// are in; a slower one gets a 408 and is closed.
    pub body_timeout_ms: u64,
    /// Longest `text` POST /api/tts speaks, in characters; more gets a 413
    /// (synthesis takes seconds per sentence and holds a worker).
    pub max_tts_chars: usize,
    /// Longest `text` of POST /api/chat[/stream], in characters; more gets
    /// a 413.
    pub max_chat_chars: usize,
    /// Longest recording POST /api/voice transcribes, in seconds; longer
    /// gets a 413 (speech-to-text time grows with the length).
    pub max_voice_secs: u64,
    /// Host names (no port) accepted in the `Host` header besides the bound
    /// IP address and `localhost`, e.g. `["earshot.local"]`; any other
    /// name gets a 403, which stops DNS-rebinding pages.
    pub allowed_hosts: Vec<String>,
    /// Web origins (`scheme://host[:port]`) allowed to call the API from a
    /// browser, e.g. `["http://localhost:3000"]`; a request carrying any
    /// other `Origin` gets a 403, so a web page cannot drive the API.
    pub allowed_origins: Vec<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bind: "127.0.0.1:8080".into(),
            token: String::new(),
            max_body_bytes: 8 * 1024 * 1024,
            workers: 4,
            keepalive_secs: 10,
            max_connections: 64,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            max_tts_chars: 2_000,
            max_chat_chars: 8_000,
            max_voice_secs: 60,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

impl std::fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exhaustive, so a new field has to be placed here (secret or not).
        let Self {
            enabled,
            bind,
            token: _,
            max_body_bytes,
            workers,
            keepalive_secs,
            max_connections,
            header_timeout_ms,
            body_timeout_ms,
            max_tts_chars,
            max_chat_chars,
            max_voice_secs,
            allowed_hosts,
            allowed_origins,
        } = self;
        f.debug_struct("ApiConfig")
            .field("enabled", enabled)
            .field("bind", bind)
            .field("token", &"***")
            .field("max_body_bytes", max_body_bytes)
            .field("workers", workers)
            .field("keepalive_secs", keepalive_secs)
            .field("max_connections", max_connections)
            .field("header_timeout_ms", header_timeout_ms)
            .field("body_timeout_ms", body_timeout_ms)
            .field("max_tts_chars", max_tts_chars)
            .field("max_chat_chars", max_chat_chars)
            .field("max_voice_secs", max_voice_secs)
            .field("allowed_hosts", allowed_hosts)
            .field("allowed_origins", allowed_origins)
            .finish()
    }
}

/// A request that cannot be served: an HTTP status and a sentence that says
/// what was wrong and how to fix it. Rendered as `{"error": message}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_token() {
        let cfg = ApiConfig {
            token: "planted-api-token".into(),
            ..Default::default()
        };
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("planted-api-token"), "{shown}");
        assert!(
            shown.contains("127.0.0.1:8080") && shown.contains("***"),
            "{shown}"
        );
    }
}
