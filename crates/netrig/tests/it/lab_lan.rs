//! Issue #38, items 1-2 on a LAN: netrig's path element between a LAN member and its bridge
//! port, where the kernel has no netem (docs/LAB.md, "The path element"): a member's egress
//! (`[lab.lans.shape.HOST]`) and the switch's port to a member (`[lab.lans.port.HOST]`), built,
//! witnessed, measured through, counted and removed.
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail.

use crate::helpers::{run, stderr, stdout, TempDir};
use serde_json::Value;
use std::process::Command;

fn can_build() -> bool {
    crate::lab_common::can_build(&["ip", "tc"])
}

fn netns_list() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Takes the lab down if the test panics.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new(env!("CARGO_BIN_EXE_netrig"))
                .args(["lab", "down", &self.0])
                .output();
        }
    }
}

fn state(name: &str) -> Value {
    let o = run(&["lab", "status", name, "--json"]);
    assert!(o.status.success(), "lab status {name}: {}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("status --json");
    v[0].clone()
}

fn lab_json(name: &str, host: &str, args: &[&str]) -> Value {
    let mut a = vec!["lab", "exec", name, host, "--", "netrig"];
    a.extend(args);
    a.push("--json");
    let o = run(&a);
    assert!(o.status.success(), "{a:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("a result")
}

/// The UDP counters of the element named `link`, direction from `from`.
fn direction_counters(name: &str, link: &str, from: &str) -> Value {
    let s = state(name);
    let e = s["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["link"] == link)
        .unwrap_or_else(|| panic!("no element {link}: {}", s["elements"]))
        .clone();
    e["counters"]
        .as_array()
        .expect("the element's counters")
        .iter()
        .find(|c| c["from"] == from)
        .unwrap_or_else(|| panic!("no direction from {from}: {e}"))
        .clone()
}

fn p50_ms(name: &str, from: &str, to_addr: &str) -> f64 {
    let v = lab_json(name, from, &["tcp-rr", "-H", to_addr, "-l", "1"]);
    v["summary"]["latency_us"]["p50"].as_f64().unwrap() / 1000.0
}

/// A LAN of five: c1's egress delayed 10 ms, the switch's port to c2 delayed 4 ms, c3's egress
/// losing 10 %, c4 and s1 untouched. Each element sits between its member and the bridge
/// (`nr<id>.e<i>`), the witness measures each direction against what the delays make on the
/// LAN, tcp-rr sees each delay within 1 ms + 5 % and the untouched pair under 1 ms, udp-stream
/// --no-gso loses what the element dropped, and `lab down` leaves no namespace.
#[test]
fn the_path_element_on_a_lan_delays_and_drops_per_member_and_leaves_the_others_alone() {
    if !can_build() {
        return;
    }
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-lan");
    let file = dir.path().join("lan.toml");
    std::fs::write(
        &file,
        "[lab]\n[lab.hosts.c1]\n[lab.hosts.c2]\n[lab.hosts.c3]\n[lab.hosts.c4]\n[lab.hosts.s1]\n\
         [[lab.lans]]\nname = \"sw\"\nhosts = [\"c1\", \"c2\", \"c3\", \"c4\", \"s1\"]\n\
         [lab.lans.shape.c1]\ndelay = \"10ms\"\n\
         [lab.lans.port.c2]\ndelay = \"4ms\"\n\
         [lab.lans.shape.c3]\nloss = 10.0\n",
    )
    .unwrap();
    let name = format!("it-lan-{}", std::process::id());
    let _down = Down(name.clone());
    let up = run(&[
        "lab",
        "up",
        file.to_str().unwrap(),
        "--name",
        &name,
        "--witness-length",
        "0.5",
    ]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let s = state(&name);
    let id = s["id"].as_str().unwrap().to_string();
    let els: Vec<&str> = s["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["link"].as_str().unwrap())
        .collect();
    assert_eq!(els, ["sw:c1", "sw:c2", "sw:c3"], "{}", s["elements"]);
    let ns = netns_list();
    assert!(ns.contains(&format!("nr{id}.e0")), "{ns}");
    let text = stdout(&run(&["lab", "status", &name]));
    for want in [
        "shaped c1 → c2 on sw: netrig element (delay)",
        "on sw: netrig element (delay) on the switch's port to c2",
        "element c1 → sw on sw:c1",
        "element sw → c2 on sw:c2",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    // The witness: c1's 10 ms measured towards c2 (10 + c2's port's 4 ms), c2's port from c1.
    // (The loss probe's row is only checked for having measured: on a loaded machine the
    // receiver's socket may lose datagrams beyond the element's, which the witness rightly warns
    // about; the element's own count is checked below.)
    let rows = s["witness"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for w in rows {
        eprintln!(
            "witness {} → {}: rtt {} µs against {}; loss probe {}",
            w["from"], w["to"], w["rtt_p50_us"], w["configured_rtt_us"], w["loss_probe"]
        );
        if w["configured_loss_pct"].is_number() {
            assert!(w["loss_probe"]["sent"].as_u64().unwrap() > 0, "{w}");
            // Through the lossy port a starved element (a debug build on a loaded machine once
            // lost 84 % of the probe) can keep the round trip's agent from its greeting: then
            // the row says so and warns, rather than holding a figure.
            assert!(
                w["rtt_p50_us"].is_number() || (w["error"].is_string() && w["warning"].is_string()),
                "{w}"
            );
        } else {
            assert!(w["rtt_p50_us"].is_number(), "{w}");
            assert_eq!(w["configured_rtt_us"].as_f64(), Some(14_000.0), "{w}");
            assert!(w["warning"].is_null(), "the witness warned: {w}");
        }
    }
    // Addresses: members numbered from 1 in 198.19.255.0/24; s1 is the fifth.
    let s1 = "198.19.255.5";
    let c1 = p50_ms(&name, "c1", s1);
    assert!(
        (c1 - 10.0).abs() <= 1.0 + 0.5,
        "c1 → s1 through c1's 10 ms: {c1} ms"
    );
    let c2 = p50_ms(&name, "c2", s1);
    assert!(
        (c2 - 4.0).abs() <= 1.0 + 0.2,
        "c2 → s1 back through c2's port's 4 ms: {c2} ms"
    );
    let c4 = p50_ms(&name, "c4", s1);
    eprintln!("tcp-rr medians to s1: from c1 {c1:.3} ms, c2 {c2:.3} ms, c4 {c4:.3} ms");
    assert!(c4 < 1.0, "c4 → s1, untouched: {c4} ms");
    // c3's loss: what udp-stream lost is what the element dropped of UDP, but for the data
    // hellos the client repeats while it sets up (UDP frames too, see lab_cli::loss_...).
    let before = direction_counters(&name, "sw:c3", "c3");
    let rcvbuf_before = crate::lab_common::udp_snmp(&name, "s1", "RcvbufErrors");
    let v = lab_json(
        &name,
        "c3",
        &["udp-stream", "-H", s1, "-l", "2", "-b", "20M", "--no-gso"],
    );
    let after = direction_counters(&name, "sw:c3", "c3");
    let rcvbuf = crate::lab_common::udp_snmp(&name, "s1", "RcvbufErrors") - rcvbuf_before;
    let d = |k: &str| after["udp"][k].as_u64().unwrap() - before["udp"][k].as_u64().unwrap();
    // Frames of any kind the element lost beyond its loss model: its socket's queue full, the
    // far side's full, its delay line's memory bound.
    let missed: u64 = ["rx_drops", "send_errors", "overflow"]
        .iter()
        .map(|k| after[k].as_u64().unwrap_or(0) - before[k].as_u64().unwrap_or(0))
        .sum();
    let u = &v["summary"]["udp"];
    let sent = u["sent_datagrams"].as_u64().unwrap();
    let lost = u["lost_datagrams"].as_u64().unwrap();
    assert!(sent > 1000, "{u}");
    // The element's 10 %, judged on what it saw and dropped (CI once saw udp-stream lose 571 of
    // 3401: the receiver's socket may lose more on a loaded machine, counted as s1's Udp
    // RcvbufErrors below).
    let (seen, dropped) = (d("received"), d("dropped"));
    let sd = (seen as f64 * 0.1 * 0.9).sqrt();
    assert!(
        (dropped as f64 - 0.1 * seen as f64).abs() < 4.0 * sd,
        "the element dropped {dropped} of {seen}: not 10 % within 4 sigma ({sd:.1})"
    );
    // What udp-stream lost is what the element dropped of UDP, but for the data hellos the client
    // repeats while it sets up (UDP frames too, see lab_cli::loss_...) and what s1's socket had
    // no room for.
    let extra = seen.saturating_sub(sent);
    assert!(extra <= 20, "{extra} frames beyond the data: {u} {after}");
    eprintln!("udp-stream from c3: lost {lost} of {sent}; the element's UDP dropped {dropped}, {extra} frames beyond the data, {rcvbuf} lost for want of room in s1's socket, {missed} frames the element could not carry");
    assert!(
        lost <= dropped + extra + rcvbuf + missed && dropped <= lost + extra,
        "lost {lost} against the element's UDP dropped {dropped} (with {extra} frames beyond the data, {rcvbuf} lost for want of room in the receiver, {missed} the element could not carry): {u} {after}"
    );
    let down = run(&["lab", "down", &name]);
    assert!(down.status.success(), "lab down: {}", stderr(&down));
    let ns = netns_list();
    assert!(!ns.contains(&format!("nr{id}")), "left behind: {ns}");
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

/// An arm changes a LAN member's element by the LAN's name and the sending host
/// (`[arm.shape."sw".c1]`), puts the lab's own back after, and each run's result carries the
/// element's counts named `sw:c1`.
#[test]
fn an_arm_changes_a_lan_member_s_element_and_each_run_counts_it() {
    if !can_build() {
        return;
    }
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("lab-lan-arm");
    let name = format!("lanarm-{}", std::process::id());
    let plan = tmp.path().join(format!("{name}.toml"));
    let saved = tmp.path().join("saved");
    std::fs::write(
        &plan,
        format!(
            r#"name = "{name}"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-rr"
args = ["-l", "1"]
[[arm]]
name = "20ms"
[arm.shape."sw".c1]
delay = "20ms"
[[arm]]
name = "lab"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.c2]
[lab.hosts.s1]
[[lab.lans]]
name = "sw"
hosts = ["c1", "c2", "s1"]
[lab.lans.shape.c1]
delay = "2ms"
"#
        ),
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap(), "--save", saved.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = walk_json(&saved).expect("the experiment saved");
    let v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let id = v["lab"]["id"].as_str().unwrap();
    assert!(!netns_list().contains(&format!("nr{id}")), "the lab is left");
    let arms = v["tests"][0]["points"][0]["arms"].as_array().unwrap();
    for (arm, ms) in [("20ms", 20.0), ("lab", 2.0)] {
        let r = &arms.iter().find(|a| a["arm"] == arm).unwrap()["runs"][0];
        let p50 = r["summary"]["latency_us"]["p50"].as_f64().unwrap() / 1e3;
        eprintln!("arm {arm}: tcp-rr median {p50:.3} ms against {ms} ms");
        assert!(
            (p50 - ms).abs() <= 1.0 + 0.05 * ms,
            "arm {arm}: tcp-rr median {p50:.3} ms against {ms} ms"
        );
        let pe = r["path_elements"].as_array().unwrap();
        let c1 = pe
            .iter()
            .find(|d| d["link"] == "sw:c1" && d["from"] == "c1")
            .unwrap_or_else(|| panic!("no counts of sw:c1 from c1: {pe:?}"));
        assert!(c1["delayed"].as_u64().unwrap() > 20, "{c1}");
    }
}
