//! Timing a round until its figures converge, then carrying the rest of it through the FTL
//! untimed (docs/fio.md, "Converging rounds").
//!
//! A deterministic twin in a stationary state gives the same statistics for the rest of a
//! round as for the part already timed; a real drive needs long rounds to average its noise,
//! a twin need not. The runner times the round in **samples**. A sample is cut into batches
//! of simulated time; after each batch, MSER drops the warm-up batches and the method of
//! batch means gives each tracked figure (per reporting group and direction: IOPS, bandwidth,
//! mean latency, chosen percentiles) a confidence interval (stats/batch.rs). When every
//! interval is narrow enough, the sample ends and the clones' next I/Os (their own offsets,
//! in their own order) go through the controller and FTL in fast-forward, interleaved at the
//! rates the sample measured, for a stretch of the round's time:
//! * a round that cannot change the drive (its clones only read): the rest of the round;
//! * otherwise a chunk of writes (at first `first_chunk_fill` of the namespace), then a new
//!   timed sample, and so on: the drive's state moves with what is written, and each sample
//!   measures it where it has got to. A chunk's time is fixed once the next sample's rate is
//!   known (the trapezoid rule: rates change linearly between samples); chunks double while
//!   successive samples agree within the interval, and halve when they do not.
//!
//! **Garbage collection that copies data** ends the sampling: the rest of the round is timed.
//! A victim's valid data is relocated in a burst (paced by host writes) and the next victim
//! is picked only when the free pool runs low again, so under GC the write rate cycles:
//! e.g. a CM6-V at 1/64 under 4 KiB random writes alternates about 0.4 s at the host cap
//! (400 K IOPS) with 0.4 s of copying (250-360 K IOPS). A sample of milliseconds sees one
//! phase only, and the batches of one phase are stationary, so the intervals cannot tell; a
//! chunk carried at that phase's rate then does the next victims' copying untimed, and the
//! next sample starts in the fast phase again (a 60 s round at GC steady state measured
//! 400 K IOPS where the rounds timed in full before it gave 361-362 K; HIR bursts and WSAT
//! segments came out up to 13 % high). A sound estimate would need batches of whole GC cycles
//! (regenerative batches, about 20 cycles: most of a 60 s round at that scale), so once the
//! FTL has copied data for GC during a round that writes, the round is timed to its end.
//! Before that (a fresh or idle-recovered drive filling its free pool) the rates are
//! stationary, and a chunk stops at GC's first copy.
//!
//! What a sample leaves out of the statistics: the I/Os in flight when it ends (issued, so
//! counted in the totals; their latency is not known) and, after fast-forward, each clone's
//! first 2 x iodepth completions (the queues refilling, which a continuous round does once).
//! A clone's report then counts every I/O it issued, timed or not, over the whole round's
//! time; its latencies and bandwidth samples are the timed samples'.

use serde::{Deserialize, Serialize};

use super::fast_forward::{may_change_state, Quota, ReadMode, Untimed};
use super::{Ev, RunError, Runner};
use crate::engine::events::Entry;
use crate::stats::batch::{lag1_autocorrelation, mser_cut, ratio_interval, t_quantile};
use crate::stats::{plat_value, LatStat, PLAT_NR};
use crate::workload::{Ddir, ExitWhat};

/// When a timed run may stop timing (the defaults are the ones `ssdtwin pts` uses).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConvergeRule {
    /// Confidence level of every interval.
    pub confidence: f64,
    /// Each figure's interval half-width, relative to its estimate, at most this.
    pub rel_half_width: f64,
    /// Latency percentiles tracked besides IOPS, bandwidth and mean latency (e.g. 99.0). A
    /// percentile's interval may also span two of fio's histogram buckets, its resolution.
    pub percentiles: Vec<f64>,
    /// Batches a sample needs after its warm-up (at least 15).
    pub min_batches: u32,
    /// Whether the mean latency (and the percentiles) must converge too; false: only IOPS
    /// and bandwidth must (a test that reports those alone), the latencies are still
    /// reported with their intervals.
    pub latency: bool,
    /// Whether a round that writes or trims may converge. A chunk carried in fast-forward
    /// writes as many I/Os as the sampled rate says the round's time holds, an estimate, so
    /// the drive's state after it differs a little from a fully timed round's, and the
    /// elements after it inherit the difference (GC's phase moves their figures by up to
    /// 2.5 %). False: such rounds are timed in full and leave exactly the full round's state.
    pub writes: bool,
    /// Share of the namespace written between two timed samples at first; doubles while
    /// successive samples agree, halves when they do not, never above `max_chunk_fill`.
    pub first_chunk_fill: f64,
    pub max_chunk_fill: f64,
}

impl Default for ConvergeRule {
    fn default() -> Self {
        ConvergeRule {
            confidence: 0.95,
            rel_half_width: 0.005,
            percentiles: Vec::new(),
            min_batches: 20,
            latency: true,
            writes: true,
            first_chunk_fill: 0.02,
            max_chunk_fill: 0.25,
        }
    }
}

impl ConvergeRule {
    pub fn check(&self) -> Result<(), String> {
        if !(0.5..1.0).contains(&self.confidence) {
            return Err(format!("confidence {}: from 0.5 to below 1", self.confidence));
        }
        if !(self.rel_half_width > 0.0 && self.rel_half_width < 0.5) {
            return Err(format!("rel_half_width {}: above 0, below 0.5", self.rel_half_width));
        }
        if let Some(p) = self.percentiles.iter().find(|p| !(**p > 0.0 && **p < 100.0)) {
            return Err(format!("percentile {p}: above 0, below 100"));
        }
        if !(15..=1000).contains(&self.min_batches) {
            return Err(format!("min_batches {}: from 15 to 1000", self.min_batches));
        }
        if !(self.first_chunk_fill > 0.0 && self.first_chunk_fill <= self.max_chunk_fill && self.max_chunk_fill <= 100.0) {
            return Err("chunk fills: 0 < first_chunk_fill <= max_chunk_fill <= 100".into());
        }
        Ok(())
    }
}

/// The first batch's length; batches double whenever they reach twice `min_batches`.
const FIRST_BATCH_NS: u64 = 1_000_000;

/// One tracked figure at the end of a sample.
#[derive(Clone, Debug, Serialize)]
pub struct FigureOut {
    pub group: u32,
    pub ddir: Ddir,
    /// "iops" (I/Os per second), "bw" (bytes per second), "lat_mean" (ns), "lat_p99" (ns) ...
    pub figure: String,
    pub estimate: f64,
    /// The interval's half-width relative to the estimate (infinite: too few I/Os).
    pub rel_half_width: f64,
}

/// A stretch carried in fast-forward after a sample.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkOut {
    pub ios: u64,
    pub write_bytes: u64,
    /// The round's time it stands for (after the trapezoid correction).
    pub ns: u64,
}

/// One timed sample.
#[derive(Clone, Debug, Serialize)]
pub struct SampleOut {
    pub start_ns: u64,
    pub timed_ns: u64,
    pub batches: u32,
    pub batch_ns: u64,
    /// Batches MSER left out at its start.
    pub warmup_batches: u32,
    pub converged: bool,
    pub figures: Vec<FigureOut>,
    pub fast_forward: Option<ChunkOut>,
}

/// How a converging run went (the fio JSON's `ssdtwin.timing`).
#[derive(Clone, Debug, Serialize)]
pub struct ConvergeOut {
    pub rule: ConvergeRule,
    /// Why the run was timed in full: the rule does not apply to it, or no sample converged
    /// before the round's end. None when part of it was carried in fast-forward.
    pub timed_in_full: Option<String>,
    /// Simulated time timed, and the round's time the fast-forwarded I/Os stand for.
    pub timed_ns: u64,
    pub fast_forward_ns: u64,
    pub timed_share: f64,
    pub fast_forward_ios: u64,
    /// Why the round was timed from some point to its end although the rule applies
    /// (garbage collection copying data, see the module); None when it was not.
    pub timed_to_end: Option<String>,
    pub samples: Vec<SampleOut>,
    /// Per group, direction and figure: the last sample's estimate and the widest relative
    /// half-width of any sample.
    pub figures: Vec<FigureOut>,
}

/// Why a round that writes is timed in full under a rule with `writes: false`.
const WRITES_TIMED: &str = "a round that writes, and the rule times writes in full (the drive's state after it must be a full round's)";

/// Why a run must be timed in full (None: the rule applies).
pub(super) fn converge_problem(run: &Runner<'_>) -> Option<String> {
    if run.stack.is_some() || run.arb.is_some() {
        return Some("a host stack or weighted round robin arbitration".into());
    }
    for cl in &run.clones {
        let s = &cl.gen.spec;
        let why = if !s.time_based || s.runtime_ns == 0 {
            "a job that ends by size, not by time"
        } else if s.batch != 0 || s.startdelay_ns > 0 || s.wait_for.is_some() || s.exit_what != ExitWhat::None {
            "jobs that start or end at different times (stonewall, startdelay, wait_for, exitall)"
        } else if s.steadystate.is_some() || s.latency_target_ns > 0 || s.flow > 0 {
            "steady-state detection, latency_target or flow"
        } else if s.serialize_overlap || cl.min_rate_set() {
            "serialize_overlap or a minimum rate (they act on single I/Os and windows of the round)"
        } else if cl.logging || s.iolog || cl.replay.is_some() {
            "logs, write_iolog or read_iolog (they need every moment of the round)"
        } else if s.thinktime_ns > 0 || s.rate_iops.read + s.rate_iops.write + s.rate_bytes_per_s.read + s.rate_bytes_per_s.write > 0 {
            "think time or rate limits (idle gaps where background GC works)"
        } else {
            continue;
        };
        return Some(format!("job {}: {why}", s.name));
    }
    None
}

/// One batch's counts for one (group, direction).
#[derive(Clone, Default)]
struct Acc {
    ios: u64,
    bytes: u64,
    /// The completion latencies (their sums and fio's histogram).
    clat: LatStat,
}

#[derive(Clone)]
struct Batch {
    acc: Vec<Acc>,
    clone_ios: Vec<u64>,
}

impl Batch {
    fn new(keys: usize, clones: usize) -> Batch {
        Batch { acc: vec![Acc::default(); keys], clone_ios: vec![0; clones] }
    }

    fn merge(&mut self, o: &Batch) {
        for (a, b) in self.acc.iter_mut().zip(&o.acc) {
            a.ios += b.ios;
            a.bytes += b.bytes;
            a.clat.merge(&b.clat);
        }
        self.clone_ios.iter_mut().zip(&o.clone_ios).for_each(|(x, y)| *x += y);
    }
}

/// A converged sample: its figures, and the rates the fast-forward after it uses.
struct Verdict {
    warmup: usize,
    figures: Vec<FigureOut>,
    /// Per clone, I/Os completed over `span_ns` (the batches after the warm-up).
    clone_ios: Vec<u64>,
    span_ns: u64,
    write_bytes: u64,
    /// Per (group, direction): the kept batches merged (the latency distribution the
    /// fast-forwarded I/Os take in the report).
    pooled: Vec<Acc>,
}

/// The converging run's state (see the module).
pub(super) struct Converger {
    rule: ConvergeRule,
    /// Per clone, its group's first key (read; write is the next).
    key_of_clone: Vec<usize>,
    groups: Vec<u32>,
    can_write: bool,
    namespace_bytes: u64,
    start_ns: u64,
    batch_ns: u64,
    pub(super) batch_end_ns: u64,
    batches: Vec<Batch>,
    cur: Batch,
    samples: Vec<SampleOut>,
    chunk_fill: f64,
    /// The last chunk: (ns credited, total I/Os per ns it assumed), for its correction.
    last_chunk: Option<(u64, f64)>,
    ff_ios: u64,
    problem: Option<String>,
    /// IUs the FTL had copied for GC when the run started; more in a run that writes: GC
    /// cycles, and no sample converges any more (see the module).
    gc_copies_at_run_start: u64,
    gc_copying: bool,
}

impl Converger {
    /// Whether the rule applies to the run (otherwise it is timed in full, and says why).
    pub(super) fn applies(&self) -> bool {
        self.problem.is_none()
    }

    pub(super) fn new(run: &Runner<'_>, rule: ConvergeRule, start_ns: u64) -> Converger {
        let mut groups: Vec<u32> = Vec::new();
        let key_of_clone = run
            .clones
            .iter()
            .map(|c| {
                let g = c.gen.spec.group_id;
                let i = groups.iter().position(|&x| x == g).unwrap_or_else(|| {
                    groups.push(g);
                    groups.len() - 1
                });
                2 * i
            })
            .collect();
        let keys = 2 * groups.len();
        let n = run.clones.len();
        let ramp = run.clones.iter().map(|c| c.gen.spec.ramp_time_ns).max().unwrap_or(0);
        let can_write = run.clones.iter().any(|c| may_change_state(&c.gen.spec));
        let writes_timed = !rule.writes && can_write;
        let start = start_ns.saturating_add(ramp);
        Converger {
            chunk_fill: rule.first_chunk_fill,
            rule,
            key_of_clone,
            groups,
            can_write,
            namespace_bytes: run.clones.iter().map(|c| c.gen.spec.target_size_bytes).max().unwrap_or(0),
            start_ns: start,
            batch_ns: FIRST_BATCH_NS,
            batch_end_ns: start.saturating_add(FIRST_BATCH_NS),
            batches: Vec::new(),
            cur: Batch::new(keys, n),
            samples: Vec::new(),
            last_chunk: None,
            ff_ios: 0,
            problem: converge_problem(run).or_else(|| writes_timed.then(|| WRITES_TIMED.to_string())),
            gc_copies_at_run_start: run.ctrl.ftl_counters().gc_programmed_ius,
            gc_copying: false,
        }
    }

    /// A completion clone `c` counted (direction index `d`, `len` bytes, latency `clat`).
    #[inline]
    pub(super) fn record(&mut self, c: usize, d: usize, len: u64, clat: u64) {
        if d > 1 {
            return;
        }
        let a = &mut self.cur.acc[self.key_of_clone[c] + d];
        a.ios += 1;
        a.bytes += len;
        a.clat.add(clat);
        self.cur.clone_ios[c] += 1;
    }

    /// Close every batch that ended by `t`; pairs merge (and batches double) at twice the
    /// minimum count.
    fn close_batches(&mut self, t: u64) {
        let cap = 2 * self.rule.min_batches as usize;
        while self.batch_end_ns <= t {
            let fresh = Batch::new(self.cur.acc.len(), self.cur.clone_ios.len());
            self.batches.push(std::mem::replace(&mut self.cur, fresh));
            if self.batches.len() >= cap {
                let old = std::mem::take(&mut self.batches);
                for pair in old.chunks(2) {
                    let mut b = pair[0].clone();
                    if let Some(o) = pair.get(1) {
                        b.merge(o);
                    }
                    self.batches.push(b);
                }
                self.batch_ns *= 2;
            }
            self.batch_end_ns = self.start_ns + (self.batches.len() as u64 + 1) * self.batch_ns;
        }
    }

    /// The sample's figures if every one has converged (`force`: whatever they are, for the
    /// report at the end of a run).
    fn evaluate(&self, force: bool) -> Option<Verdict> {
        let n = self.batches.len();
        let min = self.rule.min_batches as usize;
        if n < 2 || (!force && n < min) {
            return None;
        }
        let keys: Vec<usize> = (0..self.cur.acc.len()).filter(|&k| self.batches.iter().any(|b| b.acc[k].ios > 0)).collect();
        let series = |k: usize, f: fn(&Acc) -> f64| self.batches.iter().map(|b| f(&b.acc[k])).collect::<Vec<f64>>();
        let mut warmup = 0;
        for &k in &keys {
            warmup = warmup.max(mser_cut(&series(k, |a| a.ios as f64))).max(mser_cut(&series(k, |a| a.clat.sum_ns as f64)));
        }
        let settled = warmup < n / 2 && n - warmup >= min;
        if !force && !settled {
            return None;
        }
        let kept = &self.batches[warmup..];
        let t = t_quantile(self.rule.confidence, (kept.len() - 1) as u32);
        let limit = 2.0 / (kept.len() as f64).sqrt();
        let mut ok = settled;
        let mut figures = Vec::new();
        let per_s = 1e9 / self.batch_ns as f64;
        for &k in &keys {
            let (group, ddir) = (self.groups[k / 2], if k % 2 == 0 { Ddir::Read } else { Ddir::Write });
            let col = |f: fn(&Acc) -> f64| kept.iter().map(|b| f(&b.acc[k])).collect::<Vec<f64>>();
            let (ios, bytes, clat) = (col(|a| a.ios as f64), col(|a| a.bytes as f64), col(|a| a.clat.sum_ns as f64));
            let ones = vec![1.0; kept.len()];
            let lat_free = !self.rule.latency;
            ok &= lag1_autocorrelation(&ios) <= limit && (lat_free || lag1_autocorrelation(&clat) <= limit);
            let mut push = |name: String, est: f64, rel: f64, ok: &mut bool, tol: bool| {
                *ok &= tol || rel <= self.rule.rel_half_width;
                figures.push(FigureOut { group, ddir, figure: name, estimate: est, rel_half_width: rel });
            };
            let iv = ratio_interval(&ios, &ones, t);
            push("iops".into(), iv.estimate * per_s, iv.relative(), &mut ok, false);
            let iv = ratio_interval(&bytes, &ones, t);
            push("bw".into(), iv.estimate * per_s, iv.relative(), &mut ok, false);
            let iv = ratio_interval(&clat, &ios, t);
            push("lat_mean".into(), iv.estimate, iv.relative(), &mut ok, lat_free);
            for &p in &self.rule.percentiles {
                let (est, rel, within_two_buckets) = percentile_interval(kept, k, p, t);
                push(format!("lat_p{}", fmt_pct(p)), est, rel, &mut ok, lat_free || within_two_buckets);
            }
        }
        let clone_ios: Vec<u64> = (0..self.cur.clone_ios.len()).map(|c| kept.iter().map(|b| b.clone_ios[c]).sum()).collect();
        // Nothing completed yet (the drive still busy with what came before), or a clone
        // with no completion: no rate to carry its I/Os at.
        ok &= !keys.is_empty() && clone_ios.iter().all(|&n| n > 0);
        if !ok && !force {
            return None;
        }
        let write_bytes = keys.iter().filter(|&&k| k % 2 == 1).map(|&k| kept.iter().map(|b| b.acc[k].bytes).sum::<u64>()).sum();
        let mut pooled = kept[0].clone();
        kept[1..].iter().for_each(|b| pooled.merge(b));
        Some(Verdict { warmup, figures, clone_ios, span_ns: kept.len() as u64 * self.batch_ns, write_bytes, pooled: pooled.acc })
    }

    fn sample_out(&self, end_ns: u64, v: Option<&Verdict>, converged: bool) -> SampleOut {
        SampleOut {
            start_ns: self.start_ns,
            timed_ns: end_ns.saturating_sub(self.start_ns),
            batches: self.batches.len() as u32,
            batch_ns: self.batch_ns,
            warmup_batches: v.map_or(0, |v| v.warmup as u32),
            converged,
            figures: v.map_or_else(Vec::new, |v| v.figures.clone()),
            fast_forward: None,
        }
    }

    /// Start a new sample at `t`.
    fn restart(&mut self, t: u64) {
        self.start_ns = t;
        self.batch_ns = FIRST_BATCH_NS;
        self.batch_end_ns = t.saturating_add(FIRST_BATCH_NS);
        self.batches.clear();
        self.cur = Batch::new(self.cur.acc.len(), self.cur.clone_ios.len());
    }

    /// The report of the run, which ended at `end_ns` (simulated) after starting at `start_ns`.
    pub(super) fn out(mut self, start_ns: u64, end_ns: u64, ff_ns: u64) -> ConvergeOut {
        let last = self.evaluate(true);
        self.samples.push(self.sample_out(end_ns, last.as_ref(), false));
        // The last sample's figures (a sample cut short at the round's end may have none).
        let mut figures: Vec<FigureOut> =
            self.samples.iter().rev().find(|s| !s.figures.is_empty()).map(|s| s.figures.clone()).unwrap_or_default();
        for f in &mut figures {
            for s in &self.samples {
                for g in s.figures.iter().filter(|g| g.group == f.group && g.ddir == f.ddir && g.figure == f.figure) {
                    f.rel_half_width = f.rel_half_width.max(g.rel_half_width);
                }
            }
        }
        let timed_ns = end_ns.saturating_sub(start_ns);
        let timed_in_full = match (&self.problem, ff_ns) {
            (Some(p), _) => Some(format!("the rule does not apply: {p}")),
            (None, 0) if self.gc_copying => Some(GC_CYCLES.into()),
            (None, 0) => Some("no sample converged before the round's end".into()),
            (None, _) => None,
        };
        let timed_to_end = (self.gc_copying && ff_ns > 0).then(|| GC_CYCLES.to_string());
        ConvergeOut {
            rule: self.rule,
            timed_in_full,
            timed_ns,
            fast_forward_ns: ff_ns,
            timed_share: if timed_ns + ff_ns > 0 { timed_ns as f64 / (timed_ns + ff_ns) as f64 } else { 1.0 },
            fast_forward_ios: self.ff_ios,
            timed_to_end,
            samples: self.samples,
            figures,
        }
    }
}

/// Why a round that writes is timed from GC's first copies to its end.
const GC_CYCLES: &str = "garbage collection copies data: its cycles are longer than a sample sees, timed from its start to the round's end";

/// "99", "99.9", "99.99" for a percentile in a figure's name.
fn fmt_pct(p: f64) -> String {
    let s = format!("{p}");
    s.replace('.', "_")
}

/// Percentile `p` of key `k` over `kept` batches: the pooled histogram's value, its
/// interval's half-width relative to it, and whether the interval spans at most two
/// histogram buckets. The interval comes from the batches' shares of I/Os at or below the
/// estimate (a ratio, with its batch-means interval), mapped back through the pooled
/// histogram.
fn percentile_interval(kept: &[Batch], k: usize, p: f64, t: f64) -> (f64, f64, bool) {
    let mut pooled = vec![0u64; PLAT_NR];
    for b in kept {
        for (x, &y) in pooled.iter_mut().zip(b.acc[k].clat.hist()) {
            *x += y;
        }
    }
    let total: u64 = pooled.iter().sum();
    if total == 0 {
        return (0.0, f64::INFINITY, false);
    }
    let at = |q: f64| -> usize {
        let want = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut cum = 0;
        for (i, &c) in pooled.iter().enumerate() {
            cum += c;
            if cum >= want {
                return i;
            }
        }
        PLAT_NR - 1
    };
    let q = p / 100.0;
    let i = at(q);
    let under: Vec<f64> = kept.iter().map(|b| b.acc[k].clat.hist()[..=i].iter().map(|&c| c as f64).sum()).collect();
    let ios: Vec<f64> = kept.iter().map(|b| b.acc[k].ios as f64).collect();
    let h = ratio_interval(&under, &ios, t).half_width;
    let (lo, hi) = (at(q - h), at(q + h));
    let est = plat_value(i) as f64;
    let rel = if est > 0.0 { (plat_value(hi) as f64 - plat_value(lo) as f64) / 2.0 / est } else { f64::INFINITY };
    // Too few I/Os above the percentile to say anything: not converged.
    let tail_ios = (total as f64 * (1.0 - q)).floor();
    (est, rel, hi - lo <= 1 && tail_ios >= 10.0)
}

impl Runner<'_> {
    /// Batches ended by `t` (the next event's time): close them and, if the sample has
    /// converged, carry the next stretch of the round in fast-forward.
    pub(super) fn converge_tick(&mut self, t: u64, keep_going: &mut dyn FnMut(u64) -> bool) -> Result<(), RunError> {
        let gc_copies = self.ctrl.ftl_counters().gc_programmed_ius;
        let cv = self.conv.as_deref_mut().expect("converging");
        let at = cv.batch_end_ns;
        cv.close_batches(t);
        // GC copying in a round that writes: the batches go on (the report's intervals are
        // the rest of the round's), no sample converges.
        cv.gc_copying |= cv.can_write && gc_copies > cv.gc_copies_at_run_start;
        if cv.gc_copying {
            return Ok(());
        }
        // Every clone running and not stopping: a clone near the round's end stays timed.
        if self.clones.iter().any(|c| !c.started || c.stopping || c.finished) {
            return Ok(());
        }
        let Some(v) = self.conv.as_deref().expect("converging").evaluate(false) else { return Ok(()) };
        let at = at.max(self.now);
        self.now = at;
        self.correct_last_chunk(&v);
        let tau = self.next_chunk_ns(&v, at);
        let cv = self.conv.as_deref_mut().expect("converging");
        let mut sample = cv.sample_out(at, Some(&v), true);
        if tau == 0 {
            return Ok(());
        }
        self.discard_in_flight();
        let (ios, written, share) = self.fast_forward_chunk(&v, tau, keep_going)?;
        // Stopped at GC's first copy: the chunk stands for the share of its time it issued.
        let tau = if share < 1.0 { (tau as f64 * share) as u64 } else { tau };
        sample.fast_forward = Some(ChunkOut { ios, write_bytes: written, ns: tau });
        let total_rate = v.clone_ios.iter().sum::<u64>() as f64 / v.span_ns as f64;
        let cv = self.conv.as_deref_mut().expect("converging");
        cv.samples.push(sample);
        cv.ff_ios += ios;
        // A chunk stopped at GC's first copy ran at the sample's rate throughout: no correction.
        cv.last_chunk = (share >= 1.0).then_some((tau, total_rate));
        let cv = self.conv.as_deref_mut().expect("converging");
        cv.restart(at);
        for c in 0..self.clones.len() {
            let cl = &mut self.clones[c];
            cl.stop_at = cl.stop_at.saturating_sub(tau);
            cl.carried.ff_ns += tau;
            cl.carried.warmup_left = 2 * cl.gen.spec.iodepth.max(1);
            if cl.carried.ended {
                cl.stopping = true;
            }
            cl.rate.wake_ns = u64::MAX;
            self.push(at, Ev::Wake(c as u32));
        }
        Ok(())
    }

    /// The previous chunk's time, now that this sample's rate is known: if the rate moved
    /// linearly from the sample before the chunk to this one, the chunk's I/Os took
    /// 2 / (r_before + r_after) per I/O rather than 1 / r_before.
    fn correct_last_chunk(&mut self, v: &Verdict) {
        let cv = self.conv.as_deref_mut().expect("converging");
        let Some((tau, r_before)) = cv.last_chunk.take() else { return };
        let r_after = v.clone_ios.iter().sum::<u64>() as f64 / v.span_ns as f64;
        if r_before <= 0.0 || r_after <= 0.0 {
            return;
        }
        let corrected = (tau as f64 * 2.0 * r_before / (r_before + r_after)).round() as u64;
        if let Some(s) = cv.samples.iter_mut().rev().find_map(|s| s.fast_forward.as_mut()) {
            s.ns = corrected;
        }
        for cl in &mut self.clones {
            cl.stop_at = (cl.stop_at + tau).saturating_sub(corrected);
            cl.carried.ff_ns = (cl.carried.ff_ns + corrected).saturating_sub(tau);
        }
        // Chunks grow while successive samples agree, and shrink when they do not.
        let moved = (r_after - r_before).abs() / r_after;
        if moved <= cv.rule.rel_half_width {
            cv.chunk_fill = (cv.chunk_fill * 2.0).min(cv.rule.max_chunk_fill);
        } else if moved > 4.0 * cv.rule.rel_half_width {
            cv.chunk_fill = (cv.chunk_fill / 2.0).max(cv.rule.first_chunk_fill / 8.0);
        }
    }

    /// The round's time to carry in fast-forward after a converged sample ending at `at`:
    /// the rest of the round for clones that only read, else a chunk of writes; the rest when
    /// what would be left is shorter than this sample. 0: keep timing (too little to gain).
    fn next_chunk_ns(&self, v: &Verdict, at: u64) -> u64 {
        let cv = self.conv.as_deref().expect("converging");
        let rest = self.clones.iter().map(|c| c.stop_at.saturating_sub(at)).min().unwrap_or(0);
        let sample_ns = at.saturating_sub(cv.start_ns);
        let tau = if !cv.can_write || v.write_bytes == 0 {
            rest
        } else {
            let per_ns = v.write_bytes as f64 / v.span_ns as f64;
            let chunk = (cv.chunk_fill * cv.namespace_bytes as f64 / per_ns) as u64;
            if rest.saturating_sub(chunk) < sample_ns {
                rest
            } else {
                chunk
            }
        };
        if tau < 2 * cv.batch_ns {
            0
        } else {
            tau
        }
    }

    /// End the sample: the I/Os in flight stay issued (the drive has them) but their
    /// completions are dropped, and so are the clones' pending wake-ups.
    fn discard_in_flight(&mut self) {
        while let Some(Entry { ev, .. }) = self.events.pop() {
            if let Ev::Done { clone, slot } = Ev::unpack(ev) {
                let cl = &mut self.clones[clone as usize];
                let s = cl.slots[slot as usize];
                cl.free_slots.push(slot);
                cl.inflight -= 1;
                if s.issued >= cl.ramp_end {
                    cl.carried.uncounted.ios[s.ddir as usize] += 1;
                    cl.carried.uncounted.bytes[s.ddir as usize] += s.len;
                }
            }
        }
        debug_assert!(self.clones.iter().all(|c| c.inflight == 0));
    }

    /// Carry `tau` ns of the round in fast-forward at the sample's rates, until GC's first
    /// copy at most (none so far: the run would not be converging). Returns (I/Os, bytes
    /// written, share of `tau` carried).
    fn fast_forward_chunk(&mut self, v: &Verdict, tau: u64, keep_going: &mut dyn FnMut(u64) -> bool) -> Result<(u64, u64, f64), RunError> {
        let n = self.clones.len();
        let mut quotas = Vec::with_capacity(n);
        let mut counted = Vec::with_capacity(n);
        let mut bytes_per_io = Vec::with_capacity(n);
        for (c, cl) in self.clones.iter().enumerate() {
            let ios = (v.clone_ios[c] as u128 * tau as u128 / v.span_ns as u128) as u64;
            quotas.push((v.clone_ios[c] > 0).then_some(Quota { ios, rate: (v.clone_ios[c], v.span_ns) }));
            counted.push(!may_change_state(&cl.gen.spec));
            let r = &cl.stats.dirs[0].counters;
            bytes_per_io.push(if r.ios > 0 { r.io_bytes.div_ceil(r.ios) } else { cl.gen.spec.bs.read.min });
        }
        let before: Vec<[u64; 3]> = self.clones.iter().map(|c| c.carried.ff.ios).collect();
        let gc_copies = self.ctrl.ftl_counters().gc_programmed_ius;
        let mut ff = Untimed { ctrl: &mut *self.ctrl, clones: &mut self.clones, now: self.now };
        let (written, share) = ff.step(&quotas, &counted, &bytes_per_io, ReadMode::Exact, Some(gc_copies), keep_going)?;
        let mut ios = 0;
        let key_of_clone = &self.conv.as_deref().expect("converging").key_of_clone;
        for (c, cl) in self.clones.iter_mut().enumerate() {
            for (d, &was) in before[c].iter().enumerate().take(2) {
                let n = cl.carried.ff.ios[d] - was;
                ios += n;
                // The report's latencies: these I/Os take the sample's distribution.
                let like = &v.pooled[key_of_clone[c] + d].clat;
                for (bucket, count) in cl.stats.dirs[d].counters.clat.add_like(like, n) {
                    cl.stats.lat_buckets.add_n(plat_value(bucket), count);
                }
            }
            ios += cl.carried.ff.ios[2] - before[c][2];
        }
        Ok((ios, written, share))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{drive, spec};
    use super::super::{run, run_converging, CloneOut, RunOptions};
    use super::*;
    use crate::ftl::FtlCounters;
    use serde_json::{json, Value};

    const SECOND: u64 = 1_000_000_000;
    const MIB: u64 = 1 << 20;
    const OPTS: RunOptions = RunOptions { default_nsid: 1, idle_gc: true };

    /// A fresh drive with its first `fill_mib` MiB written sequentially, then `job` (the test
    /// spec with these fields) timed in full or converging under the default rule. Returns
    /// the clone's report, the FTL's counters after it, and how the converging run went.
    fn round(fill_mib: u64, job: Value, converge: bool) -> (CloneOut, FtlCounters, Option<ConvergeOut>) {
        round_under(fill_mib, job, converge.then(ConvergeRule::default))
    }

    /// `round` converging under `rule` (None: timed in full).
    fn round_under(fill_mib: u64, job: Value, rule: Option<ConvergeRule>) -> (CloneOut, FtlCounters, Option<ConvergeOut>) {
        let (mut ctrl, mut timing) = drive();
        let fill = spec(
            &ctrl,
            json!({"rw": "write", "random": false, "size_bytes": fill_mib * MIB, "io_size_bytes": fill_mib * MIB, "bs": {"read": {"min": 131072, "max": 131072, "split": [[131072, 100]]}, "write": {"min": 131072, "max": 131072, "split": [[131072, 100]]}, "trim": {"min": 131072, "max": 131072, "split": [[131072, 100]]}}}),
        );
        run(&mut ctrl, &mut timing, vec![fill], &OPTS, 0, &mut |_| true).unwrap();
        let s = spec(&ctrl, job);
        let (out, how) = if let Some(rule) = rule {
            let (o, how) = run_converging(&mut ctrl, &mut timing, vec![s], &OPTS, rule, &mut |_| true).unwrap();
            (o, Some(how))
        } else {
            (run(&mut ctrl, &mut timing, vec![s], &OPTS, 0, &mut |_| true).unwrap(), None)
        };
        let counters = ctrl.ftl_counters().clone();
        (out.into_iter().next().unwrap(), counters, how)
    }

    fn iops(d: &super::super::report::DirOut) -> f64 {
        d.total_ios as f64 * 1e9 / d.runtime_ns as f64
    }

    fn mean_clat(d: &super::super::report::DirOut) -> f64 {
        d.clat.sum_ns as f64 / d.clat.n as f64
    }

    fn assert_near(what: &str, got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol * want.abs(), "{what}: {got} against {want} (tolerance {} %)", tol * 100.0);
    }

    #[test]
    fn a_read_round_is_timed_in_part_and_reports_what_the_full_round_does() {
        let job = json!({"rw": "randread", "directions": ["read"], "size_bytes": 256 * MIB, "io_size_bytes": 256 * MIB,
                         "time_based": true, "runtime_ns": 2 * SECOND, "iodepth": 32, "iodepth_configured": 32});
        let (full, c_full, _) = round(256, job.clone(), false);
        let (conv, c_conv, how) = round(256, job, true);
        let how = how.unwrap();
        assert_eq!(how.timed_in_full, None, "a stationary read round converges");
        assert!(how.timed_share < 0.5, "timed {} of the round", how.timed_share);
        assert!(how.figures.iter().all(|f| f.rel_half_width <= 0.005), "{:?}", how.figures);
        assert_near("the round's runtime", conv.runtime_ns as f64, full.runtime_ns as f64, 1e-3);
        assert_near("read IOPS", iops(&conv.read), iops(&full.read), 0.01);
        assert_near("mean read latency", mean_clat(&conv.read), mean_clat(&full.read), 0.01);
        assert_near("FTL host reads", c_conv.host_read_bytes as f64, c_full.host_read_bytes as f64, 0.01);
        // Reads change no mapping: the writes are the fill's alone in both.
        assert_eq!((c_conv.host_write_bytes, c_conv.host_programmed_ius), (c_full.host_write_bytes, c_full.host_programmed_ius));
    }

    #[test]
    fn a_write_round_leaves_the_ftl_where_the_full_round_does() {
        // Random writes over 256 MiB: the drive collects garbage, so its state moves with
        // what is written; fast-forward writes the same offsets in the same order.
        let job = json!({"size_bytes": 256 * MIB, "io_size_bytes": 256 * MIB, "time_based": true, "runtime_ns": 2 * SECOND,
                         "iodepth": 32, "iodepth_configured": 32});
        let (full, c_full, _) = round(256, job.clone(), false);
        let (conv, c_conv, how) = round(256, job, true);
        let how = how.unwrap();
        assert_eq!(how.timed_in_full, None);
        assert!(how.timed_share < 0.8 && how.fast_forward_ios > 0, "timed {} of the round", how.timed_share);
        assert_near("write IOPS", iops(&conv.write), iops(&full.write), 0.01);
        assert_near("mean write latency", mean_clat(&conv.write), mean_clat(&full.write), 0.02);
        assert_near("FTL host writes", c_conv.host_write_bytes as f64, c_full.host_write_bytes as f64, 0.01);
        let nand = |c: &FtlCounters| (c.host_programmed_ius + c.gc_programmed_ius) as f64;
        assert_near("NAND programs", nand(&c_conv), nand(&c_full), 0.02);
        assert_near("GC victims", c_conv.gc_victims as f64, c_full.gc_victims as f64, 0.05);
        assert_eq!(conv.write.total_ios * 4096, conv.write.io_bytes, "every I/O counted once");
    }

    #[test]
    fn a_write_round_under_gc_is_timed_from_gc_s_first_copy_to_its_end() {
        // The whole namespace written once, then random writes over it: the free pool runs
        // out within the round and GC starts copying, in cycles no short sample sees whole.
        let (ns_mib, job) = {
            let (ctrl, _) = drive();
            let ns = spec(&ctrl, json!({})).target_size_bytes;
            (
                ns / MIB,
                json!({"size_bytes": ns, "io_size_bytes": ns, "time_based": true, "runtime_ns": 6 * SECOND,
                              "iodepth": 32, "iodepth_configured": 32, "norandommap": true}),
            )
        };
        let (full, c_full, _) = round(ns_mib, job.clone(), false);
        let (conv, c_conv, how) = round(ns_mib, job, true);
        let how = how.unwrap();
        assert!(c_full.gc_programmed_ius > 0, "the round must reach GC copying");
        let gc = how.timed_to_end.as_deref().or(how.timed_in_full.as_deref()).unwrap_or("");
        assert!(gc.contains("garbage collection"), "{how:?}");
        let last = how.samples.last().unwrap();
        assert!(!last.converged && last.fast_forward.is_none(), "the last sample runs to the round's end");
        assert_near("write IOPS", iops(&conv.write), iops(&full.write), 0.01);
        assert_near("FTL host writes", c_conv.host_write_bytes as f64, c_full.host_write_bytes as f64, 0.01);
        assert_near("GC copies", c_conv.gc_programmed_ius as f64, c_full.gc_programmed_ius as f64, 0.05);
    }

    #[test]
    fn a_round_the_rule_does_not_apply_to_is_the_plain_run_bit_for_bit() {
        let job = json!({"size_bytes": 64 * MIB, "io_size_bytes": 64 * MIB, "time_based": true, "runtime_ns": SECOND / 2,
                         "thinktime_ns": 100_000});
        let (full, c_full, _) = round(64, job.clone(), false);
        let (conv, c_conv, how) = round(64, job, true);
        let why = how.unwrap().timed_in_full.expect("timed in full");
        assert!(why.contains("think time"), "{why}");
        assert_eq!(serde_json::to_value(&conv).unwrap(), serde_json::to_value(&full).unwrap());
        assert_eq!(c_conv, c_full);
    }

    #[test]
    fn a_write_round_under_a_rule_that_times_writes_is_the_plain_run_bit_for_bit() {
        // The round of `a_write_round_leaves_the_ftl_where_the_full_round_does`, which the
        // default rule carries in part; a read round under the same rule still converges.
        let job = json!({"size_bytes": 256 * MIB, "io_size_bytes": 256 * MIB, "time_based": true, "runtime_ns": 2 * SECOND,
                         "iodepth": 32, "iodepth_configured": 32});
        let rule = ConvergeRule { writes: false, ..Default::default() };
        let (full, c_full, _) = round(256, job.clone(), false);
        let (conv, c_conv, how) = round_under(256, job, Some(rule.clone()));
        let why = how.unwrap().timed_in_full.expect("timed in full");
        assert!(why.contains("times writes in full"), "{why}");
        assert_eq!(serde_json::to_value(&conv).unwrap(), serde_json::to_value(&full).unwrap());
        assert_eq!(c_conv, c_full);
        let reads = json!({"rw": "randread", "directions": ["read"], "size_bytes": 256 * MIB, "io_size_bytes": 256 * MIB,
                           "time_based": true, "runtime_ns": 2 * SECOND, "iodepth": 32, "iodepth_configured": 32});
        let (_, _, how) = round_under(256, reads, Some(rule));
        assert_eq!(how.unwrap().timed_in_full, None, "reads still converge");
    }

    #[test]
    fn the_rule_refuses_what_it_cannot_use() {
        let bad = |r: ConvergeRule| r.check().unwrap_err();
        assert!(bad(ConvergeRule { confidence: 1.0, ..Default::default() }).contains("confidence"));
        assert!(bad(ConvergeRule { rel_half_width: 0.0, ..Default::default() }).contains("rel_half_width"));
        assert!(bad(ConvergeRule { percentiles: vec![100.0], ..Default::default() }).contains("percentile"));
        assert!(bad(ConvergeRule { min_batches: 3, ..Default::default() }).contains("min_batches"));
        assert!(ConvergeRule::default().check().is_ok());
    }
}
