//! A Wyoming TCP server: an accept loop with one thread per connection.
//!
//! The server knows framing, limits and lifetimes; what a connection does
//! with its events is a [`Handler`]'s business (`earshot wyoming serve`
//! plugs in [`super::service::Service`]). Every failure stays inside its
//! connection:
//! - a peer that sends a malformed frame (bad JSON, a length over the
//!   limits, a header line that never ends, a stream cut inside a frame)
//!   gets an `error` event `{text, code: "bad-frame"}` (when its socket
//!   still takes it), one warn log line, and is disconnected;
//! - a peer counts against the caps only once it has sent one whole event:
//!   until then it is *pending*, and a pending peer with no complete event
//!   within [`FIRST_EVENT_TIMEOUT`] is closed. Pending peers are bounded
//!   too (the oldest is closed to make room), so connections that send
//!   half an event and stall never lock out a real client (Wyoming has no
//!   authentication);
//! - past `max_connections` (or [`Server::max_per_address`] from one
//!   address) a new peer gets `error {code: "busy"}` and is closed, with a
//!   warn line naming the cap, so a flood cannot exhaust threads or memory;
//! - a peer silent for [`IDLE_TIMEOUT`] is closed, and writes time out
//!   after [`WRITE_TIMEOUT`] so a peer that stops reading cannot wedge a
//!   thread.
//!
//! Stopping (SIGTERM) stops accepting at once; connections finish the
//! request they are in (a transcription, a turn) and the events the peer
//! had already sent, then close; [`Server::run`] waits for them up to
//! the drain time ([`DRAIN_TIMEOUT`] unless [`Server::drain`] says).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cancel::CancelToken;
use crate::wyoming_proto::protocol::{Event, Limits, ProtocolError};
use crate::wyoming_proto::{Connection, EventWriter, WyomingUri};

/// A connection with no event for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// A new connection with no complete event for this long is closed.
pub const FIRST_EVENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Established connections one address may hold by default.
pub const MAX_PER_ADDRESS: usize = 8;
/// A write the peer does not drain within this long fails the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// On stop, how long in-flight requests get to finish by default (under
/// the 30 s `TimeoutStopSec` of earshot's systemd units).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// How often idle loops look at the stop flag.
const TICK: Duration = Duration::from_millis(100);
/// On stop, a connection outside a request closes after this long
/// without an event (long enough for what the peer sent just before the
/// signal to be read on a busy machine).
const QUIET_ON_STOP: Duration = Duration::from_secs(1);

/// What a connection does after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading events.
    Continue,
    /// The handler has said its last word (e.g. an `error`): hang up.
    Close,
}

/// The per-connection behaviour of a server.
pub trait Handler: Send + Sync + 'static {
    /// State kept for one connection (its conversation, an audio stream
    /// being received, a text stream being spoken).
    type Session: Send;

    /// A peer connected.
    fn open(&self, peer: SocketAddr) -> Self::Session;

    /// Whether the session is in the middle of a request whose rest the
    /// peer is still sending (an utterance before its `audio-stop`): on
    /// shutdown the connection then waits for it instead of closing after
    /// a quiet moment. Default: never.
    fn in_request(&self, _session: &Self::Session) -> bool {
        false
    }

    /// One well-formed event from the peer; replies go to `out`. A write
    /// error means the peer is gone and ends the connection.
    fn event(
        &self,
        session: &mut Self::Session,
        event: Event,
        out: &EventWriter,
    ) -> Result<Flow, ProtocolError>;
}

/// Why the server could not start listening (`earshot wyoming serve`
/// exits with the message, which names the setting to change).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServeError {
    #[error("cannot resolve {uri}; check wyoming.serve_uri or --uri: {reason}")]
    Resolve { uri: String, reason: String },
    /// The port is taken, or the address is not this machine's.
    #[error("cannot listen on {uri} (in use, or not an address of this machine?); pick another with --uri: {reason}")]
    Listen { uri: String, reason: String },
    #[error("cannot read the listening address: {0}")]
    LocalAddr(String),
}

/// `error` event as the `wyoming` library defines it (`text`, `code`).
pub fn error_event(text: &str, code: &str) -> Event {
    Event::with_data("error", json!({"text": text, "code": code}))
}

/// A bound listener with its limits. Binding is separate from
/// [`Server::run`] so a taken port is reported before the (slow) model
/// load; peers connecting meanwhile wait in the listen backlog.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    limits: Limits,
    max_connections: usize,
    max_per_address: usize,
    max_pending: usize,
    first_event_timeout: Duration,
    drain: Duration,
}

impl Server {
    /// Bind `uri` (port 0 picks a free port; see [`Server::local_addr`]).
    pub fn bind(
        uri: &WyomingUri,
        limits: Limits,
        max_connections: usize,
    ) -> Result<Server, ServeError> {
        let authority = uri.authority();
        let addrs: Vec<SocketAddr> = authority
            .to_socket_addrs()
            .map_err(|e| ServeError::Resolve {
                uri: uri.to_string(),
                reason: e.to_string(),
            })?
            .collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| ServeError::Listen {
            uri: uri.to_string(),
            reason: e.to_string(),
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| ServeError::LocalAddr(e.to_string()))?;
        Ok(Server {
            listener,
            addr,
            limits,
            max_connections: max_connections.max(1),
            max_per_address: MAX_PER_ADDRESS.min(max_connections.max(1)),
            max_pending: (max_connections.max(1) * 4).max(64),
            first_event_timeout: FIRST_EVENT_TIMEOUT,
            drain: DRAIN_TIMEOUT,
        })
    }

    /// Most established connections one address may hold (a flood from
    /// one host cannot take every slot).
    pub fn max_per_address(mut self, cap: usize) -> Server {
        self.max_per_address = cap.max(1);
        self
    }

    /// How long a new connection has to send its first whole event.
    pub fn first_event_timeout(mut self, timeout: Duration) -> Server {
        self.first_event_timeout = timeout;
        self
    }

    /// Most connections waiting for their first event; past it the oldest
    /// of them is closed.
    pub fn max_pending(mut self, cap: usize) -> Server {
        self.max_pending = cap.max(1);
        self
    }

    /// How long in-flight requests get after a stop before [`Server::run`]
    /// returns anyway.
    pub fn drain(mut self, drain: Duration) -> Server {
        self.drain = drain;
        self
    }

    /// The address actually bound (the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve every connection with `handler` until `stop` is cancelled,
    /// calling `tick`
    /// about every 100 ms (the systemd watchdog). Then wait for in-flight
    /// connections up to the drain time.
    ///
    /// A thread blocks in `accept` (a new peer is served at once, no
    /// polling delay) and hands connections over a channel; on stop a
    /// connection to ourselves wakes it so it can end.
    pub fn run<H: Handler>(&self, handler: Arc<H>, stop: &CancelToken, tick: &mut dyn FnMut()) {
        let active = Arc::new(Slots::default());
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        // Unbounded: the acceptor never blocks on us, even while we stop; the
        // cap is enforced in `admit`, which is quick.
        let (tx, rx) = crossbeam_channel::unbounded::<(TcpStream, SocketAddr)>();
        let acceptor = match self.listener.try_clone() {
            Ok(listener) => {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name("wyoming-accept".into())
                    .spawn(move || accept_loop(&listener, &stop, &tx))
                    .map_err(|e| tracing::error!("wyoming: cannot start the accept thread: {e}"))
                    .ok()
            }
            Err(e) => {
                tracing::error!("wyoming: cannot share the listening socket: {e}");
                None
            }
        };
        while !stop.is_cancelled() {
            tick();
            threads.retain(|t| !t.is_finished());
            match rx.recv_timeout(TICK) {
                Ok((stream, peer)) => {
                    self.admit(&handler, stream, peer, &active, stop, &mut threads)
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    tracing::error!("wyoming: the accept thread ended; stopping");
                    break;
                }
            }
        }
        if let Some(acceptor) = acceptor {
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
                let _ = acceptor.join();
            }
        }
        // Peers whose connection the kernel completed before the stop may
        // already have sent a request: serve them too (the waker among
        // them just closes), then stop for good.
        let _ = self.listener.set_nonblocking(true);
        while let Ok((stream, peer)) = rx.try_recv() {
            self.admit(&handler, stream, peer, &active, stop, &mut threads);
        }
        while let Ok((stream, peer)) = self.listener.accept() {
            self.admit(&handler, stream, peer, &active, stop, &mut threads);
        }
        let deadline = Instant::now() + self.drain;
        threads.retain(|t| !t.is_finished());
        if !threads.is_empty() {
            tracing::info!(
                connections = threads.len(),
                "wyoming: waiting for open connections to finish"
            );
        }
        while !threads.is_empty() && Instant::now() < deadline {
            threads.retain(|t| !t.is_finished());
            std::thread::sleep(TICK / 2);
        }
        if !threads.is_empty() {
            tracing::warn!(
                connections = threads.len(),
                "wyoming: connections still busy after {} s; exiting anyway",
                self.drain.as_secs()
            );
        }
    }

    fn admit<H: Handler>(
        &self,
        handler: &Arc<H>,
        stream: TcpStream,
        peer: SocketAddr,
        active: &Arc<Slots>,
        stop: &CancelToken,
        threads: &mut Vec<JoinHandle<()>>,
    ) {
        // Blocking I/O whatever the listener's mode (it turns non-blocking
        // for the final drain on stop).
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let _ = stream.set_nodelay(true);
        let now = active.open.load(Ordering::SeqCst);
        if now >= self.max_connections {
            tracing::warn!(
                %peer,
                "wyoming: refused a connection: {now} already open (the cap is {}; raise it with --max-connections)",
                self.max_connections
            );
            refuse(stream, self.max_connections);
            return;
        }
        let handle = stream.try_clone().ok();
        let conn = match Connection::from_stream(stream, self.limits) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(%peer, "wyoming: cannot set up a connection: {e}");
                return;
            }
        };
        let pending_id = handle.map(|h| active.add_pending(h, peer, self.max_pending));
        let admission = Admission {
            slots: active.clone(),
            pending_id,
            peer,
            max_connections: self.max_connections,
            max_per_address: self.max_per_address,
            first_event_timeout: self.first_event_timeout,
        };
        let handler = handler.clone();
        let stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("wyoming {peer}"))
            .spawn(move || {
                serve_connection(&*handler, &conn, admission, &stop);
                conn.close();
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => tracing::warn!(%peer, "wyoming: cannot start a connection thread: {e}"),
        }
    }
}

/// Block in `accept` until stopped, handing each peer to the server loop.
fn accept_loop(
    listener: &TcpListener,
    stop: &CancelToken,
    tx: &crossbeam_channel::Sender<(TcpStream, SocketAddr)>,
) {
    loop {
        match listener.accept() {
            Ok(pair) => {
                if tx.send(pair).is_err() || stop.is_cancelled() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                if stop.is_cancelled() {
                    return;
                }
                // EMFILE and friends: log, back off, keep serving.
                tracing::warn!("wyoming: accept failed: {e}");
                std::thread::sleep(TICK);
            }
        }
    }
}

/// The server's connection accounting: established connections (in total
/// and per address) and the pending ones, which have not sent a whole
/// event yet and count against nothing but their own bound.
#[derive(Default)]
struct Slots {
    open: AtomicUsize,
    per_address: Mutex<HashMap<IpAddr, usize>>,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    next_id: u64,
    /// Oldest first: (id, a handle to shut the socket, the peer).
    conns: VecDeque<(u64, TcpStream, SocketAddr)>,
}

impl Slots {
    /// Register a pending connection; past `cap` the oldest pending one is
    /// shut (its thread then sees the close and ends).
    fn add_pending(&self, handle: TcpStream, peer: SocketAddr, cap: usize) -> u64 {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let id = pending.next_id;
        pending.next_id += 1;
        pending.conns.push_back((id, handle, peer));
        while pending.conns.len() > cap {
            if let Some((_, oldest, who)) = pending.conns.pop_front() {
                tracing::warn!(peer = %who, "wyoming: closing a connection that sent no whole event ({cap} such connections are open)");
                let _ = oldest.shutdown(std::net::Shutdown::Both);
            }
        }
        id
    }

    fn remove_pending(&self, id: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.conns.retain(|(i, _, _)| *i != id);
    }

    /// Take an established slot for `ip`, or say which cap is full.
    fn establish(&self, ip: IpAddr, max: usize, max_per_address: usize) -> Result<(), String> {
        let mut per = self.per_address.lock().unwrap_or_else(|p| p.into_inner());
        let from_here = per.get(&ip).copied().unwrap_or(0);
        if from_here >= max_per_address {
            return Err(format!(
                "{from_here} connections from {ip} are open (the per-address cap is {max_per_address})"
            ));
        }
        let open = self.open.fetch_add(1, Ordering::SeqCst);
        if open >= max {
            self.open.fetch_sub(1, Ordering::SeqCst);
            return Err(format!(
                "{open} connections are open (the cap is {max}; raise it with --max-connections)"
            ));
        }
        *per.entry(ip).or_insert(0) += 1;
        Ok(())
    }

    fn release(&self, ip: IpAddr) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        let mut per = self.per_address.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = per.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per.remove(&ip);
            }
        }
    }
}

/// One connection's way from pending to established.
struct Admission {
    slots: Arc<Slots>,
    pending_id: Option<u64>,
    peer: SocketAddr,
    max_connections: usize,
    max_per_address: usize,
    first_event_timeout: Duration,
}

impl Admission {
    /// The first whole event arrived: leave the pending pool and take a
    /// slot; `Err` names the full cap.
    fn establish(&mut self) -> Result<Established, String> {
        if let Some(id) = self.pending_id.take() {
            self.slots.remove_pending(id);
        }
        self.slots
            .establish(self.peer.ip(), self.max_connections, self.max_per_address)?;
        Ok(Established {
            slots: self.slots.clone(),
            ip: self.peer.ip(),
        })
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(id) = self.pending_id.take() {
            self.slots.remove_pending(id);
        }
    }
}

/// Holds an established slot; releases it however the thread ends.
struct Established {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Drop for Established {
    fn drop(&mut self) {
        self.slots.release(self.ip);
    }
}

fn refuse(stream: TcpStream, cap: usize) {
    let mut s = stream;
    let _ = crate::wyoming_proto::protocol::write_event(
        &mut s,
        &error_event(
            &format!("earshot is serving its maximum of {cap} connections; try again shortly"),
            "busy",
        ),
    );
    let _ = s.shutdown(std::net::Shutdown::Both);
}

/// One connection's event loop.
fn serve_connection<H: Handler>(
    handler: &H,
    conn: &Connection,
    mut admission: Admission,
    stop: &CancelToken,
) {
    let peer = admission.peer;
    tracing::debug!(%peer, "wyoming: connected");
    let out = conn.writer();
    let mut session = handler.open(peer);
    let opened = Instant::now();
    let mut last_event = Instant::now();
    let mut established: Option<Established> = None;
    loop {
        if established.is_none() && opened.elapsed() >= admission.first_event_timeout {
            tracing::info!(
                %peer,
                "wyoming: closing a connection that sent no whole event within {} ms",
                admission.first_event_timeout.as_millis()
            );
            return;
        }
        // On shutdown, finish what the peer has already sent (the end of an
        // utterance, a transcript to handle): close once it has been
        // quiet for [`QUIET_ON_STOP`].
        let stopping = stop.is_cancelled();
        let wait = if stopping { QUIET_ON_STOP } else { TICK };
        match conn.recv_timeout(wait) {
            Ok(None) if stopping && !handler.in_request(&session) => {
                tracing::debug!(%peer, "wyoming: closing on shutdown");
                return;
            }
            Ok(None) => {
                if last_event.elapsed() >= IDLE_TIMEOUT {
                    tracing::info!(
                        %peer,
                        "wyoming: closing a connection idle for {} s",
                        IDLE_TIMEOUT.as_secs()
                    );
                    return;
                }
            }
            Ok(Some(event)) => {
                last_event = Instant::now();
                if established.is_none() {
                    match admission.establish() {
                        Ok(slot) => established = Some(slot),
                        Err(why) => {
                            tracing::warn!(%peer, "wyoming: refused a connection: {why}");
                            let _ = out.send(&error_event(
                                "earshot is serving its maximum of connections; try again shortly",
                                "busy",
                            ));
                            return;
                        }
                    }
                }
                let kind = event.kind.clone();
                match handler.event(&mut session, event, &out) {
                    Ok(Flow::Continue) => {}
                    Ok(Flow::Close) => return,
                    Err(e) => {
                        tracing::debug!(%peer, "wyoming: peer went away during '{kind}': {e}");
                        return;
                    }
                }
            }
            Err(e) if e.is_closed() => {
                tracing::debug!(%peer, "wyoming: disconnected");
                return;
            }
            Err(e @ ProtocolError::Io(_)) => {
                tracing::debug!(%peer, "wyoming: connection error: {e}");
                return;
            }
            Err(e) => {
                tracing::warn!(%peer, "wyoming: malformed frame, disconnecting: {e}");
                let _ = out.send(&error_event(
                    &format!("malformed Wyoming frame: {e}; closing the connection"),
                    "bad-frame",
                ));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::Mutex;

    /// Echoes `ping` as `pong` and records every event kind it saw.
    struct Echo {
        seen: Mutex<Vec<String>>,
    }

    impl Handler for Echo {
        type Session = ();
        fn open(&self, _peer: SocketAddr) {}
        fn event(
            &self,
            _s: &mut (),
            event: Event,
            out: &EventWriter,
        ) -> Result<Flow, ProtocolError> {
            self.seen.lock().unwrap().push(event.kind.clone());
            match event.kind.as_str() {
                "ping" => out.send(&Event::new("pong"))?,
                "bye" => return Ok(Flow::Close),
                _ => {}
            }
            Ok(Flow::Continue)
        }
    }

    fn start(cap: usize) -> (SocketAddr, CancelToken, Arc<Echo>, JoinHandle<()>) {
        start_with(cap, |s| s)
    }

    fn start_with(
        cap: usize,
        tune: impl FnOnce(Server) -> Server,
    ) -> (SocketAddr, CancelToken, Arc<Echo>, JoinHandle<()>) {
        let echo = Arc::new(Echo {
            seen: Mutex::new(Vec::new()),
        });
        let uri = WyomingUri::parse("tcp://127.0.0.1:0").unwrap();
        let server = tune(Server::bind(&uri, Limits::default(), cap).unwrap());
        let addr = server.local_addr();
        let stop = CancelToken::new();
        let s2 = stop.clone();
        let handler = echo.clone();
        let t = std::thread::spawn(move || server.run(handler, &s2, &mut || {}));
        (addr, stop, echo, t)
    }

    fn connect(addr: SocketAddr) -> Connection {
        let uri = WyomingUri::parse(&format!("tcp://{addr}")).unwrap();
        Connection::connect(&uri, Duration::from_secs(2), Limits::default()).unwrap()
    }

    #[test]
    fn answers_pings_and_drops_only_the_peer_that_sends_garbage() {
        let (addr, stop, echo, t) = start(8);
        let good = connect(addr);
        good.send(&Event::new("ping")).unwrap();
        assert_eq!(good.recv().unwrap().kind, "pong");

        let mut bad = TcpStream::connect(addr).unwrap();
        bad.write_all(b"this is not json\n").unwrap();
        let mut reply = String::new();
        bad.read_to_string(&mut reply).unwrap();
        assert!(reply.contains("\"type\":\"error\""), "{reply}");
        assert!(reply.contains("bad-frame"), "{reply}");

        // The good connection still works.
        good.send(&Event::new("ping")).unwrap();
        assert_eq!(good.recv().unwrap().kind, "pong");
        good.send(&Event::new("bye")).unwrap();
        assert!(matches!(good.recv(), Err(ProtocolError::Closed)));
        stop.cancel();
        t.join().unwrap();
        assert_eq!(*echo.seen.lock().unwrap(), ["ping", "ping", "bye"]);
    }

    #[test]
    fn refuses_connections_past_the_cap_with_a_busy_error() {
        let (addr, stop, _echo, t) = start(1);
        let first = connect(addr);
        first.send(&Event::new("ping")).unwrap();
        assert_eq!(first.recv().unwrap().kind, "pong");
        let second = connect(addr);
        let e = second.recv().unwrap();
        assert_eq!(e.kind, "error");
        assert_eq!(e.str("code"), Some("busy"));
        assert!(matches!(second.recv(), Err(ProtocolError::Closed)));
        drop(first);
        // Once the first is gone a new peer is admitted.
        assert_readmitted(addr);
        stop.cancel();
        t.join().unwrap();
    }

    /// A new peer gets `pong` within 5 s (a freed slot is reused).
    fn assert_readmitted(addr: SocketAddr) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let peer = connect(addr);
            peer.send(&Event::new("ping")).unwrap();
            match peer.recv() {
                Ok(e) if e.kind == "pong" => return,
                other => {
                    assert!(Instant::now() < deadline, "never readmitted: {other:?}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// A socket that sent half an event and stalls.
    fn stall(addr: SocketAddr) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"{\"type\": \"pi").unwrap();
        s
    }

    /// Whether the server closed `s` within `within`.
    fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
        s.set_read_timeout(Some(within)).unwrap();
        let mut buf = [0u8; 256];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    #[test]
    fn stalled_connections_never_lock_out_a_real_client_and_are_closed() {
        let (addr, stop, _echo, t) =
            start_with(2, |s| s.first_event_timeout(Duration::from_millis(400)));
        let mut stalled: Vec<TcpStream> = (0..10).map(|_| stall(addr)).collect();
        // Ten stalled peers and a cap of two: a real client still gets in.
        let good = connect(addr);
        good.send(&Event::new("ping")).unwrap();
        assert_eq!(good.recv().unwrap().kind, "pong");
        for s in &mut stalled {
            assert!(
                closed_within(s, Duration::from_secs(5)),
                "a stalled peer stayed open"
            );
        }
        // The established client is not subject to the first-event deadline.
        good.send(&Event::new("ping")).unwrap();
        assert_eq!(good.recv().unwrap().kind, "pong");
        stop.cancel();
        t.join().unwrap();
    }

    #[test]
    fn pending_peers_past_their_bound_close_the_oldest() {
        let (addr, stop, _echo, t) = start_with(4, |s| s.max_pending(3));
        let mut first = stall(addr);
        let _others: Vec<TcpStream> = (0..3).map(|_| stall(addr)).collect();
        assert!(
            closed_within(&mut first, Duration::from_secs(5)),
            "the oldest pending peer stayed open"
        );
        let good = connect(addr);
        good.send(&Event::new("ping")).unwrap();
        assert_eq!(good.recv().unwrap().kind, "pong");
        stop.cancel();
        t.join().unwrap();
    }

    #[test]
    fn one_address_cannot_take_every_slot() {
        let (addr, stop, _echo, t) = start_with(4, |s| s.max_per_address(1));
        let first = connect(addr);
        first.send(&Event::new("ping")).unwrap();
        assert_eq!(first.recv().unwrap().kind, "pong");
        let second = connect(addr);
        second.send(&Event::new("ping")).unwrap();
        let e = second.recv().unwrap();
        assert_eq!(e.kind, "error");
        assert_eq!(e.str("code"), Some("busy"));
        drop(first);
        assert_readmitted(addr);
        stop.cancel();
        t.join().unwrap();
    }
}
