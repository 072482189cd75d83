use super::Calendar;

#[test]
fn calendar_fills_gaps_in_time_order() {
    let mut c = Calendar::default();
    assert_eq!(c.reserve(0, 100, 10), 100);
    // Ready earlier than the queued transfer: goes first, in the gap.
    assert_eq!(c.reserve(0, 50, 10), 50);
    // Does not fit in [60, 100) with 45: after 110.
    assert_eq!(c.reserve(0, 60, 45), 110);
    assert_eq!(c.reserve(0, 60, 40), 60);
    assert_eq!(c.busy[c.head..].to_vec(), vec![(50, 155)]);
    // Past intervals are forgotten.
    assert_eq!(c.reserve(200, 200, 5), 200);
    assert_eq!(c.busy.len() - c.head, 1);
}

#[test]
fn fast_decode_matches_full_decode() {
    use crate::ftl::FastDiv;
    for name in crate::spec::preset_names() {
        let spec = crate::spec::DriveSpec::preset(name).unwrap().scaled(64).unwrap();
        let g = spec.geometry();
        let iu = spec.ftl.iu_bytes.value as u64;
        let per_pu = g.ius_per_program_unit(iu);
        let total = (g.physical_ius(iu) as u32).min(5_000_000);
        for ppa in (0..total).step_by(997) {
            let a = g.locate(ppa, iu);
            assert_eq!(g.die_channel_plane(ppa, per_pu, FastDiv::new(per_pu), FastDiv::new(g.dies())), (a.die, a.channel, a.plane), "{name} {ppa}");
        }
    }
}
