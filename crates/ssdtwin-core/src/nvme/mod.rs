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
//! This file holds [`Controller`], its construction and clock; each other file adds the
//! commands of one concern to it (`impl Controller` blocks):
//! * `namespaces.rs`: the namespace table, capacity, Namespace Management and Attachment;
//! * `protection.rs`: Format NVM, end-to-end protection information, PI error injection;
//! * `features.rs`: Get/Set Features, queue priorities, the vendor QoS caps;
//! * `io.rs`: Read, Write, Deallocate and their checks, idle GC;
//! * `identify.rs`, `view.rs`: Identify data; everything the read-only commands show;
//! * `logs.rs`: SMART, the vendor WAF log, the Error Information log, raw log pages;
//! * `state.rs`: what persists, its checks, the FTL maps loaded on first use;
//! * `precondition.rs`: fast-forward preconditioning;
//! * `sets.rs` (NVM Sets, Endurance Groups), `plm.rs` (Predictable Latency Mode), `ana.rs`
//!   (ANA groups), `lbastatus.rs` (Get LBA Status), `sanitize.rs` (Sanitize);
//! * `status.rs`: every failure as an NVMe status.

mod ana;
mod features;
mod identify;
mod io;
mod lbastatus;
mod logs;
mod namespaces;
mod plm;
mod precondition;
mod protection;
mod sanitize;
mod sets;
mod state;
mod status;
mod view;

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

pub use features::{Arbitration, QosLimits, QosRow, SQ_PRIORITIES, SQ_PRIORITY_DEFAULT};
pub use io::ReadSummary;
pub use logs::{IntelSmartAdd, SmartLog, VendorLog};
pub use namespaces::{Namespace, NamespaceRow};
pub use precondition::{Pattern, PreconditionReport, UnknownPattern};
pub use protection::{Protection, ProtectionRequest, PRCHK_APPTAG, PRCHK_GUARD, PRCHK_REFTAG};
pub use state::{ControllerState, FtlFingerprint, InvalidState, MapStore, SmartCounters};
pub use view::{ControllerView, FtlInfo};

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
}

fn serial_for(spec: &DriveSpec, seed: u64) -> String {
    let h = splitmix(seed ^ spec.drive.name.bytes().fold(0u64, |a, b| a.wrapping_mul(131).wrapping_add(b as u64)));
    format!("STW{h:016X}")
}

#[cfg(test)]
mod tests;
