//! `--peer`: what the client speaks to its server, one option group every
//! kind with an agent flattens (through [`crate::args::CommonArgs`]), so a
//! kind that cannot be measured against an iperf3 server says so by name
//! rather than clap calling the option unknown.

use clap::Args;
use netrig_proto::spec::KindSpec;
use netrig_report::model::peer::Peer;

/// `--peer`.
#[derive(Debug, Clone, Default, Args)]
pub struct PeerArgs {
    /// What the server at -H is: a netrig agent (netrig), an iperf3 server spoken to in iperf3's
    /// protocol (iperf3: tcp-stream, tcp-maerts, tcp-bidir and udp-stream), or whichever answers
    /// (auto: a server that answers as iperf3 does is spoken to as iperf3, and the result says so).
    #[arg(long = "peer", value_name = "auto|netrig|iperf3", value_parser = Peer::parse, help_heading = "Peer")]
    pub peer: Option<Peer>,
    /// Against an iperf3 server: ask for its own output (its text, or its JSON when it runs with
    /// -J) and keep it in the result (peer.reported), as iperf3's --get-server-output.
    #[arg(long = "get-server-output", help_heading = "Peer")]
    pub get_server_output: bool,
}

impl PeerArgs {
    /// The peer asked for (auto when not given), or why `test` cannot be
    /// run against it.
    pub fn peer(&self, test: &KindSpec) -> Result<Option<Peer>, String> {
        if self.peer == Some(Peer::Iperf3) && !speaks_iperf3(test) {
            return Err(format!(
                "--peer iperf3: {} cannot run against an iperf3 server, which measures streams only \
                 (tcp-stream, tcp-maerts, tcp-bidir, udp-stream); run `netrig serve` there for {}",
                test.name(),
                test.name()
            ));
        }
        Ok(self.peer)
    }
}

/// Whether `test` can be measured against an iperf3 server: the streams
/// iperf3 itself runs (TCP one way, the other, both; UDP either way).
pub fn speaks_iperf3(test: &KindSpec) -> bool {
    matches!(
        test,
        KindSpec::TcpStream(_) | KindSpec::TcpMaerts(_) | KindSpec::TcpBidir(_) | KindSpec::UdpStream(_)
    )
}
