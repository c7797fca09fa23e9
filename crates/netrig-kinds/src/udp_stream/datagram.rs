//! The header a udp-stream datagram starts with, netrig's or iperf3's
//! ([`DatagramFormat`]): the sender writes it, the receiver reads it into
//! what the flow's [`SeqTracker`](netrig_metrics::SeqTracker) takes.
//!
//! netrig's header (`netrig_proto::datagram`) carries the test id and flow,
//! a sequence number from 0 and the sender's time since its zero, with
//! marks for stamps shared by a batch.
//!
//! iperf3's (`iperf_udp.c`) carries the sender's clock as seconds and
//! microseconds and a sequence number from 1, 32 bits wide or, with
//! `--udp-counters-64bit`, 64. It has no test id: iperf3's data sockets are
//! connected, so every datagram of the test's size that reaches the flow's
//! socket is the peer's. Nor has it marks, so a sender in iperf3's format
//! sends every datagram on its own, stamped just before its own send(2), as
//! iperf3 does by default: no UDP GSO and no sendmmsg batches (see
//! [`batches`]). A receiver may still take datagrams in GRO-coalesced
//! buffers: their shared receive time makes them untimed, as for netrig's
//! header.
//!
//! iperf3 3.21 stamps with CLOCK_MONOTONIC (older ones with the wall
//! clock), whose epoch this end cannot know, and its receiver only takes
//! differences of transit times (RFC 3550 jitter), which any clock serves.
//! netrig stamps with the wall clock. A receiver here rebases the sender's
//! stamps on the first datagram's transit ([`Iperf3Rx`]): jitter, which
//! only takes differences, is unchanged, a stamp that strays more than a
//! minute from the first's is still judged far, and no one-way delay is
//! taken from them.

use netrig_metrics::{SeqTracker, Timing};
use netrig_proto::datagram::{DatagramHeader, STAMP_MARKS};
use netrig_proto::iperf3::{UdpHeader, UDP_CONNECT_MSG, UDP_CONNECT_REPLY, UDP_LEGACY_REPLY};
use netrig_proto::spec::DatagramFormat;
use netrig_proto::DATA_MAGIC;
use std::time::Instant;

/// iperf3's header with the 64-bit counter.
fn counters64(format: DatagramFormat) -> bool {
    format == DatagramFormat::Iperf3Counter64
}

/// Whether a sender in `format` may batch datagrams (UDP GSO, sendmmsg
/// with one stamp per call): only netrig's header can mark a stamp shared.
pub(super) fn batches(format: DatagramFormat) -> bool {
    format.is_netrig()
}

/// Writes netrig's header at the start of `buf`, which the caller sized to
/// the datagram (at least the header, by spec).
pub(super) fn write_netrig(buf: &mut [u8], test_id: u64, flow: u32, seq: u64, stamp_ns: u64) {
    DatagramHeader {
        test_id,
        flow,
        seq,
        stamp_ns,
    }
    .write(buf);
}

/// Writes the header of datagram `seq` (this flow's count of datagrams
/// sent before it, from 0) stamped now, its own time: netrig's with the
/// time since `t0`, iperf3's with the wall clock.
pub(super) fn write_own(
    format: DatagramFormat,
    buf: &mut [u8],
    test_id: u64,
    flow: u32,
    seq: u64,
    t0: Instant,
) {
    if format.is_netrig() {
        let ts = t0.elapsed().as_nanos() as u64 & !STAMP_MARKS;
        write_netrig(buf, test_id, flow, seq, ts);
    } else {
        write_iperf3(format, buf, seq, now_realtime_ns());
    }
}

/// iperf3's header for datagram `seq` (from 0; iperf3 counts from 1, and
/// the 32-bit counter wraps as iperf3's does) sent at `wall_ns`.
fn write_iperf3(format: DatagramFormat, buf: &mut [u8], seq: u64, wall_ns: u64) {
    UdpHeader {
        sec: (wall_ns / 1_000_000_000) as u32,
        usec: (wall_ns % 1_000_000_000 / 1_000) as u32,
        seq: seq.wrapping_add(1),
    }
    .encode(buf, counters64(format));
}

/// The wall clock, ns since the Unix epoch.
pub(super) fn now_realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What a receiver makes of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Incoming {
    /// Set-up traffic (netrig's data hello, iperf3's UDP connect messages):
    /// ignored silently.
    SetUp,
    /// Not this flow's: counted as stray.
    Stray,
    /// A datagram of the flow, for the tracker.
    Data(Datagram),
}

/// A datagram of the flow, as the tracker takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Datagram {
    /// Sequence number from 0.
    pub seq: u64,
    /// The send time, ns, on the sender's clock since its zero (netrig's
    /// header) or rebased on this end's (iperf3's; see [`Iperf3Rx`]).
    pub sent_ns: u64,
    pub timing: Timing,
    /// The send time is the sender's own clock since its zero, so that a
    /// one-way delay may be taken from it (netrig's header only).
    pub one_way: bool,
}

/// A receiving flow's reading of its datagrams.
#[derive(Debug, Clone)]
pub(super) struct Reader {
    format: DatagramFormat,
    /// The datagram size of the test (iperf3's format: others are stray).
    size: usize,
    test_id: u64,
    flow: u32,
    iperf3: Iperf3Rx,
}

impl Reader {
    /// A reader for flow `flow` of test `test_id`, whose receiver's clock
    /// (realtime ns) read `zero_ns` at its time zero.
    pub fn new(format: DatagramFormat, size: usize, test_id: u64, flow: u32, zero_ns: u64) -> Self {
        Reader {
            format,
            size,
            test_id,
            flow,
            iperf3: Iperf3Rx::new(zero_ns),
        }
    }

    /// Reads datagram `d`, received at `rx_ns` (realtime), a stamp of its
    /// own if `own_rx`, for the flow's `tracker` (iperf3's 32-bit counter
    /// is widened near its highest sequence number). Never panics, whatever
    /// `d` holds.
    pub fn read(&mut self, d: &[u8], rx_ns: u64, own_rx: bool, tracker: &SeqTracker) -> Incoming {
        if self.format.is_netrig() {
            return self.read_netrig(d, own_rx);
        }
        if d.len() == 4
            && [UDP_CONNECT_MSG, UDP_CONNECT_REPLY, UDP_LEGACY_REPLY]
                .iter()
                .any(|m| d == m)
        {
            return Incoming::SetUp;
        }
        let wide = counters64(self.format);
        if d.len() != self.size {
            return Incoming::Stray;
        }
        let Some(h) = UdpHeader::decode(d, wide) else {
            return Incoming::Stray;
        };
        let highest = if wide { None } else { tracker.summary().highest_seq };
        let Some(seq) = widen(h.seq, wide, highest) else {
            return Incoming::Stray; // iperf3 counts from 1: 0 is no datagram of its
        };
        Incoming::Data(Datagram {
            seq,
            sent_ns: self.iperf3.rebase(h.nanos(), rx_ns),
            timing: if own_rx { Timing::Own } else { Timing::Shared },
            one_way: false,
        })
    }

    fn read_netrig(&self, d: &[u8], own_rx: bool) -> Incoming {
        if d.len() >= 4 && d[..4] == DATA_MAGIC {
            return Incoming::SetUp; // a repeated hello from set-up
        }
        match DatagramHeader::decode(d) {
            Some(h) if h.test_id == self.test_id && h.flow == self.flow => Incoming::Data(Datagram {
                seq: h.seq,
                sent_ns: h.sent_ns(),
                timing: h.timing(own_rx),
                one_way: true,
            }),
            _ => Incoming::Stray,
        }
    }
}

/// iperf3's sequence number `seq` (from 1) as the tracker's (from 0); a
/// 32-bit one widened to the 64-bit value nearest the tracker's `highest`,
/// so that a counter that wraps (after 2^32 datagrams, 71 minutes at a
/// million a second) goes on counting. `None` for iperf3's 0, which no
/// iperf3 sender sends.
fn widen(seq: u64, wide: bool, highest: Option<u64>) -> Option<u64> {
    if wide {
        return seq.checked_sub(1);
    }
    const SPAN: u64 = 1 << 32;
    // The tracker's highest in iperf3's numbering.
    let Some(h) = highest.map(|h| h.saturating_add(1)) else {
        return seq.checked_sub(1);
    };
    let at = (h & !(SPAN - 1)) | (seq & (SPAN - 1));
    let candidates = [at.checked_sub(SPAN), Some(at), at.checked_add(SPAN)];
    let near = candidates
        .into_iter()
        .flatten()
        .min_by_key(|c| c.abs_diff(h))
        .unwrap_or(at);
    near.checked_sub(1)
}

/// A receiving flow's rebasing of iperf3 stamps: the first datagram's send
/// time is taken as its receive time (both since this end's zero), and
/// every later one keeps its distance from the first's. Transit times then
/// differ from the true ones by one constant, which RFC 3550's jitter does
/// not see; the tracker's test of far stamps (a minute) holds against the
/// first datagram's.
#[derive(Debug, Clone)]
pub(super) struct Iperf3Rx {
    /// This end's clock (realtime ns) at its time zero.
    zero_ns: u64,
    /// What to add to a sender's stamp: set by the first datagram.
    offset: Option<i128>,
}

impl Iperf3Rx {
    fn new(zero_ns: u64) -> Self {
        Iperf3Rx {
            zero_ns,
            offset: None,
        }
    }

    /// The send time of a datagram stamped `stamp_ns` (the sender's clock)
    /// and received at `rx_ns` (this end's realtime), in ns since this
    /// end's zero (0 at the earliest: the tracker takes no negative times).
    fn rebase(&mut self, stamp_ns: u64, rx_ns: u64) -> u64 {
        let since_zero = i128::from(rx_ns) - i128::from(self.zero_ns);
        let offset = *self.offset.get_or_insert(since_zero - i128::from(stamp_ns));
        let t = i128::from(stamp_ns) + offset;
        // Below the marks' bits, as netrig's stamps are.
        t.clamp(0, i128::from(!STAMP_MARKS)) as u64
    }
}

#[cfg(test)]
mod tests;
