//! The job contract (docs/fio.md §3): what one fio job asks for, as the parser hands it
//! to the core, and the errors of a job that cannot run.

use crate::progress::Budget;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::{trace, Ddir};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerDir<T> {
    pub read: T,
    pub write: T,
    pub trim: T,
}

impl<T> PerDir<T> {
    /// Direction `d`'s value, borrowed (for values that are not `Copy`).
    pub fn of(&self, d: Ddir) -> &T {
        match d {
            Ddir::Read => &self.read,
            Ddir::Write => &self.write,
            Ddir::Trim => &self.trim,
        }
    }
}

impl<T: Copy> PerDir<T> {
    pub fn get(&self, d: Ddir) -> T {
        match d {
            Ddir::Read => self.read,
            Ddir::Write => self.write,
            Ddir::Trim => self.trim,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BsSpec {
    pub min: u64,
    pub max: u64,
    pub split: Option<Vec<(u64, f64)>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    pub access_pct: f64,
    #[serde(default)]
    pub range_pct: Option<f64>,
    #[serde(default)]
    pub range_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomDistribution {
    pub kind: String,
    pub param: Option<f64>,
    pub center: Option<f64>,
    pub zones: Option<BTreeMap<String, Option<Vec<Zone>>>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSpec {
    pub bw: bool,
    pub iops: bool,
    pub lat: bool,
    pub hist: bool,
    pub avg_ms: u64,
    pub hist_ms: u64,
    pub max_value: bool,
    pub offset: bool,
}

/// One job clone (docs/fio.md §3, version 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub version: u32,
    pub name: String,
    pub job_index: u32,
    pub thread_number: u32,
    pub subjob: u32,
    pub group_id: u32,
    pub batch: u32,
    pub stonewall: bool,
    pub filename: Option<String>,
    pub namespace: Option<u32>,
    pub target_size_bytes: u64,
    pub lba_bytes: u32,
    pub rw: String,
    pub directions: Vec<Ddir>,
    pub random: bool,
    pub rw_nr: u64,
    pub rw_seq_add_bytes: u64,
    pub rwmixread: u32,
    pub rwmixwrite: u32,
    pub bs: PerDir<BsSpec>,
    pub bs_unaligned: bool,
    pub blockalign: PerDir<u64>,
    pub offset_bytes: u64,
    pub size_bytes: u64,
    pub io_size_bytes: u64,
    pub loops: u64,
    pub fill_device: bool,
    pub number_ios: u64,
    pub ioengine: String,
    pub engine_async: bool,
    pub iodepth: u32,
    pub iodepth_configured: u32,
    pub time_based: bool,
    pub runtime_ns: u64,
    pub ramp_time_ns: u64,
    pub startdelay_ns: u64,
    pub norandommap: bool,
    pub random_generator: String,
    pub seed: u64,
    pub seeds: BTreeMap<String, u64>,
    pub seed_source: String,
    pub random_distribution: RandomDistribution,
    pub percentage_random: PerDir<u32>,
    pub rate_bytes_per_s: PerDir<u64>,
    pub rate_iops: PerDir<u64>,
    pub rate_process: RateProcess,
    pub thinktime_ns: u64,
    pub thinktime_spin_ns: u64,
    pub thinktime_blocks: u64,
    #[serde(default)]
    pub thinktime_blocks_type: ThinktimeBlocksType,
    pub bw_avg_ms: u64,
    pub iops_avg_ms: u64,
    pub logs: LogSpec,
    /// write_iolog: hand back the issued I/Os in `CloneOut::iolog` (docs/fio.md §2.10).
    #[serde(default)]
    pub iolog: bool,
    /// read_iolog: issue these I/Os, paced by their timestamps, instead of the generator's.
    #[serde(default)]
    pub replay: Option<trace::ReplayTrace>,
    // --- scheduling: wait_for, exit_what, flow (docs/fio.md §3) ---
    /// fio's exitall/exit_what: which other clones this one terminates when it finishes;
    /// `none` unless some job of the run set `exitall` (fio's flag is global to the run).
    #[serde(default)]
    pub exit_what: ExitWhat,
    /// fio's wait_for: this clone starts only once every clone of the named job has finished.
    #[serde(default)]
    pub wait_for: Option<String>,
    /// fio's flow: weight of this clone in its `flow_id` group (0 = no flow control).
    #[serde(default)]
    pub flow: u32,
    /// fio's flow_id: clones with the same id share one flow counter.
    #[serde(default)]
    pub flow_id: u32,
    /// fio's flow_sleep: after being held back, wait for the I/Os in flight, then this long.
    #[serde(default)]
    pub flow_sleep_ns: u64,
    // --- generators: fio's, bit for bit (docs/fio.md §3) ---
    /// bssplit entries per direction as fio keeps them (options.c `bssplit_ddir`: missing
    /// percentages filled in, stably sorted by percentage); empty = no split. Without it
    /// the split is taken from `bs.*.split`.
    #[serde(default)]
    pub bssplit_fio: Option<PerDir<Vec<(u64, u32)>>>,
    /// fio's run-time `randrepeat` (false when `randseed` is given): every pass re-seeds
    /// the streams. Without it: `seed_source == "randrepeat"`.
    #[serde(default)]
    pub randrepeat: Option<bool>,
    /// `io_size` was given (a pass that ends early is then followed by another). Without
    /// it: `io_size_bytes != size_bytes`.
    #[serde(default)]
    pub io_size_set: Option<bool>,
    /// Signed `rw=...:N` stride for sequential jobs (negative = backwards); overrides
    /// `rw_seq_add_bytes` when present.
    #[serde(default)]
    pub rw_seq_add_signed: Option<i64>,
    /// io_uring_cmd's pi_act: the controller inserts and strips the protection information
    /// (PRACT), so the host moves no PI (docs/fio.md, Protection information).
    #[serde(default)]
    pub pi_act: bool,
    /// io_uring_cmd's pi_chk as PRCHK bits (4 guard, 2 application tag, 1 reference tag).
    #[serde(default)]
    pub pi_chk: u8,
    /// zonemode=strided: bytes of I/O per zone (`zonesize`); 0 = no zones.
    #[serde(default)]
    pub zone_size_bytes: u64,
    /// zonemode=strided: the zone's extent (`zonerange`; fio defaults it to zonesize).
    #[serde(default)]
    pub zone_range_bytes: u64,
    /// zonemode=strided: bytes skipped after each zone (`zoneskip`).
    #[serde(default)]
    pub zone_skip_bytes: u64,
    // --- latency_target (docs/fio.md §3) ---
    /// fio's latency_target in ns (0 = off): probe for the highest queue depth whose
    /// completions meet it (io_u.c lat_target_*).
    #[serde(default)]
    pub latency_target_ns: u64,
    /// fio's latency_window: simulated time each probed depth runs before it is judged.
    #[serde(default)]
    pub latency_window_ns: u64,
    /// fio's latency_percentile: the share of a window's completions (%) that must meet
    /// the target; 100 makes every late completion a failure at once.
    #[serde(default = "percent_100")]
    pub latency_percentile: f64,
    /// fio's latency_run: keep adjusting the depth instead of ending at the depth found.
    #[serde(default)]
    pub latency_run: bool,
    // --- minimum rates and overlap serialisation (docs/fio.md §3) ---
    /// fio's rate_min in bytes/s per direction (0 = none): the job ends with EIO when a
    /// `rate_cycle_ms` window after the first 2 s completes less (backend.c check_min_rate).
    #[serde(default)]
    pub rate_min_bytes_per_s: PerDir<u64>,
    /// fio's rate_iops_min per direction, checked as `rate_min_bytes_per_s` (and only when
    /// that direction has no byte minimum).
    #[serde(default)]
    pub rate_iops_min: PerDir<u64>,
    /// fio's ratecycle: the window (ms) over which a minimum rate is measured.
    #[serde(default = "rate_cycle_1000")]
    pub rate_cycle_ms: u64,
    /// fio's serialize_overlap: an I/O whose range overlaps one in flight waits until no
    /// I/O in flight overlaps it (backend.c io_u_submit, in_flight_overlap).
    #[serde(default)]
    pub serialize_overlap: bool,
    // --- steady state, ss (docs/fio.md §3) ---
    /// fio's steadystate/ss_dur/ss_ramp: end the clone (its group, with group_reporting)
    /// once the per-second IOPS or bandwidth settles; None without `ss_dur`.
    #[serde(default)]
    pub steadystate: Option<SteadyStateSpec>,
}

/// The allowed range of every numeric field of the contract that has one (docs/fio.md §3):
/// fio's own limits (options.c minval/maxval, its 32-bit fields) and the twin's (an NVMe
/// queue holds 65536 commands). `(field, value, lo, hi)`; checked where a job enters the
/// core ([`JobSpec::check_ranges`]).
pub const MAX_IODEPTH: u64 = 65_536;
/// fio's largest block size (options.c `bs` maxval, 2 GiB less a 4 KiB page).
pub const MAX_BS: u64 = 2_147_479_552;
const U32_MAX: u64 = u32::MAX as u64;

impl JobSpec {
    /// Every numeric field of the contract within its range, or one message naming the
    /// field, its value and the allowed range (a hand-built job, e.g. `iodepth: 0`). The
    /// percentages are those fio's parser keeps to 0..=100 (options.c maxval/maxfp): a
    /// contract input from elsewhere must not run with a share fio cannot express.
    pub fn check_ranges(&self) -> Result<(), String> {
        let mut fields: Vec<(String, u64, u64, u64)> = vec![
            ("version".into(), self.version as u64, 1, 1),
            ("thread_number".into(), self.thread_number as u64, 1, U32_MAX),
            ("lba_bytes".into(), self.lba_bytes as u64, 1, U32_MAX),
            ("rw_nr".into(), self.rw_nr, 1, U32_MAX),
            ("rwmixread".into(), self.rwmixread as u64, 0, 100),
            ("rwmixwrite".into(), self.rwmixwrite as u64, 0, 100),
            ("loops".into(), self.loops, 1, U32_MAX),
            ("iodepth".into(), self.iodepth as u64, 1, MAX_IODEPTH),
            ("iodepth_configured".into(), self.iodepth_configured as u64, 1, MAX_IODEPTH),
            ("thinktime_blocks".into(), self.thinktime_blocks, 1, U32_MAX),
            ("bw_avg_ms".into(), self.bw_avg_ms, 1, U32_MAX),
            ("iops_avg_ms".into(), self.iops_avg_ms, 1, U32_MAX),
            ("logs.avg_ms".into(), self.logs.avg_ms, 0, U32_MAX),
            ("logs.hist_ms".into(), self.logs.hist_ms, 0, U32_MAX),
            ("flow".into(), self.flow as u64, 0, 1000),
            ("rate_cycle_ms".into(), self.rate_cycle_ms, 0, U32_MAX),
            ("pi_chk".into(), self.pi_chk as u64, 0, 7),
        ];
        for d in Ddir::ALL {
            let n = ["read", "write", "trim"][d.index()];
            let bs = match d {
                Ddir::Read => &self.bs.read,
                Ddir::Write => &self.bs.write,
                Ddir::Trim => &self.bs.trim,
            };
            fields.push((format!("bs.{n}.min"), bs.min, 1, MAX_BS));
            fields.push((format!("bs.{n}.max"), bs.max, bs.min.max(1), MAX_BS));
            fields.push((format!("percentage_random.{n}"), self.percentage_random.get(d) as u64, 0, 100));
            fields.push((format!("rate_iops.{n}"), self.rate_iops.get(d), 0, U32_MAX));
            fields.push((format!("rate_iops_min.{n}"), self.rate_iops_min.get(d), 0, U32_MAX));
        }
        if let Some(ss) = &self.steadystate {
            fields.push(("steadystate.duration_s".into(), ss.duration_s, 1, U32_MAX));
        }
        for (name, v, lo, hi) in fields {
            if !(lo..=hi).contains(&v) {
                return Err(format!("{name} {v}: must be {lo}..={hi}"));
            }
        }
        let finite = [
            ("latency_percentile", self.latency_percentile, 100.0),
            ("steadystate.limit", self.steadystate.as_ref().map_or(0.0, |s| s.limit), f64::MAX),
        ];
        for (name, v, hi) in finite {
            if !(0.0..=hi).contains(&v) {
                return Err(format!("{name} {v}: must be 0..={hi} (a finite number)"));
            }
        }
        Ok(())
    }

    /// The I/Os after which `number_ios` ends this job (backend.c `exceeds_number_ios`):
    /// `number_ios × loops`, counted from the end of `ramp_time` (fio's `reset_all_stats`
    /// zeroes the count there). None without number_ios, and for a time-based job: fio
    /// 3.33's do_io loop goes on while `time_based`, and while a replayed trace has lines,
    /// so there number_ios ends nothing (the replay's callers check that). Measured with
    /// ioengine=null: `number_ios=10 loops=3` runs 30 I/Os, `number_ios=10 time_based
    /// runtime=1` runs the second, a 50-line trace with `number_ios=10` replays 50.
    ///
    /// `rw=trimwrite` (and randtrimwrite): fio's do_io doubles `number_ios` at the start of
    /// every loop, and loop k ends at `number_ios × 2^k × k` I/Os in all, so the job runs
    /// `number_ios × 2^loops × loops` (measured: number_ios=5 runs 5 trims and 5 writes, 20
    /// of each with loops=2, 60 with loops=3).
    pub fn number_ios_limit(&self) -> Option<u64> {
        let loops = self.loops.max(1);
        let per_loop = if self.rw.ends_with("trimwrite") {
            let doubled = u32::try_from(loops).ok().and_then(|l| 1u64.checked_shl(l)).unwrap_or(u64::MAX);
            self.number_ios.saturating_mul(doubled)
        } else {
            self.number_ios
        };
        (self.number_ios > 0 && !self.time_based).then(|| per_loop.saturating_mul(loops))
    }

    /// What ends this job ([`Budget`]): `records` I/Os when it replays a trace of that
    /// many, else its runtime when time_based, else io_size × loops bytes of its kind and
    /// [`JobSpec::number_ios_limit`]; a runtime ends any of them early (counted from the
    /// start, ramp included).
    pub fn budget(&self, records: Option<u64>) -> Budget {
        let ns = (self.runtime_ns > 0).then(|| self.ramp_time_ns.saturating_add(self.runtime_ns));
        // A replay ends with its trace: its records when known (0: a stream, unknown).
        if let Some(records) = records {
            return Budget { ios: (records > 0).then_some(records), ns, ..Budget::default() };
        }
        if self.time_based {
            return Budget { ns, ..Budget::default() };
        }
        Budget { bytes: Some(self.io_size_bytes.max(1).saturating_mul(self.loops.max(1))), ios: self.number_ios_limit(), ns }
    }
}

// --- steady state, ss ---
/// fio's steady-state criterion (options.c `str_steadystate_cb`, steadystate.c).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteadyStateSpec {
    /// `iops` or `bw`: which per-second measurement is judged.
    pub metric: SsMetric,
    /// `*_slope`: the least-squares slope of the window; else its largest deviation from the mean.
    pub slope: bool,
    /// The limit is a percentage of the window's mean rather than an absolute value.
    pub percent: bool,
    /// The threshold (IOPS, bytes/s, or percent).
    pub limit: f64,
    /// `ss_dur` in whole seconds (fio truncates), at least 1: samples in the window.
    pub duration_s: u64,
    /// `ss_ramp`: time after the job's start before samples are taken.
    pub ramp_ns: u64,
    /// group_reporting: the clones of the reporting group are judged on their sum.
    pub group_reporting: bool,
}

/// What fio's steady-state detection measures each second.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SsMetric {
    Iops,
    Bw,
}

// latency_target: fio's default latency_percentile (options.c: "100").
fn percent_100() -> f64 {
    100.0
}

fn rate_cycle_1000() -> u64 {
    1000
}

/// fio's `rate_process`: how the gaps between rate-limited I/Os are drawn.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateProcess {
    /// Evenly spaced (fio's default).
    #[default]
    Linear,
    /// Exponentially distributed gaps with the same mean.
    Poisson,
}

/// fio's `thinktime_blocks_type`: what `thinktime_blocks` counts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinktimeBlocksType {
    /// Completed I/Os (fio's default).
    #[default]
    Complete,
    /// Issued I/Os.
    Issue,
}

/// A job that cannot run as specified.
#[derive(Debug, thiserror::Error)]
#[error("job '{job}' (thread {thread}): {reason}")]
pub struct JobError {
    pub job: String,
    pub thread: u32,
    pub reason: String,
}

// --- scheduling ---
/// fio's `exit_what` (with `exitall`): which clones a clone terminates when it finishes
/// (libfio.c `fio_terminate_threads`, called at the end of backend.c `thread_main`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitWhat {
    /// No `exitall` in the run: a clone's end affects no other.
    #[default]
    None,
    /// Every clone of its reporting group (`group_id`), started or not.
    Group,
    /// Every clone running now, in any group; the next stonewall batch still runs.
    Stonewall,
    /// Every clone of the run, including later batches (they report no I/O).
    All,
}
