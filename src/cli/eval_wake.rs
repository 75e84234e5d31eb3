//! `earshot eval wake --positives DIR --negatives DIR [--json]`: the
//! in-process wake word's false rejects on clips that hold it and false
//! accepts per hour on audio that does not, per source (see
//! [`crate::wake::eval`]). A benchmark: `scripts/wake-eval-data.sh` builds
//! the data; the test command never runs it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};

use crate::wake::eval::{self, EvalReport, Padding};

/// `earshot eval wake`'s flags: the decision settings are not among them,
/// so the eval measures what `[wake]` configures for the voice loop.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalWakeArgs {
    /// Clips that each hold the wake word (*.wav, any rate; one
    /// subdirectory per source).
    #[arg(long, value_name = "DIR")]
    pub positives: Option<PathBuf>,
    /// Audio without the wake word (*.wav, each at most 10 minutes; one
    /// subdirectory per source), streamed through one detector.
    #[arg(long, value_name = "DIR")]
    pub negatives: Option<PathBuf>,
    /// The wake word (default: the first of wake.words). Threshold,
    /// trigger frames and refractory time come from [wake].
    #[arg(long)]
    pub word: Option<String>,
    /// Silence before each positive clip (the pipeline scores only once
    /// about 2 s of audio are in).
    #[arg(long, default_value_t = 2000)]
    pub lead_ms: u64,
    /// Silence after each positive clip.
    #[arg(long, default_value_t = 1000)]
    pub tail_ms: u64,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Run the eval; prints the report.
#[cfg(feature = "onnx")]
pub fn run(config_path: Option<&Path>, args: EvalWakeArgs) -> Result<bool> {
    if args.positives.is_none() && args.negatives.is_none() {
        bail!(
            "give --positives DIR, --negatives DIR or both (scripts/wake-eval-data.sh builds them)"
        );
    }
    let config = super::load_config(config_path)?.config;
    let paths = config.paths();
    let word = args
        .word
        .clone()
        .unwrap_or_else(|| config.wake.first_word(&config.wyoming));
    // List before loading models: a wrong path fails at once.
    let positives = args
        .positives
        .as_deref()
        .map(eval::list_clips)
        .transpose()?;
    let negatives = args
        .negatives
        .as_deref()
        .map(eval::list_clips)
        .transpose()?;
    let models = crate::wake::onnx::WakeModels::load(std::slice::from_ref(&word), &paths)?;
    let model = models.model_names().first().cloned().unwrap_or_default();
    let decision = crate::wake::onnx::Decision::from_config(&config.wake);
    let mut detector = eval::OnnxFrames::new(models, decision);
    let mut load = |path: &Path| -> Result<Vec<i16>> {
        let (samples, _) = crate::audio::wav::read_16k_mono(path, None)
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        Ok(crate::audio::to_i16(&samples))
    };
    let started = Instant::now();
    let pos = positives
        .as_deref()
        .map(|clips| {
            eval::score_positives(
                &mut detector,
                clips,
                &mut load,
                Padding {
                    lead_ms: args.lead_ms,
                    tail_ms: args.tail_ms,
                },
            )
        })
        .transpose()?;
    let neg = negatives
        .as_deref()
        .map(|clips| eval::score_negatives(&mut detector, clips, &mut load))
        .transpose()?;
    let report = EvalReport::new(
        word,
        model,
        (
            config.wake.threshold,
            config.wake.trigger_frames,
            config.wake.refractory_ms,
        ),
        pos,
        neg,
        started.elapsed().as_secs_f64(),
    );
    if args.json {
        super::print_json(&serde_json::to_value(&report)?);
    } else {
        print_text(&report, args.positives.is_some(), args.negatives.is_some());
    }
    Ok(true)
}

#[cfg(not(feature = "onnx"))]
pub fn run(_config_path: Option<&Path>, _args: EvalWakeArgs) -> Result<bool> {
    bail!("this build has no ONNX Runtime (built without the `onnx` feature)")
}

fn print_text(r: &EvalReport, positives: bool, negatives: bool) {
    println!(
        "wake word {} ({}), threshold {}, trigger frames {}, refractory {} ms",
        r.word, r.model, r.threshold, r.trigger_frames, r.refractory_ms
    );
    if positives {
        println!(
            "false rejects: {:.1} % of {} clips",
            r.false_reject_rate * 100.0,
            r.clips
        );
        for (source, c) in &r.positive_sources {
            println!(
                "  {source:<24} {:>3}/{:<3} missed ({:.1} %), weakest clip peaks at {:.3}",
                c.false_rejects,
                c.clips,
                c.false_reject_rate * 100.0,
                c.min_peak
            );
        }
        for miss in &r.rejected {
            println!("  missed {} (peak {:.3})", miss.file, miss.peak);
        }
    }
    if negatives {
        println!(
            "false accepts: {} in {:.2} h ({:.2} per hour)",
            r.false_accepts, r.negative_hours, r.false_accepts_per_hour
        );
        for (source, c) in &r.negative_sources {
            println!(
                "  {source:<24} {:>3} in {:>6.1} min ({:.2} per hour), highest probability {:.3}",
                c.false_accepts,
                c.hours * 60.0,
                c.false_accepts_per_hour,
                c.max_peak
            );
        }
        for a in &r.accepted {
            println!("  fired in {} at {:.2} s", a.file, a.at_s);
        }
    }
    println!(
        "{:.0} s of audio in {:.1} s ({:.3} s per audio s)",
        r.audio_s,
        r.wall_s,
        r.wall_s / r.audio_s.max(1e-9)
    );
}
