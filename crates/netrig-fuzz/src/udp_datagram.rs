//! What a UDP receiver does with each datagram that reaches its socket:
//! skip a repeated data hello, parse the 28-byte header
//! (`DatagramHeader::decode`), count another test's or flow's datagram as
//! stray, and account for its sequence number in `SeqTracker::on_arrival`
//! (as crates/netrig-engine/src/udp.rs does, GRO buffers split by segment
//! size included).
//!
//! Invariants: no panic; the tracker never allocates after construction
//! (counted around each call by [`crate::alloc_count`]); its counts agree
//! with a model: received + duplicates = datagrams accounted, received =
//! arrivals it called new, duplicates only of sequence numbers that arrived before
//! and every duplicate within the window detected, out of order ≤ received,
//! expected = highest + 1, lost = expected − received (never negative) ≤
//! expected, loss in [0, 100] %, jitter finite and not negative; with the
//! receiver's time zero set, every datagram whose send time is more than
//! `MAX_STAMP_SKEW_NS` from its receive time since that zero (and not
//! already untimed by a shared stamp) counted as untimed and far, no other.

use crate::alloc_count;
use arbitrary::Arbitrary;
use netrig_metrics::udp_seq::SEQ_WINDOW;
use netrig_metrics::{Arrival, SeqLive, SeqTracker, Timing};
use netrig_proto::{DatagramHeader, DATA_MAGIC};
use std::collections::HashSet;

#[derive(Arbitrary, Debug)]
struct Input {
    test_id: u64,
    flow: u32,
    sent_hint: Option<u64>,
    /// The receiver's clock at its time zero (`SeqTracker::set_zero`).
    zero: Option<u64>,
    buffers: Vec<Buffer>,
}

/// One received buffer: one datagram, or with GRO several of `seg` bytes.
#[derive(Arbitrary, Debug)]
struct Buffer {
    gro_seg: Option<u16>,
    /// Whether the kernel gave this buffer a receive timestamp of its own.
    own_rx: bool,
    rx_ns: u64,
    datagrams: Vec<Dgram>,
}

#[derive(Arbitrary, Debug)]
enum Dgram {
    /// Any bytes at all.
    Raw(Vec<u8>),
    /// A header of this test and flow.
    Ours { seq: u64, stamp: u64, pad: u8 },
    /// One near the highest sequence number so far: reordering, duplicates,
    /// the window's edge.
    Near { back: i32, stamp: u64 },
    /// A repeated data hello.
    Hello,
    /// Another flow's.
    OtherFlow { seq: u64 },
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    let mut t = SeqTracker::new();
    if let Some(z) = input.zero {
        t.set_zero(z);
    }
    if let Some(h) = input.sent_hint {
        t.sent_total_hint(h);
    }
    let mut m = Model {
        prev_live: t.live(),
        ..Model::default()
    };
    let mut stray = 0u64;
    for b in &input.buffers {
        // The bytes of the buffer as the socket would hand them over.
        let whole = buffer_bytes(&input, b, m.highest);
        let len = whole.len();
        let seg = b
            .gro_seg
            .map(usize::from)
            .filter(|g| *g > 0)
            .unwrap_or(len.max(1));
        let alone = b.own_rx && len <= seg;
        for d in whole.chunks(seg) {
            if d.len() >= 4 && d[..4] == DATA_MAGIC {
                continue;
            }
            let Some(h) = DatagramHeader::decode(d) else {
                assert!(d.len() < DatagramHeader::LEN);
                stray += 1;
                continue;
            };
            assert_eq!(
                h.encode()[..],
                d[..DatagramHeader::LEN],
                "decode is not encode's inverse"
            );
            if h.test_id != input.test_id || h.flow != input.flow {
                stray += 1;
                continue;
            }
            let timing = h.timing(alone);
            let before = alloc_count::allocations();
            let r = t.on_arrival(h.seq, h.sent_ns(), b.rx_ns, timing);
            let live = t.live();
            assert_eq!(alloc_count::allocations(), before, "on_arrival allocated");
            if r == Arrival::Implausible {
                m.implausible(&h, &t);
                continue;
            }
            let far = timing != Timing::Shared
                && input.zero.is_some_and(|z| {
                    let off = (i128::from(b.rx_ns) - i128::from(z) - i128::from(h.sent_ns())).unsigned_abs();
                    off > u128::from(netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS)
                });
            m.arrival(h.seq, r, timing == Timing::Shared, far);
            m.agrees(&t, live);
        }
    }
    m.summary_agrees(&t, input.sent_hint);
    let _ = stray;
}

/// The bytes of buffer `b` as the socket would hand them over: its
/// datagrams one after another (`highest`: the highest sequence number
/// accounted so far, which `Near` datagrams are near).
fn buffer_bytes(input: &Input, b: &Buffer, highest: Option<u64>) -> Vec<u8> {
    let header = |flow: u32, seq: u64, stamp_ns: u64| {
        DatagramHeader {
            test_id: input.test_id,
            flow,
            seq,
            stamp_ns,
        }
        .encode()
    };
    let mut whole = Vec::new();
    for d in &b.datagrams {
        match d {
            Dgram::Raw(bytes) => whole.extend_from_slice(bytes),
            Dgram::Ours { seq, stamp, pad } => {
                whole.extend_from_slice(&header(input.flow, *seq, *stamp));
                whole.resize(whole.len() + usize::from(*pad), 0xa5);
            }
            Dgram::Near { back, stamp } => {
                let seq = highest.unwrap_or(0).wrapping_sub(*back as i64 as u64);
                whole.extend_from_slice(&header(input.flow, seq, *stamp));
            }
            Dgram::Hello => {
                whole.extend_from_slice(&DATA_MAGIC);
                whole.resize(whole.len() + 28, 0);
            }
            Dgram::OtherFlow { seq } => {
                whole.extend_from_slice(&header(input.flow.wrapping_add(1), *seq, 0));
            }
        }
    }
    whole
}

/// What the tracker's counts must be, kept apart from it.
#[derive(Default)]
struct Model {
    seen: HashSet<u64>,
    highest: Option<u64>,
    accounted: u64,
    news: u64,
    dups: u64,
    untimed: u64,
    far: u64,
    implausible: u64,
    prev_live: SeqLive,
}

impl Model {
    /// A datagram the tracker refused as implausible: further ahead than a
    /// sender can have sent, not accounted.
    fn implausible(&mut self, h: &DatagramHeader, t: &SeqTracker) {
        assert!(
            h.seq
                > self
                    .highest
                    .unwrap_or(0)
                    .saturating_add(netrig_metrics::udp_seq::PLAUSIBLE_SLACK),
            "{} refused as implausible",
            h.seq
        );
        self.implausible += 1;
        assert_eq!(t.implausible(), self.implausible);
    }

    /// A datagram the tracker accounted as `r`: `shared`, its stamp shared
    /// with others (untimed); `far`, its send time too far from its arrival.
    fn arrival(&mut self, seq: u64, r: Arrival, shared: bool, far: bool) {
        self.accounted += 1;
        let in_window = self.highest.is_none_or(|top| seq > top || top - seq < SEQ_WINDOW);
        match r {
            Arrival::New => {
                self.news += 1;
                if shared || far {
                    self.untimed += 1;
                }
                if far {
                    self.far += 1;
                }
                assert!(
                    !(self.seen.contains(&seq) && in_window),
                    "duplicate of {seq} within the window taken as new"
                );
            }
            Arrival::Implausible => unreachable!("handled above"),
            Arrival::Duplicate => {
                self.dups += 1;
                assert!(
                    self.seen.contains(&seq),
                    "{seq} called a duplicate on its first arrival"
                );
            }
        }
        self.seen.insert(seq);
        self.highest = Some(self.highest.map_or(seq, |top| top.max(seq)));
    }

    /// The tracker's running counts (`live`) agree with the model's.
    fn agrees(&mut self, t: &SeqTracker, live: SeqLive) {
        assert_eq!(live.received + live.duplicates, self.accounted);
        assert_eq!(
            (live.received, live.duplicates, live.untimed, live.far),
            (self.news, self.dups, self.untimed, self.far)
        );
        assert!(live.far <= live.untimed);
        assert!(live.out_of_order <= live.received);
        assert!(t.outside_window() <= live.out_of_order);
        assert_eq!(live.expected, self.highest.map_or(0, |top| top.saturating_add(1)));
        assert!(live.d_count <= self.news - self.untimed);
        assert!(
            live.jitter_ns.is_finite() && live.jitter_ns >= 0.0,
            "jitter {}",
            live.jitter_ns
        );
        assert!(live.d_sum_ns.is_finite() && live.d_sum_ns >= 0.0);
        let iv = live.since(&self.prev_live);
        assert!(iv.received <= live.received && iv.lost <= live.expected - self.prev_live.expected);
        assert!(iv.far <= iv.untimed && iv.untimed <= iv.received);
        self.prev_live = live;
    }

    /// The tracker's summary agrees with the model's counts (`sent_hint`:
    /// what the sender said it sent).
    fn summary_agrees(&self, t: &SeqTracker, sent_hint: Option<u64>) {
        let s = t.summary();
        let expected = self
            .highest
            .map_or(0, |top| top.saturating_add(1))
            .max(sent_hint.unwrap_or(0));
        assert_eq!(s.expected, expected);
        assert_eq!(s.received, self.news);
        assert_eq!(s.duplicates, self.dups);
        assert_eq!(s.highest_seq, self.highest);
        assert_eq!(s.lost, expected.saturating_sub(self.news));
        assert!(s.lost <= s.expected);
        assert!(
            s.loss_pct.is_finite() && (0.0..=100.0).contains(&s.loss_pct),
            "loss {} %",
            s.loss_pct
        );
        assert!(s.jitter_us.is_finite() && s.jitter_us >= 0.0);
    }
}
