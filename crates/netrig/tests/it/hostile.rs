//! The hostile list (docs/HOSTILE.md), case by case: what a peer that means
//! harm, or a careless one, may do, and what netrig does about it. After
//! each case [`AgentProbe::check`] asserts what issue #11 asks of all of
//! them: no panic, descriptors and threads back to the baseline and memory
//! near it, the listener accepting, an honest client served right after.
//! Where a channel exists the case also asserts the structured error.
//!
//! Cases tested elsewhere are listed in docs/HOSTILE.md with their tests.
//! Long waits run in threads of one test; deadlines have margins for a
//! busy machine and are polled, never taken at one instant.

use crate::helpers::*;
use crate::probe::{AgentProbe, Usage};
use netrig_proto::{AgentMsg, ClientMsg, ControlPreamble, DataHello, SessionCookie, TestSpec};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

const V: u16 = netrig_proto::PROTOCOL_VERSION;

fn stream_spec(kind: &str, seconds: f64) -> Value {
    json!({"test": {"kind": kind, "message_size": 1024, "recv_size": 1024},
           "limit": {"duration": {"seconds": seconds}}, "flows": 1})
}

/// tcp-crr opens no data connection at set-up: accepted, then ready at once.
fn crr_spec(seconds: f64) -> Value {
    json!({"test": {"kind": "tcp-crr", "transactions": {
               "request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}}},
           "limit": {"duration": {"seconds": seconds}}, "flows": 1})
}

fn spec(v: &Value) -> TestSpec {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// One frame of `body`, as it is.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// A `test_request` frame with `spec` (any JSON) and nothing else.
fn request(spec: &Value) -> Vec<u8> {
    framed(&serde_json::to_vec(&json!({"type": "test_request", "spec": spec})).unwrap())
}

/// Welcomed, no hello yet.
fn welcomed(port: u16) -> Raw {
    let mut r = Raw::greet("127.0.0.1", port);
    assert!(matches!(r.next(), AgentMsg::Welcome { .. }));
    r
}

/// The agent answers `error` naming `needle`, then closes, within 5 s each.
fn ends_with_error(r: &mut Raw, needle: &str, case: &str) {
    loop {
        match r.wait(Duration::from_secs(5)) {
            Waited::Msg(AgentMsg::Error { message }) => {
                assert!(
                    message.contains(needle),
                    "{case}: expected {needle:?} in {message:?}"
                );
                break;
            }
            Waited::Msg(AgentMsg::Heartbeat | AgentMsg::Interval { .. }) => {}
            other => panic!("{case}: expected an error naming {needle:?}, got {other:?}"),
        }
    }
    assert!(
        matches!(r.wait(Duration::from_secs(5)), Waited::Closed),
        "{case}: the agent did not close after its error"
    );
}

/// The agent refuses the test naming `needle`; the session stays open.
fn rejected(r: &mut Raw, needle: &str, case: &str) {
    match r.wait(Duration::from_secs(5)) {
        Waited::Msg(AgentMsg::TestRejected { reason }) => {
            assert!(
                reason.contains(needle),
                "{case}: expected {needle:?} in {reason:?}"
            )
        }
        other => panic!("{case}: expected test_rejected naming {needle:?}, got {other:?}"),
    }
}

/// Waits until the agent closes `s`; how long that took from `t0`. Panics
/// if the agent sends a byte, or keeps it open past `limit`.
fn closed_after(s: &mut TcpStream, t0: Instant, limit: Duration) -> Duration {
    s.set_read_timeout(Some(
        limit.saturating_sub(t0.elapsed()).max(Duration::from_millis(1)),
    ))
    .unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("the agent sent {n} bytes on a connection that never greeted"),
        Err(e) => panic!("the agent kept the connection open for {:?}: {e}", t0.elapsed()),
    }
    t0.elapsed()
}

/// Sends `bytes` one at a time, `every` apart, until the agent closes the
/// connection (at most 20 s); returns when it closed and what it sent.
fn trickle(s: &mut TcpStream, bytes: &[u8], every: Duration) -> (Duration, Vec<u8>) {
    let t0 = Instant::now();
    s.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    let mut sent = 0;
    let mut buf = [0u8; 4096];
    loop {
        loop {
            match s.read(&mut buf) {
                Ok(0) => return (t0.elapsed(), got),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return (t0.elapsed(), got),
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "a byte every {every:?}: still open after 20 s ({sent} bytes sent)"
        );
        if sent < bytes.len() && t0.elapsed() >= every * sent as u32 {
            if s.write_all(&bytes[sent..sent + 1]).is_err() {
                return (t0.elapsed(), got);
            }
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn messages(bytes: &[u8]) -> Vec<AgentMsg> {
    let mut d = netrig_proto::FrameDecoder::with_limit(64 << 20);
    d.push(bytes).unwrap();
    std::iter::from_fn(|| d.next_msg().unwrap()).collect()
}

fn within(d: Duration, lo: f64, hi: f64) -> bool {
    d >= Duration::from_secs_f64(lo) && d < Duration::from_secs_f64(hi)
}

/// Connect and send nothing: closed at the 5 s greeting timeout, without a
/// byte sent back (a port scanner or a dead client holds nothing longer).
#[test]
fn a_connection_that_sends_nothing_is_closed_at_the_greeting_timeout() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let t0 = Instant::now();
    let mut silent: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", agent.port)).unwrap())
        .collect();
    for s in &mut silent {
        let c = closed_after(s, t0, Duration::from_secs(12));
        assert!(
            within(c, 4.5, 9.0),
            "closed after {c:?}, the greeting timeout is 5 s"
        );
    }
    eprintln!("silent connections closed after {:?}", t0.elapsed());
    probe.check("connect and send nothing");
}

/// One byte every 8 s: a deadline that the bytes could renew would keep the
/// connection for ever. Scaled down here, in the same proportions (every
/// byte well within the deadline): a byte a second against the fixed 5 s
/// greeting timeout, for a control preamble (8 bytes) and a data hello (32);
/// a byte every 0.5 s of a hello frame against `--idle-timeout 2` (60 s by
/// default). Each is closed at its deadline, the last with an error. (The
/// same after the hello: bounds::a_trickle_cannot_keep_a_session_past_its_idle_deadline.)
#[test]
fn a_byte_every_8_s_cannot_renew_a_deadline() {
    let mut agent = Served::start(&["--idle-timeout", "2"]);
    let probe = AgentProbe::attach(&mut agent);
    let port = agent.port;
    let greeting = |what: &'static str, bytes: Vec<u8>| {
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let (closed, got) = trickle(&mut s, &bytes, Duration::from_secs(1));
            assert!(
                got.is_empty(),
                "{what}: the agent answered a greeting it never finished"
            );
            assert!(
                within(closed, 4.5, 8.0),
                "{what}, a byte a second: closed after {closed:?}, the greeting timeout is 5 s"
            );
            eprintln!("{what}, a byte a second: closed after {closed:?}");
        })
    };
    let preamble = greeting(
        "control preamble",
        ControlPreamble {
            min_version: V,
            max_version: V,
        }
        .encode()
        .to_vec(),
    );
    let hello = greeting(
        "data hello",
        DataHello {
            version: V,
            cookie: SessionCookie([7; 16]),
            flow: 0,
        }
        .encode()
        .to_vec(),
    );
    let before_hello = std::thread::spawn(move || {
        let mut r = welcomed(port);
        let frame = netrig_proto::encode_frame(&ClientMsg::Hello {
            software: "slow".into(),
            auth: netrig_proto::auth::HelloAuth {
                nonce: netrig_proto::auth::Nonce::random(),
                client_key: None,
                signature: None,
            },
        });
        let (closed, got) = trickle(&mut r.s, &frame, Duration::from_millis(500));
        let msgs = messages(&got);
        assert!(
            matches!(&msgs[..], [AgentMsg::Error { message }] if message.contains("--idle-timeout")),
            "a hello frame a byte every 0.5 s: {msgs:?}"
        );
        assert!(
            within(closed, 1.5, 6.0),
            "a hello frame a byte every 0.5 s: closed after {closed:?} (--idle-timeout 2)"
        );
        eprintln!("hello frame, a byte every 0.5 s: closed after {closed:?}");
    });
    for t in [preamble, hello, before_hello] {
        t.join().unwrap();
    }
    probe.check("a byte every 8 s");
}

/// Length prefixes 0 and 2^32-1, and one byte over the 64 KiB a client's
/// frame may have: each an error naming what was wrong, before and after
/// the hello, and nothing of a long frame's body is waited for or buffered.
#[test]
fn frame_lengths_0_and_2_to_the_32_minus_1_are_refused() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    for hello in [false, true] {
        for (len, needle) in [
            (0u32, "malformed message: EOF while parsing a value"),
            (
                u32::MAX,
                "frame of 4294967295 bytes exceeds the limit of 65536 bytes",
            ),
            (65_537, "frame of 65537 bytes exceeds the limit of 65536 bytes"),
        ] {
            let case = format!("length {len}, hello {hello}");
            let mut r = if hello {
                Raw::open(agent.port)
            } else {
                welcomed(agent.port)
            };
            r.s.write_all(&len.to_be_bytes()).unwrap();
            ends_with_error(&mut r, needle, &case);
        }
    }
    // The largest frame a client may send is read whole, then judged.
    let mut r = Raw::open(agent.port);
    r.s.write_all(&framed(&[b' '; 65_536])).unwrap();
    ends_with_error(
        &mut r,
        "malformed message: EOF while parsing",
        "a 64 KiB frame of spaces",
    );
    probe.check("frame lengths");
}

/// A frame cut short, then FIN: the agent answers an error naming how much
/// of the frame came and closes at once; it does not wait for the rest until
/// a deadline (the log's rate limit: agent::a_client_that_closes_mid_frame_is_told_and_logged_within_a_rate).
#[test]
fn a_truncated_frame_then_fin_is_closed_at_once() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let frame = netrig_proto::encode_frame(&ClientMsg::Abort { reason: "x".into() });
    for cut in [2, 10, frame.len() - 1] {
        let mut r = Raw::open(agent.port);
        r.s.write_all(&frame[..cut]).unwrap();
        r.s.shutdown(Shutdown::Write).unwrap();
        let t0 = Instant::now();
        match r.wait(Duration::from_secs(5)) {
            Waited::Msg(AgentMsg::Error { message }) => {
                assert!(message.contains("middle of a frame"), "{message}");
                assert!(matches!(r.wait(Duration::from_secs(5)), Waited::Closed));
            }
            other => panic!("{cut} of {} bytes, then FIN: {other:?}", frame.len()),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "{cut} bytes then FIN: closed after {:?}",
            t0.elapsed()
        );
    }
    probe.check("truncated frame then FIN");
}

/// 60,000 levels of nesting, where a hello's string goes and where a spec's
/// kind goes: serde_json's recursion limit (128) refuses them, no stack
/// overflow. Closed, the same depth is twice the 64 KiB a client's frame may
/// have. A fake agent sending the client such a welcome gets an error, not
/// a crash.
#[test]
fn deep_nesting_is_refused_in_either_direction() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let deep = "[".repeat(60_000);
    let mut r = welcomed(agent.port);
    r.s.write_all(&framed(
        format!(r#"{{"type":"hello","software":{deep}"#).as_bytes(),
    ))
    .unwrap();
    ends_with_error(&mut r, "recursion limit exceeded", "a 60,000-deep hello");
    let mut r = Raw::open(agent.port);
    r.s.write_all(&framed(
        format!(r#"{{"type":"test_request","spec":{{"test":{deep}"#).as_bytes(),
    ))
    .unwrap();
    ends_with_error(&mut r, "recursion limit exceeded", "a 60,000-deep spec");
    let mut r = Raw::open(agent.port);
    let objects = r#"{"a":"#.repeat(12_000);
    r.s.write_all(&framed(
        format!(r#"{{"type":"test_request","spec":{objects}"#).as_bytes(),
    ))
    .unwrap();
    ends_with_error(&mut r, "recursion limit exceeded", "12,000 nested objects");
    let mut r = Raw::open(agent.port);
    // The header and the start: the agent refuses at the header, and reads
    // all that came (so that it closes with a FIN, not a reset).
    let closed = format!("{deep}{}", "]".repeat(60_000));
    r.s.write_all(&framed(closed.as_bytes())[..1000]).unwrap();
    ends_with_error(
        &mut r,
        "frame of 120000 bytes exceeds the limit of 65536 bytes",
        "60,000 levels, closed",
    );
    probe.check("deep nesting");

    // The other direction: an "agent" whose welcome nests 60,000 deep.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = l.local_addr().unwrap().port().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 8];
        s.read_exact(&mut b).unwrap();
        let body = format!(
            r#"{{"type":"welcome","version":{V},"software":{}"#,
            "[".repeat(60_000)
        );
        let _ = s.write_all(&framed(body.as_bytes()));
        std::thread::sleep(Duration::from_secs(2));
    });
    let t0 = Instant::now();
    let o = run(&["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "1"]);
    let e = stderr(&o);
    assert!(!o.status.success() && o.status.code() != Some(101), "{e}");
    assert!(!e.contains("panicked") && e.contains("error:"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    fake.join().unwrap();
}

/// Wrong JSON types anywhere in a message: each ends its session with an
/// error naming the type that was expected.
#[test]
fn wrong_types_are_named() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let ok = stream_spec("tcp-stream", 1.0);
    let with = |path: &str, v: Value| {
        let mut s = ok.clone();
        *s.pointer_mut(path).unwrap() = v;
        request(&s)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "flows a string",
            with("/flows", json!("1")),
            "invalid type: string \"1\", expected u32",
        ),
        (
            "flows negative",
            with("/flows", json!(-1)),
            "invalid value: integer `-1`, expected u32",
        ),
        (
            "flows 2^32",
            with("/flows", json!(1u64 << 32)),
            "invalid value: integer `4294967296`, expected u32",
        ),
        (
            "flows a float",
            with("/flows", json!(1.5)),
            "invalid type: floating point `1.5`, expected u32",
        ),
        (
            "seconds a string",
            with("/limit/duration/seconds", json!("10")),
            "invalid type: string \"10\", expected f64",
        ),
        (
            "message size null",
            with("/test/message_size", Value::Null),
            "invalid type: null, expected u32",
        ),
        // An optional field's null was taken as its default (issue #37, 27).
        (
            "workers null",
            {
                let mut s = ok.clone();
                s["workers"] = Value::Null;
                request(&s)
            },
            "`workers`: null is not a value (leave the field out for its default)",
        ),
        (
            "kind a float",
            with("/test/kind", json!(1.5)),
            "invalid type: floating point `1.5`",
        ),
        // serde takes an integer tag as the variant's index (5: udp-stream),
        // whose own fields are then checked: nothing is run that the kind's
        // name would not have run.
        (
            "kind an index",
            // serde takes a variant's index for its name: udp-stream's, wherever the list puts it.
            with(
                "/test/kind",
                json!(netrig_proto::spec::KindSpec::NAMES
                    .iter()
                    .position(|k| *k == "udp-stream")
                    .unwrap()),
            ),
            "unknown field `message_size`, expected one of `datagram_size`",
        ),
        (
            "spec an empty array",
            request(&json!([])),
            "invalid length 0, expected struct TestSpec",
        ),
        ("spec a string", request(&json!("tcp-stream")), "invalid type"),
        ("type a number", framed(br#"{"type":7}"#), "invalid type"),
        ("an array", framed(b"[]"), "malformed message"),
        ("null", framed(b"null"), "malformed message"),
        ("a string", framed(br#""test_request""#), "malformed message"),
        ("not UTF-8", framed(b"{\"type\":\"go\xff\"}"), "malformed message"),
    ];
    for (case, frame, needle) in cases {
        let mut r = Raw::open(agent.port);
        r.s.write_all(&frame).unwrap();
        ends_with_error(&mut r, needle, case);
    }
    // Before the hello too.
    let mut r = welcomed(agent.port);
    r.s.write_all(&framed(
        br#"{"type":"hello","software":5,"auth":{"nonce":"AAAA"}}"#,
    ))
    .unwrap();
    ends_with_error(
        &mut r,
        "invalid type: integer `5`, expected a string",
        "software a number",
    );
    probe.check("wrong types");
}

/// Durations: JSON has no NaN or infinity (the literal `NaN` and `1e999` are
/// parse errors that end the session); a negative, zero or negative-zero
/// length, a negative interval or omit are refused by name and the session
/// stays usable; a length of 5e-324 s runs and ends. The client refuses the
/// same on its command line before it connects.
#[test]
fn nan_negative_and_infinite_durations_are_refused() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let crr = crr_spec(1.0);
    let with = |path: &str, v: Value| {
        let mut s = crr.clone();
        if path == "/interval_s" || path == "/omit_s" {
            s[&path[1..]] = v;
        } else {
            *s.pointer_mut(path).unwrap() = v;
        }
        s
    };
    for (case, literal, needle) in [
        ("NaN", "NaN", "malformed message: expected value"),
        ("Infinity", "Infinity", "malformed message: expected value"),
        ("1e999", "1e999", "malformed message: number out of range"),
        ("-1e999", "-1e999", "malformed message: number out of range"),
    ] {
        let mut r = Raw::open(agent.port);
        let body = serde_json::to_string(&json!({"type": "test_request", "spec": crr}))
            .unwrap()
            .replace("1.0", literal);
        assert!(body.contains(literal), "{body}");
        r.s.write_all(&framed(body.as_bytes())).unwrap();
        ends_with_error(&mut r, needle, case);
    }
    // Refused by name, one after another in the same session.
    let mut r = Raw::open(agent.port);
    for (case, s, needle) in [
        (
            "-1 s",
            with("/limit/duration/seconds", json!(-1.0)),
            "-l/--length -1: must be more than 0 seconds (and finite)",
        ),
        (
            "0 s",
            with("/limit/duration/seconds", json!(0.0)),
            "-l/--length 0: must be more than 0 seconds",
        ),
        (
            "-0 s",
            with("/limit/duration/seconds", json!(-0.0)),
            "must be more than 0 seconds",
        ),
        (
            "1e300 s",
            with("/limit/duration/seconds", json!(1e300)),
            "allows at most 3600 seconds (its --max-duration)",
        ),
        (
            "interval -1",
            with("/interval_s", json!(-1.0)),
            "-i/--interval -1: must be at least 0.1 seconds (and finite)",
        ),
        (
            "omit -1",
            with("/omit_s", json!(-1.0)),
            "--omit -1: must be at least 0",
        ),
        (
            "0 bytes",
            json!({"test": crr["test"], "limit": {"bytes": {"bytes": 0}}, "flows": 1}),
            "-n/--bytes 0 is out of range",
        ),
    ] {
        r.s.write_all(&request(&s)).unwrap();
        rejected(&mut r, needle, case);
    }
    // The smallest positive length runs, and ends at once.
    r.send(&ClientMsg::TestRequest {
        spec: spec(&with("/limit/duration/seconds", json!(5e-324))),
        auth: None,
    });
    assert!(matches!(r.next(), AgentMsg::TestAccepted { .. }));
    assert!(matches!(r.next(), AgentMsg::DataReady));
    r.send(&ClientMsg::Go);
    let t0 = Instant::now();
    loop {
        match r.next() {
            AgentMsg::Results { report } => {
                assert!(report.window_s < 1.0, "{}", report.window_s);
                break;
            }
            AgentMsg::Interval { .. } | AgentMsg::Heartbeat => {}
            m => panic!("5e-324 s: {m:?}"),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    r.send(&ClientMsg::Bye);
    // The client, before it connects.
    for (args, needle) in [
        (vec!["-l", "NaN"], "'NaN' for '--length <SECONDS>'"),
        (vec!["-l", "inf"], "'inf' for '--length <SECONDS>'"),
        (vec!["--length=-1"], "'-1' for '--length <SECONDS>'"),
        (vec!["-l", "1", "-i", "NaN"], "'NaN' for '--interval <SECONDS>'"),
    ] {
        let mut a = vec!["tcp-stream", "-H", "127.0.0.1", "-p", "1"];
        a.extend(args);
        let o = run(&a);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {e}");
        assert!(
            e.contains(needle) && e.contains("must be a non-negative number of seconds"),
            "{a:?}: {e}"
        );
    }
    probe.check("NaN and negative durations");
}

/// Flows 0, 10^5 and 2^32-1: refused by name, before anything is allocated
/// (the agent's --max-flows, 10,000 by default; past it, its
/// --max-total-flows, 40,000); the client says the same before it asks.
#[test]
fn flows_0_and_100000_are_refused_by_name() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let mut r = Raw::open(agent.port);
    for (flows, needle) in [
        (0u64, "-P/--parallel 0: must be at least 1 flow"),
        (
            100_000,
            "-P/--parallel 100000: the agent allows at most 10000 flows per direction (its --max-flows)",
        ),
        (u64::from(u32::MAX), "(its --max-flows)"),
    ] {
        for kind in ["tcp-stream", "udp-stream"] {
            let mut s = stream_spec("tcp-stream", 1.0);
            if kind == "udp-stream" {
                s["test"] = json!({"kind": "udp-stream", "datagram_size": 1000});
            }
            s["flows"] = json!(flows);
            r.s.write_all(&request(&s)).unwrap();
            rejected(&mut r, needle, &format!("{kind} with {flows} flows"));
        }
    }
    drop(r);
    let p = agent.port_arg();
    let o = run(&[
        "tcp-stream",
        "-H",
        "127.0.0.1",
        "-p",
        &p,
        "-P",
        "100000",
        "-l",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-P/--parallel 100000") && stderr(&o).contains("--max-flows"),
        "{}",
        stderr(&o)
    );
    probe.check("flows 0 and 10^5");
    // An operator who raised --max-flows still has the total.
    let mut big = Served::start(&["--max-flows", "200000"]);
    let probe = AgentProbe::attach(&mut big);
    let mut r = Raw::open(big.port);
    let mut s = stream_spec("tcp-stream", 1.0);
    s["flows"] = json!(100_000);
    r.s.write_all(&request(&s)).unwrap();
    rejected(
        &mut r,
        "--max-total-flows",
        "100,000 flows under --max-flows 200000",
    );
    drop(r);
    probe.check("10^5 flows under a raised --max-flows");
}

/// Duplicate keys are refused wherever they are, and unknown keys too,
/// naming the key: in the spec, beside it (top level of hello and
/// test_request) and in hello's auth.
#[test]
fn duplicate_and_unknown_keys() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let ok = serde_json::to_string(&stream_spec("tcp-stream", 1.0)).unwrap();
    for (case, body, needle) in [
        (
            "flows twice",
            format!(
                r#"{{"type":"test_request","spec":{}}}"#,
                ok.replacen(r#""flows":1"#, r#""flows":1,"flows":2"#, 1)
            ),
            "duplicate field `flows`",
        ),
        (
            "spec twice",
            format!(r#"{{"type":"test_request","spec":{ok},"spec":{ok}}}"#),
            "duplicate field `spec`",
        ),
        (
            "message_size twice",
            format!(
                r#"{{"type":"test_request","spec":{}}}"#,
                ok.replacen(
                    r#""message_size":1024"#,
                    r#""message_size":1024,"message_size":9"#,
                    1
                )
            ),
            "duplicate field `message_size`",
        ),
        (
            "an unknown key in the spec",
            format!(
                r#"{{"type":"test_request","spec":{}}}"#,
                ok.replacen(r#""flows":1"#, r#""flows":1,"admin":true"#, 1)
            ),
            "unknown field `admin`",
        ),
        (
            "an unknown key in the kind's options",
            format!(
                r#"{{"type":"test_request","spec":{}}}"#,
                ok.replacen(r#""message_size":1024"#, r#""message_size":1024,"exec":"sh""#, 1)
            ),
            "unknown field `exec`",
        ),
        (
            "an unknown key in the limit",
            format!(
                r#"{{"type":"test_request","spec":{}}}"#,
                ok.replacen(r#""seconds":1.0"#, r#""seconds":1.0,"forever":true"#, 1)
            ),
            "unknown field `forever`",
        ),
    ] {
        let mut r = Raw::open(agent.port);
        r.s.write_all(&framed(body.as_bytes())).unwrap();
        ends_with_error(&mut r, needle, case);
    }
    // The hello's keys twice.
    let mut r = welcomed(agent.port);
    let nonce = netrig_proto::auth::Nonce::random();
    let n = serde_json::to_string(&nonce).unwrap();
    r.s.write_all(&framed(
        format!(r#"{{"type":"hello","software":"a","software":"b","auth":{{"nonce":{n}}}}}"#).as_bytes(),
    ))
    .unwrap();
    ends_with_error(&mut r, "duplicate field `software`", "software twice");
    // Unknown keys beside the spec: refused naming the key.
    let hello_extra = format!(r#"{{"type":"hello","software":"a","auth":{{"nonce":{n}}},"admin":true}}"#);
    let auth_extra = format!(r#"{{"type":"hello","software":"a","auth":{{"nonce":{n},"admin":true}}}}"#);
    for (case, body) in [("hello", hello_extra), ("hello's auth", auth_extra)] {
        let mut r = welcomed(agent.port);
        r.s.write_all(&framed(body.as_bytes())).unwrap();
        match r.next() {
            AgentMsg::Error { message } => {
                assert!(message.contains("unknown field `admin`"), "{case}: {message}")
            }
            m => panic!("{case}: {m:?}"),
        }
    }
    let mut r = Raw::open(agent.port);
    r.s.write_all(&framed(
        format!(r#"{{"type":"test_request","spec":{ok},"admin":true}}"#).as_bytes(),
    ))
    .unwrap();
    match r.next() {
        AgentMsg::Error { message } => assert!(message.contains("unknown field `admin`"), "{message}"),
        m => panic!("test_request with an unknown key: {m:?}"),
    }
    drop(r);
    probe.check("duplicate and unknown keys");
}

/// Messages out of their order: each ends the session with the state
/// machine's words, and a test being set up is given up (its cookie with it).
#[test]
fn out_of_order_messages_end_the_session_with_the_reason() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let port = agent.port;
    let tcp = spec(&stream_spec("tcp-stream", 5.0));
    let request = |s: &TestSpec| ClientMsg::TestRequest {
        spec: s.clone(),
        auth: None,
    };
    // Before the hello.
    let mut r = welcomed(port);
    r.send(&request(&tcp));
    ends_with_error(
        &mut r,
        "unexpected message test_request while awaiting hello",
        "test_request before hello",
    );
    // Idle: go, abort, a second hello.
    for (m, needle) in [
        (ClientMsg::Go, "unexpected message go while idle"),
        (
            ClientMsg::Abort { reason: "x".into() },
            "unexpected message abort while idle",
        ),
    ] {
        let mut r = Raw::open(port);
        r.send(&m);
        ends_with_error(&mut r, needle, needle);
    }
    let mut r = Raw::open(port);
    r.s.write_all(&netrig_proto::encode_frame(&ClientMsg::Hello {
        software: "again".into(),
        auth: netrig_proto::auth::HelloAuth {
            nonce: netrig_proto::auth::Nonce::random(),
            client_key: None,
            signature: None,
        },
    }))
    .unwrap();
    ends_with_error(&mut r, "unexpected message hello while idle", "a second hello");
    // A message only an agent sends.
    let mut r = Raw::open(port);
    r.s.write_all(&netrig_proto::encode_frame(&AgentMsg::DataReady))
        .unwrap();
    ends_with_error(&mut r, "unknown variant `data_ready`", "data_ready from a client");
    // During set-up: go, or a second test_request, before the data connections.
    for (m, needle) in [
        (
            ClientMsg::Go,
            "unexpected message go while awaiting data connections",
        ),
        (
            request(&tcp),
            "unexpected message test_request while awaiting data connections",
        ),
    ] {
        let mut r = Raw::open(port);
        r.send(&request(&tcp));
        let AgentMsg::TestAccepted { cookie, .. } = r.next() else {
            panic!("not accepted")
        };
        r.send(&m);
        let t0 = Instant::now();
        ends_with_error(&mut r, needle, needle);
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        // The test is gone, and its cookie with it.
        let mut d = TcpStream::connect(("127.0.0.1", port)).unwrap();
        d.write_all(
            &DataHello {
                version: V,
                cookie,
                flow: 0,
            }
            .encode(),
        )
        .unwrap();
        closed_after(&mut d, Instant::now(), Duration::from_secs(3));
    }
    // After data_ready, anything but go.
    let mut r = Raw::open(port);
    r.send(&request(&spec(&crr_spec(5.0))));
    assert!(matches!(r.next(), AgentMsg::TestAccepted { .. }));
    assert!(matches!(r.next(), AgentMsg::DataReady));
    r.send(&request(&tcp));
    ends_with_error(
        &mut r,
        "unexpected message test_request while awaiting go",
        "test_request instead of go",
    );
    // After bye, nothing more is read.
    let mut r = Raw::open(port);
    r.send(&ClientMsg::Bye);
    let _ = r.s.write_all(&netrig_proto::encode_frame(&ClientMsg::Go));
    assert!(matches!(r.wait(Duration::from_secs(5)), Waited::Closed));
    probe.check("out-of-order messages");
}

/// An authenticated session spoken by hand: its signing state, to sign (or
/// not) what it sends.
fn authenticated(
    port: u16,
    key: &netrig_proto::auth::SecretKey,
) -> (Raw, netrig_proto::auth::ClientAuthSession) {
    let mut r = Raw::greet("127.0.0.1", port);
    let AgentMsg::Welcome { version, auth, .. } = r.next() else {
        panic!("no welcome")
    };
    let client = netrig_proto::auth::ClientAuth {
        key: Some(key.clone()),
        agent_key: None,
    };
    let (hello, session) = client.hello(version, &auth).unwrap();
    r.send(&ClientMsg::Hello {
        software: "test".into(),
        auth: hello,
    });
    assert!(matches!(r.next(), AgentMsg::HelloAccepted { .. }));
    (r, session)
}

/// Replayed messages: a signed test_request sent again in its session (after
/// its test ran) is refused as a replay; sent in another session it does not
/// verify; a request without its signature is refused. Each ends the session.
#[test]
fn replayed_requests_are_refused() {
    let dir = TempDir::new("hostile-replay");
    let key = dir.path().join("alice");
    let o = run(&["keygen", "-o", key.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let secret = netrig_proto::auth::SecretKey::parse(&std::fs::read_to_string(&key).unwrap()).unwrap();
    let authorized = dir.path().join("authorized");
    std::fs::copy(format!("{}.pub", key.display()), &authorized).unwrap();
    let mut agent = Served::start(&["--authorized-keys", authorized.to_str().unwrap()]);
    let probe = AgentProbe::attach_with(&mut agent, &["--key", key.to_str().unwrap()]);
    let crr = spec(&crr_spec(0.3));
    let (mut a, mut signer) = authenticated(agent.port, &secret);
    let signed = ClientMsg::TestRequest {
        spec: crr.clone(),
        auth: signer.sign_request(&crr),
    };
    a.send(&signed);
    assert!(matches!(a.next(), AgentMsg::TestAccepted { .. }));
    assert!(matches!(a.next(), AgentMsg::DataReady));
    a.send(&ClientMsg::Go);
    loop {
        match a.next() {
            AgentMsg::Results { .. } => break,
            AgentMsg::Interval { .. } | AgentMsg::Heartbeat => {}
            m => panic!("{m:?}"),
        }
    }
    // The same frame again, in the same session.
    a.send(&signed);
    ends_with_error(&mut a, "authentication failed: replay", "replayed in its session");
    // In another session, whose nonces differ.
    let (mut b, _) = authenticated(agent.port, &secret);
    b.send(&signed);
    ends_with_error(
        &mut b,
        "authentication failed: bad signature",
        "replayed in another session",
    );
    // Without a signature.
    let (mut c, _) = authenticated(agent.port, &secret);
    c.send(&ClientMsg::TestRequest {
        spec: crr.clone(),
        auth: None,
    });
    ends_with_error(&mut c, "carries no signature", "unsigned");
    // With a counter from the future.
    let (mut d, mut signer) = authenticated(agent.port, &secret);
    signer.sign_request(&crr);
    d.send(&ClientMsg::TestRequest {
        spec: crr.clone(),
        auth: signer.sign_request(&crr),
    });
    ends_with_error(&mut d, "replay", "counter 1 first");
    probe.check("replayed messages");
}

/// A second client mid-test: its own test beside the first disturbs the
/// first's paced rate no more than noise; joining the first test with the
/// first session's cookie from another address is refused (TCP and UDP
/// alike: the agent sends only to its control peer's address), and the
/// first client's own data connection still completes the set-up.
#[test]
fn a_second_client_mid_test_neither_disturbs_nor_joins_the_first() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let p = agent.port_arg();
    let first = netrig()
        .args([
            "tcp-stream",
            "-H",
            "127.0.0.1",
            "-p",
            &p,
            "-b",
            "200M",
            "-l",
            "3",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let second = run_json(&[
        "tcp-maerts",
        "-H",
        "127.0.0.1",
        "-p",
        &p,
        "--bind",
        "127.0.0.2",
        "-b",
        "200M",
        "-l",
        "1",
    ]);
    assert!(u(&second, "/summary/bytes") > 0);
    let o = first.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let bps = f(&v, "/summary/throughput_bps");
    eprintln!("the first client's paced 200 Mbit/s with a second client beside it: {bps:.3e}");
    assert!((bps - 200e6).abs() < 0.15 * 200e6, "{bps}");

    // Joining with the first session's cookie from 127.0.0.2.
    for udp in [false, true] {
        let mut r = Raw::open(agent.port);
        let s = if udp {
            json!({"test": {"kind": "udp-stream", "datagram_size": 1000, "pace": {"rate_bps": 1_000_000}},
                   "limit": {"duration": {"seconds": 1.0}}, "flows": 1})
        } else {
            stream_spec("tcp-stream", 1.0)
        };
        r.send(&ClientMsg::TestRequest {
            spec: spec(&s),
            auth: None,
        });
        let AgentMsg::TestAccepted { cookie, .. } = r.next() else {
            panic!("not accepted")
        };
        let hello = DataHello {
            version: V,
            cookie,
            flow: 0,
        }
        .encode();
        let to: SocketAddr = format!("127.0.0.1:{}", agent.port).parse().unwrap();
        if udp {
            let other = UdpSocket::bind("127.0.0.2:0").unwrap();
            for _ in 0..5 {
                other.send_to(&hello, to).unwrap();
            }
        } else {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into())
                .unwrap();
            sock.connect(&to.into()).unwrap();
            let mut other: TcpStream = sock.into();
            other.write_all(&hello).unwrap();
            closed_after(&mut other, Instant::now(), Duration::from_secs(3));
        }
        assert!(
            matches!(r.wait(Duration::from_millis(1500)), Waited::Nothing),
            "udp {udp}: the set-up went on with a data connection from another address"
        );
        // The first client's own.
        let _own = if udp {
            let own = UdpSocket::bind("127.0.0.1:0").unwrap();
            own.send_to(&hello, to).unwrap();
            None
        } else {
            let mut own = TcpStream::connect(to).unwrap();
            own.write_all(&hello).unwrap();
            Some(own)
        };
        assert!(matches!(r.next(), AgentMsg::DataReady), "udp {udp}");
    }
    probe.check("a second client mid-test");
}

/// A UDP hello with the right cookie from a second source address (either
/// way round between 127.0.0.1 and 127.0.0.2): ignored, not one datagram
/// sent to it during the whole test, and logged at most once a second; the
/// same hello from the control connection's address completes the set-up.
#[test]
fn a_udp_hello_from_another_address_gets_nothing() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let to: SocketAddr = format!("127.0.0.1:{}", agent.port).parse().unwrap();
    for (control, other) in [("127.0.0.1", "127.0.0.2"), ("127.0.0.2", "127.0.0.1")] {
        let mut r = Raw::open_from(control, agent.port);
        r.send(&ClientMsg::TestRequest {
            spec: spec(&json!({"test": {"kind": "udp-stream", "datagram_size": 1000,
                                        "pace": {"rate_bps": 5_000_000}, "reverse": true},
                               "limit": {"duration": {"seconds": 1.0}}, "flows": 1})),
            auth: None,
        });
        let AgentMsg::TestAccepted { cookie, .. } = r.next() else {
            panic!("not accepted")
        };
        let hello = DataHello {
            version: V,
            cookie,
            flow: 0,
        }
        .encode();
        let foreign = UdpSocket::bind(format!("{other}:0")).unwrap();
        foreign.set_nonblocking(true).unwrap();
        for _ in 0..200 {
            foreign.send_to(&hello, to).unwrap();
        }
        assert!(
            matches!(r.wait(Duration::from_millis(1500)), Waited::Nothing),
            "a hello from {other} for a session from {control} set the test up"
        );
        let own = UdpSocket::bind(format!("{control}:0")).unwrap();
        own.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        own.send_to(&hello, to).unwrap();
        assert!(matches!(r.next(), AgentMsg::DataReady));
        r.send(&ClientMsg::Go);
        let mut received = 0;
        let mut buf = [0u8; 65536];
        let report = loop {
            while own.recv(&mut buf).is_ok() {
                received += 1;
            }
            match r.wait(Duration::from_millis(10)) {
                Waited::Msg(AgentMsg::Results { report }) => break report,
                Waited::Msg(AgentMsg::Interval { .. } | AgentMsg::Heartbeat) | Waited::Nothing => {}
                other => panic!("{other:?}"),
            }
        };
        // The same again, sent after the set-up: still nothing back.
        for _ in 0..10 {
            foreign.send_to(&hello, to).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut to_foreign = 0;
        while foreign.recv(&mut buf).is_ok() {
            to_foreign += 1;
        }
        assert_eq!(
            to_foreign, 0,
            "the agent sent {to_foreign} datagram(s) to {other}"
        );
        assert!(
            received > 100,
            "{received} datagrams reached the client at {control}"
        );
        assert!(report.window_s > 0.5);
        eprintln!("control from {control}: {received} datagrams to it, {to_foreign} to {other}");
    }
    let log = probe.log_with(&["not from the control connection's address"]);
    let lines = log
        .lines()
        .filter(|l| l.contains("not from the control connection's address"))
        .count();
    assert!(
        (1..=6).contains(&lines),
        "{lines} log lines for 400 foreign hellos:\n{log}"
    );
    probe.check("a UDP hello from a second address");
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a child of ours.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// Waits (at most 10 s) until the agent runs more threads than `idle`: a
/// test is under way.
fn test_running(pid: u32, idle: &Usage) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Usage::of(pid).is_some_and(|u| u.threads <= idle.threads) {
        assert!(Instant::now() < deadline, "no test started on the agent");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The client killed (SIGKILL) mid-test, whichever end sends, TCP and UDP:
/// the agent stops its flows at once (its control connection closes with
/// the process; the time until its test's threads are gone is measured) and
/// gives everything back.
#[test]
fn a_client_killed_mid_test_stops_the_agent_in_each_direction() {
    let runs: Vec<_> = [
        &["tcp-stream", "-b", "100M"][..],
        &["tcp-maerts", "-b", "100M"],
        &["udp-stream", "-b", "20M"],
        &["udp-stream", "-R", "-b", "20M"],
    ]
    .into_iter()
    .map(|test| {
        std::thread::spawn(move || {
            let mut agent = Served::start(&[]);
            let probe = AgentProbe::attach(&mut agent);
            let p = agent.port_arg();
            let mut args = vec!["-H", "127.0.0.1", "-p", &p, "-l", "30"];
            args.splice(0..0, test.iter().copied());
            let mut client = netrig()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            test_running(probe.pid(), &probe.baseline);
            std::thread::sleep(Duration::from_millis(700));
            client.kill().unwrap();
            let t0 = Instant::now();
            client.wait().unwrap();
            probe.settles(&format!("{test:?} killed"), Duration::from_secs(10));
            let took = t0.elapsed();
            let r = probe.check(&format!("client of {test:?} killed"));
            (test, took, r)
        })
    })
    .collect();
    for run in runs {
        let (test, took, _) = run.join().unwrap();
        eprintln!("{test:?}: the agent's test ended {took:?} after its client was killed");
        assert!(
            took < Duration::from_secs(5),
            "{test:?}: the agent went on for {took:?}"
        );
    }
}

/// The agent killed (SIGKILL) mid-test, for the kinds agent::a_dead_agent_stops_the_client_at_once_whichever_end_sends
/// does not run: the client stops within a bound, non-zero, with an error.
#[test]
fn an_agent_killed_mid_test_stops_the_client_in_each_direction() {
    let runs: Vec<_> = [
        &["udp-stream", "-b", "20M"][..],
        &["udp-stream", "-R", "-b", "20M"],
        &["tcp-crr"],
        &["tcp-bidir", "-b", "100M"],
    ]
    .into_iter()
    .map(|test| {
        std::thread::spawn(move || {
            let agent = Served::start(&[]);
            let idle = Usage::of(agent.child.id()).unwrap();
            let p = agent.port_arg();
            let mut args = vec!["-H", "127.0.0.1", "-p", &p, "-l", "30"];
            args.splice(0..0, test.iter().copied());
            let client = netrig()
                .args(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            test_running(agent.child.id(), &idle);
            std::thread::sleep(Duration::from_millis(700));
            signal(agent.child.id(), libc::SIGKILL);
            let t0 = Instant::now();
            let o = client.wait_with_output().unwrap();
            (test, t0.elapsed(), o)
        })
    })
    .collect();
    for run in runs {
        let (test, took, o) = run.join().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        eprintln!("{test:?}: the client stopped {took:?} after its agent was killed");
        assert!(!o.status.success(), "{test:?}: exited 0 with its agent dead");
        assert!(e.contains("error: ") && !e.contains("panicked"), "{test:?}: {e}");
        assert!(
            took < Duration::from_secs(8),
            "{test:?}: the client went on for {took:?}"
        );
    }
}

/// 10,000 connections that never greet: the agent holds at most 256 of
/// them (the oldest closed for each new one), so its descriptors stay
/// bounded; an honest client is served while all are open; every one is
/// closed by the greeting timeout. They come from 127.0.3.x, so that the
/// TIME_WAIT they leave does not take the ephemeral ports of other tests.
#[test]
fn ten_thousand_idle_connections_are_bounded_and_closed() {
    const N: usize = 10_000;
    let _many = super::helpers::MANY_SOCKETS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on this process, with a valid pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let need = (N + 1024) as libc::rlim_t;
    if lim.rlim_cur < need {
        if lim.rlim_max < need {
            crate::skip::not_here(format!(
                "RLIMIT_NOFILE's hard limit {} is under {need}",
                lim.rlim_max
            ));
            return;
        }
        lim.rlim_cur = need;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            crate::skip::not_here(format!("cannot raise RLIMIT_NOFILE to {need}"));
            return;
        }
    }
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let pid = probe.pid();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(u) = Usage::of(pid) {
                    most = most.max(u.fds);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            most
        })
    };
    let to: SocketAddr = format!("127.0.0.1:{}", agent.port).parse().unwrap();
    let t0 = Instant::now();
    let mut idle = Vec::with_capacity(N);
    for i in 0..N {
        let from: SocketAddr = format!("127.0.3.{}:0", 1 + i % 40).parse().unwrap();
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&from.into()).unwrap();
        sock.connect_timeout(&to.into(), Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("connection {i} of {N}: {e}"));
        let s: TcpStream = sock.into();
        s.set_nonblocking(true).unwrap();
        idle.push(s);
    }
    let opened = t0.elapsed();
    // All of them open (or being closed): an honest client is served.
    let t1 = Instant::now();
    probe.honest_client();
    let honest = t1.elapsed();
    let mut open: Vec<usize> = (0..N).collect();
    let mut buf = [0u8; 16];
    while !open.is_empty() {
        open.retain(|&i| match (&idle[i]).read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => true,
            Ok(n) if n > 0 => panic!("the agent sent bytes to a connection that never greeted"),
            _ => false,
        });
        assert!(
            t0.elapsed() < opened + Duration::from_secs(12),
            "{} of {N} idle connections still open {:?} after the last was made",
            open.len(),
            t0.elapsed() - opened
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let all_closed = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = watcher.join().unwrap();
    eprintln!(
        "{N} idle connections: made in {opened:?}; an honest client served in {honest:?} meanwhile; all closed \
         {:?} after the last was made; the agent held at most {most} descriptors (baseline {})",
        all_closed - opened,
        probe.baseline.fds
    );
    assert!(
        most <= probe.baseline.fds + 256 + 16,
        "the agent held {most} descriptors (baseline {}, 256 greeting)",
        probe.baseline.fds
    );
    drop(idle);
    probe.check("10,000 idle connections");
}

/// `ulimit -n 64`: an accept storm (silent connections, data hellos with
/// unknown cookies and control sessions, 300 at once) runs the agent out of
/// descriptors; it backs off instead of spinning or dying, says so in its
/// log, and serves an honest client once the storm is over.
#[test]
fn an_agent_under_ulimit_n_64_survives_an_accept_storm() {
    let mut agent = Served::start_after("ulimit -n 64", &[]);
    let probe = AgentProbe::attach(&mut agent);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", probe.pid())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.split_whitespace().nth(3) == Some("64")),
        "{limits}"
    );
    let port = agent.port;
    let storm: Vec<_> = (0..3u8)
        .map(|kind| {
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for i in 0..100u32 {
                    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
                        continue;
                    };
                    let _ = match kind {
                        0 => Ok(()),
                        1 => s.write_all(
                            &DataHello {
                                version: V,
                                cookie: SessionCookie([3; 16]),
                                flow: i,
                            }
                            .encode(),
                        ),
                        _ => s.write_all(
                            &ControlPreamble {
                                min_version: V,
                                max_version: V,
                            }
                            .encode(),
                        ),
                    };
                    held.push(s);
                }
                std::thread::sleep(Duration::from_millis(1500));
                held.len()
            })
        })
        .collect();
    let made: usize = storm.into_iter().map(|t| t.join().unwrap()).sum();
    let log = probe.log_with(&["accept failed", "Too many open files"]);
    assert!(
        log.contains("accept failed") && log.contains("Too many open files"),
        "the storm of {made} connections never ran the agent out of descriptors:\n{log}"
    );
    let failures = log.lines().filter(|l| l.contains("accept failed")).count();
    eprintln!("ulimit -n 64: {made} connections; {failures} log line(s) about failed accepts");
    assert!(
        failures < 20,
        "{failures} lines about failed accepts: not rate-limited"
    );
    probe.check("ulimit -n 64");
}

/// The port in use: for TCP, or for UDP only (the agent takes both): the
/// agent exits at once with status 2 naming the address and --port.
#[test]
fn a_port_in_use_is_named_with_the_option_to_change_it() {
    let serve = |port: u16| {
        let p = port.to_string();
        let mut child = netrig()
            .args(["serve", "-p", &p])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("netrig serve -p {port} started on a port in use");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    };
    let tcp = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let (udp, udp_port) = loop {
        let p = free_port();
        if let Ok(u) = UdpSocket::bind(("0.0.0.0", p)) {
            break (u, p);
        }
    };
    for (what, port) in [("TCP", port), ("UDP", udp_port)] {
        let o = serve(port);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {e}");
        assert!(
            e.contains(&format!(":{port}")) && e.contains("--port") && e.to_lowercase().contains("in use"),
            "{what}: {e}"
        );
        assert!(!e.contains("panicked"), "{e}");
    }
    drop((tcp, udp));
}

/// The issue's lesser case of memory after large tests (the agent kept
/// about 160 MB): a test whose buffers take the agent's RSS far past the
/// probe's margin (8 workers sending 16 MiB messages) leaves it back within
/// the margin, with its descriptors and threads as they were.
#[test]
fn memory_after_a_large_test_comes_back() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let p = agent.port_arg();
    let v = run_json(&[
        "tcp-maerts",
        "-H",
        "127.0.0.1",
        "-p",
        &p,
        "-P",
        "32",
        "-T",
        "8",
        "-m",
        "16M",
        "-l",
        "1",
    ]);
    // What matters is the buffers, not what moved: in a debug build
    // filling 8 x 16 MiB may take the whole second.
    assert_eq!(v["test"], "tcp-maerts");
    let status = std::fs::read_to_string(format!("/proc/{}/status", probe.pid())).unwrap();
    let peak: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(
        peak > probe.baseline.rss_kib + crate::probe::RSS_MARGIN_KIB,
        "the test took the agent to {peak} KiB only: too small to show memory kept"
    );
    let r = probe.check("a large test");
    eprintln!(
        "a large test: RSS {} KiB before, {peak} KiB at the peak, {} KiB after",
        probe.baseline.rss_kib, r.usage.rss_kib
    );
}

/// A data hello of another protocol version, or with bytes in its reserved
/// fields, with the right cookie: closed at once and not counted (a
/// version-99 hello was accepted); the proper hello then completes the set-up.
#[test]
fn a_data_hello_of_another_version_or_with_reserved_bytes_is_closed() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let mut r = Raw::open(agent.port);
    r.send(&ClientMsg::TestRequest {
        spec: spec(&stream_spec("tcp-stream", 1.0)),
        auth: None,
    });
    let AgentMsg::TestAccepted { cookie, .. } = r.next() else {
        panic!("not accepted")
    };
    let hello = DataHello {
        version: V,
        cookie,
        flow: 0,
    }
    .encode();
    let mut v99 = hello;
    v99[4..6].copy_from_slice(&99u16.to_be_bytes());
    let mut reserved = hello;
    reserved[30] = 1;
    for (what, bytes) in [("version 99", v99), ("a reserved byte set", reserved)] {
        let mut d = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
        d.write_all(&bytes).unwrap();
        let c = closed_after(&mut d, Instant::now(), Duration::from_secs(3));
        assert!(c < Duration::from_secs(2), "{what}: closed after {c:?}");
    }
    assert!(
        matches!(r.wait(Duration::from_millis(500)), Waited::Nothing),
        "a bad data hello was taken for the flow"
    );
    let mut own = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
    own.write_all(&hello).unwrap();
    assert!(matches!(r.next(), AgentMsg::DataReady));
    drop((r, own));
    probe.check("data hellos of another version or with reserved bytes");
}

/// One datagram with sequence number 2^64-1 among a flow's (it takes the
/// flow's addresses and its test id, which this test has as the client):
/// counted stray, and the loss and jitter the agent reports stay those of
/// the datagrams really sent (it made the loss 1.8e19 and the jitter 2.2e15 µs).
#[test]
fn a_datagram_numbered_2_to_the_64_minus_1_is_counted_stray() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    let mut r = Raw::open(agent.port);
    r.send(&ClientMsg::TestRequest {
        spec: spec(&json!({"test": {"kind": "udp-stream", "datagram_size": 1000,
                                    "pace": {"rate_bps": 10_000_000}},
                           "limit": {"duration": {"seconds": 1.0}}, "flows": 1})),
        auth: None,
    });
    let AgentMsg::TestAccepted { cookie, .. } = r.next() else {
        panic!("not accepted")
    };
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(("127.0.0.1", agent.port)).unwrap();
    sock.send(
        &DataHello {
            version: V,
            cookie,
            flow: 0,
        }
        .encode(),
    )
    .unwrap();
    assert!(matches!(r.next(), AgentMsg::DataReady));
    r.send(&ClientMsg::Go);
    let t0 = Instant::now();
    let mut datagram = [0u8; 1000];
    let mut send = |seq: u64| {
        netrig_proto::datagram::DatagramHeader {
            test_id: cookie.test_id(),
            flow: 0,
            seq,
            stamp_ns: t0.elapsed().as_nanos() as u64 + 1_000_000,
        }
        .write(&mut datagram);
        sock.send(&datagram).unwrap();
    };
    for seq in 0..600 {
        if seq == 300 {
            send(u64::MAX);
        }
        send(seq);
        std::thread::sleep(Duration::from_micros(500));
    }
    let report = loop {
        match r.next() {
            AgentMsg::Results { report } => break report,
            AgentMsg::Interval { .. } | AgentMsg::Heartbeat => {}
            m => panic!("{m:?}"),
        }
    };
    let udp = report.flows[0].udp.as_ref().expect("a UDP flow's report");
    let seq = udp.received.as_ref().expect("datagrams received");
    eprintln!(
        "2^64-1 among 600: received {}, lost {}, stray {}, jitter {} us",
        seq.received, seq.lost, udp.stray, seq.jitter_us
    );
    assert!(udp.stray >= 1, "{udp:?}");
    assert!(seq.received <= 600 && seq.received >= 500, "{seq:?}");
    assert!(seq.lost < 100, "{seq:?}");
    assert!(seq.jitter_us < 1e6, "{seq:?}");
    drop(r);
    probe.check("a datagram numbered 2^64-1");
}

/// Another tool's greeting (a 37-byte iperf3 cookie without its NUL, an
/// HTTP request, a TLS ClientHello, an SSH banner): closed at once without
/// a byte back, not held until the greeting timeout; iperf3 and HTTP are
/// named in the agent's log. (A whole iperf3 cookie is served: iperf3_serve.rs.)
#[test]
fn a_foreign_greeting_is_closed_at_once_and_named() {
    let mut agent = Served::start(&[]);
    let probe = AgentProbe::attach(&mut agent);
    for (what, bytes) in [
        ("iperf3", &b"k3qzb7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"[..]),
        ("HTTP", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("TLS", &[0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00]),
        ("SSH", b"SSH-2.0-OpenSSH_9.6\r\n"),
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
        let _ = s.write_all(bytes);
        let c = closed_after(&mut s, Instant::now(), Duration::from_secs(4));
        assert!(c < Duration::from_secs(2), "{what}: closed after {c:?}");
    }
    let log = probe.log_with(&["not iperf3's", "an HTTP request"]);
    assert!(
        log.contains("not iperf3's") && log.contains("an HTTP request"),
        "{log}"
    );
    probe.check("foreign greetings");
}

/// A hostile agent that floods its client with interval samples: the client
/// kept every one for as long as the test ran. It now takes at most one per
/// `-i` period of the test (and a few more), each with a value per flow at
/// most, and refuses the rest, ending the test with an error.
#[test]
fn an_agent_flooding_interval_samples_is_refused() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = l.local_addr().unwrap().port().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut d = netrig_proto::FrameDecoder::new();
        let mut next = |s: &mut TcpStream| -> ClientMsg {
            let mut buf = [0u8; 65536];
            loop {
                if let Some(m) = d.next_msg().unwrap() {
                    return m;
                }
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed");
                d.push(&buf[..n]).unwrap();
            }
        };
        let mut b = [0u8; 8];
        s.read_exact(&mut b).unwrap();
        let send = |s: &mut TcpStream, m: &AgentMsg| s.write_all(&netrig_proto::encode_frame(m));
        send(
            &mut s,
            &AgentMsg::Welcome {
                version: V,
                software: "fake".into(),
                limits: netrig_proto::AgentLimits::default(),
                auth: netrig_proto::auth::AgentAuth::default().welcome(),
                clock: None,
                name: None,
            },
        )
        .unwrap();
        assert!(matches!(next(&mut s), ClientMsg::Hello { .. }));
        send(&mut s, &AgentMsg::HelloAccepted { signature: None }).unwrap();
        assert!(matches!(next(&mut s), ClientMsg::TestRequest { .. }));
        send(
            &mut s,
            &AgentMsg::TestAccepted {
                cookie: SessionCookie([7; 16]),
                warnings: vec![],
            },
        )
        .unwrap();
        send(&mut s, &AgentMsg::DataReady).unwrap();
        assert!(matches!(next(&mut s), ClientMsg::Go));
        // A 3 s test at -i 1 has about 3 samples; send until the client
        // goes (at most 5 s).
        let until = Instant::now() + Duration::from_secs(5);
        for index in 0.. {
            if Instant::now() > until {
                break;
            }
            let sample = netrig_proto::report::IntervalSample {
                index,
                ids: vec![0],
                bytes: vec![0],
                ..Default::default()
            };
            if send(
                &mut s,
                &AgentMsg::Interval {
                    sample: Box::new(sample),
                },
            )
            .is_err()
            {
                break;
            }
        }
    });
    let t0 = Instant::now();
    let o = run(&["tcp-crr", "-H", "127.0.0.1", "-p", &p, "-l", "3", "-i", "1"]);
    let e = stderr(&o);
    assert!(!o.status.success() && o.status.code() != Some(101), "{e}");
    assert!(e.contains("beyond what the test can have"), "{e}");
    // Ended at the flood, not at the test's length (3 s) or later.
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    fake.join().unwrap();
}

/// A udp-rr spec of `req`-byte requests and `resp`-byte answers.
fn udp_rr_spec(req: u32, resp: u32, seconds: f64) -> Value {
    json!({"test": {"kind": "udp-rr", "transactions": {
               "request_size": req, "response_size": resp, "load": {"closed": {"burst": 1}}}},
           "limit": {"duration": {"seconds": seconds}}, "flows": 1})
}

/// Issue #37 (25): a udp-rr "client" that sent 28-byte requests without
/// waiting for answers and asked for 65,000-byte ones drew 6.7 Gbit/s from
/// the agent, 719 times what it sent. A UDP request proves nothing of who
/// sent it: the agent refuses answers larger than their request unless its
/// operator allows them (`--max-amplification`), and holds its sends to its
/// `--max-rate` whatever the client does. Here the client floods requests
/// (as fast as one thread sends, at most 200,000, for 1.5 s) and a thread
/// of its own only counts what comes back: at most the cap's bytes over the
/// time the agent may send (from `go` to its results), plus its burst.
#[test]
fn udp_requests_sent_without_waiting_draw_no_more_than_the_agents_cap() {
    // Without the operator's consent: refused by name.
    let plain = Served::start(&["--max-rate", "20M"]);
    let mut r = Raw::open(plain.port);
    r.send(&ClientMsg::TestRequest {
        spec: spec(&udp_rr_spec(28, 65_000, 0.5)),
        auth: None,
    });
    let AgentMsg::TestRejected { reason } = r.next() else {
        panic!("not refused")
    };
    assert!(
        reason.contains("65000-byte answers to 28-byte requests")
            && reason.contains("the agent allows at most UDP answers 1 times")
            && reason.contains("--max-amplification"),
        "{reason}"
    );
    drop(r);
    drop(plain);

    const CAP_BPS: f64 = 20e6;
    let mut agent = Served::start(&["--max-rate", "20M", "--max-amplification", "3000"]);
    // The honest client states its rate, as the cap asks.
    let probe = AgentProbe::attach_with(&mut agent, &["-b", "10M"]);
    let to: SocketAddr = format!("127.0.0.1:{}", agent.port).parse().unwrap();
    let mut r = Raw::open(agent.port);
    r.send(&ClientMsg::TestRequest {
        spec: spec(&udp_rr_spec(28, 65_000, 1.0)),
        auth: None,
    });
    let AgentMsg::TestAccepted { cookie, .. } = r.next() else {
        panic!("not accepted")
    };
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(to).unwrap();
    let hello = DataHello {
        version: V,
        cookie,
        flow: 0,
    }
    .encode();
    sock.send(&hello).unwrap();
    assert!(matches!(r.next(), AgentMsg::DataReady));
    // The counter: every byte that comes back, read at once.
    let counter = sock.try_clone().unwrap();
    counter.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counting = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            let mut bytes = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = counter.recv(&mut buf) {
                    bytes += n as u64;
                }
            }
            bytes
        })
    };
    let t0 = Instant::now();
    r.send(&ClientMsg::Go);
    let mut req = [0u8; 28];
    let mut sent = 0u64;
    while t0.elapsed() < Duration::from_millis(1500) && sent < 200_000 {
        netrig_proto::datagram::DatagramHeader {
            test_id: cookie.test_id(),
            flow: 0,
            seq: sent,
            stamp_ns: 0,
        }
        .write(&mut req);
        if sock.send(&req).is_ok() {
            sent += 1;
        }
        if sent.is_multiple_of(64) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let report = loop {
        match r.wait(Duration::from_secs(15)) {
            Waited::Msg(AgentMsg::Results { report }) => break report,
            Waited::Msg(AgentMsg::Interval { .. } | AgentMsg::Heartbeat) => {}
            other => panic!("{other:?}"),
        }
    };
    let sending = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let got = counting.join().unwrap();
    let most = CAP_BPS / 8.0 * sending * 1.2 + 256.0 * 1024.0;
    eprintln!(
        "{sent} requests of 28 bytes ({} bytes) in {sending:.2} s; {got} bytes came back ({:.1} Mbit/s), at most \
         {most:.0} allowed; the agent warned: {:?}",
        sent * 28,
        got as f64 * 8.0 / sending / 1e6,
        report.warnings
    );
    assert!(sent > 1000, "only {sent} requests sent");
    assert!(
        (got as f64) <= most,
        "{got} bytes came back, over the cap's {most:.0}"
    );
    assert!(got > 65_000, "nothing came back: {got} bytes");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("--max-rate 20 Mbit/s held its sends")),
        "{:?}",
        report.warnings
    );
    drop((r, sock));
    probe.check("UDP requests sent without waiting for answers");
}
