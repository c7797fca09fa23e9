//! What the client does with an agent's `interval` and `results` messages:
//! each interval sample is merged with the client's own for the same index
//! (`merge_interval`) and printed as table rows; the results report is
//! merged with the client's (`assemble`, with the agent's intervals) and
//! printed as the table and the JSON document. The client's side is a
//! plausible one for the test; the agent's comes from the input.
//!
//! The input: a kind (1 byte: index in `KindSpec::NAMES`), a flow count
//! (1 byte: 1 to 4), then agent messages as JSON values one after another
//! (what the frames carry); the first `results` ends the test.
//!
//! Invariants: no panic; a merged interval holds only the test's flows,
//! each once, in order; a merged result has exactly the test's flows, in
//! order, with their directions; both print as table rows and as JSON
//! that reads back. A profile in the agent's report is admitted as the
//! client admits it (`bounds::admit`): what it admits keeps every bound.

use netrig_proto::report::profile::{
    bounds, EndProfile, FoldedStack, KernelCount, ProfileFunction, ProfileGroup, ProfileResult, ProfileSplit,
    ProfileWitness, Profiled, SampleCount, SoftirqCounts, SoftirqCpuCount,
};
use netrig_proto::report::{FlowReport, IntervalSample, SideReport, SockBufReport};
use netrig_proto::spec::KindSpec;
use netrig_proto::{AgentMsg, Direction, TestSpec};
use netrig_report::NewConfig;
use netrig_report::{
    assemble, merge_interval, AgentInfo, KindReport, RunInfo, Side, SocketOptions, TableLayout, TestConfig,
};

/// A kind that adds nothing of its own to the merge, printed with the
/// table layout of `layout`.
struct Plain(&'static dyn TableLayout);

impl KindReport for Plain {
    fn config(&self, _: &TestSpec, _: &mut TestConfig) {}
    fn table(&self) -> &'static dyn TableLayout {
        self.0
    }
}

/// Runs one input through the target, panicking when an invariant fails.
pub fn run(data: &[u8]) {
    outcome(data);
}

/// What the client made of the input's messages (to check what the seeds
/// reach).
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// Intervals merged into a printed row.
    pub intervals: usize,
    /// The merged result's flow count, or why there is none; `None` without
    /// results.
    pub result: Option<Result<usize, String>>,
    /// The agent's profile as the client admitted it: `Ok(())`, or why it is
    /// withheld; `None` when the report carried none.
    pub remote_profile: Option<Result<(), String>>,
}

/// [`run`], and what came of it.
pub fn outcome(data: &[u8]) -> Outcome {
    let mut out = Outcome::default();
    let [kind, flows, rest @ ..] = data else {
        return out;
    };
    let spec = test_spec(*kind, *flows);
    // The kinds with one end read as tcp-crr here: their own tables read
    // their own summaries, which an agent's messages never make.
    let layout: &'static dyn TableLayout = match spec.test {
        KindSpec::Http(_) | KindSpec::SynFlood(_) | KindSpec::HalfClose(_) => {
            netrig_kinds::by_name("tcp-crr")
        }
        _ => Some(netrig_kinds::of(&spec)),
    }
    .expect("tcp-crr is a kind")
    .table();
    let kind = Plain(layout);
    let plan = spec.flow_plan();
    let transactional = spec.rules().exchange().is_transactional();
    let local = local_report(&spec, &plan);
    let local_intervals: Vec<IntervalSample> = (0..3).map(|i| local_sample(i, &plan)).collect();

    let mut remote_intervals = Vec::new();
    for msg in serde_json::Deserializer::from_slice(rest).into_iter::<AgentMsg>() {
        let Ok(msg) = msg else { return out };
        match msg {
            AgentMsg::Interval { sample } => {
                let mine = local_intervals.iter().find(|s| s.index == sample.index);
                if let Some(m) = merge_interval(&plan, transactional, sample.index, mine, Some(&sample)) {
                    let ids: Vec<u32> = m.flows.iter().map(|f| f.id).collect();
                    assert!(
                        ids.windows(2).all(|w| w[0] < w[1]),
                        "flows repeated or out of order: {ids:?}"
                    );
                    assert!(ids.iter().all(|id| (*id as usize) < plan.len()), "{ids:?}");
                    for f in &m.flows {
                        assert_eq!(f.direction, plan[f.id as usize]);
                    }
                    let _ = layout.interval_header();
                    let _ = layout.interval_rows(&m, true);
                    reads_back(&netrig_report::to_json(&m));
                    out.intervals += 1;
                }
                remote_intervals.push(*sample);
            }
            AgentMsg::Results { report } => {
                let mut merged = assemble(
                    &spec,
                    &kind,
                    config(&spec, &kind),
                    AgentInfo {
                        address: "192.0.2.1:6387".into(),
                        software: "x".into(),
                        protocol_version: netrig_proto::PROTOCOL_VERSION,
                    },
                    Side {
                        report: &local,
                        intervals: &local_intervals,
                    },
                    Side {
                        report: &report,
                        intervals: &remote_intervals,
                    },
                    Vec::new(),
                );
                if let Ok(r) = &mut merged {
                    if let Some(remote) = report.profile.clone() {
                        out.remote_profile = Some(admitted(r, remote));
                    }
                    let ids: Vec<(u32, Direction)> = r.flows.iter().map(|f| (f.id, f.direction)).collect();
                    let want: Vec<(u32, Direction)> =
                        plan.iter().enumerate().map(|(i, d)| (i as u32, *d)).collect();
                    assert_eq!(ids, want, "the result's flows are not the test's");
                    let _ = layout.render(r);
                    reads_back(&netrig_report::to_json(r));
                }
                out.result = Some(merged.map(|r| r.flows.len()));
                return out;
            }
            _ => {}
        }
    }
    out
}

/// An agent's profile, as the client admits it into its result (netrig-client's
/// `profile::both_ends`): what it admits keeps every bound the client checks, and prints.
fn admitted(r: &mut netrig_report::TestResult, remote: EndProfile) -> Result<(), String> {
    let remote = bounds::admit(Some(remote));
    assert_eq!(
        bounds::check(&remote),
        Ok(()),
        "an admitted profile breaks a bound"
    );
    let said = remote.withheld().map_or(Ok(()), |w| Err(w.to_string()));
    r.profile = Some(ProfileResult {
        local: EndProfile::Withheld {
            withheld: "profile withheld: not this target's".into(),
        },
        remote,
    });
    said
}

/// The test of an input that starts with `kind` and `flows`: 1 to 4 flows
/// for 3 s, a sample a second.
fn test_spec(kind: u8, flows: u8) -> TestSpec {
    TestSpec {
        interval_s: Some(1.0),
        ..crate::session::spec_at_defaults(kind, u32::from(flows % 4) + 1, 3.0)
    }
}

/// The JSON the client prints is JSON.
fn reads_back(text: &str) {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
        panic!("printed JSON does not read back ({e}): {text}");
    }
}

fn config(spec: &TestSpec, kind: &dyn KindReport) -> TestConfig {
    TestConfig::new(
        spec,
        kind,
        RunInfo {
            host: Some("192.0.2.1".into()),
            port: 6387,
            cpus: None,
            bind: None,
            family: None,
            local: SocketOptions::default(),
            remote: SocketOptions::default(),
        },
    )
}

/// The client's report: a second of 1 MB (or 1000 transactions) per flow.
fn local_report(spec: &TestSpec, plan: &[Direction]) -> SideReport {
    SideReport {
        // One clock, so that the agent's one-way delays (udp-stream) are read.
        one_way: Some(netrig_proto::clock::OneWayReport {
            zero_ns: 1_800_000_000_000_000_000,
            ref_ns: 1_800_000_000_000_000_000,
            received: None,
            clocks: netrig_proto::clock::ClockCheck::Shared("one kernel".into()),
        }),
        ..side_report(spec, plan, false)
    }
}

/// One end's report: a second of 1 MB (or 1000 transactions) per flow.
fn side_report(spec: &TestSpec, plan: &[Direction], agent: bool) -> SideReport {
    SideReport {
        flows: plan
            .iter()
            .enumerate()
            .map(|(id, d)| FlowReport {
                id: id as u32,
                direction: *d,
                role: spec.role(*d, agent),
                window_bytes: 1_000_000,
                total_bytes: 1_000_000,
                window_s: 1.0,
                socket_buffers: SockBufReport::default(),
                applied: Default::default(),
                tcp_info: None,
                window_transactions: 1000,
                udp: None,
                counts: Default::default(),
                zerocopy: None,
                reads: None,
                sends: None,
            })
            .collect(),
        window_s: 1.0,
        ..SideReport::default()
    }
}

/// The client's sample for interval `index`.
fn local_sample(index: u32, plan: &[Direction]) -> IntervalSample {
    let n = plan.len();
    IntervalSample {
        index,
        start_s: f64::from(index),
        end_s: f64::from(index + 1),
        ids: (0..n as u32).collect(),
        bytes: vec![1_000_000; n],
        transactions: vec![1000; n],
        ..IntervalSample::default()
    }
}

/// The committed seeds (fuzz/seeds/agent_report/), by name: for each kind,
/// two intervals and the results of an agent that ran the test, then
/// reports that lack a flow, name flows the test does not have, or hold
/// extreme numbers, and reports with a profile (`--profile`): one within
/// the bounds, one past one, one withheld.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let json = |m: &AgentMsg| serde_json::to_vec(m).expect("a message serializes");
    let test = |kind: u8, flows: u8| {
        let spec = test_spec(kind, flows);
        let plan = spec.flow_plan();
        (side_report(&spec, &plan, true), plan)
    };
    let input = |kind: u8, flows: u8, msgs: &[AgentMsg]| {
        let mut b = vec![kind, flows];
        for m in msgs {
            b.extend_from_slice(&json(m));
        }
        b
    };
    let interval = |s: IntervalSample| AgentMsg::Interval { sample: Box::new(s) };
    let results = |r: SideReport| AgentMsg::Results { report: Box::new(r) };
    let mut v = Vec::new();
    for (i, name) in KindSpec::NAMES.iter().enumerate() {
        // http, syn-flood and half-close run from the client alone: no agent session has them.
        if ["http", "syn-flood", "half-close"].contains(name) {
            continue;
        }
        let (report, plan) = test(i as u8, 1);
        let msgs = [
            interval(local_sample(0, &plan)),
            interval(local_sample(1, &plan)),
            results(report),
        ];
        v.push((format!("whole-{name}"), input(i as u8, 1, &msgs)));
    }
    let (report, plan) = test(0, 3);
    let mut lacking = report.clone();
    lacking.flows.pop();
    v.push(("results-lacking-a-flow".into(), input(0, 3, &[results(lacking)])));
    let mut foreign = report.clone();
    foreign.flows[0].id = 99;
    let mut odd = local_sample(0, &plan);
    odd.ids = vec![99, 0, 0, 3];
    odd.bytes = vec![u64::MAX];
    odd.end_s = odd.start_s;
    v.push((
        "foreign-flows".into(),
        input(0, 3, &[interval(odd), results(foreign)]),
    ));
    let mut extreme = report;
    for f in &mut extreme.flows {
        f.window_bytes = u64::MAX;
        f.total_bytes = u64::MAX;
        f.window_s = 1e-300;
    }
    extreme.window_s = 0.0;
    v.push(("extreme-numbers".into(), input(0, 3, &[results(extreme)])));
    let (report, _) = test(0, 1);
    let with_profile = |p: EndProfile| {
        results(SideReport {
            profile: Some(p),
            ..report.clone()
        })
    };
    let profiled = remote_profile();
    v.push((
        "results-with-a-profile".into(),
        input(
            0,
            1,
            &[with_profile(EndProfile::Profiled(Box::new(profiled.clone())))],
        ),
    ));
    let mut past = profiled;
    past.busy_samples = past.samples + 1;
    v.push((
        "profile-past-a-bound".into(),
        input(0, 1, &[with_profile(EndProfile::Profiled(Box::new(past)))]),
    ));
    v.push((
        "profile-withheld".into(),
        input(
            0,
            1,
            &[with_profile(EndProfile::Withheld {
                withheld: "profile withheld: the agent's operator did not allow profiles (netrig serve --allow-profile)"
                    .into(),
            })],
        ),
    ));
    v
}

/// An agent's profile of a tcp-stream receiver, as the wire carries it: its groups, top
/// functions and folded stacks within the bounds.
fn remote_profile() -> Profiled {
    let count = |samples: u64| SampleCount {
        samples,
        cpu_ms: samples as f64 * 1.001,
    };
    let group = |name: &str, samples: u64| ProfileGroup {
        group: name.into(),
        samples,
        cpu_ms: samples as f64 * 1.001,
        share_of_busy_pct: (name != "idle").then(|| samples as f64 * 100.0 / 1800.0),
        demand: (name != "idle").then(|| samples as f64 * 1.001e3 / 1e6),
    };
    let function = |name: &str, self_samples: u64, inclusive_samples: u64| ProfileFunction {
        name: name.into(),
        self_samples,
        inclusive_samples,
    };
    Profiled {
        window_s: 1.0,
        cpus: 2,
        frequency_hz: 999,
        samples: 1998,
        busy_samples: 1800,
        lost_samples: 0,
        dropped_samples: 0,
        split: ProfileSplit {
            this_test_process: count(900),
            this_test_softirq: count(500),
            rest_process: count(398),
            rest_softirq: count(200),
        },
        demand_unit: "us/KB".into(),
        groups: vec![
            group("memory-copy", 700),
            group("tcp", 600),
            group("socket", 300),
            group("other", 200),
            group("idle", 198),
        ],
        top_functions: vec![
            function("do_syscall_64", 0, 1500),
            function("tcp_recvmsg", 20, 900),
            function("_copy_to_iter", 700, 700),
        ],
        folded: vec![FoldedStack {
            stack: "netrig-worker;entry_SYSCALL_64;do_syscall_64;__sys_recvfrom;tcp_recvmsg;_copy_to_iter"
                .into(),
            samples: 700,
        }],
        folded_total: 420,
        witness: Some(ProfileWitness {
            sampled_busy_ms: 1801.8,
            stat_busy_ms: 1790.0,
            ratio: Some(1.0066),
            stat_steal_ms: 0.0,
            resolution_pct: Some(3.1),
            band_pct: Some(5.0),
            verdict: Some("agrees".into()),
            why: None,
        }),
        throttles: 0,
        softirqs: KernelCount::Counted(SoftirqCounts {
            net_rx: 5000,
            net_tx: 3,
            per_cpu: vec![
                SoftirqCpuCount {
                    cpu: 0,
                    net_rx: 2500,
                    net_tx: 1,
                },
                SoftirqCpuCount {
                    cpu: 1,
                    net_rx: 2500,
                    net_tx: 2,
                },
            ],
        }),
        softnet: KernelCount::Withheld {
            withheld: "reading /proc/net/softnet_stat: No such file or directory".into(),
        },
    }
}
