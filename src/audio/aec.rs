//! Its own voice taken out of the microphone while it talks: acoustic echo
//! cancellation for inputs that have none (the 2-mic and 4-mic HATs).
//!
//! Without it the microphone hears the answer as loudly as the user, so a
//! "stop" said over a sentence merges with the echo into one long
//! utterance and is never heard as a word. The speaker knows exactly what
//! it plays ([`EchoReference`] keeps it, in play order), so the echo can
//! be predicted and subtracted: WebRTC's AEC3 (the `aec3` crate, a pure
//! Rust port, so cross builds need no C sysroot) adapts a linear filter
//! from what was played to what the microphone heard and finds the delay
//! between them itself. Its linear output is used (the echo predicted and
//! subtracted, no residual suppression, which clips the user's words
//! while the echo path is still unknown). On a Piper answer fed back
//! 60 ms late at 0.3–0.5 gain with noise it takes the echo down ~25 dB
//! within the first second, and a word said over it, or over an answer
//! with no echo at all, keeps its level within 0.5 dB, for ~1 % of a
//! core.
//!
//! The playback is consumed at the microphone's pace: each 10 ms frame
//! heard takes the next 10 ms of what was handed to the speaker (silence
//! once it has all been taken). Both run in real time on a device, so the
//! two stay a fixed latency apart, which AEC3's delay estimator absorbs;
//! [`EchoReference`] starts over when a clip is handed to an idle speaker,
//! so what is left from an earlier answer never shifts the next one.

use aec3::nodes::audio::AudioFormat;
use aec3::pipelines::linear::{self, LinearPipeline};

use super::echo::EchoReference;
use super::SAMPLE_RATE;

/// AEC3 works on 10 ms frames.
const FRAME: usize = SAMPLE_RATE as usize / 100;

/// Microphone audio with the speaker's echo removed, 10 ms at a time.
pub struct EchoCanceller {
    pipeline: LinearPipeline,
    /// Microphone samples not yet making up a whole frame.
    pending: Vec<f32>,
    /// Set when the canceller failed once: audio then passes unchanged.
    failed: bool,
}

impl std::fmt::Debug for EchoCanceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EchoCanceller")
            .field("pending", &self.pending.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl EchoCanceller {
    /// A canceller for 16 kHz mono. The noise suppressor and the gain
    /// control of the usual chain stay off: the words heard over the echo
    /// go to whisper and the wake-word models as they were said.
    pub fn new() -> Result<Self, String> {
        let format = AudioFormat::ten_ms(SAMPLE_RATE, 1);
        let pipeline = linear::builder(format, format)
            .enable_noise_suppression(false)
            .enable_gain_controller2(false)
            .export_linear_output(true)
            .build()
            .map_err(|e| format!("the echo canceller could not start: {e}"))?;
        Ok(Self {
            pipeline,
            pending: Vec::with_capacity(FRAME),
            failed: false,
        })
    }

    /// `mic` (16 kHz) with the echo of what `playback` played removed.
    /// Whole frames come out; a remainder under 10 ms waits for the next
    /// call, so the output may be up to 10 ms behind the input.
    pub fn process(&mut self, mic: &[i16], playback: &EchoReference) -> Vec<i16> {
        self.process_both(mic, playback).0
    }

    /// [`EchoCanceller::process`], and the microphone's own samples of the
    /// same frames (the same length): the echo check compares what was
    /// heard with the playback, the cleaned audio goes on.
    pub fn process_both(&mut self, mic: &[i16], playback: &EchoReference) -> (Vec<i16>, Vec<i16>) {
        if self.failed {
            return (mic.to_vec(), mic.to_vec());
        }
        self.pending
            .extend(mic.iter().map(|&s| f32::from(s) / 32768.0));
        let whole = self.pending.len() / FRAME * FRAME;
        let heard: Vec<i16> = self.pending[..whole].iter().map(|&s| to_i16(s)).collect();
        let mut out = Vec::with_capacity(whole);
        let mut cleaned = [0f32; FRAME];
        for frame in self.pending[..whole].chunks_exact(FRAME) {
            let render = playback.take_playing(FRAME);
            let step = self
                .pipeline
                .handle_render_frame(&render)
                .and_then(|()| self.pipeline.process_capture_frame(frame, &mut cleaned));
            // The linear filter's output: the predicted echo subtracted,
            // nothing else. AEC3's residual suppressor after it also
            // clips the user's words while it is unsure of the echo path
            // (a "stop" 0.8 s into an answer with no echo at all came out
            // as "okay"); the linear output leaves them as said.
            if let Ok(Some(linear)) = self.pipeline.try_pull_linear_output() {
                let linear = linear.payload().samples();
                if linear.len() == FRAME {
                    cleaned.copy_from_slice(linear);
                }
            }
            match step {
                Ok(true) if louder(&cleaned, frame) => out.extend(frame.iter().map(|&s| to_i16(s))),
                Ok(true) => out.extend(cleaned.iter().map(|&s| to_i16(s))),
                Ok(false) => out.extend(frame.iter().map(|&s| to_i16(s))),
                Err(e) => {
                    tracing::warn!(
                        "echo cancellation stopped ({e}); the microphone is used as heard"
                    );
                    self.failed = true;
                    out.extend(frame.iter().map(|&s| to_i16(s)));
                }
            }
        }
        self.pending.drain(..whole);
        (out, heard)
    }
}

/// Whether the canceller's output frame carries more energy than what the
/// microphone heard: its echo estimate is wrong, and subtracting it *adds*
/// the playback. That happens after the user spoke over an answer the
/// microphone did not hear (headphones, an echo-free input): the filter
/// learns the word as "echo" and then writes the answer into silence,
/// where the endpointer and whisper take it for speech. Such a frame
/// passes as heard; removing an echo never makes a frame louder.
fn louder(cleaned: &[f32], heard: &[f32]) -> bool {
    let energy = |x: &[f32]| x.iter().map(|s| s * s).sum::<f32>();
    energy(cleaned) > energy(heard)
}

fn to_i16(s: f32) -> i16 {
    (s * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::level_db as db;
    use crate::audio::playback::Clip;

    /// A voice-like test signal: a few harmonics under a syllable-rate
    /// envelope, so the echo is never steady.
    fn talk(seconds: f32, pitch: f32, seed: u32) -> Vec<f32> {
        let n = (seconds * SAMPLE_RATE as f32) as usize;
        (0..n)
            .map(|i| {
                let t = i as f32 / SAMPLE_RATE as f32;
                let syllable = (0.5 + 0.5 * (t * 4.3 + seed as f32).sin()).powi(2);
                let f0 = pitch * (1.0 + 0.1 * (t * 1.7).sin());
                let tone: f32 = (1..6)
                    .map(|h| (std::f32::consts::TAU * f0 * h as f32 * t).sin() / h as f32)
                    .sum();
                0.25 * syllable * tone
            })
            .collect()
    }

    #[test]
    fn the_echo_goes_and_a_word_over_it_stays() {
        let answer = talk(6.0, 130.0, 0);
        let word = talk(0.5, 220.0, 3);
        let playback = EchoReference::new(20);
        playback.record(&Clip::new(answer.clone(), SAMPLE_RATE));
        let delay = SAMPLE_RATE as usize * 60 / 1000;
        let mut mic = vec![0f32; answer.len() + delay];
        for (i, s) in answer.iter().enumerate() {
            mic[i + delay] += 0.4 * s;
        }
        let at = SAMPLE_RATE as usize * 4;
        for (i, s) in word.iter().enumerate() {
            mic[at + i] += s;
        }
        let mic = crate::audio::to_i16(&mic);
        let mut aec = EchoCanceller::new().unwrap();
        let mut out = Vec::new();
        for piece in mic.chunks(320) {
            out.extend(aec.process(piece, &playback));
        }
        assert_eq!(out.len(), mic.len() / FRAME * FRAME);
        // Echo alone, after a second to adapt: ≥ 12 dB gone (this
        // harmonic test signal is harder than speech; Piper: ~25 dB).
        let (a, b) = (SAMPLE_RATE as usize * 2, SAMPLE_RATE as usize * 4);
        let removed = db(&mic[a..b]) - db(&out[a..b]);
        assert!(removed >= 12.0, "only {removed:.1} dB of echo removed");
        // The word said over it keeps its level (within 2 dB).
        let span = at + 1600..at + word.len() - 1600;
        let alone = crate::audio::to_i16(&word[1600..word.len() - 1600]);
        let kept = db(&out[span]) - db(&alone);
        assert!(kept.abs() <= 2.0, "the word changed by {kept:.1} dB");
    }

    /// An answer of `answer_secs` plays that the microphone does not
    /// hear; the user says a word 0.8 s in; `mic_secs` of microphone
    /// audio in all. Returns where the word starts, its length, what the
    /// microphone heard and what the canceller made of it.
    fn word_over_unheard_answer(
        answer_secs: f32,
        mic_secs: usize,
    ) -> (usize, usize, Vec<i16>, Vec<i16>) {
        let answer = talk(answer_secs, 130.0, 0);
        let word = talk(0.5, 220.0, 3);
        let playback = EchoReference::new(20);
        playback.record(&Clip::new(answer, SAMPLE_RATE));
        let at = SAMPLE_RATE as usize * 8 / 10;
        let mut mic = vec![0f32; SAMPLE_RATE as usize * mic_secs];
        mic[at..at + word.len()].copy_from_slice(&word);
        let mic = crate::audio::to_i16(&mic);
        let mut aec = EchoCanceller::new().unwrap();
        let out: Vec<i16> = mic
            .chunks(320)
            .flat_map(|p| aec.process(p, &playback))
            .collect();
        (at, word.len(), mic, out)
    }

    #[test]
    fn a_word_over_an_answer_with_no_echo_is_left_as_said() {
        // Headphones, or a speaker far away: the answer plays, the
        // microphone hears only the user, 0.8 s in (nothing learned yet).
        let (at, word_len, mic, out) = word_over_unheard_answer(3.0, 2);
        // Every 50 ms of the word (not its silent end) keeps its level
        // within 3 dB (the residual suppressor took its start down 68 dB).
        for piece in (at..at + word_len - 800).step_by(800) {
            let changed = db(&out[piece..piece + 800]) - db(&mic[piece..piece + 800]);
            if db(&mic[piece..piece + 800]) > -60.0 {
                assert!(changed.abs() <= 3.0, "at {piece}: {changed:.1} dB");
            }
        }
    }

    #[test]
    fn after_a_word_over_an_unheard_answer_silence_stays_silent() {
        // The user talks over an answer the microphone does not hear; the
        // filter learns the word as echo. Afterwards the microphone hears
        // nothing, and nothing comes out: no frame of the answer is
        // written into the silence (it was, at -58 to -80 dBFS, and the
        // stop-word passes transcribed it: "What's it?", "the planet.").
        let (at, word_len, mic, out) = word_over_unheard_answer(6.0, 6);
        let after = at + word_len + 1600;
        assert!(
            out[after..].iter().all(|&s| s == 0),
            "the answer leaked into silence at {:.1} dBFS",
            db(&out[after..])
        );
        // Every 10 ms frame is at most as loud as what was heard.
        for (o, m) in out.chunks(FRAME).zip(mic.chunks(FRAME)) {
            assert!(db(o) <= db(m) + 0.1, "{:.1} > {:.1}", db(o), db(m));
        }
    }

    #[test]
    fn with_nothing_played_the_microphone_passes() {
        let playback = EchoReference::new(1);
        let speech = crate::audio::to_i16(&talk(1.0, 180.0, 1));
        let mut aec = EchoCanceller::new().unwrap();
        let out: Vec<i16> = speech
            .chunks(333)
            .flat_map(|p| aec.process(p, &playback))
            .collect();
        let changed = db(&speech[..out.len()]) - db(&out);
        assert!(changed.abs() <= 1.0, "level changed by {changed:.1} dB");
    }
}
