//! `netrig serve` (the agent, its caps and keys) and `netrig keygen` (a key pair).

use crate::cli::{self, KeygenArgs, ServeArgs};
use crate::{http, Usage};
use anyhow::{Context, Result};
use netrig_agent::{Agent, AgentConfig, Hooks};
use netrig_proto::auth::{AgentAuth, SecretKey};
use netrig_proto::AgentLimits;
use std::time::Duration;

/// `--allow-initiate`, `--initiate-keys`: what this agent may test as a client for an asker.
fn initiate_config(
    a: &ServeArgs,
    auth: &AgentAuth,
) -> Result<Option<netrig_agent::initiate::InitiateConfig>> {
    if a.allow_initiate.is_empty() && a.initiate_keys.is_none() {
        return Ok(None);
    }
    if auth.key.is_none() || auth.authorized.is_none() {
        return Err(Usage(
            "--allow-initiate and --initiate-keys need --key (this agent proves itself to the agents it \
             tests) and --authorized-keys (only clients that prove a key may ask it)"
                .into(),
        )
        .into());
    }
    let keys = match &a.initiate_keys {
        None => Vec::new(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Usage(format!("--initiate-keys {}: {e}", p.display())))?;
            let keys = netrig_proto::auth::parse_authorized_keys(&text)
                .map_err(|e| Usage(format!("--initiate-keys {}: {e}", p.display())))?;
            if keys.is_empty() {
                return Err(Usage(format!("--initiate-keys {}: holds no key", p.display())).into());
            }
            keys
        }
    };
    eprintln!(
        "netrig: tests against other agents allowed for authenticated clients: agents in {} and agents \
         proving one of {} key(s) (--allow-initiate, --initiate-keys)",
        if a.allow_initiate.is_empty() {
            "no network".to_string()
        } else {
            a.allow_initiate
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        },
        keys.len()
    );
    Ok(Some(netrig_agent::initiate::InitiateConfig {
        nets: a.allow_initiate.clone(),
        keys,
        runner: std::sync::Arc::new(netrig_run::initiator::RunInitiator),
    }))
}

/// `netrig serve`: the agent, until it is stopped.
pub fn serve(a: ServeArgs) -> Result<()> {
    let bind = match a.bind {
        Some(ip) => ip.with_port(a.port),
        None => AgentConfig::default_bind(a.port),
    };
    let mut config = AgentConfig::new(bind);
    config.limits = AgentLimits {
        max_sessions: a.max_sessions,
        max_flows: a.max_flows,
        max_duration_s: a.max_duration,
        max_workers: a.max_workers,
        max_buffer_bytes: a.max_buffer,
        max_rate_bps: a.max_rate,
        max_amplification: Some(a.max_amplification),
        ..AgentLimits::default()
    };
    let host = netrig_agent::Totals::for_host();
    config.totals = netrig_agent::Totals {
        threads: a.max_threads.unwrap_or(host.threads),
        buffer_bytes: a.max_memory.unwrap_or(host.buffer_bytes),
        flows: a.max_total_flows,
    };
    config.max_sessions_per_client = a.max_sessions_per_client;
    config.idle_timeout = Duration::from_secs(a.idle_timeout);
    config.allow = a.allow.clone();
    config.iperf3_port = a.iperf3_port;
    config.metrics_port = a.metrics_port;
    config.iperf3_unauthenticated = a.iperf3;
    config.allow_profile = a.allow_profile;
    config.disclose = match a.disclose {
        cli::Disclose::Full => netrig_agent::Disclose::Full,
        cli::Disclose::Minimal => netrig_agent::Disclose::Minimal,
    };
    if a.max_buffer > config.totals.buffer_bytes {
        eprintln!(
            "netrig: note: --max-buffer {} MiB per test is more than --max-memory {} MiB for all tests: a test \
             gets at most the latter",
            a.max_buffer >> 20,
            config.totals.buffer_bytes >> 20
        );
    }
    if let Some(dir) = &a.hooks {
        let hooks =
            Hooks::discover(dir, Duration::from_secs(a.hook_timeout)).map_err(|e| Usage(e.to_string()))?;
        eprintln!(
            "netrig: hooks offered from {}: {} (each killed after {} s)",
            hooks.dir().display(),
            hooks.names().join(", "),
            a.hook_timeout
        );
        config.hooks = Some(hooks);
    }
    config.auth = AgentAuth {
        key: a
            .key
            .as_deref()
            .map(|p| read_secret_key(p, "--key"))
            .transpose()?,
        authorized: a
            .authorized_keys
            .as_deref()
            .map(|p| {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| Usage(format!("--authorized-keys {}: {e}", p.display())))?;
                let keys = netrig_proto::auth::parse_authorized_keys(&text)
                    .map_err(|e| Usage(format!("--authorized-keys {}: {e}", p.display())))?;
                if keys.is_empty() {
                    return Err(Usage(format!("--authorized-keys {}: holds no key", p.display())));
                }
                Ok(keys)
            })
            .transpose()?,
    };
    config.name = a.name.clone();
    config.initiate = initiate_config(&a, &config.auth)?;
    let auth_note = match (&config.auth.authorized, &config.auth.key) {
        (Some(k), _) => format!(
            "; only clients with one of the {} authorized keys may run tests",
            k.len()
        ),
        (None, _) if !bind.ip().is_loopback() => {
            "; no --authorized-keys: any client that reaches it may run tests".to_string()
        }
        (None, _) => String::new(),
    };
    let key_note = match &config.auth.key {
        Some(k) => format!("; its key: {}", k.public()),
        None => String::new(),
    };
    if a.http_port.is_none()
        && (a.http.threads.is_some() || a.http.tls_cert.is_some() || a.http.stall_for.is_some())
    {
        return Err(Usage(
            "--threads, --tls-cert and --stall-for are the HTTP server's: add --http-port PORT".into(),
        )
        .into());
    }
    let caps = caps_line(&a, &config);
    let allow = config.allow.clone();
    let agent = Agent::bind(config)?;
    let _http = match a.http_port {
        Some(port) => Some(http::beside_agent(
            match a.bind {
                Some(ip) => ip.with_port(port),
                None => AgentConfig::default_bind(port),
            },
            &a.http,
            allow,
        )?),
        None => None,
    };
    eprintln!(
        "netrig {} agent listening on {} (control and data; protocol v{}){auth_note}{key_note}",
        netrig_proto::SOFTWARE_VERSION,
        agent
            .local_addrs()
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" and "),
        netrig_proto::PROTOCOL_VERSION
    );
    eprintln!("netrig: {caps}");
    if let Some(m) = agent.metrics_addr() {
        eprintln!("netrig: the agent's counters at http://{m}/metrics (--metrics-port; no key needed)");
    }
    eprintln!(
        "netrig: {}",
        iperf3_line(&agent, a.authorized_keys.is_some(), a.iperf3)
    );
    agent.run();
    Ok(())
}

/// Where and whether the agent serves iperf3 clients, as its startup says it.
fn iperf3_line(agent: &Agent, keys: bool, unauthenticated: bool) -> String {
    let port = match agent.iperf3_addr() {
        Some(a) => format!("on its port and on {a} (--iperf3-port)"),
        None => "on its port".to_string(),
    };
    match (keys, unauthenticated) {
        (true, false) => format!(
            "iperf3 clients are refused {port}: they cannot authenticate (--authorized-keys; --iperf3 serves them)"
        ),
        (true, true) => format!("iperf3 clients are served {port}, unauthenticated (--iperf3)"),
        (false, _) => format!("iperf3 clients are served {port}"),
    }
}

/// The agent's caps, as its startup says them.
fn caps_line(a: &ServeArgs, c: &AgentConfig) -> String {
    let t = &c.totals;
    let rate = match a.max_rate {
        Some(r) => format!(
            "at most {} per direction per test",
            netrig_proto::spec::kind::format_bps(r as f64)
        ),
        None => "no rate cap (--max-rate)".into(),
    };
    let rate = format!(
        "{rate}; UDP answers at most {} times their request (--max-amplification)",
        a.max_amplification
    );
    let allow = if c.allow.is_empty() {
        "clients from any address".to_string()
    } else {
        format!(
            "clients from {} only",
            c.allow
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "serving {allow}; {} sessions ({} per client); per test {} flows, {} workers, {} MiB of buffers, {} s; \
         all tests together {} flows, {} threads, {} MiB; {rate}; a session that asks for no test within \
         {} s is closed{}{}",
        a.max_sessions,
        c.max_sessions_per_client,
        a.max_flows,
        c.limits.max_workers.min(t.max_workers()),
        a.max_buffer >> 20,
        a.max_duration,
        t.flows,
        t.threads,
        t.buffer_bytes >> 20,
        a.idle_timeout,
        match c.disclose {
            netrig_agent::Disclose::Full => "",
            netrig_agent::Disclose::Minimal => "; unauthenticated clients are told nothing of this host (--disclose minimal)",
        },
        if c.allow_profile {
            "; tests that ask for a profile get one of this host (--allow-profile)"
        } else {
            ""
        }
    )
}

fn read_secret_key(path: &std::path::Path, option: &str) -> Result<SecretKey, Usage> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Usage(format!("{option} {}: {e}", path.display())))?;
    SecretKey::parse(&text).map_err(|e| Usage(format!("{option} {}: {e}", path.display())))
}

/// `netrig keygen -o FILE`: FILE (the private key, mode 0600, never
/// overwritten) and FILE.pub.
pub fn keygen(a: &KeygenArgs) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let key = SecretKey::generate();
    let mut pub_path = a.output.clone().into_os_string();
    pub_path.push(".pub");
    let pub_path = std::path::PathBuf::from(pub_path);
    let comment = a.comment.clone().unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_else(|_| "netrig".into());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{user}@{}", host.trim())
    });
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&a.output)
        .map_err(|e| Usage(format!("-o {}: {e}", a.output.display())))?;
    f.write_all(key.to_file_text().as_bytes())
        .with_context(|| format!("writing {}", a.output.display()))?;
    std::fs::write(&pub_path, format!("{} {comment}\n", key.public()))
        .with_context(|| format!("writing {}", pub_path.display()))?;
    eprintln!(
        "netrig: wrote the private key to {} and the public key to {}:\n{}",
        a.output.display(),
        pub_path.display(),
        key.public()
    );
    Ok(())
}
