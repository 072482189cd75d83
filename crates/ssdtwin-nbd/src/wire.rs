//! Byte transport for one connection: a buffered reader that survives read timeouts,
//! a vectored "send everything" sink, and batches of outgoing reply messages.
//!
//! Reads use a timeout (the server's poll interval) so an idle connection notices a
//! server shutdown; `InBuf` keeps partial messages across those timeouts, which
//! `std::io::BufReader::read_exact` would not.

use std::io::{self, IoSlice, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::budget::Charge;

/// Result of one attempt to read more bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Some bytes arrived.
    Data,
    /// Orderly end of stream.
    Eof,
    /// The read timed out with nothing new (time to check for shutdown).
    Tick,
}

/// Why waiting for bytes stopped without getting them.
#[derive(Debug)]
pub(crate) enum Starve {
    /// End of stream or a socket error: the peer is gone.
    Closed,
    /// The caller's `stop` check said to give up (server shutting down).
    Stopped,
    /// The deadline set with [`InBuf::set_deadline`] passed.
    Deadline,
}

/// A read buffer with explicit start/end, so partial messages persist across ticks.
pub(crate) struct InBuf<R> {
    r: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Waiting for bytes fails with `Starve::Deadline` after this (the handshake
    /// limit), however the client trickles its bytes in.
    deadline: Option<Instant>,
}

impl<R: Read> InBuf<R> {
    pub fn new(r: R, capacity: usize) -> Self {
        InBuf { r, buf: vec![0u8; capacity].into_boxed_slice(), start: 0, end: 0, deadline: None }
    }

    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The transport, to replace it in place (the STARTTLS upgrade).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.r
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub fn avail(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Read once into free space (moving buffered bytes to the front if needed).
    pub fn fill(&mut self) -> io::Result<Fill> {
        if self.end == self.buf.len() {
            if self.start == 0 {
                // Full of unconsumed bytes: callers never ask for more than capacity.
                return Ok(Fill::Data);
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(Fill::Eof),
                Ok(n) => {
                    self.end += n;
                    return Ok(Fill::Data);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Ok(Fill::Tick),
                Err(e) => return Err(e),
            }
        }
    }

    /// Wait until `n <= capacity` bytes are buffered. `stop` is consulted on each tick
    /// and told whether a message is partly received.
    pub fn ensure(&mut self, n: usize, stop: &mut dyn FnMut(bool) -> bool) -> Result<(), Starve> {
        debug_assert!(n <= self.buf.len());
        while self.end - self.start < n {
            if self.past_deadline() {
                return Err(Starve::Deadline);
            }
            if self.buf.len() - self.start < n {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            match self.fill() {
                Ok(Fill::Data) => {}
                Ok(Fill::Eof) | Err(_) => return Err(Starve::Closed),
                Ok(Fill::Tick) => {
                    if stop(self.end > self.start) {
                        return Err(Starve::Stopped);
                    }
                }
            }
        }
        Ok(())
    }

    /// Fill all of `dst` (any size): buffered bytes first, then straight from the
    /// reader, so a large WRITE payload is not copied through the buffer.
    pub fn read_exact_into(&mut self, dst: &mut [u8], stop: &mut dyn FnMut(bool) -> bool) -> Result<(), Starve> {
        let take = dst.len().min(self.end - self.start);
        dst[..take].copy_from_slice(&self.buf[self.start..self.start + take]);
        self.consume(take);
        let mut at = take;
        while at < dst.len() {
            if self.past_deadline() {
                return Err(Starve::Deadline);
            }
            match self.r.read(&mut dst[at..]) {
                Ok(0) => return Err(Starve::Closed),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    if stop(true) {
                        return Err(Starve::Stopped);
                    }
                }
                Err(_) => return Err(Starve::Closed),
            }
        }
        Ok(())
    }

    /// Read and drop `n` bytes (the payload of a refused WRITE).
    pub fn skip(&mut self, mut n: u64, stop: &mut dyn FnMut(bool) -> bool) -> Result<(), Starve> {
        while n > 0 {
            if self.past_deadline() {
                return Err(Starve::Deadline);
            }
            if self.end == self.start {
                match self.fill() {
                    Ok(Fill::Data) => {}
                    Ok(Fill::Eof) | Err(_) => return Err(Starve::Closed),
                    Ok(Fill::Tick) => {
                        if stop(true) {
                            return Err(Starve::Stopped);
                        }
                        continue;
                    }
                }
            }
            let take = n.min((self.end - self.start) as u64) as usize;
            self.consume(take);
            n -= take as u64;
        }
        Ok(())
    }
}

/// Where replies go. Implementations must write everything or fail.
pub trait Sink: Send + 'static {
    fn send_all(&mut self, bufs: &mut [IoSlice<'_>]) -> io::Result<()>;
    /// Hard-close the transport (both directions). Idempotent.
    fn close(&mut self) {}
}

/// A socket written with `sendmsg(MSG_NOSIGNAL)`: vectored like `writev`, but a peer
/// that has gone away gives EPIPE instead of killing the process with SIGPIPE (the
/// server may live inside a Python process or another host that did not ignore it).
pub(crate) struct SocketSink<T: AsRawFd + Send + 'static> {
    sock: T,
    closed: bool,
    send_timeout: Option<Duration>,
}

/// The error for a client that does not take its replies within the send timeout.
pub(crate) fn send_timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the client did not read its replies within the send timeout")
}

/// Tracks one `send_all` against the send timeout: the whole call must finish within
/// it. (`SO_SNDTIMEO` alone only catches sends that make no progress at all; a kernel
/// that keeps taking a trickle into a growing receive buffer would defeat it.)
pub(crate) struct SendClock {
    deadline: Option<Instant>,
}

impl SendClock {
    pub fn start(timeout: Option<Duration>) -> SendClock {
        SendClock { deadline: timeout.map(|t| Instant::now() + t) }
    }
    pub fn check(&self) -> io::Result<()> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(send_timed_out()),
            _ => Ok(()),
        }
    }
}

impl<T: AsRawFd + Send + 'static> SocketSink<T> {
    pub fn new(sock: T) -> Self {
        SocketSink { sock, closed: false, send_timeout: None }
    }
    /// Fail a send that takes longer than this in all (set `SO_SNDTIMEO` to the same
    /// value so a send that blocks outright returns too).
    pub fn with_send_timeout(mut self, t: Option<Duration>) -> Self {
        self.send_timeout = t;
        self
    }
    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

/// Linux caps one sendmsg at IOV_MAX (1024) buffers.
const IOV_MAX: usize = 1024;

impl<T: AsRawFd + Send + 'static> Sink for SocketSink<T> {
    fn send_all(&mut self, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
        IoSlice::advance_slices(&mut bufs, 0);
        let clock = SendClock::start(self.send_timeout);
        while !bufs.is_empty() {
            let n = bufs.len().min(IOV_MAX);
            // SAFETY: IoSlice is guaranteed ABI-compatible with `struct iovec` on Unix;
            // the msghdr only borrows `bufs` for the duration of the call.
            let r = unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
                msg.msg_iovlen = n as _;
                libc::sendmsg(self.fd(), &msg, libc::MSG_NOSIGNAL)
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if e.kind() == io::ErrorKind::WouldBlock {
                    // SO_SNDTIMEO expired with nothing sent: the client reads nothing.
                    return Err(send_timed_out());
                }
                return Err(e);
            }
            if r == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut bufs, r as usize);
            if !bufs.is_empty() {
                clock.check()?;
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            // SAFETY: shutdown on a valid fd owned by `self.sock`; errors (already
            // closed by the peer) are irrelevant here.
            unsafe {
                libc::shutdown(self.fd(), libc::SHUT_RDWR);
            }
        }
    }
}

/// An in-memory sink: the server half of the fuzzing / test duplex.
#[derive(Default, Clone)]
pub struct VecSink {
    pub bytes: Arc<Mutex<Vec<u8>>>,
}

impl Sink for VecSink {
    fn send_all(&mut self, bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
        let mut out = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        for b in bufs.iter() {
            out.extend_from_slice(b);
        }
        Ok(())
    }
}

/// Largest fixed header of any reply message we send (structured OFFSET_DATA: 28).
pub(crate) const HDR_MAX: usize = 32;

/// The variable part of a reply message.
pub(crate) enum Body {
    None,
    Static(&'static [u8]),
    /// A pooled buffer and the number of bytes of it to send.
    Buf(Vec<u8>, usize),
}

/// One reply message: a fixed header plus an optional body, written back to back.
pub(crate) struct OutMsg {
    hdr: [u8; HDR_MAX],
    hdr_len: u8,
    pub body: Body,
    /// The message's share of the in-flight budget, released when it is dropped
    /// (after it has been sent).
    charge: Option<Charge>,
}

impl OutMsg {
    pub fn new(hdr: &[u8], body: Body) -> OutMsg {
        let mut h = [0u8; HDR_MAX];
        h[..hdr.len()].copy_from_slice(hdr);
        OutMsg { hdr: h, hdr_len: hdr.len() as u8, body, charge: None }
    }
    pub fn with_charge(mut self, charge: Option<Charge>) -> OutMsg {
        self.charge = charge;
        self
    }
    pub fn wire_len(&self) -> usize {
        self.hdr_len as usize
            + match &self.body {
                Body::None => 0,
                Body::Static(s) => s.len(),
                Body::Buf(_, n) => *n,
            }
    }
}

/// Replies gathered for one vectored send. Reuses its iovec array across flushes so
/// the hot path does not allocate.
pub(crate) struct OutBatch {
    pub msgs: Vec<OutMsg>,
    iov: Vec<libc::iovec>,
    pub bytes: usize,
}

impl OutBatch {
    pub fn new() -> OutBatch {
        OutBatch { msgs: Vec::with_capacity(64), iov: Vec::with_capacity(128), bytes: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }
    pub fn len(&self) -> usize {
        self.msgs.len()
    }
    pub fn push(&mut self, m: OutMsg) {
        self.bytes += m.wire_len();
        self.msgs.push(m);
    }

    /// Send every message with one vectored write under the sink lock, then hand each
    /// body buffer to `recycle` (also on error, so buffers return to the pool).
    pub fn flush<S: Sink>(&mut self, sink: &Mutex<S>, recycle: &mut dyn FnMut(Vec<u8>)) -> io::Result<()> {
        self.iov.clear();
        for m in &self.msgs {
            self.iov.push(libc::iovec { iov_base: m.hdr.as_ptr() as *mut _, iov_len: m.hdr_len as usize });
            match &m.body {
                Body::None => {}
                Body::Static([]) => {}
                Body::Static(s) => self.iov.push(libc::iovec { iov_base: s.as_ptr() as *mut _, iov_len: s.len() }),
                Body::Buf(_, 0) => {}
                Body::Buf(b, n) => self.iov.push(libc::iovec { iov_base: b.as_ptr() as *mut _, iov_len: *n }),
            }
        }
        let res = {
            // SAFETY: each iovec points into a message owned by `self.msgs`, which is
            // neither moved nor mutated until after this block; IoSlice is ABI-compatible
            // with iovec on Unix.
            let slices: &mut [IoSlice<'_>] =
                unsafe { std::slice::from_raw_parts_mut(self.iov.as_mut_ptr() as *mut IoSlice<'_>, self.iov.len()) };
            let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
            s.send_all(slices)
        };
        self.iov.clear();
        for m in self.msgs.drain(..) {
            // The charge (if any) is released as `m` goes out of scope.
            if let Body::Buf(b, _) = m.body {
                recycle(b);
            }
        }
        self.bytes = 0;
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A reader that hands out data in fixed pieces with a timeout between them.
    struct Chunky {
        parts: Vec<Option<Vec<u8>>>,
    }
    impl Read for Chunky {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.parts.is_empty() {
                return Ok(0);
            }
            match self.parts.remove(0) {
                None => Err(io::ErrorKind::WouldBlock.into()),
                Some(mut p) => {
                    let n = p.len().min(buf.len());
                    buf[..n].copy_from_slice(&p[..n]);
                    if n < p.len() {
                        p.drain(..n);
                        self.parts.insert(0, Some(p));
                    }
                    Ok(n)
                }
            }
        }
    }

    #[test]
    fn partial_message_survives_ticks() {
        let r = Chunky { parts: vec![Some(vec![1, 2, 3]), None, Some(vec![4, 5]), None, Some(vec![6])] };
        let mut b = InBuf::new(r, 8);
        let mut ticks = Vec::new();
        b.ensure(6, &mut |partial| {
            ticks.push(partial);
            false
        })
        .unwrap();
        assert_eq!(b.avail(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(ticks, vec![true, true]);
        b.consume(6);
        assert!(matches!(b.ensure(1, &mut |_| false), Err(Starve::Closed)));
    }

    #[test]
    fn stop_on_idle_tick() {
        let r = Chunky { parts: vec![None] };
        let mut b = InBuf::new(r, 8);
        assert!(matches!(b.ensure(1, &mut |partial| !partial), Err(Starve::Stopped)));
    }

    #[test]
    fn ensure_compacts_and_read_into_spans_buffer() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut b = InBuf::new(Cursor::new(data.clone()), 16);
        b.ensure(10, &mut |_| false).unwrap();
        b.consume(10);
        // 12 more needs compaction (start=10 of 16).
        b.ensure(12, &mut |_| false).unwrap();
        assert_eq!(&b.avail()[..12], &data[10..22]);
        b.consume(12);
        let mut v = vec![0u8; 50];
        b.read_exact_into(&mut v, &mut |_| false).unwrap();
        assert_eq!(v, &data[22..72]);
        b.skip(20, &mut |_| false).unwrap();
        b.ensure(8, &mut |_| false).unwrap();
        assert_eq!(&b.avail()[..8], &data[92..100]);
    }

    #[test]
    fn batch_flush_writes_in_order_and_recycles() {
        let sink = Mutex::new(VecSink::default());
        let mut batch = OutBatch::new();
        batch.push(OutMsg::new(&[1, 2], Body::Buf(vec![9, 9, 9, 0], 3)));
        batch.push(OutMsg::new(&[3], Body::Static(b"xy")));
        batch.push(OutMsg::new(&[4], Body::None));
        assert_eq!(batch.bytes, 2 + 3 + 1 + 2 + 1);
        let mut got = Vec::new();
        batch.flush(&sink, &mut |b| got.push(b)).unwrap();
        assert_eq!(*sink.lock().unwrap().bytes.lock().unwrap(), vec![1, 2, 9, 9, 9, 3, b'x', b'y', 4]);
        assert_eq!(got, vec![vec![9, 9, 9, 0]]);
        assert!(batch.is_empty() && batch.bytes == 0);
    }

    #[test]
    fn socket_sink_sends_many_slices() {
        use std::os::unix::net::UnixStream;
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut s = SocketSink::new(a);
        // More than IOV_MAX slices exercises the chunking.
        let parts: Vec<[u8; 1]> = (0..3000u32).map(|i| [(i % 251) as u8]).collect();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            b.read_to_end(&mut v).unwrap();
            v
        });
        let mut sl: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        s.send_all(&mut sl).unwrap();
        s.close();
        drop(s);
        let v = reader.join().unwrap();
        assert_eq!(v.len(), 3000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
    }
}
