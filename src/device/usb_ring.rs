//! The reSpeaker USB Mic Array v2.0's 12-LED ring (`[device] leds =
//! "respeaker-usb"`), driven by vendor control transfers as Seeed's
//! `pixel_ring` does: `ctrl_transfer(0x40, 0, cmd, 0x1C, data)` — request
//! type vendor / device / out, request 0, the command in `wValue`, 0x1C in
//! `wIndex`. Commands used: 1 mono colour (`[r, g, b, 0]`), 2 listen, 3
//! speak, 4 think, 5 spin, 0x20 brightness (`[level]`).
//!
//! The transfers go through [`UsbControl`], so tests check the exact
//! requests against a fake device; the real one is `nusb` (pure Rust, no
//! libusb sysroot for cross builds).

use std::sync::Mutex;
use std::time::Duration;

use super::leds::{LedState, Leds, LedsError};

/// The array's USB ids (Seeed ReSpeaker Mic Array v2.0).
pub const VENDOR_ID: u16 = 0x2886;
pub const PRODUCT_ID: u16 = 0x0018;
/// `wIndex` of every pixel-ring request.
pub const INDEX: u16 = 0x1C;

pub const CMD_MONO: u16 = 1;
pub const CMD_LISTEN: u16 = 2;
pub const CMD_SPEAK: u16 = 3;
pub const CMD_THINK: u16 = 4;
pub const CMD_SPIN: u16 = 5;
pub const CMD_BRIGHTNESS: u16 = 0x20;

/// One vendor control-out transfer to the device (request 0, `value` =
/// the command, `index` = 0x1C).
pub trait UsbControl: Send {
    fn control_out(&mut self, value: u16, index: u16, data: &[u8]) -> Result<(), String>;
}

/// The command (and its data) that shows `state`.
pub fn command(state: LedState) -> (u16, Vec<u8>) {
    match state {
        LedState::Listening => (CMD_LISTEN, vec![0]),
        LedState::Thinking => (CMD_THINK, vec![0]),
        LedState::Speaking => (CMD_SPEAK, vec![0]),
        LedState::Ringing => (CMD_SPIN, vec![0]),
        other => {
            let (r, g, b) = other.colour();
            (CMD_MONO, vec![r, g, b, 0])
        }
    }
}

/// The ring behind [`Leds`].
pub struct UsbRing {
    dev: Mutex<Box<dyn UsbControl>>,
}

impl UsbRing {
    /// On any control layer (tests: a fake); sets a middle brightness.
    pub fn with(mut dev: Box<dyn UsbControl>) -> Result<UsbRing, LedsError> {
        dev.control_out(CMD_BRIGHTNESS, INDEX, &[16])
            .map_err(|reason| LedsError::Open {
                path: "reSpeaker USB Mic Array".into(),
                reason,
            })?;
        Ok(UsbRing {
            dev: Mutex::new(dev),
        })
    }

    /// The first ReSpeaker USB Mic Array v2.0 on the bus.
    pub fn open() -> Result<UsbRing, LedsError> {
        UsbRing::with(Box::new(NusbDevice::open()?))
    }
}

impl Leds for UsbRing {
    fn show(&self, state: LedState) {
        let (value, data) = command(state);
        let Ok(mut dev) = self.dev.lock() else { return };
        if let Err(e) = dev.control_out(value, INDEX, &data) {
            tracing::warn!("reSpeaker USB ring: {e}");
        }
    }

    fn describe(&self) -> String {
        format!("respeaker-usb ({VENDOR_ID:04x}:{PRODUCT_ID:04x})")
    }
}

/// The real device through nusb.
struct NusbDevice(nusb::Device);

impl NusbDevice {
    fn open() -> Result<NusbDevice, LedsError> {
        use nusb::MaybeFuture;
        let fail = |reason: String| LedsError::Open {
            path: format!("USB {VENDOR_ID:04x}:{PRODUCT_ID:04x}"),
            reason,
        };
        let info = nusb::list_devices()
            .wait()
            .map_err(|e| fail(e.to_string()))?
            .find(|d| d.vendor_id() == VENDOR_ID && d.product_id() == PRODUCT_ID)
            .ok_or_else(|| {
                fail("no reSpeaker USB Mic Array v2.0 is plugged in (check lsusb and the udev rule giving access)".into())
            })?;
        let dev = info.open().wait().map_err(|e| fail(e.to_string()))?;
        Ok(NusbDevice(dev))
    }
}

impl UsbControl for NusbDevice {
    fn control_out(&mut self, value: u16, index: u16, data: &[u8]) -> Result<(), String> {
        use nusb::transfer::{ControlOut, ControlType, Recipient};
        use nusb::MaybeFuture;
        self.0
            .control_out(
                ControlOut {
                    control_type: ControlType::Vendor,
                    recipient: Recipient::Device,
                    request: 0,
                    value,
                    index,
                    data,
                },
                Duration::from_millis(500),
            )
            .wait()
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// One request as sent: (wValue, wIndex, data).
    type Sent = (u16, u16, Vec<u8>);

    #[derive(Clone, Default)]
    struct Fake(Arc<Mutex<Vec<Sent>>>);

    impl UsbControl for Fake {
        fn control_out(&mut self, value: u16, index: u16, data: &[u8]) -> Result<(), String> {
            self.0.lock().unwrap().push((value, index, data.to_vec()));
            Ok(())
        }
    }

    #[test]
    fn each_state_is_one_pixel_ring_request() {
        let fake = Fake::default();
        let ring = UsbRing::with(Box::new(fake.clone())).unwrap();
        for state in [
            LedState::Listening,
            LedState::Thinking,
            LedState::Speaking,
            LedState::Ringing,
            LedState::Muted,
            LedState::Error,
            LedState::Idle,
        ] {
            ring.show(state);
        }
        let sent = fake.0.lock().unwrap().clone();
        let (r, g, b) = LedState::Muted.colour();
        let (er, eg, eb) = LedState::Error.colour();
        assert_eq!(
            sent,
            vec![
                (0x20, 0x1C, vec![16]),
                (2, 0x1C, vec![0]),
                (4, 0x1C, vec![0]),
                (3, 0x1C, vec![0]),
                (5, 0x1C, vec![0]),
                (1, 0x1C, vec![r, g, b, 0]),
                (1, 0x1C, vec![er, eg, eb, 0]),
                (1, 0x1C, vec![0, 0, 0, 0]),
            ]
        );
    }

    #[test]
    fn a_failing_device_is_one_line_and_no_panic() {
        struct Broken;
        impl UsbControl for Broken {
            fn control_out(&mut self, _: u16, _: u16, _: &[u8]) -> Result<(), String> {
                Err("pipe error".into())
            }
        }
        let err = UsbRing::with(Box::new(Broken)).err().unwrap().to_string();
        assert!(err.contains("pipe error") && !err.contains('\n'), "{err}");
    }
}
