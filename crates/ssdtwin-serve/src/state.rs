//! What the model lock protects: the image (controller and FTL), the timing model, the
//! journal, and the bookkeeping of virtual time (idle GC, the controller's clock).

use prometheus_client::metrics::histogram::Histogram;

use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::image::Image;
use ssdtwin_core::journal::{JournalWriter, Record};
use ssdtwin_core::nvme::{VendorLog, WafBasis, WafMeasurement};

use crate::arb::ArbState;
use crate::config::TwinConfig;

/// Bucket upper bounds of the model latency histograms, in seconds (10 µs to 1 s: TLC reads
/// near 100 µs, QLC programs and GC-bound writes in milliseconds).
pub const LATENCY_BUCKETS_S: [f64; 16] =
    [10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0];

pub(crate) fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS_S)
}

/// Everything the lock protects. `None` in the backend's state once it is closed (or
/// abandoned by a test that simulates a crash).
pub(crate) struct State {
    pub(crate) img: Image,
    pub(crate) timing: Option<DeviceTiming>,
    pub(crate) journal: JournalWriter,
    /// Appended-record count at the last `Check` record.
    pub(crate) last_check: u64,
    /// Latest arrival time given to the model (virtual ns; kept monotone).
    pub(crate) last_v: u64,
    /// The latest completion the model gave (never before the latest arrival); the
    /// controller has been busy up to here (the union of [arrival, completion] intervals).
    pub(crate) done_v: u64,
    /// Background GC has used the idle time up to here.
    pub(crate) idle_done_v: u64,
    /// Controller-busy time not yet added to the controller's clock.
    pub(crate) busy_pending_ns: u64,
    /// Virtual time already added to the controller's clock (SMART power-on hours).
    pub(crate) clock_done_v: u64,
    pub(crate) idle_gc_moved: u64,
    /// Virtual time of the last commit and of the last live.json.
    pub(crate) last_commit_v: u64,
    pub(crate) last_live_v: Option<u64>,
    pub(crate) commits: u64,
    /// The vendor log when serving started (the session's WAF window opens here).
    pub(crate) start_log: VendorLog,
    /// The submission queues of WRR arbitration, when feature 01h selects it (crate::arb).
    pub(crate) arb: Option<ArbState>,
    /// Every journal append fails from now on ([`crate::TwinBackend::fail_journal_for_tests`]).
    #[cfg(feature = "test-hooks")]
    pub(crate) journal_fails: bool,
}

/// What went wrong in a step that has no caller to return an error to (it makes the
/// backend fail writes from then on).
pub(crate) type Failure = String;

impl State {
    /// The session's WAF measurement up to `now` (the vendor log's present): timed writes over
    /// the attached namespaces since the server started (docs/models.md, "Measuring WAF").
    /// The session summary and the metrics both report it.
    pub(crate) fn session_waf(&self, now: &VendorLog) -> WafMeasurement {
        let attached_bytes = self.img.ctrl.namespaces().filter(|n| n.attached).map(|n| n.bytes()).sum();
        WafMeasurement::between(&self.start_log, now, WafBasis::Timed, attached_bytes)
    }

    pub(crate) fn append(&mut self, r: Record, cfg: &TwinConfig) -> Result<(), Failure> {
        #[cfg(feature = "test-hooks")]
        if self.journal_fails {
            return Err("writing the journal: failed by a test".into());
        }
        self.journal.append(&r);
        if self.journal.buffered_bytes() >= cfg.journal_buffer_bytes {
            self.write_out()?;
        }
        Ok(())
    }

    pub(crate) fn write_out(&mut self) -> Result<(), Failure> {
        self.journal.write_out().map(drop).map_err(|e| format!("writing the journal: {e}"))
    }

    /// Give background GC the idle time up to `now_v` if nothing has been outstanding
    /// for `idle_after`; journal what it did.
    pub(crate) fn idle(&mut self, now_v: u64, cfg: &TwinConfig) -> Result<(), Failure> {
        let Some(timing) = self.timing.as_mut().filter(|_| cfg.idle_gc) else { return Ok(()) };
        let quiet_from = self.done_v.max(self.idle_done_v);
        if now_v < quiet_from + cfg.idle_after.as_nanos() as u64 {
            return Ok(());
        }
        let ctrl = &mut self.img.ctrl;
        let before = (ctrl.ftl_counters().erases, ctrl.ftl_counters().gc_victims);
        let moved = timing.idle(ctrl, quiet_from, now_v).map_err(|e| format!("background GC failed: {e}"))?;
        self.idle_done_v = now_v;
        let c = ctrl.ftl_counters();
        let (erases, victims) = (c.erases, c.gc_victims);
        if moved > 0 || (erases, victims) != before {
            self.idle_gc_moved += moved;
            self.append(Record::IdleGc { moved, erases, victims }, cfg)?;
        }
        Ok(())
    }

    /// Add the time served since the last call to the controller's clock (and journal it).
    pub(crate) fn advance_clock(&mut self, now_v: u64, cfg: &TwinConfig) -> Result<(), Failure> {
        if now_v <= self.clock_done_v {
            return Ok(());
        }
        let ns = now_v - self.clock_done_v;
        let busy = self.busy_pending_ns;
        self.img.ctrl.advance_clock(ns, busy);
        self.clock_done_v = now_v;
        self.busy_pending_ns = 0;
        self.append(Record::Clock { ns, busy_ns: busy }, cfg)
    }
}
