//! The per-connection writer thread for paced replies.
//!
//! Replies whose `Done::not_before` lies in the future are handed here. They wait in
//! a min-heap by (time, arrival) shared with the connection's reader; the writer
//! sleeps until the earliest is due and then sends every reply that has come due in
//! one vectored write. A reply held for a slow IO never delays the replies of faster
//! IOs on the same connection.
//!
//! The reader wakes the writer only when it adds a reply due *earlier* than the time
//! the writer is already sleeping until. With a steady model latency that is almost
//! never, so a paced IO costs a heap push under a lock, not a thread handoff: the
//! writer wakes once per due time, however many replies a burst adds.
//!
//! Memory is bounded: the reader blocks when the heap holds too many replies, which
//! pushes back on a client that floods requests faster than pacing lets replies out;
//! the bytes of held replies are charged to the server's in-flight budget.
//!
//! Deferred replies (`Done::deferred`) wait *parked*, outside the heap, until their
//! resolver gives a time (they then join the heap) or an error (an error reply replaces
//! them, due at once). Parked replies count against the same limit. When the connection
//! ends they are still waited for, at most `parked_grace`; a hard disconnect drops them.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::deferred::{Slot, Wake};
use crate::error::Errno;
use crate::proto::{encode_error_chunk_header, encode_simple_reply};
use crate::stats::Stats;
use crate::wire::{Body, OutBatch, OutMsg, Sink};

/// Most replies held at once per connection.
pub(crate) const MAX_HELD: usize = 4096;
/// Buffers kept for reuse per pool (a connection has two: its reader's and its
/// pacer's), the largest kept and the bytes kept: reuse spares the allocator and
/// page faults on the hot path, the caps bound what an idle connection retains.
pub(crate) const MAX_POOLED: usize = 32;
pub(crate) const MAX_POOLED_BUF: usize = 1 << 20;
pub(crate) const MAX_POOLED_BYTES: usize = 4 << 20;

/// Whether a finished buffer is worth keeping in `pool`.
pub(crate) fn keep_buffer(pool: &[Vec<u8>], b: &[u8]) -> bool {
    pool.len() < MAX_POOLED && b.len() <= MAX_POOLED_BUF && pool.iter().map(|v| v.len()).sum::<usize>() + b.len() <= MAX_POOLED_BYTES
}
/// Longest single sleep, so shutdown and abort are noticed promptly even if a
/// backend returns a far-future time.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// Timing knobs of the pacing writer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PacerConfig {
    /// Replies released later than this after their time count as late.
    pub late_threshold: Duration,
    /// Busy-wait this long before a due time instead of sleeping through it: timer
    /// wakeups cost tens of microseconds on a loaded machine, spinning costs CPU.
    pub spin: Duration,
    /// How long a connection that has ended waits for its parked (deferred) replies.
    pub parked_grace: Duration,
}

/// How to answer a deferred request that resolves to an error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrReply {
    pub cookie: u64,
    pub structured: bool,
    pub what: &'static str,
}

impl ErrReply {
    pub fn encode(&self, e: Errno) -> OutMsg {
        if self.structured {
            OutMsg::new(&encode_error_chunk_header(self.cookie, e.code(), self.what.len() as u16), Body::Static(self.what.as_bytes()))
        } else {
            OutMsg::new(&encode_simple_reply(e.code(), self.cookie), Body::None)
        }
    }
}

/// A deferred reply waiting for its resolution.
struct Parked {
    floor: Option<Instant>,
    msg: OutMsg,
    err: ErrReply,
}

struct Held {
    due: Instant,
    seq: u64,
    msg: OutMsg,
}
impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.due == o.due && self.seq == o.seq
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.due, o.seq).cmp(&(self.due, self.seq))
    }
}

/// State shared by the reader, the writer and the resolvers of deferred replies.
struct Queue {
    heap: BinaryHeap<Held>,
    /// Replies taken off the heap and being written (still count against the limit).
    sending: usize,
    /// When the sleeping writer will wake by itself; `None` if it is not asleep.
    writer_wakes_at: Option<Instant>,
    reader_waiting: bool,
    /// Buffers the writer has finished with, waiting to go back to the reader.
    pool: Vec<Vec<u8>>,
    /// Deferred replies by sequence number, waiting for their resolution.
    parked: BTreeMap<u64, Parked>,
    /// The reader is done (since when): send what is left, then exit.
    closed: bool,
    closed_at: Option<Instant>,
    /// The writer has exited (socket error or abort): no more sends.
    dead: bool,
}

struct Shared {
    q: Mutex<Queue>,
    stats: Arc<Stats>,
    /// Wakes the writer (earlier due time, close).
    writer_cv: Condvar,
    /// Wakes a reader waiting for room.
    reader_cv: Condvar,
    /// Hard disconnect: drop held replies instead of sending them.
    abort: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reader-side handle of a connection's paced writer.
pub(crate) struct Pacer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    seq: u64,
}

/// The writer is gone; the connection is broken.
#[derive(Debug)]
pub(crate) struct WriterGone;

fn full(q: &Queue) -> bool {
    q.heap.len() + q.sending + q.parked.len() >= MAX_HELD
}

/// Put a reply due at `due` into the heap, waking the writer if it sleeps past it.
fn push_due(shared: &Shared, q: &mut Queue, due: Instant, seq: u64, msg: OutMsg) {
    q.heap.push(Held { due, seq, msg });
    // Only a reply due before the writer's own wake-up time needs a wake-up call.
    if q.writer_wakes_at.is_some_and(|w| due < w) {
        q.writer_wakes_at = None;
        shared.writer_cv.notify_one();
    }
}

/// The outcome of a deferred reply: into the heap at its time, or an error reply now.
fn release(shared: &Shared, q: &mut Queue, seq: u64, p: Parked, r: Result<Instant, Errno>) {
    match r {
        Ok(t) => push_due(shared, q, p.floor.map_or(t, |f| f.max(t)), seq, p.msg),
        Err(e) => {
            shared.stats.error_replies.fetch_add(1, Relaxed);
            push_due(shared, q, Instant::now(), seq, p.err.encode(e));
        }
    }
}

/// Wait for room for one more reply; move finished buffers into `pool` on the way.
fn room<'a>(shared: &'a Shared, pool: &mut Vec<Vec<u8>>) -> Result<MutexGuard<'a, Queue>, WriterGone> {
    let mut q = shared.lock();
    while !q.dead && full(&q) {
        q.reader_waiting = true;
        q = shared.reader_cv.wait(q).unwrap_or_else(|e| e.into_inner());
    }
    if q.dead {
        return Err(WriterGone);
    }
    while let Some(b) = q.pool.pop() {
        if keep_buffer(pool, &b) {
            pool.push(b);
        }
    }
    Ok(q)
}

/// A resolver resolved parked reply `seq` (called from the resolving thread).
fn resolved(shared: &Shared, seq: u64, r: Result<Instant, Errno>) {
    let mut q = shared.lock();
    if q.dead {
        return;
    }
    if let Some(p) = q.parked.remove(&seq) {
        release(shared, &mut q, seq, p, r);
    }
}

impl Pacer {
    pub fn start<S: Sink>(
        sink: Arc<Mutex<S>>,
        shutting_down: Arc<AtomicBool>,
        stats: Arc<Stats>,
        cfg: PacerConfig,
    ) -> std::io::Result<Pacer> {
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue {
                heap: BinaryHeap::new(),
                sending: 0,
                parked: BTreeMap::new(),
                closed_at: None,
                writer_wakes_at: None,
                reader_waiting: false,
                pool: Vec::new(),
                closed: false,
                dead: false,
            }),
            writer_cv: Condvar::new(),
            reader_cv: Condvar::new(),
            abort: AtomicBool::new(false),
            stats: stats.clone(),
        });
        let sh = shared.clone();
        let thread =
            std::thread::Builder::new().name("nbd-pacer".into()).spawn(move || writer_main(sink, sh, shutting_down, stats, cfg))?;
        Ok(Pacer { shared, thread: Some(thread), seq: 0 })
    }

    /// Whether one more reply can be held right now without waiting.
    pub fn has_room(&self) -> bool {
        !full(&self.shared.lock())
    }

    /// Hand a reply over, waiting for room if needed. Finished buffers are moved into
    /// `pool` on the way (no extra locking).
    pub fn send(&mut self, due: Instant, msg: OutMsg, pool: &mut Vec<Vec<u8>>) -> Result<(), WriterGone> {
        self.seq += 1;
        let mut q = room(&self.shared, pool)?;
        push_due(&self.shared, &mut q, due, self.seq, msg);
        Ok(())
    }

    /// Hand over a deferred reply: parked until `slot` is resolved (or released at once
    /// if it already is). `err` says how to answer if it resolves to an error.
    pub fn send_deferred(
        &mut self,
        slot: &Slot,
        floor: Option<Instant>,
        msg: OutMsg,
        err: ErrReply,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<(), WriterGone> {
        self.seq += 1;
        let seq = self.seq;
        let mut q = room(&self.shared, pool)?;
        let p = Parked { floor, msg, err };
        // Lock order: this queue, then the slot (a resolver never holds both).
        let shared = Arc::downgrade(&self.shared);
        let wake: Wake = Box::new(move |r| {
            if let Some(sh) = shared.upgrade() {
                resolved(&sh, seq, r);
            }
        });
        match slot.take_or_park(wake) {
            Some(r) => release(&self.shared, &mut q, seq, p, r),
            None => {
                q.parked.insert(seq, p);
            }
        }
        Ok(())
    }

    /// End of connection. Graceful: held replies still go out at their times (at once
    /// if the server is shutting down). Hard: they are dropped.
    pub fn finish(mut self, hard: bool) {
        if hard {
            self.shared.abort.store(true, Relaxed);
        }
        self.close_and_join();
    }

    fn close_and_join(&mut self) {
        {
            let mut q = self.shared.lock();
            q.closed = true;
            q.closed_at.get_or_insert_with(Instant::now);
            self.shared.writer_cv.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        self.close_and_join();
    }
}

/// Ask the kernel for precise timer wakeups on this thread: the default 50 µs slack
/// would add that much jitter to every paced reply.
fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong);
    }
}

#[derive(Default)]
struct Lateness {
    paced: u64,
    late: u64,
    worst: u64,
    sum: u64,
}

impl Lateness {
    fn publish(&mut self, stats: &Stats) {
        if self.paced == 0 {
            return;
        }
        stats.replies_paced.fetch_add(self.paced, Relaxed);
        stats.replies_late.fetch_add(self.late, Relaxed);
        stats.late_ns_max.fetch_max(self.worst, Relaxed);
        stats.late_ns_sum.fetch_add(self.sum, Relaxed);
        *self = Lateness::default();
    }
}

/// What the writer thread owns besides the queue.
struct Writer<S: Sink> {
    sink: Arc<Mutex<S>>,
    shutting_down: Arc<AtomicBool>,
    stats: Arc<Stats>,
    cfg: PacerConfig,
    late_ns: u64,
    batch: OutBatch,
    done_bufs: Vec<Vec<u8>>,
    lat: Lateness,
}

fn writer_main<S: Sink>(sink: Arc<Mutex<S>>, shared: Arc<Shared>, shutting_down: Arc<AtomicBool>, stats: Arc<Stats>, cfg: PacerConfig) {
    tighten_timer_slack();
    let late_ns = cfg.late_threshold.as_nanos() as u64;
    let mut w =
        Writer { sink, shutting_down, stats, cfg, late_ns, batch: OutBatch::new(), done_bufs: Vec::new(), lat: Lateness::default() };
    let mut q = shared.lock();
    loop {
        if shared.abort.load(Relaxed) {
            break;
        }
        // 1. Take every reply that is due (all of them when the server is stopping).
        let now = Instant::now();
        w.take_due(&mut q, now);
        // 2. Send them in one write, without holding the lock.
        if !w.batch.is_empty() {
            let sent;
            (q, sent) = w.send_batch(&shared, q);
            if !sent {
                break;
            }
            continue;
        }
        if q.closed && q.heap.is_empty() {
            if q.parked.is_empty() {
                break;
            }
            // Parked replies whose resolution does not come within the grace are dropped.
            if q.closed_at.is_some_and(|c| now.saturating_duration_since(c) >= w.cfg.parked_grace) {
                q.parked.clear();
                break;
            }
        }
        // 3. Wait for the next due reply.
        q = w.wait(&shared, q, now);
    }
    q.dead = true;
    // Parked replies can no longer be sent (their charges go back to the budget).
    q.parked.clear();
    shared.reader_cv.notify_all();
    drop(q);
    w.lat.publish(&w.stats);
}

impl<S: Sink> Writer<S> {
    fn take_due(&mut self, q: &mut MutexGuard<'_, Queue>, now: Instant) {
        let hurry = self.shutting_down.load(Relaxed);
        while let Some(top) = q.heap.peek() {
            if top.due > now && !hurry {
                break;
            }
            let h = q.heap.pop().expect("peeked");
            let lateness = now.saturating_duration_since(h.due).as_nanos() as u64;
            self.lat.paced += 1;
            self.lat.late += (lateness > self.late_ns) as u64;
            self.lat.worst = self.lat.worst.max(lateness);
            self.lat.sum += lateness;
            self.batch.push(h.msg);
        }
    }

    /// Write the batch without holding the lock; give the buffers back to the pool and
    /// wake a reader waiting for room. False when the peer is gone.
    fn send_batch<'a>(&mut self, shared: &'a Shared, mut q: MutexGuard<'a, Queue>) -> (MutexGuard<'a, Queue>, bool) {
        q.sending = self.batch.len();
        drop(q);
        let done_bufs = &mut self.done_bufs;
        let res = if shared.abort.load(Relaxed) { Ok(()) } else { self.batch.flush(&self.sink, &mut |b| done_bufs.push(b)) };
        self.batch.msgs.clear();
        self.batch.bytes = 0;
        // Publish per batch so long-lived connections show up in live metrics.
        self.lat.publish(&self.stats);
        if let Err(e) = &res {
            if e.kind() == std::io::ErrorKind::TimedOut {
                self.stats.send_timeouts.fetch_add(1, Relaxed);
            }
            // The peer is gone: wake the reader out of its read too.
            self.sink.lock().unwrap_or_else(|e| e.into_inner()).close();
        }
        let mut q = shared.lock();
        q.sending = 0;
        for b in self.done_bufs.drain(..) {
            if keep_buffer(&q.pool, &b) {
                q.pool.push(b);
            }
        }
        if q.reader_waiting {
            q.reader_waiting = false;
            shared.reader_cv.notify_all();
        }
        (q, res.is_ok())
    }

    /// Spin if the next reply is due very soon, else sleep until shortly before it (or
    /// until woken for an earlier one, or a close).
    fn wait<'a>(&self, shared: &'a Shared, mut q: MutexGuard<'a, Queue>, now: Instant) -> MutexGuard<'a, Queue> {
        let next = q.heap.peek().map(|h| h.due);
        match next {
            Some(due) if due.saturating_duration_since(now) <= self.cfg.spin => {
                drop(q);
                while Instant::now() < due && !self.shutting_down.load(Relaxed) && !shared.abort.load(Relaxed) {
                    std::hint::spin_loop();
                }
                shared.lock()
            }
            _ => {
                let wake = match next {
                    Some(due) => (due - self.cfg.spin).min(now + MAX_SLEEP),
                    None => now + MAX_SLEEP,
                };
                q.writer_wakes_at = Some(wake);
                // Once closed, only a resolution of a parked reply can bring work.
                if !q.closed || !q.parked.is_empty() {
                    q = shared.writer_cv.wait_timeout(q, wake - now).unwrap_or_else(|e| e.into_inner()).0;
                } else {
                    drop(q);
                    std::thread::sleep(wake - now);
                    q = shared.lock();
                }
                q.writer_wakes_at = None;
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::VecSink;

    fn cfg(late_threshold: Duration) -> PacerConfig {
        PacerConfig { late_threshold, spin: Duration::from_micros(20), parked_grace: Duration::from_millis(300) }
    }

    #[test]
    fn releases_in_time_order_not_arrival_order() {
        let vs = VecSink::default();
        let sink = Arc::new(Mutex::new(vs.clone()));
        let stats = Arc::new(Stats::default());
        let mut p = Pacer::start(sink, Arc::new(AtomicBool::new(false)), stats.clone(), cfg(Duration::from_millis(5))).unwrap();
        let t0 = Instant::now();
        let mut pool = Vec::new();
        // Sent in order 1,2,3 but due in order 3,1,2.
        p.send(t0 + Duration::from_millis(30), OutMsg::new(&[1], Body::None), &mut pool).unwrap();
        p.send(t0 + Duration::from_millis(60), OutMsg::new(&[2], Body::None), &mut pool).unwrap();
        p.send(t0 + Duration::from_millis(5), OutMsg::new(&[3], Body::None), &mut pool).unwrap();
        p.finish(false);
        let elapsed = t0.elapsed();
        assert_eq!(*vs.bytes.lock().unwrap(), vec![3, 1, 2]);
        assert!(elapsed >= Duration::from_millis(60), "released early: {elapsed:?}");
        assert_eq!(stats.replies_paced.load(Relaxed), 3);
    }

    #[test]
    fn shutdown_releases_at_once_and_abort_drops() {
        let vs = VecSink::default();
        let sd = Arc::new(AtomicBool::new(false));
        let mut p = Pacer::start(Arc::new(Mutex::new(vs.clone())), sd.clone(), Arc::new(Stats::default()), cfg(Duration::ZERO)).unwrap();
        let t0 = Instant::now();
        p.send(t0 + Duration::from_secs(3600), OutMsg::new(&[7], Body::None), &mut Vec::new()).unwrap();
        sd.store(true, Relaxed);
        p.finish(false);
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(*vs.bytes.lock().unwrap(), vec![7]);

        let vs2 = VecSink::default();
        let mut p = Pacer::start(
            Arc::new(Mutex::new(vs2.clone())),
            Arc::new(AtomicBool::new(false)),
            Arc::new(Stats::default()),
            cfg(Duration::ZERO),
        )
        .unwrap();
        p.send(Instant::now() + Duration::from_secs(3600), OutMsg::new(&[8], Body::None), &mut Vec::new()).unwrap();
        let t1 = Instant::now();
        p.finish(true);
        assert!(t1.elapsed() < Duration::from_secs(5));
        assert!(vs2.bytes.lock().unwrap().is_empty());
    }

    #[test]
    fn a_full_heap_makes_the_reader_wait() {
        let vs = VecSink::default();
        let mut p = Pacer::start(
            Arc::new(Mutex::new(vs.clone())),
            Arc::new(AtomicBool::new(false)),
            Arc::new(Stats::default()),
            cfg(Duration::ZERO),
        )
        .unwrap();
        let t0 = Instant::now();
        let due = t0 + Duration::from_millis(200);
        let mut pool = Vec::new();
        for _ in 0..MAX_HELD {
            p.send(due, OutMsg::new(&[1], Body::None), &mut pool).unwrap();
        }
        assert!(!p.has_room());
        assert!(t0.elapsed() < Duration::from_millis(150), "filling should not block");
        p.send(t0, OutMsg::new(&[2], Body::None), &mut pool).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(200), "the send past the limit must wait for room");
        p.finish(false);
        let out = vs.bytes.lock().unwrap();
        assert_eq!(out.len(), MAX_HELD + 1);
        assert_eq!(*out.last().unwrap(), 2);
    }

    #[test]
    fn buffers_come_back_to_the_reader() {
        let vs = VecSink::default();
        let mut p =
            Pacer::start(Arc::new(Mutex::new(vs)), Arc::new(AtomicBool::new(false)), Arc::new(Stats::default()), cfg(Duration::ZERO))
                .unwrap();
        let mut pool = Vec::new();
        let due = Instant::now() + Duration::from_millis(1);
        p.send(due, OutMsg::new(&[1], Body::Buf(vec![0; 4096], 4096)), &mut pool).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        p.send(Instant::now(), OutMsg::new(&[2], Body::None), &mut pool).unwrap();
        assert_eq!(pool.len(), 1);
        assert_eq!(pool[0].len(), 4096);
        p.finish(false);
    }

    // Deferred replies (Done::deferred): parked until resolved, then paced.
    fn started(vs: &VecSink) -> (Pacer, Arc<Stats>) {
        let stats = Arc::new(Stats::default());
        let p =
            Pacer::start(Arc::new(Mutex::new(vs.clone())), Arc::new(AtomicBool::new(false)), stats.clone(), cfg(Duration::ZERO)).unwrap();
        (p, stats)
    }
    fn err(cookie: u64) -> ErrReply {
        ErrReply { cookie, structured: false, what: "x" }
    }
    fn deferred() -> (Arc<Slot>, crate::deferred::Resolver) {
        crate::deferred::pair()
    }

    #[test]
    fn a_deferred_reply_waits_for_its_resolution_and_does_not_hold_others() {
        let vs = VecSink::default();
        let (mut p, stats) = started(&vs);
        let mut pool = Vec::new();
        let (slot, res) = deferred();
        p.send_deferred(&slot, None, OutMsg::new(&[1], Body::None), err(1), &mut pool).unwrap();
        p.send(Instant::now(), OutMsg::new(&[2], Body::None), &mut pool).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(*vs.bytes.lock().unwrap(), vec![2], "the due reply goes; the deferred one waits");
        let t = Instant::now() + Duration::from_millis(20);
        res.at(t);
        p.finish(false);
        assert!(Instant::now() >= t, "a resolved reply is still paced to its time");
        assert_eq!(*vs.bytes.lock().unwrap(), vec![2, 1]);
        assert_eq!(stats.error_replies.load(Relaxed), 0);
    }

    #[test]
    fn resolutions_keep_time_order_and_the_floor() {
        let vs = VecSink::default();
        let (mut p, _) = started(&vs);
        let mut pool = Vec::new();
        let t0 = Instant::now();
        let (s1, r1) = deferred();
        let (s2, r2) = deferred();
        p.send_deferred(&s1, None, OutMsg::new(&[1], Body::None), err(1), &mut pool).unwrap();
        // Floor 80 ms: resolved for 10 ms, sent at 80 ms.
        p.send_deferred(&s2, Some(t0 + Duration::from_millis(80)), OutMsg::new(&[2], Body::None), err(2), &mut pool).unwrap();
        p.send(t0 + Duration::from_millis(50), OutMsg::new(&[3], Body::None), &mut pool).unwrap();
        // Resolved in the opposite order of their times.
        r2.at(t0 + Duration::from_millis(10));
        r1.at(t0 + Duration::from_millis(30));
        p.finish(false);
        assert!(t0.elapsed() >= Duration::from_millis(80));
        assert_eq!(*vs.bytes.lock().unwrap(), vec![1, 3, 2]);
    }

    #[test]
    fn resolved_before_it_is_parked_and_failed_or_dropped_resolvers() {
        let vs = VecSink::default();
        let (mut p, stats) = started(&vs);
        let mut pool = Vec::new();
        // Resolved before the reader hands the reply over.
        let (s1, r1) = deferred();
        r1.at(Instant::now());
        p.send_deferred(&s1, None, OutMsg::new(&[1], Body::None), err(1), &mut pool).unwrap();
        // A failed one and a dropped one become error replies (EIO, ESHUTDOWN).
        let (s2, r2) = deferred();
        let (s3, r3) = deferred();
        p.send_deferred(&s2, None, OutMsg::new(&[2], Body::None), err(22), &mut pool).unwrap();
        p.send_deferred(&s3, None, OutMsg::new(&[3], Body::None), err(33), &mut pool).unwrap();
        r2.fail(Errno::Io);
        drop(r3);
        p.finish(false);
        let out = vs.bytes.lock().unwrap().clone();
        assert_eq!(out[0], 1);
        let replies: Vec<(u32, u64)> = out[1..]
            .chunks(crate::proto::SIMPLE_REPLY_LEN)
            .map(|b| (u32::from_be_bytes(b[4..8].try_into().unwrap()), u64::from_be_bytes(b[8..16].try_into().unwrap())))
            .collect();
        assert_eq!(replies, vec![(Errno::Io.code(), 22), (Errno::Shutdown.code(), 33)]);
        assert_eq!(stats.error_replies.load(Relaxed), 2);
    }

    #[test]
    fn unresolved_at_disconnect_neither_hangs_nor_panics() {
        // Hard disconnect: dropped at once.
        let vs = VecSink::default();
        let (mut p, _) = started(&vs);
        let (s1, r1) = deferred();
        p.send_deferred(&s1, None, OutMsg::new(&[1], Body::None), err(1), &mut Vec::new()).unwrap();
        let t = Instant::now();
        p.finish(true);
        assert!(t.elapsed() < Duration::from_millis(200));
        r1.at(Instant::now()); // the connection is gone: ignored
                               // Graceful end, never resolved: waited for the grace (300 ms here), then dropped.
        let vs2 = VecSink::default();
        let (mut p, _) = started(&vs2);
        let (s2, r2) = deferred();
        p.send_deferred(&s2, None, OutMsg::new(&[2], Body::None), err(2), &mut Vec::new()).unwrap();
        p.send(Instant::now(), OutMsg::new(&[3], Body::None), &mut Vec::new()).unwrap();
        let t = Instant::now();
        p.finish(false);
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(3), "{waited:?}");
        assert_eq!(*vs2.bytes.lock().unwrap(), vec![3]);
        drop(r2);
        assert!(vs.bytes.lock().unwrap().is_empty());
    }

    #[test]
    fn parked_replies_count_against_the_limit() {
        let vs = VecSink::default();
        let (mut p, _) = started(&vs);
        let mut res = Vec::new();
        for i in 0..MAX_HELD {
            let (s, r) = deferred();
            p.send_deferred(&s, None, OutMsg::new(&[(i % 251) as u8], Body::None), err(0), &mut Vec::new()).unwrap();
            res.push(r);
        }
        assert!(!p.has_room());
        let t = Instant::now();
        let resolver = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            for r in res {
                r.at(Instant::now());
            }
        });
        p.send(Instant::now(), OutMsg::new(&[7], Body::None), &mut Vec::new()).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(90), "the reader waits for parked replies to resolve");
        resolver.join().unwrap();
        p.finish(false);
        assert_eq!(vs.bytes.lock().unwrap().len(), MAX_HELD + 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Any mix of immediate, paced and deferred replies, resolved in any order (some
        /// failed), from another thread: every request gets exactly one reply, failures as
        /// error replies, and none before its time.
        #[test]
        fn every_request_gets_exactly_one_reply(
            kinds in proptest::collection::vec((0u8..4, 0u64..3), 1..40),
            order_seed in 0u64..1000,
        ) {
            let vs = VecSink::default();
            let (mut p, _) = started(&vs);
            let t0 = Instant::now();
            let mut pool = Vec::new();
            let mut pending = Vec::new();
            for (i, &(kind, ms)) in kinds.iter().enumerate() {
                let cookie = i as u64 + 1;
                let ok = OutMsg::new(&encode_simple_reply(0, cookie), Body::None);
                match kind {
                    0 => p.send(t0, ok, &mut pool).unwrap(),
                    1 => p.send(t0 + Duration::from_millis(ms), ok, &mut pool).unwrap(),
                    _ => {
                        let (s, r) = deferred();
                        p.send_deferred(&s, None, ok, err(cookie), &mut pool).unwrap();
                        pending.push((cookie, kind == 3, ms, r));
                    }
                }
            }
            // A deterministic shuffle of the resolution order.
            let n = pending.len();
            for i in 0..n {
                pending.swap(i, (order_seed as usize * 7 + i * 13) % n.max(1));
            }
            let failed: Vec<u64> = pending.iter().filter(|x| x.1).map(|x| x.0).collect();
            let th = std::thread::spawn(move || {
                for (_, fail, ms, r) in pending {
                    if fail { r.fail(Errno::Io) } else { r.at(t0 + Duration::from_millis(ms)) }
                }
            });
            th.join().unwrap();
            p.finish(false);
            let out = vs.bytes.lock().unwrap().clone();
            let mut got: Vec<(u64, u32)> = out
                .chunks(crate::proto::SIMPLE_REPLY_LEN)
                .map(|b| (u64::from_be_bytes(b[8..16].try_into().unwrap()), u32::from_be_bytes(b[4..8].try_into().unwrap())))
                .collect();
            got.sort();
            let want: Vec<(u64, u32)> = (1..=kinds.len() as u64)
                .map(|c| (c, if failed.contains(&c) { Errno::Io.code() } else { 0 }))
                .collect();
            proptest::prop_assert_eq!(got, want);
            let max_ms = kinds.iter().filter(|k| k.0 != 0 && k.0 != 3).map(|k| k.1).max().unwrap_or(0);
            proptest::prop_assert!(t0.elapsed() >= Duration::from_millis(max_ms));
        }
    }
}
