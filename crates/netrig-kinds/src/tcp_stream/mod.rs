//! tcp-stream, tcp-maerts and tcp-bidir: TCP byte streams from client to
//! agent (netperf TCP_STREAM), from agent to client (TCP_MAERTS), or both
//! at once on separate connections. One module, three kinds: the kind is
//! the direction.

mod workload;

pub use workload::StreamWorkload;

use crate::args::{parse_bytes, CommonArgs, PaceArgs};
use crate::kind::{Kind, Planned, Workloads};
use crate::units::parse_size_u32;
use clap::{Args, FromArgMatches};
use netrig_proto::spec::{KindSpec, StreamOptions, TcpBidirSpec, TcpMaertsSpec, TcpStreamSpec};
use netrig_proto::TestSpec;
use netrig_report::{table, KindReport, TableLayout, TestConfig};
use std::sync::Arc;

/// A TCP stream kind.
pub struct TcpStreamKind {
    name: &'static str,
    about: &'static str,
    wrap: fn(StreamOptions) -> KindSpec,
}

pub static TCP_STREAM: TcpStreamKind = TcpStreamKind {
    name: "tcp-stream",
    about: "TCP stream, client to agent (netperf TCP_STREAM).",
    wrap: |o| KindSpec::TcpStream(TcpStreamSpec(o)),
};
pub static TCP_MAERTS: TcpStreamKind = TcpStreamKind {
    name: "tcp-maerts",
    about: "TCP stream, agent to client (netperf TCP_MAERTS).",
    wrap: |o| KindSpec::TcpMaerts(TcpMaertsSpec(o)),
};
pub static TCP_BIDIR: TcpStreamKind = TcpStreamKind {
    name: "tcp-bidir",
    about: "TCP streams both ways at once, on separate connections.",
    wrap: |o| KindSpec::TcpBidir(TcpBidirSpec(o)),
};

/// The streams' options on the command line.
#[derive(Debug, Args)]
struct StreamArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Send this many bytes per direction (spread over the flows) instead of a timed test.
    #[arg(short = 'n', long = "bytes", value_parser = parse_bytes)]
    bytes: Option<u64>,
    /// Bytes per send() call: 32, 16K, 1M.
    #[arg(short = 'm', long = "message-size", default_value = "128K", value_parser = parse_size_u32)]
    message_size: u32,
    /// Bytes per recv() call.
    #[arg(short = 'M', long = "recv-size", default_value = "128K", value_parser = parse_size_u32)]
    recv_size: u32,
    #[command(flatten)]
    pace: PaceArgs,
    /// Send each message with sendfile(2) from an in-memory file instead of send(2) from a buffer,
    /// as iperf3's -Z: the sending end (the client for tcp-stream, the agent for tcp-maerts, both
    /// for tcp-bidir) skips the copy from user memory. Receivers read as usual.
    #[arg(short = 'Z', long = "zerocopy")]
    zerocopy: bool,
}

/// The stream options of a spec of any of the three kinds.
fn options(spec: &TestSpec) -> &StreamOptions {
    match &spec.test {
        KindSpec::TcpStream(s) => &s.0,
        KindSpec::TcpMaerts(s) => &s.0,
        KindSpec::TcpBidir(s) => &s.0,
        other => unreachable!("a {} spec given to the TCP streams", other.name()),
    }
}

impl Kind for TcpStreamKind {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn args(&self, cmd: clap::Command) -> clap::Command {
        StreamArgs::augment_args(cmd)
    }

    fn plan(&self, m: &clap::ArgMatches) -> Result<Planned, String> {
        let a = StreamArgs::from_arg_matches(m).map_err(|e| e.to_string())?;
        let options = StreamOptions {
            message_size: a.message_size,
            recv_size: a.recv_size,
            pace: a.pace.pace()?,
            zerocopy: a.zerocopy,
            tcp: a.common.tcp(),
        };
        let mut plan = a.common.plan((self.wrap)(options))?;
        a.common.byte_limit(&mut plan, a.bytes)?;
        Ok(plan)
    }

    fn workload(&self, spec: &TestSpec) -> Workloads {
        let o = options(spec);
        Workloads::Connected(Arc::new(StreamWorkload {
            message_size: o.message_size as usize,
            recv_size: o.recv_size as usize,
            rate_bps: o.pace.as_ref().map(|p| p.rate_bps),
            pacing: o.pace.as_ref().map_or_else(Default::default, |p| p.pacing()),
            zerocopy: o.zerocopy,
        }))
    }
}

impl KindReport for TcpStreamKind {
    fn config(&self, spec: &TestSpec, c: &mut TestConfig) {
        let o = options(spec);
        c.message_size = o.message_size;
        c.recv_size = o.recv_size;
        c.set_pace(o.pace.as_ref());
        c.zerocopy = o.zerocopy;
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::TCP_STREAM
    }
}
