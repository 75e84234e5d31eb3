//! The device around the software: button, LEDs, systemd notify, the clock.

pub mod button;
pub mod clock;
pub mod notify;

use serde::{Deserialize, Serialize};

/// `[device]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceConfig {
    /// none | enter | gpio:/dev/gpiochip0:17 | input:/dev/input/eventN:KEY | script:PATH
    /// (the table: [`button::KINDS`]).
    pub button: button::ButtonSpec,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            button: button::ButtonSpec::None,
        }
    }
}
