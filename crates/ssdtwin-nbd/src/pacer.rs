//! The per-connection writer thread for paced replies.
//!
//! Replies whose `Done::not_before` lies in the future are handed here. The thread
//! keeps them in a min-heap by (time, arrival) and, each time it wakes, sends every
//! reply that has come due in one vectored write. A reply held for a slow IO never
//! delays the replies of faster IOs on the same connection.
//!
//! Memory is bounded: the reader reserves a slot (count and bytes) before handing a
//! reply over and blocks when the limits are reached, which pushes back on a client
//! that floods requests faster than the backend's pacing lets replies out.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::stats::Stats;
use crate::wire::{OutBatch, OutMsg, Sink};

/// Most replies held at once per connection.
pub(crate) const MAX_HELD: usize = 4096;
/// Most reply bytes held at once per connection (a few maximum-size reads).
pub(crate) const MAX_HELD_BYTES: usize = 128 << 20;
/// Buffers kept for reuse per connection, and the largest kept: reuse spares the
/// allocator and page faults on the hot path, the caps bound idle memory.
pub(crate) const MAX_POOLED: usize = 32;
pub(crate) const MAX_POOLED_BUF: usize = 4 << 20;

/// Whether a finished buffer is worth keeping in a pool of `pooled` buffers.
pub(crate) fn keep_buffer(pooled: usize, b: &[u8]) -> bool {
    pooled < MAX_POOLED && b.len() <= MAX_POOLED_BUF
}
/// Longest single sleep, so shutdown and abort are noticed promptly even if a
/// backend returns a far-future time.
const MAX_SLEEP: Duration = Duration::from_millis(50);

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

struct Gate {
    count: usize,
    bytes: usize,
    /// Buffers the writer has finished with, waiting to go back to the reader.
    pool: Vec<Vec<u8>>,
    reader_waiting: bool,
    /// The writer has exited (socket error or abort): no more sends.
    dead: bool,
}

struct Shared {
    gate: Mutex<Gate>,
    cv: Condvar,
    /// Hard disconnect: drop held replies instead of sending them.
    abort: AtomicBool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reader-side handle of a connection's paced writer.
pub(crate) struct Pacer {
    tx: Option<mpsc::Sender<Held>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    seq: u64,
}

/// The writer is gone; the connection is broken.
#[derive(Debug)]
pub(crate) struct WriterGone;

impl Pacer {
    pub fn start<S: Sink>(
        sink: Arc<Mutex<S>>,
        shutting_down: Arc<AtomicBool>,
        stats: Arc<Stats>,
        late_threshold: Duration,
    ) -> std::io::Result<Pacer> {
        let shared = Arc::new(Shared {
            gate: Mutex::new(Gate { count: 0, bytes: 0, pool: Vec::new(), reader_waiting: false, dead: false }),
            cv: Condvar::new(),
            abort: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("nbd-pacer".into())
            .spawn(move || writer_main(rx, sink, sh, shutting_down, stats, late_threshold))?;
        Ok(Pacer { tx: Some(tx), shared, thread: Some(thread), seq: 0 })
    }

    /// Whether `bytes` more can be held right now without waiting.
    pub fn has_room(&self, bytes: usize) -> bool {
        let g = self.shared.lock();
        g.count == 0 || (g.count < MAX_HELD && g.bytes + bytes <= MAX_HELD_BYTES)
    }

    /// Hand a reply over, waiting for room if needed. Finished buffers are moved into
    /// `pool` on the way (no extra locking).
    pub fn send(&mut self, due: Instant, msg: OutMsg, pool: &mut Vec<Vec<u8>>) -> Result<(), WriterGone> {
        let bytes = msg.wire_len();
        {
            let mut g = self.shared.lock();
            while !g.dead && g.count > 0 && (g.count >= MAX_HELD || g.bytes + bytes > MAX_HELD_BYTES) {
                g.reader_waiting = true;
                g = self.shared.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            if g.dead {
                return Err(WriterGone);
            }
            g.count += 1;
            g.bytes += bytes;
            while pool.len() < MAX_POOLED {
                match g.pool.pop() {
                    Some(b) => pool.push(b),
                    None => break,
                }
            }
        }
        self.seq += 1;
        let tx = self.tx.as_ref().ok_or(WriterGone)?;
        tx.send(Held { due, seq: self.seq, msg }).map_err(|_| WriterGone)
    }

    /// End of connection. Graceful: held replies still go out at their times (at once
    /// if the server is shutting down). Hard: they are dropped.
    pub fn finish(mut self, hard: bool) {
        if hard {
            self.shared.abort.store(true, Relaxed);
        }
        self.tx = None; // closes the channel; the writer drains and exits
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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

fn writer_main<S: Sink>(
    rx: mpsc::Receiver<Held>,
    sink: Arc<Mutex<S>>,
    shared: Arc<Shared>,
    shutting_down: Arc<AtomicBool>,
    stats: Arc<Stats>,
    late_threshold: Duration,
) {
    tighten_timer_slack();
    let late_ns = late_threshold.as_nanos() as u64;
    let mut heap: BinaryHeap<Held> = BinaryHeap::new();
    let mut batch = OutBatch::new();
    let mut done_bufs: Vec<Vec<u8>> = Vec::new();
    let mut open = true;
    let (mut paced, mut late, mut worst) = (0u64, 0u64, 0u64);
    loop {
        if shared.abort.load(Relaxed) {
            break;
        }
        // 1. Wait for the next reply to arrive or the earliest held one to come due.
        let hurry = shutting_down.load(Relaxed);
        match heap.peek() {
            None if !open => break,
            None => match rx.recv() {
                Ok(h) => heap.push(h),
                Err(_) => open = false,
            },
            Some(top) => {
                let now = Instant::now();
                if top.due > now && !hurry {
                    let wait = (top.due - now).min(MAX_SLEEP);
                    if open {
                        match rx.recv_timeout(wait) {
                            Ok(h) => heap.push(h),
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => open = false,
                        }
                    } else {
                        std::thread::sleep(wait);
                    }
                }
            }
        }
        // 2. Take everything else already queued.
        while open {
            match rx.try_recv() {
                Ok(h) => heap.push(h),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        // 3. Send all that are due, in one write.
        let now = Instant::now();
        let hurry = shutting_down.load(Relaxed);
        while let Some(top) = heap.peek() {
            if top.due > now && !hurry {
                break;
            }
            let h = heap.pop().expect("peeked");
            let lateness = now.saturating_duration_since(h.due).as_nanos() as u64;
            paced += 1;
            if lateness > late_ns {
                late += 1;
            }
            worst = worst.max(lateness);
            batch.push(h.msg);
        }
        if batch.is_empty() {
            continue;
        }
        let (n, bytes) = (batch.len(), batch.bytes);
        let res = if shared.abort.load(Relaxed) {
            Ok(())
        } else {
            batch.flush(&sink, &mut |b| done_bufs.push(b))
        };
        batch.msgs.clear();
        batch.bytes = 0;
        {
            let mut g = shared.lock();
            g.count -= n;
            g.bytes -= bytes;
            for b in done_bufs.drain(..) {
                if keep_buffer(g.pool.len(), &b) {
                    g.pool.push(b);
                }
            }
            if g.reader_waiting {
                g.reader_waiting = false;
                shared.cv.notify_all();
            }
        }
        if res.is_err() {
            // The peer is gone: wake the reader out of its read too.
            sink.lock().unwrap_or_else(|e| e.into_inner()).close();
            break;
        }
    }
    {
        let mut g = shared.lock();
        g.dead = true;
        shared.cv.notify_all();
    }
    stats.replies_paced.fetch_add(paced, Relaxed);
    stats.replies_late.fetch_add(late, Relaxed);
    stats.late_ns_max.fetch_max(worst, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Body, VecSink};

    #[test]
    fn releases_in_time_order_not_arrival_order() {
        let vs = VecSink::default();
        let sink = Arc::new(Mutex::new(vs.clone()));
        let stats = Arc::new(Stats::default());
        let mut p =
            Pacer::start(sink, Arc::new(AtomicBool::new(false)), stats.clone(), Duration::from_millis(5)).unwrap();
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
        let mut p = Pacer::start(Arc::new(Mutex::new(vs.clone())), sd.clone(), Arc::new(Stats::default()), Duration::ZERO)
            .unwrap();
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
            Duration::ZERO,
        )
        .unwrap();
        p.send(Instant::now() + Duration::from_secs(3600), OutMsg::new(&[8], Body::None), &mut Vec::new()).unwrap();
        let t1 = Instant::now();
        p.finish(true);
        assert!(t1.elapsed() < Duration::from_secs(5));
        assert!(vs2.bytes.lock().unwrap().is_empty());
    }

    #[test]
    fn buffers_come_back_to_the_reader() {
        let vs = VecSink::default();
        let mut p = Pacer::start(
            Arc::new(Mutex::new(vs)),
            Arc::new(AtomicBool::new(false)),
            Arc::new(Stats::default()),
            Duration::ZERO,
        )
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
