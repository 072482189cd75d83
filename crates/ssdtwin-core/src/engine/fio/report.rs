//! fio's per-clone report (docs/fio.md §4): the output types, and the accounting both the
//! fio runner and the cluster (cluster/out.rs) keep as I/Os complete — bw/iops sample
//! windows, queue-depth bins, latency buckets, per-direction totals — so the two report
//! the same figures the same way.

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

use super::steadystate::SsOut;
use crate::engine::iolog::Packed;
use crate::stats::{LatStat, StatOut};
use crate::workload::JobSpec;

/// Engine output of one direction (docs/fio.md §4).
#[derive(Clone, Debug, Serialize)]
pub struct DirOut {
    pub io_bytes: u64,
    pub total_ios: u64,
    pub runtime_ns: u64,
    pub short_ios: u64,
    pub drop_ios: u64,
    pub clat: StatOut,
    pub slat: StatOut,
    pub lat: StatOut,
    /// fio's bw samples (KiB/s, one per full `bw_avg_ms` window with I/O in this direction)
    /// as running statistics: fixed size however long the run.
    pub bw_sample_stat: SampleStatOut,
    /// The same for iops samples (I/Os per second per full `iops_avg_ms` window).
    pub iops_sample_stat: SampleStatOut,
}

impl DirOut {
    /// A direction with no I/O.
    pub(crate) fn idle() -> DirOut {
        DirOut {
            io_bytes: 0,
            total_ios: 0,
            runtime_ns: 0,
            short_ios: 0,
            drop_ios: 0,
            clat: zero_stat(0),
            slat: zero_stat(0),
            lat: zero_stat(0),
            bw_sample_stat: Default::default(),
            iops_sample_stat: Default::default(),
        }
    }
}

/// fio's `struct io_stat` of bw or iops samples (docs/fio.md §4): count, min, max, running
/// mean and S = Σ(x - mean)², updated as stat.c `add_stat_sample` does, step for step, so
/// the mean and deviation round exactly as fio's.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SampleStatOut {
    pub n: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub m2: f64,
}

impl SampleStatOut {
    fn add(&mut self, value: u64) {
        if self.n == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        let val = value as f64;
        let delta = val - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.n as f64 + 1.0);
            self.m2 += delta * (val - self.mean);
        }
        self.n += 1;
    }
}

/// Amount (bytes or I/Os) completed in the current averaging window of one direction; a
/// window is folded into the sample statistics when a completion lands in a later one, so
/// memory does not depend on how long the run is. Windows without I/O give no sample (fio's
/// stat.c `__add_samples`).
#[derive(Default)]
pub(crate) struct WindowAcc {
    index: u64,
    amount: u64,
    stat: SampleStatOut,
    /// [start, end) of window `index` in ns, once `add_at` has computed it (end 0: not yet).
    span_ns: (u64, u64),
}

impl WindowAcc {
    pub(crate) fn add(&mut self, index: u64, amount: u64, window_ms: u64, per_s: fn(u64, u64) -> u64) {
        if index != self.index {
            self.close(window_ms, per_s);
            self.index = index;
        }
        self.amount += amount;
    }

    /// [`WindowAcc::add`] at `rel_ns` into the run, windows of `win_ns` (`window_ns(window_ms)`):
    /// the window's index is divided out only when `rel_ns` leaves the current window.
    #[inline]
    pub(crate) fn add_at(&mut self, rel_ns: u64, win_ns: u64, amount: u64, window_ms: u64, per_s: fn(u64, u64) -> u64) {
        if rel_ns < self.span_ns.0 || rel_ns >= self.span_ns.1 {
            let index = rel_ns / win_ns;
            self.span_ns = (index * win_ns, (index + 1).saturating_mul(win_ns));
            if index != self.index {
                self.close(window_ms, per_s);
                self.index = index;
            }
        }
        self.amount += amount;
    }

    fn close(&mut self, window_ms: u64, per_s: fn(u64, u64) -> u64) {
        if self.amount > 0 {
            self.stat.add(per_s(self.amount, window_ms));
            self.amount = 0;
        }
    }

    /// The statistics at the end of a run: the windows that ended before `samples_end_ns`
    /// count (fio's helper thread takes a window's sample only while the job runs, so the
    /// window that ends as the run ends is not sampled: 3 samples of 500 ms in a 2 s run).
    pub(crate) fn finish(mut self, window_ms: u64, samples_end_ns: u64, per_s: fn(u64, u64) -> u64) -> SampleStatOut {
        if self.index < sampled_windows(window_ms, samples_end_ns) {
            self.close(window_ms, per_s);
        }
        self.stat
    }
}

/// How many whole windows of `window_ms` end strictly before `end_ns`: the ones fio samples
/// (and writes bw/iops log rows for) in a run whose sampling ends at `end_ns`.
pub(crate) fn sampled_windows(window_ms: u64, end_ns: u64) -> u64 {
    end_ns.saturating_sub(1) / window_ns(window_ms)
}

pub(crate) fn window_ns(window_ms: u64) -> u64 {
    window_ms.max(1).saturating_mul(1_000_000)
}

/// A bw sample: floor(floor(bytes*1000/ms)/1024) KiB/s.
pub(crate) fn kib_per_s(bytes: u64, window_ms: u64) -> u64 {
    (bytes as u128 * 1000 / window_ms.max(1) as u128 / 1024) as u64
}

/// An iops sample: ios*1000/ms.
pub(crate) fn ios_per_s(ios: u64, window_ms: u64) -> u64 {
    (ios as u128 * 1000 / window_ms.max(1) as u128).min(u64::MAX as u128) as u64
}

/// What one direction of a clone completed after the ramp: bytes, I/Os, the latency
/// histogram and the bw/iops sample windows.
#[derive(Default)]
pub(crate) struct DirCounters {
    pub io_bytes: u64,
    pub ios: u64,
    pub clat: LatStat,
    pub bw_window: WindowAcc,
    pub iops_window: WindowAcc,
}

impl DirCounters {
    /// The direction's output for a clone of `spec` that ran `runtime_ns` after its ramp, its
    /// bw/iops windows sampled until `samples_end_ns` ([`WindowAcc::finish`]);
    /// `has_dir`: the job issues this direction at all. The twin does not model host
    /// submission, so slat is 0 and lat = clat: one histogram, reported for both.
    pub(crate) fn out(self, spec: &JobSpec, has_dir: bool, runtime_ns: u64, samples_end_ns: u64) -> DirOut {
        DirOut {
            io_bytes: self.io_bytes,
            total_ios: self.ios,
            runtime_ns: if self.ios > 0 && has_dir { runtime_ns } else { 0 },
            short_ios: 0,
            drop_ios: 0,
            clat: self.clat.out(),
            slat: if spec.engine_async { zero_stat(self.ios) } else { zero_stat(0) },
            lat: self.clat.out(),
            bw_sample_stat: self.bw_window.finish(spec.bw_avg_ms, samples_end_ns, kib_per_s),
            iops_sample_stat: self.iops_window.finish(spec.iops_avg_ms, samples_end_ns, ios_per_s),
        }
    }
}

/// Engine output of one clone (docs/fio.md §4).
#[derive(Clone, Debug, Serialize)]
pub struct CloneOut {
    pub version: u32,
    pub thread_number: u32,
    pub start_ns: u64,
    pub elapsed_ns: u64,
    pub runtime_ns: u64,
    pub read: DirOut,
    pub write: DirOut,
    pub trim: DirOut,
    pub iodepth_level: [u64; 7],
    pub iodepth_submit: [u64; 7],
    pub iodepth_complete: [u64; 7],
    pub latency_buckets: BTreeMap<String, Vec<u64>>,
    pub logs: CloneLogs,
    /// write_iolog: the issued I/Os in issue order, packed (engine/iolog.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iolog: Option<Packed>,
    /// fio's `latency_depth` (stat.c: td->latency_qd): the depth latency_target probing
    /// ended at, or `iodepth` without a target.
    pub latency_depth: u32,
    /// fio's job error (errno): 110 (ETIMEDOUT) when an I/O at depth 1 missed a
    /// latency_target with latency_percentile=100 (io_u.c lat_fatal); 5 (EIO) when a
    /// minimum rate was missed (backend.c check_min_rate).
    pub error: i32,
    /// fio's own log line(s) for the error, e.g. "job: rate_min=…B/s not met, got …B/s";
    /// left out when empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error_text: String,
    /// fio's steady-state record (docs/fio.md §4); None without `ss_dur`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steadystate: Option<SsOut>,
}

/// The log rows of one clone (fio's write_bw_log, write_iops_log, write_lat_log,
/// write_hist_log), each log in time order. A log without rows is left out of the output,
/// so the keys present are the logs written.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CloneLogs {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bw: Vec<LogRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clat: Vec<LogRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clat_hist: Vec<HistRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub iops: Vec<LogRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lat: Vec<LogRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slat: Vec<LogRow>,
}

/// Log rows (write_bw_log, write_iops_log, write_lat_log, write_hist_log) a run may keep:
/// they stay in memory until the run ends, ~40 bytes each in the engine and ~240 in Python
/// as they are written out (2 GiB at the limit). fio streams its logs to disk; with
/// `log_avg_msec=0` (its default) a bw, iops or latency log takes a row per I/O, and an hour
/// of 4 KiB I/O at QD32 was 600 million rows, 24 GB, before the kernel killed the process.
pub const MAX_LOG_ROWS: usize = 1 << 23;

impl CloneLogs {
    /// Rows of every log of the clone.
    pub(crate) fn rows(&self) -> usize {
        let rows = [&self.bw, &self.clat, &self.iops, &self.lat, &self.slat];
        rows.iter().map(|r| r.len()).sum::<usize>() + self.clat_hist.len()
    }

    /// Rows the logs can hold without growing (for the run's footprint).
    pub(crate) fn capacity(&self) -> usize {
        let rows = [&self.bw, &self.clat, &self.iops, &self.lat, &self.slat];
        rows.iter().map(|r| r.capacity()).sum::<usize>() + self.clat_hist.capacity()
    }

    /// Sort every log by time (stable: rows of one time keep their order), as fio writes them.
    pub(crate) fn sort(&mut self) {
        for rows in [&mut self.bw, &mut self.clat, &mut self.iops, &mut self.lat, &mut self.slat] {
            rows.sort_by_key(|r| r.t_ms);
        }
        self.clat_hist.sort_by_key(|r| r.t_ms);
    }
}

/// One row of a bw, iops or latency log, fio's `time, value, data direction, block size,
/// offset`; serialised as that list.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LogRow {
    pub t_ms: u64,
    pub value: u64,
    pub ddir: u8,
    pub bs: u64,
    pub offset: u64,
}

impl Serialize for LogRow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(5))?;
        seq.serialize_element(&self.t_ms)?;
        seq.serialize_element(&self.value)?;
        seq.serialize_element(&self.ddir)?;
        seq.serialize_element(&self.bs)?;
        seq.serialize_element(&self.offset)?;
        seq.end()
    }
}

/// One row of a histogram log (`log_hist_msec`): the time, the direction and the latency
/// histogram's buckets that counted completions since the previous row, as (bucket,
/// count); serialised as fio's `time, direction, block size, [[bucket, count], ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistRow {
    pub t_ms: u64,
    pub ddir: u8,
    /// The block size of the I/O whose completion wrote the row (fio logs that I/O's).
    pub bs: u64,
    pub buckets: Vec<(u64, u64)>,
}

impl Serialize for HistRow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// A (bucket, count) pair as a two-element list.
        struct Pair(u64, u64);
        impl Serialize for Pair {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element(&self.0)?;
                seq.serialize_element(&self.1)?;
                seq.end()
            }
        }
        /// The buckets as a list of pairs.
        struct Buckets<'a>(&'a [(u64, u64)]);
        impl Serialize for Buckets<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|&(b, n)| Pair(b, n)))
            }
        }
        let mut seq = s.serialize_seq(Some(4))?;
        seq.serialize_element(&self.t_ms)?;
        seq.serialize_element(&self.ddir)?;
        seq.serialize_element(&self.bs)?;
        seq.serialize_element(&Buckets(&self.buckets))?;
        seq.end()
    }
}

/// fio's queue-depth bins (io_u.c `io_u_mark_depth`): the smallest depth of each of the
/// seven, 1, 2-3, 4-7, 8-15, 16-31, 32-63 and 64 or more.
pub const IODEPTH_BIN_LOW: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The bin of [`IODEPTH_BIN_LOW`] a queue depth counts in (0 counts as 1).
#[inline]
pub fn depth_slot(d: u32) -> usize {
    ((31 - d.max(1).leading_zeros()) as usize).min(IODEPTH_BIN_LOW.len() - 1)
}

/// fio's latency bucket edges (stat.c `io_u_lat_n`, `_u`): the ns and µs buckets end below
/// these values of their unit.
pub const LAT_EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

/// The ms buckets' edges (stat.c `io_u_lat_m`); the last bucket counts 2000 ms and more.
pub const LAT_MS_EDGES: [u64; 11] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000];

fn edge_index(v: u64, edges: &[u64]) -> usize {
    edges.iter().position(|&e| v < e).unwrap_or(edges.len())
}

/// `edge_index(v, &LAT_EDGES)` for v < 1000, as a table (one load per completion).
const LAT_INDEX: [u8; 1000] = {
    let mut t = [0u8; 1000];
    let mut v = 0;
    while v < 1000 {
        let mut i = 0;
        while i < LAT_EDGES.len() && v as u64 >= LAT_EDGES[i] {
            i += 1;
        }
        t[v] = i as u8;
        v += 1;
    }
    t
};

/// Which of fio's latency tables a completion latency counts in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LatTable {
    Ns,
    Us,
    Ms,
}

impl LatTable {
    /// Its key in the output (`latency_ns`, `latency_us`, `latency_ms` without the prefix).
    pub fn name(self) -> &'static str {
        match self {
            LatTable::Ns => "ns",
            LatTable::Us => "us",
            LatTable::Ms => "ms",
        }
    }
}

/// The table and slot a completion latency of `lat_ns` counts in (io_u.c
/// `io_u_mark_latency`): under 1 us the ns table, under 1 ms the us table (whole us), the
/// ms table above, whose last slot takes 2000 ms and more.
#[inline]
pub fn latency_slot(lat_ns: u64) -> (LatTable, usize) {
    if lat_ns < 1000 {
        (LatTable::Ns, LAT_INDEX[lat_ns as usize] as usize)
    } else if lat_ns < 1_000_000 {
        (LatTable::Us, LAT_INDEX[(lat_ns / 1000) as usize] as usize)
    } else {
        (LatTable::Ms, edge_index(lat_ns / 1_000_000, &LAT_MS_EDGES))
    }
}

/// fio's `latency_ns`, `latency_us` and `latency_ms` buckets of a clone's completions.
#[derive(Clone, Default)]
pub(crate) struct LatencyBuckets {
    ns: [u64; 10],
    us: [u64; 10],
    ms: [u64; 12],
}

impl LatencyBuckets {
    /// Count one completion of `lat_ns`.
    #[inline]
    pub(crate) fn add(&mut self, lat_ns: u64) {
        let (table, slot) = latency_slot(lat_ns);
        let counts: &mut [u64] = match table {
            LatTable::Ns => &mut self.ns,
            LatTable::Us => &mut self.us,
            LatTable::Ms => &mut self.ms,
        };
        counts[slot] += 1;
    }

    /// Count `n` completions of `lat_ns`.
    pub(crate) fn add_n(&mut self, lat_ns: u64, n: u64) {
        let (table, slot) = latency_slot(lat_ns);
        let counts: &mut [u64] = match table {
            LatTable::Ns => &mut self.ns,
            LatTable::Us => &mut self.us,
            LatTable::Ms => &mut self.ms,
        };
        counts[slot] += n;
    }

    /// The buckets keyed by unit, as the output holds them.
    pub(crate) fn map(&self) -> BTreeMap<String, Vec<u64>> {
        BTreeMap::from([("ns".to_string(), self.ns.to_vec()), ("us".to_string(), self.us.to_vec()), ("ms".to_string(), self.ms.to_vec())])
    }
}

/// Statistics of `n` zero-valued samples (submission latency of a host we do not model).
pub(crate) fn zero_stat(n: u64) -> StatOut {
    StatOut { n, min_ns: 0, max_ns: 0, sum_ns: 0, m2: 0.0, hist: if n > 0 { vec![[0, n]] } else { vec![] } }
}

/// fio's `iodepth_submit` and `iodepth_complete` levels: an asynchronous engine submits and
/// completes `ios_total` I/Os one at a time (level 1), a synchronous one reports none.
pub(crate) fn submit_complete_levels(engine_async: bool, ios_total: u64) -> ([u64; 7], [u64; 7]) {
    let mut levels = [0u64; 7];
    if engine_async {
        levels[1] = ios_total;
    }
    (levels, levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    const SECOND: u64 = 1_000_000_000;

    /// The old way: every window of the run in a list, truncated to the full ones, empty
    /// ones skipped, then fio's Welford over the samples in order.
    fn reference(completions: &[(u64, u64)], window_ms: u64, runtime_ns: u64, per_s: fn(u64, u64) -> u64) -> SampleStatOut {
        let win = window_ns(window_ms);
        let mut windows = vec![0u64; (runtime_ns / win + 1) as usize];
        for &(t, amount) in completions {
            windows[(t / win) as usize] += amount;
        }
        windows.truncate((runtime_ns / win) as usize);
        let mut stat = SampleStatOut::default();
        for &w in windows.iter().filter(|&&w| w > 0) {
            stat.add(per_s(w, window_ms));
        }
        stat
    }

    #[test]
    fn running_window_statistics_equal_the_per_window_samples() {
        let mut rng = Rng::new(42);
        for case in 0..200 {
            let window_ms = 1 + rng.below(700);
            let runtime_ns = rng.below(40 * SECOND);
            // Completions in time order, bursty (some windows empty), up to the run's end.
            let mut t = 0;
            let mut completions = Vec::new();
            while t <= runtime_ns {
                completions.push((t, 512 * (1 + rng.below(256))));
                t += if rng.below(10) == 0 { rng.below(3 * SECOND) } else { rng.below(SECOND / 50) };
            }
            for per_s in [kib_per_s as fn(u64, u64) -> u64, ios_per_s] {
                let mut acc = WindowAcc::default();
                for &(t, amount) in &completions {
                    acc.add(t / window_ns(window_ms), amount, window_ms, per_s);
                }
                let got = acc.finish(window_ms, runtime_ns, per_s);
                let want = reference(&completions, window_ms, runtime_ns, per_s);
                assert_eq!(got, want, "case {case}: window {window_ms} ms, runtime {runtime_ns} ns");
                assert_eq!(got.mean.to_bits(), want.mean.to_bits());
                assert_eq!(got.m2.to_bits(), want.m2.to_bits());
            }
        }
    }

    #[test]
    fn windows_found_without_dividing_equal_the_divided_ones() {
        let mut rng = Rng::new(7);
        for case in 0..200 {
            let window_ms = 1 + rng.below(700);
            let (mut t, mut a, mut b) = (0, WindowAcc::default(), WindowAcc::default());
            for _ in 0..2000 {
                t += if rng.below(10) == 0 { rng.below(3 * SECOND) } else { rng.below(SECOND / 50) };
                let amount = 1 + rng.below(1 << 20);
                a.add(t / window_ns(window_ms), amount, window_ms, kib_per_s);
                b.add_at(t, window_ns(window_ms), amount, window_ms, kib_per_s);
                assert_eq!((a.index, a.amount, &a.stat), (b.index, b.amount, &b.stat), "case {case}");
            }
        }
    }

    #[test]
    fn the_latency_table_is_the_edge_search() {
        for v in 0..1000u64 {
            assert_eq!(LAT_INDEX[v as usize] as usize, edge_index(v, &LAT_EDGES), "{v}");
        }
    }

    #[test]
    fn depth_and_latency_slots_follow_fio() {
        for (depth, bin) in [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (63, 5), (64, 6), (1000, 6)] {
            assert_eq!(depth_slot(depth), bin, "depth {depth}");
        }
        for (bin, &low) in IODEPTH_BIN_LOW.iter().enumerate() {
            assert_eq!(depth_slot(low), bin);
        }
        assert_eq!(latency_slot(1), (LatTable::Ns, 0));
        assert_eq!(latency_slot(999), (LatTable::Ns, 9));
        assert_eq!(latency_slot(1000), (LatTable::Us, 0));
        assert_eq!(latency_slot(999_999), (LatTable::Us, 9));
        assert_eq!(latency_slot(1_999_999), (LatTable::Ms, 0));
        assert_eq!(latency_slot(1_999_999_999), (LatTable::Ms, 10));
        assert_eq!(latency_slot(u64::MAX), (LatTable::Ms, 11));
    }

    #[test]
    fn log_rows_serialise_as_fios_lists() {
        let mut logs = CloneLogs::default();
        logs.bw.push(LogRow { t_ms: 3, value: 100, ddir: 1, bs: 4096, offset: 0 });
        logs.clat_hist.push(HistRow { t_ms: 5, ddir: 0, bs: 4096, buckets: vec![(7, 2)] });
        let v = serde_json::to_value(&logs).unwrap();
        assert_eq!(v, serde_json::json!({"bw": [[3, 100, 1, 4096, 0]], "clat_hist": [[5, 0, 4096, [[7, 2]]]]}));
    }
}
