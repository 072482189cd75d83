//! What the read-only commands show, taken from the controller ([`Controller::view`]; the
//! [`ControllerView`] itself is in mod.rs), and the FTL's geometry numbers ([`FtlInfo`]).

use serde::{Deserialize, Serialize};

use super::{identify, Controller, ControllerView};

/// OACS bit 3: Namespace Management and Attachment supported.
const OACS_NAMESPACE_MANAGEMENT: u16 = 1 << 3;

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

impl Controller {
    /// Everything the read-only commands show, in one structure.
    pub fn view(&self) -> ControllerView {
        let id_ns = self.namespaces().map(|ns| (ns.nsid.to_string(), identify::id_ns(self, ns))).collect();
        ControllerView {
            id_ctrl: self.id_ctrl(),
            id_ns,
            id_ns_common: (self.id_ctrl().oacs & OACS_NAMESPACE_MANAGEMENT != 0).then(|| identify::id_ns_common(self)),
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
}
