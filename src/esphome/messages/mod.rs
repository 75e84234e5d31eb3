//! The ESPHome native API's protobuf messages, generated at build time by
//! prost from the descriptor `scripts/esphome-proto.py` extracts from
//! aioesphomeapi (the client library Home Assistant uses), so no message
//! layout is written by hand; [`ids`] holds each message's wire type id.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

pub mod ids;

include!(concat!(env!("OUT_DIR"), "/esphome_api.rs"));
