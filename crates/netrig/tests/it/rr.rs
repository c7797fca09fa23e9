//! Request/response: transactions, latency histograms, burst, open loop,
//! many flows on few workers.

use crate::helpers::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

pub(crate) fn check_rr(v: &Value) {
    let tr = u(v, "/summary/transactions");
    // The witness's window starts and ends a little after the summary's (its
    // reads follow the counts at each edge), so its requests are about the
    // summary's transactions, not equal: a busy machine's first edge can
    // leave a few % out (a CI run: 19,560 requests in the witness's window
    // for 19,859 transactions in the summary's). With --busy-wait both
    // workers spin on the machine's two CPUs, and the thread that reads the
    // witness at each edge waits for a time slice: runs were 2.7 % (CI) and
    // 7.2 % (8,526 bytes for 4,594 two-byte transactions) apart.
    let slack = 10
        + if v["config"]["busy_wait"] == true {
            tr / 4
        } else {
            tr / 20
        };
    assert!(tr > 0, "no transactions: {v}");
    let elapsed = f(v, "/summary/elapsed_s");
    let tps = f(v, "/summary/transactions_per_s");
    assert!((tps - tr as f64 / elapsed).abs() < 1e-6 * tps);
    let flows = v["flows"].as_array().unwrap();
    let sum: u64 = flows.iter().map(|f| f["transactions"].as_u64().unwrap()).sum();
    assert_eq!(sum, tr, "summary transactions are the sum of the flows");
    let l = &v["summary"]["latency_us"];
    // The histogram holds exactly the transactions the window counts: the
    // window's state travels in the counter the workers increment.
    let count = l["count"].as_u64().unwrap();
    assert_eq!(count, tr, "histogram has {count}, window has {tr}");
    let (p50, p90, p99, p999, max, mean) = (
        l["p50"].as_f64().unwrap(),
        l["p90"].as_f64().unwrap(),
        l["p99"].as_f64().unwrap(),
        l["p999"].as_f64().unwrap(),
        l["max"].as_f64().unwrap(),
        l["mean"].as_f64().unwrap(),
    );
    assert!(
        0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max * 1.001,
        "{l}"
    );
    assert!(mean > 0.0 && mean <= max);
    // wrk2's spectrum, in order.
    let spectrum: Vec<f64> = [
        "p50", "p75", "p90", "p95", "p99", "p999", "p9999", "p99999", "max",
    ]
    .iter()
    .map(|k| l[k].as_f64().unwrap())
    .collect();
    assert!(spectrum.windows(2).all(|w| w[0] <= w[1] * 1.001), "{l}");
    // The whole histogram decodes to exactly these transactions and figures.
    let h = netrig_metrics::LatencyRecorder::from_base64(
        l["histogram"].as_str().unwrap(),
        netrig_metrics::latency::MAX_ENCODED_LEN,
    )
    .unwrap();
    let s = h.summary();
    assert_eq!(s.count, tr);
    assert_eq!(
        (s.p50_us, s.p99_us, s.p9999_us, s.max_us),
        (p50, p99, l["p9999"].as_f64().unwrap(), max)
    );
    assert_eq!(v["summary"]["service_demand"]["unit"], "us/tran");
    // A short, slow run's CPU may be below /proc/stat's resolution: then
    // withheld, with its reason, and its service demand with it.
    if v["summary"]["cpu"]["local_pct"].is_null() {
        assert!(
            v["summary"]["cpu"]["local_withheld"].is_string(),
            "{}",
            v["summary"]["cpu"]
        );
        assert!(v["summary"]["service_demand"]["local"].is_null());
    } else {
        let pct = f(v, "/summary/cpu/local_pct");
        let cpus = u(v, "/summary/cpu/local/cpus") as f64;
        let sd = f(v, "/summary/service_demand/local");
        assert!((sd - pct / 100.0 * elapsed * cpus * 1e6 / tr as f64).abs() <= 1e-9 * sd);
    }
    if v["test"] == "udp-rr" {
        // The witness: each end's datagrams sent (requests, responses) within
        // its host's Udp.OutDatagrams, a transaction having taken a request;
        // and its transactions within Udp.InDatagrams, each having taken a
        // datagram received (the response, the request answered).
        let checks = v["witness"]["checks"].as_array().unwrap();
        for (end, figure) in [
            ("local", "UDP messages sent"),
            ("remote", "UDP messages sent"),
            ("local", "UDP buffers received"),
            ("remote", "UDP buffers received"),
        ] {
            let c = checks
                .iter()
                .find(|c| c["end"] == end && c["figure"] == figure)
                .unwrap_or_else(|| panic!("no {end} {figure} check: {}", v["witness"]));
            assert_eq!(c["verdict"], "agrees", "{c}");
            if end == "local" {
                // About one request per transaction (the window's slack: below).
                assert!(u(c, "/netrig") + slack >= tr, "{c} for {tr} transactions");
            }
        }
    }
    if v["test"] == "tcp-rr" {
        // The witness: each end's requests and responses, its sockets' bytes
        // both ways (TCP_INFO and the queues), equal within what one call
        // per flow moves; the client's is about its transactions' bytes.
        let checks = v["witness"]["checks"].as_array().unwrap();
        let per = u(v, "/config/request_size") + u(v, "/config/response_size");
        for end in ["local", "remote"] {
            let c = checks
                .iter()
                .find(|c| {
                    c["end"] == end && c["figure"].as_str().unwrap().starts_with("TCP payload both ways")
                })
                .unwrap_or_else(|| panic!("no {end} TCP check: {}", v["witness"]));
            assert_eq!(c["verdict"], "agrees", "{c}");
            assert!(
                u(c, "/netrig").abs_diff(u(c, "/kernel")) <= u(c, "/tolerance"),
                "{c}"
            );
            // (Every flow's socket read: not beyond the first 256.)
            let all = u(v, "/witness/local/tcp/flows") == v["flows"].as_array().unwrap().len() as u64;
            if end == "local" && all {
                let bytes = u(c, "/netrig");
                assert!(
                    bytes + per * slack >= tr * per,
                    "{c} for {tr} transactions of {per} bytes"
                );
            }
        }
    }
}

#[test]
fn tcp_rr_closed_loop() {
    let v = run_json(&["tcp-rr", "-l", "1"]);
    assert_eq!(v["test"], "tcp-rr");
    assert_eq!(v["config"]["request_size"], 1);
    check_rr(&v);
    assert_eq!(v["flows"][0]["local"]["role"], "requester");
    assert_eq!(v["flows"][0]["remote"]["role"], "responder");
    // The responder answered every request the requester completed in its window.
    let responder_total = u(&v, "/flows/0/remote/total_bytes");
    assert!(responder_total >= 2 * u(&v, "/summary/transactions"));
    let o = run(&["tcp-rr", "-l", "0.5"]);
    let t = stdout(&o);
    assert!(
        t.contains("Trans.") && t.contains("per sec") && t.contains("latency (us)") && t.contains("us/tran"),
        "{t}"
    );
}

#[test]
fn request_and_response_sizes_are_what_moves() {
    let v = run_json(&["tcp-rr", "-l", "1", "-r", "64,1K"]);
    check_rr(&v);
    let tr = u(&v, "/summary/transactions");
    // The requester counts requests sent and responses received in its window.
    let bytes = u(&v, "/flows/0/bytes");
    let per = 64 + 1024;
    assert!(
        bytes.abs_diff(tr * per) <= 2 * per,
        "{bytes} bytes for {tr} transactions of {per}"
    );
    let v = run_json(&["tcp-rr", "-l", "0.5", "-r", "100"]);
    assert_eq!(v["config"]["response_size"], 100);
}

#[test]
fn latency_runs_from_the_request_going_not_from_its_send_returning() {
    // 4 MiB one way and a byte back takes about as long as the reverse: both
    // move 4 MiB over loopback. A transaction timed from when the send
    // returned (the lone flow's path did, with the whole request by then in
    // the responder's hands) was 25 times shorter one way than the other.
    for workers in [&["-P", "1"][..], &["-P", "2", "-T", "1"][..]] {
        let p50 = |r: &str| {
            let mut args = vec!["tcp-rr", "-l", "0.5", "-r", r];
            args.extend_from_slice(workers);
            let v = run_json(&args);
            check_rr(&v);
            f(&v, "/summary/latency_us/p50")
        };
        let (out, back) = (p50("4M,1"), p50("1,4M"));
        eprintln!("{workers:?}: p50 {out} us with 4 MiB out, {back} us with 4 MiB back");
        assert!(
            out > back / 4.0 && back > out / 4.0,
            "{workers:?}: p50 {out} us with 4 MiB out, {back} us with 4 MiB back"
        );
    }
}

#[test]
fn closed_loop_latencies_fill_the_window() {
    // One transaction in flight per flow: each flow is always inside one,
    // so the latencies sum to about the window times the flows (what lies
    // outside is the loop's own bookkeeping). Timing from after the send
    // left a quarter of the window out on loopback (0.75). The bookkeeping
    // is 1-9 % of the window in a debug build here (0.91-0.99), more on a
    // machine whose hypervisor steals a third of its CPU: the floor is 0.82,
    // still above what the defect made. Above 1: a transaction begun before
    // the window and counted in it whole (one per flow; a stall of 50 ms at
    // the start is a tenth of this window).
    for args in [
        &["tcp-rr", "-P", "1"][..],
        &["tcp-rr", "-P", "2", "-T", "1"][..],
        &["udp-rr", "-P", "1"][..],
        &["udp-rr", "-P", "2", "-T", "1"][..],
    ] {
        let mut a = args.to_vec();
        a.extend_from_slice(&["-l", "0.5"]);
        let v = run_json(&a);
        check_rr(&v);
        let flows = v["flows"].as_array().unwrap().len() as f64;
        let busy = f(&v, "/summary/latency_us/mean") * u(&v, "/summary/transactions") as f64 / 1e6;
        let share = busy / (f(&v, "/summary/elapsed_s") * flows);
        eprintln!("{args:?}: transactions fill {share:.3} of the window");
        assert!(
            (0.82..1.15).contains(&share),
            "{args:?}: transactions fill {share:.3} of the window"
        );
    }
}

#[test]
fn burst_keeps_transactions_in_flight() {
    let v = run_json(&["tcp-rr", "-l", "1", "--burst", "8", "--nodelay"]);
    check_rr(&v);
    assert!(warnings_about(&v, "Nagle").is_empty());
    let v = run_json(&["tcp-rr", "-l", "0.5", "--burst", "8"]);
    assert!(!warnings_about(&v, "Nagle").is_empty(), "{}", v["warnings"]);
}

/// Many flows on few workers, every one busy; the witness reads the
/// sockets of the first 256 of each end (check_rr: and they agree).
#[test]
fn many_flows_on_few_workers() {
    let v = run_json(&["tcp-rr", "-l", "1", "-P", "300", "-T", "2"]);
    check_rr(&v);
    // (A flow whose three readings all failed is left out: rare.)
    let read = netrig_engine::SOCKETS_READ as u64;
    for end in ["local", "remote"] {
        let n = u(&v, &format!("/witness/{end}/tcp/flows"));
        assert!(n <= read && n + 8 >= read, "{end}: {n} flows' sockets read");
    }
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 300);
    assert!(
        flows.iter().all(|f| f["transactions"].as_u64().unwrap() > 0),
        "an idle flow"
    );
    assert_eq!(v["workers"]["local"].as_array().unwrap().len(), 2);
    assert_eq!(v["workers"]["remote"].as_array().unwrap().len(), 2);
    let o = run(&["tcp-rr", "-l", "0.5", "-P", "20"]);
    assert!(
        stdout(&o).contains("per-flow transactions/s: min"),
        "{}",
        stdout(&o)
    );
}

/// Issue #7, item 5: a tcp-rr flow at 10 transactions/s is application-
/// limited; TCP_INFO's delivery rate then measures the application, not the
/// path. The flag travels in the JSON, and the table withholds the rate.
#[test]
fn app_limited_delivery_rate_is_flagged_and_not_shown_as_a_rate() {
    let v = run_json(&["tcp-rr", "-l", "1", "--rate", "10", "--nodelay"]);
    let t = &v["flows"][0]["tcp_info"];
    assert!(t.is_object(), "{v}");
    if t["delivery_rate_bps"].is_null() {
        eprintln!("this kernel has no tcpi_delivery_rate (before 4.9): nothing to flag");
        assert!(t["delivery_rate_app_limited"].is_null(), "{t}");
        return;
    }
    assert_eq!(t["delivery_rate_app_limited"], true, "{t}");
    let o = run(&["tcp-rr", "-l", "1", "--rate", "10", "--nodelay"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let row = table
        .lines()
        .skip_while(|l| !l.contains("delivery Mb/s"))
        .nth(1)
        .unwrap_or_else(|| panic!("no TCP_INFO row: {table}"));
    assert!(row.trim_end().ends_with("app-limited"), "{row}");
    assert!(table.contains("the sender had no data waiting"), "{table}");
}

#[test]
fn open_loop_keeps_its_rate() {
    let v = run_json(&["tcp-rr", "-l", "2", "--rate", "500", "-P", "2"]);
    check_rr(&v);
    let tps = f(&v, "/summary/transactions_per_s");
    assert!((tps - 1000.0).abs() < 100.0, "{tps} tps for 2 flows at 500");
    let due = u(&v, "/summary/schedule/due");
    assert!(due.abs_diff(2000) < 200, "{due} due");
    let v = run_json(&["tcp-rr", "-l", "2", "--rate", "500", "--poisson"]);
    let tps = f(&v, "/summary/transactions_per_s");
    assert!((tps - 500.0).abs() < 100.0, "poisson at 500: {tps}");
    assert_eq!(v["config"]["poisson"], true);
}

/// Open loop wakes early and spins for each request (a learned lead, or
/// `--spin-us`), or sleeps until it is due (`--spin-us 0`); whichever, the
/// schedule is kept and its report holds together. Nothing here is timed.
#[test]
fn open_loop_spin_keeps_a_coherent_schedule() {
    for spin in [None, Some("0"), Some("300")] {
        let mut a = vec!["tcp-rr", "-l", "1", "--rate", "200"];
        if let Some(us) = spin {
            a.extend_from_slice(&["--spin-us", us]);
        }
        let v = run_json(&a);
        check_rr(&v);
        assert_eq!(
            v["config"]["spin_us"].as_u64(),
            spin.map(|us| us.parse().unwrap()),
            "null when learned"
        );
        // What spinning costs is said next to the CPU figures it is in.
        assert_eq!(
            warnings_about(&v, "pacer spinning").len(),
            usize::from(spin != Some("0")),
            "{spin:?}: {}",
            v["warnings"]
        );
        let elapsed = f(&v, "/summary/elapsed_s");
        let due = u(&v, "/summary/schedule/due");
        let late = u(&v, "/summary/schedule/late");
        let (mean, max) = (
            f(&v, "/summary/schedule/mean_behind_us"),
            f(&v, "/summary/schedule/max_behind_us"),
        );
        let want = 200.0 * elapsed;
        assert!(
            (due as f64 - want).abs() < 0.2 * want,
            "{spin:?}: {due} due in {elapsed} s at 200/s"
        );
        assert!(late <= due, "{spin:?}: {late} late of {due}");
        assert!(
            0.0 <= mean && mean <= max,
            "{spin:?}: mean {mean} max {max} behind"
        );
        let tr = u(&v, "/summary/transactions");
        assert!(tr > due / 2, "{spin:?}: {tr} transactions for {due} due");
    }
    // The other paced kinds take it too, and their agents accept the spec.
    for kind in ["tcp-crr", "udp-rr"] {
        let v = run_json(&[kind, "-l", "0.5", "--rate", "200", "--spin-us", "50"]);
        assert!(u(&v, "/summary/schedule/due") > 0, "{kind}");
    }
}

/// The intervals a warning names as handed over late (a worker held up
/// past the sampler's bound, as a preempted thread on a busy host can be).
fn late_intervals(v: &Value) -> Vec<u64> {
    warnings_about(v, "handed its latencies over late")
        .iter()
        .flat_map(|w| {
            let list = &w[w.find('[').unwrap() + 1..w.find(']').unwrap()];
            list.split(',')
                .map(|x| x.trim().parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// An interval's latency histogram holds exactly its transactions (fewer
/// only where a warning says so), and its percentiles are in order;
/// returns the interval's transactions.
fn check_interval_latency(v: &Value, i: &Value) -> u64 {
    let n: u64 = i["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["transactions"].as_u64().unwrap())
        .sum();
    let count = u(i, "/latency_us/count");
    if late_intervals(v).contains(&u(i, "/index")) {
        assert!(count < n, "{i}: named late, yet complete");
        return n;
    }
    assert_eq!(count, n, "{i}");
    let l = &i["latency_us"];
    assert!(
        f(l, "/p50") > 0.0 && f(l, "/p50") <= f(l, "/p99") && f(l, "/p99") <= f(l, "/max") * 1.001,
        "{l}"
    );
    n
}

fn signal(pid: u32, sig: &str) {
    let s = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(s.success());
}

/// Runs a test against an agent that is stopped for 400 ms in the middle.
pub(crate) fn against_a_stall(args: &[&str]) -> Value {
    against_a_stall_of(args, Duration::from_millis(1200), Duration::from_millis(400))
}

/// Runs a 3-s test against an agent stopped (SIGSTOP) `at` into it, `stall` long.
fn against_a_stall_of(args: &[&str], at: Duration, stall: Duration) -> Value {
    let agent = Served::start(&[]);
    let pid = agent.child.id();
    let p = agent.port_arg();
    let t = std::thread::spawn(move || {
        std::thread::sleep(at);
        signal(pid, "-STOP");
        std::thread::sleep(stall);
        signal(pid, "-CONT");
    });
    let mut a = args.to_vec();
    a.extend_from_slice(&["-H", "127.0.0.1", "-p", &p, "-l", "3"]);
    let v = run_json(&a);
    t.join().unwrap();
    v
}

/// Coordinated omission: a closed loop waits out a stall with one request,
/// so its percentiles hide it; an open loop keeps sending on schedule and
/// times from the due time, so the stall reaches its p99.
#[test]
fn open_loop_shows_a_stalled_responder_in_p99() {
    let open = against_a_stall(&["tcp-rr", "--rate", "1000", "-i", "0.5"]);
    let p99 = f(&open, "/summary/latency_us/p99");
    assert!(p99 > 100_000.0, "open loop p99 {p99} us hides a 400 ms stall");
    // The interim reports say when: the stall (1.2 s to 1.6 s after the
    // client starts) is in the p99 of an interval after the first, and the
    // first is quick; each interval's count is its transactions.
    let iv = open["intervals"].as_array().unwrap();
    let p99s: Vec<f64> = iv.iter().map(|i| f(i, "/latency_us/p99")).collect();
    assert!(p99s[0] < 100_000.0, "{p99s:?}");
    assert!(p99s[1..].iter().any(|p| *p > 100_000.0), "{p99s:?}");
    for i in iv {
        check_interval_latency(&open, i);
    }
    let closed = against_a_stall(&["tcp-rr"]);
    let (p99, max) = (
        f(&closed, "/summary/latency_us/p99"),
        f(&closed, "/summary/latency_us/max"),
    );
    assert!(max > 300_000.0, "the stall is in the closed loop's max: {max}");
    assert!(
        p99 < 100_000.0,
        "closed loop p99 {p99}: expected coordinated omission to hide the stall"
    );
}

#[test]
fn rr_bad_input() {
    for (args, needle) in [
        (vec!["tcp-rr", "-r", "0,1"], "-r/--request-response"),
        (vec!["tcp-rr", "-r", "1,2,3"], "REQ,RESP"),
        (vec!["tcp-rr", "--poisson"], "--rate"),
        (vec!["tcp-rr", "--rate", "0"], "--rate"),
        (vec!["tcp-rr", "--rate", "100", "--burst", "4"], "--burst"),
        (vec!["tcp-rr", "--rate", "100", "--spin-us", "10001"], "--spin-us"),
        (
            vec!["tcp-rr", "--rate", "100", "--spin-us", "99999999999"],
            "--spin-us",
        ),
        (vec!["tcp-rr", "--rate", "100", "--spin-us=-1"], "--spin-us"),
        (vec!["tcp-rr", "--spin-us", "10"], "--rate"),
        (vec!["tcp-rr", "-n", "1M"], "unexpected argument"),
        (vec!["tcp-rr", "-T", "0"], "--workers"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// Ten thousand flows on two workers per end (neper's scale), against an
/// agent in its own process (each end then needs about 10,000 descriptors).
#[test]
fn ten_thousand_flows_on_two_workers() {
    let (hard, limit) = descriptor_hard_limit();
    if limit < 10_500 {
        crate::skip::not_here(format!(
            "the descriptor hard limit here is {hard}, under the 10,500 this test needs"
        ));
        return;
    }
    let agent = Served::start(&[]);
    let p = agent.port_arg();
    let v = run_json(&[
        "tcp-rr",
        "-H",
        "127.0.0.1",
        "-p",
        &p,
        "-l",
        "2",
        "-P",
        "10000",
        "-T",
        "2",
    ]);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 10_000);
    let idle = flows
        .iter()
        .filter(|f| f["transactions"].as_u64().unwrap() == 0)
        .count();
    assert_eq!(idle, 0, "{idle} of 10000 flows completed no transaction");
    assert_eq!(v["workers"]["local"].as_array().unwrap().len(), 2);
    check_rr(&v);
}

/// Interim reports of a request/response test count transactions: per flow
/// and in total they add up exactly to the window's, and the table shows
/// transactions per second.
#[test]
fn interim_reports_count_transactions() {
    let v = run_json(&["tcp-rr", "-l", "1.5", "-P", "2", "-i", "0.5"]);
    check_rr(&v);
    let iv = v["intervals"].as_array().unwrap();
    assert!((3..=4).contains(&iv.len()), "{} intervals", iv.len());
    for fl in v["flows"].as_array().unwrap() {
        let id = fl["id"].as_u64();
        let sum: u64 = iv
            .iter()
            .flat_map(|i| i["flows"].as_array().unwrap())
            .filter(|x| x["id"].as_u64() == id)
            .map(|x| x["transactions"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, fl["transactions"].as_u64().unwrap(), "flow {id:?}");
    }
    for i in iv {
        let n = check_interval_latency(&v, i);
        let secs = f(i, "/end_s") - f(i, "/start_s");
        assert!(
            (f(i, "/transactions_per_s") - n as f64 / secs).abs() < 1e-6 * n as f64 / secs,
            "{i}"
        );
        assert!(i["udp"].is_null());
    }
    let o = run(&["tcp-rr", "-l", "1", "-i", "0.25"]);
    let t = stdout(&o);
    assert!(
        t.contains("Trans/s") && t.contains("p99 us") && t.matches("sum ").count() >= 3,
        "{t}"
    );
    // Without -i, no period bookkeeping: the window's histogram alone.
    let v = run_json(&["tcp-rr", "-l", "0.5"]);
    assert!(v["intervals"].as_array().unwrap().is_empty());
}

/// The interim period travels as its index mod 64: past 64 intervals each
/// still gets exactly its own transactions' latencies.
#[test]
fn interval_latency_stays_exact_past_64_intervals() {
    // 6.85 s: the last interval is a whole 50 ms, never a sliver left out.
    let v = run_json(&["tcp-rr", "-l", "6.85", "-i", "0.1"]);
    let iv = v["intervals"].as_array().unwrap();
    assert!(iv.len() >= 66, "{} intervals", iv.len());
    let total: u64 = iv.iter().map(|i| check_interval_latency(&v, i)).sum();
    assert_eq!(total, u(&v, "/summary/transactions"));
}

/// The descriptor hard limit here (netrig raises its soft limit to it), as
/// `ulimit -Hn` says it and as a number (`u64::MAX` for "unlimited").
fn descriptor_hard_limit() -> (String, u64) {
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_string();
    let limit = match hard.as_str() {
        "unlimited" => u64::MAX,
        n => n.parse().unwrap_or(0),
    };
    (hard, limit)
}

/// A running process's peak resident memory (VmHWM), in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// As many tcp-rr flows as the descriptor limit lets each end hold, up to
/// 19,000 (one flow a socket per end; the agent in its own process), on two
/// workers: every flow completes transactions and client and agent together
/// peak under 200 MiB (measured: 101 MiB and 46 MiB at 19,000 flows, with
/// the client's --json document). Ignored in the suite: 19,000 flows a side
/// for 10 s on 2 cores disturb the timing of the tests beside it (and it
/// them). Run it alone:
/// `cargo test -p netrig --test it rr::flows_to -- --ignored`.
#[test]
#[ignore = "heavy: run alone with --ignored"]
fn flows_to_the_descriptor_limit_fit_in_little_memory() {
    let (hard, limit) = descriptor_hard_limit();
    // Room beside the flows' sockets for each end's own descriptors.
    let flows = limit.saturating_sub(1_000).min(19_000);
    if flows < 10_000 {
        crate::skip::not_here(format!(
            "the descriptor hard limit here is {hard}, under the 11,000 this test needs"
        ));
        return;
    }
    let n = flows.to_string();
    let agent = Served::start(&["--max-flows", &n]);
    let args = at(&agent.port_arg(), &format!("tcp-rr -l 2 -P {n} -T 2 --json"));
    let mut child = netrig()
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // The client's peak, read from /proc while it runs (every 20 ms: its
    // peak is in its last second, assembling and writing the result). Not
    // ru_maxrss from wait4: a child spawned with vfork semantics inherits
    // the peak of this test process (a few hundred MiB in the whole suite).
    let mut client_kib = 0;
    let status = loop {
        if let Some(k) = vm_hwm_kib(child.id()) {
            client_kib = client_kib.max(k);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("netrig {args:?} ran over 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap();
    let err = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
    assert!(
        status.success(),
        "netrig {args:?} failed ({status}): {}",
        err.lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
    let agent_kib = vm_hwm_kib(agent.child.id()).expect("VmHWM in the agent's /proc status");
    let v: Value = serde_json::from_slice(&out).expect("the --json document");
    let fl = v["flows"].as_array().unwrap();
    assert_eq!(fl.len() as u64, flows);
    let idle = fl
        .iter()
        .filter(|f| f["transactions"].as_u64().unwrap() == 0)
        .count();
    assert_eq!(idle, 0, "{idle} of {flows} flows completed no transaction");
    check_rr(&v);
    let (c, a) = (client_kib as f64 / 1024.0, agent_kib as f64 / 1024.0);
    eprintln!("{flows} flows: peak RSS client {c:.1} MiB, agent {a:.1} MiB");
    assert!(
        c + a < 200.0,
        "{flows} flows: client {c:.1} MiB + agent {a:.1} MiB, over 200 MiB"
    );
}

/// `--busy-wait`: both ends poll their sockets instead of sleeping, and the
/// result says so; counts are those of the sleeping path (every transaction
/// in the window, latencies for each). Under strace the client's receives
/// find nothing thousands of times (it never sleeps in them), where without
/// the option a blocking receive finds nothing only when its 10 ms timeout
/// passes (at most 50 times in 0.5 s). What it is not for is refused by name.
#[test]
fn busy_wait_polls_instead_of_sleeping_and_says_so() {
    for kind in ["tcp-rr", "udp-rr"] {
        let v = run_json(&[kind, "-l", "0.5", "--busy-wait"]);
        check_rr(&v);
        assert_eq!(v["config"]["busy_wait"], true, "{kind}");
        let n = v["summary"]["transactions"].as_u64().unwrap();
        // Two ends that never sleep share two CPUs with the other tests: on
        // a busy CI machine each transaction can wait out a time slice (CI
        // saw 62 in 0.5 s), so this asks only that transactions happened and
        // each has its latency; the rate is for bench/, not for a test.
        assert!(n >= 10, "{kind}: {n} transactions");
        assert_eq!(v["summary"]["latency_us"]["count"].as_u64(), Some(n), "{kind}");
        let t = stdout(&run(&[kind, "-l", "0.3", "--busy-wait"]));
        assert!(t.contains("both ends busy-waited (--busy-wait)"), "{t}");
    }
    let v = run_json(&["tcp-rr", "-l", "0.3"]);
    assert_eq!(v["config"]["busy_wait"], false);
    for (args, says) in [
        (
            &["tcp-rr", "--busy-wait", "--burst", "2"][..],
            "--busy-wait with --burst 2",
        ),
        (&["tcp-crr", "--busy-wait"][..], "--busy-wait with tcp-crr"),
        (
            &["tcp-rr", "--busy-wait", "-P", "4", "-T", "2"][..],
            "needs one flow per worker",
        ),
    ] {
        let o = run(&[args, &["-l", "0.3"]].concat());
        assert!(!o.status.success(), "{args:?} ran");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let o = run(&["tcp-rr", "--busy-wait", "--rate", "100", "-l", "0.3"]);
    assert!(
        !o.status.success() && stderr(&o).contains("--busy-wait"),
        "{}",
        stderr(&o)
    );

    if !strace_works() {
        crate::skip::missing(
            "the strace part: strace is missing or cannot trace here (apt-get install strace)",
        );
        return;
    }
    let empty_receives = |extra: &[&str]| -> (u64, u64) {
        let mut args = vec!["tcp-rr", "-l", "0.5", "--json"];
        args.extend_from_slice(extra);
        let (o, text) = straced("recvfrom,read", &args);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let empty = text.lines().filter(|l| l.contains("EAGAIN")).count() as u64;
        (empty, v["summary"]["transactions"].as_u64().unwrap())
    };
    let (empty, n) = empty_receives(&["--busy-wait"]);
    eprintln!("--busy-wait: {empty} empty receives for {n} transactions");
    assert!(
        empty > n,
        "--busy-wait: {empty} empty receives for {n} transactions"
    );
    let (empty, n) = empty_receives(&[]);
    eprintln!("sleeping: {empty} empty receives for {n} transactions");
    assert!(
        empty < 200,
        "sleeping: {empty} empty receives for {n} transactions"
    );
}

/// In the event loop, each end reads with TCP_INQ (engine::inq): the read
/// that takes a request or a response says whether the socket is empty after
/// it, and the reader goes back to the poll without another read to find out.
/// Under strace (both ends in the one process, the embedded agent), 4 flows
/// on one worker per end: before, each transaction cost each end a receive
/// that found nothing (EAGAIN); now almost none does, every read is a
/// recvmsg(2), and the counts are checked as every run's.
#[test]
fn event_loop_reads_know_the_socket_is_empty_without_a_read_that_finds_nothing() {
    let args = ["tcp-rr", "-l", "0.5", "-P", "4", "-T", "1", "--json"];
    let Some(Receives {
        v, empty, recvmsg, ..
    }) = straced_receives(&args)
    else {
        return;
    };
    check_rr(&v);
    let n = u(&v, "/summary/transactions");
    eprintln!("{n} transactions: {recvmsg} recvmsg(2), {empty} receives that found nothing");
    assert!(n >= 200, "{n} transactions");
    // Both ends read each transaction's bytes with recvmsg(2): a request
    // and a response (a read may take more than one when they queue up).
    assert!(recvmsg >= n, "{recvmsg} recvmsg(2) for {n} transactions");
    assert!(
        empty * 10 < n,
        "{empty} receives found nothing for {n} transactions"
    );
}

/// A one-flow udp-rr whose agent stops (SIGSTOP) for 1.2 s of a 3-s run:
/// the requester waits in recv(2) on a blocking socket with no socket
/// timeout (the engine's nudge bounds each wait), gives each request up at
/// its `--timeout` and sends the next, so the stall counts many lost
/// requests; a wait nothing interrupted would sit out the whole stall on one.
#[test]
fn a_lone_udp_requester_gives_up_each_request_at_its_timeout() {
    let v = against_a_stall_of(
        &["udp-rr", "--timeout", "0.1"],
        Duration::from_millis(800),
        Duration::from_millis(1200),
    );
    let lost = u(&v, "/summary/udp/lost_datagrams");
    // 1.2 s / (0.1 s + at most 20 ms to notice) is 10; 4 leaves room for a busy host.
    assert!(
        lost >= 4,
        "{lost} requests given up in a 1.2 s stall: {}",
        v["summary"]["udp"]
    );
}

/// Past seven eighths of the even half of `ip_local_port_range`, the
/// client's data connections let connect(2) take ports of either parity
/// (IP_LOCAL_PORT_RANGE): before them the kernel's own choice (one parity,
/// the host's bind(2) keeping the other), after them no scan of every
/// taken even port first. In a namespace whose range is 300 ports (150
/// even, so from the 133rd connection on): 200 flows, 68 asked, each once,
/// and all connect.
#[test]
fn many_flows_take_ports_of_either_parity_only_past_the_even_half() {
    if !strace_works() {
        crate::skip::missing("strace is missing or cannot trace here (apt-get install strace)");
        return;
    }
    let Some(ns) = Netns::or_skip("parity") else {
        return;
    };
    ns.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40299"])
        .unwrap();
    let log = TempDir::new("parity");
    let log_s = log.path().join("strace.txt").to_str().unwrap().to_string();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.0, "strace"]);
    // Only setsockopt(2) stops with the filter in the kernel: the witness's
    // reads of 200 sockets at each edge (TCP_INFO and the queues) run at
    // full speed, as without strace. Stopped at each, a CI run's first edge
    // came late enough to leave 15 % of the window's bytes out (8,925 for
    // 5,252 two-byte transactions).
    cmd.args(strace_filter());
    cmd.args(["-f", "-e", "trace=setsockopt", "-o", &log_s]);
    cmd.arg(env!("CARGO_BIN_EXE_netrig"));
    let o = run_cmd(cmd, &["tcp-rr", "-P", "200", "-T", "2", "-l", "0.5", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    check_rr(&v);
    assert_eq!(v["flows"].as_array().unwrap().len(), 200);
    let trace = std::fs::read_to_string(&log_s).unwrap();
    // strace names the option where it knows it, else its number (51).
    let asked = trace
        .lines()
        .filter(|l| l.contains("SOL_IP, IP_LOCAL_PORT_RANGE") || l.contains("SOL_IP, 0x33"))
        .count();
    assert_eq!(
        asked,
        200 - 132,
        "setsockopt(IP_LOCAL_PORT_RANGE) calls:\n{trace}"
    );
}
