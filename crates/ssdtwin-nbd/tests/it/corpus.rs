//! The fuzz corpus as a regression suite: every file under `fuzz/corpus/<target>/`
//! (seeds plus whatever fuzzing runs have added) goes through the same entry point
//! the fuzz target calls. This needs no nightly toolchain.
//!
//! The seeds are generated here from the crate's encoders. After changing them, run
//! `UPDATE_CORPUS=1 cargo test -p ssdtwin-nbd --test it corpus` to rewrite the files.

use std::path::PathBuf;

use ssdtwin_nbd::fuzzing;
use ssdtwin_nbd::proto::*;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// A client byte stream under construction.
#[derive(Default)]
struct Stream(Vec<u8>);

impl Stream {
    fn flags(mut self, f: u32) -> Self {
        self.0.extend_from_slice(&f.to_be_bytes());
        self
    }
    fn opt(mut self, o: u32, data: &[u8]) -> Self {
        self.0.extend_from_slice(&OptionHeader { option: o, len: data.len() as u32 }.encode());
        self.0.extend_from_slice(data);
        self
    }
    fn go(self, o: u32, name: &str, infos: &[u16]) -> Self {
        let mut d = Vec::new();
        InfoRequest { name: name.as_bytes(), infos: infos.to_vec() }.encode(&mut d);
        self.opt(o, &d)
    }
    fn meta(self, o: u32, name: &str, q: &[&str]) -> Self {
        let mut d = Vec::new();
        MetaContextRequest { name: name.as_bytes(), queries: q.iter().map(|s| s.as_bytes()).collect() }.encode(&mut d);
        self.opt(o, &d)
    }
    fn req(mut self, typ: u16, flags: u16, offset: u64, len: u32) -> Self {
        self.0.extend_from_slice(&Request { flags, typ, cookie: self.0.len() as u64, offset, len }.encode());
        if typ == CMD_WRITE {
            self.0.extend((0..len).map(|i| (i * 7) as u8));
        }
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
}

fn libnbd_like() -> Stream {
    Stream::default().flags(3).opt(OPT_STRUCTURED_REPLY, &[]).meta(OPT_SET_META_CONTEXT, "", &[META_BASE_ALLOCATION]).go(
        OPT_GO,
        "",
        &[INFO_BLOCK_SIZE],
    )
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut v: Vec<(&str, &str, Vec<u8>)> = Vec::new();

    // ---- handshake: whole client streams
    let s = libnbd_like()
        .req(CMD_WRITE, 0, 0, 4096)
        .req(CMD_READ, CMD_FLAG_DF, 0, 4096)
        .req(CMD_BLOCK_STATUS, 0, 0, 65536)
        .req(CMD_BLOCK_STATUS, CMD_FLAG_REQ_ONE, 4096, 512)
        .req(CMD_TRIM, CMD_FLAG_FUA, 8192, 4096)
        .req(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 0, 1024)
        .req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 65536)
        .req(CMD_CACHE, 0, 0, 65536)
        .req(CMD_FLUSH, 0, 0, 0)
        .req(CMD_DISC, 0, 0, 0);
    v.push(("handshake", "libnbd-structured", s.0));
    let s = Stream::default()
        .flags(3)
        .opt(OPT_STRUCTURED_REPLY, &[])
        .meta(OPT_LIST_META_CONTEXT, "disk", &[])
        .meta(OPT_SET_META_CONTEXT, "disk", &[META_BASE_ALLOCATION, "qemu:dirty-bitmap:x"])
        .go(OPT_GO, "disk", &[INFO_BLOCK_SIZE])
        .req(CMD_READ, 0, 0, 512)
        .req(CMD_WRITE, CMD_FLAG_FUA, 65536, 8192)
        .req(CMD_FLUSH, 0, 0, 0)
        .req(CMD_DISC, 0, 0, 0);
    v.push(("handshake", "qemu-like", s.0));
    let s = Stream::default()
        .flags(3)
        .go(OPT_GO, "", &[INFO_BLOCK_SIZE])
        .req(CMD_WRITE, 0, 4096, 4096)
        .req(CMD_READ, 0, 4096, 4096)
        .req(CMD_READ, 0, 0, 0);
    v.push(("handshake", "fio-simple-eof", s.0));
    let s = Stream::default().flags(1).opt(OPT_EXPORT_NAME, b"disk").req(CMD_READ, 0, 0, 512).req(CMD_DISC, 0, 0, 0);
    v.push(("handshake", "export-name-zeroes", s.0));
    let s = Stream::default()
        .flags(3)
        .go(OPT_INFO, "ro", &[INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE])
        .go(OPT_GO, "ro", &[INFO_BLOCK_SIZE])
        .req(CMD_WRITE, 0, 0, 4096)
        .req(CMD_TRIM, 0, 0, 4096)
        .req(CMD_READ, 0, 0, 4096)
        .req(CMD_READ, 0, 512, 512);
    v.push(("handshake", "read-only", s.0));
    let s = Stream::default()
        .flags(3)
        .opt(OPT_LIST, &[])
        .opt(OPT_LIST, b"x")
        .opt(OPT_STARTTLS, &[])
        .opt(99, b"unknown")
        .opt(OPT_EXTENDED_HEADERS, &[])
        .go(OPT_GO, "nope", &[])
        .opt(OPT_ABORT, &[]);
    v.push(("handshake", "list-unknown-abort", s.0));
    v.push(("handshake", "bad-client-flags", Stream::default().flags(0x7).0));
    let mut bad_opt = OptionHeader { option: OPT_LIST, len: 0 }.encode();
    bad_opt[0] = b'X';
    v.push(("handshake", "bad-option-magic", Stream::default().flags(3).raw(&bad_opt).0));
    let s = Stream::default()
        .flags(3)
        .go(OPT_GO, "disk", &[])
        .req(CMD_READ, 0, 256 << 10, 512)
        .req(CMD_WRITE, 0, (256 << 10) - 512, 1024)
        .req(CMD_READ, 0, 100, 512)
        .req(40, 0, 0, 0)
        .req(CMD_READ, 1 << 9, 0, 512)
        .req(CMD_READ, 0, u64::MAX - 100, 512)
        .req(CMD_BLOCK_STATUS, 0, 0, 512)
        .raw(&[0x25, 0x60, 0x95, 0x14]);
    v.push(("handshake", "errors-then-bad-magic", s.0));
    let s = Stream::default()
        .flags(3)
        .opt(OPT_STRUCTURED_REPLY, &[])
        .go(OPT_GO, "paced", &[])
        .req(CMD_READ, 0, 0, 4096)
        .req(CMD_READ, 0, 4096, 4096)
        .req(CMD_WRITE, 0, 0, 512);
    v.push(("handshake", "paced-reads", s.0));
    // An oversized WRITE whose payload never comes: the server must give up cleanly.
    let s = Stream::default()
        .flags(3)
        .go(OPT_GO, "", &[])
        .raw(&Request { flags: 0, typ: CMD_WRITE, cookie: 1, offset: 0, len: 40 << 20 }.encode())
        .raw(&[1; 100]);
    v.push(("handshake", "oversized-write-truncated", s.0));

    // ---- option: decoders and the state machine ([flags][opt u32][len u16][data])*
    let mut d = Vec::new();
    InfoRequest { name: b"disk", infos: vec![INFO_BLOCK_SIZE, INFO_NAME, INFO_DESCRIPTION] }.encode(&mut d);
    v.push(("option", "info-request", d.clone()));
    let mut m = Vec::new();
    MetaContextRequest { name: b"", queries: vec![b"base:allocation", b"base:"] }.encode(&mut m);
    v.push(("option", "meta-request", m.clone()));
    let seq = |opts: &[(u32, &[u8])]| {
        let mut b = vec![3u8];
        for (o, d) in opts {
            b.extend_from_slice(&o.to_be_bytes());
            b.extend_from_slice(&(d.len() as u16).to_be_bytes());
            b.extend_from_slice(d);
        }
        b
    };
    v.push(("option", "sequence-go", seq(&[(OPT_STRUCTURED_REPLY, &[]), (OPT_SET_META_CONTEXT, &m), (OPT_LIST, &[]), (OPT_GO, &d)])));
    v.push(("option", "sequence-list-meta", seq(&[(OPT_LIST_META_CONTEXT, &m), (OPT_INFO, &d), (77, b"zz")])));
    v.push(("option", "sequence-export-name", seq(&[(OPT_STARTTLS, &[]), (OPT_EXPORT_NAME, b"ro")])));

    // ---- request: header + [min exp, pref shift, max mult, size u64, tflags u16, bits]
    let params = |min_exp: u8, size: u64, tflags: u16, bits: u8| {
        let mut p = vec![min_exp, 3, 8];
        p.extend_from_slice(&size.to_be_bytes());
        p.extend_from_slice(&tflags.to_be_bytes());
        p.push(bits);
        p
    };
    let all = 0x0dff;
    for (name, r, p) in [
        ("read", Request { flags: 0, typ: CMD_READ, cookie: 1, offset: 4096, len: 4096 }, params(9, 1 << 20, all, 0)),
        ("write-fua", Request { flags: CMD_FLAG_FUA, typ: CMD_WRITE, cookie: 2, offset: 0, len: 512 }, params(9, 1 << 20, all, 1)),
        ("write-ro", Request { flags: 0, typ: CMD_WRITE, cookie: 3, offset: 0, len: 512 }, params(12, 1 << 20, 0x3, 0)),
        (
            "zeroes-fast",
            Request { flags: CMD_FLAG_FAST_ZERO | CMD_FLAG_NO_HOLE, typ: CMD_WRITE_ZEROES, cookie: 4, offset: 0, len: 8192 },
            params(9, 1 << 20, all, 4),
        ),
        (
            "block-status",
            Request { flags: CMD_FLAG_REQ_ONE, typ: CMD_BLOCK_STATUS, cookie: 5, offset: 0, len: 1 << 20 },
            params(9, 1 << 20, all, 3),
        ),
        ("overflow", Request { flags: 0, typ: CMD_READ, cookie: 6, offset: u64::MAX - 511, len: 4096 }, params(0, u64::MAX, all, 0)),
        ("flush", Request { flags: 0, typ: CMD_FLUSH, cookie: 7, offset: 0, len: 0 }, params(9, 4096, all, 0)),
        ("unaligned-tail", Request { flags: 0, typ: CMD_READ, cookie: 8, offset: 512, len: 488 }, params(9, 1000, all, 0)),
    ] {
        let mut b = r.encode().to_vec();
        b.extend(p);
        v.push(("request", name, b));
    }

    // ---- reply: everything a client decodes
    v.push(("reply", "greeting", encode_greeting(SERVER_HANDSHAKE_FLAGS).to_vec()));
    v.push(("reply", "simple-error", encode_simple_reply(22, 99).to_vec()));
    let mut b = encode_offset_data_header(3, 4096, 16, true).to_vec();
    b.extend_from_slice(&[0xaa; 16]);
    v.push(("reply", "offset-data", b));
    let mut b = encode_error_chunk_header(4, 5, 8).to_vec();
    b.extend_from_slice(b"io error");
    v.push(("reply", "error-chunk", b));
    let mut b = encode_block_status_header(5, 1, 2).to_vec();
    encode_extent(&mut b, 65536, STATE_HOLE | STATE_ZERO);
    encode_extent(&mut b, 4096, 0);
    v.push(("reply", "block-status", b));
    let mut b = ChunkHeader { flags: 0, typ: REPLY_TYPE_OFFSET_HOLE, cookie: 6, len: 12 }.encode().to_vec();
    b.extend_from_slice(&4096u64.to_be_bytes());
    b.extend_from_slice(&512u32.to_be_bytes());
    v.push(("reply", "offset-hole", b));
    let mut b = ChunkHeader { flags: 1, typ: REPLY_TYPE_ERROR_OFFSET, cookie: 7, len: 14 }.encode().to_vec();
    b.extend_from_slice(&5u32.to_be_bytes());
    b.extend_from_slice(&0u16.to_be_bytes());
    b.extend_from_slice(&512u64.to_be_bytes());
    v.push(("reply", "error-offset", b));
    let mut b = Vec::new();
    encode_info_export(&mut b, OPT_GO, 1 << 30, 0x0d6d);
    v.push(("reply", "info-export", b));
    let mut b = Vec::new();
    encode_info_block_size(&mut b, OPT_GO, 512, 65536, 32 << 20);
    v.push(("reply", "info-block-size", b));
    v
}

#[test]
fn corpus_replays_through_every_target() {
    let root = corpus_dir();
    if std::env::var_os("UPDATE_CORPUS").is_some() {
        for (target, name, bytes) in seeds() {
            let dir = root.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        }
    }
    // The committed seeds match the generator (run with UPDATE_CORPUS=1 if not).
    for (target, name, bytes) in seeds() {
        let p = root.join(target).join(format!("seed-{name}"));
        let on_disk = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_CORPUS=1", p.display()));
        assert!(on_disk == bytes, "{} is stale; run with UPDATE_CORPUS=1", p.display());
    }
    for target in fuzzing::TARGETS {
        let dir = root.join(target);
        let mut n = 0;
        let mut files: Vec<_> =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| fuzzing::run(target, &data));
            assert!(r.is_ok(), "fuzz target {target} panicked on {}", f.display());
            n += 1;
        }
        assert!(n > 0, "no corpus for target {target}");
    }
}

/// The stream the main seed is built from really gets through the handshake into
/// transmission (so the corpus exercises request handling, not just option parsing):
/// the last thing the server sends is the structured reply to the READ.
#[test]
fn libnbd_like_stream_reaches_transmission() {
    let s = libnbd_like().req(CMD_WRITE, 0, 4096, 4096).req(CMD_READ, 0, 4096, 4096).req(CMD_DISC, 0, 0, 0);
    let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let out = fuzzing::session_output(&s.0);
    let tail = &out[out.len() - 28 - 4096..];
    match ReplyHeader::decode(tail).unwrap() {
        ReplyHeader::Chunk(c) => {
            assert_eq!((c.typ, c.flags, c.len), (REPLY_TYPE_OFFSET_DATA, REPLY_FLAG_DONE, 8 + 4096));
        }
        other => panic!("expected an OFFSET_DATA chunk, got {other:?}"),
    }
    assert_eq!(&tail[20..28], &4096u64.to_be_bytes());
    assert_eq!(&tail[28..], &payload[..]);
}
