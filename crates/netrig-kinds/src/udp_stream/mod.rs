//! udp-stream: datagrams at a set rate, client to agent or (`-R`) agent to
//! client: loss, jitter, reordering and duplicates (iperf3 -u), with UDP
//! GSO/GRO unless `--no-gso`.

mod datagram;
mod table;
#[cfg(test)]
mod tests;
mod workload;

pub use workload::UdpStreamWorkload;

use crate::args::{CommonArgs, PaceArgs, PaceConfig};
use crate::kind::{KindDef, Planned, Workloads};
use crate::units::parse_size_u32;
use clap::Args;
use netrig_proto::spec::{DatagramFormat, KindSpec, UdpStreamSpec};
use netrig_proto::TestSpec;
use netrig_report::{Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

pub struct UdpStream;

/// udp-stream's options in the result's config.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UdpStreamConfig {
    /// True when `-m` was not given and netrig chose the datagram size for
    /// the path to the agent (the client sets it); false when `-m` was given.
    pub message_size_default: Option<bool>,
    #[serde(flatten)]
    pub pace: PaceConfig,
    /// `-b` in bits/s (null: as fast as possible): the same as `rate_bps`,
    /// kept for scripts written before TCP streams took `-b`.
    pub udp_rate_bps: Option<u64>,
    /// `-R`: agent to client.
    pub reverse: Option<bool>,
}

/// udp-stream's options on the command line.
#[derive(Debug, Args)]
pub struct UdpArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Datagram size in bytes (UDP payload, at least 28: each carries a header). Default: the
    /// largest payload of one unfragmented datagram on the path to the agent, at most an Ethernet
    /// frame's (1472 bytes over IPv4, 1452 over IPv6; e.g. 1232 over IPv6 on a 1280-byte MTU path).
    #[arg(short = 'm', long = "message-size", value_name = "SIZE", value_parser = parse_size_u32, help_heading = "Sizes and buffers")]
    message_size: Option<u32>,
    #[command(flatten)]
    pace: PaceArgs,
    /// Reverse: the agent sends, the client receives.
    #[arg(short = 'R', long = "reverse", help_heading = "Rate")]
    reverse: bool,
    /// Every datagram a message of its own, without UDP GSO/GRO (as iperf3 does; for paths where
    /// offload would not happen or to measure per-datagram cost): paced, one send(2) per datagram;
    /// unpaced, up to 64 separate datagrams per sendmmsg(2), jitter then taken between each call's
    /// first datagrams.
    #[arg(long = "no-gso", help_heading = "Rate")]
    no_gso: bool,
}

impl KindDef for UdpStream {
    type Args = UdpArgs;
    type Spec = UdpStreamSpec;

    fn name(&self) -> &'static str {
        "udp-stream"
    }
    fn about(&self) -> &'static str {
        "UDP datagrams at a set rate: loss, jitter, reordering, duplicates (iperf3 -u)"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a UdpStreamSpec> {
        match test {
            KindSpec::UdpStream(s) => Some(s),
            _ => None,
        }
    }

    fn plan(&self, a: UdpArgs) -> Result<Planned, String> {
        let mut plan = a.common.plan(KindSpec::UdpStream(UdpStreamSpec {
            // Without -m the client sizes datagrams for the path once
            // connected; an Ethernet-sized one stands in for the checks.
            datagram_size: a.message_size.unwrap_or(1472),
            pace: a.pace.pace()?,
            reverse: a.reverse,
            no_gso: a.no_gso,
            datagram: DatagramFormat::Netrig,
        }))?;
        plan.fit_to_path = a.message_size.is_none();
        Ok(plan)
    }

    fn workload(&self, s: &UdpStreamSpec, _: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(UdpStreamWorkload {
            size: s.datagram_size as usize,
            rate_bps: s.pace.as_ref().map(|p| p.rate_bps),
            offload: !s.no_gso,
            pacing: s.pace.as_ref().map_or_else(Default::default, |p| p.pacing()),
            datagram: s.datagram,
        }))
    }

    /// The largest unfragmented datagram of the path (the agent's datagrams
    /// of `-R` take the same path back).
    fn fit_to_path(&self, s: &UdpStreamSpec, spec: &TestSpec, payload: u32) -> Option<TestSpec> {
        Some(TestSpec {
            test: KindSpec::UdpStream(UdpStreamSpec {
                datagram_size: payload,
                ..s.clone()
            }),
            ..spec.clone()
        })
    }

    fn config(&self, s: &UdpStreamSpec, c: &mut TestConfig) {
        c.message_size = s.datagram_size;
        c.recv_size = s.datagram_size;
        let pace = PaceConfig::of(s.pace.as_ref());
        c.set_kind_part(&UdpStreamConfig {
            // The client says so when it chose the size for the path.
            message_size_default: Some(false),
            udp_rate_bps: pace.rate_bps,
            pace,
            reverse: Some(s.reverse),
        });
    }

    fn batches_datagrams(&self, s: &UdpStreamSpec) -> bool {
        !s.no_gso
    }

    fn warnings(&self, s: &UdpStreamSpec, spec: &TestSpec, _: Side<'_>, result: &TestResult) -> Vec<String> {
        let mut w: Vec<String> = pacing_rate_warning(spec, result).into_iter().collect();
        let rate = s.pace.as_ref().map(|p| p.rate_bps);
        w.extend(netrig_report::checks::pace_warnings(rate, &result.summary));
        w
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::UDP_STREAM
    }
}

/// `--max-pacing-rate` on a UDP kind: the kernel paces UDP only under fq.
pub(crate) fn pacing_rate_warning(spec: &TestSpec, result: &TestResult) -> Option<String> {
    (spec.remote.max_pacing_rate_bps.is_some() || result.config.local.max_pacing_rate_bps.is_some()).then(
        || {
            "--max-pacing-rate paces UDP only where the fq qdisc is on the sending interface (TCP paces by \
         itself); elsewhere use -b"
                .into()
        },
    )
}
