//! Shared by the targets: the bounds every spec the agent accepts must hold.

use netrig_proto::report::Role;
use netrig_proto::spec::{
    Direction, Exchange, KindRules, KindSpec, Limit, Load, Pace, StreamOptions, TcpBidirSpec, TcpMaertsSpec,
    TcpOptions, TcpStreamSpec, Transactions, Transport, DEFAULT_PACING_US, DEFAULT_TXN_TIMEOUT_S, MAX_CPU,
    MAX_CPU_LIST, MAX_CRR_IN_FLIGHT, MAX_IN_FLIGHT, MAX_MESSAGE_SIZE, MAX_PACING_RATE_BPS, MAX_PACING_US,
    MAX_RATE, MAX_RATE_BPS, MAX_SOCKET_BUFFER, MAX_SPIN_US, MAX_UDP_PAYLOAD, MAX_WORKERS, MIN_INTERVAL_S,
    TXN_TIMEOUT_RANGE_S, UDP_BATCH, UDP_BUFFER_MAX, UDP_HEADER_LEN,
};
use netrig_proto::{AgentLimits, TestSpec};
use std::time::Duration;

/// Asserts that a spec `TestSpec::validate(limits)` accepted is bounded:
/// flows, every size of its kind, durations, rates and lists, by netrig's
/// own bounds and by the agent's `limits`; that its kind's rules describe
/// it as its kind is (directions, transport, exchange, in flight, call
/// sizes, buffers); and that what the agent derives from it (flow plan,
/// byte quotas, timeouts, quanta) can be computed without panicking.
pub fn assert_bounded(s: &TestSpec, limits: &AgentLimits) {
    assert!(
        s.validate_bounds().is_ok(),
        "accepted by the agent but not by netrig's own bounds: {s:?}"
    );
    let rules = s.rules();
    assert_eq!(s.kind(), s.test.name());
    assert!(KindSpec::NAMES.contains(&s.kind()), "{}", s.kind());
    assert_flows(s, limits);
    assert_limit(s, limits);
    let max_size = MAX_MESSAGE_SIZE.min(limits.max_message_size);
    let (send, recv) = rules.call_sizes();
    assert!(send >= 1 && recv >= 1, "call sizes {send}, {recv}");
    let buffers = rules.worker_buffer_bytes();
    assert_eq!(buffers, s.worker_buffer_bytes());
    let k = Derived {
        s,
        rules,
        dirs: s.directions(),
        calls: (send, recv),
        buffers,
        max_size,
    };
    k.assert_kind();
    // Whatever the kind, a bound that holds for all: what the agent's
    // --max-buffer multiplies by the workers.
    assert!(buffers <= 3 * u64::from(max_size) + UDP_BATCHES + (4 << 20));
    if rules.exchange().is_transactional() {
        // A call may carry at least one whole request or response.
        let t = match &s.test {
            KindSpec::TcpRr(r) => &r.transactions,
            KindSpec::TcpCrr(c) => &c.transactions,
            KindSpec::UdpRr(u) => &u.transactions,
            _ => unreachable!("{} is transactional", s.kind()),
        };
        let most = t.request_size.max(t.response_size);
        assert!(
            send >= most && recv >= most,
            "call sizes {send}, {recv} under {most}"
        );
    }
    let n = rules.in_flight();
    assert!((1..=MAX_IN_FLIGHT).contains(&n), "{n} in flight");
    assert_remote(s);
}

/// What a UDP kind's workers may allocate for their batches of datagrams.
const UDP_BATCHES: u64 = 2 * UDP_BATCH * UDP_BUFFER_MAX;

/// The flows and their connections, the workers, and each end's role.
fn assert_flows(s: &TestSpec, limits: &AgentLimits) {
    let rules = s.rules();
    assert!(s.flows >= 1 && s.flows <= limits.max_flows, "flows {}", s.flows);
    if let Some(w) = s.workers {
        assert!(w >= 1 && w <= limits.max_workers && w <= MAX_WORKERS, "-T {w}");
    }
    for cpus in [1, 2, 64, u32::MAX] {
        let w = s.workers_on(cpus);
        let flows = u64::from(s.flows) * s.directions().len() as u64;
        assert!(w >= 1 && u64::from(w) <= flows, "{w} workers for {flows} flows");
        assert!(w <= s.workers.unwrap_or(cpus).max(1));
    }

    let dirs = s.directions();
    assert_eq!(dirs, rules.directions());
    assert!(!dirs.is_empty() && dirs.len() <= 2, "{dirs:?}");
    let conns = s.connections();
    assert!(conns <= 2 * u64::from(limits.max_flows), "connections {conns}");
    let plan = s.flow_plan();
    assert_eq!(plan.len() as u64, u64::from(s.flows) * dirs.len() as u64);
    if rules.exchange() == Exchange::ConnectionPerTransaction {
        assert_eq!(conns, 0, "{} opens connections at set-up", s.kind());
    } else {
        assert_eq!(plan.len() as u64, conns);
    }
    // tx flows first, then rx: flow i's direction is dirs[i / flows].
    for (i, d) in plan.iter().enumerate() {
        assert_eq!(*d, dirs[i / s.flows as usize], "flow {i}");
    }
    for d in dirs {
        let (agent, client) = (s.role(*d, true), s.role(*d, false));
        if rules.exchange().is_transactional() {
            assert_eq!((agent, client), (Role::Responder, Role::Requester));
        } else {
            assert!(
                matches!(
                    (agent, client),
                    (Role::Sender, Role::Receiver) | (Role::Receiver, Role::Sender)
                ),
                "{d:?}: agent {agent:?}, client {client:?}"
            );
            assert_eq!(client == Role::Sender, *d == Direction::Tx);
        }
    }
}

/// When it ends: its length and omitted start, or its byte count and each
/// flow's quota; its interval.
fn assert_limit(s: &TestSpec, limits: &AgentLimits) {
    let rules = s.rules();
    let max_d = limits.max_duration_s as f64;
    match s.limit {
        Limit::Duration { seconds } => {
            assert!(
                seconds.is_finite() && seconds > 0.0 && seconds <= max_d,
                "-l {seconds}"
            );
            assert!(
                s.omit_s.is_finite() && s.omit_s >= 0.0 && s.omit_s < seconds,
                "--omit {}",
                s.omit_s
            );
            let _ = Duration::from_secs_f64(seconds) + Duration::from_secs(60);
            let _ = Duration::from_secs_f64(s.omit_s);
            assert_eq!(s.byte_quota(0), None);
        }
        Limit::Bytes { bytes } => {
            assert!(bytes >= 1);
            assert!(s.omit_s == 0.0, "--omit {} with -n", s.omit_s);
            assert!(rules.counts_bytes(), "-n for {}", s.kind());
            assert_eq!(rules.exchange(), Exchange::Stream, "-n for {}", s.kind());
            let first = s.byte_quota(0).expect("a quota");
            let last = s.byte_quota(s.flows - 1).expect("a quota");
            assert!(first >= last && first - last <= 1, "quotas {first} and {last}");
            if s.flows <= 64 {
                let sum: u64 = (0..s.flows).map(|i| s.byte_quota(i).expect("a quota")).sum();
                assert_eq!(sum, bytes, "quotas do not add up");
            }
        }
    }
    if let Some(i) = s.interval_s {
        assert!(i.is_finite() && i >= MIN_INTERVAL_S && i <= max_d, "-i {i}");
        let _ = Duration::from_secs_f64(i);
    }
}

/// The agent's sockets and CPUs.
fn assert_remote(s: &TestSpec) {
    let o = &s.remote;
    for v in [o.sndbuf, o.rcvbuf].into_iter().flatten() {
        assert!((1..=MAX_SOCKET_BUFFER).contains(&v), "buffer {v}");
    }
    assert!(o.priority.is_none_or(|p| p <= 7));
    assert!(o
        .max_pacing_rate_bps
        .is_none_or(|r| (8..=MAX_PACING_RATE_BPS).contains(&r)));
    if let Some(c) = &s.remote_cpus {
        assert!(!c.is_empty() && c.len() <= MAX_CPU_LIST, "{} CPUs", c.len());
        assert!(c.iter().all(|c| *c <= MAX_CPU));
    }
}

/// A spec, its kind's rules and what they derive: what each kind's own
/// checks read.
#[derive(Clone, Copy)]
struct Derived<'a> {
    s: &'a TestSpec,
    rules: &'a dyn KindRules,
    dirs: &'a [Direction],
    /// The send and receive call sizes.
    calls: (u32, u32),
    /// What a worker allocates.
    buffers: u64,
    /// The largest message the agent takes.
    max_size: u32,
}

impl Derived<'_> {
    /// The kind's own options, and its rules.
    fn assert_kind(&self) {
        match &self.s.test {
            KindSpec::TcpStream(TcpStreamSpec(o))
            | KindSpec::TcpMaerts(TcpMaertsSpec(o))
            | KindSpec::TcpBidir(TcpBidirSpec(o)) => self.tcp_stream(o),
            KindSpec::TcpRr(r) => self.tcp_rr(r),
            KindSpec::TcpCrr(c) => self.tcp_crr(c),
            KindSpec::Http(h) => self.http(h),
            KindSpec::SynFlood(f) => self.syn_flood(f),
            KindSpec::HalfClose(h) => self.half_close(h),
            KindSpec::UdpStream(u) => self.udp_stream(u),
            KindSpec::UdpRr(u) => self.udp_rr(u),
        }
    }

    /// A size of the kind's: 1 to the largest message the agent takes.
    fn size(&self, what: &str, v: u32) {
        let max_size = self.max_size;
        assert!(v >= 1 && v <= max_size, "{what} {v} (at most {max_size})");
    }

    /// A TCP stream (stream, maerts, bidir): sizes, rate, TCP options; one
    /// buffer of each size (two of the send size with zerocopy).
    fn tcp_stream(&self, o: &StreamOptions) {
        let Derived {
            s,
            rules,
            dirs,
            buffers,
            max_size,
            calls: (send, recv),
            ..
        } = *self;
        let size = |what: &str, v: u32| self.size(what, v);
        let want: &[Direction] = match &s.test {
            KindSpec::TcpStream(_) => &[Direction::Tx],
            KindSpec::TcpMaerts(_) => &[Direction::Rx],
            _ => &[Direction::Tx, Direction::Rx],
        };
        assert_eq!(dirs, want, "{}", s.kind());
        assert_eq!(rules.transport(), Transport::Tcp);
        assert_eq!(rules.exchange(), Exchange::Stream);
        assert!(rules.counts_bytes());
        assert_eq!(rules.tcp(), Some(&o.tcp));
        assert_eq!(rules.in_flight(), 1);
        assert_eq!(rules.datagram_size(), None);
        assert_stream(o, &size);
        assert_eq!((send, recv), (o.message_size, o.recv_size));
        let copies = if o.zerocopy { 2 } else { 1 };
        assert!(buffers <= (copies + 1) * u64::from(max_size), "buffers {buffers}");
    }

    /// tcp-rr: its transactions and TCP options.
    fn tcp_rr(&self, r: &netrig_proto::spec::kind::TcpRrSpec) {
        self.tcp_requests(Exchange::Transactions, &r.transactions, MAX_IN_FLIGHT, &r.tcp);
        assert_eq!(self.rules.in_flight(), r.transactions.in_flight());
        self.tcp_request_buffers(&r.tcp);
    }

    /// tcp-crr: its transactions, connections in flight, timeout, TCP options.
    fn tcp_crr(&self, c: &netrig_proto::spec::kind::TcpCrrSpec) {
        self.tcp_requests(
            Exchange::ConnectionPerTransaction,
            &c.transactions,
            MAX_CRR_IN_FLIGHT,
            &c.tcp,
        );
        let n = self.rules.in_flight();
        assert!(
            (1..=MAX_CRR_IN_FLIGHT).contains(&n),
            "{n} connections in flight per flow"
        );
        assert_timeout(c.timeout_s, c.timeout());
        self.tcp_request_buffers(&c.tcp);
    }

    /// A TCP kind of requests and responses (tcp-rr, tcp-crr): one
    /// direction, its `exchange`, no byte counts, its `tcp` options, its
    /// transactions `t` (`max_burst`: its bound on them in flight).
    fn tcp_requests(&self, exchange: Exchange, t: &Transactions, max_burst: u32, tcp: &TcpOptions) {
        let Derived { rules, dirs, .. } = *self;
        let size = |what: &str, v: u32| self.size(what, v);
        assert_eq!(dirs, [Direction::Tx]);
        assert_eq!(rules.transport(), Transport::Tcp);
        assert_eq!(rules.exchange(), exchange);
        assert!(!rules.counts_bytes());
        assert_eq!(rules.tcp(), Some(tcp));
        assert_eq!(rules.datagram_size(), None);
        assert_transactions(t, max_burst, &size);
    }

    /// A TCP kind of requests and responses: its TCP options, and its
    /// buffers (a request and a response, and 4 MiB).
    fn tcp_request_buffers(&self, tcp: &TcpOptions) {
        let Derived {
            buffers, max_size, ..
        } = *self;
        assert_tcp(tcp);
        assert!(
            buffers <= 2 * u64::from(max_size) + (4 << 20),
            "buffers {buffers}"
        );
    }

    /// http: what goes on its request and header lines, its load and bounds.
    fn http(&self, h: &netrig_proto::spec::kind::HttpSpec) {
        let Derived {
            rules, dirs, buffers, ..
        } = *self;
        use netrig_proto::spec::kind::{
            HttpLoad, HTTP_HEADER_RANGE, HTTP_TIMEOUT_RANGE_S, MAX_HTTP_BODY, MAX_HTTP_HEADERS,
            MAX_HTTP_LINE, MAX_HTTP_REQUESTS,
        };
        assert_eq!(dirs, [Direction::Tx]);
        assert_eq!(rules.transport(), Transport::Tcp);
        assert_eq!(rules.exchange(), Exchange::Transactions);
        assert_eq!(rules.tcp(), Some(&h.tcp));
        assert_tcp(&h.tcp);
        // What goes on a request line or header line: bounded, no line breaks.
        let line = |v: &str| {
            !v.is_empty() && v.len() <= MAX_HTTP_LINE && !v.bytes().any(|b| b == b'\r' || b == b'\n')
        };
        assert!(line(&h.path) && (h.path.starts_with('/') || h.path == "*") && !h.path.contains(' '));
        assert!(h.host_header.as_deref().is_none_or(line));
        assert!(h.headers.len() <= MAX_HTTP_HEADERS && h.headers.iter().all(|x| line(x) && x.contains(':')));
        assert!(h.requests.is_none_or(|n| (1..=MAX_HTTP_REQUESTS).contains(&n)));
        if let HttpLoad::Open { rate, .. } = h.load {
            assert!(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE);
        }
        let (lo, hi) = HTTP_TIMEOUT_RANGE_S;
        assert!(h.timeout_s.is_none_or(|t| (lo..=hi).contains(&t)));
        let (lo, hi) = HTTP_HEADER_RANGE;
        assert!(h.max_header.is_none_or(|m| (lo..=hi).contains(&m)));
        assert!(h.max_body.is_none_or(|m| m <= MAX_HTTP_BODY));
        assert!(buffers <= 64 * 1024);
    }

    /// syn-flood: its rate; no buffers.
    fn syn_flood(&self, f: &netrig_proto::spec::kind::SynFloodSpec) {
        let Derived {
            rules, dirs, buffers, ..
        } = *self;
        use netrig_proto::spec::kind::MAX_SYN_FLOOD_RATE;
        assert_eq!(dirs, [Direction::Tx]);
        assert_eq!(rules.transport(), Transport::Tcp);
        assert!(
            (1..=MAX_SYN_FLOOD_RATE).contains(&f.rate_pps),
            "rate {}",
            f.rate_pps
        );
        assert_eq!(buffers, 0);
    }

    /// half-close: its connections, request and watch.
    fn half_close(&self, h: &netrig_proto::spec::kind::HalfCloseSpec) {
        let Derived {
            rules, dirs, buffers, ..
        } = *self;
        use netrig_proto::spec::kind::{
            MAX_HALF_CLOSE_CONNECTIONS, MAX_HALF_CLOSE_REQUEST, MAX_HALF_CLOSE_WATCH_S,
        };
        assert_eq!(dirs, [Direction::Tx]);
        assert_eq!(rules.transport(), Transport::Tcp);
        assert!((1..=MAX_HALF_CLOSE_CONNECTIONS).contains(&h.connections));
        assert!(!h.request.is_empty() && h.request.len() <= MAX_HALF_CLOSE_REQUEST);
        assert!(h.watch_s > 0.0 && h.watch_s <= MAX_HALF_CLOSE_WATCH_S);
        assert_ne!(h.to_port, Some(0));
        assert!(buffers <= 4096);
    }

    /// udp-stream: its datagram size and rate.
    fn udp_stream(&self, u: &netrig_proto::spec::kind::UdpStreamSpec) {
        let Derived {
            rules, dirs, buffers, ..
        } = *self;
        let size = |what: &str, v: u32| self.size(what, v);
        let want = if u.reverse { Direction::Rx } else { Direction::Tx };
        assert_eq!(dirs, [want]);
        assert_eq!(rules.transport(), Transport::Udp);
        assert_eq!(rules.exchange(), Exchange::Stream);
        assert!(rules.counts_bytes());
        assert_eq!(rules.tcp(), None);
        assert_eq!(rules.in_flight(), 1);
        size("-m", u.datagram_size);
        assert!(
            u.datagram_size >= UDP_HEADER_LEN && u.datagram_size <= MAX_UDP_PAYLOAD,
            "datagram size {}",
            u.datagram_size
        );
        assert_eq!(rules.datagram_size(), Some(u.datagram_size));
        assert_eq!(self.calls, (u.datagram_size, u.datagram_size));
        assert_pace(u.pace.as_ref());
        assert!(buffers <= UDP_BATCHES, "buffers {buffers}");
    }

    /// udp-rr: its transactions, datagram size and timeout.
    fn udp_rr(&self, u: &netrig_proto::spec::kind::UdpRrSpec) {
        let Derived {
            rules, dirs, buffers, ..
        } = *self;
        let size = |what: &str, v: u32| self.size(what, v);
        let t = &u.transactions;
        assert_eq!(dirs, [Direction::Tx]);
        assert_eq!(rules.transport(), Transport::Udp);
        assert_eq!(rules.exchange(), Exchange::Transactions);
        assert!(!rules.counts_bytes());
        assert_eq!(rules.tcp(), None);
        assert_transactions(t, MAX_IN_FLIGHT, &size);
        assert_eq!(rules.in_flight(), t.in_flight());
        for v in [t.request_size, t.response_size] {
            assert!((1..=MAX_UDP_PAYLOAD).contains(&v), "udp-rr size {v}");
        }
        let d = rules.datagram_size().expect("a UDP kind's datagram size");
        assert!(
            (UDP_HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&d),
            "datagram size {d}"
        );
        assert!(d >= t.request_size && d >= t.response_size);
        assert_timeout(u.timeout_s, u.timeout());
        assert!(
            buffers <= UDP_BATCHES + 2 * u64::from(MAX_UDP_PAYLOAD),
            "buffers {buffers}"
        );
    }
}

/// A TCP stream's sizes, rate and TCP options.
fn assert_stream(o: &StreamOptions, size: &dyn Fn(&str, u32)) {
    size("-m", o.message_size);
    size("-M", o.recv_size);
    assert_pace(o.pace.as_ref());
    assert_tcp(&o.tcp);
}

/// A rate: 1..=MAX_RATE_BPS bits/s, a quantum of 1..=MAX_PACING_US µs.
fn assert_pace(p: Option<&Pace>) {
    let Some(p) = p else { return };
    assert!(p.rate_bps >= 1 && p.rate_bps <= MAX_RATE_BPS, "-b {}", p.rate_bps);
    if let Some(q) = p.pacing_us {
        assert!((1..=MAX_PACING_US).contains(&q), "--pacing-us {q}");
    }
    let q = p.pacing();
    assert!(q >= Duration::from_micros(1) && q <= Duration::from_micros(u64::from(MAX_PACING_US)));
    if p.pacing_us.is_none() {
        assert_eq!(q, Duration::from_micros(u64::from(DEFAULT_PACING_US)));
    }
}

/// The agent's TCP options: a congestion-control name the kernel takes.
fn assert_tcp(t: &TcpOptions) {
    if let Some(cc) = &t.congestion {
        assert!(!cc.is_empty() && cc.len() <= 15, "--cc {cc:?}");
        assert!(
            cc.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "--cc {cc:?}"
        );
    }
}

/// Request/response sizes and load; `max_burst` is the kind's bound on
/// transactions (or connections) in flight.
fn assert_transactions(t: &Transactions, max_burst: u32, size: &dyn Fn(&str, u32)) {
    size("request size", t.request_size);
    size("response size", t.response_size);
    match t.load {
        Load::Closed { burst } => {
            assert!((1..=MAX_IN_FLIGHT).contains(&burst), "--burst {burst}");
            assert!(burst <= max_burst, "--burst {burst} over {max_burst}");
            assert_eq!(t.burst(), burst);
            assert_eq!(t.in_flight(), burst);
            assert_eq!(t.rate(), None);
            assert_eq!(t.spin(), None);
            assert!(!t.poisson());
        }
        Load::Open { rate, spin_us, .. } => {
            assert!(
                rate.is_finite() && rate > 0.0 && rate <= MAX_RATE,
                "--rate {rate}"
            );
            assert_eq!(t.burst(), 1);
            assert_eq!(t.rate(), Some(rate));
            if let Some(us) = spin_us {
                assert!(us <= MAX_SPIN_US, "--spin-us {us}");
            }
            assert!(t
                .spin()
                .is_none_or(|d| d <= Duration::from_micros(u64::from(MAX_SPIN_US))));
        }
    }
}

/// A transaction timeout (`--timeout`) and the duration it makes.
fn assert_timeout(timeout_s: Option<f64>, d: Duration) {
    let (lo, hi) = TXN_TIMEOUT_RANGE_S;
    if let Some(t) = timeout_s {
        assert!(t.is_finite() && t >= lo && t <= hi, "--timeout {t}");
    }
    assert_eq!(
        d,
        Duration::from_secs_f64(timeout_s.unwrap_or(DEFAULT_TXN_TIMEOUT_S))
    );
    assert!(d <= Duration::from_secs_f64(hi) && d >= Duration::from_secs_f64(lo));
}
