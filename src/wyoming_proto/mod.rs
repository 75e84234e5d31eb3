//! The Wyoming protocol leaf: the open JSONL + PCM framing of Home
//! Assistant's voice satellites and services (rhasspy/wyoming), the TCP
//! connection both directions use, the audio events and their PCM
//! conversions, dialling a peer with timeouts, the reconnect backoff, and
//! the `[wyoming]` config section.
//!
//! It names nothing else of the crate: the engines (`stt::wyoming`,
//! `tts::wyoming`), the voice loop's wake gate (`voice_loop::wake`) and the
//! front doors (`wyoming::server`, `wyoming::service`, `wyoming::satellite`)
//! build on it.
//!
//! [`protocol`] is the framing with strict limits; [`client`] the TCP
//! connection; [`audio`] the audio events; [`backoff`] the skip-after-failure
//! timer.

pub mod audio;
pub mod backoff;
pub mod client;
pub mod protocol;

use serde::{Deserialize, Serialize};

pub use backoff::Backoff;
pub use client::{connect, dial, Connection, DialError, EventWriter, WyomingUri};
pub use protocol::{Event, Limits, ProtocolError};

/// `[wyoming]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WyomingConfig {
    /// Where `earshot wyoming serve` listens (`tcp://HOST:PORT`); 10700 is
    /// the port Home Assistant suggests for Wyoming services.
    pub serve_uri: String,
    /// Satellites `earshot run` drives, e.g. `["tcp://pi-zero.local:10700"]`.
    pub satellites: Vec<String>,
    /// A Wyoming wake-word service (e.g. wyoming-openwakeword,
    /// `tcp://127.0.0.1:10400`) gating the local microphone: `earshot run`
    /// streams it the microphone and takes a request only after its
    /// `detection`; the button works regardless. While the service is down
    /// the device listens without a wake word (and reconnects with
    /// backoff). Empty = no wake word (VAD or button).
    pub wake_uri: String,
    /// Wake word model name(s) to ask the service for (`detect {names}`),
    /// e.g. `["hey_jarvis"]` or `["ok_nabu"]`; empty = whatever the service
    /// has loaded (wyoming-openwakeword loads none unless started with
    /// `--preload-model`).
    pub wake_words: Vec<String>,
    /// A Wyoming ASR service (e.g. wyoming-faster-whisper,
    /// `tcp://127.0.0.1:10300`) tried before the engines of `stt.order`;
    /// when it is down, slower than `request_timeout_ms` or answers
    /// garbage, the log names it and those engines answer. Empty = none.
    pub stt_uri: String,
    /// A Wyoming TTS service (e.g. wyoming-piper, `tcp://127.0.0.1:10200`),
    /// the engine `wyoming` in `tts.order` (put it before `piper` to use
    /// it first with the local voice as fallback).
    pub tts_uri: String,
    /// Voice to ask the TTS service for (`synthesize {voice: {name}}`);
    /// empty = its default.
    pub tts_voice: String,
    /// Connecting to a peer gives up after this long.
    pub connect_timeout_ms: u64,
    /// A request to a service (transcribe, synthesize) gives up after this
    /// long, and the local engine answers instead.
    pub request_timeout_ms: u64,
    /// First wait before reconnecting to a satellite or service (doubling
    /// after each failure).
    pub reconnect_min_ms: u64,
    /// Longest wait between reconnects.
    pub reconnect_max_ms: u64,
    /// Longest event header line a peer may send.
    pub max_header_bytes: usize,
    /// Largest additional-data block a peer may send.
    pub max_data_bytes: usize,
    /// Largest binary payload (audio chunk) a peer may send.
    pub max_payload_bytes: usize,
}

impl Default for WyomingConfig {
    fn default() -> Self {
        let limits = Limits::default();
        WyomingConfig {
            serve_uri: "tcp://127.0.0.1:10700".into(),
            satellites: Vec::new(),
            wake_uri: String::new(),
            wake_words: Vec::new(),
            stt_uri: String::new(),
            tts_uri: String::new(),
            tts_voice: String::new(),
            connect_timeout_ms: 3000,
            request_timeout_ms: 15000,
            reconnect_min_ms: 500,
            reconnect_max_ms: 30000,
            max_header_bytes: limits.max_header_bytes,
            max_data_bytes: limits.max_data_bytes,
            max_payload_bytes: limits.max_payload_bytes,
        }
    }
}

impl WyomingConfig {
    /// The frame limits peers are held to.
    pub fn limits(&self) -> Limits {
        Limits {
            max_header_bytes: self.max_header_bytes,
            max_data_bytes: self.max_data_bytes,
            max_payload_bytes: self.max_payload_bytes,
        }
    }

    /// Check every URI parses, so a typo is reported at start-up.
    pub fn validate(&self) -> Result<(), String> {
        let named = std::iter::once(("wyoming.serve_uri", &self.serve_uri))
            .chain(self.satellites.iter().map(|s| ("wyoming.satellites", s)))
            .chain([
                ("wyoming.wake_uri", &self.wake_uri),
                ("wyoming.stt_uri", &self.stt_uri),
                ("wyoming.tts_uri", &self.tts_uri),
            ]);
        for (key, uri) in named {
            if !uri.trim().is_empty() {
                WyomingUri::parse(uri).map_err(|e| format!("{key}: {e}"))?;
            }
        }
        if self.max_header_bytes < 1024 {
            return Err("wyoming.max_header_bytes must be at least 1024".into());
        }
        Ok(())
    }
}
