//! Fast-forward workloads on every preset, printing the FTL fingerprint (map checksums and
//! counters) and the vendor log after each step. Built from two commits, it checks that an
//! FTL change leaves every fast-forward result bit-identical (docs/performance.md).
//!     cargo run --release -p ssdtwin-core --example ftl_fingerprints > after.txt
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::{Controller, NsId, Pattern, CONTROLLER_ID, NSID_ALL};
use ssdtwin_core::spec::{preset_names, DriveSpec};

fn dump(name: &str, step: &str, c: &mut Controller) {
    let f = c.ftl_fingerprint().unwrap();
    let v = serde_json::to_string(&c.vendor_log()).unwrap();
    println!("{name} {step} {} {} {:?}\n  {v}", f.l2p_xxh3, f.p2l_xxh3, f.counters);
}

fn main() {
    for name in preset_names() {
        let spec = DriveSpec::preset(name).unwrap().scaled(256).unwrap();
        let mut c = Controller::new(spec, 7).unwrap();
        let cap = c.attached(NsId(1)).unwrap().bytes();
        let mut go = |_: u64, _: u64| true;
        c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut go).unwrap();
        dump(name, "seq", &mut c);
        c.precondition(NsId(1), Pattern::Random, 4096, 2 * cap, 2, &mut go).unwrap();
        dump(name, "rand", &mut c);
        let lba = c.attached(NsId(1)).unwrap().lba_bytes as u64;
        c.deallocate(NsId(1), 0, cap / lba / 4).unwrap();
        for i in 0..2000u64 {
            c.write(NsId(1), (i * 7919) % (cap / lba - 64), 24, &mut NoTiming).unwrap();
            c.read(NsId(1), (i * 104_729) % (cap / lba - 64), 16, &mut NoTiming).unwrap();
        }
        c.idle_gc(1 << 20, &mut NoTiming).unwrap();
        dump(name, "trim-mixed-idle", &mut c);
        c.delete_ns(NsId(NSID_ALL)).unwrap();
        let blocks = cap / lba;
        for _ in 0..2 {
            let id = c.create_ns(blocks * 2 / 5, blocks * 2 / 5, 0, 0).unwrap();
            c.attach_ns(id, &[CONTROLLER_ID]).unwrap();
            let b = c.attached(id).unwrap().bytes();
            c.precondition(id, Pattern::Random, 4096, b, 3, &mut go).unwrap();
        }
        dump(name, "two-ns", &mut c);
        c.format(NsId(2), 0, 1).unwrap();
        dump(name, "format", &mut c);
    }
}
