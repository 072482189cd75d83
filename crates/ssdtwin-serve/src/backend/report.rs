//! The session's counters ([`SessionSummary`]) and the `live.json` document
//! ([`LiveSnapshot`]) as the backend builds them; crate::live holds their types.

use ssdtwin_core::nvme::VendorLog;

use super::TwinBackend;
use std::sync::atomic::Ordering::Relaxed;

use ssdtwin_nbd::ExportInfo;

use super::NsCounts;
use crate::live::{ExportRow, LiveSnapshot, NsSummary, SessionSummary, LIVE_FORMAT, LIVE_VERSION};
use crate::state::State;

impl TwinBackend {
    /// Counters of this session (also part of `live.json` and the summary at exit).
    pub fn summary(&self) -> Option<SessionSummary> {
        let mut g = self.inner.lock();
        g.as_mut().map(|st| self.summary_locked(st, &st.img.ctrl.vendor_log()))
    }

    pub(crate) fn summary_locked(&self, st: &State, vl: &VendorLog) -> SessionSummary {
        let inner = &self.inner;
        let c = &inner.counters;
        let s = inner.server_stats();
        let dh = vl.host_write_bytes - st.start_log.host_write_bytes;
        let dn = vl.nand_write_bytes - st.start_log.nand_write_bytes;
        SessionSummary {
            seconds: inner.clock.elapsed().as_secs_f64(),
            pace: inner.cfg.pace.name().to_string(),
            reads: c.reads.get(),
            writes: c.writes.get(),
            trims: c.trims.get(),
            write_zeroes: c.write_zeroes.get(),
            flushes: c.flushes.get(),
            read_bytes: c.read_bytes.get(),
            write_bytes: c.write_bytes.get(),
            errors: c.errors.get(),
            syncs: c.syncs.get(),
            connections: s.connections_accepted,
            requests: s.requests,
            error_replies: s.error_replies,
            protocol_errors: s.protocol_errors,
            replies_paced: s.replies_paced,
            replies_late: s.replies_late,
            late_ns_max: s.late_ns_max,
            late_ns_mean: s.late_ns_sum.checked_div(s.replies_paced).unwrap_or(0),
            host_write_bytes: dh,
            nand_write_bytes: dn,
            buffered_bytes: vl.buffered_bytes,
            buffered_change_bytes: vl.buffered_bytes as i64 - st.start_log.buffered_bytes as i64,
            waf: if dh > 0 { dn as f64 / dh as f64 } else { 0.0 },
            waf_measurement: Some(st.session_waf(vl)),
            idle_gc_moved_ius: st.idle_gc_moved,
            block_status: c.block_status.get(),
            read_latency_mean_us: mean_us(c.timed_reads.get(), c.read_latency_ns.get()),
            write_latency_mean_us: mean_us(c.timed_writes.get(), c.write_latency_ns.get()),
            namespaces: self.served().map(|(nsid, info, counts)| ns_summary(nsid, &info.name, counts)).collect(),
            commits: st.commits,
            journal_records: st.journal.appended(),
            generation: st.img.generation(),
            failure: inner.failure().map(str::to_string),
        }
    }

    /// The `live.json` document (serialise it after releasing the lock).
    pub(crate) fn snapshot_locked(&self, st: &mut State, serving: bool) -> LiveSnapshot {
        let inner = &self.inner;
        let ctrl = &st.img.ctrl;
        let view = ctrl.view();
        LiveSnapshot {
            format: LIVE_FORMAT.to_string(),
            version: LIVE_VERSION,
            pid: std::process::id(),
            serving,
            time_unix_ms: inner.clock.unix_ms(),
            started_unix_ms: inner.start_unix_ms,
            generation: st.img.generation(),
            pace: inner.cfg.pace.name().to_string(),
            exports: self
                .served()
                .map(|(nsid, info, _)| ExportRow { name: info.name.clone(), nsid, size: info.size, read_only: info.read_only })
                .collect(),
            uris: inner.server.get().map(|(_, u)| u.clone()).unwrap_or_default(),
            stats: self.summary_locked(st, &view.vendor_log),
            view,
        }
    }
}

impl TwinBackend {
    /// What is served, with its counters: the namespaces' exports, or a served stack's one
    /// export (the drive's namespace exports are not served then).
    fn served(&self) -> Box<dyn Iterator<Item = (u32, &ExportInfo, &NsCounts)> + '_> {
        match self.stack_export.get() {
            Some(s) => Box::new(std::iter::once((s.nsid, &s.info, &*s.counts))),
            None => Box::new(self.exports.iter().map(|e| (e.nsid, &e.info, &e.counts))),
        }
    }
}

/// The mean of `n` latencies summing to `sum_ns`, in microseconds; None when there are none.
fn mean_us(n: u64, sum_ns: u64) -> Option<f64> {
    (n > 0).then(|| sum_ns as f64 / n as f64 / 1e3)
}

fn ns_summary(nsid: u32, export: &str, c: &NsCounts) -> NsSummary {
    NsSummary {
        nsid,
        export: export.to_string(),
        reads: c.reads.load(Relaxed),
        writes: c.writes.load(Relaxed),
        trims: c.trims.load(Relaxed),
        write_zeroes: c.write_zeroes.load(Relaxed),
        read_bytes: c.read_bytes.load(Relaxed),
        write_bytes: c.write_bytes.load(Relaxed),
        trim_bytes: c.trim_bytes.load(Relaxed),
        write_zeroes_bytes: c.write_zeroes_bytes.load(Relaxed),
    }
}
