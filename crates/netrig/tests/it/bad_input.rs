//! Every bad input gets a clear message and exit status 2.

use crate::helpers::*;
use std::io::{Read, Write};
use std::net::TcpListener;

fn fails_with(args: &[&str], needle: &str) {
    let o = run(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "netrig {args:?}: {e}");
    assert!(
        e.to_lowercase().contains(&needle.to_lowercase()),
        "netrig {args:?}: expected {needle:?} in: {e}"
    );
}

#[test]
fn unknown_host() {
    fails_with(
        &["tcp-stream", "-H", "no-such-host.invalid", "-l", "1"],
        "cannot resolve host \"no-such-host.invalid\"",
    );
}

#[test]
fn refused_connection_names_the_agent() {
    let p = free_port().to_string();
    fails_with(
        &["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "1"],
        "refused (is `netrig serve` running",
    );
}

#[test]
fn port_in_use() {
    let held = TcpListener::bind("0.0.0.0:0").unwrap();
    let p = held.local_addr().unwrap().port().to_string();
    fails_with(&["serve", "-p", &p, "--bind", "0.0.0.0"], "already in use");
}

#[test]
fn sizes_and_counts_out_of_range() {
    fails_with(&["tcp-stream", "-m", "0"], "-m/--message-size 0 is out of range");
    fails_with(&["tcp-stream", "-m", "32M"], "-m/--message-size");
    fails_with(&["tcp-stream", "-m", "lots"], "not a size");
    fails_with(&["tcp-stream", "-P", "0"], "--parallel");
    fails_with(&["tcp-stream", "-l", "0"], "-l/--length");
    fails_with(&["tcp-stream", "-s", "2G"], "-s/--local-sockbuf");
    fails_with(&["tcp-stream", "--dscp", "64"], "--dscp");
    fails_with(&["tcp-stream", "--priority", "8"], "--priority");
    fails_with(
        &["tcp-stream", "--max-pacing-rate", "1"],
        "--max-pacing-rate 1 is out of range",
    );
    fails_with(&["tcp-stream", "--max-pacing-rate", "fast"], "not a rate");
    fails_with(&["tcp-stream", "--mss", "10"], "--mss 10 is out of range");
    fails_with(&["tcp-stream", "-i", "0.01"], "-i/--interval");
    fails_with(&["tcp-stream", "-b", "fast"], "not a rate");
    fails_with(
        &["tcp-maerts", "-b", "500G"],
        "-b/--bitrate 500000000000 is out of range",
    );
    fails_with(
        &["tcp-bidir", "-b", "1M", "--pacing-us", "0"],
        "--pacing-us 0 is out of range",
    );
}

#[test]
fn options_that_do_not_apply() {
    fails_with(
        &["tcp-stream", "-n", "1M", "--omit", "1"],
        "--omit applies to timed tests",
    );
    fails_with(&["tcp-stream", "-l", "1", "--omit", "2"], "--omit");
    fails_with(&["tcp-stream", "-l", "1", "-n", "1M"], "cannot be used with");
    fails_with(
        &["tcp-stream", "--dscp", "1", "--tos", "4"],
        "cannot be used with",
    );
    fails_with(&["tcp-stream", "-4", "-6"], "cannot be used with");
    fails_with(&["tcp-stream", "-H", "::1", "-4"], "has no ipv4 address");
    fails_with(
        &["tcp-stream", "-H", "127.0.0.1", "--bind", "::1", "-p", "1"],
        "--bind ::1 is not of the same address family",
    );
    fails_with(
        &["tcp-stream", "--cc", "no-such-algo", "-l", "0.2"],
        "--cc no-such-algo",
    );
    fails_with(&["serve", "-l", "1"], "unexpected argument");
    fails_with(
        &["tcp-stream", "--pacing-us", "50"],
        "--pacing-us applies to stream tests with a rate (-b)",
    );
    // CPUs this host does not have, on either end, before anything runs.
    fails_with(
        &["tcp-stream", "--cpus", "1023"],
        "--cpus: CPU 1023 is not one this host lets netrig run on",
    );
    fails_with(
        &["tcp-stream", "--remote-cpus", "0,1023"],
        "on the agent's host, --remote-cpus (or -A's second CPU): CPU 1023 is not one",
    );
    fails_with(&["tcp-stream", "-A", "1023"], "-A: CPU 1023 is not one");
    fails_with(&["tcp-stream", "--cpus", "3-1"], "rising ranges");
    fails_with(&["tcp-stream", "-A", "1,2,3"], "use N (this end's CPU) or N,M");
    fails_with(&["tcp-stream", "-A", "0", "--cpus", "0"], "cannot be used with");
    // Request/response tests take a transaction rate, not a bit rate.
    fails_with(&["tcp-rr", "-b", "1M"], "unexpected argument");
    // -Z is for the TCP streams only.
    fails_with(&["tcp-rr", "-Z"], "unexpected argument '-Z'");
    fails_with(&["udp-stream", "-Z"], "unexpected argument '-Z'");
}

#[test]
fn a_peer_that_is_not_an_agent() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = l.local_addr().unwrap().port().to_string();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 8];
        let _ = s.read_exact(&mut b);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    fails_with(
        &["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "1"],
        "is an HTTP server, not a netrig agent: it answered \"HTTP/1.1 400 Bad Request\"",
    );
    t.join().unwrap();
}

#[test]
fn version_mismatch_is_told_in_words() {
    // An agent from the future: answers every preamble with a mismatch, as the protocol says.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = l.local_addr().unwrap().port().to_string();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 8];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b[..4], b"NRGC");
        let msg = netrig_proto::AgentMsg::VersionMismatch {
            agent_min: 7,
            agent_max: 9,
            software: "9.9.9".into(),
        };
        s.write_all(&netrig_proto::encode_frame(&msg)).unwrap();
    });
    fails_with(
        &["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "1"],
        "speaks protocol versions 7..=9",
    );
    t.join().unwrap();
}

/// Habits from iperf3 and netperf get a hint, not only "unexpected argument".
#[test]
fn other_tools_habits_get_a_hint() {
    fails_with(&["-c", "server1"], "`netrig tcp-stream -H server1`");
    fails_with(&["-s"], "`netrig serve`");
    fails_with(
        &["-H", "server1"],
        "name the test first: `netrig tcp-stream -H server1`",
    );
    fails_with(
        &["tcp-rr", "server1"],
        "the agent's host goes after -H: `netrig tcp-rr -H server1`",
    );
    // wrk's habit: the URL as an argument (the hint had said -H, which takes no URL).
    fails_with(
        &["http", "http://127.0.0.1:1/x"],
        "a URL goes after --url: `netrig http --url http://127.0.0.1:1/x`",
    );
}

/// The table says which options shaped the run.
#[test]
fn the_table_names_the_options_that_shaped_the_run() {
    let o = run(&[
        "tcp-rr",
        "-l",
        "0.3",
        "--dscp",
        "46",
        "--priority",
        "3",
        "--nodelay",
        "-T",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    assert!(
        t.contains("options: TOS 0xb8 (DSCP 46), priority 3, TCP_NODELAY, 1 worker(s) per end"),
        "{t}"
    );
    let plain = stdout(&run(&["tcp-rr", "-l", "0.2"]));
    assert!(!plain.contains("options:"), "{plain}");
}

/// Issue #37 item 20: every place that takes an agent's host takes
/// `HOST:PORT`, `[IPv6]:PORT` and `-p` (`run` too), a port given twice that
/// disagrees is refused naming both, and a refusal exits 2 from `run` as
/// from a single test.
#[test]
fn hosts_take_their_port_everywhere_and_refusals_exit_alike() {
    let agent = Served::start(&[]);
    let p = agent.port_arg();
    for host in [format!("127.0.0.1:{p}"), format!("[::1]:{p}")] {
        let v = run_json(&["tcp-rr", "-H", &host, "-l", "0.3"]);
        assert!(u(&v, "/summary/transactions") > 0, "{host}: {}", v["summary"]);
    }
    let tmp = TempDir::new("hostport");
    let plan = tmp.path().join("p.toml");
    std::fs::write(
        &plan,
        "name = \"p\"\n[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.3\"]\n",
    )
    .unwrap();
    let plan = plan.to_str().unwrap();
    for args in [
        vec!["run", plan, "-H", "127.0.0.1", "-p", &p, "--json"],
        vec!["run", plan, "-H", &format!("127.0.0.1:{p}"), "--json"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).contains("\"transactions\""), "{args:?}");
    }
    // The same refusal, the same words and status from a test and from run.
    let other = (agent.port + 1).to_string();
    for (host, needle) in [
        (
            format!("127.0.0.1:{p}"),
            format!("its port {p} and -p {other} disagree"),
        ),
        (
            "no-such-host.invalid".to_string(),
            "cannot resolve host \"no-such-host.invalid\"".to_string(),
        ),
        (format!("127.0.0.1:{p}:9"), "give HOST, HOST:PORT".to_string()),
    ] {
        fails_with(&["tcp-rr", "-H", &host, "-p", &other, "-l", "0.3"], &needle);
        fails_with(&["run", plan, "-H", &host, "-p", &other], &needle);
    }
    // A plan's own target takes HOST:PORT too.
    let own = tmp.path().join("own.toml");
    std::fs::write(
        &own,
        format!("name = \"own\"\n[target]\nhost = \"127.0.0.1:{p}\"\n[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.3\"]\n"),
    )
    .unwrap();
    let o = run(&["run", own.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // --server-agent's port disagrees with nothing: it is its own host.
    fails_with(
        &[
            "http",
            "--url",
            "http://127.0.0.1:1/",
            "--server-agent",
            "h:x",
            "-l",
            "0.3",
        ],
        "--server-agent h:x: \"x\" is not a port",
    );
    // -p without -H would be ignored by the in-process agent: it is refused.
    fails_with(
        &["tcp-rr", "-p", &p, "-l", "0.3"],
        &format!("-p {p} is the port of an agent given with -H"),
    );
    fails_with(
        &["run", plan, "-p", &p],
        &format!("-p {p} is the port of an agent given with -H"),
    );
}

/// Issue #37 item 23: a kind's help shows the options that apply to it:
/// --server-agent and --clients are for kinds with one end only.
#[test]
fn a_kinds_help_lists_only_its_options() {
    let one_end = ["--server-agent", "--clients", "--client-addrs"];
    for kind in ["tcp-stream", "tcp-rr", "udp-stream"] {
        let o = run(&[kind, "--help"]);
        for opt in one_end {
            assert!(!stdout(&o).contains(opt), "{kind} --help shows {opt}");
        }
        fails_with(&[kind, "--clients", "2"], "--clients");
    }
    let o = run(&["http", "--help"]);
    for opt in one_end {
        assert!(stdout(&o).contains(opt), "http --help lacks {opt}");
    }
}

/// Issue #37 item 29: the client's --bind takes what serve's takes (a
/// scoped link-local address), and says the same of what it refuses.
#[test]
fn a_clients_bind_reads_as_serves() {
    // lo has fe80-less addresses only: the address parses, then the
    // kernel's refusal names the option (not clap's "invalid IP address syntax").
    let o = run(&["tcp-rr", "-H", "::1", "--bind", "fe80::1%lo", "-l", "0.3"]);
    assert!(
        !stderr(&o).contains("invalid IP address syntax"),
        "{}",
        stderr(&o)
    );
    let serve = run(&["serve", "--bind", "fe80::1%no-such-if", "-q"]);
    let client = run(&["tcp-rr", "--bind", "fe80::1%no-such-if", "-l", "0.3"]);
    assert_eq!(client.status.code(), Some(2));
    assert!(
        stderr(&serve).contains("no interface named \"no-such-if\"")
            && stderr(&client).contains("no interface named \"no-such-if\""),
        "{}\n{}",
        stderr(&serve),
        stderr(&client)
    );
}
