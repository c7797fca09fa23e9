//! Issue #39, the IPFilter study: `netrig run plans/ipfilter.toml --quick` builds the lab (c1
//! and s1, MTU-sized frames on the link), runs STREAM, MAERTS and CRR with no rules, stateless
//! and stateful rulesets on the responder, GRO on and off, and answers the study's question;
//! this checks the answer's shape (docs/studies/ipfilter.md): each rule kind in each direction
//! and per connection is a cost ("holds") or a tie with its interval stated, or withheld with
//! the reason; what GRO hides is answered per rule kind and direction. Needs root and ethtool;
//! skips without (fails under CI).

use crate::lab_common::LAB_TESTS;
use crate::study_ipqos::{findings, run_quick, stated};
use std::time::Duration;

#[test]
fn the_quick_form_judges_each_rule_kind_per_direction_with_gro_on_and_off() {
    if !crate::lab_common::can_build(&["ip", "nft", "ethtool"]) {
        return;
    }
    let _one = LAB_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let (doc, took) = run_quick("ipfilter.toml");
    eprintln!("plans/ipfilter.toml --quick: {:.1} s", took.as_secs_f64());
    // Every run is profiled (the plan's profile = true): 142 s measured here on a loaded 2-core
    // host; about 90 s before the plan profiled.
    assert!(took < Duration::from_secs(210), "the quick form took {took:?}");
    let a = &doc["answer"];
    assert_eq!(a["study"], "ipfilter");
    let f = findings(&doc);
    for direction in ["inbound", "outbound", "per connection"] {
        for arm in ["stateless", "stateful", "stateless-nogro", "stateful-nogro"] {
            let topic = format!("{arm} {direction}");
            let (_, verdict, text) = f
                .iter()
                .find(|(t, _, _)| *t == topic)
                .unwrap_or_else(|| panic!("no finding {topic}: {f:#?}"));
            assert!(stated(verdict, text), "{topic}: {verdict}: {text}");
            if verdict != "withheld" {
                let base = if arm.ends_with("-nogro") {
                    "no-filter-nogro"
                } else {
                    "no-filter"
                };
                assert!(
                    text.contains(&format!("against {base} ")),
                    "its own baseline: {text}"
                );
                assert!(text.contains("responder CPU"), "the responder's CPU: {text}");
            }
        }
        for rule in ["stateless", "stateful"] {
            let topic = format!("{rule} {direction}: what GRO hides");
            let (_, verdict, text) = f
                .iter()
                .find(|(t, _, _)| *t == topic)
                .unwrap_or_else(|| panic!("no finding {topic}: {f:#?}"));
            assert!(stated(verdict, text), "{topic}: {verdict}: {text}");
        }
    }
    // GRO was really off in the -nogro arms' runs, and the rules saw the tests' packets.
    let cmds = doc["commands"].as_array().unwrap();
    assert!(cmds.iter().any(|c| c["arm"] == "stateful-nogro"
        && c["phase"] == "setup"
        && c["status"] == 0
        && c["command"].as_str().unwrap().contains("gro off")));
    let listed = cmds
        .iter()
        .find(|c| c["arm"] == "stateless" && c["phase"] == "teardown")
        .expect("the stateless arm's tear-down");
    let out = listed["output"].as_str().unwrap();
    assert!(
        out.matches("counter packets").count() >= 150,
        "a ruleset of realistic size: {out:.500}"
    );
}
