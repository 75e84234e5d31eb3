//! Chat with an LLM over the OpenAI chat-completions wire format.
//!
//! One client ([`openai::OpenAiClient`]) serves Groq, a local llama.cpp
//! server and Ollama: provider differences are data (base URL, model
//! names), not copies of the client. The seam is [`ChatModel`].

mod config;
pub mod failover;
pub mod local;
pub mod openai;
pub mod speculate;
pub mod sse;
pub mod think;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cancel::CancelToken;

pub use config::{LlmConfig, LocalBackend, LocalConfig, Source};

/// A message in the chat-completions format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    fn plain(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain("system", content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain("assistant", content)
    }
    /// The assistant's turn that asked for tool calls.
    pub fn assistant_tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            role: "assistant".into(),
            content,
            tool_calls: calls,
            tool_call_id: None,
        }
    }
    /// A tool's result, answering one call.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: "tool".into(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
}

/// One function call the model asked for. `arguments` is the raw JSON text
/// the model produced (it may be malformed; the tool layer checks it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl Serialize for ToolCall {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        json!({
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        })
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(ToolCall {
            id: v["id"].as_str().unwrap_or_default().to_string(),
            name: v["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            arguments: match &v["function"]["arguments"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            },
        })
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl ToolSpec {
    pub fn to_json(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// One chat-completions request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub temperature: f32,
    pub max_completion_tokens: u32,
    pub top_p: f32,
    pub tools: Vec<ToolSpec>,
    pub stream: bool,
}

impl ChatRequest {
    /// The JSON body sent to `/chat/completions`.
    pub fn to_json(&self) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": self.messages,
            "temperature": short_float(self.temperature),
            "max_completion_tokens": self.max_completion_tokens,
            "top_p": short_float(self.top_p),
            "stream": self.stream,
        });
        if !self.tools.is_empty() {
            body["tools"] = Value::Array(self.tools.iter().map(ToolSpec::to_json).collect());
            body["tool_choice"] = json!("auto");
        }
        body
    }
}

/// An f32 setting as the JSON number a user wrote (0.7, not
/// 0.699999988079071): the shortest decimal that round-trips the f32.
fn short_float(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// What the model answered (think blocks already removed from `content`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub model: String,
    /// Milliseconds from sending the request to the first visible token.
    pub first_token_ms: Option<f64>,
    /// How long before the turn asked this request had been sent: a
    /// request begun early and adopted ([`speculate`]); `None` otherwise.
    pub begun_early_ms: Option<f64>,
}

/// Why a chat request failed. Callers branch on these (retry, fall back,
/// retry `tool_use_failed`); [`LlmError::user_sentence`] is what is said.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    #[error("no language model is configured: {0}")]
    NotConfigured(String),
    #[error("cannot reach the language model at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the language model did not answer in time")]
    Timeout,
    #[error("the language model is rate limited")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the language model refused the API key (HTTP {status})")]
    Unauthorized { status: u16 },
    #[error("the language model rejected the request (HTTP {status}{}): {message}", code.as_deref().map(|c| format!(", {c}")).unwrap_or_default())]
    BadRequest {
        status: u16,
        code: Option<String>,
        message: String,
    },
    #[error("the language model server failed (HTTP {status})")]
    Server { status: u16 },
    #[error("the language model sent something unreadable: {0}")]
    Protocol(String),
    /// The server put an `error` object in its reply or stream (no HTTP
    /// error status): it gave up mid-answer.
    #[error("the language model stopped with an error{}: {message}", code.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    InReply {
        code: Option<String>,
        message: String,
    },
    #[error("cancelled")]
    Cancelled,
    /// The on-device model could not load or failed mid-answer (its
    /// server is restarted on the next request).
    #[error("the on-device language model failed: {0}")]
    Local(String),
}

impl LlmError {
    /// Worth retrying with backoff: 429, 5xx, connection errors, timeouts.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::Unreachable { .. }
                | LlmError::Timeout
                | LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::InReply { .. }
                | LlmError::Local(_)
        )
    }

    /// Groq's transient "the model produced a malformed tool call".
    pub fn is_tool_use_failed(&self) -> bool {
        matches!(self, LlmError::BadRequest { code: Some(c), .. } if c == "tool_use_failed")
    }

    /// One sentence a user understands, with the fix where there is one.
    pub fn user_sentence(&self) -> String {
        match self {
            LlmError::NotConfigured(fix) => format!(
                "I need a language model for that, and none is configured. {fix}"
            ),
            LlmError::Unreachable { url, .. } => format!(
                "I can't reach the language model at {url}. Check the network or set LLM_BASE_URL to a server that is running."
            ),
            LlmError::Timeout => {
                "The language model took too long to answer. Please try again in a moment.".into()
            }
            LlmError::RateLimited { .. } => {
                "The language model is busy right now (rate limited). Please try again in a minute.".into()
            }
            LlmError::Unauthorized { .. } => {
                "The language model refused my API key. Check GROQ_API_KEY.".into()
            }
            LlmError::BadRequest { message, .. } => format!(
                "The language model rejected the request: {}. Check the model names in the config.",
                truncate(message, 160)
            ),
            LlmError::Server { status } => format!(
                "The language model server had a problem (HTTP {status}). Please try again shortly."
            ),
            LlmError::Protocol(_) => {
                "The language model sent a reply I couldn't read. Please try again.".into()
            }
            LlmError::InReply { .. } => {
                "The language model stopped with an error partway through. Please try again.".into()
            }
            LlmError::Cancelled => "Okay, stopped.".into(),
            LlmError::Local(_) => {
                "My on-device language model failed. Please try again in a moment; if it keeps failing, run earshot doctor.".into()
            }
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// The chat seam. `on_token` receives visible text as it arrives (think
/// blocks removed); streaming or not is the request's choice.
pub trait ChatModel: Send + Sync {
    fn chat(
        &self,
        request: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<ChatResponse, LlmError>;

    /// Whether this model can be used at all (e.g. a key is configured).
    fn check_configured(&self) -> Result<(), LlmError> {
        Ok(())
    }

    /// Whether a request with tools can be answered with tool calls (the
    /// on-device model cannot; the agent then answers without tools).
    fn can_use_tools(&self) -> bool {
        true
    }

    /// Whether answering computes on this device's own cores (the
    /// on-device model), so a request begun on a guess would take CPU
    /// from live speech recognition. A remote model only waits.
    fn computes_here(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_messages_serialise_in_openai_shape() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "calculator".into(),
            arguments: "{\"expression\":\"2+2\"}".into(),
        };
        let m = ChatMessage::assistant_tool_calls(None, vec![call.clone()]);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["role"], "assistant");
        assert_eq!(v["tool_calls"][0]["type"], "function");
        assert_eq!(v["tool_calls"][0]["function"]["name"], "calculator");
        assert_eq!(
            v["tool_calls"][0]["function"]["arguments"],
            "{\"expression\":\"2+2\"}"
        );
        let back: ToolCall = serde_json::from_value(v["tool_calls"][0].clone()).unwrap();
        assert_eq!(back, call);
        let r = serde_json::to_value(ChatMessage::tool_result("call_1", "4")).unwrap();
        assert_eq!(
            r,
            json!({"role":"tool","content":"4","tool_call_id":"call_1"})
        );
    }

    #[test]
    fn errors_have_one_line_sentences() {
        let errors = [
            LlmError::NotConfigured("Set GROQ_API_KEY.".into()),
            LlmError::Unreachable {
                url: "http://x".into(),
                reason: "refused".into(),
            },
            LlmError::Timeout,
            LlmError::RateLimited { retry_after: None },
            LlmError::Unauthorized { status: 401 },
            LlmError::BadRequest {
                status: 400,
                code: None,
                message: "bad\nthing".into(),
            },
            LlmError::Server { status: 503 },
            LlmError::Protocol("x".into()),
            LlmError::Local("crashed".into()),
        ];
        for e in errors {
            let s = e.user_sentence();
            assert!(!s.is_empty() && s.ends_with('.'), "{s}");
        }
        assert!(LlmError::Server { status: 500 }.is_retryable());
        assert!(!LlmError::Unauthorized { status: 401 }.is_retryable());
        assert!(LlmError::BadRequest {
            status: 400,
            code: Some("tool_use_failed".into()),
            message: String::new()
        }
        .is_tool_use_failed());
    }
}
