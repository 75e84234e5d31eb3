//! Audio in and out: cpal capture, VAD endpointing, rodio playback, WAV.

use serde::{Deserialize, Serialize};

/// `[audio]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioConfig {
    /// Input device name (`earshot devices`), `default`, or a WAV path.
    pub input: String,
    /// Output device name, `default`, or a WAV path.
    pub output: String,
    /// Channel to keep from a multi-channel array (reSpeaker 4-mic: 0).
    pub channel: usize,
    /// Listen only while the button is held (push-to-talk).
    pub push_to_talk: bool,
    /// Let a press (or speech, with VAD) interrupt the answer.
    pub barge_in: bool,
}

impl Default for AudioConfig {
    fn default() -> Self {
        Self {
            input: "default".into(),
            output: "default".into(),
            channel: 0,
            push_to_talk: false,
            barge_in: true,
        }
    }
}
