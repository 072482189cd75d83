//! Write amplification: the closed forms of theory.rs, and the WAF measured between two
//! vendor logs.

use pyo3::prelude::*;
use ssdtwin_core::{nvme, theory};

use crate::bridge::{from_py, to_py};
use crate::errors::Failure;

/// Greedy/FIFO WAF for uniform random writes (Desnoyers; Lambert W). alpha = T/U.
#[pyfunction]
#[pyo3(signature = (alpha, units_per_block=None))]
pub(crate) fn waf_greedy(alpha: f64, units_per_block: Option<f64>) -> PyResult<f64> {
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
pub(crate) fn waf_measurement(
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
