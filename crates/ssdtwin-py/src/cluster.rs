//! `ssdtwin cluster` (docs/models.md §11): the binding builds, describes and runs a
//! replicated-storage lab from its `cluster.toml`; the core does the work, the GIL released.

use pyo3::prelude::*;
use ssdtwin_core::cluster::{self, ClusterSpec, InitOptions};
use ssdtwin_core::progress::Progress;
use ssdtwin_core::workload::JobSpec;

use crate::bridge::{from_py, report, to_py};
use crate::errors::Failure;

/// The `cluster.toml` text of a new lab: `options` are `cluster init`'s (stack, nodes,
/// drives_per_node, drive, scale, clients, replicas, network, volume_bytes, seed,
/// ceph_version; missing keys take the brief's lab), every cost at its default.
#[pyfunction]
pub(crate) fn cluster_init(py: Python<'_>, options: &Bound<'_, PyAny>) -> PyResult<String> {
    let o: InitOptions = from_py(options, "cluster options")?;
    let spec = py.detach(|| ClusterSpec::from_options(&o)).map_err(Failure::from)?;
    Ok(spec.to_toml())
}

/// Parse and validate a `cluster.toml` (every problem at once); returns it as a dict.
#[pyfunction]
#[pyo3(signature = (text, origin="cluster.toml"))]
pub(crate) fn cluster_spec(py: Python<'_>, text: &str, origin: &str) -> PyResult<Py<PyAny>> {
    let spec = py.detach(|| ClusterSpec::from_toml(text, origin)).map_err(Failure::from)?;
    to_py(py, &spec)
}

/// The range of each bounded integer field of `cluster.toml` (`"cluster.nodes"`: (1, 64)), as
/// the core validates it: the CLI's flags name these ranges rather than keep copies.
#[pyfunction]
pub(crate) fn cluster_field_ranges() -> std::collections::BTreeMap<&'static str, (u64, u64)> {
    cluster::FIELD_RANGES.iter().map(|&(path, lo, hi)| (path, (lo, hi))).collect()
}

/// Where a cluster's data lives (drives, volume size as simulated, PGs), without running.
#[pyfunction]
#[pyo3(signature = (text, origin="cluster.toml"))]
pub(crate) fn cluster_info(py: Python<'_>, text: &str, origin: &str) -> PyResult<Py<PyAny>> {
    let info = py.detach(|| -> Result<_, Failure> { Ok(cluster::layout_info(&ClusterSpec::from_toml(text, origin)?)?) })?;
    to_py(py, &info)
}

/// Build the cluster of `text` afresh and run `specs` (engine contract v1, one section per
/// client volume) on it, the GIL released; `progress(done, total, unit, now_ns)` is called
/// now and then ([`report`]) and may raise (Ctrl-C raises KeyboardInterrupt). Returns the
/// ClusterRun as a dict.
#[pyfunction]
#[pyo3(signature = (text, specs, progress=None, origin="cluster.toml"))]
pub(crate) fn cluster_run(
    py: Python<'_>,
    text: &str,
    specs: &Bound<'_, PyAny>,
    progress: Option<Py<PyAny>>,
    origin: &str,
) -> PyResult<Py<PyAny>> {
    let specs: Vec<JobSpec> = from_py(specs, "engine input does not follow contract v1")?;
    let progress = progress.as_ref();
    let out = py.detach(|| -> Result<_, Failure> {
        let spec = ClusterSpec::from_toml(text, origin)?;
        let mut pending: Option<PyErr> = None;
        let mut cb = |p: &Progress| report(progress, &mut pending, p);
        let out = cluster::run(&spec, specs, &mut cb);
        if let Some(e) = pending {
            return Err(Failure::Python(e));
        }
        Ok(out?)
    })?;
    to_py(py, &out)
}
