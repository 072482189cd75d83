//! A controller command as the server issues it: its kind and LBA range, and the journal
//! record of it.

use ssdtwin_core::journal::Record;

/// The kind of a controller command an NBD request becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Io {
    Read,
    Write,
    Dealloc,
}

/// The journal record of command `io` on `nsid`'s LBAs `[slba, slba + nlb)`.
pub(crate) fn record(io: Io, nsid: u32, slba: u64, nlb: u64) -> Record {
    match io {
        Io::Read => Record::Read { nsid, slba, nlb },
        Io::Write => Record::Write { nsid, slba, nlb },
        Io::Dealloc => Record::Deallocate { nsid, slba, nlb },
    }
}
