//! Issue #38, a lab in a plan: `netrig run PLAN` builds the plan's `[lab]`, runs each arm's
//! tests from its client host's namespace against its server host's agent, and removes the lab
//! at the end, after a failed run and after Ctrl-C (docs/LAB.md, docs/EXPERIMENTS.md).
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail.

use crate::helpers::{run, stderr, TempDir};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// One lab test at a time, across all the lab test files (crate::lab_common).
use crate::lab_common::LAB_TESTS as ONE_AT_A_TIME;

fn can_build() -> bool {
    crate::lab_common::can_build(&["ip", "nft"])
}

/// c1 and s1 on one link, what c1 sends shaped to 50 Mbit/s.
const TWO_HOSTS: &str = r#"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "s1"]
[lab.links.shape.c1]
rate = "50M"
limit_packets = 100
"#;

fn root_ruleset() -> String {
    let o = Command::new("nft").args(["list", "ruleset"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn netns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
}

/// The lab the document recorded is gone: its namespaces and its agents.
fn gone(lab: &Value) {
    for ns in lab["namespaces"].as_array().unwrap() {
        assert!(!netns_exists(ns.as_str().unwrap()), "{ns} is left");
    }
    for (h, host) in lab["hosts"].as_object().unwrap() {
        let pid = host["agent"]["pid"].as_u64().unwrap();
        assert!(!alive(pid), "host {h}'s agent {pid} is left");
    }
    let id = lab["id"].as_str().unwrap();
    assert!(!std::path::Path::new(&format!("/run/netrig/labs/{id}.json")).exists());
}

fn write_plan(dir: &std::path::Path, name: &str, body: &str) -> String {
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(&f, format!("name = \"{name}\"\n{body}\n{TWO_HOSTS}")).unwrap();
    f.display().to_string()
}

fn mbit(arm: &Value) -> f64 {
    arm["runs"][0]["summary"]["throughput_bps"]
        .as_f64()
        .unwrap_or_else(|| panic!("no throughput: {}", arm["runs"][0]["summary"]))
        / 1e6
}

/// One plan compares the shaped veth path with loopback on the server's host: the document
/// records the lab and where each arm ran, the veth arm stays under its 50 Mbit/s link and
/// loopback is far above it; afterwards the lab's namespaces and agents are gone.
#[test]
fn a_plan_runs_its_tests_over_a_lab_link_and_over_the_servers_loopback() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labplan");
    let plan = write_plan(
        tmp.path(),
        "veth-lo",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-stream"
args = ["-l", "1"]
[[arm]]
name = "veth"
[[arm]]
name = "loopback"
path = "loopback"
"#,
    );
    let o = run(&["run", &plan, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&v);
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let lab = &v["lab"];
    assert!(
        lab["hosts"]["c1"]["ns"].is_string() && lab["hosts"]["s1"]["ns"].is_string(),
        "{lab}"
    );
    let arms = v["tests"][0]["points"][0]["arms"].as_array().unwrap();
    let (veth, lo) = (&arms[0], &arms[1]);
    assert_eq!(veth["lab"]["client"], "c1");
    assert_eq!(veth["lab"]["server"], "s1");
    assert_eq!(veth["lab"]["path"], "link");
    assert_eq!(veth["lab"]["segment"], "c1-s1");
    assert!(
        veth["lab"]["address"].as_str().unwrap().starts_with("198.18."),
        "{}",
        veth["lab"]
    );
    assert_eq!(lo["lab"]["client"], "s1");
    assert_eq!(lo["lab"]["path"], "loopback");
    assert!(
        lo["lab"]["address"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{}",
        lo["lab"]
    );
    let (veth, lo) = (mbit(veth), mbit(lo));
    assert!(
        veth > 25.0 && veth < 52.0,
        "veth through a 50 Mbit/s link: {veth} Mbit/s"
    );
    assert!(lo > 4.0 * veth, "loopback {lo} Mbit/s against the link's {veth}");
    gone(lab);
}

/// An arm changes a link's rate with `tc` inside the sending host (`in_host`), and puts it back:
/// "at 50 and at 20 Mbit/s" is one plan.
#[test]
fn an_arm_changes_a_links_rate_inside_the_sending_host() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labplan-rate");
    let plan = write_plan(
        tmp.path(),
        "rate-arm",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-stream"
args = ["-l", "1"]
[[arm]]
name = "20M"
in_host = "c1"
setup = "tc class change dev to-s1 parent 1: classid 1:1 htb rate 20mbit ceil 20mbit"
teardown = "tc class change dev to-s1 parent 1: classid 1:1 htb rate 50mbit ceil 50mbit"
[[arm]]
name = "50M"
"#,
    );
    let o = run(&["run", &plan, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let arms = v["tests"][0]["points"][0]["arms"].as_array().unwrap();
    let (slow, fast) = (mbit(&arms[0]), mbit(&arms[1]));
    assert!(slow > 10.0 && slow < 21.0, "the 20 Mbit/s arm: {slow} Mbit/s");
    // Run after the 20M arm's tear-down: the link is back at 50 Mbit/s.
    assert!(fast > 30.0 && fast < 52.0, "the 50 Mbit/s arm: {fast} Mbit/s");
    gone(&v["lab"]);
}

/// An arm's set-up and tear-down run inside the server's host: its rule counts the runs'
/// packets there, and the root namespace's ruleset is as it was.
#[test]
fn an_arms_ruleset_is_loaded_in_the_server_host_only() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let before = root_ruleset();
    let tmp = TempDir::new("labplan-nft");
    let plan = write_plan(
        tmp.path(),
        "nft-arm",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-rr"
args = ["-l", "0.3"]
[[arm]]
name = "open"
[[arm]]
name = "counted"
in_host = "s1"
setup = "nft add table inet labt && nft add chain inet labt in '{ type filter hook input priority 0; }' && nft add rule inet labt in tcp dport $NETRIG_AGENT_PORT counter && nft list ruleset > /dev/null"
teardown = "nft list table inet labt; nft delete table inet labt"
"#,
    );
    let o = run(&["run", &plan, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["complete"], true, "{}", v["stopped"]);
    let cmds = v["commands"].as_array().unwrap();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert!(
        cmds.iter().all(|c| c["host"] == "s1" && c["status"] == 0),
        "{cmds:?}"
    );
    let listed = cmds[1]["output"].as_str().unwrap();
    let packets: u64 = listed
        .split_whitespace()
        .skip_while(|w| *w != "packets")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counter: {listed}"));
    assert!(packets > 0, "the rule in s1 counted nothing: {listed}");
    assert_eq!(root_ruleset(), before, "the root namespace's ruleset changed");
    gone(&v["lab"]);
}

/// A run that fails (the server host rejects the agent's port) stops the plan, and the lab is
/// removed all the same.
#[test]
fn a_failed_run_removes_the_lab() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labplan-fail");
    let plan = write_plan(
        tmp.path(),
        "fails",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-rr"
args = ["-l", "0.3"]
[[arm]]
name = "rejected"
in_host = "s1"
setup = "nft add table inet rej && nft add chain inet rej in '{ type filter hook input priority 0; }' && nft add rule inet rej in tcp dport $NETRIG_AGENT_PORT reject with tcp reset"
"#,
    );
    let o = run(&["run", &plan, "--json"]);
    assert!(!o.status.success(), "a rejected agent port: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["complete"], false);
    assert!(
        v["stopped"].as_str().unwrap().contains("failed"),
        "{}",
        v["stopped"]
    );
    gone(&v["lab"]);
}

/// Starts `netrig run PLAN` and waits until its lab is up and a client runs in c1.
fn start_until_running(plan: &str, name: &str) -> (std::process::Child, Value) {
    let child = Command::new(env!("CARGO_BIN_EXE_netrig"))
        .args(["run", plan, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lab's state file, once its agents are up (the lab is named after the plan and pid).
    let name = format!("{name}-{}", child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    let lab: Value = loop {
        assert!(Instant::now() < deadline, "the lab did not come up");
        let found = std::fs::read_dir("/run/netrig/labs")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| serde_json::from_slice::<Value>(&std::fs::read(e.path()).ok()?).ok())
            .find(|s| s["name"] == name.as_str() && s["ready"] == true);
        if let Some(s) = found {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The run is under way in c1 (its client process is in c1's namespace).
    let c1 = lab["hosts"]["c1"]["ns"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = Command::new("ip").args(["netns", "pids", &c1]).output().unwrap();
        if !String::from_utf8_lossy(&pids.stdout).trim().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "no client in c1");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, lab)
}

/// A `netrig run` killed outright (SIGKILL) leaves its lab stale: `netrig lab down --stale`
/// removes it, the agents and the orphaned client included.
#[test]
fn a_killed_lab_plan_leaves_a_stale_lab_that_down_stale_removes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labplan-kill");
    let plan = write_plan(
        tmp.path(),
        "killed",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-stream"
args = ["-l", "30"]
"#,
    );
    let (mut child, lab) = start_until_running(&plan, "killed");
    child.kill().unwrap();
    child.wait().unwrap();
    let c1 = lab["hosts"]["c1"]["ns"].as_str().unwrap();
    assert!(
        netns_exists(c1),
        "nothing removes a lab whose owner was killed but down --stale"
    );
    let o = run(&["lab", "down", "--stale"]);
    assert!(o.status.success(), "{}", stderr(&o));
    gone(&lab);
}

/// Ctrl-C while a lab plan runs: the run in hand stops, the lab is removed, exit 130.
#[test]
fn ctrl_c_during_a_lab_plan_removes_the_lab() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !can_build() {
        return;
    }
    let tmp = TempDir::new("labplan-int");
    let plan = write_plan(
        tmp.path(),
        "sigint",
        r#"
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-stream"
args = ["-l", "30"]
"#,
    );
    let (mut child, lab) = start_until_running(&plan, "sigint");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("netrig run did not stop within 15 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    gone(&lab);
}

/// Names of lab hosts without a lab, a host the lab does not have, and a loopback path with a
/// client elsewhere are refused before anything is built.
#[test]
fn a_lab_plan_that_names_hosts_wrongly_is_refused_before_building() {
    let tmp = TempDir::new("labplan-bad");
    for (body, needle) in [
        (
            "[target]\nclient = \"c9\"\nserver = \"s1\"\n",
            "\"c9\" is not a host",
        ),
        ("[target]\nserver = \"s1\"\n", "names the client's host"),
        (
            "[target]\nclient = \"c1\"\nserver = \"s1\"\npath = \"loopback\"\n",
            "runs the client in the server's host",
        ),
    ] {
        let plan = write_plan(
            tmp.path(),
            "bad",
            &format!("{body}[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.2\"]\n"),
        );
        let o = run(&["run", &plan]);
        assert_eq!(o.status.code(), Some(2), "{body}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{body}: {}", stderr(&o));
    }
}
