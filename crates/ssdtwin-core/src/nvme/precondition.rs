//! Preconditioning in fast-forward: sequential or random writes straight into the FTL.
//!
//! A drive of several FTL partitions (`[ftl] partitions`, or NVM Sets) runs them on several
//! threads; a drive of one runs its write buffer on a second thread, ahead of the maps
//! (`ftl/shard.rs`). The result is the same for any thread count.

use serde::{Deserialize, Serialize};

use super::{fail, Controller, Error, Namespace, NsId, Status, WP_NONE};
use crate::ftl::FtlConfig;
use crate::nand::{NoTiming, ShardSink};
use crate::rng::Rng;
use crate::units::LogicalIu;

/// Host bytes between progress calls: one partition runs alone in 64 MiB steps; several
/// run in 1 GiB steps, each step a fork and join of the partitions' threads.
const STEP_BYTES_SERIAL: u64 = 64 << 20;
const STEP_BYTES_PARTITIONED: u64 = 1 << 30;

/// The writes of a preconditioning pass, in order.
#[derive(Clone)]
struct Stream {
    pattern: Pattern,
    rng: Rng,
    /// Next sequential block, blocks of a sequential pass and whole blocks that fit.
    slot: u64,
    seq_slots: u64,
    full_slots: u64,
    block_bytes: u64,
    ns_bytes: u64,
}

impl Stream {
    /// The next write: (first byte, bytes). Sequential passes cover the namespace exactly:
    /// where its size is not a multiple of the block size, the last write of a pass is
    /// shortened to the namespace end (as fio's sequential jobs end; the tail is a whole
    /// number of LBAs). Random writes use whole blocks that fit.
    #[inline(always)]
    fn next(&mut self) -> (u64, u64) {
        let s = match self.pattern {
            Pattern::Sequential => {
                let s = self.slot;
                self.slot += 1;
                if self.slot == self.seq_slots {
                    self.slot = 0;
                }
                s
            }
            Pattern::Random => self.rng.below(self.full_slots),
        };
        let start = s * self.block_bytes;
        (start, self.block_bytes.min(self.ns_bytes - start))
    }

    /// Emit the IU writes of the stream's next writes, from `done` bytes until at least
    /// `until`; returns (writes, bytes done).
    #[inline(always)]
    fn emit(&mut self, cfg: &FtlConfig, ns: &Namespace, mut done: u64, until: u64, f: &mut impl FnMut(LogicalIu, u128)) -> (u64, u64) {
        let iu = cfg.iu_bytes as u64;
        let lba = ns.lba_bytes as u64;
        // Fast path: IU-aligned blocks of whole IUs (every 4 KiB-IU preset at 4k/128k).
        let whole = self.block_bytes % iu == 0;
        let shift = cfg.chunk_shift;
        let mut ios = 0;
        while done < until {
            let (start, len) = self.next();
            if whole && len == self.block_bytes {
                let first = start / iu;
                for k in first..first + self.block_bytes / iu {
                    f(ns.global_iu(k, shift).expect("slot within the namespace"), cfg.full_mask);
                }
            } else {
                Controller::for_each_iu(cfg, ns, start / lba, len / lba, &mut *f);
            }
            ios += 1;
            done += len;
        }
        (ios, done)
    }
}

impl Controller {
    /// Write `amount_bytes` to namespace `nsid` in blocks of `block_bytes`, sequentially
    /// (wrapping) or at uniformly random aligned offsets, in fast-forward. `progress` is
    /// called every 64 MiB (1 GiB on a drive of several FTL partitions) with (bytes done,
    /// total) and may return false to stop (on two threads, the one or two steps the write
    /// buffer's thread has already taken are finished first; the report counts them).
    pub fn precondition(
        &mut self,
        nsid: NsId,
        pattern: Pattern,
        block_bytes: u64,
        amount_bytes: u64,
        seed: u64,
        progress: &mut dyn FnMut(u64, u64) -> bool,
    ) -> Result<PreconditionReport, Error> {
        self.precondition_with(nsid, pattern, block_bytes, amount_bytes, seed, progress, &mut NoTiming)
    }

    /// Threads fast-forward may use (0, the default: one per core): one per FTL partition,
    /// or with one partition, a second that runs the write buffer ahead of the maps. The
    /// results are the same for every count.
    pub fn set_fast_forward_threads(&mut self, threads: usize) {
        self.ff_threads = threads;
    }

    fn fast_forward_threads(&self) -> usize {
        match self.ff_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// [`Controller::precondition`] with the FTL's operations sent to `sink`, which sees no
    /// time either: `ssdtwin bench ftl` passes a [`crate::nand::TouchCounter`] to count the
    /// random map accesses per host write.
    #[allow(clippy::too_many_arguments)]
    pub fn precondition_with<S: ShardSink>(
        &mut self,
        nsid: NsId,
        pattern: Pattern,
        block_bytes: u64,
        amount_bytes: u64,
        seed: u64,
        progress: &mut dyn FnMut(u64, u64) -> bool,
        sink: &mut S,
    ) -> Result<PreconditionReport, Error> {
        let nsid = nsid.0;
        self.check_not_sanitizing()?;
        let ns = self.attached_u32(nsid)?.clone();
        let mut stream = self.precondition_stream(&ns, pattern, block_bytes, seed)?;
        let cfg = self.cfg.clone();
        let before = self.ftl_counters().clone();
        let partitioned = cfg.parts > 1;
        let step_bytes = if partitioned { STEP_BYTES_PARTITIONED } else { STEP_BYTES_SERIAL }.max(block_bytes);
        let threads = self.fast_forward_threads();
        // A pass of at least the namespace's size touches every page of its maps: with a
        // core to spare, a helper faults them in ahead of the writes.
        let prefault = threads > 1 && amount_bytes >= ns.bytes();
        let ftl = self.ftl()?;
        let mut run = |ftl: &mut crate::ftl::Ftl| {
            let (mut ios, mut bytes_done) = (0u64, 0u64);
            let mut interrupted = false;
            if !partitioned && threads > 1 {
                // One partition on two cores: the write buffer a step ahead of the maps.
                let mut produced = 0u64;
                ftl.write_pipelined(
                    sink,
                    |stage| {
                        if produced >= amount_bytes {
                            return None;
                        }
                        let step_end = produced.saturating_add(step_bytes).min(amount_bytes);
                        let (n, done) = stream.emit(&cfg, &ns, produced, step_end, &mut |iu, mask| stage.write(iu, mask));
                        produced = done;
                        Some((n, done))
                    },
                    |&(n, done)| {
                        ios += n;
                        bytes_done = done;
                        interrupted = interrupted || !progress(done.min(amount_bytes), amount_bytes);
                        !interrupted
                    },
                );
            }
            while bytes_done < amount_bytes && !interrupted {
                let step_end = bytes_done.saturating_add(step_bytes).min(amount_bytes);
                let (n, done) = if partitioned {
                    // Each shard draws the step's writes from its own copy of the stream; the
                    // copies end alike, and the first one goes on.
                    let mut ends = ftl.write_partitioned(threads, sink, |w| {
                        let mut s = stream.clone();
                        let r = s.emit(&cfg, &ns, bytes_done, step_end, &mut |iu, mask| w.write(iu, mask));
                        (s, r)
                    });
                    let (s, r) = ends.swap_remove(0);
                    stream = s;
                    r
                } else {
                    stream.emit(&cfg, &ns, bytes_done, step_end, &mut |iu, mask| ftl.write(iu, mask, sink))
                };
                ios += n;
                bytes_done = done;
                if !progress(bytes_done.min(amount_bytes), amount_bytes) {
                    interrupted = true;
                    break;
                }
            }
            (ios, bytes_done, interrupted)
        };
        let (ios, bytes_done, interrupted) =
            if prefault { ftl.with_maps_prefaulted(&ns.chunks, amount_bytes / cfg.iu_bytes as u64, run) } else { run(ftl) };
        self.st.smart.host_write_commands += ios;
        self.st.smart.data_units_written_512 += bytes_done / 512;
        if let Some(c) = self.st.set_commands.get_mut(ns.nvm_set as usize) {
            c.host_write_commands += ios;
        }
        let iu = cfg.iu_bytes as u64;
        let after = self.ftl_counters();
        let host = after.host_write_bytes - before.host_write_bytes;
        let nand = (after.host_programmed_ius + after.gc_programmed_ius - before.host_programmed_ius - before.gc_programmed_ius) * iu;
        Ok(PreconditionReport {
            nsid,
            pattern,
            block_bytes,
            seed,
            host_bytes: host,
            ios,
            nand_bytes: nand,
            waf: if host > 0 { nand as f64 / host as f64 } else { 0.0 },
            interrupted,
        })
    }

    /// The write stream of a preconditioning pass over `ns`, or why there can be none.
    fn precondition_stream(&self, ns: &Namespace, pattern: Pattern, block_bytes: u64, seed: u64) -> Result<Stream, Error> {
        let nsid = ns.nsid;
        if ns.dram {
            return fail(Status::InvalidField, format!("namespace {nsid} is a DRAM namespace: there is no NAND state to precondition"));
        }
        if ns.write_protect != WP_NONE {
            return fail(Status::NamespaceWriteProtected, format!("namespace {nsid} is write protected"));
        }
        let lba = ns.lba_bytes as u64;
        if block_bytes == 0 || block_bytes % lba != 0 {
            return fail(
                Status::InvalidField,
                format!("block size {block_bytes} must be a positive multiple of the namespace's {lba}-byte LBA"),
            );
        }
        let ns_bytes = ns.bytes();
        let full_slots = ns_bytes / block_bytes;
        if full_slots == 0 {
            return fail(Status::InvalidField, format!("block size {block_bytes} exceeds namespace {nsid} ({ns_bytes} bytes)"));
        }
        Ok(Stream { pattern, rng: Rng::new(seed), slot: 0, seq_slots: ns_bytes.div_ceil(block_bytes), full_slots, block_bytes, ns_bytes })
    }
}

/// The access pattern of a preconditioning run (reports spell it "sequential"/"random").
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Sequential,
    Random,
}

/// A pattern name that is not one of "seq", "sequential", "rand", "random".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pattern '{0}': use 'seq' or 'rand'")]
pub struct UnknownPattern(pub String);

impl std::str::FromStr for Pattern {
    type Err = UnknownPattern;

    fn from_str(s: &str) -> Result<Pattern, UnknownPattern> {
        match s {
            "seq" | "sequential" => Ok(Pattern::Sequential),
            "rand" | "random" => Ok(Pattern::Random),
            other => Err(UnknownPattern(other.to_string())),
        }
    }
}

/// What a preconditioning run did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PreconditionReport {
    pub nsid: u32,
    pub pattern: Pattern,
    pub block_bytes: u64,
    pub seed: u64,
    pub host_bytes: u64,
    pub ios: u64,
    pub nand_bytes: u64,
    pub waf: f64,
    pub interrupted: bool,
}
