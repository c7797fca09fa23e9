//! The server's own counts: one set of atomics per worker (written by that worker only, with a
//! plain load and store: no locked instruction on the request path), summed when read.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The statuses this server answers with, in the order of [`WorkerCounts::responses`].
pub const STATUSES: [u16; 13] = [200, 400, 404, 405, 408, 413, 414, 431, 500, 501, 503, 505, 403];

/// Why a connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// The client closed (EOF) with no request pending.
    Peer,
    /// The answer said `Connection: close` (the client asked, HTTP/1.0, --max-requests-per-connection).
    Server,
    /// No request began within --idle-timeout of the last answer (or of the accept).
    IdleTimeout,
    /// A head did not end within --header-timeout of its first byte (answered 408).
    HeaderTimeout,
    /// An answer made no progress for --send-timeout (the client does not read).
    SendTimeout,
    /// A head refused (400, 413, 414, 431, 501, 505): answered, then closed.
    BadRequest,
    /// A read or write failed (reset, broken pipe), or the client closed mid-request.
    Io,
    /// The TLS layer failed (handshake or record).
    Tls,
    /// The server shut down.
    Shutdown,
}

impl Close {
    pub const ALL: [Close; 9] = [
        Close::Peer,
        Close::Server,
        Close::IdleTimeout,
        Close::HeaderTimeout,
        Close::SendTimeout,
        Close::BadRequest,
        Close::Io,
        Close::Tls,
        Close::Shutdown,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Close::Peer => "peer_closed",
            Close::Server => "connection_close",
            Close::IdleTimeout => "idle_timeout",
            Close::HeaderTimeout => "header_timeout",
            Close::SendTimeout => "send_timeout",
            Close::BadRequest => "bad_request",
            Close::Io => "io_error",
            Close::Tls => "tls_error",
            Close::Shutdown => "shutdown",
        }
    }
}

/// Why a request or connection was refused; each is also in `responses` by its status when it
/// was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Connections closed at once because --max-connections were open (answered 503).
    OverConnectionLimit,
    /// Heads longer than --max-header-bytes (431).
    HeaderTooLarge,
    /// Request lines without an end within --max-header-bytes (414).
    RequestLineTooLong,
    /// More than 64 header lines (431).
    TooManyHeaders,
    /// Heads that did not end within --header-timeout (408).
    HeaderTimeout,
    /// Heads httparse refused (400).
    Malformed,
    /// Not HTTP/1.x (505).
    Version,
    /// Requests with a body or Transfer-Encoding (413, 501), or a bad Content-Length (400).
    Body,
    /// /bytes/N beyond --max-body (413).
    BodyTooLarge,
    /// Bad N, bad or too long delay_ms, unknown parameter (400), another method (405).
    BadTarget,
    /// accept() failed (EMFILE, ENFILE, ENOMEM...): the connection waits in the listen queue.
    AcceptFailed,
    /// Connections from outside the agent's --allow (`netrig serve --allow --http-port`): answered
    /// 403 and closed before a byte of theirs is read.
    OutsideAllow,
}

impl Refusal {
    pub const ALL: [Refusal; 12] = [
        Refusal::OverConnectionLimit,
        Refusal::HeaderTooLarge,
        Refusal::RequestLineTooLong,
        Refusal::TooManyHeaders,
        Refusal::HeaderTimeout,
        Refusal::Malformed,
        Refusal::Version,
        Refusal::Body,
        Refusal::BodyTooLarge,
        Refusal::BadTarget,
        Refusal::AcceptFailed,
        Refusal::OutsideAllow,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Refusal::OverConnectionLimit => "over_max_connections",
            Refusal::HeaderTooLarge => "header_too_large",
            Refusal::RequestLineTooLong => "request_line_too_long",
            Refusal::TooManyHeaders => "too_many_headers",
            Refusal::HeaderTimeout => "header_timeout",
            Refusal::Malformed => "malformed",
            Refusal::Version => "unsupported_version",
            Refusal::Body => "request_body",
            Refusal::BodyTooLarge => "body_too_large",
            Refusal::BadTarget => "bad_target",
            Refusal::AcceptFailed => "accept_failed",
            Refusal::OutsideAllow => "outside_allow",
        }
    }
}

/// One worker's counts. Aligned so two workers' counts never share a cache line.
#[repr(align(128))]
#[derive(Default, Debug)]
pub struct WorkerCounts {
    pub accepted: AtomicU64,
    pub closed: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_received: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub responses: [AtomicU64; STATUSES.len()],
    pub refusals: [AtomicU64; Refusal::ALL.len()],
    pub closes: [AtomicU64; Close::ALL.len()],
}

/// Adds `n` to a counter only one thread writes (a plain load and store, no read-modify-write).
#[inline]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

impl WorkerCounts {
    #[inline]
    pub(crate) fn response(&self, status: u16) {
        let i = STATUSES.iter().position(|&s| s == status).unwrap_or(8);
        bump(&self.responses[i], 1);
    }
    #[inline]
    pub(crate) fn refusal(&self, r: Refusal) {
        bump(&self.refusals[r as usize], 1);
    }
    #[inline]
    pub(crate) fn close(&self, c: Close) {
        bump(&self.closes[c as usize], 1);
        bump(&self.closed, 1);
    }
}

/// The counts of every worker, summed at one moment (each counter read once; counters of
/// different workers are read one after another, not at one instant).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Seconds since the server started.
    pub uptime_s: f64,
    pub workers: usize,
    /// Connections accepted and registered (not those refused over --max-connections).
    pub connections_accepted: u64,
    pub connections_closed: u64,
    /// accepted - closed.
    pub connections_open: u64,
    /// Request heads read whole and answered (refused heads that could be read are counted too).
    pub requests: u64,
    /// Answers queued for sending, by status ("200": n, ...), including refusals answered.
    pub responses: std::collections::BTreeMap<String, u64>,
    /// Bytes read from connections: request heads and anything after them, as HTTP (the
    /// plaintext under TLS), headers included.
    pub bytes_received: u64,
    /// Bytes written to connections: response heads and bodies, as HTTP (the plaintext under
    /// TLS), headers included.
    pub bytes_sent: u64,
    /// Refusals by cause (docs/HTTP.md).
    pub refusals: std::collections::BTreeMap<String, u64>,
    /// Closed connections by cause.
    pub closes: std::collections::BTreeMap<String, u64>,
    /// Whole-server stalls begun (Server::stall, --stall-for).
    pub stalls: u64,
}

impl Snapshot {
    pub(crate) fn sum(workers: &[std::sync::Arc<WorkerCounts>], uptime_s: f64, stalls: u64) -> Snapshot {
        let total = |f: &dyn Fn(&WorkerCounts) -> &AtomicU64| -> u64 {
            workers.iter().map(|w| f(w).load(Relaxed)).sum()
        };
        let accepted = total(&|w| &w.accepted);
        let closed = total(&|w| &w.closed);
        let responses = STATUSES
            .iter()
            .enumerate()
            .map(|(i, s)| (s.to_string(), total(&|w| &w.responses[i])))
            .filter(|(_, n)| *n > 0)
            .collect();
        let refusals = Refusal::ALL
            .iter()
            .map(|r| (r.name().to_string(), total(&|w| &w.refusals[*r as usize])))
            .collect();
        let closes = Close::ALL
            .iter()
            .map(|c| (c.name().to_string(), total(&|w| &w.closes[*c as usize])))
            .collect();
        Snapshot {
            uptime_s,
            workers: workers.len(),
            connections_accepted: accepted,
            connections_closed: closed,
            connections_open: accepted.saturating_sub(closed),
            requests: total(&|w| &w.requests),
            responses,
            bytes_received: total(&|w| &w.bytes_received),
            bytes_sent: total(&|w| &w.bytes_sent),
            refusals,
            closes,
            stalls,
        }
    }

    /// Responses of one status.
    pub fn status(&self, status: u16) -> u64 {
        self.responses.get(&status.to_string()).copied().unwrap_or(0)
    }

    /// Refusals of one cause.
    pub fn refused(&self, r: Refusal) -> u64 {
        self.refusals.get(r.name()).copied().unwrap_or(0)
    }

    /// Closes of one cause.
    pub fn closed_by(&self, c: Close) -> u64 {
        self.closes.get(c.name()).copied().unwrap_or(0)
    }
}
