//! `_core.serve`: an image (or a host stack on it) served over NBD until a signal, with
//! the GIL released between the checks for one.

use pyo3::prelude::*;
use std::path::PathBuf;

use ssdtwin_core::engine::stack::HostStack;
use ssdtwin_nbd::ServerConfig;
use ssdtwin_serve::{Pace, ServeInfo, ServeOptions, Serving, StoppedSummary, TwinConfig};

use crate::bridge::to_py;
use crate::errors::Failure;
use crate::stack::PyHostStack;

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
pub(crate) fn serve(
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
