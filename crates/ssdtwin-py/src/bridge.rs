//! The bridge: core structures to Python objects and back (pythonize), the inputs' errors
//! located, and the progress callbacks of long runs made with the GIL released.

use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use ssdtwin_core::progress::Progress;

use crate::errors::Failure;

/// A core structure as Python objects (dicts, lists, ints, floats, strings; fixed-size
/// arrays become tuples).
pub(crate) fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    Ok(pythonize::pythonize(py, value).map_err(Failure::from)?.unbind())
}

/// Python objects as a core structure; `what` names the input in the error, and the error
/// names the key (and the list index) of a value that does not convert ([`located`]).
pub(crate) fn from_py<T: for<'de> Deserialize<'de>>(obj: &Bound<'_, PyAny>, what: &str) -> Result<T, Failure> {
    pythonize::depythonize(obj).map_err(|e| Failure::Value(format!("{what}: {}", located::<T>(obj).unwrap_or_else(|| e.to_string()))))
}

/// Why `probe` does not convert to `T`; None when it does, or when all it lacks is a field
/// (a derived `Deserialize` converts the entries it is given, in order, and reports missing
/// fields only after them).
fn fails<T: for<'de> Deserialize<'de>>(probe: &Bound<'_, PyAny>) -> Option<String> {
    match pythonize::depythonize::<T>(probe) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()).filter(|m| !m.starts_with("missing field")),
    }
}

/// Where in `obj` (a dict, or a list of dicts) the value is that does not convert to `T`,
/// and why: `key=value: why` (`[index].key=value: why` in a list, `key.inner=value: why` in
/// a nested dict), an integer out of its field's range saying the range. pyo3's own message names neither ("out of range integral
/// type conversion attempted"). Found by converting one entry at a time: only on an error.
fn located<'py, T: for<'de> Deserialize<'de>>(obj: &Bound<'py, PyAny>) -> Option<String> {
    use pyo3::types::{PyDict, PyList};
    let py = obj.py();
    let Ok(list) = obj.cast::<PyList>() else {
        return located_key::<T>(obj, &|d| Some(d.into_any()));
    };
    let in_list = |item: Bound<'py, PyAny>| PyList::new(py, [item]).ok().map(Bound::into_any);
    for (i, item) in list.iter().enumerate() {
        if fails::<T>(&in_list(item.clone())?).is_some() {
            let wrap = |d: Bound<'py, PyDict>| in_list(d.into_any());
            return located_key::<T>(&item, &wrap).map(|at| format!("[{i}].{at}"));
        }
    }
    None
}

/// [`located`] in the dict `obj`; `wrap` places a one-entry dict where `obj` was.
fn located_key<'py, T: for<'de> Deserialize<'de>>(
    obj: &Bound<'py, PyAny>,
    wrap: &dyn Fn(Bound<'py, pyo3::types::PyDict>) -> Option<Bound<'py, PyAny>>,
) -> Option<String> {
    use pyo3::types::{PyDict, PyInt};
    let py = obj.py();
    let probe = |k: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>| -> Option<Option<String>> {
        let one = PyDict::new(py);
        one.set_item(k, v).ok()?;
        Some(fails::<T>(&wrap(one)?))
    };
    for (k, v) in obj.cast::<PyDict>().ok()?.iter() {
        let Some(why) = probe(&k, &v)? else { continue };
        if v.is_instance_of::<PyDict>() {
            // A nested structure (`node_cores = {value, source}`): the key inside it.
            let inner = |d: Bound<'py, PyDict>| {
                let one = PyDict::new(py);
                one.set_item(&k, d).ok()?;
                wrap(one)
            };
            if let Some(at) = located_key::<T>(&v, &inner) {
                return Some(format!("{k}.{at}"));
            }
        }
        let mut why = why;
        let converts = |n: u64| n.into_pyobject(py).ok().and_then(|n| probe(&k, &n.into_any())) == Some(None);
        if v.is_instance_of::<PyInt>() && converts(0) {
            // An unsigned field: the widest of u8..u64 whose maximum converts is its type.
            let max = [u8::MAX as u64, u16::MAX as u64, u32::MAX as u64, u64::MAX].into_iter().take_while(|&m| converts(m)).last();
            if let Some(max) = max {
                let bits = 64 - max.leading_zeros();
                why = format!("out of range; must be an integer in 0..={max} (u{bits})");
            }
        }
        // A nested value (a list, a dict) is shown by its start: the message stays one line.
        let shown = v.repr().ok()?.to_string();
        let shown = match shown.char_indices().nth(60) {
            Some((cut, _)) => format!("{}...", &shown[..cut]),
            None => shown,
        };
        return Some(format!("{k}={shown}: {why}"));
    }
    None
}

/// Progress callback of a long run with the GIL released: re-acquire it, stop on a pending
/// signal (Ctrl-C) or when `progress` (called by `call`) raises; the error is kept in
/// `pending` for the caller to raise once the run has returned.
pub(crate) fn keep_going(
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

/// [`keep_going`] for a long run's progress callback: `progress(done, total, unit, now_ns)`,
/// `done` of `total` (0: unknown) in `unit` ("bytes", "ios", "ns" or "millionths"), at
/// simulated time `now_ns` (the core's [`Progress`]; python/ssdtwin/progress.py shows it).
pub(crate) fn report(progress: Option<&Py<PyAny>>, pending: &mut Option<PyErr>, p: &Progress) -> bool {
    keep_going(progress, pending, |py, f| f.call1(py, (p.done, p.total, p.unit.name(), p.now_ns)))
}
