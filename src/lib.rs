//! earshot: a private, fast voice assistant for a Raspberry Pi with a
//! reSpeaker microphone, in one binary.
//!
//! Data flows one way — audio → text → decision → answer → speech — and
//! every front door drives the same turn:
//!
//! ```no_run
//! use earshot::{agent::turn::{run_turn, TurnInput}, app, cancel::CancelToken, config};
//! let loaded = config::load(None)?;
//! let services = app::build(&loaded.config)?;
//! let mut print = |e: &earshot::events::Event| println!("{e:?}");
//! let outcome = run_turn(&services, TurnInput::text("what time is it"), &mut print, &CancelToken::new());
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! See ARCHITECTURE.md for the code map and the invariants.

pub mod agent;
pub mod api;
pub mod app;
pub mod audio;
pub mod calendar;
pub mod cancel;
pub mod choice;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod device;
pub mod esphome;
pub mod events;
pub mod http;
pub mod knowledge;
pub mod llm;
pub mod memory;
pub mod memtrim;
pub mod nlu;
pub mod onnx;
pub mod paths;
pub mod review;
pub mod small_regex;
pub mod store;
pub mod stt;
pub mod telemetry;
pub mod timers;
pub mod tools;
pub mod tree;
pub mod tts;
pub mod voice_loop;
pub mod wake;
pub mod wyoming;
pub mod wyoming_proto;
