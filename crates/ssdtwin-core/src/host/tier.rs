//! The write-shaping tier as a time-free state machine (docs/host.md).
//!
//! Like the FTL, the tier never sees time: a host write, read or trim changes its state at
//! once and returns what must happen on the drive and on the fast media; background work
//! comes out of [`Tier::next_destage`] as [`Destage`]s whose drive commands the caller
//! issues (and times) step by step, calling [`Tier::destage_done`] when the last step has
//! completed. The tier works in 4 KiB host blocks; byte offsets are offsets in the stack's
//! address space (for `iu-fill` the drive namespace's, for `log` the host-mapped space).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

/// The host block: the unit the tier maps (SPDK FTL's L2P granularity).
pub const BLOCK_BYTES: u64 = 4096;
const NONE: u32 = u32::MAX;
const FREE: u8 = 0;
const OPEN: u8 = 1;
const CLOSED: u8 = 2;

/// How the tier shapes writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// DAOS-like: coalesce per drive IU in place; destage full IUs; evict the oldest partial
    /// IUs above the high watermark; IU-sized aligned writes bypass.
    IuFill,
    /// CSAL/SPDK-FTL-like: append to a host log; destage full sequential stripes into a
    /// host-mapped area of the drive under the host's own 4 KiB mapping; host GC.
    Log,
}

impl Policy {
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "iu-fill" => Some(Policy::IuFill),
            "log" => Some(Policy::Log),
            _ => None,
        }
    }
}

/// The tier's parameters (stack.toml `[tier]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    pub policy: Policy,
    pub capacity_bytes: u64,
    /// Above this occupancy (percent of capacity) the tier evicts / compacts ...
    pub high_watermark_pct: u32,
    /// ... until it is below this one.
    pub low_watermark_pct: u32,
    /// Destages in flight at once.
    pub destage_concurrency: u32,
    /// The drive's indirection unit.
    pub iu_bytes: u64,
    /// The drive namespace the stack sits on.
    pub drive_bytes: u64,
    /// `log`: one destage write (a multiple of the IU).
    pub stripe_bytes: u64,
    /// `log`: the host GC unit (a multiple of the stripe).
    pub band_bytes: u64,
    /// `log`: the share of the drive area the host keeps spare for its GC (percent).
    pub host_op_pct: u32,
    /// `log`: the host-mapped area, from the namespace's start (0: the whole namespace).
    #[serde(default)]
    pub area_bytes: u64,
}

impl TierConfig {
    /// Every problem with the parameters, one line each naming the field (its key in
    /// stack.toml `[tier]` and state.json) and its range.
    pub fn problems(&self) -> Vec<String> {
        self.problems_named(&|key| key.to_string())
    }

    /// [`TierConfig::problems`] naming each field as `name(key)` says (the CLI's flags for
    /// `ssdtwin stack`: `--high-watermark`, not `high_watermark_pct`); a line names the
    /// field it is about first, then its value.
    pub fn problems_named(&self, name: &dyn Fn(&str) -> String) -> Vec<String> {
        let mut p = Vec::new();
        let iu = self.iu_bytes;
        if iu == 0 || iu % BLOCK_BYTES != 0 || iu / BLOCK_BYTES > 64 {
            p.push(format!("{} {iu}: a multiple of 4096 up to 256 KiB", name("iu_bytes")));
            return p;
        }
        let (high, low) = (name("high_watermark_pct"), name("low_watermark_pct"));
        if !(1..=100).contains(&self.high_watermark_pct) {
            p.push(format!("{high} {}: 1 to 100 (percent of the tier)", self.high_watermark_pct));
        }
        if self.low_watermark_pct >= self.high_watermark_pct {
            p.push(format!("{low} {}: 0 to {high} - 1 ({})", self.low_watermark_pct, self.high_watermark_pct.saturating_sub(1)));
        }
        if !(1..=1024).contains(&self.destage_concurrency) {
            p.push(format!("{} {}: 1 to 1024", name("destage_concurrency"), self.destage_concurrency));
        }
        let (min, cap) = (self.min_capacity_bytes(), name("capacity_bytes"));
        // What the tier fronts: it never holds more than that (iu-fill: the namespace's
        // blocks; log: the host-mapped area's, its volume and what the volume's rewrites
        // leave stale), so a larger tier never fills and its watermarks never act: most
        // likely a size for the full drive given to a scaled one.
        let (fronts, what) = match self.policy {
            Policy::IuFill => (self.drive_bytes, "the namespace it fronts".to_string()),
            Policy::Log if self.area_bytes == 0 || self.area_bytes >= self.drive_bytes => {
                (self.drive_bytes, "the namespace it maps".to_string())
            }
            Policy::Log => (self.area_bytes, format!("the host-mapped area ({})", name("area_bytes"))),
        };
        if self.capacity_bytes < min || self.capacity_bytes % BLOCK_BYTES != 0 {
            p.push(format!("{cap} {}: a multiple of 4096 from {min} (16 IUs or 4 stripes) to the media's maximum", self.capacity_bytes));
        } else if self.capacity_bytes > fronts && fronts < min {
            // A log's area that small holds fewer than 8 stripes, which its band check says.
            if self.policy == Policy::IuFill {
                p.push(format!("{cap} {}: {what} ({fronts} bytes) is smaller than the smallest tier ({min} bytes)", self.capacity_bytes));
            }
        } else if self.capacity_bytes > fronts {
            let most = fronts / BLOCK_BYTES * BLOCK_BYTES;
            p.push(format!(
                "{cap} {}: {min} to {most} bytes, {what}: a larger tier never fills (scale it with the drive)",
                self.capacity_bytes
            ));
        }
        if self.policy == Policy::Log {
            let (stripe, band, host_op, area) = (name("stripe_bytes"), name("band_bytes"), name("host_op_pct"), name("area_bytes"));
            // The area as the user gave it, or the namespace (all of it, by default).
            let area_is = if self.area_bytes == 0 {
                format!("the namespace ({} bytes)", self.area())
            } else {
                format!("the host-mapped area, {area} {}", self.area_bytes)
            };
            if self.stripe_bytes == 0 || self.stripe_bytes % iu != 0 {
                p.push(format!("{stripe} {}: a multiple of the drive's IU ({iu})", self.stripe_bytes));
            } else if self.band_bytes == 0 || self.band_bytes % self.stripe_bytes != 0 {
                p.push(format!("{band} {}: a multiple of {stripe} ({})", self.band_bytes, self.stripe_bytes));
            } else if self.area() / self.band_bytes.max(1) < 8 {
                p.push(format!("{band} {}: {area_is} must hold at least 8 bands", self.band_bytes));
            } else if (5..=50).contains(&self.host_op_pct) && !self.host_gc_can_always_collect(self.band_bytes) {
                let larger = format!("or raise {host_op} (the host GC must always find a band with a whole IU to collect)");
                let smaller = std::iter::successors(Some(self.band_bytes / 2), |b| Some(b / 2))
                    .take_while(|&b| b >= self.stripe_bytes && b % self.stripe_bytes == 0)
                    .find(|&b| self.host_gc_can_always_collect(b));
                p.push(match smaller {
                    Some(b) => format!(
                        "{band} {}: too few bands for {host_op} {} %: at most {b} bytes, {larger}",
                        self.band_bytes, self.host_op_pct
                    ),
                    None => format!(
                        "{band} {}: too few bands for {host_op} {} % even at the stripe: a larger area, {larger}",
                        self.band_bytes, self.host_op_pct
                    ),
                });
            }
            if self.area_bytes > self.drive_bytes {
                p.push(format!("{area} {}: at most the namespace's {} bytes", self.area_bytes, self.drive_bytes));
            }
            // The maps hold 32-bit block numbers (NONE = u32::MAX marks an empty entry): a
            // larger area would wrap them (and its maps could not be allocated anyway).
            if self.area() / BLOCK_BYTES >= NONE as u64 {
                let field = if self.area_bytes == 0 { name("drive_bytes") } else { area };
                let max = (NONE as u64 - 1) * BLOCK_BYTES;
                p.push(format!("{field} {}: the log tier maps at most {max} bytes (2^32 - 2 blocks of 4096)", self.area()));
            }
            if !(5..=50).contains(&self.host_op_pct) {
                p.push(format!("{host_op} {}: 5 to 50 (percent of the drive area)", self.host_op_pct));
            }
        }
        p
    }

    /// `log`: whether the host GC, with bands of `band_bytes`, always finds a closed band
    /// holding at least one IU that is not valid (its relocation, padded to whole IUs, then
    /// frees more than it takes: a band of nearly all valid blocks padded would take a whole
    /// band to free one, and the GC would turn for ever). It runs with at most one free band
    /// and two open ones, so the other bands, at least `bands - 3`, hold every valid block:
    /// if they cannot all be that full, one is worth collecting (pigeonhole).
    fn host_gc_can_always_collect(&self, band_bytes: u64) -> bool {
        let bands = self.area() / band_bytes;
        let (band_blocks, iu_blocks) = (band_bytes / BLOCK_BYTES, self.iu_bytes / BLOCK_BYTES);
        let user_blocks = bands * band_blocks * (100 - self.host_op_pct as u64) / 100;
        bands > 3 && band_blocks >= iu_blocks && user_blocks < (bands - 3) * (band_blocks - iu_blocks + 1)
    }

    /// `log`: the host-mapped area of the drive.
    pub fn area(&self) -> u64 {
        if self.area_bytes == 0 {
            self.drive_bytes
        } else {
            self.area_bytes.min(self.drive_bytes)
        }
    }

    pub(crate) fn min_capacity_bytes(&self) -> u64 {
        match self.policy {
            Policy::IuFill => 16 * self.iu_bytes,
            Policy::Log => 4 * self.stripe_bytes.max(self.iu_bytes),
        }
    }

    fn capacity_blocks(&self) -> u64 {
        self.capacity_bytes / BLOCK_BYTES
    }
}

/// One drive command, in bytes of the drive namespace.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DriveOp {
    Write { offset: u64, len: u64 },
    Read { offset: u64, len: u64 },
}

/// Where a destaged host block went: for the reference models of the tests, and what makes
/// a destage's drive writes checkable without data.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub user_block: u64,
    pub drive_block: u64,
    /// From the tier (destage, eviction) or from the drive itself (host GC).
    pub from_tier: bool,
}

/// Background work: steps of drive commands, each step issued when the previous completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destage {
    pub id: u64,
    pub steps: Vec<Vec<DriveOp>>,
    /// Fast-media bytes read to feed the drive writes.
    pub tier_read_bytes: u64,
    pub moves: Vec<Move>,
}

/// What a host write does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Done: `tier_bytes` written to the fast media, `drive` written straight to the drive.
    Accepted { tier_bytes: u64, drive: Vec<DriveOp> },
    /// The tier has no room: nothing changed; retry after a destage completes.
    Full,
}

/// Where a host read's blocks come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadPlan {
    pub tier_bytes: u64,
    pub drive: Vec<DriveOp>,
    /// Per block of the read, in order: `None` from the tier, `Some(drive block)` from the
    /// drive (for the tests' reference model).
    pub sources: Vec<Option<u64>>,
}

/// The tier's counters (bytes unless named otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierCounters {
    pub host_write_bytes: u64,
    pub host_read_bytes: u64,
    /// Host writes that went to the fast media.
    pub tier_write_bytes: u64,
    /// Host writes that went straight to the drive (IU-sized and aligned, `iu-fill`).
    pub bypass_bytes: u64,
    /// Tier writes that landed on a block still in the tier (absorbed: never reach the drive).
    pub overwrite_hit_bytes: u64,
    pub read_hit_bytes: u64,
    /// Full IUs (`iu-fill`) or stripes (`log`) written to the drive.
    pub destage_bytes: u64,
    /// Partial IUs written to the drive above the high watermark (`iu-fill`).
    pub evict_bytes: u64,
    pub evictions: u64,
    /// Tier copies dropped by a bypassing write or a trim.
    pub dropped_bytes: u64,
    /// `log`: blocks the host GC read back and rewrote, and padding to keep writes IU-aligned.
    pub gc_read_bytes: u64,
    pub gc_write_bytes: u64,
    pub pad_bytes: u64,
    /// Host writes that had to wait for room (counted by the engine, once per write).
    pub stalls: u64,
}

impl TierCounters {
    /// Bytes the stack wrote to the drive.
    pub fn drive_write_bytes(&self) -> u64 {
        self.bypass_bytes + self.destage_bytes + self.evict_bytes + self.gc_write_bytes + self.pad_bytes
    }
}

/// A tier: its parameters, its state, its counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tier {
    pub config: TierConfig,
    pub counters: TierCounters,
    next_id: u64,
    state: State,
    /// Tier blocks the last refused write needs (0: none waits). A write the tier has no
    /// room for makes it destage down to room for that write, whatever the watermarks say:
    /// below the high watermark (or at a high watermark of 100 %) nothing else would start a
    /// destage, and the write would wait for ever.
    #[serde(default, skip_serializing_if = "is_zero")]
    wanted_blocks: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
enum State {
    IuFill(IuFill),
    Log(LogTier),
}

impl Tier {
    /// A new, empty tier. The caller checks `config.problems()` first.
    pub fn new(config: TierConfig) -> Tier {
        let state = match config.policy {
            Policy::IuFill => State::IuFill(IuFill {
                per_iu: config.iu_bytes / BLOCK_BYTES,
                entries: BTreeMap::new(),
                order: BTreeMap::new(),
                full: VecDeque::new(),
                inflight: BTreeMap::new(),
                resident: 0,
                inflight_blocks: 0,
                next_seq: 0,
                evicting: false,
            }),
            Policy::Log => State::Log(LogTier::new(&config)),
        };
        Tier { config, counters: TierCounters::default(), next_id: 1, state, wanted_blocks: 0 }
    }

    /// The address space the stack offers the host.
    pub fn user_bytes(&self) -> u64 {
        match &self.state {
            State::IuFill(_) => self.config.drive_bytes,
            State::Log(l) => l.user_blocks * BLOCK_BYTES,
        }
    }

    /// Blocks the fast media holds now (including destages in flight).
    pub fn occupancy_blocks(&self) -> u64 {
        match &self.state {
            State::IuFill(s) => s.resident + s.inflight_blocks,
            State::Log(l) => l.log.len() as u64 + l.inflight_blocks,
        }
    }

    /// Blocks in the tier not yet destaged (the newest copy of each, once).
    pub fn resident_blocks(&self) -> u64 {
        match &self.state {
            State::IuFill(s) => s.resident,
            State::Log(l) => l.log_pos.len() as u64,
        }
    }

    /// Destages issued and not yet done.
    pub fn inflight(&self) -> usize {
        match &self.state {
            State::IuFill(s) => s.inflight.len(),
            State::Log(l) => l.inflight.len(),
        }
    }

    /// A host write of `len` bytes at `offset` (both multiples of 4 KiB, inside `user_bytes`).
    pub fn write(&mut self, offset: u64, len: u64) -> WriteOutcome {
        let cfg = &self.config;
        let (out, wanted) = match &mut self.state {
            State::IuFill(s) => s.write(cfg, &mut self.counters, offset, len),
            State::Log(l) => l.write(cfg, &mut self.counters, offset, len),
        };
        match &out {
            WriteOutcome::Accepted { .. } => {
                self.counters.host_write_bytes += len;
                self.wanted_blocks = 0;
            }
            WriteOutcome::Full => self.wanted_blocks = wanted,
        }
        out
    }

    /// A host read: where each block's newest copy is.
    pub fn read(&mut self, offset: u64, len: u64) -> ReadPlan {
        self.counters.host_read_bytes += len;
        let plan = match &self.state {
            State::IuFill(s) => s.read(offset, len),
            State::Log(l) => l.read(offset, len),
        };
        self.counters.read_hit_bytes += plan.tier_bytes;
        plan
    }

    /// A host trim: tier copies dropped; the drive commands to deallocate (`iu-fill` passes
    /// whole IUs through; `log` unmaps in its own map).
    pub fn trim(&mut self, offset: u64, len: u64) -> Vec<(u64, u64)> {
        let cfg = &self.config;
        match &mut self.state {
            State::IuFill(s) => s.trim(cfg, &mut self.counters, offset, len),
            State::Log(l) => {
                l.trim(&mut self.counters, offset, len);
                Vec::new()
            }
        }
    }

    /// The next background destage to start, if the tier wants one now. Call it while a
    /// destage lane is free; `None` means nothing to do until the next write or completion.
    pub fn next_destage(&mut self) -> Option<Destage> {
        let id = self.next_id;
        let cfg = &self.config;
        let wanted = self.wanted_blocks;
        let d = match &mut self.state {
            State::IuFill(s) => s.next_destage(cfg, &mut self.counters, id, wanted),
            State::Log(l) => l.next_destage(cfg, &mut self.counters, id, wanted),
        };
        if d.is_some() {
            self.next_id += 1;
        }
        d
    }

    /// Destage `id` has completed on the drive: its fast-media space is free.
    pub fn destage_done(&mut self, id: u64) {
        match &mut self.state {
            State::IuFill(s) => s.done(id),
            State::Log(l) => l.done(id),
        }
    }

    /// Checks the tier's own bookkeeping (the tests, and before a stack is saved).
    pub fn check(&self) -> Result<(), String> {
        match &self.state {
            State::IuFill(s) => s.check(&self.config),
            State::Log(l) => l.check(&self.config),
        }
    }

    /// Checks a tier read back from a saved state (state.json's `stack`) before it runs:
    /// its parameters (`TierConfig::problems`), that its state fits them (the policy, map
    /// and band sizes, every index in range: a hand-edited or damaged state otherwise
    /// panics on an index at the first destage), then [`Tier::check`].
    pub fn check_loaded(&self) -> Result<(), String> {
        let problems = self.config.problems();
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        match (&self.state, self.config.policy) {
            (State::IuFill(s), Policy::IuFill) => {
                if s.per_iu != IuFill::per_iu(&self.config) {
                    return Err(format!(
                        "iu-fill: {} blocks per IU, but iu_bytes {} makes {}",
                        s.per_iu,
                        self.config.iu_bytes,
                        IuFill::per_iu(&self.config)
                    ));
                }
            }
            (State::Log(l), Policy::Log) => l.check_shape(&self.config)?,
            (_, policy) => return Err(format!("the tier's state is not that of its policy {policy:?}")),
        }
        self.check()
    }
}

fn blocks_of(offset: u64, len: u64) -> std::ops::Range<u64> {
    offset / BLOCK_BYTES..(offset + len) / BLOCK_BYTES
}

/// Contiguous runs of set bits in `mask` (bit i = block i of the IU): (first, count).
fn runs(mask: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut m = mask;
    while m != 0 {
        let start = m.trailing_zeros() as u64;
        let ones = (m >> start).trailing_ones() as u64;
        out.push((start, ones));
        m &= if start + ones >= 64 { 0 } else { !0u64 << (start + ones) };
    }
    out
}

// ------------------------------------------------------------------------------ iu-fill

#[derive(Clone, Debug, Serialize, Deserialize)]
struct IuEntry {
    mask: u64,
    /// First arrival: the eviction order (oldest first).
    seq: u64,
    queued: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct IuFill {
    /// Blocks per IU.
    per_iu: u64,
    /// IU -> the blocks of it the tier holds (not yet destaged).
    entries: BTreeMap<u64, IuEntry>,
    /// First-arrival order of partial IUs: seq -> IU.
    order: BTreeMap<u64, u64>,
    /// Full IUs waiting for a destage lane.
    full: VecDeque<u64>,
    /// Destages in flight: id -> (IU, mask).
    inflight: BTreeMap<u64, (u64, u64)>,
    resident: u64,
    inflight_blocks: u64,
    next_seq: u64,
    /// Evicting until the occupancy falls below the low watermark.
    evicting: bool,
}

impl IuFill {
    fn per_iu(cfg: &TierConfig) -> u64 {
        cfg.iu_bytes / BLOCK_BYTES
    }

    fn full_mask(cfg: &TierConfig) -> u64 {
        let n = Self::per_iu(cfg);
        if n == 64 {
            !0
        } else {
            (1u64 << n) - 1
        }
    }

    /// (IU, mask) pieces of a block range.
    fn pieces(cfg: &TierConfig, blocks: std::ops::Range<u64>) -> Vec<(u64, u64)> {
        let n = Self::per_iu(cfg);
        let mut out: Vec<(u64, u64)> = Vec::new();
        for b in blocks {
            let (iu, bit) = (b / n, 1u64 << (b % n));
            match out.last_mut() {
                Some((i, m)) if *i == iu => *m |= bit,
                _ => out.push((iu, bit)),
            }
        }
        out
    }

    /// The outcome, and the tier blocks the write needs (what a refused write waits for).
    fn write(&mut self, cfg: &TierConfig, c: &mut TierCounters, offset: u64, len: u64) -> (WriteOutcome, u64) {
        let full = Self::full_mask(cfg);
        let pieces = Self::pieces(cfg, blocks_of(offset, len));
        let new_blocks: u64 = pieces
            .iter()
            .filter(|&&(_, m)| m != full)
            .map(|&(iu, m)| (m & !self.entries.get(&iu).map_or(0, |e| e.mask)).count_ones() as u64)
            .sum();
        if self.resident + self.inflight_blocks + new_blocks > cfg.capacity_blocks() {
            return (WriteOutcome::Full, new_blocks);
        }
        let mut drive = Vec::new();
        let mut tier_bytes = 0;
        for (iu, m) in pieces {
            if m == full {
                // IU-sized and aligned: straight to the drive; an older tier copy is stale.
                self.drop_iu(iu, full, c);
                c.bypass_bytes += cfg.iu_bytes;
                match drive.last_mut() {
                    Some(DriveOp::Write { offset, len }) if *offset + *len == iu * cfg.iu_bytes => *len += cfg.iu_bytes,
                    _ => drive.push(DriveOp::Write { offset: iu * cfg.iu_bytes, len: cfg.iu_bytes }),
                }
                continue;
            }
            let bytes = m.count_ones() as u64 * BLOCK_BYTES;
            tier_bytes += bytes;
            c.tier_write_bytes += bytes;
            let seq = self.next_seq;
            let e = self.entries.entry(iu).or_insert_with(|| IuEntry { mask: 0, seq, queued: false });
            if e.mask == 0 {
                self.order.insert(seq, iu);
                self.next_seq += 1;
            }
            c.overwrite_hit_bytes += (e.mask & m).count_ones() as u64 * BLOCK_BYTES;
            self.resident += (m & !e.mask).count_ones() as u64;
            e.mask |= m;
            if e.mask == full && !e.queued {
                e.queued = true;
                let s = e.seq;
                self.order.remove(&s);
                self.full.push_back(iu);
            }
        }
        (WriteOutcome::Accepted { tier_bytes, drive }, new_blocks)
    }

    /// Drop the tier's copy of `mask`'s blocks of `iu` (newer data went to the drive).
    fn drop_iu(&mut self, iu: u64, mask: u64, c: &mut TierCounters) {
        let Some(e) = self.entries.get_mut(&iu) else { return };
        let gone = (e.mask & mask).count_ones() as u64;
        e.mask &= !mask;
        self.resident -= gone;
        c.dropped_bytes += gone * BLOCK_BYTES;
        if e.mask == 0 || e.queued {
            // A queued full IU that lost blocks is partial again: back in the age order.
            let e = self.entries.remove(&iu).expect("present");
            self.order.remove(&e.seq);
            if e.queued {
                self.full.retain(|&x| x != iu);
            }
            if e.mask != 0 {
                self.order.insert(e.seq, iu);
                self.entries.insert(iu, IuEntry { mask: e.mask, seq: e.seq, queued: false });
            }
        }
    }

    fn read(&self, offset: u64, len: u64) -> ReadPlan {
        let mut plan = ReadPlan::default();
        for b in blocks_of(offset, len) {
            if self.holds(b) {
                plan.tier_bytes += BLOCK_BYTES;
                plan.sources.push(None);
            } else {
                let o = b * BLOCK_BYTES;
                match plan.drive.last_mut() {
                    Some(DriveOp::Read { offset, len }) if *offset + *len == o => *len += BLOCK_BYTES,
                    _ => plan.drive.push(DriveOp::Read { offset: o, len: BLOCK_BYTES }),
                }
                plan.sources.push(Some(b));
            }
        }
        plan
    }

    /// Whether the tier holds the newest copy of block `b` (not counting destages in flight:
    /// the drive already has those, the engine applies a drive write when it issues it).
    fn holds(&self, b: u64) -> bool {
        let n = self.per_iu;
        self.entries.get(&(b / n)).is_some_and(|e| e.mask & (1 << (b % n)) != 0)
    }

    fn trim(&mut self, cfg: &TierConfig, c: &mut TierCounters, offset: u64, len: u64) -> Vec<(u64, u64)> {
        for (iu, m) in Self::pieces(cfg, blocks_of(offset, len)) {
            self.drop_iu(iu, m, c);
        }
        vec![(offset, len)]
    }

    fn next_destage(&mut self, cfg: &TierConfig, c: &mut TierCounters, id: u64, wanted: u64) -> Option<Destage> {
        let n = Self::per_iu(cfg);
        if let Some(iu) = self.full.pop_front() {
            let e = self.entries.remove(&iu).expect("a queued IU is an entry");
            return Some(self.issue(cfg, c, id, iu, e.mask, n, true));
        }
        let cap = cfg.capacity_blocks();
        let occ = self.resident + self.inflight_blocks;
        // A refused write that the destages in flight cannot make room for.
        let pressed = wanted > 0 && self.resident + wanted > cap;
        if pressed || occ * 100 > cap * cfg.high_watermark_pct as u64 {
            self.evicting = true;
        }
        if self.evicting && !pressed && self.resident * 100 <= cap * cfg.low_watermark_pct as u64 {
            self.evicting = false;
        }
        if !self.evicting {
            return None;
        }
        let (&seq, &iu) = self.order.iter().next()?;
        self.order.remove(&seq);
        let e = self.entries.remove(&iu).expect("an ordered IU is an entry");
        Some(self.issue(cfg, c, id, iu, e.mask, n, false))
    }

    #[allow(clippy::too_many_arguments)]
    fn issue(&mut self, cfg: &TierConfig, c: &mut TierCounters, id: u64, iu: u64, mask: u64, n: u64, whole: bool) -> Destage {
        let blocks = mask.count_ones() as u64;
        self.resident -= blocks;
        self.inflight_blocks += blocks;
        self.inflight.insert(id, (iu, mask));
        let base = iu * n;
        let step: Vec<DriveOp> =
            runs(mask).into_iter().map(|(s, k)| DriveOp::Write { offset: (base + s) * BLOCK_BYTES, len: k * BLOCK_BYTES }).collect();
        let moves = runs(mask)
            .into_iter()
            .flat_map(|(s, k)| (base + s..base + s + k).map(|b| Move { user_block: b, drive_block: b, from_tier: true }))
            .collect();
        if whole {
            c.destage_bytes += cfg.iu_bytes;
        } else {
            c.evict_bytes += blocks * BLOCK_BYTES;
            c.evictions += 1;
        }
        Destage { id, steps: vec![step], tier_read_bytes: blocks * BLOCK_BYTES, moves }
    }

    fn done(&mut self, id: u64) {
        if let Some((_, mask)) = self.inflight.remove(&id) {
            self.inflight_blocks -= mask.count_ones() as u64;
        }
    }

    fn check(&self, cfg: &TierConfig) -> Result<(), String> {
        let full = Self::full_mask(cfg);
        let resident: u64 = self.entries.values().map(|e| e.mask.count_ones() as u64).sum();
        if resident != self.resident {
            return Err(format!("iu-fill: resident count {} but entries hold {resident}", self.resident));
        }
        let inflight: u64 = self.inflight.values().map(|(_, m)| m.count_ones() as u64).sum();
        if inflight != self.inflight_blocks {
            return Err(format!("iu-fill: in-flight count {} but destages hold {inflight}", self.inflight_blocks));
        }
        for (iu, e) in &self.entries {
            if e.mask == 0 {
                return Err(format!("iu-fill: IU {iu} is an empty entry"));
            }
            let ordered = self.order.get(&e.seq) == Some(iu);
            if e.queued != (e.mask == full) || e.queued == ordered {
                return Err(format!("iu-fill: IU {iu} is queued={} full={} ordered={ordered}", e.queued, e.mask == full));
            }
        }
        if self.order.len() + self.full.len() != self.entries.len() {
            return Err("iu-fill: age order and full queue do not cover the entries".into());
        }
        if self.resident + self.inflight_blocks > cfg.capacity_blocks() {
            return Err("iu-fill: more blocks than the capacity".into());
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------ log

/// The host log on the fast media, and the host-mapped area of the drive.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct LogTier {
    user_blocks: u64,
    band_blocks: u64,
    stripe_blocks: u64,
    iu_blocks: u64,
    /// Appended (user block, log seq); stale entries are skipped at destage.
    log: VecDeque<(u64, u64)>,
    /// User block -> seq of its newest log entry.
    log_pos: BTreeMap<u64, u64>,
    next_seq: u64,
    /// Host L2P: user block -> drive block (NONE: not on the drive).
    #[serde(with = "hex_u32s")]
    l2p: Vec<u32>,
    /// Drive block -> user block (NONE: free or stale).
    #[serde(with = "hex_u32s")]
    p2l: Vec<u32>,
    band_valid: Vec<u32>,
    /// Per band: FREE, OPEN (a frontier writes it) or CLOSED (SPDK FTL's band states).
    band_state: Vec<u8>,
    free_bands: VecDeque<u32>,
    /// Write frontiers (drive block), user and GC: separate streams, as the FTL's.
    user_front: Option<u64>,
    gc_front: Option<u64>,
    inflight: BTreeMap<u64, u64>,
    inflight_blocks: u64,
    compacting: bool,
}

/// The sizes of a log tier of given parameters.
struct LogShape {
    user_blocks: u64,
    band_blocks: u64,
    stripe_blocks: u64,
    iu_blocks: u64,
    bands: u64,
    drive_blocks: u64,
}

impl LogTier {
    fn new_shape(cfg: &TierConfig) -> LogShape {
        let band_blocks = cfg.band_bytes / BLOCK_BYTES;
        let bands = cfg.area() / cfg.band_bytes;
        let drive_blocks = bands * band_blocks;
        let user_blocks = drive_blocks * (100 - cfg.host_op_pct as u64) / 100;
        LogShape {
            user_blocks,
            band_blocks,
            stripe_blocks: cfg.stripe_bytes / BLOCK_BYTES,
            iu_blocks: cfg.iu_bytes / BLOCK_BYTES,
            bands,
            drive_blocks,
        }
    }

    fn new(cfg: &TierConfig) -> LogTier {
        let LogShape { user_blocks, band_blocks, stripe_blocks, iu_blocks, bands, drive_blocks } = LogTier::new_shape(cfg);
        LogTier {
            user_blocks,
            band_blocks,
            stripe_blocks,
            iu_blocks,
            log: VecDeque::new(),
            log_pos: BTreeMap::new(),
            next_seq: 0,
            l2p: vec![NONE; user_blocks as usize],
            p2l: vec![NONE; drive_blocks as usize],
            band_valid: vec![0; bands as usize],
            band_state: vec![FREE; bands as usize],
            free_bands: (0..bands as u32).collect(),
            user_front: None,
            gc_front: None,
            inflight: BTreeMap::new(),
            inflight_blocks: 0,
            compacting: false,
        }
    }

    /// The outcome, and the tier blocks the write needs (what a refused write waits for).
    fn write(&mut self, cfg: &TierConfig, c: &mut TierCounters, offset: u64, len: u64) -> (WriteOutcome, u64) {
        let n = len / BLOCK_BYTES;
        if self.log.len() as u64 + self.inflight_blocks + n > cfg.capacity_blocks() {
            // Stale entries at the head cost nothing to drop.
            self.drop_stale_head();
            if self.log.len() as u64 + self.inflight_blocks + n > cfg.capacity_blocks() {
                return (WriteOutcome::Full, n);
            }
        }
        for b in blocks_of(offset, len) {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.log.push_back((b, seq));
            if self.log_pos.insert(b, seq).is_some() {
                c.overwrite_hit_bytes += BLOCK_BYTES;
            }
        }
        c.tier_write_bytes += len;
        (WriteOutcome::Accepted { tier_bytes: len, drive: Vec::new() }, n)
    }

    fn drop_stale_head(&mut self) {
        while let Some(&(b, seq)) = self.log.front() {
            if self.log_pos.get(&b) == Some(&seq) {
                break;
            }
            self.log.pop_front();
        }
    }

    fn read(&self, offset: u64, len: u64) -> ReadPlan {
        let mut plan = ReadPlan::default();
        for b in blocks_of(offset, len) {
            if self.log_pos.contains_key(&b) {
                plan.tier_bytes += BLOCK_BYTES;
                plan.sources.push(None);
                continue;
            }
            let p = self.l2p[b as usize];
            if p == NONE {
                // Never written: nothing to read anywhere (a deallocated block reads zeroes).
                plan.sources.push(Some(u64::MAX));
                continue;
            }
            let o = p as u64 * BLOCK_BYTES;
            match plan.drive.last_mut() {
                Some(DriveOp::Read { offset, len }) if *offset + *len == o => *len += BLOCK_BYTES,
                _ => plan.drive.push(DriveOp::Read { offset: o, len: BLOCK_BYTES }),
            }
            plan.sources.push(Some(p as u64));
        }
        plan
    }

    fn trim(&mut self, c: &mut TierCounters, offset: u64, len: u64) {
        for b in blocks_of(offset, len) {
            if self.log_pos.remove(&b).is_some() {
                c.dropped_bytes += BLOCK_BYTES;
            }
            self.unmap(b);
        }
    }

    fn unmap(&mut self, b: u64) {
        let p = std::mem::replace(&mut self.l2p[b as usize], NONE);
        if p != NONE {
            self.p2l[p as usize] = NONE;
            self.band_valid[(p as u64 / self.band_blocks) as usize] -= 1;
        }
    }

    fn next_destage(&mut self, cfg: &TierConfig, c: &mut TierCounters, id: u64, wanted: u64) -> Option<Destage> {
        // Host GC first when the free bands run short: user destage needs somewhere to go.
        if self.free_bands.len() < 3 {
            if let Some(d) = self.gc(c, id) {
                return Some(d);
            }
        }
        self.drop_stale_head();
        let cap = cfg.capacity_blocks();
        let occ = self.log.len() as u64 + self.inflight_blocks;
        // A refused write that the destages in flight cannot make room for.
        let pressed = wanted > 0 && self.log.len() as u64 + wanted > cap;
        if pressed || occ * 100 > cap * cfg.high_watermark_pct as u64 {
            self.compacting = true;
        }
        if self.compacting && !pressed && self.log.len() as u64 * 100 <= cap * cfg.low_watermark_pct as u64 {
            self.compacting = false;
        }
        let valid = self.log_pos.len() as u64;
        // Full stripes leave once the log is past its low watermark (recent data stays for
        // overwrites); under pressure a short stripe leaves too, padded to the IU.
        let want = if valid >= self.stripe_blocks && (self.compacting || occ * 100 > cap * cfg.low_watermark_pct as u64) {
            self.stripe_blocks
        } else if self.compacting && valid > 0 {
            valid.min(self.stripe_blocks)
        } else {
            return None;
        };
        // Somewhere to put them, the last free band left to the host GC (which needs one to
        // free any): taking it would leave the GC nowhere to relocate to and the log stuck.
        if self.room(self.user_front) + self.free_bands.len().saturating_sub(1) as u64 * self.band_blocks
            < want.next_multiple_of(self.iu_blocks)
        {
            return None;
        }
        let mut blocks = Vec::with_capacity(want as usize);
        while (blocks.len() as u64) < want {
            let (b, seq) = self.log.pop_front().expect("valid entries remain");
            if self.log_pos.get(&b) == Some(&seq) {
                self.log_pos.remove(&b);
                blocks.push(b);
            }
        }
        let n = blocks.len() as u64;
        let pad = n.next_multiple_of(self.iu_blocks) - n;
        let (step, moves) = self.place(&blocks, pad, false)?;
        c.destage_bytes += n * BLOCK_BYTES;
        c.pad_bytes += pad * BLOCK_BYTES;
        self.inflight.insert(id, n);
        self.inflight_blocks += n;
        Some(Destage { id, steps: vec![step], tier_read_bytes: n * BLOCK_BYTES, moves })
    }

    /// Relocate the valid blocks of the emptiest closed band, if one is worth it.
    fn gc(&mut self, c: &mut TierCounters, id: u64) -> Option<Destage> {
        let victim = (0..self.band_valid.len() as u64)
            .filter(|&b| self.band_state[b as usize] == CLOSED)
            .min_by_key(|&b| (self.band_valid[b as usize], b))?;
        // Relocated and padded to whole IUs, a victim of nearly all valid blocks would take
        // as much room as it frees: collecting it gains nothing and the GC would turn for ever.
        if (self.band_valid[victim as usize] as u64).next_multiple_of(self.iu_blocks) >= self.band_blocks {
            return None;
        }
        let base = victim * self.band_blocks;
        let blocks: Vec<u64> =
            (base..base + self.band_blocks).map(|p| self.p2l[p as usize]).filter(|&u| u != NONE).map(u64::from).collect();
        let mut reads: Vec<DriveOp> = Vec::new();
        for p in base..base + self.band_blocks {
            if self.p2l[p as usize] == NONE {
                continue;
            }
            let o = p * BLOCK_BYTES;
            match reads.last_mut() {
                Some(DriveOp::Read { offset, len }) if *offset + *len == o => *len += BLOCK_BYTES,
                _ => reads.push(DriveOp::Read { offset: o, len: BLOCK_BYTES }),
            }
        }
        let n = blocks.len() as u64;
        let pad = n.next_multiple_of(self.iu_blocks) - n;
        if self.room(self.gc_front) + self.free_bands.len() as u64 * self.band_blocks < n + pad {
            return None;
        }
        let (write, moves) = self.place(&blocks, pad, true)?;
        debug_assert_eq!(self.band_valid[victim as usize], 0);
        self.band_state[victim as usize] = FREE;
        self.free_bands.push_back(victim as u32);
        c.gc_read_bytes += n * BLOCK_BYTES;
        c.gc_write_bytes += n * BLOCK_BYTES;
        c.pad_bytes += pad * BLOCK_BYTES;
        self.inflight.insert(id, 0);
        let steps = if reads.is_empty() { vec![write] } else { vec![reads, write] };
        Some(Destage { id, steps, tier_read_bytes: 0, moves })
    }

    /// Blocks left in the open band of a write frontier.
    fn room(&self, front: Option<u64>) -> u64 {
        match front {
            Some(f) if f % self.band_blocks != 0 => self.band_blocks - f % self.band_blocks,
            _ => 0,
        }
    }

    /// Give `blocks` (+ `pad` dead blocks) sequential drive blocks on the user or GC frontier
    /// and map them; the drive writes that put them there. The caller checked there is room
    /// (`room` and the free bands): a placement that ran out of bands half-way would leave
    /// blocks mapped to drive blocks never written.
    fn place(&mut self, blocks: &[u64], pad: u64, gc: bool) -> Option<(Vec<DriveOp>, Vec<Move>)> {
        let total = blocks.len() as u64 + pad;
        let mut ops: Vec<DriveOp> = Vec::new();
        let mut moves = Vec::with_capacity(blocks.len());
        for i in 0..total {
            let front = if gc { &mut self.gc_front } else { &mut self.user_front };
            let p = match *front {
                Some(f) if f % self.band_blocks != 0 => f,
                _ => {
                    let band = self.free_bands.pop_front()?;
                    self.band_state[band as usize] = OPEN;
                    band as u64 * self.band_blocks
                }
            };
            *front = Some(p + 1);
            if (p + 1) % self.band_blocks == 0 {
                self.band_state[(p / self.band_blocks) as usize] = CLOSED;
            }
            if let Some(&b) = blocks.get(i as usize) {
                self.unmap(b);
                self.l2p[b as usize] = p as u32;
                self.p2l[p as usize] = b as u32;
                self.band_valid[(p / self.band_blocks) as usize] += 1;
                moves.push(Move { user_block: b, drive_block: p, from_tier: !gc });
            }
            let o = p * BLOCK_BYTES;
            match ops.last_mut() {
                Some(DriveOp::Write { offset, len }) if *offset + *len == o => *len += BLOCK_BYTES,
                _ => ops.push(DriveOp::Write { offset: o, len: BLOCK_BYTES }),
            }
        }
        Some((ops, moves))
    }

    fn done(&mut self, id: u64) {
        if let Some(n) = self.inflight.remove(&id) {
            self.inflight_blocks -= n;
        }
    }

    /// The sizes and indices [`LogTier::new`] gives a tier of `cfg`, and every stored
    /// index within them (what `check` and a run index by).
    fn check_shape(&self, cfg: &TierConfig) -> Result<(), String> {
        let want = LogTier::new_shape(cfg);
        let shape = |what: &str, got: u64, want: u64| {
            if got == want {
                Ok(())
            } else {
                Err(format!("log: {what} {got}, but the parameters make {want}"))
            }
        };
        shape("band_blocks", self.band_blocks, want.band_blocks)?;
        shape("stripe_blocks", self.stripe_blocks, want.stripe_blocks)?;
        shape("iu_blocks", self.iu_blocks, want.iu_blocks)?;
        shape("user_blocks", self.user_blocks, want.user_blocks)?;
        shape("l2p entries", self.l2p.len() as u64, want.user_blocks)?;
        shape("p2l entries", self.p2l.len() as u64, want.drive_blocks)?;
        shape("band_valid entries", self.band_valid.len() as u64, want.bands)?;
        shape("band_state entries", self.band_state.len() as u64, want.bands)?;
        let (users, drives, bands) = (want.user_blocks, want.drive_blocks, want.bands);
        let bad = |what: &str, v: u64, n: u64| Err(format!("log: {what} {v} is beyond the {n} there are"));
        if let Some(&p) = self.l2p.iter().find(|&&p| p != NONE && p as u64 >= drives) {
            return bad("l2p drive block", p as u64, drives);
        }
        if let Some(&b) = self.p2l.iter().find(|&&b| b != NONE && b as u64 >= users) {
            return bad("p2l user block", b as u64, users);
        }
        if let Some(&i) = self.free_bands.iter().find(|&&i| i as u64 >= bands) {
            return bad("free band", i as u64, bands);
        }
        if let Some(&st) = self.band_state.iter().find(|&&st| st > CLOSED) {
            return Err(format!("log: band state {st} is none of FREE, OPEN, CLOSED"));
        }
        if let Some(&(b, _)) = self.log.iter().find(|&&(b, _)| b >= users) {
            return bad("log entry's user block", b, users);
        }
        if let Some((&b, _)) = self.log_pos.iter().find(|&(&b, _)| b >= users) {
            return bad("log_pos user block", b, users);
        }
        let inflight: u64 = self.inflight.values().sum();
        if inflight != self.inflight_blocks {
            return Err(format!("log: in-flight count {} but destages hold {inflight}", self.inflight_blocks));
        }
        // A frontier at the end of the area's last band is legal: its next write opens a band.
        for front in [self.user_front, self.gc_front].into_iter().flatten() {
            if front > drives {
                return bad("frontier drive block", front, drives);
            }
        }
        Ok(())
    }

    fn check(&self, cfg: &TierConfig) -> Result<(), String> {
        let mut valid = vec![0u32; self.band_valid.len()];
        for (b, &p) in self.l2p.iter().enumerate() {
            if p != NONE {
                if self.p2l[p as usize] != b as u32 {
                    return Err(format!("log: block {b} maps to drive block {p}, which maps back elsewhere"));
                }
                valid[(p as u64 / self.band_blocks) as usize] += 1;
            }
        }
        if valid != self.band_valid {
            return Err("log: band valid counts disagree with the map".into());
        }
        if self.log.len() as u64 + self.inflight_blocks > cfg.capacity_blocks() {
            return Err("log: more blocks than the capacity".into());
        }
        let entries: std::collections::BTreeSet<(u64, u64)> = self.log.iter().copied().collect();
        if let Some((b, _)) = self.log_pos.iter().find(|&(&b, &seq)| !entries.contains(&(b, seq))) {
            return Err(format!("log: block {b}'s newest entry is not in the log"));
        }
        for (i, &st) in self.band_state.iter().enumerate() {
            if (st == FREE) != self.free_bands.contains(&(i as u32)) || (st == FREE && self.band_valid[i] != 0) {
                return Err(format!("log: band {i} in state {st} disagrees with the free list or holds data"));
            }
        }
        Ok(())
    }
}

/// The log's maps in state.json as one hex string each (8 digits per entry): tens of
/// millions of entries as JSON numbers take seconds to parse on either side of the binding.
mod hex_u32s {
    use serde::{Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    pub fn serialize<S: Serializer>(v: &[u32], s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::with_capacity(v.len() * 8);
        for &x in v {
            for i in (0..8).rev() {
                out.push(DIGITS[((x >> (i * 4)) & 0xf) as usize]);
            }
        }
        s.serialize_str(std::str::from_utf8(&out).expect("hex digits are ASCII"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if s.len() % 8 != 0 {
            return Err(serde::de::Error::custom("a hex map's length is not a multiple of 8"));
        }
        s.as_bytes()
            .chunks(8)
            .map(|c| {
                c.iter().try_fold(0u32, |acc, &b| {
                    let v = (b as char).to_digit(16).ok_or_else(|| serde::de::Error::custom("a hex map holds a non-hex digit"))?;
                    Ok(acc << 4 | v)
                })
            })
            .collect()
    }
}
