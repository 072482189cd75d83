//! Fixed-newstyle option haggling.
//!
//! [`Haggler`] is the state machine: it takes one option (number + data) and appends
//! the server's replies to a buffer, with no IO, so tests and fuzzers can drive it
//! directly. [`negotiate`] runs it over a connection.

use std::io::{IoSlice, Read};
use std::sync::Arc;
use std::time::Instant;

use crate::backend::{Backend, Export, ExportInfo};
use crate::proto::*;
use crate::tls::TlsMode;
use crate::wire::{InBuf, Sink, Starve};

/// Context id this server gives `base:allocation` (ids are opaque to clients).
pub(crate) const ALLOCATION_CONTEXT_ID: u32 = 1;

/// Larger option payloads end the connection: real clients send at most a few KiB
/// (strings are capped at 4096 bytes), so this is only reached by abuse.
pub(crate) const MAX_OPTION_LEN: u32 = 1 << 20;

/// What the handshake settled, carried into the transmission phase.
pub(crate) struct Negotiated {
    pub export: Arc<dyn Export>,
    pub info: ExportInfo,
    pub tflags: u16,
    pub structured: bool,
    /// `base:allocation` was selected for this export (BLOCK_STATUS allowed).
    pub meta_allocation: bool,
}

/// Outcome of one option.
pub(crate) enum Step {
    Continue,
    /// Client aborted (ACK already queued): send replies, then close.
    Close,
    /// Enter transmission (GO acknowledged or EXPORT_NAME answered).
    Enter(Negotiated),
    /// STARTTLS acknowledged: send the replies, then run the TLS handshake.
    StartTls,
}

/// Why a handshake ended without entering transmission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HandshakeEnd {
    Aborted,
    PeerClosed,
    Shutdown,
    /// The client broke a MUST; the spec allows (or requires) a hard disconnect.
    Protocol(String),
    /// The handshake took longer than the server's handshake limit.
    Timeout,
    /// STARTTLS was acknowledged but the TLS handshake failed.
    Tls(String),
}

/// Transmission flags for an export: advertise exactly what it supports.
pub(crate) fn transmission_flags(info: &ExportInfo, structured: bool) -> u16 {
    let mut f = TFLAG_HAS_FLAGS;
    let rw = !info.read_only;
    if info.read_only {
        f |= TFLAG_READ_ONLY;
    }
    if info.can_flush {
        f |= TFLAG_SEND_FLUSH;
    }
    if info.can_fua && rw {
        f |= TFLAG_SEND_FUA;
    }
    if info.can_trim && rw {
        f |= TFLAG_SEND_TRIM;
    }
    if info.can_write_zeroes && rw {
        // FAST_ZERO is always answerable: with can_fast_zero false we reply ENOTSUP
        // quickly, which the spec permits and which saves clients a slow zeroing pass.
        f |= TFLAG_SEND_WRITE_ZEROES | TFLAG_SEND_FAST_ZERO;
    }
    if structured {
        // Reads are always answered with a single content chunk, so DF costs nothing.
        f |= TFLAG_SEND_DF;
    }
    if info.can_multi_conn {
        f |= TFLAG_CAN_MULTI_CONN;
    }
    if info.can_cache {
        f |= TFLAG_SEND_CACHE;
    }
    f
}

/// Validate client flags against what the server advertised.
pub(crate) fn check_client_flags(flags: u32) -> Result<bool, HandshakeEnd> {
    let known = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
    if flags & !known != 0 {
        return Err(HandshakeEnd::Protocol(format!("unknown client flags {flags:#x}")));
    }
    Ok(flags & FLAG_C_NO_ZEROES != 0)
}

struct Resolved {
    export: Arc<dyn Export>,
    info: ExportInfo,
}

/// The option-haggling state machine.
pub(crate) struct Haggler<'a> {
    backend: &'a dyn Backend,
    no_zeroes: bool,
    structured: bool,
    /// Canonical export name for which `base:allocation` is selected.
    meta: Option<String>,
    tls_mode: TlsMode,
    /// The session runs over TLS (STARTTLS succeeded).
    tls_active: bool,
}

impl<'a> Haggler<'a> {
    pub fn new(backend: &'a dyn Backend, client_flags: u32) -> Result<Self, HandshakeEnd> {
        let no_zeroes = check_client_flags(client_flags)?;
        Ok(Haggler { backend, no_zeroes, structured: false, meta: None, tls_mode: TlsMode::Off, tls_active: false })
    }

    pub fn with_tls(mut self, mode: TlsMode) -> Self {
        self.tls_mode = mode;
        self
    }

    /// The TLS handshake succeeded. Whatever was negotiated in plain text is forgotten
    /// (a man in the middle could have injected it), as nbdkit does since CVE-2021-3716.
    pub fn tls_started(&mut self) {
        self.tls_active = true;
        self.structured = false;
        self.meta = None;
    }

    fn resolve(&self, name: &[u8]) -> Result<Resolved, (u32, String)> {
        let name = std::str::from_utf8(name).map_err(|_| (REP_ERR_INVALID, "export name is not UTF-8".to_string()))?;
        let canonical = if name.is_empty() {
            self.backend.default_export().ok_or((REP_ERR_UNKNOWN, "this server has no default export".to_string()))?
        } else {
            name.to_string()
        };
        let export = self.backend.open(&canonical).ok_or_else(|| (REP_ERR_UNKNOWN, format!("no export named {canonical:?}")))?;
        let info = export.info();
        if let Err(why) = info.validate() {
            return Err((REP_ERR_UNKNOWN, format!("export {canonical:?} is misconfigured: {why}")));
        }
        Ok(Resolved { export, info })
    }

    fn error(out: &mut Vec<u8>, opt: u32, typ: u32, msg: &str) {
        let msg = &msg.as_bytes()[..msg.len().min(MAX_STRING_LEN)];
        encode_option_reply(out, opt, typ, &[msg]);
    }

    /// Handle one option; replies are appended to `out`. `Err` means hard disconnect.
    pub fn option(&mut self, opt: u32, data: &[u8], out: &mut Vec<u8>) -> Result<Step, HandshakeEnd> {
        if self.tls_mode == TlsMode::Require && !self.tls_active {
            if let Some(step) = Self::before_tls(opt, out)? {
                return Ok(step);
            }
        }
        match opt {
            OPT_EXPORT_NAME => self.export_name(data, out),
            OPT_ABORT => {
                // Spec: ignore any data and ACK.
                encode_option_reply(out, opt, REP_ACK, &[]);
                Ok(Step::Close)
            }
            OPT_LIST => Ok(self.list(opt, data, out)),
            OPT_STARTTLS => Ok(self.starttls(opt, data, out)),
            OPT_INFO | OPT_GO => Ok(self.info_or_go(opt, data, out)),
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    Self::error(out, opt, REP_ERR_INVALID, "NBD_OPT_STRUCTURED_REPLY takes no data");
                } else {
                    self.structured = true;
                    encode_option_reply(out, opt, REP_ACK, &[]);
                }
                Ok(Step::Continue)
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                self.meta_context(opt, data, out);
                Ok(Step::Continue)
            }
            _ => {
                Self::error(out, opt, REP_ERR_UNSUP, "option not supported");
                Ok(Step::Continue)
            }
        }
    }

    /// On a server that requires TLS, before STARTTLS: the options allowed through (None),
    /// or the answer to any other.
    fn before_tls(opt: u32, out: &mut Vec<u8>) -> Result<Option<Step>, HandshakeEnd> {
        match opt {
            OPT_STARTTLS | OPT_ABORT => Ok(None),
            // It cannot carry an error, so the spec says to end the session.
            OPT_EXPORT_NAME => Err(HandshakeEnd::Protocol("EXPORT_NAME before STARTTLS on a server that requires TLS".into())),
            _ => {
                Self::error(out, opt, REP_ERR_TLS_REQD, "this server requires TLS: send NBD_OPT_STARTTLS first (e.g. an nbds:// URI)");
                Ok(Some(Step::Continue))
            }
        }
    }

    /// NBD_OPT_EXPORT_NAME: enter transmission, or disconnect (it has no error reply).
    fn export_name(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<Step, HandshakeEnd> {
        match self.resolve(data) {
            Err((_, msg)) => Err(HandshakeEnd::Protocol(format!("EXPORT_NAME: {msg}"))),
            Ok(r) => {
                let tflags = transmission_flags(&r.info, self.structured);
                encode_export_name_reply(out, r.info.size, tflags, self.no_zeroes);
                Ok(self.enter(r, tflags))
            }
        }
    }

    fn enter(&self, r: Resolved, tflags: u16) -> Step {
        let meta_allocation = self.meta.as_deref() == Some(r.info.name.as_str());
        Step::Enter(Negotiated { export: r.export, info: r.info, tflags, structured: self.structured, meta_allocation })
    }

    fn list(&mut self, opt: u32, data: &[u8], out: &mut Vec<u8>) -> Step {
        if !data.is_empty() {
            Self::error(out, opt, REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
            return Step::Continue;
        }
        for e in self.backend.exports() {
            encode_rep_server(out, opt, &e.name, &e.description);
        }
        encode_option_reply(out, opt, REP_ACK, &[]);
        Step::Continue
    }

    fn starttls(&mut self, opt: u32, data: &[u8], out: &mut Vec<u8>) -> Step {
        if self.tls_mode == TlsMode::Off {
            Self::error(out, opt, REP_ERR_UNSUP, "TLS is not enabled on this server");
        } else if !data.is_empty() {
            Self::error(out, opt, REP_ERR_INVALID, "NBD_OPT_STARTTLS takes no data");
        } else if self.tls_active {
            Self::error(out, opt, REP_ERR_INVALID, "TLS is already active");
        } else {
            encode_option_reply(out, opt, REP_ACK, &[]);
            return Step::StartTls;
        }
        Step::Continue
    }

    /// NBD_OPT_INFO and NBD_OPT_GO: the export's information items; GO then enters
    /// transmission.
    fn info_or_go(&mut self, opt: u32, data: &[u8], out: &mut Vec<u8>) -> Step {
        let req = match InfoRequest::decode(data) {
            Ok(r) => r,
            Err(e) => {
                Self::error(out, opt, REP_ERR_INVALID, &format!("malformed request: {e}"));
                return Step::Continue;
            }
        };
        let r = match self.resolve(req.name) {
            Ok(r) => r,
            Err((typ, msg)) => {
                Self::error(out, opt, typ, &msg);
                return Step::Continue;
            }
        };
        let tflags = transmission_flags(&r.info, self.structured);
        encode_info_export(out, opt, r.info.size, tflags);
        Self::info_items(out, opt, &req.infos, &r);
        encode_option_reply(out, opt, REP_ACK, &[]);
        if opt == OPT_GO {
            self.enter(r, tflags)
        } else {
            Step::Continue
        }
    }

    /// Each requested item once, whatever order or repetition the client used.
    fn info_items(out: &mut Vec<u8>, opt: u32, infos: &[u16], r: &Resolved) {
        let mut sent = [false; 4];
        for &i in infos {
            if (i as usize) < sent.len() && !sent[i as usize] {
                sent[i as usize] = true;
                match i {
                    INFO_NAME => encode_info_string(out, opt, INFO_NAME, &r.info.name),
                    INFO_DESCRIPTION => encode_info_string(out, opt, INFO_DESCRIPTION, &r.info.description),
                    INFO_BLOCK_SIZE => encode_info_block_size(out, opt, r.info.block_min, r.info.block_preferred, r.info.block_max),
                    _ => {} // INFO_EXPORT is always sent above
                }
            }
        }
    }

    fn meta_context(&mut self, opt: u32, data: &[u8], out: &mut Vec<u8>) {
        let set = opt == OPT_SET_META_CONTEXT;
        if set {
            // SET replaces the selection even when it fails.
            self.meta = None;
            if !self.structured {
                Self::error(out, opt, REP_ERR_INVALID, "negotiate structured replies first");
                return;
            }
        }
        let req = match MetaContextRequest::decode(data) {
            Ok(r) => r,
            Err(e) => {
                Self::error(out, opt, REP_ERR_INVALID, &format!("malformed request: {e}"));
                return;
            }
        };
        let r = match self.resolve(req.name) {
            Ok(r) => r,
            Err((typ, msg)) => {
                Self::error(out, opt, typ, &msg);
                return;
            }
        };
        // Only `base:allocation` exists. LIST with no query lists everything; LIST
        // accepts the `base:` wildcard; SET needs the exact name. Unknown namespaces
        // and leaves are ignored, as the spec requires.
        let wanted = if !set && req.queries.is_empty() {
            true
        } else {
            req.queries.iter().any(|q| *q == META_BASE_ALLOCATION.as_bytes() || (!set && *q == b"base:"))
        };
        if wanted {
            // LIST replies carry id 0 ("reserved, SHOULD be zero").
            let id = if set { ALLOCATION_CONTEXT_ID } else { 0 };
            encode_rep_meta_context(out, opt, id, META_BASE_ALLOCATION);
            if set {
                self.meta = Some(r.info.name.clone());
            }
        }
        encode_option_reply(out, opt, REP_ACK, &[]);
    }
}

fn send<S: Sink>(sink: &mut S, bytes: &[u8]) -> Result<(), HandshakeEnd> {
    sink.send_all(&mut [IoSlice::new(bytes)]).map_err(|_| HandshakeEnd::PeerClosed)
}

/// Upgrades a connection to TLS in place (after STARTTLS was acknowledged): replaces
/// the transport inside `inb` and `sink` with their TLS halves.
pub(crate) trait StartTls<R, S> {
    fn start_tls(&mut self, inb: &mut InBuf<R>, sink: &mut S, deadline: Option<Instant>, stop: &dyn Fn() -> bool) -> Result<(), String>;
}

/// How a connection's handshake is run.
pub(crate) struct Policy<'a, R, S> {
    pub tls_mode: TlsMode,
    /// Present when `tls_mode` is not `Off`.
    pub tls: Option<&'a mut dyn StartTls<R, S>>,
    /// The whole handshake, TLS included, must be done by then.
    pub deadline: Option<Instant>,
}

/// Run the handshake on a connection. `shutting_down` is polled between options and
/// on idle read timeouts.
pub(crate) fn negotiate<R: Read, S: Sink>(
    inb: &mut InBuf<R>,
    sink: &mut S,
    backend: &dyn Backend,
    shutting_down: &dyn Fn() -> bool,
    mut policy: Policy<'_, R, S>,
) -> Result<Negotiated, HandshakeEnd> {
    let starve = |s: Starve| match s {
        Starve::Closed => HandshakeEnd::PeerClosed,
        Starve::Stopped => HandshakeEnd::Shutdown,
        Starve::Deadline => HandshakeEnd::Timeout,
    };
    inb.set_deadline(policy.deadline);
    // Give up on an idle client once the server is stopping; a partly sent message
    // is waited for (the server's grace period bounds that).
    let mut stop = |partial: bool| !partial && shutting_down();

    send(sink, &encode_greeting(SERVER_HANDSHAKE_FLAGS))?;
    inb.ensure(4, &mut stop).map_err(starve)?;
    let cflags = u32::from_be_bytes(inb.avail()[..4].try_into().expect("4 bytes"));
    inb.consume(4);
    let tls_mode = if policy.tls.is_some() { policy.tls_mode } else { TlsMode::Off };
    let mut h = Haggler::new(backend, cflags)?.with_tls(tls_mode);

    let mut data = Vec::new();
    let mut out = Vec::with_capacity(256);
    loop {
        inb.ensure(OPTION_HEADER_LEN, &mut stop).map_err(starve)?;
        let hdr = OptionHeader::decode(inb.avail()).map_err(|_| HandshakeEnd::Protocol("bad option magic".to_string()))?;
        inb.consume(OPTION_HEADER_LEN);
        if hdr.len > MAX_OPTION_LEN {
            return Err(HandshakeEnd::Protocol(format!("option {} data too long ({} bytes)", hdr.option, hdr.len)));
        }
        data.resize(hdr.len as usize, 0);
        inb.read_exact_into(&mut data, &mut |_| false).map_err(starve)?;
        out.clear();
        if shutting_down() {
            // Spec: error further options with ERR_SHUTDOWN, except ABORT; EXPORT_NAME
            // cannot carry an error, so that one just ends the session.
            match hdr.option {
                OPT_ABORT => encode_option_reply(&mut out, OPT_ABORT, REP_ACK, &[]),
                OPT_EXPORT_NAME => return Err(HandshakeEnd::Shutdown),
                o => encode_option_reply(&mut out, o, REP_ERR_SHUTDOWN, &[b"server is shutting down"]),
            }
            send(sink, &out)?;
            return Err(if hdr.option == OPT_ABORT { HandshakeEnd::Aborted } else { HandshakeEnd::Shutdown });
        }
        let step = h.option(hdr.option, &data, &mut out)?;
        if !out.is_empty() {
            send(sink, &out)?;
        }
        match step {
            Step::Continue => {}
            Step::Close => return Err(HandshakeEnd::Aborted),
            Step::Enter(n) => {
                inb.set_deadline(None);
                return Ok(n);
            }
            Step::StartTls => {
                // The client may send nothing between STARTTLS and its TLS hello: bytes
                // already here were sent in the clear and must not be read as if they
                // came through TLS (the STARTTLS injection attack).
                if !inb.avail().is_empty() {
                    return Err(HandshakeEnd::Protocol("data after NBD_OPT_STARTTLS before the TLS handshake".into()));
                }
                let up = policy.tls.as_mut().expect("StartTls only with a TLS policy");
                up.start_tls(inb, sink, policy.deadline, shutting_down).map_err(HandshakeEnd::Tls)?;
                h.tls_started();
            }
        }
    }
}
