//! The numbers the FTL derives from a drive spec ([`FtlConfig`]; recomputed on load, never
//! saved): IU and superblock sizes, the logical space and its chunks, NVM Sets and
//! partitions, the write buffer's slots.

use super::SECTOR_BYTES;
use crate::spec::{DriveSpec, GcPolicy};
use crate::util::FastDiv;

/// Numbers the FTL derives from a spec (not persisted: recomputed on load).
#[derive(Clone, Debug, PartialEq)]
pub struct FtlConfig {
    pub iu_bytes: u32,
    pub sectors_per_iu: u32,
    pub full_mask: u128,
    pub ius_per_sb: u32,
    pub sb_div: FastDiv,
    /// Superblocks of the whole drive (`sbs_per_part` in each partition).
    pub superblocks: u32,
    /// NVM Sets and the superblocks of each (`parts_per_set` partitions' worth).
    pub sets: u32,
    pub sbs_per_set: u32,
    /// FTL partitions (die groups: NVM Sets x `parts_per_set`), the superblocks of each and
    /// log2 of the partitions per set. Partition p's superblocks are p x sbs_per_part and
    /// the next ones; the partitions of set s are s x parts_per_set and the next ones; a
    /// logical IU of set s lies in partition s x parts_per_set + the IU's stripe mod
    /// parts_per_set (`FtlState::part_stripe_shift`).
    pub parts: u32,
    pub sbs_per_part: u32,
    pub part_div: FastDiv,
    pub parts_per_set: u32,
    pub part_shift: u32,
    /// Mean GC overhead in superblocks (from the spec; informational for the FTL).
    pub overhead_superblocks: f64,
    /// Size of the logical IU space (namespaces are carved from it in chunks).
    pub logical_ius: u32,
    pub chunk_shift: u32,
    /// Write-buffer slots of the whole drive; each set has an equal share.
    pub buffer_slots: u32,
    pub policy: GcPolicy,
}

impl FtlConfig {
    pub fn from_spec(spec: &DriveSpec) -> FtlConfig {
        let g = spec.geometry();
        let iu = spec.ftl.iu_bytes.value;
        let user_ius = spec.capacity.tnvmcap_bytes.value.div_ceil(iu as u64);
        // Chunks of 2^k IUs, at most ~8K of them for the user capacity. Namespaces take whole
        // chunks; the logical space has `max_namespaces` spare chunks so rounding each
        // namespace up to a chunk never makes an allowed create-ns fail.
        let mut chunk_shift = 6;
        while (user_ius >> chunk_shift) > 8192 {
            chunk_shift += 1;
        }
        let chunks = user_ius.div_ceil(1 << chunk_shift) + spec.capacity.max_namespaces.value as u64;
        let logical = chunks << chunk_shift;
        assert!(logical < u32::MAX as u64, "logical space exceeds the 32-bit map");
        let spi = iu / SECTOR_BYTES;
        FtlConfig {
            iu_bytes: iu,
            sectors_per_iu: spi,
            full_mask: if spi >= 128 { u128::MAX } else { (1u128 << spi) - 1 },
            ius_per_sb: g.ius_per_superblock(iu as u64),
            sb_div: FastDiv::new(g.ius_per_superblock(iu as u64)),
            superblocks: g.superblocks(),
            sets: g.nvm_sets,
            sbs_per_set: g.blocks_per_plane * g.groups_per_set(),
            parts: g.groups,
            sbs_per_part: g.blocks_per_plane,
            part_div: FastDiv::new(g.blocks_per_plane),
            parts_per_set: g.groups_per_set(),
            part_shift: g.groups_per_set().trailing_zeros(),
            overhead_superblocks: spec.gc_overhead(),
            logical_ius: logical as u32,
            chunk_shift,
            buffer_slots: (spec.ftl.write_buffer_bytes.value / iu as u64) as u32,
            policy: spec.ftl.gc_policy.value,
        }
    }

    pub fn physical_ius(&self) -> u32 {
        self.ius_per_sb * self.superblocks
    }

    pub fn chunks(&self) -> u32 {
        self.logical_ius >> self.chunk_shift
    }

    pub fn chunk_ius(&self) -> u32 {
        1 << self.chunk_shift
    }

    /// Write-buffer slots of one partition.
    pub fn part_buffer_slots(&self) -> u32 {
        self.buffer_slots / self.parts
    }

    /// The superblock ids of set `set` (all its partitions').
    pub fn set_superblocks(&self, set: u32) -> std::ops::Range<u32> {
        set * self.sbs_per_set..(set + 1) * self.sbs_per_set
    }

    /// The superblock ids of partition `part`.
    pub fn part_superblocks(&self, part: u32) -> std::ops::Range<u32> {
        part * self.sbs_per_part..(part + 1) * self.sbs_per_part
    }

    /// The partitions of set `set`.
    pub fn set_parts(&self, set: u32) -> std::ops::Range<usize> {
        let k = self.parts_per_set as usize;
        set as usize * k..(set as usize + 1) * k
    }
}
