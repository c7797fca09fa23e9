//! Runs a schedule of agent-to-agent tests (`netrig mesh`): for each round, a control session
//! with every client agent of the round (this process's key), each agent's clock offset
//! measured over it (the clock probe), one agreed start a little ahead, moved to each agent's
//! clock, and each agent asked to `initiate` its test against its server agent; the results
//! come back whole and fill the matrix, each test's start measured against the agreed instant
//! on this host's clock.

use crate::matrix::{MeshCell, MeshDocument, MeshHost, MeshRound, Pattern};
use crate::schedule::Pair;
use netrig_client::{Client, ClientOptions, Family};
use netrig_document::result::TestResult;
use netrig_proto::auth::ClientAuth;
use netrig_proto::initiate::{ClientEnd, InitiateRequest, RESULT_MARGIN_S};
use netrig_proto::TestSpec;
use serde::Deserialize;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a mesh runs.
pub struct Mesh {
    pub hosts: Vec<MeshHost>,
    pub pattern: Pattern,
    pub concurrency: Option<usize>,
    pub rounds: Vec<Vec<Pair>>,
    pub spec: TestSpec,
    /// The test's options as given (after its kind), for the document.
    pub args: Vec<String>,
    /// The client's own end, sent with each test to the agent that runs it.
    pub client: ClientEnd,
    /// This process's key (`--key`) and the agents' key to expect (`--agent-key`).
    pub auth: ClientAuth,
    /// How long to wait for an agent to accept the control connection.
    pub connect_timeout: Duration,
}

/// How far ahead of now a round's start is agreed: time for each client agent to check its
/// server agent (a handshake) and set its test up (connections, workers); a test set up later
/// starts at once, and its start offset shows it.
pub fn start_lead(tests: usize) -> Duration {
    (Duration::from_millis(1000) + Duration::from_millis(100) * tests as u32).min(Duration::from_secs(5))
}

fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128)
}

/// A test's outcome: the result (or why none), the client agent's clock offset and its bound
/// (ns), or why it was not measured.
type Outcome = (
    Result<serde_json::Value, String>,
    Option<(i64, u64)>,
    Option<String>,
);

/// A round's client session, ready to initiate: the client, its clock offset (ns, and the bound).
struct Ready {
    client: Client,
    offset: Option<(i64, u64)>,
    offset_error: Option<String>,
}

fn host_and_port(address: &str) -> Result<(String, u16), String> {
    let (h, p) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{address}: not host:port"))?;
    let port = p
        .parse::<u16>()
        .map_err(|e| format!("{address}: port {p:?}: {e}"))?;
    Ok((h.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

fn options(mesh: &Mesh, host: &MeshHost, port: u16) -> ClientOptions {
    ClientOptions {
        host: Some(host.name.clone()),
        port,
        family: Family::Any,
        bind: None,
        local: Default::default(),
        connect_timeout: mesh.connect_timeout,
        cpus: None,
        udp_size_default: false,
        auth: mesh.auth.clone(),
        start_at: None,
        peer: netrig_document::result::peer::Peer::Netrig,
        server_output: false,
        profile: false,
    }
}

fn connect(mesh: &Mesh, host: &MeshHost) -> Result<Ready, String> {
    let (name, port) = host_and_port(&host.address)?;
    let addrs = netrig_client::resolve(&name, port, Family::Any).map_err(|e| e.to_string())?;
    let mut client = Client::connect(&addrs, options(mesh, host, port)).map_err(|e| e.to_string())?;
    let (offset, offset_error) = match client.clock_offset().map_err(|e| e.to_string())? {
        Ok(o) => (Some((o.offset_ns, o.bound_ns)), None),
        Err(why) => (None, Some(why)),
    };
    Ok(Ready {
        client,
        offset,
        offset_error,
    })
}

/// The longest a test's result may take to come back: its length, the lead, set-up and a margin.
fn result_wait(spec: &TestSpec, lead: Duration) -> Duration {
    let length = match spec.limit {
        netrig_proto::spec::Limit::Duration { seconds } => seconds,
        netrig_proto::spec::Limit::Bytes { .. } => 3600.0,
    };
    Duration::from_secs_f64(length) + lead + Duration::from_secs(2 * 30 + RESULT_MARGIN_S)
}

/// A result an agent sent back (`initiate_done`), read as a netrig result.
pub fn read_result(value: &serde_json::Value) -> Result<TestResult, String> {
    TestResult::deserialize(value).map_err(|e| format!("its result does not read as a netrig result: {e}"))
}

/// One test's figures from its result.
pub fn fill(cell: &mut MeshCell, result: &TestResult) {
    let s = &result.summary;
    cell.throughput_bps = Some(s.throughput_bps);
    cell.transactions_per_s = s.transactions_per_s;
    if let Some(l) = &s.latency_us {
        cell.latency_p50_us = Some(l.p50);
        cell.latency_p99_us = Some(l.p99);
    }
    let retrans: Vec<u64> = result.intervals.iter().filter_map(|i| i.retransmits).collect();
    // Saturating: the figures are an agent's, whatever it sent.
    cell.retransmits = (!retrans.is_empty()).then(|| retrans.iter().fold(0u64, |a, &r| a.saturating_add(r)));
    cell.warnings = result.warnings.clone();
}

/// Runs every round in turn; `cancel` stops between rounds (and aborts the tests of the
/// round under way); `progress` hears each round's start and each test's end.
pub fn run(mesh: &Mesh, cancel: &(dyn Fn() -> bool + Sync), progress: &mut dyn FnMut(&str)) -> MeshDocument {
    let began = Instant::now();
    let mut doc = MeshDocument {
        netrig_version: netrig_proto::SOFTWARE_VERSION.into(),
        test: mesh.spec.kind().to_string(),
        args: mesh.args.clone(),
        pattern: mesh.pattern,
        concurrency: mesh.concurrency,
        length_s: match mesh.spec.limit {
            netrig_proto::spec::Limit::Duration { seconds } => seconds,
            netrig_proto::spec::Limit::Bytes { .. } => 0.0,
        },
        hosts: mesh.hosts.clone(),
        rounds: Vec::new(),
        cells: Vec::new(),
        wall_s: 0.0,
        warnings: Vec::new(),
    };
    roll_call(mesh, &mut doc);
    for (index, pairs) in mesh.rounds.iter().enumerate() {
        if cancel() {
            doc.warnings.push(format!(
                "interrupted before round {} of {}",
                index + 1,
                mesh.rounds.len()
            ));
            break;
        }
        progress(&format!(
            "round {} of {}: {}",
            index + 1,
            mesh.rounds.len(),
            pairs
                .iter()
                .map(|p| format!("{} → {}", mesh.hosts[p.client].name, mesh.hosts[p.server].name))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let round = run_round(mesh, index, pairs, cancel, &mut doc);
        for &c in &round.cells {
            let cell = &doc.cells[c];
            let what = match (&cell.error, cell.throughput_bps) {
                (Some(e), _) => format!("failed: {e}"),
                (None, Some(t)) => format!("{:.3} Gbit/s", t / 1e9),
                (None, None) => "no figure".into(),
            };
            progress(&format!(
                "  {} → {}: {what}",
                mesh.hosts[cell.client].name, mesh.hosts[cell.server].name
            ));
        }
        doc.rounds.push(round);
    }
    doc.wall_s = began.elapsed().as_secs_f64();
    doc
}

/// Every host once, at once, before the first round: its name for itself (`netrig serve
/// --name`) for the matrix's labels, and a warning for each that does not answer as an agent
/// this client may use (its tests then fail with the reason, in their round).
fn roll_call(mesh: &Mesh, doc: &mut MeshDocument) {
    let answers: Vec<Result<Option<String>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = mesh
            .hosts
            .iter()
            .map(|h| {
                s.spawn(move || {
                    let (name, port) = host_and_port(&h.address)?;
                    let addrs =
                        netrig_client::resolve(&name, port, Family::Any).map_err(|e| e.to_string())?;
                    let client =
                        Client::connect(&addrs, options(mesh, h, port)).map_err(|e| e.to_string())?;
                    let label = client.agent_label().map(str::to_string);
                    client.close();
                    Ok(label)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("the thread panicked".into())))
            .collect()
    });
    for (h, a) in doc.hosts.iter_mut().zip(answers) {
        match a {
            Ok(label) => h.label = label,
            Err(e) => doc.warnings.push(format!("{}: {e}", h.name)),
        }
    }
}

fn run_round(
    mesh: &Mesh,
    index: usize,
    pairs: &[Pair],
    cancel: &(dyn Fn() -> bool + Sync),
    doc: &mut MeshDocument,
) -> MeshRound {
    // Every client's session and clock, at once.
    let ready: Vec<Result<Ready, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = pairs
            .iter()
            .map(|p| s.spawn(|| connect(mesh, &mesh.hosts[p.client])))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the connecting thread panicked".into()))
            })
            .collect()
    });
    let lead = start_lead(pairs.len());
    let start = SystemTime::now() + lead;
    let start_ns = unix_ns(start);
    let wait = result_wait(&mesh.spec, lead);
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = pairs
            .iter()
            .zip(ready)
            .map(|(p, r)| {
                s.spawn(move || {
                    let mut r = r?;
                    // The agreed instant on the agent's clock: ours plus its offset.
                    let at = r.offset.map_or(start_ns, |(o, _)| start_ns + o as i128);
                    let request = InitiateRequest {
                        target: mesh.hosts[p.server].address.clone(),
                        spec: mesh.spec.clone(),
                        start_at_ns: Some(at.max(0) as u64),
                        client: mesh.client.clone(),
                    };
                    let got = r
                        .client
                        .initiate(&request, wait, &|| cancel())
                        .map_err(|e| e.to_string());
                    r.client.close();
                    Ok::<_, String>((got, r.offset, r.offset_error))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => (Err(e), None, None),
                Err(_) => (Err("the test's thread panicked".into()), None, None),
            })
            .collect()
    });
    let mut cells = Vec::new();
    let mut starts = Vec::new();
    for (p, (got, offset, offset_error)) in pairs.iter().zip(outcomes) {
        let mut cell = MeshCell {
            clock_offset_ms: offset.map(|(o, _)| o as f64 / 1e6),
            clock_bound_ms: offset.map(|(_, b)| b as f64 / 1e6),
            ..MeshCell::new(p.client, p.server, index)
        };
        match got.and_then(|v| read_result(&v).map(|r| (v, r))) {
            Ok((value, result)) => {
                fill(&mut cell, &result);
                if let Some(why) = &offset_error {
                    cell.warnings.push(format!(
                        "start offset withheld: the agent's clock was not measured: {why}"
                    ));
                }
                if let (Some(started), Some((o, _))) =
                    (result.started_unix_s.filter(|s| s.is_finite()), offset)
                {
                    // Its start on our clock: its own reading less its offset.
                    let ours = started * 1e9 - o as f64;
                    let off_ms = (ours - start_ns as f64) / 1e6;
                    cell.start_offset_ms = Some(off_ms);
                    starts.push(ours);
                }
                cell.result = Some(value);
            }
            Err(e) => cell.error = Some(e),
        }
        cells.push(doc.cells.len());
        doc.cells.push(cell);
    }
    let skew_ms = (starts.len() >= 2).then(|| {
        let lo = starts.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = starts.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (hi - lo) / 1e6
    });
    MeshRound {
        index,
        start_unix_s: Some(start_ns as f64 / 1e9),
        cells,
        skew_ms,
    }
}
