//! Timers, alarms and reminders (issue 15): kept in SQLite, rung by one
//! scheduler thread, reached by the agent's tools, the intent tree, the
//! CLI and the HTTP API through one [`Timers`] service built by `app`.
//!
//! Why this shape:
//! - **SQLite is the truth.** A row's state (pending → ringing → done, or
//!   missed/cancelled) is committed before anyone is told, so a ring is
//!   never announced twice, and what came due while earshot was off is
//!   found at the next start and announced once as `missed`.
//! - **Two clocks** ([`Clock`]): a timer counts on the monotonic clock
//!   while earshot runs, so a wall-clock jump (NTP at boot) moves it
//!   neither earlier nor later; an alarm or a reminder at a clock time
//!   follows local wall time in the system's zone (chrono's `Local`, which
//!   honours `TZ`), across DST ([`schedule`]).
//! - **No voice here.** Subscribers ([`Timers::subscribe`]) get
//!   [`TimerEvent`]s; the voice loop chimes and speaks, the API forwards.

mod clock;
mod db;
pub mod parse;
pub mod schedule;
mod scheduler;

pub use clock::{Clock, ManualClock, SystemClock};
pub use schedule::Weekdays;
pub use scheduler::SchedulerHandle;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, FixedOffset, NaiveDateTime, NaiveTime, SecondsFormat, TimeDelta, Utc};
use crossbeam_channel::{Receiver, Sender};
use serde::{Deserialize, Serialize, Serializer};

use crate::paths::Paths;
use crate::store::{Store, StoreError};
use db::{Anchor, Row};

/// Longest label (a timer's name, a reminder's text), in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// Shortest timer.
pub const MIN_TIMER: Duration = Duration::from_secs(1);
/// Longest timer.
pub const MAX_TIMER: Duration = Duration::from_secs(24 * 3600);
/// Furthest ahead an alarm or a reminder may be set.
pub const MAX_AHEAD: Duration = Duration::from_secs(366 * 24 * 3600);

crate::choice! {
    /// What was set.
    pub enum Kind("kind") {
        Timer = "timer" | "timers": "counts down a length (1 second to 24 hours)",
        Alarm = "alarm" | "alarms": "rings at a clock time, once or on repeat",
        Reminder = "reminder" | "reminders": "says its text at a time or after a delay",
    }
}

crate::choice! {
    /// Where a row is in its life.
    pub enum State("timer state") {
        Pending = "pending": "set, not yet due",
        Ringing = "ringing": "due and ringing until stopped or ring_secs pass",
        Done = "done": "rang and stopped",
        Missed = "missed": "came due while earshot was not running (announced once)",
        Cancelled = "cancelled": "cancelled before it rang out",
    }
}

crate::choice! {
    /// What happened to a timer, as subscribers hear it.
    pub enum EventKind("timer event") {
        Set = "set": "set, or changed (extended, snoozed)",
        Ringing = "ringing": "came due now: chime and speak",
        Stopped = "stopped": "stopped ringing (button, \"stop\", or ring_secs)",
        Missed = "missed": "came due while earshot was off; announce once",
        Cancelled = "cancelled": "cancelled",
    }
}

/// `[timers]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimersConfig {
    /// How long a timer, alarm or reminder rings before it stops by itself.
    pub ring_secs: u64,
    /// How long "snooze" waits when no length is said.
    pub snooze_secs: u64,
}

impl Default for TimersConfig {
    fn default() -> Self {
        Self {
            ring_secs: 60,
            snooze_secs: 540,
        }
    }
}

/// When a new one is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// After this long (a timer; "remind me in 20 minutes").
    In(Duration),
    /// At this local date and time ("tomorrow at 6:30").
    At(NaiveDateTime),
    /// The next time the local clock shows `time`, on one of `days` when
    /// given ("at 7", "on Monday at 7").
    Next {
        time: NaiveTime,
        days: Option<Weekdays>,
    },
}

/// What to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTimer {
    pub kind: Kind,
    /// A timer's name ("rice"), a reminder's text ("check the oven").
    pub label: Option<String>,
    pub when: When,
    /// Ring again on these days at the same local time (alarms).
    pub repeat: Option<Weekdays>,
}

/// A timer, alarm or reminder as callers see it. Serialises as the
/// contract's `{"id","kind","label","due","remaining_s","repeat"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timer {
    pub id: i64,
    pub kind: Kind,
    pub label: String,
    /// Local time with its offset.
    #[serde(serialize_with = "rfc3339")]
    pub due: DateTime<FixedOffset>,
    /// Whole seconds left, rounded up; 0 when due or ringing.
    pub remaining_s: i64,
    /// "daily", "weekdays", "weekends", "mon,wed", or null.
    pub repeat: Option<String>,
    #[serde(skip)]
    pub state: State,
    /// The length a timer (or a delay reminder) was set for, in seconds.
    #[serde(skip)]
    pub duration_s: Option<i64>,
}

fn rfc3339<S: Serializer>(t: &DateTime<FixedOffset>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Secs, false))
}

/// Something that happened to a timer. Serialises exactly as
/// `{"type":"timer","event",…,"id","kind","label","due"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerEvent {
    pub event: EventKind,
    pub id: i64,
    pub kind: Kind,
    pub label: String,
    pub due: DateTime<FixedOffset>,
    /// The length it was set for, for "your 5-minute timer" (not on the wire).
    pub duration_s: Option<i64>,
}

impl Serialize for TimerEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("TimerEvent", 6)?;
        m.serialize_field("type", "timer")?;
        m.serialize_field("event", &self.event)?;
        m.serialize_field("id", &self.id)?;
        m.serialize_field("kind", &self.kind)?;
        m.serialize_field("label", &self.label)?;
        m.serialize_field("due", &self.due.to_rfc3339_opts(SecondsFormat::Secs, false))?;
        m.end()
    }
}

/// Why a timer operation did not happen. Each message is one sentence a
/// user can hear; nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum TimerError {
    #[error("Timers can run from one second to 24 hours.")]
    OutOfRange,
    #[error("Alarms and reminders can be set from one second to a year ahead.")]
    TooFar,
    #[error("That time has already passed.")]
    InPast,
    #[error("That name is too long; keep it under 200 characters.")]
    LabelTooLong,
    #[error("A timer needs a length, like five minutes; for a clock time, set an alarm.")]
    NeedsDuration,
    #[error("A repeating alarm needs a clock time, like 7:00.")]
    RepeatNeedsTime,
    #[error("There is no timer, alarm or reminder number {0}.")]
    NotFound(i64),
    #[error("It changed at the same moment; please try again.")]
    Conflict,
    #[error("Another earshot is already ringing the timers ({0}); stop it first.")]
    SchedulerBusy(String),
    #[error("The timers could not be saved: {0}")]
    Store(#[from] StoreError),
}

/// The timers service: cheap to clone, shared by every front door.
#[derive(Clone)]
pub struct Timers {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Timers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timers")
            .field("config", &self.inner.config)
            .finish()
    }
}

struct Inner {
    store: Store,
    clock: Arc<dyn Clock>,
    config: TimersConfig,
    /// `<state_dir>/timers.lock`: one scheduler per state dir.
    lock_path: PathBuf,
    subscribers: Mutex<Vec<Sender<TimerEvent>>>,
    /// The rev of every row as this process last knew it; held while a
    /// change is committed and told, so the scheduler can tell this
    /// process's changes from another's.
    book: Mutex<Book>,
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
}

/// What this process knows of a row: the rev it last saw, and for a
/// delay row it anchored, when it ends on the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    rev: i64,
    mono_due: Option<Duration>,
}

type Book = HashMap<i64, Known>;

/// `row` as known right after this process wrote it at `now`/`mono`.
fn known(row: &Row, now: DateTime<Utc>, mono: Duration) -> Known {
    Known {
        rev: row.rev,
        mono_due: (row.anchor == Anchor::Delay)
            .then(|| mono + (row.due_at - now).to_std().unwrap_or_default()),
    }
}

/// `row`'s due time at `now`: a delay row this process anchored counts on
/// the monotonic clock (a wall jump the scheduler has not yet written
/// back does not show), anything else is read from the row.
fn due_of(book: &Book, row: &Row, now: DateTime<Utc>, mono: Duration) -> DateTime<Utc> {
    match book.get(&row.id) {
        Some(Known {
            rev,
            mono_due: Some(due),
        }) if *rev == row.rev && row.anchor == Anchor::Delay => {
            let ahead = TimeDelta::from_std(due.saturating_sub(mono)).unwrap_or_default();
            let behind = TimeDelta::from_std(mono.saturating_sub(*due)).unwrap_or_default();
            now + ahead - behind
        }
        _ => row.due(),
    }
}

impl Timers {
    /// The service over the device's store, on the system clock.
    pub fn new(config: &TimersConfig, paths: &Paths, store: Store) -> Timers {
        Self::with_clock(config, paths, store, Arc::new(SystemClock::new()))
    }

    /// As [`Timers::new`] on a given clock (tests: [`ManualClock`]).
    pub fn with_clock(
        config: &TimersConfig,
        paths: &Paths,
        store: Store,
        clock: Arc<dyn Clock>,
    ) -> Timers {
        let (wake_tx, wake_rx) = crossbeam_channel::bounded(1);
        clock.notify_on_change(wake_tx.clone());
        Timers {
            inner: Arc::new(Inner {
                store,
                clock,
                config: config.clone(),
                lock_path: paths.state_dir.join("timers.lock"),
                subscribers: Mutex::new(Vec::new()),
                book: Mutex::new(HashMap::new()),
                wake_tx,
                wake_rx,
            }),
        }
    }

    /// The `[timers]` section it was built with.
    pub fn config(&self) -> &TimersConfig {
        &self.inner.config
    }

    /// Every event from now on (subscribe before
    /// [`Timers::start_scheduler`] to hear the `missed` ones it finds).
    pub fn subscribe(&self) -> Receiver<TimerEvent> {
        let (tx, rx) = crossbeam_channel::unbounded();
        lock(&self.inner.subscribers).push(tx);
        rx
    }

    /// Start the thread that rings: see [`scheduler`]. One per state dir
    /// (a lock file says so); the handle stops it when dropped.
    pub fn start_scheduler(&self) -> Result<SchedulerHandle, TimerError> {
        scheduler::start(self.clone())
    }

    /// Set a timer, an alarm or a reminder.
    pub fn add(&self, new: NewTimer) -> Result<Timer, TimerError> {
        let label = clean_label(new.label.as_deref().unwrap_or(""))?;
        let (now, mono) = self.now();
        let (anchor, due_at, local_at, duration_s) = match new.when {
            When::In(d) => {
                if new.repeat.is_some() {
                    return Err(TimerError::RepeatNeedsTime);
                }
                let (min, max, err) = match new.kind {
                    Kind::Timer => (MIN_TIMER, MAX_TIMER, TimerError::OutOfRange),
                    _ => (MIN_TIMER, MAX_AHEAD, TimerError::TooFar),
                };
                if d < min || d > max {
                    return Err(err);
                }
                let secs = i64::try_from(d.as_secs()).map_err(|_| TimerError::OutOfRange)?;
                let due = now + TimeDelta::from_std(d).map_err(|_| TimerError::OutOfRange)?;
                (Anchor::Delay, due, None, Some(secs))
            }
            When::At(_) | When::Next { .. } if new.kind == Kind::Timer => {
                return Err(TimerError::NeedsDuration)
            }
            When::At(local) => {
                let due = schedule::resolve(&chrono::Local, local).with_timezone(&Utc);
                if due <= now {
                    return Err(TimerError::InPast);
                }
                (Anchor::Clock, due, Some(local), None)
            }
            When::Next { time, days } => {
                let days = days.or(new.repeat);
                let local = schedule::next_occurrence(&chrono::Local, now, time, days);
                let due = schedule::resolve(&chrono::Local, local).with_timezone(&Utc);
                (Anchor::Clock, due, Some(local), None)
            }
        };
        if due_at - now > TimeDelta::from_std(MAX_AHEAD).unwrap_or(TimeDelta::MAX) {
            return Err(TimerError::TooFar);
        }
        let mut row = Row {
            id: 0,
            kind: new.kind,
            label,
            anchor,
            due_at,
            local_at,
            duration_s,
            repeat: new.repeat,
            state: State::Pending,
            rev: 1,
            rang_at: None,
        };
        let mut book = lock(&self.inner.book);
        row.id = self.inner.store.with_tx(|tx| db::insert(tx, &row, now))?;
        book.insert(row.id, known(&row, now, mono));
        let timer = self.timer_of(&row, now, due_of(&book, &row, now, mono));
        self.emit(EventKind::Set, &row);
        drop(book);
        self.poke();
        Ok(timer)
    }

    /// Everything set and not yet finished (ringing ones included),
    /// soonest first; only `kind` when given.
    pub fn list(&self, kind: Option<Kind>) -> Result<Vec<Timer>, TimerError> {
        let book = lock(&self.inner.book);
        let (now, mono) = self.now();
        let rows = self.inner.store.with_conn(db::active)?;
        let mut timers: Vec<Timer> = rows
            .iter()
            .filter(|r| kind.is_none_or(|k| r.kind == k))
            .map(|r| self.timer_of(r, now, due_of(&book, r, now, mono)))
            .collect();
        timers.sort_by_key(|t| (t.due, t.id));
        Ok(timers)
    }

    /// One set (or ringing) timer, alarm or reminder by id.
    pub fn get(&self, id: i64) -> Result<Option<Timer>, TimerError> {
        let book = lock(&self.inner.book);
        let (now, mono) = self.now();
        let row = self.inner.store.with_conn(|c| db::get(c, id))?;
        Ok(row
            .filter(Row::is_active)
            .map(|r| self.timer_of(&r, now, due_of(&book, &r, now, mono))))
    }

    /// The active ones `query` means: a kind word ("timers", "alarm")
    /// picks that kind, the other words must all be words of the label
    /// ("the rice timer" → the timer labelled "rice"). An empty query or
    /// one of only a kind word matches all of that kind.
    pub fn find(&self, query: &str) -> Result<Vec<Timer>, TimerError> {
        let mut kind = None;
        let mut wanted = Vec::new();
        for word in words(query) {
            if let Ok(k) = word.parse::<Kind>() {
                kind = Some(k);
            } else if !FILLER.contains(&word.as_str()) {
                wanted.push(word);
            }
        }
        let all = self.list(kind)?;
        Ok(all
            .into_iter()
            .filter(|t| {
                let label = words(&t.label);
                wanted.iter().all(|w| {
                    label.iter().any(|l| {
                        l == w || l.strip_suffix('s') == Some(w) || w.strip_suffix('s') == Some(l)
                    })
                })
            })
            .collect())
    }

    /// Cancel one (it stops ringing if it was).
    pub fn cancel(&self, id: i64) -> Result<Timer, TimerError> {
        self.change(id, |row, _now, _due| {
            row.state = State::Cancelled;
            Ok(vec![EventKind::Cancelled])
        })
    }

    /// Cancel every active one (of `kind` when given); how many.
    pub fn cancel_all(&self, kind: Option<Kind>) -> Result<usize, TimerError> {
        let book = lock(&self.inner.book);
        let (now, mono) = self.now();
        let cancelled = self.inner.store.with_tx(|tx| {
            let mut done = Vec::new();
            for mut row in db::active(tx)? {
                if kind.is_some_and(|k| row.kind != k) {
                    continue;
                }
                row.state = State::Cancelled;
                if db::save(tx, &mut row, now)? {
                    done.push(row);
                }
            }
            Ok(done)
        })?;
        self.told(book, &cancelled, EventKind::Cancelled, now, mono);
        Ok(cancelled.len())
    }

    /// Move one's due time by `by` (negative = sooner). A timer ends at
    /// least a second from now and at most 24 hours; a ringing one is
    /// stopped and set again.
    pub fn extend(&self, id: i64, by: TimeDelta) -> Result<Timer, TimerError> {
        self.change(id, |row, now, due| {
            let mut events = Vec::new();
            let base = if row.state == State::Ringing {
                events.push(EventKind::Stopped);
                row.state = State::Pending;
                row.rang_at = None;
                now
            } else {
                due
            };
            let min = now + TimeDelta::seconds(1);
            let due = (base + by).max(min);
            if row.kind == Kind::Timer
                && due - now > TimeDelta::from_std(MAX_TIMER).unwrap_or(TimeDelta::MAX)
            {
                return Err(TimerError::OutOfRange);
            }
            if due - now > TimeDelta::from_std(MAX_AHEAD).unwrap_or(TimeDelta::MAX) {
                return Err(TimerError::TooFar);
            }
            set_due(row, due);
            events.push(EventKind::Set);
            Ok(events)
        })
    }

    /// Ring again after `by` (a ringing one stops now).
    pub fn snooze(&self, id: i64, by: Duration) -> Result<Timer, TimerError> {
        let by = TimeDelta::from_std(by.max(MIN_TIMER)).map_err(|_| TimerError::TooFar)?;
        self.change(id, |row, now, _due| {
            let mut events = Vec::new();
            if row.state == State::Ringing {
                events.push(EventKind::Stopped);
            }
            row.state = State::Pending;
            row.rang_at = None;
            // A snooze is a length from now, whatever the wall clock does;
            // a repeating alarm keeps `local_at` for its next occurrence.
            row.anchor = Anchor::Delay;
            row.due_at = now + by;
            events.push(EventKind::Set);
            Ok(events)
        })
    }

    /// Stop ringing: `id`, or every ringing one when `None`; how many
    /// stopped. A repeating alarm is set for its next day.
    pub fn stop_ringing(&self, id: Option<i64>) -> Result<usize, TimerError> {
        let book = lock(&self.inner.book);
        let (now, mono) = self.now();
        let stopped = self.inner.store.with_tx(|tx| {
            let mut done = Vec::new();
            for mut row in db::active(tx)? {
                if row.state != State::Ringing || id.is_some_and(|i| i != row.id) {
                    continue;
                }
                finish(&mut row, now);
                if db::save(tx, &mut row, now)? {
                    done.push(row);
                }
            }
            Ok(done)
        })?;
        self.told(book, &stopped, EventKind::Stopped, now, mono);
        Ok(stopped.len())
    }

    /// Read `id`, let `f` change it, save it (conditionally), then tell.
    fn change(
        &self,
        id: i64,
        f: impl FnOnce(&mut Row, DateTime<Utc>, DateTime<Utc>) -> Result<Vec<EventKind>, TimerError>,
    ) -> Result<Timer, TimerError> {
        let mut book = lock(&self.inner.book);
        let (now, mono) = self.now();
        let mut row = self
            .inner
            .store
            .with_conn(|c| db::get(c, id))?
            .filter(Row::is_active)
            .ok_or(TimerError::NotFound(id))?;
        let due = due_of(&book, &row, now, mono);
        let events = f(&mut row, now, due)?;
        if !self.inner.store.with_tx(|tx| db::save(tx, &mut row, now))? {
            return Err(TimerError::Conflict);
        }
        book.insert(row.id, known(&row, now, mono));
        for event in events {
            self.emit(event, &row);
        }
        let timer = self.timer_of(&row, now, due_of(&book, &row, now, mono));
        drop(book);
        self.poke();
        Ok(timer)
    }

    /// Record and announce rows this process just changed.
    fn told(
        &self,
        mut book: MutexGuard<'_, Book>,
        rows: &[Row],
        event: EventKind,
        now: DateTime<Utc>,
        mono: Duration,
    ) {
        for row in rows {
            book.insert(row.id, known(row, now, mono));
            self.emit(event, row);
        }
        drop(book);
        if !rows.is_empty() {
            self.poke();
        }
    }

    /// Wake the scheduler to look again.
    fn poke(&self) {
        let _ = self.inner.wake_tx.try_send(());
    }

    fn emit(&self, event: EventKind, row: &Row) {
        let event = TimerEvent {
            event,
            id: row.id,
            kind: row.kind,
            label: row.label.clone(),
            due: local(row.due()),
            duration_s: row.duration_s,
        };
        tracing::info!(event = %event.event, id = event.id, kind = %event.kind, "timer");
        lock(&self.inner.subscribers).retain(|s| s.send(event.clone()).is_ok());
    }

    /// The clocks, read together.
    fn now(&self) -> (DateTime<Utc>, Duration) {
        (self.inner.clock.wall(), self.inner.clock.mono())
    }

    fn timer_of(&self, row: &Row, now: DateTime<Utc>, due: DateTime<Utc>) -> Timer {
        let left_ms = (due - now).num_milliseconds().max(0);
        let remaining_s = if row.state == State::Ringing {
            0
        } else {
            (left_ms + 999) / 1000
        };
        Timer {
            id: row.id,
            kind: row.kind,
            label: row.label.clone(),
            due: local(due),
            remaining_s,
            repeat: row.repeat.map(|r| r.to_string()),
            state: row.state,
            duration_s: row.duration_s,
        }
    }
}

/// A ringing row stops: a repeat is set for its next local occurrence,
/// anything else is done.
fn finish(row: &mut Row, now: DateTime<Utc>) {
    row.rang_at = None;
    match (row.repeat, row.local_at) {
        (Some(days), Some(last)) => {
            let local = schedule::next_occurrence(&chrono::Local, now, last.time(), Some(days));
            row.anchor = Anchor::Clock;
            row.local_at = Some(local);
            row.due_at = schedule::resolve(&chrono::Local, local).with_timezone(&Utc);
            row.state = State::Pending;
        }
        _ => row.state = State::Done,
    }
}

/// Set a row due at `due`, keeping its anchor: a clock row's local time
/// moves with it.
fn set_due(row: &mut Row, due: DateTime<Utc>) {
    row.due_at = due;
    if row.anchor == Anchor::Clock {
        row.local_at = Some(due.with_timezone(&chrono::Local).naive_local());
    }
}

/// A length as said: "18 minutes", "1 hour 30 minutes", "1 minute 5
/// seconds", "0 seconds". For sentences about timers (tools, the ring).
pub fn spoken_length(secs: i64) -> String {
    let secs = secs.max(0);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let part = |n: i64, unit: &str| match n {
        0 => None,
        1 => Some(format!("1 {unit}")),
        n => Some(format!("{n} {unit}s")),
    };
    let parts: Vec<String> = [part(h, "hour"), part(m, "minute"), part(s, "second")]
        .into_iter()
        .flatten()
        .collect();
    if parts.is_empty() {
        "0 seconds".into()
    } else {
        parts.join(" ")
    }
}

/// A UTC instant in the system zone, as the contract shows it.
fn local(t: DateTime<Utc>) -> DateTime<FixedOffset> {
    t.with_timezone(&chrono::Local).fixed_offset()
}

/// Tidy a label; refuse one over [`MAX_LABEL_CHARS`].
pub fn clean_label(label: &str) -> Result<String, TimerError> {
    let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
    let label = label.trim_matches(|c: char| c == '"' || c == '\'').trim();
    if label.chars().count() > MAX_LABEL_CHARS {
        return Err(TimerError::LabelTooLong);
    }
    Ok(label.to_string())
}

/// Words that say nothing about which one is meant.
const FILLER: &[&str] = &[
    "the", "a", "an", "my", "one", "for", "on", "of", "that", "this",
];

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
