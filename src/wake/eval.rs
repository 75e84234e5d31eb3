//! `earshot eval wake`: measured accuracy of the in-process wake word on a
//! directory of clips that hold it (positives) and one of audio that does
//! not (negatives), as issue 17 asks: false rejects per clip, false accepts
//! per hour.
//!
//! - A positive clip counts as accepted if the detector fires anywhere in
//!   it. Each clip gets a fresh stream (no history, no activations) and is
//!   framed by silence: `lead_ms` before, because the pipeline gives its
//!   first score only once ~2 s of audio have filled the mel and embedding
//!   windows, and `tail_ms` after, so a word that ends the clip is still
//!   scored.
//! - Negatives are streamed through one detector, in path order, with the
//!   configured refractory time, as a microphone would feed it: every
//!   detection is a false accept, attributed to the file its window ends in.
//! - The source of a clip is the name of its first directory below the
//!   root (`positives/piper/…` → `piper`), so one run reports each kind of
//!   data apart; a file directly in the root has the source `.`.
//!
//! The scoring is generic over [`FrameDetector`] so it is unit-tested with
//! a fake detector; [`OnnxFrames`] is the real pipeline (the same
//! [`Decision`] the voice loop uses).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::onnx::{FRAME_SAMPLES, MEL_SAMPLES};

/// Samples per second of the pipeline.
const RATE: u64 = 16_000;

/// The detector as the eval drives it.
pub trait FrameDetector {
    /// Start a fresh stream (a new clip): no audio history, no activations.
    fn reset(&mut self);
    /// Feed 16 kHz mono samples; the 80 ms frames (counted from the last
    /// [`reset`](Self::reset)) on which the word fired.
    fn feed(&mut self, samples: &[i16]) -> Result<Vec<u64>>;
    /// The highest probability scored since the last call (0 if none),
    /// to say how near the threshold a set came, not only whether it
    /// crossed it.
    fn take_peak(&mut self) -> f32;
}

/// The in-process openWakeWord pipeline for one word, with `[wake]`'s
/// threshold, trigger frames and refractory time.
#[cfg(feature = "onnx")]
pub struct OnnxFrames {
    models: super::onnx::WakeModels,
    stream: super::onnx::Stream,
    decision: super::onnx::Decision,
    peak: f32,
}

#[cfg(feature = "onnx")]
impl OnnxFrames {
    /// Wrap loaded models (one word) and the decision settings.
    pub fn new(models: super::onnx::WakeModels, decision: super::onnx::Decision) -> OnnxFrames {
        OnnxFrames {
            models,
            stream: super::onnx::Stream::new(1),
            decision,
            peak: 0.0,
        }
    }
}

#[cfg(feature = "onnx")]
impl FrameDetector for OnnxFrames {
    fn reset(&mut self) {
        self.stream = super::onnx::Stream::new(1);
    }

    fn feed(&mut self, samples: &[i16]) -> Result<Vec<u64>> {
        let scores = self
            .models
            .push(&mut self.stream, samples, &self.decision)?;
        for s in &scores {
            self.peak = self.peak.max(s.probability);
        }
        Ok(scores
            .into_iter()
            .filter(|s| s.fired)
            .map(|s| s.frame)
            .collect())
    }

    fn take_peak(&mut self) -> f32 {
        std::mem::take(&mut self.peak)
    }
}

/// One audio file of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clip {
    pub path: PathBuf,
    /// First directory below the root (`.` for a file in the root).
    pub source: String,
}

/// Every `.wav` below `root` (recursively), sorted by path so a run is
/// repeatable. An empty set is an error: a typo in a path must not pass as
/// "no false accepts".
pub fn list_clips(root: &Path) -> Result<Vec<Clip>> {
    if !root.is_dir() {
        bail!("{} is not a directory", root.display());
    }
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("wav"))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("no .wav files under {}", root.display());
    }
    Ok(files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let mut parts = rel.components();
            let first = parts.next();
            let source = match (first, parts.next()) {
                (Some(dir), Some(_)) => dir.as_os_str().to_string_lossy().into_owned(),
                _ => ".".to_string(),
            };
            Clip { path, source }
        })
        .collect())
}

/// Silence around each positive clip.
#[derive(Debug, Clone, Copy)]
pub struct Padding {
    pub lead_ms: u64,
    pub tail_ms: u64,
}

impl Default for Padding {
    fn default() -> Self {
        Padding {
            lead_ms: 2000,
            tail_ms: 1000,
        }
    }
}

/// False rejects of one source (or of all).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PositiveCount {
    pub clips: usize,
    pub false_rejects: usize,
    pub false_reject_rate: f64,
    /// The weakest clip's highest probability: how far below the
    /// threshold the hardest clip stayed, or how far above it.
    pub min_peak: f32,
}

impl PositiveCount {
    fn add(&mut self, accepted: bool, peak: f32) {
        self.min_peak = if self.clips == 0 {
            peak
        } else {
            self.min_peak.min(peak)
        };
        self.clips += 1;
        if !accepted {
            self.false_rejects += 1;
        }
        self.false_reject_rate = self.false_rejects as f64 / self.clips as f64;
    }
}

/// The positives' result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PositiveReport {
    pub total: PositiveCount,
    pub sources: BTreeMap<String, PositiveCount>,
    /// The clips it missed, to listen to.
    pub rejected: Vec<Rejected>,
    /// Seconds of audio fed (with the padding).
    pub audio_s: f64,
}

/// A positive clip the detector missed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rejected {
    pub file: String,
    /// Its highest probability.
    pub peak: f32,
}

/// Run every positive clip through a fresh stream.
pub fn score_positives(
    detector: &mut dyn FrameDetector,
    clips: &[Clip],
    load: &mut dyn FnMut(&Path) -> Result<Vec<i16>>,
    padding: Padding,
) -> Result<PositiveReport> {
    let mut report = PositiveReport::default();
    let lead = vec![0i16; (padding.lead_ms * RATE / 1000) as usize];
    let tail = vec![0i16; (padding.tail_ms * RATE / 1000) as usize];
    for clip in clips {
        let samples = load(&clip.path)?;
        detector.reset();
        detector.take_peak();
        let mut audio = Vec::with_capacity(lead.len() + samples.len() + tail.len());
        audio.extend_from_slice(&lead);
        audio.extend_from_slice(&samples);
        audio.extend_from_slice(&tail);
        let mut accepted = false;
        for chunk in audio.chunks(FRAME_SAMPLES) {
            if !detector.feed(chunk)?.is_empty() {
                accepted = true;
            }
        }
        let peak = detector.take_peak();
        report.audio_s += audio.len() as f64 / RATE as f64;
        report.total.add(accepted, peak);
        report
            .sources
            .entry(clip.source.clone())
            .or_default()
            .add(accepted, peak);
        if !accepted {
            report.rejected.push(Rejected {
                file: clip.path.display().to_string(),
                peak,
            });
        }
    }
    Ok(report)
}

/// False accepts of one source (or of all).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct NegativeCount {
    pub files: usize,
    pub hours: f64,
    pub false_accepts: usize,
    pub false_accepts_per_hour: f64,
    /// The highest probability scored anywhere in it.
    pub max_peak: f32,
}

impl NegativeCount {
    fn finish(&mut self) {
        self.false_accepts_per_hour = if self.hours > 0.0 {
            self.false_accepts as f64 / self.hours
        } else {
            0.0
        };
    }
}

/// Where a false accept happened.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FalseAccept {
    pub file: String,
    /// Seconds into that file where the firing frame's window ends.
    pub at_s: f64,
}

/// The negatives' result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NegativeReport {
    pub total: NegativeCount,
    pub sources: BTreeMap<String, NegativeCount>,
    pub accepts: Vec<FalseAccept>,
}

/// Stream every negative file, in order, through one detector.
pub fn score_negatives(
    detector: &mut dyn FrameDetector,
    clips: &[Clip],
    load: &mut dyn FnMut(&Path) -> Result<Vec<i16>>,
) -> Result<NegativeReport> {
    let mut report = NegativeReport::default();
    detector.reset();
    detector.take_peak();
    // Where each file starts in the stream, in samples.
    let mut starts: Vec<u64> = Vec::with_capacity(clips.len());
    let mut fed: u64 = 0;
    // Feed whole 80 ms chunks, as a microphone delivers them: a file's
    // last partial chunk is carried into the next file.
    let mut carry: Vec<i16> = Vec::with_capacity(FRAME_SAMPLES);
    for (i, clip) in clips.iter().enumerate() {
        let samples = load(&clip.path)?;
        starts.push(fed);
        fed += samples.len() as u64;
        let entry = report.sources.entry(clip.source.clone()).or_default();
        entry.files += 1;
        entry.hours += samples.len() as f64 / RATE as f64 / 3600.0;
        let mut rest: &[i16] = &samples;
        let last = i + 1 == clips.len();
        loop {
            let need = FRAME_SAMPLES - carry.len();
            if rest.len() < need {
                carry.extend_from_slice(rest);
                if last && !carry.is_empty() {
                    let chunk = std::mem::take(&mut carry);
                    take(detector.feed(&chunk)?, &starts, clips, &mut report);
                }
                break;
            }
            carry.extend_from_slice(&rest[..need]);
            rest = &rest[need..];
            let chunk = std::mem::take(&mut carry);
            take(detector.feed(&chunk)?, &starts, clips, &mut report);
        }
        // The carried tail belongs to the next file; its score is counted
        // there (less than 80 ms of audio either way).
        let peak = detector.take_peak();
        if let Some(count) = report.sources.get_mut(&clip.source) {
            count.max_peak = count.max_peak.max(peak);
        }
        report.total.max_peak = report.total.max_peak.max(peak);
    }
    report.total.files = clips.len();
    report.total.hours = fed as f64 / RATE as f64 / 3600.0;
    report.total.false_accepts = report.accepts.len();
    report.total.finish();
    for count in report.sources.values_mut() {
        count.finish();
    }
    Ok(report)
}

/// Record fired frames: each is attributed to the file holding the last
/// sample of its window (`frame × 1280 + 1760`).
fn take(frames: Vec<u64>, starts: &[u64], clips: &[Clip], report: &mut NegativeReport) {
    for frame in frames {
        let end = frame * FRAME_SAMPLES as u64 + MEL_SAMPLES as u64;
        let at = end.saturating_sub(1);
        let file = starts.partition_point(|&s| s <= at).saturating_sub(1);
        let Some(clip) = clips.get(file) else {
            continue;
        };
        let start = starts.get(file).copied().unwrap_or(0);
        if let Some(count) = report.sources.get_mut(&clip.source) {
            count.false_accepts += 1;
        }
        report.accepts.push(FalseAccept {
            file: clip.path.display().to_string(),
            at_s: (end - start.min(end)) as f64 / RATE as f64,
        });
    }
}

/// The whole report (`--json` prints it as is): the fields issue 17 names
/// first, then the breakdown.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub word: String,
    /// The model file's stem (`hey_jarvis_v0.1`).
    pub model: String,
    /// Positive clips scored.
    pub clips: usize,
    pub false_reject_rate: f64,
    pub negative_hours: f64,
    pub false_accepts: usize,
    pub false_accepts_per_hour: f64,
    pub threshold: f32,
    pub trigger_frames: u32,
    pub refractory_ms: u64,
    pub positive_sources: BTreeMap<String, PositiveCount>,
    pub negative_sources: BTreeMap<String, NegativeCount>,
    /// The weakest positive clip's highest probability.
    pub positive_min_peak: f32,
    /// The highest probability anywhere in the negatives.
    pub negative_max_peak: f32,
    pub rejected: Vec<Rejected>,
    pub accepted: Vec<FalseAccept>,
    /// Audio seconds run through the detector, and the wall time it took.
    pub audio_s: f64,
    pub wall_s: f64,
}

impl EvalReport {
    /// Put the two halves together (either may be absent).
    pub fn new(
        word: String,
        model: String,
        decision: (f32, u32, u64),
        positives: Option<PositiveReport>,
        negatives: Option<NegativeReport>,
        wall_s: f64,
    ) -> EvalReport {
        let positives = positives.unwrap_or_default();
        let negatives = negatives.unwrap_or_default();
        EvalReport {
            word,
            model,
            clips: positives.total.clips,
            false_reject_rate: positives.total.false_reject_rate,
            negative_hours: negatives.total.hours,
            false_accepts: negatives.total.false_accepts,
            false_accepts_per_hour: negatives.total.false_accepts_per_hour,
            threshold: decision.0,
            trigger_frames: decision.1,
            refractory_ms: decision.2,
            positive_min_peak: positives.total.min_peak,
            negative_max_peak: negatives.total.max_peak,
            positive_sources: positives.sources,
            negative_sources: negatives.sources,
            rejected: positives.rejected,
            accepted: negatives.accepts,
            audio_s: positives.audio_s + negatives.total.hours * 3600.0,
            wall_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Fires on a frame whose 80 ms chunk holds a sample above 10 000,
    /// unless it fired within the last `refractory` frames; counts frames
    /// by chunks fed since reset, as the pipeline counts 80 ms steps.
    struct Fake {
        frame: u64,
        last: Option<u64>,
        refractory: u64,
        resets: usize,
        peak: f32,
    }

    impl Fake {
        fn new(refractory: u64) -> Fake {
            Fake {
                frame: 0,
                last: None,
                refractory,
                resets: 0,
                peak: 0.0,
            }
        }
    }

    impl FrameDetector for Fake {
        fn reset(&mut self) {
            self.frame = 0;
            self.last = None;
            self.resets += 1;
        }
        fn feed(&mut self, samples: &[i16]) -> Result<Vec<u64>> {
            assert!(samples.len() <= FRAME_SAMPLES);
            let frame = self.frame;
            self.frame += 1;
            let loudest = samples.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0);
            self.peak = self.peak.max(f32::from(loudest) / 32_768.0);
            let loud = loudest > 10_000;
            let cooling = self.last.is_some_and(|l| frame < l + self.refractory);
            if loud && !cooling {
                self.last = Some(frame);
                return Ok(vec![frame]);
            }
            Ok(Vec::new())
        }
        fn take_peak(&mut self) -> f32 {
            std::mem::take(&mut self.peak)
        }
    }

    fn clip(path: &str, source: &str) -> Clip {
        Clip {
            path: PathBuf::from(path),
            source: source.into(),
        }
    }

    fn loader(audio: HashMap<&'static str, Vec<i16>>) -> impl FnMut(&Path) -> Result<Vec<i16>> {
        move |p: &Path| {
            audio
                .get(p.to_str().unwrap_or(""))
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no such clip"))
        }
    }

    fn burst(len: usize, at: usize) -> Vec<i16> {
        let mut v = vec![0i16; len];
        v[at] = 20_000;
        v
    }

    #[test]
    fn a_clip_is_accepted_if_it_fires_anywhere_and_sources_are_apart() {
        let clips = vec![
            clip("a/1.wav", "piper"),
            clip("a/2.wav", "piper"),
            clip("b/1.wav", "real"),
            clip("b/2.wav", "real"),
        ];
        let mut load = loader(HashMap::from([
            ("a/1.wav", burst(16_000, 100)),
            ("a/2.wav", burst(16_000, 15_999)),
            ("b/1.wav", vec![300; 16_000]),
            ("b/2.wav", burst(8_000, 4_000)),
        ]));
        let mut fake = Fake::new(0);
        let r = score_positives(&mut fake, &clips, &mut load, Padding::default()).unwrap();
        assert_eq!(fake.resets, 4, "a fresh stream per clip");
        assert_eq!(r.total.clips, 4);
        assert_eq!(r.total.false_rejects, 1);
        assert!((r.total.false_reject_rate - 0.25).abs() < 1e-12);
        assert_eq!(r.sources["piper"].false_rejects, 0);
        assert_eq!(r.sources["real"].false_rejects, 1);
        assert!((r.sources["real"].false_reject_rate - 0.5).abs() < 1e-12);
        assert_eq!(r.rejected.len(), 1);
        assert_eq!(r.rejected[0].file, "b/1.wav");
        // The missed clip's peak, and the weakest clip per source.
        assert!((r.rejected[0].peak - 300.0 / 32_768.0).abs() < 1e-6);
        assert!((r.sources["real"].min_peak - 300.0 / 32_768.0).abs() < 1e-6);
        assert!((r.sources["piper"].min_peak - 20_000.0 / 32_768.0).abs() < 1e-6);
        // 3 s of padding around each clip.
        assert!((r.audio_s - (1.0 + 1.0 + 1.0 + 0.5 + 4.0 * 3.0)).abs() < 1e-9);
    }

    #[test]
    fn a_load_error_stops_the_eval() {
        let clips = vec![clip("missing.wav", ".")];
        let mut load = loader(HashMap::new());
        let mut fake = Fake::new(0);
        assert!(score_positives(&mut fake, &clips, &mut load, Padding::default()).is_err());
    }

    #[test]
    fn negatives_are_one_stream_with_refractory_time_and_per_source_hours() {
        // 6 min and 3 min of silence with bursts: two 1 s apart in the
        // first file (refractory 25 frames = 2 s: one detection), one in
        // the second file at 10 s.
        let minute = 60 * 16_000usize;
        let mut first = vec![0i16; 6 * minute];
        first[16_000 * 100] = 20_000;
        first[16_000 * 101] = 20_000;
        let mut second = vec![0i16; 3 * minute];
        second[16_000 * 10] = 20_000;
        let clips = vec![clip("n/tv/1.wav", "tv"), clip("n/books/2.wav", "books")];
        let mut load = loader(HashMap::from([
            ("n/tv/1.wav", first),
            ("n/books/2.wav", second),
        ]));
        let mut fake = Fake::new(25);
        let r = score_negatives(&mut fake, &clips, &mut load).unwrap();
        assert_eq!(fake.resets, 1, "one stream for every negative file");
        assert_eq!(r.total.false_accepts, 2);
        assert!((r.total.hours - 0.15).abs() < 1e-9);
        assert!((r.total.false_accepts_per_hour - 2.0 / 0.15).abs() < 1e-6);
        assert_eq!(r.sources["tv"].false_accepts, 1);
        assert!((r.sources["tv"].hours - 0.1).abs() < 1e-9);
        assert_eq!(r.sources["books"].false_accepts, 1);
        assert!((r.sources["books"].false_accepts_per_hour - 20.0).abs() < 1e-6);
        assert_eq!(r.accepts[1].file, "n/books/2.wav");
        assert!((r.sources["tv"].max_peak - 20_000.0 / 32_768.0).abs() < 1e-6);
        assert!((r.total.max_peak - 20_000.0 / 32_768.0).abs() < 1e-6);
        // The fake's frame k covers samples k×1280..(k+1)×1280; the window
        // end the eval reports is k×1280 + 1760, within 0.11 s of the burst.
        assert!((r.accepts[1].at_s - 10.0).abs() < 0.12, "{:?}", r.accepts);
        assert!((r.accepts[0].at_s - 100.0).abs() < 0.12, "{:?}", r.accepts);
    }

    #[test]
    fn chunks_stay_whole_across_file_boundaries() {
        // Files of odd lengths: every chunk but the very last is 80 ms.
        struct Sizes(Vec<usize>);
        impl FrameDetector for Sizes {
            fn reset(&mut self) {}
            fn feed(&mut self, samples: &[i16]) -> Result<Vec<u64>> {
                self.0.push(samples.len());
                Ok(Vec::new())
            }
            fn take_peak(&mut self) -> f32 {
                0.0
            }
        }
        let clips = vec![clip("x", "a"), clip("y", "a"), clip("z", "b")];
        let mut load = loader(HashMap::from([
            ("x", vec![0; 1000]),
            ("y", vec![0; 2000]),
            ("z", vec![0; 700]),
        ]));
        let mut sizes = Sizes(Vec::new());
        let r = score_negatives(&mut sizes, &clips, &mut load).unwrap();
        assert_eq!(sizes.0, vec![1280, 1280, 1140]);
        assert_eq!(r.sources["a"].files, 2);
        assert_eq!(r.total.files, 3);
        assert_eq!(r.total.false_accepts_per_hour, 0.0);
    }

    #[test]
    fn clips_are_listed_sorted_with_their_source_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for p in [
            "piper/b.wav",
            "piper/a.WAV",
            "real/x/c.wav",
            "top.wav",
            "notes.txt",
        ] {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
        }
        let clips = list_clips(root).unwrap();
        let got: Vec<(String, String)> = clips
            .iter()
            .map(|c| {
                (
                    c.path.strip_prefix(root).unwrap().display().to_string(),
                    c.source.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("piper/a.WAV".to_string(), "piper".to_string()),
                ("piper/b.wav".to_string(), "piper".to_string()),
                ("real/x/c.wav".to_string(), "real".to_string()),
                ("top.wav".to_string(), ".".to_string()),
            ]
        );
        let empty = tempfile::tempdir().unwrap();
        let err = list_clips(empty.path()).unwrap_err().to_string();
        assert!(err.contains("no .wav files"), "{err}");
        assert!(list_clips(&root.join("nope")).is_err());
    }

    #[test]
    fn the_report_carries_the_issue_fields() {
        let mut pos = PositiveReport::default();
        pos.total.add(true, 0.9);
        pos.total.add(false, 0.2);
        let neg = NegativeReport {
            total: NegativeCount {
                files: 1,
                hours: 2.0,
                false_accepts: 1,
                false_accepts_per_hour: 0.5,
                max_peak: 0.7,
            },
            ..Default::default()
        };
        let r = EvalReport::new(
            "hey_jarvis".into(),
            "hey_jarvis_v0.1".into(),
            (0.5, 1, 2000),
            Some(pos),
            Some(neg),
            1.0,
        );
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "word",
            "clips",
            "false_reject_rate",
            "negative_hours",
            "false_accepts",
            "false_accepts_per_hour",
        ] {
            assert!(v.get(key).is_some(), "{key} missing: {v}");
        }
        assert_eq!(v["clips"], 2);
        assert_eq!(v["false_reject_rate"], 0.5);
        assert_eq!(v["false_accepts_per_hour"], 0.5);
        assert!((r.positive_min_peak - 0.2).abs() < 1e-6);
    }
}
