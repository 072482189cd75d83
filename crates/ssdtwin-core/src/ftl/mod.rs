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

pub mod buffer;
pub mod shard;
pub mod victim;

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

use crate::bigarray::BigArray;
use crate::nand::{Cause, MapTouch, NandOp, NandSink};
use crate::spec::{DriveSpec, GcPolicy};
use crate::units::{LogicalIu, PhysicalIu};
use crate::util::FastDiv;
use buffer::{Offer, Slot, WriteBuffer};
use victim::VictimIndex;

/// Sector size used for sub-IU coverage masks.
pub const SECTOR_BYTES: u32 = 512;
const NONE: u32 = u32::MAX;
/// Host allocation never takes the last free superblock: it is kept for the GC frontier.
const FREE_FLOOR: usize = 1;
/// Collection of a new victim starts when this few superblocks are free.
const GC_START: usize = 2;
/// Host-writable space (free superblocks plus the open one's rest) below which a set whose
/// GC is deferred must have it back: from here the paced GC still finds a free superblock
/// for its frontier before the host's allocation reaches `FREE_FLOOR` (foreground GC).
pub const DEFERRED_GC_FLOOR_SBS: u64 = GC_START as u64;
/// Twice the host-writable superblocks the paced GC steers towards (GC_START + 1/2).
pub const GC_TARGET_SBS_X2: u64 = 2 * GC_START as u64 + 1;
/// Idle GC collects a victim only if at least 1/8 of it is invalid (at most 7 IUs copied
/// per IU freed) [ASSUMED]: firmware idle GC reclaims efficient victims only; the share is
/// not published. Greedy victims at steady state are 24 % (CM6-R, WAF 4.2) to 50 % or more
/// invalid, so it never binds there.
const IDLE_MIN_INVALID_DEN: u64 = 8;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SbState {
    Free,
    HostOpen,
    GcOpen,
    Closed,
    Victim,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Superblock {
    pub state: SbState,
    pub valid: u32,
    pub written: u32,
    pub erase_count: u32,
    /// Program sequence number when it closed (age for cost-benefit GC).
    pub closed_at: u64,
}

/// Exact counters (units in the names). NAND bytes written = programmed IUs × IU size.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlCounters {
    pub host_write_bytes: u64,
    pub host_read_bytes: u64,
    pub host_trim_ius: u64,
    pub host_programmed_ius: u64,
    pub gc_programmed_ius: u64,
    pub nand_read_host_bytes: u64,
    pub nand_read_rmw_bytes: u64,
    pub nand_read_gc_bytes: u64,
    pub rmw_ius: u64,
    pub buffer_merges: u64,
    pub buffer_read_hits: u64,
    pub unmapped_reads: u64,
    pub erases: u64,
    pub gc_victims: u64,
    pub foreground_gc_victims: u64,
    /// Sum (in IUs) and count of samples of the GC overhead: physical space holding neither
    /// live data nor data the host overwrote — free superblocks, unwritten frontier pages and
    /// copies already relocated out of the victim. Sampled every 1,024 host programs.
    #[serde(default)]
    pub overhead_sample_ius: u128,
    #[serde(default)]
    pub overhead_samples: u64,
}

impl FtlCounters {
    /// A count that grows whenever the maps change: every map change programs an IU (host
    /// or GC), erases a superblock or deallocates an IU, and each of those bumps one of these
    /// monotone counters. The image compares it with the count its saved maps were taken
    /// at, so no code path can change the maps without the next commit saving them.
    pub fn map_changes(&self) -> u64 {
        self.host_programmed_ius + self.gc_programmed_ius + self.erases + self.host_trim_ius
    }

    /// Mean GC overhead in superblocks (see `overhead_sample_ius`).
    pub fn overhead_superblocks(&self, ius_per_sb: u32) -> f64 {
        if self.overhead_samples == 0 {
            return 0.0;
        }
        self.overhead_sample_ius as f64 / self.overhead_samples as f64 / ius_per_sb as f64
    }
}

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

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Frontier {
    sb: u32,
    next: u32,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Victim {
    sb: u32,
    cursor: u32,
    valid_at_pick: u32,
    credit: u64,
    /// IUs copied out so far (their old copies still occupy the victim until it is erased).
    #[serde(default)]
    moved: u32,
}

/// What one partition (NVM Set) has done: the Endurance Group log's traffic (the global
/// [`FtlCounters`] hold the sums of the drive).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetCounters {
    pub host_write_bytes: u64,
    pub host_read_bytes: u64,
    pub host_programmed_ius: u64,
    pub gc_programmed_ius: u64,
    /// This partition's GC overhead samples (drives of several partitions; one partition
    /// samples into the drive's [`FtlCounters`] only), every 1,024 of its host programs.
    #[serde(default, skip_serializing_if = "is_zero_u128")]
    pub overhead_sample_ius: u128,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub overhead_samples: u64,
}

/// The logical IUs a partition takes in turn with the other partitions of its set: 16, one
/// 64-byte cache line of the L2P map's 4-byte entries, so the cores fast-forward runs the
/// partitions on never write the same line (with stripes of one IU every line was shared;
/// measured, that had not cost speed: docs/performance.md). 16 IUs (64 KiB of 4 KiB IUs) is
/// still far finer than any hot region a skewed workload has, so partitions stay balanced.
pub const PART_STRIPE_IUS: u32 = 16;

/// The write paths' L2P prefetches come in bursts: this many evicted slots' lines at once,
/// every this many slots, one burst ahead (near enough that the lines are still cached).
/// At full scale the maps are 8 GB and nearly every random line also misses the TLB; a
/// prefetch then holds its place in the reorder window until its translation is done, so
/// one prefetch per write, spread among a write's few hundred instructions, left only a few
/// misses in flight. Back-to-back prefetches overlap their walks and misses
/// (docs/performance.md, "Speed II: prefetches in bursts").
const HOST_PREFETCH_BURST: usize = 16;

/// GC's victim scan prefetches the L2P lines of this many IUs at once (their addresses come
/// from 32 consecutive entries of the victim's P2L, 128 bytes), `GC_PREFETCH_AHEAD` IUs
/// ahead of the cursor.
const GC_PREFETCH_BURST: u32 = 32;
const GC_PREFETCH_AHEAD: u32 = 96;

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_u128(v: &u128) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

impl SetCounters {
    fn add(&mut self, o: &SetCounters) {
        self.host_write_bytes += o.host_write_bytes;
        self.host_read_bytes += o.host_read_bytes;
        self.host_programmed_ius += o.host_programmed_ius;
        self.gc_programmed_ius += o.gc_programmed_ius;
        self.overhead_sample_ius += o.overhead_sample_ius;
        self.overhead_samples += o.overhead_samples;
    }
}

/// One FTL partition: an NVM Set's allocation, GC and write-buffer state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Partition {
    /// Free superblocks ordered by (erase count, id): allocation takes the least worn.
    free: BTreeSet<(u32, u32)>,
    host: Frontier,
    gc: Frontier,
    victim: Option<Victim>,
    buffer: WriteBuffer,
    program_seq: u64,
    counters: SetCounters,
    /// How the controller wants GC run in this set (Predictable Latency Mode, nvme/plm.rs).
    #[serde(default, skip_serializing_if = "GcMode::is_normal")]
    gc_mode: GcMode,
}

/// GC of one partition as the controller sets it for Predictable Latency Mode (NVMe 1.4
/// IO Determinism, nvme/plm.rs). The FTL knows no windows and no time: only whether its
/// background work is held and how much free space it keeps in reserve.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcMode {
    /// No paced or idle GC (a deterministic window); foreground GC stays as the safety net
    /// the controller's window floor keeps from ever running.
    #[serde(default)]
    pub deferred: bool,
    /// Free space kept above the normal GC target, in IUs, so a deterministic window has
    /// room to absorb host writes (a non-deterministic window of a set in PLM).
    #[serde(default)]
    pub reserve_ius: u32,
}

impl GcMode {
    pub fn is_normal(&self) -> bool {
        *self == GcMode::default()
    }
}

/// The small part of the FTL state (everything except the two maps).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "FtlStateWire")]
pub struct FtlState {
    sbs: Vec<Superblock>,
    /// `parts_per_set` partitions per NVM Set.
    parts: Vec<Partition>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    parts_per_set: u32,
    /// log2 of the IUs the partitions of a set take in turn: log2 [`PART_STRIPE_IUS`] on
    /// partitioned drives; 0 (stripes of one IU) on one partition, where it does not matter,
    /// and in images partitioned before the stripe was widened, which keep their layout.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    part_stripe_shift: u32,
    counters: FtlCounters,
    /// Mapped IUs per logical chunk (NUSE, per-namespace accounting).
    mapped_per_chunk: Vec<u32>,
    /// The NVM Set of each logical chunk (all 0 with one set).
    chunk_set: Vec<u8>,
    /// (chunk, IUs) of IUs waiting in the buffer that are not mapped yet, as of the last
    /// save: NUSE without loading the maps (the buffer cannot change while they are unloaded).
    buffered_unmapped: Vec<(u32, u32)>,
}

/// The saved FTL state as read: this layout, or the one-partition layout of images saved
/// before NVM Sets (its frontier, free list, victim and buffer at the top level).
#[derive(Deserialize)]
struct FtlStateWire {
    sbs: Vec<Superblock>,
    #[serde(default)]
    parts: Option<Vec<Partition>>,
    #[serde(default = "one")]
    parts_per_set: u32,
    #[serde(default)]
    part_stripe_shift: u32,
    counters: FtlCounters,
    mapped_per_chunk: Vec<u32>,
    #[serde(default)]
    chunk_set: Vec<u8>,
    #[serde(default)]
    buffered_unmapped: Vec<(u32, u32)>,
    free: Option<BTreeSet<(u32, u32)>>,
    host: Option<Frontier>,
    gc: Option<Frontier>,
    #[serde(default)]
    victim: Option<Victim>,
    buffer: Option<WriteBuffer>,
    #[serde(default)]
    program_seq: u64,
}

impl From<FtlStateWire> for FtlState {
    fn from(w: FtlStateWire) -> FtlState {
        let c = &w.counters;
        let parts = match w.parts {
            Some(p) => p,
            None => vec![Partition {
                free: w.free.unwrap_or_default(),
                host: w.host.unwrap_or(Frontier { sb: NONE, next: 0 }),
                gc: w.gc.unwrap_or(Frontier { sb: NONE, next: 0 }),
                victim: w.victim,
                buffer: w.buffer.unwrap_or_else(|| WriteBuffer::new(0)),
                program_seq: w.program_seq,
                gc_mode: GcMode::default(),
                counters: SetCounters {
                    host_write_bytes: c.host_write_bytes,
                    host_read_bytes: c.host_read_bytes,
                    host_programmed_ius: c.host_programmed_ius,
                    gc_programmed_ius: c.gc_programmed_ius,
                    ..SetCounters::default()
                },
            }],
        };
        let chunk_set = if w.chunk_set.is_empty() { vec![0; w.mapped_per_chunk.len()] } else { w.chunk_set };
        FtlState {
            sbs: w.sbs,
            parts,
            parts_per_set: w.parts_per_set,
            part_stripe_shift: w.part_stripe_shift,
            counters: w.counters,
            mapped_per_chunk: w.mapped_per_chunk,
            chunk_set,
            buffered_unmapped: w.buffered_unmapped,
        }
    }
}

impl FtlState {
    pub fn counters(&self) -> &FtlCounters {
        &self.counters
    }

    pub fn mapped_in_chunk(&self, chunk: u32) -> u32 {
        self.mapped_per_chunk[chunk as usize]
    }

    pub fn superblocks(&self) -> &[Superblock] {
        &self.sbs
    }

    pub fn free_superblocks(&self) -> usize {
        self.parts.iter().map(|p| p.free.len()).sum()
    }

    pub fn buffered_ius(&self) -> u32 {
        self.parts.iter().map(|p| p.buffer.live()).sum()
    }

    /// NVM Sets of the state.
    pub fn sets(&self) -> u32 {
        self.parts.len() as u32 / self.parts_per_set
    }

    /// FTL partitions of the state (NVM Sets x partitions per set).
    pub fn partitions(&self) -> u32 {
        self.parts.len() as u32
    }

    /// The partitions of set `set`.
    fn set_parts(&self, set: u32) -> &[Partition] {
        let k = self.parts_per_set as usize;
        &self.parts[set as usize * k..(set as usize + 1) * k]
    }

    /// The traffic of set `set` (the sum of its partitions').
    pub fn set_counters(&self, set: u32) -> SetCounters {
        let mut c = SetCounters::default();
        for p in self.set_parts(set) {
            c.add(&p.counters);
        }
        c
    }

    /// Free superblocks of set `set`.
    pub fn set_free_superblocks(&self, set: u32) -> usize {
        self.set_parts(set).iter().map(|p| p.free.len()).sum()
    }

    /// Space set `set`'s host can still write without GC: its partitions' free superblocks
    /// plus what is left of their open ones, in IUs.
    pub fn set_host_avail_ius(&self, set: u32, ius_per_sb: u32) -> u64 {
        let per = ius_per_sb as u64;
        let avail = |part: &Partition| {
            let host_left = if part.host.sb == NONE { 0 } else { per - part.host.next as u64 };
            part.free.len() as u64 * per + host_left
        };
        self.set_parts(set).iter().map(avail).sum()
    }

    /// The GC mode of set `set` (Predictable Latency Mode): its partitions' reserves summed.
    pub fn gc_mode(&self, set: u32) -> GcMode {
        let parts = self.set_parts(set);
        GcMode { deferred: parts[0].gc_mode.deferred, reserve_ius: parts.iter().map(|p| p.gc_mode.reserve_ius).sum() }
    }

    /// Hold or release set `set`'s background GC and its free-space reserve (the
    /// controller's deterministic and non-deterministic windows); each partition keeps an
    /// equal share of the reserve.
    pub fn set_gc_mode(&mut self, set: u32, mode: GcMode) {
        let k = self.parts_per_set;
        let range = set as usize * k as usize..(set as usize + 1) * k as usize;
        for (i, p) in self.parts[range].iter_mut().enumerate() {
            let share = mode.reserve_ius / k + u32::from((i as u32) < mode.reserve_ius % k);
            p.gc_mode = GcMode { deferred: mode.deferred, reserve_ius: share };
        }
    }

    /// Mean GC overhead of the whole drive in superblocks: one partition's samples are the
    /// drive's; several partitions sample their own, and their means add up.
    pub fn overhead_superblocks(&self, ius_per_sb: u32) -> f64 {
        if self.parts.len() == 1 || self.counters.overhead_samples == 0 {
            return self.counters.overhead_superblocks(ius_per_sb);
        }
        let per = ius_per_sb as f64;
        let mean =
            |c: &SetCounters| if c.overhead_samples == 0 { 0.0 } else { c.overhead_sample_ius as f64 / c.overhead_samples as f64 / per };
        self.parts.iter().map(|p| mean(&p.counters)).sum()
    }

    /// The set of logical chunk `chunk`.
    pub fn chunk_set(&self, chunk: u32) -> u32 {
        self.chunk_set[chunk as usize] as u32
    }

    /// Give `chunks` to set `set` (namespace create). The chunks hold nothing: a namespace's
    /// chunks are deallocated when it is deleted, before another can take them.
    pub fn assign_chunks(&mut self, chunks: &[u32], set: u32) {
        for &c in chunks {
            debug_assert_eq!(self.mapped_per_chunk[c as usize], 0, "chunk {c} still maps data");
            self.chunk_set[c as usize] = set as u8;
        }
    }

    /// Buffered-but-unmapped IUs in the given (sorted) chunks, from the last save.
    pub fn buffered_unmapped_saved(&self, chunks: &[u32]) -> u64 {
        self.buffered_unmapped.iter().filter(|(c, _)| chunks.binary_search(c).is_ok()).map(|&(_, n)| n as u64).sum()
    }
}

/// Where a host read found its data.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadSource {
    Buffer,
    Nand { ppa: PhysicalIu },
    Unmapped,
}

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

    // ------------------------------------------------------------------ host commands

    /// Host write of the sectors `mask` of logical IU `iu`.
    #[inline]
    pub fn write<S: NandSink>(&mut self, iu: LogicalIu, mask: u128, sink: &mut S) {
        let iu = iu.0;
        debug_assert!(iu < self.cfg.logical_ius, "IU {iu} beyond logical space");
        debug_assert!(mask != 0 && mask & !self.cfg.full_mask == 0, "bad sector mask {mask:#x}");
        let bytes = self.mask_bytes(mask) as u64;
        self.st.counters.host_write_bytes += bytes;
        let p = self.part_of(iu);
        let part = &mut self.st.parts[p];
        part.counters.host_write_bytes += bytes;
        match part.buffer.offer(iu, mask) {
            Offer::Merged => self.st.counters.buffer_merges += 1,
            Offer::Queued => {}
            Offer::Evicted(slot) => {
                // The slots that leave next: fetch their L2P lines now, a burst every
                // HOST_PREFETCH_BURST programs, so the misses overlap other work.
                // (Prefetching at insertion is useless: thousands of writes later the line
                // is long gone from cache.)
                if part.counters.host_programmed_ius % HOST_PREFETCH_BURST as u64 == 0 {
                    for k in HOST_PREFETCH_BURST..2 * HOST_PREFETCH_BURST {
                        if let Some(soon) = part.buffer.peek(k) {
                            self.l2p.prefetch(soon as usize);
                        }
                    }
                }
                self.program_slot(p, slot, sink)
            }
            Offer::WriteThrough(slot) => self.program_slot(p, slot, sink),
        }
    }

    /// Host read of the sectors `mask` of logical IU `iu`.
    #[inline]
    pub fn read<S: NandSink>(&mut self, iu: LogicalIu, mask: u128, sink: &mut S) -> ReadSource {
        let iu = iu.0;
        let bytes = self.mask_bytes(mask);
        self.st.counters.host_read_bytes += bytes as u64;
        let p = self.part_of(iu);
        let part = &mut self.st.parts[p];
        part.counters.host_read_bytes += bytes as u64;
        if let Some(m) = part.buffer.lookup(iu) {
            if m & mask == mask {
                self.st.counters.buffer_read_hits += 1;
                return ReadSource::Buffer;
            }
        }
        match self.mapped(iu) {
            Some(ppa) => {
                self.st.counters.nand_read_host_bytes += bytes as u64;
                sink.op(NandOp::Read { ppa, bytes, cause: Cause::Host });
                ReadSource::Nand { ppa: PhysicalIu(ppa) }
            }
            None => {
                self.st.counters.unmapped_reads += 1;
                ReadSource::Unmapped
            }
        }
    }

    /// Deallocate a whole logical IU (TRIM, format, namespace delete).
    /// Counted in `host_trim_ius` when the IU was mapped or waiting in the buffer.
    pub fn deallocate(&mut self, iu: LogicalIu) {
        self.deallocate_iu(iu.0)
    }

    fn deallocate_iu(&mut self, iu: u32) {
        let p = self.part_of(iu);
        let buffered = self.st.parts[p].buffer.discard(iu);
        let m = self.l2p[iu as usize];
        if m != 0 {
            let ppa = m - 1;
            self.l2p[iu as usize] = 0;
            self.p2l[ppa as usize] = 0;
            self.invalidate(ppa);
            self.st.mapped_per_chunk[(iu >> self.cfg.chunk_shift) as usize] -= 1;
        }
        if m != 0 || buffered {
            self.st.counters.host_trim_ius += 1;
        }
    }

    /// Deallocate `n` logical IUs from `start`; returns how many were mapped or buffered.
    pub fn deallocate_range(&mut self, start: LogicalIu, n: u32) -> u64 {
        let start = start.0;
        let before = self.st.counters.host_trim_ius;
        let buffered: Vec<u32> = self.all_slots().map(|s| s.iu).filter(|&iu| iu >= start && iu - start < n).collect();
        for iu in buffered {
            // Buffered only: count it here (the walk below skips chunks with nothing mapped).
            let p = self.part_of(iu);
            if self.st.parts[p].buffer.discard(iu) && self.l2p[iu as usize] == 0 {
                self.st.counters.host_trim_ius += 1;
            }
        }
        // Skip chunks with nothing mapped: deleting an empty namespace is free.
        let shift = self.cfg.chunk_shift;
        let mut iu = start;
        let end = start + n;
        while iu < end {
            let chunk_end = (((iu >> shift) + 1) << shift).min(end);
            if self.st.mapped_per_chunk[(iu >> shift) as usize] == 0 {
                iu = chunk_end;
                continue;
            }
            while iu < chunk_end {
                self.deallocate_iu(iu);
                iu += 1;
            }
        }
        self.st.counters.host_trim_ius - before
    }

    /// Program everything in the write buffer (orderly shutdown without PLP; tests).
    #[cfg(test)]
    pub fn drain_buffer<S: NandSink>(&mut self, sink: &mut S) {
        for p in 0..self.st.parts.len() {
            while let Some(slot) = self.st.parts[p].buffer.pop_oldest() {
                self.program_slot(p, slot, sink);
            }
        }
    }

    /// Idle-time GC: in each set in turn, collect victims until `target_free` superblocks
    /// of the set are free, moving at most `max_moves` valid IUs in all. Returns how many
    /// moved (0 = nothing to do). Called by the timed engine when the host is idle, so an
    /// idle drive recovers free space.
    pub fn background_gc<S: NandSink>(&mut self, target_free: usize, max_moves: u64, sink: &mut S) -> u64 {
        let mut moved = 0;
        for p in 0..self.st.parts.len() {
            if self.st.parts[p].gc_mode.deferred {
                continue;
            }
            let target_free = target_free + self.reserve_sbs(p);
            while moved < max_moves {
                if self.st.parts[p].victim.is_none() {
                    if self.st.parts[p].free.len() >= target_free || !self.idle_victim_pays(p) || !self.pick_victim(p, false, sink) {
                        break;
                    }
                    continue;
                }
                let want = max_moves - moved;
                let n = self.relocate(p, want, sink);
                moved += n;
                if n < want {
                    self.finish_victim(p, sink);
                }
            }
        }
        moved
    }

    /// Whole superblocks of set `p`'s free-space reserve (Predictable Latency Mode).
    #[inline]
    fn reserve_sbs(&self, p: usize) -> usize {
        self.st.parts[p].gc_mode.reserve_ius.div_ceil(self.cfg.ius_per_sb) as usize
    }

    /// Superblocks GC keeps free when the host is idle (the paced GC keeps about `GC_START`).
    pub const BACKGROUND_FREE_TARGET: usize = GC_START + 2;

    /// Whether idle GC may start on set `p`'s best victim: only if at least 1/`IDLE_MIN_INVALID_DEN`
    /// of it is invalid. Relocating a superblock with a share f invalid copies (1 − f)/f IUs
    /// per IU freed; on a full drive of nearly valid data (a sequential fill, a few random
    /// updates) rebuilding the idle surplus that way cost 46 NAND bytes per host byte with a
    /// mostly idle host (docs/models.md, Background GC). Foreground GC is not limited: when
    /// the host needs space it takes the best victim there is.
    fn idle_victim_pays(&mut self, p: usize) -> bool {
        let Some(sb) = self.choose_victim(p) else { return false };
        let per = u64::from(self.cfg.ius_per_sb);
        let invalid = per - u64::from(self.st.sbs[sb as usize].valid).min(per);
        invalid * IDLE_MIN_INVALID_DEN >= per
    }

    // ------------------------------------------------------------------ internals

    fn program_slot<S: NandSink>(&mut self, p: usize, slot: Slot, sink: &mut S) {
        // Allocate first: foreground GC may move the old copy we are about to read.
        let ppa = self.alloc_host(p, sink);
        sink.touch(MapTouch::HostL2p);
        let old = self.l2p[slot.iu as usize];
        if slot.mask != self.cfg.full_mask && old != 0 {
            let iu_bytes = self.cfg.iu_bytes;
            self.st.counters.rmw_ius += 1;
            self.st.counters.nand_read_rmw_bytes += iu_bytes as u64;
            sink.op(NandOp::Read { ppa: old - 1, bytes: iu_bytes, cause: Cause::Rmw });
        }
        let host_sb = self.st.parts[p].host.sb;
        self.remap(slot.iu, old, ppa, host_sb);
        self.st.counters.host_programmed_ius += 1;
        self.st.parts[p].counters.host_programmed_ius += 1;
        if self.st.parts[p].counters.host_programmed_ius % 1024 == 0 {
            self.sample_overhead(p);
        }
        sink.op(NandOp::Program { ppa, cause: Cause::Host });
        self.pace_gc(p, sink);
    }

    /// Samples the GC overhead of partition `p` (its free pool, open pages and relocated
    /// copies), the whole drive's with one partition. Partitions sample apart, each on its
    /// own programs, so none depends on another's progress (fast-forward runs them apart).
    #[cold]
    fn sample_overhead(&mut self, p: usize) {
        let per = self.cfg.ius_per_sb as u128;
        let part = &self.st.parts[p];
        let mut o = part.free.len() as u128 * per;
        for f in [part.host, part.gc] {
            if f.sb != NONE {
                o += per - f.next as u128;
            }
        }
        if let Some(v) = part.victim {
            o += v.moved as u128;
        }
        self.st.counters.overhead_sample_ius += o;
        self.st.counters.overhead_samples += 1;
        if self.st.parts.len() > 1 {
            let c = &mut self.st.parts[p].counters;
            c.overhead_sample_ius += o;
            c.overhead_samples += 1;
        }
    }

    #[inline(always)]
    fn sb_of(&self, ppa: u32) -> u32 {
        self.cfg.sb_div.quotient(ppa)
    }

    #[inline]
    fn invalidate(&mut self, ppa: u32) {
        let sb = self.sb_of(ppa);
        let s = &mut self.st.sbs[sb as usize];
        debug_assert!(s.valid > 0, "invalidating in superblock {sb} with no valid units");
        s.valid -= 1;
        if s.state == SbState::Closed {
            let valid = s.valid;
            let (p, local) = self.part_of_sb(sb);
            self.index[p].update(local, valid);
        }
    }

    /// Point logical `iu` (currently `old`, 0 = unmapped) at physical `ppa`, which lies
    /// in superblock `sb` (the caller knows it: a frontier).
    #[inline]
    fn remap(&mut self, iu: u32, old: u32, ppa: u32, sb: u32) {
        debug_assert_eq!(sb, self.sb_of(ppa));
        if old != 0 {
            self.invalidate(old - 1);
        } else {
            self.st.mapped_per_chunk[(iu >> self.cfg.chunk_shift) as usize] += 1;
        }
        self.l2p[iu as usize] = ppa + 1;
        self.p2l[ppa as usize] = iu + 1;
        self.st.sbs[sb as usize].valid += 1;
    }

    /// Next physical IU of set `p`'s host frontier, opening a superblock when needed (GC
    /// keeps its frontier in `relocate`).
    #[inline]
    fn alloc_host<S: NandSink>(&mut self, p: usize, sink: &mut S) -> u32 {
        let f = self.st.parts[p].host;
        let f = if f.sb == NONE || f.next == self.cfg.ius_per_sb { self.open_frontier(p, false, f.sb, sink) } else { f };
        let ppa = f.sb * self.cfg.ius_per_sb + f.next;
        self.st.sbs[f.sb as usize].written += 1;
        let part = &mut self.st.parts[p];
        part.program_seq += 1;
        part.host = Frontier { sb: f.sb, next: f.next + 1 };
        ppa
    }

    #[cold]
    fn open_frontier<S: NandSink>(&mut self, p: usize, gc: bool, full: u32, sink: &mut S) -> Frontier {
        if full != NONE {
            let seq = self.st.parts[p].program_seq;
            let s = &mut self.st.sbs[full as usize];
            s.state = SbState::Closed;
            s.closed_at = seq;
            let valid = s.valid;
            let (_, local) = self.part_of_sb(full);
            self.index[p].insert(local, valid);
        }
        if !gc {
            // Foreground GC: the host may not take the GC frontier's last superblock.
            let mut guard = 0u64;
            while self.st.parts[p].free.len() <= FREE_FLOOR {
                if self.st.parts[p].victim.is_none() && !self.pick_victim(p, true, sink) {
                    panic!(
                        "FTL out of space: no superblock of set {} can be reclaimed (free={}, closed={})",
                        p + 1,
                        self.st.parts[p].free.len(),
                        self.index[p].len()
                    );
                }
                while self.st.parts[p].victim.is_some() {
                    if !self.relocate_one(p, sink) {
                        self.finish_victim(p, sink);
                    }
                }
                guard += 1;
                assert!(guard < 10 * self.cfg.superblocks as u64 + 100, "foreground GC made no progress");
            }
        }
        let part = &mut self.st.parts[p];
        let &(ec, sb) = part.free.iter().next().expect("the GC frontier always finds a free superblock");
        part.free.remove(&(ec, sb));
        let s = &mut self.st.sbs[sb as usize];
        debug_assert_eq!(s.state, SbState::Free);
        debug_assert_eq!((s.valid, s.written), (0, 0));
        s.state = if gc { SbState::GcOpen } else { SbState::HostOpen };
        let mode = self.st.parts[p].gc_mode;
        if !mode.deferred && self.st.parts[p].victim.is_none() && self.st.parts[p].free.len() <= GC_START + self.reserve_sbs(p) {
            self.pick_victim(p, false, sink);
        }
        Frontier { sb, next: 0 }
    }

    /// Choose set `p`'s next GC victim. Returns false when no closed superblock would free space.
    fn pick_victim<S: NandSink>(&mut self, p: usize, foreground: bool, sink: &mut S) -> bool {
        debug_assert!(self.st.parts[p].victim.is_none());
        loop {
            let Some(sb) = self.choose_victim(p) else { return false };
            let valid = self.st.sbs[sb as usize].valid;
            if valid >= self.cfg.ius_per_sb {
                return false; // every closed superblock is full of valid data
            }
            let (_, local) = self.part_of_sb(sb);
            self.index[p].remove(local);
            self.st.sbs[sb as usize].state = SbState::Victim;
            self.st.counters.gc_victims += 1;
            if foreground {
                self.st.counters.foreground_gc_victims += 1;
            }
            self.st.parts[p].victim = Some(Victim { sb, cursor: 0, valid_at_pick: valid, credit: 0, moved: 0 });
            if valid > 0 {
                return true;
            }
            // Nothing to copy: erase at once and look again if still short.
            self.finish_victim(p, sink);
            if self.st.parts[p].free.len() > GC_START {
                return true;
            }
        }
    }

    /// The victim the policy picks in set `p` (a global superblock id).
    fn choose_victim(&mut self, p: usize) -> Option<u32> {
        let base = p as u32 * self.cfg.sbs_per_part;
        match self.cfg.policy {
            GcPolicy::Greedy => {
                let sbs = &self.st.sbs;
                self.index[p].min_valid(|s| sbs[(base + s) as usize].valid).map(|s| base + s)
            }
            GcPolicy::CostBenefit => {
                // (1-u)/(2u) × age; empty superblocks win outright. O(closed), see docs.
                let now = self.st.parts[p].program_seq;
                let per = self.cfg.ius_per_sb as f64;
                let mut best: Option<(f64, u32)> = None;
                for sb in self.index[p].members().map(|s| base + s) {
                    let s = &self.st.sbs[sb as usize];
                    let u = s.valid as f64 / per;
                    let score = if s.valid == 0 { f64::INFINITY } else { (1.0 - u) / (2.0 * u) * (now - s.closed_at + 1) as f64 };
                    if best.is_none_or(|(b, bsb)| score > b || (score == b && sb < bsb)) {
                        best = Some((score, sb));
                    }
                }
                best.map(|(_, sb)| sb)
            }
        }
    }

    /// Relocations earned by one host program of set `p` (see the module docs).
    #[inline]
    fn pace_gc<S: NandSink>(&mut self, p: usize, sink: &mut S) {
        // Feedback on the space the host can still write (free superblocks plus what is left
        // of its open one), steered towards GC_START + 1/2 superblocks. The rate multiplier
        // moves smoothly between 1/2 and 2 as that space moves by one superblock, so GC runs
        // continuously and evenly instead of toggling (which made throughput oscillate).
        let per = self.cfg.ius_per_sb as u64;
        let part = &mut self.st.parts[p];
        if part.gc_mode.deferred {
            return; // a deterministic window: the controller holds GC (nvme/plm.rs)
        }
        let host_left = if part.host.sb == NONE { 0 } else { per - part.host.next as u64 };
        let avail = part.free.len() as u64 * per + host_left;
        // A set in Predictable Latency Mode keeps its reserve on top (0 otherwise).
        let target = GC_START as u64 * per + per / 2 + part.gc_mode.reserve_ius as u64;
        let num = (per + target).saturating_sub(avail).clamp(per / 2, 2 * per);
        if part.victim.is_none() {
            // Only a set with a reserve can be left without a victim below its target (its
            // deterministic window just ended): start catching up at once.
            let reserve = part.gc_mode.reserve_ius > 0 && part.free.len() <= GC_START + 1 + self.reserve_sbs(p);
            if !reserve || !self.pick_victim(p, false, sink) {
                return;
            }
        }
        let Some(v) = self.st.parts[p].victim.as_mut() else { return };
        let gain = (self.cfg.ius_per_sb - v.valid_at_pick) as u64 * per;
        v.credit += v.valid_at_pick as u64 * num;
        if v.credit < gain {
            return;
        }
        let n = v.credit / gain;
        v.credit %= gain;
        if self.relocate(p, n, sink) < n {
            self.finish_victim(p, sink);
            // GC runs continuously in steady state (the rate control above keeps the pool
            // near its target); it stops only with a comfortable surplus.
            if self.st.parts[p].free.len() <= GC_START + 1 + self.reserve_sbs(p) {
                self.pick_victim(p, false, sink);
            }
        }
    }

    /// Move up to `n` valid IUs out of set `p`'s victim; returns how many moved (fewer means
    /// the victim holds no more valid data).
    ///
    /// The victim's cursor and valid count and the GC frontier are kept in locals and
    /// written back once, and also before a new GC frontier opens (closing the full one
    /// reads its counters and the program sequence): nothing else reads them while the
    /// copies run, and the writes per copy were a large share of GC's instructions.
    fn relocate<S: NandSink>(&mut self, p: usize, n: u64, sink: &mut S) -> u64 {
        let per = self.cfg.ius_per_sb;
        let iu_bytes = self.cfg.iu_bytes;
        let mut v = self.st.parts[p].victim.expect("relocate without a victim");
        let base = v.sb * per;
        let mut left = self.st.sbs[v.sb as usize].valid;
        let mut f = self.st.parts[p].gc;
        let mut taken = 0; // IUs programmed into `f` and not yet written back
        let mut moved = 0;
        while moved < n && v.cursor < per && left > 0 {
            let ppa = base + v.cursor;
            v.cursor += 1;
            // Each aligned burst's lines are fetched once, when the cursor enters the burst
            // GC_PREFETCH_AHEAD IUs before it.
            let at = v.cursor - 1;
            if at % GC_PREFETCH_BURST == 0 && at + GC_PREFETCH_AHEAD + GC_PREFETCH_BURST <= per {
                let from = (ppa + GC_PREFETCH_AHEAD) as usize;
                for &ahead in &self.p2l[from..from + GC_PREFETCH_BURST as usize] {
                    if ahead != 0 {
                        self.l2p.prefetch(ahead as usize - 1);
                    }
                }
            }
            let l = self.p2l[ppa as usize];
            if l == 0 {
                continue;
            }
            sink.touch(MapTouch::GcCheck);
            if self.l2p[(l - 1) as usize] != ppa + 1 {
                continue;
            }
            if f.sb == NONE || f.next == per {
                self.st.sbs[v.sb as usize].valid = left;
                self.gc_frontier_took(p, f, taken);
                taken = 0;
                f = self.open_frontier(p, true, f.sb, sink);
            }
            let dst = f.sb * per + f.next;
            f.next += 1;
            taken += 1;
            sink.op(NandOp::Read { ppa, bytes: iu_bytes, cause: Cause::Gc });
            left -= 1;
            self.l2p[(l - 1) as usize] = dst + 1;
            self.p2l[dst as usize] = l;
            sink.op(NandOp::Program { ppa: dst, cause: Cause::Gc });
            moved += 1;
        }
        self.st.sbs[v.sb as usize].valid = left;
        self.gc_frontier_took(p, f, taken);
        v.moved += moved as u32;
        self.st.parts[p].victim = Some(v);
        self.st.counters.nand_read_gc_bytes += moved * iu_bytes as u64;
        self.st.counters.gc_programmed_ius += moved;
        self.st.parts[p].counters.gc_programmed_ius += moved;
        moved
    }

    /// Partition `p`'s GC frontier is `f` after `taken` more IUs were copied into it (each
    /// written and valid, one program each).
    #[inline(always)]
    fn gc_frontier_took(&mut self, p: usize, f: Frontier, taken: u32) {
        if taken > 0 {
            let s = &mut self.st.sbs[f.sb as usize];
            s.written += taken;
            s.valid += taken;
            self.st.parts[p].program_seq += taken as u64;
        }
        self.st.parts[p].gc = f;
    }

    /// Move the next valid IU out of set `p`'s victim. False when the victim has none left.
    fn relocate_one<S: NandSink>(&mut self, p: usize, sink: &mut S) -> bool {
        self.relocate(p, 1, sink) == 1
    }

    fn finish_victim<S: NandSink>(&mut self, p: usize, sink: &mut S) {
        let v = self.st.parts[p].victim.take().expect("finish without a victim");
        let per = self.cfg.ius_per_sb as usize;
        let s = &mut self.st.sbs[v.sb as usize];
        debug_assert_eq!(s.valid, 0, "erasing superblock {} with valid data", v.sb);
        s.state = SbState::Free;
        s.written = 0;
        s.erase_count += 1;
        let ec = s.erase_count;
        let base = v.sb as usize * per;
        self.p2l[base..base + per].fill(0);
        self.st.parts[p].free.insert((ec, v.sb));
        self.st.counters.erases += 1;
        sink.op(NandOp::Erase { sb: v.sb });
    }

    // ------------------------------------------------------------------ checks

    /// Full consistency check of maps, counters and superblock states, per set and for the
    /// whole drive. O(capacity).
    pub fn check_invariants(&self) -> Result<(), String> {
        let cfg = &self.cfg;
        let per = cfg.ius_per_sb;
        let mut valid = vec![0u32; cfg.superblocks as usize];
        let mut mapped = vec![0u32; cfg.chunks() as usize];
        for (iu, &m) in self.l2p.iter().enumerate() {
            if m == 0 {
                continue;
            }
            let ppa = m - 1;
            if ppa >= cfg.physical_ius() {
                return Err(format!("l2p[{iu}] = {ppa} beyond physical space"));
            }
            if self.p2l[ppa as usize] != iu as u32 + 1 {
                return Err(format!("l2p[{iu}] = {ppa} but p2l[{ppa}] = {}", self.p2l[ppa as usize] as i64 - 1));
            }
            let sb = ppa / per;
            let (part, want) = (sb / cfg.sbs_per_part, self.part_of(iu as u32) as u32);
            if part != want {
                return Err(format!("l2p[{iu}] = {ppa} lies in partition {} but the IU belongs to partition {}", part + 1, want + 1));
            }
            valid[sb as usize] += 1;
            mapped[iu >> cfg.chunk_shift] += 1;
        }
        if mapped != self.st.mapped_per_chunk {
            return Err("mapped-per-chunk counters disagree with the L2P map".into());
        }
        for (i, s) in self.st.sbs.iter().enumerate() {
            if s.valid != valid[i] {
                return Err(format!("superblock {i} counts {} valid units, the maps say {}", s.valid, valid[i]));
            }
            if s.state == SbState::Closed {
                let (p, local) = self.part_of_sb(i as u32);
                if !self.index[p].contains(local) {
                    return Err(format!("closed superblock {i} is not indexed"));
                }
            }
        }
        self.st.check_cheap(cfg)?;
        for (p, part) in self.st.parts.iter().enumerate() {
            part.buffer.check()?;
            if let Some(s) = part.buffer.slots().find(|s| self.part_of(s.iu) != p) {
                return Err(format!(
                    "IU {} waits in partition {}'s buffer but belongs to partition {}",
                    s.iu,
                    p + 1,
                    self.part_of(s.iu) + 1
                ));
            }
            let base = p as u32 * cfg.sbs_per_part;
            self.index[p].check(|s| self.st.sbs[(base + s) as usize].valid)?;
        }
        Ok(())
    }
}

impl FtlState {
    fn fresh(cfg: &FtlConfig) -> FtlState {
        let part = |p: u32| Partition {
            free: cfg.part_superblocks(p).map(|sb| (0, sb)).collect(),
            host: Frontier { sb: NONE, next: 0 },
            gc: Frontier { sb: NONE, next: 0 },
            victim: None,
            buffer: WriteBuffer::new(cfg.part_buffer_slots()),
            program_seq: 0,
            counters: SetCounters::default(),
            gc_mode: GcMode::default(),
        };
        FtlState {
            sbs: (0..cfg.superblocks)
                .map(|_| Superblock { state: SbState::Free, valid: 0, written: 0, erase_count: 0, closed_at: 0 })
                .collect(),
            parts: (0..cfg.parts).map(part).collect(),
            parts_per_set: cfg.parts_per_set,
            part_stripe_shift: if cfg.parts_per_set > 1 { PART_STRIPE_IUS.trailing_zeros() } else { 0 },
            counters: FtlCounters::default(),
            mapped_per_chunk: vec![0; cfg.chunks() as usize],
            chunk_set: vec![0; cfg.chunks() as usize],
            buffered_unmapped: Vec::new(),
        }
    }

    /// Every invariant that needs no maps, per set and for the drive: superblock states
    /// against each set's free list, frontiers and victim; valid ≤ written ≤ superblock
    /// size; conservation of pages; valid units against mapped units; GC counters.
    /// O(superblocks + chunks): cheap enough to run before every commit and when a writer
    /// opens an image.
    pub fn check_cheap(&self, cfg: &FtlConfig) -> Result<(), String> {
        self.check_shape(cfg)?;
        let per = cfg.ius_per_sb;
        let (mut valid_sum, mut victims_all) = (0u64, 0usize);
        let (mut set_programmed, mut set_host_bytes) = (0u64, 0u64);
        for (p, part) in self.parts.iter().enumerate() {
            let (set_valid, victims) = self.check_set(cfg, p, part)?;
            valid_sum += set_valid;
            victims_all += victims;
            set_programmed += part.counters.host_programmed_ius + part.counters.gc_programmed_ius;
            set_host_bytes += part.counters.host_write_bytes;
        }
        let c = &self.counters;
        let programmed = c.host_programmed_ius + c.gc_programmed_ius;
        let written_now: u64 = self.sbs.iter().map(|s| s.written as u64).sum();
        let erased: u64 = self.sbs.iter().map(|s| s.erase_count as u64).sum();
        if programmed != written_now + erased * per as u64 {
            return Err(format!(
                "conservation: {programmed} IUs programmed, {written_now} in superblocks + {} erased",
                erased * per as u64
            ));
        }
        if (set_programmed, set_host_bytes) != (programmed, c.host_write_bytes) {
            return Err(format!(
                "the sets' counters ({set_programmed} IUs programmed, {set_host_bytes} host bytes written) disagree with the drive's ({programmed}, {})",
                c.host_write_bytes
            ));
        }
        let mapped: u64 = self.mapped_per_chunk.iter().map(|&m| m as u64).sum();
        if valid_sum != mapped {
            return Err(format!("superblocks count {valid_sum} valid units, the chunk counters {mapped} mapped units"));
        }
        if c.gc_victims != c.erases + victims_all as u64 {
            return Err(format!("{} GC victims picked but {} erased and {victims_all} being collected", c.gc_victims, c.erases));
        }
        if let Some((c, &s)) = self.chunk_set.iter().enumerate().find(|(_, &s)| s as u32 >= self.sets()) {
            return Err(format!("chunk {c} belongs to set {}, the drive has {}", s as u32 + 1, self.sets()));
        }
        Ok(())
    }

    /// The cheap invariants of set `p`: its superblocks against its free list, frontiers and
    /// victim, and conservation of its pages. Returns (valid units, victims being collected).
    fn check_set(&self, cfg: &FtlConfig, p: usize, part: &Partition) -> Result<(u64, usize), String> {
        let per = cfg.ius_per_sb;
        let range = cfg.part_superblocks(p as u32);
        let (mut host_open, mut gc_open, mut victims, mut free) = (0, 0, 0, 0usize);
        let (mut written_now, mut valid_sum, mut erased) = (0u64, 0u64, 0u64);
        for i in range.clone() {
            let s = &self.sbs[i as usize];
            if s.valid > s.written || s.written > per {
                return Err(format!("superblock {i} has {} valid of {} written (superblock size {per})", s.valid, s.written));
            }
            let ok = match s.state {
                SbState::Free => {
                    free += 1;
                    s.written == 0 && part.free.contains(&(s.erase_count, i))
                }
                SbState::HostOpen => {
                    host_open += 1;
                    part.host.sb == i && part.host.next == s.written
                }
                SbState::GcOpen => {
                    gc_open += 1;
                    part.gc.sb == i && part.gc.next == s.written
                }
                SbState::Closed => s.written == per,
                SbState::Victim => {
                    victims += 1;
                    part.victim.map(|v| v.sb) == Some(i)
                }
            };
            if !ok {
                return Err(format!(
                    "superblock {i} ({:?}, {} written, erase count {}) disagrees with set {}'s free list, frontiers or victim",
                    s.state,
                    s.written,
                    s.erase_count,
                    p + 1
                ));
            }
            written_now += s.written as u64;
            valid_sum += s.valid as u64;
            erased += s.erase_count as u64;
        }
        if free != part.free.len() || host_open > 1 || gc_open > 1 || victims > 1 {
            return Err(format!(
                "superblock states of set {}: {free} free (list {}), {host_open} host-open, {gc_open} gc-open, {victims} victims",
                p + 1,
                part.free.len()
            ));
        }
        for (f, open, name) in [(part.host, host_open, "host"), (part.gc, gc_open, "GC")] {
            if (f.sb != NONE) != (open == 1) {
                return Err(format!("the {name} frontier names superblock {} but {open} superblocks are open for it", f.sb as i64));
            }
        }
        let programmed = part.counters.host_programmed_ius + part.counters.gc_programmed_ius;
        if programmed != written_now + erased * per as u64 {
            return Err(format!(
                "conservation in set {}: {programmed} IUs programmed, {written_now} in superblocks + {} erased",
                p + 1,
                erased * per as u64
            ));
        }
        if part.buffer.live() > part.buffer.capacity() {
            return Err(format!("set {}'s write buffer holds {} slots of {}", p + 1, part.buffer.live(), part.buffer.capacity()));
        }
        Ok((valid_sum, victims))
    }

    /// Cross-check freshly loaded maps against this state in one sequential pass (no random
    /// access): per superblock, the units with a P2L entry must lie between the valid and
    /// the written count (a free superblock has none), and the L2P must map as many units
    /// as the chunk counters say. Maps saved with another state fail here, at load.
    pub fn check_loaded_maps(&self, cfg: &FtlConfig, l2p: &[u32], p2l: &[u32]) -> Result<(), String> {
        let per = cfg.ius_per_sb as usize;
        for (i, (s, p)) in self.sbs.iter().zip(p2l.chunks(per)).enumerate() {
            let used = p.iter().filter(|&&x| x != 0).count() as u32;
            if used < s.valid || used > s.written {
                return Err(format!(
                    "superblock {i} ({:?}) has {used} units in the P2L map, the state says {} valid of {} written",
                    s.state, s.valid, s.written
                ));
            }
        }
        let mapped_l2p = l2p.iter().filter(|&&x| x != 0).count() as u64;
        let mapped: u64 = self.mapped_per_chunk.iter().map(|&m| m as u64).sum();
        if mapped_l2p != mapped {
            return Err(format!("the L2P map has {mapped_l2p} mapped units, the state {mapped}"));
        }
        Ok(())
    }

    /// Sanity checks that need no maps (run on load to reject damaged images early).
    pub fn check_shape(&self, cfg: &FtlConfig) -> Result<(), String> {
        if self.sbs.len() != cfg.superblocks as usize {
            return Err(format!("{} superblocks recorded, geometry has {}", self.sbs.len(), cfg.superblocks));
        }
        if self.parts.len() != cfg.parts as usize || self.parts_per_set != cfg.parts_per_set {
            return Err(format!(
                "{} FTL partitions ({} per NVM Set) recorded, the spec has {} ({} per set)",
                self.parts.len(),
                self.parts_per_set,
                cfg.parts,
                cfg.parts_per_set
            ));
        }
        if self.mapped_per_chunk.len() != cfg.chunks() as usize || self.chunk_set.len() != cfg.chunks() as usize {
            return Err(format!(
                "{} chunk counters and {} chunk sets recorded, expected {}",
                self.mapped_per_chunk.len(),
                self.chunk_set.len(),
                cfg.chunks()
            ));
        }
        if let Some(p) = self.parts.iter().position(|p| p.buffer.capacity() != cfg.part_buffer_slots()) {
            return Err(format!("partition {}'s write-buffer size disagrees with the spec", p + 1));
        }
        for (p, part) in self.parts.iter().enumerate() {
            let range = cfg.part_superblocks(p as u32);
            let named = part.free.iter().map(|&(_, sb)| sb).chain([part.host.sb, part.gc.sb]).chain(part.victim.map(|v| v.sb));
            if let Some(sb) = named.filter(|&sb| sb != NONE).find(|sb| !range.contains(sb)) {
                return Err(format!("set {} names superblock {sb}, outside its superblocks {}..{}", p + 1, range.start, range.end));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
