//! Calendar reminders ring through the timers.
//!
//! An event's reminder (`[calendar] reminder_lead_minutes` before it
//! starts) is handed to the timers as a `reminder` shortly before it is
//! due, so it rings with the chime and its label ("Reminder: haircut at
//! 11:00"), is stopped by the button or "stop", is persisted, survives a
//! restart and is announced if missed, exactly like one set by voice. The
//! calendar itself never rings and never touches the speaker.

use chrono::{DateTime, Duration, Local, Utc};

use super::{Calendar, CalendarError, Reminder};
use crate::timers::{Kind, NewTimer, Timers, When};

/// How far ahead reminders are handed to the timers: wide enough that a
/// poll every [`POLL`] never misses one, narrow enough that an event moved
/// or cancelled later rarely has its reminder set already.
pub const HORIZON_MINUTES: i64 = 10;
/// How often `earshot run` hands the next reminders over.
pub const POLL: std::time::Duration = std::time::Duration::from_secs(30);
/// The device setting holding the end of the window already handed over,
/// so a restart neither repeats nor skips a reminder.
const HANDED_UNTIL: &str = "calendar_reminders_until";
/// A label is at most this long (the timers refuse longer ones).
const MAX_TITLE_CHARS: usize = 120;

impl Calendar {
    /// Hand the reminders due up to [`HORIZON_MINUTES`] from `now` to
    /// `timers`; returns how many were set. A reminder already handed
    /// over (same label, same time) is not set twice, whatever happened
    /// in between. One whose time passed while earshot was off rings at
    /// once if its event has not started yet, and is left out if it has.
    pub fn schedule_reminders(
        &self,
        timers: &Timers,
        now: DateTime<Utc>,
    ) -> Result<usize, CalendarError> {
        let until = now + Duration::minutes(HORIZON_MINUTES);
        let after = self
            .store()
            .device_state(HANDED_UNTIL)?
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&Utc))
            // First run: nothing from before now.
            .unwrap_or(now);
        if until <= after {
            return Ok(0);
        }
        let pending = timers
            .list(Some(Kind::Reminder))
            .map_err(|e| CalendarError::BadInput(e.to_string()))?;
        let mut set = 0;
        for reminder in self.reminders_due(after, until)? {
            let label = label_of(&reminder);
            let when = if reminder.remind_at > now {
                When::At(reminder.remind_at.with_timezone(&Local).naive_local())
            } else if reminder.occurrence.start.with_timezone(&Utc) > now {
                When::In(std::time::Duration::from_secs(1))
            } else {
                tracing::info!(event = %reminder.occurrence.title, "calendar reminder passed while earshot was off; its event has started");
                continue;
            };
            let already = pending.iter().any(|t| {
                t.label == label
                    && (t.due.with_timezone(&Utc) - reminder.remind_at)
                        .num_seconds()
                        .abs()
                        < 2
            });
            if already {
                continue;
            }
            match timers.add(NewTimer {
                kind: Kind::Reminder,
                label: Some(label),
                when,
                repeat: None,
            }) {
                Ok(_) => set += 1,
                Err(e) => {
                    tracing::warn!(event = %reminder.occurrence.title, "calendar reminder not set: {e}")
                }
            }
        }
        self.store()
            .set_device_state(HANDED_UNTIL, &until.to_rfc3339())?;
        Ok(set)
    }

    /// Every [`POLL`], hand the next reminders to `timers`, on its own
    /// thread (never the voice loop's), until `stop`.
    pub fn start_reminders(
        &self,
        timers: Timers,
        stop: crate::cancel::CancelToken,
    ) -> Option<std::thread::JoinHandle<()>> {
        let calendar = self.clone();
        std::thread::Builder::new()
            .name("calendar-reminders".into())
            .spawn(move || {
                while !stop.is_cancelled() {
                    match calendar.schedule_reminders(&timers, Utc::now()) {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(reminders = n, "calendar reminders set"),
                        Err(e) => tracing::warn!("calendar reminders: {e}"),
                    }
                    let until = std::time::Instant::now() + POLL;
                    while !stop.is_cancelled() && std::time::Instant::now() < until {
                        std::thread::sleep(std::time::Duration::from_millis(250));
                    }
                }
            })
            .map_err(|e| tracing::error!("cannot start the calendar reminders thread: {e}"))
            .ok()
    }
}

/// "haircut at 11:00": what the ring says after "Reminder:".
fn label_of(reminder: &Reminder) -> String {
    let title: String = reminder
        .occurrence
        .title
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    let at = reminder.occurrence.start.with_timezone(&Local);
    format!("{} at {}", title.trim(), at.format("%H:%M"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::{CalendarConfig, NewEvent};
    use crate::store::Store;
    use crate::timers::TimersConfig;

    fn parts() -> (tempfile::TempDir, Calendar, Timers) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        let paths = crate::paths::Paths::new(dir.path(), dir.path());
        let timers = Timers::new(&TimersConfig::default(), &paths, store.clone());
        let calendar = Calendar::new(&CalendarConfig::default(), store);
        (dir, calendar, timers)
    }

    fn event(calendar: &Calendar, title: &str, starts_in_min: i64) -> DateTime<Utc> {
        let start = Utc::now() + Duration::minutes(starts_in_min);
        calendar
            .add(&NewEvent {
                title: title.into(),
                start,
                end: start + Duration::hours(1),
                location: String::new(),
            })
            .unwrap();
        start
    }

    fn reminders(timers: &Timers) -> Vec<crate::timers::Timer> {
        timers.list(Some(Kind::Reminder)).unwrap()
    }

    #[test]
    fn a_reminder_is_handed_to_the_timers_once_at_its_time() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        // Its reminder is 5 minutes from now: inside the horizon.
        let start = event(&calendar, "Haircut", lead + 5);
        // Its reminder is 2 hours away: not yet.
        event(&calendar, "Dentist", lead + 120);
        let now = Utc::now();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 1);
        let set = reminders(&timers);
        assert_eq!(set.len(), 1, "{set:?}");
        let at = start.with_timezone(&Local).format("%H:%M").to_string();
        assert_eq!(set[0].label, format!("Haircut at {at}"));
        let due = set[0].due.with_timezone(&Utc);
        let want = start - Duration::minutes(lead);
        assert!((due - want).num_seconds().abs() <= 1, "{due} vs {want}");
        // Polled again (or after a restart): not set twice.
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 0);
        assert_eq!(
            calendar
                .schedule_reminders(&timers, now + Duration::seconds(30))
                .unwrap(),
            0
        );
        // The window already handed over is forgotten: still not twice.
        calendar
            .store()
            .set_device_state(HANDED_UNTIL, &now.to_rfc3339())
            .unwrap();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 0);
        assert_eq!(reminders(&timers).len(), 1);
    }

    #[test]
    fn a_reminder_missed_while_off_rings_only_if_its_event_is_still_ahead() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        let now = Utc::now();
        // earshot last handed reminders over an hour ago.
        calendar
            .store()
            .set_device_state(HANDED_UNTIL, &(now - Duration::hours(1)).to_rfc3339())
            .unwrap();
        // Its reminder passed 5 minutes ago, the event is 10 minutes away.
        event(&calendar, "Call with Sam", lead - 5);
        // Its reminder passed and the event has started.
        event(&calendar, "Breakfast", -20);
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 1);
        let set = reminders(&timers);
        assert_eq!(set.len(), 1, "{set:?}");
        assert!(
            set[0].label.starts_with("Call with Sam at "),
            "{}",
            set[0].label
        );
        assert!(set[0].remaining_s <= 2, "{}", set[0].remaining_s);
    }

    #[test]
    fn a_long_title_still_makes_a_reminder() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        event(&calendar, &"very long meeting name ".repeat(20), lead + 3);
        assert_eq!(calendar.schedule_reminders(&timers, Utc::now()).unwrap(), 1);
        assert!(reminders(&timers)[0].label.chars().count() <= 200);
    }
}
