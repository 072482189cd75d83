//! Trace files (docs/traces.md, docs/fio.md §2.10): the binding opens them, the core reads
//! them. A scan checks and sums a trace up before anything runs; a load packs a whole
//! trace for a fio job's `read_iolog`; a replay streams one onto a drive in bounded memory;
//! a merge writes fio's `merge_blktrace_file`.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ssdtwin_core::engine::fio::{self, RunOptions};
use ssdtwin_core::engine::iolog::pack;
use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::workload::trace::source::{collect, scan, Format, Lines, Plan, Stream, Summary};
use ssdtwin_core::workload::trace::{blktrace, At, Packed, TraceError as CoreTraceError};
use ssdtwin_core::workload::JobSpec;

use crate::bridge::{from_py, keep_going, to_py};
use crate::drive::Drive;
use crate::errors::{Failure, SsdtwinError};
use ssdtwin_core::progress::Progress;

pyo3::create_exception!(
    _core,
    TraceError,
    SsdtwinError,
    "A trace file that cannot be replayed: `line` (or None), `place` (a binary record, or ''), `field`, `value` and `reason`."
);

/// Read buffer of a trace file: large reads, a few syscalls per MiB.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// A trace's problem as a [`TraceError`] exception, its message led by `shown`.
fn trace_error(e: &CoreTraceError, shown: &str) -> PyErr {
    let (line, place) = match e.at {
        At::Line(n) => (Some(n), String::new()),
        At::Record { .. } => (None, e.at.to_string().trim_start_matches(": ").to_string()),
        At::File => (None, String::new()),
    };
    Python::attach(|py| {
        let err = TraceError::new_err(e.render(shown));
        let v = err.value(py);
        let _ = v.setattr("line", line);
        let _ = v.setattr("place", place);
        let _ = v.setattr("field", e.field);
        let _ = v.setattr("value", e.value.clone());
        let _ = v.setattr("reason", e.reason.clone());
        err
    })
}

/// Errors of the trace calls before they become Python's.
enum Problem {
    Trace(CoreTraceError),
    Other(Failure),
}

impl From<CoreTraceError> for Problem {
    fn from(e: CoreTraceError) -> Self {
        Problem::Trace(e)
    }
}

impl From<Failure> for Problem {
    fn from(e: Failure) -> Self {
        Problem::Other(e)
    }
}

impl Problem {
    fn into_py(self, shown: &str) -> PyErr {
        match self {
            Problem::Trace(e) => trace_error(&e, shown),
            Problem::Other(f) => f.into(),
        }
    }
}

/// The trace plan `obj` (ValueError for one that does not parse, or that `Plan::check`
/// refuses: a zero target size or LBA divided by zero placing the first I/O).
fn plan_of(obj: &Bound<'_, PyAny>) -> Result<Plan, Failure> {
    let plan: Plan = from_py(obj, "trace plan")?;
    plan.check().map_err(|why| Failure::Value(format!("trace plan: {why}")))?;
    Ok(plan)
}

/// `path` opened for reading and the format it is read in (named, or sniffed from its start).
fn open(path: &Path, plan: &Plan) -> Result<(Format, BufReader<File>), Problem> {
    let file = File::open(path).map_err(|e| CoreTraceError::new(At::File, e.to_string()))?;
    let mut r = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let head = r.fill_buf().map_err(CoreTraceError::from)?;
    let format = plan.format_of(head).map_err(|why| CoreTraceError::new(At::File, why))?;
    Ok((format, r))
}

fn lines_of(path: &Path, plan: &Plan) -> Result<(Format, Lines), Problem> {
    let (format, r) = open(path, plan)?;
    Ok((format, plan.lines(format, r)?))
}

/// Check every line of the trace at `path` under `plan` and sum it up (`Summary`, with the
/// format it was read in); `progress(ios)` is called every 65,536 lines and may raise
/// (Ctrl-C raises KeyboardInterrupt). `shown` names the trace in messages.
#[pyfunction]
#[pyo3(signature = (path, shown, plan, progress=None))]
pub fn trace_scan(py: Python<'_>, path: PathBuf, shown: &str, plan: &Bound<'_, PyAny>, progress: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
    let plan = plan_of(plan)?;
    let progress = progress.as_ref();
    let summary = py
        .detach(|| -> Result<Summary, Problem> {
            let (format, lines) = lines_of(&path, &plan)?;
            let mut pending: Option<PyErr> = None;
            let mut cb = |ios: u64| keep_going(progress, &mut pending, |py, p| p.call1(py, (ios,)));
            let summary = scan(lines, format, &mut cb)?;
            if let Some(e) = pending {
                return Err(Failure::Python(e).into());
            }
            Ok(summary.expect("stopped only with a pending error"))
        })
        .map_err(|p| p.into_py(shown))?;
    to_py(py, &summary)
}

/// The whole trace at `path` packed as a job's `replay` records (docs/fio.md §3), with its
/// summary: (records, summary). At most `max_ios` I/Os (the engine holds 40 bytes each):
/// one more is an error naming its line.
#[pyfunction]
pub fn trace_load(py: Python<'_>, path: PathBuf, shown: &str, plan: &Bound<'_, PyAny>, max_ios: u64) -> PyResult<(Py<PyBytes>, Py<PyAny>)> {
    let plan = plan_of(plan)?;
    let (packed, summary) = py
        .detach(|| -> Result<(Packed, Summary), Problem> {
            let (format, lines) = lines_of(&path, &plan)?;
            let mut packed = Packed::default();
            let summary = collect(lines, format, max_ios, |io| pack(&mut packed, io))?;
            Ok((packed, summary))
        })
        .map_err(|p| p.into_py(shown))?;
    Ok((PyBytes::new(py, &packed.0).unbind(), to_py(py, &summary)?))
}

/// fio's `merge_blktrace_file`: the blktrace files `inputs` ((path, shown) pairs) merged into
/// `out` (blktrace::merge: times scaled by `scalars` percent, `iters` passes each); returns
/// the records written.
#[pyfunction]
pub fn blktrace_merge(py: Python<'_>, inputs: Vec<(PathBuf, String)>, scalars: Vec<u64>, iters: Vec<u64>, out: PathBuf) -> PyResult<u64> {
    let shown: Vec<String> = inputs.iter().map(|(_, s)| s.clone()).collect();
    py.detach(|| -> Result<u64, (usize, CoreTraceError)> {
        let mut files = Vec::with_capacity(inputs.len());
        for (i, (p, _)) in inputs.iter().enumerate() {
            let f = File::open(p).map_err(|e| (i, CoreTraceError::new(At::File, e.to_string())))?;
            files.push(BufReader::with_capacity(READ_BUFFER_BYTES, f));
        }
        let outf = File::create(&out).map_err(|e| (usize::MAX, CoreTraceError::new(At::File, e.to_string())))?;
        let mut w = BufWriter::with_capacity(128 << 10, outf);
        let n = blktrace::merge(files, &scalars, &iters, &mut w)?;
        w.flush().map_err(|e| (usize::MAX, CoreTraceError::new(At::File, e.to_string())))?;
        Ok(n)
    })
    .map_err(|(i, e)| {
        let name = shown.get(i).cloned().unwrap_or_else(|| out.to_string_lossy().into_owned());
        trace_error(&e, &name)
    })
}

/// Replay the trace at `path` on the drive under `plan`, streamed (docs/traces.md): `spec`
/// is the clone that replays it (its queue depth, its namespace), its generator unused.
/// `progress(ios_done, now_ns)` is called now and then and may raise (Ctrl-C raises
/// KeyboardInterrupt); the drive keeps what the run did up to then. Returns the clone's
/// result (docs/fio.md §4).
#[pyfunction]
#[pyo3(signature = (drive, path, shown, plan, spec, default_nsid=1, idle_gc=true, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn replay_trace(
    py: Python<'_>,
    drive: &Drive,
    path: PathBuf,
    shown: &str,
    plan: &Bound<'_, PyAny>,
    spec: &Bound<'_, PyAny>,
    default_nsid: u32,
    idle_gc: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let plan = plan_of(plan)?;
    let spec: JobSpec = from_py(spec, "engine input does not follow contract v1")?;
    let progress = progress.as_ref();
    // The file is opened (and its format sniffed) before the drive is taken.
    let (_, lines) = py.detach(|| lines_of(&path, &plan)).map_err(|p| p.into_py(shown))?;
    let out = drive.with(py, |b| {
        let ctrl = b.ctrl();
        let stream = Stream::new(lines, shown);
        let done = stream.progress.clone();
        let mut timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).map_err(fio::RunError::from)?;
        let opts = RunOptions { default_nsid, idle_gc };
        let mut pending: Option<PyErr> = None;
        let mut cb = |at: &Progress| {
            let ios = done.load(std::sync::atomic::Ordering::Relaxed);
            keep_going(progress, &mut pending, |py, p| p.call1(py, (ios, at.now_ns)))
        };
        let out = fio::run_replay(ctrl, &mut timing, spec, Box::new(stream), &opts, &mut cb);
        if let Some(e) = pending {
            return Err(Failure::Python(e));
        }
        Ok(out?)
    })?;
    to_py(py, &out)
}
