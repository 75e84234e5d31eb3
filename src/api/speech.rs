//! The seam between the HTTP API and speech: POST /api/voice needs
//! speech-to-text, /api/voice and /api/tts need text-to-speech.
//!
//! The HTTP side (multipart, headers) lives in `routes`; this file is the
//! only place that calls into [`crate::stt`] and [`crate::tts`]. The engines
//! are loaded once when the server starts (so `READY=1` means they are
//! loaded); an engine that cannot be built turns its endpoints into a 503
//! that says why, while the rest of the API keeps working.

use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::ApiError;
use crate::stt::Stt;
use crate::tts::Tts;

/// What a WAV upload holds, checked before any engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavInfo {
    pub sample_rate: u32,
    pub channels: u16,
    pub frames: u32,
}

/// Check that `bytes` is a readable WAV with audio in it.
pub fn check_wav(bytes: &[u8]) -> Result<WavInfo, ApiError> {
    let reader = hound::WavReader::new(Cursor::new(bytes)).map_err(|e| {
        ApiError::bad_request(format!(
            "the \"audio\" field is not a WAV file ({e}); record 16-bit PCM WAV (e.g. arecord -f S16_LE -r 16000 clip.wav)"
        ))
    })?;
    let spec = reader.spec();
    let frames = reader.duration();
    if frames == 0 {
        return Err(ApiError::bad_request(
            "the WAV file holds no audio; record at least a second of speech",
        ));
    }
    Ok(WavInfo {
        sample_rate: spec.sample_rate,
        channels: spec.channels,
        frames,
    })
}

/// A recording within `max_secs` seconds (`api.max_voice_secs`), else a
/// 413 naming the limit: speech-to-text time grows with the length.
pub fn within_duration(info: &WavInfo, max_secs: u64) -> Result<(), ApiError> {
    let secs = f64::from(info.frames) / f64::from(info.sample_rate.max(1));
    if secs > max_secs as f64 {
        return Err(ApiError::new(
            413,
            format!("the recording is {secs:.1} s long; the limit is {max_secs} s (api.max_voice_secs); send a shorter clip or raise the limit"),
        ));
    }
    Ok(())
}

/// The speech engines the API uses, built once.
pub struct Speech {
    stt: Result<Stt, String>,
    /// Engines keep sessions (`&mut`); one synthesis at a time.
    tts: Mutex<Tts>,
}

/// What came out of an upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Text(String),
    /// The recording has no speech in it.
    Nothing,
}

impl Speech {
    /// Engines the caller built ([`crate::app::speech`]; `earshot run`
    /// shares its `Stt`, whose model is behind an `Arc`). A failed STT is
    /// kept as its reason, not an error: text endpoints still work.
    pub fn new(stt: Result<Stt, String>, tts: Tts) -> Speech {
        Speech {
            stt,
            tts: Mutex::new(tts),
        }
    }

    /// Speech to text for an uploaded WAV (any rate and channel count).
    pub fn transcribe(&self, wav: &[u8]) -> Result<Heard, ApiError> {
        let stt = self.stt.as_ref().map_err(|reason| {
            ApiError::unavailable(format!(
                "speech-to-text is not available ({reason}); send text to POST /api/chat instead"
            ))
        })?;
        let (audio, _) = crate::audio::wav::read_from(Cursor::new(wav), Path::new("audio"), None)
            .map_err(|e| ApiError::bad_request(format!("cannot read the WAV: {e}")))?;
        let transcript = stt
            .transcribe(&audio)
            .map_err(|e| ApiError::unavailable(format!("{} ({e})", e.user_sentence())))?;
        let text = transcript.text.trim();
        Ok(if transcript.no_speech || text.is_empty() {
            Heard::Nothing
        } else {
            Heard::Text(text.to_string())
        })
    }

    /// Text to a 16-bit mono WAV at the engine's own rate.
    pub fn synthesize(&self, text: &str) -> Result<Vec<u8>, ApiError> {
        self.synthesize_until(text, &AtomicBool::new(false))
    }

    /// [`Speech::synthesize`], giving up between sentences (503) once
    /// `stop` is set, so a long text does not hold up shutdown.
    pub fn synthesize_until(&self, text: &str, stop: &AtomicBool) -> Result<Vec<u8>, ApiError> {
        let mut tts = self.tts.lock().unwrap_or_else(|p| p.into_inner());
        if tts.engine_names().is_empty() {
            return Err(ApiError::unavailable(format!(
                "text-to-speech is not available ({}); use POST /api/chat for the text answer",
                if tts.skipped.is_empty() {
                    "tts.order names no engine".to_string()
                } else {
                    tts.skipped.join("; ")
                }
            )));
        }
        // Engines speak one sentence at a time; join them with a short pause.
        let sentences: Vec<String> = crate::tts::sentences::split(text)
            .iter()
            .filter_map(|s| crate::tts::sentences::clean(s))
            .collect();
        if sentences.is_empty() {
            return Err(ApiError::bad_request(
                "there is nothing speakable in \"text\" (only symbols or markup)",
            ));
        }
        let mut samples: Vec<f32> = Vec::new();
        let mut rate = 0u32;
        for sentence in &sentences {
            if stop.load(Ordering::SeqCst) {
                return Err(ApiError::unavailable(
                    "earshot is shutting down; the speech was not finished, retry in a moment",
                ));
            }
            let spoken = tts.synthesize(sentence).map_err(|e| {
                ApiError::unavailable(format!(
                    "text-to-speech failed: {}",
                    format!("{e:#}").replace('\n', " ")
                ))
            })?;
            let clip = spoken.clip;
            if rate == 0 {
                rate = clip.sample_rate;
            } else {
                samples.extend(std::iter::repeat_n(0.0, rate as usize * 3 / 20));
            }
            samples.extend(resample_linear(&clip.samples, clip.sample_rate, rate));
        }
        drop(tts);
        wav_bytes(&samples, rate)
    }
}

/// Bring a clip to `to` Hz (only when a fallback engine speaks at another
/// rate than the first sentence's; linear is plenty for that).
fn resample_linear(samples: &[f32], from: u32, to: u32) -> Vec<f32> {
    if from == to || from == 0 || samples.is_empty() {
        return samples.to_vec();
    }
    let n = (samples.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let step = f64::from(from) / f64::from(to);
    (0..n)
        .map(|i| {
            let pos = i as f64 * step;
            let j = pos as usize;
            let frac = (pos - j as f64) as f32;
            let a = samples[j.min(samples.len() - 1)];
            let b = samples[(j + 1).min(samples.len() - 1)];
            a + (b - a) * frac
        })
        .collect()
}

/// Mono `f32` samples in [-1, 1] → a 16-bit PCM WAV file.
pub fn wav_bytes(samples: &[f32], sample_rate: u32) -> Result<Vec<u8>, ApiError> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    let write = |out: &mut Cursor<Vec<u8>>| -> Result<(), hound::Error> {
        let mut writer = hound::WavWriter::new(out, spec)?;
        for s in samples {
            writer.write_sample((s.clamp(-1.0, 1.0) * f32::from(i16::MAX)) as i16)?;
        }
        writer.finalize()
    };
    write(&mut out).map_err(|e| ApiError::new(500, format!("could not write the WAV: {e}")))?;
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(frames: usize) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        for i in 0..frames {
            w.write_sample((i % 100) as i16).unwrap();
        }
        w.finalize().unwrap();
        out.into_inner()
    }

    #[test]
    fn wav_round_trips_through_wav_bytes() {
        let bytes = wav_bytes(&[0.0, 0.5, -0.5, 2.0], 22050).unwrap();
        let mut r = hound::WavReader::new(Cursor::new(bytes)).unwrap();
        assert_eq!(r.spec().sample_rate, 22050);
        let s: Vec<i16> = r.samples::<i16>().map(|x| x.unwrap()).collect();
        assert_eq!(s, vec![0, 16383, -16383, i16::MAX]);
    }

    #[test]
    fn resampling_keeps_duration() {
        let one_second: Vec<f32> = (0..22050).map(|i| (i as f32 * 0.01).sin()).collect();
        assert_eq!(resample_linear(&one_second, 22050, 16000).len(), 16000);
        assert_eq!(resample_linear(&one_second, 22050, 22050), one_second);
    }

    #[test]
    fn wav_is_checked() {
        let info = check_wav(&wav(1600)).unwrap();
        assert_eq!(
            info,
            WavInfo {
                sample_rate: 16000,
                channels: 1,
                frames: 1600
            }
        );
        assert_eq!(check_wav(b"RIFFnope").unwrap_err().status, 400);
        assert!(check_wav(&wav(0)).unwrap_err().message.contains("no audio"));
    }

    #[test]
    fn recordings_are_bounded_in_length() {
        let info = check_wav(&wav(16000 * 2)).unwrap();
        assert!(within_duration(&info, 2).is_ok());
        let err = within_duration(&info, 1).unwrap_err();
        assert_eq!(err.status, 413);
        assert!(
            err.message.contains("api.max_voice_secs"),
            "{}",
            err.message
        );
    }
}
