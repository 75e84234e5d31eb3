//! The two clocks a timer device needs, behind one seam.
//!
//! A running timer counts on the **monotonic** clock: NTP setting the wall
//! clock at boot (or a user changing it) must move neither a 5-minute
//! timer earlier nor later. An alarm at 7:00 follows the **wall** clock in
//! the local zone, DST included. Tests move the two separately with
//! [`ManualClock`]; nothing here ever changes the system time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crossbeam_channel::Sender;

/// A monotonic source and a wall source.
pub trait Clock: Send + Sync {
    /// Time since an arbitrary fixed origin; never goes backwards and does
    /// not follow changes to the wall clock.
    fn mono(&self) -> Duration;
    /// The wall clock (UTC; the local zone is applied by the caller).
    fn wall(&self) -> DateTime<Utc>;
    /// Ask to be told (one `()` on `waker`) whenever this clock is moved by
    /// hand. The system clock never is, so the default does nothing; the
    /// scheduler uses it to react to [`ManualClock`] at once.
    fn notify_on_change(&self, waker: Sender<()>) {
        let _ = waker;
    }
}

/// The system's clocks: [`Instant`] and [`Utc::now`].
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn mono(&self) -> Duration {
        self.origin.elapsed()
    }
    fn wall(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

struct Manual {
    mono: Duration,
    wall: DateTime<Utc>,
    wakers: Vec<Sender<()>>,
}

/// A clock tests move by hand: [`ManualClock::advance`] moves both sources
/// (time passing), [`ManualClock::jump_wall`] / [`ManualClock::set_wall`]
/// only the wall (NTP, a user setting the time). Clones share the time.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<Manual>>,
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.lock();
        f.debug_struct("ManualClock")
            .field("mono", &m.mono)
            .field("wall", &m.wall)
            .finish()
    }
}

impl ManualClock {
    /// Monotonic zero, wall at `wall`.
    pub fn new(wall: DateTime<Utc>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Manual {
                mono: Duration::ZERO,
                wall,
                wakers: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Manual> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(m: &mut Manual) {
        // A full waker already has a wake-up pending; a gone one is dropped.
        m.wakers.retain(|w| {
            !matches!(
                w.try_send(()),
                Err(crossbeam_channel::TrySendError::Disconnected(_))
            )
        });
    }

    /// Time passes: both clocks move forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut m = self.lock();
        m.mono += by;
        m.wall += chrono::TimeDelta::from_std(by).unwrap_or(chrono::TimeDelta::MAX);
        Self::changed(&mut m);
    }

    /// Only the monotonic clock moves (the wall clock was, say, frozen).
    pub fn advance_mono(&self, by: Duration) {
        let mut m = self.lock();
        m.mono += by;
        Self::changed(&mut m);
    }

    /// Only the wall clock moves, by `by` (negative = backwards): NTP.
    pub fn jump_wall(&self, by: chrono::TimeDelta) {
        let mut m = self.lock();
        m.wall += by;
        Self::changed(&mut m);
    }

    /// Set the wall clock to `wall`; the monotonic clock stays.
    pub fn set_wall(&self, wall: DateTime<Utc>) {
        let mut m = self.lock();
        m.wall = wall;
        Self::changed(&mut m);
    }
}

impl Clock for ManualClock {
    fn mono(&self) -> Duration {
        self.lock().mono
    }
    fn wall(&self) -> DateTime<Utc> {
        self.lock().wall
    }
    fn notify_on_change(&self, waker: Sender<()>) {
        self.lock().wakers.push(waker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_sources_move_separately_and_wake_watchers() {
        let wall = DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = ManualClock::new(wall);
        let (tx, rx) = crossbeam_channel::bounded(1);
        clock.notify_on_change(tx);
        clock.advance(Duration::from_secs(5));
        assert_eq!(clock.mono(), Duration::from_secs(5));
        assert_eq!(clock.wall(), wall + chrono::TimeDelta::seconds(5));
        clock.jump_wall(chrono::TimeDelta::hours(-1));
        assert_eq!(clock.mono(), Duration::from_secs(5));
        assert_eq!(clock.wall(), wall - chrono::TimeDelta::seconds(3595));
        assert!(rx.try_recv().is_ok());
        let sys = SystemClock::new();
        let a = sys.mono();
        assert!(sys.mono() >= a);
    }
}
