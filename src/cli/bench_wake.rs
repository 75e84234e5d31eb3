//! `earshot bench wake [--audio FILE.wav] [--json]`: the in-process wake
//! word side by side with wyoming-openwakeword on the same audio, model
//! release, threshold and trigger frames (see [`crate::wake::bench`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::wake::bench::{self, BenchOptions};

#[derive(Debug, Clone, clap::Args)]
pub struct BenchWakeArgs {
    /// 16 kHz (or any rate, resampled) WAV to run both on; default: the
    /// real recordings in models_dir (oww-hey_jarvis.wav, oww-negative.wav)
    /// with silence between, --rounds times.
    #[arg(long, value_name = "FILE.wav")]
    pub audio: Option<PathBuf>,
    /// Rounds of the default audio (about 6 s each).
    #[arg(long, default_value_t = 10)]
    pub rounds: usize,
    /// The wake word (default: the first of wake.words).
    #[arg(long)]
    pub word: Option<String>,
    /// wyoming-openwakeword's Python (default: .venv/openwakeword/bin/python
    /// here or beside the binary's checkout).
    #[arg(long, value_name = "PATH")]
    pub peer_python: Option<PathBuf>,
    /// Milliseconds between two 80 ms chunks sent to the peer.
    #[arg(long, default_value_t = 20)]
    pub pace_ms: u64,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_path: Option<&Path>, args: BenchWakeArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let paths = config.paths();
    let audio = match &args.audio {
        Some(path) => {
            let (samples, _) = crate::audio::wav::read_16k_mono(path, None)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            crate::audio::to_i16(&samples)
        }
        None => bench::default_audio(&config.models_dir, args.rounds)?,
    };
    let word = args
        .word
        .clone()
        .unwrap_or_else(|| config.wake.first_word(&config.wyoming));
    let peer_python = args.peer_python.clone().unwrap_or_else(default_peer);
    let opts = BenchOptions {
        audio,
        word,
        threshold: config.wake.threshold,
        trigger_frames: config.wake.trigger_frames,
        peer_python,
        pace: Duration::from_millis(args.pace_ms.max(1)),
    };
    let report = bench::run(&opts, &paths)?;
    if args.json {
        println!("{}", bench::to_json(&report));
    } else {
        println!(
            "wake word {} over {:.1} s of audio",
            report.word, report.audio_s
        );
        println!(
            "  detections (80 ms frames)  earshot {:?}",
            report.detections.earshot
        );
        println!(
            "                             peer    {:?}",
            report.detections.peer
        );
        println!(
            "  same places (±1 frame)     {}",
            if report.same_places { "yes" } else { "no" }
        );
        println!(
            "  CPU s per audio s          earshot {:.4}, peer {:.4} ({:.2}×)",
            report.cpu_s_per_audio_s.earshot,
            report.cpu_s_per_audio_s.peer,
            report.cpu_s_per_audio_s.earshot / report.cpu_s_per_audio_s.peer.max(1e-9)
        );
        println!(
            "  memory added by earshot's models  {:.1} MB",
            report.rss_added_mb
        );
    }
    Ok(true)
}

/// `.venv/openwakeword/bin/python` in the working directory or in a
/// checkout above the binary (target/*/earshot).
fn default_peer() -> PathBuf {
    let rel = Path::new(".venv/openwakeword/bin/python");
    if rel.is_file() {
        return rel.to_path_buf();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .take(4)
                .map(|d| d.join(rel))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| rel.to_path_buf())
}
