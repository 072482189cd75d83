//! Deterministic simulation harness for ssdtwin (docs/simulation.md).
//!
//! An [`ImageUnderTest`] owns one drive image in a temporary directory and applies [`Step`]s to it: the
//! admin commands, preconditioning, fio engine runs, idle GC, commits, reopens, crashes and
//! served NBD sessions — each optionally with an injected file-system fault
//! ([`ssdtwin_core::faults`]). After every step it checks the invariants and returns the
//! first violation as an error. The test `tests/sim.rs` generates the steps from a seed with
//! proptest-state-machine, which shrinks a failing sequence.
//!
//! Steps name namespaces and blocks by index (taken modulo what exists when the step runs),
//! so every subsequence of a valid sequence is valid and shrinking never builds an
//! impossible step.

#![recursion_limit = "256"]

use ssdtwin_core::nvme::NsId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ssdtwin_core::engine::fio::{self, RunOptions};
use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::faults::{self, Action, Rule};
use ssdtwin_core::image::{Image, ImageError, OpenMode};
use ssdtwin_core::journal;
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::{Controller, FtlCounters, FtlFingerprint, Pattern, SmartCounters};
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::workload::JobSpec;
use ssdtwin_nbd::{Backend, Export, ZeroFlags};
use ssdtwin_serve::{ManualClock, TwinBackend, TwinConfig};

/// Bytes of one block of the served-data reference model (= the drive's IU, so TRIM and
/// WRITE_ZEROES on whole blocks deallocate exactly those blocks).
pub const BLOCK: u64 = 4096;

/// A file-system fault injected into one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The process dies at the `n`-th file-system call of the step (counted from 0).
    Crash { n: u16 },
    /// The `n`-th call of kind `sync` (an fsync) or of any kind fails with `errno`.
    Fail { n: u16, errno: i32, sync_only: bool },
}

/// How a served session ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// `close()`: commit, remove the journal.
    Clean,
    /// kill -9: drop everything; optionally tear the journal back to `keep_per_mille` of
    /// its unsynced tail (a power loss losing page-cache data).
    Crash { tear_per_mille: Option<u16> },
}

/// One command of a served session, on the exports' backend methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NbdOp {
    Write {
        ns: u8,
        block: u16,
        blocks: u8,
        fua: bool,
    },
    Read {
        ns: u8,
        block: u16,
        blocks: u8,
    },
    Trim {
        ns: u8,
        block: u16,
        blocks: u8,
    },
    WriteZeroes {
        ns: u8,
        block: u16,
        blocks: u8,
        no_hole: bool,
    },
    Flush,
    /// Advance the virtual clock and run one housekeeping tick (idle GC, journal, commit).
    Idle {
        ms: u16,
    },
}

/// fio engine jobs the harness runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FioKind {
    RandWrite,
    SeqWrite,
    RandRead,
    Trim,
    RandRw,
    /// Random writes with think time (idle gaps in which GC runs).
    ThinkTime,
    /// Random writes limited to a rate.
    RateLimited,
}

/// One step of a simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    CreateNs {
        pct: u8,
        lbaf: u8,
    },
    /// A DRAM namespace of `pct` % of the DRAM budget left (at least one block: a full
    /// budget makes it a refused command).
    CreateDramNs {
        pct: u8,
        lbaf: u8,
    },
    /// The vendor QoS command on namespace index `ns` (MB/s and kIOPS; 0 = no cap; large
    /// values are refused) and its queues' priority class (4: an invalid class, refused).
    Qos {
        ns: u8,
        read_mbps: u16,
        write_mbps: u16,
        kiops: u16,
        class: u8,
    },
    /// Feature 01h (arbitration): weights non-zero select weighted round robin.
    Arbitration {
        value: u32,
    },
    DeleteNs {
        ns: u8,
    },
    Attach {
        ns: u8,
    },
    Detach {
        ns: u8,
    },
    Format {
        ns: u8,
        lbaf: u8,
        ses: u8,
    },
    WriteProtect {
        ns: u8,
        mode: u8,
    },
    Precondition {
        ns: u8,
        random: bool,
        pct: u8,
    },
    Fio {
        ns: u8,
        kind: FioKind,
        pct: u8,
        seed: u32,
    },
    IdleGc {
        moves: u16,
    },
    Commit {
        fault: Option<Fault>,
    },
    /// Clean close and open (a new CLI command).
    Reopen,
    /// The process dies with uncommitted changes.
    Crash,
    Serve {
        ops: Vec<NbdOp>,
        end: End,
        fault: Option<Fault>,
    },
}

/// What the served data may hold, per (nsid, block): the values it may read as now.
#[derive(Clone, Debug, Default)]
struct BlockModel {
    /// Values the block may read as (one when exact; 0 = zeroes).
    now: Vec<u64>,
    /// Values written and acknowledged since the last successful flush (a crash may keep any).
    since_flush: Vec<u64>,
    /// Values it may hold durably (as of the last successful flush).
    durable: Vec<u64>,
}

impl BlockModel {
    fn zero() -> BlockModel {
        BlockModel { now: vec![0], since_flush: vec![], durable: vec![0] }
    }
}

pub type Fail = String;

/// The drive image under test and what the harness knows it must hold.
pub struct ImageUnderTest {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    img: Option<Image>,
    /// Fingerprint of the committed generation (what a crash returns to).
    committed: FtlFingerprint,
    committed_smart: SmartCounters,
    /// Counters after the previous step (monotone between crashes).
    prev_counters: FtlCounters,
    prev_smart: SmartCounters,
    data: BTreeMap<(u32, u64), BlockModel>,
    /// Served data dropped by commands not yet committed: a crash before the commit brings
    /// the namespaces, and so their data, back.
    pending_drops: Vec<((u32, u64), BlockModel)>,
    /// Next value written by the served sessions.
    next_tag: u64,
    pub steps_run: u64,
    pub log: Vec<String>,
}

/// The tiny drive every simulation runs on: the KIOXIA CM6 preset with 2 channels x 1 die
/// and 96-page blocks, scaled to 16 blocks per plane (16 superblocks, ~60 MiB user).
/// `SSDTWIN_SIM_PARTITIONS=2` runs it with two FTL partitions (one die each).
pub fn tiny_spec() -> DriveSpec {
    let parts = std::env::var("SSDTWIN_SIM_PARTITIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let s = tiny_spec_one_partition();
    if parts == 1 {
        return s;
    }
    s.with_partitions(parts).expect("SSDTWIN_SIM_PARTITIONS: 1 or 2 on the tiny drive")
}

fn tiny_spec_one_partition() -> DriveSpec {
    let mut s = DriveSpec::preset(PRESET).expect("preset");
    s.nand.channels.value = 2;
    s.nand.dies_per_channel.value = 1;
    s.nand.pages_per_block.value = 96;
    let raw = 2 * 2 * s.nand.blocks_per_plane.value as u64 * 96 * s.nand.page_bytes.value as u64;
    // The preset's user : raw ratio (3.84 TB of 4 TiB), on a 64 KiB grid.
    s.capacity.tnvmcap_bytes.value = (raw as f64 * 0.873 / 65536.0).floor() as u64 * 65536;
    s.ftl.write_buffer_bytes.value = 2 * 2 * 96 * 1024;
    // A small DRAM namespace budget (the PBlaze5's DRAM timing), so DRAM namespaces mix
    // with NAND ones.
    let mut dram = DriveSpec::preset("memblaze-pblaze5-910-3.84t").expect("preset").dram_namespace.expect("a DRAM budget");
    dram.budget_bytes.value = 1 << 20;
    s.dram_namespace = Some(dram);
    s.scaled(150).expect("the tiny spec scales")
}

/// A scratch directory for the image: SSDTWIN_SIM_TMPDIR, else /dev/shm when it is there
/// (the harness fsyncs thousands of times; on tmpfs that costs nothing), else the system's.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let base = std::env::var_os("SSDTWIN_SIM_TMPDIR").map(PathBuf::from).or_else(|| {
        let shm = PathBuf::from("/dev/shm");
        shm.is_dir().then_some(shm)
    });
    match base {
        Some(b) => tempfile::Builder::new().prefix("ssdtwin-sim-").tempdir_in(b),
        None => tempfile::Builder::new().prefix("ssdtwin-sim-").tempdir(),
    }
}

pub const PRESET: &str = "kioxia-cm6-r-3.84t";

/// The name of an injected errno (for logs).
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::ENOSPC => "ENOSPC",
        libc::EIO => "EIO",
        _ => "errno",
    }
}

fn install(fault: &Option<Fault>) {
    let rules = match fault {
        None => vec![],
        Some(Fault::Crash { n }) => vec![Rule { op: None, path_contains: String::new(), skip: *n as u64, action: Action::Crash }],
        Some(Fault::Fail { n, errno, sync_only }) => vec![Rule {
            op: sync_only.then_some(faults::Op::Sync),
            path_contains: String::new(),
            skip: *n as u64,
            action: Action::Fail(*errno),
        }],
    };
    faults::install(rules);
}

/// What the installed plan did: (fired, crashed).
fn plan_outcome() -> (bool, bool) {
    faults::with(|p| (!p.fired.is_empty(), p.crashed)).unwrap_or((false, false))
}

impl ImageUnderTest {
    pub fn new(seed: u64) -> Result<ImageUnderTest, Fail> {
        let tmp = scratch_dir().map_err(|e| e.to_string())?;
        let dir = tmp.path().join("img");
        faults::install(vec![]);
        let mut img = Image::create(&dir, tiny_spec(), PRESET, seed).map_err(|e| format!("create: {e}"))?;
        let committed = img.ctrl.ftl_fingerprint().map_err(|e| e.to_string())?;
        let smart = img.ctrl.state().smart.clone();
        Ok(ImageUnderTest {
            _tmp: tmp,
            dir,
            prev_counters: committed.counters.clone(),
            committed,
            committed_smart: smart.clone(),
            prev_smart: smart,
            img: Some(img),
            data: BTreeMap::new(),
            pending_drops: Vec::new(),
            next_tag: 1,
            steps_run: 0,
            log: Vec::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn img(&mut self) -> &mut Image {
        self.img.as_mut().expect("the image is open between steps")
    }

    fn ctrl(&mut self) -> &mut Controller {
        &mut self.img().ctrl
    }

    /// The nsid of namespace index `i` among the existing (attached with `attached`) ones.
    fn pick_ns(&mut self, i: u8, attached: bool) -> Option<u32> {
        let ids: Vec<u32> = self.ctrl().namespaces().filter(|n| !attached || n.attached).map(|n| n.nsid).collect();
        (!ids.is_empty()).then(|| ids[i as usize % ids.len()])
    }

    /// Run one step and check every invariant after it.
    pub fn step(&mut self, s: &Step) -> Result<(), Fail> {
        self.steps_run += 1;
        self.log.push(format!("{s:?}"));
        match s {
            Step::CreateNs { pct, lbaf } => self.admin("create-ns", |c| {
                let lba = c.spec().lba_format(*lbaf as usize % 2).unwrap_or(512) as u64;
                let free = c.unvmcap();
                let bytes = (free * *pct as u64 / 100).max(lba);
                c.create_ns(bytes / lba, bytes / lba, *lbaf % 2, 0).map(|id| Some(id.0))
            })?,
            Step::CreateDramNs { pct, lbaf } => self.admin("create-ns --dram", |c| {
                let lba = c.spec().lba_format(*lbaf as usize % 2).unwrap_or(512) as u64;
                let free = c.dram_budget_bytes() - c.dram_allocated_bytes();
                let bytes = (free * *pct as u64 / 100).max(lba);
                c.create_dram_ns(bytes / lba, bytes / lba, *lbaf % 2, 0).map(|id| Some(id.0))
            })?,
            Step::Qos { ns, read_mbps, write_mbps, kiops, class } => {
                if let Some(id) = self.pick_ns(*ns, false) {
                    let limits = ssdtwin_core::nvme::QosLimits {
                        read_bytes_per_s: *read_mbps as u64 * 1_000_000,
                        write_bytes_per_s: *write_mbps as u64 * 1_000_000,
                        iops: *kiops as u64 * 1000,
                    };
                    self.admin("qos", |c| c.set_qos(NsId(id), limits).map(|_| None))?;
                    self.admin("qos --sq-priority", |c| c.set_sq_priority(NsId(id), *class % 5).map(|_| None))?;
                }
            }
            Step::Arbitration { value } => self.admin("set-feature 0x01", |c| c.set_feature(0x01, NsId(0), *value).map(|_| None))?,
            Step::DeleteNs { ns } => {
                if let Some(id) = self.pick_ns(*ns, false) {
                    self.admin("delete-ns", |c| c.delete_ns(NsId(id)).map(|_| Some(id)))?;
                }
            }
            Step::Attach { ns } => {
                if let Some(id) = self.pick_ns(*ns, false) {
                    self.admin("attach-ns", |c| c.attach_ns(NsId(id), &[0]).map(|_| None))?;
                }
            }
            Step::Detach { ns } => {
                if let Some(id) = self.pick_ns(*ns, false) {
                    self.admin("detach-ns", |c| c.detach_ns(NsId(id), &[0]).map(|_| None))?;
                }
            }
            Step::Format { ns, lbaf, ses } => {
                if let Some(id) = self.pick_ns(*ns, false) {
                    self.admin("format", |c| c.format(NsId(id), *lbaf % 2, *ses % 3).map(|_| Some(id)))?;
                }
            }
            Step::WriteProtect { ns, mode } => {
                if let Some(id) = self.pick_ns(*ns, false) {
                    // Feature 0x84: namespace write protection config; 3 (permanent) is left out
                    // so that a sequence can go on writing.
                    self.admin("write-protect", |c| c.set_feature(0x84, NsId(id), (*mode % 3) as u32).map(|_| None))?;
                }
            }
            Step::Precondition { ns, random, pct } => {
                if let Some(id) = self.pick_ns(*ns, true) {
                    let c = self.ctrl();
                    let bytes = c.namespace(NsId(id)).map(|n| n.bytes()).unwrap_or(0);
                    let amount = (bytes * *pct as u64 / 100).max(131072) / 4096 * 4096;
                    let seed = c.next_seed();
                    let pat = if *random { Pattern::Random } else { Pattern::Sequential };
                    let bs = if *random { 4096 } else { 131072 };
                    let before = c.state().clone();
                    if let Err(e) = c.precondition(NsId(id), pat, bs, amount, seed, &mut |_, _| true) {
                        self.log.push(format!("  precondition refused: {e}"));
                        let _ = before;
                    }
                }
            }
            Step::Fio { ns, kind, pct, seed } => {
                if let Some(id) = self.pick_ns(*ns, true) {
                    self.fio(id, *kind, *pct, *seed)?;
                }
            }
            Step::IdleGc { moves } => {
                let moved = self.ctrl().idle_gc(*moves as u64, &mut NoTiming).map_err(|e| format!("idle GC: {e}"))?;
                self.log.push(format!("  idle GC moved {moved} IUs"));
            }
            Step::Commit { fault } => self.commit(fault)?,
            Step::Reopen => {
                self.commit(&None)?;
                self.reopen(false)?;
            }
            Step::Crash => self.reopen(true)?,
            Step::Serve { ops, end, fault } => self.serve(ops, end, fault)?,
        }
        self.check()
    }

    /// An admin command: on failure nothing may change; on success `Some(nsid)` names a
    /// namespace whose data is dropped (as the CLI does).
    fn admin(&mut self, what: &str, f: impl FnOnce(&mut Controller) -> Result<Option<u32>, ssdtwin_core::nvme::Error>) -> Result<(), Fail> {
        let before = serde_json::to_string(self.ctrl().state()).expect("state serialises");
        let fp_before = self.ctrl().ftl_fingerprint().map_err(|e| e.to_string())?;
        match f(self.ctrl()) {
            Ok(drop) => {
                if let Some(id) = drop {
                    // create-ns, delete-ns and format drop the namespace's served data.
                    let r = self.img().drop_data(id);
                    r.map_err(|e| format!("{what}: dropping the data of namespace {id}: {e}"))?;
                    let gone: Vec<(u32, u64)> = self.data.keys().filter(|(n, _)| *n == id).copied().collect();
                    for k in gone {
                        let m = self.data.remove(&k).expect("key");
                        self.pending_drops.push((k, m));
                    }
                }
                Ok(())
            }
            Err(e) => {
                self.log.push(format!("  {what} refused: {e}"));
                let after = serde_json::to_string(self.ctrl().state()).expect("state serialises");
                let fp_after = self.ctrl().ftl_fingerprint().map_err(|e| e.to_string())?;
                if before != after || fp_before != fp_after {
                    return Err(format!("{what} failed ({e}) but changed the state"));
                }
                Ok(())
            }
        }
    }

    fn fio(&mut self, nsid: u32, kind: FioKind, pct: u8, seed: u32) -> Result<(), Fail> {
        let c = self.ctrl();
        let ns = c.namespace(NsId(nsid)).map_err(|e| e.to_string())?.clone();
        let size = (ns.bytes() * (pct as u64).clamp(1, 100) / 100).max(65536) / 4096 * 4096;
        // Paced jobs run in virtual time with an idle gap per I/O: keep them short.
        let cap = if matches!(kind, FioKind::RateLimited | FioKind::ThinkTime) { 4 << 20 } else { u64::MAX };
        let size = size.min(cap).min(ns.bytes() / 4096 * 4096);
        let spec = job_spec(kind, nsid, ns.bytes(), ns.lba_bytes, size, seed as u64);
        let mut timing = DeviceTiming::new(c.spec(), c.ftl_config()).map_err(|e| e.to_string())?;
        let opts = RunOptions { default_nsid: nsid, idle_gc: true };
        match fio::run(c, &mut timing, vec![spec], &opts, 0, &mut |_| true) {
            Ok(out) => self.log.push(format!("  fio {kind:?}: {} clone(s)", out.len())),
            Err(e) => self.log.push(format!("  fio {kind:?} refused: {e}")),
        }
        Ok(())
    }

    /// Commit, optionally under a fault. A crash or a failed call must leave the image
    /// opening at the previous or the new generation, never anything else; after a failed
    /// call the image is poisoned and refuses a second commit.
    fn commit(&mut self, fault: &Option<Fault>) -> Result<(), Fail> {
        let want_new = {
            let c = self.ctrl();
            c.prepare_persist();
            c.ftl_fingerprint().map_err(|e| e.to_string())?
        };
        let smart_new = self.ctrl().state().smart.clone();
        install(fault);
        let r = self.img().commit();
        let (fired, crashed) = plan_outcome();
        faults::install(vec![]);
        match r {
            Ok(()) if !fired => {
                self.set_committed(want_new, smart_new);
                Ok(())
            }
            Ok(()) => {
                // The fault hit the clean-up after the commit point (removing the old
                // generation): the commit stands. A crash there still kills the process.
                self.set_committed(want_new, smart_new);
                if crashed {
                    self.reopen(true)?;
                }
                Ok(())
            }
            Err(e) if !fired => Err(format!("commit failed without a fault: {e}")),
            Err(e) => {
                self.log.push(format!("  commit failed under {fault:?}{}: {e}", if crashed { " (crash)" } else { "" }));
                if !crashed {
                    if self.img().poisoned().is_none() {
                        return Err(format!("a failed commit ({e}) left the image writable"));
                    }
                    match self.img().commit() {
                        Err(ImageError::Poisoned { .. }) => {}
                        other => return Err(format!("a commit after a failed one must be refused as poisoned, got {other:?}")),
                    }
                }
                // Either generation may be current now.
                self.img = None;
                let fp = self.open_check(false)?;
                if fp == want_new {
                    self.set_committed(want_new, smart_new);
                } else if fp != self.committed {
                    return Err(format!(
                        "after a commit failed ({e}) the image opened with a state that is neither the old nor the new generation"
                    ));
                } else {
                    self.restore_drops();
                }
                self.after_crash();
                Ok(())
            }
        }
    }

    /// Drop the image (with `crash`, without committing) and open it again.
    fn reopen(&mut self, crash: bool) -> Result<(), Fail> {
        self.img = None;
        let fp = self.open_check(false)?;
        if fp != self.committed {
            return Err(format!(
                "reopened image's FTL differs from the committed one:\n  open:      {fp:?}\n  committed: {:?}",
                self.committed
            ));
        }
        if crash {
            self.restore_drops();
            self.after_crash();
        }
        Ok(())
    }

    fn set_committed(&mut self, fp: FtlFingerprint, smart: SmartCounters) {
        self.committed = fp;
        self.committed_smart = smart;
        self.pending_drops.clear();
    }

    /// The image went back to the committed generation: dropped data is back.
    fn restore_drops(&mut self) {
        for (k, m) in self.pending_drops.drain(..) {
            self.data.insert(k, m);
        }
    }

    /// Open the image writable (repairing nothing: a torn journal tail must be accepted as
    /// it is), run the full check, return its fingerprint.
    fn open_check(&mut self, _torn: bool) -> Result<FtlFingerprint, Fail> {
        faults::install(vec![]);
        let mut img = Image::open_with(&self.dir, OpenMode::Writable).map_err(|e| format!("the image does not open again: {e}"))?;
        img.ctrl.check_full().map_err(|e| format!("check after open: {e}"))?;
        let fp = img.ctrl.ftl_fingerprint().map_err(|e| e.to_string())?;
        self.img = Some(img);
        Ok(fp)
    }

    /// After a crash, counters restart from what is on disk.
    fn after_crash(&mut self) {
        let c = &self.img.as_ref().expect("open").ctrl;
        self.prev_counters = c.ftl_counters().clone();
        self.prev_smart = c.state().smart.clone();
        for b in self.data.values_mut() {
            let mut may: Vec<u64> = b.now.clone();
            may.extend(&b.durable);
            may.extend(&b.since_flush);
            may.sort_unstable();
            may.dedup();
            b.now = may.clone();
            b.durable = may;
            b.since_flush.clear();
        }
    }

    /// The invariants that hold after every step.
    fn check(&mut self) -> Result<(), Fail> {
        let prev_c = self.prev_counters.clone();
        let prev_s = self.prev_smart.clone();
        let c = self.ctrl();
        c.check_full().map_err(|e| format!("check: {e}"))?;
        let now = c.ftl_counters().clone();
        let smart = c.state().smart.clone();
        let log = c.smart_log();
        monotone_counters(&prev_c, &now)?;
        monotone_smart(&prev_s, &smart)?;
        if log.data_units_written != smart.data_units_written_512.div_ceil(1000)
            || log.data_units_read != smart.data_units_read_512.div_ceil(1000)
        {
            return Err(format!(
                "SMART data units {} / {} disagree with the 512-byte counts {} / {}",
                log.data_units_written, log.data_units_read, smart.data_units_written_512, smart.data_units_read_512
            ));
        }
        // DRAM namespaces: host writes the FTL never sees, and never NAND writes.
        if smart.data_units_written_512 * 512 != now.host_write_bytes + smart.dram_write_bytes {
            return Err(format!(
                "SMART counts {} B written, the FTL {} B and DRAM namespaces {} B",
                smart.data_units_written_512 * 512,
                now.host_write_bytes,
                smart.dram_write_bytes
            ));
        }
        let vl = c.vendor_log();
        if vl.host_write_bytes != now.host_write_bytes + smart.dram_write_bytes
            || vl.nand_write_bytes != (now.host_programmed_ius + now.gc_programmed_ius) * vl.iu_bytes as u64
        {
            return Err(format!("vendor log host {} B / NAND {} B disagree with the counters", vl.host_write_bytes, vl.nand_write_bytes));
        }
        let dram_in_use = c.dram_allocated_bytes();
        if dram_in_use > c.dram_budget_bytes() {
            return Err(format!("DRAM namespaces hold {dram_in_use} B of a {} B budget", c.dram_budget_bytes()));
        }
        self.prev_counters = now;
        self.prev_smart = smart;
        Ok(())
    }

    // ------------------------------------------------------------------ served sessions

    fn serve(&mut self, ops: &[NbdOp], end: &End, fault: &Option<Fault>) -> Result<(), Fail> {
        // A serve command starts from a committed image (as `ssdtwin serve` would).
        self.commit(&None)?;
        self.img = None;
        let clock = Arc::new(ManualClock::new());
        let cfg = TwinConfig { live_every: Duration::ZERO, commit_every: Duration::from_secs(2), ..TwinConfig::default() };
        faults::install(vec![]);
        let b = match TwinBackend::open_with_clock(&self.dir, cfg, clock.clone()) {
            Ok(b) => b,
            Err(e) => {
                self.log.push(format!("  serve refused: {e}"));
                return self.reopen(false);
            }
        };
        install(fault);
        let mut flush_failed: Option<String> = None;
        let mut flushed_counters = self.committed.counters.clone();
        let exports: BTreeMap<u32, (Arc<dyn Export>, u64)> = b
            .export_names()
            .iter()
            .filter_map(|n| {
                let nsid: u32 = n.strip_prefix("ns")?.parse().ok()?;
                let e = b.open(n)?;
                let size = e.info().size;
                Some((nsid, (e, size)))
            })
            .collect();
        let ids: Vec<u32> = exports.keys().copied().collect();
        for op in ops {
            let r = self.nbd_op(&b, &clock, &exports, &ids, op, &mut flush_failed);
            r?;
            if matches!(op, NbdOp::Flush) && flush_failed.is_none() {
                flushed_counters = b.fingerprint().map_err(|e| e.to_string())?.ftl.counters;
            }
        }
        let (fired, crashed) = plan_outcome();
        let synced_len = faults::with(|p| p.synced_len.clone()).unwrap_or_default();
        faults::install(vec![]);
        let live = if crashed { None } else { b.fingerprint().ok() };
        match end {
            End::Clean if !crashed => {
                let r = b.close();
                drop(b);
                if fired && r.is_ok() && flush_failed.is_some() {
                    return Err("a session whose flush failed closed reporting success".into());
                }
                if let Err(e) = &r {
                    self.log.push(format!("  close: {e}"));
                }
                let fp = self.open_check(false)?;
                if let (Some(l), Ok(_)) = (&live, &r) {
                    if l.ftl != fp {
                        return Err(format!(
                            "after a clean close the image's FTL differs from the served one:\n  open:   {fp:?}\n  served: {:?}",
                            l.ftl
                        ));
                    }
                }
                let smart = self.ctrl().state().smart.clone();
                self.set_committed(fp, smart);
                if r.is_err() || fired {
                    self.after_crash();
                }
            }
            _ => {
                b.crash_for_tests();
                drop(b);
                if let End::Crash { tear_per_mille: Some(t) } = end {
                    self.tear_journal(&synced_len, *t)?;
                }
                let fp = self.open_check(true)?;
                // What was flushed is in the image; a crash drops only what was not.
                if fp.counters.host_write_bytes < flushed_counters.host_write_bytes
                    || fp.counters.host_trim_ius < flushed_counters.host_trim_ius
                {
                    return Err(format!(
                        "a crash lost flushed commands: host writes {} B / trims {} after reopen, {} B / {} at the last successful flush",
                        fp.counters.host_write_bytes,
                        fp.counters.host_trim_ius,
                        flushed_counters.host_write_bytes,
                        flushed_counters.host_trim_ius
                    ));
                }
                let smart = self.ctrl().state().smart.clone();
                self.set_committed(fp, smart);
                self.after_crash();
            }
        }
        self.verify_data()
    }

    /// Cut the journal's unsynced tail to `per_mille` of its length (a power loss).
    fn tear_journal(&mut self, synced: &BTreeMap<PathBuf, u64>, per_mille: u16) -> Result<(), Fail> {
        let p = self.dir.join(journal::FILE);
        let Ok(m) = std::fs::metadata(&p) else { return Ok(()) };
        let len = m.len();
        let keep = synced.get(&p).copied().unwrap_or(0).min(len);
        let cut = keep + (len - keep) * (per_mille.min(1000) as u64) / 1000;
        let f = std::fs::OpenOptions::new().write(true).open(&p).map_err(|e| e.to_string())?;
        f.set_len(cut).map_err(|e| e.to_string())?;
        self.log.push(format!("  journal torn from {len} to {cut} bytes (synced {keep})"));
        Ok(())
    }

    fn nbd_op(
        &mut self,
        b: &Arc<TwinBackend>,
        clock: &ManualClock,
        exports: &BTreeMap<u32, (Arc<dyn Export>, u64)>,
        ids: &[u32],
        op: &NbdOp,
        flush_failed: &mut Option<String>,
    ) -> Result<(), Fail> {
        // The NBD server refuses write-like commands on a read-only (write-protected)
        // export with EPERM before they reach the backend; do the same.
        let writing = !matches!(op, NbdOp::Read { .. } | NbdOp::Flush | NbdOp::Idle { .. });
        let pick = |ns: u8, block: u16, blocks: u8| -> Option<(u32, &Arc<dyn Export>, u64, u64)> {
            let id = *ids.get(ns as usize % ids.len().max(1))?;
            let (e, size) = exports.get(&id)?;
            if writing && e.info().read_only {
                return None;
            }
            let total = size / BLOCK;
            if total == 0 {
                return None;
            }
            let first = block as u64 % total;
            let n = (blocks as u64).clamp(1, total - first);
            Some((id, e, first, n))
        };
        match *op {
            NbdOp::Write { ns, block, blocks, fua } => {
                let Some((id, e, first, n)) = pick(ns, block, blocks) else { return Ok(()) };
                let tags: Vec<u64> = (0..n).map(|i| self.next_tag + i).collect();
                self.next_tag += n;
                let mut buf = Vec::with_capacity((n * BLOCK) as usize);
                for t in &tags {
                    buf.extend(std::iter::repeat_n(t.to_le_bytes(), (BLOCK / 8) as usize).flatten());
                }
                let r = e.write(first * BLOCK, &buf, fua);
                self.written(id, first, &tags, r.is_ok(), flush_failed)?;
                if r.is_ok() && fua && flush_failed.is_none() {
                    // FUA: these blocks are durable.
                    for (i, _) in tags.iter().enumerate() {
                        let m = self.data.entry((id, first + i as u64)).or_insert_with(BlockModel::zero);
                        m.durable = m.now.clone();
                    }
                }
            }
            NbdOp::Read { ns, block, blocks } => {
                let Some((id, e, first, n)) = pick(ns, block, blocks) else { return Ok(()) };
                let mut buf = vec![0u8; (n * BLOCK) as usize];
                if let Err(err) = e.read(first * BLOCK, &mut buf) {
                    if flush_failed.is_none() && !plan_outcome().0 {
                        return Err(format!("read of namespace {id} blocks {first}+{n} failed without a fault: {err:?}"));
                    }
                    return Ok(());
                }
                for i in 0..n {
                    let chunk = &buf[(i * BLOCK) as usize..((i + 1) * BLOCK) as usize];
                    let tag = u64::from_le_bytes(chunk[..8].try_into().expect("8 bytes"));
                    if chunk.chunks(8).any(|w| w != tag.to_le_bytes()) {
                        return Err(format!("namespace {id} block {} reads as a mix of writes", first + i));
                    }
                    let m = self.data.entry((id, first + i)).or_insert_with(BlockModel::zero);
                    if !m.now.contains(&tag) {
                        return Err(format!("namespace {id} block {} reads as write #{tag}, expected one of {:?}", first + i, m.now));
                    }
                    m.now = vec![tag];
                }
            }
            NbdOp::Trim { ns, block, blocks } => {
                let Some((id, e, first, n)) = pick(ns, block, blocks) else { return Ok(()) };
                let r = e.trim(first * BLOCK, (n * BLOCK) as u32, false);
                self.written(id, first, &vec![0; n as usize], r.is_ok(), flush_failed)?;
            }
            NbdOp::WriteZeroes { ns, block, blocks, no_hole } => {
                let Some((id, e, first, n)) = pick(ns, block, blocks) else { return Ok(()) };
                let r = e.write_zeroes(first * BLOCK, (n * BLOCK) as u32, ZeroFlags { fua: false, no_hole, fast: false });
                self.written(id, first, &vec![0; n as usize], r.is_ok(), flush_failed)?;
            }
            NbdOp::Flush => {
                match b.flush() {
                    Ok(()) => {
                        if let Some(why) = flush_failed {
                            return Err(format!("a flush succeeded after an earlier one failed ({why}): a failed fsync must never be reported as success later"));
                        }
                        for m in self.data.values_mut() {
                            m.durable = m.now.clone();
                            m.since_flush.clear();
                        }
                    }
                    Err(e) => {
                        if !plan_outcome().0 {
                            return Err(format!("flush failed without a fault: {e:?}"));
                        }
                        let msg = b.failure().unwrap_or_default();
                        if flush_failed.is_none() && !plan_outcome().1 && msg.is_empty() {
                            return Err("a flush failed but the backend names no failure".into());
                        }
                        flush_failed.get_or_insert(format!("{e:?}: {msg}"));
                    }
                }
            }
            NbdOp::Idle { ms } => {
                clock.advance(Duration::from_millis(ms as u64));
                if let Err(e) = b.tick() {
                    if !plan_outcome().0 {
                        return Err(format!("housekeeping failed without a fault: {e}"));
                    }
                    flush_failed.get_or_insert(e);
                }
            }
        }
        Ok(())
    }

    /// A write-like command of `tags` at blocks `first..`: acknowledged (`ok`) or not.
    fn written(&mut self, id: u32, first: u64, tags: &[u64], ok: bool, flush_failed: &mut Option<String>) -> Result<(), Fail> {
        if ok && flush_failed.is_some() {
            return Err(format!(
                "a write to namespace {id} was acknowledged after a failed flush: the image must be read-only from then on"
            ));
        }
        if !ok && flush_failed.is_none() && !plan_outcome().0 {
            // Refused for a reason of its own (write protect): nothing changed.
            return Ok(());
        }
        for (i, t) in tags.iter().enumerate() {
            let m = self.data.entry((id, first + i as u64)).or_insert_with(BlockModel::zero);
            if ok {
                m.now = vec![*t];
                m.since_flush.push(*t);
            } else {
                // Not acknowledged: the data may or may not be there.
                m.now.push(*t);
                m.since_flush.push(*t);
            }
        }
        Ok(())
    }

    /// After a session: read every modelled block from the data files and compare.
    fn verify_data(&mut self) -> Result<(), Fail> {
        use std::os::unix::fs::FileExt;
        let keys: Vec<(u32, u64)> = self.data.keys().copied().collect();
        let mut files: BTreeMap<u32, Option<std::fs::File>> = BTreeMap::new();
        let mut buf = [0u8; 8];
        for (id, blk) in keys {
            let p = self.img().data_path(id);
            let Some(f) = files.entry(id).or_insert_with(|| std::fs::File::open(&p).ok()) else { continue };
            if f.read_exact_at(&mut buf, blk * BLOCK).is_err() {
                continue;
            }
            let tag = u64::from_le_bytes(buf);
            let m = self.data.get_mut(&(id, blk)).expect("key");
            if !m.now.contains(&tag) {
                return Err(format!("after the session, namespace {id} block {blk} holds write #{tag}, expected one of {:?}", m.now));
            }
            m.now = vec![tag];
        }
        Ok(())
    }
}

fn monotone_counters(a: &FtlCounters, b: &FtlCounters) -> Result<(), Fail> {
    let pairs = [
        ("host_write_bytes", a.host_write_bytes, b.host_write_bytes),
        ("host_read_bytes", a.host_read_bytes, b.host_read_bytes),
        ("host_programmed_ius", a.host_programmed_ius, b.host_programmed_ius),
        ("gc_programmed_ius", a.gc_programmed_ius, b.gc_programmed_ius),
        ("erases", a.erases, b.erases),
        ("gc_victims", a.gc_victims, b.gc_victims),
        ("host_trim_ius", a.host_trim_ius, b.host_trim_ius),
    ];
    none_backwards("FTL counter", &pairs)
}

fn monotone_smart(a: &SmartCounters, b: &SmartCounters) -> Result<(), Fail> {
    let pairs = [
        ("data_units_written", a.data_units_written_512, b.data_units_written_512),
        ("data_units_read", a.data_units_read_512, b.data_units_read_512),
        ("host_write_commands", a.host_write_commands, b.host_write_commands),
        ("host_read_commands", a.host_read_commands, b.host_read_commands),
        ("power_cycles", a.power_cycles, b.power_cycles),
        ("unsafe_shutdowns", a.unsafe_shutdowns, b.unsafe_shutdowns),
    ];
    none_backwards("SMART", &pairs)
}

/// (name, before, after) triples: the first counter that went backwards, if any.
fn none_backwards(kind: &str, pairs: &[(&str, u64, u64)]) -> Result<(), Fail> {
    match pairs.iter().find(|(_, x, y)| y < x) {
        Some((name, x, y)) => Err(format!("{kind} {name} went backwards: {x} -> {y}")),
        None => Ok(()),
    }
}

/// An fio engine job (contract v1, docs/fio.md §3) of `kind` over the first `size` bytes.
pub fn job_spec(kind: FioKind, nsid: u32, ns_bytes: u64, lba: u32, size: u64, seed: u64) -> JobSpec {
    let (rw, dirs, random) = match kind {
        FioKind::RandWrite | FioKind::ThinkTime | FioKind::RateLimited => ("randwrite", vec!["write"], true),
        FioKind::SeqWrite => ("write", vec!["write"], false),
        FioKind::RandRead => ("randread", vec!["read"], true),
        FioKind::Trim => ("randtrim", vec!["trim"], true),
        FioKind::RandRw => ("randrw", vec!["read", "write"], true),
    };
    let bs = if lba > 4096 { lba as u64 } else { 4096 };
    let bsd = serde_json::json!({"min": bs, "max": bs, "split": [[bs, 100]]});
    let v = serde_json::json!({
        "version": 1, "name": "sim", "job_index": 0, "thread_number": 1, "subjob": 0, "group_id": 0,
        "batch": 0, "stonewall": false, "filename": null, "namespace": nsid,
        "target_size_bytes": ns_bytes, "lba_bytes": lba, "rw": rw,
        "directions": dirs, "random": random, "rw_nr": 1, "rw_seq_add_bytes": 0,
        "rwmixread": 50, "rwmixwrite": 50,
        "bs": {"read": bsd, "write": bsd, "trim": bsd},
        "bs_unaligned": false, "blockalign": {"read": bs, "write": bs, "trim": bs},
        "offset_bytes": 0, "size_bytes": size, "io_size_bytes": size, "loops": 1,
        "fill_device": false, "number_ios": 0, "ioengine": "libaio", "engine_async": true,
        "iodepth": 4, "iodepth_configured": 4, "time_based": false, "runtime_ns": 0,
        "ramp_time_ns": 0, "startdelay_ns": 0, "norandommap": false,
        "random_generator": "tausworthe", "seed": seed, "seeds": {}, "seed_source": "randrepeat",
        "random_distribution": {"kind": "random", "param": null, "center": null, "zones": null},
        "percentage_random": {"read": 100, "write": 100, "trim": 100},
        "rate_bytes_per_s": {"read": 0, "write": if kind == FioKind::RateLimited { 400_000_000 } else { 0 }, "trim": 0},
        "rate_iops": {"read": 0, "write": 0, "trim": 0}, "rate_process": "linear",
        "thinktime_ns": if kind == FioKind::ThinkTime { 2_000_000 } else { 0 }, "thinktime_spin_ns": 0,
        "thinktime_blocks": if kind == FioKind::ThinkTime { 16 } else { 1 },
        "thinktime_blocks_type": "complete", "bw_avg_ms": 500, "iops_avg_ms": 500,
        "logs": {"bw": false, "iops": false, "lat": false, "hist": false, "avg_ms": 0,
                 "hist_ms": 0, "max_value": false, "offset": false}
    });
    serde_json::from_value(v).expect("a valid engine job")
}
