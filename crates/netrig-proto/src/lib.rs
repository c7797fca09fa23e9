//! The netrig control protocol, without I/O.
//!
//! Everything here is pure: byte slices in, messages out; time is passed in
//! as an argument. The agent and the client put these pieces on sockets
//! (see [`conn`] for the one small blocking adapter both use), and tests
//! drive the state machines with a virtual clock.
//!
//! The wire format is described in `docs/PROTOCOL.md`.

pub mod auth;
pub mod clock;
pub mod conn;
mod convert;
pub mod datagram;
pub mod error;
pub mod frame;
pub mod initiate;
pub mod iperf3;
pub mod message;
pub mod neighbour;
pub mod preamble;
pub mod report;
pub mod session;
pub mod spec;

pub use datagram::DatagramHeader;
pub use error::ProtoError;
pub use frame::{encode_frame, FrameDecoder, MAX_CLIENT_FRAME_LEN, MAX_FRAME_LEN};
pub use message::{AgentLimits, AgentMsg, ClientMsg};
pub use preamble::{ControlPreamble, DataHello, SessionCookie, CONTROL_MAGIC, DATA_MAGIC};
pub use spec::{Direction, KindSpec, SpecError, TestSpec};

/// The protocol version this build speaks best.
pub const PROTOCOL_VERSION: u16 = 8;
/// The oldest protocol version this build still speaks.
///
/// Version 3 split the spec into the part every test has and a part tagged
/// with its kind (`spec.test`), which holds only that kind's options: a
/// version-2 spec does not parse as a version-3 one, so version 2 is no
/// longer spoken (peers of different versions are told so by name at the
/// handshake).
///
/// Version 4 brought authentication (see [`auth`]): the welcome carries a
/// nonce and the agent's key, the hello the client's, and the agent answers
/// it (`hello_accepted`). A version-3 hello has no nonce to sign, so
/// version 3 is no longer spoken either: a client and an agent of different
/// versions are told so at the preamble, never silently unauthenticated.
///
/// Version 5 added heartbeats during a test ([`message::HEARTBEAT`]) and the
/// welcome's `max_rate_bps`; it still speaks 4 with a peer that knows no
/// better (then neither end sends heartbeats, and neither expects them).
///
/// Version 6 added the watch of the agent's host (`watch_start`,
/// `watch_end`, [`report::host::HostView`]), for kinds with one end whose
/// server runs beside an agent. Versions 4 and 5 are still spoken: a client
/// asks an agent of either for no watch, and says why
/// ([`message::WATCH_VERSION`]).
///
/// Version 7 added the clock probe (`clock_probe`, `clock_echo`;
/// [`clock::CLOCK_PROBE_VERSION`]): a client measures the offset of an agent's
/// clock on another kernel for one-way delay. Older versions are still
/// spoken: their one-way delay between kernels is withheld, saying why.
///
/// Version 8 added agent-to-agent tests (`initiate`, `initiate_done`, `initiate_rejected`;
/// [`initiate`]) and the welcome's `name`. Older versions are still spoken: an asker tells
/// the user that such an agent cannot initiate.
pub const MIN_PROTOCOL_VERSION: u16 = 4;
/// The agent's default TCP port, for control and data connections alike.
///
/// Chosen to clash with neither netperf (12865), neper (12866), iperf3 (5201),
/// iperf2 (5001), nuttcp (5000/5101) nor sockperf (11111). It spells NETR on
/// a phone keypad.
pub const DEFAULT_PORT: u16 = 6387;
/// The software version, sent in the handshake so that mismatches can name it.
pub const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Picks the highest protocol version both ranges contain.
pub fn negotiate(ours: (u16, u16), theirs: (u16, u16)) -> Option<u16> {
    let lo = ours.0.max(theirs.0);
    let hi = ours.1.min(theirs.1);
    (lo <= hi).then_some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_picks_highest_common_version() {
        assert_eq!(negotiate((1, 3), (2, 5)), Some(3));
        assert_eq!(negotiate((1, 1), (1, 1)), Some(1));
        assert_eq!(negotiate((1, 1), (2, 2)), None);
        assert_eq!(negotiate((3, 4), (1, 2)), None);
    }
}
