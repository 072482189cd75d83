//! What a completion counts (fio's stat.c): per-direction totals and latency histograms,
//! bw/iops sample windows, latency buckets, the bw/iops/lat/hist logs; and the clone's
//! report at the end of the run.

use super::clone::{AfterRamp, Carried, JobClone, LatLogWindow};
use super::report::{ios_per_s, kib_per_s, sampled_windows, submit_complete_levels, CloneOut, DirOut, HistRow, LogRow};
use super::steadystate::SsState;
use super::Runner;
use crate::engine::iolog::IoLog;
use crate::stats::{plat_index, PLAT_NR};

impl Runner<'_> {
    /// Clone `c`'s I/O (`ddir`, `len` bytes at `offset`, issued at `issued`) completed now.
    pub(super) fn complete(&mut self, c: usize, ddir: u8, len: u64, offset: u64, issued: u64) {
        let now = self.now;
        let cl = &mut self.clones[c];
        cl.inflight -= 1;
        if let Some(ss) = &mut cl.ss {
            ss.count(now, cl.ramp_end, len);
        }
        if now < cl.ramp_end {
            cl.ios_done_before_stats += 1;
            cl.ramp.ios[ddir as usize] += 1;
            cl.ramp.bytes[ddir as usize] += len;
            return;
        }
        let counted = match cl.after_ramp(issued) {
            AfterRamp::Trigger => return,
            AfterRamp::BytesOnly => false,
            AfterRamp::Counted => true,
        };
        // A converging run's clone refilling its queue after fast-forward (converge.rs).
        if counted && cl.carried.warmup_left > 0 {
            cl.carried.warmup_left -= 1;
            cl.carried.uncounted.ios[ddir as usize] += 1;
            cl.carried.uncounted.bytes[ddir as usize] += len;
            return;
        }
        let clat = now - issued;
        count(cl, ddir, len, clat, now, counted as u64);
        if cl.gen.spec.logs.hist {
            let d = &mut cl.stats.dirs[ddir as usize];
            if d.hist_since.is_empty() {
                d.hist_since = vec![0; PLAT_NR];
            }
            d.hist_since[plat_index(clat)] += 1;
        }
        if cl.logging {
            log_sample(cl, ddir, len, offset, clat, now);
        }
        // (The convergence samples start after the ramp: an I/O in flight across its end
        // is none of theirs.)
        if let Some(cv) = self.conv.as_deref_mut().filter(|_| counted) {
            cv.record(c, ddir as usize, len, clat);
        }
    }
}

/// What every counted completion adds to the report (an I/O of `ddir`, `len` bytes,
/// `clat_ns`, completed at `now`, after the ramp): the direction's totals (`ios` is 0 for an
/// I/O issued before the ramp's end, which fio counts in io_bytes but not in total_ios), its
/// latency histogram, its bw/iops sample windows and the latency buckets.
#[inline(always)]
pub(super) fn count(cl: &mut JobClone, ddir: u8, len: u64, clat_ns: u64, now: u64, ios: u64) {
    let d = &mut cl.stats.dirs[ddir as usize];
    d.counters.io_bytes += len;
    d.counters.ios += ios;
    // The twin does not model host submission, so slat is 0 and lat = clat: one
    // histogram, reported for both.
    d.counters.clat.add(clat_ns);
    // fio's helper thread samples bw and iops only while the job runs: an I/O completing
    // once the runtime is over counts in the totals, but neither it nor the window it
    // would close gives a sample (`finish`).
    if now < cl.stop_at {
        let rel = now - cl.ramp_end;
        let (bw_ms, iops_ms) = (cl.gen.spec.bw_avg_ms, cl.gen.spec.iops_avg_ms);
        d.counters.bw_window.add_at(rel, cl.bw_window_ns, len, bw_ms, kib_per_s);
        d.counters.iops_window.add_at(rel, cl.iops_window_ns, 1, iops_ms, ios_per_s);
    }
    cl.stats.lat_buckets.add(clat_ns);
}

// `avg_ms == 0` selects per-I/O logging (fio's log_avg_msec), it is not a guard for the division.
#[allow(clippy::manual_checked_ops)]
fn log_sample(cl: &mut JobClone, ddir: u8, len: u64, offset: u64, clat: u64, now: u64) {
    let spec = &cl.gen.spec.logs;
    if !(spec.bw || spec.iops || spec.lat || spec.hist) {
        return;
    }
    // fio records slat only for an I/O its engine queued (ioengines.c td_io_queue calls
    // io_u_queued on FIO_Q_QUEUED): a synchronous engine's slat log stays empty.
    let slat = cl.gen.spec.engine_async;
    let t_ms = (now - cl.ramp_end) / 1_000_000;
    let off = if spec.offset { offset } else { 0 };
    if spec.avg_ms == 0 {
        let row = |value: u64| LogRow { t_ms, value, ddir, bs: len, offset: off };
        let logs = &mut cl.logs;
        if spec.lat {
            logs.lat.push(row(clat));
            logs.clat.push(row(clat));
            if slat {
                logs.slat.push(row(0));
            }
        }
        if spec.bw {
            logs.bw.push(row(len * 1_000_000 / clat.max(1)));
        }
        if spec.iops {
            logs.iops.push(row(1));
        }
    } else {
        // A bw (iops) log row is a bw (iops) sample: fio's init.c averages the log over
        // min(log_avg_msec, bwavgtime) but takes the samples every bwavgtime, which is
        // log_avg_msec unless bwavgtime was given (bw_avg_ms already says which).
        let windows = &mut cl.stats.dirs[ddir as usize].log_windows;
        for (logged, window_ms, amount, w) in [(spec.bw, cl.gen.spec.bw_avg_ms, len, 0), (spec.iops, cl.gen.spec.iops_avg_ms, 1, 1)] {
            if !logged {
                continue;
            }
            let k = t_ms / window_ms.max(1);
            match windows[w].last_mut() {
                Some(last) if last.0 == k => last.1 += amount,
                _ => windows[w].push((k, amount)),
            }
        }
        if !spec.lat {
            return log_hist(cl, ddir, len, t_ms);
        }
        // fio's windowed latency logs (docs/fio.md §4): a row when a sample arrives at least
        // avg_ms after the window start; the window restarts at that time rounded down.
        let avg = spec.avg_ms;
        let max_value = spec.max_value;
        let d = &mut cl.stats.dirs[ddir as usize];
        let logs = &mut cl.logs;
        for (k, (rows, v)) in [(&mut logs.lat, clat), (&mut logs.clat, clat), (&mut logs.slat, 0u64)].into_iter().enumerate() {
            if k == 2 && !slat {
                continue;
            }
            let w = &mut d.lat_window[k];
            w.add(v);
            if t_ms >= w.start_ms + avg {
                rows.push(LogRow { t_ms, value: w.value(max_value), ddir, bs: 0, offset: 0 });
                *w = LatLogWindow { start_ms: t_ms / avg * avg, ..Default::default() };
            }
        }
    }
    log_hist(cl, ddir, len, t_ms);
}

/// fio's histogram log (stat.c `add_clat_sample`): each direction keeps its own window,
/// which starts at the direction's first completion (at 0 ms it is taken again at the
/// next one: fio tests `!hist_last`); a completion `hist_ms` or more after the window's
/// start writes a row of that direction, with the I/O's block size, and moves the start
/// on by `hist_ms`.
fn log_hist(cl: &mut JobClone, ddir: u8, len: u64, t_ms: u64) {
    let spec = &cl.gen.spec.logs;
    if !spec.hist || spec.hist_ms == 0 {
        return;
    }
    let d = &mut cl.stats.dirs[ddir as usize];
    if d.hist_last_ms == 0 {
        d.hist_last_ms = t_ms;
    }
    if t_ms - d.hist_last_ms >= spec.hist_ms {
        let buckets = d.hist_since.iter().enumerate().filter(|(_, &x)| x > 0).map(|(i, &x)| (i as u64, x)).collect();
        cl.logs.clat_hist.push(HistRow { t_ms, ddir, bs: len, buckets });
        d.hist_since.iter_mut().for_each(|x| *x = 0);
        d.hist_last_ms += spec.hist_ms;
    }
}

/// A converging run's direction `di`: its totals count every I/O the clone issued, timed or
/// carried in fast-forward, over the round's whole time (the latencies and the bw/iops
/// samples are the timed samples'). Nothing changes in a run timed in full.
fn carry_into(out: &mut DirOut, carried: &Carried, di: usize, has_dir: bool, runtime: u64) {
    let (ios, bytes) = (carried.ff.ios[di] + carried.uncounted.ios[di], carried.ff.bytes[di] + carried.uncounted.bytes[di]);
    if ios == 0 && carried.ff_ns == 0 {
        return;
    }
    out.total_ios += ios;
    out.io_bytes += bytes;
    out.runtime_ns = if out.total_ios > 0 && has_dir { runtime + carried.ff_ns } else { 0 };
}

/// The clone's report (docs/fio.md §4) once the run is over.
pub(super) fn finish(mut cl: JobClone) -> CloneOut {
    // A clone that ended inside its ramp was never reset (libfio.c reset_all_stats runs
    // once the ramp is over): fio reports the ramp's counts, over the time since the
    // clone's start, with no latency and no bw/iops sample (none is taken in the ramp).
    let never_reset = cl.end_ns < cl.ramp_end;
    let counted_from = if never_reset { cl.start_ns } else { cl.ramp_end };
    if never_reset {
        for (di, d) in cl.stats.dirs.iter_mut().enumerate() {
            d.counters.ios += cl.ramp.ios[di];
            d.counters.io_bytes += cl.ramp.bytes[di];
        }
        cl.stats.depth_levels = cl.ramp.depth_levels;
    } else {
        for (d, not_counted) in cl.stats.dirs.iter_mut().zip(cl.ios_not_counted) {
            d.counters.ios = d.counters.ios.saturating_sub(not_counted);
        }
    }
    let run_end = cl.end_ns.max(counted_from);
    let runtime = run_end.saturating_sub(counted_from);
    // The bw/iops windows are sampled until the run ends, or its runtime runs out if that
    // comes first (I/Os in flight then still complete).
    let samples_end = if never_reset { 0 } else { runtime.min(cl.stop_at.saturating_sub(cl.ramp_end)) };
    let spec = cl.gen.spec.clone();
    let mut logs = cl.logs;
    // Windowed bw/iops logs and the open latency windows are written at the end.
    let avg = spec.logs.avg_ms;
    let mut dirs_out = Vec::new();
    for (di, d) in cl.stats.dirs.into_iter().enumerate() {
        let ddir = di as u8;
        if avg > 0 {
            // One row per sampled window (the JSON's bw/iops samples) with I/O in it.
            let bw = (&mut logs.bw, spec.bw_avg_ms, kib_per_s as fn(u64, u64) -> u64);
            let iops = (&mut logs.iops, spec.iops_avg_ms, ios_per_s as fn(u64, u64) -> u64);
            for ((rows, window_ms, per_s), windows) in [bw, iops].into_iter().zip(&d.log_windows) {
                let nwin = sampled_windows(window_ms, samples_end);
                for &(k, amount) in windows.iter().take_while(|w| w.0 < nwin) {
                    let t_ms = (k + 1) * window_ms;
                    rows.push(LogRow { t_ms, value: per_s(amount, window_ms), ddir, bs: 0, offset: 0 });
                }
            }
        }
        if avg > 0 && spec.logs.lat {
            let end_ms = runtime / 1_000_000;
            for (k, rows) in [&mut logs.lat, &mut logs.clat, &mut logs.slat].into_iter().enumerate() {
                let w = d.lat_window[k];
                if w.samples > 0 {
                    rows.push(LogRow { t_ms: end_ms, value: w.value(spec.logs.max_value), ddir, bs: 0, offset: 0 });
                }
            }
        }
        let has_dir = spec.directions.iter().any(|x| x.index() == di);
        let mut out = d.counters.out(&spec, has_dir, runtime, samples_end);
        carry_into(&mut out, &cl.carried, di, has_dir, runtime);
        dirs_out.push(out);
    }
    logs.sort();
    let mut it = dirs_out.into_iter();
    let (read, write, trim) = (it.next().expect("3"), it.next().expect("3"), it.next().expect("3"));
    let (submit, complete) = submit_complete_levels(spec.engine_async, cl.stats.depth_levels.iter().sum());
    CloneOut {
        version: 1,
        thread_number: spec.thread_number,
        start_ns: cl.start_ns,
        elapsed_ns: cl.end_ns.saturating_sub(cl.start_ns) + cl.carried.ff_ns,
        runtime_ns: runtime + cl.carried.ff_ns,
        read,
        write,
        trim,
        iodepth_level: cl.stats.depth_levels,
        iodepth_submit: submit,
        iodepth_complete: complete,
        latency_buckets: cl.stats.lat_buckets.map(),
        logs,
        iolog: cl.iolog.map(IoLog::into_packed),
        latency_depth: cl.lat.as_ref().map_or(spec.iodepth.max(1), |p| p.qd),
        error: cl.error,
        error_text: cl.error_text,
        steadystate: cl.ss.as_ref().map(SsState::out),
    }
}
