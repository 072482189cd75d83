//! PyO3 bindings for ssdtwin: thin wrappers over the core's serde structures (converted by
//! pythonize, docs/architecture.md "The binding"), errors mapped to Python exceptions in one
//! place ([`Failure`]), and the GIL never held while the drive's mutex is taken or waited for.
//!
//! Locking rule: a `Drive` method releases the GIL, then takes the drive's mutex
//! ([`Drive::with`]). Code holding the mutex may re-attach to the GIL (progress callbacks,
//! Ctrl-C checks), but no thread ever waits for the mutex while attached, so the two locks
//! are always taken in the same order (mutex, then GIL) and two Python threads sharing a
//! drive cannot deadlock. Results become Python objects after the mutex is released.

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use ssdtwin_core::nvme::{NsId, ProtectionRequest};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ssdtwin_core::cluster::ClusterError;
use ssdtwin_core::engine::fio::converge::{ConvergeOut, ConvergeRule};
use ssdtwin_core::engine::fio::{self, CloneOut, RunError, RunOptions};
use ssdtwin_core::engine::stack::HostStack;
use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::image::{Image, ImageError as CoreImageError, Manifest, OpenMode};
use ssdtwin_core::nand::{NoTiming, TouchCounter};
use ssdtwin_core::nvme::{self, Controller, ControllerView, Pattern};
use ssdtwin_core::progress::Progress;
use ssdtwin_core::spec::{self, DriveSpec, SpecError as CoreSpecError, TimingSpec};
use ssdtwin_core::theory;
use ssdtwin_core::workload::JobSpec;
use ssdtwin_nbd::ServerConfig;
use ssdtwin_serve::{read_live, Pace, ServeError, ServeInfo, ServeOptions, Serving, StoppedSummary, TwinConfig};

mod cluster;
mod hwbench;
mod stack;
mod traces;

use stack::PyHostStack;

pyo3::create_exception!(_core, SsdtwinError, PyException, "Base class of ssdtwin errors.");
pyo3::create_exception!(_core, NvmeError, SsdtwinError, "A command completed with an NVMe error status.");
pyo3::create_exception!(_core, ImageError, SsdtwinError, "A drive image could not be read or written.");
pyo3::create_exception!(_core, SpecError, SsdtwinError, "A drive spec or preset is invalid.");
pyo3::create_exception!(_core, EngineError, SsdtwinError, "A workload cannot run on this drive.");

// ------------------------------------------------------------------------------ errors

/// Everything that can go wrong in a call, as plain Rust values (built without the GIL);
/// `From<Failure> for PyErr` is the single place where they become Python exceptions.
enum Failure {
    Nvme(nvme::Error),
    Image(CoreImageError),
    Spec(CoreSpecError),
    Run(RunError),
    Serve(ServeError),
    Cluster(ClusterError),
    /// A spec problem found by the binding (a `timing_toml` that does not parse).
    SpecText(String),
    /// A bad argument (ValueError).
    Value(String),
    /// Anything else the caller asked for that cannot be done (SsdtwinError).
    Other(String),
    /// A call on a drive after `close()`.
    Closed,
    /// A call on a drive from inside a call on it in the same thread (a progress callback).
    Reentered,
    /// A call on a drive whose mutex a panicking call left poisoned.
    Poisoned,
    /// A value the bridge could not convert (a bug: the core's types are plain data).
    Bridge(String),
    /// Raised by Python: a progress callback, or KeyboardInterrupt on Ctrl-C.
    Python(PyErr),
}

impl From<nvme::Error> for Failure {
    fn from(e: nvme::Error) -> Self {
        Failure::Nvme(e)
    }
}

impl From<CoreImageError> for Failure {
    fn from(e: CoreImageError) -> Self {
        Failure::Image(e)
    }
}

impl From<CoreSpecError> for Failure {
    fn from(e: CoreSpecError) -> Self {
        Failure::Spec(e)
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        Failure::Run(e)
    }
}

impl From<ServeError> for Failure {
    fn from(e: ServeError) -> Self {
        Failure::Serve(e)
    }
}

impl From<ClusterError> for Failure {
    fn from(e: ClusterError) -> Self {
        Failure::Cluster(e)
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Python(e)
    }
}

impl From<pythonize::PythonizeError> for Failure {
    fn from(e: pythonize::PythonizeError) -> Self {
        Failure::Bridge(e.to_string())
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Nvme(e) => nvme_error(e),
            Failure::Image(CoreImageError::Spec(s)) => Failure::Spec(s).into(),
            Failure::Image(CoreImageError::Controller(n)) => nvme_error(n),
            Failure::Image(e) => ImageError::new_err(e.to_string()),
            Failure::Spec(e) => SpecError::new_err(e.to_string()),
            Failure::Run(RunError::Nvme(n)) => nvme_error(n),
            Failure::Run(e) => EngineError::new_err(e.to_string()),
            Failure::Serve(ServeError::Image(i)) => Failure::Image(i).into(),
            Failure::Serve(ServeError::Nvme(n)) => nvme_error(n),
            Failure::Serve(e) => SsdtwinError::new_err(e.to_string()),
            Failure::Cluster(ClusterError::Spec(s)) => Failure::Spec(s).into(),
            Failure::Cluster(e @ ClusterError::Layout(_)) => SpecError::new_err(e.to_string()),
            Failure::Cluster(e @ (ClusterError::Job(_) | ClusterError::Unsupported(_))) => EngineError::new_err(e.to_string()),
            Failure::Cluster(e) => SsdtwinError::new_err(e.to_string()),
            Failure::SpecText(msg) => SpecError::new_err(msg),
            Failure::Value(msg) => PyValueError::new_err(msg),
            Failure::Other(msg) => SsdtwinError::new_err(msg),
            Failure::Closed => SsdtwinError::new_err("the drive is closed"),
            Failure::Reentered => SsdtwinError::new_err(
                "the drive is in use by a call of this thread (a progress callback cannot use the drive it reports on)",
            ),
            Failure::Poisoned => SsdtwinError::new_err("drive lock poisoned (an earlier call panicked)"),
            Failure::Bridge(msg) => SsdtwinError::new_err(format!("converting a result to Python: {msg}")),
            Failure::Python(e) => e,
        }
    }
}

/// NvmeError carrying the core's status: `status` (its name), `code` (the status field)
/// and `detail`. Status names exist only in the core (nvme::Status).
fn nvme_error(e: nvme::Error) -> PyErr {
    match e {
        nvme::Error::Status { status, detail } => Python::attach(|py| {
            let err = NvmeError::new_err(format!("{}({:#x}): {detail}", status.name(), status.field()));
            let v = err.value(py);
            let _ = v.setattr("status", status.name());
            let _ = v.setattr("code", status.field());
            let _ = v.setattr("detail", detail);
            err
        }),
        nvme::Error::Maps(m) => ImageError::new_err(m.to_string()),
        e @ (nvme::Error::Memory(_) | nvme::Error::Inconsistent(_)) => SsdtwinError::new_err(e.to_string()),
    }
}

// ------------------------------------------------------------------------------ the bridge

/// A core structure as Python objects (dicts, lists, ints, floats, strings; fixed-size
/// arrays become tuples).
fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    Ok(pythonize::pythonize(py, value).map_err(Failure::from)?.unbind())
}

/// Python objects as a core structure; `what` names the input in the error, and the error
/// names the key (and the list index) of a value that does not convert ([`located`]).
fn from_py<T: for<'de> Deserialize<'de>>(obj: &Bound<'_, PyAny>, what: &str) -> Result<T, Failure> {
    pythonize::depythonize(obj).map_err(|e| Failure::Value(format!("{what}: {}", located::<T>(obj).unwrap_or_else(|| e.to_string()))))
}

/// Why `probe` does not convert to `T`; None when it does, or when all it lacks is a field
/// (a derived `Deserialize` converts the entries it is given, in order, and reports missing
/// fields only after them).
fn fails<T: for<'de> Deserialize<'de>>(probe: &Bound<'_, PyAny>) -> Option<String> {
    match pythonize::depythonize::<T>(probe) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()).filter(|m| !m.starts_with("missing field")),
    }
}

/// Where in `obj` (a dict, or a list of dicts) the value is that does not convert to `T`,
/// and why: `key=value: why` (`[index].key=value: why` in a list, `key.inner=value: why` in
/// a nested dict), an integer out of its field's range saying the range. pyo3's own message names neither ("out of range integral
/// type conversion attempted"). Found by converting one entry at a time: only on an error.
fn located<'py, T: for<'de> Deserialize<'de>>(obj: &Bound<'py, PyAny>) -> Option<String> {
    use pyo3::types::{PyDict, PyList};
    let py = obj.py();
    let Ok(list) = obj.cast::<PyList>() else {
        return located_key::<T>(obj, &|d| Some(d.into_any()));
    };
    let in_list = |item: Bound<'py, PyAny>| PyList::new(py, [item]).ok().map(Bound::into_any);
    for (i, item) in list.iter().enumerate() {
        if fails::<T>(&in_list(item.clone())?).is_some() {
            let wrap = |d: Bound<'py, PyDict>| in_list(d.into_any());
            return located_key::<T>(&item, &wrap).map(|at| format!("[{i}].{at}"));
        }
    }
    None
}

/// [`located`] in the dict `obj`; `wrap` places a one-entry dict where `obj` was.
fn located_key<'py, T: for<'de> Deserialize<'de>>(
    obj: &Bound<'py, PyAny>,
    wrap: &dyn Fn(Bound<'py, pyo3::types::PyDict>) -> Option<Bound<'py, PyAny>>,
) -> Option<String> {
    use pyo3::types::{PyDict, PyInt};
    let py = obj.py();
    let probe = |k: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>| -> Option<Option<String>> {
        let one = PyDict::new(py);
        one.set_item(k, v).ok()?;
        Some(fails::<T>(&wrap(one)?))
    };
    for (k, v) in obj.cast::<PyDict>().ok()?.iter() {
        let Some(why) = probe(&k, &v)? else { continue };
        if v.is_instance_of::<PyDict>() {
            // A nested structure (`node_cores = {value, source}`): the key inside it.
            let inner = |d: Bound<'py, PyDict>| {
                let one = PyDict::new(py);
                one.set_item(&k, d).ok()?;
                wrap(one)
            };
            if let Some(at) = located_key::<T>(&v, &inner) {
                return Some(format!("{k}.{at}"));
            }
        }
        let mut why = why;
        let converts = |n: u64| n.into_pyobject(py).ok().and_then(|n| probe(&k, &n.into_any())) == Some(None);
        if v.is_instance_of::<PyInt>() && converts(0) {
            // An unsigned field: the widest of u8..u64 whose maximum converts is its type.
            let max = [u8::MAX as u64, u16::MAX as u64, u32::MAX as u64, u64::MAX].into_iter().take_while(|&m| converts(m)).last();
            if let Some(max) = max {
                let bits = 64 - max.leading_zeros();
                why = format!("out of range; must be an integer in 0..={max} (u{bits})");
            }
        }
        // A nested value (a list, a dict) is shown by its start: the message stays one line.
        let shown = v.repr().ok()?.to_string();
        let shown = match shown.char_indices().nth(60) {
            Some((cut, _)) => format!("{}...", &shown[..cut]),
            None => shown,
        };
        return Some(format!("{k}={shown}: {why}"));
    }
    None
}

/// Progress callback of a long run with the GIL released: re-acquire it, stop on a pending
/// signal (Ctrl-C) or when `progress` (called by `call`) raises; the error is kept in
/// `pending` for the caller to raise once the run has returned.
fn keep_going(
    progress: Option<&Py<PyAny>>,
    pending: &mut Option<PyErr>,
    call: impl FnOnce(Python<'_>, &Py<PyAny>) -> PyResult<Py<PyAny>>,
) -> bool {
    Python::attach(|py| {
        let r = py.check_signals().and_then(|()| progress.map_or(Ok(()), |p| call(py, p).map(drop)));
        match r {
            Ok(()) => true,
            Err(e) => {
                *pending = Some(e);
                false
            }
        }
    })
}

/// [`keep_going`] for a long run's progress callback: `progress(done, total, unit, now_ns)`,
/// `done` of `total` (0: unknown) in `unit` ("bytes", "ios", "ns" or "millionths"), at
/// simulated time `now_ns` (the core's [`Progress`]; python/ssdtwin/progress.py shows it).
fn report(progress: Option<&Py<PyAny>>, pending: &mut Option<PyErr>, p: &Progress) -> bool {
    keep_going(progress, pending, |py, f| f.call1(py, (p.done, p.total, p.unit.name(), p.now_ns)))
}

// ------------------------------------------------------------------------------ Drive

enum Backing {
    Image(Box<Image>),
    Memory(Box<Controller>),
}

impl Backing {
    fn ctrl(&mut self) -> &mut Controller {
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
struct Drive {
    inner: Mutex<Option<Backing>>,
    path: Option<PathBuf>,
    /// The [`thread_token`] of the thread holding `inner` (0: none). A call made while its
    /// own thread holds the mutex (a progress callback using the drive it reports on) would
    /// wait for it forever, Ctrl-C included: it is refused instead.
    holder: AtomicU64,
}

/// A number of the calling thread, unique in the process and never 0.
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// Clears [`Drive::holder`] when the call holding the mutex ends (dropped before the guard).
struct Holding<'a>(&'a AtomicU64);

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

impl Drive {
    fn new(backing: Backing, path: Option<PathBuf>) -> Drive {
        Drive { inner: Mutex::new(Some(backing)), path, holder: AtomicU64::new(0) }
    }

    /// `f` on the drive's mutex, taken (and waited for) by the calling thread, unless that
    /// thread already holds it. Only this thread ever stores its own token, so reading it
    /// back means this thread is inside a call on the drive.
    fn locked<R>(&self, f: impl FnOnce(&mut Option<Backing>) -> Result<R, Failure>) -> Result<R, Failure> {
        let me = thread_token();
        if self.holder.load(Ordering::Relaxed) == me {
            return Err(Failure::Reentered);
        }
        let mut g = self.inner.lock().map_err(|_| Failure::Poisoned)?;
        self.holder.store(me, Ordering::Relaxed);
        let _holding = Holding(&self.holder);
        f(&mut g)
    }

    /// Run `f` on the drive with the GIL released: the mutex is taken (and waited for)
    /// only while detached, never while attached (see the module's locking rule).
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Backing) -> Result<R, Failure> + Send) -> PyResult<R> {
        py.detach(|| self.locked(|g| f(g.as_mut().ok_or(Failure::Closed)?))).map_err(PyErr::from)
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
        let backing = py.detach(|| self.locked(|g| Ok(g.take())))?;
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
        let pat = self::pattern(pattern)?;
        let progress = progress.as_ref();
        self.query(py, |c| {
            let mut pending: Option<PyErr> = None;
            let mut cb = |done: u64, total: u64| report(progress, &mut pending, &Progress::bytes(done, total));
            let report = c.precondition(NsId(nsid), pat, block_bytes, amount_bytes, seed, &mut cb)?;
            match pending {
                Some(e) => Err(Failure::Python(e)),
                None => Ok(report),
            }
        })
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
        let pat = self::pattern(pattern)?;
        let progress = progress.as_ref();
        self.query(py, |c| {
            let mut pending: Option<PyErr> = None;
            let mut cb = |done: u64, total: u64| report(progress, &mut pending, &Progress::bytes(done, total));
            let mut sink = TouchCounter::default();
            let report = c.precondition_with(NsId(nsid), pat, block_bytes, amount_bytes, seed, &mut cb, &mut sink)?;
            match pending {
                Some(e) => Err(Failure::Python(e)),
                None => Ok(Touches { report, host_l2p: sink.host_l2p, gc_checks: sink.gc_checks }),
            }
        })
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

    /// Full FTL consistency check (loads the maps; O(capacity)). Raises on a violation.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |b| Ok(b.ctrl().check_full()?))
    }

    /// FTL geometry numbers (superblocks, IUs, chunks).
    fn ftl_info(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.query(py, |c| Ok(c.ftl_info()))
    }
}

// ------------------------------------------------------------------------------ DriveView

/// What the read-only commands show (identify data, namespaces, logs), from an open drive
/// (`Drive.view()`) or from a running server's live.json (`read_live`): one structure, so
/// both paths answer the same way, errors included.
#[pyclass(module = "ssdtwin._core", frozen)]
struct DriveView {
    view: ControllerView,
}

#[pymethods]
impl DriveView {
    fn id_ctrl(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.view.id_ctrl)
    }

    /// Identify Namespace (NvmeError INVALID_NS if `nsid` does not exist).
    fn id_ns(&self, py: Python<'_>, nsid: u32) -> PyResult<Py<PyAny>> {
        let id = self.view.id_ns(NsId(nsid)).map_err(Failure::from)?;
        to_py(py, id)
    }

    /// Identify Namespace as the controller answers it (`nvme id-ns`): CNS 00h, or with
    /// `allocated` CNS 11h (`--force`); an inactive NSID gives the zero-filled structure,
    /// an invalid one NvmeError INVALID_NS.
    #[pyo3(signature = (nsid, allocated=false))]
    fn identify_ns(&self, py: Python<'_>, nsid: u32, allocated: bool) -> PyResult<Py<PyAny>> {
        let id = self.view.identify_ns(NsId(nsid), allocated).map_err(Failure::from)?;
        to_py(py, &id)
    }

    fn list_ns(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.view.namespaces)
    }

    fn smart_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.view.smart_log)
    }

    fn vendor_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.view.vendor_log)
    }

    /// Identify CNS 04h from `nvmsetid` on (NvmeError INVALID_FIELD without sets).
    #[pyo3(signature = (nvmsetid=0))]
    fn id_nvmset(&self, py: Python<'_>, nvmsetid: u16) -> PyResult<Py<PyAny>> {
        let l = self.view.id_nvmset(nvmsetid).map_err(Failure::from)?;
        to_py(py, &l)
    }

    /// Log page 09h of group `endgid` (NvmeError for a group that does not exist).
    fn endurance_log(&self, py: Python<'_>, endgid: u16) -> PyResult<Py<PyAny>> {
        let l = self.view.endurance_log(endgid).map_err(Failure::from)?;
        to_py(py, l)
    }

    /// Log page 01h: the Error Information entries, newest first (nvme-cli's field names).
    fn error_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.view.error_log)
    }

    /// Log page 81h with nvme-cli's JSON field names.
    fn sanitize_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.view.sanitize_log.nvme_cli())
    }

    /// Get Log Page `lid`: its first `length` bytes (NvmeError INVALID_LOG_PAGE for a page
    /// the twin does not keep).
    fn log_page<'py>(&self, py: Python<'py>, lid: u8, length: u32) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let b = self.view.log_page(lid, length).map_err(Failure::from)?;
        Ok(pyo3::types::PyBytes::new(py, &b))
    }

    /// Identify CNS `cns` (0x00 namespace `nsid`, 0x01 controller): the 4 KiB data structure
    /// (NvmeError INVALID_NS / INVALID_FIELD otherwise).
    #[pyo3(signature = (cns, nsid=0))]
    fn identify<'py>(&self, py: Python<'py>, cns: u8, nsid: u32) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let b = self.view.identify(cns, nsid).map_err(Failure::from)?;
        Ok(pyo3::types::PyBytes::new(py, &b))
    }
}

/// The `live.json` a server keeps in the image directory, read through the core's
/// `LiveSnapshot`: (the whole document as a dict, its drive view), or None when there is
/// none in this build's format. Whether the server still runs is the caller's question.
#[pyfunction]
fn read_live_snapshot(py: Python<'_>, path: PathBuf) -> PyResult<Option<(Py<PyAny>, DriveView)>> {
    let Some(snap) = py.detach(|| read_live(Path::new(&path))) else {
        return Ok(None);
    };
    let doc = to_py(py, &snap)?;
    Ok(Some((doc, DriveView { view: snap.view })))
}

/// Serve the image's attached namespaces over NBD (exports ns1, ns2 …) until Ctrl-C or
/// another signal the interpreter turns into an exception (checked every 100 ms with the
/// GIL released in between); then stop, commit and return the session summary.
/// `ready(info)` is called once serving, with the URIs, the metrics address, warnings and
/// what was recovered from a journal; a KeyboardInterrupt or another BaseException that is
/// not an Exception (a signal handler's) raised in it stops the server as in the loop. `pace` is "model" or "off"; `spin_us` is the pacing
/// writer's busy-wait window; the rest are the server's limits and TLS settings
/// (docs/nbd.md, "Limits" and "TLS"; 0 keeps a default). With `stack` (a host stack,
/// docs/host.md) the stack's volume on namespace `stack_nsid` is served instead, from a
/// copy (`stack` is left as it was), and the summary carries the served stack as `stack`.
/// `idle_gc` false: no background GC in idle gaps (`--no-idle-gc`, as `ssdtwin fio`'s).
#[pyfunction]
#[pyo3(signature = (path, tcp=Vec::new(), unix=Vec::new(), metrics=None, pace="model", spin_us=0, ready=None,
    max_connections=0, max_inflight_bytes=0, handshake_timeout_s=None, send_timeout_s=None, tls="off",
    tls_certificates=None, tls_verify_peer=false, unix_group=None, stack=None, stack_nsid=1, idle_gc=true))]
#[allow(clippy::too_many_arguments)]
fn serve(
    py: Python<'_>,
    path: PathBuf,
    tcp: Vec<String>,
    unix: Vec<PathBuf>,
    metrics: Option<String>,
    pace: &str,
    spin_us: u64,
    ready: Option<Py<PyAny>>,
    max_connections: usize,
    max_inflight_bytes: usize,
    handshake_timeout_s: Option<f64>,
    send_timeout_s: Option<f64>,
    tls: &str,
    tls_certificates: Option<PathBuf>,
    tls_verify_peer: bool,
    unix_group: Option<String>,
    stack: Option<PyRef<'_, PyHostStack>>,
    stack_nsid: u32,
    idle_gc: bool,
) -> PyResult<Py<PyAny>> {
    // The server runs its own copy on its threads; `stack` stays the committed state.
    let stack: Option<HostStack> = stack.map(|s| s.read(HostStack::clone)).transpose()?;
    let pace: Pace = pace.parse().map_err(Failure::Value)?;
    const MAX_TIMEOUT_S: f64 = 100.0 * 365.0 * 86_400.0;
    let secs = |s: Option<f64>, default: std::time::Duration| -> Result<std::time::Duration, Failure> {
        match s {
            None => Ok(default),
            // 1e300 s is finite, but no Duration holds it (from_secs_f64 panicked), and a
            // deadline of now + 1e18 s overflows an Instant (a panic at the first client).
            Some(x) if (0.0..=MAX_TIMEOUT_S).contains(&x) => Ok(std::time::Duration::from_secs_f64(x)),
            Some(x) => Err(Failure::Value(format!("timeout {x:?}: must be a number of seconds from 0 to {MAX_TIMEOUT_S} (100 years)"))),
        }
    };
    let d = ServerConfig::default();
    let server = ServerConfig {
        pacing_spin: std::time::Duration::from_micros(spin_us),
        max_connections: if max_connections == 0 { d.max_connections } else { max_connections },
        max_inflight_bytes: if max_inflight_bytes == 0 { d.max_inflight_bytes } else { max_inflight_bytes },
        handshake_timeout: secs(handshake_timeout_s, d.handshake_timeout)?,
        send_timeout: secs(send_timeout_s, d.send_timeout)?,
        tls: tls.parse().map_err(Failure::Value)?,
        tls_certificates,
        tls_verify_peer,
        unix_socket_group: unix_group,
        ..d
    };
    let opts = ServeOptions { tcp, unix, metrics, twin: TwinConfig { pace, idle_gc, ..TwinConfig::default() }, server };
    let serving = py
        .detach(|| match stack {
            Some(st) => Serving::start_stack(&path, st, stack_nsid, opts),
            None => Serving::start(&path, opts),
        })
        .map_err(Failure::from)?;
    let served_stack = serving.stack().cloned();
    let info = ServeInfo {
        dir: path,
        pace: pace.name().to_string(),
        uris: serving.uris().to_vec(),
        exports: serving.backend().export_names(),
        metrics: serving.metrics_addr().map(|a| a.to_string()),
        recovery: serving.backend().recovery().cloned(),
        pid: std::process::id(),
        warnings: serving.warnings(),
    };
    let mut stop_error: Option<PyErr> = None;
    let mut stopped_by = String::from("error");
    let signal_name = |e: &PyErr| e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "signal".into());
    let mut signalled = false;
    if let Some(cb) = ready {
        if let Err(e) = to_py(py, &info).and_then(|i| cb.call1(py, (i,))) {
            if e.is_instance_of::<pyo3::exceptions::PyException>(py) {
                stop_error = Some(e);
            } else {
                // Ctrl-C or SIGTERM (a BaseException: KeyboardInterrupt, the CLI's
                // Terminated) while `ready` ran, e.g. one sent as serving started: the
                // server has served, so it stops as on a signal in the loop below and its
                // summary is returned (it was an error saying nothing had been served).
                stopped_by = signal_name(&e);
                signalled = true;
            }
        }
    }
    if stop_error.is_none() && !signalled {
        loop {
            py.detach(|| std::thread::sleep(std::time::Duration::from_millis(100)));
            if let Err(e) = py.check_signals() {
                stopped_by = signal_name(&e);
                break;
            }
        }
    }
    let summary = py.detach(move || serving.stop()).map_err(Failure::from)?;
    if let Some(e) = stop_error {
        return Err(e);
    }
    let out = to_py(py, &StoppedSummary { summary, stopped_by })?;
    if let Some(st) = served_stack.and_then(|s| s.stopped_stack()) {
        out.bind(py).set_item("stack", PyHostStack::new(st))?;
    }
    Ok(out)
}

#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    Ok(ssdtwin_core::units::parse_size(text).map_err(|e| Failure::Value(e.to_string()))?)
}

/// (name, TOML text) of every built-in preset.
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    spec::PRESETS.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
}

/// Parse and validate a spec; returns it as a dict (errors name every bad field).
#[pyfunction]
#[pyo3(signature = (text, origin="spec"))]
fn parse_spec(py: Python<'_>, text: &str, origin: &str) -> PyResult<Py<PyAny>> {
    let s = DriveSpec::from_toml(text, origin).map_err(Failure::from)?;
    to_py(py, &s)
}

/// A preset as a dict (validated).
#[pyfunction]
fn preset(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    let s = DriveSpec::preset(name).map_err(Failure::from)?;
    to_py(py, &s)
}

/// Greedy/FIFO WAF for uniform random writes (Desnoyers; Lambert W). alpha = T/U.
#[pyfunction]
#[pyo3(signature = (alpha, units_per_block=None))]
fn waf_greedy(alpha: f64, units_per_block: Option<f64>) -> PyResult<f64> {
    if alpha.is_nan() || alpha <= 1.0 {
        return Err(Failure::Value(format!("alpha must exceed 1 (got {alpha})")).into());
    }
    if !alpha.is_finite() {
        return Err(Failure::Value(format!("alpha must be finite (got {alpha})")).into());
    }
    if let Some(np) = units_per_block {
        // Fewer than one unit per block (or none, or NaN) has no meaning; the closed form
        // then takes W0 of NaN (a panic) or returns nonsense.
        if !(np.is_finite() && np >= 1.0) {
            return Err(Failure::Value(format!("units_per_block must be a finite number of at least 1 (got {np})")).into());
        }
    }
    Ok(match units_per_block {
        Some(np) => theory::waf_greedy(alpha, np),
        None => theory::waf_fifo(alpha),
    })
}

/// The WAF measured between two vendor logs of one drive (`nvme::WafMeasurement`): basis
/// "timed", "fast_forward" or "window" (writes of unknown kind), over namespaces of
/// `namespace_bytes` in all.
#[pyfunction]
fn waf_measurement(
    py: Python<'_>,
    before: &Bound<'_, PyAny>,
    after: &Bound<'_, PyAny>,
    basis: &str,
    namespace_bytes: u64,
) -> PyResult<Py<PyAny>> {
    let basis = match basis {
        "timed" => nvme::WafBasis::Timed,
        "fast_forward" => nvme::WafBasis::FastForward,
        "window" => nvme::WafBasis::Window,
        other => return Err(Failure::Value(format!("basis '{other}': use 'timed', 'fast_forward' or 'window'")).into()),
    };
    let before: nvme::VendorLog = from_py(before, "before")?;
    let after: nvme::VendorLog = from_py(after, "after")?;
    to_py(py, &nvme::WafMeasurement::between(&before, &after, basis, namespace_bytes))
}

/// What the Python package needs to know about fio's numbers (histogram buckets, latency
/// tables, queue-depth bins, record layouts; engine/fio_facts.rs).
#[pyfunction]
fn fio_facts(py: Python<'_>) -> PyResult<Py<PyAny>> {
    to_py(py, &ssdtwin_core::engine::fio_facts::fio_facts())
}

/// fio's first draw from a stream seeded with `seed` and the stream's maximum
/// (workload/fiorand.rs `first_draw`): taus88, or taus258 with `use64`.
#[pyfunction]
fn fio_first_draw(seed: u64, use64: bool) -> (u64, u64) {
    ssdtwin_core::workload::fiorand::first_draw(seed, use64)
}

/// The table ("ns", "us" or "ms") and slot a completion latency counts in
/// (engine/fio/report.rs `latency_slot`).
#[pyfunction]
fn fio_latency_slot(clat_ns: u64) -> (&'static str, usize) {
    let (table, slot) = ssdtwin_core::engine::fio::report::latency_slot(clat_ns);
    (table.name(), slot)
}

/// One SplitMix64 step (util.rs), which derives a seed from another.
#[pyfunction]
fn splitmix(x: u64) -> u64 {
    ssdtwin_core::util::splitmix(x)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The [timing] parameters a [corners] entry may set (`ssdtwin calibrate --sets`).
    m.add("CALIBRATABLE", pyo3::types::PyTuple::new(m.py(), spec::CALIBRATABLE)?)?;
    // What a WAF window must span, and how little its write buffer may change, to be the
    // drive's WAF (nvme/waf.rs): the text forms in ssdtwin.waf read them from here.
    m.add("WAF_MIN_GC_CYCLES", nvme::WAF_MIN_GC_CYCLES)?;
    m.add("WAF_MIN_NAMESPACE_PASSES", nvme::WAF_MIN_NAMESPACE_PASSES)?;
    m.add("WAF_MAX_BUFFER_SHARE", nvme::WAF_MAX_BUFFER_SHARE)?;
    m.add_class::<Drive>()?;
    m.add_class::<DriveView>()?;
    m.add_class::<PyHostStack>()?;
    m.add_function(wrap_pyfunction!(read_live_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(stack::stack_new, m)?)?;
    m.add_function(wrap_pyfunction!(stack::stack_toml, m)?)?;
    m.add_function(wrap_pyfunction!(stack::media_presets, m)?)?;
    m.add_function(wrap_pyfunction!(parse_spec, m)?)?;
    m.add_function(wrap_pyfunction!(preset, m)?)?;
    m.add_function(wrap_pyfunction!(waf_greedy, m)?)?;
    m.add_function(wrap_pyfunction!(waf_measurement, m)?)?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_init, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_spec, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_info, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_run, m)?)?;
    m.add_function(wrap_pyfunction!(hwbench::rmw_rate, m)?)?;
    m.add_function(wrap_pyfunction!(fio_facts, m)?)?;
    m.add_function(wrap_pyfunction!(fio_first_draw, m)?)?;
    m.add_function(wrap_pyfunction!(fio_latency_slot, m)?)?;
    m.add_function(wrap_pyfunction!(splitmix, m)?)?;
    m.add_function(wrap_pyfunction!(traces::trace_scan, m)?)?;
    m.add_function(wrap_pyfunction!(traces::trace_load, m)?)?;
    m.add_function(wrap_pyfunction!(traces::blktrace_merge, m)?)?;
    m.add_function(wrap_pyfunction!(traces::replay_trace, m)?)?;
    let py = m.py();
    m.add("SsdtwinError", py.get_type::<SsdtwinError>())?;
    m.add("NvmeError", py.get_type::<NvmeError>())?;
    m.add("ImageError", py.get_type::<ImageError>())?;
    m.add("SpecError", py.get_type::<SpecError>())?;
    m.add("EngineError", py.get_type::<EngineError>())?;
    m.add("TraceError", py.get_type::<traces::TraceError>())?;
    Ok(())
}
