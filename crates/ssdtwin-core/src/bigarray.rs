//! Large zero-initialised `u32` arrays for the L2P and P2L maps.
//!
//! Anonymous mappings with transparent huge pages: the maps of a full 3.84 TB drive are
//! ~8 GB and are accessed at random, so 4 KiB pages would cost a TLB miss (and often a
//! page-walk cache miss) per access. Zero pages are allocated lazily by the kernel, so a
//! fresh drive costs nothing until written.

use memmap2::MmapMut;
use std::io;
use std::ops::{Deref, DerefMut};

pub struct BigArray {
    map: Option<MmapMut>,
    len: usize,
}

impl BigArray {
    /// `len` zeroed entries.
    pub fn zeroed(len: usize) -> io::Result<BigArray> {
        if len == 0 {
            return Ok(BigArray { map: None, len: 0 });
        }
        let map = MmapMut::map_anon(len * 4)?;
        #[cfg(target_os = "linux")]
        {
            // Best effort: a kernel without THP still works, only slower.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(BigArray { map: Some(map), len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries as bytes (native endianness, as saved in an image).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.map {
            Some(m) => &m[..self.len * 4],
            None => &[],
        }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.map {
            Some(m) => &mut m[..len * 4],
            None => &mut [],
        }
    }

    pub fn checksum(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.as_bytes())
    }
}

impl Deref for BigArray {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match &self.map {
            // SAFETY: the mapping is page aligned (so u32 aligned), `len * 4` bytes long and
            // lives as long as `self`.
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr() as *const u32, self.len) },
            None => &[],
        }
    }
}

impl DerefMut for BigArray {
    fn deref_mut(&mut self) -> &mut [u32] {
        let len = self.len;
        match &mut self.map {
            // SAFETY: as in `deref`, and `&mut self` gives exclusive access.
            Some(m) => unsafe { std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut u32, len) },
            None => &mut [],
        }
    }
}

impl Clone for BigArray {
    fn clone(&self) -> BigArray {
        let mut a = BigArray::zeroed(self.len).expect("mmap for clone");
        a.copy_from_slice(self);
        a
    }
}

impl std::fmt::Debug for BigArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BigArray(len={})", self.len)
    }
}

/// Hint the CPU to fetch `slot` into cache; the FTL knows its next random accesses well
/// before it needs them (buffered writes, GC scans), and overlapping those DRAM misses is
/// what makes full-scale fast-forward fast.
#[inline(always)]
pub fn prefetch(slice: &[u32], idx: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if idx < slice.len() {
            // SAFETY: prefetch never faults and the pointer is in bounds.
            unsafe {
                core::arch::x86_64::_mm_prefetch(slice.as_ptr().add(idx) as *const i8, core::arch::x86_64::_MM_HINT_T0);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (slice, idx);
    }
}
