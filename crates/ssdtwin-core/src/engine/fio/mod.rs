//! Runs fio job clones against a drive in virtual time (docs/fio.md §3-§4).
//!
//! Each clone is a closed loop of `iodepth` slots. Events (clone start, I/O completion,
//! wake-ups for rate limits and think time) sit in one heap ordered by (time, sequence),
//! sized by the outstanding I/Os. Completion times come from [`DeviceTiming`] at the moment
//! an I/O is issued, so the NAND timelines need no events of their own.
//!
//! This file holds the entry points, the [`Runner`] state and its event loop; the rest, one
//! concern a file:
//! * `clone.rs`: one clone's state, its rate limiter and think-time rules;
//! * `issue.rs`: whether a clone may issue now, and sending the I/O to the drive;
//! * `accounting.rs`: what a completion counts, the logs, the clone's report at the end;
//! * `report.rs`: the output types and the accounting the cluster shares ([`CloneOut`]);
//! * `batches.rs`: batches (stonewall), startdelay, wait_for, exit_what;
//! * `flow.rs`: flow groups; `latency_target.rs`: the queue-depth search;
//! * `steadystate.rs`: steady-state detection; `host_stack.rs`: runs through a host stack;
//! * `fast_forward.rs`: a run's I/Os through the FTL untimed; `converge.rs`: timing a round
//!   until its figures converge, and the rest of it in fast-forward.

mod accounting;
mod batches;
mod clone;
pub mod converge;
pub mod fast_forward;
mod flow;
pub(super) mod host_stack;
mod issue;
mod latency_target;
mod min_rate;
pub mod report;
mod steadystate;
#[cfg(test)]
pub(crate) mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::arbiter::Arbiter;
use super::events::{Entry, EventQueue};
use super::stack::{HostStack, StackRun};
use super::DeviceTiming;
use crate::nvme::{Controller, Error};
use crate::progress::{self, Budget, Progress, ProgressUnit, Spent};
use crate::units::NsId;
use crate::workload::trace::ReplaySource;
use crate::workload::{JobError, JobSpec};
use clone::{AfterRamp, JobClone, LOOKAHEAD};
use converge::{ConvergeOut, ConvergeRule, Converger};
use flow::FlowGroup;
use latency_target::LatProbe;
use min_rate::MinRate;
use steadystate::{SsState, SS_TICK_NS};

pub use report::{CloneLogs, CloneOut, DirOut, HistRow, LogRow, SampleStatOut};
pub use steadystate::SsOut;

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
    /// A job a host stack cannot run.
    #[error("stack: {0}")]
    Stack(String),
    /// Options of the run itself (not of a job) that cannot be used.
    #[error("{0}")]
    Options(String),
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
/// `keep_going(progress)` is called every 65,536 events with how far the run is
/// ([`Progress`]: bytes, I/Os or simulated time of the jobs' known totals); returning false
/// stops the run with [`RunError::Interrupted`] (Ctrl-C in the CLI).
pub fn run(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    start_ns: u64,
    keep_going: &mut dyn FnMut(&Progress) -> bool,
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
        for d in &c.stats.dirs {
            f.clone_state += d.hist_since.capacity();
            f.log_windows += d.log_windows.iter().map(Vec::capacity).sum::<usize>();
        }
        f.log_rows += c.logs.capacity();
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
    keep_going: &mut dyn FnMut(&Progress) -> bool,
) -> Result<(Vec<CloneOut>, Footprint), RunError> {
    run_with(ctrl, timing, Run { specs, sources: Vec::new(), start_ns, converge: None }, opts, keep_going, None)
        .map(|r| (r.clones, r.footprint))
}

/// [`run`], timing each round only until its figures converge under `rule` and carrying the
/// rest of it through the FTL in fast-forward (converge.rs); also returns how that went. A run
/// the rule does not apply to is timed in full, as [`run`] would, and says why.
pub fn run_converging(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    rule: ConvergeRule,
    keep_going: &mut dyn FnMut(&Progress) -> bool,
) -> Result<(Vec<CloneOut>, ConvergeOut), RunError> {
    rule.check().map_err(|e| RunError::Options(format!("convergence rule: {e}")))?;
    let run = Run { specs, sources: Vec::new(), start_ns: 0, converge: Some(rule) };
    let r = run_with(ctrl, timing, run, opts, keep_going, None)?;
    Ok((r.clones, r.converge.expect("a converging run reports")))
}

/// What [`run_with`] hands back.
struct RunResult {
    clones: Vec<CloneOut>,
    footprint: Footprint,
    converge: Option<ConvergeOut>,
}

/// [`run`] through a host stack on the drive's namespace `opts.default_nsid`: every job
/// targets the stack's address space; the stack's tier changes with the run.
pub fn run_stack(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    keep_going: &mut dyn FnMut(&Progress) -> bool,
    stack: &mut HostStack,
) -> Result<Vec<CloneOut>, RunError> {
    let run = Run { specs, sources: Vec::new(), start_ns: 0, converge: None };
    run_with(ctrl, timing, run, opts, keep_going, Some(stack)).map(|r| r.clones)
}

/// The clones of `specs`, each checked against the namespace it runs on (or the stack's
/// address space, `stack_target` bytes).
fn clones_of(
    ctrl: &Controller,
    specs: Vec<JobSpec>,
    opts: &RunOptions,
    stack_target: Option<u64>,
    mut sources: Vec<Option<Box<dyn ReplaySource>>>,
) -> Result<Vec<JobClone>, RunError> {
    let mut clones = Vec::with_capacity(specs.len());
    sources.resize_with(specs.len(), || None);
    for (spec, source) in specs.into_iter().zip(sources) {
        let nsid = spec.namespace.unwrap_or(opts.default_nsid);
        let ns = ctrl.attached(NsId(nsid))?;
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
        // The namespace's QoS caps bind in the drive (`DeviceTiming::qos_hold`), whatever
        // sends its commands: a clone, the WRR arbiter's fetch or a host stack (whose
        // tier takes the host's I/Os without the drive's cap).
        let mut clone = JobClone::new(spec, NsId(nsid), ns, target, source)?;
        clone.prefetch = ctrl.prefetch_handle(NsId(nsid));
        clones.push(clone);
    }
    steadystate_setup(&mut clones);
    Ok(clones)
}

/// fio's `steadystate_setup`: every clone with `ss_dur` gets a record; the window is kept by
/// each clone without group_reporting and by the last clone of each reporting group with it.
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

/// [`run`] of one clone that replays `source` (a trace streamed from a file, docs/traces.md)
/// in place of its spec's generator.
pub fn run_replay(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    spec: JobSpec,
    source: Box<dyn ReplaySource>,
    opts: &RunOptions,
    keep_going: &mut dyn FnMut(&Progress) -> bool,
) -> Result<CloneOut, RunError> {
    let run = Run { specs: vec![spec], sources: vec![Some(source)], start_ns: 0, converge: None };
    run_with(ctrl, timing, run, opts, keep_going, None).map(|mut r| r.clones.remove(0))
}

/// What a run runs: one spec per clone, the streamed traces some of them replay, the virtual
/// time it starts at, and the rule of a converging run (converge.rs).
struct Run {
    specs: Vec<JobSpec>,
    sources: Vec<Option<Box<dyn ReplaySource>>>,
    start_ns: u64,
    converge: Option<ConvergeRule>,
}

fn run_with(
    ctrl: &mut Controller,
    timing: &mut DeviceTiming,
    run: Run,
    opts: &RunOptions,
    keep_going: &mut dyn FnMut(&Progress) -> bool,
    stack: Option<&mut HostStack>,
) -> Result<RunResult, RunError> {
    let Run { specs, sources, start_ns, converge } = run;
    let mut clones = clones_of(ctrl, specs, opts, stack.as_ref().map(|s| s.tier.user_bytes()), sources)?;
    // The drive's own clock (power-on time) grows by the run's length: keep both in u64.
    let st = ctrl.state();
    let headroom = u64::MAX - st.clock_ns.max(st.smart.controller_busy_ns);
    timing.follow_clock(st.clock_ns.saturating_sub(start_ns));
    let end_limit = start_ns.saturating_add(MAX_RUN_NS.min(headroom));
    let waitees = batches::wait_lists(&clones)?;
    let flows = flow::flow_groups(&mut clones);
    let budgets: Vec<Budget> = clones.iter().map(|c| c.gen.spec.budget(c.replay.as_ref().map(|r| r.records().unwrap_or(0)))).collect();
    let progress_unit = progress::unit_of(&budgets);
    let mut run = Runner {
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
        budgets,
        progress_unit,
        conv: None,
        log_rows: 0,
    };
    // The host stack on the target namespace.
    if let Some(stack) = stack {
        let lba = run.ctrl.attached(NsId(opts.default_nsid))?.lba_bytes as u64;
        run.stack = Some(StackRun::new(stack, NsId(opts.default_nsid), lba));
    }
    // Weighted round robin selected (feature 01h): commands wait in their clone's
    // submission queue for the controller's fetch (engine/arbiter.rs).
    let arbitration = run.ctrl.arbitration();
    if arbitration.weights.is_some() && run.stack.is_some() {
        return Err(RunError::Stack("weighted round robin arbitration (feature 01h) is not modelled under a host stack".into()));
    }
    if arbitration.weights.is_some() {
        let class = run.clones.iter().map(|c| run.ctrl.sq_priority(c.nsid)).collect();
        run.arb = Some(Arbiter::new(arbitration, class, run.timing.ctrl_service_ps()));
    }
    run.start_batch(start_ns);
    // A run the rule does not apply to runs exactly as the plain run does (no batches, the
    // plain clones' short paths); its converger is kept aside to say why.
    let mut timed_in_full = None;
    if let Some(rule) = converge {
        let cv = Box::new(Converger::new(&run, rule, start_ns));
        if cv.applies() {
            run.conv = Some(cv);
        } else {
            timed_in_full = Some(cv);
        }
    }
    // The short completion path: a plain clone, sent straight to the drive, in a run
    // without convergence samples.
    let direct = run.stack.is_none() && run.arb.is_none() && run.conv.is_none();
    #[cfg(test)]
    let direct = direct && !tests::GENERAL_PATH_ONLY.get();
    for cl in &mut run.clones {
        cl.plain = direct && cl.plain_options();
    }
    // Steady state: the first look one second into the run (fio's helper thread ticks
    // every STEADYSTATE_MSEC from the run's start, not per job).
    // The look is kept out of the heap so that idle GC (which runs until the next event)
    // sees the same events with or without it.
    if run.clones.iter().any(|c| c.ss.is_some()) {
        run.ss_next_ns = start_ns.saturating_add(SS_TICK_NS);
    }
    run.event_loop(start_ns, keep_going)?;
    run.drain_stack()?;
    let end = run.clones.iter().map(|c| c.end_ns).max().unwrap_or(start_ns);
    // The fast-forwarded I/Os stand for time the drive was busy too.
    let ff_ns = run.clones.iter().map(|c| c.carried.ff_ns).max().unwrap_or(0);
    let busy = end.saturating_sub(start_ns).saturating_add(ff_ns);
    run.ctrl.advance_clock(busy, busy);
    let used = footprint(run.events.peak(), &run.clones);
    let converge = run.conv.take().or(timed_in_full).map(|cv| cv.out(start_ns, end, ff_ns));
    Ok(RunResult { clones: run.clones.into_iter().map(accounting::finish).collect(), footprint: used, converge })
}

/// The fio runner's state while it runs: the drive, the clones, the event queue and the
/// shared state of batches, flow groups, steady-state looks, arbitration and a host stack.
struct Runner<'a> {
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
    /// When fio's helper thread next looks at steady state (u64::MAX: never).
    ss_next_ns: u64,
    /// Ends of ramp_time still to come, each re-arming the steady-state looks.
    ss_resets: BinaryHeap<Reverse<u64>>,
    /// The submission queues and their arbiter, when WRR is selected.
    arb: Option<Arbiter>,
    /// The host stack the clones write through, if any.
    stack: Option<StackRun<'a>>,
    /// What ends each clone, and the unit the run's progress is counted in.
    budgets: Vec<Budget>,
    progress_unit: Option<ProgressUnit>,
    /// A converging run's samples and rule (converge.rs).
    conv: Option<Box<Converger>>,
    /// Log rows the clones hold, counted as they issue (at most [`report::MAX_LOG_ROWS`]).
    log_rows: usize,
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
    /// A step of the destage on this lane of the host stack completed.
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

    /// Whether packed event `w` is a completion ([`Ev::Done`]).
    #[inline(always)]
    fn is_done(w: u64) -> bool {
        w >> 62 == 1
    }

    /// A plain clone's completion carries its I/O in the event (`Done`'s slot: the direction
    /// in bits 30-31, the length below, `JobClone::plain` keeps it under 2^30), and when it
    /// was issued in the entry's word: no slot to fill and read back.
    #[inline(always)]
    fn plain_io(ddir: u8, len: u64) -> u32 {
        debug_assert!(len < 1 << 30);
        (ddir as u32) << 30 | len as u32
    }

    /// The direction and length of a plain clone's completion ([`Ev::plain_io`]).
    #[inline(always)]
    fn plain_io_of(slot: u32) -> (u8, u64) {
        ((slot >> 30) as u8, (slot & ((1 << 30) - 1)) as u64)
    }

    /// The clone of packed event `w` (of a `Start`, `Done` or `Wake`).
    #[inline(always)]
    fn clone_of(w: u64) -> u32 {
        ((w >> 32) & ((1 << 30) - 1)) as u32
    }

    #[inline(always)]
    fn unpack(w: u64) -> Ev {
        let clone = Ev::clone_of(w);
        match w >> 62 {
            0 => Ev::Start(clone),
            1 => Ev::Done { clone, slot: w as u32 },
            2 => Ev::Wake(clone),
            _ if clone == 1 => Ev::Lane(w as u32),
            _ => Ev::Fetch,
        }
    }
}

impl Runner<'_> {
    #[inline]
    fn push(&mut self, t: u64, ev: Ev) {
        self.events.push(t, ev.pack());
    }

    /// Handle events until none is left or the last batch is done.
    fn event_loop(&mut self, start_ns: u64, keep_going: &mut dyn FnMut(&Progress) -> bool) -> Result<(), RunError> {
        let end_limit = self.end_limit;
        let mut events = 0u64;
        loop {
            // Without steady-state looks and convergence samples nothing but the queue
            // decides what comes next, and a run never gains them: the quiet loop takes it
            // from here.
            if self.ss_next_ns == u64::MAX && self.ss_resets.is_empty() && self.conv.is_none() {
                return self.quiet_loop(start_ns, events, keep_going);
            }
            let Some(Entry { t, .. }) = self.events.peek() else { break };
            // A steady-state look due before (or with) the next event comes first; the end
            // of a clone's ramp_time before the next look re-arms the looks (fio's
            // reset_all_stats calls helper_reset).
            if let Some(&Reverse(ramp_end)) = self.ss_resets.peek().filter(|r| r.0 < self.ss_next_ns && r.0 <= t) {
                self.ss_resets.pop();
                self.ss_next_ns = ramp_end.saturating_add(SS_TICK_NS);
                continue;
            }
            if self.ss_next_ns <= t && self.ss_next_ns <= end_limit {
                self.steadystate_tick(self.ss_next_ns);
                continue;
            }
            if self.conv.as_ref().is_some_and(|cv| cv.batch_end_ns <= t) {
                // The fast-forward stretch reports the run's progress at its start, its clock moving.
                let at = self.progress(t);
                self.converge_tick(t, &mut |now| keep_going(&Progress { now_ns: now, ..at }))?;
                continue;
            }
            let Entry { t, ev, aux, .. } = self.events.pop().expect("peeked");
            events += 1;
            self.arrive(t, events, start_ns, keep_going)?;
            self.dispatch(Ev::unpack(ev), t, aux)?;
            if (self.events.is_empty() || self.batch_done()) && !self.next_batch()? {
                break;
            }
        }
        Ok(())
    }

    /// [`Runner::event_loop`] once the run is quiet (no steady-state looks, no convergence
    /// samples): pop without looking first (a peek finds the first bucket, and the pop
    /// found it again), and a plain clone's completion handled here, the other events in
    /// [`Runner::dispatch`]. A loop of its own: the general loop's registers and spills
    /// were this one's too. `events` is the count so far (the progress calls go on at the
    /// same events).
    #[inline(never)]
    fn quiet_loop(&mut self, start_ns: u64, mut events: u64, keep_going: &mut dyn FnMut(&Progress) -> bool) -> Result<(), RunError> {
        while let Some(Entry { t, ev, aux, .. }) = self.events.pop() {
            events += 1;
            self.arrive(t, events, start_ns, keep_going)?;
            // A completion told apart before the event is unpacked (two jump tables else).
            let clone = Ev::clone_of(ev) as usize;
            if Ev::is_done(ev) && self.clones[clone].plain {
                self.done_plain(clone, ev as u32, aux, t)?;
            } else {
                self.dispatch(Ev::unpack(ev), t, aux)?;
            }
            if (self.events.is_empty() || self.batch_done()) && !self.next_batch()? {
                break;
            }
        }
        Ok(())
    }

    /// The run's clock moves to event number `events`, at `t`.
    #[inline(always)]
    fn arrive(&mut self, t: u64, events: u64, start_ns: u64, keep_going: &mut dyn FnMut(&Progress) -> bool) -> Result<(), RunError> {
        // Event times are computed with saturating additions, so a run that would overflow
        // the clock arrives here past the limit instead of wrapping around.
        if t > self.end_limit {
            return Err(RunError::TimeLimit(self.end_limit - start_ns));
        }
        self.now = t;
        if events % 65_536 == 0 && !keep_going(&self.progress(t)) {
            return Err(RunError::Interrupted(t));
        }
        Ok(())
    }

    /// Handle event `ev` at `t` (`aux`: the word its entry carried).
    #[inline(never)]
    fn dispatch(&mut self, ev: Ev, t: u64, aux: u64) -> Result<(), RunError> {
        match ev {
            // A clone terminated before it started (exit_what) ignores its start.
            Ev::Start(c) if self.clones[c as usize].finished => Ok(()),
            Ev::Start(c) => self.start_clone(c as usize, t),
            Ev::Done { clone, slot } if self.clones[clone as usize].plain => self.done_plain(clone as usize, slot, aux, t),
            Ev::Done { clone, slot } => self.done(clone as usize, slot, t),
            Ev::Wake(c) => self.pump(c as usize),
            Ev::Fetch => self.fetch(),
            Ev::Lane(l) => self.lane_done(l),
        }
    }

    /// How far the run is at `now`: each clone's issued bytes and I/Os and time since its
    /// start against its budget (reading only: the run goes on the same).
    fn progress(&self, now: u64) -> Progress {
        let spent = self.clones.iter().map(|c| Spent {
            bytes: c.bytes_issued.iter().sum(),
            ios: c.ios_issued,
            ns: if c.started { now.saturating_sub(c.start_ns) } else { 0 },
            finished: c.finished,
        });
        progress::tally(now, self.progress_unit, self.budgets.iter().zip(spent))
    }

    /// Clone `c` starts at `t`.
    fn start_clone(&mut self, c: usize, t: u64) -> Result<(), RunError> {
        let cl = &mut self.clones[c];
        cl.started = true;
        cl.start_ns = t;
        cl.ramp_end = t.saturating_add(cl.gen.spec.ramp_time_ns);
        // Without a ramp fio never resets (time.c ramp_time_over returns true at once).
        cl.ramp_reset = cl.gen.spec.ramp_time_ns == 0;
        cl.rate.start = cl.ramp_end.min(t);
        if cl.gen.spec.runtime_ns > 0 {
            cl.stop_at = cl.ramp_end.saturating_add(cl.gen.spec.runtime_ns);
        }
        // latency_target: backend.c do_io calls lat_target_init.
        if cl.gen.spec.latency_target_ns > 0 {
            cl.lat = Some(LatProbe::new(cl.gen.spec.iodepth.max(1), t, cl.ios_completed));
        }
        cl.min_rate = MinRate::for_spec(&cl.gen.spec, cl.ramp_end);
        if let Some(ss) = &mut cl.ss {
            ss.start(t);
        }
        // Steady state: fio resets its stats, and re-arms the looks, at the end of any
        // job's ramp_time while steady state is being detected.
        if cl.ramp_end > t && self.ss_next_ns != u64::MAX {
            let at = cl.ramp_end;
            self.ss_resets.push(Reverse(at));
        }
        self.pump(c)
    }

    /// [`Runner::done`] for a plain clone (`JobClone::plain`): of its steps only those a
    /// plain clone's state can take (no think time, latency target, minimum rate, rate
    /// wake-up, steady state, logs or convergence samples).
    #[inline(always)]
    fn done_plain(&mut self, c: usize, io: u32, issued: u64, t: u64) -> Result<(), RunError> {
        let cl = &mut self.clones[c];
        let (ddir, len) = Ev::plain_io_of(io);
        cl.ios_completed += 1;
        cl.inflight -= 1;
        if t < cl.ramp_end {
            cl.ios_done_before_stats += 1;
            cl.ramp.ios[ddir as usize] += 1;
            cl.ramp.bytes[ddir as usize] += len;
        } else {
            match cl.after_ramp(issued) {
                AfterRamp::Counted => accounting::count(cl, ddir, len, t - issued, t, 1),
                AfterRamp::BytesOnly => accounting::count(cl, ddir, len, t - issued, t, 0),
                AfterRamp::Trigger => {}
            }
        }
        self.pump_plain(c)
    }

    /// The I/O in clone `c`'s `slot` completed at `t`.
    fn done(&mut self, c: usize, slot: u32, t: u64) -> Result<(), RunError> {
        let cl = &mut self.clones[c];
        let s = cl.slots[slot as usize];
        cl.free_slots.push(slot);
        cl.ios_completed += 1;
        if cl.think.check_on_completion {
            cl.think.check_on_completion = false;
            cl.think_check();
        }
        self.complete(c, s.ddir, s.len, s.offset, s.issued);
        if self.clones[c].lat.is_some() {
            self.lat_completion(c, t - s.issued)?;
        }
        if self.clones[c].min_rate.is_some() {
            self.min_rate_completion(c, s.ddir as usize, s.len)?;
        }
        if !self.clones[c].waits_for_rate(t) {
            self.pump(c)?;
        }
        Ok(())
    }
}
