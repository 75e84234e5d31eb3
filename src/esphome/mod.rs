//! The ESPHome native API (issue 22): the protocol of the ESP32 voice
//! devices people own (Home Assistant Voice PE, ESP32-S3-BOX, Atom Echo)
//! and of Home Assistant's ESPHome integration — TCP 6053, protobuf
//! messages, optionally encrypted with Noise and a pre-shared key.
//!
//! [`frame`] is the plaintext and Noise framing with hard limits,
//! [`noise`] the handshake and the post-handshake [`noise::Codec`],
//! [`messages`] the protobuf types generated from aioesphomeapi's
//! descriptor, [`server`] earshot as a device Home Assistant adopts
//! (`earshot esphome serve`). The `[esphome]` section lives here.

pub mod audio_url;
pub mod discover;
pub mod frame;
pub mod host;
pub mod mdns;
pub mod messages;
pub mod noise;
pub mod satellite;
pub mod server;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// `[esphome]`
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EsphomeConfig {
    /// Where `earshot esphome serve` listens (`ADDR:PORT`); 6053 is the
    /// ESPHome API's port. Off loopback it needs `encryption_key`.
    pub bind: String,
    /// The device name Home Assistant sees (hello, device info, mDNS).
    pub name: String,
    /// The API encryption key: base64 of 32 random bytes (what ESPHome's
    /// `api: encryption: key:` holds; `openssl rand -base64 32`). Empty =
    /// plaintext, allowed only on loopback.
    pub encryption_key: String,
    /// A legacy API password Home Assistant must send; empty = none.
    pub password: String,
    /// ESPHome voice devices `earshot run` hosts (`[[esphome.devices]]`).
    pub devices: Vec<DeviceEntry>,
    /// Also host the ESPHome voice devices found on the LAN over mDNS
    /// (`_esphomelib._tcp`); a device with an encryption key needs a
    /// `[[esphome.devices]]` entry with its `name` and `encryption_key`.
    pub discover: bool,
    /// `earshot run` also serves as an ESPHome device Home Assistant adopts
    /// (on `bind`), running HA's Assist pipeline through earshot's
    /// microphone, wake word and speaker while HA is connected.
    pub serve: bool,
    /// Where the answer audio the devices fetch is served (`ADDR:PORT`);
    /// each URL names the address the device was reached from. Only
    /// used with `devices`.
    pub audio_bind: String,
    /// Connecting to a device gives up after this long.
    pub connect_timeout_ms: u64,
    /// A device silent this long in the middle of a request (no audio) is
    /// dropped and reconnected.
    pub request_timeout_ms: u64,
    /// First wait before reconnecting to a device (doubling after each
    /// failure).
    pub reconnect_min_ms: u64,
    /// Longest wait between reconnects.
    pub reconnect_max_ms: u64,
}

/// One `[[esphome.devices]]` table: an ESPHome voice device to host.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceEntry {
    /// `host:port` of the device's API (port 6053 by default). Empty with
    /// `name` set: the key for a device `discover` finds by that name.
    pub address: String,
    /// What you call the device ("kitchen"): the target of "tell the
    /// kitchen …", and the mDNS name discovery matches. Empty: the name
    /// the device reports.
    pub name: String,
    /// The device's API encryption key (base64 32 bytes); empty = plaintext.
    pub encryption_key: String,
    /// The device's legacy API password; empty = none.
    pub password: String,
}

impl std::fmt::Debug for DeviceEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hide = |s: &str| if s.is_empty() { "" } else { "***" };
        f.debug_struct("DeviceEntry")
            .field("address", &self.address)
            .field("name", &self.name)
            .field("encryption_key", &hide(&self.encryption_key))
            .field("password", &hide(&self.password))
            .finish()
    }
}

impl Default for EsphomeConfig {
    fn default() -> Self {
        EsphomeConfig {
            bind: "0.0.0.0:6053".into(),
            name: "earshot".into(),
            encryption_key: String::new(),
            password: String::new(),
            devices: Vec::new(),
            discover: false,
            serve: false,
            audio_bind: "0.0.0.0:6055".into(),
            connect_timeout_ms: 3000,
            request_timeout_ms: 15000,
            reconnect_min_ms: 500,
            reconnect_max_ms: 30000,
        }
    }
}

impl std::fmt::Debug for EsphomeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hide = |s: &str| if s.is_empty() { "" } else { "***" };
        f.debug_struct("EsphomeConfig")
            .field("bind", &self.bind)
            .field("name", &self.name)
            .field("encryption_key", &hide(&self.encryption_key))
            .field("password", &hide(&self.password))
            .field("devices", &self.devices)
            .field("audio_bind", &self.audio_bind)
            .finish_non_exhaustive()
    }
}

impl EsphomeConfig {
    /// Check the key decodes and the name is usable, so a typo is
    /// reported at start-up.
    pub fn validate(&self) -> Result<(), String> {
        if !self.encryption_key.trim().is_empty() {
            decode_key(&self.encryption_key).map_err(|e| format!("esphome.encryption_key: {e}"))?;
        }
        for (i, device) in self.devices.iter().enumerate() {
            if device.address.trim().is_empty() && device.name.trim().is_empty() {
                return Err(format!(
                    "esphome.devices[{i}] has neither address nor name; set address = \"host:6053\" (or name, for a discovered device's key)"
                ));
            }
            if !device.encryption_key.trim().is_empty() {
                decode_key(&device.encryption_key)
                    .map_err(|e| format!("esphome.devices[{i}].encryption_key: {e}"))?;
            }
        }
        if self.name.trim().is_empty() || self.name.len() > 31 {
            return Err("esphome.name must be 1 to 31 characters".into());
        }
        Ok(())
    }

    /// The decoded encryption key, `None` when none is set.
    pub fn key(&self) -> Result<Option<[u8; 32]>, String> {
        if self.encryption_key.trim().is_empty() {
            return Ok(None);
        }
        decode_key(&self.encryption_key)
            .map(Some)
            .map_err(|e| format!("esphome.encryption_key: {e}"))
    }
}

/// Decode a base64 32-byte pre-shared key (ESPHome's format). The error
/// never contains the key.
pub fn decode_key(text: &str) -> Result<[u8; 32], String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| {
            "not base64; use 32 random bytes in base64 (openssl rand -base64 32)".to_string()
        })?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "{} bytes, not 32; use 32 random bytes in base64 (openssl rand -base64 32)",
            bytes.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_and_bad_keys_say_why_without_the_key() {
        assert!(decode_key("").unwrap_err().contains("0 bytes"));
        let good = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        assert_eq!(decode_key(&good).unwrap(), [9u8; 32]);
        let short = base64::engine::general_purpose::STANDARD.encode([9u8; 16]);
        let err = decode_key(&short).unwrap_err();
        assert!(err.contains("16 bytes") && !err.contains(&short), "{err}");
        assert!(decode_key("%%%not-base64")
            .unwrap_err()
            .contains("not base64"));
    }

    #[test]
    fn debug_hides_the_secrets() {
        let config = EsphomeConfig {
            encryption_key: "c2VjcmV0LWtleS1tYXRlcmlhbA==".into(),
            password: "hunter2".into(),
            ..Default::default()
        };
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("c2VjcmV0") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
