//! NAND geometry and physical addresses.
//!
//! The FTL addresses physical space in indirection units (IUs): a `u32` physical IU index
//! `ppa`. A superblock is one erase block on every plane of every die; the FTL allocates,
//! fills and garbage-collects whole superblocks. Inside a superblock, consecutive IUs fill
//! one program unit (a wordline on every plane of one die, all its bits at once) and then
//! move to the next die, so a stream of writes stripes across every die and channel.

use crate::spec::DriveSpec;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub channels: u32,
    pub dies_per_channel: u32,
    pub planes_per_die: u32,
    /// Blocks per plane = number of superblocks.
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    pub bits_per_cell: u32,
    /// One-shot program unit of one die: planes × page × bits per cell.
    pub program_unit_bytes: u64,
    pub superblock_bytes: u64,
}

/// Where a physical IU lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PhysAddr {
    pub superblock: u32,
    pub die: u32,
    pub channel: u32,
    pub plane: u32,
    /// Wordline index inside the block.
    pub wordline: u32,
}

impl Geometry {
    pub fn from_spec(s: &DriveSpec) -> Geometry {
        let n = &s.nand;
        let dies = n.channels.value as u64 * n.dies_per_channel.value as u64;
        let program_unit_bytes = n.planes_per_die.value as u64 * n.page_bytes.value as u64 * n.bits_per_cell.value as u64;
        let superblock_bytes =
            dies * n.planes_per_die.value as u64 * n.pages_per_block.value as u64 * n.page_bytes.value as u64;
        Geometry {
            channels: n.channels.value,
            dies_per_channel: n.dies_per_channel.value,
            planes_per_die: n.planes_per_die.value,
            blocks_per_plane: n.blocks_per_plane.value,
            pages_per_block: n.pages_per_block.value,
            page_bytes: n.page_bytes.value,
            bits_per_cell: n.bits_per_cell.value,
            program_unit_bytes,
            superblock_bytes,
        }
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    pub fn superblocks(&self) -> u32 {
        self.blocks_per_plane
    }

    /// Bytes that hold data (live or overwritten) in steady state once GC's mean overhead of
    /// `overhead` superblocks is set aside: the T of the WAF models.
    pub fn data_pool_bytes(&self, overhead: f64) -> u64 {
        ((self.blocks_per_plane as f64 - overhead).max(0.0) * self.superblock_bytes as f64) as u64
    }

    /// Raw NAND bytes (every block of every plane of every die).
    pub fn raw_bytes(&self) -> u64 {
        self.superblock_bytes * self.blocks_per_plane as u64
    }

    pub fn physical_ius(&self, iu_bytes: u64) -> u64 {
        self.raw_bytes() / iu_bytes
    }

    pub fn ius_per_superblock(&self, iu_bytes: u64) -> u32 {
        (self.superblock_bytes / iu_bytes) as u32
    }

    pub fn ius_per_program_unit(&self, iu_bytes: u64) -> u32 {
        (self.program_unit_bytes / iu_bytes) as u32
    }

    /// (die, channel, plane) of a physical IU: what the timing model needs, without the
    /// divisions of a full decode. `per_pu` = IUs per program unit, `pu_div` divides by it.
    #[inline]
    pub fn die_channel_plane(&self, ppa: u32, per_pu: u32, pu_div: crate::ftl::FastDiv, die_div: crate::ftl::FastDiv) -> (u32, u32, u32) {
        let pu = pu_div.div(ppa);
        let die = pu - die_div.div(pu) * self.dies();
        let k = ppa - pu * per_pu;
        let plane = k / (per_pu / self.planes_per_die).max(1);
        (die, die % self.channels, plane)
    }

    /// Decode a physical IU index.
    pub fn locate(&self, ppa: u32, iu_bytes: u64) -> PhysAddr {
        let per_sb = self.ius_per_superblock(iu_bytes);
        let per_pu = self.ius_per_program_unit(iu_bytes);
        let superblock = ppa / per_sb;
        let off = ppa % per_sb;
        let pu = off / per_pu;
        let die = pu % self.dies();
        let wordline = pu / self.dies();
        let plane = (off % per_pu) / (per_pu / self.planes_per_die).max(1);
        PhysAddr { superblock, die, channel: die % self.channels, plane, wordline }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cm6_geometry_is_four_tebibytes() {
        let s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        let g = s.geometry();
        assert_eq!(g.dies(), 64);
        assert_eq!(g.program_unit_bytes, 96 * 1024);
        // 4 TiB nominal; real dies carry a few extra blocks, so allow a small margin.
        let tib4 = 4u64 << 40;
        assert!(g.raw_bytes() as f64 / tib4 as f64 > 0.99 && (g.raw_bytes() as f64 / tib4 as f64) < 1.01);
    }

    #[test]
    fn striping_visits_every_die_in_turn() {
        let s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        let g = s.geometry();
        let per_pu = g.ius_per_program_unit(4096);
        let a = g.locate(0, 4096);
        let b = g.locate(per_pu, 4096);
        let c = g.locate(per_pu * g.dies(), 4096);
        assert_eq!((a.die, a.wordline), (0, 0));
        assert_eq!((b.die, b.wordline), (1, 0));
        assert_eq!((c.die, c.wordline), (0, 1));
        assert_eq!(g.locate(per_pu - 1, 4096).plane, g.planes_per_die - 1);
        assert_eq!(g.locate(g.ius_per_superblock(4096), 4096).superblock, 1);
    }
}
