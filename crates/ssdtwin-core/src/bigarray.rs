//! Large zero-initialised `u32` arrays for the L2P and P2L maps.
//!
//! Anonymous mappings with transparent huge pages: the maps of a full 3.84 TB drive are
//! ~8 GB and are accessed at random, so 4 KiB pages would cost a TLB miss (and often a
//! page-walk cache miss) per access. Zero pages are allocated lazily by the kernel, so a
//! fresh drive costs nothing until written.

use memmap2::MmapMut;
use std::io;
use std::ops::{Deref, DerefMut, Index, IndexMut, Range};

/// The entries live at `ptr` (`len` of them): in `map` when this array owns them, in
/// another array's mapping for an alias ([`BigArray::alias`]).
pub struct BigArray {
    /// The mapping the entries live in, when this array owns them: held to unmap on drop.
    #[allow(dead_code)]
    map: Option<MmapMut>,
    ptr: *mut u32,
    len: usize,
}

// SAFETY: an owning array is a plain heap-like buffer. Aliases are made only by
// `BigArray::alias`, whose contract (disjoint entries per thread, owner outlives alias)
// is what makes sending them to other threads sound.
unsafe impl Send for BigArray {}
unsafe impl Sync for BigArray {}

impl BigArray {
    /// `len` zeroed entries.
    pub fn zeroed(len: usize) -> io::Result<BigArray> {
        if len == 0 {
            return Ok(BigArray { map: None, ptr: std::ptr::NonNull::dangling().as_ptr(), len: 0 });
        }
        let mut map = MmapMut::map_anon(len * 4)?;
        #[cfg(target_os = "linux")]
        {
            // Best effort: a kernel without THP still works, only slower.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        let ptr = map.as_mut_ptr() as *mut u32;
        Ok(BigArray { map: Some(map), ptr, len })
    }

    /// A second handle on the same entries (fast-forward gives each thread one).
    ///
    /// # Safety
    /// While aliases exist, every entry is read and written through one handle only (the
    /// FTL's partitions own disjoint logical IUs and superblocks), no handle is used
    /// through `Deref`/`DerefMut` (which would cover all entries), and `self` outlives
    /// every alias. [`BigArray::prefault`] reads and writes no entry, so any handle may
    /// call it at any time.
    pub unsafe fn alias(&self) -> BigArray {
        BigArray { map: None, ptr: self.ptr, len: self.len }
    }

    /// Hint the CPU to fetch entry `idx` into cache (no-op past the end).
    #[inline(always)]
    pub fn prefetch(&self, idx: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            if idx < self.len {
                // SAFETY: prefetch never faults and the pointer is in bounds.
                unsafe {
                    core::arch::x86_64::_mm_prefetch(self.ptr.add(idx) as *const i8, core::arch::x86_64::_MM_HINT_T0);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = idx;
        }
    }

    /// Fault in the pages under entries `range` (clamped to the array) zeroed and writable,
    /// as a first write to each would, without writing any entry (`MADV_POPULATE_WRITE`):
    /// the entries' first writes then take no page fault. Entries keep their values, so this
    /// is safe beside threads that read and write them. False when the kernel cannot
    /// (before Linux 5.14, or not Linux), so the caller can stop asking.
    pub fn prefault(&self, range: Range<usize>) -> bool {
        let (start, end) = (range.start.min(self.len), range.end.min(self.len));
        if start >= end {
            return true;
        }
        #[cfg(target_os = "linux")]
        {
            const PAGE: usize = 4096;
            let addr = self.ptr as usize + start * 4;
            let aligned = addr & !(PAGE - 1);
            let len = self.ptr as usize + end * 4 - aligned;
            // SAFETY: [aligned, aligned + len) lies in this array's mapping (the mapping is
            // page aligned, so rounding down to a page stays inside it); POPULATE_WRITE
            // changes no byte of it.
            unsafe { libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) == 0 }
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries as bytes (native endianness, as saved in an image).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised u32s for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len * 4) }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len * 4) }
    }

    pub fn checksum(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.as_bytes())
    }
}

impl Deref for BigArray {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        // SAFETY: the mapping is page aligned (so u32 aligned), `len * 4` bytes long and
        // lives as long as `self` (or, for an alias, as its owner, by `alias`'s contract).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for BigArray {
    fn deref_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `deref`, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

// Element and range access without a reference to the whole array, so handles made by
// `alias` touch only the entries they use (the FTL indexes its maps only this way).
impl Index<usize> for BigArray {
    type Output = u32;
    #[inline(always)]
    fn index(&self, i: usize) -> &u32 {
        assert!(i < self.len, "index {i} out of range for a map of {}", self.len);
        // SAFETY: in bounds; see `deref`.
        unsafe { &*self.ptr.add(i) }
    }
}

impl IndexMut<usize> for BigArray {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut u32 {
        assert!(i < self.len, "index {i} out of range for a map of {}", self.len);
        // SAFETY: in bounds; `&mut self` (and `alias`'s contract for aliases) gives exclusive
        // access to this entry.
        unsafe { &mut *self.ptr.add(i) }
    }
}

impl Index<Range<usize>> for BigArray {
    type Output = [u32];
    #[inline]
    fn index(&self, r: Range<usize>) -> &[u32] {
        assert!(r.start <= r.end && r.end <= self.len, "range {r:?} out of range for a map of {}", self.len);
        // SAFETY: in bounds; see `deref`.
        unsafe { std::slice::from_raw_parts(self.ptr.add(r.start), r.end - r.start) }
    }
}

impl IndexMut<Range<usize>> for BigArray {
    #[inline]
    fn index_mut(&mut self, r: Range<usize>) -> &mut [u32] {
        assert!(r.start <= r.end && r.end <= self.len, "range {r:?} out of range for a map of {}", self.len);
        // SAFETY: in bounds; see `index_mut`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.end - r.start) }
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

/// Which of the 4 KiB pages under the entries are resident (`mincore`), for tests of what
/// touches memory.
#[cfg(all(test, target_os = "linux"))]
impl BigArray {
    pub(crate) fn resident_pages(&self) -> Vec<bool> {
        let pages = (self.len * 4).div_ceil(4096);
        let mut v = vec![0u8; pages];
        // SAFETY: the mapping is page aligned and `pages` pages long; `v` has one byte per page.
        let rc = unsafe { libc::mincore(self.ptr as *mut libc::c_void, self.len * 4, v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        v.iter().map(|b| b & 1 == 1).collect()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::BigArray;

    #[test]
    fn prefault_makes_pages_resident_and_keeps_every_entry() {
        let entries_per_page = 1024;
        let mut a = BigArray::zeroed(64 * entries_per_page).unwrap();
        a[5] = 7;
        a[40 * entries_per_page + 3] = 9;
        // Entries 10 pages in, up to the middle of page 20 (the range need not be aligned).
        if !a.prefault(10 * entries_per_page + 100..20 * entries_per_page + 500) {
            eprintln!("this kernel cannot prefault (MADV_POPULATE_WRITE): nothing to check");
            return;
        }
        let resident = a.resident_pages();
        assert!(resident[10..=20].iter().all(|&r| r), "pages 10-20 resident after prefault: {resident:?}");
        assert!(resident[0], "page 0 was written");
        assert_eq!((a[5], a[40 * entries_per_page + 3]), (7, 9));
        assert!(a.iter().enumerate().all(|(i, &v)| v == 0 || i == 5 || i == 40 * entries_per_page + 3));
        // Empty and out-of-range requests are no-ops that succeed.
        assert!(a.prefault(3..3) && a.prefault(a.len()..a.len() + 10));
    }
}
