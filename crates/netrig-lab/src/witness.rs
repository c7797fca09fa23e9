//! The witness's delay check and loss probe (docs/LAB.md, "The witness"): pure functions that
//! say what a shaped direction's round trip and loss should be, how long a UDP probe must run for
//! a binomial bound, and when a measured figure is off enough to warn, naming the link.

use crate::steps::Direction;
use serde::{Deserialize, Serialize};

/// The delay check's tolerance: 10 % of the configured round trip, plus this floor. The floor
/// covers the unshaped path's own round trip (15–70 µs through veths and the element on this
/// project's 2-core VM) and a busy machine's late wake-ups.
pub const RTT_FLOOR_US: f64 = 1000.0;
/// The delay check's relative tolerance.
pub const RTT_TOLERANCE: f64 = 0.10;

/// How many binomial standard deviations the loss probe's count may be off the configured
/// share before it warns.
pub const LOSS_SIGMAS: f64 = 4.0;
/// Datagrams the probe's count may be off beyond the binomial bound: udp-stream's data hellos
/// (set-up datagrams the path also drops, not counted as sent data).
pub const LOSS_SLACK: f64 = 3.0;
/// The probe's datagram payload (bytes, `-m`).
pub const PROBE_BYTES: u32 = 512;
/// The probe's pace where the link has no rate of its own (bits/s of payload).
pub const PROBE_RATE_BPS: u64 = 20_000_000;

/// The UDP loss probe of one direction, configured beside measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LossProbe {
    /// udp-stream's pace (`-b`, bits/s of payload), datagram payload (`-m`) and length (s):
    /// `--no-gso`, so one datagram is one frame.
    pub rate_bps: u64,
    pub datagram_bytes: u32,
    pub length_s: f64,
    /// Datagrams sent and lost, as udp-stream counted them (absent when not measured).
    pub sent: Option<u64>,
    pub lost: Option<u64>,
    /// Lost / sent, percent.
    pub measured_pct: Option<f64>,
    /// The range (percent of `sent`) the count may fall in: the configured share ±
    /// `LOSS_SIGMAS` standard deviations and `LOSS_SLACK` datagrams.
    pub bound_low_pct: Option<f64>,
    pub bound_high_pct: Option<f64>,
    /// Of `lost`, the datagrams the receiving host's kernel dropped for a full socket buffer
    /// (`Udp.RcvbufErrors` + `Udp6.RcvbufErrors` in its namespace over the probe): a receiver
    /// descheduled on a busy machine, not the path. Left out of `measured_pct` and the bound's
    /// judgement; absent when the receiving end did not report its counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_dropped: Option<u64>,
}

fn delay_us(s: &crate::model::Shape) -> f64 {
    s.delay
        .as_deref()
        .and_then(|d| humantime::parse_duration(d).ok())
        .map_or(0.0, |d| d.as_micros() as f64)
}

/// The round trip the configured delays make from `d.from` to `d.to` and back: `d`'s delay
/// plus that of the direction back (the other end's egress on the same link or LAN), none when
/// neither direction has a delay.
///
/// On a LAN the round trip crosses four directions: what each end sends into the segment and
/// what the switch sends to each (`port.HOST`, crate::lan_element), each counted once.
pub fn configured_rtt_us(dirs: &[Direction], d: &Direction) -> Option<f64> {
    let total: f64 = round_trip(dirs, d).map(|b| delay_us(&b.shape)).sum();
    (total > 0.0).then_some(total)
}

/// The directions a round trip from `d.from` to `d.to` and back crosses: on a link, both ends'
/// egress; on a LAN, also the switch's ports to both ends.
fn round_trip<'a>(dirs: &'a [Direction], d: &'a Direction) -> impl Iterator<Item = &'a Direction> {
    let ends = [d.from.as_str(), d.to.as_str()];
    dirs.iter()
        .filter(move |b| b.link == d.link)
        .filter(move |b| match crate::lan_element::port_of(b) {
            Some(to) => ends.contains(&to),
            None => ends.contains(&b.from.as_str()),
        })
}

/// Does the round trip from `d.from` to `d.to` and back cross a direction with loss
/// configured (the same directions as [`configured_rtt_us`])?
pub fn round_trip_is_lossy(dirs: &[Direction], d: &Direction) -> bool {
    round_trip(dirs, d).any(|b| b.shape.loss.is_some_and(|l| l > 0.0))
}

/// How the witness times a round trip: tcp-rr on a path without loss (what users run), udp-rr
/// where the round trip crosses configured loss. Through loss, TCP recovers a lost request or
/// response with a retransmission timeout (200 ms at least on Linux, doubled when it repeats),
/// and tcp-rr times it as delay: a 1 s tcp-rr over 10 % loss completes as few as 13
/// transactions, and its median was a retransmission (228 ms against 10 ms configured) in 2 of
/// 4 runs on the project's VM. udp-rr counts a request with no answer within its `--timeout` as
/// lost and times only the answered ones, so its median is the path's round trip.
#[derive(Debug, Clone, PartialEq)]
pub enum RttProbe {
    TcpRr,
    /// udp-rr with this `--timeout`, seconds.
    UdpRr {
        timeout_s: f64,
    },
}

impl RttProbe {
    /// The probe for a round trip of `configured_us` (none: no delay configured), lossy or not:
    /// udp-rr's timeout is four configured round trips, at least 0.25 s and at most 5 s (a path
    /// much slower than configured times out, and the witness says it measured nothing).
    pub fn for_path(lossy: bool, configured_us: Option<f64>) -> RttProbe {
        if !lossy {
            return RttProbe::TcpRr;
        }
        let t = (4.0 * configured_us.unwrap_or(0.0) / 1e6).clamp(0.25, 5.0);
        RttProbe::UdpRr {
            timeout_s: (t * 100.0).ceil() / 100.0,
        }
    }

    /// The probe's arguments after `-H HOST -p PORT`.
    pub fn args(&self) -> Vec<String> {
        match self {
            RttProbe::TcpRr => vec!["tcp-rr".into(), "-l".into(), "1".into()],
            RttProbe::UdpRr { timeout_s } => vec![
                "udp-rr".into(),
                "-l".into(),
                "1".into(),
                "--timeout".into(),
                timeout_s.to_string(),
            ],
        }
    }

    /// How the figure was measured, as the witness says it: "tcp-rr median" or
    /// "udp-rr median of the answered requests, --timeout 0.25 s, as the path has loss".
    pub fn describe(&self) -> String {
        match self {
            RttProbe::TcpRr => "tcp-rr median".into(),
            RttProbe::UdpRr { timeout_s } => format!(
                "udp-rr median of the answered requests, --timeout {timeout_s} s, as the path has loss"
            ),
        }
    }
}

/// The delay check: the witness's median round trip (measured as `by` says) more than 10 % +
/// 1 ms off the configured delays' sum is a warning naming the link.
pub fn judge_rtt(
    d: &Direction,
    configured_us: Option<f64>,
    measured_us: Option<f64>,
    by: &str,
) -> Option<String> {
    let (c, m) = (configured_us?, measured_us?);
    let tolerance = RTT_TOLERANCE * c + RTT_FLOOR_US;
    ((m - c).abs() > tolerance).then(|| {
        format!(
            "link {} ({} → {}): round trip {:.2} ms measured ({by}), {:+.2} ms off the {:.2} ms the configured delays make (tolerance 10 % + 1 ms: {:.2} ms)",
            d.link,
            d.from,
            d.to,
            m / 1e3,
            (m - c) / 1e3,
            c / 1e3,
            tolerance / 1e3
        )
    })
}

/// The loss probe for a direction with `loss_pct` configured: a pace below the link's rate (a
/// quarter of it, at most [`PROBE_RATE_BPS`]: the probe must not queue behind the rate, or the
/// queue's drops would count as the path's loss), and a length (1 to 5 s) for about
/// 400 / loss datagrams (at least 2000), so the binomial bound is a small share of the count.
pub fn loss_probe_plan(loss_pct: f64, rate_bps: Option<u64>) -> LossProbe {
    let rate = rate_bps
        .map_or(PROBE_RATE_BPS, |r| (r / 4).min(PROBE_RATE_BPS))
        .max(100_000);
    let pps = rate as f64 / (8.0 * PROBE_BYTES as f64);
    let p = (loss_pct / 100.0).clamp(1e-4, 1.0);
    let want = (400.0 / p).max(2000.0);
    let length = (want / pps).clamp(1.0, 5.0);
    LossProbe {
        rate_bps: rate,
        datagram_bytes: PROBE_BYTES,
        length_s: (length * 10.0).ceil() / 10.0,
        sent: None,
        lost: None,
        measured_pct: None,
        bound_low_pct: None,
        bound_high_pct: None,
        receiver_dropped: None,
    }
}

/// The count of `sent` datagrams a path dropping `loss_pct` percent may lose: the mean ±
/// [`LOSS_SIGMAS`] binomial standard deviations and [`LOSS_SLACK`] datagrams.
pub fn loss_bounds(sent: u64, loss_pct: f64) -> (f64, f64) {
    let n = sent as f64;
    let p = (loss_pct / 100.0).clamp(0.0, 1.0);
    let mean = n * p;
    let half = LOSS_SIGMAS * (n * p * (1.0 - p)).sqrt() + LOSS_SLACK;
    ((mean - half).max(0.0), (mean + half).min(n))
}

/// Fills the probe's measured figures and bounds from udp-stream's counts; a warning naming the
/// link when the loss is outside the bound. `receiver_dropped`: what the receiving host's kernel
/// dropped for a full socket buffer over the probe (not the path's loss: left out of the figure).
pub fn judge_loss(
    d: &Direction,
    loss_pct: f64,
    probe: &mut LossProbe,
    sent: u64,
    lost: u64,
    receiver_dropped: Option<u64>,
) -> Option<String> {
    probe.sent = Some(sent);
    probe.lost = Some(lost);
    probe.receiver_dropped = receiver_dropped;
    let lost = lost.saturating_sub(receiver_dropped.unwrap_or(0));
    if sent == 0 {
        return Some(format!(
            "link {} ({} → {}): the loss probe sent no datagram; loss not measured",
            d.link, d.from, d.to
        ));
    }
    let pct = |x: f64| 100.0 * x / sent as f64;
    let (lo, hi) = loss_bounds(sent, loss_pct);
    probe.measured_pct = Some(pct(lost as f64));
    probe.bound_low_pct = Some(pct(lo));
    probe.bound_high_pct = Some(pct(hi));
    let l = lost as f64;
    (l < lo || l > hi).then(|| {
        format!(
            "link {} ({} → {}): loss {:.2} % measured ({lost} of {sent} datagrams{}), outside the binomial bound {:.2}–{:.2} % of the configured {loss_pct} %",
            d.link,
            d.from,
            d.to,
            pct(l),
            receiver_dropped
                .filter(|n| *n > 0)
                .map(|n| format!(", besides {n} the receiving host dropped for a full socket buffer"))
                .unwrap_or_default(),
            pct(lo),
            pct(hi)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Shape;

    fn dir(from: &str, to: &str, shape: Shape) -> Direction {
        Direction {
            link: "a-b".into(),
            from: from.into(),
            to: to.into(),
            ns: "n".into(),
            dev: format!("to-{to}"),
            shape,
            rate_bps: None,
            mechanism: "netrig element".into(),
            mtu: 1500,
        }
    }

    fn delayed(ms: &str) -> Shape {
        Shape {
            delay: Some(ms.into()),
            ..Shape::default()
        }
    }

    #[test]
    fn the_round_trip_is_both_directions_configured_delays() {
        let ab = dir("a", "b", delayed("58ms"));
        let ba = dir("b", "a", delayed("58ms"));
        let dirs = vec![ab.clone(), ba];
        assert_eq!(configured_rtt_us(&dirs, &ab), Some(116_000.0));
        // Only one direction delayed: its delay alone; none: no check.
        let one = vec![ab.clone()];
        assert_eq!(configured_rtt_us(&one, &ab), Some(58_000.0));
        let plain = dir("a", "b", Shape::default());
        assert_eq!(configured_rtt_us(std::slice::from_ref(&plain), &plain), None);
    }

    #[test]
    fn a_round_trip_beyond_ten_percent_and_a_millisecond_warns_naming_the_link() {
        let d = dir("a", "b", delayed("5ms"));
        // 10 ms configured: 12 ms of tolerance each side is 10 % + 1 ms = 2 ms.
        assert_eq!(
            judge_rtt(&d, Some(10_000.0), Some(10_060.0), "tcp-rr median"),
            None
        );
        assert_eq!(
            judge_rtt(&d, Some(10_000.0), Some(11_900.0), "tcp-rr median"),
            None
        );
        let w = judge_rtt(&d, Some(10_000.0), Some(12_100.0), "tcp-rr median").expect("2.1 ms off");
        assert!(
            w.starts_with("link a-b (a → b): round trip 12.10 ms measured (tcp-rr median)"),
            "{w}"
        );
        assert!(w.contains("+2.10 ms off the 10.00 ms"), "{w}");
        // A path with its delay missing (an element not in the path, a qdisc changed).
        assert!(judge_rtt(&d, Some(10_000.0), Some(40.0), "tcp-rr median").is_some());
        // On a short path the floor rules: 0.2 ms configured, 1.1 ms measured is fine.
        assert_eq!(judge_rtt(&d, Some(200.0), Some(1_100.0), "tcp-rr median"), None);
        assert_eq!(
            judge_rtt(&d, Some(10_000.0), None, "tcp-rr median"),
            None,
            "not measured: no judgement"
        );
    }

    #[test]
    fn the_loss_probe_stays_below_the_rate_and_runs_long_enough_for_its_bound() {
        let p = loss_probe_plan(10.0, None);
        assert_eq!(p.rate_bps, PROBE_RATE_BPS);
        assert_eq!(p.length_s, 1.0, "4000 datagrams at 4883/s");
        let p = loss_probe_plan(1.0, None);
        assert_eq!(p.length_s, 5.0, "40000 wanted: at most 5 s");
        let p = loss_probe_plan(10.0, Some(20_000_000));
        assert_eq!(p.rate_bps, 5_000_000, "a quarter of the link's rate");
        let pps = 5e6 / (8.0 * 512.0);
        assert!(p.length_s * pps >= 4000.0 && p.length_s < 3.5, "{p:?}");
    }

    #[test]
    fn loss_outside_the_binomial_bound_warns_naming_the_link() {
        let d = dir("a", "b", Shape::default());
        let mut p = loss_probe_plan(10.0, None);
        // 5000 sent at 10 %: 500 ± 4 × 21.2 + 3.
        let (lo, hi) = loss_bounds(5000, 10.0);
        assert!((lo - 412.1).abs() < 0.2 && (hi - 587.9).abs() < 0.2, "{lo} {hi}");
        assert_eq!(judge_loss(&d, 10.0, &mut p, 5000, 520, None), None);
        assert_eq!(p.measured_pct, Some(10.4));
        assert!(p.bound_low_pct.unwrap() < 10.0 && p.bound_high_pct.unwrap() > 10.0);
        let w = judge_loss(&d, 10.0, &mut p, 5000, 250, None).expect("5 % where 10 % is configured");
        assert!(w.starts_with("link a-b (a → b): loss 5.00 % measured (250 of 5000 datagrams), outside the binomial bound 8.24–11.76 % of the configured 10 %"), "{w}");
        assert!(judge_loss(&d, 10.0, &mut p, 5000, 700, None).is_some());
        // Nothing lost where 10 % is configured: the loss is not being built.
        assert!(judge_loss(&d, 10.0, &mut p, 5000, 0, None).is_some());
        assert!(judge_loss(&d, 10.0, &mut p, 0, 0, None).is_some());
    }

    #[test]
    fn what_the_receiving_host_dropped_is_left_out_of_the_paths_loss() {
        let d = dir("a", "b", Shape::default());
        let mut p = loss_probe_plan(10.0, None);
        // 4904 sent, 2223 lost, 1728 of them by the receiver's full buffer (seen on a busy VM):
        // 495 are the path's, 10.09 %, inside the bound.
        assert_eq!(judge_loss(&d, 10.0, &mut p, 4904, 2223, Some(1728)), None);
        assert!((p.measured_pct.unwrap() - 10.094).abs() < 0.01, "{p:?}");
        assert_eq!((p.lost, p.receiver_dropped), (Some(2223), Some(1728)));
        // Counted without them, the same probe warns and says what it left out.
        let w = judge_loss(&d, 10.0, &mut p, 4904, 2223, Some(100)).expect("43 % of the path");
        assert!(
            w.contains(
                "(2123 of 4904 datagrams, besides 100 the receiving host dropped for a full socket buffer)"
            ),
            "{w}"
        );
    }

    #[test]
    fn a_round_trip_through_loss_is_timed_by_udp_rr() {
        let mut lossy = dir("a", "b", delayed("5ms"));
        lossy.shape.loss = Some(10.0);
        let back = dir("b", "a", delayed("5ms"));
        let dirs = vec![lossy.clone(), back.clone()];
        // Either direction of the round trip: the loss is on a → b.
        assert!(round_trip_is_lossy(&dirs, &lossy) && round_trip_is_lossy(&dirs, &back));
        let clean = vec![dir("a", "b", delayed("5ms")), back.clone()];
        assert!(!round_trip_is_lossy(&clean, &back));
        assert_eq!(RttProbe::for_path(false, Some(10_000.0)), RttProbe::TcpRr);
        assert_eq!(
            RttProbe::for_path(true, Some(10_000.0)),
            RttProbe::UdpRr { timeout_s: 0.25 }
        );
        assert_eq!(
            RttProbe::for_path(true, Some(300_000.0)),
            RttProbe::UdpRr { timeout_s: 1.2 }
        );
        assert_eq!(
            RttProbe::for_path(true, Some(9e6)),
            RttProbe::UdpRr { timeout_s: 5.0 }
        );
        let u = RttProbe::for_path(true, None);
        assert_eq!(u.args(), ["udp-rr", "-l", "1", "--timeout", "0.25"]);
        assert!(u.describe().starts_with("udp-rr median"), "{}", u.describe());
        assert_eq!(RttProbe::TcpRr.describe(), "tcp-rr median");
    }
}
