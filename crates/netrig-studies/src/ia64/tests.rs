//! The IA64 answer on hand-built experiments: each verdict branch from the figures it rests on.

use super::*;
use netrig_experiment::fixtures;
use netrig_report::TestResult;

const RATES: &[&str] = &["500", "1000", "1500", "2000"];

/// What one run of an arm at a rate measured.
struct Run {
    replies: f64,
    p99_us: f64,
    timed_out: u64,
    cpu_pct: f64,
    /// The server host's conntrack: peak, drops (none: no conntrack figures).
    conntrack: Option<(u64, u64)>,
    sd_us: f64,
}

fn ok(rate: f64) -> Run {
    Run {
        replies: rate,
        p99_us: 2_000.0,
        timed_out: 0,
        cpu_pct: 40.0,
        conntrack: Some((0, 0)),
        sd_us: 500.0,
    }
}

fn set(run: &mut TestResult, rate: f64, r: &Run, jitter: f64) {
    let elapsed = run.summary.elapsed_s;
    run.summary.transactions_per_s = Some(r.replies * (1.0 + jitter));
    run.summary.transactions = Some((r.replies * elapsed) as u64);
    run.summary.schedule = serde_json::from_value(serde_json::json!({
        "due": (rate * elapsed) as u64, "late": 0, "max_behind_us": 0.0, "mean_behind_us": 0.0
    }))
    .expect("a schedule");
    run.summary.counts = serde_json::from_value(serde_json::json!({"connect_errors": {
        "refused": 0, "timed_out": r.timed_out, "addr_not_available": 0, "reset": 0, "other": 0
    }}))
    .expect("connection errors");
    if let Some(l) = run.summary.latency_us.as_mut() {
        l.p99 = r.p99_us * (1.0 + jitter);
    }
    let (peak, drop) = r.conntrack.unwrap_or((0, 0));
    let mut host = serde_json::json!({
        "agent": "the agent at 198.19.255.3:6387", "window_s": elapsed + 1.0, "samples": 3,
        "cpu": {"busy_pct": r.cpu_pct, "user_pct": r.cpu_pct, "nice_pct": 0.0, "system_pct": 0.0, "irq_pct": 0.0,
                "softirq_pct": 0.0, "steal_pct": 0.0, "iowait_pct": 0.0, "cpus": 2, "busiest_cpu": 0,
                "busiest_cpu_pct": r.cpu_pct, "elapsed_cpu_s": 2.0 * elapsed, "busy_cpu_s": r.cpu_pct / 50.0 * elapsed},
        "service_demand_us_per_transaction": r.sd_us * (1.0 + jitter),
        "counters": {}, "sysctls": {},
        "conntrack": {"start": 0, "end": peak, "peak": peak, "max": 262144, "drop": drop, "early_drop": 0, "insert_failed": 0},
    });
    if r.conntrack.is_none() {
        host["conntrack"] = serde_json::Value::Null;
        host["conntrack_withheld"] = "nf_conntrack is not loaded".into();
    }
    run.server_host = Some(serde_json::from_value(host).expect("a server host view"));
}

/// An http rate sweep over RATES with `arms`, each run from `measure(arm, rate)`, its
/// saturation points computed as the runner computes them.
fn experiment(arms: &[&str], measure: impl Fn(&str, f64) -> Run) -> Experiment {
    let names: Vec<String> = arms.iter().map(|s| s.to_string()).collect();
    let mut e = fixtures::experiment("tcp-crr", "--rate", RATES, arms, |p, a, r, run| {
        let rate: f64 = RATES[p].parse().unwrap();
        set(run, rate, &measure(&names[a], rate), 0.002 * r as f64);
    });
    let t = &mut e.tests[0];
    t.kind = "http".into();
    t.saturation = netrig_experiment::saturation::of_test(t);
    e
}

fn find<'a>(f: &'a [Finding], topic: &str) -> &'a Finding {
    f.iter()
        .find(|x| x.topic == topic)
        .unwrap_or_else(|| panic!("no finding {topic:?} in {f:#?}"))
}

#[test]
fn two_clients_reach_further_when_one_client_saturates_first() {
    let e = experiment(&["netrig-1c", "netrig-2c"], |arm, rate| match arm {
        "netrig-1c" if rate >= 1500.0 => Run {
            replies: 1200.0,
            ..ok(rate)
        },
        _ => ok(rate),
    });
    let (summary, f) = Ia64.answer(&e);
    let two = find(&f, "netrig: two client hosts against one");
    assert_eq!(two.verdict, "holds", "{}", two.text);
    assert!(two.text.contains("at 1500 requests/s"), "{}", two.text);
    assert!(two.text.contains("kept up to 2000/s"), "{}", two.text);
    assert_eq!(two.figures["one_client_saturation_per_s"], 1500.0);
    assert_eq!(find(&f, "netrig-1c: saturates within the sweep").verdict, "holds");
    assert_eq!(
        find(&f, "netrig-2c: saturates within the sweep").verdict,
        "does not hold"
    );
    assert!(
        summary[0].contains("netrig-1c 1500/s") && summary[0].contains("netrig-2c 2000/s+"),
        "{summary:?}"
    );
}

#[test]
fn neither_saturating_is_a_tie_that_names_the_reason() {
    let e = experiment(&["netrig-1c", "netrig-2c", "nginx-1c", "nginx-2c"], |_, rate| {
        ok(rate)
    });
    let (_, f) = Ia64.answer(&e);
    for server in ["netrig", "nginx"] {
        let two = find(&f, &format!("{server}: two client hosts against one"));
        assert_eq!(two.verdict, "tie");
        assert!(
            two.text.contains("up to 2000/s") && two.text.contains("does not reach"),
            "{}",
            two.text
        );
    }
    assert_eq!(find(&f, "netrig's server against nginx").verdict, "tie");
}

#[test]
fn two_clients_no_further_names_the_shared_cpu() {
    let e = experiment(&["netrig-1c", "netrig-2c"], |arm, rate| {
        let limit = if arm == "netrig-2c" { 900.0 } else { 1400.0 };
        if rate > limit {
            Run {
                replies: limit,
                cpu_pct: 98.0,
                ..ok(rate)
            }
        } else {
            ok(rate)
        }
    });
    let (_, f) = Ia64.answer(&e);
    let two = find(&f, "netrig: two client hosts against one");
    assert_eq!(two.verdict, "does not hold", "{}", two.text);
    assert!(
        two.text.contains("98 % busy") && two.text.contains("not the number of clients"),
        "{}",
        two.text
    );
}

#[test]
fn a_full_conntrack_table_shows_in_the_servers_counters_and_the_clients_failures() {
    let e = experiment(&["netrig-1c", "ct-full"], |arm, rate| match arm {
        "ct-full" if rate >= 1000.0 => Run {
            replies: 300.0,
            timed_out: 900,
            p99_us: 1_900_000.0,
            conntrack: Some((262_144, 4_000)),
            ..ok(rate)
        },
        "ct-full" => Run {
            conntrack: Some((261_900, 0)),
            ..ok(rate)
        },
        _ => ok(rate),
    });
    let (summary, f) = Ia64.answer(&e);
    let ct = find(&f, "conntrack full");
    assert_eq!(ct.verdict, "holds", "{}", ct.text);
    assert_eq!(ct.figures["saturation_per_s"], 1000.0);
    assert_eq!(ct.figures["conntrack_peak"], 262_144.0);
    assert_eq!(ct.figures["conntrack_drop"], 12_000.0, "every run's drops added");
    assert_eq!(ct.figures["connections_failed"], 2_700.0);
    assert!(ct.text.contains("held 262144 entries of 262144"), "{}", ct.text);
    assert!(
        ct.text.contains("Without tracking the same server kept up"),
        "{}",
        ct.text
    );
    assert!(summary.iter().any(|s| s == &ct.text));
}

/// A busy machine's p99 may mark the baseline saturated at the same rate: the table's collapse
/// still shows in replies far below the baseline's there.
#[test]
fn conntrack_full_holds_beside_a_baseline_saturated_by_its_p99_at_the_same_rate() {
    let e = experiment(&["netrig-1c", "ct-full"], |arm, rate| {
        match (arm, rate >= 1000.0) {
            ("ct-full", true) => Run {
                replies: 500.0,
                conntrack: Some((262_144, 2_000)),
                ..ok(rate)
            },
            ("netrig-1c", true) => Run {
                p99_us: 60_000.0,
                ..ok(rate)
            },
            _ => ok(rate),
        }
    });
    let (_, f) = Ia64.answer(&e);
    let ct = find(&f, "conntrack full");
    assert_eq!(ct.verdict, "holds", "{}", ct.text);
    assert!(ct.text.contains("at 1000/s it answered 100"), "{}", ct.text);
    // The same replies as the baseline at the same rate: not the table's doing.
    let e = experiment(&["netrig-1c", "ct-full"], |arm, rate| {
        match (arm, rate >= 1000.0) {
            ("ct-full", true) => Run {
                p99_us: 60_000.0,
                conntrack: Some((262_144, 20)),
                ..ok(rate)
            },
            ("netrig-1c", true) => Run {
                p99_us: 60_000.0,
                ..ok(rate)
            },
            _ => ok(rate),
        }
    });
    let (_, f) = Ia64.answer(&e);
    assert_eq!(find(&f, "conntrack full").verdict, "does not hold");
}

#[test]
fn conntrack_full_without_the_hosts_figures_is_withheld_and_without_a_collapse_does_not_hold() {
    let e = experiment(&["netrig-1c", "ct-full"], |arm, rate| match arm {
        "ct-full" if rate >= 1000.0 => Run {
            replies: 300.0,
            conntrack: None,
            ..ok(rate)
        },
        _ => ok(rate),
    });
    let (_, f) = Ia64.answer(&e);
    assert_eq!(find(&f, "conntrack full").verdict, "withheld");
    let e = experiment(&["netrig-1c", "ct-full"], |_, rate| ok(rate));
    let (_, f) = Ia64.answer(&e);
    let ct = find(&f, "conntrack full");
    assert_eq!(ct.verdict, "does not hold");
    assert!(ct.text.contains("did not limit it"), "{}", ct.text);
}

#[test]
fn tracking_costs_cpu_per_request_with_its_interval_and_loopback_saves_it() {
    let e = experiment(&["netrig-1c", "ct-on", "loopback"], |arm, rate| Run {
        sd_us: match arm {
            "ct-on" => 600.0,
            "loopback" => 300.0,
            _ => 500.0,
        },
        ..ok(rate)
    });
    let (_, f) = Ia64.answer(&e);
    let ct = find(&f, "conntrack on");
    assert_eq!(ct.verdict, "holds", "{}", ct.text);
    assert!(
        ct.text.starts_with("Tracking every connection changed") && ct.text.contains("+20.0 %"),
        "{}",
        ct.text
    );
    assert!(ct.text.contains("a rise"), "{}", ct.text);
    assert!(ct.text.contains("at 2000 requests/s"), "{}", ct.text);
    let lo = find(&f, "the link costs more CPU per request than loopback");
    assert_eq!(lo.verdict, "holds", "{}", lo.text);
    assert!(
        lo.text.contains("a fall") && lo.text.contains("-40.0 %"),
        "{}",
        lo.text
    );
    // The same CPU: a tie, with the interval.
    let e = experiment(&["netrig-1c", "ct-on"], |_, rate| ok(rate));
    let (_, f) = Ia64.answer(&e);
    let ct = find(&f, "conntrack on");
    assert_eq!(ct.verdict, "tie", "{}", ct.text);
    assert!(ct.text.contains('%'), "{}", ct.text);
}

#[test]
fn without_a_rate_sweep_the_answer_is_withheld() {
    let e = fixtures::experiment("tcp-crr", "-l", &["1", "2"], &["netrig-1c"], |_, _, _, _| {});
    let (summary, f) = Ia64.answer(&e);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].verdict, "withheld");
    assert!(summary[0].contains("no http test sweeping --rate"));
}

/// A p99 tenfold the lightest load's while every request is still answered is stated, not
/// taken for the stack's limit (on a machine shared with other work it is the others' noise).
#[test]
fn a_p99_rise_alone_is_stated_beside_replies_that_still_follow() {
    let e = experiment(&["netrig-1c", "netrig-2c"], |arm, rate| match arm {
        "netrig-1c" if rate >= 1500.0 => Run {
            p99_us: 80_000.0,
            ..ok(rate)
        },
        _ => ok(rate),
    });
    assert!(!e.tests[0].saturation.is_empty(), "the rule marks it");
    let (_, f) = Ia64.answer(&e);
    let one = find(&f, "netrig-1c: saturates within the sweep");
    assert_eq!(one.verdict, "does not hold", "{}", one.text);
    assert!(
        one.text
            .contains("p99 rose tenfold over the lightest load's from 1500/s"),
        "{}",
        one.text
    );
    assert_eq!(find(&f, "netrig: two client hosts against one").verdict, "tie");
}

/// Sets, on every run of `arm`, the server host's counters and its SYN_RECV and FIN_WAIT2 peaks.
fn server_view(e: &mut Experiment, arm_name: &str, counters: &[(&str, i64)], syn_recv: u64, fin_wait2: u64) {
    for p in &mut e.tests[0].points {
        for a in p.arms.iter_mut().filter(|a| a.arm == arm_name) {
            for r in &mut a.runs {
                let h = r.server_host.as_mut().expect("a server host view");
                h.counters = counters.iter().map(|(k, v)| (k.to_string(), *v)).collect();
                let pe = |n: u64| serde_json::json!({"peak": n, "end": 0});
                h.sockets = Some(
                    serde_json::from_value(serde_json::json!({
                        "established": pe(10), "syn_recv": pe(syn_recv), "time_wait": pe(0),
                        "close_wait": pe(0), "fin_wait2": pe(fin_wait2), "partial": false
                    }))
                    .expect("socket states"),
                );
            }
        }
    }
}

const FLOOD: &str = "a SYN flood shows in the server's counters and the client's figures";

#[test]
fn a_syn_flood_that_shows_in_the_counters_and_the_replies_holds() {
    let mut e = experiment(&["netrig-1c", "syn-flood"], |arm, rate| match arm {
        "syn-flood" if rate >= 1000.0 => Run {
            replies: 0.5 * rate,
            p99_us: 80_000.0,
            ..ok(rate)
        },
        _ => ok(rate),
    });
    server_view(
        &mut e,
        "syn-flood",
        &[("TcpExt.SyncookiesSent", 5000), ("TcpExt.ListenOverflows", 0)],
        4097,
        0,
    );
    let (_, f) = Ia64.answer(&e);
    let x = find(&f, FLOOD);
    assert_eq!(x.verdict, "holds", "{}", x.text);
    // 4 rates x 3 runs, 5000 cookies each.
    assert_eq!(x.figures["syncookies_sent"], 60_000.0);
    assert_eq!(x.figures["syn_recv_peak"], 4097.0);
    assert_eq!(x.figures["saturation_per_s"], 1000.0);
    assert!(
        x.text.contains("60000 SYN cookies") && x.text.contains("up to 4097 sockets in SYN_RECV"),
        "{}",
        x.text
    );
}

#[test]
fn a_flood_the_server_absorbs_does_not_hold_and_says_the_client_was_unharmed() {
    let mut e = experiment(&["netrig-1c", "syn-flood"], |_, rate| ok(rate));
    server_view(&mut e, "syn-flood", &[("TcpExt.SyncookiesSent", 300)], 4097, 0);
    let (_, f) = Ia64.answer(&e);
    let x = find(&f, FLOOD);
    assert_eq!(x.verdict, "does not hold", "{}", x.text);
    assert!(x.text.contains("stayed within 10 %"), "{}", x.text);
    // A flood without the server host's view is withheld.
    let mut e = experiment(&["netrig-1c", "syn-flood"], |_, rate| ok(rate));
    for p in &mut e.tests[0].points {
        for a in &mut p.arms {
            for r in &mut a.runs {
                r.server_host = None;
            }
        }
    }
    let (_, f) = Ia64.answer(&e);
    assert_eq!(find(&f, FLOOD).verdict, "withheld");
}

#[test]
fn half_closed_connections_are_counted_and_their_closing_time_read_from_the_tear_down() {
    let topic = "half-closed connections: the server's FIN_WAIT2 and the time to close them";
    let mut e = experiment(&["netrig-1c", "half-closed"], |_, rate| ok(rate));
    server_view(&mut e, "half-closed", &[], 0, 998);
    let (_, f) = Ia64.answer(&e);
    let x = find(&f, topic);
    assert_eq!(x.verdict, "holds", "{}", x.text);
    assert!(
        x.text.contains("withheld: no tear-down reported it"),
        "{}",
        x.text
    );
    for (i, g) in ["8.4", "8.1", "9.0"].iter().enumerate() {
        e.commands.push(netrig_experiment::command::CommandRun {
            phase: "teardown".into(),
            arm: "half-closed".into(),
            command: "./ia64-overload.sh half-close-stop".into(),
            status: Some(0),
            seconds: 8.0 + i as f64,
            output: format!("\"gone_after_s\": {g}\n\"left_at_end\": 0\n"),
            error: None,
            host: Some("s1".into()),
        });
    }
    let (_, f) = Ia64.answer(&e);
    let x = find(&f, topic);
    assert_eq!(x.figures["fin_wait2_peak"], 998.0);
    assert_eq!(x.figures["gone_after_s_median"], 8.4);
    assert!(
        x.text
            .contains("closed them 8.4 s after the clients went (median of 3 runs"),
        "{}",
        x.text
    );
}
