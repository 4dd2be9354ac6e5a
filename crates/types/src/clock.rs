//! The source of "now", defined once and injected: libraries and drivers never read the wall
//! clock themselves, so tests and replays can run on a [`FixedClock`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The source of "now".
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// The current time, as precise as the clock is (the default is [`Clock::now_ms`]).
    fn now(&self) -> SystemTime {
        let ms = self.now_ms();
        let d = Duration::from_millis(ms.unsigned_abs());
        let t = if ms >= 0 { UNIX_EPOCH.checked_add(d) } else { UNIX_EPOCH.checked_sub(d) };
        t.unwrap_or(UNIX_EPOCH)
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that says what it is told (tests, deterministic runs); shareable across threads.
#[derive(Debug, Default)]
pub struct FixedClock(AtomicI64);

impl FixedClock {
    /// A clock stopped at `ms` milliseconds since the Unix epoch.
    pub const fn at_ms(ms: i64) -> FixedClock {
        FixedClock(AtomicI64::new(ms))
    }

    /// Moves the clock to `ms`.
    pub fn set_ms(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Moves the clock forward (or back, when negative) by `ms`, saturating.
    pub fn advance_ms(&self, ms: i64) {
        let _ = self.0.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| Some(t.saturating_add(ms)));
    }
}

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_clock_says_what_it_is_told() {
        let c = FixedClock::at_ms(1_500);
        assert_eq!(c.now_ms(), 1_500);
        assert_eq!(c.now(), UNIX_EPOCH + Duration::from_millis(1_500));
        c.advance_ms(250);
        assert_eq!(c.now_ms(), 1_750);
        c.set_ms(-2_000);
        assert_eq!(c.now(), UNIX_EPOCH - Duration::from_secs(2));
        c.set_ms(i64::MAX);
        c.advance_ms(1);
        assert_eq!(c.now_ms(), i64::MAX);
    }

    #[test]
    fn the_system_clock_is_after_2020_and_agrees_with_itself() {
        let c = SystemClock;
        let ms = c.now_ms();
        assert!(ms > 1_577_836_800_000, "{ms}");
        let secs = c.now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(secs.abs_diff(u64::try_from(ms / 1000).unwrap()) <= 2);
    }
}
