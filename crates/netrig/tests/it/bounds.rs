//! The agent's bounds as an operator sets them (issue #11): deadlines that a
//! trickle cannot renew, sessions per client, totals shared by all tests, an
//! allow-list, a rate cap, what the results disclose, and heartbeats that
//! stop either end when the other falls silent.

use crate::helpers::*;
use netrig_proto::{AgentMsg, ClientMsg, TestSpec};
use serde_json::Value;
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn stream_spec(seconds: f64) -> TestSpec {
    serde_json::from_value(serde_json::json!({
        "test": {"kind": "tcp-stream", "message_size": 1024, "recv_size": 1024},
        "limit": {"duration": {"seconds": seconds}}, "flows": 1}))
    .unwrap()
}

/// Issue #11: one byte every 8 s, or an invalid request every few seconds,
/// kept a session (and its slot) for ever, since each frame restarted a
/// 300 s idle timer. The deadline now runs from the welcome (or the end of
/// the last test) and nothing the client sends moves it.
#[test]
fn a_trickle_cannot_keep_a_session_past_its_idle_deadline() {
    let mut agent = Served::start(&["--idle-timeout", "2"]);
    let probe = crate::probe::AgentProbe::attach(&mut agent);
    // A frame's length, then one byte of it at a time.
    let mut trickle = Raw::open(agent.port);
    // Refused requests, one after another.
    let mut refused = Raw::open(agent.port);
    let t0 = Instant::now();
    trickle.s.write_all(&100u32.to_be_bytes()).unwrap();
    let mut bad = stream_spec(1.0);
    bad.flows = 0;
    let mut closed = [None, None];
    while closed.iter().any(Option::is_none) && t0.elapsed() < Duration::from_secs(8) {
        if closed[0].is_none() && trickle.s.write_all(b"x").is_err() {
            closed[0] = Some(t0.elapsed());
        }
        if closed[1].is_none() {
            refused.send(&ClientMsg::TestRequest {
                spec: bad.clone(),
                auth: None,
            });
            match refused.try_next(Duration::from_secs(5)) {
                Some(AgentMsg::TestRejected { .. }) => {}
                Some(AgentMsg::Error { message }) => {
                    assert!(message.contains("--idle-timeout"), "{message}");
                    closed[1] = Some(t0.elapsed());
                }
                None => closed[1] = Some(t0.elapsed()),
                Some(m) => panic!("{m:?}"),
            }
        }
        if closed[0].is_none() {
            // The agent's error, then its FIN, once the deadline passed.
            trickle.s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 4096];
            if let Ok(0) = trickle.s.read(&mut b) {
                closed[0] = Some(t0.elapsed());
            }
            trickle.s.set_nonblocking(false).unwrap();
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    for (what, c) in ["a trickle of bytes", "refused requests"].iter().zip(closed) {
        let c = c.unwrap_or_else(|| panic!("{what} kept the session open for 8 s (--idle-timeout 2)"));
        assert!(
            c >= Duration::from_millis(1500) && c < Duration::from_secs(6),
            "{what}: closed after {c:?}"
        );
    }
    // All given back, and an honest client served right after.
    drop((trickle, refused));
    probe.check("a trickle after the hello");
}

fn hello() -> netrig_proto::ClientMsg {
    netrig_proto::ClientMsg::Hello {
        software: "test".into(),
        auth: netrig_proto::auth::HelloAuth {
            nonce: netrig_proto::auth::Nonce::random(),
            client_key: None,
            signature: None,
        },
    }
}

/// Issue #11: 64 idle sessions from one address locked every honest client
/// out. One client (an IPv4 address) now has `--max-sessions-per-client`.
#[test]
fn one_client_cannot_take_every_session() {
    let mut agent = Served::start(&["--max-sessions-per-client", "2"]);
    let probe = crate::probe::AgentProbe::attach(&mut agent);
    let a = Raw::open(agent.port);
    let b = Raw::open(agent.port);
    // Its place is taken with the hello (docs/SECURITY.md, "Admission").
    let mut third = Raw::greet("127.0.0.1", agent.port);
    assert!(matches!(third.next(), AgentMsg::Welcome { .. }));
    third.send(&hello());
    match third.next() {
        AgentMsg::Busy { reason } => assert!(
            reason.contains("127.0.0.1 has 2 sessions") && reason.contains("--max-sessions-per-client"),
            "{reason}"
        ),
        m => panic!("{m:?}"),
    }
    // Another client is served meanwhile...
    let v = run_json(&strs(&at(
        &agent.port_arg(),
        "tcp-stream --bind 127.0.0.2 -l 0.3",
    )));
    assert!(u(&v, "/summary/bytes") > 0);
    // ...and this one again once it ends a session.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut r = Raw::greet("127.0.0.1", agent.port);
        assert!(matches!(r.next(), AgentMsg::Welcome { .. }));
        r.send(&hello());
        match r.next() {
            AgentMsg::HelloAccepted { .. } => break,
            AgentMsg::Busy { .. } if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            m => panic!("{m:?}"),
        }
    }
    drop((b, third));
    probe.check("sessions per client");
}

/// Threads and buffer memory are a budget all sessions share: a test that
/// fits alone but not beside the running ones is told the agent is busy,
/// naming the cap; one larger than the cap is told it can never run.
#[test]
fn the_agents_totals_are_shared_by_all_its_tests() {
    let agent = Served::start(&["--max-threads", "5", "--max-memory", "48M"]);
    let p = agent.port_arg();
    // 2 workers and the run's own thread: 3 of 4.
    let long = netrig()
        .args(at(&p, "tcp-stream -l 4 -P 2 -T 2"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let o = run(&strs(&at(&p, "tcp-stream -l 0.3 -P 2 -T 2")));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("busy") && e.contains("other tests hold 3") && e.contains("--max-threads"),
        "{e}"
    );
    // One worker fits beside it.
    let v = run_json(&strs(&at(&p, "tcp-stream -l 0.3 -T 1")));
    assert!(u(&v, "/summary/bytes") > 0);
    let o = long.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // More workers than the whole budget: the welcome says so, the client refuses.
    let o = run(&strs(&at(&p, "tcp-stream -l 0.3 -P 8 -T 8")));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("at most 4 worker threads (its --max-workers)"),
        "{}",
        stderr(&o)
    );
    // Buffers beyond all the memory tests may have (2 workers x (16 + 16) MiB = 64 MiB > 48 MiB).
    let o = run(&strs(&at(&p, "tcp-stream -l 0.3 -P 2 -T 2 -m 16M -M 16M")));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("needs 64 MiB")
            && stderr(&o).contains("at most 48 MiB for all tests together (its --max-memory)"),
        "{}",
        stderr(&o)
    );
}

/// `--allow`: a client outside the networks listed is closed before its
/// greeting is read; one inside is served.
#[test]
fn only_allowed_networks_are_served() {
    let agent = Served::start(&["--allow", "127.0.0.2/32", "--allow", "10.0.0.0/8"]);
    let p = agent.port_arg();
    let o = run(&strs(&at(&p, "tcp-stream -l 0.3")));
    assert!(!o.status.success(), "a client outside --allow ran a test");
    let v = run_json(&strs(&at(&p, "tcp-stream --bind 127.0.0.2 -l 0.3")));
    assert!(u(&v, "/summary/bytes") > 0);
}

/// Issue #11: `udp-stream -R` without `-b` sent 42 Gbit/s for up to an hour.
/// Under `--max-rate` a test must state a rate within it.
#[test]
fn a_rate_cap_refuses_unstated_and_excessive_rates() {
    let agent = Served::start(&["--max-rate", "100M"]);
    let p = agent.port_arg();
    let o = run(&strs(&at(&p, "udp-stream -R -l 0.3")));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("-b/--bitrate not given") && e.contains("100 Mbit/s") && e.contains("--max-rate"),
        "{e}"
    );
    let o = run(&strs(&at(&p, "udp-stream -R -b 60M -P 2 -l 0.3")));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("offers 120 Mbit/s (2 flows)"),
        "{}",
        stderr(&o)
    );
    let v = run_json(&strs(&at(&p, "udp-stream -R -b 50M -l 0.5")));
    let bps = f(&v, "/summary/throughput_bps");
    assert!(bps > 10e6 && bps < 60e6, "{bps}");
    // Closed-loop request/response is clocked by its answers: it runs.
    let v = run_json(&strs(&at(&p, "tcp-rr -l 0.3")));
    assert!(f(&v, "/summary/transactions_per_s") > 0.0);
}

/// `--disclose minimal`: an unauthenticated client's result has no
/// environment, host counters or witness from the agent, and says why.
#[test]
fn minimal_disclosure_withholds_the_agents_host_and_says_so() {
    let agent = Served::start(&["--disclose", "minimal"]);
    let v = run_json(&strs(&at(&agent.port_arg(), "tcp-stream -l 0.3")));
    assert!(v["environment"]["remote"].is_null(), "{}", v["environment"]);
    assert!(v["counters"]["remote"].is_null(), "{}", v["counters"]);
    assert!(!v["environment"]["local"].is_null());
    let w = warnings_about(&v, "--disclose minimal");
    assert_eq!(w.len(), 1, "{:?}", v["warnings"]);
    assert!(u(&v, "/summary/bytes") > 0);
    let open = Served::start(&[]);
    let v = run_json(&strs(&at(&open.port_arg(), "tcp-stream -l 0.3")));
    assert!(!v["environment"]["remote"].is_null());
    assert!(warnings_about(&v, "--disclose").is_empty());
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a child of ours.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// Issue #11: with the agent stopped (SIGSTOP) during a test the client
/// waited, then reported a 22 s window as normal. It now gives up once the
/// agent has been silent for 10 s, whichever end sends (and an aborted
/// receiver does not drain for another 10 s: it took 19.8 s before).
#[test]
fn a_stopped_agent_stops_the_client_within_the_silence_limit() {
    let runs: Vec<_> = ["tcp-maerts", "tcp-stream"]
        .into_iter()
        .map(|test| {
            std::thread::spawn(move || {
                let agent = Served::start(&[]);
                let p = agent.port_arg();
                let client = netrig()
                    .args([test, "-H", "127.0.0.1", "-p", &p, "-l", "60"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                std::thread::sleep(Duration::from_millis(1500));
                signal(agent.child.id(), libc::SIGSTOP);
                let t0 = Instant::now();
                let o = client.wait_with_output().unwrap();
                let took = t0.elapsed();
                signal(agent.child.id(), libc::SIGCONT);
                (test, took, o)
            })
        })
        .collect();
    for r in runs {
        let (test, took, o) = r.join().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{test}: exited 0 with its agent stopped");
        assert!(e.contains("the agent sent nothing for 10 s"), "{test}: {e}");
        assert!(
            took >= Duration::from_secs(8) && took < Duration::from_secs(16),
            "{test}: gave up after {took:?}"
        );
    }
}

/// A client stopped mid-test (or whose host vanished without a FIN) no
/// longer has the agent send for the rest of the test: it stops once the
/// client's heartbeats have been missing for 10 s.
#[test]
fn a_stopped_client_stops_the_agent_within_the_silence_limit() {
    let mut agent = Served::start(&[]);
    let log = {
        let mut err = agent.child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        })
    };
    let p = agent.port_arg();
    let mut client = netrig()
        .args(at(&p, "udp-stream -R -b 10M -l 60"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(client.id(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(14));
    signal(client.id(), libc::SIGKILL);
    let _ = client.wait();
    let _ = agent.child.kill();
    let _ = agent.child.wait();
    let log = log.join().unwrap();
    assert!(
        log.contains("the client sent nothing for 10 s"),
        "the agent did not notice its stopped client within 14 s:\n{log}"
    );
}

/// Issue #11: with many flows, `-i 0.1` and a client that stopped reading
/// its control connection, the agent's blocking writes of interval samples
/// stretched a 10 s test to 40 s (the engine waited on each write). Samples now go through a queue; those
/// that do not fit are dropped and counted, and the test keeps its length.
#[test]
fn a_client_that_stops_reading_does_not_stretch_the_agents_test() {
    let agent = Served::start(&[]);
    let mut r = Raw::open(agent.port);
    // Little room on our side (but more than loopback's 64 KiB segment, or
    // the window would reopen only on the sender's zero-window probes).
    socket2::SockRef::from(&r.s)
        .set_recv_buffer_size(128 << 10)
        .unwrap();
    // tcp-crr opens no data connections at set-up; 10,000 flows make each
    // interval sample about 150 KB: 50 of them are more than the agent's
    // socket (4 MiB at most here) and its writer's queue hold.
    let spec: TestSpec = serde_json::from_value(serde_json::json!({
        "test": {"kind": "tcp-crr", "transactions": {
            "request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}}},
        "limit": {"duration": {"seconds": 5.0}}, "flows": 10000, "interval_s": 0.1}))
    .unwrap();
    r.send(&ClientMsg::TestRequest { spec, auth: None });
    assert!(matches!(r.next(), AgentMsg::TestAccepted { .. }));
    assert!(matches!(r.next(), AgentMsg::DataReady));
    r.send(&ClientMsg::Go);
    // Not a byte read for 8 s (heartbeats of our own keep the agent from
    // taking us for gone).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(500));
        r.send(&ClientMsg::Heartbeat);
    }
    let mut samples = 0;
    let report = loop {
        match r.try_next(Duration::from_secs(30)) {
            Some(AgentMsg::Results { report }) => break report,
            Some(AgentMsg::Interval { .. }) => samples += 1,
            Some(AgentMsg::Heartbeat) => {}
            m => panic!("{m:?}"),
        }
    };
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "results only after {:?}",
        t0.elapsed()
    );
    assert!(
        report.window_s < 6.5,
        "the agent's 5 s window stretched to {} s",
        report.window_s
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("dropped") && w.contains("did not read")),
        "{:?}",
        report.warnings
    );
    assert!(samples > 0 && samples < 50, "{samples} samples of 50 arrived");
}

/// #12: a test with more sockets than this client's open-file limit allows
/// is refused before anything connects, naming RLIMIT_NOFILE and how to
/// raise it (with the in-process agent, both ends' sockets count).
#[test]
fn a_client_short_of_file_descriptors_says_so_before_connecting() {
    let o = std::process::Command::new("sh")
        .args([
            "-c",
            "ulimit -n 256 && exec \"$0\" tcp-rr -P 200 -l 0.3",
            env!("CARGO_BIN_EXE_netrig"),
        ])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("the test needs 400 sockets on this client")
            && e.contains("open-file limit (RLIMIT_NOFILE) is 256")
            && e.contains("-P"),
        "{e}"
    );
    // Within the limit, it runs.
    let o = std::process::Command::new("sh")
        .args([
            "-c",
            "ulimit -n 256 && exec \"$0\" tcp-rr -P 50 -l 0.3",
            env!("CARGO_BIN_EXE_netrig"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The agent's payload both ways on its TCP sockets over its window, as its
/// kernel counts them (the witness: bytes acked and received per socket), in bits/s.
fn remote_kernel_tcp_bps(v: &Value) -> f64 {
    let check = v["witness"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["end"] == "remote" && c["figure"].as_str().unwrap_or("").starts_with("TCP payload"))
        .unwrap_or_else(|| panic!("no remote TCP check: {}", v["witness"]));
    check["kernel"].as_f64().unwrap() * 8.0 / f(v, "/witness/remote/window_s")
}

/// Issue #37 (25): closed-loop request/response escaped `--max-rate`:
/// `tcp-rr -r 1,1M --burst 16 -P 4` against `--max-rate 100M` drew 35.9
/// Gbit/s. The agent now holds its own sends to the cap, whatever the kind
/// or what the client states, and the result says so; a test within the
/// cap is not held, and not told it was. The rates are the agent's
/// kernel's counts on its sockets (the witness), not netrig's.
#[test]
fn the_agents_rate_cap_holds_its_sends_whatever_the_kind() {
    let agent = Served::start(&["--max-rate", "100M"]);
    let p = agent.port_arg();
    for test in ["tcp-rr -r 1,1M --burst 4 -P 2 -l 1", "tcp-crr -r 1,1M -P 2 -l 1"] {
        let v = run_json(&strs(&at(&p, test)));
        let held = warnings_about(&v, "--max-rate 100 Mbit/s held its sends");
        let client = f(&v, "/summary/throughput_bps");
        assert!(client < 120e6, "{test}: {client} bits/s at the client");
        assert_eq!(held.len(), 1, "{test}: {:?}", v["warnings"]);
        if test.starts_with("tcp-rr") {
            let kernel = remote_kernel_tcp_bps(&v);
            eprintln!("{test}: the agent's kernel counted {:.1} Mbit/s", kernel / 1e6);
            assert!(kernel < 120e6 && kernel > 20e6, "{test}: {kernel} bits/s");
        }
    }
    // A paced stream from the agent within the cap: not held, not warned.
    let v = run_json(&strs(&at(&p, "tcp-maerts -b 40M -l 1")));
    let kernel = remote_kernel_tcp_bps(&v);
    assert!(kernel > 30e6 && kernel < 50e6, "{kernel}");
    assert!(
        warnings_about(&v, "held its sends").is_empty(),
        "{:?}",
        v["warnings"]
    );
}

/// Issue #37 (25): udp-rr answers larger than their requests need the
/// operator's consent (`--max-amplification`); with it, under `--max-rate`,
/// the answers are paced by the agent.
#[test]
fn udp_answers_larger_than_requests_need_the_operators_consent() {
    let plain = Served::start(&[]);
    let o = run(&strs(&at(&plain.port_arg(), "udp-rr -r 28,65000 -l 0.3")));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("65000-byte answers to 28-byte requests") && e.contains("--max-amplification"),
        "{e}"
    );
    // -r 1,1 is 28 bytes each way (netrig's header): the default bound takes it.
    let v = run_json(&strs(&at(&plain.port_arg(), "udp-rr -l 0.3")));
    assert!(f(&v, "/summary/transactions_per_s") > 0.0);
    let agent = Served::start(&["--max-rate", "20M", "--max-amplification", "3000"]);
    let v = run_json(&strs(&at(
        &agent.port_arg(),
        "udp-rr -r 28,65000 --burst 16 -l 1",
    )));
    let bps = f(&v, "/summary/throughput_bps");
    assert!(bps > 5e6 && bps < 25e6, "{bps}");
    assert_eq!(
        warnings_about(&v, "--max-rate 20 Mbit/s held its sends").len(),
        1,
        "{:?}",
        v["warnings"]
    );
}
