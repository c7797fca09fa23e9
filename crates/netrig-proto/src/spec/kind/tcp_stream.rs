//! tcp-stream, tcp-maerts and tcp-bidir: TCP byte streams, one way or both.

use super::{Exchange, KindBounds, KindRules, TcpOptions, Transport};
use crate::spec::{is_default, out_of_range, Bounds, Direction, Pace, SpecError};
use serde::{Deserialize, Serialize};

/// The largest `--notsent-lowat`: 1 GiB, beyond any send buffer the kernel grants.
pub const MAX_NOTSENT_LOWAT: u32 = 1 << 30;

/// The options of the TCP streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// Bytes per send() call (`-m`).
    pub message_size: u32,
    /// Bytes per recv() call (`-M`).
    pub recv_size: u32,
    /// Sending rate per flow (`-b`, `--pacing-us`); `None`: as fast as possible.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::pace"
    )]
    pub pace: Option<Pace>,
    /// `-Z`: whichever end sends sends each message with sendfile(2) from an
    /// in-memory file instead of send(2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zerocopy: bool,
    /// `--skip-rx-copy`: whichever end receives discards what it reads,
    /// recv(2) with MSG_TRUNC, without copying it to user memory (iperf3's
    /// `--skip-rx-copy`). An agent that does not know it refuses the spec (the
    /// options deny unknown fields), so a result never claims it falsely.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_rx_copy: bool,
    /// `--msg-zerocopy`: whichever end sends sends with MSG_ZEROCOPY
    /// (SO_ZEROCOPY), the kernel taking the buffer's pages instead of a copy
    /// until it notifies their completion. Not with `zerocopy`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub msg_zerocopy: bool,
    /// `--no-rcvlowat`: receivers never set SO_RCVLOWAT, and are woken for
    /// every arrival, where by default one that is ahead of its flow waits
    /// for a read's worth (the engine's `lowat`). An agent that does not
    /// know it refuses the spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_rcvlowat: bool,
    /// `--notsent-lowat`: TCP_NOTSENT_LOWAT on the senders' sockets, in
    /// bytes; `Some(0)`: never set (the host's net.ipv4.tcp_notsent_lowat
    /// holds); `None`: netrig's default (the engine's `notsent`: two
    /// messages, at least 256 KiB, for unpaced senders of tcp-bidir where
    /// the host has no value of its own; none one way). An agent that does
    /// not know it refuses the spec.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::notsent_lowat"
    )]
    pub notsent_lowat: Option<u32>,
    /// The agent's TCP options.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tcp: TcpOptions,
}

impl Default for StreamOptions {
    /// 128 KiB sends and receives, unpaced.
    fn default() -> Self {
        StreamOptions {
            message_size: 128 * 1024,
            recv_size: 128 * 1024,
            pace: None,
            zerocopy: false,
            skip_rx_copy: false,
            msg_zerocopy: false,
            no_rcvlowat: false,
            notsent_lowat: None,
            tcp: TcpOptions::default(),
        }
    }
}

impl StreamOptions {
    fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError> {
        b.size("-m/--message-size", self.message_size, self.message_size)?;
        b.size("-M/--recv-size", self.recv_size, self.recv_size)?;
        b.pace(self.pace.as_ref())?;
        if self.zerocopy && self.msg_zerocopy {
            return Err(SpecError::Invalid {
                option: "--msg-zerocopy",
                value: "with -Z/--zerocopy".into(),
                rule: "a sender sends with sendfile(2) or with MSG_ZEROCOPY, not both".into(),
            });
        }
        if let Some(v) = self.notsent_lowat.filter(|&v| v > MAX_NOTSENT_LOWAT) {
            return Err(out_of_range(
                "--notsent-lowat",
                v,
                format!("0 (off) or 1..={MAX_NOTSENT_LOWAT} bytes"),
            ));
        }
        self.tcp.check()
    }

    /// A send and a receive buffer (and as much again for `-Z`'s in-memory file).
    fn worker_buffer_bytes(&self) -> u64 {
        let (m, r) = (u64::from(self.message_size), u64::from(self.recv_size));
        m * if self.zerocopy { 2 } else { 1 } + r
    }

    /// Its sizes and rate; a message of each size (two sends' with `-Z`).
    fn bounds(&self) -> KindBounds<'_> {
        KindBounds {
            pace: self.pace.as_ref(),
            calls: Some((self.message_size, self.recv_size)),
            sizes: vec![("-m", self.message_size), ("-M", self.recv_size)],
            buffers: (if self.zerocopy { 3 } else { 2 }, 0),
            ..KindBounds::default()
        }
    }
}

/// One wire type per stream kind around the same options: the kind is the
/// direction.
macro_rules! stream_kind {
    ($(#[$doc:meta])* $ty:ident, $dirs:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $ty(pub StreamOptions);

        impl KindRules for $ty {
            fn directions(&self) -> &'static [Direction] {
                $dirs
            }
            fn transport(&self) -> Transport {
                self.0.tcp.transport()
            }
            fn exchange(&self) -> Exchange {
                Exchange::Stream
            }
            fn counts_bytes(&self) -> bool {
                true
            }
            fn tcp(&self) -> Option<&TcpOptions> {
                Some(&self.0.tcp)
            }
            fn call_sizes(&self) -> (u32, u32) {
                (self.0.message_size, self.0.recv_size)
            }
            fn check(&self, b: &Bounds<'_>) -> Result<(), SpecError> {
                self.0.check(b)
            }
            fn worker_buffer_bytes(&self) -> u64 {
                self.0.worker_buffer_bytes()
            }
            fn bounds(&self) -> KindBounds<'_> {
                self.0.bounds()
            }
            fn offered(&self) -> super::Offered {
                super::Offered::stream(self.0.pace.as_ref(), $dirs)
            }
        }
    };
}

stream_kind!(
    /// tcp-stream: client to agent (netperf TCP_STREAM).
    TcpStreamSpec,
    &[Direction::Tx]
);
stream_kind!(
    /// tcp-maerts: agent to client (netperf TCP_MAERTS).
    TcpMaertsSpec,
    &[Direction::Rx]
);
stream_kind!(
    /// tcp-bidir: both at once, on separate connections.
    TcpBidirSpec,
    &[Direction::Tx, Direction::Rx]
);
