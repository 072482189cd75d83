//! The transmission phase of one connection.
//!
//! The reader (the connection's own thread) decodes a request, validates it against
//! what was negotiated ([`validate`], a pure function), calls the export, and queues
//! the reply. Replies due now go into a batch that is written with one `sendmsg`
//! whenever the reader has no further complete request buffered (so a pipelined
//! burst costs one read and one write syscall). Replies the export wants held are
//! handed to the connection's [`Pacer`] thread, started on first use.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::backend::{Done, Export, Extent, ZeroFlags};
use crate::budget::{Charge, ConnBudget};
use crate::error::Errno;
use crate::handshake::{Negotiated, ALLOCATION_CONTEXT_ID};
use crate::pacer::{keep_buffer, ErrReply, Pacer, PacerConfig, MAX_POOLED_BUF};
use crate::proto::*;
use crate::stats::{LocalStats, Stats};
use crate::wire::{Body, InBuf, OutBatch, OutMsg, Sink, Starve};

/// A WRITE payload above the maximum but at most this large is read and discarded so
/// the client gets an EINVAL and the stream stays in step; larger ones end the
/// connection (the spec allows a hard disconnect for abusive lengths).
pub(crate) const DISCARD_LIMIT: u64 = 64 << 20;
/// Flush the reply batch after this many messages or bytes even if more requests
/// are buffered, to bound latency and memory.
const BATCH_MSGS: usize = 64;
const BATCH_BYTES: usize = 1 << 20;
/// At most this many block status descriptors per reply (spec: SHOULD NOT exceed 2^20).
const MAX_EXTENTS: usize = 1 << 20;

/// What a request is allowed to do, given the negotiated session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub size: u64,
    pub block_min: u32,
    pub block_max: u32,
    pub tflags: u16,
    pub structured: bool,
    pub meta_allocation: bool,
    pub can_fast_zero: bool,
}

/// A validated command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmd {
    Read { offset: u64, len: u32 },
    Write { offset: u64, len: u32, fua: bool },
    Flush,
    Trim { offset: u64, len: u32, fua: bool },
    WriteZeroes { offset: u64, len: u32, flags: ZeroFlags },
    Cache { offset: u64, len: u32 },
    BlockStatus { offset: u64, len: u32, req_one: bool },
}

/// Why a request is refused, with a message for structured error chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reject {
    pub errno: Errno,
    pub msg: &'static str,
}

fn reject(errno: Errno, msg: &'static str) -> Reject {
    Reject { errno, msg }
}

/// Check a request (other than DISC) against the session. Pure, so it is tested and
/// fuzzed on its own; the export only ever sees requests that pass.
pub(crate) fn validate(req: &Request, p: &Params) -> Result<Cmd, Reject> {
    let t = p.tflags;
    let has = |f: u16| t & f != 0;
    // (flags this command may carry, was the command negotiated, does it write)
    let (cmd_flags, negotiated, writes) = match req.typ {
        CMD_READ => (if has(TFLAG_SEND_DF) { CMD_FLAG_DF } else { 0 }, true, false),
        CMD_WRITE => (0, true, true),
        CMD_FLUSH => (0, has(TFLAG_SEND_FLUSH), false),
        CMD_TRIM => (0, has(TFLAG_SEND_TRIM), true),
        CMD_CACHE => (0, has(TFLAG_SEND_CACHE), false),
        CMD_WRITE_ZEROES => {
            (CMD_FLAG_NO_HOLE | if has(TFLAG_SEND_FAST_ZERO) { CMD_FLAG_FAST_ZERO } else { 0 }, has(TFLAG_SEND_WRITE_ZEROES), true)
        }
        CMD_BLOCK_STATUS => (CMD_FLAG_REQ_ONE, p.meta_allocation, false),
        _ => return Err(reject(Errno::Inval, "unknown command")),
    };
    // FUA is valid on every command once negotiated (spec: even where it means nothing).
    let allowed = cmd_flags | if has(TFLAG_SEND_FUA) { CMD_FLAG_FUA } else { 0 };
    if req.flags & !allowed != 0 {
        return Err(reject(Errno::Inval, "command flag not supported or not negotiated for this command"));
    }
    if writes && has(TFLAG_READ_ONLY) {
        return Err(reject(Errno::Perm, "export is read-only"));
    }
    if !negotiated {
        return Err(reject(
            Errno::Inval,
            if req.typ == CMD_BLOCK_STATUS {
                "block status needs base:allocation selected with NBD_OPT_SET_META_CONTEXT"
            } else {
                "command not advertised for this export"
            },
        ));
    }
    let fua = req.flags & CMD_FLAG_FUA != 0;
    if req.typ == CMD_FLUSH {
        return Ok(Cmd::Flush);
    }
    let (offset, len) = (req.offset, req.len);
    if (req.typ == CMD_READ || req.typ == CMD_WRITE) && len > p.block_max {
        return Err(if req.typ == CMD_READ && p.structured {
            // Spec: a structured read may be refused up front with EOVERFLOW.
            reject(Errno::Overflow, "read larger than the maximum payload")
        } else {
            reject(Errno::Inval, "request larger than the maximum payload")
        });
    }
    let end = offset.checked_add(len as u64);
    if end.is_none_or(|e| e > p.size) {
        return Err(if writes && req.typ != CMD_TRIM {
            reject(Errno::NoSpc, "write beyond the end of the export")
        } else {
            reject(Errno::Inval, "request beyond the end of the export")
        });
    }
    let min = p.block_min as u64;
    // A final partial block of an export whose size is not a multiple of the minimum
    // is reachable only with an unaligned length, so allow a length that ends there.
    if offset % min != 0 || (len as u64 % min != 0 && end != Some(p.size)) {
        return Err(reject(Errno::Inval, "request not aligned to the minimum block size"));
    }
    Ok(match req.typ {
        CMD_READ => Cmd::Read { offset, len },
        CMD_WRITE => Cmd::Write { offset, len, fua },
        CMD_TRIM => Cmd::Trim { offset, len, fua },
        CMD_CACHE => Cmd::Cache { offset, len },
        CMD_WRITE_ZEROES => {
            let fast = req.flags & CMD_FLAG_FAST_ZERO != 0;
            if fast && !p.can_fast_zero {
                return Err(reject(Errno::NotSup, "fast zeroing is not supported"));
            }
            Cmd::WriteZeroes { offset, len, flags: ZeroFlags { fua, no_hole: req.flags & CMD_FLAG_NO_HOLE != 0, fast } }
        }
        CMD_BLOCK_STATUS => {
            if len == 0 {
                return Err(reject(Errno::Inval, "zero-length block status"));
            }
            Cmd::BlockStatus { offset, len, req_one: req.flags & CMD_FLAG_REQ_ONE != 0 }
        }
        _ => unreachable!("command types filtered above"),
    })
}

/// Per-connection settings from the server.
pub(crate) struct ConnCtx {
    pub shutting_down: Arc<AtomicBool>,
    pub stats: Arc<Stats>,
    pub pacing: PacerConfig,
    /// This connection's account with the server's in-flight budget.
    pub budget: ConnBudget,
}

/// How the transmission phase ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TransEnd {
    /// NBD_CMD_DISC.
    Disc,
    /// EOF (fio never sends DISC) or a socket error, possibly mid-request.
    PeerClosed,
    /// Server shutdown.
    Shutdown,
    /// Hard disconnect for a protocol violation.
    Protocol(String),
}

enum Flow {
    Continue,
    Disc,
}

pub(crate) struct Transmission<'c, R, S: Sink> {
    inb: InBuf<R>,
    sink: Arc<Mutex<S>>,
    export: Arc<dyn Export>,
    p: Params,
    out: OutBatch,
    pool: Vec<Vec<u8>>,
    /// WRITE payloads larger than the input buffer.
    big: Vec<u8>,
    extents: Vec<Extent>,
    pacer: Option<Pacer>,
    ctx: &'c ConnCtx,
    local: LocalStats,
}

impl<'c, R: Read, S: Sink> Transmission<'c, R, S> {
    pub fn new(inb: InBuf<R>, sink: Arc<Mutex<S>>, n: Negotiated, ctx: &'c ConnCtx) -> Self {
        let p = Params {
            size: n.info.size,
            block_min: n.info.block_min,
            block_max: n.info.block_max,
            tflags: n.tflags,
            structured: n.structured,
            meta_allocation: n.meta_allocation,
            can_fast_zero: n.info.can_fast_zero,
        };
        Transmission {
            inb,
            sink,
            export: n.export,
            p,
            out: OutBatch::new(),
            pool: Vec::new(),
            big: Vec::new(),
            extents: Vec::new(),
            pacer: None,
            ctx,
            local: LocalStats::default(),
        }
    }

    /// Serve requests until the client leaves, the server stops, or the client breaks
    /// the protocol. Sends (or, on a hard disconnect, drops) all pending replies and
    /// closes the transport before returning.
    pub fn run(mut self) -> TransEnd {
        let end = self.serve();
        let hard = matches!(end, TransEnd::Protocol(_));
        if !hard && !self.out.is_empty() {
            let _ = self.flush();
        }
        self.local.publish(&self.ctx.stats);
        if hard {
            // Close first so nothing more reaches the client, then stop the pacer.
            self.sink.lock().unwrap_or_else(|e| e.into_inner()).close();
        }
        if let Some(p) = self.pacer.take() {
            p.finish(hard);
        }
        self.sink.lock().unwrap_or_else(|e| e.into_inner()).close();
        end
    }

    fn serve(&mut self) -> TransEnd {
        let sd = self.ctx.shutting_down.clone();
        loop {
            if self.inb.avail().len() < REQUEST_LEN {
                // About to wait for the client: send what we have first.
                if !self.out.is_empty() && self.flush().is_err() {
                    return TransEnd::PeerClosed;
                }
                // On an idle tick during shutdown, stop; a half-received request is
                // waited for (the server's grace period bounds that).
                let mut stop = |partial: bool| !partial && sd.load(Relaxed);
                match self.inb.ensure(REQUEST_LEN, &mut stop) {
                    Ok(()) => {}
                    Err(Starve::Closed) | Err(Starve::Deadline) => return TransEnd::PeerClosed,
                    Err(Starve::Stopped) => return TransEnd::Shutdown,
                }
            }
            let req = match Request::decode(self.inb.avail()) {
                Ok(r) => r,
                Err(_) => return TransEnd::Protocol("bad request magic".into()),
            };
            self.inb.consume(REQUEST_LEN);
            match self.handle(&req) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Disc) => return TransEnd::Disc,
                Err(end) => return end,
            }
            if (self.out.len() >= BATCH_MSGS || self.out.bytes >= BATCH_BYTES) && self.flush().is_err() {
                return TransEnd::PeerClosed;
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let pool = &mut self.pool;
        let r = self.out.flush(&self.sink, &mut |b| {
            if keep_buffer(pool, &b) {
                pool.push(b)
            }
        });
        self.local.publish(&self.ctx.stats);
        if let Err(e) = &r {
            if e.kind() == std::io::ErrorKind::TimedOut {
                self.ctx.stats.send_timeouts.fetch_add(1, Relaxed);
            }
        }
        r
    }

    /// Charge `n` bytes to the in-flight budget. If that means waiting, the replies
    /// ready here go out first (their charges are released), and while waiting the
    /// socket is not read: backpressure on a client that does not read its replies.
    /// `None` once the server is shutting down.
    fn charge(&mut self, n: usize) -> Option<Charge> {
        if let Some(c) = self.ctx.budget.try_acquire(n) {
            return Some(c);
        }
        if !self.out.is_empty() {
            let _ = self.flush();
        }
        let sd = self.ctx.shutting_down.clone();
        self.ctx.budget.acquire(n, &|| sd.load(Relaxed))
    }

    fn handle(&mut self, req: &Request) -> Result<Flow, TransEnd> {
        self.local.requests += 1;
        if req.typ == CMD_DISC {
            return Ok(Flow::Disc);
        }
        if self.ctx.shutting_down.load(Relaxed) {
            self.skip_payload(req)?;
            self.reply_error(req, Errno::Shutdown, "server is shutting down");
            return Ok(Flow::Continue);
        }
        let cmd = match validate(req, &self.p) {
            Ok(c) => c,
            Err(r) => {
                self.skip_payload(req)?;
                self.reply_error(req, r.errno, r.msg);
                return Ok(Flow::Continue);
            }
        };
        let cookie = req.cookie;
        match cmd {
            Cmd::Read { offset, len } => self.read(req, offset, len as usize),
            Cmd::Write { offset, len, fua } => self.write(req, offset, len as usize, fua)?,
            Cmd::Flush => {
                let r = self.export.flush();
                self.finish(req, r, "flush failed")
            }
            Cmd::Trim { offset, len, fua } => {
                let r = if len == 0 { Ok(Done::NOW) } else { self.export.trim(offset, len, fua) };
                self.finish(req, r, "trim failed")
            }
            Cmd::WriteZeroes { offset, len, flags } => {
                let r = if len == 0 { Ok(Done::NOW) } else { self.export.write_zeroes(offset, len, flags) };
                self.finish(req, r, "write zeroes failed")
            }
            Cmd::Cache { offset, len } => {
                let r = if len == 0 { Ok(Done::NOW) } else { self.export.cache(offset, len) };
                self.finish(req, r, "cache failed")
            }
            Cmd::BlockStatus { offset, len, req_one } => self.block_status(req, cookie, offset, len, req_one),
        }
        Ok(Flow::Continue)
    }

    /// Drop the payload of a refused WRITE so the next request parses.
    fn skip_payload(&mut self, req: &Request) -> Result<(), TransEnd> {
        if req.typ != CMD_WRITE || req.len == 0 {
            return Ok(());
        }
        if req.len as u64 > DISCARD_LIMIT.max(self.p.block_max as u64) {
            return Err(TransEnd::Protocol(format!("WRITE payload of {} bytes is too large", req.len)));
        }
        self.inb.skip(req.len as u64, &mut |_| false).map_err(|_| TransEnd::PeerClosed)
    }

    fn take_buf(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        // Pooled buffers keep their largest length, so only growth is zero-filled.
        if b.len() < len {
            b.resize(len, 0);
        }
        b
    }

    fn read(&mut self, req: &Request, offset: u64, len: usize) {
        if len == 0 {
            // Unspecified by the spec; answer success with no data.
            if self.p.structured {
                let h = ChunkHeader { flags: REPLY_FLAG_DONE, typ: REPLY_TYPE_NONE, cookie: req.cookie, len: 0 };
                self.out.push(OutMsg::new(&h.encode(), Body::None));
            } else {
                self.out.push(OutMsg::new(&encode_simple_reply(0, req.cookie), Body::None));
            }
            return;
        }
        let Some(charge) = self.charge(len) else {
            return self.reply_error(req, Errno::Shutdown, "server is shutting down");
        };
        let mut buf = self.take_buf(len);
        match self.export.read(offset, &mut buf[..len]) {
            Ok(done) => {
                self.local.bytes_read += len as u64;
                let msg = if self.p.structured {
                    // One chunk marked DONE: the data is already in memory, so no error
                    // can arise while it is sent.
                    OutMsg::new(&encode_offset_data_header(req.cookie, offset, len as u32, true), Body::Buf(buf, len))
                } else {
                    OutMsg::new(&encode_simple_reply(0, req.cookie), Body::Buf(buf, len))
                };
                self.queue(done, msg.with_charge(Some(charge)), self.err_reply(req, "read failed"));
            }
            Err(e) => {
                if keep_buffer(&self.pool, &buf) {
                    self.pool.push(buf);
                }
                self.reply_error(req, e, "read failed");
            }
        }
    }

    fn write(&mut self, req: &Request, offset: u64, len: usize, fua: bool) -> Result<(), TransEnd> {
        if len == 0 {
            self.out.push(OutMsg::new(&encode_simple_reply(0, req.cookie), Body::None));
            return Ok(());
        }
        let avail = self.inb.avail().len();
        if avail < len && !self.out.is_empty() && self.flush().is_err() {
            return Err(TransEnd::PeerClosed);
        }
        // The payload is applied only once complete: a client that vanishes halfway
        // through leaves the export untouched.
        let res = if len <= self.inb.capacity() {
            self.inb.ensure(len, &mut |_| false).map_err(|_| TransEnd::PeerClosed)?;
            let r = self.export.write(offset, &self.inb.avail()[..len], fua);
            self.inb.consume(len);
            r
        } else {
            // Payloads beyond the input buffer are charged while they are in memory.
            let Some(charge) = self.charge(len) else {
                self.skip_payload(req)?;
                self.reply_error(req, Errno::Shutdown, "server is shutting down");
                return Ok(());
            };
            if self.big.len() < len {
                self.big.resize(len, 0);
            }
            self.inb.read_exact_into(&mut self.big[..len], &mut |_| false).map_err(|_| TransEnd::PeerClosed)?;
            let r = self.export.write(offset, &self.big[..len], fua);
            if self.big.len() > MAX_POOLED_BUF {
                // Do not pin a large buffer for the rest of the connection.
                self.big = Vec::new();
            }
            drop(charge);
            r
        };
        if res.is_ok() {
            self.local.bytes_written += len as u64;
        }
        self.finish(req, res, "write failed");
        Ok(())
    }

    fn block_status(&mut self, req: &Request, cookie: u64, offset: u64, len: u32, req_one: bool) {
        self.extents.clear();
        let done = match self.export.block_status(offset, len, &mut self.extents) {
            Ok(d) => d,
            Err(e) => return self.reply_error(req, e, "block status failed"),
        };
        // Enforce the spec's shape whatever the export returned: nonzero lengths,
        // within the export, the first N-1 summing to less than the request, one
        // extent (no longer than the request) with REQ_ONE, at most 2^20 extents.
        let room = self.p.size - offset;
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        let mut total = 0u64;
        let mut n = 0usize;
        for e in &self.extents {
            let mut l = e.len as u64;
            if req_one {
                l = l.min(len as u64);
            }
            l = l.min(room - total);
            if l == 0 {
                if total == room {
                    break;
                }
                continue;
            }
            encode_extent(&mut buf, l as u32, e.flags & (STATE_HOLE | STATE_ZERO));
            n += 1;
            total += l;
            if req_one || total >= len as u64 || n == MAX_EXTENTS {
                break;
            }
        }
        if n == 0 {
            // Status 0 ("allocated, contents unknown") is always a safe answer.
            encode_extent(&mut buf, len, 0);
            n = 1;
        }
        let bytes = buf.len();
        // Charged once encoded (its size is known only now): at most one such reply
        // per connection is outside the budget while it waits.
        let charge = self.charge(bytes);
        let hdr = encode_block_status_header(cookie, ALLOCATION_CONTEXT_ID, n as u32);
        self.queue(done, OutMsg::new(&hdr, Body::Buf(buf, bytes)).with_charge(charge), self.err_reply(req, "block status failed"));
    }

    fn finish(&mut self, req: &Request, r: Result<Done, Errno>, what: &'static str) {
        match r {
            Ok(done) => self.queue(done, OutMsg::new(&encode_simple_reply(0, req.cookie), Body::None), self.err_reply(req, what)),
            Err(e) => self.reply_error(req, e, what),
        }
    }

    fn reply_error(&mut self, req: &Request, e: Errno, msg: &'static str) {
        self.local.error_replies += 1;
        let m = if self.p.structured {
            OutMsg::new(&encode_error_chunk_header(req.cookie, e.code(), msg.len() as u16), Body::Static(msg.as_bytes()))
        } else {
            OutMsg::new(&encode_simple_reply(e.code(), req.cookie), Body::None)
        };
        self.out.push(m);
    }

    fn err_reply(&self, req: &Request, what: &'static str) -> ErrReply {
        ErrReply { cookie: req.cookie, structured: self.p.structured, what }
    }

    /// Send now (batched) or hand to the pacer, according to `done`; `err` answers a
    /// deferred reply that resolves to an error.
    fn queue(&mut self, mut done: Done, msg: OutMsg, err: ErrReply) {
        if let Some(slot) = done.take_deferred() {
            return self.queue_deferred(&slot, done.not_before, msg, err);
        }
        let due = match done.not_before {
            Some(t) => {
                let now = Instant::now();
                if t <= now {
                    // Its time passed while the export worked (a slow fsync, a wait for
                    // the model's lock): it goes at once, and it is as late as that.
                    self.local.paced_late(now - t, self.ctx.pacing.late_threshold);
                    return self.out.push(msg);
                }
                t
            }
            None => return self.out.push(msg),
        };
        if !self.start_pacer() {
            // No thread to hold the reply (thread limit reached): keep the "never early"
            // promise by waiting here, stalling only this connection.
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            self.local.paced_late(Instant::now().saturating_duration_since(due), self.ctx.pacing.late_threshold);
            return self.out.push(msg);
        }
        self.make_room();
        let pacer = self.pacer.as_mut().expect("started above");
        // An error means the writer died on a socket error and closed the socket: the
        // reader sees EOF on its next read and ends the connection, so nothing to do.
        let _ = pacer.send(due, msg, &mut self.pool);
    }

    /// A deferred reply: parked in the pacer until its resolver says when (or fails it).
    fn queue_deferred(&mut self, slot: &crate::deferred::Slot, floor: Option<Instant>, msg: OutMsg, err: ErrReply) {
        if !self.start_pacer() {
            // No pacer thread: wait for the resolution here (stalls only this connection).
            match slot.wait() {
                Ok(t) => {
                    let due = floor.map_or(t, |f| f.max(t));
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    self.local.paced_late(Instant::now().saturating_duration_since(due), self.ctx.pacing.late_threshold);
                    self.out.push(msg)
                }
                Err(e) => {
                    self.local.error_replies += 1;
                    self.out.push(err.encode(e))
                }
            }
            return;
        }
        self.make_room();
        let pacer = self.pacer.as_mut().expect("started above");
        let _ = pacer.send_deferred(slot, floor, msg, err, &mut self.pool);
    }

    /// If the pacer may make us wait for room, let the ready replies go first.
    fn make_room(&mut self) {
        let pacer = self.pacer.as_mut().expect("started");
        if !self.out.is_empty() && !pacer.has_room() {
            let _ = self.flush();
        }
    }

    /// Start the connection's pacer thread on first use; false if no thread could start.
    fn start_pacer(&mut self) -> bool {
        if self.pacer.is_none() {
            match Pacer::start(self.sink.clone(), self.ctx.shutting_down.clone(), self.ctx.stats.clone(), self.ctx.pacing) {
                Ok(p) => self.pacer = Some(p),
                Err(_) => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            size: 1 << 20,
            block_min: 512,
            block_max: 65536,
            tflags: TFLAG_HAS_FLAGS
                | TFLAG_SEND_FLUSH
                | TFLAG_SEND_FUA
                | TFLAG_SEND_TRIM
                | TFLAG_SEND_WRITE_ZEROES
                | TFLAG_SEND_FAST_ZERO
                | TFLAG_SEND_CACHE,
            structured: false,
            meta_allocation: false,
            can_fast_zero: false,
        }
    }
    fn req(typ: u16, flags: u16, offset: u64, len: u32) -> Request {
        Request { flags, typ, cookie: 1, offset, len }
    }
    fn err(r: Result<Cmd, Reject>) -> Errno {
        r.expect_err("should be refused").errno
    }

    #[test]
    fn accepts_good_requests() {
        let p = params();
        assert_eq!(validate(&req(CMD_READ, 0, 4096, 4096), &p), Ok(Cmd::Read { offset: 4096, len: 4096 }));
        assert_eq!(validate(&req(CMD_WRITE, CMD_FLAG_FUA, 0, 512), &p), Ok(Cmd::Write { offset: 0, len: 512, fua: true }));
        // FUA is legal on any command once negotiated.
        assert_eq!(validate(&req(CMD_FLUSH, CMD_FLAG_FUA, 0, 0), &p), Ok(Cmd::Flush));
        assert!(validate(&req(CMD_READ, CMD_FLAG_FUA, 0, 512), &p).is_ok());
        // The last bytes of the export.
        assert!(validate(&req(CMD_WRITE, 0, (1 << 20) - 512, 512), &p).is_ok());
        assert_eq!(
            validate(&req(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 0, 1 << 20), &p),
            Ok(Cmd::WriteZeroes { offset: 0, len: 1 << 20, flags: ZeroFlags { fua: false, no_hole: true, fast: false } })
        );
        // Trim and write zeroes may exceed the maximum payload.
        assert!(validate(&req(CMD_TRIM, 0, 0, 1 << 20), &p).is_ok());
    }

    #[test]
    fn range_errors_follow_the_spec() {
        let p = params();
        let end = 1u64 << 20;
        assert_eq!(err(validate(&req(CMD_READ, 0, end, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_TRIM, 0, end - 512, 1024), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_CACHE, 0, end, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE, 0, end - 512, 1024), &p)), Errno::NoSpc);
        assert_eq!(err(validate(&req(CMD_WRITE_ZEROES, 0, end, 512), &p)), Errno::NoSpc);
        // offset + len overflowing u64 is beyond the end, not a wrap to the start.
        assert_eq!(err(validate(&req(CMD_READ, 0, u64::MAX - 511, 1024), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE, 0, u64::MAX, 512), &p)), Errno::NoSpc);
    }

    #[test]
    fn alignment_and_size_limits() {
        let mut p = params();
        assert_eq!(err(validate(&req(CMD_READ, 0, 100, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE, 0, 0, 100), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_READ, 0, 0, 65536 + 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE, 0, 0, 65536 + 512), &p)), Errno::Inval);
        p.structured = true;
        assert_eq!(err(validate(&req(CMD_READ, 0, 0, 65536 + 512), &p)), Errno::Overflow);
        // Unaligned tail of an export whose size is not a block multiple.
        p.size = 1000;
        assert!(validate(&req(CMD_READ, 0, 512, 488), &p).is_ok());
        assert_eq!(err(validate(&req(CMD_READ, 0, 0, 488), &p)), Errno::Inval);
    }

    #[test]
    fn flags_and_commands_must_be_negotiated() {
        let mut p = params();
        assert_eq!(err(validate(&req(9, 0, 0, 0), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_RESIZE, 0, 0, 0), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_READ, 1 << 9, 0, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_READ, CMD_FLAG_DF, 0, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE, CMD_FLAG_NO_HOLE, 0, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_BLOCK_STATUS, 0, 0, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 512), &p)), Errno::NotSup);
        p.can_fast_zero = true;
        assert!(validate(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 512), &p).is_ok());
        p.tflags &= !(TFLAG_SEND_FUA | TFLAG_SEND_FLUSH | TFLAG_SEND_FAST_ZERO);
        assert_eq!(err(validate(&req(CMD_WRITE, CMD_FLAG_FUA, 0, 512), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_FLUSH, 0, 0, 0), &p)), Errno::Inval);
        assert_eq!(err(validate(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 512), &p)), Errno::Inval);
        p.structured = true;
        p.tflags |= TFLAG_SEND_DF;
        p.meta_allocation = true;
        assert!(validate(&req(CMD_READ, CMD_FLAG_DF, 0, 512), &p).is_ok());
        assert!(validate(&req(CMD_BLOCK_STATUS, CMD_FLAG_REQ_ONE, 0, 512), &p).is_ok());
        assert_eq!(err(validate(&req(CMD_BLOCK_STATUS, 0, 0, 0), &p)), Errno::Inval);
    }

    #[test]
    fn read_only_refuses_writes_with_eperm() {
        let mut p = params();
        p.tflags = TFLAG_HAS_FLAGS | TFLAG_READ_ONLY | TFLAG_SEND_FLUSH;
        assert_eq!(err(validate(&req(CMD_WRITE, 0, 0, 512), &p)), Errno::Perm);
        assert_eq!(err(validate(&req(CMD_TRIM, 0, 0, 512), &p)), Errno::Perm);
        assert_eq!(err(validate(&req(CMD_WRITE_ZEROES, 0, 0, 512), &p)), Errno::Perm);
        assert!(validate(&req(CMD_READ, 0, 0, 512), &p).is_ok());
        assert!(validate(&req(CMD_FLUSH, 0, 0, 0), &p).is_ok());
    }
}
