//! A raw NBD client over a socket, built on the crate's own decoders, for tests that
//! must send malformed input or look at exact bytes; plus helpers to start servers
//! and find external tools.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{MemBackend, Server, ServerConfig, ServerHandle};

/// Start a server for `backend` on 127.0.0.1:0.
pub fn serve(backend: MemBackend) -> (ServerHandle, Arc<MemBackend>) {
    serve_with(backend, ServerConfig::default())
}

pub fn serve_with(backend: MemBackend, config: ServerConfig) -> (ServerHandle, Arc<MemBackend>) {
    let b = Arc::new(backend);
    let h = Server::new(b.clone()).with_config(config).listen_tcp("127.0.0.1:0").expect("bind").start().expect("start");
    (h, b)
}

/// A fresh path for a unix socket or scratch file under the system temp dir.
pub fn temp_path(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("ssdtwin-nbd-{}-{tag}-{n}", std::process::id()))
}

/// The path of an external program, or None after printing why the test is skipped.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    eprintln!("SKIP: `{name}` is not installed (not found in PATH); this test needs it");
    None
}

pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One option reply.
#[derive(Debug, Clone)]
pub struct OptReply {
    pub option: u32,
    pub typ: u32,
    pub data: Vec<u8>,
}

/// One reply to a transmission request (all chunks gathered for structured replies).
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub cookie: u64,
    /// 0 on success.
    pub error: u32,
    pub message: Vec<u8>,
    /// READ data (simple, or reassembled from OFFSET_DATA chunks).
    pub data: Vec<u8>,
    pub extents: Vec<(u32, u32)>,
    pub context: Option<u32>,
    pub structured: bool,
}

pub struct Client {
    pub s: Box<dyn Stream>,
    pub structured: bool,
    pub size: u64,
    pub tflags: u16,
}

impl Client {
    pub fn tcp(h: &ServerHandle) -> Client {
        let s = TcpStream::connect(h.tcp_addrs()[0]).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Client::from_stream(Box::new(s))
    }

    /// A client of the server at `addr` (servers not built from a `ServerHandle`).
    pub fn tcp_addr(addr: std::net::SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Client::from_stream(Box::new(s))
    }

    /// A TCP client plus a second handle on its socket, for a writer thread.
    pub fn tcp_split(h: &ServerHandle) -> (Client, TcpStream) {
        let s = TcpStream::connect(h.tcp_addrs()[0]).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        let w = s.try_clone().unwrap();
        (Client::from_stream(Box::new(s)), w)
    }

    pub fn unix(path: &Path) -> Client {
        let s = UnixStream::connect(path).expect("connect unix");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client::from_stream(Box::new(s))
    }

    /// Wrap a stream and read the greeting.
    pub fn from_stream(s: Box<dyn Stream>) -> Client {
        let mut c = Client { s, structured: false, size: 0, tflags: 0 };
        let g = c.read_n(GREETING_LEN);
        assert_eq!(decode_greeting(&g), Ok(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES));
        c
    }

    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.s.read_exact(&mut v).expect("read from server");
        v
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).expect("write to server");
    }

    pub fn flags(&mut self, f: u32) {
        self.send(&f.to_be_bytes());
    }

    pub fn option(&mut self, opt: u32, data: &[u8]) {
        let h = OptionHeader { option: opt, len: data.len() as u32 }.encode();
        let mut m = h.to_vec();
        m.extend_from_slice(data);
        self.send(&m);
    }

    pub fn opt_reply(&mut self) -> OptReply {
        let h = OptionReplyHeader::decode(&self.read_n(OPTION_REPLY_HEADER_LEN)).expect("option reply header");
        let data = self.read_n(h.len as usize);
        OptReply { option: h.option, typ: h.reply_type, data }
    }

    /// Replies up to and including the final ACK or error.
    pub fn opt_replies(&mut self) -> Vec<OptReply> {
        let mut v = Vec::new();
        loop {
            let r = self.opt_reply();
            let fin = r.typ == REP_ACK || is_rep_error(r.typ);
            v.push(r);
            if fin {
                return v;
            }
        }
    }

    pub fn info_data(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut d = Vec::new();
        InfoRequest { name: name.as_bytes(), infos: infos.to_vec() }.encode(&mut d);
        d
    }

    pub fn meta_data(name: &str, queries: &[&str]) -> Vec<u8> {
        let mut d = Vec::new();
        MetaContextRequest { name: name.as_bytes(), queries: queries.iter().map(|q| q.as_bytes()).collect() }.encode(&mut d);
        d
    }

    /// Full negotiation the way libnbd does it; panics unless GO succeeds.
    pub fn negotiate(&mut self, export: &str, structured: bool, allocation: bool) -> Vec<OptReply> {
        self.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
        if structured {
            self.option(OPT_STRUCTURED_REPLY, &[]);
            assert_eq!(self.opt_reply().typ, REP_ACK);
            self.structured = true;
        }
        if allocation {
            self.option(OPT_SET_META_CONTEXT, &Self::meta_data(export, &[META_BASE_ALLOCATION]));
            let r = self.opt_replies();
            assert_eq!(r.len(), 2, "{r:?}");
            assert_eq!(r[0].typ, REP_META_CONTEXT);
        }
        self.option(OPT_GO, &Self::info_data(export, &[INFO_BLOCK_SIZE]));
        let r = self.opt_replies();
        assert_eq!(r.last().unwrap().typ, REP_ACK, "GO failed: {r:?}");
        for x in &r {
            if x.typ == REP_INFO {
                if let Info::Export { size, tflags } = decode_info(&x.data).unwrap() {
                    self.size = size;
                    self.tflags = tflags;
                }
            }
        }
        r
    }

    pub fn request(&mut self, typ: u16, flags: u16, cookie: u64, offset: u64, len: u32, payload: &[u8]) {
        let mut m = Request { flags, typ, cookie, offset, len }.encode().to_vec();
        m.extend_from_slice(payload);
        self.send(&m);
    }

    /// Read one whole reply. `read_len` is the data length to expect if the reply is
    /// a successful simple READ reply (simple replies do not carry their length).
    pub fn reply(&mut self, read_len: impl Fn(u64) -> usize) -> Reply {
        let first = self.read_n(4);
        let magic = u32::from_be_bytes(first[..4].try_into().unwrap());
        if magic == SIMPLE_REPLY_MAGIC {
            let mut b = first;
            b.extend(self.read_n(SIMPLE_REPLY_LEN - 4));
            let ReplyHeader::Simple { error, cookie } = ReplyHeader::decode(&b).unwrap() else { unreachable!() };
            let data = if error == 0 { self.read_n(read_len(cookie)) } else { Vec::new() };
            return Reply { cookie, error, data, ..Default::default() };
        }
        assert_eq!(magic, STRUCTURED_REPLY_MAGIC, "bad reply magic {magic:#x}");
        let mut rep = Reply { structured: true, ..Default::default() };
        let mut b = first;
        loop {
            b.extend(self.read_n(STRUCTURED_HEADER_LEN - b.len()));
            let ReplyHeader::Chunk(c) = ReplyHeader::decode(&b).unwrap() else { unreachable!() };
            rep.cookie = c.cookie;
            let payload = self.read_n(c.len as usize);
            match c.typ {
                REPLY_TYPE_NONE => assert!(payload.is_empty()),
                REPLY_TYPE_OFFSET_DATA => {
                    let (_, d) = decode_offset_data(&payload).unwrap();
                    rep.data.extend_from_slice(d);
                }
                REPLY_TYPE_BLOCK_STATUS => {
                    let (ctx, e) = decode_block_status(&payload).unwrap();
                    rep.context = Some(ctx);
                    rep.extents = e;
                }
                t if t & 0x8000 != 0 => {
                    let e = decode_error_payload(t, &payload).unwrap();
                    rep.error = e.error;
                    rep.message = e.message.to_vec();
                }
                t => panic!("unexpected chunk type {t}"),
            }
            if c.flags & REPLY_FLAG_DONE != 0 {
                return rep;
            }
            b = Vec::new();
            // Chunks of one reply may interleave with other replies in general; these
            // tests only have one structured reply in flight when they use this path.
        }
    }

    /// Reply to a request that carries no data.
    pub fn reply_nodata(&mut self) -> Reply {
        self.reply(|_| 0)
    }

    /// The server closed the connection (EOF or reset) with nothing more sent.
    pub fn expect_closed(&mut self) {
        let mut b = [0u8; 64];
        match self.s.read(&mut b) {
            Ok(0) => {}
            Ok(n) => panic!("expected the server to close, got {n} more bytes: {:?}", &b[..n]),
            Err(e) => {
                assert!(matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe), "expected close, got {e}")
            }
        }
    }

    pub fn write(&mut self, cookie: u64, offset: u64, data: &[u8], flags: u16) -> Reply {
        self.request(CMD_WRITE, flags, cookie, offset, data.len() as u32, data);
        self.reply_nodata()
    }

    pub fn read(&mut self, cookie: u64, offset: u64, len: u32) -> Reply {
        self.request(CMD_READ, 0, cookie, offset, len, &[]);
        self.reply(|_| len as usize)
    }
}

/// Deterministic test data.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Wait (up to 10 s) for a condition the server reaches asynchronously, e.g. a
/// counter updated after the socket is already closed.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
