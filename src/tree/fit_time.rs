//! The time frames of the no-wrong-action gate ([`super::fit`]): timers,
//! alarms and reminders.
//!
//! Same rule as every frame: an intent runs only when the words really ask
//! for it, and the action takes its arguments from the same parse. Each
//! frame reads the utterance once with [`crate::nlu::when`] (the one time
//! parser, over the one number parser), replaces what it found by
//! placeholders (`QDUR`, `QDELAY`, `QTIME`, `QDAY`) and matches the sentence
//! shape around them: "set a rice timer for QDUR" sets a timer named rice,
//! "remind me QDELAY to check the oven" a reminder, "a timer is a useful
//! thing" nothing. A time said wrongly ("minus five minutes", "25:00", "the
//! 31st of February") still fits, with the error as its argument, so the
//! action says what is wrong instead of the router guessing.

use std::ops::Range;
use std::sync::OnceLock;
use std::time::Duration;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use regex::Regex;

use super::fit::{is_negated, is_question, Fit, Strength};
use crate::nlu::when::{self, Day, Prefer, Repeat, Resolved, TimeOfDay, WhenError};

macro_rules! rx {
    ($pattern:expr) => {{
        static CELL: OnceLock<Regex> = OnceLock::new();
        super::fit::re(&CELL, $pattern)
    }};
}

/// The time intents, in the order strong frames are tried.
pub const TIME_INTENTS: &[&str] = &[
    "timer_set",
    "alarm_set",
    "reminder_set",
    "timer_list",
    "timer_remaining",
    "timer_extend",
    "timer_cancel",
    "timer_cancel_all",
    "timer_snooze",
];

/// What the words named: the kind of thing ("timer", "alarm",
/// "reminder").
pub type KindWord = &'static str;

/// When something is due, as said.
#[derive(Debug, Clone, PartialEq)]
pub enum Due {
    /// After this long ("in 20 minutes", "for 18 minutes").
    In(Duration),
    /// Once, at this local date and time.
    At(NaiveDateTime),
    /// At `time` on the days of `repeat`.
    Repeat { time: NaiveTime, repeat: Repeat },
}

/// A time intent's arguments, from the same parse the gate checked.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeFrame {
    pub strength: Strength,
    /// The kind the words name, when they name one.
    pub kind: Option<KindWord>,
    /// A timer's name ("rice"), a reminder's text ("check the oven"), or
    /// which one ("the rice timer" → "rice") for the reading and changing
    /// intents. Empty when none was said.
    pub label: String,
    /// A length said: a timer's, the extra time, the snooze.
    pub duration: Option<Result<Duration, WhenError>>,
    /// When an alarm or a reminder is due (resolved against `now`).
    pub due: Option<Result<Due, WhenError>>,
    /// A clock time said inside the label ("cancel the 7am alarm"), or
    /// instead of a timer's length ("a timer for 7am").
    pub at: Option<TimeOfDay>,
    /// "take two minutes off": the extra time is negative.
    pub subtract: bool,
    /// A date said inside the label ("cancel saturday's alarm", "the alarm
    /// for tomorrow").
    pub on: Option<NaiveDate>,
    /// The day an alarm was asked for without a clock time ("tomorrow
    /// morning"): its `due` is left empty so the action asks "What time
    /// tomorrow morning?" instead of guessing, and the answer is read
    /// with these words.
    pub day_words: String,
    /// "change my 7am alarm to 8": the words that name the alarm to move
    /// ("7am", empty for "my alarm"); `due` is the new time.
    pub moves: Option<String>,
    /// Whether the new time of a move names its day ("to 8 on Friday");
    /// when not, the alarm keeps its own day.
    pub move_day_said: bool,
}

impl TimeFrame {
    /// No arguments (a weak frame).
    pub fn empty() -> TimeFrame {
        TimeFrame::new(Strength::Weak)
    }

    fn new(strength: Strength) -> TimeFrame {
        TimeFrame {
            strength,
            kind: None,
            label: String::new(),
            duration: None,
            due: None,
            at: None,
            subtract: false,
            on: None,
            day_words: String::new(),
            moves: None,
            move_day_said: false,
        }
    }
}

/// "change my alarm to 8", "move the 7am alarm to 7:30", "push my
/// alarm back to half past seven": the words naming the alarm and the
/// new time, from the tidied words.
fn alarm_move(t: &str) -> Option<(String, String)> {
    let c = rx!(r"(?i)^(?:change|move|push|shift|reset|switch|put|bring)(?: back| forward)? (?:my|the) (?P<which>(?:[\w:.']+ ){0,3}?)alarm(?: clock)?(?: back| forward| forwards)? (?:to|till|until|for) (?P<to>.+?)(?: instead)?$")
        .captures(t)?;
    Some((c["which"].trim().to_string(), c["to"].trim().to_string()))
}

/// Does `text` fit the time intent `intent`? (`Fit::NoFrame` for any other
/// intent.) `text` is tidied by the caller.
pub fn fit(intent: &str, t: &str) -> Fit {
    if !TIME_INTENTS.contains(&intent) {
        return Fit::NoFrame;
    }
    match frame(intent, t, chrono::Local::now().naive_local()) {
        Ok(f) => Fit::Fits {
            strength: f.strength,
            arg: (!f.label.is_empty()).then_some(f.label),
        },
        Err(why) => Fit::Unfit(why),
    }
}

/// The times found in a sentence, each with its span, and the sentence with
/// placeholders in their place.
struct Said {
    /// The lowercased text as said.
    lower: String,
    /// Lowercased text with `QDUR`, `QDELAY`, `QTIME`, `QDAY` in place of what
    /// was found.
    ph: String,
    duration: Option<Result<Duration, WhenError>>,
    delay: Option<Result<Duration, WhenError>>,
    time: Option<Result<TimeOfDay, WhenError>>,
    day: Option<Result<Day, WhenError>>,
}

impl Said {
    fn any_when(&self) -> bool {
        self.delay.is_some() || self.time.is_some() || self.day.is_some()
    }

    fn error(&self) -> Option<WhenError> {
        [
            self.delay.clone().and_then(Result::err),
            self.time.clone().and_then(Result::err),
            self.day.clone().and_then(Result::err),
        ]
        .into_iter()
        .flatten()
        .next()
    }
}

fn read(t: &str, today: NaiveDate) -> Said {
    let lower = t.to_lowercase();
    let t = lower.as_str();
    let mut spans: Vec<(Range<usize>, &str)> = Vec::new();
    let (delay_span, delay) = split(when::delay_in(t));
    let (dur_span, duration) = split(when::duration_in(t));
    let (time_span, time) = split(when::time_in(t));
    let (day_span, day) = split(when::day_in(t, today));
    if let Some(s) = delay_span {
        spans.push((s, "QDELAY"));
    } else if let Some(s) = dur_span.clone() {
        spans.push((s, "QDUR"));
    }
    if let Some(s) = time_span {
        spans.push((s, "QTIME"));
    }
    if let Some(s) = day_span {
        spans.push((s, "QDAY"));
    }
    spans.sort_by_key(|(r, _)| r.start);
    let mut ph = String::new();
    let mut at = 0;
    for (r, name) in spans {
        if r.start < at || r.end > t.len() {
            continue;
        }
        ph.push_str(&lower[at..r.start]);
        ph.push_str(name);
        at = r.end;
    }
    ph.push_str(&lower[at.min(lower.len())..]);
    let ph = ph.split_whitespace().collect::<Vec<_>>().join(" ");
    // A delay is also a duration ("in 20 minutes" for "add" frames).
    let duration = duration.or_else(|| delay.clone());
    Said {
        lower: lower.clone(),
        ph,
        duration,
        delay,
        time,
        day,
    }
}

type Found<T> = (Option<Range<usize>>, Option<Result<T, WhenError>>);

fn split<T>(r: Result<Option<when::Spanned<T>>, WhenError>) -> Found<T> {
    match r {
        Ok(Some(s)) => (Some(s.span), Some(Ok(s.value))),
        Ok(None) => (None, None),
        Err(e) => (None, Some(Err(e))),
    }
}

/// The frame of `intent` for the tidied utterance `t`, seen at `now`
/// (local time), or why it does not fit.
pub fn frame(intent: &str, t: &str, now: NaiveDateTime) -> Result<TimeFrame, &'static str> {
    if t.split_whitespace().count() > 40 {
        return Err("too long for a device command");
    }
    if is_question(t) && !matches!(intent, "timer_list" | "timer_remaining") {
        return Err("a question, not a request");
    }
    // "don't let me forget to call mum at five" asks for a reminder.
    let asks_not_to_forget = intent == "reminder_set"
        && rx!(r"(?i)^(?:please )?(?:don'?t|do not) let me forget\b").is_match(t);
    if is_negated(t) && !asks_not_to_forget {
        return Err("negated");
    }
    // "tomorrow's alarm", "saturday's alarm": the day, said as an owner.
    let t = rx!(r"(?i)\b(today|tomorrow|tonight|monday|tuesday|wednesday|thursday|friday|saturday|sunday)'s\b")
        .replace_all(t, "$1");
    let said = read(&t, now.date());
    match intent {
        "timer_set" => timer_set(&said),
        "alarm_set" => match alarm_move(&t) {
            // The new time read as an alarm's, the old one kept by name.
            Some((which, to)) => {
                let mut f = alarm_set(&read(&format!("set an alarm for {to}"), now.date()), now)?;
                if f.due.is_none() {
                    return Err("no new time for the alarm");
                }
                f.moves = Some(which);
                f.move_day_said = matches!(when::day_in(&to, now.date()), Ok(Some(_)));
                Ok(f)
            }
            None => alarm_set(&said, now),
        },
        "reminder_set" => reminder_set(&said, now),
        "timer_list" => timer_list(&said),
        "timer_remaining" => timer_remaining(&said),
        "timer_extend" => timer_extend(&said),
        "timer_cancel" => timer_cancel(&said),
        "timer_cancel_all" => timer_cancel_all(&said),
        "timer_snooze" => timer_snooze(&said),
        _ => Err("not a time intent"),
    }
}

/// The words a generic adjective leaves as no name ("a quick timer").
fn name_or_none(l: Option<&str>) -> String {
    let l = l.unwrap_or("").trim();
    let l = rx!(r"^(?:the|my|a|an)\s+").replace(l, "");
    let l = l.trim();
    if rx!(r"^(?:quick|new|little|short|simple|kitchen|countdown|another|second|other|one|basic|normal|regular|standard|QDUR|QDELAY|QTIME|QDAY)?$").is_match(l) {
        return String::new();
    }
    l.to_string()
}

fn timer_set(s: &Said) -> Result<TimeFrame, &'static str> {
    // Whisper writes the article before a length as "at" ("Start at 10
    // minute timer for the eggs."); no timer is set "at" a length.
    let p = rx!(r"\bat (QDUR|QDELAY) (timer|countdown|count down)\b").replace(&s.ph, "a $1 $2");
    let p = p.as_ref();
    if rx!(r"\b(?:on|in) (?:my|the|your) (?:phone|oven|microwave|watch|cooker|tablet|computer|laptop)\b").is_match(p) {
        return Err("another device's timer");
    }
    let full = rx!(
        r"^(?:(?P<verb>set|start|make|create|put on|put|begin|run|give me|get me|i need|i want|i'd like|i would like|we need|let's have|let's do|let's set|let's start|add|new|fire up|kick off|stick on|pop on|gimme|set up|put in)\s+)?(?:(?:me|us|up)\s+)?(?:(?:a|an|one|another|the|my|new)\s+)?(?:(?P<d1>QDUR|QDELAY)\s+)?(?:(?P<l1>[a-z][a-z'-]*(?: [a-z][a-z'-]*)?)\s+)?(?:timer|countdown|count down)(?:\s+(?:going|running|on))?(?:\s+(?:for|of|at|to|lasting))?(?:\s+(?P<d2>QDUR|QDELAY))?(?:\s+(?:for|called|named|labell?ed|on)\s+(?:the\s+|my\s+|a\s+)?(?P<l2>[a-z][a-z' -]{0,60}?))?(?:\s+(?:for\s+)?(?P<d3>QDUR|QDELAY))?$"
    );
    let short = rx!(
        r"^(?:(?:set|start|put on) (?:a|the) time (?:for|of)|time(?: (?:me|us))?(?: for)?|count ?down(?: from| for)?) (?P<d2>QDUR)(?:\s+(?:for|on)\s+(?:the\s+|my\s+)?(?P<l2>[a-z][a-z' -]{0,60}?))?$"
    );
    let (c, verb) = if let Some(c) = full.captures(p) {
        let verb = c.name("verb").is_some();
        (c, verb)
    } else if let Some(c) = short.captures(p) {
        (c, true)
    } else {
        return Err("no words of setting a timer");
    };
    let has_dur = ["d1", "d2", "d3"].iter().any(|n| c.name(n).is_some());
    // A length said wrongly ("minus five minutes") leaves no QDUR but an error.
    let bad_dur = s.duration.as_ref().is_some_and(Result::is_err);
    let l2 = c.name("l2").map(|m| m.as_str());
    if !has_dur && !bad_dur && !verb {
        return Err("no length and no request");
    }
    // "the timer on my oven is broken" cannot reach here; a label that
    // is a sentence is not a name.
    if c.name("l1")
        .is_some_and(|l| rx!(r"\b(?:to|on|onto|off|from|in|of|for|by)\b").is_match(l.as_str()))
    {
        return Err("changes a timer, not a new one");
    }
    let label_words = format!(
        "{} {}",
        c.name("l1").map_or("", |m| m.as_str()),
        l2.unwrap_or("")
    );
    // A time or length where the name goes was read in a way the frame
    // does not know; it must never be said back as a name ("at QDUR").
    if rx!(r"\b(?:QDUR|QDELAY|QTIME|QDAY)\b").is_match(&label_words) {
        return Err("a time where a timer's name goes");
    }
    if rx!(r"\b(?:is|are|was|were|broke|broken|works?|working|went|goes|useful|thing)\b")
        .is_match(&label_words)
    {
        return Err("talks about a timer");
    }
    let mut f = TimeFrame::new(if has_dur || bad_dur {
        Strength::Strong
    } else {
        Strength::Weak
    });
    f.kind = Some("timer");
    f.duration = s.duration.clone();
    if has_dur {
        f.duration = s.duration.clone();
    } else if !bad_dur {
        f.duration = None;
    }
    f.label = name_or_none(c.name("l1").map(|m| m.as_str()));
    if f.label.is_empty() {
        f.label = name_or_none(l2);
    }
    // A clock time for a timer ("a timer for 7am"): a timer needs a length.
    if !has_dur && !bad_dur {
        f.at = s.time.clone().and_then(Result::ok);
    }
    Ok(f)
}

/// Resolve the time, day and delay said into a due moment.
fn due_of(s: &Said, now: NaiveDateTime, prefer: Prefer) -> Option<Result<Due, WhenError>> {
    if let Some(e) = s.error() {
        return Some(Err(e));
    }
    if let Some(Ok(d)) = &s.delay {
        return Some(Ok(Due::In(*d)));
    }
    let time = s.time.clone().and_then(Result::ok);
    let day = s.day.clone().and_then(Result::ok);
    match when::resolve(time, day.as_ref(), now, prefer)? {
        Ok(Resolved::At(at)) => Some(Ok(Due::At(at))),
        Ok(Resolved::Repeat { time, repeat }) => Some(Ok(Due::Repeat { time, repeat })),
        Err(e) => Some(Err(e)),
    }
}

const ALARM_KINDS_NOT_MINE: &str =
    r"^(?:fire|smoke|burglar|car|house|security|intruder|carbon|false|panic|door|gas|baby|home)$";

fn alarm_set(s: &Said, now: NaiveDateTime) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let tail = r"(?:\s+(?:for|at|on|in|every|to go off at|to ring at|to go off|for me|set for|and|around|about|by|before|please)|\s+(?:QTIME|QDAY|QDELAY|QDUR))*";
    let wake_re = rx!(
        r"^(?:(?:wake|get) (?:me|us) up|wake (?:me|us)|get (?:me|us) (?:out of bed|up)|(?:i|we) (?:need|have|want|must|gotta|got) to (?:be up|get up|wake up|be awake)|i'?ve got to (?:be up|get up)|make sure (?:i'?m|i am|we'?re) (?:up|awake))(?P<tail>.*)$"
    );
    let alarm_re = rx!(
        r"^(?:(?P<verb>set|make|create|put|add|start|schedule|give me|get me|i need|i want|i'd like|i would like|set up|put on|pop on)\s+)?(?:(?:me|us)\s+)?(?:(?:an?|my|the|another|new|one)\s+)?(?P<pre>(?:(?:QTIME|QDAY|QDUR|QDELAY)\s+)*)(?:(?P<l1>[a-z'-]+)\s+)?alarm(?:\s+clock)?(?P<tail>.*)$"
    );
    // A time said wrongly ("25:00") is not replaced: a short tail with it
    // still fits, so the action can say what is wrong.
    let bad = s.error().is_some();
    let tail_ok = |x: &str| {
        crate::small_regex::new(&format!("(?i)^{tail}$")).is_ok_and(|r| r.is_match(x))
            || bad && x.split_whitespace().count() <= 6
    };
    let has_time = s.time.is_some()
        || s.delay.is_some()
        || s.day.as_ref().is_some_and(Result::is_err)
        || s.duration.is_some() && p.contains("QDUR");
    let (strength, prefer) = if let Some(c) = wake_re.captures(p) {
        if !tail_ok(&c["tail"]) {
            return Err("more than a wake-up time");
        }
        if !has_time {
            return Err("no wake-up time");
        }
        (Strength::Strong, Prefer::Morning)
    } else if let Some(c) = alarm_re.captures(p) {
        if !tail_ok(&c["tail"]) {
            return Err("says more about an alarm than setting one");
        }
        if c.name("l1").is_some_and(|l| {
            !rx!(r"^(?:wake-?up|morning|early|daily|weekday|weekend|school|work|gym)$")
                .is_match(l.as_str())
        }) {
            return Err("another kind of alarm");
        }
        let verb = c.name("verb").is_some();
        let any = has_time || s.day.is_some();
        if !verb && !any {
            return Err("no time and no request");
        }
        if any {
            (Strength::Strong, Prefer::Morning)
        } else {
            (Strength::Weak, Prefer::Morning)
        }
    } else {
        return Err("no words of setting an alarm");
    };
    let mut f = TimeFrame::new(strength);
    f.kind = Some("alarm");
    f.due = if s.delay.is_none() && s.time.is_none() && p.contains("QDUR") {
        // "set an alarm for 20 minutes": a delay.
        s.duration.clone().map(|d| d.map(Due::In))
    } else if s.delay.is_none() && s.time.is_none() && s.day.as_ref().is_some_and(Result::is_ok) {
        // "an alarm for tomorrow morning": a day, no time. An alarm at a
        // guessed hour is a wrong one; the action asks.
        f.day_words = when::day_in(&s.lower, now.date())
            .ok()
            .flatten()
            .and_then(|d| s.lower.get(d.span))
            .unwrap_or_default()
            .to_string();
        None
    } else {
        due_of(s, now, prefer)
    };
    Ok(f)
}

fn reminder_set(s: &Said, now: NaiveDateTime) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let lead = rx!(
        r"^(?P<pre>(?:(?:QTIME|QDAY|QDELAY)\s+)*)(?:(?:please|also|and|oh)\s+)?(?:remind (?:me|us)|(?:set|create|add|make|give me|put in|schedule|i need|i want|i'd like)(?: me)?(?: (?:a|an|another))? reminder|(?:a |another )?reminder|(?:don'?t|do not) let me forget)(?P<rest>.*)$"
    );
    let Some(c) = lead.captures(p) else {
        return Err("no words of a reminder");
    };
    if !s.any_when() {
        return Err("no time: a to-do, not a reminder");
    }
    let rest = &c["rest"];
    let label = rx!(
        r"\s*\b(?:at|on|in|for|by|around|about|before|from|every)?\s*(?:QTIME|QDAY|QDELAY|QDUR)\b"
    )
    .replace_all(rest, " ");
    let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
    // "at 3:30 p.m. to call the bank": the time's last dot is left over.
    let label = label.trim_start_matches(|c: char| !c.is_alphanumeric());
    // Whole words only: "too" is whisper's "to" ("remind me too, water
    // the plants"), never "to" and a stray "o"; "that" is not "thatch".
    let label =
        rx!(r"^(?:(?:(?:to|too|about|that|of|for|saying|again)\b|[:,-])\s*)+").replace(label, "");
    let label = rx!(r"(?:\s+(?:to|at|on|in|for|and|please|then|ok|okay))+$").replace(&label, "");
    let label = rx!(r"^(?:i (?:need|have|must|should|gotta) to|i've got to|we need to)\s+")
        .replace(&label, "");
    let label = label
        .trim()
        .trim_matches(|c: char| c == ',' || c == '.')
        .to_string();
    if rx!(r"\b(?:QTIME|QDAY|QDELAY|QDUR)\b").is_match(&label) {
        return Err("two times said");
    }
    if label.split_whitespace().count() > 25 {
        return Err("too long for a reminder");
    }
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = Some("reminder");
    f.label = label;
    f.due = due_of(s, now, Prefer::Next);
    Ok(f)
}

/// Which kind the words name: one kind word → that kind; none or several
/// → `None` (all).
fn kind_named(p: &str) -> Option<KindWord> {
    let mut found: Option<KindWord> = None;
    for (re, k) in [
        (rx!(r"\btimers?\b"), "timer"),
        (rx!(r"\balarms?\b"), "alarm"),
        (rx!(r"\breminders?\b"), "reminder"),
    ] {
        if re.is_match(p) {
            if found.is_some() {
                return None;
            }
            found = Some(k);
        }
    }
    found
}

fn timer_list(s: &Said) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let k = r"(?:timers?|alarms?|reminders?)";
    let shapes = [
        rx!(
            r"^(?:what|which)(?: (?:timers?|alarms?|reminders?))(?:(?: and| &) (?:timers?|alarms?|reminders?))?(?: (?:do|have|did) (?:i|we)(?: (?:got|have|set))?(?: (?:set|running|going|on|pending|left))?| (?:are|is) (?:set|on|running|going|pending|there|active|left)| have (?:i|we) (?:got|set))?(?: (?:set|running|on|going|for QDAY|QDAY|at the moment|right now|now))?$"
        ),
        rx!(
            r"^(?:list|show|read|tell me|give me|read out|go through|check)(?: me| out)?(?: all)?(?: (?:of )?(?:my|the|all|all my|all the|any|current))? (?:timers?|alarms?|reminders?)(?:(?: and| &) (?:my |the )?(?:timers?|alarms?|reminders?))?(?: (?:set|running|pending|i have|i've got|i have set|for QDAY|QDAY))?$"
        ),
        rx!(
            r"^(?:do|have) (?:i|we) (?:have|got|set) (?:any|an?) (?:timers?|alarms?|reminders?)(?:(?: or| and) (?:timers?|alarms?|reminders?))?(?: (?:set|running|on|going|pending|for QDAY|QDAY))?$"
        ),
        rx!(
            r"^(?:are|is) there (?:any|an?) (?:timers?|alarms?|reminders?)(?: (?:still )?(?:set|running|on|going|pending|ticking|for QDAY|QDAY))?$"
        ),
        rx!(r"^any (?:timers?|alarms?|reminders?)(?: (?:set|running|on|going))?$"),
        rx!(
            r"^(?:what|which) (?:are|is|were) (?:my|the|all my|all the|any)(?: current| upcoming| active| pending)? (?:timers?|alarms?|reminders?)(?:(?: and| &) (?:my |the )?(?:timers?|alarms?|reminders?))?(?: (?:set|running|pending|for QDAY|QDAY))?$"
        ),
        rx!(r"^(?:my|the) (?:timers|alarms|reminders)$"),
        rx!(
            r"^(?:what time is|when is|when's|what time's|whens) my (?:next )?(?:alarm|reminder)(?: set)?(?: for)?(?: QDAY)?$"
        ),
        rx!(r"^is (?:my|the|an?) alarm (?:set|on)(?: for QDAY| QDAY)?$"),
        rx!(
            r"^how many (?:timers|alarms|reminders) (?:do (?:i|we) have|are (?:there|set|running|on)|have (?:i|we) (?:got|set))$"
        ),
        rx!(r"^what(?:'s| is) (?:set|running|pending)(?: on the timers?)?$"),
    ];
    let _ = k;
    if !shapes.iter().any(|r| r.is_match(p)) {
        return Err("does not ask which timers are set");
    }
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = kind_named(p);
    Ok(f)
}

fn timer_remaining(s: &Said) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let shapes = [
        rx!(
            r"^how (?:much|long)(?: time)?(?: (?:is|has|does|do i have)| 's|'s)?(?: (?:it|that))?(?: got)? (?:left|remaining|to go)(?: (?:on|for|in) (?:the|my|that) (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm|reminder))?$"
        ),
        rx!(
            r"^how long(?: is it| is there)? (?:until|till|til|before|'til)(?: the| my)? (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm|reminder)(?: (?:is done|goes off|rings|finishes|is up|ends|beeps|goes|is finished))?$"
        ),
        rx!(
            r"^(?:time|how much time) (?:left|remaining)(?: on (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm|reminder))?$"
        ),
        // "how long have I got on the oven timer?"
        rx!(
            r"^how (?:long|much time|much longer) (?:have i|have we|do i have|do we have|'ve i)(?: got)?(?: left)? (?:on|for|in) (?:the|my|that) (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm|reminder)$"
        ),
        rx!(r"^(?:check|status of|check on)(?: on)? (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer)$"),
        rx!(r"^how'?s (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer)(?: doing| going| looking)?$"),
        rx!(r"^what'?s (?:left )?on (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer)$"),
        rx!(
            r"^when (?:is|does|will) (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm) (?:go off|finish|end|ring|be done|done|going off)$"
        ),
        rx!(
            r"^when'?s (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer) (?:going off|done|finishing|up|due)$"
        ),
        rx!(
            r"^how long (?:has|does|is) (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer) (?:got(?: left)?|left)$"
        ),
        // "is the pasta timer still running?": how long is left answers it.
        rx!(
            r"^(?:is|are) (?:the|my|that) (?P<l>[a-z' ]*?)\s*(?P<k>timer) (?:still )?(?:running|going|ticking|counting(?: down)?|still on)(?: still)?$"
        ),
        // "how many minutes are left", "how many seconds to go on the
        // pasta timer": the unit the speaker counts in.
        rx!(
            r"^how many (?:more )?(?:minutes|mins|seconds|secs|hours)(?: (?:are|is|have i got|do i have|have we got|do we have|does it have|has it got))? (?:left|remaining|to go)(?: (?:on|for|in) (?:the|my|that) (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm|reminder))?$"
        ),
        rx!(
            r"^how many (?:more )?(?:minutes|mins|seconds|secs|hours) (?:until|till|til|before|'til)(?: the| my)? (?P<l>[a-z' ]*?)\s*(?P<k>timer|alarm|reminder) (?:is done|goes off|rings|finishes|is up|ends|beeps|goes|is finished)$"
        ),
        // "how much longer on the laundry timer", "how much longer"; without
        // "timer" a name could be anything ("how much longer on the bus").
        rx!(
            r"^how much longer(?: (?:is left|left|to go|is there))?(?: (?:on|for) (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer))?$"
        ),
    ];
    let Some(c) = shapes.iter().find_map(|r| r.captures(p)) else {
        return Err("does not ask how long is left");
    };
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = c.name("k").map(|k| match k.as_str() {
        "alarm" => "alarm",
        "reminder" => "reminder",
        _ => "timer",
    });
    f.label = name_or_none(c.name("l").map(|m| m.as_str()));
    Ok(f)
}

fn timer_extend(s: &Said) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let d = r"(?:QDUR|QDELAY)";
    let _ = d;
    let add = [
        rx!(
            r"^(?:add|put|stick|pop|throw|give (?:it|me|that|the (?P<l0>[a-z' ]*?)\s*timer))(?: on)? (?:another |an extra |extra |a further |on )?(?:QDUR|QDELAY)(?: more| extra| longer)?(?: (?:to|on|onto) (?:the|my|that|it)(?: (?P<l>[a-z' ]*?))?\s*(?P<k>timer|alarm|reminder|one)?| on(?: it| that| there)?| to (?:it|that))?$"
        ),
        rx!(
            r"^(?:another|an extra|extra) (?:QDUR|QDELAY)(?: more)?(?: on (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer))?(?: please)?$"
        ),
        rx!(
            r"^(?:QDUR|QDELAY) more(?: on (?:the|my) (?P<l>[a-z' ]*?)\s*(?P<k>timer)| on (?:it|that))?$"
        ),
        rx!(
            r"^(?:extend|increase|lengthen|push back) (?:the|my|that|it)(?: (?P<l>[a-z' ]*?))?\s*(?P<k>timer|alarm|reminder)? by (?:another )?(?:QDUR|QDELAY)$"
        ),
        // "make the rice timer five minutes longer", "make it 2 minutes longer"
        rx!(
            r"^(?:make|set) (?:the|my|that|it)(?: (?P<l>[a-z' ]*?))?\s*(?P<k>timer|alarm|reminder)? (?:QDUR|QDELAY) longer$"
        ),
        // "give the rice another two minutes", "give the pasta 3 more minutes"
        rx!(
            r"^give (?:the|my) (?P<l0>[a-z][a-z' ]*?) (?:another |an extra |extra |a further )(?:QDUR|QDELAY)$|^give (?:the|my) (?P<l1>[a-z][a-z' ]*?) (?:QDUR|QDELAY)(?: more| extra)?$"
        ),
    ];
    let sub = [
        rx!(
            r"^(?:take|knock|shave|cut|subtract|remove|take away) (?:off )?(?:QDUR|QDELAY) (?:off|from|off of) (?:the|my|that|it)(?: (?P<l>[a-z' ]*?))?\s*(?P<k>timer)?$"
        ),
        rx!(
            r"^(?:reduce|shorten|decrease|cut) (?:the|my|that) (?P<l>[a-z' ]*?)\s*(?P<k>timer) by (?:QDUR|QDELAY)$"
        ),
        rx!(
            r"^(?:make|set) (?:the|my|that|it)(?: (?P<l>[a-z' ]*?))?\s*(?P<k>timer)? (?:QDUR|QDELAY) shorter$"
        ),
    ];
    // "five more minutes" alone: more time on the timer.
    let more_only = rx!(r"^(?:QDUR|QDELAY)(?: please)?$")
        .captures(p)
        .filter(|_| rx!(r"\b(?:more|extra|another|additional|further)\b").is_match(&s.lower));
    let (c, subtract) = if let Some(c) = more_only {
        (c, false)
    } else if let Some(c) = add.iter().find_map(|r| r.captures(p)) {
        (c, false)
    } else if let Some(c) = sub.iter().find_map(|r| r.captures(p)) {
        (c, true)
    } else {
        return Err("no words of changing a timer's time");
    };
    // "give the dog five minutes" is not more time on a timer; "give the
    // pasta 3 more minutes" is.
    if c.name("l1").is_some() && !rx!(r"\b(?:more|extra|another|further)\b").is_match(&s.lower) {
        return Err("gives time to something, not more time on a timer");
    }
    let label = c
        .name("l")
        .or_else(|| c.name("l0"))
        .or_else(|| c.name("l1"))
        .map_or("", |m| m.as_str())
        .trim()
        .to_string();
    if !label.is_empty()
        && c.name("k").is_none()
        && c.name("l0").is_none()
        && c.name("l1").is_none()
    {
        return Err("adds time to something that is not a timer");
    }
    if rx!(r"\b(?:list|todo|to-do|shopping|cooking|recipe|oven|pan|pot|water)\b").is_match(&label) {
        return Err("adds time to something that is not a timer");
    }
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = c.name("k").and_then(|k| match k.as_str() {
        "alarm" => Some("alarm"),
        "reminder" => Some("reminder"),
        "timer" => Some("timer"),
        _ => None,
    });
    f.label = name_or_none(Some(&label));
    f.duration = s.duration.clone();
    f.subtract = subtract;
    Ok(f)
}

fn timer_cancel(s: &Said) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let shapes = [rx!(
        r"^(?:cancel|stop|delete|remove|clear|kill|end|turn off|switch off|shut off|disable|get rid of|scrap|drop|abort|dismiss|silence|forget|forget about|never ?mind|call off|scratch|undo|turn|switch)(?: the| my| that| this| your)?(?: (?P<l>[a-z' ]*?(?:QTIME|QDAY)?[a-z' ]*?))?\s*\b(?P<k>timer|alarm|reminder)(?P<post>(?: (?:for|to|about|called|named|at|on|that|which|i set|set for|off)(?: [a-z']+| QTIME| QDAY| QDUR)*| QDAY(?: off)?)?)$"
    )];
    let Some(c) = shapes.iter().find_map(|r| r.captures(p)) else {
        return Err("no words of cancelling a timer");
    };
    let l = c.name("l").map_or("", |m| m.as_str()).trim();
    let post = c.name("post").map_or("", |m| m.as_str()).trim();
    // "turn the alarm" needs its "off".
    if rx!(r"^(?:turn|switch)\b").is_match(p)
        && !rx!(r"^(?:turn|switch) off\b").is_match(p)
        && !post.ends_with("off")
    {
        return Err("no words of cancelling a timer");
    }
    if rx!(r"\b(?:all|every|each|both)\b").is_match(l) {
        return Err("all of them: that is cancel all");
    }
    if rx!(ALARM_KINDS_NOT_MINE).is_match(l.trim_start_matches("the ").trim()) {
        return Err("another kind of alarm");
    }
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = Some(match &c["k"] {
        "alarm" => "alarm",
        "reminder" => "reminder",
        _ => "timer",
    });
    let post =
        rx!(r"^(?:for|to|about|called|named|at|on|that|which|i set|set for)\s*").replace(post, "");
    let post = post.trim_end_matches("off").trim();
    let words = format!("{l} {post}");
    f.at = s
        .time
        .clone()
        .and_then(Result::ok)
        .filter(|_| words.contains("QTIME"));
    f.on = match s.day.as_ref() {
        Some(Ok(Day {
            day: when::DayRef::Date(d),
            ..
        })) if words.contains("QDAY") => Some(*d),
        _ => None,
    };
    let words =
        rx!(r"\b(?:QTIME|QDAY|QDUR|at|on|for|the|my|tomorrow|today|'s)\b").replace_all(&words, " ");
    f.label = name_or_none(Some(
        words
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .as_str(),
    ));
    Ok(f)
}

fn timer_cancel_all(s: &Said) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let re = rx!(
        r"^(?:cancel|stop|delete|remove|clear|kill|turn off|switch off|get rid of|scrap|wipe|reset|disable|clear out|end)(?P<all> (?:all|every|all of|each|both))?(?: (?:my|the|of my|of the|your|of))? (?P<k>timers?|alarms?|reminders?)(?:(?: and| &|,) (?:my |the |all )?(?:timers?|alarms?|reminders?))*(?: (?:too|as well|now))?$"
    );
    let Some(c) = re.captures(p) else {
        return Err("no words of cancelling every timer");
    };
    let plural = c["k"].ends_with('s');
    if c.name("all").is_none() && !plural {
        return Err("one, not all");
    }
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = kind_named(p);
    Ok(f)
}

fn timer_snooze(s: &Said) -> Result<TimeFrame, &'static str> {
    let p = s.ph.as_str();
    let re = rx!(
        r"^(?:snooze|hit snooze|press snooze|snooze button|hit the snooze(?: button)?)(?: (?:it|that|the alarm|my alarm|the timer|the reminder|alarm|please|again))*(?: (?:for )?(?:another )?(?:QDUR|QDELAY))?$"
    );
    if !re.is_match(p) {
        return Err("no words of snoozing");
    }
    let mut f = TimeFrame::new(Strength::Strong);
    f.kind = kind_named(p);
    f.duration = s.duration.clone();
    Ok(f)
}

/// The moment a short answer names ("at seven", "7am tomorrow", "in ten
/// minutes"), for the answer to "For what time?" (wake-up reading).
pub fn due_in(text: &str, now: NaiveDateTime) -> Option<Result<Due, WhenError>> {
    let s = read(text, now.date());
    if s.delay.is_none() && s.time.is_none() && s.day.is_none() {
        return s.duration.map(|d| d.map(Due::In));
    }
    due_of(&s, now, Prefer::Morning)
}

/// Whether a to-do item really carries a time ("call mum at 5", "in an
/// hour", "on Thursday"): then it is a reminder, not a to-do.
pub fn says_when(text: &str) -> bool {
    let s = read(text, chrono::Local::now().date_naive());
    if s.delay.is_some() || s.day.is_some() {
        return true;
    }
    s.time.is_some()
        && rx!(r"\b(?:at|by|until|till|before|around) QTIME\b|QTIME (?:am|pm|o'clock)|\b(?:noon|midnight|half past|quarter past|quarter to)\b").is_match(&s.ph)
}

/// Whether a to-do item is only a length ("two minutes"), or names a
/// timer, alarm or reminder: more time on a timer, not a to-do.
pub fn is_timer_talk(item: &str) -> bool {
    let s = read(item, chrono::Local::now().date_naive());
    rx!(r"^(?:(?:another|an extra|extra|a further)\s+)?(?:QDUR|QDELAY)(?:\s+(?:more|extra|longer))?$").is_match(&s.ph)
        || rx!(r"\b(?:timers?|alarms?)\b").is_match(&s.ph)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::fit::tidy;

    fn now() -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2026, 12, 2)
            .unwrap()
            .and_hms_opt(14, 0, 0)
            .unwrap()
    }

    fn f(intent: &str, text: &str) -> Result<TimeFrame, &'static str> {
        frame(intent, &tidy(text), now())
    }

    fn fits(intent: &str, text: &str) -> bool {
        f(intent, text).is_ok()
    }

    /// The one time intent whose frame is strong, as the gate's rule
    /// would pick among the time intents.
    fn strong(text: &str) -> Option<&'static str> {
        let t = tidy(text);
        let hits: Vec<&str> = TIME_INTENTS
            .iter()
            .copied()
            .filter(|i| frame(i, &t, now()).is_ok_and(|f| f.strength == Strength::Strong))
            .collect();
        match hits.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    #[test]
    fn an_alarm_moved_names_the_old_one_and_the_new_time() {
        let fr = f("alarm_set", "change my 7am alarm to 8").unwrap();
        assert_eq!(fr.moves.as_deref(), Some("7am"));
        assert_eq!(fr.strength, Strength::Strong);
        assert!(matches!(fr.due, Some(Ok(Due::At(_)))));
        let fr = f("alarm_set", "push my alarm back to half past seven").unwrap();
        assert_eq!(fr.moves.as_deref(), Some(""));
        // Setting is not moving; a new time is needed.
        assert_eq!(f("alarm_set", "set my alarm for 7").unwrap().moves, None);
        assert!(!fits("alarm_set", "change my alarm sound to birdsong"));
        assert!(!fits("alarm_set", "don't change my alarm to 8"));
    }

    #[test]
    fn timers_are_set_with_their_length_and_name() {
        let fr = f("timer_set", "set a rice timer for 18 minutes").unwrap();
        assert_eq!(fr.label, "rice");
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(1080))));
        let fr = f("timer_set", "set a timer for ten minutes for the eggs").unwrap();
        assert_eq!(fr.label, "eggs");
        let fr = f("timer_set", "set a time for ten minutes").unwrap();
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(600))));
        let fr = f("timer_set", "a 4 second timer").unwrap();
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(4))));
        assert_eq!(fr.label, "");
        let fr = f(
            "timer_set",
            "can you set a timer for minus five minutes please",
        )
        .unwrap();
        assert_eq!(fr.duration, Some(Err(WhenError::Negative)));
        // Whisper's "at" for the article before a length.
        let fr = f("timer_set", "start at 10 minute timer for the eggs").unwrap();
        assert_eq!(fr.strength, Strength::Strong);
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(600))));
        assert_eq!(fr.label, "eggs");
        let fr = f("timer_set", "set a timer").unwrap();
        assert_eq!(fr.strength, Strength::Weak);
        assert_eq!(fr.duration, None);
        for text in [
            "a timer is a useful thing",
            "the timer on my oven is broken",
            "how do i set a timer",
            "don't set a timer",
            "set a timer on my phone for 5 minutes",
            "set the table",
        ] {
            assert!(!fits("timer_set", text), "{text}");
        }
        assert_eq!(
            strong("set a timer for an hour and a half"),
            Some("timer_set")
        );
        assert_eq!(strong("timer 5 minutes"), Some("timer_set"));
        assert_eq!(strong("ten minute timer"), Some("timer_set"));
    }

    #[test]
    fn alarms_and_reminders() {
        let fr = f("alarm_set", "get me up at six").unwrap();
        let tomorrow = NaiveDate::from_ymd_opt(2026, 12, 3).unwrap();
        assert_eq!(
            fr.due,
            Some(Ok(Due::At(tomorrow.and_hms_opt(6, 0, 0).unwrap())))
        );
        let fr = f("alarm_set", "wake me at 6:30 tomorrow").unwrap();
        assert_eq!(
            fr.due,
            Some(Ok(Due::At(tomorrow.and_hms_opt(6, 30, 0).unwrap())))
        );
        let fr = f("alarm_set", "an alarm for weekdays at seven").unwrap();
        assert_eq!(
            fr.due,
            Some(Ok(Due::Repeat {
                time: NaiveTime::from_hms_opt(7, 0, 0).unwrap(),
                repeat: Repeat::Weekdays
            }))
        );
        let fr = f("alarm_set", "set an alarm for 25:00").unwrap();
        assert!(matches!(fr.due, Some(Err(WhenError::BadClock { .. }))));
        for text in [
            "my alarm didn't go off yesterday",
            "the fire alarm went off last night",
            "what's a good alarm tone",
            "how do i set an alarm on my phone",
            "wake up",
            "set the burglar alarm",
        ] {
            assert!(!fits("alarm_set", text), "{text}");
        }
        let fr = f(
            "reminder_set",
            "remind me in twenty minutes to check the oven",
        )
        .unwrap();
        assert_eq!(fr.label, "check the oven");
        assert_eq!(fr.due, Some(Ok(Due::In(Duration::from_secs(1200)))));
        // A word that only starts like "to" is not cut in two.
        let fr = f("reminder_set", "remind me about thatch repairs tomorrow").unwrap();
        assert_eq!(fr.label, "thatch repairs");
        let fr = f("reminder_set", "remind me too, water the plants tomorrow").unwrap();
        assert_eq!(fr.label, "water the plants");
        let fr = f("reminder_set", "remind me at 5 to call mum").unwrap();
        assert_eq!(fr.label, "call mum");
        assert_eq!(
            fr.due,
            Some(Ok(Due::At(now().date().and_hms_opt(17, 0, 0).unwrap())))
        );
        let fr = f("reminder_set", "remind me to call mum at half past five").unwrap();
        assert_eq!(fr.label, "call mum");
        assert!(!fits("reminder_set", "remind me to buy milk"));
        assert!(!fits("reminder_set", "stop reminding me about that"));
        let fr = f(
            "reminder_set",
            "remind me on the 31st of february to pay rent",
        )
        .unwrap();
        assert!(matches!(fr.due, Some(Err(WhenError::NoSuchDate { .. }))));
        assert_eq!(strong("get me up at six"), Some("alarm_set"));
        assert_eq!(strong("remind me at 5 to call mum"), Some("reminder_set"));
    }

    #[test]
    fn reading_and_changing_timers() {
        let fr = f("timer_remaining", "how much time is left on the rice timer").unwrap();
        assert_eq!(fr.label, "rice");
        assert!(fits("timer_remaining", "how long is left"));
        let fr = f("timer_remaining", "how much longer on the laundry timer").unwrap();
        assert_eq!(fr.label, "laundry");
        assert!(fits("timer_remaining", "how much longer"));
        assert!(!fits("timer_remaining", "how much longer is this movie"));
        assert!(fits("timer_remaining", "how many minutes are left"));
        let fr = f("timer_remaining", "is the pasta timer still running").unwrap();
        assert_eq!(fr.label, "pasta");
        let fr = f(
            "timer_remaining",
            "how many seconds to go on the pasta timer",
        )
        .unwrap();
        assert_eq!(fr.label, "pasta");
        assert!(!fits("timer_remaining", "how many minutes are in an hour"));
        assert!(!fits(
            "timer_remaining",
            "how many minutes are left in the game"
        ));
        assert!(!fits("timer_remaining", "how much longer on the bus"));
        assert!(!fits(
            "timer_remaining",
            "how long until the chicken is done"
        ));
        assert!(!fits("timer_remaining", "how long does rice take"));
        assert!(!fits(
            "timer_remaining",
            "how much time is left in the match"
        ));
        let fr = f("timer_list", "what alarms do i have").unwrap();
        assert_eq!(fr.kind, Some("alarm"));
        assert!(fits("timer_list", "list my timers"));
        assert!(!fits("timer_list", "what's a good alarm tone"));
        let fr = f("timer_extend", "add two minutes").unwrap();
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(120))));
        assert!(!fr.subtract);
        assert!(fits("timer_extend", "five more minutes"));
        assert!(fits("timer_extend", "put 5 more minutes on the timer"));
        assert!(!fits("timer_extend", "five minutes"));
        let fr = f("reminder_set", "remind me at 3:30 p.m. to call the bank").unwrap();
        assert_eq!(fr.label, "call the bank");
        let fr = f("timer_extend", "take a minute off the pasta timer").unwrap();
        assert!(fr.subtract);
        assert_eq!(fr.label, "pasta");
        assert!(!fits(
            "timer_extend",
            "add five minutes to the cooking time"
        ));
        assert!(!fits("timer_extend", "add milk to my list"));
        let fr = f("timer_cancel", "cancel the rice timer").unwrap();
        assert_eq!(fr.label, "rice");
        assert_eq!(fr.kind, Some("timer"));
        let fr = f("timer_cancel", "cancel the reminder to call mum").unwrap();
        assert_eq!(fr.label, "call mum");
        let fr = f("timer_cancel", "turn off the alarm for saturday").unwrap();
        assert_eq!(fr.on, NaiveDate::from_ymd_opt(2026, 12, 5));
        assert_eq!(fr.label, "");
        for text in ["cancel tomorrow's alarm", "cancel the alarm on thursday"] {
            let fr = f("timer_cancel", text).unwrap();
            assert_eq!(fr.on, NaiveDate::from_ymd_opt(2026, 12, 3), "{text}");
            assert_eq!(fr.label, "", "{text}");
        }
        let fr = f("timer_cancel", "cancel my 7am alarm").unwrap();
        assert_eq!(
            fr.at,
            Some(TimeOfDay::At(NaiveTime::from_hms_opt(7, 0, 0).unwrap()))
        );
        assert!(!fits("timer_cancel", "cancel all timers"));
        assert!(!fits("timer_cancel", "cancel my subscription"));
        assert!(fits("timer_cancel_all", "cancel all timers"));
        assert!(fits("timer_cancel_all", "delete all my alarms"));
        assert!(!fits("timer_cancel_all", "cancel the timer"));
        assert!(fits("timer_snooze", "snooze"));
        assert!(fits("timer_snooze", "snooze for 5 minutes"));
        assert_eq!(strong("cancel all timers"), Some("timer_cancel_all"));
        assert_eq!(strong("stop the pasta timer"), Some("timer_cancel"));
        assert_eq!(strong("add two minutes"), Some("timer_extend"));
        let fr = f("timer_extend", "make the laundry timer 5 minutes longer").unwrap();
        assert_eq!((fr.label.as_str(), fr.subtract), ("laundry", false));
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(300))));
        let fr = f("timer_extend", "make it two minutes shorter").unwrap();
        assert!(fr.subtract);
        let fr = f("timer_extend", "give the rice another two minutes").unwrap();
        assert_eq!(fr.label, "rice");
        let fr = f("timer_extend", "give the pasta 3 more minutes").unwrap();
        assert_eq!(fr.label, "pasta");
        assert!(!fits("timer_extend", "give the dog five minutes"));
        assert!(!fits("timer_extend", "make the sauce five minutes"));
        assert_eq!(
            strong("make the egg timer a minute longer"),
            Some("timer_extend")
        );
    }

    #[test]
    fn a_bare_time_verb_sets_a_timer() {
        let fr = f("timer_set", "time 3 minutes for the eggs").unwrap();
        assert_eq!(fr.label, "eggs");
        assert_eq!(fr.duration, Some(Ok(Duration::from_secs(180))));
        assert_eq!(strong("time ninety seconds"), Some("timer_set"));
        assert!(!fits("timer_set", "time flies"));
        assert!(!fits("timer_set", "time for bed"));
    }

    #[test]
    fn to_do_items_with_times() {
        assert!(says_when("call mum at 5"));
        assert!(says_when("check the oven in 20 minutes"));
        assert!(says_when("put the bins out on thursday"));
        assert!(!says_when("buy 2 for 5 pounds"));
        assert!(!says_when("milk"));
        assert!(is_timer_talk("two minutes"));
        assert!(is_timer_talk("another 5 minutes"));
        assert!(!is_timer_talk("eggs"));
    }
}
