//! fio's flow control (`flow`, `flow_id`, `flow_sleep`; flow.c): jobs of one flow group
//! issue I/O in proportion to their weights.

use super::clone::JobClone;
use super::{Ev, RunError, Runner};
use crate::workload::JobError;

/// One `flow_id` group (fio's flow.c `struct fio_flow`): a counter that starts at 1 and
/// grows with every I/O a member lets through, the members' total weight, and the members
/// waiting for the others to move.
pub(super) struct FlowGroup {
    id: u32,
    counter: u64,
    total_weight: u64,
    blocked: Vec<u32>,
}

/// fio registers every job with a `flow` weight when it is set up (init.c `flow_init_job`),
/// so members that have not started yet already count in the total weight.
pub(super) fn flow_groups(clones: &mut [JobClone]) -> Vec<FlowGroup> {
    let mut flows: Vec<FlowGroup> = Vec::new();
    for cl in clones.iter_mut() {
        let (weight, id) = (cl.gen.spec.flow, cl.gen.spec.flow_id);
        if weight == 0 {
            continue;
        }
        let f = match flows.iter().position(|g| g.id == id) {
            Some(f) => f,
            None => {
                flows.push(FlowGroup { id, counter: 1, total_weight: 0, blocked: Vec::new() });
                flows.len() - 1
            }
        };
        flows[f].total_weight += weight as u64;
        cl.flow.group = Some(f);
    }
    flows
}

impl Runner<'_> {
    /// fio's flow.c `flow_threshold_exceeded`, checked before each I/O: a clone whose share
    /// of its group's counter exceeds its share of the weight is held back; with
    /// `flow_sleep` it first waits for its I/Os in flight (io_u_quiesce), then sleeps, then
    /// checks again; without, it checks again whenever another member moves. Otherwise
    /// both counters count the I/O. The ratios are compared as doubles, as fio does.
    pub(super) fn flow_held(&mut self, c: usize, now: u64) -> Result<bool, RunError> {
        let cl = &mut self.clones[c];
        let f = cl.flow.group.expect("a flow member");
        if cl.flow.quiesce {
            if cl.inflight > 0 {
                return Ok(true);
            }
            cl.flow.quiesce = false;
            cl.flow.until = now.saturating_add(cl.gen.spec.flow_sleep_ns);
            self.push(self.clones[c].flow.until, Ev::Wake(c as u32));
            self.maybe_idle(now)?;
            return Ok(true);
        }
        if cl.flow.until > now || cl.flow.blocked {
            return Ok(true);
        }
        let group = &mut self.flows[f];
        let counter_ratio = cl.flow.count as f64 / group.counter as f64;
        let weight_ratio = cl.gen.spec.flow as f64 / group.total_weight as f64;
        if counter_ratio <= weight_ratio {
            group.counter += 1;
            cl.flow.count += 1;
            cl.flow.passed = true;
            self.wake_flow(f, now);
            return Ok(false);
        }
        if !self.flow_can_move(c) {
            let spec = &self.clones[c].gen.spec;
            let reason = format!(
                "flow_id={}: the job is over its share of the flow and no other job of the group can run before it ends (fio would wait forever)",
                spec.flow_id
            );
            return Err(JobError { job: spec.name.clone(), thread: spec.thread_number, reason }.into());
        }
        let cl = &mut self.clones[c];
        if cl.gen.spec.flow_sleep_ns > 0 {
            cl.flow.quiesce = true;
            return self.flow_held(c, now);
        }
        cl.flow.blocked = true;
        self.flows[f].blocked.push(c as u32);
        Ok(true)
    }

    /// Another member of `c`'s flow group can still issue I/O in this batch.
    fn flow_can_move(&self, c: usize) -> bool {
        let f = self.clones[c].flow.group;
        self.clones.iter().enumerate().any(|(i, o)| i != c && o.flow.group == f && !o.finished && o.gen.spec.batch == self.batch)
    }

    /// The group's counter or weight changed: members waiting for that look again.
    fn wake_flow(&mut self, f: usize, now: u64) {
        let blocked = std::mem::take(&mut self.flows[f].blocked);
        for &i in &blocked {
            self.clones[i as usize].flow.blocked = false;
            self.push(now, Ev::Wake(i));
        }
        self.flows[f].blocked = blocked;
        self.flows[f].blocked.clear();
    }

    /// fio's flow_exit_job: a finished member takes its count and weight out of the group.
    pub(super) fn flow_exit(&mut self, c: usize, now: u64) {
        let Some(f) = self.clones[c].flow.group else { return };
        let (count, weight) = (self.clones[c].flow.count, self.clones[c].gen.spec.flow as u64);
        let group = &mut self.flows[f];
        group.counter -= count;
        group.total_weight -= weight;
        self.wake_flow(f, now);
    }
}
