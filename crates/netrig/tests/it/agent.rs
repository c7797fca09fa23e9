//! The agent under hostile or careless peers: it stays up, bounded, and
//! keeps serving real tests.

use crate::helpers::*;
use netrig_proto::{AgentMsg, ControlPreamble, FrameDecoder};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn read_msg(s: &mut TcpStream) -> AgentMsg {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut d = FrameDecoder::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = d.next_msg().unwrap() {
            return m;
        }
        let n = s.read(&mut buf).expect("agent answered");
        assert!(n > 0, "agent closed without a message");
        d.push(&buf[..n]).unwrap();
    }
}

fn control(port: u16, min: u16, max: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(
        &ControlPreamble {
            min_version: min,
            max_version: max,
        }
        .encode(),
    )
    .unwrap();
    s
}

#[test]
fn agent_answers_an_old_or_new_client_with_its_versions() {
    let agent = Served::start(&[]);
    let mut s = control(agent.port, 50, 60);
    match read_msg(&mut s) {
        AgentMsg::VersionMismatch {
            agent_min, agent_max, ..
        } => {
            assert_eq!(
                (agent_min, agent_max),
                (netrig_proto::MIN_PROTOCOL_VERSION, netrig_proto::PROTOCOL_VERSION)
            )
        }
        m => panic!("{m:?}"),
    }
}

#[test]
fn agent_survives_garbage_and_keeps_serving() {
    let agent = Served::start(&["--max-sessions", "4"]);
    let port = agent.port;
    // Not a netrig greeting.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    // A data connection with a cookie nobody issued is closed without a byte.
    let mut d = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let hello = netrig_proto::DataHello {
        version: 1,
        cookie: netrig_proto::SessionCookie([9; 16]),
        flow: 0,
    };
    d.write_all(&hello.encode()).unwrap();
    d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(
        d.read(&mut b).unwrap_or(0),
        0,
        "unknown cookie must get nothing back"
    );
    // A frame announcing 1 GiB is refused, not buffered.
    let mut c = control(port, 1, 1);
    assert!(matches!(read_msg(&mut c), AgentMsg::Welcome { .. }));
    c.write_all(&(1u32 << 30).to_be_bytes()).unwrap();
    match read_msg(&mut c) {
        AgentMsg::Error { message } => assert!(message.contains("exceeds the limit"), "{message}"),
        m => panic!("{m:?}"),
    }
    // A client that connects and says nothing holds no slot for long; many of them are bounded.
    let idle: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Out-of-order control messages end that session with a clear error.
    let mut c = control(port, 1, 1);
    read_msg(&mut c);
    c.write_all(&netrig_proto::encode_frame(&netrig_proto::ClientMsg::Go))
        .unwrap();
    match read_msg(&mut c) {
        AgentMsg::Error { message } => assert!(message.contains("unexpected message go"), "{message}"),
        m => panic!("{m:?}"),
    }
    // Still serves a real test.
    let p = agent.port_arg();
    let v = run_json(&["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "0.3"]);
    assert!(u(&v, "/summary/bytes") > 0);
    drop(idle);
}

#[test]
fn agent_at_its_session_limit_says_busy() {
    let agent = Served::start(&["--max-sessions", "1"]);
    let mut first = control(agent.port, 1, 1);
    assert!(matches!(read_msg(&mut first), AgentMsg::Welcome { .. }));
    let p = agent.port_arg();
    let o = run(&["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "0.3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("agent is busy") && stderr(&o).contains("--max-sessions"),
        "{}",
        stderr(&o)
    );
    drop(first);
}

#[test]
fn agent_limits_are_enforced_and_named() {
    let agent = Served::start(&["--max-duration", "5", "--max-flows", "2"]);
    let p = agent.port_arg();
    let o = run(&["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "10"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-l/--length 10 is out of range (0, 5]"),
        "{}",
        stderr(&o)
    );
    let o = run(&["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-P", "3", "-l", "1"]);
    assert!(
        stderr(&o).contains("-P/--parallel 3 is out of range 1..=2"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn client_that_vanishes_mid_test_frees_the_agent() {
    let agent = Served::start(&[]);
    let p = agent.port_arg();
    let mut child = netrig()
        .args(["tcp-bidir", "-H", "127.0.0.1", "-p", &p, "-l", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    // The agent notices and serves the next client at once.
    let v = run_json(&["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "0.3"]);
    assert!(u(&v, "/summary/bytes") > 0);
}
