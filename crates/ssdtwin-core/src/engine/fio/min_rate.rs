//! fio's rate_min and rate_iops_min (backend.c check_min_rate, fio 3.33): a job that
//! completes less than its minimum over a `ratecycle` window ends with EIO.
//!
//! fio checks after each I/O it issues, with the time of the last completion it reaped; the
//! twin checks at each completion, which is the same moment for the check's arithmetic. Both
//! count from the end of the ramp (libfio.c reset_all_stats zeroes the counters and moves
//! td->start there) and allow 2 s to settle before the first check, which only records
//! where the window starts; each later check at least `ratecycle` ms after the last
//! compares the window's rate with the minimum. Times are whole milliseconds, as fio's
//! mtime_since gives them.

use super::{RunError, Runner};
use crate::workload::{Ddir, JobSpec};

const NS_PER_MS: u64 = 1_000_000;
/// backend.c __check_min_rate: "allow a 2 second settle period in the beginning".
const SETTLE_MS: u64 = 2000;
/// fio's errno for a missed minimum rate (td_verror(td, EIO, "check_min_rate")).
pub(super) const EIO: i32 = 5;

/// One clone's minimum-rate bookkeeping (fio's this_io_bytes/blocks, last_rate_check_*).
#[derive(Clone, Debug)]
pub(super) struct MinRate {
    /// td->start: the end of the ramp; checks wait `SETTLE_MS` after it.
    start_ns: u64,
    done_bytes: [u64; 3],
    done_ios: [u64; 3],
    last_bytes: [u64; 3],
    last_ios: [u64; 3],
    last_ns: [u64; 3],
}

impl MinRate {
    /// Bookkeeping for `spec` from `start_ns`, or None when it sets no minimum.
    pub fn for_spec(spec: &JobSpec, start_ns: u64) -> Option<MinRate> {
        let any = |p: &crate::workload::PerDir<u64>| p.read + p.write + p.trim > 0;
        (any(&spec.rate_min_bytes_per_s) || any(&spec.rate_iops_min)).then(|| MinRate::new(start_ns))
    }

    pub fn new(start_ns: u64) -> MinRate {
        MinRate { start_ns, done_bytes: [0; 3], done_ios: [0; 3], last_bytes: [0; 3], last_ios: [0; 3], last_ns: [0; 3] }
    }

    /// Count a completion of `len` bytes in `ddir`.
    pub fn completed(&mut self, ddir: usize, len: u64) {
        self.done_bytes[ddir] += len;
        self.done_ios[ddir] += 1;
    }

    /// backend.c check_min_rate at `now`: fio's messages (one line per direction that fell
    /// below its minimum over the last window), or None.
    pub fn check(&mut self, spec: &JobSpec, now: u64) -> Option<String> {
        // check_min_rate looks only at directions with bytes done in this run of do_io.
        let mut misses = Vec::new();
        for d in [Ddir::Read, Ddir::Write, Ddir::Trim] {
            if self.done_bytes[d.index()] > 0 {
                misses.extend(self.check_ddir(spec, d, now));
            }
        }
        (!misses.is_empty()).then(|| misses.join("\n"))
    }

    fn check_ddir(&mut self, spec: &JobSpec, d: Ddir, now: u64) -> Option<String> {
        let di = d.index();
        let (bytes_min, iops_min) = (spec.rate_min_bytes_per_s.get(d), spec.rate_iops_min.get(d));
        if bytes_min == 0 && iops_min == 0 {
            return None;
        }
        if now.saturating_sub(self.start_ns) / NS_PER_MS < SETTLE_MS {
            return None;
        }
        if self.last_bytes[di] > 0 || self.last_ios[di] > 0 {
            let spent_ms = (now - self.last_ns[di]) / NS_PER_MS;
            if spent_ms < spec.rate_cycle_ms || spent_ms == 0 {
                return None;
            }
            if bytes_min > 0 {
                let got = (self.done_bytes[di] - self.last_bytes[di]) * 1000 / spent_ms;
                if got < bytes_min {
                    return Some(format!("{}: rate_min={bytes_min}B/s not met, got {got}B/s", spec.name));
                }
            } else {
                let got = (self.done_ios[di] - self.last_ios[di]) * 1000 / spent_ms;
                if got < iops_min {
                    return Some(format!("{}: rate_iops_min={iops_min} not met, got {got} IOPS", spec.name));
                }
            }
        }
        self.last_bytes[di] = self.done_bytes[di];
        self.last_ios[di] = self.done_ios[di];
        self.last_ns[di] = now;
        None
    }
}

impl Runner<'_> {
    /// A completion of `len` bytes in direction `ddir` of clone `c` with a minimum rate: count
    /// it after the ramp, and end the clone with EIO (its I/Os in flight still count, as
    /// fio reaps them in cleanup_pending_aio) when the rate fell below the minimum.
    pub(super) fn min_rate_completion(&mut self, c: usize, ddir: usize, len: u64) -> Result<(), RunError> {
        let now = self.now;
        let cl = &mut self.clones[c];
        if now < cl.ramp_end || cl.stopping {
            return Ok(());
        }
        let Some(m) = cl.min_rate.as_mut() else { return Ok(()) };
        m.completed(ddir, len);
        if let Some(text) = m.check(&cl.gen.spec, now) {
            cl.error = EIO;
            cl.error_text = text;
            cl.stopping = true;
        }
        Ok(())
    }
}
