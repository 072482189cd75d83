//! What to run: the target URI and the load's settings.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Tcp { addr: String, export: String },
    Unix { path: PathBuf, export: String },
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex =
                s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| format!("bad percent escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

impl Target {
    /// `nbd://HOST[:PORT]/EXPORT` or `nbd+unix:///EXPORT?socket=PATH` (doc/uri.md).
    pub fn parse(uri: &str) -> Result<Target, String> {
        if uri.starts_with("nbds") {
            return Err(format!("{uri}: nbdload speaks plain NBD only (no TLS); use nbd:// or nbd+unix://"));
        }
        if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path_part, query) = rest.split_once('?').ok_or_else(|| format!("{uri}: nbd+unix:// needs ?socket=PATH"))?;
            let export = percent_decode(path_part.strip_prefix('/').unwrap_or(path_part))?;
            let socket = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("socket="))
                .ok_or_else(|| format!("{uri}: nbd+unix:// needs ?socket=PATH"))?;
            return Ok(Target::Unix { path: PathBuf::from(percent_decode(socket)?), export });
        }
        if let Some(rest) = uri.strip_prefix("nbd://") {
            let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
            if hostport.is_empty() {
                return Err(format!("{uri}: no host"));
            }
            let has_port = if hostport.starts_with('[') { hostport.contains("]:") } else { hostport.contains(':') };
            let addr = if has_port { hostport.to_string() } else { format!("{hostport}:10809") };
            return Ok(Target::Tcp { addr, export: percent_decode(path)? });
        }
        Err(format!("{uri}: not an NBD URI (nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH)"))
    }

    pub fn export(&self) -> &str {
        match self {
            Target::Tcp { export, .. } | Target::Unix { export, .. } => export,
        }
    }
}

/// What to run. `Default` is a short, moderate run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: Target,
    pub clients: usize,
    pub duration: Duration,
    /// Requests in flight per connection.
    pub qd: usize,
    /// Request sizes, each a multiple of 4 KiB; each request picks one at random.
    pub sizes: Vec<u32>,
    /// Percentages of reads, writes and flushes (the rest of 100 is reads).
    pub mix_read: u32,
    pub mix_write: u32,
    pub mix_flush: u32,
    /// Reconnect after this many requests on average (0: never).
    pub disconnect_every: u64,
    /// Bytes of the export each client uses (default: an equal share, at most 256 MiB).
    pub region_bytes: Option<u64>,
    pub seed: u64,
    /// Server process to sample VmRSS/VmHWM from.
    pub pid: Option<u32>,
    /// Negotiate structured replies (as libnbd does); false: simple replies only.
    pub structured: bool,
    pub stall: usize,
    pub stall_reads: usize,
    pub stall_bytes: u32,
    pub hold: usize,
    pub quiet: bool,
}

impl LoadConfig {
    pub fn new(target: Target) -> LoadConfig {
        LoadConfig {
            target,
            clients: 8,
            duration: Duration::from_secs(10),
            qd: 16,
            sizes: vec![4 << 10, 64 << 10, 1 << 20],
            mix_read: 60,
            mix_write: 35,
            mix_flush: 5,
            disconnect_every: 2000,
            region_bytes: None,
            seed: 1,
            pid: None,
            structured: true,
            stall: 0,
            stall_reads: 8,
            stall_bytes: 32 << 20,
            hold: 0,
            quiet: false,
        }
    }
}
