//! Drive specs across the binding: the built-in presets, a spec TOML parsed and
//! validated, and sizes as the CLI writes them.

use pyo3::prelude::*;
use ssdtwin_core::spec::{self, DriveSpec};

use crate::bridge::to_py;
use crate::errors::Failure;

#[pyfunction]
pub(crate) fn parse_size(text: &str) -> PyResult<u64> {
    Ok(ssdtwin_core::units::parse_size(text).map_err(|e| Failure::Value(e.to_string()))?)
}

/// (name, TOML text) of every built-in preset.
#[pyfunction]
pub(crate) fn presets() -> Vec<(String, String)> {
    spec::PRESETS.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
}

/// Parse and validate a spec; returns it as a dict (errors name every bad field).
#[pyfunction]
#[pyo3(signature = (text, origin="spec"))]
pub(crate) fn parse_spec(py: Python<'_>, text: &str, origin: &str) -> PyResult<Py<PyAny>> {
    let s = DriveSpec::from_toml(text, origin).map_err(Failure::from)?;
    to_py(py, &s)
}

/// A preset as a dict (validated).
#[pyfunction]
pub(crate) fn preset(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    let s = DriveSpec::preset(name).map_err(Failure::from)?;
    to_py(py, &s)
}
