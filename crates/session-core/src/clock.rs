//! Time, injectable so that expiry, idle reset and daily reset are testable without sleeps.

use std::fmt::Debug;
use std::sync::Arc;

use chrono::{DateTime, Duration, Timelike, Utc};
use parking_lot::Mutex;

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// The current time, truncated to whole microseconds.
    fn now(&self) -> DateTime<Utc>;
}

/// A clock shared by a repository and a service.
pub type SharedClock = Arc<dyn Clock>;

/// Truncates a timestamp to whole microseconds, the precision every backend stores exactly.
///
/// Works on every date a `DateTime` holds, up to `DateTime::<Utc>::MAX_UTC`
/// (`chrono`'s `duration_trunc` gives up after 2262, where nanoseconds
/// since the epoch leave `i64`).
pub fn truncate_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    let nanos = t.nanosecond();
    t.with_nanosecond(nanos - nanos % 1000).unwrap_or(t)
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        truncate_micros(Utc::now())
    }
}

/// The default clock: the system's.
pub fn system_clock() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that only moves when told to: for tests of expiry and resets.
///
/// ```
/// use session_core::{Clock, ManualClock};
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(chrono::Duration::hours(2));
/// assert_eq!(clock.now() - t0, chrono::Duration::hours(2));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A manual clock starting at the system's current time.
    pub fn new() -> Self {
        Self::at(Utc::now())
    }

    /// A manual clock starting at `t`.
    pub fn at(t: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(truncate_micros(t)),
        }
    }

    /// Moves the clock to `t` (backwards is allowed: clocks jump).
    pub fn set(&self, t: DateTime<Utc>) {
        *self.now.lock() = truncate_micros(t);
    }

    /// Moves the clock by `d` (negative moves it back).
    pub fn advance(&self, d: Duration) {
        let mut now = self.now.lock();
        *now += d;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_micros_works_up_to_the_latest_date() {
        let max = truncate_micros(DateTime::<Utc>::MAX_UTC);
        assert_eq!(max.nanosecond(), 999_999_000);
        assert_eq!(max.timestamp(), DateTime::<Utc>::MAX_UTC.timestamp());
        let t = DateTime::<Utc>::from_timestamp(1, 123_456_789).unwrap_or_default();
        assert_eq!(truncate_micros(t).nanosecond(), 123_456_000);
        let min = truncate_micros(DateTime::<Utc>::MIN_UTC);
        assert_eq!(min, DateTime::<Utc>::MIN_UTC);
    }
}
