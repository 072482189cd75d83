//! NVM Sets and Endurance Groups (NVMe 1.4 IO Determinism, docs/models.md §9): each set is
//! an FTL partition on its own dies with one Endurance Group of the same number (ENDGID =
//! NVMSETID). Capacity per set, the NVM Set List (Identify CNS 04h), the Endurance Group
//! Information log (09h) and the checks of a saved state, with nvme-cli's JSON names.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{Controller, ControllerState, Error, FtlConfig, FtlState, Namespace, Status};
use crate::spec::DriveSpec;
use crate::units::fmt_decimal;

/// One entry of the NVM Set List (nvme-cli `id-nvmset -o json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmSetEntry {
    pub nvmset_id: u16,
    pub endurance_group_id: u16,
    /// Typical 4 KiB random read time at one outstanding command, in 100 ns units (0 on a
    /// drive with no timing model).
    pub random_4k_read_typical: u32,
    /// Optimal write size in bytes: the program unit.
    pub optimal_write_size: u32,
    pub total_nvmset_cap: u64,
    pub unalloc_nvmset_cap: u64,
}

/// The NVM Set List (Identify CNS 04h): the sets from the one asked for on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmSetList {
    pub nid: u8,
    #[serde(rename = "NVMSet")]
    pub nvm_sets: Vec<NvmSetEntry>,
}

/// Endurance Group Information log (09h), nvme-cli `endurance-log -o json` names. Data
/// units are thousands of 512-byte units, rounded up (as SMART); media units written and
/// the endurance estimate are billions of bytes, rounded up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnduranceGroupLog {
    pub critical_warning: u8,
    pub endurance_group_features: u8,
    pub avl_spare: u8,
    pub avl_spare_threshold: u8,
    pub percent_used: u8,
    pub domain_identifier: u16,
    pub endurance_estimate: u64,
    pub data_units_read: u64,
    pub data_units_written: u64,
    pub media_units_written: u64,
    pub host_read_cmds: u64,
    pub host_write_cmds: u64,
    pub media_data_integrity_err: u64,
    pub num_err_info_log_entries: u64,
    pub total_end_grp_cap: u64,
    pub unalloc_end_grp_cap: u64,
}

/// Host commands of one set (the FTL counts its bytes), and the errors of the commands on
/// its namespaces (log 09h counts them per Endurance Group, as SMART does for the drive).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetCommands {
    pub host_read_commands: u64,
    pub host_write_commands: u64,
    /// Unrecovered read errors (SMART's media errors) on the set's namespaces.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub media_errors: u64,
    /// Error Information log entries of commands on the set's namespaces.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub error_log_entries: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// User capacity of set `set`: an equal share of TNVMCAP on a 4 KiB grid, the last set
/// taking the remainder (each set has the same NAND and GC overhead, so the same OP).
pub(super) fn set_capacity(spec: &DriveSpec, cfg: &FtlConfig, set: u32) -> u64 {
    let t = spec.capacity.tnvmcap_bytes.value;
    let share = t / cfg.sets as u64 / 4096 * 4096;
    if set + 1 == cfg.sets {
        t - share * (cfg.sets as u64 - 1)
    } else {
        share
    }
}

pub(super) fn no_sets<T>(model: &str) -> Result<T, Error> {
    fail(Status::InvalidField, format!("{model} has no NVM Sets (CTRATT bit 2 is clear): Identify CNS 04h is not supported"))
}

pub(super) fn unknown_group<T>(endgid: u16, groups: u32, model: &str) -> Result<T, Error> {
    if groups == 0 {
        return fail(
            Status::InvalidLogPage,
            format!("{model} has no Endurance Groups (CTRATT bit 4 is clear): log page 0x09 is not supported"),
        );
    }
    fail(Status::InvalidField, format!("endurance group {endgid} does not exist: this drive has endurance groups 1..={groups}"))
}

/// The list from set `nvmsetid` on (0 or 1: every set).
pub(super) fn list_from(all: &NvmSetList, nvmsetid: u16) -> Result<NvmSetList, Error> {
    let n = all.nvm_sets.len() as u16;
    if nvmsetid > n {
        return fail(Status::InvalidField, format!("NVM Set {nvmsetid} does not exist: this drive has NVM Sets 1..={n}"));
    }
    let nvm_sets: Vec<NvmSetEntry> = all.nvm_sets.iter().filter(|e| e.nvmset_id >= nvmsetid).cloned().collect();
    Ok(NvmSetList { nid: nvm_sets.len() as u8, nvm_sets })
}

/// Every NAND namespace's chunks belong to its set in the FTL.
pub(super) fn check_chunk_sets(st: &ControllerState, ftl: &FtlState) -> Result<(), String> {
    for ns in st.namespaces.values().filter(|n| !n.dram) {
        if ns.nvm_set >= ftl.sets() {
            return Err(format!("namespace {} lies in NVM Set {}, the FTL has {}", ns.nsid, ns.nvm_set + 1, ftl.sets()));
        }
        if let Some(&c) = ns.chunks.iter().find(|&&c| ftl.chunk_set(c) != ns.nvm_set) {
            return Err(format!(
                "namespace {} lies in NVM Set {} but its chunk {c} belongs to set {}",
                ns.nsid,
                ns.nvm_set + 1,
                ftl.chunk_set(c) + 1
            ));
        }
    }
    Ok(())
}

/// Namespaces in existing sets and within each set's capacity; per-set command counters for
/// every set of a drive with sets, none otherwise.
pub(super) fn check_sets_state(spec: &DriveSpec, cfg: &FtlConfig, st: &ControllerState) -> Result<(), String> {
    let mut allocated = vec![0u64; cfg.sets as usize];
    for ns in st.namespaces.values() {
        if ns.nvm_set >= cfg.sets || (ns.dram && ns.nvm_set != 0) {
            return Err(format!("namespace {} lies in NVM Set {}, the drive has {}", ns.nsid, ns.nvm_set + 1, cfg.sets));
        }
        if !ns.dram {
            allocated[ns.nvm_set as usize] += ns.bytes();
        }
    }
    for (set, &a) in allocated.iter().enumerate() {
        let cap = set_capacity(spec, cfg, set as u32);
        if a > cap {
            return Err(format!("namespaces of NVM Set {} allocate {a} bytes of its {cap}", set + 1));
        }
    }
    let want = if cfg.sets > 1 { cfg.sets as usize } else { 0 };
    if st.set_commands.len() != want {
        return Err(format!("{} per-set command counters recorded, the drive has {want}", st.set_commands.len()));
    }
    Ok(())
}

impl Controller {
    /// Whether the drive has NVM Sets and Endurance Groups: built with two or more
    /// (`ssdtwin create --nvm-sets`). One set is the drive without sets, identify included,
    /// bit for bit.
    pub fn has_nvm_sets(&self) -> bool {
        self.cfg.sets > 1
    }

    /// Endurance Groups of the drive (one per NVM Set; none without sets).
    pub fn endurance_groups(&self) -> u32 {
        if self.has_nvm_sets() {
            self.cfg.sets
        } else {
            0
        }
    }

    /// NVMSETID of 0-based set `set` (0 on a drive without sets).
    pub(super) fn nvmsetid_of(&self, set: u32) -> u16 {
        if self.has_nvm_sets() {
            set as u16 + 1
        } else {
            0
        }
    }

    /// NVMSETID (= ENDGID) of a namespace: 0 for a DRAM namespace or without sets.
    pub(super) fn nvmsetid(&self, ns: &Namespace) -> u16 {
        if ns.dram {
            0
        } else {
            self.nvmsetid_of(ns.nvm_set)
        }
    }

    /// User capacity of 0-based set `set` (TNVMSETCAP).
    pub fn set_capacity(&self, set: u32) -> u64 {
        set_capacity(&self.spec, &self.cfg, set)
    }

    /// NVM capacity of set `set` not allocated to namespaces (UNVMSETCAP).
    pub fn set_unallocated(&self, set: u32) -> u64 {
        let used: u64 = self.st.namespaces.values().filter(|n| !n.dram && n.nvm_set == set).map(|n| n.bytes()).sum();
        self.set_capacity(set) - used
    }

    /// The 0-based set a namespace of `bytes` is created in: NVMSETID `nvmsetid`, or with 0
    /// the first set with room (the first set when none has).
    pub(super) fn pick_set(&self, nvmsetid: u16, bytes: u64) -> Result<u32, Error> {
        let k = self.cfg.sets;
        if !self.has_nvm_sets() {
            if nvmsetid != 0 {
                return fail(
                    Status::InvalidField,
                    format!(
                        "NVM Set {nvmsetid}: {} was built without NVM Sets (use 0, or build the image with ssdtwin create --nvm-sets)",
                        self.spec.drive.name
                    ),
                );
            }
            return Ok(0);
        }
        if nvmsetid as u32 > k {
            return fail(Status::InvalidField, format!("NVM Set {nvmsetid} does not exist: this drive has NVM Sets 1..={k}"));
        }
        if nvmsetid > 0 {
            return Ok(nvmsetid as u32 - 1);
        }
        Ok((0..k).find(|&s| self.set_unallocated(s) >= bytes).unwrap_or(0))
    }

    /// A namespace of `bytes` fits the unallocated capacity of set `set`.
    pub(super) fn check_set_room(&self, set: u32, nsze: u64, lba: u32, bytes: u64) -> Result<(), Error> {
        let free = self.set_unallocated(set);
        if bytes > free {
            return fail(
                Status::NsInsufficientCapacity,
                format!(
                    "NVM Set {}: {nsze} blocks x {lba} B = {bytes} bytes ({}) requested, {free} bytes ({}) of the set unallocated (at most {} blocks of {lba} B)",
                    set + 1,
                    fmt_decimal(bytes),
                    fmt_decimal(free),
                    free / lba as u64
                ),
            );
        }
        Ok(())
    }

    /// The typical QD1 4 KiB random read of an idle set in 100 ns units, along the engine's
    /// read path: a command slot, the page read, the channel transfer, the host link and
    /// the controller's read time (0 without a timing model).
    fn random_4k_read_typical(&self) -> u32 {
        let Some(t) = &self.spec.timing else { return 0 };
        let xfer = |bytes: u64, rate: u64| (bytes * 1_000_000_000).div_ceil(rate.max(1));
        let ns = 1_000_000_000u64.div_ceil(t.ctrl_max_iops.value.max(1))
            + t.t_read_ns.value
            + xfer(4096, t.channel_bytes_per_s.value)
            + xfer(4096, t.host_link_bytes_per_s.value)
            + t.ctrl_read_ns.value;
        ns.div_ceil(100) as u32
    }

    /// Identify CNS 04h: the NVM Set List from set `nvmsetid` on (0: every set).
    pub fn id_nvmset(&self, nvmsetid: u16) -> Result<NvmSetList, Error> {
        if !self.has_nvm_sets() {
            return no_sets(&self.spec.drive.model_number.value);
        }
        let r4k = self.random_4k_read_typical();
        let ows = self.spec.geometry().program_unit_bytes as u32;
        let nvm_sets = (0..self.cfg.sets)
            .map(|s| NvmSetEntry {
                nvmset_id: s as u16 + 1,
                endurance_group_id: s as u16 + 1,
                random_4k_read_typical: r4k,
                optimal_write_size: ows,
                total_nvmset_cap: self.set_capacity(s),
                unalloc_nvmset_cap: self.set_unallocated(s),
            })
            .collect();
        list_from(&NvmSetList { nid: self.cfg.sets as u8, nvm_sets }, nvmsetid)
    }

    /// Get Log Page 09h: the Endurance Group Information log of group `endgid` (1-based).
    pub fn endurance_log(&self, endgid: u16) -> Result<EnduranceGroupLog, Error> {
        let groups = self.endurance_groups();
        if endgid == 0 || endgid as u32 > groups {
            return unknown_group(endgid, groups, &self.spec.drive.model_number.value);
        }
        let set = endgid as u32 - 1;
        let st = self.ftl_state();
        let c = st.set_counters(set);
        let sbs = &st.superblocks()[self.cfg.set_superblocks(set).start as usize..self.cfg.set_superblocks(set).end as usize];
        let erases: u64 = sbs.iter().map(|b| b.erase_count as u64).sum();
        let pe = self.spec.nand.pe_cycles.value as u64;
        let pct = (erases as f64 / sbs.len() as f64 / pe as f64 * 100.0).floor().min(255.0) as u8;
        let raw = self.spec.geometry().superblock_bytes * sbs.len() as u64;
        let media = (c.host_programmed_ius + c.gc_programmed_ius + c.parity_programmed_ius) * self.cfg.iu_bytes as u64;
        let cmds = self.st.set_commands.get(set as usize).cloned().unwrap_or_default();
        Ok(EnduranceGroupLog {
            critical_warning: 0,
            endurance_group_features: 0,
            avl_spare: 100,
            avl_spare_threshold: 10,
            percent_used: pct,
            domain_identifier: 0,
            // Bytes the group's NAND takes over its rated life at a write amplification of 1.
            endurance_estimate: (raw as u128 * pe as u128).div_ceil(1_000_000_000) as u64,
            data_units_read: (c.host_read_bytes / 512).div_ceil(1000),
            data_units_written: (c.host_write_bytes / 512).div_ceil(1000),
            media_units_written: media.div_ceil(1_000_000_000),
            host_read_cmds: cmds.host_read_commands,
            host_write_cmds: cmds.host_write_commands,
            media_data_integrity_err: cmds.media_errors,
            num_err_info_log_entries: cmds.error_log_entries,
            total_end_grp_cap: self.set_capacity(set),
            unalloc_end_grp_cap: self.set_unallocated(set),
        })
    }
}
