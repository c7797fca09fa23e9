//! The witness: the kernel's own counts read at the same two instants as
//! netrig's window counts, so the report can set each figure beside an
//! independent one (`netrig_metrics::witness` says what each count is).
//!
//! Per flow, netrig's count and the kernel's per-socket count are read one
//! right after the other, so they differ by at most the system call in
//! progress; the host and interface counters are read once per mark.

use crate::{FlowCounters, FlowSocket};
use netrig_metrics::{InterfaceCounters, KernelCounters};
use netrig_proto::report::{measure, ConnectionWitness, Role, TcpWitness, WitnessReport};
use netrig_proto::spec::transport::{Transport, WITNESS_COUNTERS};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::Arc;

/// One flow as the witness sees it.
pub(crate) struct WitnessFlow {
    pub role: Role,
    pub counters: Arc<FlowCounters>,
    pub socket: Option<Arc<FlowSocket>>,
}

/// What the witness reads: the flows, and the interfaces they use.
pub(crate) struct Witness {
    flows: Vec<WitnessFlow>,
    interfaces: Vec<String>,
    /// Per flow: whether its socket is read (see [`SOCKETS_READ`]).
    read: Vec<bool>,
    /// Host counters it keeps beyond [`WITNESS_COUNTERS`]: the test's
    /// transport's own (the rest are in the test's counter deltas).
    transport_counters: &'static [&'static str],
}

/// The counts at one instant: the host's read just before and just after
/// the flows', so that over a window the outer readings span all of
/// netrig's (a bound that holds however long the reads took) and the inner
/// ones fall within it (what is beyond netrig's traffic there is no artefact
/// of the reading).
pub(crate) struct WitnessMark {
    at: std::time::Instant,
    host_before: Host,
    host_after: Host,
    /// Per flow: netrig's bytes, netrig's units, the kernel's per-socket
    /// payload read just before netrig's count, and how much it grew by a
    /// reading just after (the spread of the bracket).
    flows: Vec<FlowMark>,
}

/// One flow at a mark.
struct FlowMark {
    /// netrig's bytes and units.
    bytes: u64,
    units: u64,
    /// netrig's transactions and failed ones (connection per transaction).
    transactions: u64,
    failures: u64,
    /// TCP: the kernel's count and its uncertainty.
    kernel: Option<KernelRead>,
    /// TCP: bytes waiting in the socket: unsent (sender) or unread (receiver).
    queued: Option<u64>,
}

/// The kernel's per-socket count, and how much it moved while netrig's was read.
type KernelRead = (u64, u64);

/// Reads of the kernel's count around netrig's, keeping the tightest bracket.
const BRACKET_TRIES: usize = 3;

/// TCP flows whose sockets each mark reads (the first so many of each
/// role at an end: senders, receivers, requesters, responders): up to a
/// dozen system calls a flow, at both edges, which at 5,000 flows took a
/// fifth of a second of the window's first moments here (CPU inside the
/// window, not a shorter window: that was the per-flow interface lookup,
/// now one for all when the witness is made). Their sum witnesses netrig's counting
/// as well as all would. A stream flow beyond them still has its queue
/// read (one ioctl), for what crossed the interface.
pub const SOCKETS_READ: usize = 256;

/// The host's counters at one instant.
struct Host {
    kernel: Option<KernelCounters>,
    interfaces: Vec<InterfaceCounters>,
}

impl Witness {
    fn host(&self) -> Host {
        // Interfaces first: one small file each, then /proc/net's (slower).
        let interfaces = self
            .interfaces
            .iter()
            .filter_map(|n| netrig_metrics::read_interface(n))
            .collect();
        Host {
            interfaces,
            kernel: netrig_metrics::read_kernel_counters().ok(),
        }
    }

    /// The witness of `flows`, which run over `transport`.
    pub fn new(flows: Vec<WitnessFlow>, transport: Transport) -> Witness {
        // The interfaces of the flows' local addresses (one getifaddrs for all), at most 8.
        let mut interfaces = netrig_metrics::interfaces_of(flows.iter().filter_map(|f| {
            match f.socket.as_deref() {
                Some(FlowSocket::Tcp(t)) => t.local_addr().ok(),
                Some(FlowSocket::Udp(u)) => u.local_addr().ok(),
                None => None,
            }
            .map(|a| a.ip())
        }));
        interfaces.truncate(8);
        let mut of_role = [0usize; 4];
        let read = flows
            .iter()
            .map(|f| {
                let n = &mut of_role[match f.role {
                    Role::Sender => 0,
                    Role::Receiver => 1,
                    Role::Requester => 2,
                    Role::Responder => 3,
                }];
                *n += 1;
                *n <= SOCKETS_READ
            })
            .collect();
        Witness {
            flows,
            interfaces,
            read,
            transport_counters: transport.rules().witness_counters(),
        }
    }

    pub fn mark(&self) -> WitnessMark {
        let host_before = self.host();
        let flows = self
            .flows
            .iter()
            .zip(&self.read)
            .map(|(f, &read)| {
                let tcp = match f.socket.as_deref() {
                    Some(FlowSocket::Tcp(t)) => Some(t),
                    _ => None,
                };
                let (Some(t), true) = (tcp, read) else {
                    // A stream flow not read in full: its queue still, for
                    // what crossed the interface.
                    let queued = match (tcp, f.role) {
                        (Some(t), Role::Sender | Role::Receiver) => {
                            netrig_metrics::socket_queue(t.as_fd(), f.role == Role::Sender)
                        }
                        _ => None,
                    };
                    return FlowMark {
                        bytes: f.counters.bytes(),
                        units: f.counters.units(),
                        transactions: f.counters.transactions(),
                        failures: f.counters.failures(),
                        kernel: None,
                        queued,
                    };
                };
                // The kernel counts a call's bytes as they are copied, netrig
                // when the call returns: kernel before ≤ netrig + one call,
                // netrig ≤ kernel after. A reader preempted between the two
                // widens the bracket, so take the tightest of a few.
                // A stream flow's bytes go one way; a request/response
                // flow's count both (its requests and responses).
                let (sender, both) = match f.role {
                    Role::Sender => (true, false),
                    Role::Receiver => (false, false),
                    Role::Requester | Role::Responder => (false, true),
                };
                let payload = || {
                    let one = netrig_metrics::socket_payload(t.as_fd(), sender);
                    if !both {
                        return one;
                    }
                    let (s, r) = (netrig_metrics::socket_payload(t.as_fd(), true)?, one?);
                    Some((s.0 + r.0, s.1 + r.1))
                };
                let mut best: Option<(u64, Option<KernelRead>, Option<u64>)> = None;
                for _ in 0..BRACKET_TRIES {
                    let k0 = payload();
                    let n = f.counters.bytes();
                    let q = if both {
                        None
                    } else {
                        netrig_metrics::socket_queue(t.as_fd(), sender)
                    };
                    let k1 = payload();
                    // The bracket's width, plus how far the first reading
                    // itself may be off (see socket_payload).
                    let k = k0.zip(k1).map(|((a, ea), (b, _))| (a, b.saturating_sub(a) + ea));
                    let tighter = match (&best, k) {
                        (None, _) => true,
                        (Some((_, Some((_, old)), _)), Some((_, new))) => new < *old,
                        // A reading that failed (a queue read past the count
                        // it was set against) gives way to one that did not.
                        (Some((_, None, _)), Some(_)) => true,
                        _ => false,
                    };
                    if tighter {
                        best = Some((n, k, q));
                    }
                    if k.is_some_and(|(_, spread)| spread == 0) {
                        break;
                    }
                }
                let (bytes, kernel, queued) = best.unwrap_or((f.counters.bytes(), None, None));
                FlowMark {
                    bytes,
                    units: f.counters.units(),
                    transactions: f.counters.transactions(),
                    failures: f.counters.failures(),
                    kernel,
                    queued,
                }
            })
            .collect();
        WitnessMark {
            at: std::time::Instant::now(),
            host_before,
            host_after: self.host(),
            flows,
        }
    }

    /// netrig's counts and the kernel's between two marks.
    pub fn report(&self, first: &WitnessMark, last: &WitnessMark) -> WitnessReport {
        let mut r = WitnessReport {
            window_s: last.at.saturating_duration_since(first.at).as_secs_f64(),
            scope: netrig_metrics::counter_scope(),
            ..WitnessReport::default()
        };
        let mut tcp = TcpWitness::default();
        let mut connections: Option<ConnectionWitness> = None;
        for ((f, a), b) in self.flows.iter().zip(&first.flows).zip(&last.flows) {
            let bytes = b.bytes.saturating_sub(a.bytes);
            let units = b.units.saturating_sub(a.units);
            // A request/response flow without a socket of its own: a
            // connection per transaction (tcp-crr).
            if f.socket.is_none() && matches!(f.role, Role::Requester | Role::Responder) {
                let c = connections.get_or_insert(ConnectionWitness {
                    role: f.role,
                    transactions: 0,
                    failures: 0,
                });
                c.transactions += b.transactions.saturating_sub(a.transactions);
                c.failures += b.failures.saturating_sub(a.failures);
            }
            // What crossed the interface: written less the growth of the
            // unsent queue, or read plus the growth of the unread one.
            let queue_growth = match (a.queued, b.queued) {
                (Some(qa), Some(qb)) => i128::from(qb) - i128::from(qa),
                _ => 0,
            };
            let udp = matches!(f.socket.as_deref(), Some(FlowSocket::Udp(_)));
            match f.role {
                Role::Sender => {
                    r.payload_sent += bytes;
                    r.payload_out += clamp(i128::from(bytes) - queue_growth);
                    if udp {
                        r.udp_messages_sent += units;
                    }
                }
                Role::Receiver => {
                    r.payload_received += bytes;
                    r.payload_in += clamp(i128::from(bytes) + queue_growth);
                    if udp {
                        r.udp_buffers_received += units;
                    }
                }
                // udp-rr: requests (requester) or responses (responder)
                // sent; and at least a datagram received per transaction
                // (the response that completed it, the request answered).
                Role::Requester | Role::Responder if udp => {
                    r.udp_messages_sent += units;
                    r.udp_buffers_received += b.transactions.saturating_sub(a.transactions);
                }
                _ => {}
            }
            if let (Some((ka, sa)), Some((kb, sb))) = (a.kernel, b.kernel) {
                tcp.flows += 1;
                tcp.read_spread_bytes += sa + sb;
                let k = kb.saturating_sub(ka);
                match f.role {
                    Role::Sender => {
                        tcp.netrig_sent += bytes;
                        tcp.kernel_sent += k;
                    }
                    Role::Receiver => {
                        tcp.netrig_received += bytes;
                        tcp.kernel_received += k;
                    }
                    Role::Requester | Role::Responder => {
                        tcp.netrig_both_ways += bytes;
                        tcp.kernel_both_ways += k;
                    }
                }
            }
        }
        r.tcp = (tcp.flows > 0).then_some(tcp);
        r.connections = connections;
        let keys = self.transport_counters;
        (r.kernel, r.interfaces) = host_delta(&first.host_before, &last.host_after, keys);
        (r.kernel_inner, r.interfaces_inner) = host_delta(&first.host_after, &last.host_before, keys);
        r
    }
}

/// The witness's host counters between two readings: those of every test,
/// and `transport_counters`.
fn host_delta(
    a: &Host,
    b: &Host,
    transport_counters: &[&str],
) -> (BTreeMap<String, i64>, Vec<measure::InterfaceCounters>) {
    let kernel = match (&a.kernel, &b.kernel) {
        (Some(a), Some(b)) => {
            let d = b.delta_since(a);
            WITNESS_COUNTERS
                .iter()
                .chain(transport_counters)
                .filter_map(|k| Some((k.to_string(), d.get(k)?)))
                .collect()
        }
        _ => BTreeMap::new(),
    };
    let interfaces = b
        .interfaces
        .iter()
        .filter_map(|y| {
            let x = a.interfaces.iter().find(|x| x.name == y.name)?;
            Some(measure::InterfaceCounters::from(&y.since(x)))
        })
        .collect();
    (kernel, interfaces)
}

fn clamp(v: i128) -> u64 {
    v.clamp(0, i128::from(u64::MAX)) as u64
}
