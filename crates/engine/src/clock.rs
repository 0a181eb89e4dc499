//! Where the job loop reads the time. [`Monotonic`] (the default) is `Instant::now()` and
//! compiles to just that: the loop is generic over the clock, so the hot path keeps no
//! indirection. [`StepClock`] advances by a fixed step on every reading, so a pass with the
//! `null` engine is deterministic and its counts can be asserted exactly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic time source for the job loop (deadlines, latencies, time-series buckets).
pub trait Clock: Sync {
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic;

impl Clock for Monotonic {
    #[inline(always)]
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A test clock: reading `n` (from 0) returns `base + n * step`. Shared by the job threads
/// of a pass, so it is exact only with one job.
#[derive(Debug)]
pub struct StepClock {
    base: Instant,
    step_ns: u64,
    readings: AtomicU64,
}

impl StepClock {
    pub fn new(step: Duration) -> StepClock {
        StepClock {
            base: Instant::now(),
            step_ns: step.as_nanos() as u64,
            readings: AtomicU64::new(0),
        }
    }

    /// How many times the clock has been read.
    pub fn readings(&self) -> u64 {
        self.readings.load(Ordering::Relaxed)
    }
}

impl Clock for StepClock {
    fn now(&self) -> Instant {
        let n = self.readings.fetch_add(1, Ordering::Relaxed);
        self.base + Duration::from_nanos(n * self.step_ns)
    }
}
