//! `DIR/live.json`: the server's view of the drive (identify data, logs, namespaces,
//! counters), rewritten every second while serving so read-only commands can show live
//! state, and the session summary printed at exit.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use ssdtwin_core::image::Recovery;
use ssdtwin_core::nvme::{ControllerView, WafMeasurement};

/// File name of the live snapshot in the image directory.
pub const LIVE: &str = "live.json";

/// Counters of one serving session (also the summary at exit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub seconds: f64,
    pub pace: String,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    pub flushes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub errors: u64,
    pub syncs: u64,
    pub connections: u64,
    pub requests: u64,
    /// Replies that carried an error: the drive's and the server's own refusals.
    pub error_replies: u64,
    /// Connections dropped for breaking the protocol.
    pub protocol_errors: u64,
    pub replies_paced: u64,
    pub replies_late: u64,
    pub late_ns_max: u64,
    pub late_ns_mean: u64,
    pub host_write_bytes: u64,
    pub nand_write_bytes: u64,
    /// Host data in the drive's write buffer when the summary was taken (the vendor log's
    /// `buffered_bytes`): acknowledged and power-loss protected, not programmed to NAND. A
    /// FLUSH or a commit leaves it there; later writes push it out (rewrites of an IU still
    /// in the buffer never reach NAND).
    #[serde(default)]
    pub buffered_bytes: u64,
    /// `buffered_bytes` less what the buffer held when the server started: how much of the
    /// session's host bytes the buffer took in and has not programmed yet (negative when the
    /// session pushed out more than it left).
    #[serde(default)]
    pub buffered_change_bytes: i64,
    /// NAND / host bytes of the session: a window ratio whatever the session spans (0 before
    /// any write). The drive's WAF is `waf_measurement.waf`, set only when the session is steady.
    pub waf: f64,
    /// The session's WAF measurement (docs/models.md, "Measuring WAF"): timed writes over the
    /// attached namespaces, their span (GC cycles, namespace passes) and verdict, as the
    /// metrics' `ssdtwin_waf_session_*` gauges report it. None in a live.json written before it.
    #[serde(default)]
    pub waf_measurement: Option<WafMeasurement>,
    pub idle_gc_moved_ius: u64,
    /// BLOCK_STATUS requests (nbdcopy and qemu-img ask before copying): with the commands
    /// above, every request the server answered.
    #[serde(default)]
    pub block_status: u64,
    /// Mean model latency (arrival to the model's completion) of the reads and writes the
    /// timing model ran, in microseconds; None when it ran none (`--pace off`, no I/O).
    #[serde(default)]
    pub read_latency_mean_us: Option<f64>,
    #[serde(default)]
    pub write_latency_mean_us: Option<f64>,
    /// The commands and bytes of each export, lowest NSID first (for a stack, its one
    /// export, the volume, on the stack's namespace).
    #[serde(default)]
    pub namespaces: Vec<NsSummary>,
    pub commits: u64,
    pub journal_records: u64,
    pub generation: u64,
    /// Why writes fail, after a failed write or fsync.
    pub failure: Option<String>,
}

/// One export's share of a session's commands ([`SessionSummary::namespaces`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NsSummary {
    pub nsid: u32,
    pub export: String,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Bytes the TRIMs named (the drive deallocates their whole IUs).
    pub trim_bytes: u64,
    /// Bytes the WRITE_ZEROES named.
    pub write_zeroes_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportRow {
    pub name: String,
    pub nsid: u32,
    pub size: u64,
    pub read_only: bool,
}

/// `format` of a `live.json` document.
pub const LIVE_FORMAT: &str = "ssdtwin-live";
/// `version` of the `live.json` documents this build writes and reads.
pub const LIVE_VERSION: u32 = 1;

/// The `live.json` document: the serving session around a [`ControllerView`], the structure
/// read-only commands show from an open image too (its fields sit at the top level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveSnapshot {
    pub format: String,
    pub version: u32,
    pub pid: u32,
    pub serving: bool,
    pub time_unix_ms: u64,
    pub started_unix_ms: u64,
    pub generation: u64,
    pub pace: String,
    pub exports: Vec<ExportRow>,
    pub uris: Vec<String>,
    #[serde(flatten)]
    pub view: ControllerView,
    pub stats: SessionSummary,
}

/// What `ssdtwin serve` reports once it is serving (the `ready` callback of the binding).
#[derive(Clone, Debug, Serialize)]
pub struct ServeInfo {
    pub dir: std::path::PathBuf,
    pub pace: String,
    pub uris: Vec<String>,
    pub exports: Vec<String>,
    pub metrics: Option<String>,
    pub recovery: Option<Recovery>,
    pub pid: u32,
    pub warnings: Vec<String>,
}

/// The session summary at exit with what stopped the server (a signal's name).
#[derive(Clone, Debug, Serialize)]
pub struct StoppedSummary {
    #[serde(flatten)]
    pub summary: Option<SessionSummary>,
    pub stopped_by: String,
}

/// The `live.json` of the image at `dir`, if there is one in this build's format; `None`
/// when it is missing, unreadable or of another format (callers then use the image).
/// Whether the server that wrote it still runs is the caller's question (the image lock).
pub fn read_live(dir: &Path) -> Option<LiveSnapshot> {
    let bytes = std::fs::read(dir.join(LIVE)).ok()?;
    let snap: LiveSnapshot = serde_json::from_slice(&bytes).ok()?;
    (snap.format == LIVE_FORMAT && snap.version == LIVE_VERSION).then_some(snap)
}

/// Replace `DIR/live.json` atomically (temporary file, then rename): readers see the old or
/// the new snapshot, never half of one. The temporary file is created without following a
/// link planted in its place.
pub(crate) fn write_live(dir: &Path, snap: &LiveSnapshot) -> io::Result<()> {
    let path = dir.join(LIVE);
    let tmp = dir.join("live.json.tmp");
    let bytes = serde_json::to_vec_pretty(snap).map_err(io::Error::other)?;
    let _ = std::fs::remove_file(&tmp);
    let mut f = ssdtwin_core::fsio::create(&tmp).map_err(|e| e.source)?;
    io::Write::write_all(&mut f, &bytes)?;
    std::fs::rename(&tmp, &path)
}
