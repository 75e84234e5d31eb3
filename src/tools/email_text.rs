//! A raw message (or just its header) → what a voice assistant can say:
//! sender, date, subject, and plain text with HTML converted (no tag left),
//! quoted replies and signatures trimmed, attachments named not read, the
//! length capped. MIME and charsets are `mail-parser`'s job; it is lenient,
//! so a broken structure or an unknown charset still gives text, never a
//! panic.

use mail_parser::{MessageParser, MimeHeaders, PartType};

/// What one message says, ready for the tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub from_name: String,
    pub from_address: String,
    /// RFC 3339 or empty.
    pub date: String,
    pub subject: String,
    pub body: String,
    pub attachments: Vec<String>,
    /// The body was cut at the cap.
    pub truncated: bool,
}

/// Most attachment names listed.
const MAX_ATTACHMENTS: usize = 10;

/// Parse `raw` (a whole message, its first part, or only its header);
/// the body is capped at `max_chars` characters.
pub fn parse(raw: &[u8], max_chars: usize) -> Parsed {
    let Some(msg) = MessageParser::default().parse(raw) else {
        return Parsed::default();
    };
    let (from_name, from_address) = msg
        .from()
        .and_then(|a| a.first())
        .map(|a| {
            (
                clean_line(a.name().unwrap_or_default()),
                clean_line(a.address().unwrap_or_default()),
            )
        })
        .unwrap_or_default();
    let date = msg.date().map(|d| d.to_rfc3339()).unwrap_or_default();
    let subject = clean_line(msg.subject().unwrap_or_default());
    let mut attachments: Vec<String> = msg
        .attachments()
        .take(MAX_ATTACHMENTS)
        .map(|p| {
            let name = p.attachment_name().map(clean_line).unwrap_or_default();
            if name.is_empty() {
                let kind = p
                    .content_type()
                    .map(|c| c.c_type.to_string())
                    .unwrap_or_else(|| "file".into());
                format!("an unnamed {kind}")
            } else {
                name
            }
        })
        .collect();
    let more = msg.attachment_count().saturating_sub(MAX_ATTACHMENTS);
    if more > 0 {
        attachments.push(format!("{more} more"));
    }
    let html = msg.text_part(0).and_then(|p| match &p.body {
        PartType::Html(html) => Some(html.as_ref()),
        _ => None,
    });
    let text = match html {
        Some(html) => html_to_text(html),
        None if msg.text_body_count() > 0 => {
            msg.body_text(0).map(|t| t.into_owned()).unwrap_or_default()
        }
        None => String::new(),
    };
    let text = strip_tags(&text);
    let text = trim_replies(&text);
    let (body, truncated) = cap(&text, max_chars);
    Parsed {
        from_name,
        from_address,
        date,
        subject,
        body,
        attachments,
        truncated,
    }
}

/// One line, control characters out, runs of space collapsed.
fn clean_line(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// HTML → text: quoted blocks dropped, every block element on its own
/// line (mail-parser's converter breaks only at `<br>` and `</p>`), then
/// mail-parser's converter for entities and inline markup.
fn html_to_text(html: &str) -> String {
    static QUOTE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?is)<blockquote\b.*?</blockquote\s*>").expect("static regex")
    });
    static BLOCK: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)</?(div|h[1-6]|li|tr|table|ul|ol|section|article|header|footer|hr|center)\b[^<>]*>",
        )
        .expect("static regex")
    });
    let html = QUOTE.replace_all(html, "<br>");
    let html = BLOCK.replace_all(&html, "<br>");
    mail_parser::decoders::html::html_to_text(&html)
}

/// Anything still shaped like a tag (HTML sent as text/plain, or left by
/// the converter) goes, so no markup is ever read aloud.
fn strip_tags(text: &str) -> String {
    static TAG: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?is)<(script|style)\b.*?</(script|style)\s*>|<!--.*?-->|</?[a-z!][^<>]*>",
        )
        .expect("static regex")
    });
    if !text.contains('<') {
        return text.to_string();
    }
    TAG.replace_all(text, " ").into_owned()
}

/// Cut the quoted reply (`> …`, "On … wrote:", Outlook's original-message
/// block, a forwarded header block) and the signature (`-- `, "Sent from
/// my …"), then tidy the blank lines.
pub fn trim_replies(text: &str) -> String {
    static WROTE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)^\s*(on\b.{0,200}\bwrote:?|le\b.{0,200}\ba écrit\s*:?|am\b.{0,200}\bschrieb.*:?)\s*$")
            .expect("static regex")
    });
    let mut out: Vec<&str> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        let lower = t.to_lowercase();
        // "On Tue, 1 Dec 2026 at 18:04, Priya <…>" may wrap onto a second line.
        let joined = lines
            .get(i + 1)
            .map(|next| format!("{t} {}", next.trim()))
            .unwrap_or_default();
        if WROTE.is_match(t)
            || (lower.starts_with("on ") && WROTE.is_match(&joined))
            || lower.starts_with("-----original message-----")
            || lower.starts_with("---------- forwarded message")
            || lower.starts_with("________________________________")
            || (lower.starts_with("from:")
                && lines[i + 1..].iter().take(4).any(|l| {
                    let l = l.trim().to_lowercase();
                    l.starts_with("sent:") || l.starts_with("date:")
                }))
        {
            break;
        }
        if line == "-- "
            || t == "--"
            || lower.starts_with("sent from my ")
            || lower == "get outlook for ios"
            || lower == "get outlook for android"
        {
            break;
        }
        if t.starts_with('>') {
            i += 1;
            continue;
        }
        out.push(t);
        i += 1;
    }
    let mut tidy = String::new();
    let mut blank = false;
    for line in out {
        if line.is_empty() {
            blank = !tidy.is_empty();
            continue;
        }
        if blank {
            tidy.push_str("\n\n");
        } else if !tidy.is_empty() {
            tidy.push('\n');
        }
        blank = false;
        tidy.push_str(&line.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    tidy
}

/// At most `max` characters, cut at a word with "…".
fn cap(text: &str, max: usize) -> (String, bool) {
    if text.chars().count() <= max {
        return (text.to_string(), false);
    }
    let cut: String = text.chars().take(max).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(at) if at > max / 2 => cut[..at].to_string(),
        _ => cut,
    };
    (format!("{}…", cut.trim_end()), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_text_with_no_tags() {
        let raw = b"From: Priya <priya@example.org>\r\nSubject: Dinner\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><head><style>p{color:red}</style></head><body><p>See you <b>Saturday</b> at 7&nbsp;pm.</p><script>alert(1)</script></body></html>";
        let p = parse(raw, 500);
        assert!(p.body.contains("See you Saturday at 7"), "{p:?}");
        assert!(
            !p.body.contains('<') && !p.body.contains("color:red") && !p.body.contains("alert"),
            "{p:?}"
        );
        assert_eq!(p.from_name, "Priya");
        assert_eq!(p.subject, "Dinner");
        let p = parse(b"Content-Type: text/html\r\n\r\n<h1>Rye is back</h1><div>Dark rye</div><blockquote>old quoted</blockquote>", 500);
        assert_eq!(p.body, "Rye is back\n\nDark rye");
    }

    #[test]
    fn quoted_replies_and_signatures_are_trimmed() {
        let text = "Yes, Saturday works.\n\nBring the salad?\n\n-- \nPriya Shah\nHead of Things\n";
        assert_eq!(
            trim_replies(text),
            "Yes, Saturday works.\n\nBring the salad?"
        );
        let text = "Sounds good.\nOn Tue, 1 Dec 2026 at 18:04, Sam <sam@example.org>\nwrote:\n> Shall we?\n> x";
        assert_eq!(trim_replies(text), "Sounds good.");
        let text = "Done.\n\n-----Original Message-----\nFrom: a\nSent: b\nhello";
        assert_eq!(trim_replies(text), "Done.");
        let text = "Fine\n> quoted\nmore\n\nSent from my iPhone";
        assert_eq!(trim_replies(text), "Fine\nmore");
    }

    #[test]
    fn long_bodies_are_capped_at_a_word() {
        let (text, cut) = cap(&"word ".repeat(100), 23);
        assert!(cut);
        assert_eq!(text, "word word word word…");
    }

    #[test]
    fn broken_mime_and_unknown_charsets_never_panic() {
        let raw = b"Subject: =?x-unknown?B?AAAA?=\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain; charset=x-klingon\r\n\r\nqapla\xff\xfe\r\n--b\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!notbase64";
        let p = parse(raw, 100);
        assert!(p.body.contains("qapla"), "{p:?}");
        let _ = parse(b"\xff\xfe\x00garbage", 100);
        let _ = parse(b"", 100);
    }
}
