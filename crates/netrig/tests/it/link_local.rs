//! Link-local IPv6 with a scope (issue #11): `serve --bind fe80::…%dev` and
//! `-H fe80::…%dev` work, and a link-local address without its interface is
//! refused with the way to add it. Over a veth pair between two network
//! namespaces of the test's own (skipped, saying why, where they cannot be made).

use crate::helpers::*;
use crate::lab::Lab;
use crate::lab_or_skip;

/// Link-local addresses of the test's own (nodad: usable at once) on both ends of the link.
fn link_local(lab: &Lab) -> Result<(), String> {
    lab.a
        .exec(&["ip", "-6", "addr", "add", "fe80::a/64", "dev", "eth0", "nodad"])?;
    lab.b
        .exec(&["ip", "-6", "addr", "add", "fe80::b/64", "dev", "eth0", "nodad"])
}

#[test]
fn a_scoped_link_local_agent_serves_and_an_unscoped_one_is_told_how() {
    let lab = lab_or_skip!(Lab::pair("ll"));
    lab_or_skip!(link_local(&lab));
    // Without its interface the agent does not start, and says how to give it.
    let o = run_in(&lab.b, &["serve", "--bind", "fe80::b", "-q"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("fe80::b is a link-local address") && stderr(&o).contains("fe80::b%eth0"),
        "{}",
        stderr(&o)
    );
    let _agent = lab.serve(&["--bind", "fe80::b%eth0"]).unwrap();
    // By name, TCP and UDP (the agent's flow sockets are bound to its scoped
    // address and send to the client's), with a link-local --bind on the
    // client that takes -H's interface.
    for args in [
        &["tcp-stream", "-H", "fe80::b%eth0", "-l", "0.5"][..],
        &[
            "udp-stream",
            "-H",
            "[fe80::b%eth0]",
            "-R",
            "-b",
            "20M",
            "-l",
            "0.5",
        ],
        &["tcp-crr", "-H", "fe80::b%eth0", "--bind", "fe80::a", "-l", "0.5"],
        // Issue #37: the client's --bind takes serve's spelling, the scope too.
        &[
            "tcp-rr",
            "-H",
            "fe80::b%eth0",
            "--bind",
            "fe80::a%eth0",
            "-l",
            "0.5",
        ],
    ] {
        let v = run_json_in(&lab.a, args);
        let address = v["agent"]["address"].as_str().unwrap().to_string();
        assert!(address.starts_with("[fe80::b%"), "{args:?}: {address}");
        assert!(
            u(&v, "/summary/bytes") > 0 || v["summary"]["transactions"].as_u64() > Some(0),
            "{args:?}: {}",
            v["summary"]
        );
    }
    // By the interface's index.
    let index = crate::lab::output_in(&lab.a, &["cat", "/sys/class/net/eth0/ifindex"]);
    let index = String::from_utf8_lossy(&index.stdout).trim().to_string();
    assert!(index.parse::<u32>().is_ok(), "eth0's index: {index:?}");
    let v = run_json_in(
        &lab.a,
        &["tcp-rr", "-H", &format!("fe80::b%{index}"), "-l", "0.5"],
    );
    assert!(v["agent"]["address"].as_str().unwrap().starts_with("[fe80::b%"));
    // A --bind on another interface than the agent's is refused, naming it.
    let o = run_in(
        &lab.a,
        &[
            "tcp-rr",
            "-H",
            "fe80::b%eth0",
            "--bind",
            "fe80::a%lo",
            "-l",
            "0.5",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--bind fe80::a%lo: its interface is not that of the agent's address"),
        "{}",
        stderr(&o)
    );
    // Without the scope, the client says how to give it (it was the kernel's "Invalid argument").
    let o = run_in(&lab.a, &["tcp-stream", "-H", "fe80::b", "-l", "0.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-H fe80::b: fe80::b is a link-local address") && stderr(&o).contains("%eth0"),
        "{}",
        stderr(&o)
    );
}
