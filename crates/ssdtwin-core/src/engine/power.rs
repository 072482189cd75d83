//! The power budget of a capped power state: at most N NAND operations at once.
//!
//! Each unit of the budget is free from some instant on. An operation that could start at
//! `ready` takes the unit freed last at or before `ready` (best fit), so it starts at
//! `ready`; only when every unit is busy at `ready` does it wait for the one that frees
//! first. Handing out the unit that frees first instead (first fit) would let an operation
//! whose die is busy until later hold a unit idle, unused, while later-issued operations
//! that are ready sooner wait for it: under random writes with GC that idled ~40 % of a
//! capped budget (docs/models.md §7). Best fit wastes none when the budget binds.

use std::collections::BTreeMap;

/// Budget units by the instant (ns) each becomes free; the value counts units freeing then.
#[derive(Debug, Clone)]
pub(super) struct PowerTokens {
    free_at_ns: BTreeMap<u64, u32>,
}

impl PowerTokens {
    /// `units` units (at least one), all free from time 0.
    pub(super) fn new(units: u64) -> Self {
        let n = u32::try_from(units.max(1)).unwrap_or(u32::MAX);
        Self { free_at_ns: BTreeMap::from([(0, n)]) }
    }

    /// Reserves a unit for an operation of `dur_ns` that could start at `ready_ns`; returns
    /// its start.
    pub(super) fn grant(&mut self, ready_ns: u64, dur_ns: u64) -> u64 {
        let latest_free = self.free_at_ns.range(..=ready_ns).next_back().map(|(&t, _)| t);
        let free = match latest_free {
            Some(t) => t,
            None => *self.free_at_ns.keys().next().expect("the budget has at least one unit"),
        };
        self.take(free);
        let start = ready_ns.max(free);
        *self.free_at_ns.entry(start + dur_ns).or_insert(0) += 1;
        start
    }

    fn take(&mut self, free: u64) {
        let count = self.free_at_ns.get_mut(&free).expect("a unit frees at this instant");
        *count -= 1;
        if *count == 0 {
            self.free_at_ns.remove(&free);
        }
    }

    /// Units in the budget.
    #[cfg(test)]
    fn units(&self) -> u32 {
        self.free_at_ns.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
