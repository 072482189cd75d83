//! PyO3 bindings for ssdtwin: thin wrappers, errors mapped once, the GIL released on long
//! calls (with Ctrl-C still honoured through the progress callback).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Mutex;

use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::image::{Image, ImageError as CoreImageError, OpenMode};
use ssdtwin_core::nvme::{self, Controller, Pattern};
use ssdtwin_core::spec::{self, DriveSpec, SpecError as CoreSpecError, TimingSpec};
use ssdtwin_core::engine::fio::{self, CloneOut, RunError, RunOptions};
use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::theory;
use ssdtwin_core::workload::JobSpec;
use ssdtwin_nbd::ServerConfig;
use ssdtwin_serve::{Pace, ServeError, ServeOptions, Serving, TwinConfig};

pyo3::create_exception!(_core, SsdtwinError, PyException, "Base class of ssdtwin errors.");
pyo3::create_exception!(_core, NvmeError, SsdtwinError, "A command completed with an NVMe error status.");
pyo3::create_exception!(_core, ImageError, SsdtwinError, "A drive image could not be read or written.");
pyo3::create_exception!(_core, SpecError, SsdtwinError, "A drive spec or preset is invalid.");
pyo3::create_exception!(_core, EngineError, SsdtwinError, "A workload cannot run on this drive.");

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

/// The single place where core errors become Python exceptions.
fn nvme_err(py: Python<'_>, e: nvme::Error) -> PyErr {
    match e {
        nvme::Error::Status { status, detail } => {
            let err = NvmeError::new_err(format!("{}({:#x}): {detail}", status.name(), status.field()));
            let v = err.value(py);
            let _ = v.setattr("status", status.name());
            let _ = v.setattr("code", status.field());
            let _ = v.setattr("detail", detail);
            err
        }
        nvme::Error::Maps(m) => ImageError::new_err(m.to_string()),
        nvme::Error::Memory(_) | nvme::Error::Inconsistent(_) => SsdtwinError::new_err(e.to_string()),
    }
}

fn image_err(e: CoreImageError) -> PyErr {
    match e {
        CoreImageError::Spec(s) => spec_err(s),
        CoreImageError::Controller(n) => Python::attach(|py| nvme_err(py, n)),
        other => ImageError::new_err(other.to_string()),
    }
}

fn twin_err(py: Python<'_>, e: ServeError) -> PyErr {
    match e {
        ServeError::Image(i) => image_err(i),
        ServeError::Nvme(n) => nvme_err(py, n),
        other => SsdtwinError::new_err(other.to_string()),
    }
}

fn spec_err(e: CoreSpecError) -> PyErr {
    SpecError::new_err(e.to_string())
}

/// serde → Python objects (dicts, lists, ints, floats, strings).
fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    let v = serde_json::to_value(value).map_err(|e| SsdtwinError::new_err(e.to_string()))?;
    json_to_py(py, &v)
}

fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any().unbind()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_any().unbind()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

enum Backing {
    Image(Image),
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
    fn drop_data(&mut self, nsid: u32) -> PyResult<()> {
        match self {
            Backing::Image(i) if i.is_writable() => i.drop_data(nsid).map_err(image_err),
            _ => Ok(()),
        }
    }
}

/// An open drive: an image on disk, or a drive held only in memory.
#[pyclass(module = "ssdtwin._core")]
struct Drive {
    inner: Mutex<Option<Backing>>,
    path: Option<PathBuf>,
}

impl Drive {
    fn with<R>(&self, f: impl FnOnce(&mut Backing) -> PyResult<R>) -> PyResult<R> {
        let mut g = self.inner.lock().map_err(|_| SsdtwinError::new_err("drive lock poisoned"))?;
        match g.as_mut() {
            Some(b) => f(b),
            None => Err(SsdtwinError::new_err("the drive is closed")),
        }
    }
}

fn resolve_spec(preset: Option<&str>, spec_toml: Option<&str>, origin: &str) -> PyResult<DriveSpec> {
    match (preset, spec_toml) {
        (_, Some(t)) => DriveSpec::from_toml(t, origin).map_err(spec_err),
        (Some(p), None) => DriveSpec::preset(p).map_err(spec_err),
        (None, None) => Err(SpecError::new_err("give a preset name or a spec TOML")),
    }
}

#[pymethods]
impl Drive {
    /// Create a drive image at `path` from a preset (or a spec TOML) at 1/`scale`.
    #[staticmethod]
    #[pyo3(signature = (path, preset=None, scale=1, seed=1, spec_toml=None))]
    fn create(py: Python<'_>, path: PathBuf, preset: Option<&str>, scale: u32, seed: u64, spec_toml: Option<&str>) -> PyResult<Drive> {
        let spec = resolve_spec(preset, spec_toml, "spec")?.scaled(scale).map_err(spec_err)?;
        let name = preset.map(str::to_string).unwrap_or_else(|| spec.drive.name.clone());
        let p = path.clone();
        let img = py.detach(move || Image::create(&p, spec, &name, seed)).map_err(image_err)?;
        Ok(Drive { inner: Mutex::new(Some(Backing::Image(img))), path: Some(path) })
    }

    /// Open an existing image. `writable=False` reads the committed state without the lock;
    /// `repair=True` (writable) replays a damaged journal up to the damage and drops the
    /// rest, keeping a copy (`ssdtwin check --repair`).
    #[staticmethod]
    #[pyo3(signature = (path, writable=true, repair=false))]
    fn open(py: Python<'_>, path: PathBuf, writable: bool, repair: bool) -> PyResult<Drive> {
        let p = path.clone();
        let mode = match (writable, repair) {
            (_, true) => OpenMode::Repair,
            (true, false) => OpenMode::Writable,
            (false, false) => OpenMode::ReadOnly,
        };
        let img = py.detach(move || Image::open_with(&p, mode)).map_err(image_err)?;
        Ok(Drive { inner: Mutex::new(Some(Backing::Image(img))), path: Some(path) })
    }

    /// A drive that lives only in memory (benchmarks, notebooks).
    #[staticmethod]
    #[pyo3(signature = (preset=None, scale=1, seed=1, spec_toml=None))]
    fn in_memory(py: Python<'_>, preset: Option<&str>, scale: u32, seed: u64, spec_toml: Option<&str>) -> PyResult<Drive> {
        let spec = resolve_spec(preset, spec_toml, "spec")?.scaled(scale).map_err(spec_err)?;
        let c = Controller::new(spec, seed).map_err(|e| nvme_err(py, e))?;
        Ok(Drive { inner: Mutex::new(Some(Backing::Memory(Box::new(c)))), path: None })
    }

    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.path.clone()
    }

    /// Make the current state the committed state of the image (crash-safe).
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(|b| match b {
            Backing::Image(i) => py.detach(|| i.commit()).map_err(image_err),
            Backing::Memory(_) => Err(SsdtwinError::new_err("an in-memory drive has no image to commit to")),
        })
    }

    /// Release the image (and its lock) without committing.
    fn close(&self) -> PyResult<()> {
        let mut g = self.inner.lock().map_err(|_| SsdtwinError::new_err("drive lock poisoned"))?;
        *g = None;
        Ok(())
    }

    fn manifest(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| match b {
            Backing::Image(i) => to_py(py, &i.manifest),
            Backing::Memory(c) => to_py(py, &serde_json::json!({"format": "memory", "preset": c.spec().drive.name, "scale": c.spec().scale, "seed": c.state().seed})),
        })
    }

    /// What opening did with a journal left by a server that was killed (None if none).
    fn recovery(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| match b {
            Backing::Image(i) => match i.recovery() {
                Some(r) => to_py(py, r),
                None => Ok(py.None()),
            },
            Backing::Memory(_) => Ok(py.None()),
        })
    }

    /// Checksums of the FTL maps and its counters (equal fingerprints = the same FTL state).
    fn ftl_fingerprint(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| {
            let ctrl = b.ctrl();
            let f = py.detach(|| ctrl.ftl_fingerprint()).map_err(|e| nvme_err(py, e))?;
            to_py(py, &f)
        })
    }

    fn generation(&self) -> PyResult<u64> {
        self.with(|b| Ok(match b {
            Backing::Image(i) => i.generation(),
            Backing::Memory(_) => 0,
        }))
    }

    fn spec_toml(&self) -> PyResult<String> {
        self.with(|b| Ok(b.ctrl().spec().to_toml()))
    }

    fn id_ctrl(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| to_py(py, &b.ctrl().id_ctrl()))
    }

    fn id_ns(&self, py: Python<'_>, nsid: u32) -> PyResult<Py<PyAny>> {
        self.with(|b| {
            let id = b.ctrl().id_ns(nsid).map_err(|e| nvme_err(py, e))?;
            to_py(py, &id)
        })
    }

    /// Every namespace with its size, use, format and attachment.
    fn list_ns(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| {
            let c = b.ctrl();
            let rows: Vec<serde_json::Value> = c
                .namespaces()
                .map(|ns| {
                    serde_json::json!({
                        "nsid": ns.nsid, "nsze": ns.nsze, "ncap": ns.nsze, "nuse": c.nuse(ns),
                        "lba_bytes": ns.lba_bytes, "flbas": ns.flbas, "attached": ns.attached,
                        "write_protect": ns.write_protect, "nmic": ns.nmic, "bytes": ns.bytes(),
                    })
                })
                .collect();
            to_py(py, &rows)
        })
    }

    /// (A data file a server left under the new NSID is stale: it is removed.)
    #[pyo3(signature = (nsze, ncap, flbas=0, nmic=0))]
    fn create_ns(&self, py: Python<'_>, nsze: u64, ncap: u64, flbas: u8, nmic: u8) -> PyResult<u32> {
        self.with(|b| {
            let nsid = b.ctrl().create_ns(nsze, ncap, flbas, nmic).map_err(|e| nvme_err(py, e))?;
            b.drop_data(nsid)?;
            Ok(nsid)
        })
    }

    /// Also removes the namespace's served data (DIR/data/nsN.img).
    fn delete_ns(&self, py: Python<'_>, nsid: u32) -> PyResult<()> {
        self.with(|b| {
            py.detach(|| b.ctrl().delete_ns(nsid)).map_err(|e| nvme_err(py, e))?;
            b.drop_data(nsid)
        })
    }

    fn attach_ns(&self, py: Python<'_>, nsid: u32, controllers: Vec<u16>) -> PyResult<()> {
        self.with(|b| b.ctrl().attach_ns(nsid, &controllers).map_err(|e| nvme_err(py, e)))
    }

    fn detach_ns(&self, py: Python<'_>, nsid: u32, controllers: Vec<u16>) -> PyResult<()> {
        self.with(|b| b.ctrl().detach_ns(nsid, &controllers).map_err(|e| nvme_err(py, e)))
    }

    /// Every variant purges: the mappings and the served data (DIR/data/nsN.img) go.
    #[pyo3(signature = (nsid, lbaf=0, ses=0))]
    fn format(&self, py: Python<'_>, nsid: u32, lbaf: u8, ses: u8) -> PyResult<()> {
        self.with(|b| {
            py.detach(|| b.ctrl().format(nsid, lbaf, ses)).map_err(|e| nvme_err(py, e))?;
            b.drop_data(nsid)
        })
    }

    #[pyo3(signature = (fid, nsid=0))]
    fn get_feature(&self, py: Python<'_>, fid: u8, nsid: u32) -> PyResult<u32> {
        self.with(|b| b.ctrl().get_feature(fid, nsid).map_err(|e| nvme_err(py, e)))
    }

    #[pyo3(signature = (fid, value, nsid=0))]
    fn set_feature(&self, py: Python<'_>, fid: u8, value: u32, nsid: u32) -> PyResult<()> {
        self.with(|b| b.ctrl().set_feature(fid, nsid, value).map_err(|e| nvme_err(py, e)))
    }

    fn smart_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| to_py(py, &b.ctrl().smart_log()))
    }

    fn vendor_log(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| to_py(py, &b.ctrl().vendor_log()))
    }

    /// Simulated power off/on (clears write protect until power cycle).
    #[pyo3(signature = (unsafe_shutdown=false))]
    fn power_cycle(&self, unsafe_shutdown: bool) -> PyResult<()> {
        self.with(|b| {
            b.ctrl().power_cycle(unsafe_shutdown);
            Ok(())
        })
    }

    /// The next seed of this image's deterministic sequence.
    fn next_seed(&self) -> PyResult<u64> {
        self.with(|b| Ok(b.ctrl().next_seed()))
    }

    fn write(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<()> {
        self.with(|b| b.ctrl().write(nsid, slba, nlb, &mut NoTiming).map_err(|e| nvme_err(py, e)))
    }

    fn read(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<Py<PyAny>> {
        self.with(|b| {
            let s = b.ctrl().read(nsid, slba, nlb, &mut NoTiming).map_err(|e| nvme_err(py, e))?;
            to_py(py, &serde_json::json!({"nand_ius": s.nand_ius, "buffer_ius": s.buffer_ius, "unmapped_ius": s.unmapped_ius}))
        })
    }

    fn deallocate(&self, py: Python<'_>, nsid: u32, slba: u64, nlb: u64) -> PyResult<u64> {
        self.with(|b| b.ctrl().deallocate(nsid, slba, nlb).map_err(|e| nvme_err(py, e)))
    }

    /// Fast-forward writes. `pattern` is "seq" or "rand"; `progress(done, total)` is called
    /// about every 64 MiB with the GIL held and may raise (Ctrl-C raises KeyboardInterrupt).
    #[pyo3(signature = (nsid, pattern, block_bytes, amount_bytes, seed, progress=None))]
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
        let pat = match pattern {
            "seq" | "sequential" => Pattern::Sequential,
            "rand" | "random" => Pattern::Random,
            other => return Err(pyo3::exceptions::PyValueError::new_err(format!("pattern '{other}': use 'seq' or 'rand'"))),
        };
        self.with(|b| {
            let ctrl = b.ctrl();
            let mut pending: Option<PyErr> = None;
            let result = py.detach(|| {
                let mut cb = |done: u64, total: u64| keep_going(progress.as_ref(), &mut pending, |py, p| p.call1(py, (done, total)));
                ctrl.precondition(nsid, pat, block_bytes, amount_bytes, seed, &mut cb)
            });
            let report = result.map_err(|e| nvme_err(py, e))?;
            if let Some(e) = pending {
                return Err(e);
            }
            to_py(py, &report)
        })
    }

    /// Run fio job clones (engine contract v1, docs/fio.md §3, as JSON) in virtual time;
    /// returns the engine output (§4) as JSON. `progress(now_ns)` is called now and then and
    /// may raise (Ctrl-C raises KeyboardInterrupt); the drive keeps what the run did up to then.
    /// `timing_toml` replaces the drive's `[timing]` table for this run (what-if, calibration).
    #[pyo3(signature = (specs_json, default_nsid=1, idle_gc=true, progress=None, timing_toml=None))]
    fn run_fio(
        &self,
        py: Python<'_>,
        specs_json: &str,
        default_nsid: u32,
        idle_gc: bool,
        progress: Option<Py<PyAny>>,
        timing_toml: Option<&str>,
    ) -> PyResult<String> {
        let specs: Vec<JobSpec> = serde_json::from_str(specs_json)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("engine input does not follow contract v1: {e}")))?;
        let timing: Option<TimingSpec> = match timing_toml {
            Some(t) => Some(toml::from_str(t).map_err(|e| SpecError::new_err(format!("timing: {}", e.message().replace('\n', " "))))?),
            None => None,
        };
        self.with(|b| {
            let ctrl = b.ctrl();
            let mut pending: Option<PyErr> = None;
            let out = py.detach(|| -> Result<Vec<CloneOut>, RunError> {
                let mut timing = match timing {
                    Some(t) => DeviceTiming::with_timing(ctrl.spec(), ctrl.ftl_config(), t)?,
                    None => DeviceTiming::new(ctrl.spec(), ctrl.ftl_config())?,
                };
                let opts = RunOptions { default_nsid, idle_gc };
                let mut cb = |now: u64| keep_going(progress.as_ref(), &mut pending, |py, p| p.call1(py, (now,)));
                fio::run(ctrl, &mut timing, specs, &opts, 0, &mut cb)
            });
            if let Some(e) = pending {
                return Err(e);
            }
            let out = out.map_err(|e| match e {
                RunError::Nvme(n) => nvme_err(py, n),
                other => EngineError::new_err(other.to_string()),
            })?;
            serde_json::to_string(&out).map_err(|e| SsdtwinError::new_err(e.to_string()))
        })
    }

    /// Full FTL consistency check (loads the maps; O(capacity)). Raises on a violation.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.with(|b| {
            let ctrl = b.ctrl();
            py.detach(|| ctrl.check_full()).map_err(|e| nvme_err(py, e))
        })
    }

    /// FTL geometry numbers (superblocks, IUs, chunks).
    fn ftl_info(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with(|b| {
            let c = b.ctrl();
            let cfg = c.ftl_config();
            let g = c.spec().geometry();
            to_py(py, &serde_json::json!({
                "iu_bytes": cfg.iu_bytes, "superblocks": cfg.superblocks, "ius_per_superblock": cfg.ius_per_sb,
                "superblock_bytes": g.superblock_bytes, "gc_overhead_superblocks": cfg.overhead_superblocks,
                "logical_ius": cfg.logical_ius, "chunk_ius": cfg.chunk_ius(), "buffer_slots": cfg.buffer_slots,
                "raw_bytes": g.raw_bytes(), "program_unit_bytes": g.program_unit_bytes, "dies": g.dies(),
                "data_pool_bytes": g.data_pool_bytes(cfg.overhead_superblocks),
                "maps_loaded": c.maps_loaded(),
            }))
        })
    }
}

/// Serve the image's attached namespaces over NBD (exports ns1, ns2 …) until Ctrl-C or
/// another signal the interpreter turns into an exception (checked every 100 ms with the
/// GIL released in between); then stop, commit and return the session summary.
/// `ready(info)` is called once serving, with the URIs, the metrics address, warnings and
/// what was recovered from a journal. `pace` is "model" or "off"; `spin_us` is the pacing
/// writer's busy-wait window; the rest are the server's limits and TLS settings
/// (docs/nbd.md, "Limits" and "TLS"; 0 keeps a default).
#[pyfunction]
#[pyo3(signature = (path, tcp=Vec::new(), unix=Vec::new(), metrics=None, pace="model", spin_us=0, ready=None,
    max_connections=0, max_inflight_bytes=0, handshake_timeout_s=None, send_timeout_s=None, tls="off",
    tls_certificates=None, tls_verify_peer=false, unix_group=None))]
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
) -> PyResult<Py<PyAny>> {
    let value_err = pyo3::exceptions::PyValueError::new_err;
    let pace: Pace = pace.parse().map_err(value_err)?;
    let secs = |s: Option<f64>, default: std::time::Duration| -> PyResult<std::time::Duration> {
        match s {
            None => Ok(default),
            Some(x) if x.is_finite() && x >= 0.0 => Ok(std::time::Duration::from_secs_f64(x)),
            Some(x) => Err(value_err(format!("timeout {x}: must be a number of seconds ≥ 0"))),
        }
    };
    let d = ServerConfig::default();
    let server = ServerConfig {
        pacing_spin: std::time::Duration::from_micros(spin_us),
        max_connections: if max_connections == 0 { d.max_connections } else { max_connections },
        max_inflight_bytes: if max_inflight_bytes == 0 { d.max_inflight_bytes } else { max_inflight_bytes },
        handshake_timeout: secs(handshake_timeout_s, d.handshake_timeout)?,
        send_timeout: secs(send_timeout_s, d.send_timeout)?,
        tls: tls.parse().map_err(value_err)?,
        tls_certificates,
        tls_verify_peer,
        unix_socket_group: unix_group,
        ..d
    };
    let opts = ServeOptions { tcp, unix, metrics, twin: TwinConfig { pace, ..TwinConfig::default() }, server };
    let p = path.clone();
    let serving = py.detach(move || Serving::start(&p, opts)).map_err(|e| twin_err(py, e))?;
    let info = serde_json::json!({
        "dir": path, "pace": pace.name(), "uris": serving.uris(), "exports": serving.backend().export_names(),
        "metrics": serving.metrics_addr().map(|a| a.to_string()), "recovery": serving.backend().recovery(),
        "pid": std::process::id(), "warnings": serving.warnings(),
    });
    let mut stop_error: Option<PyErr> = None;
    if let Some(cb) = ready {
        if let Err(e) = to_py(py, &info).and_then(|i| cb.call1(py, (i,))) {
            stop_error = Some(e);
        }
    }
    let mut stopped_by = String::from("error");
    if stop_error.is_none() {
        loop {
            py.detach(|| std::thread::sleep(std::time::Duration::from_millis(100)));
            if let Err(e) = py.check_signals() {
                stopped_by = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "signal".into());
                break;
            }
        }
    }
    let summary = py.detach(move || serving.stop()).map_err(|e| twin_err(py, e))?;
    if let Some(e) = stop_error {
        return Err(e);
    }
    let mut summary = serde_json::to_value(summary).map_err(|e| SsdtwinError::new_err(e.to_string()))?;
    summary["stopped_by"] = serde_json::Value::String(stopped_by);
    to_py(py, &summary)
}

/// Parse a byte size: binary suffixes (k, m, g, t, KiB, MiB …) or decimal (KB, MB, GB, TB).
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    ssdtwin_core::units::parse_size(text).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
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
    let s = DriveSpec::from_toml(text, origin).map_err(spec_err)?;
    to_py(py, &s)
}

/// A preset as a dict (validated).
#[pyfunction]
fn preset(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    let s = DriveSpec::preset(name).map_err(spec_err)?;
    to_py(py, &s)
}

/// Greedy/FIFO WAF for uniform random writes (Desnoyers; Lambert W). alpha = T/U.
#[pyfunction]
#[pyo3(signature = (alpha, units_per_block=None))]
fn waf_greedy(alpha: f64, units_per_block: Option<f64>) -> PyResult<f64> {
    if !(alpha > 1.0) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("alpha must exceed 1 (got {alpha})")));
    }
    Ok(match units_per_block {
        Some(np) => theory::waf_greedy(alpha, np),
        None => theory::waf_fifo(alpha),
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Drive>()?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(parse_spec, m)?)?;
    m.add_function(wrap_pyfunction!(preset, m)?)?;
    m.add_function(wrap_pyfunction!(waf_greedy, m)?)?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    let py = m.py();
    m.add("SsdtwinError", py.get_type::<SsdtwinError>())?;
    m.add("NvmeError", py.get_type::<NvmeError>())?;
    m.add("ImageError", py.get_type::<ImageError>())?;
    m.add("SpecError", py.get_type::<SpecError>())?;
    m.add("EngineError", py.get_type::<EngineError>())?;
    Ok(())
}
