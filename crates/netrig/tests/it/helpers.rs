use serde_json::Value;
use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Debug logs go to stderr, which tests read only when something went wrong.
pub const NETRIG_LOG: &str = "netrig_client=debug,netrig_agent=debug,netrig_engine=debug";

pub fn netrig() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_netrig"));
    c.env("RUST_LOG", NETRIG_LOG);
    c
}

/// Runs netrig with `args`, bounded in time; returns its output. Both pipes
/// are drained while it runs, so a large result cannot block it on a full pipe.
/// `test` ("tcp-stream -l 0.3 -P 2", split at spaces) aimed at the agent
/// on loopback port `port`: the arguments for [`run`] and [`run_json`].
pub fn at(port: &str, test: &str) -> Vec<String> {
    let mut words = test.split_whitespace().map(str::to_string);
    let mut a: Vec<String> = words.next().into_iter().collect();
    a.extend(["-H", "127.0.0.1", "-p", port].map(str::to_string));
    a.extend(words);
    a
}

/// [`at`]'s arguments as `&str`s.
pub fn strs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

pub fn run(args: &[&str]) -> Output {
    run_cmd(netrig(), args)
}

/// [`run`] inside a network namespace.
pub fn run_in(ns: &Netns, args: &[&str]) -> Output {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_netrig")]);
    c.env("RUST_LOG", NETRIG_LOG);
    run_cmd(c, args)
}

/// Runs `cmd` with `args` as [`run`] does: bounded in time, pipes drained.
pub fn run_cmd(cmd: Command, args: &[&str]) -> Output {
    run_cmd_within(cmd, args, 60)
}

/// [`run`] bounded at `seconds` rather than 60 (a whole plan).
pub fn run_within(args: &[&str], seconds: u64) -> Output {
    run_cmd_within(netrig(), args, seconds)
}

fn run_cmd_within(mut cmd: Command, args: &[&str], seconds: u64) -> Output {
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netrig");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "netrig {args:?} ran over {seconds} s; it printed:\n{}\n{}",
                String::from_utf8_lossy(&out.join().unwrap()),
                String::from_utf8_lossy(&err.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a test that must succeed and returns its JSON document.
pub fn run_json(args: &[&str]) -> Value {
    json_of(args, run)
}

/// [`run_json`] inside a network namespace.
pub fn run_json_in(ns: &Netns, args: &[&str]) -> Value {
    json_of(args, |a| run_in(ns, a))
}

fn json_of(args: &[&str], run: impl FnOnce(&[&str]) -> Output) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let o = run(&a);
    assert!(
        o.status.success(),
        "netrig {a:?} failed: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&o)));
    validate(&v);
    v
}

/// Validates a result against the checked-in schema in docs/.
pub fn validate(v: &Value) {
    let schema: Value = serde_json::from_str(include_str!("../../../../docs/result.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "result does not match docs/result.schema.json: {errors:#?}"
    );
}

/// A port nothing listens on right now.
/// A port nothing listens on, below the kernel's ephemeral range: a port
/// the kernel handed out (bind to port 0) could be taken before the agent
/// binds it by one of the many connections other tests open at the same
/// time (the 10,000-connection tests take a third of the range).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768)
        .clamp(2048, 65535);
    let span = low - 1024;
    // Each test process starts at its own place, and walks on from there.
    let _ = NEXT.compare_exchange(
        0,
        std::process::id() % span + 1,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let port = (1024 + NEXT.fetch_add(7, Ordering::Relaxed) % span) as u16;
        // Free for the agent's [::] (both families) and for 127.0.0.1, each
        // tried alone.
        let v6 = TcpListener::bind(("::", port)).is_ok();
        let v4 = v6 && TcpListener::bind(("127.0.0.1", port)).is_ok();
        if v4 {
            return port;
        }
    }
    panic!("no free port below {low}")
}

/// A `netrig serve` on loopback, killed on drop.
pub struct Served {
    pub child: Child,
    pub port: u16,
}

impl Served {
    pub fn start(extra: &[&str]) -> Served {
        Served::launch(netrig, extra)
    }

    /// `netrig serve` started by `sh -c 'SETUP; exec netrig serve ...'`:
    /// the agent under `ulimit -n 64`, say (same process, `exec`ed).
    pub fn start_after(setup: &str, extra: &[&str]) -> Served {
        let sh = || {
            let mut sh = Command::new("sh");
            sh.args([
                "-c",
                &format!("{setup}; exec \"$0\" \"$@\""),
                env!("CARGO_BIN_EXE_netrig"),
            ])
            .env("RUST_LOG", NETRIG_LOG);
            sh
        };
        Served::launch(sh, extra)
    }

    /// `netrig serve` under `strace -f -e trace=TRACE -o LOG`; [`Served::traced`]
    /// stops it and gives the log.
    pub fn start_straced(trace: &str, log: &std::path::Path) -> Served {
        let strace = || {
            let mut c = Command::new("strace");
            c.args(strace_filter());
            c.args(["-f", "-e", &format!("trace={trace}"), "-o"])
                .arg(log)
                .arg(env!("CARGO_BIN_EXE_netrig"))
                .env("RUST_LOG", NETRIG_LOG);
            c
        };
        Served::launch(strace, &[])
    }

    /// Ends an agent started by [`Served::start_straced`] (the agent first,
    /// then strace, which writes out the rest of its log) and gives the log.
    pub fn traced(mut self, log: &std::path::Path) -> String {
        let pid = self.child.id();
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for c in children.split_whitespace() {
            let _ = Command::new("kill").arg(c).status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let _ = std::fs::remove_file(log);
        text
    }

    pub fn launch(make: impl Fn() -> Command, extra: &[&str]) -> Served {
        // The free port may be taken by another test before the agent binds
        // it: an agent that exits at once is started again on another.
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port();
            let p = port.to_string();
            let mut args = vec!["serve", "-p", &p, "-q"];
            args.extend_from_slice(extra);
            let mut child = make()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Served { child, port };
                }
                if let Ok(Some(status)) = child.try_wait() {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut e, &mut err);
                    }
                    last = format!("the agent on port {port} exited ({status}): {err}");
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "agent did not start on port {port} in 20 s"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("{last}")
    }

    pub fn port_arg(&self) -> String {
        self.port.to_string()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn f(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} missing or not a number in {v}"))
}

pub fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing or not an integer in {v}"))
}

/// Each flow's `key` (a count such as `bytes`) in a result, asserting that
/// there are `n` flows and that each has more than `1/share` of their sum:
/// flows that took turns, none starved.
pub fn flows_each_have_a_part(v: &Value, key: &str, n: usize, share: u64) -> Vec<u64> {
    let each: Vec<u64> = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[key].as_u64().unwrap_or_else(|| panic!("{key} in {f}")))
        .collect();
    let total: u64 = each.iter().sum();
    assert!(
        each.len() == n && each.iter().all(|b| *b * share > total),
        "{key} per flow {each:?}: one under 1/{share} of {total}"
    );
    each
}

/// The warnings that mention `topic`.
pub fn warnings_about(v: &Value, topic: &str) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains(topic))
        .map(str::to_string)
        .collect()
}

/// A network namespace with its loopback up, deleted on drop. Tests that
/// need one skip, saying why, where it cannot be made (not root, no iproute2).
pub struct Netns(pub String);

impl Netns {
    pub fn create(tag: &str) -> Result<Netns, String> {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("netrig-{tag}-{}-{n}", std::process::id());
        sh(&["ip", "netns", "add", &name])?;
        let ns = Netns(name);
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A namespace of the test's own, or `None` when none can be made here
    /// (not root, no iproute2), said on stderr: the caller skips.
    pub fn or_skip(tag: &str) -> Option<Netns> {
        Netns::create(tag)
            .map_err(|e| {
                crate::skip::missing(format!(
                    "needs root and iproute2 for a network namespace of its own ({e})"
                ))
            })
            .ok()
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, args: &[&str]) -> Result<(), String> {
        let mut a = vec!["ip", "netns", "exec", &self.0];
        a.extend_from_slice(args);
        sh(&a)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

pub fn sh(args: &[&str]) -> Result<(), String> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("{args:?}: {}", String::from_utf8_lossy(&o.stderr).trim()))
    }
}

/// A control session spoken by hand, to say what netrig's own client
/// would refuse to send: preamble, welcome, hello and its answer done.
pub struct Raw {
    pub s: std::net::TcpStream,
    d: netrig_proto::FrameDecoder,
}

impl Raw {
    pub fn open(port: u16) -> Raw {
        Raw::open_from("127.0.0.1", port)
    }

    /// From a local address of loopback's (`127.0.0.2` is another client).
    pub fn open_from(local: &str, port: u16) -> Raw {
        let mut r = Raw::greet(local, port);
        assert!(matches!(r.next(), netrig_proto::AgentMsg::Welcome { .. }));
        r.hello();
        r
    }

    /// Connected and the preamble sent; nothing read yet.
    pub fn greet(local: &str, port: u16) -> Raw {
        use std::io::Write;
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let local: std::net::SocketAddr = format!("{local}:0").parse().unwrap();
        sock.bind(&local.into()).unwrap();
        let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        sock.connect(&to.into()).unwrap();
        let mut s: std::net::TcpStream = sock.into();
        let v = netrig_proto::PROTOCOL_VERSION;
        s.write_all(
            &netrig_proto::ControlPreamble {
                min_version: v,
                max_version: v,
            }
            .encode(),
        )
        .unwrap();
        Raw {
            s,
            d: netrig_proto::FrameDecoder::with_limit(64 << 20),
        }
    }

    pub fn hello(&mut self) {
        self.send(&netrig_proto::ClientMsg::Hello {
            software: "test".into(),
            auth: netrig_proto::auth::HelloAuth {
                nonce: netrig_proto::auth::Nonce::random(),
                client_key: None,
                signature: None,
            },
        });
        assert!(matches!(
            self.next(),
            netrig_proto::AgentMsg::HelloAccepted { .. }
        ));
    }

    pub fn send(&mut self, m: &netrig_proto::ClientMsg) {
        use std::io::Write;
        self.s.write_all(&netrig_proto::encode_frame(m)).unwrap();
    }

    /// The next message; panics if none comes within 10 s.
    pub fn next(&mut self) -> netrig_proto::AgentMsg {
        self.try_next(Duration::from_secs(10)).expect("agent answered")
    }

    /// The next message, or `None` once the agent closed the connection;
    /// panics if nothing happens within `wait`.
    pub fn try_next(&mut self, wait: Duration) -> Option<netrig_proto::AgentMsg> {
        match self.wait(wait) {
            Waited::Msg(m) => Some(m),
            Waited::Closed => None,
            Waited::Nothing => panic!("the agent neither answered nor closed within {wait:?}"),
        }
    }

    /// What the agent did within `wait`: a message, closing, or nothing.
    pub fn wait(&mut self, wait: Duration) -> Waited {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 65536];
        loop {
            if let Some(m) = self.d.next_msg().unwrap() {
                return Waited::Msg(m);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Waited::Nothing;
            }
            self.s.set_read_timeout(Some(left)).unwrap();
            match self.s.read(&mut buf) {
                Ok(0) => return Waited::Closed,
                Ok(n) => self.d.push(&buf[..n]).unwrap(),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Waited::Closed,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Waited::Nothing
                }
                Err(e) => panic!("reading from the agent: {e}"),
            }
        }
    }
}

/// See [`Raw::wait`].
#[derive(Debug)]
// A test's own messages, one at a time: a boxed message would save nothing that matters.
#[allow(clippy::large_enum_variant)]
pub enum Waited {
    Msg(netrig_proto::AgentMsg),
    Closed,
    Nothing,
}

/// A directory of a test's own under the temporary directory, removed on drop.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("netrig-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Taken by the tests that hold thousands of sockets in this process (10,000 idle connections
/// to the agent, and to the HTTP server), so that two of them together never pass
/// RLIMIT_NOFILE's hard limit (20,000 on the CI machines).
pub static MANY_SOCKETS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether strace is installed and may trace here (tests that look at
/// system calls skip, saying so, when it is not).
pub fn strace_works() -> bool {
    Command::new("strace")
        .args(["-f", "-o", "/dev/null", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What a run under strace of its receives did: its result, how many
/// receives found nothing (EAGAIN) and how many were recvmsg(2).
pub struct Receives {
    pub v: Value,
    pub empty: u64,
    /// Of those, peeks (MSG_PEEK): the agent's look at a greeting that had
    /// not come yet, which depends on how the two ends were scheduled.
    pub empty_peeks: u64,
    pub recvmsg: u64,
}

/// A `--json` run of `netrig ARGS` under strace of its receives (recvfrom,
/// recvmsg, read); `None`, saying the test is skipped, where strace cannot
/// trace here.
pub fn straced_receives(args: &[&str]) -> Option<Receives> {
    if !strace_works() {
        crate::skip::missing("strace is missing or cannot trace here (apt-get install strace)");
        return None;
    }
    let (o, text) = straced("recvfrom,recvmsg,read", args);
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count() as u64;
    Some(Receives {
        v: serde_json::from_slice(&o.stdout).unwrap(),
        empty: count("EAGAIN"),
        empty_peeks: text
            .lines()
            .filter(|l| l.contains("EAGAIN") && l.contains("MSG_PEEK"))
            .count() as u64,
        recvmsg: count("recvmsg("),
    })
}

/// A served agent for clients run under strace, or `None`, saying the test
/// is skipped, where strace cannot trace here.
pub fn agent_for_strace() -> Option<Served> {
    if !strace_works() {
        crate::skip::missing("strace is missing or cannot trace here (apt-get install strace)");
        return None;
    }
    Some(Served::start(&[]))
}

/// `netrig ARGS` under `strace -f -e trace=TRACE` (stopped only at those
/// calls where it can: [`strace_filter`]): its output (asserted successful)
/// and strace's log.
pub fn straced(trace: &str, args: &[&str]) -> (Output, String) {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = std::env::temp_dir().join(format!("netrig-strace-{}-{n}.txt", std::process::id()));
    let log_s = log.to_str().unwrap().to_string();
    let mut cmd = Command::new("strace");
    cmd.args(strace_filter());
    cmd.args(["-f", "-e", &format!("trace={trace}"), "-o", &log_s]);
    cmd.arg(env!("CARGO_BIN_EXE_netrig"));
    let o = run_cmd(cmd, args);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert!(o.status.success(), "strace netrig {args:?}: {}", stderr(&o));
    (o, text)
}

/// strace's option to stop only at the traced calls (`--seccomp-bpf`,
/// strace 5.3 and later, a filter in the kernel) where this strace has it,
/// else none. Every strace test runs with it: the calls a test does not
/// count then run at full speed. Under plain strace every call stops, which
/// slows a run several times over and moves the witness's window against
/// the summary's on a busy machine: clean-clone CI runs failed on it in
/// tcp-crr (421 transactions against 403) and in a 200-flow tcp-rr (8,925
/// bytes for 5,252 two-byte transactions), and a UDP test's receiver seldom
/// reached the rate the test needs.
pub fn strace_filter() -> &'static [&'static str] {
    static FILTERS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let filters = *FILTERS.get_or_init(|| {
        Command::new("strace")
            .args(["--seccomp-bpf", "-f", "-o", "/dev/null", "true"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if filters {
        &["--seccomp-bpf"]
    } else {
        &[]
    }
}

/// An iperf3 client (`bin`) at 1 Mbit/s against 127.0.0.1:`port` for `secs`,
/// returned once it runs (its first interval printed: `--forceflush`, since
/// into a pipe iperf3 keeps its lines until it ends), so that the server is
/// busy with its one test.
pub fn running_iperf3_client(bin: &std::path::Path, port: &str, secs: &str) -> Child {
    let mut c = Command::new(bin)
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            port,
            "-t",
            secs,
            "-b",
            "1M",
            "-i",
            "1",
            "--forceflush",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn an iperf3 client");
    let mut out = c.stdout.take().expect("its stdout");
    let (mut seen, mut buf) = (Vec::new(), [0u8; 256]);
    while !String::from_utf8_lossy(&seen).contains(" sec ") {
        let n = out.read(&mut buf).unwrap_or(0);
        assert!(n > 0, "iperf3's client ended: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    c
}
