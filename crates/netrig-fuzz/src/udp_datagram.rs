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
use netrig_metrics::{Arrival, SeqTracker, Timing};
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
    let mut far = 0u64;
    if let Some(h) = input.sent_hint {
        t.sent_total_hint(h);
    }
    let mut seen: HashSet<u64> = HashSet::new();
    let mut highest: Option<u64> = None;
    let (mut accounted, mut news, mut dups, mut stray, mut untimed) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut implausible = 0u64;
    let mut prev_live = t.live();
    for b in &input.buffers {
        // The bytes of the buffer as the socket would hand them over.
        let mut whole = Vec::new();
        for d in &b.datagrams {
            match d {
                Dgram::Raw(bytes) => whole.extend_from_slice(bytes),
                Dgram::Ours { seq, stamp, pad } => {
                    let h = DatagramHeader {
                        test_id: input.test_id,
                        flow: input.flow,
                        seq: *seq,
                        stamp_ns: *stamp,
                    };
                    whole.extend_from_slice(&h.encode());
                    whole.resize(whole.len() + usize::from(*pad), 0xa5);
                }
                Dgram::Near { back, stamp } => {
                    let seq = highest.unwrap_or(0).wrapping_sub(*back as i64 as u64);
                    let h = DatagramHeader {
                        test_id: input.test_id,
                        flow: input.flow,
                        seq,
                        stamp_ns: *stamp,
                    };
                    whole.extend_from_slice(&h.encode());
                }
                Dgram::Hello => {
                    whole.extend_from_slice(&DATA_MAGIC);
                    whole.resize(whole.len() + 28, 0);
                }
                Dgram::OtherFlow { seq } => {
                    let h = DatagramHeader {
                        test_id: input.test_id,
                        flow: input.flow.wrapping_add(1),
                        seq: *seq,
                        stamp_ns: 0,
                    };
                    whole.extend_from_slice(&h.encode());
                }
            }
        }
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
                // Further ahead than a sender can have sent: not accounted.
                assert!(
                    h.seq
                        > highest
                            .unwrap_or(0)
                            .saturating_add(netrig_metrics::udp_seq::PLAUSIBLE_SLACK),
                    "{} refused as implausible",
                    h.seq
                );
                implausible += 1;
                assert_eq!(t.implausible(), implausible);
                continue;
            }
            accounted += 1;
            let in_window = highest.is_none_or(|top| h.seq > top || top - h.seq < SEQ_WINDOW);
            match r {
                Arrival::New => {
                    news += 1;
                    let off = |z: u64| {
                        (i128::from(b.rx_ns) - i128::from(z) - i128::from(h.sent_ns())).unsigned_abs()
                    };
                    if timing == Timing::Shared {
                        untimed += 1;
                    } else if input
                        .zero
                        .is_some_and(|z| off(z) > u128::from(netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS))
                    {
                        untimed += 1;
                        far += 1;
                    }
                    assert!(
                        !(seen.contains(&h.seq) && in_window),
                        "duplicate of {} within the window taken as new",
                        h.seq
                    );
                }
                Arrival::Implausible => unreachable!("handled above"),
                Arrival::Duplicate => {
                    dups += 1;
                    assert!(
                        seen.contains(&h.seq),
                        "{} called a duplicate on its first arrival",
                        h.seq
                    );
                }
            }
            seen.insert(h.seq);
            highest = Some(highest.map_or(h.seq, |top| top.max(h.seq)));
            assert_eq!(live.received + live.duplicates, accounted);
            assert_eq!(
                (live.received, live.duplicates, live.untimed, live.far),
                (news, dups, untimed, far)
            );
            assert!(live.far <= live.untimed);
            assert!(live.out_of_order <= live.received);
            assert!(t.outside_window() <= live.out_of_order);
            assert_eq!(live.expected, highest.map_or(0, |top| top.saturating_add(1)));
            assert!(live.d_count <= news - untimed);
            assert!(
                live.jitter_ns.is_finite() && live.jitter_ns >= 0.0,
                "jitter {}",
                live.jitter_ns
            );
            assert!(live.d_sum_ns.is_finite() && live.d_sum_ns >= 0.0);
            let iv = live.since(&prev_live);
            assert!(iv.received <= live.received && iv.lost <= live.expected - prev_live.expected);
            assert!(iv.far <= iv.untimed && iv.untimed <= iv.received);
            prev_live = live;
        }
    }
    let s = t.summary();
    let expected = highest
        .map_or(0, |top| top.saturating_add(1))
        .max(input.sent_hint.unwrap_or(0));
    assert_eq!(s.expected, expected);
    assert_eq!(s.received, news);
    assert_eq!(s.duplicates, dups);
    assert_eq!(s.highest_seq, highest);
    assert_eq!(s.lost, expected.saturating_sub(news));
    assert!(s.lost <= s.expected);
    assert!(
        s.loss_pct.is_finite() && (0.0..=100.0).contains(&s.loss_pct),
        "loss {} %",
        s.loss_pct
    );
    assert!(s.jitter_us.is_finite() && s.jitter_us >= 0.0);
    let _ = stray;
}
