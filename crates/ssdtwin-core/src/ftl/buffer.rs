//! The power-loss-protected DRAM write buffer.
//!
//! Host data waits here, one slot per indirection unit, until the buffer is full; the
//! oldest slot is then programmed. Two things make it matter for WAF:
//! * small writes to the same IU merge into one slot, so sequential 4 KiB writes on a
//!   64 KiB-IU drive leave as whole IUs (no read-modify-write);
//! * rewrites of a buffered IU never reach NAND.
//!
//! Eviction depends only on the order of host operations, never on time, so the timed
//! engine and fast-forward leave identical state. Slots are evicted in order of first
//! arrival (FIFO), which is what lets sequential streams coalesce.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

pub const DEAD: u32 = u32::MAX;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// Global logical IU, or [`DEAD`] once trimmed.
    pub iu: u32,
    /// Which 512 B sectors of the IU the buffer holds.
    pub mask: u128,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteBuffer {
    capacity: u32,
    ring: VecDeque<Slot>,
    /// Absolute sequence number of `ring[0]`.
    head_seq: u64,
    live: u32,
    #[serde(skip)]
    index: Index,
}

/// Open-addressing map iu → absolute slot sequence (low 32 bits), linear probing with
/// backward-shift deletion. Key and value share one u64 so a probe touches one cache line.
/// Deterministic and allocation-free in steady state.
#[derive(Clone, Debug, Default)]
struct Index {
    cells: Vec<u64>, // (iu + 1) << 32 | seq as u32; 0 = empty
    mask: usize,
}

impl Index {
    /// At least 4 cells per slot (at most a quarter full): a miss, which every write of a
    /// new IU is, ends at the first empty cell, so a sparser table probes less (at 2 cells
    /// per slot, `offer` ran 12 % more instructions; a full-size CM6's index is 128 KiB).
    fn with_capacity(n: u32) -> Index {
        let size = ((n as usize).max(1) * 4).next_power_of_two().max(16);
        Index { cells: vec![0; size], mask: size - 1 }
    }

    #[inline(always)]
    fn home(&self, key: u32) -> usize {
        // Fibonacci hashing: sequential IUs spread over the table.
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask
    }

    /// The low 32 bits of the slot's sequence number, if `iu` is present.
    #[inline]
    fn get(&self, iu: u32) -> Option<u32> {
        self.find(iu).ok()
    }

    /// The low 32 bits of the slot's sequence number if `iu` is present, else the empty
    /// cell that ends its probe (where [`Index::insert`] would put it).
    #[inline(always)]
    fn find(&self, iu: u32) -> Result<u32, usize> {
        let key = iu + 1;
        let mut i = self.home(key);
        loop {
            let c = self.cells[i];
            if (c >> 32) as u32 == key {
                return Ok(c as u32);
            }
            if c == 0 {
                return Err(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Put absent `iu` at `seq` in cell `at`: the empty cell its probe ends at (a miss of
    /// [`Index::find`], or that cell moved back by a removal since: [`Index::probe_end`]).
    #[inline(always)]
    fn insert_at(&mut self, at: usize, iu: u32, seq: u64) {
        debug_assert_eq!(self.cells[at], 0);
        self.cells[at] = ((iu + 1) as u64) << 32 | (seq as u32) as u64;
    }

    /// Where absent `iu`'s probe ends after a removal left cell `hole` empty, the probe
    /// having ended at `end` before it: a removal empties one cell (its last hole) and
    /// fills none that was empty, so the probe now stops at the hole if the hole lies on
    /// it (cyclically in [home, end)), else where it stopped before.
    #[inline(always)]
    fn probe_end(&self, iu: u32, end: usize, hole: usize) -> usize {
        let home = self.home(iu + 1);
        if (hole.wrapping_sub(home) & self.mask) < (end.wrapping_sub(home) & self.mask) {
            hole
        } else {
            end
        }
    }

    #[inline]
    fn insert(&mut self, iu: u32, seq: u64) {
        let key = iu + 1;
        let cell = (key as u64) << 32 | (seq as u32) as u64;
        let mut i = self.home(key);
        loop {
            let c = self.cells[i];
            if c == 0 || (c >> 32) as u32 == key {
                self.cells[i] = cell;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Remove `iu`; returns the cell left empty (None if `iu` was absent).
    #[inline(always)]
    fn remove(&mut self, iu: u32) -> Option<usize> {
        let key = iu + 1;
        let mut i = self.home(key);
        loop {
            let c = self.cells[i];
            if c == 0 {
                return None;
            }
            if (c >> 32) as u32 == key {
                break;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift: pull later members of the probe run into the hole.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        loop {
            let c = self.cells[j];
            if c == 0 {
                break;
            }
            let home = self.home((c >> 32) as u32);
            // Move c unless its home lies cyclically in (hole, j].
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.cells[hole] = c;
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.cells[hole] = 0;
        Some(hole)
    }
}

/// What happened to a write offered to the buffer.
pub enum Offer {
    /// Merged into a slot already buffered (no NAND traffic now).
    Merged,
    /// Took a new slot; nothing had to leave.
    Queued,
    /// Took a new slot after evicting the oldest, which must now be programmed.
    Evicted(Slot),
    /// The buffer has no capacity: program this IU now.
    WriteThrough(Slot),
}

impl WriteBuffer {
    pub fn new(capacity_slots: u32) -> WriteBuffer {
        WriteBuffer {
            capacity: capacity_slots,
            ring: VecDeque::with_capacity(capacity_slots as usize + 1),
            head_seq: 0,
            live: 0,
            index: Index::with_capacity(capacity_slots),
        }
    }

    /// Rebuild the index after deserialising.
    pub fn rebuild_index(&mut self) {
        self.index = Index::with_capacity(self.capacity);
        for (i, s) in self.ring.iter().enumerate() {
            if s.iu != DEAD {
                self.index.insert(s.iu, self.head_seq + i as u64);
            }
        }
    }

    /// Ring offset of a slot from the low 32 bits of its sequence number (the ring never
    /// holds 2^32 slots, so the wrapping difference is exact).
    #[inline(always)]
    fn offset(&self, seq_low: u32) -> usize {
        seq_low.wrapping_sub(self.head_seq as u32) as usize
    }

    /// The IU `k` slots from the oldest (live or dead), to prefetch what leaves soon.
    #[inline(always)]
    pub fn peek(&self, k: usize) -> Option<u32> {
        self.ring.get(k).map(|s| s.iu).filter(|&iu| iu != DEAD)
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    pub fn live(&self) -> u32 {
        self.live
    }

    #[inline]
    pub fn lookup(&self, iu: u32) -> Option<u128> {
        if self.live == 0 {
            return None;
        }
        self.index.get(iu).map(|seq| self.ring[self.offset(seq)].mask)
    }

    #[inline]
    pub fn offer(&mut self, iu: u32, mask: u128) -> Offer {
        if self.capacity == 0 {
            return Offer::WriteThrough(Slot { iu, mask });
        }
        // One probe of the index for the miss and the insert (a merge ends it).
        let mut at = match self.index.find(iu) {
            Ok(seq) => {
                let off = self.offset(seq);
                let s = &mut self.ring[off];
                s.mask |= mask;
                return Offer::Merged;
            }
            Err(at) => at,
        };
        let mut evicted = None;
        if self.live == self.capacity {
            if let Some((s, hole)) = self.pop_oldest_cell() {
                at = self.index.probe_end(iu, at, hole);
                evicted = Some(s);
            }
        }
        let seq = self.head_seq + self.ring.len() as u64;
        self.ring.push_back(Slot { iu, mask });
        self.index.insert_at(at, iu, seq);
        self.live += 1;
        match evicted {
            Some(s) => Offer::Evicted(s),
            None => Offer::Queued,
        }
    }

    /// Remove and return the oldest live slot.
    #[cfg(test)]
    pub fn pop_oldest(&mut self) -> Option<Slot> {
        self.pop_oldest_cell().map(|(s, _)| s)
    }

    /// [`WriteBuffer::pop_oldest`], with the index cell its removal left empty.
    #[inline(always)]
    fn pop_oldest_cell(&mut self) -> Option<(Slot, usize)> {
        while let Some(s) = self.ring.pop_front() {
            self.head_seq += 1;
            if s.iu != DEAD {
                let hole = self.index.remove(s.iu).expect("a live slot is indexed");
                self.live -= 1;
                return Some((s, hole));
            }
        }
        None
    }

    /// Drop a buffered IU (it was deallocated). Returns whether it was buffered.
    pub fn discard(&mut self, iu: u32) -> bool {
        if self.live == 0 {
            return false;
        }
        match self.index.get(iu) {
            Some(seq) => {
                let off = self.offset(seq);
                self.ring[off].iu = DEAD;
                self.index.remove(iu);
                self.live -= 1;
                // Dead slots leave from the front; compact if deallocations leave many
                // behind a long-lived slot, so the ring stays bounded.
                while self.ring.front().is_some_and(|s| s.iu == DEAD) {
                    self.ring.pop_front();
                    self.head_seq += 1;
                }
                if self.ring.len() > 2 * self.capacity as usize + 64 {
                    self.compact();
                }
                true
            }
            None => false,
        }
    }

    fn compact(&mut self) {
        let live: VecDeque<Slot> = self.ring.drain(..).filter(|s| s.iu != DEAD).collect();
        self.head_seq += 1 << 32; // any fresh base works; keep it moving forward
        self.ring = live;
        self.rebuild_index();
    }

    /// Live slots, oldest first.
    pub fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.ring.iter().filter(|s| s.iu != DEAD)
    }

    /// Check the index against the ring (tests and debug builds).
    pub fn check(&self) -> Result<(), String> {
        let mut live = 0;
        for (i, s) in self.ring.iter().enumerate() {
            if s.iu == DEAD {
                continue;
            }
            live += 1;
            if s.mask == 0 {
                return Err(format!("buffer slot {i} holds IU {} with no sectors", s.iu));
            }
            match self.index.get(s.iu) {
                Some(seq) if seq == (self.head_seq + i as u64) as u32 => {}
                other => return Err(format!("buffer index for IU {} is {other:?}, slot is {}", s.iu, self.head_seq + i as u64)),
            }
        }
        if live != self.live {
            return Err(format!("buffer counts {} live slots, ring has {live}", self.live));
        }
        if self.live > self.capacity {
            return Err(format!("buffer holds {} slots, capacity {}", self.live, self.capacity));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_merge_and_discard() {
        let mut b = WriteBuffer::new(2);
        assert!(matches!(b.offer(10, 1), Offer::Queued));
        assert!(matches!(b.offer(10, 2), Offer::Merged));
        assert_eq!(b.lookup(10), Some(3));
        assert!(matches!(b.offer(11, 1), Offer::Queued));
        match b.offer(12, 1) {
            Offer::Evicted(s) => assert_eq!(s, Slot { iu: 10, mask: 3 }),
            _ => panic!("expected eviction"),
        }
        assert!(b.discard(11));
        assert!(!b.discard(11));
        assert_eq!(b.live(), 1);
        b.check().unwrap();
        assert_eq!(b.pop_oldest(), Some(Slot { iu: 12, mask: 1 }));
        assert_eq!(b.pop_oldest(), None);
    }

    /// `offer`'s one probe (the miss's empty cell, moved to the eviction's hole when that
    /// lies on the probe) leaves the index exactly as a removal and a fresh insert do, in a
    /// table crowded enough that probes cross runs and removals shift them.
    #[test]
    fn one_probe_offer_leaves_the_index_of_remove_then_insert() {
        for cap in [1u32, 3, 8, 13] {
            let mut b = WriteBuffer::new(cap);
            let mut reference = b.index.clone();
            let mut x: u64 = cap as u64;
            for step in 0..20_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let iu = ((x >> 33) % (6 * cap as u64 + 5)) as u32;
                let seq = b.head_seq + b.ring.len() as u64;
                let present = reference.get(iu).is_some();
                match b.offer(iu, 1 << (x % 8)) {
                    Offer::Evicted(s) => {
                        assert!(!present);
                        reference.remove(s.iu);
                        reference.insert(iu, seq);
                    }
                    Offer::Queued => reference.insert(iu, seq),
                    Offer::Merged => assert!(present),
                    Offer::WriteThrough(_) => unreachable!(),
                }
                assert_eq!(b.index.cells, reference.cells, "capacity {cap}, step {step}, IU {iu}");
            }
            b.check().unwrap();
        }
    }

    #[test]
    fn index_survives_heavy_churn() {
        let mut b = WriteBuffer::new(64);
        let mut x: u64 = 1;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let iu = ((x >> 33) % 200) as u32;
            if x & 7 == 0 {
                b.discard(iu);
            } else {
                b.offer(iu, 1 << (x % 8));
            }
        }
        b.check().unwrap();
        assert!(b.ring.len() <= 2 * 64 + 64);
        let mut c = b.clone();
        c.rebuild_index();
        c.check().unwrap();
    }
}
