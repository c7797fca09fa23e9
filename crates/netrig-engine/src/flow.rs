//! One flow: a data connection, what this end does with it, and the counters
//! it shares with the sampler.

use crate::sockopt::SocketSettings;
use netrig_metrics::SeqLive;
use netrig_proto::report::{AppliedOptions, BufPair, KindCounts, Role};
use netrig_proto::{DataHello, Direction, SessionCookie};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The window's state rides in the transaction counter's top bits, so that
/// a worker's increment and the sampler's open/close are ordered by one
/// atomic word: no transaction is counted in the window but missing from the
/// histogram, or the other way round. The interim period (its index mod 64,
/// bits 56-61) travels the same way, so a transaction's latency lands in the
/// interval whose count includes it (see [`crate::latencies`]). The count
/// itself has the low 56 bits.
const WINDOW_OPEN: u64 = 1 << 63;
const WINDOW_CLOSED: u64 = 1 << 62;
const EPOCH_SHIFT: u32 = 56;
const EPOCH: u64 = 0x3f << EPOCH_SHIFT;
const COUNT: u64 = (1 << EPOCH_SHIFT) - 1;

/// A transaction counted inside the measurement window, and the interim
/// period it was counted in (its index mod 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InWindow {
    pub epoch: u8,
}

/// Counters a worker writes and the sampler reads. Bytes have one writer, so
/// a relaxed store is enough; a sample is exact to within one system call.
/// Transactions are added atomically and carry the window's state and the
/// interim period. A
/// flow whose connections come and go ([`FlowSlot`]) may be served by several
/// workers at once: they only ever add (`add_*`), never set.
#[derive(Debug, Default)]
pub struct FlowCounters {
    bytes: AtomicU64,
    transactions: AtomicU64,
    /// Transactions that failed inside the window (tcp-crr).
    failures: AtomicU64,
    /// The kernel's units of the flow's data, for the witness: UDP messages
    /// sent (a GSO send of many datagrams is one, as `Udp.OutDatagrams`
    /// counts it) or buffers received (a GRO batch is one, as
    /// `Udp.InDatagrams` counts it); udp-rr: datagrams sent (requests or
    /// responses). Unused by TCP.
    units: AtomicU64,
    udp: UdpLive,
}

/// A UDP stream receiver's running counts ([`SeqLive`]), published by its
/// worker after each batch for interim reports. Each is stored on its own,
/// so a sample may mix counts a batch apart: exact over the test, within a
/// batch per interval.
#[derive(Debug, Default)]
struct UdpLive {
    received: AtomicU64,
    expected: AtomicU64,
    out_of_order: AtomicU64,
    duplicates: AtomicU64,
    jitter_ns_bits: AtomicU64,
    d_sum_ns_bits: AtomicU64,
    d_count: AtomicU64,
    untimed: AtomicU64,
    far: AtomicU64,
}

impl FlowCounters {
    /// Payload bytes this end has sent or received on the flow so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Called by the flow's worker only.
    #[inline]
    pub fn set_bytes(&self, v: u64) {
        self.bytes.store(v, Ordering::Relaxed)
    }

    /// Adds to the byte count (workers sharing a flow).
    #[inline]
    pub fn add_bytes(&self, v: u64) {
        self.bytes.fetch_add(v, Ordering::Relaxed);
    }

    /// Counts `n` completed transactions and says whether they fall inside
    /// the measurement window: exactly those the window's count includes,
    /// so a latency histogram recorded on `true` agrees with the count to
    /// the transaction, however the sampler thread is scheduled.
    #[inline]
    #[must_use = "record latency only for transactions inside the window"]
    pub fn add_transactions(&self, n: u64) -> bool {
        self.count_transactions(n).is_some()
    }

    /// [`add_transactions`](Self::add_transactions), also telling the
    /// interim period the transactions were counted in.
    #[inline]
    pub fn count_transactions(&self, n: u64) -> Option<InWindow> {
        let before = self.transactions.fetch_add(n, Ordering::Relaxed);
        (before & (WINDOW_OPEN | WINDOW_CLOSED) == WINDOW_OPEN).then_some(InWindow {
            epoch: ((before & EPOCH) >> EPOCH_SHIFT) as u8,
        })
    }

    /// Starts interim period `next` (the sampler, at each tick); returns
    /// the count at that instant, the boundary between the periods.
    pub fn switch_interval(&self, next: u32) -> u64 {
        let epoch = u64::from(next & 0x3f) << EPOCH_SHIFT;
        let before = self
            .transactions
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some((v & !EPOCH) | epoch)
            })
            .unwrap_or_else(|v| v);
        before & COUNT
    }

    /// Transactions this end has completed on the flow so far.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed) & COUNT
    }

    /// A transaction failed inside the window (workers sharing a flow add).
    #[inline]
    pub fn add_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Transactions that failed inside the window so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Called by the flow's worker only: the receiver's counts so far.
    #[inline]
    pub fn publish_udp(&self, live: &SeqLive) {
        let u = &self.udp;
        u.received.store(live.received, Ordering::Relaxed);
        u.expected.store(live.expected, Ordering::Relaxed);
        u.out_of_order.store(live.out_of_order, Ordering::Relaxed);
        u.duplicates.store(live.duplicates, Ordering::Relaxed);
        u.jitter_ns_bits
            .store(live.jitter_ns.to_bits(), Ordering::Relaxed);
        u.d_sum_ns_bits.store(live.d_sum_ns.to_bits(), Ordering::Relaxed);
        u.d_count.store(live.d_count, Ordering::Relaxed);
        u.untimed.store(live.untimed, Ordering::Relaxed);
        u.far.store(live.far, Ordering::Relaxed);
    }

    /// Called by the flow's worker only: kernel units so far (see `units`).
    #[inline]
    pub fn set_units(&self, v: u64) {
        self.units.store(v, Ordering::Relaxed)
    }

    /// UDP messages sent or buffers received so far.
    pub fn units(&self) -> u64 {
        self.units.load(Ordering::Relaxed)
    }

    /// The receiver's counts as last published.
    pub fn udp(&self) -> SeqLive {
        let u = &self.udp;
        SeqLive {
            received: u.received.load(Ordering::Relaxed),
            expected: u.expected.load(Ordering::Relaxed),
            out_of_order: u.out_of_order.load(Ordering::Relaxed),
            duplicates: u.duplicates.load(Ordering::Relaxed),
            jitter_ns: f64::from_bits(u.jitter_ns_bits.load(Ordering::Relaxed)),
            d_sum_ns: f64::from_bits(u.d_sum_ns_bits.load(Ordering::Relaxed)),
            d_count: u.d_count.load(Ordering::Relaxed),
            untimed: u.untimed.load(Ordering::Relaxed),
            far: u.far.load(Ordering::Relaxed),
        }
    }

    /// Opens the measurement window; returns the count at that instant.
    pub fn open_window(&self) -> u64 {
        self.transactions.fetch_or(WINDOW_OPEN, Ordering::Relaxed) & COUNT
    }

    /// Closes the measurement window; returns the count at that instant.
    pub fn close_window(&self) -> u64 {
        self.transactions.fetch_or(WINDOW_CLOSED, Ordering::Relaxed) & COUNT
    }
}

/// A flow's socket: a TCP connection, or a connected UDP socket.
#[derive(Debug)]
pub enum FlowSocket {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl FlowSocket {
    /// The TCP connection, or an error naming the flow for a workload that needs one.
    pub fn tcp(&self) -> std::io::Result<&TcpStream> {
        match self {
            FlowSocket::Tcp(t) => Ok(t),
            FlowSocket::Udp(_) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a TCP workload was given a UDP socket",
            )),
        }
    }

    /// The UDP socket, or an error for a workload that needs one.
    pub fn udp(&self) -> std::io::Result<&UdpSocket> {
        match self {
            FlowSocket::Udp(u) => Ok(u),
            FlowSocket::Tcp(_) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a UDP workload was given a TCP socket",
            )),
        }
    }
}

impl AsFd for FlowSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            FlowSocket::Tcp(t) => t.as_fd(),
            FlowSocket::Udp(u) => u.as_fd(),
        }
    }
}

impl From<TcpStream> for FlowSocket {
    fn from(t: TcpStream) -> Self {
        FlowSocket::Tcp(t)
    }
}

impl From<UdpSocket> for FlowSocket {
    fn from(u: UdpSocket) -> Self {
        FlowSocket::Udp(u)
    }
}

/// The option code reads a flow's socket back as it does a TCP or UDP one.
impl crate::sockopt::Connected for FlowSocket {
    fn local(&self) -> std::io::Result<SocketAddr> {
        match self {
            FlowSocket::Tcp(t) => t.local_addr(),
            FlowSocket::Udp(u) => u.local_addr(),
        }
    }
    fn peer(&self) -> std::io::Result<SocketAddr> {
        match self {
            FlowSocket::Tcp(t) => t.peer_addr(),
            FlowSocket::Udp(u) => u.peer_addr(),
        }
    }
}

impl FlowSocket {
    pub fn set_nonblocking(&self, on: bool) -> std::io::Result<()> {
        match self {
            FlowSocket::Tcp(t) => t.set_nonblocking(on),
            FlowSocket::Udp(u) => u.set_nonblocking(on),
        }
    }
}

/// A worker's handle on a flow's socket: the flow's own descriptor, shared
/// (no dup), so a flow costs one descriptor per end however many parts of
/// the engine look at it. Reads and writes go to the TCP stream; it
/// registers with mio by its descriptor.
#[derive(Debug, Clone)]
pub struct SocketHandle(Arc<FlowSocket>);

impl SocketHandle {
    /// Makes the socket non-blocking and returns a handle on it.
    pub fn new(socket: &Arc<FlowSocket>) -> std::io::Result<SocketHandle> {
        socket.set_nonblocking(true)?;
        Ok(SocketHandle(socket.clone()))
    }

    pub fn socket(&self) -> &FlowSocket {
        &self.0
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.0.as_fd().as_raw_fd()
    }
}

impl std::io::Read for SocketHandle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.tcp()?.read(buf)
    }
}

impl crate::inq::ReadInq for SocketHandle {
    fn read_inq(&mut self, buf: &mut [u8]) -> std::io::Result<(usize, bool)> {
        self.0.tcp()?;
        crate::inq::recv(self.raw_fd(), buf)
    }
}

impl std::io::Write for SocketHandle {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.tcp()?.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl mio::event::Source for SocketHandle {
    fn register(&mut self, r: &mio::Registry, t: mio::Token, i: mio::Interest) -> std::io::Result<()> {
        mio::unix::SourceFd(&self.raw_fd()).register(r, t, i)
    }

    fn reregister(&mut self, r: &mio::Registry, t: mio::Token, i: mio::Interest) -> std::io::Result<()> {
        mio::unix::SourceFd(&self.raw_fd()).reregister(r, t, i)
    }

    fn deregister(&mut self, r: &mio::Registry) -> std::io::Result<()> {
        mio::unix::SourceFd(&self.raw_fd()).deregister(r)
    }
}

/// A connected data socket handed to the engine.
#[derive(Debug)]
pub struct Flow {
    pub id: u32,
    pub direction: Direction,
    pub role: Role,
    /// Shared between the flow's worker and the sampler (for TCP_INFO).
    pub socket: Arc<FlowSocket>,
    /// Bytes to send before closing, in byte-count mode (senders only).
    pub quota: Option<u64>,
    pub counters: Arc<FlowCounters>,
}

impl Flow {
    pub fn new(
        id: u32,
        direction: Direction,
        role: Role,
        socket: impl Into<FlowSocket>,
        quota: Option<u64>,
    ) -> Self {
        Flow {
            id,
            direction,
            role,
            socket: Arc::new(socket.into()),
            quota,
            counters: Arc::new(FlowCounters::default()),
        }
    }
}

/// A flow whose connections come and go, one per transaction (tcp-crr). It
/// exists, with its counters, for the whole run, but has no socket of its
/// own: the requester's slots say where to connect; the responder's
/// connections arrive through the run's intake (see [`crate::intake`]).
#[derive(Debug, Clone)]
pub struct FlowSlot {
    pub id: u32,
    pub direction: Direction,
    pub role: Role,
    pub counters: Arc<FlowCounters>,
    /// Where this end opens the flow's connections; `None` where the peer opens them.
    pub connect: Option<Arc<Connector>>,
}

impl FlowSlot {
    pub fn new(id: u32, direction: Direction, role: Role, connect: Option<Arc<Connector>>) -> Self {
        FlowSlot {
            id,
            direction,
            role,
            counters: Arc::new(FlowCounters::default()),
            connect,
        }
    }
}

/// How a requester opens each of its connections to the agent: from where,
/// to where, with which options, and the greeting that names the session and
/// the flow.
#[derive(Debug, Clone)]
pub struct Connector {
    pub addr: SocketAddr,
    /// Local address (`--bind`), port chosen by the kernel.
    pub bind: Option<IpAddr>,
    /// This end's socket options: buffers and MSS before connect, the rest after.
    pub options: SocketSettings,
    pub version: u16,
    pub cookie: SessionCookie,
}

impl Connector {
    /// The DataHello that opens each connection of `flow`.
    pub fn hello(&self, flow: u32) -> [u8; DataHello::LEN] {
        DataHello {
            version: self.version,
            cookie: self.cookie,
            flow,
        }
        .encode()
    }
}

/// Socket buffers and options of the first connection a worker set up for
/// a connection-per-transaction flow (every later one starts afresh alike).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirstConnection {
    /// Buffers once connected, before data moved.
    pub initial: BufPair,
    pub applied: AppliedOptions,
    /// Buffers when its transaction was done.
    pub done: BufPair,
}

/// What a worker saw of a connection-per-transaction flow.
#[derive(Debug, Clone, Default)]
pub struct TransientEnd {
    pub id: u32,
    pub first: Option<FirstConnection>,
}

/// A UDP flow's datagram accounting as a worker ends it (the engine's own
/// type; [`crate::runner::FlowOutcome::report`] makes the wire's
/// `UdpFlowReport` of it, adding the window's counts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpAccount {
    /// Datagrams this end sent, as they went on the wire.
    pub sent_datagrams: u64,
    /// What this end received, by sequence number (receivers only).
    pub received: Option<netrig_metrics::SeqSummary>,
    /// Datagrams of no flow of this test that reached the flow's socket.
    pub stray: u64,
    /// udp-rr requester: responses that came after their request had timed out.
    pub late: u64,
    /// udp-stream: messages sent or buffers received (a GSO send or GRO batch counts once).
    pub units: u64,
}

/// What a worker knows about a flow when it is done with it.
#[derive(Debug, Clone)]
pub struct FlowEnd {
    pub id: u32,
    /// Payload bytes over the whole connection.
    pub total_bytes: u64,
    /// When the sender wrote its last byte, or the receiver saw end of file.
    pub done_at: Option<Instant>,
    /// Socket buffers when this end stopped measuring the flow.
    pub final_buffers: BufPair,
    /// UDP flows: datagram accounting, as netrig-metrics measured it.
    pub udp: Option<UdpAccount>,
    /// TCP stream senders with `--msg-zerocopy`: the kernel's completion notices.
    pub zerocopy: Option<netrig_proto::report::ZeroCopyReport>,
    /// TCP stream receivers: their reads.
    pub reads: Option<netrig_proto::report::ReadReport>,
    /// TCP stream senders: their sends.
    pub sends: Option<netrig_proto::report::SendReport>,
}

/// What a worker hands back besides its flows.
#[derive(Debug, Default)]
pub struct WorkerEnd {
    pub flows: Vec<FlowEnd>,
    /// Latency of the transactions it completed while recording was on.
    pub latency: Option<netrig_metrics::LatencyRecorder>,
    /// Of the timed datagrams its receivers took in while recording was
    /// on: receive time less [`WorkerControl::clock_ref`](crate::workload::WorkerControl::clock_ref)
    /// less send stamp, in ns (see `netrig_proto::clock`).
    pub one_way: Option<netrig_metrics::LatencyRecorder>,
    /// Open loop: how it kept to its schedule while recording was on.
    pub schedule: Option<ScheduleStats>,
    /// Connection-per-transaction flows it served (instead of `flows`).
    pub transient: Vec<TransientEnd>,
    /// The kind's own counts of its flows while recording was on, by flow
    /// id (tcp-crr's requesters: their failed transactions by reason):
    /// carried to the report as the kind names them, summed over workers.
    pub counts: Vec<(u32, KindCounts)>,
}

/// Schedule keeping of an open-loop worker.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScheduleStats {
    pub due: u64,
    pub late: u64,
    pub behind_sum_ns: u128,
    pub behind_max_ns: u64,
}

impl ScheduleStats {
    pub fn merge(&mut self, o: &ScheduleStats) {
        self.due += o.due;
        self.late += o.late;
        self.behind_sum_ns += o.behind_sum_ns;
        self.behind_max_ns = self.behind_max_ns.max(o.behind_max_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn window_count_and_in_window_answers_agree_under_a_race() {
        let c = Arc::new(FlowCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let adder = {
            let (c, stop) = (c.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut added, mut inside) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    added += 1;
                    if c.add_transactions(1) {
                        inside += 1;
                    }
                }
                (added, inside)
            })
        };
        // Open and close while the other thread is counting.
        while c.transactions() < 100_000 {
            std::hint::spin_loop();
        }
        let from = c.open_window();
        while c.transactions() < from + 300_000 {
            std::hint::spin_loop();
        }
        let to = c.close_window();
        while c.transactions() < to + 100_000 {
            std::hint::spin_loop();
        }
        stop.store(true, Ordering::Relaxed);
        let (added, inside) = adder.join().unwrap();
        assert!(to > from);
        assert_eq!(inside, to - from, "window [{from}, {to})");
        assert_eq!(c.transactions(), added, "the flags never leak into the count");
    }

    #[test]
    fn the_period_travels_with_each_count() {
        let c = FlowCounters::default();
        assert_eq!(c.count_transactions(1), None, "before the window");
        assert_eq!(c.open_window(), 1);
        assert_eq!(c.count_transactions(2), Some(InWindow { epoch: 0 }));
        assert_eq!(c.switch_interval(1), 3, "the boundary count");
        assert_eq!(c.count_transactions(1), Some(InWindow { epoch: 1 }));
        assert_eq!(c.switch_interval(65), 4);
        assert_eq!(c.count_transactions(1), Some(InWindow { epoch: 1 }), "mod 64");
        assert_eq!(c.close_window(), 5);
        assert_eq!(c.count_transactions(1), None, "after the window");
        assert_eq!(c.transactions(), 6, "no flag leaks into the count");
    }
}
