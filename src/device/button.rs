//! The push-to-talk button (R-DEV): one small trait and one type per
//! source, named by `device.button`:
//!
//! | value | source |
//! |---|---|
//! | `none` | no button (VAD only) |
//! | `gpio:/dev/gpiochip0:17` | a GPIO line through the Linux character device (reSpeaker 2-mic HAT: line 17, active low) |
//! | `input:/dev/input/event0:KEY_ENTER` | a key of an input-event device (USB button, keyboard, reSpeaker USB array) |
//! | `enter` | Enter in a terminal (development): first Enter presses, the next releases |
//! | `script:PATH` | a file or FIFO of `press`/`release`/`click`/`wait MS` lines (tests) |
//!
//! Every source is read on its own thread ([`spawn`]) and delivers
//! [`ButtonEvent`]s on a channel, so the voice loop never blocks on it.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::choice::{self, Entry};
use crossbeam_channel::{unbounded, Receiver};

/// What the button did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ButtonEvent {
    Press,
    Release,
}

/// A source of button events.
pub trait Button: Send {
    /// Wait up to `timeout` for the next event; `Ok(None)` = nothing yet.
    /// An error ends the source (it is logged; the loop goes on without it).
    fn next_event(&mut self, timeout: Duration) -> Result<Option<ButtonEvent>>;
    /// `true` once the source can never produce another event (a script
    /// that has ended).
    fn finished(&self) -> bool {
        false
    }
    /// For logs.
    fn describe(&self) -> String;
}

/// The button name table: every kind `device.button` accepts, read by the
/// config, `earshot devices` and `doctor`.
pub const KINDS: &[Entry] = &[
    Entry {
        name: "none",
        aliases: &[""],
        form: "none",
        summary: "no button (voice only)",
    },
    Entry {
        name: "gpio",
        aliases: &[],
        form: "gpio:/dev/gpiochip0:17",
        summary: "a GPIO line, active low (reSpeaker 2-mic HAT: line 17)",
    },
    Entry {
        name: "input",
        aliases: &[],
        form: "input:/dev/input/event0:KEY_ENTER",
        summary: "a key of an input-event device (USB button, keyboard, reSpeaker USB array)",
    },
    Entry {
        name: "enter",
        aliases: &[],
        form: "enter",
        summary: "Enter in a terminal (development): first press, next release",
    },
    Entry {
        name: "script",
        aliases: &[],
        form: "script:PATH",
        summary: "a file or FIFO of press/release/click/wait MS lines (tests)",
    },
];

/// `device.button`, parsed when the config is read.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ButtonSpec {
    #[default]
    None,
    Enter,
    Gpio {
        chip: PathBuf,
        line: u32,
    },
    Input {
        path: PathBuf,
        key: String,
    },
    Script(PathBuf),
}

/// A `device.button` value that is not one of [`KINDS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{spec}': {reason}")]
pub struct BadButtonSpec {
    pub spec: String,
    pub reason: String,
}

impl std::str::FromStr for ButtonSpec {
    type Err = BadButtonSpec;

    fn from_str(spec: &str) -> std::result::Result<Self, Self::Err> {
        let spec = spec.trim();
        let bad = |reason: String| BadButtonSpec {
            spec: spec.to_string(),
            reason,
        };
        let (kind, rest) = match spec.split_once(':') {
            Some((kind, rest)) => (kind, Some(rest)),
            None => (spec, None),
        };
        let kind = choice::find(KINDS, "button kind", kind)
            .map(|i| KINDS[i].name)
            .map_err(|e| bad(e.to_string()))?;
        match (kind, rest) {
            ("none", None) => Ok(ButtonSpec::None),
            ("enter", None) => Ok(ButtonSpec::Enter),
            ("script", Some(path)) if !path.is_empty() => Ok(ButtonSpec::Script(path.into())),
            ("gpio", Some(rest)) => {
                let (chip, line) = rest
                    .rsplit_once(':')
                    .ok_or_else(|| bad("write gpio:/dev/gpiochip0:17".into()))?;
                let line = line.parse().map_err(|_| {
                    bad("the line must be a number (the reSpeaker 2-mic HAT button is 17)".into())
                })?;
                Ok(ButtonSpec::Gpio {
                    chip: chip.into(),
                    line,
                })
            }
            ("input", Some(rest)) => {
                let (path, key) = match rest.rsplit_once(':') {
                    Some((path, key)) if !key.starts_with('/') => (path, key),
                    _ => (rest, "KEY_ENTER"),
                };
                key_code(key).map_err(|e| bad(e.to_string()))?;
                Ok(ButtonSpec::Input {
                    path: path.into(),
                    key: key.to_string(),
                })
            }
            _ => Err(bad(format!("use {}", choice::one_of(KINDS)))),
        }
    }
}

impl ButtonSpec {
    /// This spec's entry in [`KINDS`].
    pub fn kind(&self) -> &'static Entry {
        let name = match self {
            ButtonSpec::None => "none",
            ButtonSpec::Enter => "enter",
            ButtonSpec::Gpio { .. } => "gpio",
            ButtonSpec::Input { .. } => "input",
            ButtonSpec::Script(_) => "script",
        };
        KINDS.iter().find(|k| k.name == name).unwrap_or(&KINDS[0])
    }
}

impl std::fmt::Display for ButtonSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ButtonSpec::None => write!(f, "none"),
            ButtonSpec::Enter => write!(f, "enter"),
            ButtonSpec::Gpio { chip, line } => write!(f, "gpio:{}:{line}", chip.display()),
            ButtonSpec::Input { path, key } => write!(f, "input:{}:{key}", path.display()),
            ButtonSpec::Script(path) => write!(f, "script:{}", path.display()),
        }
    }
}

impl TryFrom<String> for ButtonSpec {
    type Error = BadButtonSpec;
    fn try_from(spec: String) -> std::result::Result<Self, Self::Error> {
        spec.parse()
    }
}

impl From<ButtonSpec> for String {
    fn from(spec: ButtonSpec) -> String {
        spec.to_string()
    }
}

/// Open the button `device.button` names; `Ok(None)` for `none`.
pub fn open(spec: &ButtonSpec) -> Result<Option<Box<dyn Button>>> {
    Ok(Some(match spec {
        ButtonSpec::None => return Ok(None),
        ButtonSpec::Enter => Box::new(EnterKey::new()),
        ButtonSpec::Script(path) => Box::new(Scripted::open(path)?),
        ButtonSpec::Gpio { chip, line } => Box::new(GpioLine::open(chip, *line)?),
        ButtonSpec::Input { path, key } => Box::new(InputKey::open(path, key)?),
    }))
}

/// Read `button` on its own thread; events arrive on the returned channel,
/// which closes when the source ends or fails.
pub fn spawn(button: Box<dyn Button>) -> Result<Receiver<ButtonEvent>> {
    spawn_with_long_press(button, None)
}

/// A long press: held this long, the button sends `mute toggle` to the
/// running loop's control socket (the same path as `earshot mute`), so
/// the loop needs no second kind of press.
#[derive(Debug, Clone)]
pub struct LongPress {
    pub after: Duration,
    pub socket: PathBuf,
}

/// As [`spawn`], and a press held for `long.after` toggles mute.
pub fn spawn_with_long_press(
    mut button: Box<dyn Button>,
    long: Option<LongPress>,
) -> Result<Receiver<ButtonEvent>> {
    let (tx, rx) = unbounded();
    let name = button.describe();
    std::thread::Builder::new()
        .name("button".into())
        .spawn(move || {
            let mut down: Option<Instant> = None;
            loop {
                // While held, wake up in time for the long press.
                let wait = match (&long, down) {
                    (Some(l), Some(at)) => l
                        .after
                        .saturating_sub(at.elapsed())
                        .clamp(Duration::from_millis(5), Duration::from_millis(200)),
                    _ => Duration::from_millis(200),
                };
                let next = button.next_event(wait);
                // Checked before the event: a button that blocks until its
                // next event (a script) reports a long hold at the release.
                if let (Some(l), Some(at)) = (&long, down) {
                    if at.elapsed() >= l.after {
                        // Once per press.
                        down = None;
                        match super::control::send(&l.socket, "mute toggle") {
                            Ok(state) => tracing::info!("long press: {state}"),
                            Err(e) => tracing::warn!("long press: could not toggle mute: {e}"),
                        }
                    }
                }
                match next {
                    Ok(Some(event)) => {
                        tracing::debug!(button = %name, ?event, "button");
                        down = (event == ButtonEvent::Press).then(Instant::now);
                        if tx.send(event).is_err() {
                            return;
                        }
                    }
                    Ok(None) if button.finished() => return,
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(button = %name, "the button stopped working: {e:#}");
                        return;
                    }
                }
            }
        })
        .context("could not start the button thread")?;
    Ok(rx)
}

// ------------------------------------------------------------- scripted

/// A file or FIFO of lines: `press`, `release`, `click` (press then
/// release), `wait MS`; `#` starts a comment. A FIFO lets a test press at
/// exactly the moment it chooses.
pub struct Scripted {
    path: PathBuf,
    lines: Option<Box<dyn BufRead + Send>>,
    queued: std::collections::VecDeque<ButtonEvent>,
    done: bool,
    line_no: usize,
}

impl Scripted {
    /// The file is opened lazily on the button thread: opening a FIFO
    /// blocks until its writer opens it. Only existence is checked here.
    pub fn open(path: &Path) -> Result<Scripted> {
        if !path.exists() {
            bail!("button script {} does not exist", path.display());
        }
        Ok(Scripted {
            path: path.to_path_buf(),
            lines: None,
            queued: Default::default(),
            done: false,
            line_no: 0,
        })
    }
}

impl Button for Scripted {
    fn next_event(&mut self, _timeout: Duration) -> Result<Option<ButtonEvent>> {
        if let Some(e) = self.queued.pop_front() {
            return Ok(Some(e));
        }
        if self.done {
            return Ok(None);
        }
        if self.lines.is_none() {
            let file = File::open(&self.path)
                .with_context(|| format!("cannot open button script {}", self.path.display()))?;
            self.lines = Some(Box::new(BufReader::new(file)));
        }
        let Some(lines) = self.lines.as_mut() else {
            return Ok(None);
        };
        let mut line = String::new();
        // Blocks on a FIFO until the test writes a line: that is the point.
        if lines.read_line(&mut line)? == 0 {
            self.done = true;
            return Ok(None);
        }
        self.line_no += 1;
        let line = line
            .split('#')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (None, _) => {}
            (Some("press"), None) => self.queued.push_back(ButtonEvent::Press),
            (Some("release"), None) => self.queued.push_back(ButtonEvent::Release),
            (Some("click"), None) => {
                self.queued.push_back(ButtonEvent::Press);
                self.queued.push_back(ButtonEvent::Release);
            }
            (Some("wait"), Some(ms)) => {
                let ms: u64 = ms.parse().map_err(|_| {
                    anyhow!(
                        "{}:{}: wait needs milliseconds",
                        self.path.display(),
                        self.line_no
                    )
                })?;
                std::thread::sleep(Duration::from_millis(ms.min(600_000)));
            }
            _ => bail!(
                "{}:{}: '{line}' is not press, release, click or wait MS",
                self.path.display(),
                self.line_no
            ),
        }
        Ok(self.queued.pop_front())
    }

    fn finished(&self) -> bool {
        self.done && self.queued.is_empty()
    }

    fn describe(&self) -> String {
        format!("script {}", self.path.display())
    }
}

// ------------------------------------------------------------- Enter

/// Enter in a terminal: presses and releases alternate (a terminal can't
/// report a held key).
pub struct EnterKey {
    rx: Receiver<()>,
    held: bool,
}

impl EnterKey {
    pub fn new() -> EnterKey {
        let (tx, rx) = unbounded();
        let _ = std::thread::Builder::new()
            .name("stdin-button".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                for line in stdin.lock().lines() {
                    if line.is_err() || tx.send(()).is_err() {
                        return;
                    }
                }
            });
        EnterKey { rx, held: false }
    }
}

impl Default for EnterKey {
    fn default() -> Self {
        Self::new()
    }
}

impl Button for EnterKey {
    fn next_event(&mut self, timeout: Duration) -> Result<Option<ButtonEvent>> {
        match self.rx.recv_timeout(timeout) {
            Ok(()) => {
                self.held = !self.held;
                Ok(Some(if self.held {
                    ButtonEvent::Press
                } else {
                    ButtonEvent::Release
                }))
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Ok(None),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                bail!("stdin closed; the Enter button is gone")
            }
        }
    }

    fn describe(&self) -> String {
        "Enter key".into()
    }
}

// ------------------------------------------------------------- input events

/// One key of a Linux input-event device (`/dev/input/eventN`).
pub struct InputKey {
    path: PathBuf,
    file: File,
    code: u16,
}

const EV_KEY: u16 = 1;

/// Key names we accept besides numbers (linux/input-event-codes.h).
const KEY_CODES: &[(&str, u16)] = &[
    ("KEY_ENTER", 28),
    ("KEY_SPACE", 57),
    ("KEY_F12", 88),
    ("KEY_VOLUMEDOWN", 114),
    ("KEY_VOLUMEUP", 115),
    ("KEY_PROG1", 148),
    ("KEY_PLAYPAUSE", 164),
    ("KEY_MICMUTE", 248),
    ("BTN_0", 256),
    ("BTN_LEFT", 272),
];

/// A key name (`KEY_ENTER`) or number (`28`) to its code.
pub fn key_code(name: &str) -> Result<u16> {
    if let Ok(n) = name.parse::<u16>() {
        return Ok(n);
    }
    let upper = name.to_ascii_uppercase();
    KEY_CODES
        .iter()
        .find(|(n, _)| *n == upper)
        .map(|(_, c)| *c)
        .ok_or_else(|| {
            anyhow!(
                "unknown key '{name}'; use a number from `evtest` or one of {}",
                KEY_CODES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

impl InputKey {
    pub fn open(path: &Path, key: &str) -> Result<InputKey> {
        let code = key_code(key)?;
        let file = File::open(path).map_err(|e| {
            anyhow!(
                "cannot open the button's input device {}: {e}; check the path (ls /dev/input/by-id) and that the user is in the 'input' group",
                path.display()
            )
        })?;
        Ok(InputKey {
            path: path.to_path_buf(),
            file,
            code,
        })
    }
}

impl Button for InputKey {
    fn next_event(&mut self, timeout: Duration) -> Result<Option<ButtonEvent>> {
        const SIZE: usize = std::mem::size_of::<libc::input_event>();
        if !wait_readable(self.file.as_raw_fd(), timeout)? {
            return Ok(None);
        }
        let mut buf = [0u8; SIZE];
        let n = self
            .file
            .read(&mut buf)
            .with_context(|| format!("reading {}", self.path.display()))?;
        if n < SIZE {
            // A short read only happens on a plain file at its end.
            return Ok(None);
        }
        Ok(decode_input_event(&buf, self.code))
    }

    fn describe(&self) -> String {
        format!("key {} of {}", self.code, self.path.display())
    }
}

/// A press (value 1) or release (0) of `code`; repeats (2) and other
/// events are `None`.
fn decode_input_event(buf: &[u8], code: u16) -> Option<ButtonEvent> {
    let size = std::mem::size_of::<libc::input_event>();
    if buf.len() < size {
        return None;
    }
    // Layout: struct timeval, then u16 type, u16 code, i32 value.
    let at = size - 8;
    let kind = u16::from_ne_bytes([buf[at], buf[at + 1]]);
    let key = u16::from_ne_bytes([buf[at + 2], buf[at + 3]]);
    let value = i32::from_ne_bytes([buf[at + 4], buf[at + 5], buf[at + 6], buf[at + 7]]);
    if kind != EV_KEY || key != code {
        return None;
    }
    match value {
        1 => Some(ButtonEvent::Press),
        0 => Some(ButtonEvent::Release),
        _ => None,
    }
}

fn wait_readable(fd: i32, timeout: Duration) -> Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    if n < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(err.into());
    }
    Ok(n > 0 && pfd.revents & libc::POLLIN != 0)
}

// ------------------------------------------------------------- GPIO

/// A GPIO line through the Linux GPIO character device (uAPI v2), edge
/// events with the kernel's debounce. Active low with pull-up, as the
/// reSpeaker 2-mic HAT's button on GPIO17 is wired.
pub struct GpioLine {
    label: String,
    line: File,
}

const GPIO_V2_LINES_MAX: usize = 64;
const GPIO_MAX_NAME_SIZE: usize = 32;
const GPIO_V2_LINE_NUM_ATTRS_MAX: usize = 10;
const GPIO_V2_LINE_FLAG_ACTIVE_LOW: u64 = 1 << 1;
const GPIO_V2_LINE_FLAG_INPUT: u64 = 1 << 2;
const GPIO_V2_LINE_FLAG_EDGE_RISING: u64 = 1 << 4;
const GPIO_V2_LINE_FLAG_EDGE_FALLING: u64 = 1 << 5;
const GPIO_V2_LINE_FLAG_BIAS_PULL_UP: u64 = 1 << 8;
const GPIO_V2_LINE_ATTR_ID_DEBOUNCE: u32 = 3;
const GPIO_V2_LINE_EVENT_RISING_EDGE: u32 = 1;
const GPIO_V2_LINE_EVENT_FALLING_EDGE: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct GpioV2LineAttribute {
    id: u32,
    padding: u32,
    /// flags / values / debounce_period_us (a union; u64 covers all).
    value: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct GpioV2LineConfigAttribute {
    attr: GpioV2LineAttribute,
    mask: u64,
}

#[repr(C)]
struct GpioV2LineConfig {
    flags: u64,
    num_attrs: u32,
    padding: [u32; 5],
    attrs: [GpioV2LineConfigAttribute; GPIO_V2_LINE_NUM_ATTRS_MAX],
}

#[repr(C)]
struct GpioV2LineRequest {
    offsets: [u32; GPIO_V2_LINES_MAX],
    consumer: [u8; GPIO_MAX_NAME_SIZE],
    config: GpioV2LineConfig,
    num_lines: u32,
    event_buffer_size: u32,
    padding: [u32; 5],
    fd: i32,
}

#[repr(C)]
#[derive(Default)]
struct GpioV2LineEvent {
    timestamp_ns: u64,
    id: u32,
    offset: u32,
    seqno: u32,
    line_seqno: u32,
    padding: [u32; 6],
}

/// `_IOWR(0xB4, 0x07, struct gpio_v2_line_request)`.
const GPIO_V2_GET_LINE_IOCTL: u64 =
    (3 << 30) | ((std::mem::size_of::<GpioV2LineRequest>() as u64) << 16) | (0xB4 << 8) | 0x07;

impl GpioLine {
    pub fn open(chip: &Path, offset: u32) -> Result<GpioLine> {
        let chip_file = File::options().read(true).write(true).open(chip).map_err(|e| {
            anyhow!(
                "cannot open GPIO chip {}: {e}; on a Raspberry Pi it is /dev/gpiochip0 (gpiochip4 on a Pi 5) and the user must be in the 'gpio' group; or set device.button to none/enter",
                chip.display()
            )
        })?;
        let debounce = GpioV2LineConfigAttribute {
            attr: GpioV2LineAttribute {
                id: GPIO_V2_LINE_ATTR_ID_DEBOUNCE,
                padding: 0,
                value: 10_000, // µs
            },
            mask: 1,
        };
        let flags = GPIO_V2_LINE_FLAG_INPUT
            | GPIO_V2_LINE_FLAG_ACTIVE_LOW
            | GPIO_V2_LINE_FLAG_BIAS_PULL_UP
            | GPIO_V2_LINE_FLAG_EDGE_RISING
            | GPIO_V2_LINE_FLAG_EDGE_FALLING;
        let line = request_line(&chip_file, offset, flags, debounce).map_err(|err| {
            anyhow!(
                "cannot claim GPIO line {offset} on {}: {err}; check the line number (reSpeaker 2-mic HAT: 17) and that nothing else uses it",
                chip.display()
            )
        })?;
        Ok(GpioLine {
            label: format!("{}:{offset}", chip.display()),
            line,
        })
    }
}

/// Claim one line of an open GPIO chip with `flags` and one attribute; the
/// returned file holds the line.
fn request_line(
    chip: &File,
    offset: u32,
    flags: u64,
    attr: GpioV2LineConfigAttribute,
) -> std::io::Result<File> {
    let empty_attr = GpioV2LineConfigAttribute {
        attr: GpioV2LineAttribute {
            id: 0,
            padding: 0,
            value: 0,
        },
        mask: 0,
    };
    let mut request = GpioV2LineRequest {
        offsets: [0; GPIO_V2_LINES_MAX],
        consumer: [0; GPIO_MAX_NAME_SIZE],
        config: GpioV2LineConfig {
            flags,
            num_attrs: 1,
            padding: [0; 5],
            attrs: [empty_attr; GPIO_V2_LINE_NUM_ATTRS_MAX],
        },
        num_lines: 1,
        event_buffer_size: 0,
        padding: [0; 5],
        fd: -1,
    };
    request.offsets[0] = offset;
    request.consumer[..7].copy_from_slice(b"earshot");
    request.config.attrs[0] = attr;
    // SAFETY: the request struct matches the kernel's layout and lives for
    // the call; the kernel fills `fd`.
    let rc = unsafe {
        libc::ioctl(
            chip.as_raw_fd(),
            GPIO_V2_GET_LINE_IOCTL as _,
            &mut request as *mut GpioV2LineRequest,
        )
    };
    if rc < 0 || request.fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel handed us a new descriptor we now own.
    Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(request.fd) })
}

const GPIO_V2_LINE_FLAG_OUTPUT: u64 = 1 << 3;
const GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES: u32 = 2;

/// Claim `offset` on `chip` as an output driven high (the reSpeaker HATs'
/// LED power line); the line stays claimed while the file is open.
pub(crate) fn output_line(chip: &Path, offset: u32) -> Result<File> {
    let chip_file = File::options()
        .read(true)
        .write(true)
        .open(chip)
        .map_err(|e| anyhow!("cannot open GPIO chip {}: {e}", chip.display()))?;
    let high = GpioV2LineConfigAttribute {
        attr: GpioV2LineAttribute {
            id: GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES,
            padding: 0,
            value: 1, // line 0 of the request: high
        },
        mask: 1,
    };
    request_line(&chip_file, offset, GPIO_V2_LINE_FLAG_OUTPUT, high).map_err(|err| {
        anyhow!(
            "cannot claim GPIO line {offset} on {}: {err}",
            chip.display()
        )
    })
}

impl Button for GpioLine {
    fn next_event(&mut self, timeout: Duration) -> Result<Option<ButtonEvent>> {
        if !wait_readable(self.line.as_raw_fd(), timeout)? {
            return Ok(None);
        }
        let mut event = GpioV2LineEvent::default();
        let size = std::mem::size_of::<GpioV2LineEvent>();
        // SAFETY: reading plain bytes into a repr(C) struct of integers.
        let buf = unsafe {
            std::slice::from_raw_parts_mut((&mut event as *mut GpioV2LineEvent).cast::<u8>(), size)
        };
        let n = self.line.read(buf).context("reading the GPIO line")?;
        if n < size {
            return Ok(None);
        }
        // Active low: the logical rising edge is the press.
        Ok(match event.id {
            GPIO_V2_LINE_EVENT_RISING_EDGE => Some(ButtonEvent::Press),
            GPIO_V2_LINE_EVENT_FALLING_EDGE => Some(ButtonEvent::Release),
            _ => None,
        })
    }

    fn describe(&self) -> String {
        format!("GPIO {}", self.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Parse then open, as the config and `run` do.
    fn open(spec: &str) -> Result<Option<Box<dyn Button>>> {
        super::open(&spec.parse::<ButtonSpec>()?)
    }

    #[test]
    fn specs_parse_print_back_and_refuse_unknown_kinds() {
        for spec in [
            "none",
            "enter",
            "gpio:/dev/gpiochip0:17",
            "input:/dev/input/event3:KEY_VOLUMEUP",
            "script:/tmp/presses",
        ] {
            let parsed: ButtonSpec = spec.parse().unwrap();
            assert_eq!(parsed.to_string(), spec);
        }
        assert_eq!("".parse::<ButtonSpec>().unwrap(), ButtonSpec::None);
        assert_eq!(
            "input:/dev/input/event0".parse::<ButtonSpec>().unwrap(),
            ButtonSpec::Input {
                path: "/dev/input/event0".into(),
                key: "KEY_ENTER".into()
            }
        );
        let err = "bogus".parse::<ButtonSpec>().unwrap_err().to_string();
        assert!(
            err.contains("unknown button kind 'bogus'; use none, gpio:/dev/gpiochip0:17"),
            "{err}"
        );
        let err = "gpio:/dev/null:x"
            .parse::<ButtonSpec>()
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be a number"), "{err}");
        let err = "input:/dev/input/event0:KEY_NOPE"
            .parse::<ButtonSpec>()
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key 'KEY_NOPE'"), "{err}");
        assert!("enter:now".parse::<ButtonSpec>().is_err());
        assert!("script:".parse::<ButtonSpec>().is_err());
    }

    #[test]
    fn gpio_request_matches_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<GpioV2LineRequest>(), 592);
        assert_eq!(GPIO_V2_GET_LINE_IOCTL, 0xC250_B407);
        assert_eq!(std::mem::size_of::<GpioV2LineEvent>(), 48);
    }

    #[test]
    fn missing_gpio_chip_says_what_to_do() {
        let err = open("gpio:/dev/gpiochip9:17").err().unwrap().to_string();
        assert!(err.contains("/dev/gpiochip9"), "{err}");
        assert!(err.contains("gpio' group"), "{err}");
        let err = open("gpio:/dev/gpiochip0:seventeen")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("must be a number"), "{err}");
    }

    #[test]
    fn scripted_events_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script");
        std::fs::write(&path, "# test\npress\nwait 1\nrelease\nclick\n").unwrap();
        let rx = spawn(
            open(&format!("script:{}", path.display()))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        let events: Vec<ButtonEvent> = rx.iter().collect();
        use ButtonEvent::*;
        assert_eq!(events, vec![Press, Release, Press, Release]);
    }

    #[test]
    fn bad_script_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script");
        std::fs::write(&path, "press\nbounce\n").unwrap();
        let mut b = Scripted::open(&path).unwrap();
        assert_eq!(
            b.next_event(Duration::ZERO).unwrap(),
            Some(ButtonEvent::Press)
        );
        let err = b.next_event(Duration::ZERO).unwrap_err().to_string();
        assert!(err.contains(":2: 'bounce'"), "{err}");
    }

    #[test]
    fn input_events_decode_from_a_recorded_stream() {
        let size = std::mem::size_of::<libc::input_event>();
        let record = |kind: u16, code: u16, value: i32| {
            let mut b = vec![0u8; size - 8];
            b.extend(kind.to_ne_bytes());
            b.extend(code.to_ne_bytes());
            b.extend(value.to_ne_bytes());
            b
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("event0");
        let mut f = File::create(&path).unwrap();
        f.write_all(&record(EV_KEY, 57, 1)).unwrap(); // other key
        f.write_all(&record(EV_KEY, 28, 1)).unwrap();
        f.write_all(&record(EV_KEY, 28, 2)).unwrap(); // repeat
        f.write_all(&record(0, 0, 0)).unwrap(); // SYN
        f.write_all(&record(EV_KEY, 28, 0)).unwrap();
        drop(f);
        let mut key = InputKey::open(&path, "KEY_ENTER").unwrap();
        let mut got = Vec::new();
        for _ in 0..6 {
            if let Some(e) = key.next_event(Duration::from_millis(10)).unwrap() {
                got.push(e);
            }
        }
        assert_eq!(got, vec![ButtonEvent::Press, ButtonEvent::Release]);
        assert!(key_code("KEY_NOPE").is_err());
        let err = open("input:/dev/input/event99:KEY_ENTER")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'input' group"), "{err}");
    }
}
