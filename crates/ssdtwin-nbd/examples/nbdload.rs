//! nbdload: a load and abuse generator for any NBD server.
//!
//! ```text
//! cargo run --release -p ssdtwin-nbd --example nbdload -- nbd://127.0.0.1:10809/mem \
//!     --clients 32 --duration 300 --pid $(pidof memserve)
//! cargo run --release -p ssdtwin-nbd --example nbdload -- 'nbd+unix:///ns1?socket=/tmp/s.sock' ...
//! ```
//!
//! Many connections mix READs, WRITEs and FLUSHes at a queue depth each, and disconnect
//! and reconnect now and then (half of the time cleanly with `NBD_CMD_DISC` after every
//! reply, half abruptly with requests in flight). Every write carries a verifiable
//! pattern (run, client, block, generation); every read is checked against what was
//! acknowledged, and at the end each client flushes and reads back everything it wrote.
//! A write left unacknowledged by an abrupt disconnect may or may not have happened, so
//! either content is accepted for it (and its blocks are not rewritten for 5 s, so a
//! server still finishing the old connection's request cannot overwrite newer data).
//!
//! Reported: operations and latency percentiles per type (hdrhistogram), reconnects,
//! error replies, connect/handshake failures, verification (zero loss expected), and
//! with `--pid` the server's VmRSS every second and its VmHWM.
//!
//! Abuse, alongside the load: `--stall N` opens N connections that each pipeline
//! `--stall-reads K` READs of `--stall-bs` bytes and never read a reply; `--hold N`
//! opens N connections first and leaves them silent (no handshake).
//!
//! `--help` lists the options. Exit status: 0 clean, 1 data mismatch (loss), 2 bad
//! usage or no connection could be made, 3 errors without loss (`--strict`).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::json;
use ssdtwin_nbd::proto::*;

/// Pattern granularity: every request covers whole units, each stamped on its own.
pub const UNIT: u64 = 4096;
/// Blocks written by a request lost in an abrupt disconnect are not rewritten for this
/// long: the server may still be applying it on the old connection's thread.
const FENCE: Duration = Duration::from_secs(5);
const HEADER_LEN: usize = 24;

// ------------------------------------------------------------------------- config

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Tcp { addr: String, export: String },
    Unix { path: PathBuf, export: String },
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex =
                s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| format!("bad percent escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

impl Target {
    /// `nbd://HOST[:PORT]/EXPORT` or `nbd+unix:///EXPORT?socket=PATH` (doc/uri.md).
    pub fn parse(uri: &str) -> Result<Target, String> {
        if uri.starts_with("nbds") {
            return Err(format!("{uri}: nbdload speaks plain NBD only (no TLS); use nbd:// or nbd+unix://"));
        }
        if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path_part, query) = rest.split_once('?').ok_or_else(|| format!("{uri}: nbd+unix:// needs ?socket=PATH"))?;
            let export = percent_decode(path_part.strip_prefix('/').unwrap_or(path_part))?;
            let socket = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("socket="))
                .ok_or_else(|| format!("{uri}: nbd+unix:// needs ?socket=PATH"))?;
            return Ok(Target::Unix { path: PathBuf::from(percent_decode(socket)?), export });
        }
        if let Some(rest) = uri.strip_prefix("nbd://") {
            let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
            if hostport.is_empty() {
                return Err(format!("{uri}: no host"));
            }
            let has_port = if hostport.starts_with('[') { hostport.contains("]:") } else { hostport.contains(':') };
            let addr = if has_port { hostport.to_string() } else { format!("{hostport}:10809") };
            return Ok(Target::Tcp { addr, export: percent_decode(path)? });
        }
        Err(format!("{uri}: not an NBD URI (nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH)"))
    }

    fn export(&self) -> &str {
        match self {
            Target::Tcp { export, .. } | Target::Unix { export, .. } => export,
        }
    }
}

/// What to run. `Default` is a short, moderate run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: Target,
    pub clients: usize,
    pub duration: Duration,
    /// Requests in flight per connection.
    pub qd: usize,
    /// Request sizes, each a multiple of 4 KiB; each request picks one at random.
    pub sizes: Vec<u32>,
    /// Percentages of reads, writes and flushes (the rest of 100 is reads).
    pub mix_read: u32,
    pub mix_write: u32,
    pub mix_flush: u32,
    /// Reconnect after this many requests on average (0: never).
    pub disconnect_every: u64,
    /// Bytes of the export each client uses (default: an equal share, at most 256 MiB).
    pub region_bytes: Option<u64>,
    pub seed: u64,
    /// Server process to sample VmRSS/VmHWM from.
    pub pid: Option<u32>,
    /// Negotiate structured replies (as libnbd does); false: simple replies only.
    pub structured: bool,
    pub stall: usize,
    pub stall_reads: usize,
    pub stall_bytes: u32,
    pub hold: usize,
    pub quiet: bool,
}

impl LoadConfig {
    pub fn new(target: Target) -> LoadConfig {
        LoadConfig {
            target,
            clients: 8,
            duration: Duration::from_secs(10),
            qd: 16,
            sizes: vec![4 << 10, 64 << 10, 1 << 20],
            mix_read: 60,
            mix_write: 35,
            mix_flush: 5,
            disconnect_every: 2000,
            region_bytes: None,
            seed: 1,
            pid: None,
            structured: true,
            stall: 0,
            stall_reads: 8,
            stall_bytes: 32 << 20,
            hold: 0,
            quiet: false,
        }
    }
}

// ------------------------------------------------------------------------- transport

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn connect(t: &Target, timeout: Duration) -> io::Result<Stream> {
        match t {
            Target::Tcp { addr, .. } => {
                let a = addr.to_socket_addrs()?.next().ok_or_else(|| io::Error::other(format!("{addr}: no address")))?;
                let s = TcpStream::connect_timeout(&a, timeout)?;
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
            Target::Unix { path, .. } => Ok(Stream::Unix(UnixStream::connect(path)?)),
        }
    }
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }
    fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }
    fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(d),
            Stream::Unix(s) => s.set_read_timeout(d),
        }
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b),
            Stream::Unix(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(b),
            Stream::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// ------------------------------------------------------------------------- handshake

/// What `NBD_OPT_GO` settled.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    pub size: u64,
    pub tflags: u16,
    pub block_min: u32,
    pub block_max: u32,
    pub structured: bool,
}

fn rep_name(t: u32) -> &'static str {
    match t {
        REP_ERR_UNSUP => "NBD_REP_ERR_UNSUP",
        REP_ERR_POLICY => "NBD_REP_ERR_POLICY",
        REP_ERR_INVALID => "NBD_REP_ERR_INVALID",
        REP_ERR_PLATFORM => "NBD_REP_ERR_PLATFORM",
        REP_ERR_TLS_REQD => "NBD_REP_ERR_TLS_REQD",
        REP_ERR_UNKNOWN => "NBD_REP_ERR_UNKNOWN",
        REP_ERR_SHUTDOWN => "NBD_REP_ERR_SHUTDOWN",
        REP_ERR_BLOCK_SIZE_REQD => "NBD_REP_ERR_BLOCK_SIZE_REQD",
        REP_ERR_TOO_BIG => "NBD_REP_ERR_TOO_BIG",
        _ => "unknown reply type",
    }
}

fn io_ctx(what: &'static str) -> impl Fn(io::Error) -> String {
    move |e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            format!("{what}: the server closed the connection")
        } else {
            format!("{what}: {e}")
        }
    }
}

fn send_option(s: &mut Stream, option: u32, data: &[u8]) -> Result<(), String> {
    let mut b = OptionHeader { option, len: data.len() as u32 }.encode().to_vec();
    b.extend_from_slice(data);
    s.write_all(&b).map_err(io_ctx("sending an option"))
}

fn read_option_reply(s: &mut Stream) -> Result<(OptionReplyHeader, Vec<u8>), String> {
    let mut h = [0u8; OPTION_REPLY_HEADER_LEN];
    s.read_exact(&mut h).map_err(io_ctx("reading an option reply"))?;
    let h = OptionReplyHeader::decode(&h).map_err(|e| format!("option reply: {e}"))?;
    if h.len > 1 << 20 {
        return Err(format!("option reply of {} bytes", h.len));
    }
    let mut d = vec![0u8; h.len as usize];
    s.read_exact(&mut d).map_err(io_ctx("reading an option reply"))?;
    Ok((h, d))
}

fn refusal(option: &str, h: &OptionReplyHeader, d: &[u8]) -> String {
    format!("{option} refused with {}: {}", rep_name(h.reply_type), String::from_utf8_lossy(d))
}

/// Fixed-newstyle handshake: optionally structured replies, then GO with block sizes.
fn handshake(s: &mut Stream, export: &str, want_structured: bool) -> Result<Session, String> {
    let mut g = [0u8; GREETING_LEN];
    s.read_exact(&mut g).map_err(io_ctx("reading the greeting"))?;
    let hflags = decode_greeting(&g).map_err(|e| format!("greeting: {e}"))?;
    let cflags = FLAG_C_FIXED_NEWSTYLE | if hflags & FLAG_NO_ZEROES != 0 { FLAG_C_NO_ZEROES } else { 0 };
    s.write_all(&cflags.to_be_bytes()).map_err(io_ctx("sending client flags"))?;
    let mut structured = false;
    if want_structured {
        send_option(s, OPT_STRUCTURED_REPLY, &[])?;
        let (h, d) = read_option_reply(s)?;
        match h.reply_type {
            REP_ACK => structured = true,
            REP_ERR_UNSUP => {}
            _ => return Err(refusal("NBD_OPT_STRUCTURED_REPLY", &h, &d)),
        }
    }
    let mut data = Vec::new();
    InfoRequest { name: export.as_bytes(), infos: vec![INFO_BLOCK_SIZE] }.encode(&mut data);
    send_option(s, OPT_GO, &data)?;
    let mut session = Session { size: 0, tflags: 0, block_min: 1, block_max: 32 << 20, structured };
    loop {
        let (h, d) = read_option_reply(s)?;
        match h.reply_type {
            REP_ACK => return Ok(session),
            REP_INFO => match decode_info(&d) {
                Ok(Info::Export { size, tflags }) => (session.size, session.tflags) = (size, tflags),
                Ok(Info::BlockSize { min, max, .. }) => (session.block_min, session.block_max) = (min, max),
                _ => {}
            },
            t if is_rep_error(t) => return Err(refusal("NBD_OPT_GO", &h, &d)),
            t => return Err(format!("unexpected reply type {t} to NBD_OPT_GO")),
        }
    }
}

// ------------------------------------------------------------------------- patterns

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The content of one unit: a header naming it, then bytes derived from the header.
fn fill_unit(b: &mut [u8], run: u64, client: u32, unit: u64, generation: u32) {
    b[0..8].copy_from_slice(&run.to_le_bytes());
    b[8..12].copy_from_slice(&client.to_le_bytes());
    b[12..16].copy_from_slice(&generation.to_le_bytes());
    b[16..24].copy_from_slice(&unit.to_le_bytes());
    let mut x = run ^ (unit << 20) ^ ((client as u64) << 44) ^ generation as u64;
    for c in b[HEADER_LEN..].chunks_mut(8) {
        let v = splitmix(&mut x).to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// Which generation a unit holds, if it is one of ours and intact.
fn unit_generation(b: &[u8], run: u64, client: u32, unit: u64, scratch: &mut [u8]) -> Option<u32> {
    if b[0..8] != run.to_le_bytes() || b[8..12] != client.to_le_bytes() || b[16..24] != unit.to_le_bytes() {
        return None;
    }
    let g = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    fill_unit(scratch, run, client, unit, g);
    (scratch == b).then_some(g)
}

// ------------------------------------------------------------------------- client state

#[derive(Clone, Default)]
struct UnitState {
    /// Acknowledged generation; 0: never written in this run (content unknown).
    gen: u32,
    /// Writes since then of unknown outcome (lost in an abrupt disconnect, or
    /// failed): any of them may be what the unit holds.
    maybe: Vec<u32>,
    readers: u16,
    writing: bool,
    fenced_until: Option<Instant>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Read,
    Write,
    Flush,
}

struct Pending {
    kind: Kind,
    unit0: u64,
    units: u64,
    generation: u32,
    t0: Instant,
    data: Vec<u8>,
    error: u32,
}

struct Hists {
    read: Histogram<u64>,
    write: Histogram<u64>,
    flush: Histogram<u64>,
}

impl Hists {
    fn new() -> Hists {
        let h = || Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
        Hists { read: h(), write: h(), flush: h() }
    }
    fn of(&mut self, k: Kind) -> &mut Histogram<u64> {
        match k {
            Kind::Read => &mut self.read,
            Kind::Write => &mut self.write,
            Kind::Flush => &mut self.flush,
        }
    }
    fn add(&mut self, o: &Hists) {
        let _ = self.read.add(&o.read);
        let _ = self.write.add(&o.write);
        let _ = self.flush.add(&o.flush);
    }
}

#[derive(Default, Clone)]
struct Counts {
    bytes_read: u64,
    bytes_written: u64,
    errors: HashMap<u32, u64>,
    reconnects_clean: u64,
    reconnects_abrupt: u64,
    connect_failures: u64,
    first_connect_error: Option<String>,
    units_verified_inflight: u64,
    units_unverifiable: u64,
    units_verified_final: u64,
    units_uncertain_final: u64,
    mismatches: u64,
    mismatch_examples: Vec<String>,
    protocol_errors: Vec<String>,
}

struct State {
    units: Vec<UnitState>,
    inflight: HashMap<u64, Pending>,
    next_cookie: u64,
    next_gen: u32,
    dead: bool,
    hists: Hists,
    counts: Counts,
}

struct Client {
    id: u32,
    run: u64,
    /// First unit of this client's region, in units from the start of the export.
    base_unit: u64,
    m: Mutex<State>,
    cv: Condvar,
}

impl Client {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mismatch(&self, st: &mut State, msg: String) {
        st.counts.mismatches += 1;
        if st.counts.mismatch_examples.len() < 10 {
            st.counts.mismatch_examples.push(msg);
        }
    }

    /// Check read data; `final_pass` counts into the end-of-run figures.
    fn verify(&self, unit0: u64, data: &[u8], final_pass: bool) {
        let expected: Vec<(u32, Vec<u32>)> = {
            let st = self.lock();
            (0..data.len() as u64 / UNIT)
                .map(|i| {
                    let u = &st.units[(unit0 + i) as usize];
                    (u.gen, u.maybe.clone())
                })
                .collect()
        };
        let mut scratch = vec![0u8; UNIT as usize];
        let (mut ok, mut unknown, mut uncertain) = (0u64, 0u64, 0u64);
        let mut bad = Vec::new();
        for (i, (g, maybe)) in expected.iter().enumerate() {
            let g = *g;
            if g == 0 && maybe.is_empty() {
                unknown += 1;
                continue;
            }
            let abs = self.base_unit + unit0 + i as u64;
            let b = &data[i * UNIT as usize..(i + 1) * UNIT as usize];
            let found = unit_generation(b, self.run, self.id, abs, &mut scratch);
            let allowed = |f: u32| (g != 0 && f == g) || maybe.contains(&f);
            match found {
                Some(f) if allowed(f) => {
                    ok += 1;
                    uncertain += !maybe.is_empty() as u64;
                }
                // Never written and maybe-written: the old content may also be anything.
                _ if g == 0 => unknown += 1,
                found => bad.push(format!(
                    "client {} block {} (byte offset {}): expected generation {g}{}, found {}",
                    self.id,
                    abs,
                    abs * UNIT,
                    maybe.iter().map(|m| format!(" or {m}")).collect::<String>(),
                    match found {
                        Some(f) => format!("generation {f}"),
                        None => "other data".into(),
                    }
                )),
            }
        }
        let mut st = self.lock();
        if final_pass {
            st.counts.units_verified_final += ok;
            st.counts.units_uncertain_final += uncertain;
        } else {
            st.counts.units_verified_inflight += ok;
            st.counts.units_unverifiable += unknown;
        }
        for b in bad {
            self.mismatch(&mut st, b);
        }
    }

    fn complete(&self, cookie: u64, verify_final: bool) {
        let p = {
            let mut st = self.lock();
            let Some(p) = st.inflight.remove(&cookie) else {
                return;
            };
            p
        };
        if p.kind == Kind::Read && p.error == 0 {
            self.verify(p.unit0, &p.data, verify_final);
        }
        let mut st = self.lock();
        let us = p.t0.elapsed().as_micros() as u64;
        let _ = st.hists.of(p.kind).record(us.max(1));
        if p.error != 0 {
            *st.counts.errors.entry(p.error).or_default() += 1;
        }
        for u in p.unit0..p.unit0 + p.units {
            let s = &mut st.units[u as usize];
            match p.kind {
                Kind::Read => s.readers -= 1,
                Kind::Write => {
                    s.writing = false;
                    if p.error == 0 {
                        s.gen = p.generation;
                        s.maybe.clear();
                    } else {
                        s.maybe.push(p.generation);
                    }
                }
                Kind::Flush => {}
            }
        }
        match p.kind {
            Kind::Read if p.error == 0 => st.counts.bytes_read += p.units * UNIT,
            Kind::Write if p.error == 0 => st.counts.bytes_written += p.units * UNIT,
            _ => {}
        }
        drop(st);
        self.cv.notify_all();
    }

    /// The connection is gone: every request still in flight has an unknown outcome.
    fn abandon_inflight(&self) {
        let mut st = self.lock();
        let now = Instant::now();
        let pending: Vec<Pending> = st.inflight.drain().map(|(_, p)| p).collect();
        for p in pending {
            for u in p.unit0..p.unit0 + p.units {
                let s = &mut st.units[u as usize];
                match p.kind {
                    Kind::Read => s.readers -= 1,
                    Kind::Write => {
                        s.writing = false;
                        s.maybe.push(p.generation);
                        s.fenced_until = Some(now + FENCE);
                    }
                    Kind::Flush => {}
                }
            }
        }
        drop(st);
        self.cv.notify_all();
    }
}

// ------------------------------------------------------------------------- receiver

fn read_n(s: &mut Stream, n: usize) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; n];
    s.read_exact(&mut v).map_err(io_ctx("reading a reply"))?;
    Ok(v)
}

/// Read replies until the connection ends; `final_pass` marks the verification phase.
fn receiver(mut s: Stream, c: Arc<Client>, final_pass: Arc<AtomicBool>) {
    let r = receive_loop(&mut s, &c, &final_pass);
    if let Err(e) = r {
        let mut st = c.lock();
        // A broken connection after our own shutdown is expected; anything else is news.
        if !st.dead && st.counts.protocol_errors.len() < 10 {
            st.counts.protocol_errors.push(e);
        }
    }
    c.lock().dead = true;
    c.cv.notify_all();
}

fn receive_loop(s: &mut Stream, c: &Client, final_pass: &AtomicBool) -> Result<(), String> {
    loop {
        let mut h = [0u8; STRUCTURED_HEADER_LEN];
        match s.read_exact(&mut h[..SIMPLE_REPLY_LEN]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("reading a reply: {e}")),
        }
        if h[..4] == STRUCTURED_REPLY_MAGIC.to_be_bytes() {
            s.read_exact(&mut h[SIMPLE_REPLY_LEN..]).map_err(io_ctx("reading a reply"))?;
        }
        let (cookie, done) = match ReplyHeader::decode(&h).map_err(|e| format!("reply header: {e}"))? {
            ReplyHeader::Simple { error, cookie } => {
                let want = {
                    let mut st = c.lock();
                    let p = st.inflight.get_mut(&cookie).ok_or_else(|| format!("reply to unknown cookie {cookie}"))?;
                    p.error = error;
                    if p.kind == Kind::Read && error == 0 {
                        p.units * UNIT
                    } else {
                        0
                    }
                };
                if want > 0 {
                    let d = read_n(s, want as usize)?;
                    if let Some(p) = c.lock().inflight.get_mut(&cookie) {
                        p.data = d;
                    }
                }
                (cookie, true)
            }
            ReplyHeader::Chunk(ch) => {
                let payload = read_n(s, ch.len as usize)?;
                let mut st = c.lock();
                let p = st.inflight.get_mut(&ch.cookie).ok_or_else(|| format!("chunk for unknown cookie {}", ch.cookie))?;
                match ch.typ {
                    REPLY_TYPE_OFFSET_DATA if payload.len() >= 8 => {
                        let off = u64::from_be_bytes(payload[..8].try_into().expect("8 bytes"));
                        let start = off.wrapping_sub((c.base_unit + p.unit0) * UNIT) as usize;
                        let body = &payload[8..];
                        if p.data.is_empty() {
                            p.data = vec![0u8; (p.units * UNIT) as usize];
                        }
                        let dst = p.data.get_mut(start..start + body.len()).ok_or("data chunk outside the read")?;
                        dst.copy_from_slice(body);
                    }
                    REPLY_TYPE_OFFSET_HOLE if p.data.is_empty() => {
                        p.data = vec![0u8; (p.units * UNIT) as usize];
                    }
                    t if t & 0x8000 != 0 => {
                        p.error = if payload.len() >= 4 { u32::from_be_bytes(payload[..4].try_into().expect("4 bytes")) } else { 5 };
                    }
                    _ => {}
                }
                (ch.cookie, ch.flags & REPLY_FLAG_DONE != 0)
            }
        };
        if done {
            c.complete(cookie, final_pass.load(Relaxed));
        }
    }
}

// ------------------------------------------------------------------------- sender

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        splitmix(&mut self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Pick units for a request of `units` units that this client may touch now.
fn pick_range(st: &State, rng: &mut Rng, units: u64, write: bool, now: Instant) -> Option<u64> {
    let n = st.units.len() as u64;
    if units > n {
        return None;
    }
    'try_again: for _ in 0..8 {
        let u0 = rng.below(n - units + 1);
        for s in &st.units[u0 as usize..(u0 + units) as usize] {
            let blocked = if write { s.writing || s.readers > 0 || s.fenced_until.is_some_and(|t| t > now) } else { s.writing };
            if blocked {
                continue 'try_again;
            }
        }
        return Some(u0);
    }
    None
}

fn register(st: &mut State, kind: Kind, unit0: u64, units: u64) -> Req {
    let cookie = st.next_cookie;
    st.next_cookie += 1;
    let generation = if kind == Kind::Write {
        st.next_gen += 1;
        st.next_gen
    } else {
        0
    };
    for s in &mut st.units[unit0 as usize..(unit0 + units) as usize] {
        match kind {
            Kind::Read => s.readers += 1,
            Kind::Write => s.writing = true,
            Kind::Flush => {}
        }
    }
    st.inflight.insert(cookie, Pending { kind, unit0, units, generation, t0: Instant::now(), data: Vec::new(), error: 0 });
    Req { kind, cookie, unit0, units, generation }
}

/// One request as registered: what, which cookie, which units, which generation.
#[derive(Clone, Copy)]
struct Req {
    kind: Kind,
    cookie: u64,
    unit0: u64,
    units: u64,
    generation: u32,
}

fn send_request(s: &mut Stream, c: &Client, r: Req, out: &mut Vec<u8>) -> io::Result<()> {
    let Req { kind, cookie, unit0, units, generation } = r;
    let (typ, offset, len) = match kind {
        Kind::Read => (CMD_READ, (c.base_unit + unit0) * UNIT, units * UNIT),
        Kind::Write => (CMD_WRITE, (c.base_unit + unit0) * UNIT, units * UNIT),
        Kind::Flush => (CMD_FLUSH, 0, 0),
    };
    out.clear();
    out.extend_from_slice(&Request { flags: 0, typ, cookie, offset, len: len as u32 }.encode());
    if kind == Kind::Write {
        let start = out.len();
        out.resize(start + len as usize, 0);
        for i in 0..units {
            let b = &mut out[start + (i * UNIT) as usize..start + ((i + 1) * UNIT) as usize];
            fill_unit(b, c.run, c.id, c.base_unit + unit0 + i, generation);
        }
    }
    s.write_all(out)
}

struct Plan<'a> {
    cfg: &'a LoadConfig,
    session: Session,
}

/// Issue random requests until `stop_at` or `ops` requests; false if the connection died.
fn run_ops(s: &mut Stream, c: &Client, plan: &Plan, rng: &mut Rng, ops: u64, stop_at: Instant) -> bool {
    let cfg = plan.cfg;
    let can_flush = plan.session.tflags & TFLAG_SEND_FLUSH != 0;
    let read_only = plan.session.tflags & TFLAG_READ_ONLY != 0;
    let mut out = Vec::new();
    let mut issued = 0u64;
    while issued < ops && Instant::now() < stop_at {
        let roll = rng.below(100) as u32;
        let kind = if roll < cfg.mix_write && !read_only {
            Kind::Write
        } else if roll < cfg.mix_write + cfg.mix_flush && can_flush {
            Kind::Flush
        } else {
            Kind::Read
        };
        let size = cfg.sizes[rng.below(cfg.sizes.len() as u64) as usize] as u64;
        let units = if kind == Kind::Flush { 0 } else { (size / UNIT).max(1) };
        let reg = {
            let mut st = c.lock();
            while st.inflight.len() >= cfg.qd && !st.dead {
                st = c.cv.wait_timeout(st, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
            }
            if st.dead {
                return false;
            }
            let unit0 = if kind == Kind::Flush { Some(0) } else { pick_range(&st, rng, units, kind == Kind::Write, Instant::now()) };
            match unit0 {
                Some(u0) => Some(register(&mut st, kind, u0, units)),
                None => {
                    // Everything nearby is busy: wait for a completion.
                    let _ = c.cv.wait_timeout(st, Duration::from_millis(10));
                    None
                }
            }
        };
        let Some(req) = reg else { continue };
        if send_request(s, c, req, &mut out).is_err() {
            return false;
        }
        issued += 1;
    }
    true
}

/// Wait until every reply is in; false on timeout or a dead connection.
fn drain(c: &Client, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut st = c.lock();
    while !st.inflight.is_empty() {
        if st.dead || Instant::now() >= deadline {
            return false;
        }
        st = c.cv.wait_timeout(st, Duration::from_millis(50)).unwrap_or_else(|e| e.into_inner()).0;
    }
    true
}

fn connect(cfg: &LoadConfig, c: &Client, until: Instant) -> Option<(Stream, Session)> {
    let mut backoff = Duration::from_millis(20);
    loop {
        let r = Stream::connect(&cfg.target, Duration::from_secs(5)).map_err(|e| format!("connect: {e}")).and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
            let sess = handshake(&mut s, cfg.target.export(), cfg.structured)?;
            s.set_read_timeout(None).map_err(|e| e.to_string())?;
            Ok((s, sess))
        });
        match r {
            Ok(x) => return Some(x),
            Err(e) => {
                let mut st = c.lock();
                st.counts.connect_failures += 1;
                st.counts.first_connect_error.get_or_insert(e);
            }
        }
        if Instant::now() + backoff >= until {
            return None;
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

/// One connection's life: a receiver thread and this thread sending.
fn with_connection(
    cfg: &LoadConfig,
    c: &Arc<Client>,
    until: Instant,
    final_pass: bool,
    body: impl FnOnce(&mut Stream, Session) -> bool,
) -> Option<bool> {
    let (mut s, sess) = connect(cfg, c, until)?;
    c.lock().dead = false;
    let rs = s.try_clone().ok()?;
    let flag = Arc::new(AtomicBool::new(final_pass));
    let (c2, f2) = (c.clone(), flag.clone());
    let rx = std::thread::spawn(move || receiver(rs, c2, f2));
    let clean = body(&mut s, sess);
    if clean && drain(c, Duration::from_secs(60)) {
        let disc = Request { flags: 0, typ: CMD_DISC, cookie: u64::MAX, offset: 0, len: 0 }.encode();
        let _ = s.write_all(&disc);
        s.shutdown(Shutdown::Write);
    } else {
        c.lock().dead = true;
        s.shutdown(Shutdown::Both);
    }
    let _ = rx.join();
    c.abandon_inflight();
    Some(clean)
}

fn client_main(cfg: &LoadConfig, c: Arc<Client>, deadline: Instant) {
    let mut rng = Rng(cfg.seed ^ ((c.id as u64 + 1) << 32));
    while Instant::now() < deadline {
        let ops = if cfg.disconnect_every == 0 { u64::MAX } else { 1 + rng.below(2 * cfg.disconnect_every) };
        let abrupt = cfg.disconnect_every != 0 && rng.below(2) == 0;
        let r = with_connection(cfg, &c, deadline, false, |s, sess| {
            let plan = Plan { cfg, session: sess };
            let alive = run_ops(s, &c, &plan, &mut rng, ops, deadline);
            alive && !(abrupt && Instant::now() < deadline)
        });
        let Some(clean) = r else { break };
        if Instant::now() < deadline {
            let mut st = c.lock();
            if clean {
                st.counts.reconnects_clean += 1;
            } else {
                st.counts.reconnects_abrupt += 1;
            }
        }
    }
    final_verify(cfg, &c);
}

/// Flush, then read back every unit this client wrote.
fn final_verify(cfg: &LoadConfig, c: &Arc<Client>) {
    let until = Instant::now() + Duration::from_secs(30);
    let _ = with_connection(cfg, c, until, true, |s, sess| {
        let mut out = Vec::new();
        if sess.tflags & TFLAG_SEND_FLUSH != 0 {
            let req = register(&mut c.lock(), Kind::Flush, 0, 0);
            if send_request(s, c, req, &mut out).is_err() || !drain(c, Duration::from_secs(60)) {
                return false;
            }
        }
        let runs: Vec<(u64, u64)> = {
            let st = c.lock();
            let mut runs = Vec::new();
            let mut u = 0u64;
            let n = st.units.len() as u64;
            while u < n {
                let known = |i: u64| st.units[i as usize].gen != 0 || !st.units[i as usize].maybe.is_empty();
                if !known(u) {
                    u += 1;
                    continue;
                }
                let start = u;
                while u < n && known(u) && u - start < 256 {
                    u += 1;
                }
                runs.push((start, u - start));
            }
            runs
        };
        for (u0, units) in runs {
            let req = {
                let mut st = c.lock();
                while st.inflight.len() >= cfg.qd.max(1) && !st.dead {
                    st = c.cv.wait_timeout(st, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
                }
                if st.dead {
                    return false;
                }
                register(&mut st, Kind::Read, u0, units)
            };
            if send_request(s, c, req, &mut out).is_err() {
                return false;
            }
        }
        true
    });
}

// ------------------------------------------------------------------------- abuse

/// Connections that pipeline big READs and never read a reply.
fn open_stalls(cfg: &LoadConfig, errors: &mut Vec<String>) -> Vec<Stream> {
    let mut v = Vec::new();
    for i in 0..cfg.stall {
        let r = Stream::connect(&cfg.target, Duration::from_secs(5)).map_err(|e| format!("connect: {e}")).and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
            let sess = handshake(&mut s, cfg.target.export(), cfg.structured)?;
            let len = (cfg.stall_bytes as u64).min(sess.block_max as u64).min(sess.size) as u32;
            let slots = (sess.size / len as u64).max(1);
            let mut reqs = Vec::new();
            for k in 0..cfg.stall_reads {
                let offset = ((i * cfg.stall_reads + k) as u64 % slots) * len as u64;
                reqs.extend_from_slice(&Request { flags: 0, typ: CMD_READ, cookie: k as u64, offset, len }.encode());
            }
            s.write_all(&reqs).map_err(|e| e.to_string())?;
            Ok(s)
        });
        match r {
            Ok(s) => v.push(s),
            Err(e) => errors.push(e),
        }
    }
    v
}

/// Silent connections (TCP/unix connect only).
fn open_holds(cfg: &LoadConfig, errors: &mut Vec<String>) -> Vec<Stream> {
    let mut v = Vec::new();
    for _ in 0..cfg.hold {
        match Stream::connect(&cfg.target, Duration::from_secs(2)) {
            Ok(s) => v.push(s),
            Err(e) => errors.push(format!("connect: {e}")),
        }
    }
    v
}

/// How many of `streams` the server has closed (EOF or reset).
fn count_closed(streams: &mut [Stream]) -> usize {
    let mut closed = 0;
    let mut buf = [0u8; 4096];
    for s in streams.iter_mut() {
        let _ = s.set_nonblocking(true);
        loop {
            match s.read(&mut buf) {
                Ok(0) => {
                    closed += 1;
                    break;
                }
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed += 1;
                    break;
                }
            }
        }
    }
    closed
}

// ------------------------------------------------------------------------- RSS

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub fn proc_memory_kib(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field =
        |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u64>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !s.load(Relaxed) {
                if let Some((rss, _)) = proc_memory_kib(pid) {
                    samples.push(rss);
                }
                for _ in 0..10 {
                    if s.load(Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            samples
        });
        RssSampler { stop, thread }
    }
    fn finish(self) -> Vec<u64> {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

// ------------------------------------------------------------------------- run

/// Everything a run measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub json: serde_json::Value,
    pub text: String,
    pub mismatches: u64,
    pub errors: u64,
    pub ops: u64,
    pub units_verified_final: u64,
    pub connect_failures: u64,
    pub reconnects: u64,
}

fn pct(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

fn hist_json(h: &Histogram<u64>, secs: f64) -> serde_json::Value {
    json!({
        "ops": h.len(), "ops_per_s": h.len() as f64 / secs,
        "lat_us": {"mean": if h.is_empty() { 0.0 } else { h.mean() }, "p50": pct(h, 0.5), "p90": pct(h, 0.9), "p99": pct(h, 0.99), "p99_9": pct(h, 0.999), "max": h.max()}
    })
}

fn errno_name(e: u32) -> String {
    match e {
        1 => "EPERM".into(),
        5 => "EIO".into(),
        12 => "ENOMEM".into(),
        22 => "EINVAL".into(),
        28 => "ENOSPC".into(),
        75 => "EOVERFLOW".into(),
        95 => "ENOTSUP".into(),
        108 => "ESHUTDOWN".into(),
        n => format!("errno {n}"),
    }
}

/// Connect and handshake, retrying until `until`: the connection, its session, and
/// how many tries failed (with the first error).
fn probe(cfg: &LoadConfig, until: Instant) -> Result<(Stream, Session, u32, Option<String>), String> {
    let mut tries = 0;
    let mut first_err = None;
    loop {
        tries += 1;
        let r = Stream::connect(&cfg.target, Duration::from_secs(5)).map_err(|e| format!("connect: {e}")).and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
            let sess = handshake(&mut s, cfg.target.export(), cfg.structured)?;
            Ok((s, sess))
        });
        match r {
            Ok((s, sess)) => return Ok((s, sess, tries - 1, first_err)),
            Err(e) if Instant::now() >= until => return Err(format!("{:?}: no connection in {tries} tries: {e}", cfg.target)),
            Err(e) => {
                first_err.get_or_insert(e);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Run the load; `Err` only when the target cannot be used at all.
pub fn run(cfg: &LoadConfig) -> Result<Report, String> {
    if cfg.sizes.is_empty() || cfg.sizes.iter().any(|&s| s == 0 || s as u64 % UNIT != 0) {
        return Err("--bs: every size must be a nonzero multiple of 4k".into());
    }
    if cfg.mix_read + cfg.mix_write + cfg.mix_flush != 100 {
        return Err("--mix: READ,WRITE,FLUSH percentages must add up to 100".into());
    }
    let log = |m: String| {
        if !cfg.quiet {
            eprintln!("nbdload: {m}");
        }
    };
    let rss0 = cfg.pid.and_then(proc_memory_kib);
    if let (Some(pid), None) = (cfg.pid, rss0) {
        return Err(format!("--pid {pid}: cannot read /proc/{pid}/status"));
    }
    let mut abuse_errors = Vec::new();
    let mut holds = open_holds(cfg, &mut abuse_errors);
    let holds_opened = holds.len();
    if cfg.hold > 0 {
        log(format!("holding {} silent connections ({} failed to connect)", holds.len(), cfg.hold - holds.len()));
    }
    let sampler = cfg.pid.map(RssSampler::start);
    let mut stalls = open_stalls(cfg, &mut abuse_errors);
    let stalls_opened = stalls.len();
    if cfg.stall > 0 {
        log(format!(
            "{} connections each asked for {} READs of {} bytes and read nothing ({} failed)",
            stalls.len(),
            cfg.stall_reads,
            cfg.stall_bytes,
            cfg.stall - stalls.len()
        ));
    }
    // Probe the export once for its size and limits.
    let mut probe_info: Option<(Duration, u32, Option<String>)> = None;
    let session = if cfg.clients > 0 {
        let probe_until = Instant::now() + cfg.duration.max(Duration::from_secs(5));
        let t = Instant::now();
        let (mut s, sess, failed, first_err) = probe(cfg, probe_until)?;
        if failed > 0 {
            log(format!(
                "first connection after {:.1} s and {failed} refused tries (first: {})",
                t.elapsed().as_secs_f64(),
                first_err.as_deref().unwrap_or("?")
            ));
        }
        probe_info = Some((t.elapsed(), failed, first_err));
        let disc = Request { flags: 0, typ: CMD_DISC, cookie: 0, offset: 0, len: 0 }.encode();
        let _ = s.write_all(&disc);
        Some(sess)
    } else {
        None
    };
    let run_id = cfg.seed ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mut clients = Vec::new();
    if let Some(sess) = session {
        if sess.block_min as u64 > UNIT || cfg.sizes.iter().any(|&s| s > sess.block_max) {
            return Err(format!(
                "export block sizes (min {}, max {}) do not fit 4k units and --bs {:?}",
                sess.block_min, sess.block_max, cfg.sizes
            ));
        }
        let share = sess.size / UNIT / cfg.clients as u64;
        let units = cfg.region_bytes.map(|b| b / UNIT).unwrap_or(share.min((256 << 20) / UNIT)).min(share);
        let max_req = *cfg.sizes.iter().max().expect("nonempty") as u64 / UNIT;
        if units < max_req {
            return Err(format!(
                "export of {} bytes is too small for {} clients with --bs up to {}",
                sess.size,
                cfg.clients,
                max_req * UNIT
            ));
        }
        for id in 0..cfg.clients as u32 {
            clients.push(Arc::new(Client {
                id,
                run: run_id,
                base_unit: id as u64 * share,
                m: Mutex::new(State {
                    units: vec![UnitState::default(); units as usize],
                    inflight: HashMap::new(),
                    next_cookie: 1,
                    next_gen: 0,
                    dead: true,
                    hists: Hists::new(),
                    counts: Counts::default(),
                }),
                cv: Condvar::new(),
            }));
        }
        log(format!(
            "{} clients x qd {} on {:?} for {:?}: {} MiB each, sizes {:?}, mix r{}/w{}/f{}, reconnect every ~{} requests",
            cfg.clients,
            cfg.qd,
            cfg.target,
            cfg.duration,
            (units * UNIT) >> 20,
            cfg.sizes,
            cfg.mix_read,
            cfg.mix_write,
            cfg.mix_flush,
            cfg.disconnect_every
        ));
    }
    let t0 = Instant::now();
    let deadline = t0 + cfg.duration;
    let threads: Vec<_> = clients
        .iter()
        .map(|c| {
            let (cfg, c) = (cfg.clone(), c.clone());
            std::thread::spawn(move || client_main(&cfg, c, deadline))
        })
        .collect();
    if clients.is_empty() {
        std::thread::sleep(cfg.duration);
    }
    for t in threads {
        let _ = t.join();
    }
    let secs = cfg.duration.as_secs_f64();
    let stalls_closed = count_closed(&mut stalls);
    let holds_closed = count_closed(&mut holds);
    let rss_end = cfg.pid.and_then(proc_memory_kib);
    let samples = sampler.map(|s| s.finish()).unwrap_or_default();
    drop(stalls);
    drop(holds);

    let mut hists = Hists::new();
    let mut n = Counts::default();
    for c in &clients {
        let st = c.lock();
        hists.add(&st.hists);
        let k = &st.counts;
        n.bytes_read += k.bytes_read;
        n.bytes_written += k.bytes_written;
        for (e, v) in &k.errors {
            *n.errors.entry(*e).or_default() += v;
        }
        n.reconnects_clean += k.reconnects_clean;
        n.reconnects_abrupt += k.reconnects_abrupt;
        n.connect_failures += k.connect_failures;
        if n.first_connect_error.is_none() {
            n.first_connect_error = k.first_connect_error.clone();
        }
        n.units_verified_inflight += k.units_verified_inflight;
        n.units_unverifiable += k.units_unverifiable;
        n.units_verified_final += k.units_verified_final;
        n.units_uncertain_final += k.units_uncertain_final;
        n.mismatches += k.mismatches;
        n.mismatch_examples.extend(k.mismatch_examples.iter().take(3).cloned());
        n.protocol_errors.extend(k.protocol_errors.iter().cloned());
    }
    let mut total = Hists::new().read;
    let _ = total.add(&hists.read);
    let _ = total.add(&hists.write);
    let _ = total.add(&hists.flush);
    let errors: u64 = n.errors.values().sum();
    let mut errs: Vec<(u32, u64)> = n.errors.iter().map(|(a, b)| (*a, *b)).collect();
    errs.sort();
    let max_rss = samples.iter().copied().max();
    let json = json!({
        "target": format!("{:?}", cfg.target),
        "clients": cfg.clients, "qd": cfg.qd, "duration_s": secs, "sizes": cfg.sizes,
        "mix": {"read": cfg.mix_read, "write": cfg.mix_write, "flush": cfg.mix_flush},
        "read": hist_json(&hists.read, secs), "write": hist_json(&hists.write, secs),
        "flush": hist_json(&hists.flush, secs), "total": hist_json(&total, secs),
        "bytes_read": n.bytes_read, "bytes_written": n.bytes_written,
        "reconnects": {"clean": n.reconnects_clean, "abrupt": n.reconnects_abrupt},
        "connect_failures": n.connect_failures, "first_connect_error": n.first_connect_error,
        "first_connection": probe_info.as_ref().map(|(t, f, e)| json!({"after_s": t.as_secs_f64(), "failed_tries": f, "first_error": e})),
        "error_replies": errs.iter().map(|(e, c)| (errno_name(*e), *c)).collect::<HashMap<_, _>>(),
        "protocol_errors": n.protocol_errors,
        "verify": {"units_in_flight": n.units_verified_inflight, "units_unknown": n.units_unverifiable,
                   "units_final": n.units_verified_final, "units_final_uncertain": n.units_uncertain_final,
                   "mismatches": n.mismatches, "examples": n.mismatch_examples},
        "server_kib": cfg.pid.map(|_| json!({"rss_start": rss0.map(|r| r.0), "rss_max": max_rss, "rss_end": rss_end.map(|r| r.0), "hwm_end": rss_end.map(|r| r.1)})),
        "stall": {"connections": cfg.stall, "opened": stalls_opened, "reads_each": cfg.stall_reads, "bytes_each": cfg.stall_bytes, "closed_by_server": stalls_closed},
        "hold": {"connections": cfg.hold, "opened": holds_opened, "closed_by_server": holds_closed},
        "abuse_errors": abuse_errors.iter().take(5).collect::<Vec<_>>(),
    });
    let mut t = String::new();
    let line = |t: &mut String, name: &str, h: &Histogram<u64>| {
        t.push_str(&format!(
            "  {name:<6} {:>10} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>9}\n",
            h.len(),
            h.len() as f64 / secs,
            pct(h, 0.5),
            pct(h, 0.9),
            pct(h, 0.99),
            pct(h, 0.999),
            h.max()
        ))
    };
    if !clients.is_empty() {
        t.push_str(&format!(
            "  {:<6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9}  (latency µs)\n",
            "op", "count", "ops/s", "p50", "p90", "p99", "p99.9", "max"
        ));
        line(&mut t, "read", &hists.read);
        line(&mut t, "write", &hists.write);
        line(&mut t, "flush", &hists.flush);
        line(&mut t, "total", &total);
        t.push_str(&format!(
            "  {:.1} MB/s read, {:.1} MB/s written; reconnects: {} clean, {} abrupt; connect/handshake failures: {}{}\n",
            n.bytes_read as f64 / secs / 1e6,
            n.bytes_written as f64 / secs / 1e6,
            n.reconnects_clean,
            n.reconnects_abrupt,
            n.connect_failures,
            n.first_connect_error.as_ref().map(|e| format!(" (first: {e})")).unwrap_or_default()
        ));
        t.push_str(&format!(
            "  error replies: {}\n",
            if errs.is_empty() {
                "none".to_string()
            } else {
                errs.iter().map(|(e, c)| format!("{} x{c}", errno_name(*e))).collect::<Vec<_>>().join(", ")
            }
        ));
        for p in n.protocol_errors.iter().take(3) {
            t.push_str(&format!("  connection error: {p}\n"));
        }
        t.push_str(&format!(
            "  verify: {} blocks checked in flight, {} at the end after FLUSH ({} of unknown outcome after abrupt disconnects): {} mismatches\n",
            n.units_verified_inflight, n.units_verified_final, n.units_uncertain_final, n.mismatches
        ));
        for m in &n.mismatch_examples {
            t.push_str(&format!("    {m}\n"));
        }
    }
    if cfg.stall > 0 {
        t.push_str(&format!(
            "  stall: {} connections x {} READs of {} bytes never read; {} closed by the server\n",
            stalls_opened, cfg.stall_reads, cfg.stall_bytes, stalls_closed
        ));
    }
    if cfg.hold > 0 {
        t.push_str(&format!("  hold: {holds_opened} silent connections opened; {holds_closed} closed by the server\n"));
    }
    for e in abuse_errors.iter().take(3) {
        t.push_str(&format!("  abuse connection failed: {e}\n"));
    }
    if let Some(pid) = cfg.pid {
        let mib = |k: Option<u64>| k.map(|k| format!("{:.1}", k as f64 / 1024.0)).unwrap_or("?".into());
        t.push_str(&format!(
            "  server pid {pid} memory (MiB): RSS at start {}, max {}, at end {}; VmHWM {}\n",
            mib(rss0.map(|r| r.0)),
            mib(max_rss),
            mib(rss_end.map(|r| r.0)),
            mib(rss_end.map(|r| r.1))
        ));
    }
    Ok(Report {
        json,
        text: t,
        mismatches: n.mismatches,
        errors,
        ops: total.len(),
        units_verified_final: n.units_verified_final,
        connect_failures: n.connect_failures,
        reconnects: n.reconnects_clean + n.reconnects_abrupt,
    })
}

// ------------------------------------------------------------------------- CLI

const HELP: &str = "\
nbdload TARGET [OPTIONS]: load and abuse generator for NBD servers

TARGET: nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH

  --clients N           concurrent connections (default 8; 0 with --stall/--hold only)
  --duration SECS       run time (default 10)
  --qd N                requests in flight per connection (default 16)
  --bs LIST             request sizes, multiples of 4k, e.g. 4k,64k,1m (default)
  --mix R,W,F           percent READ,WRITE,FLUSH (default 60,35,5)
  --disconnect-every N  reconnect after ~N requests, half clean, half abrupt (default 2000; 0 never)
  --region BYTES        bytes of the export each client uses (default: an equal share, <= 256M)
  --seed N              random seed (default 1)
  --simple              no structured replies (simple replies only)
  --pid PID             sample the server's VmRSS each second, VmHWM at the end
  --stall N             N extra connections that pipeline READs and never read replies
  --stall-reads K       READs per stalling connection (default 8)
  --stall-bs BYTES      size of each stalling READ (default 32M)
  --hold N              N extra silent connections opened first (no handshake)
  --json                print the report as JSON on stdout
  --strict              exit 3 if any request failed or any connect failed
";

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>().map(|n| n * mult).map_err(|_| format!("{s:?} is not a size (e.g. 4k, 1m)"))
}

fn parse_args(args: &[String]) -> Result<(LoadConfig, bool, bool), String> {
    let mut target = None;
    let mut rest = Vec::new();
    for a in args {
        if target.is_none() && !a.starts_with("--") {
            target = Some(Target::parse(a)?);
        } else {
            rest.push(a.clone());
        }
    }
    let mut cfg = LoadConfig::new(target.ok_or("give a target URI (see --help)")?);
    let (mut json_out, mut strict) = (false, false);
    let mut it = rest.into_iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String, what: &str| v.parse::<u64>().map_err(|_| format!("{what}: {v:?} is not a whole number"));
        match a.as_str() {
            "--clients" => cfg.clients = num(val()?, "--clients")? as usize,
            "--duration" => cfg.duration = Duration::from_secs_f64(val()?.parse::<f64>().map_err(|_| "--duration: seconds".to_string())?),
            "--qd" => cfg.qd = num(val()?, "--qd")?.clamp(1, 1024) as usize,
            "--bs" => cfg.sizes = val()?.split(',').map(|x| parse_size(x).map(|n| n as u32)).collect::<Result<_, _>>()?,
            "--mix" => {
                let v: Vec<u32> =
                    val()?.split(',').map(|x| x.trim().parse::<u32>().map_err(|_| format!("--mix: {x:?}"))).collect::<Result<_, _>>()?;
                let [r, w, f] = v[..] else {
                    return Err("--mix wants R,W,F".into());
                };
                (cfg.mix_read, cfg.mix_write, cfg.mix_flush) = (r, w, f);
            }
            "--disconnect-every" => cfg.disconnect_every = num(val()?, "--disconnect-every")?,
            "--region" => cfg.region_bytes = Some(parse_size(&val()?)?),
            "--seed" => cfg.seed = num(val()?, "--seed")?,
            "--simple" => cfg.structured = false,
            "--pid" => cfg.pid = Some(num(val()?, "--pid")? as u32),
            "--stall" => cfg.stall = num(val()?, "--stall")? as usize,
            "--stall-reads" => cfg.stall_reads = num(val()?, "--stall-reads")? as usize,
            "--stall-bs" => cfg.stall_bytes = parse_size(&val()?)?.min(u32::MAX as u64) as u32,
            "--hold" => cfg.hold = num(val()?, "--hold")? as usize,
            "--json" => json_out = true,
            "--strict" => strict = true,
            other => return Err(format!("unknown option {other} (see --help)")),
        }
    }
    Ok((cfg, json_out, strict))
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{HELP}");
        return;
    }
    let (cfg, json_out, strict) = match parse_args(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("nbdload: {e}");
            std::process::exit(2);
        }
    };
    match run(&cfg) {
        Ok(r) => {
            eprint!("{}", r.text);
            if json_out {
                println!("{}", serde_json::to_string_pretty(&r.json).expect("json"));
            }
            if r.mismatches > 0 {
                std::process::exit(1);
            }
            if strict && (r.errors > 0 || r.connect_failures > 0) {
                std::process::exit(3);
            }
        }
        Err(e) => {
            eprintln!("nbdload: {e}");
            std::process::exit(2);
        }
    }
}
