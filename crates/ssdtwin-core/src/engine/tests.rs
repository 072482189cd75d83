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
