//! Submission-queue arbitration at the controller's command fetch (NVMe 1.4
//! §4.13): weighted round robin with an urgent class. Only in use when feature 01h selects
//! WRR; with round robin (the default) the engine keeps its arrival-order command slot.
//!
//! Each fio clone is one submission queue of its namespace's priority class. Commands wait
//! in their queue until the controller fetches them, one per command slot
//! (`ctrl_max_iops`); at each fetch the arbiter picks: any urgent queue first (round robin
//! among them), else a class by smooth weighted round robin over the high, medium and low
//! classes with commands waiting, then a queue of that class round robin, taking up to the
//! arbitration burst from one queue before moving on.
//!
//! `ssdtwin serve` uses the same arbiter (public for it): there each NBD connection is a
//! queue, added as connections come ([`Arbiter::add_queue`]). The arbiter only chooses;
//! running the fetched command through the controller stays with its caller.

use std::collections::VecDeque;

use crate::nvme::Arbitration;

/// A command waiting in its submission queue: the clone's slot it completes into (the
/// caller's handle on the command).
#[derive(Copy, Clone, Debug)]
pub struct Queued {
    pub slot: u32,
}

/// Chooses which submission queue the controller fetches from next (module docs).
pub struct Arbiter {
    /// Per clone (= queue): its class (0 urgent .. 3 low) and waiting commands.
    class: Vec<u8>,
    queues: Vec<VecDeque<Queued>>,
    weights: [i64; 3],
    /// Smooth WRR state of the high, medium and low classes.
    current: [i64; 3],
    /// Round-robin position per class (0..4): the last queue served.
    last: [usize; 4],
    burst: u32,
    /// Commands taken from `last[class]` in a row (up to the burst).
    taken: u32,
    /// Time (ps) the controller can fetch the next command, and ps per fetch.
    pub(crate) next_fetch_ps: u64,
    pub(crate) fetch_ps: u64,
    /// A fetch event is queued.
    pub(crate) scheduled: bool,
    waiting: usize,
}

impl Arbiter {
    /// Queues of `class` (0 urgent, 1 high, 2 medium, 3 low) under `arb`; the controller
    /// fetches one command per `fetch_ps` picoseconds.
    pub fn new(arb: Arbitration, class: Vec<u8>, fetch_ps: u64) -> Arbiter {
        let w = arb.weights.unwrap_or([1, 1, 1]);
        let n = class.len();
        Arbiter {
            class,
            queues: vec![VecDeque::new(); n],
            weights: [w[0] as i64, w[1] as i64, w[2] as i64],
            current: [0; 3],
            last: [usize::MAX; 4],
            burst: arb.burst.unwrap_or(u32::MAX),
            taken: 0,
            next_fetch_ps: 0,
            fetch_ps,
            scheduled: false,
            waiting: 0,
        }
    }

    /// One more queue, of `class`; returns its index.
    pub fn add_queue(&mut self, class: u8) -> usize {
        self.class.push(class.min(3));
        self.queues.push(VecDeque::new());
        self.queues.len() - 1
    }

    /// The class of queue `queue`.
    pub fn class(&self, queue: usize) -> u8 {
        self.class[queue]
    }

    /// Whether queue `queue` has commands waiting.
    pub fn queue_is_empty(&self, queue: usize) -> bool {
        self.queues[queue].is_empty()
    }

    /// The earliest time (ns) the controller can fetch its next command.
    pub fn next_fetch_ns(&self) -> u64 {
        self.next_fetch_ps.div_ceil(1000)
    }

    /// A command was fetched at `at_ns`: the next fetch is one command slot later.
    pub fn fetched(&mut self, at_ns: u64) {
        self.next_fetch_ps = (at_ns * 1000).max(self.next_fetch_ps) + self.fetch_ps;
    }

    pub fn submit(&mut self, queue: usize, q: Queued) {
        self.queues[queue].push_back(q);
        self.waiting += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.waiting == 0
    }

    /// The next command to fetch: (queue, command).
    pub fn pick(&mut self) -> Option<(usize, Queued)> {
        if self.waiting == 0 {
            return None;
        }
        let waiting = |k: u8| (0..self.queues.len()).any(|i| self.class[i] == k && !self.queues[i].is_empty());
        let class = if waiting(0) {
            0
        } else {
            let active: Vec<usize> = (0..3).filter(|&k| waiting(k as u8 + 1)).collect();
            let total: i64 = active.iter().map(|&k| self.weights[k]).sum();
            for &k in &active {
                self.current[k] += self.weights[k];
            }
            let best = *active.iter().max_by_key(|&&k| (self.current[k], std::cmp::Reverse(k))).expect("a class waits");
            self.current[best] -= total;
            best + 1
        };
        let q = self.next_queue(class as u8);
        let cmd = self.queues[q].pop_front().expect("the queue waits");
        self.waiting -= 1;
        Some((q, cmd))
    }

    /// Round robin among the class's queues with commands, `burst` at a time.
    fn next_queue(&mut self, class: u8) -> usize {
        let n = self.queues.len();
        let c = class as usize;
        let cur = self.last[c];
        if cur < n && !self.queues[cur].is_empty() && self.taken < self.burst {
            self.taken += 1;
            return cur;
        }
        let start = if cur < n { cur + 1 } else { 0 };
        let q = (0..n).map(|k| (start + k) % n).find(|&i| self.class[i] == class && !self.queues[i].is_empty()).expect("the class waits");
        self.last[c] = q;
        self.taken = 1;
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrr(weights: [u32; 3], burst: Option<u32>, class: Vec<u8>) -> Arbiter {
        Arbiter::new(Arbitration { burst, weights: Some(weights) }, class, 1)
    }

    #[test]
    fn urgent_queues_go_first_then_classes_share_by_weight() {
        // Queues 0: urgent, 1: high, 2: low; weights high 3, low 1.
        let mut a = wrr([3, 1, 1], Some(1), vec![0, 1, 3]);
        for q in 0..3 {
            for s in 0..8 {
                a.submit(q, Queued { slot: s });
            }
        }
        let order: Vec<usize> = (0..24).map(|_| a.pick().unwrap().0).collect();
        assert_eq!(&order[..8], &[0; 8], "urgent first");
        let next8: Vec<usize> = order[8..16].to_vec();
        assert_eq!(next8.iter().filter(|&&q| q == 1).count(), 6, "high:low = 3:1 while both wait: {next8:?}");
        assert!(a.pick().is_none());
    }

    #[test]
    fn queues_of_one_class_share_round_robin_with_the_burst() {
        let mut a = wrr([1, 1, 1], Some(2), vec![2, 2]);
        for q in 0..2 {
            for s in 0..4 {
                a.submit(q, Queued { slot: s });
            }
        }
        let order: Vec<usize> = (0..8).map(|_| a.pick().unwrap().0).collect();
        assert_eq!(order, [0, 0, 1, 1, 0, 0, 1, 1]);
    }
}
