//! fio's steady-state detection (`steadystate`/`ss`, `ss_dur`, `ss_ramp`).
//!
//! Reimplemented from the behaviour of fio 3.33's steadystate.c (not its code): once a
//! second (fio's helper thread runs `steadystate_check` every `STEADYSTATE_MSEC`) each
//! clone's IOPS and bytes/s since the previous look are measured; with `group_reporting`
//! the clones of a reporting group are summed and judged as one. After `ss_ramp` plus one
//! second, the measurements fill a window of `ss_dur` samples; every sample after the window
//! is full, the criterion is evaluated and, when it is under the limit, the clone (or the
//! whole group) is terminated. [`SsState`] is one clone's record; the runner owns the
//! clock and looks once a second ([`Runner::steadystate_tick`], at the end of this file).

use serde::Serialize;

use super::Runner;
use crate::workload::{SsMetric, SteadyStateSpec};

const SECOND_NS: u64 = 1_000_000_000;

/// The steady-state record of one clone (fio's `struct steadystate_data`).
#[derive(Debug)]
pub(crate) struct SsState {
    spec: SteadyStateSpec,
    /// This clone keeps the window (fio `steadystate_setup`: every clone without
    /// group_reporting, the last clone of each reporting group with it).
    pub(crate) holder: bool,
    pub(crate) attained: bool,
    ramp_over: bool,
    buffer_full: bool,
    head: usize,
    tail: usize,
    iops: Vec<u64>,
    bw: Vec<u64>,
    slope: f64,
    deviation: f64,
    criterion: f64,
    /// fio's epoch: the clone's start, moved to the end of `ramp_time` when the stats reset.
    epoch_ns: u64,
    ramp_passed: bool,
    prev_ns: u64,
    prev_ios: u64,
    prev_bytes: u64,
    /// fio's `io_blocks`/`io_bytes`: completions since the epoch.
    ios_done: u64,
    bytes_done: u64,
}

/// What the engine hands back per clone (docs/fio.md §4, fio's JSON "steadystate").
#[derive(Clone, Debug, Serialize)]
pub struct SsOut {
    pub metric: SsMetric,
    pub is_slope: bool,
    pub percent: bool,
    pub limit: f64,
    pub duration_s: u64,
    pub holder: bool,
    pub attained: bool,
    /// NaN (serialized as null) where fio's arithmetic divides by zero.
    pub criterion: f64,
    pub max_deviation: f64,
    pub slope: f64,
    /// The window, oldest first, in the order fio's stat.c prints it (zeros where it is
    /// not full yet); empty for a clone that does not keep the window.
    pub iops: Vec<u64>,
    pub bw: Vec<u64>,
}

impl SsState {
    pub(crate) fn new(spec: SteadyStateSpec, holder: bool) -> Self {
        let n = if holder { spec.duration_s as usize } else { 0 };
        SsState {
            spec,
            holder,
            attained: false,
            ramp_over: false,
            buffer_full: false,
            head: 0,
            tail: 0,
            iops: vec![0; n],
            bw: vec![0; n],
            slope: 0.0,
            deviation: 0.0,
            criterion: 0.0,
            epoch_ns: 0,
            ramp_passed: false,
            prev_ns: 0,
            prev_ios: 0,
            prev_bytes: 0,
            ios_done: 0,
            bytes_done: 0,
        }
    }

    pub(crate) fn group_reporting(&self) -> bool {
        self.spec.group_reporting
    }

    /// The clone started at `t` (backend.c sets the epoch and `ss.prev_time` together).
    pub(crate) fn start(&mut self, t: u64) {
        self.epoch_ns = t;
        self.prev_ns = t;
        self.ramp_over = self.spec.ramp_ns == 0;
    }

    /// At the end of `ramp_time` fio resets the clone's counters, its epoch and the time of
    /// the previous look (libfio.c `reset_all_stats`). The clone is not looked at during
    /// its ramp (its runstate is TD_RAMP), so the previous counts are still 0.
    fn pass_ramp(&mut self, now: u64, ramp_end: u64) {
        if self.ramp_passed || now < ramp_end {
            return;
        }
        self.ramp_passed = true;
        if ramp_end > self.epoch_ns {
            self.epoch_ns = ramp_end;
            self.prev_ns = ramp_end;
            (self.ios_done, self.bytes_done, self.prev_ios, self.prev_bytes) = (0, 0, 0, 0);
        }
    }

    /// An I/O of `len` bytes completed at `now` (fio counts io_blocks on completion).
    pub(crate) fn count(&mut self, now: u64, ramp_end: u64, len: u64) {
        self.pass_ramp(now, ramp_end);
        self.ios_done += 1;
        self.bytes_done += len;
    }

    /// One look of fio's `steadystate_check` at this clone: its IOPS and bytes/s since the
    /// previous look (integer milliseconds, as fio's `mtime_since`), or None while `ss_ramp`
    /// plus one second has not passed since the epoch.
    pub(crate) fn sample(&mut self, now: u64, ramp_end: u64) -> Option<(u64, u64)> {
        self.pass_ramp(now, ramp_end);
        if !self.ramp_over && now - self.epoch_ns >= self.spec.ramp_ns.saturating_add(SECOND_NS) {
            self.ramp_over = true;
        }
        // fio divides by the elapsed milliseconds; a look less than 1 ms after the epoch
        // would divide by zero there, here it counts as 1 ms.
        let rate_ms = ((now - self.prev_ns) / 1_000_000).max(1) as u128;
        self.prev_ns = now;
        let ios = self.ios_done - self.prev_ios;
        let bytes = self.bytes_done - self.prev_bytes;
        (self.prev_ios, self.prev_bytes) = (self.ios_done, self.bytes_done);
        let per_s = |n: u64| (1000 * n as u128 / rate_ms).min(u64::MAX as u128) as u64;
        self.ramp_over.then(|| (per_s(ios), per_s(bytes)))
    }

    /// Add one sample (the group's sum with group_reporting) to the window and judge it;
    /// true when steady state is attained (fio `steadystate_slope`/`steadystate_deviation`).
    pub(crate) fn judge(&mut self, iops: u64, bw: u64) -> bool {
        let n = self.spec.duration_s as usize;
        self.iops[self.tail] = iops;
        self.bw[self.tail] = bw;
        if self.buffer_full || self.tail - self.head == n - 1 {
            self.buffer_full = true;
            let window: Vec<u64> = (0..n).map(|i| self.value((self.head + i) % n)).collect();
            let met = if self.spec.slope { self.judge_slope(&window) } else { self.judge_deviation(&window) };
            if met {
                return true;
            }
        }
        self.tail = (self.tail + 1) % n;
        if self.tail <= self.head {
            self.head = (self.head + 1) % n;
        }
        false
    }

    fn value(&self, i: usize) -> u64 {
        match self.spec.metric {
            SsMetric::Iops => self.iops[i],
            SsMetric::Bw => self.bw[i],
        }
    }

    /// Least-squares slope over x = 0..n-1, from the same integer sums fio keeps (its
    /// running sums equal these exactly), then relative to the window's mean truncated to
    /// an integer, as fio divides `sum_y / dur` in integers.
    fn judge_slope(&mut self, window: &[u64]) -> bool {
        let n = window.len() as u64;
        let sum_x = n * (n - 1) / 2;
        let sum_x_sq = (n - 1) * n * (2 * n - 1) / 6;
        let sum_y = window.iter().fold(0u64, |a, &y| a.wrapping_add(y));
        let sum_xy = window.iter().enumerate().fold(0u64, |a, (i, &y)| a.wrapping_add((i as u64).wrapping_mul(y)));
        let nf = n as f64;
        self.slope = (sum_xy as f64 - sum_x as f64 * sum_y as f64 / nf) / (sum_x_sq as f64 - sum_x as f64 * sum_x as f64 / nf);
        self.criterion = if self.spec.percent { 100.0 * self.slope / (sum_y / n) as f64 } else { self.slope };
        self.criterion.abs() < self.spec.limit
    }

    /// The largest distance of a sample from the window's mean.
    fn judge_deviation(&mut self, window: &[u64]) -> bool {
        let sum_y = window.iter().fold(0u64, |a, &y| a.wrapping_add(y));
        let mean = sum_y as f64 / window.len() as f64;
        self.deviation = window.iter().map(|&y| (y as f64 - mean).abs()).fold(0.0, f64::max);
        self.criterion = if self.spec.percent { 100.0 * self.deviation / mean } else { self.deviation };
        self.criterion < self.spec.limit
    }

    pub(crate) fn out(&self) -> SsOut {
        let n = self.iops.len();
        // stat.c: attained or not full, the window starts at head; otherwise one before it.
        let first = if self.attained || !self.buffer_full || n == 0 { self.head } else { (self.head + n - 1) % n };
        let order = |v: &[u64]| (0..n).map(|l| v[(first + l) % n]).collect::<Vec<u64>>();
        SsOut {
            metric: self.spec.metric,
            is_slope: self.spec.slope,
            percent: self.spec.percent,
            limit: self.spec.limit,
            duration_s: self.spec.duration_s,
            holder: self.holder,
            attained: self.attained,
            criterion: self.criterion,
            max_deviation: self.deviation,
            slope: self.slope,
            iops: order(&self.iops),
            bw: order(&self.bw),
        }
    }
}

/// fio's steady-state look interval (steadystate.h `STEADYSTATE_MSEC`).
pub(super) const SS_TICK_NS: u64 = 1_000_000_000;

impl Runner<'_> {
    /// fio's `steadystate_check` at `now`: sample every running clone in order, sum each
    /// reporting group's samples (group_reporting) into the clone that keeps its window,
    /// judge, and terminate the clone or its whole group when steady state is attained.
    pub(super) fn steadystate_tick(&mut self, now: u64) {
        self.now = now;
        let (mut group_iops, mut group_bw, mut group_over) = (0u64, 0u64, 0u32);
        let mut prev_group: Option<u32> = None;
        for i in 0..self.clones.len() {
            let cl = &mut self.clones[i];
            let (gid, ramp_end) = (cl.gen.spec.group_id, cl.ramp_end);
            // A clone starting at this very instant has its epoch after fio's look; one in
            // its ramp_time is skipped (fio's steadystate_check skips TD_RAMP), also at the
            // very end of it (the look comes before the reset that re-arms the looks).
            let running = cl.started && !cl.finished && cl.start_ns < now && now > ramp_end;
            let Some(ss) = cl.ss.as_mut().filter(|s| running && !s.attained) else { continue };
            if !ss.group_reporting() || prev_group != Some(gid) {
                (group_iops, group_bw, group_over) = (0, 0, 0);
            }
            prev_group = Some(gid);
            if let Some((iops, bw)) = ss.sample(now, ramp_end) {
                group_iops = group_iops.saturating_add(iops);
                group_bw = group_bw.saturating_add(bw);
                group_over += 1;
            }
            if !ss.holder || group_over == 0 || !ss.judge(group_iops, group_bw) {
                continue;
            }
            let whole_group = ss.group_reporting();
            for k in 0..self.clones.len() {
                let hit = if whole_group { self.clones[k].gen.spec.group_id == gid } else { k == i };
                if !hit {
                    continue;
                }
                if let Some(s) = &mut self.clones[k].ss {
                    s.attained = true;
                }
                if !self.clones[k].finished {
                    self.terminate(k, now);
                }
            }
        }
        let more = self.clones.iter().any(|c| !c.finished && c.ss.as_ref().is_some_and(|s| !s.attained));
        self.ss_next_ns = if more { now.saturating_add(SS_TICK_NS) } else { u64::MAX };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(metric: SsMetric, slope: bool, percent: bool, limit: f64, n: u64) -> SteadyStateSpec {
        SteadyStateSpec { metric, slope, percent, limit, duration_s: n, ramp_ns: 0, group_reporting: false }
    }

    #[test]
    fn deviation_is_judged_once_the_window_is_full() {
        let mut ss = SsState::new(spec(SsMetric::Iops, false, true, 10.0, 3), true);
        assert!(!ss.judge(100, 0));
        assert!(!ss.judge(200, 0));
        // Window 100, 200, 150: mean 150, largest deviation 50 = 33%.
        assert!(!ss.judge(150, 0));
        assert!((ss.criterion - 100.0 / 3.0).abs() < 1e-9);
        // Window 200, 150, 160: mean 170, deviation 30 = 17.6%.
        assert!(!ss.judge(160, 0));
        // Window 150, 160, 155: mean 155, deviation 5 = 3.2%: attained.
        assert!(ss.judge(155, 0));
        ss.attained = true;
        assert_eq!(ss.out().iops, vec![150, 160, 155]);
    }

    #[test]
    fn slope_equals_the_least_squares_fit() {
        let mut ss = SsState::new(spec(SsMetric::Bw, true, false, 0.5, 4), true);
        for y in [10, 12, 14, 16, 17] {
            ss.judge(0, y);
        }
        // Window 12, 14, 16, 17: slope = 1.7 (least squares over x = 0..3).
        assert!((ss.slope - 1.7).abs() < 1e-12, "{}", ss.slope);
        // Not attained and full: fio prints from one before head, which is the oldest sample.
        assert_eq!(ss.out().bw, vec![12, 14, 16, 17]);
    }

    #[test]
    fn the_window_is_printed_oldest_first_before_it_is_full() {
        let mut ss = SsState::new(spec(SsMetric::Iops, true, true, 0.01, 4), true);
        ss.judge(5, 0);
        ss.judge(6, 0);
        assert_eq!(ss.out().iops, vec![5, 6, 0, 0]);
    }
}
