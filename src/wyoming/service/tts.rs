//! Text to speech over Wyoming.
//!
//! - `synthesize {text, voice?}` → one `audio-start`, the `audio-chunk`s of
//!   every sentence as soon as that sentence is synthesised, `audio-stop`;
//! - streaming (`synthesize-start {voice?}`, `synthesize-chunk {text}`…,
//!   `synthesize-stop`) → for each sentence completed by the chunks its own
//!   `audio-start/chunk…/stop`, then `synthesize-stopped` — what
//!   wyoming-piper does and Home Assistant expects when the info says
//!   `supports_synthesize_streaming`. A `synthesize` sent inside a stream
//!   (clients send one for older servers) is ignored.
//!
//! Chunks carry [`SAMPLES_PER_CHUNK`] 16-bit mono samples at the voice's
//! own rate, like wyoming-piper. Every voice is loaded once; a request
//! holds its voice's engine only while one sentence is synthesised, so
//! two clients interleave sentence by sentence.

use std::sync::Mutex;

use serde_json::Value;

use super::ServiceSettings;
use crate::tts::sentences::{self, SentenceSplitter};
use crate::tts::Tts;
use crate::tts::TtsConfig;
use crate::wyoming::server::{error_event, Flow};
use crate::wyoming_proto::audio::{audio_chunk_i16, audio_start, audio_stop, AudioFormat};
use crate::wyoming_proto::client::EventWriter;
use crate::wyoming_proto::protocol::{Event, ProtocolError};

/// Samples per `audio-chunk` (wyoming-piper's default).
pub const SAMPLES_PER_CHUNK: usize = 1024;

/// Most text one `synthesize` (or one stream) may ask for: about ten
/// minutes of speech, far past any spoken answer, so a runaway client
/// cannot hold a voice for hours.
pub const MAX_TEXT_CHARS: usize = 10_000;

/// One voice a client may ask for by name.
pub struct Voice {
    /// The name in `info` and in `synthesize {voice: {name}}`.
    pub name: String,
    /// The engine that speaks it (`piper`, `espeak`, `cloud`).
    pub engine: &'static str,
    pub description: String,
    /// Languages as Wyoming voices list them (`en_US`).
    pub languages: Vec<String>,
    tts: Mutex<Tts>,
}

/// The configured voices, the first being the default.
pub struct Voices {
    pub list: Vec<Voice>,
    /// Why no voice could be built (when `list` is empty).
    pub unavailable: String,
}

impl Voices {
    /// One voice per engine of `tts.order` that works. The first (the
    /// default) keeps the whole chain, so it falls back like the voice
    /// loop; the others are that engine alone.
    pub fn load(settings: &ServiceSettings, make: &dyn Fn(&TtsConfig) -> Tts) -> Voices {
        let main = make(&settings.tts);
        let names = main.engine_names();
        let unavailable = main.skipped.join("; ");
        let mut main = Some(main);
        let mut list = Vec::new();
        for engine in names {
            let tts = main.take().unwrap_or_else(|| {
                let mut one = settings.tts.clone();
                // Every engine's name is in the TTS name table.
                one.order = engine.parse().map(|e| vec![e]).unwrap_or_default();
                make(&one)
            });
            let (name, description, languages) = describe(settings, engine);
            list.push(Voice {
                name,
                engine,
                description,
                languages,
                tts: Mutex::new(tts),
            });
        }
        Voices { list, unavailable }
    }

    /// The voice `voice.name` names, else the default. An unknown name is
    /// logged and served by the default (Home Assistant may remember a
    /// voice from an older configuration).
    fn pick(&self, voice: Option<&Value>) -> Option<&Voice> {
        let wanted = voice
            .and_then(|v| v.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        if let Some(name) = wanted {
            if let Some(v) = self.list.iter().find(|v| v.name == name) {
                return Some(v);
            }
            tracing::info!("wyoming: unknown voice '{name}'; using the default voice");
        }
        self.list.first()
    }
}

fn describe(config: &ServiceSettings, engine: &str) -> (String, String, Vec<String>) {
    match engine {
        "piper" => {
            let voice = config.tts.piper_voice.clone();
            let lang = piper_language(config)
                .unwrap_or_else(|| voice.split('-').next().unwrap_or("en_US").to_string());
            (voice.clone(), format!("Piper voice {voice}"), vec![lang])
        }
        "espeak" => {
            let voice = config.tts.espeak_voice.clone();
            (
                format!("espeak-ng-{voice}"),
                format!("espeak-ng voice {voice} (the offline fallback)"),
                vec![wyoming_language(&voice)],
            )
        }
        other => (
            format!("{other}-{}", config.tts.cloud_voice),
            format!("{other} voice {}", config.tts.cloud_voice),
            vec![wyoming_language(&config.language)],
        ),
    }
}

/// `language.code` of the Piper voice's `.onnx.json` (e.g. `en_US`).
fn piper_language(config: &ServiceSettings) -> Option<String> {
    let path = config
        .models_dir
        .join(format!("{}.onnx.json", config.tts.piper_voice));
    let json: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    json.pointer("/language/code")?.as_str().map(str::to_string)
}

/// `en-us` → `en_US`, `en` → `en`.
fn wyoming_language(tag: &str) -> String {
    match tag.split_once(['-', '_']) {
        Some((lang, region)) => format!("{}_{}", lang.to_lowercase(), region.to_uppercase()),
        None => tag.to_lowercase(),
    }
}

/// A `synthesize-start` stream in progress.
pub struct TextStream {
    voice: Option<Value>,
    splitter: SentenceSplitter,
    /// Characters received so far (bounded by [`MAX_TEXT_CHARS`]).
    chars: usize,
}

/// Handle one TTS event.
pub fn on_event(
    voices: &Voices,
    stream: &mut Option<TextStream>,
    event: &Event,
    out: &EventWriter,
) -> Result<Flow, ProtocolError> {
    match event.kind.as_str() {
        "synthesize" => {
            if stream.is_some() {
                // Sent for servers without streaming; the stream speaks it.
                return Ok(Flow::Continue);
            }
            let text = event.str("text").unwrap_or_default();
            if text.chars().count() > MAX_TEXT_CHARS {
                return too_long(out);
            }
            let parts = sentences::split(text);
            if parts.is_empty() {
                out.send(&error_event(
                    "synthesize has no text to speak; send {\"text\": \"…\"}",
                    "empty-text",
                ))?;
                return Ok(Flow::Continue);
            }
            let Some(voice) = voices.pick(event.data.get("voice")) else {
                return no_voice(voices, out);
            };
            speak(voice, &parts, out)?;
            Ok(Flow::Continue)
        }
        "synthesize-start" => {
            *stream = Some(TextStream {
                voice: event.data.get("voice").cloned(),
                splitter: SentenceSplitter::new(),
                chars: 0,
            });
            Ok(Flow::Continue)
        }
        "synthesize-chunk" => {
            let Some(s) = stream.as_mut() else {
                tracing::debug!("wyoming: synthesize-chunk outside a stream; ignored");
                return Ok(Flow::Continue);
            };
            let text = event.str("text").unwrap_or_default();
            s.chars += text.chars().count();
            if s.chars > MAX_TEXT_CHARS {
                *stream = None;
                return too_long(out);
            }
            let done = s.splitter.push(text);
            if done.is_empty() {
                return Ok(Flow::Continue);
            }
            let Some(voice) = voices.pick(s.voice.as_ref()) else {
                return no_voice(voices, out);
            };
            for sentence in done {
                speak(voice, std::slice::from_ref(&sentence), out)?;
            }
            Ok(Flow::Continue)
        }
        "synthesize-stop" => {
            let Some(mut s) = stream.take() else {
                tracing::debug!("wyoming: synthesize-stop outside a stream; ignored");
                return Ok(Flow::Continue);
            };
            if let Some(rest) = s.splitter.finish() {
                let Some(voice) = voices.pick(s.voice.as_ref()) else {
                    return no_voice(voices, out);
                };
                speak(voice, &[rest], out)?;
            }
            out.send(&Event::new("synthesize-stopped"))?;
            Ok(Flow::Continue)
        }
        _ => Ok(Flow::Continue),
    }
}

/// The text is over [`MAX_TEXT_CHARS`]: say so and hang up.
fn too_long(out: &EventWriter) -> Result<Flow, ProtocolError> {
    tracing::warn!("wyoming: text to synthesize over {MAX_TEXT_CHARS} characters; refused");
    out.send(&error_event(
        &format!("text longer than {MAX_TEXT_CHARS} characters; send it in smaller requests"),
        "text-too-long",
    ))?;
    Ok(Flow::Close)
}

fn no_voice(voices: &Voices, out: &EventWriter) -> Result<Flow, ProtocolError> {
    out.send(&error_event(
        &format!(
            "no text-to-speech voice is available ({}); install espeak-ng or run scripts/fetch-piper.sh",
            voices.unavailable
        ),
        "tts-unavailable",
    ))?;
    Ok(Flow::Continue)
}

/// Synthesise `parts` one by one and send them as one audio stream:
/// `audio-start` goes out with the first sentence's audio (its rate is the
/// voice's), every later sentence follows as soon as it is ready.
fn speak(voice: &Voice, parts: &[String], out: &EventWriter) -> Result<(), ProtocolError> {
    let mut rate: Option<u32> = None;
    for sentence in parts {
        let spoken = {
            let mut tts = voice.tts.lock().unwrap_or_else(|p| p.into_inner());
            tts.synthesize(sentence)
        };
        let clip = match spoken {
            Ok(s) => s.clip,
            Err(e) => {
                tracing::warn!(voice = %voice.name, "wyoming: synthesis failed: {e:#}");
                if rate.is_some() {
                    out.send(&audio_stop(None))?;
                }
                out.send(&error_event(
                    &format!("{e:#}").replace('\n', " "),
                    "tts-failed",
                ))?;
                return Ok(());
            }
        };
        let stream_rate = match rate {
            Some(r) => r,
            None => {
                out.send(&audio_start(
                    AudioFormat {
                        rate: clip.sample_rate,
                        width: 2,
                        channels: 1,
                    },
                    None,
                ))?;
                *rate.insert(clip.sample_rate)
            }
        };
        let samples = if clip.sample_rate == stream_rate {
            clip.samples
        } else {
            // A fallback engine at another rate mid-stream.
            linear_resample(&clip.samples, clip.sample_rate, stream_rate)
        };
        let pcm = crate::audio::to_i16(&samples);
        for chunk in pcm.chunks(SAMPLES_PER_CHUNK) {
            out.send(&audio_chunk_i16(stream_rate, chunk, None))?;
        }
    }
    if rate.is_some() {
        out.send(&audio_stop(None))?;
    }
    Ok(())
}

/// Good enough for a rare fallback clip; the main path never resamples.
fn linear_resample(samples: &[f32], from: u32, to: u32) -> Vec<f32> {
    if samples.is_empty() || from == 0 || to == 0 {
        return Vec::new();
    }
    let n = (samples.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let step = f64::from(from) / f64::from(to);
    (0..n)
        .map(|i| {
            let x = i as f64 * step;
            let j = x.floor() as usize;
            let frac = (x - j as f64) as f32;
            let a = samples.get(j).copied().unwrap_or(0.0);
            let b = samples.get(j + 1).copied().unwrap_or(a);
            a + (b - a) * frac
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_written_the_wyoming_way() {
        assert_eq!(wyoming_language("en-us"), "en_US");
        assert_eq!(wyoming_language("en"), "en");
        assert_eq!(wyoming_language("pt_br"), "pt_BR");
    }

    #[test]
    fn a_voice_is_picked_by_name_else_the_default() {
        let voice = |name: &str| Voice {
            name: name.into(),
            engine: "espeak",
            description: String::new(),
            languages: vec!["en_US".into()],
            tts: Mutex::new(Tts::with_engines(Vec::new())),
        };
        let voices = Voices {
            list: vec![voice("first"), voice("second")],
            unavailable: String::new(),
        };
        let pick = |v: serde_json::Value| voices.pick(Some(&v)).map(|v| v.name.clone());
        assert_eq!(
            pick(serde_json::json!({"name": "second"})).as_deref(),
            Some("second")
        );
        assert_eq!(
            pick(serde_json::json!({"name": "nope"})).as_deref(),
            Some("first")
        );
        assert_eq!(
            pick(serde_json::json!({"language": "en"})).as_deref(),
            Some("first")
        );
        assert_eq!(voices.pick(None).map(|v| v.name.as_str()), Some("first"));
        let none = Voices {
            list: Vec::new(),
            unavailable: "x".into(),
        };
        assert!(none.pick(None).is_none());
    }

    #[test]
    fn linear_resample_keeps_duration_and_shape() {
        let ramp: Vec<f32> = (0..1000).map(|i| i as f32 / 1000.0).collect();
        let out = linear_resample(&ramp, 16_000, 22_050);
        assert_eq!(out.len(), 1000 * 22_050 / 16_000);
        assert!(out.windows(2).all(|w| w[1] >= w[0]));
        assert!(linear_resample(&[], 16_000, 8000).is_empty());
    }
}
