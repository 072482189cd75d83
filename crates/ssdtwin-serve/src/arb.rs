//! The submission queues of weighted round robin arbitration while serving (NVMe feature
//! 01h): one queue per NBD connection, of its namespace's priority class (`ssdtwin nvme qos
//! --sq-priority`), the commands waiting in them, and the engine's [`Arbiter`] that picks
//! which is fetched next and when. A pure queue: it runs nothing; the dispatcher
//! (backend/dispatch.rs) takes what is due and runs it through the controller.

use std::collections::HashMap;
use std::thread::ThreadId;

use ssdtwin_core::engine::arbiter::{Arbiter, Queued};
use ssdtwin_core::nvme::Arbitration;
use ssdtwin_nbd::Resolver;

use crate::command::Io;

/// A command waiting in a connection's queue.
pub(crate) struct Pending {
    pub(crate) nsid: u32,
    pub(crate) ops: Vec<(Io, u64, u64)>,
    pub(crate) arrival_v: u64,
    /// Set once its arrival call has returned a deferred reply.
    pub(crate) resolver: Option<Resolver>,
}

/// The arbitration state (under the backend's lock, in `State`).
pub(crate) struct ArbState {
    arb: Arbiter,
    /// Priority class of each served namespace.
    class: HashMap<u32, u8>,
    /// Each connection's queue, by its reader thread (one thread per connection).
    conns: HashMap<ThreadId, usize>,
    /// Queues of closed connections, for reuse by a new one of the same class.
    free_queues: Vec<usize>,
    slots: Vec<Option<Pending>>,
    free_slots: Vec<u32>,
    /// Virtual time of the next fetch while commands wait.
    pub(crate) fetch_at: Option<u64>,
}

impl ArbState {
    /// The arbitration state if feature 01h selects weighted round robin.
    pub(crate) fn new(arbitration: Arbitration, class: HashMap<u32, u8>, fetch_ps: u64) -> Option<ArbState> {
        arbitration.weights?;
        Some(ArbState {
            arb: Arbiter::new(arbitration, Vec::new(), fetch_ps),
            class,
            conns: HashMap::new(),
            free_queues: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            fetch_at: None,
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.arb.is_empty()
    }

    /// The calling connection's queue (created on its first command).
    fn queue(&mut self, nsid: u32) -> usize {
        let class = self.class.get(&nsid).copied().unwrap_or(ssdtwin_core::nvme::SQ_PRIORITY_DEFAULT);
        let id = std::thread::current().id();
        if let Some(&q) = self.conns.get(&id) {
            return q;
        }
        let q = match self.free_queues.iter().position(|&q| self.arb.class(q) == class) {
            Some(i) => self.free_queues.swap_remove(i),
            None => self.arb.add_queue(class),
        };
        self.conns.insert(id, q);
        q
    }

    /// The calling connection has ended: its queue may serve a later connection (commands
    /// still in it are fetched first, in order).
    pub(crate) fn connection_closed(&mut self) {
        if let Some(q) = self.conns.remove(&std::thread::current().id()) {
            self.free_queues.push(q);
        }
    }

    /// Queue a command of `ops` on `nsid` arriving at `arrival_v` in the calling connection's
    /// queue; its slot number.
    pub(crate) fn enqueue(&mut self, nsid: u32, ops: &[(Io, u64, u64)], arrival_v: u64) -> u32 {
        let q = self.queue(nsid);
        let p = Pending { nsid, ops: ops.to_vec(), arrival_v, resolver: None };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(p);
                s
            }
            None => {
                self.slots.push(Some(p));
                (self.slots.len() - 1) as u32
            }
        };
        self.arb.submit(q, Queued { slot });
        if self.fetch_at.is_none() {
            self.fetch_at = Some(arrival_v.max(self.arb.next_fetch_ns()));
        }
        slot
    }

    /// The reply of the command in `slot` is deferred: resolve it through `r` once fetched.
    pub(crate) fn defer(&mut self, slot: u32, r: Resolver) {
        self.slots[slot as usize].as_mut().expect("queued").resolver = Some(r);
    }

    /// The next command the controller fetches, if its fetch instant is before `limit_v`
    /// (or at it, with `inclusive`): (fetch instant, slot, command), taken off its queue.
    pub(crate) fn fetch_due(&mut self, limit_v: u64, inclusive: bool) -> Option<(u64, u32, Pending)> {
        let f = self.fetch_at.filter(|&f| f < limit_v || (inclusive && f == limit_v))?;
        let (_, q) = self.arb.pick().expect("commands wait");
        self.arb.fetched(f);
        self.fetch_at = (!self.arb.is_empty()).then(|| self.arb.next_fetch_ns().max(f));
        let p = self.slots[q.slot as usize].take().expect("queued command");
        self.free_slots.push(q.slot);
        Some((f, q.slot, p))
    }
}
