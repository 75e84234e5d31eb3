//! Private email over IMAP: `[email]`, and the agent's `list_emails`,
//! `read_email` and `mark_read` tools (offered as soon as `[email]` is
//! configured; `mark_read` only with `read_only = false`). Nothing is ever
//! deleted or sent. The IMAP session is `email_imap.rs`, MIME → speakable
//! text `email_text.rs`; the intent tree's mail actions read through the
//! same [`Mailbox`] and speak with [`spoken_list`] / [`spoken_message`].

use std::sync::Arc;

use chrono::{DateTime, Local, NaiveDate};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{Tool, ToolError, ToolRegistry, ToolsConfig};
pub use crate::tools::email_imap::{Filter, MailError, Mailbox, Message, Summary};

/// The email tool names (in `tools::TOOLS`).
pub const NAMES: &[&str] = &["list_emails", "read_email", "mark_read"];

/// `[email]`. The password comes only from the environment
/// (`EMAIL_PASSWORD`), never the file; `Debug` prints it as `***`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// The IMAP server, e.g. `imap.fastmail.com`; empty = no email.
    pub imap_host: String,
    /// 993 = implicit TLS; any other port starts with STARTTLS (unless
    /// `implicit_tls`).
    pub imap_port: u16,
    /// Implicit TLS on a port other than 993 (a provider's non-standard
    /// IMAPS port); 993 always uses it.
    pub implicit_tls: bool,
    /// The login name (often the address).
    pub username: String,
    /// From `EMAIL_PASSWORD` only (an app password for Gmail or iCloud).
    #[serde(skip)]
    pub password: String,
    /// The mailbox read.
    pub mailbox: String,
    /// Allow an unencrypted connection on a port other than 993 (a
    /// server on this machine only).
    pub allow_plaintext: bool,
    /// A PEM file of extra CA certificates (a self-signed server's).
    pub ca_file: String,
    /// `true`: never change anything on the server (`mark_read` is not
    /// offered).
    pub read_only: bool,
    /// Longest one read or write on the connection may wait.
    pub timeout_ms: u64,
    /// Most bytes of one message fetched (a 50 MB message is read from
    /// its first part only).
    pub max_message_bytes: usize,
    /// Longest body handed to the model or spoken, in characters.
    pub max_body_chars: usize,
}

impl Default for EmailConfig {
    fn default() -> Self {
        Self {
            imap_host: String::new(),
            imap_port: 993,
            implicit_tls: false,
            username: String::new(),
            password: String::new(),
            mailbox: "INBOX".into(),
            allow_plaintext: false,
            ca_file: String::new(),
            read_only: true,
            timeout_ms: 4000,
            max_message_bytes: 256 * 1024,
            max_body_chars: 1500,
        }
    }
}

impl std::fmt::Debug for EmailConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exhaustive, so a new field has to be placed here (secret or not).
        let Self {
            imap_host,
            imap_port,
            implicit_tls,
            username,
            password: _,
            mailbox,
            allow_plaintext,
            ca_file,
            read_only,
            timeout_ms,
            max_message_bytes,
            max_body_chars,
        } = self;
        f.debug_struct("EmailConfig")
            .field("imap_host", imap_host)
            .field("imap_port", imap_port)
            .field("implicit_tls", implicit_tls)
            .field("username", username)
            .field("password", &"***")
            .field("mailbox", mailbox)
            .field("allow_plaintext", allow_plaintext)
            .field("ca_file", ca_file)
            .field("read_only", read_only)
            .field("timeout_ms", timeout_ms)
            .field("max_message_bytes", max_message_bytes)
            .field("max_body_chars", max_body_chars)
            .finish()
    }
}

impl EmailConfig {
    /// Host and username set (the password may still be missing: the
    /// server then refuses the login with a sentence naming it).
    pub fn configured(&self) -> bool {
        !self.imap_host.trim().is_empty() && !self.username.trim().is_empty()
    }
}

/// Register the enabled email tools when `[email]` is configured; else
/// each answers with the sentence saying what to set.
pub fn offer(registry: &mut ToolRegistry, tools: &ToolsConfig, email: &EmailConfig) {
    let enabled = |name: &str| tools.enabled.iter().any(|e| e == name);
    let Some(mailbox) = Mailbox::new(email) else {
        for name in NAMES {
            if enabled(name) {
                registry.mark_unavailable(name, MailError::NotConfigured.to_string());
            }
        }
        return;
    };
    for name in NAMES {
        if !enabled(name) {
            continue;
        }
        if *name == "mark_read" && email.read_only {
            registry.mark_unavailable(name, MailError::ReadOnly.to_string());
            continue;
        }
        registry.register(Arc::new(EmailTool {
            name,
            mailbox: mailbox.clone(),
        }));
    }
}

struct EmailTool {
    name: &'static str,
    mailbox: Mailbox,
}

fn failed(e: MailError) -> ToolError {
    match e {
        MailError::BadArgument(m) => ToolError::BadArguments(m),
        other => ToolError::Failed(other.to_string()),
    }
}

/// The filters shared by `list_emails` and `read_email`.
pub fn filter_from_args(args: &Value, default_limit: usize) -> Result<Filter, ToolError> {
    let limit = match args.get("limit") {
        None | Some(Value::Null) => default_limit,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(n @ 1..=20) => n as usize,
            _ => {
                return Err(ToolError::BadArguments(
                    "limit must be a whole number from 1 to 20".into(),
                ))
            }
        },
    };
    let unread = match args.get("unread") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Some(s == "true"),
        Some(_) => {
            return Err(ToolError::BadArguments(
                "unread must be true or false".into(),
            ))
        }
    };
    let text = |key: &str| -> Result<Option<String>, ToolError> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) if s.chars().count() <= 200 => Ok(Some(s.trim().to_string())),
            Some(_) => Err(ToolError::BadArguments(format!(
                "{key} must be a short piece of text"
            ))),
        }
    };
    let since = match text("since")? {
        None => None,
        Some(s) => Some(NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_err(|_| {
            ToolError::BadArguments(format!("since must be a date like 2026-12-01, not \"{s}\""))
        })?),
    };
    Ok(Filter {
        limit,
        unread,
        from: text("from")?,
        subject: text("subject")?,
        since,
    })
}

fn id_arg(args: &Value) -> Result<Option<u32>, ToolError> {
    match args.get("id") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .filter(|n| *n >= 1 && *n <= u32::MAX as u64)
            .map(|n| Some(n as u32))
            .ok_or_else(|| {
                ToolError::BadArguments("id must be a message id from list_emails".into())
            }),
    }
}

const FILTER_PROPS: &str = r#"{
  "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "how many (default 5)"},
  "unread": {"type": "boolean", "description": "only unread (true) or only read (false)"},
  "from": {"type": "string", "description": "text in the sender's name or address"},
  "subject": {"type": "string", "description": "text in the subject"},
  "since": {"type": "string", "description": "YYYY-MM-DD: received on or after this day"}
}"#;

impl Tool for EmailTool {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        match self.name {
            "list_emails" => "List emails in the user's inbox, newest first: sender, date, subject, unread flag and id. Filters are optional.",
            "read_email" => "Read one email as plain text: the newest that matches the filters, or the one with this id (from list_emails). Never marks it read.",
            _ => "Mark one email as read, by its id from list_emails.",
        }
    }

    fn parameters(&self) -> Value {
        let mut props: Value = serde_json::from_str(FILTER_PROPS).unwrap_or_else(|_| json!({}));
        match self.name {
            "list_emails" => json!({"type": "object", "properties": props}),
            "read_email" => {
                if let Some(map) = props.as_object_mut() {
                    map.remove("limit");
                    map.insert(
                        "id".into(),
                        json!({"type": "integer", "description": "a message id from list_emails"}),
                    );
                }
                json!({"type": "object", "properties": props})
            }
            _ => json!({
                "type": "object",
                "properties": {"id": {"type": "integer", "description": "a message id from list_emails"}},
                "required": ["id"]
            }),
        }
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        match self.name {
            "list_emails" => {
                let filter = filter_from_args(args, 5)?;
                let found = self.mailbox.list(&filter).map_err(failed)?;
                Ok(listing(&found, &filter))
            }
            "read_email" => {
                let message = match id_arg(args)? {
                    Some(id) => self.mailbox.read(id).map_err(failed)?,
                    None => self
                        .mailbox
                        .read_newest(&filter_from_args(args, 1)?)
                        .map_err(failed)?,
                };
                Ok(match message {
                    Some(m) => written_message(&m),
                    None => "No email matches.".into(),
                })
            }
            _ => {
                let id = id_arg(args)?
                    .ok_or_else(|| ToolError::BadArguments("id is required".into()))?;
                if self.mailbox.mark_read(id).map_err(failed)? {
                    Ok(format!("Email {id} is marked read."))
                } else {
                    Err(ToolError::Failed(format!(
                        "There is no email with id {id}."
                    )))
                }
            }
        }
    }
}

/// "Tue 1 Dec 18:04" in local time, or "" for no date.
pub fn short_date(rfc3339: &str) -> String {
    DateTime::parse_from_rfc3339(rfc3339)
        .map(|d| {
            d.with_timezone(&Local)
                .format("%a %-d %b %H:%M")
                .to_string()
        })
        .unwrap_or_default()
}

/// The sender as a person would say it: the name, else the address.
pub fn sender(s: &Summary) -> String {
    if !s.from_name.is_empty() {
        s.from_name.clone()
    } else if !s.from_address.is_empty() {
        s.from_address.clone()
    } else {
        "an unknown sender".into()
    }
}

/// The list the model reads: one line per message.
fn listing(found: &[Summary], filter: &Filter) -> String {
    if found.is_empty() {
        return if filter.unread == Some(true) {
            "No unread emails match.".into()
        } else {
            "No emails match.".into()
        };
    }
    found
        .iter()
        .map(|s| {
            let from = if s.from_address.is_empty() || s.from_name.is_empty() {
                sender(s)
            } else {
                format!("{} <{}>", s.from_name, s.from_address)
            };
            format!(
                "id {} · {} · from {} · {} · {}",
                s.id,
                if s.unread { "unread" } else { "read" },
                from,
                short_date(&s.date),
                if s.subject.is_empty() {
                    "(no subject)"
                } else {
                    &s.subject
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One message as the model reads it.
fn written_message(m: &Message) -> String {
    let s = &m.summary;
    let mut out = format!(
        "From: {}{}\nDate: {}\nSubject: {}\n",
        sender(s),
        if s.from_address.is_empty() || s.from_name.is_empty() {
            String::new()
        } else {
            format!(" <{}>", s.from_address)
        },
        short_date(&s.date),
        s.subject
    );
    if !m.attachments.is_empty() {
        out.push_str(&format!(
            "Attachments (not read): {}\n",
            m.attachments.join(", ")
        ));
    }
    out.push('\n');
    if m.body.trim().is_empty() {
        out.push_str("(no text)");
    } else {
        out.push_str(&m.body);
    }
    if m.truncated {
        out.push_str("\n(The rest of this long email was not read.)");
    }
    out
}

/// A short spoken answer for a listing: "You have 3 unread emails; the
/// newest is from Priya about Saturday's dinner."
pub fn spoken_list(found: &[Summary], unread_only: bool, from: Option<&str>) -> String {
    let kind = if unread_only { "unread email" } else { "email" };
    let who = from.map(|f| format!(" from {f}")).unwrap_or_default();
    match found {
        [] => format!("You have no {kind}s{who}."),
        [one] if from.is_some() => format!("You have one {kind}{who}{}.", about(one)),
        [one] => format!(
            "You have one {kind}{who}: from {}{}.",
            sender(one),
            about(one)
        ),
        [first, ..] => format!(
            "You have {}{} {kind}s{who}; the newest is {}.",
            if found.len() >= 20 { "at least " } else { "" },
            found.len(),
            if from.is_some() && !first.subject.is_empty() {
                about(first).trim_start().to_string()
            } else {
                format!("from {}{}", sender(first), about(first))
            }
        ),
    }
}

/// " about Saturday's dinner" ("Re:"/"Fwd:" dropped), or "".
fn about(s: &Summary) -> String {
    let mut subject = s.subject.trim();
    loop {
        let lower = subject.to_lowercase();
        match ["re:", "fwd:", "fw:", "aw:"]
            .iter()
            .find(|p| lower.starts_with(*p))
        {
            Some(p) => subject = subject[p.len()..].trim_start(),
            None => break,
        }
    }
    let subject = subject.trim_end_matches(['.', '!', '?']);
    if subject.is_empty() {
        String::new()
    } else {
        format!(" about {subject}")
    }
}

/// A short spoken reading of one message (the first few sentences).
pub fn spoken_message(m: &Message) -> String {
    let s = &m.summary;
    let mut out = format!("From {}{}.", sender(s), about(s));
    let body: String = m.body.split_whitespace().collect::<Vec<_>>().join(" ");
    let body = first_sentences(&body, 300);
    if body.is_empty() {
        if !m.attachments.is_empty() {
            out.push_str(&format!(
                " It has no text, only {}.",
                if m.attachments.len() == 1 {
                    "an attachment".to_string()
                } else {
                    format!("{} attachments", m.attachments.len())
                }
            ));
        }
    } else {
        out.push_str(&format!(" It says: {body}"));
    }
    out
}

fn first_sentences(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    match cut.rfind(['.', '!', '?']) {
        Some(at) if at > max / 3 => cut[..=at].to_string(),
        _ => match cut.rfind(' ') {
            Some(at) => format!("{}…", &cut[..at]),
            None => cut,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(from: &str, subject: &str) -> Summary {
        Summary {
            id: 1,
            from_name: from.into(),
            from_address: "x@example.org".into(),
            date: String::new(),
            subject: subject.into(),
            unread: true,
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let cfg = EmailConfig {
            password: "planted-app-password".into(),
            ..Default::default()
        };
        let shown = format!("{cfg:?}");
        assert!(
            !shown.contains("planted") && shown.contains("***"),
            "{shown}"
        );
    }

    #[test]
    fn filters_are_checked() {
        let f = filter_from_args(
            &json!({"limit": 3, "unread": true, "from": " Priya ", "since": "2026-12-01"}),
            5,
        )
        .unwrap();
        assert_eq!(f.limit, 3);
        assert_eq!(f.unread, Some(true));
        assert_eq!(f.from.as_deref(), Some("Priya"));
        assert_eq!(f.since, NaiveDate::from_ymd_opt(2026, 12, 1));
        assert!(filter_from_args(&json!({"limit": 50}), 5).is_err());
        assert!(filter_from_args(&json!({"since": "yesterday"}), 5).is_err());
        assert!(filter_from_args(&json!({"unread": 3}), 5).is_err());
        assert_eq!(filter_from_args(&json!({}), 5).unwrap().limit, 5);
    }

    #[test]
    fn answers_are_speakable() {
        let three = vec![
            summary("Priya", "Saturday's dinner"),
            summary("Sam", "x"),
            summary("Ana", "y"),
        ];
        assert_eq!(
            spoken_list(&three, true, None),
            "You have 3 unread emails; the newest is from Priya about Saturday's dinner."
        );
        assert_eq!(
            spoken_list(&[], true, Some("Priya")),
            "You have no unread emails from Priya."
        );
        let two = vec![
            summary("Priya", "Re: Saturday's dinner"),
            summary("Priya", "x"),
        ];
        assert_eq!(
            spoken_list(&two, false, Some("Priya")),
            "You have 2 emails from Priya; the newest is about Saturday's dinner."
        );
        let m = Message {
            summary: summary("Priya", "Photos"),
            body: String::new(),
            attachments: vec!["IMG_1.jpg".into()],
            truncated: false,
        };
        assert_eq!(
            spoken_message(&m),
            "From Priya about Photos. It has no text, only an attachment."
        );
    }

    #[test]
    fn unconfigured_email_says_what_to_set() {
        let mut reg = ToolRegistry::default();
        offer(&mut reg, &ToolsConfig::default(), &EmailConfig::default());
        assert!(reg.get("list_emails").is_none());
        let said = reg.call("list_emails", "{}").unwrap_err().to_string();
        assert!(
            said.contains("EMAIL_PASSWORD") && said.contains("imap_host"),
            "{said}"
        );
        let cfg = EmailConfig {
            imap_host: "imap.example.org".into(),
            username: "me".into(),
            ..Default::default()
        };
        let mut reg = ToolRegistry::default();
        offer(&mut reg, &ToolsConfig::default(), &cfg);
        assert!(reg.get("list_emails").is_some() && reg.get("read_email").is_some());
        assert!(reg.get("mark_read").is_none(), "read_only hides mark_read");
    }
}
