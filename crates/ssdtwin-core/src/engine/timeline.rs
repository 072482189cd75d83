//! The timelines a timed command reserves: calendars of a shared transfer resource (a NAND
//! channel, a direction of the host link) and a die's queue of programs and erases, with
//! the shared slip GC reads add to it ([`super::DeviceTiming`] places operations on them).

/// Reservations on a shared transfer resource (a NAND channel, a direction of the host
/// link). Unlike a single "next free" time, a transfer whose data is ready early can use a
/// gap before transfers queued ahead of it, so out-of-order readiness does not serialise
/// behind whatever happened to be issued first.
#[derive(Clone, Debug, Default)]
pub(super) struct Calendar {
    /// Busy intervals [start, end), sorted and disjoint, from index `head` on (entries
    /// before `head` ended before the current command arrived and are dead).
    pub(super) busy: Vec<(u64, u64)>,
    pub(super) head: usize,
}

impl Calendar {
    /// Reserve `dur` at the earliest start ≥ `ready`; intervals ending by `now` are dropped
    /// (commands arrive in time order, so nothing can start before `now` again).
    pub(super) fn reserve(&mut self, now: u64, ready: u64, dur: u64) -> u64 {
        self.reserve_inline(now, ready, dur)
    }

    /// [`Calendar::reserve`] inlined at the call sites of the NAND reads, the most
    /// frequent (GC reads: 2.7 per random write at steady state): a call's register
    /// saves and restores were a sixth of a reservation's instructions. The other sites
    /// (host link, programs, controller stages) call the shared copy; inlining the link's
    /// too cost instructions.
    #[inline(always)]
    pub(super) fn reserve_inline(&mut self, now: u64, ready: u64, dur: u64) -> u64 {
        // Forget the intervals ended by `now`. Usually none has: then the first live one's
        // check is all, and the start-over and compaction checks are skipped (the
        // compaction's condition cannot have turned true without `head` moving).
        match self.busy.get(self.head) {
            Some(&(_, end)) if end > now => {}
            Some(_) => {
                self.head += 1;
                while self.head < self.busy.len() && self.busy[self.head].1 <= now {
                    self.head += 1;
                }
                if self.head == self.busy.len() {
                    // Everything reserved has ended. Start over, so that the last entry
                    // below is always live: extending a dead one (ended at `now`, `ready ==
                    // now`) would hide the transfer from every later search, which would
                    // then overlap it.
                    self.busy.clear();
                    self.head = 0;
                } else if self.head > 64 && self.head * 2 > self.busy.len() {
                    self.busy.drain(..self.head);
                    self.head = 0;
                }
            }
            None => {
                self.busy.clear();
                self.head = 0;
            }
        }
        // Fast path: the transfer goes after everything reserved (the common case).
        match self.busy.last_mut() {
            None => {
                self.busy.push((ready, ready + dur));
                return ready;
            }
            Some(last) if last.1 <= ready => {
                if last.1 == ready {
                    last.1 = ready + dur;
                } else {
                    self.busy.push((ready, ready + dur));
                }
                return ready;
            }
            _ => {}
        }
        let mut t = ready;
        // Start at the last interval beginning before `ready`.
        let mut i = self.head + Self::starts_before(&self.busy[self.head..], ready).saturating_sub(1);
        // Look for a gap among a few intervals only: under heavy load the list is long and
        // a gap far back is rare; past the bound the transfer queues at the end.
        let mut budget = 8;
        while i < self.busy.len() {
            budget -= 1;
            if budget == 0 {
                t = t.max(self.busy[self.busy.len() - 1].1);
                i = self.busy.len();
                break;
            }
            let (s, e) = self.busy[i];
            if e <= t {
                i += 1;
                continue;
            }
            if s >= t + dur {
                break;
            }
            t = e;
            i += 1;
        }
        // Merge with a neighbour that touches, to keep the list short under load.
        if i > self.head && self.busy[i - 1].1 == t {
            self.busy[i - 1].1 = t + dur;
            if i < self.busy.len() && self.busy[i].0 == t + dur {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
        } else if i < self.busy.len() && self.busy[i].0 == t + dur {
            self.busy[i].0 = t;
        } else {
            self.insert_at(i, (t, t + dur));
        }
        t
    }

    /// Put `iv` at place `i` (`head` ≤ `i` ≤ `busy.len()`) of the list: into the dead entry
    /// before `head` when that shifts fewer intervals than `Vec::insert`, which shifts the
    /// whole tail. On a drive whose channels hold transfers far ahead (the Intel P5316: QLC
    /// programs queued behind its long tPROG), GC and read-modify-write reads land at the front
    /// of 40-120 live intervals: 98 % of those inserts were 0 or 1 places after `head`, with a
    /// dead entry before it.
    #[inline(never)]
    fn insert_at(&mut self, i: usize, iv: (u64, u64)) {
        let h = self.head;
        if h > 0 && i - h < self.busy.len() - i {
            match i - h {
                0 => {}
                1 => self.busy[h - 1] = self.busy[h],
                _ => self.busy.copy_within(h..i, h - 1),
            }
            self.busy[i - 1] = iv;
            self.head = h - 1;
        } else {
            self.busy.insert(i, iv);
        }
    }
}

impl Calendar {
    /// How many of the sorted intervals `live` start before `t` (a `partition_point`).
    /// A transfer that misses the fast path on a TLC drive lands a few intervals before the
    /// last (GC reads: 1-4 back, rarely 10), so the count is found from the end, in a few
    /// steps rather than a binary search's; far back, the binary search takes over. On a
    /// drive whose channels hold transfers far ahead (the Intel P5316: 40-120 live intervals,
    /// its QLC programs queued behind a long tPROG), a read that does not start in the last
    /// interval lands at the front (95 % of its searches end at 0 or 1): the first two are
    /// checked after the last.
    #[inline(always)]
    pub(super) fn starts_before(live: &[(u64, u64)], t: u64) -> usize {
        let mut n = live.len();
        if n == 0 || live[n - 1].0 < t {
            return n;
        }
        if live[0].0 >= t {
            return 0;
        }
        // n ≥ 2 here: live[0] starts before t, live[n - 1] does not.
        if live[1].0 >= t {
            return 1;
        }
        n -= 1;
        for _ in 0..7 {
            if live[n - 1].0 < t {
                return n;
            }
            n -= 1;
        }
        2 + live[2..n].partition_point(|&(s, _)| s < t)
    }
}

/// A program or erase placed on a die's timeline, with its suspend history.
#[derive(Copy, Clone, Debug)]
pub(super) struct DieOp {
    pub(super) start: u64,
    /// End, including the time it spent suspended.
    pub(super) end: u64,
    pub(super) erase: bool,
    pub(super) suspends: u32,
    /// When it last resumed (the next suspend needs progress since then).
    pub(super) resumed_at: u64,
    /// The latest suspension: (suspend command issued, last read served ends).
    pub(super) window: Option<(u64, u64)>,
}

/// A die's programs and erases not yet ended, in start order, back to back or with gaps
/// (each starts at or after the previous one's end).
///
/// Why the `slip`: every GC read on a busy die delays all of the die's queued work by its
/// cost ([`super::DeviceTiming::die_slip`]), and a die can have tens of operations queued, so
/// shifting each one per GC read was 14 % of a steady-state random write's instructions.
/// The queue keeps one shift for all of them instead: an operation's `start` and `end` are
/// stored minus `slip` (wrapping), so adding to `slip` moves the whole queue at once. The
/// few operations at the front that a slip must not move (ended by then, or a running one's
/// start) are corrected one by one. Anything that edits operations one by one first folds
/// the slip back in ([`DieQueue::materialize`]). The times are the same either way.
///
/// The queue is a vector read from `head` on (operations before `head` have ended), not a
/// ring: the front check before every GC read and the walks over the front are plain
/// slice accesses (a `VecDeque`'s two halves cost more than the walks themselves).
#[derive(Clone, Debug, Default)]
pub(super) struct DieQueue {
    pub(super) ops: Vec<DieOp>,
    pub(super) head: usize,
    pub(super) slip: u64,
}

impl DieQueue {
    /// The operations not yet ended, in start order (times stored minus `slip`).
    #[inline]
    pub(super) fn live(&self) -> &[DieOp] {
        &self.ops[self.head..]
    }

    #[inline]
    pub(super) fn front_end(&self) -> Option<u64> {
        self.ops.get(self.head).map(|op| op.end.wrapping_add(self.slip))
    }

    /// Forget the first operation (the queue is not empty).
    #[inline]
    pub(super) fn pop_front(&mut self) {
        self.head += 1;
        if self.head == self.ops.len() {
            self.ops.clear();
            self.head = 0;
        }
    }

    pub(super) fn push_back(&mut self, mut op: DieOp) {
        if self.head > 32 && self.head * 2 > self.ops.len() {
            self.ops.drain(..self.head);
            self.head = 0;
        }
        op.start = op.start.wrapping_sub(self.slip);
        op.end = op.end.wrapping_sub(self.slip);
        self.ops.push(op);
    }

    /// Store every operation's true times (slip 0), for code that edits them one by one;
    /// returns them.
    pub(super) fn materialize(&mut self) -> &mut [DieOp] {
        let live = &mut self.ops[self.head..];
        if self.slip != 0 {
            let s = self.slip;
            for op in live.iter_mut() {
                op.start = op.start.wrapping_add(s);
                op.end = op.end.wrapping_add(s);
            }
            self.slip = 0;
        }
        live
    }

    /// Every operation still running or queued at `t` ends `delta` later; those not started
    /// by `t` also start later. Operations ended by `t` stay.
    #[inline]
    pub(super) fn slip(&mut self, t: u64, delta: u64) {
        let s = self.slip;
        for op in self.ops[self.head..].iter_mut() {
            if op.start.wrapping_add(s) >= t {
                break; // this one and all behind it move: the shared slip below
            }
            // Started before `t`: its start stays; so does its end if it ended by `t`.
            op.start = op.start.wrapping_sub(delta);
            if op.end.wrapping_add(s) <= t {
                op.end = op.end.wrapping_sub(delta);
            }
        }
        self.slip = s.wrapping_add(delta);
    }
}
