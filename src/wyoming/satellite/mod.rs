//! The satellite host: `earshot run` drives every satellite in
//! `wyoming.satellites` beside (or instead of) the local microphone.
//!
//! A satellite (wyoming-satellite on a Pi Zero, an ESP32 board) is a
//! Wyoming *server*; earshot connects to it as Home Assistant would, sends
//! `run-satellite`, hears its microphone, runs the turn and sends the
//! spoken answer back. [`session`] is one connection's event flow,
//! `worker` one request's STT, turn and speech on its own thread,
//! [`speech`] the answer's audio back.
//!
//! Each satellite has its own thread, connection, endpointer, speaker and
//! conversation, so a slow, dead or reconnecting satellite never stalls
//! another one or the local loop. What they share holds no lock across
//! network I/O: the [`Stt`] (whisper's state is behind a mutex, so
//! transcriptions from several satellites take turns, each a second or
//! so) and one TTS chain ([`speech::SharedTts`], synthesis serialised,
//! the clip sent after the lock is released). Writes to a satellite carry
//! a timeout (`wyoming.request_timeout_ms`): one that stops reading is
//! dropped and reconnected rather than blocking its session forever.
//!
//! Timers ring through each satellite's own speaker: every session has its
//! own [`crate::voice_loop::ring::Ringer`] (from the factory given to
//! [`SatelliteHosts::start`]) and sends a round (chime + label, as answer
//! audio) whenever it is listening and no request is being heard.
//!
//! A satellite that can't be reached, hangs up or breaks the protocol is
//! retried after `wyoming.reconnect_min_ms`, doubling up to
//! `wyoming.reconnect_max_ms`; the wait starts over once a satellite has
//! streamed audio (or stayed connected that long), so one that accepts and
//! hangs up at once (another host owns it) never makes a tight loop. Each
//! change is one log line: `connected`, `lost: REASON; retrying in N ms`,
//! `cannot connect: REASON; retrying in N ms`.

pub mod session;
pub mod speech;
mod worker;

use std::net::TcpStream;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::agent::Services;
use crate::audio::vad::VadConfig;
use crate::cancel::CancelToken;
use crate::stt::Stt;
use crate::tts::Tts;
use crate::voice_loop::ring::RingerFactory;
use crate::wyoming_proto::client::{dial, Connection, DialError, WyomingUri};
use crate::wyoming_proto::WyomingConfig;

pub use speech::SharedTts;

/// `audio.input` / `--input` value for a host without a local microphone
/// (only satellites listen).
pub const NO_INPUT: &str = "none";

/// True when `audio.input` says there is no local microphone.
pub fn is_no_input(name: &str) -> bool {
    name.trim().eq_ignore_ascii_case(NO_INPUT)
}

/// Why a satellite could not be driven, or why its connection ended. The
/// host logs it (`cannot connect: …` / `lost: …`) and reconnects after its
/// backoff; only [`SatelliteError::BadUri`] and [`SatelliteError::Local`]
/// from [`SatelliteHosts::start`] stop `earshot run` from starting.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SatelliteError {
    /// An entry of `wyoming.satellites` is not a Wyoming URI.
    #[error("wyoming.satellites: {0}")]
    BadUri(String),
    /// The satellite could not be reached (name not resolved, refused,
    /// timed out) or its socket not set up.
    #[error("{0}")]
    Connect(String),
    /// The satellite broke the protocol: a malformed frame, or audio in a
    /// format earshot cannot decode.
    #[error("{0}")]
    Protocol(String),
    /// The satellite hung up.
    #[error("the satellite closed the connection")]
    Closed,
    /// A write to the satellite failed (it stopped reading within the
    /// write timeout, or the connection dropped); `what` is what was sent.
    #[error("cannot send {what}: {reason}")]
    Send { what: String, reason: String },
    /// Earshot's own side could not be set up (a thread, the speaker,
    /// the `audio.vad` settings).
    #[error("{0}")]
    Local(String),
}

impl SatelliteError {
    /// A failed write of `what` (an event kind, "answer audio").
    pub fn send(what: &str, e: impl std::fmt::Display) -> SatelliteError {
        SatelliteError::Send {
            what: what.to_string(),
            reason: e.to_string(),
        }
    }
}

/// The running satellite threads.
pub struct SatelliteHosts {
    threads: Vec<JoinHandle<()>>,
}

impl SatelliteHosts {
    /// Start one thread per `wyoming.satellites` entry (none configured:
    /// nothing starts). They run until `shutdown` is cancelled.
    /// The satellites' TTS chain is built here (once, shared by all).
    ///
    /// `tts` builds the satellites' voice chain (called only when one is
    /// configured); `vad` endpoints their microphones (`audio.vad`);
    /// `ring` makes each session's timer ringer (`None`: no timers).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        services: &Services,
        stt: &Stt,
        tts: &dyn Fn() -> Tts,
        cfg: &WyomingConfig,
        vad: &VadConfig,
        shutdown: &CancelToken,
        json: bool,
        ring: Option<RingerFactory>,
    ) -> Result<SatelliteHosts, SatelliteError> {
        let cfg = cfg.clone();
        let mut threads = Vec::new();
        if cfg.satellites.is_empty() {
            return Ok(SatelliteHosts { threads });
        }
        let tts = SharedTts::new(tts());
        for raw in &cfg.satellites {
            let uri = WyomingUri::parse(raw).map_err(|e| SatelliteError::BadUri(e.to_string()))?;
            let host = Host {
                label: uri.to_string(),
                uri,
                cfg: cfg.clone(),
                vad: vad.clone(),
                services: services.clone(),
                stt: stt.clone(),
                tts: tts.clone(),
                shutdown: shutdown.clone(),
                json,
                ring: ring.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("satellite {}", host.label))
                .spawn(move || host.run())
                .map_err(|e| {
                    SatelliteError::Local(format!("cannot start a satellite thread: {e}"))
                })?;
            threads.push(thread);
        }
        tracing::info!(count = threads.len(), "satellite hosts started");
        Ok(SatelliteHosts { threads })
    }

    /// How many satellites are driven.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Wait for every satellite thread to finish (after the shutdown token
    /// was cancelled): each sends `pause-satellite` and hangs up.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// One satellite's reconnecting driver.
struct Host {
    label: String,
    uri: WyomingUri,
    cfg: WyomingConfig,
    vad: VadConfig,
    services: Services,
    stt: Stt,
    tts: SharedTts,
    shutdown: CancelToken,
    json: bool,
    ring: Option<RingerFactory>,
}

impl Host {
    fn run(self) {
        let min = Duration::from_millis(self.cfg.reconnect_min_ms.max(1));
        let max = Duration::from_millis(self.cfg.reconnect_max_ms).max(min);
        let mut backoff = min;
        let mut conversation: Option<i64> = None;
        while !self.shutdown.is_cancelled() {
            match self.connect() {
                Ok(conn) => {
                    tracing::info!("satellite {}: connected", self.label);
                    let up = Instant::now();
                    let mut ctx = session::Ctx {
                        label: &self.label,
                        services: &self.services,
                        vad: &self.vad,
                        stt: &self.stt,
                        tts: &self.tts,
                        shutdown: &self.shutdown,
                        conversation: &mut conversation,
                        json: self.json,
                        ring: self.ring.as_ref(),
                    };
                    match session::run(&mut ctx, conn) {
                        session::End::Shutdown => {
                            tracing::info!("satellite {}: disconnected (stopping)", self.label);
                            return;
                        }
                        session::End::Lost { reason, healthy } => {
                            if healthy || up.elapsed() >= max {
                                backoff = min;
                            }
                            tracing::warn!(
                                "satellite {}: lost: {reason}; retrying in {} ms",
                                self.label,
                                backoff.as_millis()
                            );
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        "satellite {}: cannot connect: {e}; retrying in {} ms",
                        self.label,
                        backoff.as_millis()
                    );
                }
            }
            if !wait(&self.shutdown, backoff) {
                break;
            }
            backoff = (backoff * 2).min(max);
        }
        tracing::debug!("satellite {}: stopped", self.label);
    }

    /// Connect with `connect_timeout_ms`; writes time out after
    /// `request_timeout_ms` (a satellite that stops reading).
    fn connect(&self) -> Result<Connection, SatelliteError> {
        let timeout = Duration::from_millis(self.cfg.connect_timeout_ms.max(1));
        let write_timeout = Duration::from_millis(self.cfg.request_timeout_ms.max(1));
        let stream = dial(&self.uri, timeout).map_err(|e| {
            SatelliteError::Connect(match e {
                DialError::Resolve(m) => m,
                DialError::Connect(e) => e.to_string(),
            })
        })?;
        stream
            .set_write_timeout(Some(write_timeout))
            .map_err(|e| SatelliteError::Connect(format!("cannot set a write timeout: {e}")))?;
        bound_send_buffer(&stream);
        Connection::from_stream(stream, self.cfg.limits())
            .map_err(|e| SatelliteError::Connect(format!("cannot use the connection: {e}")))
    }
}

/// Bytes of unsent answer audio the kernel may hold for one satellite
/// (it doubles the figure for bookkeeping): about a second of 22 kHz
/// speech. A healthy satellite reads as fast as we write; one that stops
/// reading fills this and makes the next write wait for the write timeout
/// instead of Linux growing the buffer to megabytes and hiding the stall.
const SEND_BUFFER_BYTES: libc::c_int = 32 * 1024;

#[cfg(unix)]
fn bound_send_buffer(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let size = SEND_BUFFER_BYTES;
    // SAFETY: setsockopt on a socket we own, with a pointer to a live
    // c_int and its exact length.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "cannot bound the satellite send buffer: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(not(unix))]
fn bound_send_buffer(_stream: &TcpStream) {}

/// How [`run_without_microphone`] ended.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// Always `signal` (there is no input to end).
    pub reason: String,
}

/// `earshot run` with `audio.input = "none"`: no local loop, only the
/// satellites; feed `tick` (the systemd watchdog) until a signal.
pub fn run_without_microphone(shutdown: &CancelToken, tick: &mut dyn FnMut()) -> Stopped {
    tracing::info!("no local microphone (audio.input = \"none\"): only satellites listen");
    while wait(shutdown, Duration::from_millis(100)) {
        tick();
    }
    Stopped {
        reason: "signal".into(),
    }
}

/// Sleep `d` unless shutdown comes first; false when it did.
fn wait(shutdown: &CancelToken, d: Duration) -> bool {
    let until = Instant::now() + d;
    loop {
        if shutdown.is_cancelled() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_means_no_local_microphone() {
        assert!(is_no_input("none"));
        assert!(is_no_input(" None "));
        assert!(!is_no_input("default"));
        assert!(!is_no_input("none.wav"));
    }

    #[test]
    fn waiting_ends_early_on_shutdown() {
        let stop = CancelToken::new();
        assert!(wait(&stop, Duration::from_millis(10)));
        stop.cancel();
        let t = Instant::now();
        assert!(!wait(&stop, Duration::from_secs(30)));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
