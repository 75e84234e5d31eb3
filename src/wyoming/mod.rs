//! Wyoming: the open JSONL + PCM protocol of Home Assistant's voice
//! satellites and services (rhasspy/wyoming).
//!
//! earshot speaks it three ways:
//! - as a **service** (`earshot wyoming serve`): asr, tts, intent and handle
//!   from one process with the models loaded once, for Home Assistant;
//! - as the **host of satellites** (`earshot run` with `wyoming.satellites`):
//!   it connects to each satellite (a satellite is a Wyoming *server*),
//!   hears its microphone, runs the turn and sends the spoken answer back;
//! - as a **client of services**: a wake-word service in front of the local
//!   microphone, and STT/TTS services as configured engines.
//!
//! This module holds the two front doors: the service ([`server`] +
//! [`service`]) and the satellite host ([`satellite`]). The protocol they
//! speak is the leaf [`crate::wyoming_proto`]; the engines are
//! `stt::wyoming` and `tts::wyoming`, the wake-word client is
//! `voice_loop::wake`.

pub mod satellite;
pub mod server;
pub mod service;
