//! Does an utterance hold speech at all? Silero VAD v5 says.
//!
//! webrtc-vad, which cuts the microphone into utterances, calls much that
//! is not speech voiced: a fan's hum, music, dishes, clicks. In `[wake]
//! mode = "always"` each of those became a request; whisper wrote "you",
//! "Good." or "beep" for them and the device answered the room (measured:
//! 24 answers to 10 minutes of household noise with no word in it,
//! BENCHMARKS.md "Noise is not a request"). Silero VAD, a small recurrent
//! model (2.3 MB, ~0.1 ms per 32 ms frame), tells speech from noise far
//! better; the loop asks it before any transcription, and an utterance
//! with fewer than `audio.vad.speech_frames` speech frames is dropped.
//!
//! The file is `silero_vad.onnx` from the PyPI wheel `silero-vad` 5.1.2
//! (`scripts/fetch-vad.sh`, sha256 pinned there). Its interface: `input`
//! [1, 64 + 512] float (the last 64 samples of the previous frame, then
//! the frame), `state` [2, 1, 128], `sr` int64 scalar; `output` [1, 1] the
//! probability of speech, `stateN` the next state.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;

use super::SAMPLE_RATE;

/// The model's file name in `models_dir`.
pub const MODEL_FILE: &str = "silero_vad.onnx";
/// Samples per frame at 16 kHz (32 ms), the only size v5 takes there.
const FRAME: usize = 512;
/// Samples of the previous frame the model sees before each frame.
const CONTEXT: usize = 64;
/// Size of the recurrent state.
const STATE: usize = 2 * 128;
/// A frame at or above this probability is speech (Silero's own default).
pub const SPEECH_PROBABILITY: f32 = 0.5;

/// What the detector made of some audio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// Frames at or above [`SPEECH_PROBABILITY`] (counting stops once
    /// the number asked for is reached).
    pub speech_frames: u32,
    /// Frames looked at.
    pub frames: u32,
    /// The highest probability seen.
    pub max_probability: f32,
}

/// A loaded Silero VAD.
pub struct Silero {
    session: Session,
    path: PathBuf,
}

impl Silero {
    /// Load `models_dir/silero_vad.onnx`; one frame of silence runs
    /// through it, so a file of the wrong insides fails here.
    pub fn load(paths: &crate::paths::Paths) -> Result<Silero> {
        let path = paths.models_dir.join(MODEL_FILE);
        if !path.is_file() {
            bail!(
                "the speech detector {} is missing; run scripts/fetch-models.sh (or scripts/fetch-vad.sh), or set audio.vad.speech_check = false",
                path.display()
            );
        }
        let env = crate::onnx::environment(paths)?;
        let bad = |e: ort::Error| {
            anyhow!(
                "the speech detector {} cannot be loaded ({}); run scripts/fetch-vad.sh to fetch it again",
                path.display(),
                e.to_string().replace('\n', " ")
            )
        };
        let session = Session::builder(&env)
            .map_err(bad)?
            .with_optimization_level(GraphOptimizationLevel::Disable)
            .map_err(|e| bad(e.into()))?
            .with_memory_pattern(false)
            .map_err(|e| bad(e.into()))?
            // Its tensors are a few KB: an arena would only hold memory.
            .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(false).build()])
            .map_err(|e| bad(e.into()))?
            .with_intra_threads(1)
            .map_err(|e| bad(e.into()))?
            .commit_from_file(&path)
            .map_err(bad)?;
        let mut silero = Silero { session, path };
        silero
            .check(&vec![0.0; FRAME], 1)
            .map_err(|e| anyhow!("{e:#}; run scripts/fetch-vad.sh to fetch it again"))?;
        Ok(silero)
    }

    /// Run the detector over `audio` (16 kHz) from a fresh state, frame
    /// by frame, until `enough` speech frames were found (then the rest
    /// is not looked at: a request is usually settled in its first
    /// tenth of a second of speech).
    pub fn check(&mut self, audio: &[f32], enough: u32) -> Result<Verdict> {
        debug_assert_eq!(SAMPLE_RATE, 16_000);
        let mut state = vec![0.0f32; STATE];
        let mut context = [0.0f32; CONTEXT];
        let mut verdict = Verdict {
            speech_frames: 0,
            frames: 0,
            max_probability: 0.0,
        };
        for frame in audio.chunks_exact(FRAME) {
            let mut input = Vec::with_capacity(CONTEXT + FRAME);
            input.extend_from_slice(&context);
            input.extend_from_slice(frame);
            context.copy_from_slice(&frame[FRAME - CONTEXT..]);
            let (p, next) = self.step(input, std::mem::take(&mut state))?;
            state = next;
            verdict.frames += 1;
            verdict.max_probability = verdict.max_probability.max(p);
            if p >= SPEECH_PROBABILITY {
                verdict.speech_frames += 1;
                if verdict.speech_frames >= enough {
                    break;
                }
            }
        }
        Ok(verdict)
    }

    fn step(&mut self, input: Vec<f32>, state: Vec<f32>) -> Result<(f32, Vec<f32>)> {
        let path = self.path.display().to_string();
        let err = |what: &str, e: ort::Error| {
            anyhow!(
                "the speech detector {path}: {what}: {}",
                e.to_string().replace('\n', " ")
            )
        };
        let input =
            Tensor::from_array(([1usize, CONTEXT + FRAME], input)).map_err(|e| err("input", e))?;
        let state = Tensor::from_array(([2usize, 1, 128], state)).map_err(|e| err("state", e))?;
        let rate = Tensor::from_array(([0usize; 0], vec![i64::from(SAMPLE_RATE)]))
            .map_err(|e| err("rate", e))?;
        let outputs = self
            .session
            .run(ort::inputs![
                "input" => input,
                "state" => state,
                "sr" => rate,
            ])
            .map_err(|e| err("run", e))?;
        let (_, p) = outputs[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| err("output", e))?;
        let (_, next) = outputs[1]
            .try_extract_tensor::<f32>()
            .map_err(|e| err("state out", e))?;
        match (p.first(), next.len()) {
            (Some(&p), STATE) => Ok((p, next.to_vec())),
            (p, n) => bail!(
                "the speech detector {path} gave {} probabilities and a state of {n}, not 1 and {STATE}; run scripts/fetch-vad.sh to fetch it again",
                usize::from(p.is_some())
            ),
        }
    }

    /// The model's path, for messages and `doctor`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
