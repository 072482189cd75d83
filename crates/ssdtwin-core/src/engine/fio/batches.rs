//! When clones start and end: batches (`stonewall`), `startdelay`, `wait_for` and
//! `exit_what` (fio's backend.c run_threads).

use super::clone::JobClone;
use super::{Ev, RunError, Runner};
use crate::workload::{ExitWhat, JobError};

/// The clones each clone's `wait_for` names: every clone of that job (fio's backend.c
/// `waitee_running` skips clones that share the waiter's own name). The parser refuses
/// unknown, ambiguous and forward references (init.c `wait_for_ok`); here a waitee that
/// would start after its waiter is an error rather than a run that never ends.
pub(super) fn wait_lists(clones: &[JobClone]) -> Result<Vec<Vec<u32>>, RunError> {
    let mut out = Vec::with_capacity(clones.len());
    for cl in clones {
        let spec = &cl.gen.spec;
        let Some(name) = spec.wait_for.as_deref() else {
            out.push(Vec::new());
            continue;
        };
        let err = |reason: String| JobError { job: spec.name.clone(), thread: spec.thread_number, reason };
        let list: Vec<u32> = clones
            .iter()
            .enumerate()
            .filter(|(_, w)| w.gen.spec.name == name && w.gen.spec.name != spec.name)
            .map(|(i, _)| i as u32)
            .collect();
        if list.is_empty() {
            return Err(err(format!("wait_for={name}: no other job of the run has that name")).into());
        }
        if list.iter().any(|&i| clones[i as usize].gen.spec.job_index >= spec.job_index) {
            return Err(err(format!("wait_for={name}: the waitee must be a job defined before this one")).into());
        }
        out.push(list);
    }
    Ok(out)
}

impl Runner<'_> {
    /// Queue the start of every clone of the current batch that is not waiting for another
    /// job (`wait_for`) and was not terminated before it started (`exit_what=all`).
    pub(super) fn start_batch(&mut self, t: u64) {
        self.batch_start_ns = t;
        self.batch_live = self.clones.iter().filter(|c| c.gen.spec.batch == self.batch && !c.finished).count();
        for i in 0..self.clones.len() {
            let cl = &self.clones[i];
            if cl.gen.spec.batch == self.batch && !cl.finished && self.waitees[i].iter().all(|&k| self.clones[k as usize].finished) {
                let d = cl.gen.spec.startdelay_ns;
                self.clones[i].scheduled = true;
                self.push(t.saturating_add(d), Ev::Start(i as u32));
            }
        }
    }

    /// Clone `c` has finished at `now`: terminate the clones its `exit_what` names, then
    /// start the `wait_for` clones that waited for it.
    pub(super) fn on_finish(&mut self, c: usize, now: u64) {
        let (what, group) = (self.clones[c].gen.spec.exit_what, self.clones[c].gen.spec.group_id);
        for i in 0..self.clones.len() {
            let cl = &self.clones[i];
            let hit = match what {
                ExitWhat::None => false,
                ExitWhat::Group => cl.gen.spec.group_id == group,
                ExitWhat::Stonewall => cl.started,
                ExitWhat::All => true,
            };
            if hit && i != c && !cl.finished {
                self.terminate(i, now);
            }
        }
        for i in 0..self.clones.len() {
            let cl = &self.clones[i];
            if cl.scheduled || cl.finished || cl.gen.spec.batch != self.batch || self.waitees[i].is_empty() {
                continue;
            }
            if self.waitees[i].iter().all(|&k| self.clones[k as usize].finished) {
                // fio starts a waiter once its start delay has passed and its waitee is done.
                let at = self.batch_start_ns.saturating_add(cl.gen.spec.startdelay_ns).max(now);
                self.clones[i].scheduled = true;
                self.push(at, Ev::Start(i as u32));
            }
        }
    }

    /// fio's `fio_mark_td_terminate`: a running clone stops issuing and ends once its I/Os
    /// in flight complete (backend.c reaps them); one that has not started never runs and
    /// reports no I/O (backend.c `run_threads`: "never got a chance to start").
    pub(super) fn terminate(&mut self, i: usize, now: u64) {
        let cl = &mut self.clones[i];
        if cl.started {
            cl.stopping = true;
            self.push(now, Ev::Wake(i as u32));
            return;
        }
        cl.finished = true;
        cl.start_ns = now;
        cl.ramp_end = now;
        cl.end_ns = now;
        if cl.gen.spec.batch == self.batch {
            self.batch_live -= 1;
        }
        self.flow_exit(i, now);
    }

    pub(super) fn batch_done(&self) -> bool {
        self.batch_live == 0
    }

    /// Start the next batch once this one has finished. False when none is left.
    pub(super) fn next_batch(&mut self) -> Result<bool, RunError> {
        if !self.batch_done() {
            return Ok(true);
        }
        let max_batch = self.clones.iter().map(|c| c.gen.spec.batch).max().unwrap_or(0);
        if self.batch >= max_batch {
            return Ok(false);
        }
        let t = self.clones.iter().filter(|c| c.gen.spec.batch == self.batch).map(|c| c.end_ns).max().unwrap_or(self.now);
        self.batch += 1;
        self.start_batch(t);
        Ok(true)
    }
}
