//! The fixed-newstyle handshake: the greeting, options, and `NBD_OPT_GO`'s answer.

use std::io::{self, Read, Write};

use ssdtwin_nbd::proto::*;

use super::transport::Stream;

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

pub fn io_ctx(what: &'static str) -> impl Fn(io::Error) -> String {
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
pub fn handshake(s: &mut Stream, export: &str, want_structured: bool) -> Result<Session, String> {
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
