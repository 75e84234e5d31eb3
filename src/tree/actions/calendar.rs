//! The calendar by voice, with no LLM and no network: the frames of
//! [`crate::tree::fit_calendar`] acted on over the device's calendar (the
//! same one the agent's tools and `earshot calendar` use; the sync sends
//! changes to the CalDAV server later).
//!
//! Two actions, so a dry run changes nothing: `calendar_read` answers the
//! questions ("what have I got on Thursday", "am I free…") and, for a
//! change, only checks it can be done and sets `state.calendar_write`;
//! `calendar_write` (skipped under dry-run) then makes the change. A
//! sentence without a calendar shape, or one naming an event the calendar
//! does not have ("cancel the rice timer"), fails silently so the walk goes
//! on to the classifier.

use chrono::{DateTime, Duration, FixedOffset, Local, NaiveDate, NaiveTime};
use serde_json::Value;

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::calendar::{self, CalendarError, EventChange, NewEvent, Occurrence};
use crate::nlu::when::{self, Day, DayRef, PartOfDay};
use crate::tree::fit_calendar::{frame, CalendarFrame};

/// The state key `calendar_read` sets when a change should follow.
pub const WRITE_FLAG: &str = "calendar_write";

fn day_words(d: NaiveDate, today: NaiveDate) -> String {
    let days = (d - today).num_days();
    match days {
        0 => "today".into(),
        1 => "tomorrow".into(),
        2..=6 => format!("on {}", d.format("%A")),
        _ => format!("on {}", d.format("%A %-d %B")),
    }
}

fn at_words(t: &DateTime<FixedOffset>) -> String {
    when::say_time(t.time())
}

/// "Lunch at 1:00 PM, and Dentist all day"; with `today`, each event
/// says its day too ("Lunch on Thursday at 1:00 PM"), for answers that
/// span several days.
fn listing(events: &[Occurrence], today: Option<NaiveDate>) -> String {
    let parts: Vec<String> = events
        .iter()
        .map(|o| {
            let day = today
                .map(|t| format!(" {}", day_words(o.start.date_naive(), t)))
                .unwrap_or_default();
            if o.all_day {
                format!("{}{day} all day", o.title)
            } else {
                format!("{}{day} at {}", o.title, at_words(&o.start))
            }
        })
        .collect();
    match parts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

/// How far "when is my next meeting" looks.
const NEXT_LOOKS_AHEAD_DAYS: i64 = 60;

/// The local hours a part of the day covers (no part: the whole day, so an
/// evening dinner is not "free").
fn part_hours(part: Option<PartOfDay>) -> (u32, u32, &'static str) {
    match part {
        Some(PartOfDay::Morning) => (6, 12, " morning"),
        Some(PartOfDay::Afternoon) => (12, 17, " afternoon"),
        Some(PartOfDay::Evening) => (17, 22, " evening"),
        Some(PartOfDay::Night) => (21, 24, " night"),
        None => (0, 24, ""),
    }
}

fn at_hour(d: NaiveDate, h: u32) -> chrono::DateTime<chrono::Utc> {
    let base = calendar::day_start(d);
    base + Duration::hours(i64::from(h))
}

fn sentence(e: CalendarError) -> String {
    match e {
        CalendarError::Ambiguous(titles) => {
            format!("Which one do you mean: {}?", titles.join(" or "))
        }
        other => format!("I couldn't do that in the calendar: {other}."),
    }
}

/// Capitalised for the calendar ("haircut" → "Haircut").
fn titled(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Answers calendar questions; for a change checks it and flags it.
pub struct CalendarRead;

impl Action for CalendarRead {
    fn name(&self) -> &'static str {
        "calendar_read"
    }

    fn changes_state(&self) -> bool {
        false
    }

    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let now = Local::now();
        let today = now.date_naive();
        let Some(f) = frame(&call.text, now.naive_local()) else {
            return Ok(ActionOutput::failed(""));
        };
        let cal = &env.calendar;
        let flag = |out: ActionOutput| out.with_state(WRITE_FLAG, Value::Bool(true));
        let mut out = match f {
            CalendarFrame::Query { day: Err(e) } | CalendarFrame::Free { day: Err(e), .. } => {
                ActionOutput::said(e.to_string())
            }
            CalendarFrame::Query { day: Ok(d) } => {
                match cal.list(calendar::day_start(d), calendar::day_start(d + Duration::days(1))) {
                    Ok(events) if events.is_empty() => ActionOutput::said(format!(
                        "You have nothing in your calendar {}.",
                        day_words(d, today)
                    )),
                    Ok(events) => ActionOutput::said(format!(
                        "{} you have {}.",
                        titled(&day_words(d, today)),
                        listing(&events, None)
                    )),
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
            CalendarFrame::Span { from, to, said } => {
                match cal.list(calendar::day_start(from), calendar::day_start(to)) {
                    Ok(events) if events.is_empty() => {
                        ActionOutput::said(format!("You have nothing in your calendar {said}."))
                    }
                    Ok(events) => ActionOutput::said(format!(
                        "{} you have {}.",
                        titled(said),
                        listing(&events, Some(today))
                    )),
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
            CalendarFrame::Next => {
                let from = now.with_timezone(&chrono::Utc);
                match cal.list(from, from + Duration::days(NEXT_LOOKS_AHEAD_DAYS)) {
                    Ok(events) => match events.iter().find(|o| o.start >= from) {
                        Some(next) => ActionOutput::said(format!(
                            "Next in your calendar: {}.",
                            listing(std::slice::from_ref(next), Some(today))
                        )),
                        None => ActionOutput::said(format!(
                            "You have nothing in your calendar in the next {NEXT_LOOKS_AHEAD_DAYS} days."
                        )),
                    },
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
            CalendarFrame::Free {
                day: Ok(d),
                part,
                asks_busy,
            } => {
                let (from, to, part_name) = part_hours(part);
                let when = format!("{}{part_name}", day_words(d, today));
                match cal.list(at_hour(d, from), at_hour(d, to)) {
                    Ok(events) => {
                        let busy: Vec<Occurrence> = events.into_iter().filter(|o| !o.all_day).collect();
                        ActionOutput::said(match (busy.is_empty(), asks_busy) {
                            (true, false) => format!("Yes, you're free {when}."),
                            (true, true) => format!("No, you have nothing {when}."),
                            (false, false) => format!("No, {when} you have {}.", listing(&busy, None)),
                            (false, true) => format!("Yes, {when} you have {}.", listing(&busy, None)),
                        })
                    }
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
            CalendarFrame::Add { when: Err(e), .. } => ActionOutput::said(e.to_string()),
            CalendarFrame::Add { title, when: Ok(None) } => ActionOutput::said(format!(
                "When is {title}? Say it with a day and a time, like: put {title} in my diary for Thursday at 11am."
            )),
            CalendarFrame::Add { when: Ok(Some(_)), .. } => flag(ActionOutput::said("")),
            CalendarFrame::Move { title, .. } | CalendarFrame::Cancel { title } => {
                match cal.find(&title) {
                    Ok(_) => flag(ActionOutput::said("")),
                    // Not an event: not a calendar sentence after all.
                    Err(CalendarError::NotFound(_)) => ActionOutput::failed(""),
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
        };
        // An answer: no change follows (a stale flag is cleared).
        if out.ok && !out.set_state.contains_key(WRITE_FLAG) {
            out.set_state.insert(WRITE_FLAG.into(), Value::Null);
        }
        Ok(out)
    }
}

/// Makes the change `calendar_read` flagged.
pub struct CalendarWrite;

impl Action for CalendarWrite {
    fn name(&self) -> &'static str {
        "calendar_write"
    }

    fn changes_state(&self) -> bool {
        true
    }

    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let now = Local::now();
        let today = now.date_naive();
        let cal = &env.calendar;
        let clear = |out: ActionOutput| out.with_state(WRITE_FLAG, Value::Null);
        let Some(f) = frame(&call.text, now.naive_local()).filter(CalendarFrame::changes) else {
            return Ok(clear(ActionOutput::failed("")));
        };
        let out = match f {
            CalendarFrame::Add {
                title,
                when: Ok(Some(at)),
            } => {
                let Some(start) = calendar::ical::at_local(&rrule::Tz::LOCAL, at) else {
                    return Ok(clear(ActionOutput::said("That time doesn't exist here.")));
                };
                let start = start.with_timezone(&chrono::Utc);
                match cal.add(&NewEvent {
                    title: titled(&title),
                    start,
                    end: start + Duration::hours(1),
                    location: String::new(),
                }) {
                    Ok(o) => ActionOutput::said(format!(
                        "I've put {title} in your calendar {} at {}.",
                        day_words(o.start.date_naive(), today),
                        at_words(&o.start)
                    )),
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
            CalendarFrame::Move { title, time, day } => {
                let event = match cal.event(&title) {
                    Ok(e) => e,
                    Err(e) => return Ok(clear(ActionOutput::said(sentence(e)))),
                };
                let new_day = match day {
                    Some(Ok(d)) => d,
                    Some(Err(e)) => return Ok(clear(ActionOutput::said(e.to_string()))),
                    None => event.start.date_naive(),
                };
                let new_time: NaiveTime = match time {
                    None => event.start.time(),
                    // "move dinner (7 pm) to 8": the 8 nearest the event's
                    // own time, 8 pm — never 8 am by a fixed rule.
                    Some(t @ when::TimeOfDay::Either { .. }) => {
                        let was = event.start.time();
                        let gap = |x: NaiveTime| (x - was).num_minutes().abs();
                        let (am, pm) = (t.am(), t.pm());
                        let pick = if gap(am) <= gap(pm) { am } else { pm };
                        let other = if pick == am { pm } else { am };
                        let ahead = |x: NaiveTime| new_day.and_time(x) > now.naive_local();
                        if ahead(pick) {
                            pick
                        } else if ahead(other) {
                            other
                        } else {
                            return Ok(clear(ActionOutput::said(
                                when::WhenError::Past.to_string(),
                            )));
                        }
                    }
                    Some(t) => {
                        let day = Day {
                            day: DayRef::Date(new_day),
                            part: None,
                            weekday_name: false,
                        };
                        match when::resolve(
                            Some(t),
                            Some(&day),
                            now.naive_local(),
                            when::Prefer::Next,
                        ) {
                            Some(Ok(when::Resolved::At(at))) => at.time(),
                            Some(Err(e)) => return Ok(clear(ActionOutput::said(e.to_string()))),
                            _ => t.pm(),
                        }
                    }
                };
                let Some(start) =
                    calendar::ical::at_local(&rrule::Tz::LOCAL, new_day.and_time(new_time))
                else {
                    return Ok(clear(ActionOutput::said("That time doesn't exist here.")));
                };
                let change = EventChange {
                    start: Some(start.with_timezone(&chrono::Utc)),
                    ..Default::default()
                };
                match cal.update(&event.id.to_string(), &change) {
                    Ok(o) => ActionOutput::said(format!(
                        "I've moved {} to {} at {}.",
                        o.title,
                        day_words(o.start.date_naive(), today).trim_start_matches("on "),
                        at_words(&o.start)
                    )),
                    Err(e) => ActionOutput::said(sentence(e)),
                }
            }
            CalendarFrame::Cancel { title } => match cal.remove(&title) {
                Ok((_, removed)) => ActionOutput::said(format!("I've cancelled {removed}.")),
                Err(e) => ActionOutput::said(sentence(e)),
            },
            _ => ActionOutput::failed(""),
        };
        Ok(clear(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn run(action: &dyn Action, env: &ActionEnv, text: &str) -> ActionOutput {
        let call = ActionCall {
            text: text.into(),
            ..Default::default()
        };
        action.run(&call, env).unwrap()
    }

    #[test]
    fn a_week_and_the_next_event_by_voice() {
        use chrono::Datelike;
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let today = Local::now().date_naive();
        let nothing = run(&CalendarRead, &env, "When is my next meeting?");
        assert_eq!(
            nothing.say,
            "You have nothing in your calendar in the next 60 days."
        );
        // Wednesday of next week, said as a date.
        let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
        let wednesday = monday + Duration::days(9);
        let on = format!(
            "put the dentist in my diary for {} {} at 3pm",
            wednesday.format("%B"),
            wednesday.day()
        );
        assert!(run(&CalendarWrite, &env, &on).say.starts_with("I've put"));
        let week = run(&CalendarRead, &env, "What's on my calendar next week?");
        assert!(
            week.say.starts_with("Next week you have Dentist on ")
                && week.say.ends_with("at 3:00 PM."),
            "{}",
            week.say
        );
        let this_week = run(&CalendarRead, &env, "do I have anything this week");
        assert_eq!(
            this_week.say,
            "You have nothing in your calendar this week."
        );
        let next = run(&CalendarRead, &env, "what's my next appointment");
        assert!(
            next.say.starts_with("Next in your calendar: Dentist on "),
            "{}",
            next.say
        );
    }

    #[test]
    fn add_ask_move_and_cancel_by_voice() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let read = run(
            &CalendarRead,
            &env,
            "put a haircut in my diary for next Thursday at 11am",
        );
        assert!(
            read.ok && read.set_state.get(WRITE_FLAG) == Some(&Value::Bool(true)),
            "{read:?}"
        );
        assert!(
            env.calendar
                .list(
                    calendar::day_start(Local::now().date_naive()),
                    calendar::day_start(Local::now().date_naive() + Duration::days(15))
                )
                .unwrap()
                .is_empty(),
            "read changes nothing"
        );
        let wrote = run(
            &CalendarWrite,
            &env,
            "put a haircut in my diary for next Thursday at 11am",
        );
        assert!(
            wrote.say.starts_with("I've put haircut in your calendar"),
            "{}",
            wrote.say
        );
        assert!(wrote.say.ends_with("at 11:00 AM."), "{}", wrote.say);
        let asked = run(&CalendarRead, &env, "what have I got next Thursday");
        assert!(asked.say.contains("Haircut at 11:00 AM"), "{}", asked.say);
        let free = run(&CalendarRead, &env, "am I free next Thursday afternoon");
        assert!(free.say.starts_with("Yes, you're free"), "{}", free.say);
        let moved = run(&CalendarWrite, &env, "move the haircut to 12");
        assert!(moved.say.contains("at 12:00 PM"), "{}", moved.say);
        // An hour without am/pm is the one nearest the event's own time.
        run(
            &CalendarWrite,
            &env,
            "put dinner with Alex in my diary for next Thursday at 7pm",
        );
        let moved = run(&CalendarWrite, &env, "move dinner with alex to 8");
        assert!(moved.say.contains("at 8:00 PM"), "{}", moved.say);
        run(
            &CalendarWrite,
            &env,
            "put breakfast with Kim in my diary for next Thursday at 8am",
        );
        let moved = run(&CalendarWrite, &env, "move breakfast with kim to 9");
        assert!(moved.say.contains("at 9:00 AM"), "{}", moved.say);
        run(&CalendarWrite, &env, "cancel breakfast with kim");
        let asked = run(&CalendarRead, &env, "do I have anything on next Thursday");
        assert!(
            asked.say.starts_with("Yes,") && asked.say.contains("Dinner with Alex at 8:00 PM"),
            "{}",
            asked.say
        );
        run(&CalendarWrite, &env, "cancel dinner with alex");
        let busy = run(&CalendarRead, &env, "am I free next Thursday afternoon");
        assert!(
            busy.say.starts_with("No,") && busy.say.contains("Haircut"),
            "{}",
            busy.say
        );
        // Not an event: the walk goes on to the classifier.
        let timer = run(&CalendarRead, &env, "cancel the rice timer");
        assert!(!timer.ok && timer.say.is_empty());
        assert!(!run(&CalendarRead, &env, "what time is it").ok);
        let gone = run(&CalendarWrite, &env, "cancel the haircut");
        assert_eq!(gone.say, "I've cancelled Haircut.");
        let feb = run(
            &CalendarRead,
            &env,
            "put a party in my calendar on the 31st of february at 8pm",
        );
        assert!(
            feb.ok && feb.set_state.get(WRITE_FLAG) == Some(&Value::Null),
            "{feb:?}"
        );
        assert!(feb.say.contains("February"), "{}", feb.say);
    }
}
