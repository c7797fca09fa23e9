//! The one list of test kinds: the CLI's subcommands, the agent's
//! workloads and the reports all look a kind up here.

use crate::kind::{Def, Kind};
use netrig_proto::TestSpec;

/// Every kind, in the order `--help` lists them. A new kind is one line here.
static KINDS: &[&dyn Kind] = &[
    &crate::tcp_stream::TCP_STREAM,
    &crate::tcp_stream::TCP_MAERTS,
    &crate::tcp_stream::TCP_BIDIR,
    &Def(crate::tcp_rr::TcpRr),
    &Def(crate::tcp_crr::TcpCrr),
    &Def(crate::tcp_cc::TcpCc),
    &Def(crate::udp_stream::UdpStream),
    &Def(crate::udp_rr::UdpRr),
    &Def(crate::http::Http),
    &Def(crate::syn_flood::SynFlood),
    &Def(crate::half_close::HalfClose),
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

    /// Every kind at its command line's defaults: the plan is valid, of
    /// this kind, and the kind's workload gets its connections as its wire
    /// rules say (a connection per transaction or one per flow); its
    /// result config has sizes.
    #[test]
    fn every_kind_plans_its_defaults_and_agrees_with_its_rules() {
        use crate::kind::Workloads;
        use netrig_proto::spec::Exchange;
        for kind in all() {
            let cmd = kind.args(clap::Command::new(kind.name()));
            let m = cmd.try_get_matches_from([kind.name()]).unwrap();
            let plan = kind.plan(&m).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            assert_eq!(plan.spec.kind(), kind.name());
            assert!(std::ptr::addr_eq(of(&plan.spec), *kind), "{}", kind.name());
            plan.spec
                .validate(&netrig_proto::AgentLimits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            let per_transaction = plan.spec.rules().exchange() == Exchange::ConnectionPerTransaction;
            match kind.workload(&plan.spec) {
                Workloads::Transient(_) => assert!(per_transaction, "{}", kind.name()),
                Workloads::Connected(_) => assert!(!per_transaction, "{}", kind.name()),
            }
            let c = <netrig_report::TestConfig as netrig_report::NewConfig>::new(
                &plan.spec,
                kind.report(),
                Default::default(),
            );
            assert!(c.message_size > 0 && c.recv_size > 0, "{}", kind.name());
        }
    }

    /// A kind's options are in its result's config as its type reads them,
    /// and another kind's are absent (docs/RESULTS.md, "config").
    #[test]
    fn a_kinds_config_has_its_own_options_alone() {
        let config = |name: &str, args: &[&str]| {
            let kind = by_name(name).unwrap();
            let cmd = kind.args(clap::Command::new(kind.name()));
            let m = cmd.try_get_matches_from([name].iter().chain(args)).unwrap();
            let plan = kind.plan(&m).unwrap();
            <netrig_report::TestConfig as netrig_report::NewConfig>::new(
                &plan.spec,
                kind.report(),
                Default::default(),
            )
        };
        let keys = |c: &netrig_report::TestConfig| c.kind.keys().cloned().collect::<Vec<_>>();
        let stream = config("tcp-stream", &["-b", "10M"]);
        let s: crate::StreamConfig = stream.kind_part().unwrap();
        assert_eq!(s.pace.rate_bps, Some(10_000_000));
        assert!(!stream.kind.contains_key("request_size"), "{:?}", keys(&stream));
        let rr = config("tcp-rr", &["--burst", "4"]);
        let t: crate::TransactionsConfig = rr.kind_part().unwrap();
        assert_eq!(t.burst, Some(4));
        assert!(rr.kind.contains_key("timeout_s") && rr.kind["timeout_s"].is_null());
        assert!(!rr.kind.contains_key("zerocopy") && !rr.kind.contains_key("close_first"));
        let crr = config("tcp-crr", &["--close-first", "responder"]);
        let c: crate::CrrConfig = crr.kind_part().unwrap();
        assert_eq!(c.close_first.as_deref(), Some("responder"));
        assert!(crr.kind.contains_key("local_ports"), "{:?}", keys(&crr));
        let udp = config("udp-stream", &["-b", "1M"]);
        let u: crate::UdpStreamConfig = udp.kind_part().unwrap();
        assert_eq!(
            (u.udp_rate_bps, u.message_size_default),
            (Some(1_000_000), Some(false))
        );
        assert!(!udp.kind.contains_key("burst"), "{:?}", keys(&udp));
    }
}
