//! Listeners, connection threads and shutdown.
//!
//! One acceptor thread polls every listener (TCP and unix) plus an eventfd used to
//! wake it for shutdown. Each accepted connection gets its own thread, which runs the
//! handshake and then the transmission reader; a second, pacing writer thread is
//! started only if the export ever asks for a reply to be held.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::error::Error;
use crate::handshake::{negotiate, HandshakeEnd};
use crate::pacer::PacerConfig;
use crate::stats::{ServerStats, Stats};
use crate::transmission::{ConnCtx, TransEnd, Transmission};
use crate::wire::{InBuf, Sink, SocketSink};

/// Input buffer per connection: holds a burst of pipelined small requests, and any
/// WRITE payload up to this size is handed to the export straight from it.
pub(crate) const INBUF_CAP: usize = 256 << 10;

/// Server tuning. `Default` suits tests and normal use.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections beyond this are closed as soon as they are accepted.
    pub max_connections: usize,
    /// How long `shutdown` lets connections finish in-flight work before closing them.
    pub shutdown_grace: Duration,
    /// Read timeout used to notice shutdown on idle connections.
    pub poll_interval: Duration,
    /// Paced replies sent later than this after their time count as late.
    pub late_threshold: Duration,
    /// The pacing writer busy-waits for due times closer than this instead of
    /// sleeping. Sleeping wakes up tens of microseconds late on a busy machine;
    /// spinning burns CPU a client on the same host may need. 0 disables it.
    pub pacing_spin: Duration,
    /// Print one line per connection end to stderr.
    pub verbose: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
            late_threshold: Duration::from_micros(100),
            pacing_spin: Duration::ZERO,
            verbose: false,
        }
    }
}

/// A socket of either family.
enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn try_clone(&self) -> io::Result<Sock> {
        Ok(match self {
            Sock::Tcp(s) => Sock::Tcp(s.try_clone()?),
            Sock::Unix(s) => Sock::Unix(s.try_clone()?),
        })
    }
    fn shutdown(&self) {
        let _ = match self {
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
    fn prepare(&self, read_timeout: Duration) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => {
                s.set_nonblocking(false)?;
                // Replies are small and latency-bound; spec: both sides SHOULD disable Nagle.
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(read_timeout))
            }
            Sock::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(read_timeout))
            }
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
}

impl AsRawFd for Sock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// How a connection ended (for logs and counters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConnEnd {
    Handshake(HandshakeEnd),
    Transmission(TransEnd),
}

impl ConnEnd {
    pub fn is_protocol_error(&self) -> bool {
        matches!(
            self,
            ConnEnd::Handshake(HandshakeEnd::Protocol(_))
                | ConnEnd::Transmission(TransEnd::Protocol(_))
        )
    }
}

/// Run one connection to the end over any transport: handshake, then transmission.
pub(crate) fn run_connection<R: Read, S: Sink>(
    r: R,
    sink: S,
    backend: &dyn Backend,
    ctx: &ConnCtx,
) -> ConnEnd {
    let mut inb = InBuf::new(r, INBUF_CAP);
    let sink = Arc::new(Mutex::new(sink));
    let neg = {
        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
        let sd = &ctx.shutting_down;
        negotiate(&mut inb, &mut *s, backend, &|| sd.load(Relaxed))
    };
    match neg {
        Err(e) => {
            sink.lock().unwrap_or_else(|e| e.into_inner()).close();
            ConnEnd::Handshake(e)
        }
        Ok(n) => {
            let export = n.export.clone();
            export.connection_opened();
            let end = Transmission::new(inb, sink, n, ctx).run();
            export.connection_closed();
            ConnEnd::Transmission(end)
        }
    }
}

struct ConnEntry {
    sock: Sock,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    backend: Arc<dyn Backend>,
    config: ServerConfig,
    shutting_down: Arc<AtomicBool>,
    stats: Arc<Stats>,
    conns: Mutex<HashMap<u64, ConnEntry>>,
    conns_cv: Condvar,
    next_id: AtomicU64,
    wake: OwnedFd,
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<u64, ConnEntry>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn trigger(&self) {
        self.shutting_down.store(true, Relaxed);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our own eventfd; failure (counter full) still
        // leaves it readable, which is all the acceptor needs.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                one.as_ptr() as *const libc::c_void,
                8,
            );
        }
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    fn fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        }
    }
    fn accept(&self) -> io::Result<Sock> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, _)| Sock::Tcp(s)),
            Listener::Unix(l, _) => l.accept().map(|(s, _)| Sock::Unix(s)),
        }
    }
}

/// Builder for an NBD server over a [`Backend`].
pub struct Server {
    backend: Arc<dyn Backend>,
    config: ServerConfig,
    listeners: Vec<Listener>,
    tcp_addrs: Vec<SocketAddr>,
    unix_paths: Vec<PathBuf>,
}

impl Server {
    pub fn new(backend: Arc<dyn Backend>) -> Server {
        Server {
            backend,
            config: ServerConfig::default(),
            listeners: Vec::new(),
            tcp_addrs: Vec::new(),
            unix_paths: Vec::new(),
        }
    }

    pub fn with_config(mut self, config: ServerConfig) -> Server {
        self.config = config;
        self
    }

    /// Listen on a TCP address (port 0 picks a free port; see [`ServerHandle::tcp_addrs`]).
    pub fn listen_tcp(mut self, addr: impl ToSocketAddrs) -> Result<Server, Error> {
        let l = TcpListener::bind(addr).map_err(|e| Error::io("bind TCP listener", e))?;
        self.tcp_addrs.push(
            l.local_addr()
                .map_err(|e| Error::io("TCP listener address", e))?,
        );
        self.listeners.push(Listener::Tcp(l));
        Ok(self)
    }

    /// Listen on a unix socket. A stale socket file left by a dead server is replaced;
    /// a live one is an error. The file is removed at shutdown.
    pub fn listen_unix(mut self, path: impl AsRef<Path>) -> Result<Server, Error> {
        let path = path.as_ref().to_path_buf();
        if let Ok(md) = std::fs::symlink_metadata(&path) {
            if !md.file_type().is_socket() {
                return Err(Error::io(
                    format!("bind unix socket {}", path.display()),
                    io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "path exists and is not a socket",
                    ),
                ));
            }
            match UnixStream::connect(&path) {
                Ok(_) => return Err(Error::SocketInUse(path)),
                Err(_) => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let l = UnixListener::bind(&path)
            .map_err(|e| Error::io(format!("bind unix socket {}", path.display()), e))?;
        self.unix_paths.push(path.clone());
        self.listeners.push(Listener::Unix(l, path));
        Ok(self)
    }

    /// Check the exports and start serving in background threads.
    pub fn start(self) -> Result<ServerHandle, Error> {
        if self.listeners.is_empty() {
            return Err(Error::NoListener);
        }
        for e in self.backend.exports() {
            e.validate().map_err(|reason| Error::InvalidExport {
                name: e.name.clone(),
                reason,
            })?;
        }
        // SAFETY: eventfd returns a new fd we own, or -1.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(Error::io("eventfd", io::Error::last_os_error()));
        }
        // SAFETY: `wake` is a fresh, valid descriptor owned by nothing else.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        for l in &self.listeners {
            match l {
                Listener::Tcp(t) => t.set_nonblocking(true),
                Listener::Unix(u, _) => u.set_nonblocking(true),
            }
            .map_err(|e| Error::io("set listener non-blocking", e))?;
        }
        let shared = Arc::new(Shared {
            backend: self.backend,
            config: self.config,
            shutting_down: Arc::new(AtomicBool::new(false)),
            stats: Arc::new(Stats::default()),
            conns: Mutex::new(HashMap::new()),
            conns_cv: Condvar::new(),
            next_id: AtomicU64::new(1),
            wake,
        });
        let sh = shared.clone();
        let listeners = self.listeners;
        let acceptor = std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(listeners, sh))
            .map_err(|e| Error::io("spawn acceptor thread", e))?;
        Ok(ServerHandle {
            shared,
            acceptor: Some(acceptor),
            tcp_addrs: self.tcp_addrs,
            unix_paths: self.unix_paths,
        })
    }
}

fn accept_loop(listeners: Vec<Listener>, shared: Arc<Shared>) {
    let mut fds: Vec<libc::pollfd> = listeners
        .iter()
        .map(|l| libc::pollfd {
            fd: l.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .chain(std::iter::once(libc::pollfd {
            fd: shared.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }))
        .collect();
    while !shared.shutting_down.load(Relaxed) {
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        if shared.shutting_down.load(Relaxed) {
            break;
        }
        for (i, l) in listeners.iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            loop {
                match l.accept() {
                    Ok(sock) => spawn_connection(sock, &shared),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        // EMFILE and friends: back off rather than spin; poll retries.
                        std::thread::sleep(Duration::from_millis(10));
                        break;
                    }
                }
            }
        }
    }
    for l in listeners {
        if let Listener::Unix(l, path) = l {
            drop(l);
            let _ = std::fs::remove_file(path);
        }
    }
}

fn spawn_connection(sock: Sock, shared: &Arc<Shared>) {
    let cfg = &shared.config;
    if shared.conns().len() >= cfg.max_connections {
        shared.stats.connections_refused.fetch_add(1, Relaxed);
        return; // dropping the socket closes it
    }
    if sock.prepare(cfg.poll_interval).is_err() {
        return;
    }
    let Ok(reg) = sock.try_clone() else { return };
    let id = shared.next_id.fetch_add(1, Relaxed);
    shared.conns().insert(
        id,
        ConnEntry {
            sock: reg,
            thread: None,
        },
    );
    let sh = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("nbd-conn-{id}"))
        .spawn(move || {
            // Deregister however the connection ends, panics included.
            struct Dereg(Arc<Shared>, u64);
            impl Drop for Dereg {
                fn drop(&mut self) {
                    self.0.stats.connections_active.fetch_sub(1, Relaxed);
                    self.0.conns().remove(&self.1);
                    self.0.conns_cv.notify_all();
                }
            }
            sh.stats.connections_accepted.fetch_add(1, Relaxed);
            sh.stats.connections_active.fetch_add(1, Relaxed);
            let _guard = Dereg(sh.clone(), id);
            connection_main(sock, &sh, id);
        });
    match spawned {
        Ok(h) => {
            if let Some(e) = shared.conns().get_mut(&id) {
                e.thread = Some(h);
            }
        }
        Err(_) => {
            shared.conns().remove(&id);
        }
    }
}

fn connection_main(sock: Sock, shared: &Shared, id: u64) {
    let ctx = ConnCtx {
        shutting_down: shared.shutting_down.clone(),
        stats: shared.stats.clone(),
        pacing: PacerConfig {
            late_threshold: shared.config.late_threshold,
            spin: shared.config.pacing_spin,
        },
    };
    let Ok(reader) = sock.try_clone() else { return };
    let end = run_connection(reader, SocketSink::new(sock), &*shared.backend, &ctx);
    if end.is_protocol_error() {
        shared.stats.protocol_errors.fetch_add(1, Relaxed);
    }
    if shared.config.verbose {
        eprintln!("ssdtwin-nbd: connection {id} ended: {end:?}");
    }
}

/// Cloneable trigger that stops a server from any thread (e.g. a signal handler
/// thread); pair with [`ServerHandle::wait`].
#[derive(Clone)]
pub struct Stopper {
    shared: Arc<Shared>,
}

impl Stopper {
    pub fn stop(&self) {
        self.shared.trigger();
    }
    /// The server's counters (also usable after the handle is gone, e.g. for a final
    /// report or a metrics endpoint on another thread).
    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }
}

/// A running server. Dropping it shuts the server down.
pub struct ServerHandle {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    tcp_addrs: Vec<SocketAddr>,
    unix_paths: Vec<PathBuf>,
}

impl ServerHandle {
    /// Bound TCP addresses (with the real port when 0 was asked for).
    pub fn tcp_addrs(&self) -> &[SocketAddr] {
        &self.tcp_addrs
    }

    pub fn unix_paths(&self) -> &[PathBuf] {
        &self.unix_paths
    }

    /// An NBD URI (doc/uri.md) for `export` on the first listener: TCP if any, else unix.
    pub fn uri(&self, export: &str) -> String {
        self.uris(export).swap_remove(0)
    }

    /// URIs of `export` on every listener: `nbd://` for each TCP address (an unspecified
    /// address as the loopback one), then `nbd+unix://` for each socket, names escaped.
    pub fn uris(&self, export: &str) -> Vec<String> {
        let name = uri_escape(export);
        let tcp = self.tcp_addrs.iter().map(|a| {
            let host = match a {
                SocketAddr::V4(v) if v.ip().is_unspecified() => "127.0.0.1".to_string(),
                SocketAddr::V4(v) => v.ip().to_string(),
                SocketAddr::V6(v) if v.ip().is_unspecified() => "[::1]".to_string(),
                SocketAddr::V6(v) => format!("[{}]", v.ip()),
            };
            format!("nbd://{host}:{}/{name}", a.port())
        });
        let unix = self.unix_paths.iter().map(|p| format!("nbd+unix:///{name}?socket={}", uri_escape(&p.to_string_lossy())));
        let all: Vec<String> = tcp.chain(unix).collect();
        assert!(!all.is_empty(), "start() requires a listener");
        all
    }

    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }

    pub fn stopper(&self) -> Stopper {
        Stopper {
            shared: self.shared.clone(),
        }
    }

    /// Block until a [`Stopper`] fires, then shut down as [`ServerHandle::shutdown`].
    pub fn wait(mut self) {
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        self.finish();
    }

    /// Stop listening, let connections finish for up to `shutdown_grace` (requests
    /// still arriving get ESHUTDOWN, held replies go out at once), then close the
    /// rest and join every thread.
    pub fn shutdown(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.shared.trigger();
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        let deadline = Instant::now() + self.shared.config.shutdown_grace;
        let mut conns = self.shared.conns();
        while !conns.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            conns = self
                .shared
                .conns_cv
                .wait_timeout(conns, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let mut threads = Vec::new();
        for e in conns.values_mut() {
            e.sock.shutdown();
            threads.extend(e.thread.take());
        }
        drop(conns);
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.acceptor.is_some() {
            self.finish();
        }
    }
}

/// Percent-encode everything outside RFC 3986's unreserved set and '/'.
fn uri_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape() {
        assert_eq!(uri_escape("ns1"), "ns1");
        assert_eq!(uri_escape("/tmp/a b.sock"), "/tmp/a%20b.sock");
        assert_eq!(uri_escape("x?y"), "x%3Fy");
    }
}
