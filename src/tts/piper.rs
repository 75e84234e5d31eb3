//! Piper voices (VITS exported to ONNX) through ONNX Runtime: natural local
//! speech with no network.
//!
//! Text → IPA phonemes from the espeak-ng *program* (GPL: run, never
//! linked) → ids through the voice's `phoneme_id_map` (Piper's layout:
//! `^`, `_`, then every phoneme followed by `_`, then `$`) → the model →
//! 22.05 kHz mono audio. espeak-ng splits clauses and drops their
//! punctuation; we put the punctuation back because the voice was trained
//! with it (it shapes pauses and intonation).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{RunOptions, Session};
use ort::value::Tensor;
use serde::Deserialize;

use super::TtsConfig;
use super::{espeak, Synthesizer, TtsError};
use crate::audio::playback::Clip;
use crate::paths::Paths;

const FETCH_HINT: &str = "run scripts/fetch-piper.sh, or set tts.order without piper";

/// The parts of `<voice>.onnx.json` we use.
#[derive(Debug, Deserialize)]
struct VoiceFile {
    audio: AudioSection,
    #[serde(default)]
    espeak: EspeakSection,
    inference: InferenceSection,
    phoneme_id_map: HashMap<String, Vec<i64>>,
    #[serde(default)]
    num_speakers: u32,
}

#[derive(Debug, Deserialize)]
struct AudioSection {
    sample_rate: u32,
}

#[derive(Debug, Deserialize, Default)]
struct EspeakSection {
    #[serde(default)]
    voice: String,
}

#[derive(Debug, Deserialize)]
struct InferenceSection {
    noise_scale: f32,
    length_scale: f32,
    noise_w: f32,
}

/// How a voice's model runs.
enum Graph {
    /// The voice as one graph: a run's memory grows with its audio.
    Whole(Session),
    /// The voice cut at its decoder (`scripts/split-piper.py`): the
    /// decoder runs over the latent frames in windows, so a run's memory
    /// no longer grows with the sentence (issue 21, point 4). The
    /// encoder as fetched keeps its convolution weights in 8 bits (the
    /// script says why); nothing here depends on that.
    Split {
        encoder: Session,
        decoder: Session,
        /// Latent frames each decoder run keeps; 0 decodes whole (the
        /// load-time check found the margin too small for this voice).
        window: usize,
    },
}

/// Latent frames (256 samples each, ~11.6 ms) one decoder run keeps:
/// ~1.9 s of sound, so a command's answer is one run (no time lost) and a
/// long one is bounded. Measured with ONNX Runtime, 2 threads, 160
/// phonemes: the peak over the loaded voice is ~52 MB at 150 frames and
/// ~27 MB at 64, against ~96 MB whole; 64 made every sentence 15–30 %
/// slower to synthesise (notes/latency.md, stop 44).
pub const WINDOW_FRAMES: usize = 160;
/// Latent frames read on each side of a window and then dropped: the
/// decoder's convolutions reach this far, so the kept samples are the
/// whole run's (joe-medium, largest difference relative to the peak:
/// 1e-6 from 10 frames on, 2e-3 at 8, 6e-2 at 4).
pub const MARGIN_FRAMES: usize = 12;

/// A loaded Piper voice.
pub struct Piper {
    graph: Graph,
    /// Every run gives back the arena memory it grew by: ONNX Runtime's
    /// CPU arena otherwise keeps each extension (doubling) for the
    /// longest sentence so far, and `earshot run`'s resident memory grew
    /// ~35 MB per dozen answers (issue 21's flat memory over 100 turns;
    /// heaptrack: 117 MB in 3 arena allocations under `synthesize`).
    run_options: RunOptions,
    ids: HashMap<char, Vec<i64>>,
    /// The loudest raw sample of the probe sentence at load: where the
    /// gain of a sentence spoken piece by piece starts ([`Leveller`]).
    reference_peak: f32,
    sample_rate: u32,
    scales: [f32; 3],
    multi_speaker: bool,
    /// espeak-ng, kept running for the voice's phonemes.
    phonemes: espeak::Phonemes,
    /// The `.onnx` file, for messages.
    model: PathBuf,
}

impl Piper {
    /// Load `models_dir/<tts.piper_voice>.onnx` and its `.onnx.json`.
    pub fn load(tts: &TtsConfig, paths: &Paths) -> Result<Piper> {
        let model = voice_path(tts, paths);
        let json = PathBuf::from(format!("{}.json", model.display()));
        if !model.is_file() {
            bail!("Piper voice {} is missing; {FETCH_HINT}", model.display());
        }
        if !json.is_file() {
            bail!(
                "Piper voice settings {} are missing; {FETCH_HINT}",
                json.display()
            );
        }
        espeak::check_program(&tts.espeak_program)?;
        let voice: VoiceFile = serde_json::from_str(
            &std::fs::read_to_string(&json)
                .with_context(|| format!("cannot read {}", json.display()))?,
        )
        .map_err(|e| {
            anyhow!(
                "Piper voice settings {} are not valid ({e}); {FETCH_HINT}",
                json.display()
            )
        })?;
        let ids = phoneme_ids(&voice.phoneme_id_map)
            .with_context(|| format!("Piper voice settings {}", json.display()))?;
        let env = crate::onnx::environment(paths)?;
        let bad = |e: ort::Error| {
            anyhow!(
                "Piper voice {} cannot be loaded ({}); {FETCH_HINT}",
                model.display(),
                e.to_string().replace('\n', " ")
            )
        };
        // No memory pattern: ONNX Runtime keeps one planned pattern per
        // input shape for ever, and every sentence is a new phoneme count,
        // so `earshot run` grew ~12 MB per dozen answers (issue 21's flat
        // memory; ORT's Python API on 60 sentences: 255 → 290 MB with it,
        // 251 → 253 MB without).
        let mut builder = Session::builder(&env)
            .map_err(bad)?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| bad(e.into()))?
            .with_memory_pattern(false)
            .map_err(|e| bad(e.into()))?;
        // No spinning: a worker that spins between operations takes a
        // core a busy neighbour needs, and two spinning threads on a
        // 2-core board with one core held were 25 % slower than one
        // thread; without spinning two threads are as fast as one there
        // and ~35 % faster on a quiet board (notes/voice.md).
        builder = builder
            .with_intra_op_spinning(false)
            .map_err(|e| bad(e.into()))?;
        if tts.piper_threads > 0 {
            builder = builder
                .with_intra_threads(tts.piper_threads)
                .map_err(|e| bad(e.into()))?;
        }
        let (encoder_path, decoder_path) = split_paths(&model);
        let split = encoder_path.is_file() && decoder_path.is_file();
        let session = if split {
            builder
                .clone()
                .commit_from_file(&encoder_path)
                .map_err(bad)?
        } else {
            builder.clone().commit_from_file(&model).map_err(bad)?
        };
        let decoder = if split {
            let decoder = builder.commit_from_file(&decoder_path).map_err(bad)?;
            let shape_ok = decoder.inputs().len() == 1
                && decoder.inputs()[0].name() == LATENT
                && session.outputs().len() == 1
                && session.outputs()[0].name() == LATENT;
            if !shape_ok {
                bail!(
                    "{} and {} are not a Piper voice cut by scripts/split-piper.py; delete them and run scripts/fetch-piper.sh",
                    encoder_path.display(),
                    decoder_path.display()
                );
            }
            Some(decoder)
        } else {
            None
        };
        let names: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
        for needed in ["input", "input_lengths", "scales"] {
            if !names.contains(&needed) {
                bail!(
                    "{} is not a Piper voice (no '{needed}' input; inputs: {}); {FETCH_HINT}",
                    model.display(),
                    names.join(", ")
                );
            }
        }
        let multi_speaker = voice.num_speakers > 1 && names.contains(&"sid");
        let length_scale = if tts.piper_length_scale > 0.0 {
            tts.piper_length_scale
        } else {
            voice.inference.length_scale
        };
        let espeak_voice = if voice.espeak.voice.is_empty() {
            tts.espeak_voice.clone()
        } else {
            voice.espeak.voice.clone()
        };
        let mut run_options = RunOptions::new().map_err(bad)?;
        run_options
            .set("memory.enable_memory_arena_shrinkage", "cpu:0")
            .map_err(bad)?;
        let graph = match decoder {
            Some(decoder) => Graph::Split {
                encoder: session,
                decoder,
                window: WINDOW_FRAMES,
            },
            None => Graph::Whole(session),
        };
        let mut piper = Piper {
            graph,
            run_options,
            ids,
            reference_peak: 0.0,
            sample_rate: voice.audio.sample_rate,
            scales: [
                voice.inference.noise_scale,
                length_scale,
                voice.inference.noise_w,
            ],
            multi_speaker,
            phonemes: espeak::Phonemes::new(&tts.espeak_program, &espeak_voice),
            model,
        };
        // ONNX Runtime's first run allocates and plans; pay that at start,
        // not on the first answer.
        let warm = Instant::now();
        if matches!(piper.graph, Graph::Split { .. }) {
            piper.check_windows()?;
        } else if let Some(run) = piper.phoneme_runs(PROBE)?.first() {
            let mut raw = Vec::new();
            let ids = piper.ids_for(run);
            piper.run_model(ids, &mut raw)?;
            piper.reference_peak = peak(&raw);
        }
        tracing::debug!(ms = warm.elapsed().as_millis() as u64, "Piper warmed up");
        Ok(piper)
    }

    /// Whether the voice decodes in windows (for `doctor` and logs).
    pub fn decodes_in_windows(&self) -> bool {
        matches!(self.graph, Graph::Split { window, .. } if window > 0)
    }

    /// The largest difference, relative to the peak, between `text`'s
    /// first run decoded whole and decoded in windows of `window` frames
    /// (from the same latent frames). 0 for a voice that is not split.
    /// Why public: the tests hold the windows to the whole decoder.
    pub fn window_difference(&mut self, text: &str, window: usize) -> Result<f32, TtsError> {
        Ok(self.probe(text, window)?.0)
    }

    /// [`Piper::window_difference`], and the whole decoding's raw peak.
    fn probe(&mut self, text: &str, window: usize) -> Result<(f32, f32), TtsError> {
        if !matches!(self.graph, Graph::Split { .. }) {
            return Ok((0.0, 0.0));
        }
        let ids = match self.phoneme_runs(text)?.first() {
            Some(run) => self.ids_for(run),
            None => return Ok((0.0, 0.0)),
        };
        let latent = self.encode(ids)?;
        let whole = self.decode(&latent, 0)?;
        let windowed = self.decode(&latent, window)?;
        let top = peak(&whole).max(1e-6);
        let difference = if whole.len() == windowed.len() {
            whole
                .iter()
                .zip(&windowed)
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()))
                / top
        } else {
            f32::INFINITY
        };
        Ok((difference, top))
    }

    /// The windowed decoder must give the whole decoder's samples: decode
    /// one probe sentence both ways, in small windows so it has seams (it
    /// is also the warm-up run that plans and allocates at start). A
    /// voice whose decoder reaches further than [`MARGIN_FRAMES`] decodes
    /// whole (its memory grows with the sentence again), with a warning.
    fn check_windows(&mut self) -> Result<(), TtsError> {
        if !matches!(self.graph, Graph::Split { .. }) {
            return Ok(());
        }
        let (worst, top) = self.probe(PROBE, PROBE_WINDOW)?;
        self.reference_peak = top;
        if worst > WINDOW_TOLERANCE {
            tracing::warn!(
                voice = %self.model.display(),
                difference = worst,
                "Piper's decoder reaches further than its window margin; decoding whole sentences (more memory)"
            );
            if let Graph::Split { window, .. } = &mut self.graph {
                *window = 0;
            }
        }
        Ok(())
    }

    /// The voice's output rate.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// The phoneme strings of `text`, one per model run: whole clauses
    /// (with their punctuation) up to [`MAX_RUN_PHONEMES`] each.
    pub fn phoneme_runs(&self, text: &str) -> Result<Vec<String>, TtsError> {
        let clauses = self.phonemes.clauses(text)?;
        Ok(runs_of(&clauses, &clause_marks(text), MAX_RUN_PHONEMES))
    }

    /// Model input ids for a phoneme string.
    pub fn ids_for(&self, phonemes: &str) -> Vec<i64> {
        encode(&self.ids, phonemes)
    }

    /// One model run: the raw audio for `ids`, appended to `audio`.
    fn run_model(&mut self, ids: Vec<i64>, audio: &mut Vec<f32>) -> Result<(), TtsError> {
        match self.graph {
            Graph::Whole(ref mut session) => {
                let inputs = inputs(ids, self.scales, self.multi_speaker, &self.model)?;
                let (_, samples) = first_output(session, inputs, &self.run_options, &self.model)?;
                audio.extend(samples);
            }
            Graph::Split { window, .. } => {
                let latent = self.encode(ids)?;
                audio.extend(self.decode(&latent, window)?);
            }
        }
        Ok(())
    }

    /// The encoder's latent frames for `ids` (split voices only).
    fn encode(&mut self, ids: Vec<i64>) -> Result<Latent, TtsError> {
        let inputs = inputs(ids, self.scales, self.multi_speaker, &self.model)?;
        let Graph::Split { encoder, .. } = &mut self.graph else {
            return Err(TtsError::Failed("Piper: not a split voice".into()));
        };
        let (dims, values) = first_output(encoder, inputs, &self.run_options, &self.model)?;
        match dims[..] {
            [1, channels, frames] if channels > 0 && frames >= 0 => Ok(Latent {
                channels: channels as usize,
                frames: frames as usize,
                values,
            }),
            _ => Err(TtsError::Failed(format!(
                "Piper ({}): the encoder gave latent frames of shape {dims:?}, not [1, C, T]; run scripts/fetch-piper.sh",
                self.model.display()
            ))),
        }
    }

    /// The decoder's samples for `latent`, in windows of `window` frames
    /// (0: one run over every frame).
    fn decode(&mut self, latent: &Latent, window: usize) -> Result<Vec<f32>, TtsError> {
        let mut audio = Vec::new();
        self.decode_each(
            latent,
            &windows(latent.frames, window, window, MARGIN_FRAMES),
            &mut |s| {
                audio.extend_from_slice(s);
                true
            },
        )?;
        Ok(audio)
    }

    /// Run the decoder over each of `windows`, handing each window's kept
    /// samples to `each` as soon as they are made; `each` returns false to
    /// stop.
    fn decode_each(
        &mut self,
        latent: &Latent,
        windows: &[Window],
        each: &mut dyn FnMut(&[f32]) -> bool,
    ) -> Result<(), TtsError> {
        let Graph::Split { decoder, .. } = &mut self.graph else {
            return Err(TtsError::Failed("Piper: not a split voice".into()));
        };
        for w in windows {
            let frames = w.hi - w.lo;
            let tensor =
                Tensor::from_array(([1usize, latent.channels, frames], latent.slice(w.lo, w.hi)))
                    .map_err(|e| failed(&self.model, e))?;
            let (_, samples) = first_output(
                decoder,
                ort::inputs![LATENT => tensor],
                &self.run_options,
                &self.model,
            )?;
            if frames == 0 || samples.len() % frames != 0 {
                return Err(TtsError::Failed(format!(
                    "Piper ({}): the decoder gave {} samples for {frames} frames; run scripts/fetch-piper.sh",
                    self.model.display(),
                    samples.len()
                )));
            }
            let per_frame = samples.len() / frames;
            let from = w.keep_from * per_frame;
            if !each(&samples[from..from + w.keep * per_frame]) {
                break;
            }
        }
        Ok(())
    }
}

/// The loudest finite sample.
fn peak(audio: &[f32]) -> f32 {
    audio
        .iter()
        .filter(|s| s.is_finite())
        .fold(0.0f32, |m, s| m.max(s.abs()))
}

/// Scales a sentence's pieces as they are made. Piper's own step scales
/// the whole sentence by its loudest sample, known only at its end; here
/// the gain follows the loudest sample so far, starting from the voice's
/// level at load, so it only ever steps down and never clips. The
/// silence before the first sound is dropped as [`trim_lead`] does.
struct Leveller {
    peak: f32,
    heard: bool,
    keep: usize,
}

impl Leveller {
    fn new(reference_peak: f32, sample_rate: u32) -> Leveller {
        Leveller {
            peak: reference_peak,
            heard: false,
            keep: (sample_rate * LEAD_KEEP_MS / 1000) as usize,
        }
    }

    fn level(&mut self, raw: &[f32]) -> Vec<f32> {
        self.peak = self.peak.max(peak(raw));
        let mut out = scaled(raw, self.peak);
        if !self.heard {
            match out.iter().position(|s| s.abs() >= LEAD_SILENCE) {
                Some(first) => {
                    self.heard = true;
                    out.drain(..first.saturating_sub(self.keep));
                }
                None => out.clear(),
            }
        }
        out
    }
}

/// The voice's inputs for one run of `ids`.
fn inputs(
    ids: Vec<i64>,
    scales: [f32; 3],
    multi_speaker: bool,
    model: &std::path::Path,
) -> Result<Vec<(String, ort::value::DynValue)>, TtsError> {
    let n = ids.len();
    let input = Tensor::from_array(([1usize, n], ids)).map_err(|e| failed(model, e))?;
    let lengths = Tensor::from_array(([1usize], vec![n as i64])).map_err(|e| failed(model, e))?;
    let scales = Tensor::from_array(([3usize], scales.to_vec())).map_err(|e| failed(model, e))?;
    let mut inputs: Vec<(String, ort::value::DynValue)> = vec![
        ("input".into(), input.into_dyn()),
        ("input_lengths".into(), lengths.into_dyn()),
        ("scales".into(), scales.into_dyn()),
    ];
    if multi_speaker {
        let sid = Tensor::from_array(([1usize], vec![0i64])).map_err(|e| failed(model, e))?;
        inputs.push(("sid".into(), sid.into_dyn()));
    }
    Ok(inputs)
}

/// One run of `session` (the whole voice or one of its parts): the shape
/// and values of its first output.
fn first_output<'i>(
    session: &mut Session,
    inputs: impl Into<ort::session::SessionInputs<'i, 'i>>,
    options: &RunOptions,
    model: &std::path::Path,
) -> Result<(Vec<i64>, Vec<f32>), TtsError> {
    let outputs = session
        .run_with_options(inputs, options)
        .map_err(|e| failed(model, e))?;
    let (shape, values) = outputs[0]
        .try_extract_tensor::<f32>()
        .map_err(|e| no_audio(model, e))?;
    Ok((shape.iter().copied().collect(), values.to_vec()))
}

fn failed(model: &std::path::Path, e: impl std::fmt::Display) -> TtsError {
    TtsError::Failed(format!(
        "Piper ({}) failed: {}",
        model.display(),
        e.to_string().replace('\n', " ")
    ))
}

fn no_audio(model: &std::path::Path, e: impl std::fmt::Display) -> TtsError {
    TtsError::Failed(format!(
        "Piper ({}) returned no audio: {}",
        model.display(),
        e.to_string().replace('\n', " ")
    ))
}

/// Kept frames of a sentence's first window when it is spoken piece by
/// piece: ~280 ms of audio, decoded in ~15 ms, so its sound can start
/// while the rest is decoded (issue 21's first answer audio).
pub const FIRST_WINDOW_FRAMES: usize = 24;
/// The sentence the load-time check speaks.
const PROBE: &str = "Ready.";
/// Kept frames per window of the load-time check ("Ready." is ~40
/// frames: three seams).
const PROBE_WINDOW: usize = 12;
/// The name of the tensor where `scripts/split-piper.py` cuts a voice.
const LATENT: &str = "latent";
/// Largest difference (relative to the peak) allowed between windowed and
/// whole decoding at load; float noise between the two is ~1e-6.
const WINDOW_TOLERANCE: f32 = 1e-3;

/// The encoder's output: `[1, channels, frames]`, row-major.
struct Latent {
    channels: usize,
    frames: usize,
    values: Vec<f32>,
}

impl Latent {
    /// Frames `lo..hi` of every channel, as a `[1, channels, hi - lo]` array.
    fn slice(&self, lo: usize, hi: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.channels * (hi - lo));
        for c in 0..self.channels {
            let row = c * self.frames;
            out.extend_from_slice(&self.values[row + lo..row + hi]);
        }
        out
    }
}

/// One decoder run: frames `lo..hi` are read, and `keep` frames' samples
/// from frame `lo + keep_from` on are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    lo: usize,
    hi: usize,
    keep_from: usize,
    keep: usize,
}

/// Cover `frames` latent frames with windows of `window` kept frames
/// (the first one `first`), each read with up to `margin` frames on either
/// side (a size of 0 = the rest in one window).
fn windows(frames: usize, first: usize, window: usize, margin: usize) -> Vec<Window> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < frames {
        let size = if start == 0 { first } else { window };
        let keep = if size == 0 {
            frames - start
        } else {
            size.min(frames - start)
        };
        let lo = start.saturating_sub(margin);
        let hi = (start + keep + margin).min(frames);
        out.push(Window {
            lo,
            hi,
            keep_from: start - lo,
            keep,
        });
        start += keep;
    }
    out
}

/// The two parts `scripts/split-piper.py` cuts `voice.onnx` into:
/// `voice.encoder.onnx` and `voice.decoder.onnx`, beside it.
pub fn split_paths(voice: &std::path::Path) -> (PathBuf, PathBuf) {
    let stem = voice.with_extension("");
    (
        PathBuf::from(format!("{}.encoder.onnx", stem.display())),
        PathBuf::from(format!("{}.decoder.onnx", stem.display())),
    )
}

/// Phonemes one Piper run speaks at most (a clause longer than this is cut
/// between words). Piper's memory grows with the audio a run makes:
/// measured over 108 turns (BENCHMARKS.md), a 230-character list read out
/// in one run took the process from ~300 to 500 MB; ~80 phonemes is ~5 s
/// of speech, and the cut falls where the text pauses anyway.
pub const MAX_RUN_PHONEMES: usize = 80;

impl Synthesizer for Piper {
    fn name(&self) -> &'static str {
        "piper"
    }

    fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
        let mut audio = Vec::new();
        for run in self.phoneme_runs(text)? {
            let ids = self.ids_for(&run);
            if ids.len() <= 3 {
                // Nothing pronounceable (e.g. only symbols): silence, not
                // an error.
                continue;
            }
            self.run_model(ids, &mut audio)?;
        }
        if audio.is_empty() {
            return Ok(Clip::new(Vec::new(), self.sample_rate));
        }
        let mut samples = normalise(&audio);
        trim_lead(&mut samples, self.sample_rate);
        Ok(Clip::new(samples, self.sample_rate))
    }

    /// A split voice gives its first window (~280 ms of sound) as soon as
    /// it is decoded, then a piece per window; a whole voice a piece per
    /// run (clause).
    fn synthesize_pieces(
        &mut self,
        text: &str,
        piece: &mut dyn FnMut(Clip) -> bool,
    ) -> Result<(), TtsError> {
        let rate = self.sample_rate;
        let mut leveller = Leveller::new(self.reference_peak, rate);
        let mut first = true;
        for run in self.phoneme_runs(text)? {
            let ids = self.ids_for(&run);
            if ids.len() <= 3 {
                continue;
            }
            let go_on = match self.graph {
                Graph::Split { window, .. } => {
                    let latent = self.encode(ids)?;
                    let sizes = if window == 0 {
                        windows(latent.frames, 0, 0, MARGIN_FRAMES)
                    } else if first {
                        windows(latent.frames, FIRST_WINDOW_FRAMES, window, MARGIN_FRAMES)
                    } else {
                        windows(latent.frames, window, window, MARGIN_FRAMES)
                    };
                    let mut go_on = true;
                    self.decode_each(&latent, &sizes, &mut |raw| {
                        let samples = leveller.level(raw);
                        go_on = samples.is_empty() || piece(Clip::new(samples, rate));
                        go_on
                    })?;
                    go_on
                }
                Graph::Whole(_) => {
                    let mut raw = Vec::new();
                    self.run_model(ids, &mut raw)?;
                    let samples = leveller.level(&raw);
                    samples.is_empty() || piece(Clip::new(samples, rate))
                }
            };
            first = false;
            if !go_on {
                break;
            }
        }
        Ok(())
    }
}

/// Below this (−54 dBFS after [`normalise`]) Piper's output is silence.
const LEAD_SILENCE: f32 = 0.002;
/// Kept before the first sound, so an onset is never clipped.
const LEAD_KEEP_MS: u32 = 5;

/// Drop the silence Piper puts before a sentence that starts on a vowel
/// (~45 ms for "It's …", none for "Set …"), keeping [`LEAD_KEEP_MS`]:
/// the answer is heard that much sooner after the end of the request
/// (issue 21), and the pause between two sentences is the previous one's
/// trailing silence, which stays.
fn trim_lead(samples: &mut Vec<f32>, sample_rate: u32) {
    let keep = (sample_rate * LEAD_KEEP_MS / 1000) as usize;
    let first = samples.iter().position(|s| s.abs() >= LEAD_SILENCE);
    let cut = first.unwrap_or(0).saturating_sub(keep);
    if cut > 0 {
        samples.drain(..cut);
    }
}

/// Piper's own output step: scale so the loudest sample is near full
/// scale (never amplifying more than 1/0.01) and clip to [-1, 1].
fn normalise(audio: &[f32]) -> Vec<f32> {
    scaled(audio, peak(audio))
}

/// `audio` scaled so `peak` lands near full scale (never amplifying more
/// than 1/0.01), clipped to [-1, 1], anything not finite silenced.
fn scaled(audio: &[f32], peak: f32) -> Vec<f32> {
    let gain = 0.95 / peak.max(0.01);
    audio
        .iter()
        .map(|s| {
            if s.is_finite() {
                (s * gain).clamp(-1.0, 1.0)
            } else {
                0.0
            }
        })
        .collect()
}

/// `phoneme_id_map` keyed by char (every key is one code point).
fn phoneme_ids(map: &HashMap<String, Vec<i64>>) -> Result<HashMap<char, Vec<i64>>> {
    let mut out = HashMap::new();
    for (key, ids) in map {
        let mut chars = key.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            out.insert(c, ids.clone());
        }
    }
    for needed in ['^', '_', '$'] {
        if !out.contains_key(&needed) {
            bail!("phoneme_id_map has no '{needed}'");
        }
    }
    Ok(out)
}

/// Piper's id layout: BOS, PAD, then each known phoneme followed by PAD,
/// then EOS. Unknown characters are skipped.
fn encode(map: &HashMap<char, Vec<i64>>, phonemes: &str) -> Vec<i64> {
    let get = |c: char| map.get(&c).cloned().unwrap_or_default();
    let pad = get('_');
    let mut ids = get('^');
    ids.extend(&pad);
    for c in phonemes.chars() {
        if let Some(id) = map.get(&c) {
            ids.extend(id);
            ids.extend(&pad);
        }
    }
    ids.extend(get('$'));
    ids
}

/// The clause-ending punctuation in `text`, in order: a mark followed by
/// whitespace or the end (so `3.5` and `6:05` don't count).
fn clause_marks(text: &str) -> Vec<char> {
    let chars: Vec<char> = text.chars().collect();
    let mut marks = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        if matches!(c, ',' | '.' | ';' | ':' | '!' | '?') {
            let next = chars.get(i + 1);
            let ends = next.is_none_or(|n| n.is_whitespace());
            // Keep only the last of a run like "?!" or "...".
            let run_continues =
                next.is_some_and(|n| matches!(n, ',' | '.' | ';' | ':' | '!' | '?'));
            if ends && !run_continues {
                marks.push(*c);
            }
        }
    }
    marks
}

/// espeak-ng's clauses with their punctuation back. When the counts
/// don't line up (espeak-ng split differently), only the last clause gets
/// the final mark.
fn marked_clauses(clauses: &[String], marks: &[char]) -> Vec<String> {
    let aligned = clauses.len() == marks.len() || clauses.len() == marks.len() + 1;
    clauses
        .iter()
        .enumerate()
        .map(|(i, clause)| {
            let mark = if aligned {
                marks.get(i).copied()
            } else if i + 1 == clauses.len() {
                marks.last().copied()
            } else {
                None
            };
            let mut clause = clause.clone();
            clause.extend(mark);
            clause
        })
        .collect()
}

/// The whole phoneme string: every clause with its punctuation, in one.
#[cfg(test)]
fn join_clauses(clauses: &[String], marks: &[char]) -> String {
    marked_clauses(clauses, marks).join(" ")
}

/// Group the clauses with their punctuation ([`marked_clauses`]) into
/// runs of at most `max` phoneme characters; a clause longer than that is
/// cut between words. The same text as one string would be, in pieces.
fn runs_of(clauses: &[String], marks: &[char], max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    for clause in marked_clauses(clauses, marks) {
        // A clause too long for one run: its words, grouped.
        let mut part = String::new();
        for word in clause.split_whitespace() {
            if !part.is_empty() && part.chars().count() + 1 + word.chars().count() > max {
                pieces.push(std::mem::take(&mut part));
            }
            if !part.is_empty() {
                part.push(' ');
            }
            part.push_str(word);
        }
        if !part.is_empty() {
            pieces.push(part);
        }
    }
    let mut runs: Vec<String> = Vec::new();
    for piece in pieces {
        match runs.last_mut() {
            Some(run) if run.chars().count() + 1 + piece.chars().count() <= max => {
                run.push(' ');
                run.push_str(&piece);
            }
            _ => runs.push(piece),
        }
    }
    runs
}

/// The voice file a config points at (for `earshot doctor` and scripts).
pub fn voice_path(tts: &TtsConfig, paths: &Paths) -> PathBuf {
    paths.model_path(format!("{}.onnx", tts.piper_voice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_skip_numbers_and_runs() {
        assert_eq!(
            clause_marks("It's 6:05, or 3.5 hours. Fine?!"),
            vec![',', '.', '!']
        );
        assert_eq!(clause_marks("no marks"), Vec::<char>::new());
    }

    #[test]
    fn a_long_sentence_is_spoken_in_runs_of_whole_clauses() {
        let c: Vec<String> = ["həlˈoʊ", "hˌaʊ ɑːɹ juː"].map(String::from).to_vec();
        // Short: one run, exactly what join_clauses makes.
        assert_eq!(
            runs_of(&c, &[',', '?'], MAX_RUN_PHONEMES),
            vec![join_clauses(&c, &[',', '?'])]
        );
        // A list read out: runs end where a clause does, none too long,
        // nothing lost.
        let items: Vec<String> = (0..17).map(|_| "bˈatəɹiz".to_string()).collect();
        let marks: Vec<char> = (0..17).map(|i| if i == 16 { '.' } else { ';' }).collect();
        let runs = runs_of(&items, &marks, 40);
        assert!(runs.len() > 1, "{runs:?}");
        assert!(runs.iter().all(|r| r.chars().count() <= 40), "{runs:?}");
        assert!(runs.iter().all(|r| r.ends_with([';', '.'])), "{runs:?}");
        assert_eq!(runs.join(" "), join_clauses(&items, &marks));
        // One clause longer than a run is cut between words.
        let long = vec!["wˈʌn tˈuː θɹˈiː fˈɔːɹ fˈaɪv sˈɪks".to_string()];
        let runs = runs_of(&long, &['.'], 12);
        assert!(
            runs.len() >= 3 && runs.iter().all(|r| r.chars().count() <= 12),
            "{runs:?}"
        );
        assert_eq!(runs.join(" "), join_clauses(&long, &['.']));
    }

    #[test]
    fn clauses_get_their_punctuation_back() {
        let c = vec!["həlˈoʊ".to_string(), "hˌaʊ ɑːɹ juː".to_string()];
        assert_eq!(join_clauses(&c, &[',', '?']), "həlˈoʊ, hˌaʊ ɑːɹ juː?");
        assert_eq!(join_clauses(&c, &[',']), "həlˈoʊ, hˌaʊ ɑːɹ juː");
        assert_eq!(join_clauses(&c, &['.', '.', '.']), "həlˈoʊ hˌaʊ ɑːɹ juː.");
    }

    #[test]
    fn ids_follow_pipers_layout() {
        let map: HashMap<char, Vec<i64>> = [
            ('_', vec![0]),
            ('^', vec![1]),
            ('$', vec![2]),
            ('a', vec![14]),
            (' ', vec![3]),
        ]
        .into_iter()
        .collect();
        assert_eq!(encode(&map, "a a"), vec![1, 0, 14, 0, 3, 0, 14, 0, 2]);
        assert_eq!(encode(&map, "☃"), vec![1, 0, 2]);
    }

    #[test]
    fn leading_silence_is_trimmed_to_a_few_ms_and_sound_is_kept() {
        let rate = 22_050;
        let mut s = vec![0.0005f32; 1_000];
        s.extend([0.3, -0.2, 0.1]);
        s.extend(vec![0.0; 500]);
        let len = s.len();
        trim_lead(&mut s, rate);
        let keep = (rate * LEAD_KEEP_MS / 1000) as usize;
        assert_eq!(s.len(), len - (1_000 - keep));
        assert_eq!(&s[keep..keep + 3], &[0.3, -0.2, 0.1]);
        // Sound from the first sample, or none at all: nothing is cut.
        let mut loud = vec![0.5f32, 0.0, 0.0];
        trim_lead(&mut loud, rate);
        assert_eq!(loud, vec![0.5, 0.0, 0.0]);
        let mut quiet = vec![0.0f32; 300];
        trim_lead(&mut quiet, rate);
        assert_eq!(quiet.len(), 300);
    }

    #[test]
    fn windows_cover_every_frame_once_with_margins() {
        assert!(windows(0, 64, 64, 16).is_empty());
        // One window: everything, no margin to drop.
        assert_eq!(
            windows(50, 64, 64, 16),
            vec![Window {
                lo: 0,
                hi: 50,
                keep_from: 0,
                keep: 50
            }]
        );
        assert_eq!(windows(50, 0, 0, 16), windows(50, 64, 64, 16));
        // A short first window, then the usual ones.
        let ws = windows(100, 24, 64, 12);
        assert_eq!(
            ws.iter().map(|w| w.keep).collect::<Vec<_>>(),
            vec![24, 64, 12]
        );
        assert_eq!(
            ws[0],
            Window {
                lo: 0,
                hi: 36,
                keep_from: 0,
                keep: 24
            }
        );
        assert_eq!(
            ws[1],
            Window {
                lo: 12,
                hi: 100,
                keep_from: 12,
                keep: 64
            }
        );
        for (frames, window, margin) in [(200, 64, 16), (129, 64, 16), (64, 64, 16), (37, 8, 16)] {
            let ws = windows(frames, window, window, margin);
            let mut next = 0;
            for w in &ws {
                // Kept frames follow each other with no gap or overlap.
                assert_eq!(w.lo + w.keep_from, next, "{ws:?}");
                next += w.keep;
                assert!(w.keep <= window && w.hi <= frames, "{ws:?}");
                // A full margin wherever the sentence has frames for it.
                assert_eq!(w.keep_from, margin.min(w.lo + w.keep_from), "{ws:?}");
                assert_eq!(
                    w.hi,
                    (w.lo + w.keep_from + w.keep + margin).min(frames),
                    "{ws:?}"
                );
            }
            assert_eq!(next, frames, "{ws:?}");
        }
    }

    #[test]
    fn a_latent_slice_takes_the_frames_of_every_channel() {
        let l = Latent {
            channels: 2,
            frames: 4,
            values: vec![0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0],
        };
        assert_eq!(l.slice(1, 3), vec![1.0, 2.0, 11.0, 12.0]);
        assert_eq!(l.slice(0, 4), l.values);
    }

    #[test]
    fn the_parts_sit_beside_the_voice() {
        let (e, d) = split_paths(std::path::Path::new("/m/en_US-joe-medium.onnx"));
        assert_eq!(e, PathBuf::from("/m/en_US-joe-medium.encoder.onnx"));
        assert_eq!(d, PathBuf::from("/m/en_US-joe-medium.decoder.onnx"));
    }

    #[test]
    fn pieces_are_levelled_without_clipping_and_start_at_the_first_sound() {
        let rate = 22_050;
        let keep = (rate * LEAD_KEEP_MS / 1000) as usize;
        let mut l = Leveller::new(0.5, rate);
        // Silence only: nothing to play yet.
        assert!(l.level(&[0.0; 400]).is_empty());
        // The first sound, kept with a few ms before it, at the
        // reference's gain.
        let mut raw = vec![0.0f32; 300];
        raw.extend([0.25, -0.5]);
        let out = l.level(&raw);
        assert_eq!(out.len(), keep + 2);
        assert!((out[keep] - 0.475).abs() < 1e-6 && (out[keep + 1] + 0.95).abs() < 1e-6);
        // A louder piece lowers the gain, never clips; silence inside a
        // sentence is kept.
        let out = l.level(&[0.0, 1.0, -0.5]);
        assert_eq!(out.len(), 3);
        assert!((out[1] - 0.95).abs() < 1e-6 && (out[2] + 0.475).abs() < 1e-6);
        // The gain does not come back up.
        let out = l.level(&[0.5]);
        assert!((out[0] - 0.475).abs() < 1e-6);
        assert_eq!(l.level(&[f32::NAN]), vec![0.0]);
    }

    #[test]
    fn normalise_is_bounded_and_finite() {
        let out = normalise(&[0.5, -2.0, f32::NAN, 0.0]);
        assert!(out.iter().all(|s| s.is_finite() && s.abs() <= 1.0));
        assert!((out[1] + 0.95).abs() < 1e-6);
    }
}
