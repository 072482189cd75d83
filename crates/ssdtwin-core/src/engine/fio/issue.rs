//! Issuing: whether a clone may issue its next I/O now (queue depth, think time, rate
//! limits, flow, a replayed trace's pacing), sending it to the drive (directly, through
//! the WRR arbiter's submission queues, or through a host stack), and idle time for
//! background GC when nothing is outstanding. The namespace's QoS caps are the drive's:
//! the controller holds a capped command's completion (`DeviceTiming::qos_hold`), so the
//! host submits at its own pace and sees the hold in its latency.

use super::clone::{JobClone, Slot, LOOKAHEAD};
use super::report::{depth_slot, MAX_LOG_ROWS};
use super::{Ev, RunError, Runner};
use crate::engine::arbiter::Queued;
use crate::engine::events::Entry;
use crate::engine::{DeviceTiming, HostCmd, HostOp};
use crate::nvme::Controller;
use crate::workload::{Ddir, Io, JobError, ThinktimeBlocksType};

/// What a clone does next (see `Runner::gate`).
enum Gate {
    /// Nothing to issue now: a completion, a wake-up or the end of the run comes first.
    Wait,
    /// The clone's state changed (it is stopping); look again.
    Again,
    Issue(Io),
}

impl Runner<'_> {
    /// Issue as much as the clone may now; finish it when it is done.
    pub(super) fn pump(&mut self, c: usize) -> Result<(), RunError> {
        let now = self.now;
        loop {
            let io = match self.gate(c, now)? {
                Gate::Wait => return Ok(()),
                Gate::Again => continue,
                Gate::Issue(io) => io,
            };
            self.issue(c, now, io)?;
            if self.after_issue(c, now)? {
                return Ok(());
            }
            // A full queue: the gate's first checks would say wait, and change nothing.
            let cl = &self.clones[c];
            if !cl.stopping && now < cl.stop_at && cl.inflight >= cl.depth_limit() {
                return Ok(());
            }
        }
    }

    /// [`Runner::pump`] for a plain clone (`JobClone::plain`) sent straight to the drive:
    /// while its queue has room it issues its drawn-ahead I/Os and draws more, the gate's
    /// and the issue's steps for the options it does not use left out. Anything else (the
    /// run's end, nothing drawn ahead) goes to the general path, which takes the same step.
    /// The clone, the drive and the queue are borrowed apart once for the whole loop (a
    /// look-up of the clone per step cost a bounds check and its address each time).
    #[inline(always)]
    pub(super) fn pump_plain(&mut self, c: usize) -> Result<(), RunError> {
        let now = self.now;
        let Runner { clones, ctrl, timing, events, .. } = self;
        let cl = &mut clones[c];
        loop {
            // A finished clone is stopping (the gate finishes only stopping clones, and a
            // clone terminated before its start has no I/O): the general path waits.
            // (With a full queue and nothing drawn ahead the general gate also waits.)
            debug_assert!(!cl.finished || cl.stopping);
            if cl.stopping || now >= cl.stop_at || cl.pending.is_empty() {
                return self.pump(c);
            }
            // The queue has room: a completion made it, or the check at the loop's end.
            debug_assert!(cl.inflight < cl.depth);
            // Drawn ahead in full (the usual case): the issued I/O's place in the ring
            // takes the next one drawn, as a pop and a push would.
            let full = cl.pending.len() == LOOKAHEAD;
            let io = cl.pending.front();
            if !full {
                cl.pending.pop_front();
            }
            let done = Self::issue_plain(cl, ctrl, timing, now, io)?;
            let ev = Ev::Done { clone: c as u32, slot: Ev::plain_io(io.ddir.index() as u8, io.len) };
            events.push_with(done.max(now.saturating_add(1)), ev.pack(), now);
            // Neither the issue nor the draws below change `stopping` or `stop_at`: the
            // general path's draw-ahead and its full-queue check need only these.
            if full {
                match cl.gen.next_io() {
                    Some(n) => {
                        cl.prefetch_drawn(ctrl, n);
                        cl.pending.replace_front(n);
                    }
                    None => cl.pending.pop_front(),
                }
            } else {
                while cl.pending.len() < LOOKAHEAD {
                    match cl.gen.next_io() {
                        Some(n) => {
                            cl.prefetch_drawn(ctrl, n);
                            cl.pending.push_back(n);
                        }
                        None => break,
                    }
                }
            }
            if cl.inflight >= cl.depth {
                return Ok(());
            }
        }
    }

    /// [`Runner::issue`] for a plain clone sent straight to the drive: its counts, and the
    /// command's completion time.
    #[inline(always)]
    fn issue_plain(cl: &mut JobClone, ctrl: &mut Controller, timing: &mut DeviceTiming, now: u64, io: Io) -> Result<u64, RunError> {
        let di = io.ddir.index();
        let (nlb, slba) = (cl.lbas(io.len), cl.lbas(io.offset));
        if now >= cl.ramp_end {
            cl.stats.depth_levels[depth_slot(cl.inflight + 1)] += 1;
            cl.submitted_after_ramp(di);
        } else {
            cl.ramp.depth_levels[depth_slot(cl.inflight + 1)] += 1;
        }
        cl.inflight += 1;
        cl.ios_issued += 1;
        cl.bytes_issued[di] += io.len;
        let op = match io.ddir {
            Ddir::Read => HostOp::Read,
            Ddir::Write => HostOp::Write,
            Ddir::Trim => HostOp::Deallocate,
        };
        (timing.pract, timing.prchk) = (cl.pract, cl.prchk);
        Ok(timing.submit(ctrl, now, HostCmd { op, nsid: cl.nsid, slba, nlb })?)
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
        // latency_target: fio's queue_full compares with latency_qd.
        if cl.inflight >= cl.depth_limit() {
            return Ok(Gate::Wait);
        }
        if cl.think.due {
            // fio (backend.c handle_thinktime) quiesces first: the stall starts when the
            // last I/O in flight completes, not when the last one was issued.
            if cl.inflight > 0 {
                return Ok(Gate::Wait);
            }
            let until = now.saturating_add(cl.gen.spec.thinktime_ns);
            cl.think.due = false;
            cl.think.until = until;
            self.push(until, Ev::Wake(c as u32));
            // If no clone has I/O in flight, the drive is idle until the next event.
            self.maybe_idle(now)?;
            return Ok(Gate::Wait);
        }
        if cl.think.until > now {
            return Ok(Gate::Wait);
        }
        if cl.number_ios_left(now) == Some(0) {
            cl.stopping = true;
            return Ok(Gate::Again);
        }
        // Next I/O (kept if a rate limit makes us wait for it).
        if cl.pending.is_empty() {
            match cl.next_io()? {
                Some(io) => cl.pending.push_back(io),
                None => {
                    // read_iolog: the trace's lines after its last I/O (a close, a sync, a
                    // wait) hold the job until their time, as fio waits them before it ends
                    // (iolog.c ipo_special, read_iolog_get): the drive idles meanwhile. fio
                    // sleeps through `runtime` there (iolog_delay stops only at terminate),
                    // as it does before a held I/O.
                    if let Some(at) = cl.replay.as_mut().and_then(|r| r.hold_until(now)) {
                        return self.hold_replay(c, at, now);
                    }
                    cl.stopping = true;
                    return Ok(Gate::Again);
                }
            }
        }
        if cl.flow.group.is_some() && !cl.flow.passed && self.flow_held(c, now)? {
            return Ok(Gate::Wait);
        }
        let cl = &mut self.clones[c];
        let io = cl.pending.front();
        // read_iolog: the trace's timestamps pace the issue (engine/iolog.rs).
        if let Some(at) = cl.replay.as_mut().and_then(|r| r.hold_until(now)) {
            return self.hold_replay(c, at, now);
        }
        // serialize_overlap: fio requeues an I/O that overlaps one in flight and retries it
        // after reaping a completion; nothing is issued ahead of it. Checked before the rate
        // limit, which counts an I/O once it admits it.
        if cl.gen.spec.serialize_overlap && cl.overlaps_in_flight(io) {
            return Ok(Gate::Wait);
        }
        if let Some(at) = cl.rate_admit(io, now) {
            // The front I/O waits until `at`, the same time for every look until it is issued
            // (its direction's next slot does not move while it waits), and an I/O issued
            // after that wake-up fired waits for a later one: one wake-up per wait suffices.
            if cl.rate.wake_ns != at {
                cl.rate.wake_ns = at;
                self.push(at, Ev::Wake(c as u32));
            }
            return Ok(Gate::Wait);
        }
        let cl = &mut self.clones[c];
        if let Some(r) = &mut cl.replay {
            r.issued(now);
        }
        cl.pending.pop_front();
        cl.flow.passed = false;
        Ok(Gate::Issue(io))
    }

    /// Clone `c` held by its trace (read_iolog) until `at`: a wake-up then, and the drive
    /// idle meanwhile. One wake-up per wait, as for the rate limit: every completion looks
    /// at the gate, and a wake-up pushed per look would multiply with each held I/O (the
    /// run's memory and time grew with the square of a paced trace's length). A trace's idle
    /// gap is idle time for the drive too (background GC).
    fn hold_replay(&mut self, c: usize, at: u64, now: u64) -> Result<Gate, RunError> {
        let cl = &mut self.clones[c];
        if cl.rate.wake_ns != at {
            cl.rate.wake_ns = at;
            self.push(at, Ev::Wake(c as u32));
        }
        self.maybe_idle(now)?;
        Ok(Gate::Wait)
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
            cl.stats.depth_levels[depth_slot(cl.inflight + 1)] += 1;
            cl.submitted_after_ramp(di);
        } else {
            cl.ramp.depth_levels[depth_slot(cl.inflight + 1)] += 1;
        }
        cl.inflight += 1;
        cl.ios_issued += 1;
        cl.bytes_issued[di] += io.len;
        if cl.logging {
            let rows = cl.logs.rows();
            self.log_rows += rows - cl.log_rows_counted;
            cl.log_rows_counted = rows;
            if self.log_rows > MAX_LOG_ROWS {
                let reason = format!(
                    "write_bw_log/write_iops_log/write_lat_log/write_hist_log: the run's logs passed {MAX_LOG_ROWS} rows (kept in memory until the run ends; log_avg_msec=0 writes a row per I/O: set log_avg_msec to average them, or log a shorter run)"
                );
                return Err(JobError { job: cl.gen.spec.name.clone(), thread: cl.gen.spec.thread_number, reason }.into());
            }
        }
        if let Some(log) = &mut cl.iolog {
            let spec = &cl.gen.spec;
            log.record(now, io).map_err(|reason| JobError { job: spec.name.clone(), thread: spec.thread_number, reason })?;
        }
        if self.stack.is_some() {
            return self.issue_stack(c, now, io);
        }
        if self.arb.is_some() {
            // Weighted round robin: into the clone's submission queue; the controller fetches it.
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
        let at = done.max(now.saturating_add(1));
        if self.clones[c].plain {
            // Its completion takes `Runner::done_plain`: the I/O in the event, no slot.
            let ev = Ev::Done { clone: c as u32, slot: Ev::plain_io(di as u8, io.len) };
            self.events.push_with(at, ev.pack(), now);
            return Ok(());
        }
        let si = self.clones[c].take_slot(Slot { ddir: di as u8, len: io.len, offset: io.offset, issued: now });
        self.push(at, Ev::Done { clone: c as u32, slot: si });
        Ok(())
    }

    /// Weighted round robin: queue a fetch at the controller's next command slot, if none is queued.
    fn schedule_fetch(&mut self, now: u64) {
        let arb = self.arb.as_mut().expect("arbitration in use");
        if !arb.scheduled && !arb.is_empty() {
            arb.scheduled = true;
            let at = now.max(arb.next_fetch_ps.div_ceil(1000));
            self.push(at, Ev::Fetch);
        }
    }

    /// Weighted round robin: the controller fetches the command the arbiter picks and runs it.
    pub(super) fn fetch(&mut self) -> Result<(), RunError> {
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
        // A command of a QoS-capped namespace is held in the controller from here: it
        // runs now and its completion waits for its tokens (DeviceTiming::qos_hold).
        let done = self.timing.submit(self.ctrl, now, HostCmd { op, nsid, slba, nlb })?;
        self.push(done.max(now.saturating_add(1)), Ev::Done { clone: c as u32, slot: q.slot });
        self.schedule_fetch(now);
        Ok(())
    }

    /// After issuing an I/O: draw ahead and prefetch, then fio's think-time check. True when
    /// the clone must stop issuing (think time is due).
    fn after_issue(&mut self, c: usize, now: u64) -> Result<bool, RunError> {
        let cl = &mut self.clones[c];
        // Draw the clone's next I/Os now and prefetch the mappings they look up on
        // arrival: by the time they are issued the DRAM misses are over.
        while cl.pending.len() < LOOKAHEAD && !cl.stopping && now < cl.stop_at {
            match cl.next_io()? {
                Some(n) => {
                    cl.prefetch_drawn(self.ctrl, n);
                    cl.pending.push_back(n);
                }
                None => break,
            }
        }
        // fio's handle_thinktime runs after every read, write or trim it issues (do_io
        // tests ddir_rw, which includes DDIR_TRIM), and, if that issue filled the queue,
        // after reaping the next completion.
        if cl.gen.spec.thinktime_ns > 0 {
            if cl.inflight >= cl.depth_limit() && cl.gen.spec.thinktime_blocks_type == ThinktimeBlocksType::Complete {
                cl.think.check_on_completion = true;
            } else {
                cl.think_check();
            }
        }
        Ok(cl.think.due)
    }

    /// When nothing is outstanding anywhere, let background GC use the gap before the next
    /// event (between batches, during think time or start delays).
    pub(super) fn maybe_idle(&mut self, now: u64) -> Result<(), RunError> {
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
