//! The command journal: what a long-running writer (the NBD server) did since the image's
//! last committed generation, so a process killed at any moment can be recovered to a state
//! consistent with the data it acknowledged as durable.
//!
//! Committing a generation writes the maps in full, which takes long enough that a server
//! cannot do it at every FLUSH. Instead it appends every command that changed controller or
//! FTL state to `DIR/journal.bin`, in the order the controller executed them, and fsyncs the
//! journal at each FLUSH (and FUA). The FTL is deterministic given the command order, so
//! replaying the journal over the committed generation rebuilds the exact state, map for map
//! and counter for counter. [`crate::image::Image::open`] does that, commits a new generation
//! and removes the journal.
//!
//! ```text
//! header (32 B):  "SSDTWJNL" | version u32 | reserved u32 | generation u64 | reserved u32 | crc32c u32
//! record:         len u8 | kind u8 | payload (len bytes) | crc32c u32 of (len, kind, payload)
//! ```
//!
//! Integers are little-endian. A journal is read up to the first record whose length or
//! checksum does not check ([`parse`]). What follows decides what that means:
//! * nothing, or less than one record with no intact record after it: a **torn tail**, what a
//!   process killed (or a power loss) while appending leaves. Records are acknowledged only
//!   after an fsync that covers them, so a torn tail was never acknowledged: it is ignored.
//! * anything else (a bad record followed by intact ones, or more garbage than one record):
//!   **damage**. Replaying only the part before it would silently drop commands the server
//!   may have acknowledged and leave the FTL disagreeing with the data files, so a damaged
//!   journal is refused until `ssdtwin check --repair` drops it from that offset (keeping a
//!   copy).
//!
//! A journal whose header names an older generation than `CURRENT` is stale (the server
//! committed and died before it could reset the journal): its records are in the committed
//! state and it is discarded.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::fsio::{self, FsError};

use crate::nand::NoTiming;
use crate::nvme::{Controller, NsId};

/// File name of the journal inside an image directory.
pub const FILE: &str = "journal.bin";
const MAGIC: &[u8; 8] = b"SSDTWJNL";
const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 32;
/// The longest encoded record (a `Check`: 2 + 32 + 4 bytes). A torn tail is shorter.
pub const MAX_RECORD_LEN: usize = 38;

/// One state-changing command, as the controller executed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Write command (the FTL maps the blocks; the data itself lives in the data files).
    Write { nsid: u32, slba: u64, nlb: u64 },
    /// Read command: changes only counters, but the FTL fingerprint includes them.
    Read { nsid: u32, slba: u64, nlb: u64 },
    /// Dataset Management deallocate (TRIM, and the hole-punching part of WRITE_ZEROES).
    Deallocate { nsid: u32, slba: u64, nlb: u64 },
    /// One `DeviceTiming::idle` call: background GC moved `moved` IUs and left the FTL
    /// with `erases` erases and `victims` victims in total. Replay repeats the engine's
    /// calls (one program unit of moves each) until it reaches the same three numbers,
    /// which is exact because every call but the last moves a whole program unit and any
    /// call that moves nothing but still changes state picks or erases a victim.
    IdleGc { moved: u64, erases: u64, victims: u64 },
    /// Power-on time and controller busy time to add to the SMART counters.
    Clock { ns: u64, busy_ns: u64 },
    /// Counters the FTL had at this point (written at each FLUSH): replay checks that it
    /// reaches them, so a journal that does not belong to this state is refused rather
    /// than silently giving a different drive.
    Check { host_programmed_ius: u64, gc_programmed_ius: u64, erases: u64, host_write_bytes: u64 },
}

const K_WRITE: u8 = 1;
const K_READ: u8 = 2;
const K_DEALLOC: u8 = 3;
const K_IDLE: u8 = 4;
const K_CLOCK: u8 = 5;
const K_CHECK: u8 = 6;

impl Record {
    /// Append the encoded record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(0); // length, patched below
        let put = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
        match *self {
            Record::Write { nsid, slba, nlb } | Record::Read { nsid, slba, nlb } | Record::Deallocate { nsid, slba, nlb } => {
                out.push(match self {
                    Record::Write { .. } => K_WRITE,
                    Record::Read { .. } => K_READ,
                    _ => K_DEALLOC,
                });
                out.extend_from_slice(&nsid.to_le_bytes());
                put(out, slba);
                put(out, nlb);
            }
            Record::IdleGc { moved, erases, victims } => {
                out.push(K_IDLE);
                put(out, moved);
                put(out, erases);
                put(out, victims);
            }
            Record::Clock { ns, busy_ns } => {
                out.push(K_CLOCK);
                put(out, ns);
                put(out, busy_ns);
            }
            Record::Check { host_programmed_ius, gc_programmed_ius, erases, host_write_bytes } => {
                out.push(K_CHECK);
                put(out, host_programmed_ius);
                put(out, gc_programmed_ius);
                put(out, erases);
                put(out, host_write_bytes);
            }
        }
        let len = out.len() - start - 2;
        out[start] = len as u8;
        let crc = crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    /// Decode one record from the front of `b`: `Some((record, bytes used))`, or `None` if
    /// `b` does not start with a whole, intact record.
    pub fn decode(b: &[u8]) -> Option<(Record, usize)> {
        let len = *b.first()? as usize;
        let total = 2 + len + 4;
        if b.len() < total {
            return None;
        }
        let crc = u32::from_le_bytes(b[2 + len..total].try_into().ok()?);
        if crc32c(&b[..2 + len]) != crc {
            return None;
        }
        let p = &b[2..2 + len];
        let u = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
        let io = |p: &[u8]| -> Option<(u32, u64, u64)> {
            (p.len() == 20).then(|| {
                (
                    u32::from_le_bytes(p[..4].try_into().expect("4")),
                    u64::from_le_bytes(p[4..12].try_into().expect("8")),
                    u64::from_le_bytes(p[12..20].try_into().expect("8")),
                )
            })
        };
        let r = match b[1] {
            K_WRITE => io(p).map(|(nsid, slba, nlb)| Record::Write { nsid, slba, nlb })?,
            K_READ => io(p).map(|(nsid, slba, nlb)| Record::Read { nsid, slba, nlb })?,
            K_DEALLOC => io(p).map(|(nsid, slba, nlb)| Record::Deallocate { nsid, slba, nlb })?,
            K_IDLE if len == 24 => Record::IdleGc { moved: u(0), erases: u(8), victims: u(16) },
            K_CLOCK if len == 16 => Record::Clock { ns: u(0), busy_ns: u(8) },
            K_CHECK if len == 32 => {
                Record::Check { host_programmed_ius: u(0), gc_programmed_ius: u(8), erases: u(16), host_write_bytes: u(24) }
            }
            _ => return None,
        };
        Some((r, total))
    }
}

fn header(generation: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&generation.to_le_bytes());
    let crc = crc32c(&h[..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Why a journal's first bytes are not a journal header.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("{len} bytes, shorter than the {HEADER_LEN}-byte header")]
    Short { len: usize },
    #[error("bad magic")]
    Magic,
    #[error("header checksum does not match")]
    Checksum,
    #[error("journal version {found}, this ssdtwin reads version {VERSION}")]
    Version { found: u32 },
}

/// The generation a journal's header names, or why it is not a journal header.
pub fn parse_header(b: &[u8]) -> Result<u64, HeaderError> {
    if b.len() < HEADER_LEN {
        return Err(HeaderError::Short { len: b.len() });
    }
    if &b[..8] != MAGIC {
        return Err(HeaderError::Magic);
    }
    if crc32c(&b[..28]) != u32::from_le_bytes(b[28..32].try_into().expect("4")) {
        return Err(HeaderError::Checksum);
    }
    let found = u32::from_le_bytes(b[8..12].try_into().expect("4"));
    if found != VERSION {
        return Err(HeaderError::Version { found });
    }
    Ok(u64::from_le_bytes(b[16..24].try_into().expect("8")))
}

/// The records of a journal body (after the header), up to the first one that does not
/// check, and the number of bytes after them.
pub fn parse_records(mut b: &[u8]) -> (Vec<Record>, usize) {
    let mut out = Vec::new();
    while let Some((r, n)) = Record::decode(b) {
        out.push(r);
        b = &b[n..];
    }
    (out, b.len())
}

/// How a journal body ends (offsets are of the whole file, header included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to an intact record.
    Clean,
    /// A record cut short at `offset` (`bytes` long, less than one record, nothing intact
    /// after it): an append that never completed, so never acknowledged.
    Torn { offset: u64, bytes: u64 },
    /// A record at `offset` does not check and `bytes` follow it, among them `intact_after`
    /// (the records found intact after the damage, which replay would have to drop).
    Damaged { offset: u64, bytes: u64, intact_after: Vec<Record> },
}

/// A parsed journal body: the intact records before the first bad one, and how it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub records: Vec<Record>,
    pub tail: Tail,
}

/// Parse a journal body (`body` follows the header in the file).
pub fn parse(body: &[u8]) -> Parsed {
    let (records, rest) = parse_records(body);
    if rest == 0 {
        return Parsed { records, tail: Tail::Clean };
    }
    let at = body.len() - rest;
    let offset = (HEADER_LEN + at) as u64;
    // Look for intact records after the bad one: their presence means damage, not a torn
    // append (which can only cut the journal's end). A false positive needs a CRC-32C match
    // by chance (2^-32 per position).
    let after = &body[at..];
    let intact_after = (1..after.len()).find_map(|i| Record::decode(&after[i..]).map(|_| parse_records(&after[i..]).0)).unwrap_or_default();
    let tail = if intact_after.is_empty() && rest < MAX_RECORD_LEN {
        Tail::Torn { offset, bytes: rest as u64 }
    } else {
        Tail::Damaged { offset, bytes: rest as u64, intact_after }
    };
    Parsed { records, tail }
}

/// Why a journal does not replay onto a state.
#[derive(Debug, thiserror::Error)]
#[error("record {index} ({record:?}): {reason}")]
pub struct ReplayError {
    pub index: usize,
    pub record: Record,
    pub reason: String,
}

/// Apply `records` to `ctrl` in order, in fast-forward. Every record must apply cleanly
/// (the journal holds only commands that succeeded), and `Check` records must match.
pub fn replay(ctrl: &mut Controller, records: &[Record]) -> Result<(), ReplayError> {
    let iu = ctrl.ftl_config().iu_bytes as u64;
    // The engine's idle GC moves at most one program unit per call (DeviceTiming::idle).
    let chunk = ctrl.spec().geometry().ius_per_program_unit(iu).max(1) as u64;
    for (index, &record) in records.iter().enumerate() {
        let fail = |reason: String| ReplayError { index, record, reason };
        match record {
            Record::Write { nsid, slba, nlb } => ctrl.write(NsId(nsid), slba, nlb, &mut NoTiming).map_err(|e| fail(e.to_string()))?,
            Record::Read { nsid, slba, nlb } => {
                ctrl.read(NsId(nsid), slba, nlb, &mut NoTiming).map_err(|e| fail(e.to_string()))?;
            }
            Record::Deallocate { nsid, slba, nlb } => {
                ctrl.deallocate(NsId(nsid), slba, nlb).map_err(|e| fail(e.to_string()))?;
            }
            Record::IdleGc { moved, erases, victims } => {
                let mut done = 0u64;
                loop {
                    let c = ctrl.ftl_counters();
                    let now = (done, c.erases, c.gc_victims);
                    if now == (moved, erases, victims) {
                        break;
                    }
                    if done > moved || c.erases > erases || c.gc_victims > victims {
                        return Err(fail(format!(
                            "background GC went past the recorded state (moved {done}, erases {}, victims {})",
                            c.erases, c.gc_victims
                        )));
                    }
                    let n = ctrl.idle_gc(chunk, &mut NoTiming).map_err(|e| fail(e.to_string()))?;
                    let c = ctrl.ftl_counters();
                    if n == 0 && (c.erases, c.gc_victims) == (now.1, now.2) {
                        return Err(fail(format!("background GC has nothing more to do (moved {done} of {moved})")));
                    }
                    done += n;
                }
            }
            Record::Clock { ns, busy_ns } => ctrl.advance_clock(ns, busy_ns),
            Record::Check { host_programmed_ius, gc_programmed_ius, erases, host_write_bytes } => {
                let c = ctrl.ftl_counters();
                let got = (c.host_programmed_ius, c.gc_programmed_ius, c.erases, c.host_write_bytes);
                let want = (host_programmed_ius, gc_programmed_ius, erases, host_write_bytes);
                if got != want {
                    return Err(fail(format!("the FTL counters are {got:?} after replay, the journal recorded {want:?}")));
                }
            }
        }
    }
    Ok(())
}

/// The counters a [`Record::Check`] records.
pub fn check_record(ctrl: &Controller) -> Record {
    let c = ctrl.ftl_counters();
    Record::Check {
        host_programmed_ius: c.host_programmed_ius,
        gc_programmed_ius: c.gc_programmed_ius,
        erases: c.erases,
        host_write_bytes: c.host_write_bytes,
    }
}

/// Appends records to `DIR/journal.bin`. Records collect in memory and go to the file on
/// [`JournalWriter::write_out`] (page cache: they survive the process being killed, not a
/// power loss); [`JournalWriter::sync_handle`] gives a descriptor to fdatasync outside the
/// caller's locks.
pub struct JournalWriter {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// Bytes in the file (header included).
    file_bytes: u64,
    generation: u64,
    /// Records appended since the writer was created (never reset: a ticket for group commit).
    appended: u64,
    /// Of those, how many are in the file.
    written: u64,
    /// A reset failed part-way: the file no longer matches `file_bytes`, and a record
    /// written now would land after a gap (a journal that opens only with --repair).
    broken: Option<String>,
}

impl JournalWriter {
    /// Start an empty journal for `generation` in `dir` (replacing any file there), synced.
    pub fn create(dir: &Path, generation: u64) -> Result<JournalWriter, FsError> {
        let path = dir.join(FILE);
        let file = fsio::open_rw(&path, true)?;
        let mut w = JournalWriter {
            path,
            file,
            buf: Vec::with_capacity(1 << 16),
            file_bytes: 0,
            generation,
            appended: 0,
            written: 0,
            broken: None,
        };
        w.reset(generation)?;
        fsio::sync_dir(dir)?;
        Ok(w)
    }

    /// Empty the journal and name `generation` in its header (after a commit), synced.
    /// Records still buffered are dropped: the commit holds their effect.
    /// A failed reset leaves the writer broken: it writes nothing more (see `broken`).
    pub fn reset(&mut self, generation: u64) -> Result<(), FsError> {
        self.buf.clear();
        self.written = self.appended;
        let r = self.try_reset(generation);
        if let Err(e) = &r {
            self.broken = Some(e.to_string());
        }
        r
    }

    fn try_reset(&mut self, generation: u64) -> Result<(), FsError> {
        fsio::set_len(&self.file, &self.path, 0)?;
        fsio::write_all_at(&self.file, &self.path, &header(generation), 0)?;
        fsio::sync_data(&self.file, &self.path)?;
        self.file_bytes = HEADER_LEN as u64;
        self.generation = generation;
        self.broken = None;
        Ok(())
    }

    pub fn append(&mut self, r: &Record) {
        r.encode(&mut self.buf);
        self.appended += 1;
    }

    /// Bytes waiting in memory.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Size of the journal (file plus buffer).
    pub fn len_bytes(&self) -> u64 {
        self.file_bytes + self.buf.len() as u64
    }

    /// Whether the journal holds any record (written or buffered).
    pub fn has_records(&self) -> bool {
        self.len_bytes() > HEADER_LEN as u64
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records appended so far (a monotone count).
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// Move buffered records into the file; returns how many records the file now covers
    /// (in [`JournalWriter::appended`] units).
    pub fn write_out(&mut self) -> Result<u64, FsError> {
        if let Some(why) = &self.broken {
            let e = std::io::Error::other(format!("not written: resetting the journal failed earlier ({why})"));
            return Err(FsError::new(&self.path, e));
        }
        if !self.buf.is_empty() {
            fsio::write_all_at(&self.file, &self.path, &self.buf, self.file_bytes)?;
            self.file_bytes += self.buf.len() as u64;
            self.buf.clear();
        }
        self.written = self.appended;
        Ok(self.written)
    }

    /// fdatasync the journal file through a descriptor from [`JournalWriter::sync_handle`]
    /// (so the caller need not hold the writer).
    pub fn sync_file(file: &File, path: &Path) -> Result<(), FsError> {
        fsio::sync_data(file, path)
    }

    /// A second descriptor of the journal file, to fdatasync without holding the writer.
    pub fn sync_handle(&self) -> Result<File, FsError> {
        self.file.try_clone().map_err(|e| FsError::new(&self.path, e))
    }

    /// Drop the journal file (after a clean shutdown has committed everything).
    pub fn remove(self) -> Result<(), FsError> {
        fsio::remove_file(&self.path)?;
        if let Some(d) = self.path.parent() {
            fsio::sync_dir(d)?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalWriter")
            .field("path", &self.path)
            .field("generation", &self.generation)
            .field("bytes", &self.len_bytes())
            .finish()
    }
}

/// CRC-32C (Castagnoli), as iSCSI and ext4 use (the `crc32c` crate: SSE4.2/ARMv8
/// instructions where the CPU has them).
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_value() {
        // RFC 3720 B.4: 32 bytes of zeroes.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn records_round_trip_and_torn_tails_are_ignored() {
        let rs = [
            Record::Write { nsid: 1, slba: 7, nlb: 8 },
            Record::Read { nsid: 2, slba: u64::MAX - 1, nlb: 1 },
            Record::Deallocate { nsid: 3, slba: 0, nlb: 1 << 40 },
            Record::IdleGc { moved: 5, erases: 6, victims: 7 },
            Record::Clock { ns: 1, busy_ns: 2 },
            Record::Check { host_programmed_ius: 1, gc_programmed_ius: 2, erases: 3, host_write_bytes: 4 },
        ];
        let mut b = Vec::new();
        for r in &rs {
            r.encode(&mut b);
        }
        let (got, rest) = parse_records(&b);
        assert_eq!(got, rs);
        assert_eq!(rest, 0);
        // Every truncation keeps exactly the whole records before the cut.
        let mut ends = vec![0];
        let mut at = 0;
        for r in &rs {
            let mut one = Vec::new();
            r.encode(&mut one);
            at += one.len();
            ends.push(at);
        }
        for cut in 0..b.len() {
            let (got, rest) = parse_records(&b[..cut]);
            let whole = ends.iter().filter(|&&e| e <= cut).count() - 1;
            assert_eq!(got.len(), whole, "cut at {cut}");
            assert_eq!(rest, cut - ends[whole]);
        }
        // A flipped bit anywhere ends the journal at that record.
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            let (got, _) = parse_records(&c);
            let hit = ends.iter().filter(|&&e| e <= i).count() - 1;
            assert_eq!(&got[..], &rs[..hit], "flip at byte {i}");
        }
    }

    use crate::engine::DeviceTiming;
    use crate::image::{Image, RecoveryAction};
    use crate::nvme::Pattern;
    use crate::rng::Rng;
    use crate::spec::DriveSpec;

    /// A timed run of writes, reads, trims and idle gaps (background GC), journaled the way
    /// the server journals it. Returns the controller's state for comparison.
    fn timed_run(img: &mut Image, j: &mut JournalWriter, seed: u64, n: usize) {
        let ctrl = &mut img.ctrl;
        let nsze = ctrl.attached(NsId(1)).unwrap().nsze;
        let mut timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).unwrap();
        let mut r = Rng::new(seed);
        let mut now = 0u64;
        for i in 0..n {
            now += 500;
            let nlb = 8 * (1 + r.below(16));
            let slba = r.below(nsze - nlb);
            match r.below(20) {
                0..=11 => {
                    timing.write(ctrl, now, NsId(1), slba, nlb).unwrap();
                    j.append(&Record::Write { nsid: 1, slba, nlb });
                }
                12..=16 => {
                    timing.read(ctrl, now, NsId(1), slba, nlb).unwrap();
                    j.append(&Record::Read { nsid: 1, slba, nlb });
                }
                17..=18 => {
                    timing.deallocate(ctrl, now, NsId(1), slba, nlb).unwrap();
                    j.append(&Record::Deallocate { nsid: 1, slba, nlb });
                }
                _ => {
                    // An idle gap of up to 50 ms: background GC, journaled as the server does.
                    let until = now + r.below(50_000_000);
                    let moved = timing.idle(ctrl, now, until).unwrap();
                    let c = ctrl.ftl_counters();
                    j.append(&Record::IdleGc { moved, erases: c.erases, victims: c.gc_victims });
                    now = until;
                }
            }
            if i % 5000 == 0 {
                j.append(&Record::Clock { ns: 1000, busy_ns: 10 });
                j.append(&check_record(ctrl));
                j.write_out().unwrap();
            }
        }
        j.append(&check_record(ctrl));
        j.write_out().unwrap();
    }

    #[test]
    fn replay_rebuilds_the_ftl_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        let mut img = Image::create(&d, spec, "kioxia-cm6-r-3.84t", 1).unwrap();
        let cap = img.ctrl.attached(NsId(1)).unwrap().bytes();
        img.ctrl.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
        img.ctrl.precondition(NsId(1), Pattern::Random, 4096, cap, 2, &mut |_, _| true).unwrap();
        img.commit().unwrap();
        let g = img.generation();
        let mut j = JournalWriter::create(&d, g).unwrap();
        timed_run(&mut img, &mut j, 9, 60_000);
        // The run must have exercised background GC, or the test proves less than it says.
        let idle_moves: u64 = {
            let bytes = std::fs::read(j.path()).unwrap();
            let (rs, _) = parse_records(&bytes[HEADER_LEN..]);
            rs.iter().map(|r| if let Record::IdleGc { moved, .. } = r { *moved } else { 0 }).sum()
        };
        assert!(idle_moves > 0, "no background GC happened in the idle gaps");
        let want = img.ctrl.ftl_fingerprint().unwrap();
        let want_smart = img.ctrl.smart_log();
        // "Kill": drop the process state without committing; a torn record at the end.
        drop(j);
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(d.join(FILE)).unwrap();
            f.write_all(&[20, K_WRITE, 1, 0, 0]).unwrap();
        }
        drop(img);
        let mut back = Image::open(&d, true).unwrap();
        let rec = back.recovery().cloned().expect("a recovery report");
        assert_eq!(rec.action, RecoveryAction::Replayed);
        assert_eq!(rec.ignored_bytes, 5);
        assert_eq!(back.generation(), g + 1, "recovery commits a new generation");
        assert!(!d.join(FILE).exists(), "the replayed journal is removed");
        assert_eq!(back.ctrl.ftl_fingerprint().unwrap(), want);
        let s = back.ctrl.smart_log();
        assert_eq!(
            (s.data_units_written, s.host_read_commands, s.power_on_hours),
            (want_smart.data_units_written, want_smart.host_read_commands, want_smart.power_on_hours)
        );
        assert_eq!(s.unsafe_shutdowns, want_smart.unsafe_shutdowns + 1);
        back.ctrl.check_full().unwrap();
        // Opened again: nothing to recover, same state.
        drop(back);
        let mut again = Image::open(&d, true).unwrap();
        assert!(again.recovery().is_none());
        assert_eq!(again.ctrl.ftl_fingerprint().unwrap(), want);
    }

    #[test]
    fn stale_journals_are_discarded_and_read_only_opens_replay_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        let mut img = Image::create(&d, spec, "kioxia-cm6-r-3.84t", 1).unwrap();
        let g = img.generation();
        let mut j = JournalWriter::create(&d, g).unwrap();
        for k in 0..100 {
            img.ctrl.write(NsId(1), k * 8, 8, &mut NoTiming).unwrap();
            j.append(&Record::Write { nsid: 1, slba: k * 8, nlb: 8 });
        }
        j.write_out().unwrap();
        let want = img.ctrl.ftl_fingerprint().unwrap();
        drop(img);
        // A reader (no lock held) sees the journal's effect but leaves the files alone.
        let mut ro = Image::open(&d, false).unwrap();
        assert_eq!(ro.recovery().unwrap().action, RecoveryAction::ReplayedInMemory);
        assert_eq!(ro.ctrl.ftl_fingerprint().unwrap(), want);
        assert_eq!(ro.generation(), g);
        assert!(d.join(FILE).exists());
        drop(ro);
        // While a writer holds the lock, a reader does not replay (the server's live.json
        // is the live view).
        let w = Image::open(&d, true).unwrap();
        assert_eq!(w.generation(), g + 1);
        let j2 = JournalWriter::create(&d, g).unwrap(); // stale: names the old generation
        drop(j2);
        let ro = Image::open(&d, false).unwrap();
        assert!(ro.recovery().is_none(), "a locked image is not recovered by a reader");
        drop(ro);
        drop(w);
        let mut w = Image::open(&d, true).unwrap();
        let rec = w.recovery().unwrap();
        assert_eq!(rec.action, RecoveryAction::Discarded);
        assert_eq!(rec.journal_generation, Some(g));
        assert_eq!(w.generation(), g + 1, "a stale journal changes nothing");
        assert!(!d.join(FILE).exists());
        assert_eq!(w.ctrl.ftl_fingerprint().unwrap(), want);
    }

    #[test]
    fn a_journal_of_another_state_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        let mut img = Image::create(&d, spec, "kioxia-cm6-r-3.84t", 1).unwrap();
        let mut j = JournalWriter::create(&d, img.generation()).unwrap();
        img.ctrl.write(NsId(1), 0, 8, &mut NoTiming).unwrap();
        j.append(&Record::Write { nsid: 1, slba: 0, nlb: 8 });
        // Counters that this state does not have.
        j.append(&Record::Check { host_programmed_ius: 999, gc_programmed_ius: 0, erases: 0, host_write_bytes: 4096 });
        j.write_out().unwrap();
        drop(img);
        let e = Image::open(&d, true).unwrap_err().to_string();
        assert!(e.contains("does not replay") && e.contains("move the file away"), "{e}");
        assert!(d.join(FILE).exists(), "a journal that does not replay is kept for inspection");
    }

    #[test]
    fn header_names_its_generation() {
        let h = header(42);
        assert_eq!(parse_header(&h), Ok(42));
        let mut bad = h;
        bad[17] ^= 1;
        assert!(parse_header(&bad).is_err());
        assert!(parse_header(&h[..10]).is_err());
    }
}
