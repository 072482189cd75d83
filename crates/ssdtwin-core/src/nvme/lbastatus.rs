//! Rebuild assist (NVMe 1.4 Get LBA Status, opcode 86h): LBA ranges the drive knows to be
//! unrecoverable, reported so a host (a RAID or a replicated store) rebuilds only those.
//! The twin has no media-error model, so a vendor command injects the ranges (`ssdtwin nvme
//! inject-media-error`); reads of them fail with Unrecovered Read Error (and count in SMART's
//! media errors) until the host writes or deallocates them (the data then lives on good
//! media), or the namespace is formatted or deleted.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{Controller, ControllerState, Error, NsId, Status};

/// Action types of Get LBA Status: report potentially unrecoverable LBAs after a scan
/// (10h), or the tracked ones only (11h). The twin tracks every one, so both report the same.
pub const ATYPE_SCAN: u8 = 0x10;
pub const ATYPE_TRACKED: u8 = 0x11;

/// One LBA Status Descriptor, nvme-cli `get-lba-status -o json` form (hex strings).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LbaStatusDesc {
    pub dslba: u64,
    pub nlb: u32,
}

/// The LBA Status Descriptor list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LbaStatus {
    pub nlsd: u32,
    /// Completion condition: 1 stopped at MNDW (more descriptors left), 2 the whole range.
    pub cmpc: u8,
    pub descs: Vec<LbaStatusDesc>,
}

/// Ranges of `[slba, slba + nlb)` sorted, disjoint, within namespaces that exist.
pub(super) fn check_unrecoverable(st: &ControllerState) -> Result<(), String> {
    for (id, ranges) in &st.unrecoverable {
        let Some(ns) = st.namespaces.get(id) else {
            return Err(format!("unrecoverable LBAs recorded for namespace {id}, which does not exist"));
        };
        let mut end = 0;
        for &(s, n) in ranges {
            if n == 0 || s < end || s.checked_add(n).is_none_or(|e| e > ns.nsze) {
                return Err(format!("namespace {id}: unrecoverable range {s}+{n} overlaps, is empty or passes the end"));
            }
            end = s + n;
        }
    }
    Ok(())
}

/// `ranges` less `[s, e)`.
fn cut(ranges: &[(u64, u64)], s: u64, e: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for &(a, n) in ranges {
        let b = a + n;
        if b <= s || a >= e {
            out.push((a, n));
            continue;
        }
        if a < s {
            out.push((a, s - a));
        }
        if b > e {
            out.push((e, b - e));
        }
    }
    out
}

impl Controller {
    /// The vendor command: mark `nlb` blocks at `slba` of namespace `nsid` unrecoverable.
    pub fn inject_media_error(&mut self, nsid: NsId, slba: u64, nlb: u64) -> Result<(), Error> {
        let ns = self.namespace(nsid)?;
        if ns.dram {
            return fail(Status::InvalidField, format!("namespace {} is a DRAM namespace: it has no NAND to fail", nsid.0));
        }
        if nlb == 0 {
            return fail(Status::InvalidField, "a media error covers at least 1 block");
        }
        Self::check_range(ns, slba, nlb)?;
        let mut ranges = cut(self.st.unrecoverable.get(&nsid.0).map_or(&[][..], |v| v), slba, slba + nlb);
        ranges.push((slba, nlb));
        ranges.sort_unstable();
        // Merge touching ranges so the descriptors are as few as the host needs.
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (s, n) in ranges {
            match merged.last_mut() {
                Some((ms, mn)) if *ms + *mn == s => *mn += n,
                _ => merged.push((s, n)),
            }
        }
        self.st.unrecoverable.insert(nsid.0, merged);
        Ok(())
    }

    /// A read of `[slba, slba + nlb)` of namespace `nsid` meets an unrecoverable block.
    #[inline]
    pub(super) fn check_media(&mut self, nsid: u32, slba: u64, nlb: u64) -> Result<(), Error> {
        if self.st.unrecoverable.is_empty() {
            return Ok(());
        }
        let e = slba + nlb;
        let Some(&(s, n)) = self.st.unrecoverable.get(&nsid).and_then(|v| v.iter().find(|&&(s, n)| s < e && s + n > slba)) else {
            return Ok(());
        };
        self.st.smart.media_errors += 1;
        if let Some(set) = self.nand_set_of(nsid) {
            self.st.set_commands[set].media_errors += 1;
        }
        fail(
            Status::UnrecoveredReadError,
            format!(
                "namespace {nsid}: LBAs {s}..{} are unrecoverable (nvme get-lba-status lists them; writing them again repairs them)",
                s + n - 1
            ),
        )
    }

    /// A write or deallocation of `[slba, slba + nlb)` (or a whole namespace with `None`:
    /// format, delete, sanitize) replaces what was injected there: unrecoverable blocks and
    /// corrupted protection information.
    #[inline(always)]
    pub(super) fn repair_media(&mut self, nsid: u32, range: Option<(u64, u64)>) {
        // Nothing injected (every write of a normal run): two checks at the call site.
        if !self.st.pi_errors.is_empty() || !self.st.unrecoverable.is_empty() {
            self.repair_injected(nsid, range);
        }
    }

    #[cold]
    fn repair_injected(&mut self, nsid: u32, range: Option<(u64, u64)>) {
        if !self.st.pi_errors.is_empty() {
            self.repair_pi(nsid, range);
        }
        if self.st.unrecoverable.is_empty() {
            return;
        }
        let Some(v) = self.st.unrecoverable.get(&nsid) else { return };
        let left = match range {
            Some((s, n)) => cut(v, s, s + n),
            None => Vec::new(),
        };
        if left.is_empty() {
            self.st.unrecoverable.remove(&nsid);
        } else {
            self.st.unrecoverable.insert(nsid, left);
        }
    }

    /// Fresh protection information for the LBAs of `range` (all with `None`).
    fn repair_pi(&mut self, nsid: u32, range: Option<(u64, u64)>) {
        let Some(bad) = self.st.pi_errors.get_mut(&nsid) else { return };
        match range {
            Some((s, n)) => bad.retain(|&l, _| l < s || l >= s.saturating_add(n)),
            None => bad.clear(),
        }
        if bad.is_empty() {
            self.st.pi_errors.remove(&nsid);
        }
    }

    /// Get LBA Status: the unrecoverable ranges of namespace `nsid` overlapping `rl` blocks
    /// from `slba` (0: to the end), at most what `mndw + 1` dwords hold (an 8-byte header,
    /// 16 bytes a descriptor).
    pub fn get_lba_status(&self, nsid: NsId, slba: u64, mndw: u32, atype: u8, rl: u16) -> Result<LbaStatus, Error> {
        let ns = self.namespace(nsid)?;
        if atype != ATYPE_SCAN && atype != ATYPE_TRACKED {
            return fail(Status::InvalidField, format!("action type {atype:#x}: must be 0x10 (scan and report) or 0x11 (tracked LBAs)"));
        }
        if slba >= ns.nsze {
            return fail(Status::LbaOutOfRange, format!("starting LBA {slba}: namespace {} has {} blocks", nsid.0, ns.nsze));
        }
        let end = if rl == 0 { ns.nsze } else { (slba + rl as u64).min(ns.nsze) };
        let max = ((mndw as u64 + 1) * 4).saturating_sub(8) / 16;
        let all: Vec<LbaStatusDesc> = self
            .st
            .unrecoverable
            .get(&nsid.0)
            .map_or(&[][..], |v| v)
            .iter()
            .filter(|&&(s, n)| s < end && s + n > slba)
            .map(|&(s, n)| LbaStatusDesc { dslba: s, nlb: n.min(u32::MAX as u64) as u32 })
            .collect();
        let cmpc = if all.len() as u64 > max { 1 } else { 2 };
        let descs: Vec<LbaStatusDesc> = all.into_iter().take(max as usize).collect();
        Ok(LbaStatus { nlsd: descs.len() as u32, cmpc, descs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nand::NoTiming;
    use crate::spec::DriveSpec;

    #[test]
    fn injected_ranges_fail_reads_are_reported_and_repaired_by_writes() {
        let mut c = Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap(), 1).unwrap();
        c.write(NsId(1), 0, 4096, &mut NoTiming).unwrap();
        c.inject_media_error(NsId(1), 100, 8).unwrap();
        c.inject_media_error(NsId(1), 108, 8).unwrap(); // merges
        c.inject_media_error(NsId(1), 1000, 1).unwrap();
        let st = c.get_lba_status(NsId(1), 0, 1023, ATYPE_TRACKED, 0).unwrap();
        assert_eq!((st.nlsd, st.cmpc), (2, 2));
        assert_eq!(st.descs[0], LbaStatusDesc { dslba: 100, nlb: 16 });
        // Room for one descriptor only (mndw 5: 24 bytes), and a range that excludes the second.
        assert_eq!(c.get_lba_status(NsId(1), 0, 5, ATYPE_SCAN, 0).unwrap().cmpc, 1);
        assert_eq!(c.get_lba_status(NsId(1), 0, 1023, ATYPE_SCAN, 200).unwrap().nlsd, 1);
        let e = c.read(NsId(1), 96, 8, &mut NoTiming).unwrap_err();
        assert_eq!(e.status(), Some(Status::UnrecoveredReadError));
        assert_eq!(c.state().smart.media_errors, 1);
        c.read(NsId(1), 0, 100, &mut NoTiming).unwrap();
        // The host rebuilds 104..108 from a replica: the range splits around it.
        c.write(NsId(1), 104, 4, &mut NoTiming).unwrap();
        let st = c.get_lba_status(NsId(1), 0, 1023, ATYPE_TRACKED, 0).unwrap();
        assert_eq!(st.descs.iter().map(|d| (d.dslba, d.nlb)).collect::<Vec<_>>(), vec![(100, 4), (108, 8), (1000, 1)]);
        c.read(NsId(1), 104, 4, &mut NoTiming).unwrap();
        c.deallocate(NsId(1), 96, 32).unwrap();
        c.check_state().unwrap();
        c.format(NsId(1), 0, 0).unwrap();
        assert_eq!(c.get_lba_status(NsId(1), 0, 1023, ATYPE_TRACKED, 0).unwrap().nlsd, 0);
        c.check_state().unwrap();
    }

    #[test]
    fn bad_lba_status_requests_carry_their_status() {
        let mut c = Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap(), 1).unwrap();
        let n = c.namespace(NsId(1)).unwrap().nsze;
        assert_eq!(c.inject_media_error(NsId(1), n - 1, 2).unwrap_err().status(), Some(Status::LbaOutOfRange));
        assert_eq!(c.inject_media_error(NsId(2), 0, 1).unwrap_err().status(), Some(Status::InvalidNamespaceOrFormat));
        assert_eq!(c.get_lba_status(NsId(1), 0, 100, 0x12, 0).unwrap_err().status(), Some(Status::InvalidField));
        assert_eq!(c.get_lba_status(NsId(1), n, 100, ATYPE_SCAN, 0).unwrap_err().status(), Some(Status::LbaOutOfRange));
    }
}
