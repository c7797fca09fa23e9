//! `--mptcp`: the TCP kinds over MPTCP, both ends' data connections
//! IPPROTO_MPTCP sockets, shown in the result (config, each flow's applied
//! options, the kernel's MPTcpExt counters); a fallback to TCP warned of; a
//! kernel without MPTCP a clear error naming the option and the end.

use crate::helpers::*;
use crate::server_host::AgentIn;
use serde_json::Value;

/// Whether this host's kernel makes MPTCP sockets (net.mptcp.enabled = 1):
/// a property of the kernel, which no package changes.
fn mptcp_here() -> bool {
    match std::fs::read_to_string("/proc/sys/net/mptcp/enabled") {
        Ok(v) if v.trim() == "1" => true,
        Ok(_) => {
            crate::skip::not_here("this kernel has MPTCP turned off (net.mptcp.enabled = 0)");
            false
        }
        Err(e) => {
            crate::skip::not_here(format!(
                "this kernel has no MPTCP (/proc/sys/net/mptcp/enabled: {e})"
            ));
            false
        }
    }
}

/// A counter of the kernel's deltas of one end (`local` or `remote`) over
/// the test, 0 when it did not move.
fn delta(v: &Value, end: &str, name: &str) -> i64 {
    v["counters"][end]["deltas"][name].as_i64().unwrap_or(0)
}

/// The result says MPTCP at both ends, every flow's connection at both ends
/// stayed MPTCP, the kernel counted the MP_CAPABLE handshakes of at least
/// the test's connections and no fallback, and nothing warned of MPTCP.
fn assert_mptcp(v: &Value, connections: i64) {
    assert_eq!(v["config"]["local"]["mptcp"], true, "{}", v["config"]);
    assert_eq!(v["config"]["remote"]["mptcp"], true, "{}", v["config"]);
    let flows = v["flows"].as_array().unwrap();
    assert!(!flows.is_empty());
    for fl in flows {
        for end in ["local", "remote"] {
            assert_eq!(
                fl[end]["applied"]["mptcp"], true,
                "flow {} {end}: {}",
                fl["id"], fl[end]["applied"]
            );
        }
    }
    // Both ends run on this host: the client's deltas (from before its data
    // connections to the end) hold both sides of every handshake. Other
    // programs' MPTCP connections can only add to them.
    for name in [
        "MPTcpExt.MPCapableSYNTX",
        "MPTcpExt.MPCapableSYNRX",
        "MPTcpExt.MPCapableSYNACKRX",
        "MPTcpExt.MPCapableACKRX",
    ] {
        let n = delta(v, "local", name);
        assert!(
            n >= connections,
            "{name} moved by {n}, under the test's {connections} connections"
        );
    }
    // The witness keeps the transport's counters over the window.
    let kept = &v["witness"]["local"]["kernel"];
    assert!(kept.get("MPTcpExt.MPCapableACKRX").is_some(), "{kept}");
    assert!(warnings_about(v, "MPTCP").is_empty(), "{:?}", v["warnings"]);
    let disagree: Vec<&Value> = v["witness"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["kernel_source"]
                .as_str()
                .is_some_and(|s| s.starts_with("MPTcpExt"))
        })
        .filter(|c| c["verdict"] != "agrees")
        .collect();
    assert!(disagree.is_empty(), "{disagree:?}");
}

#[test]
fn tcp_stream_over_mptcp_is_mptcp_at_both_ends() {
    if !mptcp_here() {
        return;
    }
    let v = run_json(&["tcp-stream", "--mptcp", "-l", "1", "-P", "2"]);
    assert_mptcp(&v, 2);
    let bytes = u(&v, "/summary/bytes");
    let elapsed = f(&v, "/summary/elapsed_s");
    assert!(bytes > 0 && (elapsed - 1.0).abs() < 0.1, "{}", v["summary"]);
    let tput = f(&v, "/summary/throughput_bps");
    assert!((tput - bytes as f64 * 8.0 / elapsed).abs() < 1e-6 * tput);
    let sum: u64 = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, bytes);
    // Shown in the table, not only in the JSON.
    let o = run(&["tcp-stream", "--mptcp", "-l", "0.3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("MPTCP"), "{}", stdout(&o));
}

#[test]
fn tcp_rr_over_mptcp_is_mptcp_at_both_ends() {
    if !mptcp_here() {
        return;
    }
    let v = run_json(&["tcp-rr", "--mptcp", "-l", "1"]);
    assert_mptcp(&v, 1);
    crate::rr::check_rr(&v);
}

#[test]
fn tcp_crr_over_mptcp_each_connection_is_mptcp() {
    if !mptcp_here() {
        return;
    }
    let v = run_json(&["tcp-crr", "--mptcp", "-l", "1"]);
    let tr = u(&v, "/summary/transactions");
    assert!(tr > 0, "{}", v["summary"]);
    assert_mptcp(&v, tr as i64);
    // The witness bounds the window's transactions by the MPTCP handshakes
    // of each end, beside TCP's opens.
    let sources: Vec<&str> = v["witness"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["kernel_source"].as_str())
        .collect();
    for s in ["MPTcpExt.MPCapableSYNACKRX", "MPTcpExt.MPCapableACKRX"] {
        assert!(sources.contains(&s), "{sources:?}");
    }
}

#[test]
fn mptcp_is_refused_for_other_kinds() {
    for kind in ["udp-stream", "udp-rr"] {
        let o = run(&[kind, "--mptcp", "-l", "0.2"]);
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("--mptcp applies to TCP tests"),
            "{}",
            stderr(&o)
        );
    }
}

/// Two namespaces joined by a veth pair: the client's at 10.77.0.1 with
/// MPTCP on, the agent's at 10.77.0.2 with it off.
fn client_and_agent() -> Option<(Netns, Netns)> {
    let client = Netns::or_skip("mpc")?;
    let agent = Netns::or_skip("mpa")?;
    let made = (|| {
        sh(&[
            "ip", "link", "add", "mpc0", "netns", &client.0, "type", "veth", "peer", "name", "mpa0", "netns",
            &agent.0,
        ])?;
        client.exec(&["ip", "addr", "add", "10.77.0.1/24", "dev", "mpc0"])?;
        client.exec(&["ip", "link", "set", "mpc0", "up"])?;
        agent.exec(&["ip", "addr", "add", "10.77.0.2/24", "dev", "mpa0"])?;
        agent.exec(&["ip", "link", "set", "mpa0", "up"])?;
        client.exec(&["sysctl", "-qw", "net.mptcp.enabled=1"])?;
        agent.exec(&["sysctl", "-qw", "net.mptcp.enabled=0"])
    })();
    if let Err(e) = made {
        crate::skip::missing(format!(
            "needs root, iproute2 and procps for two namespaces and a veth ({e})"
        ));
        return None;
    }
    Some((client, agent))
}

#[test]
fn a_kernel_without_mptcp_is_an_error_naming_the_end_and_a_fallback_a_warning() {
    if !mptcp_here() {
        return;
    }
    let Some((client, agent)) = client_and_agent() else {
        return;
    };
    // The client's own kernel: refused before it connects.
    let o = run_in(&agent, &["tcp-rr", "--mptcp", "-l", "0.3"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("--mptcp: the client's kernel has MPTCP turned off"),
        "{e}"
    );

    // The agent's kernel: the agent refuses the test, saying so.
    let served = AgentIn::start(&agent).unwrap();
    let o = run_in(&client, &["tcp-rr", "--mptcp", "-H", "10.77.0.2", "-l", "0.3"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("--mptcp: the agent's kernel has MPTCP turned off"),
        "{e}"
    );

    // MPTCP turned on after the agent made its listener (a TCP one): the
    // test runs, over TCP, and both ends warn that it did.
    agent.exec(&["sysctl", "-qw", "net.mptcp.enabled=1"]).unwrap();
    let v = run_json_in(&client, &["tcp-rr", "--mptcp", "-H", "10.77.0.2", "-l", "0.5"]);
    let w = warnings_about(&v, "MPTCP: --mptcp asked for it");
    assert!(
        w.iter()
            .any(|w| w.starts_with("local ") && w.contains("fell back")),
        "{w:?}"
    );
    assert!(w.iter().any(|w| w.starts_with("remote ")), "{w:?}");
    assert_eq!(v["flows"][0]["local"]["applied"]["mptcp"], false);
    assert!(u(&v, "/summary/transactions") > 0);
    drop(served);
}
