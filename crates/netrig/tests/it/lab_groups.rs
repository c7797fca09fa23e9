//! Issue #38, groups: tests started together in a plan (`[[group]]`), each reported whole, their
//! interval samples on the group's one clock, and a request/response probe's responsiveness
//! idle and under load (docs/EXPERIMENTS.md, "Groups"). Bufferbloat shown: a probe through a
//! 100 Mbit/s bottleneck with a deep queue, alone and then beside a bulk transfer.
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail.

use crate::helpers::{run, stderr, TempDir};
use serde_json::Value;
use std::process::Command;

// One lab test at a time, across all the lab test files (crate::lab_common).
use crate::lab_common::LAB_TESTS as ONE_AT_A_TIME;

fn can_build() -> bool {
    crate::lab_common::can_build(&["ip", "tc"])
}

fn netns_list() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The bottleneck: r1's egress towards s1, 100 Mbit/s with a byte queue of 1000 full frames.
/// (On the router, not on c1: a sender's own qdisc never fills, its TCP Small Queues keep about
/// two TSO frames there; and in bytes, not packets: a GSO frame of up to 64 KiB is one packet.)
const RATE_BPS: f64 = 100e6;
const LIMIT_BYTES: f64 = 1_514_000.0;

const BOTTLENECK: &str = r#"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.r1]
router = true
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "r1"]
[[lab.links]]
ends = ["r1", "s1"]
[lab.links.shape.r1]
rate = "100M"
limit_bytes = 1514000
"#;

fn member<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member"] == name)
        .unwrap_or_else(|| panic!("no member {name}: {run}"))
}

/// Bufferbloat on one time axis: a tcp-rr probe starts alone, a bulk tcp-stream (8 Cubic flows)
/// joins 2 s later through the same 100 Mbit/s bottleneck. The probe's round trip while the
/// bulk runs exceeds its idle round trip by most of the queue's delay (1,514,000 bytes at
/// 100 Mbit/s: 121 ms; at least 75 % of it, as TCP backs off after each loss), the document has
/// both series with timestamps on the group's clock (the bulk's starting where it measurably
/// started, after 2 s), and the lab is gone afterwards.
///
/// One flow does not keep this queue full: one Cubic flow sat at 69–108 ms here, one BBR flow
/// (this host's default) at about 10 ms; 4 Cubic flows (flent's RRUL, plans/rrul-lab.toml) at
/// 103–128 ms over five runs, 8 at 110–118 ms: the test takes 8.
#[test]
fn a_probe_beside_a_bulk_transfer_shows_the_bottlenecks_queue_on_one_time_axis() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labgroups");
    let name = format!("bloat-groups-{}", std::process::id());
    let plan = tmp.path().join(format!("{name}.toml"));
    std::fs::write(
        &plan,
        format!(
            r#"name = "{name}"
[[group]]
name = "rrul"
interval = 0.25
[[group.test]]
name = "probe"
kind = "tcp-rr"
args = ["-l", "7"]
client = "c1"
server = "s1"
[[group.test]]
name = "bulk"
kind = "tcp-stream"
args = ["-l", "4", "-P", "8", "--cc", "cubic"]
start = "2s"
client = "c1"
server = "s1"
{BOTTLENECK}"#
        ),
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&doc);
    let lab = &doc["lab"];
    let g = &doc["groups"][0];
    let r = &g["arms"][0]["runs"][0];
    let (probe, bulk) = (member(r, "probe"), member(r, "bulk"));

    // Each member's whole result, and where it ran.
    assert_eq!(probe["result"]["test"], "tcp-rr");
    assert_eq!(bulk["result"]["test"], "tcp-stream");
    assert_eq!(bulk["lab"]["client"], "c1");
    let mbit = bulk["result"]["summary"]["throughput_bps"].as_f64().unwrap() / 1e6;
    assert!(
        (85.0..=100.0).contains(&mbit),
        "the bulk fills the link: {mbit} Mbit/s"
    );

    // Measured time zeros on the group's clock: the bulk no earlier than asked.
    let (po, bo) = (
        probe["offset_s"].as_f64().unwrap(),
        bulk["offset_s"].as_f64().unwrap(),
    );
    assert!((0.0..1.0).contains(&po), "probe at {po}");
    assert!((2.0..3.5).contains(&bo), "bulk asked at 2 s, started at {bo}");
    let t0 = r["started_unix_s"].as_f64().unwrap();
    let zero = bulk["result"]["started_unix_s"].as_f64().unwrap();
    assert!(
        (zero - t0 - bo).abs() < 1e-6,
        "offset = its result's time zero - the group's"
    );

    // Both series on the one axis: the probe's from about 0, the bulk's from its start.
    let series = |m: &Value| -> Vec<(f64, f64, Value)> {
        m["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["start_s"].as_f64().unwrap(),
                    p["end_s"].as_f64().unwrap(),
                    p.clone(),
                )
            })
            .collect()
    };
    let (ps, bs) = (series(probe), series(bulk));
    assert!(
        ps.len() >= 20 && bs.len() >= 12,
        "{} and {} samples",
        ps.len(),
        bs.len()
    );
    assert!(ps[0].0 < 1.0 && bs[0].0 >= 2.0, "{:?} {:?}", ps[0].0, bs[0].0);
    assert!(
        ps.last().unwrap().1 > bs.last().unwrap().1,
        "the probe outlasts the bulk"
    );
    // The probe's samples inside the bulk's span are slow, those before it fast.
    let (from, to) = (bs[0].0, bs.last().unwrap().1);
    let mean = |s: &[&(f64, f64, Value)]| {
        let v: Vec<f64> = s.iter().filter_map(|p| p.2["latency_mean_us"].as_f64()).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let before: Vec<_> = ps.iter().filter(|p| p.1 <= from).collect();
    let during: Vec<_> = ps.iter().filter(|p| p.0 >= from + 1.0 && p.1 <= to).collect();
    assert!(
        before.len() >= 4 && during.len() >= 4,
        "{} {}",
        before.len(),
        during.len()
    );

    // Bufferbloat: the working round trip exceeds the idle one by most of the queue's delay.
    let queue_ms = LIMIT_BYTES * 8.0 / RATE_BPS * 1e3;
    let resp = &r["responsiveness"][0];
    assert_eq!(resp["member"], "probe");
    let idle = resp["idle"]["mean_rtt_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("{resp}"))
        / 1e3;
    let working = resp["working"]["mean_rtt_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("{resp}"))
        / 1e3;
    eprintln!(
        "probe: idle {idle:.3} ms ({} RPM), under load {working:.1} ms ({} RPM); the queue {queue_ms:.1} ms; \
         series means before {:.3} ms, during {:.1} ms; bulk {mbit:.1} Mbit/s",
        resp["idle"]["rpm"], resp["working"]["rpm"], mean(&before) / 1e3, mean(&during) / 1e3
    );
    assert!(
        working - idle >= 0.75 * queue_ms,
        "under load {working:.1} ms, idle {idle:.3} ms: not {:.1} ms more",
        0.75 * queue_ms
    );
    // A probe's request the full queue drops waits out TCP's retransmission timeout (200 ms and
    // more), so the mean may exceed the queue's delay; the median of the intervals' medians not.
    let median = resp["working"]["median_interval_p50_us"].as_f64().unwrap() / 1e3;
    assert!(
        median <= 1.3 * queue_ms,
        "more than the queue can hold: median {median:.1} ms"
    );
    assert!(idle < 5.0, "idle {idle} ms through an empty queue");
    assert!(mean(&during) - mean(&before) >= 0.75 * queue_ms * 1e3 * 0.9);
    let rpm = |w: &str| resp[w]["rpm"].as_f64().unwrap();
    assert!((rpm("working") - 60e3 / working).abs() < 1.0);
    assert!(rpm("idle") > 20.0 * rpm("working"));
    // The windows are stated, on the group's clock: idle before the bulk, working inside it.
    assert!(resp["idle"]["end_s"].as_f64().unwrap() <= bo + 1e-9);
    assert!(resp["working"]["start_s"].as_f64().unwrap() >= bo - 1e-9);

    // Gone afterwards.
    let id = lab["id"].as_str().unwrap();
    assert!(!netns_list().contains(&format!("nr{id}")), "{}", netns_list());
}

/// Without a lab the group runs against the in-process agent on loopback; a member that fails
/// stops the others and the plan, saying which.
#[test]
fn a_group_runs_on_loopback_and_a_failed_member_stops_it() {
    let tmp = TempDir::new("groups-lo");
    let plan = tmp.path().join("lo.toml");
    std::fs::write(
        &plan,
        r#"name = "lo"
[[group]]
name = "g"
[[group.test]]
name = "probe"
kind = "tcp-rr"
args = ["-l", "1.5"]
[[group.test]]
name = "bulk"
kind = "tcp-stream"
args = ["-l", "1", "-b", "50M"]
start = 0.5
"#,
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&doc);
    let r = &doc["groups"][0]["arms"][0]["runs"][0];
    let bulk = member(r, "bulk");
    let bo = bulk["offset_s"].as_f64().unwrap();
    assert!((0.5..1.5).contains(&bo), "{bo}");
    assert!(bulk["series"][0]["start_s"].as_f64().unwrap() >= 0.5);
    assert!(member(r, "probe")["series"].as_array().unwrap().len() >= 6);
    assert!(r["responsiveness"][0]["idle"]["rpm"].as_f64().unwrap() > 0.0);
    let html = tmp.path().join("g.html");
    let table = run(&["run", plan.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("GROUP g") && text.contains("responsiveness of probe"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("group g: throughput and round trip on the group"),
        "the report draws the group on one time axis"
    );

    // A member the agent refuses (a hook it does not offer) fails the group, naming it.
    std::fs::write(
        &plan,
        r#"name = "lo"
[[group]]
name = "g"
[[group.test]]
name = "probe"
kind = "tcp-rr"
args = ["-l", "5"]
[[group.test]]
name = "broken"
kind = "tcp-stream"
args = ["-l", "1", "--remote-setup", "no-such-hook"]
start = 0.5
"#,
    )
    .unwrap();
    let t = std::time::Instant::now();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("\"broken\"") && e.contains("group g"), "{e}");
    assert!(
        t.elapsed().as_secs_f64() < 4.5,
        "the probe was stopped, not run out: {:?}",
        t.elapsed()
    );
}

/// Arms and iterations apply to a group as a unit: each run is the whole group between its arm's
/// set-up and tear-down, and each member has its estimates per arm and its comparisons with the
/// baseline arm.
#[test]
fn arms_and_iterations_apply_to_the_group_as_a_unit() {
    let tmp = TempDir::new("groups-arms");
    let log = tmp.path().join("log");
    let plan = tmp.path().join("arms.toml");
    std::fs::write(
        &plan,
        format!(
            r#"name = "arms"
[iterations]
max = 2
min = 2
[[arm]]
name = "a"
setup = "echo setup a >> {log}"
teardown = "echo teardown a >> {log}"
[[arm]]
name = "b"
setup = "echo setup b >> {log}"
teardown = "echo teardown b >> {log}"
[[group]]
name = "g"
interval = 0.1
[[group.test]]
name = "probe"
kind = "tcp-rr"
args = ["-l", "0.6"]
[[group.test]]
name = "bulk"
kind = "tcp-stream"
args = ["-l", "0.3", "-b", "20M"]
start = 0.2
"#,
            log = log.display()
        ),
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&doc);
    let g = &doc["groups"][0];
    for (i, arm) in ["a", "b"].iter().enumerate() {
        let ga = &g["arms"][i];
        assert_eq!(ga["arm"], *arm);
        assert_eq!(ga["runs"].as_array().unwrap().len(), 2, "{ga}");
        for r in ga["runs"].as_array().unwrap() {
            assert_eq!(r["members"].as_array().unwrap().len(), 2);
        }
        let est = |m: usize, metric: &str| {
            ga["members"][m]["estimates"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["metric"] == metric)
                .map(|e| e["n"].as_u64().unwrap())
        };
        assert_eq!(est(0, "transactions_per_s"), Some(2));
        assert_eq!(est(1, "throughput"), Some(2));
    }
    let members: Vec<&str> = g["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["member"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["probe", "bulk"]);
    assert!(g["comparisons"][1]["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["metric"] == "throughput" && c["arm"] == "b" && c["baseline"] == "a"));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "setup a\nteardown a\nsetup b\nteardown b\n".repeat(2),
        "each group run between its arm's set-up and tear-down, interleaved"
    );
}
