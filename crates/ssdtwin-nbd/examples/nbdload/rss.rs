//! The server's memory: `VmRSS` sampled every second, `VmHWM` at the end.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub fn proc_memory_kib(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field =
        |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub struct RssSampler {
    pub stop: Arc<AtomicBool>,
    pub thread: std::thread::JoinHandle<Vec<u64>>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !s.load(Relaxed) {
                if let Some((rss, _)) = proc_memory_kib(pid) {
                    samples.push(rss);
                }
                for _ in 0..10 {
                    if s.load(Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            samples
        });
        RssSampler { stop, thread }
    }
    pub fn finish(self) -> Vec<u64> {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap_or_default()
    }
}
