//! What one run is made of, shared by the runner's tests and the groups' members (crate::runner,
//! crate::group) and by several client hosts at once (crate::multi): the kind's plan of a
//! command line, where a run goes in a built lab and the environment its arm's commands are
//! told, a run from a lab host, the arms' order in a round, the arm's commands around each run,
//! and where the runner is for a progress display.

use crate::command::{self, CommandRun};
use crate::document::LabPlace;
use crate::plan::Order;
use crate::sweep::Point;
use netrig_kinds::{Kind, Planned};
use netrig_run::{Cancel, Target};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the runner is, for a progress display.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    pub kind: &'a str,
    pub point: &'a Point,
    pub arm: &'a str,
    /// This arm's run at this point, from 1.
    pub iteration: u32,
    /// Runs done so far, and the most the plan may make.
    pub done: usize,
    pub most: usize,
}

/// The lab a plan's `[lab]` was built into, for [`run_in_lab`].
pub struct Lab<'a> {
    pub state: &'a netrig_lab::LabState,
    /// The netrig binary each run's client runs as, inside its host's namespace.
    pub exe: std::path::PathBuf,
}

pub(crate) fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A test's `args` with the plan's `target.peer`, unless they say `--peer`
/// themselves: the kind then checks it as on its command line.
pub fn with_peer(target: Option<&crate::plan::TargetPlan>, mut args: Vec<String>) -> Vec<String> {
    let given = args.iter().any(|a| a == "--peer" || a.starts_with("--peer="));
    if let Some(peer) = target.and_then(|t| t.peer).filter(|_| !given) {
        args.extend(["--peer".to_string(), peer.name().to_string()]);
    }
    args
}

/// A test's `args` with `--profile` when the plan says `profile = true`, unless they say it
/// themselves.
pub fn with_profile(plan: &crate::plan::Plan, mut args: Vec<String>) -> Vec<String> {
    if plan.profile && !args.iter().any(|a| a == "--profile") {
        args.push("--profile".into());
    }
    args
}

/// The test `args` ask of `kind`, as its command line would make it.
pub fn plan_args(kind: &dyn Kind, args: &[String]) -> Result<Planned, String> {
    let cmd = kind.args(clap::Command::new(kind.name()).no_binary_name(true));
    let m = cmd
        .try_get_matches_from(args)
        .map_err(|e| e.render().to_string().trim_end().to_string())?;
    kind.plan(&m)
}

/// What an arm's commands are told of the agent the plan's runs go to:
/// NETRIG_AGENT_HOST (as given, or the in-process agent's address) and
/// NETRIG_AGENT_PORT, for rules that must match its traffic.
pub(crate) fn agent_env(target: &Target) -> Vec<(&'static str, String)> {
    let (host, port) = match target {
        Target::Agent { host, port, .. } => (host.clone(), *port),
        Target::Started { addr } => (addr.ip().to_string(), addr.port()),
        Target::Embedded { .. } => return Vec::new(),
    };
    vec![
        ("NETRIG_AGENT_HOST", host),
        ("NETRIG_AGENT_PORT", port.to_string()),
    ]
}

/// Where `route` goes in the built lab: the client's namespace, the server agent's address
/// (on a link or LAN the client shares with it, else the server's first; 127.0.0.1 or ::1 for
/// loopback) and port.
pub fn lab_place(
    state: &netrig_lab::LabState,
    route: &crate::plan::LabRoute,
    v6: bool,
) -> Result<LabPlace, String> {
    let host = |h: &str| {
        state
            .hosts
            .get(h)
            .ok_or_else(|| format!("the lab has no host {h:?}"))
    };
    let client_ns = host(&route.client)?.ns.clone();
    let agent = host(&route.server)?
        .agent
        .as_ref()
        .ok_or_else(|| format!("host {} has no agent", route.server))?;
    let (ip, segment): (std::net::IpAddr, Option<String>) = if route.loopback {
        let ip = if v6 {
            std::net::Ipv6Addr::LOCALHOST.into()
        } else {
            std::net::Ipv4Addr::LOCALHOST.into()
        };
        (ip, None)
    } else {
        let on = |s: &&netrig_lab::plan::Segment, h: &str| s.members.iter().any(|m| m.host == h);
        let seg = state
            .segments
            .iter()
            .find(|s| on(s, &route.server) && on(s, &route.client))
            .or_else(|| state.segments.iter().find(|s| on(s, &route.server)))
            .ok_or_else(|| format!("host {} is on no link", route.server))?;
        let m = seg
            .members
            .iter()
            .find(|m| m.host == route.server)
            .expect("found on it");
        let ip = if v6 {
            m.v6.map(|n| std::net::IpAddr::V6(n.addr()))
        } else {
            m.v4.map(|n| std::net::IpAddr::V4(n.addr()))
        }
        .ok_or_else(|| {
            format!(
                "host {} has no {} address on {}",
                route.server,
                if v6 { "IPv6" } else { "IPv4" },
                seg.name
            )
        })?;
        (ip, Some(seg.name.clone()))
    };
    Ok(LabPlace {
        shape: Vec::new(),
        client: route.client.clone(),
        client_ns,
        server: route.server.clone(),
        path: if route.loopback { "loopback" } else { "link" }.into(),
        address: std::net::SocketAddr::new(ip, agent.port).to_string(),
        segment,
        clients: Vec::new(),
    })
}

/// What an arm's commands are told in a lab: the agent its runs go to, and the lab's hosts.
pub(crate) fn place_env(p: &LabPlace) -> Vec<(&'static str, String)> {
    let addr: std::net::SocketAddr = p.address.parse().expect("written by lab_place");
    vec![
        ("NETRIG_AGENT_HOST", addr.ip().to_string()),
        ("NETRIG_AGENT_PORT", addr.port().to_string()),
        ("NETRIG_LAB_CLIENT", p.client.clone()),
        ("NETRIG_LAB_SERVER", p.server.clone()),
    ]
}

/// Most bytes of a lab client's result read back, and of its error output kept.
const MAX_CHILD_OUTPUT: u64 = 256 << 20;

/// One run from a lab host: this netrig binary, run in the client host's namespace (`ip netns
/// exec`) with the test's own options, against the place's agent, its `--json` result read back.
/// Bounded: the test's length and a minute more; killed when `cancel` fires.
pub(crate) fn run_in_host(
    exe: &std::path::Path,
    place: &LabPlace,
    kind: &str,
    args: &[String],
    spec: &netrig_proto::TestSpec,
    cancel: &Cancel,
) -> Result<netrig_report::TestResult, String> {
    use std::io::Read;
    let addr: std::net::SocketAddr = place.address.parse().map_err(|e| format!("{e}"))?;
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", &place.client_ns])
        .arg(exe)
        .arg(kind)
        .args(args)
        .args(crate::lab_one_end::target_args(kind, addr, true, None))
        .arg("--json")
        .env("NETRIG_LAB_HOST", &place.client)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let what = format!("{kind} in lab host {} ({})", place.client, place.client_ns);
    let mut child = c
        .spawn()
        .map_err(|e| format!("{what}: cannot start ip netns exec: {e}"))?;
    let out = child.stdout.take().map(|o| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = o.take(MAX_CHILD_OUTPUT).read_to_end(&mut v);
            v
        })
    });
    let err = child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = e.take(1 << 20).read_to_end(&mut v);
            v
        })
    });
    let length = match spec.limit {
        netrig_proto::spec::Limit::Duration { seconds } => seconds.clamp(0.0, 1e6),
        netrig_proto::spec::Limit::Bytes { .. } => 3600.0,
    };
    let deadline =
        std::time::Instant::now() + Duration::from_secs_f64(length + spec.omit_s.clamp(0.0, 1e6) + 60.0);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if cancel.is_cancelled() => break Err("interrupted".to_string()),
            Ok(None) if std::time::Instant::now() >= deadline => {
                break Err(format!("{what}: no result within its length and 60 s (killed)"))
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("{what}: waiting for it: {e}")),
        }
    };
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = out.and_then(|t| t.join().ok()).unwrap_or_default();
    let err = err.and_then(|t| t.join().ok()).unwrap_or_default();
    let status = status?;
    if !status.success() {
        let e = String::from_utf8_lossy(&err);
        return Err(format!("{what} failed ({status}): {}", e.trim_end()));
    }
    serde_json::from_slice(&out).map_err(|e| format!("{what}: its --json result does not read: {e}"))
}

/// The arms' order in one round: as listed, or a random permutation.
pub(crate) fn round_order(arms: usize, order: Order, rng: &mut fastrand::Rng) -> Vec<usize> {
    let mut o: Vec<usize> = (0..arms).collect();
    if order == Order::Randomised {
        rng.shuffle(&mut o);
    }
    o
}

/// Runs `arm`'s tear-down, if it has one; its failure, if it failed.
pub(crate) fn teardown(
    commands: &mut Vec<CommandRun>,
    arm: &crate::plan::Arm,
    limit: Duration,
    env: &[(&str, String)],
    in_ns: Option<(&str, &str)>,
) -> Option<String> {
    let c = arm.teardown.as_ref()?;
    let r = command::run_in("teardown", &arm.name, c, limit, env, in_ns);
    let failure = (!r.ok()).then(|| r.failure());
    commands.push(r);
    failure
}

/// An arm's commands around each of its runs (a single test's or a group's): the arm's lab
/// changes and its set-up before, its teardown and the lab put back after, each recorded.
pub(crate) struct Around<'a> {
    pub arm: &'a crate::plan::Arm,
    pub shape: &'a [netrig_lab::arm_shape::Change],
    pub limit: Duration,
    pub env: Vec<(&'static str, String)>,
    /// The lab host the arm's commands run in (`in_host`) and its namespace.
    pub in_ns: Option<(&'a str, &'a str)>,
}

impl Around<'_> {
    /// The lab changes and the set-up. Err: the failure, with whatever was done put back.
    pub fn before(&self, commands: &mut Vec<CommandRun>) -> Result<(), String> {
        let (arm, limit, env) = (self.arm, self.limit, &self.env[..]);
        if let Some(f) = crate::lab_counters::shape(commands, &arm.name, self.shape, limit, env) {
            return Err(f);
        }
        if let Some(c) = &arm.setup {
            let r = command::run_in("setup", &arm.name, c, limit, env, self.in_ns);
            let (ok, failure) = (r.ok(), r.failure());
            commands.push(r);
            if !ok {
                teardown(commands, arm, limit, env, self.in_ns);
                crate::lab_counters::unshape(commands, &arm.name, self.shape, limit, env);
                return Err(failure);
            }
        }
        Ok(())
    }

    /// The teardown and the lab put back: the first failure.
    pub fn after(&self, commands: &mut Vec<CommandRun>) -> Option<String> {
        let (arm, limit, env) = (self.arm, self.limit, &self.env[..]);
        teardown(commands, arm, limit, env, self.in_ns)
            .into_iter()
            .chain(crate::lab_counters::unshape(
                commands, &arm.name, self.shape, limit, env,
            ))
            .next()
    }
}
