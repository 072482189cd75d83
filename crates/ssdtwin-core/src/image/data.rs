//! The namespaces' data files (`data/ns<N>.img`, sparse, written by the NBD server): their
//! paths and sizes, and dropping a namespace's data atomically with the command that drops
//! it (renamed `.dropped`, deleted by the commit, settled at the next writable open).

use std::fs;
use std::io;
use std::path::PathBuf;

use super::{Image, ImageError, DATA};
use crate::fsio::{self, Entry, FsError};
use crate::nvme::{self, NsId};

/// Suffix of a data file dropped by a command not yet committed (see [`Image::drop_data`]).
const DROPPED: &str = ".dropped";

/// `ns<N>.img` → N.
fn data_file_nsid(name: &str) -> Option<u32> {
    name.strip_prefix("ns")?.strip_suffix(".img")?.parse().ok()
}

impl Image {
    /// `DIR/data`: one sparse file per namespace, written by the NBD server.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join(DATA)
    }

    pub fn data_path(&self, nsid: u32) -> PathBuf {
        self.data_dir().join(format!("ns{nsid}.img"))
    }

    /// Drop the data of namespace `nsid` (`NSID_ALL`: every namespace): after Namespace
    /// Management delete, Format NVM (a purge: the data is gone, not just unmapped) and
    /// before a create reuses the NSID. Call it after the controller command succeeded.
    ///
    /// The drop becomes durable with the command, never before or after it: the files are
    /// renamed to `ns<N>.img.dropped` now, deleted once the next commit has recorded the
    /// command, and renamed back by the next writer if the process died before that commit
    /// (the committed state still has their data).
    pub fn drop_data(&mut self, nsid: u32) -> Result<(), ImageError> {
        self.writable()?;
        self.data_files.retain(|&id, _| !(nsid == nvme::NSID_ALL || id == nsid));
        let dd = self.data_dir();
        if !fsio::real_dir(&dd)? {
            return Ok(());
        }
        let mut moved = false;
        for e in fs::read_dir(&dd).map_err(|e| FsError::new(&dd, e))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let id = data_file_nsid(&name);
            if id.is_some() && (nsid == nvme::NSID_ALL || id == Some(nsid)) {
                let aside = dd.join(format!("{name}{DROPPED}"));
                if !matches!(fsio::entry(&aside)?, Entry::Missing) {
                    let r = fsio::remove_file(&aside);
                    self.guard(r)?;
                }
                let r = fsio::rename(&e.path(), &aside);
                self.guard(r)?;
                moved = true;
            }
        }
        if moved {
            let r = fsio::sync_dir(&dd);
            self.guard(r)?;
        }
        Ok(())
    }

    /// After a commit: delete the data files it dropped (best effort; the next writer
    /// finishes what a crash interrupts).
    pub(super) fn delete_dropped(&self) {
        for (path, _) in self.dropped_files() {
            let _ = fsio::remove_file(&path);
        }
    }

    /// `(path, nsid)` of every `data/ns<N>.img.dropped`.
    fn dropped_files(&self) -> Vec<(PathBuf, u32)> {
        let dd = self.data_dir();
        let Ok(rd) = fs::read_dir(&dd) else { return Vec::new() };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let id = data_file_nsid(name.strip_suffix(DROPPED)?)?;
                Some((e.path(), id))
            })
            .collect()
    }

    /// A writer opening the image settles drops a dead process left half done: a file whose
    /// namespace the committed state still records goes back (the command never became
    /// durable); any other is deleted (it did).
    pub(super) fn settle_dropped(&mut self) -> Result<(), ImageError> {
        let dropped = self.dropped_files();
        if dropped.is_empty() {
            return Ok(());
        }
        for (path, nsid) in dropped {
            let live = self.data_path(nsid);
            if self.data_files.contains_key(&nsid) && matches!(fsio::entry(&live)?, Entry::Missing) {
                fsio::rename(&path, &live)?;
            } else {
                fsio::remove_file(&path)?;
            }
        }
        fsio::sync_dir(&self.data_dir())?;
        Ok(())
    }

    /// Bring `DIR/data` in line with the namespace table before serving (and commit the
    /// table of data files if it changed).
    /// Files of namespaces that no longer exist are removed; an attached namespace without
    /// a recorded file gets a sparse one of its size. A recorded file that is missing, is
    /// not a regular file or has the wrong size is refused: the image says its data is
    /// there, and serving zeroes instead would be silent data loss.
    /// Returns (nsid, path) of the attached namespaces.
    pub fn prepare_data_files(&mut self) -> Result<Vec<(u32, PathBuf)>, ImageError> {
        self.writable()?;
        let recorded_before = self.data_files.clone();
        let dd = self.data_dir();
        if !fsio::real_dir(&dd)? {
            self.guard(fsio::create_dir(&dd))?;
            self.guard(fsio::sync_dir(&self.dir))?;
        }
        for e in fs::read_dir(&dd).map_err(|e| FsError::new(&dd, e))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(id) = data_file_nsid(&name) {
                if self.ctrl.namespace(NsId(id)).is_err() {
                    self.guard(fsio::remove_file(&e.path()))?;
                    self.data_files.remove(&id);
                }
            }
        }
        let attached: Vec<(u32, u64)> = self.ctrl.namespaces().filter(|n| n.attached).map(|n| (n.nsid, n.bytes())).collect();
        let mut out = Vec::new();
        for (nsid, bytes) in attached {
            let p = self.data_path(nsid);
            let recorded = self.data_files.get(&nsid).copied();
            match (fsio::entry(&p)?, recorded) {
                (Entry::File { bytes: len }, _) if len == bytes => {}
                (Entry::Missing, None) => {
                    let f = self.guard(fsio::open_rw(&p, true))?;
                    self.guard(fsio::set_len(&f, &p, bytes))?;
                    self.guard(fsio::sync_all(&f, &p))?;
                }
                (Entry::Missing, Some(_)) => {
                    return Err(ImageError::DataFile {
                        path: p,
                        reason: format!("missing: namespace {nsid}'s data was stored there by an earlier `ssdtwin serve`; restore the file, or `ssdtwin nvme format DIR -n {nsid}` to start the namespace empty"),
                    })
                }
                (Entry::File { bytes: len }, _) => {
                    return Err(ImageError::DataFile {
                        path: p,
                        reason: format!("{len} bytes, but namespace {nsid} has {bytes}; restore the right file, or remove it and `ssdtwin nvme format DIR -n {nsid}` to start the namespace empty"),
                    })
                }
                (Entry::Symlink, _) => return Err(FsError::new(&p, io::Error::from_raw_os_error(libc::ELOOP)).into()),
                (_, _) => return Err(ImageError::DataFile { path: p, reason: "not a regular file".into() }),
            }
            self.data_files.insert(nsid, bytes);
            out.push((nsid, p));
        }
        self.guard(fsio::sync_dir(&dd))?;
        if self.data_files != recorded_before {
            self.commit()?;
        }
        Ok(out)
    }
}
