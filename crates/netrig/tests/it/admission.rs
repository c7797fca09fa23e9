//! Who gets the agent's sessions (docs/SECURITY.md, "Admission";
//! docs/HOSTILE.md, issue #37's items 19, 24, 26 and 30): connections that
//! never finish their hello, from several addresses and reconnecting
//! whenever closed, must not lock out an honest client from another address
//! (nor an authenticated one on an agent with keys); a test whose data
//! connections never come holds none of the agent's threads; a partial hello
//! is closed at the greeting's deadline; a client outside --allow is told so,
//! and --allow covers the HTTP port beside the agent.
//!
//! 127.0.0.x are all loopback: each is a client of its own to the agent.
//! Every flood runs for a few seconds at most, in a bounded number of threads.

use crate::helpers::*;
use netrig_proto::{AgentMsg, ClientMsg};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a flooding connection sends before it waits to be closed.
#[derive(Clone, Copy, Debug)]
enum Flood {
    /// The preamble alone.
    Preamble,
    /// The preamble and part of a hello frame (its length and a few bytes).
    PartialHello,
    /// The preamble and a whole hello (without a key), then nothing.
    IdleHello,
}

fn connect_from(local: &str, port: u16) -> Option<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let local: SocketAddr = format!("{local}:0").parse().unwrap();
    sock.bind(&local.into()).ok()?;
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect_timeout(&to.into(), Duration::from_secs(2)).ok()?;
    Some(sock.into())
}

/// One connection of `kind` from `local`, opened again whenever the agent
/// closes it (after 50 ms), until `stop`.
fn flood(port: u16, local: String, kind: Flood, stop: Arc<AtomicBool>) -> JoinHandle<u32> {
    std::thread::spawn(move || {
        let mut opened = 0;
        let v = netrig_proto::PROTOCOL_VERSION;
        while !stop.load(Ordering::Relaxed) {
            let Some(mut s) = connect_from(&local, port) else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            opened += 1;
            let mut out = netrig_proto::ControlPreamble {
                min_version: v,
                max_version: v,
            }
            .encode()
            .to_vec();
            match kind {
                Flood::Preamble => {}
                Flood::PartialHello => out.extend_from_slice(&[0, 0, 0, 100, b'{', b'"']),
                Flood::IdleHello => out.extend(netrig_proto::encode_frame(&ClientMsg::Hello {
                    software: "flood".into(),
                    auth: netrig_proto::auth::HelloAuth {
                        nonce: netrig_proto::auth::Nonce::random(),
                        client_key: None,
                        signature: None,
                    },
                })),
            }
            if s.write_all(&out).is_err() {
                continue;
            }
            // Read (and drop) what comes until the agent closes.
            s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            let mut buf = [0u8; 4096];
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        opened
    })
}

/// Floods from 127.0.0.2 to 127.0.0.9: per address `each` connections of
/// each kind. Returns the stop flag and the threads.
fn floods(port: u16, each: &[(Flood, usize)]) -> (Arc<AtomicBool>, Vec<JoinHandle<u32>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for host in 2..=9 {
        for &(kind, n) in each {
            for _ in 0..n {
                threads.push(flood(port, format!("127.0.0.{host}"), kind, stop.clone()));
            }
        }
    }
    (stop, threads)
}

/// Reads the agent's log as it comes (a flood's warnings must not fill the
/// pipe and stall it); gives it all when the agent ends.
fn drain_log(agent: &mut Served) -> JoinHandle<String> {
    let mut e = agent.child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = e.read_to_string(&mut out);
        out
    })
}

/// Runs a short tcp-crr test in the session: it is served, not only welcomed.
fn short_test(r: &mut Raw) -> Result<(), String> {
    let crr: netrig_proto::TestSpec = serde_json::from_value(json!({
        "test": {"kind": "tcp-crr", "transactions": {
            "request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}}},
        "limit": {"duration": {"seconds": 0.3}}, "flows": 1}))
    .unwrap();
    r.send(&ClientMsg::TestRequest {
        spec: crr,
        auth: None,
    });
    loop {
        match r.wait(Duration::from_secs(5)) {
            Waited::Msg(AgentMsg::TestAccepted { .. } | AgentMsg::Interval { .. } | AgentMsg::Heartbeat) => {}
            Waited::Msg(AgentMsg::DataReady) => r.send(&ClientMsg::Go),
            Waited::Msg(AgentMsg::Results { .. }) => return Ok(()),
            other => return Err(format!("{other:?}")),
        }
    }
}

fn stop_floods(stop: Arc<AtomicBool>, threads: Vec<JoinHandle<u32>>) -> u32 {
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

/// Tries a session from `local` until one is accepted (`hello` says how:
/// it returns the agent's answer to the hello) or `limit` passes; each try
/// bounded. Returns how long it took, or what the agent said on the last try.
fn session_within(
    local: &str,
    port: u16,
    limit: Duration,
    hello: impl Fn(&mut Raw, &AgentMsg) -> Option<AgentMsg>,
) -> Result<(Duration, Raw), String> {
    let t0 = Instant::now();
    let mut last = String::from("nothing");
    while t0.elapsed() < limit {
        let mut r = Raw::greet(local, port);
        match r.wait(Duration::from_secs(3)) {
            Waited::Msg(w @ AgentMsg::Welcome { .. }) => match hello(&mut r, &w) {
                Some(AgentMsg::HelloAccepted { .. }) => return Ok((t0.elapsed(), r)),
                other => last = format!("answered the hello with {other:?}"),
            },
            other => last = format!("answered the preamble with {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last)
}

fn plain_hello(r: &mut Raw, _: &AgentMsg) -> Option<AgentMsg> {
    r.send(&ClientMsg::Hello {
        software: "honest".into(),
        auth: netrig_proto::auth::HelloAuth {
            nonce: netrig_proto::auth::Nonce::random(),
            client_key: None,
            signature: None,
        },
    });
    answer(r)
}

/// The agent's next message within 3 s, if any.
fn answer(r: &mut Raw) -> Option<AgentMsg> {
    match r.wait(Duration::from_secs(3)) {
        Waited::Msg(m) => Some(m),
        _ => None,
    }
}

/// 8 addresses, each with 6 connections that sent only their preamble, 3
/// with a partial hello and 2 with a whole hello and nothing since, all
/// reconnecting whenever closed: 88 connections for an agent with 8 session
/// places. An honest client from a ninth address gets a session within
/// seconds (today's agent: `busy` for as long as the flood lasts).
#[test]
fn floods_of_unfinished_and_idle_sessions_leave_room_for_an_honest_client() {
    let mut agent = Served::start(&["--max-sessions", "8"]);
    let log = drain_log(&mut agent);
    let (stop, threads) = floods(
        agent.port,
        &[
            (Flood::Preamble, 6),
            (Flood::PartialHello, 3),
            (Flood::IdleHello, 2),
        ],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let honest = session_within("127.0.0.20", agent.port, Duration::from_secs(8), plain_hello);
    // The flood goes on while the honest session runs a test.
    let served = honest.map(|(took, mut r)| (took, short_test(&mut r)));
    let opened = stop_floods(stop, threads);
    drop(agent);
    let log = log.join().unwrap();
    let (took, test) = served.unwrap_or_else(|last| {
        panic!(
            "no session for an honest client within 8 s of a flood ({opened} connections opened): {last}\n\
             agent's log ({} bytes), its end: {}",
            log.len(),
            &log[log.len().saturating_sub(3000)..]
        )
    });
    let room = log.matches("closed an idle session of").count();
    let waiting = log.matches("waiting for its hello, to make room").count();
    eprintln!(
        "honest session after {took:?}; the flood opened {opened} connections; the agent closed {room} idle \
         session(s) and logged {waiting} pre-session eviction(s) (rate-limited) to make room"
    );
    assert!(opened >= 88, "the flood ran ({opened} connections)");
    // The flood took every place (one was given up for the honest client)
    // and overflowed its pre-session shares.
    assert!(room >= 1 && waiting >= 1, "{room} {waiting}");
    test.expect("the honest session's test");
}

/// On an agent with --authorized-keys: the same flood, its hellos without a
/// key (refused, and sent again), does not keep an authenticated client out.
#[test]
fn on_an_agent_with_keys_unauthenticated_floods_leave_room_for_an_authenticated_client() {
    let dir = TempDir::new("admission-keys");
    let key = dir.path().join("alice");
    let o = run(&["keygen", "-o", key.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let secret = netrig_proto::auth::SecretKey::parse(&std::fs::read_to_string(&key).unwrap()).unwrap();
    let authorized = dir.path().join("authorized");
    std::fs::copy(format!("{}.pub", key.display()), &authorized).unwrap();
    let mut agent = Served::start(&[
        "--max-sessions",
        "8",
        "--authorized-keys",
        authorized.to_str().unwrap(),
    ]);
    let log = drain_log(&mut agent);
    let (stop, threads) = floods(
        agent.port,
        &[
            (Flood::Preamble, 6),
            (Flood::PartialHello, 3),
            (Flood::IdleHello, 2),
        ],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let signed = |r: &mut Raw, w: &AgentMsg| {
        let AgentMsg::Welcome { version, auth, .. } = w else {
            return None;
        };
        let client = netrig_proto::auth::ClientAuth {
            key: Some(secret.clone()),
            agent_key: None,
        };
        let (hello, _) = client.hello(*version, auth).ok()?;
        r.send(&ClientMsg::Hello {
            software: "honest".into(),
            auth: hello,
        });
        answer(r)
    };
    let honest = session_within("127.0.0.20", agent.port, Duration::from_secs(8), signed);
    let opened = stop_floods(stop, threads);
    drop(agent);
    let log = log.join().unwrap();
    assert!(
        log.contains("waiting for its hello, to make room"),
        "the flood overflowed its shares"
    );
    match honest {
        Ok((took, _)) => eprintln!("authenticated session after {took:?}; the flood opened {opened}"),
        Err(last) => panic!(
            "no session for an authenticated client within 8 s of a flood ({opened} connections opened): {last}"
        ),
    }
}

/// After the welcome, a hello that never completes is closed at the
/// greeting's deadline (5 s), not the set-up step's 30 s, with the reason.
#[test]
fn a_partial_hello_is_closed_at_the_greeting_timeout() {
    let agent = Served::start(&[]);
    let mut r = Raw::greet("127.0.0.1", agent.port);
    assert!(matches!(r.next(), AgentMsg::Welcome { .. }));
    let t0 = Instant::now();
    r.s.write_all(&[0, 0, 0, 100, b'{', b'"']).unwrap();
    let answer = r.wait(Duration::from_secs(12));
    let took = t0.elapsed();
    match answer {
        Waited::Msg(AgentMsg::Error { message }) => {
            assert!(message.contains("no whole hello within 5 s"), "{message}")
        }
        other => panic!("after {took:?}: expected an error naming the greeting timeout, got {other:?}"),
    }
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(10),
        "closed after {took:?}"
    );
}

/// A session that asks for 15 flows on 15 workers (all 16 threads of the
/// agent's --max-threads) and opens no data connection holds none of them:
/// another client's test is accepted at once (today's agent: `busy` for
/// 30 s), and the first is given up 10 s after its last sign of progress.
#[test]
fn a_test_whose_data_connections_never_come_holds_no_threads() {
    let agent = Served::start(&["--max-threads", "16"]);
    let mut a = Raw::open_from("127.0.0.2", agent.port);
    let greedy = json!({"test": {"kind": "tcp-stream", "message_size": 1024, "recv_size": 1024},
                        "limit": {"duration": {"seconds": 10.0}}, "flows": 15, "workers": 15});
    a.send(&ClientMsg::TestRequest {
        spec: serde_json::from_value(greedy).unwrap(),
        auth: None,
    });
    let t0 = Instant::now();
    assert!(matches!(a.next(), AgentMsg::TestAccepted { .. }));
    let crr: netrig_proto::TestSpec = serde_json::from_value(json!({
        "test": {"kind": "tcp-crr", "transactions": {
            "request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}}},
        "limit": {"duration": {"seconds": 0.3}}, "flows": 1}))
    .unwrap();
    let mut b = Raw::open_from("127.0.0.3", agent.port);
    b.send(&ClientMsg::TestRequest {
        spec: crr,
        auth: None,
    });
    match b.next() {
        AgentMsg::TestAccepted { .. } => {}
        other => panic!("the second client's test: {other:?}"),
    }
    assert!(matches!(b.next(), AgentMsg::DataReady));
    b.send(&ClientMsg::Go);
    loop {
        match b.next() {
            AgentMsg::Results { .. } => break,
            AgentMsg::Interval { .. } | AgentMsg::Heartbeat => {}
            m => panic!("{m:?}"),
        }
    }
    // The first is given up, saying why, 10 s after test_accepted (and margins).
    match a.wait(Duration::from_secs(16)) {
        Waited::Msg(AgentMsg::Error { message }) => {
            assert!(message.contains("no data connection within 10 s"), "{message}")
        }
        other => panic!("the test without data connections: {other:?}"),
    }
    let took = t0.elapsed();
    assert!(
        took > Duration::from_secs(9) && took < Duration::from_secs(16),
        "{took:?}"
    );
}

/// A client outside --allow is told that the agent refused its address
/// (not "did not answer like a netrig agent: connection reset"), with the
/// exit status of a refusal; a burst of such connections gets a few answers
/// a second, the rest are closed without one.
#[test]
fn a_client_outside_allow_is_told_its_address_is_refused() {
    let agent = Served::start(&["--allow", "127.0.0.1/32"]);
    let p = agent.port_arg();
    let mut args = at(&p, "tcp-stream -l 0.3");
    args.extend(["--bind".to_string(), "127.0.0.5".to_string()]);
    let o = run(&strs(&args));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("refused this client")
            && err.contains("127.0.0.1/32")
            && err.contains("--allow")
            && err.contains("127.0.0.5"),
        "{err}"
    );
    assert!(!err.contains("did not answer like a netrig agent"), "{err}");
    // A burst: at most a few answers a second per address.
    let mut told = 0;
    let t0 = Instant::now();
    for _ in 0..30 {
        let mut s = connect_from("127.0.0.6", agent.port).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 512];
        if matches!(s.read(&mut buf), Ok(n) if n > 0) {
            told += 1;
        }
    }
    let secs = t0.elapsed().as_secs_f64().ceil() as u32;
    assert!(told >= 1 && told <= 2 * (secs + 1), "{told} answers in {secs} s");
    // An address inside is served as ever.
    let o = run(&strs(&at(&p, "tcp-stream -l 0.3")));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `serve --allow` covers the HTTP port beside the agent: a client outside
/// gets 403 and no body of bytes; one inside is served.
#[test]
fn allow_covers_the_http_port_beside_the_agent() {
    let http = free_port();
    let h = http.to_string();
    let _agent = Served::start(&[
        "--allow",
        "127.0.0.1/32",
        "--bind",
        "127.0.0.1",
        "--http-port",
        &h,
    ]);
    let get = |from: &str| -> String {
        let t0 = Instant::now();
        let mut s = loop {
            match connect_from(from, http) {
                Some(s) => break s,
                None if t0.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                None => panic!("the HTTP port {http} never opened"),
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let inside = get("127.0.0.1");
    assert!(inside.starts_with("HTTP/1.1 200"), "{inside}");
    let outside = get("127.0.0.5");
    assert!(
        !outside.contains(" 200 "),
        "served from outside --allow: {outside}"
    );
    assert!(
        outside.starts_with("HTTP/1.1 403") && outside.contains("--allow"),
        "{outside}"
    );
}

/// All places taken: a newcomer from an address holding fewer takes the
/// place of the oldest idle session of the address holding the most, which
/// is told why (with equal shares, the oldest idle one); a session running
/// a test is never closed for room, and an address cannot take a place from
/// one holding fewer than it does.
#[test]
fn an_idle_session_gives_its_place_to_a_client_holding_fewer_and_is_told_why() {
    let agent = Served::start(&["--max-sessions", "2"]);
    let mut old = Raw::open_from("127.0.0.2", agent.port);
    std::thread::sleep(Duration::from_millis(20));
    let mut busy = Raw::open_from("127.0.0.2", agent.port);
    // `busy` runs a test (a tcp-crr whose connections never come: it runs its 3 s).
    busy.send(&ClientMsg::TestRequest {
        spec: serde_json::from_value(json!({
            "test": {"kind": "tcp-crr", "transactions": {
                "request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}}},
            "limit": {"duration": {"seconds": 3.0}}, "flows": 1}))
        .unwrap(),
        auth: None,
    });
    assert!(matches!(busy.next(), AgentMsg::TestAccepted { .. }));
    assert!(matches!(busy.next(), AgentMsg::DataReady));
    busy.send(&ClientMsg::Go);
    // 127.0.0.3 holds none: 127.0.0.2's idle session gives way.
    let mut new = Raw::open_from("127.0.0.3", agent.port);
    match old.wait(Duration::from_secs(5)) {
        Waited::Msg(AgentMsg::Error { message }) => assert!(
            message.contains("to make room")
                && message.contains("127.0.0.2")
                && message.contains("--max-sessions"),
            "{message}"
        ),
        other => panic!("the idle session: {other:?}"),
    }
    // 127.0.0.4 holds none: the only idle session, 127.0.0.3's, gives way
    // (127.0.0.2's runs a test).
    let _newer = Raw::open_from("127.0.0.4", agent.port);
    match new.wait(Duration::from_secs(5)) {
        Waited::Msg(AgentMsg::Error { message }) => assert!(message.contains("127.0.0.3"), "{message}"),
        other => panic!("127.0.0.3's idle session: {other:?}"),
    }
    // 127.0.0.2 holds one, as 127.0.0.4 does: busy.
    let mut r = Raw::greet("127.0.0.2", agent.port);
    assert!(matches!(r.next(), AgentMsg::Welcome { .. }));
    r.send(&ClientMsg::Hello {
        software: "late".into(),
        auth: netrig_proto::auth::HelloAuth {
            nonce: netrig_proto::auth::Nonce::random(),
            client_key: None,
            signature: None,
        },
    });
    match r.next() {
        AgentMsg::Busy { reason } => assert!(reason.contains("--max-sessions"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // The running test was not disturbed.
    loop {
        match busy.next() {
            AgentMsg::Results { .. } => break,
            AgentMsg::Interval { .. } | AgentMsg::Heartbeat => {}
            m => panic!("the running session: {m:?}"),
        }
    }
}

/// A session whose test the agent refused before running it (here for want of threads, from
/// the totals all tests share) is idle again: it gives its place to a newcomer as any idle
/// session does. It stayed marked busy until its next message, so a client whose test was
/// refused kept its place for good (a session that asked for a test once was never closed for
/// room).
#[test]
fn a_session_whose_test_was_refused_is_idle_again_and_gives_its_place() {
    let agent = Served::start(&["--max-sessions", "1", "--max-threads", "2"]);
    let mut refused = Raw::open_from("127.0.0.2", agent.port);
    refused.send(&ClientMsg::TestRequest {
        spec: serde_json::from_value(json!({
            "test": {"kind": "tcp-crr", "transactions": {
                "request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}}},
            "limit": {"duration": {"seconds": 1.0}}, "flows": 8}))
        .unwrap(),
        auth: None,
    });
    match refused.next() {
        AgentMsg::TestRejected { reason } => assert!(reason.contains("thread"), "{reason}"),
        other => panic!("the test was to be refused for want of threads: {other:?}"),
    }
    // 127.0.0.3 holds none: the refused session, idle, gives way.
    let mut new = Raw::greet("127.0.0.3", agent.port);
    assert!(matches!(new.next(), AgentMsg::Welcome { .. }));
    new.send(&ClientMsg::Hello {
        software: "newcomer".into(),
        auth: netrig_proto::auth::HelloAuth {
            nonce: netrig_proto::auth::Nonce::random(),
            client_key: None,
            signature: None,
        },
    });
    match new.next() {
        AgentMsg::HelloAccepted { .. } => {}
        other => panic!("the refused session kept its place; the newcomer was told: {other:?}"),
    }
    match refused.wait(Duration::from_secs(5)) {
        Waited::Msg(AgentMsg::Error { message }) => assert!(
            message.contains("to make room") && message.contains("--max-sessions"),
            "{message}"
        ),
        other => panic!("the refused session kept its place: {other:?}"),
    }
}

/// Connections that have not sent their greeting yet (at most 256 wait):
/// when one more comes, the oldest of the address with the most waiting is
/// closed, so 300 silent connections from one address do not push out
/// another address's connection, older than all of them (today's agent:
/// the oldest of all, that one, closed first).
#[test]
fn silent_connections_from_one_address_do_not_push_out_anothers() {
    let agent = Served::start(&[]);
    let mut other = connect_from("127.0.0.3", agent.port).expect("connect");
    std::thread::sleep(Duration::from_millis(100));
    let mut flood = Vec::new();
    for _ in 0..300 {
        if let Some(s) = connect_from("127.0.0.2", agent.port) {
            flood.push(s);
        }
    }
    assert!(flood.len() > 256, "{} connections made", flood.len());
    // Give the agent time to take them all (and close 44 of 127.0.0.2's).
    let t0 = Instant::now();
    let closed = |mut s: &TcpStream| {
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        match s.read(&mut [0u8; 1]) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    };
    let mut flood_closed = 0;
    while t0.elapsed() < Duration::from_secs(2) {
        flood_closed = flood.iter().filter(|s| closed(s)).count();
        if flood_closed >= flood.len() - 256 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        flood_closed >= flood.len() - 256,
        "{flood_closed} of the flood closed"
    );
    assert!(
        !closed(&other),
        "127.0.0.3's connection was closed for 127.0.0.2's"
    );
    // It still greets, and is served.
    other
        .write_all(
            &netrig_proto::ControlPreamble {
                min_version: netrig_proto::PROTOCOL_VERSION,
                max_version: netrig_proto::PROTOCOL_VERSION,
            }
            .encode(),
        )
        .unwrap();
    other.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut d = netrig_proto::FrameDecoder::with_limit(1 << 20);
    let mut buf = [0u8; 4096];
    let n = other.read(&mut buf).expect("a welcome");
    d.push(&buf[..n]).unwrap();
    assert!(matches!(
        d.next_msg::<AgentMsg>(),
        Ok(Some(AgentMsg::Welcome { .. }))
    ));
}
