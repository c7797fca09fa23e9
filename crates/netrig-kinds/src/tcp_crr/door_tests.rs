//! tcp-crr's responder holding the lent listener: in the event loop and alone (blocking), what it keeps and what it gives back.

use super::greeting::*;
use super::params::*;
use netrig_engine::flow::{FlowSlot, WorkerEnd};
use netrig_engine::intake::Door;
use netrig_engine::sockopt::SocketSettings;
use netrig_engine::workload::TransientWorkload;
use netrig_engine::EngineError;
use netrig_engine::TxnParams;
use netrig_proto::report::Role;
use netrig_proto::spec::CloseFirst;
use netrig_proto::DataHello;
use netrig_proto::{Direction, SessionCookie};
use socket2::{Domain, Type};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the worker gave back: each connection, its peer, what it read of it.
type Back = Arc<Mutex<Vec<(TcpStream, SocketAddr, Vec<u8>)>>>;

/// The first `n` bytes of a connection given back: what the worker
/// read of it, then the socket's (as the agent's accept loop takes them).
fn first_bytes((s, _, read): (TcpStream, SocketAddr, Vec<u8>), n: usize) -> (TcpStream, Vec<u8>) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = read;
    assert!(b.len() <= n, "read {} bytes, past the {n} looked for", b.len());
    let k = b.len();
    b.resize(n, 0);
    (&s).read_exact(&mut b[k..]).unwrap();
    (s, b)
}

/// The agent's part: a listener, its cookie, and what comes back.
struct TestDoor {
    l: TcpListener,
    cookie: SessionCookie,
    back: Back,
    /// Lets the worker make the listener blocking (as the agent's door).
    blocks: bool,
}

impl Door for TestDoor {
    fn listener(&self) -> BorrowedFd<'_> {
        self.l.as_fd()
    }
    fn admits(&self, peer: SocketAddr) -> bool {
        peer.ip() == std::net::Ipv4Addr::LOCALHOST
    }
    fn claim(&self, g: &[u8], _: SocketAddr) -> Option<DataHello> {
        let h = DataHello::decode(g.try_into().ok()?).ok()?;
        (h.cookie == self.cookie).then_some(h)
    }
    fn hand_back(&self, s: TcpStream, peer: SocketAddr, read: &[u8]) {
        self.back.lock().unwrap().push((s, peer, read.to_vec()));
    }
    fn block(&self, wait: Option<Duration>) -> io::Result<()> {
        if !self.blocks {
            return Err(io::ErrorKind::Unsupported.into());
        }
        self.l.set_nonblocking(false)?;
        let l = socket2::SockRef::from(&self.l);
        l.set_read_timeout(wait)?;
        l.set_write_timeout(wait)
    }
}

/// A responder flow's worker (1-byte requests and responses) lent a
/// TestDoor on a fresh listener, running; `pass_on` feeds its intake.
struct Rig {
    addr: SocketAddr,
    cookie: SessionCookie,
    back: Back,
    stop: Arc<AtomicBool>,
    served: Arc<netrig_engine::flow::FlowCounters>,
    worker: std::thread::JoinHandle<Result<WorkerEnd, EngineError>>,
    pass_on: std::sync::mpsc::SyncSender<netrig_engine::intake::Arrival>,
    /// Connections made before the worker started, silent.
    queued: Vec<TcpStream>,
}

impl Rig {
    fn start(close_first: CloseFirst, blocks: bool, queued: usize) -> Rig {
        Rig::start_with(close_first, blocks, queued, 1, Duration::from_secs(1))
    }

    /// [`Rig::start`] with `request` bytes a request and a `timeout`.
    fn start_with(
        close_first: CloseFirst,
        blocks: bool,
        queued: usize,
        request: usize,
        timeout: Duration,
    ) -> Rig {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let queued = (0..queued).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let cookie = SessionCookie([3; 16]);
        let back: Back = Arc::default();
        let (dealer, mut intakes) = netrig_engine::intake::deal(1, 8).unwrap();
        drop(dealer);
        let mut intake = intakes.pop().unwrap();
        let (pass_on, arrivals) = std::sync::mpsc::sync_channel(8);
        intake.arrivals = arrivals;
        intake.door = Some(Arc::new(TestDoor {
            l,
            cookie,
            back: back.clone(),
            blocks,
        }));
        let ctl = super::tests::control(Duration::from_millis(300));
        let stop = ctl.stop.clone();
        let slot = FlowSlot::new(0, Direction::Tx, Role::Responder, None);
        let served = slot.counters.clone();
        let worker = std::thread::spawn(move || {
            let mut wl = CrrWorkload {
                txn: TxnParams::from_spec(&Default::default()),
                timeout,
                accepted_options: SocketSettings::default(),
                close_first,
                local_ports: None,
            };
            wl.txn.request_size = request;
            wl.txn.response_size = 1;
            wl.run_transient(vec![slot], Some(intake), &ctl)
        });
        Rig {
            addr,
            cookie,
            back,
            stop,
            served,
            worker,
            pass_on,
            queued,
        }
    }
}

impl Rig {
    /// Stops the worker and waits for it: the transactions it answered.
    fn end(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.worker.join().unwrap().unwrap();
        self.served.transactions()
    }
}

fn hello(cookie: SessionCookie) -> [u8; DataHello::LEN] {
    DataHello {
        version: netrig_proto::PROTOCOL_VERSION,
        cookie,
        flow: 0,
    }
    .encode()
}

/// The response to a request written in `parts`, with `gap` between them.
fn transact(addr: SocketAddr, parts: &[&[u8]], gap: Duration) -> io::Result<Vec<u8>> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    for p in parts {
        c.write_all(p)?;
        std::thread::sleep(gap);
    }
    let mut r = [0u8; 1];
    c.read_exact(&mut r)?;
    Ok(r.to_vec())
}

/// A worker lent the listener answers its own connections, a greeting
/// in pieces too, and gives everything else back with not a byte read:
/// a control greeting with its session's bytes after it, a foreign
/// cookie, another client's, a connection that says nothing (after
/// GREETING_WAIT).
#[test]
fn a_worker_with_the_listener_keeps_its_own_and_gives_back_the_rest() {
    for close_first in [CloseFirst::Requester, CloseFirst::Responder] {
        let rig = Rig::start(close_first, false, 0);
        let (addr, cookie, back) = (rig.addr, rig.cookie, rig.back.clone());
        let h = hello(cookie);
        let whole = [&h[..], b"q"].concat();
        assert_eq!(transact(addr, &[&whole], Duration::ZERO).unwrap(), [0xa5]);
        // In pieces: parked, then answered.
        assert_eq!(
            transact(addr, &[&h[..10], &h[10..], b"q"], Duration::from_millis(30)).unwrap(),
            [0xa5]
        );
        // A control greeting with the session's first bytes after it.
        let mut control = TcpStream::connect(addr).unwrap();
        let mut pre = netrig_proto::CONTROL_MAGIC.to_vec();
        pre.extend_from_slice(&[0, 6, 0, 0]);
        control.write_all(&[&pre[..], b"after"].concat()).unwrap();
        let foreign = [&hello(SessionCookie([4; 16]))[..], b"q"].concat();
        let mut other = TcpStream::connect(addr).unwrap();
        other.write_all(&foreign).unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        // Another client's, whole: given back before a byte is read.
        let theirs = socket2::Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        theirs
            .bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
            .unwrap();
        theirs.connect(&addr.into()).unwrap();
        let mut theirs = TcpStream::from(theirs);
        theirs.write_all(&whole).unwrap();
        std::thread::sleep(GREETING_WAIT + Duration::from_millis(300));
        assert_eq!(back.lock().unwrap().len(), 4, "given back while the worker runs");
        assert_eq!(rig.end(), 2, "{close_first:?}");
        // Each given back unread (the event loop only peeks at a
        // greeting): the agent's accept loop reads it from its first byte.
        let back = std::mem::take(&mut *back.lock().unwrap());
        assert!(back.iter().all(|b| b.2.is_empty()), "a byte read");
        let mut by_port: HashMap<u16, _> = back.into_iter().map(|b| (b.1.port(), b)).collect();
        let mut unread = |c: &TcpStream, n: usize| {
            let b = by_port
                .remove(&c.local_addr().unwrap().port())
                .expect("given back");
            first_bytes(b, n).1
        };
        assert_eq!(unread(&theirs, whole.len()), whole, "another client's");
        assert_eq!(
            unread(&control, pre.len() + 5),
            [&pre[..], b"after"].concat(),
            "control"
        );
        assert_eq!(unread(&other, foreign.len()), foreign, "a foreign cookie");
        assert_eq!(by_port.len(), 1, "and the silent one");
        drop((control, other, theirs));
    }
}

/// A lone responder flow whose door blocks waits in accept(2) (no event
/// loop): it answers its own connections in either close order, gives
/// back unread a control greeting and a greeting that comes in pieces
/// slower than ALONE_POLL, answers the latter when the agent (here, the
/// test) has read its greeting and passed it on through the intake, and
/// ends when stopped.
#[test]
fn a_lone_responder_waits_in_accept_and_answers_what_the_agent_passes_on() {
    for close_first in [CloseFirst::Requester, CloseFirst::Responder] {
        let rig = Rig::start(close_first, true, 0);
        let (addr, cookie, back) = (rig.addr, rig.cookie, rig.back.clone());
        let h = hello(cookie);
        let whole = [&h[..], b"q"].concat();
        for _ in 0..3 {
            assert_eq!(transact(addr, &[&whole], Duration::ZERO).unwrap(), [0xa5]);
        }
        // In pieces, slower than the worker waits: given back; the agent
        // reads the greeting and passes the connection on.
        let slow = std::thread::spawn(move || {
            transact(addr, &[&h[..10], &h[10..], b"q"], Duration::from_millis(60))
        });
        let t = Instant::now();
        let b = loop {
            if let Some(b) = back.lock().unwrap().pop() {
                break b;
            }
            assert!(t.elapsed() < Duration::from_secs(2), "never given back");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(b.2, &h[..10], "given back with the part it read");
        // The agent reads the rest of the greeting; here, the request
        // too, as a worker holding the listener would have with it:
        // passed on so, it is counted, not waited for.
        let (s, g) = first_bytes(b, DataHello::LEN + 1);
        s.set_nonblocking(true).unwrap();
        let hello = DataHello::decode(g[..DataHello::LEN].try_into().unwrap()).unwrap();
        rig.pass_on
            .send(netrig_engine::intake::Arrival {
                hello,
                stream: s,
                read_past: 1,
            })
            .unwrap();
        assert_eq!(slow.join().unwrap().unwrap(), [0xa5], "answered when passed on");
        // A control greeting with the session's first bytes after it: back, unread.
        let mut control = TcpStream::connect(addr).unwrap();
        let mut pre = netrig_proto::CONTROL_MAGIC.to_vec();
        pre.extend_from_slice(&[0, 6, 0, 0]);
        control.write_all(&[&pre[..], b"after"].concat()).unwrap();
        let t = Instant::now();
        while back.lock().unwrap().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(2), "control never given back");
            std::thread::sleep(Duration::from_millis(5));
        }
        let b = back.lock().unwrap().pop().unwrap();
        let read = b.2.len();
        assert_eq!(
            first_bytes(b, pre.len() + 5).1,
            [&pre[..], b"after"].concat(),
            "control: what was read ({read} bytes) and the rest"
        );
        let t = Instant::now();
        assert_eq!(rig.end(), 4, "{close_first:?}");
        assert!(t.elapsed() < Duration::from_secs(1), "ended in {:?}", t.elapsed());
        drop(control);
    }
}

/// Silent connections cost a lone responder one ALONE_POLL, not one
/// each: after the first it waits for no greeting (IMPATIENCE), gives
/// the silent ones back at once and answers its own behind them; those
/// queued before the listener became blocking, which did not inherit
/// its timeouts, too (without theirs set, the first wait never ends).
#[test]
fn a_lone_responder_waits_for_one_silent_greeting_not_for_each() {
    for before in [true, false] {
        let mut rig = Rig::start(CloseFirst::Responder, true, if before { 30 } else { 0 });
        let (addr, back) = (rig.addr, rig.back.clone());
        let silent: Vec<TcpStream> = if before {
            std::mem::take(&mut rig.queued)
        } else {
            (0..30).map(|_| TcpStream::connect(addr).unwrap()).collect()
        };
        let whole = [&hello(rig.cookie)[..], b"q"].concat();
        let t = Instant::now();
        let answer = transact(addr, &[&whole], Duration::ZERO);
        assert_eq!(answer.unwrap(), [0xa5], "queued before: {before}");
        let took = t.elapsed();
        // Waiting ALONE_POLL for each would take 300 ms at least.
        assert!(
            took < Duration::from_millis(150),
            "answered after {took:?}, behind 30 silent connections (queued before: {before})"
        );
        let t = Instant::now();
        while back.lock().unwrap().len() < silent.len() {
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "the silent ones never all went back"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(rig.end(), 1);
    }
}

/// A lone responder holds a request that trickles in (a byte every
/// 5 ms, each well within ALONE_POLL, so no read waits long enough to
/// look at the clock) to `--timeout`, and ends when stopped, not when
/// the trickle would have finished (4 s).
#[test]
fn a_lone_responder_holds_a_trickling_request_to_its_timeout() {
    let rig = Rig::start_with(CloseFirst::Responder, true, 0, 800, Duration::from_millis(200));
    let mut c = TcpStream::connect(rig.addr).unwrap();
    c.write_all(&hello(rig.cookie)).unwrap();
    let t = Instant::now();
    let closed = loop {
        if c.write_all(b"q").is_err() {
            break true;
        }
        if t.elapsed() > Duration::from_secs(3) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(closed, "still open after {:?}", t.elapsed());
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "closed after {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    assert_eq!(rig.end(), 0);
    assert!(t.elapsed() < Duration::from_secs(1), "ended in {:?}", t.elapsed());
}
