//! The device's lights: what state the assistant is in, shown on the
//! reSpeaker boards' LEDs, or written to a file (tests, other programs).
//!
//! `[device] leds` picks the backend from [`KINDS`]:
//! - `none`: no lights;
//! - `file:PATH`: one line per change appended to PATH, first word the
//!   state (`listening 2026-12-01T13:02:05.120+01:00`), or `event NAME …`
//!   for a tree's `publish_event`;
//! - `respeaker-2mic` / `respeaker-4mic`: APA102 LEDs (3 / 12) on
//!   `/dev/spidev0.1`, their power line (GPIO 12 / 5) held on through the
//!   GPIO character device.
//!
//! The USB Mic Array's ring (USB control transfers) is not built yet.
//! A light that fails (the SPI device went away) logs once and goes dark:
//! the lights never stop the voice loop.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::choice::{self, Entry};

/// Backends for `[device] leds`.
pub const KINDS: &[Entry] = &[
    Entry {
        name: "none",
        aliases: &["off"],
        form: "none",
        summary: "no lights",
    },
    Entry {
        name: "file",
        aliases: &[],
        form: "file:PATH",
        summary: "one line per state change appended to PATH (tests, other programs)",
    },
    Entry {
        name: "respeaker-2mic",
        aliases: &[],
        form: "respeaker-2mic",
        summary: "reSpeaker 2-mic HAT: 3 APA102 LEDs on /dev/spidev0.1, power on GPIO 12",
    },
    Entry {
        name: "respeaker-4mic",
        aliases: &[],
        form: "respeaker-4mic",
        summary: "reSpeaker 4-mic HAT: 12 APA102 LEDs on /dev/spidev0.1, power on GPIO 5",
    },
    Entry {
        name: "respeaker-usb",
        aliases: &[],
        form: "respeaker-usb",
        summary: "reSpeaker USB Mic Array v2.0: its 12-LED ring through USB control transfers",
    },
];

/// What the device is doing, as the lights show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedState {
    Idle,
    Listening,
    Thinking,
    Speaking,
    Ringing,
    Muted,
    Error,
}

impl LedState {
    /// The state's name (the file backend's first word).
    pub fn name(self) -> &'static str {
        match self {
            LedState::Idle => "idle",
            LedState::Listening => "listening",
            LedState::Thinking => "thinking",
            LedState::Speaking => "speaking",
            LedState::Ringing => "ringing",
            LedState::Muted => "muted",
            LedState::Error => "error",
        }
    }

    /// Its colour (R, G, B) on an LED board; idle is dark.
    pub fn colour(self) -> (u8, u8, u8) {
        match self {
            LedState::Idle => (0, 0, 0),
            LedState::Listening => (0, 0, 255),
            LedState::Thinking => (0, 160, 160),
            LedState::Speaking => (0, 255, 0),
            LedState::Ringing => (255, 140, 0),
            LedState::Muted => (255, 0, 0),
            LedState::Error => (255, 0, 64),
        }
    }
}

/// A light backend. Calls come from the voice loop's thread and the tree's
/// walking thread; each must return at once.
pub trait Leds: Send + Sync {
    fn show(&self, state: LedState);
    /// A tree's `publish_event` (a flash, a line); nothing by default.
    fn event(&self, _name: &str) {}
    /// What it drives ("file /tmp/leds", "reSpeaker 2-mic HAT …").
    fn describe(&self) -> String;
}

/// Why `[device] leds` can't be used; one line with the fix.
#[derive(Debug, thiserror::Error)]
pub enum LedsError {
    #[error("device.leds: {0}")]
    Unknown(String),
    #[error("device.leds: cannot open {path}: {reason}")]
    Open { path: String, reason: String },
}

/// Open the backend `spec` names; `Ok(None)` for `none`.
pub fn open(spec: &str) -> Result<Option<Box<dyn Leds>>, LedsError> {
    let spec = spec.trim();
    let (kind, rest) = match spec.split_once(':') {
        Some((k, r)) => (k.trim().to_ascii_lowercase(), Some(r.trim())),
        None => (spec.to_ascii_lowercase(), None),
    };
    match (kind.as_str(), rest) {
        ("" | "none" | "off", None) => Ok(None),
        ("file", Some(path)) if !path.is_empty() => {
            Ok(Some(Box::new(FileLeds::open(Path::new(path))?)))
        }
        ("respeaker-2mic", None) => Ok(Some(Box::new(Apa102::open(Board::TwoMic)?))),
        ("respeaker-4mic", None) => Ok(Some(Box::new(Apa102::open(Board::FourMic)?))),
        ("respeaker-usb", None) => Ok(Some(Box::new(super::usb_ring::UsbRing::open()?))),
        _ => Err(LedsError::Unknown(format!(
            "unknown '{spec}'; use {}",
            choice::one_of(KINDS)
        ))),
    }
}

/// Local time with milliseconds and offset.
fn stamp() -> String {
    chrono::Local::now()
        .format("%Y-%m-%dT%H:%M:%S%.3f%:z")
        .to_string()
}

/// `file:PATH`: appends `state timestamp` lines.
pub struct FileLeds {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl FileLeds {
    pub fn open(path: &Path) -> Result<FileLeds, LedsError> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| LedsError::Open {
                path: path.display().to_string(),
                reason: format!("{e}; check the directory exists and is writable"),
            })?;
        Ok(FileLeds {
            path: path.to_path_buf(),
            file: Mutex::new(Some(file)),
        })
    }

    fn line(&self, text: &str) {
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = slot.as_mut() {
            if let Err(e) = writeln!(file, "{text} {}", stamp()) {
                tracing::warn!("LED file {}: {e}; no more LED lines", self.path.display());
                *slot = None;
            }
        }
    }
}

impl Leds for FileLeds {
    fn show(&self, state: LedState) {
        self.line(state.name());
    }
    fn event(&self, name: &str) {
        self.line(&format!("event {name}"));
    }
    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

/// The APA102 boards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Board {
    TwoMic,
    FourMic,
}

impl Board {
    fn leds(self) -> usize {
        match self {
            Board::TwoMic => 3,
            Board::FourMic => 12,
        }
    }
    fn power_line(self) -> u32 {
        match self {
            Board::TwoMic => 12,
            Board::FourMic => 5,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Board::TwoMic => "reSpeaker 2-mic HAT",
            Board::FourMic => "reSpeaker 4-mic HAT",
        }
    }
}

/// The bytes of one APA102 update: a start frame of four zero bytes, then
/// per LED `0xE0 | brightness` (5 bits), blue, green, red, then an end
/// frame of at least n/2 bits of ones (so the last LED latches).
pub fn apa102_frame(colours: &[(u8, u8, u8)], brightness: u8) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    for &(r, g, b) in colours {
        out.extend_from_slice(&[0xE0 | (brightness & 0x1F), b, g, r]);
    }
    let end = colours.len().div_ceil(16).max(1) * 4;
    out.extend(std::iter::repeat_n(0xFF, end));
    out
}

/// APA102 LEDs on SPI (`write` on spidev is one transfer at its default
/// mode and speed, which APA102 accepts).
pub struct Apa102 {
    board: Board,
    spi: Mutex<Option<File>>,
    /// Holds the LEDs' power line on while earshot runs.
    _power: Option<File>,
}

/// Where the boards' LEDs are wired.
const SPIDEV: &str = "/dev/spidev0.1";
const GPIO_CHIP: &str = "/dev/gpiochip0";
/// 5-bit global brightness: a third, easy on the eyes in a dark room.
const BRIGHTNESS: u8 = 10;

impl Apa102 {
    pub fn open(board: Board) -> Result<Apa102, LedsError> {
        let spi = File::options()
            .write(true)
            .open(SPIDEV)
            .map_err(|e| LedsError::Open {
                path: SPIDEV.into(),
                reason: format!(
                    "{e}; enable SPI (raspi-config → Interface Options → SPI, or dtparam=spi=on in config.txt) or set device.leds = \"none\""
                ),
            })?;
        let power = match super::button::output_line(Path::new(GPIO_CHIP), board.power_line()) {
            Ok(line) => Some(line),
            Err(e) => {
                // Some board revisions power the LEDs always: try anyway.
                tracing::warn!("{}: LED power line: {e:#}", board.name());
                None
            }
        };
        Ok(Apa102 {
            board,
            spi: Mutex::new(Some(spi)),
            _power: power,
        })
    }
}

impl Leds for Apa102 {
    fn show(&self, state: LedState) {
        let colours = vec![state.colour(); self.board.leds()];
        let frame = apa102_frame(&colours, BRIGHTNESS);
        let mut slot = self.spi.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(spi) = slot.as_mut() {
            if let Err(e) = spi.write_all(&frame) {
                tracing::warn!(
                    "{}: writing {SPIDEV}: {e}; the LEDs stay dark",
                    self.board.name()
                );
                *slot = None;
            }
        }
    }
    fn describe(&self) -> String {
        format!("{} on {SPIDEV}", self.board.name())
    }
}

impl Drop for Apa102 {
    fn drop(&mut self) {
        // Dark when earshot stops.
        self.show(LedState::Idle);
    }
}

/// The lights as the voice loop drives them: only changes are shown.
pub struct Lights {
    leds: Box<dyn Leds>,
    last: Mutex<Option<LedState>>,
}

impl Lights {
    pub fn new(leds: Box<dyn Leds>) -> Lights {
        Lights {
            leds,
            last: Mutex::new(None),
        }
    }

    /// Show `state` unless it is already shown.
    pub fn set(&self, state: LedState) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if *last != Some(state) {
            *last = Some(state);
            self.leds.show(state);
        }
    }

    pub fn event(&self, name: &str) {
        self.leds.event(name);
    }

    pub fn describe(&self) -> String {
        self.leds.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apa102_frames_are_start_leds_then_end() {
        let f = apa102_frame(&[(1, 2, 3), (255, 0, 16)], 31);
        assert_eq!(
            f,
            [
                0, 0, 0, 0, // start
                0xFF, 3, 2, 1, // 0xE0|31, B, G, R
                0xFF, 16, 0, 255, //
                0xFF, 0xFF, 0xFF, 0xFF // end
            ]
        );
        // Brightness keeps to 5 bits; 12 LEDs still end with one frame.
        let f = apa102_frame(&[(0, 0, 0); 12], 0x2A);
        assert_eq!(f[4], 0xE0 | 0x0A);
        assert_eq!(f.len(), 4 + 12 * 4 + 4);
        assert_eq!(apa102_frame(&[(0, 0, 0); 40], 1).len(), 4 + 160 + 12);
    }

    #[test]
    fn the_file_backend_writes_one_line_per_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leds");
        let lights = Lights::new(open(&format!("file:{}", path.display())).unwrap().unwrap());
        lights.set(LedState::Listening);
        lights.set(LedState::Listening);
        lights.set(LedState::Thinking);
        lights.event("timer_set");
        lights.set(LedState::Idle);
        let text = std::fs::read_to_string(&path).unwrap();
        let words: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(words, ["listening", "thinking", "event", "idle"]);
        let first = text.lines().next().unwrap();
        let ts = first.split(' ').nth(1).unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{first}");
        assert!(text.lines().nth(2).unwrap().starts_with("event timer_set "));
    }

    #[test]
    fn bad_specs_are_one_line_with_the_choices() {
        assert!(open("none").unwrap().is_none());
        assert!(open("").unwrap().is_none());
        let e = open("disco").err().unwrap().to_string();
        assert!(e.starts_with("device.leds: unknown 'disco'; use"), "{e}");
        assert!(e.contains("respeaker-2mic"), "{e}");
        let e = open("file:/nonexistent/dir/leds")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("cannot open /nonexistent/dir/leds"), "{e}");
        if !Path::new(SPIDEV).exists() {
            let e = open("respeaker-2mic").err().unwrap().to_string();
            assert!(e.contains("enable SPI"), "{e}");
        }
    }
}
