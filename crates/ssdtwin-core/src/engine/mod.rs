//! The timed engine: when each host command completes, in virtual nanoseconds.
//!
//! [`DeviceTiming`] keeps "next free" times per NAND plane, die and channel, for the
//! controller's command processor and for both directions of the host link, plus the write
//! buffer's drain state. A host command runs through the controller (which changes the FTL
//! state at once, exactly as in fast-forward) and the NAND operations the FTL emitted are
//! placed on those timelines; the command's completion time follows. Nothing here reads a
//! clock; the fio runner ([`fio`]) and the real-time NBD server both call it with the
//! virtual time at which a command arrives.
//!
//! Modelled (docs/models.md has the reasoning and the sources):
//! * reads: per-plane page reads (tR), pages already in a plane's register reused, then a
//!   channel transfer of the bytes asked for; a read that finds its die programming or
//!   erasing suspends the operation (suspend latency, a limited number of times per
//!   operation, with progress required between suspends) or waits for its end; the
//!   suspended operation ends later by suspend + reads + resume;
//! * writes: acknowledged from the power-loss-protected buffer once it has room; buffered
//!   IUs leave in program units (one-shot, all planes of a die), read-modify-write reads and
//!   GC reads gate the program unit they feed;
//! * erases occupy every die of the superblock (of its NVM Set's dies);
//! * NVM Sets: each set has its own program-unit accumulators and its own share of the
//!   write buffer's admission (docs/models.md §9), so one set's writes never wait for
//!   another's programs;
//! * a controller command processor with a throughput ceiling, fixed firmware latencies;
//! * host link bandwidth per direction;
//! * power states: at most N NAND operations at once, N from the state's power budget.

pub mod arbiter;
pub(crate) mod events;
mod power;
mod timeline;
use power::PowerTokens;
use timeline::{Calendar, DieOp, DieQueue};
pub mod fio;
pub mod fio_facts;
pub mod iolog;
pub mod stack;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::nand::{Addressing, Cause, NandOp, NandSink};
use crate::nvme::{Controller, Error, FtlConfig, Protection, QosLimits};
use crate::spec::{DriveSpec, Geometry, TimingSpec};
use crate::units::NsId;
use crate::util::FastDiv;

#[cfg(test)]
mod tests;

/// Places each NAND operation on the drive's timelines as the controller emits it, as of
/// time `t` (the command's arrival at the NAND stage). No list of operations in between:
/// the FTL's call sites know each operation's kind and cause, so the placement inlined
/// there needs no decode of a stored operation, and nothing is pushed and walked again.
struct Placer<'a> {
    timing: &'a mut DeviceTiming,
    t: u64,
    /// Latest host-read completion so far (`t` before any).
    read_done: u64,
    /// Host IUs handed to the program pipeline.
    host_ius: u64,
    /// Operations placed (idle GC stops when a chunk emits none).
    placed: u64,
}

impl<'a> Placer<'a> {
    #[inline]
    fn new(timing: &'a mut DeviceTiming, t: u64) -> Placer<'a> {
        Placer { timing, t, read_done: t, host_ius: 0, placed: 0 }
    }
}

impl NandSink for Placer<'_> {
    #[inline(always)]
    fn op(&mut self, op: NandOp) {
        self.placed += 1;
        match op {
            NandOp::Read { ppa, bytes, cause } => {
                let done = self.timing.place_read(self.t, ppa, bytes, cause);
                self.read_done = self.read_done.max(done);
            }
            NandOp::Program { ppa, cause } => {
                self.host_ius += self.timing.place_program(self.t, ppa, cause);
            }
            NandOp::Erase { sb } => self.timing.erase_op(self.t, sb),
        }
    }

    /// A GC copy's read and program, placed as `op` places them (a GC read's completion is
    /// `t`, which `read_done` already is at least).
    #[inline(always)]
    fn gc_copy(&mut self, from: u32, to: u32, bytes: u32) {
        self.placed += 2;
        self.timing.place_read(self.t, from, bytes, Cause::Gc);
        self.timing.place_program(self.t, to, Cause::Gc);
    }
}

/// Where a physical IU lives, for the timelines: its die, its plane (an index over every
/// die's planes) and its channel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Loc {
    die: u16,
    channel: u16,
    plane: u32,
}

/// [`Loc`] of every IU, from a table of one stripe per die group: a stripe is a program
/// unit on each of the group's dies, every group and superblock starts on a stripe
/// boundary, so IU `ppa` of group `g` sits where IU `ppa mod stripe` of the group's first
/// stripe does. A lookup is a multiplication and a load, where the decode is four (and
/// the timing decodes every NAND operation it places).
#[derive(Clone, Debug)]
struct LocTable {
    /// `stripe` entries per group, group-major; empty when too large to stay cached (the
    /// decode is used then).
    locs: Vec<Loc>,
    stripe: u32,
    stripe_div: FastDiv,
}

impl LocTable {
    /// At most this many entries (8 bytes each).
    const MAX_ENTRIES: usize = 8192;

    fn new(geo: &Geometry, iu_bytes: u64, addr: &Addressing) -> LocTable {
        let stripe = geo.ius_per_program_unit(iu_bytes).max(1) * geo.dies_per_group();
        let group_ius = geo.ius_per_superblock(iu_bytes) as u64 * geo.blocks_per_plane as u64;
        let groups = addr.groups();
        let fits = (stripe as usize) * (groups as usize) <= Self::MAX_ENTRIES
            && group_ius % stripe as u64 == 0
            && group_ius * groups as u64 <= u32::MAX as u64
            && geo.dies() * geo.planes_per_die <= u16::MAX as u32 + 1;
        let locs = if fits {
            (0..groups)
                .flat_map(|g| (0..stripe).map(move |r| g as u64 * group_ius + r as u64))
                .map(|ppa| Self::decode(addr, geo.planes_per_die, ppa as u32))
                .collect()
        } else {
            Vec::new()
        };
        LocTable { locs, stripe, stripe_div: FastDiv::new(stripe) }
    }

    #[inline(always)]
    fn decode(addr: &Addressing, planes: u32, ppa: u32) -> Loc {
        let (die, channel, plane_in_die) = addr.die_channel_plane(ppa);
        Loc { die: die as u16, channel: channel as u16, plane: die * planes + plane_in_die }
    }

    #[inline(always)]
    fn get(&self, addr: &Addressing, planes: u32, ppa: u32) -> Loc {
        let r = ppa - self.stripe_div.quotient(ppa) * self.stripe;
        match self.locs.get((addr.group_of(ppa) * self.stripe + r) as usize) {
            Some(&loc) => loc,
            None => Self::decode(addr, planes, ppa),
        }
    }
}

#[derive(Copy, Clone, Debug, Default)]
struct PuAcc {
    pu: u32,
    count: u32,
    ready: u64,
}

/// One die group's (FTL partition's) program pipeline: its host and GC frontiers' program
/// units being filled.
#[derive(Clone, Debug, Default)]
struct GroupPipe {
    host_pu: PuAcc,
    gc_pu: PuAcc,
}

/// One NVM Set's share of the write buffer (bytes handed to programs that have not ended),
/// shared by the set's partitions as the controller's DRAM is.
#[derive(Clone, Debug, Default)]
struct SetBuffer {
    pending: BinaryHeap<Reverse<(u64, u64)>>,
    pending_bytes: u64,
    pending_unscheduled: u64,
    admit_at: u64,
}

/// The slip GC reads put on one die's work, not applied to its queue yet: `delta` ns from
/// `at`, as of arrival `now` (0 = nothing pending).
///
/// Why: a victim's valid IUs are read in order, so a relocation's reads mostly follow each
/// other on one plane, each starting where the one before ended. Two slips back to back,
/// at `t` by `a` and at `t + a` by `b`, move every operation exactly as one slip at `t` by
/// `a + b` does: an operation starting at or after `t` moves by both; one running at `t`
/// runs past `t + a` after the first, so its end moves by both; one ended by `t` stays.
/// (The die cannot be free by `t + a` after the first: it was busy past `t`, and the
/// first moved that end by `a`.) So consecutive reads add to one slip, applied before
/// anything else looks at the die, which saves the prune and the walk over the queue
/// per read.
#[derive(Copy, Clone, Debug, Default)]
struct PendingSlip {
    die: usize,
    at: u64,
    delta: u64,
    now: u64,
}

pub struct DeviceTiming {
    t: TimingSpec,
    geo: Geometry,
    iu_bytes: u64,
    ius_per_pu: u32,
    addr: Addressing,
    locs: LocTable,
    /// Divides by the IUs per page (a read's page in its plane's register).
    page_div: FastDiv,
    pages_per_iu: u32,
    dies: u32,
    planes: u32,
    plane_free: Vec<u64>,
    /// (page key, time the page is in the register) per plane.
    plane_page: Vec<(u64, u64)>,
    die_free: Vec<u64>,
    /// Programs and erases per die not yet ended.
    die_ops: Vec<DieQueue>,
    /// GC reads' slips of one die not applied yet ([`DeviceTiming::slip_for_gc_read`]).
    pending_slip: PendingSlip,
    /// Tests: apply every GC read's slip at once (the reference the merged slips must match).
    #[cfg(test)]
    merge_slips: bool,
    channels: Vec<Calendar>,
    ctrl_free_ps: u64,
    ctrl_service_ps: u64,
    /// Extra command-processor time (ps) of a command on a namespace with PI.
    pi_check_ps: u64,
    /// PRINFO of the commands submitted now (docs/models.md, Protection information): PRACT
    /// (the controller inserts and strips the PI, so the host moves none) and PRCHK bits.
    pub pract: bool,
    pub prchk: u8,
    wpath_free_ps: u64,
    wpath_service_ps: u64,
    /// Write data path: next free time (ps) and ps per byte (0 = no ceiling).
    /// The write data stage's reservations (ns): GC relocations are reserved when their
    /// reads are done, often ahead of host writes arriving later, which use the gaps.
    wdata: Calendar,
    wdata_ps_per_byte: f64,
    /// The back end (`ctrl_backend_bytes_per_s`): reservations (ns) and ps per byte (0 = no
    /// ceiling). Programs and the FTL's own reads pass it; host reads do not.
    backend: Calendar,
    backend_ps_per_byte: f64,
    link_up: Calendar,
    link_down: Calendar,
    /// Arrival time of the command being placed (calendars forget what ended before it).
    now: u64,
    /// Per die group (one without NVM Sets and partitions).
    pipes: Vec<GroupPipe>,
    /// Per NVM Set (one without sets), and log2 of the groups per set (a power of two).
    set_buffers: Vec<SetBuffer>,
    group_set_shift: u32,
    /// Bytes waiting for programs a set's buffer share holds.
    buffer_limit: u64,
    tokens: Option<PowerTokens>,
    power_state: u8,
    /// Suspends allowed per program/erase in the current power state.
    max_suspends: u32,
    /// DRAM namespaces: (latency ns, bandwidth bytes/s) and when the DRAM is next free.
    dram: Option<(u64, u64)>,
    dram_free: u64,
    /// QoS token buckets per NSID (GCRA theoretical arrival times, ns): read bandwidth,
    /// write bandwidth, commands.
    qos_tat: std::collections::BTreeMap<u32, [u64; 3]>,
    /// The last (bytes, ns) of a channel and of a host-link transfer: most transfers have
    /// the size of the one before, and the duration needs a 64-bit divide.
    chan_xfer_memo: (u64, u64),
    link_xfer_memo: (u64, u64),
    /// Channel transfer of one program unit, ns.
    pu_xfer_ns: u64,
    /// Plane time of one GC read of an IU: tR x φ x pages per IU (fixed with the timing).
    gc_read_ns: u64,
    /// The drive clock at the run's time 0, when a run keeps the controller's Predictable
    /// Latency Mode windows in step with its commands ([`DeviceTiming::follow_clock`]).
    clock_epoch_ns: Option<u64>,
}

/// How far ahead of its rate a QoS-capped namespace may run (the bucket depth, as time):
/// 1 ms, SPDK's QoS timeslice (`SPDK_BDEV_QOS_TIMESLICE_IN_USEC`), [ASSUMED] for the drive.
pub const QOS_BURST_NS: u64 = 1_000_000;

/// The I/O command set [`DeviceTiming::submit`] times.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HostOp {
    Read,
    Write,
    /// Dataset Management, deallocate.
    Deallocate,
}

/// One host I/O command: `nlb` logical blocks from `slba` of namespace `nsid`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HostCmd {
    pub op: HostOp,
    pub nsid: NsId,
    pub slba: u64,
    pub nlb: u64,
}

/// Why a spec cannot be timed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TimingError {
    #[error("preset {preset} has no [timing] section, so it cannot run timed workloads")]
    NoTimingSection { preset: String },
}

impl DeviceTiming {
    pub fn new(spec: &DriveSpec, cfg: &FtlConfig) -> Result<DeviceTiming, TimingError> {
        let t = spec.timing.clone().ok_or_else(|| TimingError::NoTimingSection { preset: spec.drive.name.clone() })?;
        Self::with_timing(spec, cfg, t)
    }

    /// Like [`DeviceTiming::new`] with other timing numbers (what-if runs, calibration).
    pub fn with_timing(spec: &DriveSpec, cfg: &FtlConfig, t: TimingSpec) -> Result<DeviceTiming, TimingError> {
        let geo = spec.geometry();
        let iu = cfg.iu_bytes as u64;
        let page = geo.page_bytes as u64;
        let dies = geo.dies();
        let planes = geo.planes_per_die;
        let pages_per_iu = (iu / page).max(1) as u32;
        Ok(DeviceTiming {
            ctrl_service_ps: 1_000_000_000_000 / t.ctrl_max_iops.value.max(1),
            pi_check_ps: t.ctrl_pi_check_ns.as_ref().map_or(0, |p| p.value * 1000),
            pract: false,
            prchk: 0,
            wpath_free_ps: 0,
            wdata: Calendar::default(),
            wdata_ps_per_byte: match t.ctrl_max_write_bytes_per_s.value {
                0 => 0.0,
                rate => 1e12 / rate as f64,
            },
            wpath_service_ps: 1_000_000_000_000u64.checked_div(t.ctrl_max_write_iops.value).unwrap_or(0),
            backend: Calendar::default(),
            backend_ps_per_byte: match t.ctrl_backend_bytes_per_s.value {
                0 => 0.0,
                rate => 1e12 / rate as f64,
            },
            iu_bytes: iu,
            ius_per_pu: geo.ius_per_program_unit(iu),
            addr: Addressing::new(&geo, iu),
            locs: LocTable::new(&geo, iu, &Addressing::new(&geo, iu)),
            page_div: FastDiv::new((page / iu).max(1) as u32),
            pages_per_iu,
            dies,
            planes,
            plane_free: vec![0; (dies * planes) as usize],
            plane_page: vec![(u64::MAX, 0); (dies * planes) as usize],
            die_free: vec![0; dies as usize],
            die_ops: vec![DieQueue::default(); dies as usize],
            pending_slip: PendingSlip::default(),
            #[cfg(test)]
            merge_slips: true,
            channels: vec![Calendar::default(); geo.channels as usize],
            ctrl_free_ps: 0,
            link_up: Calendar::default(),
            link_down: Calendar::default(),
            now: 0,
            pipes: vec![GroupPipe::default(); geo.groups as usize],
            set_buffers: vec![SetBuffer::default(); geo.nvm_sets as usize],
            group_set_shift: geo.groups_per_set().trailing_zeros(),
            buffer_limit: (spec.ftl.write_buffer_bytes.value / geo.nvm_sets as u64).max(geo.program_unit_bytes * 2),
            tokens: None,
            power_state: u8::MAX,
            max_suspends: t.max_suspends_per_op.value,
            dram: spec.dram_namespace.as_ref().map(|d| (d.latency_ns.value, d.bytes_per_s.value)),
            dram_free: 0,
            clock_epoch_ns: None,
            qos_tat: std::collections::BTreeMap::new(),
            chan_xfer_memo: (0, 0),
            link_xfer_memo: (0, 0),
            pu_xfer_ns: Self::xfer_ns(geo.program_unit_bytes, t.channel_bytes_per_s.value),
            gc_read_ns: (t.t_read_ns.value as f64 * t.gc_page_reads_per_iu.value * pages_per_iu as f64) as u64,
            t,
            geo,
        })
    }

    /// Apply the controller's current power state (Set Features 02h) to NAND concurrency.
    #[inline]
    fn sync_power(&mut self, ctrl: &Controller) {
        let ps = ctrl.state().power_state;
        if ps != self.power_state {
            self.set_power(ctrl, ps);
        }
    }

    #[cold]
    fn set_power(&mut self, ctrl: &Controller, ps: u8) {
        self.power_state = ps;
        let spec = ctrl.spec();
        let limit = spec.power_states.get(ps as usize).and_then(|p| {
            let op = self.t.nand_op_power_mw.value.max(1) as u64;
            let base = self.t.idle_power_mw.value as u64;
            let budget = p.max_power_mw as u64;
            let n = budget.saturating_sub(base) / op;
            // Every plane busy at once needs no limit.
            (n < (self.dies * self.planes) as u64).then_some(n.max(1))
        });
        self.tokens = limit.map(PowerTokens::new);
        self.max_suspends = self.suspends_in_state(spec, ps as usize);
    }

    /// Suspends allowed per operation in power state `ps` (see
    /// [`TimingSpec::suspends_scale_with_power`]).
    fn suspends_in_state(&self, spec: &DriveSpec, ps: usize) -> u32 {
        let full = self.t.max_suspends_per_op.value;
        if !self.t.suspends_scale_with_power.value || full == 0 {
            return full;
        }
        let idle = self.t.idle_power_mw.value as f64;
        let head = |i: usize| spec.power_states.get(i).map(|p| (p.max_power_mw as f64 - idle).max(0.0));
        match (head(ps), head(0)) {
            (Some(h), Some(h0)) if h0 > 0.0 && h < h0 => ((full as f64 * h / h0).round() as u32).clamp(1, full),
            _ => full,
        }
    }

    /// Start time of a NAND operation of `dur` ns that could start at `ready`, under the
    /// power budget; reserves the slot.
    #[inline]
    fn power_slot(&mut self, ready: u64, dur: u64) -> u64 {
        match &mut self.tokens {
            None => ready,
            Some(pool) => pool.grant(ready, dur),
        }
    }

    #[inline]
    fn xfer_ns(bytes: u64, rate: u64) -> u64 {
        (bytes * 1_000_000_000).div_ceil(rate.max(1))
    }

    /// The controller's time per command (ps): 1 / `ctrl_max_iops`.
    pub fn ctrl_service_ps(&self) -> u64 {
        self.ctrl_service_ps
    }

    /// `xfer_ns(bytes, channel rate)`, remembered for the last size.
    #[inline]
    fn chan_xfer_ns(&mut self, bytes: u64) -> u64 {
        if self.chan_xfer_memo.0 != bytes {
            self.chan_xfer_memo = (bytes, Self::xfer_ns(bytes, self.t.channel_bytes_per_s.value));
        }
        self.chan_xfer_memo.1
    }

    /// `xfer_ns(bytes, host link rate)`, remembered for the last size.
    #[inline]
    fn link_xfer_ns(&mut self, bytes: u64) -> u64 {
        if self.link_xfer_memo.0 != bytes {
            self.link_xfer_memo = (bytes, Self::xfer_ns(bytes, self.t.host_link_bytes_per_s.value));
        }
        self.link_xfer_memo.1
    }

    fn ctrl_cmd(&mut self, now: u64) -> u64 {
        let start = (now * 1000).max(self.ctrl_free_ps);
        self.ctrl_free_ps = start + self.ctrl_service_ps;
        self.ctrl_free_ps.div_ceil(1000)
    }

    /// The command processor for a command on a namespace with protection `prot`: the
    /// check's extra time when the namespace carries PI.
    #[inline]
    fn ctrl_cmd_for(&mut self, now: u64, prot: Protection) -> u64 {
        if prot.pi == 0 || self.pi_check_ps == 0 {
            return self.ctrl_cmd(now);
        }
        let start = (now * 1000).max(self.ctrl_free_ps);
        self.ctrl_free_ps = start + self.ctrl_service_ps + self.pi_check_ps;
        self.ctrl_free_ps.div_ceil(1000)
    }

    /// The controller's write path (FIFO, writes only) after the data has arrived: a
    /// per-command stage, then the data stage (bytes per second), pipelined.
    fn write_path(&mut self, t: u64, bytes: u64) -> u64 {
        let mut t = t;
        if self.wpath_service_ps != 0 {
            let start = (t * 1000).max(self.wpath_free_ps);
            self.wpath_free_ps = start + self.wpath_service_ps;
            t = self.wpath_free_ps.div_ceil(1000);
        }
        self.write_data_stage(t, bytes)
    }

    /// The controller's write data stage (encoder and NAND-bound DMA, bytes per second, FIFO):
    /// host writes after the per-command stage, GC relocations before their program.
    fn write_data_stage(&mut self, t: u64, bytes: u64) -> u64 {
        if self.wdata_ps_per_byte <= 0.0 {
            return t;
        }
        let dur = ((bytes as f64 * self.wdata_ps_per_byte) / 1000.0).ceil() as u64;
        let now = self.now;
        self.wdata.reserve(now, t, dur) + dur
    }

    /// The controller's back end (`ctrl_backend_bytes_per_s`, pipelined, FIFO with gaps
    /// reused): the data of a program before its channel transfer, or of an FTL-internal
    /// read (GC, read-modify-write) once it has crossed the channel. Returns when it is done.
    fn backend_stage(&mut self, t: u64, bytes: u64) -> u64 {
        if self.backend_ps_per_byte <= 0.0 {
            return t;
        }
        let dur = ((bytes as f64 * self.backend_ps_per_byte) / 1000.0).ceil() as u64;
        let now = self.now;
        self.backend.reserve(now, t, dur) + dur
    }

    fn link(&mut self, t: u64, bytes: u64, up: bool) -> u64 {
        let dur = self.link_xfer_ns(bytes);
        let now = self.now;
        let cal = if up { &mut self.link_up } else { &mut self.link_down };
        cal.reserve(now, t, dur) + dur
    }

    /// Where the IU at `ppa` lives.
    #[inline(always)]
    fn loc(&self, ppa: u32) -> Loc {
        self.locs.get(&self.addr, self.planes, ppa)
    }

    /// Page read of the IU at `ppa` (`bytes` wanted), ready no earlier than `t`; returns when
    /// the data has crossed the channel.
    fn read_op(&mut self, t: u64, ppa: u32, bytes: u32) -> u64 {
        let loc = self.loc(ppa);
        let (die, channel, plane) = (loc.die as u32, loc.channel, loc.plane as usize);
        let t_read = self.t.t_read_ns.value;
        let pages = if self.pages_per_iu > 1 { (bytes as u64).div_ceil(self.geo.page_bytes as u64).max(1) as u32 } else { 1 };
        let key = self.page_div.quotient(ppa) as u64;
        let mut ready = t;
        if pages == 1 && self.plane_page[plane].0 == key {
            // The page is still in the plane's register (e.g. GC reading the next IU).
            ready = ready.max(self.plane_page[plane].1);
        } else {
            for _ in 0..pages {
                let want = ready.max(self.plane_free[plane]);
                // Program/erase suspend: the read gets the die at a cost, or waits.
                let want = self.die_read_slot(die as usize, want, t_read);
                let start = self.power_slot(want, t_read);
                let end = start + t_read;
                self.plane_free[plane] = end;
                ready = end;
            }
            self.plane_page[plane] = (key, ready);
        }
        let dur = self.chan_xfer_ns(bytes as u64);
        self.channels[channel as usize].reserve_inline(self.now, ready, dur) + dur
    }

    /// GC read of one relocated IU: a share φ of a page read on its plane (firmware reads
    /// several IUs of a page at once only part of the time), then its channel transfer.
    fn gc_read_op(&mut self, t: u64, ppa: u32, bytes: u32) -> u64 {
        let loc = self.loc(ppa);
        let (die, channel, plane) = (loc.die as u32, loc.channel, loc.plane as usize);
        let cost = self.gc_read_ns;
        let want = t.max(self.plane_free[plane]);
        let start = self.power_slot(want, cost);
        let end = start + cost;
        self.plane_free[plane] = end;
        self.plane_page[plane].0 = u64::MAX;
        // GC reads are scheduled between the die's programs (no suspend): its work slips.
        self.slip_for_gc_read(die as usize, start, cost);
        let dur = self.chan_xfer_ns(bytes as u64);
        self.channels[channel as usize].reserve_inline(self.now, end, dur) + dur
    }

    /// A GC read on die `d` from `t` for `delta` ns: the die's work slips, merged with the
    /// slip pending on the die when this read starts where that one ends ([`PendingSlip`]).
    #[inline(always)]
    fn slip_for_gc_read(&mut self, d: usize, t: u64, delta: u64) {
        let p = &mut self.pending_slip;
        if p.delta != 0 {
            #[cfg(test)]
            let merge = self.merge_slips;
            #[cfg(not(test))]
            let merge = true;
            if merge && p.die == d && p.at + p.delta == t {
                p.delta += delta;
                return;
            }
            self.apply_slip();
        }
        if self.die_free[d] > t {
            self.pending_slip = PendingSlip { die: d, at: t, delta, now: self.now };
        }
    }

    /// Apply the pending GC reads' slip, if any: before anything else reads or changes a
    /// die's queue or next free time.
    #[inline(always)]
    fn settle_slip(&mut self) {
        if self.pending_slip.delta != 0 {
            self.apply_slip();
        }
    }

    #[inline(never)]
    fn apply_slip(&mut self) {
        let p = std::mem::take(&mut self.pending_slip);
        let now = std::mem::replace(&mut self.now, p.now);
        self.die_slip(p.die, p.at, p.delta);
        self.now = now;
    }

    /// Forget the die's operations that ended before the current command arrived.
    fn die_prune(&mut self, d: usize) {
        let now = self.now;
        let q = &mut self.die_ops[d];
        while q.front_end().is_some_and(|end| end <= now) {
            q.pop_front();
        }
    }

    /// Every program/erase of die `d` still running or queued at `t` ends `delta` later
    /// (those not started yet also start later).
    fn die_slip(&mut self, d: usize, t: u64, delta: u64) {
        if self.die_free[d] <= t {
            return;
        }
        self.die_prune(d);
        self.die_ops[d].slip(t, delta);
        self.die_free[d] += delta;
    }

    /// Operation `i` of die `d` ends `delta` later; the ones queued behind it move only as
    /// far as they overlap.
    fn die_push_back(&mut self, d: usize, i: usize, delta: u64) {
        let q = self.die_ops[d].materialize();
        q[i].end += delta;
        let mut prev_end = q[i].end;
        for op in q.iter_mut().skip(i + 1) {
            if op.start >= prev_end {
                break;
            }
            let shift = prev_end - op.start;
            op.start += shift;
            op.end += shift;
            prev_end = op.end;
        }
        let last = q.last().map_or(0, |op| op.end);
        self.die_free[d] = self.die_free[d].max(last);
    }

    /// Earliest start ≥ `want` of a host page read of `dur` ns on die `d`, and the cost it
    /// puts on the die's programs and erases. A read arriving while an operation runs
    /// suspends it (after the suspend latency) if the operation has suspends left and has
    /// progressed enough since its last resume, waits for that otherwise; the operation
    /// ends later by suspend + reads + resume. Reads that arrive while it is already
    /// suspended join that suspension. A read arriving between operations goes first and
    /// the next one starts after it.
    fn die_read_slot(&mut self, d: usize, mut want: u64, dur: u64) -> u64 {
        self.settle_slip();
        if self.die_free[d] <= want {
            return want;
        }
        self.die_prune(d);
        // Slip folded in: the loop below reads and edits `ops` one by one, in true times.
        self.die_ops[d].materialize();
        let max_suspends = self.max_suspends;
        let min_progress = self.t.suspend_min_progress_ns.value;
        let t_resume = self.t.t_resume_ns.value;
        loop {
            let Some(i) = self.die_ops[d].live().iter().position(|op| op.end > want) else {
                return want;
            };
            let op = self.die_ops[d].live()[i];
            if op.start >= want {
                // Between operations: the read goes first.
                let overlap = (want + dur).saturating_sub(op.start);
                if overlap > 0 {
                    self.die_ops[d].materialize()[i].start += overlap;
                    self.die_push_back(d, i, overlap);
                }
                return want;
            }
            let t_suspend = if op.erase { self.t.t_erase_suspend_ns.value } else { self.t.t_prog_suspend_ns.value };
            if let Some((issued, reads_end)) = op.window {
                if want <= reads_end {
                    // Join the suspension in progress.
                    let start = want.max(issued + t_suspend);
                    let extra = (start + dur).saturating_sub(reads_end);
                    if extra > 0 {
                        let o = &mut self.die_ops[d].materialize()[i];
                        o.window = Some((issued, start + dur));
                        o.resumed_at += extra;
                        self.die_push_back(d, i, extra);
                    }
                    return start;
                }
            }
            if op.suspends >= max_suspends {
                // No suspend left: wait for the operation to finish.
                want = op.end;
                continue;
            }
            let at = if op.suspends == 0 { want } else { want.max(op.resumed_at + min_progress) };
            if at >= op.end.saturating_sub(t_suspend) {
                // It finishes before a suspend would take effect.
                want = op.end;
                continue;
            }
            let start = at + t_suspend;
            let reads_end = start + dur;
            let o = &mut self.die_ops[d].materialize()[i];
            o.suspends += 1;
            o.window = Some((at, reads_end));
            o.resumed_at = reads_end + t_resume;
            self.die_push_back(d, i, t_suspend + dur + t_resume);
            return start;
        }
    }

    /// Queue a program or erase on die `d` from `start` to `end`.
    fn die_push(&mut self, d: usize, start: u64, end: u64, erase: bool) {
        self.settle_slip();
        self.die_prune(d);
        self.die_ops[d].push_back(DieOp { start, end, erase, suspends: 0, resumed_at: start, window: None });
        self.die_free[d] = self.die_free[d].max(end);
    }

    /// Program one whole program unit whose IUs are ready at `ready`; returns its end.
    fn program_op(&mut self, ready: u64, pu: u32) -> u64 {
        self.settle_slip();
        let ppa = pu * self.ius_per_pu;
        let loc = self.loc(ppa);
        let (die, channel) = (loc.die as u32, loc.channel);
        let d = die as usize;
        let ready = self.backend_stage(ready, self.geo.program_unit_bytes);
        let dur = self.pu_xfer_ns;
        let xe = self.channels[channel as usize].reserve(self.now, ready, dur) + dur;
        let planes_free = (0..self.planes).map(|p| self.plane_free[(die * self.planes + p) as usize]).max().unwrap_or(0);
        let want = xe.max(self.die_free[d]).max(planes_free);
        let t_prog = self.t.t_prog_ns.value;
        let start = self.power_slot(want, t_prog);
        self.die_push(d, start, start + t_prog, false);
        // A program overwrites the page registers of the die's planes.
        for p in 0..self.planes {
            self.plane_page[(die * self.planes + p) as usize].0 = u64::MAX;
        }
        self.die_free[d]
    }

    /// Erase superblock `sb`: a block on every die of its group.
    fn erase_op(&mut self, t: u64, sb: u32) {
        self.settle_slip();
        let t_erase = self.t.t_erase_ns.value;
        let group = self.addr.group_of_superblock(sb);
        for i in 0..self.addr.dies_of_group(group).len() {
            let d = self.addr.dies_of_group(group)[i] as usize;
            let want = t.max(self.die_free[d]);
            let start = self.power_slot(want, t_erase);
            self.die_push(d, start, start + t_erase, true);
        }
    }

    /// Place a read of the IU at `ppa` (`bytes`) for a command at `t`; returns when a host
    /// read's data has crossed the channel (`t` for the FTL's own reads, which feed a
    /// program instead).
    #[inline(always)]
    fn place_read(&mut self, t: u64, ppa: u32, bytes: u32, cause: Cause) -> u64 {
        if cause == Cause::Host {
            return self.read_op(t, ppa, bytes);
        }
        let done = if cause == Cause::Gc { self.gc_read_op(t, ppa, bytes) } else { self.read_op(t, ppa, bytes) };
        let done = self.backend_stage(done, bytes as u64);
        // A read-modify-write or GC read feeds a program of its own group.
        let pipe = &mut self.pipes[self.addr.group_of(ppa) as usize];
        let acc = if cause == Cause::Rmw { &mut pipe.host_pu } else { &mut pipe.gc_pu };
        acc.ready = acc.ready.max(done);
        t
    }

    /// Place a program of the IU at `ppa` for a command at `t`: it joins its frontier's
    /// program unit, which is programmed once full. Returns 1 for a host IU (handed to the
    /// program pipeline), 0 for a GC one.
    #[inline(always)]
    fn place_program(&mut self, t: u64, ppa: u32, cause: Cause) -> u64 {
        let pu = self.addr.program_unit(ppa);
        let host = cause != Cause::Gc;
        let group = self.addr.group_of(ppa) as usize;
        let set = group >> self.group_set_shift;
        let pipe = &mut self.pipes[group];
        let acc = if host { &mut pipe.host_pu } else { &mut pipe.gc_pu };
        if acc.count > 0 && acc.pu != pu {
            // A frontier moved on with a partial unit (never happens with
            // superblocks made of whole units, kept for safety): program it.
            let a = *acc;
            *acc = PuAcc { pu, count: 0, ready: 0 };
            let end = self.program_op(a.ready.max(t), a.pu);
            if host {
                self.release_later(set, end, a.count as u64);
            }
        }
        if host {
            self.set_buffers[set].pending_unscheduled += 1;
        }
        let pipe = &mut self.pipes[group];
        let acc = if host { &mut pipe.host_pu } else { &mut pipe.gc_pu };
        if acc.count == 0 {
            acc.pu = pu;
            acc.ready = acc.ready.max(t);
        }
        acc.count += 1;
        if acc.count == self.ius_per_pu {
            let a = *acc;
            *acc = PuAcc::default();
            let mut ready = a.ready.max(t);
            if !host {
                // Relocated data is encoded and sent to NAND by the same write
                // data path as host data (which paid for it on admission).
                ready = self.write_data_stage(ready, a.count as u64 * self.iu_bytes);
            }
            let end = self.program_op(ready, a.pu);
            if host {
                self.release_later(set, end, a.count as u64);
            }
        }
        host as u64
    }

    fn release_later(&mut self, set: usize, at: u64, ius: u64) {
        let pipe = &mut self.set_buffers[set];
        pipe.pending_unscheduled -= ius;
        pipe.pending.push(Reverse((at, ius * self.iu_bytes)));
    }

    /// Time at which set `set`'s buffer share has room for everything accepted so far, no
    /// earlier than `t`.
    fn admit(&mut self, set: usize, t: u64, new_bytes: u64) -> u64 {
        let limit = self.buffer_limit;
        let pipe = &mut self.set_buffers[set];
        pipe.pending_bytes += new_bytes;
        while let Some(&Reverse((at, b))) = pipe.pending.peek() {
            if at > t && pipe.pending_bytes <= limit {
                break;
            }
            pipe.pending.pop();
            pipe.pending_bytes -= b;
            if at > t {
                pipe.admit_at = pipe.admit_at.max(at);
            }
        }
        t.max(pipe.admit_at)
    }

    /// A DRAM-namespace transfer of `bytes` ready at `t` (FIFO on the DRAM's bandwidth);
    /// returns when it is done, plus the DRAM namespace's command latency.
    fn dram_xfer(&mut self, t: u64, bytes: u64) -> u64 {
        let (latency, rate) = self.dram.expect("a DRAM namespace exists only on a drive with a DRAM budget");
        let start = t.max(self.dram_free);
        self.dram_free = start + Self::xfer_ns(bytes, rate);
        self.dram_free + latency
    }

    /// The costs (ns of each bucket) of a command of `bytes` under `caps`: its direction's
    /// bandwidth bucket and the command bucket (0: no cap).
    fn qos_costs(caps: &QosLimits, write: bool, bytes: u64) -> [u64; 3] {
        let ns_for = |amount: u64, rate: u64| if rate == 0 { 0 } else { (amount * 1_000_000_000).div_ceil(rate) };
        let bw = if write { caps.write_bytes_per_s } else { caps.read_bytes_per_s };
        let mut c = [0; 3];
        c[write as usize] = ns_for(bytes, bw);
        c[2] = ns_for(1, caps.iops);
        c
    }

    /// The earliest time ≥ `now` at which a command of `bytes` on `nsid` conforms to the
    /// namespace's QoS caps (token buckets in simulated time, GCRA with [`QOS_BURST_NS`]).
    /// `now` when the namespace has no cap.
    #[inline]
    pub fn qos_ready(&self, ctrl: &Controller, nsid: NsId, write: bool, bytes: u64, now: u64) -> u64 {
        let Some(caps) = ctrl.qos_limits(nsid) else { return now };
        let tat = self.qos_tat.get(&nsid.0).copied().unwrap_or([0; 3]);
        let costs = Self::qos_costs(caps, write, bytes);
        (0..3).filter(|&i| costs[i] > 0).fold(now, |t, i| t.max(tat[i].saturating_sub(QOS_BURST_NS)))
    }

    /// The controller's QoS gate: the command arriving at `now` takes its tokens, in the
    /// order commands arrive; returns when it conforms (`now` or later).
    ///
    /// Its direction's bandwidth bucket times it after the earlier commands of that
    /// direction; the command bucket (IOPS), shared by both directions, after the earlier
    /// commands' command tokens, taken when they arrived. So a command held by its own
    /// direction's bandwidth cap (a writer at its write cap) takes one command token, not
    /// the bucket from its own late start onwards, and holds back no command of the other
    /// direction that conforms (a reader): timed from its start, the held writes' tokens
    /// moved the command bucket past every read behind them.
    fn qos_gate(&mut self, ctrl: &Controller, nsid: NsId, write: bool, bytes: u64, now: u64) -> u64 {
        let Some(caps) = ctrl.qos_limits(nsid) else { return now };
        let start = self.qos_ready(ctrl, nsid, write, bytes, now);
        let costs = Self::qos_costs(caps, write, bytes);
        let tat = self.qos_tat.entry(nsid.0).or_insert([0; 3]);
        let bw = write as usize;
        if costs[bw] > 0 {
            tat[bw] = tat[bw].max(start) + costs[bw];
        }
        if costs[2] > 0 {
            tat[2] = tat[2].max(now) + costs[2];
        }
        start
    }

    // ----------------------------------------------------------------- host commands

    /// Time one host command arriving at `now` (virtual ns; commands must arrive in time
    /// order): the controller executes it at once, the NAND operations it caused are placed
    /// on the drive's timelines, and its completion time comes back. The one door through
    /// which the fio runner and the cluster model (crate::cluster) drive a twin.
    #[inline]
    pub fn submit(&mut self, ctrl: &mut Controller, now: u64, cmd: HostCmd) -> Result<u64, Error> {
        match cmd.op {
            HostOp::Read => self.read(ctrl, now, cmd.nsid, cmd.slba, cmd.nlb),
            HostOp::Write => self.write(ctrl, now, cmd.nsid, cmd.slba, cmd.nlb),
            HostOp::Deallocate => self.deallocate(ctrl, now, cmd.nsid, cmd.slba, cmd.nlb),
        }
    }

    /// Keep the controller's Predictable Latency Mode windows in step with this run: the
    /// drive clock read `epoch_ns` at the run's time 0 (the fio runner; the clock itself
    /// advances when the run ends).
    pub fn follow_clock(&mut self, epoch_ns: u64) {
        self.clock_epoch_ns = Some(epoch_ns);
    }

    /// Tell the controller the time before a command (a deterministic window may expire).
    #[inline]
    fn tick(&self, ctrl: &mut Controller, now: u64) {
        if let Some(e) = self.clock_epoch_ns {
            if ctrl.plm_active() {
                ctrl.plm_tick(e.saturating_add(now));
            }
        }
    }

    /// How long the QoS gate holds a command of `nlb` blocks arriving at `now` on `nsid`
    /// (0 without caps); the command takes its tokens ([`DeviceTiming::qos_gate`]).
    ///
    /// The command runs at its arrival and only its completion waits out the hold, so the
    /// host sees the hold in its latency (`ssdtwin serve`'s NBD reply, the fio runner's
    /// completion). Timed at the time it conforms instead, it took the command processor
    /// (a FIFO) then, and every command of every namespace arriving after it waited for
    /// that, so a capped tenant's backlog stalled its neighbours. Both drivers submit each
    /// command as it arrives (the fio runner at its job's pace, or at the WRR arbiter's
    /// fetch) and hold nothing in the host (docs/models.md, QoS caps).
    fn qos_hold(&mut self, ctrl: &Controller, nsid: NsId, write: bool, nlb: u64, now: u64) -> Result<u64, Error> {
        Ok(match ctrl.qos_limits(nsid) {
            Some(_) => self.qos_gate(ctrl, nsid, write, nlb * ctrl.attached(nsid)?.lba_bytes as u64, now) - now,
            None => 0,
        })
    }

    /// A read command arriving at `now`; returns its completion time.
    #[inline]
    pub fn read(&mut self, ctrl: &mut Controller, now: u64, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        let hold = self.qos_hold(ctrl, nsid, false, nlb, now)?;
        Ok(self.read_unheld(ctrl, now, nsid, slba, nlb)? + hold)
    }

    fn read_unheld(&mut self, ctrl: &mut Controller, now: u64, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        self.now = self.now.max(now);
        self.tick(ctrl, now);
        self.sync_power(ctrl);
        // One look-up of the namespace; the command processor is reserved in between, as before.
        let mut seen = None;
        let seen_out = &mut seen;
        let (placer, _) = ctrl.read_timed(nsid, slba, nlb, move |ns| {
            *seen_out = Some(ns);
            let t1 = self.ctrl_cmd_for(now, ns.protection);
            Placer::new(self, t1)
        })?;
        let (t1, done) = (placer.t, placer.read_done);
        let timing = placer.timing;
        let ns = seen.expect("the sink was asked for");
        let prot = ns.protection;
        let bytes = nlb * ns.lba_bytes as u64;
        let wire = bytes + prot.host_metadata_bytes(nlb, timing.pract);
        if ns.dram {
            // No NAND: the DRAM, then the link.
            let done = timing.dram_xfer(t1, bytes);
            return Ok(timing.link(done, wire, false));
        }
        if timing.prchk != 0 && prot.pi != 0 {
            ctrl.check_pi(nsid, slba, nlb, timing.prchk)?;
        }
        let t3 = timing.link(done, wire, false);
        Ok(t3 + timing.t.ctrl_read_ns.value)
    }

    /// A write command arriving at `now`; returns when it is acknowledged.
    #[inline]
    pub fn write(&mut self, ctrl: &mut Controller, now: u64, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        let hold = self.qos_hold(ctrl, nsid, true, nlb, now)?;
        Ok(self.write_unheld(ctrl, now, nsid, slba, nlb)? + hold)
    }

    fn write_unheld(&mut self, ctrl: &mut Controller, now: u64, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        self.now = self.now.max(now);
        self.tick(ctrl, now);
        self.sync_power(ctrl);
        // The controller looks the namespace up once and asks for the sink in between (after
        // the command processor, the link and the write path are reserved, as before).
        let (mut t1, mut seen) = (0, None);
        let (t1_out, seen_out) = (&mut t1, &mut seen);
        let placer = ctrl.write_timed(nsid, slba, nlb, move |ns| {
            *seen_out = Some(ns);
            let t1 = self.ctrl_cmd_for(now, ns.protection);
            *t1_out = t1;
            if ns.dram {
                // No NAND and no NAND-bound write path: the link, then the DRAM (below).
                return Placer::new(self, t1);
            }
            let bytes = nlb * ns.lba_bytes as u64;
            let wire = bytes + ns.protection.host_metadata_bytes(nlb, self.pract);
            let t2 = self.link(t1, wire, true);
            let t2 = self.write_path(t2, bytes);
            Placer::new(self, t2)
        })?;
        let (t2, host_ius) = (placer.t, placer.host_ius);
        let timing = placer.timing;
        let ns = seen.expect("the sink was asked for");
        let bytes = nlb * ns.lba_bytes as u64;
        if ns.dram {
            let wire = bytes + ns.protection.host_metadata_bytes(nlb, timing.pract);
            let t2 = timing.link(t1, wire, true);
            return Ok(timing.dram_xfer(t2, bytes));
        }
        let ack = timing.admit(ns.nvm_set as usize, t2, host_ius * timing.iu_bytes);
        Ok(ack + timing.t.ctrl_write_ns.value)
    }

    /// Dataset Management (deallocate) arriving at `now`.
    pub fn deallocate(&mut self, ctrl: &mut Controller, now: u64, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        self.now = self.now.max(now);
        let t1 = self.ctrl_cmd(now);
        ctrl.deallocate(nsid, slba, nlb)?;
        Ok(t1 + self.t.ctrl_write_ns.value)
    }

    /// The host is idle from `from` until `until`: let GC reclaim space in the background
    /// while its NAND work fits. Returns how many IUs it moved.
    pub fn idle(&mut self, ctrl: &mut Controller, from: u64, until: u64) -> Result<u64, Error> {
        self.now = self.now.max(from);
        self.settle_slip();
        let mut t = from.max(self.die_free.iter().copied().max().unwrap_or(0).min(until));
        let chunk = self.ius_per_pu as u64;
        let mut moved = 0;
        while t < until {
            self.tick(ctrl, t);
            let mut placer = Placer::new(self, t);
            let n = ctrl.idle_gc(chunk, &mut placer)?;
            if n == 0 && placer.placed == 0 {
                break;
            }
            moved += n;
            self.settle_slip();
            // Next chunk once the dies this one used are free again.
            t = self.die_free.iter().copied().max().unwrap_or(t).max(t + 1);
        }
        Ok(moved)
    }
}
