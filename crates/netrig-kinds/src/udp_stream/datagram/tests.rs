//! The two headers as written and read, against the tracker and against
//! datagrams a real iperf3 3.21 client sent.

use super::*;
use netrig_metrics::Arrival;

const ZERO: u64 = 1_800_000_000_000_000_000; // the receiver's realtime at its zero
const SIZE: usize = 64;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// An iperf3 datagram of SIZE bytes: datagram `seq` (from 0) sent at `wall_ns`.
fn iperf3_datagram(format: DatagramFormat, seq: u64, wall_ns: u64) -> Vec<u8> {
    let mut d = vec![0x42u8; SIZE];
    write_iperf3(format, &mut d, seq, wall_ns);
    d
}

/// Feeds `d` to `reader` and `tracker` as the workload does; the arrival.
fn feed(reader: &mut Reader, tracker: &mut SeqTracker, d: &[u8], rx_ns: u64) -> Option<Arrival> {
    match reader.read(d, rx_ns, true, tracker) {
        Incoming::Data(h) => Some(tracker.on_arrival(h.seq, h.sent_ns, rx_ns, h.timing)),
        _ => None,
    }
}

#[test]
fn iperf3_header_layout_both_widths() {
    // 12 s 345,678 µs (and 9 ns iperf3 cannot carry), datagram 0: iperf3's 1.
    let at = 12_345_678_009;
    let d = iperf3_datagram(DatagramFormat::Iperf3, 0, at);
    assert_eq!(&d[..12], &[0, 0, 0, 12, 0, 0x05, 0x46, 0x4e, 0, 0, 0, 1]);
    assert_eq!(&d[12..], &[0x42; SIZE - 12], "the payload is left as it was");
    let d = iperf3_datagram(DatagramFormat::Iperf3Counter64, (1 << 40) - 1, at);
    assert_eq!(
        &d[..16],
        &[0, 0, 0, 12, 0, 0x05, 0x46, 0x4e, 0, 0, 1, 0, 0, 0, 0, 0]
    );
    // The 32-bit counter wraps as iperf3's does.
    let d = iperf3_datagram(DatagramFormat::Iperf3, u64::from(u32::MAX), at);
    assert_eq!(&d[8..12], &[0, 0, 0, 0]);
    for (format, wide) in [
        (DatagramFormat::Iperf3, false),
        (DatagramFormat::Iperf3Counter64, true),
    ] {
        let d = iperf3_datagram(format, 41, at);
        let h = UdpHeader::decode(&d, wide).unwrap();
        assert_eq!((h.sec, h.usec, h.seq), (12, 345_678, 42));
        assert_eq!(UdpHeader::len(wide), format.header_len() as usize);
        assert_eq!(UdpHeader::decode(&d[..UdpHeader::len(wide) - 1], wide), None);
    }
    assert!(!batches(DatagramFormat::Iperf3) && !batches(DatagramFormat::Iperf3Counter64));
    assert!(batches(DatagramFormat::Netrig));
}

/// The same arrivals, in netrig's header and in iperf3's, leave the tracker
/// with the same figures: a gap (datagram 3 late), a reordering, a
/// duplicate, a loss at the end, and jitter from microsecond stamps.
#[test]
fn a_receiver_counts_iperf3_datagrams_as_netrig_ones() {
    let order = [0u64, 1, 2, 4, 5, 3, 6, 6, 8];
    let sent = |s: u64| 5_000_000 + s * 100_000; // since the sender's zero, ns
    let recv = |i: usize, s: u64| ZERO + sent(s) + 40_000 + (i as u64 % 3) * 7_000;
    for format in [DatagramFormat::Iperf3, DatagramFormat::Iperf3Counter64] {
        let mut netrig = SeqTracker::new();
        netrig.set_zero(ZERO);
        let mut nr = Reader::new(DatagramFormat::Netrig, SIZE, 7, 0, ZERO);
        let mut iperf = SeqTracker::new();
        iperf.set_zero(ZERO);
        let mut ir = Reader::new(format, SIZE, 7, 0, ZERO);
        for (i, &s) in order.iter().enumerate() {
            let mut d = vec![0u8; SIZE];
            write_netrig(&mut d, 7, 0, s, sent(s));
            let a = feed(&mut nr, &mut netrig, &d, recv(i, s));
            // The iperf3 sender's clock: any epoch (here an uptime's).
            let d = iperf3_datagram(format, s, 65_000_000_000_000 + sent(s));
            assert_eq!(feed(&mut ir, &mut iperf, &d, recv(i, s)), a, "datagram {s}");
        }
        let (n, i) = (netrig.summary(), iperf.summary());
        assert_eq!(n, i, "{format:?}");
        assert_eq!((i.received, i.lost, i.out_of_order, i.duplicates), (8, 1, 1, 1));
        assert!(i.jitter_us > 1.0, "jitter is taken: {}", i.jitter_us);
        assert_eq!(netrig.live().untimed, 0);
        assert_eq!(iperf.live().untimed, 0);
    }
}

#[test]
fn set_up_and_foreign_datagrams() {
    let mut r = Reader::new(DatagramFormat::Iperf3, SIZE, 7, 0, ZERO);
    let t = SeqTracker::new();
    for m in [UDP_CONNECT_MSG, UDP_CONNECT_REPLY, UDP_LEGACY_REPLY] {
        assert_eq!(r.read(&m, ZERO, true, &t), Incoming::SetUp);
    }
    assert_eq!(r.read(b"1234", ZERO, true, &t), Incoming::Stray);
    assert_eq!(r.read(&[], ZERO, true, &t), Incoming::Stray);
    // Of another size than the test's, or iperf3's 0 (it counts from 1).
    let d = iperf3_datagram(DatagramFormat::Iperf3, 0, 1_000_000_000);
    assert_eq!(r.read(&d[..SIZE - 1], ZERO, true, &t), Incoming::Stray);
    let mut zero = d.clone();
    zero[8..12].copy_from_slice(&[0; 4]);
    assert_eq!(r.read(&zero, ZERO, true, &t), Incoming::Stray);
    assert!(matches!(r.read(&d, ZERO, true, &t), Incoming::Data(h) if h.seq == 0 && !h.one_way));
    // A GRO buffer's shared receive time: untimed.
    assert!(matches!(r.read(&d, ZERO, false, &t), Incoming::Data(h) if h.timing == Timing::Shared));
    // netrig's reader: its hello is set-up, an iperf3 datagram or another test's is stray.
    let mut n = Reader::new(DatagramFormat::Netrig, SIZE, 7, 0, ZERO);
    assert_eq!(n.read(b"NRGD and the rest", ZERO, true, &t), Incoming::SetUp);
    assert_eq!(n.read(&d, ZERO, true, &t), Incoming::Stray);
    let mut other = vec![0u8; SIZE];
    write_netrig(&mut other, 8, 0, 0, 0);
    assert_eq!(n.read(&other, ZERO, true, &t), Incoming::Stray);
    write_netrig(&mut other, 7, 0, 0, 0);
    assert!(matches!(n.read(&other, ZERO, true, &t), Incoming::Data(h) if h.one_way));
}

#[test]
fn the_32_bit_counter_is_widened_across_its_wrap() {
    const SPAN: u64 = 1 << 32;
    // The tracker's highest is iperf3's 2^32 - 1: iperf3's next wraps to 0.
    let h = Some(SPAN - 2);
    assert_eq!(widen(0, false, h), Some(SPAN - 1));
    assert_eq!(widen(5, false, h), Some(SPAN + 4));
    // A late one from before the wrap, after it.
    assert_eq!(widen(SPAN - 3, false, Some(SPAN + 10)), Some(SPAN - 4));
    // Before anything, and with the 64-bit counter, as they come.
    assert_eq!(widen(1, false, None), Some(0));
    assert_eq!(widen(0, false, None), None);
    assert_eq!(widen(SPAN + 1, true, Some(0)), Some(SPAN));
    assert_eq!(widen(0, true, Some(0)), None);
    // Whatever a peer sends, no panic.
    for (s, w, h) in [
        (u64::MAX, true, Some(u64::MAX)),
        (u64::from(u32::MAX), false, Some(u64::MAX)),
    ] {
        let _ = widen(s, w, h);
    }
}

#[test]
fn iperf3_stamps_are_rebased_on_the_first_and_far_ones_are_judged() {
    let mut t = SeqTracker::new();
    t.set_zero(ZERO);
    let mut r = Reader::new(DatagramFormat::Iperf3, SIZE, 7, 0, ZERO);
    let at = |s: u64| 3_000_000_000 + s * 1_000_000;
    for s in 0..3 {
        let d = iperf3_datagram(DatagramFormat::Iperf3, s, at(s));
        feed(&mut r, &mut t, &d, ZERO + 2_000_000_000 + s * 1_000_000);
    }
    // Two minutes off the first's stamp: far, untimed, counted.
    let d = iperf3_datagram(DatagramFormat::Iperf3, 3, at(3) + 120_000_000_000);
    assert_eq!(feed(&mut r, &mut t, &d, ZERO + 2_003_000_000), Some(Arrival::New));
    let live = t.live();
    assert_eq!((live.received, live.far, live.untimed), (4, 1, 1));
    assert_eq!(t.summary().jitter_us, 0.0, "constant transit: no jitter");
    // A stamp before the first's by more than the time since zero: 0, not a wrap.
    assert_eq!(r.iperf3.rebase(0, ZERO), 0);
}

/// Datagrams an iperf3 3.21 client sent to `iperf3 -s` (`iperf3 -c
/// 127.0.0.1 -u -b 1M -t 1 -l 64`, and with `--udp-counters-64bit`), read
/// with an AF_PACKET socket on loopback: its UDP connect message, then its
/// first five datagrams. Its stamps are CLOCK_MONOTONIC (an uptime of
/// 65,662 s), about 512 µs apart.
const REAL_32: [&str; 6] = [
    "39383736",
    "0001007e000ee52f0000000108972cc20e0fb81ce033e9bd75ae63f7c0406e49efd276c4e3568025bfef7589a2db9e738342fc66a4f8cc040d33009c9a1aa7da",
    "0001007e000ee7440000000208972cc20e0fb81ce033e9bd75ae63f7c0406e49efd276c4e3568025bfef7589a2db9e738342fc66a4f8cc040d33009c9a1aa7da",
    "0001007e000ee9430000000308972cc20e0fb81ce033e9bd75ae63f7c0406e49efd276c4e3568025bfef7589a2db9e738342fc66a4f8cc040d33009c9a1aa7da",
    "0001007e000eeb3f0000000408972cc20e0fb81ce033e9bd75ae63f7c0406e49efd276c4e3568025bfef7589a2db9e738342fc66a4f8cc040d33009c9a1aa7da",
    "0001007e000eed400000000508972cc20e0fb81ce033e9bd75ae63f7c0406e49efd276c4e3568025bfef7589a2db9e738342fc66a4f8cc040d33009c9a1aa7da",
];
const REAL_64: [&str; 6] = [
    "39383736",
    "000100800007702100000000000000018d99ea97578791daaea7bbf4ee433a1fd55b10b3de5ab354d43542548f55cb87e563e7588325abba86ac45d6946e1bc1",
    "000100800007722500000000000000028d99ea97578791daaea7bbf4ee433a1fd55b10b3de5ab354d43542548f55cb87e563e7588325abba86ac45d6946e1bc1",
    "000100800007741b00000000000000038d99ea97578791daaea7bbf4ee433a1fd55b10b3de5ab354d43542548f55cb87e563e7588325abba86ac45d6946e1bc1",
    "000100800007761f00000000000000048d99ea97578791daaea7bbf4ee433a1fd55b10b3de5ab354d43542548f55cb87e563e7588325abba86ac45d6946e1bc1",
    "000100800007781e00000000000000058d99ea97578791daaea7bbf4ee433a1fd55b10b3de5ab354d43542548f55cb87e563e7588325abba86ac45d6946e1bc1",
];

#[test]
fn real_iperf3_datagrams_are_read_and_counted() {
    for (format, real) in [
        (DatagramFormat::Iperf3, REAL_32),
        (DatagramFormat::Iperf3Counter64, REAL_64),
    ] {
        let mut t = SeqTracker::new();
        t.set_zero(ZERO);
        let mut r = Reader::new(format, SIZE, 7, 0, ZERO);
        let mut sent = vec![];
        for (i, h) in real.iter().enumerate() {
            let d = hex(h);
            let rx = ZERO + 1_000_000_000 + i as u64 * 512_000;
            match r.read(&d, rx, true, &t) {
                Incoming::SetUp => assert_eq!(i, 0, "only the connect message is set-up"),
                Incoming::Data(h) => {
                    assert_eq!(h.seq, i as u64 - 1, "{format:?}: iperf3 counts from 1");
                    sent.push(h.sent_ns);
                    assert_eq!(t.on_arrival(h.seq, h.sent_ns, rx, h.timing), Arrival::New);
                }
                Incoming::Stray => panic!("{format:?}: datagram {i} taken for stray"),
            }
        }
        let s = t.summary();
        assert_eq!(
            (s.received, s.lost, s.out_of_order, s.expected),
            (5, 0, 0, 5),
            "{format:?}"
        );
        // The stamps' spacing survives the rebasing: about 512 µs, to the µs.
        for w in sent.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                (490_000..=540_000).contains(&gap) && gap % 1_000 == 0,
                "{format:?}: {gap} ns"
            );
        }
        // Our own sender's header for the same time and number is iperf3's byte for byte.
        let d = hex(real[1]);
        let h = UdpHeader::decode(&d, counters64(format)).unwrap();
        let wall = h.nanos();
        let ours = iperf3_datagram(format, 0, wall);
        let n = format.header_len() as usize;
        assert_eq!(&ours[..n], &d[..n], "{format:?}");
    }
}
