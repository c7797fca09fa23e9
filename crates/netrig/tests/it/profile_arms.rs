//! Issue #42, "Done means": a two-arm lab plan with `profile = true`, arm B with 1,000 nftables
//! rules on the receiving host (`in_host`, as plans/ipfilter.toml loads its rulesets): the
//! netfilter group's share of busy CPU and its µs per KB are higher in B by an interval that
//! excludes zero, in the document's `profile_differences` and in the table; each arm's runs
//! keep their groups and top functions, their folded stacks merged once per arm.
//!
//! The client's `local` profile samples every CPU of the machine, and the lab's hosts are
//! namespaces on it: the receiving host's netfilter work (softirq) is in it. The agent's end is
//! withheld until `netrig serve --allow-profile`; the test takes either. Needs root, nft and
//! ethtool; skips without (fails under CI).

use crate::helpers::TempDir;
use serde_json::Value;

/// 1,000 rules in s1's input hook that every packet walks and none matches (sources from
/// 100.64.0.0/10, never the lab's 198.18.0.0/15).
fn ruleset() -> String {
    let mut s = String::from(
        "table inet netrig_p42 {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n",
    );
    for i in 0..1000 {
        s.push_str(&format!(
            "\t\tip saddr 100.64.{}.{} counter drop\n",
            i / 250,
            i % 250 + 1
        ));
    }
    s.push_str("\t}\n}\n");
    s
}

fn plan(rules: &std::path::Path) -> String {
    format!(
        r#"
profile = true
[lab]
witness = false
[lab.hosts.c1]
[lab.hosts.s1]
[[lab.links]]
ends = ["c1", "s1"]
# Every segment through the hook on its own (no GRO to merge them), as the IPFilter study's link.
offloads = {{ tso = false, gso = false, gro = false }}
[target]
client = "c1"
server = "s1"
[[test]]
kind = "tcp-stream"
args = ["-l", "2"]
# 95 %: the share of busy time is the whole host's, and the tests beside this one in the suite
# move it from run to run; at 99 % with 4 runs a side (3 degrees of freedom) a loaded run once
# missed (+45.9 points, p = 0.014).
[iterations]
max = 5
min = 5
level = 95
[[arm]]
name = "none"
[[arm]]
name = "nft1000"
in_host = "s1"
setup = "nft -f {rules}"
teardown = "nft delete table inet netrig_p42"
"#,
        rules = rules.display()
    )
}

/// The local end's difference, or None (a skip) where this host refuses a profile.
fn local_difference(v: &Value) -> Option<&Value> {
    let p = &v["tests"][0]["points"][0];
    let diffs = p["profile_differences"].as_array().expect("profile_differences");
    let local = diffs
        .iter()
        .find(|d| d["end"] == "local")
        .expect("a local difference");
    if let Some(w) = local["withheld"].as_str() {
        assert!(w.contains("has no profile at this end: "), "{w}");
        crate::skip::not_here(format!("no profile on this host: {w}"));
        return None;
    }
    // The agent's end: withheld with its reason by this build, or a difference of its own.
    let remote = diffs
        .iter()
        .find(|d| d["end"] == "remote")
        .expect("a remote difference");
    assert!(
        remote["withheld"].as_str().is_some_and(|w| !w.is_empty()) || remote["groups"].is_array(),
        "{remote}"
    );
    Some(local)
}

#[test]
fn a_thousand_rules_raise_netfilter_s_share_and_demand_by_an_interval() {
    if !crate::lab_common::can_build(&["ip", "nft", "ethtool"]) {
        return;
    }
    let _one = crate::lab_common::LAB_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("profile-arms-rules");
    let rules = tmp.path().join("rules.nft");
    std::fs::write(&rules, ruleset()).unwrap();
    let started = std::time::Instant::now();
    let (v, table) = crate::lab_arms::run_plan_table("profile-arms", &plan(&rules));
    eprintln!(
        "two arms × 5 runs, profiled: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let Some(d) = local_difference(&v) else { return };
    assert_eq!(d["arm"], "nft1000");
    assert_eq!(d["baseline"], "none");
    assert_eq!(d["demand_unit"], "us/KB");
    let nf = d["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "netfilter")
        .unwrap_or_else(|| panic!("no netfilter group: {d}"));
    eprintln!("netfilter: {nf}");
    for figure in ["share_of_busy_pct", "demand"] {
        let x = &nf[figure];
        assert!(
            x["difference"].as_f64().unwrap() > 0.0 && x["ci_low"].as_f64().unwrap() > 0.0,
            "netfilter's {figure} is higher with the rules, by an interval above 0: {x}"
        );
        assert_eq!(x["excludes_zero"], true, "{x}");
    }
    // The rules are walked by nftables' evaluation loop: among the functions that rose.
    let rose: Vec<&str> = d["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["demand"]["excludes_zero"] == true && f["demand"]["difference"].as_f64().unwrap() > 0.0)
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    eprintln!("functions that rose: {rose:?}");
    assert!(rose.iter().any(|f| f.starts_with("nft_do_chain")), "{rose:?}");
    // Each run keeps its groups and top functions; the folded stacks are the arm's, merged.
    let arms = v["tests"][0]["points"][0]["arms"].as_array().unwrap();
    for a in arms {
        let local = &a["profile"]["local"];
        assert_eq!(local["profiled_runs"], 5, "{}", a["arm"]);
        assert!(local["folded"].as_array().unwrap().len() > 10, "{local:.300}");
        for r in a["runs"].as_array().unwrap() {
            let p = &r["profile"]["local"];
            assert!(
                p["folded"].as_array().unwrap().is_empty(),
                "merged into the arm's"
            );
            assert!(p["folded_total"].as_u64().unwrap() > 0);
            assert!(!p["groups"].as_array().unwrap().is_empty());
            assert!(!p["top_functions"].as_array().unwrap().is_empty());
        }
    }
    // The table holds the difference: netfilter's line, starred, and nft_do_chain's.
    let section = table
        .split("\nProfile")
        .nth(1)
        .unwrap_or_else(|| panic!("no profile section:\n{table}"));
    eprintln!("Profile{section}");
    assert!(
        section.contains("nft1000 against none, the client's host (local)"),
        "{section}"
    );
    let line = section
        .lines()
        .find(|l| l.trim_start().starts_with("netfilter"))
        .unwrap_or_else(|| panic!("no netfilter line:\n{section}"));
    assert_eq!(
        line.matches("*+").count(),
        2,
        "share and demand both exclude 0: {line}"
    );
    // The functions that changed, the largest first: the rules' evaluation is among them in the
    // document (above); the table lists the first ten, where the callers that hold it in their
    // inclusive time (the system call, the softirq) may come first.
    assert!(
        section.contains("functions whose interval excludes 0"),
        "{section}"
    );
    // The receiving end (the lab's agent, started with --allow-profile) sees the same kernel:
    // its netfilter rose too, by an interval above 0.
    let diffs = v["tests"][0]["points"][0]["profile_differences"]
        .as_array()
        .unwrap();
    let remote = diffs.iter().find(|d| d["end"] == "remote").unwrap();
    assert!(
        remote["withheld"].is_null(),
        "the lab's agent profiles its end: {remote}"
    );
    let nf = remote["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "netfilter")
        .unwrap_or_else(|| panic!("no netfilter group at the agent's end: {remote}"));
    assert_eq!(nf["demand"]["excludes_zero"], true, "{nf}");
    assert!(nf["demand"]["difference"].as_f64().unwrap() > 0.0, "{nf}");
    // The HTML report draws each end's arm against its baseline as a differential flame graph.
    let saved = tmp.path().join("experiment.json");
    std::fs::write(&saved, serde_json::to_vec(&v).unwrap()).unwrap();
    let html = tmp.path().join("experiment.html");
    let o = crate::helpers::run(&["report", saved.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", crate::helpers::stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Profile: where the arms' CPU time differs"),
        "no differential section"
    );
    assert_eq!(
        page.matches("<figure class=\"flame\" id=\"flame-diff-").count(),
        2,
        "one differential graph per end"
    );
    assert!(
        page.contains("nft_do_chain"),
        "the graph names the rules' evaluation"
    );
}
