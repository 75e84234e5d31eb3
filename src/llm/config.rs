//! `[llm]`: the chat endpoint, its models and its limits, owned by the
//! LLM client that reads them.

use serde::{Deserialize, Serialize};

/// The OpenAI-compatible chat endpoint and its models (R-MODEL).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// `LLM_BASE_URL`: Groq by default; llama.cpp's server or Ollama work.
    pub base_url: String,
    /// `GROQ_API_KEY`. Empty is fine for local servers.
    pub api_key: String,
    /// `GROQ_LLM_MODEL`: router fallback, simple, persona, summaries.
    pub model: String,
    /// `GROQ_AGENT_MODEL`: tool calls.
    pub agent_model: String,
    pub temperature: f32,
    pub agent_temperature: f32,
    pub max_completion_tokens: u32,
    pub top_p: f32,
    /// Stream answers token by token (speech starts at the first sentence).
    pub stream: bool,
    pub connect_timeout_secs: u64,
    /// Longest wait for the response head (retries included): a server
    /// that accepts and never answers is a spoken sentence by then.
    pub first_byte_timeout_secs: u64,
    /// Longest silence between two bytes of a response.
    pub read_timeout_secs: u64,
    /// The whole call, retries included: a stream that trickles ends here
    /// (the words so far are kept when no tool call is half-sent).
    pub total_timeout_secs: u64,
    /// A `Retry-After` longer than this is not waited for: the turn says
    /// "try again later" at once.
    pub max_retry_after_secs: u64,
    /// Most characters of answer read; the rest is not read (0 = eight per
    /// `max_completion_tokens`, at least 4096).
    pub max_reply_chars: usize,
    /// Retries after the first attempt on 429/5xx/connection errors.
    pub max_retries: u32,
    /// First backoff; doubles per retry (a `retry-after` header wins).
    pub retry_backoff_ms: u64,
    /// Turns (user + assistant pairs) of history sent with each request.
    pub history_turns: usize,
    /// Which language models answer, in the order tried (`EARSHOT_LLM_ORDER`,
    /// comma-separated): `remote` (the endpoint above, when a key or a
    /// local URL makes it usable) and `local` (the on-device model of
    /// `[llm.local]`). Either may be left out.
    #[serde(deserialize_with = "order_from_list_or_text")]
    pub order: Vec<Source>,
    /// The on-device model (issue 20).
    pub local: LocalConfig,
}

crate::choice! {
    /// A language model earshot may ask (`llm.order`).
    pub enum Source("llm.order entry") {
        Remote = "remote": "the OpenAI-compatible endpoint of [llm] (Groq, a LAN server)",
        Local = "local": "the on-device model of [llm.local] (llama.cpp's llama-server, a child process)",
    }
}

crate::choice! {
    /// How the on-device model runs (`llm.local.backend`).
    pub enum LocalBackend("llm.local.backend") {
        Server = "server": "llama.cpp's llama-server as a supervised child process",
        InProcess = "in-process": "llama.cpp linked into earshot (not in this build: it clashes with whisper.cpp's ggml)",
    }
}

/// `[llm.local]`: the on-device model, found in `models_dir`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalConfig {
    /// The GGUF file, in `models_dir` (scripts/fetch-models.sh puts it there).
    pub model_file: String,
    /// The llama-server program, in `models_dir` unless absolute.
    pub server_program: String,
    /// CPU threads for generation (0 = all cores). 1 by default: ggml's
    /// threads spin at a barrier after every operation, so with whisper,
    /// Piper or anything else busy on a core, 2 threads measured 10x slower
    /// than 1 here (2.4 vs 27 tokens/s).
    pub threads: usize,
    /// Context window in tokens; longer prompts lose their oldest history.
    pub context_size: usize,
    /// `server` (a child llama-server) or `in-process`.
    pub backend: LocalBackend,
    /// Most tokens of one answer (runaway generation stops here).
    pub max_tokens: u32,
    /// Longest wait for the model to load and answer its health check.
    pub load_timeout_secs: u64,
    /// Longest silence mid-answer before the child counts as hung (it is
    /// then killed and restarted on the next request).
    pub read_timeout_secs: u64,
    /// The whole answer, at most (seconds).
    pub total_timeout_secs: u64,
    /// Sampling temperature for the small model (SmolLM2's card suggests
    /// 0.2; at 0.7 it invents more).
    pub temperature: f32,
    /// A spoken (streamed) answer stops after this many sentences: the
    /// small model ignores "2 or 3 short sentences" (0 = no cap).
    pub max_sentences: usize,
    /// Stop the child after this long unused, releasing its memory; it
    /// loads again on the next request (0 = never).
    pub idle_release_secs: u64,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            model_file: "SmolLM2-135M-Instruct.Q4_1.gguf".into(),
            server_program: "llama-server".into(),
            threads: 1,
            context_size: 2048,
            backend: LocalBackend::Server,
            max_tokens: 160,
            load_timeout_secs: 30,
            read_timeout_secs: 15,
            total_timeout_secs: 45,
            temperature: 0.2,
            max_sentences: 3,
            idle_release_secs: 0,
        }
    }
}

/// `order` as a TOML list or, from `EARSHOT_LLM_ORDER`, comma-separated text.
fn order_from_list_or_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<Source>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        List(Vec<String>),
        Text(String),
    }
    let names = match Raw::deserialize(d)? {
        Raw::List(v) => v,
        Raw::Text(t) => t
            .split(',')
            .map(str::to_string)
            .filter(|s| !s.trim().is_empty())
            .collect(),
    };
    names
        .iter()
        .map(|n| n.parse::<Source>().map_err(serde::de::Error::custom))
        .collect()
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.groq.com/openai/v1".into(),
            api_key: String::new(),
            model: "qwen/qwen3.6-27b".into(),
            agent_model: "openai/gpt-oss-20b".into(),
            temperature: 0.7,
            agent_temperature: 0.0,
            max_completion_tokens: 2048,
            top_p: 1.0,
            stream: true,
            connect_timeout_secs: 5,
            first_byte_timeout_secs: 10,
            read_timeout_secs: 20,
            total_timeout_secs: 60,
            max_retry_after_secs: 10,
            max_reply_chars: 0,
            max_retries: 2,
            retry_backoff_ms: 500,
            history_turns: 10,
            order: vec![Source::Remote, Source::Local],
            local: LocalConfig::default(),
        }
    }
}

impl LlmConfig {
    /// The reply cap in characters ([`LlmConfig::max_reply_chars`]).
    pub fn reply_cap(&self) -> usize {
        if self.max_reply_chars > 0 {
            self.max_reply_chars
        } else {
            (self.max_completion_tokens as usize)
                .saturating_mul(8)
                .max(4096)
        }
    }

    /// A cloud URL with no key cannot work; a local server needs none.
    pub fn is_usable(&self) -> bool {
        !self.base_url.trim().is_empty()
            && (!self.api_key.is_empty() || !self.base_url.contains("api.groq.com"))
    }
}

/// Hand-written so the key never reaches a log line.
impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"***")
            .field("model", &self.model)
            .field("agent_model", &self.agent_model)
            .field("temperature", &self.temperature)
            .field("agent_temperature", &self.agent_temperature)
            .field("max_completion_tokens", &self.max_completion_tokens)
            .field("top_p", &self.top_p)
            .field("stream", &self.stream)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .field("first_byte_timeout_secs", &self.first_byte_timeout_secs)
            .field("read_timeout_secs", &self.read_timeout_secs)
            .field("total_timeout_secs", &self.total_timeout_secs)
            .field("max_retry_after_secs", &self.max_retry_after_secs)
            .field("max_reply_chars", &self.max_reply_chars)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff_ms", &self.retry_backoff_ms)
            .field("history_turns", &self.history_turns)
            .field("order", &self.order)
            .field("local", &self.local)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let c = LlmConfig {
            api_key: "gsk_planted_secret_value".into(),
            ..Default::default()
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("planted"), "{shown}");
        assert!(shown.contains("api_key: \"***\""), "{shown}");
    }
}
