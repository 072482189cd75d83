//! The flash translation layer: turns host writes, reads and deallocations into NAND
//! operations. It knows nothing of time; the engine times what it emits (see
//! [`NandSink`]), and fast-forward runs it with [`NoTiming`], leaving identical state.
//!
//! Layout (all physical addresses are `u32` IU indexes, see [`crate::nand`]):
//! * `l2p[logical IU] = ppa + 1` (0 = unmapped), `p2l[ppa] = logical IU + 1` (0 = never
//!   written since the last erase). An IU at `ppa` is valid iff `l2p[p2l[ppa] - 1] == ppa + 1`,
//!   so invalidation only touches `l2p` and a per-superblock counter.
//! * Superblocks move Free → HostOpen/GcOpen → Closed → Victim → Free. Closed ones sit in
//!   a bucketed [`victim::VictimIndex`].
//! * GC is paced: while a victim is being collected, every host IU programmed earns credit
//!   `valid_at_pick` (twice that while the free pool is below its target), and each
//!   `ius_per_superblock - valid_at_pick` of credit relocates one valid IU. Host consumption
//!   and GC reclamation then balance, and GC work is spread evenly between host writes
//!   instead of arriving in multi-GB bursts; foreground GC (the host waits for a whole
//!   victim) remains only as a safety net and is counted.
//! * Partitions: the FTL is split into `parts_per_set` (`[ftl] partitions`) partitions per
//!   NVM Set, each owning the superblocks of its die group (a contiguous range of superblock
//!   ids and of physical IUs, see [`crate::nand`]), with its own free pool, host and GC
//!   frontiers, victim, victim index, share of the write buffer and counters. A logical chunk
//!   belongs to one set (`chunk_set`, set by the controller when a namespace takes the
//!   chunk); the set's partitions take its IUs in stripes of [`PART_STRIPE_IUS`] (one 64-byte
//!   line of the L2P map), so IU i of set s lies in partition
//!   s x parts_per_set + (i / 16) mod parts_per_set. So a namespace's writes, GC and reads
//!   touch only its set's dies. Partitions share no mutable state but counters that add up
//!   and disjoint entries of the maps and of the superblock table: fast-forward runs them in
//!   parallel ([`shard`]). One partition is the FTL as it was, bit for bit.

//!
//! This file holds [`Ftl`] (the maps and the small state together) and its lookups; the
//! rest, one concern a file: `config.rs` (what the FTL derives from a spec), `state.rs` (the
//! small state an image saves), `host.rs` (host commands and the program path), `gc.rs`
//! (garbage collection), `checks.rs` (invariants), `buffer.rs` (the write buffer),
//! `victim.rs` (the victim index), `shard.rs` (fast-forward on several threads).

pub mod buffer;
mod checks;
mod config;
mod gc;
mod host;
pub mod shard;
mod state;
pub mod victim;

pub use checks::CheckEnd;
pub use config::FtlConfig;
pub use gc::{DEFERRED_GC_FLOOR_SBS, GC_TARGET_SBS_X2};
pub use state::{FtlCounters, FtlState, GcMode, Partition, SbState};

use crate::bigarray::BigArray;
use crate::spec::DriveSpec;
use crate::units::{LogicalIu, PhysicalIu};
use buffer::Slot;
use victim::VictimIndex;

/// Sector size used for sub-IU coverage masks.
pub const SECTOR_BYTES: u32 = 512;
const NONE: u32 = u32::MAX;
/// The logical IUs a partition takes in turn with the other partitions of its set: 16, one
/// 64-byte cache line of the L2P map's 4-byte entries, so the cores fast-forward runs the
/// partitions on never write the same line (with stripes of one IU every line was shared;
/// measured, that had not cost speed: docs/performance.md). 16 IUs (64 KiB of 4 KiB IUs) is
/// still far finer than any hot region a skewed workload has, so partitions stay balanced.
pub const PART_STRIPE_IUS: u32 = 16;

/// Where a host read found its data.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadSource {
    Buffer,
    Nand { ppa: PhysicalIu },
    Unmapped,
}

/// The FTL of one drive: its configuration, small state, maps and victim indexes.
pub struct Ftl {
    pub cfg: FtlConfig,
    st: FtlState,
    l2p: BigArray,
    p2l: BigArray,
    /// One victim index per set, over the set's superblocks (local ids: id - first of set).
    index: Vec<VictimIndex>,
    mask_bytes: MaskBytes,
}

/// Bytes of the sectors in a sector mask. A whole IU's without counting bits: the x86-64
/// baseline has no popcnt, and `u128::count_ones` costs ~30 instructions there.
#[derive(Copy, Clone, Debug)]
struct MaskBytes {
    full_mask: u128,
    full_bytes: u32,
}

impl MaskBytes {
    fn new(full_mask: u128) -> MaskBytes {
        MaskBytes { full_mask, full_bytes: full_mask.count_ones() * SECTOR_BYTES }
    }

    #[inline(always)]
    fn of(self, mask: u128) -> u32 {
        if mask == self.full_mask {
            self.full_bytes
        } else {
            mask.count_ones() * SECTOR_BYTES
        }
    }
}

impl Ftl {
    /// A factory-fresh FTL: every superblock erased, nothing mapped.
    pub fn new(spec: &DriveSpec) -> std::io::Result<Ftl> {
        let cfg = FtlConfig::from_spec(spec);
        let st = FtlState::fresh(&cfg);
        let l2p = BigArray::zeroed(cfg.logical_ius as usize)?;
        let p2l = BigArray::zeroed(cfg.physical_ius() as usize)?;
        Ok(Ftl::from_parts(cfg, st, l2p, p2l))
    }

    /// Reassemble from persisted parts (the image loader checks sizes first).
    pub fn from_parts(cfg: FtlConfig, mut st: FtlState, l2p: BigArray, p2l: BigArray) -> Ftl {
        for p in &mut st.parts {
            p.buffer.rebuild_index();
        }
        let mut index: Vec<VictimIndex> = (0..cfg.parts).map(|_| VictimIndex::new(cfg.sbs_per_part, cfg.ius_per_sb)).collect();
        for (i, sb) in st.sbs.iter().enumerate() {
            if sb.state == SbState::Closed {
                let i = i as u32;
                index[(i / cfg.sbs_per_part) as usize].insert(i % cfg.sbs_per_part, sb.valid);
            }
        }
        let mask_bytes = MaskBytes::new(cfg.full_mask);
        Ftl { cfg, st, l2p, p2l, index, mask_bytes }
    }

    #[inline(always)]
    fn mask_bytes(&self, mask: u128) -> u32 {
        self.mask_bytes.of(mask)
    }

    pub fn state(&self) -> &FtlState {
        &self.st
    }

    /// The small state, to give chunks to a set (namespace create).
    pub fn state_mut(&mut self) -> &mut FtlState {
        &mut self.st
    }

    pub fn counters(&self) -> &FtlCounters {
        &self.st.counters
    }

    pub fn maps(&self) -> (&BigArray, &BigArray) {
        (&self.l2p, &self.p2l)
    }

    /// Current mapping of a logical IU (physical IU), if any (tests ask the map directly).
    #[cfg(test)]
    pub fn lookup(&self, iu: LogicalIu) -> Option<PhysicalIu> {
        self.mapped(iu.0).map(PhysicalIu)
    }

    #[inline]
    fn mapped(&self, iu: u32) -> Option<u32> {
        let m = self.l2p[iu as usize];
        (m != 0).then(|| m - 1)
    }

    /// The partition of logical IU `iu`: its chunk's set's partitions take the set's IUs in
    /// turn, a stripe of `1 << part_stripe_shift` IUs each.
    #[inline(always)]
    pub fn part_of(&self, iu: u32) -> usize {
        let stripe = (iu >> self.st.part_stripe_shift) & (self.cfg.parts_per_set - 1);
        // One NVM Set (every drive without NVM Sets): every chunk is set 0's (the state
        // check holds each below the set count), so skip the table: a cache miss per random
        // write or read on a large drive, and on every shard's pass over the write stream.
        if self.cfg.sets == 1 {
            return stripe as usize;
        }
        let set = self.st.chunk_set[(iu >> self.cfg.chunk_shift) as usize] as u32;
        ((set << self.cfg.part_shift) + stripe) as usize
    }

    /// The partition of superblock `sb`, and `sb`'s id inside it.
    #[inline(always)]
    fn part_of_sb(&self, sb: u32) -> (usize, u32) {
        if self.cfg.parts == 1 {
            return (0, sb);
        }
        let p = self.cfg.part_div.quotient(sb);
        (p as usize, sb - p * self.cfg.sbs_per_part)
    }

    /// Every buffered slot of every set.
    fn all_slots(&self) -> impl Iterator<Item = &Slot> {
        self.st.parts.iter().flat_map(|p| p.buffer.slots())
    }

    /// IUs waiting in the buffer that are not mapped yet, in the given (sorted) chunks: they
    /// are allocated from the host's point of view (NUSE) though not yet on NAND.
    pub fn buffered_unmapped(&self, chunks: &[u32]) -> u64 {
        let shift = self.cfg.chunk_shift;
        self.all_slots().filter(|s| self.l2p[s.iu as usize] == 0 && chunks.binary_search(&(s.iu >> shift)).is_ok()).count() as u64
    }

    /// Record the buffered-but-unmapped IUs per chunk in the small state (before saving).
    pub fn snapshot_buffered_unmapped(&mut self) {
        let shift = self.cfg.chunk_shift;
        let mut m = std::collections::BTreeMap::new();
        for s in self.all_slots() {
            if self.l2p[s.iu as usize] == 0 {
                *m.entry(s.iu >> shift).or_insert(0u32) += 1;
            }
        }
        self.st.buffered_unmapped = m.into_iter().collect();
    }

    /// Hint that `iu` will be written or read soon.
    #[inline(always)]
    pub fn prefetch(&self, iu: LogicalIu) {
        self.l2p.prefetch(iu.0 as usize);
    }
}

#[cfg(test)]
mod parity_tests;
#[cfg(test)]
mod tests;
