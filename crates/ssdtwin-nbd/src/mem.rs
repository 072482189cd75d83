//! An in-memory backend: sparse, thread-safe, optionally paced.
//!
//! Storage is a table of 64 KiB chunks, each behind its own `RwLock` and allocated on
//! first write; a chunk never written (or fully trimmed/zeroed) reads as zeroes and
//! reports as a hole. Per-chunk locks let many connections work in parallel, which
//! matters when it is benchmarked against `nbdkit memory`.
//!
//! A pacing hook can delay replies, for tests of the server's pacing and for manual
//! experiments (`examples/memserve.rs --latency-us`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::backend::{Backend, Done, Export, ExportInfo, Extent, ZeroFlags};
use crate::error::Errno;
use crate::proto::{STATE_HOLE, STATE_ZERO};

const CHUNK: usize = 64 << 10;

/// One chunk of storage; `None` is a hole that reads as zeroes.
type Chunk = RwLock<Option<Box<[u8]>>>;

/// The kind of operation, as seen by a pacing hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write { fua: bool },
    Flush,
    Trim,
    WriteZeroes,
    Cache,
    BlockStatus,
}

/// Decides how long the reply to an operation is held: `(op, offset, len)`.
pub type PacingFn = dyn Fn(Op, u64, u32) -> Option<Duration> + Send + Sync;

/// Counters a test can check.
#[derive(Debug, Default)]
pub struct MemCounters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub fua_writes: AtomicU64,
    pub flushes: AtomicU64,
    pub trims: AtomicU64,
    pub zeroes: AtomicU64,
    pub caches: AtomicU64,
    pub connections_open: AtomicU64,
}

/// One in-memory export.
pub struct MemExport {
    info: ExportInfo,
    chunks: Box<[Chunk]>,
    pacing: Option<Arc<PacingFn>>,
    pub counters: MemCounters,
}

impl MemExport {
    /// A writable export of `size` bytes with every capability on, multi-conn safe
    /// (one shared store, nothing volatile), block sizes 512 / 4096 / 32 MiB.
    pub fn new(name: impl Into<String>, size: u64) -> MemExport {
        let mut info = ExportInfo::new(name, size);
        info.description = "in-memory export".into();
        info.can_flush = true;
        info.can_fua = true;
        info.can_trim = true;
        info.can_write_zeroes = true;
        // Dropping chunks is much faster than writing zeroes.
        info.can_fast_zero = true;
        info.can_multi_conn = true;
        info.can_cache = true;
        let n = size.div_ceil(CHUNK as u64) as usize;
        MemExport { info, chunks: (0..n).map(|_| RwLock::new(None)).collect(), pacing: None, counters: MemCounters::default() }
    }

    /// Change the advertised description and capabilities (the size is fixed).
    pub fn with_info(mut self, f: impl FnOnce(&mut ExportInfo)) -> MemExport {
        let size = self.info.size;
        f(&mut self.info);
        self.info.size = size;
        self
    }

    pub fn read_only(self, ro: bool) -> MemExport {
        self.with_info(|i| i.read_only = ro)
    }

    pub fn block_sizes(self, min: u32, preferred: u32, max: u32) -> MemExport {
        self.with_info(|i| {
            i.block_min = min;
            i.block_preferred = preferred;
            i.block_max = max;
        })
    }

    /// Hold replies for the duration the hook returns.
    pub fn with_pacing(mut self, f: impl Fn(Op, u64, u32) -> Option<Duration> + Send + Sync + 'static) -> MemExport {
        self.pacing = Some(Arc::new(f));
        self
    }

    /// Fixed latency for every read and write.
    pub fn with_latency(self, read: Duration, write: Duration) -> MemExport {
        self.with_pacing(move |op, _, _| match op {
            Op::Read => Some(read),
            Op::Write { .. } => Some(write),
            _ => None,
        })
    }

    pub fn info_ref(&self) -> &ExportInfo {
        &self.info
    }

    /// Bytes of memory holding data (allocated chunks).
    pub fn allocated_bytes(&self) -> u64 {
        self.chunks.iter().filter(|c| c.read().unwrap_or_else(|e| e.into_inner()).is_some()).count() as u64 * CHUNK as u64
    }

    fn done(&self, op: Op, offset: u64, len: u32) -> Done {
        match &self.pacing {
            Some(f) => match f(op, offset, len) {
                Some(d) => Done::after(d),
                None => Done::NOW,
            },
            None => Done::NOW,
        }
    }

    /// Call `f(chunk index, offset within chunk, position in the request, length)` for
    /// each chunk piece of `[offset, offset + len)`.
    fn pieces(offset: u64, len: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
        let mut pos = 0usize;
        while pos < len {
            let at = offset + pos as u64;
            let idx = (at / CHUNK as u64) as usize;
            let within = (at % CHUNK as u64) as usize;
            let n = (CHUNK - within).min(len - pos);
            f(idx, within, pos, n);
            pos += n;
        }
    }

    /// Zero a range: drop whole chunks (unless `keep` asks to stay allocated), zero
    /// parts of allocated chunks.
    fn zero_range(&self, offset: u64, len: usize, keep: bool) {
        Self::pieces(offset, len, |idx, within, _, n| {
            let mut c = self.chunks[idx].write().unwrap_or_else(|e| e.into_inner());
            if n == CHUNK && !keep {
                *c = None;
            } else if let Some(data) = c.as_mut() {
                data[within..within + n].fill(0);
            } else if keep {
                *c = Some(vec![0u8; CHUNK].into_boxed_slice());
            }
        });
    }
}

impl Export for MemExport {
    fn info(&self) -> ExportInfo {
        self.info.clone()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<Done, Errno> {
        self.counters.reads.fetch_add(1, Relaxed);
        let len = buf.len();
        Self::pieces(offset, len, |idx, within, pos, n| {
            let c = self.chunks[idx].read().unwrap_or_else(|e| e.into_inner());
            match c.as_ref() {
                Some(data) => buf[pos..pos + n].copy_from_slice(&data[within..within + n]),
                None => buf[pos..pos + n].fill(0),
            }
        });
        Ok(self.done(Op::Read, offset, len as u32))
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<Done, Errno> {
        self.counters.writes.fetch_add(1, Relaxed);
        if fua {
            self.counters.fua_writes.fetch_add(1, Relaxed);
        }
        Self::pieces(offset, data.len(), |idx, within, pos, n| {
            let mut c = self.chunks[idx].write().unwrap_or_else(|e| e.into_inner());
            let chunk = c.get_or_insert_with(|| vec![0u8; CHUNK].into_boxed_slice());
            chunk[within..within + n].copy_from_slice(&data[pos..pos + n]);
        });
        Ok(self.done(Op::Write { fua }, offset, data.len() as u32))
    }

    fn flush(&self) -> Result<Done, Errno> {
        // Memory is the "durable" store here: nothing to do but count.
        self.counters.flushes.fetch_add(1, Relaxed);
        Ok(self.done(Op::Flush, 0, 0))
    }

    fn trim(&self, offset: u64, len: u32, _fua: bool) -> Result<Done, Errno> {
        self.counters.trims.fetch_add(1, Relaxed);
        // Trim may leave any contents; zeroing keeps reads deterministic for tests.
        self.zero_range(offset, len as usize, false);
        Ok(self.done(Op::Trim, offset, len))
    }

    fn write_zeroes(&self, offset: u64, len: u32, flags: ZeroFlags) -> Result<Done, Errno> {
        self.counters.zeroes.fetch_add(1, Relaxed);
        self.zero_range(offset, len as usize, flags.no_hole);
        Ok(self.done(Op::WriteZeroes, offset, len))
    }

    fn cache(&self, offset: u64, len: u32) -> Result<Done, Errno> {
        self.counters.caches.fetch_add(1, Relaxed);
        Ok(self.done(Op::Cache, offset, len))
    }

    fn block_status(&self, offset: u64, len: u32, out: &mut Vec<Extent>) -> Result<Done, Errno> {
        // Report at chunk granularity, merging runs; the last extent may run past
        // `len` to the end of its chunk, which the spec allows.
        let end = (offset + len as u64).min(self.info.size);
        let mut at = offset;
        while at < end {
            let idx = (at / CHUNK as u64) as usize;
            let chunk_end = ((idx as u64 + 1) * CHUNK as u64).min(self.info.size);
            let hole = self.chunks[idx].read().unwrap_or_else(|e| e.into_inner()).is_none();
            let flags = if hole { STATE_HOLE | STATE_ZERO } else { 0 };
            let n = chunk_end - at;
            match out.last_mut() {
                Some(last) if last.flags == flags && last.len as u64 + n <= u32::MAX as u64 => last.len += n as u32,
                _ => {
                    if n > u32::MAX as u64 {
                        break;
                    }
                    out.push(Extent { len: n as u32, flags })
                }
            }
            at = chunk_end;
        }
        Ok(self.done(Op::BlockStatus, offset, len))
    }

    fn connection_opened(&self) {
        self.counters.connections_open.fetch_add(1, Relaxed);
    }
    fn connection_closed(&self) {
        self.counters.connections_open.fetch_sub(1, Relaxed);
    }
}

/// A set of in-memory exports; the first added is the default export.
#[derive(Default)]
pub struct MemBackend {
    exports: BTreeMap<String, Arc<MemExport>>,
    order: Vec<String>,
    default: Option<String>,
}

impl MemBackend {
    pub fn new() -> MemBackend {
        MemBackend::default()
    }

    /// One export of `size` bytes named `name`, which is also the default.
    pub fn single(name: &str, size: u64) -> MemBackend {
        MemBackend::new().with_export(MemExport::new(name, size))
    }

    pub fn with_export(mut self, e: MemExport) -> MemBackend {
        let name = e.info.name.clone();
        if self.default.is_none() {
            self.default = Some(name.clone());
        }
        if !self.exports.contains_key(&name) {
            self.order.push(name.clone());
        }
        self.exports.insert(name, Arc::new(e));
        self
    }

    /// Make `name` (or nothing) the export the empty name selects.
    pub fn with_default(mut self, name: Option<&str>) -> MemBackend {
        self.default = name.map(str::to_string);
        self
    }

    /// Direct access, e.g. to check data or counters in tests.
    pub fn export(&self, name: &str) -> Option<Arc<MemExport>> {
        self.exports.get(name).cloned()
    }
}

impl Backend for MemBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        self.order.iter().map(|n| self.exports[n].info.clone()).collect()
    }
    fn default_export(&self) -> Option<String> {
        self.default.clone()
    }
    fn open(&self, name: &str) -> Option<Arc<dyn Export>> {
        self.exports.get(name).map(|e| e.clone() as Arc<dyn Export>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_read_write_across_chunks() {
        let e = MemExport::new("m", 4 * CHUNK as u64);
        let mut buf = vec![1u8; 3 * CHUNK];
        e.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        assert_eq!(e.allocated_bytes(), 0);
        let data: Vec<u8> = (0..CHUNK + 1024).map(|i| (i % 253) as u8).collect();
        e.write(CHUNK as u64 - 512, &data, false).unwrap();
        // 512 bytes in chunk 0, all of chunk 1, 512 bytes in chunk 2.
        assert_eq!(e.allocated_bytes(), 3 * CHUNK as u64);
        let mut back = vec![0u8; data.len()];
        e.read(CHUNK as u64 - 512, &mut back).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn zeroes_and_trim_free_whole_chunks() {
        let e = MemExport::new("m", 4 * CHUNK as u64);
        e.write(0, &vec![9u8; 4 * CHUNK], false).unwrap();
        e.write_zeroes(512, (2 * CHUNK) as u32, ZeroFlags::default()).unwrap();
        // Chunk 1 is fully covered and freed; chunks 0 and 2 are partly zeroed.
        assert_eq!(e.allocated_bytes(), 3 * CHUNK as u64);
        let mut b = vec![0u8; 4 * CHUNK];
        e.read(0, &mut b).unwrap();
        assert!(b[..512].iter().all(|&x| x == 9));
        assert!(b[512..512 + 2 * CHUNK].iter().all(|&x| x == 0));
        assert!(b[512 + 2 * CHUNK..].iter().all(|&x| x == 9));
        // NO_HOLE keeps chunks allocated.
        e.write_zeroes(3 * CHUNK as u64, CHUNK as u32, ZeroFlags { no_hole: true, ..Default::default() }).unwrap();
        assert_eq!(e.allocated_bytes(), 3 * CHUNK as u64);
        e.trim(0, (4 * CHUNK) as u32, false).unwrap();
        assert_eq!(e.allocated_bytes(), 0);
    }

    #[test]
    fn block_status_merges_runs() {
        let e = MemExport::new("m", 4 * CHUNK as u64 + 4096);
        e.write(CHUNK as u64, &[1u8; 512], false).unwrap();
        e.write(2 * CHUNK as u64, &[1u8; 512], false).unwrap();
        let mut out = Vec::new();
        e.block_status(0, e.info.size as u32, &mut out).unwrap();
        assert_eq!(
            out,
            vec![
                Extent { len: CHUNK as u32, flags: STATE_HOLE | STATE_ZERO },
                Extent { len: 2 * CHUNK as u32, flags: 0 },
                Extent { len: CHUNK as u32 + 4096, flags: STATE_HOLE | STATE_ZERO },
            ]
        );
    }

    #[test]
    fn backend_lookup_and_default() {
        let b = MemBackend::new().with_export(MemExport::new("a", 4096)).with_export(MemExport::new("b", 8192));
        assert_eq!(b.default_export().as_deref(), Some("a"));
        assert_eq!(b.exports().iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(b.open("b").unwrap().info().size, 8192);
        assert!(b.open("c").is_none());
        assert!(b.with_default(None).default_export().is_none());
    }
}
