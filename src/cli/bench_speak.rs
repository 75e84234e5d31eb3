//! `earshot bench speak`: time from the first complete sentence of a
//! streamed reply to its first audio being queued on the output (issue
//! 6.7, target ≤ 300 ms with the local TTS).
//!
//! Each reply is streamed word by word, at an LLM-like token rate, into the
//! real [`TurnSpeech`] + [`Speaker`] the voice loop uses, with the
//! configured TTS chain (Piper first by default) and a WAV output paced in
//! real time (so synthesis of the next sentence overlaps playback, as on a
//! device). The figure per reply is `first audio queued − first sentence
//! complete`; p50 and max over all replies and runs are printed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::audio::playback::PacedWavSink;
use crate::cancel::CancelToken;
use crate::events::{Done, Event, EventSink};
use crate::tts::speaker::{Speaker, TurnSpeech};

/// Replies of the kind the assistant gives: a short first sentence, a long
/// one without a clause break, a first sentence with a comma, numbers.
pub const REPLIES: &[&str] = &[
    "It's 6:05 PM. Anything else?",
    "Tomorrow will be mostly sunny with a high of twenty-one degrees. Take a light jacket for the evening.",
    "I added milk, eggs and bread to your shopping list. You now have seven items on it.",
    "Your timer for ten minutes is set. I'll let you know when it's done.",
    "The capital of Australia is Canberra, not Sydney as many people think. It was chosen as a compromise between Sydney and Melbourne.",
];

/// Arguments of `earshot bench speak`.
#[derive(Debug, clap::Args)]
pub struct BenchSpeakArgs {
    /// TTS engine to measure (`piper`, `espeak`, …); default: the
    /// configured `tts.order`.
    #[arg(long)]
    pub engine: Option<crate::tts::Engine>,
    /// Runs over the reply set (the figures cover every reply of every run).
    #[arg(long, default_value_t = 2)]
    pub runs: usize,
    /// Only the first N replies of the set (0 = all).
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// Simulated LLM stream rate, words per second.
    #[arg(long, default_value_t = 30.0)]
    pub words_per_sec: f64,
    /// Where the played audio is written (default: <state_dir>/bench-speak.wav).
    #[arg(long, value_name = "FILE.wav")]
    pub out: Option<PathBuf>,
    /// One JSON object per reply, then a summary object.
    #[arg(long)]
    pub json: bool,
}

/// One measured reply.
struct Measured {
    reply: usize,
    first_sentence: String,
    first_audio_ms: f64,
    engine: &'static str,
    synth_ms: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Stream `reply` word by word into a voice turn on `speaker` and return
/// the first sentence's latency to audio (ms), its text, engine and
/// synthesis time.
fn measure_one(
    speaker: &Speaker,
    reply: &str,
    gap: Duration,
) -> Result<(f64, String, &'static str, f64)> {
    let _ = speaker.take_stats();
    let mut turn = TurnSpeech::new(speaker);
    let mut first = true;
    for word in reply.split_inclusive(' ') {
        if !first {
            // The pace of an LLM stream; nothing to wait on in a simulation.
            std::thread::sleep(gap);
        }
        first = false;
        turn.emit(&Event::Content {
            data: word.to_string(),
        });
    }
    turn.emit(&Event::Done(Done {
        response: reply.to_string(),
        ..Default::default()
    }));
    if !speaker.wait_done(&CancelToken::new(), Duration::from_secs(120)) {
        bail!("speech did not finish within 120 s");
    }
    let errors: Vec<String> = speaker
        .take_errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        bail!("text-to-speech failed: {}", errors.join("; "));
    }
    let stats = speaker.take_stats();
    let (Some(at), Some(stat)) = (turn.first_sentence_at, stats.first()) else {
        bail!("nothing was spoken for {reply:?}");
    };
    let ms = stat.queued_at.saturating_duration_since(at).as_secs_f64() * 1000.0;
    let sentence = turn.spoken.first().cloned().unwrap_or_default();
    Ok((ms, sentence, stat.engine, stat.synth_ms))
}

/// Run the benchmark; `Ok(true)` when the p50 and the max are ≤ 300 ms.
pub fn run(config_path: Option<&Path>, args: BenchSpeakArgs) -> Result<bool> {
    let loaded = super::load_config(config_path)?;
    let mut config = loaded.config;
    if let Some(engine) = &args.engine {
        config.tts.order = vec![*engine];
    }
    if !(args.words_per_sec > 0.0 && args.words_per_sec.is_finite()) {
        bail!("--words-per-sec must be a positive number");
    }
    let tts = crate::app::tts(&config);
    if tts.engine_names().is_empty() {
        bail!(
            "no text-to-speech engine is available ({}); install espeak-ng or run scripts/fetch-piper.sh",
            tts.skipped.join("; ")
        );
    }
    let engines = tts.engine_names().join(",");
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| config.state_dir.join("bench-speak.wav"));
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let sink = Arc::new(PacedWavSink::create(&out)?);
    let speaker = Speaker::start(tts, sink)?;
    // Warm-up (the voice loop has spoken before the first measured turn).
    measure_one(&speaker, "Ready.", Duration::ZERO)?;
    let gap = Duration::from_secs_f64(1.0 / args.words_per_sec);
    let mut all = Vec::new();
    let take = if args.limit == 0 {
        REPLIES.len()
    } else {
        args.limit
    };
    for _ in 0..args.runs.max(1) {
        for (i, reply) in REPLIES.iter().enumerate().take(take) {
            let (ms, first_sentence, engine, synth_ms) = measure_one(&speaker, reply, gap)?;
            let m = Measured {
                reply: i,
                first_sentence,
                first_audio_ms: ms,
                engine,
                synth_ms,
            };
            if args.json {
                super::print_json(&json!({
                    "reply": m.reply, "first_sentence": m.first_sentence,
                    "first_audio_ms": m.first_audio_ms, "engine": m.engine, "synth_ms": m.synth_ms,
                }));
            } else {
                println!(
                    "reply {}  first audio {:>5.0} ms  (synth {:>4.0} ms, {})  {:?}",
                    m.reply, m.first_audio_ms, m.synth_ms, m.engine, m.first_sentence
                );
            }
            all.push(m);
        }
    }
    let mut times: Vec<f64> = all.iter().map(|m| m.first_audio_ms).collect();
    times.sort_by(|a, b| a.total_cmp(b));
    let p50 = percentile(&times, 0.5);
    let max = times.last().copied().unwrap_or(f64::NAN);
    let ok = p50 <= 300.0 && max <= 300.0;
    if args.json {
        super::print_json(&json!({
            "summary": true, "engines": engines, "replies": all.len(),
            "first_audio_p50_ms": p50, "first_audio_max_ms": max,
            "target_le_300_ms": ok, "out": out.display().to_string(),
        }));
    } else {
        println!(
            "\nfirst complete sentence → first audio queued ({engines}, {} replies): p50 {p50:.0} ms · max {max:.0} ms (target ≤ 300 ms: {})",
            all.len(),
            if ok { "met" } else { "MISSED" }
        );
    }
    Ok(ok)
}
