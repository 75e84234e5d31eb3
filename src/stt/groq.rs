//! Cloud STT: Groq's OpenAI-compatible `/audio/transcriptions` endpoint
//! (`whisper-large-v3`, temperature 0, JSON answer), used as the fallback
//! (or first choice, by `stt.order`).
//!
//! The body is a hand-built `multipart/form-data` with the utterance as a
//! 16 kHz mono WAV: ureq has no multipart helper and the format is four
//! fields. The key is sent only in the `Authorization` header and never
//! logged.

use std::time::{Duration, Instant};

use super::{text, SttConfig, SttError, SttTimings, Transcriber, Transcript};
use crate::audio::SAMPLE_RATE;
use crate::http::{self, HttpError, HttpSettings};

/// The Groq (or any OpenAI-compatible) transcription client.
pub struct GroqStt {
    agent: ureq::Agent,
    url: String,
    key: String,
    model: String,
    language: String,
    prompt: String,
}

impl GroqStt {
    /// A client for `cfg.cloud_base_url`; a Groq URL with no key is an
    /// error now rather than a 401 per utterance.
    pub fn new(cfg: &SttConfig, key: &str) -> Result<Self, SttError> {
        let base = cfg.cloud_base_url.trim().trim_end_matches('/');
        if base.is_empty() {
            return Err(SttError::Config(
                "stt.cloud_base_url is empty; set STT_BASE_URL or use stt.order = \"local-only\""
                    .into(),
            ));
        }
        if key.is_empty() && base.contains("api.groq.com") {
            return Err(SttError::NoApiKey);
        }
        let timeout = Duration::from_secs(cfg.cloud_timeout_secs.max(1));
        let agent = HttpSettings {
            connect_timeout: Some(Duration::from_secs(5).min(timeout)),
            ..HttpSettings::with_deadline(timeout)
        }
        .agent();
        Ok(Self {
            agent,
            url: format!("{base}/audio/transcriptions"),
            key: key.to_string(),
            model: cfg.cloud_model.clone(),
            language: cfg.language.clone(),
            prompt: cfg.prompt.clone(),
        })
    }

    /// The shared HTTP failure as this client's error.
    fn cloud_error(&self, e: HttpError) -> SttError {
        let url = self.url.clone();
        match e {
            HttpError::Status {
                status,
                body_excerpt,
                ..
            } => SttError::CloudHttp {
                url,
                status,
                message: body_excerpt,
            },
            HttpError::Timeout => SttError::CloudTransport {
                url,
                reason: e.to_string(),
            },
            HttpError::Connect { reason } => SttError::CloudTransport {
                url,
                reason: reason.replace('\n', " "),
            },
            other => SttError::CloudTransport {
                url,
                reason: format!("reading the answer: {other}"),
            },
        }
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The multipart body and its boundary.
pub fn multipart(wav: &[u8], fields: &[(&str, &str)]) -> (String, Vec<u8>) {
    // Random enough to never occur in a WAV by accident.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let boundary = format!("earshot-{nanos:x}-{:x}", std::process::id());
    let mut body = Vec::with_capacity(wav.len() + 1024);
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(wav);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (boundary, body)
}

/// One line describing an error body: the JSON `error.message` when there
/// is one, "an HTML page" for proxies' error pages, else the first 200
/// characters.
pub fn describe_error_body(body: &str) -> String {
    crate::http::describe_error_body(body)
}

impl Transcriber for GroqStt {
    fn name(&self) -> &'static str {
        "groq"
    }

    fn transcribe(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        let started = Instant::now();
        let wav = crate::audio::wav::write_16k_mono(&crate::audio::to_i16(audio));
        let mut fields = vec![
            ("model", self.model.as_str()),
            ("temperature", "0"),
            ("response_format", "json"),
        ];
        if !self.language.trim().is_empty() {
            fields.push(("language", self.language.trim()));
        }
        if !self.prompt.trim().is_empty() {
            fields.push(("prompt", self.prompt.trim()));
        }
        let (boundary, body) = multipart(&wav, &fields);
        let mut req = self
            .agent
            .post(&self.url)
            .content_type(format!("multipart/form-data; boundary={boundary}"));
        if !self.key.is_empty() {
            req = req.header("Authorization", format!("Bearer {}", self.key));
        }
        let resp = req
            .send(&body[..])
            .map_err(|e| self.cloud_error(e.into()))?;
        let reply = http::read_reply(resp, 1 << 20).map_err(|e| self.cloud_error(e))?;
        let reply = reply.error_for_status().map_err(|e| self.cloud_error(e))?;
        let body = reply.text().map_err(|e| self.cloud_error(e))?;
        let v: serde_json::Value = serde_json::from_str(body).map_err(|_| {
            SttError::CloudBadBody(format!("expected JSON, got {}", describe_error_body(body)))
        })?;
        let raw = v
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or_else(|| SttError::CloudBadBody("no \"text\" field in the JSON answer".into()))?;
        let cleaned = text::clean(raw);
        let elapsed = started.elapsed().as_millis() as u64;
        Ok(Transcript {
            no_speech: cleaned.is_empty(),
            text: cleaned,
            engine: "groq".into(),
            path: "cloud".into(),
            reason: format!("{} via {}", self.model, self.url),
            timings: SttTimings {
                stt_ms: elapsed,
                audio_ms: audio.len() as u64 * 1000 / u64::from(SAMPLE_RATE),
                cloud_ms: Some(elapsed),
                ..Default::default()
            },
            audio_ctx: None,
            avg_logprob: None,
            min_logprob: None,
            weakest_word: None,
            fallbacks: Vec::new(),
        })
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::*;
    use crate::http::stalling::{start, Stall};

    /// A dead, a trickling and a rate-limiting server each end in a clear
    /// error within the configured deadline (issue 23 point 4).
    #[test]
    fn a_stalled_server_is_an_error_within_the_deadline() {
        let audio = vec![0.1f32; SAMPLE_RATE as usize];
        for stall in [Stall::Silent, Stall::Trickle, Stall::RetryTomorrow] {
            let cfg = SttConfig {
                cloud_base_url: start(stall),
                cloud_timeout_secs: 1,
                ..SttConfig::default()
            };
            let stt = GroqStt::new(&cfg, "key").unwrap();
            let t = Instant::now();
            let err = stt.transcribe(&audio).unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
            let msg = err.to_string();
            assert!(!msg.is_empty() && !msg.contains('\n'), "{msg}");
        }
    }
}
