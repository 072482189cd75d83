//! ssdtwin-core: a deterministic model of an NVMe SSD.
//!
//! No sockets, no wall clock. The [`nvme::Controller`] is the only door into a drive; it
//! owns the namespaces, logs and features and drives the [`ftl::Ftl`], which emits NAND
//! operations that the engine (or nothing, in fast-forward) times.
//!
//! Threads only where they cannot change a result: everything timed (the engine, the fio
//! runner, the cluster) runs on one thread in virtual time; fast-forward preconditioning
//! (`nvme/precondition.rs`, `ftl/shard.rs`) runs the FTL's partitions on scoped threads,
//! each applying in stream order the writes of partitions that share no mutable state but
//! counters that add up, or runs the write buffer a step ahead of the maps, whose evictions
//! depend on the order of host writes alone. The state is the one the same writes give one
//! at a time, for any thread count (docs/architecture.md, "Determinism").

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
