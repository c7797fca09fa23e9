//! The path element's models, pure of sockets (docs/LAB.md, "The path element"):
//! Gilbert–Elliott loss, the element's own rate and queue (drop-tail or RED, weighted per DSCP),
//! and corruption of a frame (its checksum completed first).
//!
//! Frames here are what the element reads from its AF_PACKET sockets: a 10-byte virtio-net
//! header, then the Ethernet frame.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The most bytes one direction of the path element holds: its delay line's bound, and apart
/// its class queues' bound ([`crate::pathsched`]) (64 MiB: 1 Gbit/s for 0.5 s).
pub const LINE_BYTES: usize = 64 << 20;

/// A small, fast generator for the element's random choices (xorshift64*), seeded from the
/// kernel.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn seeded() -> Self {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).expect("the kernel's random numbers");
        Rng::new(u64::from_le_bytes(b))
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Gilbert–Elliott loss with netem's parameters (`loss gemodel p r 1-h 1-k`), as probabilities
/// (0..1): `p` good → bad, `r` bad → good, `bad_loss` (netem's 1-h) the loss in the bad state,
/// `good_loss` (netem's 1-k) the loss in the good state.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GeModel {
    pub p: f64,
    pub r: f64,
    pub bad_loss: f64,
    pub good_loss: f64,
}

impl GeModel {
    /// The long-run fraction of frames lost: π_G·(1-k) + π_B·(1-h), π_B = p/(p+r).
    pub fn mean_loss(&self) -> f64 {
        if self.p + self.r == 0.0 {
            return self.good_loss;
        }
        let bad = self.p / (self.p + self.r);
        (1.0 - bad) * self.good_loss + bad * self.bad_loss
    }
}

/// The chain's state. As netem's `loss_gilb_ell`: a frame's fate is decided by the state it
/// finds, after which the chain moves.
#[derive(Debug, Clone, Default)]
pub struct Ge {
    pub m: GeModel,
    pub bad: bool,
}

impl Ge {
    pub fn new(m: GeModel) -> Self {
        Ge { m, bad: false }
    }

    /// Is the next frame lost?
    pub fn lose(&mut self, rng: &mut Rng) -> bool {
        if self.bad {
            if rng.unit() < self.m.r {
                self.bad = false;
            }
            rng.unit() < self.m.bad_loss
        } else {
            if rng.unit() < self.m.p {
                self.bad = true;
            }
            rng.unit() < self.m.good_loss
        }
    }
}

/// RED thresholds of one class: the average queue (in the queue's unit) below `min` admits
/// everything, between `min` and `max` drops with a probability rising to `max_p`, at or above
/// `max` drops every frame.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Thresholds {
    pub min: f64,
    pub max: f64,
    pub max_p: f64,
}

/// RED (Floyd & Jacobson 1993, as tc-red and Cisco's `random-detect`): one average queue, an
/// EWMA of the queue each arriving frame finds, with `weight`; thresholds per DSCP value (WRED:
/// Cisco's `random-detect dscp-based`), `default` for the others.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RedCfg {
    pub weight: f64,
    pub default: Thresholds,
    /// By DSCP value (0..63).
    #[serde(default)]
    pub dscp: BTreeMap<u8, Thresholds>,
}

/// The element's own queue, served at `rate_bps` (wire bytes: the Ethernet frame with its
/// 14-byte header, as htb counts; a GSO super-frame as its segments), with a limit in packets or
/// bytes: drop-tail, or RED before it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QueueCfg {
    pub rate_bps: u64,
    /// The limit counts bytes (else packets); so do RED's thresholds.
    pub bytes: bool,
    pub limit: u64,
    #[serde(default)]
    pub red: Option<RedCfg>,
}

/// Why the queue refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueDrop {
    /// RED, the average between min and max: a random early drop.
    Early,
    /// RED, the average at or above max: every frame dropped.
    Forced,
    /// The queue full (its limit).
    Tail,
}

/// How long `wire` bytes take on the wire at `rate_bps`.
pub fn serialise_at(rate_bps: u64, wire: u64) -> Duration {
    Duration::from_nanos((wire as u128 * 8 * 1_000_000_000 / rate_bps.max(1) as u128) as u64)
}

/// A queue served at a rate, modelled by departure times: a frame admitted at `now` leaves when
/// the frames ahead of it have been serialised and it has itself (its departure is when it is
/// handed to the delay line). The backlog is the frames not yet departed.
#[derive(Debug)]
pub struct Queue {
    pub cfg: QueueCfg,
    /// Departure time, size (wire bytes) and segments of every frame not yet departed, in order.
    backlog: VecDeque<(Instant, u64, u64)>,
    backlog_bytes: u64,
    backlog_packets: u64,
    busy_until: Option<Instant>,
    red: RedState,
}

/// What the queue did with a frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Queued {
    /// When it leaves the queue (the end of its serialisation); None: dropped.
    pub depart: Result<Instant, QueueDrop>,
    /// The backlog it found, in bytes and packets.
    pub found_bytes: u64,
    pub found_packets: u64,
}

/// RED's typical frame, for the average's decay over an idle period (tc-red's `avpkt`).
pub const AVPKT: f64 = 1000.0;

/// RED's state over one queue: the average queue (an EWMA of the queue each arriving frame
/// finds) and, per DSCP, the frames admitted since its last drop (-1: the average below min).
#[derive(Debug, Clone)]
pub struct RedState {
    avg: f64,
    count: [i64; 64],
}

impl Default for RedState {
    fn default() -> Self {
        RedState {
            avg: 0.0,
            count: [-1; 64],
        }
    }
}

impl RedState {
    /// The average queue now.
    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// A frame with `dscp` arrives and finds `q` (in the queue's unit). `idle`: how long the
    /// queue has been empty, if it is (the average then decays as if a frame of [`AVPKT`] bytes
    /// had found it empty every `avpkt_time`: Floyd & Jacobson's idle-time rule). `Some`: the
    /// frame is dropped, and why.
    pub fn judge(
        &mut self,
        red: &RedCfg,
        q: f64,
        idle: Option<Duration>,
        avpkt_time: Duration,
        dscp: Option<u8>,
        rng: &mut Rng,
    ) -> Option<QueueDrop> {
        let w = red.weight;
        match idle {
            Some(idle) => {
                let m = idle.as_secs_f64() / avpkt_time.as_secs_f64().max(1e-9);
                self.avg *= (1.0 - w).powf(m.min(1e9));
            }
            None => self.avg = (1.0 - w) * self.avg + w * q,
        }
        let th = dscp
            .and_then(|d| red.dscp.get(&d))
            .copied()
            .unwrap_or(red.default);
        let c = &mut self.count[dscp.unwrap_or(0) as usize & 63];
        if self.avg >= th.max {
            *c = 0;
            return Some(QueueDrop::Forced);
        }
        if self.avg >= th.min {
            *c += 1;
            let pb = th.max_p * (self.avg - th.min) / (th.max - th.min).max(1e-9);
            let left = 1.0 - *c as f64 * pb;
            let pa = if left <= 0.0 { 1.0 } else { pb / left };
            if rng.unit() < pa {
                *c = 0;
                return Some(QueueDrop::Early);
            }
        } else {
            *c = -1;
        }
        None
    }
}

impl Queue {
    pub fn new(cfg: QueueCfg) -> Self {
        Queue {
            cfg,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            backlog_packets: 0,
            busy_until: None,
            red: RedState::default(),
        }
    }

    fn serialise(&self, wire: u64) -> Duration {
        serialise_at(self.cfg.rate_bps, wire)
    }

    /// RED's average queue now.
    pub fn avg(&self) -> f64 {
        self.red.avg
    }

    /// A frame of `wire` bytes with DSCP `dscp` arrives at `now` (one packet).
    pub fn admit(&mut self, now: Instant, wire: u64, dscp: Option<u8>, rng: &mut Rng) -> Queued {
        self.admit_segments(now, wire, 1, dscp, rng)
    }

    /// A frame of `wire` bytes that is `segs` packets on the wire (a GSO super-frame: its
    /// segments; the queue's packets count them) arrives at `now`.
    pub fn admit_segments(
        &mut self,
        now: Instant,
        wire: u64,
        segs: u64,
        dscp: Option<u8>,
        rng: &mut Rng,
    ) -> Queued {
        while self.backlog.front().is_some_and(|(d, _, _)| *d <= now) {
            let (_, b, n) = self.backlog.pop_front().expect("peeked");
            self.backlog_bytes -= b;
            self.backlog_packets -= n;
        }
        let (found_bytes, found_packets) = (self.backlog_bytes, self.backlog_packets);
        let q = if self.cfg.bytes {
            found_bytes as f64
        } else {
            found_packets as f64
        };
        let out = |depart| Queued {
            depart,
            found_bytes,
            found_packets,
        };
        if let Some(red) = &self.cfg.red {
            // Idle since the last departure: the average decays (Floyd & Jacobson's idle-time rule).
            let idle = match self.busy_until {
                Some(idle) if found_packets == 0 && now > idle => Some(now.duration_since(idle)),
                _ => None,
            };
            let avpkt = self.serialise(AVPKT as u64);
            if let Some(d) = self.red.judge(red, q, idle, avpkt, dscp, rng) {
                return out(Err(d));
            }
        }
        let fits = if self.cfg.bytes {
            found_bytes + wire <= self.cfg.limit
        } else {
            found_packets + segs <= self.cfg.limit
        };
        if !fits {
            return out(Err(QueueDrop::Tail));
        }
        let start = self.busy_until.map_or(now, |b| b.max(now));
        let depart = start + self.serialise(wire);
        self.busy_until = Some(depart);
        self.backlog.push_back((depart, wire, segs));
        self.backlog_bytes += wire;
        self.backlog_packets += segs;
        out(Ok(depart))
    }
}

const VNET: usize = 10;
const ETH: usize = 14;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;

/// Offset (in the frame after the virtio-net header) of the IP header and its protocol, and the
/// offset of the transport header: None for a frame that is not IPv4 or IPv6.
fn ip(f: &[u8]) -> Option<(u8, usize)> {
    let e = f.get(VNET..)?;
    match e.get(12..14)? {
        [0x08, 0x00] => {
            let ihl = (*e.get(ETH)? & 0x0f) as usize * 4;
            (ihl >= 20).then_some((*e.get(ETH + 9)?, ETH + ihl))
        }
        [0x86, 0xdd] => Some((*e.get(ETH + 6)?, ETH + 40)),
        _ => None,
    }
}

/// A pure TCP acknowledgement (ACK set, no data; IPv4 or IPv6 without extension headers):
/// Some(whether it carries a SACK option, kind 5); None for any other frame.
pub fn pure_ack(f: &[u8]) -> Option<bool> {
    let (proto, off) = ip(f)?;
    if proto != 6 {
        return None;
    }
    let e = f.get(VNET..)?;
    let be16 = |i: usize| Some(u16::from_be_bytes([*e.get(i)?, *e.get(i + 1)?]) as usize);
    // Where the IP packet ends, from its own length fields (not the frame's, which may be padded).
    let end = match e.get(12..14)? {
        [0x08, 0x00] => ETH + be16(ETH + 2)?,
        _ => ETH + 40 + be16(ETH + 4)?,
    };
    let t = e.get(off..)?;
    let doff = (*t.get(12)? >> 4) as usize * 4;
    if doff < 20 || t.get(13)? & 0x10 == 0 || end != off + doff {
        return None;
    }
    let opts = t.get(20..doff)?;
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            5 => return Some(true),
            _ => {
                let len = *opts.get(i + 1)? as usize;
                if len < 2 {
                    break;
                }
                i += len;
            }
        }
    }
    Some(false)
}

/// The frame's DSCP (IPv4 or IPv6), None for other frames.
pub fn dscp(f: &[u8]) -> Option<u8> {
    let e = f.get(VNET..)?;
    match e.get(12..14)? {
        [0x08, 0x00] => Some(e.get(ETH + 1)? >> 2),
        [0x86, 0xdd] => Some((((e.get(ETH)? & 0x0f) << 4) | (e.get(ETH + 1)? >> 4)) >> 2),
        _ => None,
    }
}

/// The frame's GSO type and segment size, from its virtio-net header (0: not a super-frame).
fn gso(f: &[u8]) -> (u8, u16) {
    match f.get(..VNET) {
        Some(h) => (h[1], u16::from_le_bytes([h[4], h[5]])),
        None => (0, 0),
    }
}

/// The bytes the frame puts on the wire (Ethernet header included, no FCS), as htb counts:
/// a GSO super-frame as the segments it becomes, each with its own headers.
pub fn wire_bytes(f: &[u8]) -> u64 {
    wire(f).0
}

/// The frame's bytes on the wire and the packets it is there (a GSO super-frame: its segments).
pub fn wire(f: &[u8]) -> (u64, u64) {
    let len = f.len().saturating_sub(VNET) as u64;
    let (ty, size) = gso(f);
    if ty == 0 || size == 0 {
        return (len, 1);
    }
    let Some((proto, l4)) = ip(f) else {
        return (len, 1);
    };
    let e = &f[VNET..];
    let l4_len = match proto {
        6 => e.get(l4 + 12).map_or(20, |b| (b >> 4) as usize * 4),
        _ => 8,
    };
    let hdr = (l4 + l4_len) as u64;
    if len <= hdr {
        return (len, 1);
    }
    let segs = (len - hdr).div_ceil(size as u64);
    (len + segs.saturating_sub(1) * hdr, segs)
}

/// Is this a GSO super-frame (one frame for many segments on the wire)?
pub fn is_gso(f: &[u8]) -> bool {
    gso(f).0 != 0
}

/// The Internet checksum's one's-complement sum of `b` (big-endian 16-bit words).
fn sum16(b: &[u8], mut s: u32) -> u32 {
    let mut it = b.chunks_exact(2);
    for w in &mut it {
        s += u16::from_be_bytes([w[0], w[1]]) as u32;
        s = (s & 0xffff) + (s >> 16);
    }
    if let [last] = it.remainder() {
        s += (*last as u32) << 8;
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// Completes a checksum the sender left to the device (VIRTIO_NET_HDR_F_NEEDS_CSUM: the field
/// holds the pseudo-header's sum), as the kernel's skb_checksum_help, and clears the flag, so
/// the receiver checks it rather than trusting it. Also clears DATA_VALID (checksum already
/// verified), which a changed frame no longer deserves. False when the header's offsets do not
/// fit the frame.
pub fn complete_checksum(f: &mut [u8]) -> bool {
    if f.len() < VNET {
        return false;
    }
    if f[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        let start = u16::from_le_bytes([f[6], f[7]]) as usize;
        let off = u16::from_le_bytes([f[8], f[9]]) as usize;
        let e = &mut f[VNET..];
        if start + off + 2 > e.len() {
            return false;
        }
        let s = sum16(&e[start..], 0);
        let c = !(s as u16);
        let c = if c == 0 { 0xffff } else { c };
        e[start + off..start + off + 2].copy_from_slice(&c.to_be_bytes());
    }
    f[0] &= !(VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID);
    true
}

/// Corrupts a frame as netem's `corrupt` (one random bit flipped), with the checksum completed
/// first: the bit is chosen among the bytes after the IP header (the transport header and
/// payload), so the frame still reaches the receiver's transport, whose checksum catches it.
/// Returns the byte offset flipped (in the Ethernet frame), or None for a frame that cannot be
/// corrupted so: not IPv4/IPv6, nothing after the IP header, or a GSO super-frame (whose
/// segments' checksums are computed later, by the receiver's side).
pub fn corrupt(f: &mut [u8], rng: &mut Rng) -> Option<usize> {
    if is_gso(f) {
        return None;
    }
    let (_, l4) = ip(f)?;
    let len = f.len() - VNET;
    if l4 >= len {
        return None;
    }
    if !complete_checksum(f) {
        return None;
    }
    let bit = l4 * 8 + ((rng.unit() * ((len - l4) * 8) as f64) as usize).min((len - l4) * 8 - 1);
    f[VNET + bit / 8] ^= 1 << (bit % 8);
    Some(bit / 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng() -> Rng {
        Rng::new(7)
    }

    /// Binomial-ish bound: |got - want| within `k` standard deviations of a mean of n draws.
    fn within(got: f64, want: f64, sd: f64, k: f64) -> bool {
        (got - want).abs() <= k * sd
    }

    #[test]
    fn gilbert_loss_has_the_model_s_mean_and_burst_length() {
        // The simple Gilbert model: p = 1 %, r = 25 %, every frame lost in the bad state.
        let m = GeModel {
            p: 0.01,
            r: 0.25,
            bad_loss: 1.0,
            good_loss: 0.0,
        };
        let mut g = Ge::new(m);
        let mut r = rng();
        let n = 1_000_000;
        let (mut lost, mut bursts, mut prev) = (0u64, 0u64, false);
        for _ in 0..n {
            let l = g.lose(&mut r);
            lost += l as u64;
            bursts += (l && !prev) as u64;
            prev = l;
        }
        let mean = m.mean_loss();
        assert!((mean - 0.01 / 0.26).abs() < 1e-12);
        // Losses come in bursts, so their variance is larger than the binomial's: a bound of
        // the binomial's sd times the mean burst length (4), 5 of them.
        let sd = (n as f64 * mean * (1.0 - mean)).sqrt() * 4.0;
        assert!(
            within(lost as f64, n as f64 * mean, sd, 5.0),
            "lost {lost} of {n}: mean {mean}"
        );
        // The mean burst length is 1/r = 4 frames.
        let burst = lost as f64 / bursts as f64;
        assert!((burst - 4.0).abs() < 0.2, "mean burst {burst}");
    }

    #[test]
    fn gilbert_elliott_loses_in_both_states_as_netem_does() {
        let m = GeModel {
            p: 0.05,
            r: 0.2,
            bad_loss: 0.5,
            good_loss: 0.01,
        };
        // π_B = 0.2; 0.8·0.01 + 0.2·0.5 = 0.108.
        assert!((m.mean_loss() - 0.108).abs() < 1e-12);
        let mut g = Ge::new(m);
        let mut r = rng();
        let n = 1_000_000;
        let lost = (0..n).filter(|_| g.lose(&mut r)).count() as f64;
        let sd = (n as f64 * 0.108 * 0.892).sqrt() * 3.0;
        assert!(within(lost, n as f64 * 0.108, sd, 5.0), "lost {lost}");
        // 1-h = 0 and 1-k = 0: nothing is ever lost.
        let mut g = Ge::new(GeModel {
            p: 0.5,
            r: 0.5,
            ..Default::default()
        });
        assert!((0..10_000).all(|_| !g.lose(&mut r)));
    }

    fn q(rate: u64, limit: u64, red: Option<RedCfg>) -> Queue {
        Queue::new(QueueCfg {
            rate_bps: rate,
            bytes: false,
            limit,
            red,
        })
    }

    #[test]
    fn the_queue_serialises_at_its_rate_and_drops_at_its_limit() {
        // 12 Mbit/s: a 1500-byte frame takes 1 ms.
        let mut qu = q(12_000_000, 10, None);
        let t = Instant::now();
        let mut r = rng();
        let mut departs = vec![];
        let mut tail = 0;
        for _ in 0..15 {
            match qu.admit(t, 1500, None, &mut r).depart {
                Ok(d) => departs.push(d),
                Err(QueueDrop::Tail) => tail += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(departs.len(), 10);
        assert_eq!(tail, 5);
        assert_eq!(departs[9] - t, Duration::from_millis(10));
        // After 3.5 ms three have left: 7 found, 3 admitted again.
        let later = t + Duration::from_micros(3_500);
        let a = qu.admit(later, 1500, None, &mut r);
        assert_eq!(a.found_packets, 7);
        assert_eq!(a.depart.unwrap() - t, Duration::from_millis(11));
        // An idle queue starts at once.
        let idle = t + Duration::from_secs(1);
        assert_eq!(
            qu.admit(idle, 1500, None, &mut r).depart.unwrap() - idle,
            Duration::from_millis(1)
        );
    }

    fn red(min: f64, max: f64) -> RedCfg {
        RedCfg {
            weight: 0.02,
            default: Thresholds { min, max, max_p: 0.1 },
            dscp: BTreeMap::new(),
        }
    }

    /// A sender at twice the rate for 2 s: how many frames each way of dropping took, and the
    /// mean queue the admitted found.
    fn overload(qu: &mut Queue, dscp: Option<u8>) -> (u64, u64, u64, f64) {
        let t = Instant::now();
        let mut r = rng();
        let (mut early, mut forced, mut tail, mut found, mut n) = (0, 0, 0, 0u64, 0u64);
        // 12 Mbit/s served, a 1500-byte frame every 0.5 ms offered.
        for i in 0..4_000u64 {
            let a = qu.admit(t + Duration::from_micros(i * 500), 1500, dscp, &mut r);
            match a.depart {
                Ok(_) => {
                    found += a.found_packets;
                    n += 1;
                }
                Err(QueueDrop::Early) => early += 1,
                Err(QueueDrop::Forced) => forced += 1,
                Err(QueueDrop::Tail) => tail += 1,
            }
        }
        (early, forced, tail, found as f64 / n as f64)
    }

    #[test]
    fn red_keeps_the_queue_short_where_drop_tail_fills_it() {
        let (e, f, t, tail_q) = overload(&mut q(12_000_000, 100, None), None);
        assert_eq!((e, f), (0, 0));
        assert!(t > 1500, "{t}");
        assert!(tail_q > 90.0, "drop-tail keeps its queue full: {tail_q}");
        let (e, _f, t, red_q) = overload(&mut q(12_000_000, 100, Some(red(10.0, 30.0))), None);
        assert!(e > 0, "early drops");
        assert_eq!(t, 0, "RED drops before the queue is full");
        assert!(red_q < 40.0, "RED's queue {red_q} against drop-tail's {tail_q}");
    }

    #[test]
    fn wred_drops_a_class_with_lower_thresholds_first() {
        let mut cfg = red(20.0, 60.0);
        cfg.dscp.insert(
            8,
            Thresholds {
                min: 5.0,
                max: 15.0,
                max_p: 0.5,
            },
        );
        let (_, _, _, be_q) = overload(&mut q(12_000_000, 100, Some(cfg.clone())), Some(0));
        let (_, _, _, cs1_q) = overload(&mut q(12_000_000, 100, Some(cfg)), Some(8));
        assert!(cs1_q < 18.0 && be_q > 18.0, "CS1 {cs1_q}, best effort {be_q}");
    }

    /// An IPv4 UDP frame with the virtio-net header: payload `n` bytes.
    fn udp4(n: usize, needs_csum: bool) -> Vec<u8> {
        let mut f = vec![0u8; VNET + ETH + 20 + 8 + n];
        f[VNET + 12] = 0x08;
        let ip = VNET + ETH;
        f[ip] = 0x45;
        f[ip + 1] = 0xb8; // DSCP 46 (EF)
        f[ip + 9] = 17;
        f[ip + 12..ip + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[ip + 16..ip + 20].copy_from_slice(&[198, 18, 0, 2]);
        let u = ip + 20;
        f[u + 4..u + 6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
        for (i, b) in f[u + 8..].iter_mut().enumerate() {
            *b = i as u8;
        }
        // The pseudo-header's sum, as the kernel leaves it for the device.
        let mut ph = vec![];
        ph.extend_from_slice(&f[ip + 12..ip + 20]);
        ph.extend_from_slice(&[0, 17]);
        ph.extend_from_slice(&((8 + n) as u16).to_be_bytes());
        let seed = sum16(&ph, 0) as u16;
        if needs_csum {
            f[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
            f[6..8].copy_from_slice(&((ETH + 20) as u16).to_le_bytes());
            f[8..10].copy_from_slice(&6u16.to_le_bytes());
            f[u + 6..u + 8].copy_from_slice(&seed.to_be_bytes());
        } else {
            let s = sum16(&f[u..], seed as u32);
            f[u + 6..u + 8].copy_from_slice(&(!(s as u16)).to_be_bytes());
        }
        f
    }

    /// An IPv4 (or IPv6) TCP segment with `opts` (padded to 4 bytes) and `data` bytes, ACK set,
    /// in a frame padded by `pad` bytes (Ethernet's minimum).
    fn tcp(v6: bool, opts: &[u8], data: usize, pad: usize) -> Vec<u8> {
        let olen = opts.len().div_ceil(4) * 4;
        let (iph, tcp_len) = (if v6 { 40 } else { 20 }, 20 + olen + data);
        let mut f = vec![0u8; VNET + ETH + iph + tcp_len + pad];
        let ip = VNET + ETH;
        if v6 {
            f[VNET + 12..VNET + 14].copy_from_slice(&[0x86, 0xdd]);
            f[ip] = 0x60;
            f[ip + 4..ip + 6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
            f[ip + 6] = 6;
        } else {
            f[VNET + 12] = 0x08;
            f[ip] = 0x45;
            f[ip + 2..ip + 4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
            f[ip + 9] = 6;
        }
        let t = ip + iph;
        f[t + 12] = ((20 + olen) / 4) as u8 * 16;
        f[t + 13] = 0x10;
        f[t + 20..t + 20 + opts.len()].copy_from_slice(opts);
        f
    }

    #[test]
    fn pure_acknowledgements_and_their_sack_option_are_recognised() {
        // NOP, NOP, timestamps (kind 8, 10 bytes): a plain acknowledgement.
        let ts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        // ... then SACK (kind 5) with one block.
        let mut sack = ts.to_vec();
        sack.extend_from_slice(&[1, 1, 5, 10, 0, 0, 0, 9, 0, 0, 0, 19]);
        for v6 in [false, true] {
            assert_eq!(pure_ack(&tcp(v6, &ts, 0, 0)), Some(false));
            assert_eq!(pure_ack(&tcp(v6, &sack, 0, 0)), Some(true));
            // Padding after the packet (a short frame) is not data.
            assert_eq!(pure_ack(&tcp(v6, &ts, 0, 6)), Some(false));
            // A segment with data is not a pure acknowledgement, nor is one without ACK.
            assert_eq!(pure_ack(&tcp(v6, &sack, 100, 0)), None);
            let mut syn = tcp(v6, &ts, 0, 0);
            let t = VNET + ETH + if v6 { 40 } else { 20 } + 13;
            syn[t] = 0x02;
            assert_eq!(pure_ack(&syn), None);
        }
        assert_eq!(pure_ack(&udp4(10, false)), None);
        // A truncated frame or an option running past the header is no panic.
        let f = tcp(false, &sack, 0, 0);
        for n in 0..f.len() {
            let _ = pure_ack(&f[..n]);
        }
        assert_eq!(pure_ack(&tcp(false, &[1, 1, 8, 0], 0, 0)), Some(false));
    }

    /// Does the UDP checksum verify (the sum over pseudo-header and datagram is 0xffff)?
    fn verifies(f: &[u8]) -> bool {
        let ip = VNET + ETH;
        let u = ip + 20;
        let mut ph = vec![];
        ph.extend_from_slice(&f[ip + 12..ip + 20]);
        ph.extend_from_slice(&[0, 17]);
        ph.extend_from_slice(&((f.len() - u) as u16).to_be_bytes());
        sum16(&f[u..], sum16(&ph, 0)) == 0xffff
    }

    #[test]
    fn a_checksum_left_to_the_device_is_completed_and_the_flag_cleared() {
        let done = udp4(101, false);
        assert!(verifies(&done));
        let mut partial = udp4(101, true);
        assert!(!verifies(&partial));
        assert!(complete_checksum(&mut partial));
        assert_eq!(partial[0], 0, "NEEDS_CSUM cleared");
        assert!(verifies(&partial));
        assert_eq!(partial[VNET..], done[VNET..]);
    }

    #[test]
    fn corruption_flips_one_bit_after_the_ip_header_that_the_checksum_catches() {
        let mut r = rng();
        for needs in [false, true] {
            for _ in 0..200 {
                let mut f = udp4(64, needs);
                // What the receiver would get uncorrupted: the checksum completed.
                let orig = udp4(64, false);
                let at = corrupt(&mut f, &mut r).expect("an IPv4 UDP frame");
                assert!(at >= ETH + 20, "flipped {at}: inside the headers that matter");
                let diff: u32 = f[VNET..]
                    .iter()
                    .zip(&orig[VNET..])
                    .map(|(a, b)| (a ^ b).count_ones())
                    .sum();
                assert_eq!(diff, 1, "one bit flipped");
                assert_eq!(f[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM, 0);
                assert!(!verifies(&f), "the receiver's checksum catches it");
            }
        }
        // Not IP (ARP), or a GSO super-frame: not corrupted.
        let mut arp = vec![0u8; VNET + 60];
        arp[VNET + 12..VNET + 14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(corrupt(&mut arp, &mut r), None);
        let mut g = udp4(3000, true);
        g[1] = 5; // VIRTIO_NET_HDR_GSO_UDP_L4
        g[4..6].copy_from_slice(&1472u16.to_le_bytes());
        assert_eq!(corrupt(&mut g, &mut r), None);
    }

    #[test]
    fn wire_bytes_count_a_super_frame_as_its_segments_and_dscp_is_read() {
        let f = udp4(1000, false);
        assert_eq!(wire_bytes(&f), (ETH + 20 + 8 + 1000) as u64);
        assert_eq!(dscp(&f), Some(46));
        let mut g = udp4(3000, true);
        g[1] = 5;
        g[4..6].copy_from_slice(&1000u16.to_le_bytes());
        // Three segments, each with its own 42 bytes of headers.
        assert_eq!(wire(&g), (3 * 42 + 3000, 3));
    }
}
