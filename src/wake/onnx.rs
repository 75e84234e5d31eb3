//! The wake word in-process: openWakeWord's pipeline on the ONNX Runtime
//! earshot already links (`[wake] engine = "onnx"`, the default).
//!
//! Three models, all from openWakeWord's published v0.1 release (fetched
//! by `scripts/fetch-wake.sh`, see `models/README.md`):
//! `melspectrogram.onnx` turns 1760 samples (1280 new + 480 ahead) into 8
//! frames of 32 mels every 80 ms; `embedding_model.onnx` turns 76 mel
//! frames (stepped by 8) into one 96-float speech embedding; one classifier
//! per word (`hey_jarvis_v0.1.onnx`, …) turns the last 16 embeddings into a
//! probability. One probability per word per 80 ms frame.
//!
//! The buffering mirrors wyoming-openwakeword 1.8.2 (the peer `earshot
//! bench wake` compares against) step for step — the same windows over the
//! same samples, mels scaled `x / 10 + 2`, no padding: the first
//! probability comes after 25 frames (2 s) of audio — so both fire on the
//! same frames. The decision is the peer's too: a frame at or above
//! `threshold` adds an activation, one below takes one away (not below 0),
//! and `trigger_frames` activations fire and start counting again; on top,
//! `refractory_ms` after a detection no other fires (the peer's later
//! releases have `--refractory-seconds`).
//!
//! The embedding streams: `scripts/split-wake-embedding.py` cuts it into
//! three stages whose outputs carry over from one window to the next (see
//! [`EMBEDDING_STAGE_FILES`]), so a frame computes only what is new — the
//! same numbers as the whole model for ~35 % of its CPU. Without the stage
//! files the whole model runs each frame.
//!
//! Everything runs synchronously in [`OnnxWake::feed`]: the detector sees
//! every sample the loop reads, even when a file is captured faster than
//! real time, and costs ~0.5–1 ms of one core per 80 ms frame.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::{Detection, WakeConfig};
use crate::paths::Paths;

/// Samples per frame (80 ms at 16 kHz).
pub const FRAME_SAMPLES: usize = 1280;
/// Samples the mel model sees per frame: the frame and the 480 after it.
pub const MEL_SAMPLES: usize = 1760;
/// Mel bands per frame row.
pub const NUM_MELS: usize = 32;
/// Mel rows one embedding looks at (775 ms).
pub const EMB_WINDOW: usize = 76;
/// Mel rows between two embeddings (one frame).
pub const EMB_STEP: usize = 8;
/// Floats in one speech embedding.
pub const EMB_FEATURES: usize = 96;
/// Mel rows kept (one embedding window and a step).
const MEL_KEEP: usize = EMB_WINDOW + EMB_STEP;

/// The shared front-end's two files, looked for in `models_dir`.
pub const MEL_FILE: &str = "melspectrogram.onnx";
pub const EMBEDDING_FILE: &str = "embedding_model.onnx";

/// The words whose classifiers `scripts/fetch-wake.sh` fetches.
pub const SHIPPED_WORDS: &[&str] = &["hey_jarvis", "alexa", "hey_mycroft"];

/// The classifier file for `word` in `dir`: `WORD.onnx`, else the newest
/// `WORD_v*.onnx` (so `hey_jarvis` finds `hey_jarvis_v0.1.onnx`).
pub fn word_file(dir: &Path, word: &str) -> Option<PathBuf> {
    let exact = dir.join(format!("{word}.onnx"));
    if exact.is_file() {
        return Some(exact);
    }
    let prefix = format!("{word}_v");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".onnx"))
                && p.is_file()
        })
        .collect();
    found.sort();
    found.pop()
}

/// The wake words whose classifiers are in `dir` (for the one-line error
/// naming what can be used).
pub fn available_words(dir: &Path) -> Vec<String> {
    let mut words: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".onnx"))
        .filter(|n| n.contains("_v0.") || SHIPPED_WORDS.iter().any(|w| n == &format!("{w}.onnx")))
        .map(|n| {
            let stem = n.trim_end_matches(".onnx");
            match stem.find("_v") {
                Some(i) => stem[..i].to_string(),
                None => stem.to_string(),
            }
        })
        .collect();
    words.sort();
    words.dedup();
    words
}

/// The pipeline's state for one stream of audio (no models): raw samples
/// not yet seen by the mel model, recent mel rows and embeddings, and each
/// word's activations.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Samples from the next mel window's start.
    raw: Vec<f32>,
    mels: VecDeque<[f32; NUM_MELS]>,
    /// Mel rows not yet covered by an embedding window's start.
    new_mels: usize,
    /// Mel rows taken so far (where each window starts, counted from the
    /// stream's first row).
    mel_rows: u64,
    /// The streamed embedding's stage outputs for the last window.
    staged: Option<StagedRows>,
    embeddings: VecDeque<[f32; EMB_FEATURES]>,
    new_embeddings: usize,
    /// Frames (mel steps) done so far.
    frame: u64,
    words: Vec<WordState>,
}

#[derive(Debug, Clone, Default)]
struct WordState {
    activations: u32,
    last_fired: Option<u64>,
}

/// One word's probability on one frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// Index of the word in the detector's list.
    pub word: usize,
    /// The 80 ms frame (0-based mel step; it needs audio up to
    /// `frame * 1280 + 1760` samples).
    pub frame: u64,
    pub probability: f32,
    /// This frame fired a detection.
    pub fired: bool,
}

impl Stream {
    /// A fresh stream for `words` classifiers.
    pub fn new(words: usize) -> Stream {
        Stream {
            raw: Vec::with_capacity(MEL_SAMPLES * 2),
            mels: VecDeque::with_capacity(MEL_KEEP + EMB_STEP),
            new_mels: 0,
            mel_rows: 0,
            staged: None,
            embeddings: VecDeque::new(),
            new_embeddings: 0,
            frame: 0,
            words: vec![WordState::default(); words],
        }
    }

    /// Frames done so far.
    pub fn frames(&self) -> u64 {
        self.frame
    }

    /// Forget activations (after a turn): the audio history is kept, so
    /// the next wake word is heard at once.
    pub fn rearm(&mut self) {
        for w in &mut self.words {
            w.activations = 0;
        }
    }
}

/// The streamed speech embedding (`scripts/split-wake-embedding.py`): the
/// model cut into three stages at the pools that halve time. Along time
/// every layer is unpadded and the pools add up to a stride of 8 — one
/// step of the window — so the stage outputs of a window are the last
/// window's shifted by a step plus a few new rows that depend only on the
/// window's last rows. Per step stage A sees the last 12 mel rows (4 new
/// pooled rows), stage B the last 12 of A's 36 (2 new rows), stage C all
/// of B's 14. The result is the whole model's, bit for bit here, for
/// ~35 % of its work.
pub const EMBEDDING_STAGE_FILES: [&str; 3] = [
    "embedding_stream_a.onnx",
    "embedding_stream_b.onnx",
    "embedding_stream_c.onnx",
];
/// Mel rows stage A needs for one step's new rows (4 pooled rows, before
/// them two 3-row convolutions).
const STAGE_A_ROWS_IN: usize = 12;
/// Stage A's rows for one whole window, and the new ones per step.
const STAGE_A_ROWS: usize = 36;
const STAGE_A_NEW: usize = EMB_STEP / 2;
/// Stage A rows stage B needs for one step's 2 new rows (four 3-row
/// convolutions before a 2-row pool).
const STAGE_B_ROWS_IN: usize = 12;
/// Stage B's rows for one whole window, and the new ones per step.
const STAGE_B_ROWS: usize = 14;
const STAGE_B_NEW: usize = EMB_STEP / 4;

/// A stage's output, channel-major: `data[(c * rows + r) * width + w]`.
#[derive(Debug, Clone, PartialEq)]
struct Rows {
    channels: usize,
    rows: usize,
    width: usize,
    data: Vec<f32>,
}

impl Rows {
    /// The last `n` rows of every channel, as one `[1, channels, n, width]`
    /// input.
    fn tail(&self, n: usize) -> Vec<f32> {
        let n = n.min(self.rows);
        let mut out = Vec::with_capacity(self.channels * n * self.width);
        for c in 0..self.channels {
            let end = (c + 1) * self.rows * self.width;
            out.extend_from_slice(&self.data[end - n * self.width..end]);
        }
        out
    }

    /// Drop the oldest `new.rows` rows of every channel and append `new`'s
    /// (of the same channels and width).
    fn shift_in(&mut self, new: &Rows) -> anyhow::Result<()> {
        if (new.channels, new.width) != (self.channels, self.width) {
            anyhow::bail!(
                "a stage of the streamed embedding gave {}x{} rows, not {}x{}",
                new.channels,
                new.width,
                self.channels,
                self.width
            );
        }
        let (n, w) = (new.rows.min(self.rows), self.width);
        for c in 0..self.channels {
            let base = c * self.rows * w;
            self.data
                .copy_within(base + n * w..base + self.rows * w, base);
            let from = c * new.rows * w + (new.rows - n) * w;
            self.data[base + (self.rows - n) * w..base + self.rows * w]
                .copy_from_slice(&new.data[from..from + n * w]);
        }
        Ok(())
    }
}

/// What the streamed embedding keeps between windows.
#[derive(Debug, Clone)]
struct StagedRows {
    a: Rows,
    b: Rows,
    /// The mel row the window these belong to starts at.
    window_start: u64,
}

/// Decision settings, from `[wake]`.
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    pub threshold: f32,
    pub trigger_frames: u32,
    /// Frames after a detection during which the word cannot fire again.
    pub refractory_frames: u64,
}

impl Decision {
    pub fn from_config(c: &WakeConfig) -> Decision {
        Decision {
            threshold: c.threshold,
            trigger_frames: c.trigger_frames.max(1),
            refractory_frames: c.refractory_ms.div_ceil(80),
        }
    }

    /// Take one probability into `state`; true when it fires.
    fn take(&self, state: &mut WordState, frame: u64, p: f32) -> bool {
        if p >= self.threshold {
            state.activations += 1;
            if state.activations >= self.trigger_frames {
                state.activations = 0;
                let cooling = state
                    .last_fired
                    .is_some_and(|last| frame < last + self.refractory_frames.max(1));
                if !cooling {
                    state.last_fired = Some(frame);
                    return true;
                }
            }
        } else {
            state.activations = state.activations.saturating_sub(1);
        }
        false
    }
}

#[cfg(feature = "onnx")]
pub use models::{OnnxWake, WakeModels};

#[cfg(feature = "onnx")]
mod models {
    use anyhow::{anyhow, bail, Context, Result};
    use ort::session::builder::GraphOptimizationLevel;
    use ort::session::Session;
    use ort::value::Tensor;

    use super::*;

    /// One word's classifier.
    struct Word {
        /// The configured name (`hey_jarvis`).
        name: String,
        /// The file's stem (`hey_jarvis_v0.1`), as Wyoming names it.
        model: String,
        session: Session,
        /// Embeddings it looks at (16 for the published models).
        window: usize,
    }

    /// The loaded models: the shared front-end and one classifier per
    /// word. Loaded once; [`Stream`]s carry the per-audio state.
    pub struct WakeModels {
        mel: Session,
        embedding: Session,
        /// The streamed embedding, when its stage files are there.
        stages: Option<Stages>,
        words: Vec<Word>,
    }

    impl std::fmt::Debug for WakeModels {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("WakeModels")
                .field("words", &self.names())
                .finish()
        }
    }

    fn session(env: &ort::environment::Environment, path: &Path, what: &str) -> Result<Session> {
        if !path.is_file() {
            bail!(
                "wake word model {} ({what}) is missing; run scripts/fetch-models.sh (or scripts/fetch-wake.sh)",
                path.display()
            );
        }
        let bad = |e: ort::Error| {
            anyhow!(
                "wake word model {} ({what}) cannot be loaded ({}); run scripts/fetch-wake.sh to fetch it again",
                path.display(),
                e.to_string().replace('\n', " ")
            )
        };
        Session::builder(env)
            .map_err(bad)?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| bad(e.into()))?
            .with_intra_threads(1)
            .map_err(|e| bad(e.into()))?
            .commit_from_file(path)
            .map_err(bad)
    }

    /// The input's declared shape (unknown dims as -1).
    fn input_shape(s: &Session) -> Vec<i64> {
        s.inputs()
            .first()
            .and_then(|i| i.dtype().tensor_shape().map(|sh| sh.to_vec()))
            .unwrap_or_default()
    }

    impl WakeModels {
        /// Load the front-end and the classifiers of `words` from
        /// `paths.models_dir`. Every error is one line naming the file (or
        /// the word and the words there are) and the fix.
        pub fn load(words: &[String], paths: &Paths) -> Result<WakeModels> {
            if words.is_empty() {
                bail!("wake.words is empty; name at least one, e.g. [\"hey_jarvis\"]");
            }
            let dir = &paths.models_dir;
            let mut files = Vec::new();
            for word in words {
                let name = word.trim();
                let Some(file) = word_file(dir, name) else {
                    if SHIPPED_WORDS.contains(&name) {
                        bail!(
                            "the '{name}' wake word model ({name}_v*.onnx) is missing from {}; run scripts/fetch-models.sh (or scripts/fetch-wake.sh)",
                            dir.display()
                        );
                    }
                    let have = available_words(dir);
                    let have = if have.is_empty() {
                        "none; run scripts/fetch-models.sh".to_string()
                    } else {
                        have.join(", ")
                    };
                    bail!(
                        "unknown wake word '{name}' (wake.words): no {name}.onnx or {name}_v*.onnx in {}; available: {have}",
                        dir.display()
                    );
                };
                files.push((name.to_string(), file));
            }
            let env = crate::onnx::environment(paths)?;
            let mel = session(&env, &dir.join(MEL_FILE), "the melspectrogram front-end")?;
            let embedding = session(&env, &dir.join(EMBEDDING_FILE), "the speech embedding")?;
            let emb_shape = input_shape(&embedding);
            if emb_shape.len() != 4
                || emb_shape[1] != EMB_WINDOW as i64
                || emb_shape[2] != NUM_MELS as i64
            {
                bail!(
                    "{} is not openWakeWord's speech embedding (input shape {emb_shape:?}, want [batch, 76, 32, 1]); run scripts/fetch-wake.sh",
                    dir.join(EMBEDDING_FILE).display()
                );
            }
            let mut loaded = Vec::new();
            for (name, file) in files {
                let session = session(&env, &file, &format!("the '{name}' classifier"))?;
                let shape = input_shape(&session);
                if shape.len() != 3 || shape[2] != EMB_FEATURES as i64 || shape[1] < 1 {
                    bail!(
                        "{} is not an openWakeWord classifier (input shape {shape:?}, want [batch, frames, 96])",
                        file.display()
                    );
                }
                let model = file
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or(&name)
                    .to_string();
                loaded.push(Word {
                    name,
                    model,
                    session,
                    window: shape[1] as usize,
                });
            }
            let stages = Stages::load(&env, dir);
            let mut models = WakeModels {
                mel,
                embedding,
                stages,
                words: loaded,
            };
            if models.stages.is_some() {
                if let Err(e) = models.check_stages() {
                    tracing::warn!(
                        "wake word: {e:#}; the speech embedding runs whole each frame (run scripts/fetch-wake.sh to fetch the stages again)"
                    );
                    models.stages = None;
                }
            }
            // One frame of silence through every model: a file of the right
            // shape but wrong insides fails here, at load, not mid-stream.
            let mut probe = Stream::new(models.words.len());
            let silence = vec![0i16; MEL_SAMPLES + FRAME_SAMPLES * 25];
            let never = Decision {
                threshold: f32::INFINITY,
                trigger_frames: 1,
                refractory_frames: 0,
            };
            models
                .push(&mut probe, &silence, &never)
                .context("wake word models fail on silence")?;
            Ok(models)
        }

        /// The configured names, in order.
        pub fn names(&self) -> Vec<String> {
            self.words.iter().map(|w| w.name.clone()).collect()
        }

        /// The model files' stems (`hey_jarvis_v0.1`), in order.
        pub fn model_names(&self) -> Vec<String> {
            self.words.iter().map(|w| w.model.clone()).collect()
        }

        /// Feed 16 kHz mono samples through the pipeline; every word's
        /// probability on every frame completed.
        pub fn push(
            &mut self,
            stream: &mut Stream,
            samples: &[i16],
            decision: &Decision,
        ) -> Result<Vec<Score>> {
            if stream.words.len() != self.words.len() {
                stream.words = vec![WordState::default(); self.words.len()];
            }
            let mut scores = Vec::new();
            stream.raw.extend(samples.iter().map(|&s| f32::from(s)));
            let mut start = 0;
            while stream.raw.len() - start >= MEL_SAMPLES {
                let window = &stream.raw[start..start + MEL_SAMPLES];
                let rows = self.mels(window)?;
                start += FRAME_SAMPLES;
                let frame = stream.frame;
                stream.frame += 1;
                for row in rows {
                    stream.mels.push_back(row);
                    stream.mel_rows += 1;
                    if stream.mels.len() > MEL_KEEP {
                        stream.mels.pop_front();
                    }
                    stream.new_mels = (stream.new_mels + 1).min(stream.mels.len());
                }
                while stream.new_mels >= EMB_WINDOW {
                    let from = stream.mels.len() - stream.new_mels;
                    let start = stream.mel_rows - stream.new_mels as u64;
                    let embedding = self.embed(&stream.mels, from, start, &mut stream.staged)?;
                    stream.new_mels -= EMB_STEP;
                    stream.embeddings.push_back(embedding);
                    let keep = self.words.iter().map(|w| w.window).max().unwrap_or(16) + 1;
                    while stream.embeddings.len() > keep {
                        stream.embeddings.pop_front();
                    }
                    stream.new_embeddings =
                        (stream.new_embeddings + 1).min(stream.embeddings.len());
                }
                if stream.new_embeddings == 0 {
                    continue;
                }
                let fresh = stream.new_embeddings;
                stream.new_embeddings = 0;
                for (i, word) in self.words.iter_mut().enumerate() {
                    // The newest windows this frame completed (one, normally).
                    for back in (0..fresh).rev() {
                        let end = stream.embeddings.len() - back;
                        if end < word.window {
                            continue;
                        }
                        let p = classify(
                            &mut word.session,
                            &stream.embeddings,
                            end - word.window,
                            word.window,
                        )?;
                        let fired = decision.take(&mut stream.words[i], frame, p);
                        scores.push(Score {
                            word: i,
                            frame,
                            probability: p,
                            fired,
                        });
                    }
                }
            }
            stream.raw.drain(..start);
            Ok(scores)
        }

        fn mels(&mut self, window: &[f32]) -> Result<Vec<[f32; NUM_MELS]>> {
            let input = Tensor::from_array(([1usize, window.len()], window.to_vec()))
                .map_err(|e| anyhow!("melspectrogram input: {e}"))?;
            let outputs = self
                .mel
                .run(ort::inputs![input])
                .map_err(|e| anyhow!("melspectrogram failed: {e}"))?;
            let (_, values) = outputs[0]
                .try_extract_tensor::<f32>()
                .map_err(|e| anyhow!("melspectrogram output: {e}"))?;
            if values.is_empty() || values.len() % NUM_MELS != 0 {
                bail!(
                    "melspectrogram gave {} values, not rows of 32",
                    values.len()
                );
            }
            Ok(values
                .chunks_exact(NUM_MELS)
                .map(|c| {
                    let mut row = [0f32; NUM_MELS];
                    for (r, v) in row.iter_mut().zip(c) {
                        *r = v / 10.0 + 2.0;
                    }
                    row
                })
                .collect())
        }

        /// One window's embedding: streamed when the stages are loaded
        /// and `staged` holds the window one step before (`start` is the
        /// window's first mel row), else over the whole window.
        fn embed(
            &mut self,
            mels: &VecDeque<[f32; NUM_MELS]>,
            from: usize,
            start: u64,
            staged: &mut Option<StagedRows>,
        ) -> Result<[f32; EMB_FEATURES]> {
            let mut flat = Vec::with_capacity(EMB_WINDOW * NUM_MELS);
            for row in mels.iter().skip(from).take(EMB_WINDOW) {
                flat.extend_from_slice(row);
            }
            let Some(stages) = self.stages.as_mut() else {
                return embed_whole(&mut self.embedding, flat);
            };
            match staged {
                Some(s) if s.window_start + EMB_STEP as u64 == start => {
                    let last = flat.split_off(flat.len() - STAGE_A_ROWS_IN * NUM_MELS);
                    let out = stages.step(last, s)?;
                    s.window_start = start;
                    Ok(out)
                }
                _ => {
                    let (out, rows) = stages.whole(flat, start)?;
                    *staged = Some(rows);
                    Ok(out)
                }
            }
        }

        /// Whether the embedding is streamed (the stage files are there and
        /// agree with the whole model).
        pub fn streams_embedding(&self) -> bool {
            self.stages.is_some()
        }

        /// Compare the streamed embedding with the whole model on a few
        /// consecutive windows of made-up mel rows: stage files that do not
        /// belong to this model are not used.
        fn check_stages(&mut self) -> Result<()> {
            let rows: Vec<[f32; NUM_MELS]> = (0..EMB_WINDOW + 3 * EMB_STEP)
                .map(|r| {
                    let mut row = [0f32; NUM_MELS];
                    for (m, v) in row.iter_mut().enumerate() {
                        *v = 1.5 * ((r * 7 + m * 3) as f32 * 0.37).sin() + 0.5;
                    }
                    row
                })
                .collect();
            let mels: VecDeque<[f32; NUM_MELS]> = rows.into_iter().collect();
            let mut staged = None;
            for k in 0..4 {
                let from = k * EMB_STEP;
                let streamed = self.embed(&mels, from, from as u64, &mut staged)?;
                let flat: Vec<f32> = mels
                    .iter()
                    .skip(from)
                    .take(EMB_WINDOW)
                    .flat_map(|r| r.iter().copied())
                    .collect();
                let whole = embed_whole(&mut self.embedding, flat)?;
                let scale = whole.iter().fold(1f32, |m, v| m.max(v.abs()));
                let off = streamed
                    .iter()
                    .zip(&whole)
                    .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                if off.is_nan() || off > 1e-3 * scale {
                    bail!("the streamed embedding differs from the whole model by {off} on window {k}");
                }
            }
            Ok(())
        }
    }

    /// The three stages of the streamed embedding.
    struct Stages {
        a: Session,
        b: Session,
        c: Session,
    }

    impl Stages {
        /// The stage files in `dir`, if all three are there and load.
        /// Missing or broken stages are not an error: the whole model runs
        /// each frame instead (one log line says so).
        fn load(env: &ort::environment::Environment, dir: &Path) -> Option<Stages> {
            let paths = EMBEDDING_STAGE_FILES.map(|f| dir.join(f));
            if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
                tracing::info!(
                    "wake word: {} is missing, so the speech embedding runs whole each frame (~2.7x the CPU); run scripts/fetch-wake.sh",
                    missing.display()
                );
                return None;
            }
            let mut sessions = Vec::new();
            for p in &paths {
                match session(env, p, "a stage of the streamed speech embedding") {
                    Ok(s) => sessions.push(s),
                    Err(e) => {
                        tracing::warn!("{e:#}; the speech embedding runs whole each frame");
                        return None;
                    }
                }
            }
            let c = sessions.pop()?;
            let b = sessions.pop()?;
            let a = sessions.pop()?;
            Some(Stages { a, b, c })
        }

        /// One step: the window's last mel rows through stage A, the new
        /// rows shifted into `s`, and on through B and C.
        fn step(&mut self, last: Vec<f32>, s: &mut StagedRows) -> Result<[f32; EMB_FEATURES]> {
            let a = run_stage(
                &mut self.a,
                1,
                STAGE_A_ROWS_IN,
                NUM_MELS,
                last,
                "A",
                STAGE_A_NEW,
            )?;
            s.a.shift_in(&a)?;
            let b_in = s.a.tail(STAGE_B_ROWS_IN);
            let (channels, width) = (s.a.channels, s.a.width);
            let b = run_stage(
                &mut self.b,
                channels,
                STAGE_B_ROWS_IN,
                width,
                b_in,
                "B",
                STAGE_B_NEW,
            )?;
            s.b.shift_in(&b)?;
            let c = run_stage(
                &mut self.c,
                s.b.channels,
                s.b.rows,
                s.b.width,
                s.b.data.clone(),
                "C",
                1,
            )?;
            to_embedding(&c.data)
        }

        /// A whole window through the three stages, keeping A's and B's
        /// rows for the next step.
        fn whole(
            &mut self,
            window: Vec<f32>,
            start: u64,
        ) -> Result<([f32; EMB_FEATURES], StagedRows)> {
            let a = run_stage(
                &mut self.a,
                1,
                EMB_WINDOW,
                NUM_MELS,
                window,
                "A",
                STAGE_A_ROWS,
            )?;
            let b = run_stage(
                &mut self.b,
                a.channels,
                a.rows,
                a.width,
                a.data.clone(),
                "B",
                STAGE_B_ROWS,
            )?;
            let c = run_stage(
                &mut self.c,
                b.channels,
                b.rows,
                b.width,
                b.data.clone(),
                "C",
                1,
            )?;
            Ok((
                to_embedding(&c.data)?,
                StagedRows {
                    a,
                    b,
                    window_start: start,
                },
            ))
        }
    }

    /// Run one stage on `[1, channels, rows, width]`; its output must have
    /// `want_rows` rows.
    fn run_stage(
        session: &mut Session,
        channels: usize,
        rows: usize,
        width: usize,
        data: Vec<f32>,
        stage: &str,
        want_rows: usize,
    ) -> Result<Rows> {
        let input = Tensor::from_array(([1usize, channels, rows, width], data))
            .map_err(|e| anyhow!("embedding stage {stage} input: {e}"))?;
        let outputs = session
            .run(ort::inputs![input])
            .map_err(|e| anyhow!("embedding stage {stage} failed: {e}"))?;
        let (shape, values) = outputs[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| anyhow!("embedding stage {stage} output: {e}"))?;
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        match dims[..] {
            [1, c, r, w] if c * r * w == values.len() && r == want_rows => Ok(Rows {
                channels: c,
                rows: r,
                width: w,
                data: values.to_vec(),
            }),
            _ => bail!("embedding stage {stage} gave shape {dims:?} (want {want_rows} rows)"),
        }
    }

    /// The whole model on one window's rows.
    fn embed_whole(session: &mut Session, flat: Vec<f32>) -> Result<[f32; EMB_FEATURES]> {
        let input = Tensor::from_array(([1usize, EMB_WINDOW, NUM_MELS, 1], flat))
            .map_err(|e| anyhow!("embedding input: {e}"))?;
        let outputs = session
            .run(ort::inputs![input])
            .map_err(|e| anyhow!("speech embedding failed: {e}"))?;
        let (_, values) = outputs[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| anyhow!("embedding output: {e}"))?;
        to_embedding(values)
    }

    fn to_embedding(values: &[f32]) -> Result<[f32; EMB_FEATURES]> {
        if values.len() != EMB_FEATURES {
            bail!("speech embedding gave {} values, not 96", values.len());
        }
        let mut out = [0f32; EMB_FEATURES];
        out.copy_from_slice(values);
        Ok(out)
    }

    fn classify(
        session: &mut Session,
        embeddings: &VecDeque<[f32; EMB_FEATURES]>,
        from: usize,
        window: usize,
    ) -> Result<f32> {
        let mut flat = Vec::with_capacity(window * EMB_FEATURES);
        for e in embeddings.iter().skip(from).take(window) {
            flat.extend_from_slice(e);
        }
        let input = Tensor::from_array(([1usize, window, EMB_FEATURES], flat))
            .map_err(|e| anyhow!("classifier input: {e}"))?;
        let outputs = session
            .run(ort::inputs![input])
            .map_err(|e| anyhow!("wake word classifier failed: {e}"))?;
        let (_, values) = outputs[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| anyhow!("classifier output: {e}"))?;
        values
            .first()
            .copied()
            .filter(|p| p.is_finite())
            .ok_or_else(|| anyhow!("wake word classifier gave no probability"))
    }

    /// The in-process detector the voice loop holds: the models, one
    /// stream, and the detections not yet polled.
    pub struct OnnxWake {
        models: WakeModels,
        stream: Stream,
        decision: Decision,
        fed: u64,
        found: VecDeque<Detection>,
        failures: u64,
    }

    impl OnnxWake {
        /// Load the models of `[wake]` from `paths.models_dir`.
        pub fn load(config: &WakeConfig, paths: &Paths) -> Result<OnnxWake> {
            let models = WakeModels::load(&config.words, paths)?;
            Ok(OnnxWake::new(models, Decision::from_config(config)))
        }

        pub fn new(models: WakeModels, decision: Decision) -> OnnxWake {
            let stream = Stream::new(models.words.len());
            OnnxWake {
                models,
                stream,
                decision,
                fed: 0,
                found: VecDeque::new(),
                failures: 0,
            }
        }
    }

    impl super::super::WakeDetector for OnnxWake {
        fn feed(&mut self, samples: &[i16]) {
            self.fed += samples.len() as u64;
            match self.models.push(&mut self.stream, samples, &self.decision) {
                Ok(scores) => {
                    for s in scores.into_iter().filter(|s| s.fired) {
                        let end = s.frame * FRAME_SAMPLES as u64 + MEL_SAMPLES as u64;
                        self.found.push_back(Detection {
                            name: self.models.words[s.word].name.clone(),
                            timestamp_ms: Some(end * 1000 / 16_000),
                        });
                        // A wake word every second for ten minutes must
                        // not grow memory: the loop polls, but bound it.
                        while self.found.len() > 8 {
                            self.found.pop_front();
                        }
                    }
                }
                Err(e) => {
                    self.failures += 1;
                    if self.failures.is_power_of_two() {
                        tracing::error!(failures = self.failures, "wake word detector: {e:#}");
                    }
                    // Start the stream afresh rather than stay wedged.
                    self.stream = Stream::new(self.models.words.len());
                }
            }
        }

        fn poll(&mut self) -> Option<Detection> {
            self.found.pop_front()
        }

        fn rearm(&mut self) {
            self.found.clear();
            self.stream.rearm();
        }

        fn is_listening(&self) -> bool {
            true
        }

        fn position_ms(&self) -> u64 {
            self.fed * 1000 / 16_000
        }

        fn describe(&self) -> String {
            let embedding = if self.models.streams_embedding() {
                "streamed embedding"
            } else {
                "whole embedding each frame: run scripts/fetch-wake.sh for the streamed one"
            };
            format!(
                "onnx {} ({embedding})",
                self.models.model_names().join(", ")
            )
        }
    }
}

#[cfg(all(test, feature = "onnx"))]
mod tests {
    use std::sync::{Mutex, OnceLock};

    use super::*;
    use crate::wake::WakeDetector;

    fn models_dir() -> PathBuf {
        std::env::var_os("EARSHOT_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
    }

    fn paths() -> Paths {
        Paths::new("state", models_dir())
    }

    /// hey_jarvis, alexa and hey_mycroft, loaded once for this test binary.
    fn models() -> &'static Mutex<WakeModels> {
        static MODELS: OnceLock<Mutex<WakeModels>> = OnceLock::new();
        MODELS.get_or_init(|| {
            let words: Vec<String> = SHIPPED_WORDS.iter().map(|w| w.to_string()).collect();
            Mutex::new(WakeModels::load(&words, &paths()).expect("scripts/fetch-wake.sh models"))
        })
    }

    /// A real recording from the oww-rs crate, 16 kHz mono, between
    /// `before` and `after` seconds of silence.
    fn clip(name: &str, before: f32, after: f32) -> Vec<i16> {
        let (samples, _) =
            crate::audio::wav::read_16k_mono(&models_dir().join(name), None).expect("wav");
        let pad = |s: f32| vec![0i16; (s * 16_000.0) as usize];
        let mut out = pad(before);
        out.extend(crate::audio::to_i16(&samples));
        out.extend(pad(after));
        out
    }

    fn decision() -> Decision {
        Decision::from_config(&WakeConfig::default())
    }

    /// Feed in uneven pieces (as a microphone read does) and collect the
    /// frames each word fired on, and its highest probability.
    fn run(audio: &[i16], piece: usize) -> (Vec<(usize, u64)>, Vec<f32>) {
        let mut models = models().lock().unwrap();
        let mut stream = Stream::new(SHIPPED_WORDS.len());
        let mut fired = Vec::new();
        let mut best = vec![0f32; SHIPPED_WORDS.len()];
        for chunk in audio.chunks(piece) {
            for s in models.push(&mut stream, chunk, &decision()).unwrap() {
                best[s.word] = best[s.word].max(s.probability);
                if s.fired {
                    fired.push((s.word, s.frame));
                }
            }
        }
        (fired, best)
    }

    #[test]
    fn hey_jarvis_is_heard_once_and_only_by_its_classifier() {
        let audio = clip("oww-hey_jarvis.wav", 2.5, 1.5);
        let (fired, best) = run(&audio, 1600);
        assert_eq!(fired.len(), 1, "{fired:?} {best:?}");
        assert_eq!(fired[0].0, 0, "{fired:?}");
        assert!(best[0] > 0.9, "{best:?}");
        assert!(best[1] < 0.5 && best[2] < 0.5, "{best:?}");
        // It fires at the end of the word (the clip is 1.07 s after 2.5 s
        // of silence), not before it and not long after.
        let frame = fired[0].1;
        let end_ms = (frame * 1280 + 1760) * 1000 / 16_000;
        assert!(
            (3_000..=4_200).contains(&end_ms),
            "fired at frame {frame} ({end_ms} ms)"
        );
    }

    #[test]
    fn the_same_frames_whatever_the_read_size() {
        let audio = clip("oww-hey_jarvis.wav", 2.5, 1.5);
        let (a, _) = run(&audio, 1280);
        let (b, _) = run(&audio, 333);
        let (c, _) = run(&audio, audio.len());
        assert_eq!(a, b);
        assert_eq!(a, c);
    }

    #[test]
    fn speech_without_the_wake_word_and_silence_fire_nothing() {
        let mut audio = clip("oww-negative.wav", 2.5, 0.5);
        audio.extend(vec![0i16; 16_000 * 3]);
        let (fired, best) = run(&audio, 1024);
        assert!(fired.is_empty(), "{fired:?} {best:?}");
        assert!(best.iter().all(|p| *p < 0.5), "{best:?}");
    }

    #[test]
    fn a_repeated_wake_word_fires_again_after_the_refractory_time() {
        // hey jarvis three times, 0.2 s apart then 3 s apart: the second is
        // within the 2 s refractory time of the first.
        let word = clip("oww-hey_jarvis.wav", 0.0, 0.0);
        let mut audio = vec![0i16; 40_000];
        audio.extend(&word);
        audio.extend(vec![0i16; 3_200]);
        audio.extend(&word);
        audio.extend(vec![0i16; 48_000]);
        audio.extend(&word);
        audio.extend(vec![0i16; 24_000]);
        let (fired, _) = run(&audio, 2048);
        let jarvis: Vec<u64> = fired.iter().filter(|f| f.0 == 0).map(|f| f.1).collect();
        assert_eq!(jarvis.len(), 2, "{fired:?}");
        assert!(jarvis[1] - jarvis[0] >= 25, "{jarvis:?}");
    }

    #[test]
    fn the_detector_reports_the_word_and_where_it_was_heard() {
        // The voice loop's view: OnnxWake over the same models (its own
        // copy would load them again; build one from a fresh load only
        // here, where the trait is what is tested).
        let config = WakeConfig::default();
        let mut wake = OnnxWake::load(&config, &paths()).unwrap();
        assert!(wake.describe().contains("hey_jarvis_v0.1"));
        let audio = clip("oww-hey_jarvis.wav", 2.5, 1.0);
        for chunk in audio.chunks(320) {
            wake.feed(chunk);
        }
        let d = wake.poll().expect("a detection");
        assert_eq!(d.name, "hey_jarvis");
        let at = d.timestamp_ms.unwrap();
        assert!((3_000..=4_200).contains(&at), "{at}");
        assert_eq!(wake.poll(), None);
        assert_eq!(wake.position_ms(), audio.len() as u64 * 1000 / 16_000);
    }

    #[test]
    fn stage_rows_shift_by_a_step_and_hand_out_their_tail() {
        // Two channels of 4 rows of width 2: value = channel*100 + row*10 + w.
        let rows = |c: usize, r: usize, base: usize| Rows {
            channels: c,
            rows: r,
            width: 2,
            data: (0..c)
                .flat_map(|ch| {
                    (0..r).flat_map(move |row| {
                        (0..2).map(move |w| (ch * 100 + (base + row) * 10 + w) as f32)
                    })
                })
                .collect(),
        };
        let mut kept = rows(2, 4, 0);
        kept.shift_in(&rows(2, 2, 4)).unwrap();
        assert_eq!(kept, rows(2, 4, 2));
        assert_eq!(
            kept.tail(1),
            vec![50.0, 51.0, 150.0, 151.0],
            "the newest row of each channel"
        );
    }

    /// The shipped words' models from a copy of `models_dir` without the
    /// stage files (and, when `broken`, with a stage that is not a model).
    fn models_without_stages(broken: bool) -> (tempfile::TempDir, WakeModels) {
        let dir = tempfile::tempdir().unwrap();
        let mut files = vec![MEL_FILE.to_string(), EMBEDDING_FILE.to_string()];
        files.extend(SHIPPED_WORDS.iter().map(|w| {
            let f = word_file(&models_dir(), w).unwrap();
            f.file_name().unwrap().to_str().unwrap().to_string()
        }));
        for f in files {
            std::fs::copy(models_dir().join(&f), dir.path().join(&f)).unwrap();
        }
        if broken {
            for f in EMBEDDING_STAGE_FILES {
                std::fs::write(dir.path().join(f), b"not a model").unwrap();
            }
        }
        let mut p = paths();
        p.models_dir = dir.path().to_path_buf();
        let words: Vec<String> = SHIPPED_WORDS.iter().map(|w| w.to_string()).collect();
        let models = WakeModels::load(&words, &p).expect("loads without the stages");
        (dir, models)
    }

    #[test]
    fn the_streamed_embedding_scores_as_the_whole_model_does() {
        assert!(
            models().lock().unwrap().streams_embedding(),
            "scripts/fetch-wake.sh makes the stages"
        );
        let (_dir, mut whole) = models_without_stages(false);
        assert!(!whole.streams_embedding());
        // Speech, the wake word, speech again: every frame's probability
        // for every word, streamed and whole.
        let mut audio = clip("oww-negative.wav", 2.5, 0.3);
        audio.extend(clip("oww-hey_jarvis.wav", 0.0, 0.4));
        audio.extend(clip("oww-negative.wav", 0.0, 1.0));
        let score = |models: &mut WakeModels| {
            let mut stream = Stream::new(SHIPPED_WORDS.len());
            let mut out = Vec::new();
            for chunk in audio.chunks(1000) {
                out.extend(models.push(&mut stream, chunk, &decision()).unwrap());
            }
            out
        };
        let streamed = score(&mut models().lock().unwrap());
        let reference = score(&mut whole);
        assert!(streamed.len() > 100, "{}", streamed.len());
        assert_eq!(streamed.len(), reference.len());
        for (a, b) in streamed.iter().zip(&reference) {
            assert_eq!((a.word, a.frame, a.fired), (b.word, b.frame, b.fired));
            assert!((a.probability - b.probability).abs() < 1e-4, "{a:?} {b:?}");
        }
        assert!(streamed.iter().any(|s| s.fired && s.word == 0));
    }

    #[test]
    fn broken_stage_files_fall_back_to_the_whole_model() {
        let (_dir, mut models) = models_without_stages(true);
        assert!(!models.streams_embedding());
        let audio = clip("oww-hey_jarvis.wav", 2.5, 1.5);
        let mut stream = Stream::new(SHIPPED_WORDS.len());
        let fired: Vec<u64> = models
            .push(&mut stream, &audio, &decision())
            .unwrap()
            .into_iter()
            .filter(|s| s.fired && s.word == 0)
            .map(|s| s.frame)
            .collect();
        assert_eq!(fired.len(), 1, "{fired:?}");
    }

    #[test]
    fn unknown_words_and_bad_files_are_one_line_with_the_fix() {
        let err = WakeModels::load(&["hey_siri".into()], &paths())
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown wake word 'hey_siri'"), "{err}");
        assert!(err.contains("hey_jarvis") && err.contains("alexa"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        // A classifier that is not ONNX, beside the real front-end.
        let dir = tempfile::tempdir().unwrap();
        for f in [MEL_FILE, EMBEDDING_FILE] {
            std::fs::copy(models_dir().join(f), dir.path().join(f)).unwrap();
        }
        std::fs::write(dir.path().join("hey_broken_v0.1.onnx"), b"not a model").unwrap();
        let mut p = paths();
        p.models_dir = dir.path().to_path_buf();
        let err = WakeModels::load(&["hey_broken".into()], &p)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("hey_broken_v0.1.onnx") && err.contains("fetch-wake.sh"),
            "{err}"
        );
        // The embedding model given as a classifier: the wrong shape.
        std::fs::copy(
            models_dir().join(EMBEDDING_FILE),
            dir.path().join("hey_wrong.onnx"),
        )
        .unwrap();
        let err = WakeModels::load(&["hey_wrong".into()], &p)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an openWakeWord classifier"), "{err}");
        // The front-end missing.
        std::fs::remove_file(dir.path().join(MEL_FILE)).unwrap();
        let err = WakeModels::load(&["hey_wrong".into()], &p)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("melspectrogram.onnx") && err.contains("missing"),
            "{err}"
        );
    }
}
