//! Identify Controller / Identify Namespace data, with nvme-cli's field names.

use serde::{Deserialize, Serialize};

use super::{Controller, Error, Namespace, NsId, WP_NONE};

/// Identify Controller (CNS 01h) fields the twin fills in.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IdCtrl {
    pub vid: u16,
    pub ssvid: u16,
    pub sn: String,
    pub mn: String,
    pub fr: String,
    pub rab: u8,
    pub ieee: u32,
    pub cmic: u8,
    pub mdts: u8,
    pub cntlid: u16,
    pub ver: u32,
    /// Controller attributes: bit 2 NVM Sets, bit 4 Endurance Groups.
    #[serde(default)]
    pub ctratt: u32,
    pub oacs: u16,
    pub acl: u8,
    pub aerl: u8,
    pub frmw: u8,
    pub lpa: u8,
    pub elpe: u8,
    pub npss: u8,
    pub wctemp: u16,
    pub cctemp: u16,
    pub tnvmcap: u64,
    pub unvmcap: u64,
    pub sqes: u8,
    pub cqes: u8,
    pub nn: u32,
    pub oncs: u16,
    pub fna: u8,
    pub vwc: u8,
    pub awun: u16,
    pub awupf: u16,
    pub nwpc: u8,
    pub mnan: u32,
    /// Sanitize capabilities: bit 0 crypto erase, 1 block erase, 2 overwrite, 29 NDI.
    #[serde(default)]
    pub sanicap: u32,
    /// Highest NVM Set and Endurance Group identifiers (0: none).
    #[serde(default)]
    pub nsetidmax: u16,
    #[serde(default)]
    pub endgidmax: u16,
    /// ANA reporting (CMIC bit 3): transition time (s), capabilities, the highest group id
    /// and the number of groups (absent without ANA).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub anatt: u8,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub anacap: u8,
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub anagrpmax: u32,
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub nanagrpid: u32,
    pub subnqn: String,
    pub psds: Vec<PowerStateDesc>,
    /// Vendor-specific: the DRAM namespace budget (drives that have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_dram_ns: Option<DramNsCapacity>,
}

/// The DRAM namespace budget and what is left of it, in bytes (vendor-specific identify data).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DramNsCapacity {
    pub budget_bytes: u64,
    pub unallocated_bytes: u64,
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// One power state descriptor; power in centiwatts as nvme-cli's JSON prints it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PowerStateDesc {
    pub max_power: u32,
    pub max_power_scale: u8,
    #[serde(rename = "non-operational_state")]
    pub non_operational_state: u8,
    pub entry_lat: u32,
    pub exit_lat: u32,
    pub read_tput: u8,
    pub read_lat: u8,
    pub write_tput: u8,
    pub write_lat: u8,
    pub idle_power: u32,
    pub idle_scale: u8,
    pub active_power: u32,
    pub active_power_work: u8,
    pub active_scale: u8,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LbaFormatDesc {
    pub ms: u16,
    pub ds: u8,
    pub rp: u8,
}

/// Identify Namespace (CNS 00h) fields the twin fills in. Performance hints (npwg …) are
/// 0's based, in logical blocks, valid because nsfeat bit 4 is set.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IdNs {
    pub nsze: u64,
    pub ncap: u64,
    pub nuse: u64,
    pub nsfeat: u8,
    pub nlbaf: u8,
    pub flbas: u8,
    pub mc: u8,
    pub dpc: u8,
    pub dps: u8,
    pub nmic: u8,
    pub rescap: u8,
    pub fpi: u8,
    pub dlfeat: u8,
    pub nawun: u16,
    pub nawupf: u16,
    pub nacwu: u16,
    pub nabsn: u16,
    pub nabo: u16,
    pub nabspf: u16,
    pub noiob: u16,
    pub nvmcap: u64,
    pub npwg: u16,
    pub npwa: u16,
    pub npdg: u16,
    pub npda: u16,
    pub nows: u16,
    pub anagrpid: u32,
    pub nsattr: u8,
    pub nvmsetid: u16,
    pub endgid: u16,
    pub nguid: String,
    pub eui64: String,
    pub lbafs: Vec<LbaFormatDesc>,
    /// Vendor-specific: 1 for a DRAM namespace (shown only then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vs_dram: u8,
    /// Vendor-specific: the identifier of the namespace's media encryption key (a crypto
    /// erase, `format --ses 2` or a sanitize, changes it; the twin keeps no key material).
    #[serde(default)]
    pub vs_mek_id: String,
}

pub(super) fn id_ctrl(c: &Controller) -> IdCtrl {
    let spec = c.spec();
    let d = &spec.drive;
    let psds = if spec.power_states.is_empty() {
        // NVMe requires power state 0; without a datasheet table we report no power figure.
        vec![psd(0, None, false)]
    } else {
        spec.power_states.iter().map(|p| psd(p.max_power_mw, p.active_power_mw, p.non_operational)).collect()
    };
    IdCtrl {
        vid: d.pci_vendor_id.value,
        ssvid: d.pci_vendor_id.value,
        sn: c.state().serial.clone(),
        mn: d.model_number.value.clone(),
        fr: d.firmware.clone(),
        rab: 3,
        ieee: 0,
        // Bit 3: ANA reporting.
        cmic: if c.has_ana() { 0x08 } else { 0 },
        mdts: 9,
        cntlid: super::CONTROLLER_ID,
        ver: 0x10400,
        ctratt: if c.has_nvm_sets() { (1 << 2) | (1 << 4) } else { 0 },
        // Format NVM (bit 1) and Namespace Management (bit 3).
        oacs: 0x000a,
        acl: 3,
        aerl: 3,
        frmw: 0x02,
        lpa: 0x02,
        elpe: 63,
        npss: (psds.len() - 1) as u8,
        wctemp: 343,
        cctemp: 353,
        tnvmcap: c.tnvmcap(),
        unvmcap: c.unvmcap(),
        sqes: 0x66,
        cqes: 0x44,
        nn: spec.capacity.max_namespaces.value,
        // Dataset Management (bit 2) and Write Zeroes (bit 3).
        oncs: 0x000c,
        // Format per namespace; cryptographic erase supported (bit 2).
        fna: 0x04,
        vwc: 0,
        awun: 0,
        awupf: 0,
        // Namespace write protect, until power cycle, permanent.
        nwpc: 0x07,
        mnan: 0,
        sanicap: super::sanicap(spec),
        nsetidmax: c.endurance_groups() as u16,
        endgidmax: c.endurance_groups() as u16,
        anatt: spec.ana.as_ref().map_or(0, |a| a.anatt_s.value),
        // Optimized, non-optimized, inaccessible, persistent loss and change reported (bits
        // 0-4); ANAGRPID fixed while the namespace is attached (bit 6).
        anacap: if c.has_ana() { 0x5f } else { 0 },
        anagrpmax: if c.has_ana() { spec.capacity.max_namespaces.value } else { 0 },
        nanagrpid: if c.has_ana() { spec.capacity.max_namespaces.value } else { 0 },
        subnqn: format!("nqn.2019-10.org.ssdtwin:{}:{}", d.name, c.state().serial),
        psds,
        vs_dram_ns: spec.dram_namespace.as_ref().map(|dn| DramNsCapacity {
            budget_bytes: dn.budget_bytes.value,
            unallocated_bytes: dn.budget_bytes.value - c.dram_allocated_bytes(),
        }),
    }
}

fn psd(max_mw: u32, active_mw: Option<u32>, non_op: bool) -> PowerStateDesc {
    PowerStateDesc {
        max_power: max_mw / 10,
        max_power_scale: 0,
        non_operational_state: non_op as u8,
        entry_lat: 0,
        exit_lat: 0,
        read_tput: 0,
        read_lat: 0,
        write_tput: 0,
        write_lat: 0,
        idle_power: 0,
        idle_scale: 0,
        active_power: active_mw.map_or(0, |a| a / 10),
        active_power_work: 0,
        active_scale: if active_mw.is_some() { 2 } else { 0 },
    }
}

pub(super) fn id_ns(c: &Controller, ns: &Namespace) -> IdNs {
    let spec = c.spec();
    let iu = c.ftl_config().iu_bytes as u64;
    let lba = ns.lba_bytes as u64;
    let pu = spec.geometry().program_unit_bytes;
    // 0's based counts of logical blocks, saturating at the 16-bit field.
    let blocks = |bytes: u64| ((bytes / lba).max(1) - 1).min(u16::MAX as u64) as u16;
    let lbafs = spec
        .lba_formats()
        .iter()
        .map(|&(b, ms)| LbaFormatDesc {
            ms,
            ds: b.trailing_zeros() as u8,
            // Relative performance: best when an LBA covers whole IUs' sectors of 4 KiB.
            rp: if b as u64 >= 4096 { 0 } else { 2 },
        })
        .collect::<Vec<_>>();
    let has_md = lbafs.iter().any(|f| f.ms != 0);
    // DPC: the PI types supported (bits 0-2) and PI in the first or last 8 bytes (bits 3-4).
    let dpc = spec.pi_types().iter().fold(0u8, |m, &t| m | 1 << (t - 1)) | if spec.pi_types().is_empty() { 0 } else { 0x18 };
    let prot = ns.protection;
    IdNs {
        nsze: ns.nsze,
        ncap: ns.nsze,
        nuse: c.nuse(ns),
        // bit 4: NPWG/NPWA/NPDG/NPDA/NOWS are valid.
        nsfeat: 0x10,
        nlbaf: (lbafs.len() - 1) as u8,
        // FLBAS bits 3:0 the format, bit 4 metadata at the end of each LBA (extended).
        flbas: ns.flbas | (prot.extended as u8) << 4,
        // MC: metadata as part of an extended LBA (bit 0) or in a separate buffer (bit 1).
        mc: if has_md { 3 } else { 0 },
        dpc,
        dps: prot.dps(),
        nmic: ns.nmic,
        rescap: 0,
        fpi: 0x80,
        // Deallocated blocks read as zeroes; Write Zeroes may deallocate.
        dlfeat: 0x09,
        nawun: 0,
        nawupf: 0,
        nacwu: 0,
        nabsn: 0,
        nabo: 0,
        nabspf: 0,
        noiob: 0,
        nvmcap: ns.bytes(),
        npwg: blocks(iu),
        npwa: blocks(iu),
        npdg: blocks(iu),
        npda: blocks(iu),
        nows: blocks(pu),
        anagrpid: c.anagrpid(super::NsId(ns.nsid)),
        nsattr: (ns.write_protect != WP_NONE) as u8,
        nvmsetid: c.nvmsetid(ns),
        endgid: c.nvmsetid(ns),
        nguid: format!("{:016x}{:016x}", crate::util::splitmix(c.state().seed), crate::util::splitmix(ns.nsid as u64 ^ c.state().seed)),
        eui64: format!("{:016x}", crate::util::splitmix(c.state().seed ^ ((ns.nsid as u64) << 32))),
        lbafs,
        vs_dram: ns.dram as u8,
        vs_mek_id: format!("{:016x}", c.media_key_id(ns.nsid)),
    }
}

impl Controller {
    pub fn id_ctrl(&self) -> IdCtrl {
        id_ctrl(self)
    }

    pub fn id_ns(&self, nsid: NsId) -> Result<IdNs, Error> {
        let nsid = nsid.0;
        let ns = self.namespace_u32(nsid)?;
        Ok(id_ns(self, ns))
    }
}
