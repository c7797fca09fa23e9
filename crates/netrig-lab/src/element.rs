//! netrig's path element (docs/LAB.md, "The path element"): a user-space forwarder for kernels
//! without netem. A link that asks for delay, jitter, loss, duplication or reordering where netem
//! is missing is built as two veth pairs through a namespace of its own (`nr<id>.e<i>`) whose two
//! interfaces carry no address and no bridge, so the kernel forwards nothing there; the element
//! (`netrig lab element CONFIG`, started by the builder, killed at teardown like the agents)
//! moves Ethernet frames between them with AF_PACKET sockets, one thread per direction, applying
//! that direction's properties with a delay line ordered by release time. Rate and queue limits
//! stay with htb/tbf on the sender's egress, in front of the element (as netem under htb).
//!
//! The sockets use PACKET_VNET_HDR, so a frame keeps its checksum-offload and GSO state across the
//! element (a TCP super-frame from a veth with TSO is one unit for loss and duplication: see the
//! docs); UDP datagrams are frames of their own.

// The random numbers the element draws, still named element::Rng (netrig-fuzz uses it).
pub use crate::pathmodel::Rng;
use crate::pathmodel::{Ge, GeModel, Queue, QueueCfg, QueueDrop, LINE_BYTES};
use crate::pathsched::{Sched, SchedCfg};
use serde::{Deserialize, Serialize};
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one direction of an element does to the frames it carries.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Props {
    pub delay_us: u64,
    /// Each frame's delay is delay ± a uniform jitter, never released before the frame ahead of
    /// it (no reordering from jitter, as netem with a rate).
    pub jitter_us: u64,
    /// Probability (0..1) a frame is dropped.
    pub loss: f64,
    /// Probability (0..1) a frame is sent twice.
    pub duplicate: f64,
    /// Probability (0..1) a frame skips the delay (netem's `reorder P%`): it overtakes the frames
    /// in the delay line.
    pub reorder: f64,
    /// Gilbert–Elliott loss (instead of `loss`).
    #[serde(default)]
    pub gemodel: Option<GeModel>,
    /// Probability (0..1) a frame has one bit flipped (netem's `corrupt`), its checksum completed
    /// first.
    #[serde(default)]
    pub corrupt: f64,
    /// The element's own rate and queue (drop-tail or RED), in front of the delay line.
    #[serde(default)]
    pub queue: Option<QueueCfg>,
    /// The element's own rate served from a queue per DSCP class (weighted fair queueing by
    /// each class's guaranteed rate, drop-tail or WRED per class: [`crate::pathsched`]), in
    /// front of the delay line; instead of `queue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<SchedCfg>,
}

/// One element: the namespace, its two interfaces, and what each direction does.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    pub link: String,
    /// The interfaces in the element's namespace: [towards the link's first end, towards the
    /// second].
    pub ifaces: [String; 2],
    /// The link's ends (host names), in `ifaces` order.
    pub ends: [String; 2],
    /// [what the first end sends (in on ifaces[0], out on ifaces[1]), what the second sends].
    pub props: [Props; 2],
    /// Where the counters are written (JSON, every 100 ms and at the end).
    pub counters: PathBuf,
    /// Bumped by each change of `props` (an arm's, [`crate::arm_path`]): the element re-reads
    /// its configuration on SIGHUP and each direction acknowledges the generation it took in
    /// its counters. 0: as the lab built it.
    #[serde(default)]
    pub generation: u64,
}

/// What one direction did, counted by the element.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counters {
    pub from: String,
    pub to: String,
    /// The configuration's generation this direction's properties are from (0: the lab's own
    /// as built; a change is in force once both directions show its generation).
    #[serde(default)]
    pub generation: u64,
    /// Frames read from the sender's side.
    pub received: u64,
    /// Frames written to the receiver's side (duplicates included).
    pub forwarded: u64,
    /// Frames dropped by the loss model.
    pub dropped: u64,
    /// Frames held in the delay line (a non-zero delay).
    pub delayed: u64,
    /// Frames sent after a frame received later than them had been sent: what a receiver
    /// counts out of order (a sequence number below the highest seen; extra copies excluded).
    pub reordered: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Frames the kernel refused to send (the receiver's side full).
    pub send_errors: u64,
    /// Frames dropped because the delay line held [`LINE_BYTES`] already (a memory bound, far
    /// above any path's bandwidth-delay product the element carries; not a queue model).
    #[serde(default)]
    pub overflow: u64,
    /// Frames the kernel dropped before the element read them (its socket's receive queue full:
    /// PACKET_STATISTICS' tp_drops): the element could not keep up.
    #[serde(default)]
    pub rx_drops: u64,
    /// Bursts of consecutive frames dropped by the loss model (`dropped` / `loss_bursts`: the
    /// mean burst length).
    #[serde(default)]
    pub loss_bursts: u64,
    /// Frames with one bit flipped (`corrupt`).
    #[serde(default)]
    pub corrupted: u64,
    /// Frames drawn for corruption that could not be corrupted so (not IP, or a GSO super-frame
    /// whose segments' checksums are computed after the element): sent unchanged.
    #[serde(default)]
    pub corrupt_skipped: u64,
    /// The element's own queue (with a rate of its own), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueCounters>,
    /// The same counts for the UDP datagrams among those frames (IPv4 or IPv6, one datagram a
    /// frame), reordering judged among UDP datagrams only: what a UDP stream's receiver sees.
    #[serde(default)]
    pub udp: UdpCounters,
    /// Pure TCP acknowledgements among the frames received (ACK set, no data), and those of
    /// them that carry a SACK option: a TCP receiver's acknowledgements, and its selective ones.
    #[serde(default)]
    pub tcp_acks: u64,
    #[serde(default)]
    pub tcp_sack_acks: u64,
    /// Each class of the element's class scheduler (`classes`), in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassCounters>,
}

/// What one class of the element's scheduler did, since lab up.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassCounters {
    pub class: String,
    /// Its DSCP values (empty: the default class).
    pub dscp: Vec<u8>,
    /// Its guaranteed rate (bits/s) and its queue's limit (the scheduler's unit).
    pub rate_bps: u64,
    pub limit: u64,
    /// Frames admitted to its queue.
    pub enqueued: u64,
    /// WRED's random drops, its drops at or above max, and drops at its limit.
    pub early_drops: u64,
    pub forced_drops: u64,
    pub tail_drops: u64,
    /// What it sent onto the link: packets (a super-frame's segments) and bytes on the wire.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// The class's backlog an arriving frame found, packets (mean over its arrivals).
    pub found_mean_packets: f64,
}

/// What the element's own queue did, since lab up.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QueueCounters {
    /// Frames admitted to the queue.
    pub enqueued: u64,
    /// RED: dropped at random, the average queue between min and max.
    pub early_drops: u64,
    /// RED: dropped because the average queue was at or above max.
    pub forced_drops: u64,
    /// Dropped because the queue was full (its limit).
    pub tail_drops: u64,
    /// The backlog an arriving frame found, in bytes: mean over the arrivals and peak.
    pub found_mean_bytes: f64,
    pub found_peak_bytes: u64,
    /// The same in packets (mean).
    pub found_mean_packets: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct UdpCounters {
    pub received: u64,
    pub dropped: u64,
    pub reordered: u64,
    pub duplicated: u64,
    /// UDP datagrams corrupted (the receiver's kernel drops them: Udp InCsumErrors).
    #[serde(default)]
    pub corrupted: u64,
    /// UDP datagrams dropped by the element's queue (early, forced and tail).
    #[serde(default)]
    pub queue_dropped: u64,
}

/// Is this frame (after its 10-byte virtio-net header) a UDP datagram over IPv4 or IPv6?
pub fn is_udp(f: &[u8]) -> bool {
    const H: usize = 10 + 14;
    match f.get(10 + 12..10 + 14) {
        Some([0x08, 0x00]) => f.get(H + 9) == Some(&17),
        Some([0x86, 0xdd]) => f.get(H + 6) == Some(&17),
        _ => false,
    }
}

/// Counts frames sent after a later-received one (a receiver's "out of order").
#[derive(Default)]
pub struct LateCount {
    highest: Option<u64>,
}

impl LateCount {
    /// A frame (not an extra copy) with arrival number `seq` is sent: was it late?
    pub fn sent(&mut self, seq: u64) -> bool {
        match self.highest {
            Some(h) if seq < h => true,
            _ => {
                self.highest = Some(seq);
                false
            }
        }
    }
}

/// The decisions of one direction, pure of sockets: what to do with a frame arriving at `now`.
pub struct Line {
    pub props: Props,
    rng: Rng,
    /// The release time of the last delayed frame (jitter never reorders).
    last: Option<Instant>,
    ge: Option<Ge>,
    queue: Option<Queue>,
    /// The frame before was lost by the loss model (bursts are counted at their first frame).
    lost_before: bool,
}

/// Why a frame was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The loss model (`loss` or `loss_gemodel`).
    Loss,
    /// The element's own queue.
    Queue(QueueDrop),
}

/// What the element reads of a frame to decide its fate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameInfo {
    /// Its bytes on the wire and the packets it is there ([`crate::pathmodel::wire`]).
    pub wire: u64,
    pub segments: u64,
    pub dscp: Option<u8>,
}

/// A frame's fate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fate {
    /// Its release times: none (lost), one, or two (duplicated).
    pub release: Vec<Instant>,
    /// Released ahead of frames still in the delay line.
    pub reordered: bool,
    pub dropped: Option<Dropped>,
    /// Lost by the loss model, the frame before not: the first of a burst.
    pub burst: bool,
    /// The first copy is to be corrupted.
    pub corrupt: bool,
    /// The backlog (bytes, packets) the frame found in the element's queue.
    pub found: Option<(u64, u64)>,
}

impl Line {
    pub fn new(props: Props, rng: Rng) -> Self {
        Line {
            ge: props.gemodel.map(Ge::new),
            queue: props.queue.clone().map(Queue::new),
            props,
            rng,
            last: None,
            lost_before: false,
        }
    }

    /// Takes new properties between batches (an arm's change): frames already in the delay
    /// line keep their release times, and a new frame is still never released before the one
    /// ahead of it, so a shorter delay takes effect as the line drains and the change itself
    /// reorders nothing. The loss chain and the element's queue keep their state unless their
    /// own configuration changed.
    pub fn set_props(&mut self, props: Props) {
        if props.gemodel != self.props.gemodel {
            self.ge = props.gemodel.map(Ge::new);
        }
        if props.queue != self.props.queue {
            self.queue = props.queue.clone().map(Queue::new);
        }
        self.props = props;
    }

    /// The generator, for the choices made outside (which bit to flip).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// `pending`: frames in the delay line now.
    pub fn admit(&mut self, now: Instant, pending: usize) -> Fate {
        self.admit_frame(now, pending, FrameInfo::default())
    }

    /// In netem's order: the loss model, then the element's queue (served at its rate, a
    /// frame's delay counted from its departure), duplication, corruption, reordering or delay.
    /// (With a class scheduler, the element itself calls [`Line::lose`], the scheduler, and
    /// [`Line::release`] at the frame's departure.)
    pub fn admit_frame(&mut self, now: Instant, pending: usize, frame: FrameInfo) -> Fate {
        let mut fate = Fate::default();
        if let Some(burst) = self.lose() {
            fate.burst = burst;
            fate.dropped = Some(Dropped::Loss);
            return fate;
        }
        let (depart, found) = self.enqueue(now, frame);
        fate.found = found;
        match depart {
            Ok(start) => Fate {
                found,
                ..self.release(start, pending)
            },
            Err(e) => {
                fate.dropped = Some(Dropped::Queue(e));
                fate
            }
        }
    }

    /// The element's own queue, if it has one, for a frame arriving at `now`: its departure
    /// (`now` without a queue) or why it was dropped, and the backlog (bytes, packets) it found.
    pub fn enqueue(
        &mut self,
        now: Instant,
        frame: FrameInfo,
    ) -> (Result<Instant, QueueDrop>, Option<(u64, u64)>) {
        match &mut self.queue {
            None => (Ok(now), None),
            Some(q) => {
                let a = q.admit_segments(now, frame.wire, frame.segments.max(1), frame.dscp, &mut self.rng);
                (a.depart, Some((a.found_bytes, a.found_packets)))
            }
        }
    }

    /// The loss model's draw for the next frame: Some(the first of a burst) when it is lost.
    pub fn lose(&mut self) -> Option<bool> {
        let lost = match &mut self.ge {
            Some(g) => g.lose(&mut self.rng),
            None => self.props.loss > 0.0 && self.rng.unit() < self.props.loss,
        };
        let burst = lost && !self.lost_before;
        self.lost_before = lost;
        lost.then_some(burst)
    }

    /// A frame that left the element's queue at `start` (or arrived then, without a queue):
    /// duplication, corruption, reordering or delay. `pending`: frames in the delay line now.
    pub fn release(&mut self, start: Instant, pending: usize) -> Fate {
        let mut fate = Fate::default();
        let p = &self.props;
        let copies = if p.duplicate > 0.0 && self.rng.unit() < p.duplicate {
            2
        } else {
            1
        };
        fate.corrupt = p.corrupt > 0.0 && self.rng.unit() < p.corrupt;
        let (at, reordered) = if p.reorder > 0.0 && self.rng.unit() < p.reorder {
            (start, pending > 0)
        } else {
            let mut d = p.delay_us as f64;
            if p.jitter_us > 0 {
                d += (self.rng.unit() * 2.0 - 1.0) * p.jitter_us as f64;
            }
            let mut at = start + Duration::from_micros(d.max(0.0) as u64);
            if let Some(l) = self.last {
                at = at.max(l);
            }
            self.last = Some(at);
            (at, false)
        };
        fate.release = vec![at; copies];
        fate.reordered = reordered;
        fate
    }
}

/// A frame in the delay line, released in order of (time, arrival).
struct Held {
    at: Instant,
    seq: u64,
    frame: Vec<u8>,
    /// Its arrival number (an extra copy: None), and among UDP datagrams.
    arrival: Option<(u64, Option<u64>)>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // BinaryHeap is a max-heap: the earliest first.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_hup(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// The largest frame read: a GSO super-frame (64 KiB) with its virtio-net header.
const FRAME_MAX: usize = 65_536 + 64;

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// An AF_PACKET socket bound to `dev`, with virtio-net headers, not seeing its own sends.
fn packet_socket(dev: &str) -> Result<libc::c_int, String> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain syscalls on values owned here; every result is checked.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto as i32);
        if fd < 0 {
            return Err(os_err("socket(AF_PACKET)"));
        }
        let one: libc::c_int = 1;
        let sz = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        for (opt, what) in [
            (PACKET_VNET_HDR, "PACKET_VNET_HDR"),
            (PACKET_IGNORE_OUTGOING, "PACKET_IGNORE_OUTGOING"),
        ] {
            if libc::setsockopt(fd, libc::SOL_PACKET, opt, &one as *const _ as *const _, sz) != 0 {
                return Err(os_err(&format!("setsockopt({what}) on {dev}")));
            }
        }
        // Each frame stamped when the kernel received it (the queue and the delay count from
        // there, whatever the element's scheduling); without it, from when it is read.
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TIMESTAMPNS,
            &one as *const _ as *const _,
            sz,
        );
        let buf: libc::c_int = 8 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
            libc::setsockopt(fd, libc::SOL_SOCKET, opt, &buf as *const _ as *const _, sz);
        }
        let name = std::ffi::CString::new(dev).map_err(|_| format!("interface {dev:?}"))?;
        let ifindex = libc::if_nametoindex(name.as_ptr());
        if ifindex == 0 {
            return Err(os_err(&format!("interface {dev}")));
        }
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        if libc::bind(
            fd,
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        ) != 0
        {
            return Err(os_err(&format!("bind to {dev}")));
        }
        Ok(fd)
    }
}

/// SO_TIMESTAMPNS (SO_TIMESTAMPNS_OLD: a struct timespec of CLOCK_REALTIME) and its control
/// message type, as on x86 and arm Linux.
const SO_TIMESTAMPNS: libc::c_int = 35;

/// CLOCK_REALTIME now, as the kernel stamps frames.
/// CLOCK_REALTIME read between two readings of Instant's clock, the tightest of three tries, with
/// the later Instant: a preemption between the reads can then only place an arrival later than it
/// was (a frame held a little long), never earlier (a frame released before its delay).
fn clocks() -> (Instant, Duration) {
    (0..3)
        .map(|_| {
            let a = Instant::now();
            let r = realtime();
            let b = Instant::now();
            (b - a, b, r)
        })
        .min_by_key(|(width, ..)| *width)
        .map(|(_, b, r)| (b, r))
        .unwrap_or_else(|| (Instant::now(), realtime()))
}

fn realtime() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a struct owned here.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Reads one frame (non-blocking) with the time the kernel received it, if stamped.
fn recv_stamped(fd: libc::c_int, buf: &mut [u8]) -> Option<(usize, Option<Duration>)> {
    let mut cbuf = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut _,
        iov_len: buf.len(),
    };
    // SAFETY: a msghdr pointing at buffers owned here, their lengths given; the control
    // messages are walked with the kernel's macros within msg_controllen.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut _;
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT);
        if n <= 0 {
            return None;
        }
        let mut stamp = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const _);
                stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Some((n as usize, stamp))
    }
}

fn send(fd: libc::c_int, f: &[u8]) -> bool {
    // SAFETY: a buffer owned by the caller, its length given.
    unsafe { libc::send(fd, f.as_ptr() as *const _, f.len(), 0) == f.len() as isize }
}

/// Shared counters of one direction (written by its thread, read by the writer of the file).
#[derive(Default)]
struct Shared {
    v: [AtomicU64; 29],
    /// Each class of the scheduler's counts (indices C_*).
    classes: Vec<[AtomicU64; 8]>,
    /// New properties and their generation, taken by the direction's thread between batches.
    next: std::sync::Mutex<Option<(u64, Props)>>,
    pending: AtomicBool,
}

/// Indices into Shared.
const RECEIVED: usize = 0;
const FORWARDED: usize = 1;
const DROPPED: usize = 2;
const DELAYED: usize = 3;
const REORDERED: usize = 4;
const DUPLICATED: usize = 5;
const SEND_ERRORS: usize = 6;
const UDP_RECEIVED: usize = 7;
const UDP_DROPPED: usize = 8;
const UDP_REORDERED: usize = 9;
const UDP_DUPLICATED: usize = 10;
const OVERFLOW: usize = 11;
const RX_DROPS: usize = 12;
const LOSS_BURSTS: usize = 13;
const CORRUPTED: usize = 14;
const CORRUPT_SKIPPED: usize = 15;
const UDP_CORRUPTED: usize = 16;
const UDP_QUEUE_DROPPED: usize = 17;
const Q_ENQUEUED: usize = 18;
const Q_EARLY: usize = 19;
const Q_FORCED: usize = 20;
const Q_TAIL: usize = 21;
const Q_FOUND_BYTES: usize = 22;
const Q_FOUND_PACKETS: usize = 23;
const Q_FOUND_PEAK: usize = 24;
const Q_ARRIVALS: usize = 25;
/// The configuration generation in force (acknowledged by the direction's thread).
const GENERATION: usize = 26;
const TCP_ACKS: usize = 27;
const TCP_SACK_ACKS: usize = 28;

/// Indices into Shared.classes' counts.
const C_ENQUEUED: usize = 0;
const C_EARLY: usize = 1;
const C_FORCED: usize = 2;
const C_TAIL: usize = 3;
const C_SENT_PACKETS: usize = 4;
const C_SENT_BYTES: usize = 5;
const C_FOUND_PACKETS: usize = 6;
const C_ARRIVALS: usize = 7;

/// Frames the kernel dropped on this socket since the last call (PACKET_STATISTICS resets).
fn socket_drops(fd: libc::c_int) -> u64 {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: a struct owned here, its length given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st as *mut _ as *mut _,
            &mut len,
        )
    };
    if r == 0 {
        st.tp_drops as u64
    } else {
        0
    }
}

/// A frame waiting in the element's class scheduler.
struct Waiting {
    frame: Vec<u8>,
    arrival: (u64, Option<u64>),
    udp: bool,
}

/// One direction's output: the delay line and the frames sent, with their counts.
struct Out {
    tx: libc::c_int,
    c: Arc<Shared>,
    heap: BinaryHeap<Held>,
    /// Bytes in the delay line.
    held: usize,
    seq: u64,
    late: LateCount,
    udp_late: LateCount,
    /// The direction delays (delay or jitter): frames held count as delayed.
    delaying: bool,
}

impl Out {
    fn add(&self, i: usize, n: u64) {
        self.c.v[i].fetch_add(n, Ordering::Relaxed);
    }

    fn emit(&mut self, frame: &[u8], arrival: Option<(u64, Option<u64>)>) {
        if send(self.tx, frame) {
            self.add(FORWARDED, 1);
        } else {
            self.add(SEND_ERRORS, 1);
        }
        if let Some((a, u)) = arrival {
            if self.late.sent(a) {
                self.add(REORDERED, 1);
            }
            if u.is_some_and(|u| self.udp_late.sent(u)) {
                self.add(UDP_REORDERED, 1);
            }
        }
    }

    /// Sends the frames of the delay line due by `now`; the wait until the next (at most 100 ms).
    fn release_due(&mut self, now: Instant) -> Duration {
        while self.heap.peek().is_some_and(|h| h.at <= now) {
            let h = self.heap.pop().expect("peeked");
            self.held -= h.frame.len();
            self.emit(&h.frame, h.arrival);
        }
        self.heap
            .peek()
            .map(|h| h.at.saturating_duration_since(now))
            .unwrap_or(Duration::from_millis(100))
            .min(Duration::from_millis(100))
    }

    /// A frame that left the element's queue at `start` (or arrived then, without one):
    /// duplication, corruption, then sent at once or held in the delay line.
    fn place(
        &mut self,
        line: &mut Line,
        frame: &[u8],
        arrival: (u64, Option<u64>),
        udp: bool,
        start: Instant,
    ) {
        let fate = line.release(start, self.heap.len());
        // The first copy corrupted (netem corrupts the original after cloning the copy).
        let mut corrupted = None;
        if fate.corrupt {
            let mut f = frame.to_vec();
            if crate::pathmodel::corrupt(&mut f, line.rng()).is_some() {
                self.add(CORRUPTED, 1);
                if udp {
                    self.add(UDP_CORRUPTED, 1);
                }
                corrupted = Some(f);
            } else {
                self.add(CORRUPT_SKIPPED, 1);
            }
        }
        if fate.release.len() > 1 {
            self.add(DUPLICATED, fate.release.len() as u64 - 1);
            if udp {
                self.add(UDP_DUPLICATED, fate.release.len() as u64 - 1);
            }
        }
        let now = Instant::now();
        for (k, at) in fate.release.into_iter().enumerate() {
            let arrival = (k == 0).then_some(arrival);
            let frame = match (&corrupted, k) {
                (Some(f), 0) => f.as_slice(),
                _ => frame,
            };
            if at <= now && self.heap.is_empty() {
                self.emit(frame, arrival);
            } else if self.held + frame.len() > LINE_BYTES {
                self.add(OVERFLOW, 1);
            } else {
                self.held += frame.len();
                if self.delaying && at > now {
                    self.add(DELAYED, 1);
                }
                self.seq += 1;
                self.heap.push(Held {
                    at,
                    seq: self.seq,
                    frame: frame.to_vec(),
                    arrival,
                });
            }
        }
    }

    /// Counts a drop by the element's queue (or a class's).
    fn queue_drop(&self, why: QueueDrop, udp: bool) {
        self.add(
            match why {
                QueueDrop::Early => Q_EARLY,
                QueueDrop::Forced => Q_FORCED,
                QueueDrop::Tail => Q_TAIL,
            },
            1,
        );
        if udp {
            self.add(UDP_QUEUE_DROPPED, 1);
        }
    }

    /// Counts the backlog an arriving frame found.
    fn found(&self, bytes: u64, packets: u64) {
        self.add(Q_ARRIVALS, 1);
        self.add(Q_FOUND_BYTES, bytes);
        self.add(Q_FOUND_PACKETS, packets);
        self.c.v[Q_FOUND_PEAK].fetch_max(bytes, Ordering::Relaxed);
    }

    /// Counts a frame received, and what it is: a UDP datagram, or a pure TCP ACK (with SACK
    /// blocks or not).
    #[inline]
    fn received(&self, frame: &[u8], udp: bool) {
        self.add(RECEIVED, 1);
        if udp {
            self.add(UDP_RECEIVED, 1);
        } else if let Some(sack) = crate::pathmodel::pure_ack(frame) {
            self.add(TCP_ACKS, 1);
            if sack {
                self.add(TCP_SACK_ACKS, 1);
            }
        }
    }

    /// Counts a frame the loss model took (`burst`: the first of a burst).
    #[inline]
    fn lost(&self, burst: bool, udp: bool) {
        self.add(DROPPED, 1);
        if burst {
            self.add(LOSS_BURSTS, 1);
        }
        if udp {
            self.add(UDP_DROPPED, 1);
        }
    }

    /// New properties (SIGHUP), swapped between batches; acknowledged by their generation.
    /// (A reload never changes the queue or the classes: [`reloadable`].)
    fn reload(&mut self, line: &mut Line) {
        if self.c.pending.swap(false, Ordering::AcqRel) {
            let next = self.c.next.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some((generation, p)) = next {
                line.set_props(p);
                self.delaying = line.props.delay_us > 0 || line.props.jitter_us > 0;
                self.c.v[GENERATION].store(generation, Ordering::Release);
            }
        }
    }
}

/// A direction's arrivals: their numbers (all frames, and UDP datagrams apart) and the last
/// one's time.
#[derive(Default)]
struct Arrivals {
    all: u64,
    udp: u64,
    last: Option<Instant>,
}

impl Arrivals {
    /// The next frame's arrival numbers: its own, and its UDP one if it is a datagram.
    #[inline]
    fn number(&mut self, udp: bool) -> (u64, Option<u64>) {
        self.all += 1;
        let udp = udp.then(|| {
            self.udp += 1;
            self.udp
        });
        (self.all, udp)
    }

    /// When a frame stamped `stamp` (by the kernel, CLOCK_REALTIME) arrived, on Instant's clock;
    /// `now` holds both clocks as read for this batch.
    #[inline]
    fn arrived(&mut self, stamp: Option<Duration>, now: &mut (Instant, Duration)) -> Instant {
        // When the kernel received it (the element may have been off the CPU since): the
        // queue and the delay count from there, never before the frame ahead.
        // A stamp from another clock (a sender's monotonic departure time kept across the
        // veth) or more than a second old is not an arrival time: read time instead.
        if stamp.is_some_and(|t| t > now.1) {
            // It arrived after the clocks were read (the element was off the CPU during this
            // batch, say): read them again, or it would be placed at the earlier reading and
            // released early (a lab test saw a 10 ms delay deliver in under 8.5 ms).
            *now = clocks();
        }
        let (mono, real) = *now;
        let arrived = match stamp {
            Some(t) if t <= real && real - t < Duration::from_secs(1) => {
                mono.checked_sub(real - t).unwrap_or(mono)
            }
            _ => mono,
        };
        let arrived = self.last.map_or(arrived, |l: Instant| l.max(arrived));
        self.last = Some(arrived);
        arrived
    }
}

/// Sends what the class scheduler serves by `until` into the delay line, counting each
/// class's sends.
fn serve(sched: &mut Sched<Waiting>, until: Instant, line: &mut Line, out: &mut Out) {
    sched.serve(until, |k, depart, w| {
        if let Some(cc) = out.c.classes.get(k) {
            let (bytes, segs) = crate::pathmodel::wire(&w.frame);
            cc[C_SENT_PACKETS].fetch_add(segs.max(1), Ordering::Relaxed);
            cc[C_SENT_BYTES].fetch_add(bytes, Ordering::Relaxed);
        }
        out.place(line, &w.frame, w.arrival, w.udp, depart);
    });
}

/// Admits a frame that arrived at `arrived` to the class scheduler, after what left the
/// classes' queues before it; counts its class's arrival and the verdict.
#[inline]
fn admit(
    sched: &mut Sched<Waiting>,
    line: &mut Line,
    out: &mut Out,
    arrived: Instant,
    info: FrameInfo,
    w: Waiting,
) {
    // What left the classes' queues before this frame arrived, then the frame.
    serve(sched, arrived, line, out);
    let udp = w.udp;
    let a = sched.admit(arrived, info.wire, info.segments.max(1), info.dscp, w, line.rng());
    out.found(a.total_bytes, a.total_packets);
    if let Some(cc) = out.c.classes.get(a.class) {
        cc[C_ARRIVALS].fetch_add(1, Ordering::Relaxed);
        cc[C_FOUND_PACKETS].fetch_add(a.found_packets, Ordering::Relaxed);
        let i = match a.drop {
            None => C_ENQUEUED,
            Some(QueueDrop::Early) => C_EARLY,
            Some(QueueDrop::Forced) => C_FORCED,
            Some(QueueDrop::Tail) => C_TAIL,
        };
        cc[i].fetch_add(1, Ordering::Relaxed);
    }
    match a.drop {
        Some(why) => out.queue_drop(why, udp),
        None => out.add(Q_ENQUEUED, 1),
    }
}

/// Waits up to `wait` for a frame on `rx`: is there one to read?
fn readable(rx: libc::c_int, wait: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    let mut pfd = libc::pollfd {
        fd: rx,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd owned here; a timeout; no signal mask change.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    r > 0
}

fn forward(rx: libc::c_int, tx: libc::c_int, props: Props, c: Arc<Shared>) {
    // Wake at a frame's release time, not up to 50 µs later (the default timer slack).
    // SAFETY: prctl on this thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let mut sched: Option<Sched<Waiting>> = props.classes.clone().map(Sched::new);
    let mut line = Line::new(props, Rng::seeded());
    let mut out = Out {
        tx,
        c,
        heap: BinaryHeap::new(),
        held: 0,
        seq: 0,
        late: LateCount::default(),
        udp_late: LateCount::default(),
        delaying: line.props.delay_us > 0 || line.props.jitter_us > 0,
    };
    let mut arrivals = Arrivals::default();
    let mut buf = vec![0u8; FRAME_MAX];
    while !STOP.load(Ordering::Relaxed) {
        out.reload(&mut line);
        let now = Instant::now();
        if let Some(s) = &mut sched {
            serve(s, now, &mut line, &mut out);
        }
        let mut wait = out.release_due(now);
        if let Some(t) = sched.as_ref().and_then(|s| s.next_start()) {
            wait = wait.min(t.saturating_duration_since(now));
        }
        if !readable(rx, wait) {
            continue;
        }
        // The clocks now, to place each frame's kernel arrival time (CLOCK_REALTIME) on Instant's.
        let mut clocks_now = clocks();
        for _ in 0..64 {
            let Some((n, stamp)) = recv_stamped(rx, &mut buf) else {
                break;
            };
            let frame = &buf[..n];
            let arrived = arrivals.arrived(stamp, &mut clocks_now);
            let udp = is_udp(frame);
            let arrival = arrivals.number(udp);
            out.received(frame, udp);
            if let Some(burst) = line.lose() {
                out.lost(burst, udp);
                continue;
            }
            let (wire, segments) = crate::pathmodel::wire(frame);
            let info = FrameInfo {
                wire,
                segments,
                dscp: crate::pathmodel::dscp(frame),
            };
            if let Some(s) = &mut sched {
                let w = Waiting {
                    frame: frame.to_vec(),
                    arrival,
                    udp,
                };
                admit(s, &mut line, &mut out, arrived, info, w);
                continue;
            }
            let (depart, found) = line.enqueue(arrived, info);
            if let Some((bytes, packets)) = found {
                out.found(bytes, packets);
            }
            match depart {
                Err(why) => out.queue_drop(why, udp),
                Ok(start) => {
                    if found.is_some() {
                        out.add(Q_ENQUEUED, 1);
                    }
                    out.place(&mut line, frame, arrival, udp, start);
                }
            }
        }
    }
}

fn snapshot(cfg: &Config, shared: &[Arc<Shared>; 2]) -> Vec<Counters> {
    (0..2)
        .map(|i| {
            let v = |k: usize| shared[i].v[k].load(Ordering::Relaxed);
            Counters {
                from: cfg.ends[i].clone(),
                to: cfg.ends[1 - i].clone(),
                generation: v(GENERATION),
                received: v(RECEIVED),
                forwarded: v(FORWARDED),
                dropped: v(DROPPED),
                delayed: v(DELAYED),
                reordered: v(REORDERED),
                duplicated: v(DUPLICATED),
                send_errors: v(SEND_ERRORS),
                overflow: v(OVERFLOW),
                rx_drops: v(RX_DROPS),
                loss_bursts: v(LOSS_BURSTS),
                corrupted: v(CORRUPTED),
                corrupt_skipped: v(CORRUPT_SKIPPED),
                tcp_acks: v(TCP_ACKS),
                tcp_sack_acks: v(TCP_SACK_ACKS),
                queue: (cfg.props[i].queue.is_some() || cfg.props[i].classes.is_some()).then(|| {
                    let n = v(Q_ARRIVALS).max(1) as f64;
                    QueueCounters {
                        enqueued: v(Q_ENQUEUED),
                        early_drops: v(Q_EARLY),
                        forced_drops: v(Q_FORCED),
                        tail_drops: v(Q_TAIL),
                        found_mean_bytes: v(Q_FOUND_BYTES) as f64 / n,
                        found_peak_bytes: v(Q_FOUND_PEAK),
                        found_mean_packets: v(Q_FOUND_PACKETS) as f64 / n,
                    }
                }),
                udp: UdpCounters {
                    received: v(UDP_RECEIVED),
                    dropped: v(UDP_DROPPED),
                    reordered: v(UDP_REORDERED),
                    duplicated: v(UDP_DUPLICATED),
                    corrupted: v(UDP_CORRUPTED),
                    queue_dropped: v(UDP_QUEUE_DROPPED),
                },
                classes: cfg.props[i]
                    .classes
                    .iter()
                    .flat_map(|s| s.classes.iter())
                    .zip(&shared[i].classes)
                    .map(|(k, cc)| {
                        let v = |j: usize| cc[j].load(Ordering::Relaxed);
                        ClassCounters {
                            class: k.name.clone(),
                            dscp: k.dscp.clone(),
                            rate_bps: k.rate_bps,
                            limit: k.limit,
                            enqueued: v(C_ENQUEUED),
                            early_drops: v(C_EARLY),
                            forced_drops: v(C_FORCED),
                            tail_drops: v(C_TAIL),
                            sent_packets: v(C_SENT_PACKETS),
                            sent_bytes: v(C_SENT_BYTES),
                            found_mean_packets: v(C_FOUND_PACKETS) as f64 / v(C_ARRIVALS).max(1) as f64,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

fn write_counters(cfg: &Config, c: &[Counters]) {
    let tmp = cfg.counters.with_extension("tmp");
    if std::fs::write(&tmp, serde_json::to_vec_pretty(c).expect("serializable")).is_ok() {
        let _ = std::fs::rename(&tmp, &cfg.counters);
    }
}

/// Reads an element's counters file (both directions).
pub fn read_counters(path: &std::path::Path) -> Option<Vec<Counters>> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Runs an element until SIGTERM or SIGINT (`netrig lab element CONFIG`, in the element's
/// namespace).
pub fn run(cfg: &Config) -> Result<(), String> {
    run_from(cfg, None)
}

/// A configuration re-read on SIGHUP: the same element (link, interfaces, ends), its own queue
/// unchanged (it is the direction's rate); else refused, naming what differs.
pub fn reloadable(old: &Config, new: &Config) -> Result<(), String> {
    if new.link != old.link
        || new.ifaces != old.ifaces
        || new.ends != old.ends
        || new.counters != old.counters
    {
        return Err(format!(
            "not the configuration of this element (link {}, interfaces {:?})",
            old.link, old.ifaces
        ));
    }
    for i in 0..2 {
        if new.props[i].queue != old.props[i].queue || new.props[i].classes != old.props[i].classes {
            return Err(format!(
                "{} → {}: the element's own queue and rate are not changed by a reload",
                old.ends[i],
                old.ends[1 - i]
            ));
        }
    }
    Ok(())
}

/// [`run`], re-reading `path` on SIGHUP: each direction takes its new properties between
/// batches and acknowledges the configuration's generation in the counters file.
pub fn run_from(cfg: &Config, path: Option<&std::path::Path>) -> Result<(), String> {
    // SAFETY: the handlers only store to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_hup as *const () as libc::sighandler_t);
    }
    let fds = [packet_socket(&cfg.ifaces[0])?, packet_socket(&cfg.ifaces[1])?];
    let shared = [0, 1].map(|i| {
        Arc::new(Shared {
            classes: (0..cfg.props[i].classes.as_ref().map_or(0, |s| s.classes.len()))
                .map(|_| Default::default())
                .collect(),
            ..Default::default()
        })
    });
    for s in &shared {
        s.v[GENERATION].store(cfg.generation, Ordering::Relaxed);
    }
    write_counters(cfg, &snapshot(cfg, &shared));
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let (rx, tx, p, c) = (fds[i], fds[1 - i], cfg.props[i].clone(), shared[i].clone());
            std::thread::spawn(move || forward(rx, tx, p, c))
        })
        .collect();
    while !STOP.load(Ordering::Relaxed) && threads.iter().all(|t| !t.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        if let (true, Some(path)) = (RELOAD.swap(false, Ordering::SeqCst), path) {
            // Bounded read; a bad file is reported in the log and the element carries on as it was.
            let new = std::fs::read(path)
                .map_err(|e| format!("{}: {e}", path.display()))
                .and_then(|t| {
                    if t.len() > 1 << 20 {
                        return Err("over 1 MiB".into());
                    }
                    serde_json::from_slice::<Config>(&t).map_err(|e| e.to_string())
                })
                .and_then(|n| reloadable(cfg, &n).map(|_| n));
            match new {
                Ok(n) => {
                    for (sh, p) in shared.iter().zip(&n.props) {
                        *sh.next.lock().unwrap_or_else(|p| p.into_inner()) = Some((n.generation, p.clone()));
                        sh.pending.store(true, Ordering::Release);
                    }
                    eprintln!(
                        "path element of link {}: generation {} read",
                        cfg.link, n.generation
                    );
                }
                Err(e) => eprintln!("path element of link {}: reload refused: {e}", cfg.link),
            }
        }
        for i in 0..2 {
            shared[i].v[RX_DROPS].fetch_add(socket_drops(fds[i]), Ordering::Relaxed);
        }
        write_counters(cfg, &snapshot(cfg, &shared));
    }
    for i in 0..2 {
        shared[i].v[RX_DROPS].fetch_add(socket_drops(fds[i]), Ordering::Relaxed);
    }
    STOP.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
    write_counters(cfg, &snapshot(cfg, &shared));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p: Props) -> Line {
        Line::new(p, Rng::new(42))
    }

    #[test]
    fn delay_and_jitter_never_reorder() {
        let mut l = line(Props {
            delay_us: 10_000,
            jitter_us: 5_000,
            ..Default::default()
        });
        let t0 = Instant::now();
        let mut prev = t0;
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_micros(i * 10);
            let f = l.admit(now, 1);
            assert_eq!(f.release.len(), 1);
            let at = f.release[0];
            assert!(at >= prev, "frame {i} released before the one ahead");
            assert!(at >= now + Duration::from_micros(5_000));
            prev = at;
        }
    }

    #[test]
    fn loss_duplication_and_reordering_happen_at_their_rates() {
        let mut l = line(Props {
            delay_us: 1_000,
            loss: 0.1,
            duplicate: 0.05,
            reorder: 0.2,
            ..Default::default()
        });
        let now = Instant::now();
        let (mut lost, mut dup, mut early) = (0, 0, 0);
        let n = 100_000;
        for _ in 0..n {
            let f = l.admit(now, 3);
            match f.release.len() {
                0 => lost += 1,
                2 => dup += 1,
                _ => {}
            }
            if f.reordered {
                early += 1;
                assert_eq!(f.release[0], now, "a reordered frame skips the delay");
            }
        }
        let near = |got: usize, p: f64| {
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            (got as f64 - n as f64 * p).abs() < 5.0 * sd
        };
        assert!(near(lost, 0.1), "lost {lost}");
        assert!(near(dup, 0.9 * 0.05), "duplicated {dup}");
        assert!(near(early, 0.9 * 0.2), "reordered {early}");
    }

    #[test]
    fn late_frames_are_counted_as_a_receiver_counts_out_of_order() {
        let mut l = LateCount::default();
        // Sent in the order 1 4 2 3 5: 2 and 3 arrive below the highest seen.
        let late: Vec<bool> = [1, 4, 2, 3, 5].iter().map(|&s| l.sent(s)).collect();
        assert_eq!(late, vec![false, false, true, true, false]);
    }

    #[test]
    fn udp_frames_are_recognised_over_both_families() {
        let mut f = vec![0u8; 10 + 14 + 40 + 8];
        f[22] = 0x08;
        f[23] = 0x00;
        f[24 + 9] = 17;
        assert!(is_udp(&f));
        f[24 + 9] = 6;
        assert!(!is_udp(&f));
        f[22] = 0x86;
        f[23] = 0xdd;
        f[24 + 6] = 17;
        assert!(is_udp(&f));
        assert!(!is_udp(&f[..20]));
    }

    #[test]
    fn a_frame_skipping_an_empty_delay_line_is_not_counted_reordered() {
        let mut l = line(Props {
            delay_us: 1_000,
            reorder: 1.0,
            ..Default::default()
        });
        assert!(!l.admit(Instant::now(), 0).reordered);
        assert!(l.admit(Instant::now(), 1).reordered);
    }

    #[test]
    fn a_frame_is_delayed_from_its_departure_from_the_element_s_queue() {
        let mut l = line(Props {
            delay_us: 10_000,
            queue: Some(QueueCfg {
                rate_bps: 12_000_000,
                bytes: false,
                limit: 2,
                red: None,
            }),
            ..Default::default()
        });
        let t = Instant::now();
        let f = FrameInfo {
            wire: 1500,
            segments: 1,
            dscp: None,
        };
        let a = l.admit_frame(t, 0, f);
        let b = l.admit_frame(t, 1, f);
        assert_eq!(a.release, vec![t + Duration::from_millis(11)]);
        assert_eq!(b.release, vec![t + Duration::from_millis(12)]);
        assert_eq!(b.found, Some((1500, 1)));
        let c = l.admit_frame(t, 2, f);
        assert_eq!(c.dropped, Some(Dropped::Queue(QueueDrop::Tail)));
        assert!(c.release.is_empty());
    }

    #[test]
    fn loss_bursts_are_counted_at_their_first_frame() {
        // Good → bad at once, never back: one burst however long.
        let mut l = line(Props {
            gemodel: Some(GeModel {
                p: 1.0,
                r: 0.0,
                bad_loss: 1.0,
                good_loss: 0.0,
            }),
            ..Default::default()
        });
        let t = Instant::now();
        let fates: Vec<Fate> = (0..5).map(|_| l.admit(t, 0)).collect();
        assert_eq!(fates[0].dropped, None, "the first frame finds the good state");
        assert!(fates[1..].iter().all(|f| f.dropped == Some(Dropped::Loss)));
        let bursts: Vec<bool> = fates.iter().map(|f| f.burst).collect();
        assert_eq!(bursts, vec![false, true, false, false, false]);
    }

    #[test]
    fn the_delay_line_releases_the_earliest_first() {
        let t = Instant::now();
        let mut h = BinaryHeap::new();
        for (i, ms) in [5u64, 1, 3, 1].iter().enumerate() {
            h.push(Held {
                at: t + Duration::from_millis(*ms),
                seq: i as u64,
                frame: vec![],
                arrival: None,
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| h.pop().map(|x| x.seq)).collect();
        assert_eq!(order, vec![1, 3, 2, 0]);
    }

    #[test]
    fn new_props_keep_the_frames_in_the_delay_line_and_never_reorder() {
        let mut l = line(Props {
            delay_us: 20_000,
            ..Props::default()
        });
        let t0 = Instant::now();
        let ms = |n: u64| Duration::from_millis(n);
        assert_eq!(l.admit(t0, 0).release, [t0 + ms(20)]);
        l.set_props(Props {
            delay_us: 5_000,
            loss: 0.0,
            ..Props::default()
        });
        assert_eq!(l.props.delay_us, 5_000);
        // Not before the frame ahead (held until 20 ms)...
        assert_eq!(l.admit(t0 + ms(1), 1).release, [t0 + ms(20)]);
        // ...then the new delay.
        assert_eq!(l.admit(t0 + ms(30), 0).release, [t0 + ms(35)]);
        l.set_props(Props {
            delay_us: 5_000,
            loss: 1.0,
            ..Props::default()
        });
        assert_eq!(l.admit(t0 + ms(40), 0).dropped, Some(Dropped::Loss));
    }

    #[test]
    fn a_reload_of_another_element_or_of_its_queue_is_refused() {
        let cfg = Config {
            link: "a-b".into(),
            ifaces: ["to-a".into(), "to-b".into()],
            ends: ["a".into(), "b".into()],
            props: Default::default(),
            counters: "/tmp/x.json".into(),
            generation: 0,
        };
        let mut n = cfg.clone();
        n.props[0].delay_us = 5;
        n.generation = 1;
        assert!(reloadable(&cfg, &n).is_ok());
        let mut other = n.clone();
        other.link = "a-c".into();
        assert!(reloadable(&cfg, &other)
            .unwrap_err()
            .contains("not the configuration"));
        let mut q = n.clone();
        q.props[1].queue = Some(QueueCfg {
            rate_bps: 1_000_000,
            bytes: false,
            limit: 10,
            red: None,
        });
        assert!(reloadable(&cfg, &q)
            .unwrap_err()
            .starts_with("b → a: the element's own queue"));
    }
}
