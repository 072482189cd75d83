//! Errors across the binding: the exceptions `_core` raises, and [`Failure`], everything
//! that can go wrong in a call as plain Rust values, mapped to them in one place
//! (`From<Failure> for PyErr`).

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use ssdtwin_core::cluster::ClusterError;
use ssdtwin_core::engine::fio::RunError;
use ssdtwin_core::image::ImageError as CoreImageError;
use ssdtwin_core::nvme;
use ssdtwin_core::spec::SpecError as CoreSpecError;
use ssdtwin_serve::ServeError;

pyo3::create_exception!(_core, SsdtwinError, PyException, "Base class of ssdtwin errors.");
pyo3::create_exception!(_core, NvmeError, SsdtwinError, "A command completed with an NVMe error status.");
pyo3::create_exception!(_core, ImageError, SsdtwinError, "A drive image could not be read or written.");
pyo3::create_exception!(_core, SpecError, SsdtwinError, "A drive spec or preset is invalid.");
pyo3::create_exception!(_core, EngineError, SsdtwinError, "A workload cannot run on this drive.");

/// Everything that can go wrong in a call, as plain Rust values (built without the GIL);
/// `From<Failure> for PyErr` is the single place where they become Python exceptions.
pub(crate) enum Failure {
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

/// `From<E> for Failure` of each error that is one variant as it is.
macro_rules! failure_from {
    ($($error:ty => $variant:ident),* $(,)?) => {
        $(impl From<$error> for Failure {
            fn from(e: $error) -> Self {
                Failure::$variant(e)
            }
        })*
    };
}

failure_from!(
    nvme::Error => Nvme,
    CoreImageError => Image,
    CoreSpecError => Spec,
    RunError => Run,
    ServeError => Serve,
    ClusterError => Cluster,
    PyErr => Python,
);

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
