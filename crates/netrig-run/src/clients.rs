//! One test from several client processes (`--clients N`): the IA64 study's
//! "one client, then two" against the same server. Each client is a netrig
//! process of its own (its own descriptors, ephemeral ports and scheduler),
//! from its own source address (127.0.0.1, .2, ... on loopback, or the
//! addresses given), running its share of the load ([`OneEnded::share`]);
//! all start at the same instant and their results are summed
//! ([`OneEnded::sum`]): counts added, latency histograms merged.
//!
//! The parent hands each child a [`Job`] as JSON on its standard input
//! (`netrig client-share`) and reads its result as JSON from its standard
//! output; both are bounded. Only kinds with one end split this way (a kind
//! with an agent has one control connection per test).

use netrig_engine::RunControl;
use netrig_kinds::{LocalEnd, OneEnded};
use netrig_proto::spec::Limit;
use netrig_proto::TestSpec;
use netrig_report::TestResult;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Most client processes one run may start.
pub const MAX_CLIENTS: u32 = 64;
/// Most bytes of a client's result read back (a result with every interval
/// of an hour's run at 10 per second fits).
pub const MAX_RESULT_BYTES: u64 = 256 << 20;
/// How long the clients have to start before they begin together.
pub const START_LEAD: Duration = Duration::from_millis(500);
/// How long past its test's own length a client may take to report.
pub const REPORT_GRACE: Duration = Duration::from_secs(60);

/// Several client processes for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Clients {
    /// How many (2 or more; 1 runs here, in this process).
    pub n: u32,
    /// Their source addresses, one each; empty: 127.0.0.1, 127.0.0.2, ...
    /// (a loopback IPv4 server only).
    pub addrs: Vec<IpAddr>,
    /// The netrig binary that runs each share (`netrig client-share`).
    pub exe: PathBuf,
}

/// What one client process runs: its share of the test, against the
/// server, from its address, starting at the instant all start.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub spec: TestSpec,
    pub server: SocketAddr,
    pub bind: Option<IpAddr>,
    /// When to begin, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// Which client this is (0-based), of how many.
    pub client: u32,
    pub clients: u32,
}

impl Clients {
    /// `n` clients run by this very binary (`--clients`, a plan's
    /// `target.clients`); `None` for one client (it runs in this process).
    pub fn of_this_binary(n: u32, addrs: Vec<IpAddr>) -> Result<Option<Clients>, String> {
        if n <= 1 {
            return match addrs.len() {
                0 => Ok(None),
                _ => Err("--client-addrs is for --clients 2 or more".into()),
            };
        }
        let exe =
            std::env::current_exe().map_err(|e| format!("--clients: where is this netrig binary? {e}"))?;
        Ok(Some(Clients { n, addrs, exe }))
    }
}

/// Each client's source address.
pub fn addresses(c: &Clients, server: SocketAddr) -> Result<Vec<IpAddr>, String> {
    if c.n < 2 || c.n > MAX_CLIENTS {
        return Err(format!("--clients {}: from 2 to {MAX_CLIENTS}", c.n));
    }
    if !c.addrs.is_empty() {
        if c.addrs.len() != c.n as usize {
            return Err(format!(
                "--clients {} with {} --client-addrs: give one address per client",
                c.n,
                c.addrs.len()
            ));
        }
        return Ok(c.addrs.clone());
    }
    match server.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => Ok((1..=c.n)
            .map(|k| IpAddr::V4(Ipv4Addr::new(127, 0, 0, k as u8)))
            .collect()),
        _ => Err(format!(
            "--clients {}: give each client's source address (--client-addrs A,B,...); only a server on 127.0.0.0/8 gets 127.0.0.1, .2, ... by default",
            c.n
        )),
    }
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

/// How long a client's test may last before it must have reported.
fn allowance(spec: &TestSpec) -> Duration {
    let run = match spec.limit {
        Limit::Duration { seconds } => Duration::from_secs_f64(seconds.clamp(0.0, 1e6)),
        // A byte count has no length of its own: an hour at most.
        Limit::Bytes { .. } => Duration::from_secs(3600),
    };
    START_LEAD + run + Duration::from_secs_f64(spec.omit_s.clamp(0.0, 1e6)) + REPORT_GRACE
}

struct Running {
    child: Child,
    out: std::thread::JoinHandle<std::io::Result<Vec<u8>>>,
    err: std::thread::JoinHandle<String>,
}

/// Runs `spec` from `clients.n` processes against `server` and sums them.
pub(crate) fn run(
    one: &dyn OneEnded,
    spec: &TestSpec,
    server: SocketAddr,
    clients: &Clients,
    ctl: &Arc<RunControl>,
) -> Result<TestResult, String> {
    let addrs = addresses(clients, server)?;
    let n = clients.n;
    let shares: Vec<TestSpec> = (0..n).map(|k| one.share(spec, k, n)).collect::<Result<_, _>>()?;
    // Every child first, then the common start: a slow exec of one must not
    // hand a later one a start already past.
    let mut running: Vec<Running> = Vec::new();
    let mut stdins = Vec::with_capacity(n as usize);
    for k in 0..n {
        match start_client(&clients.exe, k) {
            Ok((r, stdin)) => {
                running.push(r);
                stdins.push(stdin);
            }
            Err(e) => {
                kill_all(&mut running);
                return Err(e);
            }
        }
    }
    if let Err(e) = send_jobs(shares, &addrs, stdins, server) {
        kill_all(&mut running);
        return Err(e);
    }
    let failed = wait_for(&mut running, &addrs, allowance(spec), ctl);
    if failed.is_some() {
        kill_all(&mut running);
    }
    let mut parts = Vec::new();
    let mut errors = Vec::new();
    for (k, r) in running.into_iter().enumerate() {
        let out = r.out.join().unwrap_or_else(|_| Ok(Vec::new()));
        let err = r.err.join().unwrap_or_default();
        match judge(k, addrs[k], out, &err, failed.is_some()) {
            Some(Ok(r)) => parts.push(r),
            Some(Err(e)) => errors.push(e),
            None => {}
        }
    }
    if let Some(f) = failed {
        errors.insert(0, f);
    }
    if !errors.is_empty() {
        return Err(format!("--clients {n}: {}", errors.join("; ")));
    }
    one.sum(spec, addrs.into_iter().zip(parts).collect())
}

/// Stops every client started.
fn kill_all(running: &mut [Running]) {
    for r in running.iter_mut() {
        let _ = r.child.kill();
        let _ = r.child.wait();
    }
}

/// Starts client `k` (`exe client-share`), with the threads that read what
/// it says: it and its standard input, where its job goes.
fn start_client(exe: &std::path::Path, k: u32) -> Result<(Running, Option<ChildStdin>), String> {
    let mut cmd = Command::new(exe);
    cmd.arg("client-share")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_parent(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("--clients: starting client {k} ({}): {e}", exe.display()))?;
    let stdin = child.stdin.take();
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    // Both readers keep what they may and drain the rest, so a child
    // that writes more never dies of a closed pipe.
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        (&mut stdout).take(MAX_RESULT_BYTES + 1).read_to_end(&mut buf)?;
        std::io::copy(&mut stdout, &mut std::io::sink())?;
        Ok(buf)
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(64 << 10).read_to_end(&mut buf);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&buf).into_owned()
    });
    Ok((Running { child, out, err }, stdin))
}

/// Gives each client its job: its share, from its address, all starting
/// [`START_LEAD`] from now.
fn send_jobs(
    shares: Vec<TestSpec>,
    addrs: &[IpAddr],
    stdins: Vec<Option<ChildStdin>>,
    server: SocketAddr,
) -> Result<(), String> {
    let clients = shares.len() as u32;
    let start = SystemTime::now() + START_LEAD;
    for (k, ((share, bind), stdin)) in shares.into_iter().zip(addrs).zip(stdins).enumerate() {
        let job = Job {
            spec: share,
            server,
            bind: Some(*bind),
            start_unix_ns: unix_ns(start),
            client: k as u32,
            clients,
        };
        let job = serde_json::to_vec(&job).map_err(|e| format!("--clients: client {k}'s job: {e}"))?;
        // Dropping stdin after the write is the job's end of file.
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&job);
        }
    }
    Ok(())
}

/// Waits for every client, for `allowance` at most; an abort (Ctrl-C) or
/// one client failing stops the wait: why, when one of them did.
fn wait_for(
    running: &mut [Running],
    addrs: &[IpAddr],
    allowance: Duration,
    ctl: &RunControl,
) -> Option<String> {
    let deadline = Instant::now() + allowance;
    let mut failed: Option<String> = None;
    loop {
        if let Some(reason) = ctl.abort_reason() {
            return Some(reason);
        }
        let mut all = true;
        for (k, r) in running.iter_mut().enumerate() {
            match r.child.try_wait() {
                Ok(Some(s)) if s.success() => {}
                Ok(Some(s)) => {
                    failed.get_or_insert(format!("client {k} ({}) ended with {s}", addrs[k]));
                }
                Ok(None) => all = false,
                Err(e) => {
                    failed.get_or_insert(format!("client {k}: {e}"));
                }
            }
        }
        if all || failed.is_some() {
            return failed;
        }
        if Instant::now() >= deadline {
            return Some(format!(
                "the clients had not reported {} s after their test should have ended",
                REPORT_GRACE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What client `k` (from `addr`) came to, from what it wrote (`out`, its
/// result, read only when no client failed: `failed`) and the last line it
/// said of itself (of `err`): its result, what went wrong, or nothing to
/// say.
fn judge(
    k: usize,
    addr: IpAddr,
    out: std::io::Result<Vec<u8>>,
    err: &str,
    failed: bool,
) -> Option<Result<TestResult, String>> {
    // The last line it said of itself.
    let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    match out {
        Ok(b) if b.len() as u64 > MAX_RESULT_BYTES => Some(Err(format!(
            "client {k}: its result is over {} MiB (the parent's bound)",
            MAX_RESULT_BYTES >> 20
        ))),
        Ok(b) if !failed => Some(
            serde_json::from_slice::<TestResult>(&b)
                .map_err(|e| format!("client {k}: not a result ({e}): {last}")),
        ),
        Ok(_) => (!last.is_empty()).then(|| Err(format!("client {k} ({addr}): {last}"))),
        Err(e) => Some(Err(format!("client {k}: reading its result: {e}"))),
    }
}

/// A child killed when its parent dies (PR_SET_PDEATHSIG), so that a
/// parent killed mid-run (`kill -9`, the OOM killer) leaves no load behind.
/// The signal follows the thread that spawned the child, which is the one
/// that waits for it here. A parent already gone before the prctl is seen
/// through getppid, and the child exits at once.
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid, prctl, getppid and _exit are async-signal-safe, as a
    // pre_exec hook requires, and allocate nothing.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// A client process's side: waits for the common start, runs its share and
/// returns its result (`netrig client-share` prints it).
pub fn run_job(
    one: &dyn OneEnded,
    job: &Job,
    local: LocalEnd,
    ctl: Arc<RunControl>,
) -> Result<TestResult, String> {
    if job.clients > MAX_CLIENTS || job.client >= job.clients {
        return Err(format!("client {} of {}: out of range", job.client, job.clients));
    }
    let start = UNIX_EPOCH + Duration::from_nanos(job.start_unix_ns);
    // The parent gave the start at most START_LEAD ahead: never wait longer.
    if let Ok(wait) = start.duration_since(SystemTime::now()) {
        std::thread::sleep(wait.min(START_LEAD * 2));
    }
    let local = LocalEnd {
        bind: job.bind,
        ..local
    };
    one.run(&job.spec, job.server, &local, ctl, &mut |_| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clients(n: u32, addrs: &[&str]) -> Clients {
        Clients {
            n,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            exe: PathBuf::from("netrig"),
        }
    }

    /// A client's output is read as a result only when no client failed;
    /// otherwise its last words, if it said any, are what went wrong.
    #[test]
    fn a_result_is_read_only_when_no_client_failed() {
        let addr: IpAddr = "127.0.0.2".parse().unwrap();
        let not = judge(1, addr, Ok(b"{".to_vec()), "warming up\nbad thing\n\n", false);
        assert!(
            matches!(&not, Some(Err(e)) if e.starts_with("client 1: not a result (") && e.ends_with("): bad thing")),
            "{not:?}"
        );
        let failed = judge(1, addr, Ok(Vec::new()), "refused\n", true);
        assert_eq!(failed, Some(Err("client 1 (127.0.0.2): refused".into())));
        assert_eq!(judge(1, addr, Ok(Vec::new()), " \n", true), None);
        let unread = judge(0, addr, Err(std::io::Error::other("gone")), "", false);
        assert_eq!(unread, Some(Err("client 0: reading its result: gone".into())));
    }

    #[test]
    fn loopback_clients_get_their_own_addresses() {
        let server: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let a = addresses(&clients(3, &[]), server).unwrap();
        assert_eq!(
            a,
            ["127.0.0.1", "127.0.0.2", "127.0.0.3"].map(|s| s.parse::<IpAddr>().unwrap())
        );
        let a = addresses(&clients(2, &["10.0.0.1", "10.0.0.2"]), server).unwrap();
        assert_eq!(a[1], "10.0.0.2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn bad_counts_and_missing_addresses_are_named() {
        let server: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(addresses(&clients(1, &[]), server)
            .unwrap_err()
            .contains("from 2 to 64"));
        assert!(addresses(&clients(65, &[]), server).is_err());
        let e = addresses(&clients(2, &["10.0.0.1"]), server).unwrap_err();
        assert!(e.contains("one address per client"), "{e}");
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        assert!(addresses(&clients(2, &[]), v6)
            .unwrap_err()
            .contains("--client-addrs"));
    }
}
