//! Workloads with fio semantics: the job contract (docs/fio.md §3) and the per-clone
//! generator of I/Os (direction, offset, size).
//!
//! Offsets are drawn from our own seeded generators (xoshiro256++ seeded with fio's seed
//! for each stream), so sequences are reproducible but not bit-identical to fio's
//! tausworthe streams; the distributions and mixing rules are fio's.

pub mod dist;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::rng::Rng;
use dist::{AxMap, Distribution};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ddir {
    Read,
    Write,
    Trim,
}

impl Ddir {
    pub const ALL: [Ddir; 3] = [Ddir::Read, Ddir::Write, Ddir::Trim];
    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerDir<T> {
    pub read: T,
    pub write: T,
    pub trim: T,
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
    pub replay: Option<crate::engine::iolog::ReplayTrace>,
    // --- issue 10: sched (docs/fio.md §3) ---
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
    // --- issue 10: ss (docs/fio.md §3) ---
    /// fio's steadystate/ss_dur/ss_ramp: end the clone (its group, with group_reporting)
    /// once the per-second IOPS or bandwidth settles; None without `ss_dur`.
    #[serde(default)]
    pub steadystate: Option<SteadyStateSpec>,
}

// --- issue 10: ss ---
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

/// One I/O to issue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Io {
    pub ddir: Ddir,
    pub offset: u64,
    pub len: u64,
}

/// Block-size choice for one direction.
struct BsGen {
    min: u64,
    max: u64,
    split: Option<Vec<(u64, f64)>>,
    unaligned: bool,
    rng: Rng,
}

impl BsGen {
    fn next(&mut self) -> u64 {
        if self.min == self.max {
            return self.min;
        }
        if let Some(split) = &self.split {
            let v = self.rng.unit() * 100.0;
            let mut acc = 0.0;
            for &(b, p) in split {
                acc += p;
                if v < acc {
                    return b;
                }
            }
            return split.last().map(|s| s.0).unwrap_or(self.min);
        }
        // bsrange: min + floor(max * U), down to a multiple of min, capped at max (fio).
        let mut b = self.min.saturating_add((self.max as f64 * self.rng.unit()) as u64);
        if !self.unaligned {
            b -= b % self.min;
        }
        b.min(self.max).max(self.min)
    }
}

/// Per-direction offset state.
struct DirGen {
    seq_next: u64,
    /// I/Os left before `rw_nr` asks for a new random offset.
    nr_left: u64,
    pct_random: u32,
    seq_rand: Rng,
}

/// Generates a clone's I/Os in fio's order.
pub struct Generator {
    pub spec: JobSpec,
    region_start: u64,
    region_len: u64,
    bs: Vec<BsGen>,
    dirs: Vec<DirGen>,
    offset_rng: Rng,
    rwmix_rng: Rng,
    dist: Distribution,
    map: Option<AxMap>,
    /// Block granularity of the random map / distribution (fio: min bs).
    block: u64,
    /// Random draws for the random map, made a few I/Os early so the map word can be
    /// prefetched (the draws do not depend on the map, so the sequence is unchanged).
    ahead: std::collections::VecDeque<u64>,
    rwmix_ddir: Ddir,
    rwmix_issues: u64,
    issues: [u64; 3],
    /// Bytes issued in the current pass (loop).
    pass_bytes: u64,
    pub passes_done: u64,
    trimwrite_pending: Option<Io>,
    /// `rw` is trimwrite or randtrimwrite (each trim followed by a write of its block).
    trimwrite: bool,
    /// Both reads and writes: the direction is drawn per fio's rwmix bursts.
    mixed: bool,
}

fn seed_of(spec: &JobSpec, name: &str) -> u64 {
    spec.seeds
        .get(name)
        .copied()
        .unwrap_or_else(|| crate::util::splitmix(spec.seed ^ name.bytes().fold(0u64, |a, b| a.wrapping_mul(31).wrapping_add(b as u64))))
}

impl Generator {
    pub fn new(spec: JobSpec, target_bytes: u64) -> Result<Generator, JobError> {
        let err = |reason: String| JobError { job: spec.name.clone(), thread: spec.thread_number, reason };
        if spec.version != 1 {
            return Err(err(format!("engine contract version {} (this engine reads 1)", spec.version)));
        }
        if spec.time_based && spec.runtime_ns == 0 {
            return Err(err("time_based needs a runtime".into()));
        }
        if spec.directions.is_empty() {
            return Err(err("no I/O direction".into()));
        }
        let region_start = spec.offset_bytes;
        let region_len = if spec.fill_device { target_bytes.saturating_sub(region_start) } else { spec.size_bytes };
        if region_start >= target_bytes || region_len == 0 {
            return Err(err(format!("the region [{region_start}, +{region_len}) is empty or beyond the target's {target_bytes} bytes")));
        }
        if region_len > target_bytes - region_start {
            return Err(err(format!(
                "the region [{region_start}, {}) ends beyond the target's {target_bytes} bytes",
                region_start as u128 + region_len as u128
            )));
        }
        let mut bs = Vec::new();
        for d in Ddir::ALL {
            let b = match d {
                Ddir::Read => &spec.bs.read,
                Ddir::Write => &spec.bs.write,
                Ddir::Trim => &spec.bs.trim,
            };
            if b.min == 0 || b.max < b.min {
                return Err(err(format!("block size range {}..{} is invalid", b.min, b.max)));
            }
            if b.min as u128 > region_len as u128 && spec.directions.contains(&d) {
                return Err(err(format!("block size {} exceeds the region of {region_len} bytes", b.min)));
            }
            let dname = format!("bs_{}", ["read", "write", "trim"][d.index()]);
            bs.push(BsGen {
                min: b.min,
                max: b.max,
                split: b.split.clone(),
                unaligned: spec.bs_unaligned,
                rng: Rng::new(seed_of(&spec, &dname)),
            });
        }
        let min_bs = spec.directions.iter().map(|&d| bs[d.index()].min).min().expect("directions not empty");
        let align = spec.directions.iter().map(|&d| spec.blockalign.get(d).max(1)).min().unwrap_or(min_bs);
        let block = align.min(min_bs).max(1);
        let nblocks = region_len / block;
        let dist = Distribution::new(&spec.random_distribution, nblocks, region_len, block).map_err(err)?;
        let use_map = spec.random && !spec.norandommap && dist.is_uniform();
        let dirs = Ddir::ALL
            .iter()
            .map(|&d| DirGen {
                seq_next: 0,
                nr_left: 0,
                pct_random: spec.percentage_random.get(d),
                seq_rand: Rng::new(seed_of(&spec, &format!("seq_rand_{}", ["read", "write", "trim"][d.index()]))),
            })
            .collect();
        let first = spec.directions[0];
        let rwmix_ddir = if spec.directions.contains(&Ddir::Read) && spec.directions.contains(&Ddir::Write) { Ddir::Read } else { first };
        Ok(Generator {
            offset_rng: Rng::new(spec.seed),
            rwmix_rng: Rng::new(seed_of(&spec, "rwmix")),
            map: use_map.then(|| AxMap::new(nblocks.max(1))),
            region_start,
            region_len,
            bs,
            dirs,
            dist,
            block,
            ahead: std::collections::VecDeque::new(),
            rwmix_ddir,
            rwmix_issues: 0,
            issues: [0; 3],
            pass_bytes: 0,
            passes_done: 0,
            trimwrite_pending: None,
            trimwrite: spec.rw.ends_with("trimwrite"),
            mixed: spec.directions.contains(&Ddir::Read) && spec.directions.contains(&Ddir::Write),
            spec,
        })
    }

    pub fn region(&self) -> (u64, u64) {
        (self.region_start, self.region_len)
    }

    /// fio's direction choice for mixed workloads (io_u.c `get_rw_ddir`): a direction holds
    /// for a burst, re-drawn when its issue count passes a threshold set at each switch.
    fn next_ddir(&mut self) -> Ddir {
        if !self.mixed {
            return self.spec.directions[0];
        }
        if self.issues[self.rwmix_ddir.index()] >= self.rwmix_issues {
            let v = 1 + self.rwmix_rng.below(100) as u32;
            let d = if v <= self.spec.rwmixread { Ddir::Read } else { Ddir::Write };
            if d != self.rwmix_ddir {
                let other = if self.rwmix_ddir == Ddir::Read { self.spec.rwmixwrite } else { self.spec.rwmixread };
                self.rwmix_issues = self.issues[self.rwmix_ddir.index()] * other as u64 / 100;
            }
            self.rwmix_ddir = d;
        }
        self.rwmix_ddir
    }

    /// The next I/O, or None when the current pass is complete (the caller decides whether
    /// another pass runs).
    pub fn next_io(&mut self) -> Option<Io> {
        if let Some(io) = self.trimwrite_pending.take() {
            return Some(io);
        }
        let trimwrite = self.trimwrite;
        let ddir = if trimwrite { Ddir::Trim } else { self.next_ddir() };
        let len = self.bs[ddir.index()].next();
        let random = self.spec.random && {
            let g = &mut self.dirs[ddir.index()];
            g.pct_random >= 100 || (g.pct_random > 0 && (g.seq_rand.below(100) as u32) < g.pct_random)
        };
        let offset = if random { self.random_offset(ddir, len)? } else { self.seq_offset(ddir, len)? };
        self.issues[ddir.index()] += 1;
        self.pass_bytes += len;
        let io = Io { ddir, offset: self.region_start + offset, len };
        if trimwrite {
            self.trimwrite_pending = Some(Io { ddir: Ddir::Write, ..io });
        }
        Some(io)
    }

    /// The write that follows a trimwrite's trim, if it has not been issued yet.
    pub fn take_trimwrite_write(&mut self) -> Option<Io> {
        self.trimwrite_pending.take()
    }

    fn seq_offset(&mut self, ddir: Ddir, len: u64) -> Option<u64> {
        let g = &mut self.dirs[ddir.index()];
        if g.seq_next.saturating_add(len) > self.region_len {
            return None;
        }
        let off = g.seq_next;
        g.seq_next = g.seq_next.saturating_add(len).saturating_add(self.spec.rw_seq_add_bytes);
        Some(off)
    }

    fn random_offset(&mut self, ddir: Ddir, len: u64) -> Option<u64> {
        // rw=randread:N keeps going sequentially for N-1 I/Os after each random pick.
        let g = &mut self.dirs[ddir.index()];
        if g.nr_left > 0 && g.seq_next + len <= self.region_len {
            g.nr_left -= 1;
            let off = g.seq_next;
            g.seq_next += len;
            return Some(off);
        }
        let align = self.spec.blockalign.get(ddir).max(1);
        let last = (self.region_len.saturating_sub(len)) / align; // highest aligned start
        let off = if let Some(map) = &mut self.map {
            // Each block once per pass (fio's random map; collisions take the next free).
            const AHEAD: usize = 8;
            while self.ahead.len() <= AHEAD {
                let b = self.offset_rng.below(map.len());
                map.prefetch(b);
                self.ahead.push_back(b);
            }
            let b = self.ahead.pop_front().expect("filled above");
            let b = map.take_near(b)?;
            (b * self.block).min(last * align) / align * align
        } else {
            let b = self.dist.sample(&mut self.offset_rng, last + 1);
            b * align
        };
        let g = &mut self.dirs[ddir.index()];
        g.nr_left = self.spec.rw_nr.saturating_sub(1);
        g.seq_next = off + len;
        Some(off)
    }

    /// Go back to the start of the region within the same pass (io_size larger than the
    /// region, or a random map that ran out).
    pub fn wrap(&mut self) {
        for g in &mut self.dirs {
            g.seq_next = 0;
            g.nr_left = 0;
        }
        if let Some(m) = &mut self.map {
            m.clear();
        }
    }

    /// Start another pass over the region (loops, time_based).
    pub fn new_pass(&mut self) {
        self.wrap();
        self.pass_bytes = 0;
        self.passes_done += 1;
    }

    /// Bytes a pass moves (io_size per loop).
    pub fn pass_limit(&self) -> u64 {
        if self.spec.fill_device {
            self.region_len
        } else {
            self.spec.io_size_bytes.max(1)
        }
    }

    pub fn pass_bytes(&self) -> u64 {
        self.pass_bytes
    }
}

// --- issue 10: sched ---
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
