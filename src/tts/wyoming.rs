//! Text to speech from a Wyoming TTS service (wyoming-piper, another
//! earshot) as a [`Synthesizer`] named `wyoming` in `tts.order`.
//!
//! Put `wyoming` before the local engines (`order = ["wyoming", "piper",
//! "espeak"]`) and set `wyoming.tts_uri`: a service that is down, slower
//! than `wyoming.request_timeout_ms` or sends garbage is one log line
//! naming the URI (from [`super::Tts`]), and the next engine speaks.
//! After a failure the service is skipped for a backoff (doubling from
//! `reconnect_min_ms` to `reconnect_max_ms`) so each sentence of a long
//! answer does not wait for a dead host.
//!
//! One sentence is one connection: `synthesize {text, voice?}`, then
//! `audio-start`, `audio-chunk`s, `audio-stop` (chunks decoded in whatever
//! format each declares; the clip keeps the service's sample rate, the
//! speaker resamples).

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::json;

use super::{Synthesizer, TtsError};
use crate::audio::playback::Clip;
use crate::wyoming_proto::audio::{decode_mono_f32, AudioFormat};
use crate::wyoming_proto::protocol::{Event, Limits, ProtocolError};
use crate::wyoming_proto::{connect, Backoff, WyomingConfig, WyomingUri};

/// The longest answer accepted for one sentence (10 minutes at 48 kHz):
/// a service that never stops sending is cut off, not buffered forever.
const MAX_SAMPLES: usize = 48_000 * 600;

/// The Wyoming TTS engine.
pub struct WyomingTts {
    uri: WyomingUri,
    voice: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    limits: Limits,
    backoff: Backoff,
}

impl WyomingTts {
    /// The engine for `wyoming.tts_uri` (with `wyoming.tts_voice`); an
    /// empty or malformed URI is an error saying what to set, so
    /// `tts.order` naming `wyoming` without a service is reported once at
    /// start-up and skipped.
    pub fn from_config(w: &WyomingConfig) -> Result<WyomingTts> {
        if w.tts_uri.trim().is_empty() {
            return Err(anyhow!(
                "tts.order names wyoming but wyoming.tts_uri is empty; set it to the service (e.g. tcp://127.0.0.1:10200)"
            ));
        }
        let uri = WyomingUri::parse(&w.tts_uri).map_err(|e| anyhow!("wyoming.tts_uri: {e}"))?;
        Ok(WyomingTts::new(uri, &w.tts_voice, w))
    }

    /// An engine for `uri` asking for `voice` (empty = the service's
    /// default), with the timeouts, limits and backoff of `w`.
    pub fn new(uri: WyomingUri, voice: &str, w: &WyomingConfig) -> WyomingTts {
        WyomingTts {
            uri,
            voice: voice.trim().to_string(),
            connect_timeout: Duration::from_millis(w.connect_timeout_ms.max(1)),
            request_timeout: Duration::from_millis(w.request_timeout_ms.max(1)),
            limits: w.limits(),
            backoff: Backoff::new(w),
        }
    }

    fn request(&self, text: &str) -> Result<Clip, String> {
        let deadline = Instant::now() + self.request_timeout;
        let conn = connect(
            &self.uri,
            self.connect_timeout,
            self.request_timeout,
            self.limits,
        )?;
        let mut synthesize = Event::with_data("synthesize", json!({ "text": text }));
        if !self.voice.is_empty() {
            synthesize
                .data
                .insert("voice".into(), json!({ "name": self.voice }));
        }
        conn.send(&synthesize)
            .map_err(|e| format!("sending the text failed: {e}"))?;
        let mut format: Option<AudioFormat> = None;
        let mut samples: Vec<f32> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "no complete audio within wyoming.request_timeout_ms = {}",
                    self.request_timeout.as_millis()
                ));
            }
            let event = match conn.recv_timeout(left) {
                Ok(Some(event)) => event,
                Ok(None) => continue,
                Err(ProtocolError::Closed) => {
                    return Err("the service closed the connection before audio-stop".into())
                }
                Err(e) => return Err(format!("bad answer: {e}")),
            };
            match event.kind.as_str() {
                "audio-start" => {
                    format = Some(AudioFormat::from_event(&event)?);
                }
                "audio-chunk" => {
                    let chunk_format = AudioFormat::from_event(&event)?;
                    if let Some(start) = format {
                        if start.rate != chunk_format.rate {
                            return Err(format!(
                                "audio-chunk at {} Hz after audio-start at {} Hz",
                                chunk_format.rate, start.rate
                            ));
                        }
                    }
                    format = Some(chunk_format);
                    let payload = event.payload.as_deref().unwrap_or_default();
                    samples.extend(decode_mono_f32(chunk_format, payload));
                    if samples.len() > MAX_SAMPLES {
                        return Err("more than 10 minutes of audio for one sentence".into());
                    }
                }
                "audio-stop" => {
                    let Some(format) = format else {
                        return Err("audio-stop without any audio".into());
                    };
                    return Ok(Clip::new(samples, format.rate));
                }
                other => tracing::debug!(uri = %self.uri, kind = other, "ignoring event"),
            }
        }
    }
}

impl Synthesizer for WyomingTts {
    fn name(&self) -> &'static str {
        "wyoming"
    }

    fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
        self.backoff.check().map_err(|e| {
            TtsError::EngineUnavailable(format!("Wyoming TTS service at {}: {e}", self.uri))
        })?;
        match self.request(text) {
            Ok(clip) => {
                self.backoff.succeeded();
                Ok(clip)
            }
            Err(reason) => {
                let retry = self.backoff.failed();
                Err(TtsError::Failed(format!(
                    "Wyoming TTS service at {}: {reason} (not asked again for {} ms)",
                    self.uri,
                    retry.as_millis()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wyoming_proto::audio::{audio_chunk_i16, audio_start, audio_stop};
    use crate::wyoming_proto::protocol::{read_event, write_event};
    use std::io::{BufReader, Write};
    use std::net::{TcpListener, TcpStream};

    fn config(timeout_ms: u64) -> WyomingConfig {
        WyomingConfig {
            request_timeout_ms: timeout_ms,
            reconnect_min_ms: 60_000,
            ..Default::default()
        }
    }

    fn service(answer: impl FnOnce(&mut TcpStream) + Send + 'static) -> WyomingUri {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let uri = WyomingUri::parse(&format!("tcp://{}", listener.local_addr().unwrap())).unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let e = read_event(&mut reader, &Limits::default()).unwrap();
            assert_eq!(e.kind, "synthesize");
            assert_eq!(e.str("text"), Some("Hello."));
            assert_eq!(e.data["voice"]["name"], "joe");
            answer(&mut stream);
        });
        uri
    }

    #[test]
    fn collects_the_audio_at_the_services_rate() {
        let uri = service(|s| {
            let format = AudioFormat {
                rate: 22_050,
                width: 2,
                channels: 1,
            };
            write_event(s, &audio_start(format, None)).unwrap();
            write_event(s, &audio_chunk_i16(22_050, &[1000; 300], None)).unwrap();
            write_event(s, &audio_chunk_i16(22_050, &[-1000; 200], None)).unwrap();
            write_event(s, &audio_stop(None)).unwrap();
        });
        let mut tts = WyomingTts::new(uri, "joe", &config(5000));
        let clip = tts.synthesize("Hello.").unwrap();
        assert_eq!(clip.sample_rate, 22_050);
        assert_eq!(clip.samples.len(), 500);
        assert!(clip.samples[0] > 0.0 && clip.samples[499] < 0.0);
    }

    #[test]
    fn garbage_and_cut_streams_are_errors_naming_the_uri() {
        let garbage = service(|s| {
            s.write_all(b"{\"type\":\"audio-start\",\"data\":{\"rate\":22050,\"width\":3,\"channels\":1}}\n")
                .unwrap();
        });
        let mut tts = WyomingTts::new(garbage.clone(), "joe", &config(5000));
        let e = format!("{:#}", tts.synthesize("Hello.").unwrap_err());
        assert!(
            e.contains(&garbage.to_string()) && e.contains("width"),
            "{e}"
        );
        let e = tts.synthesize("Hello.").unwrap_err();
        assert!(matches!(e, TtsError::EngineUnavailable(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("skipped"), "{e}");

        let cut = service(|s| {
            write_event(s, &audio_start(AudioFormat::EARSHOT, None)).unwrap();
            write_event(s, &audio_chunk_i16(16_000, &[5; 100], None)).unwrap();
        });
        let mut tts = WyomingTts::new(cut, "joe", &config(5000));
        let e = format!("{:#}", tts.synthesize("Hello.").unwrap_err());
        assert!(e.contains("before audio-stop"), "{e}");
        assert!(!e.contains('\n'));
    }
}
