//! Audio events (`audio-start`, `audio-chunk`, `audio-stop`) and the PCM
//! conversions between peers' formats and earshot's 16 kHz mono.

use serde_json::json;

use super::protocol::Event;

/// The PCM format an audio event declares (`rate`, `width` in bytes,
/// `channels`); samples are little-endian and interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioFormat {
    pub rate: u32,
    pub width: u16,
    pub channels: u16,
}

impl AudioFormat {
    /// 16 kHz, 16-bit, mono: what earshot hears and what most Wyoming
    /// satellites and ASR services speak.
    pub const EARSHOT: AudioFormat = AudioFormat {
        rate: 16_000,
        width: 2,
        channels: 1,
    };

    /// The format an audio event declares, checked: widths other than 1, 2
    /// or 4 bytes, 0 channels or a rate outside 1 kHz–192 kHz are refused
    /// with a sentence naming the field.
    pub fn from_event(event: &Event) -> Result<AudioFormat, String> {
        let get = |k: &str| {
            event
                .u64(k)
                .ok_or_else(|| format!("{} has no numeric '{k}'", event.kind))
        };
        let rate = get("rate")?;
        let width = get("width")?;
        let channels = get("channels")?;
        if !(1000..=192_000).contains(&rate) {
            return Err(format!("{} rate {rate} Hz is not supported", event.kind));
        }
        if !matches!(width, 1 | 2 | 4) {
            return Err(format!(
                "{} width {width} bytes is not supported (1, 2 or 4)",
                event.kind
            ));
        }
        if !(1..=16).contains(&channels) {
            return Err(format!(
                "{} channels {channels} is not supported",
                event.kind
            ));
        }
        Ok(AudioFormat {
            rate: rate as u32,
            width: width as u16,
            channels: channels as u16,
        })
    }

    fn fields(&self) -> serde_json::Value {
        json!({"rate": self.rate, "width": self.width, "channels": self.channels})
    }

    /// Bytes in one frame (one sample of every channel).
    pub fn frame_bytes(&self) -> usize {
        usize::from(self.width) * usize::from(self.channels)
    }
}

/// `audio-start` for a stream in `format` (`timestamp` in ms, as peers send).
pub fn audio_start(format: AudioFormat, timestamp_ms: Option<u64>) -> Event {
    let mut e = Event::with_data("audio-start", format.fields());
    if let Some(t) = timestamp_ms {
        e.data.insert("timestamp".into(), t.into());
    }
    e
}

/// `audio-chunk` carrying 16-bit mono samples at `rate`.
pub fn audio_chunk_i16(rate: u32, samples: &[i16], timestamp_ms: Option<u64>) -> Event {
    let format = AudioFormat {
        rate,
        width: 2,
        channels: 1,
    };
    let mut payload = Vec::with_capacity(samples.len() * 2);
    for s in samples {
        payload.extend_from_slice(&s.to_le_bytes());
    }
    let mut e = Event::with_data("audio-chunk", format.fields()).payload(payload);
    if let Some(t) = timestamp_ms {
        e.data.insert("timestamp".into(), t.into());
    }
    e
}

/// `audio-stop`.
pub fn audio_stop(timestamp_ms: Option<u64>) -> Event {
    match timestamp_ms {
        Some(t) => Event::with_data("audio-stop", json!({"timestamp": t})),
        None => Event::new("audio-stop"),
    }
}

/// Decode a chunk's payload to mono `f32` in [-1, 1] at the chunk's own
/// rate (channels averaged). A trailing partial frame is dropped.
pub fn decode_mono_f32(format: AudioFormat, payload: &[u8]) -> Vec<f32> {
    let frame = format.frame_bytes();
    if frame == 0 {
        return Vec::new();
    }
    let width = usize::from(format.width);
    let channels = usize::from(format.channels);
    payload
        .chunks_exact(frame)
        .map(|f| {
            let sum: f32 = f.chunks_exact(width).map(sample_f32).sum();
            sum / channels as f32
        })
        .collect()
}

fn sample_f32(b: &[u8]) -> f32 {
    match b.len() {
        1 => (f32::from(b[0]) - 128.0) / 128.0,
        2 => f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0,
        4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32 / 2_147_483_648.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_round_trips_16_bit_mono_and_declares_its_format() {
        let e = audio_chunk_i16(16000, &[0, 1000, -1000, i16::MAX], Some(40));
        assert_eq!(e.kind, "audio-chunk");
        assert_eq!(e.u64("timestamp"), Some(40));
        let f = AudioFormat::from_event(&e).unwrap();
        assert_eq!(f, AudioFormat::EARSHOT);
        assert_eq!(e.payload.as_ref().unwrap().len(), 8);
        let back = decode_mono_f32(f, e.payload.as_ref().unwrap());
        assert_eq!(back.len(), 4);
        assert!((back[1] - 1000.0 / 32768.0).abs() < 1e-6);
        assert!((back[2] + 1000.0 / 32768.0).abs() < 1e-6);
    }

    #[test]
    fn decodes_stereo_8_and_32_bit_and_drops_a_partial_frame() {
        let stereo = AudioFormat {
            rate: 22050,
            width: 2,
            channels: 2,
        };
        // L=16384, R=0 → 0.25; then one dangling byte.
        let mut p = Vec::new();
        p.extend_from_slice(&16384i16.to_le_bytes());
        p.extend_from_slice(&0i16.to_le_bytes());
        p.push(9);
        assert_eq!(decode_mono_f32(stereo, &p), vec![0.25]);
        let u8fmt = AudioFormat {
            rate: 8000,
            width: 1,
            channels: 1,
        };
        assert_eq!(decode_mono_f32(u8fmt, &[128, 0]), vec![0.0, -1.0]);
        let i32fmt = AudioFormat {
            rate: 8000,
            width: 4,
            channels: 1,
        };
        let v = decode_mono_f32(i32fmt, &(1i32 << 30).to_le_bytes());
        assert!((v[0] - 0.5).abs() < 1e-6);
    }

    #[test]
    fn refuses_formats_it_cannot_decode_naming_the_field() {
        let bad = |d: serde_json::Value| {
            AudioFormat::from_event(&Event::with_data("audio-start", d)).unwrap_err()
        };
        assert!(bad(json!({"rate": 16000, "width": 3, "channels": 1})).contains("width"));
        assert!(bad(json!({"rate": 0, "width": 2, "channels": 1})).contains("rate"));
        assert!(bad(json!({"rate": 16000, "width": 2, "channels": 0})).contains("channels"));
        assert!(bad(json!({"rate": 16000, "width": 2})).contains("'channels'"));
        assert!(bad(json!({"rate": "16000", "width": 2, "channels": 1})).contains("'rate'"));
    }
}
