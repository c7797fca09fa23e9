//! The lab's topology (docs/LAB.md): parallel links balanced per flow or per packet, DSCP classes
//! on a router's egress (the scavenger study's two questions), conntrack_max. Measured through
//! labs built by `netrig lab up`, judged with margins.
//!
//! These need root (network namespaces). Where they cannot run they skip, saying why — except
//! under CI (`CI` set), where they fail.

use crate::helpers::{run, stderr, stdout, TempDir};
use serde_json::Value;
use std::process::Command;

// One lab test at a time, across all the lab test files (crate::lab_common).
use crate::lab_common::LAB_TESTS as ONE_AT_A_TIME;

/// Can labs be built here? Skips (false) when not, unless under CI, where it panics.
fn can_build() -> bool {
    crate::lab_common::can_build(&["ip", "nft"])
}

/// Removes the lab when the test ends, however it ends.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_netrig"))
            .args(["lab", "down", &self.0])
            .output();
    }
}

fn write(dir: &TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn up(file: &str, name: &str) {
    let o = run(&["lab", "up", file, "--name", name, "--no-witness"]);
    assert!(o.status.success(), "lab up: {}\n{}", stdout(&o), stderr(&o));
}

/// The lab's state as `lab status NAME --json` prints it.
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
    assert!(
        o.status.success(),
        "{a:?}: {}\n{}\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    serde_json::from_str(&stdout(&o)).expect("a result")
}

/// An interface's counter (`tx_bytes`, `tx_packets`) in a namespace.
fn counter(ns: &str, dev: &str, what: &str) -> u64 {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/{dev}/statistics/{what}"))
        .output()
        .expect("ip netns exec");
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{ns} {dev} {what}: {}", String::from_utf8_lossy(&o.stderr)))
}

/// What r1 sent on each of its two links to r2 during `f`.
fn split(ns: &str, what: &str, f: impl FnOnce()) -> (u64, u64) {
    let before = (counter(ns, "to-r2", what), counter(ns, "to2-r2", what));
    f();
    (
        counter(ns, "to-r2", what) - before.0,
        counter(ns, "to2-r2", what) - before.1,
    )
}

/// c — r1 =(two links)= r2 — s, `extra` added to the two parallel links' tables.
fn parallel(first: &str, second: &str) -> String {
    format!(
        "[lab.hosts.c]\n[lab.hosts.r1]\nrouter = true\n[lab.hosts.r2]\nrouter = true\n[lab.hosts.s]\n\
         [[lab.links]]\nends = [\"c\", \"r1\"]\n\
         [[lab.links]]\nends = [\"r1\", \"r2\"]\n{first}\n\
         [[lab.links]]\nends = [\"r1\", \"r2\"]\n{second}\n\
         [[lab.links]]\nends = [\"r2\", \"s\"]\n"
    )
}

fn namespaces() -> Vec<String> {
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

/// `lab down`, then none of the lab's namespaces (hosts, path elements: with them their
/// interfaces, qdiscs, nftables tables, rules and routes) is left.
fn down_and_gone(name: &str, s: &Value) {
    let o = run(&["lab", "down", name]);
    assert!(o.status.success(), "lab down: {}", stderr(&o));
    let made: Vec<String> = s["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert!(!made.is_empty());
    let left: Vec<String> = namespaces().into_iter().filter(|n| made.contains(n)).collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

fn host_ns(s: &Value, h: &str) -> String {
    s["hosts"][h]["ns"].as_str().unwrap().to_string()
}

fn addr(s: &Value, h: &str, family6: bool) -> String {
    s["hosts"][h]["addrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().split('/').next().unwrap().to_string())
        .find(|a| a.contains(':') == family6)
        .unwrap()
}

#[test]
fn parallel_links_per_flow_spread_many_flows_and_keep_one_flow_on_one_link() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-ecmp");
    let file = write(&dir, "ecmp.toml", &parallel("balance = \"flow\"", ""));
    let name = format!("it-topo-ecmp-{}", std::process::id());
    let _down = Down(name.clone());
    up(&file, &name);
    let s = state(&name);
    let names: Vec<&str> = s["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c-r1", "r1-r2", "r1-r2.2", "r2-s"]);
    assert_eq!(s["groups"][0]["balance"], "Flow", "{}", s["groups"]);
    let text = stdout(&run(&["lab", "status", &name]));
    assert!(
        text.contains("parallel links r1-r2, r1-r2.2 between r1 and r2: per flow: an ECMP route, L4 hash"),
        "{text}"
    );
    let r1 = host_ns(&s, "r1");
    // 16 flows from c to s, forwarded by r1: the L4 hash spreads them over both links (all 16
    // on one link: a chance of 2 in 65,536), in both families.
    for six in [false, true] {
        let to = addr(&s, "s", six);
        let (a, b) = split(&r1, "tx_bytes", || {
            lab_json(&name, "c", &["tcp-stream", "-H", &to, "-l", "1", "-P", "16"]);
        });
        let total = (a + b) as f64;
        assert!(total > 1e6, "{to}: {a} + {b} bytes");
        assert!(
            a as f64 > 0.05 * total && b as f64 > 0.05 * total,
            "{to}: 16 flows not spread over both links: {a} and {b} bytes"
        );
    }
    // From r1 itself (its own traffic over the group): every flow leaves from one address
    // whichever link it takes, so the agent takes all 16 as the test's (it refuses data
    // connections from another address than the control connection's). Where the kernel
    // prefers the next hop whose interface holds the source address (6.x), they all stay on
    // that link: an end's own traffic is not spread per flow, forwarded traffic is (above).
    let to = addr(&s, "s", false);
    let (a, b) = split(&r1, "tx_bytes", || {
        lab_json(&name, "r1", &["tcp-stream", "-H", &to, "-l", "1", "-P", "16"]);
    });
    assert!(a + b > 1_000_000, "r1's 16 flows: {a} and {b} bytes");
    // One flow stays on one link (the test's control connection may take the other).
    let (a, b) = split(&r1, "tx_bytes", || {
        lab_json(&name, "c", &["tcp-stream", "-H", &to, "-l", "1"]);
    });
    let (hi, lo) = (a.max(b) as f64, a.min(b) as f64);
    assert!(hi > 1e6 && lo < 0.02 * hi, "one flow split: {a} and {b} bytes");
}

#[test]
fn the_witness_measures_each_of_two_parallel_links_by_itself() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-two-rates");
    let file = write(
        &dir,
        "two.toml",
        "[lab.hosts.a]\n[lab.hosts.b]\n\
         [[lab.links]]\nends = [\"a\", \"b\"]\n[lab.links.shape.a]\nrate = \"50M\"\n\
         [[lab.links]]\nends = [\"a\", \"b\"]\n[lab.links.shape.a]\nrate = \"20M\"\n",
    );
    let name = format!("it-topo-two-{}", std::process::id());
    let _down = Down(name.clone());
    let o = run(&["lab", "up", &file, "--name", &name, "--witness-length", "1"]);
    assert!(o.status.success(), "lab up: {}\n{}", stdout(&o), stderr(&o));
    let s = state(&name);
    let w = s["witness"].as_array().unwrap();
    assert_eq!(w.len(), 2, "{w:?}");
    for (link, rate) in [("a-b", 50e6), ("a-b.2", 20e6)] {
        let row = w
            .iter()
            .find(|r| r["link"] == link)
            .unwrap_or_else(|| panic!("{link}: {w:?}"));
        let m = row["measured_goodput_bps"].as_f64().expect("measured");
        let ceiling = rate * 1448.0 / 1514.0;
        assert!(
            (m / ceiling - 1.0).abs() < 0.10,
            "{link}: measured {m} against {ceiling}: {row}"
        );
    }
}

#[test]
fn parallel_links_per_packet_split_one_udp_flow_evenly_and_unequal_delays_reorder_it() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-rr");
    // Round robin; what r1 sends waits 1 ms on the first link and 4 ms on the second.
    let file = write(
        &dir,
        "rr.toml",
        &parallel(
            "balance = \"packet\"\n[lab.links.shape.r1]\ndelay = \"1ms\"\nelement = true",
            "[lab.links.shape.r1]\ndelay = \"4ms\"\nelement = true",
        ),
    );
    let name = format!("it-topo-rr-{}", std::process::id());
    let _down = Down(name.clone());
    up(&file, &name);
    let s = state(&name);
    let r1 = host_ns(&s, "r1");
    // Forwarded (c's datagrams through r1, IPv4 and IPv6) and local (r1's own): one flow each,
    // 20 Mbit/s.
    for (from, six) in [("c", false), ("c", true), ("r1", false)] {
        let to = addr(&s, "s", six);
        let mut u = Value::Null;
        let (a, b) = split(&r1, "tx_packets", || {
            u = lab_json(
                &name,
                from,
                &["udp-stream", "-H", &to, "-l", "1", "-b", "20M", "--no-gso"],
            );
        });
        let u = &u["summary"]["udp"];
        let got = u["received_datagrams"].as_u64().unwrap();
        assert!(got > 1000, "{from}: {u}");
        let share = a as f64 / (a + b) as f64;
        assert!(
            (0.45..=0.55).contains(&share),
            "{from} to {to}: one flow's packets not split evenly: {a} and {b}"
        );
        // Every other datagram takes the slower link: about half arrive behind a later one.
        let ooo = u["out_of_order"].as_u64().unwrap();
        assert!(
            ooo as f64 > 0.2 * got as f64,
            "{from} to {to}: {ooo} of {got} datagrams out of order over links of 1 and 4 ms"
        );
    }
    down_and_gone(&name, &s);
}

/// The scavenger study's path: client — router — server, the router's egress towards the
/// server 155 Mbit/s with best effort beside a scavenger class (CS1, 1 % guaranteed, may
/// borrow all), 58 ms each way (netrig's path element where there is no netem).
const QBSS: &str = r#"
[lab.hosts.client]
[lab.hosts.router]
router = true
[lab.hosts.server]
[[lab.links]]
ends = ["client", "router"]
[[lab.links]]
ends = ["router", "server"]
[lab.links.shape.router]
rate = "155M"
delay = "58ms"
classes = [
  { name = "best-effort" },
  { name = "scavenger", dscp = "CS1", rate = "1%" },
]
[lab.links.shape.server]
delay = "58ms"
"#;

fn class_bytes(name: &str, class: &str) -> u64 {
    state(name)["classes"]
        .as_array()
        .expect("classes in lab status --json")
        .iter()
        .find(|c| c["class"] == class)
        .unwrap_or_else(|| panic!("class {class}"))["sent_bytes"]
        .as_u64()
        .unwrap()
}

#[test]
fn the_scavenger_yields_the_link_to_best_effort_and_takes_all_of_it_alone() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-qbss");
    let file = write(&dir, "qbss.toml", QBSS);
    let name = format!("it-topo-qbss-{}", std::process::id());
    let _down = Down(name.clone());
    up(&file, &name);
    let s = state(&name);
    let to = addr(&s, "server", false);
    // What 155 Mbit/s carries of TCP payload at MTU 1500 (1448 of every 1514 bytes).
    let link = 155e6 * 1448.0 / 1514.0;
    // Buffers of twice the bandwidth-delay product; slow start (about 1 s here, longer on a busy
    // machine) left out: 3 s of 7.
    let stream = |dscp: Option<&str>| {
        let mut a = vec![
            "tcp-stream",
            "-H",
            &to,
            "-l",
            "7",
            "--omit",
            "3",
            "-s",
            "5M",
            "-S",
            "5M",
        ];
        if let Some(d) = dscp {
            a.extend(["--dscp", d]);
        }
        lab_json(&name, "client", &a)["summary"]["throughput_bps"]
            .as_f64()
            .unwrap()
    };
    let scav_before = class_bytes(&name, "scavenger");
    // Question 1: both at once, started together: best effort keeps at least 90 % of the link.
    let (be, sc) = std::thread::scope(|t| {
        let be = t.spawn(|| stream(None));
        let sc = t.spawn(|| stream(Some("8")));
        (be.join().unwrap(), sc.join().unwrap())
    });
    assert!(
        be >= 0.90 * link,
        "best effort got {:.1} Mbit/s beside the scavenger's {:.1}, under 90 % of {:.1}",
        be / 1e6,
        sc / 1e6,
        link / 1e6
    );
    // The scavenger's packets went to its class.
    let scav_sent = class_bytes(&name, "scavenger") - scav_before;
    assert!(scav_sent > 0, "nothing in the scavenger class");
    eprintln!(
        "both at once: best effort {:.1} Mbit/s, scavenger {:.1} Mbit/s",
        be / 1e6,
        sc / 1e6
    );
    // Question 2: the scavenger alone takes at least 80 % of it.
    let alone = stream(Some("8"));
    eprintln!("the scavenger alone: {:.1} Mbit/s", alone / 1e6);
    assert!(
        alone >= 0.80 * link,
        "the scavenger alone got {:.1} Mbit/s, under 80 % of {:.1}",
        alone / 1e6,
        link / 1e6
    );
    // Over IPv6 the traffic class is matched too: what a CS1 stream sends lands in the class.
    let before = class_bytes(&name, "scavenger");
    let to6 = addr(&s, "server", true);
    let v = lab_json(
        &name,
        "client",
        &["tcp-stream", "-H", &to6, "-l", "1", "--dscp", "8"],
    );
    let sent = v["summary"]["bytes"].as_f64().unwrap();
    let into = (class_bytes(&name, "scavenger") - before) as f64;
    assert!(
        sent > 1e5 && into >= 0.95 * sent,
        "IPv6 CS1: {sent} bytes received, {into} bytes through the scavenger class"
    );
    let text = stdout(&run(&["lab", "status", &name]));
    assert!(
        text.contains("class scavenger (dscp 8) on router-server (router → server), 1:11: sent"),
        "{text}"
    );
}

#[test]
fn conntrack_max_is_set_inside_a_host_or_refused_by_name() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-ctmax");
    let file = write(
        &dir,
        "ct.toml",
        "[lab.hosts.a]\nconntrack = true\nconntrack_max = 4099\n[lab.hosts.b]\n[[lab.links]]\nends = [\"a\", \"b\"]\n",
    );
    let name = format!("it-topo-ct-{}", std::process::id());
    let _down = Down(name.clone());
    let host_before = std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_max").ok();
    let o = run(&["lab", "up", &file, "--name", &name, "--no-witness"]);
    if o.status.success() {
        let s = state(&name);
        let ns = host_ns(&s, "a");
        let got = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-n",
                "net.netfilter.nf_conntrack_max",
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&got.stdout).trim(), "4099");
    } else {
        // This kernel keeps the table's size host-wide: refused by name, nothing built.
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("conntrack_max on host a: needs net.netfilter.nf_conntrack_max settable in a network namespace"),
            "{}",
            stderr(&o)
        );
        let st = run(&["lab", "status", &name]);
        assert!(!st.status.success(), "a refused lab was built");
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_max").ok(),
        host_before,
        "the host's nf_conntrack_max changed"
    );
    let probes: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.ends_with(".ctprobe"))
        .collect();
    assert!(probes.is_empty(), "the probe's namespace left: {probes:?}");
}

/// A priority class for EF: a tcp-rr probe marked EF skips the deep best-effort queue a bulk
/// stream fills; the same probe unmarked waits in it.
#[test]
fn an_ef_class_with_priority_keeps_its_round_trip_while_best_effort_queues() {
    if !can_build() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("lab-ef");
    // The router's egress: 20 Mbit/s with a 600 kB best-effort queue, 240 ms when full (in
    // bytes: the router forwards GRO's super-packets; a queue on the sender's own egress would
    // only hold it back), filled by a Reno stream (BBR, this machine's default, keeps queues
    // short).
    let file = write(
        &dir,
        "ef.toml",
        r#"
[lab.hosts.a]
[lab.hosts.r]
router = true
[lab.hosts.b]
[[lab.links]]
ends = ["a", "r"]
[[lab.links]]
ends = ["r", "b"]
[lab.links.shape.r]
rate = "20M"
limit_bytes = 600000
classes = [
  { name = "best-effort" },
  { name = "voice", dscp = "EF", rate = "2M", ceil = "2M", prio = 0, limit_packets = 20 },
]
"#,
    );
    let name = format!("it-topo-ef-{}", std::process::id());
    let _down = Down(name.clone());
    up(&file, &name);
    let s = state(&name);
    let to = addr(&s, "b", false);
    let probe = |dscp: Option<&str>| {
        let mut a = vec!["tcp-rr", "-H", &to, "-l", "3"];
        if let Some(d) = dscp {
            a.extend(["--dscp", d]);
        }
        lab_json(&name, "a", &a)["summary"]["latency_us"]["p50"]
            .as_f64()
            .unwrap()
    };
    // A bulk stream fills the queue; after 1.5 s, the two probes at once (their control
    // connections are not marked: they wait in the queue too, so each takes a while to start).
    let (ef, be) = std::thread::scope(|t| {
        let bulk = t.spawn(|| lab_json(&name, "a", &["tcp-stream", "-H", &to, "-l", "9", "--cc", "reno"]));
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let ef = t.spawn(|| probe(Some("46")));
        let be = t.spawn(|| probe(None));
        let r = (ef.join().unwrap(), be.join().unwrap());
        bulk.join().unwrap();
        r
    });
    eprintln!("tcp-rr median round trip beside a bulk stream: EF {ef:.0} µs, best effort {be:.0} µs");
    // Unmarked, the probe waits behind the queue (Reno keeps it between about half and full).
    assert!(
        be > 50_000.0,
        "best-effort probe's median round trip {be} µs: no queue?"
    );
    assert!(
        ef < 0.2 * be && ef < 20_000.0,
        "EF probe's median round trip {ef} µs against best effort's {be} µs"
    );
    let voice = state(&name)["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == "voice")
        .unwrap()
        .clone();
    assert!(voice["sent_packets"].as_u64().unwrap() > 100, "{voice}");
}
