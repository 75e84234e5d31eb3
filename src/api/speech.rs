//! The seam between the HTTP API and speech: POST /api/voice needs
//! speech-to-text, /api/voice and /api/tts need text-to-speech.
//!
//! The HTTP side (multipart, WAV checks, headers) lives in `routes`; this
//! file is the only place that calls into `crate::stt` / `crate::tts`, so
//! the API does not depend on how those engines are built. Until the
//! engines are wired in here, both return a 503 that says so.

use std::io::Cursor;

use super::ApiError;
use crate::agent::Services;

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

/// Speech to text for an uploaded WAV.
pub fn transcribe(_services: &Services, _wav: &[u8]) -> Result<String, ApiError> {
    Err(ApiError::unavailable(
        "speech-to-text is not available in this build's HTTP API yet; send text to POST /api/chat instead",
    ))
}

/// Text to a WAV file (RIFF bytes).
pub fn synthesize(_services: &Services, _text: &str) -> Result<Vec<u8>, ApiError> {
    Err(ApiError::unavailable(
        "text-to-speech is not available in this build's HTTP API yet; use POST /api/chat for the text answer",
    ))
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
}
