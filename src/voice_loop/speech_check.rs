//! The speech check before transcription (`[audio.vad] speech_check`):
//! an utterance webrtc-vad let through is transcribed only when Silero VAD
//! finds speech in it (`crate::audio::silero`, the why is there).

use crate::audio::vad::VadConfig;

/// A loaded speech detector and how much speech it asks for.
pub struct SpeechCheck {
    #[cfg(feature = "onnx")]
    silero: crate::audio::silero::Silero,
    frames: u32,
}

impl SpeechCheck {
    /// The check `vad` asks for, or `None` when it is off. A missing or
    /// broken model warns once and leaves the check off: every utterance
    /// is then transcribed, as before the check existed.
    pub fn from_config(vad: &VadConfig, paths: &crate::paths::Paths) -> Option<SpeechCheck> {
        if !vad.speech_check {
            return None;
        }
        #[cfg(feature = "onnx")]
        {
            match crate::audio::silero::Silero::load(paths) {
                Ok(silero) => {
                    tracing::debug!(model = %silero.path().display(), "speech check on");
                    Some(SpeechCheck {
                        silero,
                        frames: vad.speech_frames.max(1),
                    })
                }
                Err(e) => {
                    tracing::warn!("{e:#}; every sound webrtc-vad lets through is transcribed");
                    None
                }
            }
        }
        #[cfg(not(feature = "onnx"))]
        {
            let _ = paths;
            tracing::warn!(
                "audio.vad.speech_check needs the onnx feature; every sound webrtc-vad lets through is transcribed"
            );
            None
        }
    }

    /// Whether `samples` (16 kHz) hold speech. A failing detector says
    /// yes: a request is never lost to the check itself.
    pub fn holds_speech(&mut self, samples: &[i16]) -> bool {
        #[cfg(feature = "onnx")]
        {
            let audio = crate::audio::to_f32(samples);
            match self.silero.check(&audio, self.frames) {
                Ok(v) if v.speech_frames >= self.frames => true,
                Ok(v) => {
                    tracing::info!(
                        speech_frames = v.speech_frames,
                        frames = v.frames,
                        max_probability = v.max_probability,
                        "not speech (the speech check): ignored"
                    );
                    false
                }
                Err(e) => {
                    tracing::warn!("speech check failed, transcribing anyway: {e:#}");
                    true
                }
            }
        }
        #[cfg(not(feature = "onnx"))]
        {
            let _ = (samples, self.frames);
            true
        }
    }
}
