//! Timers, alarms and reminders by voice, over the device's one
//! [`crate::timers::Timers`] service (the same the agent's tools and
//! `earshot timers` use).
//!
//! Every action takes its arguments from the gate's frame
//! ([`crate::tree::fit_time::frame`]) on the same utterance, so what the
//! gate checked is what runs. A missing or wrong time is one short
//! sentence ("For how long?", "There's no such time as 25:00.") and
//! nothing is stored. Cancelling one named timer, or the only one, needs no
//! confirmation; "cancel all timers" asks first (phase
//! `confirm_cancel_all`), like deleting a to-do. Answers write numbers as
//! digits ("Timer set for 18 minutes.").

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Timelike};
use serde_json::{json, Value};

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::nlu::when::{say_duration, say_time, weekday_name, TimeOfDay, WhenError};
use crate::timers::{Kind, NewTimer, State, Timer, TimerError, Timers, Weekdays, When};
use crate::tree::fit::tidy;
use crate::tree::fit_time::{frame, Due, TimeFrame};

/// The phase "cancel all timers" waits in for the user's yes/no.
pub const CANCEL_ALL_PHASE: &str = "confirm_cancel_all";
/// State key holding what "cancel all" will cancel.
pub const PENDING_CANCEL_ALL: &str = "pending_cancel_all";
/// The phase "For how long?" / "For what time?" waits in for the answer.
pub const ASK_PHASE: &str = "time_question";
/// State key holding what the question is for (`{"intent", "label"}`).
pub const PENDING_TIME: &str = "pending_time";

pub struct TimerSet;
pub struct AlarmSet;
pub struct ReminderSet;
pub struct TimerList;
pub struct TimerRemaining;
pub struct TimerExtend;
pub struct TimerCancel;
pub struct TimerCancelAllRequest;
pub struct TimerCancelAllConfirm;
pub struct TimerSnooze;
/// The answer to "For how long?" / "For what time?" on the next turn.
pub struct TimeAnswer;

type Answer = Result<ActionOutput, ActionError>;

fn now() -> NaiveDateTime {
    chrono::Local::now().naive_local()
}

/// The sentence when the device has no timers service.
fn no_timers() -> Answer {
    Ok(ActionOutput::failed(
        "Timers aren't available on this device.",
    ))
}

/// The frame of `intent` for this call's utterance.
fn frame_of(intent: &str, call: &ActionCall) -> Option<TimeFrame> {
    let said = crate::tree::fit::lost_add(intent, tidy(&call.text));
    frame(intent, &said, now()).ok()
}

/// A sentence for the user, or an error for a store failure.
fn timer_error(e: TimerError) -> Answer {
    match e {
        TimerError::Store(_) | TimerError::SchedulerBusy(_) | TimerError::Conflict => {
            Err(ActionError::Timers(e.to_string()))
        }
        e => Ok(ActionOutput::failed(e.to_string())),
    }
}

fn kind_of(word: Option<&str>) -> Option<Kind> {
    word.and_then(|w| w.parse().ok())
}

/// The kinds a sentence names, in the order of the kinds (timers,
/// alarms, reminders); all three or one is what the frame already reads.
fn named_kinds(text: &str) -> Vec<Kind> {
    let t = text.to_lowercase();
    let has = |word: &str| {
        t.split(|c: char| !c.is_alphanumeric())
            .any(|w| w == word || w.strip_suffix('s') == Some(word))
    };
    [Kind::Timer, Kind::Alarm, Kind::Reminder]
        .into_iter()
        .filter(|k| has(kind_word(*k)))
        .collect()
}

fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Timer => "timer",
        Kind::Alarm => "alarm",
        Kind::Reminder => "reminder",
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// "today", "tomorrow", "on Thursday", "on December 3".
fn say_day(date: NaiveDate, today: NaiveDate) -> String {
    let ahead = (date - today).num_days();
    match ahead {
        0 => "today".into(),
        1 => "tomorrow".into(),
        2..=6 => format!("on {}", weekday_name(date.weekday())),
        _ => format!("on {}", date.format("%B %-d")),
    }
}

/// "7:00 AM tomorrow".
fn say_at(at: NaiveDateTime) -> String {
    format!(
        "{} {}",
        say_time(at.time()),
        say_day(at.date(), now().date())
    )
}

/// "every weekday", "every Monday and Wednesday" for a stored repeat.
fn say_repeat(repeat: &str) -> String {
    match repeat {
        "daily" => "every day".into(),
        "weekdays" => "every weekday".into(),
        "weekends" => "every weekend".into(),
        days => {
            let names: Vec<String> = days
                .split(',')
                .filter_map(|d| d.trim().parse::<chrono::Weekday>().ok())
                .map(|d| weekday_name(d).to_string())
                .collect();
            match names.as_slice() {
                [] => String::new(),
                [one] => format!("every {one}"),
                [init @ .., last] => format!("every {} and {last}", init.join(", ")),
            }
        }
    }
}

/// "the rice timer", "your timer", "the reminder to call mum", "your 7:00
/// AM alarm".
fn name_of(t: &Timer) -> String {
    match t.kind {
        Kind::Timer if t.label.is_empty() => "your timer".into(),
        Kind::Timer => format!("the {} timer", t.label),
        Kind::Alarm => format!("your {} alarm", say_time(t.due.naive_local().time())),
        Kind::Reminder if t.label.is_empty() => {
            format!("your {} reminder", say_time(t.due.naive_local().time()))
        }
        Kind::Reminder => format!("the reminder to {}", t.label),
    }
}

fn left(t: &Timer) -> String {
    say_duration(std::time::Duration::from_secs(t.remaining_s.max(0) as u64))
}

/// One timer as the list says it.
fn describe(t: &Timer) -> String {
    if t.state == State::Ringing {
        return format!("{} is ringing.", capitalise(&name_of(t)));
    }
    match t.kind {
        Kind::Timer => format!("{} left on {}.", left(t), name_of(t)),
        Kind::Alarm => {
            let mut s = format!("An alarm at {}", say_at(t.due.naive_local()));
            if let Some(r) = t
                .repeat
                .as_deref()
                .map(say_repeat)
                .filter(|r| !r.is_empty())
            {
                s = format!("An alarm at {} {r}", say_time(t.due.naive_local().time()));
            }
            s + "."
        }
        Kind::Reminder => {
            let what = if t.label.is_empty() {
                String::new()
            } else {
                format!(": {}", t.label)
            };
            format!("A reminder at {}{what}.", say_at(t.due.naive_local()))
        }
    }
}

/// A wrong time in a timer's words, said for a timer.
fn timer_length_error(e: &WhenError) -> String {
    match e {
        WhenError::Negative | WhenError::TooLong | WhenError::TooLarge => {
            TimerError::OutOfRange.to_string()
        }
        e => e.to_string(),
    }
}

impl Action for TimerSet {
    fn name(&self) -> &'static str {
        "timer_set"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        match wanted_timer(call) {
            Wanted::Act((d, label)) => set_timer(timers, d, &label),
            Wanted::Answered(answer) => answer,
        }
    }
    fn preview(&self, call: &ActionCall, env: &ActionEnv) -> Option<Answer> {
        if env.timers.is_none() {
            return Some(no_timers());
        }
        Some(match wanted_timer(call) {
            Wanted::Act((d, label)) => Ok(ActionOutput::said(timer_set_reply(d, &label))),
            Wanted::Answered(answer) => answer,
        })
    }
}

/// What a call asks for: something to act on, or the answer it gets
/// without acting (a question back, or why not).
enum Wanted<T> {
    Act(T),
    Answered(Answer),
}

/// The timer a `timer_set` call asks for (its length and label), or the
/// answer when it does not name one yet (a question, or why not).
fn wanted_timer(call: &ActionCall) -> Wanted<(std::time::Duration, String)> {
    let Some(f) = frame_of("timer_set", call) else {
        return Wanted::Answered(Ok(ActionOutput::failed("For how long?")));
    };
    match f.duration {
        Some(Ok(d)) => Wanted::Act((d, f.label)),
        Some(Err(e)) => Wanted::Answered(Ok(ActionOutput::failed(timer_length_error(&e)))),
        None if f.at.is_some() => Wanted::Answered(Ok(ActionOutput::failed(
            TimerError::NeedsDuration.to_string(),
        ))),
        None => Wanted::Answered(Ok(ask("For how long?", "timer_set", &f.label))),
    }
}

/// "Timer set for 5 minutes." / "Pasta timer set for 5 minutes."
fn timer_set_reply(d: std::time::Duration, label: &str) -> String {
    let what = if label.is_empty() {
        "Timer".to_string()
    } else {
        format!("{} timer", capitalise(label))
    };
    format!("{what} set for {}.", say_duration(d))
}

/// "For how long?": the question, with what it is for kept for the next
/// turn ([`TimeAnswer`]).
fn ask(question: &str, intent: &str, label: &str) -> ActionOutput {
    ActionOutput::failed(question)
        .with_phase(ASK_PHASE)
        .with_state(PENDING_TIME, json!({"intent": intent, "label": label}))
}

fn set_timer(timers: &Timers, d: std::time::Duration, label: &str) -> Answer {
    let label = (!label.is_empty()).then(|| label.to_string());
    match timers.add(NewTimer {
        kind: Kind::Timer,
        label: label.clone(),
        when: When::In(d),
        repeat: None,
    }) {
        Ok(_) => Ok(ActionOutput::said(timer_set_reply(
            d,
            label.as_deref().unwrap_or(""),
        ))),
        Err(e) => timer_error(e),
    }
}

/// The `When` and repeat for a due moment.
fn when_of(due: &Due) -> Result<(When, Option<Weekdays>), String> {
    Ok(match due {
        Due::In(d) => (When::In(*d), None),
        Due::At(at) => (When::At(*at), None),
        Due::Repeat { time, repeat } => {
            let days = Weekdays::parse(&repeat.as_contract())
                .ok_or_else(|| "I couldn't read those days.".to_string())?;
            (
                When::Next {
                    time: *time,
                    days: Some(days),
                },
                Some(days),
            )
        }
    })
}

/// "for 6:30 AM tomorrow", "for 7:00 AM every weekday", "in 20 minutes".
fn say_due(due: &Due) -> String {
    match due {
        Due::In(d) => format!("in {}", say_duration(*d)),
        Due::At(at) => format!("for {}", say_at(*at)),
        Due::Repeat { time, repeat } => format!("for {} {}", say_time(*time), repeat.spoken()),
    }
}

/// An alarm or reminder a call asks for, before it is stored.
struct Planned {
    kind: Kind,
    due: Due,
    label: Option<String>,
    when: When,
    repeat: Option<Weekdays>,
}

/// What an alarm or reminder call asks to set, or the answer when its
/// words don't name a moment yet (a question, or why not).
fn wanted_at(kind: Kind, f: &TimeFrame) -> Wanted<Planned> {
    let due = match &f.due {
        Some(Ok(d)) => d.clone(),
        Some(Err(e)) => return Wanted::Answered(Ok(ActionOutput::failed(e.to_string()))),
        None if kind == Kind::Alarm && !f.day_words.is_empty() => {
            return Wanted::Answered(Ok(ActionOutput::failed(format!(
                "What time {}?",
                f.day_words
            ))
            .with_phase(ASK_PHASE)
            .with_state(
                PENDING_TIME,
                json!({"intent": "alarm_set", "label": f.label, "day": f.day_words}),
            )))
        }
        None if kind == Kind::Alarm => {
            return Wanted::Answered(Ok(ask("For what time?", "alarm_set", &f.label)))
        }
        None => return Wanted::Answered(Ok(ActionOutput::failed("For what time?"))),
    };
    let (when, repeat) = match when_of(&due) {
        Ok(w) => w,
        Err(say) => return Wanted::Answered(Ok(ActionOutput::failed(say))),
    };
    Wanted::Act(Planned {
        kind,
        due,
        label: (!f.label.is_empty()).then(|| f.label.clone()),
        when,
        repeat,
    })
}

/// "Alarm set for 6:30 AM tomorrow.", "Okay, I'll remind you at 4:00 PM
/// today: call the dentist.": `rings_at` is the moment it will really
/// ring, said for an alarm set "in" a while.
fn set_at_reply(planned: &Planned, rings_at: NaiveDateTime) -> String {
    let due_said = match (&planned.due, planned.kind) {
        (Due::In(d), Kind::Alarm) => {
            format!("for {} (in {})", say_at(rings_at), say_duration(*d))
        }
        (due, _) => say_due(due),
    };
    match (planned.kind, &planned.label) {
        (Kind::Reminder, Some(l)) => format!("Okay, I'll remind you {due_said}: {l}.")
            .replace("remind you for ", "remind you at "),
        (Kind::Reminder, None) => format!("Reminder set {due_said}."),
        _ => format!("Alarm set {due_said}."),
    }
}

/// Alarms and reminders: a due moment from the frame, or a sentence.
fn set_at(kind: Kind, f: &TimeFrame, env: &ActionEnv) -> Answer {
    let Some(timers) = env.timers.as_ref() else {
        return no_timers();
    };
    let planned = match wanted_at(kind, f) {
        Wanted::Act(planned) => planned,
        Wanted::Answered(answer) => return answer,
    };
    match timers.add(NewTimer {
        kind,
        label: planned.label.clone(),
        when: planned.when,
        repeat: planned.repeat,
    }) {
        Ok(t) => Ok(ActionOutput::said(set_at_reply(
            &planned,
            t.due.naive_local(),
        ))),
        Err(e) => timer_error(e),
    }
}

/// What [`set_at`] would say, setting nothing: the moment an alarm set
/// "in" a while rings is counted from now, as the store will count it.
/// A store that then refuses (too many, too far) answers differently,
/// and the prepared words go unused.
fn preview_at(kind: Kind, f: &TimeFrame, env: &ActionEnv) -> Answer {
    if env.timers.is_none() {
        return no_timers();
    }
    match wanted_at(kind, f) {
        Wanted::Act(planned) => {
            let rings_at = match &planned.due {
                Due::In(d) => TimeDelta::from_std(*d)
                    .ok()
                    .and_then(|d| now().checked_add_signed(d))
                    .unwrap_or_else(now),
                _ => now(),
            };
            Ok(ActionOutput::said(set_at_reply(&planned, rings_at)))
        }
        Wanted::Answered(answer) => answer,
    }
}

impl Action for AlarmSet {
    fn name(&self) -> &'static str {
        "alarm_set"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        match frame_of("alarm_set", call) {
            Some(f) if f.moves.is_some() => move_alarm(&f, env),
            Some(f) => set_at(Kind::Alarm, &f, env),
            None => Ok(ActionOutput::failed("For what time?")),
        }
    }
    fn preview(&self, call: &ActionCall, env: &ActionEnv) -> Option<Answer> {
        match frame_of("alarm_set", call) {
            // Moving one names the alarm it moves: not worth guessing.
            Some(f) if f.moves.is_some() => None,
            Some(f) => Some(preview_at(Kind::Alarm, &f, env)),
            None => Some(Ok(ActionOutput::failed("For what time?"))),
        }
    }
}

/// "change my 7am alarm to 8": the one alarm the words name gets the new
/// time. The new alarm is set first and the old one cancelled only then,
/// so a failure loses nothing; a repeating alarm is not moved (which of
/// its days?), and several alarms are asked about.
fn move_alarm(f: &TimeFrame, env: &ActionEnv) -> Answer {
    let Some(timers) = env.timers.as_ref() else {
        return no_timers();
    };
    let which = f.moves.clone().unwrap_or_default();
    let named = ActionCall {
        text: format!("cancel my {which} alarm"),
        ..ActionCall::default()
    };
    let target = match timer_to_cancel(&named, timers) {
        Wanted::Act(target) => target,
        Wanted::Answered(answer) => {
            // The same answer, asked about moving: "Which one: …?"
            return answer.map(|out| ActionOutput {
                say: out.say.replace("cancel", "move"),
                ..out
            });
        }
    };
    if target.repeat.is_some() {
        return Ok(ActionOutput::failed(format!(
            "{} repeats, so I won't move it. To change it, cancel it and set a new one.",
            capitalise(&name_of(&target))
        )));
    }
    // "change my alarm to 8" of tomorrow's 7am alarm is tomorrow at 8,
    // not the next 8 o'clock.
    let mut f = f.clone();
    if let (false, Some(Ok(Due::At(at)))) = (f.move_day_said, &f.due) {
        let same_day = target.due.naive_local().date().and_time(at.time());
        if same_day > now() {
            f.due = Some(Ok(Due::At(same_day)));
        }
    }
    let set = set_at(Kind::Alarm, &f, env)?;
    if !set.ok {
        return Ok(set);
    }
    match timers.cancel(target.id) {
        Ok(old) => Ok(ActionOutput::said(set.say.replacen(
            "Alarm set for ",
            &format!("Moved {} to ", name_of(&old)),
            1,
        ))),
        Err(e) => timer_error(e),
    }
}

impl Action for ReminderSet {
    fn name(&self) -> &'static str {
        "reminder_set"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        match frame_of("reminder_set", call) {
            Some(f) => set_at(Kind::Reminder, &f, env),
            None => Ok(ActionOutput::failed("When should I remind you?")),
        }
    }
    fn preview(&self, call: &ActionCall, env: &ActionEnv) -> Option<Answer> {
        Some(match frame_of("reminder_set", call) {
            Some(f) => preview_at(Kind::Reminder, &f, env),
            None => Ok(ActionOutput::failed("When should I remind you?")),
        })
    }
}

/// "You have no timers." for a kind, or for all kinds.
fn none_of(kind: Option<Kind>) -> String {
    match kind {
        Some(k) => format!("You have no {}s.", kind_word(k)),
        None => "You have no timers, alarms or reminders.".into(),
    }
}

impl Action for TimerList {
    fn name(&self) -> &'static str {
        "timer_list"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let kind = frame_of("timer_list", call).and_then(|f| kind_of(f.kind));
        let all = match timers.list(kind) {
            Ok(all) => all,
            Err(e) => return timer_error(e),
        };
        if all.is_empty() {
            return Ok(ActionOutput::said(none_of(kind)));
        }
        let what = match kind {
            Some(k) => plural(all.len(), kind_word(k)),
            None => plural(all.len(), "timer, alarm or reminder")
                .replace("timer, alarm or reminders", "timers, alarms and reminders"),
        };
        let items: Vec<String> = all.iter().map(describe).collect();
        Ok(ActionOutput::said(format!(
            "You have {what}. {}",
            items.join(" ")
        )))
    }
}

/// The active ones the words name: by label (and kind), else all of the
/// kind.
fn named(timers: &Timers, kind: Kind, label: &str) -> Result<Vec<Timer>, TimerError> {
    if label.is_empty() {
        timers.list(Some(kind))
    } else {
        timers.find(&format!("{label} {}", kind_word(kind)))
    }
}

impl Action for TimerRemaining {
    fn name(&self) -> &'static str {
        "timer_remaining"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let f = frame_of("timer_remaining", call);
        let kind = f
            .as_ref()
            .and_then(|f| kind_of(f.kind))
            .unwrap_or(Kind::Timer);
        let label = f.map(|f| f.label).unwrap_or_default();
        let found = match named(timers, kind, &label) {
            Ok(found) => found,
            Err(e) => return timer_error(e),
        };
        if found.is_empty() {
            return Ok(ActionOutput::said(if label.is_empty() {
                format!("You have no {}s running.", kind_word(kind))
            } else {
                format!("You have no {label} {}.", kind_word(kind))
            }));
        }
        let items: Vec<String> = found
            .iter()
            .map(|t| match t.kind {
                Kind::Timer => describe(t),
                _ if t.state == State::Ringing => describe(t),
                _ => format!(
                    "{} goes off at {}, in {}.",
                    capitalise(&name_of(t)),
                    say_at(t.due.naive_local()),
                    left(t)
                ),
            })
            .collect();
        Ok(ActionOutput::said(capitalise(&items.join(" "))))
    }
}

/// "Which one: rice or pasta?"
fn which(found: &[Timer]) -> ActionOutput {
    let names: Vec<String> = found.iter().map(name_of).collect();
    ActionOutput::failed(format!("Which one: {}?", names.join(" or ")))
}

impl Action for TimerExtend {
    fn name(&self) -> &'static str {
        "timer_extend"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let change = match wanted_extension(call, timers) {
            Wanted::Act(change) => change,
            Wanted::Answered(answer) => return answer,
        };
        match timers.extend(change.target.id, change.delta) {
            Ok(t) => Ok(ActionOutput::said(extended_reply(&change, &t))),
            Err(e) => timer_error(e),
        }
    }
    fn preview(&self, call: &ActionCall, env: &ActionEnv) -> Option<Answer> {
        let Some(timers) = env.timers.as_ref() else {
            return Some(no_timers());
        };
        Some(match wanted_extension(call, timers) {
            Wanted::Act(change) => {
                // The timer as the store will make it, give or take the
                // moments between now and the turn (and a ringing one
                // restarts from now, not from its due time): only the
                // first sentence ("Added 5 minutes.") is prepared.
                let mut after = change.target.clone();
                after.due += change.delta;
                after.remaining_s = after.remaining_s.saturating_add(change.delta.num_seconds());
                Ok(ActionOutput::said(extended_reply(&change, &after)))
            }
            Wanted::Answered(answer) => answer,
        })
    }
}

/// The one timer a `timer_extend` call changes, and by how much.
struct Extension {
    target: Timer,
    /// Signed: negative takes time off.
    delta: TimeDelta,
    said: std::time::Duration,
    subtract: bool,
}

/// What a `timer_extend` call asks to change, or the answer when it can't
/// (no length, no such timer, several of them).
fn wanted_extension(call: &ActionCall, timers: &Timers) -> Wanted<Extension> {
    let failed = |say: String| Wanted::Answered(Ok(ActionOutput::failed(say)));
    let Some(f) = frame_of("timer_extend", call) else {
        return failed("How much time should I add?".into());
    };
    let d = match f.duration {
        Some(Ok(d)) => d,
        Some(Err(e)) => return failed(timer_length_error(&e)),
        None => return failed("How much time should I add?".into()),
    };
    let kind = kind_of(f.kind).unwrap_or(Kind::Timer);
    let found = match named(timers, kind, &f.label) {
        Ok(found) => found,
        Err(e) => return Wanted::Answered(timer_error(e)),
    };
    let target = match found.as_slice() {
        [] if f.label.is_empty() => {
            return failed(format!("You have no {} running.", kind_word(kind)))
        }
        [] => return failed(format!("You have no {} {}.", f.label, kind_word(kind))),
        [one] => one.clone(),
        many => return Wanted::Answered(Ok(which(many))),
    };
    let Ok(delta) = TimeDelta::from_std(d) else {
        return failed(TimerError::OutOfRange.to_string());
    };
    Wanted::Act(Extension {
        target,
        delta: if f.subtract { -delta } else { delta },
        said: d,
        subtract: f.subtract,
    })
}

/// "Added 5 minutes. 9 minutes left on your timer."
fn extended_reply(change: &Extension, t: &Timer) -> String {
    let verb = if change.subtract {
        format!("Took {} off.", say_duration(change.said))
    } else {
        format!("Added {}.", say_duration(change.said))
    };
    let rest = match t.kind {
        Kind::Timer => format!("{} left on {}.", left(t), name_of(t)),
        _ => format!(
            "{} is now at {}.",
            capitalise(&name_of(t)),
            say_at(t.due.naive_local())
        ),
    };
    format!("{verb} {rest}")
}

/// Whether an alarm's due time is the clock time said ("the 7am alarm").
fn at_time(t: &Timer, at: TimeOfDay) -> bool {
    let due = t.due.naive_local().time();
    let same = |x: NaiveTime| x.hour() == due.hour() && x.minute() == due.minute();
    same(at.am()) || same(at.pm())
}

impl Action for TimerCancel {
    fn name(&self) -> &'static str {
        "timer_cancel"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let target = match timer_to_cancel(call, timers) {
            Wanted::Act(target) => target,
            Wanted::Answered(answer) => return answer,
        };
        if target.state == State::Ringing {
            return match timers.stop_ringing(Some(target.id)) {
                Ok(_) => Ok(ActionOutput::said(format!("Stopped {}.", name_of(&target)))),
                Err(e) => timer_error(e),
            };
        }
        match timers.cancel(target.id) {
            Ok(t) => Ok(ActionOutput::said(format!("Cancelled {}.", name_of(&t)))),
            Err(e) => timer_error(e),
        }
    }
    fn preview(&self, call: &ActionCall, env: &ActionEnv) -> Option<Answer> {
        let Some(timers) = env.timers.as_ref() else {
            return Some(no_timers());
        };
        Some(match timer_to_cancel(call, timers) {
            Wanted::Act(t) if t.state == State::Ringing => {
                Ok(ActionOutput::said(format!("Stopped {}.", name_of(&t))))
            }
            Wanted::Act(t) => Ok(ActionOutput::said(format!("Cancelled {}.", name_of(&t)))),
            Wanted::Answered(answer) => answer,
        })
    }
}

/// The one timer a `timer_cancel` call names, or the answer when it names
/// none, or several (a question), or one that can't be cancelled alone.
fn timer_to_cancel(call: &ActionCall, timers: &Timers) -> Wanted<Timer> {
    let Some(f) = frame_of("timer_cancel", call) else {
        return Wanted::Answered(Ok(ActionOutput::failed("Which one should I cancel?")));
    };
    let kind = kind_of(f.kind).unwrap_or(Kind::Timer);
    let mut found = match named(timers, kind, &f.label) {
        Ok(found) => found,
        Err(e) => return Wanted::Answered(timer_error(e)),
    };
    if let Some(at) = f.at {
        found.retain(|t| at_time(t, at));
    }
    if let Some(day) = f.on {
        // That day's one; a repeating alarm is not cancelled for one
        // day's sake (it is listed, and asked about, below).
        let that_day: Vec<Timer> = found
            .iter()
            .filter(|t| t.due.date_naive() == day)
            .cloned()
            .collect();
        if let Some(r) = that_day.iter().find(|t| t.repeat.is_some()) {
            return Wanted::Answered(Ok(ActionOutput::failed(format!(
                    "{} repeats, so I can't cancel just that day. To cancel it for good, say: cancel the {} alarm.",
                    capitalise(&name_of(r)),
                    say_time(r.due.naive_local().time())
                ))));
        }
        found = that_day;
    }
    match found.as_slice() {
        [] if f.label.is_empty() && f.at.is_none() && f.on.is_none() => {
            Wanted::Answered(Ok(ActionOutput::failed(none_of(Some(kind)))))
        }
        [] => {
            let what = match (f.at, f.on) {
                (Some(at), _) => format!("{} at {}", kind_word(kind), say_time(at.am())),
                (None, Some(day)) => format!("{} on {}", kind_word(kind), day.format("%A")),
                (None, None) => format!("{} {}", f.label, kind_word(kind)),
            };
            Wanted::Answered(Ok(ActionOutput::failed(format!("You have no {what}."))))
        }
        [one] => Wanted::Act(one.clone()),
        many => Wanted::Answered(Ok(which(many))),
    }
}

impl Action for TimerCancelAllRequest {
    fn name(&self) -> &'static str {
        "timer_cancel_all_request"
    }
    /// Only counts; the cancelling waits for the confirmation.
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let kind = frame_of("timer_cancel_all", call).and_then(|f| kind_of(f.kind));
        // "cancel my alarms and timers": the two kinds named, not the
        // reminders as well.
        let two = named_kinds(&call.text);
        if two.len() == 2 {
            let mut n = 0;
            for k in &two {
                match timers.list(Some(*k)) {
                    Ok(some) => n += some.len(),
                    Err(e) => return timer_error(e),
                }
            }
            let what = format!("{}s and {}s", kind_word(two[0]), kind_word(two[1]));
            if n == 0 {
                return Ok(ActionOutput::failed(format!("You have no {what}.")));
            }
            let words: Vec<&str> = two.iter().map(|k| kind_word(*k)).collect();
            return Ok(ActionOutput::said(format!(
                "Cancel {} of your {what}? Say yes or no.",
                if n == 1 {
                    "the one".to_string()
                } else {
                    format!("all {n}")
                }
            ))
            .with_state(PENDING_CANCEL_ALL, json!({"kinds": words, "count": n}))
            .with_phase(CANCEL_ALL_PHASE));
        }
        let n = match timers.list(kind) {
            Ok(all) => all.len(),
            Err(e) => return timer_error(e),
        };
        if n == 0 {
            return Ok(ActionOutput::failed(none_of(kind)));
        }
        let what = match kind {
            Some(k) => plural(n, kind_word(k)),
            None => format!("{n} timers, alarms and reminders"),
        };
        let all = if n == 1 { "" } else { "all " };
        Ok(
            ActionOutput::said(format!("Cancel {all}{what}? Say yes or no."))
                .with_state(
                    PENDING_CANCEL_ALL,
                    json!({"kind": kind.map(kind_word), "count": n}),
                )
                .with_phase(CANCEL_ALL_PHASE),
        )
    }
}

impl Action for TimerCancelAllConfirm {
    fn name(&self) -> &'static str {
        "timer_cancel_all_confirm"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let Some(pending) = call.state.get(PENDING_CANCEL_ALL) else {
            return Ok(ActionOutput::failed(
                "There's nothing waiting to be cancelled.",
            ));
        };
        if let Some(kinds) = pending.get("kinds").and_then(Value::as_array) {
            let kinds: Vec<Kind> = kinds.iter().filter_map(|k| kind_of(k.as_str())).collect();
            let mut n = 0;
            for k in &kinds {
                match timers.cancel_all(Some(*k)) {
                    Ok(done) => n += done,
                    Err(e) => return timer_error(e),
                }
            }
            let words: Vec<String> = kinds
                .iter()
                .map(|k| format!("{}s", kind_word(*k)))
                .collect();
            return Ok(ActionOutput::said(format!(
                "Cancelled {n} of your {}.",
                words.join(" and ")
            )));
        }
        let kind = kind_of(pending.get("kind").and_then(Value::as_str));
        match timers.cancel_all(kind) {
            Ok(n) => {
                let what = match kind {
                    Some(k) => plural(n, kind_word(k)),
                    None => plural(n, "timer, alarm or reminder")
                        .replace("timer, alarm or reminders", "timers, alarms and reminders"),
                };
                Ok(ActionOutput::said(format!("Cancelled {what}.")))
            }
            Err(e) => timer_error(e),
        }
    }
}

impl Action for TimerSnooze {
    fn name(&self) -> &'static str {
        "timer_snooze"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let f = frame_of("timer_snooze", call);
        let d = match f.and_then(|f| f.duration) {
            Some(Ok(d)) => d,
            Some(Err(e)) => return Ok(ActionOutput::failed(e.to_string())),
            None => std::time::Duration::from_secs(timers.config().snooze_secs),
        };
        let ringing: Vec<Timer> = match timers.list(None) {
            Ok(all) => all
                .into_iter()
                .filter(|t| t.state == State::Ringing)
                .collect(),
            Err(e) => return timer_error(e),
        };
        if ringing.is_empty() {
            return Ok(ActionOutput::failed("Nothing is ringing right now."));
        }
        for t in &ringing {
            if let Err(e) = timers.snooze(t.id, d) {
                return timer_error(e);
            }
        }
        Ok(ActionOutput::said(format!(
            "Snoozed for {}.",
            say_duration(d)
        )))
    }
}

impl Action for TimeAnswer {
    fn name(&self) -> &'static str {
        "time_answer"
    }
    fn changes_state(&self) -> bool {
        true
    }
    /// Fails silently (an empty sentence) when the utterance is not an
    /// answer, so the tree handles it as a new request.
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Answer {
        let Some(timers) = env.timers.as_ref() else {
            return no_timers();
        };
        let Some(pending) = call.state.get(PENDING_TIME) else {
            return Ok(ActionOutput::failed(""));
        };
        let label = pending
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let text = tidy(&call.text);
        // An answer is short: "ten minutes", "for 7am", "at six tomorrow".
        if text.split_whitespace().count() > 8 {
            return Ok(ActionOutput::failed(""));
        }
        match pending.get("intent").and_then(Value::as_str) {
            Some("timer_set") => match crate::nlu::when::duration_in(&text) {
                Ok(Some(d)) => set_timer(timers, d.value, &label),
                Err(e) => Ok(ActionOutput::said(timer_length_error(&e))),
                Ok(None) => Ok(ActionOutput::failed("")),
            },
            Some("alarm_set") => {
                // "What time tomorrow morning?" "Seven." is read as "seven
                // tomorrow morning", unless the answer names its own day.
                let day = pending.get("day").and_then(Value::as_str).unwrap_or("");
                // A bare "seven" is a clock time here, as "at seven"; "in
                // ten minutes" keeps its own reading.
                let lower = text.to_lowercase();
                let bare = [
                    crate::nlu::when::time_in(&lower).is_ok_and(|t| t.is_none()),
                    crate::nlu::when::delay_in(&lower).is_ok_and(|t| t.is_none()),
                    crate::nlu::when::duration_in(&lower).is_ok_and(|t| t.is_none()),
                ];
                let text = if bare.iter().all(|b| *b) {
                    format!("at {text}")
                } else {
                    text
                };
                let said = if day.is_empty()
                    || crate::nlu::when::day_in(&text.to_lowercase(), now().date())
                        .is_ok_and(|d| d.is_some())
                {
                    text.clone()
                } else {
                    format!("{text} {day}")
                };
                let f = TimeFrame {
                    kind: Some("alarm"),
                    label,
                    due: crate::tree::fit_time::due_in(&said, now()),
                    ..crate::tree::fit_time::TimeFrame::empty()
                };
                match f.due {
                    None => Ok(ActionOutput::failed("")),
                    Some(Err(e)) => Ok(ActionOutput::said(e.to_string())),
                    Some(Ok(_)) => set_at(Kind::Alarm, &f, env),
                }
            }
            _ => Ok(ActionOutput::failed("")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::timers::TimersConfig;

    fn env() -> (tempfile::TempDir, ActionEnv, Timers) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let paths = crate::paths::Paths::new(dir.path(), dir.path());
        let timers = Timers::new(&TimersConfig::default(), &paths, store.clone());
        let mut env = ActionEnv::local(store, "user-1");
        env.timers = Some(timers.clone());
        (dir, env, timers)
    }

    fn run(action: &dyn Action, text: &str, env: &ActionEnv) -> ActionOutput {
        let call = ActionCall {
            text: text.into(),
            ..Default::default()
        };
        action.run(&call, env).unwrap()
    }

    #[test]
    fn set_name_ask_and_refuse_with_a_sentence() {
        let (_dir, env, timers) = env();
        let out = run(&TimerSet, "set a rice timer for 18 minutes", &env);
        assert_eq!(out.say, "Rice timer set for 18 minutes.");
        assert!(out.ok);
        let out = run(&TimerSet, "set a timer", &env);
        assert_eq!(out.say, "For how long?");
        assert_eq!(out.phase.as_deref(), Some(ASK_PHASE));
        let out = run(&TimerSet, "set a timer for minus five minutes", &env);
        assert_eq!(out.say, "Timers can run from one second to 24 hours.");
        let long = "x".repeat(5000);
        let out = run(
            &ReminderSet,
            &format!("remind me in 5 minutes to {long}"),
            &env,
        );
        assert!(!out.ok && out.say.contains("too long"), "{}", out.say);
        assert_eq!(timers.list(None).unwrap().len(), 1, "nothing stored half");
    }

    #[test]
    fn an_alarm_moves_to_a_new_time_and_only_that_one() {
        let (_dir, env, timers) = env();
        let none = run(&AlarmSet, "change my alarm to 8", &env);
        assert_eq!(none.say, "You have no alarms.");
        run(&AlarmSet, "set an alarm for 7am", &env);
        let moved = run(&AlarmSet, "change my alarm to 8", &env);
        assert!(
            moved.say.starts_with("Moved your 7:00 AM alarm to 8:00 AM"),
            "{}",
            moved.say
        );
        let all = timers.list(None).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0].due.naive_local().time(),
            NaiveTime::from_hms_opt(8, 0, 0).unwrap()
        );
        run(&AlarmSet, "set an alarm for 6:30am", &env);
        let ask = run(&AlarmSet, "move my alarm to 9", &env);
        assert!(ask.say.starts_with("Which one:") && !ask.ok, "{}", ask.say);
        assert_eq!(timers.list(None).unwrap().len(), 2, "nothing moved");
        let moved = run(&AlarmSet, "move the 6:30 alarm to 6:45", &env);
        assert!(
            moved.say.starts_with("Moved your 6:30 AM alarm to 6:45 AM"),
            "{}",
            moved.say
        );
        // An alarm moved keeps its day when the new time names none.
        let (_d2, env2, timers2) = self::env();
        run(
            &AlarmSet,
            "set an alarm for 7am the day after tomorrow",
            &env2,
        );
        let day = timers2.list(None).unwrap()[0].due.date_naive();
        run(&AlarmSet, "change my alarm to 8", &env2);
        let moved = &timers2.list(None).unwrap()[0];
        assert_eq!(moved.due.date_naive(), day);
        assert_eq!(
            moved.due.naive_local().time(),
            NaiveTime::from_hms_opt(8, 0, 0).unwrap()
        );
        run(&AlarmSet, "set an alarm for 7am every weekday", &env);
        let repeats = run(&AlarmSet, "change my 7am alarm to 7:30", &env);
        assert!(repeats.say.contains("repeats"), "{}", repeats.say);
        assert_eq!(timers.list(None).unwrap().len(), 3);
    }

    #[test]
    fn cancelling_alarms_and_timers_keeps_the_reminders() {
        let (_dir, env, timers) = env();
        run(&TimerSet, "set a timer for 10 minutes", &env);
        run(&AlarmSet, "set an alarm for 7am", &env);
        run(&ReminderSet, "remind me in an hour to call mum", &env);
        let ask = run(&TimerCancelAllRequest, "cancel my alarms and timers", &env);
        assert_eq!(
            ask.say,
            "Cancel all 2 of your timers and alarms? Say yes or no."
        );
        assert_eq!(timers.list(None).unwrap().len(), 3, "asks first");
        let yes = ActionCall {
            text: "yes".into(),
            state: ask.set_state.clone(),
            ..Default::default()
        };
        let done = TimerCancelAllConfirm.run(&yes, &env).unwrap();
        assert_eq!(done.say, "Cancelled 2 of your timers and alarms.");
        let left = timers.list(None).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].kind, Kind::Reminder);
        // One kind, or none named: as before.
        let ask = run(&TimerCancelAllRequest, "cancel all my reminders", &env);
        assert_eq!(ask.say, "Cancel 1 reminder? Say yes or no.");
    }

    #[test]
    fn an_alarm_for_a_day_without_a_time_asks_the_time_and_keeps_the_day() {
        let (_dir, env, timers) = env();
        let out = run(&AlarmSet, "set an alarm for tomorrow morning", &env);
        assert_eq!(out.say, "What time tomorrow morning?");
        assert_eq!(out.phase.as_deref(), Some(ASK_PHASE));
        assert!(timers.list(None).unwrap().is_empty(), "no alarm guessed");
        let answer = ActionCall {
            text: "seven".into(),
            state: out.set_state.clone(),
            ..Default::default()
        };
        let set = TimeAnswer.run(&answer, &env).unwrap();
        let tomorrow = (now().date() + chrono::Days::new(1))
            .format("%A")
            .to_string();
        assert!(set.say.starts_with("Alarm set for 7:00 AM"), "{}", set.say);
        assert!(
            set.say.contains("tomorrow") || set.say.contains(&tomorrow),
            "{}",
            set.say
        );
        assert_eq!(timers.list(None).unwrap().len(), 1);
        // "For what time?" answered with a delay keeps the delay.
        let out = run(&AlarmSet, "set an alarm", &env);
        assert_eq!(out.say, "For what time?");
        let answer = ActionCall {
            text: "in ten minutes".into(),
            state: out.set_state.clone(),
            ..Default::default()
        };
        let set = TimeAnswer.run(&answer, &env).unwrap();
        assert!(set.say.contains("in 10 minutes"), "{}", set.say);
    }

    #[test]
    fn a_preview_says_what_setting_would_and_sets_nothing() {
        let (_dir, env, timers) = env();
        let said = |text: &str| {
            let call = ActionCall {
                text: text.into(),
                ..Default::default()
            };
            TimerSet.preview(&call, &env).unwrap().unwrap().say
        };
        for text in [
            "set a rice timer for 18 minutes",
            "set a timer for an hour and a half",
            "set a timer",
            "set a timer for minus five minutes",
        ] {
            let preview = said(text);
            assert!(timers.list(None).unwrap().is_empty(), "{text}: set");
            let (_d, fresh, _t) = self::env();
            assert_eq!(preview, run(&TimerSet, text, &fresh).say, "{text}");
        }
    }

    #[test]
    fn alarm_reminder_and_extend_previews_say_what_acting_would_and_change_nothing() {
        let (_dir, env, timers) = env();
        let preview = |action: &dyn Action, text: &str| {
            let call = ActionCall {
                text: text.into(),
                ..Default::default()
            };
            action.preview(&call, &env).unwrap().unwrap().say
        };
        let cases: [(&dyn Action, &str); 11] = [
            (&AlarmSet, "set an alarm for 7am tomorrow"),
            (&AlarmSet, "wake me at quarter to seven on friday"),
            (&ReminderSet, "remind me in 20 minutes to check the oven"),
            (&ReminderSet, "in an hour remind me to move the car"),
            (&TimerExtend, "take two minutes off the timer"),
            (&AlarmSet, "wake me up at 6:15 every weekday"),
            (&AlarmSet, "set an alarm for tomorrow"),
            (&ReminderSet, "remind me to call the dentist at 4"),
            (&ReminderSet, "remind me to take the bins out tonight"),
            (&ReminderSet, "remind me to water the plants"),
            (&TimerExtend, "add five more minutes to the timer"),
        ];
        for (action, text) in cases {
            let said = preview(action, text);
            assert!(timers.list(None).unwrap().is_empty(), "{text}: set");
            let (_d, fresh, _t) = self::env();
            assert_eq!(said, run(action, text, &fresh).say, "{text}");
        }
        // Moving an alarm is not guessed.
        let call = ActionCall {
            text: "change my alarm to 8".into(),
            ..Default::default()
        };
        assert!(AlarmSet.preview(&call, &env).is_none());

        run(&TimerSet, "set a pasta timer for 10 minutes", &env);
        let dues = || -> Vec<_> { timers.list(None).unwrap().iter().map(|t| t.due).collect() };
        let before = dues();
        let said = preview(&TimerExtend, "add five minutes to the pasta timer");
        // A delay's due is read off the monotonic clock: the same to a
        // fraction of a second.
        let moved_ms = |now: Vec<chrono::DateTime<chrono::FixedOffset>>| {
            (now[0] - before[0]).num_milliseconds()
        };
        assert!(moved_ms(dues()).abs() < 1000, "extended");
        assert!(said.starts_with("Added 5 minutes. "), "{said}");
        let done = run(&TimerExtend, "add five minutes to the pasta timer", &env).say;
        let first = |s: &str| s.split(". ").next().unwrap_or_default().to_string();
        assert_eq!(first(&said), first(&done));
        assert!(
            (299_000..301_000).contains(&moved_ms(dues())),
            "not extended"
        );
    }

    #[test]
    fn a_cancel_preview_names_the_timer_and_cancels_nothing() {
        let (_dir, env, timers) = env();
        let preview = |text: &str| {
            let call = ActionCall {
                text: text.into(),
                ..Default::default()
            };
            TimerCancel.preview(&call, &env).unwrap().unwrap().say
        };
        assert_eq!(preview("cancel the timer"), none_of(Some(Kind::Timer)));
        run(&TimerSet, "set a rice timer for 10 minutes", &env);
        run(&TimerSet, "set a pasta timer for 5 minutes", &env);
        assert!(preview("cancel the timer").starts_with("Which one"));
        let said = preview("cancel the pasta timer");
        assert_eq!(timers.list(None).unwrap().len(), 2, "cancelled");
        assert_eq!(said, run(&TimerCancel, "cancel the pasta timer", &env).say);
        assert_eq!(timers.list(None).unwrap().len(), 1);
    }

    #[test]
    fn cancel_one_named_or_the_only_one_else_ask_which() {
        let (_dir, env, timers) = env();
        run(&TimerSet, "set a rice timer for 10 minutes", &env);
        run(&TimerSet, "set a pasta timer for 5 minutes", &env);
        let out = run(&TimerCancel, "cancel the timer", &env);
        assert!(!out.ok && out.say.starts_with("Which one"), "{}", out.say);
        assert_eq!(timers.list(None).unwrap().len(), 2);
        let out = run(&TimerCancel, "cancel the pasta timer", &env);
        assert_eq!(out.say, "Cancelled the pasta timer.");
        let out = run(&TimerExtend, "add two minutes", &env);
        assert!(
            out.say.starts_with("Added 2 minutes. 12 minutes"),
            "{}",
            out.say
        );
        let out = run(&TimerCancel, "stop the timer", &env);
        assert_eq!(out.say, "Cancelled the rice timer.");
        let out = run(&TimerCancel, "cancel the eggs timer", &env);
        assert_eq!(out.say, "You have no eggs timer.");
        assert!(timers.list(None).unwrap().is_empty());
        let out = run(&TimerSnooze, "snooze", &env);
        assert_eq!(out.say, "Nothing is ringing right now.");
    }

    #[test]
    fn an_alarm_is_cancelled_by_its_day() {
        let (_dir, env, timers) = env();
        let day = |n: i64| chrono::Local::now().date_naive() + chrono::Duration::days(n);
        let name = |n: i64| day(n).format("%A").to_string().to_lowercase();
        run(&AlarmSet, "set an alarm for 6am every day", &env);
        run(
            &AlarmSet,
            &format!("set an alarm for 8:15 am on {}", name(3)),
            &env,
        );
        run(
            &AlarmSet,
            &format!("set an alarm for 9:30 am on {}", name(4)),
            &env,
        );
        assert_eq!(timers.list(None).unwrap().len(), 3);
        let out = run(&TimerCancel, &format!("turn off {}'s alarm", name(3)), &env);
        assert_eq!(out.say, "Cancelled your 8:15 AM alarm.", "{}", out.say);
        // The daily one is next due today or tomorrow, but is not cancelled
        // for one day.
        let daily = timers.list(None).unwrap();
        let daily = daily.iter().find(|t| t.repeat.is_some()).unwrap();
        let which_day = if daily.due.date_naive() == day(0) {
            "today"
        } else {
            "tomorrow"
        };
        let out = run(&TimerCancel, &format!("cancel {which_day}'s alarm"), &env);
        assert!(!out.ok && out.say.contains("repeats"), "{}", out.say);
        let out = run(
            &TimerCancel,
            &format!("cancel the alarm on {}", name(5)),
            &env,
        );
        assert!(out.say.starts_with("You have no alarm on"), "{}", out.say);
        assert_eq!(timers.list(None).unwrap().len(), 2);
    }
}
