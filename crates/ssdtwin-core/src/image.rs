//! The drive image on disk.
//!
//! ```text
//! DIR/ssdtwin.toml      manifest: format, version, preset, scale, seed (written at creation)
//! DIR/spec.toml         the effective drive spec (after scaling)
//! DIR/CURRENT           name of the committed generation, e.g. "gen-000012"
//! DIR/gen-000012/       state.json (controller + FTL state, map checksums, its own checksum),
//!                       l2p.bin, p2l.bin
//! DIR/LOCK              flock'ed by the process that may change the image
//! DIR/journal.bin       commands executed since CURRENT by a server (crate::journal)
//! DIR/data/ns<N>.img    the data of namespace N, a sparse file (written by the NBD server)
//! ```
//!
//! Commits are crash-safe: a new generation directory is written and fsynced in full,
//! then `CURRENT` is replaced atomically (write, fsync, rename, fsync the directory).
//! A process killed at any point leaves `CURRENT` naming a complete generation. Maps
//! that did not change are hard-linked from the previous generation, so a metadata-only
//! command on a full-size image commits in milliseconds.
//!
//! Integrity rules (docs/architecture.md, "The drive image"):
//! * whether the maps changed is read from the FTL's own counters
//!   ([`crate::nvme::FtlCounters::map_changes`]), never from a flag some code path could
//!   forget to set; a generation records the count its maps were saved at, and an image
//!   whose state moved on from its maps is refused at open;
//! * the cheap invariants (everything that needs no maps) are checked before a generation is
//!   written and when an image is opened; loaded maps are cross-checked against the state;
//! * `state.json` carries an xxh3 checksum of its contents;
//! * nothing inside the directory is reached through a symbolic link ([`crate::fsio`]);
//! * after a failed write or fsync the image is poisoned: this process never writes to it
//!   again (a retried fsync can report success for data the kernel already dropped).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

use crate::bigarray::BigArray;
use crate::fsio::{self, Entry, FsError};
use crate::journal::{self, Record, Tail};
use crate::nvme::{self, Controller, ControllerState, FtlConfig, FtlState, MapError, MapStore, NsId};
use crate::spec::{DriveSpec, SpecError};

pub const FORMAT: &str = "ssdtwin-image";
/// 2: state.json carries its checksum, the maps' change count and the data-file table.
pub const VERSION: u32 = 2;
const MANIFEST: &str = "ssdtwin.toml";
const SPEC: &str = "spec.toml";
const CURRENT: &str = "CURRENT";
const LOCK: &str = "LOCK";
const DATA: &str = "data";
const STATE_FORMAT: &str = "ssdtwin-state";
/// Suffix of a data file dropped by a command not yet committed (see [`Image::drop_data`]).
const DROPPED: &str = ".dropped";

/// `ns<N>.img` → N.
fn data_file_nsid(name: &str) -> Option<u32> {
    name.strip_prefix("ns")?.strip_suffix(".img")?.parse().ok()
}

/// Whether another open file description holds the image lock (a live writer).
pub fn lock_held(dir: &Path) -> bool {
    let Ok(f) = fsio::open_read(&dir.join(LOCK)) else { return false };
    // SAFETY: flock on a descriptor we own; a shared lock is released when `f` closes.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    rc != 0
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("{} is not an ssdtwin drive image ({reason})", path.display())]
    Foreign { path: PathBuf, reason: String },
    #[error("drive image damaged: {}: {reason}", path.display())]
    Damaged { path: PathBuf, reason: String },
    #[error("{} already exists; choose a new directory (or remove it first)", path.display())]
    Exists { path: PathBuf },
    #[error("{} is in use by another ssdtwin process (pid {pid}); stop it first", path.display())]
    Locked { path: PathBuf, pid: String },
    #[error("{} was opened read-only; open it writable to commit", path.display())]
    ReadOnly { path: PathBuf },
    #[error("{} cannot be opened for writing: {reason}", path.display())]
    NotWritable { path: PathBuf, reason: String },
    /// A write or fsync failed earlier: this process will not touch the image again.
    #[error("{}: an earlier write failed ({detail}); the image keeps its last committed state (generation {generation}) and this process will not write to it again: fix the cause and reopen it", path.display())]
    Poisoned { path: PathBuf, generation: u64, detail: String },
    /// The command journal is damaged (not merely torn at its end).
    #[error("{}: damaged at byte {offset}: {detail}; `ssdtwin check --repair {}` drops it from there (keeping a copy)", path.display(), dir.display())]
    JournalDamaged { path: PathBuf, dir: PathBuf, offset: u64, detail: String },
    /// A served namespace's data file is missing or has the wrong size.
    #[error("{}: {reason}", path.display())]
    DataFile { path: PathBuf, reason: String },
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Controller(#[from] nvme::Error),
}

impl From<MapError> for ImageError {
    fn from(e: MapError) -> ImageError {
        match e {
            MapError::Fs(f) => ImageError::Fs(f),
            MapError::Damaged { path, reason } => ImageError::Damaged { path, reason },
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub preset: String,
    pub scale: u32,
    pub seed: u64,
}

impl Manifest {
    /// The manifest of a drive held only in memory (`format` "memory"; no image, so no
    /// image format version: 0).
    pub fn in_memory(preset: &str, scale: u32, seed: u64) -> Manifest {
        Manifest { format: "memory".into(), version: 0, preset: preset.into(), scale, seed }
    }
}

/// What a generation's state.json holds.
#[derive(Serialize, Deserialize)]
struct Generation {
    controller: ControllerState,
    ftl: FtlState,
    l2p_entries: u64,
    p2l_entries: u64,
    l2p_xxh3: String,
    p2l_xxh3: String,
    /// [`crate::nvme::FtlCounters::map_changes`] when the maps were saved (absent in
    /// version-1 images).
    #[serde(default)]
    maps_changes: Option<u64>,
    /// Data files of served namespaces: nsid → size in bytes.
    #[serde(default)]
    data_files: BTreeMap<u32, u64>,
}

/// state.json: the generation and an xxh3 checksum of its exact bytes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    format: String,
    version: u32,
    xxh3: String,
    #[serde(borrow)]
    state: &'a RawValue,
}

fn encode_state(g: &Generation) -> Vec<u8> {
    let state = serde_json::to_string(g).expect("state serialises");
    let sum = xxhash_rust::xxh3::xxh3_64(state.as_bytes());
    let raw = RawValue::from_string(state).expect("serde_json output is JSON");
    let env = Envelope { format: STATE_FORMAT.into(), version: VERSION, xxh3: format!("{sum:016x}"), state: &raw };
    serde_json::to_vec(&env).expect("envelope serialises")
}

fn decode_state(bytes: &[u8], path: &Path) -> Result<Generation, ImageError> {
    let damaged = |reason: String| ImageError::Damaged { path: path.to_path_buf(), reason };
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
    if v.get("format").is_none() {
        // A version-1 state.json: the bare generation, no checksum.
        return serde_json::from_value(v).map_err(|e| damaged(e.to_string()));
    }
    let env: Envelope = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
    if env.format != STATE_FORMAT || env.version > VERSION {
        return Err(damaged(format!(
            "state format '{}' version {} (this ssdtwin reads {STATE_FORMAT} up to {VERSION})",
            env.format, env.version
        )));
    }
    let sum = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(env.state.get().as_bytes()));
    if sum != env.xxh3 {
        return Err(damaged(format!("checksum {sum} does not match the recorded {}", env.xxh3)));
    }
    serde_json::from_str(env.state.get()).map_err(|e| damaged(e.to_string()))
}

/// What opening did with a journal a server left behind.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Writable open: replayed and committed as a new generation.
    Replayed,
    /// Read-only open of an unlocked image: replayed in memory only.
    ReplayedInMemory,
    /// A stale journal (its generation is committed) or one torn while being created.
    Discarded,
    /// `check --repair`: the intact part before the damage replayed, the rest dropped.
    Repaired,
}

/// What [`Image::open`] did with a journal left by a server that did not shut down cleanly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recovery {
    pub action: RecoveryAction,
    /// The journal's generation (if its header could be read) and the image's before opening.
    pub journal_generation: Option<u64>,
    pub image_generation: u64,
    pub records: u64,
    /// Bytes after the last intact record (a record torn by the kill, or, when repairing,
    /// the damaged part), not replayed.
    pub ignored_bytes: u64,
    /// Intact records after the damage that a repair dropped.
    pub dropped_records: u64,
    /// Where a repair kept the damaged journal.
    pub kept_copy: Option<PathBuf>,
    pub detail: String,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "journal {:?}: {}", self.action, self.detail)
    }
}

/// How to open an image.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read the committed state (and a dead server's journal, in memory); no lock.
    ReadOnly,
    /// Take the lock; recover a dead server's journal and commit.
    Writable,
    /// Like `Writable`, but a damaged journal is replayed up to the damage and the rest
    /// dropped (a copy is kept): `ssdtwin check --repair`.
    Repair,
}

/// An open drive image: its directory, manifest and controller.
pub struct Image {
    dir: PathBuf,
    pub manifest: Manifest,
    pub ctrl: Controller,
    generation: u64,
    lock: Option<File>,
    recovery: Option<Recovery>,
    /// The committed generation's maps: checksums (l2p, p2l) and the map-change count they
    /// were saved at. A commit whose FTL is still at that count links the files instead.
    maps_on_disk: MapsOnDisk,
    data_files: BTreeMap<u32, u64>,
    /// Set by a failed write or fsync: no more writes from this process.
    poisoned: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct MapsOnDisk {
    l2p_xxh3: String,
    p2l_xxh3: String,
    changes: u64,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image").field("dir", &self.dir).field("generation", &self.generation).finish()
    }
}

// ----------------------------------------------------------------------------- maps on disk

/// Write `a` to `path`, leaving all-zero 1 MiB runs as holes; returns the xxh3 checksum of
/// the logical contents.
fn save_array(a: &BigArray, path: &Path) -> Result<u64, FsError> {
    let mut f = fsio::create(path)?;
    let bytes = a.as_bytes();
    let mut h = Xxh3::new();
    const CHUNK: usize = 1 << 20;
    let mut pos = 0usize;
    while pos < bytes.len() {
        let end = (pos + CHUNK).min(bytes.len());
        let chunk = &bytes[pos..end];
        h.update(chunk);
        if all_zero(chunk) {
            f.seek(SeekFrom::Current(chunk.len() as i64)).map_err(|e| FsError::new(path, e))?;
        } else {
            fsio::write_all(&mut f, path, chunk)?;
        }
        pos = end;
    }
    fsio::set_len(&f, path, bytes.len() as u64)?;
    fsio::sync_all(&f, path)?;
    Ok(h.digest())
}

/// Whether `bytes` are all zero. An OR over each 4 KiB compiles to vector instructions;
/// `iter().all` stops at the first nonzero byte but tests one byte at a time, which made
/// saving the 8 GB of all-zero maps of a fresh full-size drive take 4-5 s.
fn all_zero(bytes: &[u8]) -> bool {
    bytes.chunks(4096).all(|page| page.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

/// Load `len` entries from `path`; returns the array and the checksum of what was read.
///
/// Only the file's data is read: its holes (all-zero runs `save_array` left unwritten) stay
/// untouched zero pages of the array and are hashed from a zero buffer, so a sparse map
/// costs neither the time to copy its zeros nor the memory to hold them (a fresh full-size
/// CM6 has 8 GB of maps, all holes).
fn load_array(path: &Path, len: usize) -> Result<(BigArray, u64), MapError> {
    let damaged = |reason: String| MapError::Damaged { path: path.to_path_buf(), reason };
    let mut f = match fsio::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(damaged("missing".into())),
        Err(e) => return Err(e.into()),
    };
    let flen = f.metadata().map_err(|e| FsError::new(path, e))?.len();
    if flen != (len * 4) as u64 {
        return Err(damaged(format!("{flen} bytes, expected {}", len * 4)));
    }
    let mut a = BigArray::zeroed(len).map_err(|e| FsError::new(path, e))?;
    let mut h = Xxh3::new();
    let bytes = a.as_bytes_mut();
    const CHUNK: usize = 1 << 22;
    static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
    let mut pos = 0usize;
    while pos < bytes.len() {
        let (data, hole) = fsio::next_data(&f, pos as u64, bytes.len() as u64)
            .map_err(|e| FsError::new(path, e))?
            .map_or((bytes.len(), bytes.len()), |(d, h)| (d as usize, h as usize));
        while pos < data {
            let n = (data - pos).min(ZEROS.len());
            h.update(&ZEROS[..n]);
            pos += n;
        }
        if pos < hole {
            f.seek(SeekFrom::Start(pos as u64)).map_err(|e| FsError::new(path, e))?;
        }
        while pos < hole {
            let end = (pos + CHUNK).min(hole);
            f.read_exact(&mut bytes[pos..end]).map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => damaged(e.to_string()),
                _ => FsError::new(path, e).into(),
            })?;
            h.update(&bytes[pos..end]);
            pos = end;
        }
    }
    Ok((a, h.digest()))
}

/// The maps of one generation, loaded when the controller first needs them.
struct DiskMaps {
    l2p: PathBuf,
    p2l: PathBuf,
    sums: MapsOnDisk,
}

impl MapStore for DiskMaps {
    fn location(&self) -> PathBuf {
        self.l2p.parent().unwrap_or(&self.l2p).to_path_buf()
    }

    fn load_maps(&self, l2p_len: usize, p2l_len: usize) -> Result<(BigArray, BigArray), MapError> {
        let load = |path: &Path, len: usize, want: &str| -> Result<BigArray, MapError> {
            let (a, sum) = load_array(path, len)?;
            if format!("{sum:016x}") != want {
                return Err(MapError::Damaged {
                    path: path.to_path_buf(),
                    reason: format!("checksum {sum:016x} does not match the committed {want}"),
                });
            }
            Ok(a)
        };
        Ok((load(&self.l2p, l2p_len, &self.sums.l2p_xxh3)?, load(&self.p2l, p2l_len, &self.sums.p2l_xxh3)?))
    }
}

fn gen_name(n: u64) -> String {
    format!("gen-{n:06}")
}

fn not_writable(dir: &Path, e: &FsError) -> Option<ImageError> {
    let reason = match e.errno() {
        Some(libc::EACCES) | Some(libc::EPERM) => "no permission to write in it (read-only commands still work)",
        Some(libc::EROFS) => "it is on a read-only file system (read-only commands still work)",
        _ => return None,
    };
    Some(ImageError::NotWritable { path: dir.to_path_buf(), reason: reason.into() })
}

impl Image {
    /// Create a new image at `dir` (which must not exist or be an empty directory).
    pub fn create(dir: &Path, spec: DriveSpec, preset: &str, seed: u64) -> Result<Image, ImageError> {
        match fsio::entry(dir)? {
            Entry::Missing => {}
            Entry::Dir if fs::read_dir(dir).map_err(|e| FsError::new(dir, e))?.next().is_none() => {}
            _ => return Err(ImageError::Exists { path: dir.to_path_buf() }),
        }
        fs::create_dir_all(dir).map_err(|e| FsError::new(dir, e))?;
        let manifest = Manifest { format: FORMAT.into(), version: VERSION, preset: preset.into(), scale: spec.scale, seed };
        let ctrl = Controller::new(spec.clone(), seed)?;
        fsio::write_file_synced(&dir.join(SPEC), spec.to_toml().as_bytes())?;
        let mut img = Image {
            dir: dir.to_path_buf(),
            manifest,
            ctrl,
            generation: 0,
            lock: None,
            recovery: None,
            maps_on_disk: MapsOnDisk::default(),
            data_files: BTreeMap::new(),
            poisoned: None,
        };
        img.lock = Some(lock_dir(dir)?);
        img.commit()?;
        // The manifest goes last: a directory without it is not (yet) an image.
        img.write_manifest()?;
        Ok(img)
    }

    fn write_manifest(&self) -> Result<(), ImageError> {
        let text = toml::to_string(&self.manifest).expect("manifest serialises");
        let tmp = self.dir.join("ssdtwin.toml.tmp");
        let _ = fsio::remove_file(&tmp);
        fsio::write_file_synced(&tmp, text.as_bytes())?;
        fsio::rename(&tmp, &self.dir.join(MANIFEST))?;
        fsio::sync_dir(&self.dir)?;
        Ok(())
    }

    /// Open an existing image. `writable` takes the image lock (one writer at a time).
    pub fn open(dir: &Path, writable: bool) -> Result<Image, ImageError> {
        Self::open_with(dir, if writable { OpenMode::Writable } else { OpenMode::ReadOnly })
    }

    pub fn open_with(dir: &Path, mode: OpenMode) -> Result<Image, ImageError> {
        let manifest = read_manifest(dir)?;
        let spath = dir.join(SPEC);
        let spec_text = fsio::read_to_string(&spath)?;
        // A spec this build cannot read (e.g. written before a parameter was added) is an
        // incompatible image, not a damaged one: say so.
        let spec = DriveSpec::from_toml(&spec_text, &spath.display().to_string()).map_err(|e| ImageError::Foreign {
            path: dir.to_path_buf(),
            reason: format!("its spec.toml does not match this ssdtwin's drive model ({e}); re-create the image"),
        })?;
        let lock = match mode {
            OpenMode::ReadOnly => None,
            OpenMode::Writable | OpenMode::Repair => Some(lock_dir(dir)?),
        };
        let (generation, gdir) = read_current(dir)?;
        let gpath = gdir.join("state.json");
        let gtext = match fsio::read(&gpath) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ImageError::Damaged { path: gpath, reason: "missing".into() }),
            Err(e) => return Err(e.into()),
        };
        let g = decode_state(&gtext, &gpath)?;
        let cfg = FtlConfig::from_spec(&spec);
        let damaged = |reason: String| ImageError::Damaged { path: gpath.clone(), reason };
        if g.l2p_entries != cfg.logical_ius as u64 || g.p2l_entries != cfg.physical_ius() as u64 {
            return Err(damaged("map sizes disagree with spec.toml".into()));
        }
        let changes_now = g.ftl.counters().map_changes();
        if g.maps_changes.is_some_and(|c| c != changes_now) {
            return Err(damaged(format!(
                "the FTL state has moved on from its maps (maps saved at change {}, state at {changes_now}): a generation written by an ssdtwin with the idle-GC commit bug",
                g.maps_changes.unwrap_or(0)
            )));
        }
        let sums = MapsOnDisk { l2p_xxh3: g.l2p_xxh3, p2l_xxh3: g.p2l_xxh3, changes: changes_now };
        let store = DiskMaps { l2p: gdir.join("l2p.bin"), p2l: gdir.join("p2l.bin"), sums: sums.clone() };
        for p in [&store.l2p, &store.p2l] {
            match fsio::entry(p)? {
                Entry::File { .. } => {}
                Entry::Missing => return Err(ImageError::Damaged { path: p.clone(), reason: "missing".into() }),
                _ => return Err(ImageError::Damaged { path: p.clone(), reason: "not a regular file".into() }),
            }
        }
        let ctrl =
            Controller::from_parts(spec, g.controller, g.ftl, Box::new(store)).map_err(|e| damaged(format!("inconsistent state: {e}")))?;
        let mut img = Image {
            dir: dir.to_path_buf(),
            manifest,
            ctrl,
            generation,
            lock,
            recovery: None,
            maps_on_disk: sums,
            data_files: g.data_files,
            poisoned: None,
        };
        if mode != OpenMode::ReadOnly {
            img.remove_stale_generations();
            img.settle_dropped()?;
            if img.manifest.version < VERSION {
                img.manifest.version = VERSION;
                img.write_manifest()?;
            }
        }
        img.recover_journal(mode)?;
        Ok(img)
    }

    /// Replay a journal left by a server that was killed (see [`crate::journal`]).
    ///
    /// Writable: replay, count an unsafe shutdown (the drive lost power without a shutdown
    /// notification), commit a new generation and remove the journal. Read-only: replay in
    /// memory only, and only if no process holds the image lock (a live server is still
    /// appending; readers use its `live.json` instead). A journal of an older generation is
    /// stale (its effects are committed) and is removed by a writer. A damaged journal is
    /// refused (except by [`OpenMode::Repair`]).
    fn recover_journal(&mut self, mode: OpenMode) -> Result<(), ImageError> {
        let path = self.dir.join(journal::FILE);
        let bytes = match fsio::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let writable = mode != OpenMode::ReadOnly;
        if !writable && lock_held(&self.dir) {
            return Ok(());
        }
        let image_generation = self.generation;
        let mut rec = Recovery {
            action: RecoveryAction::Discarded,
            journal_generation: None,
            image_generation,
            records: 0,
            ignored_bytes: 0,
            dropped_records: 0,
            kept_copy: None,
            detail: String::new(),
        };
        let journal_damaged =
            |offset: u64, detail: String| ImageError::JournalDamaged { path: path.clone(), dir: self.dir.clone(), offset, detail };
        match journal::parse_header(&bytes) {
            Err(journal::HeaderError::Short { .. }) => {
                // Torn while being created: the server had not started, nothing was acknowledged.
                rec.detail = format!(
                    "{} is {} bytes, shorter than its header (the server died starting up); nothing to replay",
                    path.display(),
                    bytes.len()
                );
            }
            Err(why) => return Err(journal_damaged(0, format!("its header does not check ({why})"))),
            Ok(g) if g < image_generation => {
                rec.journal_generation = Some(g);
                rec.detail = format!(
                    "{} belongs to generation {g}, the image is at {image_generation}: its commands are already committed",
                    path.display()
                );
            }
            Ok(g) if g > image_generation => {
                return Err(journal_damaged(
                    0,
                    format!("it names generation {g}, newer than the image's {image_generation} (CURRENT was changed by hand?)"),
                ));
            }
            Ok(g) => {
                rec.journal_generation = Some(g);
                let parsed = journal::parse(&bytes[journal::HEADER_LEN..]);
                let mut note = String::new();
                match &parsed.tail {
                    Tail::Clean => {}
                    Tail::Torn { bytes, .. } => {
                        rec.ignored_bytes = *bytes;
                        note = format!(" ({bytes} bytes of a torn last record ignored)");
                    }
                    Tail::Damaged { offset, bytes, intact_after } => {
                        if mode != OpenMode::Repair {
                            return Err(journal_damaged(
                                *offset,
                                format!("{} intact records and {bytes} bytes follow a record that does not check", intact_after.len()),
                            ));
                        }
                        let copy = self.keep_copy(&path, g)?;
                        rec.action = RecoveryAction::Repaired;
                        rec.ignored_bytes = *bytes;
                        rec.dropped_records = intact_after.len() as u64;
                        note = format!(
                            "; dropped from byte {offset}: {bytes} bytes holding {} ({}); the data files keep what the server stored; the damaged journal is kept as {}",
                            summarize(intact_after),
                            "commands a client may have seen acknowledged",
                            copy.display()
                        );
                        rec.kept_copy = Some(copy);
                    }
                }
                journal::replay(&mut self.ctrl, &parsed.records).map_err(|e| ImageError::Damaged {
                    path: path.clone(),
                    reason: format!("does not replay onto generation {g}: {e}; move the file away to open the committed state without it"),
                })?;
                self.ctrl.power_cycle(true);
                rec.records = parsed.records.len() as u64;
                if rec.action != RecoveryAction::Repaired {
                    rec.action = if writable { RecoveryAction::Replayed } else { RecoveryAction::ReplayedInMemory };
                }
                rec.detail = format!(
                    "{} records of a server that did not shut down cleanly replayed onto generation {g}{note}",
                    parsed.records.len()
                );
                if writable {
                    self.commit()?;
                }
            }
        }
        if writable {
            fsio::remove_file(&path)?;
            fsio::sync_dir(&self.dir)?;
        }
        self.recovery = Some(rec);
        Ok(())
    }

    /// Copy a damaged journal aside before a repair drops part of it.
    fn keep_copy(&self, path: &Path, generation: u64) -> Result<PathBuf, ImageError> {
        let mut n = 0;
        let copy = loop {
            let name = if n == 0 {
                format!("journal.damaged-{}.bin", gen_name(generation))
            } else {
                format!("journal.damaged-{}.{n}.bin", gen_name(generation))
            };
            let p = self.dir.join(name);
            if matches!(fsio::entry(&p)?, Entry::Missing) {
                break p;
            }
            n += 1;
        };
        let bytes = fsio::read(path)?;
        fsio::write_file_synced(&copy, &bytes)?;
        fsio::sync_dir(&self.dir)?;
        Ok(copy)
    }

    /// What opening did with a journal, if there was one.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    /// Whether this image was opened writable (holds the lock).
    pub fn is_writable(&self) -> bool {
        self.lock.is_some()
    }

    // ------------------------------------------------------------- namespace data files

    /// `DIR/data`: one sparse file per namespace, written by the NBD server.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join(DATA)
    }

    pub fn data_path(&self, nsid: u32) -> PathBuf {
        self.data_dir().join(format!("ns{nsid}.img"))
    }

    /// Drop the data of namespace `nsid` (`NSID_ALL`: every namespace): after Namespace
    /// Management delete, Format NVM (a purge: the data is gone, not just unmapped) and
    /// before a create reuses the NSID. Call it after the controller command succeeded.
    ///
    /// The drop becomes durable with the command, never before or after it: the files are
    /// renamed to `ns<N>.img.dropped` now, deleted once the next commit has recorded the
    /// command, and renamed back by the next writer if the process died before that commit
    /// (the committed state still has their data).
    pub fn drop_data(&mut self, nsid: u32) -> Result<(), ImageError> {
        self.writable()?;
        self.data_files.retain(|&id, _| !(nsid == nvme::NSID_ALL || id == nsid));
        let dd = self.data_dir();
        if !fsio::real_dir(&dd)? {
            return Ok(());
        }
        let mut moved = false;
        for e in fs::read_dir(&dd).map_err(|e| FsError::new(&dd, e))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let id = data_file_nsid(&name);
            if id.is_some() && (nsid == nvme::NSID_ALL || id == Some(nsid)) {
                let aside = dd.join(format!("{name}{DROPPED}"));
                if !matches!(fsio::entry(&aside)?, Entry::Missing) {
                    let r = fsio::remove_file(&aside);
                    self.guard(r)?;
                }
                let r = fsio::rename(&e.path(), &aside);
                self.guard(r)?;
                moved = true;
            }
        }
        if moved {
            let r = fsio::sync_dir(&dd);
            self.guard(r)?;
        }
        Ok(())
    }

    /// After a commit: delete the data files it dropped (best effort; the next writer
    /// finishes what a crash interrupts).
    fn delete_dropped(&self) {
        for (path, _) in self.dropped_files() {
            let _ = fsio::remove_file(&path);
        }
    }

    /// `(path, nsid)` of every `data/ns<N>.img.dropped`.
    fn dropped_files(&self) -> Vec<(PathBuf, u32)> {
        let dd = self.data_dir();
        let Ok(rd) = fs::read_dir(&dd) else { return Vec::new() };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let id = data_file_nsid(name.strip_suffix(DROPPED)?)?;
                Some((e.path(), id))
            })
            .collect()
    }

    /// A writer opening the image settles drops a dead process left half done: a file whose
    /// namespace the committed state still records goes back (the command never became
    /// durable); any other is deleted (it did).
    fn settle_dropped(&mut self) -> Result<(), ImageError> {
        let dropped = self.dropped_files();
        if dropped.is_empty() {
            return Ok(());
        }
        for (path, nsid) in dropped {
            let live = self.data_path(nsid);
            if self.data_files.contains_key(&nsid) && matches!(fsio::entry(&live)?, Entry::Missing) {
                fsio::rename(&path, &live)?;
            } else {
                fsio::remove_file(&path)?;
            }
        }
        fsio::sync_dir(&self.data_dir())?;
        Ok(())
    }

    /// Bring `DIR/data` in line with the namespace table before serving (and commit the
    /// table of data files if it changed).
    /// Files of namespaces that no longer exist are removed; an attached namespace without
    /// a recorded file gets a sparse one of its size. A recorded file that is missing, is
    /// not a regular file or has the wrong size is refused: the image says its data is
    /// there, and serving zeroes instead would be silent data loss.
    /// Returns (nsid, path) of the attached namespaces.
    pub fn prepare_data_files(&mut self) -> Result<Vec<(u32, PathBuf)>, ImageError> {
        self.writable()?;
        let recorded_before = self.data_files.clone();
        let dd = self.data_dir();
        if !fsio::real_dir(&dd)? {
            self.guard(fsio::create_dir(&dd))?;
            self.guard(fsio::sync_dir(&self.dir))?;
        }
        for e in fs::read_dir(&dd).map_err(|e| FsError::new(&dd, e))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(id) = data_file_nsid(&name) {
                if self.ctrl.namespace(NsId(id)).is_err() {
                    self.guard(fsio::remove_file(&e.path()))?;
                    self.data_files.remove(&id);
                }
            }
        }
        let attached: Vec<(u32, u64)> = self.ctrl.namespaces().filter(|n| n.attached).map(|n| (n.nsid, n.bytes())).collect();
        let mut out = Vec::new();
        for (nsid, bytes) in attached {
            let p = self.data_path(nsid);
            let recorded = self.data_files.get(&nsid).copied();
            match (fsio::entry(&p)?, recorded) {
                (Entry::File { bytes: len }, _) if len == bytes => {}
                (Entry::Missing, None) => {
                    let f = self.guard(fsio::open_rw(&p, true))?;
                    self.guard(fsio::set_len(&f, &p, bytes))?;
                    self.guard(fsio::sync_all(&f, &p))?;
                }
                (Entry::Missing, Some(_)) => {
                    return Err(ImageError::DataFile {
                        path: p,
                        reason: format!("missing: namespace {nsid}'s data was stored there by an earlier `ssdtwin serve`; restore the file, or `ssdtwin nvme format DIR -n {nsid}` to start the namespace empty"),
                    })
                }
                (Entry::File { bytes: len }, _) => {
                    return Err(ImageError::DataFile {
                        path: p,
                        reason: format!("{len} bytes, but namespace {nsid} has {bytes}; restore the right file, or remove it and `ssdtwin nvme format DIR -n {nsid}` to start the namespace empty"),
                    })
                }
                (Entry::Symlink, _) => return Err(FsError::new(&p, io::Error::from_raw_os_error(libc::ELOOP)).into()),
                (_, _) => return Err(ImageError::DataFile { path: p, reason: "not a regular file".into() }),
            }
            self.data_files.insert(nsid, bytes);
            out.push((nsid, p));
        }
        self.guard(fsio::sync_dir(&dd))?;
        if self.data_files != recorded_before {
            self.commit()?;
        }
        Ok(out)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Writes are allowed: the lock is held and nothing has failed.
    fn writable(&self) -> Result<(), ImageError> {
        if self.lock.is_none() {
            return Err(ImageError::ReadOnly { path: self.dir.clone() });
        }
        if let Some(d) = &self.poisoned {
            return Err(ImageError::Poisoned { path: self.dir.clone(), generation: self.generation, detail: d.clone() });
        }
        Ok(())
    }

    /// Poison the image when a file-system call failed.
    fn guard<T>(&mut self, r: Result<T, FsError>) -> Result<T, ImageError> {
        r.map_err(|e| {
            self.poisoned.get_or_insert_with(|| e.to_string());
            e.into()
        })
    }

    /// Whether a failed write has made this image read-only for this process (and why).
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Make the current state the committed state (crash-safe, see the module docs).
    pub fn commit(&mut self) -> Result<(), ImageError> {
        self.writable()?;
        self.ctrl.prepare_persist();
        // Never write a generation whose state does not hold together.
        self.ctrl.check_state().map_err(|e| ImageError::Damaged {
            path: self.dir.clone(),
            reason: format!("refusing to commit an inconsistent state (a bug; the committed generation {} is kept): {e}", self.generation),
        })?;
        let maps_changed = self.ctrl.ftl_counters().map_changes() != self.maps_on_disk.changes;
        if maps_changed && !self.ctrl.maps_loaded() && self.generation > 0 {
            // Every map change loads the maps first, so this cannot happen; if it ever did,
            // linking the old files would commit maps that disagree with the state.
            return Err(ImageError::Damaged {
                path: self.dir.clone(),
                reason: format!(
                    "refusing to commit: the FTL counts map changes but its maps were never loaded (a bug; generation {} is kept)",
                    self.generation
                ),
            });
        }
        let r = self.write_generation();
        let (next, sums) = self.guard(r)?;
        self.generation = next;
        self.maps_on_disk = sums.clone();
        // Future map loads read the new generation's files (the old ones are removed next).
        let gdir = self.dir.join(gen_name(next));
        self.ctrl.set_map_store(Box::new(DiskMaps { l2p: gdir.join("l2p.bin"), p2l: gdir.join("p2l.bin"), sums }));
        self.remove_stale_generations();
        self.delete_dropped();
        Ok(())
    }

    /// Write generation `self.generation + 1` and point CURRENT at it.
    fn write_generation(&mut self) -> Result<(u64, MapsOnDisk), FsError> {
        let next = self.generation + 1;
        let gdir = self.dir.join(gen_name(next));
        if !matches!(fsio::entry(&gdir)?, Entry::Missing) {
            fsio::remove_dir_all(&gdir)?;
        }
        fsio::create_dir(&gdir)?;
        let prev = self.dir.join(gen_name(self.generation));
        let changes = self.ctrl.ftl_counters().map_changes();
        let (cst, fst, maps) = self.ctrl.persist_parts();
        let sums = match maps {
            Some((l2p, p2l)) if self.generation == 0 || changes != self.maps_on_disk.changes => {
                let a = save_array(l2p, &gdir.join("l2p.bin"))?;
                let b = save_array(p2l, &gdir.join("p2l.bin"))?;
                MapsOnDisk { l2p_xxh3: format!("{a:016x}"), p2l_xxh3: format!("{b:016x}"), changes }
            }
            _ => {
                // The maps are where the committed generation left them (`commit` checked
                // that the change count has not moved): link the files.
                for f in ["l2p.bin", "p2l.bin"] {
                    fsio::hard_link(&prev.join(f), &gdir.join(f))?;
                }
                self.maps_on_disk.clone()
            }
        };
        let cfg = self.ctrl.ftl_config();
        let g = Generation {
            controller: cst.clone(),
            ftl: fst.clone(),
            l2p_entries: cfg.logical_ius as u64,
            p2l_entries: cfg.physical_ius() as u64,
            l2p_xxh3: sums.l2p_xxh3.clone(),
            p2l_xxh3: sums.p2l_xxh3.clone(),
            maps_changes: Some(sums.changes),
            data_files: self.data_files.clone(),
        };
        fsio::write_file_synced(&gdir.join("state.json"), &encode_state(&g))?;
        fsio::sync_dir(&gdir)?;
        let tmp = self.dir.join("CURRENT.tmp");
        if !matches!(fsio::entry(&tmp)?, Entry::Missing) {
            fsio::remove_file(&tmp)?; // a link planted there is removed, never written through
        }
        fsio::write_file_synced(&tmp, format!("{}\n", gen_name(next)).as_bytes())?;
        fsio::rename(&tmp, &self.dir.join(CURRENT))?;
        fsio::sync_dir(&self.dir)?;
        Ok((next, sums))
    }

    fn remove_stale_generations(&self) {
        let keep = gen_name(self.generation);
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if name.starts_with("gen-") && name != keep {
                    let _ = fsio::remove_dir_all(&e.path());
                }
            }
        }
    }
}

/// Counts of the record kinds a repair drops, in words.
fn summarize(records: &[Record]) -> String {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for r in records {
        let k = match r {
            Record::Write { .. } => "writes",
            Record::Read { .. } => "reads",
            Record::Deallocate { .. } => "deallocates",
            Record::IdleGc { .. } => "background-GC steps",
            Record::Clock { .. } => "clock records",
            Record::Check { .. } => "flush checkpoints",
        };
        *counts.entry(k).or_default() += 1;
    }
    if counts.is_empty() {
        return "no intact record".into();
    }
    counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
}

fn read_manifest(dir: &Path) -> Result<Manifest, ImageError> {
    let foreign = |reason: &str| ImageError::Foreign { path: dir.to_path_buf(), reason: reason.into() };
    match fsio::entry(dir)? {
        Entry::Dir => {}
        Entry::Missing => return Err(foreign("no such directory")),
        Entry::Symlink if fs::metadata(dir).is_ok_and(|m| m.is_dir()) => {} // the image itself may be linked
        _ => return Err(foreign("not a directory")),
    }
    let mpath = dir.join(MANIFEST);
    let text = match fsio::read_to_string(&mpath) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(foreign(&format!("no {MANIFEST}"))),
        Err(e) => return Err(e.into()),
    };
    let manifest: Manifest =
        toml::from_str(&text).map_err(|e| ImageError::Damaged { path: mpath.clone(), reason: e.message().replace('\n', " ") })?;
    if manifest.format != FORMAT {
        return Err(foreign(&format!("format is '{}'", manifest.format)));
    }
    if manifest.version == 0 || manifest.version > VERSION {
        return Err(foreign(&format!("image version {} but this ssdtwin reads versions 1 to {VERSION}", manifest.version)));
    }
    Ok(manifest)
}

/// The committed generation: its number and directory.
fn read_current(dir: &Path) -> Result<(u64, PathBuf), ImageError> {
    let cpath = dir.join(CURRENT);
    let cur = fsio::read_to_string(&cpath).map_err(|e| ImageError::Damaged { path: cpath.clone(), reason: describe_fs(&e) })?;
    let cur = cur.trim();
    let generation: u64 = cur
        .strip_prefix("gen-")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| ImageError::Damaged { path: cpath.clone(), reason: format!("'{cur}' is not a generation name") })?;
    let gdir = dir.join(cur);
    match fsio::real_dir(&gdir) {
        Ok(true) => Ok((generation, gdir)),
        Ok(false) => Err(ImageError::Damaged { path: gdir, reason: "missing (CURRENT names it)".into() }),
        Err(e) => Err(ImageError::Damaged { path: gdir, reason: describe_fs(&e) }),
    }
}

/// The OS part of a file-system error (its path is said elsewhere).
fn describe_fs(e: &FsError) -> String {
    let s = e.to_string();
    let prefix = format!("{}: ", e.path.display());
    s.strip_prefix(&prefix).map(str::to_string).unwrap_or(s)
}

fn lock_dir(dir: &Path) -> Result<File, ImageError> {
    let path = dir.join(LOCK);
    let f = match fsio::open_rw(&path, true) {
        Ok(f) => f,
        Err(e) => {
            if let Some(ne) = not_writable(dir, &e) {
                return Err(ne);
            }
            if e.errno() == Some(libc::EISDIR) {
                return Err(ImageError::NotWritable {
                    path: dir.to_path_buf(),
                    reason: format!("{} is a directory, not ssdtwin's lock file; remove it", path.display()),
                });
            }
            return Err(e.into());
        }
    };
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let pid = fs::read_to_string(&path).unwrap_or_default().trim().to_string();
        return Err(ImageError::Locked { path: dir.to_path_buf(), pid: if pid.is_empty() { "unknown".into() } else { pid } });
    }
    fsio::set_len(&f, &path, 0)?;
    fsio::write_all_at(&f, &path, std::process::id().to_string().as_bytes(), 0)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::DeviceTiming;
    use crate::journal::{JournalWriter, HEADER_LEN};
    use crate::nvme::Pattern;

    const PRESET: &str = "kioxia-cm6-r-3.84t";

    /// A small written image: sequential fill, then random writes (GC has work to do).
    fn written(dir: &Path) -> Image {
        let spec = DriveSpec::preset(PRESET).unwrap().scaled(256).unwrap();
        let mut img = Image::create(dir, spec, PRESET, 1).unwrap();
        let cap = img.ctrl.attached(NsId(1)).unwrap().bytes();
        img.ctrl.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
        img.ctrl.precondition(NsId(1), Pattern::Random, 4096, cap, 2, &mut |_, _| true).unwrap();
        img.commit().unwrap();
        img
    }

    /// Background GC in an idle gap, as the engine and the server run it.
    fn idle_gc(img: &mut Image) -> u64 {
        let mut t = DeviceTiming::new(img.ctrl.spec(), img.ctrl.ftl_config()).unwrap();
        let moved = t.idle(&mut img.ctrl, 0, 2_000_000_000).unwrap();
        assert!(moved > 0, "the test needs idle GC to move data");
        moved
    }

    #[test]
    fn all_zero_finds_any_nonzero_byte() {
        let mut b = vec![0u8; (1 << 20) + 13];
        assert!(all_zero(&b) && all_zero(&[]));
        for at in [0, 1, 4095, 4096, 517_000, b.len() - 1] {
            b[at] = 0x80;
            assert!(!all_zero(&b), "byte {at}");
            b[at] = 0;
        }
    }

    #[test]
    fn a_sparse_map_loads_its_data_and_leaves_its_holes_unmapped() {
        // 16 MiB of entries: data in the first MiB, at 3 MiB + 4 bytes (one nonzero entry)
        // and in the last MiB; every other 1 MiB run is zero, so `save_array` leaves a hole.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.bin");
        let len = 4 << 20;
        let mut a = BigArray::zeroed(len).unwrap();
        for i in (0..1 << 18).chain(len - (1 << 18)..len) {
            a[i] = (i as u32).wrapping_mul(2_654_435_761) | 1;
        }
        a[(3 << 18) + 1] = 7;
        let saved = save_array(&a, &path).unwrap();
        assert_eq!(saved, a.checksum());
        let (b, loaded) = load_array(&path, len).unwrap();
        // The holes were not copied into memory: only the (at most 2 MiB) pages holding
        // data are resident, 3 of the 8 (checked before anything reads the holes, which
        // would map the shared zero page there).
        let resident = b.resident_pages();
        let (pages, touched) = (resident.len(), resident.iter().filter(|&&r| r).count());
        assert!(touched <= 3 * 512, "{touched} of {pages} pages resident after loading a map that is 13/16 holes");
        assert_eq!(loaded, saved, "the checksum covers the holes as zeros");
        assert!(b.as_bytes() == a.as_bytes(), "every entry back");
        // A truncated file is damaged, not a short read.
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len((len * 4 - 4096) as u64).unwrap();
        assert!(matches!(load_array(&path, len), Err(MapError::Damaged { .. })));
    }

    #[test]
    fn idle_gc_then_commit_saves_the_maps() {
        // Issue 8 bug 1: idle GC moved data without any host write, and the commit linked
        // the old maps under the new state.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        idle_gc(&mut img);
        let want = img.ctrl.ftl_fingerprint().unwrap();
        img.commit().unwrap();
        drop(img);
        let mut back = Image::open(&d, true).unwrap();
        assert_eq!(back.ctrl.ftl_fingerprint().unwrap(), want);
        back.ctrl.check_full().unwrap();
    }

    /// Rewrite the committed state.json with `f` applied, keeping its checksum valid (as an
    /// older ssdtwin, or a bug, would have written it).
    fn rewrite_state(d: &Path, legacy: bool, f: impl FnOnce(&mut Generation)) {
        let (_, gdir) = read_current(d).unwrap();
        let p = gdir.join("state.json");
        let mut g = decode_state(&std::fs::read(&p).unwrap(), &p).unwrap();
        f(&mut g);
        let bytes = if legacy { serde_json::to_vec(&g).unwrap() } else { encode_state(&g) };
        std::fs::write(&p, bytes).unwrap();
    }

    #[test]
    fn a_legacy_generation_whose_maps_are_stale_is_refused_when_they_load() {
        // What the bug left: a version-1 state.json whose FTL state moved on (idle GC) while
        // its maps are the previous generation's.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        let ctrl_before = img.ctrl.state().clone();
        idle_gc(&mut img);
        let moved_state = img.ctrl.ftl_state().clone();
        drop(img);
        rewrite_state(&d, true, |g| {
            g.ftl = moved_state;
            g.controller = ctrl_before;
            g.maps_changes = None;
        });
        // Metadata still reads (the maps stay on disk)...
        let mut ro = Image::open(&d, false).unwrap();
        // ...and the first command that loads the maps refuses them, naming the generation.
        let e = ro.ctrl.check_full().unwrap_err().to_string();
        assert!(e.contains("drive image damaged") && e.contains("the maps disagree with the saved FTL state"), "{e}");
    }

    #[test]
    fn a_generation_whose_state_moved_on_from_its_maps_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        drop(written(&d));
        rewrite_state(&d, false, |g| g.maps_changes = g.maps_changes.map(|c| c - 1));
        let e = Image::open(&d, false).unwrap_err().to_string();
        assert!(e.contains("moved on from its maps"), "{e}");
    }

    #[test]
    fn state_json_carries_a_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        drop(written(&d));
        let (_, gdir) = read_current(&d).unwrap();
        let p = gdir.join("state.json");
        let text = std::fs::read_to_string(&p).unwrap();
        // A change that keeps the JSON valid: only the checksum can tell.
        let i = text.find("\"power_cycles\":0").expect("a zero counter to change");
        let bad = format!("{}\"power_cycles\":7{}", &text[..i], &text[i + "\"power_cycles\":0".len()..]);
        std::fs::write(&p, bad).unwrap();
        let e = Image::open(&d, false).unwrap_err().to_string();
        assert!(e.contains("drive image damaged") && e.contains("state.json") && e.contains("checksum"), "{e}");
    }

    #[test]
    fn inconsistent_state_is_refused_at_open_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        drop(written(&d));
        rewrite_state(&d, false, |g| {
            let mut v = serde_json::to_value(&g.ftl).unwrap();
            v["sbs"][0]["valid"] = serde_json::json!(v["sbs"][0]["valid"].as_u64().unwrap() + 1);
            g.ftl = serde_json::from_value(v).unwrap();
        });
        for writable in [false, true] {
            let e = Image::open(&d, writable).unwrap_err().to_string();
            assert!(e.contains("inconsistent state") && e.contains("valid units"), "{e}");
        }
    }

    /// A journal of `n` writes for the committed generation, flushed to its file.
    fn journal_of_writes(img: &mut Image, n: u64) -> PathBuf {
        let mut j = JournalWriter::create(img.dir(), img.generation()).unwrap();
        for k in 0..n {
            img.ctrl.write(NsId(1), k * 8, 8, &mut crate::nand::NoTiming).unwrap();
            j.append(&Record::Write { nsid: 1, slba: k * 8, nlb: 8 });
        }
        j.write_out().unwrap();
        j.path().to_path_buf()
    }

    #[test]
    fn a_damaged_journal_is_refused_then_repaired_with_a_copy_kept() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        let path = journal_of_writes(&mut img, 100);
        drop(img);
        // Flip a byte in the 40th record: the 60 after it are intact.
        let mut b = std::fs::read(&path).unwrap();
        let rec_len = (b.len() - HEADER_LEN) / 100;
        let at = HEADER_LEN + 40 * rec_len + 5;
        b[at] ^= 0x40;
        std::fs::write(&path, &b).unwrap();
        let offset = HEADER_LEN + 40 * rec_len;
        for writable in [false, true] {
            let e = Image::open(&d, writable).unwrap_err().to_string();
            assert!(
                e.contains(&format!("journal.bin: damaged at byte {offset}"))
                    && e.contains("59 intact records")
                    && e.contains("check --repair"),
                "{e}"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), b, "a refused journal is left as it was");
        let mut img = Image::open_with(&d, OpenMode::Repair).unwrap();
        let rec = img.recovery().unwrap().clone();
        assert_eq!(rec.action, RecoveryAction::Repaired);
        assert_eq!((rec.records, rec.dropped_records), (40, 59));
        let copy = rec.kept_copy.clone().unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), b, "the damaged journal is kept");
        assert!(rec.detail.contains("59 writes"), "{}", rec.detail);
        assert!(!path.exists());
        img.ctrl.check_full().unwrap();
        assert_eq!(img.ctrl.smart_log().host_write_commands, { Image::open(&d, false).unwrap().ctrl.smart_log().host_write_commands });
    }

    #[test]
    fn a_long_garbage_tail_is_damage_a_short_one_is_a_torn_append() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        let path = journal_of_writes(&mut img, 10);
        drop(img);
        let clean = std::fs::read(&path).unwrap();
        let mut long = clean.clone();
        long.extend_from_slice(&[0xAB; journal::MAX_RECORD_LEN + 1]);
        std::fs::write(&path, &long).unwrap();
        let e = Image::open(&d, true).unwrap_err().to_string();
        assert!(e.contains("damaged at byte") && e.contains("0 intact records"), "{e}");
        let mut short = clean;
        short.extend_from_slice(&[0xAB; journal::MAX_RECORD_LEN - 1]);
        std::fs::write(&path, &short).unwrap();
        let img = Image::open(&d, true).unwrap();
        let rec = img.recovery().unwrap();
        assert_eq!((rec.action, rec.records, rec.ignored_bytes), (RecoveryAction::Replayed, 10, journal::MAX_RECORD_LEN as u64 - 1));
    }

    #[test]
    fn links_inside_the_image_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let outside = dir.path().join("victim.txt");
        std::fs::write(&outside, b"precious").unwrap();
        let mut img = written(&d);
        // CURRENT.tmp planted as a link: the commit replaces the link, never writes through it.
        std::os::unix::fs::symlink(&outside, d.join("CURRENT.tmp")).unwrap();
        img.commit().unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
        // A data file planted as a link is refused.
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("data/ns1.img")).unwrap();
        let e = img.prepare_data_files().unwrap_err().to_string();
        assert!(e.contains("ns1.img") && e.contains("symbolic link"), "{e}");
        drop(img);
        // LOCK as a link: refused.
        std::fs::remove_file(d.join("LOCK")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("LOCK")).unwrap();
        let e = Image::open(&d, true).unwrap_err().to_string();
        assert!(e.contains("LOCK") && e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
    }

    #[test]
    fn a_lock_that_is_a_directory_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        drop(written(&d));
        std::fs::remove_file(d.join("LOCK")).unwrap();
        std::fs::create_dir(d.join("LOCK")).unwrap();
        let e = Image::open(&d, true).unwrap_err().to_string();
        assert!(e.contains("LOCK is a directory") && !e.contains('\n'), "{e}");
        Image::open(&d, false).unwrap(); // readers need no lock
    }

    #[test]
    fn a_recorded_data_file_that_is_missing_or_resized_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        let files = img.prepare_data_files().unwrap();
        let (_, p) = &files[0];
        let bytes = std::fs::metadata(p).unwrap().len();
        drop(img);
        std::fs::write(p, b"short").unwrap();
        let mut img = Image::open(&d, true).unwrap();
        let e = img.prepare_data_files().unwrap_err().to_string();
        assert!(e.contains("ns1.img: 5 bytes, but namespace 1 has") && e.contains("nvme format"), "{e}");
        std::fs::remove_file(p).unwrap();
        let e = img.prepare_data_files().unwrap_err().to_string();
        assert!(e.contains("ns1.img: missing") && e.contains("restore the file"), "{e}");
        // Formatting the namespace drops the record: serving starts it empty.
        img.ctrl.format(NsId(1), 0, 0).unwrap();
        img.drop_data(1).unwrap();
        img.prepare_data_files().unwrap();
        assert_eq!(std::fs::metadata(p).unwrap().len(), bytes);
    }

    #[test]
    fn dropping_data_is_durable_with_the_command_that_drops_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("img");
        let mut img = written(&d);
        let files = img.prepare_data_files().unwrap();
        let p = files[0].1.clone();
        let size = std::fs::metadata(&p).unwrap().len();
        // The file is sparse and namespace-sized (gigabytes): mark its first block only.
        let first_block = |p: &Path| {
            let mut b = [0u8; 4096];
            std::io::Read::read_exact(&mut std::fs::File::open(p).unwrap(), &mut b).unwrap();
            b
        };
        std::os::unix::fs::FileExt::write_all_at(&std::fs::OpenOptions::new().write(true).open(&p).unwrap(), &[7u8; 4096], 0).unwrap();
        // Format, then die before the commit: the format never happened, so the data is back.
        img.ctrl.format(NsId(1), 0, 0).unwrap();
        img.drop_data(1).unwrap();
        assert!(!p.exists());
        drop(img);
        let mut img = Image::open(&d, true).unwrap();
        assert_eq!(first_block(&p)[..4], [7, 7, 7, 7], "an uncommitted drop is rolled back");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), size);
        assert!(img.ctrl.namespace_rows()[0].nuse > 0);
        // Format and commit: the data is gone for good, and serving starts it empty.
        img.ctrl.format(NsId(1), 0, 0).unwrap();
        img.drop_data(1).unwrap();
        img.commit().unwrap();
        assert!(!p.exists() && std::fs::read_dir(p.parent().unwrap()).unwrap().next().is_none(), "no leftovers after the commit");
        img.prepare_data_files().unwrap();
        assert!(first_block(&p).iter().all(|&b| b == 0));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), size);
    }
}
