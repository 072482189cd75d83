//! Host stacks across the binding (docs/host.md): a stack's state as Python objects, its
//! summary, a new stack, a stack image's stack.toml, the fast-media presets.

use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use ssdtwin_core::engine::stack::HostStack;
use ssdtwin_core::host::{self, tier::Tier, tier::TierConfig};

use crate::{from_py, to_py, Failure};

/// A host stack's state as Python objects in JSON's data model (maps with string keys, as
/// `json.loads` gives them): Python keeps it in the stack image's `state.json` and hands it
/// back unchanged, so it must survive a trip through that file. No JSON text crosses.
pub(crate) fn stack_to_py(py: Python<'_>, stack: &HostStack) -> PyResult<Py<PyAny>> {
    let value = serde_json::to_value(stack).map_err(|e| Failure::Bridge(e.to_string()))?;
    to_py(py, &value)
}

/// The inverse of [`stack_to_py`]; a ValueError names what does not fit.
pub(crate) fn stack_from_py(obj: &Bound<'_, PyAny>) -> Result<HostStack, Failure> {
    let value: serde_json::Value = from_py(obj, "stack state")?;
    serde_json::from_value(value).map_err(|e| Failure::Value(format!("stack state: {e}")))
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

/// The sizes and traffic of a host stack in state `stack` ([`StackSummary`]).
#[pyfunction]
pub fn stack_summary(py: Python<'_>, stack: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let tier = stack_from_py(stack)?.tier;
    let summary = StackSummary {
        user_bytes: tier.user_bytes(),
        resident_bytes: tier.resident_blocks() * host::tier::BLOCK_BYTES,
        drive_write_bytes: tier.counters.drive_write_bytes(),
    };
    to_py(py, &summary)
}

/// A new host stack's state (see [`stack_to_py`]) on fast media `media` with tier
/// parameters `config` (host/tier.rs `TierConfig`). ValueError with one line per problem,
/// each naming the field and its allowed range.
#[pyfunction]
pub fn stack_new(py: Python<'_>, media: &str, config: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let config: TierConfig = from_py(config, "tier parameters")?;
    let Some(m) = host::media::preset(media) else {
        let known = host::media::PRESETS.join(", ");
        return Err(Failure::Value(format!("shaping media '{media}': unknown (one of {known})")).into());
    };
    let mut problems = config.problems();
    let max = m.capacity_bytes_max.value;
    if config.capacity_bytes > max {
        problems.push(format!("capacity {}: at most {max} bytes on {media} ({})", config.capacity_bytes, m.capacity_bytes_max.source));
    }
    if !problems.is_empty() {
        return Err(Failure::Value(problems.join("\n")).into());
    }
    let stack = HostStack { media: m, tier: Tier::new(config) };
    stack_to_py(py, &stack)
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
