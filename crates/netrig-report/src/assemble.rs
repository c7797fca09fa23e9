//! Merging the two ends' reports into one result.

use crate::checks::{cpu_resolution, CpuResolution};
use crate::kind::{KindReport, Side};
use crate::model::measure::{CpuUsage, Environment, TcpInfo};
use crate::model::*;
use crate::witness::WitnessResult;
use netrig_proto::report::measure::SeqInterval;
use netrig_proto::report::{BufPair, FlowReport, IntervalSample, KindCounts, SideReport, SockBufReport};
use netrig_proto::spec::Limit;
use netrig_proto::{Direction, TestSpec};
use std::collections::{BTreeMap, HashMap};

/// Merges the client's (`local`) and the agent's (`remote`) measurements.
/// Fails when either end's report lacks a flow of the test.
pub fn assemble(
    spec: &TestSpec,
    kind: &dyn KindReport,
    config: TestConfig,
    agent: AgentInfo,
    local: Side<'_>,
    remote: Side<'_>,
    mut warnings: Vec<String>,
) -> Result<TestResult, String> {
    let m = Merge::new(spec, local, remote);
    warnings.extend(local.report.warnings.iter().cloned());
    warnings.extend(remote.report.warnings.iter().cloned());
    let flows = m.flows(&mut warnings)?;
    let cpu = [EndCpu::of(local.report), EndCpu::of(remote.report)];
    let summary = m.summary(&flows, &cpu);
    let v6 = agent
        .address
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.is_ipv6());
    let (witness, witness_warnings) = crate::witness::judge(
        spec,
        local.report.witness.as_ref(),
        remote.report.witness.as_ref(),
        v6,
        max_segment(&flows, v6),
    );
    // What local's warnings already said of the same machine (its CPU) or the
    // same host counters (one network namespace) is not said again for remote.
    let same_machine =
        crate::witness::same_machine(local.report.witness.as_ref(), remote.report.witness.as_ref());
    m.side_warnings(
        kind.batches_datagrams(spec),
        &witness,
        same_machine,
        &mut warnings,
    );
    warnings.extend(witness_warnings);
    resolution_warnings(&cpu, same_machine, &mut warnings);
    warnings.extend(schedule_warning(local.report));
    m.datagram_warnings(summary.udp.as_ref(), &mut warnings);
    warnings.extend(crate::checks::fairness_warnings(&summary));
    m.window_warnings(&mut warnings);
    let intervals = merge_intervals(&m.plan, m.transactional, local.intervals, remote.intervals);
    warnings.extend(late_latencies_warning(&intervals));
    let mut result = TestResult {
        netrig_version: netrig_proto::SOFTWARE_VERSION.to_string(),
        test: spec.kind().to_string(),
        config,
        agent,
        warnings,
        summary,
        flows,
        intervals,
        counters: PerEnd {
            local: local.report.counters.clone(),
            remote: remote.report.counters.clone(),
        },
        environment: PerEnd {
            local: local.report.environment.as_ref().map(Environment::from),
            remote: remote.report.environment.as_ref().map(Environment::from),
        },
        path_elements: Vec::new(),
        workers: PerEnd {
            local: local.report.workers.clone(),
            remote: remote.report.workers.clone(),
        },
        witness,
        server_host: None,
        started_unix_s: None,
        peer: None,
        profile: None,
    };
    let more = kind.warnings(spec, local, remote, &result);
    result.warnings.extend(more);
    Ok(result)
}

/// What the merge goes by: the test, both ends' measurements, and how the
/// test's flows count.
struct Merge<'s, 'a> {
    spec: &'s TestSpec,
    local: Side<'a>,
    remote: Side<'a>,
    /// Each flow's direction, by flow id.
    plan: Vec<Direction>,
    /// Request/response: the requester (the client) counts each flow, not
    /// the receiver of a stream.
    transactional: bool,
}

impl<'s, 'a> Merge<'s, 'a> {
    fn new(spec: &'s TestSpec, local: Side<'a>, remote: Side<'a>) -> Self {
        let exchange = spec.rules().exchange();
        Merge {
            spec,
            local,
            remote,
            plan: spec.flow_plan(),
            transactional: exchange.is_transactional(),
        }
    }

    /// Every flow of the plan, from both ends' reports of it. A byte-limited
    /// flow whose receiver got fewer bytes than were sent is warned of.
    fn flows(&self, warnings: &mut Vec<String>) -> Result<Vec<FlowResult>, String> {
        let index = |side: &'a SideReport| -> HashMap<u32, &'a FlowReport> {
            side.flows.iter().map(|f| (f.id, f)).collect()
        };
        let (lmap, rmap) = (index(self.local.report), index(self.remote.report));
        let mut flows = Vec::with_capacity(self.plan.len());
        for (id, dir) in self.plan.iter().enumerate() {
            let id = id as u32;
            let l = lmap
                .get(&id)
                .ok_or_else(|| format!("the client's report lacks flow {id}"))?;
            let r = rmap
                .get(&id)
                .ok_or_else(|| format!("the agent's report lacks flow {id}"))?;
            flows.push(self.flow(id, *dir, l, r, warnings));
        }
        Ok(flows)
    }

    /// Flow `id` from the client's (`l`) and the agent's (`r`) report of it.
    fn flow(
        &self,
        id: u32,
        dir: Direction,
        l: &FlowReport,
        r: &FlowReport,
        warnings: &mut Vec<String>,
    ) -> FlowResult {
        let transactional = self.transactional;
        // The end whose count is reported: the receiver of a stream, the
        // requester (the client) of a request/response flow.
        let (rx_end, tx_end) = match (transactional, dir) {
            (true, _) | (false, Direction::Rx) => (l, r),
            (false, Direction::Tx) => (r, l),
        };
        if matches!(self.spec.limit, Limit::Bytes { .. }) && rx_end.total_bytes != tx_end.total_bytes {
            warnings.push(format!(
                "flow {id}: the receiver got {} bytes of the {} sent",
                rx_end.total_bytes, tx_end.total_bytes
            ));
        }
        let end = |f: &FlowReport| FlowEnd {
            role: f.role,
            total_bytes: f.total_bytes,
            socket_buffers: f.socket_buffers,
            applied: f.applied.clone(),
            tcp_info: f.tcp_info.as_ref().map(TcpInfo::from),
            zerocopy: f.zerocopy,
            reads: f.reads,
            sends: f.sends,
        };
        FlowResult {
            id,
            direction: dir,
            bytes: rx_end.window_bytes,
            elapsed_s: rx_end.window_s,
            throughput_bps: bps(rx_end.window_bytes, rx_end.window_s),
            sender_bytes: tx_end.window_bytes,
            sender_elapsed_s: tx_end.window_s,
            sender_throughput_bps: bps(tx_end.window_bytes, tx_end.window_s),
            tcp_info: if transactional {
                &l.tcp_info
            } else {
                &tx_end.tcp_info
            }
            .as_ref()
            .map(TcpInfo::from),
            transactions: transactional.then_some(l.window_transactions),
            transactions_per_s: transactional.then(|| rate(l.window_transactions, l.window_s)),
            // The requester keeps a request/response flow's books; strays reach either end.
            udp: if transactional {
                udp_flow(l, l, false).map(|mut u| {
                    u.stray = u.stray.saturating_add(r.udp.as_ref().map_or(0, |x| x.stray));
                    u
                })
            } else {
                udp_flow(rx_end, tx_end, true)
            },
            counts: l.counts.clone(),
            local: end(l),
            remote: end(r),
        }
    }

    /// The test's summary, from its flows and both ends' reports.
    fn summary(&self, flows: &[FlowResult], cpu: &[EndCpu<'_>; 2]) -> Summary {
        let (local, remote) = (self.local.report, self.remote.report);
        let directions = direction_summaries(self.spec, flows);
        let directions_fairness =
            jain_index(&directions.iter().map(|d| d.throughput_bps).collect::<Vec<_>>());
        let bytes: u64 = total(directions.iter().map(|d| d.bytes));
        let elapsed_s = directions.iter().map(|d| d.elapsed_s).fold(0.0, f64::max);
        let dir_bps = |d: Direction| {
            directions
                .iter()
                .find(|s| s.direction == d)
                .map(|s| s.throughput_bps)
        };
        let transactions = self
            .transactional
            .then(|| total(flows.iter().filter_map(|f| f.transactions)));
        let streamlike = !self.transactional;
        Summary {
            send_throughput_bps: streamlike.then(|| directions.iter().map(|d| d.sender_throughput_bps).sum()),
            recv_throughput_bps: streamlike.then(|| directions.iter().map(|d| d.throughput_bps).sum()),
            udp: flows.iter().any(|f| f.udp.is_some()).then(|| udp_total(flows)),
            transactions,
            transactions_per_s: transactions.map(|t| rate(t, elapsed_s)),
            latency_us: local.latency.as_ref().map(|l| LatencyUs {
                histogram: local.latency_histogram.clone(),
                ..LatencyUs::from(l)
            }),
            schedule: local.schedule.clone(),
            counts: KindCounts::sum(flows.iter().map(|f| &f.counts)),
            cpu: cpu_summary(cpu),
            service_demand: self.service_demand(flows, cpu, transactions, bytes, elapsed_s),
            throughput_bps: bps(bytes, elapsed_s),
            bytes,
            elapsed_s,
            tx_throughput_bps: dir_bps(Direction::Tx),
            rx_throughput_bps: dir_bps(Direction::Rx),
            socket_buffers: EndBuffers {
                local: largest(flows.iter().map(|f| &f.local.socket_buffers)),
                remote: largest(flows.iter().map(|f| &f.remote.socket_buffers)),
            },
            directions,
            directions_fairness,
            http: None,
            half_close: None,
            // udp-stream, udp-rr and tcp-rr: each end timed the messages it
            // received against one clock (requests one way, responses the other).
            one_way_delay: netrig_proto::spec::one_way_messages(self.spec).map(|m| match m {
                Err(why) => crate::one_way::withheld(why),
                Ok((tx, rx)) => crate::one_way::unstamped(
                    crate::one_way::one_way_delay(
                        local,
                        remote,
                        self.transactional || self.plan.contains(&Direction::Tx),
                        self.transactional || self.plan.contains(&Direction::Rx),
                    ),
                    self.spec,
                    tx,
                    rx,
                ),
            }),
        }
    }

    /// Each end's CPU time per unit of work: per KB for streams, per
    /// transaction for request/response; per packet too for streams.
    fn service_demand(
        &self,
        flows: &[FlowResult],
        cpu: &[EndCpu<'_>; 2],
        transactions: Option<u64>,
        bytes: u64,
        elapsed_s: f64,
    ) -> ServiceDemandSummary {
        let mss = flows
            .first()
            .and_then(|f| f.tcp_info.as_ref())
            .map(|t| t.snd_mss)
            .filter(|m| *m > 0);
        // Units of work: KB for streams, transactions for request/response.
        let (units, unit) = match transactions {
            Some(t) => (t as f64, "us/tran"),
            None => (bytes as f64 / 1024.0, "us/KB"),
        };
        let [sd_local, sd_remote] = [&cpu[0], &cpu[1]].map(|c| c.demand(elapsed_s, units));
        let per_packet = |sd: Option<f64>| {
            if self.transactional {
                return None;
            }
            Some(netrig_metrics::per_packet_us(sd?, mss?))
        };
        ServiceDemandSummary {
            local: sd_local,
            remote: sd_remote,
            unit: unit.into(),
            mss,
            local_per_packet_us: per_packet(sd_local),
            remote_per_packet_us: per_packet(sd_remote),
        }
    }

    /// Each end's own warnings of its host and CPU; what one host's counters
    /// or one machine's CPU say is said once, for both ends.
    fn side_warnings(
        &self,
        batched: bool,
        witness: &WitnessResult,
        same_machine: bool,
        warnings: &mut Vec<String>,
    ) {
        let transport = self.spec.rules().transport();
        let host_counter = |w: &str| w.contains(") during the test") || w.contains("connection-tracking");
        warnings.extend(
            crate::checks::side_warnings(self.local.report, "local", transport, batched)
                .into_iter()
                .map(|w| match w.strip_prefix("local: ") {
                    // One host's counters: they speak for both ends.
                    Some(rest) if witness.shared_counters && host_counter(&w) => {
                        format!("both ends (one host): {rest}")
                    }
                    _ => w,
                }),
        );
        warnings.extend(
            crate::checks::side_warnings(self.remote.report, "remote", transport, batched)
                .into_iter()
                .filter(|w| {
                    let counters = host_counter(w);
                    let cpu = w.contains("(steal;") || w.contains("/proc/stat accounted");
                    let said = (witness.shared_counters && counters) || (same_machine && cpu);
                    !said
                }),
        );
    }

    /// Datagrams of no flow of the test, and send times no sender's clock
    /// can have stamped (peer input): said even where too few to withhold
    /// the jitter.
    fn datagram_warnings(&self, udp: Option<&UdpSummary>, warnings: &mut Vec<String>) {
        if let Some(u) = udp.filter(|u| u.stray > 0) {
            warnings.push(format!(
                "{} datagram(s) of no flow of this test reached the receivers' sockets (counted as stray, not received)",
                u.stray
            ));
        }
        let windows: Vec<&SeqInterval> = [self.local.report, self.remote.report]
            .iter()
            .flat_map(|side| &side.flows)
            .filter_map(|f| f.udp.as_ref()?.window.as_ref())
            .collect();
        let far = total(windows.iter().map(|w| w.far));
        if far > 0 {
            warnings.push(format!(
                "{far} of {} datagram(s) received in the window carried a send time more than {} s from the receiver's \
                 clock (since each end's time zero, a control message apart): no sender's clock stamped them (a peer's \
                 forged or broken timestamp), so they are counted as untimed and left out of jitter",
                total(windows.iter().map(|w| w.received)),
                netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS / 1_000_000_000
            ));
        }
    }

    /// An end whose window lasted far beyond the test's length was stopped
    /// or starved for part of it.
    fn window_warnings(&self, warnings: &mut Vec<String>) {
        let Limit::Duration { seconds } = self.spec.limit else {
            return;
        };
        let asked = seconds - self.spec.omit_s;
        for (end, w) in [
            ("local", self.local.report.window_s),
            ("remote", self.remote.report.window_s),
        ] {
            if w > asked * 1.25 + 1.0 {
                warnings.push(format!(
                    "{end}: the measured window lasted {w:.2} s for a {asked} s test: that end was stopped or \
                     starved (a stalled process, a paused VM) and its figures cover the stall"
                ));
            }
        }
    }
}

/// Each direction's flows summed, with their spread and fairness.
fn direction_summaries(spec: &TestSpec, flows: &[FlowResult]) -> Vec<DirectionSummary> {
    spec.directions()
        .iter()
        .map(|d| {
            let fs: Vec<&FlowResult> = flows.iter().filter(|f| f.direction == *d).collect();
            let bytes = total(fs.iter().map(|f| f.bytes));
            let elapsed_s = fs.iter().map(|f| f.elapsed_s).fold(0.0, f64::max);
            let sender_bytes = total(fs.iter().map(|f| f.sender_bytes));
            let sender_elapsed_s = fs.iter().map(|f| f.sender_elapsed_s).fold(0.0, f64::max);
            let per_flow: Vec<f64> = fs.iter().map(|f| f.throughput_bps).collect();
            DirectionSummary {
                direction: *d,
                flows: fs.len() as u32,
                bytes,
                elapsed_s,
                throughput_bps: bps(bytes, elapsed_s),
                sender_bytes,
                sender_elapsed_s,
                sender_throughput_bps: bps(sender_bytes, sender_elapsed_s),
                flow_throughput_bps: Spread::of(&per_flow),
                fairness: jain_index(&per_flow),
            }
        })
        .collect()
}

/// An end's CPU as the result may show it: below /proc/stat's resolution
/// it is withheld (utilisation, its split and service demand), with the
/// reason; a coarse one is shown and warned of.
struct EndCpu<'a> {
    report: &'a SideReport,
    resolution: CpuResolution,
}

impl<'a> EndCpu<'a> {
    fn of(report: &'a SideReport) -> Self {
        EndCpu {
            report,
            resolution: cpu_resolution(report),
        }
    }

    /// The end's CPU, unless withheld.
    fn measured(&self) -> Option<&'a netrig_proto::report::measure::CpuUsage> {
        self.report
            .cpu
            .as_ref()
            .filter(|_| !matches!(self.resolution, CpuResolution::Withheld(_)))
    }

    /// Why its CPU is withheld, if it is.
    fn withheld(&self) -> Option<String> {
        match &self.resolution {
            CpuResolution::Withheld(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// What is said of its CPU's resolution, if anything.
    fn said(&self) -> Option<String> {
        match &self.resolution {
            CpuResolution::Fine => None,
            CpuResolution::Coarse(w) | CpuResolution::Withheld(w) => Some(w.clone()),
        }
    }

    /// Its CPU time per unit of work, over `elapsed_s`.
    fn demand(&self, elapsed_s: f64, units: f64) -> Option<f64> {
        let c = self.measured()?;
        let cpus = match c.cpus {
            0 => self.report.environment.as_ref().map_or(0, |e| e.cpus_online),
            n => n,
        };
        netrig_metrics::service_demand(c.busy_pct, elapsed_s, cpus, units)
    }
}

/// Both ends' CPU, as measured or withheld.
fn cpu_summary([local, remote]: &[EndCpu<'_>; 2]) -> CpuSummary {
    let (cpu_local, cpu_remote) = (local.measured(), remote.measured());
    CpuSummary {
        local_pct: cpu_local.map(|c| c.busy_pct),
        remote_pct: cpu_remote.map(|c| c.busy_pct),
        local: cpu_local.map(CpuUsage::from),
        remote: cpu_remote.map(CpuUsage::from),
        local_accounted_pct: crate::checks::accounted_pct(local.report),
        remote_accounted_pct: crate::checks::accounted_pct(remote.report),
        local_withheld: local.withheld(),
        remote_withheld: remote.withheld(),
    }
}

/// The CPU's resolution, once for one machine when both ends say the same.
fn resolution_warnings([local, remote]: &[EndCpu<'_>; 2], same_machine: bool, warnings: &mut Vec<String>) {
    let (res_local, res_remote) = (&local.resolution, &remote.resolution);
    match (local.said(), remote.said()) {
        (Some(l), Some(_))
            if same_machine && std::mem::discriminant(res_local) == std::mem::discriminant(res_remote) =>
        {
            warnings.push(format!("both ends (one host): {l}"))
        }
        (l, r) => {
            warnings.extend(l.map(|w| format!("local: {w}")));
            warnings.extend(r.map(|w| format!("remote: {w}")));
        }
    }
}

/// The largest payload a TCP segment on these paths can carry, for the
/// witness's least segment count: the path MTU less the IP and TCP
/// headers without options. Not the MSS: TCP_INFO's snd_mss is the
/// sender's size at the moment it was read, which the kernel holds to
/// half the largest window the peer offered (tcp_bound_to_half_wnd), so
/// a flow read at 32,768 had sent most of its bytes in 65,483-byte
/// segments, and payload / 32,768 came out above Tcp.OutSegs.
fn max_segment(flows: &[FlowResult], v6: bool) -> Option<u32> {
    let headers = if v6 { 60 } else { 40 };
    flows
        .iter()
        .flat_map(|f| [&f.local.tcp_info, &f.remote.tcp_info])
        .filter_map(|t| t.as_ref())
        .map(|t| t.pmtu.saturating_sub(headers))
        .max()
        .filter(|m| *m > 0)
}

/// An open loop's generator that fell behind its schedule.
fn schedule_warning(local: &SideReport) -> Option<String> {
    let sch = local.schedule.as_ref()?;
    (sch.due > 0 && sch.late as f64 > sch.due as f64 * 0.01).then(|| {
        format!(
            "the generator fell behind its schedule: {} of {} requests left more than 1 ms after they were due \
             (at most {:.1} ms late); latencies count from the due time, but the offered rate was not met",
            sch.late,
            sch.due,
            sch.max_behind_us / 1e3
        )
    })
}

/// An interval's latencies are handed over by the workers within a bound;
/// one that came too late is left out, and said so here.
fn late_latencies_warning(intervals: &[IntervalResult]) -> Option<String> {
    let short: Vec<u32> = intervals
        .iter()
        .filter(|i| {
            i.latency_us
                .as_ref()
                .is_some_and(|l| l.count != total(i.flows.iter().filter_map(|f| f.transactions)))
        })
        .map(|i| i.index)
        .collect();
    (!short.is_empty()).then(|| {
        format!(
            "interval(s) {short:?}: a worker handed its latencies over late, so intervals[].latency_us \
             counts fewer transactions than the interval (the window's summary has them all)"
        )
    })
}

/// A UDP flow's accounting: the receiver's sequence tracking, completed
/// with the sender's count so that datagrams lost after the last one
/// received count too.
fn udp_flow(receiver: &FlowReport, sender: &FlowReport, window_counted: bool) -> Option<UdpSummary> {
    let (rx, tx) = (receiver.udp.as_ref()?, sender.udp.as_ref()?);
    let window_sent = window_counted.then_some(tx.window_sent_datagrams);
    let seq = rx.received.clone().unwrap_or_default();
    let expected = seq.expected.max(tx.sent_datagrams);
    let lost = expected.saturating_sub(seq.received);
    let jitter = match &rx.window {
        Some(w) => Jitter::of(&[*w]),
        // udp-stream from an agent older than the window's accounting.
        None if window_counted => Jitter::withheld(
            "not measured: the receiving end (an older netrig) does not report its window's jitter",
        ),
        // udp-rr: the requester times round trips, not one-way transit.
        None => Jitter::withheld(
            "not measured: udp-rr times each round trip (summary.latency_us); jitter is a udp-stream figure",
        ),
    };
    Some(UdpSummary {
        sent_datagrams: tx.sent_datagrams,
        received_datagrams: seq.received,
        lost_datagrams: lost,
        loss_pct: if expected > 0 {
            lost as f64 / expected as f64 * 100.0
        } else {
            0.0
        },
        jitter_us: jitter.mean_us,
        jitter_rfc3550_us: jitter.rfc3550_us,
        jitter_pairs: jitter.pairs,
        untimed_datagrams: jitter.untimed,
        jitter_withheld: jitter.withheld,
        out_of_order: seq.out_of_order,
        duplicates: seq.duplicates,
        stray: rx.stray,
        window_sent_datagrams: window_sent,
    })
}

fn udp_total(flows: &[FlowResult]) -> UdpSummary {
    let mut t = UdpSummary::default();
    let mut first = true;
    let per_flow: Vec<_> = flows.iter().filter_map(|f| f.udp.as_ref()).collect();
    for u in &per_flow {
        t.sent_datagrams = t.sent_datagrams.saturating_add(u.sent_datagrams);
        t.received_datagrams = t.received_datagrams.saturating_add(u.received_datagrams);
        t.lost_datagrams = t.lost_datagrams.saturating_add(u.lost_datagrams);
        t.out_of_order = t.out_of_order.saturating_add(u.out_of_order);
        t.duplicates = t.duplicates.saturating_add(u.duplicates);
        t.stray = t.stray.saturating_add(u.stray);
        t.window_sent_datagrams = match (t.window_sent_datagrams, u.window_sent_datagrams) {
            (Some(a), Some(b)) => Some(a + b),
            (None, b) if first => b,
            _ => None,
        };
        first = false;
    }
    t.loss_pct = loss_pct(t.lost_datagrams, t.received_datagrams);
    t.jitter_pairs = total(per_flow.iter().map(|u| u.jitter_pairs));
    t.untimed_datagrams = total(per_flow.iter().map(|u| u.untimed_datagrams));
    // Pairs-weighted, as if one flow: the mean |D| over every timed pair.
    if per_flow.iter().all(|u| u.jitter_us.is_some()) && t.jitter_pairs > 0 {
        t.jitter_us = Some(
            per_flow
                .iter()
                .map(|u| u.jitter_us.unwrap_or(0.0) * u.jitter_pairs as f64)
                .sum::<f64>()
                / t.jitter_pairs as f64,
        );
        t.jitter_rfc3550_us = mean_jitter(
            per_flow
                .iter()
                .map(|u| (u.jitter_rfc3550_us.unwrap_or(0.0), u.received_datagrams)),
        );
    } else {
        t.jitter_withheld = per_flow
            .iter()
            .find_map(|u| u.jitter_withheld.clone())
            .or_else(|| Some("not measured: no two datagrams were timed in the window".into()));
    }
    t
}

/// The share of a period's datagrams that may have shared timestamps
/// before its jitter is withheld (docs/RESULTS.md says why 10 %).
pub const JITTER_MAX_UNTIMED_SHARE: f64 = 0.10;

/// Jitter over a period, from receivers' accounting of it.
struct Jitter {
    mean_us: Option<f64>,
    rfc3550_us: Option<f64>,
    pairs: u64,
    untimed: u64,
    withheld: Option<String>,
}

impl Jitter {
    fn withheld(why: &str) -> Jitter {
        Jitter {
            mean_us: None,
            rfc3550_us: None,
            pairs: 0,
            untimed: 0,
            withheld: Some(why.into()),
        }
    }

    /// Every flow's pairs together; withheld when more than
    /// [`JITTER_MAX_UNTIMED_SHARE`] of the datagrams had shared timestamps
    /// (their `|D|` would read near zero by construction) or no pair was timed.
    fn of(flows: &[SeqInterval]) -> Jitter {
        let pairs: u64 = total(flows.iter().map(|u| u.jitter_pairs));
        let untimed: u64 = total(flows.iter().map(|u| u.untimed));
        let received: u64 = total(flows.iter().map(|u| u.received));
        let mut j = Jitter {
            mean_us: None,
            rfc3550_us: None,
            pairs,
            untimed,
            withheld: None,
        };
        let far: u64 = total(flows.iter().map(|u| u.far));
        if received > 0 && untimed as f64 > received as f64 * JITTER_MAX_UNTIMED_SHARE && far > 0 {
            j.withheld = Some(format!(
                "not measured: {untimed} of {received} datagrams ({:.0}%) were untimed, {far} of them because their \
                 send time was more than {} s from the receiver's clock (no sender's clock stamped them: a peer's \
                 forged or broken timestamp), the rest because they shared one timestamp with others (UDP GSO, GRO)",
                untimed as f64 * 100.0 / received as f64,
                netrig_metrics::udp_seq::MAX_STAMP_SKEW_NS / 1_000_000_000
            ));
        } else if received > 0 && untimed as f64 > received as f64 * JITTER_MAX_UNTIMED_SHARE {
            j.withheld = Some(format!(
                "not measured: {untimed} of {received} datagrams ({:.0}%) shared one timestamp with others (sent in \
                 one UDP GSO call or received in one GRO buffer), so their transit times cannot be told apart; \
                 --no-gso sends and receives each datagram on its own",
                untimed as f64 * 100.0 / received as f64
            ));
        } else if pairs == 0 {
            j.withheld = Some("not measured: no two datagrams were timed in the window".into());
        } else {
            let sum: f64 = flows
                .iter()
                .map(|u| u.jitter_mean_us.unwrap_or(0.0) * u.jitter_pairs as f64)
                .sum();
            j.mean_us = Some(sum / pairs as f64);
            j.rfc3550_us = mean_jitter(flows.iter().map(|u| (u.jitter_us, u.received)));
        }
        j
    }
}

/// Sums receivers' interval accounting; jitter weighted by datagrams received.
fn interval_udp(flows: &[SeqInterval]) -> IntervalUdp {
    let mut t = IntervalUdp::default();
    for u in flows {
        t.received_datagrams = t.received_datagrams.saturating_add(u.received);
        t.lost_datagrams = t.lost_datagrams.saturating_add(u.lost);
        t.out_of_order = t.out_of_order.saturating_add(u.out_of_order);
        t.duplicates = t.duplicates.saturating_add(u.duplicates);
    }
    t.loss_pct = loss_pct(t.lost_datagrams, t.received_datagrams);
    let j = Jitter::of(flows);
    t.jitter_us = j.mean_us;
    t.jitter_rfc3550_us = j.rfc3550_us;
    t.untimed_datagrams = j.untimed;
    t
}

/// A sum of counts from both ends' reports, the agent's from the wire:
/// saturating, so a hostile or broken peer's counts cannot overflow it.
fn total(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0, u64::saturating_add)
}

/// lost / (received + lost) × 100, 0 when nothing was expected.
fn loss_pct(lost: u64, received: u64) -> f64 {
    let expected = lost.saturating_add(received);
    if expected > 0 {
        lost as f64 / expected as f64 * 100.0
    } else {
        0.0
    }
}

/// Jitter over flows weighted by the datagrams each received, from
/// (jitter, received) pairs; `None` when none received any.
fn mean_jitter(flows: impl Iterator<Item = (f64, u64)>) -> Option<f64> {
    let (weighted, received) = flows.fold((0.0, 0u64), |(w, n), (j, r)| {
        (w + j * r as f64, n.saturating_add(r))
    });
    (received > 0).then(|| weighted / received as f64)
}

/// Events per second, 0 for an empty window.
fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

fn largest<'a>(bufs: impl Iterator<Item = &'a SockBufReport>) -> SockBufReport {
    let max = |a: Option<u32>, b: Option<u32>| match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let pair = |a: BufPair, b: BufPair| BufPair {
        snd: max(a.snd, b.snd),
        rcv: max(a.rcv, b.rcv),
    };
    bufs.fold(SockBufReport::default(), |acc, b| SockBufReport {
        requested: pair(acc.requested, b.requested),
        initial: pair(acc.initial, b.initial),
        final_: pair(acc.final_, b.final_),
    })
}

/// Interval k of the result takes each flow's bytes from the end that
/// received it, timed by that end's clock.
fn merge_intervals(
    plan: &[Direction],
    transactional: bool,
    local: &[IntervalSample],
    remote: &[IntervalSample],
) -> Vec<IntervalResult> {
    let mut by_index: BTreeMap<u32, (Option<&IntervalSample>, Option<&IntervalSample>)> = BTreeMap::new();
    for s in local {
        by_index.entry(s.index).or_default().0 = Some(s);
    }
    for s in remote {
        by_index.entry(s.index).or_default().1 = Some(s);
    }
    by_index
        .into_iter()
        .filter_map(|(index, (l, r))| merge_interval(plan, transactional, index, l, r))
        .collect()
}

/// Merges one interim report from the samples the two ends took for it
/// (either may be missing); `None` when neither holds a received flow.
pub fn merge_interval(
    plan: &[Direction],
    transactional: bool,
    index: u32,
    local: Option<&IntervalSample>,
    remote: Option<&IntervalSample>,
) -> Option<IntervalResult> {
    let mut flows = Vec::new();
    let mut udp_all = Vec::new();
    let mut dir_totals: BTreeMap<Direction, (u64, f64)> = BTreeMap::new();
    let (mut start_s, mut end_s) = (f64::INFINITY, 0.0f64);
    for (id, dir) in plan.iter().enumerate() {
        let (sample, sender) = match (transactional, dir) {
            // The requester (the client) counts a request/response flow.
            (true, _) => (local, local),
            (false, Direction::Tx) => (remote, local),
            (false, Direction::Rx) => (local, remote),
        };
        let Some(s) = sample else { continue };
        let sender_pos = sender.and_then(|snd| Some((snd, snd.ids.iter().position(|x| *x == id as u32)?)));
        let tcp_info =
            sender_pos.and_then(|(snd, pos)| Some(TcpInfo::from(snd.tcp_info.get(pos)?.as_ref()?)));
        let retransmits = sender_pos
            .and_then(|(snd, pos)| snd.retransmits.get(pos).copied().flatten())
            .map(u64::from);
        let Some(pos) = s.ids.iter().position(|x| *x == id as u32) else {
            continue;
        };
        let bytes = s.bytes.get(pos).copied().unwrap_or(0);
        let transactions = transactional.then(|| s.transactions.get(pos).copied().unwrap_or(0));
        let failed_transactions = s.failures.get(pos).copied();
        let udp_raw = s.udp.get(pos).copied().flatten();
        udp_all.extend(udp_raw);
        let udp = udp_raw.map(|u| interval_udp(&[u]));
        let secs = s.end_s - s.start_s;
        start_s = start_s.min(s.start_s);
        end_s = end_s.max(s.end_s);
        let t = dir_totals.entry(*dir).or_insert((0, secs));
        t.0 = t.0.saturating_add(bytes);
        flows.push(IntervalFlow {
            id: id as u32,
            direction: *dir,
            bytes,
            throughput_bps: bps(bytes, secs),
            tcp_info,
            transactions,
            retransmits,
            udp,
            failed_transactions,
        });
    }
    if flows.is_empty() {
        return None;
    }
    let dir_bps = |d| dir_totals.get(&d).map(|(b, s)| bps(*b, *s));
    let tx = dir_bps(Direction::Tx);
    let rx = dir_bps(Direction::Rx);
    let fairness = |d: Direction| {
        jain_index(
            &flows
                .iter()
                .filter(|f| f.direction == d)
                .map(|f| f.throughput_bps)
                .collect::<Vec<_>>(),
        )
    };
    let tps = {
        let t: Vec<u64> = flows.iter().filter_map(|f| f.transactions).collect();
        (!t.is_empty()).then(|| rate(total(t.iter().copied()), end_s - start_s))
    };
    let retransmits = {
        let r: Vec<u64> = flows.iter().filter_map(|f| f.retransmits).collect();
        (!r.is_empty()).then(|| total(r.iter().copied()))
    };
    let udp = (!udp_all.is_empty()).then(|| interval_udp(&udp_all));
    let failed_transactions = {
        let f: Vec<u64> = flows.iter().filter_map(|f| f.failed_transactions).collect();
        (!f.is_empty()).then(|| total(f.iter().copied()))
    };
    // The requester (the client) times request/response transactions.
    let latency_us = if transactional {
        local.and_then(|s| s.latency.as_ref()).map(LatencyUs::from)
    } else {
        None
    };
    Some(IntervalResult {
        retransmits,
        udp,
        failed_transactions,
        latency_us,
        transactions_per_s: tps,
        index,
        start_s,
        end_s,
        bytes: total(dir_totals.values().map(|(b, _)| *b)),
        throughput_bps: tx.unwrap_or(0.0) + rx.unwrap_or(0.0),
        tx_throughput_bps: tx,
        rx_throughput_bps: rx,
        tx_fairness: fairness(Direction::Tx),
        rx_fairness: fairness(Direction::Rx),
        directions_fairness: jain_index(&[tx, rx].into_iter().flatten().collect::<Vec<_>>()),
        flows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends' reports and intervals merged, with the tests' config and agent.
    fn merged(
        spec: &TestSpec,
        local: &SideReport,
        local_intervals: &[IntervalSample],
        remote: &SideReport,
        remote_intervals: &[IntervalSample],
    ) -> Result<TestResult, String> {
        assemble(
            spec,
            &Plain,
            config(),
            agent(),
            Side {
                report: local,
                intervals: local_intervals,
            },
            Side {
                report: remote,
                intervals: remote_intervals,
            },
            vec![],
        )
    }
    use crate::kind::TableLayout;
    use netrig_proto::report::Role;
    use netrig_proto::spec::{KindSpec, Limit, StreamOptions, TcpBidirSpec, TcpRrSpec, TcpStreamSpec};

    /// A kind that adds nothing of its own: the merge alone.
    struct Plain;

    impl KindReport for Plain {
        fn config(&self, _: &TestSpec, _: &mut TestConfig) {}
        fn table(&self) -> &'static dyn TableLayout {
            &netrig_export::table::kit::BARE
        }
    }

    fn spec(kind: &str) -> TestSpec {
        let stream = StreamOptions {
            message_size: 1000,
            recv_size: 1000,
            ..StreamOptions::default()
        };
        let test = match kind {
            "tcp-stream" => KindSpec::TcpStream(TcpStreamSpec(stream)),
            "tcp-bidir" => KindSpec::TcpBidir(TcpBidirSpec(stream)),
            "tcp-rr" => KindSpec::TcpRr(TcpRrSpec::default()),
            other => panic!("no test spec for {other}"),
        };
        TestSpec {
            interval_s: Some(1.0),
            ..TestSpec::new(test, Limit::Duration { seconds: 2.0 })
        }
    }

    fn flow(id: u32, direction: Direction, role: Role, window_bytes: u64, window_s: f64) -> FlowReport {
        FlowReport {
            id,
            direction,
            role,
            window_bytes,
            total_bytes: window_bytes.saturating_add(10),
            window_s,
            socket_buffers: SockBufReport::default(),
            applied: Default::default(),
            tcp_info: None,
            window_transactions: 0,
            udp: None,
            counts: KindCounts::default(),
            zerocopy: None,
            reads: None,
            sends: None,
        }
    }

    fn config() -> TestConfig {
        TestConfig {
            host: None,
            port: 1,
            embedded: true,
            length_s: Some(2.0),
            bytes: None,
            omit_s: 0.0,
            interval_s: Some(1.0),
            flows: 1,
            message_size: 1000,
            recv_size: 1000,
            cpus: None,
            remote_cpus: None,
            workers: None,
            local: SocketOptions::default(),
            remote: SocketOptions::default(),
            bind: None,
            family: None,
            kind: Default::default(),
        }
    }

    fn agent() -> AgentInfo {
        AgentInfo {
            address: "x".into(),
            software: "y".into(),
            protocol_version: 1,
        }
    }

    /// An agent's counts at their largest: the merge saturates, never
    /// overflows (a debug build would panic), whatever a peer sends.
    #[test]
    fn a_peers_largest_counts_do_not_overflow_the_merge() {
        let mut s = spec("tcp-stream");
        s.flows = 2;
        let big = u64::MAX;
        let local = SideReport {
            flows: vec![
                flow(0, Direction::Tx, Role::Sender, big, 1.0),
                flow(1, Direction::Tx, Role::Sender, big, 1.0),
            ],
            ..Default::default()
        };
        let remote = SideReport {
            flows: vec![
                flow(0, Direction::Tx, Role::Receiver, big, 1.0),
                flow(1, Direction::Tx, Role::Receiver, big, 1.0),
            ],
            ..Default::default()
        };
        let iv = [sample(0, vec![big, big], vec![0, 1])];
        let r = merged(&s, &local, &iv, &remote, &iv).unwrap();
        assert_eq!(r.summary.bytes, big);
        assert_eq!(r.intervals[0].bytes, big);
    }

    fn sample(index: u32, bytes: Vec<u64>, ids: Vec<u32>) -> IntervalSample {
        IntervalSample {
            index,
            start_s: index as f64,
            end_s: index as f64 + 1.0,
            ids,
            bytes,
            tcp_info: vec![],
            transactions: vec![],
            ..Default::default()
        }
    }

    /// The witness's least TCP segment count divides by the largest segment
    /// the path MTU allows, not by the sender's snd_mss as read at the end:
    /// a debug build's 16 MiB maerts ended with snd_mss 32,768 (the kernel
    /// holds it to half the peer's largest window), having sent 379 MB in
    /// 6,856 segments, and payload / 32,768 (11,567) was judged against
    /// Tcp.OutSegs. 1,000 full 65,483-byte segments: at least 999 of 65,496
    /// bytes, which 1,010 segments meet; 500 segments do not.
    #[test]
    fn the_least_segment_count_divides_by_the_path_mtus_largest_segment() {
        let info = netrig_proto::report::measure::TcpInfo {
            state: 1,
            snd_mss: 32_768,
            pmtu: 65_536,
            ..Default::default()
        };
        let payload = 1_000 * 65_483;
        let side = |role, out_segs: i64| SideReport {
            flows: vec![FlowReport {
                tcp_info: Some(info.clone()),
                ..flow(0, Direction::Tx, role, payload, 2.0)
            }],
            window_s: 2.0,
            witness: (role == Role::Sender).then(|| netrig_proto::report::WitnessReport {
                window_s: 2.0,
                scope: Some("a".into()),
                payload_sent: payload,
                payload_out: payload,
                tcp: Some(netrig_proto::report::TcpWitness {
                    flows: 1,
                    netrig_sent: payload,
                    kernel_sent: payload,
                    ..Default::default()
                }),
                kernel: [("Tcp.OutSegs".to_string(), out_segs)].into_iter().collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let segments = |out_segs| {
            let r = merged(
                &spec("tcp-stream"),
                &side(Role::Sender, out_segs),
                &[],
                &side(Role::Receiver, 0),
                &[],
            )
            .unwrap();
            r.witness
                .checks
                .into_iter()
                .find(|c| c.figure == "TCP data segments")
                .expect("judged")
        };
        let c = segments(1_010);
        assert_eq!((c.netrig, c.verdict.as_str()), (999, "agrees"), "{c:?}");
        assert_eq!(segments(500).verdict, "disagrees");
    }

    /// Issue #37, item 28: a window whose datagrams were mostly stamped far
    /// from the receiver's clock has its jitter withheld, naming them; a
    /// few far ones leave it measured (the warning is assemble's).
    #[test]
    fn jitter_of_far_stamped_datagrams_is_withheld_naming_them() {
        let iv = |untimed, far| SeqInterval {
            received: 1_000,
            jitter_pairs: 999 - untimed,
            jitter_mean_us: Some(4_300.0),
            untimed,
            far,
            ..Default::default()
        };
        let j = Jitter::of(&[iv(500, 500)]);
        assert_eq!(j.mean_us, None);
        let why = j.withheld.unwrap();
        assert!(
            why.contains("500 of 1000 datagrams (50%) were untimed, 500 of them because their send time was more than 60 s"),
            "{why}"
        );
        let j = Jitter::of(&[iv(200, 0)]);
        assert!(j.withheld.unwrap().contains("shared one timestamp"));
        let j = Jitter::of(&[iv(5, 5)]);
        assert_eq!((j.mean_us, j.untimed), (Some(4_300.0), 5));
    }

    /// Issue #37, item 8: a 1-s run at 200 transactions/s whose busy time
    /// was no /proc/stat tick showed CPU 0.0 % and 0.00 µs/tran. Such an
    /// end's utilisation, split and service demand are null, with the reason
    /// in the result and a warning; the other end's are kept.
    #[test]
    fn cpu_below_proc_stat_s_resolution_is_withheld_with_its_reason() {
        let side = |role, busy_cpu_s: f64| SideReport {
            flows: vec![FlowReport {
                window_transactions: 200,
                ..flow(0, Direction::Tx, role, 200, 1.0)
            }],
            window_s: 1.0,
            cpu: Some(netrig_proto::report::measure::CpuUsage {
                cpus: 2,
                busy_cpu_s,
                elapsed_cpu_s: 2.0,
                busy_pct: busy_cpu_s / 2.0 * 100.0,
                ..Default::default()
            }),
            cpu_window_s: Some(1.0),
            ..Default::default()
        };
        let mut s = spec("tcp-rr");
        s.interval_s = None;
        let r = merged(
            &s,
            &side(Role::Requester, 0.0),
            &[],
            &side(Role::Responder, 0.5),
            &[],
        )
        .unwrap();
        let cpu = &r.summary.cpu;
        assert_eq!((cpu.local_pct, &cpu.local), (None, &None));
        assert_eq!(r.summary.service_demand.local, None);
        let why = cpu.local_withheld.as_deref().expect("a reason");
        assert!(why.contains("0 tick(s) of /proc/stat"), "{why}");
        assert_eq!(cpu.remote_pct, Some(25.0));
        assert_eq!(cpu.remote_withheld, None);
        // 25 % of 2 CPUs over 1 s, for 200 transactions: 2,500 µs each.
        assert_eq!(r.summary.service_demand.remote, Some(2_500.0));
        let w: Vec<_> = r.warnings.iter().filter(|w| w.contains("/proc/stat")).collect();
        assert!(
            w.len() == 1 && w[0].starts_with("local: CPU utilisation and service demand withheld"),
            "{:?}",
            r.warnings
        );
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["summary"]["cpu"]["local_pct"].is_null());
        assert!(v["summary"]["cpu"]["local_withheld"].is_string());
        assert!(v["summary"]["service_demand"]["local"].is_null());
        assert!(v["summary"]["cpu"].get("remote_withheld").is_none());
    }

    #[test]
    fn receiver_count_is_reported_sender_kept() {
        // Bidirectional: flow 0 tx (agent receives), flow 1 rx (client receives).
        let local = SideReport {
            flows: vec![
                flow(0, Direction::Tx, Role::Sender, 1_000_000, 2.0),
                flow(1, Direction::Rx, Role::Receiver, 500_000, 2.0),
            ],
            window_s: 2.0,
            warnings: vec!["local w".into()],
            ..Default::default()
        };
        let remote = SideReport {
            flows: vec![
                flow(0, Direction::Tx, Role::Receiver, 900_000, 2.0),
                flow(1, Direction::Rx, Role::Sender, 600_000, 2.5),
            ],
            window_s: 2.5,
            warnings: vec!["remote w".into()],
            ..Default::default()
        };
        let li = [
            sample(0, vec![7, 250_000], vec![0, 1]),
            sample(1, vec![7, 250_000], vec![0, 1]),
        ];
        let ri = [
            sample(0, vec![450_000, 9], vec![0, 1]),
            sample(1, vec![450_000, 9], vec![0, 1]),
        ];
        let r = merged(&spec("tcp-bidir"), &local, &li, &remote, &ri).unwrap();
        assert_eq!(r.flows[0].bytes, 900_000, "tx counted by the agent");
        assert_eq!(r.flows[0].sender_bytes, 1_000_000);
        assert_eq!(r.flows[1].bytes, 500_000, "rx counted by the client");
        assert_eq!(r.flows[1].sender_bytes, 600_000);
        assert_eq!(r.summary.bytes, 1_400_000);
        assert_eq!(r.summary.elapsed_s, 2.0);
        assert_eq!(r.summary.throughput_bps, 1_400_000.0 * 8.0 / 2.0);
        assert_eq!(r.summary.tx_throughput_bps, Some(900_000.0 * 8.0 / 2.0));
        assert_eq!(r.summary.rx_throughput_bps, Some(500_000.0 * 8.0 / 2.0));
        assert_eq!(r.warnings, vec!["local w".to_string(), "remote w".to_string()]);
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.intervals[0].bytes, 700_000);
        assert_eq!(r.intervals[0].tx_throughput_bps, Some(3_600_000.0));
        assert_eq!(r.intervals[0].rx_throughput_bps, Some(2_000_000.0));
    }

    #[test]
    fn one_way_test_has_null_other_direction_and_missing_flow_fails() {
        let local = SideReport {
            flows: vec![flow(0, Direction::Tx, Role::Sender, 10, 1.0)],
            window_s: 1.0,
            warnings: vec![],
            ..Default::default()
        };
        let remote = SideReport {
            flows: vec![flow(0, Direction::Tx, Role::Receiver, 8, 1.0)],
            window_s: 1.0,
            warnings: vec![],
            ..Default::default()
        };
        let s = |r| Side {
            report: r,
            intervals: &[],
        };
        let r = assemble(
            &spec("tcp-stream"),
            &Plain,
            config(),
            agent(),
            s(&local),
            s(&remote),
            vec![],
        )
        .unwrap();
        assert_eq!(r.summary.rx_throughput_bps, None);
        assert_eq!(r.summary.tx_throughput_bps, Some(64.0));
        let empty = SideReport::default();
        let err = assemble(
            &spec("tcp-stream"),
            &Plain,
            config(),
            agent(),
            s(&local),
            s(&empty),
            vec![],
        )
        .unwrap_err();
        assert!(err.contains("agent's report lacks flow 0"));
    }

    /// An interval whose latencies were not all handed over in time keeps a
    /// short count, and a warning names it; one that got them all does not.
    #[test]
    fn interval_latency_short_of_its_transactions_is_warned() {
        let local = SideReport {
            flows: vec![FlowReport {
                window_transactions: 20,
                ..flow(0, Direction::Tx, Role::Requester, 20, 2.0)
            }],
            window_s: 2.0,
            ..Default::default()
        };
        let remote = SideReport {
            flows: vec![flow(0, Direction::Tx, Role::Responder, 20, 2.0)],
            window_s: 2.0,
            ..Default::default()
        };
        let with_latency = |index, transactions, count| IntervalSample {
            transactions: vec![transactions],
            latency: Some(netrig_proto::report::measure::LatencySummary {
                count,
                p50_us: 10.0,
                p99_us: 10.0,
                max_us: 10.0,
                ..Default::default()
            }),
            ..sample(index, vec![transactions], vec![0])
        };
        let li = [with_latency(0, 10, 10), with_latency(1, 10, 7)];
        let r = merged(&spec("tcp-rr"), &local, &li, &remote, &[]).unwrap();
        assert_eq!(r.intervals[0].latency_us.as_ref().unwrap().count, 10);
        let w: Vec<_> = r.warnings.iter().filter(|w| w.contains("late")).collect();
        assert!(w.len() == 1 && w[0].contains("[1]"), "{:?}", r.warnings);
    }

    /// Issue #7, item 7: a tcp-bidir -P 2 whose tx flows split 2.1 vs 19.5
    /// Gbit/s reports Jain's index per direction, between directions and
    /// per interval, warns, and shows it in the table.
    #[test]
    fn unequal_sharing_is_measured_and_warned() {
        let mut s = spec("tcp-bidir");
        s.flows = 2;
        let g = 1_000_000_000u64 / 8; // bytes per second of 1 Gbit/s
        let local = SideReport {
            flows: vec![
                flow(0, Direction::Tx, Role::Sender, 0, 1.0),
                flow(1, Direction::Tx, Role::Sender, 0, 1.0),
                flow(2, Direction::Rx, Role::Receiver, 10 * g, 1.0),
                flow(3, Direction::Rx, Role::Receiver, 10 * g, 1.0),
            ],
            window_s: 1.0,
            ..Default::default()
        };
        let remote = SideReport {
            flows: vec![
                flow(0, Direction::Tx, Role::Receiver, 21 * g / 10, 1.0),
                flow(1, Direction::Tx, Role::Receiver, 195 * g / 10, 1.0),
                flow(2, Direction::Rx, Role::Sender, 0, 1.0),
                flow(3, Direction::Rx, Role::Sender, 0, 1.0),
            ],
            window_s: 1.0,
            ..Default::default()
        };
        let li = [sample(0, vec![0, 0, 5 * g, 5 * g], vec![0, 1, 2, 3])];
        let ri = [sample(0, vec![g, 3 * g, 0, 0], vec![0, 1, 2, 3])];
        let r = merged(&s, &local, &li, &remote, &ri).unwrap();
        let tx = &r.summary.directions[0];
        let jain = |x: &[f64]| {
            x.iter().sum::<f64>().powi(2) / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
        };
        assert!(
            (tx.fairness.unwrap() - jain(&[2.1, 19.5])).abs() < 1e-9,
            "{:?}",
            tx.fairness
        );
        assert_eq!(r.summary.directions[1].fairness, Some(1.0));
        let between = r.summary.directions_fairness.unwrap();
        assert!((between - jain(&[21.6, 20.0])).abs() < 1e-9, "{between}");
        let i = &r.intervals[0];
        assert!((i.tx_fairness.unwrap() - jain(&[1.0, 3.0])).abs() < 1e-9, "{i:?}");
        assert_eq!(i.rx_fairness, Some(1.0));
        assert!((i.directions_fairness.unwrap() - jain(&[4.0, 10.0])).abs() < 1e-9);
        let w: Vec<_> = r
            .warnings
            .iter()
            .filter(|w| w.contains("shared unequally"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", r.warnings);
        assert!(
            w[0].starts_with("tx: the 2 flows shared unequally: Jain's fairness index 0.606"),
            "{w:?}"
        );
        let table = netrig_export::table::kit::BARE.render(&r);
        assert!(
            table.contains("over 2 flows; Jain's fairness index 0.606"),
            "{table}"
        );
        assert!(
            table.contains("between directions (tx, rx throughput): Jain's fairness index 0.999"),
            "{table}"
        );
        // One flow: trivially fair, so no figure at all.
        let one = merged(
            &spec("tcp-stream"),
            &SideReport {
                flows: vec![flow(0, Direction::Tx, Role::Sender, 10, 1.0)],
                ..Default::default()
            },
            &[],
            &SideReport {
                flows: vec![flow(0, Direction::Tx, Role::Receiver, 10, 1.0)],
                ..Default::default()
            },
            &[],
        )
        .unwrap();
        assert_eq!(
            (
                one.summary.directions[0].fairness,
                one.summary.directions_fairness
            ),
            (None, None)
        );
    }

    /// Issue #7, item 5: an app-limited delivery rate (tcp-rr at 10
    /// transactions/s) keeps its flag and the table does not print it as a rate.
    #[test]
    fn app_limited_delivery_rate_is_not_shown_as_a_link_rate() {
        let info = |app_limited| netrig_proto::report::measure::TcpInfo {
            state: 1,
            snd_mss: 65483,
            delivery_rate_bps: Some(87_654_000_000),
            delivery_rate_app_limited: app_limited,
            ..Default::default()
        };
        for (flag, shown) in [(Some(true), false), (Some(false), true), (None, true)] {
            let local = SideReport {
                flows: vec![FlowReport {
                    tcp_info: Some(info(flag)),
                    window_transactions: 20,
                    ..flow(0, Direction::Tx, Role::Requester, 20, 2.0)
                }],
                ..Default::default()
            };
            let remote = SideReport {
                flows: vec![flow(0, Direction::Tx, Role::Responder, 20, 2.0)],
                ..Default::default()
            };
            let r = merged(&spec("tcp-rr"), &local, &[], &remote, &[]).unwrap();
            let t = r.flows[0].tcp_info.as_ref().unwrap();
            assert_eq!(t.delivery_rate_app_limited, flag);
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(
                json["flows"][0]["tcp_info"]["delivery_rate_app_limited"],
                serde_json::json!(flag)
            );
            let table = netrig_export::table::kit::BARE.render(&r);
            assert_eq!(table.contains("87654.00"), shown, "{flag:?}: {table}");
            assert_eq!(table.contains("app-limited"), !shown, "{flag:?}: {table}");
        }
    }

    #[test]
    fn spread_median() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 10.0));
    }

    /// Issue #11: an agent stopped for 20 s during a 5 s test gave a 22 s
    /// window and no word about it.
    #[test]
    fn a_window_that_stretched_far_beyond_the_test_is_named() {
        let mut s = spec("tcp-stream");
        s.limit = Limit::Duration { seconds: 5.0 };
        let side = |window_s| SideReport {
            flows: vec![flow(0, Direction::Tx, Role::Sender, 1000, window_s)],
            window_s,
            ..Default::default()
        };
        let (local, remote) = (side(5.0), side(22.0));
        let r = merged(&s, &local, &[], &remote, &[]).unwrap();
        let w: Vec<&String> = r
            .warnings
            .iter()
            .filter(|w| w.contains("stopped or starved"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", r.warnings);
        assert!(
            w[0].starts_with("remote: the measured window lasted 22.00 s for a 5 s test"),
            "{w:?}"
        );
        let r = merged(&s, &local, &[], &side(5.3), &[]).unwrap();
        assert!(
            !r.warnings.iter().any(|w| w.contains("stopped or starved")),
            "{:?}",
            r.warnings
        );
    }
}
