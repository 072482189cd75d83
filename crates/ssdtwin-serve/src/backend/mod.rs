//! The drive image as an NBD [`Backend`]: one export per attached namespace.
//!
//! All connections share one `Mutex<State>` holding the image (controller and FTL), the
//! timing model and the journal, so every command reaches the controller in one order, the
//! same order the journal records; the data itself lives in a sparse file per namespace
//! ([`crate::data`]) that connections read and write in parallel, outside the lock.
//!
//! * **Pacing** ([`Pace::Model`]): virtual time is nanoseconds since the server started
//!   ([`crate::clock`]); each command runs through `DeviceTiming` at the current virtual
//!   time and its reply is held until the model's completion time (`Done::at`). Gaps with
//!   nothing outstanding give background GC its idle time. [`Pace::Off`] runs the
//!   controller in fast-forward and replies at once.
//! * **Durability**: FLUSH (and FUA) fdatasync the data files written since the last flush
//!   and the journal, group-committed: a flush that finds its writes already synced by a
//!   concurrent one returns without another sync. A server killed at any moment therefore
//!   loses nothing it acknowledged as flushed, and `Image::open` replays the journal to the
//!   FTL state that goes with the data.
//! * **Failure is sticky**: after a failed write or fsync of a data file or the journal,
//!   every later write, trim and flush fails with EIO (the kernel may have dropped the
//!   dirty pages; a retried fsync would report success for lost data). Reads go on.
//! * **Ordering**: a WRITE stores its data *before* the controller executes it (and the
//!   journal records it), and its data file's write count is bumped after both. A FLUSH
//!   reads that count and the journal position before syncing, so everything it covers
//!   completed before the sync began; the per-file and journal sync locks make a later
//!   flush wait for an earlier one still in progress instead of trusting it blindly.
//! * **Arbitration** (`dispatch.rs` over the queues of crate::arb): when feature 01h selects
//!   weighted round robin, a command's controller part waits in its connection's
//!   submission queue for the controller's fetch and its reply is deferred; with round
//!   robin nothing changes.
//!
//! This file holds [`TwinBackend`] and the [`Inner`] state its exports and threads share;
//! `export.rs` is one namespace as an export, `dispatch.rs` the WRR dispatcher,
//! `report.rs` the session summary and `live.json` document.

mod dispatch;
mod export;
mod report;

use export::export_info;
pub(crate) use export::NsCounts;
pub use export::NsExport;

use ssdtwin_core::nvme::NsId;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use serde::Serialize;

use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::image::{Image, Recovery};
use ssdtwin_core::journal::{check_record, JournalWriter};
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::{FtlFingerprint, PRCHK_APPTAG, PRCHK_GUARD, PRCHK_REFTAG};
use ssdtwin_nbd::{Backend, Done, Errno, Export, ExportInfo, ServerStats, Stopper};

use crate::arb::ArbState;
use crate::clock::{Clock, WallClock};
use crate::command::{record, Io};
use crate::config::{Pace, TwinConfig};
use crate::data::DataFile;
use crate::error::{nbd_errno, ServeError};
use crate::live::SessionSummary;
use crate::state::{latency_histogram, Failure, State};

/// PRCHK of every NBD read on a namespace with protection information: all three tags.
const NBD_PRCHK: u8 = PRCHK_GUARD | PRCHK_APPTAG | PRCHK_REFTAG;

/// Commands and bytes, counted outside the lock (also the Prometheus counters).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reads: Counter,
    pub(crate) writes: Counter,
    pub(crate) trims: Counter,
    pub(crate) write_zeroes: Counter,
    pub(crate) flushes: Counter,
    pub(crate) block_status: Counter,
    pub(crate) read_bytes: Counter,
    pub(crate) write_bytes: Counter,
    pub(crate) errors: Counter,
    pub(crate) syncs: Counter,
    pub(crate) connections_open: Gauge,
    /// Reads and writes the timing model ran, and the sum of their model latencies (ns):
    /// the summary's mean latencies (the histograms keep no sum outside tests).
    pub(crate) timed_reads: Counter,
    pub(crate) timed_writes: Counter,
    pub(crate) read_latency_ns: Counter,
    pub(crate) write_latency_ns: Counter,
}

/// What a backend runs on (shared by the backend, its exports and its threads).
pub(crate) struct Inner {
    dir: PathBuf,
    pub(crate) cfg: TwinConfig,
    clock: Arc<dyn Clock>,
    /// The real instant virtual time 0 corresponds to (for `Done::at`).
    pub(crate) start: Instant,
    start_unix_ms: u64,
    state: Mutex<Option<State>>,
    /// Journal records known to be on stable storage (appended-count units).
    journal_synced: Mutex<u64>,
    /// A second descriptor of the journal, synced outside the state lock.
    journal_file: File,
    journal_path: PathBuf,
    pub(crate) files: BTreeMap<u32, Arc<DataFile>>,
    pub(crate) counters: Counters,
    pub(crate) hist_read: Histogram,
    pub(crate) hist_write: Histogram,
    server: OnceLock<(Stopper, Vec<String>)>,
    /// Set by the first failed write or fsync: writes fail from then on.
    failed: OnceLock<String>,
    recovery: Option<Recovery>,
    pub(crate) preset: String,
    pub(crate) scale: u32,
    pub(crate) iu_bytes: u32,
    /// The drive keeps die parity: its NAND writes have a parity series.
    pub(crate) die_parity: bool,
    /// Wakes the arbitration dispatcher (WRR only) and its thread.
    arb_cv: Condvar,
    arb_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("dir", &self.dir).finish()
    }
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now_v(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    pub(crate) fn server_stats(&self) -> ServerStats {
        self.server.get().map(|(s, _)| s.stats()).unwrap_or_default()
    }

    /// Remember the first failure; writes fail from now on.
    pub(crate) fn fail(&self, why: Failure) -> Errno {
        let _ = self.failed.set(why);
        Errno::Io
    }

    /// Writes are still allowed.
    pub(crate) fn check_writable(&self) -> Result<(), Errno> {
        if self.failed.get().is_some() {
            return Err(Errno::Io);
        }
        Ok(())
    }

    /// Ask the controller whether it would accept a write or deallocate of the range before
    /// the data file is touched: a refused command must leave the data as it was.
    /// A refused command goes into the drive's Error Information log (`opcode`: the NVMe
    /// command it stands for).
    fn admit_write(&self, opcode: u8, nsid: u32, slba: u64, nlb: u64) -> Result<(), Errno> {
        self.check_writable()?;
        let mut g = self.lock();
        let st = g.as_mut().ok_or(Errno::Shutdown)?;
        let ctrl = &mut st.img.ctrl;
        match ctrl.check_write(NsId(nsid), slba, nlb) {
            Ok(_) => Ok(()),
            Err(e) => Err(nbd_errno(&ctrl.log_io_error(e, opcode, nsid, slba), true)),
        }
    }

    /// One read's or write's model latency (arrival to completion, virtual ns): the
    /// latency histograms and the summary's means.
    pub(crate) fn observe_latency(&self, write: bool, lat_ns: u64) {
        let c = &self.counters;
        let (hist, n, sum) = if write {
            (&self.hist_write, &c.timed_writes, &c.write_latency_ns)
        } else {
            (&self.hist_read, &c.timed_reads, &c.read_latency_ns)
        };
        hist.observe(lat_ns as f64 / 1e9);
        n.inc();
        sum.inc_by(lat_ns);
    }

    pub(crate) fn failure(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }
}

/// The live FTL fingerprint (`GET /debug/ftl`).
#[derive(Clone, Debug, Serialize)]
pub struct LiveFingerprint {
    #[serde(flatten)]
    pub ftl: FtlFingerprint,
    pub journal_records: u64,
    pub generation: u64,
}

/// The drive image as an NBD [`Backend`]: one export per attached namespace.
pub struct TwinBackend {
    pub(crate) inner: Arc<Inner>,
    pub(crate) exports: Vec<Arc<NsExport>>,
    /// Set when a host stack's volume is what is served (crate::stack): live.json and the
    /// summary show its export and counters instead of the namespaces'.
    pub(crate) stack_export: OnceLock<StackRow>,
}

/// A served stack's export as live.json and the summary show it.
pub(crate) struct StackRow {
    pub(crate) nsid: u32,
    pub(crate) info: ExportInfo,
    pub(crate) counts: Arc<NsCounts>,
}

impl TwinBackend {
    /// Open the image at `dir` for serving, on the wall clock.
    pub fn open(dir: &Path, cfg: TwinConfig) -> Result<Arc<TwinBackend>, ServeError> {
        Self::open_with_clock(dir, cfg, Arc::new(WallClock::new()))
    }

    /// Open the image at `dir` for serving: takes the image lock, recovers a journal a
    /// killed server left (see `Image::open`), checks and records the namespaces' data
    /// files and starts a fresh journal. Virtual time comes from `clock`.
    pub fn open_with_clock(dir: &Path, cfg: TwinConfig, clock: Arc<dyn Clock>) -> Result<Arc<TwinBackend>, ServeError> {
        let mut img = Image::open(dir, true)?;
        let recovery = img.recovery().cloned();
        let timing = match cfg.pace {
            Pace::Model => {
                let mut t = DeviceTiming::new(img.ctrl.spec(), img.ctrl.ftl_config())
                    .map_err(|e| ServeError::Config(format!("{e}; serve it with --pace off")))?;
                // NBD carries no metadata: the controller inserts the protection information
                // on writes and checks and strips it on reads (docs/nbd.md, Protection).
                (t.pract, t.prchk) = (true, NBD_PRCHK);
                Some(t)
            }
            Pace::Off => None,
        };
        // Load the maps now rather than stalling the first IO behind it.
        img.ctrl.load_maps()?;
        let paths = img.prepare_data_files()?;
        if paths.is_empty() {
            return Err(ServeError::Config(format!(
                "{}: no attached namespace to serve (ssdtwin nvme list; attach one with ssdtwin nvme attach-ns)",
                dir.display()
            )));
        }
        let journal = JournalWriter::create(dir, img.generation())?;
        let journal_file = journal.sync_handle()?;
        let journal_path = journal.path().to_path_buf();
        let mut files = BTreeMap::new();
        let mut infos = Vec::new();
        for (nsid, p) in &paths {
            files.insert(*nsid, Arc::new(DataFile::open(p)?));
            let info = export_info(&img, *nsid)?;
            infos.push((*nsid, img.ctrl.namespace(NsId(*nsid))?.lba_bytes as u64, info));
        }
        // Feature 01h selects WRR: each connection is a submission queue (dispatch.rs). The
        // image is locked while serving, so the setting cannot change until it stops.
        let arb = timing.as_ref().and_then(|t| {
            let class = paths.iter().map(|(n, _)| (*n, img.ctrl.sq_priority(NsId(*n)))).collect();
            ArbState::new(img.ctrl.arbitration(), class, t.ctrl_service_ps())
        });
        let vl = img.ctrl.vendor_log();
        let (preset, scale, iu_bytes) = (img.manifest.preset.clone(), img.manifest.scale, img.ctrl.ftl_config().iu_bytes);
        let die_parity = img.ctrl.spec().has_die_parity();
        let st = State {
            img,
            timing,
            journal,
            last_check: 0,
            last_v: 0,
            done_v: 0,
            idle_done_v: 0,
            busy_pending_ns: 0,
            clock_done_v: 0,
            idle_gc_moved: 0,
            last_commit_v: 0,
            last_live_v: None,
            commits: 0,
            start_log: vl,
            arb,
            #[cfg(feature = "test-hooks")]
            journal_fails: false,
        };
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            cfg,
            start: clock.origin(),
            start_unix_ms: clock.unix_ms(),
            clock,
            state: Mutex::new(Some(st)),
            journal_synced: Mutex::new(0),
            journal_file,
            journal_path,
            files,
            counters: Counters::default(),
            hist_read: latency_histogram(),
            hist_write: latency_histogram(),
            server: OnceLock::new(),
            failed: OnceLock::new(),
            recovery,
            preset,
            scale,
            iu_bytes,
            die_parity,
            arb_cv: Condvar::new(),
            arb_thread: Mutex::new(None),
        });
        if inner.lock().as_ref().is_some_and(|st| st.arb.is_some()) {
            let t = dispatch::start_dispatcher(&inner).map_err(crate::error::io_err("spawn the arbitration thread"))?;
            *inner.arb_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        }
        let exports = infos
            .into_iter()
            .map(|(nsid, lba, info)| {
                Arc::new(NsExport { inner: inner.clone(), nsid, lba, info, data: inner.files[&nsid].clone(), counts: Default::default() })
            })
            .collect();
        Ok(Arc::new(TwinBackend { inner, exports, stack_export: OnceLock::new() }))
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

    /// Why writes fail, if a write or fsync has failed.
    pub fn failure(&self) -> Option<String> {
        self.inner.failure().map(str::to_string)
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
        let mut err: Option<String> = None;
        let mut step = |r: Result<(), Failure>| {
            if let Err(e) = r {
                inner.fail(e.clone());
                err.get_or_insert(e);
            }
        };
        // WRR: fetch what is due first; the drive is idle only with nothing queued.
        let mut fetched = Vec::new();
        let _ = inner.arb_fetch(st, now_v, false, &mut fetched);
        if st.arb.as_ref().is_none_or(|a| a.is_empty()) {
            step(st.idle(now_v, cfg));
        }
        step(st.write_out());
        let live_due =
            !cfg.live_every.is_zero() && st.last_live_v.is_none_or(|t| now_v.saturating_sub(t) >= cfg.live_every.as_nanos() as u64);
        if live_due {
            step(st.advance_clock(now_v, cfg));
            step(st.write_out());
        }
        let since_commit = Duration::from_nanos(now_v.saturating_sub(st.last_commit_v));
        let idle_for = Duration::from_nanos(now_v.saturating_sub(st.done_v));
        let commit_due = inner.failure().is_none()
            && st.journal.has_records()
            && ((since_commit >= cfg.commit_every && idle_for >= Duration::from_secs(1))
                || since_commit >= cfg.commit_every * 5
                || st.journal.len_bytes() >= cfg.commit_journal_bytes);
        if commit_due {
            if let Err(e) = self.commit_locked(st) {
                err.get_or_insert(e);
            }
        }
        let snap = live_due.then(|| {
            st.last_live_v = Some(now_v);
            self.snapshot_locked(st, true)
        });
        drop(g); // serialise and write outside the lock every I/O takes
        inner.resolve(fetched);
        if let Some(s) = snap {
            if let Err(e) = crate::live::write_live(&inner.dir, &s) {
                err.get_or_insert(format!("writing live.json: {e}"));
            }
        }
        match (err, inner.failure()) {
            (Some(e), _) => Err(e),
            (None, Some(f)) => Err(format!("writes fail since: {f}")),
            (None, None) => Ok(()),
        }
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
        let inner = &self.inner;
        let now_v = inner.now_v().max(st.last_v);
        if let Err(e) = st.advance_clock(now_v, &inner.cfg) {
            inner.fail(e.clone());
            return Err(e);
        }
        if let Err(e) = st.img.commit() {
            // A failed commit poisons the image (its CURRENT may already name the new
            // generation while the journal still names the old one): accepting more writes
            // would acknowledge data a restart discards with that stale journal.
            let why = format!("commit: {e}");
            inner.fail(why.clone());
            return Err(why);
        }
        st.commits += 1;
        st.last_commit_v = now_v;
        let g = st.img.generation();
        if let Err(e) = st.journal.reset(g) {
            let why = format!("resetting the journal: {e}");
            inner.fail(why.clone());
            return Err(why);
        }
        // Everything appended so far is in the committed generation.
        let mut synced = inner.journal_synced.lock().unwrap_or_else(|e| e.into_inner());
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
    pub fn fingerprint(&self) -> Result<LiveFingerprint, String> {
        let mut g = self.inner.lock();
        let st = g.as_mut().ok_or("the backend is closed")?;
        let fetched = self.inner.arb_drain(st).map_err(|e| format!("{e:?}"))?;
        st.write_out()?;
        let ftl = st.img.ctrl.ftl_fingerprint().map_err(|e| e.to_string())?;
        let fp = LiveFingerprint { ftl, journal_records: st.journal.appended(), generation: st.img.generation() };
        drop(g);
        self.inner.resolve(fetched);
        Ok(fp)
    }

    /// Stop: commit the state (a clean shutdown leaves no journal), sync the data and
    /// write a final `live.json` with `"serving": false`. Idempotent. After a failure the
    /// state is still committed (the FTL and the data files stay consistent with each other
    /// as far as the model goes) and the failure is returned.
    pub fn close(&self) -> Result<Option<SessionSummary>, ServeError> {
        let inner = &self.inner;
        let mut g = inner.lock();
        let Some(mut st) = g.take() else { return Ok(None) };
        // WRR: every queued command is fetched and answered before the state is committed.
        let fetched = inner.arb_drain(&mut st).unwrap_or_default();
        inner.resolve(fetched);
        inner.arb_cv.notify_all();
        let now_v = inner.now_v().max(st.last_v);
        // Every record into the journal file first: if the commit fails, the next open
        // replays the journal instead.
        let mut failure = st.advance_clock(now_v, &inner.cfg).and_then(|()| st.write_out()).err();
        for f in inner.files.values() {
            if let Err(e) = f.sync() {
                failure.get_or_insert(format!("syncing the data: {e}"));
            }
        }
        st.img.commit()?;
        st.commits += 1;
        let snap = self.snapshot_locked(&mut st, false);
        let summary = snap.stats.clone();
        let State { img, journal, .. } = st;
        journal.remove()?;
        drop(img); // releases the image lock
        drop(g);
        if let Some(t) = inner.arb_thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
        crate::live::write_live(&inner.dir, &snap).map_err(crate::error::io_err("write live.json"))?;
        if let Some(f) = failure.or_else(|| inner.failure().map(str::to_string)) {
            return Err(ServeError::Failed(format!("{}: the state is committed, but a write or fsync failed while serving ({f}): data acknowledged since the last successful FLUSH may be lost", inner.dir.display())));
        }
        Ok(Some(summary))
    }

    /// Make every journal append fail from now on, as a full or failing disk would: the
    /// request that meets it fails, and writes fail from then on (sticky).
    #[cfg(feature = "test-hooks")]
    pub fn fail_journal_for_tests(&self) {
        if let Some(st) = self.inner.lock().as_mut() {
            st.journal_fails = true;
        }
    }

    /// Simulate `kill -9` in tests: drop the in-memory state without committing or writing
    /// buffered journal records (what was written to the journal file stays, as the page
    /// cache keeps it for a killed process) and release the image lock.
    #[cfg(feature = "test-hooks")]
    pub fn crash_for_tests(&self) {
        let mut g = self.inner.lock();
        if let Some(st) = g.take() {
            let State { img, journal, .. } = st;
            // A killed process's buffer is lost and its file stays as written: dropping the
            // writer does just that (it has no Drop that flushes) and closes the file, where
            // forgetting it leaked one descriptor per crash (`make sim` over a few thousand
            // seeds ran out of them).
            drop(journal);
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
        let mut g = self.lock();
        if self.cfg.pace == Pace::Model && g.as_ref().is_some_and(|st| st.arb.is_some()) {
            return self.arb_exec(g, nsid, ops);
        }
        let st = g.as_mut().ok_or(Errno::Shutdown)?;
        if self.cfg.pace == Pace::Off {
            for &(io, slba, nlb) in ops {
                let ctrl = &mut st.img.ctrl;
                let r = match io {
                    Io::Read => {
                        ctrl.read(NsId(nsid), slba, nlb, &mut NoTiming).and_then(|_| ctrl.check_pi(NsId(nsid), slba, nlb, NBD_PRCHK))
                    }
                    Io::Write => ctrl.write(NsId(nsid), slba, nlb, &mut NoTiming),
                    Io::Dealloc => ctrl.deallocate(NsId(nsid), slba, nlb).map(|_| ()),
                };
                r.map_err(|e| nbd_errno(&e, io != Io::Read))?;
                st.append(record(io, nsid, slba, nlb), &self.cfg).map_err(|e| self.fail(e))?;
            }
            return Ok(Done::NOW);
        }
        let now_v = self.now_v().max(st.last_v);
        st.last_v = now_v;
        st.idle(now_v, &self.cfg).map_err(|e| self.fail(e))?;
        let done_v = self.timed(st, nsid, ops, now_v)?;
        self.account(st, ops.first().map(|o| o.0), now_v, done_v);
        Ok(self.done_at(done_v))
    }

    /// The reply time of a command completing at virtual `done_v`.
    fn done_at(&self, done_v: u64) -> Done {
        Done::at(self.start + Duration::from_nanos(done_v))
    }

    /// Latency histograms and controller busy time of a command of kind `io` that arrived
    /// at `arrival_v` and completed at `done_v`.
    fn account(&self, st: &mut State, io: Option<Io>, arrival_v: u64, done_v: u64) {
        match io {
            Some(Io::Read) => self.observe_latency(false, done_v - arrival_v),
            Some(Io::Write) => self.observe_latency(true, done_v - arrival_v),
            _ => {}
        }
        // Controller busy time: the union of the commands' [arrival, completion] spans.
        let from = arrival_v.max(st.done_v);
        if done_v > from {
            st.busy_pending_ns += done_v - from;
        }
        st.done_v = st.done_v.max(done_v);
    }

    /// The commands through the timing model at `now_v`; returns the latest completion.
    fn timed(&self, st: &mut State, nsid: u32, ops: &[(Io, u64, u64)], now_v: u64) -> Result<u64, Errno> {
        let mut done_v = now_v;
        for &(io, slba, nlb) in ops {
            let timing = st.timing.as_mut().expect("pace model has a timing model");
            let ctrl = &mut st.img.ctrl;
            let r = match io {
                Io::Read => timing.read(ctrl, now_v, NsId(nsid), slba, nlb),
                Io::Write => timing.write(ctrl, now_v, NsId(nsid), slba, nlb),
                Io::Dealloc => timing.deallocate(ctrl, now_v, NsId(nsid), slba, nlb),
            };
            let t = r.map_err(|e| nbd_errno(&e, io != Io::Read))?;
            st.append(record(io, nsid, slba, nlb), &self.cfg).map_err(|e| self.fail(e))?;
            done_v = done_v.max(t);
        }
        Ok(done_v)
    }

    /// Make acknowledged writes durable: the data files (`only`, or all) and the journal.
    pub(crate) fn durable(&self, only: Option<&DataFile>) -> Result<(), Errno> {
        self.check_writable()?;
        let sync_file = |f: &DataFile| -> Result<(), Errno> {
            if f.sync().map_err(|e| self.fail(format!("syncing the data: {e}")))? {
                self.counters.syncs.inc();
            }
            Ok(())
        };
        match only {
            Some(f) => sync_file(f)?,
            None => {
                for f in self.files.values() {
                    sync_file(f)?;
                }
            }
        }
        let (ticket, fetched) = {
            let mut g = self.lock();
            let st = g.as_mut().ok_or(Errno::Shutdown)?;
            // WRR: queued commands are fetched first, so their records are in the journal
            // this flush syncs (a flush is an ordering barrier, crate::arb).
            let fetched = self.arb_drain(st)?;
            if st.journal.appended() > st.last_check {
                let r = check_record(&st.img.ctrl);
                st.journal.append(&r);
                st.last_check = st.journal.appended();
            }
            st.write_out().map_err(|e| self.fail(e))?;
            (st.journal.appended(), fetched)
        };
        self.resolve(fetched);
        let mut synced = self.journal_synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced < ticket {
            JournalWriter::sync_file(&self.journal_file, &self.journal_path).map_err(|e| self.fail(format!("syncing the journal: {e}")))?;
            self.counters.syncs.inc();
            *synced = (*synced).max(ticket);
        }
        Ok(())
    }
}
