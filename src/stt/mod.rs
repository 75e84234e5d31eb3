//! Speech to text: local whisper.cpp first, Groq's Whisper as fallback.

use serde::{Deserialize, Serialize};

/// `[stt]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SttConfig {
    /// local-first | cloud-first | local-only | cloud-only
    pub order: String,
    /// ggml model file under `models_dir`.
    pub whisper_model: String,
    /// `STT_LANGUAGE`
    pub language: String,
    /// `STT_PROMPT`: initial prompt (names, jargon).
    pub prompt: String,
    /// 0 = the cores available.
    pub threads: usize,
    /// 1 = greedy; more = beam search.
    pub beam_size: usize,
    /// `STT_BASE_URL`
    pub cloud_base_url: String,
    /// `GROQ_STT_MODEL`
    pub cloud_model: String,
}

impl Default for SttConfig {
    fn default() -> Self {
        Self {
            order: "local-first".into(),
            whisper_model: "ggml-tiny.en.bin".into(),
            language: "en".into(),
            prompt: String::new(),
            threads: 0,
            beam_size: 1,
            cloud_base_url: "https://api.groq.com/openai/v1".into(),
            cloud_model: "whisper-large-v3".into(),
        }
    }
}
