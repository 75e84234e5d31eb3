//! The IMAP side of the email tools: one short session per call (connect,
//! TLS, login, `EXAMINE`, search, fetch, logout), bounded in time (socket
//! timeouts) and memory (only the first `max_message_bytes` of a message
//! are fetched, with `BODY.PEEK` so reading never marks it seen).
//!
//! TLS is rustls (already in the build through ureq) with the public roots
//! plus `[email] ca_file`; the `imap` crate speaks the protocol over the
//! stream we hand it, so no second TLS stack is pulled in. Implicit TLS on
//! port 993, STARTTLS elsewhere, plain text only with `allow_plaintext`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;

use super::email::EmailConfig;
use super::email_text::{self, Parsed};

/// Most messages a search considers when it must filter on this side
/// (non-ASCII sender or subject text).
const LOCAL_FILTER_WINDOW: usize = 100;

/// Longest header block fetched per listed message.
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Why a mail request failed; each is one sentence a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("Email is not set up: set [email] imap_host and username in earshot.toml and EMAIL_PASSWORD in the environment.")]
    NotConfigured,
    #[error("The mail server refused the login: check EMAIL_PASSWORD and [email] username.")]
    Login,
    #[error("I couldn't reach the mail server {0}: {1}.")]
    Connect(String, String),
    #[error("The mail server's certificate was not accepted ({0}); check [email] imap_host, or set [email] ca_file for a private server.")]
    Certificate(String),
    #[error("The mail server {0} offers no TLS (STARTTLS); use port 993, or set [email] allow_plaintext = true for a server on this machine.")]
    NoStartTls(String),
    #[error("There is no mailbox named \"{0}\" on the mail server; check [email] mailbox.")]
    NoMailbox(String),
    #[error("The mail server closed the connection while reading mail; try again in a moment.")]
    Dropped,
    #[error("The mail server did not answer in time.")]
    Timeout,
    #[error("The mail server answered something unexpected ({0}).")]
    Protocol(String),
    #[error("Marking mail read is turned off ([email] read_only = true).")]
    ReadOnly,
    #[error("{0}")]
    BadArgument(String),
}

/// What a search asks for (every part optional).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// 1–20.
    pub limit: usize,
    pub unread: Option<bool>,
    /// Text in the sender's name or address.
    pub from: Option<String>,
    /// Text in the subject.
    pub subject: Option<String>,
    pub since: Option<NaiveDate>,
}

/// One message as listed: who, when, what, whether it is unread.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    /// The IMAP UID (stable while the mailbox's UIDVALIDITY is).
    pub id: u32,
    pub from_name: String,
    pub from_address: String,
    /// RFC 3339, or empty when the message has no readable date.
    pub date: String,
    pub subject: String,
    pub unread: bool,
}

/// One message read: its summary plus the plain text.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Message {
    pub summary: Summary,
    pub body: String,
    pub attachments: Vec<String>,
    /// Only the first part of a very large message was fetched.
    pub truncated: bool,
}

/// The configured mailbox. Cheap to clone; every call opens its own
/// session, so nothing is held between turns.
#[derive(Clone)]
pub struct Mailbox {
    cfg: Arc<EmailConfig>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").field("cfg", &self.cfg).finish()
    }
}

/// The one stream type the `imap` crate drives.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stream::Plain(_) => "Stream::Plain",
            Stream::Tls(_) => "Stream::Tls",
        })
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

type Session = imap::Session<Stream>;

impl Mailbox {
    /// `None` when `[email]` is not configured (host and username).
    pub fn new(cfg: &EmailConfig) -> Option<Self> {
        cfg.configured().then(|| Self {
            cfg: Arc::new(cfg.clone()),
        })
    }

    /// The configuration this mailbox reads.
    pub fn config(&self) -> &EmailConfig {
        &self.cfg
    }

    /// Messages matching `filter`, newest first, at most `filter.limit`.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Summary>, MailError> {
        let mut session = self.open(false)?;
        let result = self.list_in(&mut session, filter);
        let _ = session.logout();
        result
    }

    /// The newest message matching `filter`, read (never marked seen).
    pub fn read_newest(&self, filter: &Filter) -> Result<Option<Message>, MailError> {
        let mut session = self.open(false)?;
        let one = Filter {
            limit: 1,
            ..filter.clone()
        };
        let result = self
            .search(&mut session, &one)
            .and_then(|uids| match uids.first() {
                Some(uid) => self.fetch_message(&mut session, *uid),
                None => Ok(None),
            });
        let _ = session.logout();
        result
    }

    /// The message with UID `id`, read (never marked seen).
    pub fn read(&self, id: u32) -> Result<Option<Message>, MailError> {
        let mut session = self.open(false)?;
        let result = self.fetch_message(&mut session, id);
        let _ = session.logout();
        result
    }

    /// Set `\Seen` on message `id`; `Ok(false)` when there is no such message.
    pub fn mark_read(&self, id: u32) -> Result<bool, MailError> {
        if self.cfg.read_only {
            return Err(MailError::ReadOnly);
        }
        let mut session = self.open(true)?;
        let result = session
            .uid_store(id.to_string(), "+FLAGS.SILENT (\\Seen)")
            .map_err(|e| self.classify(e))
            .and_then(|_| {
                session
                    .uid_search(format!("UID {id}"))
                    .map_err(|e| self.classify(e))
            })
            .map(|found| !found.is_empty());
        let _ = session.logout();
        result
    }

    /// Log in and open the mailbox: `(messages, unread)` (doctor).
    pub fn check(&self) -> Result<(u32, usize), MailError> {
        let mut session = self.open(false)?;
        let result = (|| {
            let exists = session
                .examine(&self.cfg.mailbox)
                .map_err(|e| self.classify(e))?;
            let unseen = session.uid_search("UNSEEN").map_err(|e| self.classify(e))?;
            Ok((exists.exists, unseen.len()))
        })();
        let _ = session.logout();
        result
    }

    fn list_in(&self, session: &mut Session, filter: &Filter) -> Result<Vec<Summary>, MailError> {
        let uids = self.search(session, filter)?;
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let set = uids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let fetches = session
            .uid_fetch(
                &set,
                format!("(UID FLAGS BODY.PEEK[HEADER]<0.{MAX_HEADER_BYTES}>)"),
            )
            .map_err(|e| self.classify(e))?;
        let mut out: Vec<Summary> = fetches
            .iter()
            .filter_map(|f| {
                let uid = f.uid?;
                let parsed = email_text::parse(f.header().unwrap_or_default(), usize::MAX);
                Some(summary(uid, is_unread(f.flags()), &parsed))
            })
            .collect();
        out.sort_by_key(|s| std::cmp::Reverse(s.id));
        Ok(out)
    }

    /// UIDs matching the filter, newest first, at most `filter.limit`. The
    /// server filters what it can in ASCII; non-ASCII sender or subject
    /// text is matched here against the newest messages' decoded headers.
    fn search(&self, session: &mut Session, filter: &Filter) -> Result<Vec<u32>, MailError> {
        session
            .examine(&self.cfg.mailbox)
            .map_err(|e| self.classify(e))?;
        let mut criteria = Vec::new();
        match filter.unread {
            Some(true) => criteria.push("UNSEEN".to_string()),
            Some(false) => criteria.push("SEEN".to_string()),
            None => {}
        }
        if let Some(day) = filter.since {
            criteria.push(format!("SINCE {}", day.format("%-d-%b-%Y")));
        }
        let mut local = Vec::new();
        for (key, text) in [("FROM", &filter.from), ("SUBJECT", &filter.subject)] {
            if let Some(text) = text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                if text.is_ascii() && !text.contains(['\r', '\n']) {
                    criteria.push(format!("{key} {}", quote(text)));
                } else {
                    local.push((key, text.to_lowercase()));
                }
            }
        }
        if criteria.is_empty() {
            criteria.push("ALL".into());
        }
        let found = session
            .uid_search(criteria.join(" "))
            .map_err(|e| self.classify(e))?;
        let mut uids: Vec<u32> = found.into_iter().collect();
        uids.sort_unstable_by(|a, b| b.cmp(a));
        let limit = filter.limit.clamp(1, 20);
        if local.is_empty() {
            uids.truncate(limit);
            return Ok(uids);
        }
        uids.truncate(LOCAL_FILTER_WINDOW);
        let set = uids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        if set.is_empty() {
            return Ok(Vec::new());
        }
        let fetches = session
            .uid_fetch(
                &set,
                format!("(UID BODY.PEEK[HEADER]<0.{MAX_HEADER_BYTES}>)"),
            )
            .map_err(|e| self.classify(e))?;
        let mut kept: Vec<u32> = fetches
            .iter()
            .filter_map(|f| {
                let parsed = email_text::parse(f.header().unwrap_or_default(), usize::MAX);
                let from = format!("{} {}", parsed.from_name, parsed.from_address).to_lowercase();
                let subject = parsed.subject.to_lowercase();
                local
                    .iter()
                    .all(|(key, text)| match *key {
                        "FROM" => from.contains(text.as_str()),
                        _ => subject.contains(text.as_str()),
                    })
                    .then_some(f.uid)
                    .flatten()
            })
            .collect();
        kept.sort_unstable_by(|a, b| b.cmp(a));
        kept.truncate(limit);
        Ok(kept)
    }

    fn fetch_message(&self, session: &mut Session, uid: u32) -> Result<Option<Message>, MailError> {
        session
            .examine(&self.cfg.mailbox)
            .map_err(|e| self.classify(e))?;
        let cap = self.cfg.max_message_bytes.max(1024);
        let fetches = session
            .uid_fetch(
                uid.to_string(),
                format!("(UID FLAGS RFC822.SIZE BODY.PEEK[]<0.{cap}>)"),
            )
            .map_err(|e| self.classify(e))?;
        let Some(f) = fetches.iter().find(|f| f.uid == Some(uid)) else {
            return Ok(None);
        };
        let raw = f.body().unwrap_or_default();
        let truncated = f.size.map(|s| s as usize > raw.len()).unwrap_or(false);
        let parsed = email_text::parse(raw, self.cfg.max_body_chars);
        Ok(Some(Message {
            summary: summary(uid, is_unread(f.flags()), &parsed),
            body: parsed.body,
            attachments: parsed.attachments,
            truncated: truncated || parsed.truncated,
        }))
    }

    /// Connect, secure, log in; with `write`, `SELECT` (else read-only).
    fn open(&self, write: bool) -> Result<Session, MailError> {
        let cfg = &self.cfg;
        let timeout = Duration::from_millis(cfg.timeout_ms.max(100));
        let host = cfg.imap_host.trim();
        let place = format!("{host}:{}", cfg.imap_port);
        let addrs: Vec<_> = (host, cfg.imap_port)
            .to_socket_addrs()
            .map_err(|e| MailError::Connect(place.clone(), e.to_string()))?
            .collect();
        let mut last = None;
        let mut tcp = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let tcp = tcp.ok_or_else(|| {
            MailError::Connect(
                place.clone(),
                last.map(|e| e.to_string())
                    .unwrap_or_else(|| "no address found".into()),
            )
        })?;
        tcp.set_read_timeout(Some(timeout))
            .and_then(|_| tcp.set_write_timeout(Some(timeout)))
            .map_err(|e| MailError::Connect(place.clone(), e.to_string()))?;
        let mut client = if cfg.imap_port == 993 || cfg.implicit_tls {
            let mut c = imap::Client::new(self.tls(tcp)?);
            c.read_greeting().map_err(|e| self.classify(e))?;
            c
        } else if cfg.allow_plaintext {
            let mut c = imap::Client::new(Stream::Plain(tcp));
            c.read_greeting().map_err(|e| self.classify(e))?;
            c
        } else {
            let tcp = starttls(tcp, &place).map_err(|e| match e {
                StartTls::Refused => MailError::NoStartTls(place.clone()),
                StartTls::Io(e) => self.classify(imap::Error::Io(e)),
            })?;
            imap::Client::new(self.tls(tcp)?)
        };
        client.debug = false;
        let mut session =
            client
                .login(cfg.username.trim(), &cfg.password)
                .map_err(|(e, _)| match e {
                    imap::Error::No(_) | imap::Error::Bad(_) | imap::Error::Validate(_) => {
                        MailError::Login
                    }
                    other => self.classify(other),
                })?;
        if write {
            session.select(&cfg.mailbox).map_err(|e| self.classify(e))?;
        }
        Ok(session)
    }

    /// TLS over `tcp`, the handshake finished here so a certificate fault
    /// is named as such.
    fn tls(&self, mut tcp: TcpStream) -> Result<Stream, MailError> {
        let host = self.cfg.imap_host.trim().to_string();
        let config = tls_config(&self.cfg)?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| MailError::Connect(host.clone(), "not a valid host name".into()))?;
        let mut conn = rustls::ClientConnection::new(Arc::new(config), name)
            .map_err(|e| MailError::Certificate(e.to_string()))?;
        while conn.is_handshaking() {
            if let Err(e) = conn.complete_io(&mut tcp) {
                return Err(match tls_fault(&e) {
                    Some(fault) => MailError::Certificate(fault),
                    None => self.classify(imap::Error::Io(e)),
                });
            }
        }
        Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp))))
    }

    fn classify(&self, e: imap::Error) -> MailError {
        match e {
            imap::Error::Io(io) => match io.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => MailError::Timeout,
                std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe => MailError::Dropped,
                _ => match tls_fault(&io) {
                    Some(fault) => MailError::Certificate(fault),
                    None => MailError::Protocol(io.to_string()),
                },
            },
            imap::Error::ConnectionLost | imap::Error::Bye(_) => MailError::Dropped,
            imap::Error::No(no) if no.information.to_lowercase().contains("mailbox") => {
                MailError::NoMailbox(self.cfg.mailbox.clone())
            }
            imap::Error::No(no) => MailError::Protocol(no.information),
            imap::Error::Bad(bad) => MailError::Protocol(bad.information),
            imap::Error::Parse(_) => MailError::Protocol("a reply that could not be read".into()),
            other => MailError::Protocol(short(&other.to_string())),
        }
    }
}

/// Whether the message is unread (no `\Seen`).
fn is_unread(flags: &[imap::types::Flag<'_>]) -> bool {
    !flags.iter().any(|f| matches!(f, imap::types::Flag::Seen))
}

fn summary(uid: u32, unread: bool, p: &Parsed) -> Summary {
    Summary {
        id: uid,
        from_name: p.from_name.clone(),
        from_address: p.from_address.clone(),
        date: p.date.clone(),
        subject: p.subject.clone(),
        unread,
    }
}

/// An IMAP quoted string (ASCII only; `"` and `\` escaped).
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn short(text: &str) -> String {
    text.chars().take(120).collect()
}

/// The rustls error inside an I/O error, as a short phrase.
fn tls_fault(e: &std::io::Error) -> Option<String> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match inner {
        rustls::Error::InvalidCertificate(c) => format!("invalid certificate: {c:?}"),
        other => other.to_string(),
    })
}

/// Public roots plus `ca_file`'s certificates.
fn tls_config(cfg: &EmailConfig) -> Result<rustls::ClientConfig, MailError> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let ca = cfg.ca_file.trim();
    if !ca.is_empty() {
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(ca).map_err(|e| {
            MailError::Certificate(format!("cannot read [email] ca_file {ca}: {e}"))
        })?;
        for cert in certs {
            let cert = cert.map_err(|e| {
                MailError::Certificate(format!("[email] ca_file {ca} is not PEM certificates: {e}"))
            })?;
            roots.add(cert).map_err(|e| {
                MailError::Certificate(format!("[email] ca_file {ca} holds a bad certificate: {e}"))
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| MailError::Certificate(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

enum StartTls {
    Refused,
    Io(std::io::Error),
}

/// Read the greeting, ask for STARTTLS, and hand the socket back once the
/// server said OK (the TLS greeting is not repeated).
fn starttls(tcp: TcpStream, _place: &str) -> Result<TcpStream, StartTls> {
    let mut reader = BufReader::new(tcp.try_clone().map_err(StartTls::Io)?);
    let mut line = String::new();
    read_line(&mut reader, &mut line)?;
    if !line.starts_with("* OK") {
        return Err(StartTls::Refused);
    }
    let mut writer = tcp;
    writer.write_all(b"s0 STARTTLS\r\n").map_err(StartTls::Io)?;
    loop {
        line.clear();
        read_line(&mut reader, &mut line)?;
        if let Some(rest) = line.strip_prefix("s0 ") {
            // Nothing may be buffered past the tagged reply (RFC 3501 §6.2.1).
            if !reader.buffer().is_empty() {
                return Err(StartTls::Refused);
            }
            return if rest.starts_with("OK") {
                Ok(writer)
            } else {
                Err(StartTls::Refused)
            };
        }
    }
}

fn read_line(reader: &mut BufReader<TcpStream>, line: &mut String) -> Result<(), StartTls> {
    let mut limited = (&mut *reader).take(4096);
    let n = limited.read_line(line).map_err(StartTls::Io)?;
    if n == 0 {
        return Err(StartTls::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_text_is_quoted_safely() {
        assert_eq!(quote(r#"Priya "P" \ S"#), r#""Priya \"P\" \\ S""#);
    }

    #[test]
    fn an_unconfigured_mailbox_is_none() {
        assert!(Mailbox::new(&EmailConfig::default()).is_none());
    }
}
