//! The dispatcher of weighted round robin arbitration while serving (NVMe feature 01h),
//! only in use when the image's feature 01h selects WRR and replies are paced; with round
//! robin (the default) every command runs through the controller at its arrival.
//!
//! A command's data effect is applied at its arrival (the `Export` contract); its
//! controller command waits in its connection's submission queue (crate::arb) until the
//! controller fetches it, one per command slot (1 / `ctrl_max_iops`), the queue chosen by
//! the engine's arbiter among the commands that have *arrived by the fetch instant*
//! (virtual time). The fetched command runs through the timing model at its fetch time
//! and its deferred NBD reply (`Done::deferred`) is resolved with the completion time.
//!
//! Fetches are decided as soon as they can be: an arriving command first fetches every
//! command due before its own arrival, then joins its queue (and is fetched at once if
//! the controller is free); a dispatcher thread fetches the rest when virtual time
//! reaches them; the housekeeping tick catches up before idle GC. A FLUSH or FUA write
//! (and close, and the debug fingerprint) fetches every queued command first, so what it
//! makes durable includes their journal records: a flush is an ordering barrier.

use std::sync::{Arc, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use ssdtwin_nbd::{Done, Errno, Resolver};

use super::Inner;
use crate::command::Io;
use crate::state::State;

/// Longest dispatcher sleep (it re-checks shutdown), and the shortest while commands wait.
const MAX_SLEEP: Duration = Duration::from_millis(50);

const MIN_SLEEP: Duration = Duration::from_micros(20);

/// A fetched command's outcome, to hand to its resolver outside the lock.
pub(super) struct Fetched {
    slot: u32,
    resolver: Option<Resolver>,
    result: Result<u64, Errno>,
}

impl Inner {
    /// A command's arrival under WRR (the lock held, pace model): fetch what is due before
    /// it, queue it, fetch it at once if the controller is free; else a deferred reply.
    pub(super) fn arb_exec(&self, mut g: MutexGuard<'_, Option<State>>, nsid: u32, ops: &[(Io, u64, u64)]) -> Result<Done, Errno> {
        let st = g.as_mut().ok_or(Errno::Shutdown)?;
        let now_v = self.now_v().max(st.last_v);
        st.last_v = now_v;
        let mut out = Vec::new();
        // Only commands that arrived before `now_v` compete for the fetches before it.
        self.arb_fetch(st, now_v, false, &mut out)?;
        let arb = st.arb.as_mut().expect("arbitration in use");
        if arb.is_empty() {
            st.idle(now_v, &self.cfg).map_err(|e| self.fail(e))?;
        }
        let arb = st.arb.as_mut().expect("arbitration in use");
        let was_waiting = arb.fetch_at.is_some();
        let slot = arb.enqueue(nsid, ops, now_v);
        // Slots are reused: only what this second round fetched can be the new command.
        let mark = out.len();
        self.arb_fetch(st, now_v, true, &mut out)?;
        let own = out[mark..].iter().position(|f| f.slot == slot).map(|i| out.swap_remove(mark + i));
        let done = match own {
            Some(f) => f.result.map(|done_v| self.done_at(done_v)),
            None => {
                let arb = st.arb.as_mut().expect("arbitration in use");
                let (done, r) = Done::deferred();
                arb.defer(slot, r);
                if !was_waiting {
                    self.arb_cv.notify_one();
                }
                Ok(done)
            }
        };
        drop(g);
        self.resolve(out);
        done
    }

    /// Fetch and run every queued command whose fetch instant is before `limit_v` (or at
    /// it, with `inclusive`); `u64::MAX` drains the queues.
    pub(super) fn arb_fetch(&self, st: &mut State, limit_v: u64, inclusive: bool, out: &mut Vec<Fetched>) -> Result<(), Errno> {
        while let Some((f, slot, p)) = st.arb.as_mut().and_then(|arb| arb.fetch_due(limit_v, inclusive)) {
            st.last_v = st.last_v.max(f);
            let result = self.timed(st, p.nsid, &p.ops, f);
            if let Ok(done_v) = result {
                self.account(st, p.ops.first().map(|o| o.0), p.arrival_v, done_v);
            }
            out.push(Fetched { slot, resolver: p.resolver, result });
        }
        Ok(())
    }

    /// Hand fetched commands' outcomes to their connections (outside the lock).
    pub(super) fn resolve(&self, out: Vec<Fetched>) {
        for f in out {
            if let Some(r) = f.resolver {
                match f.result {
                    Ok(done_v) => r.at(self.start + Duration::from_nanos(done_v)),
                    Err(e) => {
                        self.counters.errors.inc();
                        r.fail(e)
                    }
                }
            }
        }
    }

    /// Fetch everything queued (a flush, close, the fingerprint): returns the outcomes.
    pub(super) fn arb_drain(&self, st: &mut State) -> Result<Vec<Fetched>, Errno> {
        let mut out = Vec::new();
        self.arb_fetch(st, u64::MAX, true, &mut out)?;
        Ok(out)
    }
}

/// The dispatcher thread: fetches queued commands as virtual time reaches them. It holds
/// the backend weakly and ends when the backend is closed or dropped.
pub(super) fn start_dispatcher(inner: &Arc<Inner>) -> std::io::Result<JoinHandle<()>> {
    let weak: Weak<Inner> = Arc::downgrade(inner);
    std::thread::Builder::new().name("ssdtwin-arbiter".into()).spawn(move || {
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong);
        }
        let mut last_now = u64::MAX;
        while let Some(inner) = weak.upgrade() {
            let mut g = inner.lock();
            let Some(st) = g.as_mut() else { return };
            let now_v = inner.now_v();
            let mut out = Vec::new();
            // A failure is sticky in the backend (writes fail); the command's reply carries it.
            let _ = inner.arb_fetch(st, now_v, false, &mut out);
            let next = st.arb.as_ref().and_then(|a| a.fetch_at);
            // A clock that does not move (the simulation harness) gets no busy loop.
            let sleep = match next {
                Some(f) if now_v != last_now => Duration::from_nanos(f.saturating_sub(now_v)).clamp(MIN_SLEEP, MAX_SLEEP),
                _ => MAX_SLEEP,
            };
            last_now = now_v;
            if out.is_empty() {
                let _ = inner.arb_cv.wait_timeout(g, sleep).unwrap_or_else(|e| e.into_inner());
            } else {
                drop(g);
                inner.resolve(out);
            }
        }
    })
}
