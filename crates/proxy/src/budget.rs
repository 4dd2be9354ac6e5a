//! The budget of request bytes the proxy holds at once, across every request in flight.
//!
//! Design decision: a turn's body is kept (for the journal, a capture, recovery) until the turn is
//! written, so each request in flight costs memory in proportion to its body, and many large ones
//! at once could exhaust it whatever the per-request cap. The proxy shares one budget of bytes
//! ([`Budget`], `--request-budget`, [`DEFAULT_BYTES`] by default) among the bodies it keeps: a
//! request takes its declared length (`content-length`) before anything is sent upstream, and a
//! body of unknown length takes its frames as they arrive. A request that does not fit waits for
//! room at most [`Budget::wait`], then is answered 503 with a `retry-after` and a JSON body naming
//! the budget; one that outgrows it while its frames arrive is cut there and answered the same.
//! The bytes go back when the last handle to the kept body is dropped (the writer has written
//! the turn, or the request ended without one), so the budget bounds what the bodies hold, not
//! only what the relay is doing.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget: 1 GiB of request bodies held at once.
pub const DEFAULT_BYTES: usize = 1 << 30;

/// How long a request waits for room by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// The seconds a client is told to wait before retrying (`retry-after`).
pub const RETRY_AFTER_SECS: u64 = 5;

/// The request bytes the proxy may hold at once (cheap to clone: a handle).
#[derive(Debug, Clone)]
pub struct Budget {
    room: Arc<Semaphore>,
    total: usize,
    wait: Duration,
}

/// Bytes taken from the budget, given back when dropped.
#[derive(Debug, Default)]
pub struct Charge(Option<OwnedSemaphorePermit>);

/// A request the budget could not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the proxy's budget of {total} bytes of request bodies in flight (--request-budget) has no room for {wanted} more bytes")]
pub struct OverBudget {
    /// The budget.
    pub total: usize,
    /// What the request needed.
    pub wanted: usize,
}

impl Budget {
    /// A budget of `total` bytes (at least one); a request waits at most `wait` for room.
    pub fn new(total: usize, wait: Duration) -> Budget {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        Budget { room: Arc::new(Semaphore::new(total)), total, wait }
    }

    /// The budget in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// How long a request waits for room.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The bytes free now.
    pub fn available(&self) -> usize {
        self.room.available_permits()
    }

    /// Takes `bytes`, waiting at most [`Budget::wait`] for room (not at all for more than the
    /// whole budget).
    pub async fn take(&self, bytes: usize) -> Result<Charge, OverBudget> {
        let over = OverBudget { total: self.total, wanted: bytes };
        if bytes == 0 {
            return Ok(Charge(None));
        }
        let n = u32::try_from(bytes).map_err(|_| over)?;
        if bytes > self.total {
            return Err(over);
        }
        if let Ok(p) = self.room.clone().try_acquire_many_owned(n) {
            return Ok(Charge(Some(p)));
        }
        match tokio::time::timeout(self.wait, self.room.clone().acquire_many_owned(n)).await {
            Ok(Ok(p)) => Ok(Charge(Some(p))),
            _ => Err(over),
        }
    }

    /// Takes `bytes` more into `charge` if there is room now (a body of unknown length, as its
    /// frames arrive).
    pub fn grow(&self, charge: &mut Charge, bytes: usize) -> Result<(), OverBudget> {
        if bytes == 0 {
            return Ok(());
        }
        let over = OverBudget { total: self.total, wanted: bytes };
        let n = u32::try_from(bytes).map_err(|_| over)?;
        let more = self.room.clone().try_acquire_many_owned(n).map_err(|_| over)?;
        match &mut charge.0 {
            Some(p) => p.merge(more),
            None => charge.0 = Some(more),
        }
        Ok(())
    }
}

impl Charge {
    /// Nothing taken.
    pub fn none() -> Charge {
        Charge(None)
    }

    /// The bytes taken.
    pub fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_budget_is_shared_and_given_back() {
        let b = Budget::new(100, Duration::ZERO);
        let first = b.take(60).await.expect("room");
        assert_eq!(b.take(60).await.err(), Some(OverBudget { total: 100, wanted: 60 }));
        let mut second = b.take(40).await.expect("room");
        assert!(b.grow(&mut second, 1).is_err());
        drop(first);
        b.grow(&mut second, 50).expect("room again");
        assert_eq!((second.bytes(), b.available()), (90, 10));
        assert!(b.take(101).await.is_err(), "more than the whole budget");
        drop(second);
        assert_eq!(b.available(), 100);
    }
}
