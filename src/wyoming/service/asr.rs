//! Speech to text over Wyoming: `transcribe` (optional), then
//! `audio-start`, `audio-chunk`…, `audio-stop` → `transcript {text}`.
//!
//! Audio may come in any format the protocol allows (rate, 8/16/32-bit,
//! interleaved channels); it is mixed to mono, kept at its own rate while
//! it arrives and resampled to whisper's 16 kHz once, at `audio-stop`.
//! A stream is bounded to [`MAX_AUDIO_SECS`]: past it the peer gets an
//! `error {code: "audio-too-long"}` and the connection closes (so a client
//! waiting for its transcript is not left hanging).

use serde_json::json;

use crate::stt::{Stt, SttError};
use crate::wyoming::server::{error_event, Flow};
use crate::wyoming_proto::audio::{decode_mono_f32, AudioFormat};
use crate::wyoming_proto::client::EventWriter;
use crate::wyoming_proto::protocol::{Event, ProtocolError};

/// Longest utterance one `transcribe` may send.
pub const MAX_AUDIO_SECS: u64 = 60;

/// The audio of the stream being received.
#[derive(Debug, Default)]
pub struct Capture {
    /// Mono samples at `rate`.
    samples: Vec<f32>,
    /// The stream's rate (from `audio-start`, else the first chunk).
    rate: Option<u32>,
    /// `language` asked by `transcribe`, echoed in the transcript.
    language: Option<String>,
    /// A `transcribe` or audio arrived and `audio-stop` has not yet.
    open: bool,
}

impl Capture {
    fn reset(&mut self) {
        *self = Capture::default();
    }

    /// Whether an utterance is being received (shutdown waits for its
    /// `audio-stop` and answers it).
    pub fn is_open(&self) -> bool {
        self.open
    }
}

/// Handle one ASR event.
pub fn on_event(
    peer: std::net::SocketAddr,
    stt: Result<&Stt, &SttError>,
    capture: &mut Capture,
    event: &Event,
    out: &EventWriter,
) -> Result<Flow, ProtocolError> {
    match event.kind.as_str() {
        "transcribe" => {
            capture.reset();
            capture.language = event.str("language").map(str::to_string);
            capture.open = true;
            Ok(Flow::Continue)
        }
        "audio-start" => {
            let language = capture.language.take();
            capture.reset();
            capture.language = language;
            capture.open = true;
            match AudioFormat::from_event(event) {
                Ok(format) => {
                    capture.rate = Some(format.rate);
                    Ok(Flow::Continue)
                }
                Err(e) => refuse(peer, out, &e, "bad-audio"),
            }
        }
        "audio-chunk" => {
            let format = match AudioFormat::from_event(event) {
                Ok(f) => f,
                Err(e) => return refuse(peer, out, &e, "bad-audio"),
            };
            let rate = *capture.rate.get_or_insert(format.rate);
            if format.rate != rate {
                return refuse(
                    peer,
                    out,
                    &format!(
                        "audio-chunk rate {} Hz differs from the stream's {rate} Hz; send one rate per stream",
                        format.rate
                    ),
                    "bad-audio",
                );
            }
            let mono = decode_mono_f32(format, event.payload.as_deref().unwrap_or_default());
            let max = MAX_AUDIO_SECS as usize * rate as usize;
            if capture.samples.len() + mono.len() > max {
                capture.reset();
                return refuse(
                    peer,
                    out,
                    &format!(
                        "audio longer than {MAX_AUDIO_SECS} s; send one utterance of at most {MAX_AUDIO_SECS} s per transcribe"
                    ),
                    "audio-too-long",
                );
            }
            capture.samples.extend_from_slice(&mono);
            capture.open = true;
            Ok(Flow::Continue)
        }
        "audio-stop" => {
            let rate = capture.rate.unwrap_or(16_000);
            let samples = std::mem::take(&mut capture.samples);
            let language = capture.language.take();
            capture.reset();
            let stt = match stt {
                Ok(s) => s,
                Err(why) => {
                    return refuse(
                        peer,
                        out,
                        &format!("speech-to-text is unavailable: {why}"),
                        "asr-unavailable",
                    )
                }
            };
            let audio = if rate == 16_000 {
                samples
            } else {
                match crate::audio::resample::to_16k(&samples, rate) {
                    Ok(a) => a,
                    Err(e) => {
                        return refuse(
                            peer,
                            out,
                            &format!("cannot resample {rate} Hz audio: {e}"),
                            "bad-audio",
                        )
                    }
                }
            };
            let started = std::time::Instant::now();
            match stt.transcribe(&audio) {
                Ok(t) => {
                    tracing::info!(
                        audio_ms = audio.len() as u64 * 1000 / 16_000,
                        stt_ms = started.elapsed().as_millis() as u64,
                        engine = %t.engine,
                        path = %t.path,
                        "wyoming: transcribed"
                    );
                    let mut data = json!({"text": t.text.trim()});
                    if let Some(lang) = language {
                        data["language"] = lang.into();
                    }
                    out.send(&Event::with_data("transcript", data))?;
                    Ok(Flow::Continue)
                }
                Err(e) => {
                    tracing::warn!("wyoming: transcription failed: {e}");
                    out.send(&error_event(e.user_sentence(), "asr-failed"))?;
                    Ok(Flow::Continue)
                }
            }
        }
        _ => Ok(Flow::Continue),
    }
}

/// Tell the peer why, then hang up: the stream it is sending is unusable.
fn refuse(
    peer: std::net::SocketAddr,
    out: &EventWriter,
    text: &str,
    code: &str,
) -> Result<Flow, ProtocolError> {
    tracing::warn!(%peer, "wyoming: {text}; closing the connection");
    out.send(&error_event(text, code))?;
    Ok(Flow::Close)
}
