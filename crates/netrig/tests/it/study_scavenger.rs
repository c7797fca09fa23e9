//! plans/scavenger.toml in its quick form (the scavenger service and load balancing study,
//! docs/studies/scavenger.md): the lab built, every test and group run, the answer written, and
//! its shape checked — the scavenger yields to best effort and, given a long enough queue, fills
//! the idle path; per-packet load balancing reorders a UDP flow where per-flow does not.

use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `netrig ARGS`, killed with SIGINT (which removes its lab) after `limit`.
fn run_for(args: &[&str], limit: Duration) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_netrig"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netrig");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let (out, err) = (
        drain(Box::new(child.stdout.take().unwrap())),
        drain(Box::new(child.stderr.take().unwrap())),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            // SAFETY: the pid of a child of ours that has not been waited for.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let _ = child.wait();
            panic!("netrig {args:?} ran over {limit:?}: {}", err.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status.success(), out.join().unwrap(), err.join().unwrap())
}

fn finding<'a>(v: &'a Value, topic: &str) -> &'a Value {
    v["answer"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["topic"] == topic)
        .unwrap_or_else(|| panic!("no finding {topic:?}: {:#}", v["answer"]))
}

fn fig(f: &Value, name: &str) -> f64 {
    f["figures"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} in {f:#}"))
}

#[test]
fn the_scavenger_study_s_quick_form_yields_to_best_effort_fills_the_path_and_shows_reordering() {
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !crate::lab_common::can_build(&["ip", "tc", "ethtool", "nft"]) {
        return;
    }
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/scavenger.toml");
    let study = || {
        let t0 = Instant::now();
        // The quick form takes about 2 minutes; a loaded CI machine gets 4.
        let (ok, out, err) = run_for(&["run", plan, "--quick", "--json"], Duration::from_secs(240));
        let took = t0.elapsed();
        eprintln!("the quick form took {took:?}");
        assert!(ok, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["complete"], true, "{}", v["stopped"]);
        let id = v["lab"]["id"].as_str().unwrap().to_string();
        let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&netns.stdout).contains(&format!("nr{id}")),
            "the lab {id} was left behind"
        );
        v
    };
    // The quick form runs each arm once. On a host whose hypervisor took 13 % of the CPU, best
    // effort beside the scavenger once got 66 % of its rate alone (1,190 retransmits), where
    // the full form kept 99.0 % (docs/STUDIES.md): such a run is measured once more, and the
    // second is judged whole. A scavenger that does not yield fails both.
    let mut v = study();
    let topic = "best effort beside a scavenger TCP flow";
    if finding(&v, topic)["verdict"] != "holds" {
        eprintln!(
            "the scavenger finding did not hold, measured once more: {:#}",
            finding(&v, topic)
        );
        v = study();
    }
    let a = &v["answer"];
    assert_eq!(a["study"], "scavenger");
    assert_eq!(a["quick"], true);
    assert!(a["summary"].as_array().unwrap().len() >= 4, "{a:#}");

    // The scavenger yields to best effort: beside it best effort keeps >= 90 % of its rate
    // alone, and the scavenger gets a small share (its 1 % and what best effort leaves).
    let y = finding(&v, topic);
    assert_eq!(y["verdict"], "holds", "{y:#}");
    assert!(fig(y, "ratio_pct") >= 90.0, "{y:#}");
    assert!(
        fig(y, "scavenger_mbps") < 0.1 * fig(y, "best_effort_beside_mbps"),
        "{y:#}"
    );

    // WRED, not the queue's limit, holds a Reno flow back: with the 1024-packet queue drop-tail
    // the scavenger fills the idle path (>= 80 % of best effort alone); with WRED at the same
    // limit, and at the study's 64 packets, it stays at least 20 points below that. Whether the
    // longer WRED queue does better than the 64-packet one is the full form's question (10 s
    // windows: 35.5 % against 54.3 %); the quick form's 3 s are 26 round trips, in which a Reno
    // flow that halved its window after slow start regains only 26 of the ~1,300 packets the
    // path holds, so both queues show their slow start's exit (a CI run gave 33.0 % and 32.8 %).
    let q = finding(&v, "the queue limit explains it");
    assert_ne!(q["verdict"], "withheld", "{q:#}");
    let w = finding(&v, "WRED holds the scavenger below the path");
    assert_eq!(w["verdict"], "holds", "{w:#}");
    assert!(fig(w, "drop_tail_ratio_pct") >= 80.0, "{w:#}");
    // At least the study's own margin of 10 points (CI runs gave about 50; a run at 13 % steal
    // gave 85.4 against 65.4).
    assert!(
        fig(w, "drop_tail_ratio_pct") - fig(w, "wred_ratio_pct") >= 10.0,
        "{w:#}"
    );
    assert!(
        fig(w, "drop_tail_ratio_pct") - fig(q, "first_ratio_pct") >= 10.0,
        "{q:#} {w:#}"
    );

    // Per packet, about half of a 20 Mbit/s UDP flow's datagrams arrive out of order over
    // circuits of 58 and 59 ms; per flow none.
    let r = finding(&v, "per-packet load balancing reorders a UDP flow");
    assert_eq!(r["verdict"], "holds", "{r:#}");
    assert!(fig(r, "per_packet_out_of_order_pct") >= 20.0, "{r:#}");
    assert!(fig(r, "per_flow_out_of_order_pct") <= 1.0, "{r:#}");
    // One TCP flow's sender meets the reordering per packet (its reordering degree above the
    // kernel's default of 3), not per flow.
    let t = finding(&v, "per-packet load balancing gives one TCP flow both circuits");
    // Its acknowledgements, counted by the circuits' path elements on their way back: more of
    // them selective per packet (reordering) than per flow.
    assert!(
        fig(t, "per_packet_sack_pct") > fig(t, "per_flow_sack_pct"),
        "{t:#}"
    );
    assert!(
        fig(t, "per_packet_reordering") > fig(t, "per_flow_reordering"),
        "{t:#}"
    );
}
