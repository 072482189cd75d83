//! Serve an in-memory export for manual poking:
//!
//! ```text
//! cargo run --release -p ssdtwin-nbd --example memserve -- --size 1G --tcp 127.0.0.1:10809
//! nbdinfo nbd://127.0.0.1:10809/mem
//! ```
//!
//! Options: `--size BYTES[K|M|G]` (default 1G), `--name NAME` (default `mem`),
//! `--tcp ADDR` and/or `--unix PATH` (default `--tcp 127.0.0.1:10809`), `--read-only`,
//! `--latency-us N` (hold every read and write reply N µs, to see pacing),
//! `--spin-us N` (busy-wait the last N µs before a paced reply is due),
//! `--block-sizes MIN,PREF,MAX`, `--verbose`, and the server's limits and security:
//! `--max-connections N`, `--max-inflight BYTES`, `--handshake-timeout SECS`,
//! `--send-timeout SECS`, `--tls off|on|require`, `--tls-certificates DIR`,
//! `--tls-verify-peer`, `--unix-group GROUP`. Stops cleanly on Ctrl-C or SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use ssdtwin_nbd::{MemBackend, MemExport, Server, ServerConfig, TlsMode};

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        Some((i, 'T' | 't')) => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<u64>().map(|n| n * mult).map_err(|e| format!("bad size {s:?}: {e}"))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("memserve: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut size = 1u64 << 30;
    let mut name = "mem".to_string();
    let mut tcp = Vec::new();
    let mut unix = Vec::new();
    let mut read_only = false;
    let mut latency_us = 0u64;
    let mut blocks = (512u32, 4096u32, 32u32 << 20);
    let mut verbose = false;
    let mut spin_us = 0u64;
    let mut cfg = ServerConfig::default();
    let secs = |v: String| -> Result<Duration, String> {
        v.parse::<f64>().ok().filter(|s| *s >= 0.0).map(Duration::from_secs_f64).ok_or_else(|| format!("{v:?} is not a number of seconds"))
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--size" => size = parse_size(&val()?)?,
            "--name" => name = val()?,
            "--tcp" => tcp.push(val()?),
            "--unix" => unix.push(val()?),
            "--read-only" => read_only = true,
            "--latency-us" => latency_us = val()?.parse()?,
            "--block-sizes" => {
                let v: Vec<u32> = val()?.split(',').map(|x| parse_size(x).map(|n| n as u32)).collect::<Result<_, _>>()?;
                if v.len() != 3 {
                    return Err("--block-sizes wants MIN,PREF,MAX".into());
                }
                blocks = (v[0], v[1], v[2]);
            }
            "--verbose" => verbose = true,
            "--spin-us" => spin_us = val()?.parse()?,
            "--max-connections" => cfg.max_connections = val()?.parse()?,
            "--max-inflight" => cfg.max_inflight_bytes = parse_size(&val()?)? as usize,
            "--handshake-timeout" => cfg.handshake_timeout = secs(val()?)?,
            "--send-timeout" => cfg.send_timeout = secs(val()?)?,
            "--tls" => cfg.tls = val()?.parse::<TlsMode>()?,
            "--tls-certificates" => cfg.tls_certificates = Some(val()?.into()),
            "--tls-verify-peer" => cfg.tls_verify_peer = true,
            "--unix-group" => cfg.unix_socket_group = Some(val()?),
            "-h" | "--help" => {
                println!("see the doc comment at the top of examples/memserve.rs");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if tcp.is_empty() && unix.is_empty() {
        tcp.push("127.0.0.1:10809".into());
    }

    // Block the stop signals in every thread (the server's threads inherit the mask)
    // so that only the sigwait below receives them.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }

    let mut export = MemExport::new(name.clone(), size).read_only(read_only).block_sizes(blocks.0, blocks.1, blocks.2);
    if latency_us > 0 {
        let d = Duration::from_micros(latency_us);
        export = export.with_latency(d, d);
    }
    let backend = Arc::new(MemBackend::new().with_export(export));
    let mut server = Server::new(backend).with_config(ServerConfig { verbose, pacing_spin: Duration::from_micros(spin_us), ..cfg });
    for t in &tcp {
        server = server.listen_tcp(t.as_str())?;
    }
    for u in &unix {
        server = server.listen_unix(u)?;
    }
    let handle = server.start()?;
    for w in handle.warnings() {
        eprintln!("memserve: warning: {w}");
    }
    for a in handle.tcp_addrs() {
        eprintln!("memserve: nbd://{a}/{name}");
    }
    for p in handle.unix_paths() {
        eprintln!("memserve: nbd+unix:///{name}?socket={}", p.display());
    }
    let stopper = handle.stopper();
    let stats_of = {
        // A second handle on the counters for the final report (wait() consumes the handle).
        let s = stopper.clone();
        move || s.stats()
    };
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: `set` is a valid, initialised signal set.
        unsafe { libc::sigwait(&set, &mut sig) };
        eprintln!("memserve: signal {sig}, shutting down");
        stopper.stop();
    });
    handle.wait();
    eprintln!("memserve: {:?}", stats_of());
    Ok(())
}
