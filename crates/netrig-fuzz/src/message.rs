//! Control messages from the wire, as JSON: `ClientMsg` (what the agent
//! reads) and `AgentMsg` (what the client reads).
//!
//! Invariants: no panic; a message that parses serializes and reads back
//! equal, with a `type` that is its name; a `test_request`'s spec, if the
//! agent's validation accepts it with default limits, holds every bound; a
//! `host_view` the client's check takes is bounded, and its service demand,
//! warnings and table are computed without a panic; the client's `AgentMsg::from_slice` takes exactly what
//! serde's own reading takes, and reads it the same.

use crate::bounds;
use netrig_proto::{AgentLimits, AgentMsg, ClientMsg};

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    if let Ok(m) = serde_json::from_slice::<ClientMsg>(data) {
        let text = serde_json::to_vec(&m).expect("a message serializes");
        let v: serde_json::Value = serde_json::from_slice(&text).expect("is JSON");
        assert_eq!(v["type"], m.name());
        let back: ClientMsg = serde_json::from_slice(&text).expect("and reads back");
        assert_eq!(back, m, "{}", String::from_utf8_lossy(&text));
        if let ClientMsg::TestRequest { spec, .. } = &m {
            let limits = AgentLimits::default();
            if spec.validate(&limits).is_ok() {
                bounds::assert_bounded(spec, &limits);
            }
        }
    }
    // The client's reading (the tag first, results and intervals straight
    // into their variant) takes exactly what serde's own reading takes.
    match (
        AgentMsg::from_slice(data),
        serde_json::from_slice::<AgentMsg>(data),
    ) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("AgentMsg::from_slice {a:?} but serde_json {b:?}"),
    }
    if let Ok(m) = serde_json::from_slice::<AgentMsg>(data) {
        let text = serde_json::to_vec(&m).expect("a message serializes");
        let v: serde_json::Value = serde_json::from_slice(&text).expect("is JSON");
        assert_eq!(v["type"], m.name());
        let back: AgentMsg = serde_json::from_slice(&text).expect("and reads back");
        assert_eq!(back, m, "{}", String::from_utf8_lossy(&text));
        // Protocol 6: a host view the client's check takes is bounded
        // everywhere the result's service demand and table read it.
        if let AgentMsg::HostView { view } = &m {
            if view.check(netrig_proto::message::MAX_WATCH_S as f64).is_ok() {
                use netrig_proto::report::host::*;
                assert!(view.counters.len() <= MAX_VIEW_COUNTERS && view.sysctls.len() <= MAX_VIEW_SYSCTLS);
                assert!(view.window_s.is_finite() && view.window_s >= 0.0);
                let h = netrig_report::server_host::ServerHost::new("a".into(), view, Some(1));
                assert!(h.service_demand_us_per_transaction.is_none_or(f64::is_finite));
                let _ = (h.warnings(), netrig_export::table::server_host(&h));
            }
        }
    }
}
