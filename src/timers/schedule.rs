//! Local wall time: which instant "7:00" is, the next one, and which days
//! a repeat rings on.
//!
//! Generic over the time zone so the DST rules are tested against a named
//! zone (`Europe/Berlin` in the tests); the device passes chrono's
//! [`chrono::Local`], which is the system's zone and honours `TZ`.
//!
//! DST, as RFC 5545 does it for calendars: a local time that does not
//! exist (02:30 on the spring-forward night) is read with the offset in
//! force before the gap, so it rings an hour later on the new clock
//! (03:30); a local time that happens twice (02:30 on the fall-back
//! night) rings at the first one.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone, Utc};

/// A set of weekdays a repeat rings on (bit 0 = Monday).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Weekdays(u8);

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const DAY_WORDS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

impl Weekdays {
    /// Every day.
    pub const DAILY: Weekdays = Weekdays(0b111_1111);
    /// Monday to Friday.
    pub const WEEKDAYS: Weekdays = Weekdays(0b001_1111);
    /// Saturday and Sunday.
    pub const WEEKENDS: Weekdays = Weekdays(0b110_0000);

    /// The set holding just `day`.
    pub fn only(day: chrono::Weekday) -> Weekdays {
        Weekdays(1 << day.num_days_from_monday())
    }

    /// This set plus `day`.
    pub fn with(self, day: chrono::Weekday) -> Weekdays {
        Weekdays(self.0 | Self::only(day).0)
    }

    /// Whether `day` is in the set.
    pub fn contains(self, day: chrono::Weekday) -> bool {
        self.0 & Self::only(day).0 != 0
    }

    /// Whether no day is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Read "daily", "every day", "weekdays", "weekends" or days such as
    /// "mon,wed", "Monday and Friday", "tue thu". `None` when a word is not
    /// a day (the caller says which forms work).
    pub fn parse(text: &str) -> Option<Weekdays> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "daily" | "every day" | "everyday" | "each day" => return Some(Self::DAILY),
            "weekdays" | "every weekday" | "workdays" => return Some(Self::WEEKDAYS),
            "weekends" | "weekend" | "every weekend" => return Some(Self::WEEKENDS),
            _ => {}
        }
        let mut set = Weekdays(0);
        for word in t
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty() && *w != "and" && *w != "every")
        {
            let word = word
                .strip_suffix('s')
                .filter(|w| w.len() > 2)
                .unwrap_or(word);
            let i = DAY_NAMES.iter().zip(DAY_WORDS).position(|(short, long)| {
                word == *short || word == long || (word.len() >= 3 && long.starts_with(word))
            })?;
            set.0 |= 1 << i;
        }
        (!set.is_empty()).then_some(set)
    }
}

impl std::fmt::Display for Weekdays {
    /// The canonical spelling stored and shown: "daily", "weekdays",
    /// "weekends", or short day names joined by commas ("mon,wed").
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::DAILY => f.write_str("daily"),
            Self::WEEKDAYS => f.write_str("weekdays"),
            Self::WEEKENDS => f.write_str("weekends"),
            Weekdays(bits) => {
                let days: Vec<&str> = (0..7)
                    .filter(|i| bits & (1 << i) != 0)
                    .map(|i| DAY_NAMES[i])
                    .collect();
                f.write_str(&days.join(","))
            }
        }
    }
}

/// The instant a local wall time names in `tz` (see the module's DST rule).
pub fn resolve<Tz: TimeZone>(tz: &Tz, local: NaiveDateTime) -> DateTime<Tz> {
    match tz.from_local_datetime(&local) {
        chrono::LocalResult::Single(t) => t,
        // The earlier instant, whichever order the zone reports them in
        // (chrono's `Local` has given them later-first).
        chrono::LocalResult::Ambiguous(a, b) => {
            if a.naive_utc() <= b.naive_utc() {
                a
            } else {
                b
            }
        }
        chrono::LocalResult::None => {
            // In a gap: use the offset in force just before it.
            let before = (1..=26)
                .filter_map(|h| {
                    tz.from_local_datetime(&(local - TimeDelta::hours(h)))
                        .earliest()
                })
                .next();
            let offset = before
                .map(|b| b.offset().fix().local_minus_utc())
                .unwrap_or(0);
            let utc = local - TimeDelta::seconds(i64::from(offset));
            tz.from_utc_datetime(&utc)
        }
    }
}

/// The first local `time` strictly after `now` on a day `days` allows (any
/// day when `None`): "7:00" said at 8:00 is tomorrow's. The local date and
/// time it falls on is returned; [`resolve`] gives its instant.
pub fn next_occurrence<Tz: TimeZone>(
    tz: &Tz,
    now: DateTime<Utc>,
    time: NaiveTime,
    days: Option<Weekdays>,
) -> NaiveDateTime {
    let today = now.with_timezone(tz).date_naive();
    // Eight days cover every weekday set; the loop always returns early
    // for a non-empty set.
    for ahead in 0..=8 {
        let date = today + TimeDelta::days(ahead);
        if days.is_some_and(|d| !d.contains(date.weekday())) {
            continue;
        }
        let local = date.and_time(time);
        if resolve(tz, local).with_timezone(&Utc) > now {
            return local;
        }
    }
    (today + TimeDelta::days(1)).and_time(time)
}

/// A local date-time as stored: `YYYY-MM-DDTHH:MM:SS`.
pub fn format_local(local: NaiveDateTime) -> String {
    local.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Read [`format_local`]'s form back.
pub fn parse_local(text: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").ok()
}

/// Today's local date in `tz` at `now`.
pub fn local_today<Tz: TimeZone>(tz: &Tz, now: DateTime<Utc>) -> NaiveDate {
    now.with_timezone(tz).date_naive()
}

use chrono::Offset;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Europe::Berlin;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }
    fn local(s: &str) -> NaiveDateTime {
        parse_local(s).unwrap()
    }

    #[test]
    fn weekdays_parse_and_print_canonically() {
        assert_eq!(Weekdays::parse("every day"), Some(Weekdays::DAILY));
        assert_eq!(Weekdays::parse("Weekdays"), Some(Weekdays::WEEKDAYS));
        let mw = Weekdays::parse("Monday and wednesdays").unwrap();
        assert_eq!(mw.to_string(), "mon,wed");
        assert_eq!(Weekdays::parse("mon,wed"), Some(mw));
        assert_eq!(Weekdays::parse("sat sun").unwrap().to_string(), "weekends");
        assert_eq!(Weekdays::parse("mon,funday"), None);
        assert_eq!(Weekdays::parse(""), None);
    }

    #[test]
    fn spring_forward_gap_rings_an_hour_later_on_the_new_clock() {
        // 2027-03-28: Berlin jumps from 02:00 CET to 03:00 CEST.
        let t = resolve(&Berlin, local("2027-03-28T02:30:00"));
        assert_eq!(t.to_rfc3339(), "2027-03-28T03:30:00+02:00");
        let before = resolve(&Berlin, local("2027-03-28T01:30:00"));
        assert_eq!(before.to_rfc3339(), "2027-03-28T01:30:00+01:00");
    }

    #[test]
    fn fall_back_repeated_hour_rings_at_the_first() {
        // 2027-10-31: Berlin goes from 03:00 CEST back to 02:00 CET.
        let t = resolve(&Berlin, local("2027-10-31T02:30:00"));
        assert_eq!(t.to_rfc3339(), "2027-10-31T02:30:00+02:00");
        assert_eq!(
            t.with_timezone(&Utc).to_rfc3339(),
            "2027-10-31T00:30:00+00:00"
        );
    }

    #[test]
    fn a_daily_alarm_keeps_its_local_time_across_both_transitions() {
        let seven = NaiveTime::from_hms_opt(7, 0, 0).unwrap();
        // Saturday 07:00 CET has rung; the next is Sunday 07:00 CEST,
        // 23 hours later in absolute time.
        let rang = utc("2027-03-27T06:00:00Z");
        let next = next_occurrence(&Berlin, rang, seven, Some(Weekdays::DAILY));
        assert_eq!(next, local("2027-03-28T07:00:00"));
        let at = resolve(&Berlin, next);
        assert_eq!(at.to_rfc3339(), "2027-03-28T07:00:00+02:00");
        assert_eq!(at.with_timezone(&Utc) - rang, TimeDelta::hours(23));
        // Autumn: 25 hours between Saturday's and Sunday's 07:00.
        let rang = utc("2027-10-30T05:00:00Z");
        let next = next_occurrence(&Berlin, rang, seven, None);
        let at = resolve(&Berlin, next);
        assert_eq!(at.to_rfc3339(), "2027-10-31T07:00:00+01:00");
        assert_eq!(at.with_timezone(&Utc) - rang, TimeDelta::hours(25));
    }

    #[test]
    fn next_occurrence_is_today_or_the_next_allowed_day() {
        let seven = NaiveTime::from_hms_opt(7, 0, 0).unwrap();
        // Friday 2027-01-08 06:00 local (05:00 UTC).
        let fri_early = utc("2027-01-08T05:00:00Z");
        assert_eq!(
            next_occurrence(&Berlin, fri_early, seven, None),
            local("2027-01-08T07:00:00")
        );
        // At 07:00 exactly it is no longer "next": tomorrow.
        let fri_seven = utc("2027-01-08T06:00:00Z");
        assert_eq!(
            next_occurrence(&Berlin, fri_seven, seven, None),
            local("2027-01-09T07:00:00")
        );
        // Weekdays from Friday after seven: Monday.
        assert_eq!(
            next_occurrence(&Berlin, fri_seven, seven, Some(Weekdays::WEEKDAYS)),
            local("2027-01-11T07:00:00")
        );
        assert_eq!(
            next_occurrence(
                &Berlin,
                fri_seven,
                seven,
                Some(Weekdays::parse("fri").unwrap())
            ),
            local("2027-01-15T07:00:00")
        );
    }
}
