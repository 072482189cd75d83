//! A generation's `state.json`: the controller and FTL state with the maps' checksums
//! ([`Generation`]), inside an envelope carrying an xxh3 checksum of its exact bytes
//! (version 2); version-1 files, the bare generation, are still read.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::path::Path;

use super::{ImageError, STATE_FORMAT, VERSION};
use crate::nvme::{ControllerState, FtlState};

/// What a generation's state.json holds.
#[derive(Serialize, Deserialize)]
pub(super) struct Generation {
    pub(super) controller: ControllerState,
    pub(super) ftl: FtlState,
    pub(super) l2p_entries: u64,
    pub(super) p2l_entries: u64,
    pub(super) l2p_xxh3: String,
    pub(super) p2l_xxh3: String,
    /// [`crate::nvme::FtlCounters::map_changes`] when the maps were saved (absent in
    /// version-1 images).
    #[serde(default)]
    pub(super) maps_changes: Option<u64>,
    /// Data files of served namespaces: nsid → size in bytes.
    #[serde(default)]
    pub(super) data_files: BTreeMap<u32, u64>,
}

/// state.json: the generation and an xxh3 checksum of its exact bytes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    format: String,
    version: u32,
    xxh3: String,
    #[serde(borrow)]
    state: &'a RawValue,
}

pub(super) fn encode_state(g: &Generation) -> Vec<u8> {
    let state = serde_json::to_string(g).expect("state serialises");
    let sum = xxhash_rust::xxh3::xxh3_64(state.as_bytes());
    let raw = RawValue::from_string(state).expect("serde_json output is JSON");
    let env = Envelope { format: STATE_FORMAT.into(), version: VERSION, xxh3: format!("{sum:016x}"), state: &raw };
    serde_json::to_vec(&env).expect("envelope serialises")
}

pub(super) fn decode_state(bytes: &[u8], path: &Path) -> Result<Generation, ImageError> {
    let damaged = |reason: String| ImageError::Damaged { path: path.to_path_buf(), reason };
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
    if v.get("format").is_none() {
        // A version-1 state.json: the bare generation, no checksum.
        return serde_json::from_value(v).map_err(|e| damaged(e.to_string()));
    }
    let env: Envelope = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
    if env.format != STATE_FORMAT || env.version > VERSION {
        return Err(damaged(format!(
            "state format '{}' version {} (this ssdtwin reads {STATE_FORMAT} up to {VERSION})",
            env.format, env.version
        )));
    }
    let sum = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(env.state.get().as_bytes()));
    if sum != env.xxh3 {
        return Err(damaged(format!("checksum {sum} does not match the recorded {}", env.xxh3)));
    }
    serde_json::from_str(env.state.get()).map_err(|e| damaged(e.to_string()))
}
