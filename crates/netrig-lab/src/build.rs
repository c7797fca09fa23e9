//! Building, holding, measuring and removing labs. Every lab has a run id (6 hex digits); its
//! namespaces are `nr<id>-<host>` (and `nr<id>.<lan>` for a LAN's own bridge), its state file
//! `/run/netrig/labs/<id>.json`, written before the first namespace is made, so whatever a crash
//! leaves behind is found and removed by `lab down --stale` (and the next `lab up`).

use crate::plan::{self, address_of, tcp_goodput};
pub use crate::steps::STATE_DIR;
use crate::steps::{Direction, Kernel, Plan, Segment, Step};
use crate::{interrupted, LabError, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a lab is made of, as recorded in its state file (and printed by `lab status --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub id: String,
    pub name: String,
    pub file: String,
    pub created_unix: u64,
    /// The process holding the lab (`lab up --foreground`, or any `lab up` while it builds);
    /// none once a detached lab is up.
    pub owner: Option<Owner>,
    pub ready: bool,
    pub namespaces: Vec<String>,
    pub hosts: BTreeMap<String, HostState>,
    pub segments: Vec<Segment>,
    pub directions: Vec<Direction>,
    pub kernel: Kernel,
    pub witness: Vec<WitnessRow>,
    /// netrig's path elements (docs/LAB.md): where each runs and where its counters are.
    #[serde(default)]
    pub elements: Vec<ElementState>,
    /// What each DSCP class sent and dropped (`tc -s class show`), as last read.
    #[serde(default)]
    pub classes: Vec<crate::topology::ClassCounters>,
    /// Parallel links and how they are balanced.
    #[serde(default)]
    pub groups: Vec<crate::topology::GroupState>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ElementState {
    pub link: String,
    pub ns: String,
    pub pid: Option<u32>,
    pub config: crate::element::Config,
    /// The element's counters per direction, as last read (`lab status` reads them afresh).
    #[serde(default)]
    pub counters: Vec<crate::element::Counters>,
}

impl LabState {
    /// Reads each element's counters file into the state.
    pub fn refresh_counters(&mut self) {
        for e in &mut self.elements {
            if let Some(c) = crate::element::read_counters(&e.config.counters) {
                e.counters = c;
            }
        }
        self.classes = crate::topology::read_class_counters(&self.directions);
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Owner {
    pub pid: u32,
    /// Its start time (clock ticks after boot), so a reused pid is not taken for it.
    pub start: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostState {
    pub ns: String,
    pub addrs: Vec<String>,
    pub agent: Option<AgentState>,
    /// netrig's HTTP server beside the agent, on this port (the lab's `http_port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_port: Option<u16>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentState {
    pub pid: u32,
    pub port: u16,
}

/// One shaped direction, configured beside measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WitnessRow {
    pub link: String,
    pub from: String,
    pub to: String,
    pub mechanism: String,
    pub configured_rate_bps: Option<u64>,
    /// The most TCP payload the configured rate carries at the link's MTU (IPv4, timestamps).
    pub expected_goodput_bps: Option<f64>,
    /// tcp-stream from `from` to `to`'s agent: received payload per second.
    pub measured_goodput_bps: Option<f64>,
    /// Seconds the stream's figure was measured over, after its warm-up.
    pub stream_s: f64,
    /// Seconds of the stream left out at its start (`--omit`): TCP's slow start on a long path.
    #[serde(default)]
    pub stream_omit_s: f64,
    /// The stream's socket buffers (`-s`/`-S`), twice the path's bandwidth-delay product.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_buffer_bytes: Option<u64>,
    /// The median round trip from `from` to `to`, microseconds, measured as `rtt_by` says.
    pub rtt_p50_us: Option<f64>,
    /// How `rtt_p50_us` was measured: "tcp-rr median", or udp-rr's where the round trip crosses
    /// configured loss (`witness::RttProbe`). Absent in state files from before it: tcp-rr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_by: Option<String>,
    /// The round trip the configured delays make (this direction's and the one back), µs;
    /// absent when neither has a delay. Judged against `rtt_p50_us` (10 % + 1 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured_rtt_us: Option<f64>,
    /// The configured loss (percent) and the UDP probe that measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured_loss_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_probe: Option<crate::witness::LossProbe>,
    /// Every figure off its configuration, each naming the link ("; " between them).
    pub warning: Option<String>,
    /// Why a figure is missing.
    pub error: Option<String>,
}

pub struct UpOptions {
    pub file: PathBuf,
    pub name: Option<String>,
    /// Hold the lab until Ctrl-C (or `lab down`), then tear it down.
    pub foreground: bool,
    /// Override the lab's `witness`.
    pub witness: Option<bool>,
    /// Seconds of each witness stream.
    pub witness_length: f64,
    /// The netrig executable the agents and the witness run.
    pub exe: PathBuf,
}

fn other(msg: impl Into<String>) -> LabError {
    LabError::Other(msg.into())
}

/// Refuses without root or CAP_NET_ADMIN and CAP_SYS_ADMIN, naming what is missing.
pub fn check_rights() -> Result<(), LabError> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = missing_caps(&status);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(LabError::Rights(format!(
            "building a lab needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (missing: {})",
            missing.join(", ")
        )))
    }
}

/// The capabilities a lab needs that `/proc/self/status`'s CapEff lacks.
pub fn missing_caps(status: &str) -> Vec<&'static str> {
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")]
        .into_iter()
        .filter(|(bit, _)| eff & (1u64 << bit) == 0)
        .map(|(_, n)| n)
        .collect()
}

fn show(argv: &[String]) -> String {
    argv.join(" ")
}

/// Runs argv (bounded in time), its exit checked; the error names the command.
fn run(argv: &[String], stdin: Option<&str>, timeout: Duration) -> Result<String, LabError> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::Command {
            cmd: show(argv),
            status: "not started".into(),
            stderr: e.to_string(),
        })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    // Read the pipes on threads so a chatty command cannot block on a full pipe.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| other(format!("`{}`: {e}", show(argv))))?
        {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LabError::Command {
                cmd: show(argv),
                status: format!("killed after {} s", timeout.as_secs()),
                stderr: String::new(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = to.join().unwrap_or_default();
    let stderr = te.join().unwrap_or_default();
    if !status.success() {
        return Err(LabError::Command {
            cmd: show(argv),
            status: status.to_string(),
            stderr: stderr.trim().to_string(),
        });
    }
    Ok(stdout)
}

fn in_ns(ns: &str, argv: &[&str]) -> Vec<String> {
    ["ip", "netns", "exec", ns]
        .iter()
        .chain(argv)
        .map(|s| s.to_string())
        .collect()
}

const STEP_TIMEOUT: Duration = Duration::from_secs(20);

fn sysctl_path(key: &str) -> PathBuf {
    Path::new("/proc/sys").join(key.replace('.', "/"))
}

fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn run_step(step: &Step) -> Result<(), LabError> {
    if interrupted() {
        return Err(LabError::Interrupted);
    }
    match step {
        Step::Cmd { ns, argv, stdin } => {
            let full: Vec<String> = match ns {
                Some(ns) => in_ns(ns, &argv.iter().map(String::as_str).collect::<Vec<_>>()),
                None => argv.clone(),
            };
            run(&full, stdin.as_deref(), STEP_TIMEOUT).map(|_| ())
        }
        Step::Sysctl { ns, key, value } => {
            // A lab's sysctl must not reach the root namespace: read the root's value beside.
            let root_before = std::fs::read_to_string(sysctl_path(key)).ok();
            let set = in_ns(ns, &["sysctl", "-qw", &format!("{key}={value}")]);
            run(&set, None, STEP_TIMEOUT)?;
            let root_after = std::fs::read_to_string(sysctl_path(key)).ok();
            if root_before != root_after && !key.starts_with("net.ipv6.conf.") && key != "net.ipv4.ip_forward"
            {
                if let Some(v) = &root_before {
                    let _ = std::fs::write(sysctl_path(key), v);
                }
                return Err(other(format!(
                    "sysctl {key}: not per network namespace on this kernel (setting it in {ns} changed the host's; restored)"
                )));
            }
            let got = run(&in_ns(ns, &["sysctl", "-n", key]), None, STEP_TIMEOUT)?;
            if norm(&got) != norm(value) {
                return Err(LabError::Command {
                    cmd: show(&set),
                    status: "value not taken".into(),
                    stderr: format!("{key} reads {:?} in {ns} after setting {value:?}", norm(&got)),
                });
            }
            Ok(())
        }
    }
}

/// Can the kernel build this qdisc? Tried on a veth in a scratch namespace, removed after.
fn probe_qdisc(id: &str, args: &[&str]) -> Result<bool, LabError> {
    let ns = format!("nr{id}.probe");
    run(
        &["ip".into(), "netns".into(), "add".into(), ns.clone()],
        None,
        STEP_TIMEOUT,
    )?;
    let r = (|| {
        run(
            &in_ns(
                &ns,
                &["ip", "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
            ),
            None,
            STEP_TIMEOUT,
        )?;
        let mut a = vec!["tc", "qdisc", "add", "dev", "p0", "root"];
        a.extend(args);
        Ok::<bool, LabError>(run(&in_ns(&ns, &a), None, STEP_TIMEOUT).is_ok())
    })();
    run(
        &["ip".into(), "netns".into(), "del".into(), ns],
        None,
        STEP_TIMEOUT,
    )?;
    r
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

fn probe_kernel(topo: &Topology, id: &str) -> Result<Kernel, LabError> {
    let shapes = topo
        .links
        .iter()
        .flat_map(|l| l.shape.values())
        .chain(topo.lans.iter().flat_map(|l| l.shape.values()));
    let (mut wants_netem, mut wants_red) = (false, false);
    for s in shapes {
        wants_netem |= !s.netem_properties().is_empty();
        wants_red |= s.red.is_some();
    }
    Ok(Kernel {
        netem: wants_netem && probe_qdisc(id, &["netem", "delay", "1ms"])?,
        red: wants_red
            && probe_qdisc(
                id,
                &[
                    "red",
                    "limit",
                    "400000",
                    "min",
                    "30000",
                    "max",
                    "90000",
                    "avpkt",
                    "1000",
                    "burst",
                    "55",
                    "bandwidth",
                    "10Mbit",
                ],
            )?,
        ethtool: on_path("ethtool"),
        conntrack_max: topo.hosts.values().any(|h| h.conntrack_max.is_some())
            && crate::topology::probe_conntrack_max(id),
    })
}

fn state_path(id: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{id}.json"))
}

fn save(s: &LabState) -> Result<(), LabError> {
    std::fs::create_dir_all(STATE_DIR).map_err(|e| other(format!("{STATE_DIR}: {e}")))?;
    let tmp = Path::new(STATE_DIR).join(format!(".{}.tmp", s.id));
    let text = serde_json::to_vec_pretty(s).expect("serializable");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, state_path(&s.id)))
        .map_err(|e| other(format!("{}: {e}", state_path(&s.id).display())))
}

/// Every lab's state (state files that do not read are skipped, with a note on stderr).
pub fn list() -> Vec<LabState> {
    let Ok(dir) = std::fs::read_dir(STATE_DIR) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    for e in dir.flatten().take(10_000) {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        match std::fs::read(&p).map(|b| serde_json::from_slice::<LabState>(&b)) {
            Ok(Ok(s)) => v.push(s),
            Ok(Err(err)) => eprintln!("netrig lab: {}: not a lab's state ({err}); skipped", p.display()),
            Err(_) => {}
        }
    }
    v.sort_by(|a, b| a.created_unix.cmp(&b.created_unix).then(a.id.cmp(&b.id)));
    v
}

fn proc_start(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

fn alive(pid: u32) -> bool {
    matches!(proc_start(pid), Some((s, _)) if s != 'Z')
}

fn owner_alive(o: &Owner) -> bool {
    matches!(proc_start(o.pid), Some((s, start)) if s != 'Z' && start == o.start)
}

fn me() -> Owner {
    let pid = std::process::id();
    Owner {
        pid,
        start: proc_start(pid).map(|(_, s)| s).unwrap_or(0),
    }
}

/// A lab whose owner is gone (or, once up and detached, whose agents are all gone).
pub fn is_stale(s: &LabState) -> bool {
    match &s.owner {
        Some(o) => !owner_alive(o),
        None => !s
            .hosts
            .values()
            .filter_map(|h| h.agent.as_ref())
            .any(|a| alive(a.pid)),
    }
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid read from the kernel's list of the namespace's processes.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Removes everything of a lab: every process in its namespaces (TERM, then KILL after 2 s),
/// the namespaces (which removes their veths, bridges, qdiscs, rules), its files.
pub fn teardown(s: &LabState) -> Result<(), LabError> {
    let mut errors = Vec::new();
    let existing: Vec<&String> = s
        .namespaces
        .iter()
        .filter(|ns| Path::new("/run/netns").join(ns).exists())
        .collect();
    let pids_of = |ns: &str| -> Vec<u32> {
        run(
            &["ip".into(), "netns".into(), "pids".into(), ns.to_string()],
            None,
            STEP_TIMEOUT,
        )
        .map(|o| o.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
    };
    let mut pids: Vec<u32> = existing.iter().flat_map(|ns| pids_of(ns)).collect();
    pids.retain(|&p| p != std::process::id());
    for &p in &pids {
        kill(p, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in &pids {
        if alive(p) {
            kill(p, libc::SIGKILL);
        }
    }
    for ns in existing.iter().rev() {
        if let Err(e) = run(
            &["ip".into(), "netns".into(), "del".into(), ns.to_string()],
            None,
            STEP_TIMEOUT,
        ) {
            // Another process tearing down the same (stale) lab may have removed it first.
            if Path::new("/run/netns").join(ns).exists() {
                errors.push(e.to_string());
            }
        }
    }
    let _ = std::fs::remove_dir_all(Path::new(STATE_DIR).join(&s.id));
    if let Err(e) = std::fs::remove_file(state_path(&s.id)) {
        if e.kind() != std::io::ErrorKind::NotFound {
            errors.push(format!("{}: {e}", state_path(&s.id).display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(other(format!(
            "tearing down {} ({}): {}",
            s.name,
            s.id,
            errors.join("; ")
        )))
    }
}

/// Tears down the labs named (by name or id), or all; returns their names.
pub fn down(which: Option<&str>) -> Result<Vec<String>, LabError> {
    check_rights()?;
    let labs: Vec<LabState> = list()
        .into_iter()
        .filter(|s| which.is_none_or(|w| s.name == w || s.id == w || format!("nr{}", s.id) == w))
        .collect();
    if let (Some(w), true) = (which, labs.is_empty()) {
        return Err(LabError::Spec(format!(
            "no lab named {w:?} (netrig lab status lists them)"
        )));
    }
    let mut done = Vec::new();
    for s in labs {
        teardown(&s)?;
        done.push(format!("{} ({})", s.name, s.id));
    }
    Ok(done)
}

/// Tears down the labs whose owning process is gone; returns their names.
pub fn down_stale() -> Result<Vec<String>, LabError> {
    check_rights()?;
    let mut done = Vec::new();
    for s in list().into_iter().filter(is_stale) {
        teardown(&s)?;
        done.push(format!("{} ({})", s.name, s.id));
    }
    Ok(done)
}

fn random_id() -> String {
    let mut b = [0u8; 3];
    getrandom::fill(&mut b).expect("the kernel's random numbers");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn lab_name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 40
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Builds the lab of `o.file`: refuses what cannot be built before making anything; on any error
/// (and Ctrl-C) tears down what was made. With `foreground`, holds it until Ctrl-C or `lab down`.
pub fn up(o: &UpOptions, say: &mut dyn FnMut(&str)) -> Result<LabState, LabError> {
    check_rights()?;
    let text =
        std::fs::read_to_string(&o.file).map_err(|e| LabError::Spec(format!("{}: {e}", o.file.display())))?;
    let topo = crate::model::parse(&text).map_err(|e| match e {
        LabError::Spec(m) => LabError::Spec(format!("{}: {m}", o.file.display())),
        e => e,
    })?;
    let name = o.name.clone().or_else(|| topo.name.clone()).unwrap_or_else(|| {
        o.file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "lab".into())
    });
    if !lab_name_ok(&name) {
        return Err(LabError::Spec(format!(
            "lab name {name:?}: 1 to 40 of letters, digits, '-', '_', '.'"
        )));
    }
    for s in down_stale()? {
        say(&format!("removed stale lab {s}"));
    }
    if list().iter().any(|s| s.name == name) {
        return Err(LabError::Spec(format!(
            "a lab named {name:?} is up (netrig lab down {name}, or --name)"
        )));
    }
    let id = loop {
        let id = random_id();
        if !state_path(&id).exists() {
            break id;
        }
    };
    let kernel = probe_kernel(&topo, &id)?;
    let dir = o.file.parent().map(Path::to_path_buf).unwrap_or_default();
    let p = plan::plan(&topo, &id, kernel, &dir)?;
    let mut state = LabState {
        id: id.clone(),
        name,
        file: o.file.display().to_string(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        owner: Some(me()),
        ready: false,
        namespaces: p.namespaces.clone(),
        hosts: p
            .hosts
            .iter()
            .map(|(h, ns)| {
                let addrs = p
                    .segments
                    .iter()
                    .flat_map(|s| s.members.iter().filter(|m| &m.host == h))
                    .flat_map(|m| [m.v4.map(|a| a.to_string()), m.v6.map(|a| a.to_string())])
                    .flatten()
                    .collect();
                (
                    h.clone(),
                    HostState {
                        ns: ns.clone(),
                        addrs,
                        agent: None,
                        http_port: topo.hosts.get(h).and_then(|t| t.http_port),
                    },
                )
            })
            .collect(),
        segments: p.segments.clone(),
        directions: p.directions.clone(),
        kernel,
        witness: Vec::new(),
        elements: p
            .elements
            .iter()
            .map(|e| ElementState {
                link: e.config.link.clone(),
                ns: e.ns.clone(),
                pid: None,
                config: e.config.clone(),
                counters: Vec::new(),
            })
            .collect(),
        classes: Vec::new(),
        groups: p.groups.clone(),
    };
    save(&state)?;
    let port = topo.agent_port.unwrap_or(6387);
    let built = build(
        &p,
        &mut state,
        o,
        port,
        o.witness.or(topo.witness).unwrap_or(true),
        say,
    );
    if let Err(e) = built {
        let t = teardown(&state);
        // Ctrl-C reaches the commands running too: their failure is the interruption.
        let e = if interrupted() { LabError::Interrupted } else { e };
        return Err(match (e, t) {
            (e, Ok(())) => e,
            (e, Err(t)) => other(format!("{e}; and then {t}")),
        });
    }
    state.ready = true;
    if !o.foreground {
        state.owner = None;
    }
    save(&state)?;
    Ok(state)
}

/// Holds a foreground lab until Ctrl-C (then tears it down: Err(Interrupted)) or until
/// `lab down` removed it (Ok).
pub fn hold(state: &LabState) -> Result<(), LabError> {
    loop {
        if interrupted() {
            teardown(state)?;
            return Err(LabError::Interrupted);
        }
        if !state_path(&state.id).exists() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn build(
    p: &Plan,
    state: &mut LabState,
    o: &UpOptions,
    port: u16,
    witness: bool,
    say: &mut dyn FnMut(&str),
) -> Result<(), LabError> {
    for step in &p.steps {
        run_step(step)?;
    }
    let logs = Path::new(STATE_DIR).join(&p.id);
    std::fs::create_dir_all(&logs).map_err(|e| other(format!("{}: {e}", logs.display())))?;
    // Path elements: `netrig lab element CONFIG` in each element's namespace, waited for until
    // it has bound its sockets (it writes its counters then).
    for (i, e) in p.elements.iter().enumerate() {
        let conf = logs.join(format!("element-{i}.conf.json"));
        std::fs::write(&conf, serde_json::to_vec_pretty(&e.config).expect("serializable"))
            .map_err(|err| other(format!("{}: {err}", conf.display())))?;
        let log = logs.join(format!("element-{i}.log"));
        let f = std::fs::File::create(&log).map_err(|err| other(format!("{}: {err}", log.display())))?;
        use std::os::unix::process::CommandExt;
        let child = Command::new("ip")
            .args(["netns", "exec", &e.ns])
            .arg(&o.exe)
            .args(["lab", "element"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(f.try_clone().map_err(|err| other(err.to_string()))?)
            .stderr(f)
            .process_group(0)
            .spawn()
            .map_err(|err| {
                other(format!(
                    "starting the path element of link {}: {err}",
                    e.config.link
                ))
            })?;
        let pid = child.id();
        drop(child);
        state.elements[i].pid = Some(pid);
        save(state)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !e.config.counters.exists() {
            if interrupted() {
                return Err(LabError::Interrupted);
            }
            if !alive(pid) || Instant::now() > deadline {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(other(format!(
                    "the path element of link {} ({pid}) did not start: {}",
                    e.config.link,
                    text.trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Agents: `netrig serve` in each host, in its own process group (a terminal's Ctrl-C goes to
    // the lab's owner, which tears down), waited for until it listens.
    for (h, ns) in &p.hosts {
        let http: Vec<String> = match state.hosts.get(h).and_then(|s| s.http_port) {
            Some(port) => vec!["--http-port".into(), port.to_string()],
            None => Vec::new(),
        };
        let log = logs.join(format!("{h}.log"));
        let f = std::fs::File::create(&log).map_err(|e| other(format!("{}: {e}", log.display())))?;
        use std::os::unix::process::CommandExt;
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(&o.exe)
            // The lab's own agents, started by its user: a test that asks (`--profile`) gets
            // the remote host's profile too.
            .args(["serve", "-p", &port.to_string(), "-q", "--allow-profile"])
            .args(&http)
            .stdin(Stdio::null())
            .stdout(f.try_clone().map_err(|e| other(e.to_string()))?)
            .stderr(f)
            .process_group(0)
            .spawn()
            .map_err(|e| other(format!("starting the agent of {h}: {e}")))?;
        let pid = child.id();
        drop(child);
        state.hosts.get_mut(h).expect("host").agent = Some(AgentState { pid, port });
        save(state)?;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for (h, hs) in &state.hosts {
        let a = hs.agent.as_ref().expect("started");
        loop {
            if interrupted() {
                return Err(LabError::Interrupted);
            }
            if listens(a.pid, a.port) {
                break;
            }
            if !alive(a.pid) || Instant::now() > deadline {
                let log = std::fs::read_to_string(logs.join(format!("{h}.log"))).unwrap_or_default();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(other(format!(
                    "the agent of {h} ({}) {} port {}: {tail}",
                    a.pid,
                    if alive(a.pid) {
                        "did not listen within 15 s on"
                    } else {
                        "exited before listening on"
                    },
                    a.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    say(&format!(
        "built {} hosts in {} namespaces; agents listen on port {port}",
        p.hosts.len(),
        p.namespaces.len()
    ));
    if witness {
        for d in &p.directions {
            let row = witness_row(p, d, port, o)?;
            if let Some(w) = &row.warning {
                say(&format!("warning: {w}"));
            }
            state.witness.push(row);
            save(state)?;
        }
    }
    if interrupted() {
        return Err(LabError::Interrupted);
    }
    Ok(())
}

/// Is `pid` (in its own namespace) listening on TCP `port`? From /proc/PID/net/tcp{,6}, which
/// show the process's namespace.
fn listens(pid: u32, port: u16) -> bool {
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
            .map(|t| {
                t.lines().skip(1).any(|l| {
                    let c: Vec<&str> = l.split_whitespace().collect();
                    c.len() > 3
                        && c[3] == "0A"
                        && c[1]
                            .rsplit(':')
                            .next()
                            .and_then(|p| u16::from_str_radix(p, 16).ok())
                            == Some(port)
                })
            })
            .unwrap_or(false)
    })
}

fn netrig_json(ns: &str, exe: &Path, args: &[&str]) -> Result<serde_json::Value, String> {
    let mut argv = in_ns(ns, &[]);
    argv.push(exe.display().to_string());
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push("--json".into());
    let out = run(&argv, None, Duration::from_secs(60)).map_err(|e| e.to_string())?;
    serde_json::from_str(&out).map_err(|e| format!("`{}`: not a result ({e})", show(&argv)))
}

fn witness_row(p: &Plan, d: &Direction, port: u16, o: &UpOptions) -> Result<WitnessRow, LabError> {
    if interrupted() {
        return Err(LabError::Interrupted);
    }
    let to = crate::topology::address_on(p, d).or_else(|| address_of(p, &d.to, &d.from));
    let port_s = port.to_string();
    let expected = d.rate_bps.map(|r| tcp_goodput(r, d.mtu));
    let mut row = WitnessRow {
        link: d.link.clone(),
        from: d.from.clone(),
        to: d.to.clone(),
        mechanism: d.mechanism.clone(),
        configured_rate_bps: d.rate_bps,
        expected_goodput_bps: expected,
        measured_goodput_bps: None,
        stream_s: o.witness_length,
        stream_omit_s: 0.0,
        stream_buffer_bytes: None,
        rtt_p50_us: None,
        rtt_by: None,
        configured_rtt_us: crate::witness::configured_rtt_us(&p.directions, d),
        configured_loss_pct: d.shape.loss.filter(|l| *l > 0.0),
        loss_probe: None,
        warning: None,
        error: None,
    };
    let Some(to) = to else {
        row.error = Some(format!("not measured: {} has no IPv4 address", d.to));
        return Ok(row);
    };
    let host = to.to_string();
    let mut errors = Vec::new();
    // The round trip first: the stream's warm-up and buffers follow from it.
    let rtt_probe = crate::witness::RttProbe::for_path(
        crate::witness::round_trip_is_lossy(&p.directions, d),
        row.configured_rtt_us,
    );
    let mut rtt_args: Vec<String> = rtt_probe.args();
    rtt_args.splice(
        1..1,
        ["-H".to_string(), host.clone(), "-p".into(), port_s.clone()],
    );
    let rtt_args: Vec<&str> = rtt_args.iter().map(String::as_str).collect();
    row.rtt_by = Some(rtt_probe.describe());
    // Twice at most: a probe that timed nothing (its set-up lost, the machine stalled) says
    // nothing of the path; the second's failure is the row's error.
    for attempt in 1..=2 {
        let failed = match netrig_json(&d.ns, &o.exe, &rtt_args) {
            Ok(v) => {
                row.rtt_p50_us = v["summary"]["latency_us"]["p50"].as_f64();
                row.rtt_p50_us.is_none().then(|| {
                    format!(
                        "`{}` timed no transaction ({} completed)",
                        rtt_args.join(" "),
                        v["summary"]["transactions"]
                    )
                })
            }
            Err(e) => Some(e),
        };
        match failed {
            None => break,
            Some(e) if attempt == 2 => errors.push(format!("round trip not measured (twice): {e}")),
            Some(_) => {}
        }
    }
    if let (Some(rate), Some(_)) = (d.rate_bps, expected) {
        let (omit, buffer) = warm_up(rate, d.mtu, row.rtt_p50_us.unwrap_or(0.0));
        row.stream_omit_s = omit;
        row.stream_buffer_bytes = buffer;
        let total = format!("{}", o.witness_length + omit);
        let omit_s = format!("{omit}");
        let mut args = vec!["tcp-stream", "-H", &host, "-p", &port_s, "-l", &total];
        if omit > 0.0 {
            args.extend(["--omit", &omit_s]);
        }
        let buf = buffer.map(|b| b.to_string());
        if let Some(b) = &buf {
            args.extend(["-s", b, "-S", b]);
        }
        match netrig_json(&d.ns, &o.exe, &args) {
            Ok(v) => row.measured_goodput_bps = v["summary"]["throughput_bps"].as_f64(),
            Err(e) => errors.push(format!("rate not measured: {e}")),
        }
    }
    let mut warnings: Vec<String> = judge(d, expected, row.measured_goodput_bps)
        .into_iter()
        .chain(crate::witness::judge_rtt(
            d,
            row.configured_rtt_us,
            row.rtt_p50_us,
            &rtt_probe.describe(),
        ))
        .collect();
    if let Some(loss) = row.configured_loss_pct {
        let mut probe = crate::witness::loss_probe_plan(loss, d.rate_bps);
        let (b, m, l) = (
            probe.rate_bps.to_string(),
            probe.datagram_bytes.to_string(),
            probe.length_s.to_string(),
        );
        let args = [
            "udp-stream",
            "-H",
            &host,
            "-p",
            &port_s,
            "-l",
            &l,
            "-b",
            &b,
            "-m",
            &m,
            "--no-gso",
        ];
        match netrig_json(&d.ns, &o.exe, &args) {
            Ok(v) => {
                let u = &v["summary"]["udp"];
                // The receiving host's own drops (a full socket buffer), over the probe.
                let deltas = &v["counters"]["remote"]["deltas"];
                let dropped = ["Udp.RcvbufErrors", "Udp6.RcvbufErrors"]
                    .iter()
                    .filter_map(|k| deltas[*k].as_u64())
                    .reduce(|a, x| a.saturating_add(x));
                match (u["sent_datagrams"].as_u64(), u["lost_datagrams"].as_u64()) {
                    (Some(sent), Some(lost)) => warnings.extend(crate::witness::judge_loss(
                        d, loss, &mut probe, sent, lost, dropped,
                    )),
                    _ => errors.push(format!(
                        "loss not measured: udp-stream gave no datagram counts ({u})"
                    )),
                }
            }
            Err(e) => errors.push(format!("loss not measured: {e}")),
        }
        row.loss_probe = Some(probe);
    }
    row.warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    if !errors.is_empty() {
        row.error = Some(errors.join("; "));
    }
    Ok(row)
}

/// The witness stream's warm-up and socket buffers on a path of `rate_bps` at `mtu` with a
/// round trip of `rtt_us`: TCP's slow start doubles its window each round trip from 10
/// segments, so it reaches the bandwidth-delay product after log2(BDP / 10 segments) round
/// trips; three more let the queue settle. Left out of the figure (`--omit`), at most 5 s, none
/// on a path whose warm-up is under 10 ms. Buffers: twice the BDP when that is above the
/// kernel's usual 128 KiB (at most 64 MiB), else the kernel's own.
pub fn warm_up(rate_bps: u64, mtu: u32, rtt_us: f64) -> (f64, Option<u64>) {
    let rtt_s = (rtt_us.max(0.0)) / 1e6;
    let bdp = rate_bps as f64 / 8.0 * rtt_s;
    let segment = (mtu as f64 - 52.0).max(500.0);
    let rounds = (bdp / (10.0 * segment)).max(1.0).log2() + 3.0;
    let omit = (rounds * rtt_s).min(5.0);
    let omit = if omit < 0.01 {
        0.0
    } else {
        (omit * 100.0).ceil() / 100.0
    };
    let buffer = (2.0 * bdp > 128.0 * 1024.0).then(|| (2.0 * bdp).min(64.0 * 1024.0 * 1024.0) as u64);
    (omit, buffer)
}

/// The witness's warning: the measured TCP payload rate more than 10 % off what the configured
/// rate carries.
pub fn judge(d: &Direction, expected: Option<f64>, measured: Option<f64>) -> Option<String> {
    let (e, m) = (expected?, measured?);
    let off = m / e - 1.0;
    (off.abs() > 0.10).then(|| {
        format!(
            "link {} ({} → {}): measured {:.2} Mbit/s of TCP payload, {:+.1} % off the {:.2} Mbit/s the configured {:.2} Mbit/s carries at MTU {}",
            d.link,
            d.from,
            d.to,
            m / 1e6,
            off * 100.0,
            e / 1e6,
            d.rate_bps.unwrap_or(0) as f64 / 1e6,
            d.mtu
        )
    })
}

/// Runs CMD in HOST's namespace of the lab `which` (a first word `netrig` runs this netrig);
/// returns its exit status.
pub fn exec(which: &str, host: &str, cmd: &[String], exe: &Path) -> Result<i32, LabError> {
    check_rights()?;
    let s = list()
        .into_iter()
        .find(|s| s.name == which || s.id == which)
        .ok_or_else(|| LabError::Spec(format!("no lab named {which:?} (netrig lab status lists them)")))?;
    let h = s.hosts.get(host).ok_or_else(|| {
        LabError::Spec(format!(
            "lab {}: no host {host:?} (hosts: {})",
            s.name,
            s.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    if cmd.is_empty() {
        return Err(LabError::Spec(
            "lab exec: no command (netrig lab exec LAB HOST -- CMD ...)".into(),
        ));
    }
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &h.ns]);
    if cmd[0] == "netrig" {
        c.arg(exe);
    } else {
        c.arg(&cmd[0]);
    }
    c.args(&cmd[1..])
        .env("NETRIG_LAB", &s.name)
        .env("NETRIG_LAB_HOST", host);
    let st = c
        .status()
        .map_err(|e| other(format!("ip netns exec {} {}: {e}", h.ns, cmd[0])))?;
    Ok(st
        .code()
        .unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(&st).unwrap_or(0)))
}

fn mbit(b: f64) -> String {
    format!("{:.2} Mbit/s", b / 1e6)
}

/// The labs as text: hosts and addresses, shaped directions, the witness.
pub fn status_text(labs: &[LabState]) -> String {
    let mut o = String::new();
    if labs.is_empty() {
        o.push_str("no labs\n");
    }
    for s in labs {
        let held = match &s.owner {
            Some(ow) if s.ready => format!("held by process {} (lab up --foreground)", ow.pid),
            Some(ow) => format!("being built by process {}", ow.pid),
            None => "detached".into(),
        };
        let stale = if is_stale(s) {
            "; STALE: its owner is gone (netrig lab down --stale)"
        } else {
            ""
        };
        o.push_str(&format!(
            "lab {} (id {}, from {}): {held}{stale}\n",
            s.name, s.id, s.file
        ));
        for (h, hs) in &s.hosts {
            let agent = hs
                .agent
                .as_ref()
                .map(|a| format!("agent on port {} (pid {})", a.port, a.pid))
                .unwrap_or_else(|| "no agent".into())
                + &hs
                    .http_port
                    .map(|p| format!(", netrig's HTTP server on port {p}"))
                    .unwrap_or_default();
            o.push_str(&format!(
                "  host {h}: namespace {}, {}, {agent}\n",
                hs.ns,
                hs.addrs.join(" ")
            ));
        }
        for seg in &s.segments {
            let ends: Vec<String> = seg
                .members
                .iter()
                .map(|m| format!("{}:{}", m.host, m.dev))
                .collect();
            o.push_str(&format!(
                "  {} {}: {} (MTU {})\n",
                if seg.lan { "LAN" } else { "link" },
                seg.name,
                ends.join(" "),
                seg.mtu
            ));
        }
        o.push_str(&crate::topology::groups_text(&s.groups));
        for d in &s.directions {
            o.push_str(&format!(
                "  shaped {} → {} on {}: {}\n",
                d.from, d.to, d.link, d.mechanism
            ));
        }
        for e in &s.elements {
            for c in &e.counters {
                o.push_str(&format!(
                    "  element {} → {} on {} (namespace {}): received {}, forwarded {}, dropped {}, delayed {}, reordered {}, duplicated {}, send errors {}, over the delay line's bound {}, dropped unread (the element behind) {} (frames since lab up); of them UDP: received {}, dropped {}, reordered {}, duplicated {}\n",
                    c.from, c.to, e.link, e.ns, c.received, c.forwarded, c.dropped, c.delayed, c.reordered, c.duplicated, c.send_errors, c.overflow, c.rx_drops,
                    c.udp.received, c.udp.dropped, c.udp.reordered, c.udp.duplicated
                ));
                o.push_str(&crate::element_plan::status_extra(c));
                o.push_str(&status_line(e, c));
            }
        }
        o.push_str(&crate::topology::classes_text(&s.classes));
        for w in &s.witness {
            let rate = match (
                w.configured_rate_bps,
                w.expected_goodput_bps,
                w.measured_goodput_bps,
            ) {
                (Some(r), Some(e), Some(m)) => format!(
                    "rate {} configured (at most {} of TCP payload), {} measured over {} s{}",
                    mbit(r as f64),
                    mbit(e),
                    mbit(m),
                    w.stream_s,
                    if w.stream_omit_s > 0.0 {
                        format!(" after {} s of slow start", w.stream_omit_s)
                    } else {
                        String::new()
                    }
                ),
                (Some(r), _, None) => format!("rate {} configured, not measured", mbit(r as f64)),
                _ => "no rate configured".into(),
            };
            let rtt = w
                .rtt_p50_us
                .map(|r| {
                    let by = w.rtt_by.as_deref().unwrap_or("tcp-rr median");
                    format!("round trip {r:.0} µs ({by}; 1 s)")
                })
                .unwrap_or_else(|| "round trip not measured".into());
            let delay = w
                .configured_rtt_us
                .map(|c| format!(" against {:.2} ms the configured delays make", c / 1e3))
                .unwrap_or_default();
            o.push_str(&format!(
                "  witness {} → {}: {rate}; {rtt}{delay}\n",
                w.from, w.to
            ));
            if let (Some(c), Some(p)) = (w.configured_loss_pct, &w.loss_probe) {
                let m = match (p.sent, p.lost, p.measured_pct, p.bound_low_pct, p.bound_high_pct) {
                    (Some(s), Some(l), Some(m), Some(lo), Some(hi)) => match p.receiver_dropped {
                        Some(r) if r > 0 => format!(
                            "{m:.2} % measured ({} of {s} datagrams lost on the path, besides {r} the receiving host dropped for a full socket buffer, left out; bound {lo:.2}–{hi:.2} %)",
                            l.saturating_sub(r)
                        ),
                        _ => format!(
                            "{m:.2} % measured ({l} of {s} datagrams lost; bound {lo:.2}–{hi:.2} %)"
                        ),
                    },
                    _ => "not measured".into(),
                };
                o.push_str(&format!(
                    "    loss {c} % configured, {m}: udp-stream --no-gso, {}-byte datagrams at {} over {} s\n",
                    p.datagram_bytes,
                    mbit(p.rate_bps as f64),
                    p.length_s
                ));
            }
            if let Some(x) = &w.warning {
                o.push_str(&format!("    warning: {x}\n"));
            }
            if let Some(x) = &w.error {
                o.push_str(&format!("    {x}\n"));
            }
        }
    }
    o
}

/// `lab status`: the properties in force in one direction of an element, where an arm or
/// `lab set` changed them (its configuration file's generation above 0); empty otherwise.
pub fn status_line(e: &ElementState, c: &crate::element::Counters) -> String {
    if c.generation == 0 {
        return String::new();
    }
    let conf = e.config.counters.with_extension("conf.json");
    let now = std::fs::read(&conf)
        .ok()
        .and_then(|t| serde_json::from_slice::<crate::element::Config>(&t).ok());
    let dir = e.config.ends.iter().position(|h| *h == c.from).unwrap_or(0);
    match now {
        Some(n) if n.props[dir] != e.config.props[dir] => format!(
            "    in force (generation {}, changed by an arm or lab set): {}; the lab's own: {}\n",
            c.generation,
            crate::element_plan::describe(&n.props[dir]),
            crate::element_plan::describe(&e.config.props[dir])
        ),
        Some(_) => format!(
            "    in force (generation {}): the lab's own properties\n",
            c.generation
        ),
        None => format!(
            "    generation {}: its configuration {} cannot be read\n",
            c.generation,
            conf.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scavenger study's path (155 Mbit/s, 116 ms) needs about a second of slow start left
    /// out and buffers of twice its 2.2 MB product; a veth's 15 µs needs neither; a 10 ms
    /// gigabit path a tenth of a second.
    #[test]
    fn the_witness_stream_leaves_out_slow_start_on_a_long_path() {
        let (omit, buf) = warm_up(155_000_000, 1500, 116_000.0);
        assert!((0.9..1.5).contains(&omit), "{omit}");
        let bdp = 155e6 / 8.0 * 0.116;
        assert_eq!(buf, Some((2.0 * bdp) as u64));
        assert_eq!(warm_up(50_000_000, 1500, 15.0), (0.0, None));
        let (omit, buf) = warm_up(1_000_000_000, 1500, 10_000.0);
        assert!((0.05..0.15).contains(&omit), "{omit}");
        assert!(buf.is_some_and(|b| b > 2_000_000));
        // Never more than 5 s, nor buffers beyond 64 MiB.
        let (omit, buf) = warm_up(100_000_000_000, 9000, 2_000_000.0);
        assert_eq!(omit, 5.0);
        assert_eq!(buf, Some(64 * 1024 * 1024));
    }

    #[test]
    fn the_witness_warns_beyond_ten_percent_naming_the_link() {
        let d = Direction {
            link: "r-s".into(),
            from: "r".into(),
            to: "s".into(),
            ns: "n".into(),
            dev: "to-s".into(),
            shape: Default::default(),
            rate_bps: Some(50_000_000),
            mechanism: "htb".into(),
            mtu: 1500,
        };
        let e = tcp_goodput(50_000_000, 1500);
        assert_eq!(judge(&d, Some(e), Some(e * 0.95)), None);
        let w = judge(&d, Some(e), Some(e * 0.8)).unwrap();
        assert!(
            w.starts_with(
                "link r-s (r → s): measured 38.26 Mbit/s of TCP payload, -20.0 % off the 47.82 Mbit/s"
            ),
            "{w}"
        );
        assert!(judge(&d, Some(e), Some(e * 1.2)).is_some());
        assert_eq!(judge(&d, Some(e), None), None, "nothing measured: no judgement");
    }

    #[test]
    fn missing_capabilities_are_named() {
        assert!(missing_caps("CapEff:\t000001fffeffffff\n").is_empty());
        assert_eq!(
            missing_caps("CapEff:\t0000000000000000\n"),
            vec!["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]
        );
        assert_eq!(missing_caps("CapEff:\t0000000000001000\n"), vec!["CAP_SYS_ADMIN"]);
    }

    #[test]
    fn a_detached_lab_is_stale_when_its_agents_are_gone_and_a_held_one_when_its_owner_is() {
        let mut s = LabState {
            id: "000000".into(),
            name: "x".into(),
            file: "x".into(),
            created_unix: 0,
            owner: Some(me()),
            ready: true,
            namespaces: vec![],
            hosts: BTreeMap::new(),
            segments: vec![],
            directions: vec![],
            kernel: Kernel::default(),
            witness: vec![],
            elements: vec![],
            classes: vec![],
            groups: vec![],
        };
        assert!(!is_stale(&s));
        s.owner = Some(Owner {
            pid: std::process::id(),
            start: 1,
        });
        assert!(is_stale(&s), "a reused pid is not the owner");
        s.owner = None;
        s.hosts.insert(
            "a".into(),
            HostState {
                ns: "n".into(),
                addrs: vec![],
                agent: Some(AgentState {
                    pid: std::process::id(),
                    port: 1,
                }),
                http_port: None,
            },
        );
        assert!(!is_stale(&s));
    }
}
