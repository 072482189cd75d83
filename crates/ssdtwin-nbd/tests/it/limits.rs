//! Serving under load and abuse: the connection limit and its polite refusal, the
//! handshake and send timeouts, the in-flight byte budget, socket permissions,
//! listen errors and configuration warnings.

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{MemBackend, MemExport, Server, ServerConfig};

use crate::common::*;

const MIB: usize = 1 << 20;

fn raw(h: &ssdtwin_nbd::ServerHandle) -> TcpStream {
    let s = TcpStream::connect(h.tcp_addrs()[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Read until EOF or error; the bytes read.
fn read_to_close(mut s: &TcpStream) -> usize {
    let mut buf = [0u8; 4096];
    let mut n = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += k,
        }
    }
}

#[test]
fn connections_over_the_limit_are_told_why() {
    let cfg = ServerConfig { max_connections: 2, ..Default::default() };
    let (h, _) = serve_with(MemBackend::single("d", MIB as u64), cfg);
    let mut a = Client::tcp(&h);
    let mut b = Client::tcp(&h);
    a.negotiate("d", false, false);
    b.negotiate("d", false, false);
    // The third gets a greeting and an error naming the limit for every option.
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    let r = c.opt_reply();
    assert_eq!((r.option, r.typ), (OPT_STRUCTURED_REPLY, REP_ERR_POLICY));
    let msg = String::from_utf8(r.data).unwrap();
    assert!(msg.contains("too many connections") && msg.contains("at most 2"), "{msg}");
    c.option(OPT_GO, &Client::info_data("d", &[INFO_BLOCK_SIZE]));
    assert_eq!(c.opt_reply().typ, REP_ERR_POLICY);
    c.option(OPT_ABORT, &[]);
    assert_eq!(c.opt_reply().typ, REP_ACK);
    c.expect_closed();
    assert_eq!(h.stats().connections_refused, 1);
    // EXPORT_NAME cannot carry an error: the connection is closed.
    let mut d = Client::tcp(&h);
    d.flags(FLAG_C_FIXED_NEWSTYLE);
    d.option(OPT_EXPORT_NAME, b"d");
    d.expect_closed();
    assert_eq!(h.stats().connections_refused, 2);
    // The clients being served never noticed.
    assert_eq!(a.read(1, 0, 512).error, 0);
    assert_eq!(b.read(1, 0, 512).error, 0);
    // A slot freed is a slot for the next client.
    a.request(CMD_DISC, 0, 2, 0, 0, &[]);
    eventually("the server registers the disconnect", || h.stats().connections_active == 1);
    let mut e = Client::tcp(&h);
    e.negotiate("d", false, false);
    assert_eq!(e.read(1, 0, 512).error, 0);
}

#[test]
fn silent_and_trickling_clients_lose_their_slot() {
    let cfg = ServerConfig { max_connections: 2, handshake_timeout: Duration::from_millis(400), ..Default::default() };
    let (h, _) = serve_with(MemBackend::single("d", MIB as u64), cfg);
    let t0 = Instant::now();
    let silent = raw(&h);
    let trickle = raw(&h);
    let tw = trickle.try_clone().unwrap();
    // Client flags, then an option header one byte every 50 ms: data keeps arriving,
    // but the handshake never finishes.
    let sender = std::thread::spawn(move || {
        let mut w = &tw;
        let mut bytes = (FLAG_C_FIXED_NEWSTYLE).to_be_bytes().to_vec();
        bytes.extend_from_slice(&OptionHeader { option: OPT_GO, len: 1000 }.encode());
        for b in bytes.into_iter().chain(std::iter::repeat_n(0, 100)) {
            if std::io::Write::write_all(&mut w, &[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert_eq!(read_to_close(&silent), GREETING_LEN);
    assert_eq!(read_to_close(&trickle), GREETING_LEN);
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(3), "{took:?}");
    sender.join().unwrap();
    assert_eq!(h.stats().handshake_timeouts, 2);
    // Their slots are free again.
    let mut c = Client::tcp(&h);
    c.negotiate("d", false, false);
    assert_eq!(c.read(1, 0, 512).error, 0);
}

fn budget_backend() -> MemBackend {
    MemBackend::new().with_export(MemExport::new("d", 64 << 20).block_sizes(512, 4096, 4 << 20))
}

/// The same with every READ reply held 2 ms, as the drive model does: the reader
/// goes on reading requests while replies wait, so only the budget stops it.
fn paced_backend() -> MemBackend {
    MemBackend::new()
        .with_export(MemExport::new("d", 64 << 20).block_sizes(512, 4096, 4 << 20).with_latency(Duration::from_millis(2), Duration::ZERO))
}

/// A client that asks for `n` reads of `len` bytes and reads nothing.
fn stall(h: &ssdtwin_nbd::ServerHandle, n: u64, len: u32) -> Client {
    let mut c = Client::tcp(h);
    c.negotiate("d", false, false);
    for i in 0..n {
        c.request(CMD_READ, 0, i, (i * len as u64) % (64 << 20), len, &[]);
    }
    c
}

#[test]
fn a_client_that_does_not_read_is_held_to_its_share_of_the_budget() {
    held_to_share(false);
}

#[test]
fn a_paced_client_that_does_not_read_is_held_to_its_share_of_the_budget() {
    held_to_share(true);
}

fn held_to_share(paced: bool) {
    let cfg = ServerConfig { max_inflight_bytes: 8 * MIB, ..Default::default() };
    let backend = if paced { paced_backend() } else { budget_backend() };
    let (h, _) = serve_with(backend, cfg);
    let mut w = Client::tcp(&h);
    w.negotiate("d", false, false);
    let data = pattern(7, 16 * MIB);
    for (i, chunk) in data.chunks(MIB).enumerate() {
        assert_eq!(w.write(i as u64, (i * MIB) as u64, chunk, 0).error, 0);
    }
    let before = h.stats().requests;
    let mut stalled = stall(&h, 64, MIB as u32);
    // The server stops taking its requests once its share (a quarter: 2 MiB) is
    // charged and the socket buffers are full.
    let mut last = 0;
    eventually("the stalled connection stops being served", || {
        std::thread::sleep(Duration::from_millis(200));
        let now = h.stats().requests;
        let steady = now == last;
        last = now;
        steady
    });
    let s = h.stats();
    assert!(s.requests - before < 64, "every request was processed: {s:?}");
    assert!(s.inflight_bytes <= 2 * MIB as u64, "{s:?}");
    if paced {
        // Unpaced, the reader itself blocks sending; paced, the budget stops it.
        assert!(s.budget_waits >= 1, "{s:?}");
    }
    // Others are still served, from the rest of the budget.
    for i in 0..16u64 {
        let r = w.read(100 + i, i * MIB as u64, MIB as u32);
        assert_eq!(r.error, 0);
        assert_eq!(r.data, data[i as usize * MIB..(i as usize + 1) * MIB]);
    }
    assert!(h.stats().inflight_bytes_max <= 8 * MIB as u64);
    // Once it reads, it gets every reply, with the right data.
    for _ in 0..64 {
        let r = stalled.reply(|_| MIB);
        assert_eq!(r.error, 0);
        let off = (r.cookie as usize * MIB) % (64 << 20);
        let want: Vec<u8> = if off < 16 * MIB { data[off..off + MIB].to_vec() } else { vec![0; MIB] };
        assert!(r.data == want, "cookie {}", r.cookie);
    }
    eventually("all charges released", || h.stats().inflight_bytes == 0);
}

#[test]
fn many_stalled_clients_cannot_exceed_the_budget() {
    let cfg = ServerConfig { max_inflight_bytes: 8 * MIB, ..Default::default() };
    let (h, _) = serve_with(paced_backend(), cfg);
    let _stalled: Vec<Client> = (0..6).map(|_| stall(&h, 32, 4 * MIB as u32)).collect();
    let mut last = 0;
    eventually("the stalled connections stop being served", || {
        std::thread::sleep(Duration::from_millis(200));
        let now = h.stats().requests;
        let steady = now == last;
        last = now;
        steady
    });
    let s = h.stats();
    assert!(s.inflight_bytes_max <= 8 * MIB as u64, "{s:?}");
    assert!(s.requests < 6 * 32, "{s:?}");
}

#[test]
fn a_request_larger_than_the_budget_still_works() {
    let cfg = ServerConfig { max_inflight_bytes: MIB, ..Default::default() };
    let (h, _) = serve_with(budget_backend(), cfg);
    let mut c = Client::tcp(&h);
    c.negotiate("d", true, false);
    let data = pattern(3, 4 * MIB);
    assert_eq!(c.write(1, 0, &data, 0).error, 0);
    let r = c.read(2, 0, 4 * MIB as u32);
    assert_eq!(r.error, 0);
    assert!(r.data == data);
    assert_eq!(h.stats().inflight_bytes_max, 4 * MIB as u64);
}

#[test]
fn a_client_that_reads_nothing_is_dropped_after_the_send_timeout() {
    let cfg = ServerConfig { max_inflight_bytes: 8 * MIB, send_timeout: Duration::from_millis(300), ..Default::default() };
    let (h, _) = serve_with(budget_backend(), cfg);
    let _stalled = stall(&h, 64, 4 * MIB as u32);
    eventually("the stalled client is dropped", || {
        let s = h.stats();
        s.send_timeouts >= 1 && s.connections_active == 0
    });
    eventually("its charges are released", || h.stats().inflight_bytes == 0);
}

#[test]
fn unix_sockets_are_private_unless_a_group_is_given() {
    let backend = Arc::new(MemBackend::single("d", MIB as u64));
    let p = temp_path("private.sock");
    let h = Server::new(backend.clone()).listen_unix(&p).unwrap().start().unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    let mut c = Client::unix(&p);
    c.negotiate("d", false, false);
    drop(c);
    h.shutdown();

    // SAFETY: getgid cannot fail.
    let gid = unsafe { libc::getgid() };
    let p2 = temp_path("group.sock");
    let h = Server::new(backend.clone())
        .with_config(ServerConfig { unix_socket_group: Some(gid.to_string()), ..Default::default() })
        .listen_unix(&p2)
        .unwrap()
        .start()
        .unwrap();
    let md = std::fs::metadata(&p2).unwrap();
    assert_eq!((md.permissions().mode() & 0o777, md.gid()), (0o660, gid));
    h.shutdown();

    let p3 = temp_path("nogroup.sock");
    let e = Server::new(backend)
        .with_config(ServerConfig { unix_socket_group: Some("no-such-group-ssdtwin".into()), ..Default::default() })
        .listen_unix(&p3)
        .unwrap()
        .start()
        .err()
        .expect("unknown group");
    assert_eq!(e.to_string(), "unix socket group \"no-such-group-ssdtwin\": no such group");
}

#[test]
fn a_port_in_use_names_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = Server::new(Arc::new(MemBackend::single("d", MIB as u64))).listen_tcp(addr.to_string().as_str()).err().expect("port in use");
    assert_eq!(e.to_string(), format!("listen on {addr}: address already in use (another server?)"));
}

#[test]
fn listening_beyond_loopback_without_tls_warns() {
    let backend = Arc::new(MemBackend::single("d", MIB as u64));
    let h = Server::new(backend.clone()).listen_tcp("127.0.0.1:0").unwrap().start().unwrap();
    assert!(h.warnings().is_empty(), "{:?}", h.warnings());
    h.shutdown();
    let h = Server::new(backend).listen_tcp("0.0.0.0:0").unwrap().start().unwrap();
    let w = h.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("listening on 0.0.0.0:") && w[0].contains("without TLS"), "{w:?}");
}
