//! UDP stream: datagrams of `size` bytes, paced to `rate_bps` or as fast as
//! the socket takes them, sent and received in batches (sendmmsg/recvmmsg).
//!
//! Every datagram starts with a 28-byte header: the test id (8 bytes of
//! the session cookie), the flow id, a sequence number and the sender's
//! timestamp. Receivers account for loss, reordering and duplicates by
//! sequence number, and jitter (RFC 3550) from the kernel's receive
//! timestamps; datagrams of other tests or flows are counted as stray and
//! otherwise ignored. The data hello (`NRGD…`) a client repeats during
//! set-up is ignored silently.
//!
//! Batching shares timestamps: the datagrams of one UDP GSO send carry one
//! send timestamp (the sender sets [`SHARED_STAMP`] in it), and those of one
//! GRO-coalesced buffer one receive timestamp. Such datagrams are counted
//! everywhere but in jitter, which would otherwise read near zero by
//! construction (see `netrig_metrics::udp_seq`). Without GSO an unpaced
//! sender hands the kernel up to BATCH separate datagrams per sendmmsg
//! call; all but the first are marked [`SAMPLED_STAMP`](netrig_proto::datagram::SAMPLED_STAMP), and jitter is
//! taken between the calls' first datagrams.

use super::datagram::{self, now_realtime_ns, Incoming, Reader};
use mio::{Interest, Token};
use netrig_engine::cap::SendCap;
use netrig_engine::flow::SocketHandle;
use netrig_engine::flow::UdpAccount;
use netrig_engine::pace::Schedule;
use netrig_engine::reactor::{Handler, Io, Now, Reactor, Ready, IDLE};
use netrig_engine::sockopt;
use netrig_engine::workload::{WorkerControl, Workload};
use netrig_engine::{EngineError, Flow, FlowEnd, WorkerEnd};
use netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS;
use netrig_metrics::{Arrival, OneWayRecorder, SeqTracker};
use netrig_proto::datagram::{SHARED_STAMP, STAMP_MARKS};
use netrig_proto::report::Role;
use netrig_proto::spec::DatagramFormat;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Messages per sendmmsg/recvmmsg call (the agent bounds memory by it).
const BATCH: usize = netrig_proto::spec::UDP_BATCH as usize;
/// From linux/udp.h: segmentation offload on send, coalescing on receive.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Most segments the kernel takes in one GSO send (UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest buffer one GSO send or GRO receive may carry.
const GSO_MAX_BYTES: usize = 65_000;
/// After the window closes a receiver keeps counting (outside the window)
/// until the flow has been silent this long, so datagrams in flight are not
/// taken for lost...
const DRAIN_QUIET: Duration = Duration::from_millis(300);
/// ...but no longer than this.
const DRAIN_MAX: Duration = Duration::from_secs(3);
/// A worker that only receives, and takes datagrams fast (see
/// [`RX_BUSY_RATE`]), sleeps this long between reads, its sockets out of the
/// poll, so that datagrams gather in the socket while it is not waiting: the
/// sender's kernel then queues them without waking it or calling the poll's
/// callback, one wake-up per datagram being most of what a small datagram
/// costs the sending CPU on loopback (#12). Counts and the kernel's receive
/// timestamps are unaffected; the socket holds the datagrams of the pause
/// (at 1 Mpps, some 20 to 70 of them, with the kernel's timer slack).
/// Measured side by side (64-byte datagrams without GSO, loopback, 2 CPUs):
/// 20 µs +28 % datagrams/s over no pause, 50 µs the same, 100 µs overflowed
/// the default receive buffer.
const RX_COALESCE: Duration = Duration::from_micros(20);
/// Only while messages come in at this rate (per second) or more, so that a
/// pause gathers several: a slower flow's receiver is woken per datagram
/// anyway, and a pause would add a second wake-up (at 44,700 datagrams/s
/// it cost a third more CPU).
const RX_BUSY_RATE: f64 = 200_000.0;
/// A pausing receiver whose pauses bring nothing goes back to waiting in
/// the poll once nothing has come for this long: a sender descheduled for a
/// moment does not send it back and forth (a client and its agent in one
/// process on 2 CPUs, about 250k datagrams/s: 1,459 times in a second
/// without the grace, 380-450 with it).
const RX_PAUSE_GRACE: Duration = Duration::from_micros(500);
/// Send calls one flow makes in one turn of its worker's loop before the
/// worker's other flows have theirs: without a bound, an unpaced flow (or a
/// paced one behind its schedule) on loopback, whose socket never fills,
/// sent until the window closed and the worker's other flows sent nothing
/// (`-P 4` on two workers: two flows of four at 0 bytes).
const SEND_TURN_CALLS: usize = 8;

/// The UDP stream workload's parameters.
#[derive(Debug, Clone)]
pub struct UdpStreamWorkload {
    pub size: usize,
    pub rate_bps: Option<u64>,
    /// Use UDP GSO (send) and GRO (receive) where the kernel has them.
    pub offload: bool,
    /// Paced senders wake at most this often and send what falls due
    /// within it (see [`Pace`](netrig_proto::spec::Pace)).
    pub pacing: Duration,
    /// The header each datagram starts with (see [`datagram`]): in
    /// iperf3's, the sender neither segments (GSO) nor batches.
    pub datagram: DatagramFormat,
}

struct UFlow {
    flow: Flow,
    sock: SocketHandle,
    fd: RawFd,
    /// In the worker's poll. Receivers are while they wait for datagrams
    /// (see [`Worker::coalesce`]); a sender only while its socket is full:
    /// a socket in a poll has the poll's callback on its wait queue, which
    /// the kernel calls for every datagram it frees (the sender's) or queues
    /// (the receiver's): on loopback, 3.7 % and 3.4 % of the sending CPU at
    /// 64 bytes (perf), where a sender with room needs no readiness at all.
    watched: bool,
    /// The socket refused a send (EAGAIN): the sender waits to be told it
    /// is writable again.
    full: bool,
    done: bool,
    bytes: u64,
    /// Messages sent (a GSO send counts once) or buffers received (a GRO
    /// batch counts once): the kernel's UDP counters' unit.
    units: u64,
    // Sender.
    seq: u64,
    /// Paced (`-b`): when each datagram is due.
    pace: Option<Schedule>,
    /// Paced, and fell BATCH or more datagrams behind since it last caught
    /// up: sends in sendmmsg batches until it catches up.
    behind: bool,
    /// Datagrams per message: more than one when the kernel segments for us (UDP GSO).
    gso_segments: usize,
    // Receiver.
    reader: Reader,
    tracker: SeqTracker,
    stray: u64,
    last_rx: Instant,
    /// This end's clock (realtime ns) at its time zero.
    zero_ns: u64,
}

impl UFlow {
    /// `datagrams` of `size` bytes left in `messages` system-call messages:
    /// counted, and published to the sampler.
    #[inline]
    fn count_sent(&mut self, datagrams: usize, messages: usize, size: usize) {
        self.seq += datagrams as u64;
        self.bytes += (datagrams * size) as u64;
        self.units += messages as u64;
        self.flow.counters.set_bytes(self.bytes);
        self.flow.counters.set_units(self.units);
    }
}

impl UdpStreamWorkload {
    fn send_error(&self, f: &UFlow, e: io::Error) -> EngineError {
        let what = if e.raw_os_error() == Some(libc::EMSGSIZE) {
            let v6 = f
                .sock
                .socket()
                .udp()
                .and_then(|u| u.peer_addr())
                .map(|a| a.is_ipv6())
                .unwrap_or(false);
            match f.sock.socket().udp().ok().and_then(|u| sockopt::path_mtu(u, v6)) {
                Some(mtu) => format!(
                    "-m {}: the datagram is larger than the path allows (path MTU {mtu}, so at most {} bytes of \
                     UDP payload); use a smaller -m",
                    self.size,
                    mtu.saturating_sub(sockopt::udp_overhead(v6))
                ),
                None => format!("-m {}: the datagram is larger than the path allows; use a smaller -m", self.size),
            }
        } else if e.raw_os_error() == Some(libc::ECONNREFUSED) {
            "the peer's UDP port refused a datagram (ICMP port unreachable)".to_string()
        } else {
            "send datagrams".to_string()
        };
        EngineError::Flow {
            flow: f.flow.id,
            direction: f.flow.direction.name(),
            what,
            error: e,
        }
    }

    /// Sends up to `n` datagrams in one sendmmsg call of up to BATCH
    /// messages, all stamped with the call's time. With UDP GSO each message
    /// holds `gso_segments` datagrams (the kernel splits it into datagrams of
    /// `size` bytes; every datagram carries its own header), and all of them
    /// are marked [`SHARED_STAMP`] when the call carries more than one.
    /// Without it each message is one datagram on its own: the first left at
    /// the call's time, the others are marked [`SAMPLED_STAMP`](netrig_proto::datagram::SAMPLED_STAMP) (jitter is
    /// taken between the first datagrams of successive calls). Unless
    /// `batch`, it sends them one datagram per system call instead, each
    /// stamped just before its own call, so that every datagram's send time
    /// is its own, as iperf3's are: a paced flow does so while it keeps to
    /// its schedule, since pacing is where jitter is what is asked, and
    /// batches only from when a call per datagram has left it BATCH or more
    /// behind until it catches up. Returns how many datagrams left, as on
    /// the wire.
    fn send_batch(
        &self,
        f: &mut UFlow,
        buf: &mut [u8],
        n: usize,
        batch: bool,
        test_id: u64,
        t0: Instant,
    ) -> io::Result<usize> {
        let per = f.gso_segments.max(1);
        if per == 1 && !(batch && datagram::batches(self.datagram)) {
            return self.send_each(f, buf, n.min(BATCH), test_id, t0);
        }
        let n = n.min(BATCH * per);
        let ts = t0.elapsed().as_nanos() as u64 & !STAMP_MARKS;
        let (first, rest) = match (n > 1, per > 1) {
            (false, _) => (ts, ts),
            (true, true) => (ts | SHARED_STAMP, ts | SHARED_STAMP),
            (true, false) => (ts, ts | STAMP_MARKS),
        };
        let msgs_n = n.div_ceil(per);
        for i in 0..n {
            let d = &mut buf[i * self.size..(i + 1) * self.size];
            datagram::write_netrig(
                d,
                test_id,
                f.flow.id,
                f.seq + i as u64,
                if i == 0 { first } else { rest },
            );
        }
        // SAFETY: all-zero is a valid iovec and mmsghdr.
        let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let mut segs = [0usize; BATCH];
        for m in 0..msgs_n {
            let first = m * per;
            let count = per.min(n - first);
            segs[m] = count;
            iovs[m] = libc::iovec {
                iov_base: buf[first * self.size..].as_mut_ptr().cast(),
                iov_len: count * self.size,
            };
            msgs[m].msg_hdr.msg_iov = &mut iovs[m];
            msgs[m].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs[..msgs_n] point into `buf`, which outlives the call.
        let rc = unsafe { libc::sendmmsg(f.fd, msgs.as_mut_ptr(), msgs_n as libc::c_uint, 0) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let sent: usize = segs[..rc as usize].iter().sum();
        f.count_sent(sent, rc as usize, self.size);
        Ok(sent)
    }

    /// One datagram per send(2), each with the time of its own call: up to
    /// `n`, stopping at the first error (returned only if nothing was sent).
    fn send_each(
        &self,
        f: &mut UFlow,
        buf: &mut [u8],
        n: usize,
        test_id: u64,
        t0: Instant,
    ) -> io::Result<usize> {
        let d = &mut buf[..self.size];
        let mut sent = 0;
        while sent < n {
            datagram::write_own(self.datagram, d, test_id, f.flow.id, f.seq, t0);
            // SAFETY: `d` is valid for its length during the call.
            let rc = unsafe { libc::send(f.fd, d.as_ptr().cast(), d.len(), 0) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if sent == 0 {
                    return Err(e);
                }
                break;
            }
            sent += 1;
            f.count_sent(1, 1, self.size);
        }
        Ok(sent)
    }

    /// Sends what is due (paced) or until the socket is full (unpaced), in
    /// at most [`SEND_TURN_CALLS`] system calls, so that the other flows of
    /// the worker get their turn (on loopback a UDP socket never fills).
    /// Returns when to call again: the next datagram's due time (paced), now
    /// (the turn's calls spent), or after a back-off (ENOBUFS); `None`: when
    /// the socket turns writable.
    fn on_send(
        &self,
        f: &mut UFlow,
        buf: &mut [u8],
        ctl: &WorkerControl,
        test_id: u64,
        send_cap: &SendCap,
    ) -> Result<Option<Instant>, EngineError> {
        for _ in 0..SEND_TURN_CALLS {
            if ctl.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let most = BATCH * f.gso_segments.max(1);
            let (want, batch) = match &f.pace {
                None => (most, true),
                Some(p) => {
                    let now = Instant::now();
                    match p.allowed(now, f.seq) {
                        0 => {
                            f.behind = false;
                            return Ok(Some(p.due_at(f.seq)));
                        }
                        n => {
                            f.behind |= p.overdue(now, f.seq) >= BATCH as u64;
                            (n.min(most as u64) as usize, f.behind)
                        }
                    }
                }
            };
            match self.send_batch(f, buf, want, batch, test_id, ctl.start) {
                // Held to the agent's cap: after a wait, back to the event loop.
                Ok(sent) if send_cap.spend(sent * self.size) => return Ok(Some(Instant::now())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    f.full = true;
                    return Ok(None);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The path cannot take segmentation offload after all: send one datagram per message.
                Err(e)
                    if f.gso_segments > 1
                        && matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL)) =>
                {
                    set_int(f.fd, libc::SOL_UDP, UDP_SEGMENT, 0);
                    f.gso_segments = 1;
                }
                // ENOBUFS: the device queue is full; back off like a full socket.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(Some(Instant::now() + Duration::from_micros(50)))
                }
                Err(e) => return Err(self.send_error(f, e)),
            }
        }
        Ok(Some(Instant::now()))
    }

    /// Receives every queued datagram. Returns false when the socket had nothing.
    /// While the window is open (`one_way` given), each datagram whose
    /// timestamps are its own is recorded for one-way delay.
    fn on_recv(
        &self,
        f: &mut UFlow,
        buf: &mut [u8],
        cap: usize,
        stopping: bool,
        mut one_way: Option<&mut OneWayRecorder>,
    ) -> Result<bool, EngineError> {
        let mut any = false;
        let zero_ns = f.zero_ns;
        loop {
            let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: all-zero is a valid mmsghdr.
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            const CMSG: usize = 64;
            let mut cbuf = [[0u8; CMSG]; BATCH];
            for i in 0..BATCH {
                iovs[i] = libc::iovec {
                    iov_base: buf[i * cap..].as_mut_ptr().cast(),
                    iov_len: cap,
                };
                msgs[i].msg_hdr.msg_iov = &mut iovs[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
                msgs[i].msg_hdr.msg_control = cbuf[i].as_mut_ptr().cast();
                msgs[i].msg_hdr.msg_controllen = CMSG as _;
            }
            // SAFETY: every pointer refers to buffers that outlive the call.
            let rc = unsafe {
                libc::recvmmsg(
                    f.fd,
                    msgs.as_mut_ptr(),
                    BATCH as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(any),
                    io::ErrorKind::Interrupted => continue,
                    // ICMP errors from our own sends do not concern a receiver.
                    _ if e.raw_os_error() == Some(libc::ECONNREFUSED) => continue,
                    _ if stopping => return Ok(any),
                    _ => {
                        return Err(EngineError::Flow {
                            flow: f.flow.id,
                            direction: f.flow.direction.name(),
                            what: "receive datagrams".into(),
                            error: e,
                        })
                    }
                }
            }
            any = true;
            let now_wall = now_realtime_ns();
            for (i, m) in msgs.iter().take(rc as usize).enumerate() {
                let len = m.msg_len as usize;
                let whole = &buf[i * cap..i * cap + len.min(cap)];
                if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                    f.stray += 1;
                    continue;
                }
                f.units += 1;
                let (rx_ns, gro) = cmsgs(&m.msg_hdr);
                // Without the kernel's timestamp, ours is per batch: shared.
                let own_rx = rx_ns.is_some();
                let rx_ns = rx_ns.unwrap_or(now_wall);
                // With UDP GRO one buffer may hold several datagrams of `gro` bytes each.
                let seg = gro.filter(|g| *g > 0).unwrap_or(len.max(1));
                let alone = own_rx && len <= seg;
                for d in whole.chunks(seg) {
                    let h = match f.reader.read(d, rx_ns, alone, &f.tracker) {
                        Incoming::SetUp => continue,
                        Incoming::Stray => {
                            f.stray += 1;
                            continue;
                        }
                        Incoming::Data(h) => h,
                    };
                    // Each payload counts once: a duplicate is accounted, not delivered again.
                    match f.tracker.on_arrival(h.seq, h.sent_ns, rx_ns, h.timing) {
                        Arrival::New => {
                            f.bytes += d.len() as u64;
                            // The kernel's receive time; a batch's send stamp is its call's.
                            if own_rx && h.one_way {
                                if let Some(o) = one_way.as_deref_mut() {
                                    // A send time far from this end's clock is no
                                    // sender's (the tracker counts it untimed).
                                    let transit =
                                        i128::from(rx_ns) - i128::from(zero_ns) - i128::from(h.sent_ns);
                                    if transit.unsigned_abs() <= u128::from(MAX_STAMP_SKEW_NS) {
                                        o.record(h.sent_ns, rx_ns);
                                    }
                                }
                            }
                        }
                        Arrival::Duplicate => {}
                        // Further ahead than the sender can have sent: not this flow's.
                        Arrival::Implausible => f.stray += 1,
                    }
                }
            }
            f.flow.counters.set_bytes(f.bytes);
            f.flow.counters.set_units(f.units);
            f.flow.counters.publish_udp(&f.tracker.live());
            f.last_rx = Instant::now();
        }
    }
}

/// Puts flow `index` in the worker's poll for `interest`, or takes it out
/// (`None`), unless it already is so.
fn watch(io: &Io<'_>, f: &mut UFlow, index: usize, interest: Option<Interest>) -> Result<(), EngineError> {
    let r = match (interest, f.watched) {
        (Some(i), false) => io.registry.register(&mut f.sock, Token(index), i),
        (None, true) => io.registry.deregister(&mut f.sock),
        _ => return Ok(()),
    };
    // Only what the kernel took: a failed call leaves the socket as it was.
    r.map_err(|e| EngineError::Setup(format!("worker event loop: flow {}: {e}", f.flow.id)))?;
    f.watched = interest.is_some();
    Ok(())
}

/// A sender whose socket refused a send waits in the poll until it is
/// writable (registering reports it at once if it already is).
fn watch_if_full(io: &Io<'_>, f: &mut UFlow, index: usize) -> Result<(), EngineError> {
    if f.full && !f.done {
        watch(io, f, index, Some(Interest::WRITABLE))?;
    }
    Ok(())
}

/// Whether `received` messages since the last turn that received, `since`
/// ago, come at [`RX_BUSY_RATE`] or more: a pause would gather several.
fn busy_receiving(received: u64, since: Duration) -> bool {
    received as f64 >= since.as_secs_f64() * RX_BUSY_RATE
}

/// The kernel's receive timestamp (SO_TIMESTAMPNS, in ns) and the GRO
/// segment size (UDP_GRO) of one received message, where present.
fn cmsgs(h: &libc::msghdr) -> (Option<u64>, Option<usize>) {
    let (mut ts, mut gro) = (None, None);
    // SAFETY: walking the control buffer the kernel filled, with the libc macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            } else if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let g: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                gro = usize::try_from(g).ok();
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (ts, gro)
}

/// setsockopt with an int; true if the kernel took it.
fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> bool {
    netrig_engine::sockopt::set_int(fd, level, opt, v).is_ok()
}

impl Workload for UdpStreamWorkload {
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        let schedule = self
            .rate_bps
            .map(|r| Schedule::new(ctl.start, self.size, r, self.pacing));
        // Paced senders sleep on the reactor's timer until their next datagram is due.
        let mut reactor = Reactor::new(schedule.is_some())?;
        let mut fl = Vec::with_capacity(flows.len());
        for (i, flow) in flows.into_iter().enumerate() {
            flow.socket.udp().map_err(setup)?;
            let mut sock = SocketHandle::new(&flow.socket).map_err(setup)?;
            let fd = sock.raw_fd();
            let sender = flow.role == Role::Sender;
            let per = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / self.size.max(1)).max(1);
            // iperf3's header cannot mark a stamp shared by a GSO send.
            let gso_segments = if self.offload
                && datagram::batches(self.datagram)
                && sender
                && per > 1
                && set_int(fd, libc::SOL_UDP, UDP_SEGMENT, self.size as libc::c_int)
            {
                per
            } else {
                1
            };
            if !sender {
                set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
                if self.offload {
                    set_int(fd, libc::SOL_UDP, UDP_GRO, 1);
                }
            }
            // Senders join the poll only when their socket fills (UFlow::watched).
            if !sender {
                reactor
                    .registry()
                    .register(&mut sock, Token(i), Interest::READABLE)
                    .map_err(setup)?;
            }
            // Send times are judged against this end's clock since its
            // time zero (the sender's count from its own, a control
            // message apart): far ones are untimed.
            let mut tracker = SeqTracker::new();
            let zero_ns = now_realtime_ns().saturating_sub(ctl.start.elapsed().as_nanos() as u64);
            tracker.set_zero(zero_ns);
            let reader = Reader::new(self.datagram, self.size, ctl.test_id, flow.id, zero_ns);
            fl.push(UFlow {
                flow,
                sock,
                fd,
                watched: !sender,
                full: false,
                done: false,
                bytes: 0,
                units: 0,
                seq: 0,
                pace: if sender { schedule } else { None },
                behind: false,
                gso_segments,
                reader,
                tracker,
                stray: 0,
                last_rx: Instant::now(),
                zero_ns,
            });
        }
        let per_msg = fl.iter().map(|f| f.gso_segments).max().unwrap_or(1);
        let receives_only = fl.iter().all(|f| f.flow.role != Role::Sender);
        let all_send = fl.iter().all(|f| f.flow.role == Role::Sender);
        // Receive buffers big enough for a GRO-coalesced message.
        let cap = netrig_proto::spec::UDP_BUFFER_MAX as usize;
        let w = Worker {
            cfg: self,
            ctl,
            sbuf: vec![0x42u8; self.size * BATCH * per_msg],
            rbuf: vec![0u8; cap * BATCH],
            cap,
            fl,
            next_due: schedule.map(|_| ctl.start),
            coalesce: receives_only,
            pausing: false,
            received: 0,
            last_receipt: None,
            send_cap: SendCap::of(ctl),
            // One-way delay, from the instant the run gave (no later than the sender's zero);
            // not from iperf3's stamps, whose clock this end does not know (see `datagram`).
            one_way: (!all_send && self.datagram.is_netrig()).then(|| {
                OneWayRecorder::new(
                    now_realtime_ns().saturating_sub(ctl.clock_ref.elapsed().as_nanos() as u64),
                )
            }),
        };
        reactor.run_worker(w, ctl)
    }
}

/// One worker's flows in the reactor.
struct Worker<'a> {
    cfg: &'a UdpStreamWorkload,
    ctl: &'a WorkerControl,
    /// The agent's `--max-rate`, on its sends.
    send_cap: SendCap,
    fl: Vec<UFlow>,
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
    /// Bytes per receive buffer in `rbuf`.
    cap: usize,
    /// Paced: when the earliest sender's next datagram is due.
    next_due: Option<Instant>,
    /// Pause between turns that receive ([`RX_COALESCE`]): only a worker
    /// that does not also send.
    coalesce: bool,
    /// Pausing: the receivers are out of the poll and read after each
    /// pause, so that the sending CPU's kernel queues datagrams without
    /// calling the poll's callback for each (see [`UFlow::watched`]).
    pausing: bool,
    /// Messages received this turn.
    received: u64,
    /// When a turn last received datagrams.
    last_receipt: Option<Instant>,
    /// A receiving worker's one-way delays, recorded while the window is open.
    one_way: Option<OneWayRecorder>,
}

impl Worker<'_> {
    /// The one-way delay recorder while the window is open.
    fn recording<'a>(
        one_way: &'a mut Option<OneWayRecorder>,
        ctl: &WorkerControl,
    ) -> Option<&'a mut OneWayRecorder> {
        one_way.as_mut().filter(|_| ctl.recording.load(Ordering::Relaxed))
    }
}

impl Worker<'_> {
    /// A receiving worker's turn: while messages come at [`RX_BUSY_RATE`]
    /// or more, it leaves the poll, pauses [`RX_COALESCE`] and reads what
    /// came meanwhile; when pauses bring fewer, or none for
    /// [`RX_PAUSE_GRACE`], or the window has closed, its receivers go back
    /// into the poll, which reports at once what is already queued.
    fn coalesce_turn(&mut self, io: &Io<'_>, now: &Now, received: u64) -> Result<(), EngineError> {
        let since = self.last_receipt.map(|t| now.get().duration_since(t));
        let busy = !io.draining()
            && match (received, since) {
                (_, None) => false,
                (0, Some(quiet)) => self.pausing && quiet < RX_PAUSE_GRACE,
                (n, Some(since)) => busy_receiving(n, since),
            };
        if received > 0 {
            self.last_receipt = Some(now.get());
        }
        if busy != self.pausing {
            for (i, f) in self.fl.iter_mut().enumerate() {
                if f.flow.role != Role::Sender {
                    watch(io, f, i, (!busy).then_some(Interest::READABLE))?;
                }
            }
            self.pausing = busy;
        }
        if busy {
            std::thread::sleep(RX_COALESCE);
            let (cfg, ctl) = (self.cfg, self.ctl);
            for f in self
                .fl
                .iter_mut()
                .filter(|f| f.flow.role != Role::Sender && !f.done)
            {
                let before = f.units;
                let one_way = Worker::recording(&mut self.one_way, ctl);
                cfg.on_recv(f, &mut self.rbuf, self.cap, false, one_way)?;
                self.received += f.units - before;
            }
        }
        Ok(())
    }
}

impl Handler for Worker<'_> {
    fn on_ready(&mut self, io: &Io<'_>, index: usize, _ready: Ready) -> Result<(), EngineError> {
        let (cfg, ctl) = (self.cfg, self.ctl);
        let Some(f) = self.fl.get_mut(index) else {
            return Ok(());
        };
        if f.done {
            return Ok(());
        }
        match f.flow.role {
            // Writable again: out of the poll until the socket fills next.
            Role::Sender => {
                watch(io, f, index, None)?;
                f.full = false;
                if f.pace.is_none() {
                    cfg.on_send(f, &mut self.sbuf, ctl, ctl.test_id, &self.send_cap)?;
                    watch_if_full(io, f, index)?;
                }
            }
            _ => {
                let before = f.units;
                let one_way = Worker::recording(&mut self.one_way, ctl);
                cfg.on_recv(f, &mut self.rbuf, self.cap, io.draining(), one_way)?;
                self.received += f.units - before;
            }
        }
        Ok(())
    }

    // The timer's expiry is not read: re-arming resets it, and each expiry
    // wakes the edge-triggered poll anew; on_tick sends what is due.

    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Duration, EngineError> {
        let (cfg, ctl) = (self.cfg, self.ctl);
        let received = std::mem::take(&mut self.received);
        if self.coalesce {
            self.coalesce_turn(io, now, received)?;
        }
        // How long the poll may sleep: not at all while an unpaced sender
        // has room and spent its turn's calls, or the receivers pause.
        let mut wait = if self.pausing { Duration::ZERO } else { IDLE };
        if !io.draining() {
            // Unpaced senders with room keep sending without waiting for an edge.
            for (i, f) in self.fl.iter_mut().enumerate() {
                if f.flow.role != Role::Sender || f.pace.is_some() || f.full {
                    continue;
                }
                if let Some(again) = cfg.on_send(f, &mut self.sbuf, ctl, ctl.test_id, &self.send_cap)? {
                    wait = wait.min(again.saturating_duration_since(now.get()));
                }
                watch_if_full(io, f, i)?;
            }
        }
        // Paced senders: send what is due, then sleep until the next one.
        if !io.draining()
            && self
                .next_due
                .is_some_and(|d| d <= now.get() + Duration::from_micros(20))
        {
            let mut earliest: Option<Instant> = None;
            for (i, f) in self.fl.iter_mut().enumerate() {
                if f.flow.role != Role::Sender || f.pace.is_none() || f.full {
                    continue;
                }
                if let Some(d) = cfg.on_send(f, &mut self.sbuf, ctl, ctl.test_id, &self.send_cap)? {
                    earliest = Some(earliest.map_or(d, |e: Instant| e.min(d)));
                }
                watch_if_full(io, f, i)?;
            }
            self.next_due = earliest.or(Some(now.get() + Duration::from_millis(1)));
        }
        if let (Some(t), Some(d)) = (io.timer, self.next_due) {
            t.arm_at(d);
        }
        Ok(wait)
    }

    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        for f in self.fl.iter_mut().filter(|f| f.flow.role == Role::Sender) {
            f.done = true;
        }
        DRAIN_MAX
    }

    fn is_done(&self, io: &Io<'_>, now: &Now) -> bool {
        // Receivers drain until quiet, within DRAIN_MAX.
        io.draining()
            && self
                .fl
                .iter()
                .filter(|f| !f.done)
                .all(|f| now.get().duration_since(f.last_rx) >= DRAIN_QUIET)
    }

    fn finish(self, _io: &Io<'_>) -> WorkerEnd {
        let flows = self
            .fl
            .into_iter()
            .map(|f| {
                let sender = f.flow.role == Role::Sender;
                FlowEnd {
                    zerocopy: None,
                    reads: None,
                    sends: None,
                    id: f.flow.id,
                    total_bytes: f.bytes,
                    done_at: None,
                    final_buffers: sockopt::buffers(&f.flow.socket),
                    udp: Some(UdpAccount {
                        sent_datagrams: if sender { f.seq } else { 0 },
                        received: (!sender).then(|| f.tracker.summary()),
                        stray: f.stray,
                        late: 0,
                        units: f.units,
                    }),
                }
            })
            .collect();
        WorkerEnd {
            flows,
            one_way: self.one_way.map(OneWayRecorder::into_histogram),
            ..WorkerEnd::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_pauses_only_when_a_pause_gathers_several_datagrams() {
        // A flood woken per datagram: one every 3.5 µs.
        assert!(busy_receiving(1, Duration::from_nanos(3_500)));
        // A batch of 40 over 100 µs (400,000/s).
        assert!(busy_receiving(40, Duration::from_micros(100)));
        // A paced 44,700 datagrams/s, one per wake-up: no pause, which would add a wake-up.
        assert!(!busy_receiving(1, Duration::from_micros(22)));
        // A slow flow.
        assert!(!busy_receiving(1, Duration::from_millis(1)));
    }
}
