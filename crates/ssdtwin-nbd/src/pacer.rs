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

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::stats::Stats;
use crate::wire::{OutBatch, OutMsg, Sink};

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

/// State shared by the reader and the writer.
struct Queue {
    heap: BinaryHeap<Held>,
    /// Replies taken off the heap and being written (still count against the limit).
    sending: usize,
    /// When the sleeping writer will wake by itself; `None` if it is not asleep.
    writer_wakes_at: Option<Instant>,
    reader_waiting: bool,
    /// Buffers the writer has finished with, waiting to go back to the reader.
    pool: Vec<Vec<u8>>,
    /// The reader is done: send what is left, then exit.
    closed: bool,
    /// The writer has exited (socket error or abort): no more sends.
    dead: bool,
}

struct Shared {
    q: Mutex<Queue>,
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
    q.heap.len() + q.sending >= MAX_HELD
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
                writer_wakes_at: None,
                reader_waiting: false,
                pool: Vec::new(),
                closed: false,
                dead: false,
            }),
            writer_cv: Condvar::new(),
            reader_cv: Condvar::new(),
            abort: AtomicBool::new(false),
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
        let mut q = self.shared.lock();
        while !q.dead && full(&q) {
            q.reader_waiting = true;
            q = self.shared.reader_cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        if q.dead {
            return Err(WriterGone);
        }
        while let Some(b) = q.pool.pop() {
            if keep_buffer(pool, &b) {
                pool.push(b);
            }
        }
        self.seq += 1;
        q.heap.push(Held { due, seq: self.seq, msg });
        // Only a reply due before the writer's own wake-up time needs a wake-up call.
        if q.writer_wakes_at.is_some_and(|w| due < w) {
            q.writer_wakes_at = None;
            self.shared.writer_cv.notify_one();
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
            break;
        }
        // 3. Wait for the next due reply.
        q = w.wait(&shared, q, now);
    }
    q.dead = true;
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
                if !q.closed {
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
    use crate::wire::{Body, VecSink};

    fn cfg(late_threshold: Duration) -> PacerConfig {
        PacerConfig { late_threshold, spin: Duration::from_micros(20) }
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
}
