//! A LAN's switch port shaped (`[lab.lans.port.HOST]`): what the segment sends to a host, the
//! bottleneck of several clients sending to one server on a shared segment (issue #38).

use crate::model::parse;
use crate::plan::{plan, Kernel, Step};

fn argvs(text: &str) -> Result<(Vec<String>, crate::plan::Plan), crate::LabError> {
    let p = plan(
        &parse(text)?,
        "abc123",
        Kernel::default(),
        std::path::Path::new("."),
    )?;
    let c = p
        .steps
        .iter()
        .map(|s| match s {
            Step::Cmd { ns, argv, .. } => format!("{} {}", ns.as_deref().unwrap_or("-"), argv.join(" ")),
            Step::Sysctl { ns, key, value } => format!("{ns} sysctl {key}={value}"),
        })
        .collect();
    Ok((c, p))
}

/// The port towards s1 is shaped in the bridge's namespace, on the port's veth; the witness
/// measures it from another member of the LAN.
#[test]
fn a_switch_port_is_shaped_in_the_bridges_namespace() {
    let text = "[hosts.c1]\n[hosts.c2]\n[hosts.s1]\n[[lans]]\nname = 'sw'\nhosts = ['c1', 'c2', 's1']\n\
                [lans.port.s1]\nrate = '1G'\nlimit_packets = 1000\n";
    let (c, p) = argvs(text).unwrap();
    assert!(
        c.iter()
            .any(|l| l.starts_with("nrabc123.sw tc qdisc add dev p0-s1 root handle 1: htb")),
        "{c:#?}"
    );
    assert!(
        c.iter()
            .any(|l| l.starts_with("nrabc123.sw tc class add dev p0-s1") && l.contains("1000000000")),
        "{c:#?}"
    );
    let d = p
        .directions
        .iter()
        .find(|d| d.to == "s1")
        .expect("a direction to s1");
    assert_eq!(
        (d.from.as_str(), d.ns.as_str(), d.dev.as_str()),
        ("c1", "nrabc123-c1", "p0-s1")
    );
    assert_eq!(d.rate_bps, Some(1_000_000_000));
    assert!(d.mechanism.contains("switch's port to s1"), "{}", d.mechanism);
    // A host not on it, and the host holding the bridge, are refused by name.
    let e = argvs(&text.replace("[lans.port.s1]", "[lans.port.s9]")).unwrap_err();
    assert!(e.to_string().contains("s9 is not on it"), "{e}");
    let e = argvs(&text.replace(
        "hosts = ['c1', 'c2', 's1']\n",
        "hosts = ['c1', 'c2', 's1']\nswitch = 's1'\n",
    ))
    .unwrap_err();
    assert!(e.to_string().contains("holds the bridge"), "{e}");
}
