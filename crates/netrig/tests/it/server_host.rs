//! The server host's view (issue #13, item 6): an agent on the server's host
//! watches it while a kind with one end loads the server. Each test makes a
//! network namespace of its own, so the kernel's counters it reads are not
//! shared with any other test: the agent (`netrig serve`) runs in it, and
//! so does a thread of this test (setns), which floods a listener there and
//! asks the agent for its view through the run API.

use crate::helpers::{run, stderr, validate, Netns, NETRIG_LOG};
use netrig_engine::RunControl;
use netrig_kinds::{Ends, Kind, LocalEnd};
use netrig_proto::TestSpec;
use netrig_report::{IntervalResult, TestResult};
use netrig_run::{Cancel, LocalOptions, Target};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A kind with one end that opens `CONNECTS` connections to the server at
/// once, without blocking, keeps them for a moment and closes them: a flood
/// of connects, as many clients arriving together.
struct Flood;

const CONNECTS: usize = 400;

impl netrig_kinds::OneEnded for Flood {
    fn run(
        &self,
        spec: &TestSpec,
        server: SocketAddr,
        _: &LocalEnd,
        _: Arc<RunControl>,
        _: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, String> {
        use socket2::{Domain, Socket, Type};
        let mut socks = Vec::with_capacity(CONNECTS);
        for _ in 0..CONNECTS {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(|e| e.to_string())?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            // EINPROGRESS: the handshake goes on while the next is opened.
            let _ = s.connect(&server.into());
            socks.push(s);
        }
        // Long enough for the handshakes, and for the agent to sample.
        std::thread::sleep(Duration::from_millis(1500));
        drop(socks);
        let text = include_str!("../../../netrig-report/tests/fixtures/tcp-stream.json");
        let mut r: TestResult = serde_json::from_str(text).map_err(|e| e.to_string())?;
        r.test = format!("flood ({})", spec.kind());
        r.warnings.clear();
        r.summary.transactions = Some(CONNECTS as u64);
        Ok(r)
    }
}

impl Kind for Flood {
    fn name(&self) -> &'static str {
        "flood"
    }
    fn about(&self) -> &'static str {
        "opens many connections to a server at once"
    }
    fn args(&self, cmd: clap::Command) -> clap::Command {
        cmd
    }
    fn plan(&self, _: &clap::ArgMatches) -> Result<netrig_kinds::Planned, String> {
        Err("not from the command line".into())
    }
    fn workload(&self, spec: &TestSpec) -> netrig_kinds::Workloads {
        netrig_kinds::of(spec).workload(spec)
    }
    fn ends(&self) -> Ends<'_> {
        Ends::ClientOnly(self)
    }
    fn report(&self) -> &dyn netrig_report::KindReport {
        self
    }
}

impl netrig_report::KindReport for Flood {
    fn config(&self, _: &TestSpec, _: &mut netrig_report::TestConfig) {}
    fn table(&self) -> &'static dyn netrig_report::TableLayout {
        netrig_kinds::by_name("tcp-stream").expect("a kind").table()
    }
}

/// `netrig serve` inside `ns` on port 6387, waited for; killed on drop.
pub(crate) struct AgentIn(Child);

impl AgentIn {
    pub(crate) fn start(ns: &Netns) -> Result<AgentIn, String> {
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                env!("CARGO_BIN_EXE_netrig"),
                "serve",
                "-q",
            ])
            .env("RUST_LOG", NETRIG_LOG)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn netrig serve: {e}"))?;
        let agent = AgentIn(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let o = Command::new("ip")
                .args(["netns", "exec", &ns.0, "ss", "-Htln", "sport", "= :6387"])
                .output()
                .map_err(|e| format!("ss: {e}"))?;
            if !o.stdout.is_empty() {
                return Ok(agent);
            }
            if Instant::now() > deadline {
                return Err("the agent in the namespace did not listen within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for AgentIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `f` on a thread of its own that has entered `ns`'s network
/// namespace (setns applies to the calling thread alone).
fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    use std::os::fd::AsRawFd;
    let path = format!("/run/netns/{}", ns.0);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: a valid descriptor of a network namespace; only this thread moves.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| "the thread in the namespace panicked".to_string())?
}

/// A listener whose accept queue holds one connection and which never
/// accepts, flooded with connects while the agent watches: the view shows
/// the overflows, and the warning names the counter and the knob.
#[test]
fn a_listen_queue_overflow_is_reported_from_the_server_host() {
    let Some(ns) = Netns::or_skip("hv") else {
        return;
    };
    let _agent = AgentIn::start(&ns).expect("the agent starts in the namespace");
    let result = in_netns(&ns, || {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        s.listen(1).unwrap();
        let server: TcpListener = s.into();
        let port = server.local_addr().unwrap().port();
        let local = LocalOptions {
            server_agent: Some(Target::agent("127.0.0.1", 6387)),
            ..LocalOptions::default()
        };
        let spec = netrig_run::suite::quick(0.3).remove(0);
        let r = netrig_run::run_kind(
            &Flood,
            &Target::agent("127.0.0.1", port),
            local,
            &spec,
            &Cancel::new(),
            &mut |_| {},
        );
        drop(server);
        r.map_err(|e| e.to_string())
    })
    .expect("the namespace's thread")
    .expect("the flood and the watch");
    let h = result.server_host.as_ref().expect("the server host's view");
    let overflows = h.counters.get("TcpExt.ListenOverflows").copied().unwrap_or(0);
    assert!(
        overflows > 0,
        "{CONNECTS} connects at a backlog of 1 that is never accepted: {:?}",
        h.counters
    );
    assert!(h.samples >= 1, "sampled during the 1.5 s flood: {}", h.samples);
    assert!(h.window_s >= 1.4 && h.window_s < 30.0, "{}", h.window_s);
    let w: Vec<&String> = result
        .warnings
        .iter()
        .filter(|w| w.contains("listen queue overflowed"))
        .collect();
    assert_eq!(w.len(), 1, "{:#?}", result.warnings);
    assert!(
        w[0].contains("(TcpExt.ListenOverflows)") && w[0].contains("net.core.somaxconn"),
        "{}",
        w[0]
    );
    // The half-open connections were seen at their peak (the SYN queue
    // held some while the accept queue was full), sockets counted by state.
    let s = h.sockets.as_ref().expect("sockets by state");
    assert!(s.syn_recv.peak + s.established.peak > 0, "{s:?}");
    assert!(h.service_demand_us_per_transaction.is_some_and(|d| d > 0.0));
    // The result document, server_host with it, holds to the schema.
    // (The stand-in kind's name is none of the schema's kinds: its fixture's is.)
    let mut doc = serde_json::to_value(&result).unwrap();
    doc["test"] = "tcp-stream".into();
    validate(&doc);
    // The table's block says it too.
    let table = netrig_export::table::server_host(h);
    eprintln!("{table}\n{:#?}", result.warnings);
    assert!(
        table.contains("server host (the agent at 127.0.0.1:6387"),
        "{table}"
    );
    assert!(table.contains("ListenOverflows"), "{table}");
}

/// Connection tracking in a namespace of its own: the view reads its count
/// (start, end, peak) against nf_conntrack_max. Filling the table needs a
/// small nf_conntrack_max in that namespace, which kernels that keep it
/// global (read-only outside the initial namespace) do not allow: setting
/// it there would change every test's host, so that part is skipped, saying so.
#[test]
fn conntrack_is_counted_and_a_full_table_named_where_the_kernel_allows() {
    let Some(ns) = Netns::or_skip("hvct") else {
        return;
    };
    let count_file = "/proc/sys/net/netfilter/nf_conntrack_count";
    let loaded = |ns: &Netns| ns.exec(&["test", "-e", count_file]).is_ok();
    if !loaded(&ns) {
        let _ = Command::new("modprobe").arg("nf_conntrack").output();
        if !loaded(&ns) {
            crate::skip::missing("nf_conntrack is not loaded and `modprobe nf_conntrack` did not load it");
            return;
        }
    }
    // Connection tracking works in a namespace only once a rule there uses it.
    let rules = "table inet hv { chain out { type filter hook output priority 0; ct state new counter; }; }";
    if let Err(e) = ns.exec(&["nft", rules]) {
        crate::skip::missing(format!(
            "no nftables rule with conntrack could be added in the namespace ({e})"
        ));
        return;
    }
    let small = 64u64;
    // sysctl(8) exits 0 even when the kernel refuses: read the value back.
    let _ = ns.exec(&[
        "sysctl",
        "-qw",
        &format!("net.netfilter.nf_conntrack_max={small}"),
    ]);
    let max_in_ns = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            "cat",
            "/proc/sys/net/netfilter/nf_conntrack_max",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let per_netns_max = max_in_ns == small.to_string();
    let _agent = AgentIn::start(&ns).expect("the agent starts in the namespace");
    let result = in_netns(&ns, || {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let local = LocalOptions {
            server_agent: Some(Target::agent("127.0.0.1", 6387)),
            ..LocalOptions::default()
        };
        let spec = netrig_run::suite::quick(0.3).remove(0);
        let r = netrig_run::run_kind(
            &Flood,
            &Target::agent("127.0.0.1", port),
            local,
            &spec,
            &Cancel::new(),
            &mut |_| {},
        );
        drop(server);
        r.map_err(|e| e.to_string())
    })
    .expect("the namespace's thread")
    .expect("the flood and the watch");
    let h = result.server_host.as_ref().expect("the server host's view");
    let ct = h
        .conntrack
        .as_ref()
        .unwrap_or_else(|| panic!("conntrack withheld: {:?}", h.conntrack_withheld));
    assert!(ct.max.is_some_and(|m| m > 0), "{ct:?}");
    // The agent's control connection at least, and the flood's connections.
    assert!(ct.peak >= 1 && ct.peak >= ct.start && ct.peak >= ct.end, "{ct:?}");
    if !per_netns_max {
        crate::skip::not_here(format!(
            "the full-table part: this kernel ({}) keeps net.netfilter.nf_conntrack_max global (read-only \
             in a network namespace), and setting it in the initial one would shrink every test's table; the \
             count was read: {ct:?}",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
        ));
        return;
    }
    assert_eq!(ct.max, Some(small), "{ct:?}");
    assert!(
        ct.peak as f64 >= 0.9 * small as f64,
        "{CONNECTS} connects into a table of {small}: {ct:?}"
    );
    assert!(
        result
            .warnings
            .iter()
            .any(|w| w.contains("conntrack table on the server host was") && w.contains("notrack")),
        "{:#?}",
        result.warnings
    );
}

/// `--server-agent` with a kind of two ends is refused, saying it is not
/// needed, before anything connects (exit status 2).
#[test]
fn the_server_agent_is_not_needed_for_a_kind_with_two_ends() {
    let o = run(&["tcp-rr", "-l", "0.2", "--server-agent", "127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("--server-agent is not needed for tcp-rr"), "{e}");
    // A sweep passes it to every run (a plan's target.server_agent), and is told the same.
    let o = run(&[
        "tcp-rr",
        "-l",
        "0.2",
        "-r",
        "1,2",
        "--server-agent",
        "127.0.0.1:1",
    ]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--server-agent is not needed for tcp-rr"),
        "{}",
        stderr(&o)
    );
    // A bad HOST:PORT is told first-hand by a kind that takes it.
    let o = run(&[
        "http",
        "--url",
        "http://127.0.0.1:1/",
        "-l",
        "0.2",
        "--server-agent",
        "127.0.0.1:x",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--server-agent 127.0.0.1:x"),
        "{}",
        stderr(&o)
    );
}

/// The agent's side of the watch, spoken by hand: one watch per session
/// (a second is refused and the first goes on), its view at its end, a
/// test request in the middle of one ends the session, and a client that
/// falls silent during a watch is let go within the silence limit.
#[test]
fn the_agent_holds_one_watch_per_session_and_bounds_it() {
    use crate::helpers::{Raw, Served};
    use netrig_proto::{AgentMsg, ClientMsg};
    let agent = Served::start(&[]);
    let mut r = Raw::open(agent.port);
    r.send(&ClientMsg::WatchStart);
    assert!(matches!(r.next(), AgentMsg::WatchStarted { limit_s } if limit_s == 3600 + 30));
    r.send(&ClientMsg::Heartbeat);
    r.send(&ClientMsg::WatchStart);
    assert!(matches!(r.next(), AgentMsg::WatchRejected { reason } if reason.contains("one at a time")));
    std::thread::sleep(Duration::from_millis(1200));
    r.send(&ClientMsg::WatchEnd);
    match r.next() {
        AgentMsg::HostView { view } => {
            assert!(view.window_s >= 1.1, "{}", view.window_s);
            assert!(view.samples >= 1, "{}", view.samples);
            assert!(
                view.counters.contains_key("TcpExt.ListenOverflows"),
                "{:?}",
                view.counters
            );
            view.check(3630.0).unwrap();
        }
        other => panic!("{other:?}"),
    }
    // Idle again: a second watch may start; a test request during it ends the session.
    r.send(&ClientMsg::WatchStart);
    assert!(matches!(r.next(), AgentMsg::WatchStarted { .. }));
    r.send(&ClientMsg::TestRequest {
        spec: netrig_run::suite::quick(0.3).remove(0),
        auth: None,
    });
    assert!(matches!(r.next(), AgentMsg::Error { message } if message.contains("watching the host")));
    // Silence: the agent lets the watch and the session go after 10 s.
    let mut r = Raw::open(agent.port);
    r.send(&ClientMsg::WatchStart);
    assert!(matches!(r.next(), AgentMsg::WatchStarted { .. }));
    let t = Instant::now();
    match r.try_next(Duration::from_secs(20)) {
        Some(AgentMsg::Error { message }) => assert!(message.contains("sent nothing for 10 s"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() >= Duration::from_secs(9), "{:?}", t.elapsed());
}

/// `--disclose minimal`: a client that did not authenticate is told the
/// host's view is not for it, and the session goes on.
#[test]
fn a_minimal_agent_refuses_the_watch_to_an_anonymous_client() {
    use crate::helpers::{Raw, Served};
    use netrig_proto::{AgentMsg, ClientMsg};
    let agent = Served::start(&["--disclose", "minimal"]);
    let mut r = Raw::open(agent.port);
    r.send(&ClientMsg::WatchStart);
    match r.next() {
        AgentMsg::WatchRejected { reason } => assert!(reason.contains("--disclose minimal"), "{reason}"),
        other => panic!("{other:?}"),
    }
    r.send(&ClientMsg::WatchEnd);
    assert!(matches!(r.next(), AgentMsg::Error { message } if message.contains("watch_end while idle")));
}
