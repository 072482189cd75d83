//! A WAF measurement: NAND bytes programmed per host byte written over a window between two
//! vendor logs, with what it was measured over and whether that is enough to call it the
//! drive's WAF (docs/models.md, "Measuring WAF").
//!
//! A WAF is a property of a GC cycle, not of an instant: in any window the NAND bytes count
//! the GC copies of the victims reclaimed in it, and which victims those were (how full, how
//! many) depends on where the window falls. A window that reclaims fewer superblocks than
//! the drive has sees part of the age distribution of its blocks only, and on a drive with
//! few large superblocks (the QLC P5316 has a few dozen at 1/64 scale) a window of seconds
//! reclaims a handful, so its ratio says little. One GC cycle here is as many superblocks
//! reclaimed as the drive has: every superblock, on average, collected once. A window is
//! `steady` when it spans at least one such cycle, or when the host wrote at least one full
//! pass of the namespace (a workload that needs no GC, sequential overwrites, still programs
//! the whole namespace once); otherwise it is `insufficient` and no WAF is reported as the
//! drive's: only the raw ratio, under its own name. Either way the write buffer must end the
//! window about as full as it began: host bytes still waiting in it are counted as written
//! but not as programmed, so a window that fills an empty buffer reads low (a first pass of
//! a 64 MiB namespace through a 12 MiB buffer read 0.81).

use serde::{Deserialize, Serialize};

use super::VendorLog;

/// GC cycles (superblocks reclaimed / superblocks) a window must span to be `steady`.
pub const WAF_MIN_GC_CYCLES: f64 = 1.0;
/// Namespace passes of host writes that make a window `steady` without GC.
pub const WAF_MIN_NAMESPACE_PASSES: f64 = 1.0;
/// The largest net change of the write buffer's contents over a `steady` window, as a share
/// of the host bytes it wrote: the ratio is off by about that share (bytes taken in and not
/// yet programmed, or programmed from before the window), so 1 % keeps it within 1 %.
pub const WAF_MAX_BUFFER_SHARE: f64 = 0.01;

/// How the window was run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WafBasis {
    /// A window of a timed run (fio, a sweep point, a replay).
    Timed,
    /// A fast-forward pass (preconditioning writes straight into the FTL).
    FastForward,
    /// A window between two logs whose writes the measurer did not run itself, so it cannot
    /// say whether they were timed or fast-forward (`ssdtwin waf DIR -- COMMAND`). The
    /// sufficiency rule is the same.
    Window,
}

/// Whether the window's ratio may be reported as the drive's WAF.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WafVerdict {
    /// At least one GC cycle or one namespace pass: the ratio is the drive's WAF.
    Steady,
    /// Too little written: the ratio is noise of the window, not the drive's WAF.
    Insufficient,
    /// The host wrote nothing: there is no ratio.
    NoWrites,
}

/// A WAF measured over one window (`WafMeasurement::between`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WafMeasurement {
    pub basis: WafBasis,
    pub verdict: WafVerdict,
    /// The drive's WAF: the window's ratio when `steady`, else none.
    pub waf: Option<f64>,
    /// NAND / host bytes of the window whatever the verdict (none without host writes).
    pub waf_window_raw: Option<f64>,
    pub host_bytes: u64,
    /// Host-data NAND programs (host, GC and parity; not sanitize passes), as the log's WAF.
    pub nand_bytes: u64,
    /// Superblocks reclaimed by GC in the window.
    pub gc_victims: u64,
    pub superblocks: u32,
    /// `gc_victims / superblocks`: how many times GC turned the whole pool over.
    pub gc_cycles: f64,
    pub namespace_bytes: u64,
    /// `host_bytes / namespace_bytes`.
    pub namespace_passes: f64,
    /// Bytes in the write buffer at the window's end less at its start.
    pub buffered_change_bytes: i64,
}

impl WafMeasurement {
    /// The measurement of the window from `before` to `after` (two vendor logs of one drive)
    /// over namespaces of `namespace_bytes` in all.
    pub fn between(before: &VendorLog, after: &VendorLog, basis: WafBasis, namespace_bytes: u64) -> WafMeasurement {
        let nand = |v: &VendorLog| v.nand_write_host_bytes + v.nand_write_gc_bytes + v.nand_write_parity_bytes;
        let host_bytes = after.host_write_bytes.saturating_sub(before.host_write_bytes);
        let nand_bytes = nand(after).saturating_sub(nand(before));
        let gc_victims = after.gc_victims.saturating_sub(before.gc_victims);
        let superblocks = after.superblocks;
        let gc_cycles = gc_victims as f64 / superblocks.max(1) as f64;
        let namespace_passes = if namespace_bytes > 0 { host_bytes as f64 / namespace_bytes as f64 } else { 0.0 };
        let raw = (host_bytes > 0).then(|| nand_bytes as f64 / host_bytes as f64);
        let buffered_change_bytes = after.buffered_bytes as i64 - before.buffered_bytes as i64;
        let buffer_settled = buffered_change_bytes.unsigned_abs() as f64 <= WAF_MAX_BUFFER_SHARE * host_bytes as f64;
        let verdict = if host_bytes == 0 {
            WafVerdict::NoWrites
        } else if (gc_cycles >= WAF_MIN_GC_CYCLES || namespace_passes >= WAF_MIN_NAMESPACE_PASSES) && buffer_settled {
            WafVerdict::Steady
        } else {
            WafVerdict::Insufficient
        };
        WafMeasurement {
            basis,
            verdict,
            waf: if verdict == WafVerdict::Steady { raw } else { None },
            waf_window_raw: raw,
            host_bytes,
            nand_bytes,
            gc_victims,
            superblocks,
            gc_cycles,
            namespace_bytes,
            namespace_passes,
            buffered_change_bytes,
        }
    }
}
