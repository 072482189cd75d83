//! NAND geometry: the sizes that follow from the NAND part of a spec.

use super::DriveSpec;

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

impl Geometry {
    pub fn from_spec(s: &DriveSpec) -> Geometry {
        let n = &s.nand;
        let dies = n.channels.value as u64 * n.dies_per_channel.value as u64;
        let program_unit_bytes = n.planes_per_die.value as u64 * n.page_bytes.value as u64 * n.bits_per_cell.value as u64;
        let superblock_bytes = dies * n.planes_per_die.value as u64 * n.pages_per_block.value as u64 * n.page_bytes.value as u64;
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
}
