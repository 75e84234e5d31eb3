//! The device around the software: button, LEDs, systemd notify, the clock.

pub mod announce;
pub mod button;
pub mod clock;
pub mod control;
pub mod leds;
pub mod notify;
pub mod usb_ring;

use serde::{Deserialize, Serialize};

/// `[device]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceConfig {
    /// none | enter | gpio:/dev/gpiochip0:17 | input:/dev/input/eventN:KEY | script:PATH
    /// (the table: [`button::KINDS`]).
    pub button: button::ButtonSpec,
    /// none | file:PATH | respeaker-2mic | respeaker-4mic | respeaker-usb (the table:
    /// [`leds::KINDS`]); what `earshot run` shows on the lights.
    pub leds: String,
    /// Holding the button this long (ms) mutes or unmutes the microphone,
    /// as `earshot mute toggle` does (0 = never; not with push-to-talk,
    /// where holding is talking).
    pub long_press_ms: u64,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            button: button::ButtonSpec::None,
            leds: "none".into(),
            long_press_ms: 1500,
        }
    }
}
