//! The one outgoing-HTTP set-up every cloud client shares: the LLM client
//! (`llm::openai`), Groq speech-to-text and text-to-speech, and the cloud
//! tools (Tavily, Notion).
//!
//! Why: each client used to build its own ureq agent, and they drifted —
//! one sent a user agent, another did not; one noticed ureq's timeout
//! wrapped in an I/O error, the others did not. Here is one place for the
//! agent (timeouts, `earshot/<version>` user agent, the proxy from
//! `ALL_PROXY`/`HTTPS_PROXY`/`HTTP_PROXY` with `NO_PROXY`), one bounded body
//! reader and one typed error for "what went wrong on the wire". Every
//! client still owns its errors (`LlmError`, `SttError`, the tools'
//! sentences) and converts from [`HttpError`], because what to tell the
//! user about a 401 depends on whose key it was.
//!
//! A leaf: this module imports nothing else of the crate.

use std::time::Duration;

/// The user agent every outgoing request carries.
pub const USER_AGENT: &str = concat!("earshot/", env!("CARGO_PKG_VERSION"));

/// How an agent is bounded. `None` = no limit of that kind (ureq's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Establishing the connection (TCP + TLS).
    pub connect_timeout: Option<Duration>,
    /// The whole exchange, connect to last byte of the body.
    pub global_timeout: Option<Duration>,
    /// From the request sent to the response head.
    pub response_timeout: Option<Duration>,
    /// Reading the response body (a streamed answer needs this long).
    pub body_timeout: Option<Duration>,
    pub user_agent: String,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: None,
            global_timeout: None,
            response_timeout: None,
            body_timeout: None,
            user_agent: USER_AGENT.to_string(),
        }
    }
}

impl HttpSettings {
    /// Settings whose whole exchange is bounded by `deadline`.
    pub fn with_deadline(deadline: Duration) -> Self {
        Self {
            global_timeout: Some(deadline),
            ..Self::default()
        }
    }

    /// The agent. Statuses are not errors (callers map them, see
    /// [`Reply::error_for_status`]); the proxy comes from the environment.
    pub fn agent(&self) -> ureq::Agent {
        ureq::Agent::config_builder()
            .timeout_connect(self.connect_timeout)
            .timeout_global(self.global_timeout)
            .timeout_recv_response(self.response_timeout)
            .timeout_recv_body(self.body_timeout)
            .http_status_as_error(false)
            .user_agent(self.user_agent.as_str())
            .proxy(ureq::Proxy::try_from_env())
            .build()
            .into()
    }
}

/// What went wrong with a request, phrased for a person; clients prefix
/// the service ("the speech service …") or replace it by their own
/// sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// A configured timeout fired (connect, response or body).
    #[error("no answer in time")]
    Timeout,
    /// No exchange happened: DNS, refused connection, TLS, bad URL, proxy.
    /// `reason` is ureq's own text, unchanged.
    #[error("could not connect: {reason}")]
    Connect { reason: String },
    /// The connection broke while the body was being read.
    #[error("the connection broke ({reason})")]
    Interrupted { reason: String },
    /// A non-2xx answer. `body_excerpt` is one line: the JSON error message
    /// when there is one, a note for an HTML page, else the body's start.
    #[error("HTTP {status}: {body_excerpt}")]
    Status {
        status: u16,
        retry_after: Option<Duration>,
        body_excerpt: String,
    },
    /// The body is not what was expected (not UTF-8, not JSON).
    #[error("the answer is unreadable: {reason}")]
    Decode { reason: String },
    /// The body is larger than the caller's limit.
    #[error("the answer is larger than {limit} bytes")]
    TooLarge { limit: u64 },
}

impl From<ureq::Error> for HttpError {
    /// A failure of `call()`/`send()`: nothing was read yet.
    fn from(e: ureq::Error) -> Self {
        match e {
            ureq::Error::Timeout(_) => HttpError::Timeout,
            other => HttpError::Connect {
                reason: other.to_string(),
            },
        }
    }
}

/// A failure while reading a body through `std::io::Read` (ureq wraps its
/// own timeout in an `io::Error` of kind `Other`).
pub fn io_error(e: &std::io::Error) -> HttpError {
    let wrapped_timeout = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
        .is_some_and(|inner| matches!(inner, ureq::Error::Timeout(_)));
    if e.kind() == std::io::ErrorKind::TimedOut || wrapped_timeout {
        HttpError::Timeout
    } else {
        HttpError::Interrupted {
            reason: e.to_string(),
        }
    }
}

/// A failure of ureq's body reader.
fn body_error(e: ureq::Error, limit: u64) -> HttpError {
    match e {
        ureq::Error::Timeout(_) => HttpError::Timeout,
        ureq::Error::BodyExceedsLimit(_) => HttpError::TooLarge { limit },
        ureq::Error::Io(io) => io_error(&io),
        other => HttpError::Interrupted {
            reason: other.to_string(),
        },
    }
}

/// The response head the clients look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// `Retry-After` in seconds (clamped to 0–60 s); HTTP dates are ignored.
    pub retry_after: Option<Duration>,
    /// The `Content-Type` as sent, empty when absent.
    pub content_type: String,
}

impl Head {
    pub fn of(response: &ureq::http::Response<ureq::Body>) -> Self {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Self {
            status: response.status().as_u16(),
            retry_after: header("retry-after").and_then(|v| parse_retry_after(&v)),
            content_type: header("content-type").unwrap_or_default(),
        }
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// `Retry-After: <seconds>`, clamped to a minute.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| !s.is_nan())
        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 60.0)))
}

/// A whole response: head and at most `limit` bytes of body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub head: Head,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn is_success(&self) -> bool {
        self.head.is_success()
    }

    /// The body as UTF-8.
    pub fn text(&self) -> Result<&str, HttpError> {
        std::str::from_utf8(&self.body).map_err(|e| HttpError::Decode {
            reason: format!("not UTF-8 text ({e})"),
        })
    }

    /// The reply on 2xx, else [`HttpError::Status`].
    pub fn error_for_status(self) -> Result<Self, HttpError> {
        if self.is_success() {
            return Ok(self);
        }
        Err(HttpError::Status {
            status: self.head.status,
            retry_after: self.head.retry_after,
            body_excerpt: describe_error_body(&String::from_utf8_lossy(&self.body)),
        })
    }
}

/// Read the head and at most `limit` bytes of body; a longer body is
/// [`HttpError::TooLarge`].
pub fn read_reply(
    mut response: ureq::http::Response<ureq::Body>,
    limit: u64,
) -> Result<Reply, HttpError> {
    let head = Head::of(&response);
    let body = response
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| body_error(e, limit))?;
    Ok(Reply { head, body })
}

/// One line describing an error body: the JSON `error.message` (or
/// `message`, or `error` as a string) when there is one, a note for an HTML
/// page (proxies' error pages), else the first 200 characters.
pub fn describe_error_body(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(m) = v
            .pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(|m| m.as_str())
        {
            return m.replace('\n', " ");
        }
    }
    let t = body.trim_start();
    if t.starts_with('<') {
        return "an HTML page instead of JSON (a proxy or outage page?)".into();
    }
    if t.is_empty() {
        return "empty body".into();
    }
    let line: String = t.chars().take(200).collect();
    line.replace(['\n', '\r'], " ")
}

/// Peers that accept a request and then stall, for the deadline tests of
/// every HTTP client (LLM, Groq STT and TTS, the tools' JSON APIs): a dead
/// server must become a sentence in bounded time, whoever calls it.
#[cfg(test)]
pub(crate) mod stalling {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    /// How a stalled peer behaves once it has read the request head.
    #[derive(Clone, Copy)]
    pub enum Stall {
        /// Never answers.
        Silent,
        /// Sends a 200 head, then one body byte every 300 ms, forever.
        Trickle,
        /// A 429 asking to come back in a day.
        RetryTomorrow,
    }

    /// Start a peer on a free loopback port; its base URL.
    pub fn start(stall: Stall) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                    let _ = s.read(&mut buf);
                    match stall {
                        Stall::Silent => std::thread::sleep(Duration::from_secs(120)),
                        Stall::Trickle => {
                            let _ = s.write_all(
                                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
                            );
                            for _ in 0..400 {
                                std::thread::sleep(Duration::from_millis(300));
                                if s.write_all(b" ").is_err() {
                                    break;
                                }
                            }
                        }
                        Stall::RetryTomorrow => {
                            let body =
                                r#"{"error":{"message":"Rate limit reached","type":"tokens"}}"#;
                            let _ = write!(
                                s,
                                "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 86400\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            std::thread::sleep(Duration::from_secs(5));
                        }
                    }
                });
            }
        });
        format!("http://{addr}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot HTTP server answering `raw` to the first request.
    fn serve_once(raw: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(&raw);
            }
        });
        format!("http://{addr}/")
    }

    #[test]
    fn settings_default_to_the_earshot_user_agent() {
        let s = HttpSettings::with_deadline(Duration::from_secs(3));
        assert_eq!(s.global_timeout, Some(Duration::from_secs(3)));
        assert!(s.user_agent.starts_with("earshot/"));
        let agent = s.agent();
        assert!(!agent.config().http_status_as_error());
    }

    #[test]
    fn statuses_become_typed_errors_with_one_line_excerpts() {
        let body = r#"{"error":{"message":"slow\ndown now"}}"#;
        let raw = format!(
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes();
        let url = serve_once(raw);
        let agent = HttpSettings::with_deadline(Duration::from_secs(5)).agent();
        let response = agent.get(&url).call().unwrap();
        let reply = read_reply(response, 1024).unwrap();
        assert_eq!(reply.head.status, 429);
        assert_eq!(reply.head.content_type, "application/json");
        let e = reply.error_for_status().unwrap_err();
        assert_eq!(
            e,
            HttpError::Status {
                status: 429,
                retry_after: Some(Duration::from_secs(2)),
                body_excerpt: "slow down now".into()
            }
        );
        assert_eq!(e.to_string(), "HTTP 429: slow down now");
    }

    #[test]
    fn a_body_over_the_limit_is_too_large() {
        let mut raw =
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n".to_vec();
        raw.extend_from_slice(&[b'x'; 100]);
        let url = serve_once(raw);
        let agent = HttpSettings::with_deadline(Duration::from_secs(5)).agent();
        let response = agent.get(&url).call().unwrap();
        assert_eq!(
            read_reply(response, 10).unwrap_err(),
            HttpError::TooLarge { limit: 10 }
        );
    }

    #[test]
    fn a_refused_connection_and_a_silent_server_are_told_apart() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let agent = HttpSettings::with_deadline(Duration::from_secs(2)).agent();
        let e = HttpError::from(
            agent
                .get(&format!("http://127.0.0.1:{port}/"))
                .call()
                .unwrap_err(),
        );
        assert!(matches!(e, HttpError::Connect { .. }), "{e:?}");
        assert!(e.to_string().starts_with("could not connect: "), "{e}");

        // Accepts and never answers.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", silent.local_addr().unwrap());
        let agent = HttpSettings::with_deadline(Duration::from_millis(300)).agent();
        let e = HttpError::from(agent.get(&url).call().unwrap_err());
        assert_eq!(e, HttpError::Timeout);
        drop(silent);
    }

    #[test]
    fn error_bodies_are_described_in_one_line() {
        assert_eq!(
            describe_error_body(r#"{"error":{"message":"Invalid API Key"}}"#),
            "Invalid API Key"
        );
        assert!(describe_error_body("<html><body>502</body></html>").contains("HTML"));
        assert_eq!(describe_error_body("  "), "empty body");
        assert_eq!(describe_error_body("a\nb"), "a b");
        assert_eq!(
            parse_retry_after(" 1.5 "),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("600"), Some(Duration::from_secs(60)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn io_errors_wrapping_a_timeout_are_timeouts() {
        let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "slow");
        assert_eq!(io_error(&timed_out), HttpError::Timeout);
        let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(
            io_error(&broken).to_string(),
            "the connection broke (reset)"
        );
    }
}
