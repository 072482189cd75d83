//! File-system calls of the drive image, its journal and the served data files.
//!
//! Every call here:
//! * never follows a symbolic link inside an image (`O_NOFOLLOW`, and `symlink_metadata` for
//!   directories): a link planted as `data/ns1.img`, `LOCK` or `CURRENT.tmp` would otherwise
//!   send the twin's writes outside the image;
//! * names the path in its error ([`FsError`]);
//! * passes through the fault injector ([`crate::faults`]) in simulation builds, so the
//!   deterministic simulation harness can fail or "crash" any of them. In normal builds
//!   the check compiles to nothing.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::faults::{self, Op};

/// A failed file-system call, with the path it was about.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", path.display(), describe(source))]
pub struct FsError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl FsError {
    pub fn new(path: &Path, source: io::Error) -> FsError {
        FsError { path: path.to_path_buf(), source }
    }

    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }

    /// The OS error number, if there is one (ENOSPC, EIO …).
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// The OS message, with what ELOOP means here (a symbolic link we refuse to follow).
fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "is a symbolic link; an image never follows links (remove it)".into(),
        Some(libc::EISDIR) => "is a directory, expected a file".into(),
        _ => e.to_string(),
    }
}

pub type Result<T> = std::result::Result<T, FsError>;

fn check(op: Op, path: &Path) -> Result<()> {
    faults::check(op, path).map_err(|e| FsError::new(path, e))
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> FsError + '_ {
    move |e| FsError::new(path, e)
}

fn nofollow() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

/// Open an existing file for reading.
pub fn open_read(path: &Path) -> Result<File> {
    check(Op::Open, path)?;
    nofollow().read(true).open(path).map_err(at(path))
}

/// Open (and with `create`, create) a file for reading and writing, never truncating it.
pub fn open_rw(path: &Path, create: bool) -> Result<File> {
    check(Op::Open, path)?;
    nofollow().read(true).write(true).create(create).truncate(false).open(path).map_err(at(path))
}

/// Create a file (or truncate an existing regular file) for writing.
pub fn create(path: &Path) -> Result<File> {
    check(Op::Create, path)?;
    nofollow().write(true).create(true).truncate(true).open(path).map_err(at(path))
}

/// Read a whole file.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    let mut f = open_read(path)?;
    let mut v = Vec::new();
    f.read_to_end(&mut v).map_err(at(path))?;
    Ok(v)
}

/// Read a whole text file.
pub fn read_to_string(path: &Path) -> Result<String> {
    let bytes = read(path)?;
    String::from_utf8(bytes).map_err(|_| FsError::new(path, io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text")))
}

/// Write all of `bytes` to `f` (at its cursor).
pub fn write_all(f: &mut File, path: &Path, bytes: &[u8]) -> Result<()> {
    check(Op::Write, path)?;
    f.write_all(bytes).map_err(at(path))
}

/// Write all of `bytes` at `offset` of `f`.
pub fn write_all_at(f: &File, path: &Path, bytes: &[u8], offset: u64) -> Result<()> {
    check(Op::Write, path)?;
    f.write_all_at(bytes, offset).map_err(at(path))
}

/// Set the length of `f`.
pub fn set_len(f: &File, path: &Path, len: u64) -> Result<()> {
    check(Op::Write, path)?;
    f.set_len(len).map_err(at(path))
}

/// fsync `f` (data and metadata).
pub fn sync_all(f: &File, path: &Path) -> Result<()> {
    check(Op::Sync, path)?;
    f.sync_all().map_err(at(path))
}

/// fdatasync `f`.
pub fn sync_data(f: &File, path: &Path) -> Result<()> {
    check(Op::Sync, path)?;
    f.sync_data().map_err(at(path))
}

/// Create `path` with `bytes` and fsync it.
pub fn write_file_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = create(path)?;
    write_all(&mut f, path, bytes)?;
    sync_all(&f, path)
}

/// fsync a directory (after creating, renaming or removing entries in it).
pub fn sync_dir(dir: &Path) -> Result<()> {
    check(Op::Sync, dir)?;
    let f = nofollow().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC).open(dir).map_err(at(dir))?;
    f.sync_all().map_err(at(dir))
}

/// Atomically replace `to` with `from`.
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    check(Op::Rename, to)?;
    fs::rename(from, to).map_err(at(to))
}

/// A second name for `from` (the target must not exist).
pub fn hard_link(from: &Path, to: &Path) -> Result<()> {
    check(Op::Create, to)?;
    fs::hard_link(from, to).map_err(at(from))
}

pub fn create_dir(path: &Path) -> Result<()> {
    check(Op::Create, path)?;
    fs::create_dir(path).map_err(at(path))
}

/// Remove a file (or a symbolic link itself, never its target).
pub fn remove_file(path: &Path) -> Result<()> {
    check(Op::Remove, path)?;
    fs::remove_file(path).map_err(at(path))
}

/// Remove a directory tree (`remove_dir_all` does not follow links).
pub fn remove_dir_all(path: &Path) -> Result<()> {
    check(Op::Remove, path)?;
    fs::remove_dir_all(path).map_err(at(path))
}

/// What is at `path`, without following a link there.
pub enum Entry {
    Missing,
    File { bytes: u64 },
    Dir,
    Symlink,
    Other,
}

pub fn entry(path: &Path) -> Result<Entry> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Ok(Entry::Symlink),
        Ok(m) if m.is_dir() => Ok(Entry::Dir),
        Ok(m) if m.is_file() => Ok(Entry::File { bytes: m.len() }),
        Ok(_) => Ok(Entry::Other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Entry::Missing),
        Err(e) => Err(FsError::new(path, e)),
    }
}

/// `path` must be a real directory (not a link to one); `Ok(false)` if it does not exist.
pub fn real_dir(path: &Path) -> Result<bool> {
    match entry(path)? {
        Entry::Missing => Ok(false),
        Entry::Dir => Ok(true),
        Entry::Symlink => Err(FsError::new(path, io::Error::from_raw_os_error(libc::ELOOP))),
        _ => Err(FsError::new(path, io::Error::from_raw_os_error(libc::ENOTDIR))),
    }
}

/// The next run of data in `f` at or after byte `pos`, clipped to `end`: `Some((start, stop))`
/// with `pos <= start < stop <= end`, or `None` when only holes are left before `end`
/// (`SEEK_DATA`/`SEEK_HOLE`). Where the file system cannot say, everything is data.
pub fn next_data(f: &File, pos: u64, end: u64) -> io::Result<Option<(u64, u64)>> {
    use std::os::fd::AsRawFd;
    if pos >= end {
        return Ok(None);
    }
    let seek = |from: u64, whence: libc::c_int| -> io::Result<Option<u64>> {
        // SAFETY: lseek on an open descriptor; it moves only the file offset, which every
        // reader here sets (or passes) explicitly.
        let r = unsafe { libc::lseek(f.as_raw_fd(), from as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None), // no data (or no hole) at or after `from`
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(Some(from)),
            _ => Err(e),
        }
    };
    let Some(start) = seek(pos, libc::SEEK_DATA)?.filter(|&d| d < end) else { return Ok(None) };
    let stop = seek(start, libc::SEEK_HOLE)?.filter(|&h| h > start).unwrap_or(end).min(end);
    Ok(Some((start, stop)))
}

/// Deallocate `[offset, offset + len)` of `f` (it reads as zeroes). `Ok(false)` when the file
/// system cannot punch holes (the caller writes zeroes instead).
pub fn punch_hole(f: &File, path: &Path, offset: u64, len: u64) -> Result<bool> {
    fallocate(f, path, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len)
}

/// Zero `[offset, offset + len)` of `f`, keeping it allocated. `Ok(false)` when unsupported.
pub fn zero_range(f: &File, path: &Path, offset: u64, len: u64) -> Result<bool> {
    fallocate(f, path, libc::FALLOC_FL_ZERO_RANGE, offset, len)
}

fn fallocate(f: &File, path: &Path, mode: libc::c_int, offset: u64, len: u64) -> Result<bool> {
    use std::os::fd::AsRawFd;
    check(Op::Write, path)?;
    // SAFETY: fallocate on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as libc::off_t, len as libc::off_t) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return Ok(false);
    }
    Err(FsError::new(path, e))
}
