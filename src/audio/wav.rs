//! WAV files in and out: any PCM/float WAV is converted to the pipeline's
//! 16 kHz mono on read, so `earshot transcribe`, `--input file.wav` and the
//! tests all see exactly what a microphone would deliver.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use super::{resample, AudioError, AudioSource, SAMPLE_RATE};

/// Longest file we read into memory (10 minutes at the source rate).
const MAX_SECONDS: u64 = 600;

/// What would work, ending every error about a file's content: the
/// message names the file and the problem, then this.
pub const CONVERT_HINT: &str = "give a 16-bit PCM WAV, e.g. `ffmpeg -i in -ar 16000 -ac 1 out.wav`";

/// What a WAV file held before conversion (for `--json` and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavInfo {
    pub channels: u16,
    pub sample_rate: u32,
    pub bits_per_sample: u16,
    pub float: bool,
}

fn err(path: &Path, reason: impl Into<String>) -> AudioError {
    AudioError::Wav {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// Read a WAV file as 16 kHz mono `f32`: channels are averaged, or only
/// `channel` is kept when given (multi-channel array recordings).
pub fn read_16k_mono(
    path: &Path,
    channel: Option<usize>,
) -> Result<(Vec<f32>, WavInfo), AudioError> {
    let file = std::fs::File::open(path).map_err(|e| {
        err(
            path,
            format!("cannot open it ({e}); check the path and that earshot may read it"),
        )
    })?;
    read_from(std::io::BufReader::new(file), path, channel)
}

/// As [`read_16k_mono`] from any reader (`path` only names it in errors).
pub fn read_from<R: Read>(
    reader: R,
    path: &Path,
    channel: Option<usize>,
) -> Result<(Vec<f32>, WavInfo), AudioError> {
    let wav = hound::WavReader::new(reader).map_err(|e| err(path, describe_hound(&e)))?;
    let spec = wav.spec();
    let info = WavInfo {
        channels: spec.channels,
        sample_rate: spec.sample_rate,
        bits_per_sample: spec.bits_per_sample,
        float: spec.sample_format == hound::SampleFormat::Float,
    };
    if spec.channels == 0 || spec.sample_rate == 0 {
        return Err(err(
            path,
            format!("malformed WAV (the header says 0 channels or 0 Hz); {CONVERT_HINT}"),
        ));
    }
    if let Some(ch) = channel {
        if ch >= usize::from(spec.channels) {
            return Err(err(
                path,
                format!(
                    "channel {ch} requested but the file has {} channel(s); pick one of 0..{}",
                    spec.channels,
                    spec.channels.saturating_sub(1)
                ),
            ));
        }
    }
    let frames = u64::from(wav.duration());
    if frames > MAX_SECONDS * u64::from(spec.sample_rate) {
        return Err(err(
            path,
            format!("longer than {MAX_SECONDS} s; cut it into shorter files, e.g. `ffmpeg -i in -f segment -segment_time 300 -ar 16000 -ac 1 out%03d.wav`"),
        ));
    }
    let interleaved = read_samples(wav, &info).map_err(|reason| err(path, reason))?;
    let chans = usize::from(spec.channels);
    let mono: Vec<f32> = interleaved
        .chunks_exact(chans)
        .map(|frame| match channel {
            Some(ch) => frame[ch],
            None => frame.iter().sum::<f32>() / chans as f32,
        })
        .collect();
    let out = resample::to_16k(&mono, spec.sample_rate)
        .map_err(|e| err(path, format!("cannot resample it ({e}); {CONVERT_HINT}")))?;
    Ok((out, info))
}

/// All samples as `f32` in [-1, 1], whatever the stored format.
fn read_samples<R: Read>(mut wav: hound::WavReader<R>, info: &WavInfo) -> Result<Vec<f32>, String> {
    let truncated = |e: hound::Error| match e {
        hound::Error::IoError(_) => {
            format!("truncated WAV: the data chunk ends early; re-export the file ({CONVERT_HINT})")
        }
        other => describe_hound(&other),
    };
    if info.float {
        return wav
            .samples::<f32>()
            .collect::<Result<Vec<_>, _>>()
            .map_err(truncated);
    }
    let bits = u32::from(info.bits_per_sample);
    if !(1..=32).contains(&bits) {
        return Err(format!("unsupported {bits}-bit samples; {CONVERT_HINT}"));
    }
    let scale = 1.0 / (1u64 << (bits - 1)) as f32;
    wav.samples::<i32>()
        .map(|s| s.map(|v| v as f32 * scale))
        .collect::<Result<Vec<_>, _>>()
        .map_err(truncated)
}

/// hound's errors, as a sentence naming what is wrong and what would work
/// (the caller prefixes the file).
fn describe_hound(e: &hound::Error) -> String {
    match e {
        hound::Error::FormatError(msg) if msg.contains("RIFF") || msg.contains("WAVE") => {
            format!("not a WAV file (no RIFF/WAVE header); {CONVERT_HINT}")
        }
        hound::Error::FormatError(msg) => format!("malformed WAV ({msg}); {CONVERT_HINT}"),
        hound::Error::Unsupported => format!(
            "unsupported WAV encoding (only PCM and float samples are read); {CONVERT_HINT}"
        ),
        hound::Error::TooWide => {
            format!("its samples are wider than 32 bits; {CONVERT_HINT}")
        }
        hound::Error::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            format!("truncated or empty WAV (the header is incomplete); {CONVERT_HINT}")
        }
        // hound's own short read ("Failed to read enough bytes."): the file
        // ends inside the header, so it is empty, cut, or not a WAV.
        hound::Error::IoError(io) if io.kind() == std::io::ErrorKind::Other => {
            let what = io.to_string();
            format!(
                "not a WAV file, or truncated ({}); {CONVERT_HINT}",
                what.trim_end_matches('.')
            )
        }
        hound::Error::IoError(io) => format!("cannot read it ({io}); {CONVERT_HINT}"),
        other => format!(
            "unreadable WAV ({}); {CONVERT_HINT}",
            other.to_string().replace('\n', " ")
        ),
    }
}

/// Write 16 kHz mono `i16` samples as a WAV (tests, `--save` of utterances,
/// the multipart body for cloud STT).
pub fn write_16k_mono(samples: &[i16]) -> Vec<u8> {
    mono_wav(samples, SAMPLE_RATE)
}

/// Mono 16-bit PCM `samples` at `sample_rate` as the bytes of a WAV file
/// (a plain 44-byte header; the ESPHome answer URLs serve these).
pub fn mono_wav(samples: &[i16], sample_rate: u32) -> Vec<u8> {
    let data_len = (samples.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + samples.len() * 2);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&sample_rate.to_le_bytes());
    out.extend_from_slice(&(sample_rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

/// A WAV file as an [`AudioSource`]: converted once at open, then served
/// in the pieces the reader asks for; [`AudioError::Ended`] at the end.
pub struct WavSource {
    name: String,
    samples: Vec<i16>,
    pos: usize,
}

impl WavSource {
    /// Open and convert `path` (a `file:` prefix is accepted).
    pub fn open(path: &Path) -> Result<Self, AudioError> {
        let path_str = path.to_string_lossy();
        let path = Path::new(path_str.strip_prefix("file:").unwrap_or(&path_str)).to_path_buf();
        let (samples, _) = read_16k_mono(&path, None)?;
        Ok(Self::from_samples(
            path.display().to_string(),
            super::to_i16(&samples),
        ))
    }

    /// A source over samples already at 16 kHz mono (tests).
    pub fn from_samples(name: String, samples: Vec<i16>) -> Self {
        Self {
            name,
            samples,
            pos: 0,
        }
    }
}

impl AudioSource for WavSource {
    fn read(&mut self, out: &mut [i16], _timeout: Duration) -> Result<usize, AudioError> {
        let left = self.samples.len() - self.pos;
        if left == 0 {
            return Err(AudioError::Ended);
        }
        let n = left.min(out.len());
        out[..n].copy_from_slice(&self.samples[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }

    fn flush(&mut self) {}

    fn overruns(&self) -> u64 {
        0
    }

    fn describe(&self) -> String {
        format!("file:{}", self.name)
    }

    fn is_live(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav_bytes(
        spec: hound::WavSpec,
        write: impl FnOnce(&mut hound::WavWriter<std::io::Cursor<&mut Vec<u8>>>),
    ) -> Vec<u8> {
        let mut buf = Vec::new();
        {
            let mut w = hound::WavWriter::new(std::io::Cursor::new(&mut buf), spec).unwrap();
            write(&mut w);
            w.finalize().unwrap();
        }
        buf
    }

    #[test]
    fn stereo_8bit_48k_becomes_16k_mono() {
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 48_000,
            bits_per_sample: 8,
            sample_format: hound::SampleFormat::Int,
        };
        let bytes = wav_bytes(spec, |w| {
            for i in 0..48_000 {
                let v = ((i as f32 / 10.0).sin() * 100.0) as i8;
                w.write_sample(v).unwrap();
                w.write_sample(v).unwrap();
            }
        });
        let (out, info) = read_from(&bytes[..], Path::new("x.wav"), None).unwrap();
        assert_eq!(info.channels, 2);
        assert_eq!(info.bits_per_sample, 8);
        assert_eq!(out.len(), 16_000);
        let peak = out.iter().fold(0f32, |m, s| m.max(s.abs()));
        assert!(peak > 0.5 && peak < 1.0, "peak {peak}");
    }

    #[test]
    fn channel_selection_keeps_one_channel() {
        let spec = hound::WavSpec {
            channels: 6,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let bytes = wav_bytes(spec, |w| {
            for _ in 0..100 {
                for ch in 0..6i16 {
                    w.write_sample(ch * 1000).unwrap();
                }
            }
        });
        let (out, _) = read_from(&bytes[..], Path::new("x.wav"), Some(3)).unwrap();
        assert!(out.iter().all(|&s| (s - 3000.0 / 32768.0).abs() < 1e-6));
        let e = read_from(&bytes[..], Path::new("x.wav"), Some(6)).unwrap_err();
        assert!(e.to_string().contains("6 channel"), "{e}");
    }

    #[test]
    fn truncated_and_garbage_are_one_line_errors() {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let bytes = wav_bytes(spec, |w| {
            for i in 0..1000 {
                w.write_sample(i as i16).unwrap();
            }
        });
        let cut = &bytes[..bytes.len() / 2];
        let e = read_from(cut, Path::new("cut.wav"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
        assert!(!e.contains('\n'));
        let e = read_from(&b"hello, not audio at all"[..], Path::new("t.txt"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a WAV"), "{e}");
        let e = read_from(&b""[..], Path::new("e.wav"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("e.wav"), "{e}");
    }

    #[test]
    fn written_wav_reads_back() {
        let samples: Vec<i16> = (0..1600).map(|i| (i * 10) as i16).collect();
        let bytes = write_16k_mono(&samples);
        let (out, info) = read_from(&bytes[..], Path::new("w.wav"), None).unwrap();
        assert_eq!(info.sample_rate, 16_000);
        assert_eq!(super::super::to_i16(&out), samples);
    }

    #[test]
    fn every_bad_file_names_itself_and_what_would_work() {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let good = wav_bytes(spec, |w| {
            for i in 0..1000 {
                w.write_sample(i as i16).unwrap();
            }
        });
        // 0 channels in an otherwise whole header.
        let mut no_channels = good.clone();
        no_channels[22] = 0;
        // A compressed format tag (0x55, MP3).
        let mut mp3 = good.clone();
        mp3[20] = 0x55;
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty.wav", Vec::new(), "Failed to read enough bytes"),
            (
                "riff-only.wav",
                b"RIFF\x24\0\0\0WAVE".to_vec(),
                "Failed to read enough bytes",
            ),
            ("text.wav", b"hello, not audio at all".to_vec(), "not a WAV"),
            ("cut.wav", good[..good.len() / 2].to_vec(), "truncated"),
            (
                "header-cut.wav",
                good[..30].to_vec(),
                "not a WAV file, or truncated",
            ),
            ("zero.wav", no_channels, "zero channels"),
            ("mp3.wav", mp3, "unsupported"),
        ];
        for (name, bytes, needle) in cases {
            let e = read_from(&bytes[..], Path::new(name), None)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("{name}: ")), "{e}");
            assert!(e.contains(needle), "{name}: {e}");
            assert!(e.contains(CONVERT_HINT), "{name}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = read_16k_mono(Path::new("/no/such/file.wav"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/no/such/file.wav: cannot open it") && e.contains("check the path"),
            "{e}"
        );
    }
}
