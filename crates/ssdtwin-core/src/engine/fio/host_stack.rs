//! The fio runner through a host stack (docs/host.md): a host I/O goes to the
//! write-shaping tier (host/tier.rs), which answers with fast-media bytes and drive
//! commands; destages run on lanes in the background; a write the tier has no room for
//! waits (its latency grows) until a destage frees space. Waiting writes are admitted in
//! arrival order: a write that arrives while others wait queues behind them, even one the
//! tier would take at once (a hit on a block it holds, an IU that bypasses it, a smaller
//! write), as SPDK FTL's submission queue keeps its order.

use super::clone::Slot;
use super::{Ev, RunError, Runner};
use crate::engine::events::Entry;
use crate::engine::stack::Stalled;
use crate::host::tier::{WriteOutcome, BLOCK_BYTES};
use crate::workload::{Ddir, Io, JobError};

impl Runner<'_> {
    pub(super) fn issue_stack(&mut self, c: usize, now: u64, io: Io) -> Result<(), RunError> {
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
                #[cfg(test)]
                tests::ARRIVED.with_borrow_mut(|a| a.push((s.clone, s.slot)));
                // Behind writes already waiting, in arrival order: offered to the tier first,
                // a later write would overtake them (and, on the same blocks, land before
                // the older data it replaces).
                let waiting = !self.stack.as_ref().expect("a stack").stalled.is_empty();
                if waiting || !self.stack_write(s, now)? {
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
                // The tier's map lives on the fast media (docs/host.md, "Crash semantics"):
                // a trim is a map update there, one write operation (its latency, behind the
                // media's queued transfers), besides the drive's deallocations.
                let map = st.media(now, 0, true);
                map.max(st.trim(self.timing, self.ctrl, now, &ranges)?)
            }
        };
        self.push(done.max(now.saturating_add(1)), Ev::Done { clone: c as u32, slot });
        self.stack_progress(now)
    }

    /// Offer a host write to the tier; true when accepted (its completion is queued).
    fn stack_write(&mut self, s: Stalled, now: u64) -> Result<bool, RunError> {
        let st = self.stack.as_mut().expect("a stack");
        let (tier_bytes, drive) = match st.tier.write(s.offset, s.len) {
            WriteOutcome::Full => return Ok(false),
            WriteOutcome::Accepted { tier_bytes, drive } => (tier_bytes, drive),
        };
        let mut t = if tier_bytes > 0 { st.media(now, tier_bytes, true) } else { now };
        t = t.max(st.drive(self.timing, self.ctrl, now, &drive)?);
        self.push(t.max(now.saturating_add(1)), Ev::Done { clone: s.clone, slot: s.slot });
        #[cfg(test)]
        tests::ADMITTED.with_borrow_mut(|a| a.push((s.clone, s.slot)));
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

    pub(super) fn lane_done(&mut self, lane: u32) -> Result<(), RunError> {
        let now = self.now;
        let st = self.stack.as_mut().expect("a lane event comes from a stack");
        if let Some(done) = st.lane_step_done(self.timing, self.ctrl, lane, now)? {
            self.push(done.max(now.saturating_add(1)), Ev::Lane(lane));
        }
        self.stack_progress(now)
    }

    /// After the last clone: destages already started finish (their later steps reach the
    /// drive); what the tier still holds stays in it, saved with the stack.
    pub(super) fn drain_stack(&mut self) -> Result<(), RunError> {
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

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::RefCell;

    thread_local! {
        /// Host writes of the stack runs on this thread as they arrive and as the tier
        /// admits them, each as (clone, slot): a slot is not reused before its write
        /// completes, so the n-th admission of a pair is its n-th arrival.
        pub(crate) static ARRIVED: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
        pub(crate) static ADMITTED: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
    }

    /// The arrival index of each admitted write, in admission order (drained).
    pub(crate) fn admission_order() -> Vec<usize> {
        let arrived = ARRIVED.take();
        let admitted = ADMITTED.take();
        let mut used = vec![false; arrived.len()];
        admitted
            .iter()
            .map(|w| {
                let i = (0..arrived.len()).find(|&i| !used[i] && arrived[i] == *w).expect("admitted after it arrived");
                used[i] = true;
                i
            })
            .collect()
    }
}
