//! A tiny HTTP/1.0 responder for Prometheus (`GET /metrics`) and a debugging view of the
//! FTL (`GET /debug/ftl`), on one std thread. No web framework: one request per
//! connection, answered and closed; anything else gets 404/405.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::twin::TwinBackend;

pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addr: &str, backend: Arc<TwinBackend>) -> io::Result<MetricsServer> {
        let l = TcpListener::bind(addr)?;
        let addr = l.local_addr()?;
        // Non-blocking accept polled every 50 ms, so `stop` needs no wake-up machinery.
        l.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new().name("ssdtwin-metrics".into()).spawn(move || {
            while !s.load(Relaxed) {
                match l.accept() {
                    Ok((conn, _)) => {
                        let _ = answer(conn, &backend);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        })?;
        Ok(MetricsServer { addr, stop, thread: Some(thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut c: TcpStream, backend: &TwinBackend) -> io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(2)))?;
    // Read the request head (up to the blank line, at most 8 KiB); only the request line
    // matters.
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") && buf.len() < 8192 {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", backend.metrics_text()),
        ("GET", "/debug/ftl") => match backend.fingerprint() {
            Ok(v) => ("200 OK", "application/json", v.to_string() + "\n"),
            Err(e) => ("503 Service Unavailable", "text/plain", e + "\n"),
        },
        ("GET", "/") => ("200 OK", "text/plain", "ssdtwin serve: /metrics (Prometheus), /debug/ftl (FTL fingerprint)\n".to_string()),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET\n".to_string()),
    };
    let hdr = format!("HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    c.write_all(hdr.as_bytes())?;
    if method != "HEAD" {
        c.write_all(body.as_bytes())?;
    }
    c.flush()
}
