//! `earshot wyoming serve`: earshot's speech, intent and agent as Wyoming
//! services for Home Assistant, from one process with one loaded set of
//! models shared by every connection.
//!
//! | request                                   | answer                                  |
//! |-------------------------------------------|-----------------------------------------|
//! | `describe`                                | `info` ([`info`])                       |
//! | `transcribe`? + `audio-start/chunk/stop`  | `transcript` ([`asr`])                  |
//! | `synthesize`                              | `audio-start/chunk…/stop` ([`tts`])     |
//! | `synthesize-start/chunk…/stop`            | audio per sentence, `synthesize-stopped`|
//! | `recognize`                               | `intent` / `not-recognized` ([`intent`])|
//! | `transcript`                              | `handled` / `not-handled` (a full turn) |
//! | `ping`                                    | `pong`                                  |
//!
//! Unknown events are dropped with a debug line, as the protocol asks of
//! servers (newer clients send extras such as `select-program`).

pub mod asr;
pub mod info;
pub mod intent;
pub mod tts;

use std::net::SocketAddr;

use super::server::{Flow, Handler};
use crate::agent::Services;
use crate::stt::{Stt, SttError};
use crate::wyoming_proto::client::EventWriter;
use crate::wyoming_proto::protocol::{Event, ProtocolError};

/// What the service announces and speaks with, taken from `[stt]`,
/// `[tts]`, `[llm]` and the paths by the composition root.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    pub tts: crate::tts::TtsConfig,
    /// `stt.language`
    pub language: String,
    /// `stt.whisper_model`
    pub whisper_model: String,
    /// `llm.model`, named in the `handle` program's description.
    pub llm_model: String,
    pub models_dir: std::path::PathBuf,
}

/// Everything built once and shared by all connections.
pub struct Service {
    services: Services,
    /// Whisper, or why it could not be loaded (then `transcribe` answers
    /// with an `error` naming the fix).
    stt: Result<Stt, SttError>,
    voices: tts::Voices,
    info: Event,
}

impl Service {
    /// Serve over `services` (the agent: database, tree, classifiers,
    /// memory) and `stt` (whisper, or why it could not be loaded), with one
    /// voice per working engine that `make_tts` builds from a `[tts]`
    /// section. Everything is built by the caller ([`crate::app`]) before
    /// readiness is announced, so nothing here can fail: a missing part
    /// is answered per request.
    pub fn new(
        services: Services,
        stt: Result<Stt, SttError>,
        settings: &ServiceSettings,
        make_tts: &dyn Fn(&crate::tts::TtsConfig) -> crate::tts::Tts,
    ) -> Service {
        if let Err(e) = &stt {
            tracing::error!(
                "wyoming: speech-to-text unavailable, transcribe will answer with an error: {e}"
            );
        }
        let voices = tts::Voices::load(settings, make_tts);
        let info = info::info_event(&services, settings, stt.is_ok(), &voices);
        Service {
            services,
            stt,
            voices,
            info,
        }
    }

    /// Make the first transcription as fast as the rest (in the
    /// background; a request arriving meanwhile just waits for the model).
    pub fn warm_up(&self) -> Option<std::thread::JoinHandle<()>> {
        self.stt.as_ref().ok().map(Stt::warm_up_in_background)
    }

    /// The `info` event `describe` answers with.
    pub fn info(&self) -> &Event {
        &self.info
    }

    /// The agent's services (background work is started from them).
    pub fn services(&self) -> &Services {
        &self.services
    }
}

/// One connection's state.
pub struct Session {
    peer: SocketAddr,
    /// The earshot conversation `transcript` turns continue.
    conversation_id: Option<i64>,
    audio: asr::Capture,
    stream: Option<tts::TextStream>,
}

impl Handler for Service {
    type Session = Session;

    fn open(&self, peer: SocketAddr) -> Session {
        Session {
            peer,
            conversation_id: None,
            audio: asr::Capture::default(),
            stream: None,
        }
    }

    fn in_request(&self, session: &Session) -> bool {
        session.audio.is_open() || session.stream.is_some()
    }

    fn event(
        &self,
        session: &mut Session,
        event: Event,
        out: &EventWriter,
    ) -> Result<Flow, ProtocolError> {
        match event.kind.as_str() {
            "describe" => out.send(&self.info).map(|_| Flow::Continue),
            "ping" => {
                let mut pong = Event::new("pong");
                if let Some(text) = event.data.get("text") {
                    pong.data.insert("text".into(), text.clone());
                }
                out.send(&pong).map(|_| Flow::Continue)
            }
            "transcribe" | "audio-start" | "audio-chunk" | "audio-stop" => asr::on_event(
                session.peer,
                self.stt.as_ref(),
                &mut session.audio,
                &event,
                out,
            ),
            "synthesize" | "synthesize-start" | "synthesize-chunk" | "synthesize-stop" => {
                tts::on_event(&self.voices, &mut session.stream, &event, out)
            }
            "recognize" => intent::recognize(&self.services, &event, out),
            "transcript" => intent::handle(
                &self.services,
                &mut session.conversation_id,
                session.peer,
                &event,
                out,
            ),
            other => {
                tracing::debug!(peer = %session.peer, "wyoming: ignoring event '{other}'");
                Ok(Flow::Continue)
            }
        }
    }
}
