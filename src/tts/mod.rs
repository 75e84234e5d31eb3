//! Text to speech: Piper (local, default), espeak-ng (last resort), Groq.

use serde::{Deserialize, Serialize};

/// `[tts]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TtsConfig {
    /// Engines in the order tried: piper, espeak, cloud.
    pub order: Vec<String>,
    /// Piper voice (`<name>.onnx` + `.onnx.json` under `models_dir`).
    pub piper_voice: String,
    /// espeak-ng voice name.
    pub espeak_voice: String,
    /// `TTS_BASE_URL`
    pub cloud_base_url: String,
    /// `GROQ_TTS_MODEL`
    pub cloud_model: String,
    /// `TTS_VOICE`
    pub cloud_voice: String,
}

impl Default for TtsConfig {
    fn default() -> Self {
        Self {
            order: vec!["piper".into(), "espeak".into()],
            piper_voice: "en_US-joe-medium".into(),
            espeak_voice: "en-us".into(),
            cloud_base_url: "https://api.groq.com/openai/v1".into(),
            cloud_model: "canopylabs/orpheus-v1-english".into(),
            cloud_voice: "autumn".into(),
        }
    }
}
