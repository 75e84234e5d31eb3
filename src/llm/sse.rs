//! The one place that turns a byte stream into server-sent events.
//!
//! Incremental: bytes arrive in arbitrary pieces (a UTF-8 character or a
//! line may be split across reads); complete events come out as soon as
//! their blank line arrives.

/// Accumulates bytes and yields the `data` of each complete event.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    data: Vec<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; returns the data payloads of events completed by them.
    /// Comment lines (`: …`) and fields other than `data` are ignored.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(self.data.join("\n"));
                    self.data.clear();
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_ref(), ""),
            };
            if field == "data" {
                self.data.push(value.to_string());
            }
        }
        out
    }

    /// At end of stream: an event not terminated by a blank line.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buffer);
        if !rest.is_empty() {
            let more = self.feed(&[rest.as_slice(), b"\n\n"].concat());
            if let Some(last) = more.into_iter().last() {
                return Some(last);
            }
        }
        if self.data.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.data).join("\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_anywhere_gives_the_same_events() {
        let wire = "data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":\"é\"}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let whole = SseParser::new().feed(wire.as_bytes());
        assert_eq!(whole, vec!["{\"a\":1}", "{\"b\":\"é\"}", "[DONE]"]);
        let bytes = wire.as_bytes();
        for split in 1..bytes.len() {
            let mut p = SseParser::new();
            let mut got = p.feed(&bytes[..split]);
            got.extend(p.feed(&bytes[split..]));
            assert_eq!(got, whole, "split at {split}");
        }
    }

    #[test]
    fn multi_line_data_is_joined() {
        let got = SseParser::new().feed(b"data: a\ndata: b\n\n");
        assert_eq!(got, vec!["a\nb"]);
    }

    #[test]
    fn unterminated_last_event_is_recovered_at_finish() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: tail").is_empty());
        assert_eq!(p.finish().as_deref(), Some("tail"));
    }
}
