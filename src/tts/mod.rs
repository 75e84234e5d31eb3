//! Text to speech: Piper (local, default), espeak-ng (last resort), Groq.
//!
//! One trait, [`Synthesizer`], one file per engine, and [`Tts`], which
//! tries the engines in the configured order (`tts.order`) and falls back
//! to the next one with a log line when an engine is missing, fails or is
//! too slow. [`sentences`] cuts a streamed answer into sentences and
//! [`speaker::Speaker`] synthesises and queues each one as soon as it is
//! complete, so the first sentence sounds before the LLM has finished.

pub mod cleanup;
pub mod espeak;
pub mod groq;
#[cfg(feature = "onnx")]
pub mod piper;
pub mod sentences;
pub mod speaker;
pub mod wyoming;

use std::time::Instant;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::audio::playback::Clip;
use crate::paths::Paths;
use crate::wyoming_proto::WyomingConfig;

crate::choice! {
    /// A speech engine as `tts.order` names it: the TTS name table.
    pub enum Engine("engine") {
        Piper = "piper": "Piper neural voice on the device (tts.piper_voice)",
        Espeak = "espeak" | "espeak-ng": "espeak-ng, a separate program (robotic, always there)",
        Cloud = "cloud" | "groq": "Groq's speech API (GROQ_API_KEY, tts.cloud_base_url)",
        Wyoming = "wyoming": "a Wyoming TTS service (wyoming.tts_uri)",
    }
}

/// `[tts]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TtsConfig {
    /// Engines in the order tried: `piper`, `espeak`, `cloud` (Groq),
    /// `wyoming` (the service at `wyoming.tts_uri`).
    pub order: Vec<Engine>,
    /// Piper voice (`<name>.onnx` + `.onnx.json` under `models_dir`).
    pub piper_voice: String,
    /// Piper speaking rate: > 1 is slower (the voice's `length_scale`);
    /// 0 = the voice's own default.
    pub piper_length_scale: f32,
    /// Threads ONNX Runtime may use for Piper (0 = ONNX Runtime decides).
    /// Its workers never spin, so 2 is as fast as 1 with a core held by
    /// another process and ~35 % faster on a quiet 2-core board
    /// (measured: notes/voice.md).
    pub piper_threads: usize,
    /// espeak-ng voice name.
    pub espeak_voice: String,
    /// espeak-ng program (a separate process: it is GPL, never linked).
    pub espeak_program: String,
    /// espeak-ng words per minute for its own voice.
    pub espeak_speed: u32,
    /// `TTS_BASE_URL`
    pub cloud_base_url: String,
    /// `GROQ_TTS_MODEL`
    pub cloud_model: String,
    /// `TTS_VOICE`
    pub cloud_voice: String,
    /// Give up on the cloud after this long and speak locally instead.
    pub cloud_timeout_ms: u64,
    /// Speech volume in [0, 1] before the tree's `volume` state applies.
    pub volume: f32,
}

impl Default for TtsConfig {
    fn default() -> Self {
        Self {
            order: vec![Engine::Piper, Engine::Espeak],
            piper_voice: "en_US-joe-medium".into(),
            piper_length_scale: 0.0,
            piper_threads: 2,
            espeak_voice: "en-us".into(),
            espeak_program: "espeak-ng".into(),
            espeak_speed: 165,
            cloud_base_url: "https://api.groq.com/openai/v1".into(),
            cloud_model: "canopylabs/orpheus-v1-english".into(),
            cloud_voice: "autumn".into(),
            cloud_timeout_ms: 4000,
            volume: 1.0,
        }
    }
}

/// One speech engine. `&mut self` because an engine may keep a session
/// (Piper's ONNX session runs one request at a time).
pub trait Synthesizer: Send {
    /// The engine's name as `tts.order` spells it.
    fn name(&self) -> &'static str;
    /// Speak one sentence (already cleaned for speech) into mono audio.
    fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError>;

    /// Speak one sentence as pieces handed to `piece` as soon as each is
    /// made, so playback can begin before the sentence is synthesised
    /// (issue 21: the first answer audio). `piece` returns false to stop
    /// early (the answer was stopped). An engine that makes a sentence in
    /// one go gives one piece.
    fn synthesize_pieces(
        &mut self,
        text: &str,
        piece: &mut dyn FnMut(Clip) -> bool,
    ) -> Result<(), TtsError> {
        let clip = self.synthesize(text)?;
        piece(clip);
        Ok(())
    }
}

/// Why an engine, or the whole chain, gave no speech for a sentence.
/// [`Tts`] moves on to the next engine whatever the kind; callers branch
/// on it (a chain with no engine at all is a set-up problem to report
/// once, every engine failing a run-time one). Each message is one line
/// naming the part that failed and, where there is one, the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TtsError {
    /// The engine cannot be used right now: its program is not installed,
    /// its service is unreachable or skipped after a failure, the shared
    /// engine broke.
    #[error("{0}")]
    EngineUnavailable(String),
    /// No answer within the engine's time limit.
    #[error("{0}")]
    Timeout(String),
    /// The engine ran but gave no usable audio for this sentence (its
    /// model or service failed, the answer was unreadable).
    #[error("{0}")]
    Failed(String),
    /// The chain has no engine (`0`: why each configured one is missing).
    #[error("no text-to-speech engine is available ({0}); install espeak-ng or run scripts/fetch-piper.sh")]
    NoEngine(String),
    /// Every engine failed on this sentence: `engine: reason` each, in
    /// the order tried.
    #[error("every text-to-speech engine failed: {}", .0.join("; "))]
    AllFailed(Vec<String>),
    /// The [`speaker::Speaker`]'s thread could not be started.
    #[error("could not start the speaker thread: {0}")]
    SpeakerThread(String),
}

/// The engines of `tts.order` that could be built, tried in order.
pub struct Tts {
    engines: Vec<Box<dyn Synthesizer>>,
    /// Why a configured engine is not in `engines`, for `say` and logs.
    pub skipped: Vec<String>,
}

/// What [`Tts::synthesize`] produced and how.
#[derive(Debug, Clone)]
pub struct Spoken {
    pub clip: Clip,
    pub engine: &'static str,
    pub ms: f64,
    /// Engines that failed before this one answered (name: reason).
    pub failures: Vec<String>,
}

impl Tts {
    /// Build every engine named in `tts.order`. An engine that cannot be
    /// built (no model, no program, no key) is logged and skipped; the
    /// remaining ones still work.
    ///
    /// `cloud_api_key` is the Groq key (`GROQ_API_KEY`, shared with the
    /// LLM); `wyoming` configures the `wyoming` engine.
    pub fn from_config(
        cfg: &TtsConfig,
        paths: &Paths,
        cloud_api_key: &str,
        wyoming_cfg: &WyomingConfig,
    ) -> Tts {
        let mut engines: Vec<Box<dyn Synthesizer>> = Vec::new();
        let mut skipped = Vec::new();
        for name in &cfg.order {
            let built: Result<Box<dyn Synthesizer>> = match name {
                Engine::Piper => build_piper(cfg, paths),
                Engine::Espeak => {
                    espeak::Espeak::new(cfg).map(|e| Box::new(e) as Box<dyn Synthesizer>)
                }
                Engine::Cloud => groq::GroqTts::new(cfg, cloud_api_key)
                    .map(|e| Box::new(e) as Box<dyn Synthesizer>),
                Engine::Wyoming => wyoming::WyomingTts::from_config(wyoming_cfg)
                    .map(|e| Box::new(e) as Box<dyn Synthesizer>),
            };
            match built {
                Ok(engine) => engines.push(engine),
                Err(e) => {
                    tracing::warn!(engine = %name, "text-to-speech engine unavailable: {e:#}");
                    skipped.push(format!("{name}: {e:#}"));
                }
            }
        }
        Tts { engines, skipped }
    }

    /// A chain of engines given directly (tests, benches).
    pub fn with_engines(engines: Vec<Box<dyn Synthesizer>>) -> Tts {
        Tts {
            engines,
            skipped: Vec::new(),
        }
    }

    /// Names of the engines that will be tried, in order.
    pub fn engine_names(&self) -> Vec<&'static str> {
        self.engines.iter().map(|e| e.name()).collect()
    }

    /// Like [`Tts::synthesize`], piece by piece ([`Synthesizer::synthesize_pieces`]).
    /// An engine that fails before its first piece hands over to the next;
    /// one that fails after it has been heard does not (the next would say
    /// the sentence again from its start), and the error is returned.
    /// Returns the engine that spoke and the synthesis time.
    pub fn synthesize_pieces(
        &mut self,
        text: &str,
        piece: &mut dyn FnMut(Clip) -> bool,
    ) -> Result<(&'static str, f64), TtsError> {
        let (spoke, _failures) = self.first_that_speaks(|engine| {
            let started = Instant::now();
            let mut given = 0usize;
            let result = engine.synthesize_pieces(text, &mut |clip: Clip| {
                if clip.samples.is_empty() {
                    return true;
                }
                given += 1;
                piece(clip)
            });
            match result {
                Ok(()) if given > 0 => Attempt::Spoke((engine.name(), elapsed_ms(started))),
                Ok(()) => Attempt::Silent,
                Err(e) if given > 0 => Attempt::FailedWhenHeard(e),
                Err(e) => Attempt::Failed(e),
            }
        })?;
        Ok(spoke)
    }

    /// Synthesise with the first engine that works; each failure is logged
    /// with the engine that takes over.
    pub fn synthesize(&mut self, text: &str) -> Result<Spoken, TtsError> {
        let ((clip, engine, ms), failures) = self.first_that_speaks(|engine| {
            let started = Instant::now();
            match engine.synthesize(text) {
                Ok(clip) if !clip.samples.is_empty() => {
                    Attempt::Spoke((clip, engine.name(), elapsed_ms(started)))
                }
                Ok(_) => Attempt::Silent,
                Err(e) => Attempt::Failed(e),
            }
        })?;
        Ok(Spoken {
            clip,
            engine,
            ms,
            failures,
        })
    }

    /// The fallback chain both ways of speaking share: `attempt` each
    /// engine in `tts.order` until one speaks, logging each hand-over.
    /// Returns what spoke with the failures before it.
    fn first_that_speaks<T>(
        &mut self,
        mut attempt: impl FnMut(&mut dyn Synthesizer) -> Attempt<T>,
    ) -> Result<(T, Vec<String>), TtsError> {
        let mut failures = Vec::new();
        for engine in &mut self.engines {
            let name = engine.name();
            match attempt(engine.as_mut()) {
                Attempt::Spoke(spoke) => return Ok((spoke, failures)),
                Attempt::FailedWhenHeard(e) => return Err(e),
                Attempt::Silent => {
                    tracing::warn!(
                        engine = name,
                        "text-to-speech returned no audio; trying the next engine"
                    );
                    failures.push(format!("{name}: no audio"));
                }
                Attempt::Failed(e) => {
                    tracing::warn!(
                        engine = name,
                        "text-to-speech failed, trying the next engine: {e:#}"
                    );
                    failures.push(format!("{name}: {e:#}"));
                }
            }
        }
        if self.engines.is_empty() {
            return Err(TtsError::NoEngine(if self.skipped.is_empty() {
                "tts.order is empty".to_string()
            } else {
                self.skipped.join("; ")
            }));
        }
        Err(TtsError::AllFailed(failures))
    }
}

/// How one engine's turn in the fallback chain went.
enum Attempt<T> {
    /// It spoke: this is what the caller returns.
    Spoke(T),
    /// It gave no audio: the next engine tries.
    Silent,
    /// It failed before anything of it was heard: the next engine tries.
    Failed(TtsError),
    /// It failed after some of its audio was heard: no hand-over, since
    /// the next engine would say the sentence again from its start.
    FailedWhenHeard(TtsError),
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

#[cfg(feature = "onnx")]
fn build_piper(cfg: &TtsConfig, paths: &Paths) -> Result<Box<dyn Synthesizer>> {
    Ok(Box::new(piper::Piper::load(cfg, paths)?))
}

#[cfg(not(feature = "onnx"))]
fn build_piper(_cfg: &TtsConfig, _paths: &Paths) -> Result<Box<dyn Synthesizer>> {
    Err(anyhow!(
        "this build has no ONNX Runtime (built without the `onnx` feature); Piper needs it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fails;
    impl Synthesizer for Fails {
        fn name(&self) -> &'static str {
            "cloud"
        }
        fn synthesize(&mut self, _text: &str) -> Result<Clip, TtsError> {
            Err(TtsError::Failed("HTTP 500".into()))
        }
    }
    struct Beep;
    impl Synthesizer for Beep {
        fn name(&self) -> &'static str {
            "espeak"
        }
        fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
            Ok(Clip::new(vec![0.1; text.len()], 16_000))
        }
    }

    #[test]
    fn falls_back_in_order_and_says_why() {
        let mut tts = Tts::with_engines(vec![Box::new(Fails), Box::new(Beep)]);
        let spoken = tts.synthesize("hello").unwrap();
        assert_eq!(spoken.engine, "espeak");
        assert_eq!(spoken.failures.len(), 1);
        assert!(spoken.failures[0].contains("HTTP 500"));
    }

    /// Gives one piece, then fails: an engine that broke mid-sentence.
    struct BreaksAfterOnePiece;
    impl Synthesizer for BreaksAfterOnePiece {
        fn name(&self) -> &'static str {
            "piper"
        }
        fn synthesize(&mut self, _text: &str) -> Result<Clip, TtsError> {
            Err(TtsError::Failed("decoder failed".into()))
        }
        fn synthesize_pieces(
            &mut self,
            _text: &str,
            piece: &mut dyn FnMut(Clip) -> bool,
        ) -> Result<(), TtsError> {
            piece(Clip::new(vec![0.2; 8], 16_000));
            Err(TtsError::Failed("decoder failed".into()))
        }
    }

    #[test]
    fn pieces_fall_back_before_anything_is_heard() {
        let mut tts = Tts::with_engines(vec![Box::new(Fails), Box::new(Beep)]);
        let mut heard = Vec::new();
        let (engine, _) = tts
            .synthesize_pieces("hello", &mut |clip| {
                heard.push(clip.samples.len());
                true
            })
            .unwrap();
        assert_eq!(engine, "espeak");
        assert_eq!(heard, vec![5]);
    }

    #[test]
    fn an_engine_that_fails_after_it_was_heard_does_not_hand_over() {
        let mut tts = Tts::with_engines(vec![Box::new(BreaksAfterOnePiece), Box::new(Beep)]);
        let mut heard = Vec::new();
        let err = tts
            .synthesize_pieces("hello", &mut |clip| {
                heard.push(clip.samples.len());
                true
            })
            .unwrap_err();
        assert!(err.to_string().contains("decoder failed"), "{err}");
        // Only the broken engine's piece: espeak did not start it again.
        assert_eq!(heard, vec![8]);
        // A whole-sentence synthesis of the same chain still falls back.
        assert_eq!(tts.synthesize("hello").unwrap().engine, "espeak");
    }

    #[test]
    fn an_unknown_engine_is_a_clear_error() {
        // Moved to load time: the name table rejects it when the config is
        // read (config::tests::a_choice_names_its_dotted_key_and_line).
        let err = "nonsense".parse::<Engine>().unwrap_err().to_string();
        assert!(err.contains("unknown engine 'nonsense'"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn no_engine_is_a_clear_error() {
        let cfg = TtsConfig {
            order: Vec::new(),
            ..Default::default()
        };
        let mut tts = Tts::from_config(
            &cfg,
            &Paths::new("state", "models"),
            "",
            &WyomingConfig::default(),
        );
        let err = tts.synthesize("hi").unwrap_err();
        assert!(matches!(err, TtsError::NoEngine(_)), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("tts.order is empty"), "{err}");
        assert!(!err.contains('\n'));
    }
}
