//! Garbage collection: victims from the bucketed index (greedy, or cost-benefit), paced
//! relocation that earns credit from host programs, foreground GC as the safety net, and
//! idle-time GC (`background_gc`) that lets an idle drive build a surplus.

use super::{Ftl, SbState, NONE};

use super::state::{Frontier, Victim};
use crate::nand::{MapTouch, NandOp, NandSink};
use crate::spec::GcPolicy;

/// Host allocation never takes the last free superblock: it is kept for the GC frontier.
pub(super) const FREE_FLOOR: usize = 1;

/// Collection of a new victim starts when this few superblocks are free.
pub(super) const GC_START: usize = 2;

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

/// GC's victim scan prefetches the L2P line of the IU this many places ahead of its cursor,
/// one IU per step. One prefetch per step keeps a steady number of misses in flight. Bursts
/// of 24 or 32 prefetches at once (the scan's earlier form, chosen on a VM whose page walks
/// were slow) overran the core's outstanding misses on this machine (AMD EPYC, 2 vCPUs): the
/// scan then stalled on the L2P check as if a third of them were dropped, and fast-forward's
/// steady state ran 30-50 % slower (docs/performance.md, "GC's prefetches one IU at a time").
const GC_PREFETCH_AHEAD: u32 = 24;

impl Ftl {
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
    pub(super) fn reserve_sbs(&self, p: usize) -> usize {
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

    /// Choose set `p`'s next GC victim. Returns false when no closed superblock would free space.
    pub(super) fn pick_victim<S: NandSink>(&mut self, p: usize, foreground: bool, sink: &mut S) -> bool {
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
    pub(super) fn choose_victim(&mut self, p: usize) -> Option<u32> {
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
    pub(super) fn pace_gc<S: NandSink>(&mut self, p: usize, sink: &mut S) {
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
    pub(super) fn relocate<S: NandSink>(&mut self, p: usize, n: u64, sink: &mut S) -> u64 {
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
            if v.cursor + GC_PREFETCH_AHEAD <= per {
                let ahead = self.p2l[(ppa + GC_PREFETCH_AHEAD) as usize];
                if ahead != 0 {
                    self.l2p.prefetch(ahead as usize - 1);
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
            if self.cfg.die_parity && f.next % self.cfg.ius_per_pu == 0 {
                self.st.sbs[v.sb as usize].valid = left;
                self.gc_frontier_took(p, f, taken);
                taken = 0;
                f = self.past_parity(p, f, true, sink);
            }
            let dst = f.sb * per + f.next;
            f.next += 1;
            taken += 1;
            left -= 1;
            self.l2p[(l - 1) as usize] = dst + 1;
            self.p2l[dst as usize] = l;
            sink.gc_copy(ppa, dst, iu_bytes);
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
    pub(super) fn relocate_one<S: NandSink>(&mut self, p: usize, sink: &mut S) -> bool {
        self.relocate(p, 1, sink) == 1
    }

    pub(super) fn finish_victim<S: NandSink>(&mut self, p: usize, sink: &mut S) {
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
}
