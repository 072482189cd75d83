//! NAND geometry: the sizes that follow from the NAND part of a spec.

use super::{DriveSpec, NandSpec};

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
    /// One block on every plane of every die of a die group (of every die with one group).
    pub superblock_bytes: u64,
    /// Die groups: NVM Sets x FTL partitions per set. Each group is a disjoint set of dies
    /// with `blocks_per_plane` superblocks of its own, run by one FTL partition.
    pub groups: u32,
    /// NVM Sets (host-visible); each holds `groups / nvm_sets` consecutive groups.
    pub nvm_sets: u32,
    /// Die parity: one program unit in each stripe across a group's dies holds parity.
    pub die_parity: bool,
}

impl Geometry {
    pub fn from_spec(s: &DriveSpec) -> Geometry {
        let n = &s.nand;
        let sets = s.nvm_sets().max(1);
        let groups = sets * s.ftl_partitions().max(1);
        let dies = n.channels.value as u64 * n.dies_per_channel.value as u64;
        let program_unit_bytes = n.planes_per_die.value as u64 * n.page_bytes.value as u64 * n.bits_per_cell.value as u64;
        let superblock_bytes =
            dies / groups as u64 * n.planes_per_die.value as u64 * n.pages_per_block.value as u64 * n.page_bytes.value as u64;
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
            groups,
            nvm_sets: sets,
            die_parity: s.has_die_parity(),
        }
    }

    /// Why `sets` NVM Sets cannot split the dies of `n` evenly into whole channels or into
    /// equal shares of every channel.
    pub fn check_sets(n: &NandSpec, sets: u32) -> Result<(), String> {
        let (c, dies) = (n.channels.value, n.channels.value * n.dies_per_channel.value);
        if sets == 0 || !(c % sets == 0 || (sets % c == 0 && dies % sets == 0)) {
            return Err(format!("must divide the {c} channels (sets of whole channels) or be a multiple of them dividing the {dies} dies"));
        }
        Ok(())
    }

    /// Dies per die group.
    pub fn dies_per_group(&self) -> u32 {
        self.dies() / self.groups
    }

    /// Dies per NVM Set.
    pub fn dies_per_set(&self) -> u32 {
        self.dies() / self.nvm_sets
    }

    /// Die groups (FTL partitions) per NVM Set.
    pub fn groups_per_set(&self) -> u32 {
        self.groups / self.nvm_sets
    }

    /// The die group (0-based) die `die` belongs to: dies ranked by (channel, position on
    /// the channel), in equal consecutive groups, so a group holds whole channels when it
    /// can. The groups of NVM Set s are s x groups_per_set and the next ones.
    pub fn group_of_die(&self, die: u32) -> u32 {
        let rank = (die % self.channels) * self.dies_per_channel + die / self.channels;
        rank / self.dies_per_group()
    }

    /// The NVM Set (0-based) die `die` belongs to.
    pub fn set_of_die(&self, die: u32) -> u32 {
        self.group_of_die(die) / self.groups_per_set()
    }

    /// The dies of group `group` in striping order (ascending die number, which alternates
    /// channels): with one group, every die in order.
    pub fn group_dies(&self, group: u32) -> Vec<u32> {
        (0..self.dies()).filter(|&d| self.group_of_die(d) == group).collect()
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    /// Superblocks of the whole drive: `blocks_per_plane` in every die group.
    pub fn superblocks(&self) -> u32 {
        self.blocks_per_plane * self.groups
    }

    /// Bytes that hold data (live or overwritten) in steady state once GC's mean overhead of
    /// `overhead` superblocks (per group: each partition's GC keeps its own, in superblocks
    /// of its own dies) is set aside: the T of the WAF models.
    pub fn data_pool_bytes(&self, overhead: f64) -> u64 {
        let data_sb = self.superblock_bytes as f64 * self.data_fraction();
        ((self.blocks_per_plane as f64 - overhead).max(0.0) * data_sb * self.groups as f64) as u64
    }

    /// The share of a superblock that can hold data: all of it, or with die parity all but
    /// one die's share of every stripe.
    pub fn data_fraction(&self) -> f64 {
        if self.die_parity {
            let d = self.dies_per_group() as f64;
            (d - 1.0) / d
        } else {
            1.0
        }
    }

    /// Raw NAND bytes (every block of every plane of every die).
    pub fn raw_bytes(&self) -> u64 {
        self.superblock_bytes * self.superblocks() as u64
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
