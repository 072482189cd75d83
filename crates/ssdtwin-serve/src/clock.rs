//! Where the server's time comes from. The model runs in virtual nanoseconds since the
//! server started; in real use that is the wall clock ([`WallClock`]), in the deterministic
//! simulation harness a clock the test advances ([`ManualClock`]), so a run replays from its
//! seed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Time since the backend started.
    fn elapsed(&self) -> Duration;
    /// Wall-clock time for humans (live.json timestamps), milliseconds since the epoch.
    fn unix_ms(&self) -> u64;
    /// The real instant virtual time 0 corresponds to (when replies are released). A clock
    /// that knows its start says so: computing it as `now - elapsed` is off by however long
    /// the thread was preempted between the two readings.
    fn origin(&self) -> Instant {
        Instant::now() - self.elapsed()
    }
}

/// The real clock.
#[derive(Debug)]
pub struct WallClock {
    start: Instant,
}

impl WallClock {
    pub fn new() -> WallClock {
        WallClock { start: Instant::now() }
    }
}

impl Default for WallClock {
    fn default() -> WallClock {
        WallClock::new()
    }
}

impl Clock for WallClock {
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn unix_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }

    fn origin(&self) -> Instant {
        self.start
    }
}

/// A clock that moves only when told to (tests, the simulation harness).
#[derive(Debug, Default)]
pub struct ManualClock {
    ns: AtomicU64,
}

impl ManualClock {
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    pub fn advance(&self, d: Duration) {
        self.ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }
}

impl Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.ns.load(Relaxed))
    }

    fn unix_ms(&self) -> u64 {
        self.ns.load(Relaxed) / 1_000_000
    }
}
