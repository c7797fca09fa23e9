//! `--profile` on the client's end (docs/PROFILE.md): a real loopback test sampled over its
//! window, its groups, top functions and witness in the result; the agent's end withheld with
//! its reason; no `profile` without the option.

use crate::helpers::*;
use serde_json::Value;

const REMOTE_WITHHELD: &str =
    "the agent's end is not profiled by this build (#42: netrig serve --allow-profile is not built yet)";

/// The local end's profile; None (said as a skip, after its reason is checked) where this
/// host refuses a system-wide profile.
fn local_profile(v: &Value) -> Option<&Value> {
    let p = &v["profile"];
    assert_eq!(p["remote"]["withheld"], REMOTE_WITHHELD, "{}", p["remote"]);
    let local = &p["local"];
    if let Some(why) = local["withheld"].as_str() {
        // The sampler's own words: which setting refused it.
        assert!(
            why.starts_with("profile withheld: ")
                && [
                    "perf_event_paranoid",
                    "kptr_restrict",
                    "not available",
                    "perf_event_open"
                ]
                .iter()
                .any(|w| why.contains(w)),
            "{why}"
        );
        crate::skip::not_here(format!("this host refuses a profile: {why}"));
        return None;
    }
    Some(local)
}

/// No frame of the profile is an address: names only.
fn names_only(local: &Value) {
    let frames = local["folded"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["stack"].as_str().unwrap().split(';').map(str::to_string))
        .chain(
            local["top_functions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap().to_string()),
        );
    for f in frames {
        let hexish = f.starts_with("0x") || (f.len() >= 8 && f.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(!hexish, "a frame looks like an address: {f}");
    }
}

fn group<'a>(local: &'a Value, name: &str) -> &'a Value {
    local["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == name)
        .unwrap_or_else(|| panic!("no group {name}: {}", local["groups"]))
}

fn top_names(local: &Value) -> Vec<String> {
    local["top_functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_stream_profile_names_tcp_and_the_copy_and_agrees_with_proc_stat() {
    let agent = Served::start(&[]);
    let port = agent.port_arg();
    let v = run_json(&strs(&at(&port, "tcp-stream -l 2.5 --omit 0.5 --profile")));
    let Some(local) = local_profile(&v) else { return };
    let (samples, window) = (u(local, "/samples"), f(local, "/window_s"));
    eprintln!(
        "profile: {samples} samples over {window:.2} s; witness {}",
        local["witness"]
    );
    // Sampled over the measured window (2 s after the omitted 0.5 s), not the set-up, the
    // omitted start or the agent's results.
    assert!(
        (window - f(&v, "/summary/elapsed_s")).abs() < 0.1,
        "{window} against {}",
        v["summary"]
    );
    let tcp = group(local, "tcp");
    eprintln!("tcp: {tcp}; memory-copy: {}", group(local, "memory-copy"));
    assert!(f(tcp, "/share_of_busy_pct") > 0.0, "{tcp}");
    assert!(f(tcp, "/demand") > 0.0, "{tcp}");
    assert_eq!(local["demand_unit"], "us/KB");
    let top = top_names(local);
    eprintln!("top: {:?}", &top[..top.len().min(10)]);
    assert!(
        top.iter().any(|n| n.starts_with("tcp_") || n.contains("copy")),
        "{top:?}"
    );
    names_only(local);
    // Every busy sample is in one group; the shares of busy sum to 100.
    let shares: f64 = local["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["share_of_busy_pct"].as_f64())
        .sum();
    assert!((shares - 100.0).abs() < 0.01, "{shares}");
    let ratio = f(local, "/witness/ratio");
    assert!((0.5..=1.5).contains(&ratio), "witness {}", local["witness"]);
    // Without --profile: no profile key at all.
    let plain = run_json(&strs(&at(&port, "tcp-stream -l 0.3")));
    assert!(plain.get("profile").is_none(), "{}", plain["profile"]);
    // An experiment's runs are profiled too (docs/PROFILE.md, "Experiments"): each run keeps
    // its figures, the arm its stacks merged.
    let o = run(&strs(&at(
        &port,
        "tcp-stream -l 0.3 --iterations 2 --profile --json",
    )));
    assert!(o.status.success(), "{}", stderr(&o));
    let e: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&e);
    let arm = &e["tests"][0]["points"][0]["arms"][0];
    assert_eq!(arm["profile"]["local"]["profiled_runs"], 2, "{}", arm["profile"]);
    for r in arm["runs"].as_array().unwrap() {
        assert!(r["profile"]["local"]["groups"].is_array(), "{}", r["profile"]);
    }
}

#[test]
fn a_crr_profile_names_the_connection_set_up_and_tear_down() {
    let agent = Served::start(&[]);
    let port = agent.port_arg();
    let v = run_json(&strs(&at(&port, "tcp-crr -l 2 --profile")));
    let Some(local) = local_profile(&v) else { return };
    assert_eq!(local["demand_unit"], "us/tran");
    let top = top_names(local);
    let paths = [
        "tcp_v4_connect",
        "__inet_hash_connect",
        "inet_stream_connect",
        "inet_csk_accept",
        "tcp_time_wait",
        "tcp_close",
        "tcp_conn_request",
        "tcp_v4_syn_recv_sock",
    ];
    let found: Vec<(usize, &String)> = top
        .iter()
        .enumerate()
        .filter(|(_, n)| paths.contains(&n.as_str()))
        .collect();
    eprintln!(
        "crr: set-up/tear-down among the top {}: {found:?}; witness {}",
        top.len(),
        local["witness"]
    );
    assert!(!found.is_empty(), "{top:?}");
    assert!(f(group(local, "tcp"), "/demand") > 0.0);
    names_only(local);
}

/// A client without the privileges a system-wide profile needs (uid nobody, no capabilities,
/// through setpriv): the test runs, and its local profile is withheld in the sampler's words.
#[test]
fn an_unprivileged_client_gets_the_reason_its_profile_is_withheld() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok();
    if !root || !setpriv {
        crate::skip::not_here("dropping privileges needs root and setpriv");
        return;
    }
    let agent = Served::start(&[]);
    // A copy nobody may run: the build's own directory may not be open to it.
    let dir = TempDir::new("profile-nobody");
    let exe = dir.path().join("netrig");
    std::fs::copy(env!("CARGO_BIN_EXE_netrig"), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ]);
    cmd.arg(&exe);
    let port = agent.port_arg();
    let args = at(&port, "tcp-stream -l 0.3 --profile --json");
    let o = run_cmd(cmd, &strs(&args));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&v);
    let why = v["profile"]["local"]["withheld"]
        .as_str()
        .unwrap_or_else(|| panic!("profiled without privileges: {}", v["profile"]));
    eprintln!("unprivileged: {why}");
    assert!(
        why.starts_with("profile withheld: ")
            && (why.contains("kptr_restrict") || why.contains("perf_event_paranoid")),
        "{why}"
    );
    assert_eq!(v["profile"]["remote"]["withheld"], REMOTE_WITHHELD);
}
