//! Format NVM and end-to-end data protection (NVMe 1.4 §8.3): a namespace's LBA format with
//! its metadata and protection information, the check a read with PRCHK bits makes, and
//! the vendor command that injects PI errors.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{fmt_formats, Controller, Error, NsId, Status, NSID_ALL, WP_NONE};

/// What Format NVM asks for beyond the LBA format: nvme-cli's `--pi`, `--pil`, `--ms`
/// (1 = extended LBA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtectionRequest {
    pub pi: u8,
    pub pil: bool,
    pub extended: bool,
}

/// A namespace's metadata and end-to-end protection information (NVMe 1.4 §8.3): the
/// metadata bytes per LBA of its format, the PI type (0 none, 1-3), whether the PI is in
/// the first 8 bytes of the metadata (PIL, `dps` bit 3) and whether the metadata travels
/// with each LBA's data (extended LBA, `flbas` bit 4) or in a separate buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    #[serde(default)]
    pub ms: u16,
    #[serde(default)]
    pub pi: u8,
    #[serde(default)]
    pub pil: bool,
    #[serde(default)]
    pub extended: bool,
}

impl Protection {
    pub fn is_none(&self) -> bool {
        *self == Protection::default()
    }

    /// Identify Namespace DPS: the PI type, and bit 3 when the PI is in the first 8 bytes.
    pub fn dps(&self) -> u8 {
        self.pi | (self.pil as u8) << 3
    }

    /// Metadata bytes the host moves with `nlb` blocks: none when the controller inserts
    /// and strips the PI (PRACT = 1) and the metadata is only the PI.
    pub fn host_metadata_bytes(&self, nlb: u64, pract: bool) -> u64 {
        if self.ms == 0 || (pract && self.pi != 0 && self.ms == 8) {
            0
        } else {
            nlb * self.ms as u64
        }
    }
}

/// PRCHK bits of PRINFO (NVMe 1.4 Figure 200): check the guard, application and reference tags.
pub const PRCHK_GUARD: u8 = 4;

pub const PRCHK_APPTAG: u8 = 2;

pub const PRCHK_REFTAG: u8 = 1;

impl Controller {
    /// Format NVM: change the LBA format and erase, keeping no protection information. See
    /// [`Controller::format_with`].
    pub fn format(&mut self, nsid: NsId, lbaf: u8, ses: u8) -> Result<(), Error> {
        self.format_with(nsid, lbaf, ses, ProtectionRequest::default())
    }

    /// Format NVM: change the LBA format (with its metadata and protection information) and
    /// erase. `ses` 0 = no secure erase, 1 = user data erase, 2 = cryptographic erase. Every
    /// variant deallocates all LBAs of the namespace (the twin stores no ciphertext, so a
    /// crypto erase is a purge: mappings dropped) and clears injected PI errors.
    pub fn format_with(&mut self, nsid: NsId, lbaf: u8, ses: u8, req: ProtectionRequest) -> Result<(), Error> {
        let nsid = nsid.0;
        self.check_not_sanitizing()?;
        if ses > 2 {
            return fail(Status::InvalidField, format!("ses {ses}: must be 0 (none), 1 (user data erase) or 2 (cryptographic erase)"));
        }
        let formats = self.spec.lba_formats();
        let Some(&(new_lba, ms)) = formats.get(lbaf as usize) else {
            return fail(Status::InvalidFormat, format!("LBA format {lbaf} is not supported; formats: {}", fmt_formats(&formats)));
        };
        let protection = self.check_protection(lbaf, ms, req)?;
        let ids: Vec<u32> =
            if nsid == NSID_ALL { self.st.namespaces.keys().copied().collect() } else { vec![self.namespace_u32(nsid)?.nsid] };
        for id in &ids {
            let ns = &self.st.namespaces[id];
            if ns.write_protect != WP_NONE {
                return fail(Status::NamespaceWriteProtected, format!("namespace {id} is write protected"));
            }
            // Checked before anything changes: a namespace smaller than one block of the new
            // format would be left with no blocks at all.
            if ns.bytes() < new_lba as u64 {
                return fail(
                    Status::InvalidFormat,
                    format!("namespace {id} has {} bytes, less than one {new_lba}-byte block of LBA format {lbaf}; choose a smaller format or a bigger namespace", ns.bytes()),
                );
            }
        }
        for id in ids {
            let chunks = self.st.namespaces[&id].chunks.clone();
            self.deallocate_chunks(&chunks)?;
            self.repair_media(id, None);
            if ses == 2 {
                self.change_media_key(id); // only this namespace's key changes
            }
            let ns = self.st.namespaces.get_mut(&id).expect("exists");
            let bytes = ns.bytes();
            ns.flbas = lbaf;
            ns.lba_bytes = new_lba;
            ns.nsze = bytes / new_lba as u64;
            ns.protection = protection;
        }
        Ok(())
    }

    /// The protection a format request asks for, or the status that refuses it: a PI type
    /// the drive does not support, PI without 8 bytes of metadata, or PIL/MSET on a format
    /// without metadata.
    fn check_protection(&self, lbaf: u8, ms: u16, req: ProtectionRequest) -> Result<Protection, Error> {
        let types = self.spec.pi_types();
        if req.pi > 3 {
            return fail(Status::InvalidField, format!("pi {}: must be 0 (none), 1, 2 or 3", req.pi));
        }
        if req.pi != 0 && !types.contains(&req.pi) {
            let offered = if types.is_empty() { "none".to_string() } else { format!("{types:?}") };
            return fail(
                Status::InvalidFormat,
                format!("protection information type {} is not supported (supported types: {offered})", req.pi),
            );
        }
        if req.pi != 0 && ms < 8 {
            return fail(
                Status::InvalidFormat,
                format!("protection information needs at least 8 bytes of metadata; LBA format {lbaf} has {ms}"),
            );
        }
        Ok(Protection { ms, pi: req.pi, pil: req.pi != 0 && req.pil, extended: ms != 0 && req.extended })
    }

    /// Vendor command (error injection): corrupt the stored protection information of LBA
    /// `lba` so that the tags in `tags` (PRCHK bits) no longer match, as a misdirected write
    /// or a firmware fault would. The next read that checks one of them fails with its
    /// end-to-end status; a write of the LBA stores fresh PI.
    pub fn inject_pi_error(&mut self, nsid: NsId, lba: u64, tags: u8) -> Result<(), Error> {
        let ns = self.attached_u32(nsid.0)?;
        if ns.protection.pi == 0 {
            return fail(
                Status::InvalidField,
                format!("namespace {} is formatted without protection information (format it with --pi 1, 2 or 3)", nsid.0),
            );
        }
        Self::check_range(ns, lba, 1)?;
        if tags == 0 || tags > 7 {
            return fail(
                Status::InvalidField,
                format!("tags {tags}: a mask of guard (4), application tag (2) and reference tag (1), 1..=7"),
            );
        }
        *self.st.pi_errors.entry(nsid.0).or_default().entry(lba).or_insert(0) |= tags;
        Ok(())
    }

    /// [`Controller::check_pi`] as a command of its own (the Python API's): the namespace
    /// attached, the LBAs inside it, `prchk` a mask of the three checks. The I/O paths check
    /// the read first and call `check_pi` itself.
    pub fn check_pi_command(&self, nsid: NsId, slba: u64, nlb: u64, prchk: u8) -> Result<(), Error> {
        Self::check_range(self.attached_u32(nsid.0)?, slba, nlb)?;
        if prchk > PRCHK_GUARD | PRCHK_APPTAG | PRCHK_REFTAG {
            return fail(
                Status::InvalidField,
                format!("prchk {prchk}: a mask of guard (4), application tag (2) and reference tag (1), 0..=7"),
            );
        }
        self.check_pi(nsid, slba, nlb, prchk)
    }

    /// The end-to-end check of a read with PRCHK bits `prchk`: the first LBA in range whose
    /// stored PI fails a checked tag gives the command its status (guard first, then
    /// application tag, then reference tag; a type 3 namespace has no reference tag to check).
    pub fn check_pi(&self, nsid: NsId, slba: u64, nlb: u64, prchk: u8) -> Result<(), Error> {
        let Some(bad) = self.st.pi_errors.get(&nsid.0) else { return Ok(()) };
        let Some(ns) = self.st.namespaces.get(&nsid.0) else { return Ok(()) };
        let prchk = if ns.protection.pi == 3 { prchk & !PRCHK_REFTAG } else { prchk };
        for (&lba, &tags) in bad.range(slba..slba.saturating_add(nlb)) {
            let hit = tags & prchk;
            let (status, tag) = match () {
                _ if hit & PRCHK_GUARD != 0 => (Status::GuardCheck, "guard"),
                _ if hit & PRCHK_APPTAG != 0 => (Status::AppTagCheck, "application tag"),
                _ if hit & PRCHK_REFTAG != 0 => (Status::RefTagCheck, "reference tag"),
                _ => continue,
            };
            return fail(status, format!("namespace {} LBA {lba}: the stored protection information's {tag} does not match", nsid.0));
        }
        Ok(())
    }
}
