//! fio's `latency_target` (docs/fio.md): the queue-depth search that finds the deepest
//! queue whose completions meet a latency target over `latency_window`.

use super::{RunError, Runner};

/// Why a latency probe waits for the I/Os in flight (io_u.c io_u_quiesce).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum LatQuiesce {
    None,
    /// The depth was lowered (__lat_target_failed): drain, then start a new window.
    RampDown,
    /// The depth held (lat_target_success): drain, reset the statistics, then run one
    /// more window at that depth.
    FinalRun,
}

/// fio 3.33's queue-depth search for `latency_target` (io_u.c lat_target_init,
/// lat_target_check, lat_target_success, __lat_target_failed, lat_new_cycle; backend.c
/// do_io). Reimplemented from that description, not copied. The depth starts at 1 and
/// doubles after every window that met the target until one fails; after a failure it
/// bisects between the last good depth (`low`) and the failing one (`high`).
#[derive(Clone, Debug)]
pub(super) struct LatProbe {
    /// fio's latency_qd: the clone may have this many I/Os in flight.
    pub qd: u32,
    high: u32,
    low: u32,
    /// Successes in a row one below `high` (fio raises `high` by one after 3).
    stable: u32,
    /// Start of the current window and the completions counted before it.
    window_start_ns: u64,
    ios_base: u64,
    /// Completions of this window over the target (latency_percentile < 100).
    failed: u64,
    /// fio's latency_end_run: the statistics were reset for the final window.
    end_run: bool,
    pub quiesce: LatQuiesce,
    /// The ramp_time reset (libfio.c reset_all_stats -> lat_target_reset) has happened.
    ramped: bool,
}

impl LatProbe {
    /// lat_target_init: depth 1, searching up to `iodepth`.
    pub fn new(iodepth: u32, now: u64, completed: u64) -> Self {
        LatProbe {
            qd: 1,
            high: iodepth,
            low: 1,
            stable: 0,
            window_start_ns: now,
            ios_base: completed,
            failed: 0,
            end_run: false,
            quiesce: LatQuiesce::None,
            ramped: false,
        }
    }

    /// lat_new_cycle: a new window starts now.
    fn new_cycle(&mut self, now: u64, completed: u64) {
        self.window_start_ns = now;
        self.ios_base = completed;
        self.failed = 0;
    }

    /// __lat_target_failed: lower the depth to between the last good one and this one,
    /// and drain the queue first. False at depth 1: there is nothing lower to try.
    fn ramp_down(&mut self) -> bool {
        if self.qd == 1 {
            return false;
        }
        self.high = self.qd;
        if self.qd == self.low {
            self.low -= 1;
        }
        self.qd = (self.qd + self.low) / 2;
        self.stable = 0;
        self.quiesce = LatQuiesce::RampDown;
        true
    }

    /// lat_target_success: raise the depth (double while no depth has failed, else
    /// bisect towards `high`). True when the depth is unchanged, i.e. the search is over.
    fn ramp_up(&mut self, iodepth: u32) -> bool {
        let before = self.qd;
        self.low = self.qd;
        if self.qd + 1 == self.high {
            // One below a failing depth: fio retries the failing depth after 3 successes.
            self.stable += 1;
            if self.stable >= 3 {
                self.high += 1;
                self.stable = 0;
            }
        }
        self.qd = if self.high != iodepth { (self.qd + self.high) / 2 } else { self.qd.saturating_mul(2) };
        self.qd = self.qd.min(iodepth);
        self.qd == before
    }
}

impl Runner<'_> {
    /// One completion of a clone with a latency_target, `lat_ns` after its issue (the twin's
    /// lat = clat): io_u.c account_io_completion's target test, the end of a quiesce, then
    /// backend.c's per-iteration lat_target_check.
    pub(super) fn lat_completion(&mut self, c: usize, lat_ns: u64) -> Result<(), RunError> {
        let now = self.now;
        let cl = &mut self.clones[c];
        let spec = &cl.gen.spec;
        let (target, window, pct, iodepth) = (spec.latency_target_ns, spec.latency_window_ns, spec.latency_percentile, spec.iodepth.max(1));
        let (run, ramp) = (spec.latency_run, spec.ramp_time_ns);
        let completed = cl.ios_completed;
        let Some(p) = cl.lat.as_mut() else { return Ok(()) };
        // fio accounts no completion during ramp_time; its end resets the search.
        if now < cl.ramp_end || cl.stopping {
            return Ok(());
        }
        if !p.ramped {
            p.ramped = true;
            if ramp > 0 && !p.end_run {
                *p = LatProbe { ramped: true, ..LatProbe::new(iodepth, now, completed - 1) };
            }
        }
        if lat_ns > target {
            if pct >= 100.0 {
                if !p.ramp_down() {
                    // io_u.c lat_fatal: the job ends with ETIMEDOUT.
                    cl.error = 110;
                    cl.stopping = true;
                    return Ok(());
                }
            } else {
                p.failed += 1;
            }
        }
        if p.quiesce == LatQuiesce::None && now - p.window_start_ns >= window {
            // lat_target_check: judge the window by the share of its completions on target.
            let ios = completed - p.ios_base;
            let success_pct = (ios - p.failed.min(ios)) as f64 / ios.max(1) as f64 * 100.0;
            if success_pct < pct {
                // At depth 1 there is nothing lower: fio keeps the depth and lets the
                // window grow (no new cycle).
                p.ramp_down();
            } else if p.ramp_up(iodepth) && !run {
                if p.end_run {
                    // fio sets td->done: the clone stops; its I/Os in flight still count.
                    cl.stopping = true;
                    return Ok(());
                }
                p.quiesce = LatQuiesce::FinalRun;
            } else {
                p.new_cycle(now, completed);
            }
        }
        // The queue has drained: start the next window (after a statistics reset when it
        // is the final one).
        if p.quiesce != LatQuiesce::None && cl.inflight == 0 {
            let final_run = p.quiesce == LatQuiesce::FinalRun;
            p.quiesce = LatQuiesce::None;
            p.end_run |= final_run;
            p.new_cycle(now, completed);
            if final_run {
                cl.reset_stats(now);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_probe_follows_fios_ramp_sequence() {
        // fio 3.33 --debug=rate on a target every depth meets (iodepth=8): "Ramped up: 1 2 8",
        // "2 4 8", "4 8 8", "8 8 8" (low, qd, high), then the depth holds.
        let mut p = LatProbe::new(8, 0, 0);
        let mut seen = Vec::new();
        while !p.ramp_up(8) {
            seen.push((p.low, p.qd, p.high));
        }
        assert_eq!(seen, [(1, 2, 8), (2, 4, 8), (4, 8, 8)]);
        // A failure at 8 after success at 4 bisects: (4, 6, 8); a failure at the last good
        // depth lowers that too.
        let mut p = LatProbe { qd: 8, low: 4, high: 8, ..LatProbe::new(8, 0, 0) };
        assert!(p.ramp_down());
        assert_eq!((p.low, p.qd, p.high), (4, 6, 8));
        let mut p = LatProbe { qd: 4, low: 4, high: 8, ..LatProbe::new(8, 0, 0) };
        assert!(p.ramp_down());
        assert_eq!((p.low, p.qd, p.high), (3, 3, 4));
        assert!(!LatProbe::new(8, 0, 0).ramp_down(), "depth 1 cannot go lower");
        // One below a failing depth: the third success in a row retries the failing depth.
        let mut p = LatProbe { qd: 5, low: 5, high: 6, ..LatProbe::new(8, 0, 0) };
        assert!(p.ramp_up(8) && p.ramp_up(8));
        assert!(!p.ramp_up(8));
        assert_eq!((p.low, p.qd, p.high), (5, 6, 7));
    }

    // fio's reset at the ramp's end zeroes the depth distribution with the other statistics:
    // the depths count the I/Os issued after the ramp, so they sum to about the I/Os reported
}
