//! Namespaces: the table, capacity accounting (`UNVMCAP = TNVMCAP - Σ NVMCAP`), Namespace
//! Management (create, delete; DRAM namespaces) and Namespace Attachment. A namespace owns
//! whole chunks of the FTL's logical IU space.

use serde::{Deserialize, Serialize};

use super::protection::Protection;
use super::status::fail;
use super::{fmt_formats, Controller, Error, NsId, Status, CONTROLLER_ID, NSID_ALL, WP_NONE};
use crate::units::{fmt_decimal, LogicalIu};

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
    pub(super) fn global_iu(&self, ns_iu: u64, shift: u32) -> Option<LogicalIu> {
        Self::chunk_iu(&self.chunks, ns_iu, shift)
    }

    /// [`Namespace::global_iu`] of a namespace whose chunks are `chunks`.
    #[inline(always)]
    pub(super) fn chunk_iu(chunks: &[u32], ns_iu: u64, shift: u32) -> Option<LogicalIu> {
        let c = *chunks.get((ns_iu >> shift) as usize)?;
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

impl Controller {
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
    pub(super) fn namespace_u32(&self, nsid: u32) -> Result<&Namespace, Error> {
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

    pub(super) fn nsid_list(&self) -> String {
        if self.st.namespaces.is_empty() {
            return "none".into();
        }
        self.st.namespaces.keys().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.st.namespaces.values()
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

    fn free_chunks(&self) -> Vec<u32> {
        let mut used = vec![false; self.cfg.chunks() as usize];
        for ns in self.st.namespaces.values() {
            for &c in &ns.chunks {
                used[c as usize] = true;
            }
        }
        (0..self.cfg.chunks()).filter(|&c| !used[c as usize]).collect()
    }

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
        let Some(bytes) = nsze.checked_mul(lba as u64) else {
            // Past 2^64 bytes: no drive's capacity; the message names the exact product.
            let free = if dram { self.dram_budget_bytes() - self.dram_allocated_bytes() } else { self.unvmcap() };
            return fail(
                Status::NsInsufficientCapacity,
                format!(
                    "{nsze} blocks x {lba} B = {} bytes requested, {free} bytes ({}) {} (at most {} blocks of {lba} B)",
                    nsze as u128 * lba as u128,
                    fmt_decimal(free),
                    if dram { "of the DRAM budget free" } else { "unallocated" },
                    free / lba as u64
                ),
            );
        };
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
        // Deleting destroys the data NVMe 1.4 §8.12 protects: refused, and with NSID
        // FFFFFFFFh nothing is deleted when any namespace is protected.
        if let Some(ns) = ids.iter().map(|id| &self.st.namespaces[id]).find(|n| n.write_protect != WP_NONE) {
            return fail(
                Status::NamespaceWriteProtected,
                format!("namespace {} is write protected ({}): it cannot be deleted", ns.nsid, super::wp_state_clears(ns.write_protect)),
            );
        }
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

    pub(super) fn deallocate_chunks(&mut self, chunks: &[u32]) -> Result<(), Error> {
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
}
