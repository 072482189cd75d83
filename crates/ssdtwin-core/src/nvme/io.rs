//! The I/O commands (Read, Write, Dataset Management deallocate) and the checks before them:
//! a namespace's LBAs become IUs of the FTL's logical space with a sector mask, one FTL call
//! per IU; failed commands enter the Error Information log. Idle-time GC is here too: it is
//! what the drive does between commands.

use serde::{Deserialize, Serialize};

use super::logs;
use super::status::fail;
use super::{Controller, Error, Namespace, NsId, Protection, Status, CONTROLLER_ID, ERROR_LOG_ENTRIES, WP_NONE};
use crate::ftl::{Ftl, FtlConfig, ReadSource};
use crate::nand::NandSink;
use crate::units::LogicalIu;

/// What the timing needs of a namespace before a command reaches the FTL: the command
/// processor's time (protection), the bytes on the link, the buffer share (set), the DRAM path.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NsTiming {
    pub lba_bytes: u32,
    pub protection: Protection,
    pub nvm_set: u32,
    pub dram: bool,
}

impl NsTiming {
    #[inline(always)]
    fn of(ns: &Namespace) -> NsTiming {
        NsTiming { lba_bytes: ns.lba_bytes, protection: ns.protection, nvm_set: ns.nvm_set, dram: ns.dram }
    }
}

/// A namespace's chunk table and the shifts that find an I/O's L2P entry, copied once per
/// job clone ([`Controller::prefetch_handle`]): a drawn-ahead I/O's prefetch then needs no
/// search of the namespaces' map, which was most of its cost (about 30 instructions per
/// I/O). A copy cannot go stale during a timed run: the run holds the controller for its
/// whole length and sends it I/O commands only, which change no namespace. Were it stale
/// anyway, it would fetch the wrong line, nothing more: a prefetch changes no state, and
/// the entry's index is checked against the map.
#[derive(Clone, Debug, Default)]
pub struct NsPrefetch {
    iu_shift: u32,
    chunk_shift: u32,
    chunks: Box<[u32]>,
}

impl NsPrefetch {
    /// The FTL's IU holding byte `offset` of the namespace (`None` past its chunks).
    #[inline(always)]
    pub fn iu(&self, offset: u64) -> Option<LogicalIu> {
        Namespace::chunk_iu(&self.chunks, offset >> self.iu_shift, self.chunk_shift)
    }
}

/// Summary of a host read for callers that time it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSummary {
    pub nand_ius: u32,
    pub buffer_ius: u32,
    pub unmapped_ius: u32,
}

impl ReadSummary {
    #[inline(always)]
    fn count(&mut self, source: ReadSource) {
        match source {
            ReadSource::Nand { .. } => self.nand_ius += 1,
            ReadSource::Buffer => self.buffer_ius += 1,
            ReadSource::Unmapped => self.unmapped_ius += 1,
        }
    }
}

impl Controller {
    /// The namespace, if it exists and is attached (I/O needs both).
    pub fn attached(&self, nsid: NsId) -> Result<&Namespace, Error> {
        self.attached_u32(nsid.0)
    }

    #[inline]
    pub(super) fn attached_u32(&self, nsid: u32) -> Result<&Namespace, Error> {
        let ns = self.namespace_u32(nsid)?;
        if !ns.attached {
            return Self::not_attached(nsid);
        }
        Ok(ns)
    }

    #[cold]
    fn not_attached<T>(nsid: u32) -> Result<T, Error> {
        fail(Status::InvalidNamespaceOrFormat, format!("namespace {nsid} is not attached to controller {CONTROLLER_ID}"))
    }

    /// Whether a Write or a Deallocate of `[slba, slba+nlb)` on `nsid` would be accepted
    /// (attached, not write protected, in range), without doing it: the server asks before
    /// it touches a namespace's data file, so a refused command leaves the data as it was.
    pub fn check_write(&self, nsid: NsId, slba: u64, nlb: u64) -> Result<&Namespace, Error> {
        self.check_write_u32(nsid.0, slba, nlb)
    }

    #[inline]
    fn check_write_u32(&self, nsid: u32, slba: u64, nlb: u64) -> Result<&Namespace, Error> {
        self.check_not_sanitizing()?;
        let ns = self.attached_u32(nsid)?;
        Self::check_writable(ns, slba, nlb)?;
        Ok(ns)
    }

    /// The checks of a Write or a Deallocate on an attached namespace: not write protected,
    /// in range.
    #[inline]
    fn check_writable(ns: &Namespace, slba: u64, nlb: u64) -> Result<(), Error> {
        if ns.write_protect != WP_NONE {
            return Self::write_protected(ns.nsid);
        }
        Self::check_range(ns, slba, nlb)
    }

    #[cold]
    fn write_protected<T>(nsid: u32) -> Result<T, Error> {
        fail(Status::NamespaceWriteProtected, format!("namespace {nsid} is write protected"))
    }

    /// The error [`Controller::attached`] gives for `nsid` (absent or not attached).
    #[cold]
    fn not_attached_error(&self, nsid: u32) -> Error {
        match self.attached_u32(nsid) {
            Err(e) => e,
            Ok(_) => unreachable!("namespace {nsid} is attached"),
        }
    }

    pub(super) fn check_range(ns: &Namespace, slba: u64, nlb: u64) -> Result<(), Error> {
        if nlb == 0 || slba.checked_add(nlb).is_none_or(|e| e > ns.nsze) {
            return fail(Status::LbaOutOfRange, format!("LBAs {slba}+{nlb} outside namespace {} (0..{})", ns.nsid, ns.nsze));
        }
        Ok(())
    }

    /// A Read of `[slba, slba+nlb)` on `nsid` would be accepted (no sanitize running,
    /// attached, in range).
    #[inline]
    fn check_read(&self, nsid: u32, slba: u64, nlb: u64) -> Result<&Namespace, Error> {
        self.check_not_sanitizing()?;
        let ns = self.attached_u32(nsid)?;
        Self::check_range(ns, slba, nlb)?;
        Ok(ns)
    }

    /// Record an I/O command that completed with an error status in the Error Information
    /// log (and SMART's error count), and hand the error back.
    #[cold]
    pub fn log_io_error(&mut self, e: Error, opcode: u8, nsid: u32, slba: u64) -> Error {
        if let Some(status) = e.status() {
            if let Some(set) = self.nand_set_of(nsid) {
                self.st.set_commands[set].error_log_entries += 1;
            }
            let smart = &mut self.st.smart;
            smart.error_log_entries += 1;
            let n = smart.error_log_entries;
            let cmdid = (smart.host_read_commands + smart.host_write_commands) as u16;
            self.st.error_log.insert(0, logs::entry(n, status, opcode, nsid, slba, cmdid));
            self.st.error_log.truncate(ERROR_LOG_ENTRIES);
        }
        e
    }

    /// The NVM Set (0-based) of NAND namespace `nsid` on a drive with sets: where its
    /// commands' errors count for its Endurance Group's log. None for a DRAM namespace (in
    /// no set), an NSID with no namespace, and on a drive without sets.
    pub(super) fn nand_set_of(&self, nsid: u32) -> Option<usize> {
        let ns = self.st.namespaces.get(&nsid).filter(|ns| !ns.dram)?;
        let set = ns.nvm_set as usize;
        (set < self.st.set_commands.len()).then_some(set)
    }

    /// Call `f(global IU, sector mask)` for each IU that `[slba, slba+nlb)` touches.
    #[inline]
    pub(super) fn for_each_iu(cfg: &FtlConfig, ns: &Namespace, slba: u64, nlb: u64, mut f: impl FnMut(LogicalIu, u128)) {
        // IU and sector sizes are powers of two (the spec validates it): shifts, not divides.
        let iu_shift = cfg.iu_bytes.trailing_zeros();
        let iu = 1u64 << iu_shift;
        let b0 = slba * ns.lba_bytes as u64;
        let b1 = b0 + nlb * ns.lba_bytes as u64;
        let shift = cfg.chunk_shift;
        let mut ns_iu = b0 >> iu_shift;
        let last = (b1 - 1) >> iu_shift;
        while ns_iu <= last {
            let start = ns_iu << iu_shift;
            let mask = iu_sectors(b0, b1, start, iu, cfg.full_mask);
            f(ns.global_iu(ns_iu, shift).expect("range checked by the caller"), mask);
            ns_iu += 1;
        }
    }

    /// The namespace and the loaded FTL, borrowed together (no copy of the chunk list on
    /// the I/O path).
    #[inline]
    fn ns_and_ftl(&mut self, nsid: u32) -> Result<(&Namespace, &mut Ftl, &FtlConfig), Error> {
        self.ftl()?;
        let ns = self.st.namespaces.get(&nsid).expect("checked by the caller");
        Ok((ns, self.ftl.as_mut().expect("loaded"), &self.cfg))
    }

    /// What [`Controller::prefetch_at`] needs to prefetch the L2P lines of namespace
    /// `nsid`'s I/Os (nothing, for a namespace that does not exist or has no chunks).
    pub fn prefetch_handle(&self, nsid: NsId) -> NsPrefetch {
        match self.st.namespaces.get(&nsid.0) {
            Some(ns) => NsPrefetch {
                iu_shift: self.cfg.iu_bytes.trailing_zeros(),
                chunk_shift: self.cfg.chunk_shift,
                chunks: ns.chunks.clone().into_boxed_slice(),
            },
            None => NsPrefetch::default(),
        }
    }

    /// Hint that the I/O at byte `offset` of the namespace `h` was made for comes soon: fetch
    /// its first L2P entry into cache (only when the maps are loaded; a no-op past the
    /// namespace's chunks, whose I/O reports the error). The handle spares the namespace
    /// look-up per I/O.
    #[inline(always)]
    pub fn prefetch_at(&self, h: &NsPrefetch, offset: u64) {
        if let (Some(ftl), Some(iu)) = (self.ftl.as_ref(), h.iu(offset)) {
            ftl.prefetch(iu);
        }
    }

    /// A Write command as the timed engine issues it, with one look-up of the namespace:
    /// what [`Controller::attached`] then [`Controller::write`] do, in that order, with
    /// `place` called in between to time the command's way to the FTL from the namespace's
    /// [`NsTiming`] and to give the sink its NAND operations go to (returned). A namespace
    /// that does not exist or is not attached fails before `place`, unlogged, as
    /// `attached` does; every later check fails as `write` does, logged.
    #[inline]
    pub fn write_timed<S: NandSink>(&mut self, nsid: NsId, slba: u64, nlb: u64, place: impl FnOnce(NsTiming) -> S) -> Result<S, Error> {
        let id = nsid.0;
        let Some(ns) = self.st.namespaces.get(&id).filter(|ns| ns.attached) else { return Err(self.not_attached_error(id)) };
        let info = NsTiming::of(ns);
        let mut sink = place(info);
        if info.dram || self.ftl.is_none() {
            // The general path (checks again, in the same order; loads the maps).
            self.write(nsid, slba, nlb, &mut sink)?;
            return Ok(sink);
        }
        // `write`'s checks but the namespace's: it exists and is attached (above).
        let checked = self.check_ana_io(id).and_then(|_| self.check_not_sanitizing()).and_then(|_| Self::check_writable(ns, slba, nlb));
        if let Err(e) = checked {
            return Err(self.log_io_error(e, logs::OPC_WRITE, id, slba));
        }
        let ftl = self.ftl.as_mut().expect("loaded");
        Self::for_each_iu(&self.cfg, ns, slba, nlb, |iu, mask| ftl.write(iu, mask, &mut sink));
        self.after_write(id, info.nvm_set as usize, slba, nlb, nlb * info.lba_bytes as u64);
        Ok(sink)
    }

    /// Write command: `nlb` blocks at `slba` of namespace `nsid`.
    pub fn write<S: NandSink>(&mut self, nsid: NsId, slba: u64, nlb: u64, sink: &mut S) -> Result<(), Error> {
        let nsid = nsid.0;
        if let Err(e) = self.check_ana_io(nsid) {
            return Err(self.log_io_error(e, logs::OPC_WRITE, nsid, slba));
        }
        let ns = match self.check_write_u32(nsid, slba, nlb) {
            Ok(ns) => ns,
            Err(e) => return Err(self.log_io_error(e, logs::OPC_WRITE, nsid, slba)),
        };
        let bytes = nlb * ns.lba_bytes as u64;
        if ns.dram {
            self.st.smart.dram_write_bytes += bytes;
            self.st.smart.host_write_commands += 1;
            self.st.smart.data_units_written_512 += bytes / 512;
            return Ok(());
        }
        let set = ns.nvm_set as usize;
        let (ns, ftl, cfg) = self.ns_and_ftl(nsid)?;
        Self::for_each_iu(cfg, ns, slba, nlb, |iu, mask| ftl.write(iu, mask, sink));
        self.after_write(nsid, set, slba, nlb, bytes);
        Ok(())
    }

    /// The counters and follow-ups of a Write of `bytes` to NAND that the FTL has taken.
    #[inline(always)]
    fn after_write(&mut self, nsid: u32, set: usize, slba: u64, nlb: u64, bytes: u64) {
        self.st.smart.host_write_commands += 1;
        if let Some(c) = self.st.set_commands.get_mut(set) {
            c.host_write_commands += 1;
        }
        self.st.smart.data_units_written_512 += bytes / 512;
        self.repair_media(nsid, Some((slba, nlb)));
        if !self.st.plm.is_empty() {
            self.plm_after_write(set as u32);
        }
    }

    /// A Read command as the timed engine issues it, with one look-up of the namespace:
    /// [`Controller::attached`] then [`Controller::read`], with `place` called in between
    /// (see [`Controller::write_timed`]); returns the sink and the read's summary.
    #[inline]
    pub fn read_timed<S: NandSink>(
        &mut self,
        nsid: NsId,
        slba: u64,
        nlb: u64,
        place: impl FnOnce(NsTiming) -> S,
    ) -> Result<(S, ReadSummary), Error> {
        let id = nsid.0;
        let Some(ns) = self.st.namespaces.get(&id).filter(|ns| ns.attached) else { return Err(self.not_attached_error(id)) };
        let info = NsTiming::of(ns);
        let mut sink = place(info);
        if info.dram || self.ftl.is_none() || !self.st.unrecoverable.is_empty() {
            // The general path (checks again, in the same order; media errors; loads the maps).
            let sum = self.read(nsid, slba, nlb, &mut sink)?;
            return Ok((sink, sum));
        }
        // `read`'s checks but the namespace's: it exists and is attached (above).
        let checked = self.check_ana_io(id).and_then(|_| self.check_not_sanitizing()).and_then(|_| Self::check_range(ns, slba, nlb));
        if let Err(e) = checked {
            return Err(self.log_io_error(e, logs::OPC_READ, id, slba));
        }
        let ftl = self.ftl.as_mut().expect("loaded");
        let mut sum = ReadSummary::default();
        Self::for_each_iu(&self.cfg, ns, slba, nlb, |iu, mask| sum.count(ftl.read(iu, mask, &mut sink)));
        self.after_read(info.nvm_set as usize, nlb * info.lba_bytes as u64);
        Ok((sink, sum))
    }

    /// Read command.
    pub fn read<S: NandSink>(&mut self, nsid: NsId, slba: u64, nlb: u64, sink: &mut S) -> Result<ReadSummary, Error> {
        let nsid = nsid.0;
        if let Err(e) = self.check_ana_io(nsid) {
            return Err(self.log_io_error(e, logs::OPC_READ, nsid, slba));
        }
        let ns = match self.check_read(nsid, slba, nlb) {
            Ok(ns) => ns,
            Err(e) => return Err(self.log_io_error(e, logs::OPC_READ, nsid, slba)),
        };
        let bytes = nlb * ns.lba_bytes as u64;
        if ns.dram {
            self.st.smart.dram_read_bytes += bytes;
            self.st.smart.host_read_commands += 1;
            self.st.smart.data_units_read_512 += bytes / 512;
            return Ok(ReadSummary::default());
        }
        let set = ns.nvm_set as usize;
        if let Err(e) = self.check_media(nsid, slba, nlb) {
            return Err(self.log_io_error(e, logs::OPC_READ, nsid, slba));
        }
        let (ns, ftl, cfg) = self.ns_and_ftl(nsid)?;
        let mut sum = ReadSummary::default();
        Self::for_each_iu(cfg, ns, slba, nlb, |iu, mask| sum.count(ftl.read(iu, mask, sink)));
        self.after_read(set, bytes);
        Ok(sum)
    }

    /// The counters of a Read of `bytes` the FTL has served.
    #[inline]
    fn after_read(&mut self, set: usize, bytes: u64) {
        self.st.smart.host_read_commands += 1;
        self.st.smart.data_units_read_512 += bytes / 512;
        if let Some(c) = self.st.set_commands.get_mut(set) {
            c.host_read_commands += 1;
        }
    }

    /// `commands` Read commands of `nlb` blocks in all on `nsid`, counted as reads served
    /// from NAND (SMART, the set's and the FTL's read counters) without being carried out:
    /// a read changes no mapping, so the fast-forward of a converging timed run
    /// (engine/fio/converge.rs) counts the reads of clones that only read instead of drawing
    /// and looking up each one.
    pub fn count_reads(&mut self, nsid: NsId, commands: u64, nlb: u64) -> Result<(), Error> {
        let nsid = nsid.0;
        let ns = self.check_read(nsid, 0, 1)?;
        let bytes = nlb * ns.lba_bytes as u64;
        let (dram, set) = (ns.dram, ns.nvm_set as usize);
        if dram {
            self.st.smart.dram_read_bytes += bytes;
        } else {
            self.ftl()?.count_host_reads(set, bytes);
        }
        self.st.smart.host_read_commands += commands;
        self.st.smart.data_units_read_512 += bytes / 512;
        if let Some(c) = self.st.set_commands.get_mut(set) {
            c.host_read_commands += commands;
        }
        Ok(())
    }

    /// Dataset Management - deallocate. Whole IUs inside the range are deallocated; the
    /// partial IUs at its edges keep their data (deallocation is advisory in NVMe).
    /// Returns the number of IUs deallocated.
    pub fn deallocate(&mut self, nsid: NsId, slba: u64, nlb: u64) -> Result<u64, Error> {
        let nsid = nsid.0;
        if let Err(e) = self.check_ana_io(nsid) {
            return Err(self.log_io_error(e, logs::OPC_DSM, nsid, slba));
        }
        let dram = match self.check_write_u32(nsid, slba, nlb) {
            Ok(ns) => ns.dram,
            Err(e) => return Err(self.log_io_error(e, logs::OPC_DSM, nsid, slba)),
        };
        if dram {
            return Ok(0); // nothing on NAND to deallocate
        }
        let (ns, ftl, cfg) = self.ns_and_ftl(nsid)?;
        let mut n = 0;
        let full = cfg.full_mask;
        Self::for_each_iu(cfg, ns, slba, nlb, |iu, mask| {
            if mask == full {
                ftl.deallocate(iu);
                n += 1;
            }
        });
        self.repair_media(nsid, Some((slba, nlb)));
        Ok(n)
    }

    /// Background GC while the host is idle: collect victims until the free pool reaches its
    /// idle target, moving at most `max_moves` valid IUs (the engine asks for one program
    /// unit at a time so it can time each). Returns how many IUs moved; 0 with no NAND
    /// operation emitted means there is nothing left to do.
    pub fn idle_gc<S: NandSink>(&mut self, max_moves: u64, sink: &mut S) -> Result<u64, Error> {
        Ok(self.ftl()?.background_gc(Ftl::BACKGROUND_FREE_TARGET, max_moves, sink))
    }
}

/// The sectors of the IU at byte `start` (`iu` bytes, `full` its whole mask) that the bytes
/// `[b0, b1)` cover. A whole IU (every aligned I/O of an IU or more) is `full`, which is
/// `sector_mask(0, sectors per IU)`, without the mask's u128 shifts (about 20 instructions).
#[inline(always)]
fn iu_sectors(b0: u64, b1: u64, start: u64, iu: u64, full: u128) -> u128 {
    if b0 <= start && start + iu <= b1 {
        return full;
    }
    let s0 = (b0.max(start) - start) >> 9;
    let s1 = (b1.min(start + iu) - start) >> 9;
    sector_mask(s0 as u32, s1 as u32, full)
}

#[inline]
fn sector_mask(s0: u32, s1: u32, full: u128) -> u128 {
    let n = s1 - s0;
    if n >= 128 {
        return full;
    }
    ((1u128 << n) - 1) << s0
}

#[cfg(test)]
mod tests {
    use super::{iu_sectors, sector_mask};

    /// The whole-IU shortcut gives what the sector arithmetic gives, for IUs of 4 KiB to
    /// 64 KiB (up to the full u128) and ranges starting and ending inside, at or around them.
    #[test]
    fn whole_iu_shortcut_matches_the_sector_mask() {
        for iu in [4096u64, 16384, 65536] {
            let spi = (iu / 512) as u32;
            let full = if spi >= 128 { u128::MAX } else { (1u128 << spi) - 1 };
            let start = 3 * iu;
            for b0 in (start - iu..start + iu).step_by(512) {
                for b1 in (b0 + 512..=start + 2 * iu).step_by(512) {
                    if b1 <= start || b0 >= start + iu {
                        continue; // the IU is not touched
                    }
                    let s0 = (b0.max(start) - start) >> 9;
                    let s1 = (b1.min(start + iu) - start) >> 9;
                    let want = sector_mask(s0 as u32, s1 as u32, full);
                    assert_eq!(iu_sectors(b0, b1, start, iu, full), want, "IU {iu} at {start}, bytes {b0}..{b1}");
                }
            }
        }
    }
}
