//! Its own voice, kept for a moment: what the speaker was handed, so a
//! word heard while it talks can be checked against it.
//!
//! Without an echo-cancelled input (the 2-mic and 4-mic HATs have none;
//! the USB Mic Array's channel 0 has) the microphone hears the answer.
//! "Stop" or the wake word heard during playback may then be the device's
//! own voice: an answer that says "stop", or the TTS saying "Jarvis".
//! [`EchoTap`] sits between the speaker and its sink and copies every clip
//! (at 16 kHz) into an [`EchoReference`]; [`echo_share`] measures how much
//! of a stretch of microphone audio the reference explains (the best
//! delayed, scaled copy), so the loop can drop a detection that is mostly
//! its own playback. The search needs no clock alignment between capture
//! and playback (ALSA's file plugin runs neither in real time): it looks
//! at every offset of the recent reference, coarse on 10 ms energy
//! envelopes first and then sample by sample around the best few.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::playback::{AudioSink, Clip, PlaybackError};
use super::SAMPLE_RATE;

/// Samples per envelope frame (10 ms at 16 kHz).
const FRAME: usize = 160;
/// Coarse offsets refined sample by sample.
const CANDIDATES: usize = 8;

/// Above this share of its energy explained by the playback, a word heard
/// during playback is taken for the device's own voice. An echo alone with
/// noise 10 dB below it scores about 0.9; the user's own word, louder than
/// the echo under it, scores under 0.5.
pub const ECHO_SHARE: f32 = 0.5;

/// The last seconds of what the speaker was handed, 16 kHz mono.
#[derive(Debug)]
pub struct EchoReference {
    samples: Mutex<VecDeque<f32>>,
    /// What was handed but not yet taken by the echo canceller
    /// ([`crate::audio::aec`]), in play order.
    playing: Mutex<VecDeque<f32>>,
    cap: usize,
}

impl EchoReference {
    /// Keeps the last `seconds` of playback.
    pub fn new(seconds: u32) -> Arc<Self> {
        let cap = (SAMPLE_RATE * seconds.max(1)) as usize;
        Arc::new(Self {
            samples: Mutex::new(VecDeque::with_capacity(cap)),
            playing: Mutex::new(VecDeque::new()),
            cap,
        })
    }

    /// Append a clip (any rate; kept at 16 kHz), dropping the oldest.
    pub fn record(&self, clip: &Clip) {
        let clip = clip.resampled(SAMPLE_RATE);
        let kept = &clip.samples[clip.samples.len().saturating_sub(self.cap)..];
        for queue in [&self.samples, &self.playing] {
            if let Ok(mut queue) = queue.lock() {
                let extra = (queue.len() + kept.len()).saturating_sub(self.cap);
                let drop = extra.min(queue.len());
                queue.drain(..drop);
                queue.extend(kept);
            }
        }
    }

    /// The next `n` samples in play order for the echo canceller, silence
    /// for whatever has not been handed (the speaker is quiet then).
    pub fn take_playing(&self, n: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n);
        if let Ok(mut playing) = self.playing.lock() {
            let take = n.min(playing.len());
            out.extend(playing.drain(..take));
        }
        out.resize(n, 0.0);
        out
    }

    /// Forget what was handed and not yet taken: the speaker was stopped,
    /// or a clip starts on an idle speaker (it plays from now on).
    pub fn restart_playing(&self) {
        if let Ok(mut playing) = self.playing.lock() {
            playing.clear();
        }
    }

    /// A copy of what is kept, oldest first.
    pub fn recent(&self) -> Vec<f32> {
        self.samples
            .lock()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// How much of `mic` (16 kHz) is the recent playback: see [`echo_share`].
    pub fn share_of(&self, mic: &[i16]) -> f32 {
        let reference = self.recent();
        if reference.is_empty() {
            return 0.0;
        }
        let mic: Vec<f32> = mic.iter().map(|&s| f32::from(s) / 32768.0).collect();
        echo_share(&mic, &reference)
    }
}

/// A sink that copies every clip into an [`EchoReference`] and plays it
/// through the inner sink.
pub struct EchoTap {
    inner: Arc<dyn AudioSink>,
    reference: Arc<EchoReference>,
}

impl EchoTap {
    pub fn new(inner: Arc<dyn AudioSink>, reference: Arc<EchoReference>) -> Self {
        Self { inner, reference }
    }
}

impl AudioSink for EchoTap {
    fn play(&self, clip: &Clip) -> Result<(), PlaybackError> {
        if !self.inner.is_playing() {
            self.reference.restart_playing();
        }
        self.reference.record(clip);
        self.inner.play(clip)
    }

    fn play_piece(&self, clip: &Clip) -> Result<(), PlaybackError> {
        if !self.inner.is_playing() {
            self.reference.restart_playing();
        }
        self.reference.record(clip);
        self.inner.play_piece(clip)
    }

    fn end_pieces(&self) {
        self.inner.end_pieces();
    }

    fn stop(&self) {
        self.inner.stop();
        self.reference.restart_playing();
    }

    fn is_playing(&self) -> bool {
        self.inner.is_playing()
    }

    fn played_seconds(&self) -> f64 {
        self.inner.played_seconds()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// The share (0–1) of `mic`'s energy explained by the best delayed and
/// scaled copy of a stretch of `reference` (both 16 kHz): the squared
/// normalised cross-correlation at the best offset. Offsets are searched
/// on 10 ms energy envelopes, then sample by sample (±10 ms) around the
/// best [`CANDIDATES`]. The playback is taken as silence before and after
/// `reference`. 0 when either is silent.
pub fn echo_share(mic: &[f32], reference: &[f32]) -> f32 {
    if mic.len() < FRAME * 4 || reference.is_empty() || energy(mic) < 1e-9 {
        return 0.0;
    }
    // Before and after what was played the speaker was silent: the word
    // may overlap the playback's start or end (the echo comes late).
    let pad = mic.len().div_ceil(FRAME) * FRAME;
    let mut padded = vec![0.0f32; pad];
    padded.extend_from_slice(reference);
    padded.resize(padded.len() + pad, 0.0);
    let reference = padded.as_slice();
    let mic_env = envelope(mic);
    let ref_env = envelope(reference);
    let n = mic_env.len();
    if ref_env.len() < n {
        return 0.0;
    }
    // Coarse: normalised correlation of the mean-removed envelopes.
    let mut scored: Vec<(f32, usize)> = (0..=ref_env.len() - n)
        .map(|lag| (ncc(&mic_env, &ref_env[lag..lag + n]), lag))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mic_norm = energy(mic).sqrt();
    let last = reference.len() - mic.len();
    // Energy of any stretch of the reference in O(1).
    let mut prefix = Vec::with_capacity(reference.len() + 1);
    prefix.push(0.0f64);
    let mut acc = 0.0f64;
    for &x in reference {
        acc += f64::from(x) * f64::from(x);
        prefix.push(acc);
    }
    let mut best = 0.0f32;
    for &(_, lag) in scored.iter().take(CANDIDATES) {
        let centre = lag * FRAME;
        let from = centre.saturating_sub(FRAME);
        let to = (centre + FRAME).min(last);
        for start in from..=to {
            let r_energy = (prefix[start + mic.len()] - prefix[start]).max(0.0);
            if r_energy < 1e-9 {
                continue;
            }
            let r = &reference[start..start + mic.len()];
            let c = dot(mic, r) / (mic_norm * r_energy.sqrt() as f32);
            best = best.max(c * c);
        }
    }
    best.clamp(0.0, 1.0)
}

fn envelope(x: &[f32]) -> Vec<f32> {
    x.chunks_exact(FRAME)
        .map(|f| (energy(f) / FRAME as f32).sqrt())
        .collect()
}

fn energy(x: &[f32]) -> f32 {
    dot(x, x)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight lanes so the release build vectorises it.
    let mut acc = [0.0f32; 8];
    let chunks = a.len().min(b.len()) / 8;
    for i in 0..chunks {
        for k in 0..8 {
            acc[k] += a[i * 8 + k] * b[i * 8 + k];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for i in chunks * 8..a.len().min(b.len()) {
        sum += a[i] * b[i];
    }
    sum
}

/// Normalised cross-correlation of two equal-length series, mean removed.
fn ncc(a: &[f32], b: &[f32]) -> f32 {
    let ma = a.iter().sum::<f32>() / a.len() as f32;
    let mb = b.iter().sum::<f32>() / b.len() as f32;
    let (mut ab, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x - ma, y - mb);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa < 1e-12 || bb < 1e-12 {
        return 0.0;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Speech-like: noise under a syllable-rate envelope (deterministic).
    fn babble(seed: u64, seconds: f32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let n = (seconds * SAMPLE_RATE as f32) as usize;
        (0..n)
            .map(|i| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let white = ((state >> 33) as f32 / (1u64 << 30) as f32) - 1.0;
                let t = i as f32 / SAMPLE_RATE as f32;
                let syllables = (0.5
                    + 0.5 * (t * 2.0 * std::f32::consts::PI * (3.0 + seed as f32 * 0.7)).sin())
                .powi(2);
                0.3 * white * syllables
            })
            .collect()
    }

    fn mix(a: &[f32], b: &[f32], gain_b: f32) -> Vec<f32> {
        a.iter().zip(b).map(|(x, y)| x + gain_b * y).collect()
    }

    #[test]
    fn a_delayed_attenuated_noisy_copy_of_the_playback_is_echo() {
        let reference = babble(1, 8.0);
        for delay_ms in [20usize, 60, 100] {
            let delay = delay_ms * 16;
            // A 1.2 s stretch of the playback, heard `delay` later, at a
            // third of its level, with noise 10 dB below the echo.
            let start = 3 * 16_000;
            let echo: Vec<f32> = reference[start - delay..start - delay + 19_200]
                .iter()
                .map(|s| s * 0.33)
                .collect();
            let noise = babble(99, 1.2);
            let mic = mix(&echo, &noise, 0.33 * 0.316);
            let share = echo_share(&mic, &reference);
            assert!(share > 0.8, "delay {delay_ms} ms: share {share}");
        }
    }

    #[test]
    fn the_users_own_word_is_not_echo_even_over_the_playback() {
        let reference = babble(1, 8.0);
        let word = babble(7, 1.0);
        // Alone.
        let alone = echo_share(&word, &reference);
        assert!(alone < 0.2, "alone: {alone}");
        // Over a quieter echo of the playback (the usual case without
        // echo cancelling: the user is nearer the microphone).
        let echo: Vec<f32> = reference[40_000..56_000].iter().map(|s| s * 0.3).collect();
        let over = echo_share(&mix(&word, &echo, 1.0), &reference);
        assert!(over < ECHO_SHARE, "over the echo: {over}");
    }

    #[test]
    fn silence_and_short_or_empty_input_score_zero() {
        let reference = babble(1, 2.0);
        assert_eq!(echo_share(&[0.0; 16_000], &reference), 0.0);
        assert_eq!(echo_share(&babble(3, 0.01), &reference), 0.0);
        assert_eq!(echo_share(&babble(3, 1.0), &[]), 0.0);
        // Longer than the playback: only the part that overlaps it counts.
        let mut long = vec![0.0f32; 16_000];
        long.extend_from_slice(&reference);
        long.extend(vec![0.0f32; 16_000]);
        assert!(echo_share(&long, &reference) > 0.99);
        let noise = babble(3, 3.0);
        assert!(echo_share(&noise, &reference) < 0.2);
    }

    #[test]
    fn the_reference_keeps_the_last_seconds_at_16k() {
        let r = EchoReference::new(1);
        r.record(&Clip::new(vec![0.5; 22_050], 22_050));
        assert_eq!(r.recent().len(), 16_000);
        r.record(&Clip::new(vec![0.25; 8_000], 16_000));
        let recent = r.recent();
        assert_eq!(recent.len(), 16_000);
        assert!((recent[15_999] - 0.25).abs() < 1e-6);
        assert!((recent[0] - 0.5).abs() < 1e-3);
    }

    #[test]
    fn the_tap_records_what_it_plays() {
        let inner = Arc::new(crate::audio::playback::NullSink::new("test"));
        let r = EchoReference::new(2);
        let tap = EchoTap::new(inner, r.clone());
        let _ = tap.play(&Clip::new(babble(2, 0.5), 16_000));
        assert_eq!(r.recent().len(), 8_000);
        let mic: Vec<i16> = r.recent().iter().map(|s| (s * 20_000.0) as i16).collect();
        assert!(r.share_of(&mic) > 0.99);
    }
}
