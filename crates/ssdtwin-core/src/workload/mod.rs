//! Workloads with fio semantics: the job contract (spec.rs, docs/fio.md §3) and the
//! per-clone generator of I/Os (direction, offset, size).
//!
//! The generator reproduces fio 3.33's I/O sequence bit for bit (docs/fio.md §3): fio's
//! generators on fio's seeds (fiorand.rs), its random map and distributions (dist.rs) and
//! io_u.c's `fill_io_u` with backend.c's pass logic below. Verified against the real
//! binary (tests/data/fio_goldens.json from tests/fio/gen_goldens.py; the conformance test
//! tests/fio/test_fio_conformance.py).

pub mod dist;
pub mod fiorand;
pub mod spec;
pub mod trace;

use dist::{zone_index, AxMap, GaussState, ZipfState, ZoneIndex};
use fiorand::{jhash, FioRand, Lfsr};
use serde::{Deserialize, Serialize};

pub use spec::{
    BsSpec, ExitWhat, JobError, JobSpec, LogSpec, PerDir, RandomDistribution, RateProcess, SsMetric, SteadyStateSpec, ThinktimeBlocksType,
    Zone,
};

/// An I/O's direction (fio's `ddir`); the job contract (spec.rs) and the trace readers
/// (trace/) both name it, so it lives here, above both.
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

/// One I/O to issue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Io {
    pub ddir: Ddir,
    pub offset: u64,
    pub len: u64,
}

/// "No more blocks" (fio's `-1ULL` / `last_start` before any I/O).
const NONE: u64 = u64::MAX;

/// Where random offsets come from (fio's `random_generator` and `random_distribution`).
enum OffsetSource {
    /// Uniform over the file's blocks, from `random_state` (tausworthe / tausworthe64).
    Uniform,
    /// Uniform, from the file's LFSR (`random_generator=lfsr`).
    Lfsr(Lfsr),
    Zipf(ZipfState),
    Pareto(ZipfState),
    Gauss(GaussState),
    /// zoned / zoned_abs: per-direction percentile index (None: that direction has no
    /// zones and draws uniformly).
    Zoned {
        abs: bool,
        index: [Option<Vec<ZoneIndex>>; 3],
    },
}

fn seed_of(spec: &JobSpec, name: &str) -> u64 {
    spec.seeds
        .get(name)
        .copied()
        .unwrap_or_else(|| crate::util::splitmix(spec.seed ^ name.bytes().fold(0u64, |a, b| a.wrapping_mul(31).wrapping_add(b as u64))))
}

/// The streams fio re-seeds at every pass with randrepeat (init.c
/// `td_fill_rand_seeds_internal`).
struct Streams {
    random: FioRand,
    bsrange: [FioRand; 3],
    rwmix: FioRand,
    seq_rand: [FioRand; 3],
    zone: FioRand,
}

impl Streams {
    fn new(spec: &JobSpec, use64: bool, trimwrite: bool) -> Streams {
        let write_seed = seed_of(spec, "bs_write");
        let trim_seed = if trimwrite { write_seed } else { seed_of(spec, "bs_trim") };
        // fio seeds all three directions' percentage_random streams alike.
        let seq = seed_of(spec, "seq_rand_read");
        Streams {
            random: FioRand::new(spec.seed, use64),
            bsrange: [FioRand::new(seed_of(spec, "bs_read"), use64), FioRand::new(write_seed, use64), FioRand::new(trim_seed, use64)],
            rwmix: FioRand::new(seed_of(spec, "rwmix"), false),
            seq_rand: [FioRand::new(seq, false), FioRand::new(seq, false), FioRand::new(seq, false)],
            zone: FioRand::new(seed_of(spec, "zone"), false),
        }
    }
}

/// Generates a clone's I/Os exactly as fio 3.33 does for one file (io_u.c `fill_io_u`
/// and the pass logic of backend.c `do_io` / `keep_running`).
pub struct Generator {
    pub spec: JobSpec,
    use64: bool,
    streams: Streams,
    offsets: OffsetSource,
    map: Option<AxMap>,
    /// The offset stream's next `PREFETCH_AHEAD` draws, taken ahead of their use: the
    /// block of each is the one the map will be asked about that many random I/Os later,
    /// so its word is prefetched when it is drawn (a hint only; the draws are used in
    /// the stream's order, so the sequence does not depend on it).
    ahead: Option<DrawsAhead>,
    /// io_u.c `last_block` per direction (constant for the job).
    lastb: [u64; 3],
    /// log2 of each direction's min bs when a power of two (the map's block arithmetic).
    min_bs_shift: [Option<u32>; 3],
    // The file (fio's struct fio_file), absolute byte offsets.
    start_offset: u64,
    file_offset: u64,
    io_size: u64,
    real_size: u64,
    last_pos: [u64; 3],
    last_start: [u64; 3],
    // Options as fio holds them.
    min_bs: [u64; 3],
    max_bs: [u64; 3],
    ba: [u64; 3],
    split: [Vec<(u64, u32)>; 3],
    seq_add: i64,
    seq_nr_opt: u64,
    seq_nr: u64,
    perc_rand: [u32; 3],
    rwmix: [u32; 2],
    has: [bool; 3],
    random: bool,
    randtrimwrite: bool,
    trimwrite: bool,
    randrepeat: bool,
    io_size_set: bool,
    // Counters.
    io_issues: [u64; 3],
    issue_bytes: [u64; 3],
    rwmix_issues: u64,
    rwmix_ddir: Ddir,
    zone_bytes: u64,
    /// Bytes issued in the current pass (do_io's `bytes_issued`).
    pass_bytes: u64,
    pass_limit: u64,
    in_pass: bool,
    file_done: bool,
    done: bool,
    loops_left: u64,
    pub passes_done: u64,
    /// The job is a plain uniform random one ([`Generator::fill_uniform`] applies).
    uniform: bool,
    /// The same with fio's random map ([`Generator::fill_uniform_map`] applies).
    uniform_map: bool,
    /// The job's one direction, when it has one and no trimwrite rule (`next_ddir` needs
    /// no look at the mix then).
    one_ddir: Option<Ddir>,
    /// [`Generator::fill_plain_map`] applies (a time-based `uniform_map` job in one
    /// direction, one map block per I/O).
    plain_map: Option<PlainMap>,
}

/// What [`Generator::fill_plain_map`] needs of a job, fixed for its whole run: the one
/// direction, log2 of its block size (a power of two, also its alignment and the map's
/// block), and how many blocks pass `fixed_block_at` (the block's offset from the file's
/// start, `file_offset`, is below `io_size` and the block ends within `real_size`; both
/// and `file_offset` are the job's constants).
#[derive(Clone, Copy, Debug)]
struct PlainMap {
    ddir: Ddir,
    shift: u32,
    blocks: u64,
}

impl Generator {
    pub fn new(spec: JobSpec, target_bytes: u64) -> Result<Generator, JobError> {
        let err = |reason: String| JobError { job: spec.name.clone(), thread: spec.thread_number, reason };
        if spec.version != 1 {
            return Err(err(format!("engine contract version {} (this engine reads 1)", spec.version)));
        }
        spec.check_ranges().map_err(err)?;
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
        let mut min_bs = [0u64; 3];
        let mut max_bs = [0u64; 3];
        let mut split: [Vec<(u64, u32)>; 3] = Default::default();
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
            let i = d.index();
            min_bs[i] = b.min;
            max_bs[i] = b.max;
            split[i] = match &spec.bssplit_fio {
                Some(p) => match d {
                    Ddir::Read => p.read.clone(),
                    Ddir::Write => p.write.clone(),
                    Ddir::Trim => p.trim.clone(),
                },
                // Older inputs: the effective split, whole percentages, fio's order.
                None => {
                    let mut v: Vec<(u64, u32)> = b.split.iter().flatten().map(|&(bs, p)| (bs, p.round() as u32)).collect();
                    v.sort_by_key(|e| e.1);
                    v
                }
            };
        }
        let ba = [0, 1, 2].map(|i| {
            let a = spec.blockalign.get(Ddir::ALL[i]);
            if a == 0 {
                min_bs[i]
            } else {
                a
            }
        });
        let strided = spec.zone_size_bytes > 0;
        if strided && spec.zone_range_bytes == 0 {
            return Err(err("zonemode=strided needs a zone range".into()));
        }
        let has = Ddir::ALL.map(|d| spec.directions.contains(&d));
        let trimwrite = spec.rw.ends_with("trimwrite");
        let randtrimwrite = trimwrite && spec.random;
        let use64 = spec.random_generator == "tausworthe64";
        let randrepeat = spec.randrepeat.unwrap_or(spec.seed_source == "randrepeat");
        let streams = Streams::new(&spec, use64, trimwrite);

        // filesetup.c init_random_map / __init_rand_distribution.
        let fsize = if strided { spec.zone_range_bytes } else { region_len.min(target_bytes) };
        let rw_min_bs = *min_bs.iter().min().expect("three directions");
        let blocks = fsize / rw_min_bs;
        let dist = &spec.random_distribution;
        let center = dist.center.unwrap_or(-1.0);
        let range_size = min_bs[0].min(min_bs[1]);
        let nranges = fsize.div_ceil(range_size).max(1);
        let dist_seed = if randrepeat {
            let name = spec.filename.clone().unwrap_or_else(|| format!("{}.{}.0", spec.name, spec.subjob));
            jhash(name.as_bytes(), 0).wrapping_mul(spec.thread_number)
        } else {
            spec.seed as u32
        };
        let mut map = None;
        let offsets = match dist.kind.as_str() {
            "zipf" => {
                let t = dist.param.unwrap_or(1.1);
                if t.is_nan() || t <= 0.0 || t == 1.0 {
                    return Err(err(format!("zipf theta {t}: must be positive and not 1")));
                }
                OffsetSource::Zipf(ZipfState::zipf(nranges, t, center, dist_seed))
            }
            "pareto" => {
                let h = dist.param.unwrap_or(0.2);
                if !(h > 0.0 && h < 1.0) {
                    return Err(err(format!("pareto h {h}: must be in (0, 1)")));
                }
                OffsetSource::Pareto(ZipfState::pareto(nranges, h, center, dist_seed))
            }
            "normal" => {
                let s = dist.param.unwrap_or(0.0);
                if !(0.0..100.0).contains(&s) {
                    return Err(err(format!("normal sigma {s}%: must be in [0, 100)")));
                }
                OffsetSource::Gauss(GaussState::new(nranges, s, center, dist_seed))
            }
            "random" | "zoned" | "zoned_abs" => {
                if spec.random && spec.random_generator == "lfsr" {
                    let l = Lfsr::new(blocks, spec.seed, 0)
                        .ok_or_else(|| err(format!("fio cannot build an LFSR over {blocks} blocks with this seed")))?;
                    OffsetSource::Lfsr(l)
                } else {
                    if spec.random && !spec.norandommap && dist.kind == "random" {
                        map = Some(AxMap::new(blocks));
                    }
                    if dist.kind == "random" {
                        OffsetSource::Uniform
                    } else {
                        let abs = dist.kind == "zoned_abs";
                        let mut index: [Option<Vec<ZoneIndex>>; 3] = Default::default();
                        for (i, name) in ["read", "write", "trim"].iter().enumerate() {
                            let zones = dist.zones.as_ref().and_then(|z| z.get(*name).cloned().flatten());
                            index[i] = zones.map(|zs| {
                                let z: Vec<(u32, u32, u64)> = zs
                                    .iter()
                                    .map(|z| (z.access_pct as u32, z.range_pct.unwrap_or(0.0) as u32, z.range_bytes.unwrap_or(0)))
                                    .collect();
                                zone_index(&z)
                            });
                        }
                        OffsetSource::Zoned { abs, index }
                    }
                }
            }
            other => return Err(err(format!("random_distribution '{other}' is not supported"))),
        };
        let seq_add = spec.rw_seq_add_signed.unwrap_or(spec.rw_seq_add_bytes.min(i64::MAX as u64) as i64);
        let io_size_set = spec.io_size_set.unwrap_or(spec.io_size_bytes != spec.size_bytes);
        let mut g = Generator {
            use64,
            streams,
            offsets,
            map,
            ahead: None,
            lastb: [0; 3],
            min_bs_shift: min_bs.map(|b| b.is_power_of_two().then(|| b.trailing_zeros())),
            start_offset: region_start,
            file_offset: region_start,
            io_size: region_len,
            real_size: target_bytes,
            last_pos: [region_start; 3],
            last_start: [NONE; 3],
            min_bs,
            max_bs,
            ba,
            split,
            seq_add,
            seq_nr_opt: spec.rw_nr.max(1),
            seq_nr: 1,
            perc_rand: Ddir::ALL.map(|d| spec.percentage_random.get(d)),
            rwmix: [spec.rwmixread, spec.rwmixwrite],
            has,
            random: spec.random,
            randtrimwrite,
            trimwrite,
            randrepeat,
            io_size_set,
            io_issues: [0; 3],
            issue_bytes: [0; 3],
            rwmix_issues: 0,
            rwmix_ddir: Ddir::Read,
            zone_bytes: 0,
            pass_bytes: 0,
            pass_limit: 0,
            in_pass: false,
            file_done: false,
            done: false,
            loops_left: spec.loops.max(1),
            passes_done: 0,
            uniform: false,
            uniform_map: false,
            one_ddir: None,
            plain_map: None,
            spec,
        };
        // do_io's per-pass byte budget (backend.c): `size`, or io_size for random writes
        // without a map, plus the writes of a trimwrite.
        let mut limit = region_len;
        if g.has[1] && g.random && g.spec.norandommap {
            limit = limit.max(g.spec.io_size_bytes);
        }
        if g.trimwrite {
            limit += region_len;
        }
        g.pass_limit = limit;
        g.lastb = [0, 1, 2].map(|d| g.last_block(d));
        g.reset_ahead();
        let plain = g.random
            && matches!(g.offsets, OffsetSource::Uniform)
            && g.seq_nr_opt == 1
            && g.spec.zone_size_bytes == 0
            && !g.randtrimwrite
            && !g.trimwrite
            && (0..3).all(|d| g.perc_rand[d] >= 100 && g.min_bs[d] == g.max_bs[d] && g.lastb[d] > 0);
        g.uniform = plain && g.map.is_none();
        g.uniform_map = plain && g.map.is_some();
        g.one_ddir = match g.has {
            _ if g.trimwrite => None,
            [true, false, _] => Some(Ddir::Read),
            [false, true, _] => Some(Ddir::Write),
            [false, false, _] => Some(Ddir::Trim),
            [true, true, _] => None,
        };
        g.plain_map = g.plain_map_of();
        Ok(g)
    }

    /// The [`PlainMap`] of a job `fill_plain_map` applies to (see there), or None.
    fn plain_map_of(&self) -> Option<PlainMap> {
        let ddir = self.one_ddir?;
        let d = ddir.index();
        let bs = self.min_bs[d];
        let shift = self.min_bs_shift[d]?; // a power of two
        if !(self.uniform_map && self.spec.time_based && self.ba[d] == bs) {
            return None;
        }
        // fixed_block_at: rel < io_size, rel + file_offset < real_size and rel + file_offset
        // + bs <= real_size (the last implies the second, bs > 0), rel = block << shift.
        let fits = self.real_size.checked_sub(self.file_offset).and_then(|r| r.checked_sub(bs)).map_or(0, |r| r + 1);
        let rel_limit = self.io_size.min(fits);
        Some(PlainMap { ddir, shift, blocks: rel_limit.div_ceil(bs) })
    }

    pub fn region(&self) -> (u64, u64) {
        (self.start_offset, self.io_size)
    }

    /// backend.c `io_bytes_exceeded` on the issued bytes: the bytes of the job's kind
    /// against io_size (or size) times loops.
    fn issue_bytes_exceeded(&self) -> bool {
        let b = &self.issue_bytes;
        let bytes = if self.has[0] && self.has[1] {
            b[0] + b[1]
        } else if self.has[1] {
            b[1]
        } else if self.has[0] {
            b[0]
        } else {
            b[2]
        };
        bytes >= self.spec.io_size_bytes.max(1).saturating_mul(self.spec.loops.max(1))
    }

    /// backend.c `keep_running`: whether another pass starts.
    fn keep_running(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.spec.time_based {
            return true;
        }
        if self.loops_left > 0 {
            self.loops_left -= 1;
            return true;
        }
        let limit = self.spec.io_size_bytes.max(1);
        let io_bytes: u64 = self.issue_bytes.iter().sum();
        if io_bytes < limit {
            let max_bs = self.has.iter().zip(self.max_bs).filter(|(h, _)| **h).map(|(_, m)| m).max().unwrap_or(0);
            if limit - io_bytes < max_bs {
                return false;
            }
            if self.file_done && !self.io_size_set {
                return false;
            }
            return true;
        }
        false
    }

    /// libfio.c `clear_io_state` + the file's re-open (filesetup.c `fio_file_reset`).
    fn start_pass(&mut self) {
        if self.passes_done > 0 || self.in_pass {
            self.zone_bytes = 0;
            self.rwmix_issues = 0;
            self.file_offset = self.start_offset;
            if self.randrepeat {
                self.streams = Streams::new(&self.spec, self.use64, self.trimwrite);
                self.reset_ahead();
            }
        }
        self.file_reset();
        self.file_done = false;
        self.pass_bytes = 0;
        self.in_pass = true;
    }

    /// filesetup.c `fio_file_reset`.
    fn file_reset(&mut self) {
        self.last_pos = [self.file_offset; 3];
        self.last_start = [NONE; 3];
        if let Some(m) = &mut self.map {
            m.clear();
        }
        if let OffsetSource::Lfsr(l) = &mut self.offsets {
            l.reset(self.spec.seed);
        }
    }

    fn end_pass(&mut self) {
        if self.pass_bytes == 0 {
            // backend.c: a pass that moved nothing ends the job.
            self.done = true;
        }
        self.in_pass = false;
        self.passes_done += 1;
    }

    /// The next I/O in fio's order, or None when the job has issued everything.
    ///
    /// A time-based uniform random job with fio's map in the middle of a pass (the common
    /// case) takes `fill_uniform_map` here, inlined into the caller; the first turn of
    /// [`Generator::next_io_passes`]'s loop takes the same steps (no pass to start, no
    /// pass budget on a time-based job).
    #[inline]
    pub fn next_io(&mut self) -> Option<Io> {
        // A plain map (`plain_map`) is a time-based uniform map job's special case.
        if self.in_pass && self.uniform_map && self.spec.time_based {
            let io = match self.plain_map {
                Some(p) => self.fill_plain_map(p),
                None => self.fill_uniform_map(),
            };
            match io {
                Some(io) => return Some(self.count_issued(io)),
                None => {
                    self.file_done = true;
                    self.end_pass();
                }
            }
        }
        self.next_io_passes()
    }

    /// What an I/O leaving `next_io` counts.
    #[inline(always)]
    fn count_issued(&mut self, io: Io) -> Io {
        let d = io.ddir.index();
        self.io_issues[d] += 1;
        self.issue_bytes[d] += io.len;
        self.pass_bytes += io.len;
        io
    }

    /// [`Generator::next_io`] with the passes: starting one, its budget, the end of the file.
    #[inline(never)]
    fn next_io_passes(&mut self) -> Option<Io> {
        loop {
            if !self.in_pass {
                if !self.keep_running() {
                    return None;
                }
                self.start_pass();
            }
            let time_based = self.spec.time_based;
            if !time_based && (self.issue_bytes_exceeded() || self.pass_bytes >= self.pass_limit) {
                self.end_pass();
                continue;
            }
            let io = if self.uniform {
                self.fill_uniform()
            } else if self.uniform_map {
                self.fill_uniform_map()
            } else {
                self.fill()
            };
            match io {
                Some(io) => return Some(self.count_issued(io)),
                None => {
                    self.file_done = true;
                    self.end_pass();
                }
            }
        }
    }

    /// io_u.c `get_rw_ddir` (without rate limits) and `set_rw_ddir`'s trimwrite rule.
    #[inline]
    fn next_ddir(&mut self) -> Ddir {
        if let Some(d) = self.one_ddir {
            self.rwmix_ddir = d;
            return d;
        }
        let ddir = if self.has[0] && self.has[1] {
            if self.io_issues[self.rwmix_ddir.index()] >= self.rwmix_issues {
                let v = self.streams.rwmix.between(1, 100);
                let d = if v <= self.rwmix[0] as u64 { Ddir::Read } else { Ddir::Write };
                if d != self.rwmix_ddir {
                    let other = self.rwmix[self.rwmix_ddir.index() ^ 1] as u64;
                    self.rwmix_issues = self.io_issues[self.rwmix_ddir.index()] * other / 100;
                }
                self.rwmix_ddir = d;
            }
            self.rwmix_ddir
        } else if self.has[0] {
            Ddir::Read
        } else if self.has[1] {
            Ddir::Write
        } else {
            Ddir::Trim
        };
        self.rwmix_ddir = ddir;
        if self.trimwrite {
            return if self.last_start[1] == self.last_start[2] { Ddir::Trim } else { Ddir::Write };
        }
        ddir
    }

    /// io_u.c `fill_io_u`: one I/O, or None when the file is done for this pass.
    fn fill(&mut self) -> Option<Io> {
        let ddir = self.next_ddir();
        let d = ddir.index();
        if self.spec.zone_size_bytes > 0 {
            self.strided_zone(d);
        }
        let (offset, is_random_busy_ok) = self.next_offset(ddir)?;
        let mut buflen = self.next_buflen(d, offset);
        if buflen == 0 || offset + buflen > self.real_size {
            return None;
        }
        if self.random && !is_random_busy_ok {
            if let Some(map) = &mut self.map {
                buflen = mark_random_map(map, self.min_bs[d], self.min_bs_shift[d], offset - self.file_offset, buflen);
                if buflen == 0 {
                    // fio asserts here; a job that gets here has nothing left to do.
                    return None;
                }
            }
        }
        self.issue(ddir, offset, buflen)
    }

    /// [`Generator::fill`] for a plain uniform random job (no random map, every block size
    /// fixed, every direction 100 % random, no zones, `rw` without `:N` or trims that
    /// follow writes): the same draws and the same checks in the same order, without the
    /// branches for the options such a job does not use. The PTS jobs are all of this kind.
    #[inline]
    fn fill_uniform(&mut self) -> Option<Io> {
        let ddir = self.next_ddir();
        let d = ddir.index();
        // next_offset: rw_nr=1 leaves seq_nr at 1, every I/O is a "hit"; next_block: 100 %
        // random, so rand_block; rand_offset: uniform with lastb > 0; uniform_block: one
        // draw, no map to consult.
        let r = self.streams.random.draw();
        let rel = self.streams.random.scale(self.lastb[d], r) * self.ba[d];
        let (offset, buflen) = self.fixed_block_at(d, rel)?;
        self.issue(ddir, offset, buflen)
    }

    /// [`Generator::fill`] for the jobs [`Generator::fill_uniform`] is for, with fio's random
    /// map (fio's default, `norandommap=0`): the same steps in `fill`'s order plus the map's.
    /// A taken block moves to the next free one, a full map starts over on a time-based job
    /// (`rand_block`), and the I/O marks its blocks, shrinking to the free ones it starts on
    /// (`mark_random_map`).
    #[inline]
    fn fill_uniform_map(&mut self) -> Option<Io> {
        let ddir = self.next_ddir();
        let d = ddir.index();
        let lastb = self.lastb[d];
        let b = match self.uniform_block(lastb) {
            Some(b) => b,
            None if self.spec.time_based => {
                self.file_reset();
                self.uniform_block(lastb)?
            }
            None => return None,
        };
        let (offset, min_bs) = self.fixed_block_at(d, b * self.ba[d])?;
        let map = self.map.as_mut().expect("a job with a random map");
        let buflen = mark_random_map(map, min_bs, self.min_bs_shift[d], offset - self.file_offset, min_bs);
        if buflen == 0 {
            return None;
        }
        self.issue(ddir, offset, buflen)
    }

    /// [`Generator::fill_uniform_map`] for a time-based job in one direction whose block
    /// size is a power of two and its alignment ([`PlainMap`]): the same draws, map look-ups
    /// and marks, without the look at the direction, `fixed_block_at`'s four checks (one
    /// limit on the block instead: the file's offset and sizes are the job's constants) and
    /// `mark_random_map`'s arithmetic (the block is the map's, one per I/O).
    #[inline(always)]
    fn fill_plain_map(&mut self, p: PlainMap) -> Option<Io> {
        let d = p.ddir.index();
        let lastb = self.lastb[d];
        let b = match self.uniform_block(lastb) {
            Some(b) => b,
            None => {
                self.file_reset();
                self.uniform_block(lastb)?
            }
        };
        if b >= p.blocks {
            return None;
        }
        let map = self.map.as_mut().expect("a job with a random map");
        if map.set_one(b) == 0 {
            return None;
        }
        self.issue(p.ddir, (b << p.shift) + self.file_offset, 1 << p.shift)
    }

    /// The fast paths' checks of `fill` (next_offset's and the size check): the offset of
    /// `rel` and direction `d`'s one block size, or None where `fill` would end the pass (past
    /// io_size, past the file, or a block that does not fit in it).
    #[inline]
    fn fixed_block_at(&self, d: usize, rel: u64) -> Option<(u64, u64)> {
        if rel >= self.io_size {
            return None;
        }
        let offset = rel.wrapping_add(self.file_offset);
        if offset >= self.real_size {
            return None;
        }
        let bs = self.min_bs[d];
        if bs == 0 || offset + bs > self.real_size {
            return None;
        }
        Some((offset, bs))
    }

    /// An I/O leaves `fill`: its zone bytes and its direction's last start and end recorded.
    #[inline]
    fn issue(&mut self, ddir: Ddir, offset: u64, len: u64) -> Option<Io> {
        let d = ddir.index();
        self.zone_bytes += len;
        self.last_start[d] = offset;
        self.last_pos[d] = offset + len;
        Some(Io { ddir, offset, len })
    }

    /// io_u.c `setup_strided_zone_mode`.
    fn strided_zone(&mut self, d: usize) {
        let (size, range, skip) = (self.spec.zone_size_bytes, self.spec.zone_range_bytes, self.spec.zone_skip_bytes);
        if self.zone_bytes >= size {
            self.zone_bytes = 0;
            self.file_offset += range + skip;
            if self.file_offset >= self.real_size {
                self.file_offset = self.start_offset;
            }
            self.last_pos[d] = self.file_offset;
        }
        if self.last_pos[d] >= self.file_offset + range {
            self.last_pos[d] = self.file_offset;
        }
        if self.zone_bytes % range == 0 {
            self.file_reset();
        }
    }

    /// io_u.c `get_next_offset`: the absolute offset and whether the random map must not
    /// be marked (fio's IO_U_F_BUSY_OK).
    fn next_offset(&mut self, ddir: Ddir) -> Option<(u64, bool)> {
        let mut hit = false;
        if self.seq_nr_opt > 0 {
            self.seq_nr -= 1;
            if self.seq_nr == 0 {
                hit = true;
                self.seq_nr = self.seq_nr_opt;
            }
        }
        let (rel, busy_ok) = self.next_block(ddir, hit)?;
        if rel >= self.io_size {
            return None;
        }
        let offset = rel.wrapping_add(self.file_offset);
        if offset >= self.real_size {
            return None;
        }
        if self.randtrimwrite && ddir == Ddir::Trim && self.last_start[2] == offset {
            self.last_start[1] = self.last_start[1].wrapping_sub(1);
        }
        Some((offset, busy_ok))
    }

    /// io_u.c `get_next_block`: the offset relative to the file offset.
    fn next_block(&mut self, ddir: Ddir, hit: bool) -> Option<(u64, bool)> {
        let d = ddir.index();
        if self.randtrimwrite && ddir == Ddir::Write {
            return Some((self.last_start[2], true));
        }
        if hit {
            if self.random {
                let random = self.perc_rand[d] >= 100 || self.streams.seq_rand[d].between(1, 100) <= self.perc_rand[d] as u64;
                if random {
                    return Some((self.rand_block(ddir)? * self.ba[d], false));
                }
                return match self.seq_offset(d) {
                    Some(o) => Some((o, true)),
                    None => Some((self.rand_block(ddir)? * self.ba[d], true)),
                };
            }
            return Some((self.seq_offset(d)?, false));
        }
        match self.seq_offset(d) {
            Some(o) => Some((o, true)),
            None => Some((self.rand_block(ddir)? * self.ba[d], true)),
        }
    }

    /// io_u.c `get_next_seq_offset`.
    fn seq_offset(&mut self, d: usize) -> Option<u64> {
        let add = self.seq_add;
        if self.last_pos[d] >= self.io_size + self.start_offset && self.spec.time_based {
            self.last_pos[d] = self.file_offset;
        }
        if self.last_pos[d] >= self.real_size {
            return None;
        }
        let end = self.io_size.min(self.real_size);
        if self.last_pos[d] == self.file_offset && self.file_offset != 0 && add < 0 {
            self.last_pos[d] = end;
        }
        let mut pos = self.last_pos[d].wrapping_sub(self.file_offset);
        if pos != 0 && add != 0 {
            pos = pos.wrapping_add(add as u64);
            if pos >= self.real_size {
                pos = if add > 0 { self.file_offset } else { end.wrapping_add(add as u64) };
            }
        }
        Some(pos)
    }

    /// Take the offset stream's next `PREFETCH_AHEAD` draws ahead (only for maps too large
    /// for the cache), prefetching their words.
    fn reset_ahead(&mut self) {
        self.ahead = None;
        #[cfg(test)]
        if tests::NO_DRAWS_AHEAD.get() {
            return;
        }
        let Some(map) = self.map.as_ref().filter(|m| m.len() > PREFETCH_MAP_BLOCKS) else { return };
        let lastb = self.lastb.iter().copied().max().unwrap_or(0);
        let mut a = DrawsAhead { draws: [(0, 0, 0); PREFETCH_AHEAD], next: 0 };
        for d in &mut a.draws {
            let r = self.streams.random.draw();
            let b = self.streams.random.scale(lastb, r);
            map.prefetch(b);
            *d = (r, lastb, b);
        }
        self.ahead = Some(a);
    }

    /// io_u.c `last_block`.
    fn last_block(&self, d: usize) -> u64 {
        let mut max_size = self.io_size.min(self.real_size);
        if self.spec.zone_size_bytes > 0 {
            max_size = self.spec.zone_range_bytes;
        }
        if self.min_bs[d] > self.ba[d] {
            max_size = max_size.saturating_sub(self.min_bs[d] - self.ba[d]);
        }
        max_size / self.ba[d]
    }

    /// io_u.c `get_next_rand_block`: with time_based an exhausted file starts over.
    fn rand_block(&mut self, ddir: Ddir) -> Option<u64> {
        if let Some(b) = self.rand_offset(ddir) {
            return Some(b);
        }
        if self.spec.time_based {
            self.file_reset();
            return self.rand_offset(ddir);
        }
        None
    }

    /// io_u.c `get_next_rand_offset` and the per-distribution helpers.
    fn rand_offset(&mut self, ddir: Ddir) -> Option<u64> {
        let d = ddir.index();
        match &mut self.offsets {
            OffsetSource::Zipf(z) => return Some(z.zipf_next()),
            OffsetSource::Pareto(z) => return Some(z.pareto_next()),
            OffsetSource::Gauss(g) => return Some(g.next_block()),
            _ => {}
        }
        let lastb = self.lastb[d];
        if lastb == 0 {
            return None;
        }
        let abs = match &self.offsets {
            OffsetSource::Zoned { abs, index } if index[d].is_some() => *abs,
            _ => return self.uniform_block(lastb),
        };
        let v = self.streams.zone.between(1, 100);
        let z = match &self.offsets {
            OffsetSource::Zoned { index, .. } => index[d].as_ref().map(|zi| zi[(v - 1) as usize]).unwrap_or_default(),
            _ => ZoneIndex::default(),
        };
        if abs {
            let (stotal, send) = (z.size_prev / self.ba[d], z.size / self.ba[d]);
            if send > lastb {
                // fio: "zoned_abs sizes exceed file size" ends the job.
                return None;
            }
            Some(self.uniform_block(send - stotal)? + stotal)
        } else {
            let (stotal, send) = (z.size_perc_prev as u64, z.size_perc as u64);
            let offset = if stotal != 0 { stotal * lastb / 100 } else { 0 };
            let b = self.uniform_block(lastb * (send - stotal) / 100)?;
            Some(b + offset)
        }
    }

    /// io_u.c `__get_next_rand_offset`: a block below `lastb` (or the LFSR's next), moved
    /// to the next free block of the random map when it is taken. Inlined: it is most of
    /// a random I/O's draw, and the call's frame cost a tenth of it.
    #[inline(always)]
    fn uniform_block(&mut self, lastb: u64) -> Option<u64> {
        let b = if let OffsetSource::Lfsr(l) = &mut self.offsets {
            l.next_block()?
        } else {
            match (&self.map, &mut self.ahead) {
                (Some(map), Some(ahead)) => {
                    // The oldest draw taken ahead is this one; the stream's next draw
                    // takes its place and its word is prefetched.
                    let (r, scaled_for, b) = ahead.draws[ahead.next % PREFETCH_AHEAD];
                    let next = self.streams.random.draw();
                    let next_b = self.streams.random.scale(lastb, next);
                    map.prefetch(next_b);
                    ahead.draws[ahead.next % PREFETCH_AHEAD] = (next, lastb, next_b);
                    ahead.next = (ahead.next + 1) % PREFETCH_AHEAD;
                    if scaled_for == lastb {
                        b
                    } else {
                        self.streams.random.scale(lastb, r)
                    }
                }
                _ => {
                    let r = self.streams.random.draw();
                    self.streams.random.scale(lastb, r)
                }
            }
        };
        match &self.map {
            Some(map) if map.is_set(b) => map.next_free(b),
            _ => Some(b),
        }
    }

    /// io_u.c `get_next_buflen` (with `io_u_fits`).
    fn next_buflen(&mut self, d: usize, offset: u64) -> u64 {
        if self.randtrimwrite && d == 1 {
            return self.last_pos[2].wrapping_sub(self.last_start[2]);
        }
        let (minbs, maxbs) = (self.min_bs[d], self.max_bs[d]);
        if minbs == maxbs {
            return minbs;
        }
        let end = self.io_size + self.start_offset;
        let fits = |len: u64| offset + len <= end;
        if !fits(minbs) {
            return 0;
        }
        let rng = &mut self.streams.bsrange[d];
        let frand_max = rng.rand_max();
        // fio redraws until a size fits; a split whose only fitting sizes have 0 % would
        // spin forever there. Give up (the file is done for this pass) after many tries.
        for _ in 0..MAX_BUFLEN_DRAWS {
            let r = rng.draw();
            let mut buflen = 0;
            if self.split[d].is_empty() {
                buflen = minbs + rng.scale(maxbs, r);
            } else {
                let mut perc = 0u64;
                for &(bs, p) in &self.split[d] {
                    if p == 0 {
                        continue;
                    }
                    buflen = bs;
                    perc += p as u64;
                    if r / perc <= frand_max / 100 && fits(buflen) {
                        break;
                    }
                }
            }
            if !self.spec.bs_unaligned {
                buflen -= buflen % minbs;
            }
            buflen = buflen.min(maxbs);
            if fits(buflen) {
                return buflen;
            }
        }
        0
    }
}

/// Random maps larger than this (in blocks, 128 KiB of bitmap) get their words
/// prefetched; smaller ones stay in cache anyway.
const PREFETCH_MAP_BLOCKS: u64 = 1 << 20;
/// Block-size draws before a job whose sizes cannot fit is treated as done.
const MAX_BUFLEN_DRAWS: u32 = 1 << 16;

/// io_u.c `mark_random_map`: mark the blocks of an I/O of `buflen` bytes at `rel` (from the
/// file's start) taken in `map`, whose blocks are `min_bs` bytes (`shift`: its log2 when a
/// power of two); the I/O shrinks to the free blocks it starts on. The new length (0: its
/// first block was taken).
#[inline(always)]
fn mark_random_map(map: &mut AxMap, min_bs: u64, shift: Option<u32>, rel: u64, buflen: u64) -> u64 {
    let (block, nr) = match shift {
        Some(sh) => (rel >> sh, (buflen + min_bs - 1) >> sh),
        None => (rel / min_bs, buflen.div_ceil(min_bs)),
    };
    let set = map.set_nr(block, nr);
    buflen.min(set * min_bs)
}

/// How many random draws ahead the map word is prefetched.
const PREFETCH_AHEAD: usize = 8;

/// The offset stream's draws taken ahead of their use ([`Generator::reset_ahead`]), oldest
/// at `next`: (draw, the block count it was scaled for, the block it scaled to).
#[derive(Clone, Debug)]
struct DrawsAhead {
    draws: [(u64, u64, u64); PREFETCH_AHEAD],
    next: usize,
}

#[cfg(test)]
mod tests;
