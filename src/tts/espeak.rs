//! espeak-ng, run as a separate program (it is GPL-3; earshot never links
//! it): its own robotic voice as the last-resort engine, and the phonemes
//! (IPA) that Piper's voices are trained on.
//!
//! Text goes in on stdin, never as an argument, so a sentence that starts
//! with `-` can't be taken for an option.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{Synthesizer, TtsConfig, TtsError};
use crate::audio::playback::Clip;

/// Longest an espeak-ng run may take before we give up on it.
const TIMEOUT: Duration = Duration::from_secs(10);

/// espeak-ng's own voice.
pub struct Espeak {
    program: String,
    voice: String,
    speed: u32,
}

impl Espeak {
    /// Check that the program runs now, so a missing package is reported at
    /// start with the fix, not on the first answer.
    pub fn new(cfg: &TtsConfig) -> Result<Self> {
        check_program(&cfg.espeak_program)?;
        Ok(Self {
            program: cfg.espeak_program.clone(),
            voice: cfg.espeak_voice.clone(),
            speed: cfg.espeak_speed.clamp(80, 450),
        })
    }
}

impl Synthesizer for Espeak {
    fn name(&self) -> &'static str {
        "espeak"
    }

    fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
        let speed = self.speed.to_string();
        let wav = run(
            &self.program,
            &["-v", &self.voice, "-s", &speed, "--stdout"],
            text,
        )?;
        parse_wav(&wav)
            .map_err(|e| TtsError::Failed(format!("espeak-ng wrote an unreadable WAV: {e}")))
    }
}

/// The program cannot be started: not installed (with the fix), or not
/// runnable.
fn cannot_start(program: &str, e: &std::io::Error) -> TtsError {
    TtsError::EngineUnavailable(match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the program '{program}' is not installed; install it with `apt-get install espeak-ng`"
        ),
        _ => format!("cannot run '{program}': {e}"),
    })
}

/// Fail with the fix when the program is not installed.
pub fn check_program(program: &str) -> Result<(), TtsError> {
    match Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) => Err(cannot_start(program, &e)),
    }
}

/// IPA phonemes for `text` from `espeak-ng -q --ipa -v VOICE`, one string
/// per clause as espeak-ng splits them (it drops the punctuation).
pub fn phonemize(program: &str, voice: &str, text: &str) -> Result<Vec<String>, TtsError> {
    let out = run(program, &["-q", "--ipa", "-v", voice], text)?;
    let out = String::from_utf8_lossy(&out);
    Ok(out
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// Run `program args`, feed `input` on stdin, return stdout; fail on a
/// non-zero exit or after [`TIMEOUT`].
pub fn run(program: &str, args: &[&str], input: &str) -> Result<Vec<u8>, TtsError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| cannot_start(program, &e))?;
    // Write stdin from a thread so a large output can't deadlock us.
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| TtsError::Failed(format!("no stdin for {program}")))?;
    let text = input.replace(['\r', '\n'], " ");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
        let _ = stdin.write_all(b"\n");
    });
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| TtsError::Failed(format!("no stdout for {program}")))?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| TtsError::Failed(e.to_string()))?
        {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TtsError::Timeout(format!(
                "{program} took longer than {} s; gave up",
                TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let _ = writer.join();
    let out = reader
        .join()
        .map_err(|_| TtsError::Failed(format!("reading {program}'s output failed")))?;
    if !status.success() {
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut err);
        }
        return Err(TtsError::Failed(format!(
            "{program} failed ({status}): {}",
            err.lines().next().unwrap_or("no message")
        )));
    }
    Ok(out)
}

/// Why bytes are not a WAV this module can read (one line; the caller
/// says whose bytes they were).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct WavError(String);

/// Parse a 16-bit PCM WAV as espeak-ng writes it to a pipe: its sizes are
/// placeholders (it can't seek back), so the data runs to the end.
pub fn parse_wav(bytes: &[u8]) -> Result<Clip, WavError> {
    let bail = |why: String| Err(WavError(why));
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return bail(format!("not a WAV file ({} bytes)", bytes.len()));
    }
    let mut pos = 12;
    let mut rate = 0u32;
    let mut channels = 0u16;
    let mut bits = 0u16;
    let mut format = 0u16;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let size = u32::from_le_bytes([
            bytes[pos + 4],
            bytes[pos + 5],
            bytes[pos + 6],
            bytes[pos + 7],
        ]) as usize;
        let body = pos + 8;
        if id == b"fmt " {
            if body + 16 > bytes.len() {
                return bail("WAV format chunk is truncated".into());
            }
            format = u16::from_le_bytes([bytes[body], bytes[body + 1]]);
            channels = u16::from_le_bytes([bytes[body + 2], bytes[body + 3]]);
            rate = u32::from_le_bytes([
                bytes[body + 4],
                bytes[body + 5],
                bytes[body + 6],
                bytes[body + 7],
            ]);
            bits = u16::from_le_bytes([bytes[body + 14], bytes[body + 15]]);
        } else if id == b"data" {
            if format != 1 || bits != 16 || channels == 0 || rate == 0 {
                return bail(format!("unsupported WAV (format {format}, {bits} bits, {channels} channels, {rate} Hz); expected 16-bit PCM"));
            }
            let end = body.saturating_add(size).min(bytes.len());
            let data = &bytes[body.min(end)..end];
            let frame = usize::from(channels) * 2;
            let samples = data
                .chunks_exact(frame)
                .map(|f| {
                    // Mix down to mono.
                    let sum: f32 = f
                        .chunks_exact(2)
                        .map(|s| f32::from(i16::from_le_bytes([s[0], s[1]])) / 32768.0)
                        .sum();
                    sum / f32::from(channels)
                })
                .collect();
            return Ok(Clip::new(samples, rate));
        }
        pos = body.saturating_add(size + (size & 1));
    }
    bail("WAV has no data chunk".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speaks_with_its_own_voice() {
        let mut e = Espeak::new(&TtsConfig::default()).unwrap();
        let clip = e.synthesize("-v this starts with a dash").unwrap();
        assert_eq!(clip.sample_rate, 22_050);
        assert!(clip.seconds() > 0.8, "{} s", clip.seconds());
        let rms =
            (clip.samples.iter().map(|s| s * s).sum::<f32>() / clip.samples.len() as f32).sqrt();
        assert!(rms > 0.01, "silent: rms {rms}");
    }

    #[test]
    fn phonemes_per_clause() {
        let clauses = phonemize("espeak-ng", "en-us", "Hello there, how are you?").unwrap();
        assert_eq!(clauses.len(), 2, "{clauses:?}");
        assert!(clauses[0].contains("həlˈoʊ"), "{clauses:?}");
    }

    #[test]
    fn missing_program_names_the_package() {
        let cfg = TtsConfig {
            espeak_program: "espeak-ng-not-here".into(),
            ..TtsConfig::default()
        };
        let err = Espeak::new(&cfg).err().unwrap().to_string();
        assert!(err.contains("apt-get install espeak-ng"), "{err}");
    }

    #[test]
    fn garbage_is_not_a_wav() {
        assert!(parse_wav(b"<html>oops</html>").is_err());
        assert!(parse_wav(b"RIFF\0\0\0\0WAVEfmt ").is_err());
    }
}
