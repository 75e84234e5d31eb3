//! The calendar frames of the no-wrong-action gate: "put a haircut in my
//! diary for Thursday at 11am", "what have I got on Thursday", "am I free
//! on Monday afternoon", "what's on my calendar next week", "when is my
//! next meeting", "move the haircut to 12", "cancel drinks with Sam".
//!
//! Same rule as [`super::fit`]: a calendar action runs only when the
//! sentence has one of these shapes, and takes its arguments from the same
//! parse (times through [`crate::nlu::when`], the one time parser). Moving
//! and cancelling also need an event of that name in the calendar — the
//! action checks — so "cancel the rice timer" is never taken here. These
//! frames run ahead of the classifier and the router's keyword precheck
//! (which would send "calendar"/"schedule" to the agent).

use std::sync::OnceLock;

use chrono::{NaiveDate, NaiveDateTime};
use regex::Regex;

use crate::nlu::when::{self, Day, DayRef, PartOfDay, TimeOfDay, WhenError};

macro_rules! rx {
    ($pattern:expr) => {{
        static CELL: OnceLock<Regex> = OnceLock::new();
        super::fit::re(&CELL, $pattern)
    }};
}

/// What a calendar sentence asks.
#[derive(Debug, Clone, PartialEq)]
pub enum CalendarFrame {
    /// Add `title` at a time (a day, or the next such time).
    Add {
        title: String,
        when: Result<Option<NaiveDateTime>, WhenError>,
    },
    /// What is on `day` (today when none was said).
    Query { day: Result<NaiveDate, WhenError> },
    /// Is `day` (or its part) free? `asks_busy`: the question is "do I have
    /// anything on / am I busy", so "yes" means there is something.
    Free {
        day: Result<NaiveDate, WhenError>,
        part: Option<PartOfDay>,
        asks_busy: bool,
    },
    /// Move the event named `title` to a time and/or day.
    Move {
        title: String,
        time: Option<TimeOfDay>,
        day: Option<Result<NaiveDate, WhenError>>,
    },
    /// Remove the event named `title`.
    Cancel { title: String },
    /// What is on the days `from` up to (not including) `to`: "what's on
    /// my calendar this week", "anything next weekend". `said` names the
    /// span in the answer ("this week").
    Span {
        from: NaiveDate,
        to: NaiveDate,
        said: &'static str,
    },
    /// The next event from now: "when is my next meeting", "what's next
    /// on my calendar".
    Next,
}

impl CalendarFrame {
    /// Whether acting on it changes the calendar.
    pub fn changes(&self) -> bool {
        matches!(
            self,
            CalendarFrame::Add { .. } | CalendarFrame::Move { .. } | CalendarFrame::Cancel { .. }
        )
    }
}

const BOOK: &str = r"(?:diary|calendar|schedule|agenda|planner)";

/// What a calendar holds, asked about as such ("any meetings tomorrow").
const ENTRIES: &str = r"(?:meetings|appointments|appts|events|plans|engagements)";

/// One entry, asked for as such ("my next meeting").
const SINGLE_ENTRY: &str = r"(?:meeting|appointment|appt|event|engagement|thing on)";

/// Words that make a title an event when no book is named.
const EVENT: &str = r"(?:appointment|appt|meeting|call|lunch|dinner|breakfast|brunch|drinks|coffee|haircut|hair cut|dentist|doctor|doctor's|gp|vet|party|date|interview|class|lesson|practice|training|session|event|visit|catch ?up|catch-up|standup|stand-up|review|game|match|trip|flight|birthday|anniversary|wedding|concert|gig|show|rehearsal|workout|gym|yoga|massage|check ?up|check-up|consultation|conference|webinar|presentation|demo|playdate|sleepover|barbecue|bbq|picnic|service|meetup|meet-up|appraisal|exam|test|recital|tournament)";

/// `title` (found in the lowercased sentence `lower`) as the user wrote
/// it in `cased` ("dinner with Alex", not "dinner with alex").
fn as_said(cased: &str, lower: &str, title: &str) -> String {
    if cased.len() != lower.len() {
        return title.to_string();
    }
    match lower.find(title) {
        Some(at) if cased.is_char_boundary(at) && cased.is_char_boundary(at + title.len()) => {
            cased[at..at + title.len()].to_string()
        }
        _ => title.to_string(),
    }
}

/// The day said in `t` (its span replaced by `QDAY`), with its part.
fn take_day(t: &str, today: NaiveDate) -> (String, Option<Result<Day, WhenError>>) {
    match when::day_in(t, today) {
        Ok(Some(s)) => (
            format!("{}QDAY{}", &t[..s.span.start], &t[s.span.end..]),
            Some(Ok(s.value)),
        ),
        Ok(None) => (t.to_string(), None),
        Err(e) => (t.to_string(), Some(Err(e))),
    }
}

/// A span of days named in `t` ("this week", "next weekend"), replaced by
/// `QSPAN`: the days from, the day after the last, and how to say it.
/// Weeks run Monday to Sunday; "this week" is what is left of it, "this
/// weekend" the coming Saturday and Sunday (what is left of them at the
/// weekend).
fn take_span(t: &str, today: NaiveDate) -> Option<(String, NaiveDate, NaiveDate, &'static str)> {
    use chrono::Datelike;
    let m = rx!(r"\b(?:this|next|the coming|the)\s+(?:week|weekend)\b|\bthe rest of (?:the|this) week\b|\bover the weekend\b").find(t)?;
    let said = m.as_str();
    let monday = today - chrono::Duration::days(i64::from(today.weekday().num_days_from_monday()));
    let next_monday = monday + chrono::Duration::days(7);
    let saturday = monday + chrono::Duration::days(5);
    let (from, to, name) = if said.ends_with("weekend") {
        if said.starts_with("next") {
            (
                saturday + chrono::Duration::days(7),
                next_monday + chrono::Duration::days(7),
                "next weekend",
            )
        } else {
            (saturday.max(today), next_monday, "this weekend")
        }
    } else if said.starts_with("next") {
        (
            next_monday,
            next_monday + chrono::Duration::days(7),
            "next week",
        )
    } else {
        (today, next_monday, "this week")
    };
    Some((
        format!("{}QSPAN{}", &t[..m.start()], &t[m.end()..]),
        from,
        to,
        name,
    ))
}

fn take_time(t: &str) -> (String, Option<Result<TimeOfDay, WhenError>>) {
    match when::time_in(t) {
        Ok(Some(s)) => (
            format!("{}QTIME{}", &t[..s.span.start], &t[s.span.end..]),
            Some(Ok(s.value)),
        ),
        Ok(None) => (t.to_string(), None),
        Err(e) => (t.to_string(), Some(Err(e))),
    }
}

fn one_date(day: &Day) -> Option<NaiveDate> {
    match &day.day {
        DayRef::Date(d) => Some(*d),
        DayRef::Repeat(_) => None,
    }
}

fn clean_title(s: &str) -> String {
    let s = rx!(r"^(?:the|my|a|an|our)\s+").replace(s.trim(), "");
    s.trim_matches(|c: char| c == ',' || c == '.' || c == ' ')
        .to_string()
}

/// Read a calendar sentence (tidied by [`super::fit::tidy`]), seen from
/// `now` (local); `None` when it has none of the shapes.
pub fn frame(text: &str, now: NaiveDateTime) -> Option<CalendarFrame> {
    let cased = super::fit::tidy(text);
    let t = cased.to_lowercase();
    if t.is_empty() || t.split_whitespace().count() > 25 || super::fit::is_negated(&t) {
        return None;
    }
    let today = now.date();
    let (d, day) = take_day(&t, today);
    let (ph, time) = take_time(&d);

    // Add: "put a haircut in my diary for thursday at 11am".
    let add = rx!(&format!(
        r"^(?:put|add|pop|stick|write|pencil|book|schedule|enter)(?: in)? (.+?) (?:in|into|on|to|onto) (?:my|the|our) {BOOK}((?: .*)?)$"
    ));
    let loose = rx!(
        r"^(?:schedule|book|pencil in|arrange|set up|plan|create|add|put in|put down|make)(?: (?:me|us))? ((?:(?:a|an|the|my|our) )?.+?)((?: (?:on|at|for|from|the|this|next|QDAY|QTIME))+)$"
    );
    let c = match add.captures(&ph) {
        Some(c) => Some(c),
        // "schedule a dentist appointment next tuesday at 10:30", "book
        // lunch with priya on the 14th at 1": no book named, so the title
        // must name an event and a day or time must be said.
        None => loose.captures(&ph).filter(|c| {
            let title = &c[1];
            let generic = rx!(r"^(?:add|put in|put down|make) ").is_match(&ph);
            // "book a flight to paris", "book a table": a booking earshot
            // can't make, not an entry; "book lunch with priya" is one.
            let booking = ph.starts_with("book ") && !rx!(r"\bwith\b").is_match(title);
            // "make dinner at 7" is cooking; "make an appointment" is not.
            let cooking = ph.starts_with("make ")
                && !rx!(r"\b(?:appointment|appt|meeting|call|reservation)s?\b").is_match(title);
            !booking
                && !cooking
                && rx!(&format!(r"\b{EVENT}s?\b")).is_match(title)
                && (c[2].contains("QDAY") || c[2].contains("QTIME"))
                && !rx!(r"\b(?:timers?|alarms?|reminders?|list|todo|to-do)\b").is_match(title)
                // "add call mum at 5" is a to-do; "add a meeting…" is not.
                && (!generic || rx!(r"^(?:a|an|the|my|our) ").is_match(title))
        }),
    };
    if let Some(c) = c {
        let title = clean_title(&c[1]);
        let title = rx!(r"^(?:event|appointment|meeting|entry) (?:called|named|titled|for) ")
            .replace(&title, "")
            .to_string();
        if title.is_empty() || title.contains("QDAY") || title.contains("QTIME") {
            return None;
        }
        let title = as_said(&cased, &t, &title);
        // After the book only the time may follow — or a time said
        // wrongly ("on the 31st of february"), kept as the reason.
        let rest = rx!(r"\b(?:QDAY|QTIME|for|on|at|the|in)\b").replace_all(&c[2], "");
        let said_wrongly = matches!(time, Some(Err(_))) || matches!(day, Some(Err(_)));
        if !rest.trim().is_empty() && !said_wrongly {
            return None;
        }
        let when = match (time, day) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            (None, _) => Ok(None),
            (Some(Ok(tod)), day) => {
                let day = day.and_then(|d| d.ok());
                match when::resolve(Some(tod), day.as_ref(), now, when::Prefer::Next) {
                    Some(Ok(when::Resolved::At(at))) => Ok(Some(at)),
                    Some(Ok(when::Resolved::Repeat { .. })) | None => Ok(None),
                    Some(Err(e)) => Err(e),
                }
            }
        };
        return Some(CalendarFrame::Add { title, when });
    }

    // Next: "when is my next meeting", "what's next on my calendar",
    // "what's my next appointment".
    if rx!(&format!(
        r"^(?:when'?s|when is|what'?s|what is|tell me)(?: my| the)? next {SINGLE_ENTRY}(?: (?:on|in) (?:my|the) {BOOK})?$|^(?:what'?s|what is)(?: coming up| up)? next (?:on|in) (?:my|the) {BOOK}$|^what'?s coming up (?:on|in) (?:my|the) {BOOK}$"
    ))
    .is_match(&t)
    {
        return Some(CalendarFrame::Next);
    }

    // A span of days, asked as a day is: "what's on my calendar this
    // week", "do i have anything next weekend", "what meetings do i have
    // next week".
    if day.is_none() {
        if let Some((sp, from, to, said)) = take_span(&t, today) {
            let free = rx!(&format!(
                r"^(?:am i (?:free|busy)|(?:(?:do|have) i (?:have|got) |is there |are there |got )?(?:any )?(?:free time|anything|plans|something|{ENTRIES})(?: (?:on|in) (?:my|the) {BOOK}| on)?)(?: (?:for|in|on|during|over))? QSPAN$"
            ));
            let query = rx!(&format!(
                r"^(?:what(?:'s| is| have i got| do i have| have i| am i doing| are my plans| plans do i have)(?: got)?(?: (?:on|in|planned|happening|for))?(?: (?:my|the) {BOOK})?|(?:read|show|tell) me my {BOOK}|what'?s in (?:my|the) {BOOK}|what {ENTRIES} (?:do i have|have i got|are there|are on|is there)(?: (?:on|in) (?:my|the) {BOOK})?|(?:what'?s|what is|how'?s|how is) my {BOOK}(?: (?:like|look like|looking|looking like))?)(?: (?:for|in|on|during|over))? QSPAN$"
            ));
            if free.is_match(&sp) || query.is_match(&sp) {
                return Some(CalendarFrame::Span { from, to, said });
            }
        }
    }

    let day_of = |day: &Option<Result<Day, WhenError>>| -> Option<Result<NaiveDate, WhenError>> {
        match day {
            Some(Ok(d)) => one_date(d).map(Ok),
            Some(Err(e)) => Some(Err(e.clone())),
            None => None,
        }
    };

    // Free: "am i free on monday afternoon", "is there anything on my
    // calendar on saturday", "any meetings tomorrow".
    if rx!(&format!(
        r"^(?:am i (?:free|busy|available)|(?:(?:do|have) i (?:have|got) |is there |are there |got )?(?:any )?(?:free time|time free|anything|plans|something|{ENTRIES})(?: (?:on|in) (?:my|the) {BOOK}| on)?|is my {BOOK} (?:free|clear|empty))(?: (?:on|for|in))?(?: the)? QDAY$"
    ))
    .is_match(&ph)
    {
        let part = day.as_ref().and_then(|d| d.as_ref().ok()).and_then(|d| d.part);
        let asks_busy = !rx!(r"\b(?:free|available|clear|empty)\b").is_match(&ph);
        return day_of(&day).map(|d| CalendarFrame::Free {
            day: d,
            part,
            asks_busy,
        });
    }

    // Query: "what have i got on thursday", "what's on my calendar
    // tomorrow", "what meetings do i have on friday", "what's my schedule
    // like today".
    let query = rx!(&format!(
        r"^(?:what(?:'s| is| have i got| do i have| have i| am i doing| are my plans| plans do i have)(?: got)?(?: (?:on|in|planned|happening|for))?(?: (?:my|the) {BOOK})?|(?:read|show|tell) me my {BOOK}|what'?s in (?:my|the) {BOOK}|(?:check|open) my {BOOK}|what {ENTRIES} (?:do i have|have i got|are there|are on|is there)(?: (?:on|in) (?:my|the) {BOOK})?|(?:what'?s|what is|how'?s|how is) my {BOOK}(?: (?:like|look like|looking|looking like))?|(?:what'?s|what is|when'?s|when is) my first {SINGLE_ENTRY})(?: (?:on|for|in))?(?: the)?(?: QDAY)?$"
    ));
    if query.is_match(&ph) {
        let mentions_book = rx!(&format!(r"\b{BOOK}\b")).is_match(&ph);
        return match day_of(&day) {
            Some(d) => Some(CalendarFrame::Query { day: d }),
            // "what have i got" alone is too vague; "what's on my calendar" is today.
            None if mentions_book && day.is_none() => Some(CalendarFrame::Query { day: Ok(today) }),
            None => None,
        };
    }

    // Move: "move the haircut to 12", "move drinks with sam to friday at 6".
    if let Some(c) = rx!(r"^(?:move|shift|push|change|reschedule|put back|bring forward|bring) (.+?) (?:to|till|until|for|back to|forward to)(?: (?:QDAY|QTIME|at|on))+$").captures(&ph) {
        let title = clean_title(&c[1]);
        if title.is_empty() || title.contains("QDAY") || title.contains("QTIME") {
            return None;
        }
        let time = match time {
            Some(Ok(t)) => Some(t),
            Some(Err(_)) => return None,
            None => None,
        };
        let day = day_of(&day);
        if time.is_none() && day.is_none() {
            return None;
        }
        return Some(CalendarFrame::Move { title, time, day });
    }

    // Cancel: "cancel drinks with sam", "delete the dentist from my calendar".
    if let Some(c) = rx!(&format!(
        r"^(?:cancel|delete|remove|scrap|drop|call off|clear|take) (.+?)(?: (?:from|off|out of|in) (?:my|the) {BOOK})?(?: (?:on|for) QDAY)?$"
    ))
    .captures(&d)
    {
        let title = clean_title(&c[1]);
        if title.is_empty() || title.contains("QDAY") {
            return None;
        }
        return Some(CalendarFrame::Cancel { title });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveTime;

    /// Wednesday 2 December 2026, 09:00.
    fn now() -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2026, 12, 2)
            .unwrap()
            .and_hms_opt(9, 0, 0)
            .unwrap()
    }

    fn date(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, d).unwrap()
    }

    #[test]
    fn spans_of_days_and_the_next_event() {
        // Wednesday 2 December: this week is Wed–Sun, the weekend 5–6.
        let span = |s: &str| match frame(s, now()) {
            Some(CalendarFrame::Span { from, to, said }) => Some((from, to, said)),
            _ => None,
        };
        assert_eq!(
            span("What's on my calendar this week?"),
            Some((date(2), date(7), "this week"))
        );
        assert_eq!(
            span("what meetings do i have next week"),
            Some((date(7), date(14), "next week"))
        );
        assert_eq!(
            span("do I have anything this weekend"),
            Some((date(5), date(7), "this weekend"))
        );
        assert_eq!(
            span("am I busy next weekend"),
            Some((date(12), date(14), "next weekend"))
        );
        assert_eq!(
            span("what's my schedule like for the rest of the week"),
            Some((date(2), date(7), "this week"))
        );
        // Not a question about the span.
        assert_eq!(span("put lunch in my diary next week"), None);
        assert_eq!(span("i'm away next week"), None);
        assert_eq!(span("what's the weather this weekend"), None);
        for next in [
            "When is my next meeting?",
            "what's my next appointment",
            "what's next on my calendar",
            "what's coming up on my calendar",
        ] {
            assert_eq!(frame(next, now()), Some(CalendarFrame::Next), "{next}");
        }
        assert_eq!(frame("when is the next bus", now()), None);
        assert_eq!(
            frame("what's my first appointment tomorrow", now()),
            Some(CalendarFrame::Query { day: Ok(date(3)) })
        );
        assert_eq!(
            span("what do I have next week"),
            Some((date(7), date(14), "next week"))
        );
        assert_eq!(frame("what's next", now()), None);
        assert_eq!(frame("what's up next", now()), None);
    }

    #[test]
    fn the_five_shapes() {
        assert_eq!(
            frame("put a haircut in my diary for Thursday at 11am", now()),
            Some(CalendarFrame::Add {
                title: "haircut".into(),
                when: Ok(Some(date(3).and_hms_opt(11, 0, 0).unwrap()))
            })
        );
        assert_eq!(
            frame("what have I got on Thursday", now()),
            Some(CalendarFrame::Query { day: Ok(date(3)) })
        );
        assert_eq!(
            frame("am I free on Monday afternoon", now()),
            Some(CalendarFrame::Free {
                day: Ok(date(7)),
                part: Some(PartOfDay::Afternoon),
                asks_busy: false
            })
        );
        assert_eq!(
            frame("move the haircut to 12", now()),
            Some(CalendarFrame::Move {
                title: "haircut".into(),
                time: Some(TimeOfDay::Either {
                    hour: 12,
                    minute: 0
                }),
                day: None
            })
        );
        assert_eq!(
            frame("cancel drinks with Sam", now()),
            Some(CalendarFrame::Cancel {
                title: "drinks with sam".into()
            })
        );
    }

    #[test]
    fn events_are_added_without_naming_the_calendar_and_keep_their_case() {
        let add = |s: &str| match frame(s, now()) {
            Some(CalendarFrame::Add { title, when }) => (title, when.unwrap().unwrap()),
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(
            add("schedule a dentist appointment next Tuesday at 10:30"),
            (
                "dentist appointment".into(),
                date(8).and_hms_opt(10, 30, 0).unwrap()
            )
        );
        assert_eq!(
            add("book lunch with Priya on the 14th at 1"),
            (
                "lunch with Priya".into(),
                date(14).and_hms_opt(13, 0, 0).unwrap()
            )
        );
        assert_eq!(
            add("add a meeting with Bob tomorrow at 3pm"),
            (
                "meeting with Bob".into(),
                date(3).and_hms_opt(15, 0, 0).unwrap()
            )
        );
        assert_eq!(
            add("create an event called Team Sync on Friday at 9am").0,
            "Team Sync"
        );
        assert_eq!(
            add("make a doctor's appointment for Monday at 9:30").0,
            "doctor's appointment"
        );
        assert_eq!(
            add("put dinner with Alex in the calendar for Friday at 7pm").0,
            "dinner with Alex"
        );
        for s in [
            "add call mum at 5",
            "book a table for two at 7",
            "schedule a backup for 3am",
            "make a timer for 5 minutes",
            "set up the printer tomorrow",
            "add a meeting with bob",
            "book a flight to paris on friday",
            "book a haircut for friday at 3",
            "make dinner at 7",
        ] {
            assert!(
                !matches!(frame(s, now()), Some(CalendarFrame::Add { .. })),
                "{s}: {:?}",
                frame(s, now())
            );
        }
    }

    #[test]
    fn asking_if_busy_is_the_other_way_round() {
        for (s, busy) in [
            ("am i free tomorrow", false),
            ("am i busy tomorrow", true),
            ("do i have anything on tomorrow", true),
            ("do i have plans on friday", true),
            ("do i have anything on friday", true),
            ("is there anything on my calendar on saturday", true),
            ("is there anything in my diary tomorrow", true),
            ("any meetings tomorrow", true),
            ("do i have any appointments on monday", true),
            ("have i got any meetings on the 14th", true),
            ("anything on my calendar on friday", true),
        ] {
            match frame(s, now()) {
                Some(CalendarFrame::Free { asks_busy, .. }) => assert_eq!(asks_busy, busy, "{s}"),
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn what_is_on_a_day_asked_by_its_entries_or_its_look() {
        for (s, d) in [
            ("what meetings do i have on friday", 4),
            ("what appointments have i got tomorrow", 3),
            ("what's my schedule like today", 2),
            ("how's my calendar looking tomorrow", 3),
            ("what is my diary like on friday", 4),
        ] {
            assert_eq!(
                frame(s, now()),
                Some(CalendarFrame::Query { day: Ok(date(d)) }),
                "{s}"
            );
        }
    }

    #[test]
    fn other_sentences_are_not_calendar_commands() {
        for s in [
            "what time is it",
            "add milk to my shopping list",
            "set a timer for ten minutes",
            "what have i got",
            "what's the date today",
            "don't put the haircut in my diary",
            "remind me to call mum at 5",
            "is there anything on tv tonight",
            "any plans",
            "what meetings",
            "is there anything i can do on friday",
        ] {
            assert_eq!(frame(s, now()), None, "{s}");
        }
        // A named thing to cancel is only a candidate: the action checks
        // that the calendar has it.
        assert!(matches!(
            frame("cancel the rice timer", now()),
            Some(CalendarFrame::Cancel { .. })
        ));
    }

    #[test]
    fn bad_days_are_kept_as_the_reason() {
        match frame(
            "put a party in my calendar on the 31st of february at 8pm",
            now(),
        ) {
            Some(CalendarFrame::Add { when: Err(e), .. }) => {
                assert!(e.to_string().contains("February"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let _ = NaiveTime::MIN;
    }
}
