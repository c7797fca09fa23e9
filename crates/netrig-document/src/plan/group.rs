//! A plan's `[[group]]`s: tests started together, as the plan writes them, and what can be
//! checked of them without the kinds (crate::group runs them).

use super::{Arm, Plan, PlanError};
use serde::{Deserialize, Deserializer, Serialize};

/// Most tests in one group (the agent serves 16 sessions from one client at once).
pub const MAX_MEMBERS: usize = 16;
/// Most groups in one plan.
pub const MAX_GROUPS: usize = 100;
/// The interim period given to a member that sets none (`-i`), in seconds: flent's step.
pub const DEFAULT_INTERVAL_S: f64 = 0.2;
/// Latest a member may start after its group, in seconds.
pub const MAX_START_S: f64 = 3600.0;

/// Tests started together, as a plan's `[[group]]` writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupPlan {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The interim period (`-i`, seconds) given to members that set none, so every member has a
    /// time series; default 0.2.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "seconds_opt"
    )]
    pub interval: Option<f64>,
    /// The members, each a test of its own.
    #[serde(rename = "test")]
    pub tests: Vec<MemberPlan>,
}

/// One test of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberPlan {
    /// Its name in the group's results (default: its kind, with its position when two share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub kind: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Seconds after the group's start at which it starts (`2`, `2.5`, `"2s"`, `"500ms"`);
    /// default 0. A probe that starts first measures the idle path before the load joins.
    #[serde(default, deserialize_with = "seconds", skip_serializing_if = "is_zero")]
    pub start: f64,
    /// With a `[lab]`: the hosts and path of this member (else the arm's, else the target's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Seconds as a number or a duration's text ("2s", "500ms").
fn parse_seconds(v: toml::Value) -> Result<f64, String> {
    match v {
        toml::Value::Integer(i) => Ok(i as f64),
        toml::Value::Float(f) => Ok(f),
        toml::Value::String(s) => humantime::parse_duration(s.trim())
            .map(|d| d.as_secs_f64())
            .map_err(|e| format!("{s:?} is not a duration (\"2s\", \"500ms\", or seconds as a number): {e}")),
        other => Err(format!("{other} is not a duration in seconds")),
    }
}

fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    parse_seconds(toml::Value::deserialize(d)?).map_err(serde::de::Error::custom)
}

fn seconds_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    seconds(d).map(Some)
}

impl GroupPlan {
    /// Each member's name: its own, or its kind (with its position when two share a kind).
    pub fn member_names(&self) -> Vec<String> {
        self.tests
            .iter()
            .enumerate()
            .map(|(i, m)| match &m.name {
                Some(n) => n.clone(),
                None if self.tests.iter().filter(|o| o.kind == m.kind).count() > 1 => {
                    format!("{}-{}", m.kind, i + 1)
                }
                None => m.kind.clone(),
            })
            .collect()
    }

    /// The interim period members that set none get.
    pub fn interval_s(&self) -> f64 {
        self.interval.unwrap_or(DEFAULT_INTERVAL_S)
    }
}

/// Checks a plan's groups as far as can be without the kinds.
pub(crate) fn check(plan: &Plan) -> Result<(), PlanError> {
    let bad = |m: String| Err(PlanError::Invalid(m));
    if plan.groups.len() > MAX_GROUPS {
        return bad(format!("at most {MAX_GROUPS} groups"));
    }
    let mut names: Vec<&str> = plan.groups.iter().map(|g| g.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return bad("two groups have the same name".into());
    }
    for g in &plan.groups {
        if g.tests.is_empty() || g.tests.len() > MAX_MEMBERS {
            return bad(format!(
                "group {:?}: {} tests; a group has 1 to {MAX_MEMBERS} ([[group.test]])",
                g.name,
                g.tests.len()
            ));
        }
        let mut m = g.member_names();
        m.sort_unstable();
        if m.windows(2).any(|w| w[0] == w[1]) {
            return bad(format!("group {:?}: two tests have the same name", g.name));
        }
        let i = g.interval_s();
        if !(i.is_finite() && (0.01..=60.0).contains(&i)) {
            return bad(format!(
                "group {:?}: interval {i} s must be from 0.01 to 60 seconds",
                g.name
            ));
        }
        for (t, n) in g.tests.iter().zip(g.member_names()) {
            if !(t.start.is_finite() && (0.0..=MAX_START_S).contains(&t.start)) {
                return bad(format!(
                    "group {:?} test {n:?}: start {} s must be from 0 to {MAX_START_S} seconds",
                    g.name, t.start
                ));
            }
            if plan.lab.is_none() && (t.client.is_some() || t.server.is_some() || t.path.is_some()) {
                return bad(format!(
                    "group {:?} test {n:?}: client, server and path name lab hosts: the plan has no [lab]",
                    g.name
                ));
            }
        }
        if plan.lab.is_some() {
            for a in plan.arms() {
                // A member runs from one client host (run_member: one place); several client
                // hosts per member are not built for groups, so refused rather than ignored.
                if let Some(c) = &a.clients {
                    return bad(format!(
                        "group {:?}: arm {:?} sets clients = {c:?}: a group's test runs from one client host (give each [[group.test]] its own client); several client hosts per group test are not built",
                        g.name, a.name
                    ));
                }
                for (t, n) in g.tests.iter().zip(g.member_names()) {
                    plan.lab_route(&member_arm(&a, t))
                        .map_err(|e| PlanError::Invalid(format!("group {:?} test {n:?}: {e}", g.name)))?;
                }
            }
        }
    }
    Ok(())
}

/// The arm a member's runs follow in a lab: the arm's client, server and path where it names
/// them (an arm changes the whole group), else the member's own, else the target's.
pub fn member_arm(arm: &Arm, m: &MemberPlan) -> Arm {
    let mut a = arm.clone();
    if a.path.is_none() {
        a.path = m.path.clone();
        if a.client.is_none() {
            a.client = m.client.clone();
        }
    }
    if a.server.is_none() {
        a.server = m.server.clone();
    }
    a
}
