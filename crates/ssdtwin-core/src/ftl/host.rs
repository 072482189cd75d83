//! Host commands (write, read, deallocate) and the program path under them: a buffer slot
//! leaves for NAND through the host frontier, superblocks are allocated least-worn first,
//! overwritten copies are invalidated.

use super::{Ftl, ReadSource, SbState, NONE};
use crate::units::{LogicalIu, PhysicalIu};

use super::buffer::{Offer, Slot};
use super::gc::{FREE_FLOOR, GC_START};
use super::state::Frontier;
use crate::nand::{Cause, MapTouch, NandOp, NandSink};

/// How far ahead the write paths fetch an evicted slot's L2P line, in slots. The pipelined
/// maps thread fetches one line per program, this many slots ahead; the serial path
/// (`Ftl::write`) fetches this many lines at once every this many programs. Bursts were
/// chosen on a VM whose page walks were slow ("Speed II: prefetches in bursts"). On a later
/// machine, bursts overran the core's outstanding misses on the maps thread, and one line
/// per program ran 14-19 % faster there. The serial path measured the same either way
/// (docs/performance.md, "GC's prefetches one IU at a time").
pub(super) const HOST_PREFETCH_BURST: usize = 16;

impl Ftl {
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

    /// Count `bytes` of host reads of NVM Set `set` served from NAND without looking them
    /// up (a read changes no mapping): the fast-forward of a converging timed run carries the
    /// reads of clones that only read this way. The set's partitions share them evenly, as
    /// uniformly spread reads do (the partitions take the IUs in turn).
    pub fn count_host_reads(&mut self, set: usize, bytes: u64) {
        self.st.counters.host_read_bytes += bytes;
        self.st.counters.nand_read_host_bytes += bytes;
        let k = self.cfg.parts_per_set as usize;
        let first = set << self.cfg.part_shift;
        let share = bytes / k as u64;
        for (i, part) in self.st.parts[first..first + k].iter_mut().enumerate() {
            part.counters.host_read_bytes += share + if i == 0 { bytes - share * k as u64 } else { 0 };
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

    pub(super) fn program_slot<S: NandSink>(&mut self, p: usize, slot: Slot, sink: &mut S) {
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
        let mut f = self.st.parts[p].host;
        if f.sb == NONE || f.next == self.cfg.ius_per_sb {
            f = self.open_frontier(p, false, f.sb, sink);
        }
        if self.cfg.die_parity {
            f = self.past_parity(p, f, false, sink);
        }
        let ppa = f.sb * self.cfg.ius_per_sb + f.next;
        self.st.sbs[f.sb as usize].written += 1;
        let part = &mut self.st.parts[p];
        part.program_seq += 1;
        part.host = Frontier { sb: f.sb, next: f.next + 1 };
        ppa
    }

    /// Frontier `f` of partition `p` (the GC one with `gc`) moved past any parity program
    /// units it has reached: each is programmed (its stripe's parity, no data) and counted
    /// as written, and a superblock that ends with one is closed and the next opened.
    #[cold]
    pub(super) fn past_parity<S: NandSink>(&mut self, p: usize, mut f: Frontier, gc: bool, sink: &mut S) -> Frontier {
        let (per, unit) = (self.cfg.ius_per_sb, self.cfg.ius_per_pu);
        loop {
            if f.next == per {
                f = self.open_frontier(p, gc, f.sb, sink);
            }
            if f.next % unit != 0 || !self.cfg.is_parity_unit(f.sb, f.next) {
                return f;
            }
            let base = f.sb * per + f.next;
            let cause = if gc { Cause::Gc } else { Cause::Host };
            for ppa in base..base + unit {
                sink.op(NandOp::Program { ppa, cause });
            }
            self.st.sbs[f.sb as usize].written += unit;
            self.st.counters.parity_programmed_ius += unit as u64;
            let part = &mut self.st.parts[p];
            part.counters.parity_programmed_ius += unit as u64;
            part.program_seq += unit as u64;
            f.next += unit;
        }
    }

    #[cold]
    pub(super) fn open_frontier<S: NandSink>(&mut self, p: usize, gc: bool, full: u32, sink: &mut S) -> Frontier {
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
}
