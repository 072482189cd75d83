//! Abuse beside the load: connections that pipeline big READs and never read a reply, and
//! silent connections that never handshake.

use std::io::{self, Read, Write};
use std::time::Duration;

use ssdtwin_nbd::proto::*;

use super::config::LoadConfig;
use super::handshake::handshake;
use super::transport::Stream;

/// Connections that pipeline big READs and never read a reply.
pub fn open_stalls(cfg: &LoadConfig, errors: &mut Vec<String>) -> Vec<Stream> {
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
pub fn open_holds(cfg: &LoadConfig, errors: &mut Vec<String>) -> Vec<Stream> {
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
pub fn count_closed(streams: &mut [Stream]) -> usize {
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
