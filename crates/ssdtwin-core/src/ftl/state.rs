//! The FTL's small state (everything but the two maps, [`FtlState`]): superblocks, the
//! partitions with their free lists, frontiers, victims and write buffers, the counters;
//! what an image saves, and the layouts it reads.

use super::{FtlConfig, NONE, PART_STRIPE_IUS};

use super::buffer::WriteBuffer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

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

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Frontier {
    pub(super) sb: u32,
    pub(super) next: u32,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Victim {
    pub(super) sb: u32,
    pub(super) cursor: u32,
    pub(super) valid_at_pick: u32,
    pub(super) credit: u64,
    /// IUs copied out so far (their old copies still occupy the victim until it is erased).
    #[serde(default)]
    pub(super) moved: u32,
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
    pub(super) fn add(&mut self, o: &SetCounters) {
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
    pub(super) free: BTreeSet<(u32, u32)>,
    pub(super) host: Frontier,
    pub(super) gc: Frontier,
    pub(super) victim: Option<Victim>,
    pub(super) buffer: WriteBuffer,
    pub(super) program_seq: u64,
    pub(super) counters: SetCounters,
    /// How the controller wants GC run in this set (Predictable Latency Mode, nvme/plm.rs).
    #[serde(default, skip_serializing_if = "GcMode::is_normal")]
    pub(super) gc_mode: GcMode,
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
    pub(super) sbs: Vec<Superblock>,
    /// `parts_per_set` partitions per NVM Set.
    pub(super) parts: Vec<Partition>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub(super) parts_per_set: u32,
    /// log2 of the IUs the partitions of a set take in turn: log2 [`PART_STRIPE_IUS`] on
    /// partitioned drives; 0 (stripes of one IU) on one partition, where it does not matter,
    /// and in images partitioned before the stripe was widened, which keep their layout.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub(super) part_stripe_shift: u32,
    pub(super) counters: FtlCounters,
    /// Mapped IUs per logical chunk (NUSE, per-namespace accounting).
    pub(super) mapped_per_chunk: Vec<u32>,
    /// The NVM Set of each logical chunk (all 0 with one set).
    pub(super) chunk_set: Vec<u8>,
    /// (chunk, IUs) of IUs waiting in the buffer that are not mapped yet, as of the last
    /// save: NUSE without loading the maps (the buffer cannot change while they are unloaded).
    pub(super) buffered_unmapped: Vec<(u32, u32)>,
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
    pub(super) fn set_parts(&self, set: u32) -> &[Partition] {
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

impl FtlState {
    pub(super) fn fresh(cfg: &FtlConfig) -> FtlState {
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
}
