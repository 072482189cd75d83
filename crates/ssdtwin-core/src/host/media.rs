//! Fast media a write-shaping tier lives on: capacity, bandwidth and per-operation latency,
//! each with its source (docs/host.md, "Fast media").

use serde::{Deserialize, Serialize};

use crate::spec::Sourced;

fn s<T>(value: T, source: impl Into<String>) -> Sourced<T> {
    Sourced::new(value, source)
}

/// A fast-media device (or interleaved set of devices) as the tier sees it: a single
/// bandwidth server per direction plus a fixed latency per operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaSpec {
    /// Preset name (`pmem`, `optane-ssd`, `dram`).
    pub name: String,
    /// The largest tier this media can hold.
    pub capacity_bytes_max: Sourced<u64>,
    pub write_bytes_per_s: Sourced<u64>,
    pub read_bytes_per_s: Sourced<u64>,
    /// Added to every write after its transfer (persistence point reached).
    pub write_latency_ns: Sourced<u64>,
    pub read_latency_ns: Sourced<u64>,
    /// Whether what the tier holds survives a power cut (docs/host.md, "Crash semantics").
    pub durable: Sourced<bool>,
}

/// The preset names, in the order `--shaping` lists them.
pub const PRESETS: [&str; 3] = ["pmem", "optane-ssd", "dram"];

const IZRAELEVITZ: &str =
    "Izraelevitz et al., Basic Performance Measurements of the Intel Optane DC Persistent Memory Module, arXiv 1903.05714 (2019)";

/// The media preset called `name`.
pub fn preset(name: &str) -> Option<MediaSpec> {
    match name {
        "pmem" => Some(MediaSpec {
            name: name.into(),
            capacity_bytes_max: s(
                3 << 40,
                format!("{IZRAELEVITZ}: one socket's 6 interleaved 512 GB modules, 3 TB (the paper's platform)"),
            ),
            write_bytes_per_s: s(13_900_000_000, format!("{IZRAELEVITZ}: 13.9 GB/s maximum write bandwidth, six interleaved modules")),
            read_bytes_per_s: s(39_400_000_000, format!("{IZRAELEVITZ}: 39.4 GB/s maximum read bandwidth, six interleaved modules")),
            write_latency_ns: s(
                1_000,
                "[ASSUMED] 1 us per persistent 4 KiB write: non-temporal stores + fence through a user-space \
                 persistence library (PMDK/DAOS VOS); the media part alone is ~100 ns (Izraelevitz et al.)",
            ),
            read_latency_ns: s(305, format!("{IZRAELEVITZ}: 305 ns random load latency")),
            durable: s(true, "App Direct mode: stores past the ADR domain survive a power cut (Intel PMem App Direct)"),
        }),
        "optane-ssd" => Some(MediaSpec {
            name: name.into(),
            capacity_bytes_max: s(3_200_000_000_000, "[ASSUMED] largest P5800X capacity, 3.2 TB (Intel P5800X product brief, not re-read)"),
            write_bytes_per_s: s(
                6_200_000_000,
                "[ASSUMED] P5800X 6,200 MB/s sequential write (Intel product brief, not re-read); the P4800X's \
                 2,000 MB/s (AnandTech P4800X review) bounds it from below",
            ),
            read_bytes_per_s: s(7_200_000_000, "[ASSUMED] P5800X 7,200 MB/s sequential read (Intel product brief, not re-read)"),
            write_latency_ns: s(
                5_000,
                "[ASSUMED] P5800X typical 4 KiB write latency < 5 us (product brief, not re-read); the P4800X measures \
                 8.9 us QD1 read at its < 10 us spec (AnandTech P4800X review)",
            ),
            read_latency_ns: s(5_000, "[ASSUMED] P5800X typical 4 KiB read latency < 5 us (product brief, not re-read)"),
            durable: s(true, "an NVMe SSD with power-loss protection: acknowledged writes survive a power cut"),
        }),
        "dram" => Some(MediaSpec {
            name: name.into(),
            capacity_bytes_max: s(
                64 << 20,
                "a DRAM namespace of a PBlaze5-class drive, 64 MB in the PBlaze5 talk (docs/models.md, DRAM namespace)",
            ),
            write_bytes_per_s: s(
                3_400_000_000,
                "bounded by the PBlaze5's PCIe 3.0 x4 host link, 3.4 GB/s (docs/models.md, DRAM namespace)",
            ),
            read_bytes_per_s: s(3_400_000_000, "as writes: the PBlaze5's host link bounds it (docs/models.md, DRAM namespace)"),
            write_latency_ns: s(10_000, "[ASSUMED] one NVMe command round trip, ~10 us"),
            read_latency_ns: s(10_000, "[ASSUMED] one NVMe command round trip, ~10 us"),
            durable: s(true, "the PBlaze5's capacitors dump DRAM namespaces to NAND at a power cut (docs/models.md, DRAM namespace)"),
        }),
        _ => None,
    }
}

/// Time of `bytes` at `bytes_per_s`, rounded up to a whole nanosecond.
pub fn transfer_ns(bytes: u64, bytes_per_s: u64) -> u64 {
    ((bytes as u128 * 1_000_000_000).div_ceil(bytes_per_s.max(1) as u128)) as u64
}
