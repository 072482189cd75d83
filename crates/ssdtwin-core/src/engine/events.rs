//! The fio runner's event queue, and the cluster simulation's: a min-queue of events ordered
//! by (time, push order).
//!
//! A timing wheel in place of one binary heap (docs/performance.md, "Speed II"): the
//! events of the next span (2.1 ms for the runner) sit in buckets (of 1.024 us) by time, later ones in a
//! heap that feeds the wheel as it turns. At QD32 a completion lands some hundred
//! microseconds ahead, so a push goes to a bucket holding one or two events and a pop
//! takes the first occupied bucket's first event, where one heap of a few hundred events
//! moved eight levels per pop. Each bucket keeps its events sorted by (time, sequence)
//! ([`Bucket`]): a new event is almost always the bucket's last (its sequence is the
//! largest so far, and events that share an instant, such as writes acknowledged together
//! when the buffer drains, arrive in time order), so a push appends and a pop reads the
//! front, where a per-bucket heap paid log k on every pop of a full bucket (a steady-state
//! random write acknowledges a QD32 job's writes together, in one bucket). A bucket is a
//! list through nodes the whole wheel shares (the nodes are as many as the events queued
//! at once), not a vector of its own that grew bucket by bucket. The order is exactly the
//! single heap's of (time, sequence).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An event as the queue stores it: the run's `Ev`, packed by the caller, and a word the
/// caller gives it to carry (a plain clone's completion: when it was issued).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub t: u64,
    seq: u64,
    pub ev: u64,
    pub aux: u64,
}

/// Heap order: the earliest (time, sequence) is the greatest, so it is on top of a
/// `BinaryHeap` (sequences are unique, so the payload never decides).
impl Ord for Entry {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        (other.t, other.seq).cmp(&(self.t, self.seq))
    }
}

impl PartialOrd for Entry {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// No node: the end of a bucket's list, or of the free list.
const NIL: u32 = u32::MAX;

/// An event on the wheel and the next one of its bucket (or of the free list).
#[derive(Copy, Clone)]
struct Node {
    e: Entry,
    next: u32,
}

/// One bucket's events: a list through the shared nodes, in (time, sequence) order from
/// `head` to `tail` (`head` is [`NIL`] when the bucket is empty). A bucket of its own
/// vector grew its room bucket by bucket (2,048 allocations to start, more where a QD32
/// job's writes are acknowledged together); the nodes are only as many as the events
/// queued at once.
#[derive(Copy, Clone)]
struct Bucket {
    head: u32,
    tail: u32,
}

impl Bucket {
    const EMPTY: Bucket = Bucket { head: NIL, tail: NIL };
}

/// Whether `a` comes after `b` in (time, sequence) order.
#[inline(always)]
fn after(a: &Entry, b: &Entry) -> bool {
    a.t > b.t || (a.t == b.t && a.seq > b.seq)
}

/// The fio runner's wheel: buckets of 1.024 us, 2,048 of them (2.1 ms).
pub(crate) type EventQueue = Wheel<10, 2048, 32>;

/// The cluster simulation's wheel (cluster/sim.rs): buckets of 128 ns, 32,768 of them (4.2
/// ms). A cluster point handles some 15 events per simulated microsecond (Ceph at 6,400 I/Os
/// in flight), so the runner's 1 us buckets held a dozen or more events each and a push
/// earlier than its bucket's last one walked that list.
pub(crate) type ClusterQueue = Wheel<7, 32768, 512>;

/// A timing wheel of `SLOTS` buckets of `1 << SHIFT` ns (`WORDS` = `SLOTS` / 64 words of
/// occupied bits; `SLOTS` a power of two).
pub(crate) struct Wheel<const SHIFT: u32, const SLOTS: usize, const WORDS: usize> {
    seq: u64,
    /// Start of the bucket at `cursor`: every event on the wheel has a time in
    /// [base, base + SPAN_NS), every event in `far` one at or past base + SPAN_NS.
    base: u64,
    cursor: usize,
    /// A fixed array: a slot index is masked to `SLOTS`, so indexing needs no bounds check.
    slots: Box<[Bucket; SLOTS]>,
    /// The wheel's events, linked per bucket; the unused ones linked from `free`.
    nodes: Vec<Node>,
    free: u32,
    /// One bit per non-empty bucket.
    occupied: [u64; WORDS],
    on_wheel: usize,
    far: BinaryHeap<Entry>,
    len: usize,
    peak: usize,
}

impl<const SHIFT: u32, const SLOTS: usize, const WORDS: usize> Default for Wheel<SHIFT, SLOTS, WORDS> {
    fn default() -> Self {
        const { assert!(SLOTS.is_power_of_two() && WORDS * 64 == SLOTS) };
        Wheel {
            seq: 0,
            base: 0,
            cursor: 0,
            slots: Box::new([Bucket::EMPTY; SLOTS]),
            nodes: Vec::new(),
            free: NIL,
            occupied: [0; WORDS],
            on_wheel: 0,
            far: BinaryHeap::new(),
            len: 0,
            peak: 0,
        }
    }
}

impl<const SHIFT: u32, const SLOTS: usize, const WORDS: usize> Wheel<SHIFT, SLOTS, WORDS> {
    /// Width of a bucket.
    const BUCKET_NS: u64 = 1 << SHIFT;
    /// Time the wheel covers; later events wait in `far`.
    const SPAN_NS: u64 = Self::BUCKET_NS * SLOTS as u64;

    #[inline(always)]
    fn slot_of(t: u64) -> usize {
        (t >> SHIFT) as usize & (SLOTS - 1)
    }

    /// Queue `ev` at time `t`, after every event already queued for `t`.
    #[inline(always)]
    pub fn push(&mut self, t: u64, ev: u64) {
        self.push_with(t, ev, 0);
    }

    /// [`EventQueue::push`], `aux` carried with the event.
    #[inline(always)]
    pub fn push_with(&mut self, t: u64, ev: u64, aux: u64) {
        self.seq += 1;
        self.len += 1;
        if self.len > self.peak {
            self.peak = self.len;
        }
        if t < self.base {
            self.rewind(t);
        }
        self.place(Entry { t, seq: self.seq, ev, aux });
    }

    #[inline(always)]
    fn place(&mut self, e: Entry) {
        // A difference, not base + SPAN_NS: times run up to u64::MAX (the run's limit is
        // checked on the events as they are popped).
        if e.t - self.base >= Self::SPAN_NS {
            self.push_far(e.t, e.seq, e.ev, e.aux);
            return;
        }
        let s = Self::slot_of(e.t);
        let n = self.new_node(e);
        let b = self.slots[s];
        if b.head == NIL {
            self.slots[s] = Bucket { head: n, tail: n };
            self.occupied[s / 64] |= 1 << (s % 64);
        } else if after(&self.nodes[b.tail as usize].e, &e) {
            // Before the bucket's last event: an earlier time within the bucket, or an
            // event moved from `far` (an older sequence).
            self.insert(s, n);
        } else {
            self.nodes[b.tail as usize].next = n;
            self.slots[s].tail = n;
        }
        self.on_wheel += 1;
    }

    /// (Its fields one by one: an entry passed whole was stored on the stack on every
    /// push, the common path's too.)
    #[cold]
    #[inline(never)]
    fn push_far(&mut self, t: u64, seq: u64, ev: u64, aux: u64) {
        self.far.push(Entry { t, seq, ev, aux });
    }

    /// A node holding `e`, at the end of no list.
    #[inline(always)]
    fn new_node(&mut self, e: Entry) -> u32 {
        if self.free == NIL {
            return self.grow_nodes(e.t, e.seq, e.ev, e.aux);
        }
        let n = self.free;
        let slot = &mut self.nodes[n as usize];
        self.free = slot.next;
        // Field by field: a whole node was built on the stack and copied.
        (slot.e.t, slot.e.seq, slot.e.ev, slot.e.aux, slot.next) = (e.t, e.seq, e.ev, e.aux, NIL);
        n
    }

    /// A new node holding the entry of these fields (none is free).
    #[cold]
    #[inline(never)]
    fn grow_nodes(&mut self, t: u64, seq: u64, ev: u64, aux: u64) -> u32 {
        self.nodes.push(Node { e: Entry { t, seq, ev, aux }, next: NIL });
        (self.nodes.len() - 1) as u32
    }

    /// Link node `n` into the non-empty bucket `s` in order (it goes before the last event).
    #[cold]
    #[inline(never)]
    fn insert(&mut self, s: usize, n: u32) {
        let e = self.nodes[n as usize].e;
        let head = self.slots[s].head;
        if after(&self.nodes[head as usize].e, &e) {
            self.nodes[n as usize].next = head;
            self.slots[s].head = n;
            return;
        }
        let mut prev = head;
        loop {
            let next = self.nodes[prev as usize].next;
            // The last event comes after `e`, so the walk stops before the end.
            if after(&self.nodes[next as usize].e, &e) {
                self.nodes[n as usize].next = next;
                self.nodes[prev as usize].next = n;
                return;
            }
            prev = next;
        }
    }

    /// An event earlier than the wheel's start (a push after `peek` turned the wheel on to
    /// a later first event): start the wheel at it; events now past its span go to `far`.
    #[cold]
    fn rewind(&mut self, t: u64) {
        let mut on_wheel = Vec::with_capacity(self.on_wheel);
        for s in 0..SLOTS {
            let mut n = self.slots[s].head;
            while n != NIL {
                let node = self.nodes[n as usize];
                on_wheel.push(node.e);
                n = node.next;
            }
        }
        *self.slots = [Bucket::EMPTY; SLOTS];
        self.occupied = [0; WORDS];
        self.nodes.clear();
        self.free = NIL;
        self.on_wheel = 0;
        self.base = t & !(Self::BUCKET_NS - 1);
        self.cursor = Self::slot_of(self.base);
        for e in on_wheel {
            self.place(e);
        }
    }

    /// The first occupied bucket at or after the cursor (the wheel is not empty).
    #[inline]
    fn next_occupied(&self) -> usize {
        let (w0, b0) = (self.cursor / 64, self.cursor % 64);
        let here = self.occupied[w0] & (!0u64 << b0);
        if here != 0 {
            return w0 * 64 + here.trailing_zeros() as usize;
        }
        for k in 1..=WORDS {
            let w = (w0 + k) % WORDS;
            let bits = if w == w0 { self.occupied[w] & !(!0u64 << b0) } else { self.occupied[w] };
            if bits != 0 {
                return w * 64 + bits.trailing_zeros() as usize;
            }
        }
        unreachable!("next_occupied on an empty wheel")
    }

    /// The bucket of the first event, the wheel turned to it; None when empty.
    #[inline]
    fn first_bucket(&mut self) -> Option<usize> {
        if self.on_wheel == 0 {
            let t = self.far.peek()?.t;
            self.base = t & !(Self::BUCKET_NS - 1);
            self.cursor = Self::slot_of(self.base);
            self.refill();
        }
        let s = self.next_occupied();
        if s != self.cursor {
            let ahead = (s + SLOTS - self.cursor) % SLOTS;
            self.base += ahead as u64 * Self::BUCKET_NS;
            self.cursor = s;
            self.refill();
        }
        Some(s)
    }

    /// Move the events of `far` that the wheel now covers onto it.
    #[inline(always)]
    fn refill(&mut self) {
        if !self.far.is_empty() {
            self.refill_far();
        }
    }

    fn refill_far(&mut self) {
        while let Some(&e) = self.far.peek() {
            if e.t - self.base >= Self::SPAN_NS {
                break;
            }
            self.far.pop();
            self.place(e);
        }
    }

    /// The first event (earliest time, then earliest pushed).
    #[inline]
    pub fn peek(&mut self) -> Option<Entry> {
        let s = self.first_bucket()?;
        Some(self.nodes[self.slots[s].head as usize].e)
    }

    /// Remove and return the first event.
    #[inline]
    pub fn pop(&mut self) -> Option<Entry> {
        // The cursor's bucket, when it holds events, is the first one (every event on the
        // wheel is at or after its start): no search of the occupied bits, no turn.
        let at_cursor = self.cursor % SLOTS;
        let s = if self.slots[at_cursor].head != NIL { at_cursor } else { self.first_bucket()? };
        let n = self.slots[s].head;
        let node = &mut self.nodes[n as usize];
        let (e, next) = (node.e, node.next);
        node.next = self.free;
        self.free = n;
        self.slots[s].head = next;
        if next == NIL {
            self.occupied[s / 64] &= !(1 << (s % 64));
        }
        self.on_wheel -= 1;
        self.len -= 1;
        Some(e)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most events queued at once (for [`super::fio::Footprint`]).
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;

    proptest! {
        /// Random pushes, peeks and pops against the binary heap of (time, sequence) the
        /// wheel stands for: every popped and peeked event, emptiness and the peak agree.
        /// The pushes mix events at the same instant (writes acknowledged together), events
        /// earlier than others in their bucket (the out-of-order insertion), events beyond
        /// the wheel's span (`far` and its refills) and pushes after a peek turned the wheel
        /// past them (the rewind). Every event carries a word of its own (`push_with`),
        /// which comes back with it. Both wheels: the fio runner's and the cluster's.
        #[test]
        fn pops_and_peeks_as_the_heap_of_time_and_sequence(
            ops in proptest::collection::vec((0u8..10, 0u8..5, any::<u64>()), 1..600),
        ) {
            pops_and_peeks::<10, 2048, 32>(&ops)?;
            pops_and_peeks::<7, 32768, 512>(&ops)?;
        }
    }

    fn pops_and_peeks<const SHIFT: u32, const SLOTS: usize, const WORDS: usize>(ops: &[(u8, u8, u64)]) -> Result<(), TestCaseError> {
        let (bucket_ns, span_ns) = (Wheel::<SHIFT, SLOTS, WORDS>::BUCKET_NS, Wheel::<SHIFT, SLOTS, WORDS>::SPAN_NS);
        let mut q = Wheel::<SHIFT, SLOTS, WORDS>::default();
        let mut reference = BinaryHeap::new();
        let (mut seq, mut now, mut peak) = (0u64, 0u64, 0usize);
        for (i, (op, range, r)) in ops.iter().copied().enumerate() {
            if op < 5 || reference.is_empty() {
                let ahead = match range {
                    0 => r % 4,
                    1 => r % bucket_ns,
                    2 => r % (span_ns / 4),
                    3 => r % (3 * span_ns),
                    _ => r % (u64::MAX / 2),
                };
                let t = now.saturating_add(ahead);
                seq += 1;
                q.push_with(t, i as u64, r);
                reference.push(Reverse((t, seq, i as u64, r)));
                peak = peak.max(reference.len());
            } else if op < 7 {
                let Reverse((t, _, ev, aux)) = *reference.peek().expect("not empty");
                let e = q.peek().expect("the same events");
                prop_assert_eq!((e.t, e.ev, e.aux), (t, ev, aux));
            } else {
                let Reverse((t, _, ev, aux)) = reference.pop().expect("not empty");
                let e = q.pop().expect("the same events");
                prop_assert_eq!((e.t, e.ev, e.aux), (t, ev, aux));
                now = t;
            }
            prop_assert_eq!(q.is_empty(), reference.is_empty());
        }
        while let Some(Reverse((t, _, ev, aux))) = reference.pop() {
            let e = q.pop().expect("the same events");
            prop_assert_eq!((e.t, e.ev, e.aux), (t, ev, aux));
        }
        prop_assert!(q.pop().is_none() && q.is_empty());
        prop_assert_eq!(q.peak(), peak);
        Ok(())
    }

    /// Pops come out in exactly the order of the tuple heap the queue replaced, ties in
    /// time included, whatever the mix of pushes, peeks and pops, for events a few
    /// nanoseconds to several wheel spans ahead (and up to the end of u64), and for pushes
    /// before the first event after a peek (which turns the wheel). Both wheels.
    #[test]
    fn same_order_as_a_binary_heap_of_time_and_sequence() {
        same_order::<10, 2048, 32>();
        same_order::<7, 32768, 512>();
    }

    fn same_order<const SHIFT: u32, const SLOTS: usize, const WORDS: usize>() {
        let span_ns = Wheel::<SHIFT, SLOTS, WORDS>::SPAN_NS;
        for spread in [64u64, 5_000, 300_000, 3 * span_ns, 50 * span_ns, u64::MAX / 4] {
            let mut q = Wheel::<SHIFT, SLOTS, WORDS>::default();
            let mut reference = BinaryHeap::new();
            let (mut seq, mut x) = (0u64, 0x9E37_79B9_7F4A_7C15u64 ^ spread);
            let mut rand = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut now = 0u64;
            for step in 0..100_000u64 {
                let r = rand();
                if r % 1000 < 520 || reference.is_empty() {
                    // Mostly ahead of the last pop; now and then between it and the first
                    // event (after a peek has turned the wheel past it).
                    let t = if r % 97 == 0 { now.saturating_add(rand() % 8) } else { now.saturating_add(rand() % spread) };
                    seq += 1;
                    q.push(t, step);
                    reference.push(Reverse((t, seq, step)));
                } else if r % 3 == 0 {
                    let Reverse((t, _, ev)) = *reference.peek().unwrap();
                    let e = q.peek().unwrap();
                    assert_eq!((e.t, e.ev), (t, ev), "spread {spread} step {step}");
                } else {
                    let Reverse((t, _, ev)) = reference.pop().unwrap();
                    let e = q.pop().unwrap();
                    assert_eq!((e.t, e.ev), (t, ev), "spread {spread} step {step}");
                    now = t;
                }
            }
            while let Some(Reverse((t, _, ev))) = reference.pop() {
                let e = q.pop().unwrap();
                assert_eq!((e.t, e.ev), (t, ev));
            }
            assert!(q.pop().is_none() && q.is_empty());
        }
    }
}
