//! The tier against a reference model: every read names a copy that holds the newest data,
//! bytes are conserved, the capacity and the watermarks hold (docs/host.md).

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::tier::*;

const IU: u64 = 16384;

fn config(policy: Policy, capacity_blocks: u64) -> TierConfig {
    TierConfig {
        policy,
        capacity_bytes: capacity_blocks * BLOCK_BYTES,
        high_watermark_pct: 75,
        low_watermark_pct: 50,
        destage_concurrency: 2,
        iu_bytes: IU,
        drive_bytes: 64 * 65536,
        stripe_bytes: 2 * IU,
        band_bytes: 131072,
        host_op_pct: 20,
        area_bytes: 0,
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write { block: u64, blocks: u64 },
    Read { block: u64, blocks: u64 },
    Destage,
    Done,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    // A small hot range so overwrites, full IUs and partial IUs all happen.
    let op = prop_oneof![
        4 => (0u64..200, 1u64..10).prop_map(|(block, blocks)| Op::Write { block, blocks }),
        1 => (0u64..200, 1u64..10).prop_map(|(block, blocks)| Op::Read { block, blocks }),
        2 => Just(Op::Destage),
        2 => Just(Op::Done),
    ];
    proptest::collection::vec(op, 1..400)
}

/// The reference: what the newest version of each host block is and where copies of which
/// version sit (the tier, the drive), from nothing but the tier's answers.
#[derive(Default)]
struct Model {
    latest: BTreeMap<u64, u64>,
    tier: BTreeMap<u64, u64>,
    drive: BTreeMap<u64, u64>,
    loc: BTreeMap<u64, u64>,
    version: u64,
    pending: VecDeque<u64>,
}

impl Model {
    fn write(&mut self, t: &mut Tier, block: u64, blocks: u64) {
        self.version += 1;
        let v = self.version;
        match t.write(block * BLOCK_BYTES, blocks * BLOCK_BYTES) {
            WriteOutcome::Full => {}
            WriteOutcome::Accepted { drive, .. } => {
                let mut direct = Vec::new();
                for op in drive {
                    let DriveOp::Write { offset, len } = op else { panic!("a write sent a read") };
                    direct.extend(offset / BLOCK_BYTES..(offset + len) / BLOCK_BYTES);
                }
                for b in block..block + blocks {
                    self.latest.insert(b, v);
                    if direct.contains(&b) {
                        self.drive.insert(b, v);
                        self.loc.insert(b, b);
                        self.tier.remove(&b);
                    } else {
                        self.tier.insert(b, v);
                    }
                }
            }
        }
    }

    fn read(&self, t: &mut Tier, block: u64, blocks: u64) {
        let plan = t.read(block * BLOCK_BYTES, blocks * BLOCK_BYTES);
        assert_eq!(plan.sources.len() as u64, blocks);
        for (i, src) in plan.sources.iter().enumerate() {
            let b = block + i as u64;
            let want = self.latest.get(&b);
            let got = match src {
                None => self.tier.get(&b),
                Some(u64::MAX) => None,
                Some(d) => self.drive.get(d),
            };
            assert_eq!(got, want, "block {b} read from {src:?}");
        }
    }

    fn destage(&mut self, t: &mut Tier) {
        let Some(d) = t.next_destage() else { return };
        let written: u64 = d.steps.iter().flatten().map(|op| if let DriveOp::Write { len, .. } = op { *len } else { 0 }).sum();
        assert!(written >= d.moves.len() as u64 * BLOCK_BYTES);
        for m in d.moves {
            let v = if m.from_tier {
                self.tier.remove(&m.user_block).expect("destaged a block the tier does not hold")
            } else {
                *self.drive.get(&self.loc[&m.user_block]).expect("relocated a block not on the drive")
            };
            self.drive.insert(m.drive_block, v);
            self.loc.insert(m.user_block, m.drive_block);
        }
        self.pending.push_back(d.id);
    }
}

fn conserved(t: &Tier) {
    let c = &t.counters;
    let out = c.destage_bytes + c.evict_bytes + c.overwrite_hit_bytes + c.dropped_bytes;
    assert_eq!(c.tier_write_bytes, t.resident_blocks() * BLOCK_BYTES + out, "{c:?}");
    assert_eq!(c.host_write_bytes, c.tier_write_bytes + c.bypass_bytes);
}

fn run(policy: Policy, capacity_blocks: u64, ops: Vec<Op>) {
    let cfg = config(policy, capacity_blocks);
    assert_eq!(cfg.problems(), Vec::<String>::new());
    let mut t = Tier::new(cfg.clone());
    let mut m = Model::default();
    let cap = cfg.capacity_bytes / BLOCK_BYTES;
    for op in ops {
        match op {
            Op::Write { block, blocks } => m.write(&mut t, block, blocks),
            Op::Read { block, blocks } => m.read(&mut t, block, blocks),
            Op::Destage => m.destage(&mut t),
            Op::Done => {
                if let Some(id) = m.pending.pop_front() {
                    t.destage_done(id);
                }
            }
        }
        t.check().unwrap();
        conserved(&t);
        assert!(t.occupancy_blocks() <= cap);
    }
    // Drain: every destage the tier wants, each completed. Then the tier sits at or below
    // its high watermark and every block still reads its newest version.
    while let Some(id) = m.pending.pop_front() {
        t.destage_done(id);
    }
    loop {
        m.destage(&mut t);
        match m.pending.pop_front() {
            Some(id) => t.destage_done(id),
            None => break,
        }
    }
    t.check().unwrap();
    assert!(t.occupancy_blocks() * 100 <= cap * cfg.high_watermark_pct as u64, "{} of {cap}", t.occupancy_blocks());
    m.read(&mut t, 0, 220);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn iu_fill_reads_the_newest_copy_and_conserves_bytes(ops in ops(), cap in 64u64..128) {
        run(Policy::IuFill, cap, ops);
    }

    #[test]
    fn log_reads_the_newest_copy_and_conserves_bytes(ops in ops(), cap in 32u64..96) {
        run(Policy::Log, cap, ops);
    }
}

#[test]
fn iu_fill_destages_a_filled_iu_whole_and_bypasses_aligned_ius() {
    let mut t = Tier::new(config(Policy::IuFill, 64));
    for b in 0..4 {
        assert_eq!(t.write(b * BLOCK_BYTES, BLOCK_BYTES), WriteOutcome::Accepted { tier_bytes: BLOCK_BYTES, drive: vec![] });
    }
    let d = t.next_destage().expect("a full IU");
    assert_eq!(d.steps, vec![vec![DriveOp::Write { offset: 0, len: IU }]]);
    assert_eq!(t.counters.destage_bytes, IU);
    assert_eq!(t.next_destage(), None, "below the watermarks nothing else leaves");
    // 4 KiB into IU 1, then IU 1 whole: the tier copy is dropped, the write bypasses.
    t.write(IU, BLOCK_BYTES);
    let out = t.write(IU, IU);
    assert_eq!(out, WriteOutcome::Accepted { tier_bytes: 0, drive: vec![DriveOp::Write { offset: IU, len: IU }] });
    assert_eq!((t.counters.bypass_bytes, t.counters.dropped_bytes, t.resident_blocks()), (IU, BLOCK_BYTES, 0));
}

#[test]
fn iu_fill_evicts_the_oldest_partial_ius_above_the_high_watermark() {
    let mut t = Tier::new(config(Policy::IuFill, 64));
    // 49 partial IUs (one block each): 49 of 64 blocks is above 75 %.
    for iu in 0..49 {
        t.write(iu * IU, BLOCK_BYTES);
    }
    let mut evicted = Vec::new();
    while let Some(d) = t.next_destage() {
        evicted.push(d.steps[0][0]);
        t.destage_done(d.id);
    }
    // Down to the low watermark (32 blocks), oldest first.
    assert_eq!(evicted.len(), 17);
    assert_eq!(evicted[0], DriveOp::Write { offset: 0, len: BLOCK_BYTES });
    assert_eq!(evicted[16], DriveOp::Write { offset: 16 * IU, len: BLOCK_BYTES });
    assert_eq!(t.counters.evictions, 17);
}

#[test]
fn a_full_tier_refuses_without_changing() {
    let mut t = Tier::new(config(Policy::IuFill, 64));
    for iu in 0..64 {
        assert!(matches!(t.write(iu * IU, BLOCK_BYTES), WriteOutcome::Accepted { .. }));
    }
    let before = t.counters.clone();
    assert_eq!(t.write(64 * IU, BLOCK_BYTES), WriteOutcome::Full);
    assert_eq!(t.counters.host_write_bytes, before.host_write_bytes);
}

#[test]
fn log_destages_whole_sequential_stripes_and_collects_its_bands() {
    let cfg = config(Policy::Log, 64);
    let mut t = Tier::new(cfg.clone());
    let user = t.user_bytes() / BLOCK_BYTES;
    // Random-ish 4 KiB writes over the whole space, several times over: the host GC runs.
    let mut x = 1u64;
    for _ in 0..(user * 4) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = (x >> 33) % user;
        while t.write(b * BLOCK_BYTES, BLOCK_BYTES) == WriteOutcome::Full {
            let d = t.next_destage().expect("a full log destages");
            for op in d.steps.iter().flatten() {
                if let DriveOp::Write { offset, len } = op {
                    assert_eq!(offset % IU, 0, "IU-aligned");
                    assert_eq!(len % IU, 0, "whole IUs");
                }
            }
            t.destage_done(d.id);
        }
    }
    t.check().unwrap();
    let c = &t.counters;
    assert!(c.gc_write_bytes > 0, "{c:?}");
    let waf = c.drive_write_bytes() as f64 / c.destage_bytes as f64;
    // Greedy GC with 20 % spare: between 1 and the uniform-random bound (~3.2 for 20 % spare, greedy GC, docs/models.md).
    assert!(waf > 1.0 && waf < 4.0, "host WAF {waf}");
}

#[test]
fn bad_parameters_name_the_field_and_range() {
    let mut cfg = config(Policy::Log, 64);
    cfg.high_watermark_pct = 40;
    cfg.low_watermark_pct = 60;
    cfg.destage_concurrency = 0;
    cfg.stripe_bytes = 5000;
    let p = cfg.problems();
    // Named by their keys in stack.toml and state.json (it said `low_watermark`, a key no
    // file has).
    assert!(p.iter().any(|l| l.starts_with("low_watermark_pct 60: 0 to high_watermark_pct - 1 (39)")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("destage_concurrency 0: 1 to 1024")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("stripe_bytes 5000")), "{p:?}");
    // Or as the caller names them (the CLI's flags), in the line and in its cross-references.
    let flag = |k: &str| format!("--{}", k.trim_end_matches("_pct").trim_end_matches("_bytes").replace('_', "-"));
    let p = cfg.problems_named(&flag);
    assert!(p.iter().any(|l| l.starts_with("--low-watermark 60: 0 to --high-watermark - 1 (39)")), "{p:?}");
    assert!(p.iter().any(|l| l.starts_with("--stripe 5000: a multiple of the drive's IU")), "{p:?}");
    cfg.stripe_bytes = 2 * IU;
    cfg.band_bytes = 3 * IU;
    assert!(cfg.problems_named(&flag).iter().any(|l| l.starts_with("--band 49152: a multiple of --stripe (32768)")));
    (cfg.band_bytes, cfg.host_op_pct) = (131072, 60);
    assert!(cfg.problems_named(&flag).iter().any(|l| l.starts_with("--host-op 60: 5 to 50")));
    for p in cfg.problems_named(&flag) {
        assert!(!p.contains('_'), "a field's own name: {p}");
    }
}

/// A tier larger than what it fronts (iu-fill: the namespace; log: the area it maps) never
/// fills: refused, naming the largest that is not (a 64 GiB tier, the size for a whole
/// P5316, given to a 60 GB scaled one was taken and its watermarks never acted).
#[test]
fn a_tier_larger_than_what_it_fronts_is_refused() {
    for (policy, area, fronts) in [(Policy::IuFill, 0, 64 * 65536), (Policy::Log, 0, 64 * 65536), (Policy::Log, 2 << 20, 2 << 20)] {
        let mut cfg = config(policy, 64);
        (cfg.area_bytes, cfg.host_op_pct) = (area, 30);
        cfg.capacity_bytes = fronts;
        assert_eq!(cfg.problems(), Vec::<String>::new(), "{policy:?}: a tier of all it fronts");
        cfg.capacity_bytes = fronts + BLOCK_BYTES;
        let p = cfg.problems();
        let want = format!("capacity_bytes {}: {} to {fronts} bytes, the ", fronts + BLOCK_BYTES, cfg.min_capacity_bytes());
        assert!(p.len() == 1 && p[0].starts_with(&want) && p[0].contains("never fills"), "{policy:?}: {p:?}");
        assert_eq!(p[0].contains("area_bytes"), area != 0, "{p:?}");
    }
}

/// A log tier's area past 2^32 - 2 blocks is refused: its maps hold 32-bit block numbers
/// (a 2^63-byte drive_bytes aborted the process allocating them); at the limit it is fine.
#[test]
fn a_log_area_beyond_32_bit_blocks_is_refused() {
    let max = (u32::MAX as u64 - 1) * BLOCK_BYTES;
    for (drive, area, field) in
        [(1u64 << 63, 0u64, "drive_bytes"), (max + BLOCK_BYTES, 0, "drive_bytes"), (1 << 63, max + BLOCK_BYTES, "area_bytes")]
    {
        let mut cfg = config(Policy::Log, 64);
        (cfg.drive_bytes, cfg.area_bytes) = (drive, area);
        let p = cfg.problems();
        let want = format!("{field} {}: the log tier maps at most {max} bytes", cfg.area());
        assert!(p.iter().any(|l| l.starts_with(&want)), "{p:?}");
    }
    let mut cfg = config(Policy::Log, 64);
    cfg.drive_bytes = max;
    assert!(!cfg.problems().iter().any(|l| l.contains("maps at most")), "{:?}", cfg.problems());
    cfg.policy = Policy::IuFill; // keeps no per-block map
    cfg.drive_bytes = 1 << 63;
    assert_eq!(cfg.problems(), Vec::<String>::new());
}

/// A log tier after five writes (one overwritten) and every destage they caused.
fn destaged_log_tier() -> Tier {
    let mut t = Tier::new(config(Policy::Log, 64));
    for b in [3u64, 99, 7, 3, 500] {
        t.write(b * BLOCK_BYTES, BLOCK_BYTES);
    }
    while let Some(d) = t.next_destage() {
        t.destage_done(d.id);
    }
    t
}

/// A saved tier whose state does not fit its parameters is refused on load, naming what
/// does not fit, instead of panicking on an index at the first destage or check.
#[test]
fn a_loaded_tier_that_does_not_fit_its_parameters_is_refused() {
    let t = destaged_log_tier();
    let saved = serde_json::to_value(&t).unwrap();
    let load = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = saved.clone();
        edit(&mut v);
        serde_json::from_value::<Tier>(v).unwrap().check_loaded()
    };
    assert_eq!(load(&|_| ()), Ok(()));
    fn log(v: &mut serde_json::Value) -> &mut serde_json::Value {
        &mut v["state"]["Log"]
    }
    type Edit<'a> = &'a dyn Fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 9] = [
        ("log: p2l entries 2, but the parameters make", &|v| log(v)["p2l"] = "0000000100000002".into()),
        ("log: l2p entries 2, but the parameters make", &|v| log(v)["l2p"] = "ffffffffffffffff".into()),
        ("log: band_state entries 1, but the parameters make", &|v| log(v)["band_state"] = serde_json::json!([0])),
        ("log: free band 1000000 is beyond the", &|v| log(v)["free_bands"] = serde_json::json!([1000000])),
        ("log: user_blocks 1099511627776", &|v| log(v)["user_blocks"] = (1u64 << 40).into()),
        ("log: band_blocks 0", &|v| log(v)["band_blocks"] = 0.into()),
        ("log: log entry's user block 1099511627776 is beyond", &|v| log(v)["log"] = serde_json::json!([[1u64 << 40, 0]])),
        ("destage_concurrency 0: 1 to 1024", &|v| v["config"]["destage_concurrency"] = 0.into()),
        ("the tier's state is not that of its policy IuFill", &|v| v["config"]["policy"] = "iu-fill".into()),
    ];
    for (want, edit) in cases {
        let e = load(edit).unwrap_err();
        assert!(e.starts_with(want), "{want}: {e}");
    }
    let iu = Tier::new(config(Policy::IuFill, 64));
    let back: Tier = serde_json::from_value(serde_json::to_value(&iu).unwrap()).unwrap();
    assert_eq!(back.check_loaded(), Ok(()));
}

#[test]
fn a_saved_tier_loads_back_identical() {
    let t = destaged_log_tier();
    let text = serde_json::to_string(&t).unwrap();
    let back: Tier = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), text);
    back.check().unwrap();
}

/// A write the tier has no room for makes it destage for that write, whatever the
/// watermarks: at a high watermark of 100 % nothing else ever starts a destage (the fio run
/// failed with "nothing left to destage", a served stack answered ENOSPC for ever).
#[test]
fn a_refused_write_makes_room_at_any_watermark() {
    for policy in [Policy::IuFill, Policy::Log] {
        let mut cfg = config(policy, 64);
        (cfg.high_watermark_pct, cfg.low_watermark_pct) = (100, 60);
        assert_eq!(cfg.problems(), Vec::<String>::new());
        let mut t = Tier::new(cfg);
        // iu-fill: one block in each of 64 IUs. log: one cold block at its head (so no stale
        // head entry can be dropped for room), then rewrites of 6 hot blocks: 7 valid blocks,
        // less than a stripe, so no full stripe leaves below the high watermark.
        let block = |i: u64| match (policy, i) {
            (Policy::IuFill, _) => i * (IU / BLOCK_BYTES),
            (Policy::Log, 0) => 100,
            (Policy::Log, _) => i % 6,
        };
        for i in 0..64 {
            assert!(matches!(t.write(block(i) * BLOCK_BYTES, BLOCK_BYTES), WriteOutcome::Accepted { .. }), "{policy:?} {i}");
            while let Some(d) = t.next_destage() {
                t.destage_done(d.id);
            }
        }
        assert_eq!(t.write(block(64) * BLOCK_BYTES, BLOCK_BYTES), WriteOutcome::Full, "{policy:?}");
        let d = t.next_destage().unwrap_or_else(|| panic!("{policy:?}: a full tier with a write waiting destages nothing"));
        t.destage_done(d.id);
        assert!(matches!(t.write(block(64) * BLOCK_BYTES, BLOCK_BYTES), WriteOutcome::Accepted { .. }), "{policy:?}");
        t.check().unwrap();
        conserved(&t);
    }
}

fn log_front(t: &Tier) -> serde_json::Value {
    serde_json::to_value(t).unwrap()["state"]["Log"]["user_front"].clone()
}

/// A log whose user frontier filled the area's last band saves and loads back: the
/// frontier then sits one past the last drive block until its next write opens a band
/// (loading refused it as "beyond the blocks there are": the stack image was unusable).
#[test]
fn a_log_frontier_at_the_end_of_its_area_loads_back() {
    let cfg = config(Policy::Log, 64);
    let drive_blocks = cfg.area() / BLOCK_BYTES;
    let mut t = Tier::new(cfg);
    let mut b = 0;
    while log_front(&t) != serde_json::json!(drive_blocks) {
        b = (b + 7) % (t.user_bytes() / BLOCK_BYTES);
        while t.write(b * BLOCK_BYTES, BLOCK_BYTES) == WriteOutcome::Full {
            let d = t.next_destage().expect("a full log destages");
            t.destage_done(d.id);
        }
        while let Some(d) = t.next_destage() {
            t.destage_done(d.id);
        }
        assert!(t.counters.host_write_bytes < 1 << 30, "the frontier never reached the area's end");
    }
    let back: Tier = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back.check_loaded(), Ok(()));
}

/// The parameters a log tier accepts never leave it stuck or turning: with few bands and
/// little host OP, the host GC must still always find a band worth collecting and a band to
/// relocate into (a run hung on a GC that freed nothing, or dropped the log's blocks when a
/// destage found no free band). Every block still reads its newest copy.
fn log_never_sticks(bands: u64, band_stripes: u64, host_op_pct: u32, seed: u64, writes: u64) {
    let stripe = IU;
    let band = band_stripes * stripe;
    let cfg = TierConfig {
        policy: Policy::Log,
        // No more than the area (a larger log is refused): down to the 4-stripe minimum.
        capacity_bytes: (4 * stripe.max(16 * BLOCK_BYTES)).min(bands * band),
        high_watermark_pct: 80,
        low_watermark_pct: 60,
        destage_concurrency: 2,
        iu_bytes: IU,
        drive_bytes: bands * band,
        stripe_bytes: stripe,
        band_bytes: band,
        host_op_pct,
        area_bytes: 0,
    };
    if !cfg.problems().is_empty() {
        return;
    }
    let mut t = Tier::new(cfg);
    let mut m = Model::default();
    let user = t.user_bytes() / BLOCK_BYTES;
    let mut x = seed;
    for _ in 0..writes {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = (x >> 33) % user;
        let mut turns = 0;
        loop {
            let before = t.counters.host_write_bytes;
            m.write(&mut t, b, 1);
            if t.counters.host_write_bytes > before {
                break;
            }
            // Full: a destage must come, and room within a bounded number of them.
            let pending = m.pending.len();
            m.destage(&mut t);
            assert!(m.pending.len() > pending || pending > 0, "stuck: full, nothing to destage, nothing in flight");
            if let Some(id) = m.pending.pop_front() {
                t.destage_done(id);
            }
            turns += 1;
            assert!(turns < 10_000, "the GC turns without making room");
        }
        m.destage(&mut t);
        if let Some(id) = m.pending.pop_front() {
            t.destage_done(id);
        }
        conserved(&t);
    }
    t.check().unwrap();
    m.read(&mut t, 0, user);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_log_the_parameters_accept_never_sticks(
        bands in 8u64..40, band_stripes in 1u64..5, host_op_pct in 5u32..51, seed in any::<u64>()
    ) {
        log_never_sticks(bands, band_stripes, host_op_pct, seed, 3_000);
    }
}

#[test]
fn too_few_bands_for_the_host_op_are_refused_naming_a_band_that_works() {
    let mut cfg = config(Policy::Log, 64);
    // 8 bands of 32 blocks, 20 % spare: 1.6 bands, under the 3 the GC runs below.
    (cfg.drive_bytes, cfg.band_bytes) = (8 * 131072, 131072);
    let p = cfg.problems();
    assert!(
        p.iter().any(|l| l.starts_with("band_bytes 131072: too few bands for host_op_pct 20 %") && l.contains("or raise host_op_pct")),
        "{p:?}"
    );
    cfg.host_op_pct = 50;
    assert_eq!(cfg.problems(), Vec::<String>::new());
}
