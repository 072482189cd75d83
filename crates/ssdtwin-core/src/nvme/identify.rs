//! Identify Controller / Identify Namespace data, with nvme-cli's field names in the order
//! nvme-cli 2.4 prints them (tests/data/nvme-cli-2.4 holds its keys; test_nvme_cli_json.py
//! compares).

use serde::{Deserialize, Serialize};

use super::{Controller, Error, Namespace, NsId, WP_NONE};

/// Identify Controller (CNS 01h), every field nvme-cli 2.4 prints, in its order (NVMe 1.4
/// Figure 247; the 2.0 fields megcap, domainid, nvmsr, vwci, mec, cntrltype's companions are
/// zero on this 1.4 controller). A field the twin has no model for holds what a drive that
/// lacks the feature reports: zero. The raw 4 KiB structure is [`IdCtrl::to_bytes`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IdCtrl {
    /// PCI Vendor ID and PCI Subsystem Vendor ID.
    pub vid: u16,
    pub ssvid: u16,
    /// Serial number, model number, firmware revision (ASCII, unpadded here).
    pub sn: String,
    pub mn: String,
    pub fr: String,
    /// Recommended Arbitration Burst (2^rab commands).
    pub rab: u8,
    /// IEEE OUI of the vendor (24 bits).
    pub ieee: u32,
    /// Multi-path I/O and namespace sharing capabilities (bit 3: ANA reporting).
    pub cmic: u8,
    /// Maximum data transfer size (2^mdts minimum pages).
    pub mdts: u8,
    pub cntlid: u16,
    /// NVMe version (0x10400: 1.4).
    pub ver: u32,
    /// RTD3 resume and entry latencies, µs (0: not reported).
    #[serde(default)]
    pub rtd3r: u32,
    #[serde(default)]
    pub rtd3e: u32,
    /// Optional asynchronous events supported (none: the twin raises no AERs).
    #[serde(default)]
    pub oaes: u32,
    /// Controller attributes: bit 2 NVM Sets, bit 4 Endurance Groups.
    #[serde(default)]
    pub ctratt: u32,
    /// Read recovery levels supported (bit per level; none).
    #[serde(default)]
    pub rrls: u16,
    /// Controller type: 1 I/O controller (required from NVMe 1.4 on).
    #[serde(default)]
    pub cntrltype: u8,
    /// FRU globally unique identifier, as a UUID (all zero: not reported).
    #[serde(default = "zero_uuid")]
    pub fguid: String,
    /// Command retry delay times, 100 ms units (no retry delays).
    #[serde(default)]
    pub crdt1: u16,
    #[serde(default)]
    pub crdt2: u16,
    #[serde(default)]
    pub crdt3: u16,
    /// NVM subsystem report, VPD write cycle information, management endpoint capabilities
    /// (NVMe-MI: none).
    #[serde(default)]
    pub nvmsr: u8,
    #[serde(default)]
    pub vwci: u8,
    #[serde(default)]
    pub mec: u8,
    /// Optional admin commands: bit 1 Format NVM, bit 3 Namespace Management.
    pub oacs: u16,
    /// Abort command limit and asynchronous event request limit (0's based).
    pub acl: u8,
    pub aerl: u8,
    /// Firmware updates: slots and slot 1 read-only.
    pub frmw: u8,
    /// Log page attributes.
    pub lpa: u8,
    /// Error log page entries (0's based).
    pub elpe: u8,
    /// Number of power states supported (0's based).
    pub npss: u8,
    /// Admin vendor specific command configuration, autonomous power state transitions
    /// (not modelled: 0).
    #[serde(default)]
    pub avscc: u8,
    #[serde(default)]
    pub apsta: u8,
    /// Warning and critical composite temperature thresholds, kelvin.
    pub wctemp: u16,
    pub cctemp: u16,
    /// Maximum time for firmware activation, 100 ms units (0: not reported).
    #[serde(default)]
    pub mtfa: u16,
    /// Host memory buffer preferred and minimum sizes, 4 KiB units (no HMB).
    #[serde(default)]
    pub hmpre: u32,
    #[serde(default)]
    pub hmmin: u32,
    /// Total and unallocated NVM capacity, bytes.
    pub tnvmcap: u64,
    pub unvmcap: u64,
    /// Replay protected memory block support (none).
    #[serde(default)]
    pub rpmbs: u32,
    /// Extended device self-test time (minutes) and its options (no self-test: OACS bit 4 clear).
    #[serde(default)]
    pub edstt: u16,
    #[serde(default)]
    pub dsto: u8,
    /// Firmware update granularity (4 KiB units; 0: not reported).
    #[serde(default)]
    pub fwug: u8,
    /// Keep alive support (fabrics; 0).
    #[serde(default)]
    pub kas: u16,
    /// Host controlled thermal management: attributes and its minimum and maximum
    /// temperatures, kelvin (not supported: 0).
    #[serde(default)]
    pub hctma: u16,
    #[serde(default)]
    pub mntmt: u16,
    #[serde(default)]
    pub mxtmt: u16,
    /// Sanitize capabilities: bit 0 crypto erase, 1 block erase, 2 overwrite, 29 NDI.
    #[serde(default)]
    pub sanicap: u32,
    /// Host memory buffer minimum descriptor entry size and maximum descriptors (no HMB).
    #[serde(default)]
    pub hmminds: u32,
    #[serde(default)]
    pub hmmaxd: u16,
    /// Highest NVM Set and Endurance Group identifiers (0: none).
    #[serde(default)]
    pub nsetidmax: u16,
    #[serde(default)]
    pub endgidmax: u16,
    /// ANA reporting (CMIC bit 3): transition time (s), capabilities, the highest group id
    /// and the number of groups (0 without ANA).
    #[serde(default)]
    pub anatt: u8,
    #[serde(default)]
    pub anacap: u8,
    #[serde(default)]
    pub anagrpmax: u32,
    #[serde(default)]
    pub nanagrpid: u32,
    /// Persistent event log size, 64 KiB units (no persistent event log).
    #[serde(default)]
    pub pels: u32,
    /// Domain identifier and maximum endurance group capacity (NVMe 2.0; 0).
    #[serde(default)]
    pub domainid: u16,
    #[serde(default)]
    pub megcap: u64,
    /// Submission / completion queue entry sizes: required and maximum, log2 bytes.
    pub sqes: u8,
    pub cqes: u8,
    /// Maximum outstanding commands (fabrics; 0).
    #[serde(default)]
    pub maxcmd: u16,
    /// Number of namespaces (the highest NSID).
    pub nn: u32,
    /// Optional NVM commands: bit 2 Dataset Management, bit 3 Write Zeroes.
    pub oncs: u16,
    /// Fused operations supported (none).
    #[serde(default)]
    pub fuses: u16,
    /// Format NVM attributes: bit 2 cryptographic erase supported.
    pub fna: u8,
    /// Volatile write cache (none: the write buffer is power-loss protected).
    pub vwc: u8,
    /// Atomic write unit normal / power fail (0's based blocks).
    pub awun: u16,
    pub awupf: u16,
    /// I/O command set vendor specific command configuration (0).
    #[serde(default)]
    pub icsvscc: u8,
    /// Namespace write protection capabilities.
    pub nwpc: u8,
    /// Atomic compare & write unit (no Compare and Write: 0).
    #[serde(default)]
    pub acwu: u16,
    /// Optional copy formats supported (no Copy command: 0).
    #[serde(default)]
    pub ocfs: u16,
    /// SGL support (PRPs only: 0).
    #[serde(default)]
    pub sgls: u32,
    /// Maximum number of allowed namespaces (0: not reported beyond nn).
    pub mnan: u32,
    /// Maximum domain namespace attachments and maximum I/O controller namespace
    /// attachments (NVMe 2.0; 0).
    #[serde(default)]
    pub maxdna: u64,
    #[serde(default)]
    pub maxcna: u32,
    /// NVM subsystem NVMe qualified name.
    pub subnqn: String,
    /// Fabrics only: I/O queue command / response capsule sizes, in-capsule data offset,
    /// controller attributes, maximum SGL data block descriptors (0 on PCIe).
    #[serde(default)]
    pub ioccsz: u32,
    #[serde(default)]
    pub iorcsz: u32,
    #[serde(default)]
    pub icdoff: u16,
    #[serde(default)]
    pub fcatt: u8,
    #[serde(default)]
    pub msdbd: u8,
    /// Optional fabric commands supported (0 on PCIe).
    #[serde(default)]
    pub ofcs: u16,
    pub psds: Vec<PowerStateDesc>,
    /// Vendor-specific: the DRAM namespace budget (drives that have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_dram_ns: Option<DramNsCapacity>,
}

fn zero_uuid() -> String {
    "00000000-0000-0000-0000-000000000000".into()
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

/// One power state descriptor (NVMe 1.4 Figure 248) as nvme-cli 2.4 prints it: power in the
/// units its scale names (MXPS 0 and scale 2: centiwatts).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PowerStateDesc {
    /// Maximum power (MP), centiwatts while flags bit 0 (MXPS) is clear.
    pub max_power: u32,
    /// Byte 3: bit 0 max power scale (MXPS: 0.01 W when clear), bit 1 non-operational
    /// state (NOPS). nvme-cli 2.6 and later print the two bits as max_power_scale and
    /// non-operational_state instead.
    pub flags: u8,
    /// Entry and exit latencies, µs.
    pub entry_lat: u32,
    pub exit_lat: u32,
    /// Relative read/write throughput and latency (0: the best).
    pub read_tput: u8,
    pub read_lat: u8,
    pub write_tput: u8,
    pub write_lat: u8,
    /// Idle power and its scale (0: not reported).
    pub idle_power: u32,
    pub idle_scale: u8,
    /// Active power, its workload and scale (2: 0.01 W).
    pub active_power: u32,
    pub active_power_work: u8,
    pub active_scale: u8,
}

/// Power state descriptor flags (byte 3): MXPS and NOPS.
pub const PSD_FLAG_MXPS: u8 = 1 << 0;
pub const PSD_FLAG_NOPS: u8 = 1 << 1;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LbaFormatDesc {
    pub ms: u16,
    pub ds: u8,
    pub rp: u8,
}

/// Identify Namespace (CNS 00h), every field nvme-cli 2.4 prints, in its order (NVMe 1.4
/// Figure 249). Performance hints (npwg …) are 0's based, in logical blocks, valid because
/// nsfeat bit 4 is set. The raw 4 KiB structure is [`IdNs::to_bytes`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IdNs {
    /// Namespace size, capacity and utilization, logical blocks.
    pub nsze: u64,
    pub ncap: u64,
    pub nuse: u64,
    /// Namespace features: bit 4 the performance hints are valid.
    pub nsfeat: u8,
    /// Number of LBA formats (0's based).
    pub nlbaf: u8,
    /// Formatted LBA size: bits 3:0 the format, bit 4 extended LBA.
    pub flbas: u8,
    /// Metadata capabilities, end-to-end data protection capabilities and settings.
    pub mc: u8,
    pub dpc: u8,
    pub dps: u8,
    /// Multi-path I/O and namespace sharing, reservation capabilities.
    pub nmic: u8,
    pub rescap: u8,
    /// Format progress indicator; deallocate logical block features.
    pub fpi: u8,
    pub dlfeat: u8,
    /// Namespace atomic write unit normal / power fail, atomic compare & write unit,
    /// boundary size normal / offset / power fail, optimal I/O boundary.
    pub nawun: u16,
    pub nawupf: u16,
    pub nacwu: u16,
    pub nabsn: u16,
    pub nabo: u16,
    pub nabspf: u16,
    pub noiob: u16,
    /// NVM capacity, bytes.
    pub nvmcap: u64,
    /// Namespace attributes: bit 0 write protected.
    pub nsattr: u8,
    pub nvmsetid: u16,
    /// Preferred write granularity and alignment, deallocate granularity and alignment,
    /// optimal write size (0's based logical blocks).
    pub npwg: u16,
    pub npwa: u16,
    pub npdg: u16,
    pub npda: u16,
    pub nows: u16,
    /// Copy command limits: maximum single source range length, copy length, source range
    /// count (no Copy command, ONCS bit 8 clear: 0).
    #[serde(default)]
    pub mssrl: u16,
    #[serde(default)]
    pub mcl: u32,
    #[serde(default)]
    pub msrc: u8,
    /// Number of unique capability LBA formats (NVMe 2.0; 0).
    #[serde(default)]
    pub nulbaf: u8,
    pub anagrpid: u32,
    pub endgid: u16,
    /// IEEE extended unique identifier and namespace globally unique identifier, hex.
    pub eui64: String,
    pub nguid: String,
    pub lbafs: Vec<LbaFormatDesc>,
    /// Vendor-specific: 1 for a DRAM namespace (shown only then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vs_dram: u8,
    /// Vendor-specific: the identifier of the namespace's media encryption key (a crypto
    /// erase, `format --ses 2` or a sanitize, changes it; the twin keeps no key material).
    #[serde(default)]
    pub vs_mek_id: String,
}

impl IdNs {
    /// The zero-filled structure Identify CNS 00h returns for an inactive NSID (NVMe 1.4
    /// Figure 245): every field 0, one LBA format of zeros (NLBAF is 0's based).
    pub fn zeroed() -> IdNs {
        IdNs {
            eui64: "0".repeat(16),
            nguid: "0".repeat(32),
            lbafs: vec![LbaFormatDesc { ms: 0, ds: 0, rp: 0 }],
            vs_mek_id: "0".repeat(16),
            ..IdNs::default()
        }
    }
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
    let ana = c.has_ana();
    IdCtrl {
        vid: d.pci_vendor_id.value,
        ssvid: d.pci_vendor_id.value,
        sn: c.state().serial.clone(),
        mn: d.model_number.value.clone(),
        fr: d.firmware.clone(),
        rab: 3,
        ieee: 0,
        // Bit 3: ANA reporting.
        cmic: if ana { 0x08 } else { 0 },
        mdts: 9,
        cntlid: super::CONTROLLER_ID,
        ver: 0x10400,
        rtd3r: 0,
        rtd3e: 0,
        oaes: 0,
        ctratt: if c.has_nvm_sets() { (1 << 2) | (1 << 4) } else { 0 },
        rrls: 0,
        cntrltype: 1,
        fguid: zero_uuid(),
        crdt1: 0,
        crdt2: 0,
        crdt3: 0,
        nvmsr: 0,
        vwci: 0,
        mec: 0,
        // Format NVM (bit 1) and Namespace Management (bit 3).
        oacs: 0x000a,
        acl: 3,
        aerl: 3,
        frmw: 0x02,
        lpa: 0x02,
        elpe: 63,
        npss: (psds.len() - 1) as u8,
        avscc: 0,
        apsta: 0,
        wctemp: 343,
        cctemp: 353,
        mtfa: 0,
        hmpre: 0,
        hmmin: 0,
        tnvmcap: c.tnvmcap(),
        unvmcap: c.unvmcap(),
        rpmbs: 0,
        edstt: 0,
        dsto: 0,
        fwug: 0,
        kas: 0,
        // No host controlled thermal management: the model has no thermal spec.
        hctma: 0,
        mntmt: 0,
        mxtmt: 0,
        sanicap: super::sanicap(spec),
        hmminds: 0,
        hmmaxd: 0,
        nsetidmax: c.endurance_groups() as u16,
        endgidmax: c.endurance_groups() as u16,
        anatt: spec.ana.as_ref().map_or(0, |a| a.anatt_s.value),
        // Optimized, non-optimized, inaccessible, persistent loss and change reported (bits
        // 0-4); ANAGRPID fixed while the namespace is attached (bit 6).
        anacap: if ana { 0x5f } else { 0 },
        anagrpmax: if ana { spec.capacity.max_namespaces.value } else { 0 },
        nanagrpid: if ana { spec.capacity.max_namespaces.value } else { 0 },
        pels: 0,
        domainid: 0,
        megcap: 0,
        sqes: 0x66,
        cqes: 0x44,
        maxcmd: 0,
        nn: spec.capacity.max_namespaces.value,
        // Dataset Management (bit 2), Write Zeroes (bit 3), the Save field of Set Features
        // and the Select field of Get Features (bit 4).
        oncs: 0x001c,
        fuses: 0,
        // Format per namespace; cryptographic erase supported (bit 2).
        fna: 0x04,
        vwc: 0,
        awun: 0,
        awupf: 0,
        icsvscc: 0,
        // Namespace write protect, until power cycle, permanent.
        nwpc: 0x07,
        acwu: 0,
        ocfs: 0,
        sgls: 0,
        mnan: 0,
        maxdna: 0,
        maxcna: 0,
        subnqn: format!("nqn.2019-10.org.ssdtwin:{}:{}", d.name, c.state().serial),
        ioccsz: 0,
        iorcsz: 0,
        icdoff: 0,
        fcatt: 0,
        msdbd: 0,
        ofcs: 0,
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
        // MXPS clear (0.01 W units); NOPS for a non-operational state.
        flags: if non_op { PSD_FLAG_NOPS } else { 0 },
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

/// What every namespace of the drive can be: the LBA formats, the metadata capabilities
/// (MC) and the end-to-end protection capabilities (DPC).
fn namespace_capabilities(c: &Controller) -> (Vec<LbaFormatDesc>, u8, u8) {
    let spec = c.spec();
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
    // MC: metadata as part of an extended LBA (bit 0) or in a separate buffer (bit 1).
    let mc = if lbafs.iter().any(|f| f.ms != 0) { 3 } else { 0 };
    // DPC: the PI types supported (bits 0-2) and PI in the first or last 8 bytes (bits 3-4).
    let dpc = spec.pi_types().iter().fold(0u8, |m, &t| m | 1 << (t - 1)) | if spec.pi_types().is_empty() { 0 } else { 0x18 };
    (lbafs, mc, dpc)
}

/// Identify CNS 00h with NSID FFFFFFFFh on a controller with Namespace Management (NVMe 1.4
/// §5.15.2.1): the capabilities common to all namespaces, what a host reads before Create
/// Namespace (nvme-cli's `create-ns -b` picks FLBAS from it). The fields of one namespace
/// (sizes, FLBAS, DPS, NMIC, NSATTR, identifiers, the write hints of NSFEAT bit 4) are 0.
pub(super) fn id_ns_common(c: &Controller) -> IdNs {
    let (lbafs, mc, dpc) = namespace_capabilities(c);
    IdNs {
        nlbaf: (lbafs.len() - 1) as u8,
        mc,
        dpc,
        // Deallocated blocks read as zeroes; Write Zeroes may deallocate.
        dlfeat: 0x09,
        lbafs,
        ..IdNs::zeroed()
    }
}

pub(super) fn id_ns(c: &Controller, ns: &Namespace) -> IdNs {
    let spec = c.spec();
    let iu = c.ftl_config().iu_bytes as u64;
    let lba = ns.lba_bytes as u64;
    let pu = spec.geometry().program_unit_bytes;
    // 0's based counts of logical blocks, saturating at the 16-bit field.
    let blocks = |bytes: u64| ((bytes / lba).max(1) - 1).min(u16::MAX as u64) as u16;
    let (lbafs, mc, dpc) = namespace_capabilities(c);
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
        mc,
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
        // A DRAM namespace allocates no NVM (UNVMCAP does not count it): NVMCAP 0, so that
        // UNVMCAP = TNVMCAP - the NVMCAP of every namespace holds.
        nvmcap: if ns.dram { 0 } else { ns.bytes() },
        nsattr: (ns.write_protect != WP_NONE) as u8,
        nvmsetid: c.nvmsetid(ns),
        npwg: blocks(iu),
        npwa: blocks(iu),
        npdg: blocks(iu),
        npda: blocks(iu),
        nows: blocks(pu),
        mssrl: 0,
        mcl: 0,
        msrc: 0,
        nulbaf: 0,
        anagrpid: c.anagrpid(super::NsId(ns.nsid)),
        endgid: c.nvmsetid(ns),
        eui64: format!("{:016x}", crate::util::splitmix(c.state().seed ^ ((ns.nsid as u64) << 32))),
        nguid: format!("{:016x}{:016x}", crate::util::splitmix(c.state().seed), crate::util::splitmix(ns.nsid as u64 ^ c.state().seed)),
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
