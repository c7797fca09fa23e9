//! Issue #39, study 5 (the IA64 Linux TCP/IP stack), its HTTP half: `netrig run plans/ia64.toml
//! --quick` builds the lab (a server host and two client hosts on one LAN), sweeps the request
//! rate against netrig's HTTP server and nginx from one and two client hosts, through loopback,
//! and with the server host's conntrack table full, and answers in words. The shape checked:
//! two clients reach a higher saturation point than one or the reason they do not is named;
//! the full table shows in the server host's conntrack counters and in the client's connection
//! figures; the quick form stays within its 2 minutes; nothing is left behind.
//!
//! Needs root, ip, nft and nginx; skips saying why where it cannot run, fails under CI.

use crate::lab_common::LAB_TESTS;
use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The quick form's bound (the 2 minutes) and what a loaded machine may add.
const QUICK: Duration = Duration::from_secs(120);
const SLACK: Duration = Duration::from_secs(45);

fn finding<'a>(answer: &'a Value, topic: &str) -> &'a Value {
    answer["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["topic"] == topic)
        .unwrap_or_else(|| panic!("no finding {topic:?} in {answer:#}"))
}

#[test]
fn the_quick_form_answers_where_the_stack_stops_scaling_and_what_a_full_conntrack_table_does() {
    let _one = LAB_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    if !crate::lab_common::can_build(&["ip", "nft"]) {
        return;
    }
    if !std::path::Path::new("/usr/sbin/nginx").exists() {
        crate::skip::missing("the IA64 plan needs nginx (apt-get install nginx-light)");
        return;
    }
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/ia64.toml");
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_netrig"))
        .args(["run", plan, "--quick", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > QUICK + SLACK {
            // Ctrl-C: netrig removes its lab, then exits.
            // SAFETY: signalling the child we started.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let _ = child.wait();
            panic!(
                "the quick form ran over {:?}: {}",
                QUICK + SLACK,
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = t0.elapsed();
    let err = err.join().unwrap();
    assert!(status.success(), "netrig run failed: {err}");
    let doc: Value = serde_json::from_slice(&out.join().unwrap()).unwrap();
    eprintln!("the quick form took {:.1} s", took.as_secs_f64());
    assert!(
        took <= QUICK + SLACK,
        "the quick form took {took:?}, over its 2 minutes and {SLACK:?} for a loaded machine"
    );
    let answer = &doc["answer"];
    assert_eq!(answer["study"], "ia64");
    assert_eq!(answer["quick"], true);
    assert!(!answer["summary"].as_array().unwrap().is_empty(), "{answer:#}");

    // Two client hosts reach a higher saturation point than one, or the reason is named.
    let two = finding(answer, "netrig: two client hosts against one");
    let text = two["text"].as_str().unwrap();
    match two["verdict"].as_str().unwrap() {
        "holds" => assert!(text.contains("Two client hosts reached a higher saturation point")),
        "tie" => assert!(text.contains("does not reach the point"), "{text}"),
        "does not hold" => assert!(text.contains("At that point"), "no reason named: {text}"),
        v => panic!("verdict {v}: {text}"),
    }

    // The full table: the server host's counters and the client's connections.
    let ct = finding(answer, "conntrack full");
    assert_eq!(ct["verdict"], "holds", "{ct:#}");
    let f = &ct["figures"];
    assert!(f["conntrack_drop"].as_f64().unwrap() > 0.0, "{ct:#}");
    assert!(
        f["conntrack_peak"].as_f64().unwrap() >= f["conntrack_max"].as_f64().unwrap() - 1000.0,
        "the table was not full: {ct:#}"
    );
    assert!(
        f["connections_failed"].as_f64().unwrap() > 0.0
            || f["replies_per_s"].as_f64().unwrap() < 0.95 * f["saturation_per_s"].as_f64().unwrap(),
        "the client saw nothing of it: {ct:#}"
    );
    // Below the table's size it kept up: the collapse is the table's, not the rate's.
    let test = &doc["tests"][0];
    let first = &test["points"][0]["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["arm"] == "ct-full")
        .unwrap()["runs"][0];
    assert_eq!(
        first["summary"]["connect_errors"]["timed_out"], 0,
        "{}",
        first["summary"]
    );
    assert!(
        first["server_host"]["conntrack"]["start"].as_u64().unwrap() > 200_000,
        "filled before the run"
    );
    // Two client hosts offer together what one would (each its half), and the agent watched.
    let arms = test["points"][0]["arms"].as_array().unwrap();
    let two = arms.iter().find(|a| a["arm"] == "netrig-2c").unwrap();
    let offered = two["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["metric"] == "offered_per_s")
        .unwrap()["mean"]
        .as_f64()
        .unwrap();
    assert!(
        (90.0..=110.0).contains(&offered),
        "two clients offered {offered}/s at 100/s"
    );
    assert_eq!(two["clients"][0]["clients"].as_array().unwrap().len(), 2);
    for a in arms {
        assert!(
            a["runs"][0]["server_host"]["cpu"].is_object(),
            "arm {}: no server host view",
            a["arm"]
        );
    }
    // The other arms ran with tracking off: their table is empty.
    let base = &test["points"][0]["arms"][0]["runs"][0]["server_host"]["conntrack"];
    assert_eq!(base["peak"], 0, "{base}");

    // The SYN flood from a1: it shows in the server host's counters (SYN cookies, overflows or
    // drops, SYN_RECV sockets); whether the client saw it is the finding's verdict, said either
    // way with the figures (a debug flood on this 2-core machine may or may not hold the server).
    let fl = finding(
        answer,
        "a SYN flood shows in the server's counters and the client's figures",
    );
    let v = fl["verdict"].as_str().unwrap();
    assert!(v == "holds" || v == "does not hold", "{fl:#}");
    let f = &fl["figures"];
    let shown = [
        "syncookies_sent",
        "listen_overflows",
        "listen_drops",
        "reqq_full_drops",
    ]
    .iter()
    .map(|k| f[*k].as_f64().unwrap())
    .sum::<f64>();
    assert!(
        shown > 0.0,
        "the flood did not show in the server's counters: {fl:#}"
    );
    assert!(f["syn_recv_peak"].as_f64().unwrap() > 0.0, "{fl:#}");
    let stop = doc["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "teardown" && c["arm"] == "syn-flood")
        .unwrap();
    assert!(stop["output"].as_str().unwrap().contains("SYNs in"), "{stop}");

    // The arm's commands ran in s1 and were told the lab's name (NETRIG_LAB) and netrig (NETRIG).
    let lab = doc["lab"]["name"].as_str().unwrap();
    let setup = doc["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phase"] == "setup" && c["arm"] == "ct-full")
        .unwrap();
    assert_eq!(setup["host"], "s1");
    let out = setup["output"].as_str().unwrap();
    assert!(out.contains(&format!("conntrack on in lab {lab},")), "{out}");
    assert!(out.contains("idle established entries inserted"), "{out}");

    // Nothing left: the lab, its nginx and its files.
    for ns in doc["lab"]["namespaces"].as_array().unwrap() {
        let ns = ns.as_str().unwrap();
        assert!(
            !std::path::Path::new("/run/netns").join(ns).exists(),
            "{ns} is left"
        );
        assert!(
            !std::path::Path::new(&format!("/tmp/netrig-ia64-nginx-{ns}")).exists(),
            "the nginx files of {ns} are left"
        );
    }
}
