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

/// A transfer ready the moment the last reservation ends, arriving then, follows it; the
/// next one arriving at the same time queues behind both and must not share their time.
#[test]
fn calendar_never_reuses_an_interval_that_ended_at_arrival() {
    let mut c = Calendar::default();
    assert_eq!(c.reserve(0, 0, 10), 0);
    // Arrives when [0, 10) ends, ready then: starts at 10.
    assert_eq!(c.reserve(10, 10, 5), 10);
    // Same arrival, same readiness: the channel is busy until 15.
    assert_eq!(c.reserve(10, 10, 5), 15);
    assert_eq!(c.reserve(10, 12, 1), 20);
}

/// Any sequence of reservations with arrivals in time order and data ready no earlier than
/// arrival: each starts no earlier than its data is ready, no two transfers share the
/// resource at any instant, and the live intervals stay sorted and disjoint.
mod calendar_props {
    use super::Calendar;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]
        #[test]
        fn reservations_are_disjoint_and_start_when_ready(
            steps in proptest::collection::vec((0u64..12, 0u64..12, 1u64..8), 1..120)
        ) {
            let mut c = Calendar::default();
            let mut now = 0u64;
            let mut given: Vec<(u64, u64)> = Vec::new();
            for (advance, wait, dur) in steps {
                // Small steps make ties (ready == now == an interval's end) common.
                now += advance / 4;
                let ready = now + wait / 3;
                let start = c.reserve(now, ready, dur);
                prop_assert!(start >= ready, "start {} before ready {}", start, ready);
                for &(s, e) in &given {
                    prop_assert!(start + dur <= s || start >= e,
                        "[{}, {}) overlaps [{}, {}) (now {}, ready {})", start, start + dur, s, e, now, ready);
                }
                given.push((start, start + dur));
                let live = &c.busy[c.head..];
                prop_assert!(live.iter().all(|&(s, e)| s < e));
                prop_assert!(live.windows(2).all(|w| w[0].1 <= w[1].0), "live list not sorted and disjoint: {:?}", live);
                // What the calendar holds as busy covers every transfer not yet over.
                for &(s, e) in given.iter().filter(|&&(_, e)| e > now) {
                    prop_assert!(live.iter().any(|&(ls, le)| ls <= s && e <= le),
                        "[{}, {}) is not in the live list {:?}", s, e, live);
                }
            }
        }

        /// The count from the end is the binary search it replaced (`partition_point`), near
        /// the end, far back (the binary search's fallback) and with ties at `t`.
        #[test]
        fn starts_before_is_the_partition_point(
            gaps in proptest::collection::vec((0u64..4, 1u64..4), 0..40),
            t in 0u64..120,
        ) {
            let mut live = Vec::new();
            let mut at = 0;
            for (gap, len) in gaps {
                live.push((at + gap, at + gap + len));
                at += gap + len;
            }
            let want = live.partition_point(|&(s, _)| s < t);
            prop_assert_eq!(Calendar::starts_before(&live, t), want, "{:?} before {}", live, t);
        }
    }
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
        assert_eq!(dt.die_ops[0].materialize()[0].end, T_PROG + slip);
        // The program queued behind it moves as far as it overlapped.
        assert_eq!(dt.die_ops[0].materialize()[1].start, T_PROG + slip);
        assert_eq!(dt.die_free[0], 2 * T_PROG + slip);
        // A read arriving during the suspension joins it: no second suspend.
        assert_eq!(dt.die_read_slot(0, 230_000, T_R), 230_000);
        assert_eq!(dt.die_ops[0].materialize()[0].suspends, 1);
        assert_eq!(dt.die_ops[0].materialize()[0].end, T_PROG + slip + 5_000);
    }

    #[test]
    fn suspends_need_progress_and_run_out() {
        let (mut dt, _) = timing();
        dt.die_push(0, 0, T_PROG, false);
        assert_eq!(dt.die_read_slot(0, 100_000, T_R), 125_000);
        // Resumed at 185 µs: the next suspend is allowed 100 µs later.
        assert_eq!(dt.die_read_slot(0, 200_000, T_R), 285_000 + 25_000);
        // Two suspends used: the third read waits for the program's end.
        let end = dt.die_ops[0].materialize()[0].end;
        assert_eq!(end, T_PROG + 2 * (25_000 + T_R + 10_000));
        assert_eq!(dt.die_read_slot(0, 600_000, T_R), end);
    }

    #[test]
    fn a_read_between_operations_goes_first() {
        let (mut dt, _) = timing();
        dt.die_push(0, 100_000, 100_000 + T_PROG, false);
        assert_eq!(dt.die_read_slot(0, 80_000, T_R), 80_000);
        assert_eq!(dt.die_ops[0].materialize()[0].start, 130_000);
        assert_eq!(dt.die_ops[0].materialize()[0].suspends, 0);
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

mod protection {
    use super::super::DeviceTiming;
    use crate::nand::NoTiming;
    use crate::nvme::{Controller, NsId, ProtectionRequest, Status, PRCHK_GUARD};
    use crate::spec::DriveSpec;

    /// A written CM6-V at 1/64 in LBA format `lbaf` with PI type `pi`, and its timing.
    fn drive(lbaf: u8, pi: u8) -> (DeviceTiming, Controller) {
        let spec = DriveSpec::preset("kioxia-cm6-v-1.6t").unwrap().scaled(64).unwrap();
        let mut c = Controller::new(spec, 1).unwrap();
        c.format_with(NsId(1), lbaf, 0, ProtectionRequest { pi, ..Default::default() }).unwrap();
        c.write(NsId(1), 0, 4096, &mut NoTiming).unwrap();
        let t = DeviceTiming::new(c.spec(), c.ftl_config()).unwrap();
        (t, c)
    }

    /// When `n` 4 KiB reads all arriving at t = 0 are done: the controller's command slot
    /// binds, so each costs one slot (plus the PI check on a PI namespace).
    fn burst_end(lbaf: u8, pi: u8, pract: bool, n: u64) -> u64 {
        let (mut t, mut c) = drive(lbaf, pi);
        t.pract = pract;
        (0..n).map(|i| t.read(&mut c, 0, NsId(1), i % 4096, 1).unwrap()).max().unwrap()
    }

    #[test]
    fn pi_costs_its_check_per_command_and_metadata_on_the_link() {
        let n = 20_000;
        let plain = burst_end(1, 0, false, n);
        let pi = burst_end(4, 1, true, n);
        let slot_ns = 1e9 / 1_700_000.0;
        let per_cmd = (pi - plain) as f64 / n as f64;
        assert!((per_cmd - 30.0).abs() < 3.0, "PI check {per_cmd:.1} ns per command (slot {slot_ns:.0} ns)");
        // Without PRACT the host moves 8 B per block as well: never faster.
        assert!(burst_end(4, 1, false, n) >= pi);
        // 4096+64 without PI: metadata on the link, no check.
        assert!(burst_end(5, 0, false, n) >= plain);
    }

    #[test]
    fn a_checked_read_of_a_corrupted_lba_fails_with_its_status() {
        let (mut t, mut c) = drive(4, 1);
        c.inject_pi_error(NsId(1), 7, PRCHK_GUARD).unwrap();
        t.prchk = PRCHK_GUARD;
        let e = t.read(&mut c, 0, NsId(1), 0, 8).unwrap_err();
        assert_eq!(e.status(), Some(Status::GuardCheck));
        t.prchk = 0;
        assert!(t.read(&mut c, 0, NsId(1), 0, 8).is_ok(), "unchecked: no error");
    }
}

/// The die queue's shared slip gives the times that shifting every operation one by one gives
/// (the code it replaced), through any mix of pushes, slips, prunes and one-by-one edits.
mod die_queue {
    use super::super::{DieOp, DieQueue};
    use proptest::prelude::*;

    fn op(start: u64, end: u64) -> DieOp {
        DieOp { start, end, erase: false, suspends: 0, resumed_at: start, window: None }
    }

    /// The old `die_slip`: shift each operation still running or queued at `t`.
    fn naive_slip(q: &mut [(u64, u64)], t: u64, delta: u64) {
        for (s, e) in q.iter_mut().filter(|(_, e)| *e > t) {
            if *s >= t {
                *s += delta;
            }
            *e += delta;
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Push { gap: u64, len: u64 },
        Slip { at: u64, delta: u64 },
        Prune { at: u64 },
        Stretch { delta: u64 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..50, 1u64..200).prop_map(|(gap, len)| Step::Push { gap, len }),
            (0u64..2_000, 0u64..100).prop_map(|(at, delta)| Step::Slip { at, delta }),
            (0u64..2_000).prop_map(|at| Step::Prune { at }),
            (1u64..100).prop_map(|delta| Step::Stretch { delta }),
        ]
    }

    /// Operations popped from the front are dropped from the vector once they are most of
    /// it, and the queue still holds the same operations in order, at the same times.
    #[test]
    fn popped_operations_are_compacted_away() {
        let mut q = DieQueue::default();
        let mut naive = std::collections::VecDeque::new();
        for k in 0..400u64 {
            q.push_back(op(10 * k, 10 * k + 10));
            naive.push_back((10 * k, 10 * k + 10));
            if k % 7 == 3 {
                q.slip(10 * k + 5, 3);
                naive_slip(naive.make_contiguous(), 10 * k + 5, 3);
            }
            if k % 3 != 0 {
                q.pop_front();
                naive.pop_front();
            }
            assert_eq!(q.ops.len() - q.head, naive.len());
            assert!(q.head <= 33 || q.head * 2 <= q.ops.len() + 2, "popped operations pile up: {} of {}", q.head, q.ops.len());
            let got: Vec<(u64, u64)> = q.live().iter().map(|o| (o.start.wrapping_add(q.slip), o.end.wrapping_add(q.slip))).collect();
            assert_eq!(got, naive.iter().copied().collect::<Vec<_>>(), "step {k}");
        }
    }

    proptest! {
        #[test]
        fn shared_slip_is_the_one_by_one_shift(steps in proptest::collection::vec(step(), 1..60)) {
            let mut q = DieQueue::default();
            let mut naive: Vec<(u64, u64)> = Vec::new();
            for s in steps {
                match s {
                    Step::Push { gap, len } => {
                        let start = naive.last().map_or(0, |&(_, e)| e) + gap;
                        q.push_back(op(start, start + len));
                        naive.push((start, start + len));
                    }
                    Step::Slip { at, delta } => {
                        q.slip(at, delta);
                        naive_slip(&mut naive, at, delta);
                    }
                    Step::Prune { at } => {
                        while q.front_end().is_some_and(|e| e <= at) {
                            q.pop_front();
                        }
                        while naive.first().is_some_and(|&(_, e)| e <= at) {
                            naive.remove(0);
                        }
                    }
                    Step::Stretch { delta } => {
                        // A one-by-one edit (as a suspend makes): the last operation ends later.
                        if let Some(o) = q.materialize().last_mut() {
                            o.end += delta;
                            naive.last_mut().expect("same length").1 += delta;
                        }
                    }
                }
                // Read the true times without folding the slip in, so slips pile up across steps.
                let got: Vec<(u64, u64)> =
                    q.live().iter().map(|o| (o.start.wrapping_add(q.slip), o.end.wrapping_add(q.slip))).collect();
                prop_assert_eq!(&got, &naive);
            }
        }
    }
}

/// The timing's table of IU locations gives the decode's (die, channel, plane) for every
/// IU, with one die group and with several (NVM Sets, FTL partitions), and a geometry too
/// large for the table falls back to the decode.
mod loc_table {
    use super::super::{DeviceTiming, LocTable};
    use crate::nand::Addressing;
    use crate::nvme::FtlConfig;
    use crate::spec::DriveSpec;

    fn check(spec: &DriveSpec, want_table: bool) {
        let cfg = FtlConfig::from_spec(spec);
        let geo = spec.geometry();
        let addr = Addressing::new(&geo, cfg.iu_bytes as u64);
        let table = LocTable::new(&geo, cfg.iu_bytes as u64, &addr);
        assert_eq!(!table.locs.is_empty(), want_table, "{}: table built", spec.drive.name);
        let n = cfg.physical_ius();
        // Every IU of the first and last few stripes of each group, and a stride through all.
        let step = (n / 200_003).max(1);
        let ppas = (0..n.min(100_000)).chain((n.saturating_sub(100_000)..n).rev()).chain((0..n).step_by(step as usize));
        for ppa in ppas {
            let want = LocTable::decode(&addr, geo.planes_per_die, ppa);
            assert_eq!(table.get(&addr, geo.planes_per_die, ppa), want, "{} IU {ppa}", spec.drive.name);
        }
        // The timing uses the same table.
        let dt = DeviceTiming::new(spec, &cfg).unwrap();
        assert_eq!(dt.locs.locs.len(), table.locs.len());
    }

    #[test]
    fn table_is_the_decode() {
        let cm6 = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        check(&cm6, true);
        check(&cm6.with_partitions(4).unwrap(), true);
        let pb5 = DriveSpec::preset("memblaze-pblaze5-910-3.84t").unwrap().scaled(256).unwrap();
        let sets = pb5.with_nvm_sets(4).unwrap();
        assert_eq!(sets.geometry().groups, 4);
        check(&sets, true);
        let both = sets.with_partitions(2).unwrap();
        assert_eq!(both.geometry().groups, 8);
        check(&both, true);
    }

    #[test]
    fn a_large_stripe_uses_the_decode() {
        let mut spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        // 16 KiB pages x 2 planes x 3 bits / 512 B IUs: 192 IUs per program unit x 64 dies.
        spec.ftl.iu_bytes.value = 512;
        check(&spec, false);
    }
}

/// GC reads' slips merged while they follow each other on a die ([`super::PendingSlip`])
/// give the times that applying each read's slip at once gives (a test-only switch turns
/// the merging off), through random mixes of GC reads (runs on one plane, jumps between
/// dies), programs, erases and host reads that suspend programs, with arrivals moving on.
mod merged_slips {
    use super::super::DeviceTiming;
    use crate::nvme::Controller;
    use crate::spec::DriveSpec;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        /// `n` GC reads of consecutive IUs from `ppa` (the IUs of a program unit share a die).
        GcReads {
            ppa: u32,
            n: u32,
        },
        Program {
            ready: u64,
            pu: u32,
        },
        Erase {
            sb: u32,
        },
        HostRead {
            ppa: u32,
        },
        Arrive {
            advance: u64,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..4096, 1u32..30).prop_map(|(ppa, n)| Step::GcReads { ppa, n }),
            2 => (0u64..3_000_000, 0u32..160).prop_map(|(ready, pu)| Step::Program { ready, pu }),
            1 => (0u32..4).prop_map(|sb| Step::Erase { sb }),
            2 => (0u32..4096).prop_map(|ppa| Step::HostRead { ppa }),
            2 => (0u64..400_000).prop_map(|advance| Step::Arrive { advance }),
        ]
    }

    fn timing(merge: bool) -> DeviceTiming {
        // Few dies, so that reads, programs and erases meet on them often.
        let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
        let ctrl = Controller::new(spec, 1).unwrap();
        let mut dt = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).unwrap();
        dt.merge_slips = merge;
        dt
    }

    /// Every die's queue (start, end, suspends: true times), every die's next free time and
    /// every plane's.
    type State = (Vec<Vec<(u64, u64, u32)>>, Vec<u64>, Vec<u64>);

    fn state(dt: &mut DeviceTiming) -> State {
        dt.settle_slip();
        let queues = dt.die_ops.iter_mut().map(|q| q.materialize().iter().map(|o| (o.start, o.end, o.suspends)).collect()).collect();
        (queues, dt.die_free.clone(), dt.plane_free.clone())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn merged_slips_are_the_slips_one_by_one(steps in proptest::collection::vec(step(), 1..80)) {
            let (mut a, mut b) = (timing(true), timing(false));
            let mut now = 0u64;
            for s in steps {
                for dt in [&mut a, &mut b] {
                    dt.now = now;
                }
                let (x, y) = match s {
                    Step::GcReads { ppa, n } => {
                        let mut times = (Vec::new(), Vec::new());
                        for k in 0..n {
                            times.0.push(a.gc_read_op(now, ppa + k, 4096));
                            times.1.push(b.gc_read_op(now, ppa + k, 4096));
                        }
                        (times.0, times.1)
                    }
                    Step::Program { ready, pu } => (vec![a.program_op(now + ready, pu)], vec![b.program_op(now + ready, pu)]),
                    Step::Erase { sb } => {
                        a.erase_op(now, sb);
                        b.erase_op(now, sb);
                        (vec![], vec![])
                    }
                    Step::HostRead { ppa } => (vec![a.read_op(now, ppa, 4096)], vec![b.read_op(now, ppa, 4096)]),
                    Step::Arrive { advance } => {
                        now += advance;
                        (vec![], vec![])
                    }
                };
                prop_assert_eq!(x, y);
            }
            prop_assert_eq!(state(&mut a), state(&mut b));
        }

        /// The placer's one-call GC copy places what its read then its program placed one
        /// by one place: the same operations counted, the same completion, the same
        /// timelines (programs of full units included).
        #[test]
        fn a_gc_copy_is_its_read_then_its_program(copies in proptest::collection::vec((0u32..4096, 0u32..4096, 0u64..200_000), 1..120)) {
            use super::super::Placer;
            use crate::nand::{Cause, NandOp, NandSink};
            let (mut a, mut b) = (timing(true), timing(true));
            for (from, to, t) in copies {
                let mut pa = Placer::new(&mut a, t);
                pa.gc_copy(from, to, 4096);
                let got = (pa.placed, pa.read_done, pa.host_ius);
                let mut pb = Placer::new(&mut b, t);
                pb.op(NandOp::Read { ppa: from, bytes: 4096, cause: Cause::Gc });
                pb.op(NandOp::Program { ppa: to, cause: Cause::Gc });
                prop_assert_eq!(got, (pb.placed, pb.read_done, pb.host_ius));
            }
            prop_assert_eq!(state(&mut a), state(&mut b));
            prop_assert_eq!(format!("{:?}", a.pipes), format!("{:?}", b.pipes));
        }
    }
}

/// The calendar as it was before the check of its first live interval (which skips the
/// start-over and compaction checks when nothing ended): the reference the new one must
/// match, reservation by reservation, in the start it returns and the live intervals it
/// keeps.
mod calendar_reference {
    use super::Calendar;
    use proptest::prelude::*;

    #[derive(Default)]
    struct Reference {
        busy: Vec<(u64, u64)>,
        head: usize,
    }

    impl Reference {
        fn reserve(&mut self, now: u64, ready: u64, dur: u64) -> u64 {
            while self.head < self.busy.len() && self.busy[self.head].1 <= now {
                self.head += 1;
            }
            if self.head == self.busy.len() {
                self.busy.clear();
                self.head = 0;
            } else if self.head > 64 && self.head * 2 > self.busy.len() {
                self.busy.drain(..self.head);
                self.head = 0;
            }
            match self.busy.last_mut() {
                None => {
                    self.busy.push((ready, ready + dur));
                    return ready;
                }
                Some(last) if last.1 <= ready => {
                    if last.1 == ready {
                        last.1 = ready + dur;
                    } else {
                        self.busy.push((ready, ready + dur));
                    }
                    return ready;
                }
                _ => {}
            }
            let mut t = ready;
            let mut i = self.head + self.busy[self.head..].partition_point(|&(s, _)| s < ready).saturating_sub(1);
            let mut budget = 8;
            while i < self.busy.len() {
                budget -= 1;
                if budget == 0 {
                    t = t.max(self.busy[self.busy.len() - 1].1);
                    i = self.busy.len();
                    break;
                }
                let (s, e) = self.busy[i];
                if e <= t {
                    i += 1;
                    continue;
                }
                if s >= t + dur {
                    break;
                }
                t = e;
                i += 1;
            }
            if i > self.head && self.busy[i - 1].1 == t {
                self.busy[i - 1].1 = t + dur;
                if i < self.busy.len() && self.busy[i].0 == t + dur {
                    self.busy[i - 1].1 = self.busy[i].1;
                    self.busy.remove(i);
                }
            } else if i < self.busy.len() && self.busy[i].0 == t + dur {
                self.busy[i].0 = t;
            } else {
                self.busy.insert(i, (t, t + dur));
            }
            t
        }
    }

    /// Reservations that land 1 to 4 places after the first live interval, then one before
    /// it, with dead entries before it, go into the dead entry before `head` (the tail is not
    /// shifted); with none left, the tail shifts. The live list is the one the reference's
    /// `Vec::insert` gives.
    #[test]
    fn front_inserts_use_the_dead_entries_and_match_the_reference() {
        for back in 0..4u64 {
            let (mut c, mut r) = (Calendar::default(), Reference::default());
            // [0, 10), [20, 30), [40, 50), ... [200, 210); then arrive at 30: two ended.
            for k in 0..=10 {
                assert_eq!(c.reserve(0, 20 * k, 10), r.reserve(0, 20 * k, 10));
            }
            let now = 30;
            let ready = 40 + 20 * back + 12; // in the gap after [40 + 20 back, 50 + 20 back)
            assert_eq!(c.reserve(now, ready, 3), r.reserve(now, ready, 3));
            assert_eq!(&c.busy[c.head..], &r.busy[r.head..]);
            assert_eq!(c.head, 1, "{} back: the first dead entry took the shift", back);
            assert_eq!(c.busy.len(), 11, "no entry added at the end");
            // A second one at the front uses the last dead entry, a third shifts the tail.
            for ready in [31, 36] {
                assert_eq!(c.reserve(now, ready, 2), r.reserve(now, ready, 2));
                assert_eq!(&c.busy[c.head..], &r.busy[r.head..]);
            }
            assert_eq!((c.head, c.busy.len()), (0, 12));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3_000))]
        /// Arrivals in time order; data ready at arrival, a little later or much later (long
        /// lists, gaps far back, the search's bound), sometimes before arrival; durations
        /// that make touching neighbours (merges) common. The inlined copy is checked too.
        #[test]
        fn the_calendar_reserves_as_the_reference_does(
            steps in proptest::collection::vec((0u64..16, 0u64..4, 0u64..40, 1u64..9, any::<bool>()), 1..400)
        ) {
            let (mut c, mut r) = (Calendar::default(), Reference::default());
            let mut now = 0u64;
            for (advance, kind, wait, dur, inline) in steps {
                now += advance / 5;
                let ready = match kind {
                    0 => now,
                    1 => now + wait / 8,
                    2 => now + wait,
                    _ => now.saturating_sub(wait / 8),
                };
                let got = if inline { c.reserve_inline(now, ready, dur) } else { c.reserve(now, ready, dur) };
                prop_assert_eq!(got, r.reserve(now, ready, dur), "now {} ready {} dur {}", now, ready, dur);
                prop_assert_eq!(&c.busy[c.head..], &r.busy[r.head..]);
            }
        }
    }
}
