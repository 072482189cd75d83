//! `_core.Drive`: an open drive (an image on disk, or one held only in memory), its NVMe
//! commands, and the runs made on it (precondition, fio jobs, a host stack's runs), each
//! with the GIL released and the drive's lock taken (lock.rs, "Locking rule").

use pyo3::prelude::*;
use serde::Serialize;
use std::path::PathBuf;

use ssdtwin_core::engine::fio::converge::{ConvergeOut, ConvergeRule};
use ssdtwin_core::engine::fio::{self, CloneOut, RunError, RunOptions};
use ssdtwin_core::engine::DeviceTiming;

use ssdtwin_core::image::{Image, Manifest, OpenMode};
use ssdtwin_core::nand::{NoTiming, ShardSink, TouchCounter};
use ssdtwin_core::nvme::{self, CheckEnd, Controller, NsId, Pattern, ProtectionRequest};
use ssdtwin_core::progress::Progress;
use ssdtwin_core::spec::{DriveSpec, TimingSpec};
use ssdtwin_core::workload::JobSpec;

use crate::bridge::{from_py, keep_going, report, to_py};
use crate::errors::Failure;
use crate::lock::CallLock;
use crate::stack::PyHostStack;
use crate::view::DriveView;

pub(crate) enum Backing {
    Image(Box<Image>),
    Memory(Box<Controller>),
}

impl Backing {
    pub(crate) fn ctrl(&mut self) -> &mut Controller {
        match self {
            Backing::Image(i) => &mut i.ctrl,
            Backing::Memory(c) => c,
        }
    }

    /// Remove a namespace's served data after the controller deleted, formatted or
    /// (re)created it (an image's bookkeeping; a drive in memory has no data files).
    fn drop_data(&mut self, nsid: u32) -> Result<(), Failure> {
        match self {
            Backing::Image(i) if i.is_writable() => Ok(i.drop_data(nsid)?),
            _ => Ok(()),
        }
    }
}

/// An open drive: an image on disk, or a drive held only in memory.
#[pyclass(module = "ssdtwin._core")]
pub(crate) struct Drive {
    inner: CallLock<Backing>,
    path: Option<PathBuf>,
}

impl Drive {
    fn new(backing: Backing, path: Option<PathBuf>) -> Drive {
        Drive { inner: CallLock::new(backing), path }
    }

    /// Run `f` on the drive with the GIL released: the mutex is taken (and waited for)
    /// only while detached, never while attached (see the module's locking rule).
    pub(crate) fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Backing) -> Result<R, Failure> + Send) -> PyResult<R> {
        py.detach(|| self.inner.locked(|g| f(g.as_mut().ok_or(Failure::Closed)?))).map_err(PyErr::from)
    }

    /// [`Drive::with`] on the controller, returning a core structure as Python objects
    /// (converted after the mutex is released).
    fn query<T: Serialize + Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Controller) -> Result<T, Failure> + Send,
    ) -> PyResult<Py<PyAny>> {
        let v = self.with(py, |b| f(b.ctrl()))?;
        to_py(py, &v)
    }

    /// `precondition`'s writes with the FTL's operations sent to a new `S` (returned with
    /// the report), `progress(done, total, "bytes", 0)` called as they go; an error it
    /// raised (Ctrl-C's included) is raised once the writes have stopped.
    #[allow(clippy::too_many_arguments)]
    fn precondition_into<S: ShardSink>(
        &self,
        py: Python<'_>,
        nsid: u32,
        pattern: &str,
        block_bytes: u64,
        amount_bytes: u64,
        seed: u64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(nvme::PreconditionReport, S)> {
        let pat = self::pattern(pattern)?;
        let progress = progress.as_ref();
        self.with(py, |b| {
            let mut pending: Option<PyErr> = None;
            let mut cb = |done: u64, total: u64| report(progress, &mut pending, &Progress::bytes(done, total));
            let mut sink = S::default();
            let report = b.ctrl().precondition_with(NsId(nsid), pat, block_bytes, amount_bytes, seed, &mut cb, &mut sink)?;
            match pending {
                Some(e) => Err(Failure::Python(e)),
                None => Ok((report, sink)),
            }
        })
    }
}

/// `spec` built with `sets` NVM Sets and `partitions` FTL partitions per set (None: as it is).
fn with_sets(spec: DriveSpec, sets: Option<u32>, partitions: Option<u32>) -> Result<DriveSpec, Failure> {
    let spec = match sets {
        Some(k) => spec.with_nvm_sets(k)?,
        None => spec,
    };
    match partitions {
        Some(k) => Ok(spec.with_partitions(k)?),
        None => Ok(spec),
    }
}

fn resolve_spec(preset: Option<&str>, spec_toml: Option<&str>, origin: &str) -> Result<DriveSpec, Failure> {
    match (preset, spec_toml) {
        // One would be ignored: the drive built would not be the one the caller named.
        (Some(_), Some(_)) => Err(Failure::Value("preset and spec_toml: give one of them, not both".into())),
        (None, Some(t)) => Ok(DriveSpec::from_toml(t, origin)?),
        (Some(p), None) => Ok(DriveSpec::preset(p)?),
        (None, None) => Err(Failure::SpecText("give a preset name or a spec TOML".into())),
    }
}

fn pattern(text: &str) -> Result<Pattern, Failure> {
    text.parse::<Pattern>().map_err(|e| Failure::Value(e.to_string()))
}

#[pymethods]
impl Drive {
    /// Create a drive image at `path` from a preset (or a spec TOML) at 1/`scale`.
    #[staticmethod]
    /// `nvm_sets`: the NVM Sets to build it with (1 ..= the preset's `nvm_sets.max_sets`;
    /// None: the preset's own, one set or none); `partitions`: FTL partitions per set (a
    /// power of two; None: the preset's own).
    #[pyo3(signature = (path, preset=None, scale=1, seed=1, spec_toml=None, nvm_sets=None, partitions=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        preset: Option<&str>,
        scale: u32,
        seed: u64,
        spec_toml: Option<&str>,
        nvm_sets: Option<u32>,
        partitions: Option<u32>,
    ) -> PyResult<Drive> {
        let spec = with_sets(resolve_spec(preset, spec_toml, "spec")?.scaled(scale).map_err(Failure::from)?, nvm_sets, partitions)?;
        let name = preset.map(str::to_string).unwrap_or_else(|| spec.drive.name.clone());
        let img = py.detach(|| Image::create(&path, spec, &name, seed)).map_err(Failure::from)?;
        Ok(Drive::new(Backing::Image(Box::new(img)), Some(path)))
    }

    /// Open an existing image. `writable=False` reads the committed state without the lock;
    /// `repair=True` (writable) replays a damaged journal up to the damage and drops the
    /// rest, keeping a copy (`ssdtwin check --repair`).
    #[staticmethod]
    #[pyo3(signature = (path, writable=true, repair=false))]
    fn open(py: Python<'_>, path: PathBuf, writable: bool, repair: bool) -> PyResult<Drive> {
        let mode = match (writable, repair) {
            (_, true) => OpenMode::Repair,
            (true, false) => OpenMode::Writable,
            (false, false) => OpenMode::ReadOnly,
        };
        let img = py.detach(|| Image::open_with(&path, mode)).map_err(Failure::from)?;
        Ok(Drive::new(Backing::Image(Box::new(img)), Some(path)))
    }

    /// A drive that lives only in memory (benchmarks, notebooks).
    #[staticmethod]
    #[pyo3(signature = (preset=None, scale=1, seed=1, spec_toml=None, nvm_sets=None, partitions=None))]
    fn in_memory(
        py: Python<'_>,
        preset: Option<&str>,
        scale: u32,
        seed: u64,
        spec_toml: Option<&str>,
        nvm_sets: Option<u32>,
        partitions: Option<u32>,
    ) -> PyResult<Drive> {
        let spec = with_sets(resolve_spec(preset, spec_toml, "spec")?.scaled(scale).map_err(Failure::from)?, nvm_sets, partitions)?;
        let c = py.detach(|| Controller::new(spec, seed)).map_err(Failure::from)?;
        Ok(Drive::new(Backing::Memory(Box::new(c)), None))
    }

    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.path.clone()
    }

    /// Make the current state the committed state of the image (crash-safe).
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |b| match b {
            Backing::Image(i) => Ok(i.commit()?),
            Backing::Memory(_) => Err(Failure::Other("an in-memory drive has no image to commit to".into())),
        })
    }

    /// Release the image (and its lock) without committing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let backing = py.detach(|| self.inner.locked(|g| Ok(g.take())))?;
        py.detach(move || drop(backing)); // unmapping large maps takes a while
        Ok(())
    }

    fn manifest(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let m = self.with(py, |b| {
            Ok(match b {
                Backing::Image(i) => i.manifest.clone(),
                Backing::Memory(c) => Manifest::in_memory(&c.spec().drive.name, c.spec().scale, c.state().seed),
            })
        })?;
        to_py(py, &m)
    }

    /// What opening did with a journal left by a server that was killed (None if none).
    fn recovery(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let r = self.with(py, |b| {
            Ok(match b {
                Backing::Image(i) => i.recovery().cloned(),
                Backing::Memory(_) => None,
            })
        })?;
        to_py(py, &r)
    }

    /// Checksums of the FTL maps and its counters (equal fingerprints = the same FTL state).
    fn ftl_fingerprint(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.ftl_fingerprint()?))
    }

    fn generation(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |b| {
            Ok(match b {
                Backing::Image(i) => i.generation(),
                Backing::Memory(_) => 0,
            })
        })
    }

    fn spec_toml(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |b| Ok(b.ctrl().spec().to_toml()))
    }

    fn id_ctrl(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.id_ctrl()))
    }

    fn id_ns(&self, py: Python<'_>, nsid: u32) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.id_ns(NsId(nsid))?))
    }

    /// Every namespace with its size, use, format and attachment.
    fn list_ns(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.namespace_rows()))
    }

    /// One namespace's row of `list_ns` (NvmeError INVALID_NS if there is none).
    fn namespace(&self, py: Python<'_>, nsid: u32) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.namespace_row(NsId(nsid))?))
    }

    /// The LBA format index whose data size is `block_bytes` (NvmeError INVALID_FORMAT if none).
    fn lba_format_index(&self, py: Python<'_>, block_bytes: u64) -> PyResult<u8> {
        self.with(py, |b| Ok(b.ctrl().lba_format_index(block_bytes)?))
    }

    /// What the read-only commands show, as the same structure a server's live.json holds.
    fn view(&self, py: Python<'_>) -> PyResult<DriveView> {
        let view = self.with(py, |b| Ok(b.ctrl().view()))?;
        Ok(DriveView { view })
    }

    /// (A data file a server left under the new NSID is stale: it is removed.)
    /// `dram`: a DRAM namespace (within the preset's DRAM budget, no NAND behind it).
    /// `nvmsetid`: the NVM Set to place it in (0: the controller picks the first with room).
    #[pyo3(signature = (nsze, ncap, flbas=0, nmic=0, dram=false, nvmsetid=0))]
    #[allow(clippy::too_many_arguments)] // the Namespace Management fields, as nvme-cli takes them
    fn create_ns(&self, py: Python<'_>, nsze: u64, ncap: u64, flbas: u8, nmic: u8, dram: bool, nvmsetid: u16) -> PyResult<u32> {
        self.with(py, |b| {
            let c = b.ctrl();
            let nsid = c.create_ns_in(nsze, ncap, flbas, nmic, dram, nvmsetid)?.0;
            b.drop_data(nsid)?;
            Ok(nsid)
        })
    }

    /// Also removes the namespace's served data (DIR/data/nsN.img).
    fn delete_ns(&self, py: Python<'_>, nsid: u32) -> PyResult<()> {
        self.with(py, |b| {
            b.ctrl().delete_ns(NsId(nsid))?;
            b.drop_data(nsid)
        })
    }

    fn attach_ns(&self, py: Python<'_>, nsid: u32, controllers: Vec<u16>) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().attach_ns(NsId(nsid), &controllers)?))
    }

    fn detach_ns(&self, py: Python<'_>, nsid: u32, controllers: Vec<u16>) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().detach_ns(NsId(nsid), &controllers)?))
    }

    /// Every variant purges: the mappings and the served data (DIR/data/nsN.img) go.
    /// `pi` (0-3), `pil` (PI in the first 8 bytes of the metadata) and `ms` (1: extended
    /// LBA, metadata with each block's data) as nvme-cli's `format --pi --pil --ms`.
    #[pyo3(signature = (nsid, lbaf=0, ses=0, pi=0, pil=false, ms=false))]
    #[allow(clippy::too_many_arguments)]
    fn format(&self, py: Python<'_>, nsid: u32, lbaf: u8, ses: u8, pi: u8, pil: bool, ms: bool) -> PyResult<()> {
        let req = ProtectionRequest { pi, pil, extended: ms };
        self.with(py, |b| {
            b.ctrl().format_with(NsId(nsid), lbaf, ses, req)?;
            b.drop_data(nsid)
        })
    }

    /// The Sanitize command (nvme-cli's fields). On success every namespace's served data
    /// (DIR/data/nsN.img) goes with its mappings.
    #[pyo3(signature = (sanact, ause=false, owpass=0, oipbp=false, no_dealloc=false, ovrpat=0))]
    #[allow(clippy::too_many_arguments)] // the Sanitize command's fields, as nvme-cli takes them
    fn sanitize(&self, py: Python<'_>, sanact: u8, ause: bool, owpass: u8, oipbp: bool, no_dealloc: bool, ovrpat: u32) -> PyResult<()> {
        let req = nvme::SanitizeRequest { sanact, ause, owpass, oipbp, no_dealloc, ovrpat };
        self.with(py, |b| {
            b.ctrl().sanitize(req)?;
            if sanact != nvme::SANACT_EXIT_FAILURE {
                let ids: Vec<u32> = b.ctrl().namespaces().map(|n| n.nsid).collect();
                for id in ids {
                    b.drop_data(id)?;
                }
            }
            Ok(())
        })
    }

    /// Vendor error injection: corrupt the stored PI tags `tags` (4 guard, 2 application,
    /// 1 reference) of one LBA.
    fn inject_pi_error(&self, py: Python<'_>, nsid: u32, lba: u64, tags: u8) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().inject_pi_error(NsId(nsid), lba, tags)?))
    }

    /// The end-to-end check a read with PRCHK bits `prchk` makes (raises the NVMe status),
    /// after the checks of the read itself (namespace, LBA range, PRCHK bits).
    fn check_pi(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64, prchk: u8) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().check_pi_command(NsId(nsid), slba, nlb, prchk)?))
    }

    /// Let the drive run until the sanitize in progress ends; returns the nanoseconds waited.
    fn wait_sanitize(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |b| Ok(b.ctrl().wait_sanitize()))
    }

    /// Sanitize durations in ns of this drive in power state `ps` (None without timing).
    fn sanitize_times(&self, py: Python<'_>, ps: u8) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(nvme::sanitize_times(c.spec(), ps)))
    }

    /// `cdw11`: the NVM Set of features 13h and 14h; `sel`: 0 current, 1 default, 2 saved,
    /// 3 supported capabilities.
    #[pyo3(signature = (fid, nsid=0, cdw11=0, sel=0))]
    fn get_feature(&self, py: Python<'_>, fid: u8, nsid: u32, cdw11: u32, sel: u8) -> PyResult<u32> {
        self.with(py, |b| Ok(b.ctrl().get_feature_sel(fid, NsId(nsid), cdw11, sel)?))
    }

    /// `value` is CDW11; `cdw12` carries the value of features 13h and 14h; `save` is SV.
    #[pyo3(signature = (fid, value, nsid=0, cdw12=0, save=false))]
    fn set_feature(&self, py: Python<'_>, fid: u8, value: u32, nsid: u32, cdw12: u32, save: bool) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().set_feature_save(fid, NsId(nsid), value, cdw12, save)?))
    }

    /// Log page 0Ah: Predictable Latency Per NVM Set of `nvmsetid`.
    fn pred_lat_log(&self, py: Python<'_>, nvmsetid: u16) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.pred_lat_log(nvmsetid)?))
    }

    /// The vendor ANA command: group `grpid` (= NSID) to `state` (optimized,
    /// non-optimized, inaccessible, persistent-loss, change, or the state's number).
    fn set_ana_state(&self, py: Python<'_>, grpid: u32, state: &str) -> PyResult<()> {
        let state = state.to_string();
        self.with(py, |b| Ok(b.ctrl().set_ana_state_named(grpid, &state)?))
    }

    /// The vendor media-error command: `nlb` blocks at `slba` of `nsid` become unrecoverable.
    fn inject_media_error(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().inject_media_error(NsId(nsid), slba, nlb)?))
    }

    /// Get LBA Status (rebuild assist): the unrecoverable ranges from `slba`.
    fn get_lba_status(&self, py: Python<'_>, nsid: u32, slba: u64, mndw: u32, atype: u8, rl: u16) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.get_lba_status(NsId(nsid), slba, mndw, atype, rl)?))
    }

    /// Log page 0Ch: Asymmetric Namespace Access.
    fn ana_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.ana_log()?))
    }

    /// Every set's Predictable Latency Mode state (vendor view; empty: never enabled).
    fn plm_state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.plm_sets().to_vec()))
    }

    /// Log page 0Bh: the NVM Sets with Predictable Latency events.
    fn pred_lat_event_agg(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.pred_lat_event_agg()?))
    }

    /// The vendor QoS command: caps of namespace `nsid` (bytes/s, commands/s; 0 = no cap).
    fn set_qos(&self, py: Python<'_>, nsid: u32, read_bytes_per_s: u64, write_bytes_per_s: u64, iops: u64) -> PyResult<()> {
        let limits = nvme::QosLimits { read_bytes_per_s, write_bytes_per_s, iops };
        self.with(py, |b| Ok(b.ctrl().set_qos(NsId(nsid), limits)?))
    }

    /// The priority class of namespace `nsid`'s queues (0 urgent, 1 high, 2 medium, 3 low).
    fn set_sq_priority(&self, py: Python<'_>, nsid: u32, class: u8) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().set_sq_priority(NsId(nsid), class)?))
    }

    /// Every namespace's QoS caps: [{nsid, read_bytes_per_s, write_bytes_per_s, iops, sq_priority}].
    fn qos(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.qos_rows()))
    }

    fn smart_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.smart_log()))
    }

    /// Identify CNS 04h: the NVM Set List from `nvmsetid` on (0: every set).
    #[pyo3(signature = (nvmsetid=0))]
    fn id_nvmset(&self, py: Python<'_>, nvmsetid: u16) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.id_nvmset(nvmsetid)?))
    }

    /// Log page 09h: the Endurance Group Information log of group `endgid`.
    fn endurance_log(&self, py: Python<'_>, endgid: u16) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.endurance_log(endgid)?))
    }

    fn vendor_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.vendor_log()))
    }

    /// Simulated power off/on (clears write protect until power cycle).
    #[pyo3(signature = (unsafe_shutdown=false))]
    fn power_cycle(&self, py: Python<'_>, unsafe_shutdown: bool) -> PyResult<()> {
        self.with(py, |b| {
            b.ctrl().power_cycle(unsafe_shutdown);
            Ok(())
        })
    }

    /// The next seed of this image's deterministic sequence.
    fn next_seed(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |b| Ok(b.ctrl().next_seed()))
    }

    fn write(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().write(NsId(nsid), slba, nlb, &mut NoTiming)?))
    }

    fn read(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.read(NsId(nsid), slba, nlb, &mut NoTiming)?))
    }

    fn deallocate(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<u64> {
        self.with(py, |b| Ok(b.ctrl().deallocate(NsId(nsid), slba, nlb)?))
    }

    /// Threads fast-forward may use (0: one per core): one per FTL partition, or with one
    /// partition, a second for the write buffer. Results are the same for every count.
    fn set_fast_forward_threads(&self, py: Python<'_>, threads: usize) -> PyResult<()> {
        self.with(py, |b| {
            b.ctrl().set_fast_forward_threads(threads);
            Ok(())
        })
    }

    /// Fast-forward writes. `pattern` is "seq" or "rand"; `progress(done, total, "bytes",
    /// 0)` is called about every 64 MiB (1 GiB with several FTL partitions) with the GIL held
    /// and may raise (Ctrl-C raises KeyboardInterrupt).
    #[pyo3(signature = (nsid, pattern, block_bytes, amount_bytes, seed, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn precondition(
        &self,
        py: Python<'_>,
        nsid: u32,
        pattern: &str,
        block_bytes: u64,
        amount_bytes: u64,
        seed: u64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let (report, _) = self.precondition_into::<NoTiming>(py, nsid, pattern, block_bytes, amount_bytes, seed, progress)?;
        to_py(py, &report)
    }

    /// `precondition` with the FTL's random map accesses counted (`ssdtwin bench ftl`):
    /// {"report": the precondition report, "host_l2p": programmed host IUs'
    /// L2P lines, "gc_checks": victim IUs checked through the L2P}. The drive ends in the
    /// state `precondition` leaves.
    #[pyo3(signature = (nsid, pattern, block_bytes, amount_bytes, seed, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn precondition_touches(
        &self,
        py: Python<'_>,
        nsid: u32,
        pattern: &str,
        block_bytes: u64,
        amount_bytes: u64,
        seed: u64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        #[derive(Serialize)]
        struct Touches {
            report: nvme::PreconditionReport,
            host_l2p: u64,
            gc_checks: u64,
        }
        let (report, sink) = self.precondition_into::<TouchCounter>(py, nsid, pattern, block_bytes, amount_bytes, seed, progress)?;
        to_py(py, &Touches { report, host_l2p: sink.host_l2p, gc_checks: sink.gc_checks })
    }

    /// Run fio job clones (engine contract v1, docs/fio.md §3: a list of dicts) in virtual
    /// time; returns the engine output (§4) as a list of dicts. `progress(done, total, unit,
    /// now_ns)` is called now and then ([`report`]) and may raise (Ctrl-C raises
    /// KeyboardInterrupt); the drive keeps what the
    /// run did up to then. `timing_toml` replaces the drive's `[timing]` table for this run
    /// (what-if, calibration).
    #[pyo3(signature = (specs, default_nsid=1, idle_gc=true, progress=None, timing_toml=None))]
    fn run_fio(
        &self,
        py: Python<'_>,
        specs: &Bound<'_, PyAny>,
        default_nsid: u32,
        idle_gc: bool,
        progress: Option<Py<PyAny>>,
        timing_toml: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let specs: Vec<JobSpec> = from_py(specs, "engine input does not follow contract v1")?;
        let timing: Option<TimingSpec> = match timing_toml {
            Some(t) => Some(toml::from_str(t).map_err(|e| Failure::SpecText(format!("timing: {}", e.message().replace('\n', " "))))?),
            None => None,
        };
        let progress = progress.as_ref();
        self.query(py, |ctrl| -> Result<Vec<CloneOut>, Failure> {
            let mut timing = match timing {
                Some(t) => DeviceTiming::with_timing(ctrl.spec(), ctrl.ftl_config(), t).map_err(RunError::from)?,
                None => DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).map_err(RunError::from)?,
            };
            let opts = RunOptions { default_nsid, idle_gc };
            let mut pending: Option<PyErr> = None;
            let mut cb = |p: &Progress| report(progress, &mut pending, p);
            let out = fio::run(ctrl, &mut timing, specs, &opts, 0, &mut cb);
            if let Some(e) = pending {
                return Err(Failure::Python(e));
            }
            Ok(out?)
        })
    }

    /// `run_fio`, timing each round only until its figures converge under `rule` (a dict of
    /// the core's `ConvergeRule`; missing fields take their defaults) and carrying the rest
    /// of it through the FTL in fast-forward (docs/fio.md, "Converging rounds"). Returns (the
    /// per-clone results, how the run converged).
    #[pyo3(signature = (specs, rule, default_nsid=1, idle_gc=true, progress=None))]
    fn run_fio_converging(
        &self,
        py: Python<'_>,
        specs: &Bound<'_, PyAny>,
        rule: &Bound<'_, PyAny>,
        default_nsid: u32,
        idle_gc: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        let specs: Vec<JobSpec> = from_py(specs, "engine input does not follow contract v1")?;
        let rule: ConvergeRule = from_py(rule, "convergence rule")?;
        let progress = progress.as_ref();
        let (clones, how) = self.with(py, |b| -> Result<(Vec<CloneOut>, ConvergeOut), Failure> {
            let ctrl = b.ctrl();
            let mut timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).map_err(RunError::from)?;
            let opts = RunOptions { default_nsid, idle_gc };
            let mut pending: Option<PyErr> = None;
            let mut cb = |p: &Progress| report(progress, &mut pending, p);
            let out = fio::run_converging(ctrl, &mut timing, specs, &opts, rule, &mut cb);
            if let Some(e) = pending {
                return Err(Failure::Python(e));
            }
            Ok(out?)
        })?;
        Ok((to_py(py, &clones)?, to_py(py, &how)?))
    }

    /// `run_fio` through a host stack on namespace `default_nsid`: the stack advances in
    /// place, as the drive does. Returns the per-clone results. A run that stops on an
    /// error (a bad job, Ctrl-C, an NVMe error) or leaves a state that fails the tier's
    /// check leaves the stack unusable: it would hold a run's half, destages in flight.
    fn run_fio_stack(
        &self,
        py: Python<'_>,
        specs: &Bound<'_, PyAny>,
        default_nsid: u32,
        idle_gc: bool,
        progress: Option<Py<PyAny>>,
        stack: &PyHostStack,
    ) -> PyResult<Py<PyAny>> {
        let specs: Vec<JobSpec> = from_py(specs, "engine input does not follow contract v1")?;
        let progress = progress.as_ref();
        let out = self.with(py, |b| -> Result<Vec<CloneOut>, Failure> {
            let ctrl = b.ctrl();
            let mut timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).map_err(RunError::from)?;
            // Taken once nothing but the run can fail: a closed drive leaves it as it was.
            let mut host = stack.take()?;
            let opts = RunOptions { default_nsid, idle_gc };
            let mut pending: Option<PyErr> = None;
            let mut cb = |p: &Progress| report(progress, &mut pending, p);
            let out = fio::run_stack(ctrl, &mut timing, specs, &opts, &mut cb, &mut host);
            if let Some(e) = pending {
                return Err(Failure::Python(e));
            }
            let out = out?;
            host.tier.check().map_err(|e| Failure::Other(format!("stack state failed its check after the run: {e}")))?;
            stack.put(host);
            Ok(out)
        })?;
        to_py(py, &out)
    }

    /// The host leaves the drive idle for `ns` nanoseconds of simulated time: background GC
    /// reclaims space while its NAND work fits (the engine's `DeviceTiming::idle`, on a fresh
    /// timing state: every die is free at the start), and the drive's power-on clock advances
    /// by `ns` (not its busy time). Returns how many IUs GC moved. What SNIA's Host Idle
    /// Recovery test measures between its write bursts.
    fn idle(&self, py: Python<'_>, ns: u64) -> PyResult<u64> {
        self.with(py, |b| {
            let ctrl = b.ctrl();
            let mut timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).map_err(RunError::from)?;
            let moved = timing.idle(ctrl, 0, ns)?;
            ctrl.advance_clock(ns, 0);
            Ok(moved)
        })
    }

    /// Full FTL consistency check (loads the maps; O(capacity)). Raises on a violation. A
    /// Ctrl-C stops it as it walks the maps (it changes nothing, so any point will do; a
    /// full-scale drive's walk is seconds) and is raised once it has stopped.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |b| {
            let mut pending: Option<PyErr> = None;
            let end = {
                let mut stop = || !keep_going(None, &mut pending, |py, f| Ok(f.clone_ref(py)));
                b.ctrl().check_full_or_stop(&mut stop)?
            };
            match (pending, end) {
                (Some(e), _) => Err(Failure::Python(e)),
                (None, CheckEnd::Whole) => Ok(()),
                // keep_going answers "stop" only with the error it keeps
                (None, CheckEnd::Stopped) => Err(Failure::Other("check stopped without a cause".into())),
            }
        })
    }

    /// FTL geometry numbers (superblocks, IUs, chunks).
    fn ftl_info(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.ftl_info()))
    }
}
