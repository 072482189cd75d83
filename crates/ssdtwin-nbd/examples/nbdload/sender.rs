//! Issuing requests: random ranges this client may touch now, each registered before it is sent.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use ssdtwin_nbd::proto::*;

use super::client::{Client, Kind, Pending, State};
use super::config::LoadConfig;
use super::handshake::Session;
use super::pattern::{fill_unit, splitmix};
use super::transport::Stream;
use super::UNIT;

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        splitmix(&mut self.0)
    }
    pub fn below(&mut self, n: u64) -> u64 {
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

pub fn register(st: &mut State, kind: Kind, unit0: u64, units: u64) -> Req {
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
pub struct Req {
    pub kind: Kind,
    pub cookie: u64,
    pub unit0: u64,
    pub units: u64,
    pub generation: u32,
}

pub fn send_request(s: &mut Stream, c: &Client, r: Req, out: &mut Vec<u8>) -> io::Result<()> {
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

pub struct Plan<'a> {
    pub cfg: &'a LoadConfig,
    pub session: Session,
}

/// Issue random requests until `stop_at` or `ops` requests; false if the connection died.
pub fn run_ops(s: &mut Stream, c: &Client, plan: &Plan, rng: &mut Rng, ops: u64, stop_at: Instant) -> bool {
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
pub fn drain(c: &Client, timeout: Duration) -> bool {
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
