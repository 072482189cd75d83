//! The serving crate's error type, and the one place controller errors become NBD errnos.

use std::io;

use ssdtwin_core::fsio::FsError;
use ssdtwin_core::image::ImageError;
use ssdtwin_core::nvme::{self, Status};
use ssdtwin_nbd::Errno;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Nvme(#[from] nvme::Error),
    #[error("{0}")]
    Config(String),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Server(#[from] ssdtwin_nbd::Error),
    /// A write or fsync of the data or the journal failed earlier (sticky).
    #[error("{0}")]
    Failed(String),
}

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ServeError {
    let what = what.into();
    move |source| ServeError::Io { what, source }
}

/// The one place controller errors become NBD errors (proto.md "Error values"): LBAs out
/// of range are EINVAL, or ENOSPC for commands that write; a write-protected namespace is
/// EPERM; anything else (which the server's own validation should make impossible) EIO.
pub fn nbd_errno(e: &nvme::Error, writes: bool) -> Errno {
    match e {
        nvme::Error::Status { status: Status::LbaOutOfRange | Status::CapacityExceeded, .. } => {
            if writes {
                Errno::NoSpc
            } else {
                Errno::Inval
            }
        }
        nvme::Error::Status { status: Status::NamespaceWriteProtected, .. } => Errno::Perm,
        _ => Errno::Io,
    }
}
