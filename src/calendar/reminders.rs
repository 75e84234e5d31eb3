//! Calendar reminders ring through the timers.
//!
//! An event's reminder (`[calendar] reminder_lead_minutes` before it
//! starts) is handed to the timers as a `reminder` shortly before it is
//! due, so it rings with the chime and its label ("Reminder: haircut at
//! 11:00"), is stopped by the button or "stop", is persisted, survives a
//! restart and is announced if missed, exactly like one set by voice. The
//! calendar itself never rings and never touches the speaker.
//!
//! Each reminder handed over is remembered with its event and start (the
//! device setting [`HANDED`]), so every poll also reconciles: an event
//! moved, retitled or deleted after its reminder was handed over has that
//! reminder cancelled before it rings, and the moved event gets a new one
//! (at once, when its new reminder time has already passed).

use chrono::{DateTime, Duration, Local, Utc};
use serde::{Deserialize, Serialize};

use super::{Calendar, CalendarError, Reminder};
use crate::timers::{Kind, NewTimer, State, Timers, When};

/// How far ahead reminders are handed to the timers: wide enough that a
/// poll every [`POLL`] never misses one.
pub const HORIZON_MINUTES: i64 = 10;
/// How often `earshot run` hands the next reminders over (and notices
/// events moved since).
pub const POLL: std::time::Duration = std::time::Duration::from_secs(30);
/// The device setting holding the end of the window already handed over:
/// a reminder whose time passed before it was never seen (earshot was off)
/// rings at start; one that passed while earshot watched was handled then.
const HANDED_UNTIL: &str = "calendar_reminders_until";
/// The device setting holding the reminders handed over whose events have
/// not started yet (JSON), so a restart neither repeats nor loses them.
const HANDED: &str = "calendar_reminders_handed";
/// A label is at most this long (the timers refuse longer ones).
const MAX_TITLE_CHARS: usize = 120;

/// One reminder handed to the timers: which occurrence it is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Handed {
    /// The calendar row.
    event: i64,
    /// The occurrence's start (Unix seconds).
    start: i64,
    /// What the ring says; a retitled event gets a new reminder.
    label: String,
    /// The timers' row.
    timer: i64,
}

impl Handed {
    fn is_for(&self, reminder: &Reminder, label: &str) -> bool {
        self.event == reminder.occurrence.id
            && self.start == reminder.occurrence.start.timestamp()
            && self.label == label
    }
}

impl Calendar {
    /// Hand the reminders due up to [`HORIZON_MINUTES`] from `now` to
    /// `timers`, and cancel the pending ones whose event moved or went
    /// away; returns how many were set. A reminder already handed over is
    /// not set twice, whatever happened to it since (rung, stopped,
    /// cancelled by voice). One whose time passed while earshot was off, or
    /// whose event was just moved so that its time has passed, rings at
    /// once if its event has not started yet.
    pub fn schedule_reminders(
        &self,
        timers: &Timers,
        now: DateTime<Utc>,
    ) -> Result<usize, CalendarError> {
        let until = now + Duration::minutes(HORIZON_MINUTES);
        let lead = Duration::minutes(self.config().reminder_lead_minutes as i64);
        let watched_until = self
            .store()
            .device_state(HANDED_UNTIL)?
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&Utc))
            // First run: nothing from before now.
            .unwrap_or(now);
        let mut handed: Vec<Handed> = self
            .store()
            .device_state(HANDED)?
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default();
        // Every reminder whose event has not started yet, up to the horizon.
        let wanted: Vec<(Reminder, String)> = self
            .reminders_due(now - lead - Duration::minutes(1), until)?
            .into_iter()
            .filter(|r| r.occurrence.start.with_timezone(&Utc) > now)
            .map(|r| {
                let label = label_of(&r);
                (r, label)
            })
            .collect();

        // Reconcile: a reminder not yet rung whose occurrence is gone (the
        // event moved, was retitled or deleted) is cancelled.
        let mut moved = Vec::new();
        handed.retain(|h| {
            if h.start <= now.timestamp() {
                return false; // its event started: nothing left to guard
            }
            if wanted.iter().any(|(r, label)| h.is_for(r, label)) {
                return true;
            }
            match timers.get(h.timer) {
                Ok(Some(t)) if t.state == State::Pending => match timers.cancel(h.timer) {
                    Ok(_) => {
                        tracing::info!(label = %h.label, "calendar event moved or removed: its reminder is cancelled");
                        moved.push(h.event);
                        false
                    }
                    Err(e) => {
                        tracing::warn!("could not cancel the reminder of a moved event: {e}");
                        true
                    }
                },
                Ok(_) => {
                    // Rung, ringing or cancelled already: leave it be.
                    moved.push(h.event);
                    false
                }
                Err(e) => {
                    tracing::warn!("calendar reminders: {e}");
                    true
                }
            }
        });

        let pending = timers
            .list(Some(Kind::Reminder))
            .map_err(|e| CalendarError::BadInput(e.to_string()))?;
        let mut set = 0;
        for (reminder, label) in wanted {
            if handed.iter().any(|h| h.is_for(&reminder, &label)) {
                continue;
            }
            let when = if reminder.remind_at > now {
                When::At(reminder.remind_at.with_timezone(&Local).naive_local())
            } else if reminder.remind_at > watched_until || moved.contains(&reminder.occurrence.id)
            {
                // Passed while earshot was off, or the event was just moved
                // so that its reminder time has passed: say it now.
                When::In(std::time::Duration::from_secs(1))
            } else {
                // Added (or first seen) after its reminder time: the user
                // just made it, no reminder needed.
                continue;
            };
            // Handed over before this record existed (same label and time).
            let already = pending.iter().find(|t| {
                t.label == label
                    && (t.due.with_timezone(&Utc) - reminder.remind_at)
                        .num_seconds()
                        .abs()
                        < 2
            });
            let timer = match already {
                Some(t) => t.id,
                None => match timers.add(NewTimer {
                    kind: Kind::Reminder,
                    label: Some(label.clone()),
                    when,
                    repeat: None,
                }) {
                    Ok(t) => {
                        set += 1;
                        t.id
                    }
                    Err(e) => {
                        tracing::warn!(event = %reminder.occurrence.title, "calendar reminder not set: {e}");
                        continue;
                    }
                },
            };
            handed.push(Handed {
                event: reminder.occurrence.id,
                start: reminder.occurrence.start.timestamp(),
                label,
                timer,
            });
        }
        let json = serde_json::to_string(&handed)
            .map_err(|e| CalendarError::BadInput(format!("reminder record: {e}")))?;
        self.store().set_device_state(HANDED, &json)?;
        self.store()
            .set_device_state(HANDED_UNTIL, &until.max(watched_until).to_rfc3339())?;
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
    use crate::calendar::{CalendarConfig, EventChange, NewEvent};
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

    fn state(timers: &Timers, id: i64) -> Option<State> {
        timers.get(id).unwrap().map(|t| t.state)
    }

    #[test]
    fn a_moved_event_gets_its_reminder_moved_before_the_old_one_rings() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        event(&calendar, "Haircut", lead + 5);
        let now = Utc::now();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 1);
        let old = reminders(&timers)[0].clone();

        // Moved two hours later: the old reminder is cancelled, the new one
        // waits until its own time comes inside the horizon.
        let later = now + Duration::minutes(lead + 125);
        let change = EventChange {
            start: Some(later),
            end: Some(later + Duration::hours(1)),
            ..Default::default()
        };
        calendar.update("haircut", &change).unwrap();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 0);
        assert_eq!(
            state(&timers, old.id),
            None,
            "the old reminder still stands"
        );
        assert!(reminders(&timers).is_empty());
        let then = now + Duration::minutes(120);
        assert_eq!(calendar.schedule_reminders(&timers, then).unwrap(), 1);
        let new = reminders(&timers);
        let at = later.with_timezone(&Local).format("%H:%M").to_string();
        assert_eq!(new[0].label, format!("Haircut at {at}"));

        // Moved sooner, so that its reminder time has already passed: it
        // rings at once (the event is still ahead).
        let soon = then + Duration::minutes(5);
        let change = EventChange {
            start: Some(soon),
            end: Some(soon + Duration::hours(1)),
            ..Default::default()
        };
        calendar.update("haircut", &change).unwrap();
        assert_eq!(calendar.schedule_reminders(&timers, then).unwrap(), 1);
        let now_set = reminders(&timers);
        assert_eq!(now_set.len(), 1, "{now_set:?}");
        assert_eq!(state(&timers, new[0].id), None);
        let at = soon.with_timezone(&Local).format("%H:%M").to_string();
        assert_eq!(now_set[0].label, format!("Haircut at {at}"));
        assert!(now_set[0].remaining_s <= 2, "{}", now_set[0].remaining_s);
        // Polled again: nothing more.
        assert_eq!(calendar.schedule_reminders(&timers, then).unwrap(), 0);
    }

    #[test]
    fn a_deleted_or_retitled_event_does_not_ring_its_old_reminder() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        event(&calendar, "Drinks with Sam", lead + 4);
        event(&calendar, "Standup", lead + 6);
        let now = Utc::now();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 2);
        let before = reminders(&timers);
        calendar.remove("drinks with sam").unwrap();
        let change = EventChange {
            title: Some("Team standup".into()),
            ..Default::default()
        };
        calendar.update("standup", &change).unwrap();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 1);
        let after = reminders(&timers);
        assert_eq!(after.len(), 1, "{after:?}");
        assert!(after[0].label.starts_with("Team standup at "), "{after:?}");
        for t in before {
            assert_eq!(state(&timers, t.id), None, "{} still pending", t.label);
        }
    }

    #[test]
    fn a_reminder_stopped_or_cancelled_by_voice_is_not_set_again() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        event(&calendar, "Haircut", lead + 5);
        let now = Utc::now();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 1);
        let id = reminders(&timers)[0].id;
        timers.cancel(id).unwrap();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 0);
        assert_eq!(
            calendar
                .schedule_reminders(&timers, now + Duration::minutes(1))
                .unwrap(),
            0
        );
        assert!(reminders(&timers).is_empty());
    }

    #[test]
    fn an_event_added_after_its_reminder_time_gets_no_late_reminder() {
        let (_dir, calendar, timers) = parts();
        let lead = CalendarConfig::default().reminder_lead_minutes as i64;
        let now = Utc::now();
        assert_eq!(calendar.schedule_reminders(&timers, now).unwrap(), 0);
        // Made by voice five minutes before it starts (its reminder time
        // passed while earshot was watching): no reminder at once.
        event(&calendar, "Call mum", lead - 10);
        assert_eq!(
            calendar
                .schedule_reminders(&timers, now + Duration::seconds(30))
                .unwrap(),
            0
        );
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
