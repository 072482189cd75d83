//! How far a long run is, in units whose total is known before it starts: the bytes of the
//! jobs' io_size × loops, the I/Os of number_ios or of a replayed trace, or the simulated
//! nanoseconds of their ramp_time + runtime. A run's callback receives a [`Progress`] now
//! and then (the fio runner and the cluster every 65,536 events); reading it changes
//! nothing, so a run reports the same results with or without anyone watching.

use serde::Serialize;

/// The unit of a run's [`Progress`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgressUnit {
    /// Bytes issued, of the jobs' io_size × loops.
    Bytes,
    /// I/Os issued, of the jobs' number_ios or their traces' records.
    Ios,
    /// Simulated nanoseconds since each job started, of its ramp_time + runtime.
    Ns,
    /// Millionths of each job (the jobs end by different measures, or by whichever of two
    /// comes first: size or runtime), summed over the jobs.
    Millionths,
}

impl ProgressUnit {
    pub fn name(self) -> &'static str {
        match self {
            ProgressUnit::Bytes => "bytes",
            ProgressUnit::Ios => "ios",
            ProgressUnit::Ns => "ns",
            ProgressUnit::Millionths => "millionths",
        }
    }
}

/// `done` of `total` `unit`s at simulated time `now_ns`; `total` 0 when no total is known
/// (a job that ends only when something else ends it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub now_ns: u64,
    pub done: u64,
    pub total: u64,
    pub unit: ProgressUnit,
}

impl Progress {
    /// Work in bytes whose total is known (preconditioning).
    pub fn bytes(done: u64, total: u64) -> Progress {
        Progress { now_ns: 0, done, total, unit: ProgressUnit::Bytes }
    }
}

/// What ends one job, as fio decides (backend.c): the bytes of its kind reaching io_size ×
/// loops, number_ios I/Os (or a trace's records), the end of ramp_time + runtime; the
/// first of those it has ends it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    pub bytes: Option<u64>,
    pub ios: Option<u64>,
    pub ns: Option<u64>,
}

/// What one job has spent of its [`Budget`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub bytes: u64,
    pub ios: u64,
    /// Simulated nanoseconds since it started (0 before).
    pub ns: u64,
    pub finished: bool,
}

const MILLION: u64 = 1_000_000;

impl Budget {
    fn bounds(&self) -> [(ProgressUnit, Option<u64>); 3] {
        [(ProgressUnit::Bytes, self.bytes), (ProgressUnit::Ios, self.ios), (ProgressUnit::Ns, self.ns)]
    }

    /// The one measure that ends this job, if exactly one does.
    fn sole(&self) -> Option<(ProgressUnit, u64)> {
        let mut set = self.bounds().into_iter().filter_map(|(u, t)| t.map(|t| (u, t)));
        match (set.next(), set.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }

    fn is_empty(&self) -> bool {
        self.bounds().iter().all(|(_, t)| t.is_none())
    }

    /// The job's progress in millionths: the furthest of its measures (the first to run
    /// out ends it), all of it once finished.
    fn millionths(&self, s: &Spent) -> u64 {
        if s.finished {
            return MILLION;
        }
        let spent = [s.bytes, s.ios, s.ns];
        self.bounds()
            .iter()
            .zip(spent)
            .filter_map(|((_, total), done)| {
                total.filter(|&t| t > 0).map(|t| ((done as u128 * MILLION as u128) / t as u128).min(MILLION as u128) as u64)
            })
            .max()
            .unwrap_or(0)
    }

    /// `done` and `total` in `unit` (the job's sole measure when that is `unit`).
    fn tally(&self, s: &Spent, unit: ProgressUnit) -> (u64, u64) {
        if unit == ProgressUnit::Millionths {
            return (self.millionths(s), MILLION);
        }
        let total = self.sole().map_or(0, |(_, t)| t);
        let done = match unit {
            ProgressUnit::Bytes => s.bytes,
            ProgressUnit::Ios => s.ios,
            _ => s.ns,
        };
        (if s.finished { total } else { done.min(total) }, total)
    }
}

/// The unit a run of jobs with these budgets reports in: the measure that alone ends every
/// job, else millionths of each; None when some job has no end known in advance.
pub fn unit_of(budgets: &[Budget]) -> Option<ProgressUnit> {
    if budgets.is_empty() || budgets.iter().any(Budget::is_empty) {
        return None;
    }
    let sole: Vec<_> = budgets.iter().map(|b| b.sole().map(|(u, _)| u)).collect();
    match sole[0] {
        Some(u) if sole.iter().all(|s| *s == Some(u)) => Some(u),
        _ => Some(ProgressUnit::Millionths),
    }
}

/// The run's progress at `now_ns` from each job's budget and what it spent (`unit` from
/// [`unit_of`]; None: the simulated time only, total 0).
pub fn tally<'a>(now_ns: u64, unit: Option<ProgressUnit>, jobs: impl Iterator<Item = (&'a Budget, Spent)>) -> Progress {
    let Some(unit) = unit else {
        return Progress { now_ns, done: 0, total: 0, unit: ProgressUnit::Ns };
    };
    let (mut done, mut total) = (0u64, 0u64);
    for (b, s) in jobs {
        let (d, t) = b.tally(&s, unit);
        done = done.saturating_add(d);
        total = total.saturating_add(t);
    }
    Progress { now_ns, done, total, unit }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: Budget = Budget { bytes: Some(4 << 20), ios: None, ns: None };
    const TIMED: Budget = Budget { bytes: None, ios: None, ns: Some(60_000_000_000) };
    const BOTH: Budget = Budget { bytes: Some(1000), ios: None, ns: Some(1000) };

    fn spent(bytes: u64, ns: u64) -> Spent {
        Spent { bytes, ios: 0, ns, finished: false }
    }

    #[test]
    fn one_measure_for_every_job_is_reported_in_its_unit() {
        assert_eq!(unit_of(&[BYTES, BYTES]), Some(ProgressUnit::Bytes));
        assert_eq!(unit_of(&[TIMED]), Some(ProgressUnit::Ns));
        let p = tally(5, unit_of(&[BYTES, BYTES]), [(&BYTES, spent(1 << 20, 0)), (&BYTES, spent(8 << 20, 0))].into_iter());
        assert_eq!((p.done, p.total, p.unit), (5 << 20, 8 << 20, ProgressUnit::Bytes), "a job's bytes count up to its own total");
    }

    #[test]
    fn mixed_measures_count_millionths_of_each_job() {
        assert_eq!(unit_of(&[BYTES, TIMED]), Some(ProgressUnit::Millionths));
        assert_eq!(unit_of(&[BOTH]), Some(ProgressUnit::Millionths));
        // Size or runtime, whichever ends it first: the furthest of the two.
        let p = tally(0, unit_of(&[BOTH]), [(&BOTH, spent(250, 500))].into_iter());
        assert_eq!((p.done, p.total), (500_000, 1_000_000));
        let done = Spent { finished: true, ..spent(10, 10) };
        let p = tally(0, unit_of(&[BOTH, TIMED]), [(&BOTH, done), (&TIMED, spent(0, 0))].into_iter());
        assert_eq!((p.done, p.total), (1_000_000, 2_000_000), "a finished job is all done, one not started none");
    }

    #[test]
    fn a_job_without_a_known_end_leaves_the_total_unknown() {
        let p = tally(7, unit_of(&[BYTES, Budget::default()]), [(&BYTES, spent(1, 0))].into_iter());
        assert_eq!((p.now_ns, p.total), (7, 0));
    }
}
