//! What the read-only commands show, in one structure ([`ControllerView`]: identify data,
//! namespaces, logs), and the FTL's geometry numbers ([`FtlInfo`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::status::fail;
use super::{
    identify, sets, Controller, EnduranceGroupLog, Error, ErrorLogEntry, IdCtrl, IdNs, NamespaceRow, NsId, NvmSetList, SanitizeLogPage,
    SmartLog, Status, VendorLog,
};

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

impl Controller {
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
}
