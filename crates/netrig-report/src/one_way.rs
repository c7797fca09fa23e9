//! One-way delay per direction, from both ends' reports (see
//! `netrig_proto::clock` for what each end measures and how the clocks are
//! known to be one).

use crate::model::{OneWayDelay, OneWayFigures};
use netrig_metrics::latency::MAX_ENCODED_LEN;
use netrig_metrics::LatencyRecorder;
use netrig_proto::clock::{self, ClockCheck, OneWayReport};
use netrig_proto::report::SideReport;

/// The one-way delay of each direction that carried datagrams (`tx`: the
/// client's sent, as the agent received them; `rx`: the agent's), or why
/// it is withheld. `local` is the client's report (which holds its
/// judgement of the clocks), `remote` the agent's; `tx`/`rx` say whether
/// the test sent datagrams that way.
pub fn one_way_delay(local: &SideReport, remote: &SideReport, tx: bool, rx: bool) -> OneWayDelay {
    let withheld = |why: String| OneWayDelay {
        clock: None,
        clock_offset_bound_us: None,
        clock_offset_us: None,
        clock_drift_us: None,
        withheld: Some(format!("one-way delay withheld: {why}")),
        tx: None,
        rx: None,
    };
    let Some(l) = &local.one_way else {
        return withheld("the client's report has no clock".into());
    };
    let (how, measured) = match &l.clocks {
        ClockCheck::Shared(how) => (how.clone(), None),
        ClockCheck::Measured {
            how,
            offset,
            drift_ns,
        } => (how.clone(), Some((*offset, *drift_ns))),
        ClockCheck::NotShared(why) => return withheld(why.clone()),
        ClockCheck::Unknown => return withheld("the ends' clocks were not compared".into()),
    };
    let Some(r) = &remote.one_way else {
        return withheld("the agent does not report its clock (an older netrig)".into());
    };
    // The agent's readings on the client's clock: less the measured offset.
    let mut r = r.clone();
    let bound_ns = match measured {
        None => 0,
        Some((o, _)) => {
            let on_ours = |v: u64| v.checked_add_signed(o.offset_ns.checked_neg().unwrap_or(i64::MAX));
            match (on_ours(r.zero_ns), on_ours(r.ref_ns)) {
                (Some(z), Some(f)) => (r.zero_ns, r.ref_ns) = (z, f),
                _ => {
                    return withheld(format!(
                        "the agent's clock's measured offset ({} ns) puts its readings outside the range of times",
                        o.offset_ns
                    ))
                }
            }
            o.bound_ns
        }
    };
    let figures = |f: OneWayFigures| {
        match (measured, f.p50_us) {
        (Some(_), Some(p50)) if !clock::bound_fits(bound_ns, p50 * 1000.0) => OneWayFigures {
            withheld: Some(format!(
                "the clocks' offset is known to +/- {:.1} us only, more than {:.0} % of this direction's median ({p50:.1} \
                 us) and than the {:.0} us always shown",
                bound_ns as f64 / 1000.0,
                clock::OFFSET_BOUND_SHARE * 100.0,
                clock::OFFSET_BOUND_FLOOR_NS as f64 / 1000.0
            )),
            ..OneWayFigures::default()
        },
        _ => f,
    }
    };
    OneWayDelay {
        clock: Some(how),
        clock_offset_bound_us: Some(bound_ns as f64 / 1000.0),
        clock_offset_us: measured.map(|(o, _)| o.offset_ns as f64 / 1000.0),
        clock_drift_us: measured.and_then(|(_, d)| d).map(|d| d as f64 / 1000.0),
        withheld: None,
        tx: tx.then(|| figures(direction(l, &r, "the agent", bound_ns))),
        rx: rx.then(|| figures(direction(&r, l, "the client", bound_ns))),
    }
}

/// No figures: `why`.
pub fn withheld(why: String) -> OneWayDelay {
    OneWayDelay {
        withheld: Some(format!("one-way delay withheld: {why}")),
        ..OneWayDelay::default()
    }
}

/// `o` with the figures of a direction whose messages carry no send time
/// (`tx`/`rx` false: tcp-rr messages under 8 bytes) withheld, naming the size.
pub fn unstamped(mut o: OneWayDelay, spec: &netrig_proto::spec::TestSpec, tx: bool, rx: bool) -> OneWayDelay {
    let (req, resp) = match &spec.test {
        netrig_proto::spec::KindSpec::TcpRr(s) => (s.transactions.request_size, s.transactions.response_size),
        _ => return o,
    };
    for (stamped, dir, what, size, opt) in [
        (tx, &mut o.tx, "requests", req, "-r REQ,RESP with REQ"),
        (rx, &mut o.rx, "responses", resp, "-r REQ,RESP with RESP"),
    ] {
        if let Some(f) = dir.as_mut().filter(|_| !stamped) {
            *f = OneWayFigures {
                withheld: Some(format!(
                    "messages smaller than 8 bytes carry no time stamp ({what} of {size} B: ask for {opt} 8 or more)"
                )),
                ..OneWayFigures::default()
            };
        }
    }
    o
}

/// The figures of the datagrams `sender` sent and `receiver` received, the
/// two reports on one clock to within `bound_ns`.
fn direction(sender: &OneWayReport, receiver: &OneWayReport, who: &str, bound_ns: u64) -> OneWayFigures {
    let none = |why: String| OneWayFigures {
        withheld: Some(why),
        ..OneWayFigures::default()
    };
    let Some(text) = &receiver.received else {
        return none(format!(
            "{who} received no datagram with its own receive time inside its window"
        ));
    };
    let h = match LatencyRecorder::from_base64(text, MAX_ENCODED_LEN) {
        Ok(h) if !h.is_empty() => h,
        Ok(_) => {
            return none(format!(
                "{who} received no datagram with its own receive time inside its window"
            ))
        }
        Err(e) => return none(format!("{who}'s histogram of one-way delays did not read: {e}")),
    };
    // The sender's zero less the receiver's reference: never negative on one
    // clock, at least −bound on two whose offset is known to ± bound.
    let shift = sender.zero_ns as i128 - receiver.ref_ns as i128;
    if shift < -(bound_ns as i128) || shift > 3_600_000_000_000 {
        return none(format!(
            "the ends' time zeros are not in the order one clock gives them (the sender's zero {} ns, the \
             receiver's reference {} ns{})",
            sender.zero_ns,
            receiver.ref_ns,
            if bound_ns > 0 {
                format!(", on the client's clock to +/- {bound_ns} ns")
            } else {
                String::new()
            }
        ));
    }
    let s = h.summary();
    let shift_us = shift as f64 / 1000.0;
    let bound_us = bound_ns as f64 / 1000.0;
    // HdrHistogram's lowest bucket bound is within 0.1 % below the value.
    if s.min_us * 1.001 + 0.001 + bound_us < shift_us {
        return none(format!(
            "{who} received datagrams {:.1} us before they were sent by the {} clock: the ends do not read \
             one clock (or it was stepped during the test)",
            shift_us - s.min_us,
            if bound_ns > 0 { "measured" } else { "shared" }
        ));
    }
    let off = |v: f64| (v - shift_us).max(0.0);
    OneWayFigures {
        datagrams: s.count,
        min_us: Some(off(s.min_us)),
        mean_us: Some(off(s.mean_us)),
        p50_us: Some(off(s.p50_us)),
        p99_us: Some(off(s.p99_us)),
        max_us: Some(off(s.max_us)),
        withheld: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(zero_ns: u64, ref_ns: u64, values: &[u64], clocks: ClockCheck) -> SideReport {
        let received = (!values.is_empty()).then(|| {
            let mut h = LatencyRecorder::new();
            values.iter().for_each(|v| h.record(*v));
            h.to_base64()
        });
        SideReport {
            one_way: Some(OneWayReport {
                zero_ns,
                ref_ns,
                received,
                clocks,
            }),
            ..SideReport::default()
        }
    }

    const T: u64 = 1_800_000_000_000_000_000;

    #[test]
    fn each_direction_is_its_receivers_values_less_the_shift() {
        let shared = ClockCheck::Shared("one kernel".into());
        // Client: zero at T (its reference too); received (rx) values of
        // 10 ms + the agent's zero less T (300 µs).
        let local = report(T, T, &[10_300_000; 5], shared);
        // Agent: zero T + 300 µs, reference T − 200 µs (data_ready sent);
        // received (tx) values of 2 ms + T less its reference (200 µs).
        let remote = report(T + 300_000, T - 200_000, &[2_200_000; 7], ClockCheck::Unknown);
        let o = one_way_delay(&local, &remote, true, true);
        assert_eq!(o.withheld, None);
        let (tx, rx) = (o.tx.unwrap(), o.rx.unwrap());
        assert_eq!((tx.datagrams, rx.datagrams), (7, 5));
        let near = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want * 0.002;
        assert!(near(tx.p50_us, 2_000.0) && near(tx.min_us, 2_000.0), "{tx:?}");
        assert!(near(rx.p99_us, 10_000.0) && near(rx.max_us, 10_000.0), "{rx:?}");
        // One direction only.
        let o = one_way_delay(&local, &remote, false, true);
        assert!(o.tx.is_none() && o.rx.is_some());
    }

    #[test]
    fn it_is_withheld_with_the_reason() {
        let shared = || ClockCheck::Shared("one kernel".into());
        let remote = report(T, T, &[1_000], ClockCheck::Unknown);
        // An agent that says nothing of its clock (older).
        let old = SideReport::default();
        let o = one_way_delay(&report(T, T, &[1_000], shared()), &old, true, false);
        assert!(o
            .withheld
            .unwrap()
            .contains("the agent does not report its clock"));
        // Clocks not known to be one.
        let why = "the agent does not say its clock";
        let o = one_way_delay(
            &report(T, T, &[], ClockCheck::NotShared(why.into())),
            &remote,
            true,
            false,
        );
        assert!(o.withheld.unwrap().contains(why) && o.tx.is_none());
        // Datagrams that arrived before they were sent: not one clock.
        let o = one_way_delay(
            &report(T, T, &[], shared()),
            &report(T + 1_000_000, T - 10, &[5], ClockCheck::Unknown),
            true,
            false,
        );
        assert!(o.tx.unwrap().withheld.unwrap().contains("before they were sent"));
        // Nothing received in the window.
        let o = one_way_delay(
            &report(T, T, &[], shared()),
            &report(T, T, &[], ClockCheck::Unknown),
            true,
            false,
        );
        assert!(o.tx.unwrap().withheld.unwrap().contains("received no datagram"));
        // A histogram that does not read.
        let mut bad = report(T, T, &[], ClockCheck::Unknown);
        bad.one_way.as_mut().unwrap().received = Some("!!".into());
        let o = one_way_delay(&report(T, T, &[], shared()), &bad, true, false);
        assert!(o.tx.unwrap().withheld.unwrap().contains("did not read"));
    }

    /// Two clocks, the agent's 50 ms ahead, its offset measured to ± 20 µs: the agent's readings
    /// are taken on the client's clock, the figures are as on one clock, the bound beside them.
    #[test]
    fn a_measured_offset_is_taken_off_and_its_bound_stated() {
        use netrig_proto::clock::ClockOffset;
        let skew = 50_000_000u64;
        let measured = |bound_ns, offset_ns| ClockCheck::Measured {
            how: "measured".into(),
            offset: ClockOffset {
                offset_ns,
                bound_ns,
                exchanges: 16,
            },
            drift_ns: Some(300),
        };
        // As in each_direction_is_its_receivers_values_less_the_shift, the agent's zero and
        // reference read 50 ms ahead.
        let local = report(T, T, &[10_300_000; 5], measured(20_000, skew as i64));
        let remote = report(
            T + 300_000 + skew,
            T - 200_000 + skew,
            &[2_200_000; 7],
            ClockCheck::Unknown,
        );
        let o = one_way_delay(&local, &remote, true, true);
        assert_eq!(o.withheld, None);
        assert_eq!(o.clock_offset_bound_us, Some(20.0));
        assert_eq!(o.clock_offset_us, Some(50_000.0));
        assert_eq!(o.clock_drift_us, Some(0.3));
        let near = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want * 0.002;
        let (tx, rx) = (o.tx.unwrap(), o.rx.unwrap());
        assert!(near(tx.p50_us, 2_000.0), "{tx:?}");
        assert!(near(rx.p50_us, 10_000.0), "{rx:?}");
        // Not taken off (taken for one clock): the agent's reference 50 ms ahead seems after
        // the client's zero, so tx is withheld.
        let unshifted = report(T, T, &[10_300_000; 5], ClockCheck::Shared("one".into()));
        let o = one_way_delay(&unshifted, &remote, true, true);
        assert!(o.tx.unwrap().withheld.is_some());
        // An offset measured 30 µs off (within its bound): the reference seems after the
        // zero by less than the bound, the figures stay, off by the error only.
        let local = report(T, T, &[10_300_000; 5], measured(40_000, skew as i64 - 230_000));
        let o = one_way_delay(&local, &remote, true, true);
        assert!(o.tx.is_some_and(|t| t.withheld.is_none()), "within the bound");
        // A bound over 100 µs and 10 % of a direction's median: that direction withheld
        // (2 ms), the other (10 ms) shown.
        let local = report(T, T, &[10_300_000; 5], measured(900_000, skew as i64));
        let o = one_way_delay(&local, &remote, true, true);
        let tx = o.tx.unwrap();
        assert!(
            tx.withheld.unwrap().contains("known to +/- 900.0 us only"),
            "2 ms median"
        );
        assert!(o.rx.unwrap().withheld.is_none(), "900 µs is under 10 % of 10 ms");
    }
}
