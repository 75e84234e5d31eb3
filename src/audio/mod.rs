//! Audio in and out: cpal capture, VAD endpointing, rodio playback, WAV.
//!
//! The listening half is built around one idea: everything downstream of the
//! microphone sees **16 kHz mono `i16` frames** ([`SAMPLE_RATE`]), whatever
//! the device delivers. An [`AudioSource`] (a live cpal input in
//! [`capture`], or a WAV file in [`wav`]) yields those samples;
//! [`vad::Endpointer`] cuts them into [`vad::Utterance`]s; `crate::stt`
//! turns an utterance into text.
//!
//! ```no_run
//! use earshot::audio::{self, vad::Endpointer, AudioConfig};
//! use earshot::cancel::CancelToken;
//! let cfg = AudioConfig::default();
//! let mut source = audio::open_input(&cfg.input, &cfg)?;
//! let mut ep = Endpointer::new(&cfg.vad).map_err(anyhow::Error::msg)?;
//! if let Some(utt) = ep.listen(source.as_mut(), &CancelToken::new(), None)? {
//!     println!("{} ms of speech", utt.duration_ms());
//! }
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod aec;
pub mod capture;
pub mod devices;
pub mod echo;
pub mod playback;
pub mod resample;
#[cfg(feature = "onnx")]
pub mod silero;
pub mod vad;
pub mod wav;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use vad::VadConfig;

use crate::choice::Entry;

/// The one sample rate of the pipeline: whisper and webrtc-vad both take
/// 16 kHz, so everything is converted once, at the source.
pub const SAMPLE_RATE: u32 = 16_000;

/// `[audio]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioConfig {
    /// Input device name (`earshot devices`), `default`, a WAV path, or
    /// `none` for a host that only listens through Wyoming satellites
    /// (`wyoming.satellites`).
    pub input: String,
    /// Output device name, `default`, or a WAV path.
    pub output: String,
    /// Channel to keep from a multi-channel array (reSpeaker arrays: 0 is
    /// the processed beam).
    pub channel: usize,
    /// Listen only while the button is held (push-to-talk).
    pub push_to_talk: bool,
    /// Let the user's voice (VAD) interrupt the answer. A button press
    /// always does. Off by default: without echo cancellation (the 2-mic
    /// HAT has none) the device would hear itself and stop mid-sentence.
    pub barge_in: bool,
    /// The input is already echo-cancelled (the USB Mic Array v2.0's
    /// channel 0): a word heard while the device talks is taken as the
    /// user's. Off (the HATs): while the device talks its echo is
    /// cancelled from the microphone (`audio::aec`), and a stop word or
    /// wake word heard during playback is dropped when it is mostly the
    /// device's own voice (`audio::echo`).
    pub echo_cancelled: bool,
    /// Rate to open the input at; 0 = the device's default. 16000 avoids
    /// resampling on devices that support it.
    pub input_rate: u32,
    /// Channels to open the input with; 0 = the device's default (the
    /// reSpeaker 6-mic array reports 8, the 4-mic 6).
    pub input_channels: u16,
    /// Lock-free ring buffer between the audio callback and the reader,
    /// in milliseconds of device audio. Overflow drops samples and counts
    /// an overrun instead of blocking the callback.
    pub ring_ms: u32,
    /// The capture period asked of the device, in ms (0 = the driver's
    /// default). Audio reaches the endpointer a period at a time, so the
    /// period is added to the end of every utterance: ALSA's defaults can be
    /// hundreds of ms. Clamped to what the device supports.
    pub period_ms: u32,
    /// `[audio.vad]`: endpointing.
    pub vad: VadConfig,
}

impl Default for AudioConfig {
    fn default() -> Self {
        Self {
            input: "default".into(),
            output: "default".into(),
            channel: 0,
            push_to_talk: false,
            barge_in: false,
            echo_cancelled: false,
            input_rate: 0,
            input_channels: 0,
            ring_ms: 2000,
            period_ms: 20,
            vad: VadConfig::default(),
        }
    }
}

/// Why audio could not be had. Callers branch on it (the loop speaks
/// `user_sentence()` and keeps running; `Ended` is the normal end of a file).
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// No input device by that name (or none at all).
    #[error("no audio input device {0:?}; run `earshot devices` and set audio.input to one of the names listed")]
    NoDevice(String),
    /// The device refused every configuration we asked for.
    #[error("input device {device:?} refused {what}; set audio.input_rate / audio.input_channels to a value `earshot devices` lists")]
    Unsupported { device: String, what: String },
    /// The device went away (unplugged, driver error) while capturing.
    #[error("input device {0:?} stopped delivering audio (disconnected?); check the cable or pick another device")]
    DeviceGone(String),
    /// Configured channel does not exist on the device.
    #[error("audio.channel = {channel} but device {device:?} has only {channels} channel(s); use 0..{channels}")]
    NoSuchChannel {
        device: String,
        channel: usize,
        channels: u16,
    },
    /// A WAV file that cannot be read.
    #[error("{path}: {reason}")]
    Wav { path: String, reason: String },
    /// A finite source (a file) has no more samples.
    #[error("end of audio input")]
    Ended,
    /// Anything else from the audio backend, already one line.
    #[error("audio backend error: {0}")]
    Backend(String),
}

impl AudioError {
    /// A sentence short enough to speak on the device.
    pub fn user_sentence(&self) -> &'static str {
        match self {
            AudioError::NoDevice(_) | AudioError::NoSuchChannel { .. } => {
                "I can't find my microphone."
            }
            AudioError::Unsupported { .. } => "My microphone doesn't support the settings I need.",
            AudioError::DeviceGone(_) => "I lost my microphone.",
            AudioError::Wav { .. } => "I couldn't read that audio file.",
            AudioError::Ended => "That's the end of the audio.",
            AudioError::Backend(_) => "Something went wrong with the microphone.",
        }
    }
}

/// A stream of 16 kHz mono samples the voice loop pulls from.
///
/// Live sources block up to `timeout` for audio (so the caller can check
/// cancellation between reads); finite sources return
/// [`AudioError::Ended`] once drained.
pub trait AudioSource: Send {
    /// Fill the front of `out` with up to `out.len()` samples; return how
    /// many were written (0 = nothing arrived within `timeout`).
    fn read(&mut self, out: &mut [i16], timeout: Duration) -> Result<usize, AudioError>;
    /// Drop whatever is buffered (e.g. our own voice after speaking).
    fn flush(&mut self);
    /// Samples the device produced that had to be dropped because the
    /// reader was too slow (callback never blocks).
    fn overruns(&self) -> u64;
    /// A name for logs and `--json` output.
    fn describe(&self) -> String;
    /// False for a recording (a WAV input): it holds no sound that happens
    /// while the device answers, so the loop does not read (and drop) it
    /// then, and every utterance in it gets its turn.
    fn is_live(&self) -> bool {
        true
    }
}

/// The audio input name table (`audio.input`): what `earshot devices`
/// and `doctor` show next to the device list.
pub const INPUTS: &[Entry] = &[
    Entry {
        name: "default",
        aliases: &[],
        form: "default",
        summary: "the system's default capture device (ALSA through cpal)",
    },
    Entry {
        name: "device",
        aliases: &[],
        form: "<device name>",
        summary: "a device `earshot devices` lists (hw:1,0, plughw:CARD=seeed2micvoicec, alsa:…)",
    },
    Entry {
        name: "file",
        aliases: &["wav"],
        form: "PATH.wav",
        summary: "a WAV file, read once to its end (tests, replays)",
    },
    Entry {
        name: "none",
        aliases: &[],
        form: "none",
        summary: "no local microphone: only Wyoming satellites listen (wyoming.satellites)",
    },
];

/// The audio output name table (`audio.output`).
pub const OUTPUTS: &[Entry] = &[
    Entry {
        name: "default",
        aliases: &[],
        form: "default",
        summary: "the system's default playback device (ALSA through rodio/cpal)",
    },
    Entry {
        name: "device",
        aliases: &[],
        form: "<device name>",
        summary: "a device `earshot devices` lists",
    },
    Entry {
        name: "file",
        aliases: &["wav"],
        form: "PATH.wav",
        summary: "every answer appended to a WAV file (tests)",
    },
    Entry {
        name: "paced",
        aliases: &[],
        form: "paced:PATH.wav",
        summary: "a WAV file written in real time, as a sound card plays (latency tests)",
    },
];

/// Which [`INPUTS`] / [`OUTPUTS`] entry a configured value is (`device`
/// for a name that is none of the others).
pub fn kind_of(value: &str, output: bool) -> &'static Entry {
    let table = if output { OUTPUTS } else { INPUTS };
    let value = value.trim();
    let name = if value.is_empty() || value.eq_ignore_ascii_case("default") {
        "default"
    } else if !output && value.eq_ignore_ascii_case("none") {
        "none"
    } else if output && value.to_ascii_lowercase().starts_with("paced:") {
        "paced"
    } else if is_file_name(value) {
        "file"
    } else {
        "device"
    };
    table.iter().find(|e| e.name == name).unwrap_or(&table[0])
}

/// Open an input by its config name: a path ending in `.wav` (or an
/// existing file) is read as a file; anything else is a cpal device name
/// (`default`, `alsa:hw:1,0`, or a bare ALSA PCM name such as `hw:1,0`).
pub fn open_input(name: &str, cfg: &AudioConfig) -> Result<Box<dyn AudioSource>, AudioError> {
    if is_file_name(name) {
        let src = wav::WavSource::open(Path::new(name))?;
        return Ok(Box::new(src));
    }
    Ok(Box::new(capture::CpalSource::open(name, cfg)?))
}

/// True when an `input`/`output` value names a file rather than a device.
pub fn is_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".wav") || lower.starts_with("file:") || Path::new(name).is_file()
}

/// Mean power of `samples` in dB relative to full scale (silence ≈ -120).
pub fn level_db(samples: &[i16]) -> f32 {
    let power = samples
        .iter()
        .map(|&s| (f32::from(s) / 32768.0).powi(2))
        .sum::<f32>()
        / samples.len().max(1) as f32;
    10.0 * (power + 1e-12).log10()
}

/// `i16` samples to whisper's `f32` in [-1, 1).
pub fn to_f32(samples: &[i16]) -> Vec<f32> {
    samples.iter().map(|&s| f32::from(s) / 32768.0).collect()
}

/// `f32` samples to `i16`, clipping out-of-range values.
pub fn to_i16(samples: &[f32]) -> Vec<i16> {
    samples.iter().map(|&s| f32_to_i16(s)).collect()
}

/// One `f32` sample to `i16`, saturating (NaN → 0).
#[inline]
pub fn f32_to_i16(s: f32) -> i16 {
    if s.is_nan() {
        return 0;
    }
    (s * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_and_output_value_has_a_table_kind() {
        assert_eq!(kind_of("default", false).name, "default");
        assert_eq!(kind_of("", true).name, "default");
        assert_eq!(kind_of("none", false).name, "none");
        assert_eq!(kind_of("/tmp/x.WAV", false).name, "file");
        assert_eq!(kind_of("paced:/tmp/out.wav", true).name, "paced");
        assert_eq!(kind_of("/tmp/out.wav", true).name, "file");
        assert_eq!(kind_of("plughw:CARD=seeed2micvoicec", false).name, "device");
        // `none` is an input choice only; as an output it is a device name.
        assert_eq!(kind_of("none", true).name, "device");
    }
}
