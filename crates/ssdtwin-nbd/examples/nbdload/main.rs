//! nbdload: a load and abuse generator for any NBD server.
//!
//! ```text
//! cargo run --release -p ssdtwin-nbd --example nbdload -- nbd://127.0.0.1:10809/mem \
//!     --clients 32 --duration 300 --pid $(pidof memserve)
//! cargo run --release -p ssdtwin-nbd --example nbdload -- 'nbd+unix:///ns1?socket=/tmp/s.sock' ...
//! ```
//!
//! Many connections mix READs, WRITEs and FLUSHes at a queue depth each, and disconnect
//! and reconnect now and then (half of the time cleanly with `NBD_CMD_DISC` after every
//! reply, half abruptly with requests in flight). Every write carries a verifiable
//! pattern (run, client, block, generation); every read is checked against what was
//! acknowledged, and at the end each client flushes and reads back everything it wrote.
//! A write left unacknowledged by an abrupt disconnect may or may not have happened, so
//! either content is accepted for it (and its blocks are not rewritten for 5 s, so a
//! server still finishing the old connection's request cannot overwrite newer data).
//!
//! Reported: operations and latency percentiles per type (hdrhistogram), reconnects,
//! error replies, connect/handshake failures, verification (zero loss expected), and
//! with `--pid` the server's VmRSS every second and its VmHWM.
//!
//! Abuse, alongside the load: `--stall N` opens N connections that each pipeline
//! `--stall-reads K` READs of `--stall-bs` bytes and never read a reply; `--hold N`
//! opens N connections first and leaves them silent (no handshake).
//!
//! `--help` lists the options. Exit status: 0 clean, 1 data mismatch (loss), 2 bad
//! usage or no connection could be made, 3 errors without loss (`--strict`).
//!
//! The modules, one concept each: `config` (the target URI and the settings), `transport`
//! and `handshake` (a connection), `pattern` (a unit's verifiable content), `client` (a
//! client's units, requests in flight and counts), `sender` and `receiver` (the two sides
//! of a connection), `connection` (a client's connections over the run and its final
//! read-back), `abuse` (stalling and silent connections), `rss` (the server's memory),
//! `run` and `report`.

mod abuse;
mod client;
mod config;
mod connection;
mod handshake;
mod pattern;
mod receiver;
mod report;
mod rss;
mod run;
mod sender;
mod transport;

use std::time::Duration;

pub use config::{LoadConfig, Target};
pub use handshake::Session;
pub use report::Report;
pub use rss::proc_memory_kib;
pub use run::run;

/// Pattern granularity: every request covers whole units, each stamped on its own.
pub const UNIT: u64 = 4096;

// ------------------------------------------------------------------------- CLI

const HELP: &str = "\
nbdload TARGET [OPTIONS]: load and abuse generator for NBD servers

TARGET: nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH

  --clients N           concurrent connections (default 8; 0 with --stall/--hold only)
  --duration SECS       run time (default 10)
  --qd N                requests in flight per connection (default 16)
  --bs LIST             request sizes, multiples of 4k, e.g. 4k,64k,1m (default)
  --mix R,W,F           percent READ,WRITE,FLUSH (default 60,35,5)
  --disconnect-every N  reconnect after ~N requests, half clean, half abrupt (default 2000; 0 never)
  --region BYTES        bytes of the export each client uses (default: an equal share, <= 256M)
  --seed N              random seed (default 1)
  --simple              no structured replies (simple replies only)
  --pid PID             sample the server's VmRSS each second, VmHWM at the end
  --stall N             N extra connections that pipeline READs and never read replies
  --stall-reads K       READs per stalling connection (default 8)
  --stall-bs BYTES      size of each stalling READ (default 32M)
  --hold N              N extra silent connections opened first (no handshake)
  --json                print the report as JSON on stdout
  --strict              exit 3 if any request failed or any connect failed
";

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>().map(|n| n * mult).map_err(|_| format!("{s:?} is not a size (e.g. 4k, 1m)"))
}

fn parse_args(args: &[String]) -> Result<(LoadConfig, bool, bool), String> {
    let mut target = None;
    let mut rest = Vec::new();
    for a in args {
        if target.is_none() && !a.starts_with("--") {
            target = Some(Target::parse(a)?);
        } else {
            rest.push(a.clone());
        }
    }
    let mut cfg = LoadConfig::new(target.ok_or("give a target URI (see --help)")?);
    let (mut json_out, mut strict) = (false, false);
    let mut it = rest.into_iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String, what: &str| v.parse::<u64>().map_err(|_| format!("{what}: {v:?} is not a whole number"));
        match a.as_str() {
            "--clients" => cfg.clients = num(val()?, "--clients")? as usize,
            "--duration" => cfg.duration = Duration::from_secs_f64(val()?.parse::<f64>().map_err(|_| "--duration: seconds".to_string())?),
            "--qd" => cfg.qd = num(val()?, "--qd")?.clamp(1, 1024) as usize,
            "--bs" => cfg.sizes = val()?.split(',').map(|x| parse_size(x).map(|n| n as u32)).collect::<Result<_, _>>()?,
            "--mix" => {
                let v: Vec<u32> =
                    val()?.split(',').map(|x| x.trim().parse::<u32>().map_err(|_| format!("--mix: {x:?}"))).collect::<Result<_, _>>()?;
                let [r, w, f] = v[..] else {
                    return Err("--mix wants R,W,F".into());
                };
                (cfg.mix_read, cfg.mix_write, cfg.mix_flush) = (r, w, f);
            }
            "--disconnect-every" => cfg.disconnect_every = num(val()?, "--disconnect-every")?,
            "--region" => cfg.region_bytes = Some(parse_size(&val()?)?),
            "--seed" => cfg.seed = num(val()?, "--seed")?,
            "--simple" => cfg.structured = false,
            "--pid" => cfg.pid = Some(num(val()?, "--pid")? as u32),
            "--stall" => cfg.stall = num(val()?, "--stall")? as usize,
            "--stall-reads" => cfg.stall_reads = num(val()?, "--stall-reads")? as usize,
            "--stall-bs" => cfg.stall_bytes = parse_size(&val()?)?.min(u32::MAX as u64) as u32,
            "--hold" => cfg.hold = num(val()?, "--hold")? as usize,
            "--json" => json_out = true,
            "--strict" => strict = true,
            other => return Err(format!("unknown option {other} (see --help)")),
        }
    }
    Ok((cfg, json_out, strict))
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{HELP}");
        return;
    }
    let (cfg, json_out, strict) = match parse_args(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("nbdload: {e}");
            std::process::exit(2);
        }
    };
    match run(&cfg) {
        Ok(r) => {
            eprint!("{}", r.text);
            if json_out {
                println!("{}", serde_json::to_string_pretty(&r.json).expect("json"));
            }
            if r.mismatches > 0 {
                std::process::exit(1);
            }
            if strict && (r.errors > 0 || r.connect_failures > 0) {
                std::process::exit(3);
            }
        }
        Err(e) => {
            eprintln!("nbdload: {e}");
            std::process::exit(2);
        }
    }
}
