//! The service over a real SQLite file and a [`ManualClock`]: storing,
//! limits, changes, and the scheduler's ringing, stopping, missed
//! announcements and its two clocks.

use super::*;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

struct Fixture {
    dir: tempfile::TempDir,
    clock: ManualClock,
    timers: Timers,
}

fn start_wall() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// An alarm every day at the local time one minute after the start.
fn daily_alarm_in_a_minute(f: &Fixture) -> Timer {
    let in_a_minute = (start_wall() + TimeDelta::minutes(1))
        .with_timezone(&chrono::Local)
        .time();
    f.timers
        .add(NewTimer {
            kind: Kind::Alarm,
            label: None,
            when: When::Next {
                time: in_a_minute,
                days: None,
            },
            repeat: Some(Weekdays::DAILY),
        })
        .unwrap()
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(start_wall());
    let timers = open(&dir, &clock);
    Fixture { dir, clock, timers }
}

/// A second service over the same state dir (another process, a restart).
fn open(dir: &tempfile::TempDir, clock: &ManualClock) -> Timers {
    let store = Store::open_in(dir.path()).unwrap();
    let paths = Paths::new(dir.path(), dir.path());
    Timers::with_clock(
        &TimersConfig::default(),
        &paths,
        store,
        Arc::new(clock.clone()),
    )
}

fn timer(secs: u64, label: &str) -> NewTimer {
    NewTimer {
        kind: Kind::Timer,
        label: Some(label.into()),
        when: When::In(Duration::from_secs(secs)),
        repeat: None,
    }
}

/// The next event, or a panic naming what was awaited.
fn next(rx: &Receiver<TimerEvent>, what: &str) -> TimerEvent {
    rx.recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("no event: waited for {what}"))
}

fn state_of(f: &Fixture, id: i64) -> State {
    f.timers
        .inner
        .store
        .with_conn(|c| db::get(c, id))
        .unwrap()
        .unwrap()
        .state
}

#[test]
fn set_list_get_and_the_contract_json() {
    let f = fixture();
    let t = f.timers.add(timer(300, "  rice  ")).unwrap();
    assert_eq!(t.label, "rice");
    assert_eq!(t.remaining_s, 300);
    assert_eq!(t.duration_s, Some(300));
    let v = serde_json::to_value(&t).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["id", "kind", "label", "due", "remaining_s", "repeat"]
    );
    assert_eq!(v["kind"], "timer");
    assert_eq!(v["repeat"], json!(null));
    let due = DateTime::parse_from_rfc3339(v["due"].as_str().unwrap()).unwrap();
    assert_eq!(due, start_wall() + TimeDelta::minutes(5));

    let egg = f.timers.add(timer(60, "egg")).unwrap();
    let list = f.timers.list(None).unwrap();
    assert_eq!(
        list.iter().map(|t| t.id).collect::<Vec<_>>(),
        [egg.id, t.id],
        "soonest first"
    );
    f.clock.advance(Duration::from_millis(30_500));
    assert_eq!(f.timers.get(egg.id).unwrap().unwrap().remaining_s, 30);
    assert_eq!(f.timers.list(Some(Kind::Alarm)).unwrap(), vec![]);
    // Another handle on the same file (the CLI) sees the same rows.
    let other = open(&f.dir, &f.clock);
    assert_eq!(other.list(None).unwrap().len(), 2);
}

#[test]
fn limits_and_labels_are_refused_with_a_sentence_and_nothing_stored() {
    let f = fixture();
    for secs in [0, 24 * 3600 + 1, 1000 * 3600] {
        let err = f.timers.add(timer(secs, "x")).unwrap_err();
        assert!(matches!(err, TimerError::OutOfRange), "{secs}: {err}");
        assert_eq!(
            err.to_string(),
            "Timers can run from one second to 24 hours."
        );
    }
    assert!(f.timers.add(timer(1, "")).is_ok(), "one second works");
    assert!(f.timers.add(timer(24 * 3600, "")).is_ok(), "24 hours works");
    let long = "x".repeat(5000);
    let err = f.timers.add(timer(60, &long)).unwrap_err();
    assert!(matches!(err, TimerError::LabelTooLong));
    assert!(!err.to_string().contains('\n'));
    let alarm_as_timer = NewTimer {
        kind: Kind::Timer,
        label: None,
        when: When::Next {
            time: NaiveTime::from_hms_opt(7, 0, 0).unwrap(),
            days: None,
        },
        repeat: None,
    };
    assert!(matches!(
        f.timers.add(alarm_as_timer),
        Err(TimerError::NeedsDuration)
    ));
    let past = NewTimer {
        kind: Kind::Reminder,
        label: Some("x".into()),
        when: When::At(
            start_wall().with_timezone(&chrono::Local).naive_local() - TimeDelta::hours(1),
        ),
        repeat: None,
    };
    assert!(matches!(f.timers.add(past), Err(TimerError::InPast)));
    assert_eq!(
        f.timers.list(None).unwrap().len(),
        2,
        "only the two good ones"
    );
}

#[test]
fn find_cancel_extend_snooze() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let rice = f.timers.add(timer(1080, "rice")).unwrap();
    let eggs = f.timers.add(timer(300, "eggs")).unwrap();
    let alarm = f
        .timers
        .add(NewTimer {
            kind: Kind::Alarm,
            label: None,
            when: When::Next {
                time: NaiveTime::from_hms_opt(7, 0, 0).unwrap(),
                days: None,
            },
            repeat: Some(Weekdays::WEEKDAYS),
        })
        .unwrap();
    assert_eq!(alarm.repeat.as_deref(), Some("weekdays"));
    for _ in 0..3 {
        assert_eq!(next(&rx, "set").event, EventKind::Set);
    }
    let ids = |v: Vec<Timer>| v.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(f.timers.find("the rice timer").unwrap()), [rice.id]);
    assert_eq!(ids(f.timers.find("timers").unwrap()), [eggs.id, rice.id]);
    assert_eq!(ids(f.timers.find("alarm").unwrap()), [alarm.id]);
    assert!(f.timers.find("pasta").unwrap().is_empty());

    // "add two minutes"; "take ten minutes off" clamps at one second.
    let longer = f.timers.extend(rice.id, TimeDelta::minutes(2)).unwrap();
    assert_eq!(longer.remaining_s, 1200);
    assert_eq!(next(&rx, "extend").event, EventKind::Set);
    let short = f.timers.extend(eggs.id, TimeDelta::minutes(-10)).unwrap();
    assert_eq!(short.remaining_s, 1);
    let _ = next(&rx, "extend");
    assert!(matches!(
        f.timers.extend(rice.id, TimeDelta::hours(24)),
        Err(TimerError::OutOfRange)
    ));
    assert_eq!(f.timers.get(rice.id).unwrap().unwrap().remaining_s, 1200);

    let snoozed = f.timers.snooze(alarm.id, Duration::from_secs(540)).unwrap();
    assert_eq!(snoozed.remaining_s, 540);
    let _ = next(&rx, "snooze");

    let gone = f.timers.cancel(rice.id).unwrap();
    assert_eq!(gone.id, rice.id);
    let e = next(&rx, "cancel");
    assert_eq!((e.event, e.id), (EventKind::Cancelled, rice.id));
    assert!(matches!(
        f.timers.cancel(rice.id),
        Err(TimerError::NotFound(_))
    ));
    assert_eq!(f.timers.cancel_all(Some(Kind::Timer)).unwrap(), 1);
    assert_eq!(f.timers.list(None).unwrap().len(), 1, "the alarm stays");
    assert_eq!(f.timers.cancel_all(None).unwrap(), 1);
    assert!(f.timers.list(None).unwrap().is_empty());
}

#[test]
fn event_json_is_the_contract() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let t = f.timers.add(timer(90, "tea")).unwrap();
    let e = next(&rx, "set");
    let v = serde_json::to_value(&e).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["type", "event", "id", "kind", "label", "due"]);
    assert_eq!(v["type"], "timer");
    assert_eq!(v["event"], "set");
    assert_eq!(v["id"], t.id);
    assert_eq!(v["label"], "tea");
    assert_eq!(v["due"], serde_json::to_value(&t).unwrap()["due"]);
}

#[test]
fn rings_on_the_monotonic_clock_whatever_the_wall_does() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let sched = f.timers.start_scheduler().unwrap();
    let t = f.timers.add(timer(10, "tea")).unwrap();
    let _ = next(&rx, "set");

    // NTP jumps the wall clock an hour ahead: not early.
    f.clock.jump_wall(TimeDelta::hours(1));
    assert!(sched.settle(WAIT));
    assert_eq!(state_of(&f, t.id), State::Pending);
    assert!(rx.try_recv().is_err(), "nothing rang");
    // The stored end moved with the wall clock, so a list (or a restart)
    // still says 10 s.
    assert_eq!(f.timers.get(t.id).unwrap().unwrap().remaining_s, 10);

    // And back two hours: not late either.
    f.clock.jump_wall(TimeDelta::hours(-2));
    f.clock.advance(Duration::from_secs(9));
    assert!(sched.settle(WAIT));
    assert!(rx.try_recv().is_err(), "not yet: 9 of 10 s");
    f.clock.advance(Duration::from_secs(1));
    let e = next(&rx, "ringing");
    assert_eq!((e.event, e.id), (EventKind::Ringing, t.id));
    assert_eq!(state_of(&f, t.id), State::Ringing, "committed before told");

    // Rings for ring_secs, then stops by itself, once.
    f.clock.advance(Duration::from_secs(59));
    assert!(sched.settle(WAIT));
    assert!(rx.try_recv().is_err());
    f.clock.advance(Duration::from_secs(1));
    let e = next(&rx, "stopped");
    assert_eq!((e.event, e.id), (EventKind::Stopped, t.id));
    assert_eq!(state_of(&f, t.id), State::Done);
    f.clock.advance(Duration::from_secs(600));
    assert!(sched.settle(WAIT));
    assert!(rx.try_recv().is_err(), "never twice");
}

#[test]
fn clock_times_follow_the_wall_clock_and_stop_ringing_stops() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let sched = f.timers.start_scheduler().unwrap();
    let at = (start_wall() + TimeDelta::minutes(30))
        .with_timezone(&chrono::Local)
        .naive_local();
    let r = f
        .timers
        .add(NewTimer {
            kind: Kind::Reminder,
            label: Some("check the oven".into()),
            when: When::At(at),
            repeat: None,
        })
        .unwrap();
    assert_eq!(r.remaining_s, 1800);
    let _ = next(&rx, "set");
    // The monotonic clock alone does not bring a clock time nearer…
    f.clock.advance_mono(Duration::from_secs(3600));
    assert!(sched.settle(WAIT));
    assert!(rx.try_recv().is_err());
    // …the wall clock does.
    f.clock.jump_wall(TimeDelta::minutes(30));
    let e = next(&rx, "ringing");
    assert_eq!(
        (e.event, e.label.as_str()),
        (EventKind::Ringing, "check the oven")
    );
    assert_eq!(f.timers.stop_ringing(None).unwrap(), 1);
    assert_eq!(next(&rx, "stopped").event, EventKind::Stopped);
    assert_eq!(state_of(&f, r.id), State::Done);
    assert!(sched.settle(WAIT));
    assert!(
        rx.try_recv().is_err(),
        "the scheduler does not tell it again"
    );
}

#[test]
fn a_repeating_alarm_is_set_again_after_it_rings() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let sched = f.timers.start_scheduler().unwrap();
    let a = daily_alarm_in_a_minute(&f);
    let _ = next(&rx, "set");
    f.clock.advance(Duration::from_secs(60));
    assert_eq!(next(&rx, "ringing").event, EventKind::Ringing);
    f.clock.advance(Duration::from_secs(60));
    let e = next(&rx, "stopped");
    assert_eq!(e.event, EventKind::Stopped);
    drop(sched);
    let again = f.timers.get(a.id).unwrap().expect("still set");
    assert_eq!(
        again.remaining_s,
        24 * 3600 - 60,
        "tomorrow, same local time"
    );
}

#[test]
fn what_came_due_while_stopped_is_missed_once_and_never_rung() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let sched = f.timers.start_scheduler().unwrap();
    let ringing = f.timers.add(timer(5, "ringing at the kill")).unwrap();
    let later = f.timers.add(timer(600, "came due while off")).unwrap();
    let future = f.timers.add(timer(3600, "still ahead")).unwrap();
    for _ in 0..3 {
        let _ = next(&rx, "set");
    }
    f.clock.advance(Duration::from_secs(5));
    assert_eq!(next(&rx, "ringing").id, ringing.id);
    // "Killed" while ringing: the thread stops, nothing else is written.
    drop(sched);
    f.clock.advance(Duration::from_secs(1200));

    let restarted = open(&f.dir, &f.clock);
    let rx2 = restarted.subscribe();
    let sched = restarted.start_scheduler().unwrap();
    let mut missed: Vec<(EventKind, i64)> = (0..2)
        .map(|_| next(&rx2, "missed"))
        .map(|e| (e.event, e.id))
        .collect();
    missed.sort_by_key(|m| m.1);
    assert_eq!(
        missed,
        [
            (EventKind::Missed, ringing.id),
            (EventKind::Missed, later.id)
        ]
    );
    assert!(sched.settle(WAIT));
    assert!(rx2.try_recv().is_err(), "nothing rings after being missed");
    assert_eq!(state_of(&f, later.id), State::Missed);
    drop(sched);
    // A second start announces nothing again.
    let third = open(&f.dir, &f.clock);
    let rx3 = third.subscribe();
    let sched = third.start_scheduler().unwrap();
    assert!(sched.settle(WAIT));
    assert!(rx3.try_recv().is_err(), "missed is announced once");
    let left = third.get(future.id).unwrap().unwrap().remaining_s;
    assert_eq!(left, 3600 - 1205);
}

#[test]
fn one_scheduler_per_state_dir() {
    let f = fixture();
    let first = f.timers.start_scheduler().unwrap();
    let other = open(&f.dir, &f.clock);
    let err = other.start_scheduler().unwrap_err();
    assert!(matches!(err, TimerError::SchedulerBusy(_)), "{err}");
    drop(first);
    assert!(other.start_scheduler().is_ok(), "free again once stopped");
}

#[test]
fn changes_made_by_another_process_are_told() {
    let f = fixture();
    let rx = f.timers.subscribe();
    let sched = f.timers.start_scheduler().unwrap();
    let cli = open(&f.dir, &f.clock);
    let t = cli.add(timer(30, "from the cli")).unwrap();
    let e = next(&rx, "set seen by the scheduler");
    assert_eq!((e.event, e.id), (EventKind::Set, t.id));
    f.clock.advance(Duration::from_secs(30));
    assert_eq!(next(&rx, "ringing").event, EventKind::Ringing);
    cli.cancel(t.id).unwrap();
    let e = next(&rx, "cancelled seen by the scheduler");
    assert_eq!((e.event, e.id), (EventKind::Cancelled, t.id));
    assert!(sched.settle(WAIT));
    assert!(rx.try_recv().is_err());
}

#[test]
fn lengths_are_said_plainly() {
    assert_eq!(spoken_length(0), "0 seconds");
    assert_eq!(spoken_length(65), "1 minute 5 seconds");
    assert_eq!(spoken_length(1080), "18 minutes");
    assert_eq!(spoken_length(5400), "1 hour 30 minutes");
    assert_eq!(spoken_length(7201), "2 hours 1 second");
}

#[test]
fn extending_a_repeating_alarm_moves_this_day_only() {
    let f = fixture();
    let sched = f.timers.start_scheduler().unwrap();
    let rx = f.timers.subscribe();
    let a = daily_alarm_in_a_minute(&f);
    let later = f.timers.extend(a.id, TimeDelta::minutes(10)).unwrap();
    assert_eq!(later.remaining_s, 11 * 60);
    f.clock.advance(Duration::from_secs(11 * 60));
    let e = loop {
        let e = next(&rx, "ringing");
        if e.event == EventKind::Ringing {
            break e;
        }
    };
    assert_eq!(e.id, a.id);
    assert_eq!(f.timers.stop_ringing(Some(a.id)).unwrap(), 1);
    drop(sched);
    // Tomorrow at the alarm's own time, not ten minutes later.
    let next_day = f.timers.get(a.id).unwrap().unwrap();
    assert_eq!(next_day.remaining_s, 24 * 3600 - 11 * 60 + 60);
}
