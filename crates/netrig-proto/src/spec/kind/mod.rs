//! The kind-specific part of a spec: one type per kind, each in its own
//! file, named in the one list below ([`KindSpec`]). On the wire it is an
//! object tagged with the kind's name: `{"kind": "tcp-rr", "transactions":
//! {...}, "tcp": {...}}`.
//!
//! What netrig does with a kind beyond its wire form (its workload, its
//! command line, its summary and table) lives in the kind's folder of the
//! netrig-kinds crate.

mod half_close;
mod http;
mod syn_flood;
mod tcp_cc;
mod tcp_crr;
mod tcp_rr;
mod tcp_stream;
mod udp_rr;
mod udp_stream;

pub use half_close::{
    HalfCloseHow, HalfCloseSpec, MAX_HALF_CLOSE_CONNECTIONS, MAX_HALF_CLOSE_REQUEST, MAX_HALF_CLOSE_WATCH_S,
};
pub use http::{
    HttpLoad, HttpMethod, HttpSpec, HttpTls, DEFAULT_HTTP_TIMEOUT_S, DEFAULT_MAX_BODY, DEFAULT_MAX_HEADER,
    HTTP_HEADER_RANGE, HTTP_TIMEOUT_RANGE_S, MAX_HTTP_BODY, MAX_HTTP_HEADERS, MAX_HTTP_LINE,
    MAX_HTTP_REQUESTS,
};
pub use syn_flood::{SynFloodSpec, MAX_SYN_FLOOD_RATE, MAX_SYN_FLOOD_S};
pub use tcp_cc::TcpCcSpec;
pub use tcp_crr::{CloseFirst, PortRange, TcpCrrSpec};
pub use tcp_rr::{Load, TcpRrSpec, Transactions};
pub use tcp_stream::{StreamOptions, TcpBidirSpec, TcpMaertsSpec, TcpStreamSpec, MAX_NOTSENT_LOWAT};
pub use udp_rr::UdpRrSpec;
pub use udp_stream::{DatagramFormat, UdpStreamSpec};

use super::{Bounds, Direction, SpecError};
use crate::report::Role;
use serde::{Deserialize, Serialize};

pub use super::transport::Transport;

/// How a kind's flows move data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// A byte stream (or datagrams) one way per flow; receivers count.
    Stream,
    /// Request/response on connections (or sockets) opened at set-up; the
    /// requester (the client) counts transactions.
    Transactions,
    /// Request/response with a new connection per transaction, opened
    /// during the run: no data connection at set-up.
    ConnectionPerTransaction,
}

impl Exchange {
    /// Whether this exchange counts transactions rather than a byte stream.
    pub fn is_transactional(self) -> bool {
        self != Exchange::Stream
    }

    /// What one end does with a flow going `direction`.
    pub fn role(self, direction: Direction, at_agent: bool) -> Role {
        if self.is_transactional() {
            return if at_agent {
                Role::Responder
            } else {
                Role::Requester
            };
        }
        match (direction, at_agent) {
            (Direction::Tx, false) | (Direction::Rx, true) => Role::Sender,
            (Direction::Tx, true) | (Direction::Rx, false) => Role::Receiver,
        }
    }
}

/// What the protocol and both ends need to know of a kind's spec: the
/// shape of its flows and the bounds of its options.
pub trait KindRules {
    /// The directions its flows move data in, seen from the client.
    /// Request/response flows count as `tx`: the client initiates every
    /// transaction.
    fn directions(&self) -> &'static [Direction];
    fn transport(&self) -> Transport;
    fn exchange(&self) -> Exchange;
    /// Whether it can run to a byte count (`-n`) as well as for a time.
    fn counts_bytes(&self) -> bool {
        false
    }
    /// Options for the agent's end of its TCP connections.
    fn tcp(&self) -> Option<&TcpOptions> {
        None
    }
    /// Most transactions (or, for a connection per transaction, connections)
    /// one flow may have in flight: a closed loop's burst, or the backlog an
    /// open-loop schedule may build; 1 for streams.
    fn in_flight(&self) -> u32 {
        1
    }
    /// The payload of its datagrams, for UDP kinds: every datagram of a
    /// UDP stream has it; request/response datagrams at most it.
    fn datagram_size(&self) -> Option<u32> {
        None
    }
    /// The most payload one send and one receive call of a flow move
    /// (`-m`, `-M` for the streams): what may be in flight at a window's
    /// edge, which the witness allows for.
    fn call_sizes(&self) -> (u32, u32);
    /// Request and response payload, for request/response kinds whose
    /// flows keep one connection (tcp-rr): with [`KindRules::in_flight`],
    /// the most a flow's count may lag its socket's (the witness's tolerance).
    fn transaction_sizes(&self) -> Option<(u32, u32)> {
        None
    }
    /// For UDP request/response: the datagram payload (netrig's header
    /// included) of a request and of the agent's answer to it, which the
    /// agent's `--max-amplification` bounds the ratio of.
    fn udp_answer(&self) -> Option<(u32, u32)> {
        None
    }
    /// Bounds on its own options.
    fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError>;
    /// At most how many bytes of buffers one worker allocates for it.
    fn worker_buffer_bytes(&self) -> u64;
    /// The payload rate one flow offers, as far as its options state it:
    /// what an agent's `--max-rate` is checked against.
    fn offered(&self) -> Offered;
    /// Its options as checks that know no kind read them, each with the
    /// bound netrig holds it to (what the fuzz targets assert of every spec
    /// an agent accepted).
    fn bounds(&self) -> KindBounds<'_>;
}

/// A kind's options for checks that know no kind: the parts it has, each
/// of its own numbers and texts with its bound, and what its workers may
/// allocate. What [`KindRules::check`] accepts must be within them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindBounds<'a> {
    /// Its requests and responses (sizes, load).
    pub transactions: Option<&'a Transactions>,
    /// Its sending rate.
    pub pace: Option<&'a crate::spec::Pace>,
    /// Its transaction timeout (`--timeout`) and the duration it makes.
    pub timeout: Option<(Option<f64>, std::time::Duration)>,
    /// The sizes its send and receive calls take, as its options set them
    /// ([`KindRules::call_sizes`] must be these).
    pub calls: Option<(u32, u32)>,
    /// Message sizes: each 1 to the largest message the agent takes.
    pub sizes: Vec<(&'static str, u32)>,
    /// Other numbers, each within its range: the option, its value, the
    /// least and the most it may be.
    pub ranges: Vec<(&'static str, f64, f64, f64)>,
    /// Texts that go on a protocol line as they are: the option, the text,
    /// the most bytes it may have (and at least 1, no line break), and what
    /// else it must be.
    pub lines: Vec<(&'static str, &'a str, usize, Line)>,
    /// The most a worker allocates ([`KindRules::worker_buffer_bytes`]):
    /// so many of the largest message the agent takes, and so many bytes
    /// besides.
    pub buffers: (u64, u64),
}

/// What a text of [`KindBounds::lines`] must be beyond its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Anything.
    Text,
    /// An HTTP request target: a path ('/...', no space) or "*".
    Target,
    /// An HTTP header: "Name: value".
    Header,
}

impl KindBounds<'_> {
    /// The smallest number above 0, as the least of a range that excludes 0.
    pub const ABOVE_ZERO: f64 = f64::from_bits(1);
}

/// The payload rate one flow of a test offers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Offered {
    /// Paced at these bits/s toward the agent and from it, set by `option`.
    Paced {
        to_agent: f64,
        from_agent: f64,
        option: &'static str,
    },
    /// As fast as the path takes (`option` not given).
    Unpaced { option: &'static str },
    /// Every message answers one from the other end (closed-loop
    /// request/response): a fixed number in flight, clocked by the path like
    /// a TCP window, so no rate to state.
    SelfClocked,
}

impl Offered {
    /// A stream flow's rate in the directions `directions` it moves data.
    pub fn stream(pace: Option<&crate::spec::Pace>, directions: &[Direction]) -> Offered {
        let Some(p) = pace else {
            return Offered::Unpaced {
                option: "-b/--bitrate",
            };
        };
        let rate = p.rate_bps as f64;
        let has = |d: Direction| if directions.contains(&d) { rate } else { 0.0 };
        Offered::Paced {
            to_agent: has(Direction::Tx),
            from_agent: has(Direction::Rx),
            option: "-b/--bitrate",
        }
    }

    /// A request/response flow's: requests toward the agent, responses from it.
    pub fn transactions(t: &Transactions) -> Offered {
        match t.rate() {
            None => Offered::SelfClocked,
            Some(rate) => Offered::Paced {
                to_agent: rate * f64::from(t.request_size) * 8.0,
                from_agent: rate * f64::from(t.response_size) * 8.0,
                option: "--rate",
            },
        }
    }
}

/// Writes the kind list: the wire enum and its dispatch. A new kind is one
/// line here (and its type in its own file).
macro_rules! kinds {
    ($($variant:ident($ty:ty) = $name:literal,)*) => {
        /// A test's kind with its own options.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum KindSpec {
            $(#[serde(rename = $name)] $variant($ty),)*
        }

        impl KindSpec {
            /// Every kind's name, in the order of the list.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The kind's name: the CLI subcommand and the result's `test`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(KindSpec::$variant(_) => $name,)*
                }
            }

            /// The kind's rules.
            pub fn rules(&self) -> &dyn KindRules {
                match self {
                    $(KindSpec::$variant(s) => s,)*
                }
            }
        }
    };
}

kinds! {
    TcpStream(TcpStreamSpec) = "tcp-stream",
    TcpMaerts(TcpMaertsSpec) = "tcp-maerts",
    TcpBidir(TcpBidirSpec) = "tcp-bidir",
    TcpRr(TcpRrSpec) = "tcp-rr",
    TcpCrr(TcpCrrSpec) = "tcp-crr",
    TcpCc(TcpCcSpec) = "tcp-cc",
    UdpStream(UdpStreamSpec) = "udp-stream",
    UdpRr(UdpRrSpec) = "udp-rr",
    Http(HttpSpec) = "http",
    SynFlood(SynFloodSpec) = "syn-flood",
    HalfClose(HalfCloseSpec) = "half-close",
}

/// TCP options for the agent's end of a TCP kind's connections (the client
/// applies its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpOptions {
    /// TCP_NODELAY.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodelay: bool,
    /// TCP_CONGESTION algorithm name.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::congestion"
    )]
    pub congestion: Option<String>,
    /// `--mptcp`: the data connections are MPTCP (IPPROTO_MPTCP) at both
    /// ends, for the kinds whose options these are (not http's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mptcp: bool,
}

impl TcpOptions {
    /// The transport these options choose: MPTCP with `--mptcp`, else TCP.
    pub fn transport(&self) -> Transport {
        if self.mptcp {
            Transport::Mptcp
        } else {
            Transport::Tcp
        }
    }

    pub fn check(&self) -> Result<(), SpecError> {
        match &self.congestion {
            Some(cc) if !valid_congestion(cc) => Err(super::out_of_range(
                "--cc",
                format!("{cc:?}"),
                "an algorithm name of 1-15 letters, digits, '_' or '-'",
            )),
            _ => Ok(()),
        }
    }
}

/// A congestion-control name as the kernel takes it (TCP_CA_NAME_MAX 16).
pub fn valid_congestion(cc: &str) -> bool {
    !cc.is_empty()
        && cc.len() <= 15
        && cc
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A rate as people write it: "950 Mbit/s", "1.5 Gbit/s".
pub fn format_bps(bps: f64) -> String {
    let (v, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}
