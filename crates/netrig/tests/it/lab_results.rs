//! Issue #38, the lab in the results: the witness's delay check and loss probe, the path
//! element's counters in each run's result, the topology drawn in the HTML report, and arms that
//! change a link's shaping by name (docs/LAB.md).
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail.

use crate::helpers::{run, stderr, stdout, TempDir};
use serde_json::Value;

// One lab test at a time, across all the lab test files (crate::lab_common).
use crate::lab_common::LAB_TESTS as ONE_AT_A_TIME;

fn can_build() -> bool {
    crate::lab_common::can_build(&["ip", "nft"])
}

/// Removes a lab by name on drop (a failed assertion leaves nothing behind).
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = run(&["lab", "down", &self.0]);
    }
}

fn netns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

/// The lab a document recorded is gone: its namespaces and its state file.
fn gone(lab: &Value) {
    for ns in lab["namespaces"].as_array().unwrap() {
        assert!(!netns_exists(ns.as_str().unwrap()), "{ns} is left");
    }
    let id = lab["id"].as_str().unwrap();
    assert!(!std::path::Path::new(&format!("/run/netrig/labs/{id}.json")).exists());
}

/// a — b through netrig's path element, each way delayed; what a sends also lost.
const DELAY_AND_LOSS: &str = r#"
[lab.hosts.a]
[lab.hosts.b]
[[lab.links]]
ends = ["a", "b"]
[lab.links.shape.a]
element = true
delay = "5ms"
loss = 10.0
[lab.links.shape.b]
element = true
delay = "5ms"
"#;

/// The witness compares the round trip with the configured delays (5 ms each way: 10 ms) and
/// measures the configured loss with a UDP probe: configured beside measured in the state file
/// and in `lab status`, within their bounds, no warning.
#[test]
fn the_witness_measures_delay_and_loss_beside_what_is_configured() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labres-witness");
    let file = tmp.path().join("dl.toml");
    std::fs::write(&file, DELAY_AND_LOSS).unwrap();
    let name = format!("it-reswit-{}", std::process::id());
    let _down = Down(name.clone());
    let up = run(&["lab", "up", file.to_str().unwrap(), "--name", &name]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let o = run(&["lab", "status", &name, "--json"]);
    let s: Value = serde_json::from_str(&stdout(&o)).expect("status --json");
    let w = s[0]["witness"].as_array().expect("witness rows").clone();
    let ab = w.iter().find(|r| r["from"] == "a").expect("a → b");
    let ba = w.iter().find(|r| r["from"] == "b").expect("b → a");
    for r in [ab, ba] {
        assert_eq!(r["configured_rtt_us"].as_f64(), Some(10_000.0), "{r}");
        // The round trip crosses the lossy direction either way: udp-rr times it (tcp-rr's
        // median was a retransmission timeout in 2 of 4 runs, 228 ms).
        let by = r["rtt_by"].as_str().expect("how the round trip was measured");
        assert!(
            by.starts_with("udp-rr median") && by.contains("--timeout 0.25 s"),
            "{r}"
        );
        let rtt = r["rtt_p50_us"]
            .as_f64()
            .unwrap_or_else(|| panic!("a round trip: {r}"));
        // The witness's own tolerance (10 % + 1 ms): a busy 2-core machine's wake-ups add up
        // to about 2 ms to the element's 10 (11.9 ms seen while six builds ran).
        assert!((rtt - 10_000.0).abs() <= 2_000.0, "round trip {rtt} µs: {r}");
    }
    assert_eq!(ab["configured_loss_pct"].as_f64(), Some(10.0), "{ab}");
    let p = &ab["loss_probe"];
    let sent = p["sent"].as_f64().expect("the probe's count");
    assert!(sent >= 2000.0, "{p}");
    let m = p["measured_pct"].as_f64().unwrap();
    let (lo, hi) = (
        p["bound_low_pct"].as_f64().unwrap(),
        p["bound_high_pct"].as_f64().unwrap(),
    );
    assert!(lo < 10.0 && 10.0 < hi && lo <= m && m <= hi, "{p}");
    // The path's share: what the receiving host dropped itself is left out, and counted.
    let host = p["receiver_dropped"]
        .as_f64()
        .expect("the receiving host's drops read");
    let lost = p["lost"].as_f64().unwrap();
    assert!((m - 100.0 * (lost - host) / sent).abs() < 1e-6, "{p}");
    assert!(ba["loss_probe"].is_null(), "no loss configured b → a: {ba}");
    assert!(ab["warning"].is_null() && ba["warning"].is_null(), "{ab}\n{ba}");
    let text = stdout(&run(&["lab", "status", &name]));
    assert!(
        text.contains("against 10.00 ms the configured delays make"),
        "{text}"
    );
    assert!(text.contains("loss 10 % configured"), "{text}");
    assert!(run(&["lab", "down", &name]).status.success());
}

/// A plan through a lossy element: every run's result carries the element's counters over that
/// run (the window: the counter files' timestamps), its udp-stream loss is what the element
/// dropped (within the data hellos), the table prints them, and the HTML report draws the lab:
/// both hosts, the link, each direction's configured properties, mechanism and measured figures.
#[test]
fn each_runs_result_carries_the_elements_counters_and_the_report_draws_the_lab() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labres-elem");
    let plan = tmp.path().join("elem.toml");
    std::fs::write(
        &plan,
        r#"
name = "elem"
[target]
client = "a"
server = "b"
[iterations]
max = 2
min = 2
[[test]]
kind = "udp-stream"
args = ["-l", "2", "-b", "10M", "--no-gso"]
[lab.hosts.a]
[lab.hosts.b]
[[lab.links]]
ends = ["a", "b"]
[lab.links.shape.a]
element = true
rate = "100M"
delay = "2ms"
loss = 10.0
"#,
    )
    .unwrap();
    let html = tmp.path().join("elem.html");
    let saved = tmp.path().join("saved");
    let o = run(&[
        "run",
        plan.to_str().unwrap(),
        "--json",
        "--html",
        html.to_str().unwrap(),
        "--save",
        saved.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&v);
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let runs = v["tests"][0]["points"][0]["arms"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        let els = r["path_elements"]
            .as_array()
            .expect("the element's counters in the run");
        let ab = els.iter().find(|e| e["from"] == "a").expect("a → b");
        assert_eq!(ab["link"], "a-b", "{ab}");
        let (t0, t1) = (
            ab["window_start_unix_s"].as_f64().unwrap(),
            ab["window_end_unix_s"].as_f64().unwrap(),
        );
        assert!(t1 - t0 >= 1.0 && t1 - t0 < 30.0, "the window {t0}..{t1}: {ab}");
        let u = &r["summary"]["udp"];
        let sent = u["sent_datagrams"].as_u64().unwrap();
        let lost = u["lost_datagrams"].as_u64().unwrap();
        assert!(sent > 1000, "{u}");
        let received = ab["udp"]["received"].as_u64().unwrap();
        let dropped = ab["udp"]["dropped"].as_u64().unwrap();
        // The frames the element saw beyond the data datagrams (data hellos) bound the difference.
        let extra = received.saturating_sub(sent);
        assert!(extra <= 20, "{extra} frames beyond the data: {u} {ab}");
        // What the receiver's kernel dropped (its socket full: a busy machine stalls the receiver)
        // is lost after the element, counted by the server host's own counters over the test.
        let rcvbuf = r["counters"]["remote"]["deltas"]["Udp.RcvbufErrors"]
            .as_u64()
            .unwrap_or(0);
        let by_path = lost.saturating_sub(rcvbuf);
        assert!(
            by_path <= dropped + extra && dropped <= by_path + extra,
            "lost {lost} ({rcvbuf} of them in the receiver's socket) against the element's dropped {dropped} (+{extra}): {u} {ab}"
        );
        // And the element's drops are the configured 10 %, within 4 binomial sigmas.
        let n = received as f64;
        let sd = (n * 0.1 * 0.9).sqrt();
        assert!((dropped as f64 - 0.1 * n).abs() < 4.0 * sd + 3.0, "{ab}");
    }
    // The saved experiment reads back (the new fields included) and its report is the same.
    let file = std::fs::read_dir(&saved)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("the saved experiment");
    let again = tmp.path().join("again.html");
    let r = run(&["report", file.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert!(r.status.success(), "netrig report: {}", stderr(&r));
    let page = std::fs::read_to_string(&html).expect("the report");
    let diagram = |p: &str| {
        p.split("<svg class=\"lab\"")
            .nth(1)
            .map(|s| s.split("</svg>").next().unwrap().to_string())
    };
    assert_eq!(
        diagram(&std::fs::read_to_string(&again).unwrap()),
        diagram(&page),
        "the saved experiment's report draws the same lab"
    );
    let svg = page
        .split("<svg class=\"lab\"")
        .nth(1)
        .and_then(|s| s.split("</svg>").next())
        .unwrap_or_else(|| panic!("no lab diagram in the report"));
    for want in [
        ">a<",
        ">b<",
        "a-b",
        "a → b",
        "rate 100 Mbit/s",
        "delay 2 ms",
        "loss 10 %",
        "netrig element",
        "measured",
    ] {
        assert!(svg.contains(want), "{want:?} not in the diagram:\n{svg}");
    }
    // The table's element line, as the text table prints it.
    assert!(
        page.contains("path element a → b on a-b"),
        "no element line in the report's table"
    );
    gone(&v["lab"]);
}

/// Two arms set the link's rate by name, 50 and 20 Mbit/s: each arm's runs are within 5 % of
/// what its rate carries, the arm's lab section records the change, and the link is put back.
#[test]
fn arms_change_a_links_rate_by_name() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labres-shape");
    let plan = tmp.path().join("shape.toml");
    std::fs::write(
        &plan,
        r#"
name = "shape"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-stream"
args = ["-l", "2"]
[[arm]]
name = "20M"
[arm.shape."c1-s1".c1]
rate = "20M"
[[arm]]
name = "50M"
[arm.shape."c1-s1".c1]
rate = "50M"
[[arm]]
name = "as-built"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "s1"]
[lab.links.shape.c1]
rate = "80M"
limit_packets = 100
"#,
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&v);
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let arms = v["tests"][0]["points"][0]["arms"].as_array().unwrap();
    // What each rate carries as TCP payload at MTU 1500 (timestamps): rate × 1448 / 1514.
    for (arm, rate) in [(&arms[0], 20e6), (&arms[1], 50e6), (&arms[2], 80e6)] {
        let got = arm["runs"][0]["summary"]["throughput_bps"].as_f64().unwrap();
        let ceiling = rate * 1448.0 / 1514.0;
        assert!(
            (got / ceiling - 1.0).abs() < 0.05,
            "arm {}: {:.2} Mbit/s against {:.2}",
            arm["arm"],
            got / 1e6,
            ceiling / 1e6
        );
    }
    let shape = &arms[0]["lab"]["shape"][0];
    assert_eq!(shape["link"], "c1-s1", "{}", arms[0]["lab"]);
    assert_eq!(shape["from"], "c1");
    assert_eq!(shape["rate_bps"], 20_000_000);
    assert!(arms[2]["lab"]["shape"].is_null(), "{}", arms[2]["lab"]);
    let phases: Vec<&str> = v["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["phase"].as_str().unwrap())
        .collect();
    assert!(
        phases.contains(&"shape") && phases.contains(&"unshape"),
        "{phases:?}"
    );
    gone(&v["lab"]);
}
