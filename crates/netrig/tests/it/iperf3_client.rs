//! netrig's client against real iperf3 servers (issue #41, item 2): `--peer
//! iperf3` and `--peer auto` (the default) drive `iperf3 -s` with iperf3's
//! protocol, and the counts agree with the server's own JSON output.
//!
//! The servers: iperf3 3.21 (the repository's ../shared/peers/iperf3, or
//! /work/shared/peers/iperf3) and whatever `iperf3` is on PATH (Debian's
//! 3.12 in CI). A test without any fails under CI and is skipped elsewhere.

use crate::helpers::*;
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The iperf3 binaries to test against: 3.21's and the one on PATH, each once.
fn servers() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found: Vec<PathBuf> = [
        root.join("../shared/peers/iperf3"),
        PathBuf::from("/work/shared/peers/iperf3"),
    ]
    .into_iter()
    .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("iperf3"))
            .collect::<Vec<_>>()
    }))
    .filter(|p| p.is_file())
    .filter_map(|p| p.canonicalize().ok())
    .collect();
    let mut seen = std::collections::BTreeSet::new();
    found.retain(|p| seen.insert(p.clone()));
    if found.is_empty() {
        crate::skip::missing(
            "no iperf3 (apt-get install iperf3, or the repository's ../shared/peers/iperf3)",
        );
    }
    found
}

/// An iperf3 server, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether something listens on TCP `port` (this network namespace's
/// /proc/net/tcp and tcp6: no connection, which a one-off server would take
/// for its test).
fn listens(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| format!("{a} ").ends_with(&hex))
                && l.contains(" 0A ")
        })
    })
}

impl Server {
    /// `bin -s -p PORT` with `args` (`-1 -J` for a one-off test whose JSON is read).
    fn start(bin: &PathBuf, args: &[&str]) -> Server {
        let port = free_port();
        let child = Command::new(bin)
            .args(["-s", "-p", &port.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn iperf3 -s");
        let s = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !listens(port) {
            assert!(
                Instant::now() < deadline,
                "{} -s did not listen on {port} within 10 s",
                bin.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// A one-off server's JSON output, once it has ended (within 20 s).
    fn json(mut self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().expect("wait").is_none() {
            assert!(
                Instant::now() < deadline,
                "iperf3 -s -1 did not end within 20 s of the test"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("iperf3's output is not JSON ({e}): {out}"))
    }

    fn port(&self) -> String {
        self.port.to_string()
    }
}

/// `a` and `b` within 1 % of the larger, or why not.
fn agree(what: &str, a: u64, b: u64) -> Result<(), String> {
    let (lo, hi) = (a.min(b) as f64, a.max(b) as f64);
    if hi > 0.0 && lo >= hi * 0.99 {
        Ok(())
    } else {
        Err(format!("{what}: {a} and {b} differ by more than 1 %"))
    }
}

/// The bytes iperf3's server says it received from its client and sent to
/// it (`--bidir`'s reverse streams included), and its datagrams (UDP: what
/// it received, lost ones included, or sent).
fn server_counts(j: &Value) -> (u64, u64, u64) {
    let b = |k: &str| j["end"][k]["bytes"].as_u64().unwrap_or(0);
    (
        b("sum_received"),
        b("sum_sent") + b("sum_sent_bidir_reverse"),
        j["end"]["sum"]["packets"].as_u64().unwrap_or(0),
    )
}

/// Each direction of `v` against the server's JSON `j`: the server's report
/// in netrig's result is the server's own count, and what netrig measured
/// at its end agrees with it within 1 % (UDP: in datagrams, lost ones
/// included, since a datagram lost on the way is in one count only).
fn directions_agree(what: &str, v: &Value, j: &Value) -> Result<(), String> {
    let (got, sent, packets) = server_counts(j);
    let udp = !v["summary"]["udp"].is_null();
    let datagrams = |key: &str| -> u64 {
        v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| u(f, &format!("/udp/{key}")))
            .sum()
    };
    for d in v["summary"]["directions"].as_array().unwrap() {
        let (receiver, sender) = (u(d, "/bytes"), u(d, "/sender_bytes"));
        match (d["direction"].as_str().unwrap(), udp) {
            // The client sends: the receiver's count is the server's report, the sender's netrig's.
            ("tx", false) => {
                agree(
                    &format!("{what}: tx, the server's report and its JSON"),
                    receiver,
                    got,
                )?;
                agree(
                    &format!("{what}: tx, netrig's sender and the server's JSON"),
                    sender,
                    got,
                )?;
            }
            ("tx", true) => {
                agree(
                    &format!("{what}: tx, the server's report and its JSON"),
                    receiver,
                    got,
                )?;
                let ours = datagrams("sent_datagrams");
                agree(
                    &format!("{what}: tx, netrig's datagrams sent and the server's"),
                    ours,
                    packets,
                )?;
            }
            (_, false) => {
                agree(
                    &format!("{what}: rx, the server's report and its JSON"),
                    sender,
                    sent,
                )?;
                agree(
                    &format!("{what}: rx, netrig's receiver and the server's JSON"),
                    receiver,
                    sent,
                )?;
            }
            (_, true) => {
                agree(
                    &format!("{what}: rx, the server's report and its JSON"),
                    sender,
                    sent,
                )?;
                let ours = datagrams("received_datagrams") + datagrams("lost_datagrams");
                agree(
                    &format!("{what}: rx, netrig's datagrams and the server's sent"),
                    ours,
                    packets,
                )?;
            }
        }
    }
    eprintln!(
        "{what}: iperf3 received {got}, sent {sent} ({packets} datagrams); netrig (sender, receiver) {:?}",
        v["summary"]["directions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (u(d, "/sender_bytes"), u(d, "/bytes")))
            .collect::<Vec<_>>()
    );
    Ok(())
}

/// Runs `args` against a one-off `bin` server and checks each direction
/// ([`directions_agree`]). The machine is shared: an end descheduled as the
/// window closes counts what the other does not, so a run that disagrees
/// is run once more, and two in a row fail.
fn agrees(bin: &PathBuf, args: &str, peer: &[&str]) -> Value {
    let what = format!("{} against {}", args, bin.display());
    let mut failed = Vec::new();
    for _ in 0..2 {
        let server = Server::start(bin, &["-1", "-J"]);
        let mut a = at(&server.port(), args);
        a.extend(peer.iter().map(|s| s.to_string()));
        let v = run_json(&strs(&a));
        let j = server.json();
        assert!(j["error"].is_null(), "iperf3 -s: {}", j["error"]);
        assert_eq!(v["peer"]["software"], "iperf3");
        assert_eq!(v["peer"]["remote_figures"], "reported by the server");
        assert!(
            v["summary"]["cpu"]["remote_pct"].is_null(),
            "{}",
            v["summary"]["cpu"]
        );
        match directions_agree(&what, &v, &j) {
            Ok(()) => return v,
            Err(e) => {
                eprintln!("{e}: run once more");
                failed.push(e);
            }
        }
    }
    panic!("{}", failed.join("; "))
}

/// TCP one way, the other (the buffers bounded: what is in flight at the
/// window's close is the server's and not netrig's), both, and four streams.
#[test]
fn tcp_streams_against_iperf3_agree_with_its_own_output() {
    for bin in servers() {
        for args in [
            "tcp-stream -l 4 -P 4 -s 256K -S 256K",
            "tcp-maerts -l 4 -s 256K -S 256K",
            "tcp-bidir -l 4 -s 256K -S 256K",
        ] {
            let v = agrees(&bin, args, &["--peer", "iperf3"]);
            assert_eq!(v["peer"]["chosen"], "asked");
            let streams = v["peer"]["reported"]["streams"].as_array().unwrap();
            assert_eq!(streams.len(), v["flows"].as_array().unwrap().len(), "{args}");
        }
    }
}

/// UDP with a rate, either way: the server's datagrams counted as its report.
#[test]
fn udp_streams_against_iperf3_agree_with_its_own_output() {
    for bin in servers() {
        for args in ["udp-stream -l 3 -b 20M", "udp-stream -l 3 -b 20M -R"] {
            let v = agrees(&bin, args, &["--peer", "iperf3"]);
            assert!(u(&v, "/summary/udp/received_datagrams") > 0, "{args}");
        }
    }
}

/// Without --peer, an idle iperf3 server is found out from its answer and
/// measured, the result and stderr saying so.
#[test]
fn an_iperf3_server_is_detected_without_peer() {
    for bin in servers() {
        let server = Server::start(&bin, &["-1", "-J"]);
        let a = at(&server.port(), "tcp-stream -l 1");
        let started = Instant::now();
        let o = run(&[strs(&a), vec!["--json"]].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "took {:?}",
            started.elapsed()
        );
        assert!(
            stderr(&o).contains("answered as an iperf3 server"),
            "{}",
            stderr(&o)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        validate(&v);
        assert_eq!(v["peer"]["chosen"], "detected");
        let (got, _, _) = server_counts(&server.json());
        let reported = u(&v, "/summary/bytes");
        agree("detected: the server's report and its JSON", reported, got).unwrap();
    }
}

/// A sweep runs each point against the same iperf3 server, one after another.
#[test]
fn a_sweep_runs_against_an_iperf3_server() {
    let Some(bin) = servers().into_iter().next() else {
        return;
    };
    let server = Server::start(&bin, &[]);
    let a = at(&server.port(), "tcp-stream -l 1 -P 1,2 --peer iperf3");
    let o = run(&[strs(&a), vec!["--json"]].concat());
    assert!(o.status.success(), "{}\n{}", stderr(&o), stdout(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let points = doc["tests"][0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, flows) in points.iter().zip([1, 2]) {
        let run = &p["arms"][0]["runs"][0];
        assert_eq!(run["peer"]["software"], "iperf3");
        assert_eq!(run["flows"].as_array().unwrap().len(), flows);
        assert!(u(run, "/summary/bytes") > 0);
    }
}

/// A plan's `[target] peer = "iperf3"` reaches its runs.
#[test]
fn a_plans_target_names_its_peer() {
    let Some(bin) = servers().into_iter().next() else {
        return;
    };
    let server = Server::start(&bin, &[]);
    let dir = std::env::temp_dir().join(format!("netrig-iperf3-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = 'against iperf3'\n[target]\nhost = '127.0.0.1'\nport = {}\npeer = 'iperf3'\n\
             [[test]]\nkind = 'tcp-maerts'\nargs = ['-l', '1']\n",
            server.port
        ),
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}\n{}", stderr(&o), stdout(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = &doc["tests"][0]["points"][0]["arms"][0]["runs"][0];
    assert_eq!(run["peer"]["chosen"], "asked");
    assert!(u(run, "/summary/bytes") > 0);
}

/// A server busy with another client's test says so, by name.
#[test]
fn a_busy_iperf3_server_is_a_clear_error() {
    let Some(bin) = servers().into_iter().next() else {
        return;
    };
    let server = Server::start(&bin, &[]);
    let mut other = running_iperf3_client(&bin, &server.port(), "20");
    for peer in [&[][..], &["--peer", "iperf3"][..]] {
        let a = at(&server.port(), "tcp-stream -l 1");
        let o = run(&[strs(&a), peer.to_vec()].concat());
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains(&format!(
                "the iperf3 server at 127.0.0.1:{} is busy: it answered ACCESS_DENIED",
                server.port
            )),
            "{e}"
        );
    }
    let _ = other.kill();
    let _ = other.wait();
}

/// What an iperf3 server cannot run, or be asked, is refused before anything
/// is sent, naming the option (no server needed).
#[test]
fn what_an_iperf3_server_cannot_do_is_refused_by_name() {
    let o = run(&["tcp-rr", "-H", "127.0.0.1", "-p", "9", "--peer", "iperf3"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--peer iperf3: tcp-rr cannot run against an iperf3 server"),
        "{e}"
    );
    let port = free_port().to_string();
    for (args, says) in [
        (
            vec!["tcp-stream", "--remote-setup", "x"],
            "--remote-setup/--remote-teardown with --peer iperf3",
        ),
        (
            vec!["tcp-stream", "-l", "2.5", "--omit", "0.5"],
            "--omit 0.5 with --peer iperf3",
        ),
        (vec!["tcp-maerts", "-n", "1M"], "-n/--bytes with --peer iperf3"),
    ] {
        let mut a = args.clone();
        a.extend(["-H", "127.0.0.1", "-p", &port, "--peer", "iperf3"]);
        let o = run(&a);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
    }
}

/// What a fake iperf3 server does once the client's streams are up.
#[derive(Clone, Copy)]
enum Hostile {
    /// Answers TEST_END with EXCHANGE_RESULTS, reads the client's results,
    /// then says its own are 4 GB long.
    HugeResults,
    /// Says nothing more after CREATE_STREAMS.
    Stalls,
}

/// A fake iperf3 server on loopback for one test: the cookie, PARAM_EXCHANGE,
/// the parameters, CREATE_STREAMS and one TCP stream, then `how`.
fn hostile_server(how: Hostile) -> u16 {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut cookie = [0u8; 37];
        c.read_exact(&mut cookie).unwrap();
        c.write_all(&[9]).unwrap();
        let mut len = [0u8; 4];
        c.read_exact(&mut len).unwrap();
        let mut params = vec![0u8; u32::from_be_bytes(len) as usize];
        c.read_exact(&mut params).unwrap();
        c.write_all(&[10]).unwrap();
        let (mut stream, _) = l.accept().unwrap();
        stream.read_exact(&mut cookie).unwrap();
        // The stream's bytes are read away, as a receiver would.
        std::thread::spawn(move || std::io::copy(&mut stream, &mut std::io::sink()));
        if let Hostile::Stalls = how {
            std::thread::sleep(Duration::from_secs(40));
            return;
        }
        c.write_all(&[1, 2]).unwrap();
        let mut state = [0u8; 1];
        while state[0] != 4 {
            c.read_exact(&mut state).unwrap();
        }
        c.write_all(&[13]).unwrap();
        c.read_exact(&mut len).unwrap();
        let mut results = vec![0u8; u32::from_be_bytes(len) as usize];
        c.read_exact(&mut results).unwrap();
        c.write_all(&u32::MAX.to_be_bytes()).unwrap();
        std::thread::sleep(Duration::from_secs(40));
    });
    port
}

/// A hostile iperf3 server can neither make the client allocate what it
/// says nor hold it: 4 GB of results are refused unread, a server that
/// stalls is given up within the client's bound on each state (15 s), both
/// as errors naming the server (docs/HOSTILE.md).
#[test]
fn a_hostile_iperf3_server_is_refused_or_given_up() {
    for (how, says, within) in [
        (Hostile::HugeResults, "over netrig's limit of 1048576 bytes", 10),
        (
            Hostile::Stalls,
            "sent nothing within 15 s while netrig waited for TEST_START",
            25,
        ),
    ] {
        let port = hostile_server(how).to_string();
        let t = Instant::now();
        let o = run(&[
            "tcp-stream",
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "--peer",
            "iperf3",
        ]);
        let e = stderr(&o);
        assert!(!o.status.success(), "{e}");
        assert!(e.contains(says), "{e}");
        assert!(
            t.elapsed() < Duration::from_secs(within),
            "{:?}: {e}",
            t.elapsed()
        );
    }
}
