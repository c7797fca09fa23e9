//! tcp-crr's own figures: why a transaction failed, counted by reason in
//! the hot path, and the names those counts go by on the wire and in the
//! result (`connect_errors`: `refused`, `timed_out`, ...), which the engine,
//! the wire and the result carry without knowing them.

use netrig_proto::report::counts::{Counts, KindCounts, FAILURES};
use netrig_report::TestResult;
use std::io;

/// The group tcp-crr's counts go by (`summary.connect_errors`,
/// `flows[].connect_errors`): the failures group readers outside the kind
/// know.
pub(super) const GROUP: &str = FAILURES;

/// The reasons a transaction fails, as the wire and the result name them,
/// in the order of [`Failure`].
pub(super) const REASONS: [&str; 5] = ["refused", "timed_out", "addr_not_available", "reset", "other"];

/// Why a transaction failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Refused,
    TimedOut,
    AddrNotAvailable,
    Reset,
    Other,
}

impl Failure {
    /// The reason an error stands for.
    pub fn of(e: &io::Error) -> Failure {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => Failure::Refused,
            Some(libc::ETIMEDOUT) => Failure::TimedOut,
            // Binding to `--bind ADDR:0` reports an exhausted port range as EADDRINUSE.
            Some(libc::EADDRNOTAVAIL | libc::EADDRINUSE) => Failure::AddrNotAvailable,
            Some(libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) => Failure::Reset,
            Some(_) => Failure::Other,
            None => match e.kind() {
                io::ErrorKind::TimedOut => Failure::TimedOut,
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => Failure::Reset,
                _ => Failure::Other,
            },
        }
    }
}

/// A requester flow's failed transactions, by reason (indexed by
/// [`Failure`]): a plain array in the hot path, named only when the worker
/// ends ([`Failures::counts`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Failures([u64; REASONS.len()]);

impl Failures {
    pub(super) fn count(&mut self, why: Failure) {
        self.0[why as usize] += 1;
    }

    /// As the engine carries them: the kind's one group, every reason named.
    pub(super) fn counts(&self) -> KindCounts {
        KindCounts::one(GROUP, Counts::of(REASONS.into_iter().zip(self.0)))
    }
}

/// Transactions whose connection failed, by reason, and what to look at.
pub(crate) fn warning(r: &TestResult) -> Option<String> {
    let e = r.summary.counts.group(GROUP)?;
    (e.total() > 0).then(|| {
        format!(
            "{} transaction(s) failed and are not counted as transactions: refused {}, timed out {}, \
             address not available {} (local ports exhausted: TIME_WAIT holds them; see \
             net.ipv4.ip_local_port_range, or --local-ports if given, and tcp_tw_reuse, which lets a \
             port connect() picks go again a second after its TIME_WAIT began (one --local-ports \
             binds, at once; both only with tcp_timestamps), or let the agent close first: \
             --close-first responder), reset {}, other {}",
            e.total(),
            e.get("refused"),
            e.get("timed_out"),
            e.get("addr_not_available"),
            e.get("reset"),
            e.get("other")
        )
    })
}
