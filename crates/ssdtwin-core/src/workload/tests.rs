use super::*;
use std::cell::Cell;

thread_local! {
    /// Generators made on this thread draw nothing ahead (the reference for the draws
    /// taken ahead to prefetch the random map).
    pub(super) static NO_DRAWS_AHEAD: Cell<bool> = const { Cell::new(false) };
}

/// `fill_uniform`, `fill_uniform_map` and `fill_plain_map` issue exactly what `fill`
/// issues, for every job they apply to: the fio golden jobs without their random map (norandommap) and with it,
/// size- and time-based, two seeds each, with regions that end off the block grid. The
/// time-based map runs fill the map and start it over many times (a run's I/Os are many
/// times the region's blocks).
#[test]
fn the_uniform_fast_paths_issue_what_the_general_path_issues() {
    #[derive(serde::Deserialize)]
    struct Golden {
        spec: JobSpec,
    }
    let goldens: Vec<Golden> = serde_json::from_str(include_str!("../../tests/data/fio_goldens.json")).unwrap();
    let (mut applied, mut applied_map, mut applied_plain, mut map_full) = (0, 0, 0, 0);
    for g in goldens {
        // `small_other`: the directions a one-direction job does not use get half its block
        // size, so fio's map counts smaller blocks than the job's, and the job's blocks
        // past the map's next free one can lie beyond its region (`fixed_block_at`).
        for (norandommap, small_other) in [(true, false), (false, false), (false, true)] {
            if small_other && g.spec.directions.len() != 1 {
                continue;
            }
            for (time_based, seed, trim_bytes) in [(false, 1u64, 0u64), (true, 7, 0), (false, 3, 1536), (true, 11, 512)] {
                let mut spec = g.spec.clone();
                if small_other {
                    let used = spec.directions[0];
                    for (d, bs) in [(Ddir::Read, &mut spec.bs.read), (Ddir::Write, &mut spec.bs.write), (Ddir::Trim, &mut spec.bs.trim)] {
                        if d != used && bs.min >= 1024 {
                            (bs.min, bs.max, bs.split) = (bs.min / 2, bs.min / 2, None);
                        }
                    }
                    spec.bssplit_fio = None;
                }
                spec.norandommap = norandommap;
                spec.seed ^= seed;
                spec.time_based = time_based;
                if time_based {
                    spec.runtime_ns = 1;
                }
                spec.size_bytes -= trim_bytes.min(spec.size_bytes / 2);
                let target = spec.target_size_bytes;
                let Ok(mut fast) = Generator::new(spec.clone(), target) else { continue };
                let mut general = Generator::new(spec, target).unwrap();
                match (fast.uniform, fast.uniform_map) {
                    (true, _) => applied += 1,
                    (_, true) => applied_map += 1,
                    _ => continue,
                }
                applied_plain += fast.plain_map.is_some() as u32;
                (general.uniform, general.uniform_map, general.plain_map) = (false, false, None);
                let blocks = fast.lastb.iter().copied().max().unwrap_or(0);
                for i in 0..50_000u64 {
                    let (a, b) = (fast.next_io(), general.next_io());
                    assert_eq!(a, b, "I/O {i} (random map: {})", !norandommap);
                    if a.is_none() {
                        break;
                    }
                    if fast.uniform_map && time_based && i == blocks + 1 {
                        map_full += 1;
                    }
                }
            }
        }
    }
    assert!(applied >= 20, "{applied} jobs took the fast path");
    assert!(applied_map >= 20, "{applied_map} jobs took the fast path with a map");
    assert!(map_full >= 10, "{map_full} time-based map runs went past a full map");
    assert!(applied_plain >= 8, "{applied_plain} jobs took the plain map path");
}

/// The offset stream's draws taken ahead to prefetch a large random map's words
/// (`DrawsAhead`) leave the I/Os as they are without them: a map past
/// `PREFETCH_MAP_BLOCKS`, one direction and two with different block sizes (draws scaled
/// for one block count used for the other), passes that re-seed the streams, a
/// time-based run past a full map.
#[test]
fn draws_taken_ahead_leave_the_ios_as_they_are() {
    use crate::engine::fio::tests::job_template;
    use serde_json::json;
    let gib = 1u64 << 30;
    let base = |extra: serde_json::Value| {
        let mut v = job_template();
        v["target_size_bytes"] = json!(8 * gib);
        v["lba_bytes"] = json!(512);
        v["size_bytes"] = json!(5 * gib);
        v["io_size_bytes"] = json!(5 * gib);
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value::<JobSpec>(v).unwrap()
    };
    let bs = |b: u64| json!({"min": b, "max": b, "split": null});
    let mixed = json!({"rw": "randrw", "directions": ["read", "write"], "rwmixread": 60,
        "bs": {"read": bs(4096), "write": bs(16384), "trim": bs(4096)},
        "blockalign": {"read": 4096, "write": 16384, "trim": 4096}});
    let cases: Vec<(JobSpec, u64)> = vec![
        (base(json!({"size_bytes": 4200u64 << 20, "io_size_bytes": 4200u64 << 20, "loops": 2})), 2_200_000),
        (base(mixed.clone()), 100_000),
        (base(json!({"time_based": true, "runtime_ns": 1, "size_bytes": 4200u64 << 20, "io_size_bytes": 4200u64 << 20})), 1_200_000),
    ];
    for (k, (spec, ios)) in cases.into_iter().enumerate() {
        let target = spec.target_size_bytes;
        NO_DRAWS_AHEAD.set(true);
        let mut plain = Generator::new(spec.clone(), target).unwrap();
        NO_DRAWS_AHEAD.set(false);
        let mut ahead = Generator::new(spec, target).unwrap();
        assert!(ahead.ahead.is_some() && plain.ahead.is_none(), "case {k}");
        let mut passes_reseeded = 0;
        assert!(ahead.randrepeat);
        for i in 0..ios {
            NO_DRAWS_AHEAD.set(true);
            let want = plain.next_io();
            NO_DRAWS_AHEAD.set(false);
            assert_eq!(ahead.next_io(), want, "case {k}, I/O {i}");
            if want.is_none() {
                break;
            }
            passes_reseeded = ahead.passes_done;
        }
        if k == 0 {
            assert_eq!(passes_reseeded, 1, "the second pass re-seeds the streams");
        }
    }
}

/// Percentages fio keeps to 0..=100 are refused outside it (a contract input built by hand
/// ran with them: rwmixread 513 read only, latency_percentile NaN ran a latency target no
/// window could judge); the golden jobs' own values still build.
#[test]
fn out_of_range_percentages_are_refused() {
    #[derive(serde::Deserialize)]
    struct Golden {
        spec: JobSpec,
    }
    let goldens: Vec<Golden> = serde_json::from_str(include_str!("../../tests/data/fio_goldens.json")).unwrap();
    let spec = goldens.into_iter().map(|g| g.spec).find(|s| Generator::new(s.clone(), s.target_size_bytes).is_ok()).unwrap();
    let target = spec.target_size_bytes;
    let reason = |s: JobSpec| Generator::new(s, target).err().map(|e| e.reason).unwrap_or_default();
    for (field, set) in [
        ("rwmixread 101", Box::new(|s: &mut JobSpec| s.rwmixread = 101) as Box<dyn Fn(&mut JobSpec)>),
        ("rwmixwrite 513", Box::new(|s: &mut JobSpec| s.rwmixwrite = 513)),
        ("percentage_random.write 101", Box::new(|s: &mut JobSpec| s.percentage_random.write = 101)),
        ("latency_percentile NaN", Box::new(|s: &mut JobSpec| s.latency_percentile = f64::NAN)),
        ("latency_percentile inf", Box::new(|s: &mut JobSpec| s.latency_percentile = f64::INFINITY)),
        ("latency_percentile -1", Box::new(|s: &mut JobSpec| s.latency_percentile = -1.0)),
        ("latency_percentile 100.5", Box::new(|s: &mut JobSpec| s.latency_percentile = 100.5)),
    ] {
        let mut s = spec.clone();
        set(&mut s);
        let r = reason(s);
        assert!(r.starts_with(field) && r.contains("must be 0..=100"), "{field}: {r}");
    }
    let mut s = spec.clone();
    (s.rwmixread, s.rwmixwrite, s.percentage_random.read, s.latency_percentile) = (100, 0, 100, 0.0);
    assert!(Generator::new(s, target).is_ok());
}
