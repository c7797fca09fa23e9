//! A kind with one end (an HTTP load, aimed at any server) in a lab (issue #39, the IA64 study):
//! its client runs in a lab host as every lab run does, but it goes to the **server host's
//! address at the server's own port** (the test's `--url` or `-p`: netrig's HTTP server beside
//! the host's agent, `http_port` in the lab, or an nginx an arm starts there), not to the agent;
//! the agent of the server host watches that host over the run (`--server-agent`: its CPU,
//! listen queue, conntrack, sockets by state). From several client hosts at once, each runs its
//! share of the load (`--share K/N`: the connections, threads, requests and rate split as
//! `--clients` splits them), so that two client hosts together offer what one would, and the
//! kind sums their results itself (offered rate, errors by cause, latency histograms).

use netrig_kinds::Ends;

/// Whether `kind` has one end (its server is any server; the agent only watches).
pub fn one_ended(kind: &str) -> bool {
    netrig_kinds::by_name(kind).is_some_and(|k| matches!(k.ends(), Ends::ClientOnly(_)))
}

/// The options that point a lab run of `kind` at `agent` (the server host's agent, as the place
/// has it): `-H IP -p PORT` for a kind with both ends; for a kind with one end `-H IP` (its own
/// URL or `-p` gives the server's port), `--server-agent AGENT` when `watch`, and `--share K/N`
/// when `share` is one of several clients.
pub fn target_args(
    kind: &str,
    agent: std::net::SocketAddr,
    watch: bool,
    share: Option<(usize, usize)>,
) -> Vec<String> {
    let ip = agent.ip().to_string();
    if !one_ended(kind) {
        return vec!["-H".into(), ip, "-p".into(), agent.port().to_string()];
    }
    let mut a = vec!["-H".into(), ip];
    if watch {
        a.push("--server-agent".into());
        a.push(agent.to_string());
    }
    if let Some((k, n)) = share.filter(|&(_, n)| n > 1) {
        a.push("--share".into());
        a.push(format!("{k}/{n}"));
    }
    a
}

/// For a kind with one end run from several client hosts: the clients' results summed by the
/// kind (offered rate, errors by cause, latency merged, each client's part in
/// `summary.http.clients`), the server host's view being the first client's (only it watched);
/// `None` for a kind with both ends (the generic sum holds for it).
pub fn kind_sum(
    kind: &str,
    spec: &netrig_proto::TestSpec,
    parts: &[(crate::document::LabPlace, netrig_report::TestResult)],
) -> Option<Result<netrig_report::TestResult, String>> {
    let k = netrig_kinds::by_name(kind)?;
    let Ends::ClientOnly(one) = k.ends() else {
        return None;
    };
    // A lab client's source address is whatever its route gives (the place holds the agent's);
    // each host's own part, by name, is in the run's `clients`.
    let with_addr = parts
        .iter()
        .map(|(_, r)| (std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), r.clone()))
        .collect();
    Some(one.sum(spec, with_addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_load_goes_to_the_server_host_and_asks_its_agent_to_watch() {
        let agent: std::net::SocketAddr = "198.18.1.2:6387".parse().unwrap();
        // Both ends: the agent itself.
        assert_eq!(
            target_args("tcp-crr", agent, true, Some((1, 2))),
            ["-H", "198.18.1.2", "-p", "6387"]
        );
        // One end: the host's address, the port left to the test's URL, the agent watching.
        assert_eq!(
            target_args("http", agent, true, None),
            ["-H", "198.18.1.2", "--server-agent", "198.18.1.2:6387"]
        );
        // The second of two client hosts: its half, no second watch.
        assert_eq!(
            target_args("http", agent, false, Some((1, 2))),
            ["-H", "198.18.1.2", "--share", "1/2"]
        );
        let v6: std::net::SocketAddr = "[2001:db8::2]:6387".parse().unwrap();
        assert_eq!(
            target_args("http", v6, true, Some((0, 1))),
            ["-H", "2001:db8::2", "--server-agent", "[2001:db8::2]:6387"]
        );
    }
}
