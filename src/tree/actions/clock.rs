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
    fn run(&self, call: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let now = device_now();
        let tidy = crate::tree::fit::tidy(&call.text);
        if let Some(ahead) = crate::tree::fit::asked_time_ahead(&tidy) {
            let then = chrono::Duration::from_std(ahead)
                .ok()
                .and_then(|d| now.checked_add_signed(d));
            if let Some(then) = then {
                return Ok(ActionOutput::said(format!(
                    "In {} it'll be {}.",
                    crate::nlu::when::say_duration(ahead),
                    then.format("%-I:%M %p")
                )));
            }
        }
        if let Some((a, b)) = crate::tree::fit::asked_time_difference(&tidy) {
            return Ok(ActionOutput::said(match (zone_of(&a), zone_of(&b)) {
                (Zone::One(za), Zone::One(zb)) => say_difference(&now, (za, &a), (zb, &b)),
                (Zone::One(_), _) => unknown_zone(&b),
                _ => unknown_zone(&a),
            }));
        }
        let Some(place) = crate::tree::fit::asked_place(&tidy) else {
            return Ok(ActionOutput::said(say_time(&now)));
        };
        Ok(ActionOutput::said(match zone_of(&place) {
            Zone::One(tz) => say_time_in(&now, tz, &place),
            Zone::Several => {
                let mut place = capitalised(&place);
                if let Some(first) = place.get(..1) {
                    place = first.to_uppercase() + &place[1..];
                }
                format!("{place} has more than one time zone. Ask me for a city there.")
            }
            Zone::Unknown => {
                format!(
                    "I don't know the time zone of {}. Ask me for a big city near it.",
                    capitalised(&place)
                )
            }
        }))
    }
}

/// "I don't know the time zone of Atlantis. …"
fn unknown_zone(place: &str) -> String {
    format!(
        "I don't know the time zone of {}. Ask me for a big city near it.",
        capitalised(place)
    )
}

/// "Tokyo is 9 hours ahead of London.", from the two zones' offsets now
/// (summer time included); half and quarter hours are said.
pub fn say_difference<Tz: TimeZone>(
    now: &DateTime<Tz>,
    (za, a): (chrono_tz::Tz, &str),
    (zb, b): (chrono_tz::Tz, &str),
) -> String {
    use chrono::Offset;
    let offset =
        |z: chrono_tz::Tz| i64::from(now.with_timezone(&z).offset().fix().local_minus_utc());
    let minutes = (offset(za) - offset(zb)) / 60;
    let (a, b) = (capitalised(a), capitalised(b));
    if minutes == 0 {
        return format!("{a} and {b} have the same time.");
    }
    let length =
        crate::nlu::when::say_duration(std::time::Duration::from_secs(minutes.unsigned_abs() * 60));
    let way = if minutes > 0 { "ahead of" } else { "behind" };
    format!("{a} is {length} {way} {b}.")
}

/// The time zone a spoken place names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    One(chrono_tz::Tz),
    /// A country that spans several zones ("America", "Australia").
    Several,
    Unknown,
}

/// Places people ask about whose zone's IANA name does not say them
/// (a city that is not its zone's namesake, a country, a region).
const PLACES: &[(&str, &str)] = &[
    ("uk", "Europe/London"),
    ("the uk", "Europe/London"),
    ("england", "Europe/London"),
    ("britain", "Europe/London"),
    ("great britain", "Europe/London"),
    ("scotland", "Europe/London"),
    ("wales", "Europe/London"),
    ("manchester", "Europe/London"),
    ("edinburgh", "Europe/London"),
    ("glasgow", "Europe/London"),
    ("birmingham", "Europe/London"),
    ("ireland", "Europe/Dublin"),
    ("france", "Europe/Paris"),
    ("germany", "Europe/Berlin"),
    ("munich", "Europe/Berlin"),
    ("frankfurt", "Europe/Berlin"),
    ("hamburg", "Europe/Berlin"),
    ("cologne", "Europe/Berlin"),
    ("spain", "Europe/Madrid"),
    ("barcelona", "Europe/Madrid"),
    ("seville", "Europe/Madrid"),
    ("italy", "Europe/Rome"),
    ("milan", "Europe/Rome"),
    ("florence", "Europe/Rome"),
    ("venice", "Europe/Rome"),
    ("naples", "Europe/Rome"),
    ("the netherlands", "Europe/Amsterdam"),
    ("netherlands", "Europe/Amsterdam"),
    ("holland", "Europe/Amsterdam"),
    ("belgium", "Europe/Brussels"),
    ("switzerland", "Europe/Zurich"),
    ("geneva", "Europe/Zurich"),
    ("austria", "Europe/Vienna"),
    ("sweden", "Europe/Stockholm"),
    ("norway", "Europe/Oslo"),
    ("denmark", "Europe/Copenhagen"),
    ("finland", "Europe/Helsinki"),
    ("greece", "Europe/Athens"),
    ("poland", "Europe/Warsaw"),
    ("czech republic", "Europe/Prague"),
    ("hungary", "Europe/Budapest"),
    ("romania", "Europe/Bucharest"),
    ("ukraine", "Europe/Kyiv"),
    ("kiev", "Europe/Kyiv"),
    ("turkey", "Europe/Istanbul"),
    ("st petersburg", "Europe/Moscow"),
    ("saint petersburg", "Europe/Moscow"),
    ("israel", "Asia/Jerusalem"),
    ("tel aviv", "Asia/Jerusalem"),
    ("egypt", "Africa/Cairo"),
    ("south africa", "Africa/Johannesburg"),
    ("cape town", "Africa/Johannesburg"),
    ("kenya", "Africa/Nairobi"),
    ("nigeria", "Africa/Lagos"),
    ("uae", "Asia/Dubai"),
    ("the uae", "Asia/Dubai"),
    ("abu dhabi", "Asia/Dubai"),
    ("saudi arabia", "Asia/Riyadh"),
    ("india", "Asia/Kolkata"),
    ("mumbai", "Asia/Kolkata"),
    ("bombay", "Asia/Kolkata"),
    ("delhi", "Asia/Kolkata"),
    ("new delhi", "Asia/Kolkata"),
    ("bangalore", "Asia/Kolkata"),
    ("bengaluru", "Asia/Kolkata"),
    ("chennai", "Asia/Kolkata"),
    ("calcutta", "Asia/Kolkata"),
    ("pakistan", "Asia/Karachi"),
    ("china", "Asia/Shanghai"),
    ("beijing", "Asia/Shanghai"),
    ("shenzhen", "Asia/Shanghai"),
    ("hong kong", "Asia/Hong_Kong"),
    ("korea", "Asia/Seoul"),
    ("south korea", "Asia/Seoul"),
    ("japan", "Asia/Tokyo"),
    ("osaka", "Asia/Tokyo"),
    ("kyoto", "Asia/Tokyo"),
    ("thailand", "Asia/Bangkok"),
    ("vietnam", "Asia/Ho_Chi_Minh"),
    ("hanoi", "Asia/Ho_Chi_Minh"),
    ("saigon", "Asia/Ho_Chi_Minh"),
    ("philippines", "Asia/Manila"),
    ("the philippines", "Asia/Manila"),
    ("taiwan", "Asia/Taipei"),
    ("new zealand", "Pacific/Auckland"),
    ("wellington", "Pacific/Auckland"),
    ("hawaii", "Pacific/Honolulu"),
    ("alaska", "America/Anchorage"),
    ("california", "America/Los_Angeles"),
    ("san francisco", "America/Los_Angeles"),
    ("seattle", "America/Los_Angeles"),
    ("las vegas", "America/Los_Angeles"),
    ("san diego", "America/Los_Angeles"),
    ("silicon valley", "America/Los_Angeles"),
    ("washington dc", "America/New_York"),
    ("washington d.c.", "America/New_York"),
    ("dc", "America/New_York"),
    ("boston", "America/New_York"),
    ("miami", "America/New_York"),
    ("atlanta", "America/New_York"),
    ("philadelphia", "America/New_York"),
    ("florida", "America/New_York"),
    ("nyc", "America/New_York"),
    ("texas", "America/Chicago"),
    ("dallas", "America/Chicago"),
    ("houston", "America/Chicago"),
    ("austin", "America/Chicago"),
    ("new orleans", "America/Chicago"),
    ("minneapolis", "America/Chicago"),
    ("colorado", "America/Denver"),
    ("salt lake city", "America/Denver"),
    ("arizona", "America/Phoenix"),
    ("montreal", "America/Toronto"),
    ("ottawa", "America/Toronto"),
    ("quebec", "America/Toronto"),
    ("rio", "America/Sao_Paulo"),
    ("rio de janeiro", "America/Sao_Paulo"),
    ("argentina", "America/Argentina/Buenos_Aires"),
    ("peru", "America/Lima"),
    ("colombia", "America/Bogota"),
    ("chile", "America/Santiago"),
];

/// Countries and continents with more than one zone: which one is asked
/// can't be guessed.
const SEVERAL: &[&str] = &[
    "america",
    "the us",
    "us",
    "usa",
    "the usa",
    "the united states",
    "united states",
    "the states",
    "canada",
    "australia",
    "brazil",
    "russia",
    "mexico",
    "indonesia",
    "europe",
    "asia",
    "africa",
    "the world",
    "kazakhstan",
];

/// The time zone of a spoken `place`: the table above, then any IANA zone
/// whose last part is the place ("Tokyo" → Asia/Tokyo, "New York" →
/// America/New_York) or whose whole name is ("Japan", "Singapore").
pub fn zone_of(place: &str) -> Zone {
    let key = place
        .trim()
        .trim_end_matches(['?', '.', '!', ','])
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if SEVERAL.contains(&key.as_str()) {
        return Zone::Several;
    }
    if let Some(tz) = PLACES
        .iter()
        .find(|(name, _)| *name == key)
        .and_then(|(_, zone)| zone.parse::<chrono_tz::Tz>().ok())
    {
        return Zone::One(tz);
    }
    let bare = key.strip_prefix("the ").unwrap_or(&key);
    chrono_tz::TZ_VARIANTS
        .iter()
        .find(|tz| {
            let name = tz.name().to_lowercase().replace('_', " ");
            name == bare || name.rsplit('/').next() == Some(bare)
        })
        .map_or(Zone::Unknown, |tz| Zone::One(*tz))
}

/// "It's 11:31 PM in Tokyo.", with the day when it is not the same day
/// as here ("It's 1:31 AM on Monday in Tokyo.").
pub fn say_time_in<Tz: TimeZone>(now: &DateTime<Tz>, zone: chrono_tz::Tz, place: &str) -> String {
    let there = now.with_timezone(&zone);
    let place = capitalised(place);
    if there.date_naive() == now.date_naive() {
        format!("It's {} in {place}.", there.format("%-I:%M %p"))
    } else {
        format!(
            "It's {} on {} in {place}.",
            there.format("%-I:%M %p"),
            there.format("%A")
        )
    }
}

/// Each word of a place's name with a capital ("new york" → "New York"),
/// as whisper may write it lower-case; "the" stays small and initials
/// stay initials ("the UK").
fn capitalised(place: &str) -> String {
    const INITIALS: &[&str] = &["uk", "us", "usa", "uae", "dc", "nyc"];
    place
        .split_whitespace()
        .map(|w| {
            let lower = w.to_lowercase();
            if INITIALS.contains(&lower.as_str()) {
                return w.to_uppercase();
            }
            if lower == "the" {
                return lower;
            }
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
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
        let tidy = crate::tree::fit::tidy(&call.text);
        if let Some((day, name)) = crate::tree::fit::counted_day(&tidy, today) {
            let weeks = tidy.to_lowercase().contains("week");
            return Ok(ActionOutput::said(say_days_until(today, day, name, weeks)));
        }
        if let Some((day, name)) = crate::tree::fit::asked_holiday(&tidy, today) {
            return Ok(ActionOutput::said(say_holiday(today, day, name)));
        }
        if crate::tree::fit::asks_weekday(&tidy) {
            return Ok(ActionOutput::said(say_weekday_or_weekend(&tidy, today)));
        }
        if crate::tree::fit::asks_week_number(&tidy) {
            use chrono::Datelike;
            return Ok(ActionOutput::said(format!(
                "It's week {} of {}.",
                today.iso_week().week(),
                today.iso_week().year()
            )));
        }
        if let Some(place) = crate::tree::fit::asked_date_place(&tidy) {
            return Ok(ActionOutput::said(match zone_of(&place) {
                Zone::One(tz) => format!(
                    "In {} it's {}.",
                    capitalised(&place),
                    now.with_timezone(&tz).format("%A, %B %-d")
                ),
                Zone::Several => format!(
                    "{} has more than one time zone. Ask me for a city there.",
                    capitalised(&place)
                ),
                Zone::Unknown => unknown_zone(&place),
            }));
        }
        let asked = crate::tree::fit::asked_day(&tidy, today);
        Ok(ActionOutput::said(match asked {
            Some(day) => say_other_date(today, day),
            None => say_date(&now),
        }))
    }
}

/// "Christmas is on Friday, December 25.", with the year when it is not
/// this year's ("Halloween is on Sunday, October 31, 2027." asked in
/// December), "… is today, …" on the day.
pub fn say_holiday(today: NaiveDate, day: NaiveDate, name: &str) -> String {
    use chrono::Datelike;
    let date = if day.year() == today.year() {
        day.format("%A, %B %-d").to_string()
    } else {
        day.format("%A, %B %-d, %Y").to_string()
    };
    if day == today {
        format!("{name} is today, {date}.")
    } else if day < today {
        format!("{name} was on {date}.")
    } else {
        format!("{name} is on {date}.")
    }
}

/// "Is it a weekday?" / "is it the weekend?" answered yes or no, with
/// the day ("No, today is Sunday.").
pub fn say_weekday_or_weekend(question: &str, today: NaiveDate) -> String {
    use chrono::{Datelike, Weekday};
    let weekend = matches!(today.weekday(), Weekday::Sat | Weekday::Sun);
    let asks_weekend =
        question.to_lowercase().contains("weekend") || question.to_lowercase().contains("day off");
    let yes = weekend == asks_weekend;
    format!(
        "{}, today is {}.",
        if yes { "Yes" } else { "No" },
        today.format("%A")
    )
}

/// How far `day` is from `today`, as spoken: "There are 19 days until
/// Christmas.", "Christmas is tomorrow.", "There are 2 weeks and 5 days
/// until Christmas." when weeks were asked. `name` is the holiday's;
/// without one the date is said.
pub fn say_days_until(today: NaiveDate, day: NaiveDate, name: Option<&str>, weeks: bool) -> String {
    let named = name
        .map(str::to_string)
        .unwrap_or_else(|| day.format("%A, %B %-d").to_string());
    let capital = |s: &str| {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect::<String>())
            .unwrap_or_default()
    };
    let n = (day - today).num_days();
    let plural = |n: i64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    match n {
        i64::MIN..=-1 => format!("{} was {} ago.", capital(&named), plural(-n, "day")),
        0 if name == Some("the weekend") => "It's the weekend.".to_string(),
        0 => format!("{} is today.", capital(&named)),
        1 => format!("{} is tomorrow.", capital(&named)),
        _ if weeks && n >= 7 => {
            let (w, d) = (n / 7, n % 7);
            let span = if d == 0 {
                plural(w, "week")
            } else {
                format!("{} and {}", plural(w, "week"), plural(d, "day"))
            };
            let verb = if w == 1 && d == 0 { "is" } else { "are" };
            format!("There {verb} {span} until {named}.")
        }
        _ => format!("There are {} until {named}.", plural(n, "day")),
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
    fn time_differences_are_the_zones_offsets_now() {
        let winter = chrono::Utc.with_ymd_and_hms(2026, 12, 7, 12, 0, 0).unwrap();
        let summer = chrono::Utc.with_ymd_and_hms(2026, 7, 1, 12, 0, 0).unwrap();
        fn zone(p: &str) -> (chrono_tz::Tz, &str) {
            match zone_of(p) {
                Zone::One(z) => (z, p),
                other => panic!("{p}: {other:?}"),
            }
        }
        assert_eq!(
            say_difference(&winter, zone("tokyo"), zone("london")),
            "Tokyo is 9 hours ahead of London."
        );
        assert_eq!(
            say_difference(&summer, zone("tokyo"), zone("london")),
            "Tokyo is 8 hours ahead of London."
        );
        assert_eq!(
            say_difference(&winter, zone("new york"), zone("london")),
            "New York is 5 hours behind London."
        );
        assert!(say_difference(&winter, zone("delhi"), zone("london")).contains("30 minutes"));
        assert_eq!(
            say_difference(&winter, zone("paris"), zone("berlin")),
            "Paris and Berlin have the same time."
        );
    }

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

    #[test]
    fn days_until_a_day_are_counted() {
        let today = NaiveDate::from_ymd_opt(2026, 12, 6).unwrap();
        let count = |q: &str| {
            let t = crate::tree::fit::tidy(q);
            crate::tree::fit::counted_day(&t, today)
                .map(|(day, name)| say_days_until(today, day, name, t.contains("week")))
        };
        assert_eq!(
            count("How many days until Christmas?").as_deref(),
            Some("There are 19 days until Christmas.")
        );
        assert_eq!(
            count("how many sleeps till christmas eve").as_deref(),
            Some("There are 18 days until Christmas Eve.")
        );
        assert_eq!(
            count("how many weeks until christmas").as_deref(),
            Some("There are 2 weeks and 5 days until Christmas.")
        );
        // A holiday gone this year is next year's.
        assert_eq!(
            count("how long until halloween").as_deref(),
            Some("There are 329 days until Halloween.")
        );
        assert_eq!(
            count("how many days until new year's").as_deref(),
            Some("There are 26 days until New Year's Day.")
        );
        assert_eq!(
            count("how many days until the 25th").as_deref(),
            Some("There are 19 days until Friday, December 25.")
        );
        assert_eq!(
            count("how many days until friday").as_deref(),
            Some("There are 5 days until Friday, December 11.")
        );
        // The weekend: Saturday, or now.
        assert_eq!(
            count("how many days until the weekend").as_deref(),
            Some("It's the weekend.")
        );
        let wednesday = NaiveDate::from_ymd_opt(2026, 12, 9).unwrap();
        let (day, name) =
            crate::tree::fit::counted_day("how long until the weekend", wednesday).unwrap();
        assert_eq!(
            say_days_until(wednesday, day, name, false),
            "There are 3 days until the weekend."
        );
        // Not a day: left to the model.
        for other in [
            "how many days until my flight",
            "how long until dinner",
            "how many days until my birthday",
            "how many days until the dentist on friday",
            "how long is the drive to paris",
        ] {
            assert_eq!(count(other), None, "{other}");
        }
    }

    #[test]
    fn weekday_weekend_holidays_and_week_numbers() {
        let sunday = NaiveDate::from_ymd_opt(2026, 12, 6).unwrap();
        let monday = NaiveDate::from_ymd_opt(2026, 12, 7).unwrap();
        assert_eq!(
            say_weekday_or_weekend("is it a weekday", sunday),
            "No, today is Sunday."
        );
        assert_eq!(
            say_weekday_or_weekend("is it a weekday", monday),
            "Yes, today is Monday."
        );
        assert_eq!(
            say_weekday_or_weekend("is it the weekend", sunday),
            "Yes, today is Sunday."
        );
        assert_eq!(
            say_weekday_or_weekend("is it the weekend", monday),
            "No, today is Monday."
        );
        let tidy = crate::tree::fit::tidy;
        assert!(crate::tree::fit::asks_weekday(&tidy("Is it a weekday?")));
        assert!(!crate::tree::fit::asks_weekday(&tidy(
            "is it a weekday alarm"
        )));
        assert!(crate::tree::fit::asks_week_number(&tidy(
            "what week of the year is it"
        )));
        let holiday = |q: &str| {
            crate::tree::fit::asked_holiday(&tidy(q), sunday).map(|(d, n)| (d.to_string(), n))
        };
        assert_eq!(
            holiday("What day is Christmas this year?"),
            Some(("2026-12-25".into(), "Christmas"))
        );
        assert_eq!(
            holiday("when is halloween"),
            Some(("2027-10-31".into(), "Halloween"))
        );
        let halloween = NaiveDate::from_ymd_opt(2027, 10, 31).unwrap();
        assert_eq!(
            say_holiday(sunday, halloween, "Halloween"),
            "Halloween is on Sunday, October 31, 2027."
        );
        let christmas = NaiveDate::from_ymd_opt(2026, 12, 25).unwrap();
        assert_eq!(
            say_holiday(sunday, christmas, "Christmas"),
            "Christmas is on Friday, December 25."
        );
        assert_eq!(holiday("when is the dentist"), None);
        assert_eq!(holiday("what day is it"), None);
    }

    #[test]
    fn the_time_in_a_place_is_its_zone_s() {
        let utc = FixedOffset::east_opt(0).unwrap();
        let t = utc.with_ymd_and_hms(2026, 12, 6, 14, 31, 0).unwrap();
        let said = |place: &str| match zone_of(place) {
            Zone::One(tz) => say_time_in(&t, tz, place),
            other => format!("{other:?}"),
        };
        // By the zone's own name, in any case, and by the table.
        assert_eq!(said("tokyo"), "It's 11:31 PM in Tokyo.");
        assert_eq!(said("New York"), "It's 9:31 AM in New York.");
        assert_eq!(said("los angeles"), "It's 6:31 AM in Los Angeles.");
        assert_eq!(said("mumbai"), "It's 8:01 PM in Mumbai.");
        assert_eq!(said("the UK"), "It's 2:31 PM in the UK.");
        assert_eq!(said("Japan"), "It's 11:31 PM in Japan.");
        // Another day there.
        let late = utc.with_ymd_and_hms(2026, 12, 6, 22, 0, 0).unwrap();
        let Zone::One(sydney) = zone_of("Sydney") else {
            panic!("Sydney has a zone")
        };
        assert_eq!(
            say_time_in(&late, sydney, "Sydney"),
            "It's 9:00 AM on Monday in Sydney."
        );
        assert_eq!(zone_of("America"), Zone::Several);
        assert_eq!(zone_of("australia"), Zone::Several);
        assert_eq!(zone_of("the movie"), Zone::Unknown);
        assert_eq!(zone_of("Narnia"), Zone::Unknown);
        // Every name in the table is a zone chrono-tz knows.
        for (place, zone) in PLACES {
            assert!(zone.parse::<chrono_tz::Tz>().is_ok(), "{place}: {zone}");
        }
        // The question's place, and what is not one.
        let place = |q: &str| crate::tree::fit::asked_place(&crate::tree::fit::tidy(q));
        assert_eq!(place("What time is it in Tokyo?").as_deref(), Some("Tokyo"));
        assert_eq!(
            place("what's the time in new york right now").as_deref(),
            Some("new york")
        );
        assert_eq!(
            place("do you know what time it is in London").as_deref(),
            Some("London")
        );
        assert_eq!(place("what's the time in ten minutes"), None);
        assert_eq!(place("what time is it in half an hour"), None);
        assert_eq!(place("what time is it"), None);
        assert_eq!(place("what time is the match in paris"), None);
    }
}
