//! Server shutdown: idle connections close promptly, held replies are released,
//! requests arriving during shutdown get ESHUTDOWN.

use std::time::{Duration, Instant};

use ssdtwin_nbd::mem::Op;
use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{MemBackend, MemExport, ServerConfig};

use crate::common::*;

#[test]
fn idle_and_handshaking_connections_close_promptly() {
    let (h, _) = serve(MemBackend::single("d", 1 << 20));
    let mut idle = Client::tcp(&h);
    idle.negotiate("d", true, false);
    let mut haggling = Client::tcp(&h);
    haggling.flags(FLAG_C_FIXED_NEWSTYLE);
    let addr = h.tcp_addrs()[0];
    let t0 = Instant::now();
    h.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(2), "shutdown took {:?}", t0.elapsed());
    idle.expect_closed();
    haggling.expect_closed();
    assert!(std::net::TcpStream::connect(addr).is_err(), "still listening");
}

#[test]
fn held_replies_are_released_and_late_requests_get_eshutdown() {
    // Writes block the reader for 400 ms (modelling a slow backend call); reads are
    // paced by 1 hour, so only shutdown can release them.
    let b = MemBackend::single("d", 1 << 20).with_export(MemExport::new("s", 1 << 20).with_pacing(|op, _, _| match op {
        Op::Write { .. } => {
            std::thread::sleep(Duration::from_millis(400));
            None
        }
        Op::Read => Some(Duration::from_secs(3600)),
        _ => None,
    }));
    let cfg = ServerConfig { shutdown_grace: Duration::from_secs(10), ..Default::default() };
    let (h, _) = serve_with(b, cfg);
    let mut c = Client::tcp(&h);
    c.negotiate("s", false, false);
    c.request(CMD_READ, 0, 1, 0, 512, &[]); // held for an hour
    c.request(CMD_WRITE, 0, 2, 512, 512, &[3; 512]); // reader busy 400 ms
    c.request(CMD_READ, 0, 3, 512, 512, &[]); // arrives during shutdown
    std::thread::sleep(Duration::from_millis(150));
    let stopper = h.stopper();
    let t0 = Instant::now();
    stopper.stop();
    let joiner = std::thread::spawn(move || h.shutdown());
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = c.reply(|cookie| if cookie == 2 { 0 } else { 512 });
        got.push((r.cookie, r.error));
    }
    got.sort();
    // The held read completed (its data was read) so it succeeds; the write had
    // already started; the read queued behind it is refused.
    assert_eq!(got, vec![(1, 0), (2, 0), (3, 108)]);
    c.expect_closed();
    joiner.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
}

#[test]
fn a_client_that_stops_reading_cannot_block_shutdown_forever() {
    let cfg = ServerConfig { shutdown_grace: Duration::from_millis(500), ..Default::default() };
    let (h, _) = serve_with(MemBackend::single("d", 64 << 20), cfg);
    let mut c = Client::tcp(&h);
    c.negotiate("d", false, false);
    // Ask for far more reply data than socket buffers hold, never read it.
    let sender = std::thread::spawn(move || {
        for i in 0..64u64 {
            let m = Request { flags: 0, typ: CMD_READ, cookie: i, offset: 0, len: 1 << 20 }.encode();
            if std::io::Write::write_all(&mut c.s, &m).is_err() {
                break;
            }
        }
        c
    });
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    h.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    drop(sender.join().unwrap());
}
