//! The `info` event: what `earshot wyoming serve` offers, in the shape
//! the `wyoming` library's `Info.from_event` parses (every artifact has
//! `name`, `attribution {name, url}`, `installed`, `description`,
//! `version`). Home Assistant reads it when the integration is added and
//! creates one entity per program (stt, tts, conversation).

use serde_json::{json, Value};

use super::tts::Voices;
use crate::agent::Services;
use crate::wyoming_proto::protocol::Event;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn earshot_attribution() -> Value {
    // No public home page yet: an empty url, as Info allows.
    json!({"name": "earshot", "url": ""})
}

fn artifact(name: &str, description: &str, attribution: Value, installed: bool) -> Value {
    json!({
        "name": name,
        "description": description,
        "attribution": attribution,
        "installed": installed,
        "version": VERSION,
    })
}

/// Build the `info` event once at start-up (the models do not change
/// while serving).
pub fn info_event(
    services: &Services,
    config: &super::ServiceSettings,
    stt_ready: bool,
    voices: &Voices,
) -> Event {
    let language = config.language.clone();

    let mut asr_model = artifact(
        &config.whisper_model,
        &format!("Whisper {} (whisper.cpp, on device)", config.whisper_model),
        json!({"name": "OpenAI Whisper via whisper.cpp", "url": "https://github.com/ggerganov/whisper.cpp"}),
        stt_ready,
    );
    asr_model["languages"] = json!([language]);
    let mut asr = artifact(
        "earshot",
        "earshot speech-to-text (local Whisper)",
        earshot_attribution(),
        stt_ready,
    );
    asr["models"] = json!([asr_model]);
    asr["supports_transcript_streaming"] = false.into();
    asr["requires_external_vad"] = true.into();

    let voice_list: Vec<Value> = voices
        .list
        .iter()
        .map(|v| {
            let attribution = match v.engine {
                "piper" => {
                    json!({"name": "rhasspy (Piper)", "url": "https://github.com/rhasspy/piper"})
                }
                "espeak" => {
                    json!({"name": "espeak-ng", "url": "https://github.com/espeak-ng/espeak-ng"})
                }
                _ => earshot_attribution(),
            };
            let mut voice = artifact(&v.name, &v.description, attribution, true);
            voice["languages"] = json!(v.languages);
            // Single-speaker voices: Info expects null, not an empty list.
            voice["speakers"] = Value::Null;
            voice
        })
        .collect();
    let mut tts = artifact(
        "earshot",
        "earshot text-to-speech (Piper, espeak-ng fallback)",
        earshot_attribution(),
        !voice_list.is_empty(),
    );
    tts["voices"] = Value::Array(voice_list);
    tts["supports_synthesize_streaming"] = true.into();

    let tree = services.tree.as_ref();
    let intents: Vec<String> = tree
        .and_then(|t| t.intents("device"))
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i != "other")
        .collect();
    let classifier_ready = tree.is_some_and(|t| t.classifier("device").is_ok());
    let mut intent_model = artifact(
        "earshot-device-intents",
        &format!(
            "on-device kNN classifier (MiniLM embeddings) of the intent tree; intents: {}",
            intents.join(", ")
        ),
        earshot_attribution(),
        classifier_ready,
    );
    intent_model["languages"] = json!([language]);
    let mut intent = artifact(
        "earshot-intents",
        "earshot intent recognition (on device, no LLM)",
        earshot_attribution(),
        classifier_ready,
    );
    intent["models"] = json!([intent_model]);

    let mut handle_model = artifact(
        "earshot-agent",
        &format!(
            "earshot's agent: the intent tree on device, then {} with memory and tools",
            config.llm_model
        ),
        earshot_attribution(),
        true,
    );
    handle_model["languages"] = json!([language]);
    let mut handle = artifact(
        "earshot",
        "earshot conversation agent",
        earshot_attribution(),
        true,
    );
    handle["models"] = json!([handle_model]);
    handle["supports_handled_streaming"] = false.into();

    Event::with_data(
        "info",
        json!({
            "asr": [asr],
            "tts": [tts],
            "handle": [handle],
            "intent": [intent],
            "wake": [],
            "mic": [],
            "snd": [],
        }),
    )
}
