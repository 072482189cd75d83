//! The machine's side of `ssdtwin bench ftl`: how many random read-modify-writes
//! per second one core (or `threads` cores, each over its own part of the array) sustains
//! over an array the size of the FTL's L2P (where every random map line of a host write
//! is), with many misses in flight. Fast-forward at full scale is bound by exactly that
//! (each host write costs a few random map lines, counted by `Drive.precondition_touches`),
//! so the bench prints both and the distance between them. A benchmark, not the model: it reads the wall clock.

use pyo3::prelude::*;
use serde::Serialize;
use ssdtwin_core::bigarray::{prefetch, BigArray};
use ssdtwin_core::rng::Rng;
use std::time::Instant;

use crate::bridge::to_py;
use crate::errors::Failure;

/// Most prefetches in flight the loop keeps (the ring of addresses drawn ahead).
pub const MAX_INFLIGHT: usize = 64;
/// The smallest array measured: below this the array sits in the caches and the figure
/// says nothing about DRAM.
pub const MIN_ARRAY_BYTES: u64 = 1 << 20;

#[derive(Serialize)]
struct RmwReport {
    array_bytes: u64,
    ops: u64,
    inflight: usize,
    seed: u64,
    /// Threads, each doing `ops / threads` read-modify-writes on its own 1/`threads` of the
    /// array (as fast-forward's partitions own disjoint parts of the maps).
    threads: usize,
    /// Writing every entry once first (faults the pages in, as huge pages where the kernel
    /// gives them), so the timed loop sees no page faults.
    fill_seconds: f64,
    seconds: f64,
    rmw_per_s: f64,
    /// XOR of the values read: depends only on the seed, the array size and `ops` (not on
    /// `inflight`), so two runs can be checked to have done the same work.
    checksum: u32,
}

/// `ops` random read-modify-writes (add one) of `a`'s entries at addresses drawn from `rng`,
/// each drawn and prefetched `inflight` operations before it is done. The addresses and
/// their order do not depend on `inflight`. Returns the XOR of the values read.
pub fn rmw_loop(a: &mut [u32], ops: u64, inflight: usize, rng: &mut Rng) -> u32 {
    assert!((1..=MAX_INFLIGHT).contains(&inflight) && !a.is_empty());
    let n = a.len() as u64;
    let mut ring = [0usize; MAX_INFLIGHT];
    for slot in ring.iter_mut().take(inflight) {
        *slot = rng.below(n) as usize;
        prefetch(a, *slot);
    }
    let (mut k, mut sum) = (0usize, 0u32);
    for _ in 0..ops {
        let i = ring[k];
        let v = a[i];
        sum ^= v;
        a[i] = v.wrapping_add(1);
        let next = rng.below(n) as usize;
        prefetch(a, next);
        ring[k] = next;
        k += 1;
        if k == inflight {
            k = 0;
        }
    }
    sum
}

/// The random read-modify-write rate over `array_bytes` (rounded down to whole 4-byte
/// entries): `ops` operations with `inflight` prefetches ahead, addresses from the
/// project's seeded generator. Returns a dict (see `RmwReport`).
#[pyfunction]
#[pyo3(signature = (array_bytes, ops, inflight=32, seed=1, threads=1))]
pub fn rmw_rate(py: Python<'_>, array_bytes: u64, ops: u64, inflight: usize, seed: u64, threads: usize) -> PyResult<Py<PyAny>> {
    if !(1..=256).contains(&threads) {
        return Err(Failure::Value(format!("threads {threads}: must be 1..=256")).into());
    }
    if array_bytes < MIN_ARRAY_BYTES || array_bytes / 4 > isize::MAX as u64 / 4 {
        return Err(Failure::Value(format!("array_bytes {array_bytes}: must be at least {MIN_ARRAY_BYTES} (1 MiB)")).into());
    }
    if !(1..=MAX_INFLIGHT).contains(&inflight) {
        return Err(Failure::Value(format!("inflight {inflight}: must be 1..={MAX_INFLIGHT}")).into());
    }
    if ops == 0 {
        return Err(Failure::Value("ops 0: must be positive".into()).into());
    }
    let report = py.detach(|| -> Result<RmwReport, Failure> {
        let len = (array_bytes / 4) as usize;
        let mut a = BigArray::zeroed(len)
            .map_err(|e| Failure::Other(format!("cannot map {array_bytes} bytes for the read-modify-write array: {e}")))?;
        let t = Instant::now();
        for (i, x) in a.iter_mut().enumerate() {
            *x = i as u32;
        }
        let fill_seconds = t.elapsed().as_secs_f64();
        let per_thread = ops.div_ceil(threads as u64);
        let part = len.div_ceil(threads);
        let t = Instant::now();
        let checksum = std::thread::scope(|scope| {
            let workers: Vec<_> = a
                .chunks_mut(part)
                .enumerate()
                .map(|(i, chunk)| scope.spawn(move || rmw_loop(chunk, per_thread, inflight, &mut Rng::new(seed + i as u64))))
                .collect();
            workers.into_iter().fold(0, |x, w| x ^ w.join().expect("read-modify-write thread"))
        });
        let seconds = t.elapsed().as_secs_f64();
        let ops = per_thread * threads as u64;
        drop(a);
        let rmw_per_s = ops as f64 / seconds;
        Ok(RmwReport { array_bytes: len as u64 * 4, ops, inflight, seed, threads, fill_seconds, seconds, rmw_per_s, checksum })
    })?;
    to_py(py, &report)
}
