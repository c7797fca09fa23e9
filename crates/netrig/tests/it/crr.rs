//! Connect/request/response/close: a connection per transaction, the same
//! figures as tcp-rr, and failed connections counted by reason.

use crate::helpers::*;
use crate::rr::{against_a_stall, check_rr};
use serde_json::Value;

const REASONS: [&str; 5] = ["refused", "timed_out", "addr_not_available", "reset", "other"];

/// tcp-rr's arithmetic, plus the connect errors: an object of five counts in
/// the summary and in every flow, the summary the sum of the flows.
fn check_crr(v: &Value) {
    assert_eq!(v["test"], "tcp-crr");
    check_rr(v);
    let flows = v["flows"].as_array().unwrap();
    for r in REASONS {
        let sum: u64 = flows
            .iter()
            .map(|f| f["connect_errors"][r].as_u64().unwrap())
            .sum();
        assert_eq!(u(v, &format!("/summary/connect_errors/{r}")), sum, "{r}");
    }
    assert_eq!(flows[0]["local"]["role"], "requester");
    assert_eq!(flows[0]["remote"]["role"], "responder");
    // The agent answered every transaction the client completed (and those
    // outside the window): a request and a response byte count each.
    let answered: u64 = flows
        .iter()
        .map(|f| f["remote"]["total_bytes"].as_u64().unwrap())
        .sum();
    let per = u(v, "/config/request_size") + u(v, "/config/response_size");
    assert!(answered >= per * u(v, "/summary/transactions"), "{answered}");
    // The witness: each end's transactions within the connections its host's
    // kernel opened or accepted over the same window (other tests' too, on
    // this host: a bound).
    let checks = v["witness"]["checks"].as_array().unwrap();
    for (end, source) in [("local", "Tcp.ActiveOpens"), ("remote", "Tcp.PassiveOpens")] {
        let c = checks
            .iter()
            .find(|c| c["end"] == end && c["kernel_source"] == source)
            .unwrap_or_else(|| panic!("no {source} check: {}", v["witness"]));
        assert_eq!(c["verdict"], "agrees", "{c}");
        assert_eq!(c["relation"], "bound", "{c}");
    }
    // Its window starts and ends just after the summary's (read right after
    // it): the same transactions, but for those completed in between. The
    // gap between the two reads is a few ms, but under strace on a busy
    // 2-CPU machine it has reached 20 ms of a 0.5 s window (421 against
    // 403): 4 % of the window. A window of another length (the whole run,
    // the agent's lifetime) or a count from the wrong end is far outside.
    let client = checks
        .iter()
        .find(|c| c["kernel_source"] == "Tcp.ActiveOpens")
        .unwrap();
    let n = u(v, "/summary/transactions");
    assert!(
        u(client, "/netrig").abs_diff(n) <= 10 + n / 25,
        "the witness's transactions are the window's: {client} against {n}"
    );
}

fn errors(v: &Value) -> u64 {
    REASONS
        .iter()
        .map(|r| u(v, &format!("/summary/connect_errors/{r}")))
        .sum()
}

#[test]
fn tcp_crr_closed_loop() {
    let v = run_json(&["tcp-crr", "-l", "1"]);
    check_crr(&v);
    assert_eq!(v["config"]["request_size"], 1);
    assert_eq!(v["config"]["response_size"], 1);
    assert_eq!(v["config"]["timeout_s"], 1.0);
    // On an idle loopback no transaction fails; when the parallel tests load
    // this 2-CPU machine a rare reset has been seen (unexplained so far, see
    // the closing note of the session that merged tcp-crr). A systemic
    // failure still breaks this, and any failure must be said in a warning.
    let (failed, done) = (errors(&v), u(&v, "/summary/transactions"));
    assert!(
        failed * 200 <= done,
        "{failed} failed of {done}: {}",
        v["summary"]["connect_errors"]
    );
    assert_eq!(
        warnings_about(&v, "failed").is_empty(),
        failed == 0,
        "{}",
        v["warnings"]
    );
    // Each flow's socket figures come from its connections.
    assert!(
        v["flows"][0]["local"]["socket_buffers"]["initial"]["snd"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(v["flows"][0]["remote"]["applied"]["congestion"].is_string());
    let o = run(&["tcp-crr", "-l", "0.5"]);
    let t = stdout(&o);
    assert!(
        t.contains("TCP CRR TEST")
            && t.contains("Trans.")
            && t.contains("latency (us)")
            && t.contains("us/tran")
            && t.contains("connect errors (failed transactions, not counted): refused 0  timed out 0"),
        "{t}"
    );
}

#[test]
fn crr_request_and_response_sizes_are_what_moves() {
    let v = run_json(&["tcp-crr", "-l", "1", "-r", "64,1K"]);
    check_crr(&v);
    let tr = u(&v, "/summary/transactions");
    // The requester counts the request and the response of each connection,
    // not its greeting.
    let bytes = u(&v, "/flows/0/bytes");
    let per = 64 + 1024;
    assert!(
        bytes.abs_diff(tr * per) <= 2 * per,
        "{bytes} bytes for {tr} transactions of {per}"
    );
}

#[test]
fn crr_burst_keeps_connections_in_flight() {
    let v = run_json(&["tcp-crr", "-l", "1", "--burst", "4"]);
    check_crr(&v);
    assert_eq!(v["config"]["burst"], 4);
    assert!(
        warnings_about(&v, "Nagle").is_empty(),
        "one request per connection: Nagle holds nothing back"
    );
}

#[test]
fn crr_many_flows_on_two_workers() {
    let v = run_json(&["tcp-crr", "-l", "1", "-P", "20", "-T", "2"]);
    check_crr(&v);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 20);
    assert!(
        flows.iter().all(|f| f["transactions"].as_u64().unwrap() > 0),
        "an idle flow"
    );
    assert_eq!(v["workers"]["local"].as_array().unwrap().len(), 2);
    assert_eq!(v["workers"]["remote"].as_array().unwrap().len(), 2);
}

#[test]
fn crr_open_loop_keeps_its_rate() {
    let v = run_json(&["tcp-crr", "-l", "2", "--rate", "200", "-P", "2"]);
    check_crr(&v);
    let tps = f(&v, "/summary/transactions_per_s");
    assert!((tps - 400.0).abs() < 40.0, "{tps} tps for 2 flows at 200");
    let due = u(&v, "/summary/schedule/due");
    assert!(due.abs_diff(800) < 80, "{due} due");
}

/// An agent stopped for 400 ms: connections complete in its listen queue but
/// no response comes within --timeout. Those transactions are counted as
/// timed out, said in a warning, and left out of the rate; the rest go on.
#[test]
fn crr_counts_timeouts_against_a_stalled_agent() {
    // --crr-timeout, the option's first name, still works.
    let v = against_a_stall(&["tcp-crr", "--crr-timeout", "0.1", "-P", "2", "-i", "0.5"]);
    check_crr(&v);
    let timed_out = u(&v, "/summary/connect_errors/timed_out");
    assert!(timed_out > 0, "{}", v["summary"]["connect_errors"]);
    // The interim reports show when they failed: the intervals add up to
    // the window's failures (give or take one at each edge), and the stall
    // (1.2 s to 1.6 s after the client starts) is in them, not in the first.
    let iv = v["intervals"].as_array().unwrap();
    let per: Vec<u64> = iv.iter().map(|i| u(i, "/failed_transactions")).collect();
    let total: u64 = ["refused", "timed_out", "addr_not_available", "reset", "other"]
        .iter()
        .map(|k| u(&v["summary"]["connect_errors"], &format!("/{k}")))
        .sum();
    assert!(per.iter().sum::<u64>().abs_diff(total) <= 2, "{per:?} vs {total}");
    assert_eq!(per[0], 0, "{per:?}");
    assert!(per[1..].iter().sum::<u64>() > 0, "{per:?}");
    for i in iv {
        let by_flow: u64 = i["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["failed_transactions"].as_u64().unwrap())
            .sum();
        assert_eq!(u(i, "/failed_transactions"), by_flow, "{i}");
    }
    let w = warnings_about(&v, "not counted as transactions");
    assert!(w.len() == 1 && w[0].contains("timed out"), "{}", v["warnings"]);
    assert_eq!(v["config"]["timeout_s"], 0.1);
}

/// An exhausted ephemeral port range, made on purpose in a namespace of the
/// test's own (ten ports, TIME_WAIT not reused): the first few transactions
/// complete, every later connect fails with EADDRNOTAVAIL, and those are
/// counted as `addr_not_available` with a warning that names the sysctls,
/// never hidden inside a lower rate; the flow retries every millisecond.
#[test]
fn crr_counts_an_exhausted_port_range() {
    let ns = match Netns::create("ports").and_then(|ns| {
        ns.exec(&[
            "sysctl",
            "-w",
            "net.ipv4.ip_local_port_range=40000 40009",
            "net.ipv4.tcp_tw_reuse=0",
        ])?;
        Ok(ns)
    }) {
        Ok(ns) => ns,
        Err(e) => {
            crate::skip::missing(format!(
                "needs root and iproute2 for a namespace of its own ({e})"
            ));
            return;
        }
    };
    let v = run_json_in(&ns, &["tcp-crr", "-l", "1"]);
    check_crr(&v);
    let tr = u(&v, "/summary/transactions");
    assert!((1..10).contains(&tr), "{tr} transactions through 10 ports");
    let e = &v["summary"]["connect_errors"];
    // Retried once a millisecond, not as fast as the CPU can fail (that
    // was 100,000 in a second, and a worker 95% busy).
    let failed = u(e, "/addr_not_available");
    assert!((1..5_000).contains(&failed), "{e}");
    assert_eq!(
        u(e, "/refused") + u(e, "/timed_out") + u(e, "/reset") + u(e, "/other"),
        0,
        "{e}"
    );
    let w = warnings_about(&v, "ip_local_port_range");
    assert!(
        w.len() == 1 && w[0].contains("address not available"),
        "{}",
        v["warnings"]
    );
}

/// With the client closing first and a range of 2,000 ports (a second's
/// TIME_WAIT before each may go again), the rate is the range's, not the
/// stack's: the kernel's TcpExt.TWRecycled counts most connections taking a
/// port still in TIME_WAIT, and the result says that the ports set the
/// rate, naming the range and what lifts it. In a namespace of the test's own.
#[test]
fn crr_at_the_local_port_ceiling_says_so() {
    let Some(ns) = Netns::or_skip("ceiling") else {
        return;
    };
    ns.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 41999"])
        .unwrap();
    let v = run_json_in(&ns, &["tcp-crr", "-l", "3", "-P", "2"]);
    check_crr(&v);
    let tr = u(&v, "/summary/transactions");
    let recycled = v["counters"]["local"]["deltas"]["TcpExt.TWRecycled"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        recycled * 2 >= tr,
        "{recycled} of {tr} connections took a TIME_WAIT port"
    );
    let w = warnings_about(&v, "ceiling of the client's local ports");
    assert_eq!(w.len(), 1, "{}", v["warnings"]);
    for needle in [
        "TcpExt.TWRecycled",
        "ip_local_port_range 40000-41999",
        "--close-first responder",
    ] {
        assert!(w[0].contains(needle), "{needle}: {}", w[0]);
    }
}

/// Issue #37: ten ports bound by `--local-ports`, the client closing first,
/// ran some 14,000 connections/s and were warned of "some 10 connections/s"
/// as their ceiling. connect() on a bound socket takes over its 4-tuple's
/// TIME_WAIT at once (with timestamps), whatever tcp_tw_reuse says (0 here,
/// in a namespace of the test's own): the ports set no rate, and the result
/// says none. A thousand a second is 100 times what a second's reuse delay
/// would allow ten ports, and far below what a loaded machine manages.
#[test]
fn crr_local_ports_bound_set_no_time_wait_ceiling() {
    let Some(ns) = Netns::or_skip("boundports") else {
        return;
    };
    ns.exec(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=0"]).unwrap();
    let v = run_json_in(&ns, &["tcp-crr", "-l", "1", "--local-ports", "20101-20110"]);
    check_crr(&v);
    let tr = u(&v, "/summary/transactions");
    let recycled = v["counters"]["local"]["deltas"]["TcpExt.TWRecycled"]
        .as_u64()
        .unwrap_or(0);
    assert!(tr >= 1_000, "{tr} transactions through 10 bound ports");
    assert!(recycled * 2 >= tr, "{recycled} of {tr} took over a TIME_WAIT");
    assert_eq!(u(&v, "/summary/connect_errors/addr_not_available"), 0);
    let w = warnings_about(&v, "ceiling");
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn crr_bad_input() {
    for (args, needle) in [
        (
            vec!["tcp-crr", "--burst", "2000"],
            "--burst 2000 is out of range 1..=1024",
        ),
        (vec!["tcp-crr", "--timeout", "0"], "--timeout"),
        (vec!["tcp-crr", "--timeout", "61"], "--timeout"),
        (vec!["tcp-crr", "--rate", "100", "--burst", "4"], "--burst"),
        (vec!["tcp-crr", "-r", "0,1"], "-r/--request-response"),
        (vec!["tcp-crr", "-n", "1M"], "unexpected argument"),
        (vec!["tcp-crr", "--local-ports", "9000-8000"], "--local-ports"),
        (vec!["tcp-crr", "--local-ports", "0-10"], "--local-ports"),
        (vec!["tcp-rr", "--timeout", "1"], "unexpected argument"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// `--local-ports`: every connection the client opened came from the
/// range (the client's TIME_WAIT sockets say which ports it bound), and the
/// result says it was asked for. In a namespace of the test's own: the
/// host's TIME_WAIT table, which the tests beside this one fill and may
/// overflow, holds sockets of other runs to the same port numbers.
#[test]
fn crr_local_ports_bind_each_connection_inside_the_range() {
    let Some(ns) = Netns::or_skip("lports") else {
        return;
    };
    // 20,000 ports: none used again within the run (TIME_WAIT lets a port go
    // again only after a second), and below the kernel's ephemeral range.
    let (low, high) = (10_000u16, 29_999u16);
    let range = format!("{low}-{high}");
    let v = run_json_in(&ns, &["tcp-crr", "-l", "1", "--local-ports", &range]);
    check_crr(&v);
    assert_eq!(v["config"]["local_ports"], range);
    let n = u(&v, "/summary/transactions");
    assert!(n > 100, "{n} transactions");
    assert!(errors(&v) * 200 <= n, "{}", v["summary"]["connect_errors"]);
    let ports = time_wait_local_ports_in(&ns);
    let (inside, outside): (Vec<u16>, Vec<u16>) = ports.iter().partition(|p| (low..=high).contains(*p));
    assert!(
        inside.len() as u64 * 2 >= n,
        "{} TIME_WAIT in the range, {n} transactions",
        inside.len()
    );
    // The control connection is the kernel's pick (and closed first by the client).
    assert!(outside.len() <= 2, "ports outside {range}: {outside:?}");
    // Without the option the kernel picks them, from its ephemeral range.
    let v = run_json_in(&ns, &["tcp-crr", "-l", "0.3"]);
    assert!(v["config"]["local_ports"].is_null());
}

/// `--close-first requester-reset` ends each connection with a reset from
/// the client once it has the response (neper tcp_crr's default): every
/// transaction counted, no failure, no TIME_WAIT on either end, and the
/// kernel's own counters show a reset per connection. Both requester paths:
/// one connection at a time on blocking sockets, and two in flight in the
/// event loop. In a namespace of its own, whose counters and TIME_WAIT table
/// are this test's alone.
#[test]
fn crr_requester_reset_leaves_no_time_wait_and_the_kernel_counts_the_resets() {
    let Some(ns) = Netns::or_skip("crrrst") else {
        return;
    };
    for burst in ["1", "2"] {
        let before = time_wait_local_ports_in(&ns).len() as u64;
        let v = run_json_in(
            &ns,
            &[
                "tcp-crr",
                "-l",
                "1",
                "--burst",
                burst,
                "--close-first",
                "requester-reset",
            ],
        );
        check_crr(&v);
        assert_eq!(v["config"]["close_first"], "requester-reset");
        let n = u(&v, "/summary/transactions");
        assert!(n > 100, "--burst {burst}: {n} transactions");
        assert!(
            errors(&v) * 200 <= n,
            "--burst {burst}: {}",
            v["summary"]["connect_errors"]
        );
        // The control connection may leave one.
        let tw = (time_wait_local_ports_in(&ns).len() as u64).saturating_sub(before);
        assert!(tw <= 2, "--burst {burst}: {tw} TIME_WAIT after {n} transactions");
        // The witness: a reset sent, and a close aborted by SO_LINGER 0, per
        // connection (those outside the window too: at least n).
        let deltas = &v["counters"]["local"]["deltas"];
        let (rsts, aborts) = (
            deltas["Tcp.OutRsts"].as_u64().unwrap_or(0),
            deltas["TcpExt.TCPAbortOnData"].as_u64().unwrap_or(0),
        );
        assert!(
            rsts >= n && aborts >= n,
            "--burst {burst}: {n} transactions, {rsts} Tcp.OutRsts, {aborts} TcpExt.TCPAbortOnData"
        );
        assert!(
            rsts <= n + n / 2,
            "--burst {burst}: {rsts} resets for {n} transactions: more than one a connection"
        );
    }
    // Without it, the same run leaves its TIME_WAIT on the client and no reset.
    let v = run_json_in(&ns, &["tcp-crr", "-l", "0.5"]);
    let n = u(&v, "/summary/transactions");
    let rsts = v["counters"]["local"]["deltas"]["Tcp.OutRsts"]
        .as_u64()
        .unwrap_or(0);
    assert!(rsts * 20 <= n, "{rsts} resets in {n} FIN-closed transactions");
    assert!(time_wait_local_ports_in(&ns).len() as u64 * 2 >= n);
}

/// The local ports of the TIME_WAIT sockets in `ns`, from its
/// /proc/net/tcp and tcp6.
fn time_wait_local_ports_in(ns: &Netns) -> Vec<u16> {
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.0, "cat", "/proc/net/tcp", "/proc/net/tcp6"])
        .output()
        .unwrap();
    let port_of = |a: &str| u16::from_str_radix(a.rsplit(':').next().unwrap_or(""), 16).ok();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() >= 4 && w[3] == "06")
        .filter_map(|w| port_of(w[1]))
        .collect()
}

/// `--close-first` decides which end keeps each connection's TIME_WAIT:
/// the client's by default (neper's order), the agent's with `responder`
/// (netperf's); every transaction is counted either way, and the result
/// says which it was. Each order in a namespace of its own, whose TIME_WAIT
/// table holds this run's sockets only (the host's, shared with the tests
/// beside it, overflows at 131,072 and drops some), and whose
/// net.ipv4.tcp_tw_reuse is 0: at the kernel's default (2, on loopback),
/// connect(2) takes over the client's TIME_WAIT sockets once they are a
/// second old, and the run leaves fewer than a connection each.
#[test]
fn crr_close_first_decides_where_time_wait_stays() {
    for end in ["requester", "responder"] {
        let Some(ns) = Netns::or_skip("crrtw") else {
            return;
        };
        ns.exec(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=0"])
            .expect("net.ipv4.tcp_tw_reuse is the namespace's own");
        let v = run_json_in(&ns, &["tcp-crr", "-l", "1", "--close-first", end]);
        check_crr(&v);
        assert_eq!(v["config"]["close_first"], end);
        let n = u(&v, "/summary/transactions");
        assert!(n > 100, "{end}: {n} transactions");
        assert!(errors(&v) * 200 <= n, "{end}: {}", v["summary"]["connect_errors"]);
        // The embedded agent's port: its side of each connection.
        let port = u(&v, "/config/port") as u16;
        let ports = time_wait_local_ports_in(&ns);
        let agent_side = ports.iter().filter(|p| **p == port).count() as u64;
        let client_side = ports.len() as u64 - agent_side;
        let (holder, other) = match end {
            "requester" => (client_side, agent_side),
            _ => (agent_side, client_side),
        };
        // The client's own TIME_WAIT holds its ports: one a connection. The
        // agent's does not, and a new connection's SYN from a port it holds
        // replaces it (the client, keeping no TIME_WAIT, takes ports back at
        // once): about three in four of n were left after one second here.
        let least = if end == "requester" { n } else { n / 2 };
        assert!(
            holder >= least && other * 50 <= n,
            "{end} first: {agent_side} TIME_WAIT on the agent's side, {client_side} on the client's, \
             {n} transactions"
        );
    }
}

/// While a one-worker tcp-crr run holds the agent's listener, the agent
/// still serves everyone else (control connections and other sessions'
/// data connections go back to its accept loop), and takes the listener
/// back when the run ends.
#[test]
fn crr_run_holding_the_listener_leaves_the_agent_open_to_others() {
    let agent = Served::start(&[]);
    let port = agent.port_arg();
    let crr_args = at(&port, "tcp-crr -l 3");
    let crr = std::thread::spawn(move || run_json(&strs(&crr_args)));
    std::thread::sleep(std::time::Duration::from_millis(800));
    let rr = run_json(&strs(&at(&port, "tcp-rr -l 0.5")));
    assert!(u(&rr, "/summary/transactions") > 100, "tcp-rr beside tcp-crr");
    let other = run_json(&strs(&at(&port, "tcp-crr -l 0.5")));
    check_crr(&other);
    assert!(
        u(&other, "/summary/transactions") > 50,
        "a second tcp-crr beside the first"
    );
    let v = crr.join().unwrap();
    check_crr(&v);
    assert!(errors(&v) * 200 <= u(&v, "/summary/transactions"));
    // Given back: the accept loop serves a connection-per-transaction test again.
    let after = run_json(&strs(&at(&port, "tcp-crr -l 0.5")));
    check_crr(&after);
    assert!(u(&after, "/summary/transactions") > 50);
}

/// The table says which end closed first.
#[test]
fn crr_table_names_the_end_that_closed_first() {
    for (end, line) in [
        ("requester", "the client closed each connection first"),
        ("responder", "the agent closed each connection first"),
    ] {
        let o = run(&["tcp-crr", "-l", "0.3", "--close-first", end]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains(line), "{end}: {}", stdout(&o));
    }
}

/// A tcp-crr run of several workers on the agent is lent the listener as a
/// lone worker is: each worker accepts its session's connections itself
/// (strace: the successful accept4(2) calls come from two threads, each with
/// a good share), not through the accept loop's thread, a wake-up and a
/// hand-over per connection (that cost 0.82x neper's rate at 4 flows on 2
/// threads).
#[test]
fn crr_workers_share_the_lent_listener() {
    let Some(_) = agent_for_strace() else {
        return;
    };
    let log = std::env::temp_dir().join(format!("netrig-agent-strace-{}-share.txt", std::process::id()));
    let agent = Served::start_straced("accept,accept4", &log);
    let port = agent.port_arg();
    let v = run_json(&strs(&at(&port, "tcp-crr -l 0.5 -P 4 -T 2")));
    check_crr(&v);
    let n = u(&v, "/summary/transactions");
    assert!(n >= 50, "{n} transactions");
    let text = agent.traced(&log);
    // "TID accept4(3, ...) = FD" with -f, or split in two lines around
    // another thread's call, the second "TID <... accept4 resumed>...) = FD";
    // a failed one ends "= -1 EAGAIN ...".
    let calls = [" accept4(", " accept(", " accept4 resumed>", " accept resumed>"];
    let mut by_thread: std::collections::BTreeMap<&str, u64> = Default::default();
    for l in text.lines().filter(|l| calls.iter().any(|c| l.contains(c))) {
        let ok = l
            .rsplit_once(" = ")
            .is_some_and(|(_, r)| r.starts_with(|c: char| c.is_ascii_digit()));
        if ok {
            *by_thread
                .entry(l.split_whitespace().next().unwrap_or(""))
                .or_default() += 1;
        }
    }
    let accepted: u64 = by_thread.values().sum();
    assert!(
        accepted >= n,
        "{accepted} accepted for {n} transactions: {by_thread:?}"
    );
    let sharing = by_thread.values().filter(|&&a| a * 10 >= n).count();
    assert!(sharing >= 2, "accepts by thread, {n} transactions: {by_thread:?}");
}

/// The agent's side of a one-flow closed-loop run, which holds the listener
/// (netserver's TCP_CRR side): it waits in accept(2) and in the connection's
/// own calls, about one accept(2) a transaction and a handful of epoll calls
/// for hundreds of transactions (the accept loop's and the session's), in
/// either close order, and reads each greeting with its request in one
/// call (no MSG_PEEK first). With two flows on its one worker it answers from its
/// event loop: an epoll_ctl(2) for each connection it waits on (the
/// requester's close).
#[test]
fn crr_alone_the_agent_waits_in_accept_not_in_epoll() {
    if !strace_works() {
        crate::skip::missing("strace is missing or cannot trace here (apt-get install strace)");
        return;
    }
    let calls = |extra: &[&str]| -> (u64, u64, u64, u64) {
        let log = std::env::temp_dir().join(format!(
            "netrig-agent-strace-{}-{}.txt",
            std::process::id(),
            extra.join("")
        ));
        let agent = Served::start_straced(
            "epoll_wait,epoll_pwait,epoll_pwait2,epoll_ctl,accept,accept4,recvfrom",
            &log,
        );
        let port = agent.port_arg();
        let mut args = vec!["tcp-crr", "-H", "127.0.0.1", "-p", &port, "-l", "0.5", "--json"];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        check_crr(&v);
        let text = agent.traced(&log);
        // An interrupted call is two lines; "<... accept4 resumed>" is the second.
        let count = |names: &[&str]| {
            text.lines()
                .filter(|l| names.iter().any(|n| l.contains(&format!(" {n}("))))
                .count() as u64
        };
        let epoll = count(&["epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl"]);
        let accepts = count(&["accept", "accept4"]);
        let peeks = text.lines().filter(|l| l.contains("MSG_PEEK")).count() as u64;
        (epoll, accepts, peeks, u(&v, "/summary/transactions"))
    };
    for end in ["requester", "responder"] {
        let (e, a, p, n) = calls(&["--close-first", end]);
        eprintln!("agent, one flow, {end} closing first: {e} epoll calls, {a} accepts, {p} peeks for {n} transactions");
        assert!(n >= 50, "{end}: {n} transactions");
        assert!(
            e * 10 < n,
            "agent, {end} closing first: {e} epoll calls for {n} transactions"
        );
        assert!(
            a * 10 < n * 13,
            "agent, {end} closing first: {a} accepts for {n} transactions"
        );
        assert!(
            p * 10 < n,
            "agent, {end} closing first: {p} peeks for {n} transactions"
        );
    }
    let (e, a, _, n) = calls(&["-P", "2", "-T", "1"]);
    eprintln!("agent, two flows on one worker: {e} epoll calls, {a} accepts for {n} transactions");
    assert!(
        n >= 50 && e * 2 > n,
        "agent event loop: {e} epoll calls for {n} transactions"
    );
}

/// A tcp-crr client run against the agent on `port` under strace (`trace`):
/// `test` and `extra` its arguments after the agent's address; its checked
/// result, strace's log, and how many lines of the log contain any of
/// `calls`.
fn straced_crr(port: &str, test: &str, extra: &[&str], trace: &str, calls: &[&str]) -> (Value, u64) {
    let mut args = at(port, test);
    args.extend(extra.iter().map(|e| e.to_string()));
    let (o, text) = straced(trace, &strs(&args));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    check_crr(&v);
    let n = text
        .lines()
        .filter(|l| calls.iter().any(|c| l.contains(c)))
        .count();
    (v, n as u64)
}

/// In the event loop, a requester with nothing to set once connected sends
/// its request without asking whether the connect is done (getsockopt
/// SO_ERROR, getpeername): the write says so. With an option to set after
/// the connect (--nodelay here), it asks first, as before: the option must
/// be on before the request goes out.
#[test]
fn crr_requesters_write_without_asking_unless_an_option_waits() {
    let Some(agent) = agent_for_strace() else {
        return;
    };
    let port = agent.port_arg();
    let asks = |extra: &[&str]| -> (u64, u64) {
        let test = "tcp-crr -l 0.5 -P 2 -T 1 --json";
        let (v, calls) = straced_crr(&port, test, extra, "getpeername", &["getpeername("]);
        (calls, u(&v, "/summary/transactions"))
    };
    let (g, n) = asks(&[]);
    assert!(n >= 50 && g * 10 < n, "{g} getpeername(2) for {n} transactions");
    let (g, n) = asks(&["--nodelay"]);
    assert!(
        n >= 50 && g >= n,
        "--nodelay: {g} getpeername(2) for {n} transactions"
    );
}

/// In the event loop a connection that waits to read (the response, or
/// on the agent the requester's close) is not read when its socket only
/// turned writable (the connect done, an ACK freeing room), and the
/// requester does not read for the response right after writing its
/// request: either would be a read that finds nothing (EAGAIN). Under
/// strace (both ends in one process, the embedded agent), 4 flows on one
/// worker per end: more than one such read per transaction before, now
/// under a tenth. The agent's peek at a greeting that has not come yet is
/// not counted: how often the agent accepts before the requester has
/// written depends on the scheduling (a clean-clone CI run, busy with the
/// parallel tests, saw 249 empty receives for 307 transactions, where an
/// idle machine sees 14-39 for 150-300, most of them such peeks). The
/// counts are checked as every crr run's.
#[test]
fn crr_event_loop_reads_only_when_there_is_something_to_read() {
    let args = ["tcp-crr", "-l", "0.5", "-P", "4", "-T", "1", "--json"];
    let Some(Receives {
        v,
        empty,
        empty_peeks,
        ..
    }) = straced_receives(&args)
    else {
        return;
    };
    check_crr(&v);
    let n = u(&v, "/summary/transactions");
    let reads = empty - empty_peeks;
    eprintln!("{n} transactions, {empty} receives that found nothing, {empty_peeks} of them peeks");
    assert!(n >= 100, "{n} transactions");
    // (Some reads remain: a drain read. The old behaviour made more than
    // one per transaction.)
    assert!(
        reads * 3 < n,
        "{reads} reads (not peeks) found nothing for {n} transactions ({empty_peeks} peeks too)"
    );
}

/// One closed-loop flow alone on its worker waits in connect(2) and read(2)
/// on blocking sockets (netperf's TCP_CRR client), not in epoll_wait(2):
/// under strace the client waits in epoll a handful of times for hundreds
/// of transactions, in either close order, where two flows sharing a worker
/// (its event loop) wait there about once a transaction. The counts are
/// checked as every crr run's.
#[test]
fn crr_alone_waits_in_the_socket_calls_not_in_epoll() {
    let Some(agent) = agent_for_strace() else {
        return;
    };
    let port = agent.port_arg();
    let epoll_waits = |extra: &[&str]| -> (u64, u64) {
        // An interrupted call is two lines; "<... epoll_wait resumed>" is the second.
        let (v, waits) = straced_crr(
            &port,
            "tcp-crr -l 0.5 --json",
            extra,
            "epoll_wait,epoll_pwait,epoll_pwait2",
            &["epoll_wait(", "epoll_pwait("],
        );
        (waits, u(&v, "/summary/transactions"))
    };
    for end in ["requester", "responder"] {
        let (w, n) = epoll_waits(&["--close-first", end]);
        eprintln!("alone, {end} closing first: {w} epoll waits for {n} transactions");
        assert!(n >= 50, "{end}: {n} transactions");
        assert!(
            w * 10 < n,
            "alone, {end} closing first: {w} epoll waits for {n} transactions"
        );
    }
    let (w, n) = epoll_waits(&["-P", "2", "-T", "1"]);
    eprintln!("two flows on one worker: {w} epoll waits for {n} transactions");
    assert!(
        n >= 50 && w * 8 > n,
        "event loop: {w} epoll waits for {n} transactions"
    );
}
