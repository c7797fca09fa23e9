//! One-way delay for tcp-rr (issue #38, "One-way delay"): requests and responses of at least
//! 8 bytes carry their send time in their first 8 bytes, so each direction's one-way delay is
//! reported as for udp-rr; smaller messages carry none and it is withheld, naming the sizes.

use crate::helpers::{run, stderr, stdout, validate, TempDir};
use serde_json::Value;
use std::process::Command;

fn owd(v: &Value) -> &Value {
    &v["summary"]["one_way_delay"]
}

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    let v: Value = serde_json::from_str(&stdout(o)).expect("a result");
    validate(&v);
    v
}

/// One direction's median, its figures present, ordered and positive, over many messages.
fn p50(v: &Value, dir: &str) -> f64 {
    let d = &owd(v)[dir];
    assert!(d["withheld"].is_null(), "{dir}: {d}");
    let g = |k: &str| d[k].as_f64().unwrap_or_else(|| panic!("{dir}.{k}: {d}"));
    let (min, p50, p99, max) = (g("min_us"), g("p50_us"), g("p99_us"), g("max_us"));
    assert!(0.0 < min && min <= p50 && p50 <= p99 && p99 <= max, "{dir}: {d}");
    assert!(d["datagrams"].as_u64().unwrap() > 100, "{dir}: {d}");
    p50
}

/// Loopback, 64-byte requests and responses: both directions are there and add up to the round
/// trip (25 % + 3 µs, as udp-rr's), on the lone connection's path (one flow, one in flight)
/// and on the event loop's (two in flight, so reads and writes carry several messages; two
/// connections on one worker, sharing its request buffer). Medians add up only roughly, and a
/// busy host's descheduled agent adds its turnaround to the round trip alone (11 + 30 µs
/// against 60 was seen at 13 % steal, --burst 2): a case that misses is run once more.
#[test]
fn tcp_rr_of_64_bytes_reports_both_directions_and_they_add_up_to_the_round_trip() {
    for extra in [&[][..], &["--burst", "2"][..], &["-P", "2", "-T", "1"][..]] {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let mut a = vec!["tcp-rr", "-l", "1", "-r", "64", "--json"];
            a.extend(extra);
            let v = json(&run(&a));
            let o = owd(&v);
            assert!(o["withheld"].is_null(), "{extra:?}: {o}");
            assert_eq!(o["clock_offset_bound_us"].as_f64(), Some(0.0), "{o}");
            let (tx, rx) = (p50(&v, "tx"), p50(&v, "rx"));
            let rtt = v["summary"]["latency_us"]["p50"].as_f64().unwrap();
            let adds_up = (tx + rx - rtt).abs() <= 0.25 * rtt + 3.0;
            seen.push((
                adds_up,
                format!("one way {tx} + {rx} µs against the round trip's {rtt} µs: {o}"),
            ));
            if adds_up {
                break;
            }
        }
        assert!(seen.iter().any(|(ok, _)| *ok), "{extra:?}: {seen:#?}");
    }
    let text = stdout(&run(&["tcp-rr", "-l", "0.5", "-r", "64,100"]));
    assert!(
        text.contains("one-way delay client -> agent: min ")
            && text.contains("one-way delay agent -> client: min "),
        "{text}"
    );
}

/// tcp-rr's default 1-byte messages carry no stamp: withheld, naming the sizes and how to get it;
/// 64-byte requests with 1-byte responses: the requests' direction only. tcp-crr: withheld.
#[test]
fn tcp_rr_one_way_delay_is_withheld_for_messages_under_8_bytes_naming_the_sizes() {
    let v = json(&run(&["tcp-rr", "-l", "0.3", "--json"]));
    let o = owd(&v);
    let why = o["withheld"].as_str().unwrap_or_else(|| panic!("{o}"));
    assert!(
        why.contains("smaller than 8 bytes carry no time stamp")
            && why.contains("requests of 1 B, responses of 1 B")
            && why.contains("-r "),
        "{o}"
    );
    assert!(o["tx"].is_null() && o["rx"].is_null(), "{o}");
    let v = json(&run(&["tcp-rr", "-l", "0.5", "-r", "64,1", "--json"]));
    p50(&v, "tx");
    let rx = owd(&v)["rx"]["withheld"].as_str().unwrap_or_default().to_string();
    assert!(rx.contains("responses of 1 B"), "{}", owd(&v));
    let v = json(&run(&["tcp-crr", "-l", "0.3", "--json"]));
    let why = owd(&v)["withheld"].as_str().unwrap_or_default().to_string();
    assert!(why.contains("tcp-crr does not stamp"), "{}", owd(&v));
}

/// Removes the lab named at the end, whatever happens.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_netrig"))
            .args(["lab", "down", &self.0])
            .output();
    }
}

/// Through a lab link whose direction a → b netrig's path element delays by 10 ms: tcp-rr's
/// requests read 10 ms within 1 ms + 5 %, its responses under 1 ms (two namespaces, one kernel).
#[test]
fn tcp_rr_through_a_lab_link_delayed_one_way_reads_the_delay_in_the_requests_direction() {
    if !crate::lab_common::can_build(&["ip"]) {
        return;
    }
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-tcprr");
    let file = dir.path().join("owd.toml");
    std::fs::write(
        &file,
        "[lab.hosts.a]\n[lab.hosts.b]\n[[lab.links]]\nends = [\"a\", \"b\"]\n[lab.links.shape.a]\nelement = true\ndelay = \"10ms\"\n",
    )
    .unwrap();
    let name = format!("it-tcprr-{}", std::process::id());
    let down = Down(name.clone());
    let up = run(&[
        "lab",
        "up",
        &file.display().to_string(),
        "--name",
        &name,
        "--no-witness",
    ]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let v = json(&run(&[
        "lab",
        "exec",
        &name,
        "a",
        "--",
        "netrig",
        "tcp-rr",
        "-H",
        "198.18.0.2",
        "-r",
        "64",
        "-l",
        "3",
        "--omit",
        "0.5",
        "--json",
    ]));
    let (tx, rx) = (p50(&v, "tx"), p50(&v, "rx"));
    assert!(
        (tx - 10_000.0).abs() <= 1_000.0 + 500.0,
        "requests, delayed 10 ms: {}",
        owd(&v)
    );
    assert!(rx < 1_000.0, "responses, not delayed: {}", owd(&v));
    drop(down);
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains(&name),
        "{name} left behind"
    );
}
