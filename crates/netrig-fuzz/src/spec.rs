//! A test spec from the wire (`test_request`'s `spec`), as JSON, checked by
//! `TestSpec::validate` with the agent's default limits and with small ones.
//!
//! Invariants: no panic; anything validate accepts holds every bound
//! (`bounds::assert_bounded`: flows, each kind's sizes, durations, rates,
//! lists, and the kind's rules), is accepted by netrig's own bounds too, and
//! reads back equal and still valid after serializing. No option is
//! silently dropped: an option added to a spec that parses (another kind's,
//! one of the common part, or one netrig does not have, like an agent-side
//! `mss`) is either refused or read and written back.

use crate::bounds;
use netrig_proto::{AgentLimits, TestSpec};
use serde_json::{json, Value};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    let Ok(spec) = serde_json::from_slice::<TestSpec>(data) else {
        return;
    };
    let small = AgentLimits {
        max_flows: 3,
        max_duration_s: 5,
        max_message_size: 1000,
        max_workers: 2,
        ..AgentLimits::default()
    };
    let capped = AgentLimits {
        max_rate_bps: Some(1_000_000),
        max_amplification: Some(1),
        ..AgentLimits::default()
    };
    for limits in [AgentLimits::default(), small, capped] {
        if spec.validate(&limits).is_ok() {
            if let (Some(n), Some((req, resp))) = (limits.max_amplification, spec.rules().udp_answer()) {
                assert!(
                    u64::from(resp) <= u64::from(n) * u64::from(req),
                    "{req},{resp} past {n}x"
                );
            }
            bounds::assert_bounded(&spec, &limits);
            let text = serde_json::to_vec(&spec).expect("a spec serializes");
            let back: TestSpec = serde_json::from_slice(&text).expect("and reads back");
            assert_eq!(back, spec, "{}", String::from_utf8_lossy(&text));
            assert!(back.validate(&limits).is_ok());
        }
    }
    // Whatever the agent thinks, netrig's own check never panics either.
    let _ = spec.validate_bounds().map_err(|e| e.at_agent("the agent at x"));
    nothing_ignored(&spec);
}

/// Where in a spec's JSON (a path of keys) and which options with a value.
type OptionGroup<'a> = (&'a [&'a str], &'a [(&'a str, Value)]);

/// Adds each option in turn where the spec does not have it: the spec
/// must then be refused, or read with the option, which it writes back.
fn nothing_ignored(spec: &TestSpec) {
    let v = serde_json::to_value(spec).expect("a spec serializes");
    let tcp = json!({"nodelay": true, "congestion": "cubic"});
    let txns = json!({"request_size": 2, "response_size": 3, "load": {"open": {"rate": 5.0}}});
    // Every kind's options, and names that are no kind's (old or elsewhere).
    let kind_options = [
        ("message_size", json!(1000)),
        ("recv_size", json!(1000)),
        ("pace", json!({"rate_bps": 1000, "pacing_us": 7})),
        ("zerocopy", json!(true)),
        ("tcp", tcp.clone()),
        ("transactions", txns.clone()),
        ("timeout_s", json!(0.5)),
        ("datagram_size", json!(1000)),
        ("reverse", json!(true)),
        ("no_gso", json!(true)),
        ("datagram", json!("iperf3")),
        ("nodelay", json!(true)),
        ("congestion", json!("cubic")),
        ("burst", json!(2)),
        ("rate", json!(5.0)),
        ("load", json!({"closed": {"burst": 2}})),
        ("flows", json!(2)),
        ("remote", json!({"tos": 4})),
    ];
    let common_options = [
        ("omit_s", json!(0.5)),
        ("interval_s", json!(1.5)),
        ("workers", json!(3)),
        ("remote", json!({"tos": 4})),
        ("remote_cpus", json!([0, 2])),
        ("kind", json!("tcp-rr")),
        ("message_size", json!(1000)),
        ("rr", json!({})),
        ("udp", json!({})),
        ("pace", json!({"rate_bps": 1000})),
        ("zerocopy", json!(true)),
        ("tcp", tcp),
        ("transactions", txns),
        ("timeout_s", json!(0.5)),
    ];
    let remote_options = [
        ("sndbuf", json!(4096)),
        ("rcvbuf", json!(4096)),
        ("tos", json!(4)),
        ("priority", json!(3)),
        ("max_pacing_rate_bps", json!(1000)),
        ("mss", json!(1460)),
        ("nodelay", json!(true)),
        ("congestion", json!("cubic")),
    ];
    let at = |v: &Value, path: &[&str]| -> Option<Value> {
        path.iter().try_fold(v.clone(), |v, k| v.get(*k).cloned())
    };
    let groups: [OptionGroup; 3] = [
        (&[], &common_options),
        (&["test"], &kind_options),
        (&["remote"], &remote_options),
    ];
    for (path, options) in groups {
        for (key, value) in options {
            let mut w = v.clone();
            let Some(obj) = path
                .iter()
                .try_fold(&mut w, |w, k| w.get_mut(*k))
                .and_then(Value::as_object_mut)
            else {
                // An object at its default is left off the wire: add it.
                if path == ["remote"] {
                    let mut w = v.clone();
                    let mut remote = serde_json::Map::new();
                    remote.insert((*key).to_string(), value.clone());
                    w["remote"] = Value::Object(remote);
                    check_added(&w, path, key, value, &at);
                }
                continue;
            };
            if obj.contains_key(*key) {
                continue;
            }
            obj.insert((*key).to_string(), value.clone());
            check_added(&w, path, key, value, &at);
        }
    }
}

fn check_added(
    w: &Value,
    path: &[&str],
    key: &str,
    value: &Value,
    at: &dyn Fn(&Value, &[&str]) -> Option<Value>,
) {
    let Ok(s) = serde_json::from_value::<TestSpec>(w.clone()) else {
        return;
    };
    let back = serde_json::to_value(&s).expect("a spec serializes");
    let mut p = path.to_vec();
    p.push(key);
    assert_eq!(
        at(&back, &p).as_ref(),
        Some(value),
        "{p:?} = {value} was read and dropped: {w} became {back}"
    );
}
