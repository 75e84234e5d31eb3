//! "What time is it" / "what's the date": the device clock, local time zone
//! (`TZ`), said the way people say it.

use chrono::{DateTime, Local, NaiveDate, TimeZone};

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};

/// "It's 6:05 PM."
pub struct TimeNow;
/// "Today is Monday, November 30, 2026."
pub struct DateToday;

/// The time as spoken: 12-hour clock without a leading zero.
pub fn say_time<Tz: TimeZone>(now: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    format!("It's {}.", now.format("%-I:%M %p"))
}

/// The date as spoken.
pub fn say_date<Tz: TimeZone>(now: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    format!("Today is {}.", now.format("%A, %B %-d, %Y"))
}

/// The device clock. `EARSHOT_TEST_CLOCK=HH:MM` (24-hour, test-only) pins
/// the time of day so end-to-end audio tests can say a known time — the
/// speech round trip of some times ("eight eleven") is beyond tiny.en.
fn device_now() -> DateTime<Local> {
    let now = Local::now();
    let pinned = std::env::var("EARSHOT_TEST_CLOCK").ok().and_then(|hm| {
        let (h, m) = hm.trim().split_once(':')?;
        let time = chrono::NaiveTime::from_hms_opt(h.parse().ok()?, m.parse().ok()?, 0)?;
        now.date_naive()
            .and_time(time)
            .and_local_timezone(Local)
            .single()
    });
    pinned.unwrap_or(now)
}

impl Action for TimeNow {
    fn name(&self) -> &'static str {
        "time_now"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, _: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        Ok(ActionOutput::said(say_time(&device_now())))
    }
}

impl Action for DateToday {
    fn name(&self) -> &'static str {
        "date_today"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let now = device_now();
        let today = now.date_naive();
        let asked = crate::tree::fit::asked_day(&crate::tree::fit::tidy(&call.text), today);
        Ok(ActionOutput::said(match asked {
            Some(day) => say_other_date(today, day),
            None => say_date(&now),
        }))
    }
}

/// The date of another day than today, as spoken: "Tomorrow is Monday,
/// December 7, 2026.", "Yesterday was …", else "That's Friday, December
/// 11, 2026." (or "That was …" for a day gone).
pub fn say_other_date(today: NaiveDate, day: NaiveDate) -> String {
    let date = day.format("%A, %B %-d, %Y");
    match (day - today).num_days() {
        1 => format!("Tomorrow is {date}."),
        -1 => format!("Yesterday was {date}."),
        n if n < 0 => format!("That was {date}."),
        _ => format!("That's {date}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, TimeZone};

    #[test]
    fn spoken_forms() {
        let tz = FixedOffset::east_opt(0).unwrap();
        let t = tz.with_ymd_and_hms(2026, 11, 30, 18, 5, 0).unwrap();
        assert_eq!(say_time(&t), "It's 6:05 PM.");
        assert_eq!(say_date(&t), "Today is Monday, November 30, 2026.");
        let today = NaiveDate::from_ymd_opt(2026, 12, 6).unwrap();
        let day = |d| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        assert_eq!(
            say_other_date(today, day(7)),
            "Tomorrow is Monday, December 7, 2026."
        );
        assert_eq!(
            say_other_date(today, day(5)),
            "Yesterday was Saturday, December 5, 2026."
        );
        assert_eq!(
            say_other_date(today, day(25)),
            "That's Friday, December 25, 2026."
        );
        assert_eq!(
            say_other_date(today, day(1)),
            "That was Tuesday, December 1, 2026."
        );
        let morning = tz.with_ymd_and_hms(2026, 1, 2, 0, 30, 0).unwrap();
        assert_eq!(say_time(&morning), "It's 12:30 AM.");
    }
}
