//! TLS for `NBD_OPT_STARTTLS`, with rustls (TLS 1.2 and 1.3, the `ring` provider).
//!
//! Certificates come from a directory in the layout nbdkit (`--tls-certificates`) and
//! qemu-nbd (`tls-creds-x509,dir=`) use: `server-cert.pem` (the server certificate,
//! optionally followed by its chain), `server-key.pem` (its private key) and, to check
//! client certificates, `ca-cert.pem`. As with nbdkit, client certificates are not
//! asked for unless `verify_peer` is set, and then they are required and must chain
//! to `ca-cert.pem`.
//!
//! Pre-shared keys (nbdkit's `--tls-psk`) are not offered: rustls implements no
//! external PSK (its PSK code serves session resumption only), and the crate does not
//! hand-roll cryptography.
//!
//! After the upgrade one rustls connection serves both directions: the connection's
//! reader decrypts with [`TlsReader`] (reading the socket without holding the lock,
//! so a blocked reader never stalls the writer) and replies are encrypted and sent
//! by [`TlsSink`], under the lock.

use std::fmt;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConnection};

use crate::error::Error;
use crate::wire::{send_timed_out, SendClock, Sink};

/// Whether and how the server offers TLS (nbdkit's `--tls=off|on|require`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// NOTLS: `NBD_OPT_STARTTLS` is answered with `NBD_REP_ERR_POLICY`.
    #[default]
    Off,
    /// TLS is available; clients may also go without.
    On,
    /// FORCEDTLS: every option but `STARTTLS` and `ABORT` gets `NBD_REP_ERR_TLS_REQD`
    /// until TLS is up (and `EXPORT_NAME` ends the connection).
    Require,
}

impl FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<TlsMode, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!("TLS mode {s:?}: use off, on or require")),
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsMode::Off => "off",
            TlsMode::On => "on",
            TlsMode::Require => "require",
        })
    }
}

pub const CA_CERT: &str = "ca-cert.pem";
pub const SERVER_CERT: &str = "server-cert.pem";
pub const SERVER_KEY: &str = "server-key.pem";

fn tls_error(dir: &Path, msg: impl fmt::Display) -> Error {
    Error::Tls(format!("TLS certificates in {}: {msg}", dir.display()))
}

fn pem_path(dir: &Path, name: &str) -> Result<PathBuf, Error> {
    let p = dir.join(name);
    if !p.is_file() {
        return Err(tls_error(
            dir,
            format!("{name} is missing (the directory needs {CA_CERT}, {SERVER_CERT} and {SERVER_KEY}, as for nbdkit --tls-certificates)"),
        ));
    }
    Ok(p)
}

fn certs(dir: &Path, name: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let p = pem_path(dir, name)?;
    let v = CertificateDer::pem_file_iter(&p)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(dir, format!("{name}: {e}")))?;
    if v.is_empty() {
        return Err(tls_error(dir, format!("{name} holds no certificate")));
    }
    Ok(v)
}

/// Build the rustls configuration from a certificate directory.
pub(crate) fn load(dir: &Path, verify_peer: bool) -> Result<Arc<rustls::ServerConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certs(dir, SERVER_CERT)?;
    let key = PrivateKeyDer::from_pem_file(pem_path(dir, SERVER_KEY)?).map_err(|e| tls_error(dir, format!("{SERVER_KEY}: {e}")))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| tls_error(dir, e))?;
    let builder = if verify_peer {
        let mut roots = RootCertStore::empty();
        for c in certs(dir, CA_CERT)? {
            roots.add(c).map_err(|e| tls_error(dir, format!("{CA_CERT}: {e}")))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| tls_error(dir, format!("{CA_CERT}: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| tls_error(dir, format!("{SERVER_CERT} and {SERVER_KEY}: {e}")))?;
    // NBD connections are long-lived: no resumption tickets to send after the handshake.
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

fn raw_recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of its length for the duration of the call.
        let r = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Writes to the socket with `MSG_NOSIGNAL` (EPIPE instead of SIGPIPE); an expired
/// `SO_SNDTIMEO` becomes `TimedOut`, as in `SocketSink`.
struct FdWriter(RawFd, libc::c_int);

impl Write for FdWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is valid for reads of its length for the duration of the call.
            let r = unsafe { libc::send(self.0, buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_NOSIGNAL | self.1) };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Err(send_timed_out()),
                _ => return Err(e),
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type SharedFd = Arc<dyn AsRawFd + Send + Sync>;

struct TlsConn {
    conn: Mutex<ServerConnection>,
    sock: SharedFd,
}

impl TlsConn {
    fn lock(&self) -> MutexGuard<'_, ServerConnection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn send_tls(c: &mut ServerConnection, fd: RawFd) -> io::Result<()> {
    send_tls_until(c, fd, &SendClock::start(None))
}

fn send_tls_until(c: &mut ServerConnection, fd: RawFd, clock: &SendClock) -> io::Result<()> {
    let mut w = FdWriter(fd, 0);
    while c.wants_write() {
        c.write_tls(&mut w)?;
        if c.wants_write() {
            clock.check()?;
        }
    }
    Ok(())
}

/// Ciphertext read from the socket but not yet given to rustls.
struct CipherBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

/// Feed buffered ciphertext to rustls until it yields plaintext or runs out. `Ok(true)`
/// if anything was processed.
fn feed(c: &mut ServerConnection, cb: &mut CipherBuf, fd: RawFd) -> io::Result<bool> {
    let mut fed = false;
    while cb.start < cb.end {
        let n = c.read_tls(&mut &cb.buf[cb.start..cb.end])?;
        cb.start += n;
        fed = true;
        let st = match c.process_new_packets() {
            Ok(st) => st,
            Err(e) => {
                // Send the alert rustls queued, then fail.
                let _ = send_tls(c, fd);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        if st.plaintext_bytes_to_read() > 0 || n == 0 {
            break;
        }
    }
    if cb.start == cb.end {
        (cb.start, cb.end) = (0, 0);
    }
    Ok(fed)
}

/// Read more ciphertext from the socket (timeouts surface as `WouldBlock`/`TimedOut`).
fn fill(cb: &mut CipherBuf, fd: RawFd) -> io::Result<usize> {
    if cb.end == cb.buf.len() {
        cb.buf.copy_within(cb.start..cb.end, 0);
        cb.end -= cb.start;
        cb.start = 0;
    }
    let n = raw_recv(fd, &mut cb.buf[cb.end..])?;
    cb.end += n;
    Ok(n)
}

/// Server side of a TLS handshake on a connected socket, then the two halves.
/// `deadline` bounds the whole handshake; the socket's read timeout paces the checks.
pub(crate) fn accept(
    config: &Arc<rustls::ServerConfig>,
    sock: SharedFd,
    deadline: Option<Instant>,
    send_timeout: Option<Duration>,
    stop: &dyn Fn() -> bool,
) -> Result<(TlsReader, TlsSink), String> {
    let fd = sock.as_raw_fd();
    let mut c = ServerConnection::new(config.clone()).map_err(|e| format!("TLS setup: {e}"))?;
    let mut cb = CipherBuf { buf: vec![0u8; 32 << 10].into_boxed_slice(), start: 0, end: 0 };
    while c.is_handshaking() {
        send_tls(&mut c, fd).map_err(|e| format!("TLS handshake: {e}"))?;
        if !c.is_handshaking() {
            break;
        }
        if feed(&mut c, &mut cb, fd).map_err(|e| format!("TLS handshake: {e}"))? {
            continue;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err("TLS handshake: timed out".into());
        }
        match fill(&mut cb, fd) {
            Ok(0) => return Err("TLS handshake: the client closed the connection".into()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if stop() {
                    return Err("TLS handshake: server shutting down".into());
                }
            }
            Err(e) => return Err(format!("TLS handshake: {e}")),
        }
    }
    send_tls(&mut c, fd).map_err(|e| format!("TLS handshake: {e}"))?;
    let shared = Arc::new(TlsConn { conn: Mutex::new(c), sock });
    Ok((TlsReader { c: shared.clone(), cb, eof: false }, TlsSink { c: shared, closed: false, send_timeout }))
}

/// The decrypting half, used by the connection's reader thread.
pub(crate) struct TlsReader {
    c: Arc<TlsConn>,
    cb: CipherBuf,
    eof: bool,
}

impl Read for TlsReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let fd = self.c.sock.as_raw_fd();
        loop {
            {
                let mut c = self.c.lock();
                match c.reader().read(out) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                let fed = feed(&mut c, &mut self.cb, fd)?;
                // Alerts or key-update answers rustls wants to send.
                send_tls(&mut c, fd)?;
                if fed {
                    continue;
                }
                if self.eof {
                    return Ok(0);
                }
            }
            // Wait for ciphertext without the lock, so replies keep flowing.
            if fill(&mut self.cb, fd)? == 0 {
                self.eof = true;
                // Tell rustls about the EOF: it then reports a clean close or a truncation.
                let _ = self.c.lock().read_tls(&mut &[][..]);
            }
        }
    }
}

/// The encrypting half: replies from the reader and the pacing thread.
pub(crate) struct TlsSink {
    c: Arc<TlsConn>,
    closed: bool,
    send_timeout: Option<Duration>,
}

impl Sink for TlsSink {
    fn send_all(&mut self, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
        let fd = self.c.sock.as_raw_fd();
        let clock = SendClock::start(self.send_timeout);
        let mut c = self.c.lock();
        IoSlice::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            // Records are encrypted into a bounded buffer (64 KiB): send them as it fills.
            let n = c.writer().write_vectored(bufs)?;
            IoSlice::advance_slices(&mut bufs, n);
            send_tls_until(&mut c, fd, &clock)?;
        }
        Ok(())
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            let fd = self.c.sock.as_raw_fd();
            {
                // Best effort and without waiting: a client that reads nothing must not
                // hold up the close.
                let mut c = self.c.lock();
                c.send_close_notify();
                let mut w = FdWriter(fd, libc::MSG_DONTWAIT);
                while c.wants_write() && c.write_tls(&mut w).is_ok_and(|n| n > 0) {}
            }
            // SAFETY: shutdown on the connection's own descriptor, kept open by `sock`.
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
        }
    }
}
