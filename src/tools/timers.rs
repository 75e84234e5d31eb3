//! The agent's timer tools over the device's one [`Timers`] service:
//! `set_timer`, `list_timers`, `cancel_timer`, `extend_timer`,
//! `set_alarm`, `set_reminder`.
//!
//! Why here and thin: the service owns the rules (limits, DST, what rings
//! when); a tool only reads its JSON arguments strictly, picks the one
//! timer meant (never guessing between several), and says the outcome as
//! a sentence the model can repeat. A limit the user hit ("a thousand
//! hours") is the service's sentence as a tool error.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use serde_json::{json, Value};

use super::{Tool, ToolError, ToolRegistry, ToolsConfig};
use crate::timers::{self, parse, Kind, NewTimer, Timer, TimerError, Timers, When};

/// The tool names, as `tools.enabled` and [`super::TOOLS`] spell them.
pub const NAMES: &[&str] = &[
    "set_timer",
    "list_timers",
    "cancel_timer",
    "extend_timer",
    "set_alarm",
    "set_reminder",
];

/// Offer the timer tools `tools.enabled` names, over `timers`.
pub fn offer(reg: &mut ToolRegistry, t: &ToolsConfig, timers: &Timers) {
    for tool in tools(timers.clone()) {
        if t.enabled.iter().any(|e| e == tool.name()) {
            reg.register(tool);
        }
    }
}

/// The six tools over one service.
pub fn tools(timers: Timers) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(SetTimer(timers.clone())),
        Arc::new(ListTimers(timers.clone())),
        Arc::new(CancelTimer(timers.clone())),
        Arc::new(ExtendTimer(timers.clone())),
        Arc::new(SetAlarm(timers.clone())),
        Arc::new(SetReminder(timers)),
    ]
}

/// `set_timer {"duration_s"|"duration", "label"?}`
pub struct SetTimer(pub Timers);
/// `list_timers {"kind"?}`
pub struct ListTimers(pub Timers);
/// `cancel_timer {"id"|"label"|"all", "kind"?}`
pub struct CancelTimer(pub Timers);
/// `extend_timer {"id"|"label", "by_s"|"by"}`
pub struct ExtendTimer(pub Timers);
/// `set_alarm {"time", "date"?, "repeat"?, "label"?}`
pub struct SetAlarm(pub Timers);
/// `set_reminder {"text", "at"|"in"|"in_s"}`
pub struct SetReminder(pub Timers);

fn failed(e: TimerError) -> ToolError {
    ToolError::Failed(e.to_string())
}

fn bad(message: impl Into<String>) -> ToolError {
    ToolError::BadArguments(message.into())
}

/// An optional string argument; wrong types are refused.
fn opt_str<'a>(args: &'a Value, name: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim())),
        Some(_) => Err(bad(format!("'{name}' must be a string"))),
    }
}

/// An optional integer argument; wrong types are refused.
fn opt_int(args: &Value, name: &str) -> Result<Option<i64>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| bad(format!("'{name}' must be a whole number"))),
    }
}

fn opt_kind(args: &Value) -> Result<Option<Kind>, ToolError> {
    opt_str(args, "kind")?
        .map(|k| k.parse::<Kind>().map_err(|e| bad(e.to_string())))
        .transpose()
}

/// A length from `<secs_name>` (seconds) or `<text_name>` ("5m", "20 minutes").
fn length(args: &Value, secs_name: &str, text_name: &str) -> Result<Option<i64>, ToolError> {
    if let Some(secs) = opt_int(args, secs_name)? {
        return Ok(Some(secs));
    }
    match opt_str(args, text_name)? {
        Some(text) => {
            let (negative, text) = match text.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, text),
            };
            let d = parse::duration(text).map_err(|e| bad(e.to_string()))?;
            let secs = i64::try_from(d.as_secs()).map_err(|_| failed(TimerError::OutOfRange))?;
            Ok(Some(if negative { -secs } else { secs }))
        }
        None => Ok(None),
    }
}

/// How a timer is named in a sentence: "the rice timer", "the 7:00 alarm".
fn name_of(t: &Timer) -> String {
    let label = if t.label.is_empty() {
        String::new()
    } else {
        format!("\"{}\" ", t.label)
    };
    format!("the {label}{} (id {})", t.kind, t.id)
}

/// One line about a timer for the model.
fn describe(t: &Timer) -> String {
    let mut s = format!(
        "{}: due {}",
        name_of(t),
        t.due.format("%a %Y-%m-%d %H:%M:%S")
    );
    if t.state == timers::State::Ringing {
        s.push_str(", ringing now");
    } else {
        s.push_str(&format!(", {} left", timers::spoken_length(t.remaining_s)));
    }
    if let Some(r) = &t.repeat {
        s.push_str(&format!(", repeats {r}"));
    }
    s
}

/// The one active timer the arguments mean, or a sentence the model can
/// read (none, or which ones when several match).
fn target(timers: &Timers, args: &Value) -> Result<Result<Timer, String>, ToolError> {
    if let Some(id) = opt_int(args, "id")? {
        return match timers.get(id).map_err(failed)? {
            Some(t) => Ok(Ok(t)),
            None => Ok(Err(TimerError::NotFound(id).to_string())),
        };
    }
    let kind = opt_kind(args)?;
    let label = opt_str(args, "label")?.unwrap_or("");
    let query = format!("{label} {}", kind.map(|k| k.name()).unwrap_or(""));
    let found = timers.find(&query).map_err(failed)?;
    Ok(match found.as_slice() {
        [] if label.is_empty() => Err("Nothing is set.".into()),
        [] => Err(format!("No timer, alarm or reminder matches \"{label}\".")),
        [one] => Ok(one.clone()),
        many => Err(format!(
            "Several match: {}. Ask the user which one they mean.",
            many.iter().map(describe).collect::<Vec<_>>().join("; ")
        )),
    })
}

const KIND_SCHEMA: &str = "timer, alarm or reminder";

impl Tool for SetTimer {
    fn name(&self) -> &str {
        "set_timer"
    }
    fn description(&self) -> &str {
        "Start a countdown timer (1 second to 24 hours), optionally named, e.g. a rice timer for 18 minutes."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "duration_s": {"type": "integer", "minimum": 1, "maximum": 86400, "description": "Length in seconds"},
                "duration": {"type": "string", "description": "Length as text instead, e.g. '90s', '5m', '1h30m', '20 minutes'"},
                "label": {"type": "string", "maxLength": timers::MAX_LABEL_CHARS, "description": "What the timer is for, e.g. 'rice'"}
            },
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let secs = length(args, "duration_s", "duration")?
            .ok_or_else(|| bad("give 'duration_s' (seconds) or 'duration' (e.g. '5m')"))?;
        let secs = u64::try_from(secs).map_err(|_| failed(TimerError::OutOfRange))?;
        let t = self
            .0
            .add(NewTimer {
                kind: Kind::Timer,
                label: opt_str(args, "label")?.map(str::to_string),
                when: When::In(Duration::from_secs(secs)),
                repeat: None,
            })
            .map_err(failed)?;
        Ok(format!(
            "Set {}: {}; it rings at {}.",
            name_of(&t),
            timers::spoken_length(t.duration_s.unwrap_or(t.remaining_s)),
            t.due.format("%H:%M:%S")
        ))
    }
}

impl Tool for ListTimers {
    fn name(&self) -> &str {
        "list_timers"
    }
    fn description(&self) -> &str {
        "List the timers, alarms and reminders that are set (or ringing), with the time left on each."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["timer", "alarm", "reminder"], "description": "Only this kind"}
            },
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let kind = opt_kind(args)?;
        let all = self.0.list(kind).map_err(failed)?;
        if all.is_empty() {
            return Ok(match kind {
                Some(k) => format!("No {k} is set."),
                None => "No timers, alarms or reminders are set.".into(),
            });
        }
        Ok(format!(
            "{} set: {}.",
            all.len(),
            all.iter().map(describe).collect::<Vec<_>>().join("; ")
        ))
    }
}

impl Tool for CancelTimer {
    fn name(&self) -> &str {
        "cancel_timer"
    }
    fn description(&self) -> &str {
        "Cancel a timer, alarm or reminder by id or label (or the only one set), or all of them (of one kind) with all=true. Confirm with the user before cancelling all."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "description": "The id list_timers shows"},
                "label": {"type": "string", "description": "Its name or a word of it, e.g. 'rice'"},
                "all": {"type": "boolean", "description": "Cancel every one (of 'kind' when given)"},
                "kind": {"type": "string", "enum": ["timer", "alarm", "reminder"], "description": KIND_SCHEMA}
            },
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let all = match args.get("all") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("'all' must be true or false")),
        };
        if all || opt_str(args, "label")?.is_some_and(|l| l.eq_ignore_ascii_case("all")) {
            let kind = opt_kind(args)?;
            let n = self.0.cancel_all(kind).map_err(failed)?;
            let what = kind.map(|k| k.name()).unwrap_or("timer, alarm or reminder");
            return Ok(match n {
                0 => format!("There was no {what} to cancel."),
                1 => format!("Cancelled 1 {what}."),
                n => format!("Cancelled {n} ({what}s)."),
            });
        }
        match target(&self.0, args)? {
            Ok(t) => {
                let t = self.0.cancel(t.id).map_err(failed)?;
                Ok(format!("Cancelled {}.", name_of(&t)))
            }
            Err(sentence) => Ok(sentence),
        }
    }
}

impl Tool for ExtendTimer {
    fn name(&self) -> &str {
        "extend_timer"
    }
    fn description(&self) -> &str {
        "Add time to (or, with a negative length, take time off) a timer, alarm or reminder, by id or label, or the only one set."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "description": "The id list_timers shows"},
                "label": {"type": "string", "description": "Its name or a word of it"},
                "kind": {"type": "string", "enum": ["timer", "alarm", "reminder"], "description": KIND_SCHEMA},
                "by_s": {"type": "integer", "description": "Seconds to add; negative takes time off"},
                "by": {"type": "string", "description": "Length as text instead, e.g. '2m'; '-1m' takes a minute off"}
            },
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let by = length(args, "by_s", "by")?
            .ok_or_else(|| bad("give 'by_s' (seconds) or 'by' (e.g. '2m')"))?;
        match target(&self.0, args)? {
            Ok(t) => {
                let t = self
                    .0
                    .extend(t.id, TimeDelta::seconds(by))
                    .map_err(failed)?;
                Ok(format!(
                    "{} now has {} left.",
                    capital(&name_of(&t)),
                    timers::spoken_length(t.remaining_s)
                ))
            }
            Err(sentence) => Ok(sentence),
        }
    }
}

impl Tool for SetAlarm {
    fn name(&self) -> &str {
        "set_alarm"
    }
    fn description(&self) -> &str {
        "Set an alarm at a local clock time: the next one (today or tomorrow), on a date, or repeating (daily, weekdays, weekends, or days like 'mon,wed')."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "time": {"type": "string", "pattern": "^[0-2]?[0-9]:[0-5][0-9]$", "description": "24-hour local time HH:MM"},
                "date": {"type": "string", "description": "YYYY-MM-DD, 'today' or 'tomorrow'; omit for the next such time"},
                "repeat": {"type": "string", "description": "daily, weekdays, weekends, or days like 'mon,wed'"},
                "label": {"type": "string", "maxLength": timers::MAX_LABEL_CHARS, "description": "What it is for"}
            },
            "required": ["time"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let time_text =
            opt_str(args, "time")?.ok_or_else(|| bad("missing the 'time' field (HH:MM)"))?;
        let time = parse::time_of_day(time_text)
            .ok_or_else(|| bad(format!("'{time_text}' is not a time; use HH:MM, 24-hour")))?;
        let repeat = opt_str(args, "repeat")?
            .map(|r| parse::repeat(r).map_err(|e| bad(e.to_string())))
            .transpose()?;
        let today = chrono::Local::now().date_naive();
        let when = match opt_str(args, "date")? {
            Some(d) => {
                let date = parse::date(d, today).ok_or_else(|| {
                    bad(format!(
                        "'{d}' is not a date; use YYYY-MM-DD, today or tomorrow"
                    ))
                })?;
                if repeat.is_some() {
                    return Err(bad("give either 'date' or 'repeat', not both"));
                }
                When::At(date.and_time(time))
            }
            None => When::Next { time, days: None },
        };
        let t = self
            .0
            .add(NewTimer {
                kind: Kind::Alarm,
                label: opt_str(args, "label")?.map(str::to_string),
                when,
                repeat,
            })
            .map_err(failed)?;
        Ok(format!("Set {}.", describe(&t)))
    }
}

impl Tool for SetReminder {
    fn name(&self) -> &str {
        "set_reminder"
    }
    fn description(&self) -> &str {
        "Remind the user of something (spoken aloud) at a time or after a delay. Without a time, add a to-do instead."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "maxLength": timers::MAX_LABEL_CHARS, "description": "What to say, e.g. 'check the oven'"},
                "at": {"type": "string", "description": "When: HH:MM (the next one), 'tomorrow 06:30', 'YYYY-MM-DD HH:MM' (local) or RFC 3339"},
                "in": {"type": "string", "description": "Or after a delay, e.g. '20m', '1h30m', '20 minutes'"},
                "in_s": {"type": "integer", "minimum": 1, "description": "Or after this many seconds"}
            },
            "required": ["text"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let text = opt_str(args, "text")?.ok_or_else(|| bad("missing the 'text' field"))?;
        let delay = length(args, "in_s", "in")?;
        let at = opt_str(args, "at")?;
        let when = match (delay, at) {
            (Some(_), Some(_)) => return Err(bad("give either 'at' or 'in', not both")),
            (None, None) => return Err(bad("give 'at' (a time) or 'in' (a delay)")),
            (Some(secs), None) => When::In(Duration::from_secs(
                u64::try_from(secs).map_err(|_| failed(TimerError::InPast))?,
            )),
            (None, Some(at)) => {
                parse::at(at, chrono::Local::now().date_naive()).map_err(|e| bad(e.to_string()))?
            }
        };
        let t = self
            .0
            .add(NewTimer {
                kind: Kind::Reminder,
                label: Some(text.to_string()),
                when,
                repeat: None,
            })
            .map_err(failed)?;
        Ok(format!("Set {}.", describe(&t)))
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::Paths;
    use crate::store::Store;

    fn setup() -> (tempfile::TempDir, Timers, ToolRegistry) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let timers = Timers::new(
            &Default::default(),
            &Paths::new(dir.path(), dir.path()),
            store,
        );
        let mut reg = ToolRegistry::new(Duration::from_secs(5));
        offer(&mut reg, &ToolsConfig::default(), &timers);
        (dir, timers, reg)
    }

    #[test]
    fn every_tool_is_offered_with_an_object_schema() {
        let (_d, _t, reg) = setup();
        assert_eq!(reg.names(), NAMES);
        for spec in reg.specs() {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(
                super::super::is_known_tool(&spec.name),
                "{} in TOOLS",
                spec.name
            );
        }
    }

    #[test]
    fn set_list_extend_cancel_through_the_registry() {
        let (_d, timers, reg) = setup();
        let out = reg
            .call("set_timer", r#"{"duration":"18m","label":"rice"}"#)
            .unwrap();
        assert!(
            out.contains("\"rice\" timer") && out.contains("18 minutes"),
            "{out}"
        );
        reg.call("set_timer", r#"{"duration_s":90}"#).unwrap();
        let list = reg.call("list_timers", "{}").unwrap();
        assert!(list.starts_with("2 set:"), "{list}");
        // Two timers: which one is ambiguous without a label.
        let which = reg.call("extend_timer", r#"{"by":"2m"}"#).unwrap();
        assert!(which.contains("Several match"), "{which}");
        let out = reg
            .call("extend_timer", r#"{"label":"rice","by_s":120}"#)
            .unwrap();
        assert!(out.contains("20 minutes left"), "{out}");
        let out = reg.call("cancel_timer", r#"{"label":"rice"}"#).unwrap();
        assert!(out.starts_with("Cancelled the \"rice\" timer"), "{out}");
        // The only one left needs no name.
        let out = reg.call("cancel_timer", "{}").unwrap();
        assert!(out.starts_with("Cancelled the timer"), "{out}");
        assert!(timers.list(None).unwrap().is_empty());
        let out = reg.call("cancel_timer", r#"{"all":true}"#).unwrap();
        assert!(out.contains("no timer"), "{out}");
    }

    #[test]
    fn alarms_and_reminders() {
        let (_d, timers, reg) = setup();
        let out = reg
            .call("set_alarm", r#"{"time":"07:00","repeat":"weekdays"}"#)
            .unwrap();
        assert!(
            out.contains("repeats weekdays") && out.contains("07:00:00"),
            "{out}"
        );
        reg.call(
            "set_reminder",
            r#"{"text":"check the oven","in":"20 minutes"}"#,
        )
        .unwrap();
        let r = timers.list(Some(Kind::Reminder)).unwrap();
        assert_eq!(
            (r[0].label.as_str(), r[0].remaining_s),
            ("check the oven", 1200)
        );
        let out = reg.call("list_timers", r#"{"kind":"alarm"}"#).unwrap();
        assert!(out.starts_with("1 set:"), "{out}");
    }

    #[test]
    fn limits_and_bad_arguments_are_sentences() {
        let (_d, timers, reg) = setup();
        let err = reg
            .call("set_timer", r#"{"duration":"1000h"}"#)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Timers can run from one second to 24 hours."
        );
        let err = reg.call("set_timer", r#"{"duration_s":-300}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Timers can run from one second to 24 hours."
        );
        let err = reg
            .call(
                "set_timer",
                &json!({"duration_s": 60, "label": "x".repeat(5000)}).to_string(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("too long"), "{err}");
        let err = reg.call("set_alarm", r#"{"time":"25:00"}"#).unwrap_err();
        assert!(matches!(err, ToolError::BadArguments(_)), "{err}");
        let err = reg.call("set_reminder", r#"{"text":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("'at'"), "{err}");
        let err = reg
            .call("set_timer", r#"{"duration_s":"ten"}"#)
            .unwrap_err();
        assert!(matches!(err, ToolError::BadArguments(_)), "{err}");
        assert!(timers.list(None).unwrap().is_empty(), "nothing stored");
        let out = reg.call("cancel_timer", r#"{"id":99}"#).unwrap();
        assert_eq!(out, "There is no timer, alarm or reminder number 99.");
    }
}
