//! Times as people say them: durations ("an hour and a half", "1h 30"),
//! clock times ("half past nine", "quarter to seven", "6:30", "seven in
//! the evening"), days ("tomorrow", "next Monday", "on the 3rd", "every
//! weekday", "Monday afternoon") and delays ("in 25 minutes").
//!
//! Built on the one number parser ([`crate::nlu::numbers`]): every number
//! here is read by [`numbers::parse_at`] or [`numbers::parse_pair`] over
//! [`numbers::tokenize`]'s tokens, never by a second grammar. A leaf like
//! `numbers`: it imports only that module and chrono, so the intent tree,
//! the tools and the calendar may all use it.
//!
//! Each `parse_*` *finds* the first expression of its kind anywhere in a
//! sentence and returns it with its byte span ([`Spanned`]), so a caller
//! can cut it out ("set a rice timer for 18 minutes" → the label is what is
//! left). The `*_in` twins return `Result`: something that is clearly a time
//! but cannot be one ("minus five minutes", "25:00", "the 31st of
//! February") is a [`WhenError`] whose `Display` is one sentence a device
//! can say. The plain `parse_*` functions (the contract's shape) give
//! `None` for those.
//!
//! A clock time said without am/pm ("six thirty", "at 5") stays
//! [`TimeOfDay::Either`]; [`resolve`] turns it, with an optional day, into
//! the next matching moment after now (or the morning one for wake-ups,
//! [`Prefer::Morning`]). No input panics; the work is linear in the
//! text's length (texts are cut at [`MAX_CHARS`]).

use std::ops::Range;
use std::time::Duration;

use chrono::{Datelike, Days, Months, NaiveDate, NaiveDateTime, NaiveTime, Weekday};

use crate::nlu::numbers::{self, NumberKind, Token, TokenKind};

/// Longest text looked at (characters); longer is not a spoken time.
pub const MAX_CHARS: usize = 2000;

/// The longest duration read (ten years): beyond it a duration is
/// [`WhenError::TooLong`] rather than an overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 366 * 86_400);

/// A value found in a text, with the byte range it was said in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned<T> {
    pub value: T,
    /// Byte range in the text given to the parser.
    pub span: Range<usize>,
}

/// Why a time that was clearly said cannot be used. The message is one
/// sentence for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    /// "minus five minutes".
    #[error("A time can't be negative.")]
    Negative,
    /// "25:00", "13 pm": not a time on the clock.
    #[error("There's no such time as {said}.")]
    BadClock { said: String },
    /// "the 31st of February", "the 45th".
    #[error("{}", no_such_date(*.day, *.month))]
    NoSuchDate { day: u32, month: Option<u32> },
    /// Longer than [`MAX_DURATION`] ("a million hours").
    #[error("That's longer than I can keep time for.")]
    TooLong,
    /// Digits beyond what a number holds.
    #[error("That number is too large.")]
    TooLarge,
    /// A moment that is already over ("today at 6" said at 8 pm, or a date
    /// in a past year).
    #[error("That time has already passed.")]
    Past,
}

fn no_such_date(day: u32, month: Option<u32>) -> String {
    match month.and_then(month_name) {
        Some(m) => format!("{m} has no {}.", ordinal(day)),
        None => format!("No month has a {}.", ordinal(day)),
    }
}

/// "1st", "22nd", "31st".
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn month_name(m: u32) -> Option<&'static str> {
    MONTHS.get((m as usize).checked_sub(1)?).copied()
}

/// A clock time as said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeOfDay {
    /// Unambiguous: "7am", "18:30", "noon", "seven in the evening", "0630".
    At(NaiveTime),
    /// Said without am/pm: "six thirty", "half past nine", "at 5".
    /// `hour` is 1–12.
    Either { hour: u32, minute: u32 },
}

impl TimeOfDay {
    /// The morning reading (for `Either`; `At` as it is).
    pub fn am(self) -> NaiveTime {
        match self {
            TimeOfDay::At(t) => t,
            TimeOfDay::Either { hour, minute } => hm(hour % 12, minute),
        }
    }

    /// The afternoon/evening reading (for `Either`; `At` as it is).
    pub fn pm(self) -> NaiveTime {
        match self {
            TimeOfDay::At(t) => t,
            TimeOfDay::Either { hour, minute } => hm(hour % 12 + 12, minute),
        }
    }
}

fn hm(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).unwrap_or(NaiveTime::MIN)
}

/// A part of the day ("Monday afternoon", "tonight").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartOfDay {
    Morning,
    Afternoon,
    Evening,
    Night,
}

impl PartOfDay {
    /// The time used when only the part is said ("tomorrow morning").
    pub fn default_time(self) -> NaiveTime {
        match self {
            PartOfDay::Morning => hm(9, 0),
            PartOfDay::Afternoon => hm(15, 0),
            PartOfDay::Evening => hm(18, 0),
            PartOfDay::Night => hm(21, 0),
        }
    }

    /// The hours the part covers, `[start, end)` (night runs to midnight).
    pub fn hours(self) -> (NaiveTime, NaiveTime) {
        match self {
            PartOfDay::Morning => (hm(5, 0), hm(12, 0)),
            PartOfDay::Afternoon => (hm(12, 0), hm(17, 0)),
            PartOfDay::Evening => (hm(17, 0), hm(21, 0)),
            PartOfDay::Night => (
                hm(21, 0),
                NaiveTime::from_hms_opt(23, 59, 59).unwrap_or(NaiveTime::MIN),
            ),
        }
    }
}

/// A repeating schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repeat {
    /// "every day", "daily", "every morning".
    Daily,
    /// "every weekday", "weekdays", "Monday to Friday".
    Weekdays,
    /// "weekends", "every weekend".
    Weekends,
    /// "every Monday", "on Mondays and Thursdays" (in week order, no
    /// duplicates).
    Days(Vec<Weekday>),
}

impl Repeat {
    /// The timers contract's string: "daily", "weekdays", "weekends",
    /// "mon,wed".
    pub fn as_contract(&self) -> String {
        match self {
            Repeat::Daily => "daily".into(),
            Repeat::Weekdays => "weekdays".into(),
            Repeat::Weekends => "weekends".into(),
            Repeat::Days(days) => days
                .iter()
                .map(|d| d.to_string().to_lowercase())
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The days it covers.
    pub fn days(&self) -> Vec<Weekday> {
        use Weekday::*;
        match self {
            Repeat::Daily => vec![Mon, Tue, Wed, Thu, Fri, Sat, Sun],
            Repeat::Weekdays => vec![Mon, Tue, Wed, Thu, Fri],
            Repeat::Weekends => vec![Sat, Sun],
            Repeat::Days(d) => d.clone(),
        }
    }

    /// Spoken: "every day", "every weekday", "every Monday and Thursday".
    pub fn spoken(&self) -> String {
        match self {
            Repeat::Daily => "every day".into(),
            Repeat::Weekdays => "every weekday".into(),
            Repeat::Weekends => "every weekend".into(),
            Repeat::Days(days) => {
                let names: Vec<String> = days.iter().map(|d| weekday_name(*d).into()).collect();
                format!("every {}", join_and(&names))
            }
        }
    }
}

fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// "Monday".
pub fn weekday_name(d: Weekday) -> &'static str {
    match d {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// Which day(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DayRef {
    /// One date: "today", "tomorrow", "Thursday", "on the 3rd".
    Date(NaiveDate),
    /// Repeating: "every weekday", "on Mondays".
    Repeat(Repeat),
}

/// A day as said, with its part of the day when one was said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Day {
    pub day: DayRef,
    pub part: Option<PartOfDay>,
    /// Said as a bare weekday name ("Thursday", "on Friday"), not "this
    /// Thursday" or "today": on that very weekday, a time already gone
    /// means the same day next week, as a person saying it would mean.
    pub weekday_name: bool,
}

// ------------------------------------------------------------------ tokens

/// The tokens of a text, punctuation left out (spans still point into the
/// text, so "a.m." is found from the gap between "a" and "m").
struct Cx<'a> {
    text: &'a str,
    t: Vec<Token>,
}

impl<'a> Cx<'a> {
    fn new(text: &'a str) -> Cx<'a> {
        let text = match text.char_indices().nth(MAX_CHARS) {
            Some((b, _)) => &text[..b],
            None => text,
        };
        let t = numbers::tokenize(text)
            .into_iter()
            .filter(|t| t.kind != TokenKind::Punct)
            .collect();
        Cx { text, t }
    }

    fn w(&self, i: usize) -> Option<&str> {
        self.t
            .get(i)
            .filter(|t| t.kind == TokenKind::Word)
            .map(|t| t.text.as_str())
    }

    fn is(&self, i: usize, w: &str) -> bool {
        self.w(i) == Some(w)
    }

    fn any(&self, i: usize, ws: &[&str]) -> bool {
        self.w(i).is_some_and(|w| ws.contains(&w))
    }

    fn kind(&self, i: usize) -> Option<TokenKind> {
        self.t.get(i).map(|t| t.kind)
    }

    fn sym(&self, i: usize, s: &str) -> bool {
        self.t
            .get(i)
            .is_some_and(|t| t.kind == TokenKind::Symbol && t.text == s)
    }

    fn digits(&self, i: usize) -> Option<&str> {
        self.t
            .get(i)
            .filter(|t| t.kind == TokenKind::Integer)
            .map(|t| t.text.as_str())
    }

    /// Tokens `i` and `i + 1` are "a" "." "m" (written "a.m.").
    fn dotted(&self, i: usize, first: &str, second: &str) -> bool {
        let (Some(a), Some(b)) = (self.t.get(i), self.t.get(i + 1)) else {
            return false;
        };
        a.is_word(first)
            && b.is_word(second)
            && self
                .text
                .get(a.span.end..b.span.start)
                .is_some_and(|g| g.trim() == ".")
    }

    fn bytes(&self, r: Range<usize>) -> Range<usize> {
        numbers::byte_span(&self.t, &r)
    }

    fn number(&self, i: usize) -> Result<Option<numbers::Spoken>, WhenError> {
        match numbers::parse_at(&self.t, i) {
            Ok(s) => Ok(s),
            Err(numbers::NumberError::TooLarge { .. }) => Err(WhenError::TooLarge),
        }
    }

    /// A whole, unsigned number at `i`: (value, end).
    fn whole(&self, i: usize) -> Option<(u64, usize)> {
        let s = self.number(i).ok()??;
        if s.negative || !matches!(s.kind, NumberKind::Cardinal | NumberKind::Digits) {
            return None;
        }
        Some((s.value.as_u64()?, s.span.end))
    }

    /// Finds the first position where `f` gives a value or an error.
    fn find<T>(
        &self,
        f: impl Fn(&Self, usize) -> Result<Option<(T, usize)>, WhenError>,
    ) -> Result<Option<Spanned<T>>, WhenError> {
        for i in 0..self.t.len() {
            if let Some((value, end)) = f(self, i)? {
                return Ok(Some(Spanned {
                    value,
                    span: self.bytes(i..end),
                }));
            }
        }
        Ok(None)
    }
}

// ------------------------------------------------------------------ durations

const SECOND: u64 = 1;
const MINUTE: u64 = 60;
const HOUR: u64 = 3600;
const DAY: u64 = 86_400;
const WEEK: u64 = 7 * DAY;

/// The unit word's length in seconds. Short forms ("m", "h", "s", "hr")
/// count only right after digits ("18 m", "1h"), so "a m" stays "a.m.".
fn unit(w: Option<&str>, after_digits: bool) -> Option<u64> {
    Some(match w? {
        "second" | "seconds" | "sec" | "secs" => SECOND,
        "minute" | "minutes" | "min" | "mins" => MINUTE,
        "hour" | "hours" => HOUR,
        "day" | "days" => DAY,
        "week" | "weeks" => WEEK,
        "s" if after_digits => SECOND,
        "m" if after_digits => MINUTE,
        "h" | "hr" | "hrs" if after_digits => HOUR,
        _ => return None,
    })
}

impl Cx<'_> {
    fn unit_at(&self, i: usize, after: usize) -> Option<u64> {
        let after_digits = after
            .checked_sub(1)
            .and_then(|p| self.kind(p))
            .is_some_and(|k| matches!(k, TokenKind::Integer | TokenKind::Decimal));
        unit(self.w(i), after_digits)
    }

    /// One "number unit" part at `i`: (seconds, unit, end).
    fn component(&self, i: usize) -> Result<Option<(f64, u64, usize)>, WhenError> {
        let (mut amount, u, mut end) = if self.any(i, &["a", "an", "another"])
            && unit(self.w(i + 1), false).is_some()
        {
            // "a second timer" is another timer, not one second.
            if self.is(i + 1, "second") && self.any(i + 2, &["timer", "alarm", "reminder", "one"]) {
                return Ok(None);
            }
            let u = unit(self.w(i + 1), false).unwrap_or(SECOND);
            (1.0, u, i + 2)
        } else {
            let spoken = match self.number(i) {
                // "ninety second timer": the number grammar reads "ninety
                // second" as the ordinal 92nd; before a unit-less word it
                // is ninety seconds.
                Ok(Some(s))
                    if s.kind == NumberKind::Ordinal
                        && s.span.len() > 1
                        && self.is(s.span.end - 1, "second") =>
                {
                    match numbers::parse_at(&self.t[..s.span.end - 1], i) {
                        Ok(Some(c)) if c.span.end == s.span.end - 1 => c,
                        _ => return Ok(None),
                    }
                }
                Ok(Some(s)) => s,
                Ok(None) => return Ok(None),
                Err(e) => {
                    // Too large, and a unit follows: a duration nobody can keep.
                    let mut j = i + 1;
                    while j < self.t.len() && j < i + 40 && self.unit_at(j, j).is_none() {
                        if self.kind(j) == Some(TokenKind::Word)
                            && self.w(j).is_some_and(|w| w != "and")
                        {
                            return Ok(None);
                        }
                        j += 1;
                    }
                    return if unit(self.w(j), true).is_some() {
                        Err(e)
                    } else {
                        Ok(None)
                    };
                }
            };
            let mut j = spoken.span.end;
            // "five more minutes", "ten extra seconds".
            if self.any(j, &["more", "extra", "additional", "further"])
                && unit(self.w(j + 1), false).is_some()
            {
                j += 1;
            }
            // "a 10-minute timer": the hyphen joins digits and the unit.
            if self.sym(j, "-") && unit(self.w(j + 1), false).is_some() && !spoken.negative {
                j += 1;
            }
            // "half an hour", "a quarter of an hour", "three quarters of an hour".
            if spoken.kind == NumberKind::Fraction && self.unit_at(j, j).is_none() {
                if self.is(j, "of") {
                    j += 1;
                }
                if self.any(j, &["a", "an"]) && unit(self.w(j + 1), false).is_some() {
                    j += 1;
                } else {
                    return Ok(None);
                }
            }
            let Some(u) = self.unit_at(j, j) else {
                return Ok(None);
            };
            // "the second", "a sixth", ordinals: not an amount.
            if spoken.kind == NumberKind::Ordinal {
                return Ok(None);
            }
            if spoken.negative {
                // "ten minus five minutes": after a number, a minus is
                // subtraction; the duration is what follows it.
                if i > 0 && matches!(self.number(i - 1), Ok(Some(_))) {
                    return Ok(None);
                }
                return Err(WhenError::Negative);
            }
            (spoken.value.as_f64(), u, j + 1)
        };
        // "an hour and a half", "a minute and a quarter".
        if self.is(end, "and") {
            if let Ok(Some(f)) = self.number(end + 1) {
                let v = f.value.as_f64();
                if f.kind == NumberKind::Fraction
                    && !f.negative
                    && v < 1.0
                    && self.unit_at(f.span.end, f.span.end).is_none()
                    && !self.any(f.span.end, &["of", "a", "an"])
                {
                    amount += v;
                    end = f.span.end;
                }
            }
        }
        Ok(Some((amount * u as f64, u, end)))
    }

    /// A whole duration at `i`: parts joined by "and" or side by side, each
    /// in a smaller unit ("an hour and 20 minutes", "1h 30").
    fn duration_at(&self, i: usize) -> Result<Option<(Duration, usize)>, WhenError> {
        let Some((first, mut last, mut end)) = self.component(i)? else {
            return Ok(None);
        };
        let mut total = first;
        loop {
            let joined = self.is(end, "and");
            let j = if joined { end + 1 } else { end };
            match self.component(j) {
                Ok(Some((s, u, e))) if u < last => {
                    total += s;
                    last = u;
                    end = e;
                    continue;
                }
                Err(e) if !joined => return Err(e),
                _ => {}
            }
            // "1h 30", "two hours thirty", "five minutes thirty".
            if last == HOUR || last == MINUTE {
                if let Some((v, e)) = self.whole(j) {
                    let ends = e >= self.t.len()
                        || self.any(
                            e,
                            &["to", "for", "and", "please", "timer", "on", "then", "from"],
                        );
                    if v < 60 && ends && !self.sym(e, ":") {
                        total += (v * last / 60) as f64;
                        end = e;
                    }
                }
            }
            break;
        }
        if !total.is_finite() || total > MAX_DURATION.as_secs_f64() {
            return Err(WhenError::TooLong);
        }
        Ok(Some((
            Duration::from_millis((total * 1000.0).round() as u64),
            end,
        )))
    }

    /// "in 25 minutes", "25 minutes from now".
    fn delay_at(&self, i: usize) -> Result<Option<(Duration, usize)>, WhenError> {
        if self.any(i, &["in", "within"]) {
            if let Some((d, e)) = self.duration_at(i + 1)? {
                let e = if self.is(e, "time") { e + 1 } else { e };
                return Ok(Some((d, e)));
            }
            return Ok(None);
        }
        if let Some((d, e)) = self.duration_at(i)? {
            if self.is(e, "from") && self.is(e + 1, "now") {
                return Ok(Some((d, e + 2)));
            }
        }
        Ok(None)
    }
}

/// The first duration in `text`: "ninety seconds", "an hour and a half",
/// "1h 30", "a minute and 20 seconds", "two and a half minutes", "18 min",
/// "half an hour". `None` also for a bad one (see [`duration_in`]).
pub fn parse_duration(text: &str) -> Option<Spanned<Duration>> {
    duration_in(text).ok().flatten()
}

/// [`parse_duration`] with its error: "minus five minutes" is
/// [`WhenError::Negative`], "a trillion trillion years" too long.
pub fn duration_in(text: &str) -> Result<Option<Spanned<Duration>>, WhenError> {
    Cx::new(text).find(Cx::duration_at)
}

/// The first delay in `text`: "in 25 minutes", "in half an hour", "ten
/// minutes from now". The span includes "in".
pub fn parse_delay(text: &str) -> Option<Spanned<Duration>> {
    delay_in(text).ok().flatten()
}

/// [`parse_delay`] with its error.
pub fn delay_in(text: &str) -> Result<Option<Spanned<Duration>>, WhenError> {
    Cx::new(text).find(Cx::delay_at)
}

// ------------------------------------------------------------------ clock times

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mer {
    Am,
    Pm,
    Night,
}

/// Words before a bare hour that make it a clock time ("at 5").
const CLOCK_PREP: &[&str] = &[
    "at", "for", "by", "until", "till", "til", "around", "about", "before", "after", "from", "to",
    "past", "or", "and",
];

impl Cx<'_> {
    /// am/pm and their spoken forms after a time: (which, end).
    fn meridiem(&self, j: usize) -> Option<(Mer, usize)> {
        match self.w(j)? {
            "am" => return Some((Mer::Am, j + 1)),
            "pm" => return Some((Mer::Pm, j + 1)),
            "tonight" => return Some((Mer::Night, j + 1)),
            _ => {}
        }
        if self.dotted(j, "a", "m") {
            return Some((Mer::Am, j + 2));
        }
        if self.dotted(j, "p", "m") {
            return Some((Mer::Pm, j + 2));
        }
        if self.is(j, "in") && self.is(j + 1, "the") {
            return match self.w(j + 2)? {
                "morning" => Some((Mer::Am, j + 3)),
                "afternoon" | "evening" => Some((Mer::Pm, j + 3)),
                _ => None,
            };
        }
        if self.is(j, "at") && self.is(j + 1, "night") {
            return Some((Mer::Night, j + 2));
        }
        if self.is(j, "this") {
            return match self.w(j + 1)? {
                "morning" => Some((Mer::Am, j + 2)),
                "afternoon" | "evening" => Some((Mer::Pm, j + 2)),
                _ => None,
            };
        }
        None
    }

    /// An hour said alone: (hour, said in 24-hour form, end). Words
    /// "one"–"twelve" (and "thirteen"–"twenty three"), digits 0–24.
    fn hour_at(&self, i: usize) -> Option<(u32, bool, usize)> {
        if let Some(d) = self.digits(i) {
            let v: u32 = d.parse().ok()?;
            if d.len() > 2 || v > 24 {
                return None;
            }
            let exact = v == 0 || v > 12 || (d.len() == 2 && d.starts_with('0'));
            return Some((v, exact, i + 1));
        }
        self.w(i)?;
        let (v, e) = self.whole(i)?;
        match v {
            1..=12 => Some((v as u32, false, e)),
            13..=23 => Some((v as u32, true, e)),
            _ => None,
        }
    }

    /// The rest after a time: optional "o'clock", then am/pm words.
    fn finish(
        &self,
        hour: u32,
        minute: u32,
        exact: bool,
        end: usize,
    ) -> Result<(TimeOfDay, usize), WhenError> {
        let mut e = end;
        if self.any(e, &["o'clock", "oclock"]) {
            e += 1;
        }
        let said = || format!("{hour}:{minute:02}");
        match self.meridiem(e) {
            Some((mer, e2)) => {
                if hour > 12 && mer == Mer::Am {
                    return Err(WhenError::BadClock {
                        said: format!("{} am", said()),
                    });
                }
                if hour > 12 {
                    // "18:00 pm": already the evening.
                    return Ok((TimeOfDay::At(hm(hour, minute)), e2));
                }
                if hour == 0 {
                    return match mer {
                        Mer::Am => Ok((TimeOfDay::At(hm(0, minute)), e2)),
                        _ => Err(WhenError::BadClock {
                            said: format!("{} pm", said()),
                        }),
                    };
                }
                let h = match mer {
                    Mer::Am => hour % 12,
                    Mer::Pm => hour % 12 + 12,
                    // "ten at night" is 22:00; "two at night" 2:00; "twelve" midnight.
                    Mer::Night if hour == 12 || hour < 5 => hour % 12,
                    Mer::Night => hour + 12,
                };
                Ok((TimeOfDay::At(hm(h, minute)), e2))
            }
            None if exact || hour > 12 || hour == 0 => {
                Ok((TimeOfDay::At(hm(hour % 24, minute)), e))
            }
            None => Ok((TimeOfDay::Either { hour, minute }, e)),
        }
    }

    fn clock_at(&self, i: usize) -> Result<Option<(TimeOfDay, usize)>, WhenError> {
        let prep_before = i.checked_sub(1).is_some_and(|p| self.any(p, CLOCK_PREP));
        // noon / midnight
        let (lead, j) = if self.is(i, "twelve") || self.digits(i) == Some("12") {
            (true, i + 1)
        } else {
            (false, i)
        };
        match self.w(j) {
            Some("noon" | "midday" | "mid-day") => {
                return Ok(Some((TimeOfDay::At(hm(12, 0)), j + 1)))
            }
            Some("midnight") => return Ok(Some((TimeOfDay::At(hm(0, 0)), j + 1))),
            _ if lead && self.is(j, "o'clock") && self.any(j + 1, &["midnight", "noon"]) => {}
            _ => {}
        }
        // "half past nine", "quarter to seven", "ten past six", "twenty five to eight".
        let a = usize::from(self.is(i, "a"));
        let rel = match self.w(i + a) {
            Some("half") => Some((30u32, i + a + 1)),
            Some("quarter") => Some((15, i + a + 1)),
            _ if a == 0 => self
                .whole(i)
                .filter(|(v, _)| (1..60).contains(v))
                .map(|(v, e)| {
                    let e = if self.any(e, &["minute", "minutes", "mins", "min"]) {
                        e + 1
                    } else {
                        e
                    };
                    (v as u32, e)
                }),
            _ => None,
        };
        if let Some((mins, e)) = rel {
            if let Some(dir) = self
                .w(e)
                // "pass": whisper writes "half past six" as "half-pass six".
                .filter(|w| {
                    matches!(
                        *w,
                        "past" | "pass" | "after" | "to" | "before" | "til" | "till"
                    )
                })
            {
                let hour = match self.w(e + 1) {
                    Some("noon" | "midday") => Some((12, true, e + 2)),
                    Some("midnight") => Some((0, true, e + 2)),
                    _ => self.hour_at(e + 1),
                };
                if let Some((h, exact, e2)) = hour {
                    let past = matches!(dir, "past" | "pass" | "after");
                    if !past && mins == 30 {
                        return Ok(None);
                    }
                    let (h, m) = if past {
                        (h, mins)
                    } else {
                        let h = if h == 0 {
                            23
                        } else if h == 1 && !exact {
                            12
                        } else {
                            h - 1
                        };
                        (h, 60 - mins)
                    };
                    let exact = exact && (h == 0 || h >= 12);
                    return self.finish(h, m, exact, e2).map(Some);
                }
            }
        }
        // British "half six" after "at".
        if prep_before && self.is(i, "half") {
            if let Some((h, exact, e)) = self.hour_at(i + 1) {
                if (1..=12).contains(&h)
                    && self.unit_at(e, e).is_none()
                    && self.kind(i + 1) == Some(TokenKind::Word)
                {
                    return self.finish(h, 30, exact, e).map(Some);
                }
            }
        }
        // "6:30", "18:45", "25:00" (an error).
        if let Some(d) = self.digits(i) {
            if self.sym(i + 1, ":") {
                if let Some(m) = self.digits(i + 2) {
                    let (Ok(h), Ok(mm)) = (d.parse::<u32>(), m.parse::<u32>()) else {
                        return Ok(None);
                    };
                    if d.len() > 2 || m.len() != 2 {
                        return Ok(None);
                    }
                    if h > 24 || mm > 59 || (h == 24 && mm > 0) {
                        return Err(WhenError::BadClock {
                            said: format!("{d}:{m}"),
                        });
                    }
                    let exact = h == 0 || h > 12 || d.starts_with('0');
                    return self.finish(h % 24, mm, exact || h == 24, i + 3).map(Some);
                }
            }
            // "at 6 45": speech-to-text's hour and minutes side by side.
            if prep_before && d.len() <= 2 {
                if let Some(m) = self.digits(i + 1).filter(|m| m.len() == 2) {
                    let (h, mm): (u32, u32) = (d.parse().unwrap_or(99), m.parse().unwrap_or(99));
                    if h <= 23 && mm <= 59 && self.unit_at(i + 2, i + 2).is_none() {
                        return self.finish(h, mm, h == 0 || h > 12, i + 2).map(Some);
                    }
                }
            }
            // "0630", "1800 hours", "at 630".
            if (3..=4).contains(&d.len())
                && (d.starts_with('0') || prep_before || self.any(i + 1, &["hours", "hrs"]))
            {
                let v: u32 = d.parse().unwrap_or(9999);
                let (h, m) = (v / 100, v % 100);
                if h <= 23 && m <= 59 {
                    let e = if self.any(i + 1, &["hours", "hrs"]) {
                        i + 2
                    } else {
                        i + 1
                    };
                    let exact = d.len() == 4 || h == 0 || h > 12;
                    return self.finish(h, m, exact, e).map(Some);
                }
                return Ok(None);
            }
        }
        // "6.30" written by speech-to-text, after "at".
        if prep_before {
            if let Some(tok) = self.t.get(i).filter(|t| t.kind == TokenKind::Decimal) {
                if let Some((h, m)) = tok.text.split_once('.') {
                    if h.len() <= 2 && m.len() == 2 {
                        let (h, m): (u32, u32) = (h.parse().unwrap_or(99), m.parse().unwrap_or(99));
                        if h <= 23 && m <= 59 {
                            return self.finish(h, m, h > 12 || h == 0, i + 1).map(Some);
                        }
                    }
                }
            }
        }
        // "six thirty", "six oh five", "eighteen hundred hours".
        if let Some(pair) = numbers::parse_pair(&self.t, i) {
            let hundred = self.is(pair.span.end - 1, "hundred");
            let ok = pair.high <= 23
                && pair.low <= 59
                && (!hundred || pair.high > 12 || self.any(pair.span.end, &["hours", "hrs"]));
            let e = if self.any(pair.span.end, &["hours", "hrs"]) {
                pair.span.end + 1
            } else {
                pair.span.end
            };
            if ok && (e > pair.span.end || self.unit_at(e, e).is_none()) {
                let exact = pair.high > 12 || hundred;
                return self.finish(pair.high, pair.low, exact, e).map(Some);
            }
        }
        // "seven o'clock", "7am", "seven in the evening", "at 5".
        if let Some((h, exact, e)) = self.hour_at(i) {
            let oclock = self.any(e, &["o'clock", "oclock"]);
            let mer = self.meridiem(if oclock { e + 1 } else { e }).is_some();
            let next_ok = self.unit_at(e, e).is_none()
                && !self.any(
                    e,
                    &[
                        "percent", "per", "times", "of", "people", "things", "more", "th",
                    ],
                )
                && !self.sym(e, "%")
                && !self.sym(e, ":");
            if oclock || mer || (prep_before && next_ok && h <= 23) {
                if h > 12
                    && self.kind(i) == Some(TokenKind::Word)
                    && !oclock
                    && !mer
                    && !prep_before
                {
                    return Ok(None);
                }
                return self.finish(h, 0, exact, e).map(Some);
            }
        }
        Ok(None)
    }
}

/// The first clock time in `text`: "half past nine", "quarter to seven",
/// "noon", "midnight", "six thirty", "6:30", "7am", "seven in the
/// evening", "0630", "at 5". `None` also for a bad one (see [`time_in`]).
pub fn parse_time_of_day(text: &str) -> Option<Spanned<TimeOfDay>> {
    time_in(text).ok().flatten()
}

/// [`parse_time_of_day`] with its error: "25:00", "13 pm".
pub fn time_in(text: &str) -> Result<Option<Spanned<TimeOfDay>>, WhenError> {
    Cx::new(text).find(Cx::clock_at)
}

// ------------------------------------------------------------------ days

fn weekday(w: &str) -> Option<(Weekday, bool)> {
    use Weekday::*;
    Some(match w {
        "monday" => (Mon, false),
        "tuesday" => (Tue, false),
        "wednesday" => (Wed, false),
        "thursday" => (Thu, false),
        "friday" => (Fri, false),
        "saturday" => (Sat, false),
        "sunday" => (Sun, false),
        "mondays" => (Mon, true),
        "tuesdays" => (Tue, true),
        "wednesdays" => (Wed, true),
        "thursdays" => (Thu, true),
        "fridays" => (Fri, true),
        "saturdays" => (Sat, true),
        "sundays" => (Sun, true),
        _ => return None,
    })
}

fn month(w: &str) -> Option<u32> {
    Some(match w {
        "january" | "jan" => 1,
        "february" | "feb" => 2,
        "march" => 3,
        "april" => 4,
        "may" => 5,
        "june" => 6,
        "july" => 7,
        "august" | "aug" => 8,
        "september" | "sept" => 9,
        "october" | "oct" => 10,
        "november" | "nov" => 11,
        "december" | "dec" => 12,
        _ => return None,
    })
}

fn part(w: Option<&str>) -> Option<PartOfDay> {
    Some(match w? {
        "morning" => PartOfDay::Morning,
        "afternoon" => PartOfDay::Afternoon,
        "evening" => PartOfDay::Evening,
        "night" => PartOfDay::Night,
        _ => return None,
    })
}

/// The first date on or after `from` that falls on `day`.
fn on_or_after(from: NaiveDate, day: Weekday) -> NaiveDate {
    let ahead = (7 + day.num_days_from_monday() - from.weekday().num_days_from_monday()) % 7;
    from.checked_add_days(Days::new(ahead.into()))
        .unwrap_or(from)
}

fn days_in(year: i32, month: u32) -> u32 {
    let first = NaiveDate::from_ymd_opt(year, month, 1);
    let next = first.and_then(|d| d.checked_add_months(Months::new(1)));
    match (first, next) {
        (Some(a), Some(b)) => (b - a).num_days() as u32,
        _ => 31,
    }
}

fn max_days(month: u32) -> u32 {
    match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl Cx<'_> {
    /// A day of the month at `i`: "3rd", "third", "twenty third", or digits
    /// when `digits_ok` ("3 December"). (day, end).
    fn day_number(&self, i: usize, digits_ok: bool) -> Option<(u32, usize)> {
        let tok = self.t.get(i)?;
        if tok.kind == TokenKind::Ordinal {
            return Some((tok.text.parse().ok()?, i + 1));
        }
        let s = self.number(i).ok()??;
        if s.negative {
            return None;
        }
        let v = s.value.as_u64()?;
        let ok = s.kind == NumberKind::Ordinal || (digits_ok && s.kind == NumberKind::Digits);
        (ok && (1..100).contains(&v)).then_some((v as u32, s.span.end))
    }

    /// An optional year after a date: ("2027", end).
    fn year(&self, i: usize) -> Option<(i32, usize)> {
        let d = self.digits(i)?;
        let y: i32 = d.parse().ok()?;
        (d.len() == 4 && (1900..=2200).contains(&y)).then_some((y, i + 1))
    }

    /// A day and month said together: "the 3rd of December", "December
    /// 3rd", "3 December". (day, month, year, end).
    fn day_month(&self, i: usize) -> Option<(u32, u32, Option<i32>, usize)> {
        let s = if self.is(i, "the") { i + 1 } else { i };
        // "the 3rd of December", "3rd December", "3 December"
        if let Some((d, e)) = self.day_number(s, true) {
            let e2 = if self.is(e, "of") { e + 1 } else { e };
            if let Some(m) = self.w(e2).and_then(month) {
                let (y, end) = self
                    .year(e2 + 1)
                    .map_or((None, e2 + 1), |(y, e)| (Some(y), e));
                return Some((d, m, y, end));
            }
        }
        // "December 3rd", "December the 3rd", "December 3"
        if let Some(m) = self.w(i).and_then(month) {
            let s = if self.is(i + 1, "the") { i + 2 } else { i + 1 };
            if let Some((d, e)) = self.day_number(s, true) {
                // "may 5 people": digits right after "may" need more proof.
                if m == 5
                    && self.kind(s) == Some(TokenKind::Integer)
                    && !(i > 0 && self.is(i - 1, "on"))
                {
                    return None;
                }
                let (y, end) = self.year(e).map_or((None, e), |(y, e)| (Some(y), e));
                return Some((d, m, y, end));
            }
        }
        None
    }

    fn day_at(&self, i: usize, today: NaiveDate) -> Result<Option<(Day, usize)>, WhenError> {
        let date = |d: NaiveDate| DayRef::Date(d);
        let with_part = |day: DayRef, e: usize| -> (Day, usize) {
            match part(self.w(e)) {
                Some(p) => (
                    Day {
                        day,
                        part: Some(p),
                        weekday_name: false,
                    },
                    e + 1,
                ),
                None => (
                    Day {
                        day,
                        part: None,
                        weekday_name: false,
                    },
                    e,
                ),
            }
        };
        let w = self.w(i);
        match w {
            Some("today") => return Ok(Some(with_part(date(today), i + 1))),
            Some("tonight") => {
                return Ok(Some((
                    Day {
                        day: date(today),
                        part: Some(PartOfDay::Night),
                        weekday_name: false,
                    },
                    i + 1,
                )))
            }
            Some("tomorrow") | Some("tmrw") => {
                let d = today.succ_opt().unwrap_or(today);
                return Ok(Some(with_part(date(d), i + 1)));
            }
            _ => {}
        }
        // "the day after tomorrow"
        let s = if self.is(i, "the") { i + 1 } else { i };
        if self.is(s, "day") && self.is(s + 1, "after") && self.is(s + 2, "tomorrow") {
            let d = today.checked_add_days(Days::new(2)).unwrap_or(today);
            return Ok(Some(with_part(date(d), s + 3)));
        }
        // "this morning", "this evening", "this weekend"
        if self.is(i, "this") {
            if let Some(p) = part(self.w(i + 1)) {
                return Ok(Some((
                    Day {
                        day: date(today),
                        part: Some(p),
                        weekday_name: false,
                    },
                    i + 2,
                )));
            }
        }
        // repeats: "every weekday", "weekdays", "every day", "daily", "every Monday"
        let every = self.any(i, &["every", "each"]);
        let s = if every || self.is(i, "on") || (self.is(i, "at") && self.is(i + 1, "weekends")) {
            i + 1
        } else {
            i
        };
        match self.w(s) {
            Some("weekday") if every => {
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Weekdays), s + 1)))
            }
            Some("weekdays") => {
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Weekdays), s + 1)))
            }
            Some("weekend") if every => {
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Weekends), s + 1)))
            }
            Some("weekends") => {
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Weekends), s + 1)))
            }
            Some("day") if every => {
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Daily), s + 1)))
            }
            Some("daily") if s == i => {
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Daily), s + 1)))
            }
            Some(p) if every && part(Some(p)).is_some() => {
                return Ok(Some((
                    Day {
                        day: DayRef::Repeat(Repeat::Daily),
                        part: part(Some(p)),
                        weekday_name: false,
                    },
                    s + 1,
                )))
            }
            _ => {}
        }
        // "Monday to Friday"
        if self.is(s, "monday")
            && self.any(s + 1, &["to", "through", "till", "until"])
            && self.is(s + 2, "friday")
        {
            return Ok(Some(with_part(DayRef::Repeat(Repeat::Weekdays), s + 3)));
        }
        // weekdays by name: "Thursday", "next Monday", "on Mondays", "every Monday and Wednesday"
        let next =
            self.any(i, &["next", "coming"]) || (self.is(i, "this") && self.is(i + 1, "coming"));
        let s = if self.is(i, "this") && self.is(i + 1, "coming") {
            i + 2
        } else if next || self.is(i, "this") {
            i + 1
        } else {
            s
        };
        if let Some((wd, plural)) = self.w(s).and_then(weekday) {
            if every || plural {
                let mut days = vec![wd];
                let mut e = s + 1;
                while self.any(e, &["and", "or"]) || self.is(e, "&") {
                    match self.w(e + 1).and_then(weekday) {
                        Some((d, _)) => {
                            days.push(d);
                            e += 2;
                        }
                        None => break,
                    }
                }
                days.sort_by_key(|d| d.num_days_from_monday());
                days.dedup();
                return Ok(Some(with_part(DayRef::Repeat(Repeat::Days(days)), e)));
            }
            let from = if next {
                today.succ_opt().unwrap_or(today)
            } else {
                today
            };
            let (mut found, e) = with_part(date(on_or_after(from, wd)), s + 1);
            found.weekday_name = s == i || (s == i + 1 && self.is(i, "on"));
            return Ok(Some((found, e)));
        }
        // dates: "on the 3rd", "the 3rd of December", "December 3rd"
        let s = if self.is(i, "on") { i + 1 } else { i };
        if let Some((d, m, y, e)) = self.day_month(s) {
            if d > max_days(m) {
                return Err(WhenError::NoSuchDate {
                    day: d,
                    month: Some(m),
                });
            }
            let found = match y {
                Some(y) => {
                    let found = NaiveDate::from_ymd_opt(y, m, d);
                    if found.is_none() {
                        return Err(WhenError::NoSuchDate {
                            day: d,
                            month: Some(m),
                        });
                    }
                    found
                }
                // The next one: this year's, else a later year's (29 February).
                None => (0..9).find_map(|k| {
                    NaiveDate::from_ymd_opt(today.year() + k, m, d).filter(|x| *x >= today)
                }),
            };
            return match found {
                Some(found) => Ok(Some(with_part(date(found), e))),
                None => Err(WhenError::NoSuchDate {
                    day: d,
                    month: Some(m),
                }),
            };
        }
        if self.is(i, "on") && self.is(i + 1, "the") {
            if let Some((d, e)) = self.day_number(i + 2, false) {
                if d > 31 {
                    return Err(WhenError::NoSuchDate {
                        day: d,
                        month: None,
                    });
                }
                // This month's if still ahead, else the next month that has it.
                let first = today.with_day(1).unwrap_or(today);
                let found = (0..13).find_map(|k| {
                    let m = first.checked_add_months(Months::new(k))?;
                    (d <= days_in(m.year(), m.month()))
                        .then(|| m.with_day(d))
                        .flatten()
                        .filter(|x| *x >= today)
                });
                return Ok(found.map(|f| with_part(date(f), e)));
            }
        }
        Ok(None)
    }
}

/// The first day in `text`, relative to `today`: "today", "tonight",
/// "tomorrow (morning)", "Thursday", "next Monday" (the first Monday after
/// today), "on the 3rd" (the next 3rd), "the 3rd of December", "every
/// weekday", "weekdays", "every day", "on Mondays", "Monday afternoon".
/// `None` also for a bad one (see [`day_in`]).
pub fn parse_day(text: &str, today: NaiveDate) -> Option<Spanned<Day>> {
    day_in(text, today).ok().flatten()
}

/// [`parse_day`] with its error: "the 31st of February".
pub fn day_in(text: &str, today: NaiveDate) -> Result<Option<Spanned<Day>>, WhenError> {
    Cx::new(text).find(|cx, i| cx.day_at(i, today))
}

// ------------------------------------------------------------------ resolve

/// How to read a clock time said without am/pm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// The next one after now ("remind me at 5" at 9 am → 5 pm).
    Next,
    /// The morning one (wake-up alarms: "get me up at six").
    Morning,
}

/// A moment, or a repeating time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Once, at this local date and time.
    At(NaiveDateTime),
    /// At `time` on the days of `repeat`.
    Repeat { time: NaiveTime, repeat: Repeat },
}

/// The moment a clock time and/or a day mean, seen from `now` (local).
///
/// - A clock time with no day: the next one after now (with
///   [`Prefer::Morning`], the next morning one).
/// - A day with no clock time: its part's time ("tomorrow morning" 9:00,
///   afternoon 15:00, evening 18:00, night 21:00), else 9:00.
/// - A day and an am/pm-less time: the part decides; else the next one on
///   that day (today), the morning one for wake-ups, else 7–11 as morning
///   and 12–6 as afternoon ("Thursday at 3" is 15:00).
///
/// `Err(Past)` for a moment already over (a day said, time gone); `None`
/// when neither was given.
pub fn resolve(
    time: Option<TimeOfDay>,
    day: Option<&Day>,
    now: NaiveDateTime,
    prefer: Prefer,
) -> Option<Result<Resolved, WhenError>> {
    let part = day.and_then(|d| d.part);
    let by_part = |t: TimeOfDay| -> Option<NaiveTime> {
        match (t, part?) {
            (TimeOfDay::At(x), _) => Some(x),
            (TimeOfDay::Either { hour, .. }, PartOfDay::Night) if hour == 12 || hour < 5 => {
                Some(t.am())
            }
            (_, PartOfDay::Morning) => Some(t.am()),
            (_, _) => Some(t.pm()),
        }
    };
    let usual = |t: TimeOfDay| -> NaiveTime {
        match t {
            TimeOfDay::At(x) => x,
            _ if prefer == Prefer::Morning => t.am(),
            TimeOfDay::Either { hour, .. } if (7..=11).contains(&hour) => t.am(),
            _ => t.pm(),
        }
    };
    let first_after = |date: NaiveDate, t: TimeOfDay| -> Option<NaiveDateTime> {
        let mut c: Vec<NaiveDateTime> = match t {
            TimeOfDay::At(x) => vec![date.and_time(x)],
            _ if prefer == Prefer::Morning => vec![date.and_time(t.am())],
            _ => vec![date.and_time(t.am()), date.and_time(t.pm())],
        };
        c.sort();
        c.into_iter().find(|x| *x > now)
    };
    match (time, day) {
        (None, None) => None,
        (Some(t), None) => {
            let today = now.date();
            let found =
                first_after(today, t).or_else(|| today.succ_opt().and_then(|d| first_after(d, t)));
            Some(found.map(Resolved::At).ok_or(WhenError::Past))
        }
        (t, Some(d)) => Some(match &d.day {
            DayRef::Repeat(r) => {
                let time = match t {
                    Some(t) => by_part(t).unwrap_or_else(|| match t {
                        // A repeating alarm without am/pm: the morning one.
                        TimeOfDay::Either { hour, .. }
                            if prefer == Prefer::Next && (1..=6).contains(&hour) =>
                        {
                            t.pm()
                        }
                        _ => t.am(),
                    }),
                    None => part.map_or(hm(9, 0), PartOfDay::default_time),
                };
                Ok(Resolved::Repeat {
                    time,
                    repeat: r.clone(),
                })
            }
            DayRef::Date(date) => {
                let at = match t {
                    None => Some(date.and_time(part.map_or(hm(9, 0), PartOfDay::default_time))),
                    Some(t) => match by_part(t) {
                        Some(x) => Some(date.and_time(x)),
                        // "today at 10": the next 10 o'clock still ahead.
                        // "Friday at 10" said on a Friday: the usual
                        // reading, as on any other day (next week's once
                        // gone, below), never tonight's 10 PM.
                        None if *date == now.date() && !d.weekday_name => first_after(*date, t),
                        None => Some(date.and_time(usual(t))),
                    },
                };
                match at {
                    Some(at) if at > now => Ok(Resolved::At(at)),
                    // "Thursday at 11" said on Thursday at 11:30: next week's.
                    _ if d.weekday_name && *date == now.date() => date
                        .checked_add_days(Days::new(7))
                        .map(|next| {
                            let time = match t {
                                None => part.map_or(hm(9, 0), PartOfDay::default_time),
                                Some(t) => by_part(t).unwrap_or_else(|| usual(t)),
                            };
                            Resolved::At(next.and_time(time))
                        })
                        .ok_or(WhenError::Past),
                    _ => Err(WhenError::Past),
                }
            }
        }),
    }
}

/// A duration as spoken: "18 minutes", "1 hour and 30 minutes", "12
/// minutes and 5 seconds", "90 seconds" (digits, as answers say numbers).
pub fn say_duration(d: Duration) -> String {
    let total = d.as_secs() + u64::from(d.subsec_millis() >= 500);
    if total == 0 {
        return "less than a second".into();
    }
    let (days, h, m, s) = (
        total / DAY,
        total % DAY / HOUR,
        total % HOUR / MINUTE,
        total % MINUTE,
    );
    let unit = |n: u64, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    let mut parts = Vec::new();
    if days > 0 {
        parts.push(unit(days, "day"));
    }
    if h > 0 {
        parts.push(unit(h, "hour"));
    }
    if m > 0 {
        parts.push(unit(m, "minute"));
    }
    if s > 0 {
        parts.push(unit(s, "second"));
    }
    join_and(&parts)
}

/// A clock time as spoken: "6:30 AM", "12:00 PM".
pub fn say_time(t: NaiveTime) -> String {
    t.format("%-I:%M %p").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> Option<u64> {
        parse_duration(text).map(|s| s.value.as_secs())
    }

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    /// Wednesday 2 December 2026.
    fn today() -> NaiveDate {
        date(2026, 12, 2)
    }

    fn at(h: u32, m: u32) -> TimeOfDay {
        TimeOfDay::At(hm(h, m))
    }

    fn either(hour: u32, minute: u32) -> TimeOfDay {
        TimeOfDay::Either { hour, minute }
    }

    fn clock(text: &str) -> Option<TimeOfDay> {
        parse_time_of_day(text).map(|s| s.value)
    }

    #[test]
    fn durations_as_people_say_them() {
        for (text, want) in [
            ("ninety seconds", 90),
            ("an hour and a half", 5400),
            ("a minute and a half", 90),
            ("two and a half hours", 9000),
            ("two and a half minutes", 150),
            ("1h 30", 5400),
            ("1h30", 5400),
            ("1h30m", 5400),
            ("18 min", 1080),
            ("18min", 1080),
            ("half an hour", 1800),
            ("a half hour", 1800),
            ("half a minute", 30),
            ("a quarter of an hour", 900),
            ("quarter of an hour", 900),
            ("three quarters of an hour", 2700),
            ("4 second", 4),
            ("a 4 second timer", 4),
            ("a five-minute timer", 300),
            ("a minute and 20 seconds", 80),
            ("an hour and 20 minutes", 4800),
            ("1 hour 30 minutes", 5400),
            ("two hours thirty", 9000),
            ("five minutes thirty", 330),
            ("an hour and a quarter", 4500),
            ("1.5 hours", 5400),
            ("twenty five minutes", 1500),
            ("a thousand hours", 3_600_000),
            ("a couple of minutes", 120),
            ("a second", 1),
            ("10 secs", 10),
            ("2 hrs", 7200),
            ("ninety minute", 5400),
            ("ninety second timer", 90),
            ("a 10-minute timer", 600),
            ("five more minutes", 300),
            ("twenty second", 20),
            ("another minute", 60),
            ("in 3 days", 3 * 86_400),
            ("one week", 604_800),
        ] {
            assert_eq!(secs(text), Some(want), "{text}");
        }
    }

    #[test]
    fn durations_inside_sentences_have_spans() {
        let text = "set a rice timer for 18 minutes please";
        let d = parse_duration(text).unwrap();
        assert_eq!(&text[d.span.clone()], "18 minutes");
        let text = "remind me in twenty minutes to check the oven";
        let d = parse_delay(text).unwrap();
        assert_eq!(&text[d.span.clone()], "in twenty minutes");
        assert_eq!(d.value.as_secs(), 1200);
        let text = "set a timer for an hour and a half for the roast";
        let d = parse_duration(text).unwrap();
        assert_eq!(&text[d.span.clone()], "an hour and a half");
        let d = parse_delay("ten minutes from now").unwrap();
        assert_eq!(d.value.as_secs(), 600);
        assert_eq!(parse_delay("in 25 minutes").unwrap().value.as_secs(), 1500);
        assert_eq!(
            parse_delay("in half an hour").unwrap().value.as_secs(),
            1800
        );
    }

    #[test]
    fn not_durations() {
        for text in [
            "",
            "the second of march",
            "set a second timer",
            "a few minutes",
            "what time is it",
            "at 7 a.m.",
            "at 7 am",
            "minutes",
            "the minute hand",
            "one",
            "the 3rd",
            "first minute",
            "two thousand",
        ] {
            assert_eq!(duration_in(text), Ok(None), "{text}");
        }
    }

    #[test]
    fn bad_durations_are_typed_errors() {
        assert_eq!(
            duration_in("set a timer for minus five minutes"),
            Err(WhenError::Negative)
        );
        assert_eq!(duration_in("-5 minutes"), Err(WhenError::Negative));
        assert_eq!(
            duration_in("a timer for a trillion hours"),
            Err(WhenError::TooLong)
        );
        let huge = format!("{} seconds", "9".repeat(400));
        assert_eq!(duration_in(&huge), Err(WhenError::TooLarge));
        assert_eq!(WhenError::Negative.to_string(), "A time can't be negative.");
        // Ten minus five minutes is arithmetic, not a negative duration.
        assert_eq!(secs("ten minus five minutes"), Some(300));
    }

    #[test]
    fn clock_times_as_people_say_them() {
        for (text, want) in [
            ("half past nine", either(9, 30)),
            ("quarter to seven", either(6, 45)),
            ("a quarter past six", either(6, 15)),
            ("ten past six", either(6, 10)),
            ("half-pass six", either(6, 30)),
            ("quarter pass seven", either(7, 15)),
            ("twenty five to eight", either(7, 35)),
            ("five to one", either(12, 55)),
            ("noon", at(12, 0)),
            ("twelve noon", at(12, 0)),
            ("midnight", at(0, 0)),
            ("six thirty", either(6, 30)),
            ("six oh five", either(6, 5)),
            ("6:30", either(6, 30)),
            ("06:30", at(6, 30)),
            ("18:45", at(18, 45)),
            ("7am", at(7, 0)),
            ("7 a.m.", at(7, 0)),
            ("7 p.m.", at(19, 0)),
            ("7pm", at(19, 0)),
            ("12am", at(0, 0)),
            ("12pm", at(12, 0)),
            ("seven in the evening", at(19, 0)),
            ("six in the morning", at(6, 0)),
            ("three in the afternoon", at(15, 0)),
            ("ten at night", at(22, 0)),
            ("0630", at(6, 30)),
            ("1800 hours", at(18, 0)),
            ("at 630", either(6, 30)),
            ("seven o'clock", either(7, 0)),
            ("at 5", either(5, 0)),
            ("at five", either(5, 0)),
            ("at 17", at(17, 0)),
            ("at half six", either(6, 30)),
            ("at 6.30", either(6, 30)),
            ("alarm at 6 45", either(6, 45)),
            ("at 10 to 5", either(4, 50)),
            ("six thirty pm", at(18, 30)),
            ("half past seven in the morning", at(7, 30)),
            ("eighteen hundred hours", at(18, 0)),
            ("fourteen thirty", at(14, 30)),
            ("24:00", at(0, 0)),
        ] {
            assert_eq!(clock(text), Some(want), "{text}");
        }
    }

    #[test]
    fn clock_times_in_sentences() {
        let text = "wake me at 6:30 tomorrow";
        let t = parse_time_of_day(text).unwrap();
        assert_eq!(&text[t.span.clone()], "6:30");
        let text = "remind me at 5 to call mum";
        let t = parse_time_of_day(text).unwrap();
        assert_eq!(&text[t.span.clone()], "5");
        assert_eq!(t.value, either(5, 0));
        let text = "set an alarm for seven in the evening";
        let t = parse_time_of_day(text).unwrap();
        assert_eq!(&text[t.span.clone()], "seven in the evening");
        assert_eq!(clock("get me up at six"), Some(either(6, 0)));
        assert_eq!(clock("an alarm for weekdays at seven"), Some(either(7, 0)));
    }

    #[test]
    fn not_clock_times() {
        for text in [
            "",
            "for 10 minutes",
            "set a timer for five minutes",
            "half an hour",
            "in 25 minutes",
            "what is six plus seven",
            "i have 5 apples",
            "nineteen eighty four",
            "at 5 percent",
            "six hundred",
            "the year 1984",
            "at 25",
        ] {
            assert_eq!(time_in(text), Ok(None), "{text}");
        }
    }

    #[test]
    fn bad_clock_times_are_typed_errors() {
        for (text, said) in [
            ("at 25:00", "25:00"),
            ("wake me at 12:75", "12:75"),
            ("at 24:30", "24:30"),
        ] {
            assert_eq!(
                time_in(text),
                Err(WhenError::BadClock { said: said.into() }),
                "{text}"
            );
        }
        assert!(matches!(
            time_in("at 13 am"),
            Err(WhenError::BadClock { .. })
        ));
        assert_eq!(
            WhenError::BadClock {
                said: "25:00".into()
            }
            .to_string(),
            "There's no such time as 25:00."
        );
    }

    /// The day said, compared without [`Day::weekday_name`] (its own test).
    fn day(text: &str) -> Option<Day> {
        parse_day(text, today()).map(|s| Day {
            weekday_name: false,
            ..s.value
        })
    }

    fn on(d: NaiveDate) -> Option<Day> {
        Some(Day {
            day: DayRef::Date(d),
            part: None,
            weekday_name: false,
        })
    }

    fn repeat(r: Repeat, part: Option<PartOfDay>) -> Option<Day> {
        Some(Day {
            day: DayRef::Repeat(r),
            part,
            weekday_name: false,
        })
    }

    #[test]
    fn days_as_people_say_them() {
        use Weekday::*;
        assert_eq!(day("today"), on(today()));
        assert_eq!(day("tomorrow"), on(date(2026, 12, 3)));
        assert_eq!(
            day("tonight"),
            Some(Day {
                day: DayRef::Date(today()),
                part: Some(PartOfDay::Night),
                weekday_name: false,
            })
        );
        assert_eq!(
            day("tomorrow morning"),
            Some(Day {
                day: DayRef::Date(date(2026, 12, 3)),
                part: Some(PartOfDay::Morning),
                weekday_name: false,
            })
        );
        // Today is a Wednesday.
        assert_eq!(day("thursday"), on(date(2026, 12, 3)));
        assert_eq!(day("on Wednesday"), on(today()));
        assert_eq!(day("next wednesday"), on(date(2026, 12, 9)));
        assert_eq!(day("next Monday"), on(date(2026, 12, 7)));
        assert_eq!(
            day("Monday afternoon"),
            Some(Day {
                day: DayRef::Date(date(2026, 12, 7)),
                part: Some(PartOfDay::Afternoon),
                weekday_name: false,
            })
        );
        assert_eq!(day("on the 3rd"), on(date(2026, 12, 3)));
        assert_eq!(day("on the first"), on(date(2027, 1, 1)));
        assert_eq!(day("on the 2nd"), on(today()));
        assert_eq!(day("the 3rd of December"), on(date(2026, 12, 3)));
        assert_eq!(day("3 December"), on(date(2026, 12, 3)));
        assert_eq!(day("December 1st"), on(date(2027, 12, 1)));
        assert_eq!(day("the 1st of december 2027"), on(date(2027, 12, 1)));
        assert_eq!(day("the twenty ninth of february"), on(date(2028, 2, 29)));
        assert_eq!(day("the day after tomorrow"), on(date(2026, 12, 4)));
        assert_eq!(day("every weekday"), repeat(Repeat::Weekdays, None));
        assert_eq!(day("weekdays"), repeat(Repeat::Weekdays, None));
        assert_eq!(day("every day"), repeat(Repeat::Daily, None));
        assert_eq!(day("daily"), repeat(Repeat::Daily, None));
        assert_eq!(day("every weekend"), repeat(Repeat::Weekends, None));
        assert_eq!(
            day("every morning"),
            repeat(Repeat::Daily, Some(PartOfDay::Morning))
        );
        assert_eq!(
            day("on Mondays and Thursdays"),
            repeat(Repeat::Days(vec![Mon, Thu]), None)
        );
        assert_eq!(
            day("every friday and monday"),
            repeat(Repeat::Days(vec![Mon, Fri]), None)
        );
        assert_eq!(day("monday to friday"), repeat(Repeat::Weekdays, None));
        assert_eq!(Repeat::Days(vec![Mon, Wed]).as_contract(), "mon,wed");
        assert_eq!(Repeat::Weekdays.as_contract(), "weekdays");
    }

    #[test]
    fn not_days() {
        for text in [
            "",
            "may i have some tea",
            "set a timer for 5 minutes",
            "the 3rd",
            "my second day",
            "daydream",
        ] {
            assert_eq!(day_in(text, today()), Ok(None), "{text}");
        }
    }

    #[test]
    fn bad_days_are_typed_errors() {
        assert_eq!(
            day_in("on the 31st of February", today()),
            Err(WhenError::NoSuchDate {
                day: 31,
                month: Some(2)
            })
        );
        assert_eq!(
            day_in("the 31st of February", today())
                .unwrap_err()
                .to_string(),
            "February has no 31st."
        );
        assert_eq!(
            day_in("april 31", today()),
            Err(WhenError::NoSuchDate {
                day: 31,
                month: Some(4)
            })
        );
        assert_eq!(
            day_in("on the 45th", today()),
            Err(WhenError::NoSuchDate {
                day: 45,
                month: None
            })
        );
        assert_eq!(
            day_in("the 29th of february 2027", today()),
            Err(WhenError::NoSuchDate {
                day: 29,
                month: Some(2)
            })
        );
    }

    fn now(h: u32, m: u32) -> NaiveDateTime {
        today().and_time(hm(h, m))
    }

    fn resolved(
        text: &str,
        now: NaiveDateTime,
        prefer: Prefer,
    ) -> Option<Result<Resolved, WhenError>> {
        let t = parse_time_of_day(text).map(|s| s.value);
        let d = parse_day(text, now.date()).map(|s| s.value);
        resolve(t, d.as_ref(), now, prefer)
    }

    fn once(d: NaiveDate, h: u32, m: u32) -> Option<Result<Resolved, WhenError>> {
        Some(Ok(Resolved::At(d.and_time(hm(h, m)))))
    }

    #[test]
    fn resolve_picks_the_next_moment() {
        let tomorrow = date(2026, 12, 3);
        // A clock time with no day: the next one.
        assert_eq!(
            resolved("at 5", now(9, 0), Prefer::Next),
            once(today(), 17, 0)
        );
        assert_eq!(
            resolved("at 5", now(18, 0), Prefer::Next),
            once(tomorrow, 5, 0)
        );
        assert_eq!(
            resolved("at 7am", now(8, 0), Prefer::Next),
            once(tomorrow, 7, 0)
        );
        assert_eq!(
            resolved("at 7am", now(6, 0), Prefer::Next),
            once(today(), 7, 0)
        );
        // A wake-up: the morning one.
        assert_eq!(
            resolved("get me up at six", now(14, 0), Prefer::Morning),
            once(tomorrow, 6, 0)
        );
        assert_eq!(
            resolved("wake me at 6:30 tomorrow", now(22, 0), Prefer::Morning),
            once(tomorrow, 6, 30)
        );
        // A day with a part and no time.
        assert_eq!(
            resolved("tomorrow morning", now(22, 0), Prefer::Next),
            once(tomorrow, 9, 0)
        );
        assert_eq!(
            resolved("thursday at 3", now(9, 0), Prefer::Next),
            once(tomorrow, 15, 0)
        );
        assert_eq!(
            resolved("monday afternoon at 2", now(9, 0), Prefer::Next),
            once(date(2026, 12, 7), 14, 0)
        );
        assert_eq!(
            resolved("tonight at 8", now(9, 0), Prefer::Next),
            once(today(), 20, 0)
        );
        assert_eq!(
            resolved("today at 6am", now(9, 0), Prefer::Next),
            Some(Err(WhenError::Past))
        );
        // Today is a Wednesday: a bare "Wednesday" whose time is gone is
        // next week's; "this Wednesday" and "today" stay today (passed).
        let next_week = date(2026, 12, 9);
        let past = Some(Err(WhenError::Past));
        for (text, at, want) in [
            ("wednesday at 8am", now(9, 0), once(next_week, 8, 0)),
            (
                "a haircut on wednesday at 8",
                now(9, 0),
                once(next_week, 8, 0),
            ),
            (
                "a haircut on wednesday at 8",
                now(7, 0),
                once(today(), 8, 0),
            ),
            ("wednesday at 10", now(12, 48), once(next_week, 10, 0)),
            ("on wednesday at 3", now(12, 48), once(today(), 15, 0)),
            ("today at 10", now(12, 48), once(today(), 22, 0)),
            (
                "a haircut on wednesday at 8",
                now(21, 0),
                once(next_week, 8, 0),
            ),
            ("wednesday morning", now(10, 0), once(next_week, 9, 0)),
            ("wednesday at 11", now(9, 0), once(today(), 11, 0)),
            ("this wednesday at 8am", now(9, 0), past.clone()),
            ("next wednesday at 8am", now(9, 0), once(next_week, 8, 0)),
        ] {
            assert_eq!(resolved(text, at, Prefer::Next), want, "{text} at {at}");
        }
        let said = |text: &str| parse_day(text, today()).map(|s| s.value.weekday_name);
        assert_eq!(said("friday"), Some(true));
        assert_eq!(said("on friday"), Some(true));
        assert_eq!(said("this friday"), Some(false));
        assert_eq!(said("next friday"), Some(false));
        assert_eq!(said("today"), Some(false));
        assert_eq!(
            resolved("an alarm for weekdays at seven", now(9, 0), Prefer::Morning),
            Some(Ok(Resolved::Repeat {
                time: hm(7, 0),
                repeat: Repeat::Weekdays
            }))
        );
        assert_eq!(resolved("hello", now(9, 0), Prefer::Next), None);
    }

    #[test]
    fn spoken_answers_use_digits() {
        assert_eq!(say_duration(Duration::from_secs(18 * 60)), "18 minutes");
        assert_eq!(
            say_duration(Duration::from_secs(12 * 60 + 5)),
            "12 minutes and 5 seconds"
        );
        assert_eq!(
            say_duration(Duration::from_secs(3600 + 60)),
            "1 hour and 1 minute"
        );
        assert_eq!(say_time(hm(6, 30)), "6:30 AM");
        assert_eq!(ordinal(22), "22nd");
        assert_eq!(ordinal(13), "13th");
    }

    /// Odd strings never panic and stay fast: a small property-style loop
    /// over random joins of awkward tokens.
    #[test]
    fn no_panic_on_odd_strings() {
        let pieces = [
            "a",
            "an",
            "half",
            "quarter",
            "of",
            "and",
            "minus",
            "-",
            ":",
            "25",
            "00",
            "0630",
            "7",
            "am",
            "p",
            ".",
            "m",
            "hour",
            "hours",
            "min",
            "s",
            "h",
            "the",
            "31st",
            "february",
            "every",
            "weekday",
            "mondays",
            "next",
            "in",
            "at",
            "past",
            "to",
            "noon",
            "twelve",
            "nineteen",
            "hundred",
            "oh",
            "😀",
            "½",
            "1.5",
            "99999999999999999999999999",
            "3/4",
            ",",
            "thousand",
            "million",
            "on",
            "tomorrow",
            "night",
            "o'clock",
            "twenty",
            "five",
            "second",
            "",
            "   ",
            "ñ",
            "𝟘",
            "29th",
            "2027",
            "may",
            "this",
            "from",
            "now",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let started = std::time::Instant::now();
        for _ in 0..3000 {
            let mut s = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 9) as usize + 1;
            for k in 0..n {
                let idx = ((seed >> (k * 5)) as usize) % pieces.len();
                s.push_str(pieces[idx]);
                if (seed >> (k + 40)) & 1 == 0 {
                    s.push(' ');
                }
            }
            let _ = duration_in(&s);
            let _ = delay_in(&s);
            let _ = time_in(&s);
            let _ = day_in(&s, today());
            let t = parse_time_of_day(&s).map(|x| x.value);
            let d = parse_day(&s, today()).map(|x| x.value);
            let _ = resolve(t, d.as_ref(), now(23, 59), Prefer::Next);
            for sp in [
                parse_duration(&s).map(|x| x.span),
                parse_time_of_day(&s).map(|x| x.span),
            ]
            .into_iter()
            .flatten()
            {
                assert!(s.get(sp).is_some(), "{s:?}");
            }
        }
        let long = "half past ".repeat(2000);
        let _ = time_in(&long);
        let _ = duration_in(&"an hour and ".repeat(3000));
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}
