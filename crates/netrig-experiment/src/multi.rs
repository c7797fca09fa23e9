//! Several client hosts at once (issue #38): a lab plan's `clients = ["c1", ..., "c5"]` (in its
//! `[target]` or an arm) runs the same test in every listed host's namespace together, one child
//! `netrig KIND ... --json --start-at T` per host, all to the same server agent (the gigabit
//! study's five clients; the IA64 study's one client, then two). Each child sets up, then sends
//! `go` at the common instant T; its result's `started_unix_s` says when it really began, and the
//! spread of those is the **start skew**. The results are summed where a sum means something
//! (bytes, throughput, transactions/s, datagram counts), latency histograms merged (withheld
//! with the reason when a client's result has none), and each client's part kept beside the sum
//! ([`ClientsRun`]), with the window over which every client was measuring (the overlap).

use crate::document::LabPlace;
use crate::plan::{Arm, Plan, PlanError};
use netrig_document::result::profile::EndProfile;
use netrig_metrics::latency::LatencyRecorder;
use netrig_report::{
    jain_index, DirectionSummary, IntervalResult, LatencyUs, Spread, TestResult, UdpSummary,
};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::document::clients::{ClientPart, ClientsRun, Overlap};
pub use crate::plan::clients::{check, client_hosts, MAX_CLIENT_HOSTS};

/// A start skew above this share of the shortest client's window is a warning.
pub const SKEW_WARN_FRACTION: f64 = 0.05;
/// The most latency histogram bytes read from one client's result.
const MAX_HISTOGRAM: usize = 16 << 20;
/// Most bytes of a client's result read back, and of its error output kept.
const MAX_CHILD_OUTPUT: u64 = 256 << 20;

/// Each client host's place in the built lab (the server's address as seen from each), when the
/// arm runs from two or more hosts at once; empty otherwise.
pub fn places(
    plan: &Plan,
    arm: &Arm,
    state: &netrig_lab::LabState,
    v6: bool,
) -> Result<Vec<LabPlace>, PlanError> {
    let hosts = client_hosts(plan, arm);
    if hosts.len() < 2 {
        return Ok(Vec::new());
    }
    let route = plan.lab_route(arm)?.expect("a plan with a lab");
    hosts
        .iter()
        .map(|h| {
            let r = crate::plan::LabRoute {
                client: h.clone(),
                ..route.clone()
            };
            crate::execute::lab_place(state, &r, v6)
                .map_err(|e| PlanError::Invalid(format!("arm {:?}: client {h}: {e}", arm.name)))
        })
        .collect()
}

fn unix_s(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// How long before the common start the children are started: time to exec this binary in
/// each namespace, connect and set up (a debug build on a busy 2-core machine takes a few
/// hundred ms for five). A child set up later starts at once: the skew shows it.
fn start_lead(n: usize) -> Duration {
    (Duration::from_millis(1000) + Duration::from_millis(250) * n as u32).min(Duration::from_secs(5))
    // within the 10 s a client waits for --start-at
}

struct Child {
    place: LabPlace,
    child: std::process::Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

/// Runs the test from every place at once and sums it: each child is this netrig binary in
/// its host's namespace (`ip netns exec NS netrig KIND ARGS -H ADDR -p PORT --json --start-at
/// T`). Bounded: the lead, the test's length and a minute more; all killed when `cancel` fires
/// or one fails.
pub fn run(
    exe: &std::path::Path,
    places: &[LabPlace],
    kind: &str,
    args: &[String],
    spec: &netrig_proto::TestSpec,
    cancel: &netrig_run::Cancel,
) -> Result<(TestResult, ClientsRun), String> {
    let start_at = SystemTime::now() + start_lead(places.len());
    let start_s = unix_s(start_at);
    let mut children: Vec<Child> = Vec::new();
    for (k, place) in places.iter().enumerate() {
        match spawn(exe, place, kind, args, (k, places.len()), start_s) {
            Ok(c) => children.push(c),
            Err(e) => {
                kill(&mut children);
                return Err(e);
            }
        }
    }
    let length = match spec.limit {
        netrig_proto::spec::Limit::Duration { seconds } => seconds.clamp(0.0, 1e6),
        netrig_proto::spec::Limit::Bytes { .. } => 3600.0,
    };
    let deadline = Instant::now()
        + start_lead(places.len())
        + Duration::from_secs_f64(length + spec.omit_s.clamp(0.0, 1e6) + 60.0);
    let failed = wait_all(&mut children, kind, deadline, cancel);
    if failed.is_some() {
        kill(&mut children);
    }
    let parts = collect(children, kind, failed)?;
    match crate::lab_one_end::kind_sum(kind, spec, &parts) {
        // The kind's own sum (offered rate, errors by cause), with the hosts' parts and skew.
        Some(own) => {
            let own = own?;
            let (generic, run) = sum(parts, start_s)?;
            let mut own = own;
            own.started_unix_s = generic.started_unix_s;
            own.warnings = generic.warnings;
            own.witness = generic.witness;
            Ok((own, run))
        }
        None => sum(parts, start_s),
    }
}

fn kill(children: &mut [Child]) {
    for c in children.iter_mut() {
        let _ = c.child.kill();
        let _ = c.child.wait();
    }
}

/// Client `share.0` of `share.1`: this binary in its host's namespace, its output read (bounded)
/// by a thread each.
fn spawn(
    exe: &std::path::Path,
    place: &LabPlace,
    kind: &str,
    args: &[String],
    share: (usize, usize),
    start_s: f64,
) -> Result<Child, String> {
    use std::io::Read;
    let addr: std::net::SocketAddr = place.address.parse().map_err(|e| format!("{e}"))?;
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", &place.client_ns])
        .arg(exe)
        .arg(kind)
        .args(args)
        // A kind with one end: each host its share, the first one's run watched by the agent.
        .args(crate::lab_one_end::target_args(
            kind,
            addr,
            share.0 == 0,
            Some(share),
        ))
        .args(["--json", "--start-at", &format!("{start_s:.6}")])
        .env("NETRIG_LAB_HOST", &place.client)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().map_err(|e| {
        format!(
            "{kind} in lab host {}: cannot start ip netns exec: {e}",
            place.client
        )
    })?;
    let mut o = child.stdout.take().expect("piped");
    let mut e = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = (&mut o).take(MAX_CHILD_OUTPUT).read_to_end(&mut v);
        let _ = std::io::copy(&mut o, &mut std::io::sink());
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = (&mut e).take(1 << 20).read_to_end(&mut v);
        let _ = std::io::copy(&mut e, &mut std::io::sink());
        v
    });
    Ok(Child {
        place: place.clone(),
        child,
        out,
        err,
    })
}

/// Until every child has ended, one fails, `cancel` fires or the deadline passes: what ended it
/// badly, if anything.
fn wait_all(
    children: &mut [Child],
    kind: &str,
    deadline: Instant,
    cancel: &netrig_run::Cancel,
) -> Option<String> {
    let mut failed: Option<String> = None;
    loop {
        if cancel.is_cancelled() {
            return Some("interrupted".into());
        }
        let mut all = true;
        for c in children.iter_mut() {
            match c.child.try_wait() {
                Ok(Some(s)) if s.success() => {}
                Ok(Some(s)) => {
                    failed.get_or_insert(format!(
                        "{kind} in lab host {} ({}) failed ({s})",
                        c.place.client, c.place.client_ns
                    ));
                }
                Ok(None) => all = false,
                Err(e) => {
                    failed.get_or_insert(format!(
                        "{kind} in lab host {}: waiting for it: {e}",
                        c.place.client
                    ));
                }
            }
        }
        if all || failed.is_some() {
            return failed;
        }
        if Instant::now() >= deadline {
            return Some(format!(
                "{kind} from {} client hosts: no result within the start lead, its length and 60 s (killed)",
                children.len()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every child's result, or every error (the failure first, then each host's last line).
fn collect(
    children: Vec<Child>,
    kind: &str,
    failed: Option<String>,
) -> Result<Vec<(LabPlace, TestResult)>, String> {
    let mut parts = Vec::new();
    let mut errors = Vec::new();
    for c in children {
        let out = c.out.join().unwrap_or_default();
        let err = c.err.join().unwrap_or_default();
        let err = String::from_utf8_lossy(&err);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        if failed.is_some() {
            if !last.is_empty() {
                errors.push(format!("{}: {last}", c.place.client));
            }
            continue;
        }
        match serde_json::from_slice::<TestResult>(&out) {
            Ok(r) => parts.push((c.place, r)),
            Err(e) => errors.push(format!(
                "{kind} in lab host {}: its --json result does not read: {e}: {last}",
                c.place.client
            )),
        }
    }
    if let Some(f) = failed {
        errors.insert(0, f);
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(parts)
}

/// The clients' results as one run's result, and each one's part: bytes, rates, transactions,
/// datagram counts added; latency histograms merged (withheld, with the reason, unless every
/// client's result carries one); flows, intervals (by index) and workers put together; the
/// start skew and the common window measured from each result's own start time. CPU
/// figures and kernel counters are the first client's (every lab host shares this machine's
/// CPUs; each namespace has its own counters), and the witness is each client's own.
pub fn sum(
    parts: Vec<(LabPlace, TestResult)>,
    start_at_unix_s: f64,
) -> Result<(TestResult, ClientsRun), String> {
    let n = parts.len();
    let Some(first) = parts.first() else {
        return Err("no client reported".into());
    };
    let mut out = first.1.clone();
    let mut withheld = Vec::new();
    let (earliest, start_skew_s, overlap) = timing(&parts, out.config.omit_s, &mut withheld);
    let latency = merged_latency(&parts, &mut withheld)?;
    sum_summary(&mut out, &parts, latency, &mut withheld);
    withheld.push(format!(
        "service demand of the {n} clients together: CPU per unit over windows that differ by the start skew \
         (each client's own is in its part)"
    ));
    withheld.push(format!(
        "CPU and kernel counters of the sum: the first client's ({}); every lab host shares this machine's CPUs, \
         each namespace has its own counters (each client's are in its part)",
        first.0.client
    ));
    // Each client's sampler saw the whole machine over its own window, and its demand is over
    // its own share of the work: the first's profile is not the sum's, and several added would
    // count the same CPU time n times.
    if let Some(p) = &mut out.profile {
        let why = format!(
            "profile withheld: {n} client hosts at once, each sampling the whole machine over its own window; \
             no profile of their sum is made"
        );
        p.local = EndProfile::Withheld {
            withheld: why.clone(),
        };
        p.remote = EndProfile::Withheld { withheld: why };
    }
    out.intervals = summed_intervals(&parts);
    number_workers_on(&mut out, &parts);
    out.config.flows = parts.iter().map(|(_, r)| r.config.flows).sum();
    out.config.workers = parts.iter().map(|(_, r)| r.config.workers).sum::<Option<u32>>();
    out.started_unix_s = earliest;
    out.warnings = Vec::new();
    for (p, r) in &parts {
        for w in &r.warnings {
            out.warnings.push(format!("client {}: {w}", p.client));
        }
    }
    out.witness = netrig_report::witness::WitnessResult {
        withheld: vec![format!(
            "{n} client hosts: the sum is not checked against the kernel: each client's readings bracket only \
             its own run in its own namespace (each client's witness is in its part)"
        )],
        ..Default::default()
    };
    let clients: Vec<ClientPart> = parts
        .into_iter()
        .map(|(p, r)| ClientPart {
            host: p.client,
            namespace: p.client_ns,
            address: p.address,
            started_unix_s: r.started_unix_s,
            start_offset_s: r.started_unix_s.zip(earliest).map(|(a, b)| a - b),
            throughput_bps: r.summary.throughput_bps,
            bytes: r.summary.bytes,
            elapsed_s: r.summary.elapsed_s,
            transactions_per_s: r.summary.transactions_per_s,
            result: r,
        })
        .collect();
    let run = ClientsRun {
        start_at_unix_s,
        start_skew_s,
        overlap,
        clients,
        withheld,
    };
    out.warnings.extend(skew_warning(&run));
    Ok((out, run))
}

/// The earliest start, the start skew and the window every client measured at once (each
/// after its own omitted seconds); withheld, said, when a result has no start time.
fn timing(
    parts: &[(LabPlace, TestResult)],
    omit: f64,
    withheld: &mut Vec<String>,
) -> (Option<f64>, Option<f64>, Option<Overlap>) {
    let starts: Option<Vec<f64>> = parts.iter().map(|(_, r)| r.started_unix_s).collect();
    let earliest = starts
        .as_ref()
        .map(|s| s.iter().copied().fold(f64::INFINITY, f64::min));
    let start_skew_s = starts.as_ref().map(|s| {
        let latest = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        latest - earliest.unwrap_or(latest)
    });
    if start_skew_s.is_none() {
        withheld.push(
            "start skew and the common window: a client's result has no started_unix_s (a netrig before it)"
                .into(),
        );
    }
    let overlap = starts.as_ref().map(|s| {
        let from = s.iter().map(|t| t + omit).fold(f64::NEG_INFINITY, f64::max);
        let to = s
            .iter()
            .zip(parts)
            .map(|(t, (_, r))| t + omit + r.summary.elapsed_s)
            .fold(f64::INFINITY, f64::min);
        let shortest = parts
            .iter()
            .map(|(_, r)| r.summary.elapsed_s)
            .fold(f64::INFINITY, f64::min);
        let length_s = (to - from).max(0.0);
        Overlap {
            start_unix_s: from,
            end_unix_s: to,
            length_s,
            of_shortest_window: if shortest > 0.0 { length_s / shortest } else { 0.0 },
        }
    });
    (earliest, start_skew_s, overlap)
}

/// The clients' latency histograms merged, or nothing (said, when some had latency but not every
/// one a histogram: percentiles do not add).
fn merged_latency(
    parts: &[(LabPlace, TestResult)],
    withheld: &mut Vec<String>,
) -> Result<Option<LatencyUs>, String> {
    let mut latency: Option<LatencyRecorder> = None;
    let mut latency_missing = false;
    let any_latency = parts.iter().any(|(_, r)| r.summary.latency_us.is_some());
    for (p, r) in parts {
        match r.summary.latency_us.as_ref().and_then(|l| l.histogram.as_ref()) {
            Some(b64) => {
                let h = LatencyRecorder::from_base64(b64, MAX_HISTOGRAM)
                    .map_err(|e| format!("client {}'s latency histogram: {e}", p.client))?;
                match &mut latency {
                    Some(m) => m.merge(&h),
                    None => latency = Some(h),
                }
            }
            None => latency_missing |= any_latency,
        }
    }
    Ok(match (latency, latency_missing) {
        (Some(l), false) if !l.is_empty() => {
            let wire = netrig_proto::report::measure::LatencySummary::from(&l.summary());
            Some(LatencyUs {
                histogram: Some(l.to_base64()),
                ..LatencyUs::from(&wire)
            })
        }
        _ => {
            if any_latency {
                withheld.push(format!(
                    "latency of the {} clients together: a client's result carries no histogram to merge, and \
                     percentiles do not add (each client's own are in its part)",
                    parts.len()
                ));
            }
            None
        }
    })
}

/// The summary's counts and rates added, its flows numbered on, each direction summed over
/// them; service demand left out (the windows differ).
fn sum_summary(
    out: &mut TestResult,
    parts: &[(LabPlace, TestResult)],
    latency: Option<LatencyUs>,
    withheld: &mut Vec<String>,
) {
    let s = &mut out.summary;
    let all = |f: &dyn Fn(&TestResult) -> Option<f64>| -> Option<f64> {
        parts.iter().map(|(_, r)| f(r)).sum::<Option<f64>>()
    };
    s.bytes = parts
        .iter()
        .map(|(_, r)| r.summary.bytes)
        .fold(0, u64::saturating_add);
    s.throughput_bps = parts.iter().map(|(_, r)| r.summary.throughput_bps).sum();
    s.elapsed_s = parts.iter().map(|(_, r)| r.summary.elapsed_s).fold(0.0, f64::max);
    s.tx_throughput_bps = all(&|r| r.summary.tx_throughput_bps);
    s.rx_throughput_bps = all(&|r| r.summary.rx_throughput_bps);
    s.send_throughput_bps = all(&|r| r.summary.send_throughput_bps);
    s.recv_throughput_bps = all(&|r| r.summary.recv_throughput_bps);
    s.transactions = parts
        .iter()
        .map(|(_, r)| r.summary.transactions)
        .sum::<Option<u64>>();
    s.transactions_per_s = all(&|r| r.summary.transactions_per_s);
    s.latency_us = latency;
    s.udp = udp_sum(
        parts.iter().map(|(_, r)| r.summary.udp.as_ref()).collect(),
        withheld,
    );
    // Flows: every client's, numbered on; each direction summed over them.
    let mut flows = Vec::new();
    for (_, r) in parts {
        for f in &r.flows {
            let mut f = f.clone();
            f.id = flows.len() as u32;
            flows.push(f);
        }
    }
    s.directions = s
        .directions
        .iter()
        .map(|d| {
            let of: Vec<&DirectionSummary> = parts
                .iter()
                .flat_map(|(_, r)| r.summary.directions.iter().filter(|x| x.direction == d.direction))
                .collect();
            let per_flow: Vec<f64> = flows
                .iter()
                .filter(|f| f.direction == d.direction)
                .map(|f| f.throughput_bps)
                .collect();
            DirectionSummary {
                direction: d.direction,
                flows: of.iter().map(|x| x.flows).sum(),
                bytes: of.iter().map(|x| x.bytes).fold(0, u64::saturating_add),
                elapsed_s: of.iter().map(|x| x.elapsed_s).fold(0.0, f64::max),
                throughput_bps: of.iter().map(|x| x.throughput_bps).sum(),
                sender_bytes: of.iter().map(|x| x.sender_bytes).fold(0, u64::saturating_add),
                sender_elapsed_s: of.iter().map(|x| x.sender_elapsed_s).fold(0.0, f64::max),
                sender_throughput_bps: of.iter().map(|x| x.sender_throughput_bps).sum(),
                flow_throughput_bps: Spread::of(&per_flow),
                fairness: jain_index(&per_flow),
            }
        })
        .collect();
    s.directions_fairness = jain_index(&s.directions.iter().map(|d| d.throughput_bps).collect::<Vec<_>>());
    s.service_demand.local = None;
    s.service_demand.remote = None;
    s.service_demand.local_per_packet_us = None;
    s.service_demand.remote_per_packet_us = None;
    out.flows = flows;
}

/// Intervals by index: counts and rates add (each client's on its own clock from its own start);
/// what does not add (fairness, UDP, latency of several clients) left out.
fn summed_intervals(parts: &[(LabPlace, TestResult)]) -> Vec<IntervalResult> {
    let mut intervals: Vec<IntervalResult> = Vec::new();
    for (_, r) in parts {
        for iv in &r.intervals {
            match intervals.iter_mut().find(|o| o.index == iv.index) {
                Some(o) => {
                    o.bytes = o.bytes.saturating_add(iv.bytes);
                    o.throughput_bps += iv.throughput_bps;
                    o.rx_throughput_bps = add_opt(o.rx_throughput_bps, iv.rx_throughput_bps);
                    o.tx_throughput_bps = add_opt(o.tx_throughput_bps, iv.tx_throughput_bps);
                    o.transactions_per_s = add_opt(o.transactions_per_s, iv.transactions_per_s);
                    o.retransmits = o
                        .retransmits
                        .zip(iv.retransmits)
                        .map(|(a, b)| a.saturating_add(b));
                    o.failed_transactions = o
                        .failed_transactions
                        .zip(iv.failed_transactions)
                        .map(|(a, b)| a.saturating_add(b));
                    o.flows.extend(iv.flows.iter().cloned());
                    (o.tx_fairness, o.rx_fairness, o.directions_fairness) = (None, None, None);
                    o.udp = None;
                    o.latency_us = None;
                }
                None => intervals.push(iv.clone()),
            }
        }
    }
    if parts.len() > 1 {
        for i in &mut intervals {
            i.latency_us = None;
        }
    }
    intervals.sort_by_key(|i| i.index);
    intervals
}

/// Each client's workers, and the agent's for each client, after the first's, numbered on.
fn number_workers_on(out: &mut TestResult, parts: &[(LabPlace, TestResult)]) {
    for (_, r) in parts.iter().skip(1) {
        for (all, more) in [
            (&mut out.workers.local, &r.workers.local),
            (&mut out.workers.remote, &r.workers.remote),
        ] {
            let base = all.len() as u32;
            all.extend(more.iter().cloned().map(|mut w| {
                w.worker += base;
                w
            }));
        }
    }
}

/// A start skew above [`SKEW_WARN_FRACTION`] of the shortest client's window, said.
pub fn skew_warning(run: &ClientsRun) -> Option<String> {
    let (skew, o) = (run.start_skew_s?, run.overlap.as_ref()?);
    let shortest = run
        .clients
        .iter()
        .map(|c| c.elapsed_s)
        .fold(f64::INFINITY, f64::min);
    (shortest > 0.0 && skew > SKEW_WARN_FRACTION * shortest).then(|| {
        format!(
            "the {} clients began {:.1} ms apart, {:.0}% of the shortest window ({:.3} s): the sum holds over \
             their common {:.3} s; a longer test (-l) makes the skew a smaller part",
            run.clients.len(),
            skew * 1e3,
            skew / shortest * 100.0,
            shortest,
            o.length_s
        )
    })
}

fn add_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

/// The clients' datagram counts added; jitter withheld (each client's is over its own flows).
fn udp_sum(parts: Vec<Option<&UdpSummary>>, withheld: &mut Vec<String>) -> Option<UdpSummary> {
    let parts: Vec<&UdpSummary> = parts.into_iter().collect::<Option<_>>()?;
    let mut u = (*parts.first()?).clone();
    let add = |f: fn(&UdpSummary) -> u64| parts.iter().map(|p| f(p)).fold(0u64, u64::saturating_add);
    u.sent_datagrams = add(|p| p.sent_datagrams);
    u.received_datagrams = add(|p| p.received_datagrams);
    u.lost_datagrams = add(|p| p.lost_datagrams);
    u.jitter_pairs = add(|p| p.jitter_pairs);
    u.untimed_datagrams = add(|p| p.untimed_datagrams);
    u.out_of_order = add(|p| p.out_of_order);
    u.duplicates = add(|p| p.duplicates);
    u.stray = add(|p| p.stray);
    u.window_sent_datagrams = parts.iter().map(|p| p.window_sent_datagrams).sum();
    let expected = u.lost_datagrams.saturating_add(u.received_datagrams);
    u.loss_pct = if expected > 0 {
        u.lost_datagrams as f64 / expected as f64 * 100.0
    } else {
        0.0
    };
    if parts.len() > 1 {
        u.jitter_us = None;
        u.jitter_withheld =
            Some("the clients' jitter is each over its own flows (each client's part has it)".into());
        withheld.push("jitter of the clients together: each client's is over its own flows".into());
    }
    Some(u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::TargetClients;

    fn fixture(name: &str) -> TestResult {
        let path = format!(
            "{}/../netrig-report/tests/fixtures/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn place(h: &str) -> LabPlace {
        LabPlace {
            client: h.into(),
            client_ns: format!("nr000000-{h}"),
            server: "s1".into(),
            path: "link".into(),
            address: "198.19.254.6:6387".into(),
            segment: Some("sw".into()),
            clients: Vec::new(),
            shape: Default::default(),
        }
    }

    /// Issue #38: five clients' streams add up, each one's part kept, the skew and the common
    /// window from each result's own start time, a large skew warned of.
    #[test]
    fn streams_from_several_hosts_add_up_with_their_skew() {
        let base = fixture("tcp-stream");
        let parts: Vec<(LabPlace, TestResult)> = (0..5)
            .map(|k| {
                let mut r = base.clone();
                r.started_unix_s = Some(1000.0 + k as f64 * 0.001);
                r.summary.throughput_bps = 100e6 + k as f64 * 10e6;
                r.summary.bytes = 1000 * (k + 1);
                (place(&format!("c{}", k + 1)), r)
            })
            .collect();
        let (sum, run) = sum(parts, 1000.0).unwrap();
        assert!(
            (sum.summary.throughput_bps - 600e6).abs() < 1.0,
            "{}",
            sum.summary.throughput_bps
        );
        assert_eq!(sum.summary.bytes, 15000);
        assert_eq!(run.clients.len(), 5);
        assert_eq!(run.clients[2].host, "c3");
        assert!((run.clients[2].throughput_bps - 120e6).abs() < 1.0);
        assert!((run.start_skew_s.unwrap() - 0.004).abs() < 1e-9);
        assert!((run.clients[4].start_offset_s.unwrap() - 0.004).abs() < 1e-9);
        let o = run.overlap.unwrap();
        let w = base.summary.elapsed_s;
        assert!((o.length_s - (w - 0.004)).abs() < 1e-9, "{o:?}");
        assert_eq!(sum.started_unix_s, Some(1000.0));
        assert_eq!(sum.flows.len(), 5 * base.flows.len());
        assert_eq!(
            sum.summary.directions[0].flows,
            5 * base.summary.directions[0].flows
        );
        assert!(
            sum.warnings.iter().all(|w| !w.contains("apart")),
            "{:?}",
            sum.warnings
        );
        assert!(!sum.witness.withheld.is_empty());
        // A skew of 10% of the window is a warning naming it.
        let parts = vec![
            (
                place("c1"),
                TestResult {
                    started_unix_s: Some(0.0),
                    ..base.clone()
                },
            ),
            (
                place("c2"),
                TestResult {
                    started_unix_s: Some(w * 0.1),
                    ..base.clone()
                },
            ),
        ];
        let (sum, _) = super::sum(parts, 0.0).unwrap();
        assert!(
            sum.warnings
                .iter()
                .any(|w| w.contains("apart") && w.contains("10%")),
            "{:?}",
            sum.warnings
        );
    }

    /// Each client's profile is the whole machine's over its own window: the sum has none, and
    /// says why (issue #42).
    #[test]
    fn the_sum_of_several_clients_withholds_the_profile() {
        let mut base = fixture("tcp-stream");
        base.profile = Some(netrig_document::fixtures::profile(
            &[("tcp", 10)],
            &[("tcp_sendmsg", 10)],
            1.0,
        ));
        let (sum, _) = sum(vec![(place("c1"), base.clone()), (place("c2"), base)], 0.0).unwrap();
        let p = sum.profile.unwrap();
        for end in [&p.local, &p.remote] {
            assert!(
                end.withheld().unwrap().contains("2 client hosts at once"),
                "{end:?}"
            );
        }
    }

    /// Latency percentiles are never added: the histograms are merged, or the combined figure is
    /// withheld with the reason; transactions/s add.
    #[test]
    fn latency_is_merged_from_histograms_or_withheld() {
        let base = fixture("tcp-rr");
        let l = base.summary.latency_us.clone().unwrap();
        let parts = vec![(place("c1"), base.clone()), (place("c2"), base.clone())];
        let (sum, run) = sum(parts, 0.0).unwrap();
        let m = sum.summary.latency_us.unwrap();
        assert_eq!(m.count, 2 * l.count);
        assert!(
            (m.p50 - l.p50).abs() <= l.p50 * 0.01 + 1.0,
            "{} vs {}",
            m.p50,
            l.p50
        );
        let tps = base.summary.transactions_per_s.unwrap();
        assert!((sum.summary.transactions_per_s.unwrap() - 2.0 * tps).abs() < 1e-6);
        assert!(run.withheld.iter().all(|w| !w.starts_with("latency")));
        let mut bare = base.clone();
        bare.summary.latency_us.as_mut().unwrap().histogram = None;
        let (sum, run) = super::sum(vec![(place("c1"), base), (place("c2"), bare)], 0.0).unwrap();
        assert!(sum.summary.latency_us.is_none());
        assert!(
            run.withheld.iter().any(|w| w.starts_with("latency")),
            "{:?}",
            run.withheld
        );
    }

    /// Issue #38: `clients` is a number (processes on this host) or, with a lab, a list of lab
    /// hosts, in the target or an arm; what a list may not be is refused by name.
    #[test]
    fn a_list_of_client_hosts_reads_in_the_target_and_an_arm() {
        let lab =
            "[lab.hosts.c1]\n[lab.hosts.c2]\n[lab.hosts.c3]\n[lab.hosts.s1]\n[[lab.lans]]\nname = 'sw'\n\
                   hosts = ['c1', 'c2', 'c3', 's1']\n";
        let p = Plan::from_toml(&format!(
            "name = 'x'\n[target]\nclients = ['c1', 'c2', 'c3']\nserver = 's1'\n[[test]]\nkind = 'tcp-stream'\n\
             [[arm]]\nname = 'three'\n[[arm]]\nname = 'one'\nclients = ['c1']\n[[arm]]\nname = 'two'\n\
             clients = ['c1', 'c2']\n[[arm]]\nname = 'c2'\nclient = 'c2'\n[[arm]]\nname = 'lo'\npath = 'loopback'\n{lab}"
        ))
        .unwrap();
        let hosts: Vec<Vec<String>> = p.arms().iter().map(|a| client_hosts(&p, a)).collect();
        assert_eq!(hosts[0], ["c1", "c2", "c3"]);
        assert_eq!(hosts[1], ["c1"]);
        assert_eq!(hosts[2], ["c1", "c2"]);
        assert!(hosts[3].is_empty() && hosts[4].is_empty(), "{hosts:?}");
        assert_eq!(p.lab_route(&p.arms()[0]).unwrap().unwrap().client, "c1");
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
        // A number still means processes on this host (kinds with one end), without a lab.
        let n = Plan::from_toml("name = 'x'\n[target]\nclients = 2\n[[test]]\nkind = 'http'\n").unwrap();
        assert_eq!(n.target.unwrap().clients, Some(TargetClients::Count(2)));
        for (text, needle) in [
            (
                "[target]\nclients = ['c1', 'c9']\nserver = 's1'\n",
                "\"c9\" is not a host",
            ),
            (
                "[target]\nclients = ['c1', 's1']\nserver = 's1'\n",
                "is the server's host",
            ),
            (
                "[target]\nclients = ['c1', 'c1']\nserver = 's1'\n",
                "listed twice",
            ),
            ("[target]\nclients = []\nserver = 's1'\n", "names no client host"),
            (
                "[target]\nclient = 'c1'\nclients = ['c2']\nserver = 's1'\n",
                "give one of them",
            ),
            ("[target]\nclients = 3\nserver = 's1'\n", "a number of clients"),
        ] {
            let e = Plan::from_toml(&format!("name = 'x'\n{text}[[test]]\nkind = 'tcp-stream'\n{lab}"))
                .unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = Plan::from_toml(&format!(
            "name = 'x'\n[target]\nserver = 's1'\n[[test]]\nkind = 'tcp-rr'\n[[arm]]\nname = 'a'\nclients = ['c1', 'c2']\n\
             path = 'loopback'\n{lab}"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("path \"loopback\""), "{e}");
        let e = Plan::from_toml("name = 'x'\n[target]\nclients = ['c1']\n[[test]]\nkind = 'tcp-rr'\n")
            .unwrap_err();
        assert!(e.to_string().contains("no [lab]"), "{e}");
    }

    /// Issue #38: plans/gigabit.toml runs in a lab and changes nothing outside it: every arm's
    /// command runs inside a lab host, none touches the host-wide net.core limits, and one arm
    /// runs from five client hosts at once.
    #[test]
    fn the_gigabit_plan_changes_nothing_outside_its_lab() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans/gigabit.toml");
        let p = Plan::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert!(p.lab.is_some(), "a lab plan");
        for a in p.arms() {
            let cmds: Vec<&String> = a.setup.iter().chain(&a.teardown).collect();
            assert!(
                cmds.is_empty() || a.in_host.is_some(),
                "arm {}: a command on this host",
                a.name
            );
            assert!(
                cmds.iter().all(|c| !c.contains("net.core.")),
                "arm {}: {cmds:?}",
                a.name
            );
        }
        let five = p
            .arms()
            .into_iter()
            .find(|a| a.name == "clients-5")
            .expect("a clients-5 arm");
        assert_eq!(client_hosts(&p, &five).len(), 5);
    }

    /// A client's result without a start time: the skew is withheld, not made up.
    #[test]
    fn no_start_time_no_skew() {
        let base = fixture("udp-stream");
        let mut old = base.clone();
        old.started_unix_s = None;
        let with = TestResult {
            started_unix_s: Some(5.0),
            ..base.clone()
        };
        let (sum, run) = sum(vec![(place("c1"), with), (place("c2"), old)], 5.0).unwrap();
        assert!(run.start_skew_s.is_none() && run.overlap.is_none());
        assert!(run.withheld.iter().any(|w| w.contains("start skew")));
        let u = sum.summary.udp.unwrap();
        let b = base.summary.udp.unwrap();
        assert_eq!(u.received_datagrams, 2 * b.received_datagrams);
        assert!(u.jitter_us.is_none());
    }
}
