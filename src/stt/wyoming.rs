//! Speech to text from a Wyoming ASR service (wyoming-faster-whisper,
//! another earshot, Home Assistant add-ons) as a [`Transcriber`] named
//! `wyoming`.
//!
//! When `wyoming.stt_uri` is set, [`super::Stt`] tries this engine
//! first and the configured local/cloud engines after it, so a service
//! that is down, slow (`wyoming.request_timeout_ms`) or talks garbage costs
//! one log line naming its URI and the local whisper answers. After a
//! failure the service is skipped for a backoff (doubling from
//! `reconnect_min_ms` to `reconnect_max_ms`) so a dead host does not add a
//! connect timeout to every request.
//!
//! One request is one connection (as Home Assistant does it):
//! `transcribe {language}`, `audio-start`, `audio-chunk`s of 16 kHz 16-bit
//! mono, `audio-stop`, then wait for `transcript {text}`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{SttError, Transcriber, Transcript};
use crate::wyoming_proto::audio::{audio_chunk_i16, audio_start, audio_stop, AudioFormat};
use crate::wyoming_proto::protocol::{Event, Limits, ProtocolError};
use crate::wyoming_proto::{connect, Backoff, WyomingConfig, WyomingUri};

/// Samples per `audio-chunk` sent (64 ms at 16 kHz: what satellites send).
const CHUNK_SAMPLES: usize = 1024;

/// The Wyoming ASR engine.
pub struct WyomingStt {
    uri: WyomingUri,
    language: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    limits: Limits,
    backoff: Backoff,
}

impl WyomingStt {
    /// The engine for `wyoming.stt_uri` asking for `language`
    /// (`stt.language`), or `None` when the URI is empty. A malformed URI
    /// is an error naming the key (config validation has normally caught
    /// it already).
    pub fn from_config(w: &WyomingConfig, language: &str) -> Result<Option<WyomingStt>, SttError> {
        if w.stt_uri.trim().is_empty() {
            return Ok(None);
        }
        let uri = WyomingUri::parse(&w.stt_uri)
            .map_err(|e| SttError::Config(format!("wyoming.stt_uri: {e}")))?;
        Ok(Some(WyomingStt::new(uri, language, w)))
    }

    /// An engine for `uri` with the timeouts, limits and backoff of `w`.
    pub fn new(uri: WyomingUri, language: &str, w: &WyomingConfig) -> WyomingStt {
        WyomingStt {
            uri,
            language: language.trim().to_string(),
            connect_timeout: Duration::from_millis(w.connect_timeout_ms.max(1)),
            request_timeout: Duration::from_millis(w.request_timeout_ms.max(1)),
            limits: w.limits(),
            backoff: Backoff::new(w),
        }
    }

    fn request(&self, audio: &[f32]) -> Result<String, String> {
        let deadline = Instant::now() + self.request_timeout;
        let conn = connect(
            &self.uri,
            self.connect_timeout,
            self.request_timeout,
            self.limits,
        )?;
        let sent = || -> Result<(), ProtocolError> {
            let mut transcribe = Event::new("transcribe");
            if !self.language.is_empty() {
                transcribe
                    .data
                    .insert("language".into(), json!(self.language));
            }
            conn.send(&transcribe)?;
            conn.send(&audio_start(AudioFormat::EARSHOT, Some(0)))?;
            let pcm = crate::audio::to_i16(audio);
            for (i, chunk) in pcm.chunks(CHUNK_SAMPLES).enumerate() {
                let ms = (i * CHUNK_SAMPLES) as u64 * 1000 / 16_000;
                conn.send(&audio_chunk_i16(16_000, chunk, Some(ms)))?;
            }
            let end_ms = pcm.len() as u64 * 1000 / 16_000;
            conn.send(&audio_stop(Some(end_ms)))
        };
        sent().map_err(|e| format!("sending the audio failed: {e}"))?;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "no transcript within wyoming.request_timeout_ms = {}",
                    self.request_timeout.as_millis()
                ));
            }
            match conn.recv_timeout(left) {
                Ok(Some(event)) if event.kind == "transcript" => {
                    return match event.data.get("text") {
                        Some(serde_json::Value::String(text)) => Ok(text.trim().to_string()),
                        None | Some(serde_json::Value::Null) => Ok(String::new()),
                        Some(other) => Err(format!("transcript text is not a string: {other}")),
                    };
                }
                // Streaming services send transcript-start/-chunk first;
                // anything else (info, ping) is not for us.
                Ok(Some(event)) => {
                    tracing::debug!(uri = %self.uri, kind = %event.kind, "ignoring event")
                }
                Ok(None) => {}
                Err(ProtocolError::Closed) => {
                    return Err("the service closed the connection without a transcript".into())
                }
                Err(e) => return Err(format!("bad answer: {e}")),
            }
        }
    }
}

impl Transcriber for WyomingStt {
    fn name(&self) -> &'static str {
        "wyoming"
    }

    fn transcribe(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        let service = |reason: String| SttError::Service {
            uri: self.uri.to_string(),
            reason,
        };
        self.backoff.check().map_err(service)?;
        let started = Instant::now();
        let audio_ms = audio.len() as u64 * 1000 / 16_000;
        match self.request(audio) {
            Ok(text) => {
                self.backoff.succeeded();
                let stt_ms = started.elapsed().as_millis() as u64;
                let mut t = Transcript::no_speech(
                    "wyoming",
                    "service",
                    format!("Wyoming ASR at {}", self.uri),
                    audio_ms,
                );
                t.no_speech = text.is_empty();
                t.text = text;
                t.timings.stt_ms = stt_ms;
                Ok(t)
            }
            Err(reason) => {
                let retry = self.backoff.failed();
                Err(service(format!(
                    "{reason} (not asked again for {} ms)",
                    retry.as_millis()
                )))
            }
        }
    }
}

/// `engines` with the Wyoming ASR engine in front when `wyoming.stt_uri`
/// is set (what [`super::Stt::from_config`] calls); `language` is
/// `stt.language`.
pub fn in_front(
    w: &WyomingConfig,
    language: &str,
    engines: Vec<Arc<dyn Transcriber>>,
) -> Result<Vec<Arc<dyn Transcriber>>, SttError> {
    let Some(service) = WyomingStt::from_config(w, language)? else {
        return Ok(engines);
    };
    tracing::info!(uri = %service.uri, "speech to text: Wyoming service first, then {:?}",
        engines.iter().map(|e| e.name()).collect::<Vec<_>>());
    let mut all: Vec<Arc<dyn Transcriber>> = vec![Arc::new(service)];
    all.extend(engines);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wyoming_proto::protocol::read_event;
    use std::io::{BufReader, Write};
    use std::net::{TcpListener, TcpStream};

    fn config(timeout_ms: u64) -> WyomingConfig {
        WyomingConfig {
            request_timeout_ms: timeout_ms,
            reconnect_min_ms: 60_000,
            ..Default::default()
        }
    }

    /// A one-shot service: reads the request up to audio-stop, then runs
    /// `answer` on the raw socket.
    fn service(answer: impl FnOnce(&mut TcpStream) + Send + 'static) -> WyomingUri {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let uri = WyomingUri::parse(&format!("tcp://{}", listener.local_addr().unwrap())).unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let first = read_event(&mut reader, &Limits::default()).unwrap();
            assert_eq!(first.kind, "transcribe");
            assert_eq!(first.str("language"), Some("en"));
            let mut samples = 0;
            loop {
                let e = read_event(&mut reader, &Limits::default()).unwrap();
                if e.kind == "audio-chunk" {
                    samples += e.payload.map_or(0, |p| p.len() / 2);
                }
                if e.kind == "audio-stop" {
                    break;
                }
            }
            assert_eq!(samples, 16_000);
            answer(&mut stream);
        });
        uri
    }

    fn one_second() -> Vec<f32> {
        (0..16_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect()
    }

    #[test]
    fn sends_the_audio_and_returns_the_transcript() {
        let uri = service(|s| {
            s.write_all(b"{\"type\":\"transcript\",\"data\":{\"text\":\" Hello there. \"}}\n")
                .unwrap();
        });
        let stt = WyomingStt::new(uri, "en", &config(5000));
        let t = stt.transcribe(&one_second()).unwrap();
        assert_eq!(t.text, "Hello there.");
        assert_eq!(t.engine, "wyoming");
        assert_eq!(t.timings.audio_ms, 1000);
    }

    #[test]
    fn garbage_silence_and_refusal_are_errors_naming_the_uri_then_backoff() {
        let garbage = service(|s| {
            s.write_all(b"this is not json\n").unwrap();
        });
        let stt = WyomingStt::new(garbage.clone(), "en", &config(5000));
        let e = stt.transcribe(&one_second()).unwrap_err().to_string();
        assert!(
            e.contains(&garbage.to_string()) && e.contains("JSON"),
            "{e}"
        );
        // Skipped now, without connecting.
        let e = stt.transcribe(&one_second()).unwrap_err().to_string();
        assert!(e.contains("skipped"), "{e}");

        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let silent = service(move |_s| {
            let _ = rx.recv();
        });
        let stt = WyomingStt::new(silent.clone(), "en", &config(300));
        let started = Instant::now();
        let e = stt.transcribe(&one_second()).unwrap_err().to_string();
        assert!(e.contains("request_timeout_ms = 300"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(tx);

        let closed = service(|s| {
            let _ = s.shutdown(std::net::Shutdown::Both);
        });
        let stt = WyomingStt::new(closed, "en", &config(5000));
        let e = stt.transcribe(&one_second()).unwrap_err().to_string();
        assert!(e.contains("closed the connection"), "{e}");
        assert!(!e.contains('\n'));
    }
}
