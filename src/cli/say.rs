//! `earshot say "TEXT" [--out FILE.wav] [--engine NAME] [--json]`: speak
//! a text with the configured engines, on the default output or into a
//! WAV file. Also how test utterances are made with the local voice.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::json;

use crate::audio::playback::{self, AudioSink, WavFileSink};
use crate::cancel::CancelToken;
use crate::tts::sentences;
use crate::tts::speaker::Speaker;

/// Speak `text`. Returns whether every sentence was spoken.
pub fn run(
    config_path: Option<&Path>,
    text: &str,
    out: Option<PathBuf>,
    engine: Option<crate::tts::Engine>,
    json_out: bool,
) -> Result<bool> {
    let mut config = super::load_config(config_path)?.config;
    if let Some(engine) = engine {
        config.tts.order = vec![engine];
    }
    let sentences = sentences::split(text);
    if sentences.is_empty() {
        bail!("nothing to say: the text has no words once markdown and symbols are removed");
    }
    let load_started = Instant::now();
    let tts = crate::app::tts(&config);
    let load_ms = load_started.elapsed().as_secs_f64() * 1000.0;
    let engines: Vec<&str> = tts.engine_names();
    if engines.is_empty() {
        bail!(
            "no text-to-speech engine is available ({}); install espeak-ng or run scripts/fetch-piper.sh",
            tts.skipped.join("; ")
        );
    }
    let engines = engines.join(",");
    let (sink, file): (Arc<dyn AudioSink>, Option<Arc<WavFileSink>>) = match &out {
        Some(path) => {
            let file = Arc::new(WavFileSink::create(path)?);
            (file.clone(), Some(file))
        }
        None => (playback::open_output(&config.audio.output)?, None),
    };
    let speaker = Speaker::start(tts, sink.clone())?;
    let cancel = CancelToken::new();
    super::install_interrupt(&cancel);
    let started = Instant::now();
    for (i, sentence) in sentences.iter().enumerate() {
        // As in the voice loop: the first audio waits only for the first
        // clause of a long first sentence.
        let (head, rest) = if i == 0 {
            sentences::first_clause(sentence)
        } else {
            (sentence.clone(), None)
        };
        speaker.say(&head);
        if let Some(rest) = rest {
            speaker.say(&rest);
        }
    }
    speaker.wait_done(&cancel, Duration::from_secs(3600));
    if cancel.is_cancelled() {
        speaker.stop();
    }
    let total_ms = started.elapsed().as_secs_f64() * 1000.0;
    if let Some(file) = &file {
        file.finish()?;
    }
    let stats = speaker.take_stats();
    let errors: Vec<String> = speaker
        .take_errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    let synth_ms: f64 = stats.iter().map(|s| s.synth_ms).sum();
    let audio_ms: f64 = stats.iter().map(|s| s.audio_ms).sum();
    let first_audio_ms = stats.first().map(|s| s.ready_to_audio_ms);
    if json_out {
        super::print_json(&json!({
            "sentences": sentences.len(),
            "spoken": stats.len(),
            "engines_tried": engines,
            "engine": stats.first().map(|s| s.engine),
            "output": sink.describe(),
            "timings": {
                "load_ms": load_ms,
                "first_audio_ms": first_audio_ms,
                "synth_ms": synth_ms,
                "audio_ms": audio_ms,
                "total_ms": total_ms,
                "rtf": if audio_ms > 0.0 { synth_ms / audio_ms } else { 0.0 },
            },
            "errors": errors,
        }));
    } else if let Some(path) = &out {
        eprintln!(
            "earshot: wrote {:.1} s of speech to {} ({})",
            audio_ms / 1000.0,
            path.display(),
            stats.first().map(|s| s.engine).unwrap_or("no engine")
        );
    }
    for e in &errors {
        eprintln!("earshot: {e}");
    }
    Ok(errors.is_empty() && !stats.is_empty() && !cancel.is_cancelled())
}
