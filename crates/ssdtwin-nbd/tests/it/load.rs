//! A short run of the load generator (`examples/nbdload/`, compiled in here): many
//! connections mixing reads, writes, flushes and reconnects, with stalling clients
//! alongside, and every acknowledged write read back at the end.

use std::sync::Arc;
use std::time::Duration;

use ssdtwin_nbd::{MemBackend, MemExport, Server, ServerConfig};

#[path = "../../examples/nbdload/main.rs"]
#[allow(dead_code, unused_imports)] // the test uses part of the example; its binary uses the rest
mod nbdload;

#[test]
fn mixed_load_with_reconnects_and_stalls_loses_nothing() {
    // Replies held 50 µs, as a drive model would: the pacing path and the budget
    // both take part.
    let lat = Duration::from_micros(50);
    let backend = Arc::new(MemBackend::new().with_export(MemExport::new("d", 256 << 20).with_latency(lat, lat)));
    let h = Server::new(backend)
        .with_config(ServerConfig { max_inflight_bytes: 16 << 20, ..Default::default() })
        .listen_tcp("127.0.0.1:0")
        .unwrap()
        .start()
        .unwrap();
    let uri = format!("nbd://{}/d", h.tcp_addrs()[0]);
    let mut cfg = nbdload::LoadConfig::new(nbdload::Target::parse(&uri).unwrap());
    cfg.clients = 6;
    cfg.duration = Duration::from_secs(3);
    cfg.qd = 8;
    cfg.sizes = vec![4 << 10, 64 << 10, 1 << 20];
    cfg.disconnect_every = 150;
    cfg.stall = 2;
    cfg.stall_reads = 8;
    cfg.stall_bytes = 4 << 20;
    cfg.quiet = true;
    cfg.pid = Some(std::process::id());
    let r = nbdload::run(&cfg).unwrap();
    eprint!("{}", r.text);
    assert_eq!(r.mismatches, 0, "{}", r.text);
    assert_eq!(r.errors, 0, "{}", r.text);
    assert!(r.ops > 100, "{}", r.text);
    assert!(r.units_verified_final > 0, "{}", r.text);
    assert!(r.reconnects > 0, "{}", r.text);
    let s = h.stats();
    assert!(s.inflight_bytes_max <= 16 << 20, "{s:?}");
    assert!(s.budget_waits > 0, "the stalled clients should have hit their share: {s:?}");
    assert_eq!(s.protocol_errors, 0);
}

#[test]
fn the_read_back_keeps_to_the_exports_largest_request() {
    // The final read-back read runs of up to 1 MiB whatever the export's block_max: on a
    // served log stack (128 KiB) every one was an EOVERFLOW and almost nothing was checked.
    let backend = Arc::new(MemBackend::new().with_export(MemExport::new("d", 64 << 20).with_info(|i| i.block_max = 64 << 10)));
    let h = Server::new(backend).listen_tcp("127.0.0.1:0").unwrap().start().unwrap();
    let uri = format!("nbd://{}/d", h.tcp_addrs()[0]);
    let mut cfg = nbdload::LoadConfig::new(nbdload::Target::parse(&uri).unwrap());
    cfg.clients = 2;
    cfg.duration = Duration::from_millis(500);
    cfg.qd = 4;
    cfg.sizes = vec![4 << 10, 64 << 10];
    cfg.region_bytes = Some(4 << 20);
    cfg.quiet = true;
    let r = nbdload::run(&cfg).unwrap();
    assert_eq!(r.errors, 0, "{}", r.text);
    assert_eq!(r.mismatches, 0, "{}", r.text);
    assert!(r.units_verified_final > 256, "{}", r.text);
}

#[test]
fn uris_parse() {
    use nbdload::Target;
    assert_eq!(Target::parse("nbd://127.0.0.1:10809/ns1").unwrap(), Target::Tcp { addr: "127.0.0.1:10809".into(), export: "ns1".into() });
    assert_eq!(Target::parse("nbd://localhost/a%20b").unwrap(), Target::Tcp { addr: "localhost:10809".into(), export: "a b".into() });
    assert_eq!(
        Target::parse("nbd+unix:///ns1?socket=/tmp/x%20y.sock").unwrap(),
        Target::Unix { path: "/tmp/x y.sock".into(), export: "ns1".into() }
    );
    assert!(Target::parse("nbds://h/x").unwrap_err().contains("no TLS"));
    assert!(Target::parse("http://h/x").is_err());
}
