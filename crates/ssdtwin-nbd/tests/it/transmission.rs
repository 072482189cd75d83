//! Requests and replies over real sockets, including malformed input.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ssdtwin_nbd::mem::Op;
use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{Backend as _, Export as _, MemBackend, MemExport};

use crate::common::*;

const MIB: u64 = 1 << 20;

fn disk() -> MemBackend {
    MemBackend::new()
        .with_export(MemExport::new("disk", 4 * MIB).block_sizes(512, 4096, 1 << 20))
        .with_export(MemExport::new("ro", MIB).read_only(true))
        .with_export(MemExport::new("slowzero", MIB).with_info(|i| i.can_fast_zero = false))
}

#[test]
fn write_read_flush_fua_simple_replies() {
    let (h, b) = serve(disk());
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    let data = pattern(1, 64 << 10);
    assert_eq!(c.write(1, 8192, &data, 0).error, 0);
    assert_eq!(c.write(2, 0, &data[..4096], CMD_FLAG_FUA).error, 0);
    let r = c.read(3, 8192, data.len() as u32);
    assert!(!r.structured);
    assert_eq!((r.cookie, r.error), (3, 0));
    assert_eq!(r.data, data);
    c.request(CMD_FLUSH, 0, 4, 0, 0, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    let e = b.export("disk").unwrap();
    assert_eq!(e.counters.fua_writes.load(Relaxed), 1);
    assert_eq!(e.counters.flushes.load(Relaxed), 1);
    // DISC: no reply, the server closes.
    c.request(CMD_DISC, 0, 5, 0, 0, &[]);
    c.expect_closed();
}

#[test]
fn structured_reads_and_error_chunks() {
    let (h, _) = serve(disk());
    let mut c = Client::tcp(&h);
    let go = c.negotiate("disk", true, false);
    assert!(c.tflags & TFLAG_SEND_DF != 0, "{go:?}");
    let data = pattern(2, 4096);
    c.write(1, 4096, &data, 0);
    c.request(CMD_READ, CMD_FLAG_DF, 2, 4096, 4096, &[]);
    let r = c.reply_nodata();
    assert!(r.structured);
    assert_eq!((r.cookie, r.error), (2, 0));
    assert_eq!(r.data, data);
    // Beyond the end: an ERROR chunk with a message.
    c.request(CMD_READ, 0, 3, 4 * MIB, 512, &[]);
    let r = c.reply_nodata();
    assert_eq!((r.cookie, r.error), (3, 22));
    assert!(String::from_utf8_lossy(&r.message).contains("beyond the end"), "{:?}", r.message);
    // Larger than the maximum payload: EOVERFLOW for structured reads.
    c.request(CMD_READ, 0, 4, 0, 2 << 20, &[]);
    assert_eq!(c.reply_nodata().error, 75);
    // A zero-length read is answered (NONE chunk), not a disconnect.
    c.request(CMD_READ, 0, 5, 0, 0, &[]);
    let r = c.reply_nodata();
    assert_eq!((r.cookie, r.error, r.data.len()), (5, 0, 0));
}

#[test]
fn error_values_follow_the_spec() {
    let (h, b) = serve(disk());
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    let end = 4 * MIB;
    let cases: Vec<(u16, u16, u64, u32, u32)> = vec![
        // (command, flags, offset, length, expected error)
        (CMD_READ, 0, end - 512, 1024, 22),
        (CMD_TRIM, 0, end, 512, 22),
        (CMD_CACHE, 0, end, 512, 22),
        (CMD_WRITE_ZEROES, 0, end - 512, 4096, 28),
        (CMD_READ, 0, 100, 512, 22),                      // misaligned offset
        (CMD_TRIM, 0, 0, 100, 22),                        // misaligned length
        (CMD_READ, 0, 0, 2 << 20, 22),                    // over block_max, simple reply
        (CMD_READ, 0, u64::MAX - 255, 512, 22),           // offset + len overflows
        (42, 0, 0, 0, 22),                                // unknown command
        (CMD_RESIZE, 0, 0, 0, 22),                        // experimental, not negotiated
        (CMD_READ, 1 << 12, 0, 512, 22),                  // unknown flag
        (CMD_READ, CMD_FLAG_DF, 0, 512, 22),              // DF without structured replies
        (CMD_BLOCK_STATUS, 0, 0, 512, 22),                // no meta context selected
        (CMD_WRITE_ZEROES, CMD_FLAG_REQ_ONE, 0, 512, 22), // flag of another command
    ];
    for (i, &(typ, flags, off, len, want)) in cases.iter().enumerate() {
        c.request(typ, flags, 100 + i as u64, off, len, &[]);
        let r = c.reply_nodata();
        assert_eq!((r.cookie, r.error), (100 + i as u64, want), "case {i}: {:?}", cases[i]);
    }
    // Write beyond the end: ENOSPC, and the payload is consumed so the stream stays
    // in step (the next request parses).
    let r = c.write(7, end - 512, &[1; 1024], 0);
    assert_eq!((r.cookie, r.error), (7, 28));
    // Write with a bad flag: EINVAL, payload consumed.
    let r = c.write(8, 0, &[1; 512], CMD_FLAG_NO_HOLE);
    assert_eq!((r.cookie, r.error), (8, 22));
    // Oversized write within the discard limit: EINVAL, stream in step.
    let big = vec![3u8; 2 << 20];
    let r = c.write(9, 0, &big, 0);
    assert_eq!((r.cookie, r.error), (9, 22));
    let r = c.read(10, 0, 512);
    assert_eq!((r.cookie, r.error), (10, 0));
    assert_eq!(r.data, vec![0; 512], "refused writes must not change data");
    assert_eq!(b.export("disk").unwrap().counters.writes.load(Relaxed), 0);
    assert!(h.stats().error_replies >= cases.len() as u64 + 3);
}

#[test]
fn read_only_export_refuses_writes() {
    let (h, b) = serve(disk());
    let mut c = Client::tcp(&h);
    c.negotiate("ro", false, false);
    assert!(c.tflags & TFLAG_READ_ONLY != 0);
    assert_eq!(c.write(1, 0, &[1; 512], 0).error, 1);
    c.request(CMD_TRIM, 0, 2, 0, 512, &[]);
    assert_eq!(c.reply_nodata().error, 1);
    c.request(CMD_WRITE_ZEROES, 0, 3, 0, 512, &[]);
    assert_eq!(c.reply_nodata().error, 1);
    assert_eq!(c.read(4, 0, 512).error, 0);
    assert_eq!(b.export("ro").unwrap().counters.writes.load(Relaxed), 0);
}

#[test]
fn write_zeroes_trim_fast_zero_cache() {
    let (h, b) = serve(disk());
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    assert!(c.tflags & TFLAG_SEND_FAST_ZERO != 0);
    c.write(1, 0, &[9; 8192], 0);
    c.request(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE | CMD_FLAG_FUA, 2, 512, 1024, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    let r = c.read(3, 0, 2048);
    assert_eq!(&r.data[..512], &[9; 512][..]);
    assert_eq!(&r.data[512..1536], &[0; 1024][..]);
    assert_eq!(&r.data[1536..], &[9; 512][..]);
    c.request(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 4, 0, 4096, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    c.request(CMD_TRIM, 0, 5, 4096, 4096, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    assert_eq!(c.read(6, 0, 8192).data, vec![0; 8192]);
    c.request(CMD_CACHE, 0, 7, 0, 1 << 20, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    // Trim and write zeroes may exceed the maximum payload (1 MiB here).
    c.request(CMD_TRIM, 0, 8, 0, (2 * MIB) as u32, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    let e = b.export("disk").unwrap();
    assert_eq!(e.counters.zeroes.load(Relaxed), 2);
    assert_eq!(e.counters.caches.load(Relaxed), 1);

    // An export that cannot zero fast: ENOTSUP, data untouched.
    let mut c = Client::tcp(&h);
    c.negotiate("slowzero", false, false);
    assert!(c.tflags & TFLAG_SEND_FAST_ZERO != 0);
    c.write(1, 0, &[5; 512], 0);
    c.request(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 2, 0, 512, &[]);
    assert_eq!(c.reply_nodata().error, 95);
    assert_eq!(c.read(3, 0, 512).data, vec![5; 512]);
    assert_eq!(b.export("slowzero").unwrap().counters.zeroes.load(Relaxed), 0);
}

#[test]
fn block_status_extents_and_req_one() {
    let (h, _) = serve(disk());
    let mut c = Client::tcp(&h);
    c.negotiate("disk", true, true);
    c.write(1, 128 << 10, &[1; 4096], 0);
    c.request(CMD_BLOCK_STATUS, 0, 2, 0, (4 * MIB) as u32, &[]);
    let r = c.reply_nodata();
    assert_eq!(r.error, 0);
    assert_eq!(r.extents, vec![(128 << 10, STATE_HOLE | STATE_ZERO), (64 << 10, 0), ((4 * MIB - (192 << 10)) as u32, 3)]);
    c.request(CMD_BLOCK_STATUS, CMD_FLAG_REQ_ONE, 3, 4096, 8192, &[]);
    let r = c.reply_nodata();
    assert_eq!(r.extents, vec![(8192, STATE_HOLE | STATE_ZERO)]);
    c.request(CMD_BLOCK_STATUS, 0, 4, 4 * MIB - 512, 1024, &[]);
    assert_eq!(c.reply_nodata().error, 22);
}

#[test]
fn bad_request_magic_is_a_hard_disconnect_and_others_carry_on() {
    let (h, _) = serve(disk());
    let mut good = Client::tcp(&h);
    good.negotiate("disk", false, false);
    let mut bad = Client::tcp(&h);
    bad.negotiate("disk", false, false);
    let mut m = Request { flags: 0, typ: CMD_READ, cookie: 1, offset: 0, len: 512 }.encode();
    m[0] = 0x12; // historic 0x12560953 is reserved, not accepted
    m[1] = 0x56;
    m[2] = 0x09;
    m[3] = 0x53;
    bad.send(&m);
    bad.expect_closed();
    assert_eq!(good.read(1, 0, 512).error, 0);
    // Extended-header magic (never negotiated) is also refused.
    let mut bad = Client::tcp(&h);
    bad.negotiate("disk", false, false);
    let mut m = [0u8; 32];
    m[..4].copy_from_slice(&EXTENDED_REQUEST_MAGIC.to_be_bytes());
    bad.send(&m);
    bad.expect_closed();
    eventually("protocol errors counted", || h.stats().protocol_errors == 2);
}

#[test]
fn enormous_write_length_disconnects() {
    let (h, b) = serve(disk());
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    c.request(CMD_WRITE, 0, 1, 0, 0xffff_fe00, &[0; 4096]);
    c.expect_closed();
    assert_eq!(b.export("disk").unwrap().counters.writes.load(Relaxed), 0);
}

#[test]
fn dropped_mid_write_leaves_data_and_other_connections_alone() {
    let (h, b) = serve(disk());
    let mut other = Client::tcp(&h);
    other.negotiate("disk", false, false);
    other.write(1, 0, &[4; 4096], 0);
    for partial in [10usize, 4000, 200_000] {
        let mut c = Client::tcp(&h);
        c.negotiate("disk", false, false);
        let len = 512 * 1024u32;
        // Header plus part of the payload, then vanish.
        let mut m = Request { flags: 0, typ: CMD_WRITE, cookie: 9, offset: 0, len }.encode().to_vec();
        m.extend(vec![0xee; partial]);
        c.send(&m);
        drop(c);
    }
    // Also a connection dropped in the middle of a request header.
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    c.send(&Request { flags: 0, typ: CMD_READ, cookie: 1, offset: 0, len: 512 }.encode()[..11]);
    drop(c);
    eventually("dropped connections cleaned up", || {
        b.export("disk").unwrap().counters.connections_open.load(Relaxed) == 1 && h.stats().connections_active == 1
    });
    let r = other.read(2, 0, 4096);
    assert_eq!(r.data, vec![4; 4096], "partial write must not be applied");
    assert_eq!(b.export("disk").unwrap().counters.writes.load(Relaxed), 1);
}

#[test]
fn eof_without_disc_is_clean() {
    let (h, b) = serve(disk());
    {
        let mut c = Client::tcp(&h);
        c.negotiate("disk", false, false);
        c.write(1, 0, &[1; 512], 0);
        // fio's engine just closes the socket.
    }
    eventually("connection closed", || h.stats().connections_active == 0);
    assert_eq!(b.export("disk").unwrap().counters.connections_open.load(Relaxed), 0);
    assert_eq!(h.stats().protocol_errors, 0);
}

#[test]
fn paced_replies_go_out_of_order_and_on_time() {
    // Reads at offset 0 take 300 ms, everything else is immediate or 20 ms.
    let b = MemBackend::single("p", MIB).with_export(MemExport::new("paced", MIB).with_pacing(|op, off, _| match op {
        Op::Read if off == 0 => Some(Duration::from_millis(300)),
        Op::Read if off == 4096 => Some(Duration::from_millis(20)),
        _ => None,
    }));
    let (h, _) = serve(b);
    let mut c = Client::tcp(&h);
    c.negotiate("paced", true, false);
    let t0 = Instant::now();
    // Pipelined: slow read, paced read, unpaced write, unpaced read.
    c.request(CMD_READ, 0, 1, 0, 4096, &[]);
    c.request(CMD_READ, 0, 2, 4096, 4096, &[]);
    c.request(CMD_WRITE, 0, 3, 8192, 512, &[6; 512]);
    c.request(CMD_READ, 0, 4, 8192, 512, &[]);
    let mut order = Vec::new();
    let mut when = HashMap::new();
    for _ in 0..4 {
        let r = c.reply_nodata();
        assert_eq!(r.error, 0);
        order.push(r.cookie);
        when.insert(r.cookie, t0.elapsed());
    }
    assert_eq!(order, vec![3, 4, 2, 1], "{when:?}");
    assert!(when[&1] >= Duration::from_millis(300), "{when:?}");
    assert!(when[&2] >= Duration::from_millis(20), "{when:?}");
    assert!(when[&4] < Duration::from_millis(250), "an unpaced reply waited for a paced one: {when:?}");
    drop(c);
    eventually("pacer stats published", || h.stats().replies_paced == 2);
}

/// A memory disk whose WRITEs are timed 5 ms in the past (the export took longer than its
/// model said: a slow fsync, a wait for a lock) and whose TRIMs are timed now.
struct Overdue(Arc<dyn ssdtwin_nbd::Export>);

impl ssdtwin_nbd::Export for Overdue {
    fn info(&self) -> ssdtwin_nbd::ExportInfo {
        let mut i = self.0.info();
        i.can_trim = true;
        i
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<ssdtwin_nbd::Done, ssdtwin_nbd::Errno> {
        self.0.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<ssdtwin_nbd::Done, ssdtwin_nbd::Errno> {
        self.0.write(offset, data, fua)?;
        Ok(ssdtwin_nbd::Done::at(Instant::now() - Duration::from_millis(5)))
    }
    fn trim(&self, _offset: u64, _len: u32, _fua: bool) -> Result<ssdtwin_nbd::Done, ssdtwin_nbd::Errno> {
        Ok(ssdtwin_nbd::Done::at(Instant::now()))
    }
}

struct OverdueBackend(Arc<Overdue>);

impl ssdtwin_nbd::Backend for OverdueBackend {
    fn exports(&self) -> Vec<ssdtwin_nbd::ExportInfo> {
        vec![self.0.info()]
    }
    fn default_export(&self) -> Option<String> {
        Some("disk".into())
    }
    fn open(&self, name: &str) -> Option<Arc<dyn ssdtwin_nbd::Export>> {
        (name == "disk").then(|| self.0.clone() as Arc<dyn ssdtwin_nbd::Export>)
    }
}

#[test]
fn replies_whose_time_passed_before_they_were_ready_count_as_paced_and_late() {
    // They were sent at once and counted nowhere: a drive model's write whose fsync outlasted
    // its model latency was neither paced nor late, and ssdtwin serve's summary under-counted
    // both ("paced replies" 5 of 7 timed replies, the trim and write-zeroes left out).
    let mem = MemBackend::single("disk", 1 << 20).open("disk").unwrap();
    let b = Arc::new(OverdueBackend(Arc::new(Overdue(mem))));
    let h = ssdtwin_nbd::Server::new(b).listen_tcp("127.0.0.1:0").unwrap().start().unwrap();
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
    for k in 0..3u64 {
        assert_eq!(c.write(k, k * 4096, &[k as u8; 4096], 0).error, 0);
    }
    c.request(CMD_TRIM, 0, 9, 0, 4096, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    assert_eq!(c.read(10, 0, 4096).error, 0); // Done::NOW: not paced
    drop(c);
    eventually("stats published", || h.stats().connections_active == 0);
    let s = h.stats();
    assert_eq!(s.replies_paced, 4, "{s:?}");
    assert!(s.replies_late >= 3 && s.late_ns_max >= 5_000_000 && s.late_ns_sum >= 15_000_000, "{s:?}");
}

#[test]
fn pacing_under_load_holds_every_reply_until_due() {
    // Latency by offset: 0, 2, 4, ... 18 ms, so replies reorder heavily; more requests
    // than the pacer may hold at once (4096) forces the reader to wait for room.
    let lat = |off: u64| Duration::from_millis((off / 4096 % 10) * 2);
    let b = MemBackend::single("p", 64 * MIB).with_export(MemExport::new("paced", 64 * MIB).with_pacing(move |op, off, _| match op {
        Op::Read | Op::Write { .. } => Some(lat(off)),
        _ => None,
    }));
    let (h, _) = serve(b);
    let (mut c, mut w) = Client::tcp_split(&h);
    c.negotiate("paced", true, false);
    let n = 6000u64;
    let sent: Arc<std::sync::Mutex<Vec<Option<Instant>>>> = Arc::new(std::sync::Mutex::new(vec![None; n as usize]));
    let sent2 = sent.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for k in 0..n {
            let off = (k % 16384) * 4096;
            let typ = if k % 3 == 0 { CMD_WRITE } else { CMD_READ };
            let mut m = Request { flags: 0, typ, cookie: k, offset: off, len: 4096 }.encode().to_vec();
            if typ == CMD_WRITE {
                m.extend(pattern(off, 4096));
            }
            sent2.lock().unwrap()[k as usize] = Some(Instant::now());
            w.write_all(&m).unwrap();
        }
    });
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let r = c.reply_nodata();
        let at = Instant::now();
        assert_eq!(r.error, 0);
        let k = r.cookie;
        assert!(!seen[k as usize], "duplicate reply {k}");
        seen[k as usize] = true;
        let off = (k % 16384) * 4096;
        let t_sent = sent.lock().unwrap()[k as usize].expect("reply before request was sent");
        assert!(at - t_sent >= lat(off), "reply {k} after {:?}, before its {:?}", at - t_sent, lat(off));
    }
    writer.join().unwrap();
    assert!(seen.iter().all(|&x| x));
    eventually("all paced", || h.stats().replies_paced >= n * 9 / 10);
}

#[test]
fn many_connections_at_once() {
    let (h, b) = serve(MemBackend::single("d", 64 * MIB));
    let h = Arc::new(h);
    let n = 16;
    let start = Arc::new(Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let h = h.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let mut c = Client::tcp(&h);
                c.negotiate("d", i % 2 == 0, false);
                start.wait();
                let base = i as u64 * 4 * MIB;
                // Pipeline 32 writes, then read everything back.
                for k in 0..32u64 {
                    let d = pattern(i as u64 * 1000 + k, 16 << 10);
                    c.request(CMD_WRITE, 0, k, base + k * (16 << 10), d.len() as u32, &d);
                }
                let mut seen: Vec<u64> = (0..32).map(|_| c.reply_nodata().cookie).collect();
                seen.sort();
                assert_eq!(seen, (0..32).collect::<Vec<_>>());
                for k in 0..32u64 {
                    let r = c.read(100 + k, base + k * (16 << 10), 16 << 10);
                    assert_eq!(r.data, pattern(i as u64 * 1000 + k, 16 << 10));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(b.export("d").unwrap().counters.writes.load(Relaxed), 32 * n as u64);
}
