//! The report of a run: the clients' latencies and counts summed, as JSON and as text.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

use super::client::{Client, Counts, Hists};
use super::config::LoadConfig;

/// Everything a run measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub json: serde_json::Value,
    pub text: String,
    pub mismatches: u64,
    pub errors: u64,
    pub ops: u64,
    pub units_verified_final: u64,
    pub connect_failures: u64,
    pub reconnects: u64,
}

fn pct(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

fn hist_json(h: &Histogram<u64>, secs: f64) -> serde_json::Value {
    json!({
        "ops": h.len(), "ops_per_s": h.len() as f64 / secs,
        "lat_us": {"mean": if h.is_empty() { 0.0 } else { h.mean() }, "p50": pct(h, 0.5), "p90": pct(h, 0.9), "p99": pct(h, 0.99), "p99_9": pct(h, 0.999), "max": h.max()}
    })
}

fn errno_name(e: u32) -> String {
    match e {
        1 => "EPERM".into(),
        5 => "EIO".into(),
        12 => "ENOMEM".into(),
        22 => "EINVAL".into(),
        28 => "ENOSPC".into(),
        75 => "EOVERFLOW".into(),
        95 => "ENOTSUP".into(),
        108 => "ESHUTDOWN".into(),
        n => format!("errno {n}"),
    }
}

/// What a run saw besides its clients' own counts: the first connection, the server's
/// memory and the abuse connections.
pub struct Observed {
    pub probe_info: Option<(Duration, u32, Option<String>)>,
    pub rss0: Option<(u64, u64)>,
    pub rss_end: Option<(u64, u64)>,
    pub samples: Vec<u64>,
    pub stalls_opened: usize,
    pub stalls_closed: usize,
    pub holds_opened: usize,
    pub holds_closed: usize,
    pub abuse_errors: Vec<String>,
}

/// Every client's latencies and counts, summed.
fn totals(clients: &[Arc<Client>]) -> (Hists, Counts) {
    let mut hists = Hists::new();
    let mut n = Counts::default();
    for c in clients {
        let st = c.lock();
        hists.add(&st.hists);
        let k = &st.counts;
        n.bytes_read += k.bytes_read;
        n.bytes_written += k.bytes_written;
        for (e, v) in &k.errors {
            *n.errors.entry(*e).or_default() += v;
        }
        n.reconnects_clean += k.reconnects_clean;
        n.reconnects_abrupt += k.reconnects_abrupt;
        n.connect_failures += k.connect_failures;
        if n.first_connect_error.is_none() {
            n.first_connect_error = k.first_connect_error.clone();
        }
        n.units_verified_inflight += k.units_verified_inflight;
        n.units_unverifiable += k.units_unverifiable;
        n.units_verified_final += k.units_verified_final;
        n.units_uncertain_final += k.units_uncertain_final;
        n.mismatches += k.mismatches;
        n.mismatch_examples.extend(k.mismatch_examples.iter().take(3).cloned());
        n.protocol_errors.extend(k.protocol_errors.iter().cloned());
    }
    (hists, n)
}

/// The report of a run of `cfg` by `clients`.
pub fn report(cfg: &LoadConfig, clients: &[Arc<Client>], seen: Observed) -> Report {
    let Observed { probe_info, rss0, rss_end, samples, stalls_opened, stalls_closed, holds_opened, holds_closed, abuse_errors } = seen;
    let secs = cfg.duration.as_secs_f64();
    let (hists, n) = totals(clients);
    let mut total = Hists::new().read;
    let _ = total.add(&hists.read);
    let _ = total.add(&hists.write);
    let _ = total.add(&hists.flush);
    let errors: u64 = n.errors.values().sum();
    let mut errs: Vec<(u32, u64)> = n.errors.iter().map(|(a, b)| (*a, *b)).collect();
    errs.sort();
    let max_rss = samples.iter().copied().max();
    let json = json!({
        "target": format!("{:?}", cfg.target),
        "clients": cfg.clients, "qd": cfg.qd, "duration_s": secs, "sizes": cfg.sizes,
        "mix": {"read": cfg.mix_read, "write": cfg.mix_write, "flush": cfg.mix_flush},
        "read": hist_json(&hists.read, secs), "write": hist_json(&hists.write, secs),
        "flush": hist_json(&hists.flush, secs), "total": hist_json(&total, secs),
        "bytes_read": n.bytes_read, "bytes_written": n.bytes_written,
        "reconnects": {"clean": n.reconnects_clean, "abrupt": n.reconnects_abrupt},
        "connect_failures": n.connect_failures, "first_connect_error": n.first_connect_error,
        "first_connection": probe_info.as_ref().map(|(t, f, e)| json!({"after_s": t.as_secs_f64(), "failed_tries": f, "first_error": e})),
        "error_replies": errs.iter().map(|(e, c)| (errno_name(*e), *c)).collect::<HashMap<_, _>>(),
        "protocol_errors": n.protocol_errors,
        "verify": {"units_in_flight": n.units_verified_inflight, "units_unknown": n.units_unverifiable,
                   "units_final": n.units_verified_final, "units_final_uncertain": n.units_uncertain_final,
                   "mismatches": n.mismatches, "examples": n.mismatch_examples},
        "server_kib": cfg.pid.map(|_| json!({"rss_start": rss0.map(|r| r.0), "rss_max": max_rss, "rss_end": rss_end.map(|r| r.0), "hwm_end": rss_end.map(|r| r.1)})),
        "stall": {"connections": cfg.stall, "opened": stalls_opened, "reads_each": cfg.stall_reads, "bytes_each": cfg.stall_bytes, "closed_by_server": stalls_closed},
        "hold": {"connections": cfg.hold, "opened": holds_opened, "closed_by_server": holds_closed},
        "abuse_errors": abuse_errors.iter().take(5).collect::<Vec<_>>(),
    });
    let mut t = String::new();
    let line = |t: &mut String, name: &str, h: &Histogram<u64>| {
        t.push_str(&format!(
            "  {name:<6} {:>10} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>9}\n",
            h.len(),
            h.len() as f64 / secs,
            pct(h, 0.5),
            pct(h, 0.9),
            pct(h, 0.99),
            pct(h, 0.999),
            h.max()
        ))
    };
    if !clients.is_empty() {
        t.push_str(&format!(
            "  {:<6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9}  (latency µs)\n",
            "op", "count", "ops/s", "p50", "p90", "p99", "p99.9", "max"
        ));
        line(&mut t, "read", &hists.read);
        line(&mut t, "write", &hists.write);
        line(&mut t, "flush", &hists.flush);
        line(&mut t, "total", &total);
        t.push_str(&format!(
            "  {:.1} MB/s read, {:.1} MB/s written; reconnects: {} clean, {} abrupt; connect/handshake failures: {}{}\n",
            n.bytes_read as f64 / secs / 1e6,
            n.bytes_written as f64 / secs / 1e6,
            n.reconnects_clean,
            n.reconnects_abrupt,
            n.connect_failures,
            n.first_connect_error.as_ref().map(|e| format!(" (first: {e})")).unwrap_or_default()
        ));
        t.push_str(&format!(
            "  error replies: {}\n",
            if errs.is_empty() {
                "none".to_string()
            } else {
                errs.iter().map(|(e, c)| format!("{} x{c}", errno_name(*e))).collect::<Vec<_>>().join(", ")
            }
        ));
        for p in n.protocol_errors.iter().take(3) {
            t.push_str(&format!("  connection error: {p}\n"));
        }
        t.push_str(&format!(
            "  verify: {} blocks checked in flight, {} at the end after FLUSH ({} of unknown outcome after abrupt disconnects): {} mismatches\n",
            n.units_verified_inflight, n.units_verified_final, n.units_uncertain_final, n.mismatches
        ));
        for m in &n.mismatch_examples {
            t.push_str(&format!("    {m}\n"));
        }
    }
    if cfg.stall > 0 {
        t.push_str(&format!(
            "  stall: {} connections x {} READs of {} bytes never read; {} closed by the server\n",
            stalls_opened, cfg.stall_reads, cfg.stall_bytes, stalls_closed
        ));
    }
    if cfg.hold > 0 {
        t.push_str(&format!("  hold: {holds_opened} silent connections opened; {holds_closed} closed by the server\n"));
    }
    for e in abuse_errors.iter().take(3) {
        t.push_str(&format!("  abuse connection failed: {e}\n"));
    }
    if let Some(pid) = cfg.pid {
        let mib = |k: Option<u64>| k.map(|k| format!("{:.1}", k as f64 / 1024.0)).unwrap_or("?".into());
        t.push_str(&format!(
            "  server pid {pid} memory (MiB): RSS at start {}, max {}, at end {}; VmHWM {}\n",
            mib(rss0.map(|r| r.0)),
            mib(max_rss),
            mib(rss_end.map(|r| r.0)),
            mib(rss_end.map(|r| r.1))
        ));
    }
    Report {
        json,
        text: t,
        mismatches: n.mismatches,
        errors,
        ops: total.len(),
        units_verified_final: n.units_verified_final,
        connect_failures: n.connect_failures,
        reconnects: n.reconnects_clean + n.reconnects_abrupt,
    }
}
