//! The drive image on disk.
//!
//! ```text
//! DIR/ssdtwin.toml      manifest: format, version, preset, scale, seed (never rewritten)
//! DIR/spec.toml         the effective drive spec (after scaling)
//! DIR/CURRENT           name of the committed generation, e.g. "gen-000012"
//! DIR/gen-000012/       state.json (controller + FTL state + map checksums), l2p.bin, p2l.bin
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

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::ftl::bigarray::BigArray;
use crate::journal;
use crate::ftl::{FtlConfig, FtlState};
use crate::nvme::{Controller, ControllerState, MapStore};
use crate::spec::{DriveSpec, SpecError};

pub const FORMAT: &str = "ssdtwin-image";
pub const VERSION: u32 = 1;
const MANIFEST: &str = "ssdtwin.toml";
const SPEC: &str = "spec.toml";
const CURRENT: &str = "CURRENT";
const LOCK: &str = "LOCK";
const DATA: &str = "data";

/// `ns<N>.img` → N.
fn data_file_nsid(name: &str) -> Option<u32> {
    name.strip_prefix("ns")?.strip_suffix(".img")?.parse().ok()
}

/// Whether another open file description holds the image lock (a live writer).
pub fn lock_held(dir: &Path) -> bool {
    let Ok(f) = File::open(dir.join(LOCK)) else { return false };
    // SAFETY: flock on a descriptor we own; a shared lock is released when `f` closes.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    rc != 0
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path} is not an ssdtwin drive image ({reason})")]
    Foreign { path: String, reason: String },
    #[error("drive image damaged: {path}: {reason}")]
    Damaged { path: String, reason: String },
    #[error("{path} already exists; choose a new directory (or remove it first)")]
    Exists { path: String },
    #[error("{path} is in use by another ssdtwin process (pid {pid}); stop it first")]
    Locked { path: String, pid: String },
    #[error("{path} was opened read-only; open it writable to commit")]
    ReadOnly { path: String },
    #[error(transparent)]
    Spec(#[from] SpecError),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ImageError + '_ {
    move |source| ImageError::Io { path: path.display().to_string(), source }
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

#[derive(Serialize, Deserialize)]
struct Generation {
    controller: ControllerState,
    ftl: FtlState,
    l2p_entries: u64,
    p2l_entries: u64,
    l2p_xxh3: String,
    p2l_xxh3: String,
}

/// An open drive image: its directory, manifest and controller.
pub struct Image {
    dir: PathBuf,
    pub manifest: Manifest,
    pub ctrl: Controller,
    generation: u64,
    lock: Option<File>,
    recovery: Option<Recovery>,
    /// The committed generation's map checksums (l2p, p2l), as its state.json records them:
    /// a commit with unchanged maps links the files and reuses these.
    map_sums: (String, String),
}

/// What [`Image::open`] did with a journal left by a server that did not shut down cleanly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// "replayed" (writable open: replayed and committed as a new generation), "replayed in
    /// memory" (read-only open of an unlocked image), or "discarded" (stale or unreadable).
    pub action: String,
    /// The journal's generation (if its header could be read) and the image's before opening.
    pub journal_generation: Option<u64>,
    pub image_generation: u64,
    pub records: u64,
    /// Bytes after the last intact record (a record torn by the kill), ignored.
    pub ignored_bytes: u64,
    pub detail: String,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "journal {}: {}", self.action, self.detail)
    }
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image").field("dir", &self.dir).field("generation", &self.generation).finish()
    }
}

struct DiskMaps {
    l2p: PathBuf,
    p2l: PathBuf,
    l2p_xxh3: String,
    p2l_xxh3: String,
}

impl MapStore for DiskMaps {
    fn load_maps(&self, cfg: &FtlConfig) -> Result<(BigArray, BigArray), ImageError> {
        let load = |path: &Path, len: usize, want: &str| -> Result<BigArray, ImageError> {
            let (a, sum) = BigArray::load(path, len).map_err(|e| match e.kind() {
                io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => {
                    ImageError::Damaged { path: path.display().to_string(), reason: e.to_string() }
                }
                _ => ImageError::Io { path: path.display().to_string(), source: e },
            })?;
            if format!("{sum:016x}") != want {
                return Err(ImageError::Damaged {
                    path: path.display().to_string(),
                    reason: format!("checksum {sum:016x} does not match the committed {want}"),
                });
            }
            Ok(a)
        };
        Ok((load(&self.l2p, cfg.logical_ius as usize, &self.l2p_xxh3)?, load(&self.p2l, cfg.physical_ius() as usize, &self.p2l_xxh3)?))
    }
}

fn gen_name(n: u64) -> String {
    format!("gen-{n:06}")
}

fn fsync_dir(dir: &Path) -> Result<(), ImageError> {
    File::open(dir).and_then(|f| f.sync_all()).map_err(io_err(dir))
}

fn write_file_synced(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    let mut f = File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

impl Image {
    /// Create a new image at `dir` (which must not exist or be an empty directory).
    pub fn create(dir: &Path, spec: DriveSpec, preset: &str, seed: u64) -> Result<Image, ImageError> {
        if dir.exists() {
            let empty = dir.is_dir() && fs::read_dir(dir).map_err(io_err(dir))?.next().is_none();
            if !empty {
                return Err(ImageError::Exists { path: dir.display().to_string() });
            }
        }
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let manifest = Manifest { format: FORMAT.into(), version: VERSION, preset: preset.into(), scale: spec.scale, seed };
        let ctrl = Controller::new(spec.clone(), seed).map_err(|e| match e {
            crate::nvme::Error::Image(i) => i,
            other => ImageError::Damaged { path: dir.display().to_string(), reason: other.to_string() },
        })?;
        write_file_synced(&dir.join(SPEC), spec.to_toml().as_bytes())?;
        let mut img = Image { dir: dir.to_path_buf(), manifest, ctrl, generation: 0, lock: None, recovery: None, map_sums: Default::default() };
        img.take_lock()?;
        img.commit()?;
        // The manifest goes last: a directory without it is not (yet) an image.
        let text = toml::to_string(&img.manifest).expect("manifest serialises");
        write_file_synced(&dir.join(MANIFEST), text.as_bytes())?;
        fsync_dir(dir)?;
        Ok(img)
    }

    /// Open an existing image. `writable` takes the image lock (one writer at a time).
    pub fn open(dir: &Path, writable: bool) -> Result<Image, ImageError> {
        if !dir.is_dir() {
            let reason = if dir.exists() { "not a directory" } else { "no such directory" };
            return Err(ImageError::Foreign { path: dir.display().to_string(), reason: reason.into() });
        }
        let mpath = dir.join(MANIFEST);
        let text = fs::read_to_string(&mpath).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ImageError::Foreign { path: dir.display().to_string(), reason: format!("no {MANIFEST}") },
            _ => ImageError::Io { path: mpath.display().to_string(), source: e },
        })?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| ImageError::Damaged {
            path: mpath.display().to_string(),
            reason: e.message().replace('\n', " "),
        })?;
        if manifest.format != FORMAT {
            return Err(ImageError::Foreign { path: dir.display().to_string(), reason: format!("format is '{}'", manifest.format) });
        }
        if manifest.version != VERSION {
            return Err(ImageError::Foreign {
                path: dir.display().to_string(),
                reason: format!("image version {} but this ssdtwin reads version {VERSION}", manifest.version),
            });
        }
        let spath = dir.join(SPEC);
        let spec_text = fs::read_to_string(&spath).map_err(io_err(&spath))?;
        // A spec this build cannot read (e.g. written before a parameter was added) is an
        // incompatible image, not a damaged one: say so.
        let spec = DriveSpec::from_toml(&spec_text, &spath.display().to_string()).map_err(|e| ImageError::Foreign {
            path: dir.display().to_string(),
            reason: format!("its spec.toml does not match this ssdtwin's drive model ({e}); re-create the image"),
        })?;
        let mut img_lock = None;
        if writable {
            img_lock = Some(lock_dir(dir)?);
        }
        let cpath = dir.join(CURRENT);
        let cur = fs::read_to_string(&cpath).map_err(|e| ImageError::Damaged { path: cpath.display().to_string(), reason: e.to_string() })?;
        let cur = cur.trim();
        let generation: u64 = cur
            .strip_prefix("gen-")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| ImageError::Damaged { path: cpath.display().to_string(), reason: format!("'{cur}' is not a generation name") })?;
        let gdir = dir.join(cur);
        let gpath = gdir.join("state.json");
        let gtext = fs::read(&gpath).map_err(|e| ImageError::Damaged { path: gpath.display().to_string(), reason: e.to_string() })?;
        let g: Generation = serde_json::from_slice(&gtext).map_err(|e| ImageError::Damaged { path: gpath.display().to_string(), reason: e.to_string() })?;
        let cfg = FtlConfig::from_spec(&spec);
        if g.l2p_entries != cfg.logical_ius as u64 || g.p2l_entries != cfg.physical_ius() as u64 {
            return Err(ImageError::Damaged { path: gpath.display().to_string(), reason: "map sizes disagree with spec.toml".into() });
        }
        let map_sums = (g.l2p_xxh3.clone(), g.p2l_xxh3.clone());
        let store = DiskMaps { l2p: gdir.join("l2p.bin"), p2l: gdir.join("p2l.bin"), l2p_xxh3: g.l2p_xxh3, p2l_xxh3: g.p2l_xxh3 };
        for p in [&store.l2p, &store.p2l] {
            if !p.is_file() {
                return Err(ImageError::Damaged { path: p.display().to_string(), reason: "missing".into() });
            }
        }
        let ctrl = Controller::from_parts(spec, g.controller, g.ftl, Box::new(store)).map_err(|e| match e {
            ImageError::Damaged { reason, .. } => ImageError::Damaged { path: gpath.display().to_string(), reason },
            other => other,
        })?;
        let mut img = Image { dir: dir.to_path_buf(), manifest, ctrl, generation, lock: img_lock, recovery: None, map_sums };
        if writable {
            img.remove_stale_generations();
        }
        img.recover_journal(writable)?;
        Ok(img)
    }

    /// Replay a journal left by a server that was killed (see [`crate::journal`]).
    ///
    /// Writable: replay, count an unsafe shutdown (the drive lost power without a shutdown
    /// notification), commit a new generation and remove the journal. Read-only: replay in
    /// memory only, and only if no process holds the image lock (a live server is still
    /// appending; readers use its `live.json` instead). A journal of another generation is
    /// stale (its effects are committed) and is removed by a writer.
    fn recover_journal(&mut self, writable: bool) -> Result<(), ImageError> {
        let path = self.dir.join(journal::FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(ImageError::Io { path: path.display().to_string(), source: e }),
        };
        if !writable && lock_held(&self.dir) {
            return Ok(());
        }
        let image_generation = self.generation;
        let mut rec = Recovery {
            action: "discarded".into(),
            journal_generation: None,
            image_generation,
            records: 0,
            ignored_bytes: 0,
            detail: String::new(),
        };
        match journal::parse_header(&bytes) {
            Err(why) => rec.detail = format!("{} is not a journal header ({why}); nothing to replay", path.display()),
            Ok(g) if g != image_generation => {
                rec.journal_generation = Some(g);
                rec.detail = format!("{} belongs to generation {g}, the image is at {image_generation}: its commands are already committed", path.display());
            }
            Ok(g) => {
                rec.journal_generation = Some(g);
                let (records, ignored) = journal::parse_records(&bytes[journal::HEADER_LEN..]);
                journal::replay(&mut self.ctrl, &records).map_err(|e| ImageError::Damaged {
                    path: path.display().to_string(),
                    reason: format!("does not replay onto generation {g}: {e}; move the file away to open the committed state without it"),
                })?;
                self.ctrl.power_cycle(true);
                rec.records = records.len() as u64;
                rec.ignored_bytes = ignored as u64;
                rec.action = if writable { "replayed".into() } else { "replayed in memory".into() };
                rec.detail = format!(
                    "{} records of a server that did not shut down cleanly replayed onto generation {g}{}",
                    records.len(),
                    if ignored > 0 { format!(" ({ignored} bytes of a torn last record ignored)") } else { String::new() }
                );
                if writable {
                    self.commit()?;
                }
            }
        }
        if writable {
            fs::remove_file(&path).map_err(io_err(&path))?;
            fsync_dir(&self.dir)?;
        }
        self.recovery = Some(rec);
        Ok(())
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

    /// Remove the data of namespace `nsid` (`NSID_ALL`: every namespace): after Namespace
    /// Management delete, Format NVM (a purge: the data is gone, not just unmapped) and
    /// before a create reuses the NSID. Call it after the controller command succeeded.
    pub fn drop_data(&self, nsid: u32) -> Result<(), ImageError> {
        let dd = self.data_dir();
        if !dd.is_dir() {
            return Ok(());
        }
        let mut removed = false;
        for e in fs::read_dir(&dd).map_err(io_err(&dd))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let id = data_file_nsid(&name);
            if id.is_some() && (nsid == crate::nvme::NSID_ALL || id == Some(nsid)) {
                fs::remove_file(e.path()).map_err(io_err(&e.path()))?;
                removed = true;
            }
        }
        if removed {
            fsync_dir(&dd)?;
        }
        Ok(())
    }

    /// Bring `DIR/data` in line with the namespace table before serving: remove the files of
    /// namespaces that no longer exist, create a sparse file of the namespace's size for
    /// every attached namespace that has none, and empty a file whose size no longer
    /// matches (the namespace was re-created or reformatted by a tool that did not drop it).
    /// Returns (nsid, path) of the attached namespaces.
    pub fn prepare_data_files(&self) -> Result<Vec<(u32, PathBuf)>, ImageError> {
        let dd = self.data_dir();
        if !dd.is_dir() {
            fs::create_dir(&dd).map_err(io_err(&dd))?;
            fsync_dir(&self.dir)?;
        }
        for e in fs::read_dir(&dd).map_err(io_err(&dd))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(id) = data_file_nsid(&name) {
                if self.ctrl.namespace(id).is_err() {
                    fs::remove_file(e.path()).map_err(io_err(&e.path()))?;
                }
            }
        }
        let mut out = Vec::new();
        for ns in self.ctrl.namespaces().filter(|n| n.attached) {
            let p = self.data_path(ns.nsid);
            let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&p).map_err(io_err(&p))?;
            let len = f.metadata().map_err(io_err(&p))?.len();
            if len != ns.bytes() {
                if len != 0 {
                    f.set_len(0).map_err(io_err(&p))?;
                }
                f.set_len(ns.bytes()).map_err(io_err(&p))?;
                f.sync_all().map_err(io_err(&p))?;
            }
            out.push((ns.nsid, p));
        }
        fsync_dir(&dd)?;
        Ok(out)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn take_lock(&mut self) -> Result<(), ImageError> {
        if self.lock.is_none() {
            self.lock = Some(lock_dir(&self.dir)?);
        }
        Ok(())
    }

    /// Make the current state the committed state (crash-safe, see the module docs).
    pub fn commit(&mut self) -> Result<(), ImageError> {
        if self.lock.is_none() {
            return Err(ImageError::ReadOnly { path: self.dir.display().to_string() });
        }
        self.ctrl.prepare_persist();
        let next = self.generation + 1;
        let gdir = self.dir.join(gen_name(next));
        if gdir.exists() {
            fs::remove_dir_all(&gdir).map_err(io_err(&gdir))?;
        }
        fs::create_dir(&gdir).map_err(io_err(&gdir))?;
        let prev = self.dir.join(gen_name(self.generation));
        let (cst, fst, maps) = self.ctrl.persist_parts();
        let (l2p_sum, p2l_sum) = match maps {
            Some((l2p, p2l)) if self.ctrl.maps_dirty() || self.generation == 0 => {
                let a = l2p.save(&gdir.join("l2p.bin")).map_err(io_err(&gdir))?;
                let b = p2l.save(&gdir.join("p2l.bin")).map_err(io_err(&gdir))?;
                (format!("{a:016x}"), format!("{b:016x}"))
            }
            _ => {
                // Unchanged maps: hard-link the committed files (no copy, same bytes).
                for f in ["l2p.bin", "p2l.bin"] {
                    fs::hard_link(prev.join(f), gdir.join(f)).map_err(io_err(&prev.join(f)))?;
                }
                self.map_sums.clone()
            }
        };
        let cfg = self.ctrl.ftl_config();
        let g = Generation {
            controller: cst.clone(),
            ftl: fst.clone(),
            l2p_entries: cfg.logical_ius as u64,
            p2l_entries: cfg.physical_ius() as u64,
            l2p_xxh3: l2p_sum,
            p2l_xxh3: p2l_sum,
        };
        let json = serde_json::to_vec(&g).expect("state serialises");
        write_file_synced(&gdir.join("state.json"), &json)?;
        fsync_dir(&gdir)?;
        let tmp = self.dir.join("CURRENT.tmp");
        write_file_synced(&tmp, format!("{}\n", gen_name(next)).as_bytes())?;
        fs::rename(&tmp, self.dir.join(CURRENT)).map_err(io_err(&tmp))?;
        fsync_dir(&self.dir)?;
        self.generation = next;
        self.map_sums = (g.l2p_xxh3.clone(), g.p2l_xxh3.clone());
        self.ctrl.mark_saved();
        // Future map loads read the new generation's files (the old ones are removed next).
        self.ctrl.set_map_store(Box::new(DiskMaps {
            l2p: gdir.join("l2p.bin"),
            p2l: gdir.join("p2l.bin"),
            l2p_xxh3: g.l2p_xxh3,
            p2l_xxh3: g.p2l_xxh3,
        }));
        self.remove_stale_generations();
        Ok(())
    }

    fn remove_stale_generations(&self) {
        let keep = gen_name(self.generation);
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if name.starts_with("gen-") && name != keep {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
}

fn lock_dir(dir: &Path) -> Result<File, ImageError> {
    let path = dir.join(LOCK);
    let mut f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io_err(&path))?;
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let pid = fs::read_to_string(&path).unwrap_or_default().trim().to_string();
        return Err(ImageError::Locked { path: dir.display().to_string(), pid: if pid.is_empty() { "unknown".into() } else { pid } });
    }
    f.set_len(0).map_err(io_err(&path))?;
    write!(f, "{}", std::process::id()).map_err(io_err(&path))?;
    Ok(f)
}
