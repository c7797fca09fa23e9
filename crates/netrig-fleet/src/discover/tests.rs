use super::*;
use hickory_proto::rr::rdata::{A, AAAA, SRV};
use hickory_proto::rr::Record;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

/// An answer to query `id` for (`qname`, `rtype`), with the answer and additional records.
fn answer_bytes(
    id: u16,
    qname: &str,
    rtype: RecordType,
    rcode: ResponseCode,
    answers: Vec<Record>,
    additionals: Vec<Record>,
) -> Vec<u8> {
    let mut m = Message::response(id, OpCode::Query);
    m.metadata.response_code = rcode;
    m.add_query(Query::query(name(qname), rtype));
    m.add_answers(answers);
    m.add_additionals(additionals);
    m.to_vec().unwrap()
}

fn srv(owner: &str, port: u16, target: &str) -> Record {
    Record::from_rdata(name(owner), 5, RData::SRV(SRV::new(0, 50, port, name(target))))
}

fn a(owner: &str, ip: [u8; 4]) -> Record {
    Record::from_rdata(name(owner), 5, RData::A(A::from(Ipv4Addr::from(ip))))
}

fn aaaa(owner: &str, ip: Ipv6Addr) -> Record {
    Record::from_rdata(name(owner), 5, RData::AAAA(AAAA::from(ip)))
}

#[test]
fn resolv_conf_of_a_pod() {
    let conf = parse_resolv_conf(
        "# written by the kubelet\n\
         search netrig.svc.cluster.local svc.cluster.local cluster.local\n\
         nameserver 10.96.0.10\n\
         nameserver fe80::1%eth0\n\
         nameserver not-an-address\n\
         options ndots:5 timeout:2\n",
    );
    assert_eq!(
        conf.nameservers,
        vec![
            "10.96.0.10".parse::<IpAddr>().unwrap(),
            "fe80::1".parse().unwrap()
        ]
    );
    assert_eq!(
        conf.search,
        ["netrig.svc.cluster.local", "svc.cluster.local", "cluster.local"]
    );
    assert_eq!(conf.ndots, 5);
    // Defaults, `domain`, the last of search/domain winning, ndots capped at 15.
    let conf = parse_resolv_conf("search a.example\ndomain b.example.\noptions ndots:99\n");
    assert_eq!(conf.search, ["b.example"]);
    assert_eq!(conf.ndots, 15);
    assert_eq!(parse_resolv_conf("").ndots, 1);
}

#[test]
fn dns_server_with_or_without_its_port() {
    let p = |s| parse_dns_server(s).map(|a| a.to_string());
    assert_eq!(p("10.96.0.10"), Ok("10.96.0.10:53".into()));
    assert_eq!(p("127.0.0.1:5353"), Ok("127.0.0.1:5353".into()));
    assert_eq!(p("fd00::a"), Ok("[fd00::a]:53".into()));
    assert_eq!(p("[fd00::a]"), Ok("[fd00::a]:53".into()));
    assert_eq!(p("[fd00::a]:5353"), Ok("[fd00::a]:5353".into()));
    let e = p("kube-dns.kube-system").unwrap_err();
    assert!(
        e.starts_with("--dns-server: \"kube-dns.kube-system\" is not ADDR"),
        "{e}"
    );
}

#[test]
fn candidates_as_a_pod_resolver_tries_them() {
    let search: Vec<String> = ["netrig.svc.cluster.local", "svc.cluster.local"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        candidates("netrig-agents", &search, 5),
        [
            "netrig-agents.netrig.svc.cluster.local.",
            "netrig-agents.svc.cluster.local.",
            "netrig-agents."
        ]
    );
    assert_eq!(
        candidates("_netrig._tcp.netrig-agents", &search, 5)[0],
        "_netrig._tcp.netrig-agents.netrig.svc.cluster.local."
    );
    // As many dots as ndots: the name itself first.
    assert_eq!(
        candidates("a.b", &search, 1),
        ["a.b.", "a.b.netrig.svc.cluster.local.", "a.b.svc.cluster.local."]
    );
    // A trailing dot: the name alone.
    assert_eq!(candidates("agents.example.", &search, 5), ["agents.example."]);
    assert_eq!(candidates("agents", &[], 1), ["agents."]);
}

#[test]
fn parse_answer_srv_with_additional_addresses() {
    let q = "_netrig._tcp.agents.example.";
    let bytes = answer_bytes(
        0x1234,
        q,
        RecordType::SRV,
        ResponseCode::NoError,
        vec![
            srv(q, 6387, "a-0.agents.example."),
            srv(q, 6390, "a-1.agents.example."),
        ],
        vec![
            a("a-0.agents.example.", [10, 0, 0, 1]),
            aaaa("a-1.agents.example.", "fd00::2".parse().unwrap()),
        ],
    );
    let got = parse_answer(0x1234, &bytes).unwrap();
    assert!(!got.truncated);
    assert_eq!(got.rcode, Rcode::NoError);
    assert_eq!(got.question, Some((q.to_string(), RecordType::SRV)));
    assert_eq!(
        got.srv,
        vec![
            Srv {
                priority: 0,
                weight: 50,
                port: 6387,
                target: "a-0.agents.example.".into()
            },
            Srv {
                priority: 0,
                weight: 50,
                port: 6390,
                target: "a-1.agents.example.".into()
            },
        ]
    );
    assert!(got.addresses.is_empty());
    assert_eq!(
        got.additional,
        vec![
            ("a-0.agents.example.".into(), IpAddr::from([10, 0, 0, 1])),
            ("a-1.agents.example.".into(), "fd00::2".parse().unwrap()),
        ]
    );
    assert_eq!(got.cut, 0);
}

#[test]
fn parse_answer_refuses_what_is_not_the_answer() {
    let bytes = answer_bytes(
        7,
        "x.example.",
        RecordType::A,
        ResponseCode::NXDomain,
        vec![],
        vec![],
    );
    assert_eq!(parse_answer(7, &bytes).unwrap().rcode, Rcode::NxDomain);
    assert_eq!(
        parse_answer(8, &bytes),
        Err(AnswerError::WrongId { want: 8, got: 7 })
    );
    assert_eq!(parse_answer(7, &bytes[..11]), Err(AnswerError::Short(11)));
    // A query is not an answer.
    let (id, q) = query("x.example.", RecordType::A).unwrap();
    assert_eq!(parse_answer(id, &q), Err(AnswerError::NotAResponse));
    // Cut short inside a record.
    let full = answer_bytes(
        9,
        "x.example.",
        RecordType::A,
        ResponseCode::NoError,
        vec![a("x.example.", [1, 2, 3, 4])],
        vec![],
    );
    assert!(matches!(
        parse_answer(9, &full[..full.len() - 2]),
        Err(AnswerError::Malformed(_))
    ));
    // SERVFAIL and the TC bit.
    let mut m = Message::response(3, OpCode::Query);
    m.metadata.response_code = ResponseCode::ServFail;
    m.metadata.truncation = true;
    let got = parse_answer(3, &m.to_vec().unwrap()).unwrap();
    assert_eq!(got.rcode, Rcode::Other("Server Failure".into()));
    assert!(got.truncated);
}

#[test]
fn parse_answer_uses_at_most_max_records() {
    let answers: Vec<Record> = (0..MAX_RECORDS as u32 + 10)
        .map(|i| a("many.example.", (0x0a00_0000 + i).to_be_bytes()))
        .collect();
    let bytes = answer_bytes(
        1,
        "many.example.",
        RecordType::A,
        ResponseCode::NoError,
        answers,
        vec![],
    );
    let got = parse_answer(1, &bytes).unwrap();
    assert_eq!(got.addresses.len(), MAX_RECORDS);
    assert_eq!(got.cut, 10);
}

#[test]
fn a_query_is_what_a_server_reads() {
    let (id, bytes) = query("_netrig._tcp.agents.example.", RecordType::SRV).unwrap();
    let m = Message::from_vec(&bytes).unwrap();
    assert_eq!(m.metadata.id, id);
    assert!(m.metadata.recursion_desired);
    assert_eq!(m.queries.len(), 1);
    assert_eq!(m.queries[0].query_type(), RecordType::SRV);
    assert_eq!(m.edns.as_ref().unwrap().max_payload(), EDNS_PAYLOAD);
    assert!(query("a..b", RecordType::A).is_err());
}

/// A port free for UDP and TCP on 127.0.0.1, below the ephemeral range.
pub(crate) fn low_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let _ = NEXT.compare_exchange(
        0,
        std::process::id() % 20000 + 1,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..20000 {
        let port = (10000 + NEXT.fetch_add(13, Ordering::Relaxed) % 20000) as u16;
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 10000 and 30000")
}

/// A DNS server on 127.0.0.1 that answers each query by `answer(id, question bytes)` over UDP
/// and TCP, for `queries` UDP queries at most, and stops after 10 s in any case.
struct FakeServer {
    addr: SocketAddr,
    udp_queries: Arc<AtomicU32>,
    tcp_queries: Arc<AtomicU32>,
}

/// The datagrams to send back: from the server's socket, or (`true`) from another socket
/// on the same host, as a spoofer would.
type Answerer = dyn Fn(&Message, bool) -> Vec<Vec<u8>> + Send + Sync;

/// A datagram marked to go from another socket than the server's.
const SPOOF: u8 = 0xff;

impl FakeServer {
    /// `answer(query, over_tcp)`: the datagrams to send back (UDP), the first as the answer (TCP).
    fn start(answer: Arc<Answerer>) -> FakeServer {
        let port = low_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let udp = UdpSocket::bind(addr).unwrap();
        let tcp = TcpListener::bind(addr).unwrap();
        let udp_queries = Arc::new(AtomicU32::new(0));
        let tcp_queries = Arc::new(AtomicU32::new(0));
        let stop = Instant::now() + Duration::from_secs(10);
        {
            let answer = answer.clone();
            let count = udp_queries.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                let other = UdpSocket::bind(("127.0.0.1", 0)).unwrap();
                udp.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
                while Instant::now() < stop {
                    let Ok((n, from)) = udp.recv_from(&mut buf) else {
                        continue;
                    };
                    count.fetch_add(1, Ordering::SeqCst);
                    let q = Message::from_vec(&buf[..n]).unwrap();
                    for dgram in answer(&q, false) {
                        match dgram.split_first() {
                            Some((&SPOOF, rest)) => other.send_to(rest, from),
                            _ => udp.send_to(&dgram, from),
                        }
                        .unwrap();
                    }
                }
            });
        }
        {
            let count = tcp_queries.clone();
            tcp.set_nonblocking(true).unwrap();
            std::thread::spawn(move || {
                while Instant::now() < stop {
                    let Ok((mut s, _)) = tcp.accept() else {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let mut len = [0u8; 2];
                    if s.read_exact(&mut len).is_err() {
                        continue;
                    }
                    let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    if s.read_exact(&mut q).is_err() {
                        continue;
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let q = Message::from_vec(&q).unwrap();
                    if let Some(a) = answer(&q, true).into_iter().next() {
                        let mut out = (a.len() as u16).to_be_bytes().to_vec();
                        out.extend_from_slice(&a);
                        let _ = s.write_all(&out);
                    }
                }
            });
        }
        FakeServer {
            addr,
            udp_queries,
            tcp_queries,
        }
    }

    fn resolver(&self) -> Resolver {
        Resolver {
            server: self.addr,
            search: vec![],
            ndots: 1,
        }
    }
}

fn reply(q: &Message, rcode: ResponseCode, answers: Vec<Record>) -> Message {
    let mut m = Message::response(q.metadata.id, OpCode::Query);
    m.metadata.response_code = rcode;
    m.add_queries(q.queries.clone());
    m.add_answers(answers);
    m
}

#[test]
fn discover_ignores_other_answers_and_falls_back_to_tcp() {
    // Over UDP: first an answer with another id, then one to another question, then one from
    // another socket (a spoofer on the same host), then the truncated real one; over TCP the
    // whole answer. Each of the first three would be taken if not checked.
    let server = FakeServer::start(Arc::new(move |q: &Message, tcp: bool| {
        let qn = q.queries[0].name().to_ascii();
        let ips: Vec<Record> = (1..=3).map(|i| a(&qn, [10, 0, 0, i])).collect();
        if q.queries[0].query_type() == RecordType::AAAA {
            return vec![reply(q, ResponseCode::NoError, vec![]).to_vec().unwrap()];
        }
        if tcp {
            return vec![reply(q, ResponseCode::NoError, ips).to_vec().unwrap()];
        }
        let mut wrong_id = reply(q, ResponseCode::NoError, vec![a(&qn, [6, 6, 6, 6])]);
        wrong_id.metadata.id = q.metadata.id.wrapping_add(1);
        let mut other_q = Message::response(q.metadata.id, OpCode::Query);
        other_q.add_query(Query::query(name("evil.example."), RecordType::A));
        other_q.add_answer(a("evil.example.", [6, 6, 6, 7]));
        let mut spoof = vec![SPOOF];
        spoof.extend(
            reply(q, ResponseCode::NoError, vec![a(&qn, [6, 6, 6, 8])])
                .to_vec()
                .unwrap(),
        );
        let mut truncated = reply(q, ResponseCode::NoError, vec![]);
        truncated.metadata.truncation = true;
        vec![
            wrong_id.to_vec().unwrap(),
            other_q.to_vec().unwrap(),
            spoof,
            truncated.to_vec().unwrap(),
        ]
    }));
    let d = discover_with(
        "agents.example.",
        6387,
        &server.resolver(),
        Duration::from_secs(5),
    )
    .unwrap();
    let want: Vec<Found> = (1..=3)
        .map(|i| Found {
            name: format!("10.0.0.{i}"),
            addr: ([10, 0, 0, i], 6387).into(),
        })
        .collect();
    assert_eq!(d.found, want);
    assert_eq!(d.answered, "agents.example.");
    // A over UDP then TCP, AAAA over UDP.
    assert_eq!(server.tcp_queries.load(Ordering::SeqCst), 1);
    assert_eq!(server.udp_queries.load(Ordering::SeqCst), 2);
}

#[test]
fn discover_srv_asks_targets_missing_from_the_additional_section() {
    let server = FakeServer::start(Arc::new(|q: &Message, _tcp: bool| {
        let qn = q.queries[0].name().to_ascii();
        let rtype = q.queries[0].query_type();
        let m = match (qn.as_str(), rtype) {
            ("_netrig._tcp.agents.example.", RecordType::SRV) => {
                let mut m = reply(
                    q,
                    ResponseCode::NoError,
                    vec![
                        srv(&qn, 6387, "b.example."),
                        srv(&qn, 6387, "a.example."),
                        srv(&qn, 6390, "c.example."),
                        srv(&qn, 6387, "gone.example."),
                        srv(&qn, 6387, "."),
                    ],
                );
                m.add_additional(a("a.example.", [10, 0, 0, 1]));
                m
            }
            ("b.example.", RecordType::A) => {
                reply(q, ResponseCode::NoError, vec![a("b.example.", [10, 0, 0, 2])])
            }
            ("c.example.", RecordType::AAAA) => reply(
                q,
                ResponseCode::NoError,
                vec![aaaa("c.example.", "fd00::3".parse().unwrap())],
            ),
            ("gone.example.", _) => reply(q, ResponseCode::NXDomain, vec![]),
            _ => reply(q, ResponseCode::NoError, vec![]),
        };
        vec![m.to_vec().unwrap()]
    }));
    let d = discover_with(
        "_netrig._tcp.agents.example",
        1,
        &server.resolver(),
        Duration::from_secs(5),
    )
    .unwrap();
    let found: Vec<(String, String)> = d
        .found
        .iter()
        .map(|f| (f.name.clone(), f.addr.to_string()))
        .collect();
    assert_eq!(
        found,
        [
            ("a.example".to_string(), "10.0.0.1:6387".to_string()),
            ("b.example".into(), "10.0.0.2:6387".into()),
            ("c.example".into(), "[fd00::3]:6390".into()),
        ]
    );
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(d.warnings[0].contains("gone.example."), "{:?}", d.warnings);
    // SRV; b: A, AAAA; c: A, AAAA; gone: A (NXDOMAIN ends it). Not a: the additional had it.
    assert_eq!(server.udp_queries.load(Ordering::SeqCst), 6);
}

#[test]
fn discover_walks_the_search_list_and_names_nxdomain() {
    let server = FakeServer::start(Arc::new(|q: &Message, _tcp: bool| {
        let qn = q.queries[0].name().to_ascii();
        let m = match qn.as_str() {
            "agents.two.example." if q.queries[0].query_type() == RecordType::A => {
                reply(q, ResponseCode::NoError, vec![a(&qn, [10, 0, 0, 9])])
            }
            "agents.two.example." | "empty.one.example." => reply(q, ResponseCode::NoError, vec![]),
            _ => reply(q, ResponseCode::NXDomain, vec![]),
        };
        vec![m.to_vec().unwrap()]
    }));
    let resolver = Resolver {
        search: vec!["one.example".into(), "two.example".into()],
        ndots: 5,
        ..server.resolver()
    };
    let d = discover_with("agents", 6387, &resolver, Duration::from_secs(5)).unwrap();
    assert_eq!(d.answered, "agents.two.example.");
    assert_eq!(d.found.len(), 1);
    let e = discover_with("nothing", 6387, &resolver, Duration::from_secs(5)).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, DiscoverError::NxDomain { .. }), "{text}");
    assert!(
        text.contains("nothing") && text.contains(&server.addr.to_string()),
        "{text}"
    );
    assert!(
        text.contains("nothing.one.example., nothing.two.example., nothing."),
        "{text}"
    );
    let e = discover_with("empty", 6387, &resolver, Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, DiscoverError::Empty { .. }), "{e}");
    assert!(e.to_string().contains("no A or AAAA records"), "{e}");
}

#[test]
fn discover_gives_up_at_its_timeout_and_says_servfail() {
    // A server that never answers: the error comes at the timeout, not long after, and the
    // query was sent again meanwhile.
    let silent = FakeServer::start(Arc::new(|_: &Message, _| vec![]));
    let t0 = Instant::now();
    let e = discover_with(
        "agents.example.",
        6387,
        &silent.resolver(),
        Duration::from_millis(1500),
    )
    .unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(e, DiscoverError::Timeout { .. }), "{e}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(silent.udp_queries.load(Ordering::SeqCst) >= 2);
    let failing = FakeServer::start(Arc::new(|q: &Message, _| {
        vec![reply(q, ResponseCode::ServFail, vec![]).to_vec().unwrap()]
    }));
    let e = discover_with(
        "agents.example.",
        6387,
        &failing.resolver(),
        Duration::from_secs(5),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("answered Server Failure for agents.example. A"),
        "{e}"
    );
}
