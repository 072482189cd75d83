//! The drive model as an NBD backend: what `ssdtwin serve` runs.
//!
//! One [`TwinBackend`] serves the attached namespaces of a drive image as exports `ns1`,
//! `ns2`, … . All connections share one `Mutex<State>` holding the image (controller and
//! FTL), the timing model and the journal, so every command reaches the controller in one
//! order, the same order the journal records; the data itself lives in a sparse file per
//! namespace (`DIR/data/ns<N>.img`) that connections read and write in parallel, outside
//! the lock.
//!
//! * **Pacing** ([`Pace::Model`]): virtual time is nanoseconds since the server started;
//!   each command runs through [`DeviceTiming`] at the current virtual time and its reply
//!   is held until the model's completion time (`Done::at`). Gaps with nothing outstanding
//!   give background GC its idle time. [`Pace::Off`] runs the controller in fast-forward
//!   and replies at once.
//! * **Durability**: FLUSH (and FUA) fdatasync the data files written since the last
//!   flush and the journal (`ssdtwin_core::journal`), group-committed: a flush that finds
//!   its writes already synced by a concurrent one returns without another sync. A server
//!   killed at any moment therefore loses nothing it acknowledged as flushed, and
//!   `Image::open` replays the journal to the FTL state that goes with the data.
//! * **Ordering**: a WRITE stores its data *before* the controller executes it (and the
//!   journal records it), and its data file's write count is bumped after both. A FLUSH
//!   reads that count and the journal position before syncing, so everything it covers
//!   completed before the sync began; the per-file and journal sync locks make a later
//!   flush wait for an earlier one still in progress instead of trusting it blindly.
//!
//! docs/nbd.md ("Serving a drive image") is the user-level description.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use ssdtwin_core::engine::{ftl_fingerprint, DeviceTiming};
use ssdtwin_core::ftl::NoTiming;
use ssdtwin_core::image::{Image, ImageError, Recovery};
use ssdtwin_core::journal::{check_record, JournalWriter, Record};
use ssdtwin_core::nvme::{self, Status, VendorLog, WP_NONE};

use crate::backend::{Backend, Done, Export, ExportInfo, Extent, ZeroFlags};
use crate::error::Errno;
use crate::proto::{STATE_HOLE, STATE_ZERO};
use crate::server::{Server, ServerConfig, ServerHandle, Stopper};
use crate::stats::ServerStats;

/// How replies are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// No reply before the timing model's completion time.
    Model,
    /// Fast-forward: reply as soon as the data is stored.
    Off,
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Pace, String> {
        match s {
            "model" => Ok(Pace::Model),
            "off" => Ok(Pace::Off),
            o => Err(format!("pace '{o}': use model or off")),
        }
    }
}

impl Pace {
    pub fn name(self) -> &'static str {
        match self {
            Pace::Model => "model",
            Pace::Off => "off",
        }
    }
}

/// Tuning of the backend. `Default` is what `ssdtwin serve` uses.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    pub pace: Pace,
    /// With nothing outstanding for this long the drive is idle and background GC runs
    /// (pace model only; fast-forward has no idle time).
    pub idle_after: Duration,
    /// Housekeeping period: idle GC, journal write-out, clock, snapshots, commits.
    pub tick: Duration,
    /// How often `DIR/live.json` is rewritten (0 = never).
    pub live_every: Duration,
    /// Commit a new generation (and empty the journal) this long after the last commit,
    /// at the first moment the drive has been idle for a second...
    pub commit_every: Duration,
    /// ...or regardless of idleness after five times that, or once the journal is this big.
    pub commit_journal_bytes: u64,
    /// Records are written to the journal file when this much is buffered (and every tick).
    pub journal_buffer_bytes: usize,
}

impl Default for TwinConfig {
    fn default() -> TwinConfig {
        TwinConfig {
            pace: Pace::Model,
            idle_after: Duration::from_millis(1),
            tick: Duration::from_millis(20),
            live_every: Duration::from_secs(1),
            commit_every: Duration::from_secs(60),
            commit_journal_bytes: 128 << 20,
            journal_buffer_bytes: 64 << 10,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Nvme(#[from] nvme::Error),
    #[error("{0}")]
    Config(String),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Server(#[from] crate::error::Error),
    #[error(transparent)]
    Fs(#[from] ssdtwin_core::fsio::FsError),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> TwinError {
    let what = what.into();
    move |source| TwinError::Io { what, source }
}

/// The one place controller errors become NBD errors (proto.md "Error values"): LBAs out
/// of range are EINVAL, or ENOSPC for commands that write; a write-protected namespace is
/// EPERM; anything else (which the server's own validation should make impossible) EIO.
pub fn nbd_errno(e: &nvme::Error, writes: bool) -> Errno {
    match e {
        nvme::Error::Status { status: Status::LbaOutOfRange | Status::CapacityExceeded, .. } => {
            if writes {
                Errno::NoSpc
            } else {
                Errno::Inval
            }
        }
        nvme::Error::Status { status: Status::NamespaceWriteProtected, .. } => Errno::Perm,
        _ => Errno::Io,
    }
}

// ----------------------------------------------------------------------------- metrics

/// Bucket upper bounds of the model latency histograms, in nanoseconds (10 µs to 1 s:
/// TLC reads near 100 µs, QLC programs and GC-bound writes in milliseconds).
pub const LATENCY_BUCKETS_NS: [u64; 16] = [
    10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000,
    50_000_000, 100_000_000, 250_000_000, 500_000_000, 1_000_000_000,
];

/// A Prometheus-style histogram (cumulative buckets are computed on output).
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Count per bucket of [`LATENCY_BUCKETS_NS`], plus one for +Inf.
    pub counts: [u64; LATENCY_BUCKETS_NS.len() + 1],
    pub sum_ns: u64,
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, ns: u64) {
        let i = LATENCY_BUCKETS_NS.partition_point(|&b| b < ns);
        self.counts[i] += 1;
        self.sum_ns += ns;
        self.count += 1;
    }
}

/// Commands by kind, counted outside the lock.
#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    trims: AtomicU64,
    write_zeroes: AtomicU64,
    flushes: AtomicU64,
    block_status: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    errors: AtomicU64,
    syncs: AtomicU64,
    connections_open: AtomicU64,
}

// ----------------------------------------------------------------------------- data files

/// Largest single pwrite into a data file (see [`DataFile::write`]).
const WRITE_PIECE: usize = 64 << 10;

/// A namespace's data: a sparse file, plus what has to be synced.
struct DataFile {
    file: File,
    /// Completed writes/punches (bumped after the data is in the file and the journal).
    written: AtomicU64,
    /// `written` as of the start of the last completed sync.
    synced: Mutex<u64>,
    /// A hole was punched since the last sync: needs fsync (the extent map), not fdatasync.
    punched: AtomicBool,
}

impl DataFile {
    fn sync(&self) -> io::Result<bool> {
        let want = self.written.load(Acquire);
        let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced >= want {
            return Ok(false); // covered by a sync that started after our writes completed
        }
        let upto = self.written.load(Acquire);
        if self.punched.swap(false, AcqRel) {
            if let Err(e) = self.file.sync_all() {
                self.punched.store(true, Release);
                return Err(e);
            }
        } else {
            self.file.sync_data()?;
        }
        *synced = upto;
        Ok(true)
    }

    /// Store `data` at `offset` in pieces of at most [`WRITE_PIECE`] bytes. The page cache
    /// sizes a folio after the write that creates it, and ext4 walks every buffer of a
    /// folio on each later write into it: after 1-2 MiB writes (a prefill, qemu-img
    /// convert), random 4 KiB overwrites measured 3x slower than with small folios
    /// (ext4_block_write_begin at 71 % of the server's CPU, kernel 6.18).
    fn write(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut at = 0;
        for piece in data.chunks(WRITE_PIECE) {
            self.file.write_all_at(piece, offset + at)?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    fn punch(&self, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: fallocate on a descriptor we own; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                // A file system without holes: zeroes are as good (slower, same data).
                return self.write_zeroes(offset, len);
            }
            return Err(e);
        }
        self.punched.store(true, Release);
        Ok(())
    }

    /// Zeroes that stay allocated (WRITE_ZEROES with NO_HOLE).
    fn zero_allocated(&self, offset: u64, len: u64) -> io::Result<()> {
        // SAFETY: as in `punch`.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), libc::FALLOC_FL_ZERO_RANGE, offset as libc::off_t, len as libc::off_t) };
        if rc == 0 {
            self.punched.store(true, Release); // an extent-map change as well
            return Ok(());
        }
        self.write_zeroes(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        static ZEROES: [u8; 1 << 16] = [0; 1 << 16];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(ZEROES.len() as u64) as usize;
            self.file.write_all_at(&ZEROES[..n], offset + at)?;
            at += n as u64;
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------------- state

/// Everything the lock protects. `None` in [`Inner::state`] once the backend is closed
/// (or abandoned by a test that simulates a crash).
struct State {
    img: Image,
    timing: Option<DeviceTiming>,
    journal: JournalWriter,
    /// A journal write failed: durability can no longer be promised, so FLUSH fails.
    journal_error: Option<String>,
    /// Appended-record count at the last `Check` record.
    last_check: u64,
    /// Latest arrival time given to the model (virtual ns; kept monotone).
    last_v: u64,
    /// The latest completion the model gave (never before the latest arrival); the
    /// controller has been busy up to here (the union of [arrival, completion] intervals).
    done_v: u64,
    /// Background GC has used the idle time up to here.
    idle_done_v: u64,
    /// Controller-busy time not yet added to the controller's clock.
    busy_pending_ns: u64,
    /// Virtual time already added to the controller's clock (SMART power-on hours).
    clock_done_v: u64,
    hist_read: Histogram,
    hist_write: Histogram,
    idle_gc_moved: u64,
    last_commit: Instant,
    commits: u64,
    last_live: Option<Instant>,
    /// FTL counters when serving started (for the WAF of this session).
    start_host_bytes: u64,
    start_nand_bytes: u64,
}

/// What a backend runs on (shared by the backend, its exports and its threads).
struct Inner {
    dir: PathBuf,
    cfg: TwinConfig,
    start: Instant,
    start_unix_ms: u64,
    state: Mutex<Option<State>>,
    /// Journal records known to be on stable storage (appended-count units).
    journal_synced: Mutex<u64>,
    /// A second descriptor of the journal, synced outside the state lock.
    journal_file: File,
    files: BTreeMap<u32, Arc<DataFile>>,
    counters: Counters,
    server: OnceLock<(Stopper, Vec<String>)>,
    recovery: Option<Recovery>,
    preset: String,
    scale: u32,
    iu_bytes: u32,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_v(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn server_stats(&self) -> ServerStats {
        self.server.get().map(|(s, _)| s.stats()).unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Io {
    Read,
    Write,
    Dealloc,
}

impl State {
    fn append(&mut self, r: Record, cfg: &TwinConfig) {
        self.journal.append(&r);
        if self.journal.buffered_bytes() >= cfg.journal_buffer_bytes {
            self.write_out();
        }
    }

    fn write_out(&mut self) {
        if let Err(e) = self.journal.write_out() {
            self.journal_error.get_or_insert_with(|| format!("writing {}: {e}", self.journal.path().display()));
        }
    }

    /// Give background GC the idle time up to `now_v` if nothing has been outstanding
    /// for `idle_after`.
    fn idle(&mut self, now_v: u64, cfg: &TwinConfig) {
        let Some(timing) = self.timing.as_mut() else { return };
        let quiet_from = self.done_v.max(self.idle_done_v);
        if now_v < quiet_from + cfg.idle_after.as_nanos() as u64 {
            return;
        }
        let ctrl = &mut self.img.ctrl;
        let before = {
            let c = ctrl.ftl_counters();
            (c.erases, c.gc_victims)
        };
        match timing.idle(ctrl, quiet_from, now_v) {
            Ok(moved) => {
                let c = ctrl.ftl_counters();
                let (erases, victims) = (c.erases, c.gc_victims);
                if moved > 0 || (erases, victims) != before {
                    self.idle_gc_moved += moved;
                    self.append(Record::IdleGc { moved, erases, victims }, cfg);
                }
            }
            Err(e) => {
                self.journal_error.get_or_insert_with(|| format!("background GC failed: {e}"));
            }
        }
        self.idle_done_v = now_v;
    }

    /// Add the time served since the last call to the controller's clock (and journal it).
    fn advance_clock(&mut self, now_v: u64, cfg: &TwinConfig) {
        if now_v <= self.clock_done_v {
            return;
        }
        let ns = now_v - self.clock_done_v;
        let busy = self.busy_pending_ns;
        self.img.ctrl.advance_clock(ns, busy);
        self.clock_done_v = now_v;
        self.busy_pending_ns = 0;
        self.append(Record::Clock { ns, busy_ns: busy }, cfg);
    }
}

// ----------------------------------------------------------------------------- backend

/// The drive image as an NBD [`Backend`]: one export per attached namespace.
pub struct TwinBackend {
    inner: Arc<Inner>,
    exports: Vec<Arc<NsExport>>,
}

/// One namespace as an export.
pub struct NsExport {
    inner: Arc<Inner>,
    nsid: u32,
    lba: u64,
    info: ExportInfo,
    data: Arc<DataFile>,
}

impl TwinBackend {
    /// Open the image at `dir` for serving: takes the image lock, recovers a journal a
    /// killed server left (see `Image::open`), creates the namespaces' data files and
    /// starts a fresh journal.
    pub fn open(dir: &Path, cfg: TwinConfig) -> Result<Arc<TwinBackend>, TwinError> {
        let mut img = Image::open(dir, true)?;
        let recovery = img.recovery().cloned();
        let timing = match cfg.pace {
            Pace::Model => Some(DeviceTiming::new(img.ctrl.spec(), img.ctrl.ftl_config()).map_err(|e| TwinError::Config(format!("{e}; serve it with --pace off")))?),
            Pace::Off => None,
        };
        // Load the maps now rather than stalling the first IO behind it.
        img.ctrl.ftl()?;
        let paths = img.prepare_data_files()?;
        if paths.is_empty() {
            return Err(TwinError::Config(format!("{}: no attached namespace to serve (ssdtwin nvme list; attach one with ssdtwin nvme attach-ns)", dir.display())));
        }
        let journal = JournalWriter::create(dir, img.generation())?;
        let journal_file = journal.sync_handle()?;
        let mut files = BTreeMap::new();
        for (nsid, p) in &paths {
            let f = OpenOptions::new().read(true).write(true).open(p).map_err(io_err(format!("open {}", p.display())))?;
            // Block IO is random and the client caches what it wants: no readahead (which
            // would also fill the page cache with large folios, see `DataFile::write`).
            // SAFETY: fadvise on a descriptor we own; advisory only.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            files.insert(*nsid, Arc::new(DataFile { file: f, written: AtomicU64::new(0), synced: Mutex::new(0), punched: AtomicBool::new(false) }));
        }
        let ctrl = &img.ctrl;
        let iu = ctrl.ftl_config().iu_bytes;
        let vl = ctrl.vendor_log();
        let manifest = img.manifest.clone();
        let mut infos = Vec::new();
        for (nsid, _) in &paths {
            let ns = ctrl.namespace(*nsid)?;
            let mut i = ExportInfo::new(format!("ns{nsid}"), ns.bytes());
            i.description = format!(
                "namespace {nsid} of {} at 1/{}: {} blocks of {} B, IU {} KiB{}",
                manifest.preset,
                manifest.scale,
                ns.nsze,
                ns.lba_bytes,
                iu / 1024,
                if ns.write_protect != WP_NONE { ", write protected" } else { "" }
            );
            i.read_only = ns.write_protect != WP_NONE;
            // 512 B (or the 4 KiB LBA): the smallest IO the namespace can address;
            // preferred = the indirection unit (smaller writes cost a read-modify-write).
            i.block_min = ns.lba_bytes;
            i.block_preferred = iu.max(ns.lba_bytes).max(512);
            i.block_max = 32 << 20;
            i.can_flush = true;
            i.can_fua = true;
            i.can_trim = true;
            i.can_write_zeroes = true;
            i.can_fast_zero = true;
            // One controller, one data store: a flush on any connection covers all.
            i.can_multi_conn = true;
            infos.push((*nsid, ns.lba_bytes as u64, i));
        }
        let start_host = vl.host_write_bytes;
        let start_nand = vl.nand_write_bytes;
        let st = State {
            img,
            timing,
            journal,
            journal_error: None,
            last_check: 0,
            last_v: 0,
            done_v: 0,
            idle_done_v: 0,
            busy_pending_ns: 0,
            clock_done_v: 0,
            hist_read: Histogram::default(),
            hist_write: Histogram::default(),
            idle_gc_moved: 0,
            last_commit: Instant::now(),
            commits: 0,
            last_live: None,
            start_host_bytes: start_host,
            start_nand_bytes: start_nand,
        };
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            cfg,
            start: Instant::now(),
            start_unix_ms: unix_ms(),
            state: Mutex::new(Some(st)),
            journal_synced: Mutex::new(0),
            journal_file,
            files,
            counters: Counters::default(),
            server: OnceLock::new(),
            recovery,
            preset: manifest.preset.clone(),
            scale: manifest.scale,
            iu_bytes: iu,
        });
        let exports = infos
            .into_iter()
            .map(|(nsid, lba, info)| Arc::new(NsExport { inner: inner.clone(), nsid, lba, info, data: inner.files[&nsid].clone() }))
            .collect();
        Ok(Arc::new(TwinBackend { inner, exports }))
    }

    /// What opening did with a journal a killed server left, if anything.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.inner.recovery.as_ref()
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn config(&self) -> &TwinConfig {
        &self.inner.cfg
    }

    /// Tell the backend about its server (for late-reply counts and URIs in snapshots).
    pub fn attach_server(&self, stopper: Stopper, uris: Vec<String>) {
        let _ = self.inner.server.set((stopper, uris));
    }

    /// The export names, lowest NSID first.
    pub fn export_names(&self) -> Vec<String> {
        self.exports.iter().map(|e| e.info.name.clone()).collect()
    }

    /// One housekeeping step (the housekeeping thread calls it every `tick`): background
    /// GC in idle time, journal write-out, the controller's clock, `live.json`, and a
    /// commit when one is due. Returns a message for anything that went wrong.
    pub fn tick(&self) -> Result<(), String> {
        let inner = &self.inner;
        let cfg = &inner.cfg;
        let mut g = inner.lock();
        let Some(st) = g.as_mut() else { return Ok(()) };
        let now_v = inner.now_v().max(st.last_v);
        st.idle(now_v, cfg);
        st.write_out();
        let mut err = st.journal_error.clone();
        let live_due = !cfg.live_every.is_zero() && st.last_live.is_none_or(|t| t.elapsed() >= cfg.live_every);
        if live_due {
            st.advance_clock(now_v, cfg);
            st.write_out();
        }
        let since_commit = st.last_commit.elapsed();
        let idle_for = Duration::from_nanos(now_v.saturating_sub(st.done_v));
        let commit_due = st.journal.has_records()
            && ((since_commit >= cfg.commit_every && idle_for >= Duration::from_secs(1))
                || since_commit >= cfg.commit_every * 5
                || st.journal.len_bytes() >= cfg.commit_journal_bytes);
        if commit_due {
            if let Err(e) = self.commit_locked(st) {
                err.get_or_insert(e);
            }
        }
        let snap = if live_due {
            st.last_live = Some(Instant::now());
            Some(self.snapshot_locked(st, true))
        } else {
            None
        };
        drop(g); // serialise and write outside the lock every I/O takes
        if let Some(s) = snap {
            if let Err(e) = write_atomic(&inner.dir.join(LIVE), &serde_json::to_vec_pretty(&s).unwrap_or_default()) {
                err.get_or_insert(format!("writing live.json: {e}"));
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// Commit a new generation and start an empty journal for it.
    pub fn commit(&self) -> Result<(), String> {
        let mut g = self.inner.lock();
        match g.as_mut() {
            Some(st) => self.commit_locked(st),
            None => Err("the backend is closed".into()),
        }
    }

    fn commit_locked(&self, st: &mut State) -> Result<(), String> {
        let now_v = self.inner.now_v().max(st.last_v);
        st.advance_clock(now_v, &self.inner.cfg);
        st.img.commit().map_err(|e| format!("commit: {e}"))?;
        st.commits += 1;
        st.last_commit = Instant::now();
        let g = st.img.generation();
        if let Err(e) = st.journal.reset(g) {
            st.journal_error.get_or_insert_with(|| format!("resetting the journal: {e}"));
            return Err(format!("resetting the journal: {e}"));
        }
        // Everything appended so far is in the committed generation.
        let mut synced = self.inner.journal_synced.lock().unwrap_or_else(|e| e.into_inner());
        *synced = (*synced).max(st.journal.appended());
        st.last_check = st.journal.appended();
        Ok(())
    }

    /// Make everything acknowledged so far durable (what FLUSH does).
    pub fn flush(&self) -> Result<(), Errno> {
        self.inner.durable(None)
    }

    /// The FTL fingerprint (map checksums and counters) of the live state, after writing
    /// every executed command to the journal file (so a kill right after loses none).
    pub fn fingerprint(&self) -> Result<Value, String> {
        let mut g = self.inner.lock();
        let st = g.as_mut().ok_or("the backend is closed")?;
        st.write_out();
        let (l2p, p2l, counters) = ftl_fingerprint(&mut st.img.ctrl).map_err(|e| e.to_string())?;
        Ok(json!({
            "l2p_xxh3": format!("{l2p:016x}"), "p2l_xxh3": format!("{p2l:016x}"),
            "counters": counters, "journal_records": st.journal.appended(), "generation": st.img.generation(),
        }))
    }

    /// Stop: commit the state (a clean shutdown leaves no journal), sync the data and
    /// write a final `live.json` with `"serving": false`. Idempotent.
    pub fn close(&self) -> Result<Value, TwinError> {
        let inner = &self.inner;
        let mut g = inner.lock();
        let Some(mut st) = g.take() else { return Ok(json!({"closed": true})) };
        let now_v = inner.now_v().max(st.last_v);
        st.advance_clock(now_v, &inner.cfg);
        // Every record into the journal file first: if the commit fails, the next open
        // replays the journal instead.
        st.write_out();
        let mut sync_err = None;
        for f in inner.files.values() {
            if let Err(e) = f.sync() {
                sync_err.get_or_insert(e);
            }
        }
        st.img.commit()?;
        st.commits += 1;
        if let Some(e) = sync_err {
            return Err(TwinError::Io { what: "sync the data files".into(), source: e });
        }
        let snap = self.snapshot_locked(&mut st, false);
        let summary = snap["stats"].clone();
        let State { img, journal, .. } = st;
        journal.remove()?;
        drop(img); // releases the image lock
        drop(g);
        write_atomic(&inner.dir.join(LIVE), &serde_json::to_vec_pretty(&snap).unwrap_or_default()).map_err(io_err("write live.json"))?;
        Ok(summary)
    }

    /// Counters of this session (also part of `live.json` and the summary at exit).
    pub fn summary(&self) -> Value {
        let mut g = self.inner.lock();
        match g.as_mut() {
            Some(st) => self.summary_locked(st, &st.img.ctrl.vendor_log()),
            None => json!({"closed": true}),
        }
    }

    fn summary_locked(&self, st: &State, vl: &VendorLog) -> Value {
        let inner = &self.inner;
        let c = &inner.counters;
        let s = inner.server_stats();
        let dh = vl.host_write_bytes - st.start_host_bytes;
        let dn = vl.nand_write_bytes - st.start_nand_bytes;
        json!({
            "seconds": inner.start.elapsed().as_secs_f64(),
            "pace": inner.cfg.pace.name(),
            "reads": c.reads.load(Relaxed), "writes": c.writes.load(Relaxed), "trims": c.trims.load(Relaxed),
            "write_zeroes": c.write_zeroes.load(Relaxed), "flushes": c.flushes.load(Relaxed),
            "read_bytes": c.read_bytes.load(Relaxed), "write_bytes": c.write_bytes.load(Relaxed),
            "errors": c.errors.load(Relaxed), "syncs": c.syncs.load(Relaxed),
            "connections": s.connections_accepted, "requests": s.requests,
            "error_replies": s.error_replies, "protocol_errors": s.protocol_errors,
            "replies_paced": s.replies_paced, "replies_late": s.replies_late,
            "late_ns_max": s.late_ns_max, "late_ns_mean": if s.replies_paced > 0 { s.late_ns_sum / s.replies_paced } else { 0 },
            "host_write_bytes": dh, "nand_write_bytes": dn, "waf": if dh > 0 { dn as f64 / dh as f64 } else { 0.0 },
            "idle_gc_moved_ius": st.idle_gc_moved, "commits": st.commits,
            "journal_records": st.journal.appended(), "generation": st.img.generation(),
        })
    }

    /// The `live.json` document (serialise it after releasing the lock).
    fn snapshot_locked(&self, st: &mut State, serving: bool) -> Value {
        let inner = &self.inner;
        let ctrl = &st.img.ctrl;
        let vl = ctrl.vendor_log();
        let namespaces: Vec<Value> = ctrl
            .namespaces()
            .map(|ns| {
                json!({
                    "nsid": ns.nsid, "nsze": ns.nsze, "ncap": ns.nsze, "nuse": ctrl.nuse(ns),
                    "lba_bytes": ns.lba_bytes, "flbas": ns.flbas, "attached": ns.attached,
                    "write_protect": ns.write_protect, "nmic": ns.nmic, "bytes": ns.bytes(),
                })
            })
            .collect();
        let id_ns: serde_json::Map<String, Value> =
            ctrl.namespaces().filter_map(|ns| ctrl.id_ns(ns.nsid).ok().map(|i| (ns.nsid.to_string(), serde_json::to_value(i).unwrap_or(Value::Null)))).collect();
        let uris = inner.server.get().map(|(_, u)| u.clone()).unwrap_or_default();
        json!({
            "format": "ssdtwin-live", "version": 1,
            "pid": std::process::id(), "serving": serving,
            "time_unix_ms": unix_ms(), "started_unix_ms": inner.start_unix_ms,
            "generation": st.img.generation(),
            "pace": inner.cfg.pace.name(),
            "exports": self.exports.iter().map(|e| json!({"name": e.info.name, "nsid": e.nsid, "size": e.info.size, "read_only": e.info.read_only})).collect::<Vec<_>>(),
            "uris": uris,
            "id_ctrl": ctrl.id_ctrl(),
            "id_ns": id_ns,
            "namespaces": namespaces,
            "smart_log": ctrl.smart_log(),
            "stats": self.summary_locked(st, &vl),
            "vendor_log": vl,
        })
    }

    /// Prometheus text exposition of the live state (docs/nbd.md lists the names).
    pub fn metrics_text(&self) -> String {
        let inner = &self.inner;
        let s = inner.server_stats();
        let c = &inner.counters;
        let mut g = inner.lock();
        let Some(st) = g.as_mut() else { return "# ssdtwin: the server has stopped\n".into() };
        let vl = st.img.ctrl.vendor_log();
        let smart = st.img.ctrl.smart_log();
        let (hr, hw) = (st.hist_read.clone(), st.hist_write.clone());
        let (journal_bytes, commits, idle_moved) = (st.journal.len_bytes(), st.commits, st.idle_gc_moved);
        let (dh, dn) = (vl.host_write_bytes - st.start_host_bytes, vl.nand_write_bytes - st.start_nand_bytes);
        drop(g);
        let mut m = Metrics::default();
        m.gauge("ssdtwin_info", "The served drive (value 1)", &[
            ("preset", inner.preset.as_str()),
            ("scale", &format!("1/{}", inner.scale)),
            ("pace", inner.cfg.pace.name()),
            ("iu_bytes", &inner.iu_bytes.to_string()),
        ], 1.0);
        m.counter("ssdtwin_host_write_bytes_total", "Bytes the host wrote (drive lifetime, FTL count)", &[], vl.host_write_bytes as f64);
        m.counter("ssdtwin_host_read_bytes_total", "Bytes the host read (drive lifetime)", &[], vl.host_read_bytes as f64);
        m.counter_multi("ssdtwin_nand_write_bytes_total", "Bytes programmed to NAND (drive lifetime)", &[
            (&[("cause", "host")], vl.nand_write_host_bytes as f64),
            (&[("cause", "gc")], vl.nand_write_gc_bytes as f64),
        ]);
        m.counter_multi("ssdtwin_nand_read_bytes_total", "Bytes read from NAND (drive lifetime)", &[
            (&[("cause", "host")], (vl.nand_read_bytes - vl.nand_read_rmw_bytes - vl.nand_read_gc_bytes) as f64),
            (&[("cause", "rmw")], vl.nand_read_rmw_bytes as f64),
            (&[("cause", "gc")], vl.nand_read_gc_bytes as f64),
        ]);
        m.gauge("ssdtwin_waf", "Write amplification over the drive's life (NAND / host bytes written)", &[], vl.waf);
        m.gauge("ssdtwin_waf_session", "Write amplification since this server started", &[], if dh > 0 { dn as f64 / dh as f64 } else { 0.0 });
        m.counter("ssdtwin_gc_victims_total", "Superblocks chosen for garbage collection", &[], vl.gc_victims as f64);
        m.counter("ssdtwin_gc_foreground_victims_total", "GC victims collected while the host waited", &[], vl.foreground_gc_victims as f64);
        m.counter("ssdtwin_background_gc_moved_ius_total", "IUs relocated by idle-time GC in this session", &[], idle_moved as f64);
        m.counter("ssdtwin_erases_total", "Superblock erases", &[], vl.superblock_erases as f64);
        m.counter("ssdtwin_rmw_ius_total", "Read-modify-writes of partly written IUs", &[], vl.rmw_ius as f64);
        m.counter("ssdtwin_trimmed_ius_total", "IUs deallocated", &[], vl.trimmed_ius as f64);
        m.gauge("ssdtwin_free_superblocks", "Erased superblocks ready for writing", &[], vl.free_superblocks as f64);
        m.gauge("ssdtwin_superblocks", "Superblocks in the drive", &[], vl.superblocks as f64);
        m.gauge("ssdtwin_buffered_bytes", "Host data in the write buffer", &[], vl.buffered_bytes as f64);
        m.gauge("ssdtwin_valid_bytes", "Valid data on NAND", &[], vl.valid_bytes as f64);
        m.gauge("ssdtwin_erase_count_avg", "Mean erase count per superblock", &[], vl.erase_count_avg);
        m.gauge("ssdtwin_percent_used", "SMART percentage used", &[], smart.percent_used as f64);
        m.gauge("ssdtwin_power_on_hours", "SMART power-on hours", &[], smart.power_on_hours as f64);
        m.counter_multi("ssdtwin_nbd_commands_total", "NBD commands executed, by type", &[
            (&[("op", "read")], c.reads.load(Relaxed) as f64),
            (&[("op", "write")], c.writes.load(Relaxed) as f64),
            (&[("op", "trim")], c.trims.load(Relaxed) as f64),
            (&[("op", "write_zeroes")], c.write_zeroes.load(Relaxed) as f64),
            (&[("op", "flush")], c.flushes.load(Relaxed) as f64),
            (&[("op", "block_status")], c.block_status.load(Relaxed) as f64),
        ]);
        m.counter_multi("ssdtwin_nbd_bytes_total", "Bytes moved by NBD reads and writes", &[
            (&[("direction", "read")], c.read_bytes.load(Relaxed) as f64),
            (&[("direction", "write")], c.write_bytes.load(Relaxed) as f64),
        ]);
        m.counter("ssdtwin_nbd_requests_total", "NBD requests received", &[], s.requests as f64);
        m.counter("ssdtwin_nbd_error_replies_total", "NBD replies carrying an error", &[], s.error_replies as f64);
        m.counter("ssdtwin_nbd_replies_paced_total", "Replies held until the model's completion time", &[], s.replies_paced as f64);
        m.counter("ssdtwin_nbd_replies_late_total", "Paced replies sent later than the threshold after the model's time (host too slow)", &[], s.replies_late as f64);
        m.gauge("ssdtwin_nbd_late_seconds_max", "Worst lateness of a paced reply", &[], s.late_ns_max as f64 / 1e9);
        m.counter("ssdtwin_nbd_late_seconds_total", "Summed lateness of paced replies", &[], s.late_ns_sum as f64 / 1e9);
        m.gauge("ssdtwin_nbd_connections", "Open NBD connections (transmission phase)", &[], c.connections_open.load(Relaxed) as f64);
        m.counter("ssdtwin_nbd_connections_total", "NBD connections accepted", &[], s.connections_accepted as f64);
        m.counter("ssdtwin_syncs_total", "fdatasync/fsync calls for FLUSH and FUA", &[], c.syncs.load(Relaxed) as f64);
        m.gauge("ssdtwin_journal_bytes", "Size of the command journal since the last commit", &[], journal_bytes as f64);
        m.counter("ssdtwin_commits_total", "Image generations committed by this server", &[], commits as f64);
        m.histogram("ssdtwin_model_latency_seconds", "Completion latency the timing model gave each command (pace model)", &[
            ("read", &hr),
            ("write", &hw),
        ]);
        m.text
    }

    /// Simulate `kill -9` in tests: drop the in-memory state without committing or writing
    /// buffered journal records (what was written to the journal file stays, as the page
    /// cache keeps it for a killed process) and release the image lock.
    #[doc(hidden)]
    pub fn crash_for_tests(&self) {
        let mut g = self.inner.lock();
        if let Some(st) = g.take() {
            let State { img, journal, .. } = st;
            std::mem::forget(journal); // its buffer is lost, its file stays as written
            drop(img);
        }
    }
}

impl Backend for TwinBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        self.exports.iter().map(|e| e.info.clone()).collect()
    }

    fn default_export(&self) -> Option<String> {
        self.exports.first().map(|e| e.info.name.clone())
    }

    fn open(&self, name: &str) -> Option<Arc<dyn Export>> {
        self.exports.iter().find(|e| e.info.name == name).map(|e| e.clone() as Arc<dyn Export>)
    }
}

impl Inner {
    /// Run controller commands under the lock, in order; the reply time is the latest
    /// completion. Journals each command that succeeded.
    fn exec(&self, nsid: u32, ops: &[(Io, u64, u64)]) -> Result<Done, Errno> {
        let cfg = &self.cfg;
        let mut g = self.lock();
        let st = g.as_mut().ok_or(Errno::Shutdown)?;
        if cfg.pace == Pace::Off {
            for &(io, slba, nlb) in ops {
                let ctrl = &mut st.img.ctrl;
                let r = match io {
                    Io::Read => ctrl.read(nsid, slba, nlb, &mut NoTiming).map(|_| ()),
                    Io::Write => ctrl.write(nsid, slba, nlb, &mut NoTiming),
                    Io::Dealloc => ctrl.deallocate(nsid, slba, nlb).map(|_| ()),
                };
                r.map_err(|e| nbd_errno(&e, io != Io::Read))?;
                st.append(record(io, nsid, slba, nlb), cfg);
            }
            return Ok(Done::NOW);
        }
        let now_v = self.now_v().max(st.last_v);
        st.last_v = now_v;
        st.idle(now_v, cfg);
        let mut done_v = now_v;
        for &(io, slba, nlb) in ops {
            let timing = st.timing.as_mut().expect("pace model has a timing model");
            let ctrl = &mut st.img.ctrl;
            let r = match io {
                Io::Read => timing.read(ctrl, now_v, nsid, slba, nlb),
                Io::Write => timing.write(ctrl, now_v, nsid, slba, nlb),
                Io::Dealloc => timing.deallocate(ctrl, now_v, nsid, slba, nlb),
            };
            let t = r.map_err(|e| nbd_errno(&e, io != Io::Read))?;
            st.append(record(io, nsid, slba, nlb), cfg);
            done_v = done_v.max(t);
        }
        let lat = done_v - now_v;
        match ops.first().map(|o| o.0) {
            Some(Io::Read) => st.hist_read.observe(lat),
            Some(Io::Write) => st.hist_write.observe(lat),
            _ => {}
        }
        // Controller busy time: the union of the commands' [arrival, completion] spans.
        let from = now_v.max(st.done_v);
        if done_v > from {
            st.busy_pending_ns += done_v - from;
        }
        st.done_v = st.done_v.max(done_v);
        Ok(Done::at(self.start + Duration::from_nanos(done_v)))
    }

    /// Make acknowledged writes durable: the data files (`only`, or all) and the journal.
    fn durable(&self, only: Option<&DataFile>) -> Result<(), Errno> {
        let syncs = |r: io::Result<bool>| -> Result<(), Errno> {
            if r.map_err(Errno::from)? {
                self.counters.syncs.fetch_add(1, Relaxed);
            }
            Ok(())
        };
        match only {
            Some(f) => syncs(f.sync())?,
            None => {
                for f in self.files.values() {
                    syncs(f.sync())?;
                }
            }
        }
        let ticket = {
            let mut g = self.lock();
            let st = g.as_mut().ok_or(Errno::Shutdown)?;
            if st.journal.appended() > st.last_check {
                let r = check_record(&st.img.ctrl);
                st.journal.append(&r);
                st.last_check = st.journal.appended();
            }
            st.write_out();
            if st.journal_error.is_some() {
                return Err(Errno::Io);
            }
            st.journal.appended()
        };
        let mut synced = self.journal_synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced < ticket {
            self.journal_file.sync_data().map_err(Errno::from)?;
            self.counters.syncs.fetch_add(1, Relaxed);
            *synced = (*synced).max(ticket);
        }
        Ok(())
    }
}

fn record(io: Io, nsid: u32, slba: u64, nlb: u64) -> Record {
    match io {
        Io::Read => Record::Read { nsid, slba, nlb },
        Io::Write => Record::Write { nsid, slba, nlb },
        Io::Dealloc => Record::Deallocate { nsid, slba, nlb },
    }
}

impl NsExport {
    fn err(&self, e: Errno) -> Errno {
        self.inner.counters.errors.fetch_add(1, Relaxed);
        e
    }

    /// The bytes of [`offset`, `offset + len`) that are whole IUs of the namespace.
    fn whole_ius(&self, offset: u64, len: u64) -> (u64, u64) {
        let iu = self.inner.iu_bytes as u64;
        let a = offset.div_ceil(iu) * iu;
        let b = (offset + len) / iu * iu;
        (a, b.max(a))
    }
}

impl Export for NsExport {
    fn info(&self) -> ExportInfo {
        self.info.clone()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<Done, Errno> {
        let c = &self.inner.counters;
        c.reads.fetch_add(1, Relaxed);
        self.data.file.read_exact_at(buf, offset).map_err(|e| self.err(e.into()))?;
        c.read_bytes.fetch_add(buf.len() as u64, Relaxed);
        self.inner.exec(self.nsid, &[(Io::Read, offset / self.lba, buf.len() as u64 / self.lba)]).map_err(|e| self.err(e))
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<Done, Errno> {
        let c = &self.inner.counters;
        c.writes.fetch_add(1, Relaxed);
        // Data first, then the controller and journal, then the write count a FLUSH reads
        // (see the module docs: a flush must only count writes that are in the file).
        self.data.write(data, offset).map_err(|e| self.err(e.into()))?;
        let done = self.inner.exec(self.nsid, &[(Io::Write, offset / self.lba, data.len() as u64 / self.lba)]).map_err(|e| self.err(e))?;
        self.data.written.fetch_add(1, Release);
        c.write_bytes.fetch_add(data.len() as u64, Relaxed);
        if fua {
            self.inner.durable(Some(&self.data)).map_err(|e| self.err(e))?;
        }
        Ok(done)
    }

    fn flush(&self) -> Result<Done, Errno> {
        self.inner.counters.flushes.fetch_add(1, Relaxed);
        self.inner.durable(None).map_err(|e| self.err(e))?;
        Ok(Done::NOW)
    }

    /// TRIM deallocates the whole IUs of the range in the FTL and punches the same bytes
    /// out of the data file, so data and mapping agree (partial IUs keep their data, as
    /// NVMe's advisory deallocate allows).
    fn trim(&self, offset: u64, len: u32, fua: bool) -> Result<Done, Errno> {
        self.inner.counters.trims.fetch_add(1, Relaxed);
        let (a, b) = self.whole_ius(offset, len as u64);
        self.data.punch(a, b - a).map_err(|e| self.err(e.into()))?;
        let done = self.inner.exec(self.nsid, &[(Io::Dealloc, offset / self.lba, len as u64 / self.lba)]).map_err(|e| self.err(e))?;
        self.data.written.fetch_add(1, Release);
        if fua {
            self.inner.durable(Some(&self.data)).map_err(|e| self.err(e))?;
        }
        Ok(done)
    }

    /// WRITE_ZEROES: punch the range (it reads as zeroes) and deallocate its whole IUs; the
    /// partial IUs at its edges are written (the drive has to store those zeroes). With
    /// NO_HOLE the range stays allocated and the FTL writes it all.
    fn write_zeroes(&self, offset: u64, len: u32, f: ZeroFlags) -> Result<Done, Errno> {
        self.inner.counters.write_zeroes.fetch_add(1, Relaxed);
        if f.no_hole && f.fast {
            return Err(Errno::NotSup); // writing zeroes is all the drive can do here
        }
        let lba = self.lba;
        let end = offset + len as u64;
        let mut ops: Vec<(Io, u64, u64)> = Vec::with_capacity(3);
        if f.no_hole {
            self.data.zero_allocated(offset, len as u64).map_err(|e| self.err(e.into()))?;
            ops.push((Io::Write, offset / lba, len as u64 / lba));
        } else {
            self.data.punch(offset, len as u64).map_err(|e| self.err(e.into()))?;
            let (a, b) = self.whole_ius(offset, len as u64);
            if a < b {
                ops.push((Io::Dealloc, a / lba, (b - a) / lba));
                if offset < a {
                    ops.push((Io::Write, offset / lba, (a - offset) / lba));
                }
                if b < end {
                    ops.push((Io::Write, b / lba, (end - b) / lba));
                }
            } else {
                ops.push((Io::Write, offset / lba, len as u64 / lba));
            }
        }
        let done = self.inner.exec(self.nsid, &ops).map_err(|e| self.err(e))?;
        self.data.written.fetch_add(1, Release);
        if f.fua {
            self.inner.durable(Some(&self.data)).map_err(|e| self.err(e))?;
        }
        Ok(done)
    }

    /// Allocation from the data file's holes (SEEK_DATA/SEEK_HOLE): never-written and
    /// trimmed ranges are holes that read as zeroes.
    fn block_status(&self, offset: u64, len: u32, out: &mut Vec<Extent>) -> Result<Done, Errno> {
        self.inner.counters.block_status.fetch_add(1, Relaxed);
        let fd = self.data.file.as_raw_fd();
        let end = offset + len as u64;
        let mut pos = offset;
        let seek = |at: u64, whence: libc::c_int| -> Result<Option<u64>, Errno> {
            // SAFETY: lseek on a descriptor we own.
            let r = unsafe { libc::lseek(fd, at as libc::off_t, whence) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ENXIO) {
                    return Ok(None); // no data at or after `at`
                }
                return Err(Errno::from(e));
            }
            Ok(Some(r as u64))
        };
        while pos < end && out.len() < 4096 {
            let data = seek(pos, libc::SEEK_DATA).map_err(|e| self.err(e))?.unwrap_or(end).min(end);
            if data > pos {
                out.push(Extent { len: (data - pos) as u32, flags: STATE_HOLE | STATE_ZERO });
                pos = data;
                continue;
            }
            let hole = seek(pos, libc::SEEK_HOLE).map_err(|e| self.err(e))?.unwrap_or(end).min(end);
            let hole = if hole <= pos { end } else { hole };
            out.push(Extent { len: (hole - pos) as u32, flags: 0 });
            pos = hole;
        }
        Ok(Done::NOW)
    }

    fn connection_opened(&self) {
        self.inner.counters.connections_open.fetch_add(1, Relaxed);
    }

    fn connection_closed(&self) {
        self.inner.counters.connections_open.fetch_sub(1, Relaxed);
    }
}

// ----------------------------------------------------------------------------- snapshots

/// `DIR/live.json`: the server's view of the drive (logs, namespaces, counters), rewritten
/// every second while serving so read-only commands can show live state.
pub const LIVE: &str = "live.json";

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Replace `path` atomically (temporary file, then rename): readers see the old or the
/// new snapshot, never half of one.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Prometheus text format writer.
#[derive(Default)]
struct Metrics {
    text: String,
}

fn labels(ls: &[(&str, &str)]) -> String {
    if ls.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = ls.iter().map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))).collect();
    format!("{{{}}}", inner.join(","))
}

impl Metrics {
    fn head(&mut self, name: &str, help: &str, kind: &str) {
        self.text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }
    fn gauge(&mut self, name: &str, help: &str, ls: &[(&str, &str)], v: f64) {
        self.head(name, help, "gauge");
        self.text.push_str(&format!("{name}{} {}\n", labels(ls), fmt_num(v)));
    }
    fn counter(&mut self, name: &str, help: &str, ls: &[(&str, &str)], v: f64) {
        self.head(name, help, "counter");
        self.text.push_str(&format!("{name}{} {}\n", labels(ls), fmt_num(v)));
    }
    fn counter_multi(&mut self, name: &str, help: &str, rows: &[(&[(&str, &str)], f64)]) {
        self.head(name, help, "counter");
        for (ls, v) in rows {
            self.text.push_str(&format!("{name}{} {}\n", labels(ls), fmt_num(*v)));
        }
    }
    fn histogram(&mut self, name: &str, help: &str, by_op: &[(&str, &Histogram)]) {
        self.head(name, help, "histogram");
        for (op, h) in by_op {
            let mut cum = 0;
            for (i, b) in LATENCY_BUCKETS_NS.iter().enumerate() {
                cum += h.counts[i];
                self.text.push_str(&format!("{name}_bucket{{op=\"{op}\",le=\"{}\"}} {cum}\n", fmt_num(*b as f64 / 1e9)));
            }
            self.text.push_str(&format!("{name}_bucket{{op=\"{op}\",le=\"+Inf\"}} {}\n", h.count));
            self.text.push_str(&format!("{name}_sum{{op=\"{op}\"}} {}\n", fmt_num(h.sum_ns as f64 / 1e9)));
            self.text.push_str(&format!("{name}_count{{op=\"{op}\"}} {}\n", h.count));
        }
    }
}

fn fmt_num(v: f64) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

// ----------------------------------------------------------------------------- serving

/// Where and how to serve.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub tcp: Vec<String>,
    pub unix: Vec<PathBuf>,
    /// `HOST:PORT` for the Prometheus endpoint (`GET /metrics`).
    pub metrics: Option<String>,
    pub twin: TwinConfig,
    pub server: ServerConfig,
}

/// A running `ssdtwin serve`: the NBD server, the housekeeping thread and the metrics
/// endpoint around one [`TwinBackend`].
pub struct Serving {
    backend: Arc<TwinBackend>,
    handle: Option<ServerHandle>,
    housekeeper: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
    metrics: Option<crate::metrics::MetricsServer>,
    uris: Vec<String>,
}

impl Serving {
    pub fn start(dir: &Path, opts: ServeOptions) -> Result<Serving, TwinError> {
        if opts.tcp.is_empty() && opts.unix.is_empty() {
            return Err(TwinError::Config("give --listen HOST:PORT and/or --unix PATH".into()));
        }
        let backend = TwinBackend::open(dir, opts.twin.clone())?;
        let mut server = Server::new(backend.clone()).with_config(opts.server.clone());
        for a in &opts.tcp {
            server = server.listen_tcp(a.as_str())?;
        }
        for p in &opts.unix {
            server = server.listen_unix(p)?;
        }
        let metrics = match &opts.metrics {
            Some(a) => Some(crate::metrics::MetricsServer::start(a, backend.clone()).map_err(io_err(format!("metrics listener {a}")))?),
            None => None,
        };
        let handle = server.start()?;
        let mut uris = Vec::new();
        for name in backend.export_names() {
            uris.extend(handle.uris(&name));
        }
        backend.attach_server(handle.stopper(), uris.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (backend.clone(), stop.clone());
        let tick = opts.twin.tick;
        let hk = std::thread::Builder::new()
            .name("ssdtwin-housekeeping".into())
            .spawn(move || {
                let mut last_err: Option<String> = None;
                while !s.load(Relaxed) {
                    if let Err(e) = b.tick() {
                        if last_err.as_ref() != Some(&e) {
                            eprintln!("ssdtwin serve: {e}");
                            last_err = Some(e);
                        }
                    }
                    std::thread::park_timeout(tick);
                }
            })
            .map_err(io_err("spawn the housekeeping thread"))?;
        // A first snapshot at once, so `live.json` exists as soon as clients can connect.
        let _ = backend.tick();
        Ok(Serving { backend, handle: Some(handle), housekeeper: Some((hk, stop)), metrics, uris })
    }

    /// `nbd://…/nsN` (and `nbd+unix://…`) URIs of every export.
    pub fn uris(&self) -> &[String] {
        &self.uris
    }

    /// Bound TCP addresses (with the real port when 0 was asked for).
    pub fn tcp_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.handle.as_ref().map(|h| h.tcp_addrs().to_vec()).unwrap_or_default()
    }

    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(|m| m.addr())
    }

    pub fn backend(&self) -> &Arc<TwinBackend> {
        &self.backend
    }

    pub fn stats(&self) -> ServerStats {
        self.handle.as_ref().map(|h| h.stats()).unwrap_or_default()
    }

    /// Stop serving (connections get the server's grace period), then commit and return
    /// the session summary.
    pub fn stop(mut self) -> Result<Value, TwinError> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<Value, TwinError> {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
        if let Some((t, s)) = self.housekeeper.take() {
            s.store(true, Relaxed);
            t.thread().unpark();
            let _ = t.join();
        }
        let summary = self.backend.close();
        if let Some(m) = self.metrics.take() {
            m.stop();
        }
        summary
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.stop_inner();
        }
    }
}
