//! The one list of test kinds: the CLI's subcommands, the agent's
//! workloads and the reports all look a kind up here.

use crate::kind::Kind;
use netrig_proto::TestSpec;

/// Every kind, in the order `--help` lists them. A new kind is one line here.
static KINDS: &[&dyn Kind] = &[
    &crate::tcp_stream::TCP_STREAM,
    &crate::tcp_stream::TCP_MAERTS,
    &crate::tcp_stream::TCP_BIDIR,
    &crate::tcp_rr::TcpRr,
    &crate::tcp_crr::TcpCrr,
    &crate::udp_stream::UdpStream,
    &crate::udp_rr::UdpRr,
];

/// Every kind.
pub fn all() -> &'static [&'static dyn Kind] {
    KINDS
}

/// The kind named `name` ("tcp-rr"), if this build has it.
pub fn by_name(name: &str) -> Option<&'static dyn Kind> {
    KINDS.iter().copied().find(|k| k.name() == name)
}

/// The kind of `spec`. Every kind the wire can name has its module here
/// (a test checks that), so the lookup cannot fail.
pub fn of(spec: &TestSpec) -> &'static dyn Kind {
    by_name(spec.kind()).unwrap_or_else(|| unreachable!("the wire kind {} has no module", spec.kind()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::KindSpec;

    /// The wire's list and this one name the same kinds, once each.
    #[test]
    fn every_wire_kind_has_one_module() {
        let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "a kind listed twice: {names:?}");
        let mut wire = KindSpec::NAMES.to_vec();
        wire.sort_unstable();
        assert_eq!(sorted, wire);
    }
}
