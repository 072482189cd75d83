//! A client's connections: connect with back-off, one connection's life (a receiver thread
//! beside the sender), reconnecting until the deadline, and the final read-back.

use std::io::Write;
use std::net::Shutdown;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ssdtwin_nbd::proto::*;

use super::client::{Client, Kind};
use super::config::LoadConfig;
use super::handshake::{handshake, Session};
use super::receiver::receiver;
use super::sender::{drain, register, run_ops, send_request, Plan, Rng};
use super::transport::Stream;
use super::UNIT;

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

pub fn client_main(cfg: &LoadConfig, c: Arc<Client>, deadline: Instant) {
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
        // Reads of up to 1 MiB, and no longer than the export takes (a longer READ is
        // EOVERFLOW: the read-back then checked almost nothing on a server whose
        // block_max is under 1 MiB, a served log stack's 128 KiB).
        let most = (sess.block_max as u64 / UNIT).clamp(1, 256);
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
                while u < n && known(u) && u - start < most {
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
