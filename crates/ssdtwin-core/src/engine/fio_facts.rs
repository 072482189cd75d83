//! What the Python package needs to know about fio's numbers, from their one home in the
//! core: the latency histogram's buckets (stats), the completion-latency tables and the
//! queue-depth bins (the fio runner's report, engine/fio/report.rs), the direction order
//! (workload), the layouts of the packed I/O records (engine::iolog) and the longest run
//! the engine simulates (engine::fio). The binding hands [`FioFacts`] to Python
//! (`ssdtwin._core.fio_facts()`), which reads its copies of these from it, never writes
//! them down itself (docs/architecture.md, "The binding").

use serde::Serialize;

use super::fio::report::{IODEPTH_BIN_LOW, LAT_EDGES, LAT_MS_EDGES};
use super::fio::MAX_RUN_NS;
use super::iolog::{LOG_RECORD, REPLAY_ABSOLUTE, REPLAY_RECORD, REPLAY_TAIL};
use crate::stats::{plat_bounds, plat_value, PLAT_BITS, PLAT_GROUP_NR, PLAT_NR};
use crate::workload::Ddir;

/// fio's log-linear latency histogram (stat.h `FIO_IO_U_PLAT_*`, docs/fio.md §5), bucket
/// by bucket: index i holds the latencies `bucket_low_ns[i]..=bucket_high_ns[i]` and is
/// reported as `bucket_value_ns[i]`; the last bucket also holds every larger latency.
#[derive(Clone, Debug, Serialize)]
pub struct Histogram {
    pub plat_bits: u32,
    pub plat_group_nr: u32,
    pub bucket_low_ns: Vec<u64>,
    pub bucket_high_ns: Vec<u64>,
    pub bucket_value_ns: Vec<u64>,
}

/// fio's completion-latency tables (JSON `latency_ns`, `latency_us`, `latency_ms`): the
/// exclusive upper edge of each slot; the ms table's last slot takes the rest.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyTables {
    pub edges: [u64; LAT_EDGES.len()],
    pub ms_edges: [u64; LAT_MS_EDGES.len()],
}

/// Everything at once (see the module doc).
#[derive(Clone, Debug, Serialize)]
pub struct FioFacts {
    /// The directions in index order: a record's or a log row's `ddir` indexes it.
    pub ddirs: [Ddir; 3],
    pub histogram: Histogram,
    pub latency_tables: LatencyTables,
    /// The smallest queue depth of each `iodepth_level` bin (1, 2-3, 4-7 ... 64 or more).
    pub iodepth_bin_low: [u32; IODEPTH_BIN_LOW.len()],
    /// Field names of a `write_iolog` record (engine output `iolog`), in order: each a
    /// little-endian u64.
    pub iolog_record: [&'static str; LOG_RECORD.len()],
    /// Field names of a `read_iolog` replay record (engine input `replay.records`).
    pub replay_record: [&'static str; REPLAY_RECORD.len()],
    /// The bit of a replay record's `kind` that makes its delay absolute (since the clone's
    /// start) rather than a gap after the previous issue.
    pub replay_absolute: u64,
    /// The bit of a replay record's `kind` that makes it the trace's tail: the last record,
    /// issuing nothing, holding the job until its time (the lines after the last I/O).
    pub replay_tail: u64,
    /// The longest run the engine simulates (virtual ns); the parser refuses jobs past it.
    pub max_run_ns: u64,
}

pub fn fio_facts() -> FioFacts {
    let bounds: Vec<(u64, u64)> = (0..PLAT_NR).map(plat_bounds).collect();
    FioFacts {
        ddirs: Ddir::ALL,
        histogram: Histogram {
            plat_bits: PLAT_BITS,
            plat_group_nr: PLAT_GROUP_NR,
            bucket_low_ns: bounds.iter().map(|b| b.0).collect(),
            bucket_high_ns: bounds.iter().map(|b| b.1).collect(),
            bucket_value_ns: (0..PLAT_NR).map(plat_value).collect(),
        },
        latency_tables: LatencyTables { edges: LAT_EDGES, ms_edges: LAT_MS_EDGES },
        iodepth_bin_low: IODEPTH_BIN_LOW,
        iolog_record: LOG_RECORD,
        replay_record: REPLAY_RECORD,
        replay_absolute: REPLAY_ABSOLUTE,
        replay_tail: REPLAY_TAIL,
        max_run_ns: MAX_RUN_NS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_describe_every_bucket_and_record() {
        let f = fio_facts();
        assert_eq!(f.histogram.bucket_value_ns.len(), PLAT_NR);
        assert_eq!(f.histogram.bucket_low_ns[0], 0);
        assert!(f.histogram.bucket_low_ns.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(f.iolog_record.len(), super::super::iolog::LOG_FIELDS);
        assert_eq!(f.replay_record.len(), super::super::iolog::REPLAY_FIELDS);
        assert_eq!(f.ddirs.map(|d| d.index()), [0, 1, 2]);
    }
}
