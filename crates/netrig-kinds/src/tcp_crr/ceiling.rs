//! The local-port ceiling of a connection rate.
//!
//! With the client closing first, each connection leaves a TIME_WAIT on the
//! client's host for its 4-tuple: the client's address and port, the agent's
//! address and port. Every connection of a run goes to the one agent address
//! and port, so only the client's local port tells them apart, and whether a
//! new connection may take a port whose 4-tuple is still in TIME_WAIT
//! depends on how the port was chosen (Linux, `tcp_twsk_unique`):
//!
//! - **The kernel picks it inside connect()** (the default): connect() takes
//!   a port still in TIME_WAIT only when `net.ipv4.tcp_tw_reuse` allows it
//!   (1; 2, the default, only when either address is a loopback one) and
//!   `net.ipv4.tcp_tw_reuse_delay` (1 s by default; kernels without it, 1 to
//!   2 s) has passed since the TIME_WAIT began, and only if that connection
//!   had TCP timestamps. The connections per second can then not exceed the
//!   ports of `net.ipv4.ip_local_port_range` divided by that delay, and in
//!   practice stay nearer the ports connect() tries first: one parity of the
//!   range (docs/RESULTS.md, "Local ports"), all of which it scans before it
//!   takes a port of the other. On loopback with the default range the rate
//!   stays at about 14,100 connections/s (the even half), below what two CPUs
//!   manage (18,400 with the range widened): a run there measures the port
//!   range, not the stack. Without reuse a port waits out the whole TIME_WAIT
//!   (60 s) and connect() fails for want of one (counted as
//!   `addr_not_available`, with its own warning), so there is no rate to
//!   name here.
//! - **netrig binds it first** (`--local-ports`, SO_REUSEADDR): connect() on
//!   a bound socket takes over its 4-tuple's TIME_WAIT at once, whatever
//!   `tcp_tw_reuse` says, when that connection had timestamps: measured here,
//!   ten ports gave 14,499 connections/s, as many as the default. The ports
//!   set no rate then (only how many connections may be open at once); without
//!   timestamps none is taken over, and connects fail instead.
//!
//! The kernel's own counter says when connections took a port in TIME_WAIT:
//! `TcpExt.TWRecycled`.

use netrig_proto::spec::{CloseFirst, TcpCrrSpec};
use netrig_report::TestResult;
use std::net::{IpAddr, SocketAddr};

/// Of the ceiling, the share of it a rate must reach for the warning.
const NEAR: f64 = 0.8;

/// What bounds the client's local ports on this host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PortLimits {
    /// `net.ipv4.ip_local_port_range`.
    pub range: (u32, u32),
    /// `net.ipv4.tcp_tw_reuse_delay`, ms (1000 where the kernel has none).
    pub reuse_delay_ms: u64,
    /// `net.ipv4.tcp_tw_reuse` (2, the kernel's default, where unreadable).
    pub tw_reuse: u8,
    /// `net.ipv4.tcp_timestamps` is not 0 (on where unreadable).
    pub timestamps: bool,
}

impl PortLimits {
    /// This host's.
    pub(crate) fn here() -> PortLimits {
        let sysctl = |name: &str| -> Option<u64> {
            std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
                .ok()
                .and_then(|t| t.trim().parse().ok())
        };
        PortLimits {
            range: netrig_engine::sockopt::local_port_range(),
            reuse_delay_ms: sysctl("tcp_tw_reuse_delay").filter(|ms| *ms > 0).unwrap_or(1000),
            tw_reuse: sysctl("tcp_tw_reuse")
                .and_then(|v| u8::try_from(v).ok())
                .unwrap_or(2),
            timestamps: sysctl("tcp_timestamps").is_none_or(|v| v != 0),
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
        agent_ip(&r.agent.address),
    )
}

/// The agent's address as the client reached it (`SocketAddr`'s form).
fn agent_ip(address: &str) -> Option<IpAddr> {
    address
        .parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| address.parse::<IpAddr>())
        .ok()
}

/// The rate the client's local ports allow, where TIME_WAIT sets one
/// (module docs): the connections a second past which connect() must wait
/// for a port, its lower end (the ports connect() tries first) and how it
/// was worked out.
#[derive(Debug, Clone, PartialEq)]
struct Ceiling {
    /// Connections/s: the first ports connect() tries, per delay.
    floor: f64,
    /// Connections/s: all the ports, per delay.
    all: f64,
    /// The sum, in words.
    how: String,
}

/// The ceiling of a run of `s` on a host with `limits`, to an agent at
/// `agent` (its address, if known); None where its TIME_WAIT sets no rate:
/// the agent or nobody keeps it, `--local-ports` binds the port (connect()
/// takes over the TIME_WAIT at once), or no port in TIME_WAIT may be taken
/// at all (connects fail, and are counted and warned of as such).
fn ceiling(s: &TcpCrrSpec, limits: PortLimits, agent: Option<IpAddr>) -> Option<Ceiling> {
    if s.close_first != CloseFirst::Requester || s.local_ports.is_some() || !limits.timestamps {
        return None;
    }
    // tcp_tw_reuse 2 is "loopback only": either address a loopback one (or
    // the socket bound to lo). The client's address is of the same kind as
    // the agent's it reaches; an unknown agent is given the benefit.
    let reuse = match limits.tw_reuse {
        0 => false,
        2 => agent.is_none_or(|ip| ip.is_loopback()),
        _ => true,
    };
    if !reuse {
        return None;
    }
    let delay_s = limits.reuse_delay_ms as f64 / 1e3;
    let (lo, hi) = limits.range;
    let all = hi.saturating_sub(lo) + 1;
    let first = all.div_ceil(2);
    let per_s = |ports: u32| f64::from(ports) / delay_s;
    Some(Ceiling {
        floor: per_s(first),
        all: per_s(all),
        how: format!(
            "the kernel picks each connection's port at connect(), from the {all} ports of \
             net.ipv4.ip_local_port_range {lo}-{hi}, and takes one whose connection to the agent's address and \
             port is still in TIME_WAIT only {delay_s:.1} s after that began (net.ipv4.tcp_tw_reuse {}, \
             net.ipv4.tcp_tw_reuse_delay): {first} ports of one parity, which connect() tries first, to {all} \
             ports, per {delay_s:.1} s = {:.0} to {:.0} connections/s",
            limits.tw_reuse,
            per_s(first),
            per_s(all),
        ),
    })
}

/// The warning, when the run's connection rate (`transactions` counted,
/// `rate` a second) was at or near the [`ceiling`] its client's local ports
/// set, and most of its connections took a port still in TIME_WAIT
/// (`recycled`, the client's TcpExt.TWRecycled over the test).
fn warning(
    s: &TcpCrrSpec,
    transactions: u64,
    rate: f64,
    recycled: i64,
    limits: PortLimits,
    agent: Option<IpAddr>,
) -> Option<String> {
    if transactions == 0 || recycled <= 0 || (recycled as u64).saturating_mul(2) < transactions {
        return None;
    }
    let c = ceiling(s, limits, agent)?;
    // The rate connect() reaches lies between its first parity's ports a
    // delay and all of them (the further it must scan, the slower each
    // connect() past the first parity): measured here, 8,000 ports of which
    // 4,000 even gave 6,227/s; 28,232 gave 14,371/s.
    if rate < NEAR * c.floor {
        return None;
    }
    Some(format!(
        "the connection rate is at the ceiling of the client's local ports, not of the path or the agent: \
         {recycled} connections on the client's host took a port still in TIME_WAIT over the test \
         (TcpExt.TWRecycled), against {transactions} transactions counted in the window ({rate:.0}/s), \
         and the ceiling is {:.0} to {:.0} connections/s: {}. To measure past it: widen \
         net.ipv4.ip_local_port_range, bind the ports with --local-ports (connect() then takes over a \
         TIME_WAIT at once), or let the agent keep the TIME_WAIT (--close-first responder) or close with a \
         reset (--close-first requester-reset)",
        c.floor, c.all, c.how
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::PortRange;
    use std::net::Ipv4Addr;

    const LOOPBACK: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    const REMOTE: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));

    /// `warning` for `transactions` over `secs`, to a loopback agent.
    fn check(
        s: &TcpCrrSpec,
        transactions: u64,
        secs: f64,
        recycled: i64,
        limits: PortLimits,
    ) -> Option<String> {
        warning(
            s,
            transactions,
            transactions as f64 / secs,
            recycled,
            limits,
            LOOPBACK,
        )
    }

    fn spec(close_first: CloseFirst, local_ports: Option<PortRange>) -> TcpCrrSpec {
        TcpCrrSpec {
            close_first,
            local_ports,
            ..TcpCrrSpec::default()
        }
    }

    /// The kernel's defaults.
    const HERE: PortLimits = PortLimits {
        range: (32768, 60999),
        reuse_delay_ms: 1000,
        tw_reuse: 2,
        timestamps: true,
    };

    /// As measured in a namespace of the default range: 43,114 in 3 s, 28,230 recycled.
    #[test]
    fn a_rate_at_the_even_half_per_second_with_ports_recycled_is_named() {
        let w = check(&spec(CloseFirst::Requester, None), 43_114, 3.0, 28_230, HERE).expect("a warning");
        for needle in [
            "28230 connections on the client's host took a port",
            "(14371/s)",
            "the ceiling is 14116 to 28232 connections/s",
            "the 28232 ports of net.ipv4.ip_local_port_range 32768-60999",
            "1.0 s after that began (net.ipv4.tcp_tw_reuse 2, net.ipv4.tcp_tw_reuse_delay)",
            "14116 ports of one parity, which connect() tries first, to 28232 ports, per 1.0 s",
            "--close-first responder",
        ] {
            assert!(w.contains(needle), "{needle}: {w}");
        }
    }

    #[test]
    fn no_warning_below_the_ceiling_without_recycling_or_without_client_time_wait() {
        let s = spec(CloseFirst::Requester, None);
        // Below 80 % of the ceiling, ports recycled or not (TIME_WAIT lasts 60 s:
        // any rate above some 235/s recycles once the range is full).
        assert!(check(&s, 30_000, 3.0, 29_000, HERE).is_none());
        // At the rate, but few connections took a TIME_WAIT port.
        assert!(check(&s, 43_114, 3.0, 1_000, HERE).is_none());
        assert!(check(&s, 43_114, 3.0, 0, HERE).is_none());
        // The agent keeps the TIME_WAIT, or there is none.
        for c in [CloseFirst::Responder, CloseFirst::RequesterReset] {
            assert!(check(&spec(c, None), 43_114, 3.0, 28_230, HERE).is_none());
        }
    }

    /// The user's run of issue #37: ten ports bound by --local-ports gave
    /// 14,499 connections/s, each taking over its port's TIME_WAIT at once;
    /// the warning said the ceiling was "some 10 connections/s". A bound
    /// port sets no rate, however few and whatever tcp_tw_reuse says.
    #[test]
    fn local_ports_set_no_rate_ceiling() {
        let s = spec(
            CloseFirst::Requester,
            Some(PortRange::parse("41101-41110").unwrap()),
        );
        for tw_reuse in [0, 1, 2] {
            let limits = PortLimits { tw_reuse, ..HERE };
            assert_eq!(
                check(&s, 14_499, 1.0, 14_500, limits),
                None,
                "tcp_tw_reuse {tw_reuse}"
            );
            assert_eq!(ceiling(&s, limits, LOOPBACK), None);
        }
    }

    /// The delay and the range are the host's; tcp_tw_reuse 2 reuses on
    /// loopback only, 1 everywhere, 0 nowhere (connects fail instead, with
    /// their own warning); without timestamps nothing is reused.
    #[test]
    fn the_host_s_sysctls_set_the_ceiling() {
        let s = spec(CloseFirst::Requester, None);
        let small = PortLimits {
            range: (40000, 41999),
            ..HERE
        };
        let c = ceiling(&s, small, LOOPBACK).unwrap();
        assert_eq!((c.floor, c.all), (1000.0, 2000.0));
        // Measured in a namespace: 2,000 ports gave 1,998/s.
        assert!(check(&s, 5_994, 3.0, 5_990, small).is_some());
        assert!(check(&s, 2_100, 3.0, 2_000, small).is_none());
        let slow = PortLimits {
            reuse_delay_ms: 2000,
            ..small
        };
        let c = ceiling(&s, slow, LOOPBACK).unwrap();
        assert_eq!((c.floor, c.all), (500.0, 1000.0));
        assert!(c.how.contains("per 2.0 s"), "{}", c.how);
        assert!(check(&s, 1_500, 3.0, 1_000, slow).is_some());
        // tcp_tw_reuse 2: loopback only; an agent of unknown address gets the benefit.
        assert!(ceiling(&s, small, REMOTE).is_none());
        assert!(ceiling(&s, small, None).is_some());
        let everywhere = PortLimits { tw_reuse: 1, ..small };
        assert!(ceiling(&s, everywhere, REMOTE).is_some());
        let never = PortLimits { tw_reuse: 0, ..small };
        assert!(ceiling(&s, never, LOOPBACK).is_none());
        let untimed = PortLimits {
            timestamps: false,
            ..small
        };
        assert!(ceiling(&s, untimed, LOOPBACK).is_none());
    }

    #[test]
    fn the_agent_s_address_is_read_as_the_client_wrote_it() {
        assert_eq!(agent_ip("127.0.0.1:5201"), LOOPBACK);
        assert_eq!(agent_ip("[::1]:5201"), Some("::1".parse().unwrap()));
        assert_eq!(agent_ip("192.0.2.1"), REMOTE);
        assert_eq!(agent_ip("example.net:5201"), None);
    }
}
