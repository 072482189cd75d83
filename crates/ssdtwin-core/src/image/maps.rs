//! The FTL maps on disk: saved sparse (all-zero 1 MiB runs left as holes) with their xxh3
//! checksums, loaded lazily through [`MapStore`] reading only the files' data.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

use super::MapsOnDisk;
use crate::bigarray::BigArray;
use crate::fsio::{self, FsError};
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

/// Load `len` entries from `path`; returns the array and the checksum of what was read.
///
/// Only the file's data is read: its holes (all-zero runs `save_array` left unwritten) stay
/// untouched zero pages of the array and are hashed from a zero buffer, so a sparse map
/// costs neither the time to copy its zeros nor the memory to hold them (a fresh full-size
/// CM6 has 8 GB of maps, all holes).
pub(super) fn load_array(path: &Path, len: usize) -> Result<(BigArray, u64), MapError> {
    let damaged = |reason: String| MapError::Damaged { path: path.to_path_buf(), reason };
    let mut f = match fsio::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(damaged("missing".into())),
        Err(e) => return Err(e.into()),
    };
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
        let (data, hole) = fsio::next_data(&f, pos as u64, bytes.len() as u64)
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
pub(super) struct DiskMaps {
    pub(super) l2p: PathBuf,
    pub(super) p2l: PathBuf,
    pub(super) sums: MapsOnDisk,
}

impl MapStore for DiskMaps {
    fn location(&self) -> PathBuf {
        self.l2p.parent().unwrap_or(&self.l2p).to_path_buf()
    }

    fn load_maps(&self, l2p_len: usize, p2l_len: usize) -> Result<(BigArray, BigArray), MapError> {
        let load = |path: &Path, len: usize, want: &str| -> Result<BigArray, MapError> {
            let (a, sum) = load_array(path, len)?;
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
