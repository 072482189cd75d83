//! A namespace's data: a sparse file per namespace (`DIR/data/ns<N>.img`) that connections
//! read and write in parallel, outside the model's lock, and what a FLUSH must sync.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Mutex;

use ssdtwin_core::fsio::{self, FsError};

/// Largest single pwrite into a data file (see [`DataFile::write`]): four 4 KiB pages.
const WRITE_PIECE: usize = 16 << 10;

pub(crate) struct DataFile {
    pub(crate) file: File,
    path: PathBuf,
    /// Completed writes/punches (bumped after the data is in the file and the journal).
    pub(crate) written: AtomicU64,
    /// `written` as of the start of the last completed sync.
    synced: Mutex<u64>,
    /// A hole was punched since the last sync: needs fsync (the extent map), not fdatasync.
    punched: AtomicBool,
}

impl DataFile {
    /// Open an existing data file (the image made it) for serving.
    pub(crate) fn open(path: &Path) -> Result<DataFile, FsError> {
        let file = fsio::open_rw(path, false)?;
        // Block IO is random and the client caches what it wants: no readahead (which
        // would also fill the page cache with large folios, see `DataFile::write`).
        // SAFETY: fadvise on a descriptor we own; advisory only.
        unsafe { libc::posix_fadvise(std::os::fd::AsRawFd::as_raw_fd(&file), 0, 0, libc::POSIX_FADV_RANDOM) };
        Ok(DataFile { file, path: path.to_path_buf(), written: AtomicU64::new(0), synced: Mutex::new(0), punched: AtomicBool::new(false) })
    }

    /// Make every write completed before this call durable. Returns whether it synced (a
    /// concurrent sync that started after our writes completed already covers them).
    /// The caller must treat an error as permanent: after a failed fsync the kernel may
    /// have dropped the dirty pages, and a retried fsync would report success.
    pub(crate) fn sync(&self) -> Result<bool, FsError> {
        let want = self.written.load(Acquire);
        let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced >= want {
            return Ok(false);
        }
        let upto = self.written.load(Acquire);
        if self.punched.swap(false, AcqRel) {
            fsio::sync_all(&self.file, &self.path)?;
        } else {
            fsio::sync_data(&self.file, &self.path)?;
        }
        *synced = upto;
        Ok(true)
    }

    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// Store `data` at `offset` in pieces of at most [`WRITE_PIECE`] bytes. The page cache
    /// sizes a folio after the write that creates it, and ext4 walks every buffer of a
    /// folio on each later write into it: after 1-2 MiB writes (a prefill, qemu-img
    /// convert), random 4 KiB overwrites measured 3x slower than with small folios
    /// (ext4_block_write_begin at 71 % of the server's CPU, kernel 6.18). 64 KiB pieces
    /// (16-page folios) still left it at 24 % of the CPU of 4 KiB random overwrites;
    /// 4 KiB pieces kept every folio at one page (+19 % on those overwrites) but halved
    /// sequential 1 MiB writes; 16 KiB pieces keep most of the gain for a quarter of the
    /// extra syscalls (docs/performance.md, "where the time goes, 16 KiB write pieces").
    pub(crate) fn write(&self, data: &[u8], offset: u64) -> Result<(), FsError> {
        let mut at = 0;
        for piece in data.chunks(WRITE_PIECE) {
            fsio::write_all_at(&self.file, &self.path, piece, offset + at)?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    /// Deallocate a range (it reads as zeroes).
    pub(crate) fn punch(&self, offset: u64, len: u64) -> Result<(), FsError> {
        if len == 0 {
            return Ok(());
        }
        if !fsio::punch_hole(&self.file, &self.path, offset, len)? {
            // A file system without holes: zeroes are as good (slower, same data).
            return self.write_zeroes(offset, len);
        }
        self.punched.store(true, Release);
        Ok(())
    }

    /// Zeroes that stay allocated (WRITE_ZEROES with NO_HOLE).
    pub(crate) fn zero_allocated(&self, offset: u64, len: u64) -> Result<(), FsError> {
        if fsio::zero_range(&self.file, &self.path, offset, len)? {
            self.punched.store(true, Release); // an extent-map change as well
            return Ok(());
        }
        self.write_zeroes(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), FsError> {
        static ZEROES: [u8; 1 << 16] = [0; 1 << 16];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(ZEROES.len() as u64) as usize;
            fsio::write_all_at(&self.file, &self.path, &ZEROES[..n], offset + at)?;
            at += n as u64;
        }
        Ok(())
    }
}
