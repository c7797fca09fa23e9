//! A plan's lists of client hosts (`clients = ["c1", "c2"]`, in its `[target]` or an arm): whose
//! they are and what they may be (crate::multi runs from them).

use super::{Arm, Plan, PlanError, TargetClients};

/// Most client hosts one test may run from at once.
pub const MAX_CLIENT_HOSTS: usize = 64;

/// The client hosts an arm's runs go from, several at once: the arm's `clients`, else (unless
/// the arm names one `client`) the target's list; empty: one client, as before.
pub fn client_hosts(plan: &Plan, arm: &Arm) -> Vec<String> {
    if let Some(c) = &arm.clients {
        return c.clone();
    }
    if arm.client.is_some() || arm.path.as_deref() == Some("loopback") {
        return Vec::new();
    }
    match plan.target.as_ref().and_then(|t| t.clients.as_ref()) {
        Some(TargetClients::Hosts(h)) => h.clone(),
        _ => Vec::new(),
    }
}

/// What a list of client hosts may be: lab hosts, at least one, distinct, not the server, not
/// with one `client` beside it, not over loopback.
pub fn check(plan: &Plan, arm: &Arm) -> Result<(), PlanError> {
    let bad = |m: String| Err(PlanError::Invalid(m));
    let t = plan.target.as_ref();
    if let Some(TargetClients::Hosts(_)) = t.and_then(|t| t.clients.as_ref()) {
        if t.is_some_and(|t| t.client.is_some()) {
            return bad("target: client names one client host and clients several: give one of them".into());
        }
    }
    if arm.clients.is_some() && arm.client.is_some() {
        return bad(format!(
            "arm {:?}: client names one client host and clients several: give one of them",
            arm.name
        ));
    }
    let hosts = client_hosts(plan, arm);
    let explicit =
        arm.clients.is_some() || matches!(t.and_then(|t| t.clients.as_ref()), Some(TargetClients::Hosts(_)));
    if hosts.is_empty() {
        if explicit && arm.client.is_none() && arm.path.as_deref() != Some("loopback") {
            return bad(format!("arm {:?}: clients = [] names no client host", arm.name));
        }
        return Ok(());
    }
    if hosts.len() > MAX_CLIENT_HOSTS {
        return bad(format!(
            "arm {:?}: {} client hosts; at most {MAX_CLIENT_HOSTS}",
            arm.name,
            hosts.len()
        ));
    }
    let Some(route) = plan.lab_route(arm)? else {
        return Ok(());
    };
    if route.loopback {
        return bad(format!(
            "arm {:?}: path \"loopback\" runs one client in the server's host; clients = [...] runs several over the lab's links",
            arm.name
        ));
    }
    let lab = plan.lab.as_ref().expect("a route needs a lab");
    for (i, h) in hosts.iter().enumerate() {
        if !lab.hosts.contains_key(h) {
            return bad(format!(
                "arm {:?}: clients: {h:?} is not a host of the [lab] (hosts: {})",
                arm.name,
                lab.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if *h == route.server {
            return bad(format!(
                "arm {:?}: clients: {h} is the server's host (a client there is path = \"loopback\")",
                arm.name
            ));
        }
        if hosts[..i].contains(h) {
            return bad(format!("arm {:?}: clients: {h} is listed twice", arm.name));
        }
    }
    Ok(())
}
