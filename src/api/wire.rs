//! HTTP/1.1 on the wire, with every read bounded in size and time.
//!
//! tiny_http read header lines without any limit, before the token check
//! and with no deadline, so a slow or huge header could hold a connection
//! (and its memory) forever. Here the header block is read into a buffer
//! of at most [`MAX_HEAD_BYTES`] before a deadline and parsed by
//! [`httparse`] (at most [`MAX_HEADERS`] headers); the body is read only
//! after the caller has checked the head, within its own deadline and
//! size limit (chunked bodies through [`chunked_transfer`]). Every answer
//! closes the connection (`Connection: close`), so an idle keep-alive
//! client never holds one of the `api.max_connections` slots.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::body::{read_limited, too_large};
use super::ApiError;

/// The largest header block (request line + headers) accepted; more is a
/// 431. Browsers and HTTP clients send well under 8 KiB.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The most header fields accepted; more is a 431.
pub const MAX_HEADERS: usize = 64;

/// The longest a blocking read waits before looking at the deadline and
/// the shutdown flag again.
const READ_SLICE: Duration = Duration::from_millis(200);

/// When reading must be done by, and the flag that ends it early on
/// shutdown.
#[derive(Clone, Copy)]
pub struct Deadline<'a> {
    pub at: Instant,
    pub stop: &'a AtomicBool,
}

impl<'a> Deadline<'a> {
    /// A deadline `after` from now.
    pub fn after(after: Duration, stop: &'a AtomicBool) -> Self {
        Self {
            at: Instant::now() + after,
            stop,
        }
    }
}

/// Why no request head could be read.
#[derive(Debug)]
pub enum HeadError {
    /// The client closed before sending anything: nothing to answer.
    Closed,
    /// The deadline passed first (408).
    TimedOut,
    /// The server is shutting down.
    Stopped,
    /// Over [`MAX_HEAD_BYTES`] (431).
    TooLarge,
    /// Over [`MAX_HEADERS`] fields (431).
    TooManyHeaders,
    /// Not HTTP/1.x (400), with what was wrong.
    Malformed(String),
    /// The connection failed.
    Io(io::Error),
}

impl HeadError {
    /// The answer to send, if the client is still there to read one.
    pub fn to_api_error(&self, timeout: Duration) -> Option<ApiError> {
        match self {
            HeadError::Closed | HeadError::Io(_) => None,
            HeadError::TimedOut => Some(ApiError::new(
                408,
                format!(
                    "the request headers did not arrive within {} ms (api.header_timeout_ms); send the whole request at once",
                    timeout.as_millis()
                ),
            )),
            HeadError::Stopped => Some(ApiError::unavailable(
                "earshot is shutting down; retry in a moment",
            )),
            HeadError::TooLarge => Some(ApiError::new(
                431,
                format!("the request headers are larger than {MAX_HEAD_BYTES} bytes; send fewer or shorter headers"),
            )),
            HeadError::TooManyHeaders => Some(ApiError::new(
                431,
                format!("the request has more than {MAX_HEADERS} header fields; send fewer headers"),
            )),
            HeadError::Malformed(what) => Some(ApiError::bad_request(format!(
                "the request is not valid HTTP/1.1 ({what}); send a well-formed request"
            ))),
        }
    }
}

/// A parsed request line and header block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// As sent, e.g. `POST`.
    pub method: String,
    /// The request target as sent, e.g. `/api/chat?x=1`.
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Name and value of each field, in order (values lossily UTF-8).
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// Every value of the header `name` (case-insensitive), in order.
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The first value of the header `name`, trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.all(name).next().map(str::trim)
    }

    /// The path without query or fragment.
    pub fn path(&self) -> &str {
        self.target.split(['?', '#']).next().unwrap_or("")
    }
}

/// Read and parse one request head from `stream` within `deadline`.
/// Returns the head and the bytes read past it (the start of the body).
pub fn read_head(stream: &TcpStream, deadline: Deadline) -> Result<(Head, Vec<u8>), HeadError> {
    let mut buf: Vec<u8> = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        // Never buffer (much) past the cap, whatever the client sends.
        let room = (MAX_HEAD_BYTES + 1).saturating_sub(buf.len()).max(1);
        let want = room.min(chunk.len());
        let n = match read_within(stream, &mut chunk[..want], deadline) {
            Ok(0) if buf.is_empty() => return Err(HeadError::Closed),
            Ok(0) => {
                return Err(HeadError::Malformed(
                    "the connection closed inside the headers".into(),
                ))
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                return Err(if buf.is_empty() && deadline.stop.load(Ordering::SeqCst) {
                    HeadError::Stopped
                } else {
                    HeadError::TimedOut
                })
            }
            Err(e) if is_shutdown(&e) => return Err(HeadError::Stopped),
            Err(e) => return Err(HeadError::Io(e)),
        };
        let fresh = &chunk[..n];
        buf.extend_from_slice(fresh);
        // The head can only be complete once a line ended.
        if fresh.contains(&b'\n') {
            if let Some(parsed) = parse_head(&buf)? {
                return Ok(parsed);
            }
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Parse a buffered head: `None` while it is incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<(Head, Vec<u8>)>, HeadError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let end = match request.parse(buf) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    };
    if end > MAX_HEAD_BYTES {
        return Err(HeadError::TooLarge);
    }
    let head = Head {
        method: request.method.unwrap_or("").to_string(),
        target: request.path.unwrap_or("").to_string(),
        minor_version: request.version.unwrap_or(1),
        headers: request
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
    };
    Ok(Some((head, buf[end..].to_vec())))
}

/// One read that gives up at `deadline` (`TimedOut`) or on shutdown
/// ([`is_shutdown`]), waking every [`READ_SLICE`] to look.
fn read_within(stream: &TcpStream, buf: &mut [u8], deadline: Deadline) -> io::Result<usize> {
    loop {
        if deadline.stop.load(Ordering::SeqCst) {
            // Not `Interrupted`: std's readers (`io::copy`, `read_to_end`)
            // retry that for ever, and a lingering connection spun until
            // the process was killed instead of shutting down.
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "shutting down",
            ));
        }
        let left = deadline.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        }
        stream.set_read_timeout(Some(left.min(READ_SLICE)))?;
        match (&mut &*stream).read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if is_slice_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The error [`read_within`] gives when the server is shutting down.
pub fn is_shutdown(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionAborted
}

/// A read or write that ended only because its time slice (or a signal)
/// did: look at the deadline and the stop flag, then try again.
fn is_slice_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// How the body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The body framing from the head; ambiguous or unsupported framing is
/// refused (the same rules that stop request smuggling).
pub fn framing(head: &Head) -> Result<Framing, ApiError> {
    let encodings: Vec<&str> = head.all("Transfer-Encoding").map(str::trim).collect();
    let lengths: Vec<&str> = head.all("Content-Length").map(str::trim).collect();
    if !encodings.is_empty() {
        if !lengths.is_empty() {
            return Err(ApiError::bad_request(
                "the request has both Transfer-Encoding and Content-Length; send only one",
            ));
        }
        if encodings.len() == 1 && encodings[0].eq_ignore_ascii_case("chunked") {
            return Ok(Framing::Chunked);
        }
        return Err(ApiError::new(
            501,
            format!(
                "Transfer-Encoding {:?} is not supported; send the body with Content-Length or as chunked",
                encodings.join(", ")
            ),
        ));
    }
    let Some(first) = lengths.first() else {
        return Ok(Framing::Empty);
    };
    if lengths.iter().any(|l| l != first) {
        return Err(ApiError::bad_request(
            "the request has conflicting Content-Length headers; send one",
        ));
    }
    if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(format!(
            "Content-Length {first:?} is not a number of bytes"
        )));
    }
    let n: u64 = first.parse().map_err(|_| {
        ApiError::new(
            413,
            format!("Content-Length {first} is too large; send a smaller body"),
        )
    })?;
    Ok(if n == 0 {
        Framing::Empty
    } else {
        Framing::Length(n)
    })
}

/// The body bytes: first what came with the head, then the socket, within
/// the deadline.
struct BodySource<'a> {
    early: &'a [u8],
    stream: &'a TcpStream,
    deadline: Deadline<'a>,
}

impl Read for BodySource<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.early.is_empty() {
            let n = self.early.len().min(buf.len());
            buf[..n].copy_from_slice(&self.early[..n]);
            self.early = &self.early[n..];
            return Ok(n);
        }
        read_within(self.stream, buf, self.deadline)
    }
}

/// Read the body within `max` bytes and the deadline
/// ([`super::body::read_limited`]). Over the limit is a 413, too slow a
/// 408, cut short or badly chunked a 400. On an error the rest of the body
/// may be unread: answer, then [`linger`].
pub fn read_body(
    stream: &TcpStream,
    early: &[u8],
    framing: Framing,
    max: usize,
    deadline: Deadline,
) -> Result<Vec<u8>, ApiError> {
    let mut source = BodySource {
        early,
        stream,
        deadline,
    };
    match framing {
        Framing::Empty => Ok(Vec::new()),
        Framing::Length(n) => {
            let declared = usize::try_from(n).unwrap_or(usize::MAX);
            let body = read_limited(&mut (&mut source).take(n), Some(declared), max)?;
            if (body.len() as u64) < n {
                return Err(ApiError::bad_request(format!(
                    "the request body ended after {} of its {n} bytes (Content-Length); send the whole body",
                    body.len()
                )));
            }
            Ok(body)
        }
        Framing::Chunked => {
            // The wire bytes are capped too: the decoder does not bound a
            // chunk-size line by itself.
            let limit = u64::try_from(max).unwrap_or(u64::MAX);
            let wire_cap = limit.saturating_add(limit / 8).saturating_add(64 * 1024);
            let wire = io::BufReader::new((&mut source).take(wire_cap));
            let mut decoder = chunked_transfer::Decoder::new(wire);
            let result = read_limited(&mut decoder, None, max);
            if decoder.get_ref().get_ref().limit() == 0 {
                return Err(too_large(max));
            }
            let body = result?;
            if decoder.remaining_chunks_size().is_some() {
                return Err(ApiError::bad_request(
                    "the chunked request body ended inside a chunk; send the whole body",
                ));
            }
            Ok(body)
        }
    }
}

/// How long writing one whole answer may take, however slowly the client
/// reads (a socket write timeout alone restarts with every byte read).
pub const WRITE_DEADLINE: Duration = Duration::from_secs(30);

/// How long a blocked answer may still take once shutdown has begun.
const WRITE_GRACE_ON_STOP: Duration = Duration::from_secs(2);

/// Write all of `bytes` within [`WRITE_DEADLINE`] (or
/// [`WRITE_GRACE_ON_STOP`] after `stop` is set); a client that reads too
/// slowly gets cut off (`TimedOut`) instead of holding a worker or the
/// shutdown.
pub fn write_answer(stream: &TcpStream, bytes: &[u8], stop: &AtomicBool) -> io::Result<()> {
    let mut at = Instant::now() + WRITE_DEADLINE;
    let mut stop_seen = false;
    let mut rest = bytes;
    while !rest.is_empty() {
        if !stop_seen && stop.load(Ordering::SeqCst) {
            stop_seen = true;
            at = at.min(Instant::now() + WRITE_GRACE_ON_STOP);
        }
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the answer in time",
            ));
        }
        stream.set_write_timeout(Some(left.min(READ_SLICE)))?;
        match (&mut &*stream).write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if is_slice_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How much of a refused body [`linger`] reads and throws away so the
/// client, still sending, gets the answer instead of a reset connection.
pub const DRAIN_LIMIT: u64 = 64 * 1024 * 1024;

/// After an early answer (the body unread): stop sending, then read and
/// discard what the client still sends, until it closes, `most` bytes or
/// the deadline, so closing does not reset the connection before the
/// client has read the answer.
pub fn linger(stream: &TcpStream, most: u64, deadline: Deadline) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut source = BodySource {
        early: &[],
        stream,
        deadline,
    };
    let _ = io::copy(&mut (&mut source).take(most), &mut io::sink());
}

/// The reason phrase for a status code.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Status line, `Date`, `Connection: close`, the given headers (any with
/// a line break is dropped) and, unless `head_only`, the body with its
/// `Content-Length`.
pub fn response_bytes(
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + if head_only { 0 } else { body.len() });
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT");
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nDate: {date}\r\nConnection: close\r\n",
        reason(status)
    );
    for (name, value) in headers {
        if name.contains(['\r', '\n', ':']) || value.contains(['\r', '\n']) {
            continue;
        }
        let _ = write!(out, "{name}: {value}\r\n");
    }
    if status != 204 {
        let _ = write!(out, "Content-Length: {}\r\n", body.len());
    }
    out.extend_from_slice(b"\r\n");
    if !head_only && status != 204 {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection lingering after an early answer, its client still
    /// connected and silent, ends at shutdown — not at its deadline, and
    /// never in a busy loop (it used to spin until killed).
    #[test]
    fn lingering_and_body_reads_end_at_shutdown() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let started = Instant::now();
            let lingering = scope.spawn(|| {
                linger(
                    &server,
                    DRAIN_LIMIT,
                    Deadline::after(Duration::from_secs(30), &stop),
                )
            });
            std::thread::sleep(Duration::from_millis(100));
            stop.store(true, Ordering::SeqCst);
            lingering.join().unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{:?}",
                started.elapsed()
            );
        });
        // A body read at shutdown: a 503, at once.
        let started = Instant::now();
        let err = read_body(
            &server,
            b"",
            Framing::Length(10),
            1024,
            Deadline::after(Duration::from_secs(30), &stop),
        )
        .unwrap_err();
        assert_eq!(err.status, 503, "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn heads_parse_and_are_bounded() {
        let (head, rest) = parse_head(
            b"POST /api/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\n\r\n{}",
        )
        .unwrap()
        .unwrap();
        assert_eq!(head.method, "POST");
        assert_eq!(head.path(), "/api/chat");
        assert_eq!(head.header("host"), Some("127.0.0.1:8080"));
        assert_eq!(rest, b"{}");
        assert_eq!(framing(&head).unwrap(), Framing::Length(2));
        assert!(parse_head(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .unwrap()
            .is_none());
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: y\r\n")).collect();
        let text = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert!(matches!(
            parse_head(text.as_bytes()),
            Err(HeadError::TooManyHeaders)
        ));
        assert!(matches!(
            parse_head(b"NOT HTTP\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn framing_refuses_ambiguity() {
        let head = |headers: &[(&str, &str)]| Head {
            method: "POST".into(),
            target: "/".into(),
            minor_version: 1,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        assert_eq!(framing(&head(&[])).unwrap(), Framing::Empty);
        assert_eq!(
            framing(&head(&[("Transfer-Encoding", "chunked")])).unwrap(),
            Framing::Chunked
        );
        assert_eq!(
            framing(&head(&[
                ("Transfer-Encoding", "chunked"),
                ("Content-Length", "3")
            ]))
            .unwrap_err()
            .status,
            400
        );
        assert_eq!(
            framing(&head(&[("Transfer-Encoding", "gzip")]))
                .unwrap_err()
                .status,
            501
        );
        assert_eq!(
            framing(&head(&[("Content-Length", "3"), ("Content-Length", "4")]))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            framing(&head(&[("Content-Length", "-1")]))
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn a_client_that_never_reads_cannot_hold_a_writer_past_shutdown() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let stop = AtomicBool::new(true);
        let started = Instant::now();
        let err = write_answer(&server, &vec![0u8; 256 * 1024 * 1024], &stop).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let took = started.elapsed();
        assert!(
            took < WRITE_GRACE_ON_STOP + Duration::from_secs(2),
            "{took:?}"
        );
    }

    #[test]
    fn responses_close_and_drop_broken_headers() {
        let bytes = response_bytes(413, &[("X-A", "1"), ("X-B", "a\r\nEvil: 1")], b"{}", false);
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 413 Content Too Large\r\n"),
            "{text}"
        );
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.contains("X-A: 1\r\n") && !text.contains("Evil"));
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
        let head = response_bytes(200, &[], b"{}", true);
        assert!(String::from_utf8(head)
            .unwrap()
            .ends_with("Content-Length: 2\r\n\r\n"));
    }
}
