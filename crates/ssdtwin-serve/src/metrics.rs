//! Prometheus metrics of a served drive (`GET /metrics`, OpenMetrics text from the
//! `prometheus-client` crate) and a debugging view of the FTL (`GET /debug/ftl`), on a tiny
//! HTTP/1.0 responder (one std thread, one request per connection; anything else gets
//! 404/405). docs/nbd.md lists the metric names.
//!
//! Why `prometheus-client`: it is the Prometheus project's own Rust client; its collector
//! interface encodes values taken at scrape time, which is what a model's counters are
//! (they live in the drive, not in the exporter).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use ssdtwin_core::nvme::WafVerdict;

use crate::backend::{Inner, TwinBackend};

/// Scrape-time metrics of one backend.
#[derive(Debug)]
struct TwinCollector {
    inner: Weak<Inner>,
}

/// Writes metric families into a scrape: integer counters and gauges where the value is a
/// count, floating-point gauges for ratios; no label braces on unlabelled series.
struct Out<'a, 'b> {
    enc: &'a mut DescriptorEncoder<'b>,
}

type Labels<'a> = &'a [(&'a str, &'a str)];

impl Out<'_, '_> {
    fn family<M: EncodeMetric>(&mut self, name: &str, help: &str, kind: MetricType, rows: Vec<(Labels, M)>) -> Result<(), std::fmt::Error> {
        let mut m = self.enc.encode_descriptor(name, help, None, kind)?;
        if let [(labels, v)] = &rows[..] {
            if labels.is_empty() {
                return v.encode(m);
            }
        }
        for (labels, v) in &rows {
            v.encode(m.encode_family(labels)?)?;
        }
        Ok(())
    }

    /// A counter (`_total` is appended) with one value per label set.
    fn counters(&mut self, name: &str, help: &str, rows: &[(Labels, u64)]) -> Result<(), std::fmt::Error> {
        self.family(name, help, MetricType::Counter, rows.iter().map(|&(l, v)| (l, ConstCounter::new(v))).collect())
    }

    fn counter(&mut self, name: &str, help: &str, v: u64) -> Result<(), std::fmt::Error> {
        self.counters(name, help, &[(NONE, v)])
    }

    fn gauge(&mut self, name: &str, help: &str, v: i64) -> Result<(), std::fmt::Error> {
        self.family(name, help, MetricType::Gauge, vec![(NONE, ConstGauge::new(v))])
    }

    fn gauge_f(&mut self, name: &str, help: &str, v: f64) -> Result<(), std::fmt::Error> {
        self.family(name, help, MetricType::Gauge, vec![(NONE, ConstGauge::new(v))])
    }
}

const NONE: Labels = &[];

impl Collector for TwinCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(inner) = self.inner.upgrade() else { return Ok(()) };
        let (vl, smart, journal_bytes, commits, idle_moved, start_host, start_nand, session) = {
            let g = inner.lock();
            let Some(st) = g.as_ref() else { return Ok(()) };
            let vl = st.img.ctrl.vendor_log();
            let session = st.session_waf(&vl);
            let (h0, n0) = (st.start_log.host_write_bytes, st.start_log.nand_write_bytes);
            (vl, st.img.ctrl.smart_log(), st.journal.len_bytes(), st.commits, st.idle_gc_moved, h0, n0, session)
        };
        let s = inner.server_stats();
        let c = &inner.counters;
        let (dh, dn) = (vl.host_write_bytes - start_host, vl.nand_write_bytes - start_nand);
        let parity = inner.die_parity;
        let mut o = Out { enc: &mut enc };
        let scale = format!("1/{}", inner.scale);
        let iu = inner.iu_bytes.to_string();
        let info: Labels = &[("preset", &inner.preset), ("scale", &scale), ("pace", inner.cfg.pace.name()), ("iu_bytes", &iu)];
        o.family("ssdtwin_info", "The served drive (value 1)", MetricType::Gauge, vec![(info, ConstGauge::new(1i64))])?;
        o.counter("ssdtwin_host_write_bytes", "Bytes the host wrote (drive lifetime, FTL count)", vl.host_write_bytes)?;
        o.counter("ssdtwin_host_read_bytes", "Bytes the host read (drive lifetime)", vl.host_read_bytes)?;
        o.counters("ssdtwin_nand_write_bytes", "Bytes programmed to NAND (drive lifetime)", &nand_write_rows(&vl, parity))?;
        o.counters(
            "ssdtwin_nand_read_bytes",
            "Bytes read from NAND (drive lifetime)",
            &[
                (&[("cause", "host")], vl.nand_read_bytes - vl.nand_read_rmw_bytes - vl.nand_read_gc_bytes),
                (&[("cause", "rmw")], vl.nand_read_rmw_bytes),
                (&[("cause", "gc")], vl.nand_read_gc_bytes),
            ],
        )?;
        o.gauge_f("ssdtwin_waf", "Write amplification over the drive's life (NAND / host bytes written)", vl.waf)?;
        o.gauge_f(
            "ssdtwin_waf_session",
            "NAND / host bytes written since this server started: a window ratio whatever the window spans \
             (the drive's WAF only where ssdtwin_waf_session_steady is 1; 0 before any write)",
            if dh > 0 { dn as f64 / dh as f64 } else { 0.0 },
        )?;
        o.gauge_f(
            "ssdtwin_waf_session_gc_cycles",
            "Superblocks GC reclaimed since this server started / superblocks in the drive",
            session.gc_cycles,
        )?;
        o.gauge_f(
            "ssdtwin_waf_session_namespace_passes",
            "Host bytes written since this server started / bytes of the attached namespaces",
            session.namespace_passes,
        )?;
        o.gauge(
            "ssdtwin_waf_session_steady",
            "1 when the session spans at least 1 GC cycle or 1 namespace pass (its WAF is the drive's), else 0",
            i64::from(session.verdict == WafVerdict::Steady),
        )?;
        // Only while the session's ratio is the drive's WAF: an absent series, not a NaN or a
        // 0, is what a Prometheus query and an alert treat as "no value".
        if let Some(waf) = session.waf {
            o.gauge_f("ssdtwin_waf_session_measured", "The drive's WAF over this session (present only when steady)", waf)?;
        }
        o.counter("ssdtwin_gc_victims", "Superblocks chosen for garbage collection", vl.gc_victims)?;
        o.counter("ssdtwin_gc_foreground_victims", "GC victims collected while the host waited", vl.foreground_gc_victims)?;
        o.counter("ssdtwin_background_gc_moved_ius", "IUs relocated by idle-time GC in this session", idle_moved)?;
        o.counter("ssdtwin_erases", "Superblock erases", vl.superblock_erases)?;
        o.counter("ssdtwin_rmw_ius", "Read-modify-writes of partly written IUs", vl.rmw_ius)?;
        o.counter("ssdtwin_trimmed_ius", "IUs deallocated", vl.trimmed_ius)?;
        o.gauge("ssdtwin_free_superblocks", "Erased superblocks ready for writing", vl.free_superblocks as i64)?;
        o.gauge("ssdtwin_superblocks", "Superblocks in the drive", vl.superblocks as i64)?;
        o.gauge("ssdtwin_buffered_bytes", "Host data in the write buffer", vl.buffered_bytes as i64)?;
        o.gauge("ssdtwin_valid_bytes", "Valid data on NAND", vl.valid_bytes as i64)?;
        o.gauge_f("ssdtwin_erase_count_avg", "Mean erase count per superblock", vl.erase_count_avg)?;
        o.gauge("ssdtwin_percent_used", "SMART percentage used", smart.percent_used as i64)?;
        o.gauge("ssdtwin_power_on_hours", "SMART power-on hours", smart.power_on_hours as i64)?;
        o.counters(
            "ssdtwin_nbd_commands",
            "NBD commands executed, by type",
            &[
                (&[("op", "read")], c.reads.get()),
                (&[("op", "write")], c.writes.get()),
                (&[("op", "trim")], c.trims.get()),
                (&[("op", "write_zeroes")], c.write_zeroes.get()),
                (&[("op", "flush")], c.flushes.get()),
                (&[("op", "block_status")], c.block_status.get()),
            ],
        )?;
        o.counters(
            "ssdtwin_nbd_bytes",
            "Bytes moved by NBD reads and writes",
            &[(&[("direction", "read")], c.read_bytes.get()), (&[("direction", "write")], c.write_bytes.get())],
        )?;
        o.counter("ssdtwin_nbd_requests", "NBD requests received", s.requests)?;
        o.counter("ssdtwin_nbd_error_replies", "NBD replies carrying an error", s.error_replies)?;
        o.counter(
            "ssdtwin_nbd_replies_paced",
            "Replies the model timed (reads, writes, trims, write-zeroes): held until its completion time, or sent at once when later",
            s.replies_paced,
        )?;
        o.counter(
            "ssdtwin_nbd_replies_late",
            "Timed replies sent later than the threshold after the model's time (host too slow)",
            s.replies_late,
        )?;
        o.gauge_f("ssdtwin_nbd_late_seconds_max", "Worst lateness of a timed reply", s.late_ns_max as f64 / 1e9)?;
        o.family(
            "ssdtwin_nbd_late_seconds",
            "Summed lateness of timed replies",
            MetricType::Counter,
            vec![(NONE, ConstCounter::new(s.late_ns_sum as f64 / 1e9))],
        )?;
        o.gauge("ssdtwin_nbd_connections", "Open NBD connections (transmission phase)", c.connections_open.get())?;
        o.counter("ssdtwin_nbd_connections_accepted", "NBD connections accepted", s.connections_accepted)?;
        o.counter("ssdtwin_syncs", "fdatasync/fsync calls for FLUSH and FUA", c.syncs.get())?;
        o.gauge("ssdtwin_journal_bytes", "Size of the command journal since the last commit", journal_bytes as i64)?;
        o.counter("ssdtwin_commits", "Image generations committed by this server", commits)?;
        o.gauge("ssdtwin_write_failure", "1 once a write or fsync failed (writes fail from then on)", inner.failure().map_or(0, |_| 1))?;
        let mut m = enc.encode_descriptor(
            "ssdtwin_model_latency_seconds",
            "Completion latency the timing model gave each command (pace model)",
            None,
            MetricType::Histogram,
        )?;
        inner.hist_read.encode(m.encode_family(&[("op", "read")])?)?;
        inner.hist_write.encode(m.encode_family(&[("op", "write")])?)?;
        Ok(())
    }
}

impl TwinBackend {
    /// The OpenMetrics text exposition of the live state.
    pub fn metrics_text(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(TwinCollector { inner: Arc::downgrade(&self.inner) }));
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            return "# ssdtwin: encoding the metrics failed\n".into();
        }
        out
    }
}

pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addr: &str, backend: Arc<TwinBackend>) -> io::Result<MetricsServer> {
        Self::start_on(TcpListener::bind(addr)?, backend)
    }

    /// Serve on a listener bound beforehand (so a busy address fails before the image opens).
    pub fn start_on(l: TcpListener, backend: Arc<TwinBackend>) -> io::Result<MetricsServer> {
        let addr = l.local_addr()?;
        // Non-blocking accept polled every 50 ms, so `stop` needs no wake-up machinery.
        l.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new().name("ssdtwin-metrics".into()).spawn(move || {
            while !s.load(Relaxed) {
                match l.accept() {
                    Ok((conn, _)) => {
                        let _ = answer(conn, &backend);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        })?;
        Ok(MetricsServer { addr, stop, thread: Some(thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Read the request head (up to the blank line, at most 8 KiB); only its first line matters.
fn request_line(c: &mut TcpStream) -> io::Result<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") && buf.len() < 8192 {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).lines().next().unwrap_or("").to_string())
}

fn answer(mut c: TcpStream, backend: &TwinBackend) -> io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(2)))?;
    let line = request_line(&mut c)?;
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", backend.metrics_text()),
        ("GET", "/debug/ftl") => match backend.fingerprint() {
            Ok(v) => ("200 OK", "application/json", serde_json::to_string(&v).unwrap_or_default() + "\n"),
            Err(e) => ("503 Service Unavailable", "text/plain", e + "\n"),
        },
        ("GET", "/") => ("200 OK", "text/plain", "ssdtwin serve: /metrics (Prometheus), /debug/ftl (FTL fingerprint)\n".to_string()),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET\n".to_string()),
    };
    let hdr = format!("HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    c.write_all(hdr.as_bytes())?;
    if method != "HEAD" {
        c.write_all(body.as_bytes())?;
    }
    c.flush()
}

/// NAND bytes written by cause: host and GC, and die parity on drives that keep it (a series
/// of its own there from the start, none on other drives).
fn nand_write_rows(vl: &ssdtwin_core::nvme::VendorLog, parity: bool) -> Vec<(Labels<'static>, u64)> {
    let mut rows: Vec<(Labels<'static>, u64)> =
        vec![(&[("cause", "host")], vl.nand_write_host_bytes), (&[("cause", "gc")], vl.nand_write_gc_bytes)];
    if parity {
        rows.push((&[("cause", "parity")], vl.nand_write_parity_bytes));
    }
    rows
}
