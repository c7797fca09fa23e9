//! The local-port ceiling of a connection rate.
//!
//! With the client closing first, each connection leaves a TIME_WAIT on the
//! client's local port, and connect(2) may take that port for the same agent
//! again only once `tcp_tw_reuse` allows it (`tcp_tw_reuse_delay`, 1 s by
//! default, after the TIME_WAIT began; on loopback only with the default
//! `tcp_tw_reuse` of 2). The connections per second can then not exceed the
//! ports the client may use divided by that delay, and in practice stay
//! nearer the ports connect() tries first: one parity of
//! `net.ipv4.ip_local_port_range` (docs/RESULTS.md, "Local ports"), all of
//! which it scans before it takes a port of the other. `--local-ports`' range
//! netrig binds itself, both parities. On loopback with the default range the
//! rate stays at about 14,100 connections/s (the even half), below what two
//! CPUs manage (18,400 with the range widened): a run there
//! measures the port range, not the stack. The kernel's own counter says
//! when it happens: `TcpExt.TWRecycled`, connects that took a port still in
//! TIME_WAIT.

use netrig_proto::spec::{CloseFirst, TcpCrrSpec};
use netrig_report::TestResult;

/// Of the ceiling, the share of it a rate must reach for the warning.
const NEAR: f64 = 0.8;

/// What bounds the client's local ports on this host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PortLimits {
    /// `net.ipv4.ip_local_port_range`.
    pub range: (u32, u32),
    /// `net.ipv4.tcp_tw_reuse_delay`, ms (1000 where the kernel has none).
    pub reuse_delay_ms: u64,
}

impl PortLimits {
    /// This host's.
    pub(crate) fn here() -> PortLimits {
        PortLimits {
            range: netrig_engine::sockopt::local_port_range(),
            reuse_delay_ms: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_tw_reuse_delay")
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .filter(|ms| *ms > 0)
                .unwrap_or(1000),
        }
    }
}

/// The warning for `r` (its client's counters), if any: [`warning`].
pub(crate) fn port_ceiling_warning(s: &TcpCrrSpec, r: &TestResult, limits: PortLimits) -> Option<String> {
    let recycled = r
        .counters
        .local
        .as_ref()?
        .deltas
        .get("TcpExt.TWRecycled")
        .copied()
        .unwrap_or(0);
    warning(
        s,
        r.summary.transactions?,
        r.summary.transactions_per_s?,
        recycled,
        limits,
    )
}

/// The warning, when the run's connection rate (`transactions` counted,
/// `rate` a second) was at or near the ceiling its client's local ports
/// set, and most of its connections took a port still in TIME_WAIT
/// (`recycled`, the client's TcpExt.TWRecycled over the test).
fn warning(
    s: &TcpCrrSpec,
    transactions: u64,
    rate: f64,
    recycled: i64,
    limits: PortLimits,
) -> Option<String> {
    if s.close_first != CloseFirst::Requester || transactions == 0 {
        return None;
    }
    if recycled <= 0 || (recycled as u64).saturating_mul(2) < transactions {
        return None;
    }
    let delay_s = limits.reuse_delay_ms as f64 / 1e3;
    let per_s = |ports: u32| f64::from(ports) / delay_s;
    // The rate connect() reaches lies between its first parity's ports a
    // delay and all of them (the further it must scan, the slower each
    // connect() past the first parity): measured here, 8,000 ports of which
    // 4,000 even gave 6,227/s; 28,232 gave 14,371/s.
    let (floor, ports) = match s.local_ports {
        Some(p) => (
            per_s(p.len()),
            format!(
                "the {} ports of --local-ports {p}, which it binds in turn",
                p.len()
            ),
        ),
        None => {
            let (lo, hi) = limits.range;
            let all = hi.saturating_sub(lo) + 1;
            let first = all.div_ceil(2);
            (
                per_s(first),
                format!(
                    "the {all} ports of net.ipv4.ip_local_port_range {lo}-{hi}: connect() tries the {first} of \
                     one parity first, and scans all of them before it takes another"
                ),
            )
        }
    };
    if rate < NEAR * floor {
        return None;
    }
    Some(format!(
        "the connection rate is at the ceiling of the client's local ports, not of the path or the agent: \
         {recycled} connections on the client's host took a port still in TIME_WAIT over the test \
         (TcpExt.TWRecycled), against {transactions} transactions counted in the window ({rate:.0}/s). A port may go again {delay_s:.1} s after its TIME_WAIT began \
         (net.ipv4.tcp_tw_reuse_delay), and the client has {ports}: some {floor:.0} connections/s or more. \
         To measure past it: widen net.ipv4.ip_local_port_range or --local-ports, or let the agent keep the \
         TIME_WAIT (--close-first responder) or close with a reset (--close-first requester-reset)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::PortRange;

    /// `warning` for `transactions` over `secs`.
    fn result(transactions: u64, secs: f64, recycled: Option<i64>) -> (u64, f64, i64) {
        (transactions, transactions as f64 / secs, recycled.unwrap_or(0))
    }

    fn check(s: &TcpCrrSpec, r: (u64, f64, i64), limits: PortLimits) -> Option<String> {
        warning(s, r.0, r.1, r.2, limits)
    }

    fn spec(close_first: CloseFirst, local_ports: Option<PortRange>) -> TcpCrrSpec {
        TcpCrrSpec {
            close_first,
            local_ports,
            ..TcpCrrSpec::default()
        }
    }

    const HERE: PortLimits = PortLimits {
        range: (32768, 60999),
        reuse_delay_ms: 1000,
    };

    /// As measured in a namespace of the default range: 43,114 in 3 s, 28,230 recycled.
    #[test]
    fn a_rate_at_the_even_half_per_second_with_ports_recycled_is_named() {
        let w = check(
            &spec(CloseFirst::Requester, None),
            result(43_114, 3.0, Some(28_230)),
            HERE,
        )
        .expect("a warning");
        assert!(
            w.contains("28230 connections on the client's host took a port"),
            "{w}"
        );
        assert!(
            w.contains("the 28232 ports of net.ipv4.ip_local_port_range 32768-60999"),
            "{w}"
        );
        assert!(w.contains("tries the 14116 of one parity first"), "{w}");
        assert!(
            w.contains("14371/s") && w.contains("some 14116 connections/s or more"),
            "{w}"
        );
        assert!(w.contains("--close-first responder"), "{w}");
    }

    #[test]
    fn no_warning_below_the_ceiling_without_recycling_or_without_client_time_wait() {
        let s = spec(CloseFirst::Requester, None);
        // Below 80 % of the ceiling, ports recycled or not (TIME_WAIT lasts 60 s:
        // any rate above some 235/s recycles once the range is full).
        assert!(check(&s, result(30_000, 3.0, Some(29_000)), HERE).is_none());
        // At the rate, but few connections took a TIME_WAIT port.
        assert!(check(&s, result(43_114, 3.0, Some(1_000)), HERE).is_none());
        assert!(check(&s, result(43_114, 3.0, None), HERE).is_none());
        // The agent keeps the TIME_WAIT, or there is none.
        for c in [CloseFirst::Responder, CloseFirst::RequesterReset] {
            assert!(check(&spec(c, None), result(43_114, 3.0, Some(28_230)), HERE).is_none());
        }
    }

    /// With --local-ports the ceiling is its whole range (bound by netrig,
    /// both parities), and the delay is the host's.
    #[test]
    fn local_ports_and_the_reuse_delay_set_the_ceiling() {
        let ports = PortRange::parse("5000-5999").unwrap();
        let s = spec(CloseFirst::Requester, Some(ports));
        let w = check(&s, result(3_000, 3.0, Some(2_500)), HERE).expect("a warning");
        assert!(w.contains("the 1000 ports of --local-ports 5000-5999"), "{w}");
        assert!(w.contains("some 1000 connections/s"), "{w}");
        let slow = PortLimits {
            reuse_delay_ms: 2000,
            ..HERE
        };
        let w = check(&s, result(1_500, 3.0, Some(1_000)), slow).expect("a warning");
        assert!(
            w.contains("2.0 s after") && w.contains("some 500 connections/s"),
            "{w}"
        );
        assert!(check(&s, result(1_500, 3.0, Some(1_000)), HERE).is_none());
    }
}
