//! Groq's speech API (OpenAI-shaped `POST {base}/audio/speech`): Orpheus
//! voices, WAV back. The whole request is bounded by
//! `tts.cloud_timeout_ms`, so a slow cloud costs at most that long before
//! the local engine speaks instead.

use std::time::Duration;

use anyhow::{bail, Result};
use serde_json::json;

use super::{espeak::parse_wav, Synthesizer, TtsConfig, TtsError};
use crate::audio::playback::Clip;
use crate::http::{self, HttpError, HttpSettings};

/// Largest answer we accept (a sentence is a few hundred KB of WAV).
const MAX_BYTES: u64 = 32 * 1024 * 1024;

/// The cloud engine (`cloud` in `tts.order`).
pub struct GroqTts {
    agent: ureq::Agent,
    url: String,
    api_key: String,
    model: String,
    voice: String,
}

impl GroqTts {
    /// Refuses to be built against Groq without a key (every request would
    /// fail); any other base URL (a local server) may need none.
    pub fn new(cfg: &TtsConfig, api_key: &str) -> Result<Self> {
        let base = cfg.cloud_base_url.trim().trim_end_matches('/');
        if base.is_empty() {
            bail!("tts.cloud_base_url (TTS_BASE_URL) is empty");
        }
        if api_key.is_empty() && base.contains("api.groq.com") {
            bail!("no GROQ_API_KEY is set, so Groq speech is off; set it or remove `cloud` from tts.order");
        }
        let timeout = Duration::from_millis(cfg.cloud_timeout_ms.max(100));
        Ok(Self {
            agent: HttpSettings::with_deadline(timeout).agent(),
            url: format!("{base}/audio/speech"),
            api_key: api_key.to_string(),
            model: cfg.cloud_model.clone(),
            voice: cfg.cloud_voice.clone(),
        })
    }
}

impl Synthesizer for GroqTts {
    fn name(&self) -> &'static str {
        "cloud"
    }

    fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
        let body = json!({
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": "wav",
        })
        .to_string();
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "audio/wav");
        if !self.api_key.is_empty() {
            request = request.header("Authorization", format!("Bearer {}", self.api_key));
        }
        let response = request
            .send(body.as_bytes())
            .map_err(|e| match HttpError::from(e) {
                HttpError::Timeout => TtsError::Timeout(format!(
                    "the speech service at {} timed out before answering",
                    self.url
                )),
                HttpError::Connect { reason } => TtsError::EngineUnavailable(format!(
                    "cannot reach the speech service at {}: {reason}",
                    self.url
                )),
                other => TtsError::EngineUnavailable(format!(
                    "cannot reach the speech service at {}: {other}",
                    self.url
                )),
            })?;
        let reply = http::read_reply(response, MAX_BYTES).map_err(|e| match e {
            HttpError::Timeout => TtsError::Timeout(format!(
                "the speech service at {} timed out mid-answer",
                self.url
            )),
            HttpError::Interrupted { reason } => TtsError::Failed(format!(
                "reading the speech service's answer failed: {reason}"
            )),
            other => TtsError::Failed(format!(
                "reading the speech service's answer failed: {other}"
            )),
        })?;
        let status = reply.head.status;
        let content_type = reply.head.content_type.to_ascii_lowercase();
        let bytes = reply.body;
        if !(200..300).contains(&status) {
            let detail = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{} bytes of {content_type}", bytes.len()));
            return Err(TtsError::Failed(format!(
                "the speech service answered HTTP {status}: {detail}"
            )));
        }
        if content_type.contains("html") || content_type.contains("json") {
            return Err(TtsError::Failed(format!(
                "the speech service sent {content_type} instead of audio"
            )));
        }
        parse_wav(&bytes)
            .map_err(|e| TtsError::Failed(format!("the speech service's audio is unreadable: {e}")))
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::*;
    use crate::http::stalling::{start, Stall};
    use std::time::Instant;

    /// A dead, a trickling and a rate-limiting server each end in a clear
    /// error within the configured deadline (issue 23 point 4).
    #[test]
    fn a_stalled_server_is_an_error_within_the_deadline() {
        for stall in [Stall::Silent, Stall::Trickle, Stall::RetryTomorrow] {
            let cfg = TtsConfig {
                cloud_base_url: start(stall),
                cloud_timeout_ms: 800,
                ..TtsConfig::default()
            };
            let mut tts = GroqTts::new(&cfg, "key").unwrap();
            let t = Instant::now();
            let err = tts.synthesize("Hello there.").unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
            let msg = err.to_string();
            assert!(!msg.is_empty() && !msg.contains('\n'), "{msg}");
        }
    }
}
