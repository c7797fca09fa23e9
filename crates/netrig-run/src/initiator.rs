//! The runner of agent-to-agent tests (protocol 8): an agent asked to `initiate` runs the test
//! here, with the client's own code, as `netrig KIND -H TARGET --key ITS_KEY` would. The
//! target must first prove an agent key (a handshake of its own, before any test traffic), and
//! that key or the target's address must be among what the agent's operator allowed; the test
//! then requires that same key, so the agent that is tested is the agent that was checked.

use crate::{Cancel, LocalOptions, Target};
use netrig_agent::initiate::{InitiateConfig, Initiator, Job, Running};
use netrig_client::{Client, ClientOptions, Family};
use netrig_engine::sockopt::SocketSettings;
use netrig_proto::auth::{ClientAuth, PublicKey};
use std::sync::mpsc;
use std::time::Duration;

/// How long the runner waits for the target to accept its connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The runner an agent is given (`AgentConfig::initiate`).
#[derive(Debug, Default)]
pub struct RunInitiator;

struct Run {
    cancel: Cancel,
    done: mpsc::Receiver<Result<serde_json::Value, String>>,
    result: Option<Result<serde_json::Value, String>>,
}

impl Initiator for RunInitiator {
    fn start(&self, job: Job) -> Box<dyn Running> {
        let cancel = Cancel::new();
        let (tx, done) = mpsc::channel();
        let c = cancel.clone();
        let spawned = std::thread::Builder::new()
            .name("netrig-initiate".into())
            .spawn(move || {
                let _ = tx.send(run_job(&job, &c));
            });
        let result = spawned
            .err()
            .map(|e| Err(format!("cannot start the initiated test's thread: {e}")));
        Box::new(Run { cancel, done, result })
    }
}

impl Running for Run {
    fn wait(&mut self, wait: Duration) -> Option<Result<serde_json::Value, String>> {
        if let Some(r) = self.result.take() {
            return Some(r);
        }
        match self.done.recv_timeout(wait) {
            Ok(r) => Some(r),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Some(Err("the initiated test's thread ended without a result".into()))
            }
        }
    }

    fn cancel(&self) {
        self.cancel.cancel("the asker aborted or left");
    }
}

/// The target's host and port, as the asker named it (`host:port`, `[v6]:port`).
fn host_and_port(target: &str) -> Result<(String, u16), String> {
    crate::host_port("initiate's target", target, "its port", None)
        .map_err(|e| format!("{e} (the asker must name host:port)"))
}

/// Checks the target: it answers as a netrig agent, proves a key, and is allowed by address
/// or key. The key it proved.
fn checked_target(job: &Job, host: &str, port: u16) -> Result<PublicKey, String> {
    let addrs = netrig_client::resolve(host, port, Family::Any).map_err(|e| e.to_string())?;
    let opts = options(
        host,
        port,
        ClientAuth {
            key: job.key.clone(),
            agent_key: None,
        },
    );
    let client = Client::connect(&addrs, opts).map_err(|e| e.to_string())?;
    let addr = client.agent_address();
    let Some(key) = client.agent_key() else {
        client.close();
        return Err(format!(
            "{host} ({addr}) is a netrig agent without a key of its own: this agent tests only agents that \
             prove a key (netrig serve --key there)"
        ));
    };
    client.close();
    match allowed(&job.allow, addr.ip(), &key) {
        None => Ok(key),
        Some(why) => Err(format!("not allowed to test {host}: {why}")),
    }
}

fn allowed(config: &InitiateConfig, ip: std::net::IpAddr, key: &PublicKey) -> Option<String> {
    config.refusal(ip, key)
}

fn options(host: &str, port: u16, auth: ClientAuth) -> ClientOptions {
    ClientOptions {
        host: Some(host.to_string()),
        port,
        family: Family::Any,
        bind: None,
        local: Default::default(),
        connect_timeout: CONNECT_TIMEOUT,
        cpus: None,
        udp_size_default: false,
        auth,
        start_at: None,
        peer: netrig_report::model::peer::Peer::Netrig,
        server_output: false,
        profile: false,
    }
}

/// Checks the target, then runs the test against it requiring the key it proved.
fn run_job(job: &Job, cancel: &Cancel) -> Result<serde_json::Value, String> {
    let (host, port) = host_and_port(&job.target)?;
    let key = checked_target(job, &host, port)?;
    let target = Target::Agent {
        host,
        port,
        family: Family::Any,
        bind: None,
        auth: ClientAuth {
            key: job.key.clone(),
            agent_key: Some(key),
        },
    };
    // The client's end as `netrig KIND` sets its own: the asker's socket options and MSS, the
    // TCP options of the spec's kind.
    let mut sockets = SocketSettings::new(&job.client.socket, job.spec.rules().tcp());
    sockets.mss = job.client.mss;
    let local = LocalOptions {
        sockets,
        connect_timeout: CONNECT_TIMEOUT,
        start_at: job.start_at,
        peer: netrig_report::model::peer::Peer::Netrig,
        ..LocalOptions::default()
    };
    let result = crate::run(&target, local, &job.spec, cancel, &mut |_| {}).map_err(|e| e.to_string())?;
    serde_json::to_value(&result).map_err(|e| format!("the result does not serialize: {e}"))
}
