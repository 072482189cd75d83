//! Identify data as the 4 KiB structures of the spec: what Identify (CNS 00h, 01h) returns to
//! a host and what `nvme id-ctrl -b` / `id-ns -b` print. Offsets are those of NVMe 1.4
//! Figures 247-249 (libnvme's `struct nvme_id_ctrl`, `struct nvme_id_ns`); every multi-byte
//! field is little-endian, strings are ASCII padded with spaces (sn, mn, fr) or NULs (subnqn).

use super::status::fail;
use super::{ControllerView, Error, IdCtrl, IdNs, NsId, PowerStateDesc, Status};

/// Bytes of an Identify data structure.
pub const IDENTIFY_BYTES: usize = 4096;

/// Identify CNS values the twin returns raw.
pub const CNS_NAMESPACE: u8 = 0x00;
pub const CNS_CONTROLLER: u8 = 0x01;
/// Identify Namespace of an allocated NSID, attached or not (nvme-cli's `id-ns --force`).
pub const CNS_ALLOCATED_NAMESPACE: u8 = 0x11;

/// A little-endian writer over one structure.
struct Fields<'a>(&'a mut [u8]);

impl Fields<'_> {
    fn u8(&mut self, at: usize, v: u8) {
        self.0[at] = v;
    }
    fn u16(&mut self, at: usize, v: u16) {
        self.0[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, at: usize, v: u64) {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    /// A 128-bit field holding a value below 2^64.
    fn u128(&mut self, at: usize, v: u64) {
        self.0[at..at + 16].copy_from_slice(&(v as u128).to_le_bytes());
    }
    /// An ASCII field of `len` bytes padded with `pad`.
    fn text(&mut self, at: usize, len: usize, s: &str, pad: u8) {
        let b = s.as_bytes();
        let n = b.len().min(len);
        self.0[at..at + n].copy_from_slice(&b[..n]);
        self.0[at + n..at + len].fill(pad);
    }
    /// Bytes written as hex digits (nguid, eui64, fguid without its dashes).
    fn hex(&mut self, at: usize, len: usize, s: &str) {
        let digits: Vec<u8> = s.bytes().filter(|c| c.is_ascii_hexdigit()).collect();
        for (i, pair) in digits.chunks(2).take(len).enumerate() {
            let text = std::str::from_utf8(pair).expect("hex digits are ASCII");
            self.0[at + i] = u8::from_str_radix(text, 16).expect("checked hex digits");
        }
    }
}

impl IdCtrl {
    /// The Identify Controller data structure (CNS 01h).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; IDENTIFY_BYTES];
        let mut f = Fields(&mut b);
        f.u16(0, self.vid);
        f.u16(2, self.ssvid);
        f.text(4, 20, &self.sn, b' ');
        f.text(24, 40, &self.mn, b' ');
        f.text(64, 8, &self.fr, b' ');
        f.u8(72, self.rab);
        f.0[73..76].copy_from_slice(&self.ieee.to_le_bytes()[..3]);
        f.u8(76, self.cmic);
        f.u8(77, self.mdts);
        f.u16(78, self.cntlid);
        f.u32(80, self.ver);
        f.u32(84, self.rtd3r);
        f.u32(88, self.rtd3e);
        f.u32(92, self.oaes);
        f.u32(96, self.ctratt);
        f.u16(100, self.rrls);
        f.u8(111, self.cntrltype);
        f.hex(112, 16, &self.fguid);
        f.u16(128, self.crdt1);
        f.u16(130, self.crdt2);
        f.u16(132, self.crdt3);
        f.u8(253, self.nvmsr);
        f.u8(254, self.vwci);
        f.u8(255, self.mec);
        f.u16(256, self.oacs);
        for (at, v) in [(258, self.acl), (259, self.aerl), (260, self.frmw), (261, self.lpa), (262, self.elpe), (263, self.npss)] {
            f.u8(at, v);
        }
        f.u8(264, self.avscc);
        f.u8(265, self.apsta);
        f.u16(266, self.wctemp);
        f.u16(268, self.cctemp);
        f.u16(270, self.mtfa);
        f.u32(272, self.hmpre);
        f.u32(276, self.hmmin);
        f.u128(280, self.tnvmcap);
        f.u128(296, self.unvmcap);
        f.u32(312, self.rpmbs);
        f.u16(316, self.edstt);
        f.u8(318, self.dsto);
        f.u8(319, self.fwug);
        for (at, v) in [(320, self.kas), (322, self.hctma), (324, self.mntmt), (326, self.mxtmt)] {
            f.u16(at, v);
        }
        f.u32(328, self.sanicap);
        f.u32(332, self.hmminds);
        f.u16(336, self.hmmaxd);
        f.u16(338, self.nsetidmax);
        f.u16(340, self.endgidmax);
        f.u8(342, self.anatt);
        f.u8(343, self.anacap);
        f.u32(344, self.anagrpmax);
        f.u32(348, self.nanagrpid);
        f.u32(352, self.pels);
        f.u16(356, self.domainid);
        f.u128(368, self.megcap);
        f.u8(512, self.sqes);
        f.u8(513, self.cqes);
        f.u16(514, self.maxcmd);
        f.u32(516, self.nn);
        f.u16(520, self.oncs);
        f.u16(522, self.fuses);
        f.u8(524, self.fna);
        f.u8(525, self.vwc);
        f.u16(526, self.awun);
        f.u16(528, self.awupf);
        f.u8(530, self.icsvscc);
        f.u8(531, self.nwpc);
        f.u16(532, self.acwu);
        f.u16(534, self.ocfs);
        f.u32(536, self.sgls);
        f.u32(540, self.mnan);
        f.u128(544, self.maxdna);
        f.u32(560, self.maxcna);
        f.text(768, 256, &self.subnqn, 0);
        f.u32(1792, self.ioccsz);
        f.u32(1796, self.iorcsz);
        f.u16(1800, self.icdoff);
        f.u8(1802, self.fcatt);
        f.u8(1803, self.msdbd);
        f.u16(1804, self.ofcs);
        for (i, p) in self.psds.iter().take(32).enumerate() {
            psd_bytes(&mut f, 2048 + 32 * i, p);
        }
        b
    }
}

/// One power state descriptor (32 bytes): the scales sit in bits 7:6 of IPS and APWS.
fn psd_bytes(f: &mut Fields<'_>, at: usize, p: &PowerStateDesc) {
    f.u16(at, p.max_power as u16);
    f.u8(at + 3, p.flags);
    f.u32(at + 4, p.entry_lat);
    f.u32(at + 8, p.exit_lat);
    f.u8(at + 12, p.read_tput);
    f.u8(at + 13, p.read_lat);
    f.u8(at + 14, p.write_tput);
    f.u8(at + 15, p.write_lat);
    f.u16(at + 16, p.idle_power as u16);
    f.u8(at + 18, p.idle_scale << 6);
    f.u16(at + 20, p.active_power as u16);
    f.u8(at + 22, p.active_scale << 6 | p.active_power_work & 0x7);
}

impl IdNs {
    /// The Identify Namespace data structure (CNS 00h).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; IDENTIFY_BYTES];
        let mut f = Fields(&mut b);
        f.u64(0, self.nsze);
        f.u64(8, self.ncap);
        f.u64(16, self.nuse);
        let bytes = [self.nsfeat, self.nlbaf, self.flbas, self.mc, self.dpc, self.dps, self.nmic, self.rescap, self.fpi, self.dlfeat];
        for (i, v) in bytes.into_iter().enumerate() {
            f.u8(24 + i, v);
        }
        let words = [self.nawun, self.nawupf, self.nacwu, self.nabsn, self.nabo, self.nabspf, self.noiob];
        for (i, v) in words.into_iter().enumerate() {
            f.u16(34 + 2 * i, v);
        }
        f.u128(48, self.nvmcap);
        for (i, v) in [self.npwg, self.npwa, self.npdg, self.npda, self.nows, self.mssrl].into_iter().enumerate() {
            f.u16(64 + 2 * i, v);
        }
        f.u32(76, self.mcl);
        f.u8(80, self.msrc);
        f.u8(82, self.nulbaf);
        f.u32(92, self.anagrpid);
        f.u8(99, self.nsattr);
        f.u16(100, self.nvmsetid);
        f.u16(102, self.endgid);
        f.hex(104, 16, &self.nguid);
        f.hex(120, 8, &self.eui64);
        for (i, l) in self.lbafs.iter().take(64).enumerate() {
            f.u16(128 + 4 * i, l.ms);
            f.u8(130 + 4 * i, l.ds);
            f.u8(131 + 4 * i, l.rp & 0x3);
        }
        b
    }
}

impl ControllerView {
    /// Identify with CNS `cns`: the controller's (01h) or namespace `nsid`'s (00h) data
    /// structure. INVALID_NS for a namespace that does not exist, INVALID_FIELD for a CNS
    /// the twin does not return raw.
    pub fn identify(&self, cns: u8, nsid: u32) -> Result<Vec<u8>, Error> {
        match cns {
            CNS_CONTROLLER => Ok(self.id_ctrl.to_bytes()),
            CNS_NAMESPACE => Ok(self.identify_ns(NsId(nsid), false)?.to_bytes()),
            CNS_ALLOCATED_NAMESPACE => Ok(self.identify_ns(NsId(nsid), true)?.to_bytes()),
            _ => fail(Status::InvalidField, format!("Identify CNS {cns:#04x} is not returned raw by the twin (raw: 00h, 01h, 11h)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme::Controller;
    use crate::spec::DriveSpec;

    fn cm6_controller() -> Controller {
        Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap(), 1).unwrap()
    }

    #[test]
    fn identify_controller_fields_sit_at_their_offsets() {
        let c = cm6_controller();
        let id = c.id_ctrl();
        let b = id.to_bytes();
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), id.vid);
        assert_eq!(std::str::from_utf8(&b[24..64]).unwrap().trim_end(), id.mn);
        assert_eq!(b[111], 1, "cntrltype: I/O controller");
        assert_eq!(u128::from_le_bytes(b[280..296].try_into().unwrap()), id.tnvmcap as u128);
        assert_eq!(u32::from_le_bytes(b[516..520].try_into().unwrap()), id.nn);
        assert_eq!(std::str::from_utf8(&b[768..768 + id.subnqn.len()]).unwrap(), id.subnqn);
        assert_eq!(b[263] as usize + 1, id.psds.len());
        assert_eq!(u16::from_le_bytes([b[2048], b[2049]]) as u32, id.psds[0].max_power);
    }

    #[test]
    fn identify_namespace_fields_sit_at_their_offsets() {
        let c = cm6_controller();
        let view = c.view();
        let ns = &view.id_ns["1"];
        let b = view.identify(CNS_NAMESPACE, 1).unwrap();
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), ns.nsze);
        assert_eq!(b[26], ns.flbas);
        assert_eq!(u128::from_le_bytes(b[48..64].try_into().unwrap()), ns.nvmcap as u128);
        assert_eq!(b[128 + 4 * (ns.flbas as usize & 0xF) + 2], ns.lbafs[ns.flbas as usize & 0xF].ds);
        let nguid: String = b[104..120].iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(nguid, ns.nguid);
        assert!(view.identify(CNS_NAMESPACE, 99).is_err());
        assert!(view.identify(0x02, 0).is_err());
    }

    #[test]
    fn an_inactive_nsid_identifies_as_zeros_and_cns_11h_shows_an_allocated_one() {
        // NVMe 1.4 Figure 245: CNS 00h of an inactive NSID (allocated but detached, or not
        // allocated at all) is a zero-filled structure; only an invalid NSID is an error.
        let mut c = cm6_controller();
        let attached = c.view().identify(CNS_NAMESPACE, 1).unwrap();
        c.detach_ns(NsId(1), &[1]).unwrap();
        let view = c.view();
        assert_eq!(view.identify(CNS_NAMESPACE, 1).unwrap(), vec![0u8; IDENTIFY_BYTES]);
        assert_eq!(view.identify(CNS_ALLOCATED_NAMESPACE, 1).unwrap(), attached);
        let nn = view.id_ctrl.nn;
        for cns in [CNS_NAMESPACE, CNS_ALLOCATED_NAMESPACE] {
            assert_eq!(view.identify(cns, 2).unwrap(), vec![0u8; IDENTIFY_BYTES], "an unallocated NSID");
            assert_eq!(view.identify(cns, nn).unwrap(), vec![0u8; IDENTIFY_BYTES]);
            // FFFFFFFFh is the common capabilities for CNS 00h, one namespace's NSID for 11h.
            let broadcast = if cns == CNS_ALLOCATED_NAMESPACE { Some(u32::MAX) } else { None };
            for bad in [0, nn + 1].into_iter().chain(broadcast) {
                let e = view.identify(cns, bad).unwrap_err();
                assert_eq!(e.status(), Some(Status::InvalidNamespaceOrFormat), "{bad}: {e}");
            }
        }
        assert_eq!(view.identify_ns(NsId(1), false).unwrap(), IdNs::zeroed());
    }

    #[test]
    fn the_broadcast_nsid_identifies_the_capabilities_common_to_all_namespaces() {
        // NVMe 1.4 §5.15.2.1: with Namespace Management (OACS bit 3), CNS 00h and NSID
        // FFFFFFFFh return what every namespace can be, with or without namespaces.
        let mut c = cm6_controller();
        assert_eq!(c.id_ctrl().oacs & 0x8, 0x8);
        let one = c.view().id_ns["1"].clone();
        c.detach_ns(NsId(1), &[1]).unwrap();
        c.delete_ns(NsId(1)).unwrap();
        let view = c.view();
        let common = view.identify_ns(NsId(u32::MAX), false).unwrap();
        assert_eq!(
            (common.nlbaf, &common.lbafs, common.mc, common.dpc, common.dlfeat),
            (one.nlbaf, &one.lbafs, one.mc, one.dpc, one.dlfeat)
        );
        assert!(common.lbafs.len() >= 2, "the formats a Create Namespace can pick");
        // Nothing of one namespace: sizes, format in use, identifiers.
        assert_eq!((common.nsze, common.ncap, common.nuse, common.nvmcap, common.flbas, common.nsfeat), (0, 0, 0, 0, 0, 0));
        assert_eq!(common.nguid, "0".repeat(32));
        let b = view.identify(CNS_NAMESPACE, u32::MAX).unwrap();
        assert_eq!(b, common.to_bytes());
        assert_eq!(b[25], common.nlbaf);
        assert_eq!(b[128 + 4 + 2], common.lbafs[1].ds, "LBA format 1's data size");
    }
}
