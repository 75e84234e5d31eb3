//! earshot as an ESPHome device Home Assistant adopts (`earshot esphome
//! serve`): an accept loop with one thread per connection, answering Home
//! Assistant's client (aioesphomeapi) as ESPHome firmware does.
//!
//! A connection: the Noise handshake when a key is set (else plaintext),
//! `HelloRequest` → `HelloResponse`, an optional `AuthenticationRequest`
//! (checked against `[esphome] password`), `DeviceInfoRequest` →
//! `DeviceInfoResponse` with the voice assistant feature flags, then the
//! entity list (an "Assist in progress" binary sensor beside the voice
//! assistant), states, pings, subscriptions and `DisconnectRequest`.
//!
//! Inside `earshot run` (`[esphome] serve`) a [`Voice`] handler — the
//! satellite of [`super::satellite`] — takes the voice assistant messages
//! (subscription, pipeline events, audio, announcements, timers) and
//! sends on the connection through its [`Link`]. Every connection writes
//! through one writer thread fed by a bounded channel, so any thread may
//! send without holding a lock across the network, and frames keep their
//! order (the Noise nonce counts them).
//!
//! Every failure stays inside its connection and is one log line: a frame
//! over the limits, an unknown message type, a wrong key, a message before
//! the hello, a peer silent past [`IDLE_TIMEOUT`]. Past
//! [`MAX_CONNECTIONS`] a new peer is closed at once. Off loopback the
//! server refuses to start without an encryption key ([`ServeError`]).

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use prost::Message;
use sha2::Digest;

use super::frame::FrameError;
use super::messages::{self as pb, ids};
use super::noise::{self, Codec};
use super::EsphomeConfig;
use crate::cancel::CancelToken;

/// Connections served at once; more are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 8;
/// A peer with no message for this long is closed (Home Assistant pings
/// every 20 s or so).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// A new peer must finish the handshake and hello within this long.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A write the peer does not drain within this long fails the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the accept loop looks at the stop flag.
const TICK: Duration = Duration::from_millis(50);
/// The API version earshot speaks (what aioesphomeapi 46 asks for).
pub const API_VERSION: (u32, u32) = (1, 15);
/// The ESPHome version reported in the device info (the API level the
/// messages come from).
pub const ESPHOME_VERSION: &str = "2025.11.0";
/// Voice assistant feature flags (aioesphomeapi's `VoiceAssistantFeature`).
pub mod features {
    /// The device runs a voice assistant.
    pub const VOICE_ASSISTANT: u32 = 1 << 0;
    /// It has a speaker for the answer.
    pub const SPEAKER: u32 = 1 << 1;
    /// Audio goes over the API connection (no UDP).
    pub const API_AUDIO: u32 = 1 << 2;
    /// Timer events ring on it.
    pub const TIMERS: u32 = 1 << 3;
    /// It plays announcements.
    pub const ANNOUNCE: u32 = 1 << 4;
}
/// The key of the "Assist in progress" binary sensor.
const ASSIST_KEY: u32 = 1;

/// Why the server could not start (one line naming the setting to change).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot resolve {addr}; check esphome.bind or --bind: {reason}")]
    Resolve { addr: String, reason: String },
    #[error("cannot listen on {addr} (in use, or not an address of this machine?); pick another with --bind: {reason}")]
    Listen { addr: String, reason: String },
    #[error("refusing to serve the ESPHome API on {addr} without encryption: set [esphome] encryption_key (openssl rand -base64 32) or bind to 127.0.0.1")]
    NeedsKey { addr: String },
    #[error("{0}")]
    Config(String),
}

/// Who the server says it is and what it accepts.
#[derive(Clone)]
struct Identity {
    name: String,
    mac: String,
    key: Option<[u8; 32]>,
    password: String,
}

/// A bound listener (bound before the slow model load, so a taken port
/// fails at once; peers connecting meanwhile wait in the backlog).
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    identity: Arc<Identity>,
    voice: Option<Arc<dyn Voice>>,
}

/// Frames queued for one connection's writer before a sender waits.
const OUTBOX: usize = 512;

/// What takes the voice assistant messages of every connection (the
/// satellite of `earshot run`; `earshot esphome serve` has none and
/// ignores them, as firmware without the component does).
pub trait Voice: Send + Sync {
    /// A message after the hello and the password that the connection
    /// does not answer itself; `Ok(true)` when it was taken. An error
    /// closes that connection.
    fn message(&self, link: &Arc<Link>, kind: u32, payload: &[u8]) -> Result<bool, FrameError>;
    /// The connection is gone; drop whatever refers to it.
    fn closed(&self, link: &Arc<Link>);
}

/// Why a frame could not be queued for a connection.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("the connection is closed")]
    Closed,
    #[error("the connection did not drain its frames in {} s", WRITE_TIMEOUT.as_secs())]
    Stalled,
}

/// The sending side of one connection: frames go to its writer thread
/// through a bounded channel (a stalled peer makes a sender wait at most
/// [`WRITE_TIMEOUT`], then fails).
pub struct Link {
    id: u64,
    peer: SocketAddr,
    out: Sender<(u32, Vec<u8>)>,
    closed: Arc<AtomicBool>,
    /// Frames queued and not yet written.
    unwritten: Arc<AtomicUsize>,
}

impl Link {
    /// A number unique to this connection in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Who is on the other end.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Queue one message.
    pub fn send<M: Message>(&self, kind: u32, msg: &M) -> Result<(), LinkError> {
        if self.is_closed() {
            return Err(LinkError::Closed);
        }
        self.unwritten.fetch_add(1, Ordering::SeqCst);
        let sent = match self
            .out
            .send_timeout((kind, msg.encode_to_vec()), WRITE_TIMEOUT)
        {
            Ok(()) => return Ok(()),
            Err(crossbeam_channel::SendTimeoutError::Timeout(_)) => Err(LinkError::Stalled),
            Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => Err(LinkError::Closed),
        };
        self.unwritten.fetch_sub(1, Ordering::SeqCst);
        sent
    }

    /// Queue one message without waiting (from a thread that must not,
    /// such as the voice loop's).
    pub fn try_send<M: Message>(&self, kind: u32, msg: &M) -> Result<(), LinkError> {
        if self.is_closed() {
            return Err(LinkError::Closed);
        }
        self.unwritten.fetch_add(1, Ordering::SeqCst);
        let sent = match self.out.try_send((kind, msg.encode_to_vec())) {
            Ok(()) => return Ok(()),
            Err(crossbeam_channel::TrySendError::Full(_)) => Err(LinkError::Stalled),
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => Err(LinkError::Closed),
        };
        self.unwritten.fetch_sub(1, Ordering::SeqCst);
        sent
    }

    /// Wait (at most `limit`) until every queued frame is written; false
    /// when some are not (or the connection ended first). For a last word
    /// before the process exits.
    pub fn wait_written(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if self.unwritten.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if self.is_closed() || std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// End the connection: the writer sends what is queued, then shuts
    /// the socket.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

/// Connection numbers for [`Link::id`].
static NEXT_LINK: AtomicU64 = AtomicU64::new(1);

/// The writer thread of one connection: encode (Noise counts frames, so
/// only this thread encodes) and write each queued frame; after
/// [`Link::close`] or a failed write, shut the socket so the reader ends
/// too.
fn writer(
    mut stream: TcpStream,
    codec: Arc<Codec>,
    rx: Receiver<(u32, Vec<u8>)>,
    closed: Arc<AtomicBool>,
    unwritten: Arc<AtomicUsize>,
) {
    loop {
        match rx.recv_timeout(TICK) {
            Ok((kind, payload)) => {
                let written = codec
                    .encode(kind, &payload)
                    .and_then(|bytes| stream.write_all(&bytes).map_err(FrameError::from));
                unwritten.fetch_sub(1, Ordering::SeqCst);
                if let Err(e) = written {
                    tracing::debug!("esphome: write failed: {e}");
                    closed.store(true, Ordering::SeqCst);
                    break;
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if closed.load(Ordering::SeqCst) {
                    break;
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A stable, locally administered MAC address for a device name (Home
/// Assistant keys devices by MAC).
pub fn mac_for(name: &str) -> String {
    let digest = sha2::Sha256::digest(name.as_bytes());
    let mut bytes = [0u8; 6];
    bytes.copy_from_slice(&digest[..6]);
    bytes[0] = (bytes[0] & 0xfe) | 0x02;
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Server {
    /// Bind `addr` (port 0 picks a free one). Off loopback, a config
    /// without an encryption key is refused.
    pub fn bind(addr: &str, config: &EsphomeConfig) -> Result<Server, ServeError> {
        let key = config.key().map_err(ServeError::Config)?;
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| ServeError::Resolve {
                addr: addr.into(),
                reason: e.to_string(),
            })?
            .collect();
        if key.is_none() && addrs.iter().any(|a| !a.ip().is_loopback()) {
            return Err(ServeError::NeedsKey { addr: addr.into() });
        }
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| ServeError::Listen {
            addr: addr.into(),
            reason: e.to_string(),
        })?;
        let local = listener.local_addr().map_err(|e| ServeError::Listen {
            addr: addr.into(),
            reason: e.to_string(),
        })?;
        Ok(Server {
            listener,
            addr: local,
            identity: Arc::new(Identity {
                name: config.name.clone(),
                mac: mac_for(&config.name),
                key,
                password: config.password.clone(),
            }),
            voice: None,
        })
    }

    /// Hand the voice assistant messages of every connection to `voice`
    /// (`earshot run`'s satellite).
    pub fn with_voice(mut self, voice: Arc<dyn Voice>) -> Server {
        self.voice = Some(voice);
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The name and MAC it announces itself with (mDNS).
    pub fn identity(&self) -> (&str, &str) {
        (&self.identity.name, &self.identity.mac)
    }

    /// Whether connections are encrypted.
    pub fn encrypted(&self) -> bool {
        self.identity.key.is_some()
    }

    /// Say where it listens — the stdout line tests and scripts read,
    /// `earshot: listening on esphome://ADDR:PORT (plaintext|encrypted)` —
    /// and announce it over mDNS on the bound interfaces only (none on
    /// loopback). A failure to announce is a warning: Home Assistant can
    /// still add it by address. Keep the returned announcer alive.
    pub fn announce_listening(&self) -> Option<super::mdns::Announcer> {
        use std::io::Write;
        let addr = self.local_addr();
        let how = if self.encrypted() {
            "encrypted"
        } else {
            "plaintext"
        };
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "earshot: listening on esphome://{addr} ({how})");
            let _ = out.flush();
        }
        tracing::info!("esphome: serving Home Assistant on {addr} ({how})");
        let (name, mac) = self.identity();
        super::mdns::announce(addr, name, mac).unwrap_or_else(|e| {
            tracing::warn!("esphome: not announced over mDNS: {e}");
            None
        })
    }

    /// Serve until `stop` is cancelled, calling `tick` about every 50 ms
    /// (the systemd watchdog).
    pub fn run(self, stop: &CancelToken, tick: &mut dyn FnMut()) -> std::io::Result<()> {
        self.listener.set_nonblocking(true)?;
        let live = Arc::new(AtomicUsize::new(0));
        while !stop.is_cancelled() {
            tick();
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                        tracing::warn!(
                            "esphome: {peer}: closed, already {MAX_CONNECTIONS} connections"
                        );
                        continue;
                    }
                    live.fetch_add(1, Ordering::SeqCst);
                    let identity = Arc::clone(&self.identity);
                    let voice = self.voice.clone();
                    let live = Arc::clone(&live);
                    let spawned = std::thread::Builder::new()
                        .name("esphome-conn".into())
                        .spawn(move || {
                            match serve_connection(stream, peer, &identity, voice.as_deref()) {
                                Ok(()) | Err(FrameError::Closed) => {
                                    tracing::debug!("esphome: {peer}: disconnected")
                                }
                                Err(e) => tracing::warn!("esphome: {peer}: {e}; connection closed"),
                            }
                            live.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        tracing::warn!("esphome: {peer}: no thread for it; closed");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(TICK),
                Err(e) => {
                    tracing::warn!("esphome: accept failed: {e}");
                    std::thread::sleep(TICK);
                }
            }
        }
        Ok(())
    }
}

/// One connection's state.
struct Session {
    hello: bool,
    authenticated: bool,
}

fn send<M: Message>(link: &Link, kind: u32, msg: &M) -> Result<(), FrameError> {
    link.send(kind, msg).map_err(|e| {
        FrameError::Io(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            e.to_string(),
        ))
    })
}

fn decode<M: Message + Default>(kind: u32, payload: &[u8]) -> Result<M, FrameError> {
    M::decode(payload).map_err(|e| {
        FrameError::Handshake(format!(
            "a {} that does not decode: {e}",
            ids::name(kind).unwrap_or("message")
        ))
    })
}

impl Link {
    /// A link writing to `stream` through its own writer thread.
    fn start(stream: TcpStream, codec: Arc<Codec>, peer: SocketAddr) -> std::io::Result<Arc<Link>> {
        let (tx, rx) = crossbeam_channel::bounded(OUTBOX);
        let closed = Arc::new(AtomicBool::new(false));
        let unwritten = Arc::new(AtomicUsize::new(0));
        let link = Arc::new(Link {
            id: NEXT_LINK.fetch_add(1, Ordering::SeqCst),
            peer,
            out: tx,
            closed: Arc::clone(&closed),
            unwritten: Arc::clone(&unwritten),
        });
        std::thread::Builder::new()
            .name("esphome-write".into())
            .spawn(move || writer(stream, codec, rx, closed, unwritten))?;
        Ok(link)
    }
}

fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    id: &Identity,
    voice: Option<&dyn Voice>,
) -> Result<(), FrameError> {
    stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let codec = Arc::new(match &id.key {
        Some(key) => noise::accept(&mut stream, key, &id.name, &id.mac)?,
        None => Codec::plain(),
    });
    let link = Link::start(stream.try_clone()?, Arc::clone(&codec), peer)?;
    let mut session = Session {
        hello: false,
        authenticated: id.password.is_empty(),
    };
    let result = (|| loop {
        let (kind, payload) = match codec.read(&mut stream) {
            Ok(m) => m,
            Err(_) if link.is_closed() => return Err(FrameError::Closed),
            Err(e) if e.is_timeout() => {
                return Err(FrameError::Handshake(if session.hello {
                    format!("silent for {} s", IDLE_TIMEOUT.as_secs())
                } else {
                    "no hello in time".into()
                }))
            }
            Err(e) => return Err(e),
        };
        if !handle(&link, id, &mut session, kind, &payload, voice)? {
            return Ok(());
        }
        if session.hello {
            stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
        }
    })();
    if let Some(voice) = voice {
        voice.closed(&link);
    }
    link.close();
    result
}

/// One message; `Ok(false)` ends the connection cleanly.
fn handle(
    link: &Arc<Link>,
    id: &Identity,
    session: &mut Session,
    kind: u32,
    payload: &[u8],
    voice: Option<&dyn Voice>,
) -> Result<bool, FrameError> {
    let Some(name) = ids::name(kind) else {
        return Err(FrameError::Type(u64::from(kind)));
    };
    match kind {
        ids::HELLO_REQUEST => {
            let hello: pb::HelloRequest = decode(kind, payload)?;
            tracing::info!(
                "esphome: hello from {:?} (API {}.{})",
                hello.client_info.chars().take(64).collect::<String>(),
                hello.api_version_major,
                hello.api_version_minor
            );
            session.hello = true;
            let reply = pb::HelloResponse {
                api_version_major: API_VERSION.0,
                api_version_minor: API_VERSION.1,
                server_info: format!("earshot {}", env!("CARGO_PKG_VERSION")),
                name: id.name.clone(),
            };
            send(link, ids::HELLO_RESPONSE, &reply)?;
            return Ok(true);
        }
        ids::PING_REQUEST => {
            send(link, ids::PING_RESPONSE, &pb::PingResponse::default())?;
            return Ok(true);
        }
        ids::DISCONNECT_REQUEST => {
            send(
                link,
                ids::DISCONNECT_RESPONSE,
                &pb::DisconnectResponse::default(),
            )?;
            return Ok(false);
        }
        ids::PING_RESPONSE | ids::DISCONNECT_RESPONSE => return Ok(true),
        _ => {}
    }
    if !session.hello {
        return Err(FrameError::Handshake(format!("{name} before the hello")));
    }
    if kind == ids::AUTHENTICATION_REQUEST {
        let auth: pb::AuthenticationRequest = decode(kind, payload)?;
        let ok =
            id.password.is_empty() || constant_eq(auth.password.as_bytes(), id.password.as_bytes());
        send(
            link,
            ids::AUTHENTICATION_RESPONSE,
            &pb::AuthenticationResponse {
                invalid_password: !ok,
            },
        )?;
        if !ok {
            return Err(FrameError::Handshake("wrong API password".into()));
        }
        session.authenticated = true;
        return Ok(true);
    }
    if kind == ids::DEVICE_INFO_REQUEST {
        send(link, ids::DEVICE_INFO_RESPONSE, &device_info(id))?;
        return Ok(true);
    }
    if !session.authenticated {
        return Err(FrameError::Handshake(format!(
            "{name} without the API password"
        )));
    }
    match kind {
        ids::LIST_ENTITIES_REQUEST => {
            let sensor = pb::ListEntitiesBinarySensorResponse {
                object_id: "assist_in_progress".into(),
                key: ASSIST_KEY,
                name: "Assist in progress".into(),
                device_class: "running".into(),
                icon: "mdi:account-voice".into(),
                ..Default::default()
            };
            send(link, ids::LIST_ENTITIES_BINARY_SENSOR_RESPONSE, &sensor)?;
            send(
                link,
                ids::LIST_ENTITIES_DONE_RESPONSE,
                &pb::ListEntitiesDoneResponse::default(),
            )?;
        }
        ids::SUBSCRIBE_STATES_REQUEST => {
            let state = pb::BinarySensorStateResponse {
                key: ASSIST_KEY,
                state: false,
                ..Default::default()
            };
            send(link, ids::BINARY_SENSOR_STATE_RESPONSE, &state)?;
        }
        ids::VOICE_ASSISTANT_CONFIGURATION_REQUEST => {
            let reply = pb::VoiceAssistantConfigurationResponse {
                available_wake_words: Vec::new(),
                active_wake_words: Vec::new(),
                max_active_wake_words: 1,
            };
            send(link, ids::VOICE_ASSISTANT_CONFIGURATION_RESPONSE, &reply)?;
        }
        ids::GET_TIME_RESPONSE => {}
        _ => {
            if let Some(voice) = voice {
                if voice.message(link, kind, payload)? {
                    return Ok(true);
                }
            }
            // A message ESPHome knows but this device has nothing for
            // (subscriptions to logs, services, Bluetooth …): ignored, as
            // firmware without that component does.
            tracing::debug!("esphome: ignoring {name}");
        }
    }
    Ok(true)
}

fn device_info(id: &Identity) -> pb::DeviceInfoResponse {
    #[allow(deprecated)]
    pb::DeviceInfoResponse {
        uses_password: !id.password.is_empty(),
        name: id.name.clone(),
        friendly_name: id.name.clone(),
        mac_address: id.mac.clone(),
        esphome_version: ESPHOME_VERSION.into(),
        compilation_time: String::new(),
        model: "earshot".into(),
        manufacturer: "earshot".into(),
        project_name: "earshot.voice-assistant".into(),
        project_version: env!("CARGO_PKG_VERSION").into(),
        voice_assistant_feature_flags: features::VOICE_ASSISTANT
            | features::SPEAKER
            | features::API_AUDIO
            | features::TIMERS
            | features::ANNOUNCE,
        api_encryption_supported: id.key.is_some(),
        ..Default::default()
    }
}

/// Compare secrets without an early exit.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link over a real socket pair, its writer running; the far end.
    fn linked() -> (Arc<Link>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let far = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (near, peer) = listener.accept().unwrap();
        let link = Link::start(near, Arc::new(Codec::plain()), peer).unwrap();
        (link, far)
    }

    #[test]
    fn frames_from_many_threads_arrive_whole_and_a_close_ends_after_them() {
        let (link, mut far) = linked();
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let link = Arc::clone(&link);
                std::thread::spawn(move || {
                    for i in 0..50u32 {
                        let ping = pb::VoiceAssistantResponse {
                            port: t * 1000 + i,
                            error: false,
                        };
                        link.send(ids::VOICE_ASSISTANT_RESPONSE, &ping).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(link.wait_written(Duration::from_secs(5)));
        link.close();
        far.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let codec = Codec::plain();
        let mut last = [None::<u32>; 4];
        for _ in 0..200 {
            let (kind, payload) = codec.read(&mut far).unwrap();
            assert_eq!(kind, ids::VOICE_ASSISTANT_RESPONSE);
            let port = pb::VoiceAssistantResponse::decode(payload.as_slice())
                .unwrap()
                .port;
            // Each sender's frames keep their order.
            let (t, i) = ((port / 1000) as usize, port % 1000);
            assert!(
                last[t].is_none_or(|prev| prev < i),
                "{port} after {:?}",
                last[t]
            );
            last[t] = Some(i);
        }
        // Then the writer shuts the socket: the far end reads the end.
        assert!(matches!(codec.read(&mut far), Err(FrameError::Closed)));
        assert!(matches!(
            link.send(ids::PING_REQUEST, &pb::PingRequest::default()),
            Err(LinkError::Closed)
        ));
    }

    #[test]
    fn macs_are_stable_local_and_distinct() {
        let a = mac_for("kitchen");
        assert_eq!(a, mac_for("kitchen"));
        assert_ne!(a, mac_for("hall"));
        assert_eq!(a.len(), 17);
        let first = u8::from_str_radix(&a[..2], 16).unwrap();
        assert_eq!(first & 0x03, 0x02, "locally administered unicast: {a}");
    }

    #[test]
    fn off_loopback_needs_a_key_and_loopback_does_not() {
        let config = EsphomeConfig::default();
        let err = Server::bind("0.0.0.0:0", &config).err().unwrap();
        assert!(matches!(err, ServeError::NeedsKey { .. }), "{err}");
        assert!(err.to_string().contains("encryption_key"));
        assert!(Server::bind("127.0.0.1:0", &config).is_ok());
    }
}
