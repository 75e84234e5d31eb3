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
//! - past `max_connections` a new peer gets `error {code: "busy"}` and is
//!   closed, with a warn line naming the cap, so a flood cannot exhaust
//!   threads or memory;
//! - a peer silent for [`IDLE_TIMEOUT`] is closed (a half-sent header
//!   cannot pin a slot forever), and writes time out after
//!   [`WRITE_TIMEOUT`] so a peer that stops reading cannot wedge a thread.
//!
//! Stopping (SIGTERM) stops accepting at once; connections finish the
//! request they are in (a transcription, a turn) and the events the peer
//! had already sent, then close; [`Server::run`] waits for them up to
//! the drain time ([`DRAIN_TIMEOUT`] unless [`Server::drain`] says).

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cancel::CancelToken;
use crate::wyoming_proto::protocol::{Event, Limits, ProtocolError};
use crate::wyoming_proto::{Connection, EventWriter, WyomingUri};

/// A connection with no event for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
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
            drain: DRAIN_TIMEOUT,
        })
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
        let active = Arc::new(AtomicUsize::new(0));
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
        active: &Arc<AtomicUsize>,
        stop: &CancelToken,
        threads: &mut Vec<JoinHandle<()>>,
    ) {
        // Blocking I/O whatever the listener's mode (it turns non-blocking
        // for the final drain on stop).
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let _ = stream.set_nodelay(true);
        let now = active.load(Ordering::SeqCst);
        if now >= self.max_connections {
            tracing::warn!(
                %peer,
                "wyoming: refused a connection: {now} already open (the cap is {}; raise it with --max-connections)",
                self.max_connections
            );
            refuse(stream, self.max_connections);
            return;
        }
        let conn = match Connection::from_stream(stream, self.limits) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(%peer, "wyoming: cannot set up a connection: {e}");
                return;
            }
        };
        active.fetch_add(1, Ordering::SeqCst);
        let guard = ActiveGuard(active.clone());
        let handler = handler.clone();
        let stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("wyoming {peer}"))
            .spawn(move || {
                let _guard = guard;
                serve_connection(&*handler, &conn, peer, &stop);
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

/// Decrements the open-connection count however the thread ends.
struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
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
    peer: SocketAddr,
    stop: &CancelToken,
) {
    tracing::debug!(%peer, "wyoming: connected");
    let out = conn.writer();
    let mut session = handler.open(peer);
    let mut last_event = Instant::now();
    loop {
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
        let echo = Arc::new(Echo {
            seen: Mutex::new(Vec::new()),
        });
        let uri = WyomingUri::parse("tcp://127.0.0.1:0").unwrap();
        let server = Server::bind(&uri, Limits::default(), cap).unwrap();
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
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let third = connect(addr);
            third.send(&Event::new("ping")).unwrap();
            match third.recv() {
                Ok(e) if e.kind == "pong" => break,
                other => {
                    assert!(Instant::now() < deadline, "never readmitted: {other:?}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        stop.cancel();
        t.join().unwrap();
    }
}
