//! ssdtwin-serve: a drive image's namespaces served over NBD in real time (`ssdtwin serve`).
//!
//! The NBD protocol lives in `ssdtwin-nbd`, which knows no drive; this crate is the drive
//! as an NBD backend, split by concern:
//!
//! * [`backend`] — [`TwinBackend`]: exports per attached namespace, every command through
//!   the controller under one lock (pacing, journal, group-committed FLUSH/FUA);
//! * `data` — the namespaces' sparse data files;
//! * `state` — what the lock protects: image, timing model, journal, idle GC, clock;
//! * `arb` — the submission queues of WRR arbitration (feature 01h): one per connection
//!   (the dispatcher that fetches from them is backend/dispatch.rs);
//! * `command` — a controller command's kind and journal record;
//! * [`clock`] — where virtual time comes from (wall clock, or a manual one in tests);
//! * [`live`] — `live.json` and the session summary;
//! * [`metrics`] — Prometheus metrics (`prometheus-client`) and the HTTP endpoint;
//! * [`serving`] — [`Serving`]: server, housekeeping thread and metrics together;
//! * [`stack`] — a host stack's volume over a served drive (`ssdtwin serve STACKDIR`).
//!
//! docs/nbd.md ("Serving a drive image") is the user-level description.

mod arb;
pub mod backend;
pub mod clock;
mod command;
mod config;
mod data;
mod error;
pub mod live;
pub mod metrics;
pub mod serving;
pub mod stack;
mod state;

pub use backend::{LiveFingerprint, NsExport, TwinBackend};
pub use clock::{Clock, ManualClock, WallClock};
pub use config::{Pace, TwinConfig};
pub use error::{nbd_errno, ServeError};
pub use live::{read_live, ExportRow, LiveSnapshot, NsSummary, ServeInfo, SessionSummary, StoppedSummary, LIVE, LIVE_FORMAT, LIVE_VERSION};
pub use serving::{ServeOptions, Serving};
pub use stack::{StackBackend, STACK_EXPORT};
pub use state::LATENCY_BUCKETS_S;
