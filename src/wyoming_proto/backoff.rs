//! Skip a peer for a while after it failed (doubling from
//! `wyoming.reconnect_min_ms` up to `reconnect_max_ms`), so every request
//! does not pay a connect timeout for a dead host; a success resets it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::WyomingConfig;

/// After a failure, skip a service for a while (doubling up to a cap) so
/// every request does not pay for a dead host; a success resets it.
pub struct Backoff {
    state: Mutex<(Option<Instant>, Duration)>,
    min: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(w: &WyomingConfig) -> Backoff {
        let min = Duration::from_millis(w.reconnect_min_ms.max(1));
        Backoff {
            state: Mutex::new((None, min)),
            min,
            max: Duration::from_millis(w.reconnect_max_ms.max(w.reconnect_min_ms).max(1)),
        }
    }

    /// `Err` while the service is being skipped.
    pub fn check(&self) -> Result<(), String> {
        let Ok(state) = self.state.lock() else {
            return Ok(());
        };
        match state.0 {
            Some(until) if Instant::now() < until => Err(format!(
                "skipped after a recent failure; trying it again in {} ms",
                until.saturating_duration_since(Instant::now()).as_millis()
            )),
            _ => Ok(()),
        }
    }

    /// Record a failure; returns how long the service is now skipped.
    pub fn failed(&self) -> Duration {
        let Ok(mut state) = self.state.lock() else {
            return self.min;
        };
        let wait = state.1;
        state.0 = Some(Instant::now() + wait);
        state.1 = (wait * 2).min(self.max);
        wait
    }

    pub fn succeeded(&self) {
        if let Ok(mut state) = self.state.lock() {
            *state = (None, self.min);
        }
    }
}
