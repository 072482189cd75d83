//! The FTL's invariants: the full check against the maps (`ssdtwin check`, property tests)
//! and the cheap one on the small state alone (every commit, every writable open).

use super::{Ftl, FtlConfig, FtlState, Partition, SbState, NONE};

/// How a full check that its caller may stop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckEnd {
    /// Every invariant was checked and holds.
    Whole,
    /// The caller's `stop` answered true: the check ended before it had seen everything.
    Stopped,
}

/// Logical IUs the full check walks between two questions to its `stop`: 4 Mi entries, tens
/// of milliseconds, so a Ctrl-C ends a full-scale drive's check (a billion IUs) promptly.
pub(super) const CHECK_STOP_EVERY_IUS: usize = 1 << 22;

impl Ftl {
    /// Full consistency check of maps, counters and superblock states, per set and for the
    /// whole drive. O(capacity). (The controller's check asks to be stopped:
    /// [`Ftl::check_invariants_or_stop`].)
    #[cfg(test)]
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_invariants_or_stop(&mut || false).map(drop)
    }

    /// [`Ftl::check_invariants`], asking `stop` every [`CHECK_STOP_EVERY_IUS`] logical IUs of
    /// the walk over the L2P (the check's O(capacity) part) whether to end there. The check
    /// changes nothing, so ending it anywhere is safe; `Ok(CheckEnd::Stopped)` says that it
    /// proved nothing.
    pub fn check_invariants_or_stop(&self, stop: &mut dyn FnMut() -> bool) -> Result<CheckEnd, String> {
        let cfg = &self.cfg;
        let per = cfg.ius_per_sb;
        let mut valid = vec![0u32; cfg.superblocks as usize];
        let mut mapped = vec![0u32; cfg.chunks() as usize];
        // In runs of CHECK_STOP_EVERY_IUS: the inner loop stays as tight as one without a stop.
        for (run, ius) in self.l2p.chunks(CHECK_STOP_EVERY_IUS).enumerate() {
            if stop() {
                return Ok(CheckEnd::Stopped);
            }
            for (i, &m) in ius.iter().enumerate() {
                if m == 0 {
                    continue;
                }
                let iu = run * CHECK_STOP_EVERY_IUS + i;
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
        Ok(CheckEnd::Whole)
    }
}

impl FtlState {
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
            set_programmed += part.counters.host_programmed_ius + part.counters.gc_programmed_ius + part.counters.parity_programmed_ius;
            set_host_bytes += part.counters.host_write_bytes;
        }
        let c = &self.counters;
        let programmed = c.nand_programmed_ius();
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
        let programmed = part.counters.host_programmed_ius + part.counters.gc_programmed_ius + part.counters.parity_programmed_ius;
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
