//! A host stack under the fio runner: the write-shaping tier's decisions (host/tier.rs)
//! timed on a fast-media timeline, its drive commands through [`DeviceTiming::submit`] like
//! any host's, destage in the background with a concurrency limit (docs/host.md, "Timing").

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{DeviceTiming, HostCmd, HostOp};
use crate::host::media::{transfer_ns, MediaSpec};
use crate::host::tier::{Destage, DriveOp, Tier};
use crate::nvme::{Controller, Error};
use crate::units::NsId;

/// What a stack image holds besides its drive: the fast media and the tier on it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostStack {
    pub media: MediaSpec,
    pub tier: Tier,
}

/// A destage in progress on one lane.
struct Lane {
    d: Destage,
    step: usize,
}

/// A host write waiting for room in the tier: its clone's slot holds the rest.
#[derive(Copy, Clone)]
pub(super) struct Stalled {
    pub clone: u32,
    pub slot: u32,
    pub offset: u64,
    pub len: u64,
}

/// Submits one drive command at a time and answers with its completion time: the fio
/// runner's [`DeviceTiming::submit`], or a server's (which also journals it).
pub type Submit<'s> = dyn FnMut(u64, HostCmd) -> Result<u64, Error> + 's;

/// The timing state of a stack between its events: the fast media's timeline and the
/// destage lanes. Shared by the fio runner ([`StackRun`]) and `ssdtwin serve STACKDIR`
/// (crates/ssdtwin-serve/src/stack.rs), so both time a stack by the same rules.
pub struct StackTimeline {
    /// The fast media as one bandwidth server: when its next transfer may start.
    media_free_ns: u64,
    lanes: Vec<Option<Lane>>,
    nsid: NsId,
    lba_bytes: u64,
}

impl StackTimeline {
    /// Idle media and `tier.config.destage_concurrency` free lanes, on the drive's
    /// namespace `nsid` of `lba_bytes` blocks.
    pub fn new(tier: &Tier, nsid: NsId, lba_bytes: u64) -> StackTimeline {
        let lanes = (0..tier.config.destage_concurrency).map(|_| None).collect();
        StackTimeline { media_free_ns: 0, lanes, nsid, lba_bytes }
    }

    /// A fast-media transfer of `bytes` asked for at `now`; when it is done.
    pub fn media(&mut self, m: &MediaSpec, now: u64, bytes: u64, write: bool) -> u64 {
        let (rate, lat) =
            if write { (m.write_bytes_per_s.value, m.write_latency_ns.value) } else { (m.read_bytes_per_s.value, m.read_latency_ns.value) };
        let start = now.max(self.media_free_ns);
        self.media_free_ns = start + transfer_ns(bytes, rate);
        self.media_free_ns + lat
    }

    /// Drive commands at `now`; when the last completes (`now` if none).
    pub fn drive(&self, submit: &mut Submit<'_>, now: u64, ops: &[DriveOp]) -> Result<u64, Error> {
        let mut done = now;
        for &op in ops {
            let (op, offset, len) = match op {
                DriveOp::Write { offset, len } => (HostOp::Write, offset, len),
                DriveOp::Read { offset, len } => (HostOp::Read, offset, len),
            };
            let cmd = HostCmd { op, nsid: self.nsid, slba: offset / self.lba_bytes, nlb: len / self.lba_bytes };
            done = done.max(submit(now, cmd)?);
        }
        Ok(done)
    }

    /// Trims passed to the drive (byte ranges).
    pub fn trim(&self, submit: &mut Submit<'_>, now: u64, ranges: &[(u64, u64)]) -> Result<u64, Error> {
        let mut done = now;
        for &(offset, len) in ranges {
            let cmd = HostCmd { op: HostOp::Deallocate, nsid: self.nsid, slba: offset / self.lba_bytes, nlb: len / self.lba_bytes };
            done = done.max(submit(now, cmd)?);
        }
        Ok(done)
    }

    /// Start destages on free lanes while the tier wants them: (lane, completion of its
    /// first step) for each started.
    pub fn start_destages(&mut self, tier: &mut Tier, m: &MediaSpec, submit: &mut Submit<'_>, now: u64) -> Result<Vec<(u32, u64)>, Error> {
        let mut started = Vec::new();
        while let Some(l) = self.lanes.iter().position(Option::is_none) {
            let Some(d) = tier.next_destage() else { break };
            if d.tier_read_bytes > 0 {
                // The fast media is read to feed the drive: its bandwidth is taken; the drive
                // write starts at once (the media read is sub-microsecond against the drive's
                // tens of microseconds, and commands reach the drive in time order).
                self.media(m, now, d.tier_read_bytes, false);
            }
            let done = self.drive(submit, now, &d.steps[0])?;
            self.lanes[l] = Some(Lane { d, step: 0 });
            started.push((l as u32, done));
        }
        Ok(started)
    }

    /// Lane `l`'s step completed at `now`: the next step's completion, or None when the
    /// destage is done (its fast-media space is free).
    pub fn lane_step_done(&mut self, tier: &mut Tier, submit: &mut Submit<'_>, l: u32, now: u64) -> Result<Option<u64>, Error> {
        let lane = self.lanes[l as usize].as_mut().expect("a busy lane");
        lane.step += 1;
        if lane.step < lane.d.steps.len() {
            let ops = lane.d.steps[lane.step].clone();
            return self.drive(submit, now, &ops).map(Some);
        }
        let id = lane.d.id;
        self.lanes[l as usize] = None;
        tier.destage_done(id);
        Ok(None)
    }

    /// No destage in flight.
    pub fn idle(&self) -> bool {
        self.lanes.iter().all(Option::is_none)
    }
}

/// The stack while a fio run drives it.
pub(super) struct StackRun<'a> {
    pub tier: &'a mut Tier,
    media: &'a MediaSpec,
    line: StackTimeline,
    pub stalled: VecDeque<Stalled>,
}

impl<'a> StackRun<'a> {
    pub fn new(stack: &'a mut HostStack, nsid: NsId, lba_bytes: u64) -> StackRun<'a> {
        let line = StackTimeline::new(&stack.tier, nsid, lba_bytes);
        StackRun { tier: &mut stack.tier, media: &stack.media, line, stalled: VecDeque::new() }
    }

    /// A fast-media transfer of `bytes` asked for at `now`; when it is done.
    pub fn media(&mut self, now: u64, bytes: u64, write: bool) -> u64 {
        self.line.media(self.media, now, bytes, write)
    }

    /// Drive commands at `now`; when the last completes (`now` if none).
    pub fn drive(&self, timing: &mut DeviceTiming, ctrl: &mut Controller, now: u64, ops: &[DriveOp]) -> Result<u64, Error> {
        self.line.drive(&mut |t, cmd| timing.submit(ctrl, t, cmd), now, ops)
    }

    /// Trims passed to the drive (byte ranges).
    pub fn trim(&self, timing: &mut DeviceTiming, ctrl: &mut Controller, now: u64, ranges: &[(u64, u64)]) -> Result<u64, Error> {
        self.line.trim(&mut |t, cmd| timing.submit(ctrl, t, cmd), now, ranges)
    }

    /// Start destages on free lanes while the tier wants them: (lane, completion of its
    /// first step) for each started.
    pub fn start_destages(&mut self, timing: &mut DeviceTiming, ctrl: &mut Controller, now: u64) -> Result<Vec<(u32, u64)>, Error> {
        self.line.start_destages(self.tier, self.media, &mut |t, cmd| timing.submit(ctrl, t, cmd), now)
    }

    /// Lane `l`'s step completed at `now`: the next step's completion, or None when the
    /// destage is done (its fast-media space is free).
    pub fn lane_step_done(&mut self, timing: &mut DeviceTiming, ctrl: &mut Controller, l: u32, now: u64) -> Result<Option<u64>, Error> {
        self.line.lane_step_done(self.tier, &mut |t, cmd| timing.submit(ctrl, t, cmd), l, now)
    }

    /// No destage in flight.
    pub fn idle(&self) -> bool {
        self.line.idle()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::fio::host_stack::tests::admission_order;
    use crate::engine::fio::tests::spec;
    use crate::engine::fio::{run, run_stack, CloneOut, RunOptions};
    use crate::host::media;
    use crate::host::tier::{Policy, TierConfig};
    use crate::spec::DriveSpec;

    fn p5316() -> (Controller, DeviceTiming) {
        let spec = DriveSpec::preset("intel-p5316-15.36t").unwrap().scaled(256).unwrap();
        let ctrl = Controller::new(spec, 1).unwrap();
        let timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).unwrap();
        (ctrl, timing)
    }

    fn stack(ctrl: &Controller, policy: Policy, capacity_bytes: u64) -> HostStack {
        let cfg = TierConfig {
            policy,
            capacity_bytes,
            high_watermark_pct: 80,
            low_watermark_pct: 60,
            destage_concurrency: 8,
            iu_bytes: 65536,
            drive_bytes: ctrl.attached(NsId(1)).unwrap().bytes(),
            stripe_bytes: 1 << 20,
            band_bytes: 64 << 20,
            host_op_pct: 20,
            area_bytes: 0,
        };
        assert_eq!(cfg.problems(), Vec::<String>::new());
        HostStack { media: media::preset("pmem").unwrap(), tier: Tier::new(cfg) }
    }

    fn opts() -> RunOptions {
        RunOptions { default_nsid: 1, idle_gc: false }
    }

    fn job(ctrl: &Controller, target: u64, extra: serde_json::Value) -> crate::workload::JobSpec {
        let mut s = spec(ctrl, extra);
        s.target_size_bytes = target;
        s
    }

    fn write_mean_ns(out: &[CloneOut]) -> f64 {
        let c = &out[0].write.clat;
        c.sum_ns as f64 / c.n as f64
    }

    #[test]
    fn every_byte_the_drive_sees_is_one_the_stack_sent() {
        for policy in [Policy::IuFill, Policy::Log] {
            let (mut ctrl, mut timing) = p5316();
            let mut st = stack(&ctrl, policy, 64 << 20);
            let extra = json!({"size_bytes": 256u64 << 20, "io_size_bytes": 512u64 << 20, "iodepth": 8});
            let j = job(&ctrl, st.tier.user_bytes(), extra);
            let before = ctrl.vendor_log().host_write_bytes;
            let out = run_stack(&mut ctrl, &mut timing, vec![j], &opts(), &mut |_| true, &mut st).unwrap();
            assert_eq!(out[0].write.io_bytes, 512 << 20);
            let c = &st.tier.counters;
            assert_eq!(c.host_write_bytes, 512 << 20);
            assert_eq!(ctrl.vendor_log().host_write_bytes - before, c.drive_write_bytes(), "{policy:?} {c:?}");
            assert!(c.destage_bytes > 0 && st.tier.occupancy_blocks() * 4096 <= 64 << 20);
            st.tier.check().unwrap();
            ctrl.check_full().unwrap();
        }
    }

    #[test]
    fn a_qd1_small_write_completes_at_fast_media_speed_until_the_tier_fills() {
        let (mut ctrl, mut timing) = p5316();
        let extra = json!({"size_bytes": 64u64 << 20, "io_size_bytes": 16u64 << 20, "iodepth": 1});
        let j = job(&ctrl, ctrl.attached(NsId(1)).unwrap().bytes(), extra.clone());
        let plain = run(&mut ctrl, &mut timing, vec![j], &opts(), 0, &mut |_| true).unwrap();
        let (mut ctrl, mut timing) = p5316();
        let mut st = stack(&ctrl, Policy::IuFill, 256 << 20);
        let j = job(&ctrl, st.tier.user_bytes(), extra);
        let shaped = run_stack(&mut ctrl, &mut timing, vec![j], &opts(), &mut |_| true, &mut st).unwrap();
        // 16 MiB fits the tier: every write is a PMem write (transfer + persist latency).
        let m = &st.media;
        let pmem_ns = (media::transfer_ns(4096, m.write_bytes_per_s.value) + m.write_latency_ns.value) as f64;
        assert!((write_mean_ns(&shaped) - pmem_ns).abs() < 0.05 * pmem_ns, "{} vs {pmem_ns}", write_mean_ns(&shaped));
        assert!(write_mean_ns(&plain) > 5.0 * pmem_ns, "the drive alone: {}", write_mean_ns(&plain));
        assert_eq!(st.tier.counters.stalls, 0);
    }

    /// A trim through either policy updates the tier's map on the fast media: it takes at
    /// least the media's write latency (a `log` trim, which sends the drive nothing, took
    /// 1 ns, and fio's report left the trims out: a run of 0 ms).
    #[test]
    fn a_trim_through_the_stack_takes_the_media_write_latency() {
        for policy in [Policy::IuFill, Policy::Log] {
            let (mut ctrl, mut timing) = p5316();
            let mut st = stack(&ctrl, policy, 64 << 20);
            let extra = json!({"rw": "randtrim", "directions": ["trim"], "size_bytes": 64u64 << 20, "io_size_bytes": 4u64 << 20});
            let j = job(&ctrl, st.tier.user_bytes(), extra);
            let out = run_stack(&mut ctrl, &mut timing, vec![j], &opts(), &mut |_| true, &mut st).unwrap();
            let c = &out[0].trim.clat;
            assert_eq!(c.n, 1024, "{policy:?}");
            assert!(c.min_ns >= st.media.write_latency_ns.value, "{policy:?}: a trim in {} ns", c.min_ns);
        }
    }

    /// Writes waiting for room are admitted in arrival order: a later write the tier could
    /// take at once (a smaller one, a hit on a block it holds, an IU that bypasses it) waits
    /// behind them. Before, it was offered to the tier first and overtook them.
    #[test]
    fn writes_waiting_for_room_are_admitted_in_arrival_order() {
        // Small writes mixed with larger ones (which bypass iu-fill's tier, and need more
        // of the log's room than a small one), deep queues, a small tier: writes wait.
        let bs = |big: u64| json!({"min": 4096, "max": big, "split": [[4096, 50], [big, 50]]});
        for (policy, cap, big) in [(Policy::IuFill, 1u64 << 20, 65536u64), (Policy::Log, 4 << 20, 262144)] {
            let (mut ctrl, mut timing) = p5316();
            let mut st = stack(&ctrl, policy, cap);
            let extra = json!({
                "size_bytes": 64u64 << 20, "io_size_bytes": 64u64 << 20, "iodepth": 32,
                "bs": {"read": bs(big), "write": bs(big), "trim": bs(big)},
            });
            let j = job(&ctrl, st.tier.user_bytes(), extra);
            admission_order();
            let out = run_stack(&mut ctrl, &mut timing, vec![j], &opts(), &mut |_| true, &mut st).unwrap();
            let order = admission_order();
            assert_eq!(order.len() as u64, out[0].write.total_ios, "{policy:?}: every write admitted once");
            assert!(st.tier.counters.stalls > 100, "{policy:?}: writes waited ({} stalls)", st.tier.counters.stalls);
            let overtaken = order.windows(2).filter(|w| w[1] < w[0]).count();
            assert_eq!(overtaken, 0, "{policy:?}: {overtaken} of {} writes admitted before an earlier one", order.len());
        }
    }

    #[test]
    fn a_stack_run_is_deterministic() {
        let go = || {
            let (mut ctrl, mut timing) = p5316();
            let mut st = stack(&ctrl, Policy::Log, 32 << 20);
            let j = job(&ctrl, st.tier.user_bytes(), json!({"size_bytes": 128u64 << 20, "io_size_bytes": 128u64 << 20, "iodepth": 4}));
            let out = run_stack(&mut ctrl, &mut timing, vec![j], &opts(), &mut |_| true, &mut st).unwrap();
            (serde_json::to_string(&out).unwrap(), st.tier.counters.clone(), ctrl.ftl_fingerprint().unwrap().l2p_xxh3)
        };
        let (a, b) = (go(), go());
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1);
        assert_eq!(a.2, b.2);
    }
}
