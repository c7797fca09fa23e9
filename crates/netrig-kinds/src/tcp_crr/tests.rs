//! tcp-crr on real sockets: the requester alone and in the event loop, failures by reason, local ports, both close orders.

use super::failure::*;
use super::params::*;
use super::ports::PortCycle;
use netrig_engine::flow::Connector;
use netrig_engine::flow::{FlowSlot, WorkerEnd};
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::workload::{TransientWorkload, WorkerControl};
use netrig_engine::TxnParams;
use netrig_proto::report::counts::Counts;
use netrig_proto::report::Role;
use netrig_proto::spec::CloseFirst;
use netrig_proto::DataHello;
use socket2::{Domain, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flow `k`'s failed transactions by reason, as its worker ended it (every
/// requester counts them, zero or not).
fn errors(end: &WorkerEnd, k: usize) -> Counts {
    let (_, c) = &end.counts[k];
    c.group(GROUP).cloned().expect("a requester's failures")
}

/// A worker's control, recording from the start, stopped by its `stop`.
pub(super) fn control(drain: Duration) -> WorkerControl {
    crate::txn::test_control(drain)
}
use netrig_proto::spec::PortRange;
use netrig_proto::{Direction, SessionCookie};
use std::net::TcpListener;

fn workload() -> CrrWorkload {
    CrrWorkload {
        txn: TxnParams::from_spec(&Default::default()),
        timeout: Duration::from_millis(300),
        accepted_options: SocketSettings::default(),
        close_first: CloseFirst::Requester,
        local_ports: None,
    }
}

/// A requester flow to `addr`, with a test cookie.
fn requester_to(addr: SocketAddr) -> FlowSlot {
    let connector = Arc::new(Connector {
        addr,
        bind: None,
        options: SocketSettings::default(),
        version: netrig_proto::PROTOCOL_VERSION,
        cookie: SessionCookie([7; 16]),
    });
    FlowSlot::new(0, Direction::Tx, Role::Requester, Some(connector))
}

/// `flows` requester flows to `addr`, numbered from 0.
fn requesters_to(addr: SocketAddr, flows: u32) -> Vec<FlowSlot> {
    (0..flows)
        .map(|i| {
            let mut s = requester_to(addr);
            s.id = i;
            s
        })
        .collect()
}

fn closed_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

#[test]
fn reasons_from_real_sockets() {
    // Nothing listens: a refusal, whether connect() says so at once or later.
    let e = TcpStream::connect(closed_port()).unwrap_err();
    assert_eq!(Failure::of(&e), Failure::Refused, "{e}");
    // A local address this host does not have.
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let e = s.bind(&SocketAddr::from(([192, 0, 2, 1], 0)).into()).unwrap_err();
    assert_eq!(Failure::of(&e), Failure::AddrNotAvailable, "{e}");
    // A peer that resets the connection (SO_LINGER 0) before answering.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (a, _) = l.accept().unwrap();
    socket2::SockRef::from(&a)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(a);
    std::thread::sleep(Duration::from_millis(50));
    let e = c.read(&mut [0; 8]).unwrap_err();
    assert_eq!(Failure::of(&e), Failure::Reset, "{e}");
    let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "closed early");
    assert_eq!(Failure::of(&eof), Failure::Reset);
    let mine = io::Error::new(io::ErrorKind::TimedOut, "--timeout");
    assert_eq!(Failure::of(&mine), Failure::TimedOut);
    assert_eq!(
        Failure::of(&io::Error::from_raw_os_error(libc::EMFILE)),
        Failure::Other
    );
}

/// A requester against a closed port: every transaction is refused, counted,
/// and none is counted as a transaction; alone on its worker (blocking
/// sockets) and two in the event loop. (Loopback refuses inside
/// connect(), so the event loop's other way of learning of a refusal,
/// the request's write after a connect still under way, is not reached
/// here: `a_refusal_after_connect_returned_is_counted_not_hidden` does.)
#[test]
fn refused_transactions_are_counted_not_hidden() {
    // Loopback refuses inside connect(), so each failure is seen while its
    // transaction starts: the flow must still go on to the next one.
    all_refused(closed_port(), 200, 10);
}

/// Runs one requester alone (blocking sockets), then two in the event
/// loop, each for `ms` against `to`, where every connection is refused:
/// each flow must have more than `min` refusals, nothing else failed,
/// and no transaction or latency counted.
fn all_refused(to: SocketAddr, ms: u64, min: u64) {
    for flows in [1u32, 2] {
        let slots = requesters_to(to, flows);
        let counters: Vec<_> = slots.iter().map(|s| s.counters.clone()).collect();
        let ctl = control(Duration::from_secs(1));
        let stop = ctl.stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            stop.store(true, Ordering::Relaxed);
        });
        let end = workload().run_transient(slots, None, &ctl).unwrap();
        t.join().unwrap();
        for (k, _) in end.transient.iter().enumerate() {
            let errors = errors(&end, k);
            assert!(
                errors.get("refused") > min,
                "{flows} flows: flow {k} stopped: {errors:?}"
            );
            assert_eq!(errors.total(), errors.get("refused"), "{flows} flows: {errors:?}");
            assert_eq!(counters[k].transactions(), 0);
        }
        assert!(end.latency.unwrap().is_empty());
    }
}

/// The event loop's other way of learning of a refusal: the request's
/// write finds the connect still under way (EAGAIN), and the refusal
/// comes later, as an error on the socket. Loopback answers a SYN to a
/// closed port inside connect(2); here a token bucket on the loopback of
/// a network namespace of the test's own (tbf, 64 kbit/s: some 16 ms
/// for each SYN and its reset) holds every SYN back. Alone on its
/// worker (a blocking connect that waits for the reset) and two in the
/// event loop. Skipped, saying why, where no namespace can be made.
#[test]
fn a_refusal_after_connect_returned_is_counted_not_hidden() {
    use std::os::fd::AsRawFd;
    let name = format!("netrig-ut-refused-{}", std::process::id());
    let sh = |args: &[&str]| {
        std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .map_err(|e| format!("{}: {e}", args[0]))
            .and_then(|o| {
                o.status
                    .success()
                    .then_some(())
                    .ok_or_else(|| format!("{args:?}: {}", String::from_utf8_lossy(&o.stderr).trim()))
            })
    };
    struct Gone<'a>(&'a str);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", self.0])
                .output();
        }
    }
    if let Err(e) = sh(&["ip", "netns", "add", &name]) {
        eprintln!("skipped: needs root and iproute2 for a network namespace of its own ({e})");
        return;
    }
    let _gone = Gone(&name);
    sh(&["ip", "-n", &name, "link", "set", "lo", "up"]).unwrap();
    if let Err(e) = sh(&[
        "ip", "netns", "exec", &name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "64kbit",
        "burst", "100", "limit", "100000",
    ]) {
        eprintln!("skipped: needs tc and the tbf qdisc ({e})");
        return;
    }
    let ns = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
    std::thread::spawn(move || {
        // This thread's sockets are the namespace's.
        assert_eq!(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        let to = SocketAddr::from(([127, 0, 0, 1], 9));
        // The premise: the write after a non-blocking connect(2) finds it
        // still under way, not refused.
        let s = Socket::new(Domain::IPV4, Type::STREAM.nonblocking(), None).unwrap();
        let e = s.connect(&to.into()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINPROGRESS), "{e}");
        let e = s.send(b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        drop(s);
        // 500 ms at some 16 ms a refusal, shared by the flows.
        all_refused(to, 500, 2);
    })
    .join()
    .unwrap();
}

/// `--local-ports`: each connection comes from the next port of the
/// range, alone on the worker (blocking sockets) and in the event loop
/// (two flows), as the listener sees them.
#[test]
fn requesters_bind_the_local_ports_in_turn() {
    let range = PortRange {
        low: 24_000,
        high: 24_999,
    };
    for flows in [1u32, 2] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        // Answers each connection (greeting and 1-byte request in, 1 byte
        // out) and closes first, as the agent with --close-first responder.
        let server = std::thread::spawn(move || {
            let mut ports = Vec::new();
            let end = Instant::now() + Duration::from_millis(600);
            while Instant::now() < end {
                let Ok((mut c, peer)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                let mut greeting = [0u8; DataHello::LEN + 1];
                if c.read_exact(&mut greeting).is_ok() && c.write_all(&[0x5a]).is_ok() {
                    ports.push(peer.port());
                }
            }
            ports
        });
        let slots = requesters_to(addr, flows);
        let counters: Vec<_> = slots.iter().map(|s| s.counters.clone()).collect();
        let ctl = control(Duration::from_secs(1));
        let stop = ctl.stop.clone();
        let mut wl = workload();
        wl.close_first = CloseFirst::Responder;
        wl.local_ports = Some(Arc::new(PortCycle::new(range)));
        let worker = std::thread::spawn(move || wl.run_transient(slots, None, &ctl));
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        let end = worker.join().unwrap().unwrap();
        let ports = server.join().unwrap();
        let done: u64 = counters.iter().map(|c| c.transactions()).sum();
        let failed: u64 = (0..end.transient.len()).map(|k| errors(&end, k).total()).sum();
        assert!(
            done > 50 && failed == 0,
            "{flows} flows: {done} transactions, {failed} failed"
        );
        assert!(
            ports.len() as u64 >= done,
            "{} connections seen, {done} counted",
            ports.len()
        );
        let outside: Vec<_> = ports
            .iter()
            .filter(|p| !(range.low..=range.high).contains(p))
            .collect();
        assert!(
            outside.is_empty(),
            "{flows} flows: ports outside {range}: {outside:?}"
        );
        // One after another (wrapping; a port in use elsewhere is skipped,
        // and two flows' connections may arrive out of turn).
        let next = |a: u16, b: u16| (u32::from(b) + 1000 - u32::from(a)) % 1000;
        let in_turn = ports
            .windows(2)
            .filter(|w| (1..=2).contains(&next(w[0], w[1])))
            .count();
        assert!(
            in_turn * 10 >= (ports.len() - 1) * 9,
            "{flows} flows: {in_turn} of {} steps to the next port: {ports:?}",
            ports.len() - 1
        );
    }
}

/// A requester alone on its worker whose peer never answers (the
/// kernel completes each handshake into the listener's backlog, and
/// nothing reads) sees each `--timeout` pass and the run end: its
/// blocking reads, without a socket timeout, are bounded by the watch.
#[test]
fn a_silent_responder_times_out_alone() {
    assert!(
        crate::txn::watch_alone().is_some(),
        "the watch is what this tests"
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let slot = requester_to(l.local_addr().unwrap());
    let counters = slot.counters.clone();
    let ctl = control(Duration::from_millis(200));
    let stop = ctl.stop.clone();
    let mut wl = workload();
    wl.timeout = Duration::from_millis(100);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(wl.run_transient(vec![slot], None, &ctl));
    });
    std::thread::sleep(Duration::from_millis(350));
    stop.store(true, Ordering::Relaxed);
    let end = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the worker ended")
        .unwrap();
    let errors = errors(&end, 0);
    assert!(errors.get("timed_out") >= 1, "{errors:?}");
    assert_eq!(errors.total(), errors.get("timed_out"), "{errors:?}");
    assert_eq!(counters.transactions(), 0);
    drop(l);
}

/// A requester alone on its worker gives up on a response that
/// trickles in past `--timeout` (no read ever waits long enough to look
/// at the clock): counted timed out, not a transaction.
#[test]
fn a_trickling_response_times_out_alone() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut greeting = [0u8; DataHello::LEN + 1];
        c.read_exact(&mut greeting).unwrap();
        // 100 bytes owed, one every 5 ms: 0.5 s in all.
        for _ in 0..100 {
            if c.write_all(&[0xa5]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let slot = requester_to(addr);
    let counters = slot.counters.clone();
    let ctl = control(Duration::from_secs(1));
    let stop = ctl.stop.clone();
    let mut wl = workload();
    wl.timeout = Duration::from_millis(100);
    wl.txn.response_size = 100;
    let t = Instant::now();
    let worker = std::thread::spawn(move || wl.run_transient(vec![slot], None, &ctl));
    // The first transaction times out at 0.1 s (the next ones are reset
    // or refused once the server is gone), long before its 0.5 s.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let end = worker.join().unwrap().unwrap();
    server.join().unwrap();
    let errors = errors(&end, 0);
    assert!(errors.get("timed_out") >= 1, "{errors:?}");
    assert_eq!(counters.transactions(), 0);
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// Requester and responder workers back to back over loopback, in each
/// close order: every connection carries the greeting, one request and
/// one response. With requests larger than a new socket's send buffer,
/// written in pieces, two connections in flight: each greeting arrives
/// whole (the acceptor checks its cookie) and every byte is counted.
#[test]
fn requester_and_responder_complete_transactions() {
    for close_first in [
        CloseFirst::Requester,
        CloseFirst::RequesterReset,
        CloseFirst::Responder,
    ] {
        back_to_back(close_first, 3);
    }
    back_to_back(CloseFirst::Requester, 200_000);
}

fn back_to_back(close_first: CloseFirst, request: usize) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let cookie = SessionCookie([9; 16]);
    let connector = Arc::new(Connector {
        addr: l.local_addr().unwrap(),
        bind: None,
        options: SocketSettings::default(),
        version: netrig_proto::PROTOCOL_VERSION,
        cookie,
    });
    let mk_ctl = || control(Duration::from_secs(1));
    let (rctl, actl) = (mk_ctl(), mk_ctl());
    let (rstop, astop) = (rctl.stop.clone(), actl.stop.clone());
    let (dealer, mut intakes) = netrig_engine::intake::deal(1, 64).unwrap();
    let tx = Arc::new(netrig_engine::intake::Intake::new(64));
    tx.start(dealer);
    // The listener's part: read each greeting, pass the connection on.
    let acceptor = std::thread::spawn(move || {
        l.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_millis(600);
        while Instant::now() < until {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let mut b = [0u8; DataHello::LEN];
                    s.read_exact(&mut b).unwrap();
                    let hello = DataHello::decode(&b).unwrap();
                    assert_eq!(hello.cookie, cookie);
                    s.set_nonblocking(true).unwrap();
                    tx.give(netrig_engine::intake::Arrival::new(hello, s)).unwrap();
                }
                Err(_) => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    });
    let responder_slot = FlowSlot::new(0, Direction::Tx, Role::Responder, None);
    let served = responder_slot.counters.clone();
    let intake = intakes.pop();
    let agent = std::thread::spawn(move || {
        let mut wl = workload();
        wl.txn.request_size = request;
        wl.txn.response_size = 5;
        wl.close_first = close_first;
        wl.run_transient(vec![responder_slot], intake, &actl)
    });
    let slot = FlowSlot::new(0, Direction::Tx, Role::Requester, Some(connector));
    let counters = slot.counters.clone();
    // The sampler's part: the window is open from the start.
    let _ = counters.open_window();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        rstop.store(true, Ordering::Relaxed);
    });
    let mut wl = workload();
    wl.txn.request_size = request;
    wl.txn.response_size = 5;
    wl.txn.burst = 2;
    wl.close_first = close_first;
    let end = wl.run_transient(vec![slot], None, &rctl).unwrap();
    stopper.join().unwrap();
    astop.store(true, Ordering::Relaxed);
    let aend = agent.join().unwrap().unwrap();
    acceptor.join().unwrap();
    let n = counters.transactions();
    assert!(n > 10, "{close_first:?}: {n} transactions");
    assert_eq!(
        Some(errors(&end, 0)),
        Some(Counts::zeroed(&REASONS)),
        "{close_first:?}"
    );
    assert_eq!(
        counters.bytes(),
        n * (request as u64 + 5),
        "{close_first:?}: {request} request + 5 response bytes each"
    );
    assert_eq!(end.latency.as_ref().unwrap().len(), n);
    assert_eq!(
        served.transactions(),
        n,
        "{close_first:?}: the responder answered each once"
    );
    assert!(end.transient[0].first.is_some() && aend.transient[0].first.is_some());
}
