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

/// Phonemes for Piper, from one espeak-ng process kept running: starting
/// the program costs ~10 ms per sentence on the way to the first answer
/// audio, its phonemes ~2 ms (issue 21). Falls back to a run per call
/// ([`phonemize`]) whenever the kept process can't be used, so speech never
/// depends on it.
pub struct Phonemes {
    program: String,
    voice: String,
    kept: std::sync::Mutex<Kept>,
}

/// The kept process and how often it died.
#[derive(Default)]
struct Kept {
    process: Option<Phonemizer>,
    /// Deaths so far: past [`MAX_RESTARTS`] (or after a start that failed:
    /// no `stdbuf` here) none is started again, and every sentence runs
    /// the program once.
    deaths: u32,
}

/// Starts of the kept process after a failure before it is given up.
const MAX_RESTARTS: u32 = 3;

impl Phonemes {
    /// Phonemes of `voice` from `program`; the kept process starts now, so
    /// the first answer doesn't pay for it.
    pub fn new(program: &str, voice: &str) -> Phonemes {
        let phonemes = Phonemes {
            program: program.to_string(),
            voice: voice.to_string(),
            kept: std::sync::Mutex::new(Kept::default()),
        };
        if let Ok(mut kept) = phonemes.kept.lock() {
            phonemes.ensure(&mut kept);
        }
        phonemes
    }

    /// IPA phonemes of `text`, one string per clause, as [`phonemize`]
    /// gives them.
    pub fn clauses(&self, text: &str) -> Result<Vec<String>, TtsError> {
        if Phonemizer::takes(text) {
            if let Ok(mut kept) = self.kept.lock() {
                self.ensure(&mut kept);
                if let Some(p) = kept.process.as_mut() {
                    match p.clauses(text) {
                        Ok(clauses) => return Ok(clauses),
                        Err(e) => {
                            tracing::debug!("the kept espeak-ng failed ({e}); running it once");
                            kept.process = None;
                            kept.deaths += 1;
                        }
                    }
                }
            }
        }
        phonemize(&self.program, &self.voice, text)
    }

    /// Whether a kept process is running (tests, `doctor`).
    pub fn is_kept(&self) -> bool {
        self.kept.lock().is_ok_and(|k| k.process.is_some())
    }

    /// Start the kept process if there is none and it may be started.
    fn ensure(&self, kept: &mut Kept) {
        if kept.process.is_some() || kept.deaths > MAX_RESTARTS {
            return;
        }
        match Phonemizer::start(&self.program, &self.voice) {
            Ok(p) => kept.process = Some(p),
            Err(e) => {
                tracing::debug!("espeak-ng is run once per sentence: {e}");
                kept.deaths = MAX_RESTARTS + 1;
            }
        }
    }

    #[cfg(test)]
    fn kill_kept(&self) {
        if let Ok(mut kept) = self.kept.lock() {
            if let Some(p) = kept.process.as_mut() {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
        }
    }
}

/// `stdbuf -oL espeak-ng -q --ipa -v VOICE`: with no text argument
/// espeak-ng reads its input a line at a time and phonemises each line on
/// its own (as a run per call does with its one line), and `stdbuf`
/// (coreutils) makes it write each result out at once instead of at exit.
/// After each sentence a line with [`SENTINEL`] is sent; its phonemes,
/// learnt at start, mark where the sentence's end.
struct Phonemizer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    /// The phonemes espeak-ng gives [`SENTINEL`].
    sentinel: String,
}

/// A word no sentence is made of (a sentence holding it runs the program
/// once instead, [`Phonemizer::takes`]).
const SENTINEL: &str = "qxqxq";
/// Longest wait for one sentence's phonemes from the kept process (they
/// take a few ms).
const KEPT_TIMEOUT: Duration = Duration::from_secs(2);
/// espeak-ng reads a line in pieces of about this many bytes; a longer
/// sentence runs the program once, so it is read whole.
const MAX_KEPT_BYTES: usize = 900;

impl Phonemizer {
    fn start(program: &str, voice: &str) -> Result<Phonemizer, TtsError> {
        let mut child = Command::new("stdbuf")
            .args(["-oL", program, "-q", "--ipa", "-v", voice])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TtsError::EngineUnavailable(format!("cannot run stdbuf: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TtsError::Failed("no pipes to espeak-ng".into()));
        };
        let (tx, lines) = std::sync::mpsc::channel();
        let reader = std::thread::Builder::new()
            .name("espeak-ng".into())
            .spawn(move || {
                use std::io::BufRead;
                let mut out = std::io::BufReader::new(stdout);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match out.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            let text = String::from_utf8_lossy(&line).trim().to_string();
                            if tx.send(text).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        if let Err(e) = reader {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TtsError::Failed(format!("cannot start a thread: {e}")));
        }
        let mut p = Phonemizer {
            child,
            stdin,
            lines,
            sentinel: String::new(),
        };
        p.send(SENTINEL)?;
        p.sentinel = p.next_line()?;
        if p.sentinel.is_empty() {
            return Err(TtsError::Failed(format!(
                "espeak-ng gave no phonemes for {SENTINEL:?}"
            )));
        }
        Ok(p)
    }

    /// Whether `text` can go through the kept process.
    fn takes(text: &str) -> bool {
        text.len() <= MAX_KEPT_BYTES && !text.to_lowercase().contains(SENTINEL)
    }

    fn clauses(&mut self, text: &str) -> Result<Vec<String>, TtsError> {
        self.send(&text.replace(['\r', '\n'], " "))?;
        self.send(SENTINEL)?;
        let mut clauses = Vec::new();
        loop {
            let line = self.next_line()?;
            if line == self.sentinel {
                return Ok(clauses);
            }
            if !line.is_empty() {
                clauses.push(line);
            }
        }
    }

    fn send(&mut self, line: &str) -> Result<(), TtsError> {
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.write_all(b"\n"))
            .and_then(|()| self.stdin.flush())
            .map_err(|e| TtsError::Failed(format!("cannot write to espeak-ng: {e}")))
    }

    fn next_line(&mut self) -> Result<String, TtsError> {
        self.lines.recv_timeout(KEPT_TIMEOUT).map_err(|e| match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => TtsError::Timeout(format!(
                "espeak-ng gave no phonemes within {} s",
                KEPT_TIMEOUT.as_secs()
            )),
            std::sync::mpsc::RecvTimeoutError::Disconnected => {
                TtsError::Failed("espeak-ng stopped".into())
            }
        })
    }
}

impl Drop for Phonemizer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

    /// Sentences of every kind the answers hold, including ones a line
    /// protocol could trip on.
    const SENTENCES: &[&str] = &[
        "Hello there, how are you?",
        "-v this starts with a dash",
        "...",
        "",
        "Timer set for 5 minutes. I'll tell you when it's done!",
        "Line one\nline two\r\nline three.",
        "Café, naïve — 42 % at 6:05 PM; 'quoted' \"too\".",
        "Say qxqxq to test the sentinel.",
    ];

    #[test]
    fn the_kept_process_gives_what_a_run_per_sentence_gives() {
        let kept = Phonemes::new("espeak-ng", "en-us");
        assert!(kept.is_kept(), "stdbuf and espeak-ng are installed here");
        for round in 0..2 {
            for text in SENTENCES {
                let once = phonemize("espeak-ng", "en-us", text).unwrap();
                assert_eq!(kept.clauses(text).unwrap(), once, "round {round}: {text:?}");
            }
        }
        assert!(kept.is_kept());
        let long = "one two three four five six seven eight nine ten, ".repeat(30);
        assert_eq!(
            kept.clauses(&long).unwrap(),
            phonemize("espeak-ng", "en-us", &long).unwrap()
        );
    }

    #[test]
    fn a_kept_process_that_died_is_replaced_and_loses_no_sentence() {
        let kept = Phonemes::new("espeak-ng", "en-us");
        let want = phonemize("espeak-ng", "en-us", "Cancelled your timer.").unwrap();
        for _ in 0..MAX_RESTARTS {
            kept.kill_kept();
            assert_eq!(kept.clauses("Cancelled your timer.").unwrap(), want);
            assert_eq!(kept.clauses("Cancelled your timer.").unwrap(), want);
            assert!(kept.is_kept(), "started again after it died");
        }
        // Killed once more than it may be started again: a run per
        // sentence from then on, still right.
        kept.kill_kept();
        assert_eq!(kept.clauses("Cancelled your timer.").unwrap(), want);
        assert!(!kept.is_kept());
        assert_eq!(kept.clauses("Cancelled your timer.").unwrap(), want);
    }

    #[test]
    fn without_the_program_the_error_names_the_package() {
        let kept = Phonemes::new("espeak-ng-not-here", "en-us");
        assert!(!kept.is_kept());
        let err = kept.clauses("Hello.").unwrap_err().to_string();
        assert!(err.contains("apt-get install espeak-ng"), "{err}");
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
