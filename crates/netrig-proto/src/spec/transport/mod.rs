//! The transports a kind's flows run over, one module each, named in the
//! one list below ([`Transport`]). What a transport is, as both ends and the
//! report need to know it, is its [`TransportRules`]: whether it moves
//! datagrams or a byte stream, the IP protocol its sockets are made with,
//! and which of the kernel's counters speak of it. How its sockets are made
//! and read is in netrig-engine's `transport` module, by these rules.
//!
//! A new transport is a new module here, one line in the list, and the
//! kinds whose options choose it.

mod mptcp;
mod tcp;
mod udp;

/// What netrig knows of one transport.
pub trait TransportRules: Sync {
    /// Its name, as the report and errors say it ("tcp", "udp", "mptcp").
    fn name(&self) -> &'static str;
    /// Whether its flows move datagrams (each hello may be lost, each
    /// datagram counted by sequence), rather than a byte stream over a
    /// connection.
    fn datagrams(&self) -> bool;
    /// The IP protocol number its data sockets are made with (IPPROTO_TCP,
    /// IPPROTO_UDP, IPPROTO_MPTCP).
    fn ip_protocol(&self) -> i32;
    /// The option that chose it, for errors that must name it (`--mptcp`);
    /// `None` for the kinds' own transports, which no option chooses.
    fn option(&self) -> Option<&'static str> {
        None
    }
    /// Host-wide counters (`Section.Name`, as /proc/net/snmp and netstat
    /// name them) whose increase during a test of this transport means it may
    /// have lost something, each with what it means. The kernel keeps them
    /// for the whole network namespace, so each is warned of only for tests
    /// of its transport: a UDP drop elsewhere on the host says nothing of a
    /// TCP test, nor a listen overflow of a UDP one (whose one TCP
    /// connection is its control).
    fn loss_counters(&self) -> &'static [(&'static str, &'static str)];
    /// Host counters the witness keeps for a test of this transport beyond
    /// the ones it keeps for every test ([`WITNESS_COUNTERS`]): what shows
    /// the transport itself at work (MPTCP's MPTcpExt).
    fn witness_counters(&self) -> &'static [&'static str] {
        &[]
    }
    /// Of those, the counters of handshakes completed as this transport, at
    /// the end that connects and at the end that accepts (MPTCP's
    /// MP_CAPABLE): the witness bounds the connections a test opens during
    /// its window by them. `None` where TCP's own opens say it all.
    fn handshakes(&self) -> Option<[&'static str; 2]> {
        None
    }
    /// Of those, the counters of connections that fell back to another
    /// transport (MPTCP to TCP): their increase is warned of.
    fn fallbacks(&self) -> &'static [&'static str] {
        &[]
    }
}

/// Host counters the witness keeps for every test: the datagrams and
/// segments its checks bound netrig's counts with.
pub const WITNESS_COUNTERS: &[&str] = &[
    "Udp.InDatagrams",
    "Udp.OutDatagrams",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.InErrors",
    "Udp6.InDatagrams",
    "Udp6.OutDatagrams",
    "Udp6.RcvbufErrors",
    "Udp6.SndbufErrors",
    "Udp6.InErrors",
    "Tcp.InSegs",
    "Tcp.OutSegs",
    "Tcp.RetransSegs",
    "Tcp.ActiveOpens",
    "Tcp.PassiveOpens",
];

/// Writes the transport list: the enum and its dispatch. A new transport is
/// one line here (and its rules in its own module).
macro_rules! transports {
    ($($variant:ident = $rules:path,)*) => {
        /// The transport a kind's flows use.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Transport {
            $($variant,)*
        }

        impl Transport {
            /// Every transport, in the order of the list.
            pub const ALL: &'static [Transport] = &[$(Transport::$variant),*];

            /// The transport's rules.
            pub fn rules(self) -> &'static dyn TransportRules {
                match self {
                    $(Transport::$variant => &$rules,)*
                }
            }
        }
    };
}

transports! {
    Tcp = tcp::Tcp,
    Udp = udp::Udp,
    Mptcp = mptcp::Mptcp,
}

impl Transport {
    /// Whether its flows move datagrams ([`TransportRules::datagrams`]).
    pub fn datagrams(self) -> bool {
        self.rules().datagrams()
    }

    /// Its name ([`TransportRules::name`]).
    pub fn name(self) -> &'static str {
        self.rules().name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_protocols_and_counters_are_each_transports_own() {
        let names: Vec<_> = Transport::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["tcp", "udp", "mptcp"]);
        let protocols: Vec<_> = Transport::ALL.iter().map(|t| t.rules().ip_protocol()).collect();
        assert_eq!(protocols, [6, 17, 262]);
        assert!(Transport::Udp.datagrams() && !Transport::Tcp.datagrams() && !Transport::Mptcp.datagrams());
        // MPTCP's subflows are TCP: TCP's losses are its losses too.
        for c in Transport::Tcp.rules().loss_counters() {
            assert!(Transport::Mptcp.rules().loss_counters().contains(c));
        }
        assert!(Transport::Udp
            .rules()
            .loss_counters()
            .iter()
            .all(|(name, _)| name.starts_with("Udp")));
        assert!(Transport::Mptcp
            .rules()
            .witness_counters()
            .iter()
            .all(|n| n.starts_with("MPTcpExt.")));
        assert_eq!(Transport::Mptcp.rules().option(), Some("--mptcp"));
        let mptcp = Transport::Mptcp.rules();
        let kept = mptcp.witness_counters();
        assert!(mptcp.handshakes().unwrap().iter().all(|c| kept.contains(c)));
        assert!(!mptcp.fallbacks().is_empty() && mptcp.fallbacks().iter().all(|c| kept.contains(c)));
        assert!(
            Transport::Tcp.rules().handshakes().is_none() && Transport::Tcp.rules().fallbacks().is_empty()
        );
    }
}
