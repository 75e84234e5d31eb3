//! What a turn records about itself (R-OBS): stage timings, how the route
//! was decided, models, tool calls (name, latency, ok), retrievals, outcome.
//! Written as one turn-log row, in the transaction that saves the turn.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

/// One tool call as the turn log keeps it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolCallRecord {
    pub name: String,
    pub ms: f64,
    pub ok: bool,
}

/// The turn-log row being built while a turn runs.
#[derive(Debug, Clone, Serialize, Default)]
pub struct TurnRecord {
    pub started_at: String,
    /// text | voice | api | wyoming
    pub source: String,
    pub input: String,
    pub response: Option<String>,
    pub mode: Option<String>,
    pub route: Option<String>,
    pub route_by: Option<String>,
    pub confidence: Option<f32>,
    pub intent: Option<String>,
    pub intent_confidence: Option<f32>,
    pub node: Option<String>,
    pub model: Option<String>,
    /// ok | error | cancelled
    pub outcome: String,
    pub error: Option<String>,
    /// Why a fallback happened, in words.
    pub notes: Vec<String>,
    /// Stage → milliseconds (stt, recall, route, first_token, total, …).
    pub timings: BTreeMap<String, f64>,
    pub tools: Vec<ToolCallRecord>,
    /// What the turn's knowledge searches retrieved, in call order. Saved
    /// with the turn's own id (`knowledge_retrievals.turn_id`,
    /// `turn_log.retrieval_json`), in the transaction that writes its row.
    pub retrievals: Vec<serde_json::Value>,
    /// Anything a later concern adds before it has its own column.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl TurnRecord {
    pub fn new(source: &str, input: &str) -> Self {
        Self {
            started_at: crate::events::timestamp_now(),
            source: source.into(),
            input: input.into(),
            outcome: "ok".into(),
            ..Default::default()
        }
    }

    /// Record a stage's duration since `since`.
    pub fn stage(&mut self, name: &str, since: Instant) {
        self.timings
            .insert(name.into(), since.elapsed().as_secs_f64() * 1000.0);
    }

    /// Record a stage's duration in ms.
    pub fn set_ms(&mut self, name: &str, ms: f64) {
        self.timings.insert(name.into(), ms);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

/// Crates whose debug/trace output shows requests on the wire (headers,
/// hex dumps of each request, `Authorization` included): never below
/// `info`, whatever `RUST_LOG` asks, so no level prints a key.
const WIRE_TRACERS: &[&str] = &["ureq", "ureq_proto", "rustls", "tiny_http"];

/// `filter` with every directive for a [`WIRE_TRACERS`] crate dropped and
/// each of them pinned at `info`.
pub fn without_wire_tracing(filter: &str) -> String {
    let mut kept: Vec<&str> = filter
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let target = d.split(['=', '[']).next().unwrap_or(d);
            !WIRE_TRACERS
                .iter()
                .any(|w| target == *w || target.starts_with(&format!("{w}::")))
        })
        .collect();
    let pins: Vec<String> = WIRE_TRACERS.iter().map(|w| format!("{w}=info")).collect();
    kept.extend(pins.iter().map(String::as_str));
    kept.join(",")
}

/// Set up logging: to stderr (the journal captures it under systemd), level
/// from `EARSHOT_LOG` or `RUST_LOG`; by default `info` for long-running
/// services (`run`, `serve`) and `warn` for one-shot commands, whose output
/// is the answer.
pub fn init_logging(verbose: bool, service: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if verbose {
        "debug"
    } else if service {
        "warn,earshot=info"
    } else {
        "warn"
    };
    let filter = std::env::var("EARSHOT_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| default.to_string());
    let under_journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(without_wire_tracing(&filter)))
        .with_writer(std::io::stderr)
        .with_target(false);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = builder.with_ansi(ansi);
    let _ = if under_journal {
        builder
            .with_writer(JournalStderr)
            .without_time()
            .with_ansi(false)
            .try_init()
    } else {
        builder.try_init()
    };
}

/// stderr for systemd: journald files a line under the syslog priority in a
/// leading `<N>`, so each event gets the prefix of its level and
/// `journalctl -u earshot -p warning` shows warnings and errors only.
struct JournalStderr;

/// One event's writer: the priority prefix, then the formatted line.
struct PrefixedStderr {
    prefix: Option<&'static [u8]>,
}

impl std::io::Write for PrefixedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        if let Some(prefix) = self.prefix.take() {
            err.write_all(prefix)?;
        }
        err.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The `<N>` prefix journald reads for a tracing level.
fn journal_priority(level: &tracing::Level) -> &'static [u8] {
    match *level {
        tracing::Level::ERROR => b"<3>",
        tracing::Level::WARN => b"<4>",
        tracing::Level::INFO => b"<6>",
        tracing::Level::DEBUG | tracing::Level::TRACE => b"<7>",
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for JournalStderr {
    type Writer = PrefixedStderr;

    fn make_writer(&'a self) -> PrefixedStderr {
        PrefixedStderr {
            prefix: Some(b"<6>"),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> PrefixedStderr {
        PrefixedStderr {
            prefix: Some(journal_priority(meta.level())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_tracing_is_pinned_at_info_whatever_is_asked() {
        let f = without_wire_tracing("trace");
        assert!(f.starts_with("trace,"), "{f}");
        assert!(
            f.contains("ureq=info") && f.contains("ureq_proto=info"),
            "{f}"
        );
        let f = without_wire_tracing("debug,ureq=trace,ureq_proto::util=trace,earshot=debug");
        assert!(!f.contains("trace"), "{f}");
        assert!(f.contains("earshot=debug"), "{f}");
    }

    #[test]
    fn journal_priorities_follow_syslog() {
        assert_eq!(journal_priority(&tracing::Level::ERROR), b"<3>");
        assert_eq!(journal_priority(&tracing::Level::WARN), b"<4>");
        assert_eq!(journal_priority(&tracing::Level::INFO), b"<6>");
        assert_eq!(journal_priority(&tracing::Level::DEBUG), b"<7>");
    }
}
