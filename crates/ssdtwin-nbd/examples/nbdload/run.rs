//! A run: open the abuse connections, probe the export, start the clients, wait for the
//! deadline, and report.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ssdtwin_nbd::proto::*;

use super::abuse::{count_closed, open_holds, open_stalls};
use super::client::{Client, Counts, Hists, State, UnitState};
use super::config::LoadConfig;
use super::connection::client_main;
use super::handshake::{handshake, Session};
use super::report::{report, Observed, Report};
use super::rss::{proc_memory_kib, RssSampler};
use super::transport::Stream;
use super::UNIT;

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
    let stalls_closed = count_closed(&mut stalls);
    let holds_closed = count_closed(&mut holds);
    let rss_end = cfg.pid.and_then(proc_memory_kib);
    let samples = sampler.map(|s| s.finish()).unwrap_or_default();
    drop(stalls);
    drop(holds);
    let seen = Observed { probe_info, rss0, rss_end, samples, stalls_opened, stalls_closed, holds_opened, holds_closed, abuse_errors };
    Ok(report(cfg, &clients, seen))
}
