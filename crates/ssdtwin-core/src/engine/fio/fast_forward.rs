//! Fast-forward: a run's I/Os through the controller and the FTL without timing (the
//! [`NoTiming`] sink, as preconditioning uses), so the drive ends in the state those I/Os
//! leave, at the FTL's speed rather than the timed engine's.
//!
//! Each clone issues its own stream (the generator's offsets, in its order); the clones'
//! streams are interleaved by a virtual clock: clone `c`'s k-th I/O sits at `k / rate_c`,
//! and the earliest goes first (ties: the lower clone). With equal rates that is one I/O
//! per clone in turn. The user: the converging timed run (`converge.rs`), which carries the
//! I/Os of a round between its timed samples this way.

use super::clone::{JobClone, LOOKAHEAD};
use super::RunError;
use crate::nand::NoTiming;
use crate::nvme::Controller;
use crate::workload::{Ddir, Io, JobSpec};

/// How a fast-forwarded read is carried out.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum ReadMode {
    /// Through the FTL (its look-up and counters), as a timed read.
    Exact,
    /// Counted in bulk (SMART and the FTL's read counters, as NAND reads), not looked up:
    /// a read changes no mapping, so a clone that only reads need not draw its I/Os.
    Counted,
}

/// One clone's share of a fast-forward step: how many I/Os (at most; the clone may end
/// first) and its rate as (I/Os, ns), which places its I/Os on the virtual clock.
#[derive(Copy, Clone, Debug)]
pub(super) struct Quota {
    pub ios: u64,
    pub rate: (u64, u64),
}

/// The clones and the controller, borrowed for untimed issuing by the timed runner between
/// its samples (no timing state is needed).
pub(super) struct Untimed<'r> {
    pub ctrl: &'r mut Controller,
    pub clones: &'r mut [JobClone],
    /// The virtual time passed to `keep_going`.
    pub now: u64,
}

impl Untimed<'_> {
    /// The clone's next I/O in its own order: the drawn-ahead ones first; the ring is kept
    /// full and the new one's mapping prefetched if it looks it up, as the timed runner does.
    fn next(&mut self, c: usize) -> Result<Option<Io>, RunError> {
        let cl = &mut self.clones[c];
        if cl.number_ios_left(self.now) == Some(0) {
            return Ok(None);
        }
        let io = if cl.pending.is_empty() {
            cl.next_io()?
        } else {
            let io = cl.pending.front();
            cl.pending.pop_front();
            Some(io)
        };
        while cl.pending.len() < LOOKAHEAD {
            match cl.next_io()? {
                Some(n) => {
                    cl.prefetch_drawn(self.ctrl, n);
                    cl.pending.push_back(n);
                }
                None => break,
            }
        }
        Ok(io)
    }

    /// Carry out one I/O of clone `c` untimed: the controller's command with the
    /// [`NoTiming`] sink, and a protected read's checks as a timed read makes them.
    fn issue(&mut self, c: usize, io: Io, reads: ReadMode) -> Result<(), RunError> {
        let cl = &mut self.clones[c];
        cl.ios_issued += 1;
        cl.bytes_issued[io.ddir.index()] += io.len;
        cl.carried.ff.add(io.ddir, io.len);
        let (nsid, slba, nlb, prchk) = (cl.nsid, cl.lbas(io.offset), cl.lbas(io.len), cl.prchk);
        match io.ddir {
            Ddir::Write => self.ctrl.write(nsid, slba, nlb, &mut NoTiming)?,
            Ddir::Trim => {
                self.ctrl.deallocate(nsid, slba, nlb)?;
            }
            Ddir::Read if reads == ReadMode::Counted => self.ctrl.count_reads(nsid, 1, nlb)?,
            Ddir::Read => {
                self.ctrl.read(nsid, slba, nlb, &mut NoTiming)?;
                if prchk != 0 && self.ctrl.attached(nsid)?.protection.pi != 0 {
                    self.ctrl.check_pi(nsid, slba, nlb, prchk)?;
                }
            }
        }
        Ok(())
    }

    /// Issue up to `quotas[c].ios` I/Os of each clone untimed, interleaved on the virtual
    /// clock (see the module). Clones marked in `counted_only` are tallied without drawing
    /// their I/Os (they only read; `bytes_per_io[c]` each). `stop_at_gc_copies` ends the
    /// step once the FTL has copied more IUs for GC than that (GC starting to relocate data:
    /// the rates the step was given no longer hold). Returns the bytes written and the share of the
    /// quotas issued (1 unless stopped).
    pub(super) fn step(
        &mut self,
        quotas: &[Option<Quota>],
        counted_only: &[bool],
        bytes_per_io: &[u64],
        reads: ReadMode,
        stop_at_gc_copies: Option<u64>,
        keep_going: &mut dyn FnMut(u64) -> bool,
    ) -> Result<(u64, f64), RunError> {
        let n = self.clones.len();
        let mut issued = vec![0u64; n];
        let mut live: Vec<usize> = Vec::with_capacity(n);
        for c in 0..n {
            if quotas[c].is_some_and(|q| !counted_only[c] && q.ios > 0) {
                live.push(c);
            }
        }
        let drawn: Vec<usize> = live.clone();
        let mut stopped = false;
        let (mut written, mut steps) = (0u64, 0u64);
        while !live.is_empty() {
            // The earliest next I/O on the virtual clock: (k+1)·ns/ios, compared exactly.
            let mut best = 0;
            for i in 1..live.len() {
                let (qa, qb) = (quotas[live[i]].expect("live"), quotas[live[best]].expect("live"));
                let ta = (issued[live[i]] as u128 + 1) * qa.rate.1 as u128 * qb.rate.0 as u128;
                let tb = (issued[live[best]] as u128 + 1) * qb.rate.1 as u128 * qa.rate.0 as u128;
                if ta < tb {
                    best = i;
                }
            }
            let c = live[best];
            match self.next(c)? {
                Some(io) => {
                    self.issue(c, io, reads)?;
                    if io.ddir == Ddir::Write {
                        written += io.len;
                    }
                    issued[c] += 1;
                    if issued[c] >= quotas[c].expect("live").ios {
                        live.remove(best);
                    }
                }
                None => {
                    self.clones[c].carried.ended = true;
                    live.remove(best);
                }
            }
            steps += 1;
            if steps % 65_536 == 0 && !keep_going(self.now) {
                return Err(RunError::Interrupted(self.now));
            }
            if stop_at_gc_copies.is_some_and(|g| self.ctrl.ftl_counters().gc_programmed_ius > g) {
                stopped = true;
                break;
            }
        }
        let share = if stopped {
            let want: u64 = drawn.iter().map(|&c| quotas[c].expect("drawn").ios).sum();
            drawn.iter().map(|&c| issued[c]).sum::<u64>() as f64 / want.max(1) as f64
        } else {
            1.0
        };
        // Clones that only read are counted for the same share of their quota.
        for c in 0..n {
            if let Some(q) = quotas[c].filter(|_| counted_only[c]) {
                self.count_reads(c, (q.ios as f64 * share) as u64, bytes_per_io[c])?;
            }
        }
        Ok((written, share))
    }

    /// A reading clone's `ios` I/Os of `bytes_per_io` each, counted without drawing them.
    fn count_reads(&mut self, c: usize, ios: u64, bytes_per_io: u64) -> Result<(), RunError> {
        let cl = &mut self.clones[c];
        let ios = cl.number_ios_left(self.now).map_or(ios, |left| ios.min(left));
        if ios == 0 {
            return Ok(());
        }
        let bytes = ios * bytes_per_io;
        cl.ios_issued += ios;
        cl.bytes_issued[0] += bytes;
        cl.carried.ff.ios[0] += ios;
        cl.carried.ff.bytes[0] += bytes;
        let (nsid, nlb) = (cl.nsid, cl.lbas(bytes));
        self.ctrl.count_reads(nsid, ios, nlb)?;
        Ok(())
    }
}

/// Whether a clone of `spec` may write or trim (a `randrw` at `rwmixread=100` only reads).
pub(super) fn may_change_state(spec: &JobSpec) -> bool {
    let has = |d| spec.directions.contains(&d);
    has(Ddir::Trim) || (has(Ddir::Write) && !(has(Ddir::Read) && spec.rwmixread >= 100))
}
