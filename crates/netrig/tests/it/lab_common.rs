//! What the lab test files share: one lock, so that no two lab tests measure at once (their
//! rates and delays want the CPU: five lab files each with a lock of its own let a 1 Gbit/s
//! five-client test run beside a 155 Mbit/s scavenger test), and whether a lab can be built here.

use crate::helpers::{run, stdout};
use std::process::Command;
use std::sync::Mutex;

/// Held by every lab test while it builds and measures its lab.
pub(crate) static LAB_TESTS: Mutex<()> = Mutex::new(());

/// Can labs be built here, with these tools (`ip`, `tc`, `nft`, `ethtool`)? Skips (false, saying
/// why) when not, unless under CI (`CI` set), where a lab test that cannot run fails.
pub(crate) fn can_build(tools: &[&str]) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut missing: Vec<String> = tools
        .iter()
        .filter(|t| {
            let flag = match **t {
                "nft" => "-v",
                "ethtool" => "--version",
                _ => "-V",
            };
            !Command::new(t)
                .arg(flag)
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|t| t.to_string())
        .collect();
    if !root {
        missing.insert(0, "root".into());
    }
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "a lab needs root and {}; missing: {}",
        tools.join(", "),
        missing.join(", ")
    );
    crate::skip::missing(why);
    false
}

/// Udp counter `key` (InCsumErrors, RcvbufErrors) in host `h`'s namespace (/proc/net/snmp).
pub(crate) fn udp_snmp(name: &str, h: &str, key: &str) -> u64 {
    let o = run(&["lab", "exec", name, h, "--", "cat", "/proc/net/snmp"]);
    let text = stdout(&o);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (head, vals) = (udp.next().unwrap(), udp.next().unwrap());
    let i = head
        .split_whitespace()
        .position(|k| k == key)
        .unwrap_or_else(|| panic!("{key} in {head}"));
    vals.split_whitespace().nth(i).unwrap().parse().unwrap()
}

/// The share of the machine's CPU time the hypervisor took over a result's window (steal, as
/// `summary.cpu` reports it at either end), as a fraction: a shaper's timers (htb, tbf) do not
/// run while the virtual CPU is taken away, and their bucket (1 ms at the rate) holds no more
/// than that, so a shaped link carries up to that much less than its rate on such a host. A
/// throughput judged against a shaped rate allows it beside its own margin; on a quiet host it
/// is 0 and the margin is the test's alone.
pub(crate) fn steal(result: &serde_json::Value) -> f64 {
    ["local", "remote"]
        .iter()
        .filter_map(|end| result["summary"]["cpu"][end]["steal_pct"].as_f64())
        .fold(0.0, f64::max)
        / 100.0
}
