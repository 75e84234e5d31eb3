//! iCalendar in and out: one CalDAV resource (a `VCALENDAR` holding one
//! event's `VEVENT`s — the series and its overridden occurrences) parsed
//! into [`EventData`], expanded into occurrences over a window, and
//! written back.
//!
//! Why the `icalendar` crate: it both parses (unfolding, parameters,
//! escaping) and builds, so a resource fetched from the server is edited
//! and written back with its other properties intact; `ical` only parses.
//! Recurrence goes through `rrule` (RFC 5545 RRULE with time zones and
//! DST), which `icalendar` itself builds on.
//!
//! Times: `Z` is UTC, `TZID=` an IANA zone (chrono-tz), no `TZID` and no
//! `Z` ("floating") is the device's local time; an unknown `TZID` is
//! reported as a warning and read as local time — never a panic.

use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use icalendar::{
    Calendar as VCalendar, CalendarComponent, CalendarDateTime, Component, DatePerhapsTime, Event,
    EventLike,
};
use rrule::Tz;

/// Why a resource could not be read; one line naming the event and the fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IcalError {
    #[error("not iCalendar data: {0}")]
    Syntax(String),
    #[error("the iCalendar data holds no VEVENT")]
    NoEvent,
    #[error("an event has no UID")]
    NoUid,
    #[error("event {uid}: {what} '{value}' is not a valid date or time")]
    BadTime {
        uid: String,
        what: &'static str,
        value: String,
    },
    #[error("event {uid} has no DTSTART")]
    NoStart { uid: String },
}

/// The most occurrences one series yields in one window.
const MAX_OCCURRENCES: u16 = 2000;

/// One `VEVENT` read: what listing, matching and conflict resolution need.
#[derive(Debug, Clone)]
pub struct EventData {
    pub uid: String,
    pub title: String,
    pub location: String,
    pub start: DateTime<Tz>,
    pub end: DateTime<Tz>,
    pub all_day: bool,
    /// The RRULE value, when the event repeats.
    pub rrule: Option<String>,
    pub exdates: Vec<DateTime<Tz>>,
    /// Set on an overridden occurrence of a series.
    pub recurrence_id: Option<DateTime<Utc>>,
    /// LAST-MODIFIED, else DTSTAMP: which side of a conflict is newer.
    pub modified: Option<DateTime<Utc>>,
}

/// One occurrence in a window, in absolute time.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub uid: String,
    pub title: String,
    pub location: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub all_day: bool,
}

/// A parsed resource: its events (series first) and the warnings met
/// (unknown time zones), for the caller to log once.
#[derive(Debug, Clone)]
pub struct Resource {
    pub events: Vec<EventData>,
    pub warnings: Vec<String>,
}

impl Resource {
    /// The UID every event of the resource shares.
    pub fn uid(&self) -> &str {
        self.events.first().map(|e| e.uid.as_str()).unwrap_or("")
    }

    /// The series (the event without RECURRENCE-ID), else the first one.
    pub fn master(&self) -> Option<&EventData> {
        self.events
            .iter()
            .find(|e| e.recurrence_id.is_none())
            .or(self.events.first())
    }

    /// The newest modification time of any of its events.
    pub fn modified(&self) -> Option<DateTime<Utc>> {
        self.events.iter().filter_map(|e| e.modified).max()
    }

    /// Every occurrence overlapping `[from, to)`, sorted by start. A series
    /// whose RRULE cannot be expanded lists its first occurrence only.
    pub fn occurrences(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Span> {
        let overrides: Vec<DateTime<Utc>> =
            self.events.iter().filter_map(|e| e.recurrence_id).collect();
        let mut out = Vec::new();
        for event in &self.events {
            let length = event.end.signed_duration_since(event.start);
            let starts: Vec<DateTime<Utc>> = match (&event.rrule, event.recurrence_id) {
                (Some(rule), None) => expand(event, rule, &overrides, from - length, to)
                    .unwrap_or_else(|e| {
                        tracing::warn!(uid = %event.uid, "cannot expand RRULE '{rule}': {e}; listing the first occurrence only");
                        vec![event.start.with_timezone(&Utc)]
                    }),
                _ => vec![event.start.with_timezone(&Utc)],
            };
            for start in starts {
                let end = start + length;
                let overlaps = start < to && (end > from || start >= from);
                if overlaps {
                    out.push(Span {
                        uid: event.uid.clone(),
                        title: event.title.clone(),
                        location: event.location.clone(),
                        start,
                        end,
                        all_day: event.all_day,
                    });
                }
            }
        }
        out.sort_by_key(|s| s.start);
        out
    }
}

/// The starts of a series in `[from, to)` (in UTC), without its EXDATEs
/// and overridden occurrences.
fn expand(
    event: &EventData,
    rule: &str,
    overrides: &[DateTime<Utc>],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<DateTime<Utc>>, String> {
    let text = if rule.to_ascii_uppercase().starts_with("RRULE:") {
        rule.to_string()
    } else {
        format!("RRULE:{rule}")
    };
    let parsed = rrule::RRule::from_str(&text).map_err(|e| e.to_string())?;
    let mut set = parsed.build(event.start).map_err(|e| e.to_string())?;
    for ex in &event.exdates {
        set = set.exdate(*ex);
    }
    let tz = event.start.timezone();
    let window = set
        .after((from - Duration::seconds(1)).with_timezone(&tz))
        .before(to.with_timezone(&tz))
        .all(MAX_OCCURRENCES);
    Ok(window
        .dates
        .into_iter()
        .map(|d| d.with_timezone(&Utc))
        .filter(|d| !overrides.contains(d))
        .collect())
}

/// Parse one resource. Every VEVENT must have a UID and a valid DTSTART;
/// anything else is an error naming the event, and nothing of it is used.
pub fn parse(text: &str) -> Result<Resource, IcalError> {
    if !text.contains("BEGIN:VCALENDAR") && !text.contains("BEGIN:VEVENT") {
        return Err(IcalError::Syntax(
            "no BEGIN:VCALENDAR or BEGIN:VEVENT line".into(),
        ));
    }
    let calendar = VCalendar::from_str(text).map_err(|e| IcalError::Syntax(one_line(&e)))?;
    let mut warnings = Vec::new();
    let mut events = Vec::new();
    for component in &calendar.components {
        if let CalendarComponent::Event(event) = component {
            events.push(read_event(event, &mut warnings)?);
        }
    }
    if events.is_empty() {
        return Err(IcalError::NoEvent);
    }
    events.sort_by_key(|e| e.recurrence_id.is_some());
    Ok(Resource { events, warnings })
}

fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(200).collect()
}

fn read_event(event: &Event, warnings: &mut Vec<String>) -> Result<EventData, IcalError> {
    let uid = event
        .get_uid()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or(IcalError::NoUid)?
        .to_string();
    let raw = |key: &str| {
        event
            .properties()
            .get(key)
            .map(|p| p.value().to_string())
            .unwrap_or_default()
    };
    let bad = |what: &'static str| IcalError::BadTime {
        uid: uid.clone(),
        what,
        value: raw(what),
    };
    if !event.properties().contains_key("DTSTART") {
        return Err(IcalError::NoStart { uid });
    }
    let start_raw = event.get_start().ok_or_else(|| bad("DTSTART"))?;
    let all_day = matches!(start_raw, DatePerhapsTime::Date(_));
    let start = resolve(&start_raw, &uid, warnings).ok_or_else(|| bad("DTSTART"))?;
    let end = match event.get_end() {
        Some(end) => resolve(&end, &uid, warnings).ok_or_else(|| bad("DTEND"))?,
        None if event.properties().contains_key("DTEND") => return Err(bad("DTEND")),
        None => match event.properties().get("DURATION") {
            Some(p) => start + parse_duration(p.value()).ok_or_else(|| bad("DURATION"))?,
            None if all_day => start + Duration::days(1),
            None => start,
        },
    };
    let end = end.max(start);
    let exdates = event
        .multi_properties()
        .get("EXDATE")
        .into_iter()
        .flatten()
        .chain(event.properties().get("EXDATE"))
        .flat_map(|p| {
            // One EXDATE line may list several values.
            let params = p.params().clone();
            p.value()
                .split(',')
                .map(move |v| {
                    let mut one = icalendar::Property::new("EXDATE", v.trim());
                    for (k, param) in &params {
                        one.add_parameter(k, param.value());
                    }
                    one
                })
                .collect::<Vec<_>>()
        })
        .map(|p| {
            DatePerhapsTime::from_property(&p)
                .and_then(|d| resolve(&d, &uid, warnings))
                .ok_or_else(|| bad("EXDATE"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let recurrence_id = match event.get_recurrence_id() {
        Some(r) => Some(
            resolve(&r, &uid, warnings)
                .ok_or_else(|| bad("RECURRENCE-ID"))?
                .with_timezone(&Utc),
        ),
        None if event.properties().contains_key("RECURRENCE-ID") => {
            return Err(bad("RECURRENCE-ID"))
        }
        None => None,
    };
    let modified = event.get_last_modified().or_else(|| event.get_timestamp());
    Ok(EventData {
        title: event.get_summary().unwrap_or("").trim().to_string(),
        location: event.get_location().unwrap_or("").trim().to_string(),
        rrule: event
            .properties()
            .get("RRULE")
            .map(|p| p.value().trim().to_string())
            .filter(|r| !r.is_empty()),
        uid,
        start,
        end,
        all_day,
        exdates,
        recurrence_id,
        modified,
    })
}

/// The zone a `TZID` names: an IANA name (also at the end of a
/// `/mozilla.org/…/Europe/Berlin` style path); `None` when unknown.
pub fn zone(tzid: &str) -> Option<Tz> {
    let tzid = tzid.trim().trim_matches('"');
    if let Ok(tz) = chrono_tz::Tz::from_str(tzid) {
        return Some(Tz::Tz(tz));
    }
    let parts: Vec<&str> = tzid.split('/').filter(|p| !p.is_empty()).collect();
    (1..parts.len()).rev().find_map(|n| {
        let tail = parts[parts.len() - n..].join("/");
        chrono_tz::Tz::from_str(&tail).ok().map(Tz::Tz)
    })
}

/// A date or date-time as an instant in its zone.
fn resolve(value: &DatePerhapsTime, uid: &str, warnings: &mut Vec<String>) -> Option<DateTime<Tz>> {
    match value {
        DatePerhapsTime::Date(date) => at_local(&Tz::LOCAL, date.and_hms_opt(0, 0, 0)?),
        DatePerhapsTime::DateTime(CalendarDateTime::Utc(dt)) => Some(dt.with_timezone(&Tz::UTC)),
        DatePerhapsTime::DateTime(CalendarDateTime::Floating(naive)) => {
            at_local(&Tz::LOCAL, *naive)
        }
        DatePerhapsTime::DateTime(CalendarDateTime::WithTimezone { date_time, tzid }) => {
            let tz = zone(tzid).unwrap_or_else(|| {
                let line = format!(
                    "event {uid}: unknown time zone '{tzid}'; its times are read as local time"
                );
                if !warnings.contains(&line) {
                    warnings.push(line);
                }
                Tz::LOCAL
            });
            at_local(&tz, *date_time)
        }
    }
}

/// A wall-clock time in `tz`; one that falls in a DST gap moves forward
/// an hour (as clocks do), an ambiguous one takes the earlier instant.
pub fn at_local(tz: &Tz, naive: NaiveDateTime) -> Option<DateTime<Tz>> {
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(dt) => Some(dt),
        LocalResult::Ambiguous(a, _) => Some(a),
        LocalResult::None => tz
            .from_local_datetime(&(naive + Duration::hours(1)))
            .earliest(),
    }
}

/// An RFC 5545 DURATION (`PT1H30M`, `P1D`, `-PT15M`, `P2W`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let rest = rest.strip_prefix('P')?;
    let mut total = Duration::zero();
    let mut number = String::new();
    let mut in_time = false;
    let mut any = false;
    for c in rest.chars() {
        match c {
            'T' => in_time = true,
            '0'..='9' => number.push(c),
            unit => {
                let n: i64 = number.parse().ok()?;
                number.clear();
                any = true;
                total += match (unit, in_time) {
                    ('W', false) => Duration::weeks(n),
                    ('D', false) => Duration::days(n),
                    ('H', true) => Duration::hours(n),
                    ('M', true) => Duration::minutes(n),
                    ('S', true) => Duration::seconds(n),
                    _ => return None,
                };
            }
        }
    }
    if !number.is_empty() || !any {
        return None;
    }
    Some(if negative { -total } else { total })
}

/// What a new or edited event says.
#[derive(Debug, Clone, PartialEq)]
pub struct EventFields {
    pub title: String,
    pub location: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// A new resource holding one event, times in UTC.
pub fn emit_new(uid: &str, fields: &EventFields, now: DateTime<Utc>) -> String {
    let mut event = Event::new();
    event
        .uid(uid)
        .summary(&fields.title)
        .starts(fields.start)
        .ends(fields.end)
        .timestamp(now)
        .created(now)
        .last_modified(now);
    if !fields.location.is_empty() {
        event.location(&fields.location);
    }
    wrap(event.done())
}

fn wrap(event: Event) -> String {
    let mut calendar = VCalendar::empty();
    calendar.append_property(icalendar::Property::new("VERSION", "2.0"));
    calendar.append_property(icalendar::Property::new(
        "PRODID",
        "-//earshot//calendar//EN",
    ));
    calendar.push(event);
    calendar.to_string()
}

/// An existing resource with its series' fields changed (other properties
/// and overridden occurrences are kept); LAST-MODIFIED and DTSTAMP move to
/// `now`. A series keeps its wall-clock start zone when only the title or
/// place change.
pub fn emit_edit(
    text: &str,
    fields: &EventFields,
    times_changed: bool,
    now: DateTime<Utc>,
) -> Result<String, IcalError> {
    let mut calendar = VCalendar::from_str(text).map_err(|e| IcalError::Syntax(one_line(&e)))?;
    let mut found = false;
    for component in calendar.components.iter_mut() {
        if let CalendarComponent::Event(event) = component {
            if event.properties().contains_key("RECURRENCE-ID") || found {
                continue;
            }
            found = true;
            event.summary(&fields.title);
            if fields.location.is_empty() {
                event.remove_location();
            } else {
                event.location(&fields.location);
            }
            if times_changed {
                event.remove_property("DURATION");
                event.starts(fields.start).ends(fields.end);
            }
            event.timestamp(now).last_modified(now);
            let sequence = event.get_sequence().unwrap_or(0);
            event.sequence(sequence + 1);
        }
    }
    if !found {
        return Err(IcalError::NoEvent);
    }
    Ok(calendar.to_string())
}

/// A date, for all-day arithmetic in local time.
pub fn local_midnight(date: NaiveDate) -> Option<DateTime<Tz>> {
    at_local(&Tz::LOCAL, date.and_hms_opt(0, 0, 0)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(body: &str) -> String {
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{body}END:VCALENDAR\r\n")
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn utc_zoned_and_floating_times_resolve() {
        let text = cal("BEGIN:VEVENT\r\nUID:a\r\nDTSTAMP:20261201T000000Z\r\nSUMMARY:Dentist\r\nDTSTART;TZID=Europe/Berlin:20261203T110000\r\nDTEND;TZID=Europe/Berlin:20261203T120000\r\nEND:VEVENT\r\n");
        let r = parse(&text).unwrap();
        let e = r.master().unwrap();
        assert_eq!(e.start.with_timezone(&Utc), utc("2026-12-03T10:00:00Z"));
        assert_eq!(e.title, "Dentist");
        let floating = cal("BEGIN:VEVENT\r\nUID:b\r\nDTSTART:20261203T110000\r\nEND:VEVENT\r\n");
        let r = parse(&floating).unwrap();
        let local = chrono::Local
            .from_local_datetime(
                &NaiveDate::from_ymd_opt(2026, 12, 3)
                    .unwrap()
                    .and_hms_opt(11, 0, 0)
                    .unwrap(),
            )
            .earliest()
            .unwrap();
        assert_eq!(
            r.master().unwrap().start.with_timezone(&Utc),
            local.with_timezone(&Utc)
        );
    }

    #[test]
    fn an_unknown_zone_is_a_warning_and_local_time() {
        let text = cal(
            "BEGIN:VEVENT\r\nUID:c\r\nDTSTART;TZID=Mars/Olympus:20261203T110000\r\nEND:VEVENT\r\n",
        );
        let r = parse(&text).unwrap();
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].contains("unknown time zone 'Mars/Olympus'"),
            "{:?}",
            r.warnings
        );
        assert!(zone("/mozilla.org/20050126_1/Europe/Berlin").is_some());
    }

    #[test]
    fn bad_dates_and_garbage_are_errors_not_panics() {
        let feb = cal("BEGIN:VEVENT\r\nUID:d\r\nDTSTART:20270231T100000Z\r\nEND:VEVENT\r\n");
        let err = parse(&feb).unwrap_err().to_string();
        assert!(err.contains("DTSTART '20270231T100000Z'"), "{err}");
        assert!(parse("hello world").is_err());
        assert!(parse(&cal(
            "BEGIN:VEVENT\r\nDTSTART:20261203T110000Z\r\nEND:VEVENT\r\n"
        ))
        .is_err());
        assert_eq!(parse(&cal("")).unwrap_err(), IcalError::NoEvent);
    }

    #[test]
    fn a_weekly_series_expands_with_exdates_and_overrides() {
        let text = cal("BEGIN:VEVENT\r\nUID:s\r\nSUMMARY:Yoga\r\nDTSTART:20261207T090000Z\r\nDTEND:20261207T100000Z\r\nRRULE:FREQ=WEEKLY;COUNT=5\r\nEXDATE:20261214T090000Z\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:s\r\nSUMMARY:Yoga (late)\r\nRECURRENCE-ID:20261221T090000Z\r\nDTSTART:20261221T180000Z\r\nDTEND:20261221T190000Z\r\nEND:VEVENT\r\n");
        let r = parse(&text).unwrap();
        let spans = r.occurrences(utc("2026-12-01T00:00:00Z"), utc("2027-02-01T00:00:00Z"));
        let starts: Vec<_> = spans
            .iter()
            .map(|s| (s.start.to_rfc3339(), s.title.as_str()))
            .collect();
        assert_eq!(
            starts,
            vec![
                ("2026-12-07T09:00:00+00:00".to_string(), "Yoga"),
                ("2026-12-21T18:00:00+00:00".to_string(), "Yoga (late)"),
                ("2026-12-28T09:00:00+00:00".to_string(), "Yoga"),
                ("2027-01-04T09:00:00+00:00".to_string(), "Yoga"),
            ]
        );
        // A window in the middle of the series.
        let mid = r.occurrences(utc("2026-12-28T09:30:00Z"), utc("2026-12-29T00:00:00Z"));
        assert_eq!(mid.len(), 1, "an occurrence in progress overlaps");
    }

    #[test]
    fn a_zoned_series_keeps_its_wall_clock_across_dst() {
        let text = cal("BEGIN:VEVENT\r\nUID:z\r\nDTSTART;TZID=Europe/Berlin:20270320T100000\r\nDURATION:PT1H\r\nRRULE:FREQ=DAILY;COUNT=14\r\nEND:VEVENT\r\n");
        let r = parse(&text).unwrap();
        let spans = r.occurrences(utc("2027-03-27T00:00:00Z"), utc("2027-03-29T00:00:00Z"));
        let hours: Vec<_> = spans
            .iter()
            .map(|s| s.start.format("%d %H:%M").to_string())
            .collect();
        assert_eq!(hours, vec!["27 09:00", "28 08:00"]);
        assert_eq!(spans[0].end - spans[0].start, Duration::hours(1));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("PT1H30M"), Some(Duration::minutes(90)));
        assert_eq!(parse_duration("P1W"), Some(Duration::days(7)));
        assert_eq!(parse_duration("-PT15M"), Some(Duration::minutes(-15)));
        assert_eq!(parse_duration("PT"), None);
        assert_eq!(parse_duration("1H"), None);
    }

    #[test]
    fn emitted_events_read_back_and_edits_keep_other_properties() {
        let now = utc("2026-12-01T08:00:00Z");
        let fields = EventFields {
            title: "Haircut; short, please".into(),
            location: "High St".into(),
            start: utc("2026-12-03T11:00:00Z"),
            end: utc("2026-12-03T11:30:00Z"),
        };
        let text = emit_new("uid-1", &fields, now);
        let r = parse(&text).unwrap();
        let e = r.master().unwrap();
        assert_eq!(e.title, "Haircut; short, please");
        assert_eq!(e.location, "High St");
        assert_eq!(e.start.with_timezone(&Utc), fields.start);
        assert_eq!(r.modified(), Some(now));
        let with_extra = text.replace("END:VEVENT", "X-KEEP-ME:yes\r\nEND:VEVENT");
        let later = utc("2026-12-02T08:00:00Z");
        let moved = EventFields {
            start: utc("2026-12-03T12:00:00Z"),
            end: utc("2026-12-03T12:30:00Z"),
            ..fields
        };
        let edited = emit_edit(&with_extra, &moved, true, later).unwrap();
        assert!(edited.contains("X-KEEP-ME:yes"), "{edited}");
        let r = parse(&edited).unwrap();
        assert_eq!(r.master().unwrap().start.with_timezone(&Utc), moved.start);
        assert_eq!(r.modified(), Some(later));
    }
}
