//! Agent-to-agent tests (protocol 8, issue #43): what an operator allows this agent to reach
//! as a client (`--allow-initiate`, `--initiate-keys`), and the seam through which the agent
//! runs such a test. The runner itself is the client's code, which this crate does not
//! depend on: the binary hands one in ([`Initiator`]; netrig_run's `initiator` module).

use netrig_proto::auth::{PublicKey, SecretKey};
use netrig_proto::TestSpec;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What this agent may reach when an authenticated client asks it to test another agent.
#[derive(Debug, Clone)]
pub struct InitiateConfig {
    /// `--allow-initiate`: agents at these addresses.
    pub nets: Vec<ipnet::IpNet>,
    /// `--initiate-keys`: agents that prove one of these keys, wherever they are.
    pub keys: Vec<PublicKey>,
    /// Runs the tests (the client's code).
    pub runner: Arc<dyn Initiator>,
}

impl InitiateConfig {
    /// Whether a target at `ip` that proved `key` may be tested: its address among the
    /// networks, or its key among the keys. `None`: allowed; `Some(why not)`.
    pub fn refusal(&self, ip: IpAddr, key: &PublicKey) -> Option<String> {
        let ip = crate::peer::canonical_ip(ip);
        if self.nets.iter().any(|n| n.contains(&ip)) || self.keys.contains(key) {
            return None;
        }
        Some(format!(
            "{ip} (key {key}) is neither in this agent's --allow-initiate networks ({}) nor among its \
             --initiate-keys ({} key(s))",
            if self.nets.is_empty() {
                "none".to_string()
            } else {
                self.nets
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            self.keys.len()
        ))
    }
}

/// One test to run as a client: the target as the asker named it, the spec, when to start,
/// this agent's key, and what it may reach.
#[derive(Debug, Clone)]
pub struct Job {
    pub target: String,
    pub spec: TestSpec,
    pub start_at: Option<SystemTime>,
    /// The client's own end (`-s`, `--tos`, `--priority`, `--max-pacing-rate`, `--mss`).
    pub client: netrig_proto::initiate::ClientEnd,
    /// This agent's key (`--key`): it proves itself to the target with it.
    pub key: Option<SecretKey>,
    pub allow: InitiateConfig,
}

/// Runs initiated tests. Implemented where the client's code is (netrig_run::initiator).
pub trait Initiator: Send + Sync + std::fmt::Debug {
    /// Starts `job` on a thread of its own.
    fn start(&self, job: Job) -> Box<dyn Running>;
}

/// A test being run for an asker.
pub trait Running: Send {
    /// Waits at most `wait` for its end: the result (the document `netrig KIND --json`
    /// prints) or why there is none.
    fn wait(&mut self, wait: Duration) -> Option<Result<serde_json::Value, String>>;
    /// Stops it (the asker aborted or left); [`Running::wait`] then returns soon.
    fn cancel(&self);
}
