//! Wyoming event framing (rhasspy/wyoming README, "Event format").
//!
//! One event on the wire is:
//! 1. a JSON header line ending in `\n`: `{"type": …, "data": {…}?,
//!    "data_length": N?, "payload_length": M?, "version": …?}`;
//! 2. `N` bytes of UTF-8 JSON ("additional data"), an object merged over the
//!    header's `data` (newer peers put all data here; older ones inline it);
//! 3. `M` bytes of binary payload (PCM audio for `audio-chunk`).
//!
//! Every length comes from the peer, so reading is bounded by [`Limits`]:
//! a header line longer than the limit, a length larger than allowed, bad
//! JSON or a stream that ends inside a frame is a [`ProtocolError`] — the
//! connection is then dropped, never the process.

use std::io::{BufRead, Read, Write};

use serde_json::{Map, Value};

/// The protocol version we speak (sent in every header, as the Python
/// library does; peers ignore it for framing).
pub const VERSION: &str = "1.8.0";

/// Upper bounds on what a peer may make us allocate for one event.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest header line, newline included.
    pub max_header_bytes: usize,
    /// Largest additional-data block.
    pub max_data_bytes: usize,
    /// Largest binary payload (an audio chunk is usually 2–8 KiB; a whole
    /// synthesised sentence sent as one chunk can be a few hundred KiB).
    pub max_payload_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 64 * 1024,
            max_data_bytes: 1024 * 1024,
            max_payload_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Why a frame could not be read. Each variant names what the peer did
/// wrong, so the log line says which side to fix.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("connection closed")]
    Closed,
    #[error("connection closed in the middle of an event ({0})")]
    Truncated(&'static str),
    #[error("event header longer than {limit} bytes; not a Wyoming peer?")]
    HeaderTooLong { limit: usize },
    #[error("event header is not valid JSON: {0}")]
    BadJson(String),
    #[error("event header has no \"type\" string")]
    MissingType,
    #[error("event {field} is {value}, more than the {limit} bytes allowed")]
    TooLarge {
        field: &'static str,
        value: u64,
        limit: usize,
    },
    #[error("event {field} is not a non-negative integer")]
    BadLength { field: &'static str },
    #[error("event {0} must be a JSON object")]
    NotAnObject(&'static str),
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
}

impl ProtocolError {
    /// True when the peer simply went away (not worth a warning).
    pub fn is_closed(&self) -> bool {
        matches!(self, ProtocolError::Closed)
    }

    /// True for a read timeout on a socket with one set: no event arrived
    /// in time (the frame boundary is still intact only if nothing of the
    /// frame had been read, which [`read_event`] guarantees for the header).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ProtocolError::Io(e)
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
    }
}

/// One Wyoming event: a type, its data and an optional binary payload.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    pub kind: String,
    pub data: Map<String, Value>,
    pub payload: Option<Vec<u8>>,
}

impl Event {
    /// An event with no data.
    pub fn new(kind: impl Into<String>) -> Event {
        Event {
            kind: kind.into(),
            ..Default::default()
        }
    }

    /// An event with the given data (a JSON object; anything else is
    /// ignored, since Wyoming data is always an object).
    pub fn with_data(kind: impl Into<String>, data: Value) -> Event {
        let data = match data {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Event {
            kind: kind.into(),
            data,
            payload: None,
        }
    }

    /// Attach a binary payload.
    pub fn payload(mut self, payload: Vec<u8>) -> Event {
        self.payload = Some(payload);
        self
    }

    /// A string field of `data`.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.data.get(key).and_then(Value::as_str)
    }

    /// An unsigned integer field of `data`.
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.data.get(key).and_then(Value::as_u64)
    }

    /// Serialise exactly as the Python library does: header line with
    /// `version`, data as additional data (`data_length`), then payload.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut header = Map::new();
        header.insert("type".into(), Value::String(self.kind.clone()));
        header.insert("version".into(), Value::String(VERSION.into()));
        let data_bytes = if self.data.is_empty() {
            None
        } else {
            // A Map of Values always serialises.
            serde_json::to_vec(&self.data).ok()
        };
        if let Some(d) = &data_bytes {
            header.insert("data_length".into(), Value::from(d.len()));
        }
        let payload = self.payload.as_deref().filter(|p| !p.is_empty());
        if let Some(p) = payload {
            header.insert("payload_length".into(), Value::from(p.len()));
        }
        let mut out = serde_json::to_vec(&Value::Object(header)).unwrap_or_default();
        out.push(b'\n');
        if let Some(d) = data_bytes {
            out.extend_from_slice(&d);
        }
        if let Some(p) = payload {
            out.extend_from_slice(p);
        }
        out
    }
}

/// Write one event and flush (one `write_all`, so concurrent writers that
/// hold a lock around this never interleave frames).
pub fn write_event<W: Write>(w: &mut W, event: &Event) -> std::io::Result<()> {
    w.write_all(&event.to_bytes())?;
    w.flush()
}

/// Read one event. `Err(Closed)` when the stream ends cleanly between
/// events; any other error means the stream is no longer framed and the
/// connection should be dropped.
pub fn read_event<R: BufRead>(r: &mut R, limits: &Limits) -> Result<Event, ProtocolError> {
    let line = read_header_line(r, limits.max_header_bytes)?;
    let header: Value = serde_json::from_slice(&line)
        .map_err(|e| ProtocolError::BadJson(first_line(&e.to_string())))?;
    let Value::Object(mut header) = header else {
        return Err(ProtocolError::NotAnObject("header"));
    };
    let kind = match header.remove("type") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => return Err(ProtocolError::MissingType),
    };
    let mut data = match header.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(ProtocolError::NotAnObject("data")),
    };
    let data_length = length(&header, "data_length", limits.max_data_bytes)?;
    let payload_length = length(&header, "payload_length", limits.max_payload_bytes)?;
    if data_length > 0 {
        let bytes = read_exact(r, data_length, "additional data")?;
        let extra: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ProtocolError::BadJson(first_line(&e.to_string())))?;
        let Value::Object(extra) = extra else {
            return Err(ProtocolError::NotAnObject("additional data"));
        };
        for (k, v) in extra {
            data.insert(k, v);
        }
    }
    let payload = if payload_length > 0 {
        Some(read_exact(r, payload_length, "payload")?)
    } else {
        None
    };
    Ok(Event {
        kind,
        data,
        payload,
    })
}

/// The header line without its newline, bounded by `limit`.
fn read_header_line<R: BufRead>(r: &mut R, limit: usize) -> Result<Vec<u8>, ProtocolError> {
    let mut line = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ProtocolError::Io(e)),
        };
        if buf.is_empty() {
            return Err(if line.is_empty() {
                ProtocolError::Closed
            } else {
                ProtocolError::Truncated("header line")
            });
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > limit {
            return Err(ProtocolError::HeaderTooLong { limit });
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            // Blank keep-alive lines are not events.
            if line.iter().all(u8::is_ascii_whitespace) {
                line.clear();
                continue;
            }
            return Ok(line);
        }
    }
}

fn length(
    header: &Map<String, Value>,
    field: &'static str,
    limit: usize,
) -> Result<usize, ProtocolError> {
    match header.get(field) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => {
            let n = v.as_u64().ok_or(ProtocolError::BadLength { field })?;
            if n > limit as u64 {
                return Err(ProtocolError::TooLarge {
                    field,
                    value: n,
                    limit,
                });
            }
            Ok(n as usize)
        }
    }
}

fn read_exact<R: Read>(r: &mut R, n: usize, what: &'static str) -> Result<Vec<u8>, ProtocolError> {
    let mut buf = vec![0u8; n];
    match r.read_exact(&mut buf) {
        Ok(()) => Ok(buf),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(ProtocolError::Truncated(what))
        }
        Err(e) => Err(ProtocolError::Io(e)),
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Cursor;

    fn read_all(bytes: &[u8]) -> Vec<Result<Event, ProtocolError>> {
        let mut r = Cursor::new(bytes.to_vec());
        let mut out = Vec::new();
        loop {
            match read_event(&mut r, &Limits::default()) {
                Err(ProtocolError::Closed) => return out,
                Err(e) => {
                    out.push(Err(e));
                    return out;
                }
                ok => out.push(ok),
            }
        }
    }

    #[test]
    fn writes_byte_exact_frames_like_the_python_library() {
        let e = Event::with_data(
            "audio-chunk",
            json!({"rate": 16000, "width": 2, "channels": 1}),
        )
        .payload(vec![1, 0, 255, 127]);
        let bytes = e.to_bytes();
        let data = br#"{"rate":16000,"width":2,"channels":1}"#;
        let mut want = format!(
            "{{\"type\":\"audio-chunk\",\"version\":\"{VERSION}\",\"data_length\":{},\"payload_length\":4}}\n",
            data.len()
        )
        .into_bytes();
        want.extend_from_slice(data);
        want.extend_from_slice(&[1, 0, 255, 127]);
        assert_eq!(bytes, want);
        // No data and no payload: just the header line.
        assert_eq!(
            Event::new("describe").to_bytes(),
            format!("{{\"type\":\"describe\",\"version\":\"{VERSION}\"}}\n").into_bytes()
        );
    }

    #[test]
    fn reads_python_frames_and_merges_additional_data_over_inline_data() {
        // What wyoming 1.10's write_event produces for Transcript("hi").
        let data = "{\"text\": \"hi\"}";
        let frame = format!(
            "{{\"type\": \"transcript\", \"version\": \"1.10.2\", \"data_length\": {}}}\n{data}",
            data.len()
        );
        let got = read_all(frame.as_bytes());
        let e = got[0].as_ref().unwrap();
        assert_eq!(e.kind, "transcript");
        assert_eq!(e.str("text"), Some("hi"));
        assert!(e.payload.is_none());

        let data = "{\"b\": 2, \"a\": 3}";
        let frame = format!(
            "{{\"type\":\"x\",\"data\":{{\"a\":1,\"c\":4}},\"data_length\":{},\"payload_length\":3}}\n{data}abc",
            data.len()
        );
        let e = read_all(frame.as_bytes()).remove(0).unwrap();
        assert_eq!(e.u64("a"), Some(3), "additional data wins");
        assert_eq!(e.u64("b"), Some(2));
        assert_eq!(e.u64("c"), Some(4));
        assert_eq!(e.payload.as_deref(), Some(&b"abc"[..]));
    }

    #[test]
    fn round_trips_a_sequence_of_events() {
        let events = vec![
            Event::new("describe"),
            Event::with_data("synthesize", json!({"text": "héllo ✓"})),
            Event::with_data("audio-chunk", json!({"rate": 22050})).payload(vec![7; 5000]),
            Event::new("audio-stop"),
        ];
        let bytes: Vec<u8> = events.iter().flat_map(Event::to_bytes).collect();
        let got: Vec<Event> = read_all(&bytes).into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(got, events);
    }

    #[test]
    fn rejects_malformed_frames_with_a_reason() {
        let lim = Limits {
            max_header_bytes: 100,
            max_data_bytes: 50,
            max_payload_bytes: 1000,
        };
        let read = |b: &[u8]| read_event(&mut Cursor::new(b.to_vec()), &lim);
        assert!(matches!(
            read(b"not json\n"),
            Err(ProtocolError::BadJson(_))
        ));
        assert!(matches!(
            read(b"[1,2]\n"),
            Err(ProtocolError::NotAnObject("header"))
        ));
        assert!(matches!(
            read(b"{\"data\":{}}\n"),
            Err(ProtocolError::MissingType)
        ));
        assert!(matches!(
            read(b"{\"type\":5}\n"),
            Err(ProtocolError::MissingType)
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"data\":[1]}\n"),
            Err(ProtocolError::NotAnObject("data"))
        ));
        assert!(matches!(
            read(&[b'{'; 500]),
            Err(ProtocolError::HeaderTooLong { limit: 100 })
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"payload_length\":99999999999}\n"),
            Err(ProtocolError::TooLarge {
                field: "payload_length",
                ..
            })
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"data_length\":51}\n"),
            Err(ProtocolError::TooLarge {
                field: "data_length",
                ..
            })
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"payload_length\":-1}\n"),
            Err(ProtocolError::BadLength { .. })
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"payload_length\":\"4\"}\n"),
            Err(ProtocolError::BadLength { .. })
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"payload_length\":10}\nabc"),
            Err(ProtocolError::Truncated("payload"))
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"data_length\":10}\n{}"),
            Err(ProtocolError::Truncated("additional data"))
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\",\"data_length\":2}\n[]"),
            Err(ProtocolError::NotAnObject("additional data"))
        ));
        assert!(matches!(
            read(b"{\"type\":\"x\""),
            Err(ProtocolError::Truncated("header line"))
        ));
        assert!(matches!(read(b""), Err(ProtocolError::Closed)));
        // Blank lines between events are skipped, CRLF accepted.
        let e = read(b"\n\r\n{\"type\":\"ping\"}\r\n").unwrap();
        assert_eq!(e.kind, "ping");
    }
}
