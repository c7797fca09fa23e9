//! A client pointed at another tool's server says what it found (issue #11,
//! "recognise the neighbours"), and does not wait the 10 s a welcome may take
//! for one that says nothing.
//!
//! What iperf3 3.21 and netserver (netperf 2.7.1) do with netrig's preamble
//! was measured on loopback (docs/PROTOCOL.md, "Not an agent"): fakes that
//! answer with those bytes need no peer; the real servers are tested when
//! `iperf3` and `netserver` are on PATH (skipped, saying so, where not).

use crate::helpers::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The client's wait for a welcome: giving up on a silent peer must come before it.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// A fake server on loopback: each connection is handed to `answer`, on a
/// thread of its own, until the test ends.
fn fake(answer: fn(TcpStream)) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || answer(s));
        }
    });
    port
}

/// Reads netrig's 8-byte preamble, as iperf3 reads the first 8 bytes of its cookie.
fn read_preamble(s: &mut TcpStream) {
    let mut b = [0u8; 8];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b[..4], b"NRGC");
}

/// A test against 127.0.0.1:`port` that must fail: its output and how long it took.
/// `--peer netrig`: a netrig agent only (by default an iperf3 server is measured,
/// iperf3_client.rs).
fn refused(port: u16) -> (Output, Duration) {
    let start = Instant::now();
    let o = run(&[
        "tcp-stream",
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-l",
        "1",
        "--peer",
        "netrig",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    (o, took)
}

#[test]
fn a_fake_iperf3_server_is_named_from_its_answer() {
    // Busy with another test: ACCESS_DENIED (-1), then close.
    let busy = fake(|mut s| {
        let _ = s.write_all(&[0xFF]);
    });
    // Idle, 10 s after the preamble: SERVER_ERROR (-2), error 106
    // (IERECVCOOKIE) and errno 0, then close (here at once).
    let gave_up = fake(|mut s| {
        read_preamble(&mut s);
        let _ = s.write_all(&[0xFE, 0, 0, 0, 106, 0, 0, 0, 0]);
    });
    for (port, how) in [
        (busy, "ACCESS_DENIED"),
        (
            gave_up,
            "SERVER_ERROR (iperf3 error 106, unable to receive its client's cookie)",
        ),
    ] {
        let (o, _) = refused(port);
        let e = stderr(&o);
        assert!(
            e.contains(&format!(
                "127.0.0.1:{port} is an iperf3 server, not a netrig agent"
            )),
            "{e}"
        );
        assert!(e.contains(how), "{e}");
        assert!(e.contains("(run `netrig serve` there, or use iperf3)"), "{e}");
    }
}

#[test]
fn a_server_that_speaks_first_is_named_and_other_bytes_are_shown() {
    let ssh = fake(|mut s| {
        let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n");
        std::thread::sleep(Duration::from_secs(20));
    });
    let (o, _) = refused(ssh);
    let e = stderr(&o);
    assert!(e.contains("is an SSH server, not a netrig agent"), "{e}");
    assert!(e.contains("\"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\""), "{e}");
    let binary = fake(|mut s| {
        read_preamble(&mut s);
        let _ = s.write_all(&[0x16, 0x03, 0x01]);
    });
    let (o, _) = refused(binary);
    let e = stderr(&o);
    assert!(
        e.contains(
            "did not answer like a netrig agent: it answered netrig's greeting with the bytes 16 03 01"
        ),
        "{e}"
    );
}

#[test]
fn a_silent_server_is_given_up_on_before_the_welcome_timeout() {
    let silent = fake(|mut s| {
        read_preamble(&mut s);
        std::thread::sleep(Duration::from_secs(30));
    });
    let (o, took) = refused(silent);
    let e = stderr(&o);
    assert!(
        e.contains("did not answer like a netrig agent: no answer to netrig's greeting in the"),
        "{e}"
    );
    assert!(e.contains("out of file descriptors"), "{e}");
    assert!(took < WELCOME_TIMEOUT, "gave up only after {took:?}");
    // One that closes without a word.
    let closes = fake(|mut s| read_preamble(&mut s));
    let (o, _) = refused(closes);
    assert!(
        stderr(&o).contains("it closed the connection without a word after netrig's greeting"),
        "{}",
        stderr(&o)
    );
}

/// A real agent is not mistaken for a neighbour, and its welcome still comes through.
#[test]
fn a_real_agent_is_still_an_agent() {
    let agent = Served::start(&[]);
    let v = run_json(&[
        "tcp-stream",
        "-H",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-l",
        "0.3",
    ]);
    assert!(u(&v, "/summary/bytes") > 0);
}

/// `name` on PATH, if it is there.
/// iperf3, which CI installs (Debian's), and netserver where there is one: netperf is not in
/// Debian's main archive, so a machine without it runs the iperf3 parts alone, saying so.
fn peers() -> (Option<std::path::PathBuf>, Option<std::path::PathBuf>) {
    let iperf3 = peer("iperf3");
    if iperf3.is_none() {
        crate::skip::missing(
            "iperf3 is not on PATH (apt-get install iperf3, or PATH=/work/shared/peers:$PATH)",
        );
    }
    let netserver = peer("netserver");
    if iperf3.is_some() && netserver.is_none() {
        crate::skip::not_here(
            "the netserver parts: netserver is not on PATH (netperf is not in Debian's main \
             archive; PATH=/work/shared/peers:$PATH where it is built)",
        );
    }
    (iperf3, netserver)
}

fn peer(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and waits until something listens on `port` (in `ns`, or on loopback).
fn listening(mut cmd: Command, port: u16, ns: Option<&Netns>) -> Killed {
    let child = Killed(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a peer"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let filter = format!("sport = :{port}");
    loop {
        let mut ss = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.0, "ss"]);
                c
            }
            None => Command::new("ss"),
        };
        let up = ss
            .args(["-Htln", &filter])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        if up {
            return child;
        }
        assert!(
            Instant::now() < deadline,
            "the peer did not listen on {port} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn iperf3_server(bin: &std::path::Path, port: u16) -> Killed {
    let mut c = Command::new(bin);
    c.args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()]);
    listening(c, port, None)
}

fn netserver(bin: &std::path::Path, port: u16) -> Killed {
    let mut c = Command::new(bin);
    c.args(["-D", "-L", "127.0.0.1,inet", "-p", &port.to_string()]);
    listening(c, port, None)
}

#[test]
fn real_iperf3_and_netserver_are_told_apart_from_an_agent() {
    let (Some(iperf3), netserver_bin) = peers() else {
        return;
    };
    // Idle servers say nothing: given up on before the welcome timeout.
    let ip = free_port();
    let _iperf3 = iperf3_server(&iperf3, ip);
    let mut ports = vec![ip];
    let _netserver = netserver_bin.map(|bin| {
        let np = free_port();
        ports.push(np);
        netserver(&bin, np)
    });
    let silent: Vec<_> = ports
        .into_iter()
        .map(|p| std::thread::spawn(move || (p, refused(p))))
        .collect();
    for t in silent {
        let (port, (o, took)) = t.join().unwrap();
        let e = stderr(&o);
        assert!(
            e.contains(&format!(
                "127.0.0.1:{port} did not answer like a netrig agent: no answer"
            )),
            "{e}"
        );
        assert!(took < WELCOME_TIMEOUT, "port {port}: gave up only after {took:?}");
    }
    // A busy iperf3 server answers ACCESS_DENIED at once: named.
    let client = Killed(running_iperf3_client(&iperf3, &ip.to_string(), "30"));
    let (o, _) = refused(ip);
    let e = stderr(&o);
    assert!(
        e.contains(&format!("127.0.0.1:{ip} is an iperf3 server, not a netrig agent"))
            && e.contains("ACCESS_DENIED"),
        "{e}"
    );
    drop(client);
}

/// On their default ports (in a network namespace of the test's own, where
/// they are free), the message names the tool.
#[test]
fn iperf3_and_netserver_on_their_default_ports_are_named() {
    let (Some(iperf3), netserver_bin) = peers() else {
        return;
    };
    let Some(ns) = Netns::or_skip("nb") else {
        return;
    };
    let in_ns = |bin: &std::path::Path, args: &[&str]| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.0]).arg(bin).args(args);
        c
    };
    let _iperf3 = listening(in_ns(&iperf3, &["-s", "-p", "5201"]), 5201, Some(&ns));
    let served = netserver_bin
        .as_ref()
        .map(|bin| listening(in_ns(bin, &["-D", "-p", "12865"]), 12865, Some(&ns)));
    let cases = [
        (
            "5201",
            "; port 5201 is iperf3's default port, and an idle iperf3 server says nothing to netrig's greeting for 10 s",
        ),
        (
            "12865",
            "; port 12865 is netperf's netserver's default port, and a netserver says nothing to netrig's greeting, \
             ever: if that is what runs there, run `netrig serve` there, or use netperf",
        ),
    ];
    for (port, note) in cases.into_iter().take(if served.is_some() { 2 } else { 1 }) {
        let start = Instant::now();
        let o = run_in(
            &ns,
            &[
                "tcp-stream",
                "-H",
                "127.0.0.1",
                "-p",
                port,
                "-l",
                "1",
                "--peer",
                "netrig",
            ],
        );
        let took = start.elapsed();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains(note), "{e}");
        assert!(took < WELCOME_TIMEOUT, "port {port}: gave up only after {took:?}");
    }
}
