//! The compact forms typed at the CLI and passed by the agent's tools:
//! lengths like `90s`, `5m`, `1h30m` (or `20 minutes`), times like
//! `07:00`, `tomorrow 06:30`, `2026-12-24 18:00` or an RFC 3339 instant.
//!
//! Small and strict on purpose: digits and unit words only. Spoken forms
//! ("an hour and a half", "half past nine") are the language layer's
//! (`nlu::when`), which turns them into the same [`super::When`].

use std::time::Duration;

use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta};

use super::When;

/// Why a compact form was not understood: one line saying what works.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("'{0}' is not a length; write it like 90s, 5m, 1h30m or \"20 minutes\"")]
    Duration(String),
    #[error("'{0}' is not a time; write it like 07:00, \"tomorrow 06:30\", 2026-12-24T18:00 or an RFC 3339 time")]
    Time(String),
    #[error("'{0}' is not a repeat; use daily, weekdays, weekends or days like mon,wed")]
    Repeat(String),
}

/// A length: `90s`, `5m`, `1h30m`, `1h30` (minutes after hours),
/// `2 hours 5 minutes`, `20 min`. No bare numbers (seconds? minutes?).
pub fn duration(text: &str) -> Result<Duration, ParseError> {
    let bad = || ParseError::Duration(text.trim().to_string());
    let t = text.trim().to_ascii_lowercase().replace(" and ", " ");
    let mut total: u64 = 0;
    let mut rest = t.as_str().trim_start();
    let mut units_seen = 0;
    let mut last_unit = None;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let secs = match unit {
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "s" | "sec" | "secs" | "second" | "seconds" => 1,
            // "1h30": minutes after hours.
            "" if last_unit == Some(3600) && rest.is_empty() => 60,
            _ => return Err(bad()),
        };
        if last_unit.is_some_and(|l| l <= secs) {
            return Err(bad());
        }
        last_unit = Some(secs);
        units_seen += 1;
        total = n
            .checked_mul(secs)
            .and_then(|v| v.checked_add(total))
            .ok_or_else(bad)?;
        rest = rest[unit_len..].trim_start_matches([' ', ',']);
    }
    if units_seen == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// A clock time `HH:MM` or `HH:MM:SS` (24-hour).
pub fn time_of_day(text: &str) -> Option<NaiveTime> {
    let t = text.trim();
    NaiveTime::parse_from_str(t, "%H:%M")
        .or_else(|_| NaiveTime::parse_from_str(t, "%H:%M:%S"))
        .ok()
        .filter(|_| t.len() >= 4 && t.len() <= 8)
}

/// A point in time: `07:00` (the next 7:00), `today 18:00`, `tomorrow
/// 06:30`, `2026-12-24 18:00` / `2026-12-24T18:00[:SS]` (local), or RFC
/// 3339 with an offset. `today` is the local date "today" means.
pub fn at(text: &str, today: NaiveDate) -> Result<When, ParseError> {
    let bad = || ParseError::Time(text.trim().to_string());
    let t = text.trim();
    if let Some(time) = time_of_day(t) {
        return Ok(When::Next { time, days: None });
    }
    let lower = t.to_ascii_lowercase();
    for (word, ahead) in [("today", 0), ("tomorrow", 1)] {
        if let Some(rest) = lower.strip_prefix(word) {
            let rest = rest.trim_start().trim_start_matches("at ").trim();
            let time = time_of_day(rest).ok_or_else(bad)?;
            return Ok(When::At((today + TimeDelta::days(ahead)).and_time(time)));
        }
    }
    if let Ok(instant) = DateTime::parse_from_rfc3339(t) {
        return Ok(When::At(instant.with_timezone(&Local).naive_local()));
    }
    for format in [
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
    ] {
        if let Ok(local) = NaiveDateTime::parse_from_str(t, format) {
            return Ok(When::At(local));
        }
    }
    Err(bad())
}

/// A date `YYYY-MM-DD`, `today` or `tomorrow`.
pub fn date(text: &str, today: NaiveDate) -> Option<NaiveDate> {
    match text.trim().to_ascii_lowercase().as_str() {
        "today" => Some(today),
        "tomorrow" => Some(today + TimeDelta::days(1)),
        t => NaiveDate::parse_from_str(t, "%Y-%m-%d").ok(),
    }
}

/// A repeat: `daily`, `weekdays`, `weekends`, `mon,wed`, …
pub fn repeat(text: &str) -> Result<super::Weekdays, ParseError> {
    super::Weekdays::parse(text).ok_or_else(|| ParseError::Repeat(text.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(t: &str) -> u64 {
        duration(t).unwrap().as_secs()
    }

    #[test]
    fn compact_and_worded_lengths() {
        assert_eq!(secs("90s"), 90);
        assert_eq!(secs("5m"), 300);
        assert_eq!(secs("1h30m"), 5400);
        assert_eq!(secs("1h30"), 5400);
        assert_eq!(secs("2 hours 5 minutes"), 7500);
        assert_eq!(secs("1 minute and 20 seconds"), 80);
        assert_eq!(secs("20 min"), 1200);
        for bad in [
            "",
            "90",
            "5x",
            "m5",
            "5m 1h",
            "5m5m",
            "-5m",
            "1.5h",
            "99999999999999999999h",
        ] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
        assert!(duration("5x").unwrap_err().to_string().contains("90s, 5m"));
    }

    #[test]
    fn times_dates_and_instants() {
        let today = NaiveDate::from_ymd_opt(2026, 12, 2).unwrap();
        let seven = NaiveTime::from_hms_opt(7, 0, 0).unwrap();
        assert_eq!(
            at("07:00", today).unwrap(),
            When::Next {
                time: seven,
                days: None
            }
        );
        assert_eq!(
            at("tomorrow 06:30", today).unwrap(),
            When::At(
                NaiveDate::from_ymd_opt(2026, 12, 3)
                    .unwrap()
                    .and_hms_opt(6, 30, 0)
                    .unwrap()
            )
        );
        assert_eq!(
            at("2026-12-24T18:00", today).unwrap(),
            When::At(
                NaiveDate::from_ymd_opt(2026, 12, 24)
                    .unwrap()
                    .and_hms_opt(18, 0, 0)
                    .unwrap()
            )
        );
        assert!(matches!(
            at("2026-12-24T18:00:00+00:00", today),
            Ok(When::At(_))
        ));
        for bad in [
            "25:00",
            "7",
            "tomorrow",
            "12:60",
            "soon",
            "2026-02-31 10:00",
        ] {
            assert!(at(bad, today).is_err(), "{bad:?}");
        }
        assert_eq!(
            date("tomorrow", today),
            NaiveDate::from_ymd_opt(2026, 12, 3)
        );
        assert_eq!(date("2026-02-31", today), None);
        assert!(repeat("fortnightly").is_err());
    }
}
