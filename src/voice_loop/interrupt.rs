//! The stop word and the wake word while the device talks or rings
//! (`[wake] stop_word`, on by default): either cuts the sound off.
//!
//! No registry ships a "stop" model, so "stop" is heard the way a request
//! is, only smaller: a second endpointer with a short hang-over
//! ([`HANGOVER_MS`]) cuts short utterances out of what the microphone hears
//! during playback; one that is short enough to be a word or two
//! ([`MAX_WORD_MS`]) goes through the fast speech-to-text path and is
//! matched against a small vocabulary (`ring::is_stop_word`: "stop",
//! "enough", "be quiet", "shut up", …). Longer speech is never transcribed
//! here (it is the user talking over the answer, or the answer itself), so
//! the cost during playback is the VAD's. The wake word detector keeps
//! listening at the same time (when there is one).
//!
//! Its own voice: with an echo-cancelled input (`audio.echo_cancelled`,
//! the USB Mic Array's channel 0) whatever is heard is the user's. Without
//! one, a short utterance or a wake-word detection is first compared with
//! what the speaker was handed ([`crate::audio::echo`]); one that is mostly
//! the device's own voice is dropped before any transcription.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::audio::echo::{EchoReference, ECHO_SHARE};
use crate::audio::vad::{EndReason, Endpointer, VadConfig, VadEvent};
use crate::audio::SAMPLE_RATE;
use crate::stt::Stt;

use super::wake::WakeGate;

/// Silence that ends a word heard during playback (ms): short, because
/// the time from the end of "stop" to silence is hang-over plus
/// transcription.
pub const HANGOVER_MS: u32 = 150;
/// Speech longer than this (ms) is not a stop word and is not transcribed.
pub const MAX_WORD_MS: u64 = 1500;
/// Audio kept for checking a wake-word detection against the playback.
const RECENT_MS: usize = 1500;

/// What cut the sound off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interruption {
    /// A stop word, as transcribed.
    Stop(String),
    /// The wake word (its name): the user has a new request.
    WakeWord(String),
}

/// Counts since the interrupter was made (`earshot bench stop`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterruptStats {
    /// Short utterances heard (a word or two).
    pub words: usize,
    /// Of those, dropped as the device's own voice before transcription.
    pub own_voice: usize,
    /// Of those, transcribed.
    pub transcribed: usize,
}

/// Listens during playback for the stop word and the wake word.
pub struct Interrupter {
    stats: InterruptStats,
    vad: VadConfig,
    endpointer: Endpointer,
    /// `None`: the input is echo-cancelled, nothing is checked.
    echo: Option<Arc<EchoReference>>,
    recent: VecDeque<i16>,
}

/// The endpointer settings for a word said over the device's sound.
pub fn word_vad(base: &VadConfig) -> VadConfig {
    VadConfig {
        hangover_ms: HANGOVER_MS,
        min_utterance_ms: 150,
        max_utterance_ms: 2000,
        tail_ms: 100,
        preroll_ms: 200,
        early_ms: 0,
        ..base.clone()
    }
}

impl Interrupter {
    /// `echo`: the speaker's recent playback, or `None` when the input is
    /// echo-cancelled. Fails only on invalid `audio.vad` settings.
    pub fn new(base: &VadConfig, echo: Option<Arc<EchoReference>>) -> Result<Self, String> {
        let vad = word_vad(base);
        Ok(Self {
            endpointer: Endpointer::new(&vad)?,
            vad,
            echo,
            recent: VecDeque::new(),
            stats: InterruptStats::default(),
        })
    }

    /// What it has heard so far.
    pub fn stats(&self) -> InterruptStats {
        self.stats
    }

    /// Forget what was heard (a new answer or round starts).
    pub fn reset(&mut self) {
        if let Ok(fresh) = Endpointer::new(&self.vad) {
            self.endpointer = fresh;
        }
        self.recent.clear();
    }

    /// Microphone audio heard while the device talks or rings; returns an
    /// interruption when the stop word or the wake word was said (by the
    /// user, not by the speaker). May transcribe a short word (tens to a
    /// few hundred ms).
    pub fn hear(
        &mut self,
        samples: &[i16],
        stt: &Stt,
        gate: Option<&mut WakeGate>,
    ) -> Option<Interruption> {
        let keep = RECENT_MS * SAMPLE_RATE as usize / 1000;
        self.recent.extend(samples.iter().copied());
        let extra = self.recent.len().saturating_sub(keep);
        self.recent.drain(..extra);
        if let Some(gate) = gate {
            gate.feed(samples);
            if let Some(detection) = gate.poll() {
                let heard: Vec<i16> = self.recent.iter().copied().collect();
                if let Some(share) = self.own_voice(&heard) {
                    tracing::info!(
                        word = %detection.name,
                        echo_share = share,
                        "the wake word in my own voice; ignored"
                    );
                } else {
                    return Some(Interruption::WakeWord(detection.name));
                }
            }
        }
        for event in self.endpointer.push(samples) {
            let VadEvent::Utterance(u) = event else {
                continue;
            };
            let speech_ms = u.speech_end_ms.saturating_sub(u.speech_start_ms);
            if u.reason == EndReason::MaxLength || speech_ms > MAX_WORD_MS {
                continue;
            }
            self.stats.words += 1;
            if let Some(share) = self.own_voice(&u.samples) {
                tracing::debug!(echo_share = share, "a word in my own voice; ignored");
                self.stats.own_voice += 1;
                continue;
            }
            self.stats.transcribed += 1;
            match stt.transcribe_word(&u.to_f32()) {
                Ok(t) if !t.no_speech && super::ring::is_stop_word(&t.text) => {
                    return Some(Interruption::Stop(t.text.trim().to_string()));
                }
                Ok(t) => tracing::debug!("heard {:?} during playback; not a stop word", t.text),
                Err(e) => tracing::debug!("a word during playback: {e}"),
            }
        }
        None
    }

    /// `Some(share)` when `heard` is mostly the device's own playback.
    fn own_voice(&self, heard: &[i16]) -> Option<f32> {
        let reference = self.echo.as_ref()?;
        let share = reference.share_of(heard);
        (share >= ECHO_SHARE).then_some(share)
    }
}
