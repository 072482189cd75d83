//! The server-wide budget of request and reply bytes in flight.
//!
//! Every READ reply buffer, every WRITE payload larger than the connection's input
//! buffer and every block-status reply is charged here before it is allocated (block
//! status: once encoded) and released when it has been sent or applied. A connection
//! that cannot get its charge waits, and while it waits it does not read its socket:
//! a client that does not read its replies soon stops getting requests processed
//! instead of making the server buffer for it.
//!
//! Rules:
//! - the total stays within `limit`, except that one request larger than the whole
//!   budget is admitted when nothing else is charged (so it still works, alone);
//! - one connection holds at most `per_connection` (a quarter of the budget by
//!   default), except that a connection holding nothing may always take one request
//!   as above: a few clients that stop reading cannot pin the whole budget;
//! - waiters are served first come, first served, so a large request is not starved
//!   by a stream of small ones. A waiter blocked by its own connection's share does
//!   not hold up the queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::stats::Stats;

/// How long a waiter sleeps between checks of its stop condition.
const WAIT_SLICE: Duration = Duration::from_millis(50);

pub(crate) struct Budget {
    limit: usize,
    per_connection: usize,
    used: AtomicUsize,
    /// Callers in the slow path; releases notify only when this is nonzero.
    waiters: AtomicUsize,
    queue: Mutex<VecDeque<u64>>,
    next_ticket: AtomicU64,
    cv: Condvar,
    stats: Arc<Stats>,
}

impl Budget {
    pub fn new(limit: usize, per_connection: usize, stats: Arc<Stats>) -> Arc<Budget> {
        Arc::new(Budget {
            limit: limit.max(1),
            per_connection: per_connection.max(1),
            used: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            queue: Mutex::new(VecDeque::new()),
            next_ticket: AtomicU64::new(0),
            cv: Condvar::new(),
            stats,
        })
    }

    /// Bytes charged right now.
    pub fn used(&self) -> usize {
        self.used.load(Relaxed)
    }

    fn try_take(&self, n: usize) -> bool {
        let mut u = self.used.load(SeqCst);
        loop {
            if u != 0 && u.saturating_add(n) > self.limit {
                return false;
            }
            match self.used.compare_exchange_weak(u, u + n, SeqCst, SeqCst) {
                Ok(_) => {
                    // Read first: the shared maximum is rarely raised, so most
                    // charges do not write its cache line.
                    let now = (u + n) as u64;
                    if now > self.stats.inflight_bytes_max.load(Relaxed) {
                        self.stats.inflight_bytes_max.fetch_max(now, Relaxed);
                    }
                    return true;
                }
                Err(now) => u = now,
            }
        }
    }

    fn release(&self, n: usize) {
        self.used.fetch_sub(n, SeqCst);
        if self.waiters.load(SeqCst) > 0 {
            let _q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }
}

/// One connection's account with the budget.
pub(crate) struct ConnBudget {
    inner: Arc<ConnInner>,
}

/// Shared by a connection's charges, so taking and dropping one touches this
/// connection's reference count, not one all connections share.
struct ConnInner {
    budget: Arc<Budget>,
    used: AtomicUsize,
}

/// Bytes charged to the budget; released when dropped (sent, applied or abandoned).
pub(crate) struct Charge {
    conn: Arc<ConnInner>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.conn.used.fetch_sub(self.bytes, SeqCst);
        self.conn.budget.release(self.bytes);
    }
}

impl ConnBudget {
    pub fn new(budget: Arc<Budget>) -> ConnBudget {
        ConnBudget { inner: Arc::new(ConnInner { budget, used: AtomicUsize::new(0) }) }
    }

    fn conn_fits(&self, n: usize) -> bool {
        let c = self.inner.used.load(SeqCst);
        c == 0 || c.saturating_add(n) <= self.inner.budget.per_connection
    }

    fn charge(&self, n: usize) -> Charge {
        self.inner.used.fetch_add(n, SeqCst);
        Charge { conn: self.inner.clone(), bytes: n }
    }

    /// Take `n` bytes without waiting, if the budget allows it now.
    pub fn try_acquire(&self, n: usize) -> Option<Charge> {
        let b = &*self.inner.budget;
        if b.waiters.load(SeqCst) == 0 && self.conn_fits(n) && b.try_take(n) {
            return Some(self.charge(n));
        }
        None
    }

    /// Take `n` bytes, waiting for room; `None` if `stop` says to give up.
    pub fn acquire(&self, n: usize, stop: &dyn Fn() -> bool) -> Option<Charge> {
        if let Some(c) = self.try_acquire(n) {
            return Some(c);
        }
        let b = &*self.inner.budget;
        b.stats.budget_waits.fetch_add(1, Relaxed);
        let ticket = b.next_ticket.fetch_add(1, Relaxed);
        let mut q = b.queue.lock().unwrap_or_else(|e| e.into_inner());
        b.waiters.fetch_add(1, SeqCst);
        let mut queued = false;
        let got = loop {
            // This connection's share only shrinks while we wait, so once queued we
            // stay eligible; until then we do not block the queue.
            if !queued && self.conn_fits(n) {
                q.push_back(ticket);
                queued = true;
            }
            if queued && q.front() == Some(&ticket) && b.try_take(n) {
                q.pop_front();
                break true;
            }
            if stop() {
                if queued {
                    q.retain(|&t| t != ticket);
                }
                break false;
            }
            q = b.cv.wait_timeout(q, WAIT_SLICE).unwrap_or_else(|e| e.into_inner()).0;
        };
        b.waiters.fetch_sub(1, SeqCst);
        // The next in line may fit now (or the head changed).
        b.cv.notify_all();
        drop(q);
        got.then(|| self.charge(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn budget(limit: usize, per: usize) -> Arc<Budget> {
        Budget::new(limit, per, Arc::new(Stats::default()))
    }

    #[test]
    fn charges_are_released_on_drop() {
        let b = budget(100, 100);
        let c = ConnBudget::new(b.clone());
        let a = c.try_acquire(60).unwrap();
        assert!(c.try_acquire(50).is_none(), "over the limit");
        let x = c.try_acquire(40).unwrap();
        assert_eq!(b.used(), 100);
        drop(a);
        drop(x);
        assert_eq!(b.used(), 0);
        assert_eq!(b.stats.inflight_bytes_max.load(Relaxed), 100);
    }

    #[test]
    fn a_request_larger_than_the_budget_runs_alone() {
        let b = budget(100, 100);
        let c = ConnBudget::new(b.clone());
        let big = c.try_acquire(500).expect("admitted when nothing is charged");
        assert!(c.try_acquire(1).is_none());
        let other = ConnBudget::new(b.clone());
        assert!(other.try_acquire(1).is_none());
        drop(big);
        assert!(other.try_acquire(1).is_some());
    }

    #[test]
    fn one_connection_cannot_take_everything() {
        let b = budget(100, 30);
        let slow = ConnBudget::new(b.clone());
        let _held = slow.try_acquire(30).unwrap();
        assert!(slow.try_acquire(1).is_none(), "its share is used up");
        // Others still get the rest.
        let other = ConnBudget::new(b.clone());
        assert!(other.try_acquire(30).is_some());
        // A connection at its share waits without blocking the queue for others.
        let stop = || false;
        let t = std::thread::spawn({
            let b = b.clone();
            move || {
                let c = ConnBudget::new(b);
                c.acquire(20, &stop).map(|_| ())
            }
        });
        assert!(t.join().unwrap().is_some());
    }

    #[test]
    fn waiters_wake_on_release_and_honour_stop() {
        let b = budget(100, 100);
        let c = ConnBudget::new(b.clone());
        let held = c.try_acquire(100).unwrap();
        let b2 = b.clone();
        let t0 = Instant::now();
        let waiter = std::thread::spawn(move || {
            let c = ConnBudget::new(b2);
            let got = c.acquire(10, &|| false);
            (got.is_some(), t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(held);
        let (got, waited) = waiter.join().unwrap();
        assert!(got && waited >= Duration::from_millis(100));
        assert_eq!(b.stats.budget_waits.load(Relaxed), 1);

        let _full = c.try_acquire(100).unwrap();
        let c2 = ConnBudget::new(b.clone());
        let t1 = Instant::now();
        assert!(c2.acquire(10, &|| t1.elapsed() > Duration::from_millis(80)).is_none());
        assert_eq!(b.waiters.load(SeqCst), 0);
        assert!(b.queue.lock().unwrap().is_empty());
    }

    #[test]
    fn first_come_first_served() {
        let b = budget(100, 100);
        let c = ConnBudget::new(b.clone());
        let held = c.try_acquire(95).unwrap();
        // A big request queues first; a smaller one arriving later, which would fit
        // first if it were allowed to jump the queue, must not overtake it (80 and 30
        // do not fit together, so the second waits for the first to finish).
        let order = Arc::new(Mutex::new(Vec::new()));
        let spawn = |n: usize, tag: &'static str| {
            let (b, order) = (b.clone(), order.clone());
            std::thread::spawn(move || {
                let c = ConnBudget::new(b);
                let ch = c.acquire(n, &|| false).unwrap();
                order.lock().unwrap().push(tag);
                std::thread::sleep(Duration::from_millis(20));
                drop(ch);
            })
        };
        let big = spawn(80, "big");
        std::thread::sleep(Duration::from_millis(50));
        let small = spawn(30, "small");
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        big.join().unwrap();
        small.join().unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["big", "small"]);
    }
}
