//! Where speech goes: a sound device through rodio, a WAV file, or a WAV
//! file written in real time (for barge-in tests).
//!
//! One small trait, [`AudioSink`], and one type per backend (the librespot
//! shape). Every sink queues clips without blocking the caller and can drop
//! everything at once with [`AudioSink::stop`] — that is barge-in.
//!
//! The rodio sink opens the device only while it has something to play and
//! closes it `DEVICE_TAIL` after its queue drains (the device's own
//! buffer still holds the end). On a Pi that costs a few milliseconds per
//! answer; in exchange an idle device never keeps a stream open, and ALSA's
//! file plugin (which is not paced in real time) never fills a disk with
//! silence between answers. Speech made in pieces reaches the device piece
//! by piece only once the device has been seen to play in real time
//! (`PieceGate`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

/// Mono audio at a sample rate: what a speech engine produces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Clip {
    /// Samples in [-1, 1].
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Clip {
    pub fn new(samples: Vec<f32>, sample_rate: u32) -> Self {
        Self {
            samples,
            sample_rate,
        }
    }

    /// Length in seconds.
    pub fn seconds(&self) -> f64 {
        if self.sample_rate == 0 {
            return 0.0;
        }
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }

    /// The same sound at another rate (linear interpolation: good enough for
    /// speech into a file; devices resample themselves).
    pub fn resampled(&self, rate: u32) -> Clip {
        if rate == self.sample_rate || self.samples.is_empty() || self.sample_rate == 0 {
            return Clip::new(self.samples.clone(), rate.max(1));
        }
        let ratio = f64::from(self.sample_rate) / f64::from(rate);
        let out_len = ((self.samples.len() as f64) / ratio).floor() as usize;
        let last = self.samples.len() - 1;
        let samples = (0..out_len)
            .map(|i| {
                let pos = i as f64 * ratio;
                let idx = (pos.floor() as usize).min(last);
                let next = (idx + 1).min(last);
                let frac = (pos - idx as f64) as f32;
                self.samples[idx] * (1.0 - frac) + self.samples[next] * frac
            })
            .collect();
        Clip::new(samples, rate)
    }

    /// Scale by a volume in [0, 1].
    pub fn with_volume(mut self, volume: f32) -> Clip {
        let v = volume.clamp(0.0, 1.0);
        if (v - 1.0).abs() > f32::EPSILON {
            for s in &mut self.samples {
                *s *= v;
            }
        }
        self
    }
}

/// A place speech is played. Implementations never block in [`play`]
/// beyond opening their output; playback continues in the background.
///
/// [`play`]: AudioSink::play
pub trait AudioSink: Send + Sync {
    /// Queue a clip after whatever is already queued.
    fn play(&self, clip: &Clip) -> Result<(), PlaybackError>;
    /// Queue one piece of a sound whose next piece is still being made
    /// (speech played while it is synthesised), up to [`end_pieces`]. A
    /// device that is not paced in real time (ALSA's file plugin) would
    /// run dry between two pieces and play silence inside a word, so the
    /// device sink holds the pieces until the sound is whole unless it has
    /// seen the device play in real time. The default plays the piece as a
    /// clip: right for outputs that never fill a gap themselves (files,
    /// satellites, the paced file).
    ///
    /// [`end_pieces`]: AudioSink::end_pieces
    fn play_piece(&self, clip: &Clip) -> Result<(), PlaybackError> {
        self.play(clip)
    }
    /// The sound given by [`play_piece`](AudioSink::play_piece) is whole:
    /// nothing more will be waited for.
    fn end_pieces(&self) {}
    /// Drop everything queued and playing, now (barge-in, "stop").
    fn stop(&self);
    /// Whether anything is still queued or sounding.
    fn is_playing(&self) -> bool;
    /// Seconds of audio actually played (or written) since the sink was
    /// made; tests count these instead of trusting wall-clock time.
    fn played_seconds(&self) -> f64;
    /// A short description for logs (`default`, `file out.wav`, …).
    fn describe(&self) -> String;
}

/// Why speech could not be played (or an output not opened). The speaker
/// logs it and keeps the answer's text; callers branch on the kind (an
/// output that is gone fails every later clip too, a satellite's broken
/// connection ends its session). Each message is one line saying what to
/// change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaybackError {
    /// There is no default sound output.
    #[error("no sound output device found; connect a speaker, or use --output FILE.wav")]
    NoDefaultDevice,
    /// No output has this name; `found` lists the ones that exist.
    #[error("no sound output called '{name}' (found: {}); see `earshot devices`", if found.is_empty() { "none".to_string() } else { found.join(", ") })]
    NoDevice { name: String, found: Vec<String> },
    /// The device exists but would not open a stream.
    #[error("could not open the sound output '{name}': {reason}; pick another with `earshot devices` or use --output FILE.wav")]
    Open { name: String, reason: String },
    /// The output went away while in use (its playback thread stopped, a
    /// satellite stopped taking audio): later clips fail too.
    #[error("{0}")]
    DeviceGone(String),
    /// The output file could not be created.
    #[error("could not create the output file {}: {reason}", path.display())]
    Create { path: PathBuf, reason: String },
    /// Writing (or finishing) the output file failed: disk full, file
    /// removed, permissions.
    #[error("could not {action} {}: {reason}", path.display())]
    Write {
        /// `write` or `finish`.
        action: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// No output could be opened or listed at all (the [`NullSink`]
    /// stand-in repeats why for every clip).
    #[error("{0}")]
    Unavailable(String),
    /// The clip cannot be played (a sample rate of 0).
    #[error("{0}")]
    BadClip(&'static str),
    /// The sink's lock was poisoned by a panic on another thread.
    #[error("{0}")]
    Poisoned(&'static str),
    /// A thread the sink needs could not be started.
    #[error("could not start the {what} thread: {reason}")]
    Thread { what: &'static str, reason: String },
}

impl PlaybackError {
    fn write(path: &Path, e: impl std::fmt::Display) -> PlaybackError {
        PlaybackError::Write {
            action: "write",
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
    }
}

/// Open the output named in the config or on the command line:
/// `default`, an ALSA/cpal device name, `FILE.wav` (written as fast as it
/// is produced) or `paced:FILE.wav` (written in real time, like a speaker).
pub fn open_output(spec: &str) -> Result<Arc<dyn AudioSink>> {
    let spec = spec.trim();
    if let Some(path) = spec.strip_prefix("paced:") {
        return Ok(Arc::new(PacedWavSink::create(Path::new(path))?));
    }
    if spec.to_ascii_lowercase().ends_with(".wav") {
        return Ok(Arc::new(WavFileSink::create(Path::new(spec))?));
    }
    Ok(Arc::new(RodioSink::new(spec)?))
}

// ---------------------------------------------------------------- none

/// Stands in for an output that could not be opened: every clip fails
/// with the reason, so each answer is logged as unspoken while the loop
/// keeps running (text answers still reach the log and `--json`).
pub struct NullSink {
    reason: String,
}

impl NullSink {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl AudioSink for NullSink {
    fn play(&self, _clip: &Clip) -> Result<(), PlaybackError> {
        Err(PlaybackError::Unavailable(self.reason.clone()))
    }
    fn stop(&self) {}
    fn is_playing(&self) -> bool {
        false
    }
    fn played_seconds(&self) -> f64 {
        0.0
    }
    fn describe(&self) -> String {
        "no output".into()
    }
}

// ---------------------------------------------------------------- rodio

enum RodioCmd {
    Play(Clip, Sender<Result<(), PlaybackError>>),
    Piece(Clip, Sender<Result<(), PlaybackError>>),
    EndPieces,
    Stop,
}

/// A sound device through rodio. The stream lives on its own thread (a cpal
/// stream need not be `Send`), which also closes it once the queue drains.
pub struct RodioSink {
    name: String,
    tx: Sender<RodioCmd>,
    /// Clips handed to rodio and not yet finished.
    queued: Arc<AtomicUsize>,
    played_micros: Arc<AtomicU64>,
}

impl RodioSink {
    /// Check that the device exists now (so a wrong name is reported at
    /// start), then start the thread that owns the stream.
    pub fn new(name: &str) -> Result<Self, PlaybackError> {
        let name = if name.is_empty() { "default" } else { name };
        find_output_device(name)?;
        let (tx, rx) = unbounded();
        let queued = Arc::new(AtomicUsize::new(0));
        let played_micros = Arc::new(AtomicU64::new(0));
        let thread_name = name.to_string();
        let q = queued.clone();
        let p = played_micros.clone();
        thread::Builder::new()
            .name("playback".into())
            .spawn(move || rodio_thread(&thread_name, &rx, &q, &p))
            .map_err(|e| PlaybackError::Thread {
                what: "playback",
                reason: e.to_string(),
            })?;
        Ok(Self {
            name: name.to_string(),
            tx,
            queued,
            played_micros,
        })
    }
}

impl RodioSink {
    fn send(
        &self,
        make: impl FnOnce(Sender<Result<(), PlaybackError>>) -> RodioCmd,
    ) -> Result<(), PlaybackError> {
        let (reply_tx, reply_rx) = bounded(1);
        self.queued.fetch_add(1, Ordering::SeqCst);
        let gone = || PlaybackError::DeviceGone("the playback thread has stopped".into());
        self.tx.send(make(reply_tx)).map_err(|_| gone())?;
        let result = reply_rx.recv().map_err(|_| gone())?;
        if result.is_err() {
            self.queued.store(0, Ordering::SeqCst);
        }
        result
    }
}

impl AudioSink for RodioSink {
    fn play(&self, clip: &Clip) -> Result<(), PlaybackError> {
        self.send(|reply| RodioCmd::Play(clip.clone(), reply))
    }

    fn play_piece(&self, clip: &Clip) -> Result<(), PlaybackError> {
        self.send(|reply| RodioCmd::Piece(clip.clone(), reply))
    }

    fn end_pieces(&self) {
        let _ = self.tx.send(RodioCmd::EndPieces);
    }

    fn stop(&self) {
        let _ = self.tx.send(RodioCmd::Stop);
        self.queued.store(0, Ordering::SeqCst);
    }

    fn is_playing(&self) -> bool {
        self.queued.load(Ordering::SeqCst) > 0
    }

    fn played_seconds(&self) -> f64 {
        self.played_micros.load(Ordering::SeqCst) as f64 / 1e6
    }

    fn describe(&self) -> String {
        format!("device {}", self.name)
    }
}

struct OpenStream {
    // Field order matters: the player must drop before the stream.
    player: rodio::Player,
    _stream: rodio::MixerDeviceSink,
    /// Seconds queued in this stream, credited as played when it drains.
    seconds: f64,
    /// When the player last ran out of sound (the stream closes
    /// [`DEVICE_TAIL`] later unless more comes).
    drained_at: Option<Instant>,
    /// When the sound now queued began to be queued: how long it took to
    /// drain says whether the device plays in real time.
    span_started: Option<Instant>,
}

/// How long a drained stream stays open: rodio has handed its last sample
/// to the device, but the device's own buffer still holds the end of the
/// answer, and closing the stream drops it (measured with ALSA's file
/// plugin: up to a whole sentence was lost when the stream closed the
/// moment the player was empty). Meanwhile the player plays silence.
const DEVICE_TAIL: Duration = Duration::from_millis(150);

/// Sounds shorter than this say nothing about the device's pace (the
/// 10 ms poll and the device buffer are a large share of them).
const PACE_MIN_SECONDS: f64 = 0.25;

impl OpenStream {
    fn append(&mut self, clip: Clip) -> Result<(), PlaybackError> {
        let rate = std::num::NonZeroU32::new(clip.sample_rate)
            .ok_or(PlaybackError::BadClip("a clip had a sample rate of 0"))?;
        self.seconds += clip.seconds();
        self.drained_at = None;
        self.span_started.get_or_insert_with(Instant::now);
        self.player.append(rodio::buffer::SamplesBuffer::new(
            std::num::NonZeroU16::MIN,
            rate,
            clip.samples,
        ));
        Ok(())
    }
}

/// When pieces of a sound ([`AudioSink::play_piece`]) reach a device. A
/// device not known to play in real time gets them whole: it would take
/// each piece at once and play silence until the next one is made, inside
/// a word (ALSA's file plugin turned "It's 3:27 PM." into "It's
/// 3.20.7 p.m."). Once a drained sound has shown the device plays in real
/// time, each piece goes out as it comes: the first sound of an answer
/// plays while the rest is made.
#[derive(Debug, Default)]
struct PieceGate {
    /// Whether the device plays in real time, as last seen.
    paced: Option<bool>,
    /// The pieces held so far of a sound not yet whole.
    held: Option<Clip>,
    /// A sound given out in pieces is still being made.
    streaming: bool,
    /// The device ran dry while a sound's pieces were still being made:
    /// the voice is slower than real time here (a slow board, a busy
    /// core), so from then on sounds are held whole, like on a device not
    /// known to be paced (one gap heard, never a second).
    starved: bool,
}

impl PieceGate {
    /// What to queue for one more piece.
    fn piece(&mut self, clip: Clip) -> Vec<Clip> {
        if self.paced == Some(true) && !self.starved {
            let mut out: Vec<Clip> = self.end().into_iter().collect();
            self.streaming = true;
            out.push(clip);
            return out;
        }
        match &mut self.held {
            Some(held) if held.sample_rate == clip.sample_rate => {
                held.samples.extend_from_slice(&clip.samples);
                Vec::new()
            }
            _ => {
                let before = self.held.replace(clip);
                before.into_iter().collect()
            }
        }
    }

    /// The sound is whole (or a whole clip comes next): what is held.
    fn end(&mut self) -> Option<Clip> {
        self.streaming = false;
        self.held.take()
    }

    /// The device has played everything it was given.
    fn drained(&mut self) {
        if self.streaming && !self.starved {
            tracing::debug!(
                "the sound output ran dry between two pieces of speech: \
                 holding each sentence whole from now on"
            );
            self.starved = true;
        }
    }

    fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// A sound of `sound_seconds` drained `took` after it began to be
    /// queued: a device that plays in real time needs most of its length.
    fn learn(&mut self, sound_seconds: f64, took: Duration) {
        if sound_seconds < PACE_MIN_SECONDS {
            return;
        }
        let paced = took.as_secs_f64() >= 0.6 * sound_seconds;
        if self.paced != Some(paced) {
            tracing::debug!(
                paced,
                took_ms = took.as_secs_f64() * 1000.0,
                sound_ms = sound_seconds * 1000.0,
                "the sound output's pace"
            );
        }
        self.paced = Some(paced);
    }
}

/// What the playback thread keeps between commands.
#[derive(Default)]
struct RodioState {
    open: Option<OpenStream>,
    gate: PieceGate,
}

impl RodioState {
    fn stream(&mut self, name: &str) -> Result<&mut OpenStream, PlaybackError> {
        match &mut self.open {
            Some(stream) => Ok(stream),
            slot => Ok(slot.insert(open_stream(name)?)),
        }
    }

    fn append_all(&mut self, name: &str, clips: Vec<Clip>) -> Result<(), PlaybackError> {
        for clip in clips {
            self.stream(name)?.append(clip)?;
        }
        Ok(())
    }

    fn play(&mut self, name: &str, clip: Clip) -> Result<(), PlaybackError> {
        let mut clips: Vec<Clip> = self.gate.end().into_iter().collect();
        clips.push(clip);
        self.append_all(name, clips)
    }

    fn piece(&mut self, name: &str, clip: Clip) -> Result<(), PlaybackError> {
        let clips = self.gate.piece(clip);
        self.append_all(name, clips)
    }

    fn end_pieces(&mut self, name: &str) -> Result<(), PlaybackError> {
        let clips = self.gate.end().into_iter().collect();
        self.append_all(name, clips)
    }

    fn stop(&mut self, played_micros: &AtomicU64) {
        self.gate.end();
        if let Some(stream) = self.open.take() {
            stream.player.stop();
            if stream.seconds > 0.0 {
                // (A drained stream's seconds were counted already.)
                let position = stream.player.get_pos().as_secs_f64();
                played_micros.fetch_add((position * 1e6) as u64, Ordering::SeqCst);
            }
        }
    }

    /// Between commands: count a drained sound as played, learn the
    /// device's pace from it, and close the stream once its tail is out.
    fn tick(&mut self, queued: &AtomicUsize, played_micros: &AtomicU64) {
        let Some(stream) = self.open.as_mut().filter(|s| s.player.empty()) else {
            return;
        };
        let now = Instant::now();
        self.gate.drained();
        if stream.seconds > 0.0 {
            if let Some(started) = stream.span_started.take() {
                self.gate.learn(stream.seconds, now.duration_since(started));
            }
            played_micros.fetch_add((stream.seconds * 1e6) as u64, Ordering::SeqCst);
            stream.seconds = 0.0;
            if !self.gate.holds() {
                queued.store(0, Ordering::SeqCst);
            }
        }
        let drained_at = *stream.drained_at.get_or_insert(now);
        if now >= drained_at + DEVICE_TAIL {
            self.open = None;
        }
    }
}

fn rodio_thread(
    name: &str,
    rx: &Receiver<RodioCmd>,
    queued: &AtomicUsize,
    played_micros: &AtomicU64,
) {
    let mut state = RodioState::default();
    loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(RodioCmd::Play(clip, reply)) => {
                let _ = reply.send(state.play(name, clip));
            }
            Ok(RodioCmd::Piece(clip, reply)) => {
                let _ = reply.send(state.piece(name, clip));
            }
            Ok(RodioCmd::EndPieces) => {
                if let Err(e) = state.end_pieces(name) {
                    tracing::error!("cannot play speech on device {name}: {e:#}");
                    queued.store(0, Ordering::SeqCst);
                }
            }
            Ok(RodioCmd::Stop) => {
                state.stop(played_micros);
                queued.store(0, Ordering::SeqCst);
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                state.tick(queued, played_micros);
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        }
    }
}

fn open_stream(name: &str) -> Result<OpenStream, PlaybackError> {
    let device = find_output_device(name)?;
    let mut stream = rodio::DeviceSinkBuilder::from_device(device)
        .and_then(|b| b.open_sink_or_fallback())
        .map_err(|e| PlaybackError::Open {
            name: name.to_string(),
            reason: e.to_string(),
        })?;
    stream.log_on_drop(false);
    let player = rodio::Player::connect_new(stream.mixer());
    Ok(OpenStream {
        player,
        _stream: stream,
        seconds: 0.0,
        drained_at: None,
        span_started: None,
    })
}

/// The cpal output device called `name` (`default` = the host's default).
pub fn find_output_device(name: &str) -> Result<cpal::Device, PlaybackError> {
    use cpal::traits::{DeviceTrait, HostTrait};
    let host = cpal::default_host();
    if name.is_empty() || name == "default" {
        return host
            .default_output_device()
            .ok_or(PlaybackError::NoDefaultDevice);
    }
    let devices = host
        .output_devices()
        .map_err(|e| PlaybackError::Unavailable(format!("could not list sound outputs: {e}")))?;
    let mut seen = Vec::new();
    for device in devices {
        let shown = device.to_string();
        let id = device.id().map(|id| id.to_string()).unwrap_or_default();
        let described = device
            .description()
            .map(|d| d.name().to_string())
            .unwrap_or_default();
        if [&shown, &id, &described].iter().any(|n| n.as_str() == name)
            || id.rsplit(':').next() == Some(name)
        {
            return Ok(device);
        }
        seen.push(shown);
    }
    Err(PlaybackError::NoDevice {
        name: name.to_string(),
        found: seen,
    })
}

// ---------------------------------------------------------------- WAV file

/// Appends every clip to a 16-bit mono WAV file as fast as it comes. The
/// header is rewritten after each clip, so the file is valid while the
/// program runs. Clips at another rate are resampled to the first one's.
pub struct WavFileSink {
    path: PathBuf,
    state: Mutex<WavState>,
    played_micros: AtomicU64,
}

struct WavState {
    writer: Option<hound::WavWriter<BufWriter<File>>>,
    rate: u32,
}

impl WavFileSink {
    /// Create (truncate) the file now, so a bad path fails at start.
    pub fn create(path: &Path) -> Result<Self, PlaybackError> {
        let file = File::create(path).map_err(|e| PlaybackError::Create {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        drop(file);
        Ok(Self {
            path: path.to_path_buf(),
            state: Mutex::new(WavState {
                writer: None,
                rate: 0,
            }),
            played_micros: AtomicU64::new(0),
        })
    }

    /// Write the header and close the file (also done on drop).
    pub fn finish(&self) -> Result<(), PlaybackError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| PlaybackError::Poisoned("the WAV writer is poisoned"))?;
        if let Some(writer) = state.writer.take() {
            writer.finalize().map_err(|e| PlaybackError::Write {
                action: "finish",
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
        } else if state.rate == 0 {
            // Nothing was played: still leave a valid (empty) WAV.
            hound::WavWriter::create(&self.path, wav_spec(22_050))
                .and_then(|writer| writer.finalize())
                .map_err(|e| PlaybackError::write(&self.path, e))?;
        }
        Ok(())
    }
}

fn wav_spec(rate: u32) -> hound::WavSpec {
    hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    }
}

fn to_i16(s: f32) -> i16 {
    (s.clamp(-1.0, 1.0) * 32767.0).round() as i16
}

fn write_samples(state: &mut WavState, path: &Path, clip: &Clip) -> Result<(), PlaybackError> {
    // The first clip sets the rate; a writer reopened after `finish`
    // keeps it.
    if state.rate == 0 {
        state.rate = clip.sample_rate.max(1);
    }
    let rate = state.rate;
    let writer = match &mut state.writer {
        Some(writer) => writer,
        slot => slot.insert(
            hound::WavWriter::create(path, wav_spec(rate))
                .map_err(|e| PlaybackError::write(path, e))?,
        ),
    };
    let clip = clip.resampled(rate);
    for s in &clip.samples {
        writer
            .write_sample(to_i16(*s))
            .map_err(|e| PlaybackError::write(path, e))?;
    }
    writer.flush().map_err(|e| PlaybackError::write(path, e))?;
    Ok(())
}

impl AudioSink for WavFileSink {
    fn play(&self, clip: &Clip) -> Result<(), PlaybackError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| PlaybackError::Poisoned("the WAV writer is poisoned"))?;
        write_samples(&mut state, &self.path, clip)?;
        self.played_micros
            .fetch_add((clip.seconds() * 1e6) as u64, Ordering::SeqCst);
        Ok(())
    }

    fn stop(&self) {}

    fn is_playing(&self) -> bool {
        false
    }

    fn played_seconds(&self) -> f64 {
        self.played_micros.load(Ordering::SeqCst) as f64 / 1e6
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

impl Drop for WavFileSink {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

// ---------------------------------------------------------------- paced

/// A WAV file written in real time, 10 ms at a time, like a speaker would
/// consume it: what has not been "played" yet when [`AudioSink::stop`] is
/// called never reaches the file. Barge-in tests count its samples.
pub struct PacedWavSink {
    path: PathBuf,
    shared: Arc<Paced>,
}

struct Paced {
    queue: Mutex<PacedQueue>,
    wake: Condvar,
    played_micros: AtomicU64,
    closed: AtomicBool,
}

#[derive(Default)]
struct PacedQueue {
    samples: VecDeque<f32>,
    rate: u32,
}

impl PacedWavSink {
    /// Create (truncate) the file now and start the thread that writes it.
    pub fn create(path: &Path) -> Result<Self, PlaybackError> {
        let shared = Arc::new(Paced {
            queue: Mutex::new(PacedQueue::default()),
            wake: Condvar::new(),
            played_micros: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        let file = WavFileSink::create(path)?;
        let worker = shared.clone();
        thread::Builder::new()
            .name("paced-output".into())
            .spawn(move || paced_thread(&worker, &file))
            .map_err(|e| PlaybackError::Thread {
                what: "paced output",
                reason: e.to_string(),
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            shared,
        })
    }
}

fn paced_thread(shared: &Paced, file: &WavFileSink) {
    let tick = Duration::from_millis(10);
    let mut next = Instant::now();
    loop {
        let chunk = {
            let Ok(mut queue) = shared.queue.lock() else {
                return;
            };
            while queue.samples.is_empty() && !shared.closed.load(Ordering::SeqCst) {
                queue = match shared.wake.wait(queue) {
                    Ok(q) => q,
                    Err(_) => return,
                };
                next = Instant::now();
            }
            if queue.samples.is_empty() {
                let _ = file.finish();
                return;
            }
            let n = (queue.rate as usize / 100).max(1).min(queue.samples.len());
            let samples: Vec<f32> = queue.samples.drain(..n).collect();
            Clip::new(samples, queue.rate)
        };
        if file.play(&chunk).is_err() {
            return;
        }
        shared
            .played_micros
            .fetch_add((chunk.seconds() * 1e6) as u64, Ordering::SeqCst);
        next += tick;
        let now = Instant::now();
        if next > now {
            thread::sleep(next - now);
        }
    }
}

impl AudioSink for PacedWavSink {
    fn play(&self, clip: &Clip) -> Result<(), PlaybackError> {
        let mut queue = self
            .shared
            .queue
            .lock()
            .map_err(|_| PlaybackError::Poisoned("the paced output is poisoned"))?;
        if queue.rate == 0 {
            queue.rate = clip.sample_rate.max(1);
        }
        let clip = clip.resampled(queue.rate);
        queue.samples.extend(clip.samples);
        self.shared.wake.notify_all();
        Ok(())
    }

    fn stop(&self) {
        if let Ok(mut queue) = self.shared.queue.lock() {
            queue.samples.clear();
        }
    }

    fn is_playing(&self) -> bool {
        self.shared
            .queue
            .lock()
            .map(|q| !q.samples.is_empty())
            .unwrap_or(false)
    }

    fn played_seconds(&self) -> f64 {
        self.shared.played_micros.load(Ordering::SeqCst) as f64 / 1e6
    }

    fn describe(&self) -> String {
        format!("paced file {}", self.path.display())
    }
}

impl Drop for PacedWavSink {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(seconds: f32, rate: u32) -> Clip {
        let n = (seconds * rate as f32) as usize;
        Clip::new(
            (0..n)
                .map(|i| (i as f32 * 440.0 * std::f32::consts::TAU / rate as f32).sin() * 0.5)
                .collect(),
            rate,
        )
    }

    #[test]
    fn pieces_are_held_whole_until_the_device_is_seen_to_play_in_real_time() {
        let mut gate = PieceGate::default();
        let (a, b, c) = (tone(0.28, 22_050), tone(1.6, 22_050), tone(0.4, 22_050));
        // Not known yet: nothing goes out until the sound is whole, then
        // all of it, in order, as one clip.
        assert!(gate.piece(a.clone()).is_empty());
        assert!(gate.piece(b.clone()).is_empty());
        assert!(gate.holds());
        let whole = gate.end().expect("the held sound");
        let expected: Vec<f32> = [&a, &b].iter().flat_map(|c| c.samples.clone()).collect();
        assert_eq!(whole, Clip::new(expected, 22_050));
        assert!(!gate.holds() && gate.end().is_none());

        // A 1.9 s sound that drained in 20 ms: not paced; still held.
        gate.learn(1.9, Duration::from_millis(20));
        assert!(gate.piece(a.clone()).is_empty());
        gate.end();

        // A sound that took its length to drain: pieces pass as they come.
        gate.learn(1.9, Duration::from_millis(1850));
        assert_eq!(gate.piece(a.clone()), vec![a.clone()]);
        assert_eq!(gate.piece(c.clone()), vec![c.clone()]);
        assert!(gate.end().is_none());

        // Too short a sound teaches nothing; a fast drain again does.
        gate.learn(0.1, Duration::ZERO);
        assert_eq!(gate.piece(a.clone()), vec![a.clone()]);
        gate.learn(2.0, Duration::from_millis(30));
        assert!(gate.piece(a.clone()).is_empty());
    }

    #[test]
    fn a_device_that_runs_dry_between_pieces_gets_whole_sounds_from_then_on() {
        let mut gate = PieceGate::default();
        let (a, b) = (tone(0.28, 22_050), tone(1.6, 22_050));
        gate.learn(1.9, Duration::from_millis(1880));
        assert_eq!(gate.piece(a.clone()), vec![a.clone()]);
        // Drained after the whole sound: no harm seen.
        assert_eq!(gate.piece(b.clone()), vec![b.clone()]);
        gate.end();
        gate.drained();
        assert_eq!(gate.piece(a.clone()), vec![a.clone()]);
        // Drained while the next piece was still being made: held from now.
        gate.drained();
        assert!(gate.piece(b.clone()).is_empty());
        assert_eq!(gate.end(), Some(b));
        assert!(gate.piece(a.clone()).is_empty());
    }

    #[test]
    fn a_held_sound_at_another_rate_goes_out_before_the_next_one_is_held() {
        let mut gate = PieceGate::default();
        let (a, b) = (tone(0.3, 22_050), tone(0.3, 16_000));
        assert!(gate.piece(a.clone()).is_empty());
        assert_eq!(gate.piece(b.clone()), vec![a]);
        assert_eq!(gate.end(), Some(b));
    }

    #[test]
    fn wav_sink_appends_and_resamples_to_the_first_rate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.wav");
        let sink = WavFileSink::create(&path).unwrap();
        sink.play(&tone(0.5, 22_050)).unwrap();
        sink.play(&tone(0.5, 44_100)).unwrap();
        // Valid while still open (header rewritten after each clip).
        let reader = hound::WavReader::open(&path).unwrap();
        assert_eq!(reader.spec().sample_rate, 22_050);
        assert_eq!(reader.len(), 22_050);
        assert!((sink.played_seconds() - 1.0).abs() < 0.01);
    }

    #[test]
    fn paced_sink_plays_in_real_time_and_stop_drops_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paced.wav");
        let sink = PacedWavSink::create(&path).unwrap();
        let started = Instant::now();
        sink.play(&tone(2.0, 16_000)).unwrap();
        assert!(sink.is_playing());
        while sink.played_seconds() < 0.3 {
            thread::sleep(Duration::from_millis(5));
        }
        let elapsed = started.elapsed().as_secs_f64();
        assert!(elapsed >= 0.25, "0.3 s played in {elapsed:.3} s: not paced");
        sink.stop();
        assert!(!sink.is_playing());
        let at_stop = sink.played_seconds();
        thread::sleep(Duration::from_millis(100));
        assert!(sink.played_seconds() - at_stop <= 0.011);
        drop(sink);
        thread::sleep(Duration::from_millis(50));
        let reader = hound::WavReader::open(&path).unwrap();
        let secs = reader.len() as f64 / 16_000.0;
        assert!(secs < 0.5, "{secs} s written after a stop at ~0.3 s");
    }

    #[test]
    fn resample_keeps_duration() {
        let clip = tone(1.0, 22_050).resampled(48_000);
        assert_eq!(clip.sample_rate, 48_000);
        assert!((clip.seconds() - 1.0).abs() < 0.001);
    }

    #[test]
    fn unknown_device_names_what_exists() {
        let err = find_output_device("no-such-card-xyz").unwrap_err();
        assert!(
            matches!(&err, PlaybackError::NoDevice { name, .. } if name == "no-such-card-xyz"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("no-such-card-xyz"), "{err}");
    }
}
