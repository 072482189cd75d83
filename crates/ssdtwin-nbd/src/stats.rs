//! Server-wide counters. Connections keep local counts and publish them once per
//! reply batch, so the hot path does not bounce shared cache lines between cores.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
pub(crate) struct Stats {
    pub connections_accepted: AtomicU64,
    pub connections_active: AtomicU64,
    pub connections_refused: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub error_replies: AtomicU64,
    pub replies_paced: AtomicU64,
    pub replies_late: AtomicU64,
    pub late_ns_max: AtomicU64,
    pub late_ns_sum: AtomicU64,
    pub handshake_timeouts: AtomicU64,
    pub send_timeouts: AtomicU64,
    pub inflight_bytes_max: AtomicU64,
    pub budget_waits: AtomicU64,
    pub tls_sessions: AtomicU64,
    pub tls_failures: AtomicU64,
}

/// A snapshot of the server's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub connections_accepted: u64,
    pub connections_active: u64,
    /// Refused because `max_connections` was reached: told so in the handshake
    /// (`NBD_REP_ERR_POLICY` with a message) or, when many arrive at once, closed.
    pub connections_refused: u64,
    /// Connections closed because the handshake (TLS included) took longer than
    /// `ServerConfig::handshake_timeout`.
    pub handshake_timeouts: u64,
    /// Connections closed because the client read no reply for `send_timeout`.
    pub send_timeouts: u64,
    /// Connections ended by a hard disconnect for a protocol violation.
    pub protocol_errors: u64,
    /// Transmission requests received (all commands).
    pub requests: u64,
    /// Bytes returned by READ.
    pub bytes_read: u64,
    /// Bytes accepted by WRITE.
    pub bytes_written: u64,
    /// Replies carrying an error.
    pub error_replies: u64,
    /// Replies the backend gave a time (`Done::not_before`, or a deferred reply resolved to
    /// one): held until it, or sent at once when it had already passed by the time the
    /// export returned (then as late as that). Immediate (`Done::NOW`) and error replies are
    /// not counted.
    pub replies_paced: u64,
    /// Paced replies sent later than `ServerConfig::late_threshold` after their time.
    pub replies_late: u64,
    /// Worst lateness of a paced reply, nanoseconds.
    pub late_ns_max: u64,
    /// Sum of the lateness of all paced replies (divide by `replies_paced` for the mean).
    pub late_ns_sum: u64,
    /// Request/reply bytes charged to the in-flight budget now (`max_inflight_bytes`).
    pub inflight_bytes: u64,
    /// The most ever charged at once.
    pub inflight_bytes_max: u64,
    /// Times a connection had to wait for the budget (and stopped reading meanwhile).
    pub budget_waits: u64,
    /// Successful `NBD_OPT_STARTTLS` upgrades.
    pub tls_sessions: u64,
    /// TLS handshakes that failed (bad certificate, protocol error, timeout).
    pub tls_failures: u64,
}

impl Stats {
    pub fn snapshot(&self, inflight_bytes: u64) -> ServerStats {
        ServerStats {
            connections_accepted: self.connections_accepted.load(Relaxed),
            connections_active: self.connections_active.load(Relaxed),
            connections_refused: self.connections_refused.load(Relaxed),
            protocol_errors: self.protocol_errors.load(Relaxed),
            requests: self.requests.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            error_replies: self.error_replies.load(Relaxed),
            replies_paced: self.replies_paced.load(Relaxed),
            replies_late: self.replies_late.load(Relaxed),
            late_ns_max: self.late_ns_max.load(Relaxed),
            late_ns_sum: self.late_ns_sum.load(Relaxed),
            handshake_timeouts: self.handshake_timeouts.load(Relaxed),
            send_timeouts: self.send_timeouts.load(Relaxed),
            inflight_bytes,
            inflight_bytes_max: self.inflight_bytes_max.load(Relaxed),
            budget_waits: self.budget_waits.load(Relaxed),
            tls_sessions: self.tls_sessions.load(Relaxed),
            tls_failures: self.tls_failures.load(Relaxed),
        }
    }
}

/// Per-connection counts not yet published.
#[derive(Default)]
pub(crate) struct LocalStats {
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub error_replies: u64,
    /// Replies with a time whose time had passed when they were ready (sent at once,
    /// counted here; the pacer counts the ones it holds).
    pub paced: u64,
    pub late: u64,
    pub late_ns_max: u64,
    pub late_ns_sum: u64,
}

impl LocalStats {
    /// A reply whose time passed `lateness` before it was ready to go.
    pub fn paced_late(&mut self, lateness: std::time::Duration, threshold: std::time::Duration) {
        let ns = lateness.as_nanos().min(u64::MAX as u128) as u64;
        self.paced += 1;
        self.late += (lateness > threshold) as u64;
        self.late_ns_max = self.late_ns_max.max(ns);
        self.late_ns_sum += ns;
    }

    pub fn publish(&mut self, s: &Stats) {
        if self.requests != 0 {
            s.requests.fetch_add(self.requests, Relaxed);
        }
        if self.bytes_read != 0 {
            s.bytes_read.fetch_add(self.bytes_read, Relaxed);
        }
        if self.bytes_written != 0 {
            s.bytes_written.fetch_add(self.bytes_written, Relaxed);
        }
        if self.error_replies != 0 {
            s.error_replies.fetch_add(self.error_replies, Relaxed);
        }
        if self.paced != 0 {
            s.replies_paced.fetch_add(self.paced, Relaxed);
            s.replies_late.fetch_add(self.late, Relaxed);
            s.late_ns_max.fetch_max(self.late_ns_max, Relaxed);
            s.late_ns_sum.fetch_add(self.late_ns_sum, Relaxed);
        }
        *self = LocalStats::default();
    }
}
