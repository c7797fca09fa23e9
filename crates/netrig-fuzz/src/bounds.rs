//! Shared by the targets: the bounds every spec the agent accepts must hold.

use netrig_proto::report::Role;
use netrig_proto::spec::kind::{KindBounds, Line};
use netrig_proto::spec::{
    Direction, Exchange, KindRules, KindSpec, Limit, Load, Pace, TcpOptions, Transactions, DEFAULT_PACING_US,
    DEFAULT_TXN_TIMEOUT_S, MAX_CPU, MAX_CPU_LIST, MAX_CRR_IN_FLIGHT, MAX_IN_FLIGHT, MAX_MESSAGE_SIZE,
    MAX_PACING_RATE_BPS, MAX_PACING_US, MAX_RATE, MAX_RATE_BPS, MAX_SOCKET_BUFFER, MAX_SPIN_US,
    MAX_UDP_PAYLOAD, MAX_WORKERS, MIN_INTERVAL_S, TXN_TIMEOUT_RANGE_S, UDP_BATCH, UDP_BUFFER_MAX,
    UDP_HEADER_LEN,
};
use netrig_proto::{AgentLimits, TestSpec};
use std::time::Duration;

/// Asserts that a spec `TestSpec::validate(limits)` accepted is bounded:
/// flows, every size of its kind, durations, rates and lists, by netrig's
/// own bounds and by the agent's `limits`; that its kind's rules hold
/// together by its transport and its exchange (directions, in flight, call
/// sizes, datagrams, TCP options) and its options within the bounds the
/// kind states (`KindRules::bounds`, buffers among them), no kind named
/// here; and that what the agent derives from it (flow plan,
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

/// A spec, its kind's rules and what they derive: what the checks by
/// transport, by exchange and of the kind's own bounds read.
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
    /// The kind as its rules describe it: by its transport, by its
    /// exchange, and each of its options within the bound it states
    /// ([`KindRules::bounds`]). No kind is named: a new one is checked as
    /// these are.
    fn assert_kind(&self) {
        let b = self.rules.bounds();
        self.assert_transport(&b);
        self.assert_exchange(&b);
        self.assert_own(&b);
    }

    /// A size of the kind's: 1 to the largest message the agent takes.
    fn size(&self, what: &str, v: u32) {
        let max_size = self.max_size;
        assert!(v >= 1 && v <= max_size, "{what} {v} (at most {max_size})");
    }

    /// Datagrams: no TCP options, a datagram size netrig's header to the
    /// largest UDP payload that holds every call (or, for requests and
    /// responses, each of them). A stream: no datagram size, and TCP
    /// options (where the kind has them) that choose its transport.
    fn assert_transport(&self, b: &KindBounds<'_>) {
        let Derived { s, rules, calls, .. } = *self;
        let transport = rules.transport();
        if !transport.datagrams() {
            assert_eq!(rules.datagram_size(), None, "{}", s.kind());
            if let Some(tcp) = rules.tcp() {
                assert_tcp(tcp);
                assert_eq!(
                    transport,
                    tcp.transport(),
                    "{}: its TCP options choose its transport",
                    s.kind()
                );
            }
            return;
        }
        assert_eq!(
            rules.tcp(),
            None,
            "{}: TCP options over {}",
            s.kind(),
            transport.name()
        );
        let d = rules.datagram_size().expect("a datagram kind's datagram size");
        assert!(
            (UDP_HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&d),
            "datagram size {d}"
        );
        match b.transactions {
            Some(t) => assert!(
                d >= t.request_size && d >= t.response_size,
                "datagram size {d} under {t:?}"
            ),
            None => assert_eq!(calls, (d, d), "{}: every call a datagram", s.kind()),
        }
    }

    /// A stream: one message in flight, counted in bytes (`-n`), its rate.
    /// Requests and responses: from the client, counted in transactions,
    /// each call room for a whole request or response, and their load
    /// within the exchange's bound on what is in flight; and their timeout.
    fn assert_exchange(&self, b: &KindBounds<'_>) {
        let Derived { s, rules, dirs, .. } = *self;
        let exchange = rules.exchange();
        if !exchange.is_transactional() {
            assert!(rules.counts_bytes(), "{}", s.kind());
            assert_eq!(rules.in_flight(), 1);
            assert_pace(b.pace);
            return;
        }
        assert_eq!(
            dirs,
            [Direction::Tx],
            "{}: the client initiates every transaction",
            s.kind()
        );
        assert!(!rules.counts_bytes(), "{}", s.kind());
        assert_eq!(b.pace, None, "{}", s.kind());
        let max_burst = if exchange == Exchange::ConnectionPerTransaction {
            MAX_CRR_IN_FLIGHT
        } else {
            MAX_IN_FLIGHT
        };
        let n = rules.in_flight();
        assert!((1..=max_burst).contains(&n), "{n} in flight per flow");
        if let Some(t) = b.transactions {
            assert_transactions(t, max_burst, &|what, v| self.size(what, v));
            if exchange == Exchange::Transactions {
                assert_eq!(n, t.in_flight());
            }
            // A call may carry at least one whole request or response.
            let (send, recv) = self.calls;
            let most = t.request_size.max(t.response_size);
            assert!(
                send >= most && recv >= most,
                "call sizes {send}, {recv} under {most}"
            );
        }
        if let Some((timeout_s, d)) = b.timeout {
            assert_timeout(timeout_s, d);
        }
    }

    /// The kind's own options within the bounds it states, and its buffers
    /// within what it says they take of the agent's largest message.
    fn assert_own(&self, b: &KindBounds<'_>) {
        if let Some(calls) = b.calls {
            assert_eq!(self.calls, calls, "{}", self.s.kind());
        }
        for (what, v) in &b.sizes {
            self.size(what, *v);
        }
        for (what, v, lo, hi) in &b.ranges {
            assert!(*lo <= *v && *v <= *hi, "{what} {v} (from {lo} to {hi})");
        }
        for (what, v, most, line) in &b.lines {
            assert!(
                !v.is_empty() && v.len() <= *most && !v.bytes().any(|b| b == b'\r' || b == b'\n'),
                "{what} {v:?}"
            );
            match line {
                Line::Text => {}
                Line::Target => assert!(
                    (v.starts_with('/') || *v == "*") && !v.contains(' '),
                    "{what} {v:?}"
                ),
                Line::Header => assert!(v.contains(':'), "{what} {v:?}"),
            }
        }
        let (messages, besides) = b.buffers;
        let most = messages * u64::from(self.max_size) + besides;
        assert!(self.buffers <= most, "buffers {} over {most}", self.buffers);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::kind::{HalfCloseSpec, SynFloodSpec};
    use netrig_proto::spec::{
        TcpBidirSpec, TcpCrrSpec, TcpMaertsSpec, TcpRrSpec, TcpStreamSpec, UdpRrSpec, UdpStreamSpec,
    };

    fn bounded(test: KindSpec) {
        let limits = AgentLimits::default();
        let s = TestSpec::new(test, Limit::Duration { seconds: 1.0 });
        s.validate(&limits)
            .unwrap_or_else(|e| panic!("{}: {e}", s.kind()));
        assert_bounded(&s, &limits);
    }

    /// Every kind's defaults, and the TCP kinds over MPTCP, are within the
    /// bounds their rules state.
    #[test]
    fn every_kind_is_checked_by_its_rules() {
        let mptcp = TcpOptions {
            mptcp: true,
            ..TcpOptions::default()
        };
        let stream = |tcp: &TcpOptions| netrig_proto::spec::StreamOptions {
            tcp: tcp.clone(),
            ..Default::default()
        };
        for tcp in [TcpOptions::default(), mptcp] {
            bounded(KindSpec::TcpStream(TcpStreamSpec(stream(&tcp))));
            bounded(KindSpec::TcpMaerts(TcpMaertsSpec(stream(&tcp))));
            bounded(KindSpec::TcpBidir(TcpBidirSpec(stream(&tcp))));
            bounded(KindSpec::TcpRr(TcpRrSpec {
                tcp: tcp.clone(),
                ..Default::default()
            }));
            bounded(KindSpec::TcpCrr(TcpCrrSpec {
                tcp: tcp.clone(),
                ..Default::default()
            }));
        }
        bounded(KindSpec::UdpStream(UdpStreamSpec::default()));
        bounded(KindSpec::UdpRr(UdpRrSpec::default()));
        bounded(KindSpec::SynFlood(SynFloodSpec { rate_pps: 100 }));
        bounded(KindSpec::HalfClose(HalfCloseSpec::default()));
    }

    /// A kind whose options break a bound it states is caught.
    #[test]
    #[should_panic(expected = "buffers")]
    fn a_kind_past_its_stated_buffers_is_caught() {
        let s = TestSpec::new(
            KindSpec::TcpRr(TcpRrSpec::default()),
            Limit::Duration { seconds: 1.0 },
        );
        s.validate(&AgentLimits::default()).unwrap();
        let rules = s.rules();
        let k = Derived {
            s: &s,
            rules,
            dirs: s.directions(),
            calls: rules.call_sizes(),
            buffers: 2 * u64::from(MAX_MESSAGE_SIZE) + (4 << 20) + 1,
            max_size: MAX_MESSAGE_SIZE,
        };
        k.assert_own(&rules.bounds());
    }
}
