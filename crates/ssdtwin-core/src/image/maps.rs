//! The FTL maps on disk: saved sparse (all-zero 1 MiB runs left as holes) with their xxh3
//! checksums, loaded lazily through [`MapStore`] reading only the files' data, from files
//! held open since the image was opened (see [`DiskMaps`]).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

use super::{ImageError, MapsOnDisk};
use crate::bigarray::BigArray;
use crate::fsio::{self, Entry, FsError};
use crate::nvme::{MapError, MapStore};

/// Write `a` to `path`, leaving all-zero 1 MiB runs as holes; returns the xxh3 checksum of
/// the logical contents.
pub(super) fn save_array(a: &BigArray, path: &Path) -> Result<u64, FsError> {
    let mut f = fsio::create(path)?;
    let bytes = a.as_bytes();
    let mut h = Xxh3::new();
    const CHUNK: usize = 1 << 20;
    let mut pos = 0usize;
    while pos < bytes.len() {
        let end = (pos + CHUNK).min(bytes.len());
        let chunk = &bytes[pos..end];
        h.update(chunk);
        if all_zero(chunk) {
            f.seek(SeekFrom::Current(chunk.len() as i64)).map_err(|e| FsError::new(path, e))?;
        } else {
            fsio::write_all(&mut f, path, chunk)?;
        }
        pos = end;
    }
    fsio::set_len(&f, path, bytes.len() as u64)?;
    fsio::sync_all(&f, path)?;
    Ok(h.digest())
}

/// Whether `bytes` are all zero. An OR over each 4 KiB compiles to vector instructions;
/// `iter().all` stops at the first nonzero byte but tests one byte at a time, which made
/// saving the 8 GB of all-zero maps of a fresh full-size drive take 4-5 s.
pub(super) fn all_zero(bytes: &[u8]) -> bool {
    bytes.chunks(4096).all(|page| page.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

/// Open a map file of a generation: it must be a regular file (never a link).
pub(super) fn open_map(path: &Path) -> Result<File, ImageError> {
    let damaged = |reason: &str| ImageError::Damaged { path: path.to_path_buf(), reason: reason.into() };
    match fsio::entry(path)? {
        Entry::File { .. } => {}
        Entry::Missing => return Err(damaged("missing")),
        _ => return Err(damaged("not a regular file")),
    }
    let f = match fsio::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(damaged("missing")),
        Err(e) => return Err(e.into()),
    };
    // Replaced by something else between the look and the open.
    if !f.metadata().map_err(|e| FsError::new(path, e))?.is_file() {
        return Err(damaged("not a regular file"));
    }
    Ok(f)
}

/// Load `len` entries from `path` (a test's shorthand for [`load_open_array`]).
#[cfg(test)]
pub(super) fn load_array(path: &Path, len: usize) -> Result<(BigArray, u64), MapError> {
    let f = fsio::open_read(path)?;
    load_open_array(&f, path, len)
}

/// Load `len` entries from `f`, the open file `path`; returns the array and the checksum of
/// what was read.
///
/// Only the file's data is read: its holes (all-zero runs `save_array` left unwritten) stay
/// untouched zero pages of the array and are hashed from a zero buffer, so a sparse map
/// costs neither the time to copy its zeros nor the memory to hold them (a fresh full-size
/// CM6 has 8 GB of maps, all holes).
pub(super) fn load_open_array(file: &File, path: &Path, len: usize) -> Result<(BigArray, u64), MapError> {
    let damaged = |reason: String| MapError::Damaged { path: path.to_path_buf(), reason };
    // Reads through `&File` (its offset is set before every read, so a second load of the
    // same file starts over correctly).
    let mut f = file;
    let flen = f.metadata().map_err(|e| FsError::new(path, e))?.len();
    if flen != (len * 4) as u64 {
        return Err(damaged(format!("{flen} bytes, expected {}", len * 4)));
    }
    let mut a = BigArray::zeroed(len).map_err(|e| FsError::new(path, e))?;
    let mut h = Xxh3::new();
    let bytes = a.as_bytes_mut();
    const CHUNK: usize = 1 << 22;
    static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
    let mut pos = 0usize;
    while pos < bytes.len() {
        let (data, hole) = fsio::next_data(f, pos as u64, bytes.len() as u64)
            .map_err(|e| FsError::new(path, e))?
            .map_or((bytes.len(), bytes.len()), |(d, h)| (d as usize, h as usize));
        while pos < data {
            let n = (data - pos).min(ZEROS.len());
            h.update(&ZEROS[..n]);
            pos += n;
        }
        if pos < hole {
            f.seek(SeekFrom::Start(pos as u64)).map_err(|e| FsError::new(path, e))?;
        }
        while pos < hole {
            let end = (pos + CHUNK).min(hole);
            f.read_exact(&mut bytes[pos..end]).map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => damaged(e.to_string()),
                _ => FsError::new(path, e).into(),
            })?;
            h.update(&bytes[pos..end]);
            pos = end;
        }
    }
    Ok((a, h.digest()))
}

/// The maps of one generation, loaded when the controller first needs them.
///
/// The files are opened when the image is opened and held open until the maps are loaded:
/// a writer in another process (a served image) removes a generation once its next commit
/// is durable, and a read-only view opened at that generation loads the maps later, maybe
/// much later (`ssdtwin check`, a scratch run, a Python `Drive` kept open). Removing a
/// generation only unlinks names; the open files keep their contents, so the view loads the
/// maps of the generation it opened, never a missing file or another generation's maps.
/// A generation's map files are never rewritten in place (each commit writes new files or
/// hard-links unchanged ones), so what is held is what was committed.
pub(super) struct DiskMaps {
    l2p: (PathBuf, File),
    p2l: (PathBuf, File),
    sums: MapsOnDisk,
}

/// The map files of one generation, opened (and so held against its removal) before its
/// checksums are known: the first step of a [`DiskMaps`].
pub(super) struct PinnedMaps {
    l2p: (PathBuf, File),
    p2l: (PathBuf, File),
}

impl PinnedMaps {
    /// Open the map files of the generation in `gdir`.
    pub(super) fn open(gdir: &Path) -> Result<PinnedMaps, ImageError> {
        let pin = |name: &str| -> Result<(PathBuf, File), ImageError> {
            let p = gdir.join(name);
            let f = open_map(&p)?;
            Ok((p, f))
        };
        Ok(PinnedMaps { l2p: pin("l2p.bin")?, p2l: pin("p2l.bin")? })
    }

    /// The maps, committed with checksums `sums`.
    pub(super) fn with_sums(self, sums: MapsOnDisk) -> DiskMaps {
        DiskMaps { l2p: self.l2p, p2l: self.p2l, sums }
    }
}

impl MapStore for DiskMaps {
    fn location(&self) -> PathBuf {
        self.l2p.0.parent().unwrap_or(&self.l2p.0).to_path_buf()
    }

    fn load_maps(&self, l2p_len: usize, p2l_len: usize) -> Result<(BigArray, BigArray), MapError> {
        let load = |(path, file): &(PathBuf, File), len: usize, want: &str| -> Result<BigArray, MapError> {
            let (a, sum) = load_open_array(file, path, len)?;
            if format!("{sum:016x}") != want {
                return Err(MapError::Damaged {
                    path: path.to_path_buf(),
                    reason: format!("checksum {sum:016x} does not match the committed {want}"),
                });
            }
            Ok(a)
        };
        Ok((load(&self.l2p, l2p_len, &self.sums.l2p_xxh3)?, load(&self.p2l, p2l_len, &self.sums.p2l_xxh3)?))
    }
}
