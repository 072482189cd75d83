//! Listeners, connection threads and shutdown.
//!
//! One acceptor thread polls every listener (TCP and unix) plus an eventfd used to
//! wake it for shutdown. Each accepted connection gets its own thread, which runs the
//! handshake and then the transmission reader; a second, pacing writer thread is
//! started only if the export ever asks for a reply to be held. Connections beyond
//! `max_connections` go to one refusing thread that answers their options with an
//! error naming the limit. Each connection holds one file descriptor.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, IoSlice, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::budget::{Budget, ConnBudget};
use crate::error::Error;
use crate::handshake::{negotiate, HandshakeEnd, Policy, StartTls};
use crate::pacer::PacerConfig;
use crate::proto::*;
use crate::stats::{ServerStats, Stats};
use crate::tls::{self, TlsMode, TlsReader, TlsSink};
use crate::transmission::{ConnCtx, TransEnd, Transmission};
use crate::wire::{InBuf, Sink, SocketSink};

/// Input buffer per connection: holds a burst of pipelined small requests, and any
/// WRITE payload up to this size is handed to the export straight from it.
pub(crate) const INBUF_CAP: usize = 256 << 10;

/// Refused connections handled at once; beyond that they are closed without a word.
const MAX_REFUSING: usize = 64;
/// How long a refused client gets to read its error before it is closed.
const REFUSE_WINDOW: Duration = Duration::from_secs(2);
/// File descriptors kept free for everything but connections (backend files, the
/// metrics endpoint, a Python host's own files).
const FD_RESERVE: u64 = 64;

/// Server tuning. `Default` suits tests and normal use.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections served at once (handshaking or transmitting). More are refused
    /// politely: their options get `NBD_REP_ERR_POLICY` naming the limit. Lowered at
    /// start if `RLIMIT_NOFILE` cannot cover it (see `ServerHandle::warnings`).
    pub max_connections: usize,
    /// Request and reply bytes in flight across all connections (READ data, large
    /// WRITE payloads, block-status replies). A connection that cannot get its share
    /// stops reading its socket until replies drain; one connection takes at most a
    /// quarter; a single request larger than the budget still runs, alone.
    pub max_inflight_bytes: usize,
    /// The handshake (TLS included) must finish within this, or the connection is
    /// closed: a silent client cannot hold a connection slot. Zero: no limit.
    pub handshake_timeout: Duration,
    /// A connection whose client does not take a reply (with any replies sent along
    /// with it) within this long is closed, releasing its share of the in-flight
    /// budget: the client reads nothing, or too slowly. Zero: never.
    pub send_timeout: Duration,
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
    /// `NBD_OPT_STARTTLS`: off, on (optional) or require (nbdkit's `--tls`).
    pub tls: TlsMode,
    /// Directory with `server-cert.pem`, `server-key.pem` and (for `tls_verify_peer`)
    /// `ca-cert.pem`: nbdkit's `--tls-certificates`, qemu-nbd's x509 `dir`.
    pub tls_certificates: Option<PathBuf>,
    /// Require client certificates signed by `ca-cert.pem` (nbdkit's
    /// `--tls-verify-peer`). Off: clients are not asked for one.
    pub tls_verify_peer: bool,
    /// Unix sockets are created mode 0600 (owner only). With a group (name or
    /// numeric gid) they are given to that group with mode 0660.
    pub unix_socket_group: Option<String>,
    /// Print one line per connection end to stderr.
    pub verbose: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 256,
            max_inflight_bytes: 256 << 20,
            handshake_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
            late_threshold: Duration::from_micros(100),
            pacing_spin: Duration::ZERO,
            tls: TlsMode::Off,
            tls_certificates: None,
            tls_verify_peer: false,
            unix_socket_group: None,
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
    fn shutdown(&self) {
        let _ = match self {
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_nonblocking(on),
            Sock::Unix(s) => s.set_nonblocking(on),
        }
    }
    fn prepare(&self, read_timeout: Duration, send_timeout: Duration) -> io::Result<()> {
        let send = (!send_timeout.is_zero()).then_some(send_timeout);
        match self {
            Sock::Tcp(s) => {
                s.set_nonblocking(false)?;
                // Replies are small and latency-bound; spec: both sides SHOULD disable Nagle.
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(read_timeout))?;
                s.set_write_timeout(send)
            }
            Sock::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(read_timeout))?;
                s.set_write_timeout(send)
            }
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

/// One connection's socket, shared by its reader, its writers and the registry.
#[derive(Clone)]
struct SharedSock(Arc<Sock>);

impl Read for SharedSock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &*self.0 {
            Sock::Tcp(s) => (&*s).read(buf),
            Sock::Unix(s) => (&*s).read(buf),
        }
    }
}

impl AsRawFd for SharedSock {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The reading side of a connection: plain until STARTTLS, then TLS.
enum ConnReader {
    Plain(SharedSock),
    Tls(TlsReader),
}

impl Read for ConnReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ConnReader::Plain(s) => s.read(buf),
            ConnReader::Tls(t) => t.read(buf),
        }
    }
}

/// The writing side of a connection.
enum ConnSink {
    Plain(SocketSink<SharedSock>),
    Tls(TlsSink),
}

impl Sink for ConnSink {
    fn send_all(&mut self, bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
        match self {
            ConnSink::Plain(s) => s.send_all(bufs),
            ConnSink::Tls(t) => t.send_all(bufs),
        }
    }
    fn close(&mut self) {
        match self {
            ConnSink::Plain(s) => s.close(),
            ConnSink::Tls(t) => t.close(),
        }
    }
}

/// STARTTLS on a socket connection.
struct SocketTls<'a> {
    config: &'a Arc<rustls::ServerConfig>,
    sock: SharedSock,
    stats: &'a Stats,
    send_timeout: Option<Duration>,
}

impl StartTls<ConnReader, ConnSink> for SocketTls<'_> {
    fn start_tls(
        &mut self,
        inb: &mut InBuf<ConnReader>,
        sink: &mut ConnSink,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        match tls::accept(self.config, self.sock.0.clone(), deadline, self.send_timeout, stop) {
            Ok((r, w)) => {
                *inb.get_mut() = ConnReader::Tls(r);
                *sink = ConnSink::Tls(w);
                self.stats.tls_sessions.fetch_add(1, Relaxed);
                Ok(())
            }
            Err(e) => {
                self.stats.tls_failures.fetch_add(1, Relaxed);
                Err(e)
            }
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
        matches!(self, ConnEnd::Handshake(HandshakeEnd::Protocol(_)) | ConnEnd::Transmission(TransEnd::Protocol(_)))
    }
}

/// Run one connection to the end over any transport: handshake, then transmission.
pub(crate) fn run_connection<R: Read, S: Sink>(r: R, sink: S, backend: &dyn Backend, ctx: &ConnCtx, policy: Policy<'_, R, S>) -> ConnEnd {
    let mut inb = InBuf::new(r, INBUF_CAP);
    let mut sink = sink;
    let neg = {
        let sd = &ctx.shutting_down;
        negotiate(&mut inb, &mut sink, backend, &|| sd.load(Relaxed), policy)
    };
    match neg {
        Err(e) => {
            sink.close();
            ConnEnd::Handshake(e)
        }
        Ok(n) => {
            let sink = Arc::new(Mutex::new(sink));
            let export = n.export.clone();
            export.connection_opened();
            let end = Transmission::new(inb, sink, n, ctx).run();
            export.connection_closed();
            ConnEnd::Transmission(end)
        }
    }
}

struct ConnEntry {
    sock: SharedSock,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    backend: Arc<dyn Backend>,
    config: ServerConfig,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutting_down: Arc<AtomicBool>,
    stats: Arc<Stats>,
    budget: Arc<Budget>,
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
            libc::write(self.wake.as_raw_fd(), one.as_ptr() as *const libc::c_void, 8);
        }
    }
    fn snapshot(&self) -> ServerStats {
        self.stats.snapshot(self.budget.used() as u64)
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

/// A unix socket bound by `listen_unix`; permissions are set and `listen` called in
/// `start`, so no client can connect before the socket is 0600/0660.
struct BoundUnix {
    fd: OwnedFd,
    path: PathBuf,
}

/// Builder for an NBD server over a [`Backend`].
///
/// A server that cannot start (an address in use, bad TLS material, an unknown socket
/// group) should fail before its backend opens anything: bind the listeners and call
/// [`Server::prepare`] first, then give it the backend with [`Server::with_backend`]. A
/// builder dropped without starting removes the unix socket files it created.
pub struct Server {
    backend: Arc<dyn Backend>,
    config: ServerConfig,
    listeners: Vec<Listener>,
    unix_bound: Vec<BoundUnix>,
    tcp_addrs: Vec<SocketAddr>,
    unix_paths: Vec<PathBuf>,
    /// `prepare` has run: TLS material loaded (if any), unix sockets listening.
    prepared: Option<Option<Arc<rustls::ServerConfig>>>,
}

impl Drop for Server {
    /// Not started (`start` takes the listeners): the unix socket files go.
    fn drop(&mut self) {
        for b in &self.unix_bound {
            let _ = std::fs::remove_file(&b.path);
        }
        for l in &self.listeners {
            if let Listener::Unix(_, path) = l {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

fn sockaddr_un(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = path.as_os_str().as_bytes();
    if b.len() >= sa.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("path longer than {} bytes", sa.sun_path.len() - 1)));
    }
    for (d, s) in sa.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + b.len() + 1;
    Ok((sa, len as libc::socklen_t))
}

fn cpath(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// A group name or numeric gid.
fn resolve_group(g: &str) -> Result<libc::gid_t, Error> {
    if let Ok(n) = g.parse::<libc::gid_t>() {
        return Ok(n);
    }
    let name = std::ffi::CString::new(g).map_err(|_| Error::UnknownGroup(g.to_string()))?;
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: group is plain old data; getgrnam_r fills it and `buf`, which outlive it.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::group = std::ptr::null_mut();
    let r = unsafe { libc::getgrnam_r(name.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut res) };
    if r != 0 || res.is_null() {
        return Err(Error::UnknownGroup(g.to_string()));
    }
    Ok(grp.gr_gid)
}

impl Server {
    pub fn new(backend: Arc<dyn Backend>) -> Server {
        Server {
            backend,
            config: ServerConfig::default(),
            listeners: Vec::new(),
            unix_bound: Vec::new(),
            tcp_addrs: Vec::new(),
            unix_paths: Vec::new(),
            prepared: None,
        }
    }

    pub fn with_config(mut self, config: ServerConfig) -> Server {
        self.config = config;
        self
    }

    /// Serve `backend` instead of the one given to [`Server::new`]: lets a caller bind
    /// and [`prepare`](Server::prepare) with a placeholder before opening the real one.
    pub fn with_backend(mut self, backend: Arc<dyn Backend>) -> Server {
        self.backend = backend;
        self
    }

    /// Listen on a TCP address (port 0 picks a free port; see [`ServerHandle::tcp_addrs`]).
    /// Errors name the address: `listen on 127.0.0.1:10809: address already in use
    /// (another server?)`.
    pub fn listen_tcp<A: ToSocketAddrs + fmt::Display>(mut self, addr: A) -> Result<Server, Error> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| Error::io(format!("listen on {addr}"), e))?.collect();
        let mut last = None;
        for a in addrs {
            match TcpListener::bind(a) {
                Ok(l) => {
                    self.tcp_addrs.push(l.local_addr().map_err(|e| Error::io(format!("listen on {a}"), e))?);
                    self.listeners.push(Listener::Tcp(l));
                    return Ok(self);
                }
                Err(e) => last = Some((a, e)),
            }
        }
        Err(match last {
            Some((a, e)) if e.kind() == io::ErrorKind::AddrInUse => Error::AddrInUse(a),
            Some((a, e)) => Error::io(format!("listen on {a}"), e),
            None => Error::io(format!("listen on {addr}"), io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address")),
        })
    }

    /// Listen on a unix socket. A stale socket file left by a dead server is replaced;
    /// a live one is an error. The socket is mode 0600, or 0660 and owned by
    /// `ServerConfig::unix_socket_group` (set `with_config` first, or it applies at
    /// `start`). The file is removed at shutdown.
    pub fn listen_unix(mut self, path: impl AsRef<Path>) -> Result<Server, Error> {
        let path = path.as_ref().to_path_buf();
        let ctx = || format!("listen on unix socket {}", path.display());
        if let Ok(md) = std::fs::symlink_metadata(&path) {
            if !md.file_type().is_socket() {
                return Err(Error::io(ctx(), io::Error::new(io::ErrorKind::AlreadyExists, "path exists and is not a socket")));
            }
            match UnixStream::connect(&path) {
                Ok(_) => return Err(Error::SocketInUse(path)),
                Err(_) => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let (sa, len) = sockaddr_un(&path).map_err(|e| Error::io(ctx(), e))?;
        // SAFETY: socket() returns a new descriptor we own, or -1.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::io(ctx(), io::Error::last_os_error()));
        }
        // SAFETY: `fd` is fresh and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `sa` is a valid sockaddr_un of length `len`.
        let r = unsafe { libc::bind(fd.as_raw_fd(), &sa as *const _ as *const libc::sockaddr, len) };
        if r < 0 {
            return Err(Error::io(ctx(), io::Error::last_os_error()));
        }
        self.unix_paths.push(path.clone());
        self.unix_bound.push(BoundUnix { fd, path });
        Ok(self)
    }

    /// Permissions, then `listen`, on every bound unix socket.
    fn open_unix(&mut self) -> Result<(), Error> {
        let gid = match &self.config.unix_socket_group {
            Some(g) => Some(resolve_group(g)?),
            None => None,
        };
        for b in self.unix_bound.drain(..) {
            let ctx = || format!("listen on unix socket {}", b.path.display());
            let c = cpath(&b.path).map_err(|e| Error::io(ctx(), e))?;
            let fail = |e: io::Error| {
                let _ = std::fs::remove_file(&b.path);
                Error::io(ctx(), e)
            };
            // SAFETY: `c` is a valid NUL-terminated path for the duration of each call.
            unsafe {
                if let Some(g) = gid {
                    if libc::chown(c.as_ptr(), libc::uid_t::MAX, g) < 0 {
                        return Err(fail(io::Error::last_os_error()));
                    }
                }
                let mode = if gid.is_some() { 0o660 } else { 0o600 };
                if libc::chmod(c.as_ptr(), mode) < 0 {
                    return Err(fail(io::Error::last_os_error()));
                }
                if libc::listen(b.fd.as_raw_fd(), libc::SOMAXCONN) < 0 {
                    return Err(fail(io::Error::last_os_error()));
                }
            }
            self.listeners.push(Listener::Unix(UnixListener::from(b.fd), b.path));
        }
        Ok(())
    }

    /// Everything [`start`](Server::start) checks that does not involve the backend: a
    /// listener is configured, the TLS material loads, the unix socket group exists (then
    /// the unix sockets get their mode and listen). `start` runs it if it has not run.
    pub fn prepare(mut self) -> Result<Server, Error> {
        if self.prepared.is_some() {
            return Ok(self);
        }
        if self.listeners.is_empty() && self.unix_bound.is_empty() {
            return Err(Error::NoListener);
        }
        let tls = match (self.config.tls, &self.config.tls_certificates) {
            (TlsMode::Off, _) => None,
            (mode, None) => {
                return Err(Error::Tls(format!("TLS {mode} needs a certificate directory (server-cert.pem, server-key.pem, ca-cert.pem)")))
            }
            (_, Some(d)) => Some(tls::load(d, self.config.tls_verify_peer)?),
        };
        self.open_unix()?;
        self.prepared = Some(tls);
        Ok(self)
    }

    /// Check the exports and TLS material and start serving in background threads.
    pub fn start(self) -> Result<ServerHandle, Error> {
        let mut this = self.prepare()?;
        for e in this.backend.exports() {
            e.validate().map_err(|reason| Error::InvalidExport { name: e.name.clone(), reason })?;
        }
        let mut warnings = Vec::new();
        if let (TlsMode::Off, Some(d)) = (this.config.tls, &this.config.tls_certificates) {
            warnings.push(format!("TLS certificates in {} are not used: TLS is off", d.display()));
        }
        let tls = this.prepared.take().flatten();
        // From here on the listeners belong to the acceptor (Drop must leave them alone).
        let listeners = std::mem::take(&mut this.listeners);
        let tcp_addrs = std::mem::take(&mut this.tcp_addrs);
        let unix_paths = std::mem::take(&mut this.unix_paths);
        let backend = this.backend.clone();
        let config = this.config.clone();
        drop(this);
        Self::run(backend, config, tls, listeners, tcp_addrs, unix_paths, warnings)
    }

    fn run(
        backend: Arc<dyn Backend>,
        mut config: ServerConfig,
        tls: Option<Arc<rustls::ServerConfig>>,
        listeners: Vec<Listener>,
        tcp_addrs: Vec<SocketAddr>,
        unix_paths: Vec<PathBuf>,
        mut warnings: Vec<String>,
    ) -> Result<ServerHandle, Error> {
        // Whatever fails now, the unix socket files go (as a dropped builder's do).
        struct Unlink(Vec<PathBuf>, bool);
        impl Drop for Unlink {
            fn drop(&mut self) {
                if !self.1 {
                    for p in &self.0 {
                        let _ = std::fs::remove_file(p);
                    }
                }
            }
        }
        let mut unlink = Unlink(unix_paths.clone(), false);
        for a in &tcp_addrs {
            if !a.ip().is_loopback() {
                match config.tls {
                    TlsMode::Off => warnings.push(format!(
                        "listening on {a} without TLS: anyone who can reach it can read and write the exports (require TLS, or listen on 127.0.0.1)"
                    )),
                    TlsMode::On => warnings.push(format!(
                        "listening on {a} with optional TLS: clients may still connect in plain text (require TLS to refuse them)"
                    )),
                    TlsMode::Require => {}
                }
            }
        }
        if let Some(w) = fit_connections_to_fd_limit(&mut config.max_connections) {
            warnings.push(w);
        }
        // SAFETY: eventfd returns a new fd we own, or -1.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(Error::io("eventfd", io::Error::last_os_error()));
        }
        // SAFETY: `wake` is a fresh, valid descriptor owned by nothing else.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        for l in &listeners {
            match l {
                Listener::Tcp(t) => t.set_nonblocking(true),
                Listener::Unix(u, _) => u.set_nonblocking(true),
            }
            .map_err(|e| Error::io("set listener non-blocking", e))?;
        }
        let stats = Arc::new(Stats::default());
        let budget = Budget::new(config.max_inflight_bytes, config.max_inflight_bytes / 4, stats.clone());
        let shared = Arc::new(Shared {
            backend,
            config,
            tls,
            shutting_down: Arc::new(AtomicBool::new(false)),
            stats,
            budget,
            conns: Mutex::new(HashMap::new()),
            conns_cv: Condvar::new(),
            next_id: AtomicU64::new(1),
            wake,
        });
        let refuser = Refuser::start(shared.clone())?;
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(listeners, sh, refuser))
            .map_err(|e| Error::io("spawn acceptor thread", e))?;
        unlink.1 = true; // the acceptor removes them at shutdown
        Ok(ServerHandle { shared, acceptor: Some(acceptor), tcp_addrs, unix_paths, warnings })
    }
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit, and lower `max_connections` if
/// even that cannot give every connection its descriptor (each needs one, refusals
/// one more). Returns a warning when it lowered the limit.
fn fit_connections_to_fd_limit(max_connections: &mut usize) -> Option<String> {
    // SAFETY: getrlimit/setrlimit read and write a plain struct we own.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    let open = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(32);
    let avail = lim.rlim_cur.saturating_sub(open + FD_RESERVE + MAX_REFUSING as u64);
    if (*max_connections as u64) <= avail {
        return None;
    }
    let was = *max_connections;
    *max_connections = avail.max(1) as usize;
    Some(format!("max_connections lowered from {was} to {}: RLIMIT_NOFILE is {} (raise it with ulimit -n)", *max_connections, lim.rlim_cur))
}

fn accept_loop(listeners: Vec<Listener>, shared: Arc<Shared>, refuser: Refuser) {
    let mut fds: Vec<libc::pollfd> = listeners
        .iter()
        .map(|l| libc::pollfd { fd: l.fd(), events: libc::POLLIN, revents: 0 })
        .chain(std::iter::once(libc::pollfd { fd: shared.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 }))
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
                    Ok(sock) => {
                        if shared.conns().len() >= shared.config.max_connections {
                            shared.stats.connections_refused.fetch_add(1, Relaxed);
                            refuser.refuse(sock);
                        } else {
                            spawn_connection(sock, &shared);
                        }
                    }
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
    drop(refuser);
    for l in listeners {
        if let Listener::Unix(l, path) = l {
            drop(l);
            let _ = std::fs::remove_file(path);
        }
    }
}

fn spawn_connection(sock: Sock, shared: &Arc<Shared>) {
    let cfg = &shared.config;
    if sock.prepare(cfg.poll_interval, cfg.send_timeout).is_err() {
        return;
    }
    let sock = SharedSock(Arc::new(sock));
    let id = shared.next_id.fetch_add(1, Relaxed);
    shared.conns().insert(id, ConnEntry { sock: sock.clone(), thread: None });
    let sh = shared.clone();
    let spawned = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
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

fn connection_main(sock: SharedSock, shared: &Shared, id: u64) {
    let cfg = &shared.config;
    let ctx = ConnCtx {
        shutting_down: shared.shutting_down.clone(),
        stats: shared.stats.clone(),
        pacing: PacerConfig { late_threshold: cfg.late_threshold, spin: cfg.pacing_spin, parked_grace: cfg.shutdown_grace },
        budget: ConnBudget::new(shared.budget.clone()),
    };
    let send_timeout = (!cfg.send_timeout.is_zero()).then_some(cfg.send_timeout);
    let mut up = shared.tls.as_ref().map(|config| SocketTls { config, sock: sock.clone(), stats: &shared.stats, send_timeout });
    let policy = Policy {
        tls_mode: cfg.tls,
        tls: up.as_mut().map(|u| u as &mut dyn StartTls<ConnReader, ConnSink>),
        deadline: (!cfg.handshake_timeout.is_zero()).then(|| Instant::now() + cfg.handshake_timeout),
    };
    let reader = ConnReader::Plain(sock.clone());
    let sink = ConnSink::Plain(SocketSink::new(sock).with_send_timeout(send_timeout));
    let end = run_connection(reader, sink, &*shared.backend, &ctx, policy);
    match &end {
        e if e.is_protocol_error() => {
            shared.stats.protocol_errors.fetch_add(1, Relaxed);
        }
        ConnEnd::Handshake(HandshakeEnd::Timeout) => {
            shared.stats.handshake_timeouts.fetch_add(1, Relaxed);
        }
        _ => {}
    }
    if cfg.verbose {
        eprintln!("ssdtwin-nbd: connection {id} ended: {end:?}");
    }
}

// ------------------------------------------------------------------ refusals

/// A refused connection being told why.
struct Refusal {
    sock: Sock,
    inb: Vec<u8>,
    out: Vec<u8>,
    /// Bytes of option data still to skip.
    skip: u64,
    got_flags: bool,
    /// Close once `out` is sent.
    closing: bool,
    deadline: Instant,
}

/// The thread that answers connections over the limit: greeting, then every option
/// gets `NBD_REP_ERR_POLICY` with a message naming the limit (`ABORT` gets its `ACK`,
/// `EXPORT_NAME` a close), for at most a few seconds. One thread for all of them, so
/// refusing costs no thread per connection; past `MAX_REFUSING` at once, extra
/// connections are closed at once.
struct Refuser {
    tx: Option<mpsc::Sender<Sock>>,
    busy: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Refuser {
    fn start(shared: Arc<Shared>) -> Result<Refuser, Error> {
        let (tx, rx) = mpsc::channel();
        let busy = Arc::new(AtomicUsize::new(0));
        let b = busy.clone();
        let msg = format!("too many connections: this server serves at most {} at once; try again later", shared.config.max_connections);
        let thread = std::thread::Builder::new()
            .name("nbd-refuse".into())
            .spawn(move || refuser_main(rx, b, msg))
            .map_err(|e| Error::io("spawn refusing thread", e))?;
        Ok(Refuser { tx: Some(tx), busy, thread: Some(thread) })
    }

    fn refuse(&self, sock: Sock) {
        if self.busy.load(Relaxed) >= MAX_REFUSING || sock.set_nonblocking(true).is_err() {
            return; // dropping the socket closes it
        }
        self.busy.fetch_add(1, Relaxed);
        if let Some(tx) = &self.tx {
            let _ = tx.send(sock);
        }
    }
}

impl Drop for Refuser {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn refuser_main(rx: mpsc::Receiver<Sock>, busy: Arc<AtomicUsize>, msg: String) {
    let mut list: Vec<Refusal> = Vec::new();
    let greeting = encode_greeting(SERVER_HANDSHAKE_FLAGS);
    let adopt = |sock: Sock| Refusal {
        sock,
        inb: Vec::new(),
        out: greeting.to_vec(),
        skip: 0,
        got_flags: false,
        closing: false,
        deadline: Instant::now() + REFUSE_WINDOW,
    };
    loop {
        if list.is_empty() {
            match rx.recv() {
                Ok(s) => list.push(adopt(s)),
                Err(_) => return,
            }
        }
        loop {
            match rx.try_recv() {
                Ok(s) => list.push(adopt(s)),
                Err(mpsc::TryRecvError::Empty) => break,
                // The server is stopping: drop everyone.
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        let mut fds: Vec<libc::pollfd> = list
            .iter()
            .map(|r| libc::pollfd {
                fd: r.sock.as_raw_fd(),
                events: libc::POLLIN | if r.out.is_empty() { 0 } else { libc::POLLOUT },
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        let now = Instant::now();
        let before = list.len();
        let mut i = 0;
        list.retain_mut(|r| {
            let ev = fds[i].revents;
            i += 1;
            let keep = now < r.deadline && refusal_step(r, ev, &msg);
            if !keep {
                r.sock.shutdown();
            }
            keep
        });
        busy.fetch_sub(before - list.len(), Relaxed);
    }
}

/// Advance one refusal; false when it is over.
fn refusal_step(r: &mut Refusal, revents: libc::c_short, msg: &str) -> bool {
    if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
        let mut buf = [0u8; 4096];
        let got = match &r.sock {
            Sock::Tcp(t) => (&*t).read(&mut buf),
            Sock::Unix(u) => (&*u).read(&mut buf),
        };
        match got {
            Ok(0) => return false,
            Ok(n) => r.inb.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
        if !parse_refused(r, msg) {
            return false;
        }
    }
    if !r.out.is_empty() {
        // SAFETY: sending from a buffer we own on the connection's descriptor.
        let n = unsafe {
            libc::send(r.sock.as_raw_fd(), r.out.as_ptr() as *const libc::c_void, r.out.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
        };
        if n < 0 {
            if io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
                return false;
            }
        } else {
            r.out.drain(..n as usize);
        }
    }
    !(r.closing && r.out.is_empty())
}

/// Consume what a refused client sent and queue the answers; false to close now.
fn parse_refused(r: &mut Refusal, msg: &str) -> bool {
    loop {
        if r.skip > 0 {
            let n = r.skip.min(r.inb.len() as u64) as usize;
            r.inb.drain(..n);
            r.skip -= n as u64;
            if r.skip > 0 {
                return true;
            }
        }
        if !r.got_flags {
            if r.inb.len() < 4 {
                return true;
            }
            r.inb.drain(..4);
            r.got_flags = true;
        }
        if r.closing || r.inb.len() < OPTION_HEADER_LEN {
            return true;
        }
        let Ok(h) = OptionHeader::decode(&r.inb) else {
            return false;
        };
        r.inb.drain(..OPTION_HEADER_LEN);
        r.skip = h.len as u64;
        match h.option {
            OPT_EXPORT_NAME => return false,
            OPT_ABORT => {
                encode_option_reply(&mut r.out, OPT_ABORT, REP_ACK, &[]);
                r.closing = true;
            }
            o => encode_option_reply(&mut r.out, o, REP_ERR_POLICY, &[msg.as_bytes()]),
        }
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
        self.shared.snapshot()
    }
}

/// A running server. Dropping it shuts the server down.
pub struct ServerHandle {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    tcp_addrs: Vec<SocketAddr>,
    unix_paths: Vec<PathBuf>,
    warnings: Vec<String>,
}

impl ServerHandle {
    /// One-line warnings about the configuration, for the caller to print: a
    /// non-loopback listener without required TLS, `max_connections` lowered to fit
    /// `RLIMIT_NOFILE`, certificates given with TLS off.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

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
        self.shared.snapshot()
    }

    pub fn stopper(&self) -> Stopper {
        Stopper { shared: self.shared.clone() }
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
            conns = self.shared.conns_cv.wait_timeout(conns, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        let mut threads = Vec::new();
        for e in conns.values_mut() {
            e.sock.0.shutdown();
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
