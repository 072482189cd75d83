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
//! * a read-only open is a snapshot of one generation: it holds the generation's map files
//!   open until the maps load (`maps.rs`, `DiskMaps`), so a writer in another process that
//!   commits and removes that generation meanwhile takes nothing from it.
//!
//! This file holds [`Image`]: create, open, commit, the lock and the manifest; the rest,
//! one concern a file: `state_file.rs` (state.json and its checksum), `maps.rs` (the maps
//! on disk, sparse, loaded lazily from files held open), `recovery.rs` (a dead server's journal), `data.rs` (the
//! namespaces' data files).

mod data;
mod maps;
mod recovery;
mod state_file;
#[cfg(test)]
mod tests;

pub use recovery::{Recovery, RecoveryAction};

use maps::{save_array, PinnedMaps};
use state_file::{decode_state, encode_state, Generation};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::fsio::{self, Entry, FsError};
use crate::nvme::{self, Controller, FtlConfig, MapError};
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
    #[error("an empty path names no directory: give the image a directory of its own (e.g. ./cm6)")]
    EmptyPath,
    #[error("{} is in use by another ssdtwin process (pid {pid}); stop it first", path.display())]
    Locked { path: PathBuf, pid: String },
    /// The lock is held by this process (a second writable open from Python).
    #[error("{} is already open for writing in this process (pid {pid}); close that drive first", path.display())]
    LockedHere { path: PathBuf, pid: u32 },
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
        if dir.as_os_str().is_empty() {
            // Not a missing directory: each file joined to "" is a name in the working
            // directory, whose spec.toml and LOCK the image's would have replaced.
            return Err(ImageError::EmptyPath);
        }
        let made_dir = match fsio::entry(dir)? {
            Entry::Missing => true,
            Entry::Dir if fs::read_dir(dir).map_err(|e| FsError::new(dir, e))?.next().is_none() => false,
            _ => return Err(ImageError::Exists { path: dir.to_path_buf() }),
        };
        fs::create_dir_all(dir).map_err(|e| FsError::new(dir, e))?;
        let manifest = Manifest { format: FORMAT.into(), version: VERSION, preset: preset.into(), scale: spec.scale, seed };
        let ctrl = Controller::new(spec.clone(), seed)?;
        // Two creations of the same new directory both pass the check above; the lock, taken
        // before anything is written, lets one of them on, and the other finds it held (or,
        // once the first is done, the directory no longer empty) instead of writing its
        // spec.toml over the first one's image.
        let lock = match lock_dir(dir) {
            Err(ImageError::Locked { .. } | ImageError::LockedHere { .. }) => return Err(ImageError::Exists { path: dir.to_path_buf() }),
            r => r?,
        };
        let others = fs::read_dir(dir).map_err(|e| FsError::new(dir, e))?.any(|e| e.map_or(true, |e| e.file_name() != LOCK));
        if others {
            return Err(ImageError::Exists { path: dir.to_path_buf() });
        }
        if let Err(e) = fsio::write_file_synced(&dir.join(SPEC), spec.to_toml().as_bytes()) {
            remove_failed_creation(dir, made_dir, lock);
            return Err(e.into());
        }
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
        img.lock = Some(lock);
        // The manifest goes last: a directory without it is not (yet) an image.
        if let Err(e) = img.commit().and_then(|()| img.write_manifest()) {
            let lock = img.lock.take();
            drop(img);
            if let Some(lock) = lock {
                remove_failed_creation(dir, made_dir, lock);
            }
            return Err(e);
        }
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
        if mode != OpenMode::ReadOnly {
            return Self::open_once(dir, mode);
        }
        // A read-only view of an image another process writes (a served one) can read
        // CURRENT just before that writer commits: the writer points CURRENT at the next
        // generation and removes the one this open is reading, whose files then go missing.
        // A generation gone while CURRENT moved on is that race, not damage: open again.
        // So is a journal newer than the generation read: the writer committed and started
        // the next generation's journal (a server that then stopped no longer holds the
        // lock that makes a reader ignore its journal).
        let mut tries = 0;
        loop {
            let before = current_generation(dir);
            let r = Self::open_once(dir, mode);
            let raced = match &r {
                Err(ImageError::Damaged { reason, .. }) => reason.starts_with("missing"),
                Err(ImageError::JournalDamaged { .. }) => true,
                _ => false,
            };
            if !raced || tries >= READ_ONLY_RETRIES {
                return r;
            }
            let now = current_generation(dir);
            if now.is_none() || now == before {
                return r;
            }
            tries += 1;
        }
    }

    fn open_once(dir: &Path, mode: OpenMode) -> Result<Image, ImageError> {
        let manifest = read_manifest(dir)?;
        let spath = dir.join(SPEC);
        let spec_text = match fsio::read_to_string(&spath) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ImageError::Damaged { path: spath, reason: "missing".into() }),
            Err(e) => return Err(e.into()),
        };
        // ssdtwin writes spec.toml whole (synced) before the manifest: an empty file, or
        // one that is not TOML at all, is damage to this image, not a foreign directory.
        if spec_text.trim().is_empty() {
            let reason = format!("empty ({} bytes): the drive's spec is lost", spec_text.len());
            return Err(ImageError::Damaged { path: spath, reason });
        }
        if let Err(e) = spec_text.parse::<toml::Table>() {
            let reason = format!("not valid TOML ({})", e.message().trim());
            return Err(ImageError::Damaged { path: spath, reason });
        }
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
        // Pin the generation's maps now, before the state is parsed and the controller built
        // (milliseconds on a loaded machine): a writer that commits continuously removes a
        // generation every few milliseconds, and a read-only open that pinned its maps only
        // after the parse lost that race on every retry (a CI run read
        // "gen-000126/l2p.bin: missing"). From CURRENT to the pin is one small read.
        let pinned = PinnedMaps::open(&gdir)?;
        let g = decode_state(&gtext, &gpath)?;
        #[cfg(test)]
        tests::AFTER_STATE_READ.with(|h| {
            if let Some(mut f) = h.take() {
                f();
                h.set(Some(f));
            }
        });
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
        // The maps load later (when first needed), from the files pinned above: a writer in
        // another process may remove this generation meanwhile (see `DiskMaps`).
        let store = pinned.with_sums(sums.clone());
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
        #[cfg(test)]
        tests::BEFORE_JOURNAL.with(|h| h.take().map(|f| f()));
        img.recover_journal(mode)?;
        Ok(img)
    }

    /// Whether this image was opened writable (holds the lock).
    pub fn is_writable(&self) -> bool {
        self.lock.is_some()
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
        if !self.ctrl.maps_loaded() {
            // The maps were linked (unchanged): the store's open files are the new
            // generation's too. Open them by their new names, so that errors name the
            // generation that exists; should that fail, the files held serve as well.
            if let Ok(pinned) = PinnedMaps::open(&self.dir.join(gen_name(next))) {
                self.ctrl.set_map_store(Box::new(pinned.with_sums(sums)));
            }
        }
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
/// How many times a read-only open starts again after a commit of another process moved
/// CURRENT under it (`Image::open_with`); each commit writes a whole generation, so a reader
/// that loses more races than this in a row is watching a writer that commits continuously.
const READ_ONLY_RETRIES: u32 = 16;

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

/// The generation CURRENT names, read alone: unlike [`read_current`] it does not ask for the
/// generation's directory, which a writer committing twice in a row may already have removed
/// (a reader that took that for damage failed under load, one open in a few hundred).
fn current_generation(dir: &Path) -> Option<u64> {
    let cur = fsio::read_to_string(&dir.join(CURRENT)).ok()?;
    cur.trim().strip_prefix("gen-").and_then(|n| n.parse().ok())
}

/// The OS part of a file-system error (its path is said elsewhere).
fn describe_fs(e: &FsError) -> String {
    let s = e.to_string();
    let prefix = format!("{}: ", e.path.display());
    s.strip_prefix(&prefix).map(str::to_string).unwrap_or(s)
}

/// Undo a creation that failed after it took the lock (a full disk, a file-size limit): what
/// it wrote goes, so that the same command can be run again (a LOCK left behind made the
/// next creation find the directory "already exists"). Everything in `dir` is this
/// creation's: it found the directory empty under the lock it still holds. Best effort: the
/// creation's own error is the one reported.
fn remove_failed_creation(dir: &Path, made_dir: bool, lock: File) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let path = e.path();
            if e.file_name() == LOCK {
                continue;
            }
            let _ = match e.file_type() {
                Ok(t) if t.is_dir() => fsio::remove_dir_all(&path),
                _ => fsio::remove_file(&path),
            };
        }
    }
    let _ = fsio::remove_file(&dir.join(LOCK));
    drop(lock);
    if made_dir {
        let _ = fs::remove_dir(dir);
    }
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
        if pid == std::process::id().to_string() {
            return Err(ImageError::LockedHere { path: dir.to_path_buf(), pid: std::process::id() });
        }
        return Err(ImageError::Locked { path: dir.to_path_buf(), pid: if pid.is_empty() { "unknown".into() } else { pid } });
    }
    // The lock file can be writable in a directory that is not (`chmod a-w DIR`, `chattr +i
    // DIR`): the first commit failed then, after the whole run. Ask the kernel now, for this
    // process's effective ids (mode bits, ACLs, immutable, a read-only mount).
    let cdir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| FsError::new(dir, io::Error::from(io::ErrorKind::InvalidInput)))?;
    // SAFETY: a NUL-terminated path that lives across the call.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, cdir.as_ptr(), libc::W_OK | libc::X_OK, libc::AT_EACCESS) };
    if rc != 0 {
        let e = FsError::new(dir, io::Error::last_os_error());
        return Err(not_writable(dir, &e).unwrap_or_else(|| e.into()));
    }
    fsio::set_len(&f, &path, 0)?;
    fsio::write_all_at(&f, &path, std::process::id().to_string().as_bytes(), 0)?;
    Ok(f)
}
