//! Issue #38, item 3: arms that change a link's path properties (delay, loss, ...) through
//! netrig's path element, and groups that honour an arm's lab changes (docs/LAB.md, "A lab in a
//! plan"; docs/EXPERIMENTS.md, "Groups").
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail.

use crate::helpers::{run, stderr, TempDir};
use serde_json::Value;
use std::process::Command;

fn can_build() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let tc = Command::new("tc")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && ip && tc {
        return true;
    }
    let why = format!("a lab plan needs root ({root}), iproute2's ip ({ip}) and tc ({tc})");
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and this lab test cannot run: {why}");
    }
    eprintln!("skipped: {why}");
    false
}

fn netns_list() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run_plan(tag: &str, body: &str) -> Value {
    let tmp = TempDir::new(tag);
    let name = format!("{tag}-{}", std::process::id());
    let plan = tmp.path().join(format!("{name}.toml"));
    std::fs::write(&plan, format!("name = \"{name}\"\n{body}")).unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let ns = netns_list();
    let id = v["lab"]["id"].as_str().unwrap();
    assert!(!ns.contains(&format!("nr{id}")), "the lab is left: {ns}");
    v
}

/// A group's arms change the bottleneck's rate: the bulk member's rate follows the arm (put
/// back after each group run), and every member's result carries the path element's counts
/// over the group run.
#[test]
fn a_group_follows_its_arms_rate_and_reports_the_elements_counters() {
    let _one = crate::lab_plan::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let v = run_plan(
        "arms2-group",
        r#"
[target]
client = "c1"
server = "s1"
[[group]]
name = "g"
interval = 0.25
[[group.test]]
name = "probe"
kind = "tcp-rr"
args = ["-l", "2"]
[[group.test]]
name = "bulk"
kind = "tcp-stream"
args = ["-l", "2"]
[[arm]]
name = "10M"
[arm.shape."c1-s1".c1]
rate = "10M"
[[arm]]
name = "lab"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "s1"]
[lab.links.shape.c1]
rate = "40M"
limit_packets = 100
delay = "1ms"
"#,
    );
    let g = &v["groups"][0];
    let bulk = |arm: usize| -> f64 {
        let r = &g["arms"][arm]["runs"][0];
        let m = r["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["member"] == "bulk")
            .unwrap();
        m["result"]["summary"]["throughput_bps"].as_f64().unwrap() / 1e6
    };
    let (slow, lab) = (bulk(0), bulk(1));
    // 10 Mbit/s carries 9.56 Mbit/s of TCP payload at MTU 1500, 40 Mbit/s 38.3.
    assert!((7.0..=10.2).contains(&slow), "the 10M arm's bulk: {slow} Mbit/s");
    assert!(
        (28.0..=40.5).contains(&lab),
        "the lab's own 40 Mbit/s after it: {lab} Mbit/s"
    );
    let r = &g["arms"][0]["runs"][0];
    for m in r["members"].as_array().unwrap() {
        let pe = m["result"]["path_elements"].as_array().unwrap();
        assert_eq!(pe.len(), 2, "both directions of c1-s1: {pe:?}");
        let fwd = pe.iter().find(|d| d["from"] == "c1").unwrap();
        assert!(fwd["forwarded"].as_u64().unwrap() > 100, "{fwd}");
    }
    assert!(
        v["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["phase"] == "shape" && c["arm"] == "10M"),
        "{}",
        v["commands"]
    );
}
