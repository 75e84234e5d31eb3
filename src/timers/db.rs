//! The `timers` table (migration 9): rows in and out, and the one
//! conditional save every state change goes through.
//!
//! Why conditional: the scheduler, the voice loop's actions and a CLI
//! command in another process may touch the same row. A save names the
//! `rev` it read and bumps it; a save that finds another `rev` changes
//! nothing and reports it, so a ring is never committed twice.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row as SqlRow};

use super::schedule::{self, Weekdays};
use super::{Kind, State};

/// How a row's due time is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// A length from when it was set: counts on the monotonic clock.
    Delay,
    /// A local wall time (`local_at`): follows the zone, DST included.
    Clock,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Delay => "delay",
            Anchor::Clock => "clock",
        }
    }
}

/// One row of `timers`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: i64,
    pub kind: Kind,
    pub label: String,
    pub anchor: Anchor,
    /// For a delay row, when it ends on the wall clock; for a clock row,
    /// `local_at` as last resolved.
    pub due_at: DateTime<Utc>,
    pub local_at: Option<NaiveDateTime>,
    pub duration_s: Option<i64>,
    pub repeat: Option<Weekdays>,
    pub state: State,
    pub rev: i64,
    pub rang_at: Option<DateTime<Utc>>,
}

impl Row {
    /// When the row is due: a clock row's local time resolved in the
    /// system zone now (so a changed `TZ` or DST rule is honoured), a delay
    /// row's `due_at`.
    pub fn due(&self) -> DateTime<Utc> {
        match (self.anchor, self.local_at) {
            (Anchor::Clock, Some(local)) => {
                schedule::resolve(&chrono::Local, local).with_timezone(&Utc)
            }
            _ => self.due_at,
        }
    }

    /// Whether it is set or ringing (shown by `list`).
    pub fn is_active(&self) -> bool {
        matches!(self.state, State::Pending | State::Ringing)
    }
}

/// A timestamp as stored: RFC 3339 UTC with milliseconds (sorts as text).
pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_stamp(text: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
}

fn bad(what: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("bad {what} in the timers table").into(),
    )
}

const COLUMNS: &str =
    "id, kind, label, anchor, due_at, local_at, duration_s, repeat, state, rev, rang_at";

fn row_of(r: &SqlRow<'_>) -> rusqlite::Result<Row> {
    let kind: String = r.get(1)?;
    let anchor: String = r.get(3)?;
    let due_at: String = r.get(4)?;
    let local_at: Option<String> = r.get(5)?;
    let repeat: Option<String> = r.get(7)?;
    let state: String = r.get(8)?;
    let rang_at: Option<String> = r.get(10)?;
    Ok(Row {
        id: r.get(0)?,
        kind: kind.parse().map_err(|_| bad("kind"))?,
        label: r.get(2)?,
        anchor: match anchor.as_str() {
            "clock" => Anchor::Clock,
            _ => Anchor::Delay,
        },
        due_at: parse_stamp(&due_at)?,
        local_at: match local_at {
            Some(t) => Some(schedule::parse_local(&t).ok_or_else(|| bad("local time"))?),
            None => None,
        },
        duration_s: r.get(6)?,
        repeat: match repeat {
            Some(t) => Some(Weekdays::parse(&t).ok_or_else(|| bad("repeat"))?),
            None => None,
        },
        state: state.parse().map_err(|_| bad("state"))?,
        rev: r.get(9)?,
        rang_at: rang_at.as_deref().map(parse_stamp).transpose()?,
    })
}

/// Insert a new pending row; its id.
pub fn insert(c: &Connection, row: &Row, now: DateTime<Utc>) -> rusqlite::Result<i64> {
    c.execute(
        "INSERT INTO timers (kind, label, anchor, due_at, local_at, duration_s, repeat, state,
                             rev, rang_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, NULL, ?9, ?9)",
        params![
            row.kind.name(),
            row.label,
            row.anchor.as_str(),
            stamp(row.due_at),
            row.local_at.map(schedule::format_local),
            row.duration_s,
            row.repeat.map(|r| r.to_string()),
            row.state.name(),
            stamp(now),
        ],
    )?;
    Ok(c.last_insert_rowid())
}

/// Write `row`'s fields if it still has the `rev` it was read with, and
/// bump the rev (`row.rev` becomes the new one). `false`: someone else
/// changed it first; nothing was written.
pub fn save(c: &Connection, row: &mut Row, now: DateTime<Utc>) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE timers SET label = ?1, anchor = ?2, due_at = ?3, local_at = ?4, repeat = ?5,
                state = ?6, rang_at = ?7, rev = rev + 1, updated_at = ?8
         WHERE id = ?9 AND rev = ?10",
        params![
            row.label,
            row.anchor.as_str(),
            stamp(row.due_at),
            row.local_at.map(schedule::format_local),
            row.repeat.map(|r| r.to_string()),
            row.state.name(),
            row.rang_at.map(stamp),
            stamp(now),
            row.id,
            row.rev,
        ],
    )?;
    if n == 1 {
        row.rev += 1;
    }
    Ok(n == 1)
}

/// Pending and ringing rows, soonest first.
pub fn active(c: &Connection) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM timers WHERE state IN ('pending', 'ringing') ORDER BY due_at, id"
    ))?;
    let rows = stmt.query_map([], row_of)?;
    rows.collect()
}

/// One row by id, whatever its state.
pub fn get(c: &Connection, id: i64) -> rusqlite::Result<Option<Row>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM timers WHERE id = ?1"),
        [id],
        row_of,
    )
    .optional()
}

/// Forget finished rows last changed before `before` (the table stays
/// small; the turn log keeps what was said).
pub fn prune(c: &Connection, before: DateTime<Utc>) -> rusqlite::Result<usize> {
    c.execute(
        "DELETE FROM timers WHERE state IN ('done', 'missed', 'cancelled') AND updated_at < ?1",
        [stamp(before)],
    )
}
