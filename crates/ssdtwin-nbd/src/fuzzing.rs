//! Fuzz entry points. `fuzz/fuzz_targets/*.rs` call these with libFuzzer input, and
//! `tests/it/corpus.rs` replays every file of `fuzz/corpus/<target>/` through them, so
//! the corpus is a regression suite even where no nightly toolchain exists.
//!
//! Besides "must not panic", each entry point checks properties: decoders round-trip
//! through the encoders, validated requests respect the export's bounds, and every
//! option reply the state machine writes is well formed.

use std::io::Cursor;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::budget::{Budget, ConnBudget};
use crate::handshake::{Haggler, Policy, Step};
use crate::mem::{MemBackend, MemExport, Op};
use crate::pacer::PacerConfig;
use crate::proto::*;
use crate::server::run_connection;
use crate::stats::Stats;
use crate::tls::TlsMode;
use crate::transmission::{validate, Cmd, ConnCtx, Params};
use crate::wire::VecSink;

/// The names of the targets (and of the corpus directories).
pub const TARGETS: [&str; 4] = ["request", "reply", "option", "handshake"];

/// Run the target called `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "request" => request(data),
        "reply" => reply(data),
        "option" => option(data),
        "handshake" => handshake(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

/// Exports the stateful targets run against: a default writable one, a read-only one
/// with 4 KiB blocks, and one whose reads are paced (so the pacer thread runs too).
pub fn test_backend() -> MemBackend {
    MemBackend::new()
        .with_export(MemExport::new("disk", 256 << 10))
        .with_export(MemExport::new("ro", 64 << 10).read_only(true).block_sizes(4096, 4096, 65536))
        .with_export(MemExport::new("paced", 64 << 10).with_pacing(|op, _, _| match op {
            Op::Read => Some(Duration::from_micros(20)),
            _ => None,
        }))
}

fn byte(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// Request header decoding, and `validate` under session parameters taken from the
/// bytes after the header.
pub fn request(data: &[u8]) {
    let Ok(r) = Request::decode(data) else { return };
    assert_eq!(&r.encode()[..], &data[..REQUEST_LEN]);
    let x = &data[REQUEST_LEN..];
    let block_min = 1u32 << (byte(x, 0) % 17);
    let block_preferred = block_min.max(512) << (byte(x, 1) % 4);
    let block_max = block_preferred.saturating_mul(1 + byte(x, 2) as u32);
    let mut size = [0u8; 8];
    for (i, s) in size.iter_mut().enumerate() {
        *s = byte(x, 3 + i);
    }
    let p = Params {
        size: u64::from_be_bytes(size),
        block_min,
        block_max,
        tflags: u16::from_be_bytes([byte(x, 11), byte(x, 12)]) | TFLAG_HAS_FLAGS,
        structured: byte(x, 13) & 1 != 0,
        meta_allocation: byte(x, 13) & 2 != 0,
        can_fast_zero: byte(x, 13) & 4 != 0,
    };
    let within = |offset: u64, len: u32| {
        let end = offset.checked_add(len as u64).expect("validated range overflows");
        assert!(end <= p.size, "validated range beyond the export");
        assert_eq!(offset % block_min as u64, 0, "validated offset unaligned");
        assert!(len as u64 % block_min as u64 == 0 || end == p.size, "validated length unaligned");
    };
    let ro = p.tflags & TFLAG_READ_ONLY != 0;
    match validate(&r, &p) {
        Ok(Cmd::Read { offset, len }) => {
            within(offset, len);
            assert!(len <= block_max);
        }
        Ok(Cmd::Write { offset, len, .. }) => {
            within(offset, len);
            assert!(len <= block_max && !ro);
        }
        Ok(Cmd::Trim { offset, len, .. }) | Ok(Cmd::WriteZeroes { offset, len, .. }) => {
            within(offset, len);
            assert!(!ro);
        }
        Ok(Cmd::Cache { offset, len }) => within(offset, len),
        Ok(Cmd::BlockStatus { offset, len, .. }) => {
            within(offset, len);
            assert!(p.meta_allocation && len > 0);
        }
        Ok(Cmd::Flush) => assert!(p.tflags & TFLAG_SEND_FLUSH != 0),
        Err(rej) => assert!(rej.msg.len() <= MAX_STRING_LEN),
    }
}

/// Decoders of everything the server sends (used by clients and tests).
pub fn reply(data: &[u8]) {
    let _ = decode_greeting(data);
    if let Ok(h) = ReplyHeader::decode(data) {
        match h {
            ReplyHeader::Simple { error, cookie } => {
                assert_eq!(&encode_simple_reply(error, cookie)[..], &data[..SIMPLE_REPLY_LEN]);
            }
            ReplyHeader::Chunk(c) => {
                assert_eq!(&c.encode()[..], &data[..STRUCTURED_HEADER_LEN]);
                let payload = &data[STRUCTURED_HEADER_LEN..];
                match c.typ {
                    REPLY_TYPE_OFFSET_DATA => {
                        if let Ok((off, d)) = decode_offset_data(payload) {
                            assert_eq!(off.to_be_bytes(), payload[..8]);
                            assert_eq!(d.len() + 8, payload.len());
                        }
                    }
                    REPLY_TYPE_OFFSET_HOLE => {
                        let _ = decode_offset_hole(payload);
                    }
                    REPLY_TYPE_BLOCK_STATUS => {
                        if let Ok((ctx, ext)) = decode_block_status(payload) {
                            let mut again = ctx.to_be_bytes().to_vec();
                            for (l, f) in ext {
                                encode_extent(&mut again, l, f);
                            }
                            assert_eq!(again, payload);
                        }
                    }
                    t if t & 0x8000 != 0 => {
                        if let Ok(e) = decode_error_payload(t, payload) {
                            assert!(6 + e.message.len() <= payload.len());
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if let Ok(h) = OptionReplyHeader::decode(data) {
        if h.reply_type == REP_INFO {
            let _ = decode_info(&data[OPTION_REPLY_HEADER_LEN..]);
        }
    }
}

/// Option data decoders, then a sequence of options through the state machine:
/// input is `[client flags u8] ([option u32][len u16][data])*`.
pub fn option(data: &[u8]) {
    if let Ok(h) = OptionHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..OPTION_HEADER_LEN]);
    }
    if let Ok(r) = InfoRequest::decode(data) {
        let mut v = Vec::new();
        r.encode(&mut v);
        assert_eq!(v, data);
    }
    if let Ok(r) = MetaContextRequest::decode(data) {
        let mut v = Vec::new();
        r.encode(&mut v);
        assert_eq!(v, data);
    }

    let backend = test_backend();
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let Ok(h) = Haggler::new(&backend, flags as u32 & 3) else {
        return;
    };
    // Bits 2-3 pick the TLS mode, so the TLS_REQD and STARTTLS answers are covered.
    let mut h = h.with_tls(match (flags >> 2) & 3 {
        1 => TlsMode::On,
        2 => TlsMode::Require,
        _ => TlsMode::Off,
    });
    let mut out = Vec::new();
    while rest.len() >= 6 {
        let opt = u32::from_be_bytes(rest[0..4].try_into().unwrap());
        let len = (u16::from_be_bytes(rest[4..6].try_into().unwrap()) as usize).min(rest.len() - 6);
        let d = &rest[6..6 + len];
        rest = &rest[6 + len..];
        out.clear();
        let step = h.option(opt, d, &mut out);
        if opt == OPT_EXPORT_NAME {
            // Either a hard disconnect or the 10/134-byte export reply; nothing else.
            match step {
                Err(_) => assert!(out.is_empty()),
                Ok(Step::Enter(_)) => {
                    assert!(out.len() == EXPORT_NAME_REPLY_LEN || out.len() == EXPORT_NAME_REPLY_LEN + 124)
                }
                Ok(_) => panic!("EXPORT_NAME must end the handshake"),
            }
            return;
        }
        // Every reply is framed, answers this option, and the last one is final.
        let mut at = 0;
        let mut last = None;
        while at < out.len() {
            let rh = OptionReplyHeader::decode(&out[at..]).expect("well-formed option reply");
            assert_eq!(rh.option, opt);
            at += OPTION_REPLY_HEADER_LEN + rh.len as usize;
            assert!(at <= out.len(), "reply length beyond the bytes written");
            last = Some(rh.reply_type);
            if rh.reply_type == REP_INFO {
                let start = at - rh.len as usize;
                decode_info(&out[start..at]).expect("decodable REP_INFO");
            }
        }
        let last = last.expect("every option gets a reply");
        assert!(last == REP_ACK || is_rep_error(last), "final reply {last:#x} is neither ACK nor error");
        match step {
            Ok(Step::Continue) => {}
            Ok(Step::Close) | Ok(Step::Enter(_)) | Ok(Step::StartTls) => return,
            Err(_) => return,
        }
    }
}

/// A whole connection over an in-memory duplex: the handshake state machine and, if
/// the bytes get that far, the transmission phase.
pub fn handshake(data: &[u8]) {
    let out = session_output(data);
    assert_eq!(decode_greeting(&out), Ok(SERVER_HANDSHAKE_FLAGS), "server must greet first");
}

/// Run a connection on `data` (client to server) against [`test_backend`] and return
/// everything the server sent.
pub fn session_output(data: &[u8]) -> Vec<u8> {
    let backend = test_backend();
    let stats = Arc::new(Stats::default());
    let ctx = ConnCtx {
        shutting_down: Arc::new(AtomicBool::new(false)),
        stats: stats.clone(),
        pacing: PacerConfig { late_threshold: Duration::from_millis(1), spin: Duration::ZERO, parked_grace: Duration::from_millis(100) },
        budget: ConnBudget::new(Budget::new(64 << 20, 16 << 20, stats)),
    };
    let sink = VecSink::default();
    // No TLS transport here: the policy is plain (STARTTLS gets ERR_UNSUP).
    let policy = Policy { tls_mode: TlsMode::Off, tls: None, deadline: None };
    run_connection(Cursor::new(data), sink.clone(), &backend, &ctx, policy);
    let out = sink.bytes.lock().unwrap_or_else(|e| e.into_inner());
    out.clone()
}
