//! A Wyoming TCP connection, used in both directions: earshot connecting
//! out (to satellites, wake/STT/TTS services) and a peer connecting in
//! (`earshot wyoming serve`).
//!
//! Reading happens on a thread of its own that turns frames into a bounded
//! channel, so the owner can wait for "the next event or a deadline"
//! without ever cutting a frame in half (a socket read timeout in the
//! middle of a payload would desynchronise the stream). The bound gives
//! TCP back-pressure to a peer that sends faster than we consume.
//! Writing goes through a cloneable [`EventWriter`] that sends each frame
//! with one locked `write_all`, so several threads (the turn's speech, the
//! loop's pings) never interleave frames.

use std::io::BufReader;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use super::protocol::{read_event, write_event, Event, Limits, ProtocolError};

/// Events buffered between the reader thread and the owner (about 5 s of
/// 100 ms audio chunks) before the peer is made to wait.
const INBOX: usize = 64;

/// A parsed `tcp://HOST:PORT` address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WyomingUri {
    pub host: String,
    pub port: u16,
}

impl WyomingUri {
    /// Parse `tcp://HOST:PORT` (IPv6 as `tcp://[::1]:10700`). Other Wyoming
    /// transports (unix://, stdio://) are not supported: every peer we
    /// drive listens on TCP.
    pub fn parse(uri: &str) -> Result<WyomingUri, String> {
        let uri = uri.trim();
        let Some(rest) = uri.strip_prefix("tcp://") else {
            return Err(format!(
                "'{uri}' is not a Wyoming address; write it as tcp://HOST:PORT (e.g. tcp://127.0.0.1:10700)"
            ));
        };
        let rest = rest.trim_end_matches('/');
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, p) = v6
                .split_once("]:")
                .ok_or_else(|| format!("'{uri}' has no port; write it as tcp://[ADDR]:PORT"))?;
            (h, p)
        } else {
            rest.rsplit_once(':')
                .ok_or_else(|| format!("'{uri}' has no port; write it as tcp://HOST:PORT"))?
        };
        if host.is_empty() {
            return Err(format!("'{uri}' has no host; write it as tcp://HOST:PORT"));
        }
        let port: u16 = port.parse().map_err(|_| {
            format!("'{uri}' has a bad port '{port}'; use a number from 1 to 65535")
        })?;
        Ok(WyomingUri {
            host: host.to_string(),
            port,
        })
    }

    /// `HOST:PORT` for binding or connecting.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for WyomingUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tcp://{}", self.authority())
    }
}

/// Why [`dial`] found no connection.
#[derive(Debug)]
pub enum DialError {
    /// The name did not resolve (the message names the URI).
    Resolve(String),
    /// Every address refused or timed out; the last address's error.
    Connect(std::io::Error),
}

/// Open a TCP stream to `uri`, trying each address it resolves to for up
/// to `timeout` each. Shared by every outgoing connection (services,
/// satellites), which add their own socket options before wrapping it.
pub fn dial(uri: &WyomingUri, timeout: Duration) -> Result<TcpStream, DialError> {
    let addrs = uri
        .authority()
        .to_socket_addrs()
        .map_err(|e| DialError::Resolve(format!("cannot resolve {uri}: {e}")))?;
    let mut last = DialError::Resolve(format!("{uri} resolves to no address"));
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = DialError::Connect(e),
        }
    }
    Err(last)
}

/// Sends events on a connection; cheap to clone and share across threads.
#[derive(Clone)]
pub struct EventWriter {
    stream: Arc<Mutex<TcpStream>>,
}

impl EventWriter {
    /// Send one event (the whole frame, or an error: never half a frame
    /// from our side unless the socket itself fails).
    pub fn send(&self, event: &Event) -> Result<(), ProtocolError> {
        let mut stream = self
            .stream
            .lock()
            .map_err(|_| ProtocolError::Io(std::io::Error::other("writer lock poisoned")))?;
        write_event(&mut *stream, event)?;
        Ok(())
    }

    /// Close both directions: the peer sees EOF and our reader thread ends.
    pub fn close(&self) {
        if let Ok(s) = self.stream.lock() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// An open Wyoming connection: a writer and a channel of incoming events.
/// The channel ends with `Err(Closed)` (peer hung up) or the framing error
/// that made us drop the connection.
pub struct Connection {
    writer: EventWriter,
    events: Receiver<Result<Event, ProtocolError>>,
    peer: String,
}

impl Connection {
    /// Connect to `uri`, trying each address it resolves to for up to
    /// `timeout` each.
    pub fn connect(
        uri: &WyomingUri,
        timeout: Duration,
        limits: Limits,
    ) -> Result<Connection, String> {
        let stream = dial(uri, timeout).map_err(|e| match e {
            DialError::Resolve(m) => m,
            DialError::Connect(e) => format!("cannot connect to {uri}: {e}"),
        })?;
        Connection::from_stream(stream, limits)
            .map_err(|e| format!("cannot use the connection to {uri}: {e}"))
    }

    /// Wrap an accepted (or connected) stream and start its reader thread.
    pub fn from_stream(stream: TcpStream, limits: Limits) -> std::io::Result<Connection> {
        // Audio chunks are small and latency matters more than packing.
        stream.set_nodelay(true)?;
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "peer".into());
        let read_half = stream.try_clone()?;
        let (tx, events) = bounded(INBOX);
        std::thread::Builder::new()
            .name(format!("wyoming-read {peer}"))
            .spawn(move || {
                let mut reader = BufReader::with_capacity(64 * 1024, read_half);
                loop {
                    let got = read_event(&mut reader, &limits);
                    let end = got.is_err();
                    if tx.send(got).is_err() || end {
                        // Owner gone, or the stream can't be trusted any
                        // more: stop reading (the owner closes the socket).
                        break;
                    }
                }
            })?;
        Ok(Connection {
            writer: EventWriter {
                stream: Arc::new(Mutex::new(stream)),
            },
            events,
            peer,
        })
    }

    /// The remote address, for logs.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// A writer for other threads.
    pub fn writer(&self) -> EventWriter {
        self.writer.clone()
    }

    /// Send one event.
    pub fn send(&self, event: &Event) -> Result<(), ProtocolError> {
        self.writer.send(event)
    }

    /// The channel of incoming events (for `select!` with other channels).
    pub fn events(&self) -> &Receiver<Result<Event, ProtocolError>> {
        &self.events
    }

    /// Wait for the next event. `Ok(None)` = nothing within `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Event>, ProtocolError> {
        match self.events.recv_timeout(timeout) {
            Ok(Ok(e)) => Ok(Some(e)),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(ProtocolError::Closed),
        }
    }

    /// Wait for the next event with no deadline.
    pub fn recv(&self) -> Result<Event, ProtocolError> {
        match self.events.recv() {
            Ok(r) => r,
            Err(_) => Err(ProtocolError::Closed),
        }
    }

    /// Close the connection (the reader thread ends on EOF).
    pub fn close(&self) {
        self.writer.close();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.writer.close();
    }
}

/// Connect to a service with a connect timeout and a write timeout (a
/// service that stops reading must not block our side past the request
/// deadline). Shared by the STT, TTS and wake clients.
pub fn connect(
    uri: &WyomingUri,
    connect_timeout: Duration,
    write_timeout: Duration,
    limits: Limits,
) -> Result<Connection, String> {
    let stream = dial(uri, connect_timeout).map_err(|e| match e {
        DialError::Resolve(m) => m,
        DialError::Connect(e) => format!("cannot connect: {e}"),
    })?;
    stream
        .set_write_timeout(Some(write_timeout))
        .map_err(|e| format!("cannot use the connection to {uri}: {e}"))?;
    Connection::from_stream(stream, limits)
        .map_err(|e| format!("cannot use the connection to {uri}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn parses_uris_and_says_how_to_fix_bad_ones() {
        assert_eq!(
            WyomingUri::parse("tcp://pi-zero.local:10700").unwrap(),
            WyomingUri {
                host: "pi-zero.local".into(),
                port: 10700
            }
        );
        let v6 = WyomingUri::parse("tcp://[::1]:10300/").unwrap();
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.authority(), "[::1]:10300");
        for bad in [
            "pi:10700",
            "tcp://pi",
            "tcp://:1",
            "tcp://pi:99999",
            "unix:///tmp/s",
        ] {
            let e = WyomingUri::parse(bad).unwrap_err();
            assert!(e.contains("tcp://"), "{bad}: {e}");
        }
    }

    #[test]
    fn exchanges_events_over_loopback_and_drops_a_peer_that_sends_garbage() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let uri = WyomingUri::parse(&format!("tcp://{}", listener.local_addr().unwrap())).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let conn = Connection::from_stream(stream, Limits::default()).unwrap();
            let got = conn.recv().unwrap();
            assert_eq!(got.kind, "synthesize");
            conn.send(
                &Event::with_data("audio-chunk", json!({"rate": 16000})).payload(vec![1, 2, 3, 4]),
            )
            .unwrap();
            // Then garbage on the raw socket.
            let mut raw = conn.writer.stream.lock().unwrap().try_clone().unwrap();
            raw.write_all(b"{\"type\":\"x\",\"payload_length\":999999999999}\n")
                .unwrap();
            // Wait for the client to hang up.
            assert!(matches!(conn.recv(), Err(ProtocolError::Closed)));
        });
        let conn = Connection::connect(&uri, Duration::from_secs(2), Limits::default()).unwrap();
        conn.send(&Event::with_data("synthesize", json!({"text": "hi"})))
            .unwrap();
        let chunk = conn.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(chunk.payload.as_deref(), Some(&[1u8, 2, 3, 4][..]));
        assert!(matches!(
            conn.recv_timeout(Duration::from_secs(5)),
            Err(ProtocolError::TooLarge { .. })
        ));
        conn.close();
        server.join().unwrap();
    }

    #[test]
    fn a_refused_connection_is_one_line_naming_the_address() {
        // Bind then drop to get a port nobody listens on.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri = WyomingUri::parse(&format!("tcp://127.0.0.1:{port}")).unwrap();
        let e = Connection::connect(&uri, Duration::from_secs(1), Limits::default())
            .err()
            .unwrap();
        assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
        assert!(!e.contains('\n'));
    }
}
