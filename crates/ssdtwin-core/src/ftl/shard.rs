//! Fast-forward on several cores: the FTL's partitions run apart.
//!
//! A partition owns its logical IUs (every `parts_per_set`-th stripe of 16 IUs of its set,
//! so no L2P cache line is written by two threads), its superblocks (its die group's), its
//! write-buffer share, frontiers, victim and GC counters. A host write of one partition
//! reads and changes only what that partition owns (its L2P entries, its superblocks' P2L
//! entries and states) plus counters that only add up. So the partitions' writes can run on
//! different threads, each in stream order, and the result does not depend on how the
//! partitions are spread over threads, nor on how the threads interleave: it is the state
//! the same writes give one at a time (`tests.rs`, `partitioned_fast_forward_is_the_serial_run`).
//!
//! Each thread gets a shard: a copy of the small state and handles on the same maps
//! ([`BigArray::alias`]). Afterwards each shard's partitions, their superblocks and victim
//! indexes are taken back, and the drive-wide counters gain each shard's increments.
//!
//! A drive of one partition uses a second core another way ([`Ftl::write_pipelined`]): a
//! host write is first offered to the write buffer, which merges it or evicts the oldest
//! slot, and only an evicted slot reaches the maps and GC. The buffer's decisions depend on
//! the order of host writes alone, never on the maps, so one thread can run the buffer a
//! step ahead while another programs the slots it evicted, in the same order as one thread
//! doing both.
//!
//! A long fast-forward also runs a helper thread that faults in the map pages the writes are
//! about to touch ([`Ftl::with_maps_prefaulted`]): the kernel zeroes each new page on its
//! first write, which took about 40 % of the maps' thread's time in a sequential
//! precondition (CM6 at 1/4, docs/performance.md).

use super::buffer::{Offer, Slot, WriteBuffer};
use super::host::HOST_PREFETCH_BURST;
use super::{Ftl, FtlCounters, LogicalIu, MaskBytes};
use crate::bigarray::BigArray;
use crate::nand::{NandSink, ShardSink};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// Map entries faulted in per call (16 MiB of map): a stopped prefault ends within one.
const PREFAULT_PIECE_ENTRIES: usize = 4 << 20;

/// Host writes of the partitions one shard owns; writes to other partitions are skipped
/// (another shard does them).
pub struct PartWriter<'a, S: NandSink> {
    ftl: &'a mut Ftl,
    sink: &'a mut S,
    /// The shard of each partition, and this writer's shard (`None`: one shard, it owns all).
    owner: &'a [u16],
    shard: Option<u16>,
}

impl<S: NandSink> PartWriter<'_, S> {
    /// Host write of the sectors `mask` of logical IU `iu`, if its partition is this shard's.
    #[inline(always)]
    pub fn write(&mut self, iu: LogicalIu, mask: u128) {
        if self.shard.is_none_or(|s| self.owner[self.ftl.part_of(iu.0)] == s) {
            self.ftl.write(iu, mask, self.sink);
        }
    }
}

impl Ftl {
    /// Runs the host writes `emit` produces, partition by partition on up to `threads`
    /// threads. `emit` must produce the same writes in the same order each time it is called
    /// (it is called once per shard); what it returns is returned, the first shard's first.
    /// The drive's state is the same for every `threads`.
    pub fn write_partitioned<S, E, R>(&mut self, threads: usize, sink: &mut S, emit: E) -> Vec<R>
    where
        S: ShardSink,
        E: Fn(&mut PartWriter<'_, S>) -> R + Sync,
        R: Send,
    {
        let parts = self.cfg.parts as usize;
        let shards = threads.clamp(1, parts);
        let owner: Vec<u16> = (0..parts).map(|p| (p % shards) as u16).collect();
        if shards == 1 {
            return vec![emit(&mut PartWriter { ftl: self, sink, owner: &owner, shard: None })];
        }
        let before_counters = self.st.counters.clone();
        let before_mapped = self.st.mapped_per_chunk.clone();
        let mut forks: Vec<(Ftl, S)> = (0..shards).map(|_| (self.fork(), S::default())).collect();
        let results = std::thread::scope(|scope| {
            let workers: Vec<_> = forks
                .iter_mut()
                .enumerate()
                .map(|(shard, (ftl, sink))| {
                    let (owner, emit) = (&owner, &emit);
                    std::thread::Builder::new()
                        .name(format!("ssdtwin-ftl{shard}"))
                        .spawn_scoped(scope, move || emit(&mut PartWriter { ftl, sink, owner, shard: Some(shard as u16) }))
                        .expect("spawn a fast-forward thread")
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        for (shard, (fork, shard_sink)) in forks.into_iter().enumerate() {
            let owned: Vec<usize> = (0..parts).filter(|&p| owner[p] == shard as u16).collect();
            self.join(fork, &owned, &before_counters, &before_mapped);
            sink.absorb(shard_sink);
        }
        results
    }

    /// A shard: the small state copied, the maps shared.
    fn fork(&self) -> Ftl {
        Ftl {
            cfg: self.cfg.clone(),
            st: self.st.clone(),
            // SAFETY: shards touch only their own partitions' entries (module docs) and are
            // joined (dropped) before `write_partitioned` returns, while `self` lives.
            l2p: unsafe { self.l2p.alias() },
            p2l: unsafe { self.p2l.alias() },
            index: self.index.clone(),
            mask_bytes: self.mask_bytes,
        }
    }

    /// Take back partitions `owned` from `fork` and add its counter increments.
    fn join(&mut self, mut fork: Ftl, owned: &[usize], counters0: &FtlCounters, mapped0: &[u32]) {
        for &p in owned {
            let sbs = self.cfg.part_superblocks(p as u32);
            let sbs = sbs.start as usize..sbs.end as usize;
            self.st.sbs[sbs.clone()].clone_from_slice(&fork.st.sbs[sbs]);
            std::mem::swap(&mut self.st.parts[p], &mut fork.st.parts[p]);
            std::mem::swap(&mut self.index[p], &mut fork.index[p]);
        }
        self.st.counters.add_increments(&fork.st.counters, counters0);
        for ((m, &f), &m0) in self.st.mapped_per_chunk.iter_mut().zip(&fork.st.mapped_per_chunk).zip(mapped0) {
            *m = m.wrapping_add(f.wrapping_sub(m0));
        }
    }
}

/// The host side of a one-partition FTL's writes, run ahead of the maps on its own thread
/// ([`Ftl::write_pipelined`]): the write buffer, and the slots it evicted this step.
pub struct BufferStage {
    buffer: WriteBuffer,
    mask_bytes: MaskBytes,
    host_bytes: u64,
    merges: u64,
    evicted: Vec<Slot>,
}

impl BufferStage {
    /// Host write of the sectors `mask` of logical IU `iu`: what [`Ftl::write`] does before
    /// an evicted slot is programmed.
    #[inline(always)]
    pub fn write(&mut self, iu: LogicalIu, mask: u128) {
        self.host_bytes += self.mask_bytes.of(mask) as u64;
        match self.buffer.offer(iu.0, mask) {
            Offer::Merged => self.merges += 1,
            Offer::Queued => {}
            Offer::Evicted(slot) | Offer::WriteThrough(slot) => self.evicted.push(slot),
        }
    }
}

impl Ftl {
    /// Runs host writes with the write buffer on a second thread, a step ahead of the maps
    /// (module docs); one partition only. `produce` runs on that thread: each call writes one
    /// step through the [`BufferStage`] and returns what the step did, or `None` when there
    /// is nothing left. Once a step's evicted slots are programmed, on the calling thread,
    /// `consumed` is called with what `produce` returned for it; once it returns false no
    /// new step starts, and the steps already produced are still programmed (and passed to
    /// `consumed`), so the state is always that of the writes produced, one at a time.
    pub fn write_pipelined<S, P, C, R>(&mut self, sink: &mut S, mut produce: P, mut consumed: C)
    where
        S: NandSink,
        P: FnMut(&mut BufferStage) -> Option<R> + Send,
        C: FnMut(&R) -> bool,
        R: Send,
    {
        assert_eq!(self.cfg.parts, 1, "a pipelined write needs an FTL of one partition");
        let mut stage = BufferStage {
            buffer: std::mem::replace(&mut self.st.parts[0].buffer, WriteBuffer::new(0)),
            mask_bytes: self.mask_bytes,
            host_bytes: 0,
            merges: 0,
            evicted: Vec::new(),
        };
        let stop = AtomicBool::new(false);
        // One step waiting while the next is produced: the buffer runs at most two ahead.
        let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<Slot>, R)>(1);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<Slot>>();
        std::thread::scope(|scope| {
            let (stage, stop) = (&mut stage, &stop);
            let producer = std::thread::Builder::new()
                .name("ssdtwin-ffbuf".into())
                .spawn_scoped(scope, move || {
                    while !stop.load(Ordering::Relaxed) {
                        stage.evicted = empty_rx.try_recv().unwrap_or_default();
                        stage.evicted.clear();
                        let Some(r) = produce(stage) else { break };
                        if full_tx.send((std::mem::take(&mut stage.evicted), r)).is_err() {
                            break;
                        }
                    }
                })
                .expect("spawn a fast-forward thread");
            // Owned here, so that a panic below drops it and the producer's send fails
            // instead of blocking the scope's join.
            let full_rx = full_rx;
            for (slots, r) in full_rx.iter() {
                self.program_evicted(&slots, sink);
                if !consumed(&r) {
                    stop.store(true, Ordering::Relaxed);
                }
                let _ = empty_tx.send(slots);
            }
            producer.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        });
        let BufferStage { buffer, host_bytes, merges, .. } = stage;
        self.st.parts[0].buffer = buffer;
        self.st.counters.host_write_bytes += host_bytes;
        self.st.parts[0].counters.host_write_bytes += host_bytes;
        self.st.counters.buffer_merges += merges;
    }

    /// Program slots the write buffer evicted, in order, as [`Ftl::write`] would have.
    fn program_evicted<S: NandSink>(&mut self, slots: &[Slot], sink: &mut S) {
        for soon in slots.iter().take(HOST_PREFETCH_BURST) {
            self.l2p.prefetch(soon.iu as usize);
        }
        for (i, &slot) in slots.iter().enumerate() {
            if let Some(soon) = slots.get(i + HOST_PREFETCH_BURST) {
                self.l2p.prefetch(soon.iu as usize);
            }
            self.program_slot(0, slot, sink);
        }
    }
}

impl Ftl {
    /// Runs `f` while a helper thread faults in the map pages that `ius` host IU writes to
    /// the logical `chunks` will touch first (module docs): the L2P entries of the chunks,
    /// in order, and the P2L entries of the superblocks the writes will open first (each
    /// partition's free pool, lowest erase count first, as many as `ius` fills), alternating
    /// 16 MiB of each, since a write touches one entry of each. Faulting in changes no entry
    /// ([`BigArray::prefault`]), so the drive's state is the same as without; the helper
    /// stops when `f` returns (or unwinds) or when the kernel cannot prefault.
    pub fn with_maps_prefaulted<R>(&mut self, chunks: &[u32], ius: u64, f: impl FnOnce(&mut Ftl) -> R) -> R {
        let l2p_ranges = self.chunk_ranges(chunks);
        let p2l_ranges = self.first_free_ranges(ius);
        // SAFETY: the helper calls only `prefault` on its handles, which reads and writes no
        // entry; it is joined before this function returns, while `self` lives.
        let (l2p, p2l) = unsafe { (self.l2p.alias(), self.p2l.alias()) };
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let stop = &stop;
            std::thread::Builder::new()
                .name("ssdtwin-prefault".into())
                .spawn_scoped(scope, move || prefault_alternating([(&l2p, l2p_ranges), (&p2l, p2l_ranges)], stop))
                .expect("spawn a fast-forward thread");
            // Stops the helper however `f` ends; the scope then joins it.
            struct StopOnDrop<'a>(&'a AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _stop = StopOnDrop(stop);
            f(self)
        })
    }

    /// The L2P entries of logical `chunks`, adjacent chunks merged.
    pub(super) fn chunk_ranges(&self, chunks: &[u32]) -> Vec<Range<usize>> {
        let entries = 1usize << self.cfg.chunk_shift;
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for &c in chunks {
            let r = c as usize * entries..(c as usize + 1) * entries;
            match ranges.last_mut() {
                Some(last) if last.end == r.start => last.end = r.end,
                _ => ranges.push(r),
            }
        }
        ranges
    }

    /// The P2L entries of the free superblocks that `ius` programs open first, taking the
    /// partitions in turn (the writes spread over them alike).
    pub(super) fn first_free_ranges(&self, ius: u64) -> Vec<Range<usize>> {
        let per = self.cfg.ius_per_sb as usize;
        let free: usize = self.st.parts.iter().map(|p| p.free.len()).sum();
        let sbs = ius.div_ceil(per as u64).min(free as u64) as usize;
        let mut pools: Vec<_> = self.st.parts.iter().map(|p| p.free.iter()).collect();
        let mut ranges = Vec::with_capacity(sbs);
        while ranges.len() < sbs {
            for pool in &mut pools {
                if let Some(&(_, sb)) = pool.next() {
                    ranges.push(sb as usize * per..(sb as usize + 1) * per);
                }
            }
        }
        ranges.truncate(sbs);
        ranges
    }
}

/// Fault in each map's `ranges` in pieces, one piece of each map in turn, until done,
/// `stop`, or a map cannot be prefaulted.
fn prefault_alternating(maps: [(&BigArray, Vec<Range<usize>>); 2], stop: &AtomicBool) {
    let pieces = |ranges: Vec<Range<usize>>| {
        ranges.into_iter().flat_map(|r| r.clone().step_by(PREFAULT_PIECE_ENTRIES).map(move |s| s..(s + PREFAULT_PIECE_ENTRIES).min(r.end)))
    };
    let [(a, ra), (b, rb)] = maps;
    let (mut pa, mut pb) = (pieces(ra).fuse(), pieces(rb).fuse());
    loop {
        let (na, nb) = (pa.next(), pb.next());
        if na.is_none() && nb.is_none() {
            return;
        }
        for (map, piece) in [(a, na), (b, nb)] {
            let Some(piece) = piece else { continue };
            if stop.load(Ordering::Relaxed) || !map.prefault(piece) {
                return;
            }
        }
    }
}

impl FtlCounters {
    /// Add what `after` counts beyond `before` (every counter only grows).
    fn add_increments(&mut self, after: &FtlCounters, before: &FtlCounters) {
        // Destructured so that a new counter cannot be forgotten here.
        let FtlCounters {
            host_write_bytes,
            host_read_bytes,
            host_trim_ius,
            host_programmed_ius,
            gc_programmed_ius,
            parity_programmed_ius,
            nand_read_host_bytes,
            nand_read_rmw_bytes,
            nand_read_gc_bytes,
            rmw_ius,
            buffer_merges,
            buffer_read_hits,
            unmapped_reads,
            erases,
            gc_victims,
            foreground_gc_victims,
            overhead_sample_ius,
            overhead_samples,
        } = after;
        self.host_write_bytes += host_write_bytes - before.host_write_bytes;
        self.host_read_bytes += host_read_bytes - before.host_read_bytes;
        self.host_trim_ius += host_trim_ius - before.host_trim_ius;
        self.host_programmed_ius += host_programmed_ius - before.host_programmed_ius;
        self.gc_programmed_ius += gc_programmed_ius - before.gc_programmed_ius;
        self.parity_programmed_ius += parity_programmed_ius - before.parity_programmed_ius;
        self.nand_read_host_bytes += nand_read_host_bytes - before.nand_read_host_bytes;
        self.nand_read_rmw_bytes += nand_read_rmw_bytes - before.nand_read_rmw_bytes;
        self.nand_read_gc_bytes += nand_read_gc_bytes - before.nand_read_gc_bytes;
        self.rmw_ius += rmw_ius - before.rmw_ius;
        self.buffer_merges += buffer_merges - before.buffer_merges;
        self.buffer_read_hits += buffer_read_hits - before.buffer_read_hits;
        self.unmapped_reads += unmapped_reads - before.unmapped_reads;
        self.erases += erases - before.erases;
        self.gc_victims += gc_victims - before.gc_victims;
        self.foreground_gc_victims += foreground_gc_victims - before.foreground_gc_victims;
        self.overhead_sample_ius += overhead_sample_ius - before.overhead_sample_ius;
        self.overhead_samples += overhead_samples - before.overhead_samples;
    }
}
