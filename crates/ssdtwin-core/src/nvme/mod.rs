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
//!
//! This file holds [`Controller`], its construction and clock, what persists of it
//! ([`ControllerState`]) and what the read-only commands show ([`ControllerView`]); each other file adds the
//! commands of one concern to it (`impl Controller` blocks):
//! * `namespaces.rs`: the namespace table, capacity, Namespace Management and Attachment;
//! * `protection.rs`: Format NVM, end-to-end protection information, PI error injection;
//! * `features.rs`: Get/Set Features, queue priorities, the vendor QoS caps;
//! * `io.rs`: Read, Write, Deallocate and their checks, idle GC;
//! * `identify.rs`: Identify data; `identify_bytes.rs`: the same as the spec's 4 KiB
//!   structures (Identify CNS 00h/01h raw); `view.rs`: [`Controller::view`] and [`FtlInfo`];
//! * `logs.rs`: SMART, the vendor WAF log, the Error Information log, raw log pages;
//!   `waf.rs`: a WAF measured between two vendor logs, and whether it is the drive's;
//! * `persist.rs`: a controller from saved parts, the checks of a saved state, the FTL
//!   maps loaded on first use;
//! * `precondition.rs`: fast-forward preconditioning;
//! * `sets.rs` (NVM Sets, Endurance Groups), `plm.rs` (Predictable Latency Mode), `ana.rs`
//!   (ANA groups), `lbastatus.rs` (Get LBA Status), `sanitize.rs` (Sanitize);
//! * `status.rs`: every failure as an NVMe status.

mod ana;
mod features;
mod identify;
mod identify_bytes;
mod io;
mod lbastatus;
mod logs;
mod namespaces;
mod persist;
mod plm;
mod precondition;
mod protection;
mod sanitize;
mod sets;
mod status;
mod view;
mod waf;

/// How a full check (`Controller::check_full_or_stop`) ended: whole, or stopped by its caller.
pub use crate::ftl::CheckEnd;
pub use ana::{AnaDesc, AnaGroup, AnaLog, AnaNsid, ANA_STATES};
pub use identify::{DramNsCapacity, IdCtrl, IdNs, LbaFormatDesc, PowerStateDesc, PSD_FLAG_MXPS, PSD_FLAG_NOPS};
pub use identify_bytes::{CNS_ALLOCATED_NAMESPACE, CNS_CONTROLLER, CNS_NAMESPACE, IDENTIFY_BYTES};
pub use lbastatus::{LbaStatus, LbaStatusDesc, ATYPE_SCAN, ATYPE_TRACKED};
pub use logs::{ErrorLogEntry, ERROR_LOG_ENTRIES, MAX_LOG_PAGE_BYTES, OPC_DSM, OPC_READ, OPC_WRITE, OPC_WRITE_ZEROES, RAW_LOG_IDS};
pub use plm::{PlmSet, PredLatEventAgg, PredLatLog, DTWIN, NDWIN};
pub use sanitize::{
    sanicap, sanitize_times, SanitizeLogJson, SanitizeLogPage, SanitizeRequest, SanitizeState, SanitizeTimes, SANACT_BLOCK_ERASE,
    SANACT_CRYPTO_ERASE, SANACT_EXIT_FAILURE, SANACT_OVERWRITE,
};
pub use sets::{EnduranceGroupLog, NvmSetEntry, NvmSetList, SetCommands};
pub use status::{Error, InvalidState, MapError, Status};

pub use features::{
    Arbitration, QosLimits, QosRow, SavedFeatures, FEATURE_CHANGEABLE, FEATURE_NAMESPACE_SPECIFIC, FEATURE_SAVEABLE, SEL_CURRENT,
    SEL_DEFAULT, SEL_SAVED, SEL_SUPPORTED_CAPABILITIES, SQ_PRIORITIES, SQ_PRIORITY_DEFAULT,
};
pub use io::{NsPrefetch, NsTiming, ReadSummary};
pub use logs::{IntelSmartAdd, SmartLog, VendorLog};
pub use namespaces::{Namespace, NamespaceRow};
pub use persist::{FtlFingerprint, MapStore};
pub use precondition::{Pattern, PreconditionReport, UnknownPattern};
pub use protection::{Protection, ProtectionRequest, PRCHK_APPTAG, PRCHK_GUARD, PRCHK_REFTAG};
pub use view::FtlInfo;
pub use waf::{WafBasis, WafMeasurement, WafVerdict, WAF_MAX_BUFFER_SHARE, WAF_MIN_GC_CYCLES, WAF_MIN_NAMESPACE_PASSES};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::ftl::Ftl;
pub use crate::ftl::{FtlConfig, FtlCounters, FtlState};
use crate::spec::DriveSpec;
pub use crate::units::NsId;
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

/// How a namespace leaves write protect state `wp`, as errors that it blocks tell it.
pub(crate) fn wp_state_clears(wp: u8) -> &'static str {
    match wp {
        WP_PROTECT => "set-feature -f 0x84 -v 0 on the attached namespace clears it",
        WP_UNTIL_POWER_CYCLE => "until the next power cycle: ssdtwin power-cycle",
        _ => "permanently",
    }
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
    /// Over Temperature Threshold of the Composite Temperature (feature 04h, THSEL 0), K.
    pub temperature_threshold_k: u32,
    /// Under Temperature Threshold of the Composite Temperature (feature 04h, THSEL 1), K;
    /// 0 (the default): none.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub temperature_under_threshold_k: u32,
    pub interrupt_coalescing: u32,
    /// What Set Features with Save stored of the saveable features (None: never saved, the
    /// defaults); a power cycle restores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_features: Option<SavedFeatures>,
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

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// What the read-only commands show (identify data, namespaces, logs): taken from an open
/// controller ([`Controller::view`]) or from a running server's `live.json`, which embeds
/// this same structure, so both paths print the same thing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerView {
    pub id_ctrl: IdCtrl,
    /// Identify Namespace of every namespace, by NSID (as a string: JSON object keys).
    pub id_ns: BTreeMap<String, IdNs>,
    /// Identify Namespace with NSID FFFFFFFFh: the capabilities common to all namespaces, on
    /// a controller with Namespace Management (None: without it, or a view from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_ns_common: Option<IdNs>,
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

    /// Identify Namespace as the controller answers it: CNS 00h (`allocated` false) gives an
    /// active (attached) namespace's structure and a zero-filled one for an inactive NSID
    /// (1..=NN, allocated but detached or not allocated at all; NVMe 1.4 Figure 245); CNS
    /// 11h (`allocated`) an allocated namespace's whether attached or not. CNS 00h with NSID
    /// FFFFFFFFh gives the capabilities common to all namespaces (NVMe 1.4 §5.15.2.1, with
    /// Namespace Management). NSID 0, NSIDs past NN and FFFFFFFFh with CNS 11h (its NSID is
    /// one namespace's) are INVALID_NS.
    pub fn identify_ns(&self, nsid: NsId, allocated: bool) -> Result<IdNs, Error> {
        let nsid = nsid.0;
        let nn = self.id_ctrl.nn;
        if let (NSID_ALL, false, Some(common)) = (nsid, allocated, &self.id_ns_common) {
            return Ok(common.clone());
        }
        if nsid == 0 || nsid > nn {
            let why = match (nsid, allocated) {
                (NSID_ALL, true) => {
                    "Identify CNS 11h takes one namespace's NSID; the common capabilities (NSID FFFFFFFFh) are CNS 00h's (no --force)"
                }
                (NSID_ALL, false) => "the common namespace capabilities (NSID FFFFFFFFh) need Namespace Management",
                _ => "not a valid NSID",
            };
            return fail(
                Status::InvalidNamespaceOrFormat,
                format!("namespace {nsid}: {why}; this drive's NSIDs are 1..={nn} (namespaces: {})", self.nsid_list()),
            );
        }
        match self.namespaces.iter().find(|n| n.nsid == nsid) {
            Some(row) if row.attached || allocated => self.id_ns(NsId(nsid)).cloned(),
            _ => Ok(IdNs::zeroed()),
        }
    }

    fn nsid_list(&self) -> String {
        if self.namespaces.is_empty() {
            return "none".into();
        }
        self.namespaces.iter().map(|n| n.nsid.to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// The NVMe controller of one drive (see the module documentation).
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
            power_state: SavedFeatures::default().power_state,
            arbitration: SavedFeatures::default().arbitration,
            temperature_threshold_k: SavedFeatures::default().temperature_threshold_k,
            temperature_under_threshold_k: SavedFeatures::default().temperature_under_threshold_k,
            interrupt_coalescing: SavedFeatures::default().interrupt_coalescing,
            saved_features: None,
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

    /// Simulated power off/on: clears "write protect until power cycle"; the saveable
    /// features take their saved values (or defaults).
    /// DRAM namespaces are dumped to their reserved NAND area at every power-off (the
    /// capacitors carry an unsafe one through): their whole size is counted.
    pub fn power_cycle(&mut self, unsafe_shutdown: bool) {
        self.st.smart.dram_flush_bytes += self.dram_allocated_bytes();
        self.st.smart.power_cycles += 1;
        if unsafe_shutdown {
            self.st.smart.unsafe_shutdowns += 1;
        }
        self.restore_saved_features();
        self.plm_power_cycle();
        for ns in self.st.namespaces.values_mut() {
            if ns.write_protect == WP_UNTIL_POWER_CYCLE {
                ns.write_protect = WP_NONE;
            }
        }
    }
}

/// The LBA formats as error messages list them (`0=512 B, 1=4096 B, 2=4096+8 B`).
fn fmt_formats(f: &[(u32, u16)]) -> String {
    let one = |(i, &(d, m)): (usize, &(u32, u16))| if m == 0 { format!("{i}={d} B") } else { format!("{i}={d}+{m} B") };
    f.iter().enumerate().map(one).collect::<Vec<_>>().join(", ")
}

fn serial_for(spec: &DriveSpec, seed: u64) -> String {
    let h = splitmix(seed ^ spec.drive.name.bytes().fold(0u64, |a, b| a.wrapping_mul(131).wrapping_add(b as u64)));
    format!("STW{h:016X}")
}

#[cfg(test)]
mod tests;
