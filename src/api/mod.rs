//! The local HTTP API with the SSE stream (R-SSE), for companion apps.

use serde::{Deserialize, Serialize};

/// `[api]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Start the API with `earshot run`.
    pub enabled: bool,
    pub bind: String,
    /// Bearer token; required when binding off loopback.
    pub token: String,
    pub max_body_bytes: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bind: "127.0.0.1:8080".into(),
            token: String::new(),
            max_body_bytes: 8 * 1024 * 1024,
        }
    }
}
