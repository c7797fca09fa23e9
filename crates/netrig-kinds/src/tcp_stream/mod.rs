//! tcp-stream, tcp-maerts and tcp-bidir: TCP byte streams from client to
//! agent (netperf TCP_STREAM), from agent to client (TCP_MAERTS), or both
//! at once on separate connections. One module, three kinds: the kind is
//! the direction.

mod table;
mod workload;

pub use workload::StreamWorkload;

use crate::args::{parse_bytes, CommonArgs, PaceArgs, PaceConfig};
use crate::kind::{Def, KindDef, Planned, Workloads};
use crate::units::{parse_size_or_off, parse_size_u32};
use clap::Args;
use netrig_proto::spec::{KindSpec, StreamOptions, TcpBidirSpec, TcpMaertsSpec, TcpStreamSpec};
use netrig_proto::TestSpec;
use netrig_report::{Side, TableLayout, TestConfig, TestResult};
use std::sync::Arc;

/// The TCP streams' options in the result's config.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct StreamConfig {
    #[serde(flatten)]
    pub pace: PaceConfig,
    /// `-Z`: the senders sent with sendfile(2) from an in-memory file.
    pub zerocopy: bool,
    /// `--skip-rx-copy`: the receivers discarded what they read (MSG_TRUNC).
    pub skip_rx_copy: bool,
    /// `--no-rcvlowat`: the receivers never set SO_RCVLOWAT.
    pub no_rcvlowat: bool,
    /// `--notsent-lowat`, 0 for `off`; null: netrig's default.
    pub notsent_lowat: Option<u32>,
    /// `--msg-zerocopy`: the senders sent with MSG_ZEROCOPY.
    pub msg_zerocopy: bool,
}

/// A TCP stream kind: the three differ in their wire variant alone.
pub struct TcpStreamKind {
    name: &'static str,
    about: &'static str,
    wrap: fn(StreamOptions) -> KindSpec,
    unwrap: fn(&KindSpec) -> Option<&StreamOptions>,
}

pub static TCP_STREAM: Def<TcpStreamKind> = Def(TcpStreamKind {
    name: "tcp-stream",
    about: "TCP stream, client to agent (netperf TCP_STREAM)",
    wrap: |o| KindSpec::TcpStream(TcpStreamSpec(o)),
    unwrap: |t| match t {
        KindSpec::TcpStream(s) => Some(&s.0),
        _ => None,
    },
});
pub static TCP_MAERTS: Def<TcpStreamKind> = Def(TcpStreamKind {
    name: "tcp-maerts",
    about: "TCP stream, agent to client (netperf TCP_MAERTS)",
    wrap: |o| KindSpec::TcpMaerts(TcpMaertsSpec(o)),
    unwrap: |t| match t {
        KindSpec::TcpMaerts(s) => Some(&s.0),
        _ => None,
    },
});
pub static TCP_BIDIR: Def<TcpStreamKind> = Def(TcpStreamKind {
    name: "tcp-bidir",
    about: "TCP streams both ways at once, on separate connections",
    wrap: |o| KindSpec::TcpBidir(TcpBidirSpec(o)),
    unwrap: |t| match t {
        KindSpec::TcpBidir(s) => Some(&s.0),
        _ => None,
    },
});

/// The streams' options on the command line.
#[derive(Debug, Args)]
pub struct StreamArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Send this many bytes per direction (spread over the flows) instead of a timed test.
    #[arg(short = 'n', long = "bytes", value_name = "SIZE", value_parser = parse_bytes, help_heading = "How long")]
    bytes: Option<u64>,
    /// Bytes per send() call: 32, 16K, 1M (K/M/G = 1024-based).
    #[arg(short = 'm', long = "message-size", value_name = "SIZE", default_value = "128K", value_parser = parse_size_u32, help_heading = "Sizes and buffers")]
    message_size: u32,
    /// Bytes per recv() call.
    #[arg(short = 'M', long = "recv-size", value_name = "SIZE", default_value = "128K", value_parser = parse_size_u32, help_heading = "Sizes and buffers")]
    recv_size: u32,
    #[command(flatten)]
    pace: PaceArgs,
    /// Send each message with sendfile(2) from an in-memory file instead of send(2) from a buffer,
    /// as iperf3's -Z: the sending end (the client for tcp-stream, the agent for tcp-maerts, both
    /// for tcp-bidir) skips the copy from user memory. Receivers read as usual.
    #[arg(short = 'Z', long = "zerocopy", help_heading = "TCP")]
    zerocopy: bool,
    /// Receivers discard what they read without copying it to user memory (recv(2) with
    /// MSG_TRUNC), as iperf3's --skip-rx-copy: the receiving end (the agent for tcp-stream, the
    /// client for tcp-maerts, both for tcp-bidir) is spared the copy, which the result says.
    #[arg(long = "skip-rx-copy", help_heading = "TCP")]
    skip_rx_copy: bool,
    /// Senders send with MSG_ZEROCOPY (SO_ZEROCOPY): the kernel takes the buffer's pages instead of
    /// copying them, and notifies each send's completion, saying whether it copied after all
    /// (it always does on loopback and other local delivery); the result counts the sends, the
    /// notices and the copies. Not with -Z.
    #[arg(long = "msg-zerocopy", help_heading = "TCP", conflicts_with = "zerocopy")]
    msg_zerocopy: bool,
    /// Receivers never set SO_RCVLOWAT and are woken for every arrival. By default a receiver
    /// that is ahead of its flow sets it to its read size (-M), so that TCP wakes it once a read's
    /// worth is queued, as a blocking reader is woken (docs/RESULTS.md, "Receivers' reads"): this
    /// is the eager reader it replaced, for comparing the two.
    #[arg(long = "no-rcvlowat", help_heading = "TCP")]
    no_rcvlowat: bool,
    /// TCP_NOTSENT_LOWAT on the senders' sockets: the kernel lets a sender write only while less
    /// than SIZE bytes are unsent, and wakes it when less than half are. `off` sets none (the
    /// host's net.ipv4.tcp_notsent_lowat holds: unlimited by default, the send buffer alone
    /// bounding them). By default an unpaced sender of tcp-bidir keeps two messages (-m), at
    /// least 256K, unsent where the host has no value of its own, and tcp-stream's and
    /// tcp-maerts' set none (docs/RESULTS.md, "Senders' sends"); the result reports each
    /// sender's (`sends.notsent_lowat`).
    #[arg(long = "notsent-lowat", value_name = "SIZE|off", value_parser = parse_size_or_off, help_heading = "TCP")]
    notsent_lowat: Option<u32>,
}

impl KindDef for TcpStreamKind {
    type Args = StreamArgs;
    type Spec = StreamOptions;

    fn name(&self) -> &'static str {
        self.name
    }
    fn about(&self) -> &'static str {
        self.about
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a StreamOptions> {
        (self.unwrap)(test)
    }

    fn plan(&self, a: StreamArgs) -> Result<Planned, String> {
        let options = StreamOptions {
            message_size: a.message_size,
            recv_size: a.recv_size,
            pace: a.pace.pace()?,
            zerocopy: a.zerocopy,
            skip_rx_copy: a.skip_rx_copy,
            msg_zerocopy: a.msg_zerocopy,
            no_rcvlowat: a.no_rcvlowat,
            notsent_lowat: a.notsent_lowat,
            tcp: a.common.tcp(),
        };
        let mut plan = a.common.plan((self.wrap)(options))?;
        a.common.byte_limit(&mut plan, a.bytes)?;
        Ok(plan)
    }

    fn workload(&self, o: &StreamOptions, spec: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(StreamWorkload {
            message_size: o.message_size as usize,
            recv_size: o.recv_size as usize,
            rate_bps: o.pace.as_ref().map(|p| p.rate_bps),
            pacing: o.pace.as_ref().map_or_else(Default::default, |p| p.pacing()),
            zerocopy: o.zerocopy,
            skip_rx_copy: o.skip_rx_copy,
            msg_zerocopy: o.msg_zerocopy,
            rcvlowat: !o.no_rcvlowat,
            notsent_lowat: o.notsent_lowat,
            both_directions: spec.directions().len() > 1,
        }))
    }

    fn config(&self, o: &StreamOptions, c: &mut TestConfig) {
        c.message_size = o.message_size;
        c.recv_size = o.recv_size;
        c.set_kind_part(&StreamConfig {
            pace: PaceConfig::of(o.pace.as_ref()),
            zerocopy: o.zerocopy,
            skip_rx_copy: o.skip_rx_copy,
            no_rcvlowat: o.no_rcvlowat,
            notsent_lowat: o.notsent_lowat,
            msg_zerocopy: o.msg_zerocopy,
        });
    }

    /// A paced sender that fell behind its rate.
    fn warnings(&self, o: &StreamOptions, _: &TestSpec, _: Side<'_>, result: &TestResult) -> Vec<String> {
        let rate = o.pace.as_ref().map(|p| p.rate_bps);
        netrig_report::checks::pace_warnings(rate, &result.summary)
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::TCP_STREAM
    }
}
