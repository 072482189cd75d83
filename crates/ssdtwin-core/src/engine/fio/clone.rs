//! One fio job clone while it runs: what it targets, where it is in its life (started,
//! stopping, finished), its queue of slots, its rate limiter, think time and flow state, and
//! the counters its report is built from. The runner's files change these; this one holds
//! the state and the rules that need nothing but the clone.

use super::latency_target::{LatProbe, LatQuiesce};
use super::min_rate::MinRate;
use super::report::{CloneLogs, DirCounters, LatencyBuckets};
use super::steadystate::SsState;
use crate::engine::iolog::{IoLog, Replay, ReplaySource};
use crate::nvme::{Controller, Namespace, NsPrefetch};
use crate::rng::Rng;
use crate::units::NsId;
use crate::workload::{Ddir, Generator, Io, JobError, JobSpec, RateProcess, ThinktimeBlocksType};

use super::report::window_ns;
use super::RunError;

/// One direction's counters, and the open windows of its logs.
#[derive(Default)]
pub(super) struct DirStats {
    pub counters: DirCounters,
    /// Open window of the averaged lat, clat and slat logs (`log_avg_msec`).
    pub lat_window: [LatLogWindow; 3],
    pub hist_since: Vec<u64>,
    /// fio's `hist_window[ddir].hist_last` (stat.c `add_clat_sample`): ms of the last
    /// histogram-log row of this direction, or of its first completion; 0 until then.
    pub hist_last_ms: u64,
    /// The averaged bw log's windows (`bw_avg_ms`) and the iops log's (`iops_avg_ms`):
    /// (window index, bytes or I/Os) of each window with I/O, in time order, one entry per
    /// row the log will have (a row per bw or iops sample, as fio's `__add_samples` logs
    /// them), none for idle windows.
    pub log_windows: [Vec<(u64, u64)>; 2],
}

/// One open window of an averaged latency log: fio's `avg_last` and the `io_stat` of the
/// window's samples (stat.c `add_log_sample`, `__add_stat_to_log`).
#[derive(Clone, Copy, Default)]
pub(super) struct LatLogWindow {
    /// Where the window started, ms after the clone's measurement start.
    pub start_ms: u64,
    pub samples: u64,
    /// The running mean, updated as stat.c `add_stat_sample` does, step for step.
    pub mean: f64,
    pub max: u64,
}

impl LatLogWindow {
    pub fn add(&mut self, value: u64) {
        let delta = value as f64 - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.samples as f64 + 1.0);
        }
        self.samples += 1;
        self.max = self.max.max(value);
    }

    /// The row's value: the maximum with `log_max_value`, else fio's `mean + 0.50`
    /// converted to an integer (rounded half up).
    pub fn value(&self, max_value: bool) -> u64 {
        if max_value {
            self.max
        } else {
            (self.mean + 0.5) as u64
        }
    }
}

/// What the report counts: everything a latency_target's final window starts again
/// (libfio.c reset_all_stats).
#[derive(Default)]
pub(super) struct CloneStats {
    pub dirs: [DirStats; 3],
    pub depth_levels: [u64; 7],
    pub lat_buckets: LatencyBuckets,
}

/// The counters fio keeps during `ramp_time` (td->io_blocks, io_bytes, io_u_map; no latency
/// or bw/iops sample): its `reset_all_stats` at the ramp's end zeroes them, but a job that
/// ends inside its ramp is never reset and reports them (fio 3.33, ioengine=null:
/// `size=64k rate_iops=1000 ramp_time=1s` reports 16 I/Os and no latency sample).
#[derive(Default)]
pub(super) struct RampCounts {
    pub ios: [u64; 3],
    pub bytes: [u64; 3],
    pub depth_levels: [u64; 7],
}

/// How a completion after the ramp's end counts ([`JobClone::after_ramp`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(super) enum AfterRamp {
    /// The completion that triggered fio's reset: not counted.
    Trigger,
    /// Issued before the reset: its bytes and latency count, not the I/O.
    BytesOnly,
    /// Issued after the reset: counted.
    Counted,
}

/// fio's think time (backend.c handle_thinktime).
#[derive(Default)]
pub(super) struct Think {
    /// fio's `last_thinktime_blocks`: the counter's value at the last stall.
    pub last_blocks: u64,
    /// The last issue filled the queue: fio reaps at least one completion before it checks
    /// for think time, so the check waits for this clone's next completion.
    pub check_on_completion: bool,
    /// `thinktime_blocks` I/Os were issued or completed since the last stall: stall once the
    /// ones in flight have completed.
    pub due: bool,
    pub until: u64,
}

/// What a clone issued in fast-forward (fast_forward.rs), or left out of its statistics:
/// per direction, I/Os and bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct FfTally {
    pub ios: [u64; 3],
    pub bytes: [u64; 3],
}

impl FfTally {
    pub fn add(&mut self, ddir: Ddir, len: u64) {
        self.ios[ddir.index()] += 1;
        self.bytes[ddir.index()] += len;
    }
}

/// What a converging run carried past the timed engine for this clone (converge.rs), and
/// what fast-forward issued (fast_forward.rs). All zero in a run timed in full.
#[derive(Default)]
pub(super) struct Carried {
    /// I/Os issued in fast-forward.
    pub ff: FfTally,
    /// Timed I/Os the statistics leave out: in flight when a sample ended, or completed
    /// while the queue refilled after fast-forward.
    pub uncounted: FfTally,
    /// The round's time the fast-forwarded I/Os stand for, added to the clone's runtime.
    pub ff_ns: u64,
    /// Completions still to leave out of the statistics after fast-forward.
    pub warmup_left: u32,
    /// The generator ended in fast-forward.
    pub ended: bool,
}

/// fio's rate limiter (`rate`, `rate_iops`, `rate_process`).
pub(super) struct Rate {
    pub start: u64,
    /// Time of the last rate wake-up pushed for this clone. While the front I/O waits for
    /// its rate slot, every completion would otherwise push another wake-up for the same
    /// time, and each of those would push one more: the heap grew with the I/Os issued and
    /// a rate-limited run slowed down quadratically.
    pub wake_ns: u64,
    pub poisson: Rng,
    pub next_at: [u64; 3],
}

/// fio's flow control (flow.c): the clone's flow group (index into `Runner::flows`), its
/// own counter, whether the front I/O already passed the check (it may then wait for its
/// rate slot without counting twice), a stall waiting for the I/Os in flight
/// (`flow_sleep`), the end of the sleep after it, and whether it waits for another member
/// to move (no `flow_sleep`: fio retries at once, so any progress may free it).
#[derive(Default)]
pub(super) struct FlowMember {
    pub group: Option<usize>,
    pub count: u64,
    pub passed: bool,
    pub quiesce: bool,
    pub until: u64,
    pub blocked: bool,
}

pub(super) struct JobClone {
    pub gen: Generator,
    pub nsid: NsId,
    /// What the namespace's prefetches need (set by the run from the controller).
    pub prefetch: NsPrefetch,
    /// PRINFO of the job's commands (pi_act, pi_chk).
    pub pract: bool,
    pub prchk: u8,
    pub lba: u64,
    /// log2(lba) when a power of two (always, for the LBA formats NVMe drives offer).
    pub lba_shift: Option<u32>,
    /// `window_ns` of the job's bw_avg_ms and iops_avg_ms.
    pub bw_window_ns: u64,
    pub iops_window_ns: u64,
    /// Some log (bw, iops, lat, hist) is written.
    pub logging: bool,
    /// Some direction has `rate` or `rate_iops` (the rate limiter has work to do).
    pub rate_limited: bool,
    /// Nothing but the queue depth and the run's length decides when the clone issues, and
    /// a completion counts only in the report's totals, latencies and bw/iops samples (see
    /// `JobClone::plain_options`; the runner adds its own conditions): the runner takes the
    /// short path for its completions (`Runner::done_plain`).
    pub plain: bool,
    /// `iodepth` as the queue holds it (at least 1).
    pub depth: u32,
    pub started: bool,
    pub finished: bool,
    pub stopping: bool,
    /// Its start event is queued (a `wait_for` clone gets it when its waitees are done).
    pub scheduled: bool,
    pub start_ns: u64,
    pub ramp_end: u64,
    pub stop_at: u64,
    pub end_ns: u64,
    pub inflight: u32,
    pub ios_issued: u64,
    /// I/Os completed before the statistics were last reset (the end of `ramp_time`, or a
    /// latency_target's final window): after the reset `number_ios` counts every I/O issued
    /// but these, as fio's `exceeds_number_ios` counts td->io_blocks (completions since the
    /// reset) plus the I/Os in flight (backend.c).
    pub ios_done_before_stats: u64,
    /// fio's reset at the end of `ramp_time` has happened. fio resets lazily (time.c
    /// `ramp_time_over`, called by io_u.c `should_account` at every completion and by
    /// `io_u_queued` at an async engine's submission): at the first completion, or an async
    /// engine's first submission, once the ramp's time is over. See [`JobClone::after_ramp`].
    pub ramp_reset: bool,
    /// I/Os counted in the bytes and latencies but not in the I/Os reported: the async
    /// submission that triggered fio's reset (td_io_queue counted it in total_io_u, which
    /// the reset then zeroed; its completion counts in io_bytes).
    pub ios_not_counted: [u64; 3],
    pub bytes_issued: [u64; 3],
    /// I/Os completed (all directions), for `thinktime_blocks_type=complete`.
    pub ios_completed: u64,
    pub think: Think,
    pub rate: Rate,
    pub flow: FlowMember,
    /// The next I/Os, drawn ahead in generation order (the front is issued next; it stays
    /// here while a rate limit holds it back). Drawing ahead lets their L2P lines be
    /// prefetched [`LOOKAHEAD`] issues before they are needed; the sequence of I/Os issued
    /// is the generator's, whatever the depth.
    pub pending: Ahead,
    pub stats: CloneStats,
    /// What the ramp counted, reported only by a clone that ends inside it.
    pub ramp: RampCounts,
    pub logs: CloneLogs,
    /// Rows of `logs` already added to the run's count ([`super::Runner::log_rows`]).
    pub log_rows_counted: usize,
    /// In-flight I/Os (indexed by the slot number carried in `Ev::Done`) and free slots.
    pub slots: Vec<Slot>,
    pub free_slots: Vec<u32>,
    /// write_iolog: the I/Os issued so far.
    pub iolog: Option<IoLog>,
    /// read_iolog: the trace that replaces the generator.
    pub replay: Option<Replay>,
    /// Steady-state detection (steadystate.rs).
    pub ss: Option<SsState>,
    /// latency_target probing state; None without a target.
    pub lat: Option<LatProbe>,
    /// rate_min/rate_iops_min bookkeeping; None without a minimum rate.
    pub min_rate: Option<MinRate>,
    /// fio's job error (errno), 0 if none.
    pub error: i32,
    /// What fio logs when the job ends with `error` (empty if it logs nothing of its own).
    pub error_text: String,
    pub carried: Carried,
}

/// An I/O in flight.
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct Slot {
    pub ddir: u8,
    pub len: u64,
    pub offset: u64,
    pub issued: u64,
}

impl JobClone {
    /// Fetch the L2P line of `n`, an I/O just drawn ahead, if the command will look it up
    /// when it arrives: a read or a trim does. A write does not: its IU waits in the write
    /// buffer, and the FTL fetches the line a few slots before the slot leaves
    /// (`Ftl::write`), thousands of writes later, when this fetch is long gone from cache.
    /// Fetching it anyway cost a timed random write 5 % of its CPU (docs/performance.md,
    /// "Timed writes fetch no L2P line").
    #[inline(always)]
    pub fn prefetch_drawn(&self, ctrl: &Controller, n: Io) {
        if n.ddir != Ddir::Write {
            ctrl.prefetch_at(&self.prefetch, n.offset);
        }
    }

    /// A clone of `spec` on namespace `ns` (`nsid`) whose jobs address `target` bytes
    /// (the namespace, or a host stack's address space).
    /// `source`, when given, replays a trace streamed from a file instead of the spec's.
    pub fn new(
        mut spec: JobSpec,
        nsid: NsId,
        ns: &Namespace,
        target: u64,
        source: Option<Box<dyn ReplaySource>>,
    ) -> Result<JobClone, RunError> {
        // Taken out of the spec: the spec is cloned for the output, the trace need not be.
        let trace = spec.replay.take();
        let err = |reason: String| JobError { job: spec.name.clone(), thread: spec.thread_number, reason };
        let rate_seed = spec.seeds.get("poisson_write").copied().unwrap_or(spec.seed);
        let iolog = spec.iolog.then(IoLog::default);
        let lba = ns.lba_bytes as u64;
        let replay = match (source, trace) {
            (Some(source), _) => Some(Replay::streamed(source, target, lba)),
            (None, Some(trace)) => Some(Replay::new(trace, target, lba).map_err(err)?),
            (None, None) => None,
        };
        let (bw_window_ns, iops_window_ns) = (window_ns(spec.bw_avg_ms), window_ns(spec.iops_avg_ms));
        let logging = spec.logs.bw || spec.logs.iops || spec.logs.lat || spec.logs.hist;
        let (pract, prchk) = (spec.pi_act, spec.pi_chk);
        let rate_limited =
            [Ddir::Read, Ddir::Write, Ddir::Trim].into_iter().any(|d| spec.rate_bytes_per_s.get(d) > 0 || spec.rate_iops.get(d) > 0);
        let depth = spec.iodepth.max(1);
        let gen = Generator::new(spec, target)?;
        Ok(JobClone {
            gen,
            nsid,
            prefetch: NsPrefetch::default(),
            pract,
            prchk,
            lba: ns.lba_bytes as u64,
            lba_shift: ns.lba_bytes.is_power_of_two().then(|| ns.lba_bytes.trailing_zeros()),
            bw_window_ns,
            iops_window_ns,
            logging,
            rate_limited,
            plain: false,
            depth,
            started: false,
            finished: false,
            stopping: false,
            scheduled: false,
            start_ns: 0,
            ramp_end: 0,
            stop_at: u64::MAX,
            end_ns: 0,
            inflight: 0,
            ios_issued: 0,
            ios_done_before_stats: 0,
            ramp_reset: false,
            ios_not_counted: [0; 3],
            bytes_issued: [0; 3],
            ios_completed: 0,
            think: Think::default(),
            rate: Rate { start: 0, wake_ns: u64::MAX, poisson: Rng::new(rate_seed), next_at: [0; 3] },
            flow: FlowMember::default(),
            pending: Ahead::default(),
            stats: CloneStats::default(),
            ramp: RampCounts::default(),
            logs: CloneLogs::default(),
            log_rows_counted: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            iolog,
            replay,
            ss: None,
            lat: None,
            min_rate: None,
            error: 0,
            error_text: String::new(),
            carried: Carried::default(),
        })
    }

    /// A free slot for an I/O in flight.
    #[inline]
    pub fn take_slot(&mut self, slot: Slot) -> u32 {
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
    pub fn lbas(&self, bytes: u64) -> u64 {
        match self.lba_shift {
            Some(s) => bytes >> s,
            None => bytes / self.lba,
        }
    }

    /// How many I/Os the clone may have in flight now: `iodepth`, or the depth a
    /// latency_target probe allows (none while it drains the queue).
    pub fn depth_limit(&self) -> u32 {
        match &self.lat {
            None => self.depth,
            Some(p) if p.quiesce != LatQuiesce::None => 0,
            Some(p) => p.qd,
        }
    }

    /// libfio.c reset_all_stats at `now` (the final window of a latency_target search):
    /// the statistics, the runtime clock and the rate limiter start again.
    pub fn reset_stats(&mut self, now: u64) {
        self.ramp_end = now;
        self.stats = CloneStats::default();
        self.ios_not_counted = [0; 3];
        self.ramp_reset = true;
        self.ios_done_before_stats = self.ios_completed;
        self.rate.start = now;
        self.rate.next_at = [0; 3];
        if self.min_rate.is_some() {
            self.min_rate = Some(MinRate::new(now));
        }
        if self.gen.spec.runtime_ns > 0 {
            self.stop_at = now.saturating_add(self.gen.spec.runtime_ns);
        }
    }

    /// How the completion, after the ramp, of an I/O issued at `issued` counts, as in fio
    /// 3.33 (io_u.c `io_completed`: td->io_blocks and io_bytes grow at every completion,
    /// then `should_account` -> `account_io_completion` adds the latencies; ioengines.c
    /// `td_io_queue` counts total_ios at submission; the reset zeroes all three):
    /// * the first completion after the ramp's end, unless an async submission came first,
    ///   triggers the reset and counts nowhere (it counts as done before the reset);
    /// * an I/O issued before the reset (in flight across it) counts in the bytes and the
    ///   latencies, with its whole latency, but not in the I/Os;
    /// * one issued after counts in all three.
    ///
    /// The twin resets at the ramp's end exactly; fio at the first completion or async
    /// submission after it (docs/fio.md §4, ramp_time).
    #[inline(always)]
    pub fn after_ramp(&mut self, issued: u64) -> AfterRamp {
        if !self.ramp_reset {
            self.ramp_reset = true;
            self.ios_done_before_stats += 1;
            AfterRamp::Trigger
        } else if issued < self.ramp_end {
            AfterRamp::BytesOnly
        } else {
            AfterRamp::Counted
        }
    }

    /// An I/O of `ddir` submitted at `now`, at or after the ramp's end: an async engine's
    /// first such submission triggers fio's reset (io_u_queued -> ramp_time_over) after
    /// td_io_queue counted it, so it counts in the bytes and latencies but not the I/Os.
    #[inline(always)]
    pub fn submitted_after_ramp(&mut self, di: usize) {
        if !self.ramp_reset && self.gen.spec.engine_async {
            self.ramp_reset = true;
            self.ios_not_counted[di] += 1;
        }
    }

    /// How many more I/Os `number_ios` lets this clone issue at `now` (None: no limit
    /// applies, [`JobSpec::number_ios_limit`]; a replay ends with its trace). Inside the
    /// ramp every I/O issued counts: fio's `exceeds_number_ios` counts td->io_blocks and the
    /// I/Os in flight, which only the reset at the ramp's end zeroes, so a limit reached
    /// there ends the job inside its ramp (fio 3.33, ioengine=null: `number_ios=10
    /// rate_iops=1000 ramp_time=1s` runs 10 I/Os and reports them). After the reset the I/Os
    /// then in flight count too (fio 3.33, libaio iodepth=32 `ramp_time=100ms
    /// number_ios=20000` reports 19,969 I/Os and 20,000 x 4 KiB).
    pub fn number_ios_left(&self, now: u64) -> Option<u64> {
        if self.replay.is_some() {
            return None;
        }
        let counted = if now < self.ramp_end { self.ios_issued } else { self.ios_issued - self.ios_done_before_stats };
        self.gen.spec.number_ios_limit().map(|limit| limit.saturating_sub(counted))
    }

    /// None of the options the issue and completion paths look for is in use: think time,
    /// number_ios, flow, a replayed trace, serialize_overlap, a rate limit, a latency target, a minimum rate, write_iolog, steady state, any log. Their state then
    /// stays at its start values for the whole run (nothing else sets it), so skipping the
    /// checks changes nothing. Its blocks are under 1 GiB: a completion carries its
    /// length in 30 bits of the event (`Ev::plain_io`).
    pub fn plain_options(&self) -> bool {
        let spec = &self.gen.spec;
        spec.thinktime_ns == 0
            && spec.number_ios == 0
            && self.flow.group.is_none()
            && self.replay.is_none()
            && !spec.serialize_overlap
            && !self.rate_limited
            && spec.latency_target_ns == 0
            && !self.min_rate_set()
            && self.iolog.is_none()
            && self.ss.is_none()
            && !self.logging
            && spec.bs.read.max.max(spec.bs.write.max).max(spec.bs.trim.max) < 1 << 30
    }

    /// rate_min or rate_iops_min is set for some direction.
    pub fn min_rate_set(&self) -> bool {
        MinRate::for_spec(&self.gen.spec, 0).is_some()
    }

    /// serialize_overlap: whether `io`'s byte range overlaps an I/O in flight (backend.c
    /// in_flight_overlap). A scan of the slots: only jobs with the option pay for it.
    pub fn overlaps_in_flight(&self, io: Io) -> bool {
        let end = io.offset + io.len;
        self.slots.iter().enumerate().any(|(i, s)| io.offset < s.offset + s.len && s.offset < end && !self.free_slots.contains(&(i as u32)))
    }

    /// Under a rate limit: the time `io` may be issued if that is later than `now`;
    /// otherwise None, with the next I/O's earliest time advanced by this one's gap.
    #[inline]
    pub fn rate_admit(&mut self, io: Io, now: u64) -> Option<u64> {
        if !self.rate_limited {
            return None;
        }
        self.rate_admit_limited(io, now)
    }

    fn rate_admit_limited(&mut self, io: Io, now: u64) -> Option<u64> {
        let di = io.ddir.index();
        let rate = self.gen.spec.rate_bytes_per_s.get(io.ddir);
        let rate_iops = self.gen.spec.rate_iops.get(io.ddir);
        if rate == 0 && rate_iops == 0 {
            return None;
        }
        let at = self.rate.next_at[di].max(self.rate.start);
        if at > now {
            return Some(at);
        }
        // fio's __setup_rate: rate_iops is a byte rate, rate_iops × the direction's smallest
        // block size, so larger blocks of a bssplit or bsrange job wait longer (backend.c
        // usec_for_io spaces a linear process by bytes; a Poisson one draws each I/O's gap
        // around 1 / (bytes/s / smallest block size) whatever its size).
        let min_bs = self.gen.spec.bs.of(io.ddir).min.max(1);
        let bytes_per_s = if rate > 0 { rate } else { rate_iops.saturating_mul(min_bs) };
        let gap = match self.gen.spec.rate_process {
            RateProcess::Poisson => {
                let mean_ns = 1_000_000_000 / (bytes_per_s / min_bs).max(1);
                // `as` saturates: a huge exponential draw stays a huge gap.
                (-(1.0 - self.rate.poisson.unit()).ln() * mean_ns as f64) as u64
            }
            RateProcess::Linear => (io.len as u128 * 1_000_000_000 / bytes_per_s as u128).min(u64::MAX as u128) as u64,
        };
        self.rate.next_at[di] = at.saturating_add(gap);
        None
    }

    /// The front I/O waits for a rate wake-up after `now` and nothing else can change
    /// before it: the gate would only say wait, so a completion need not look (it halves
    /// the gate calls of a rate-limited clone, whose completions come between its issues).
    /// A wake-up pending in the future means the front I/O was held back and is still
    /// there, so neither `number_ios` nor the region's end can stop the clone early.
    pub fn waits_for_rate(&self, now: u64) -> bool {
        self.rate.wake_ns > now && self.rate.wake_ns != u64::MAX && !self.stopping && now < self.stop_at && !self.think.due
    }

    /// fio's handle_thinktime test: stall once the counter (completed I/Os by default,
    /// issued ones with `thinktime_blocks_type=issue`) has moved `thinktime_blocks` past its
    /// value at the last stall. The value is taken before the quiesce, so I/Os completing
    /// during it count toward the next stall.
    pub fn think_check(&mut self) {
        let spec = &self.gen.spec;
        let counted = match spec.thinktime_blocks_type {
            ThinktimeBlocksType::Issue => self.ios_issued,
            ThinktimeBlocksType::Complete => self.ios_completed,
        };
        if counted >= self.think.last_blocks.saturating_add(spec.thinktime_blocks.max(1)) {
            self.think.last_blocks = counted;
            self.think.due = true;
        }
    }

    /// The clone's next I/O in fio's order; None when it is done.
    #[inline]
    pub fn next_io(&mut self) -> Result<Option<Io>, RunError> {
        // read_iolog: the trace, once, instead of the generator.
        if let Some(r) = &mut self.replay {
            let spec = &self.gen.spec;
            return Ok(r.draw().map_err(|reason| JobError { job: spec.name.clone(), thread: spec.thread_number, reason })?);
        }
        // Passes, loops, io_size and the end of the region follow fio inside the generator
        // (backend.c do_io / keep_running).
        Ok(self.gen.next_io())
    }
}

/// How many I/Os a clone draws ahead of issuing them (see `JobClone::pending`).
pub(super) const LOOKAHEAD: usize = 8;

/// A clone's drawn-ahead I/Os, oldest first: a ring of [`LOOKAHEAD`] (a `VecDeque` did
/// the same with more bookkeeping per I/O).
#[derive(Copy, Clone)]
pub(super) struct Ahead {
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
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest I/O (the ring is not empty).
    #[inline]
    pub fn front(&self) -> Io {
        debug_assert!(self.len > 0);
        // `head` is below LOOKAHEAD; the mask lets the compiler see it (no bounds check).
        self.ios[self.head % LOOKAHEAD]
    }

    #[inline]
    pub fn pop_front(&mut self) {
        debug_assert!(self.len > 0);
        self.head = (self.head + 1) % LOOKAHEAD;
        self.len -= 1;
    }

    /// Replace the oldest I/O of a full ring by a new newest one (a pop and a push).
    #[inline]
    pub fn replace_front(&mut self, io: Io) {
        debug_assert!(self.len == LOOKAHEAD);
        self.ios[self.head % LOOKAHEAD] = io;
        self.head = (self.head + 1) % LOOKAHEAD;
    }

    #[inline(always)]
    pub fn push_back(&mut self, io: Io) {
        assert!(self.len < LOOKAHEAD, "at most LOOKAHEAD I/Os are drawn ahead");
        self.ios[(self.head + self.len) % LOOKAHEAD] = io;
        self.len += 1;
    }
}
