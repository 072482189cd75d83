//! The drive model behind the server (`ssdtwin_serve::TwinBackend`): exports per namespace, data, the FTL
//! in step with the data, pacing, durability and recovery, metrics and live.json.
//! End-to-end runs with real clients (fio, qemu-img, nbdcopy, nbdfuse) are in
//! tests/test_serve.py.

use ssdtwin_core::nvme::NsId;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ssdtwin_core::image::Image;
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::{self, Pattern};
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{Backend, Errno, Export, ZeroFlags};
use ssdtwin_serve::{nbd_errno, Pace, ServeOptions, Serving, TwinBackend, TwinConfig};

use crate::common::*;

const CM6: &str = "kioxia-cm6-r-3.84t";
const P5316: &str = "intel-p5316-15.36t";

/// A fresh image of `preset` at 1/`scale` in a temp dir; `setup` may change it before the
/// commit (namespaces, preconditioning).
fn image(preset: &str, scale: u32, setup: impl FnOnce(&mut Image)) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("img");
    let spec = DriveSpec::preset(preset).unwrap().scaled(scale).unwrap();
    let mut img = Image::create(&d, spec, preset, 3).unwrap();
    setup(&mut img);
    img.commit().unwrap();
    (t, d)
}

fn cfg(pace: Pace) -> TwinConfig {
    TwinConfig { pace, ..TwinConfig::default() }
}

fn export(b: &TwinBackend, name: &str) -> Arc<dyn Export> {
    b.open(name).unwrap_or_else(|| panic!("no export {name}"))
}

fn same_ftl(live: &ssdtwin_serve::LiveFingerprint, img: &mut Image) {
    assert_eq!(live.ftl, img.ctrl.ftl_fingerprint().unwrap(), "the FTL differs after recovery");
}

#[test]
fn errors_map_once_to_nbd_errnos() {
    let st = |status| nvme::Error::Status { status, detail: String::new() };
    assert_eq!(nbd_errno(&st(nvme::Status::LbaOutOfRange), false), Errno::Inval);
    assert_eq!(nbd_errno(&st(nvme::Status::LbaOutOfRange), true), Errno::NoSpc);
    assert_eq!(nbd_errno(&st(nvme::Status::NamespaceWriteProtected), true), Errno::Perm);
    assert_eq!(nbd_errno(&st(nvme::Status::InvalidNamespaceOrFormat), false), Errno::Io);
}

/// ns1: 512 B LBAs, attached; ns2: detached; ns3: 4 KiB LBAs, write protected.
fn three_namespaces(img: &mut Image) {
    let c = &mut img.ctrl;
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    let gib = 1u64 << 30;
    let a = c.create_ns(gib / 512, gib / 512, 0, 0).unwrap();
    let b = c.create_ns(gib / 512, gib / 512, 0, 0).unwrap();
    let f4k = c.spec().capacity.lba_bytes.value.iter().position(|&s| s == 4096).unwrap() as u8;
    let d = c.create_ns(gib / 4096, gib / 4096, f4k, 0).unwrap();
    assert_eq!((a, b, d), (NsId(1), NsId(2), NsId(3)));
    c.attach_ns(NsId(1), &[1]).unwrap();
    c.attach_ns(NsId(3), &[1]).unwrap();
    c.set_feature(0x84, NsId(3), nvme::WP_PROTECT as u32).unwrap();
}

#[test]
fn exports_follow_the_namespace_table() {
    let (_t, d) = image(P5316, 256, three_namespaces);
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    let ex = b.exports();
    let names: Vec<_> = ex.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["ns1", "ns3"], "a detached namespace is not exported");
    assert_eq!(b.default_export().as_deref(), Some("ns1"));
    let (e1, e3) = (&ex[0], &ex[1]);
    assert_eq!((e1.size, e1.block_min, e1.block_preferred, e1.block_max), (1 << 30, 512, 65536, 32 << 20));
    assert_eq!((e3.size, e3.block_min, e3.block_preferred), (1 << 30, 4096, 65536));
    assert!(!e1.read_only && e3.read_only);
    assert!(e1.can_multi_conn && e1.can_flush && e1.can_fua && e1.can_trim && e1.can_write_zeroes);
    // Data files exist for the attached namespaces only, sparse and sized.
    for (n, want) in [(1, true), (2, false), (3, true)] {
        let p = d.join(format!("data/ns{n}.img"));
        assert_eq!(p.exists(), want, "{}", p.display());
        if want {
            let md = std::fs::metadata(&p).unwrap();
            assert_eq!(md.len(), 1 << 30);
            assert!(std::os::unix::fs::MetadataExt::blocks(&md) < 64, "data file is not sparse");
        }
    }

    // Over the wire: the detached namespace is unknown, the protected one refuses writes
    // with EPERM, misaligned or out-of-range requests get the spec's errors.
    let srv = ssdtwin_nbd::Server::new(b.clone()).listen_tcp("127.0.0.1:0").unwrap().start().unwrap();
    let mut c = Client::tcp(&srv);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.option(OPT_GO, &Client::info_data("ns2", &[INFO_BLOCK_SIZE]));
    assert_eq!(c.opt_replies().last().unwrap().typ, REP_ERR_UNKNOWN);
    c.option(OPT_GO, &Client::info_data("ns3", &[INFO_BLOCK_SIZE]));
    let r = c.opt_replies();
    assert_eq!(r.last().unwrap().typ, REP_ACK);
    let bs = r.iter().find_map(|x| match decode_info(&x.data) {
        Ok(Info::BlockSize { min, preferred, max }) => Some((min, preferred, max)),
        _ => None,
    });
    assert_eq!(bs, Some((4096, 65536, 32 << 20)));
    assert_eq!(c.write(1, 0, &[7u8; 4096], 0).error, Errno::Perm.code());
    let rd = c.read(2, 0, 4096);
    assert_eq!((rd.error, rd.data), (0, vec![0u8; 4096]));
    assert_eq!(c.read(3, 512, 4096).error, Errno::Inval.code(), "4 KiB LBAs: 512 B offsets are misaligned");

    let mut c = Client::tcp(&srv);
    c.negotiate("", false, false); // the default export: ns1
    assert_eq!(c.size, 1 << 30);
    assert_eq!(c.write(4, 100, &[1u8; 512], 0).error, Errno::Inval.code());
    assert_eq!(c.write(5, (1 << 30) - 512, &[1u8; 1024], 0).error, Errno::NoSpc.code());
    assert_eq!(c.read(6, (1 << 30) - 512, 1024).error, Errno::Inval.code());
    assert_eq!(c.write(7, 4096, &pattern(1, 8192), 0).error, 0);
    assert_eq!(c.read(8, 4096, 8192).data, pattern(1, 8192));
    drop(c);
    srv.shutdown();
    b.close().unwrap();
}

#[test]
fn data_and_ftl_stay_in_step() {
    let (_t, d) = image(CM6, 454, |_| {});
    // The reference: the controller commands each NBD command should become, applied in
    // fast-forward to a copy of the same image (4 KiB IUs, 512 B LBAs).
    let mut reference = Image::open(&d, false).unwrap();
    let r = &mut reference.ctrl;
    // Load its maps now: the server may commit (recording its data files) and remove them.
    r.ftl_fingerprint().unwrap();
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    let e = export(&b, "ns1");
    let data = pattern(9, 1 << 20);
    e.write(1 << 20, &data, false).unwrap();
    r.write(NsId(1), 2048, 2048, &mut NoTiming).unwrap();
    let mut back = vec![0u8; 1 << 20];
    e.read(1 << 20, &mut back).unwrap();
    r.read(NsId(1), 2048, 2048, &mut NoTiming).unwrap();
    assert_eq!(back, data);
    let mut z = vec![1u8; 4096];
    e.read(0, &mut z).unwrap();
    r.read(NsId(1), 0, 8, &mut NoTiming).unwrap();
    assert!(z.iter().all(|&x| x == 0), "never-written blocks read as zeroes");

    // TRIM of whole 4 KiB IUs: holes and deallocated; a partial IU keeps its data (and its
    // mapping: NVMe deallocation is advisory).
    e.trim((1 << 20) + 4096, 8192, false).unwrap();
    r.deallocate(NsId(1), 2048 + 8, 16).unwrap();
    e.trim((1 << 20) + 65536 + 512, 1024, false).unwrap();
    r.deallocate(NsId(1), 2048 + 128 + 1, 2).unwrap();
    let mut back = vec![0u8; 1 << 20];
    e.read(1 << 20, &mut back).unwrap();
    r.read(NsId(1), 2048, 2048, &mut NoTiming).unwrap();
    assert!(back[4096..12288].iter().all(|&x| x == 0));
    assert_eq!(&back[..4096], &data[..4096]);
    assert_eq!(&back[12288..], &data[12288..], "a partial-IU trim leaves the data");

    // WRITE_ZEROES with holes: the range reads zero, its whole IUs are deallocated and the
    // partial IUs at its edges written. With NO_HOLE the FTL writes the whole range.
    let (zo, zl) = ((2u64 << 20) - 512, 4096 * 3 + 1024);
    e.write_zeroes(zo, zl, ZeroFlags::default()).unwrap();
    r.deallocate(NsId(1), 4096, 24).unwrap(); // [2 MiB, 2 MiB + 12 KiB)
    r.write(NsId(1), 4095, 1, &mut NoTiming).unwrap(); // the 512 B below 2 MiB
    r.write(NsId(1), 4096 + 24, 1, &mut NoTiming).unwrap(); // the 512 B above
    let mut back = vec![1u8; 4096 * 4];
    e.read(2 << 20, &mut back).unwrap();
    r.read(NsId(1), 4096, 32, &mut NoTiming).unwrap();
    assert!(back[..12288 + 512].iter().all(|&x| x == 0));
    e.write(8 << 20, &data[..65536], false).unwrap();
    r.write(NsId(1), 16384, 128, &mut NoTiming).unwrap();
    e.write_zeroes(8 << 20, 65536, ZeroFlags { no_hole: true, ..Default::default() }).unwrap();
    r.write(NsId(1), 16384, 128, &mut NoTiming).unwrap();
    let mut back = vec![1u8; 65536];
    e.read(8 << 20, &mut back).unwrap();
    r.read(NsId(1), 16384, 128, &mut NoTiming).unwrap();
    assert!(back.iter().all(|&x| x == 0));
    assert_eq!(e.write_zeroes(0, 4096, ZeroFlags { no_hole: true, fast: true, fua: false }).unwrap_err(), Errno::NotSup);

    // Block status from the data file: the trimmed range is a hole, data is data.
    let mut ext = Vec::new();
    e.block_status(1 << 20, 65536, &mut ext).unwrap();
    assert_eq!((ext[0].flags, ext[0].len), (0, 4096));
    assert_eq!((ext[1].flags, ext[1].len), (STATE_HOLE | STATE_ZERO, 8192));
    assert_eq!(ext.iter().map(|x| x.len as u64).sum::<u64>(), 65536);

    let live = b.fingerprint().unwrap();
    b.close().unwrap();
    same_ftl(&live, &mut reference);
    let mut img = Image::open(&d, false).unwrap();
    same_ftl(&live, &mut img);
}

#[test]
fn replies_wait_for_the_model() {
    let (_t, d) = image(CM6, 454, |img| {
        let cap = img.ctrl.attached(NsId(1)).unwrap().bytes();
        img.ctrl.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
    });
    let spec = Image::open(&d, false).unwrap().ctrl.spec().clone();
    let t = spec.timing.clone().unwrap();
    let floor = Duration::from_nanos(t.t_read_ns.value + t.ctrl_read_ns.value);
    let b = TwinBackend::open(&d, cfg(Pace::Model)).unwrap();
    let e = export(&b, "ns1");
    let mut buf = vec![0u8; 4096];
    for i in 1..50u64 {
        let t0 = Instant::now();
        // Away from namespace offset 0: the sequential fill wraps there, so its last IUs
        // are still in the write buffer (reads from DRAM, faster than NAND).
        let done = e.read((64 + i * 7) << 20, &mut buf).unwrap();
        let at = done.not_before.expect("a paced read has a completion time");
        assert!(at >= t0 + floor, "read {i} completes {:?} after arrival, the NAND read alone takes {floor:?}", at - t0);
        assert!(at < t0 + Duration::from_millis(50), "an idle drive reads in well under 50 ms");
        std::thread::sleep(Duration::from_millis(2));
    }
    b.close().unwrap();
    // Fast-forward: replies go out at once.
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    assert_eq!(export(&b, "ns1").read(0, &mut buf).unwrap().not_before, None);
    b.close().unwrap();
}

/// The journal makes the FTL state after `kill -9` equal to the state at the last flush:
/// a paced run with idle gaps (background GC), TRIM and WRITE_ZEROES, ending with a flush.
#[test]
fn a_killed_server_recovers_the_ftl_of_its_last_flush() {
    let (_t, d) = image(CM6, 454, |img| {
        let cap = img.ctrl.attached(NsId(1)).unwrap().bytes();
        img.ctrl.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
        img.ctrl.precondition(NsId(1), Pattern::Random, 4096, cap, 2, &mut |_, _| true).unwrap();
    });
    let gen0 = Image::open(&d, false).unwrap().generation();
    let b =
        TwinBackend::open(&d, TwinConfig { pace: Pace::Model, idle_after: Duration::from_micros(200), ..TwinConfig::default() }).unwrap();
    let e = export(&b, "ns1");
    let size = e.info().size;
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut written = Vec::new();
    for round in 0..30 {
        for _ in 0..400 {
            let off = next() % (size / 4096 - 16) * 4096;
            match next() % 10 {
                0..=6 => {
                    let len = 4096 * (1 + next() % 8) as usize;
                    e.write(off, &pattern(off, len), false).unwrap();
                    written.push((off, len));
                }
                7 => {
                    e.trim(off, 65536, false).unwrap();
                }
                8 => {
                    e.write_zeroes(off, 3 * 4096 + 512, ZeroFlags::default()).unwrap();
                }
                _ => {
                    let mut buf = vec![0u8; 8192];
                    e.read(off, &mut buf).unwrap();
                }
            }
        }
        // An idle gap: the housekeeping step gives background GC the time.
        std::thread::sleep(Duration::from_millis(5));
        b.tick().unwrap();
        if round == 10 {
            b.commit().unwrap(); // a commit mid-run: the journal restarts at the new generation
        }
    }
    let moved = b.summary().unwrap().idle_gc_moved_ius;
    assert!(moved > 0, "the run must exercise background GC for this test to mean anything");
    e.flush().unwrap();
    let live = b.fingerprint().unwrap();
    // Writes after the flush that were never written to the journal file: a real kill may
    // lose them; the state then is the flushed one.
    let off = 12345 * 4096;
    e.write(off, &[0xAB; 4096], false).unwrap();
    b.crash_for_tests();

    let mut img = Image::open(&d, true).unwrap();
    let rec = img.recovery().cloned().expect("recovery report");
    assert_eq!(rec.action, ssdtwin_core::image::RecoveryAction::Replayed);
    assert!(rec.records > 0);
    assert!(img.generation() > gen0 + 1, "mid-run commit plus the recovery commit");
    same_ftl(&live, &mut img);
    img.ctrl.check_full().unwrap();
    assert_eq!(img.ctrl.smart_log().unsafe_shutdowns, 1);
}

/// Files of this process open under `dir` (from /proc/self/fd).
fn open_files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(&dir))
        .collect()
}

#[test]
fn a_killed_server_leaves_no_file_of_the_image_open() {
    // A crash in the tests drops the journal's unwritten buffer as a kill does; it used to
    // forget the writer instead, leaking its descriptor: `make sim` ran out of them after a
    // few thousand crashes ("Too many open files" opening the image again).
    let (_t, d) = image(CM6, 454, |_| {});
    for _ in 0..3 {
        let b = TwinBackend::open(&d, cfg(Pace::Model)).unwrap();
        let e = export(&b, "ns1");
        e.write(0, &[0x5A; 4096], false).unwrap();
        assert!(!open_files_under(&d).is_empty(), "the served image keeps its files open");
        b.crash_for_tests();
        drop(e);
        drop(b);
        assert_eq!(open_files_under(&d), Vec::<PathBuf>::new(), "files of the image still open after the crash");
        Image::open(&d, true).unwrap().ctrl.check_full().unwrap();
    }
}

/// Every file of an image but LOCK (which a writable open rewrites), with its length and
/// modification time.
fn files_of(dir: &std::path::Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let (p, md) = (e.as_ref().unwrap().path(), e.unwrap().metadata().unwrap());
            if md.is_dir() {
                todo.push(p);
            } else if p.file_name() != Some("LOCK".as_ref()) {
                out.push((p, md.len(), md.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_server_that_cannot_start_leaves_the_image_as_it_was() {
    // A busy --metrics address, a duplicated --listen, a file where the unix socket goes,
    // missing TLS certificates or an unknown socket group were found after the image was
    // opened: the failed start committed a generation, made the data files and wrote
    // live.json, although docs/cli.md promises a server that cannot start changes nothing.
    use ssdtwin_nbd::{ServerConfig, TlsMode};
    let (t, d) = image(CM6, 454, |_| {});
    let before = files_of(&d);
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    let file = t.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let sock = t.path().join("s.sock");
    let base = || ServeOptions { tcp: vec!["127.0.0.1:0".into()], twin: cfg(Pace::Off), ..ServeOptions::default() };
    let cases = [
        (ServeOptions { metrics: Some(busy.clone()), ..base() }, "metrics listener"),
        (ServeOptions { tcp: vec![busy.clone()], ..base() }, "address already in use"),
        (ServeOptions { unix: vec![file.clone()], ..base() }, "not a socket"),
        (
            ServeOptions {
                server: ServerConfig { tls: TlsMode::Require, tls_certificates: Some(t.path().join("pki")), ..ServerConfig::default() },
                ..base()
            },
            "server-cert.pem",
        ),
        (
            ServeOptions {
                unix: vec![sock.clone()],
                server: ServerConfig { unix_socket_group: Some("no-such-group-s52".into()), ..ServerConfig::default() },
                ..base()
            },
            "no such group",
        ),
    ];
    for (opts, why) in cases {
        let e = Serving::start(&d, opts).err().expect("the server must not start").to_string();
        assert!(e.contains(why), "{e}");
        assert_eq!(files_of(&d), before, "a server that could not start ({e}) changed the image");
        assert!(!sock.exists(), "the unix socket file outlived the failed start ({e})");
    }
    // Nothing was opened: the image is not locked, and a good start still works.
    let s = Serving::start(&d, base()).unwrap();
    s.stop().unwrap();
}

#[test]
fn serving_exposes_metrics_and_live_state_and_stops_cleanly() {
    let (_t, d) = image(CM6, 454, |_| {});
    let gen0 = Image::open(&d, false).unwrap().generation();
    let opts = ServeOptions {
        tcp: vec!["127.0.0.1:0".into()],
        metrics: Some("127.0.0.1:0".into()),
        twin: cfg(Pace::Model),
        ..ServeOptions::default()
    };
    let s = Serving::start(&d, opts).unwrap();
    assert!(s.uris()[0].starts_with("nbd://127.0.0.1:") && s.uris()[0].ends_with("/ns1"), "{:?}", s.uris());
    // The image is locked while serving.
    assert!(Image::open(&d, true).is_err());
    let mut c = Client::tcp_addr(s.tcp_addrs()[0]);
    c.negotiate("ns1", true, false);
    for i in 0..64u64 {
        assert_eq!(c.write(i, i * 65536, &pattern(i, 65536), 0).error, 0);
    }
    c.request(CMD_FLUSH, 0, 99, 0, 0, &[]);
    assert_eq!(c.reply_nodata().error, 0);
    assert_eq!(c.read(100, 0, 4096).data, pattern(0, 65536)[..4096]);

    let get = |path: &str| -> String {
        let mut t = std::net::TcpStream::connect(s.metrics_addr().unwrap()).unwrap();
        write!(t, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        t.read_to_string(&mut out).unwrap();
        out
    };
    let m = get("/metrics");
    assert!(m.starts_with("HTTP/1.0 200 OK"), "{m}");
    for name in [
        "ssdtwin_host_write_bytes_total",
        "ssdtwin_nand_write_bytes_total{cause=\"host\"}",
        "ssdtwin_waf ",
        "ssdtwin_gc_victims_total",
        "ssdtwin_erases_total",
        "ssdtwin_free_superblocks",
        "ssdtwin_buffered_bytes",
        "ssdtwin_nbd_commands_total{op=\"write\"} 64",
        "ssdtwin_nbd_replies_late_total",
        "ssdtwin_nbd_connections 1",
        "ssdtwin_model_latency_seconds_bucket{le=\"+Inf\",op=\"write\"} 64",
        "ssdtwin_model_latency_seconds_count{op=\"read\"} 1",
    ] {
        assert!(m.contains(name), "metrics lack {name}:\n{m}");
    }
    assert!(get("/nope").starts_with("HTTP/1.0 404"));
    assert!(get("/debug/ftl").contains("l2p_xxh3"));

    // live.json appears within a second or so and carries the logs.
    eventually("live.json with the writes", || {
        std::fs::read_to_string(d.join("live.json")).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).is_some_and(
            |v| v["serving"] == true && v["vendor_log"]["host_write_bytes"].as_u64() == Some(64 * 65536) && v["pid"] == std::process::id(),
        )
    });
    drop(c);
    let summary = s.stop().unwrap();
    assert_eq!(summary.unwrap().writes, 64);
    assert!(!d.join("journal.bin").exists(), "a clean stop commits and removes the journal");
    let live: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("live.json")).unwrap()).unwrap();
    assert_eq!(live["serving"], false);
    let img = Image::open(&d, true).unwrap();
    assert!(img.recovery().is_none());
    // The typed read-back (what `ssdtwin nvme …` shows while serving) is the image's view.
    let snap = ssdtwin_serve::read_live(&d).expect("live.json reads back as a LiveSnapshot");
    assert!(!snap.serving);
    assert_eq!(snap.view, img.ctrl.view(), "live.json's drive view is the committed image's");
    assert_eq!(snap.view.id_ns(NsId(1)).unwrap().nsze, img.ctrl.id_ns(NsId(1)).unwrap().nsze);
    assert_eq!(snap.view.id_ns(NsId(9)).unwrap_err().to_string(), img.ctrl.id_ns(NsId(9)).unwrap_err().to_string());
    // One commit records the new data files when serving starts, one at the clean stop.
    assert_eq!(img.generation(), gen0 + 2);
    assert_eq!(img.ctrl.vendor_log().host_write_bytes, 64 * 65536);
    assert!(img.ctrl.state().clock_ns > 0, "serving time counts as power-on time");
}

#[test]
fn flush_and_fua_sync_group_commit() {
    // Many connections flushing at once: every FLUSH returns only after the data it covers
    // is synced; concurrent flushes share syncs (fewer syncs than flushes).
    let (_t, d) = image(CM6, 454, |_| {});
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    let threads: Vec<_> = (0..8u64)
        .map(|k| {
            let e = export(&b, "ns1");
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    let off = (k * 1000 + i) * 4096;
                    e.write(off, &pattern(off, 4096), i % 10 == 0).unwrap();
                    e.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = b.summary();
    let s = s.unwrap();
    assert_eq!(s.flushes, 400);
    assert!(s.syncs > 0);
    b.crash_for_tests();
    // Every flushed write is on disk and in the recovered FTL.
    let img = Image::open(&d, true).unwrap();
    assert_eq!(img.ctrl.vendor_log().host_write_bytes, 400 * 4096);
    assert_eq!(img.ctrl.ftl_counters().host_write_bytes, 400 * 4096);
    // Read back only the blocks written: the data file is the whole namespace (9.4 GB,
    // sparse at 1/454), and reading all of it took a minute of system time.
    let f = std::fs::File::open(d.join("data/ns1.img")).unwrap();
    let mut block = vec![0u8; 4096];
    for k in 0..8u64 {
        for i in 0..50u64 {
            let off = (k * 1000 + i) * 4096;
            f.read_exact_at(&mut block, off).unwrap();
            assert_eq!(block, pattern(off, 4096));
        }
    }
}

#[test]
fn namespace_changes_drop_or_recreate_data_files() {
    let (_t, d) = image(CM6, 454, |_| {});
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    export(&b, "ns1").write(0, &[5u8; 4096], true).unwrap();
    b.close().unwrap();
    let mut img = Image::open(&d, true).unwrap();
    // Format (a purge): the controller deallocates, the image drops the data.
    img.ctrl.format(NsId(1), 0, 1).unwrap();
    img.drop_data(1).unwrap();
    img.commit().unwrap();
    assert!(!d.join("data/ns1.img").exists());
    // A stale file of a namespace that no longer exists is removed before serving.
    std::fs::write(d.join("data/ns9.img"), b"stale").unwrap();
    drop(img);
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    assert!(!d.join("data/ns9.img").exists());
    let mut z = vec![1u8; 4096];
    export(&b, "ns1").read(0, &mut z).unwrap();
    assert!(z.iter().all(|&x| x == 0), "formatted namespace reads zeroes");
    b.close().unwrap();
}

/// A command the controller refuses (here: a write-protected namespace) must not reach the
/// data file: the export asks the controller before it writes, trims or zeroes.
#[test]
fn refused_writes_leave_the_data_as_it_was() {
    let (_t, d) = image(CM6, 454, |_| {});
    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    let e = export(&b, "ns1");
    e.write(0, &[0xA5; 4096], false).unwrap();
    e.flush().unwrap();
    b.close().unwrap();
    let mut img = Image::open(&d, true).unwrap();
    img.ctrl.set_feature(0x84, NsId(1), nvme::WP_PROTECT as u32).unwrap();
    img.commit().unwrap();
    drop(img);

    let b = TwinBackend::open(&d, cfg(Pace::Off)).unwrap();
    let e = export(&b, "ns1");
    assert!(e.write(0, &[0x5A; 4096], false).is_err(), "a write to a write-protected namespace is refused");
    assert!(e.trim(0, 4096, false).is_err(), "so is a trim");
    let zeroes = ZeroFlags { no_hole: true, ..ZeroFlags::default() };
    assert!(e.write_zeroes(0, 4096, zeroes).is_err(), "and writing zeroes");
    let mut buf = vec![0u8; 4096];
    e.read(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 0xA5), "the refused commands changed the data");
    b.close().unwrap();
}

/// Feature 01h over the wire (weighted round robin, docs/nbd.md): a low-class connection pipelines reads that queue
/// at a slow command fetch (10 ms per command here); a read arriving on a high-class
/// connection is fetched at the next slot under WRR, and after the whole backlog under
/// round robin (the default: arrival order). The order is read from client-side clocks in
/// two threads, so a slot must be long beside a busy machine's scheduling delays: at 2 ms
/// per command a CI run (tests running beside each other on 2 cores) once counted 3 low
/// replies before the high one.
#[test]
fn wrr_fetches_a_high_class_connection_first() {
    for (feature, wrr) in [(0u32, false), (0x0f03_0000, true)] {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("img");
        let mut spec = DriveSpec::preset(P5316).unwrap().scaled(256).unwrap();
        spec.timing.as_mut().unwrap().ctrl_max_iops.value = 100;
        let mut img = Image::create(&d, spec, P5316, 3).unwrap();
        let c = &mut img.ctrl;
        c.detach_ns(NsId(1), &[1]).unwrap();
        c.delete_ns(NsId(1)).unwrap();
        for (n, class) in [(1, 1u8), (2, 3u8)] {
            c.create_ns(1 << 17, 1 << 17, 0, 0).unwrap();
            c.attach_ns(NsId(n), &[1]).unwrap();
            c.set_sq_priority(NsId(n), class).unwrap();
        }
        c.set_feature(0x01, NsId(0), feature).unwrap();
        img.commit().unwrap();
        drop(img);
        let b = TwinBackend::open(&d, cfg(Pace::Model)).unwrap();
        let srv = ssdtwin_nbd::Server::new(b.clone()).listen_tcp("127.0.0.1:0").unwrap().start().unwrap();
        let mut low = Client::tcp(&srv);
        low.negotiate("ns2", false, false);
        let mut high = Client::tcp(&srv);
        high.negotiate("ns1", false, false);
        const BACKLOG: u64 = 8;
        for i in 0..BACKLOG {
            low.request(CMD_READ, 0, i, i * 4096, 4096, &[]);
        }
        assert_eq!(low.reply(|_| 4096).error, 0); // the backlog is queued by now
        std::thread::sleep(Duration::from_millis(1));
        let reader = std::thread::spawn(move || (1..BACKLOG).map(|_| (low.reply(|_| 4096).error, Instant::now())).collect::<Vec<_>>());
        high.request(CMD_READ, 0, 100, 0, 4096, &[]);
        assert_eq!(high.reply(|_| 4096).error, 0);
        let t_high = Instant::now();
        let lows = reader.join().unwrap();
        assert!(lows.iter().all(|l| l.0 == 0));
        let before = lows.iter().filter(|l| l.1 < t_high).count();
        if wrr {
            assert!(before <= 2, "WRR: {before} low-class replies came before the high-class one");
        } else {
            assert_eq!(before, BACKLOG as usize - 1, "round robin: the high-class read waits for the backlog");
        }
        srv.shutdown();
        b.close().unwrap();
    }
}
