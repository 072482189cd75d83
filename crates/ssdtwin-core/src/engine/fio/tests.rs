//! The fio runner's tests, and the drive and job spec other tests of the engine build on
//! (`drive`, `spec`).

use super::report::depth_slot;
use super::*;
use crate::nvme::Controller;
use crate::spec::DriveSpec;
use serde_json::{json, Value};
use std::cell::Cell;

thread_local! {
    /// Runs on this thread take the general completion path for every clone (the
    /// reference the plain clones' short path is compared with).
    pub(super) static GENERAL_PATH_ONLY: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn drive() -> (Controller, DeviceTiming) {
    let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap();
    let ctrl = Controller::new(spec, 1).unwrap();
    let timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).unwrap();
    (ctrl, timing)
}

/// The engine contract's fields (docs/fio.md §3) of a 4 KiB random-write clone over the
/// first MiB, target and LBA size unset: the base every test job here and in the cluster's
/// tests changes.
pub(crate) fn job_template() -> Value {
    serde_json::from_str(
        r#"{
        "version": 1, "name": "j", "job_index": 0, "thread_number": 1, "subjob": 0, "group_id": 0,
        "batch": 0, "stonewall": false, "filename": null, "namespace": null,
        "target_size_bytes": 0, "lba_bytes": 0, "rw": "randwrite",
        "directions": ["write"], "random": true, "rw_nr": 1, "rw_seq_add_bytes": 0,
        "rwmixread": 50, "rwmixwrite": 50,
        "bs": {"read": {"min": 4096, "max": 4096, "split": [[4096, 100]]},
               "write": {"min": 4096, "max": 4096, "split": [[4096, 100]]},
               "trim": {"min": 4096, "max": 4096, "split": [[4096, 100]]}},
        "bs_unaligned": false, "blockalign": {"read": 4096, "write": 4096, "trim": 4096},
        "offset_bytes": 0, "size_bytes": 1048576, "io_size_bytes": 1048576, "loops": 1,
        "fill_device": false, "number_ios": 0, "ioengine": "libaio", "engine_async": true,
        "iodepth": 4, "iodepth_configured": 4, "time_based": false, "runtime_ns": 0,
        "ramp_time_ns": 0, "startdelay_ns": 0, "norandommap": false,
        "random_generator": "tausworthe", "seed": 7, "seeds": {}, "seed_source": "randrepeat",
        "random_distribution": {"kind": "random", "param": null, "center": null, "zones": null},
        "percentage_random": {"read": 100, "write": 100, "trim": 100},
        "rate_bytes_per_s": {"read": 0, "write": 0, "trim": 0},
        "rate_iops": {"read": 0, "write": 0, "trim": 0}, "rate_process": "linear",
        "thinktime_ns": 0, "thinktime_spin_ns": 0, "thinktime_blocks": 1,
        "thinktime_blocks_type": "complete", "bw_avg_ms": 500, "iops_avg_ms": 500,
        "logs": {"bw": false, "iops": false, "lat": false, "hist": false, "avg_ms": 0,
                 "hist_ms": 0, "max_value": false, "offset": false}
        }"#,
    )
    .unwrap()
}

/// A 4 KiB random-write clone over the first MiB of namespace 1, with `extra` fields
/// replaced (engine contract, docs/fio.md §3).
pub(crate) fn spec(ctrl: &Controller, extra: Value) -> JobSpec {
    let ns = ctrl.attached(NsId(1)).unwrap();
    let mut v = job_template();
    v["target_size_bytes"] = json!(ns.bytes());
    v["lba_bytes"] = json!(ns.lba_bytes);
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

const SECOND: u64 = 1_000_000_000;

fn run_one(extra: Value) -> Result<(Vec<CloneOut>, Footprint), RunError> {
    let (mut ctrl, mut timing) = drive();
    let s = spec(&ctrl, extra);
    run_measured(&mut ctrl, &mut timing, vec![s], &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true)
}

#[test]
fn memory_does_not_grow_with_simulated_time() {
    // 10 s of think time after every I/O: a day simulates 8,640 stalls, ten days 86,400.
    // Before, the bw/iops sample windows grew by one entry per 500 ms of simulated time.
    let think = |runtime_s: u64| json!({"time_based": true, "runtime_ns": runtime_s * SECOND, "thinktime_ns": 10 * SECOND, "iodepth": 1});
    let (short, f_short) = run_one(think(86_400)).unwrap();
    let (long, f_long) = run_one(think(864_000)).unwrap();
    assert!(long[0].write.total_ios >= 9 * short[0].write.total_ios, "the long run really ran longer");
    assert_eq!(f_short, f_long, "nothing the engine holds grows with simulated time");
    assert_eq!(f_long.log_rows + f_long.log_windows, 0, "no logs asked for, none kept");
    // One bw sample per window with I/O: 10 s think time leaves one write per window, and
    // the run ends after the last stall, so every window is full.
    assert_eq!(long[0].write.bw_sample_stat.n, long[0].write.total_ios);
    assert_eq!(long[0].write.iops_sample_stat.n, long[0].write.total_ios);
}

#[test]
fn trims_think_as_reads_and_writes_do() {
    // fio 3.33 (ioengine=null): `rw=randtrim number_ios=20 thinktime=10ms
    // thinktime_blocks=2` runs 100 ms, ten stalls; do_io calls handle_thinktime for any
    // ddir_rw direction, trim included. The twin used to skip think time after trims and
    // finished in microseconds.
    let think = json!({"rw": "randtrim", "directions": ["trim"], "iodepth": 1, "number_ios": 20,
                       "thinktime_ns": 10_000_000u64, "thinktime_blocks": 2});
    let (out, _) = run_one(think).unwrap();
    assert_eq!(out[0].trim.total_ios, 20);
    let stalls = 20 / 2;
    assert!(out[0].runtime_ns >= stalls * 10_000_000, "runtime {} ns: the trims did not think", out[0].runtime_ns);
    assert!(out[0].runtime_ns < (stalls + 1) * 10_000_000, "runtime {} ns: one stall too many", out[0].runtime_ns);
}

/// Run several clones (each `extra` applied to the base spec; thread numbers and job
/// indexes in order).
fn run_many(extras: &[Value]) -> Result<Vec<CloneOut>, RunError> {
    let (mut ctrl, mut timing) = drive();
    let specs = extras
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut e = e.clone();
            e["thread_number"] = json!(i + 1);
            if e.get("job_index").is_none() {
                e["job_index"] = json!(i);
            }
            spec(&ctrl, e)
        })
        .collect();
    run(&mut ctrl, &mut timing, specs, &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true)
}

fn rated(iops: u64, ios: u64) -> Value {
    json!({"rate_iops": {"read": 0, "write": iops, "trim": 0}, "size_bytes": ios * 4096, "io_size_bytes": ios * 4096})
}

fn with(mut v: Value, extra: Value) -> Value {
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn steady_state_ends_a_clone_without_changing_what_it_did_before() {
    let timed = |runtime_s: u64| with(rated(1000, 1 << 20), json!({"time_based": true, "runtime_ns": runtime_s * SECOND}));
    let ss =
        json!({"metric": "iops", "slope": false, "percent": true, "limit": 10.0, "duration_s": 3, "ramp_ns": 0, "group_reporting": false});
    let out = run_many(&[with(timed(30), json!({"steadystate": ss}))]).unwrap();
    let st = out[0].steadystate.as_ref().expect("a steady-state record");
    // Looks at 1, 2, 3 s: the third fills the window of 1000s and ends the clone.
    assert!(st.attained && st.iops == vec![1000; 3] && st.bw == vec![4_096_000; 3]);
    assert_eq!((out[0].write.total_ios, out[0].runtime_ns), (3000, 3 * SECOND));
    // The looks are no events of the drive: the same clone cut by its runtime at 3 s did
    // exactly the same I/O.
    let plain = run_many(&[timed(3)]).unwrap();
    assert!(plain[0].steadystate.is_none());
    assert_eq!(serde_json::to_value(&plain[0].write).unwrap(), serde_json::to_value(&out[0].write).unwrap());
}

#[test]
fn exit_what_terminates_the_clones_fio_terminates() {
    // "short": 100 writes at 1,000 IOPS (~99 ms); "long": 1,000 IOPS for 10 s in the
    // same group; "other": 500 IOPS in group 1; "after": a later stonewall batch.
    let jobs = |what: &str| {
        let w = json!({"exit_what": what});
        vec![
            with(with(rated(1000, 100), json!({"name": "short"})), w.clone()),
            with(with(rated(1000, 10_000), json!({"name": "long"})), w.clone()),
            with(with(rated(500, 200), json!({"name": "other", "group_id": 1})), w.clone()),
            with(with(rated(0, 64), json!({"name": "after", "group_id": 2, "batch": 1, "stonewall": true})), w),
        ]
    };
    let ios = |out: &[CloneOut]| out.iter().map(|o| o.write.total_ios).collect::<Vec<_>>();
    let short_end = |out: &[CloneOut]| out[0].start_ns + out[0].elapsed_ns;
    // none: every job runs to its end.
    let out = run_many(&jobs("none")).unwrap();
    assert_eq!(ios(&out), vec![100, 10_000, 200, 64]);
    // group: "long" ends with "short" (it issued about as many), "other" runs on.
    let out = run_many(&jobs("group")).unwrap();
    let (end, long_end) = (short_end(&out), out[1].start_ns + out[1].elapsed_ns);
    assert!((99..=101).contains(&out[1].write.total_ios), "{:?}", ios(&out));
    assert!(long_end >= end && long_end < end + 1_000_000, "long ended at {long_end}, short at {end}");
    assert_eq!((out[2].write.total_ios, out[3].write.total_ios), (200, 64));
    // stonewall: every running clone ends, the next batch still runs.
    let out = run_many(&jobs("stonewall")).unwrap();
    assert!((99..=101).contains(&out[1].write.total_ios) && (49..=51).contains(&out[2].write.total_ios), "{:?}", ios(&out));
    assert_eq!(out[3].write.total_ios, 64);
    assert!(out[3].start_ns >= short_end(&out));
    // all: the later batch never runs and reports no I/O.
    let out = run_many(&jobs("all")).unwrap();
    assert!((49..=51).contains(&out[2].write.total_ios), "{:?}", ios(&out));
    assert_eq!((out[3].write.total_ios, out[3].runtime_ns), (0, 0));
}

#[test]
fn wait_for_starts_a_clone_when_its_waitee_has_finished() {
    let first = with(rated(1000, 100), json!({"name": "first"}));
    let other = with(rated(1000, 50), json!({"name": "other"}));
    let second = with(rated(1000, 50), json!({"name": "second", "wait_for": "first", "startdelay_ns": 20_000_000}));
    let out = run_many(&[first.clone(), other.clone(), second]).unwrap();
    let first_end = out[0].start_ns + out[0].elapsed_ns;
    assert_eq!(out[1].start_ns, 0, "a job without wait_for starts at once");
    assert_eq!(out[2].start_ns, first_end, "the waiter starts when its waitee ends");
    assert_eq!(out[2].write.total_ios, 50);
    // A start delay longer than the waitee's run still counts from the batch's start.
    let late = with(rated(1000, 50), json!({"name": "second", "wait_for": "first", "startdelay_ns": 500_000_000}));
    let out = run_many(&[first.clone(), other.clone(), late]).unwrap();
    assert_eq!(out[2].start_ns, 500_000_000);
    // Unknown and forward references are refused, not run forever.
    let bad = with(rated(1000, 50), json!({"name": "x", "wait_for": "nosuch"}));
    let err = run_many(&[first.clone(), bad]).unwrap_err();
    assert!(err.to_string().contains("wait_for=nosuch"), "{err}");
    let fwd = with(rated(1000, 50), json!({"name": "x", "wait_for": "first"}));
    let err = run_many(&[fwd, first]).unwrap_err();
    assert!(err.to_string().contains("defined before"), "{err}");
}

#[test]
fn flow_keeps_members_in_proportion_to_their_weights() {
    let timed = json!({"time_based": true, "runtime_ns": 50_000_000, "iodepth": 4});
    let member = |weight: u32, id: u32, sleep_ns: u64| {
        with(timed.clone(), json!({"flow": weight, "flow_id": id, "flow_sleep_ns": sleep_ns, "rw": "randread", "directions": ["read"]}))
    };
    let reads = |out: &[CloneOut]| out.iter().map(|o| o.read.total_ios).collect::<Vec<_>>();
    // Weights 3:2:1 in one group (fio's HOWTO example); a fourth job in group 7 alone.
    let out = run_many(&[member(3, 0, 0), member(2, 0, 0), member(1, 0, 0), member(1, 7, 0)]).unwrap();
    let n = reads(&out);
    let total = (n[0] + n[1] + n[2]) as f64;
    for (i, share) in [(0, 3.0 / 6.0), (1, 2.0 / 6.0), (2, 1.0 / 6.0)] {
        assert!((n[i] as f64 / total - share).abs() < 0.001, "{n:?}");
    }
    // A group of one is never held back: it keeps pace with the leader, which is not held
    // either (the drive, not the flow, limits them).
    assert!(n[3] + 50 >= n[0], "{n:?}");
    // With flow_sleep the member over its share drains and sleeps 1 ms; still 2:1 overall.
    let out = run_many(&[member(2, 0, 1_000_000), member(1, 0, 1_000_000)]).unwrap();
    let n = reads(&out);
    assert!((n[0] as f64 / n[1] as f64 - 2.0).abs() < 0.05, "{n:?}");
    // A member whose partners cannot run before it ends is an error, not a hang.
    let later = with(member(1, 0, 0), json!({"batch": 1, "stonewall": true}));
    let err = run_many(&[member(1, 0, 0), later]).unwrap_err();
    assert!(err.to_string().contains("flow_id=0"), "{err}");
}

#[test]
fn a_rate_limited_queue_keeps_one_wake_up_per_clone() {
    // QD32 at 20,000 IOPS: every completion finds the next I/O held back. Each used to
    // push another wake-up for the same time, so the heap (and the work per I/O) grew
    // with the I/Os issued. Now the heap holds the in-flight I/Os and one wake-up.
    let rated = |ios: u64| {
        let rate = json!({"read": 0, "write": 20_000, "trim": 0});
        run_one(json!({"iodepth": 32, "rate_iops": rate, "size_bytes": ios * 4096, "io_size_bytes": ios * 4096})).unwrap()
    };
    let (short, f_short) = rated(256);
    let (long, f_long) = rated(4096);
    assert_eq!((short[0].write.total_ios, long[0].write.total_ios), (256, 4096));
    // The limit holds: 4,096 I/Os at 20,000 IOPS take 4,095 gaps of 50 us.
    assert!(long[0].elapsed_ns >= 4095 * 50_000, "{}", long[0].elapsed_ns);
    assert_eq!(f_short.events, f_long.events, "the event heap does not grow with the I/Os issued");
    assert!(f_long.events <= 64, "{} events", f_long.events);
}

#[test]
fn windowed_logs_hold_one_entry_per_row() {
    // bw/iops logs averaged over 1 s: state grows with the rows the log will have (the
    // output), not with the idle windows between them.
    let logs = json!({"bw": true, "iops": false, "lat": false, "hist": false, "avg_ms": 1000,
                      "hist_ms": 0, "max_value": false, "offset": false});
    let (out, f) = run_one(json!({"time_based": true, "runtime_ns": 86_400 * SECOND, "thinktime_ns": 60 * SECOND, "logs": logs})).unwrap();
    let rows = out[0].logs.bw.len();
    assert!(rows >= 1400, "{rows} rows");
    assert!(f.log_windows <= 2 * rows + 4, "{} windows held for {rows} rows", f.log_windows);
}

#[test]
fn a_run_past_the_clock_limit_is_an_error_not_an_overflow() {
    // 90 days of think time between I/Os: the third stall passes the 200-day limit.
    let err = run_one(json!({"thinktime_ns": 90 * NS_PER_DAY, "iodepth": 1})).unwrap_err();
    assert!(matches!(err, RunError::TimeLimit(MAX_RUN_NS)), "{err}");
    assert!(err.to_string().contains("pass 200 days"), "{err}");
    // Up to the limit the device timing works: 16 writes in the run's last second.
    let (out, _) = run_one(json!({"startdelay_ns": MAX_RUN_NS - SECOND, "number_ios": 16})).unwrap();
    assert_eq!(out[0].write.total_ios, 16);
    assert!(out[0].write.clat.max_ns < SECOND / 100, "{:?}", out[0].write.clat);
    let err = run_one(json!({"startdelay_ns": MAX_RUN_NS + 1})).unwrap_err();
    assert!(matches!(err, RunError::TimeLimit(MAX_RUN_NS)), "{err}");
    // Start delays and runtimes that would overflow u64 saturate, then hit the limit.
    let err = run_one(json!({"startdelay_ns": u64::MAX})).unwrap_err();
    assert!(matches!(err, RunError::TimeLimit(_)), "{err}");
    let far = json!({"ramp_time_ns": u64::MAX - 5, "runtime_ns": u64::MAX, "time_based": true, "thinktime_ns": 60 * NS_PER_DAY});
    let err = run_one(far).unwrap_err();
    assert!(matches!(err, RunError::TimeLimit(_)), "{err}");
}

#[test]
fn huge_rates_and_gaps_do_not_overflow() {
    // A 1 GiB I/O at 1 byte/s: the gap (1e18 s) does not fit in u64 ns and saturates.
    let (out, _) = run_one(json!({"rate_bytes_per_s": {"read": 0, "write": 1, "trim": 0}, "number_ios": 1})).unwrap();
    assert_eq!(out[0].write.total_ios, 1);
    // A sequential gap past the region: every I/O of a pass wraps back to the start.
    let (out, _) = run_one(json!({"rw": "write", "random": false, "rw_seq_add_bytes": u64::MAX, "loops": 2})).unwrap();
    assert_eq!(out[0].write.total_ios, 2 * 256);
}

// (the I/Os in flight at the window's ends differ), never to those of the ramp as well.
#[test]
fn depth_levels_count_from_the_ramps_end() {
    let timed = json!({"time_based": true, "runtime_ns": 50_000_000u64, "ramp_time_ns": 20_000_000u64, "iodepth": 8});
    let (out, _) = run_one(timed).unwrap();
    let o = &out[0];
    let counted: u64 = o.iodepth_level.iter().sum();
    let reported = o.read.total_ios + o.write.total_ios;
    assert!(reported > 1000, "{reported}");
    assert!(counted.abs_diff(reported) <= 2 * 8, "depths {counted} against {reported} I/Os reported");
}

// fio never resets the counters of a job that ends inside its ramp (libfio.c
// reset_all_stats runs once the ramp is over): it reports the ramp's I/Os over the time
// since its start, no latency sample; number_ios counts them too, so a limit reached in the
// ramp ends the job there (fio 3.33: 16 I/Os of `size=64k ramp_time=1s`, 10 of `number_ios=10`).
#[test]
fn a_job_that_ends_inside_its_ramp_reports_the_ramps_ios() {
    let ramp = json!({"ramp_time_ns": 10 * SECOND});
    let (out, _) = run_one(ramp.clone()).unwrap();
    let o = &out[0];
    assert_eq!((o.write.total_ios, o.write.io_bytes, o.write.clat.n), (256, 1 << 20, 0));
    assert_eq!(o.iodepth_level.iter().sum::<u64>(), 256);
    assert!(o.runtime_ns > 0 && o.runtime_ns == o.elapsed_ns, "{} {}", o.runtime_ns, o.elapsed_ns);
    assert_eq!(o.write.runtime_ns, o.runtime_ns);
    let (out, _) = run_one(with(ramp, json!({"number_ios": 10, "size_bytes": 64u64 << 20, "io_size_bytes": 64u64 << 20}))).unwrap();
    assert_eq!(out[0].write.total_ios, 10);
    assert!(out[0].elapsed_ns < SECOND, "{}", out[0].elapsed_ns);
}

// fio 3.33 resets its statistics at the first completion after ramp_time (time.c
// ramp_time_over via io_u.c should_account): that completion counts nowhere, and the I/Os
// still in flight count in io_bytes and the latencies when they complete (io_u.c
// io_completed, account_io_completion) but not in total_ios, counted at submission
// (ioengines.c td_io_queue). libaio iodepth=32 on a file: 31 more I/Os' bytes than I/Os,
// clat N = the bytes' I/Os. The twin dropped them all. number_ios after the reset counts them
// too (backend.c exceeds_number_ios: io_blocks + in flight): 19,969 I/Os, 20,000 x 4 KiB.
#[test]
fn ios_in_flight_at_the_ramps_end_count_in_bytes_and_latencies_not_in_ios() {
    let timed = json!({"time_based": true, "runtime_ns": 20_000_000u64, "ramp_time_ns": 10_000_000u64, "iodepth": 8});
    let ios_of = |extra: Value| {
        let (out, _) = run_one(with(timed.clone(), extra)).unwrap();
        let w = &out[0].write;
        (w.total_ios, w.io_bytes / 4096, w.clat.n, w.slat.n)
    };
    for general in [false, true] {
        GENERAL_PATH_ONLY.set(general);
        let (ios, bytes_ios, clat_n, slat_n) = ios_of(json!({}));
        assert!(ios > 1000, "{ios}");
        assert_eq!((bytes_ios, clat_n, slat_n), (ios + 7, ios + 7, ios), "general path {general}");
        // A synchronous engine's one I/O in flight is the completion that resets.
        let (ios, bytes_ios, clat_n, _) = ios_of(json!({"ioengine": "psync", "engine_async": false, "iodepth": 1}));
        assert!(ios > 100, "{ios}");
        assert_eq!((bytes_ios, clat_n), (ios, ios), "general path {general}");
        let limit = 3000;
        let (ios, bytes_ios, clat_n, _) =
            ios_of(json!({"time_based": false, "runtime_ns": 0, "ramp_time_ns": 1_000_000u64, "number_ios": limit,
            "size_bytes": 64u64 << 20, "io_size_bytes": 64u64 << 20}));
        assert_eq!((ios, bytes_ios, clat_n), (limit - 7, limit, limit), "general path {general}");
        GENERAL_PATH_ONLY.set(false);
    }
}

#[test]
fn a_met_latency_target_climbs_to_iodepth_and_reports_one_window() {
    let window_ns = 2_000_000;
    let job = |target_ns: u64| {
        let timed = json!({"time_based": true, "runtime_ns": 1_000_000_000u64, "iodepth": 16});
        let (out, _) = run_one(with(timed, json!({"latency_target_ns": target_ns, "latency_window_ns": window_ns}))).unwrap();
        out.into_iter().next().unwrap()
    };
    let loose = job(1_000_000_000);
    assert_eq!((loose.latency_depth, loose.error), (16, 0));
    // Windows at depths 1, 2, 4, 8, 16, 16, then the final window after the statistics
    // reset: the job ends long before its runtime and reports one window.
    assert!(loose.runtime_ns >= window_ns && loose.runtime_ns < 2 * window_ns, "{}", loose.runtime_ns);
    assert!(loose.elapsed_ns >= 6 * window_ns && loose.elapsed_ns < 7 * window_ns, "{}", loose.elapsed_ns);
    assert!(loose.iodepth_level[depth_slot(16)] > 0);
    // A target no I/O can meet at depth 1 ends the job with ETIMEDOUT (io_u.c lat_fatal).
    let impossible = job(1);
    assert_eq!((impossible.latency_depth, impossible.error), (1, 110));
    // Without a target, latency_depth is iodepth (lat_target_init).
    let (plain, _) = run_one(json!({"iodepth": 16})).unwrap();
    assert_eq!((plain[0].latency_depth, plain[0].error), (16, 0));
}

#[test]
fn serialize_overlap_keeps_one_io_per_block_in_flight() {
    // Two 4 KiB blocks, depth 32: with serialize_overlap at most two I/Os are in flight,
    // each on its own block; without it the queue fills.
    let job = |on: bool| {
        let tiny = json!({"size_bytes": 8192, "io_size_bytes": 1 << 20, "iodepth": 32, "serialize_overlap": on});
        run_one(tiny).unwrap().0.into_iter().next().unwrap()
    };
    let (held, plain) = (job(true), job(false));
    assert_eq!((held.write.total_ios, plain.write.total_ios), (256, 256));
    assert_eq!(held.iodepth_level.iter().skip(depth_slot(2) + 1).sum::<u64>(), 0, "{:?}", held.iodepth_level);
    assert!(plain.iodepth_level[depth_slot(32)] > 200, "{:?}", plain.iodepth_level);
    assert!(held.runtime_ns > plain.runtime_ns);
}

#[test]
fn a_missed_minimum_rate_ends_the_clone_with_eio_after_one_window() {
    // 1 ms of think time after each 4 KiB write: about 4 MB/s against a 100 MB/s minimum.
    let job = |min: u64| {
        let slow = json!({"time_based": true, "runtime_ns": 5 * SECOND, "iodepth": 1, "thinktime_ns": 1_000_000u64,
            "rate_min_bytes_per_s": {"read": 0, "write": min, "trim": 0}, "rate_cycle_ms": 1000});
        run_one(slow).unwrap().0.into_iter().next().unwrap()
    };
    let missed = job(100_000_000);
    assert_eq!(missed.error, 5);
    assert!(missed.error_text.starts_with("j: rate_min=100000000B/s not met, got "), "{}", missed.error_text);
    // 2 s to settle, then one 1 s window (the clone ends when its I/O in flight completes).
    assert!((3 * SECOND..3 * SECOND + 2_000_000).contains(&missed.runtime_ns), "{}", missed.runtime_ns);
    let met = job(1_000_000);
    assert_eq!((met.error, met.error_text.as_str()), (0, ""));
    assert!(met.runtime_ns >= 5 * SECOND);
}

/// The plain clones' short completion path (`Runner::done_plain`, `pump_plain`) against
/// the general path it skips steps of: the same reports and the same drive state for jobs
/// that take it (reads, writes, mixes, ramps, depths 1 to 64, runs that end on time, on
/// their size and when the generator ends, several clones) and for jobs beside ones that
/// do not (think time).
#[test]
fn plain_clones_short_path_reports_what_the_general_path_does() {
    let timed = |ms: u64| json!({"time_based": true, "runtime_ns": ms * 1_000_000});
    let jobs: Vec<Vec<Value>> = vec![
        vec![with(
            timed(20),
            json!({"rw": "randread", "directions": ["read"], "iodepth": 32, "size_bytes": 64 << 20, "io_size_bytes": 64 << 20}),
        )],
        vec![with(timed(20), json!({"iodepth": 32, "size_bytes": 1 << 20, "io_size_bytes": 1 << 20}))],
        vec![json!({"iodepth": 1})],
        vec![json!({"iodepth": 64, "size_bytes": 8 << 20, "io_size_bytes": 8 << 20, "norandommap": true})],
        vec![
            with(timed(15), json!({"rw": "randrw", "directions": ["read", "write"], "iodepth": 8, "ramp_time_ns": 3_000_000u64})),
            with(
                timed(15),
                json!({"rw": "write", "random": false, "iodepth": 4, "bs": {"read": {"min": 4096, "max": 4096, "split": null}, "write": {"min": 131072, "max": 131072, "split": null}, "trim": {"min": 4096, "max": 4096, "split": null}}, "blockalign": {"read": 4096, "write": 131072, "trim": 4096}}),
            ),
            with(timed(15), json!({"iodepth": 2, "thinktime_ns": 50_000u64, "thinktime_blocks": 3})),
        ],
    ];
    for (i, job) in jobs.iter().enumerate() {
        let outputs = [false, true].map(|general| {
            GENERAL_PATH_ONLY.set(general);
            let (mut ctrl, mut timing) = drive();
            let specs = job
                .iter()
                .enumerate()
                .map(|(k, e)| spec(&ctrl, with(e.clone(), json!({"thread_number": k + 1, "job_index": k}))))
                .collect();
            let out = run(&mut ctrl, &mut timing, specs, &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true).unwrap();
            GENERAL_PATH_ONLY.set(false);
            let f = ctrl.ftl_fingerprint().unwrap();
            (serde_json::to_string(&out).unwrap(), f.l2p_xxh3, f.p2l_xxh3, format!("{:?}", f.counters))
        });
        assert!(outputs[0].0.contains("\"total_ios\":"), "job {i} ran");
        assert_eq!(outputs[0], outputs[1], "job {i}");
    }
}

/// Every range-checked field of a hand-built job (docs/fio.md §3): one value out of range
/// is refused before the run with one message naming the field and the allowed range.
/// Before, `iodepth: 0` ran at depth 1 and `loops: 0`, `bw_avg_ms: 0` ran as well.
#[test]
fn hand_built_jobs_out_of_range_are_refused_naming_the_field() {
    let bs = |min: u64, max: u64| json!({"read": {"min": 4096, "max": 4096, "split": null}, "write": {"min": min, "max": max, "split": null}, "trim": {"min": 4096, "max": 4096, "split": null}});
    let cases: Vec<(Value, &str)> = vec![
        (json!({"iodepth": 0}), "iodepth 0: must be 1..=65536"),
        (json!({"iodepth": 65_537}), "iodepth 65537: must be 1..=65536"),
        (json!({"iodepth_configured": 0}), "iodepth_configured 0: must be 1..=65536"),
        (json!({"thread_number": 0}), "thread_number 0: must be 1..=4294967295"),
        (json!({"rw_nr": 0}), "rw_nr 0: must be 1..=4294967295"),
        (json!({"rwmixread": 101}), "rwmixread 101: must be 0..=100"),
        (json!({"rwmixwrite": 101}), "rwmixwrite 101: must be 0..=100"),
        (json!({"loops": 0}), "loops 0: must be 1..=4294967295"),
        (json!({"thinktime_blocks": 0}), "thinktime_blocks 0: must be 1..=4294967295"),
        (json!({"bw_avg_ms": 0}), "bw_avg_ms 0: must be 1..=4294967295"),
        (json!({"iops_avg_ms": 0}), "iops_avg_ms 0: must be 1..=4294967295"),
        (json!({"flow": 1001}), "flow 1001: must be 0..=1000"),
        (json!({"rate_cycle_ms": 1u64 << 32}), "rate_cycle_ms 4294967296: must be 0..=4294967295"),
        (json!({"pi_chk": 8}), "pi_chk 8: must be 0..=7"),
        (json!({"bs": bs(0, 4096)}), "bs.write.min 0: must be 1..=2147479552"),
        (json!({"bs": bs(8192, 4096)}), "bs.write.max 4096: must be 8192..=2147479552"),
        (json!({"bs": bs(4096, 1u64 << 32)}), "bs.write.max 4294967296: must be 4096..=2147479552"),
        (json!({"latency_percentile": 100.5}), "latency_percentile 100.5: must be 0..=100"),
        (json!({"latency_percentile": -1.0}), "latency_percentile -1: must be 0..=100"),
    ];
    let mut cases = cases;
    for (k, v, want) in [
        ("percentage_random", 101, "percentage_random.write 101: must be 0..=100"),
        ("rate_iops", 1u64 << 32, "rate_iops.write 4294967296: must be 0..=4294967295"),
        ("rate_iops_min", 1u64 << 32, "rate_iops_min.write 4294967296: must be 0..=4294967295"),
    ] {
        cases.push((json!({ k: {"read": 0, "write": v, "trim": 0} }), want));
    }
    let mut logs = job_template()["logs"].clone();
    logs["avg_ms"] = json!(1u64 << 32);
    cases.push((json!({ "logs": logs }), "logs.avg_ms 4294967296: must be 0..=4294967295"));
    let ss =
        json!({"metric": "iops", "slope": false, "percent": true, "limit": 1.0, "duration_s": 0, "ramp_ns": 0, "group_reporting": false});
    cases.push((json!({ "steadystate": ss }), "steadystate.duration_s 0: must be 1..=4294967295"));
    for (extra, want) in cases {
        match run_one(extra.clone()) {
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains(want) && e.starts_with("job 'j' (thread "), "{extra}: {e}");
            }
            Ok(_) => panic!("{extra} ran; wanted: {want}"),
        }
    }
}

// A QoS-capped namespace's commands are held in the drive, as when it is served: `ssdtwin
// serve` submits each command to the device timing as it arrives and replies at the
// completion it returns (ssdtwin-serve, `Backend::timed`). A closed loop of 16 reads so
// submitted and a fio job of iodepth=16 wait alike: 16 / 20K IOPS = 800 us each (Little's
// law), the hold included. The fio runner held each command in the host until it
// conformed: its reads reported the drive's service time alone (tens of us), at depth 1.
#[test]
fn a_capped_namespace_waits_as_long_in_fio_as_when_served() {
    const CAP: u64 = 20_000;
    const QD: u64 = 16;
    let (ramp, runtime) = (50_000_000u64, 200_000_000u64);
    let capped = || {
        let (mut ctrl, timing) = drive();
        ctrl.set_qos(NsId(1), crate::nvme::QosLimits { read_bytes_per_s: 0, write_bytes_per_s: 0, iops: CAP }).unwrap();
        (ctrl, timing)
    };
    let (mut ctrl, mut timing) = capped();
    let job = json!({"rw": "randread", "directions": ["read"], "iodepth": QD, "iodepth_configured": QD,
                     "time_based": true, "runtime_ns": runtime, "ramp_time_ns": ramp});
    let s = spec(&ctrl, job);
    let out = run(&mut ctrl, &mut timing, vec![s], &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true).unwrap();
    let fio = &out[0].read.clat;
    let fio_mean = fio.sum_ns as f64 / fio.n as f64;
    // Served: a new read as each completes, the latencies of those arriving after the ramp.
    let (mut ctrl, mut timing) = capped();
    let mut arrivals: BinaryHeap<std::cmp::Reverse<u64>> = (0..QD).map(|_| std::cmp::Reverse(0)).collect();
    let (mut lats, mut i) = (Vec::new(), 0u64);
    while let Some(std::cmp::Reverse(t)) = arrivals.pop() {
        if t >= ramp + runtime {
            break;
        }
        let done = timing.read(&mut ctrl, t, NsId(1), (i * 8) % 2048, 8).unwrap();
        i += 1;
        if t >= ramp {
            lats.push(done - t);
        }
        arrivals.push(std::cmp::Reverse(done));
    }
    let served_mean = lats.iter().sum::<u64>() as f64 / lats.len() as f64;
    let little = QD as f64 * 1e9 / CAP as f64;
    for (who, mean) in [("fio", fio_mean), ("served", served_mean)] {
        assert!((mean / little - 1.0).abs() < 0.01, "{who}: mean {mean} ns, Little's law {little} ns");
    }
    assert!((fio_mean / served_mean - 1.0).abs() < 0.005, "fio {fio_mean} ns, served {served_mean} ns");
    // The same shape: every latency of the steady state is the hold plus a read's service.
    let (smin, smax) = (*lats.iter().min().unwrap(), *lats.iter().max().unwrap());
    assert!(
        fio.min_ns.abs_diff(smin) < 5_000 && fio.max_ns.abs_diff(smax) < 5_000,
        "fio {}..{} ns, served {smin}..{smax} ns",
        fio.min_ns,
        fio.max_ns
    );
    assert!(fio.n.abs_diff(lats.len() as u64) <= QD, "fio {} reads, served {}", fio.n, lats.len());
}

// A run that ends while the drive holds commands of a capped namespace ends when the last
// held command completes, and counts as any other: number_ios and a size limit count the
// I/Os issued, a time-based run counts those issued after the ramp (the held ones in
// flight at its end included, at their completion), under round robin and WRR alike.
#[test]
fn runs_end_cleanly_with_commands_held_by_a_qos_cap() {
    const CAP: u64 = 20_000;
    for wrr in [false, true] {
        let run_capped = |extra: Value| {
            let (mut ctrl, mut timing) = drive();
            ctrl.set_qos(NsId(1), crate::nvme::QosLimits { read_bytes_per_s: 0, write_bytes_per_s: 0, iops: CAP }).unwrap();
            if wrr {
                ctrl.set_feature(0x01, NsId(0), 0x0f03_0000).unwrap();
            }
            let s = spec(&ctrl, with(json!({"iodepth": 32, "iodepth_configured": 32}), extra));
            run(&mut ctrl, &mut timing, vec![s], &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true).unwrap().remove(0)
        };
        // The first 21 writes conform at once (1 ms of tokens), then one per 50 us.
        let o = run_capped(json!({"number_ios": 100}));
        assert_eq!((o.write.total_ios, o.write.clat.n), (100, 100), "wrr {wrr}");
        assert!(o.elapsed_ns >= 79 * 50_000 && o.elapsed_ns < 81 * 50_000 + 200_000, "wrr {wrr}: {} ns", o.elapsed_ns);
        let o = run_capped(json!({}));
        assert_eq!((o.write.total_ios, o.write.io_bytes), (256, 1 << 20), "wrr {wrr}");
        // 100 ms after a 20 ms ramp: the 32 writes in flight at the ramp's end are not
        // counted, the 32 at the run's end are, 1.6 ms later.
        let timed = json!({"time_based": true, "runtime_ns": 100_000_000u64, "ramp_time_ns": 20_000_000u64});
        let o = run_capped(timed);
        assert_eq!(o.write.total_ios, 2000, "wrr {wrr}");
        assert!(o.runtime_ns.abs_diff(101_600_000) < 200_000, "wrr {wrr}: {} ns", o.runtime_ns);
        assert!((o.write.clat.sum_ns / o.write.clat.n).abs_diff(1_600_000) < 20_000, "wrr {wrr}: {:?}", o.write.clat);
        // A job that ends inside its ramp reports the ramp's I/Os.
        let o = run_capped(json!({"ramp_time_ns": 10 * SECOND}));
        assert_eq!((o.write.total_ios, o.write.clat.n), (256, 0), "wrr {wrr}");
    }
}
