//! Discovery against a real DNS server: Debian's dnsmasq, run by the test on 127.0.0.1 at a
//! port below the ephemeral range, serving a headless Service's records as Kubernetes names
//! them (SRV records of `_netrig._tcp.<service>` with one target per pod, each with its A
//! record), a name with three A records, and NXDOMAIN for what it does not know. Skipped when
//! dnsmasq is missing, unless `CI` is set (then it fails).
//!
//! `NETRIG_WRITE_SEEDS=1` also writes the answers dnsmasq gave into fuzz/seeds/dns_answer/
//! (the fuzz target's seeds: real answers).

use netrig_fleet::discover::{
    discover, discover_with, parse_answer, query, DiscoverError, Found, Rcode, RecordType, Resolver,
};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const DNSMASQ: &str = "/usr/sbin/dnsmasq";

/// dnsmasq, or why the test cannot run (a failure under CI).
fn have_dnsmasq() -> bool {
    if Path::new(DNSMASQ).exists() {
        return true;
    }
    let why = format!("{DNSMASQ} is missing (apt-get install -y dnsmasq-base)");
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("skipped: {why}");
    false
}

/// A port free for UDP and TCP on 127.0.0.1, below the ephemeral range; each call of a
/// process walks on from the last (tests run at once).
fn low_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let _ = NEXT.compare_exchange(
        0,
        std::process::id() % 20000 + 1,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..20000 {
        let port = (10000 + NEXT.fetch_add(17, Ordering::Relaxed) % 20000) as u16;
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 10000 and 30000")
}

/// The pods of the big service: enough SRV targets that the answer does not fit UDP.
const BIG: u32 = 60;

struct Dnsmasq {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dnsmasq {
    fn start() -> Dnsmasq {
        let port = low_port();
        // A name only this dnsmasq knows: the readiness check is answered by this one, not by
        // another test's that took the port first (then this one would have failed to bind).
        let me = format!("instance-{}-{port}.netrig.test", std::process::id());
        let mut args: Vec<String> = [
            "-d",
            "-k",
            "--port",
            &port.to_string(),
            "--listen-address",
            "127.0.0.1",
            "--bind-interfaces",
            "--no-resolv",
            "--no-hosts",
            "-C",
            "/dev/null",
            "--pid-file=",
            // Names under test. are answered from these records alone: NXDOMAIN otherwise.
            "--local=/test/",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("--host-record={me},10.9.9.9"));
        for i in 0..3 {
            args.push(format!(
                "--srv-host=_netrig._tcp.agents.netrig.test,agent-{i}.agents.netrig.test,6387"
            ));
            args.push(format!(
                "--host-record=agent-{i}.agents.netrig.test,10.1.0.{}",
                i + 1
            ));
            args.push(format!("--host-record=three.netrig.test,10.2.0.{}", i + 1));
        }
        for i in 0..BIG {
            let target = format!("a-pod-with-a-longer-name-{i:03}.big.netrig.test");
            args.push(format!("--srv-host=_netrig._tcp.big.netrig.test,{target},7000"));
            args.push(format!("--host-record={target},10.3.{}.{}", i / 200, i % 200 + 1));
        }
        let child = Command::new(DNSMASQ)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dnsmasq starts");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let d = Dnsmasq { child, addr };
        // Ready when it answers a query (within 10 s).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if raw(
                "three.netrig.test.",
                RecordType::A,
                addr,
                Duration::from_millis(200),
            )
            .is_some()
            {
                return d;
            }
            assert!(
                Instant::now() < deadline,
                "dnsmasq did not answer on {addr} within 10 s"
            );
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

/// One UDP exchange by hand: the query's id and the answer's bytes.
fn raw(name: &str, rtype: RecordType, server: SocketAddr, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    let (id, q) = query(name, rtype).unwrap();
    let s = UdpSocket::bind(("127.0.0.1", 0)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.send_to(&q, server).unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    buf.truncate(n);
    Some((id, buf))
}

#[test]
fn discover_a_headless_service_in_dnsmasq() {
    if !have_dnsmasq() {
        return;
    }
    let dns = Dnsmasq::start();
    let t = Duration::from_secs(5);

    // SRV: three pods, their addresses from the additional section, the SRV port.
    let d = discover_with("_netrig._tcp.agents.netrig.test", 1, &dns.resolver(), t).unwrap();
    let want: Vec<Found> = (0..3)
        .map(|i| Found {
            name: format!("agent-{i}.agents.netrig.test"),
            addr: ([10, 1, 0, i + 1], 6387).into(),
        })
        .collect();
    assert_eq!(d.found, want);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    // The same through discover(), the server given (resolv.conf's search list aside).
    assert_eq!(
        discover("_netrig._tcp.agents.netrig.test.", 1, Some(dns.addr), t).unwrap(),
        want
    );

    // A: three addresses, the port given, sorted.
    let found = discover("three.netrig.test.", 6390, Some(dns.addr), t).unwrap();
    let addrs: Vec<String> = found.iter().map(|f| f.addr.to_string()).collect();
    assert_eq!(addrs, ["10.2.0.1:6390", "10.2.0.2:6390", "10.2.0.3:6390"]);
    assert_eq!(found[0].name, "10.2.0.1");

    // NXDOMAIN, named with the server.
    let e = discover("nobody.netrig.test.", 6387, Some(dns.addr), t).unwrap_err();
    assert!(matches!(e, DiscoverError::NxDomain { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("nobody.netrig.test") && text.contains(&dns.addr.to_string()),
        "{text}"
    );
    let e = discover("_netrig._tcp.nobody.netrig.test.", 6387, Some(dns.addr), t).unwrap_err();
    assert!(matches!(e, DiscoverError::NxDomain { .. }), "{e}");

    // A search list as a pod's: `agents` alone, ndots 5.
    let pod = Resolver {
        search: vec!["svc.netrig.test".into(), "netrig.test".into()],
        ndots: 5,
        ..dns.resolver()
    };
    let d = discover_with("_netrig._tcp.agents", 1, &pod, t).unwrap();
    assert_eq!(d.answered, "_netrig._tcp.agents.netrig.test.");
    assert_eq!(d.found, want);
}

#[test]
fn a_big_service_comes_over_tcp() {
    if !have_dnsmasq() {
        return;
    }
    let dns = Dnsmasq::start();
    let srv = RecordType::SRV;
    // Over UDP dnsmasq cuts the answer (TC): discovery asks again over TCP and gets them all.
    let (id, udp) = raw(
        "_netrig._tcp.big.netrig.test.",
        srv,
        dns.addr,
        Duration::from_secs(5),
    )
    .expect("dnsmasq answers");
    let cut = parse_answer(id, &udp).unwrap();
    assert!(cut.truncated, "{} bytes, not truncated", udp.len());
    assert!(cut.srv.len() < BIG as usize);
    let d = discover_with(
        "_netrig._tcp.big.netrig.test.",
        1,
        &dns.resolver(),
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(d.found.len(), BIG as usize);
    assert!(d.found.iter().all(|f| f.addr.port() == 7000));
    assert_eq!(d.found[0].name, "a-pod-with-a-longer-name-000.big.netrig.test");
    assert_eq!(d.found[0].addr, ([10, 3, 0, 1], 7000).into());

    if std::env::var_os("NETRIG_WRITE_SEEDS").is_some() {
        write_seeds(&dns, &udp);
    }
}

/// fuzz/seeds/dns_answer/: real answers, as dnsmasq gave them.
fn write_seeds(dns: &Dnsmasq, truncated: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/dns_answer");
    std::fs::create_dir_all(&dir).unwrap();
    let t = Duration::from_secs(5);
    let mut seeds: Vec<(&str, Vec<u8>)> = vec![("srv-truncated", truncated.to_vec())];
    for (file, name, rtype) in [
        (
            "srv-additional",
            "_netrig._tcp.agents.netrig.test.",
            RecordType::SRV,
        ),
        ("a-three", "three.netrig.test.", RecordType::A),
        ("aaaa-none", "three.netrig.test.", RecordType::AAAA),
        ("nxdomain", "nobody.netrig.test.", RecordType::A),
    ] {
        let (id, bytes) = raw(name, rtype, dns.addr, t).unwrap();
        assert!(parse_answer(id, &bytes).is_ok(), "{file}");
        seeds.push((file, bytes));
    }
    // The whole big answer, over TCP.
    let (id, q) = query("_netrig._tcp.big.netrig.test.", RecordType::SRV).unwrap();
    let mut s = std::net::TcpStream::connect_timeout(&dns.addr, t).unwrap();
    s.set_read_timeout(Some(t)).unwrap();
    use std::io::{Read, Write};
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut big = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut big).unwrap();
    let a = parse_answer(id, &big).unwrap();
    assert_eq!(a.rcode, Rcode::NoError);
    assert_eq!(a.srv.len(), BIG as usize);
    seeds.push(("srv-big-tcp", big));
    for (file, bytes) in seeds {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
}
