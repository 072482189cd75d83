//! A running `ssdtwin serve`: the NBD server, the housekeeping thread and the metrics
//! endpoint around one [`TwinBackend`].

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

use ssdtwin_nbd::{Server, ServerConfig, ServerHandle, ServerStats, TlsMode};

use crate::backend::TwinBackend;
use crate::config::TwinConfig;
use crate::error::{io_err, ServeError};
use crate::live::SessionSummary;
use crate::metrics::MetricsServer;
use crate::stack::StackBackend;

/// Where and how to serve.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub tcp: Vec<String>,
    pub unix: Vec<PathBuf>,
    /// `HOST:PORT` for the Prometheus endpoint (`GET /metrics`).
    pub metrics: Option<String>,
    pub twin: TwinConfig,
    pub server: ServerConfig,
}

pub struct Serving {
    backend: Arc<TwinBackend>,
    handle: Option<ServerHandle>,
    housekeeper: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
    metrics: Option<MetricsServer>,
    uris: Vec<String>,
    /// `ssdtwin serve STACKDIR`: the stack's volume is what is served (stack.rs).
    stack: Option<Arc<StackBackend>>,
}

/// The housekeeping thread: [`TwinBackend::tick`] every `tick`, each new problem reported
/// once on stderr.
fn housekeeping(backend: Arc<TwinBackend>, stack: Option<Arc<StackBackend>>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
    let tick = backend.config().tick;
    std::thread::Builder::new().name("ssdtwin-housekeeping".into()).spawn(move || {
        let mut last_err: Option<String> = None;
        while !stop.load(Relaxed) {
            if let Err(e) = stack.as_ref().map_or_else(|| backend.tick(), |s| s.tick()) {
                if last_err.as_ref() != Some(&e) {
                    eprintln!("ssdtwin serve: {e}");
                    last_err = Some(e);
                }
            }
            std::thread::park_timeout(tick);
        }
    })
}

/// The exports of a server whose image is not open yet: none (never served: the real
/// backend replaces it before the server starts).
struct Opening;

impl ssdtwin_nbd::Backend for Opening {
    fn exports(&self) -> Vec<ssdtwin_nbd::ExportInfo> {
        Vec::new()
    }
    fn default_export(&self) -> Option<String> {
        None
    }
    fn open(&self, _name: &str) -> Option<Arc<dyn ssdtwin_nbd::Export>> {
        None
    }
}

/// What can fail on a bad setting or a busy address, done before the image is opened, so
/// that a server that cannot start leaves the image exactly as it was (no commit, no
/// journal, no data files): the listeners bound, the TLS material and the socket group
/// checked, the metrics address bound.
struct Listening {
    server: Server,
    metrics: Option<TcpListener>,
}

fn listen(opts: &ServeOptions) -> Result<Listening, ServeError> {
    if opts.tcp.is_empty() && opts.unix.is_empty() {
        return Err(ServeError::Config("give --listen HOST:PORT and/or --unix PATH".into()));
    }
    let mut server = Server::new(Arc::new(Opening)).with_config(opts.server.clone());
    for a in &opts.tcp {
        server = server.listen_tcp(a.as_str())?;
    }
    for p in &opts.unix {
        server = server.listen_unix(p)?;
    }
    let server = server.prepare()?;
    let metrics = match &opts.metrics {
        Some(a) => Some(TcpListener::bind(a.as_str()).map_err(io_err(format!("metrics listener {a}")))?),
        None => None,
    };
    Ok(Listening { server, metrics })
}

impl Serving {
    pub fn start(dir: &std::path::Path, opts: ServeOptions) -> Result<Serving, ServeError> {
        let listening = listen(&opts)?;
        let backend = TwinBackend::open(dir, opts.twin.clone())?;
        match Self::start_on(listening, backend.clone(), &opts, None) {
            Ok(s) => Ok(s),
            Err(e) => {
                // A server that cannot start closes what it opened (the journal is
                // committed away), so the image is left whole for the next open.
                let _ = backend.close();
                Err(e)
            }
        }
    }

    /// Serve the host stack `stack` on namespace `nsid` of the drive image at `dir`: one
    /// export, the stack's volume (stack.rs, docs/host.md "Serving a stack").
    pub fn start_stack(
        dir: &std::path::Path,
        stack: ssdtwin_core::engine::stack::HostStack,
        nsid: u32,
        opts: ServeOptions,
    ) -> Result<Serving, ServeError> {
        let listening = listen(&opts)?;
        // Refused before the drive is opened for writing: that open alone commits a
        // generation and makes the data files and live.json.
        StackBackend::check(dir, &stack, nsid, &opts.twin)?;
        let backend = TwinBackend::open(dir, opts.twin.clone())?;
        match StackBackend::new(backend.clone(), stack, nsid).and_then(|s| Self::start_on(listening, backend.clone(), &opts, Some(s))) {
            Ok(s) => Ok(s),
            Err(e) => {
                let _ = backend.close();
                Err(e)
            }
        }
    }

    fn start_on(
        listening: Listening,
        backend: Arc<TwinBackend>,
        opts: &ServeOptions,
        stack: Option<Arc<StackBackend>>,
    ) -> Result<Serving, ServeError> {
        let nbd: Arc<dyn ssdtwin_nbd::Backend> = match &stack {
            Some(s) => s.clone(),
            None => backend.clone(),
        };
        let server = listening.server.with_backend(nbd);
        let metrics = match (listening.metrics, &opts.metrics) {
            (Some(l), Some(a)) => Some(MetricsServer::start_on(l, backend.clone()).map_err(io_err(format!("metrics listener {a}")))?),
            _ => None,
        };
        let tls = opts.server.tls != TlsMode::Off;
        let handle = server.start()?;
        // With TLS on offer, the URIs a client should use are libnbd's nbds:// ones.
        let names = stack.as_ref().map_or_else(|| backend.export_names(), |s| s.export_names());
        let uris: Vec<String> = names
            .iter()
            .flat_map(|name| handle.uris(name))
            .map(|u| if tls { u.replacen("nbd://", "nbds://", 1).replacen("nbd+unix://", "nbds+unix://", 1) } else { u })
            .collect();
        backend.attach_server(handle.stopper(), uris.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let hk = housekeeping(backend.clone(), stack.clone(), stop.clone()).map_err(io_err("spawn the housekeeping thread"))?;
        // A first snapshot at once, so `live.json` exists as soon as clients can connect.
        let _ = stack.as_ref().map_or_else(|| backend.tick(), |s| s.tick());
        Ok(Serving { backend, handle: Some(handle), housekeeper: Some((hk, stop)), metrics, uris, stack })
    }

    /// `nbd://…/nsN` (and `nbd+unix://…`) URIs of every export.
    pub fn uris(&self) -> &[String] {
        &self.uris
    }

    /// What the server warns about (a non-loopback listener without TLS, a lowered
    /// connection limit), one line each.
    pub fn warnings(&self) -> Vec<String> {
        self.handle.as_ref().map(|h| h.warnings().to_vec()).unwrap_or_default()
    }

    /// Bound TCP addresses (with the real port when 0 was asked for).
    pub fn tcp_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.handle.as_ref().map(|h| h.tcp_addrs().to_vec()).unwrap_or_default()
    }

    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(|m| m.addr())
    }

    pub fn backend(&self) -> &Arc<TwinBackend> {
        &self.backend
    }

    /// The served stack, if this serves one (its final state after [`Serving::stop`]).
    pub fn stack(&self) -> Option<&Arc<StackBackend>> {
        self.stack.as_ref()
    }

    pub fn stats(&self) -> ServerStats {
        self.handle.as_ref().map(|h| h.stats()).unwrap_or_default()
    }

    /// Stop serving (connections get the server's grace period), then commit and return
    /// the session summary.
    pub fn stop(mut self) -> Result<Option<SessionSummary>, ServeError> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<Option<SessionSummary>, ServeError> {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
        if let Some((t, s)) = self.housekeeper.take() {
            s.store(true, Relaxed);
            t.thread().unpark();
            let _ = t.join();
        }
        let summary = match &self.stack {
            Some(s) => s.close(),
            None => self.backend.close(),
        };
        if let Some(m) = self.metrics.take() {
            m.stop();
        }
        summary
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.stop_inner();
        }
    }
}
