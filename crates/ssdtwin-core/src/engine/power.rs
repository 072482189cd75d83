//! The power budget of a capped power state: at most N NAND operations at once.
//!
//! Each unit of the budget is free from some instant on. An operation that could start at
//! `ready` takes the unit freed last at or before `ready` (best fit), so it starts at
//! `ready`; only when every unit is busy at `ready` does it wait for the one that frees
//! first. Handing out the unit that frees first instead (first fit) would let an operation
//! whose die is busy until later hold a unit idle, unused, while later-issued operations
//! that are ready sooner wait for it: under random writes with GC that idled ~40 % of a
//! capped budget (docs/models.md §7). Best fit wastes none when the budget binds.

/// The instant (ns) each unit of the budget becomes free, sorted ascending (a multiset: units
/// freeing at the same instant appear once each).
///
/// Why a sorted vector and not a `BTreeMap<instant, count>`: a capped budget holds tens to
/// a few hundred units (the P5316's 20 W over 150 mW per operation is 133), and every NAND
/// operation takes one and gives it back later. On a vector that is two searches and one
/// shift of the units between the taken one and the new instant (a `memmove` of at most
/// a few hundred words), where the map walked its tree four times (range, get, remove,
/// insert): the map's grant was 14 % of a capped drive's timed random write. The searches
/// start where the previous grant of the same duration (a read, a program, an erase) took
/// and put its unit: on the P5316's random write 80 % of grants then take a unit within two
/// places of that hint and 70 % put it back at the same place (66 % and 51 % from the last
/// grant of any duration).
#[derive(Debug, Clone)]
pub(super) struct PowerTokens {
    free_at_ns: Vec<u64>,
    /// Per operation duration: where its last grant took its unit and put it back (places
    /// in `free_at_ns`); operations of one kind are mostly ready, and free again, at nearby
    /// instants, so their next searches start there.
    hints: [(u64, u32, u32); HINTS],
    next_slot: usize,
}

/// Hint slots: one per operation duration seen lately (a NAND read, a program, an erase).
const HINTS: usize = 4;

impl PowerTokens {
    /// `units` units (at least one), all free from time 0.
    pub(super) fn new(units: u64) -> Self {
        let n = usize::try_from(units.max(1)).unwrap_or(usize::MAX).min(u32::MAX as usize);
        Self { free_at_ns: vec![0; n], hints: [(u64::MAX, 0, 0); HINTS], next_slot: 0 }
    }

    /// Reserves a unit for an operation of `dur_ns` that could start at `ready_ns`; returns
    /// its start.
    pub(super) fn grant(&mut self, ready_ns: u64, dur_ns: u64) -> u64 {
        let h = self.hint_slot(dur_ns);
        let free = &mut self.free_at_ns;
        let (last_taken, last_put) = (self.hints[h].1 as usize, self.hints[h].2 as usize);
        // The unit freed last at or before `ready` (best fit), else the one freeing first.
        let idx = count_at_or_before(free, ready_ns, last_taken).saturating_sub(1);
        let start = ready_ns.max(free[idx]);
        let next_free = start + dur_ns;
        // `next_free` ≥ free[idx], so it goes at or after `idx`: shift the units freeing
        // before it one place down over the taken one, then put it after them.
        let tail = &free[idx + 1..];
        let before = count_at_or_before(tail, next_free, last_put.saturating_sub(idx + 1));
        free.copy_within(idx + 1..idx + 1 + before, idx);
        free[idx + before] = next_free;
        self.hints[h] = (dur_ns, idx as u32, (idx + before) as u32);
        start
    }

    /// The hint slot of operations of `dur_ns`: its own if it has one, else the least
    /// recently claimed one, which it takes over (keeping that slot's places as a start).
    #[inline]
    fn hint_slot(&mut self, dur_ns: u64) -> usize {
        if let Some(h) = self.hints.iter().position(|e| e.0 == dur_ns) {
            return h;
        }
        let h = self.next_slot;
        self.next_slot = (h + 1) % HINTS;
        self.hints[h].0 = dur_ns;
        h
    }

    /// Units in the budget.
    #[cfg(test)]
    fn units(&self) -> u32 {
        self.free_at_ns.len() as u32
    }
}

/// How many of the sorted `instants` are at or before `t` (their partition point), searched
/// outward from `hint` in doubling steps, then bisected: a point near the hint costs a few
/// compares where a bisection of the whole slice always costs log2(len).
fn count_at_or_before(instants: &[u64], t: u64, hint: usize) -> usize {
    let n = instants.len();
    let h = hint.min(n);
    let (lo, hi) = if h < n && instants[h] <= t {
        // The point is past `h`: probe h+1, h+2, h+4, ... until an instant after `t`.
        let (mut lo, mut probe, mut step) = (h + 1, h + 1, 1);
        while probe < n && instants[probe] <= t {
            lo = probe + 1;
            probe += step;
            step <<= 1;
        }
        (lo, probe.min(n))
    } else {
        // The point is at or before `h`: probe h-1, h-2, h-4, ... until an instant at or
        // before `t` (or the start).
        let (mut hi, mut step) = (h, 1);
        loop {
            let probe = hi.saturating_sub(step);
            if hi == 0 {
                break (0, 0);
            }
            if instants[probe] <= t {
                break (probe + 1, hi);
            }
            hi = probe;
            step <<= 1;
        }
    };
    lo + instants[lo..hi].partition_point(|&x| x <= t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The budget as a map of instants to the units freeing then: the first implementation,
    /// kept as the reference the vector must agree with grant for grant.
    struct MapTokens(BTreeMap<u64, u32>);

    impl MapTokens {
        fn grant(&mut self, ready: u64, dur: u64) -> u64 {
            let latest = self.0.range(..=ready).next_back().map(|(&t, _)| t);
            let free = latest.unwrap_or_else(|| *self.0.keys().next().unwrap());
            let count = self.0.get_mut(&free).unwrap();
            *count -= 1;
            if *count == 0 {
                self.0.remove(&free);
            }
            let start = ready.max(free);
            *self.0.entry(start + dur).or_insert(0) += 1;
            start
        }
    }

    proptest! {
        #[test]
        fn the_search_from_a_hint_finds_the_partition_point(
            mut instants in proptest::collection::vec(0u64..1_000, 0..300),
            t in 0u64..1_100,
            hint in 0usize..400,
        ) {
            instants.sort_unstable();
            prop_assert_eq!(count_at_or_before(&instants, t, hint), instants.partition_point(|&x| x <= t));
        }

        #[test]
        fn grants_the_same_starts_as_the_map_with_few_durations(
            units in 1u64..200,
            ops in proptest::collection::vec((0u64..2_000_000, 0usize..6, 0u64..50_000), 1..400),
        ) {
            // A few durations, as a drive's reads, programs and erases: more kinds than hint
            // slots, so slots are both reused and taken over.
            const DURS: [u64; 6] = [85_000, 340_000, 6_553_600, 0, 1_000, 85_001];
            let mut v = PowerTokens::new(units);
            let mut m = MapTokens(BTreeMap::from([(0, units as u32)]));
            let mut clock = 0u64;
            for (step, kind, jitter) in ops {
                clock += step / 64;
                let ready = clock + jitter;
                prop_assert_eq!(v.grant(ready, DURS[kind]), m.grant(ready, DURS[kind]));
            }
        }

        #[test]
        fn grants_the_same_starts_as_the_map_of_instants(
            units in 1u64..200,
            ops in proptest::collection::vec((0u64..2_000_000, 0u64..3_000_000, 0u64..50_000), 1..400),
        ) {
            // `ready` drifts forward with the operations, as in the engine, with jitter
            // back and forth so some are ready before units free and some after.
            let mut v = PowerTokens::new(units);
            let mut m = MapTokens(BTreeMap::from([(0, units as u32)]));
            let mut clock = 0u64;
            for (step, dur, jitter) in ops {
                clock += step / 64;
                let ready = clock + jitter;
                prop_assert_eq!(v.grant(ready, dur), m.grant(ready, dur));
            }
            let mut flat: Vec<u64> = m.0.iter().flat_map(|(&t, &n)| std::iter::repeat_n(t, n as usize)).collect();
            flat.sort_unstable();
            prop_assert_eq!(&v.free_at_ns, &flat);
        }
    }

    #[test]
    fn a_late_operation_does_not_hold_a_unit_an_earlier_ready_one_could_use() {
        // Two units. Unit A busy until 100, unit B free from 0. An operation ready at 1,000
        // takes A (freed last before 1,000), leaving B for one ready at 10, which starts at
        // once. First fit would have given the first operation B (free since 0) and made the
        // second wait for A until 100.
        let mut p = PowerTokens::new(2);
        assert_eq!(p.grant(0, 100), 0); // A: busy 0..100
        assert_eq!(p.grant(1_000, 50), 1_000);
        assert_eq!(p.grant(10, 50), 10);
        assert_eq!(p.units(), 2);
    }

    #[test]
    fn when_every_unit_is_busy_the_operation_waits_for_the_first_to_free() {
        let mut p = PowerTokens::new(2);
        assert_eq!(p.grant(0, 100), 0);
        assert_eq!(p.grant(0, 300), 0);
        assert_eq!(p.grant(50, 10), 100);
        assert_eq!(p.grant(50, 10), 110);
        assert_eq!(p.grant(50, 10), 120);
        assert_eq!(p.units(), 2);
    }

    #[test]
    fn never_more_operations_at_once_than_units() {
        // A deterministic pseudo-random stream of (ready, dur): at every instant at most N
        // granted intervals overlap, and no operation starts before it is ready.
        let units = 3u64;
        let mut p = PowerTokens::new(units);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut spans = Vec::new();
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ready = x % 100_000;
            let dur = 1 + (x >> 32) % 5_000;
            let start = p.grant(ready, dur);
            assert!(start >= ready);
            spans.push((start, start + dur));
        }
        let mut edges: Vec<(u64, i32)> = spans.iter().flat_map(|&(a, b)| [(a, 1), (b, -1)]).collect();
        edges.sort_unstable_by_key(|&(t, d)| (t, d));
        let mut busy = 0i32;
        for (_, d) in edges {
            busy += d;
            assert!(busy <= units as i32, "{busy} operations at once with {units} units");
        }
    }
}
