//! NBD server for ssdtwin: the fixed-newstyle protocol over a pluggable [`Backend`]. It
//! knows no drive: the drive backend is `ssdtwin-serve`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ssdtwin_nbd::{MemBackend, Server};
//!
//! let backend = Arc::new(MemBackend::single("disk", 1 << 30));
//! let server = Server::new(backend).listen_tcp("127.0.0.1:10809")?.start()?;
//! println!("serving {}", server.uri("disk"));
//! server.wait(); // until a Stopper from server.stopper() fires
//! # Ok::<(), ssdtwin_nbd::Error>(())
//! ```
//!
//! Layout: [`proto`] is the wire format (pure encode/decode), `handshake` the option
//! state machine, `transmission` the request loop, `pacer` the per-connection writer
//! that holds replies until the backend's completion time, `budget` the server-wide
//! bound on bytes in flight, [`tls`] STARTTLS with rustls, [`server`] the listeners,
//! the connection limit and its refusals.
//! docs/nbd.md describes the backend contract and what of the spec is implemented.

mod backend;
mod budget;
mod deferred;
mod error;
mod handshake;
pub mod mem;
mod pacer;
pub mod proto;
pub mod server;
mod stats;
pub mod tls;
mod transmission;
mod wire;

pub use backend::{Backend, Done, Export, ExportInfo, Extent, Resolver, ZeroFlags};
pub use error::{Errno, Error, ProtoError};
pub use mem::{MemBackend, MemExport};
pub use server::{Server, ServerConfig, ServerHandle, Stopper};
pub use stats::ServerStats;
pub use tls::TlsMode;

/// Entry points for the fuzz targets in `fuzz/` and the corpus regression test.
/// Each takes arbitrary bytes and panics only if an invariant is broken.
#[doc(hidden)]
pub mod fuzzing;
