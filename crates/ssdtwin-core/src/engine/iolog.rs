//! fio's I/O logs in the engine (docs/fio.md §2.10): recording the issued I/Os for
//! `write_iolog`, and replaying a parsed trace for `read_iolog` with fio's pacing.
//!
//! Both travel between Python and the engine as packed little-endian u64 records (`bytes`
//! through the binding, 8 bytes per field): a list of Python ints per I/O would take ~10x
//! the memory of the trace itself.

use std::collections::VecDeque;

pub use crate::workload::trace::{Packed, ReplayIo, ReplaySource, ReplayTrace};
use crate::workload::{Ddir, Io};

/// Fields of one recorded I/O, in record order: issue time (ns, virtual), ddir (0 read,
/// 1 write, 2 trim), offset and length in bytes.
pub const LOG_RECORD: [&str; 4] = ["issue_ns", "ddir", "offset_bytes", "len_bytes"];
pub const LOG_FIELDS: usize = LOG_RECORD.len();
/// Fields of one replayed I/O, in record order: kind (the ddir, with [`REPLAY_ABSOLUTE`]),
/// offset and length in bytes, the delay before it and an extra delay after that (fio's
/// waits for the lines between two I/Os that issue nothing), see [`Replay::hold_until`].
pub const REPLAY_RECORD: [&str; 5] = ["kind", "offset_bytes", "len_bytes", "delay_ns", "extra_ns"];
pub const REPLAY_FIELDS: usize = REPLAY_RECORD.len();
/// Bit of a replay record's kind: its delay is a time since the clone's start (a version 2
/// `wait`), not a gap after the previous issue.
pub const REPLAY_ABSOLUTE: u64 = 1 << 8;
/// Bit of a replay record's kind: the record issues nothing and holds the job until its
/// time (the trace's lines after its last I/O: fio waits a closing `close`, a trailing sync
/// or `wait` before the job ends). Only the last record may have it; its ddir, offset and
/// length are 0.
pub const REPLAY_TAIL: u64 = 1 << 9;
/// The longest wait a replayed record holds its I/O for (2^62 ns, 146 years: far past the
/// run limit, and far from u64::MAX, which reads as "never").
pub const MAX_REPLAY_WAIT_NS: u64 = 1 << 62;
/// I/Os one clone may record for `write_iolog`: 32 bytes each, 1 GiB in all.
pub const MAX_LOG_IOS: usize = 1 << 25;

/// The issued I/Os of one clone, in issue order (`write_iolog`).
#[derive(Default)]
pub struct IoLog {
    records: Packed,
    count: usize,
}

impl IoLog {
    /// Record `io` issued at `now`; an error once the log is full ([`MAX_LOG_IOS`]).
    pub fn record(&mut self, now: u64, io: Io) -> Result<(), String> {
        if self.count >= MAX_LOG_IOS {
            return Err(format!("write_iolog: more than {MAX_LOG_IOS} I/Os to record (32 bytes each, kept until the run ends)"));
        }
        self.count += 1;
        self.records.push(&[now, io.ddir.index() as u64, io.offset, io.len]);
        Ok(())
    }

    pub fn into_packed(self) -> Packed {
        self.records
    }
}

/// A record of a packed trace as the engine's I/O.
pub fn unpack(trace: &Packed, i: usize) -> ReplayIo {
    let f = |k| trace.field(i, REPLAY_FIELDS, k);
    let kind = f(0);
    ReplayIo {
        ddir: Ddir::ALL[(kind & 0xff) as usize % 3],
        offset: f(1),
        len: f(2),
        delay_ns: f(3),
        extra_ns: f(4),
        absolute: kind & REPLAY_ABSOLUTE != 0,
        tail: kind & REPLAY_TAIL != 0,
    }
}

/// Append `io` to a packed trace.
pub fn pack(trace: &mut Packed, io: &ReplayIo) {
    let kind = io.ddir.index() as u64 | if io.absolute { REPLAY_ABSOLUTE } else { 0 } | if io.tail { REPLAY_TAIL } else { 0 };
    trace.push(&[kind, io.offset, io.len, io.delay_ns, io.extra_ns]);
}

/// A trace held in memory (the job's `replay` records), read in order.
struct InMemory {
    trace: Packed,
    next: usize,
    len: usize,
}

impl ReplaySource for InMemory {
    fn next_io(&mut self) -> Result<Option<ReplayIo>, String> {
        if self.next >= self.len {
            return Ok(None);
        }
        self.next += 1;
        Ok(Some(unpack(&self.trace, self.next - 1)))
    }

    fn total_ios(&self) -> Option<u64> {
        let tail = self.len > 0 && unpack(&self.trace, self.len - 1).tail;
        Some(self.len as u64 - tail as u64)
    }
}

/// Why record `i` cannot go to a target of `target_bytes` with `lba`-byte blocks.
fn misfit(i: u64, io: &ReplayIo, target_bytes: u64, lba: u64) -> Option<String> {
    let (offset, n) = (io.offset, io.len);
    (n == 0 || offset % lba != 0 || n % lba != 0 || offset.checked_add(n).is_none_or(|end| end > target_bytes))
        .then(|| format!("replay record {i}: {n} bytes at {offset} do not fit the target ({target_bytes} bytes of {lba}-byte blocks)"))
}

/// When a drawn I/O may go: its delay, the extra after it, whether the delay counts from
/// the clone's start.
#[derive(Copy, Clone)]
struct Pace {
    delay_ns: u64,
    extra_ns: u64,
    absolute: bool,
}

/// Replay state of one clone.
pub struct Replay {
    source: Box<dyn ReplaySource>,
    target_bytes: u64,
    lba: u64,
    /// Records drawn so far (the engine draws a few I/Os ahead of issuing them).
    drawn: u64,
    /// The pacing of the drawn I/Os not issued yet, oldest (the next to issue) first.
    ahead: VecDeque<Pace>,
    /// The trace's tail ([`REPLAY_TAIL`]), once drawn: the job ends no earlier than its time.
    tail: Option<Pace>,
    /// The source has nothing more (it is not asked again).
    drained: bool,
    start_ns: Option<u64>,
    last_issue_ns: u64,
    /// When the front record may go, once computed (it depends on when it was first asked).
    ready_at: Option<u64>,
}

impl Replay {
    /// A trace in memory, every record checked against a target of `target_bytes` with
    /// `lba`-byte blocks before the run.
    pub fn new(trace: ReplayTrace, target_bytes: u64, lba: u64) -> Result<Replay, String> {
        let bytes = trace.records.0.len();
        if bytes % (REPLAY_FIELDS * 8) != 0 {
            return Err(format!("replay trace of {bytes} bytes is not a whole number of {}-byte records", REPLAY_FIELDS * 8));
        }
        let len = trace.records.records(REPLAY_FIELDS);
        for i in 0..len {
            let kind = trace.records.field(i, REPLAY_FIELDS, 0);
            if kind & !(REPLAY_ABSOLUTE | REPLAY_TAIL) > 2 {
                return Err(format!("replay record {i}: kind {kind} is not a direction"));
            }
            let io = unpack(&trace.records, i);
            if io.tail {
                if i + 1 != len || io.offset != 0 || io.len != 0 || kind & 0xff != 0 {
                    return Err(format!(
                        "replay record {i}: a tail (kind bit {REPLAY_TAIL}) is the last record, with kind, offset and length 0"
                    ));
                }
                continue;
            }
            if let Some(why) = misfit(i as u64, &io, target_bytes, lba) {
                return Err(why);
            }
        }
        Ok(Replay::streamed(Box::new(InMemory { trace: trace.records, next: 0, len }), target_bytes, lba))
    }

    /// A trace read as the run goes (a file streamed in bounded memory); each record is
    /// checked as it is drawn.
    pub fn streamed(source: Box<dyn ReplaySource>, target_bytes: u64, lba: u64) -> Replay {
        Replay {
            source,
            target_bytes,
            lba,
            drawn: 0,
            ahead: VecDeque::new(),
            tail: None,
            drained: false,
            start_ns: None,
            last_issue_ns: 0,
            ready_at: None,
        }
    }

    /// The trace's records: the I/Os the replay issues (its progress total), when known
    /// before the run.
    pub fn records(&self) -> Option<u64> {
        self.source.total_ios()
    }

    /// The next I/O of the trace, None at its end (a tail is kept for [`Replay::hold_until`]).
    pub fn draw(&mut self) -> Result<Option<Io>, String> {
        if self.drained {
            return Ok(None);
        }
        let Some(io) = self.source.next_io()? else {
            self.drained = true;
            return Ok(None);
        };
        if io.tail {
            self.drained = true;
            self.tail = Some(Pace { delay_ns: io.delay_ns, extra_ns: io.extra_ns, absolute: io.absolute });
            return Ok(None);
        }
        if let Some(why) = misfit(self.drawn, &io, self.target_bytes, self.lba) {
            return Err(why);
        }
        self.drawn += 1;
        self.ahead.push_back(Pace { delay_ns: io.delay_ns, extra_ns: io.extra_ns, absolute: io.absolute });
        Ok(Some(Io { ddir: io.ddir, offset: io.offset, len: io.len }))
    }

    /// When the next I/O to issue is held back by the trace's timing: the time it may go,
    /// if later than `now`. Once every I/O was issued, the time the trace's tail holds the
    /// job until (fio waits it as it would before another I/O), if later than `now`.
    pub fn hold_until(&mut self, now: u64) -> Option<u64> {
        // The clone's first request comes at its start: fio's clock for the trace.
        let start = match self.start_ns {
            Some(t) => t,
            None => {
                self.start_ns = Some(now);
                self.last_issue_ns = now;
                now
            }
        };
        let at = match self.ready_at {
            Some(at) => at,
            None => {
                let p = match self.ahead.front() {
                    Some(p) => *p,
                    None if self.drained => self.tail?,
                    None => return None,
                };
                // A trace's gaps times a huge --time-scale saturate at u64::MAX, which the
                // event loop reads as "never": the rest of the trace was dropped without a
                // word. Held below it, such a wait passes the run's time limit, an error.
                let (delay, extra) = (p.delay_ns.min(MAX_REPLAY_WAIT_NS), p.extra_ns.min(MAX_REPLAY_WAIT_NS));
                let at = if p.absolute {
                    now.max(start.saturating_add(delay))
                } else {
                    now.max(self.last_issue_ns.saturating_add(delay)).saturating_add(extra)
                };
                self.ready_at = Some(at);
                at
            }
        };
        (at > now).then_some(at)
    }

    /// The front I/O was issued at `now`.
    pub fn issued(&mut self, now: u64) {
        self.ahead.pop_front();
        self.last_issue_ns = now;
        self.ready_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(records: &[[u64; REPLAY_FIELDS]]) -> ReplayTrace {
        let mut p = Packed::default();
        for r in records {
            p.push(r);
        }
        ReplayTrace { records: p }
    }

    #[test]
    fn records_outside_the_target_are_refused() {
        assert!(Replay::new(trace(&[[1, 4096, 4096, 0, 0]]), 8192, 512).is_ok());
        for bad in [[1, 4096, 8192, 0, 0], [1, 100, 4096, 0, 0], [1, 0, 0, 0, 0], [3, 0, 4096, 0, 0], [1, u64::MAX - 511, 512, 0, 0]] {
            assert!(Replay::new(trace(&[bad]), 8192, 512).is_err(), "{bad:?}");
        }
        let mut odd = trace(&[[1, 0, 4096, 0, 0]]);
        odd.records.0.pop();
        assert!(Replay::new(odd, 8192, 512).is_err());
    }

    #[test]
    fn pacing_follows_fio_iolog_delay() {
        // Gaps after the previous issue; a late request issues at once; extra delays (file
        // actions between I/Os) are waited in full; an absolute wait counts from the start.
        let t = trace(&[
            [0, 0, 512, 0, 0],
            [0, 512, 512, 100, 0],
            [1, 0, 512, 50, 30],
            [1, 512, 512, 1000, 0],
            [REPLAY_ABSOLUTE, 0, 512, 5000, 0],
        ]);
        let mut r = Replay::new(t, 1 << 20, 512).unwrap();
        let mut times = Vec::new();
        let mut now = 1000;
        while r.draw().unwrap().is_some() {
            if let Some(at) = r.hold_until(now) {
                assert_eq!(r.hold_until(at), None, "the wake-up time stays fixed");
                now = at;
            }
            times.push(now);
            r.issued(now);
            now += 20; // the next request comes 20 ns after each issue
        }
        assert_eq!(times, vec![1000, 1100, 1100 + 50 + 30, 1180 + 1000, 6000]);
        assert_eq!(r.hold_until(now), None, "no tail: the job ends with its last I/O");
    }

    /// A trace's tail holds the job after its last I/O, paced like an I/O; it issues
    /// nothing, is not counted as an I/O, and must be the last record.
    #[test]
    fn a_tail_holds_the_job_after_the_last_io() {
        let t = |tail_kind| trace(&[[1, 0, 512, 0, 0], [1, 512, 512, 100, 0], [tail_kind, 0, 0, 1000, 7]]);
        let mut r = Replay::new(t(REPLAY_TAIL), 1 << 20, 512).unwrap();
        assert_eq!(r.records(), Some(2));
        let mut issued = 0;
        let mut now = 0;
        while r.draw().unwrap().is_some() {
            if let Some(at) = r.hold_until(now) {
                now = at;
            }
            r.issued(now);
            issued += 1;
        }
        assert_eq!((issued, now), (2, 100));
        assert_eq!(r.hold_until(150), Some(100 + 1000 + 7), "its delay after the last issue, then the extra");
        assert_eq!(r.draw().unwrap(), None);
        assert_eq!(r.hold_until(1107), None);
        let mut absolute = Replay::new(t(REPLAY_TAIL | REPLAY_ABSOLUTE), 1 << 20, 512).unwrap();
        while absolute.draw().unwrap().is_some() {
            let at = absolute.hold_until(0).unwrap_or(0);
            absolute.issued(at);
        }
        assert_eq!(absolute.hold_until(100), Some(1000), "a version 2 wait counts from the start");
        let mut early = trace(&[[REPLAY_TAIL, 0, 0, 5, 0]]);
        early.records.push(&[1, 0, 512, 0, 0]);
        let e = Replay::new(early, 1 << 20, 512).err().expect("a tail before an I/O is refused");
        assert!(e.contains("a tail (kind bit 512) is the last record"), "{e}");
        assert!(Replay::new(trace(&[[REPLAY_TAIL | 1, 0, 0, 5, 0]]), 1 << 20, 512).is_err());
    }

    mod engine {
        //! The engine with write_iolog and read_iolog: the recorded sequence is the issued
        //! one, and replaying it issues the same I/Os.
        use super::super::*;
        use crate::engine::fio::tests::{drive, spec as engine_spec};
        use crate::engine::fio::{run, CloneOut, RunOptions};
        use crate::nvme::Controller;
        use crate::workload::JobSpec;
        use serde_json::{json, Value};

        /// A 4 KiB random read/write clone over the first MiB of namespace 1 at QD 4 (the
        /// engine tests' clone, made mixed).
        fn spec(ctrl: &Controller, extra: Value) -> JobSpec {
            let mut v = json!({"rw": "randrw", "directions": ["read", "write"]});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            engine_spec(ctrl, v)
        }

        fn run_one(s: JobSpec) -> CloneOut {
            let (mut ctrl, mut timing) = drive();
            let opts = RunOptions { default_nsid: 1, idle_gc: true };
            run(&mut ctrl, &mut timing, vec![s], &opts, 0, &mut |_| true).unwrap().remove(0)
        }

        fn recorded(out: &CloneOut) -> Vec<[u64; LOG_FIELDS]> {
            let p = out.iolog.as_ref().expect("iolog asked for");
            (0..p.records(LOG_FIELDS)).map(|i| std::array::from_fn(|k| p.field(i, LOG_FIELDS, k))).collect()
        }

        #[test]
        fn the_log_is_the_issued_sequence_and_replays_to_the_same_ios() {
            let (ctrl, _) = drive();
            let out = run_one(spec(&ctrl, json!({"iolog": true})));
            let log = recorded(&out);
            assert_eq!(log.len() as u64, out.read.total_ios + out.write.total_ios);
            assert!(log.windows(2).all(|w| w[0][0] <= w[1][0]), "issue order");
            let reads: u64 = log.iter().filter(|r| r[1] == 0).map(|r| r[3]).sum();
            assert_eq!(reads, out.read.io_bytes);
            assert!(run_one(spec(&ctrl, json!({}))).iolog.is_none(), "nothing recorded unless asked");

            // Replay with the recorded gaps: same I/Os, and at QD 4 the same issue times
            // (each I/O waits for its gap after the previous issue, never for a slot here).
            let mut trace = Packed::default();
            let mut last = 0;
            for r in &log {
                trace.push(&[r[1], r[2], r[3], r[0] - last, 0]);
                last = r[0];
            }
            let records: Vec<u64> = trace.0.iter().map(|&b| b as u64).collect();
            let replay = run_one(spec(&ctrl, json!({"iolog": true, "replay": {"records": records}})));
            let again = recorded(&replay);
            let ios = |l: &[[u64; 4]]| l.iter().map(|r| (r[1], r[2], r[3])).collect::<Vec<_>>();
            assert_eq!(ios(&again), ios(&log));
            assert_eq!(again.last().unwrap()[0], log.last().unwrap()[0], "paced like the original");
            assert_eq!(replay.write.io_bytes, out.write.io_bytes);
        }

        #[test]
        fn a_bad_trace_is_an_error_before_any_io() {
            let (mut ctrl, mut timing) = drive();
            let mut trace = Packed::default();
            trace.push(&[1, 0, 4096, 0, 0]);
            trace.push(&[1, 1 << 50, 4096, 0, 0]);
            let records: Vec<u64> = trace.0.iter().map(|&b| b as u64).collect();
            let s = spec(&ctrl, json!({"replay": {"records": records}}));
            let before = ctrl.state().smart.host_write_commands;
            let opts = RunOptions { default_nsid: 1, idle_gc: true };
            let err = run(&mut ctrl, &mut timing, vec![s], &opts, 0, &mut |_| true).unwrap_err();
            assert!(err.to_string().contains("replay record 1"), "{err}");
            assert_eq!(ctrl.state().smart.host_write_commands, before);
        }
    }
}
