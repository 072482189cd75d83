//! Host stacks across the binding (docs/host.md): a stack held in Rust between runs
//! ([`PyHostStack`]), its state in JSON's data model for state.json, a new stack, a stack
//! image's stack.toml, the fast-media presets.

use std::sync::Mutex;

use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use ssdtwin_core::engine::stack::HostStack;
use ssdtwin_core::host::{self, tier::Tier, tier::TierConfig};

use crate::bridge::{from_py, to_py};
use crate::errors::Failure;

/// A host stack (engine/stack.rs `HostStack`: the fast media and the tier on it), kept in
/// Rust between runs: the log tier's maps hold an entry per 4 KiB of the drive, too much to
/// turn into Python objects on every run. `Drive.run_fio_stack` advances it in place, as it
/// advances the drive; Python reads what it needs through the methods and turns it into
/// JSON's data model only for state.json (`to_state`, `from_state`).
///
/// The slot is empty while a run has the stack, and for good after a run that failed (it
/// stopped part way, destages in flight, or left a state failing the tier's check). The
/// mutex is only held for a take, a put back or a read, never while waiting for the GIL,
/// so it cannot deadlock with it.
#[pyclass(module = "ssdtwin._core", name = "HostStack", frozen)]
pub struct PyHostStack {
    slot: Mutex<Option<HostStack>>,
}

impl PyHostStack {
    pub(crate) fn new(stack: HostStack) -> PyHostStack {
        PyHostStack { slot: Mutex::new(Some(stack)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HostStack>> {
        // Nothing panics while holding it (a take, a put, a read): a poisoned lock's value
        // is whole.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unavailable() -> Failure {
        Failure::Other("host stack: in use by a run, or left unusable by a run that failed (read it again from its state.json)".into())
    }

    /// `f` on the stack, where it is.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&HostStack) -> R) -> Result<R, Failure> {
        self.lock().as_ref().map(f).ok_or_else(Self::unavailable)
    }

    /// The stack, out of its slot for a run ([`PyHostStack::put`] gives it back).
    pub(crate) fn take(&self) -> Result<HostStack, Failure> {
        self.lock().take().ok_or_else(Self::unavailable)
    }

    pub(crate) fn put(&self, stack: HostStack) {
        *self.lock() = Some(stack);
    }

    /// A part of the stack as Python objects, through serde_json's map (keys in sorted
    /// order): the same dict `to_state` holds there, so what Python prints from it keeps
    /// the order state.json has always had.
    fn part_to_py<T: Serialize>(&self, py: Python<'_>, part: impl FnOnce(&HostStack) -> &T) -> PyResult<Py<PyAny>> {
        let value = self.read(|s| serde_json::to_value(part(s)))?.map_err(|e| Failure::Bridge(e.to_string()))?;
        to_py(py, &value)
    }
}

/// What the stack state says about its sizes and traffic, from the tier's own accounting
/// (host/tier.rs), so Python never reads the tier's private state.
#[derive(Serialize)]
struct StackSummary {
    /// The address space the stack offers the host.
    user_bytes: u64,
    /// Bytes in the tier not yet destaged.
    resident_bytes: u64,
    /// Bytes the stack wrote to the drive.
    drive_write_bytes: u64,
}

#[pymethods]
impl PyHostStack {
    /// The stack's state in JSON's data model (maps with string keys, as `json.loads`
    /// gives them): what a stack image's state.json holds under `stack`. The log tier's
    /// maps are one hex string each. No JSON text crosses.
    fn to_state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        // The conversion to serde_json's tree (hex-encoding the maps) needs no GIL.
        let value = py.detach(|| self.read(|s| serde_json::to_value(s)))?.map_err(|e| Failure::Bridge(e.to_string()))?;
        to_py(py, &value)
    }

    /// The inverse of `to_state` (a state.json's `stack`, old images' included); a
    /// one-line ValueError names what does not fit.
    #[staticmethod]
    fn from_state(py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<PyHostStack> {
        let value: serde_json::Value = from_py(state, "stack state")?;
        let stack: HostStack = py.detach(|| serde_json::from_value(value)).map_err(|e| Failure::Value(format!("stack state: {e}")))?;
        // A state that does not fit its own parameters would panic on an index mid-run.
        py.detach(|| stack.tier.check_loaded()).map_err(|e| Failure::Value(format!("stack state: {e}")))?;
        Ok(PyHostStack::new(stack))
    }

    /// The sizes and traffic of the stack ([`StackSummary`]).
    fn summary(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let summary = self.read(|s| StackSummary {
            user_bytes: s.tier.user_bytes(),
            resident_bytes: s.tier.resident_blocks() * host::tier::BLOCK_BYTES,
            drive_write_bytes: s.tier.counters.drive_write_bytes(),
        })?;
        to_py(py, &summary)
    }

    /// The tier's counters (host/tier.rs `TierCounters`), as `to_state` holds them.
    fn counters(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.part_to_py(py, |s| &s.tier.counters)
    }

    /// The tier's parameters (host/tier.rs `TierConfig`), as `to_state` holds them.
    fn config(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.part_to_py(py, |s| &s.tier.config)
    }

    /// The fast media (host/media.rs `MediaSpec`), as `to_state` holds it.
    fn media(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.part_to_py(py, |s| &s.media)
    }
}

/// A new host stack on fast media `media` with tier parameters `config` (host/tier.rs
/// `TierConfig`). ValueError with one line per problem, each naming the field and its
/// allowed range: as `names` names it (a field's key to the caller's name for it, the CLI's
/// flags), else by its key.
#[pyfunction]
#[pyo3(signature = (media, config, names = None))]
pub fn stack_new(
    media: &str,
    config: &Bound<'_, PyAny>,
    names: Option<std::collections::HashMap<String, String>>,
) -> PyResult<PyHostStack> {
    let config: TierConfig = from_py(config, "tier parameters")?;
    let Some(m) = host::media::preset(media) else {
        let known = host::media::PRESETS.join(", ");
        return Err(Failure::Value(format!("shaping media '{media}': unknown (one of {known})")).into());
    };
    let names = names.unwrap_or_default();
    let name = |key: &str| names.get(key).cloned().unwrap_or_else(|| key.to_string());
    let mut problems = config.problems_named(&name);
    let max = m.capacity_bytes_max.value;
    if config.capacity_bytes > max {
        let cap = name("capacity_bytes");
        problems.push(format!("{cap} {}: at most {max} bytes on {media} ({})", config.capacity_bytes, m.capacity_bytes_max.source));
    }
    if !problems.is_empty() {
        return Err(Failure::Value(problems.join("\n")).into());
    }
    Ok(PyHostStack::new(HostStack { media: m, tier: Tier::new(config) }))
}

/// A stack image's `stack.toml` (docs/host.md): what it is made of.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StackFile {
    format: String,
    version: u32,
    drive: String,
    namespace: u32,
    media: String,
    policy: String,
    tier: StackFileTier,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StackFileTier {
    capacity_bytes: u64,
    high_watermark_pct: u32,
    low_watermark_pct: u32,
    destage_concurrency: u32,
    stripe_bytes: u64,
    band_bytes: u64,
    host_op_pct: u32,
    #[serde(default)]
    area_bytes: u64,
}

/// Parse a stack.toml (ValueError naming the file and the problem).
#[pyfunction]
pub fn stack_toml(py: Python<'_>, text: &str, origin: &str) -> PyResult<Py<PyAny>> {
    let f: StackFile = toml::from_str(text).map_err(|e| Failure::Value(format!("{origin}: {}", e.message().replace('\n', " "))))?;
    to_py(py, &f)
}

/// The fast-media presets (name, spec with sources).
#[pyfunction]
pub fn media_presets(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let all: Vec<_> = host::media::PRESETS.iter().filter_map(|n| host::media::preset(n)).collect();
    to_py(py, &all)
}
