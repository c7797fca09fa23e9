//! An experiment's plan: its tests (a kind and its options, as on the
//! command line), their sweeps, the arms compared, the iterations and where
//! the tests go. Written in TOML (`netrig run PLAN.toml`) or made from a
//! command line (`netrig tcp-stream -m 32,64,128 --iterations 10,3`); the
//! saved result holds it.

pub mod clients;
pub mod group;
pub mod study;

use crate::sweep::{self, Sweep, SweepError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// A short name: the saved result's file name starts with it.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where the tests go; absent: the in-process agent on loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetPlan>,
    /// The tests, each run over its sweep's points for every arm.
    #[serde(default, rename = "test")]
    pub tests: Vec<TestPlan>,
    /// Tests started together (flent's RRUL), each group run for every arm after the tests
    /// ([`crate::group`]).
    #[serde(default, rename = "group", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<group::GroupPlan>,
    /// The configurations compared; absent: one arm, "default".
    #[serde(default, rename = "arm", skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<Arm>,
    /// The arm the others are compared with; absent: the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    #[serde(default)]
    pub iterations: Iterations,
    /// Profile every run of every test (`--profile` added to each test's options; a test or an
    /// arm may also say `--profile` in its `args`): each run's result has its `profile`, each
    /// arm its folded stacks, each point the difference between arms (docs/PROFILE.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profile: bool,
    /// How the arms' runs are ordered within each round.
    #[serde(default)]
    pub order: Order,
    /// Seed of the randomised order (saved, so the order can be replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Longest a set-up or tear-down command may take, in seconds.
    #[serde(default = "default_command_timeout")]
    pub command_timeout_s: f64,
    /// A lab (docs/LAB.md) built before the first run and removed at the end; the tests name
    /// its hosts (`target.client`, `target.server`, an arm's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<netrig_lab::Topology>,
    /// The study this plan reproduces (docs/STUDIES.md): its question, how long the full form
    /// takes and what `--quick` reduces ([`crate::study`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<study::StudyPlan>,
}

fn default_command_timeout() -> f64 {
    120.0
}

/// Where the tests go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetPlan {
    /// An agent's host (`-H`); absent: the in-process agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// "ipv4" or "ipv6" (`-4`, `-6`); absent: either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// The local address of every connection (`--bind`): an IP address,
    /// a link-local IPv6 one with its `%interface`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// This client's private key file (`--key`), for an agent that requires
    /// authentication (the file's path is saved, never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<std::path::PathBuf>,
    /// The agent's public key to expect (`--agent-key`): the key itself or a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<String>,
    /// Kinds with one end: the agent on the server's host that watches it
    /// over each run (`--server-agent HOST[:PORT]`; `key` and `agent_key`
    /// apply to it); each run's result then has its `server_host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_agent: Option<String>,
    /// Kinds with one end: run each test from this many client processes,
    /// summed (`--clients`), from these source addresses (`--client-addrs`;
    /// empty: 127.0.0.1, .2, ... against a loopback server). With a `[lab]`: a list of lab
    /// hosts, each running the test at once (crate::multi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<TargetClients>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_addrs: Vec<std::net::IpAddr>,
    /// With a `[lab]`: the lab host the test's client runs in (its namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// With a `[lab]`: the lab host whose agent the test goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// With a `[lab]`: "link" (default: the server's address on the lab's links, from the
    /// client host) or "loopback" (the client runs in the server host, to 127.0.0.1 or ::1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What the server at `host` is (`--peer`): "auto" (default), "netrig"
    /// or "iperf3" (an iperf3 server; the stream kinds only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<crate::result::peer::Peer>,
}

/// `target.clients`: a number of client processes on this host (kinds with one end), or, with a
/// `[lab]`, the lab hosts that each run the test at once, started together and summed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetClients {
    Count(u32),
    Hosts(Vec<String>),
}

impl TargetClients {
    /// The number of client processes on this host, if that is what it says.
    pub fn count(&self) -> Option<u32> {
        match self {
            TargetClients::Count(n) => Some(*n),
            TargetClients::Hosts(_) => None,
        }
    }
}

/// One test: a kind and its options as the command line takes them, and
/// the options it sweeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestPlan {
    /// The kind, e.g. "tcp-stream".
    pub kind: String,
    /// Its options, e.g. ["-l", "60", "-s", "32K", "-S", "32K"].
    #[serde(default)]
    pub args: Vec<String>,
    /// Swept options and their values: a list (`[32, 64]` or `["64K", "1M"]`)
    /// or a string in the command line's syntax (`"32,64"`, `"1..8"`,
    /// `"100..2000:100"`, `"64K..1M*2"`). Several: every combination, in the
    /// order written here.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "sweep_table")]
    pub sweep: Vec<Sweep>,
}

/// A configuration under test: a name, options added to every test's, and
/// commands run on this host before and after each of its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    pub name: String,
    /// Options added to each test's (e.g. `["--remote-setup", "nft-rule"]`
    /// to have the agent run one of its hooks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Run with `sh -c` on this host before each of the arm's runs; a
    /// failure stops the experiment (after the tear-down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// Run with `sh -c` after each of the arm's runs, and after a failed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<String>,
    /// With a `[lab]`: links' shaping for this arm's runs, by link name (as `lab status` names
    /// it) and sending host: `[arm.shape."c1-s1".c1] rate = "20M"` (rate, limit_packets,
    /// limit_bytes), set before each run and put back after it (docs/LAB.md).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub shape:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, netrig_lab::model::Shape>>,
    /// With a `[lab]`: the lab host the set-up and tear-down run in (`ip netns exec`), so an
    /// arm's ruleset or sysctls change that host only; absent: this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_host: Option<String>,
    /// With a `[lab]`: this arm's client host, server host and path, in place of the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// With a `[lab]`: this arm's client hosts, each running the test at once (in place of the
    /// target's `client` or `clients`): `["c1"]` against `["c1", "c2"]` is one client against two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<Vec<String>>,
    /// The arm this one is compared against, in place of the plan's `baseline`: a plan whose
    /// arms are configurations × places (no rule / a rule on a 100 Mbit/s link, the same on a
    /// 1 Gbit/s link) compares each with the no-rule arm of its own place. That arm must not
    /// name one of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
}

/// Where one arm's runs go in a lab: the client's host, the server's, the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabRoute {
    pub client: String,
    pub server: String,
    pub loopback: bool,
}

/// netperf's `-i max,min` and `-I level,width`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Iterations {
    /// Most runs of each arm at each point.
    pub max: u32,
    /// Fewest runs before the confidence rule may stop.
    pub min: u32,
    /// Confidence level in percent (95 or 99).
    #[serde(default = "default_level")]
    pub level: f64,
    /// The interval's whole width, in percent of the mean, below which the
    /// point is done.
    #[serde(default = "default_width")]
    pub width: f64,
    /// The metric the rule watches; absent: the kind's headline figure
    /// (throughput for streams, transactions/s for request/response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

fn default_level() -> f64 {
    99.0
}

fn default_width() -> f64 {
    5.0
}

impl Default for Iterations {
    /// One run per arm and point.
    fn default() -> Self {
        Iterations {
            max: 1,
            min: 1,
            level: default_level(),
            width: default_width(),
            metric: None,
        }
    }
}

/// The order of the arms' runs in each round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// A B C A B C …: drift of the machine falls on every arm alike.
    #[default]
    Interleaved,
    /// Each round a random permutation of the arms (randomised blocks).
    Randomised,
}

/// A plan that cannot run, naming what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("the plan does not parse: {0}")]
    Toml(String),
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error("{0}")]
    Invalid(String),
}

/// Most tests, arms and runs one plan may ask for.
pub const MAX_TESTS: usize = 100;
pub const MAX_ARMS: usize = 26;
pub const MAX_ITERATIONS: u32 = 1000;

impl Plan {
    /// Reads a plan from TOML text.
    pub fn from_toml(text: &str) -> Result<Plan, PlanError> {
        let plan: Plan = toml::from_str(text).map_err(|e| PlanError::Toml(e.to_string()))?;
        plan.check()?;
        Ok(plan)
    }

    /// The arms, or the one default arm.
    pub fn arms(&self) -> Vec<Arm> {
        if self.arms.is_empty() {
            vec![Arm {
                name: "default".into(),
                args: vec![],
                setup: None,
                teardown: None,
                shape: Default::default(),
                in_host: None,
                client: None,
                server: None,
                path: None,
                clients: None,
                baseline: None,
            }]
        } else {
            self.arms.clone()
        }
    }

    /// The baseline arm's index.
    pub fn baseline(&self) -> usize {
        self.baseline
            .as_ref()
            .and_then(|b| self.arms.iter().position(|a| &a.name == b))
            .unwrap_or(0)
    }

    /// The index of the arm that arm `i` (of [`Plan::arms`]) is compared against: its own
    /// `baseline`, else the plan's; `i` itself for a baseline (compared with nothing).
    pub fn baseline_of(&self, i: usize) -> usize {
        let base = self.baseline();
        let Some(a) = self.arms.get(i) else {
            return base;
        };
        a.baseline
            .as_ref()
            .and_then(|b| self.arms.iter().position(|x| &x.name == b))
            .unwrap_or(base)
    }

    /// Checks what can be checked before anything runs (each point's test
    /// is checked by its kind later, also before anything runs).
    pub fn check(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Invalid(m));
        if self.tests.is_empty() && self.groups.is_empty() {
            return bad("the plan has no [[test]] (nor [[group]])".into());
        }
        if self.tests.len() > MAX_TESTS || self.arms.len() > MAX_ARMS {
            return bad(format!("at most {MAX_TESTS} tests and {MAX_ARMS} arms"));
        }
        let mut names: Vec<&str> = self.arms.iter().map(|a| a.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return bad("two arms have the same name".into());
        }
        if let Some(b) = &self.baseline {
            if !self.arms.iter().any(|a| &a.name == b) {
                return bad(format!("baseline {b:?} is not an arm's name"));
            }
        }
        for a in &self.arms {
            let Some(b) = &a.baseline else { continue };
            match self.arms.iter().find(|x| &x.name == b) {
                None => return bad(format!("arm {:?}: baseline {b:?} is not an arm's name", a.name)),
                Some(x) if x.name == a.name => {
                    return bad(format!("arm {:?}: its baseline is itself", a.name))
                }
                Some(x) if x.baseline.is_some() => {
                    return bad(format!(
                        "arm {:?}: its baseline {b:?} names a baseline of its own (one level only)",
                        a.name
                    ))
                }
                Some(_) if self.arms[self.baseline()].name == a.name => {
                    return bad(format!(
                        "arm {:?} is the plan's baseline: it cannot name another",
                        a.name
                    ))
                }
                Some(_) => {}
            }
        }
        let it = &self.iterations;
        if it.min == 0 || it.min > it.max || it.max > MAX_ITERATIONS {
            return bad(format!(
                "iterations: max {} and min {} must satisfy 1 <= min <= max <= {MAX_ITERATIONS}",
                it.max, it.min
            ));
        }
        if !(it.level > 50.0 && it.level < 100.0) {
            return bad(format!(
                "iterations: level {} must be a percentage between 50 and 100 (95, 99)",
                it.level
            ));
        }
        if !(it.width > 0.0 && it.width <= 100.0) {
            return bad(format!(
                "iterations: width {} must be a percentage of the mean, above 0",
                it.width
            ));
        }
        if let Some(f) = self.target.as_ref().and_then(|t| t.family.as_deref()) {
            if f != "ipv4" && f != "ipv6" {
                return bad(format!("target family {f:?} is neither \"ipv4\" nor \"ipv6\""));
            }
        }
        if !(self.command_timeout_s.is_finite()
            && self.command_timeout_s > 0.0
            && self.command_timeout_s <= 3600.0)
        {
            return bad("command_timeout_s must be in (0, 3600] seconds".into());
        }
        for t in &self.tests {
            sweep::points(&t.sweep)?;
        }
        self.check_lab()?;
        group::check(self)?;
        Ok(())
    }

    /// Where `arm`'s runs go in the plan's lab (`None` without a lab).
    pub fn lab_route(&self, arm: &Arm) -> Result<Option<LabRoute>, PlanError> {
        let Some(lab) = &self.lab else {
            return Ok(None);
        };
        let bad = |m: String| Err(PlanError::Invalid(m));
        let t = self.target.as_ref();
        let pick =
            |a: &Option<String>, t: Option<&Option<String>>| a.clone().or_else(|| t.cloned().flatten());
        let path = pick(&arm.path, t.map(|t| &t.path)).unwrap_or_else(|| "link".into());
        let loopback = match path.as_str() {
            "link" => false,
            "loopback" => true,
            p => {
                return bad(format!(
                    "arm {:?}: path {p:?} is neither \"link\" nor \"loopback\"",
                    arm.name
                ))
            }
        };
        let Some(server) = pick(&arm.server, t.map(|t| &t.server)) else {
            return bad(format!(
                "arm {:?}: a plan with a [lab] names the server's host (target.server = \"HOST\", or the arm's server)",
                arm.name
            ));
        };
        // An arm's loopback runs the client in the server's host, whatever client the target
        // names (a target's own loopback with a client elsewhere is refused below).
        let hosts = clients::client_hosts(self, arm);
        let client = match (&arm.client, loopback) {
            (Some(c), _) => Some(c.clone()),
            (None, _) if !hosts.is_empty() => Some(hosts[0].clone()),
            (None, true) if arm.path.is_some() => Some(server.clone()),
            (None, _) => t
                .and_then(|t| t.client.clone())
                .or_else(|| loopback.then(|| server.clone())),
        };
        let client = match client {
            Some(c) => c,
            None => {
                return bad(format!(
                    "arm {:?}: a plan with a [lab] names the client's host (target.client = \"HOST\", or the arm's client)",
                    arm.name
                ))
            }
        };
        for h in [&client, &server].into_iter().chain(&arm.in_host) {
            if !lab.hosts.contains_key(h) {
                return bad(format!(
                    "arm {:?}: {h:?} is not a host of the [lab] (hosts: {})",
                    arm.name,
                    lab.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        if loopback && client != server {
            return bad(format!(
                "arm {:?}: path \"loopback\" runs the client in the server's host ({server}), not in {client}",
                arm.name
            ));
        }
        if !loopback && client == server {
            return bad(format!(
                "arm {:?}: client and server are both {client}: that is path = \"loopback\"",
                arm.name
            ));
        }
        Ok(Some(LabRoute {
            client,
            server,
            loopback,
        }))
    }

    /// A lab's hosts named only with a lab, each a host of it; what a lab cannot yet take refused.
    fn check_lab(&self) -> Result<(), PlanError> {
        if self.lab.is_none() && self.arms.iter().any(|a| !a.shape.is_empty()) {
            return Err(PlanError::Invalid(
                "an arm's shape names the lab's links: the plan has no [lab]".into(),
            ));
        }
        let bad = |m: String| Err(PlanError::Invalid(m));
        let t = self.target.as_ref();
        if self.lab.is_none() {
            let named = t.is_some_and(|t| {
                t.client.is_some()
                    || t.server.is_some()
                    || t.path.is_some()
                    || matches!(t.clients, Some(TargetClients::Hosts(_)))
            }) || self.arms.iter().any(|a| {
                a.client.is_some()
                    || a.server.is_some()
                    || a.path.is_some()
                    || a.in_host.is_some()
                    || a.clients.is_some()
            });
            if named {
                return bad("client, server, path, in_host and a list of clients name lab hosts: the plan has no [lab]".into());
            }
            return Ok(());
        }
        if let Some(t) = t {
            if t.host.is_some()
                || t.server_agent.is_some()
                || t.clients.as_ref().is_some_and(|c| c.count().is_some())
                || !t.client_addrs.is_empty()
            {
                return bad(
                    "a plan with a [lab] runs against the lab's agents: target.host, server_agent, a number of clients and client_addrs are not for it (yet); clients = [\"c1\", \"c2\"] names lab hosts"
                        .into(),
                );
            }
        }
        for a in self.arms() {
            clients::check(self, &a)?;
            // A plan of groups alone may leave the hosts to its groups' tests.
            if !self.tests.is_empty() {
                self.lab_route(&a)?;
            }
        }
        Ok(())
    }
}

/// A sweep table in TOML: option → list or string.
mod sweep_table {
    use super::*;
    use serde::{Deserializer, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Values {
        Text(String),
        List(Vec<toml::Value>),
    }

    pub fn serialize<S: Serializer>(sweeps: &[Sweep], s: S) -> Result<S::Ok, S::Error> {
        let m: BTreeMap<&str, &Vec<String>> = sweeps.iter().map(|w| (w.option.as_str(), &w.values)).collect();
        if m.len() == sweeps.len() && sweeps.windows(2).all(|w| w[0].option < w[1].option) {
            return m.serialize(s);
        }
        // Order matters and a map would sort it: keep the order in a list.
        sweeps.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Sweep>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Table(toml::Table),
            List(Vec<Sweep>),
        }
        match Form::deserialize(d)? {
            Form::List(l) => Ok(l),
            Form::Table(t) => t
                .into_iter()
                .map(|(option, v)| {
                    let values = match v {
                        toml::Value::String(s) => Values::Text(s),
                        toml::Value::Array(a) => Values::List(a),
                        other => Values::Text(other.to_string()),
                    };
                    match values {
                        Values::Text(s) => sweep::parse(&option, &s).map_err(serde::de::Error::custom),
                        Values::List(a) => Ok(Sweep {
                            option,
                            values: a
                                .into_iter()
                                .map(|v| match v {
                                    toml::Value::String(s) => s,
                                    other => other.to_string(),
                                })
                                .collect(),
                        }),
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_with_its_sweeps_arms_and_iterations() {
        let p = Plan::from_toml(
            r#"
            name = "ipqos"
            [[test]]
            kind = "tcp-stream"
            args = ["-l", "1", "-s", "32K"]
            sweep = { "-m" = [32, 64, 2920], "-P" = "1..2" }
            [iterations]
            max = 5
            min = 2
            [[arm]]
            name = "none"
            [[arm]]
            name = "rule"
            setup = "nft -f rule.nft"
            teardown = "nft delete table inet t"
            "#,
        )
        .unwrap();
        assert_eq!(p.tests[0].sweep.len(), 2);
        assert_eq!(p.tests[0].sweep[0].values, ["32", "64", "2920"]);
        assert_eq!(p.arms().len(), 2);
        assert_eq!(p.baseline(), 0);
        assert_eq!(p.iterations.level, 99.0);
        // It saves and reads back as JSON (the saved result holds it).
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
    }

    /// Issue #38: each arm's client host, server host and path in a lab: the target's, or the
    /// arm's own; an arm's loopback runs in the server's host.
    #[test]
    fn each_arm_goes_from_a_lab_host_to_a_lab_host() {
        let lab = "[lab.hosts.c1]\n[lab.hosts.c2]\n[lab.hosts.s1]\n[[lab.links]]\nends = ['c1', 's1']\n\
                   [[lab.links]]\nends = ['c2', 's1']\n";
        let p = Plan::from_toml(&format!(
            "name = 'x'\n[target]\nclient = 'c1'\nserver = 's1'\n[[test]]\nkind = 'tcp-rr'\n\
             [[arm]]\nname = 'a'\n[[arm]]\nname = 'lo'\npath = 'loopback'\n[[arm]]\nname = 'c2'\n\
             client = 'c2'\nin_host = 's1'\n{lab}"
        ))
        .unwrap();
        let routes: Vec<LabRoute> = p
            .arms()
            .iter()
            .map(|a| p.lab_route(a).unwrap().unwrap())
            .collect();
        let r = |c: &str, s: &str, loopback| LabRoute {
            client: c.into(),
            server: s.into(),
            loopback,
        };
        assert_eq!(
            routes,
            [r("c1", "s1", false), r("s1", "s1", true), r("c2", "s1", false)]
        );
        for (text, needle) in [
            ("[target]\nclient = 'c1'\n", "names the server's host"),
            ("[target]\nclient = 'c9'\nserver = 's1'\n", "\"c9\" is not a host"),
            (
                "[target]\nclient = 's1'\nserver = 's1'\n",
                "that is path = \"loopback\"",
            ),
            (
                "[target]\nclient = 'c1'\nserver = 's1'\npath = 'loopback'\n",
                "runs the client in the server's host",
            ),
            ("[target]\nserver = 's1'\npath = 'wire'\n", "neither \"link\" nor"),
            (
                "[target]\nhost = 'h'\nclient = 'c1'\nserver = 's1'\n",
                "target.host",
            ),
        ] {
            let e =
                Plan::from_toml(&format!("name = 'x'\n{text}[[test]]\nkind = 'tcp-rr'\n{lab}")).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        // Lab hosts named without a lab.
        let e =
            Plan::from_toml("name = 'x'\n[[test]]\nkind = 'tcp-rr'\n[[arm]]\nname = 'a'\nin_host = 's1'\n")
                .unwrap_err();
        assert!(e.to_string().contains("no [lab]"), "{e}");
    }

    #[test]
    fn a_bad_plan_says_what_is_wrong() {
        for (text, needle) in [
            ("name = \"x\"\ntest = []", "no [[test]]"),
            (
                "name = \"x\"\n[[test]]\nkind = \"tcp-rr\"\n[iterations]\nmax = 2\nmin = 3",
                "min <= max",
            ),
            (
                "name = \"x\"\n[[test]]\nkind = \"tcp-rr\"\nsweep = { \"-m\" = \"9..1\" }",
                "downwards",
            ),
            (
                "name = \"x\"\nfrob = 1\n[[test]]\nkind = \"tcp-rr\"",
                "unknown field",
            ),
            (
                "name = \"x\"\nbaseline = \"z\"\n[[test]]\nkind = \"tcp-rr\"",
                "not an arm",
            ),
        ] {
            let e = Plan::from_toml(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
