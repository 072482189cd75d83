//! A connection's receiving thread: simple and structured replies, matched to their requests.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use ssdtwin_nbd::proto::*;

use super::client::{Client, Kind};
use super::handshake::io_ctx;
use super::transport::Stream;
use super::UNIT;

fn read_n(s: &mut Stream, n: usize) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; n];
    s.read_exact(&mut v).map_err(io_ctx("reading a reply"))?;
    Ok(v)
}

/// Read replies until the connection ends; `final_pass` marks the verification phase.
pub fn receiver(mut s: Stream, c: Arc<Client>, final_pass: Arc<AtomicBool>) {
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
