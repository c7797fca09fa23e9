//! syn-flood: netrig's SYN flood generator (netrig-lab's `overload::flood`) as a kind with one
//! end, so that a plan's `[[group]]` runs it from an attacker host beside a probe (tcp-crr) on
//! one time axis. Raw sockets, random sources from the attacker's lab segments, a bounded rate
//! and length; refused outside a lab (netrig-lab's `overload::scope`: this process must run in
//! a lab host's namespace, the target must be another host of that lab). Its result counts the
//! SYNs sent (`summary.transactions`, one a transaction) and their rate per interval; the
//! target host's counters come from `--server-agent` (the server host's view), as for http.

mod table;

use crate::kind::{Ends, KindDef, LocalEnd, OneEnded, Planned, Workloads};
use crate::lab_host::{self, NoAgentEnd, Target};
use crate::units::parse_seconds;
use clap::Args;
use netrig_engine::RunControl;
use netrig_lab::overload::flood;
use netrig_lab::overload::watch::{View, Watch};
use netrig_proto::report::host::{PeakEnd, SocketStates};
use netrig_proto::spec::kind::{SynFloodSpec, MAX_SYN_FLOOD_S};
use netrig_proto::spec::{KindSpec, Limit};
use netrig_proto::TestSpec;
use netrig_report::server_host::ServerHost;
use netrig_report::{IntervalResult, Side, Summary, TableLayout, TestConfig, TestResult};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct SynFlood;

/// How long the target is still watched after the flood.
const SETTLE: Duration = Duration::from_millis(500);

/// The target host's view, read in its namespace by this process (not by an agent): the kernel
/// counter deltas from before the flood to [`SETTLE`] after it, and its sockets on the target
/// port by state, every 100 ms. CPU is not read (the lab's hosts share this machine's CPUs).
fn target_view(r: &flood::Report, v: Result<View, String>) -> ServerHost {
    let name = format!(
        "host {}'s namespace (read by syn-flood itself; sockets on port {} only)",
        r.target_host,
        r.target.port()
    );
    let withheld = |why: String| ServerHost {
        agent: name.clone(),
        window_s: 0.0,
        samples: 0,
        limit_s: None,
        cpu: None,
        busiest_cpu: None,
        cpu_withheld: Some("not read by syn-flood (the lab's hosts share this machine's CPUs)".into()),
        service_demand_us_per_transaction: None,
        service_demand_withheld: Some("not read by syn-flood".into()),
        counters: Default::default(),
        counters_withheld: Some(why.clone()),
        conntrack: None,
        conntrack_withheld: Some("not read by syn-flood".into()),
        sockets: None,
        sockets_withheld: Some(why),
        sysctls: Default::default(),
    };
    let v = match v {
        Ok(v) => v,
        Err(e) => return withheld(format!("the watch of host {} failed: {e}", r.target_host)),
    };
    let end = v.samples.last().map(|s| s.states).unwrap_or_default();
    let pe = |peak: u64, end: u64| PeakEnd { peak, end };
    ServerHost {
        window_s: v.window_s,
        samples: v.samples.len() as u32,
        counters: v.counters.clone(),
        counters_withheld: v.counters_withheld.clone(),
        sockets: v.sockets_withheld.is_none().then(|| SocketStates {
            established: pe(v.peak.established, end.established),
            syn_recv: pe(v.peak.syn_recv, end.syn_recv),
            time_wait: pe(v.peak.time_wait, end.time_wait),
            close_wait: pe(v.peak.close_wait, end.close_wait),
            fin_wait2: pe(v.peak.fin_wait2, end.fin_wait2),
            sockstat_time_wait: None,
            orphan: None,
            partial: false,
        }),
        sockets_withheld: v.sockets_withheld.clone(),
        ..withheld(String::new())
    }
}

/// syn-flood's options.
#[derive(Debug, Args)]
pub struct SynFloodArgs {
    /// SYNs per second (1 to 200000).
    #[arg(
        long = "rate",
        value_name = "PPS",
        default_value_t = 20_000,
        help_heading = "Flood"
    )]
    rate: u32,
    /// Seconds of flood (at most 60).
    #[arg(short = 'l', long = "length", alias = "duration", default_value = "5", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "Flood")]
    length: f64,
    /// Interval samples every SECONDS: SYNs sent per second.
    #[arg(short = 'i', long = "interval", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "Flood")]
    interval: Option<f64>,
}

impl KindDef for SynFlood {
    type Args = SynFloodArgs;
    type Spec = SynFloodSpec;

    fn name(&self) -> &'static str {
        "syn-flood"
    }
    fn about(&self) -> &'static str {
        "a SYN flood from a lab host towards another host of the same lab (raw sockets, random \
         sources from the lab's range, bounded rate and length; refused outside a lab)"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a SynFloodSpec> {
        match test {
            KindSpec::SynFlood(s) => Some(s),
            _ => None,
        }
    }
    fn plan(&self, a: SynFloodArgs) -> Result<Planned, String> {
        if !(a.length > 0.0 && a.length <= MAX_SYN_FLOOD_S) {
            return Err(format!(
                "-l/--length {}: more than 0 and at most {MAX_SYN_FLOOD_S} s (netrig's limit)",
                a.length
            ));
        }
        let spec = TestSpec {
            interval_s: a.interval,
            flows: 1,
            measure_cpu: false,
            ..TestSpec::new(
                KindSpec::SynFlood(SynFloodSpec { rate_pps: a.rate }),
                Limit::Duration { seconds: a.length },
            )
        };
        Planned::one_ended(spec, None)
    }
    fn workload(&self, _: &SynFloodSpec, _: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(NoAgentEnd("syn-flood")))
    }
    fn config(&self, s: &SynFloodSpec, c: &mut TestConfig) {
        c.message_size = netrig_lab::overload::packet::V4_LEN as u32;
        // Nothing is received: the size of what the target answers (a SYN-ACK) is its own.
        c.recv_size = c.message_size;
        c.set_kind_part(&SynFloodConfig {
            rate: Some(f64::from(s.rate_pps)),
        });
    }
    fn warnings(&self, s: &SynFloodSpec, _: &TestSpec, _: Side<'_>, r: &TestResult) -> Vec<String> {
        warnings(s, r)
    }
    fn table(&self) -> &'static dyn TableLayout {
        &table::LAYOUT
    }
    fn ends(&self) -> Ends<'_> {
        Ends::ClientOnly(self)
    }
}

/// syn-flood's options in the result's config.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SynFloodConfig {
    /// SYNs per second asked (`--rate`).
    pub rate: Option<f64>,
}

fn warnings(s: &SynFloodSpec, r: &TestResult) -> Vec<String> {
    let mut w = Vec::new();
    let got = r.summary.transactions_per_s.unwrap_or(0.0);
    if got < 0.9 * f64::from(s.rate_pps) {
        w.push(format!(
            "sent {got:.0} SYNs/s of the {} asked: this host could not send faster (its CPU, or a \
             debug build), so the flood was lighter than asked",
            s.rate_pps
        ));
    }
    w
}

impl OneEnded for SynFlood {
    fn run(
        &self,
        spec: &TestSpec,
        server: SocketAddr,
        _: &LocalEnd,
        ctl: Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, String> {
        let KindSpec::SynFlood(s) = &spec.test else {
            return Err(format!("syn-flood was given a {} spec", spec.kind()));
        };
        let Limit::Duration { seconds } = spec.limit else {
            return Err("syn-flood runs for -l seconds, not to a byte count".into());
        };
        let o = flood::Options {
            to: server,
            rate_pps: s.rate_pps,
            length: Duration::from_secs_f64(seconds),
        };
        flood::check(&o)?;
        // The rule first (the flood checks it again on its own thread): it names the target's
        // host, whose namespace the watch reads.
        let scope = netrig_lab::overload::scope::check_here(server.ip())?;
        let watch = Watch::start(
            &scope.target_host,
            &scope.target_ns,
            server.port(),
            None,
            o.length + SETTLE + Duration::from_secs(5),
            false,
        );
        let r = lab_host::run_stoppable(&ctl, move |stop| flood::run(&o, stop))
            .map_err(|_| "the flood's thread panicked".to_string());
        let r = match r {
            Ok(Ok(r)) => r,
            Ok(Err(e)) | Err(e) => {
                let _ = watch.finish();
                return Err(e);
            }
        };
        if ctl.abort_reason().is_none() {
            std::thread::sleep(SETTLE);
        }
        let view = watch.finish();
        let intervals = regroup(&r.intervals, spec.interval_s);
        for i in &intervals {
            observer(i);
        }
        let mut result = assemble(spec, s, server, &r, intervals);
        result.server_host = Some(target_view(&r, view));
        result.warnings.extend(warnings(s, &result));
        Ok(result)
    }
}

/// The flood's 250 ms counts, summed into intervals of `every` seconds (none without `-i`).
fn regroup(parts: &[flood::Interval], every: Option<f64>) -> Vec<IntervalResult> {
    let Some(every) = every.filter(|e| *e > 0.0) else {
        return Vec::new();
    };
    let mut out: Vec<IntervalResult> = Vec::new();
    let (mut start, mut end, mut sent) = (0.0, 0.0, 0u64);
    let flush = |out: &mut Vec<IntervalResult>, start: f64, end: f64, sent: u64| {
        let d = end - start;
        out.push(IntervalResult {
            index: out.len() as u32,
            start_s: start,
            end_s: end,
            bytes: sent * flood_len(),
            throughput_bps: netrig_report::bps(sent * flood_len(), d),
            tx_throughput_bps: Some(netrig_report::bps(sent * flood_len(), d)),
            rx_throughput_bps: None,
            tx_fairness: None,
            rx_fairness: None,
            directions_fairness: None,
            transactions_per_s: Some(if d > 0.0 { sent as f64 / d } else { 0.0 }),
            retransmits: None,
            udp: None,
            failed_transactions: None,
            latency_us: None,
            flows: Vec::new(),
        });
    };
    for p in parts {
        if p.end_s - start > every + 1e-9 && end > start {
            flush(&mut out, start, end, sent);
            start = end;
            sent = 0;
        }
        end = p.end_s;
        sent += p.sent;
    }
    if end > start {
        flush(&mut out, start, end, sent);
    }
    out
}

fn flood_len() -> u64 {
    netrig_lab::overload::packet::V4_LEN as u64
}

fn assemble(
    spec: &TestSpec,
    _s: &SynFloodSpec,
    server: SocketAddr,
    r: &flood::Report,
    intervals: Vec<IntervalResult>,
) -> TestResult {
    let size = if server.is_ipv4() {
        netrig_lab::overload::packet::V4_LEN
    } else {
        netrig_lab::overload::packet::V6_LEN
    } as u64;
    let bytes = r.sent * size;
    let summary = Summary {
        throughput_bps: netrig_report::bps(bytes, r.window_s),
        bytes,
        tx_throughput_bps: Some(netrig_report::bps(bytes, r.window_s)),
        // One SYN a transaction: what a group's plot of rates follows.
        transactions: Some(r.sent),
        transactions_per_s: Some(r.rate_pps),
        ..lab_host::summary(r.window_s, "syn-flood does not measure this host's CPU")
    };
    let target = Target {
        to: server,
        host: &r.target_host,
        lab: &r.lab,
    };
    let mut config = target.config(spec, &crate::kind::Def(SynFlood));
    config.message_size = size as u32;
    let mut warnings = vec![format!(
        "syn-flood from host {} of lab {} to host {} ({}): sources random in {}; {} send error(s){}",
        r.host,
        r.lab,
        r.target_host,
        r.target,
        r.sources.join(", "),
        r.send_errors,
        r.first_error
            .as_deref()
            .map(|e| format!(", the first: {e}"))
            .unwrap_or_default()
    )];
    warnings.retain(|_| r.send_errors > 0);
    TestResult {
        warnings,
        intervals,
        started_unix_s: Some(r.started_unix_s),
        ..target.result("syn-flood", config, summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(n: usize) -> Vec<flood::Interval> {
        (0..n)
            .map(|k| flood::Interval {
                start_s: k as f64 * 0.25,
                end_s: (k + 1) as f64 * 0.25,
                sent: 100,
                pps: 400.0,
            })
            .collect()
    }

    #[test]
    fn the_floods_counts_are_summed_into_the_intervals_asked() {
        assert!(regroup(&parts(8), None).is_empty());
        let iv = regroup(&parts(8), Some(0.5));
        assert_eq!(iv.len(), 4);
        for i in &iv {
            assert!((i.end_s - i.start_s - 0.5).abs() < 1e-9, "{i:?}");
            assert!((i.transactions_per_s.unwrap() - 400.0).abs() < 1e-6);
        }
        let iv = regroup(&parts(6), Some(1.0));
        assert_eq!(iv.len(), 2);
        assert_eq!(iv[1].start_s, 1.0);
        assert!((iv[1].end_s - 1.5).abs() < 1e-9);
    }
}
