//! `_core.DriveView`: what the read-only commands show, from an open drive or from a
//! running server's live.json, and the live.json reader.

use pyo3::prelude::*;
use std::path::{Path, PathBuf};

use ssdtwin_core::nvme::{ControllerView, NsId};
use ssdtwin_serve::read_live;

use crate::bridge::to_py;
use crate::errors::Failure;

/// What the read-only commands show (identify data, namespaces, logs), from an open drive
/// (`Drive.view()`) or from a running server's live.json (`read_live`): one structure, so
/// both paths answer the same way, errors included.
#[pyclass(module = "ssdtwin._core", frozen)]
pub(crate) struct DriveView {
    pub(crate) view: ControllerView,
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
pub(crate) fn read_live_snapshot(py: Python<'_>, path: PathBuf) -> PyResult<Option<(Py<PyAny>, DriveView)>> {
    let Some(snap) = py.detach(|| read_live(Path::new(&path))) else {
        return Ok(None);
    };
    let doc = to_py(py, &snap)?;
    Ok(Some((doc, DriveView { view: snap.view })))
}
