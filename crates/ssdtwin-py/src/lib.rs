//! PyO3 bindings for ssdtwin: thin wrappers over the core's serde structures (converted by
//! pythonize in bridge.rs, docs/architecture.md "The binding"), errors mapped to Python
//! exceptions in one place ([`errors::Failure`]), and the GIL never held while the drive's
//! mutex is taken or waited for (lock.rs, "Locking rule").

use pyo3::prelude::*;
use ssdtwin_core::{nvme, spec};

mod bridge;
mod cluster;
mod drive;
mod errors;
mod fio;
mod hwbench;
mod lock;
mod serve;
mod specs;
mod stack;
mod traces;
mod view;
mod waf;

use drive::Drive;
use errors::{EngineError, ImageError, NvmeError, SpecError, SsdtwinError};
use stack::PyHostStack;
use view::DriveView;

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
    m.add_function(wrap_pyfunction!(view::read_live_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(specs::presets, m)?)?;
    m.add_function(wrap_pyfunction!(specs::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(stack::stack_new, m)?)?;
    m.add_function(wrap_pyfunction!(stack::stack_toml, m)?)?;
    m.add_function(wrap_pyfunction!(stack::media_presets, m)?)?;
    m.add_function(wrap_pyfunction!(specs::parse_spec, m)?)?;
    m.add_function(wrap_pyfunction!(specs::preset, m)?)?;
    m.add_function(wrap_pyfunction!(waf::waf_greedy, m)?)?;
    m.add_function(wrap_pyfunction!(waf::waf_measurement, m)?)?;
    m.add_function(wrap_pyfunction!(serve::serve, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_init, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_spec, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_info, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_field_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_run, m)?)?;
    m.add_function(wrap_pyfunction!(hwbench::rmw_rate, m)?)?;
    m.add_function(wrap_pyfunction!(fio::fio_facts, m)?)?;
    m.add_function(wrap_pyfunction!(fio::fio_first_draw, m)?)?;
    m.add_function(wrap_pyfunction!(fio::fio_latency_slot, m)?)?;
    m.add_function(wrap_pyfunction!(fio::splitmix, m)?)?;
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
