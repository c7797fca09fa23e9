//! tcp-crr's workload: its parameters, as both ends run it, and what they
//! decide of each new connection (binding, the close order).

use super::ports::PortCycle;
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::txn::Answerer;
use netrig_engine::EngineError;
use netrig_engine::TxnParams;
use netrig_proto::spec::CloseFirst;
use socket2::Socket;
use std::io::{self};
use std::sync::Arc;
use std::time::Duration;

/// Closed loop: how long a flow whose transaction failed at once (refused,
/// no local port left) waits before the next. Without it a lasting failure
/// spins the worker and the failure count measures the CPU, not the path.
pub const FAILED_RETRY: Duration = Duration::from_millis(1);

/// The connection-per-transaction workload's parameters.
#[derive(Debug, Clone)]
pub struct CrrWorkload {
    /// Sizes, schedule, and `burst`: connections in flight per flow.
    pub txn: TxnParams,
    /// Longest a transaction may take: from connect to the last response
    /// byte (requester), from arrival to the requester's close (responder).
    pub timeout: Duration,
    /// Options on the connections this end accepts (the agent's `-S` and shared options).
    pub accepted_options: SocketSettings,
    /// Which end closes each connection first (and so holds its TIME_WAIT).
    pub close_first: CloseFirst,
    /// `--local-ports`: the requester's local ports, one after another;
    /// `None`: the kernel picks each at connect().
    pub local_ports: Option<Arc<PortCycle>>,
}

impl CrrWorkload {
    /// Whether its connections carry no data (tcp-cc, netperf's TCP_CC:
    /// the greeting alone): no request, no response; the responder, which
    /// closes first, answers nothing but that close, and the requester's
    /// transaction ends when it sees it.
    pub fn no_data(&self) -> bool {
        self.txn.request_size == 0 && self.txn.response_size == 0
    }

    /// Requests a connection carries: one, or none without data.
    pub(super) fn requests(&self) -> u64 {
        u64::from(!self.no_data())
    }

    /// Whether a responder closes its connection now: it closes first and
    /// has answered all the connection carries (without data, nothing).
    pub(super) fn closes_now(&self, answer: &Answerer) -> bool {
        self.close_first == CloseFirst::Responder && answer.finished()
    }

    /// Readies a requester's new socket to end with a reset, if asked
    /// (`--close-first requester-reset`): SO_LINGER 0 now, so that its
    /// close(2) aborts the connection.
    pub(super) fn reset_on_close(&self, sock: &Socket) -> Result<(), EngineError> {
        if self.close_first == CloseFirst::RequesterReset {
            sock.set_linger(Some(Duration::ZERO)).map_err(|e| {
                EngineError::Setup(format!("local socket: SO_LINGER 0 for requester-reset: {e}"))
            })?;
        }
        Ok(())
    }

    /// Whether a responder's error is only the requester's reset after the
    /// whole response, the end `--close-first requester-reset` asks for.
    pub(super) fn reset_is_the_end(&self, answer: &Answerer, e: &io::Error) -> bool {
        self.close_first == CloseFirst::RequesterReset
            && answer.finished()
            && e.raw_os_error() == Some(libc::ECONNRESET)
    }

    /// Binds a requester's new socket as `--bind` and `--local-ports` ask,
    /// if they do.
    pub(super) fn bind_local(&self, sock: &Socket, to: &netrig_engine::flow::Connector) -> io::Result<()> {
        match (&self.local_ports, to.bind) {
            (Some(ports), ip) => ports.bind(sock, ip, to.addr),
            (None, Some(ip)) => sock.bind(&netrig_engine::addr::local_for(ip, to.addr).into()),
            (None, None) => Ok(()),
        }
    }
}
