//! fio's numbers for the Python package: its facts (engine/fio_facts.rs), the first draw
//! of a random stream, the latency slot a completion counts in, and the seed step.

use pyo3::prelude::*;

use crate::bridge::to_py;

/// What the Python package needs to know about fio's numbers (histogram buckets, latency
/// tables, queue-depth bins, record layouts; engine/fio_facts.rs).
#[pyfunction]
pub(crate) fn fio_facts(py: Python<'_>) -> PyResult<Py<PyAny>> {
    to_py(py, &ssdtwin_core::engine::fio_facts::fio_facts())
}

/// fio's first draw from a stream seeded with `seed` and the stream's maximum
/// (workload/fiorand.rs `first_draw`): taus88, or taus258 with `use64`.
#[pyfunction]
pub(crate) fn fio_first_draw(seed: u64, use64: bool) -> (u64, u64) {
    ssdtwin_core::workload::fiorand::first_draw(seed, use64)
}

/// The table ("ns", "us" or "ms") and slot a completion latency counts in
/// (engine/fio/report.rs `latency_slot`).
#[pyfunction]
pub(crate) fn fio_latency_slot(clat_ns: u64) -> (&'static str, usize) {
    let (table, slot) = ssdtwin_core::engine::fio::report::latency_slot(clat_ns);
    (table.name(), slot)
}

/// One SplitMix64 step (util.rs), which derives a seed from another.
#[pyfunction]
pub(crate) fn splitmix(x: u64) -> u64 {
    ssdtwin_core::util::splitmix(x)
}
