//! One client's state: what each unit of its region holds (acknowledged and uncertain
//! generations), its requests in flight, latencies and counts; completing and abandoning requests.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::pattern::unit_generation;
use super::UNIT;

/// Blocks written by a request lost in an abrupt disconnect are not rewritten for this
/// long: the server may still be applying it on the old connection's thread.
const FENCE: Duration = Duration::from_secs(5);

#[derive(Clone, Default)]
pub struct UnitState {
    /// Acknowledged generation; 0: never written in this run (content unknown).
    pub gen: u32,
    /// Writes since then of unknown outcome (lost in an abrupt disconnect, or
    /// failed): any of them may be what the unit holds.
    pub maybe: Vec<u32>,
    pub readers: u16,
    pub writing: bool,
    pub fenced_until: Option<Instant>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Read,
    Write,
    Flush,
}

pub struct Pending {
    pub kind: Kind,
    pub unit0: u64,
    pub units: u64,
    pub generation: u32,
    pub t0: Instant,
    pub data: Vec<u8>,
    pub error: u32,
}

pub struct Hists {
    pub read: Histogram<u64>,
    pub write: Histogram<u64>,
    pub flush: Histogram<u64>,
}

impl Hists {
    pub fn new() -> Hists {
        let h = || Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
        Hists { read: h(), write: h(), flush: h() }
    }
    pub fn of(&mut self, k: Kind) -> &mut Histogram<u64> {
        match k {
            Kind::Read => &mut self.read,
            Kind::Write => &mut self.write,
            Kind::Flush => &mut self.flush,
        }
    }
    pub fn add(&mut self, o: &Hists) {
        let _ = self.read.add(&o.read);
        let _ = self.write.add(&o.write);
        let _ = self.flush.add(&o.flush);
    }
}

#[derive(Default, Clone)]
pub struct Counts {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub errors: HashMap<u32, u64>,
    pub reconnects_clean: u64,
    pub reconnects_abrupt: u64,
    pub connect_failures: u64,
    pub first_connect_error: Option<String>,
    pub units_verified_inflight: u64,
    pub units_unverifiable: u64,
    pub units_verified_final: u64,
    pub units_uncertain_final: u64,
    pub mismatches: u64,
    pub mismatch_examples: Vec<String>,
    pub protocol_errors: Vec<String>,
}

pub struct State {
    pub units: Vec<UnitState>,
    pub inflight: HashMap<u64, Pending>,
    pub next_cookie: u64,
    pub next_gen: u32,
    pub dead: bool,
    pub hists: Hists,
    pub counts: Counts,
}

pub struct Client {
    pub id: u32,
    pub run: u64,
    /// First unit of this client's region, in units from the start of the export.
    pub base_unit: u64,
    pub m: Mutex<State>,
    pub cv: Condvar,
}

impl Client {
    pub fn lock(&self) -> MutexGuard<'_, State> {
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

    pub fn complete(&self, cookie: u64, verify_final: bool) {
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
        release_units(&mut st.units, &p, Release::Replied { ok: p.error == 0 });
        match p.kind {
            Kind::Read if p.error == 0 => st.counts.bytes_read += p.units * UNIT,
            Kind::Write if p.error == 0 => st.counts.bytes_written += p.units * UNIT,
            _ => {}
        }
        drop(st);
        self.cv.notify_all();
    }

    /// The connection is gone: every request still in flight has an unknown outcome.
    pub fn abandon_inflight(&self) {
        let mut st = self.lock();
        let now = Instant::now();
        let pending: Vec<Pending> = st.inflight.drain().map(|(_, p)| p).collect();
        for p in pending {
            release_units(&mut st.units, &p, Release::Abandoned { fenced_until: now + FENCE });
        }
        drop(st);
        self.cv.notify_all();
    }
}

/// How a request hands its units back.
enum Release {
    /// Its reply came: a write that succeeded is now the unit's data; one that failed may or
    /// may not have landed.
    Replied { ok: bool },
    /// Its connection died first: a write may or may not have landed, and the unit is fenced
    /// until the server has surely finished with it.
    Abandoned { fenced_until: Instant },
}

/// The end of a request on its units: a read stops reading them, a write stops writing them
/// and records what each unit may now hold.
fn release_units(units: &mut [UnitState], p: &Pending, how: Release) {
    for s in &mut units[p.unit0 as usize..(p.unit0 + p.units) as usize] {
        match p.kind {
            Kind::Read => s.readers -= 1,
            Kind::Write => {
                s.writing = false;
                match how {
                    Release::Replied { ok: true } => {
                        s.gen = p.generation;
                        s.maybe.clear();
                    }
                    Release::Replied { ok: false } => s.maybe.push(p.generation),
                    Release::Abandoned { fenced_until } => {
                        s.maybe.push(p.generation);
                        s.fenced_until = Some(fenced_until);
                    }
                }
            }
            Kind::Flush => {}
        }
    }
}
