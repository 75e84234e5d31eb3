//! The thread that rings (started by whoever runs the device).
//!
//! At start it takes `<state_dir>/timers.lock` (one scheduler per state
//! dir; the kernel drops the lock when the process dies, kill -9
//! included), then commits, in one transaction, every row that came due
//! while no scheduler ran — or was ringing when the last one died — as
//! `missed` (a repeat moves on to its next day), and only then announces
//! each once. While it runs it:
//! - counts delay rows (timers, "in 20 minutes") on the monotonic clock;
//!   when the wall clock jumps it rewrites their `due_at` so a restart
//!   still finds the right end;
//! - rings clock rows when local wall time reaches them;
//! - commits `ringing` (conditionally on the row's rev) before it tells,
//!   so nothing rings twice; stops each after `ring_secs`;
//! - notices rows another process added, changed or cancelled (the CLI,
//!   the API) and tells subscribers.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::db::{self, Anchor, Row};
use super::{finish, lock, EventKind, Known, State, TimerError, Timers};

/// The longest the thread sleeps without looking at the table (rows added
/// by another process are seen within this).
const POLL: Duration = Duration::from_secs(1);
/// A wall clock that moved this much against the monotonic one jumped.
const JUMP: TimeDelta = TimeDelta::seconds(2);
/// Finished rows are kept this long.
const KEEP_FINISHED: TimeDelta = TimeDelta::days(7);

/// The running scheduler; dropping it stops the thread and frees the lock.
pub struct SchedulerHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    timers: Timers,
    passes: Arc<(Mutex<u64>, Condvar)>,
    _lock: File,
}

impl std::fmt::Debug for SchedulerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerHandle").finish_non_exhaustive()
    }
}

impl SchedulerHandle {
    /// Stop the thread and wait for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.timers.poke();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Wait until the thread has made a whole pass over the table that
    /// began after this call (tests: "the clock moved; has it looked?").
    /// `false` if that took longer than `timeout`.
    pub fn settle(&self, timeout: Duration) -> bool {
        let (count, cv) = &*self.passes;
        let mut n = lock(count);
        let target = *n + 2;
        self.timers.poke();
        let deadline = std::time::Instant::now() + timeout;
        while *n < target {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            n = cv
                .wait_timeout(n, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            self.timers.poke();
        }
        true
    }
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Take the lock, announce what was missed, start the thread.
pub(super) fn start(timers: Timers) -> Result<SchedulerHandle, TimerError> {
    let lock_file = take_lock(&timers.inner.lock_path)?;
    let mut state = Loop {
        timers: timers.clone(),
        ringing_since: HashMap::new(),
        offset: None,
    };
    state.startup()?;
    let stop = Arc::new(AtomicBool::new(false));
    let passes = Arc::new((Mutex::new(0u64), Condvar::new()));
    let thread = {
        let stop = stop.clone();
        let passes = passes.clone();
        let wake = timers.inner.wake_rx.clone();
        std::thread::Builder::new()
            .name("timers".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let wait = state.pass();
                    {
                        let (count, cv) = &*passes;
                        *lock(count) += 1;
                        cv.notify_all();
                    }
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let _ = wake.recv_timeout(wait);
                }
            })
            .map_err(|e| TimerError::SchedulerBusy(format!("could not start its thread: {e}")))?
    };
    Ok(SchedulerHandle {
        stop,
        thread: Some(thread),
        timers,
        passes,
        _lock: lock_file,
    })
}

/// `flock` the lock file; held until the file is closed (or the process
/// dies).
fn take_lock(path: &std::path::Path) -> Result<File, TimerError> {
    let busy = |why: String| TimerError::SchedulerBusy(why);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| busy(format!("{}: {e}", dir.display())))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| busy(format!("{}: {e}", path.display())))?;
    // SAFETY: flock on a file descriptor this function owns.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(busy(format!("{} is locked", path.display())));
    }
    Ok(file)
}

struct Loop {
    timers: Timers,
    /// Ringing rows: id → monotonic time the ring began.
    ringing_since: HashMap<i64, Duration>,
    /// wall − mono at the last pass (the wall time at mono zero), to see
    /// a wall-clock jump.
    offset: Option<DateTime<Utc>>,
}

impl Loop {
    /// Commit every row due while nothing rang (or ringing at a kill) as
    /// missed, then announce each once.
    fn startup(&mut self) -> Result<(), TimerError> {
        let inner = &self.timers.inner;
        let now = inner.clock.wall();
        let mut book = lock(&inner.book);
        let missed = inner.store.with_tx(|tx| {
            let mut missed = Vec::new();
            for mut row in db::active(tx)? {
                if row.state == State::Ringing || row.due() <= now {
                    let before = row.clone();
                    miss(&mut row, now);
                    if db::save(tx, &mut row, now)? {
                        missed.push(before);
                    }
                }
            }
            db::prune(tx, now - KEEP_FINISHED)?;
            for row in db::active(tx)? {
                book.insert(
                    row.id,
                    Known {
                        rev: row.rev,
                        mono_due: None,
                    },
                );
            }
            Ok(missed)
        })?;
        for row in &missed {
            tracing::info!(id = row.id, "came due while earshot was not running");
            self.timers.emit(EventKind::Missed, row);
        }
        Ok(())
    }

    /// One look at the table; how long to sleep before the next.
    fn pass(&mut self) -> Duration {
        match self.try_pass() {
            Ok(wait) => wait,
            Err(e) => {
                tracing::warn!("timers: {e}");
                POLL
            }
        }
    }

    fn try_pass(&mut self) -> Result<Duration, TimerError> {
        let timers = self.timers.clone();
        let inner = &timers.inner;
        let ring = Duration::from_secs(inner.config.ring_secs.max(1));
        let ring_delta = TimeDelta::from_std(ring).unwrap_or(TimeDelta::MAX);
        let mut book = lock(&inner.book);
        let mono = inner.clock.mono();
        let wall = inner.clock.wall();
        let offset = wall - TimeDelta::from_std(mono).unwrap_or(TimeDelta::zero());
        let jumped = self
            .offset
            .is_some_and(|before| (offset - before).abs() > JUMP);
        self.offset = Some(offset);

        let rows = inner.store.with_conn(db::active)?;
        // What another process changed since this one last knew.
        let active: HashMap<i64, &Row> = rows.iter().map(|r| (r.id, r)).collect();
        let gone: Vec<(i64, i64)> = book
            .iter()
            .filter(|(id, _)| !active.contains_key(id))
            .map(|(id, known)| (*id, known.rev))
            .collect();
        for (id, rev) in gone {
            book.remove(&id);
            let was_ringing = self.ringing_since.remove(&id).is_some();
            if let Some(row) = inner.store.with_conn(|c| db::get(c, id))? {
                if row.rev != rev {
                    match row.state {
                        State::Cancelled => timers.emit(EventKind::Cancelled, &row),
                        _ if was_ringing => timers.emit(EventKind::Stopped, &row),
                        _ => {}
                    }
                }
            }
        }
        for row in &rows {
            if book.get(&row.id).map(|k| k.rev) != Some(row.rev) {
                if self.ringing_since.contains_key(&row.id) && row.state != State::Ringing {
                    timers.emit(EventKind::Stopped, row);
                }
                if row.state == State::Pending {
                    timers.emit(EventKind::Set, row);
                }
                // Changed elsewhere: anchored afresh from the wall clock below.
                book.insert(
                    row.id,
                    Known {
                        rev: row.rev,
                        mono_due: None,
                    },
                );
            }
            if row.state != State::Ringing {
                self.ringing_since.remove(&row.id);
            }
        }

        let mut wait = POLL;
        for row in rows {
            let mut row = row;
            match row.state {
                State::Pending => {
                    let (late, left) = match row.anchor {
                        Anchor::Delay => {
                            let due = match book.get(&row.id) {
                                Some(Known {
                                    rev,
                                    mono_due: Some(due),
                                }) if *rev == row.rev => *due,
                                _ => {
                                    let left = (row.due_at - wall).to_std().unwrap_or_default();
                                    let due = mono + left;
                                    book.insert(
                                        row.id,
                                        Known {
                                            rev: row.rev,
                                            mono_due: Some(due),
                                        },
                                    );
                                    due
                                }
                            };
                            if jumped && due > mono {
                                // Keep the stored end true in wall terms.
                                row.due_at = wall
                                    + TimeDelta::from_std(due - mono).unwrap_or(TimeDelta::zero());
                                if inner.store.with_tx(|tx| db::save(tx, &mut row, wall))? {
                                    book.insert(
                                        row.id,
                                        Known {
                                            rev: row.rev,
                                            mono_due: Some(due),
                                        },
                                    );
                                }
                            }
                            (mono.checked_sub(due), due.checked_sub(mono))
                        }
                        Anchor::Clock => {
                            let due = row.due();
                            ((wall - due).to_std().ok(), (due - wall).to_std().ok())
                        }
                    };
                    match (late, left) {
                        (Some(late), _) => {
                            let before = row.clone();
                            let event = if late > ring {
                                miss(&mut row, wall);
                                EventKind::Missed
                            } else {
                                row.state = State::Ringing;
                                row.rang_at = Some(wall);
                                EventKind::Ringing
                            };
                            if inner.store.with_tx(|tx| db::save(tx, &mut row, wall))? {
                                book.insert(
                                    row.id,
                                    Known {
                                        rev: row.rev,
                                        mono_due: None,
                                    },
                                );
                                if event == EventKind::Ringing {
                                    self.ringing_since.insert(row.id, mono);
                                    wait = wait.min(ring);
                                    timers.emit(event, &row);
                                } else {
                                    timers.emit(event, &before);
                                }
                            }
                        }
                        (None, Some(left)) => wait = wait.min(left),
                        (None, None) => wait = Duration::ZERO,
                    }
                }
                State::Ringing => {
                    let since = *self.ringing_since.entry(row.id).or_insert(mono);
                    let rung = mono.saturating_sub(since);
                    if rung >= ring || ring_delta.is_zero() {
                        let before = row.clone();
                        finish(&mut row, wall);
                        if inner.store.with_tx(|tx| db::save(tx, &mut row, wall))? {
                            book.insert(
                                row.id,
                                Known {
                                    rev: row.rev,
                                    mono_due: None,
                                },
                            );
                            self.ringing_since.remove(&row.id);
                            timers.emit(EventKind::Stopped, &before);
                        }
                    } else {
                        wait = wait.min(ring - rung);
                    }
                }
                _ => {}
            }
        }
        Ok(wait)
    }
}

/// A row that came due unheard: a repeat moves on to its next day, the
/// rest is missed.
fn miss(row: &mut Row, now: DateTime<Utc>) {
    finish(row, now);
    if row.state == State::Done {
        row.state = State::Missed;
    }
}
