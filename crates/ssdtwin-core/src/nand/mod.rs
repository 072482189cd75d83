//! NAND: physical addresses and the operations the FTL emits.
//!
//! The FTL addresses physical space in indirection units (IUs): a `u32` physical IU index
//! `ppa`. A superblock is one erase block on every plane of every die; the FTL allocates,
//! fills and garbage-collects whole superblocks. Inside a superblock, consecutive IUs fill
//! one program unit (a wordline on every plane of one die, all its bits at once) and then
//! move to the next die, so a stream of writes stripes across every die and channel.
//! The sizes come from the spec ([`crate::spec::Geometry`]).
//!
//! With NVM Sets a superblock is one block on every plane of the dies of one set, and the
//! physical IU space is set-major: set `s` owns superblocks `s*B .. (s+1)*B` (B blocks per
//! plane), a contiguous range of physical IUs, striped over its own dies only. With one set
//! this is exactly the layout above.

mod ops;

pub use ops::{Cause, MapTouch, NandOp, NandSink, NoTiming, Recorder, ShardSink, TouchCounter};

use crate::spec::Geometry;
use crate::util::FastDiv;

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

/// Decodes physical IU indexes of one geometry and IU size (divisions by multiplication).
#[derive(Clone, Debug)]
pub struct Addressing {
    dies: u32,
    channels: u32,
    planes_per_die: u32,
    ius_per_pu: u32,
    ius_per_sb: u32,
    pu_div: FastDiv,
    die_div: FastDiv,
    /// Die groups (NVM Sets x FTL partitions; 1: the decode above, unchanged), superblocks
    /// per group, dies per group.
    groups: u32,
    sbs_per_group: u32,
    group_dies: u32,
    /// Physical IUs per group, and the dies of each group in striping order (group-major).
    group_div: FastDiv,
    group_die_div: FastDiv,
    die_of: std::sync::Arc<[u32]>,
    /// IUs per plane's share of a program unit, and the channel count (the timing model
    /// decodes every NAND operation: multiplications, not divides).
    plane_div: FastDiv,
    chan_div: FastDiv,
}

impl Addressing {
    pub fn new(g: &Geometry, iu_bytes: u64) -> Addressing {
        let ius_per_pu = g.ius_per_program_unit(iu_bytes).max(1);
        let groups = g.groups.max(1);
        let ius_per_sb = g.ius_per_superblock(iu_bytes);
        Addressing {
            dies: g.dies(),
            channels: g.channels,
            planes_per_die: g.planes_per_die,
            ius_per_pu,
            ius_per_sb,
            pu_div: FastDiv::new(ius_per_pu),
            die_div: FastDiv::new(g.dies()),
            groups,
            sbs_per_group: g.blocks_per_plane,
            group_dies: g.dies_per_group(),
            group_div: FastDiv::new(ius_per_sb * g.blocks_per_plane),
            group_die_div: FastDiv::new(g.dies_per_group()),
            die_of: (0..groups).flat_map(|s| g.group_dies(s)).collect(),
            plane_div: FastDiv::new((ius_per_pu / g.planes_per_die).max(1)),
            chan_div: FastDiv::new(g.channels),
        }
    }

    /// Die groups of the layout.
    pub fn groups(&self) -> u32 {
        self.groups
    }

    /// The die group (0-based) of physical IU `ppa`.
    #[inline(always)]
    pub fn group_of(&self, ppa: u32) -> u32 {
        if self.groups == 1 {
            return 0;
        }
        self.group_div.quotient(ppa)
    }

    /// The die group (0-based) of superblock `sb`.
    #[inline]
    pub fn group_of_superblock(&self, sb: u32) -> u32 {
        sb / self.sbs_per_group
    }

    /// The dies of group `group`, in striping order (every die, in order, with one group).
    pub fn dies_of_group(&self, group: u32) -> &[u32] {
        let d = self.group_dies as usize;
        &self.die_of[group as usize * d..(group as usize + 1) * d]
    }

    /// The die of global program unit `pu` of physical IU `ppa`.
    #[inline(always)]
    fn die_of_pu(&self, ppa: u32, pu: u32) -> u32 {
        if self.groups == 1 {
            return pu - self.die_div.quotient(pu) * self.dies;
        }
        // A group's superblocks hold whole stripes over its dies, so the local die is the
        // global program unit modulo the group's die count.
        let local = pu - self.group_die_div.quotient(pu) * self.group_dies;
        self.die_of[(self.group_of(ppa) * self.group_dies + local) as usize]
    }

    pub fn ius_per_program_unit(&self) -> u32 {
        self.ius_per_pu
    }

    /// The program unit (a global index) that holds physical IU `ppa`.
    #[inline(always)]
    pub fn program_unit(&self, ppa: u32) -> u32 {
        self.pu_div.quotient(ppa)
    }

    /// (die, channel, plane) of a physical IU: what the timing model needs, without the
    /// divisions of a full decode.
    #[inline]
    pub fn die_channel_plane(&self, ppa: u32) -> (u32, u32, u32) {
        let pu = self.pu_div.quotient(ppa);
        let die = self.die_of_pu(ppa, pu);
        let k = ppa - pu * self.ius_per_pu;
        let plane = self.plane_div.quotient(k);
        (die, die - self.chan_div.quotient(die) * self.channels, plane)
    }

    /// Decode a physical IU index.
    pub fn locate(&self, ppa: u32) -> PhysAddr {
        let per_sb = self.ius_per_sb;
        let per_pu = self.ius_per_pu;
        let superblock = ppa / per_sb;
        let off = ppa % per_sb;
        let pu = off / per_pu;
        let die = self.die_of[(self.group_of(ppa) * self.group_dies + pu % self.group_dies) as usize];
        let wordline = pu / self.group_dies;
        let plane = (off % per_pu) / (per_pu / self.planes_per_die).max(1);
        PhysAddr { superblock, die, channel: die % self.channels, plane, wordline }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DriveSpec;

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
        let a = Addressing::new(&g, 4096);
        let per_pu = g.ius_per_program_unit(4096);
        let (x, y, z) = (a.locate(0), a.locate(per_pu), a.locate(per_pu * g.dies()));
        assert_eq!((x.die, x.wordline), (0, 0));
        assert_eq!((y.die, y.wordline), (1, 0));
        assert_eq!((z.die, z.wordline), (0, 1));
        assert_eq!(a.locate(per_pu - 1).plane, g.planes_per_die - 1);
        assert_eq!(a.locate(g.ius_per_superblock(4096)).superblock, 1);
    }

    #[test]
    fn the_fast_decode_agrees_with_the_full_one() {
        for name in crate::spec::preset_names() {
            let g = DriveSpec::preset(name).unwrap().scaled(64).unwrap().geometry();
            let a = Addressing::new(&g, 4096);
            let n = g.physical_ius(4096) as u32;
            for ppa in (0..n).step_by(997).chain([n - 1]) {
                let p = a.locate(ppa);
                assert_eq!(a.die_channel_plane(ppa), (p.die, p.channel, p.plane), "{name} ppa {ppa}");
            }
        }
    }
}
