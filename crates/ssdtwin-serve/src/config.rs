//! How the backend runs: pacing and housekeeping periods.

use std::time::Duration;

/// How replies are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// No reply before the timing model's completion time.
    Model,
    /// Fast-forward: reply as soon as the data is stored.
    Off,
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Pace, String> {
        match s {
            "model" => Ok(Pace::Model),
            "off" => Ok(Pace::Off),
            o => Err(format!("pace '{o}': use model or off")),
        }
    }
}

impl Pace {
    pub fn name(self) -> &'static str {
        match self {
            Pace::Model => "model",
            Pace::Off => "off",
        }
    }
}

/// Tuning of the backend. `Default` is what `ssdtwin serve` uses.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    pub pace: Pace,
    /// With nothing outstanding for this long the drive is idle and background GC runs
    /// (pace model only; fast-forward has no idle time).
    pub idle_after: Duration,
    /// Background GC in idle gaps at all (`ssdtwin serve --no-idle-gc`, as `ssdtwin fio`'s).
    pub idle_gc: bool,
    /// Housekeeping period: idle GC, journal write-out, clock, snapshots, commits.
    pub tick: Duration,
    /// How often `DIR/live.json` is rewritten (0 = never).
    pub live_every: Duration,
    /// Commit a new generation (and empty the journal) this long after the last commit,
    /// at the first moment the drive has been idle for a second...
    pub commit_every: Duration,
    /// ...or regardless of idleness after five times that, or once the journal is this big.
    pub commit_journal_bytes: u64,
    /// Records are written to the journal file when this much is buffered (and every tick).
    pub journal_buffer_bytes: usize,
}

impl Default for TwinConfig {
    fn default() -> TwinConfig {
        TwinConfig {
            pace: Pace::Model,
            idle_after: Duration::from_millis(1),
            idle_gc: true,
            tick: Duration::from_millis(20),
            live_every: Duration::from_secs(1),
            commit_every: Duration::from_secs(60),
            commit_journal_bytes: 128 << 20,
            journal_buffer_bytes: 64 << 10,
        }
    }
}
