//! The speech check before transcription (`[audio.vad] speech_check`):
//! an utterance webrtc-vad let through is transcribed only when Silero VAD
//! finds speech in it (`crate::audio::silero`, the why is there).

use crate::audio::vad::VadConfig;

/// A loaded speech detector and how much speech it asks for.
pub struct SpeechCheck {
    #[cfg(feature = "onnx")]
    silero: crate::audio::silero::Silero,
    frames: u32,
    /// The speech in progress whose beginning already held enough speech
    /// ([`SpeechCheck::check_ahead`]), by [`beginning`].
    passed: Option<(u64, u64)>,
    /// The length (samples) the speech in progress must reach before
    /// [`SpeechCheck::check_ahead`] tries again.
    next_try: usize,
    /// How many times the detector ran (tests: what the check ahead
    /// saves is a run).
    runs: u64,
}

/// What identifies an utterance for the check: its start (stream ms)
/// and a hash of its first [`BEGINNING`] samples — the stream position
/// starts again at 0 whenever the loop makes a fresh endpointer (after it
/// speaks), so the start alone could name an earlier utterance. `None`
/// for audio shorter than that (never remembered).
fn beginning(start_ms: u64, samples: &[i16]) -> Option<(u64, u64)> {
    let first = samples.get(..BEGINNING)?;
    // FNV-1a: a fingerprint, not security.
    let hash = first.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, s| {
        (h ^ u64::from(*s as u16)).wrapping_mul(0x0100_0000_01b3)
    });
    Some((start_ms, hash))
}

/// Samples [`beginning`] reads (64 ms; an utterance holds its 300 ms
/// pre-roll before any check).
const BEGINNING: usize = 1_024;

/// After a beginning that did not hold enough speech, the check ahead
/// tries again once this much more audio has come (10 Silero frames).
const AHEAD_STEP: usize = 5_120;
/// Speech in progress longer than this is left to the check at the look
/// or the end (a long sound that is not speech is not re-read forever).
const AHEAD_MAX: usize = 3 * crate::audio::SAMPLE_RATE as usize;

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
                        passed: None,
                        next_try: 0,
                        runs: 0,
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

    /// Whether the utterance that starts at `start_ms` (stream ms), whose
    /// samples (16 kHz) are `samples`, holds speech. A failing detector
    /// says yes: a request is never lost to the check itself.
    pub fn holds_speech(&mut self, start_ms: u64, samples: &[i16]) -> bool {
        let key = beginning(start_ms, samples);
        if key.is_some() && self.passed == key {
            return true;
        }
        match self.speech_in(samples) {
            Ok(Ok(())) => {
                self.passed = key;
                true
            }
            Ok(Err((speech_frames, frames, max_probability))) => {
                tracing::info!(
                    speech_frames,
                    frames,
                    max_probability,
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

    /// New speech began: what was checked before is another utterance's.
    pub fn forget(&mut self) {
        self.passed = None;
        self.next_try = 0;
    }

    /// Check the speech in progress (starting at `start_ms`, `samples` so
    /// far) while it is still being said, so the look at its pause and its
    /// end need not run the detector on the way to the answer (~10 ms of
    /// the look, issue 21). Exact, not a guess: the check reads an
    /// utterance from its first sample and stops at its `frames`-th speech
    /// frame, so a beginning that holds them gives the whole utterance's
    /// verdict. A beginning that doesn't is tried again as more comes.
    pub fn check_ahead(&mut self, start_ms: u64, samples: &[i16]) {
        let key = beginning(start_ms, samples);
        if key.is_none()
            || self.passed == key
            || samples.len() < self.next_try
            || samples.len() > AHEAD_MAX
        {
            return;
        }
        self.next_try = samples.len() + AHEAD_STEP;
        if let Ok(Ok(())) = self.speech_in(samples) {
            self.passed = key;
        }
    }

    /// How many times the detector ran.
    pub fn detector_runs(&self) -> u64 {
        self.runs
    }

    /// `Ok(Ok(()))`: enough speech frames; `Ok(Err(..))`: not (speech
    /// frames, frames, highest probability); `Err`: the detector failed.
    #[allow(clippy::type_complexity)]
    fn speech_in(&mut self, samples: &[i16]) -> anyhow::Result<Result<(), (u32, u32, f32)>> {
        self.runs += 1;
        #[cfg(feature = "onnx")]
        {
            let audio = crate::audio::to_f32(samples);
            let v = self.silero.check(&audio, self.frames)?;
            Ok(if v.speech_frames >= self.frames {
                Ok(())
            } else {
                Err((v.speech_frames, v.frames, v.max_probability))
            })
        }
        #[cfg(not(feature = "onnx"))]
        {
            let _ = (samples, self.frames);
            Ok(Ok(()))
        }
    }
}
