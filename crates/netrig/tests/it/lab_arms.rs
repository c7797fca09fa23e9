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
    crate::lab_common::can_build(&["ip", "tc"])
}

fn netns_list() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run_plan(tag: &str, body: &str) -> Value {
    run_plan_table(tag, body).0
}

/// The experiment (saved with --save) and the table printed.
pub(crate) fn run_plan_table(tag: &str, body: &str) -> (Value, String) {
    let tmp = TempDir::new(tag);
    let name = format!("{tag}-{}", std::process::id());
    let plan = tmp.path().join(format!("{name}.toml"));
    let saved = tmp.path().join("saved");
    std::fs::write(&plan, format!("name = \"{name}\"\n{body}")).unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--save", saved.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    let file = walk_json(&saved).unwrap_or_else(|| panic!("nothing saved in {}", saved.display()));
    let v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    crate::experiment::validate_experiment(&v);
    let ns = netns_list();
    let id = v["lab"]["id"].as_str().unwrap();
    assert!(!ns.contains(&format!("nr{id}")), "the lab is left: {ns}");
    (v, table)
}

fn walk_json(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()? {
        let p = e.ok()?.path();
        if p.is_dir() {
            if let Some(f) = walk_json(&p) {
                return Some(f);
            }
        } else if p.extension().is_some_and(|x| x == "json") {
            return Some(p);
        }
    }
    None
}

/// A group's arms change the bottleneck's rate: the bulk member's rate follows the arm (put
/// back after each group run), and every member's result carries the path element's counts
/// over the group run.
#[test]
fn a_group_follows_its_arms_rate_and_reports_the_elements_counters() {
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let (v, table) = run_plan_table(
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
    eprintln!("group bulk: arm 10M {slow:.2} Mbit/s, the lab's 40M {lab:.2} Mbit/s");
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
        table.contains("group g arm 10M run 1 (one window for all its tests): "),
        "{table}"
    );
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

/// Arms change the path element's delay and loss by name: tcp-rr's median round trip follows
/// each arm's delay (within 1 ms + 5 %), udp-stream's loss in the loss arm is within binomial
/// bounds of it, and the arm without a shape (after the others) runs through the lab's own
/// properties again; the element's counters acknowledge every change (generation) and the
/// document records the element's set and restore.
#[test]
fn arms_change_the_elements_delay_and_loss_and_put_them_back() {
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let v = run_plan(
        "arms2-path",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-rr"
args = ["-l", "1"]
[[test]]
kind = "udp-stream"
args = ["-l", "1", "-b", "10M", "-m", "512", "--no-gso"]
[[arm]]
name = "5ms"
[arm.shape."c1-s1".c1]
delay = "5ms"
[[arm]]
name = "20ms"
[arm.shape."c1-s1".c1]
delay = "20ms"
[[arm]]
name = "loss"
[arm.shape."c1-s1".c1]
loss = 5.0
[[arm]]
name = "lab"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "s1"]
[lab.links.shape.c1]
delay = "1ms"
element = true
"#,
    );
    let arms = |t: usize| v["tests"][t]["points"][0]["arms"].as_array().unwrap().clone();
    let (rr, udp) = (arms(0), arms(1));
    let arm = |a: &[Value], name: &str| -> Value {
        a.iter()
            .find(|x| x["arm"] == name)
            .unwrap_or_else(|| panic!("no arm {name}"))["runs"][0]
            .clone()
    };
    // The round trip: c1's delay one way, nothing back (s1 → c1 unshaped).
    for (name, ms) in [("5ms", 5.0), ("20ms", 20.0), ("loss", 1.0), ("lab", 1.0)] {
        let p50 = arm(&rr, name)["summary"]["latency_us"]["p50"].as_f64().unwrap() / 1e3;
        eprintln!("arm {name}: tcp-rr median {p50:.3} ms against {ms} ms configured");
        assert!(
            (p50 - ms).abs() <= 1.0 + 0.05 * ms,
            "arm {name}: tcp-rr median {p50:.3} ms against {ms} ms"
        );
    }
    // Loss: 5 % of what the element saw, within 4 binomial standard deviations, judged by the
    // element's own count (path_elements): udp-stream's loss also counts what the receiver's socket
    // had no room for on a loaded machine (CI's full run read 449 of 2450 lost where 5 % is 122).
    let dropped = |r: &Value, k: &str| -> u64 {
        r["path_elements"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["from"] == "c1")
            .map(|d| d["udp"][k].as_u64().unwrap())
            .sum()
    };
    let u = arm(&udp, "loss");
    let (sent, lost) = (
        u["summary"]["udp"]["sent_datagrams"].as_u64().unwrap() as f64,
        u["summary"]["udp"]["lost_datagrams"].as_u64().unwrap() as f64,
    );
    let (seen, gone) = (dropped(&u, "received") as f64, dropped(&u, "dropped") as f64);
    eprintln!(
        "arm loss: udp-stream lost {lost} of {sent} datagrams, the element dropped {gone} of {seen} (5 % configured)"
    );
    assert!(
        sent > 1000.0 && seen >= sent,
        "{sent} sent, {seen} through the element"
    );
    let sd = (seen * 0.05 * 0.95).sqrt();
    assert!(
        (gone - seen * 0.05).abs() <= 4.0 * sd,
        "loss arm: the element dropped {gone} of {seen}, 5 % is {:.0} ± {:.0}",
        seen * 0.05,
        4.0 * sd
    );
    // What the element dropped udp-stream counts lost, but for the data hellos (UDP frames
    // beyond the data datagrams, which the element may drop too).
    let extra = seen - sent;
    assert!(
        lost + extra >= gone,
        "udp-stream lost {lost}, the element dropped {gone}"
    );
    let dropped = |r: &Value| dropped(r, "dropped");
    // Put back: the lab's own properties (no loss) in the arms without it.
    for name in ["5ms", "20ms", "lab"] {
        assert_eq!(
            dropped(&arm(&udp, name)),
            0,
            "arm {name} lost through the element"
        );
    }
    // Every change and its restoring was acknowledged, recorded as the arm's commands.
    let cmds = v["commands"].as_array().unwrap();
    let set: Vec<&Value> = cmds
        .iter()
        .filter(|c| {
            c["command"]
                .as_str()
                .unwrap()
                .starts_with("path element of link c1-s1")
        })
        .collect();
    // 3 arms with a shape, 2 tests each, a set and a restore per run.
    assert_eq!(set.len(), 12, "{set:#?}");
    assert!(set.iter().all(|c| c["status"] == 0), "{set:#?}");
    assert!(
        set.last().unwrap()["output"]
            .as_str()
            .unwrap()
            .contains("delay 1000 µs, loss 0%"),
        "{:#?}",
        set.last()
    );
}

/// `netrig lab set` by hand: the element's delay changes at once (tcp-rr through it follows),
/// `lab status` says what is in force against the lab's own, and `--reset` puts the lab's own
/// back.
#[test]
fn lab_set_changes_the_elements_delay_by_hand_and_reset_puts_it_back() {
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("arms2-set");
    let name = format!("arms2set{}", std::process::id() % 100_000);
    let file = tmp.path().join("lab.toml");
    std::fs::write(
        &file,
        r#"[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "s1"]
[lab.links.shape.c1]
delay = "1ms"
element = true
"#,
    )
    .unwrap();
    let o = run(&["lab", "up", file.to_str().unwrap(), "--name", &name]);
    assert!(o.status.success(), "{}", stderr(&o));
    struct Down(String);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = run(&["lab", "down", &self.0]);
        }
    }
    let _down = Down(name.clone());
    let rtt_ms = || -> f64 {
        let o = run(&[
            "lab",
            "exec",
            &name,
            "c1",
            "--",
            "netrig",
            "tcp-rr",
            "-H",
            "198.18.0.2",
            "-l",
            "1",
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["summary"]["latency_us"]["p50"].as_f64().unwrap() / 1e3
    };
    let o = run(&["lab", "set", &name, "c1-s1", "c1", "delay=15ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("delay 15000 µs") && out.contains("generation 1"),
        "{out}"
    );
    let set = rtt_ms();
    let o = run(&["lab", "status", &name]);
    let status = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        status.contains("in force (generation 1, changed by an arm or lab set): delay 15000 µs"),
        "{status}"
    );
    let o = run(&["lab", "set", &name, "c1-s1", "c1", "--reset"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut back = rtt_ms();
    eprintln!("lab set: tcp-rr median {set:.3} ms at delay=15ms, {back:.3} ms after --reset (1 ms)");
    assert!((set - 15.0).abs() <= 1.0 + 0.75, "{set} ms at 15 ms");
    // A user-space element's wake-ups run late on a busy host (2.18 ms was seen at 13 % steal):
    // a median off by more is measured once more before it fails.
    if (back - 1.0).abs() > 1.05 {
        back = rtt_ms();
        eprintln!("lab set: {back:.3} ms after --reset, measured once more");
    }
    assert!((back - 1.0).abs() <= 1.05, "{back} ms after the reset to 1 ms");
    let o = run(&["lab", "set", &name, "c1-s1", "c1", "bogus=1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("bogus: lab set changes delay"),
        "{}",
        stderr(&o)
    );
}
