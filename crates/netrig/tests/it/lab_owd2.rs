//! One-way delay between two clocks (issue #38, "One-way delay"): the client measures the
//! agent's clock's offset over the control connection (the clock probe, four time stamps per
//! exchange as NTP's) and takes it off the figures, stating the bound beside them. On this one
//! machine, `NETRIG_TEST_CLOCKS_UNSHARED` makes the client measure instead of trusting the boot
//! hash, and `NETRIG_TEST_AGENT_CLOCK_SKEW_US` sets the agent's clock that far ahead.

use crate::helpers::{netrig, run_cmd, stderr, stdout, validate};
use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    let v: Value = serde_json::from_str(&stdout(o)).expect("a result");
    validate(&v);
    v
}

/// udp-rr with the clocks taken for two, the agent's `skew_us` ahead.
fn udp_rr(skew_us: i64) -> Value {
    let mut c = netrig();
    c.env("NETRIG_TEST_CLOCKS_UNSHARED", "1");
    c.env("NETRIG_TEST_AGENT_CLOCK_SKEW_US", skew_us.to_string());
    json(&run_cmd(c, &["udp-rr", "-l", "1", "--json"]))
}

/// Each direction's median, checked present with the measured clock beside it.
fn measured(v: &Value) -> (f64, f64, f64, f64) {
    let o = &v["summary"]["one_way_delay"];
    assert!(o["withheld"].is_null(), "{o}");
    assert!(o["clock"].as_str().unwrap().starts_with("measured"), "{o}");
    let bound = o["clock_offset_bound_us"].as_f64().unwrap();
    // Half the least control round trip on loopback (of 16), on a busy machine.
    assert!(bound > 0.0 && bound <= 100.0, "{o}");
    let offset = o["clock_offset_us"].as_f64().unwrap();
    assert!(o["clock_drift_us"].as_f64().unwrap().abs() < 1_000.0, "{o}");
    let p50 = |d: &str| {
        let f = &o[d];
        assert!(f["withheld"].is_null(), "{d}: {o}");
        assert!(f["datagrams"].as_u64().unwrap() > 100, "{d}: {o}");
        f["p50_us"].as_f64().unwrap()
    };
    (p50("tx"), p50("rx"), bound, offset)
}

/// Loopback, the clocks taken for two: the offset is measured (about 0), the bound is small,
/// and the two directions still add up to the round trip.
#[test]
fn udp_rr_between_two_clocks_measures_their_offset_and_the_directions_add_up() {
    let v = udp_rr(0);
    let (tx, rx, bound, offset) = measured(&v);
    assert!(
        offset.abs() <= bound,
        "one kernel: offset {offset} µs, bound {bound} µs"
    );
    let rtt = v["summary"]["latency_us"]["p50"].as_f64().unwrap();
    assert!(
        (tx + rx - rtt).abs() <= 0.25 * rtt + 3.0,
        "one way {tx} + {rx} µs against the round trip's {rtt} µs: {}",
        v["summary"]["one_way_delay"]
    );
    let mut c = netrig();
    c.env("NETRIG_TEST_CLOCKS_UNSHARED", "1");
    let text = stdout(&run_cmd(c, &["udp-rr", "-l", "0.5"]));
    assert!(
        text.contains("one-way delay client -> agent: min ") && text.contains("us measured and taken off"),
        "{text}"
    );
}

/// The agent's clock 50 ms ahead (and 50 ms behind): the measured offset is that skew within
/// its bound, and the figures are what they are without it, loopback's, not 50 ms off.
#[test]
fn a_skewed_agent_clock_is_measured_and_taken_off() {
    for skew_us in [50_000i64, -50_000] {
        let v = udp_rr(skew_us);
        let (tx, rx, bound, offset) = measured(&v);
        assert!(
            (offset - skew_us as f64).abs() <= bound,
            "skew {skew_us} µs, measured {offset} ± {bound} µs"
        );
        let rtt = v["summary"]["latency_us"]["p50"].as_f64().unwrap();
        // Each direction within the round trip plus the bound: not 50 ms off.
        assert!(
            tx <= rtt + bound && rx <= rtt + bound,
            "{}",
            v["summary"]["one_way_delay"]
        );
        assert!(
            (tx + rx - rtt).abs() <= 0.25 * rtt + 3.0,
            "one way {tx} + {rx} µs against the round trip's {rtt} µs: {}",
            v["summary"]["one_way_delay"]
        );
    }
    // udp-stream, one direction each.
    for args in [&[][..], &["-R"][..]] {
        let mut c = netrig();
        c.env("NETRIG_TEST_CLOCKS_UNSHARED", "1");
        c.env("NETRIG_TEST_AGENT_CLOCK_SKEW_US", "50000");
        let mut a = vec!["udp-stream", "-l", "1", "-b", "20M", "--json"];
        a.extend(args);
        let v = json(&run_cmd(c, &a));
        let o = &v["summary"]["one_way_delay"];
        let d = if args.is_empty() { "tx" } else { "rx" };
        let p50 = o[d]["p50_us"].as_f64().unwrap_or_else(|| panic!("{o}"));
        assert!(p50 < 5_000.0, "{o}");
    }
}

/// The agent's side of the clock probe, spoken by hand: an echo with its clock's readings in
/// order, at most 64 probes between two test requests (the 65th ends the session naming the
/// limit), and a session of protocol 6 (older than the probe) ended when it sends one.
#[test]
fn the_agent_answers_clock_probes_bounded_and_only_in_protocol_7() {
    use crate::helpers::{Raw, Served};
    use netrig_proto::{AgentMsg, ClientMsg};
    let agent = Served::start(&[]);
    let mut r = Raw::open(agent.port);
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let t1 = now_ns();
    r.send(&ClientMsg::ClockProbe { seq: 7 });
    let AgentMsg::ClockEcho {
        seq,
        received_ns,
        sent_ns,
    } = r.next()
    else {
        panic!("no clock_echo")
    };
    let t4 = now_ns();
    assert_eq!(seq, 7);
    assert!(
        t1 <= received_ns && received_ns <= sent_ns && sent_ns <= t4,
        "{t1} {received_ns} {sent_ns} {t4}"
    );
    for seq in 1..64 {
        r.send(&ClientMsg::ClockProbe { seq });
        assert!(matches!(r.next(), AgentMsg::ClockEcho { seq: s, .. } if s == seq));
    }
    r.send(&ClientMsg::ClockProbe { seq: 64 });
    match r.next() {
        AgentMsg::Error { message } => assert!(message.contains("more than 64 clock_probe"), "{message}"),
        m => panic!("the 65th probe answered: {m:?}"),
    }

    // Protocol 6, by hand.
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(
        &netrig_proto::ControlPreamble {
            min_version: 6,
            max_version: 6,
        }
        .encode(),
    )
    .unwrap();
    let mut d = netrig_proto::FrameDecoder::new();
    let mut next = |s: &mut std::net::TcpStream| -> AgentMsg {
        let mut buf = [0u8; 65536];
        loop {
            if let Some(m) = d.next_msg().unwrap() {
                return m;
            }
            let n = s.read(&mut buf).expect("the agent answered");
            assert!(n > 0, "closed without a message");
            d.push(&buf[..n]).unwrap();
        }
    };
    assert!(matches!(next(&mut s), AgentMsg::Welcome { version: 6, .. }));
    let hello = ClientMsg::Hello {
        software: "test".into(),
        auth: netrig_proto::auth::HelloAuth {
            nonce: netrig_proto::auth::Nonce::random(),
            client_key: None,
            signature: None,
        },
    };
    s.write_all(&netrig_proto::encode_frame(&hello)).unwrap();
    assert!(matches!(next(&mut s), AgentMsg::HelloAccepted { .. }));
    s.write_all(&netrig_proto::encode_frame(&ClientMsg::ClockProbe { seq: 1 }))
        .unwrap();
    match next(&mut s) {
        AgentMsg::Error { message } => {
            assert!(message.contains("clock_probe needs protocol v7"), "{message}")
        }
        m => panic!("a protocol-6 session's probe answered: {m:?}"),
    }
}
