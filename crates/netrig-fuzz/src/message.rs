//! Control messages from the wire, as JSON: `ClientMsg` (what the agent
//! reads) and `AgentMsg` (what the client reads).
//!
//! Invariants: no panic; a message that parses serializes and reads back
//! equal, with a `type` that is its name; a `test_request`'s spec, if the
//! agent's validation accepts it with default limits, holds every bound; the client's `AgentMsg::from_slice` takes exactly what
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
    }
}
