//! `earshot bench stt`: earshot's local STT (fast path + fallback) side by
//! side with whisper.cpp's default decoding on the same model and threads:
//! the library's default greedy parameters through whisper-rs in this
//! process (same whisper.cpp build as ours), and optionally the
//! `whisper-cli` program (`--whisper-cli`, built by
//! scripts/build-whisper-cli.sh). Inference time only: the model is loaded
//! and warmed up before any clip is timed.
//!
//! With `--whisper-cli` a parity column is added (issue 6.7, "no overhead
//! of ours"): earshot's whisper engine decoding with exactly whisper-cli's
//! default settings (full context, beam 5, temperature fallback and
//! thresholds, same threads, flash attention as whisper-cli) against the
//! CLI's own inference time (`total - load` from its report) on the same
//! clip, plus the real-time factor of each.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use crate::audio::{self, SAMPLE_RATE};
use crate::stt::{text, whisper::WhisperStt, Stt, Transcriber};

/// Short commands a voice device hears, synthesised for the benchmark.
pub const COMMANDS: &[&str] = &[
    "What time is it?",
    "Stop.",
    "Turn on the kitchen lights.",
    "Set a timer for ten minutes.",
    "What's the weather like tomorrow?",
    "Add milk to my shopping list.",
    "Play some music in the living room.",
    "Remind me to call my mother at five.",
    "Tell me a joke.",
    "How many days until Christmas?",
];

/// Arguments of `earshot bench stt`.
#[derive(Debug, clap::Args)]
pub struct BenchSttArgs {
    /// Directory of WAV clips with a `transcripts.tsv` (name<TAB>reference).
    #[arg(long, value_name = "DIR", default_value = "tests/data/speech")]
    pub clips: PathBuf,
    /// Skip the synthesised short commands.
    #[arg(long)]
    pub no_commands: bool,
    /// Where synthesised commands are cached (default: <state_dir>/bench-stt).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// whisper.cpp's CLI to time as well (its own default decoding).
    #[arg(long, value_name = "PATH", env = "EARSHOT_WHISPER_CLI")]
    pub whisper_cli: Option<PathBuf>,
    /// Timed runs per clip and engine (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// One JSON object per clip, then a summary object.
    #[arg(long)]
    pub json: bool,
}

struct Clip {
    name: String,
    reference: String,
    wav: PathBuf,
    samples: Vec<f32>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn load_clips(dir: &Path) -> Result<Vec<Clip>> {
    let tsv = dir.join("transcripts.tsv");
    let body = std::fs::read_to_string(&tsv).with_context(|| {
        format!(
            "cannot read {} (name<TAB>reference per line)",
            tsv.display()
        )
    })?;
    let mut out = Vec::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        let Some((name, reference)) = line.split_once('\t') else {
            continue;
        };
        let wav = dir.join(name.trim());
        let (samples, _) = audio::wav::read_16k_mono(&wav, None)?;
        out.push(Clip {
            name: name.trim().to_string(),
            reference: reference.trim().to_string(),
            wav,
            samples,
        });
    }
    Ok(out)
}

/// Synthesise `text` to a 16 kHz mono WAV: Piper through `earshot say`
/// when it works, else espeak-ng (robotic but always there).
fn synthesise(text: &str, out: &Path) -> Result<&'static str> {
    let tmp = out.with_extension("raw.wav");
    let exe = std::env::current_exe().context("cannot find the earshot binary")?;
    let piper = Command::new(&exe)
        .args(["say", text, "--engine", "piper", "--out"])
        .arg(&tmp)
        .output();
    let engine = match piper {
        Ok(o) if o.status.success() && tmp.is_file() => "piper",
        _ => {
            let o = Command::new("espeak-ng")
                .args(["-v", "en-us", "-s", "150", "-w"])
                .arg(&tmp)
                .arg(text)
                .output()
                .context("neither `earshot say` (Piper) nor espeak-ng could synthesise; install espeak-ng")?;
            if !o.status.success() {
                bail!(
                    "espeak-ng failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
            "espeak-ng"
        }
    };
    let (samples, _) = audio::wav::read_16k_mono(&tmp, None)?;
    // A little silence around the words, as a VAD-cut utterance has.
    let pad = vec![0.0f32; SAMPLE_RATE as usize / 5];
    let mut all = pad.clone();
    all.extend_from_slice(&samples);
    all.extend_from_slice(&pad);
    std::fs::write(out, audio::wav::write_16k_mono(&audio::to_i16(&all)))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(engine)
}

fn command_clips(dir: &Path) -> Result<Vec<Clip>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = Vec::new();
    for (i, text) in COMMANDS.iter().enumerate() {
        let wav = dir.join(format!("cmd{i:02}.wav"));
        if !wav.is_file() {
            let engine = synthesise(text, &wav)?;
            tracing::info!(engine, text, "synthesised a benchmark command");
        }
        let (samples, _) = audio::wav::read_16k_mono(&wav, None)?;
        out.push(Clip {
            name: format!("cmd{i:02}.wav"),
            reference: text.to_string(),
            wav,
            samples,
        });
    }
    Ok(out)
}

/// Inference time and transcript from whisper-cli (`total - load` from its
/// own timing report, so process start and model load are excluded).
fn run_cli(cli: &Path, model: &Path, wav: &Path, threads: usize) -> Result<(f64, String)> {
    let o = Command::new(cli)
        .arg("-m")
        .arg(model)
        .arg("-f")
        .arg(wav)
        // No `-nt`: that flag changes decoding (no timestamp tokens); the
        // defaults print "[from --> to]   text" lines, stripped below.
        .args(["-t", &threads.to_string(), "-l", "en"])
        .output()
        .with_context(|| format!("cannot run {}", cli.display()))?;
    if !o.status.success() {
        bail!(
            "{} failed: {}",
            cli.display(),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    let err = String::from_utf8_lossy(&o.stderr);
    let grab = |key: &str| -> Option<f64> {
        err.lines()
            .find(|l| l.contains(key))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let total =
        grab("total time").ok_or_else(|| anyhow!("no 'total time' in whisper-cli output"))?;
    let load = grab("load time").unwrap_or(0.0);
    Ok((total - load, cli_text(&String::from_utf8_lossy(&o.stdout))))
}

/// The words of whisper-cli's stdout: each `[00:00:00.000 --> …]   text`
/// line without its timestamps, joined.
fn cli_text(stdout: &str) -> String {
    stdout
        .lines()
        .map(|l| {
            let l = l.trim();
            match (l.starts_with('['), l.find(']')) {
                (true, Some(end)) => l[end + 1..].trim(),
                _ => l,
            }
        })
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Per-clip whisper-cli figures.
struct CliFigures {
    cli_ms: f64,
    cli_text: String,
    parity_ms: f64,
    parity_text: String,
}

fn earshot_model(config: &crate::config::Config) -> std::path::PathBuf {
    crate::stt::quantize::model_to_load(
        &config.models_dir.join(&config.stt.whisper_model),
        config.stt.whisper_weights,
        &config.state_dir.join("cache"),
    )
}

/// Run the benchmark; `Ok(true)` when every target was met.
pub fn run(config_path: Option<&Path>, args: BenchSttArgs) -> Result<bool> {
    let loaded = super::load_config(config_path)?;
    let config = loaded.config;
    // whisper-cli gets the very file earshot loads (the q8_0 copy by default).
    let model = earshot_model(&config);
    let engine = Arc::new(WhisperStt::load(&model, &config.stt)?);
    let stt = Stt::with_engines(
        vec![engine.clone() as Arc<dyn Transcriber>],
        config.stt.min_voiced_ms,
    );
    engine.warm_up()?;
    let mut clips = load_clips(&args.clips)?;
    if !args.no_commands {
        let dir = args
            .work_dir
            .clone()
            .unwrap_or_else(|| config.state_dir.join("bench-stt"));
        clips.extend(command_clips(&dir)?);
    }
    let runs = args.runs.max(1);
    let threads = engine.threads();
    if !args.json {
        println!(
            "model {} · {} threads · {} run(s) per clip (median) · beam_size {} · flash_attn {} · whisper.cpp {}",
            model.display(),
            threads,
            runs,
            config.stt.beam_size,
            engine.flash_attn(),
            whisper_rs::WHISPER_CPP_VERSION
        );
    }
    let mut short_ratios = Vec::new();
    let mut worst_ratio = 0.0f64;
    let mut wer_worse = Vec::new();
    let mut parity_ratios = Vec::new();
    for clip in &clips {
        let dur_s = clip.samples.len() as f64 / f64::from(SAMPLE_RATE);
        let mut base_ms = Vec::new();
        let mut ours_ms = Vec::new();
        let mut parity_ms = Vec::new();
        let mut cli_ms = Vec::new();
        let mut base_text = String::new();
        let mut parity_text = String::new();
        let mut cli_text = String::new();
        let mut ours = None;
        // Interleaved per run, so load changes hit every column alike.
        for _ in 0..runs {
            let d = engine.decode_library_default(&clip.samples)?;
            base_ms.push(d.elapsed.as_secs_f64() * 1000.0);
            base_text = d.text;
            let t0 = Instant::now();
            let t = stt.transcribe(&clip.samples)?;
            ours_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
            ours = Some(t);
            if let Some(cli) = &args.whisper_cli {
                let p = engine.decode_cli_default(&clip.samples)?;
                parity_ms.push(p.elapsed.as_secs_f64() * 1000.0);
                parity_text = p.text;
                let (ms, t) = run_cli(cli, &model, &clip.wav, threads)?;
                cli_ms.push(ms);
                cli_text = t;
            }
        }
        let Some(ours) = ours else { continue };
        let (base, mine) = (median(base_ms), median(ours_ms));
        let ratio = mine / base;
        let wer_base = text::wer(&clip.reference, &base_text);
        let wer_ours = text::wer(&clip.reference, &ours.text);
        if dur_s <= 5.0 {
            short_ratios.push(ratio);
        }
        worst_ratio = worst_ratio.max(ratio);
        if wer_ours > wer_base + 1e-9 {
            wer_worse.push(clip.name.clone());
        }
        let cli = args.whisper_cli.as_ref().map(|_| CliFigures {
            cli_ms: median(cli_ms),
            cli_text,
            parity_ms: median(parity_ms),
            parity_text,
        });
        if let Some(c) = &cli {
            parity_ratios.push(c.parity_ms / c.cli_ms);
        }
        let audio_ms = dur_s * 1000.0;
        if args.json {
            super::print_json(&json!({
                "clip": clip.name, "seconds": dur_s,
                "default_ms": base, "earshot_ms": mine, "ratio": ratio,
                "default_text": base_text, "earshot_text": ours.text,
                "wer_default": wer_base, "wer_earshot": wer_ours,
                "path": ours.path, "reason": ours.reason, "audio_ctx": ours.audio_ctx,
                "rtf_default": base / audio_ms, "rtf_earshot": mine / audio_ms,
                "cli_ms": cli.as_ref().map(|c| c.cli_ms), "cli_text": cli.as_ref().map(|c| c.cli_text.clone()),
                "wer_cli": cli.as_ref().map(|c| text::wer(&clip.reference, &c.cli_text)),
                "rtf_cli": cli.as_ref().map(|c| c.cli_ms / audio_ms),
                "parity_ms": cli.as_ref().map(|c| c.parity_ms),
                "parity_text": cli.as_ref().map(|c| c.parity_text.clone()),
                "wer_parity": cli.as_ref().map(|c| text::wer(&clip.reference, &c.parity_text)),
                "parity_ratio": cli.as_ref().map(|c| c.parity_ms / c.cli_ms),
                "rtf_parity": cli.as_ref().map(|c| c.parity_ms / audio_ms),
                "reference": clip.reference,
            }));
        } else {
            println!(
                "{:<48} {:>5.1}s  default {:>6.0} ms  earshot {:>6.0} ms  ratio {:>4.2}  WER {:>5.1}% / {:>5.1}%  [{}]",
                clip.name, dur_s, base, mine, ratio, wer_base * 100.0, wer_ours * 100.0, ours.path
            );
            println!("    default: {base_text}");
            println!("    earshot: {}", ours.display_text());
            if let Some(c) = &cli {
                println!(
                    "    whisper-cli: {:.0} ms (RTF {:.3}; earshot/cli {:.2}), WER {:.1}%: {}",
                    c.cli_ms,
                    c.cli_ms / audio_ms,
                    mine / c.cli_ms,
                    text::wer(&clip.reference, &c.cli_text) * 100.0,
                    c.cli_text
                );
                println!(
                    "    parity (earshot engine, whisper-cli's settings): {:.0} ms (RTF {:.3}; parity/cli {:.2}), WER {:.1}%: {}",
                    c.parity_ms,
                    c.parity_ms / audio_ms,
                    c.parity_ms / c.cli_ms,
                    text::wer(&clip.reference, &c.parity_text) * 100.0,
                    c.parity_text
                );
            }
        }
    }
    let median_short = median(short_ratios.clone());
    let ok_median = median_short <= 0.35;
    let ok_worst = worst_ratio <= 1.2;
    let ok_wer = wer_worse.is_empty();
    let parity = (!parity_ratios.is_empty()).then(|| {
        let worst = parity_ratios.iter().copied().fold(0.0f64, f64::max);
        (median(parity_ratios.clone()), worst)
    });
    let ok_parity = parity.is_none_or(|(m, _)| m <= 1.05);
    if args.json {
        super::print_json(&json!({
            "summary": true, "median_ratio_le_5s": median_short, "clips_le_5s": short_ratios.len(),
            "worst_ratio": worst_ratio, "wer_worse_on": wer_worse,
            "parity_median_ratio": parity.map(|p| p.0), "parity_worst_ratio": parity.map(|p| p.1),
            "flash_attn": engine.flash_attn(),
            "targets": {"median_le_0_35": ok_median, "worst_le_1_2": ok_worst, "wer_not_worse": ok_wer,
                        "parity_le_1_05": parity.map(|_| ok_parity)},
        }));
    } else {
        println!(
            "\nclips ≤ 5 s: median ratio {median_short:.2} (target ≤ 0.35: {}) · worst ratio {worst_ratio:.2} (target ≤ 1.2: {}) · WER worse on: {}",
            if ok_median { "met" } else { "MISSED" },
            if ok_worst { "met" } else { "MISSED" },
            if ok_wer { "none (met)".to_string() } else { wer_worse.join(", ") }
        );
        if let Some((m, w)) = parity {
            println!(
                "parity (same settings as whisper-cli, inference only): median ratio earshot/whisper-cli {m:.2} (target ≤ 1.05: {}) · worst {w:.2} · whisper.cpp {} (earshot) vs whisper-cli's own build",
                if ok_parity { "met" } else { "MISSED" },
                whisper_rs::WHISPER_CPP_VERSION
            );
        }
    }
    Ok(ok_median && ok_worst && ok_wer && ok_parity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_text_drops_timestamps_and_joins_segments() {
        let out = "\n[00:00:00.000 --> 00:00:03.000]   He was not an ill-disposed young man.\n[00:00:03.000 --> 00:00:05.000]   Stop.\n";
        assert_eq!(cli_text(out), "He was not an ill-disposed young man. Stop.");
        assert_eq!(cli_text(" plain text \n"), "plain text");
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
