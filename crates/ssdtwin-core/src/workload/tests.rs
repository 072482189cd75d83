use super::*;

/// `fill_uniform` and `fill_uniform_map` issue exactly what `fill` issues, for every job
/// they apply to: the fio golden jobs without their random map (norandommap) and with it,
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
    let (mut applied, mut applied_map, mut map_full) = (0, 0, 0);
    for g in goldens {
        for norandommap in [true, false] {
            for (time_based, seed, trim_bytes) in [(false, 1u64, 0u64), (true, 7, 0), (false, 3, 1536), (true, 11, 512)] {
                let mut spec = g.spec.clone();
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
                (general.uniform, general.uniform_map) = (false, false);
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
}
