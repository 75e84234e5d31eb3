//! The calendar: events in SQLite (the source of truth, usable with no
//! network), synced two ways with one CalDAV calendar when
//! `[calendar] caldav_url` is set (Radicale, Nextcloud, Fastmail, iCloud…).
//!
//! - `ical.rs`: iCalendar parse/emit, time zones, RRULE expansion;
//! - `caldav.rs`: the CalDAV client (PROPFIND, GET, PUT/DELETE with ETags);
//! - `sync.rs`: the two-way sync over the queue of local changes, and the
//!   background sync thread `earshot run` starts.
//!
//! Every local change (add, edit, remove) is written and queued in one
//! statement, so it survives being offline or a crash; the sync pushes the
//! queue and pulls the server's changes. [`Calendar`] is cheap to clone and
//! built once by the composition root.

pub mod caldav;
pub mod ical;
pub mod reminders;
pub mod sync;

use chrono::{DateTime, Duration, FixedOffset, Local, NaiveDate, Utc};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize, Serializer};

use crate::store::{Store, StoreError};

pub use sync::{SyncError, SyncReport, SyncState};

/// Longest title or location accepted.
pub const MAX_TEXT_CHARS: usize = 500;

/// `[calendar]`. The password comes only from the environment
/// (`CALDAV_PASSWORD`), never the file; `Debug` prints it as `***`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CalendarConfig {
    /// The CalDAV calendar collection URL; empty = local calendar only
    /// (`EARSHOT_CALDAV_URL` overrides it).
    pub caldav_url: String,
    /// Empty = the server needs no login.
    pub caldav_username: String,
    /// From `CALDAV_PASSWORD` only.
    #[serde(skip)]
    pub caldav_password: String,
    /// How often `earshot run` syncs in the background.
    pub sync_interval_secs: u64,
    /// How long before an event its reminder is due.
    pub reminder_lead_minutes: u64,
    /// Longest one CalDAV exchange may take.
    pub timeout_ms: u64,
}

impl Default for CalendarConfig {
    fn default() -> Self {
        Self {
            caldav_url: String::new(),
            caldav_username: String::new(),
            caldav_password: String::new(),
            sync_interval_secs: 300,
            reminder_lead_minutes: 15,
            timeout_ms: 10_000,
        }
    }
}

impl std::fmt::Debug for CalendarConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exhaustive, so a new field has to be placed here (secret or not).
        let Self {
            caldav_url,
            caldav_username,
            caldav_password: _,
            sync_interval_secs,
            reminder_lead_minutes,
            timeout_ms,
        } = self;
        f.debug_struct("CalendarConfig")
            .field("caldav_url", caldav_url)
            .field("caldav_username", caldav_username)
            .field("caldav_password", &"***")
            .field("sync_interval_secs", sync_interval_secs)
            .field("reminder_lead_minutes", reminder_lead_minutes)
            .field("timeout_ms", timeout_ms)
            .finish()
    }
}

impl CalendarConfig {
    /// Whether a CalDAV server is configured.
    pub fn syncs(&self) -> bool {
        !self.caldav_url.trim().is_empty()
    }

    /// Checks serde cannot express; one line naming the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.sync_interval_secs < 10 {
            return Err("calendar.sync_interval_secs must be at least 10".into());
        }
        if self.reminder_lead_minutes > 24 * 60 {
            return Err("calendar.reminder_lead_minutes must be at most 1440 (a day)".into());
        }
        let url = self.caldav_url.trim();
        if !url.is_empty() && !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(format!(
                "calendar.caldav_url '{url}' must start with http:// or https://"
            ));
        }
        Ok(())
    }
}

/// Why a calendar operation did not happen; the text is one sentence.
#[derive(Debug, thiserror::Error)]
pub enum CalendarError {
    #[error("{0}")]
    BadInput(String),
    #[error("no event matches \"{0}\"")]
    NotFound(String),
    #[error("several events match: {}", .0.join(", "))]
    Ambiguous(Vec<String>),
    #[error("the calendar event {uid} cannot be read: {reason}")]
    Unreadable { uid: String, reason: String },
    #[error("{0}")]
    Store(#[from] StoreError),
}

fn local_offset(dt: &DateTime<Utc>) -> DateTime<FixedOffset> {
    dt.with_timezone(&Local).fixed_offset()
}

fn rfc3339<S: Serializer>(dt: &DateTime<FixedOffset>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&dt.to_rfc3339_opts(chrono::SecondsFormat::Secs, false))
}

/// One occurrence of an event, as `calendar list --json` prints it (local
/// time with its offset). `id` is the event's row id: every occurrence of
/// a series shares it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Occurrence {
    pub id: i64,
    pub title: String,
    #[serde(serialize_with = "rfc3339")]
    pub start: DateTime<FixedOffset>,
    #[serde(serialize_with = "rfc3339")]
    pub end: DateTime<FixedOffset>,
    pub location: String,
    pub uid: String,
    #[serde(skip)]
    pub all_day: bool,
}

/// A free stretch of time: (start, end), local.
pub type FreeSpan = (DateTime<FixedOffset>, DateTime<FixedOffset>);

/// A new event.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub title: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub location: String,
}

/// What an edit changes (`None` = keep).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventChange {
    pub title: Option<String>,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    pub location: Option<String>,
}

/// A reminder the device should say: `remind_at` is `lead` before the
/// occurrence starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Reminder {
    pub remind_at: DateTime<Utc>,
    pub occurrence: Occurrence,
}

/// A stored row.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub id: i64,
    pub uid: String,
    pub ics: String,
    pub href: Option<String>,
    pub etag: Option<String>,
    pub dirty: bool,
    pub deleted: bool,
}

pub(crate) const ROW_COLUMNS: &str = "id, uid, ics, href, etag, dirty, deleted";

pub(crate) fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        uid: r.get(1)?,
        ics: r.get(2)?,
        href: r.get(3)?,
        etag: r.get(4)?,
        dirty: r.get::<_, i64>(5)? != 0,
        deleted: r.get::<_, i64>(6)? != 0,
    })
}

/// The device's calendar. Cheap to clone; safe to share across threads.
#[derive(Clone)]
pub struct Calendar {
    store: Store,
    config: CalendarConfig,
}

impl std::fmt::Debug for Calendar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calendar")
            .field("config", &self.config)
            .finish()
    }
}

/// The default listing window: the start of today through the next 30 days.
pub fn default_window(now: DateTime<Local>) -> (DateTime<Utc>, DateTime<Utc>) {
    let today = now.date_naive();
    let from = day_start(today);
    let to = day_start(today + Duration::days(31));
    (from, to)
}

/// Local midnight at the start of `date`, in UTC.
pub fn day_start(date: NaiveDate) -> DateTime<Utc> {
    ical::local_midnight(date)
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or_else(|| date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
}

fn check_text(what: &str, text: &str, required: bool) -> Result<String, CalendarError> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if required && text.is_empty() {
        return Err(CalendarError::BadInput(format!("the event needs a {what}")));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(CalendarError::BadInput(format!(
            "the event's {what} is too long (over {MAX_TEXT_CHARS} characters)"
        )));
    }
    Ok(text)
}

impl Calendar {
    /// The calendar over `store`, syncing as `config` says.
    pub fn new(config: &CalendarConfig, store: Store) -> Calendar {
        Calendar {
            store,
            config: config.clone(),
        }
    }

    pub fn config(&self) -> &CalendarConfig {
        &self.config
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    fn rows(&self) -> Result<Vec<Row>, CalendarError> {
        let sql =
            format!("SELECT {ROW_COLUMNS} FROM calendar_events WHERE deleted = 0 ORDER BY id");
        Ok(self.store.with_conn(|c| {
            let mut stmt = c.prepare(&sql)?;
            let rows = stmt.query_map([], row)?;
            rows.collect()
        })?)
    }

    /// Every occurrence overlapping `[from, to)`, by start time; recurring
    /// events expanded. A stored event that cannot be read is logged and
    /// left out (it was checked when stored, so this is rare).
    pub fn list(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Occurrence>, CalendarError> {
        if to <= from {
            return Err(CalendarError::BadInput(
                "the end of the window is before its start".into(),
            ));
        }
        let mut out = Vec::new();
        for r in self.rows()? {
            match ical::parse(&r.ics) {
                Ok(resource) => {
                    out.extend(
                        resource
                            .occurrences(from, to)
                            .into_iter()
                            .map(|s| Occurrence {
                                id: r.id,
                                title: s.title,
                                start: local_offset(&s.start),
                                end: local_offset(&s.end),
                                location: s.location,
                                uid: s.uid,
                                all_day: s.all_day,
                            }),
                    )
                }
                Err(e) => tracing::warn!(uid = %r.uid, "calendar event unreadable: {e}"),
            }
        }
        out.sort_by(|a, b| a.start.cmp(&b.start).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Add an event (queued for the server when one is configured).
    pub fn add(&self, new: &NewEvent) -> Result<Occurrence, CalendarError> {
        let title = check_text("title", &new.title, true)?;
        let location = check_text("location", &new.location, false)?;
        if new.end < new.start {
            return Err(CalendarError::BadInput(
                "the event ends before it starts".into(),
            ));
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let fields = ical::EventFields {
            title: title.clone(),
            location: location.clone(),
            start: new.start,
            end: new.end,
        };
        let ics = ical::emit_new(&uid, &fields, Utc::now());
        let id = self.store.with_conn(|c| {
            c.execute(
                "INSERT INTO calendar_events (uid, title, ics, dirty, updated_at) VALUES (?1, ?2, ?3, 1, ?4)",
                rusqlite::params![uid, title, ics, crate::store::now()],
            )?;
            Ok(c.last_insert_rowid())
        })?;
        Ok(Occurrence {
            id,
            title,
            start: local_offset(&new.start),
            end: local_offset(&new.end),
            location,
            uid,
            all_day: false,
        })
    }

    /// The stored event named by `key`: a row id, a UID, or words of its
    /// title (every word must appear; several matches are ambiguous).
    pub fn find(&self, key: &str) -> Result<(i64, String, String), CalendarError> {
        let key = key.trim();
        if key.is_empty() {
            return Err(CalendarError::BadInput("say which event".into()));
        }
        let rows = self.rows()?;
        let by_key = rows
            .iter()
            .find(|r| key.parse::<i64>().ok() == Some(r.id) || r.uid == key);
        if let Some(r) = by_key {
            return Ok((r.id, r.uid.clone(), title_of(r)));
        }
        let words: Vec<String> = key
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let titled: Vec<(i64, String, String)> = rows
            .iter()
            .map(|r| (r.id, r.uid.clone(), title_of(r)))
            .collect();
        let exact: Vec<_> = titled
            .iter()
            .filter(|(_, _, t)| t.eq_ignore_ascii_case(key))
            .collect();
        let matches: Vec<_> = if exact.is_empty() {
            titled
                .iter()
                .filter(|(_, _, t)| {
                    let title_words: Vec<String> = t
                        .to_lowercase()
                        .split(|c: char| !c.is_alphanumeric())
                        .map(str::to_string)
                        .collect();
                    !words.is_empty() && words.iter().all(|w| title_words.contains(w))
                })
                .collect()
        } else {
            exact
        };
        match matches.as_slice() {
            [] => Err(CalendarError::NotFound(key.to_string())),
            [one] => Ok((*one).clone()),
            many => Err(CalendarError::Ambiguous(
                many.iter().map(|(_, _, t)| t.clone()).collect(),
            )),
        }
    }

    /// The event `key` names ([`Calendar::find`]) as its series' first
    /// occurrence (where and when it is now, for "move the haircut to 12").
    pub fn event(&self, key: &str) -> Result<Occurrence, CalendarError> {
        let (id, uid, _) = self.find(key)?;
        let text = self.get(id)?.unwrap_or_default();
        let resource = ical::parse(&text).map_err(|e| CalendarError::Unreadable {
            uid: uid.clone(),
            reason: e.to_string(),
        })?;
        let master = resource.master().ok_or_else(|| CalendarError::Unreadable {
            uid: uid.clone(),
            reason: "no VEVENT".into(),
        })?;
        Ok(Occurrence {
            id,
            title: master.title.clone(),
            start: local_offset(&master.start.with_timezone(&Utc)),
            end: local_offset(&master.end.with_timezone(&Utc)),
            location: master.location.clone(),
            uid,
            all_day: master.all_day,
        })
    }

    /// Change an event's series (title, place, times); queued for the server.
    pub fn update(&self, key: &str, change: &EventChange) -> Result<Occurrence, CalendarError> {
        let (id, uid, _) = self.find(key)?;
        let current = self.store.with_conn(|c| {
            c.query_row("SELECT ics FROM calendar_events WHERE id = ?1", [id], |r| {
                r.get::<_, String>(0)
            })
        })?;
        let resource = ical::parse(&current).map_err(|e| CalendarError::Unreadable {
            uid: uid.clone(),
            reason: e.to_string(),
        })?;
        let master = resource.master().ok_or_else(|| CalendarError::Unreadable {
            uid: uid.clone(),
            reason: "no VEVENT".into(),
        })?;
        let old_start = master.start.with_timezone(&Utc);
        let old_end = master.end.with_timezone(&Utc);
        let length = old_end - old_start;
        let start = change.start.unwrap_or(old_start);
        // A moved start keeps the length unless a new end is given.
        let end = change.end.unwrap_or(if change.start.is_some() {
            start + length
        } else {
            old_end
        });
        if end < start {
            return Err(CalendarError::BadInput(
                "the event would end before it starts".into(),
            ));
        }
        let title = match &change.title {
            Some(t) => check_text("title", t, true)?,
            None => master.title.clone(),
        };
        let location = match &change.location {
            Some(l) => check_text("location", l, false)?,
            None => master.location.clone(),
        };
        let fields = ical::EventFields {
            title: title.clone(),
            location: location.clone(),
            start,
            end,
        };
        let times_changed = change.start.is_some() || change.end.is_some();
        let ics = ical::emit_edit(&current, &fields, times_changed, Utc::now()).map_err(|e| {
            CalendarError::Unreadable {
                uid: uid.clone(),
                reason: e.to_string(),
            }
        })?;
        self.store.with_conn(|c| {
            c.execute(
                "UPDATE calendar_events SET title = ?2, ics = ?3, dirty = 1, updated_at = ?4 WHERE id = ?1",
                rusqlite::params![id, title, ics, crate::store::now()],
            )
        })?;
        Ok(Occurrence {
            id,
            title,
            start: local_offset(&start),
            end: local_offset(&end),
            location,
            uid,
            all_day: master.all_day,
        })
    }

    /// Remove an event (every occurrence). With a server it is hidden and
    /// queued until the server has deleted it too; returns its title.
    pub fn remove(&self, key: &str) -> Result<(i64, String), CalendarError> {
        let (id, _, title) = self.find(key)?;
        self.store.with_conn(|c| {
            // Never synced: nothing to tell the server.
            c.execute(
                "DELETE FROM calendar_events WHERE id = ?1 AND href IS NULL",
                [id],
            )?;
            c.execute(
                "UPDATE calendar_events SET deleted = 1, dirty = 0, updated_at = ?2 WHERE id = ?1",
                rusqlite::params![id, crate::store::now()],
            )
        })?;
        Ok((id, title))
    }

    /// One stored event by row id (for tests and tools).
    pub fn get(&self, id: i64) -> Result<Option<String>, CalendarError> {
        Ok(self.store.with_conn(|c| {
            c.query_row(
                "SELECT ics FROM calendar_events WHERE id = ?1 AND deleted = 0",
                [id],
                |r| r.get(0),
            )
            .optional()
        })?)
    }

    /// Free stretches of at least `min` in `[from, to)` (busy = any
    /// occurrence that is not all-day).
    pub fn free_time(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        min: Duration,
    ) -> Result<Vec<FreeSpan>, CalendarError> {
        let busy = self.list(from, to)?;
        let mut free = Vec::new();
        let mut cursor = from;
        for o in busy.iter().filter(|o| !o.all_day) {
            let start = o.start.with_timezone(&Utc);
            let end = o.end.with_timezone(&Utc);
            if start > cursor && start - cursor >= min {
                free.push((local_offset(&cursor), local_offset(&start.min(to))));
            }
            cursor = cursor.max(end);
        }
        if to > cursor && to - cursor >= min {
            free.push((local_offset(&cursor), local_offset(&to)));
        }
        Ok(free)
    }

    /// Reminders due in `(after, until]`: occurrences whose start minus
    /// `[calendar] reminder_lead_minutes` falls there (all-day events
    /// excluded). The ring side calls this with the time of its last check
    /// and now, so each reminder comes once; an event added with less than
    /// the lead left is due at once (its remind time is already past but
    /// after `after` only if it was added since — callers may pass
    /// `after` = last check).
    pub fn reminders_due(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<Reminder>, CalendarError> {
        let lead = Duration::minutes(self.config.reminder_lead_minutes as i64);
        if until <= after {
            return Ok(Vec::new());
        }
        let occurrences = self.list(after + lead, until + lead + Duration::seconds(1))?;
        Ok(occurrences
            .into_iter()
            .filter(|o| !o.all_day)
            .filter_map(|o| {
                let remind_at = o.start.with_timezone(&Utc) - lead;
                (remind_at > after && remind_at <= until).then_some(Reminder {
                    remind_at,
                    occurrence: o,
                })
            })
            .collect())
    }
}

/// A date or date-time typed by a person or sent by the model, in local
/// time unless it carries an offset: `2026-12-03 11:00`, `2026-12-03T11:00`,
/// `2026-12-03T11:00:00+01:00`, or a bare date (its midnight). A day that
/// does not exist ("2027-02-31") is one line saying so.
pub fn parse_when(text: &str) -> Result<DateTime<Utc>, CalendarError> {
    let text = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(text) {
        return Ok(dt.with_timezone(&Utc));
    }
    let bad = |why: &str| {
        CalendarError::BadInput(format!(
            "'{text}' is not a date and time{why} (use YYYY-MM-DD HH:MM, e.g. 2026-12-03 11:00)"
        ))
    };
    let (date_part, time_part) = match text.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.trim())),
        None => (text, None),
    };
    let numbers: Vec<&str> = date_part.split('-').collect();
    if numbers.len() != 3
        || numbers
            .iter()
            .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad(""));
    }
    let (y, m, d) = (
        numbers[0].parse::<i32>().map_err(|_| bad(""))?,
        numbers[1].parse::<u32>().map_err(|_| bad(""))?,
        numbers[2].parse::<u32>().map_err(|_| bad(""))?,
    );
    let date = NaiveDate::from_ymd_opt(y, m, d).ok_or_else(|| bad(": there is no such day"))?;
    let time = match time_part {
        None => chrono::NaiveTime::MIN,
        Some(t) => chrono::NaiveTime::parse_from_str(t, "%H:%M")
            .or_else(|_| chrono::NaiveTime::parse_from_str(t, "%H:%M:%S"))
            .map_err(|_| bad(": the time must be HH:MM between 00:00 and 23:59"))?,
    };
    ical::at_local(&rrule::Tz::LOCAL, date.and_time(time))
        .map(|d| d.with_timezone(&Utc))
        .ok_or_else(|| bad(""))
}

/// A length such as `30m`, `1h`, `1h30m`, `90 min`, `2 hours`.
pub fn parse_length(text: &str) -> Result<Duration, CalendarError> {
    let compact: String = text.trim().to_lowercase().split_whitespace().collect();
    let bad = || {
        CalendarError::BadInput(format!(
            "'{}' is not a length (use e.g. 30m, 1h or 1h30m)",
            text.trim()
        ))
    };
    let mut total = Duration::zero();
    let mut number = String::new();
    let mut rest = compact.as_str();
    let mut any = false;
    while !rest.is_empty() {
        let c = rest.chars().next().ok_or_else(bad)?;
        if c.is_ascii_digit() {
            number.push(c);
            rest = &rest[1..];
            continue;
        }
        let n: i64 = number.parse().map_err(|_| bad())?;
        number.clear();
        let units: &[(&str, i64)] = &[
            ("hours", 60),
            ("hour", 60),
            ("hrs", 60),
            ("hr", 60),
            ("h", 60),
            ("minutes", 1),
            ("minute", 1),
            ("mins", 1),
            ("min", 1),
            ("m", 1),
        ];
        let (unit, factor) = units
            .iter()
            .find(|(u, _)| rest.starts_with(u))
            .ok_or_else(bad)?;
        total += Duration::minutes(n * factor);
        rest = &rest[unit.len()..];
        any = true;
    }
    if !number.is_empty() {
        // A bare number is minutes.
        total += Duration::minutes(number.parse::<i64>().map_err(|_| bad())?);
        any = true;
    }
    if !any || total <= Duration::zero() || total > Duration::days(14) {
        return Err(bad());
    }
    Ok(total)
}

fn title_of(r: &Row) -> String {
    ical::parse(&r.ics)
        .ok()
        .and_then(|res| res.master().map(|m| m.title.clone()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Calendar) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        (dir, Calendar::new(&CalendarConfig::default(), store))
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn event(title: &str, start: &str, minutes: i64) -> NewEvent {
        NewEvent {
            title: title.into(),
            start: utc(start),
            end: utc(start) + Duration::minutes(minutes),
            location: String::new(),
        }
    }

    #[test]
    fn add_list_update_remove() {
        let (_d, cal) = setup();
        let haircut = cal
            .add(&event("Haircut", "2026-12-03T11:00:00Z", 30))
            .unwrap();
        cal.add(&event("Drinks with Sam", "2026-12-04T18:00:00Z", 120))
            .unwrap();
        let all = cal
            .list(utc("2026-12-01T00:00:00Z"), utc("2026-12-10T00:00:00Z"))
            .unwrap();
        assert_eq!(
            all.iter().map(|o| o.title.as_str()).collect::<Vec<_>>(),
            ["Haircut", "Drinks with Sam"]
        );
        let json = serde_json::to_value(&all[0]).unwrap();
        let keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["id", "title", "start", "end", "location", "uid"]);
        let moved = cal
            .update(
                "haircut",
                &EventChange {
                    start: Some(utc("2026-12-03T12:00:00Z")),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(
            moved.end.with_timezone(&Utc),
            utc("2026-12-03T12:30:00Z"),
            "length kept"
        );
        assert_eq!(moved.id, haircut.id);
        let (_, title) = cal.remove("drinks sam").unwrap();
        assert_eq!(title, "Drinks with Sam");
        let left = cal
            .list(utc("2026-12-01T00:00:00Z"), utc("2026-12-10T00:00:00Z"))
            .unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(
            left[0].start.with_timezone(&Utc),
            utc("2026-12-03T12:00:00Z")
        );
        assert!(matches!(
            cal.remove("dentist"),
            Err(CalendarError::NotFound(_))
        ));
    }

    #[test]
    fn bad_input_stores_nothing() {
        let (_d, cal) = setup();
        assert!(cal.add(&event("  ", "2026-12-03T11:00:00Z", 30)).is_err());
        assert!(cal
            .add(&event(&"x".repeat(5000), "2026-12-03T11:00:00Z", 30))
            .is_err());
        assert!(cal
            .add(&event("Back to front", "2026-12-03T11:00:00Z", -30))
            .is_err());
        assert!(cal
            .list(utc("2026-01-01T00:00:00Z"), utc("2028-01-01T00:00:00Z"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn ambiguous_titles_are_not_guessed() {
        let (_d, cal) = setup();
        cal.add(&event("Lunch with Ann", "2026-12-03T11:00:00Z", 30))
            .unwrap();
        cal.add(&event("Lunch with Bob", "2026-12-04T11:00:00Z", 30))
            .unwrap();
        assert!(matches!(cal.remove("lunch"), Err(CalendarError::Ambiguous(v)) if v.len() == 2));
    }

    #[test]
    fn free_time_and_reminders() {
        let (_d, cal) = setup();
        cal.add(&event("A", "2026-12-03T10:00:00Z", 60)).unwrap();
        cal.add(&event("B", "2026-12-03T10:30:00Z", 60)).unwrap();
        let free = cal
            .free_time(
                utc("2026-12-03T09:00:00Z"),
                utc("2026-12-03T13:00:00Z"),
                Duration::minutes(30),
            )
            .unwrap();
        let free: Vec<_> = free
            .iter()
            .map(|(a, b)| (a.with_timezone(&Utc), b.with_timezone(&Utc)))
            .collect();
        assert_eq!(
            free,
            vec![
                (utc("2026-12-03T09:00:00Z"), utc("2026-12-03T10:00:00Z")),
                (utc("2026-12-03T11:30:00Z"), utc("2026-12-03T13:00:00Z")),
            ]
        );
        // Lead 15 min: A's reminder is at 09:45.
        let due = cal
            .reminders_due(utc("2026-12-03T09:40:00Z"), utc("2026-12-03T09:45:00Z"))
            .unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].occurrence.title, "A");
        assert_eq!(due[0].remind_at, utc("2026-12-03T09:45:00Z"));
        let none = cal
            .reminders_due(utc("2026-12-03T09:45:00Z"), utc("2026-12-03T10:14:00Z"))
            .unwrap();
        assert!(none.is_empty(), "A was due at 09:45, B at 10:15: {none:?}");
        let b = cal
            .reminders_due(utc("2026-12-03T10:14:00Z"), utc("2026-12-03T10:15:00Z"))
            .unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].occurrence.title, "B");
    }

    #[test]
    fn typed_times_and_lengths() {
        assert!(parse_when("2026-12-03 11:00").is_ok());
        assert_eq!(
            parse_when("2026-12-03T11:00:00Z").unwrap(),
            utc("2026-12-03T11:00:00Z")
        );
        let feb = parse_when("2027-02-31 10:00").unwrap_err().to_string();
        assert!(feb.contains("no such day"), "{feb}");
        assert!(parse_when("2026-12-03 25:00")
            .unwrap_err()
            .to_string()
            .contains("HH:MM"));
        assert!(parse_when("tomorrow").is_err());
        assert_eq!(parse_length("1h30m").unwrap(), Duration::minutes(90));
        assert_eq!(parse_length("90 min").unwrap(), Duration::minutes(90));
        assert_eq!(parse_length("2 hours").unwrap(), Duration::minutes(120));
        assert!(parse_length("-5m").is_err());
        assert!(parse_length("soon").is_err());
    }

    #[test]
    fn debug_hides_the_password() {
        let config = CalendarConfig {
            caldav_password: "hunter2".into(),
            ..Default::default()
        };
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
