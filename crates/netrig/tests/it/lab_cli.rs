//! `netrig lab`: labs built, measured, used and removed without a trace (docs/LAB.md).
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail: a lab test that cannot run in CI is a failure.

use crate::helpers::{run, run_cmd, stderr, stdout, TempDir};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// One lab test at a time, across all the lab test files (crate::lab_common).
use crate::lab_common::LAB_TESTS as ONE_AT_A_TIME;

/// Can labs be built here? Skips (false) when not, unless under CI, where it panics.
fn can_build() -> bool {
    crate::lab_common::can_build(&["ip"])
}

const THREE: &str = r#"
[lab.hosts.client]
conntrack = false
[lab.hosts.router]
router = true
[lab.hosts.server]
sysctl = { "net.core.somaxconn" = "1037" }

[[lab.links]]
ends = ["client", "router"]

[[lab.links]]
ends = ["router", "server"]
[lab.links.shape.router]
rate = "50M"
limit_packets = 100
"#;

fn namespaces() -> BTreeSet<String> {
    let o = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn root_links() -> BTreeSet<String> {
    let o = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The lab's state as `lab status NAME --json` prints it.
fn state(name: &str) -> Value {
    let o = run(&["lab", "status", name, "--json"]);
    assert!(o.status.success(), "lab status {name}: {}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("status --json");
    v[0].clone()
}

/// What a lab made that must be gone: its namespaces, its agents' pids, its state file.
struct Made {
    id: String,
    ns: Vec<String>,
    pids: Vec<u64>,
}

fn made(s: &Value) -> Made {
    Made {
        id: s["id"].as_str().unwrap().to_string(),
        ns: s["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect(),
        pids: s["hosts"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|h| h["agent"]["pid"].as_u64())
            .collect(),
    }
}

fn assert_gone(m: &Made, links_before: &BTreeSet<String>) {
    let left: Vec<_> = namespaces().into_iter().filter(|n| m.ns.contains(n)).collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    let running: Vec<_> = m.pids.iter().filter(|&&p| alive(p)).collect();
    assert!(running.is_empty(), "agents still running: {running:?}");
    assert!(
        !std::path::Path::new(&format!("/run/netrig/labs/{}.json", m.id)).exists(),
        "state file left"
    );
    let new: Vec<_> = root_links().difference(links_before).cloned().collect();
    assert!(new.is_empty(), "interfaces added to the root namespace: {new:?}");
}

/// Removes the lab named if a test ends early (a failed assertion), so no lab outlives it.
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

fn write(dir: &TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn a_routed_lab_shapes_the_router_egress_is_measured_used_and_removed_without_a_trace() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let links_before = root_links();
    let dir = TempDir::new("lab-rate");
    let file = write(&dir, "three.toml", THREE);
    let name = format!("it-rate-{}", std::process::id());
    let _down = Down(name.clone());
    let up = run(&["lab", "up", &file, "--name", &name, "--witness-length", "1.5"]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let s = state(&name);
    let m = made(&s);
    assert_eq!(m.ns.len(), 3);
    assert!(m.ns.iter().all(|n| namespaces().contains(n)), "{:?}", m.ns);
    assert_eq!(m.pids.len(), 3, "an agent in each host");
    let text = stdout(&run(&["lab", "status"]));
    assert!(text.contains(&format!("lab {name} ")), "{text}");
    assert!(
        text.contains("shaped router → server on router-server: htb rate 50000000bit + pfifo limit 100"),
        "{text}"
    );
    // The witness: configured beside measured, within 10 % of what 50 Mbit/s carries.
    let w = &s["witness"][0];
    assert_eq!(w["configured_rate_bps"].as_u64(), Some(50_000_000), "{w}");
    let ceiling = w["expected_goodput_bps"].as_f64().unwrap();
    let seen = w["measured_goodput_bps"].as_f64().expect("measured");
    assert!(
        (seen / ceiling - 1.0).abs() < 0.10,
        "witness measured {seen}, ceiling {ceiling}"
    );
    assert!(w["rtt_p50_us"].as_f64().is_some_and(|r| r > 0.0), "{w}");
    // A test from the client to the server through the router: htb at 50 Mbit/s counts each
    // frame's 1514 bytes, so TCP's payload tops out at 50 x 1448/1514 = 47.82 Mbit/s; within 5 %
    // of that (htb's burst lets a little more through at the start).
    let server = s["hosts"]["server"]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let o = run(&[
        "lab",
        "exec",
        &name,
        "client",
        "--",
        "netrig",
        "tcp-stream",
        "-H",
        &server,
        "-l",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "lab exec: {}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("a result");
    let bps = v["summary"]["throughput_bps"].as_f64().unwrap();
    assert!(
        (bps / 47.82e6 - 1.0).abs() < 0.05,
        "through the 50 Mbit/s bottleneck: {bps} bit/s"
    );
    // The hosts' own settings, inside their namespaces only.
    let o = run(&[
        "lab",
        "exec",
        &name,
        "server",
        "--",
        "sysctl",
        "-n",
        "net.core.somaxconn",
    ]);
    assert_eq!(stdout(&o).trim(), "1037", "{}", stderr(&o));
    let root = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap();
    assert_ne!(root.trim(), "1037", "the root namespace's somaxconn changed");
    let o = run(&["lab", "exec", &name, "client", "--", "nft", "list", "tables"]);
    assert!(
        stdout(&o).contains("table inet netrig_notrack"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    // exec passes the command's status on.
    let o = run(&["lab", "exec", &name, "server", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    let down = run(&["lab", "down", &name]);
    assert!(down.status.success(), "lab down: {}", stderr(&down));
    assert_gone(&m, &links_before);
    let o = run(&["lab", "status", &name]);
    assert_eq!(o.status.code(), Some(2), "a removed lab is not listed");
}

/// Starts `lab up --foreground`, returns it once the lab is up.
fn foreground(file: &str, name: &str) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_netrig"))
        .args(["lab", "up", file, "--name", name, "--foreground", "--no-witness"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("is up") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("lab up --foreground did not come up within 30 s");
    }
    child
}

fn wait_bounded(child: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("did not exit within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_of_a_held_lab_removes_it() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let links_before = root_links();
    let dir = TempDir::new("lab-int");
    let file = write(&dir, "three.toml", THREE);
    let name = format!("it-int-{}", std::process::id());
    let _down = Down(name.clone());
    let mut child = foreground(&file, &name);
    let m = made(&state(&name));
    assert!(m.ns.iter().all(|n| namespaces().contains(n)));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let st = wait_bounded(&mut child, 15);
    assert_eq!(st.code(), Some(130), "Ctrl-C's exit status");
    assert_gone(&m, &links_before);
}

#[test]
fn a_lab_whose_owner_was_killed_is_stale_and_down_stale_removes_it() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let links_before = root_links();
    let dir = TempDir::new("lab-stale");
    let file = write(&dir, "three.toml", THREE);
    let name = format!("it-stale-{}", std::process::id());
    let _down = Down(name.clone());
    let mut child = foreground(&file, &name);
    let m = made(&state(&name));
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(
        m.ns.iter().all(|n| namespaces().contains(n)),
        "a killed owner leaves its lab"
    );
    let text = stdout(&run(&["lab", "status", &name]));
    assert!(text.contains("STALE"), "{text}");
    let o = run(&["lab", "down", "--stale"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("removed lab {name}")),
        "{}",
        stdout(&o)
    );
    assert_gone(&m, &links_before);
}

#[test]
fn corrupt_with_segmentation_offloads_on_is_refused_by_name_where_the_kernel_has_no_netem() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ns_before = namespaces();
    let dir = TempDir::new("lab-corrupt");
    let file = write(
        &dir,
        "corrupt.toml",
        &THREE.replace("limit_packets = 100", "delay = \"10ms\"\ncorrupt = 1.0"),
    );
    let name = format!("it-corrupt-{}", std::process::id());
    let _down = Down(name.clone());
    let o = run(&["lab", "up", &file, "--name", &name, "--no-witness"]);
    if o.status.success() {
        // A kernel with netem builds it with netem.
        let text = stdout(&run(&["lab", "status", &name]));
        assert!(text.contains("netem (delay, corrupt)"), "{text}");
        assert!(run(&["lab", "down", &name]).status.success());
        return;
    }
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        // The path element corrupts single frames only (lab_element tests it with offloads off).
        e.contains("corrupt on link router-server (router → server): netrig's path element corrupts single frames only: needs offloads = { tso = false, gso = false } on the link"),
        "{e}"
    );
    let new: Vec<_> = namespaces()
        .difference(&ns_before)
        .filter(|n| n.starts_with("nr"))
        .cloned()
        .collect();
    assert!(new.is_empty(), "a refused lab made namespaces: {new:?}");
}

#[test]
fn a_failing_command_is_named_and_what_was_built_is_removed() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (ns_before, links_before) = (namespaces(), root_links());
    let dir = TempDir::new("lab-fail");
    let bad = THREE.replace(
        "[lab.hosts.server]\n",
        "[lab.hosts.server]\nnft_inline = \"table inet t { chain c { nonsense } }\"\n",
    );
    let file = write(&dir, "bad.toml", &bad);
    let name = format!("it-fail-{}", std::process::id());
    let _down = Down(name.clone());
    let o = run(&["lab", "up", &file, "--name", &name]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("`ip netns exec nr") && e.contains("-server nft -f -` failed"),
        "{e}"
    );
    let new: Vec<_> = namespaces()
        .difference(&ns_before)
        .filter(|n| n.starts_with("nr"))
        .cloned()
        .collect();
    assert!(new.is_empty(), "namespaces left after a failed build: {new:?}");
    assert!(root_links().is_subset(&links_before));
    assert!(stdout(&run(&["lab", "status"]))
        .lines()
        .all(|l| !l.contains(&name)));
}

#[test]
fn lab_up_without_net_admin_and_sys_admin_refuses_naming_them() {
    if !can_build() {
        return;
    }
    let dir = TempDir::new("lab-caps");
    let file = write(&dir, "three.toml", THREE);
    let mut c = Command::new("setpriv");
    c.args([
        "--bounding-set",
        "-net_admin,-sys_admin",
        "--inh-caps",
        "-all",
        "--",
    ])
    .arg(env!("CARGO_BIN_EXE_netrig"));
    if Command::new("setpriv").arg("--version").output().is_err() {
        crate::skip::missing("no setpriv (util-linux) to drop capabilities with");
        return;
    }
    let o = run_cmd(c, &["lab", "up", &file, "--name", "it-caps"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (missing: CAP_NET_ADMIN, CAP_SYS_ADMIN)"),
        "{e}"
    );
}

#[test]
fn a_lan_of_clients_behind_a_router_reaches_a_server_and_its_bridge_is_removed() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let links_before = root_links();
    let dir = TempDir::new("lab-lan");
    let lan = r#"
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.c2]
[lab.hosts.r]
router = true
[lab.hosts.s]
[[lab.lans]]
name = "sw"
hosts = ["c1", "c2", "r"]
mtu = 9000
[[lab.links]]
ends = ["r", "s"]
"#;
    let file = write(&dir, "lan.toml", lan);
    let name = format!("it-lan-{}", std::process::id());
    let _down = Down(name.clone());
    let up = run(&["lab", "up", &file, "--name", &name]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let s = state(&name);
    let m = made(&s);
    // Four hosts and the LAN's own bridge namespace.
    assert_eq!(m.ns.len(), 5, "{:?}", m.ns);
    assert!(m.ns.iter().any(|n| n.ends_with(".sw")), "{:?}", m.ns);
    assert!(
        stdout(&up).contains("LAN sw: c1:lan-sw c2:lan-sw r:lan-sw (MTU 9000)"),
        "{}",
        stdout(&up)
    );
    // Both clients reach the server through the router, over IPv6 as well as IPv4.
    let s4 = s["hosts"]["s"]["addrs"][0]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let s6 = s["hosts"]["s"]["addrs"][1]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for (client, addr) in [("c1", &s4), ("c2", &s6)] {
        let o = run(&[
            "lab", "exec", &name, client, "--", "netrig", "tcp-rr", "-H", addr, "-l", "0.5", "--json",
        ]);
        assert!(o.status.success(), "{client} to {addr}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).expect("a result");
        assert!(
            v["summary"]["transactions"].as_u64().unwrap() > 10,
            "{client}: {}",
            v["summary"]
        );
    }
    let o = run(&[
        "lab", "exec", &name, "c1", "--", "ip", "-o", "link", "show", "lan-sw",
    ]);
    assert!(stdout(&o).contains("mtu 9000"), "{}", stdout(&o));
    assert!(run(&["lab", "down", &name]).status.success());
    assert_gone(&m, &links_before);
}

#[test]
fn ctrl_c_while_a_lab_is_being_built_removes_what_was_built() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let links_before = root_links();
    let dir = TempDir::new("lab-int-build");
    let file = write(&dir, "three.toml", THREE);
    let name = format!("it-intb-{}", std::process::id());
    let _down = Down(name.clone());
    // The witness's 3 s stream keeps it building long enough.
    let mut child = Command::new(env!("CARGO_BIN_EXE_netrig"))
        .args(["lab", "up", &file, "--name", &name, "--witness-length", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // The state file is written before the first namespace: wait for the agents to be recorded.
    let deadline = Instant::now() + Duration::from_secs(20);
    let m = loop {
        let o = run(&["lab", "status", &name, "--json"]);
        if o.status.success() {
            let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
            let m = made(&v[0]);
            if m.pids.len() == 3 {
                break m;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the lab's agents were not recorded within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let st = wait_bounded(&mut child, 20);
    assert_eq!(st.code(), Some(130), "Ctrl-C's exit status while building");
    assert_gone(&m, &links_before);
}

/// Two hosts joined by one link whose direction a → b has `shape` (netrig's path element forced,
/// so it is tested on kernels with netem too).
fn element_lab(shape: &str) -> String {
    format!(
        "[lab.hosts.a]\n[lab.hosts.b]\n[[lab.links]]\nends = [\"a\", \"b\"]\n[lab.links.shape.a]\nelement = true\n{shape}\n"
    )
}

/// The element's counters of direction a → b, as `lab status --json` reads them.
fn element_counters(name: &str) -> Value {
    let s = state(name);
    let c = s["elements"][0]["counters"]
        .as_array()
        .expect("the element's counters")
        .iter()
        .find(|c| c["from"] == "a")
        .expect("direction a → b")
        .clone();
    c
}

fn lab_json(name: &str, host: &str, args: &[&str]) -> Value {
    let mut a = vec!["lab", "exec", name, host, "--", "netrig"];
    a.extend(args);
    a.push("--json");
    let o = run(&a);
    assert!(o.status.success(), "{a:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("a result")
}

#[test]
fn the_path_element_delays_a_link_by_what_is_configured_behind_htb_s_rate() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let links_before = root_links();
    let dir = TempDir::new("lab-element-delay");
    let file = write(
        &dir,
        "delay.toml",
        &element_lab("rate = \"50M\"\ndelay = \"10ms\""),
    );
    let name = format!("it-eldelay-{}", std::process::id());
    let _down = Down(name.clone());
    let up = run(&["lab", "up", &file, "--name", &name, "--no-witness"]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let text = stdout(&run(&["lab", "status", &name]));
    assert!(
        text.contains("shaped a → b on a-b: htb rate 50000000bit + netrig element (delay)"),
        "{text}"
    );
    let s = state(&name);
    let mut m = made(&s);
    assert_eq!(m.ns.len(), 3, "two hosts and the element's namespace");
    m.pids.extend(s["elements"][0]["pid"].as_u64());
    // One direction delayed by 10 ms: the round trip is 10 ms, within 1 ms + 5 %.
    let v = lab_json(&name, "a", &["tcp-rr", "-H", "198.18.0.2", "-l", "1"]);
    let p50 = v["summary"]["latency_us"]["p50"].as_f64().unwrap();
    assert!(
        (p50 - 10_000.0).abs() <= 1_000.0 + 500.0,
        "tcp-rr round trip through a 10 ms element: {p50} µs"
    );
    // htb's 50 Mbit/s in front of the element: TCP's payload within 5 % of the 47.82 Mbit/s it
    // carries (slow start at 10 ms left out). htb's bucket is 1 ms at the rate, so a CPU taken
    // away for longer (another test's load, the hypervisor's steal) is capacity htb never gets
    // back: 43-47 Mbit/s was measured here beside a busy loop on the other core, and 44.4-44.8
    // at 13 % steal, with no loss and a full queue, so the element was not what held it back.
    // The element carries the rate if one of two runs reaches it, short by no more than the
    // steal its run reports (lab_common::steal); one that cannot fails both.
    let mut seen = Vec::new();
    let reached = |bps: f64, steal: f64| bps <= 1.05 * 47.82e6 && bps >= (0.95 - steal) * 47.82e6;
    for _ in 0..2 {
        let v = lab_json(
            &name,
            "a",
            &["tcp-stream", "-H", "198.18.0.2", "-l", "2.5", "--omit", "0.5"],
        );
        let got = (
            v["summary"]["throughput_bps"].as_f64().unwrap(),
            crate::lab_common::steal(&v),
        );
        seen.push(got);
        if reached(got.0, got.1) {
            break;
        }
    }
    assert!(
        seen.iter().any(|&(bps, steal)| reached(bps, steal)),
        "through 50 Mbit/s and the element (bit/s, steal): {seen:?}"
    );
    let c = element_counters(&name);
    assert!(c["delayed"].as_u64().unwrap() > 50, "{c}");
    assert_eq!(c["dropped"].as_u64(), Some(0), "{c}");
    let down = run(&["lab", "down", &name]);
    assert!(down.status.success(), "lab down: {}", stderr(&down));
    assert_gone(&m, &links_before);
}

#[test]
fn loss_duplicates_and_reordering_by_the_path_element_are_what_udp_stream_counts() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-element-loss");
    let file = write(
        &dir,
        "loss.toml",
        &element_lab("delay = \"2ms\"\nloss = 10.0\nduplicate = 5.0\nreorder = 10.0"),
    );
    let name = format!("it-elloss-{}", std::process::id());
    let _down = Down(name.clone());
    let up = run(&["lab", "up", &file, "--name", &name, "--no-witness"]);
    assert!(up.status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let before = element_counters(&name)["udp"].clone();
    let rcvbuf_before = crate::lab_common::udp_snmp(&name, "b", "RcvbufErrors");
    let noports_before = crate::lab_common::udp_snmp(&name, "b", "NoPorts");
    // One datagram a frame (no GSO), paced at 20 Mbit/s: about 3400 datagrams in 2 s.
    let v = lab_json(
        &name,
        "a",
        &[
            "udp-stream",
            "-H",
            "198.18.0.2",
            "-l",
            "2",
            "-b",
            "20M",
            "--no-gso",
        ],
    );
    // What the element still held when the receiver stopped reaches b after it (counted there
    // as Udp NoPorts, the flow's socket gone): the counters are read once that has settled.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after = element_counters(&name)["udp"].clone();
    let d = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    let u = &v["summary"]["udp"];
    let sent = u["sent_datagrams"].as_u64().unwrap() as f64;
    assert!(sent > 1000.0, "{u}");
    // The element's loss within 4 standard deviations of the binomial's mean, judged on what it
    // saw and dropped: udp-stream's loss may also hold what the receiver's socket had no room for
    // on a loaded machine (counted below as the receiving host's Udp RcvbufErrors).
    let (seen, gone) = (d("received") as f64, d("dropped") as f64);
    let sd = (seen * 0.1 * 0.9).sqrt();
    assert!(
        (gone - 0.1 * seen).abs() < 4.0 * sd,
        "the element dropped {gone} of {seen}: not 10 % within 4 sigma ({sd:.1})"
    );
    let rcvbuf = crate::lab_common::udp_snmp(&name, "b", "RcvbufErrors") - rcvbuf_before;
    // On a loaded machine the element (a debug build here) may fall behind by more than the
    // receiver's drain (300 ms of quiet): what it forwarded after the receiver had stopped is
    // lost to the run, not dropped by the element, and b's kernel counts it at a closed port.
    // (A full local suite once saw 1,788 lost against 336 dropped.)
    let late = crate::lab_common::udp_snmp(&name, "b", "NoPorts") - noports_before;
    // What the receiver counts is what the element did, datagram for datagram, but for the data
    // hellos the client repeats during set-up: they are UDP frames too, and the element may drop,
    // duplicate or hold them back like any other. The frames it saw beyond the data datagrams
    // bound the difference (CI once saw 387 dropped against 386 lost, with 2 hellos through).
    let extra = d("received").saturating_sub(u["sent_datagrams"].as_u64().unwrap());
    assert!(extra <= 20, "{extra} frames beyond the data: {u} {after}");
    for (ours, theirs) in [
        ("lost_datagrams", "dropped"),
        ("duplicates", "duplicated"),
        ("out_of_order", "reordered"),
    ] {
        let n = u[ours].as_u64().unwrap();
        let e = d(theirs);
        let elsewhere = if ours == "lost_datagrams" {
            rcvbuf + late
        } else {
            0
        };
        // What the receiver's socket had no room for, the receiver never sees: a duplicate copy
        // dropped there is one duplicate fewer (CI saw 116 against 137 with 592 dropped there),
        // and a dropped datagram that the element had held back, or one that had overtaken
        // others, takes away one or more out-of-order arrivals. With such drops the order is
        // judged one way only: the receiver never counts more than the element made.
        let unseen = match ours {
            "duplicates" => late + rcvbuf,
            "out_of_order" if rcvbuf > 0 => e,
            _ => late,
        };
        assert!(
            n <= e + extra + elsewhere && e <= n + extra + unseen,
            "{ours} {n} against the element's {theirs} {e} (with {extra} frames beyond the data, {rcvbuf} lost for want of room in the receiver, {late} arrived after it had stopped, {unseen} the receiver cannot have seen): {u} {after}"
        );
    }
    assert!(d("duplicated") > 0 && d("reordered") > 0, "{after}");
    let text = stdout(&run(&["lab", "status", &name]));
    assert!(text.contains("element a → b on a-b"), "{text}");
    assert!(run(&["lab", "down", &name]).status.success());
}
