//! Bulk transfer (TCP_STREAM, TCP_MAERTS and both at once): senders write
//! `message_size` bytes per call until stopped or their quota is sent, as
//! fast as the socket takes them or paced to a rate (`-b`), with send(2) or,
//! with `-Z`, sendfile(2) from an in-memory file; receivers read `recv_size`
//! bytes per call until end of file.

use mio::{Interest, Token};
use netrig_engine::cap::SendCap;
use netrig_engine::flow::SocketHandle;
use netrig_engine::inq::ReadInq;
use netrig_engine::lowat::{Checks, Watermark};
use netrig_engine::notsent;
use netrig_engine::pace::Schedule;
use netrig_engine::reactor::{Handler, Io, Now, Reactor, Ready, IDLE};
use netrig_engine::sockopt;
use netrig_engine::workload::{WorkerControl, Workload};
use netrig_engine::{EngineError, Flow, FlowEnd, WorkerEnd};
use netrig_proto::report::{BufPair, ReadReport, Role, SendReport, ZeroCopyReport};
use std::fs::File;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The stream workload's parameters.
#[derive(Debug, Clone)]
pub struct StreamWorkload {
    pub message_size: usize,
    pub recv_size: usize,
    /// Paced senders (`-b`): payload bits/s per flow; `None`: as fast as
    /// the socket takes them. Message k is due at time zero + k × message
    /// size × 8 / rate; a partly written message is finished whenever the
    /// socket has room, a new one starts only when due.
    pub rate_bps: Option<u64>,
    /// Paced senders wake at most this often and begin the messages due
    /// within it (see [`Pace`](netrig_proto::spec::Pace)).
    pub pacing: Duration,
    /// `-Z`: senders send each message with sendfile(2) from an in-memory
    /// file (memfd) holding the message's bytes, instead of send(2) from a
    /// buffer, so the kernel takes the pages without a copy from user memory.
    pub zerocopy: bool,
    /// `--skip-rx-copy`: receivers read with MSG_TRUNC, which for TCP
    /// discards the bytes without copying them to user memory.
    pub skip_rx_copy: bool,
    /// `--msg-zerocopy`: senders send with MSG_ZEROCOPY and read the
    /// kernel's completion notices from the socket's error queue.
    pub msg_zerocopy: bool,
    /// Receivers may set SO_RCVLOWAT while they are ahead of their flow
    /// ([`netrig_engine::lowat`]); false with `--no-rcvlowat`.
    pub rcvlowat: bool,
    /// `--notsent-lowat`: the TCP_NOTSENT_LOWAT senders set (0: none);
    /// `None`: the default ([`netrig_engine::notsent::to_set`]).
    pub notsent_lowat: Option<u32>,
    /// The run moves data both ways (tcp-bidir): the default bound applies.
    pub both_directions: bool,
}

/// What a sender sends: `buf` (one message of the pattern), and with `-Z`
/// the in-memory file that holds the same bytes, sent with sendfile(2).
struct Payload<'a> {
    buf: &'a [u8],
    file: Option<RawFd>,
}

/// One message of the payload, `len` bytes: 1, 2, ... 251 over and over
/// (no run of zeros for a compressing path to shrink). Built by copying the
/// bytes made so far, doubling each time (memcpy), not a byte at a time: a
/// byte loop took a debug build's worker most of a second for a 16 MiB
/// message, inside the run's window.
fn pattern(len: usize) -> Vec<u8> {
    let mut buf: Vec<u8> = (1..=251u8).take(len).collect();
    buf.reserve_exact(len - buf.len());
    while buf.len() < len {
        buf.extend_from_within(..buf.len().min(len - buf.len()));
    }
    buf
}

/// An in-memory file (memfd_create(2)) holding `pattern`, for sendfile(2).
fn payload_file(pattern: &[u8]) -> Result<File, EngineError> {
    let fail = |what: &str, e: io::Error| {
        EngineError::Setup(format!(
            "-Z/--zerocopy: cannot make the in-memory file to send from ({what}): {e}"
        ))
    };
    // SAFETY: the name is a NUL-terminated string that outlives the call;
    // the result is checked before use.
    let fd = unsafe { libc::memfd_create(c"netrig-zerocopy".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(fail("memfd_create", io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(pattern).map_err(|e| fail("write", e))?;
    Ok(file)
}

/// sendfile(2): up to `len` bytes of `file` from `offset` to `sock`.
fn send_file(sock: RawFd, file: RawFd, offset: usize, len: usize) -> io::Result<usize> {
    let mut off = offset as libc::off_t;
    // SAFETY: both descriptors stay open for the call (the slot holds the
    // socket, the worker the file), and `off` is a live local the kernel
    // may update.
    let rc = unsafe { libc::sendfile(sock, file, &mut off, len) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// recv(2) with MSG_TRUNC: up to `len` bytes taken from a TCP socket and
/// discarded by the kernel, not copied to user memory (Linux 4.x and later).
/// Returns how many, as read(2) would.
fn discard(sock: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: with MSG_TRUNC the kernel writes nothing to the buffer, and
    // none is given.
    let rc = unsafe {
        libc::recv(
            sock,
            std::ptr::null_mut(),
            len,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// How long a `--msg-zerocopy` sender waits, once done, for the notices of
/// its last sends.
const ZC_LAST_NOTICES: Duration = Duration::from_millis(200);
/// From linux/socket.h and linux/errqueue.h (not in the libc crate).
const SO_ZEROCOPY: libc::c_int = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// SO_ZEROCOPY on a socket, which MSG_ZEROCOPY sends need.
fn enable_zerocopy(sock: RawFd) -> io::Result<()> {
    sockopt::set_int(sock, libc::SOL_SOCKET, SO_ZEROCOPY, 1)
}

/// send(2) with MSG_ZEROCOPY. The kernel holds `buf`'s pages until it
/// notifies the send's completion; the worker's send buffer is never
/// written after set-up and outlives the sends' notices (see
/// [`ZC_LAST_NOTICES`]), so what leaves is the pattern either way.
fn send_zerocopy(sock: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for its length during the call.
    let rc = unsafe { libc::send(sock, buf.as_ptr().cast(), buf.len(), libc::MSG_ZEROCOPY) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Reads the completion notices queued on a MSG_ZEROCOPY socket's error
/// queue into `zc`. Returns how many sends they covered.
fn drain_notices(sock: RawFd, zc: &mut ZeroCopyReport) -> io::Result<u64> {
    let mut covered = 0;
    loop {
        let mut control = [0u64; 16]; // 128 bytes, aligned for cmsghdr
                                      // SAFETY: all-zero is a valid msghdr.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` points at `control`, which outlives the call; no data buffer.
        let rc = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(covered),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        // SAFETY: walking the control buffer the kernel filled, with the libc macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let ip = ((*c).cmsg_level == libc::SOL_IP && (*c).cmsg_type == libc::IP_RECVERR)
                    || ((*c).cmsg_level == libc::SOL_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR);
                if ip {
                    let ee: libc::sock_extended_err = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    if ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        // Sends ee_info ..= ee_data (their counter wraps at 2^32).
                        let n = u64::from(ee.ee_data.wrapping_sub(ee.ee_info)) + 1;
                        covered += n;
                        zc.completed += n;
                        if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            zc.copied += n;
                        }
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
    }
}

/// Where a sender's write loop stopped.
enum Sent {
    /// The socket is full: wait for a writable edge.
    Full,
    /// The quota is sent; the flow is done.
    Finished,
    /// Paced: the next message is due then.
    NotDue(Instant),
    /// The window closed (the handler's `on_stop` finishes the flow).
    Stopped,
    /// It sent its turn's bytes ([`TURN_BYTES`], to the end of a message)
    /// and its worker has other flows: it goes on at its next turn, without
    /// waiting for an edge.
    Turn,
}

/// Bytes a sender sends (then to the end of the message), or a receiver
/// reads, in one turn of its worker's loop when the worker has other flows:
/// [`TURN_BYTES`], or [`TURN_BYTES_PER_FLOW`] for each of the worker's flows
/// if that is more. Without a bound a sender wrote until its socket was full
/// and a receiver read until its socket was empty, and on loopback, where
/// the peer empties or refills a socket as fast as this end works on it,
/// that could be most of the test: `tcp-stream -P 4 -T 1` gave its flows 0.5
/// to 13 Gbit/s (Jain's index 0.61), and `tcp-bidir -P 2` its client's
/// senders 1-2 Gbit/s against the agent's 20 (their workers kept reading).
/// Measured (bench/builds-ab.sh, paired, and single runs): with 4 flows on 2
/// workers, turns of 512 KiB cost 16 % of the throughput and 4 MiB
/// 0.966-1.019x; 64 flows on 2 workers lost 10-15 % with turns of 4 MiB and
/// nothing with 64 MiB (with that many flows each socket fills or empties
/// long before a turn ends); tcp-bidir `-P 2 -T 1` needs turns of 8 MiB or
/// less (64 MiB starved the other direction).
const TURN_BYTES: u64 = 8 << 20;
/// See [`TURN_BYTES`].
const TURN_BYTES_PER_FLOW: u64 = 2 << 20;

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Active,
    /// Window closed: a receiver reads on, uncounted in the window, until end of file.
    Draining,
    Done,
}

struct Slot {
    flow: Flow,
    sock: SocketHandle,
    state: State,
    bytes: u64,
    /// Offset inside the current message (a partial write continues it).
    msg_off: usize,
    /// Messages begun.
    messages: u64,
    /// Paced: messages that may begin before the schedule is asked again.
    allowed: u64,
    /// A sender that filled its socket and waits for a writable edge.
    full: bool,
    /// A sender that stopped at the end of its turn ([`Sent::Turn`]) with
    /// room left: the loop comes back to it.
    turn: bool,
    done_at: Option<Instant>,
    final_buffers: Option<BufPair>,
    /// `--msg-zerocopy` senders: sends made and the kernel's notices.
    zc: Option<ZeroCopyReport>,
    /// Receivers: whether the kernel wakes the poll only for a full read
    /// ([`netrig_engine::lowat`]).
    lowat: Watermark,
    /// Receivers: receive calls made.
    reads: u64,
    /// Senders: send calls made.
    sends: u64,
    /// Senders: the unsent bytes the kernel lets them keep, read back
    /// from the socket once set ([`notsent::get`]).
    notsent_lowat: Option<u32>,
}

impl Slot {
    fn io_error(&self, what: &str, e: io::Error) -> EngineError {
        EngineError::Flow {
            flow: self.flow.id,
            direction: self.flow.direction.name(),
            what: format!("{what} after {} bytes", self.bytes),
            error: e,
        }
    }

    fn record_final_buffers(&mut self) {
        if self.final_buffers.is_none() {
            self.final_buffers = Some(sockopt::buffers(&self.flow.socket));
        }
    }
}

impl Workload for StreamWorkload {
    fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        let setup = |e: io::Error| EngineError::Setup(format!("worker event loop: {e}"));
        let sends = flows
            .iter()
            .any(|f| matches!(f.role, Role::Sender | Role::Requester));
        let pace = self
            .rate_bps
            .filter(|_| sends)
            .map(|r| Schedule::new(ctl.start, self.message_size, r, self.pacing));
        // Paced senders sleep on the reactor's timer until their next message is due; so do
        // MSG_ZEROCOPY senders whose notices are in arrears (ENOBUFS) until they come.
        let mut reactor = Reactor::new(pace.is_some() || (self.msg_zerocopy && sends))?;
        let mut slots = Vec::with_capacity(flows.len());
        let notsent_lowat = if sends {
            notsent::to_set(
                self.notsent_lowat,
                self.message_size,
                self.rate_bps.is_some(),
                self.both_directions,
                notsent::host(),
            )
        } else {
            None
        };
        for (i, flow) in flows.into_iter().enumerate() {
            flow.socket.tcp().map_err(setup)?;
            let mut sock = SocketHandle::new(&flow.socket).map_err(setup)?;
            let interest = match flow.role {
                Role::Sender | Role::Requester => Interest::WRITABLE,
                Role::Receiver | Role::Responder => Interest::READABLE,
            };
            let sender = matches!(flow.role, Role::Sender | Role::Requester);
            if !sender && !self.skip_rx_copy {
                netrig_engine::inq::enable(sock.raw_fd());
            }
            if let (true, Some(bytes)) = (sender, notsent_lowat) {
                notsent::set(sock.raw_fd(), bytes).map_err(|e| {
                    EngineError::Setup(format!(
                        "--notsent-lowat {bytes}: setsockopt(TCP_NOTSENT_LOWAT) failed on flow {}'s socket: {e}",
                        flow.id
                    ))
                })?;
            }
            let zc = if self.msg_zerocopy && sender {
                enable_zerocopy(sock.raw_fd()).map_err(|e| {
                    EngineError::Setup(format!(
                        "--msg-zerocopy: this kernel refused SO_ZEROCOPY on flow {}'s socket: {e}",
                        flow.id
                    ))
                })?;
                Some(ZeroCopyReport::default())
            } else {
                None
            };
            reactor
                .registry()
                .register(&mut sock, Token(i), interest)
                .map_err(setup)?;
            // Unpaced receivers that copy: a paced flow's messages come one by one anyway.
            let lowat = Watermark::new(
                self.recv_size,
                self.rcvlowat && !sender && self.rate_bps.is_none() && !self.skip_rx_copy,
            );
            slots.push(Slot {
                lowat,
                reads: 0,
                sends: 0,
                notsent_lowat: if sender { notsent::get(sock.raw_fd()) } else { None },
                zc,
                flow,
                sock,
                state: State::Active,
                bytes: 0,
                msg_off: 0,
                messages: 0,
                allowed: 0,
                full: false,
                turn: false,
                done_at: None,
                final_buffers: None,
            });
        }
        // A worker with no sender never touches the message: none is made.
        let send_buf = if sends {
            pattern(self.message_size.max(1))
        } else {
            Vec::new()
        };
        // -Z: one file per worker, shared by its senders.
        let payload_file = if self.zerocopy && sends {
            Some(payload_file(&send_buf)?)
        } else {
            None
        };
        let w = Worker {
            cfg: self,
            ctl,
            turn_bytes: match slots.len() {
                0 | 1 => None,
                n => Some(TURN_BYTES.max(TURN_BYTES_PER_FLOW * n as u64)),
            },
            live: slots.len(),
            slots,
            payload: Payload {
                buf: &send_buf,
                file: payload_file.as_ref().map(File::as_raw_fd),
            },
            recv_buf: vec![0u8; self.recv_size.max(1)],
            pace,
            // Paced: when the earliest waiting sender's next message is due.
            next_due: pace.map(|_| ctl.start),
            checks: Checks::default(),
            cap: SendCap::of(ctl),
        };
        reactor.run_worker(w, ctl)
    }
}

/// One worker's flows in the reactor.
struct Worker<'a> {
    cfg: &'a StreamWorkload,
    ctl: &'a WorkerControl,
    slots: Vec<Slot>,
    /// Several flows: each sender and receiver takes turns of this many
    /// bytes ([`TURN_BYTES`]).
    turn_bytes: Option<u64>,
    /// Flows not yet done.
    live: usize,
    payload: Payload<'a>,
    recv_buf: Vec<u8>,
    pace: Option<Schedule>,
    next_due: Option<Instant>,
    /// Receivers whose watermark is on are read at least this often.
    checks: Checks,
    /// The agent's `--max-rate`, on its sends.
    cap: SendCap,
}

impl Worker<'_> {
    /// Sender `i`'s turn from the loop (not from its socket's edge): writes,
    /// notes where it stopped, and lets a finished one go. Returns true when
    /// it ended its turn with room left.
    fn sender_turn(&mut self, io: &Io<'_>, i: usize) -> Result<bool, EngineError> {
        let cfg = self.cfg;
        let s = &mut self.slots[i];
        let sent = cfg.on_writable(
            s,
            &self.payload,
            self.ctl,
            self.pace.as_ref(),
            self.turn_bytes,
            &self.cap,
        )?;
        if cfg.after_write(s, sent, &mut self.next_due) {
            let _ = io.registry.deregister(&mut s.sock);
            self.live -= 1;
        }
        Ok(s.turn)
    }

    /// A check of the receivers' watermarks ([`netrig_engine::lowat`]):
    /// each one on and not read since the last check is read now, and a
    /// read that brings less than the watermark turns it off.
    fn check_watermarks(&mut self, io: &Io<'_>) -> Result<(), EngineError> {
        for s in &mut self.slots {
            if s.state == State::Done || !s.lowat.check() {
                continue;
            }
            let before = s.bytes;
            let finished = self
                .cfg
                .on_readable(s, &mut self.recv_buf, io.draining(), self.turn_bytes)?;
            s.lowat
                .after_check_read(s.sock.raw_fd(), (s.bytes - before) as usize);
            if finished {
                let _ = io.registry.deregister(&mut s.sock);
                self.live -= 1;
            }
        }
        Ok(())
    }
}

impl Handler for Worker<'_> {
    fn on_ready(&mut self, io: &Io<'_>, index: usize, _ready: Ready) -> Result<(), EngineError> {
        let cfg = self.cfg;
        let Some(s) = self.slots.get_mut(index) else {
            return Ok(());
        };
        if s.state == State::Done {
            return Ok(());
        }
        let finished = match s.flow.role {
            Role::Sender | Role::Requester => {
                s.full = false;
                let sent = cfg.on_writable(
                    s,
                    &self.payload,
                    self.ctl,
                    self.pace.as_ref(),
                    self.turn_bytes,
                    &self.cap,
                )?;
                cfg.after_write(s, sent, &mut self.next_due)
            }
            Role::Receiver | Role::Responder => {
                cfg.on_readable(s, &mut self.recv_buf, io.draining(), self.turn_bytes)?
            }
        };
        if finished {
            let _ = io.registry.deregister(&mut s.sock);
            self.live -= 1;
        }
        Ok(())
    }

    // The timer's expiry is not read: re-arming resets it, and each expiry
    // wakes the edge-triggered poll anew; on_tick sends what is due.

    fn on_tick(&mut self, io: &Io<'_>, now: &Now) -> Result<Duration, EngineError> {
        // Flows that ended their turn with room (senders) or bytes left
        // (receivers): their next turn, and no sleep while one still has.
        let mut wait = IDLE;
        let mut watermarks = false;
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            watermarks |= s.lowat.is_on();
            if !s.turn || s.state == State::Done {
                continue;
            }
            s.turn = false;
            let again = match s.flow.role {
                Role::Sender | Role::Requester if !io.draining() => self.sender_turn(io, i)?,
                Role::Sender | Role::Requester => false,
                Role::Receiver | Role::Responder => {
                    if self
                        .cfg
                        .on_readable(s, &mut self.recv_buf, io.draining(), self.turn_bytes)?
                    {
                        let _ = io.registry.deregister(&mut s.sock);
                        self.live -= 1;
                    }
                    s.turn
                }
            };
            if again {
                wait = Duration::ZERO;
            }
        }
        // Receivers held back by their watermark: read those that were not
        // read since the last check, and wake for the next one.
        if watermarks {
            let now = now.get();
            if self.checks.due(now) {
                self.check_watermarks(io)?;
            }
            wait = wait.min(self.checks.wait(now));
        } else {
            self.checks.stop();
        }
        // Paced senders: begin what is due, then sleep until the next one.
        if !io.draining()
            && self
                .next_due
                .is_some_and(|d| d <= Instant::now() + Duration::from_micros(20))
        {
            self.next_due = None;
            for i in 0..self.slots.len() {
                let s = &self.slots[i];
                let sender = s.state == State::Active
                    && !s.full
                    && matches!(s.flow.role, Role::Sender | Role::Requester);
                if sender && self.sender_turn(io, i)? {
                    wait = Duration::ZERO;
                }
            }
        }
        if let (Some(t), Some(d)) = (io.timer, self.next_due) {
            t.arm_at(d);
        }
        Ok(wait)
    }

    fn on_stop(&mut self, _io: &Io<'_>, _now: Instant) -> Duration {
        // The window closed: senders finish, receivers drain.
        for s in self.slots.iter_mut().filter(|s| s.state == State::Active) {
            s.record_final_buffers();
            match s.flow.role {
                Role::Sender | Role::Requester => {
                    let _ = s.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
                    s.state = State::Done;
                    self.live -= 1;
                }
                Role::Receiver | Role::Responder => {
                    // The drain reads what comes as it comes.
                    s.lowat.off(s.sock.raw_fd());
                    s.state = State::Draining
                }
            }
        }
        // A peer that never closes is given up on at the deadline; what it
        // sent late was not in the window anyway.
        self.ctl.drain
    }

    fn is_done(&self, _io: &Io<'_>, _now: &Now) -> bool {
        self.live == 0
    }

    fn finish(self, _io: &Io<'_>) -> WorkerEnd {
        let flows = self
            .slots
            .into_iter()
            .map(|mut s| {
                s.record_final_buffers();
                if let Some(zc) = &mut s.zc {
                    // The last sends' notices come as the peer acknowledges them: wait a little.
                    let until = Instant::now() + ZC_LAST_NOTICES;
                    while zc.completed < zc.sends && Instant::now() < until {
                        if matches!(drain_notices(s.sock.raw_fd(), zc), Ok(0) | Err(_)) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }
                FlowEnd {
                    zerocopy: s.zc,
                    reads: matches!(s.flow.role, Role::Receiver | Role::Responder).then(|| ReadReport {
                        calls: s.reads,
                        watermark: s.lowat.watermark(),
                        watermark_on: s.lowat.ons,
                        watermark_off: s.lowat.offs,
                    }),
                    sends: matches!(s.flow.role, Role::Sender | Role::Requester).then_some(SendReport {
                        calls: s.sends,
                        notsent_lowat: s.notsent_lowat,
                    }),
                    id: s.flow.id,
                    total_bytes: s.bytes,
                    done_at: s.done_at,
                    final_buffers: s.final_buffers.unwrap_or_default(),
                    udp: None,
                }
            })
            .collect();
        WorkerEnd {
            flows,
            ..WorkerEnd::default()
        }
    }
}

impl StreamWorkload {
    /// Notes where a sender stopped: a full socket waits for its edge, a
    /// paced one for the timer. Returns true when the flow is done.
    fn after_write(&self, s: &mut Slot, sent: Sent, next_due: &mut Option<Instant>) -> bool {
        match sent {
            Sent::Full => s.full = true,
            Sent::NotDue(at) => *next_due = Some(next_due.map_or(at, |d| d.min(at))),
            Sent::Stopped => {}
            Sent::Turn => s.turn = true,
            Sent::Finished => return true,
        }
        false
    }

    /// Writes (or, with `-Z`, sends from the file) until the socket is full,
    /// paced until the next message is not yet due, and when `turn` (the
    /// worker has other flows) for a turn of that many bytes at most.
    fn on_writable(
        &self,
        s: &mut Slot,
        payload: &Payload,
        ctl: &WorkerControl,
        pace: Option<&Schedule>,
        turn: Option<u64>,
        cap: &SendCap,
    ) -> Result<Sent, EngineError> {
        let buf = payload.buf;
        let turn_ends = turn.map_or(u64::MAX, |t| s.bytes.saturating_add(t));
        loop {
            if ctl.stop.load(Ordering::Relaxed) {
                return Ok(Sent::Stopped); // on_stop finishes the flow
            }
            if s.msg_off == 0 && s.bytes >= turn_ends {
                return Ok(Sent::Turn);
            }
            if let (Some(p), 0) = (pace, s.msg_off) {
                if s.messages >= s.allowed {
                    match p.allowed(Instant::now(), s.messages) {
                        0 => return Ok(Sent::NotDue(p.due_at(s.messages))),
                        n => s.allowed = s.messages + n,
                    }
                }
            }
            let mut len = buf.len() - s.msg_off;
            if let Some(q) = s.flow.quota {
                let left = q - s.bytes;
                if left == 0 {
                    s.done_at = Some(Instant::now());
                    s.record_final_buffers();
                    let _ = s.flow.socket.tcp().and_then(|t| t.shutdown(Shutdown::Write));
                    s.state = State::Done;
                    return Ok(Sent::Finished);
                }
                len = len.min(left.min(usize::MAX as u64) as usize);
            }
            s.sends += 1;
            let sent = match payload.file {
                Some(file) => match send_file(s.sock.raw_fd(), file, s.msg_off, len) {
                    // The file holds a whole message: 0 would mean it does not.
                    Ok(0) => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the in-memory file ended inside the message",
                    )),
                    r => r,
                },
                None if s.zc.is_some() => send_zerocopy(s.sock.raw_fd(), &buf[s.msg_off..s.msg_off + len]),
                None => s.sock.write(&buf[s.msg_off..s.msg_off + len]),
            };
            match sent {
                Ok(n) => {
                    if let Some(zc) = &mut s.zc {
                        zc.sends += 1;
                    }
                    if s.msg_off == 0 {
                        s.messages += 1;
                    }
                    s.bytes += n as u64;
                    s.flow.counters.set_bytes(s.bytes);
                    s.msg_off = (s.msg_off + n) % buf.len();
                    // Held to the agent's cap: after a wait, the turn ends
                    // (the worker's other flows, the window's close).
                    if cap.spend(n) {
                        return Ok(Sent::Turn);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Some(zc) = &mut s.zc {
                        let _ = drain_notices(s.sock.raw_fd(), zc);
                    }
                    return Ok(Sent::Full);
                }
                // Notices in arrears take the socket's option memory (optmem_max): read them,
                // and if none has come yet, try again shortly.
                Err(e) if s.zc.is_some() && e.raw_os_error() == Some(libc::ENOBUFS) => {
                    let zc = s.zc.as_mut().expect("checked");
                    if drain_notices(s.sock.raw_fd(), zc).unwrap_or(0) == 0 {
                        return Ok(Sent::NotDue(Instant::now() + Duration::from_micros(50)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if payload.file.is_some() => {
                    // Refused on the flow's first call: this kernel (or this
                    // socket) does not take sendfile; say so rather than write.
                    if s.bytes == 0 && matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) {
                        return Err(EngineError::Setup(format!(
                            "-Z/--zerocopy: sendfile(2) is not supported here (flow {}): {e}",
                            s.flow.id
                        )));
                    }
                    return Err(s.io_error("sendfile", e));
                }
                Err(e) => return Err(s.io_error("send", e)),
            }
        }
    }

    /// Reads until the socket is empty or, when `turn` (the worker has
    /// other flows) and the window is open, for a turn of that many bytes
    /// ([`TURN_BYTES`]): a peer that refills the socket as fast as it is
    /// read would otherwise keep the worker here, and the flows beside it
    /// (tcp-bidir's senders on the same worker) would wait. Returns true at
    /// end of file.
    fn on_readable(
        &self,
        s: &mut Slot,
        buf: &mut [u8],
        stopping: bool,
        turn: Option<u64>,
    ) -> Result<bool, EngineError> {
        let turn_ends = turn.map_or(u64::MAX, |t| s.bytes.saturating_add(t));
        let before = s.bytes;
        let r = self.read_turn(s, buf, stopping, turn_ends);
        s.lowat.after_wake(s.sock.raw_fd(), (s.bytes - before) as usize);
        r
    }

    /// [`StreamWorkload::on_readable`]'s reads.
    fn read_turn(
        &self,
        s: &mut Slot,
        buf: &mut [u8],
        stopping: bool,
        turn_ends: u64,
    ) -> Result<bool, EngineError> {
        loop {
            let mut empty = false;
            s.reads += 1;
            let got = if self.skip_rx_copy {
                discard(s.sock.raw_fd(), buf.len())
            } else {
                s.sock.read_inq(buf).map(|(n, e)| {
                    empty = e;
                    n
                })
            };
            match got {
                Ok(0) => {
                    s.done_at = Some(Instant::now());
                    s.record_final_buffers();
                    s.state = State::Done;
                    return Ok(true);
                }
                Ok(n) => {
                    s.bytes += n as u64;
                    s.flow.counters.set_bytes(s.bytes);
                    if empty {
                        // The queue is empty: what comes next wakes the
                        // (edge-triggered) poll again.
                        return Ok(false);
                    }
                    if !stopping && s.bytes >= turn_ends {
                        s.turn = true;
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A reset while draining only loses bytes that were outside the window.
                Err(_) if stopping => {
                    s.state = State::Done;
                    return Ok(true);
                }
                Err(e) => return Err(s.io_error("receive", e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// The payload is 1..=251 repeating at every length, across each copy's
    /// seam (a length below, at and above 251 and its doublings).
    #[test]
    fn the_pattern_repeats_at_every_length() {
        for len in [0, 1, 250, 251, 252, 502, 503, 1_000, 4_016, 65_536, 100_003] {
            let p = pattern(len);
            assert_eq!(p.len(), len);
            if let Some((i, b)) = p.iter().enumerate().find(|(i, b)| **b != (i % 251) as u8 + 1) {
                panic!("length {len}: byte {i} is {b}");
            }
        }
    }

    /// sendfile from the in-memory file sends the pattern's bytes from the
    /// offset asked, and no more than asked.
    #[test]
    fn send_file_sends_the_pattern_from_the_offset() {
        let pattern = pattern(1000);
        let file = payload_file(&pattern).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        let n = send_file(a.as_raw_fd(), file.as_raw_fd(), 300, 200).unwrap();
        assert_eq!(n, 200);
        let n = send_file(a.as_raw_fd(), file.as_raw_fd(), 900, 100).unwrap();
        assert_eq!(n, 100);
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got[..200], pattern[300..500]);
        assert_eq!(got[200..], pattern[900..]);
    }
}
