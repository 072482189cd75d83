//! Error types: wire-format errors, NBD error values for replies, and server errors.

use std::io;

/// A message on the wire does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("message truncated")]
    Truncated,
    #[error("bad magic number")]
    BadMagic,
    #[error("string longer than 4096 bytes")]
    StringTooLong,
    #[error("unexpected trailing data")]
    TrailingData,
    #[error("{0}")]
    Invalid(&'static str),
}

/// The error values NBD allows in a reply (proto.md "Error values").
///
/// Backends return these; the server puts `code()` on the wire. Anything else a
/// backend might want to say must be mapped to one of them (see `From<io::Error>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u32)]
pub enum Errno {
    /// Write or trim on a read-only export.
    #[error("EPERM: operation not permitted")]
    Perm = 1,
    #[error("EIO: input/output error")]
    Io = 5,
    /// Spec: servers SHOULD NOT return this if at all possible.
    #[error("ENOMEM: cannot allocate memory")]
    NoMem = 12,
    /// Misaligned, beyond the end (read/trim/cache/block status), unknown command or flag.
    #[error("EINVAL: invalid argument")]
    Inval = 22,
    /// Write beyond the end; also the mapping of EDQUOT and EFBIG.
    #[error("ENOSPC: no space left on device")]
    NoSpc = 28,
    /// Structured READ larger than the maximum payload.
    #[error("EOVERFLOW: value too large")]
    Overflow = 75,
    /// Only for WRITE_ZEROES with FAST_ZERO that cannot be done faster than a write.
    #[error("ENOTSUP: operation not supported")]
    NotSup = 95,
    /// The server is shutting down; the client must soft-disconnect.
    #[error("ESHUTDOWN: server is shutting down")]
    Shutdown = 108,
}

impl Errno {
    /// The value sent on the wire.
    pub fn code(self) -> u32 {
        self as u32
    }
    /// Parse a wire value; unknown values read as EINVAL, as the spec tells clients to.
    pub fn from_code(code: u32) -> Errno {
        match code {
            1 => Errno::Perm,
            5 => Errno::Io,
            12 => Errno::NoMem,
            22 => Errno::Inval,
            28 => Errno::NoSpc,
            75 => Errno::Overflow,
            95 => Errno::NotSup,
            108 => Errno::Shutdown,
            _ => Errno::Inval,
        }
    }
}

impl From<io::Error> for Errno {
    /// Map an OS error from a file-backed export to the closest NBD value.
    fn from(e: io::Error) -> Errno {
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EROFS) => Errno::Perm,
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => Errno::NoSpc,
            Some(libc::EINVAL) => Errno::Inval,
            Some(libc::ENOMEM) => Errno::NoMem,
            Some(libc::EOVERFLOW) => Errno::Overflow,
            Some(libc::EOPNOTSUPP) => Errno::NotSup,
            Some(libc::ESHUTDOWN) => Errno::Shutdown,
            _ => Errno::Io,
        }
    }
}

/// Errors from setting up or running a server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("export {name:?} is not valid: {reason}")]
    InvalidExport { name: String, reason: String },
    #[error("no listener configured (call listen_tcp or listen_unix first)")]
    NoListener,
    #[error("unix socket path {0:?} is in use by a live server")]
    SocketInUse(std::path::PathBuf),
    #[error("listen on {0}: address already in use (another server?)")]
    AddrInUse(std::net::SocketAddr),
    #[error("unix socket group {0:?}: no such group")]
    UnknownGroup(String),
    #[error("{0}")]
    Tls(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_spec() {
        let all = [
            (Errno::Perm, 1),
            (Errno::Io, 5),
            (Errno::NoMem, 12),
            (Errno::Inval, 22),
            (Errno::NoSpc, 28),
            (Errno::Overflow, 75),
            (Errno::NotSup, 95),
            (Errno::Shutdown, 108),
        ];
        for (e, c) in all {
            assert_eq!(e.code(), c);
            assert_eq!(Errno::from_code(c), e);
        }
        assert_eq!(Errno::from_code(38), Errno::Inval);
    }

    #[test]
    fn io_mapping() {
        assert_eq!(Errno::from(io::Error::from_raw_os_error(libc::EDQUOT)), Errno::NoSpc);
        assert_eq!(Errno::from(io::Error::from_raw_os_error(libc::EFBIG)), Errno::NoSpc);
        assert_eq!(Errno::from(io::Error::from_raw_os_error(libc::EROFS)), Errno::Perm);
        assert_eq!(Errno::from(io::Error::other("x")), Errno::Io);
    }
}
