//! The pluggable storage behind the server.
//!
//! A [`Backend`] names exports and opens them; an [`Export`] executes IO. The server
//! validates every request before calling an export (see "Guarantees" below), so an
//! export only deals with well-formed, in-range, aligned operations.
//!
//! # Pacing
//! Every operation returns [`Done`]. `Done::NOW` lets the server reply at once;
//! `Done::at(t)` asks it to hold the reply until wall-clock instant `t`. The operation's
//! effect must already be applied when the method returns (a later READ on any
//! connection must see a WRITE whose call returned), only the *reply* is deferred.
//! A drive model computes the completion time of an IO and returns it here; the
//! server's per-connection writer holds replies in a min-heap so one slow IO never
//! delays the replies of others.
//!
//! # Deferred replies
//! When the completion time is not known when the method returns (it depends on
//! requests still to come, e.g. a controller that arbitrates among connections), return
//! [`Done::deferred`] and resolve its [`Resolver`] later from any thread:
//! [`Resolver::at`] with the instant the reply may go, or [`Resolver::fail`] to send an
//! error instead. The effect is still applied before the method returns; only the time
//! (or the verdict) comes later. The pacer parks the reply meanwhile (it counts against
//! the connection's held-reply limit) without delaying other replies. A resolver dropped
//! unresolved fails the request with `ESHUTDOWN`; a connection that ends with replies
//! still parked waits a bounded time for them (hard disconnects drop them at once).
//!
//! Methods are called synchronously from the connection's reader thread, one request
//! at a time per connection, concurrently across connections. A method that blocks
//! stalls its connection, so block only for real work, never to model latency.
//!
//! # Guarantees the server gives an export
//! - `offset + len <= info().size` for every ranged call; no overflow.
//! - `offset` and `len` are multiples of `block_min` (a final partial block of an
//!   export whose size is not a multiple of `block_min` is allowed).
//! - `read`/`write` lengths are `<= block_max`, and never 0.
//! - `write`, `trim`, `write_zeroes` are never called on a read-only export.
//! - `flush`, `trim`, `write_zeroes`, `cache` are only called if the matching
//!   `can_*` capability is true; `fua` is only ever true if `can_fua` is true.
//!
//! # Durability duties of an export
//! - `flush`: every write, trim and write-zeroes whose call has *returned* before
//!   `flush` is called (on this connection, and on every connection if
//!   `can_multi_conn`) must be durable by the time the returned `Done` says the
//!   reply may be sent.
//! - `fua == true`: the data of that call must be durable by its `Done` time.
//! - `can_multi_conn`: only set it if all connections to the export share one cache,
//!   so a FLUSH or FUA on one connection covers writes made through the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::deferred::Resolver;
use crate::deferred::Slot;
use crate::error::Errno;

/// Description and capabilities of one export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportInfo {
    /// Name clients ask for (`nbd://host/NAME`).
    pub name: String,
    /// Free text shown by `nbdinfo` and in `NBD_OPT_LIST`.
    pub description: String,
    /// Size in bytes.
    pub size: u64,
    pub read_only: bool,
    /// Smallest addressable unit and alignment: power of 2, 1..=65536. Requests not
    /// aligned to it are refused with EINVAL before they reach the export.
    pub block_min: u32,
    /// Size at which aligned IO is efficient (the drive's indirection unit): power of
    /// 2, `>= max(block_min, 512)`.
    pub block_preferred: u32,
    /// Largest READ/WRITE payload accepted: `>= block_preferred`.
    pub block_max: u32,
    pub can_flush: bool,
    pub can_fua: bool,
    pub can_trim: bool,
    pub can_write_zeroes: bool,
    /// The export can zero faster than writing zeroes (e.g. by unmapping). When false
    /// the server still advertises `SEND_FAST_ZERO` (if write zeroes is supported) and
    /// answers FAST_ZERO requests with ENOTSUP itself, which the spec allows and which
    /// tells clients like qemu-img and nbdcopy quickly to write zeroes instead.
    pub can_fast_zero: bool,
    /// FLUSH/FUA on one connection cover writes from all connections (shared cache).
    pub can_multi_conn: bool,
    pub can_cache: bool,
}

impl ExportInfo {
    /// An export with the usual block sizes (512 / 4096 / 32 MiB) and no optional
    /// capabilities; set the `can_*` fields the export really supports.
    pub fn new(name: impl Into<String>, size: u64) -> ExportInfo {
        ExportInfo {
            name: name.into(),
            description: String::new(),
            size,
            read_only: false,
            block_min: 512,
            block_preferred: 4096,
            block_max: 32 << 20,
            can_flush: false,
            can_fua: false,
            can_trim: false,
            can_write_zeroes: false,
            can_fast_zero: false,
            can_multi_conn: false,
            can_cache: false,
        }
    }

    /// Check the constraints proto.md puts on what a server may advertise.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.len() > crate::proto::MAX_STRING_LEN || self.name.contains('\0') {
            return Err("name must be at most 4096 bytes with no NUL".into());
        }
        if self.description.len() > crate::proto::MAX_STRING_LEN || self.description.contains('\0') {
            return Err("description must be at most 4096 bytes with no NUL".into());
        }
        let (min, pref, max) = (self.block_min, self.block_preferred, self.block_max);
        if !min.is_power_of_two() || min > 65536 {
            return Err(format!("block_min {min} must be a power of 2 no larger than 65536"));
        }
        if !pref.is_power_of_two() || pref < min.max(512) {
            return Err(format!("block_preferred {pref} must be a power of 2 >= max(block_min, 512)"));
        }
        if max < pref {
            return Err(format!("block_max {max} must be >= block_preferred {pref}"));
        }
        Ok(())
    }
}

/// When the reply to an operation may be sent.
#[derive(Debug, Clone, Default)]
pub struct Done {
    /// `None`: now. `Some(t)`: not before wall-clock instant `t`.
    pub not_before: Option<Instant>,
    /// A deferred reply: the time comes later through its [`Resolver`]
    /// (`not_before`, if set, is a floor).
    deferred: Option<Arc<Slot>>,
}

impl PartialEq for Done {
    fn eq(&self, o: &Done) -> bool {
        self.not_before == o.not_before
            && match (&self.deferred, &o.deferred) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}
impl Eq for Done {}

impl Done {
    pub const NOW: Done = Done { not_before: None, deferred: None };
    pub fn at(t: Instant) -> Done {
        Done { not_before: Some(t), deferred: None }
    }
    pub fn after(d: Duration) -> Done {
        Done { not_before: Some(Instant::now() + d), deferred: None }
    }
    /// A reply whose time is not known yet: return the `Done`, keep the [`Resolver`] and
    /// resolve it later from any thread (see "Deferred replies" in the module docs).
    pub fn deferred() -> (Done, Resolver) {
        let (slot, r) = crate::deferred::pair();
        (Done { not_before: None, deferred: Some(slot) }, r)
    }
    pub fn is_deferred(&self) -> bool {
        self.deferred.is_some()
    }
    pub(crate) fn take_deferred(&mut self) -> Option<Arc<Slot>> {
        self.deferred.take()
    }
    /// The later of two completion times (for operations split into parts). At most one
    /// part may be deferred: the reply then waits for it, and for the other's time.
    pub fn max(self, other: Done) -> Done {
        debug_assert!(!(self.is_deferred() && other.is_deferred()), "at most one part of an operation may be deferred");
        let not_before = match (self.not_before, other.not_before) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Done { not_before, deferred: self.deferred.or(other.deferred) }
    }
}

/// Flags of a WRITE_ZEROES request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZeroFlags {
    /// Data must be durable by the `Done` time.
    pub fua: bool,
    /// The range must stay allocated (do not punch a hole).
    pub no_hole: bool,
    /// Only succeed if faster than writing zeroes; otherwise return `Errno::NotSup`
    /// quickly and leave the data unchanged. Only passed when `can_fast_zero`.
    pub fast: bool,
}

/// One `base:allocation` extent: `len` bytes with `flags` (`STATE_HOLE`, `STATE_ZERO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len: u32,
    pub flags: u32,
}

/// A source of exports.
pub trait Backend: Send + Sync + 'static {
    /// All exports, for `NBD_OPT_LIST`.
    fn exports(&self) -> Vec<ExportInfo>;
    /// The export the empty name means, if any.
    fn default_export(&self) -> Option<String>;
    /// Look an export up by its (non-empty, canonical) name. Called for INFO, GO and
    /// EXPORT_NAME; a cheap lookup, not a session. `None` means "no such export".
    fn open(&self, name: &str) -> Option<Arc<dyn Export>>;
}

/// An open export. See the module docs for what the server guarantees and what an
/// export owes in return.
pub trait Export: Send + Sync + 'static {
    /// Current description; read once per handshake and kept for the connection.
    fn info(&self) -> ExportInfo;

    /// Fill `buf` with the data at `offset`.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<Done, Errno>;

    /// Store `data` at `offset`; with `fua`, durably by the `Done` time.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<Done, Errno>;

    /// Make completed writes durable (see module docs). Default: nothing to do, which
    /// is right for exports without a volatile cache.
    fn flush(&self) -> Result<Done, Errno> {
        Ok(Done::NOW)
    }

    /// Discard a range (a hint: the export may ignore it). Default: ignore.
    fn trim(&self, offset: u64, len: u32, fua: bool) -> Result<Done, Errno> {
        let _ = (offset, len, fua);
        Ok(Done::NOW)
    }

    /// Make a range read as zeroes. Default: write zeroes through [`Export::write`]
    /// in 64 KiB pieces, which honours `no_hole` trivially.
    fn write_zeroes(&self, offset: u64, len: u32, flags: ZeroFlags) -> Result<Done, Errno> {
        static ZEROES: [u8; 65536] = [0; 65536];
        if flags.fast {
            return Err(Errno::NotSup);
        }
        let mut done = Done::NOW;
        let mut at = 0u64;
        while at < len as u64 {
            let n = (len as u64 - at).min(ZEROES.len() as u64) as usize;
            done = done.max(self.write(offset + at, &ZEROES[..n], flags.fua)?);
            at += n as u64;
        }
        Ok(done)
    }

    /// Prefetch hint. Default: ignore.
    fn cache(&self, offset: u64, len: u32) -> Result<Done, Errno> {
        let _ = (offset, len);
        Ok(Done::NOW)
    }

    /// Describe `base:allocation` status from `offset`, pushing extents to `out`
    /// (empty on entry). Extents should total at least `len` where cheap; the server
    /// trims the list to the spec's rules (REQ_ONE, export end, 2^20 entries) and
    /// substitutes one "allocated" extent if none is given. Default: all allocated.
    fn block_status(&self, offset: u64, len: u32, out: &mut Vec<Extent>) -> Result<Done, Errno> {
        let _ = offset;
        out.push(Extent { len, flags: 0 });
        Ok(Done::NOW)
    }

    /// A connection entered the transmission phase on this export (metrics hook).
    fn connection_opened(&self) {}
    /// That connection ended, after all its replies were sent or abandoned.
    fn connection_closed(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_block_sizes() {
        let mut i = ExportInfo::new("a", 1 << 20);
        assert!(i.validate().is_ok());
        i.block_min = 4096;
        i.block_preferred = 65536;
        assert!(i.validate().is_ok());
        i.block_min = 3;
        assert!(i.validate().is_err());
        i.block_min = 1 << 17;
        assert!(i.validate().is_err());
        i.block_min = 1;
        i.block_preferred = 256; // below 512
        assert!(i.validate().is_err());
        i.block_preferred = 4096;
        i.block_max = 2048;
        assert!(i.validate().is_err());
        i.block_max = 0xffff_ffff; // "no limit" is allowed
        assert!(i.validate().is_ok());
    }

    #[test]
    fn done_max() {
        let t = Instant::now();
        let later = t + Duration::from_millis(1);
        assert_eq!(Done::NOW.max(Done::NOW), Done::NOW);
        assert_eq!(Done::NOW.max(Done::at(t)), Done::at(t));
        assert_eq!(Done::at(later).max(Done::at(t)), Done::at(later));
    }
}
