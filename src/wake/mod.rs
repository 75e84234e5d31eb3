//! The wake word: what gates the local microphone (`[wake]`).
//!
//! [`WakeDetector`] is the seam the voice loop holds; two backends sit
//! behind it, chosen by `wake.engine`:
//! - `onnx` ([`onnx`], the default): openWakeWord's pipeline in-process on
//!   ONNX Runtime, models from `models_dir` (`scripts/fetch-wake.sh`);
//! - `wyoming` ([`wyoming`]): a Wyoming wake service (wyoming-openwakeword)
//!   at `wyoming.wake_uri`.
//!
//! `wake.mode` says whether the microphone needs the wake word at all
//! (`wake`, the default), only the button opens it (`button`), or every
//! sentence is a request (`always`, the behaviour before issue 17).
//! [`strip`] takes the wake word out of the transcript.

pub mod bench;
pub mod eval;
pub mod onnx;
pub mod strip;
pub mod wyoming;

use serde::{Deserialize, Serialize};

use crate::paths::Paths;
use crate::wyoming_proto::WyomingConfig;

crate::choice! {
    /// What opens the local microphone (`wake.mode`, `--wake`,
    /// `EARSHOT_WAKE_MODE`).
    pub enum WakeMode("wake mode") {
        Wake = "wake": "the wake word (or a button press) starts a request",
        Button = "button": "only a button press starts a request",
        Always = "always": "every sentence heard is a request (no wake word)",
    }
}

crate::choice! {
    /// Which detector hears the wake word (`wake.engine`).
    pub enum WakeEngine("wake engine") {
        Onnx = "onnx": "openWakeWord in-process on ONNX Runtime (models_dir)",
        Wyoming = "wyoming": "a Wyoming wake service at wyoming.wake_uri",
    }
}

/// `[wake]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WakeConfig {
    /// wake | button | always (default wake).
    pub mode: WakeMode,
    /// onnx | wyoming (default onnx).
    pub engine: WakeEngine,
    /// Wake words: model names in `models_dir` (`hey_jarvis` →
    /// `hey_jarvis_v0.1.onnx`) or, with the Wyoming engine, the service's
    /// names. `wyoming.wake_words` is an alias.
    pub words: Vec<String>,
    /// A frame whose probability is at least this counts (0–1, default 0.5,
    /// as wyoming-openwakeword).
    pub threshold: f32,
    /// Frames (80 ms) at or above the threshold before it fires (default 1).
    pub trigger_frames: u32,
    /// After a detection, the same word cannot fire again for this long.
    pub refractory_ms: u64,
    /// Follow-up listening: after an answer that asks something (ends in
    /// "?"), the next request needs no wake word for this long (0 = never).
    pub follow_up_ms: u64,
    /// Follow-up listening after every answer, not only questions.
    pub follow_up_always: bool,
    /// While the device talks or rings, the wake word or a stop word
    /// ("stop", "enough", "be quiet") cuts it off (`voice_loop::interrupt`).
    pub stop_word: bool,
    /// A short rising two-note sound when the wake word (or a press) opens
    /// the microphone. Whisper's annotation of it ("[BEEP]") is dropped
    /// from the transcript, so it never becomes part of a request.
    pub earcon: bool,
}

impl Default for WakeConfig {
    fn default() -> Self {
        WakeConfig {
            mode: WakeMode::Wake,
            engine: WakeEngine::Onnx,
            words: vec!["hey_jarvis".into()],
            threshold: 0.5,
            trigger_frames: 1,
            refractory_ms: 2000,
            follow_up_ms: 5000,
            follow_up_always: false,
            stop_word: true,
            earcon: true,
        }
    }
}

impl WakeConfig {
    /// Checks serde cannot express; each error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err("wake.threshold must be above 0 and at most 1 (default 0.5)".into());
        }
        if self.trigger_frames == 0 || self.trigger_frames > 50 {
            return Err("wake.trigger_frames must be between 1 and 50 (default 1)".into());
        }
        if self.follow_up_ms > 60_000 {
            return Err("wake.follow_up_ms must be at most 60000 (default 5000)".into());
        }
        if self.refractory_ms > 60_000 {
            return Err("wake.refractory_ms must be at most 60000 (default 2000)".into());
        }
        Ok(())
    }

    /// The first word in effect (what a bench or eval measures when none
    /// is named), `hey_jarvis` if the list is empty.
    pub fn first_word(&self, wyoming: &WyomingConfig) -> String {
        self.effective_words(wyoming)
            .into_iter()
            .next()
            .unwrap_or_else(|| "hey_jarvis".into())
    }

    /// The words in effect: `wake.words`, unless it is the default and the
    /// older `wyoming.wake_words` names some.
    pub fn effective_words(&self, wyoming: &WyomingConfig) -> Vec<String> {
        if self.words == WakeConfig::default().words && !wyoming.wake_words.is_empty() {
            wyoming.wake_words.clone()
        } else {
            self.words.clone()
        }
    }
}

/// One detection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// The word that fired (`hey_jarvis`; a Wyoming service names its
    /// model, `hey_jarvis_v0.1`).
    pub name: String,
    /// Position in the fed audio (ms since the detector started) it fired
    /// at, when known.
    pub timestamp_ms: Option<u64>,
}

/// A wake-word detector in front of the microphone: the loop feeds it
/// every sample while it waits and polls for a detection.
pub trait WakeDetector: Send {
    /// 16 kHz mono samples, in order. Never blocks for long.
    fn feed(&mut self, samples: &[i16]);
    /// A detection since the last [`rearm`](Self::rearm), if any.
    fn poll(&mut self) -> Option<Detection>;
    /// Forget earlier detections (after a turn).
    fn rearm(&mut self);
    /// False while the detector cannot hear (a Wyoming service that is
    /// down): the loop then listens without a wake word.
    fn is_listening(&self) -> bool;
    /// Ms of audio fed so far.
    fn position_ms(&self) -> u64;
    /// For logs and doctor: engine and models.
    fn describe(&self) -> String;
}

/// Open the detector `[wake]` asks for. `Ok(None)`: mode `always` or
/// `button` (no detector). An error is one line with the fix; the caller
/// falls back to the button (never to listening to everything).
pub fn open(
    config: &WakeConfig,
    wyoming: &WyomingConfig,
    paths: &Paths,
) -> anyhow::Result<Option<Box<dyn WakeDetector>>> {
    if config.mode != WakeMode::Wake {
        return Ok(None);
    }
    match config.engine {
        WakeEngine::Wyoming => {
            let mut w = wyoming.clone();
            w.wake_words = config.effective_words(wyoming);
            match wyoming::WakeGate::from_config(&w)? {
                Some(gate) => Ok(Some(Box::new(gate))),
                None => Err(anyhow::anyhow!(
                    "wake.engine = \"wyoming\" needs wyoming.wake_uri (e.g. tcp://127.0.0.1:10400); set it or use engine = \"onnx\""
                )),
            }
        }
        WakeEngine::Onnx => open_onnx(config, wyoming, paths),
    }
}

#[cfg(feature = "onnx")]
fn open_onnx(
    config: &WakeConfig,
    wyoming: &WyomingConfig,
    paths: &Paths,
) -> anyhow::Result<Option<Box<dyn WakeDetector>>> {
    let mut c = config.clone();
    c.words = config.effective_words(wyoming);
    Ok(Some(Box::new(onnx::OnnxWake::load(&c, paths)?)))
}

#[cfg(not(feature = "onnx"))]
fn open_onnx(
    _config: &WakeConfig,
    _wyoming: &WyomingConfig,
    _paths: &Paths,
) -> anyhow::Result<Option<Box<dyn WakeDetector>>> {
    anyhow::bail!("this build has no ONNX Runtime (built without the `onnx` feature); use wake.engine = \"wyoming\" or mode = \"button\"")
}
