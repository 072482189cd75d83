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

mod suspend {
    use super::super::DeviceTiming;
    use crate::nvme::Controller;
    use crate::spec::DriveSpec;

    const T_R: u64 = 50_000;
    const T_PROG: u64 = 1_500_000;

    /// A CM6-V 1.6 TB timing model with round numbers, and its controller.
    fn timing() -> (DeviceTiming, Controller) {
        let spec = DriveSpec::preset("kioxia-cm6-v-1.6t").unwrap().scaled(64).unwrap();
        let ctrl = Controller::new(spec, 1).unwrap();
        let mut t = ctrl.spec().timing.clone().unwrap();
        t.t_read_ns.value = T_R;
        t.t_prog_suspend_ns.value = 25_000;
        t.t_resume_ns.value = 10_000;
        t.max_suspends_per_op.value = 2;
        t.suspend_min_progress_ns.value = 100_000;
        let dt = DeviceTiming::with_timing(ctrl.spec(), ctrl.ftl_config(), t).unwrap();
        (dt, ctrl)
    }

    #[test]
    fn a_read_on_an_idle_die_starts_at_once() {
        let (mut dt, _) = timing();
        assert_eq!(dt.die_read_slot(0, 1_000, T_R), 1_000);
    }

    #[test]
    fn a_read_suspends_a_program_and_the_program_ends_later() {
        let (mut dt, _) = timing();
        dt.die_push(0, 0, T_PROG, false);
        dt.die_push(0, T_PROG, 2 * T_PROG, false);
        // Suspend latency, then the read; the program slips by suspend + read + resume.
        assert_eq!(dt.die_read_slot(0, 200_000, T_R), 225_000);
        let slip = 25_000 + T_R + 10_000;
        assert_eq!(dt.die_ops[0][0].end, T_PROG + slip);
        // The program queued behind it moves as far as it overlapped.
        assert_eq!(dt.die_ops[0][1].start, T_PROG + slip);
        assert_eq!(dt.die_free[0], 2 * T_PROG + slip);
        // A read arriving during the suspension joins it: no second suspend.
        assert_eq!(dt.die_read_slot(0, 230_000, T_R), 230_000);
        assert_eq!(dt.die_ops[0][0].suspends, 1);
        assert_eq!(dt.die_ops[0][0].end, T_PROG + slip + 5_000);
    }

    #[test]
    fn suspends_need_progress_and_run_out() {
        let (mut dt, _) = timing();
        dt.die_push(0, 0, T_PROG, false);
        assert_eq!(dt.die_read_slot(0, 100_000, T_R), 125_000);
        // Resumed at 185 µs: the next suspend is allowed 100 µs later.
        assert_eq!(dt.die_read_slot(0, 200_000, T_R), 285_000 + 25_000);
        // Two suspends used: the third read waits for the program's end.
        let end = dt.die_ops[0][0].end;
        assert_eq!(end, T_PROG + 2 * (25_000 + T_R + 10_000));
        assert_eq!(dt.die_read_slot(0, 600_000, T_R), end);
    }

    #[test]
    fn a_read_between_operations_goes_first() {
        let (mut dt, _) = timing();
        dt.die_push(0, 100_000, 100_000 + T_PROG, false);
        assert_eq!(dt.die_read_slot(0, 80_000, T_R), 80_000);
        assert_eq!(dt.die_ops[0][0].start, 130_000);
        assert_eq!(dt.die_ops[0][0].suspends, 0);
    }

    #[test]
    fn capped_power_states_allow_fewer_suspends() {
        let (dt, ctrl) = timing();
        let full = 2;
        let per_state: Vec<u32> = (0..6).map(|ps| dt.suspends_in_state(ctrl.spec(), ps)).collect();
        // Headroom over the 5 W idle: 22.5, 14.8, 12.6, 10.4, 7.1, 4.9 W.
        assert_eq!(per_state, vec![full, 1, 1, 1, 1, 1]);
        let mut t = ctrl.spec().timing.clone().unwrap();
        t.max_suspends_per_op.value = 4;
        let dt = DeviceTiming::with_timing(ctrl.spec(), ctrl.ftl_config(), t.clone()).unwrap();
        let per_state: Vec<u32> = (0..6).map(|ps| dt.suspends_in_state(ctrl.spec(), ps)).collect();
        assert_eq!(per_state, vec![4, 3, 2, 2, 1, 1]);
        t.suspends_scale_with_power.value = false;
        let dt = DeviceTiming::with_timing(ctrl.spec(), ctrl.ftl_config(), t).unwrap();
        assert_eq!(dt.suspends_in_state(ctrl.spec(), 5), 4);
    }
}
