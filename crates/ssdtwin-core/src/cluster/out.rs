//! What a cluster run reports: fio's per-clone output (so `ssdtwin cluster fio` prints fio
//! JSON), totals per direction, and the model's own counters: every resource's utilisation
//! and the time-average I/Os in flight, measured over the same window as the I/Os.

use serde::Serialize;

use super::ClusterError;
use crate::engine::fio::report::{
    depth_slot, ios_per_s, kib_per_s, submit_complete_levels, window_ns, CloneLogs, CloneOut, DirCounters, DirOut, LatencyBuckets,
};
use crate::progress::Spent;
use crate::workload::{Ddir, ExitWhat, Generator, JobSpec};

/// The measurement window: from the end of the ramp until the runtime ends (or the run).
#[derive(Copy, Clone, Debug)]
pub(super) struct Window {
    pub start: u64,
    pub end: u64,
}

impl Window {
    pub fn overlap(self, a: u64, b: u64) -> u64 {
        b.min(self.end).saturating_sub(a.max(self.start))
    }

    pub fn contains(self, t: u64) -> bool {
        t >= self.start && t < self.end
    }
}

/// A level that changes over time (busy cores, threads held, commands outstanding) and
/// its integral over the window: area = Σ level·dt, busy = time with level > 0.
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct Level {
    pub level: u32,
    since: u64,
    pub area: u128,
    pub busy: u64,
}

impl Level {
    pub fn add(&mut self, now: u64, delta: i32, w: Window) {
        self.settle(now, w);
        self.level = self.level.wrapping_add_signed(delta);
    }

    /// Account the time up to `now` at the current level.
    pub fn settle(&mut self, now: u64, w: Window) {
        let dt = w.overlap(self.since, now);
        self.area += self.level as u128 * dt as u128;
        if self.level > 0 {
            self.busy += dt;
        }
        self.since = now;
    }
}

/// A clone's generator, state and fio accounting.
pub(super) struct JobAcc {
    pub gen: Generator,
    iodepth: u32,
    pub inflight: u32,
    stopping: bool,
    pub finished: bool,
    ramp_end: u64,
    stop_at: u64,
    pub end_ns: u64,
    issued: u64,
    /// I/Os completed before fio's reset at the ramp's end: after it `number_ios` counts
    /// every I/O issued but these (backend.c exceeds_number_ios: io_blocks since the reset
    /// plus the I/Os in flight); inside the ramp it counts every I/O issued.
    done_before_stats: u64,
    /// fio's lazy reset at the ramp's end has happened (engine/fio/clone.rs `after_ramp`).
    ramp_reset: bool,
    /// An async submission triggered the reset: counted in bytes, not I/Os (per direction).
    ios_not_counted: [u64; 2],
    /// What the ramp counted (I/Os, bytes per direction; depths), reported only by a job that
    /// ends inside its ramp: fio's reset never came (libfio.c reset_all_stats).
    ramp_ios: [u64; 2],
    ramp_bytes: [u64; 2],
    ramp_depth_levels: [u64; 7],
    /// Bytes issued (the job's progress against its io_size × loops).
    bytes_issued: u64,
    dirs: [DirCounters; 2],
    depth_levels: [u64; 7],
    lat_buckets: LatencyBuckets,
    pub inflight_level: Level,
    lba: u64,
}

/// Why a job cannot run on the cluster model (one line, naming the option).
fn unsupported(spec: &JobSpec) -> Option<String> {
    let rate = spec.rate_iops.read | spec.rate_iops.write | spec.rate_bytes_per_s.read | spec.rate_bytes_per_s.write;
    let logs = &spec.logs;
    let rate_min = spec.rate_iops_min.read | spec.rate_iops_min.write | spec.rate_min_bytes_per_s.read | spec.rate_min_bytes_per_s.write;
    let checks: [(bool, &str); 14] = [
        (spec.directions.contains(&Ddir::Trim), "trim I/O (rw=trim, randtrim, trimwrite)"),
        (rate > 0, "rate, rate_iops"),
        (rate_min > 0, "rate_min, rate_iops_min"),
        (spec.serialize_overlap, "serialize_overlap"),
        (spec.thinktime_ns > 0, "thinktime"),
        (spec.flow != 0, "flow"),
        (spec.wait_for.is_some(), "wait_for"),
        (spec.batch > 0, "stonewall (one batch of jobs only)"),
        (spec.startdelay_ns > 0, "startdelay"),
        (spec.latency_target_ns > 0, "latency_target"),
        (spec.steadystate.is_some(), "steadystate"),
        (logs.bw || logs.iops || logs.lat || logs.hist, "write_*_log"),
        (spec.iolog || spec.replay.is_some(), "write_iolog, read_iolog"),
        (spec.exit_what != ExitWhat::None, "exitall"),
    ];
    checks.iter().find(|c| c.0).map(|c| format!("job '{}': {} is not modelled by the cluster (docs/cli.md, cluster fio)", spec.name, c.1))
}

impl JobAcc {
    pub fn new(spec: JobSpec, target_bytes: u64) -> Result<JobAcc, ClusterError> {
        if let Some(why) = unsupported(&spec) {
            return Err(ClusterError::Unsupported(why));
        }
        let ramp_end = spec.ramp_time_ns;
        let stop_at = if spec.runtime_ns > 0 { ramp_end.saturating_add(spec.runtime_ns) } else { u64::MAX };
        let (iodepth, lba) = (spec.iodepth.max(1), spec.lba_bytes.max(1) as u64);
        let gen = Generator::new(spec, target_bytes)?;
        Ok(JobAcc {
            gen,
            iodepth,
            inflight: 0,
            stopping: false,
            finished: false,
            ramp_end,
            stop_at,
            end_ns: 0,
            issued: 0,
            done_before_stats: 0,
            ramp_reset: ramp_end == 0,
            ios_not_counted: [0; 2],
            ramp_ios: [0; 2],
            ramp_bytes: [0; 2],
            ramp_depth_levels: [0; 7],
            bytes_issued: 0,
            dirs: Default::default(),
            depth_levels: [0; 7],
            lat_buckets: LatencyBuckets::default(),
            inflight_level: Level::default(),
            lba,
        })
    }

    /// What this job has spent of its budget at `now` (every job starts at 0).
    pub fn spent(&self, now: u64) -> Spent {
        Spent { bytes: self.bytes_issued, ios: self.issued, ns: now, finished: self.finished }
    }

    /// The run's measurement window as far as this clone sets it (fio starts every clone
    /// at 0 here: no startdelay).
    pub fn window(&self) -> Window {
        Window { start: self.ramp_end, end: self.stop_at }
    }

    /// The next I/O to issue now as (offset, write, len), or None (queue full, done, or
    /// stopping; a clone that is done and has nothing in flight finishes).
    pub fn next(&mut self, now: u64, w: Window) -> Option<(u64, bool, u64)> {
        if self.finished {
            return None;
        }
        let spec = &self.gen.spec;
        // number_ios as fio's exceeds_number_ios (backend.c): inside the ramp every I/O
        // issued, after fio's reset all but those completed before it.
        let counted = if now < self.ramp_end { self.issued } else { self.issued - self.done_before_stats };
        if now >= self.stop_at || spec.number_ios_limit().is_some_and(|limit| counted >= limit) {
            self.stopping = true;
        }
        if !self.stopping && self.inflight < self.iodepth {
            match self.gen.next_io() {
                Some(io) if io.offset % self.lba == 0 && io.len % self.lba == 0 => {
                    // Counted from the ramp's end, as fio's reset_io_stats does.
                    if now >= self.ramp_end {
                        self.depth_levels[depth_slot(self.inflight + 1)] += 1;
                        // An async engine's first submission after the ramp triggers fio's
                        // reset after td_io_queue counted it (engine/fio/clone.rs).
                        if !self.ramp_reset && self.gen.spec.engine_async {
                            self.ramp_reset = true;
                            self.ios_not_counted[(io.ddir == Ddir::Write) as usize] += 1;
                        }
                    } else {
                        self.ramp_depth_levels[depth_slot(self.inflight + 1)] += 1;
                    }
                    self.inflight += 1;
                    self.issued += 1;
                    self.bytes_issued += io.len;
                    self.inflight_level.add(now, 1, w);
                    return Some((io.offset, io.ddir == Ddir::Write, io.len));
                }
                // Unaligned I/O has no LBA on the volume: the parser's bs/blockalign prevent it.
                Some(_) | None => self.stopping = true,
            }
        }
        if self.stopping && self.inflight == 0 {
            self.finished = true;
            self.end_ns = now;
        }
        None
    }

    /// An I/O issued at `issued` completed now, counted as fio 3.33 counts it (the drive
    /// engine's rule, engine/fio/clone.rs `after_ramp`): inside the ramp only for a job that
    /// ends there; after it, the completion that triggers fio's lazy reset nowhere, an I/O
    /// in flight across the reset in the bytes and latencies but not the I/Os, the others in
    /// all.
    /// Returns its latency if it counts as an I/O issued and completed after the ramp (the
    /// cluster's totals count only those).
    pub fn complete(&mut self, now: u64, write: bool, len: u64, issued: u64, w: Window) -> Option<u64> {
        self.inflight -= 1;
        self.inflight_level.add(now, -1, w);
        if now < self.ramp_end {
            self.done_before_stats += 1;
            self.ramp_ios[write as usize] += 1;
            self.ramp_bytes[write as usize] += len;
            return None;
        }
        if !self.ramp_reset {
            self.ramp_reset = true;
            self.done_before_stats += 1;
            return None;
        }
        let counted = issued >= self.ramp_end;
        let lat = now - issued;
        let spec = &self.gen.spec;
        let (bw_ms, iops_ms) = (spec.bw_avg_ms, spec.iops_avg_ms);
        let rel = now - self.ramp_end;
        let d = &mut self.dirs[write as usize];
        d.ios += counted as u64;
        d.io_bytes += len;
        d.clat.add(lat);
        d.bw_window.add(rel / window_ns(bw_ms), len, bw_ms, kib_per_s);
        d.iops_window.add(rel / window_ns(iops_ms), 1, iops_ms, ios_per_s);
        self.lat_buckets.add(lat);
        counted.then_some(lat)
    }

    /// fio's output of the clone (docs/fio.md §4): slat 0, lat = clat (submission is part
    /// of the modelled path, not measured apart).
    pub fn out(mut self) -> CloneOut {
        // A job that ended inside its ramp was never reset: fio reports the ramp's counts
        // over the time since its start (0), with no latency (engine/fio/accounting.rs).
        let never_reset = self.end_ns < self.ramp_end;
        if never_reset {
            for (di, d) in self.dirs.iter_mut().enumerate() {
                d.ios = self.ramp_ios[di];
                d.io_bytes = self.ramp_bytes[di];
            }
            self.depth_levels = self.ramp_depth_levels;
        } else {
            for (d, not_counted) in self.dirs.iter_mut().zip(self.ios_not_counted) {
                d.ios = d.ios.saturating_sub(not_counted);
            }
        }
        let counted_from = if never_reset { 0 } else { self.ramp_end };
        let runtime = self.end_ns.max(counted_from).saturating_sub(counted_from);
        let spec = self.gen.spec;
        let mut dirs = self
            .dirs
            .into_iter()
            .zip([Ddir::Read, Ddir::Write])
            .map(|(d, ddir)| d.out(&spec, spec.directions.contains(&ddir), runtime, runtime));
        let (read, write) = (dirs.next().expect("2"), dirs.next().expect("2"));
        let (submit, complete) = submit_complete_levels(spec.engine_async, self.depth_levels.iter().sum());
        CloneOut {
            version: 1,
            thread_number: spec.thread_number,
            start_ns: 0,
            elapsed_ns: self.end_ns,
            runtime_ns: runtime,
            read,
            write,
            trim: DirOut::idle(),
            iodepth_level: self.depth_levels,
            iodepth_submit: submit,
            iodepth_complete: complete,
            latency_buckets: self.lat_buckets.map(),
            logs: CloneLogs::default(),
            iolog: None,
            latency_depth: spec.iodepth.max(1),
            error: 0,
            error_text: String::new(),
            steadystate: None,
        }
    }
}

/// One direction's totals over every clone.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirTotals {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub lat_mean_ns: f64,
    pub lat_p50_ns: u64,
    pub lat_p99_ns: u64,
    pub lat_max_ns: u64,
}

/// How busy one resource was over the window.
#[derive(Clone, Debug, Serialize)]
pub struct ResourceUse {
    /// e.g. `node0.cores`, `osd3.msgr`, `client1.job0.cpu`, `node2.nic-tx`, `drive7`.
    pub name: String,
    /// cores, threads, lock, nic-tx, nic-rx, kv-sync, drive.
    pub kind: String,
    /// Servers (cores, threads); 1 for ports, locks and drives.
    pub servers: u32,
    /// Fraction of the servers' time busy, 0..=1 (for a drive: its command rate over the
    /// controller's ceiling, `ctrl_max_iops`; a drive serves many commands at once).
    pub utilisation: f64,
    /// Time-average number in use (cores busy, threads held, a drive's commands outstanding).
    pub mean_in_use: f64,
}

/// Per drive: commands over the window and the controller's share of its command ceiling.
#[derive(Clone, Debug, Serialize)]
pub struct DriveLoad {
    pub drive: u32,
    pub node: u32,
    pub reads: u64,
    pub writes: u64,
    pub commands_per_s: f64,
    /// commands_per_s / the preset's ctrl_max_iops.
    pub ctrl_load: f64,
    /// Share of the window with a command outstanding (iostat's %util).
    pub busy: f64,
    pub mean_outstanding: f64,
}

/// The result of one cluster run.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterRun {
    pub stack: String,
    pub seed: u64,
    pub scale: u32,
    /// fio's per-clone output, in job order.
    pub clones: Vec<CloneOut>,
    /// The measurement window in virtual ns.
    pub window_ns: [u64; 2],
    pub read: DirTotals,
    pub write: DirTotals,
    /// Time-average I/Os in flight over the window, from the clones' own counters: Little's
    /// law says it equals Σ IOPS x mean latency.
    pub outstanding_mean: f64,
    /// Every resource, busiest first.
    pub resources: Vec<ResourceUse>,
    pub drives: Vec<DriveLoad>,
    /// kv_sync batches and transactions committed per OSD (Ceph), summed.
    pub kv_batches: u64,
    pub kv_txns: u64,
    /// Events the simulation handled (its cost).
    pub events: u64,
    /// Virtual time simulated.
    pub simulated_ns: u64,
}
