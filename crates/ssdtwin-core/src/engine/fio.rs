//! Runs fio job clones against a drive in virtual time (docs/fio.md §3-§4).
//!
//! Each clone is a closed loop of `iodepth` slots. Events (clone start, I/O completion,
//! wake-ups for rate limits and think time) sit in one heap ordered by (time, sequence),
//! sized by the outstanding I/Os. Completion times come from [`DeviceTiming`] at the moment
//! an I/O is issued, so the NAND timelines need no events of their own.

use serde::Serialize;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::arbiter::{Arbiter, Queued};
use super::events::{Entry, EventQueue};
use super::iolog::{IoLog, Packed, Replay};
use super::stack::{Stack, StackSim, Stalled}; // issue 13: host stacks
use super::steadystate::{SsOut, SsState}; // issue 10: ss
use super::{DeviceTiming, HostCmd, HostOp};
use crate::nvme::{Controller, Error};
use crate::rng::Rng;
use crate::stats::{LatStat, StatOut};
use crate::units::NsId;
use crate::workload::{Ddir, ExitWhat, Generator, Io, JobError, JobSpec, RateProcess, ThinktimeBlocksType};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(transparent)]
    Nvme(#[from] Error),
    #[error(transparent)]
    Timing(#[from] super::TimingError),
    #[error("interrupted at {0} ns of virtual time")]
    Interrupted(u64),
    /// issue 13: a job a host stack cannot run.
    #[error("stack: {0}")]
    Stack(String),
    /// The run would take the simulated clock past [`MAX_RUN_NS`] (or past what the drive's
    /// own clock can still count).
    #[error("simulated time would pass {} days, the longest a run may simulate (the device timing counts picoseconds in 64 bits)", .0 / NS_PER_DAY)]
    TimeLimit(u64),
}

/// The longest a run may simulate: 200 days. [`DeviceTiming`] keeps the controller's queues
/// in picoseconds, which a u64 holds for 213 days; the rest is margin for device latencies
/// past the last event. docs/fio.md lists the job-file limits derived from it.
pub const MAX_RUN_NS: u64 = 200 * NS_PER_DAY;
const NS_PER_DAY: u64 = 86_400 * 1_000_000_000;

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
    fn add_at(&mut self, rel_ns: u64, win_ns: u64, amount: u64, window_ms: u64, per_s: fn(u64, u64) -> u64) {
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

    /// The statistics at the end of a run of `runtime_ns`: the open window counts only if it
    /// is full (fio takes no sample for the window the run ends in).
    pub(crate) fn finish(mut self, window_ms: u64, runtime_ns: u64, per_s: fn(u64, u64) -> u64) -> SampleStatOut {
        let full_windows = runtime_ns / window_ns(window_ms);
        if self.index < full_windows {
            self.close(window_ms, per_s);
        }
        self.stat
    }
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
    pub logs: BTreeMap<String, Vec<Value>>,
    /// write_iolog: the issued I/Os in issue order, packed (engine/iolog.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iolog: Option<Packed>,
    // issue 10: latency_target
    /// fio's `latency_depth` (stat.c: td->latency_qd): the depth latency_target probing
    /// ended at, or `iodepth` without a target.
    pub latency_depth: u32,
    /// fio's job error (errno): 110 (ETIMEDOUT) when an I/O at depth 1 missed a
    /// latency_target with latency_percentile=100 (io_u.c lat_fatal).
    pub error: i32,
    /// issue 10: ss — fio's steady-state record (docs/fio.md §4); None without `ss_dur`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steadystate: Option<SsOut>,
}

#[derive(Default)]
struct DirStats {
    io_bytes: u64,
    ios: u64,
    clat: LatStat,
    bw_window: WindowAcc,
    iops_window: WindowAcc,
    /// Open log window per log kind: (window start ns, sum, count, max).
    lat_window: [(u64, u128, u64, u64); 3],
    hist_since: Vec<u64>,
    /// (window index, bytes, I/Os) of each `log_avg_msec` window with I/O, in time order
    /// (bw/iops logs): one entry per row the log will have, none for idle windows.
    log_windows: Vec<(u64, u64, u64)>,
}

struct JobClone {
    gen: Generator,
    nsid: NsId,
    /// PRINFO of the job's commands (pi_act, pi_chk).
    pract: bool,
    prchk: u8,
    lba: u64,
    /// log2(lba) when a power of two (always, for the LBA formats NVMe drives offer).
    lba_shift: Option<u32>,
    /// `window_ns` of the job's bw_avg_ms and iops_avg_ms.
    bw_window_ns: u64,
    iops_window_ns: u64,
    /// Some log (bw, iops, lat, hist) is written.
    logging: bool,
    started: bool,
    finished: bool,
    stopping: bool,
    start_ns: u64,
    ramp_end: u64,
    stop_at: u64,
    end_ns: u64,
    inflight: u32,
    ios_issued: u64,
    bytes_issued: [u64; 3],
    /// I/Os completed (all directions), for `thinktime_blocks_type=complete`.
    ios_completed: u64,
    /// fio's `last_thinktime_blocks`: the counter's value at the last stall.
    last_think_blocks: u64,
    /// The last issue filled the queue: fio reaps at least one completion before it checks
    /// for think time, so the check waits for this clone's next completion.
    think_check_on_completion: bool,
    /// `thinktime_blocks` I/Os were issued or completed since the last stall: stall once the
    /// ones in flight have completed.
    think_due: bool,
    think_until: u64,
    rate_start: u64,
    /// Time of the last rate wake-up pushed for this clone. While the front I/O waits for
    /// its rate slot, every completion would otherwise push another wake-up for the same
    /// time, and each of those would push one more: the heap grew with the I/Os issued and
    /// a rate-limited run slowed down quadratically (issue 10, item 7).
    rate_wake_ns: u64,
    /// Its start event is queued (a `wait_for` clone gets it when its waitees are done).
    scheduled: bool,
    /// fio's flow control (flow.c): the clone's flow group (index into `Sim::flows`), its
    /// own counter, whether the front I/O already passed the check (it may then wait for
    /// its rate slot without counting twice), a stall waiting for the I/Os in flight
    /// (`flow_sleep`), the end of the sleep after it, and whether it waits for another
    /// member to move (no `flow_sleep`: fio retries at once, so any progress may free it).
    flow: Option<usize>,
    flow_count: u64,
    flow_passed: bool,
    flow_quiesce: bool,
    flow_until: u64,
    flow_blocked: bool,
    /// The next I/Os, drawn ahead in generation order (the front is issued next; it stays
    /// here while a rate limit holds it back). Drawing ahead lets their L2P lines be
    /// prefetched [`LOOKAHEAD`] issues before they are needed; the sequence of I/Os issued
    /// is the generator's, whatever the depth.
    pending: Ahead,
    poisson: Rng,
    next_rate_at: [u64; 3],
    dirs: [DirStats; 3],
    depth_levels: [u64; 7],
    lat_buckets_ns: [u64; 10],
    lat_buckets_us: [u64; 10],
    lat_buckets_ms: [u64; 12],
    logs: BTreeMap<String, Vec<Value>>,
    last_hist_ms: u64,
    /// In-flight I/Os (indexed by the slot number carried in `Ev::Done`) and free slots.
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    /// write_iolog: the I/Os issued so far.
    iolog: Option<IoLog>,
    /// read_iolog: the trace that replaces the generator.
    replay: Option<Replay>,
    /// issue 10: ss — steady-state detection (engine/steadystate.rs).
    ss: Option<SsState>,
    // issue 10: latency_target
    /// latency_target probing state; None without a target.
    lat: Option<LatProbe>,
    /// fio's job error (errno), 0 if none.
    error: i32,
}

// issue 10: latency_target
/// Why a latency probe waits for the I/Os in flight (io_u.c io_u_quiesce).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum LatQuiesce {
    None,
    /// The depth was lowered (__lat_target_failed): drain, then start a new window.
    RampDown,
    /// The depth held (lat_target_success): drain, reset the statistics, then run one
    /// more window at that depth.
    FinalRun,
}

// issue 10: latency_target
/// fio 3.33's queue-depth search for `latency_target` (io_u.c lat_target_init,
/// lat_target_check, lat_target_success, __lat_target_failed, lat_new_cycle; backend.c
/// do_io). Reimplemented from that description, not copied. The depth starts at 1 and
/// doubles after every window that met the target until one fails; after a failure it
/// bisects between the last good depth (`low`) and the failing one (`high`).
#[derive(Clone, Debug)]
struct LatProbe {
    /// fio's latency_qd: the clone may have this many I/Os in flight.
    qd: u32,
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
    quiesce: LatQuiesce,
    /// The ramp_time reset (libfio.c reset_all_stats -> lat_target_reset) has happened.
    ramped: bool,
}

// issue 10: latency_target
impl LatProbe {
    /// lat_target_init: depth 1, searching up to `iodepth`.
    fn new(iodepth: u32, now: u64, completed: u64) -> Self {
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

/// What a clone does next (see `Sim::gate`).
enum Gate {
    /// Nothing to issue now: a completion, a wake-up or the end of the run comes first.
    Wait,
    /// The clone's state changed (it is stopping); look again.
    Again,
    Issue(Io),
}

impl JobClone {
    /// A free slot for an I/O in flight (issue 12: the arbitration path's; the direct path
    /// keeps its own, unchanged).
    fn take_slot(&mut self, slot: Slot) -> u32 {
        match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// `bytes / lba`, by a shift when it can.
    #[inline]
    fn lbas(&self, bytes: u64) -> u64 {
        match self.lba_shift {
            Some(s) => bytes >> s,
            None => bytes / self.lba,
        }
    }

    // issue 10: latency_target
    /// How many I/Os the clone may have in flight now: `iodepth`, or the depth a
    /// latency_target probe allows (none while it drains the queue).
    fn depth_limit(&self) -> u32 {
        match &self.lat {
            None => self.gen.spec.iodepth.max(1),
            Some(p) if p.quiesce != LatQuiesce::None => 0,
            Some(p) => p.qd,
        }
    }

    // issue 10: latency_target
    /// libfio.c reset_all_stats at `now` (the final window of a latency_target search):
    /// the statistics, the runtime clock and the rate limiter start again.
    fn reset_stats(&mut self, now: u64) {
        self.ramp_end = now;
        self.dirs = Default::default();
        self.depth_levels = [0; 7];
        self.lat_buckets_ns = [0; 10];
        self.lat_buckets_us = [0; 10];
        self.lat_buckets_ms = [0; 12];
        self.last_hist_ms = 0;
        self.rate_start = now;
        self.next_rate_at = [0; 3];
        if self.gen.spec.runtime_ns > 0 {
            self.stop_at = now.saturating_add(self.gen.spec.runtime_ns);
        }
    }

    /// fio's handle_thinktime test: stall once the counter (completed I/Os by default,
    /// issued ones with `thinktime_blocks_type=issue`) has moved `thinktime_blocks` past its
    /// value at the last stall. The value is taken before the quiesce, so I/Os completing
    /// during it count toward the next stall.
    /// Under a rate limit: the time `io` may be issued if that is later than `now`;
    /// otherwise None, with the next I/O's earliest time advanced by this one's gap.
    fn rate_admit(&mut self, io: Io, now: u64) -> Option<u64> {
        let di = io.ddir.index();
        let rate = self.gen.spec.rate_bytes_per_s.get(io.ddir);
        let rate_iops = self.gen.spec.rate_iops.get(io.ddir);
        if rate == 0 && rate_iops == 0 {
            return None;
        }
        let at = self.next_rate_at[di].max(self.rate_start);
        if at > now {
            return Some(at);
        }
        let gap = 1_000_000_000u64
            .checked_div(rate_iops)
            .unwrap_or_else(|| (io.len as u128 * 1_000_000_000 / rate as u128).min(u64::MAX as u128) as u64);
        let gap = match self.gen.spec.rate_process {
            // `as` saturates: a huge exponential draw stays a huge gap.
            RateProcess::Poisson => (-(1.0 - self.poisson.unit()).ln() * gap as f64) as u64,
            RateProcess::Linear => gap,
        };
        self.next_rate_at[di] = at.saturating_add(gap);
        None
    }

    /// The front I/O waits for a rate wake-up after `now` and nothing else can change
    /// before it: the gate would only say wait, so a completion need not look (it halves
    /// the gate calls of a rate-limited clone, whose completions come between its issues).
    /// A wake-up pending in the future means the front I/O was held back and is still
    /// there, so neither `number_ios` nor the region's end can stop the clone early.
    fn waits_for_rate(&self, now: u64) -> bool {
        self.rate_wake_ns > now && self.rate_wake_ns != u64::MAX && !self.stopping && now < self.stop_at && !self.think_due
    }

    fn think_check(&mut self) {
        let spec = &self.gen.spec;
        let counted = match spec.thinktime_blocks_type {
            ThinktimeBlocksType::Issue => self.ios_issued,
            ThinktimeBlocksType::Complete => self.ios_completed,
        };
        if counted >= self.last_think_blocks.saturating_add(spec.thinktime_blocks.max(1)) {
            self.last_think_blocks = counted;
            self.think_due = true;
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ev {
    Start(u32),
    /// An I/O completes; its details wait in the clone's slot table.
    Done {
        clone: u32,
        slot: u32,
    },
    Wake(u32),
    /// The controller fetches a command from the submission queues (WRR arbitration).
    Fetch,
    /// issue 13: a step of the destage on this lane of the host stack completed.
    Lane(u32),
}

impl Ev {
    /// The event in one word for the queue: kind in bits 62-63, clone in 32-61, slot in
    /// 0-31 (a run cannot hold 2^30 clones: each keeps tens of KiB of histograms).
    #[inline(always)]
    fn pack(self) -> u64 {
        let (kind, clone, slot) = match self {
            Ev::Start(c) => (0u64, c, 0),
            Ev::Done { clone, slot } => (1, clone, slot),
            Ev::Wake(c) => (2, c, 0),
            Ev::Fetch => (3, 0, 0),
            Ev::Lane(l) => (3, 1, l),
        };
        debug_assert!(clone < 1 << 30);
        kind << 62 | (clone as u64) << 32 | slot as u64
    }

    #[inline(always)]
    fn unpack(w: u64) -> Ev {
        let clone = ((w >> 32) & ((1 << 30) - 1)) as u32;
        match w >> 62 {
            0 => Ev::Start(clone),
            1 => Ev::Done { clone, slot: w as u32 },
            2 => Ev::Wake(clone),
            _ if clone == 1 => Ev::Lane(w as u32),
            _ => Ev::Fetch,
        }
    }
}

#[derive(Copy, Clone, Debug, Default)]
struct Slot {
    ddir: u8,
    len: u64,
    offset: u64,
    issued: u64,
}

/// fio's io_u_depth buckets: 1, 2, 4, 8, 16, 32, 64+ (0 counts as 1).
#[inline]
pub(crate) fn depth_slot(d: u32) -> usize {
    ((31 - d.max(1).leading_zeros()) as usize).min(6)
}

pub(crate) const LAT_EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

pub(crate) fn edge_index(v: u64, edges: &[u64]) -> usize {
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

/// Options of a run that are not part of any job.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Namespace for jobs that do not name one.
    pub default_nsid: u32,
    /// Let GC work in idle gaps (between batches, think time).
    pub idle_gc: bool,
}

/// Run `specs` (one per clone, in thread order) on `ctrl`. Virtual time starts at
/// `start_ns` and the controller's clock advances by the run's length.
///
/// `keep_going(now_ns)` is called every 65,536 events; returning false stops the run with
/// [`RunError::Interrupted`] (Ctrl-C in the CLI).
pub fn run(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    start_ns: u64,
    keep_going: &mut dyn FnMut(u64) -> bool,
) -> Result<Vec<CloneOut>, RunError> {
    run_measured(ctrl, timing, specs, opts, start_ns, keep_going).map(|(out, _)| out)
}

/// How many entries the run's growable structures held at the end (their peak: none of them
/// shrinks), for tests that check memory does not grow with simulated time.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The most events queued at once.
    pub events: usize,
    /// Per-clone state: in-flight slots, drawn-ahead I/Os, histogram-log buckets.
    pub clone_state: usize,
    /// bw/iops log windows held until the end: one per log row.
    pub log_windows: usize,
    /// Log rows (only when logs are asked for: the output itself).
    pub log_rows: usize,
}

fn footprint(events_peak: usize, clones: &[JobClone]) -> Footprint {
    let mut f = Footprint { events: events_peak, ..Footprint::default() };
    for c in clones {
        f.clone_state += c.slots.capacity() + c.free_slots.capacity() + LOOKAHEAD;
        for d in &c.dirs {
            f.clone_state += d.hist_since.capacity();
            f.log_windows += d.log_windows.capacity();
        }
        f.log_rows += c.logs.values().map(Vec::capacity).sum::<usize>();
    }
    f
}

/// [`run`], also returning the [`Footprint`] of the run.
pub fn run_measured(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    start_ns: u64,
    keep_going: &mut dyn FnMut(u64) -> bool,
) -> Result<(Vec<CloneOut>, Footprint), RunError> {
    run_with(ctrl, timing, specs, opts, start_ns, keep_going, None)
}

/// issue 13: [`run`] through a host stack on the drive's namespace `opts.default_nsid`:
/// every job targets the stack's address space; the stack's tier changes with the run.
pub fn run_stack(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    keep_going: &mut dyn FnMut(u64) -> bool,
    stack: &mut Stack,
) -> Result<Vec<CloneOut>, RunError> {
    run_with(ctrl, timing, specs, opts, 0, keep_going, Some(stack)).map(|(out, _)| out)
}

fn run_with(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    start_ns: u64,
    keep_going: &mut dyn FnMut(u64) -> bool,
    stack: Option<&mut Stack>,
) -> Result<(Vec<CloneOut>, Footprint), RunError> {
    let stack_target = stack.as_ref().map(|s| s.tier.user_bytes());
    let mut clones = Vec::with_capacity(specs.len());
    for mut spec in specs {
        // Taken out of the spec: the spec is cloned for the output, the trace need not be.
        let trace = spec.replay.take();
        let nsid = spec.namespace.unwrap_or(opts.default_nsid);
        let ns = ctrl.attached(NsId(nsid))?.clone();
        let target = stack_target.unwrap_or(ns.bytes());
        let err = |reason: String| JobError { job: spec.name.clone(), thread: spec.thread_number, reason };
        if stack_target.is_some() && (nsid != opts.default_nsid || ns.dram) {
            return Err(err(format!("a stack runs on namespace {} only (this job names namespace {nsid})", opts.default_nsid)).into());
        }
        if spec.lba_bytes != ns.lba_bytes {
            return Err(err(format!("job resolved for {}-byte LBAs, namespace {nsid} uses {}", spec.lba_bytes, ns.lba_bytes)).into());
        }
        if spec.target_size_bytes != target {
            return Err(err(format!("job resolved for a {}-byte target, namespace {nsid} has {target}", spec.target_size_bytes)).into());
        }
        let rate_seed = spec.seeds.get("poisson_write").copied().unwrap_or(spec.seed);
        let iolog = spec.iolog.then(IoLog::default);
        let replay = match trace {
            Some(trace) => Some(Replay::new(trace, target, ns.lba_bytes as u64).map_err(err)?),
            None => None,
        };
        let (bw_window_ns, iops_window_ns) = (window_ns(spec.bw_avg_ms), window_ns(spec.iops_avg_ms));
        let logging = spec.logs.bw || spec.logs.iops || spec.logs.lat || spec.logs.hist;
        let (pract, prchk) = (spec.pi_act, spec.pi_chk);
        let gen = Generator::new(spec, target)?;
        clones.push(JobClone {
            gen,
            nsid: NsId(nsid),
            pract,
            prchk,
            lba: ns.lba_bytes as u64,
            lba_shift: ns.lba_bytes.is_power_of_two().then(|| ns.lba_bytes.trailing_zeros()),
            bw_window_ns,
            iops_window_ns,
            logging,
            started: false,
            finished: false,
            stopping: false,
            start_ns: 0,
            ramp_end: 0,
            stop_at: u64::MAX,
            end_ns: 0,
            inflight: 0,
            ios_issued: 0,
            bytes_issued: [0; 3],
            ios_completed: 0,
            last_think_blocks: 0,
            think_check_on_completion: false,
            think_due: false,
            think_until: 0,
            rate_start: 0,
            rate_wake_ns: u64::MAX,
            scheduled: false,
            flow: None,
            flow_count: 0,
            flow_passed: false,
            flow_quiesce: false,
            flow_until: 0,
            flow_blocked: false,
            pending: Ahead::default(),
            poisson: Rng::new(rate_seed),
            next_rate_at: [0; 3],
            dirs: Default::default(),
            depth_levels: [0; 7],
            lat_buckets_ns: [0; 10],
            lat_buckets_us: [0; 10],
            lat_buckets_ms: [0; 12],
            logs: BTreeMap::new(),
            last_hist_ms: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            iolog,
            replay,
            lat: None,
            error: 0,
            ss: None,
        });
    }
    // issue 10: ss
    steadystate_setup(&mut clones);
    // The drive's own clock (power-on time) grows by the run's length: keep both in u64.
    let st = ctrl.state();
    let headroom = u64::MAX - st.clock_ns.max(st.smart.controller_busy_ns);
    timing.follow_clock(st.clock_ns.saturating_sub(start_ns));
    let end_limit = start_ns.saturating_add(MAX_RUN_NS.min(headroom));
    let waitees = wait_lists(&clones)?;
    let flows = flow_groups(&mut clones);
    let mut sim = Sim {
        ctrl,
        timing,
        clones,
        events: EventQueue::default(),
        now: start_ns,
        opts: opts.clone(),
        batch: 0,
        batch_live: 0,
        end_limit,
        waitees,
        batch_start_ns: start_ns,
        flows,
        ss_next_ns: u64::MAX,
        ss_resets: BinaryHeap::new(),
        arb: None,
        stack: None,
    };
    // issue 13: the host stack on the target namespace.
    if let Some(stack) = stack {
        let lba = sim.ctrl.attached(NsId(opts.default_nsid))?.lba_bytes as u64;
        sim.stack = Some(StackSim::new(stack, NsId(opts.default_nsid), lba));
    }
    // issue 12: weighted round robin selected (feature 01h): commands wait in their clone's
    // submission queue for the controller's fetch (engine/arbiter.rs).
    let arbitration = sim.ctrl.arbitration();
    if arbitration.weights.is_some() && sim.stack.is_some() {
        return Err(RunError::Stack("weighted round robin arbitration (feature 01h) is not modelled under a host stack".into()));
    }
    if arbitration.weights.is_some() {
        let class = sim.clones.iter().map(|c| sim.ctrl.sq_priority(c.nsid)).collect();
        sim.arb = Some(Arbiter::new(arbitration, class, sim.timing.ctrl_service_ps()));
    }
    sim.start_batch(start_ns);
    // issue 10: ss — the first look one second into the run (fio's helper thread ticks
    // every STEADYSTATE_MSEC from the run's start, not per job).
    // The look is kept out of the heap so that idle GC (which runs until the next event)
    // sees the same events with or without it.
    if sim.clones.iter().any(|c| c.ss.is_some()) {
        sim.ss_next_ns = start_ns.saturating_add(SS_TICK_NS);
    }
    let mut events = 0u64;
    while let Some(Entry { t, .. }) = sim.events.peek() {
        // issue 10: ss — a look due before (or with) the next event comes first; the end
        // of a clone's ramp_time before the next look re-arms the looks (fio's
        // reset_all_stats calls helper_reset).
        if let Some(&Reverse(ramp_end)) = sim.ss_resets.peek().filter(|r| r.0 < sim.ss_next_ns && r.0 <= t) {
            sim.ss_resets.pop();
            sim.ss_next_ns = ramp_end.saturating_add(SS_TICK_NS);
            continue;
        }
        if sim.ss_next_ns <= t && sim.ss_next_ns <= end_limit {
            sim.steadystate_tick(sim.ss_next_ns);
            continue;
        }
        let Entry { t, ev, .. } = sim.events.pop().expect("peeked");
        let ev = Ev::unpack(ev);
        // Event times are computed with saturating additions, so a run that would overflow
        // the clock arrives here past the limit instead of wrapping around.
        if t > end_limit {
            return Err(RunError::TimeLimit(end_limit - start_ns));
        }
        sim.now = t;
        events += 1;
        if events % 65_536 == 0 && !keep_going(t) {
            return Err(RunError::Interrupted(t));
        }
        match ev {
            // A clone terminated before it started (exit_what) ignores its start.
            Ev::Start(c) if sim.clones[c as usize].finished => {}
            Ev::Start(c) => {
                let c = c as usize;
                let cl = &mut sim.clones[c];
                cl.started = true;
                cl.start_ns = t;
                cl.ramp_end = t.saturating_add(cl.gen.spec.ramp_time_ns);
                cl.rate_start = cl.ramp_end.min(t);
                if cl.gen.spec.runtime_ns > 0 {
                    cl.stop_at = cl.ramp_end.saturating_add(cl.gen.spec.runtime_ns);
                }
                // issue 10: latency_target — backend.c do_io calls lat_target_init.
                if cl.gen.spec.latency_target_ns > 0 {
                    cl.lat = Some(LatProbe::new(cl.gen.spec.iodepth.max(1), t, cl.ios_completed));
                }
                if let Some(ss) = &mut cl.ss {
                    ss.start(t); // issue 10: ss
                }
                // issue 10: ss — fio resets its stats, and re-arms the looks, at the end of
                // any job's ramp_time while steady state is being detected.
                if cl.ramp_end > t && sim.ss_next_ns != u64::MAX {
                    let at = cl.ramp_end;
                    sim.ss_resets.push(Reverse(at));
                }
                sim.pump(c)?;
            }
            Ev::Done { clone, slot } => {
                let clone = clone as usize;
                let cl = &mut sim.clones[clone];
                let s = cl.slots[slot as usize];
                cl.free_slots.push(slot);
                cl.ios_completed += 1;
                if cl.think_check_on_completion {
                    cl.think_check_on_completion = false;
                    cl.think_check();
                }
                sim.complete(clone, s.ddir, s.len, s.offset, s.issued);
                // issue 10: latency_target
                if sim.clones[clone].lat.is_some() {
                    sim.lat_completion(clone, t - s.issued)?;
                }
                if !sim.clones[clone].waits_for_rate(t) {
                    sim.pump(clone)?;
                }
            }
            Ev::Wake(c) => sim.pump(c as usize)?,
            Ev::Fetch => sim.fetch()?,
            Ev::Lane(l) => sim.lane_done(l)?,
        }
        if (sim.events.is_empty() || sim.batch_done()) && !sim.next_batch()? {
            break;
        }
    }
    sim.drain_stack()?;
    let end = sim.clones.iter().map(|c| c.end_ns).max().unwrap_or(start_ns);
    let busy = end.saturating_sub(start_ns);
    sim.ctrl.advance_clock(busy, busy);
    let used = footprint(sim.events.peak(), &sim.clones);
    Ok((sim.clones.into_iter().map(finish).collect(), used))
}

struct Sim<'a> {
    ctrl: &'a mut Controller,
    timing: &'a mut DeviceTiming,
    clones: Vec<JobClone>,
    events: EventQueue,
    now: u64,
    opts: RunOptions,
    batch: u32,
    /// Clones of the current batch that have not finished: the loop asks after every event
    /// whether the batch is done, and counting beats scanning every clone each time.
    batch_live: usize,
    /// Events after this virtual time end the run with [`RunError::TimeLimit`].
    end_limit: u64,
    /// Per clone, the clones its `wait_for` waits for (empty without one).
    waitees: Vec<Vec<u32>>,
    /// When the current batch started (a `wait_for` clone's start delay counts from it).
    batch_start_ns: u64,
    flows: Vec<FlowGroup>,
    /// issue 10: ss — when fio's helper thread next looks at steady state (u64::MAX: never).
    ss_next_ns: u64,
    /// issue 10: ss — ends of ramp_time still to come, each re-arming the looks.
    ss_resets: BinaryHeap<Reverse<u64>>,
    /// issue 12: the submission queues and their arbiter, when WRR is selected.
    arb: Option<Arbiter>,
    /// issue 13: the host stack the clones write through, if any.
    stack: Option<StackSim<'a>>,
}

/// One `flow_id` group (fio's flow.c `struct fio_flow`): a counter that starts at 1 and
/// grows with every I/O a member lets through, the members' total weight, and the members
/// waiting for the others to move.
struct FlowGroup {
    id: u32,
    counter: u64,
    total_weight: u64,
    blocked: Vec<u32>,
}

/// fio registers every job with a `flow` weight when it is set up (init.c `flow_init_job`),
/// so members that have not started yet already count in the total weight.
fn flow_groups(clones: &mut [JobClone]) -> Vec<FlowGroup> {
    let mut flows: Vec<FlowGroup> = Vec::new();
    for cl in clones.iter_mut() {
        let (weight, id) = (cl.gen.spec.flow, cl.gen.spec.flow_id);
        if weight == 0 {
            continue;
        }
        let f = match flows.iter().position(|g| g.id == id) {
            Some(f) => f,
            None => {
                flows.push(FlowGroup { id, counter: 1, total_weight: 0, blocked: Vec::new() });
                flows.len() - 1
            }
        };
        flows[f].total_weight += weight as u64;
        cl.flow = Some(f);
    }
    flows
}

/// The clones each clone's `wait_for` names: every clone of that job (fio's backend.c
/// `waitee_running` skips clones that share the waiter's own name). The parser refuses
/// unknown, ambiguous and forward references (init.c `wait_for_ok`); here a waitee that
/// would start after its waiter is an error rather than a run that never ends.
fn wait_lists(clones: &[JobClone]) -> Result<Vec<Vec<u32>>, RunError> {
    let mut out = Vec::with_capacity(clones.len());
    for cl in clones {
        let spec = &cl.gen.spec;
        let Some(name) = spec.wait_for.as_deref() else {
            out.push(Vec::new());
            continue;
        };
        let err = |reason: String| JobError { job: spec.name.clone(), thread: spec.thread_number, reason };
        let list: Vec<u32> = clones
            .iter()
            .enumerate()
            .filter(|(_, w)| w.gen.spec.name == name && w.gen.spec.name != spec.name)
            .map(|(i, _)| i as u32)
            .collect();
        if list.is_empty() {
            return Err(err(format!("wait_for={name}: no other job of the run has that name")).into());
        }
        if list.iter().any(|&i| clones[i as usize].gen.spec.job_index >= spec.job_index) {
            return Err(err(format!("wait_for={name}: the waitee must be a job defined before this one")).into());
        }
        out.push(list);
    }
    Ok(out)
}

impl Sim<'_> {
    #[inline]
    fn push(&mut self, t: u64, ev: Ev) {
        self.events.push(t, ev.pack());
    }

    /// Queue the start of every clone of the current batch that is not waiting for another
    /// job (`wait_for`) and was not terminated before it started (`exit_what=all`).
    fn start_batch(&mut self, t: u64) {
        self.batch_start_ns = t;
        self.batch_live = self.clones.iter().filter(|c| c.gen.spec.batch == self.batch && !c.finished).count();
        for i in 0..self.clones.len() {
            let cl = &self.clones[i];
            if cl.gen.spec.batch == self.batch && !cl.finished && self.waitees[i].iter().all(|&k| self.clones[k as usize].finished) {
                let d = cl.gen.spec.startdelay_ns;
                self.clones[i].scheduled = true;
                self.push(t.saturating_add(d), Ev::Start(i as u32));
            }
        }
    }

    /// Clone `c` has finished at `now`: terminate the clones its `exit_what` names, then
    /// start the `wait_for` clones that waited for it.
    fn on_finish(&mut self, c: usize, now: u64) {
        let (what, group) = (self.clones[c].gen.spec.exit_what, self.clones[c].gen.spec.group_id);
        for i in 0..self.clones.len() {
            let cl = &self.clones[i];
            let hit = match what {
                ExitWhat::None => false,
                ExitWhat::Group => cl.gen.spec.group_id == group,
                ExitWhat::Stonewall => cl.started,
                ExitWhat::All => true,
            };
            if hit && i != c && !cl.finished {
                self.terminate(i, now);
            }
        }
        for i in 0..self.clones.len() {
            let cl = &self.clones[i];
            if cl.scheduled || cl.finished || cl.gen.spec.batch != self.batch || self.waitees[i].is_empty() {
                continue;
            }
            if self.waitees[i].iter().all(|&k| self.clones[k as usize].finished) {
                // fio starts a waiter once its start delay has passed and its waitee is done.
                let at = self.batch_start_ns.saturating_add(cl.gen.spec.startdelay_ns).max(now);
                self.clones[i].scheduled = true;
                self.push(at, Ev::Start(i as u32));
            }
        }
    }

    /// fio's `fio_mark_td_terminate`: a running clone stops issuing and ends once its I/Os
    /// in flight complete (backend.c reaps them); one that has not started never runs and
    /// reports no I/O (backend.c `run_threads`: "never got a chance to start").
    fn terminate(&mut self, i: usize, now: u64) {
        let cl = &mut self.clones[i];
        if cl.started {
            cl.stopping = true;
            self.push(now, Ev::Wake(i as u32));
            return;
        }
        cl.finished = true;
        cl.start_ns = now;
        cl.ramp_end = now;
        cl.end_ns = now;
        if cl.gen.spec.batch == self.batch {
            self.batch_live -= 1;
        }
        self.flow_exit(i, now);
    }

    /// fio's flow.c `flow_threshold_exceeded`, checked before each I/O: a clone whose share
    /// of its group's counter exceeds its share of the weight is held back; with
    /// `flow_sleep` it first waits for its I/Os in flight (io_u_quiesce), then sleeps, then
    /// checks again; without, it checks again whenever another member moves. Otherwise
    /// both counters count the I/O. The ratios are compared as doubles, as fio does.
    fn flow_held(&mut self, c: usize, now: u64) -> Result<bool, RunError> {
        let cl = &mut self.clones[c];
        let f = cl.flow.expect("a flow member");
        if cl.flow_quiesce {
            if cl.inflight > 0 {
                return Ok(true);
            }
            cl.flow_quiesce = false;
            cl.flow_until = now.saturating_add(cl.gen.spec.flow_sleep_ns);
            self.push(self.clones[c].flow_until, Ev::Wake(c as u32));
            self.maybe_idle(now)?;
            return Ok(true);
        }
        if cl.flow_until > now || cl.flow_blocked {
            return Ok(true);
        }
        let group = &mut self.flows[f];
        let counter_ratio = cl.flow_count as f64 / group.counter as f64;
        let weight_ratio = cl.gen.spec.flow as f64 / group.total_weight as f64;
        if counter_ratio <= weight_ratio {
            group.counter += 1;
            cl.flow_count += 1;
            cl.flow_passed = true;
            self.wake_flow(f, now);
            return Ok(false);
        }
        if !self.flow_can_move(c) {
            let spec = &self.clones[c].gen.spec;
            let reason = format!(
                "flow_id={}: the job is over its share of the flow and no other job of the group can run before it ends (fio would wait forever)",
                spec.flow_id
            );
            return Err(JobError { job: spec.name.clone(), thread: spec.thread_number, reason }.into());
        }
        let cl = &mut self.clones[c];
        if cl.gen.spec.flow_sleep_ns > 0 {
            cl.flow_quiesce = true;
            return self.flow_held(c, now);
        }
        cl.flow_blocked = true;
        self.flows[f].blocked.push(c as u32);
        Ok(true)
    }

    /// Another member of `c`'s flow group can still issue I/O in this batch.
    fn flow_can_move(&self, c: usize) -> bool {
        let f = self.clones[c].flow;
        self.clones.iter().enumerate().any(|(i, o)| i != c && o.flow == f && !o.finished && o.gen.spec.batch == self.batch)
    }

    /// The group's counter or weight changed: members waiting for that look again.
    fn wake_flow(&mut self, f: usize, now: u64) {
        let blocked = std::mem::take(&mut self.flows[f].blocked);
        for &i in &blocked {
            self.clones[i as usize].flow_blocked = false;
            self.push(now, Ev::Wake(i));
        }
        self.flows[f].blocked = blocked;
        self.flows[f].blocked.clear();
    }

    /// fio's flow_exit_job: a finished member takes its count and weight out of the group.
    fn flow_exit(&mut self, c: usize, now: u64) {
        let Some(f) = self.clones[c].flow else { return };
        let (count, weight) = (self.clones[c].flow_count, self.clones[c].gen.spec.flow as u64);
        let group = &mut self.flows[f];
        group.counter -= count;
        group.total_weight -= weight;
        self.wake_flow(f, now);
    }

    fn batch_done(&self) -> bool {
        self.batch_live == 0
    }

    /// Start the next batch once this one has finished. False when none is left.
    fn next_batch(&mut self) -> Result<bool, RunError> {
        if !self.batch_done() {
            return Ok(true);
        }
        let max_batch = self.clones.iter().map(|c| c.gen.spec.batch).max().unwrap_or(0);
        if self.batch >= max_batch {
            return Ok(false);
        }
        let t = self.clones.iter().filter(|c| c.gen.spec.batch == self.batch).map(|c| c.end_ns).max().unwrap_or(self.now);
        self.batch += 1;
        self.start_batch(t);
        Ok(true)
    }

    fn complete(&mut self, c: usize, ddir: u8, len: u64, offset: u64, issued: u64) {
        let now = self.now;
        let cl = &mut self.clones[c];
        cl.inflight -= 1;
        if let Some(ss) = &mut cl.ss {
            ss.count(now, cl.ramp_end, len); // issue 10: ss
        }
        if now < cl.ramp_end || issued < cl.ramp_end {
            return;
        }
        let clat = now - issued;
        let d = &mut cl.dirs[ddir as usize];
        d.io_bytes += len;
        d.ios += 1;
        // The twin does not model host submission, so slat is 0 and lat = clat: one
        // histogram, reported for both.
        d.clat.add(clat);
        if cl.gen.spec.logs.hist {
            if d.hist_since.is_empty() {
                d.hist_since = vec![0; crate::stats::PLAT_NR];
            }
            d.hist_since[crate::stats::plat_index(clat)] += 1;
        }
        let rel = now - cl.ramp_end;
        let (bw_ms, iops_ms) = (cl.gen.spec.bw_avg_ms, cl.gen.spec.iops_avg_ms);
        d.bw_window.add_at(rel, cl.bw_window_ns, len, bw_ms, kib_per_s);
        d.iops_window.add_at(rel, cl.iops_window_ns, 1, iops_ms, ios_per_s);
        if clat < 1000 {
            cl.lat_buckets_ns[LAT_INDEX[clat as usize] as usize] += 1;
        } else if clat < 1_000_000 {
            cl.lat_buckets_us[LAT_INDEX[(clat / 1000) as usize] as usize] += 1;
        } else {
            let i = edge_index(clat / 1_000_000, &[2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000]).min(11);
            cl.lat_buckets_ms[i] += 1;
        }
        if cl.logging {
            log_sample(cl, ddir, len, offset, clat, now);
        }
    }

    /// Issue as much as the clone may now; finish it when it is done.
    fn pump(&mut self, c: usize) -> Result<(), RunError> {
        let now = self.now;
        loop {
            let io = match self.gate(c, now)? {
                Gate::Wait => return Ok(()),
                Gate::Again => continue,
                Gate::Issue(io) => io,
            };
            self.issue(c, now, io)?;
            if self.after_issue(c, now, io)? {
                return Ok(());
            }
        }
    }

    /// Whether the clone may issue its next I/O now (and which), and what it waits for if not:
    /// the end of its run, a full queue, think time, or its rate limit.
    fn gate(&mut self, c: usize, now: u64) -> Result<Gate, RunError> {
        let cl = &mut self.clones[c];
        if cl.finished {
            return Ok(Gate::Wait);
        }
        if cl.stopping || now >= cl.stop_at {
            cl.stopping = true;
            if cl.inflight == 0 {
                cl.finished = true;
                cl.end_ns = now;
                self.batch_live -= 1;
                self.flow_exit(c, now);
                self.on_finish(c, now);
                self.maybe_idle(now)?;
            }
            return Ok(Gate::Wait);
        }
        // issue 10: latency_target — fio's queue_full compares with latency_qd.
        if cl.inflight >= cl.depth_limit() {
            return Ok(Gate::Wait);
        }
        if cl.think_due {
            // fio (backend.c handle_thinktime) quiesces first: the stall starts when the
            // last I/O in flight completes, not when the last one was issued.
            if cl.inflight > 0 {
                return Ok(Gate::Wait);
            }
            let until = now.saturating_add(cl.gen.spec.thinktime_ns);
            cl.think_due = false;
            cl.think_until = until;
            self.push(until, Ev::Wake(c as u32));
            // If no clone has I/O in flight, the drive is idle until the next event.
            self.maybe_idle(now)?;
            return Ok(Gate::Wait);
        }
        if cl.think_until > now {
            return Ok(Gate::Wait);
        }
        let spec = &cl.gen.spec;
        if spec.number_ios > 0 && cl.ios_issued >= spec.number_ios {
            cl.stopping = true;
            return Ok(Gate::Again);
        }
        // Next I/O (kept if a rate limit makes us wait for it).
        if cl.pending.is_empty() {
            match next_io(cl)? {
                Some(io) => cl.pending.push_back(io),
                None => {
                    cl.stopping = true;
                    return Ok(Gate::Again);
                }
            }
        }
        if cl.flow.is_some() && !cl.flow_passed && self.flow_held(c, now)? {
            return Ok(Gate::Wait);
        }
        let cl = &mut self.clones[c];
        let io = cl.pending.front();
        // read_iolog: the trace's timestamps pace the issue (engine/iolog.rs).
        if let Some(at) = cl.replay.as_mut().and_then(|r| r.hold_until(now)) {
            self.push(at, Ev::Wake(c as u32));
            // A trace's idle gap is idle time for the drive too (background GC).
            self.maybe_idle(now)?;
            return Ok(Gate::Wait);
        }
        if let Some(at) = cl.rate_admit(io, now) {
            // The front I/O waits until `at`, the same time for every look until it is issued
            // (its direction's next slot does not move while it waits), and an I/O issued
            // after that wake-up fired waits for a later one: one wake-up per wait suffices.
            if cl.rate_wake_ns != at {
                cl.rate_wake_ns = at;
                self.push(at, Ev::Wake(c as u32));
            }
            return Ok(Gate::Wait);
        }
        // The controller's QoS caps on the namespace (issue 12): held until the command
        // conforms, one wake-up per wait as for the rate limit above.
        if io.ddir != Ddir::Trim {
            let at = self.timing.qos_ready(self.ctrl, cl.nsid, io.ddir == Ddir::Write, io.len, now);
            if at > now {
                if cl.rate_wake_ns != at {
                    cl.rate_wake_ns = at;
                    self.push(at, Ev::Wake(c as u32));
                }
                return Ok(Gate::Wait);
            }
        }
        if let Some(r) = &mut cl.replay {
            r.issued(now);
        }
        cl.pending.pop_front();
        cl.flow_passed = false;
        Ok(Gate::Issue(io))
    }

    /// Send `io` to the drive and schedule its completion.
    fn issue(&mut self, c: usize, now: u64, io: Io) -> Result<(), RunError> {
        let cl = &mut self.clones[c];
        let di = io.ddir.index();
        let (nlb, slba) = (cl.lbas(io.len), cl.lbas(io.offset));
        let nsid = cl.nsid;
        // fio counts depths from the ramp's end (reset_io_stats zeroes io_u_map), so the
        // distribution is over the I/Os the report counts, not over the ramp's too.
        if now >= cl.ramp_end {
            cl.depth_levels[depth_slot(cl.inflight + 1)] += 1;
        }
        cl.inflight += 1;
        cl.ios_issued += 1;
        cl.bytes_issued[di] += io.len;
        if let Some(log) = &mut cl.iolog {
            let spec = &cl.gen.spec;
            log.record(now, io).map_err(|reason| JobError { job: spec.name.clone(), thread: spec.thread_number, reason })?;
        }
        if self.stack.is_some() {
            return self.issue_stack(c, now, io);
        }
        if self.arb.is_some() {
            // issue 12: into the clone's submission queue; the controller fetches it.
            let si = self.clones[c].take_slot(Slot { ddir: di as u8, len: io.len, offset: io.offset, issued: now });
            self.arb.as_mut().expect("checked").submit(c, Queued { slot: si });
            self.schedule_fetch(now);
            return Ok(());
        }
        let op = match io.ddir {
            Ddir::Read => HostOp::Read,
            Ddir::Write => HostOp::Write,
            Ddir::Trim => HostOp::Deallocate,
        };
        (self.timing.pract, self.timing.prchk) = (self.clones[c].pract, self.clones[c].prchk);
        let done = self.timing.submit(self.ctrl, now, HostCmd { op, nsid, slba, nlb })?;
        let cl = &mut self.clones[c];
        let slot = Slot { ddir: di as u8, len: io.len, offset: io.offset, issued: now };
        let si = match cl.free_slots.pop() {
            Some(i) => {
                cl.slots[i as usize] = slot;
                i
            }
            None => {
                cl.slots.push(slot);
                (cl.slots.len() - 1) as u32
            }
        };
        self.push(done.max(now.saturating_add(1)), Ev::Done { clone: c as u32, slot: si });
        Ok(())
    }

    /// issue 12: queue a fetch at the controller's next command slot, if none is queued.
    fn schedule_fetch(&mut self, now: u64) {
        let arb = self.arb.as_mut().expect("arbitration in use");
        if !arb.scheduled && !arb.is_empty() {
            arb.scheduled = true;
            let at = now.max(arb.next_fetch_ps.div_ceil(1000));
            self.push(at, Ev::Fetch);
        }
    }

    /// issue 12: the controller fetches the command the arbiter picks and runs it.
    fn fetch(&mut self) -> Result<(), RunError> {
        let now = self.now;
        let arb = self.arb.as_mut().expect("arbitration in use");
        arb.scheduled = false;
        let Some((c, q)) = arb.pick() else { return Ok(()) };
        arb.next_fetch_ps = (now * 1000).max(arb.next_fetch_ps) + arb.fetch_ps;
        let cl = &self.clones[c];
        let s = cl.slots[q.slot as usize];
        let (nsid, nlb, slba) = (cl.nsid, s.len / cl.lba, s.offset / cl.lba);
        let op = match s.ddir {
            0 => HostOp::Read,
            1 => HostOp::Write,
            _ => HostOp::Deallocate,
        };
        (self.timing.pract, self.timing.prchk) = (cl.pract, cl.prchk);
        let done = self.timing.submit(self.ctrl, now, HostCmd { op, nsid, slba, nlb })?;
        self.push(done.max(now.saturating_add(1)), Ev::Done { clone: c as u32, slot: q.slot });
        self.schedule_fetch(now);
        Ok(())
    }

    /// After issuing `io`: draw ahead and prefetch, then fio's think-time check. True when
    /// the clone must stop issuing (think time is due).
    fn after_issue(&mut self, c: usize, now: u64, io: Io) -> Result<bool, RunError> {
        let cl = &mut self.clones[c];
        // Draw the clone's next I/Os now and prefetch their mappings: by the time they
        // are issued the DRAM misses are over.
        while cl.pending.len() < LOOKAHEAD && !cl.stopping && now < cl.stop_at {
            match next_io(cl)? {
                Some(n) => {
                    self.ctrl.prefetch(cl.nsid, cl.lbas(n.offset));
                    cl.pending.push_back(n);
                }
                None => break,
            }
        }
        // fio's handle_thinktime runs after every read or write it issues (and, if that
        // issue filled the queue, after reaping the next completion).
        if cl.gen.spec.thinktime_ns > 0 && io.ddir != Ddir::Trim {
            if cl.inflight >= cl.depth_limit() && cl.gen.spec.thinktime_blocks_type == ThinktimeBlocksType::Complete {
                cl.think_check_on_completion = true;
            } else {
                cl.think_check();
            }
        }
        Ok(cl.think_due)
    }

    // issue 10: latency_target
    /// One completion of a clone with a latency_target, `lat_ns` after its issue (the twin's
    /// lat = clat): io_u.c account_io_completion's target test, the end of a quiesce, then
    /// backend.c's per-iteration lat_target_check.
    fn lat_completion(&mut self, c: usize, lat_ns: u64) -> Result<(), RunError> {
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

    /// When nothing is outstanding anywhere, let background GC use the gap before the next
    /// event (between batches, during think time or start delays).
    fn maybe_idle(&mut self, now: u64) -> Result<(), RunError> {
        if !self.opts.idle_gc || self.clones.iter().any(|c| c.inflight > 0) {
            return Ok(());
        }
        if let Some(Entry { t: next, .. }) = self.events.peek() {
            // A wake-up past the run's time limit ends the run with an error: no idle work
            // beyond it.
            let until = next.min(self.end_limit);
            if until > now {
                self.timing.idle(self.ctrl, now, until)?;
            }
        }
        Ok(())
    }
}

// --- issue 10: ss ---
/// fio's steady-state look interval (steadystate.h `STEADYSTATE_MSEC`).
const SS_TICK_NS: u64 = 1_000_000_000;

/// fio's `steadystate_setup`: every clone with `ss_dur` gets a record; the window is kept by
/// each clone without group_reporting and by the last clone of each reporting group with it.
// issue 13: host stacks. A host I/O goes to the tier (host/tier.rs), which answers with
// fast-media bytes and drive commands; destages run on lanes in the background; a write
// the tier has no room for waits (its latency grows) until a destage frees space.
impl Sim<'_> {
    fn issue_stack(&mut self, c: usize, now: u64, io: Io) -> Result<(), RunError> {
        use crate::host::tier::BLOCK_BYTES;
        if io.offset % BLOCK_BYTES != 0 || io.len % BLOCK_BYTES != 0 {
            let spec = &self.clones[c].gen.spec;
            return Err(JobError {
                job: spec.name.clone(),
                thread: spec.thread_number,
                reason: format!("a host stack maps 4 KiB blocks: I/O of {} bytes at offset {} is not 4 KiB-aligned", io.len, io.offset),
            }
            .into());
        }
        let di = io.ddir.index();
        let slot = self.clones[c].take_slot(Slot { ddir: di as u8, len: io.len, offset: io.offset, issued: now });
        let st = self.stack.as_mut().expect("a stack");
        let done = match io.ddir {
            Ddir::Write => {
                let s = Stalled { clone: c as u32, slot, offset: io.offset, len: io.len };
                if !self.stack_write(s, now)? {
                    let st = self.stack.as_mut().expect("a stack");
                    st.tier.counters.stalls += 1;
                    st.stalled.push_back(s);
                }
                return self.stack_progress(now);
            }
            Ddir::Read => {
                let plan = st.tier.read(io.offset, io.len);
                let mut t = if plan.tier_bytes > 0 { st.media(now, plan.tier_bytes, false) } else { now };
                t = t.max(st.drive(self.timing, self.ctrl, now, &plan.drive)?);
                t
            }
            Ddir::Trim => {
                let ranges = st.tier.trim(io.offset, io.len);
                st.trim(self.timing, self.ctrl, now, &ranges)?
            }
        };
        self.push(done.max(now.saturating_add(1)), Ev::Done { clone: c as u32, slot });
        self.stack_progress(now)
    }

    /// Offer a host write to the tier; true when accepted (its completion is queued).
    fn stack_write(&mut self, s: Stalled, now: u64) -> Result<bool, RunError> {
        use crate::host::tier::WriteOutcome;
        let st = self.stack.as_mut().expect("a stack");
        let (tier_bytes, drive) = match st.tier.write(s.offset, s.len) {
            WriteOutcome::Full => return Ok(false),
            WriteOutcome::Accepted { tier_bytes, drive } => (tier_bytes, drive),
        };
        let mut t = if tier_bytes > 0 { st.media(now, tier_bytes, true) } else { now };
        t = t.max(st.drive(self.timing, self.ctrl, now, &drive)?);
        self.push(t.max(now.saturating_add(1)), Ev::Done { clone: s.clone, slot: s.slot });
        Ok(true)
    }

    /// Start what destages the tier wants and admit stalled writes, until neither moves.
    fn stack_progress(&mut self, now: u64) -> Result<(), RunError> {
        loop {
            let st = self.stack.as_mut().expect("a stack");
            let started = st.start_destages(self.timing, self.ctrl, now)?;
            for &(lane, done) in &started {
                self.push(done.max(now.saturating_add(1)), Ev::Lane(lane));
            }
            let mut admitted = false;
            while let Some(&s) = self.stack.as_ref().expect("a stack").stalled.front() {
                if !self.stack_write(s, now)? {
                    break;
                }
                self.stack.as_mut().expect("a stack").stalled.pop_front();
                admitted = true;
            }
            if started.is_empty() && !admitted {
                break;
            }
        }
        let st = self.stack.as_ref().expect("a stack");
        if let Some(s) = st.stalled.front().filter(|_| st.idle()) {
            let cap = st.tier.config.capacity_bytes;
            return Err(RunError::Stack(format!(
                "a write of {} bytes cannot fit a tier of {cap} bytes that has nothing left to destage",
                s.len
            )));
        }
        Ok(())
    }

    fn lane_done(&mut self, lane: u32) -> Result<(), RunError> {
        let now = self.now;
        let st = self.stack.as_mut().expect("a lane event comes from a stack");
        if let Some(done) = st.lane_step_done(self.timing, self.ctrl, lane, now)? {
            self.push(done.max(now.saturating_add(1)), Ev::Lane(lane));
        }
        self.stack_progress(now)
    }

    /// After the last clone: destages already started finish (their later steps reach the
    /// drive); what the tier still holds stays in it, saved with the stack.
    fn drain_stack(&mut self) -> Result<(), RunError> {
        if self.stack.is_none() {
            return Ok(());
        }
        while let Some(Entry { t, ev, .. }) = self.events.pop() {
            if let Ev::Lane(l) = Ev::unpack(ev) {
                self.now = self.now.max(t);
                let now = self.now;
                let st = self.stack.as_mut().expect("a stack");
                if let Some(done) = st.lane_step_done(self.timing, self.ctrl, l, now)? {
                    self.push(done.max(now.saturating_add(1)), Ev::Lane(l));
                }
            }
        }
        Ok(())
    }
}

fn steadystate_setup(clones: &mut [JobClone]) {
    for i in 0..clones.len() {
        let Some(spec) = clones[i].gen.spec.steadystate.clone() else { continue };
        let group = clones[i].gen.spec.group_id;
        let later_member = clones[i + 1..]
            .iter()
            .any(|c| c.gen.spec.group_id == group && c.gen.spec.steadystate.as_ref().is_some_and(|s| s.group_reporting));
        let holder = !spec.group_reporting || !later_member;
        clones[i].ss = Some(SsState::new(spec, holder));
    }
}

impl Sim<'_> {
    /// fio's `steadystate_check` at `now`: sample every running clone in order, sum each
    /// reporting group's samples (group_reporting) into the clone that keeps its window,
    /// judge, and terminate the clone or its whole group when steady state is attained.
    fn steadystate_tick(&mut self, now: u64) {
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

/// How many I/Os a clone draws ahead of issuing them (see `JobClone::pending`).
const LOOKAHEAD: usize = 8;

/// A clone's drawn-ahead I/Os, oldest first: a ring of [`LOOKAHEAD`] (a `VecDeque` did
/// the same with more bookkeeping per I/O).
#[derive(Copy, Clone)]
struct Ahead {
    ios: [Io; LOOKAHEAD],
    head: usize,
    len: usize,
}

impl Default for Ahead {
    fn default() -> Self {
        Ahead { ios: [Io { ddir: Ddir::Read, offset: 0, len: 0 }; LOOKAHEAD], head: 0, len: 0 }
    }
}

impl Ahead {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest I/O (the ring is not empty).
    #[inline]
    fn front(&self) -> Io {
        debug_assert!(self.len > 0);
        self.ios[self.head]
    }

    #[inline]
    fn pop_front(&mut self) {
        debug_assert!(self.len > 0);
        self.head = (self.head + 1) % LOOKAHEAD;
        self.len -= 1;
    }

    #[inline(always)]
    fn push_back(&mut self, io: Io) {
        assert!(self.len < LOOKAHEAD, "at most LOOKAHEAD I/Os are drawn ahead");
        self.ios[(self.head + self.len) % LOOKAHEAD] = io;
        self.len += 1;
    }
}

/// The clone's next I/O in fio's order; None when it is done.
fn next_io(cl: &mut JobClone) -> Result<Option<Io>, RunError> {
    // read_iolog: the trace, once, instead of the generator.
    if let Some(r) = &mut cl.replay {
        return Ok(r.draw());
    }
    // Passes, loops, io_size and the end of the region follow fio inside the generator
    // (backend.c do_io / keep_running).
    Ok(cl.gen.next_io())
}

// `avg_ms == 0` selects per-I/O logging (fio's log_avg_msec), it is not a guard for the division.
#[allow(clippy::manual_checked_ops)]
fn log_sample(cl: &mut JobClone, ddir: u8, len: u64, offset: u64, clat: u64, now: u64) {
    let spec = &cl.gen.spec.logs;
    if !(spec.bw || spec.iops || spec.lat || spec.hist) {
        return;
    }
    let t_ms = (now - cl.ramp_end) / 1_000_000;
    let off = if spec.offset { offset } else { 0 };
    if spec.avg_ms == 0 {
        let push = |logs: &mut BTreeMap<String, Vec<Value>>, k: &str, v: u64| {
            logs.entry(k.to_string()).or_default().push(json!([t_ms, v, ddir, len, off]));
        };
        if spec.lat {
            push(&mut cl.logs, "lat", clat);
            push(&mut cl.logs, "clat", clat);
            push(&mut cl.logs, "slat", 0);
        }
        if spec.bw {
            push(&mut cl.logs, "bw", len * 1_000_000 / clat.max(1));
        }
        if spec.iops {
            push(&mut cl.logs, "iops", 1);
        }
    } else {
        if spec.bw || spec.iops {
            let k = t_ms / spec.avg_ms;
            let windows = &mut cl.dirs[ddir as usize].log_windows;
            match windows.last_mut() {
                Some(w) if w.0 == k => {
                    w.1 += len;
                    w.2 += 1;
                }
                _ => windows.push((k, len, 1)),
            }
        }
        if !spec.lat {
            return log_hist(cl, t_ms);
        }
        // fio's windowed latency logs (docs/fio.md §4): a row when a sample arrives at least
        // avg_ms after the window start; the window restarts at that time rounded down.
        let avg = spec.avg_ms;
        let max_value = spec.max_value;
        let d = &mut cl.dirs[ddir as usize];
        for (k, (name, v)) in [("lat", clat), ("clat", clat), ("slat", 0u64)].iter().enumerate() {
            let w = &mut d.lat_window[k];
            w.1 += *v as u128;
            w.2 += 1;
            w.3 = w.3.max(*v);
            if t_ms >= w.0 + avg {
                let value = if max_value { w.3 } else { (w.1 / w.2 as u128) as u64 };
                cl.logs.entry(name.to_string()).or_default().push(json!([t_ms, value, ddir, 0, 0]));
                *w = (t_ms / avg * avg, 0, 0, 0);
            }
        }
    }
    log_hist(cl, t_ms);
}

fn log_hist(cl: &mut JobClone, t_ms: u64) {
    let spec = &cl.gen.spec.logs;
    if spec.hist && spec.hist_ms > 0 && t_ms >= cl.last_hist_ms + spec.hist_ms {
        for (di, d) in cl.dirs.iter_mut().enumerate() {
            if d.hist_since.iter().any(|&x| x > 0) {
                let sparse: Vec<[u64; 2]> = d.hist_since.iter().enumerate().filter(|(_, &x)| x > 0).map(|(i, &x)| [i as u64, x]).collect();
                cl.logs.entry("clat_hist".into()).or_default().push(json!([t_ms, di, 0, sparse]));
                d.hist_since.iter_mut().for_each(|x| *x = 0);
            }
        }
        cl.last_hist_ms = t_ms / spec.hist_ms * spec.hist_ms;
    }
}

/// Statistics of `n` zero-valued samples (submission latency of a host we do not model).
pub(crate) fn zero_stat(n: u64) -> StatOut {
    StatOut { n, min_ns: 0, max_ns: 0, sum_ns: 0, m2: 0.0, hist: if n > 0 { vec![[0, n]] } else { vec![] } }
}

fn finish(cl: JobClone) -> CloneOut {
    let run_end = cl.end_ns.max(cl.ramp_end);
    let runtime = run_end.saturating_sub(cl.ramp_end);
    let spec = cl.gen.spec.clone();
    let mut logs = cl.logs;
    // Windowed bw/iops logs and the open latency windows are written at the end.
    let avg = spec.logs.avg_ms;
    let mut dirs_out = Vec::new();
    for (di, d) in cl.dirs.into_iter().enumerate() {
        if avg > 0 && (spec.logs.bw || spec.logs.iops) {
            // One row per full window of avg_ms per direction with I/O in it.
            let nwin = runtime / window_ns(avg);
            for &(k, bytes, ios) in d.log_windows.iter().take_while(|w| w.0 < nwin) {
                let t = (k + 1) * avg;
                if spec.logs.bw {
                    logs.entry("bw".into()).or_default().push(json!([t, kib_per_s(bytes, avg), di, 0, 0]));
                }
                if spec.logs.iops {
                    logs.entry("iops".into()).or_default().push(json!([t, ios_per_s(ios, avg), di, 0, 0]));
                }
            }
        }
        if avg > 0 && spec.logs.lat {
            let end_ms = runtime / 1_000_000;
            for (k, name) in ["lat", "clat", "slat"].iter().enumerate() {
                let w = d.lat_window[k];
                if w.2 > 0 {
                    let value = if spec.logs.max_value { w.3 } else { (w.1 / w.2 as u128) as u64 };
                    logs.entry(name.to_string()).or_default().push(json!([end_ms, value, di, 0, 0]));
                }
            }
        }
        let dir_runtime = if spec.directions.iter().any(|x| x.index() == di) { runtime } else { 0 };
        dirs_out.push(DirOut {
            io_bytes: d.io_bytes,
            total_ios: d.ios,
            runtime_ns: if d.ios > 0 { dir_runtime } else { 0 },
            short_ios: 0,
            drop_ios: 0,
            clat: d.clat.out(),
            slat: if spec.engine_async { zero_stat(d.ios) } else { zero_stat(0) },
            lat: d.clat.out(),
            bw_sample_stat: d.bw_window.finish(spec.bw_avg_ms, runtime, kib_per_s),
            iops_sample_stat: d.iops_window.finish(spec.iops_avg_ms, runtime, ios_per_s),
        });
    }
    // Rows sorted by time within each log, as fio writes them.
    for rows in logs.values_mut() {
        rows.sort_by_key(|r| r[0].as_u64().unwrap_or(0));
    }
    let mut it = dirs_out.into_iter();
    let (read, write, trim) = (it.next().expect("3"), it.next().expect("3"), it.next().expect("3"));
    let (submit, complete) = submit_complete_levels(spec.engine_async, cl.depth_levels.iter().sum());
    let lb = latency_bucket_map(&cl.lat_buckets_ns, &cl.lat_buckets_us, &cl.lat_buckets_ms);
    CloneOut {
        version: 1,
        thread_number: spec.thread_number,
        start_ns: cl.start_ns,
        elapsed_ns: cl.end_ns.saturating_sub(cl.start_ns),
        runtime_ns: runtime,
        read,
        write,
        trim,
        iodepth_level: cl.depth_levels,
        iodepth_submit: submit,
        iodepth_complete: complete,
        latency_buckets: lb,
        logs,
        iolog: cl.iolog.map(IoLog::into_packed),
        latency_depth: cl.lat.as_ref().map_or(spec.iodepth.max(1), |p| p.qd),
        error: cl.error,
        steadystate: cl.ss.as_ref().map(SsState::out), // issue 10: ss
    }
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

/// fio's `latency_ns`, `latency_us` and `latency_ms` buckets, keyed by unit.
pub(crate) fn latency_bucket_map(ns: &[u64], us: &[u64], ms: &[u64]) -> BTreeMap<String, Vec<u64>> {
    BTreeMap::from([("ns".to_string(), ns.to_vec()), ("us".to_string(), us.to_vec()), ("ms".to_string(), ms.to_vec())])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nvme::Controller;
    use crate::spec::DriveSpec;
    use serde_json::json;

    pub(crate) fn drive() -> (Controller, DeviceTiming) {
        let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        let ctrl = Controller::new(spec, 1).unwrap();
        let timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).unwrap();
        (ctrl, timing)
    }

    /// A 4 KiB random-write clone over the first MiB of namespace 1, with `extra` fields
    /// replaced (engine contract, docs/fio.md §3).
    pub(crate) fn spec(ctrl: &Controller, extra: Value) -> JobSpec {
        let ns = ctrl.attached(NsId(1)).unwrap();
        let mut v: Value = serde_json::from_str(
            r#"{
            "version": 1, "name": "j", "job_index": 0, "thread_number": 1, "subjob": 0, "group_id": 0,
            "batch": 0, "stonewall": false, "filename": null, "namespace": null,
            "target_size_bytes": 0, "lba_bytes": 0, "rw": "randwrite",
            "directions": ["write"], "random": true, "rw_nr": 1, "rw_seq_add_bytes": 0,
            "rwmixread": 50, "rwmixwrite": 50,
            "bs": {"read": {"min": 4096, "max": 4096, "split": [[4096, 100]]},
                   "write": {"min": 4096, "max": 4096, "split": [[4096, 100]]},
                   "trim": {"min": 4096, "max": 4096, "split": [[4096, 100]]}},
            "bs_unaligned": false, "blockalign": {"read": 4096, "write": 4096, "trim": 4096},
            "offset_bytes": 0, "size_bytes": 1048576, "io_size_bytes": 1048576, "loops": 1,
            "fill_device": false, "number_ios": 0, "ioengine": "libaio", "engine_async": true,
            "iodepth": 4, "iodepth_configured": 4, "time_based": false, "runtime_ns": 0,
            "ramp_time_ns": 0, "startdelay_ns": 0, "norandommap": false,
            "random_generator": "tausworthe", "seed": 7, "seeds": {}, "seed_source": "randrepeat",
            "random_distribution": {"kind": "random", "param": null, "center": null, "zones": null},
            "percentage_random": {"read": 100, "write": 100, "trim": 100},
            "rate_bytes_per_s": {"read": 0, "write": 0, "trim": 0},
            "rate_iops": {"read": 0, "write": 0, "trim": 0}, "rate_process": "linear",
            "thinktime_ns": 0, "thinktime_spin_ns": 0, "thinktime_blocks": 1,
            "thinktime_blocks_type": "complete", "bw_avg_ms": 500, "iops_avg_ms": 500,
            "logs": {"bw": false, "iops": false, "lat": false, "hist": false, "avg_ms": 0,
                     "hist_ms": 0, "max_value": false, "offset": false}
            }"#,
        )
        .unwrap();
        v["target_size_bytes"] = json!(ns.bytes());
        v["lba_bytes"] = json!(ns.lba_bytes);
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn run_one(extra: Value) -> Result<(Vec<CloneOut>, Footprint), RunError> {
        let (mut ctrl, mut timing) = drive();
        let s = spec(&ctrl, extra);
        run_measured(&mut ctrl, &mut timing, vec![s], &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true)
    }

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
    fn memory_does_not_grow_with_simulated_time() {
        // 10 s of think time after every I/O: a day simulates 8,640 stalls, ten days 86,400.
        // Before, the bw/iops sample windows grew by one entry per 500 ms of simulated time.
        let think =
            |runtime_s: u64| json!({"time_based": true, "runtime_ns": runtime_s * SECOND, "thinktime_ns": 10 * SECOND, "iodepth": 1});
        let (short, f_short) = run_one(think(86_400)).unwrap();
        let (long, f_long) = run_one(think(864_000)).unwrap();
        assert!(long[0].write.total_ios >= 9 * short[0].write.total_ios, "the long run really ran longer");
        assert_eq!(f_short, f_long, "nothing the engine holds grows with simulated time");
        assert_eq!(f_long.log_rows + f_long.log_windows, 0, "no logs asked for, none kept");
        // One bw sample per window with I/O: 10 s think time leaves one write per window, and
        // the run ends after the last stall, so every window is full.
        assert_eq!(long[0].write.bw_sample_stat.n, long[0].write.total_ios);
        assert_eq!(long[0].write.iops_sample_stat.n, long[0].write.total_ios);
    }

    /// Run several clones (each `extra` applied to the base spec; thread numbers and job
    /// indexes in order).
    fn run_many(extras: &[Value]) -> Result<Vec<CloneOut>, RunError> {
        let (mut ctrl, mut timing) = drive();
        let specs = extras
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut e = e.clone();
                e["thread_number"] = json!(i + 1);
                if e.get("job_index").is_none() {
                    e["job_index"] = json!(i);
                }
                spec(&ctrl, e)
            })
            .collect();
        run(&mut ctrl, &mut timing, specs, &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true)
    }

    fn rated(iops: u64, ios: u64) -> Value {
        json!({"rate_iops": {"read": 0, "write": iops, "trim": 0}, "size_bytes": ios * 4096, "io_size_bytes": ios * 4096})
    }

    fn with(mut v: Value, extra: Value) -> Value {
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    // issue 10: ss
    #[test]
    fn steady_state_ends_a_clone_without_changing_what_it_did_before() {
        let timed = |runtime_s: u64| with(rated(1000, 1 << 20), json!({"time_based": true, "runtime_ns": runtime_s * SECOND}));
        let ss = json!({"metric": "iops", "slope": false, "percent": true, "limit": 10.0, "duration_s": 3, "ramp_ns": 0, "group_reporting": false});
        let out = run_many(&[with(timed(30), json!({"steadystate": ss}))]).unwrap();
        let st = out[0].steadystate.as_ref().expect("a steady-state record");
        // Looks at 1, 2, 3 s: the third fills the window of 1000s and ends the clone.
        assert!(st.attained && st.iops == vec![1000; 3] && st.bw == vec![4_096_000; 3]);
        assert_eq!((out[0].write.total_ios, out[0].runtime_ns), (3000, 3 * SECOND));
        // The looks are no events of the drive: the same clone cut by its runtime at 3 s did
        // exactly the same I/O.
        let plain = run_many(&[timed(3)]).unwrap();
        assert!(plain[0].steadystate.is_none());
        assert_eq!(serde_json::to_value(&plain[0].write).unwrap(), serde_json::to_value(&out[0].write).unwrap());
    }

    #[test]
    fn exit_what_terminates_the_clones_fio_terminates() {
        // "short": 100 writes at 1,000 IOPS (~99 ms); "long": 1,000 IOPS for 10 s in the
        // same group; "other": 500 IOPS in group 1; "after": a later stonewall batch.
        let jobs = |what: &str| {
            let w = json!({"exit_what": what});
            vec![
                with(with(rated(1000, 100), json!({"name": "short"})), w.clone()),
                with(with(rated(1000, 10_000), json!({"name": "long"})), w.clone()),
                with(with(rated(500, 200), json!({"name": "other", "group_id": 1})), w.clone()),
                with(with(rated(0, 64), json!({"name": "after", "group_id": 2, "batch": 1, "stonewall": true})), w),
            ]
        };
        let ios = |out: &[CloneOut]| out.iter().map(|o| o.write.total_ios).collect::<Vec<_>>();
        let short_end = |out: &[CloneOut]| out[0].start_ns + out[0].elapsed_ns;
        // none: every job runs to its end.
        let out = run_many(&jobs("none")).unwrap();
        assert_eq!(ios(&out), vec![100, 10_000, 200, 64]);
        // group: "long" ends with "short" (it issued about as many), "other" runs on.
        let out = run_many(&jobs("group")).unwrap();
        let (end, long_end) = (short_end(&out), out[1].start_ns + out[1].elapsed_ns);
        assert!((99..=101).contains(&out[1].write.total_ios), "{:?}", ios(&out));
        assert!(long_end >= end && long_end < end + 1_000_000, "long ended at {long_end}, short at {end}");
        assert_eq!((out[2].write.total_ios, out[3].write.total_ios), (200, 64));
        // stonewall: every running clone ends, the next batch still runs.
        let out = run_many(&jobs("stonewall")).unwrap();
        assert!((99..=101).contains(&out[1].write.total_ios) && (49..=51).contains(&out[2].write.total_ios), "{:?}", ios(&out));
        assert_eq!(out[3].write.total_ios, 64);
        assert!(out[3].start_ns >= short_end(&out));
        // all: the later batch never runs and reports no I/O.
        let out = run_many(&jobs("all")).unwrap();
        assert!((49..=51).contains(&out[2].write.total_ios), "{:?}", ios(&out));
        assert_eq!((out[3].write.total_ios, out[3].runtime_ns), (0, 0));
    }

    #[test]
    fn wait_for_starts_a_clone_when_its_waitee_has_finished() {
        let first = with(rated(1000, 100), json!({"name": "first"}));
        let other = with(rated(1000, 50), json!({"name": "other"}));
        let second = with(rated(1000, 50), json!({"name": "second", "wait_for": "first", "startdelay_ns": 20_000_000}));
        let out = run_many(&[first.clone(), other.clone(), second]).unwrap();
        let first_end = out[0].start_ns + out[0].elapsed_ns;
        assert_eq!(out[1].start_ns, 0, "a job without wait_for starts at once");
        assert_eq!(out[2].start_ns, first_end, "the waiter starts when its waitee ends");
        assert_eq!(out[2].write.total_ios, 50);
        // A start delay longer than the waitee's run still counts from the batch's start.
        let late = with(rated(1000, 50), json!({"name": "second", "wait_for": "first", "startdelay_ns": 500_000_000}));
        let out = run_many(&[first.clone(), other.clone(), late]).unwrap();
        assert_eq!(out[2].start_ns, 500_000_000);
        // Unknown and forward references are refused, not run forever.
        let bad = with(rated(1000, 50), json!({"name": "x", "wait_for": "nosuch"}));
        let err = run_many(&[first.clone(), bad]).unwrap_err();
        assert!(err.to_string().contains("wait_for=nosuch"), "{err}");
        let fwd = with(rated(1000, 50), json!({"name": "x", "wait_for": "first"}));
        let err = run_many(&[fwd, first]).unwrap_err();
        assert!(err.to_string().contains("defined before"), "{err}");
    }

    #[test]
    fn flow_keeps_members_in_proportion_to_their_weights() {
        let timed = json!({"time_based": true, "runtime_ns": 50_000_000, "iodepth": 4});
        let member = |weight: u32, id: u32, sleep_ns: u64| {
            with(timed.clone(), json!({"flow": weight, "flow_id": id, "flow_sleep_ns": sleep_ns, "rw": "randread", "directions": ["read"]}))
        };
        let reads = |out: &[CloneOut]| out.iter().map(|o| o.read.total_ios).collect::<Vec<_>>();
        // Weights 3:2:1 in one group (fio's HOWTO example); a fourth job in group 7 alone.
        let out = run_many(&[member(3, 0, 0), member(2, 0, 0), member(1, 0, 0), member(1, 7, 0)]).unwrap();
        let n = reads(&out);
        let total = (n[0] + n[1] + n[2]) as f64;
        for (i, share) in [(0, 3.0 / 6.0), (1, 2.0 / 6.0), (2, 1.0 / 6.0)] {
            assert!((n[i] as f64 / total - share).abs() < 0.001, "{n:?}");
        }
        // A group of one is never held back: it keeps pace with the leader, which is not held
        // either (the drive, not the flow, limits them).
        assert!(n[3] + 50 >= n[0], "{n:?}");
        // With flow_sleep the member over its share drains and sleeps 1 ms; still 2:1 overall.
        let out = run_many(&[member(2, 0, 1_000_000), member(1, 0, 1_000_000)]).unwrap();
        let n = reads(&out);
        assert!((n[0] as f64 / n[1] as f64 - 2.0).abs() < 0.05, "{n:?}");
        // A member whose partners cannot run before it ends is an error, not a hang.
        let later = with(member(1, 0, 0), json!({"batch": 1, "stonewall": true}));
        let err = run_many(&[member(1, 0, 0), later]).unwrap_err();
        assert!(err.to_string().contains("flow_id=0"), "{err}");
    }

    #[test]
    fn a_rate_limited_queue_keeps_one_wake_up_per_clone() {
        // QD32 at 20,000 IOPS: every completion finds the next I/O held back. Each used to
        // push another wake-up for the same time, so the heap (and the work per I/O) grew
        // with the I/Os issued. Now the heap holds the in-flight I/Os and one wake-up.
        let rated = |ios: u64| {
            let rate = json!({"read": 0, "write": 20_000, "trim": 0});
            run_one(json!({"iodepth": 32, "rate_iops": rate, "size_bytes": ios * 4096, "io_size_bytes": ios * 4096})).unwrap()
        };
        let (short, f_short) = rated(256);
        let (long, f_long) = rated(4096);
        assert_eq!((short[0].write.total_ios, long[0].write.total_ios), (256, 4096));
        // The limit holds: 4,096 I/Os at 20,000 IOPS take 4,095 gaps of 50 us.
        assert!(long[0].elapsed_ns >= 4095 * 50_000, "{}", long[0].elapsed_ns);
        assert_eq!(f_short.events, f_long.events, "the event heap does not grow with the I/Os issued");
        assert!(f_long.events <= 64, "{} events", f_long.events);
    }

    #[test]
    fn windowed_logs_hold_one_entry_per_row() {
        // bw/iops logs averaged over 1 s: state grows with the rows the log will have (the
        // output), not with the idle windows between them.
        let logs = json!({"bw": true, "iops": false, "lat": false, "hist": false, "avg_ms": 1000,
                          "hist_ms": 0, "max_value": false, "offset": false});
        let (out, f) =
            run_one(json!({"time_based": true, "runtime_ns": 86_400 * SECOND, "thinktime_ns": 60 * SECOND, "logs": logs})).unwrap();
        let rows = out[0].logs["bw"].len();
        assert!(rows >= 1400, "{rows} rows");
        assert!(f.log_windows <= 2 * rows + 4, "{} windows held for {rows} rows", f.log_windows);
    }

    #[test]
    fn a_run_past_the_clock_limit_is_an_error_not_an_overflow() {
        // 90 days of think time between I/Os: the third stall passes the 200-day limit.
        let err = run_one(json!({"thinktime_ns": 90 * NS_PER_DAY, "iodepth": 1})).unwrap_err();
        assert!(matches!(err, RunError::TimeLimit(MAX_RUN_NS)), "{err}");
        assert!(err.to_string().contains("pass 200 days"), "{err}");
        // Up to the limit the device timing works: 16 writes in the run's last second.
        let (out, _) = run_one(json!({"startdelay_ns": MAX_RUN_NS - SECOND, "number_ios": 16})).unwrap();
        assert_eq!(out[0].write.total_ios, 16);
        assert!(out[0].write.clat.max_ns < SECOND / 100, "{:?}", out[0].write.clat);
        let err = run_one(json!({"startdelay_ns": MAX_RUN_NS + 1})).unwrap_err();
        assert!(matches!(err, RunError::TimeLimit(MAX_RUN_NS)), "{err}");
        // Start delays and runtimes that would overflow u64 saturate, then hit the limit.
        let err = run_one(json!({"startdelay_ns": u64::MAX})).unwrap_err();
        assert!(matches!(err, RunError::TimeLimit(_)), "{err}");
        let far = json!({"ramp_time_ns": u64::MAX - 5, "runtime_ns": u64::MAX, "time_based": true, "thinktime_ns": 60 * NS_PER_DAY});
        let err = run_one(far).unwrap_err();
        assert!(matches!(err, RunError::TimeLimit(_)), "{err}");
    }

    #[test]
    fn huge_rates_and_gaps_do_not_overflow() {
        // A 1 GiB I/O at 1 byte/s: the gap (1e18 s) does not fit in u64 ns and saturates.
        let (out, _) = run_one(json!({"rate_bytes_per_s": {"read": 0, "write": 1, "trim": 0}, "number_ios": 1})).unwrap();
        assert_eq!(out[0].write.total_ios, 1);
        // A sequential gap past the region: every I/O of a pass wraps back to the start.
        let (out, _) = run_one(json!({"rw": "write", "random": false, "rw_seq_add_bytes": u64::MAX, "loops": 2})).unwrap();
        assert_eq!(out[0].write.total_ios, 2 * 256);
    }

    // issue 10: latency_target
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
    // (the I/Os in flight at the window's ends differ), never to those of the ramp as well.
    #[test]
    fn depth_levels_count_from_the_ramps_end() {
        let timed = json!({"time_based": true, "runtime_ns": 50_000_000u64, "ramp_time_ns": 20_000_000u64, "iodepth": 8});
        let (out, _) = run_one(timed).unwrap();
        let o = &out[0];
        let counted: u64 = o.iodepth_level.iter().sum();
        let reported = o.read.total_ios + o.write.total_ios;
        assert!(reported > 1000, "{reported}");
        assert!(counted.abs_diff(reported) <= 2 * 8, "depths {counted} against {reported} I/Os reported");
    }

    // issue 10: latency_target
    #[test]
    fn a_met_latency_target_climbs_to_iodepth_and_reports_one_window() {
        let window_ns = 2_000_000;
        let job = |target_ns: u64| {
            let timed = json!({"time_based": true, "runtime_ns": 1_000_000_000u64, "iodepth": 16});
            let (out, _) = run_one(with(timed, json!({"latency_target_ns": target_ns, "latency_window_ns": window_ns}))).unwrap();
            out.into_iter().next().unwrap()
        };
        let loose = job(1_000_000_000);
        assert_eq!((loose.latency_depth, loose.error), (16, 0));
        // Windows at depths 1, 2, 4, 8, 16, 16, then the final window after the statistics
        // reset: the job ends long before its runtime and reports one window.
        assert!(loose.runtime_ns >= window_ns && loose.runtime_ns < 2 * window_ns, "{}", loose.runtime_ns);
        assert!(loose.elapsed_ns >= 6 * window_ns && loose.elapsed_ns < 7 * window_ns, "{}", loose.elapsed_ns);
        assert!(loose.iodepth_level[depth_slot(16)] > 0);
        // A target no I/O can meet at depth 1 ends the job with ETIMEDOUT (io_u.c lat_fatal).
        let impossible = job(1);
        assert_eq!((impossible.latency_depth, impossible.error), (1, 110));
        // Without a target, latency_depth is iodepth (lat_target_init).
        let (plain, _) = run_one(json!({"iodepth": 16})).unwrap();
        assert_eq!((plain[0].latency_depth, plain[0].error), (16, 0));
    }
}
