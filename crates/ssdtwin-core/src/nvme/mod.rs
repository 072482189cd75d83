//! The NVMe controller: the only door into a drive.
//!
//! It owns the namespace table, features, SMART counters and the FTL, and implements the
//! admin commands (namespace management and attachment, format, identify, logs, features)
//! and the I/O commands (read, write, deallocate). The engine, the NBD server and the CLI
//! all go through it, so namespaces, write protect and logs behave the same whichever
//! clock drives the drive.
//!
//! Namespaces take whole chunks of the FTL's logical IU space (see [`crate::ftl::FtlConfig`]),
//! so creating and deleting namespaces never fragments anything and the FTL needs no
//! knowledge of namespaces. Capacity accounting follows the NVMe rule
//! `UNVMCAP = TNVMCAP - Σ NVMCAP`; NAND behind unallocated capacity is spare for GC.

mod ana;
mod identify;
mod lbastatus;
mod logs;
mod plm;
mod precondition;
mod sanitize;
mod sets;
mod status;

pub use ana::{AnaDesc, AnaGroup, AnaLog, AnaNsid, ANA_STATES};
pub use identify::{DramNsCapacity, IdCtrl, IdNs, LbaFormatDesc, PowerStateDesc};
pub use lbastatus::{LbaStatus, LbaStatusDesc, ATYPE_SCAN, ATYPE_TRACKED};
pub use logs::{ErrorLogEntry, ERROR_LOG_ENTRIES, OPC_DSM, OPC_READ, OPC_WRITE, OPC_WRITE_ZEROES, RAW_LOG_IDS};
pub use plm::{PlmSet, PredLatEventAgg, PredLatLog, DTWIN, NDWIN};
pub use sanitize::{
    sanicap, sanitize_times, SanitizeLogJson, SanitizeLogPage, SanitizeRequest, SanitizeState, SanitizeTimes, SANACT_BLOCK_ERASE,
    SANACT_CRYPTO_ERASE, SANACT_EXIT_FAILURE, SANACT_OVERWRITE,
};
pub use sets::{EnduranceGroupLog, NvmSetEntry, NvmSetList, SetCommands};
pub use status::{Error, MapError, Status};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::bigarray::BigArray;
use crate::ftl::{Ftl, ReadSource};
pub use crate::ftl::{FtlConfig, FtlCounters, FtlState};
use crate::nand::NandSink;
#[cfg(test)]
use crate::nand::NoTiming;
use crate::spec::DriveSpec;
pub use crate::units::NsId;
use crate::units::{fmt_decimal, LogicalIu};
use crate::util::splitmix;
use status::fail;

/// NSID meaning "every namespace".
pub const NSID_ALL: u32 = 0xFFFF_FFFF;
/// Our single controller's ID (for attach/detach controller lists).
pub const CONTROLLER_ID: u16 = 1;

/// Namespace write-protect states (Set Features 84h).
pub const WP_NONE: u8 = 0;
pub const WP_PROTECT: u8 = 1;
pub const WP_UNTIL_POWER_CYCLE: u8 = 2;
pub const WP_PERMANENT: u8 = 3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    pub nsid: u32,
    /// NSZE = NCAP (no thin provisioning), in logical blocks.
    pub nsze: u64,
    pub flbas: u8,
    pub lba_bytes: u32,
    pub nmic: u8,
    pub attached: bool,
    pub write_protect: u8,
    /// Logical chunks (of the FTL's IU space) backing this namespace, in order (none for a
    /// DRAM namespace).
    pub chunks: Vec<u32>,
    /// A DRAM namespace: held in the controller's power-loss-protected DRAM, no NAND behind
    /// it (docs/models.md, "DRAM namespace").
    #[serde(default, skip_serializing_if = "is_false")]
    pub dram: bool,
    /// The NVM Set (and Endurance Group) holding the namespace, 0-based (NVMSETID - 1);
    /// 0 on a drive without sets and for a DRAM namespace.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nvm_set: u32,
    /// End-to-end protection of the namespace's format (metadata, PI type, placement).
    #[serde(default, skip_serializing_if = "Protection::is_none")]
    pub protection: Protection,
}

/// What Format NVM asks for beyond the LBA format: nvme-cli's `--pi`, `--pil`, `--ms`
/// (1 = extended LBA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtectionRequest {
    pub pi: u8,
    pub pil: bool,
    pub extended: bool,
}

/// A namespace's metadata and end-to-end protection information (NVMe 1.4 §8.3): the
/// metadata bytes per LBA of its format, the PI type (0 none, 1-3), whether the PI is in
/// the first 8 bytes of the metadata (PIL, `dps` bit 3) and whether the metadata travels
/// with each LBA's data (extended LBA, `flbas` bit 4) or in a separate buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    #[serde(default)]
    pub ms: u16,
    #[serde(default)]
    pub pi: u8,
    #[serde(default)]
    pub pil: bool,
    #[serde(default)]
    pub extended: bool,
}

impl Protection {
    pub fn is_none(&self) -> bool {
        *self == Protection::default()
    }

    /// Identify Namespace DPS: the PI type, and bit 3 when the PI is in the first 8 bytes.
    pub fn dps(&self) -> u8 {
        self.pi | (self.pil as u8) << 3
    }

    /// Metadata bytes the host moves with `nlb` blocks: none when the controller inserts
    /// and strips the PI (PRACT = 1) and the metadata is only the PI.
    pub fn host_metadata_bytes(&self, nlb: u64, pract: bool) -> u64 {
        if self.ms == 0 || (pract && self.pi != 0 && self.ms == 8) {
            0
        } else {
            nlb * self.ms as u64
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Namespace {
    pub fn bytes(&self) -> u64 {
        self.nsze * self.lba_bytes as u64
    }

    /// The FTL's (global) IU behind namespace IU `ns_iu`, with chunks of `1 << shift` IUs;
    /// `None` past the namespace's chunks.
    #[inline(always)]
    fn global_iu(&self, ns_iu: u64, shift: u32) -> Option<LogicalIu> {
        let c = *self.chunks.get((ns_iu >> shift) as usize)?;
        Some(LogicalIu(((c as u64) << shift | (ns_iu & ((1u64 << shift) - 1))) as u32))
    }
}

/// One namespace as `nvme list` and the Python API show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRow {
    pub nsid: u32,
    pub nsze: u64,
    pub ncap: u64,
    pub nuse: u64,
    pub lba_bytes: u32,
    pub flbas: u8,
    pub attached: bool,
    pub write_protect: u8,
    pub nmic: u8,
    pub bytes: u64,
    /// A DRAM namespace.
    #[serde(default)]
    pub dram: bool,
    /// NVMSETID (= ENDGID) of the namespace; 0 on a drive without NVM Sets and for a DRAM
    /// namespace.
    #[serde(default)]
    pub nvmsetid: u16,
    /// Metadata bytes per LBA and the PI type (0: none) of the namespace's format.
    #[serde(default)]
    pub ms: u16,
    #[serde(default)]
    pub pi: u8,
}

/// What the read-only commands show (identify data, namespaces, logs): taken from an open
/// controller ([`Controller::view`]) or from a running server's `live.json`, which embeds
/// this same structure, so both paths print the same thing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerView {
    pub id_ctrl: IdCtrl,
    /// Identify Namespace of every namespace, by NSID (as a string: JSON object keys).
    pub id_ns: BTreeMap<String, IdNs>,
    pub namespaces: Vec<NamespaceRow>,
    pub smart_log: SmartLog,
    pub vendor_log: VendorLog,
    /// The NVM Set List (Identify CNS 04h) of a drive with NVM Sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_nvmset: Option<NvmSetList>,
    /// The Endurance Group Information log (09h) of each group, by ENDGID (as a string).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endurance_logs: BTreeMap<String, EnduranceGroupLog>,
    /// The Error Information log (01h), newest entry first.
    #[serde(default)]
    pub error_log: Vec<ErrorLogEntry>,
    /// The Sanitize Status log (81h) at the time of the view.
    #[serde(default)]
    pub sanitize_log: SanitizeLogPage,
}

impl ControllerView {
    /// The NVM Set List from `nvmsetid` on, or the status the controller returns for it.
    pub fn id_nvmset(&self, nvmsetid: u16) -> Result<NvmSetList, Error> {
        match &self.id_nvmset {
            Some(l) => sets::list_from(l, nvmsetid),
            None => sets::no_sets(&self.id_ctrl.mn),
        }
    }

    /// The Endurance Group log of group `endgid`, or the status the controller returns.
    pub fn endurance_log(&self, endgid: u16) -> Result<&EnduranceGroupLog, Error> {
        match self.endurance_logs.get(&endgid.to_string()) {
            Some(l) => Ok(l),
            None => sets::unknown_group(endgid, self.endurance_logs.len() as u32, &self.id_ctrl.mn),
        }
    }

    /// Identify Namespace of `nsid`, or the status the controller returns for it.
    pub fn id_ns(&self, nsid: NsId) -> Result<&IdNs, Error> {
        let nsid = nsid.0;
        match self.id_ns.get(&nsid.to_string()) {
            Some(id) => Ok(id),
            None => fail(Status::InvalidNamespaceOrFormat, format!("namespace {nsid} does not exist (namespaces: {})", self.nsid_list())),
        }
    }

    fn nsid_list(&self) -> String {
        if self.namespaces.is_empty() {
            return "none".into();
        }
        self.namespaces.iter().map(|n| n.nsid.to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// FTL geometry numbers of a drive (`Drive.ftl_info()`, `ssdtwin create`'s summary).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FtlInfo {
    pub iu_bytes: u32,
    pub superblocks: u32,
    pub ius_per_superblock: u32,
    pub superblock_bytes: u64,
    pub gc_overhead_superblocks: f64,
    pub logical_ius: u32,
    pub chunk_ius: u32,
    pub buffer_slots: u32,
    pub raw_bytes: u64,
    pub program_unit_bytes: u64,
    pub dies: u32,
    /// NVM Sets (FTL partitions), each on its own dies.
    #[serde(default = "one_u32")]
    pub nvm_sets: u32,
    /// FTL partitions of the whole drive (NVM Sets x partitions per set).
    #[serde(default = "one_u32")]
    pub partitions: u32,
    pub data_pool_bytes: u64,
    /// Whether the FTL maps are in memory (they load on first use).
    pub maps_loaded: bool,
}

fn one_u32() -> u32 {
    1
}

/// SMART / Health counters kept exactly; the log rounds them the NVMe way on output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmartCounters {
    /// Host data read/written in 512-byte units (exact; the log reports thousands, rounded up).
    pub data_units_read_512: u64,
    pub data_units_written_512: u64,
    pub host_read_commands: u64,
    pub host_write_commands: u64,
    pub power_cycles: u64,
    pub unsafe_shutdowns: u64,
    pub controller_busy_ns: u64,
    pub media_errors: u64,
    pub error_log_entries: u64,
    /// Host bytes read from / written to DRAM namespaces (host traffic, never NAND traffic).
    #[serde(default)]
    pub dram_read_bytes: u64,
    #[serde(default)]
    pub dram_write_bytes: u64,
    /// Bytes of DRAM namespaces dumped to the reserved NAND area at power-off.
    #[serde(default)]
    pub dram_flush_bytes: u64,
}

/// Everything about the controller that persists, except the FTL.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ControllerState {
    pub serial: String,
    /// The image's seed; commands that need randomness derive theirs from it.
    pub seed: u64,
    /// How many seeded commands have run (so each gets a distinct, replayable seed).
    pub seeded_commands: u64,
    pub namespaces: BTreeMap<u32, Namespace>,
    pub power_state: u8,
    pub arbitration: u32,
    pub temperature_threshold_k: u32,
    pub interrupt_coalescing: u32,
    pub smart: SmartCounters,
    /// Virtual time the drive has been powered and running workloads (power-on hours).
    pub clock_ns: u64,
    /// Per-namespace QoS caps set by the vendor QoS command, by NSID (absent: no cap).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub qos: BTreeMap<u32, QosLimits>,
    /// Priority class of the submission queues the host creates for a namespace (NVMe
    /// QPRIO: 0 urgent, 1 high, 2 medium, 3 low), by NSID; absent: medium.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sq_priority: BTreeMap<u32, u8>,
    /// Host commands per NVM Set (Endurance Group log), on drives with NVM Sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_commands: Vec<SetCommands>,
    /// Predictable Latency Mode of each NVM Set (empty: never enabled), nvme/plm.rs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plm: Vec<PlmSet>,
    /// ANA group states by ANAGRPID (= NSID; absent: optimized), nvme/ana.rs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ana: BTreeMap<u32, AnaGroup>,
    /// The ANA log's change count.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub ana_chgcnt: u64,
    /// LBA ranges (start, blocks) injected as unrecoverable, by NSID (nvme/lbastatus.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unrecoverable: BTreeMap<u32, Vec<(u64, u64)>>,
    /// The most recent sanitize and the wear of all of them.
    #[serde(default, skip_serializing_if = "SanitizeState::is_never")]
    pub sanitize: SanitizeState,
    /// Media encryption key generation by NSID (absent: the factory key, generation 0).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub media_keys: BTreeMap<u32, u32>,
    /// The Error Information log, newest first (at most [`ERROR_LOG_ENTRIES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_log: Vec<ErrorLogEntry>,
    /// Injected protection-information corruption, by NSID then LBA: which tags of the
    /// stored PI no longer match (PRCHK bits: 4 guard, 2 application tag, 1 reference tag).
    /// A write of the LBA stores fresh PI and clears it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pi_errors: BTreeMap<u32, BTreeMap<u64, u8>>,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// PRCHK bits of PRINFO (NVMe 1.4 Figure 200): check the guard, application and reference tags.
pub const PRCHK_GUARD: u8 = 4;
pub const PRCHK_APPTAG: u8 = 2;
pub const PRCHK_REFTAG: u8 = 1;

/// The NVMe queue priority classes (QPRIO), by value.
pub const SQ_PRIORITIES: [&str; 4] = ["urgent", "high", "medium", "low"];
/// The class of a namespace's queues when none was set.
pub const SQ_PRIORITY_DEFAULT: u8 = 2;

/// Submission-queue arbitration (feature 01h, CC.AMS): round robin, or weighted round
/// robin with an urgent class. The twin selects WRR when any weight field is non-zero
/// (CC is a register, not a feature: docs/models.md §9).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arbitration {
    /// Commands fetched from one queue per turn (2^AB; None = unlimited, AB = 7).
    pub burst: Option<u32>,
    /// WRR weights (1's based) of the high, medium and low classes; None = round robin.
    pub weights: Option<[u32; 3]>,
}

impl Arbitration {
    pub fn from_feature(value: u32) -> Arbitration {
        let ab = value & 0x7;
        let w = |shift: u32| ((value >> shift) & 0xff) + 1;
        Arbitration { burst: (ab != 7).then_some(1 << ab), weights: (value >> 8 != 0).then(|| [w(24), w(16), w(8)]) }
    }
}

/// A namespace's QoS caps (the vendor QoS admin command, docs/models.md §9): read and write
/// bandwidth in bytes per second and commands per second; 0 = no cap.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosLimits {
    pub read_bytes_per_s: u64,
    pub write_bytes_per_s: u64,
    pub iops: u64,
}

impl QosLimits {
    pub fn is_unlimited(&self) -> bool {
        *self == QosLimits::default()
    }
}

/// One namespace's caps as `ssdtwin nvme qos -o json` shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosRow {
    pub nsid: u32,
    #[serde(flatten)]
    pub limits: QosLimits,
    /// The class of the namespace's queues: urgent, high, medium or low.
    pub sq_priority: String,
}

/// Loads the FTL maps of an image on first use.
pub trait MapStore: Send {
    /// Where the maps are (named in errors).
    fn location(&self) -> PathBuf;
    /// The two maps, of `l2p_len` and `p2l_len` entries, checked against their checksums.
    fn load_maps(&self, l2p_len: usize, p2l_len: usize) -> Result<(BigArray, BigArray), MapError>;
}

/// See [`Controller::ftl_fingerprint`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlFingerprint {
    pub l2p_xxh3: String,
    pub p2l_xxh3: String,
    pub counters: FtlCounters,
}

/// Summary of a host read for callers that time it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSummary {
    pub nand_ius: u32,
    pub buffer_ius: u32,
    pub unmapped_ius: u32,
}

/// The access pattern of a preconditioning run (reports spell it "sequential"/"random").
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Sequential,
    Random,
}

/// A pattern name that is not one of "seq", "sequential", "rand", "random".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pattern '{0}': use 'seq' or 'rand'")]
pub struct UnknownPattern(pub String);

impl std::str::FromStr for Pattern {
    type Err = UnknownPattern;

    fn from_str(s: &str) -> Result<Pattern, UnknownPattern> {
        match s {
            "seq" | "sequential" => Ok(Pattern::Sequential),
            "rand" | "random" => Ok(Pattern::Random),
            other => Err(UnknownPattern(other.to_string())),
        }
    }
}

/// What a preconditioning run did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PreconditionReport {
    pub nsid: u32,
    pub pattern: Pattern,
    pub block_bytes: u64,
    pub seed: u64,
    pub host_bytes: u64,
    pub ios: u64,
    pub nand_bytes: u64,
    pub waf: f64,
    pub interrupted: bool,
}

pub struct Controller {
    spec: DriveSpec,
    cfg: FtlConfig,
    st: ControllerState,
    ftl: Option<Box<Ftl>>,
    /// The FTL's small state while its maps are still on disk.
    ftl_meta: Option<FtlState>,
    store: Option<Box<dyn MapStore>>,
    /// The latest virtual time a timed run reported (Predictable Latency Mode windows); not
    /// saved: the clock catches up when the run ends.
    plm_now_ns: u64,
    /// Threads fast-forward may use (0: one per core). Not saved: results do not depend on it.
    ff_threads: usize,
}

impl Controller {
    /// A factory-fresh drive: one namespace of the whole capacity in the first LBA format,
    /// attached.
    pub fn new(spec: DriveSpec, seed: u64) -> Result<Controller, Error> {
        let cfg = FtlConfig::from_spec(&spec);
        let ftl = Ftl::new(&spec).map_err(Error::Memory)?;
        let st = ControllerState {
            serial: serial_for(&spec, seed),
            seed,
            seeded_commands: 0,
            namespaces: BTreeMap::new(),
            power_state: 0,
            arbitration: 0,
            temperature_threshold_k: 343,
            interrupt_coalescing: 0,
            smart: SmartCounters::default(),
            clock_ns: 0,
            qos: BTreeMap::new(),
            sq_priority: BTreeMap::new(),
            set_commands: Vec::new(),
            plm: Vec::new(),
            ana: BTreeMap::new(),
            ana_chgcnt: 0,
            unrecoverable: BTreeMap::new(),
            sanitize: SanitizeState::default(),
            media_keys: BTreeMap::new(),
            error_log: Vec::new(),
            pi_errors: BTreeMap::new(),
        };
        let mut c = Controller { spec, cfg, st, ftl: Some(Box::new(ftl)), ftl_meta: None, store: None, plm_now_ns: 0, ff_threads: 0 };
        if c.has_nvm_sets() {
            c.st.set_commands = vec![SetCommands::default(); c.cfg.sets as usize];
        }
        // One namespace of the whole capacity; with NVM Sets, one filling each set.
        let lba = c.spec.capacity.lba_bytes.value[0] as u64;
        for set in 0..c.cfg.sets {
            let blocks = c.set_capacity(set) / lba;
            let nsid = c.create_ns_in_set(blocks, blocks, 0, 0, c.nvmsetid_of(set))?;
            c.attach_ns(nsid, &[CONTROLLER_ID])?;
        }
        Ok(c)
    }

    /// Reassemble a controller whose FTL maps stay on disk until first needed. The state is
    /// checked first (everything that needs no maps): a state that does not hold together is
    /// refused, never run.
    pub fn from_parts(
        spec: DriveSpec,
        st: ControllerState,
        ftl_meta: FtlState,
        store: Box<dyn MapStore>,
    ) -> Result<Controller, InvalidState> {
        let cfg = FtlConfig::from_spec(&spec);
        ftl_meta.check_cheap(&cfg).map_err(InvalidState)?;
        check_controller_state(&spec, &cfg, &st).map_err(InvalidState)?;
        sets::check_chunk_sets(&st, &ftl_meta).map_err(InvalidState)?;
        plm::check_plm_state(&spec, &cfg, &st, &ftl_meta).map_err(InvalidState)?;
        Ok(Controller { spec, cfg, st, ftl: None, ftl_meta: Some(ftl_meta), store: Some(store), plm_now_ns: 0, ff_threads: 0 })
    }

    /// Every invariant, maps included (loads them; O(capacity)): `ssdtwin check`.
    pub fn check_full(&mut self) -> Result<(), Error> {
        self.check_state()?;
        self.ftl()?.check_invariants().map_err(InvalidState)?;
        Ok(())
    }

    /// The cheap invariants of the whole state (controller and FTL, no maps): what the image
    /// checks before it writes a generation.
    pub fn check_state(&self) -> Result<(), InvalidState> {
        self.ftl_state().check_cheap(&self.cfg).map_err(InvalidState)?;
        check_controller_state(&self.spec, &self.cfg, &self.st).map_err(InvalidState)?;
        sets::check_chunk_sets(&self.st, self.ftl_state()).map_err(InvalidState)?;
        plm::check_plm_state(&self.spec, &self.cfg, &self.st, self.ftl_state()).map_err(InvalidState)
    }

    pub fn spec(&self) -> &DriveSpec {
        &self.spec
    }

    pub fn ftl_config(&self) -> &FtlConfig {
        &self.cfg
    }

    pub fn state(&self) -> &ControllerState {
        &self.st
    }

    pub fn ftl_state(&self) -> &FtlState {
        match &self.ftl {
            Some(f) => f.state(),
            None => self.ftl_meta.as_ref().expect("FTL state present"),
        }
    }

    pub fn ftl_counters(&self) -> &FtlCounters {
        self.ftl_state().counters()
    }

    /// The small FTL state, mutable (chunks given to a set), whether the maps are loaded or not.
    fn ftl_state_mut(&mut self) -> &mut FtlState {
        match &mut self.ftl {
            Some(f) => f.state_mut(),
            None => self.ftl_meta.as_mut().expect("FTL state present"),
        }
    }

    pub fn maps_loaded(&self) -> bool {
        self.ftl.is_some()
    }

    /// Load the maps now (a server does, rather than stall its first I/O behind it).
    pub fn load_maps(&mut self) -> Result<(), Error> {
        self.ftl().map(|_| ())
    }

    /// Checksums of the maps and the FTL's counters: two controllers with equal fingerprints
    /// have the same FTL state (the timed and untimed paths, a journal replay and the run it
    /// recorded are compared this way). Loads the maps.
    pub fn ftl_fingerprint(&mut self) -> Result<FtlFingerprint, Error> {
        let f = self.ftl()?;
        let (l2p, p2l) = f.maps();
        Ok(FtlFingerprint {
            l2p_xxh3: format!("{:016x}", l2p.checksum()),
            p2l_xxh3: format!("{:016x}", p2l.checksum()),
            counters: f.counters().clone(),
        })
    }

    /// The FTL, loading its maps from the image if needed. Private: the controller is the
    /// only door into the FTL (docs/architecture.md, "Layer rules").
    #[inline]
    fn ftl(&mut self) -> Result<&mut Ftl, Error> {
        if self.ftl.is_none() {
            self.load_ftl()?;
        }
        Ok(self.ftl.as_mut().expect("just loaded"))
    }

    /// Load the maps from the image (the first command that needs the FTL).
    #[cold]
    fn load_ftl(&mut self) -> Result<(), Error> {
        let store = self.store.as_ref().expect("an unloaded FTL always has a store");
        let (l2p, p2l) = store.load_maps(self.cfg.logical_ius as usize, self.cfg.physical_ius() as usize)?;
        let meta = self.ftl_meta.as_ref().expect("FTL state present");
        meta.check_loaded_maps(&self.cfg, &l2p, &p2l).map_err(|reason| MapError::Damaged {
            path: store.location(),
            reason: format!("the maps disagree with the saved FTL state: {reason}"),
        })?;
        let meta = self.ftl_meta.take().expect("FTL state present");
        self.ftl = Some(Box::new(Ftl::from_parts(self.cfg.clone(), meta, l2p, p2l)));
        Ok(())
    }

    /// Take the FTL apart for saving (maps are `None` when never loaded).
    pub fn persist_parts(&self) -> (&ControllerState, &FtlState, Option<(&BigArray, &BigArray)>) {
        match &self.ftl {
            Some(f) => (&self.st, f.state(), Some(f.maps())),
            None => (&self.st, self.ftl_meta.as_ref().expect("FTL state present"), None),
        }
    }

    /// Where to load the maps from when they are first needed.
    pub fn set_map_store(&mut self, store: Box<dyn MapStore>) {
        self.store = Some(store);
    }

    /// A deterministic seed for the next seeded command, derived from the image seed.
    pub fn next_seed(&mut self) -> u64 {
        self.st.seeded_commands += 1;
        splitmix(self.st.seed ^ splitmix(self.st.seeded_commands))
    }

    pub fn advance_clock(&mut self, ns: u64, busy_ns: u64) {
        self.st.clock_ns += ns;
        self.st.smart.controller_busy_ns += busy_ns;
        // The timed run's own times were relative to its start: the clock now covers them.
        self.plm_now_ns = 0;
        if !self.st.plm.is_empty() {
            self.plm_tick(self.st.clock_ns);
        }
    }

    /// Simulated power off/on: clears "write protect until power cycle".
    /// DRAM namespaces are dumped to their reserved NAND area at every power-off (the
    /// capacitors carry an unsafe one through): their whole size is counted.
    pub fn power_cycle(&mut self, unsafe_shutdown: bool) {
        self.st.smart.dram_flush_bytes += self.dram_allocated_bytes();
        self.st.smart.power_cycles += 1;
        if unsafe_shutdown {
            self.st.smart.unsafe_shutdowns += 1;
        }
        for ns in self.st.namespaces.values_mut() {
            if ns.write_protect == WP_UNTIL_POWER_CYCLE {
                ns.write_protect = WP_NONE;
            }
        }
    }

    // ------------------------------------------------------------- capacity accounting

    pub fn tnvmcap(&self) -> u64 {
        self.spec.capacity.tnvmcap_bytes.value
    }

    /// NVM capacity allocated to namespaces (DRAM namespaces take none).
    pub fn allocated_bytes(&self) -> u64 {
        self.st.namespaces.values().filter(|n| !n.dram).map(|n| n.bytes()).sum()
    }

    /// DRAM given to DRAM namespaces.
    pub fn dram_allocated_bytes(&self) -> u64 {
        self.st.namespaces.values().filter(|n| n.dram).map(|n| n.bytes()).sum()
    }

    /// The DRAM namespace budget of this drive (0: it has no DRAM namespaces).
    pub fn dram_budget_bytes(&self) -> u64 {
        self.spec.dram_namespace.as_ref().map_or(0, |d| d.budget_bytes.value)
    }

    pub fn unvmcap(&self) -> u64 {
        self.tnvmcap() - self.allocated_bytes()
    }

    pub fn namespace(&self, nsid: NsId) -> Result<&Namespace, Error> {
        self.namespace_u32(nsid.0)
    }

    #[inline]
    fn namespace_u32(&self, nsid: u32) -> Result<&Namespace, Error> {
        match self.st.namespaces.get(&nsid) {
            Some(ns) => Ok(ns),
            None => self.no_namespace(nsid),
        }
    }

    #[cold]
    fn no_namespace<T>(&self, nsid: u32) -> Result<T, Error> {
        fail(Status::InvalidNamespaceOrFormat, format!("namespace {nsid} does not exist (namespaces: {})", self.nsid_list()))
    }

    /// The namespace table row of `nsid` (size, use, format, attachment).
    pub fn namespace_row(&self, nsid: NsId) -> Result<NamespaceRow, Error> {
        let nsid = nsid.0;
        let ns = self.namespace_u32(nsid)?;
        Ok(self.row(ns))
    }

    /// The LBA format index (FLBAS) whose data size is `block_bytes`.
    pub fn lba_format_index(&self, block_bytes: u64) -> Result<u8, Error> {
        let formats = &self.spec.lba_formats();
        match formats.iter().position(|&(b, m)| b as u64 == block_bytes && m == 0) {
            Some(i) => Ok(i as u8),
            None => fail(
                Status::InvalidFormat,
                format!("block size {block_bytes} is not an LBA format of this drive (formats: {})", fmt_formats(formats)),
            ),
        }
    }

    fn nsid_list(&self) -> String {
        if self.st.namespaces.is_empty() {
            return "none".into();
        }
        self.st.namespaces.keys().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.st.namespaces.values()
    }

    fn free_chunks(&self) -> Vec<u32> {
        let mut used = vec![false; self.cfg.chunks() as usize];
        for ns in self.st.namespaces.values() {
            for &c in &ns.chunks {
                used[c as usize] = true;
            }
        }
        (0..self.cfg.chunks()).filter(|&c| !used[c as usize]).collect()
    }

    // ------------------------------------------------------------- namespace management

    /// Namespace Management - create. Returns the new NSID. On a drive with NVM Sets the
    /// controller picks the set (the first with room, as for NVMSETID 0).
    pub fn create_ns(&mut self, nsze: u64, ncap: u64, flbas: u8, nmic: u8) -> Result<NsId, Error> {
        self.create_ns_in(nsze, ncap, flbas, nmic, false, 0)
    }

    /// Namespace Management - create in NVM Set `nvmsetid` (1-based; 0: the controller
    /// picks the first set with room). An unknown set is INVALID_FIELD, a namespace larger
    /// than the set's unallocated capacity NS_INSUFFICIENT_CAPACITY.
    pub fn create_ns_in_set(&mut self, nsze: u64, ncap: u64, flbas: u8, nmic: u8, nvmsetid: u16) -> Result<NsId, Error> {
        self.create_ns_in(nsze, ncap, flbas, nmic, false, nvmsetid)
    }

    /// Namespace Management - create a DRAM namespace (the vendor extension of the PBlaze5
    /// firmware; docs/models.md, "DRAM namespace"): within the preset's DRAM budget, taking
    /// no NVM capacity.
    pub fn create_dram_ns(&mut self, nsze: u64, ncap: u64, flbas: u8, nmic: u8) -> Result<NsId, Error> {
        self.create_ns_in(nsze, ncap, flbas, nmic, true, 0)
    }

    /// Namespace Management - create: a DRAM namespace (`dram`, NVMSETID 0) or a NAND one
    /// in NVM Set `nvmsetid` (0: the controller picks), as [`Controller::create_ns_in_set`].
    pub fn create_ns_in(&mut self, nsze: u64, ncap: u64, flbas: u8, nmic: u8, dram: bool, nvmsetid: u16) -> Result<NsId, Error> {
        let formats = &self.spec.lba_formats();
        let Some(lba) = self.spec.lba_format(flbas as usize) else {
            return fail(Status::InvalidFormat, format!("LBA format {flbas} is not supported; formats: {}", fmt_formats(formats)));
        };
        if nsze == 0 {
            return fail(Status::InvalidField, "nsze must be at least 1 block");
        }
        if ncap < nsze {
            return fail(
                Status::ThinProvisioningNotSupported,
                format!("ncap {ncap} below nsze {nsze}: thin provisioning is not supported; use -c equal to -s"),
            );
        }
        if ncap > nsze {
            return fail(Status::InvalidField, format!("ncap {ncap} exceeds nsze {nsze}"));
        }
        if nmic > 1 {
            return fail(Status::InvalidField, format!("nmic {nmic}: only 0 (private) and 1 (shared) exist"));
        }
        let bytes = nsze.saturating_mul(lba as u64);
        if dram {
            if nvmsetid != 0 {
                return fail(Status::InvalidField, format!("NVM Set {nvmsetid}: a DRAM namespace lies in no NVM Set (use 0)"));
            }
            self.check_dram_room(nsze, lba, bytes)?;
        }
        let set = if dram { 0 } else { self.pick_set(nvmsetid, bytes)? };
        if !dram && self.has_nvm_sets() {
            // The binding limit on a drive with sets: the set's own unallocated capacity.
            self.check_set_room(set, nsze, lba, bytes)?;
        }
        let unvmcap = if dram { u64::MAX } else { self.unvmcap() };
        if bytes > unvmcap {
            return fail(
                Status::NsInsufficientCapacity,
                format!(
                    "{nsze} blocks x {lba} B = {bytes} bytes ({}) requested, {unvmcap} bytes ({}) unallocated (at most {} blocks of {lba} B)",
                    fmt_decimal(bytes),
                    fmt_decimal(unvmcap),
                    unvmcap / lba as u64
                ),
            );
        }
        let nn = self.spec.capacity.max_namespaces.value;
        let Some(nsid) = (1..=nn).find(|id| !self.st.namespaces.contains_key(id)) else {
            return fail(Status::NsIdUnavailable, format!("all {nn} namespace IDs are in use"));
        };
        let ius = bytes.div_ceil(self.cfg.iu_bytes as u64);
        let need = if dram { 0 } else { ius.div_ceil(self.cfg.chunk_ius() as u64) as usize };
        let free = self.free_chunks();
        // The logical space carries one spare chunk per namespace, so this cannot fail
        // when the capacity check passed.
        assert!(free.len() >= need, "logical space exhausted: need {need} chunks, {} free", free.len());
        let chunks = free[..need].to_vec();
        self.ftl_state_mut().assign_chunks(&chunks, set);
        self.st.namespaces.insert(
            nsid,
            Namespace {
                nsid,
                nsze,
                flbas,
                lba_bytes: lba,
                nmic,
                attached: false,
                write_protect: WP_NONE,
                chunks,
                dram,
                nvm_set: set,
                protection: Protection { ms: self.spec.lba_formats()[flbas as usize].1, ..Protection::default() },
            },
        );
        Ok(NsId(nsid))
    }

    /// A DRAM namespace of `bytes` fits what is left of the DRAM budget.
    fn check_dram_room(&self, nsze: u64, lba: u32, bytes: u64) -> Result<(), Error> {
        let budget = self.dram_budget_bytes();
        if budget == 0 {
            return fail(
                Status::InvalidField,
                format!("{} has no DRAM namespaces (its preset sets no [dram_namespace] budget)", self.spec.drive.name),
            );
        }
        let free = budget - self.dram_allocated_bytes();
        if bytes > free {
            return fail(
                Status::NsInsufficientCapacity,
                format!(
                    "DRAM namespace of {nsze} blocks x {lba} B = {bytes} bytes requested, {free} bytes of the {budget}-byte DRAM budget free (at most {} blocks of {lba} B)",
                    free / lba as u64
                ),
            );
        }
        Ok(())
    }

    /// Namespace Management - delete (`NSID_ALL` deletes every namespace).
    pub fn delete_ns(&mut self, nsid: NsId) -> Result<(), Error> {
        let nsid = nsid.0;
        let ids: Vec<u32> =
            if nsid == NSID_ALL { self.st.namespaces.keys().copied().collect() } else { vec![self.namespace_u32(nsid)?.nsid] };
        for id in ids {
            let chunks = self.st.namespaces[&id].chunks.clone();
            self.deallocate_chunks(&chunks)?;
            self.st.namespaces.remove(&id);
            self.change_media_key(id); // its key is destroyed with it
            self.st.qos.remove(&id);
            self.st.sq_priority.remove(&id);
            self.st.ana.remove(&id);
            self.repair_media(id, None);
        }
        Ok(())
    }

    fn deallocate_chunks(&mut self, chunks: &[u32]) -> Result<(), Error> {
        let shift = self.cfg.chunk_shift;
        let st = self.ftl_state();
        let mapped: u64 = chunks.iter().map(|&c| st.mapped_in_chunk(c) as u64).sum();
        let buffered = st.buffered_ius() > 0;
        if mapped == 0 && !buffered {
            return Ok(()); // nothing on NAND: no need to load the maps
        }
        let ftl = self.ftl()?;
        for &c in chunks {
            ftl.deallocate_range(LogicalIu(c << shift), 1 << shift);
        }
        Ok(())
    }

    fn check_ctrl_list(ctrls: &[u16]) -> Result<(), Error> {
        if ctrls.is_empty() {
            return fail(Status::ControllerListInvalid, "the controller list is empty; this drive has controller 1");
        }
        if let Some(c) = ctrls.iter().find(|&&c| c != CONTROLLER_ID) {
            return fail(
                Status::ControllerListInvalid,
                format!("controller {c} does not exist; this drive has controller {CONTROLLER_ID}"),
            );
        }
        Ok(())
    }

    pub fn attach_ns(&mut self, nsid: NsId, ctrls: &[u16]) -> Result<(), Error> {
        let nsid = nsid.0;
        Self::check_ctrl_list(ctrls)?;
        self.namespace_u32(nsid)?;
        let ns = self.st.namespaces.get_mut(&nsid).expect("checked");
        if ns.attached {
            return fail(Status::NsAlreadyAttached, format!("namespace {nsid} is already attached to controller {CONTROLLER_ID}"));
        }
        ns.attached = true;
        Ok(())
    }

    pub fn detach_ns(&mut self, nsid: NsId, ctrls: &[u16]) -> Result<(), Error> {
        let nsid = nsid.0;
        Self::check_ctrl_list(ctrls)?;
        self.namespace_u32(nsid)?;
        let ns = self.st.namespaces.get_mut(&nsid).expect("checked");
        if !ns.attached {
            return fail(Status::NsNotAttached, format!("namespace {nsid} is not attached to controller {CONTROLLER_ID}"));
        }
        ns.attached = false;
        Ok(())
    }

    /// Format NVM: change the LBA format and erase, keeping no protection information. See
    /// [`Controller::format_with`].
    pub fn format(&mut self, nsid: NsId, lbaf: u8, ses: u8) -> Result<(), Error> {
        self.format_with(nsid, lbaf, ses, ProtectionRequest::default())
    }

    /// Format NVM: change the LBA format (with its metadata and protection information) and
    /// erase. `ses` 0 = no secure erase, 1 = user data erase, 2 = cryptographic erase. Every
    /// variant deallocates all LBAs of the namespace (the twin stores no ciphertext, so a
    /// crypto erase is a purge: mappings dropped) and clears injected PI errors.
    pub fn format_with(&mut self, nsid: NsId, lbaf: u8, ses: u8, req: ProtectionRequest) -> Result<(), Error> {
        let nsid = nsid.0;
        self.check_not_sanitizing()?;
        if ses > 2 {
            return fail(Status::InvalidField, format!("ses {ses}: must be 0 (none), 1 (user data erase) or 2 (cryptographic erase)"));
        }
        let formats = self.spec.lba_formats();
        let Some(&(new_lba, ms)) = formats.get(lbaf as usize) else {
            return fail(Status::InvalidFormat, format!("LBA format {lbaf} is not supported; formats: {}", fmt_formats(&formats)));
        };
        let protection = self.check_protection(lbaf, ms, req)?;
        let ids: Vec<u32> =
            if nsid == NSID_ALL { self.st.namespaces.keys().copied().collect() } else { vec![self.namespace_u32(nsid)?.nsid] };
        for id in &ids {
            let ns = &self.st.namespaces[id];
            if ns.write_protect != WP_NONE {
                return fail(Status::NamespaceWriteProtected, format!("namespace {id} is write protected"));
            }
            // Checked before anything changes: a namespace smaller than one block of the new
            // format would be left with no blocks at all.
            if ns.bytes() < new_lba as u64 {
                return fail(
                    Status::InvalidFormat,
                    format!("namespace {id} has {} bytes, less than one {new_lba}-byte block of LBA format {lbaf}; choose a smaller format or a bigger namespace", ns.bytes()),
                );
            }
        }
        for id in ids {
            let chunks = self.st.namespaces[&id].chunks.clone();
            self.deallocate_chunks(&chunks)?;
            self.repair_media(id, None);
            if ses == 2 {
                self.change_media_key(id); // only this namespace's key changes
            }
            let ns = self.st.namespaces.get_mut(&id).expect("exists");
            let bytes = ns.bytes();
            ns.flbas = lbaf;
            ns.lba_bytes = new_lba;
            ns.nsze = bytes / new_lba as u64;
            ns.protection = protection;
        }
        Ok(())
    }

    /// The protection a format request asks for, or the status that refuses it: a PI type
    /// the drive does not support, PI without 8 bytes of metadata, or PIL/MSET on a format
    /// without metadata.
    fn check_protection(&self, lbaf: u8, ms: u16, req: ProtectionRequest) -> Result<Protection, Error> {
        let types = self.spec.pi_types();
        if req.pi > 3 {
            return fail(Status::InvalidField, format!("pi {}: must be 0 (none), 1, 2 or 3", req.pi));
        }
        if req.pi != 0 && !types.contains(&req.pi) {
            let offered = if types.is_empty() { "none".to_string() } else { format!("{types:?}") };
            return fail(
                Status::InvalidFormat,
                format!("protection information type {} is not supported (supported types: {offered})", req.pi),
            );
        }
        if req.pi != 0 && ms < 8 {
            return fail(
                Status::InvalidFormat,
                format!("protection information needs at least 8 bytes of metadata; LBA format {lbaf} has {ms}"),
            );
        }
        Ok(Protection { ms, pi: req.pi, pil: req.pi != 0 && req.pil, extended: ms != 0 && req.extended })
    }

    // ------------------------------------------------------------- features

    /// Get Features. `nsid` matters for namespace-scoped features (84h).
    pub fn get_feature(&self, fid: u8, nsid: NsId) -> Result<u32, Error> {
        let nsid = nsid.0;
        match fid {
            0x01 => Ok(self.st.arbitration),
            0x02 => Ok(self.st.power_state as u32),
            0x04 => Ok(self.st.temperature_threshold_k),
            0x06 => Ok(0), // no volatile write cache: the buffer is power-loss protected
            0x07 => Ok((63 << 16) | 63),
            0x08 => Ok(self.st.interrupt_coalescing),
            0x84 => Ok(self.attached_u32(nsid)?.write_protect as u32),
            _ => fail(
                Status::InvalidField,
                format!("feature {fid:#04x} is not supported (supported: 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x84)"),
            ),
        }
    }

    /// Set Features.
    pub fn set_feature(&mut self, fid: u8, nsid: NsId, value: u32) -> Result<(), Error> {
        let nsid = nsid.0;
        match fid {
            0x01 => self.st.arbitration = value,
            0x02 => {
                let n = self.spec.power_states.len().max(1) as u32;
                let ps = value & 0x1f;
                if ps >= n {
                    return fail(Status::InvalidField, format!("power state {ps}: this drive has power states 0..={}", n - 1));
                }
                if self.spec.power_states.get(ps as usize).is_some_and(|p| p.non_operational) {
                    return fail(
                        Status::InvalidField,
                        format!("power state {ps} is non-operational; the twin only runs I/O in operational states"),
                    );
                }
                self.st.power_state = ps as u8;
            }
            0x04 => self.st.temperature_threshold_k = value & 0xffff,
            0x06 => {
                if value & 1 != 0 {
                    return fail(
                        Status::InvalidField,
                        "there is no volatile write cache to enable (the write buffer is power-loss protected)",
                    );
                }
            }
            0x07 => return fail(Status::FeatureNotChangeable, "the number of queues is fixed by the twin"),
            0x08 => self.st.interrupt_coalescing = value,
            0x84 => {
                let wp = value as u8 & 0x7;
                if wp > WP_PERMANENT {
                    return fail(Status::InvalidField, format!("write-protect state {wp}: must be 0..=3"));
                }
                let ns = self.attached_u32(nsid)?;
                if ns.write_protect == WP_PERMANENT {
                    return fail(Status::FeatureNotChangeable, format!("namespace {nsid} is permanently write protected"));
                }
                self.st.namespaces.get_mut(&nsid).expect("checked").write_protect = wp;
            }
            _ => {
                return fail(
                    Status::InvalidField,
                    format!("feature {fid:#04x} is not supported (supported: 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x84)"),
                )
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------- vendor QoS command

    /// The vendor QoS command (docs/cli.md, `ssdtwin nvme qos`): cap namespace `nsid`'s read
    /// and write bandwidth and its commands per second (0 = no cap; all 0 clears the caps).
    /// A bandwidth cap is at most the host link's rate, an IOPS cap at most the controller's
    /// command ceiling: above them a cap would never bind.
    pub fn set_qos(&mut self, nsid: NsId, limits: QosLimits) -> Result<(), Error> {
        let nsid = nsid.0;
        self.namespace_u32(nsid)?;
        let (link, iops) = match &self.spec.timing {
            Some(t) => (t.host_link_bytes_per_s.value, t.ctrl_max_iops.value),
            None => (u64::MAX, u64::MAX),
        };
        for (what, v, top) in [("read bandwidth", limits.read_bytes_per_s, link), ("write bandwidth", limits.write_bytes_per_s, link)] {
            if v > top {
                return fail(
                    Status::InvalidField,
                    format!("{what} cap {v} B/s: must be 0 (no cap) or 1..={top} B/s (the host link's rate)"),
                );
            }
        }
        if limits.iops > iops {
            return fail(
                Status::InvalidField,
                format!("IOPS cap {}: must be 0 (no cap) or 1..={iops} (the controller's command ceiling)", limits.iops),
            );
        }
        if limits.is_unlimited() {
            self.st.qos.remove(&nsid);
        } else {
            self.st.qos.insert(nsid, limits);
        }
        Ok(())
    }

    /// The priority class (QPRIO) of the queues the host creates for namespace `nsid`: what
    /// weighted round robin arbitration sorts commands by.
    pub fn set_sq_priority(&mut self, nsid: NsId, class: u8) -> Result<(), Error> {
        self.namespace_u32(nsid.0)?;
        if class as usize >= SQ_PRIORITIES.len() {
            return fail(Status::InvalidField, format!("queue priority {class}: must be 0 (urgent), 1 (high), 2 (medium) or 3 (low)"));
        }
        if class == SQ_PRIORITY_DEFAULT {
            self.st.sq_priority.remove(&nsid.0);
        } else {
            self.st.sq_priority.insert(nsid.0, class);
        }
        Ok(())
    }

    /// The queue priority class of namespace `nsid` (medium unless set).
    pub fn sq_priority(&self, nsid: NsId) -> u8 {
        self.st.sq_priority.get(&nsid.0).copied().unwrap_or(SQ_PRIORITY_DEFAULT)
    }

    /// The arbitration mechanism feature 01h selects.
    pub fn arbitration(&self) -> Arbitration {
        Arbitration::from_feature(self.st.arbitration)
    }

    /// The QoS caps of `nsid` (all 0 when it has none).
    pub fn qos(&self, nsid: NsId) -> Result<QosLimits, Error> {
        self.namespace_u32(nsid.0)?;
        Ok(self.st.qos.get(&nsid.0).copied().unwrap_or_default())
    }

    /// Every namespace's caps (all namespaces, capped or not).
    pub fn qos_rows(&self) -> Vec<QosRow> {
        self.namespaces()
            .map(|n| QosRow {
                nsid: n.nsid,
                limits: self.st.qos.get(&n.nsid).copied().unwrap_or_default(),
                sq_priority: SQ_PRIORITIES[self.sq_priority(NsId(n.nsid)) as usize].to_string(),
            })
            .collect()
    }

    /// The caps of `nsid` for the timed path: None (one map test) when no namespace has one.
    #[inline]
    pub fn qos_limits(&self, nsid: NsId) -> Option<&QosLimits> {
        if self.st.qos.is_empty() {
            return None;
        }
        self.st.qos.get(&nsid.0)
    }

    // ------------------------------------------------------------- I/O commands

    /// The namespace, if it exists and is attached (I/O needs both).
    pub fn attached(&self, nsid: NsId) -> Result<&Namespace, Error> {
        self.attached_u32(nsid.0)
    }

    #[inline]
    fn attached_u32(&self, nsid: u32) -> Result<&Namespace, Error> {
        let ns = self.namespace_u32(nsid)?;
        if !ns.attached {
            return Self::not_attached(nsid);
        }
        Ok(ns)
    }

    #[cold]
    fn not_attached<T>(nsid: u32) -> Result<T, Error> {
        fail(Status::InvalidNamespaceOrFormat, format!("namespace {nsid} is not attached to controller {CONTROLLER_ID}"))
    }

    /// Whether a Write or a Deallocate of `[slba, slba+nlb)` on `nsid` would be accepted
    /// (attached, not write protected, in range), without doing it: the server asks before
    /// it touches a namespace's data file, so a refused command leaves the data as it was.
    pub fn check_write(&self, nsid: NsId, slba: u64, nlb: u64) -> Result<&Namespace, Error> {
        self.check_write_u32(nsid.0, slba, nlb)
    }

    fn check_write_u32(&self, nsid: u32, slba: u64, nlb: u64) -> Result<&Namespace, Error> {
        self.check_not_sanitizing()?;
        let ns = self.attached_u32(nsid)?;
        if ns.write_protect != WP_NONE {
            return fail(Status::NamespaceWriteProtected, format!("namespace {nsid} is write protected"));
        }
        Self::check_range(ns, slba, nlb)?;
        Ok(ns)
    }

    fn check_range(ns: &Namespace, slba: u64, nlb: u64) -> Result<(), Error> {
        if nlb == 0 || slba.checked_add(nlb).is_none_or(|e| e > ns.nsze) {
            return fail(Status::LbaOutOfRange, format!("LBAs {slba}+{nlb} outside namespace {} (0..{})", ns.nsid, ns.nsze));
        }
        Ok(())
    }

    /// A Read of `[slba, slba+nlb)` on `nsid` would be accepted (no sanitize running,
    /// attached, in range).
    #[inline]
    fn check_read(&self, nsid: u32, slba: u64, nlb: u64) -> Result<&Namespace, Error> {
        self.check_not_sanitizing()?;
        let ns = self.attached_u32(nsid)?;
        Self::check_range(ns, slba, nlb)?;
        Ok(ns)
    }

    /// Record an I/O command that completed with an error status in the Error Information
    /// log (and SMART's error count), and hand the error back.
    #[cold]
    pub fn log_io_error(&mut self, e: Error, opcode: u8, nsid: u32, slba: u64) -> Error {
        if let Some(status) = e.status() {
            let smart = &mut self.st.smart;
            smart.error_log_entries += 1;
            let n = smart.error_log_entries;
            let cmdid = (smart.host_read_commands + smart.host_write_commands) as u16;
            self.st.error_log.insert(0, logs::entry(n, status, opcode, nsid, slba, cmdid));
            self.st.error_log.truncate(ERROR_LOG_ENTRIES);
        }
        e
    }

    /// Call `f(global IU, sector mask)` for each IU that `[slba, slba+nlb)` touches.
    #[inline]
    fn for_each_iu(cfg: &FtlConfig, ns: &Namespace, slba: u64, nlb: u64, mut f: impl FnMut(LogicalIu, u128)) {
        // IU and sector sizes are powers of two (the spec validates it): shifts, not divides.
        let iu_shift = cfg.iu_bytes.trailing_zeros();
        let iu = 1u64 << iu_shift;
        let b0 = slba * ns.lba_bytes as u64;
        let b1 = b0 + nlb * ns.lba_bytes as u64;
        let shift = cfg.chunk_shift;
        let mut ns_iu = b0 >> iu_shift;
        let last = (b1 - 1) >> iu_shift;
        while ns_iu <= last {
            let start = ns_iu << iu_shift;
            let s0 = (b0.max(start) - start) >> 9;
            let s1 = (b1.min(start + iu) - start) >> 9;
            let mask = sector_mask(s0 as u32, s1 as u32, cfg.full_mask);
            f(ns.global_iu(ns_iu, shift).expect("range checked by the caller"), mask);
            ns_iu += 1;
        }
    }

    /// The namespace and the loaded FTL, borrowed together (no copy of the chunk list on
    /// the I/O path).
    #[inline]
    fn ns_and_ftl(&mut self, nsid: u32) -> Result<(&Namespace, &mut Ftl, &FtlConfig), Error> {
        self.ftl()?;
        let ns = self.st.namespaces.get(&nsid).expect("checked by the caller");
        Ok((ns, self.ftl.as_mut().expect("loaded"), &self.cfg))
    }

    /// Hint that the I/O at `slba` of `nsid` comes soon: fetch its first L2P entry into cache.
    /// (Only when the maps are loaded; a no-op for bad arguments, which the I/O reports.)
    #[inline]
    pub fn prefetch(&self, nsid: NsId, slba: u64) {
        let nsid = nsid.0;
        let (Some(ftl), Some(ns)) = (self.ftl.as_ref(), self.st.namespaces.get(&nsid)) else { return };
        let ns_iu = (slba * ns.lba_bytes as u64) >> self.cfg.iu_bytes.trailing_zeros();
        if let Some(g) = ns.global_iu(ns_iu, self.cfg.chunk_shift) {
            ftl.prefetch(g);
        }
    }

    /// Write command: `nlb` blocks at `slba` of namespace `nsid`.
    pub fn write<S: NandSink>(&mut self, nsid: NsId, slba: u64, nlb: u64, sink: &mut S) -> Result<(), Error> {
        let nsid = nsid.0;
        if let Err(e) = self.check_ana_io(nsid) {
            return Err(self.log_io_error(e, logs::OPC_WRITE, nsid, slba));
        }
        let ns = match self.check_write_u32(nsid, slba, nlb) {
            Ok(ns) => ns,
            Err(e) => return Err(self.log_io_error(e, logs::OPC_WRITE, nsid, slba)),
        };
        let bytes = nlb * ns.lba_bytes as u64;
        if ns.dram {
            self.st.smart.dram_write_bytes += bytes;
            self.st.smart.host_write_commands += 1;
            self.st.smart.data_units_written_512 += bytes / 512;
            return Ok(());
        }
        let set = ns.nvm_set as usize;
        let (ns, ftl, cfg) = self.ns_and_ftl(nsid)?;
        Self::for_each_iu(cfg, ns, slba, nlb, |iu, mask| ftl.write(iu, mask, sink));
        self.st.smart.host_write_commands += 1;
        if let Some(c) = self.st.set_commands.get_mut(set) {
            c.host_write_commands += 1;
        }
        self.st.smart.data_units_written_512 += bytes / 512;
        self.repair_media(nsid, Some((slba, nlb)));
        if !self.st.plm.is_empty() {
            self.plm_after_write(set as u32);
        }
        Ok(())
    }

    /// Read command.
    pub fn read<S: NandSink>(&mut self, nsid: NsId, slba: u64, nlb: u64, sink: &mut S) -> Result<ReadSummary, Error> {
        let nsid = nsid.0;
        if let Err(e) = self.check_ana_io(nsid) {
            return Err(self.log_io_error(e, logs::OPC_READ, nsid, slba));
        }
        let ns = match self.check_read(nsid, slba, nlb) {
            Ok(ns) => ns,
            Err(e) => return Err(self.log_io_error(e, logs::OPC_READ, nsid, slba)),
        };
        let bytes = nlb * ns.lba_bytes as u64;
        if ns.dram {
            self.st.smart.dram_read_bytes += bytes;
            self.st.smart.host_read_commands += 1;
            self.st.smart.data_units_read_512 += bytes / 512;
            return Ok(ReadSummary::default());
        }
        let set = ns.nvm_set as usize;
        if let Err(e) = self.check_media(nsid, slba, nlb) {
            return Err(self.log_io_error(e, logs::OPC_READ, nsid, slba));
        }
        let (ns, ftl, cfg) = self.ns_and_ftl(nsid)?;
        let mut sum = ReadSummary::default();
        Self::for_each_iu(cfg, ns, slba, nlb, |iu, mask| match ftl.read(iu, mask, sink) {
            ReadSource::Nand { .. } => sum.nand_ius += 1,
            ReadSource::Buffer => sum.buffer_ius += 1,
            ReadSource::Unmapped => sum.unmapped_ius += 1,
        });
        self.st.smart.host_read_commands += 1;
        self.st.smart.data_units_read_512 += bytes / 512;
        if let Some(c) = self.st.set_commands.get_mut(set) {
            c.host_read_commands += 1;
        }
        Ok(sum)
    }

    /// Dataset Management - deallocate. Whole IUs inside the range are deallocated; the
    /// partial IUs at its edges keep their data (deallocation is advisory in NVMe).
    /// Returns the number of IUs deallocated.
    pub fn deallocate(&mut self, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        let nsid = nsid.0;
        if let Err(e) = self.check_ana_io(nsid) {
            return Err(self.log_io_error(e, logs::OPC_DSM, nsid, slba));
        }
        let dram = match self.check_write_u32(nsid, slba, nlb) {
            Ok(ns) => ns.dram,
            Err(e) => return Err(self.log_io_error(e, logs::OPC_DSM, nsid, slba)),
        };
        if dram {
            return Ok(0); // nothing on NAND to deallocate
        }
        let (ns, ftl, cfg) = self.ns_and_ftl(nsid)?;
        let mut n = 0;
        let full = cfg.full_mask;
        Self::for_each_iu(cfg, ns, slba, nlb, |iu, mask| {
            if mask == full {
                ftl.deallocate(iu);
                n += 1;
            }
        });
        self.repair_media(nsid, Some((slba, nlb)));
        Ok(n)
    }

    /// Vendor command (error injection): corrupt the stored protection information of LBA
    /// `lba` so that the tags in `tags` (PRCHK bits) no longer match, as a misdirected write
    /// or a firmware fault would. The next read that checks one of them fails with its
    /// end-to-end status; a write of the LBA stores fresh PI.
    pub fn inject_pi_error(&mut self, nsid: NsId, lba: u64, tags: u8) -> Result<(), Error> {
        let ns = self.attached_u32(nsid.0)?;
        if ns.protection.pi == 0 {
            return fail(
                Status::InvalidField,
                format!("namespace {} is formatted without protection information (format it with --pi 1, 2 or 3)", nsid.0),
            );
        }
        Self::check_range(ns, lba, 1)?;
        if tags == 0 || tags > 7 {
            return fail(
                Status::InvalidField,
                format!("tags {tags}: a mask of guard (4), application tag (2) and reference tag (1), 1..=7"),
            );
        }
        *self.st.pi_errors.entry(nsid.0).or_default().entry(lba).or_insert(0) |= tags;
        Ok(())
    }

    /// The end-to-end check of a read with PRCHK bits `prchk`: the first LBA in range whose
    /// stored PI fails a checked tag gives the command its status (guard first, then
    /// application tag, then reference tag; a type 3 namespace has no reference tag to check).
    pub fn check_pi(&self, nsid: NsId, slba: u64, nlb: u64, prchk: u8) -> Result<(), Error> {
        let Some(bad) = self.st.pi_errors.get(&nsid.0) else { return Ok(()) };
        let Some(ns) = self.st.namespaces.get(&nsid.0) else { return Ok(()) };
        let prchk = if ns.protection.pi == 3 { prchk & !PRCHK_REFTAG } else { prchk };
        for (&lba, &tags) in bad.range(slba..slba.saturating_add(nlb)) {
            let hit = tags & prchk;
            let (status, tag) = match () {
                _ if hit & PRCHK_GUARD != 0 => (Status::GuardCheck, "guard"),
                _ if hit & PRCHK_APPTAG != 0 => (Status::AppTagCheck, "application tag"),
                _ if hit & PRCHK_REFTAG != 0 => (Status::RefTagCheck, "reference tag"),
                _ => continue,
            };
            return fail(status, format!("namespace {} LBA {lba}: the stored protection information's {tag} does not match", nsid.0));
        }
        Ok(())
    }

    /// Background GC while the host is idle: collect victims until the free pool reaches its
    /// idle target, moving at most `max_moves` valid IUs (the engine asks for one program
    /// unit at a time so it can time each). Returns how many IUs moved; 0 with no NAND
    /// operation emitted means there is nothing left to do.
    pub fn idle_gc<S: NandSink>(&mut self, max_moves: u64, sink: &mut S) -> Result<u64, Error> {
        Ok(self.ftl()?.background_gc(Ftl::BACKGROUND_FREE_TARGET, max_moves, sink))
    }

    // ------------------------------------------------------------- preconditioning

    // ------------------------------------------------------------- identify and logs

    pub fn id_ctrl(&self) -> IdCtrl {
        identify::id_ctrl(self)
    }

    pub fn id_ns(&self, nsid: NsId) -> Result<IdNs, Error> {
        let nsid = nsid.0;
        let ns = self.namespace_u32(nsid)?;
        Ok(identify::id_ns(self, ns))
    }

    /// Every namespace with its size, use, format and attachment.
    pub fn namespace_rows(&self) -> Vec<NamespaceRow> {
        self.namespaces().map(|ns| self.row(ns)).collect()
    }

    fn row(&self, ns: &Namespace) -> NamespaceRow {
        NamespaceRow {
            nsid: ns.nsid,
            nsze: ns.nsze,
            ncap: ns.nsze,
            nuse: self.nuse(ns),
            lba_bytes: ns.lba_bytes,
            flbas: ns.flbas,
            attached: ns.attached,
            write_protect: ns.write_protect,
            nmic: ns.nmic,
            bytes: ns.bytes(),
            dram: ns.dram,
            nvmsetid: self.nvmsetid(ns),
            ms: ns.protection.ms,
            pi: ns.protection.pi,
        }
    }

    /// Everything the read-only commands show, in one structure.
    pub fn view(&self) -> ControllerView {
        let id_ns = self.namespaces().map(|ns| (ns.nsid.to_string(), identify::id_ns(self, ns))).collect();
        ControllerView {
            id_ctrl: self.id_ctrl(),
            id_ns,
            namespaces: self.namespace_rows(),
            smart_log: self.smart_log(),
            vendor_log: self.vendor_log(),
            id_nvmset: self.id_nvmset(0).ok(),
            endurance_logs: (1..=self.endurance_groups() as u16)
                .filter_map(|g| Some((g.to_string(), self.endurance_log(g).ok()?)))
                .collect(),
            error_log: self.st.error_log.clone(),
            sanitize_log: self.sanitize_log(),
        }
    }

    /// FTL geometry numbers (superblocks, IUs, chunks).
    pub fn ftl_info(&self) -> FtlInfo {
        let cfg = &self.cfg;
        let g = self.spec.geometry();
        FtlInfo {
            iu_bytes: cfg.iu_bytes,
            superblocks: cfg.superblocks,
            ius_per_superblock: cfg.ius_per_sb,
            superblock_bytes: g.superblock_bytes,
            gc_overhead_superblocks: cfg.overhead_superblocks,
            logical_ius: cfg.logical_ius,
            chunk_ius: cfg.chunk_ius(),
            buffer_slots: cfg.buffer_slots,
            raw_bytes: g.raw_bytes(),
            program_unit_bytes: g.program_unit_bytes,
            dies: g.dies(),
            nvm_sets: cfg.sets,
            partitions: cfg.parts,
            data_pool_bytes: g.data_pool_bytes(cfg.overhead_superblocks),
            maps_loaded: self.maps_loaded(),
        }
    }

    /// Logical blocks of `ns` allocated: mapped on NAND or waiting in the buffer (NUSE).
    /// A DRAM namespace is in use in full (its DRAM is reserved for it).
    pub fn nuse(&self, ns: &Namespace) -> u64 {
        if ns.dram {
            return ns.nsze;
        }
        let st = self.ftl_state();
        let mapped: u64 = ns.chunks.iter().map(|&c| st.mapped_in_chunk(c) as u64).sum();
        let buffered = match &self.ftl {
            Some(f) => f.buffered_unmapped(&ns.chunks),
            None => st.buffered_unmapped_saved(&ns.chunks),
        };
        ((mapped + buffered) * self.cfg.iu_bytes as u64 / ns.lba_bytes as u64).min(ns.nsze)
    }

    /// Bring the small FTL state up to date before it is saved.
    pub fn prepare_persist(&mut self) {
        if let Some(f) = self.ftl.as_mut() {
            f.snapshot_buffered_unmapped();
        }
    }

    pub fn smart_log(&self) -> SmartLog {
        let s = &self.st.smart;
        let sbs = self.ftl_state().superblocks();
        let total_erases: u64 = sbs.iter().map(|b| b.erase_count as u64).sum();
        // Sanitize erases every block alike (kept outside the FTL: sanitize.rs).
        let avg = total_erases as f64 / sbs.len() as f64 + self.st.sanitize.erases_per_block as f64;
        let pe = self.spec.nand.pe_cycles.value as f64;
        let pct = ((avg / pe) * 100.0).floor().min(255.0) as u8;
        SmartLog {
            critical_warning: 0,
            temperature_k: 313,
            avail_spare: 100,
            spare_thresh: 10,
            percent_used: pct,
            endurance_grp_critical_warning_summary: 0,
            data_units_read: s.data_units_read_512.div_ceil(1000),
            data_units_written: s.data_units_written_512.div_ceil(1000),
            host_read_commands: s.host_read_commands,
            host_write_commands: s.host_write_commands,
            controller_busy_time: s.controller_busy_ns / 60_000_000_000,
            power_cycles: s.power_cycles,
            power_on_hours: self.st.clock_ns / 3_600_000_000_000,
            unsafe_shutdowns: s.unsafe_shutdowns,
            media_errors: s.media_errors,
            num_err_log_entries: s.error_log_entries,
            warning_temp_time: 0,
            critical_comp_time: 0,
        }
    }

    pub fn vendor_log(&self) -> VendorLog {
        let c = self.ftl_counters();
        let st = self.ftl_state();
        let iu = self.cfg.iu_bytes as u64;
        let nand_write_host = c.host_programmed_ius * iu;
        let nand_write_gc = c.gc_programmed_ius * iu;
        let sanitized = &self.st.sanitize;
        let nand_write = nand_write_host + nand_write_gc + sanitized.nand_write_bytes;
        let sbs = st.superblocks();
        let ec: Vec<u32> = sbs.iter().map(|b| b.erase_count + sanitized.erases_per_block).collect();
        let valid: u64 = sbs.iter().map(|b| b.valid as u64).sum();
        // DRAM-namespace traffic is host traffic that never reaches NAND.
        let smart = &self.st.smart;
        let host_write = c.host_write_bytes + smart.dram_write_bytes;
        let intel = self.spec.logs.intel_smart_add.then_some(IntelSmartAdd {
            nand_bytes_written_sectors: nand_write / 512 / 65536,
            host_bytes_written_sectors: host_write / 512 / 65536,
        });
        VendorLog {
            host_write_bytes: host_write,
            host_read_bytes: c.host_read_bytes + smart.dram_read_bytes,
            nand_write_bytes: nand_write,
            nand_write_host_bytes: nand_write_host,
            nand_write_gc_bytes: nand_write_gc,
            nand_read_bytes: c.nand_read_host_bytes + c.nand_read_rmw_bytes + c.nand_read_gc_bytes,
            nand_read_rmw_bytes: c.nand_read_rmw_bytes,
            nand_read_gc_bytes: c.nand_read_gc_bytes,
            // Write amplification of host data: sanitize overwrites are no host data's copies.
            waf: if host_write > 0 { (nand_write_host + nand_write_gc) as f64 / host_write as f64 } else { 0.0 },
            rmw_ius: c.rmw_ius,
            buffer_merges: c.buffer_merges,
            trimmed_ius: c.host_trim_ius,
            gc_victims: c.gc_victims,
            foreground_gc_victims: c.foreground_gc_victims,
            superblock_erases: c.erases + sbs.len() as u64 * sanitized.erases_per_block as u64,
            erase_count_min: ec.iter().copied().min().unwrap_or(0),
            erase_count_max: ec.iter().copied().max().unwrap_or(0),
            erase_count_avg: ec.iter().map(|&e| e as f64).sum::<f64>() / ec.len().max(1) as f64,
            pe_cycles_rated: self.spec.nand.pe_cycles.value,
            superblocks: sbs.len() as u32,
            free_superblocks: st.free_superblocks() as u32,
            superblock_bytes: self.spec.geometry().superblock_bytes,
            valid_bytes: valid * iu,
            buffered_bytes: st.buffered_ius() as u64 * iu,
            iu_bytes: self.cfg.iu_bytes,
            gc_overhead_superblocks: st.overhead_superblocks(self.cfg.ius_per_sb),
            gc_overhead_samples: c.overhead_samples,
            gc_overhead_sample_ius: c.overhead_sample_ius as f64,
            intel_smart_add: intel,
            dram_write_bytes: smart.dram_write_bytes,
            dram_read_bytes: smart.dram_read_bytes,
            dram_flush_bytes: smart.dram_flush_bytes,
            nand_write_sanitize_bytes: sanitized.nand_write_bytes,
        }
    }
}

/// SMART / Health Information (log 02h), with nvme-cli's JSON field names.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SmartLog {
    pub critical_warning: u8,
    #[serde(rename = "temperature")]
    pub temperature_k: u16,
    pub avail_spare: u8,
    pub spare_thresh: u8,
    pub percent_used: u8,
    pub endurance_grp_critical_warning_summary: u8,
    pub data_units_read: u64,
    pub data_units_written: u64,
    pub host_read_commands: u64,
    pub host_write_commands: u64,
    pub controller_busy_time: u64,
    pub power_cycles: u64,
    pub power_on_hours: u64,
    pub unsafe_shutdowns: u64,
    pub media_errors: u64,
    pub num_err_log_entries: u64,
    pub warning_temp_time: u32,
    pub critical_comp_time: u32,
}

/// Intel additional SMART attributes 0xF4/0xF5: sectors written / 65,536 (32 MiB units).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IntelSmartAdd {
    pub nand_bytes_written_sectors: u64,
    pub host_bytes_written_sectors: u64,
}

/// ssdtwin's vendor log: exact host and NAND traffic, GC and wear.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VendorLog {
    pub host_write_bytes: u64,
    pub host_read_bytes: u64,
    pub nand_write_bytes: u64,
    pub nand_write_host_bytes: u64,
    pub nand_write_gc_bytes: u64,
    pub nand_read_bytes: u64,
    pub nand_read_rmw_bytes: u64,
    pub nand_read_gc_bytes: u64,
    pub waf: f64,
    pub rmw_ius: u64,
    pub buffer_merges: u64,
    pub trimmed_ius: u64,
    pub gc_victims: u64,
    pub foreground_gc_victims: u64,
    pub superblock_erases: u64,
    pub erase_count_min: u32,
    pub erase_count_max: u32,
    pub erase_count_avg: f64,
    pub pe_cycles_rated: u32,
    pub superblocks: u32,
    pub free_superblocks: u32,
    pub superblock_bytes: u64,
    pub valid_bytes: u64,
    pub buffered_bytes: u64,
    pub iu_bytes: u32,
    /// Mean superblocks kept out of service by GC (free pool, open pages, relocated copies).
    pub gc_overhead_superblocks: f64,
    /// Raw sums behind the mean (to average over a window: difference two logs).
    pub gc_overhead_samples: u64,
    pub gc_overhead_sample_ius: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intel_smart_add: Option<IntelSmartAdd>,
    /// Host bytes written to / read from DRAM namespaces: included in `host_write_bytes` /
    /// `host_read_bytes`, never in the NAND counters.
    #[serde(default)]
    pub dram_write_bytes: u64,
    #[serde(default)]
    pub dram_read_bytes: u64,
    /// DRAM-namespace bytes dumped to the reserved NAND area at power-off (not user-data
    /// NAND writes: not in `nand_write_bytes` nor the WAF).
    #[serde(default)]
    pub dram_flush_bytes: u64,
    /// NAND bytes programmed by sanitize overwrite passes (in `nand_write_bytes`, not in
    /// the WAF; shown once there are any).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub nand_write_sanitize_bytes: u64,
}

/// A persisted state that does not hold together (what was wrong, in words).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidState(pub String);

/// Namespaces within the spec's limits, on disjoint chunks of the logical space and no
/// larger than their chunks; features within range.
fn check_controller_state(spec: &DriveSpec, cfg: &FtlConfig, st: &ControllerState) -> Result<(), String> {
    let nn = spec.capacity.max_namespaces.value;
    let mut used = vec![false; cfg.chunks() as usize];
    let mut allocated = 0u64;
    let mut dram = 0u64;
    let dram_budget = spec.dram_namespace.as_ref().map_or(0, |d| d.budget_bytes.value);
    for (&id, ns) in &st.namespaces {
        if id != ns.nsid || id == 0 || id > nn {
            return Err(format!("namespace {id} (recorded as {}) outside 1..={nn}", ns.nsid));
        }
        let format = spec.lba_formats().get(ns.flbas as usize).copied();
        if format != Some((ns.lba_bytes, ns.protection.ms)) || ns.nsze == 0 || ns.protection.pi > 3 {
            return Err(format!(
                "namespace {id}: format {} with {}-byte blocks and {} blocks is not valid for this drive",
                ns.flbas, ns.lba_bytes, ns.nsze
            ));
        }
        let bytes = ns.nsze.checked_mul(ns.lba_bytes as u64).ok_or_else(|| format!("namespace {id}: size overflows"))?;
        if ns.dram {
            if !ns.chunks.is_empty() {
                return Err(format!("DRAM namespace {id} owns {} chunks of the NAND logical space", ns.chunks.len()));
            }
            dram += bytes;
            continue;
        }
        if bytes.div_ceil(cfg.iu_bytes as u64) > ns.chunks.len() as u64 * cfg.chunk_ius() as u64 {
            return Err(format!("namespace {id}: {bytes} bytes do not fit its {} chunks", ns.chunks.len()));
        }
        for &c in &ns.chunks {
            match used.get_mut(c as usize) {
                Some(u) if !*u => *u = true,
                Some(_) => return Err(format!("chunk {c} belongs to two namespaces")),
                None => return Err(format!("namespace {id}: chunk {c} beyond the logical space ({} chunks)", cfg.chunks())),
            }
        }
        allocated += bytes;
    }
    if let Some((id, p)) = st.sq_priority.iter().find(|(id, &p)| !st.namespaces.contains_key(id) || p as usize >= SQ_PRIORITIES.len()) {
        return Err(format!("queue priority {p} recorded for namespace {id}: no such namespace or class"));
    }
    if let Some(id) = st.qos.keys().find(|id| !st.namespaces.contains_key(id)) {
        return Err(format!("QoS caps recorded for namespace {id}, which does not exist"));
    }
    if let Some(id) = st.media_keys.keys().find(|&&id| id == 0 || id > nn) {
        return Err(format!("a media key recorded for namespace {id}, outside 1..={nn}"));
    }
    if st.error_log.len() > ERROR_LOG_ENTRIES || st.sanitize.start_ns > st.sanitize.end_ns {
        return Err(format!(
            "error log of {} entries (at most {ERROR_LOG_ENTRIES}) or a sanitize ending before it starts",
            st.error_log.len()
        ));
    }
    if dram > dram_budget {
        return Err(format!("DRAM namespaces hold {dram} bytes of a {dram_budget}-byte DRAM budget"));
    }
    if allocated > spec.capacity.tnvmcap_bytes.value {
        return Err(format!("namespaces allocate {allocated} bytes of {}", spec.capacity.tnvmcap_bytes.value));
    }
    if st.power_state as usize >= spec.power_states.len().max(1) {
        return Err(format!("power state {} does not exist", st.power_state));
    }
    sets::check_sets_state(spec, cfg, st)?;
    ana::check_ana_state(spec.ana.is_some(), st)?;
    lbastatus::check_unrecoverable(st)
}

fn fmt_formats(f: &[(u32, u16)]) -> String {
    let one = |(i, &(d, m)): (usize, &(u32, u16))| if m == 0 { format!("{i}={d} B") } else { format!("{i}={d}+{m} B") };
    f.iter().enumerate().map(one).collect::<Vec<_>>().join(", ")
}

#[inline]
fn sector_mask(s0: u32, s1: u32, full: u128) -> u128 {
    let n = s1 - s0;
    if n >= 128 {
        return full;
    }
    ((1u128 << n) - 1) << s0
}

fn serial_for(spec: &DriveSpec, seed: u64) -> String {
    let h = splitmix(seed ^ spec.drive.name.bytes().fold(0u64, |a, b| a.wrapping_mul(131).wrapping_add(b as u64)));
    format!("STW{h:016X}")
}

#[cfg(test)]
mod tests;
