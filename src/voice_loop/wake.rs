//! What gates the local microphone in `wake` and `button` mode
//! (`[wake] mode`; `always` has no gate): the detector of
//! [`crate::wake`] (in-process openWakeWord or a Wyoming service), the
//! window a detection or a press opens, and the audio just before a
//! detection, so a request said in the same breath as the wake word loses
//! no word (the wake word is then taken out of the transcript by
//! [`crate::wake::strip`]).
//!
//! A gate without a detector listens to the button only: `button` mode,
//! or a wake model that could not be loaded — then the lights show the
//! error and the device never silently listens to everything.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::audio::playback::Clip;
use crate::audio::SAMPLE_RATE;
use crate::paths::Paths;
use crate::wake::{WakeConfig, WakeDetector, WakeMode};
use crate::wyoming_proto::{WyomingConfig, WyomingUri};

pub use crate::wake::Detection;

/// Audio kept from before a detection and handed to the endpointer with
/// it: the wake word (~0.8 s) and the detector's lag.
pub const PREROLL: Duration = Duration::from_millis(1500);

/// The gate the voice loop holds.
pub struct WakeGate {
    detector: Option<Box<dyn WakeDetector>>,
    mode: WakeMode,
    words: Vec<String>,
    /// Why there is no detector in `wake` mode (the button only).
    failed: Option<String>,
    preroll: VecDeque<i16>,
    /// A detection or a press opened the microphone until then.
    pub(crate) awake_until: Option<Instant>,
    /// `wake.follow_up_ms` / `wake.follow_up_always`.
    follow_up: Duration,
    follow_up_always: bool,
    /// `wake.earcon`: play [`earcon`] when the microphone opens.
    pub(crate) earcon: bool,
    /// Where the wake word ended in the endpointer's time (the end of the
    /// pre-roll it was handed), while the window a detection opened is
    /// being heard; `None` after a press or once the endpointer restarts.
    /// A remote pipeline gets the request from here on, without the wake
    /// word (as firmware streams after its detection).
    pub(crate) word_end_ms: Option<u64>,
}

impl WakeGate {
    /// A gate on the Wyoming wake service at `uri` asking for `names`.
    pub fn start(uri: WyomingUri, names: Vec<String>, w: &WyomingConfig) -> Result<WakeGate> {
        let gate = crate::wake::wyoming::WakeGate::start(uri, names.clone(), w)?;
        Ok(WakeGate::with_detector(Box::new(gate), names))
    }

    /// A gate on any detector, in `wake` mode.
    pub fn with_detector(detector: Box<dyn WakeDetector>, words: Vec<String>) -> WakeGate {
        WakeGate {
            detector: Some(detector),
            mode: WakeMode::Wake,
            words,
            failed: None,
            preroll: VecDeque::new(),
            awake_until: None,
            follow_up: Duration::from_millis(WakeConfig::default().follow_up_ms),
            follow_up_always: false,
            earcon: false,
            word_end_ms: None,
        }
    }

    /// Only the button opens the microphone; `failed` says why when it is
    /// not by choice (the wake model could not be loaded).
    pub fn button_only(failed: Option<String>) -> WakeGate {
        WakeGate {
            detector: None,
            mode: WakeMode::Button,
            words: Vec::new(),
            failed,
            preroll: VecDeque::new(),
            awake_until: None,
            follow_up: Duration::from_millis(WakeConfig::default().follow_up_ms),
            follow_up_always: false,
            earcon: false,
            word_end_ms: None,
        }
    }

    /// The gate `[wake]` asks for; `None` in `always` mode. A detector that
    /// cannot be opened gives a button-only gate carrying the reason (the
    /// caller says it out loud and shows the error).
    pub fn from_config(
        wake: &WakeConfig,
        wyoming: &WyomingConfig,
        paths: &Paths,
    ) -> Option<WakeGate> {
        let mut wake = wake.clone();
        if wake.mode == WakeMode::Wake && !wyoming.wake_uri.trim().is_empty() {
            // A configured wake service is what the owner set up.
            wake.engine = crate::wake::WakeEngine::Wyoming;
        }
        let gate = match wake.mode {
            WakeMode::Always => None,
            WakeMode::Button => Some(WakeGate::button_only(None)),
            WakeMode::Wake => match crate::wake::open(&wake, wyoming, paths) {
                Ok(Some(detector)) => Some(WakeGate::with_detector(
                    detector,
                    wake.effective_words(wyoming),
                )),
                Ok(None) => None,
                Err(e) => Some(WakeGate::button_only(Some(format!("{e:#}")))),
            },
        };
        gate.map(|mut g| {
            g.earcon = wake.earcon;
            g.with_follow_up(wake.follow_up_ms, wake.follow_up_always)
        })
    }

    /// Follow-up listening: `ms` without the wake word after an answer
    /// that asks something (or, `always`, after every answer).
    pub fn with_follow_up(mut self, ms: u64, always: bool) -> WakeGate {
        self.follow_up = Duration::from_millis(ms);
        self.follow_up_always = always;
        self
    }

    /// After an answer: open the window for a follow-up when the answer
    /// asks something (or always, when enabled). True when it did.
    pub(crate) fn follow_up_after(&mut self, answer: &str) -> bool {
        self.follow_up_if(answer.trim_end().ends_with('?'))
    }

    /// As [`WakeGate::follow_up_after`] when the answer's side says
    /// whether it asked (Home Assistant's `continue_conversation`).
    pub(crate) fn follow_up_if(&mut self, asks: bool) -> bool {
        if self.follow_up.is_zero() || !(asks || self.follow_up_always) {
            return false;
        }
        self.awake_until = Some(Instant::now() + self.follow_up);
        true
    }

    /// `wake` or `button`.
    pub fn mode(&self) -> WakeMode {
        self.mode
    }

    /// Why the wake word is not available (button only), if it isn't.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// The wake words (for taking them out of the transcript).
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// For logs: the detector, or why there is none.
    pub fn describe(&self) -> String {
        match (&self.detector, &self.failed) {
            (Some(d), _) => d.describe(),
            (None, Some(_)) => "button only (the wake word is unavailable)".into(),
            (None, None) => "button only".into(),
        }
    }

    /// True while the detector hears (false: none, or a Wyoming service
    /// that is down).
    pub fn is_connected(&self) -> bool {
        self.detector.as_ref().is_some_and(|d| d.is_listening())
    }

    /// A detector is there and hearing: the microphone waits for it. With
    /// none (button only) the microphone waits for a press.
    pub(crate) fn needs_detector_or_button(&self) -> bool {
        match &self.detector {
            Some(d) => d.is_listening(),
            None => true,
        }
    }

    /// A detector is there (not button only).
    pub(crate) fn has_detector(&self) -> bool {
        self.detector.is_some()
    }

    /// Ms of audio fed so far.
    pub fn position_ms(&self) -> u64 {
        self.detector.as_ref().map_or(0, |d| d.position_ms())
    }

    /// Audio heard while waiting: to the detector, and the last
    /// [`PREROLL`] of it kept.
    pub fn feed(&mut self, samples: &[i16]) {
        let keep = (PREROLL.as_millis() as usize) * SAMPLE_RATE as usize / 1000;
        self.preroll.extend(samples.iter().copied());
        while self.preroll.len() > keep {
            self.preroll.pop_front();
        }
        if let Some(d) = self.detector.as_mut() {
            d.feed(samples);
        }
    }

    /// The audio kept from before now (emptied).
    pub fn take_preroll(&mut self) -> Vec<i16> {
        let preroll: Vec<i16> = self.preroll.drain(..).collect();
        self.word_end_ms = Some(preroll.len() as u64 * 1000 / u64::from(SAMPLE_RATE));
        preroll
    }

    /// A detection since the last [`rearm`](Self::rearm), if any.
    pub fn poll(&mut self) -> Option<Detection> {
        self.detector.as_mut().and_then(|d| d.poll())
    }

    /// Wait up to `timeout` for a detection (tests, tools).
    pub fn wait(&mut self, timeout: Duration) -> Option<Detection> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(d) = self.poll() {
                return Some(d);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Forget earlier detections and audio (after a turn).
    pub fn rearm(&mut self) {
        self.preroll.clear();
        if let Some(d) = self.detector.as_mut() {
            d.rearm();
        }
    }
}

/// The wake sound: two short rising notes (E5 → B5, 70 ms each, soft
/// edges) at a third of full scale, 22.05 kHz. Short, so a request said
/// in the same breath is barely covered; tonal, so whisper marks it as an
/// annotation (dropped) rather than a word.
pub fn earcon() -> Clip {
    let rate = 22_050u32;
    let rate_f = rate as f32;
    let mut samples = Vec::new();
    for freq in [659.25f32, 987.77] {
        let n = (0.07 * rate_f) as usize;
        let fade = (0.01 * rate_f) as usize;
        for i in 0..n {
            let edge = (i.min(n - 1 - i) as f32 / fade as f32).min(1.0);
            let t = i as f32 / rate_f;
            samples.push(0.33 * edge * (std::f32::consts::TAU * freq * t).sin());
        }
    }
    Clip::new(samples, rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earcon_is_short_soft_and_rising() {
        let clip = earcon();
        assert!(
            clip.seconds() > 0.1 && clip.seconds() < 0.2,
            "{}",
            clip.seconds()
        );
        let peak = clip.samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
        assert!(peak > 0.3 && peak <= 0.34, "{peak}");
        // Zero crossings per second: the second note is higher.
        let half = clip.samples.len() / 2;
        let crossings = |x: &[f32]| {
            x.windows(2)
                .filter(|w| (w[0] < 0.0) != (w[1] < 0.0))
                .count()
        };
        assert!(crossings(&clip.samples[half..]) > crossings(&clip.samples[..half]) * 14 / 10);
    }

    #[test]
    fn follow_up_listening_opens_after_a_question_or_always_when_enabled() {
        let mut gate = WakeGate::button_only(None).with_follow_up(5000, false);
        assert!(!gate.follow_up_after("It's 3:27 PM."));
        assert_eq!(gate.awake_until, None);
        assert!(gate.follow_up_after("Delete milk? Say yes or no?"));
        let until = gate.awake_until.expect("window open");
        let left = until.saturating_duration_since(Instant::now());
        assert!(left > Duration::from_secs(4) && left <= Duration::from_secs(5));

        let mut always = WakeGate::button_only(None).with_follow_up(3000, true);
        assert!(always.follow_up_after("Done."));
        let mut off = WakeGate::button_only(None).with_follow_up(0, true);
        assert!(!off.follow_up_after("For how long?"));
    }

    #[test]
    fn only_the_last_moments_before_a_detection_are_kept() {
        let mut gate = WakeGate::button_only(None);
        gate.feed(&vec![1i16; 16_000 * 3]);
        gate.feed(&[2i16; 160]);
        let kept = gate.take_preroll();
        assert_eq!(kept.len(), PREROLL.as_millis() as usize * 16);
        assert_eq!(kept.last(), Some(&2));
        assert!(gate.take_preroll().is_empty());
        // Button only: the microphone waits for a press.
        assert!(gate.needs_detector_or_button());
        assert!(!gate.is_connected());
    }
}
