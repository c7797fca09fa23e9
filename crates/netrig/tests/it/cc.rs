//! Connect/close (netperf TCP_CC): a connection per transaction and no
//! data, the transactions the kernel's own count of connections opened.

use crate::helpers::*;
use crate::rr::check_rr;
use serde_json::Value;

const REASONS: [&str; 5] = ["refused", "timed_out", "addr_not_available", "reset", "other"];

/// tcp-rr's arithmetic (transactions the flows' sum, latency of exactly
/// them); no payload either way; the witness agrees at both ends.
fn check_cc(v: &Value) {
    assert_eq!(v["test"], "tcp-cc");
    check_rr(v);
    // The greeting is not payload: no byte of it counts, at either end.
    assert_eq!(u(v, "/summary/bytes"), 0);
    for f in v["flows"].as_array().unwrap() {
        assert_eq!(f["local"]["total_bytes"], 0, "{f}");
        assert_eq!(f["remote"]["total_bytes"], 0, "{f}");
        assert_eq!(f["local"]["role"], "requester");
        assert_eq!(f["remote"]["role"], "responder");
    }
    // Latency: one per transaction, from connect() to the agent's close.
    let l = &v["summary"]["latency_us"];
    assert_eq!(u(l, "/count"), u(v, "/summary/transactions"), "{l}");
    assert!(f(l, "/p50") > 0.0, "{l}");
    for r in REASONS {
        assert!(v["summary"]["connect_errors"][r].is_u64(), "{r}");
    }
    for (_, c) in opens(v) {
        assert_eq!(c["verdict"], "agrees", "{c}");
    }
}

/// The witness's checks of connections opened (the client's) and accepted
/// (the agent's), with the kernel's source each.
fn opens(v: &Value) -> [(&'static str, &Value); 2] {
    let checks = v["witness"]["checks"].as_array().unwrap();
    ["Tcp.ActiveOpens", "Tcp.PassiveOpens"].map(|source| {
        let end = if source == "Tcp.ActiveOpens" {
            "local"
        } else {
            "remote"
        };
        let c = checks
            .iter()
            .find(|c| c["end"] == end && c["kernel_source"] == source)
            .unwrap_or_else(|| panic!("no {source} check: {}", v["witness"]));
        (source, c)
    })
}

/// In a namespace of its own, where nothing else opens connections: the
/// transactions counted are the connections the kernel opened (the client)
/// and accepted (the agent) over the window, one each, alone on its worker
/// (blocking) and through the event loop.
#[test]
fn tcp_cc_counts_the_kernels_connections() {
    let Some(ns) = Netns::or_skip("cc") else {
        return;
    };
    for args in [
        &["tcp-cc", "-l", "1"][..],
        &["tcp-cc", "-l", "1", "-P", "2", "-T", "1", "--burst", "2"],
    ] {
        let v = run_json_in(&ns, args);
        check_cc(&v);
        let n = u(&v, "/summary/transactions");
        assert!(n >= 100, "{args:?}: {n} transactions");
        // The kernel's window is read a few ms after each of the summary's
        // edges (as tcp-crr's: up to 4 % of a busy machine's window).
        for (source, c) in opens(&v) {
            let kernel = u(c, "/kernel");
            assert!(
                kernel.abs_diff(n) <= 10 + n / 25,
                "{args:?}: {kernel} connections ({source}) for {n} transactions: {c}"
            );
        }
    }
}

/// What the result says it ran, and the table.
#[test]
fn tcp_cc_config_and_table() {
    let v = run_json(&["tcp-cc", "-l", "0.5"]);
    check_cc(&v);
    // No request, no response, the agent closing first; the greeting each
    // connection's one send and the agent's one receive.
    let c = &v["config"];
    assert_eq!((u(c, "/request_size"), u(c, "/response_size")), (0, 0));
    assert_eq!(c["close_first"], "responder");
    assert_eq!((u(c, "/message_size"), u(c, "/recv_size")), (32, 32));
    assert_eq!((u(c, "/burst"), f(c, "/timeout_s")), (1, 1.0));
    assert!(c["local_ports"].is_null() && c["rate"].is_null(), "{c}");
    assert!(!c.as_object().unwrap().contains_key("zerocopy"), "{c}");
    let o = run(&["tcp-cc", "-l", "0.5"]);
    let t = stdout(&o);
    assert!(
        t.contains("TCP CC TEST")
            && t.contains("as netperf TCP_CC")
            && t.contains("latency (us)")
            && t.contains("connect errors (failed transactions, not counted)"),
        "{t}"
    );
}

#[test]
fn tcp_cc_refuses_what_it_has_not() {
    for (args, says) in [
        (vec!["tcp-cc", "-r", "1,1"], "unexpected argument"),
        (
            vec!["tcp-cc", "--close-first", "requester"],
            "unexpected argument",
        ),
        (vec!["tcp-cc", "--busy-wait"], "unexpected argument"),
        (vec!["tcp-cc", "--timeout", "0"], "--timeout"),
        (vec!["tcp-cc", "--rate", "100", "--burst", "4"], "--burst"),
    ] {
        let o = run(&args);
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}
