//! ssdtwin-core: a deterministic model of an NVMe SSD.
//!
//! No threads, no sockets, no wall clock. The [`nvme::Controller`] is the only door into
//! a drive; it owns the namespaces, logs and features and drives the [`ftl::Ftl`], which
//! emits NAND operations that the engine (or nothing, in fast-forward) times.

pub mod bigarray;
pub mod cluster;
pub mod engine;
pub mod faults;
pub mod fsio;
pub(crate) mod ftl;
pub mod host;
pub mod image;
pub mod journal;
pub mod nand;
pub mod nvme;
pub mod rng;
pub mod spec;
pub mod stats;
pub mod theory;
pub mod units;
pub mod util;
pub mod workload;
