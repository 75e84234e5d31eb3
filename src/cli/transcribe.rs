//! `earshot transcribe FILE.wav [--json]`, or `--input DEVICE --seconds N`
//! to capture from a device first: the same STT the voice loop uses, on
//! one utterance, with the engine, path and timings.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use crate::audio::{self, AudioError, SAMPLE_RATE};

/// Arguments of `earshot transcribe`.
#[derive(Debug, clap::Args)]
pub struct TranscribeArgs {
    /// A WAV file (any rate, channels, 8/16/24/32-bit or float).
    pub file: Option<PathBuf>,
    /// Capture from this input instead (`default`, `hw:1,0`, a name from
    /// `earshot devices`, or a WAV path).
    #[arg(long, value_name = "DEVICE")]
    pub input: Option<String>,
    /// How much to capture with --input (counted in samples, so it also
    /// works with unpaced test devices).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f32,
    /// Cut the capture at the first utterance the VAD finds (--input only).
    #[arg(long)]
    pub vad: bool,
    /// Write the (converted, 16 kHz mono) audio that was transcribed here.
    #[arg(long, value_name = "OUT.wav")]
    pub save: Option<PathBuf>,
    /// Print {"text","engine","path","reason","timings":{"stt_ms",…},…}.
    #[arg(long)]
    pub json: bool,
}

/// Run the command; `Ok(false)` when STT failed (the reason is printed).
pub fn run(config_path: Option<&Path>, args: TranscribeArgs) -> Result<bool> {
    let loaded = super::load_config(config_path)?;
    let config = loaded.config;
    let (samples, source) = match (&args.file, &args.input) {
        (Some(_), Some(_)) => bail!("give either FILE or --input, not both"),
        (None, None) => bail!("give a WAV file to transcribe, or --input DEVICE"),
        (Some(file), None) => {
            let channel = None;
            let (samples, info) = audio::wav::read_16k_mono(file, channel)?;
            let source = json!({
                "file": file.display().to_string(),
                "channels": info.channels,
                "sample_rate": info.sample_rate,
                "bits_per_sample": info.bits_per_sample,
                "float": info.float,
            });
            (samples, source)
        }
        (None, Some(input)) => capture(input, &config.audio, args.seconds, args.vad)?,
    };
    if let Some(out) = &args.save {
        std::fs::write(out, audio::wav::write_16k_mono(&audio::to_i16(&samples)))
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    let load_started = Instant::now();
    let stt = crate::app::stt(&config)?;
    let load_ms = load_started.elapsed().as_millis() as u64;
    match stt.transcribe(&samples) {
        Ok(t) => {
            if args.json {
                let mut v = serde_json::to_value(&t)?;
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("text".into(), json!(t.display_text()));
                    obj.insert("input".into(), source);
                    obj.insert("load_ms".into(), json!(load_ms));
                }
                super::print_json(&v);
            } else {
                println!("{}", t.display_text());
            }
            tracing::info!(
                engine = %t.engine, path = %t.path, stt_ms = t.timings.stt_ms,
                audio_ms = t.timings.audio_ms, reason = %t.reason, "transcribed"
            );
            Ok(true)
        }
        Err(e) => {
            if args.json {
                super::print_json(&json!({"error": e.to_string(), "input": source}));
            }
            Err(anyhow!(e).context("transcription failed"))
        }
    }
}

/// Capture `seconds` of 16 kHz audio (or up to the first utterance with
/// `vad`) from an input.
fn capture(
    input: &str,
    cfg: &audio::AudioConfig,
    seconds: f32,
    vad: bool,
) -> Result<(Vec<f32>, serde_json::Value)> {
    if !(seconds > 0.0 && seconds <= 600.0) {
        bail!("--seconds must be between 0 and 600");
    }
    let mut source = audio::open_input(input, cfg)?;
    let want = (seconds * SAMPLE_RATE as f32) as usize;
    let mut samples: Vec<i16> = Vec::with_capacity(want);
    let mut buf = vec![0i16; 1600];
    let started = Instant::now();
    // Wall-clock guard for a real device that stops delivering.
    let limit = Duration::from_secs_f32(seconds * 2.0 + 10.0);
    let mut endpointer = if vad {
        Some(audio::vad::Endpointer::new(&cfg.vad).map_err(|e| anyhow!(e))?)
    } else {
        None
    };
    let mut utterance = None;
    while samples.len() < want {
        if started.elapsed() > limit {
            bail!(AudioError::DeviceGone(input.to_string()));
        }
        let room = (want - samples.len()).min(buf.len());
        match source.read(&mut buf[..room], Duration::from_millis(200)) {
            Ok(n) => {
                samples.extend_from_slice(&buf[..n]);
                if let Some(ep) = endpointer.as_mut() {
                    for ev in ep.push(&buf[..n]) {
                        if let audio::vad::VadEvent::Utterance(u) = ev {
                            utterance.get_or_insert(u);
                        }
                    }
                    if utterance.is_some() {
                        break;
                    }
                }
            }
            Err(AudioError::Ended) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(ep) = endpointer.as_mut() {
        if utterance.is_none() {
            utterance = ep.finish();
        }
    }
    let info = json!({
        "device": source.describe(),
        "captured_samples": samples.len(),
        "overruns": source.overruns(),
        "utterance_ms": utterance.as_ref().map(|u| json!({"start_ms": u.start_ms, "end_ms": u.end_ms()})),
    });
    let chosen = match utterance {
        Some(u) => u.samples,
        None if vad => Vec::new(),
        None => samples,
    };
    Ok((audio::to_f32(&chosen), info))
}
