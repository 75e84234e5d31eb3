//! The wake word from a Wyoming wake service (wyoming-openwakeword) in
//! front of the local microphone (`wyoming.wake_uri`, `wyoming.wake_words`).
//!
//! A [`WakeGate`] owns one background thread that keeps a connection to the
//! service: `describe` → `info` (the models it offers are logged), `detect
//! {names}`, `audio-start`, then every `audio-chunk` the voice loop feeds
//! while it waits for the wake word; `detection` events come back on a
//! channel the loop polls. The loop never blocks on it: [`WakeGate::feed`]
//! drops audio rather than wait when the thread is behind.
//!
//! **When the service is down or drops**, the thread logs one line naming
//! the URI and reconnects with backoff (`reconnect_min_ms` doubling to
//! `reconnect_max_ms`); meanwhile [`WakeGate::is_connected`] is false and
//! the voice loop listens *without* a wake word (VAD endpointing, as with
//! no wake service at all). We chose that over "button only" because many
//! devices have no button: a deaf device is worse than one that may
//! answer speech not meant for it for the minutes the service is away.
//! A connected service that stops answering our periodic `describe` within
//! `request_timeout_ms` is treated as down too (a hung service would
//! otherwise leave the device deaf).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender, TrySendError};
use serde_json::json;

use crate::audio::SAMPLE_RATE;
use crate::wyoming_proto::audio::{audio_chunk_i16, audio_start, AudioFormat};
use crate::wyoming_proto::protocol::{Event, Limits, ProtocolError};
use crate::wyoming_proto::{connect, Connection, WyomingConfig, WyomingUri};

pub use super::Detection;

/// Audio buffered for the service thread before [`WakeGate::feed`] starts
/// dropping (chunks of one microphone read, 20–100 ms each).
const QUEUE_CHUNKS: usize = 256;
/// How often an idle connection is checked with `describe`.
const PROBE_EVERY: Duration = Duration::from_secs(10);
/// How long dropping a gate waits for its thread to wind down.
const DROP_WAIT: Duration = Duration::from_millis(500);
/// A connection that lasted less than this does not reset the backoff (a
/// service that accepts and then drops at once is still down).
const STABLE_AFTER: Duration = Duration::from_secs(10);

/// What the loop sends the service thread, in order (one channel, so a
/// rearm never overtakes audio fed before it).
enum Msg {
    /// 16 kHz mono samples starting at this position (ms).
    Audio(u64, Vec<i16>),
    /// Start a fresh detection window: the service resets its state.
    Rearm(u64),
}

/// The client side of a wake-word service, shared by `earshot run`'s voice
/// loop (and tests): feed audio while waiting, poll for a detection.
pub struct WakeGate {
    uri: WyomingUri,
    audio: Option<Sender<Msg>>,
    detections: Receiver<Detection>,
    connected: Arc<AtomicBool>,
    /// Samples fed so far (the timeline of every timestamp).
    fed: u64,
    /// Detections stamped before this position are stale.
    armed_from_ms: u64,
    dropped: u64,
    thread: Option<JoinHandle<()>>,
}

impl WakeGate {
    /// The gate for `wyoming.wake_uri`, or `None` when it is empty. The
    /// service need not be up: the gate connects in the background.
    pub fn from_config(w: &WyomingConfig) -> Result<Option<WakeGate>> {
        if w.wake_uri.trim().is_empty() {
            return Ok(None);
        }
        let uri = WyomingUri::parse(&w.wake_uri).map_err(|e| anyhow!("wyoming.wake_uri: {e}"))?;
        Ok(Some(WakeGate::start(uri, w.wake_words.clone(), w)?))
    }

    /// Start the service thread for `uri`, asking for `names` (empty = the
    /// service's default models).
    pub fn start(uri: WyomingUri, names: Vec<String>, w: &WyomingConfig) -> Result<WakeGate> {
        let (audio_tx, audio_rx) = bounded(QUEUE_CHUNKS);
        let (detect_tx, detections) = unbounded();
        let connected = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            uri: uri.clone(),
            names,
            connect_timeout: Duration::from_millis(w.connect_timeout_ms.max(1)),
            request_timeout: Duration::from_millis(w.request_timeout_ms.max(1)),
            backoff_min: Duration::from_millis(w.reconnect_min_ms.max(1)),
            backoff_max: Duration::from_millis(w.reconnect_max_ms.max(w.reconnect_min_ms).max(1)),
            limits: w.limits(),
            audio: audio_rx,
            detections: detect_tx,
            connected: connected.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("wyoming-wake".into())
            .spawn(move || worker.run())?;
        Ok(WakeGate {
            uri,
            audio: Some(audio_tx),
            detections,
            connected,
            fed: 0,
            armed_from_ms: 0,
            dropped: 0,
            thread: Some(thread),
        })
    }

    /// The service's address, for logs.
    pub fn uri(&self) -> &WyomingUri {
        &self.uri
    }

    /// True while a service is connected and listening; false = the
    /// caller listens without a wake word.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// Ms of audio fed so far (the clock detection timestamps refer to).
    pub fn position_ms(&self) -> u64 {
        self.fed * 1000 / u64::from(SAMPLE_RATE)
    }

    /// Send 16 kHz mono audio to the service. Never blocks: when the
    /// service thread is behind, the audio is dropped (and counted).
    pub fn feed(&mut self, samples: &[i16]) {
        if samples.is_empty() {
            return;
        }
        let at = self.position_ms();
        self.fed += samples.len() as u64;
        let Some(tx) = &self.audio else { return };
        match tx.try_send(Msg::Audio(at, samples.to_vec())) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped += 1;
                if self.dropped.is_power_of_two() {
                    tracing::warn!(uri = %self.uri, dropped = self.dropped, "wake-word service is behind; dropping microphone audio");
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Forget earlier detections and start a fresh window (after a turn):
    /// the service resets its state on a new `audio-start`.
    pub fn rearm(&mut self) {
        self.armed_from_ms = self.position_ms();
        while self.detections.try_recv().is_ok() {}
        if let Some(tx) = &self.audio {
            // Full means the service is behind; its stale detections are
            // still filtered by timestamp.
            let _ = tx.try_send(Msg::Rearm(self.armed_from_ms));
        }
    }

    /// A detection since the last [`rearm`](Self::rearm), if one arrived.
    pub fn poll(&mut self) -> Option<Detection> {
        while let Ok(d) = self.detections.try_recv() {
            match d.timestamp_ms {
                Some(t) if t < self.armed_from_ms => {
                    tracing::debug!(name = %d.name, t, "stale wake-word detection ignored")
                }
                _ => return Some(d),
            }
        }
        None
    }

    /// Wait up to `timeout` for a detection (tests, tools).
    pub fn wait(&mut self, timeout: Duration) -> Option<Detection> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(d) = self.poll() {
                return Some(d);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            let d = self.detections.recv_timeout(left).ok()?;
            if d.timestamp_ms.is_none_or(|t| t >= self.armed_from_ms) {
                return Some(d);
            }
        }
    }
}

impl Drop for WakeGate {
    fn drop(&mut self) {
        // Closing the audio channel ends the thread (and its connection) as
        // soon as it next looks. Give it a moment for a tidy exit, but never
        // hold up shutdown on a connect or describe that is still waiting
        // for a hung service: after that the thread is left to finish alone.
        self.audio = None;
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + DROP_WAIT;
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// Why a connection ended.
enum End {
    /// The gate was dropped.
    Stop,
    /// The service went away or misbehaved (the reason, for the log).
    Lost(String),
}

struct Worker {
    uri: WyomingUri,
    names: Vec<String>,
    connect_timeout: Duration,
    request_timeout: Duration,
    backoff_min: Duration,
    backoff_max: Duration,
    limits: Limits,
    audio: Receiver<Msg>,
    detections: Sender<Detection>,
    connected: Arc<AtomicBool>,
}

impl Worker {
    fn run(self) {
        let mut wait = self.backoff_min;
        let mut down = false;
        loop {
            match self.open() {
                Ok(conn) => {
                    let since = Instant::now();
                    self.connected.store(true, Ordering::SeqCst);
                    tracing::info!(uri = %self.uri, words = ?self.names, "wake-word service connected: waiting for the wake word");
                    let end = self.serve(&conn);
                    self.connected.store(false, Ordering::SeqCst);
                    conn.close();
                    match end {
                        End::Stop => return,
                        End::Lost(reason) => {
                            if since.elapsed() >= STABLE_AFTER {
                                wait = self.backoff_min;
                            }
                            tracing::warn!(
                                "wake-word service at {} {reason}; listening without a wake word until it is back (reconnecting in {} ms)",
                                self.uri,
                                wait.as_millis()
                            );
                            down = true;
                        }
                    }
                }
                Err(reason) => {
                    if !down {
                        tracing::warn!(
                            "wake-word service at {} is unavailable ({reason}); listening without a wake word until it is back (reconnecting in {} ms)",
                            self.uri,
                            wait.as_millis()
                        );
                        down = true;
                    } else {
                        tracing::debug!(uri = %self.uri, "wake-word service still unavailable: {reason}");
                    }
                }
            }
            if !self.idle(wait) {
                return;
            }
            wait = (wait * 2).min(self.backoff_max);
        }
    }

    /// Connect, check it is a wake service, ask for the words, start audio.
    fn open(&self) -> Result<Connection, String> {
        let conn = connect(
            &self.uri,
            self.connect_timeout,
            self.request_timeout,
            self.limits,
        )?;
        conn.send(&Event::new("describe"))
            .map_err(|e| format!("describe failed: {e}"))?;
        let deadline = Instant::now() + self.request_timeout;
        let info = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match conn.recv_timeout(left) {
                Ok(Some(e)) if e.kind == "info" => break e,
                Ok(Some(_)) => {}
                Ok(None) => return Err("no answer to describe".into()),
                Err(ProtocolError::Closed) => return Err("closed the connection".into()),
                Err(e) => return Err(format!("bad answer to describe: {e}")),
            }
        };
        let offered = wake_models(&info);
        if offered.is_empty() {
            return Err("its info offers no wake-word models; is it a wake service?".into());
        }
        tracing::debug!(uri = %self.uri, models = ?offered, "wake-word models offered");
        for name in &self.names {
            let want = normalize(name);
            if !offered.iter().any(|m| normalize(m).starts_with(&want)) {
                tracing::warn!(uri = %self.uri, "wake word {name:?} is not among the service's models {offered:?}; check wyoming.wake_words");
            }
        }
        if !self.names.is_empty() {
            conn.send(&Event::with_data("detect", json!({ "names": self.names })))
                .map_err(|e| format!("detect failed: {e}"))?;
        }
        conn.send(&audio_start(AudioFormat::EARSHOT, Some(0)))
            .map_err(|e| format!("audio-start failed: {e}"))?;
        Ok(conn)
    }

    fn serve(&self, conn: &Connection) -> End {
        let mut last_probe = Instant::now();
        let mut probe: Option<Instant> = None;
        let lost = |what: &str, e: ProtocolError| {
            if e.is_closed() {
                End::Lost("closed the connection".into())
            } else {
                End::Lost(format!("{what}: {e}"))
            }
        };
        loop {
            if let Some(sent) = probe {
                if sent.elapsed() > self.request_timeout {
                    return End::Lost(format!(
                        "did not answer describe within wyoming.request_timeout_ms = {}",
                        self.request_timeout.as_millis()
                    ));
                }
            } else if last_probe.elapsed() >= PROBE_EVERY {
                if let Err(e) = conn.send(&Event::new("describe")) {
                    return lost("sending failed", e);
                }
                probe = Some(Instant::now());
                last_probe = Instant::now();
            }
            select! {
                recv(self.audio) -> msg => match msg {
                    Ok(Msg::Audio(at, samples)) => {
                        if let Err(e) = conn.send(&audio_chunk_i16(SAMPLE_RATE, &samples, Some(at))) {
                            return lost("sending audio failed", e);
                        }
                    }
                    Ok(Msg::Rearm(at)) => {
                        if let Err(e) = conn.send(&audio_start(AudioFormat::EARSHOT, Some(at))) {
                            return lost("sending failed", e);
                        }
                    }
                    Err(_) => return End::Stop,
                },
                recv(conn.events()) -> msg => match msg {
                    Ok(Ok(event)) => match event.kind.as_str() {
                        "detection" => {
                            let d = Detection {
                                name: event.str("name").unwrap_or("wake word").to_string(),
                                timestamp_ms: event.u64("timestamp"),
                            };
                            tracing::debug!(uri = %self.uri, name = %d.name, "wake word detected");
                            let _ = self.detections.send(d);
                        }
                        "info" => probe = None,
                        other => tracing::debug!(uri = %self.uri, kind = other, "ignoring event"),
                    },
                    Ok(Err(e)) => return lost("sent a bad frame", e),
                    Err(_) => return End::Lost("closed the connection".into()),
                },
                default(Duration::from_millis(500)) => {}
            }
        }
    }

    /// Wait out a backoff, discarding fed audio; false when the gate is
    /// gone.
    fn idle(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            select! {
                recv(self.audio) -> msg => if msg.is_err() { return false },
                default(left) => return true,
            }
        }
    }
}

/// Model names in an `info` event's `wake` programs.
fn wake_models(info: &Event) -> Vec<String> {
    info.data
        .get("wake")
        .and_then(|w| w.as_array())
        .into_iter()
        .flatten()
        .flat_map(|program| {
            program
                .get("models")
                .and_then(|m| m.as_array())
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("name").and_then(|n| n.as_str()))
                .map(str::to_string)
        })
        .collect()
}

/// `Hey Jarvis` / `hey-jarvis` / `hey_jarvis_v0.1` → comparable form.
fn normalize(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == ' ' || c == '-' { '_' } else { c })
        .collect()
}

impl super::WakeDetector for WakeGate {
    fn feed(&mut self, samples: &[i16]) {
        WakeGate::feed(self, samples)
    }

    fn poll(&mut self) -> Option<Detection> {
        WakeGate::poll(self)
    }

    fn rearm(&mut self) {
        WakeGate::rearm(self)
    }

    fn is_listening(&self) -> bool {
        self.is_connected()
    }

    fn position_ms(&self) -> u64 {
        WakeGate::position_ms(self)
    }

    fn describe(&self) -> String {
        format!("wyoming {}", self.uri())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wyoming_proto::protocol::{read_event, write_event};
    use std::io::BufReader;
    use std::net::TcpListener;

    fn config() -> WyomingConfig {
        WyomingConfig {
            request_timeout_ms: 2000,
            reconnect_min_ms: 50,
            reconnect_max_ms: 200,
            ..Default::default()
        }
    }

    /// A scripted wake service: answers describe, then reports a detection
    /// (stamped with the chunk's own timestamp) when a chunk's first sample
    /// is 7777, then hangs up after `serve_chunks` chunks.
    fn service(listener: TcpListener, serve_chunks: usize) -> std::thread::JoinHandle<Vec<String>> {
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut w = stream.try_clone().unwrap();
            let mut r = BufReader::new(stream);
            let mut seen = Vec::new();
            let mut chunks = 0;
            while let Ok(e) = read_event(&mut r, &Limits::default()) {
                seen.push(e.kind.clone());
                match e.kind.as_str() {
                    "describe" => write_event(
                        &mut w,
                        &Event::with_data(
                            "info",
                            json!({"wake": [{"name": "ww", "models": [{"name": "hey_jarvis_v0.1"}]}]}),
                        ),
                    )
                    .unwrap(),
                    "audio-chunk" => {
                        chunks += 1;
                        let p = e.payload.clone().unwrap();
                        if i16::from_le_bytes([p[0], p[1]]) == 7777 {
                            let mut d = Event::with_data("detection", json!({"name": "hey_jarvis_v0.1"}));
                            if let Some(t) = e.u64("timestamp") {
                                d.data.insert("timestamp".into(), t.into());
                            }
                            write_event(&mut w, &d).unwrap();
                        }
                        if chunks == serve_chunks {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            seen
        })
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn detects_ignores_stale_detections_and_reconnects_after_a_drop() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let uri = WyomingUri::parse(&format!("tcp://{}", listener.local_addr().unwrap())).unwrap();
        let first = service(listener.try_clone().unwrap(), 3);
        let mut gate = WakeGate::start(uri, vec!["hey_jarvis".into()], &config()).unwrap();
        wait_until("connected", || gate.is_connected());
        gate.feed(&[0; 1600]);
        gate.feed(&[7777; 1600]);
        let d = gate.wait(Duration::from_secs(5)).expect("detection");
        assert_eq!(d.name, "hey_jarvis_v0.1");
        assert_eq!(d.timestamp_ms, Some(100));
        // The third chunk makes the service hang up: the gate says so and
        // comes back on its own.
        gate.feed(&[0; 1600]);
        let seen = first.join().unwrap();
        assert_eq!(&seen[..3], ["describe", "detect", "audio-start"]);
        wait_until("disconnected", || !gate.is_connected());
        let second = service(listener, 2);
        wait_until("reconnected", || gate.is_connected());
        // A detection stamped before the rearm is stale.
        gate.feed(&[7777; 1600]);
        gate.rearm();
        gate.feed(&[0; 1600]);
        assert_eq!(gate.wait(Duration::from_millis(300)), None);
        let seen = second.join().unwrap();
        assert!(
            seen.iter().filter(|k| *k == "audio-start").count() >= 2,
            "{seen:?}"
        );
    }

    #[test]
    fn a_service_that_never_answers_describe_is_given_up_on_and_retried() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let uri = WyomingUri::parse(&format!("tcp://{}", listener.local_addr().unwrap())).unwrap();
        let cfg = WyomingConfig {
            request_timeout_ms: 200,
            ..config()
        };
        let gate = WakeGate::start(uri, vec![], &cfg).unwrap();
        // Accept, read the describe, say nothing; the gate must hang up and
        // come back (a second connection) without ever counting as up.
        let (first, _) = listener.accept().unwrap();
        let mut r = BufReader::new(first);
        assert_eq!(
            read_event(&mut r, &Limits::default()).unwrap().kind,
            "describe"
        );
        let (_second, _) = listener.accept().unwrap();
        assert!(!gate.is_connected());
        assert!(matches!(
            read_event(&mut r, &Limits::default()),
            Err(ProtocolError::Closed)
        ));
    }

    #[test]
    fn a_service_that_is_not_there_is_retried_and_never_blocks_feeding() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri = WyomingUri::parse(&format!("tcp://127.0.0.1:{port}")).unwrap();
        let mut gate = WakeGate::start(uri, vec![], &config()).unwrap();
        let started = Instant::now();
        for _ in 0..(QUEUE_CHUNKS * 2) {
            gate.feed(&[0; 320]);
        }
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(!gate.is_connected());
        assert_eq!(gate.poll(), None);
        let started = Instant::now();
        drop(gate);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
