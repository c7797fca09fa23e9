//! The witness, judged: each of netrig's figures beside the kernel's own
//! count of the same thing over the same instants (what each end read is in
//! `netrig_proto::report::WitnessReport`), with the ratio, the unit of each
//! side, and a verdict. docs/RESULTS.md justifies each tolerance.
//!
//! Two kinds of check:
//! - **equal**: the kernel counts exactly the same thing (a TCP socket's
//!   payload). The two may differ only by the system calls in progress when
//!   they were read: two per flow at each end of the window.
//! - **bound**: a host or interface counter that also counts every other
//!   socket's traffic. netrig's figure must not exceed it (beyond the calls
//!   in progress); the kernel may count more, and what it counts beyond
//!   netrig's traffic (headers included, where they can be known) is other
//!   traffic on the host, named in a warning when it is over 1 % of
//!   netrig's own, since whole-host figures (CPU, the interface) then
//!   include it.

use netrig_proto::report::measure::InterfaceCounters;
use netrig_proto::report::{ConnectionWitness, Role, WitnessReport};
use netrig_proto::spec::Exchange;
use netrig_proto::spec::TestSpec;

/// Datagrams one sendmmsg/recvmmsg call moves at most (the engine's batch).
const CALL_MESSAGES: u64 = 64;
/// Other traffic beyond this share of netrig's own is named in a warning.
pub const OTHER_TRAFFIC_SHARE: f64 = 0.01;

/// The witness as the result carries it (netrig-document holds the types).
pub use netrig_document::result::witness::{WitnessCheck, WitnessResult};

struct Judge<'a> {
    end: &'a str,
    checks: Vec<WitnessCheck>,
    warnings: Vec<String>,
}

impl<'a> Judge<'a> {
    fn new(end: &'a str) -> Self {
        Judge {
            end,
            checks: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Only its warnings of a figure above the kernel's count: for counts
    /// that other sockets' traffic makes larger, where only a shortfall is
    /// worth a word.
    fn exceeding_only(mut self) -> Self {
        self.warnings.retain(|w| w.contains("exceeds"));
        self
    }

    /// Takes another judge's checks and warnings, after its own.
    fn absorb(&mut self, mut other: Judge<'_>) {
        self.checks.append(&mut other.checks);
        self.warnings.append(&mut other.warnings);
    }

    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        figure: &str,
        netrig: u64,
        netrig_unit: &str,
        kernel: u64,
        kernel_source: &str,
        kernel_unit: &str,
        bound: bool,
        tolerance: u64,
        // For a bound: the kernel's count over the inner span (within
        // netrig's window), and what of it netrig's traffic explains.
        inner: u64,
        explained: u64,
    ) {
        let disagrees = if bound {
            netrig > kernel.saturating_add(tolerance)
        } else {
            netrig.abs_diff(kernel) > tolerance
        };
        let other = bound.then(|| inner.saturating_sub(explained));
        if disagrees {
            self.warnings.push(format!(
                "{}: witness: netrig counted {netrig} {netrig_unit} ({figure}) but the kernel {kernel} \
                 {kernel_unit} ({kernel_source}) over the same window; {}",
                self.end,
                if bound {
                    "netrig's figure exceeds a count that includes it, so one of them is wrong"
                } else {
                    "they count the same thing and must agree"
                }
            ));
        } else if let Some(o) =
            other.filter(|o| *o > tolerance && *o as f64 > explained.max(1) as f64 * OTHER_TRAFFIC_SHARE)
        {
            self.warnings.push(format!(
                "{}: witness: the kernel counted {o} {kernel_unit} ({kernel_source}) beyond netrig's {figure} \
                 in the window ({:.1}% more): other traffic shared this host, and whole-host figures (CPU, \
                 service demand, the interface) include it",
                self.end,
                o as f64 * 100.0 / explained.max(1) as f64
            ));
        }
        self.checks.push(WitnessCheck {
            end: self.end.into(),
            figure: figure.into(),
            netrig,
            netrig_unit: netrig_unit.into(),
            kernel,
            kernel_source: kernel_source.into(),
            kernel_unit: kernel_unit.into(),
            ratio: (kernel > 0).then(|| netrig as f64 / kernel as f64),
            relation: if bound { "bound" } else { "equal" }.into(),
            tolerance,
            other,
            verdict: if disagrees { "disagrees" } else { "agrees" }.into(),
        });
    }
}

/// Sums a counter of IPv4 and IPv6 (`Udp.X` and `Udp6.X`).
fn both(w: &WitnessReport, name: &str) -> Option<u64> {
    udp_sum(&w.kernel, name)
}

/// The same over the inner span; the outer one where an older agent sent none.
fn both_inner(w: &WitnessReport, name: &str) -> Option<u64> {
    udp_sum(&w.kernel_inner, name).or_else(|| both(w, name))
}

fn udp_sum(map: &std::collections::BTreeMap<String, i64>, name: &str) -> Option<u64> {
    let a = map.get(&format!("Udp.{name}"));
    let b = map.get(&format!("Udp6.{name}"));
    (a.is_some() || b.is_some()).then(|| {
        a.copied()
            .unwrap_or(0)
            .saturating_add(b.copied().unwrap_or(0))
            .max(0) as u64
    })
}

/// The per-socket checks of one end: exact equalities.
fn judge_sockets(spec: &TestSpec, w: &WitnessReport, end: &str) -> (Vec<WitnessCheck>, Vec<String>) {
    let mut j = Judge::new(end);
    let (send, recv) = spec.rules().call_sizes();
    if let Some(t) = &w.tcp {
        let f = u64::from(t.flows);
        // Two calls in progress per flow at each edge, of the size each makes.
        for (figure, netrig, kernel, source, call) in [
            (
                "TCP payload sent",
                t.netrig_sent,
                t.kernel_sent,
                "tcpi_bytes_acked + SIOCOUTQ per socket",
                send,
            ),
            (
                "TCP payload received",
                t.netrig_received,
                t.kernel_received,
                "tcpi_bytes_received - SIOCINQ per socket",
                recv,
            ),
            (
                "TCP payload both ways (requests and responses)",
                t.netrig_both_ways,
                t.kernel_both_ways,
                "tcpi_bytes_acked + SIOCOUTQ + tcpi_bytes_received - SIOCINQ per socket",
                // What a flow's count may lag the kernel's by: the
                // transactions in flight, each way (a responder counts a
                // request read and its response written together).
                match spec.rules().transaction_sizes() {
                    Some((req, resp)) => req.saturating_add(resp).saturating_mul(spec.rules().in_flight()),
                    None => send.saturating_add(recv),
                },
            ),
        ] {
            if netrig > 0 || kernel > 0 {
                let tolerance = (2 * f * u64::from(call)).saturating_add(t.read_spread_bytes);
                j.check(
                    figure, netrig, "bytes", kernel, source, "bytes", false, tolerance, kernel, 0,
                );
            }
        }
    }
    (j.checks, j.warnings)
}

/// The host checks of one end, over its own window: `peer` is the other end
/// when both read the same host counters (one host and namespace), whose
/// traffic those counters then carry too (it is explained, not other).
fn judge_host(
    spec: &TestSpec,
    w: &WitnessReport,
    end: &str,
    v6: bool,
    max_segment: Option<u32>,
    peer: Option<&WitnessReport>,
) -> (Vec<WitnessCheck>, Vec<String>) {
    let h = Host {
        spec,
        w,
        peer,
        flows: u64::from(spec.flows) * spec.directions().len() as u64,
    };
    let mut j = Judge::new(end);
    // udp-rr's ends send too (requests, responses): its datagrams sent are
    // bounded the same way, and its transactions by the datagrams received
    // (each took one: the response that completed it, the request answered).
    if spec.rules().transport().datagrams() {
        h.udp(&mut j);
    }
    if let Some(c) = &w.connections {
        h.connections(&mut j, c);
    }
    h.fallbacks(&mut j);
    if let (Some(seg), Some(_), Some(k)) = (
        max_segment.filter(|m| *m > 0),
        &w.tcp,
        w.kernel.get("Tcp.OutSegs"),
    ) {
        h.segments(&mut j, u64::from(seg), (*k).max(0) as u64);
    }
    if !w.interfaces.is_empty() {
        h.interfaces(&mut j, v6);
    }
    (j.checks, j.warnings)
}

/// What one end's host checks go by: the test, what the end read, and its
/// peer's report where both read the same host counters.
struct Host<'a> {
    spec: &'a TestSpec,
    w: &'a WitnessReport,
    peer: Option<&'a WitnessReport>,
    /// The test's flows, every direction's.
    flows: u64,
}

impl Host<'_> {
    /// A figure of the peer's, or 0 where its traffic is not on these counters.
    fn peer_of(&self, f: fn(&WitnessReport) -> u64) -> u64 {
        self.peer.map_or(0, f)
    }

    /// UDP: messages sent and buffers received, within the datagrams one
    /// call moves per flow at each edge.
    fn udp(&self, j: &mut Judge<'_>) {
        let w = self.w;
        let slack = 2 * self.flows * CALL_MESSAGES;
        // netrig's count, what it is and its unit; the kernel's counter and its unit.
        type UdpCheck = (
            fn(&WitnessReport) -> u64,
            &'static str,
            &'static str,
            &'static str,
            &'static str,
        );
        let udp: [UdpCheck; 2] = [
            (
                |w| w.udp_messages_sent,
                "UDP messages sent",
                "messages (a GSO send of many datagrams is one)",
                "OutDatagrams",
                "sends (a GSO send is one)",
            ),
            (
                |w| w.udp_buffers_received,
                "UDP buffers received",
                "buffers (a GRO batch of many datagrams is one)",
                "InDatagrams",
                "buffers delivered (a GRO batch is one)",
            ),
        ];
        for (count, figure, unit, counter, kernel_unit) in udp {
            let n = count(w);
            if let Some(k) = both(w, counter).filter(|_| n > 0) {
                j.check(
                    figure,
                    n,
                    unit,
                    k,
                    &format!("Udp.{counter} + Udp6.{counter}"),
                    kernel_unit,
                    true,
                    slack,
                    both_inner(w, counter).unwrap_or(k),
                    n.saturating_add(self.peer_of(count)),
                );
            }
        }
    }

    /// A connection per transaction: each transaction this end completed (or
    /// answered) was a connection the kernel opened (or accepted), counted
    /// in its host's Tcp.ActiveOpens (PassiveOpens), and for a transport with
    /// its own handshake (MPTCP) in that transport's count of them too; the
    /// connections in flight at the window's edges are the tolerance. The
    /// other end opens (accepts) none, so on one host nothing of the peer's
    /// is explained.
    fn connections(&self, j: &mut Judge<'_>, c: &ConnectionWitness) {
        let w = self.w;
        let active = c.role == Role::Requester;
        let (figure, unit) = if active {
            ("connections opened", "transactions completed (a connection each)")
        } else {
            (
                "connections accepted",
                "transactions answered (a connection each)",
            )
        };
        let tcp = if active {
            (
                "Tcp.ActiveOpens",
                "connections opened (connect(2) on every socket)",
            )
        } else {
            (
                "Tcp.PassiveOpens",
                "connections accepted (handshakes completed, every listener)",
            )
        };
        let transport = self.spec.rules().transport();
        let own = transport.rules().handshakes().map(|[opened, accepted]| {
            (
                transport.name().to_uppercase(),
                (
                    if active { opened } else { accepted },
                    "handshakes completed as it (every socket of the host)",
                ),
            )
        });
        let in_flight = u64::from(self.spec.flows).saturating_mul(u64::from(self.spec.rules().in_flight()));
        for (name, (counter, kernel_unit)) in std::iter::once(("TCP".to_string(), tcp)).chain(own) {
            // Judged even with no transaction (a run whose every connect failed):
            // what the kernel opened is then all in `other` or the failures.
            let Some(k) = w.kernel.get(counter) else {
                continue;
            };
            let k = (*k).max(0) as u64;
            j.check(
                &format!("{name} {figure}"),
                c.transactions,
                unit,
                k,
                counter,
                kernel_unit,
                true,
                2 * in_flight,
                w.kernel_inner.get(counter).map_or(k, |v| (*v).max(0) as u64),
                c.transactions.saturating_add(c.failures),
            );
        }
    }

    /// Connections of the test's transport that fell back to another (MPTCP
    /// to TCP) in the window, by the host's counters.
    fn fallbacks(&self, j: &mut Judge<'_>) {
        let transport = self.spec.rules().transport();
        let counters = transport.rules().fallbacks();
        let n: i64 = counters.iter().filter_map(|c| self.w.kernel.get(*c)).sum();
        if n > 0 {
            j.warnings.push(format!(
                "{}: {n} connection(s) fell back from {} to TCP in the window ({}), {}",
                j.end,
                transport.name().to_uppercase(),
                counters.join(" + "),
                crate::checks::HOST_WIDE
            ));
        }
    }

    /// TCP: the payload that left the sockets (written less the growth of
    /// the unsent queue: bytes written into a socket buffer that fills are
    /// not segments yet) needs at least payload / largest segment `seg`
    /// segments (the path MTU less the headers: no segment carries more,
    /// whatever MSS the sender had at each send), and the kernel counts every
    /// segment it sends (ACKs too, per MSS under TSO) in Tcp.OutSegs, `k`.
    /// (An older peer's report has no payload_out: no check of it.)
    fn segments(&self, j: &mut Judge<'_>, seg: u64, k: u64) {
        let w = self.w;
        if w.payload_out == 0 {
            return;
        }
        let (send, _) = self.spec.rules().call_sizes();
        let least = w.payload_out / seg;
        let mut jj = Judge::new(j.end);
        jj.check(
            "TCP data segments",
            least,
            "segments at least (payload / largest segment the path MTU allows)",
            k,
            "Tcp.OutSegs",
            "segments sent (data, ACKs and retransmissions of every socket)",
            true,
            2 * self.flows * u64::from(send).div_ceil(seg),
            w.kernel_inner
                .get("Tcp.OutSegs")
                .map_or(k, |v| (*v).max(0) as u64),
            least.saturating_add(self.peer_of(|p| p.payload_out) / seg),
        );
        // ACKs and other sockets make the kernel's count larger: only a
        // shortfall is worth a word.
        j.absorb(jj.exceeding_only());
    }

    /// The interfaces: every frame, headers included.
    fn interfaces(&self, j: &mut Judge<'_>, v6: bool) {
        let w = self.w;
        let rules = self.spec.rules();
        let udp_stream = rules.transport().datagrams() && rules.exchange() == Exchange::Stream;
        let (send, recv) = rules.call_sizes();
        let size = u64::from(send.max(1));
        // UDP + IP + Ethernet headers of one datagram.
        let header = 8 + if v6 { 40 } else { 20 } + 14;
        let names: Vec<&str> = w.interfaces.iter().map(|i| i.name.as_str()).collect();
        let names = names.join("+");
        let (tx, rx) = interface_bytes(&w.interfaces);
        let inner = if w.interfaces_inner.is_empty() {
            &w.interfaces
        } else {
            &w.interfaces_inner
        };
        let (tx_inner, rx_inner) = interface_bytes(inner);
        let slack = 2 * self.flows * size.max(u64::from(recv)) * if udp_stream { CALL_MESSAGES } else { 1 };
        // UDP: the headers are known, so what is beyond them is other traffic.
        let explained = |payload: u64| {
            if udp_stream {
                payload.saturating_add((payload / size).saturating_mul(header))
            } else {
                payload
            }
        };
        // One host: loopback carries each frame once, counted as sent and received.
        // Older agents report no queue-corrected figures: theirs stand in.
        let out_of = |w: &WitnessReport| {
            if w.payload_out > 0 {
                w.payload_out
            } else {
                w.payload_sent
            }
        };
        let in_of = |w: &WitnessReport| {
            if w.payload_in > 0 {
                w.payload_in
            } else {
                w.payload_received
            }
        };
        let (out, inn) = (out_of(w), in_of(w));
        // On one host the interface carries the peer's frames too.
        let (peer_out, peer_in) = self.peer.map_or((0, 0), |p| (out_of(p), in_of(p)));
        for (figure, payload, peer_payload, kernel, kernel_inner, dir, unit) in [
            (
                "payload sent",
                out,
                peer_out,
                tx,
                tx_inner,
                "tx_bytes",
                "payload bytes that left (written, less the growth of TCP's unsent queues)",
            ),
            (
                "payload received",
                inn,
                peer_in,
                rx,
                rx_inner,
                "rx_bytes",
                "payload bytes that came in (read, plus the growth of TCP's unread queues)",
            ),
        ] {
            if payload == 0 {
                continue;
            }
            let mut jj = Judge::new(j.end);
            jj.check(
                figure,
                payload,
                unit,
                kernel,
                &format!("{names} {dir}"),
                "bytes on the wire, headers included",
                true,
                slack,
                kernel_inner,
                explained(payload).saturating_add(explained(peer_payload)),
            );
            // TCP's headers and acknowledgements are not known here, nor
            // what a receiving host dropped: only a figure above the
            // interface's count is worth a word there.
            if udp_stream && figure == "payload sent" {
                j.absorb(jj);
            } else {
                j.absorb(jj.exceeding_only());
            }
        }
    }
}

/// The bytes the interfaces sent and received, summed.
fn interface_bytes(interfaces: &[InterfaceCounters]) -> (u64, u64) {
    let tx = interfaces.iter().fold(0u64, |n, i| n.saturating_add(i.tx_bytes));
    let rx = interfaces.iter().fold(0u64, |n, i| n.saturating_add(i.rx_bytes));
    (tx, rx)
}

/// How the http kind's witness begins when `--clients N` withholds it.
pub const CLIENTS_WITHHELD: &str = "--clients";

/// Why the server host's checks are withheld when no agent watched it.
pub const SERVER_NOT_WATCHED: &str =
    "not watched (--server-agent HOST asks the netrig agent on the server's host for them)";

/// The http kind's witness (a load generator with no agent of its own):
/// its whole run's counts (warm-up and drain included) beside the kernel
/// counters this host read just before its threads started and just after
/// they ended (`local`: its `kernel` deltas and the interface toward the
/// server), and, with `--server-agent`, the server host's counter deltas
/// (its checks' end is `remote`)
/// over the agent's watch, which brackets the run (`server`: `Ok` with the
/// deltas, `Err` with why there are none). Every check is a bound: the
/// kernel's counts include netrig's and every other socket's. A check that
/// cannot be made is named in the third list, with the reason.
pub fn judge_http(
    total: &crate::http::HttpTotals,
    connections: u32,
    request_len: u64,
    local: Result<&WitnessReport, &str>,
    server: Result<&std::collections::BTreeMap<String, i64>, &str>,
) -> (Vec<WitnessCheck>, Vec<String>, Vec<String>) {
    let mut h = HttpJudge::default();
    match local {
        Ok(w) => {
            h.local_host(total, w);
            // A request per connection may still sit in its socket's queue
            // when the run ends.
            h.local_interfaces(total, w, u64::from(connections).saturating_mul(request_len));
        }
        Err(why) => h.withheld.push(format!("local: this host's counts: {why}")),
    }
    match server {
        Ok(c) => h.server_host(total, c),
        Err(why) => h.withheld.push(format!(
            "remote: the server host's counts (Tcp.PassiveOpens, Tcp.OutSegs): {why}"
        )),
    }
    (h.checks, h.warnings, h.withheld)
}

/// What of a count is netrig's cannot be told apart (ACKs, handshakes,
/// headers, the server's own bytes on loopback): no `other` for it.
const UNSPLIT: u64 = u64::MAX;
const HTTP_OPENED: &str = "HTTP connections opened";
const HTTP_OPENED_UNIT: &str = "connections (connect(2) succeeded)";

/// One of the http kind's bounds: netrig's figure, its count and unit, the
/// kernel's counter and its unit, the tolerance, and what of the kernel's
/// count netrig's traffic explains.
type HttpRow<'s> = (&'s str, u64, &'s str, &'s str, &'s str, u64, u64);

/// The http kind's witness as it is judged: its checks, their warnings, and
/// the checks that could not be made.
#[derive(Default)]
struct HttpJudge {
    checks: Vec<WitnessCheck>,
    warnings: Vec<String>,
    withheld: Vec<String>,
}

impl HttpJudge {
    /// `end`'s bounds, each against its counter in `counters` (withheld
    /// where the kernel's count was not read).
    fn judge(&mut self, end: &str, rows: &[HttpRow<'_>], counters: &dyn Fn(&str) -> Option<u64>) {
        let mut j = Judge::new(end);
        for &(figure, netrig, unit, source, kernel_unit, tolerance, explained) in rows {
            match counters(source) {
                Some(k) => j.check(
                    figure,
                    netrig,
                    unit,
                    k,
                    source,
                    kernel_unit,
                    true,
                    tolerance,
                    k,
                    explained,
                ),
                None => self.withheld.push(format!(
                    "{end}: {figure} against {source}: the kernel's count was not read"
                )),
            }
        }
        // Other sockets on the host add to every count: only a count below
        // netrig's (which cannot be) is worth a word.
        let mut j = j.exceeding_only();
        self.checks.append(&mut j.checks);
        self.warnings.append(&mut j.warnings);
    }

    /// This host's connections, requests and responses against its TCP counters.
    fn local_host(&mut self, total: &crate::http::HttpTotals, w: &WitnessReport) {
        let k = |name: &str| w.kernel.get(name).map(|v| (*v).max(0) as u64);
        let rows = [
            (
                HTTP_OPENED,
                total.connections_opened,
                HTTP_OPENED_UNIT,
                "Tcp.ActiveOpens",
                "connections opened (connect(2) on every socket, failed ones too)",
                0,
                total.connections_opened.saturating_add(total.errors),
            ),
            (
                "HTTP requests sent",
                total.requests_sent,
                "requests (each leaves in one TCP segment at least)",
                "Tcp.OutSegs",
                "segments sent (data, ACKs, handshakes of every socket)",
                0,
                UNSPLIT,
            ),
            (
                "HTTP responses received",
                total.responses,
                "responses (each came in one TCP segment at least)",
                "Tcp.InSegs",
                "segments received (every socket)",
                0,
                UNSPLIT,
            ),
        ];
        self.judge("local", &rows, &k);
    }

    /// This host's HTTP bytes against the interface the connections leave
    /// from; `unsent` is what of the requests may not have left yet.
    fn local_interfaces(&mut self, total: &crate::http::HttpTotals, w: &WitnessReport, unsent: u64) {
        if w.interfaces.is_empty() {
            self.withheld.push(
                "local: HTTP bytes against the interface's: no interface holds the address the \
                 connections leave from"
                    .into(),
            );
            return;
        }
        let names: Vec<&str> = w.interfaces.iter().map(|i| i.name.as_str()).collect();
        let names = names.join("+");
        let (tx, rx) = interface_bytes(&w.interfaces);
        let (tx_src, rx_src) = (format!("{names} tx_bytes"), format!("{names} rx_bytes"));
        let bytes = |s: &str| {
            if s == tx_src {
                Some(tx)
            } else {
                Some(rx)
            }
        };
        let rows = [
            (
                "HTTP request bytes sent",
                total.request_bytes,
                "bytes (HTTP: the plaintext under TLS)",
                tx_src.as_str(),
                "bytes on the wire, headers included",
                unsent,
                UNSPLIT,
            ),
            (
                "HTTP response bytes received",
                total.response_bytes,
                "bytes (HTTP: the plaintext under TLS)",
                rx_src.as_str(),
                "bytes on the wire, headers included",
                0,
                UNSPLIT,
            ),
        ];
        self.judge("local", &rows, &bytes);
    }

    /// The server host's accepted connections and segments sent, from its
    /// counter deltas `c`.
    fn server_host(&mut self, total: &crate::http::HttpTotals, c: &std::collections::BTreeMap<String, i64>) {
        let k = |name: &str| c.get(name).map(|v| (*v).max(0) as u64);
        // A handshake whose last ACK a full listen queue dropped is a
        // connection to the client and none to the server's kernel.
        let dropped = k("TcpExt.ListenDrops")
            .unwrap_or(0)
            .max(k("TcpExt.ListenOverflows").unwrap_or(0));
        let rows = [
            (
                HTTP_OPENED,
                total.connections_opened,
                HTTP_OPENED_UNIT,
                "Tcp.PassiveOpens",
                "connections accepted on the server host (handshakes completed, every listener; \
                 those a full listen queue dropped are the tolerance)",
                dropped,
                total.connections_opened,
            ),
            (
                "HTTP responses received",
                total.responses,
                "responses (each left in one TCP segment at least)",
                "Tcp.OutSegs",
                "segments the server host sent (every socket)",
                0,
                UNSPLIT,
            ),
        ];
        // The server's end is the result's remote one.
        self.judge("remote", &rows, &k);
    }
}

/// Whether both ends ran on one machine (the same boot), whatever their
/// network namespaces: their CPU figures are then of the same CPUs.
pub fn same_machine(local: Option<&WitnessReport>, remote: Option<&WitnessReport>) -> bool {
    let boot = |w: Option<&WitnessReport>| {
        w.and_then(|w| w.scope.as_deref())
            .and_then(|s| s.split_once('/'))
            .map(|(b, _)| b.to_string())
    };
    matches!((boot(local), boot(remote)), (Some(a), Some(b)) if a == b)
}

/// Both ends' witnesses judged, and the warnings they give.
/// `max_segment`: the largest payload one TCP segment can carry on the
/// flows' paths (the path MTU less the headers), for the least segment count.
pub fn judge(
    spec: &TestSpec,
    local: Option<&WitnessReport>,
    remote: Option<&WitnessReport>,
    v6: bool,
    max_segment: Option<u32>,
) -> (WitnessResult, Vec<String>) {
    let shared = matches!((local.and_then(|l| l.scope.as_ref()), remote.and_then(|r| r.scope.as_ref())), (Some(a), Some(b)) if a == b);
    let mut out = WitnessResult {
        local: local.cloned(),
        remote: remote.cloned(),
        shared_counters: shared,
        ..Default::default()
    };
    let mut warnings = Vec::new();
    for (w, end) in [(local, "local"), (remote, "remote")] {
        if let Some(w) = w {
            let (c, warn) = judge_sockets(spec, w, end);
            out.checks.extend(c);
            warnings.extend(warn);
        }
    }
    for (w, end, peer) in [(local, "local", remote), (remote, "remote", local)] {
        if let Some(w) = w {
            let (c, warn) = judge_host(spec, w, end, v6, max_segment, peer.filter(|_| shared));
            out.checks.extend(c);
            warnings.extend(warn);
        }
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::report::TcpWitness;

    fn udp_spec() -> TestSpec {
        TestSpec::new(
            netrig_proto::KindSpec::UdpStream(netrig_proto::spec::UdpStreamSpec {
                datagram_size: 1000,
                ..Default::default()
            }),
            netrig_proto::spec::Limit::Duration { seconds: 1.0 },
        )
    }

    fn w(sent: u64, out: i64) -> WitnessReport {
        WitnessReport {
            window_s: 1.0,
            scope: Some("a".into()),
            payload_sent: sent * 1000,
            udp_messages_sent: sent,
            kernel: [("Udp.OutDatagrams".to_string(), out)].into_iter().collect(),
            ..Default::default()
        }
    }

    /// A tcp-crr end: its transactions (and failures) over the window,
    /// and the kernel's count of connections opened or accepted.
    fn crr(role: Role, transactions: u64, failures: u64, opens: i64) -> WitnessReport {
        let counter = if role == Role::Requester {
            "Tcp.ActiveOpens"
        } else {
            "Tcp.PassiveOpens"
        };
        WitnessReport {
            window_s: 1.0,
            scope: Some("a".into()),
            connections: Some(netrig_proto::report::ConnectionWitness {
                role,
                transactions,
                failures,
            }),
            kernel: [(counter.to_string(), opens)].into_iter().collect(),
            ..Default::default()
        }
    }

    /// Over MPTCP, tcp-crr's transactions are bounded by the MPTCP handshakes
    /// too: a connection that fell back to TCP is a TCP open, not an MPTCP
    /// one, so the check disagrees, and the fallback counters are warned of.
    #[test]
    fn mptcp_connections_are_bounded_by_its_handshakes_and_fallbacks_warned_of() {
        let spec = TestSpec::new(
            netrig_proto::KindSpec::TcpCrr(netrig_proto::spec::TcpCrrSpec {
                tcp: netrig_proto::spec::TcpOptions {
                    mptcp: true,
                    ..Default::default()
                },
                ..Default::default()
            }),
            netrig_proto::spec::Limit::Duration { seconds: 1.0 },
        );
        let mut client = crr(Role::Requester, 1_000, 0, 1_000);
        client.kernel.insert("MPTcpExt.MPCapableSYNACKRX".into(), 1_000);
        let mut agent = crr(Role::Responder, 1_000, 0, 1_000);
        agent.kernel.insert("MPTcpExt.MPCapableACKRX".into(), 1_000);
        let (r, warn) = judge(&spec, Some(&client), Some(&agent), false, None);
        assert!(warn.is_empty(), "{warn:?}");
        let sources: Vec<&str> = r.checks.iter().map(|c| c.kernel_source.as_str()).collect();
        assert_eq!(
            sources,
            [
                "Tcp.ActiveOpens",
                "MPTcpExt.MPCapableSYNACKRX",
                "Tcp.PassiveOpens",
                "MPTcpExt.MPCapableACKRX"
            ]
        );
        assert_eq!(r.checks[1].figure, "MPTCP connections opened");
        // Half the client's connections fell back.
        client.kernel.insert("MPTcpExt.MPCapableSYNACKRX".into(), 500);
        client
            .kernel
            .insert("MPTcpExt.MPCapableFallbackSYNACK".into(), 500);
        let (r, warn) = judge(&spec, Some(&client), Some(&agent), false, None);
        assert_eq!(r.checks[1].verdict, "disagrees");
        assert!(
            warn.iter()
                .any(|w| w.starts_with("local: 500 connection(s) fell back from MPTCP to TCP")),
            "{warn:?}"
        );
        // Without --mptcp, no MPTCP check.
        let tcp = TestSpec::new(
            netrig_proto::KindSpec::TcpCrr(Default::default()),
            netrig_proto::spec::Limit::Duration { seconds: 1.0 },
        );
        let (r, _) = judge(&tcp, Some(&client), Some(&agent), false, None);
        assert!(r.checks.iter().all(|c| c.kernel_source.starts_with("Tcp.")));
    }

    /// tcp-crr's transactions are bounded by the connections the kernel
    /// opened (client) and accepted (agent), within those in flight at the
    /// window's edges; failed ones that opened a connection are netrig's
    /// own, not other traffic; more than that is named; fewer is wrong.
    #[test]
    fn connections_per_transaction_are_bounded_by_the_opens() {
        let spec = TestSpec::new(
            netrig_proto::KindSpec::TcpCrr(Default::default()),
            netrig_proto::spec::Limit::Duration { seconds: 1.0 },
        );
        let client = crr(Role::Requester, 10_000, 40, 10_041);
        let agent = crr(Role::Responder, 10_000, 0, 10_001);
        let (r, warn) = judge(&spec, Some(&client), Some(&agent), false, None);
        assert!(warn.is_empty(), "{warn:?}");
        let sources: Vec<&str> = r.checks.iter().map(|c| c.kernel_source.as_str()).collect();
        assert_eq!(sources, ["Tcp.ActiveOpens", "Tcp.PassiveOpens"]);
        assert!(r
            .checks
            .iter()
            .all(|c| c.verdict == "agrees" && c.relation == "bound"));
        // One connection in flight at each edge (one flow, one at a time).
        assert_eq!(r.checks[0].tolerance, 2);
        assert_eq!(r.checks[0].other, Some(1));
        // 5 % more opens than netrig's: other traffic, named.
        let (_, warn) = judge(
            &spec,
            Some(&crr(Role::Requester, 10_000, 0, 10_500)),
            None,
            false,
            None,
        );
        assert!(
            warn.len() == 1 && warn[0].contains("other traffic") && warn[0].contains("Tcp.ActiveOpens"),
            "{warn:?}"
        );
        // More transactions than connections: one of the two counts is wrong.
        let (r, warn) = judge(
            &spec,
            None,
            Some(&crr(Role::Responder, 10_000, 0, 9_000)),
            false,
            None,
        );
        assert_eq!(r.checks[0].verdict, "disagrees");
        assert!(
            warn[0].contains("Tcp.PassiveOpens") && warn[0].contains("one of them is wrong"),
            "{warn:?}"
        );
        // An older peer that sent no connection counts: no check, no word.
        let (r, warn) = judge(&spec, Some(&w(0, 0)), None, false, None);
        assert!(r.checks.is_empty() && warn.is_empty(), "{:?} {warn:?}", r.checks);
    }

    /// udp-rr's ends send datagrams (requests, responses): on one host,
    /// Udp.OutDatagrams carries both, each end's check explaining the other's.
    #[test]
    fn udp_rr_datagrams_sent_are_bounded_by_the_hosts() {
        let spec = TestSpec::new(
            netrig_proto::KindSpec::UdpRr(Default::default()),
            netrig_proto::spec::Limit::Duration { seconds: 1.0 },
        );
        let (client, agent) = (w(10_000, 20_001), w(10_000, 20_001));
        let (r, warn) = judge(&spec, Some(&client), Some(&agent), false, None);
        assert!(warn.is_empty(), "{warn:?}");
        assert!(r.shared_counters);
        assert_eq!(r.checks.len(), 2, "{:?}", r.checks);
        assert!(r
            .checks
            .iter()
            .all(|c| c.verdict == "agrees" && c.other == Some(1)));
        // More requests than the host sent datagrams: wrong.
        let (r, _) = judge(&spec, Some(&w(10_000, 5_000)), None, false, None);
        assert_eq!(r.checks[0].verdict, "disagrees");
    }

    /// http: the run's totals bounded by this host's counters and the
    /// interface's bytes, and by the server host's with an agent there; a
    /// count below netrig's disagrees; what cannot be checked says why.
    #[test]
    fn http_totals_are_bounded_by_both_hosts_counts() {
        use crate::http::HttpTotals;
        let total = HttpTotals {
            requests_sent: 1000,
            request_bytes: 50_000,
            responses: 1000,
            response_bytes: 1_200_000,
            connections_opened: 10,
            errors: 0,
            ..Default::default()
        };
        let local = |opens: i64, rx: u64| WitnessReport {
            kernel: [
                ("Tcp.ActiveOpens".to_string(), opens),
                ("Tcp.OutSegs".to_string(), 2_010),
                ("Tcp.InSegs".to_string(), 2_010),
            ]
            .into_iter()
            .collect(),
            interfaces: vec![netrig_proto::report::measure::InterfaceCounters {
                name: "lo".into(),
                tx_bytes: 1_400_000,
                rx_bytes: rx,
                ..Default::default()
            }],
            ..Default::default()
        };
        let server: std::collections::BTreeMap<String, i64> = [
            ("Tcp.PassiveOpens".to_string(), 10),
            ("Tcp.OutSegs".to_string(), 2_010),
        ]
        .into_iter()
        .collect();
        let (checks, warn, withheld) = judge_http(&total, 10, 50, Ok(&local(10, 1_400_000)), Ok(&server));
        assert!(warn.is_empty() && withheld.is_empty(), "{warn:?} {withheld:?}");
        let sources: Vec<&str> = checks.iter().map(|c| c.kernel_source.as_str()).collect();
        assert_eq!(
            sources,
            [
                "Tcp.ActiveOpens",
                "Tcp.OutSegs",
                "Tcp.InSegs",
                "lo tx_bytes",
                "lo rx_bytes",
                "Tcp.PassiveOpens",
                "Tcp.OutSegs"
            ]
        );
        assert!(
            checks
                .iter()
                .all(|c| c.verdict == "agrees" && c.relation == "bound"),
            "{checks:?}"
        );
        assert_eq!(checks[3].tolerance, 500, "a request per connection may be unsent");
        // Fewer connections opened than netrig counted, fewer bytes on the
        // interface than netrig read: wrong, and said.
        let (checks, warn, _) = judge_http(&total, 10, 50, Ok(&local(7, 1_000_000)), Ok(&server));
        let bad: Vec<&str> = checks
            .iter()
            .filter(|c| c.verdict == "disagrees")
            .map(|c| c.kernel_source.as_str())
            .collect();
        assert_eq!(bad, ["Tcp.ActiveOpens", "lo rx_bytes"]);
        assert!(
            warn.len() == 2 && warn[0].contains("one of them is wrong"),
            "{warn:?}"
        );
        // No agent on the server's host, no interface found: withheld, with why.
        let mut no_if = local(10, 0);
        no_if.interfaces.clear();
        let (checks, _, withheld) = judge_http(&total, 10, 50, Ok(&no_if), Err(SERVER_NOT_WATCHED));
        assert_eq!(checks.len(), 3);
        assert!(
            withheld.len() == 2 && withheld[1].contains("--server-agent"),
            "{withheld:?}"
        );
        assert!(withheld[0].contains("no interface"), "{withheld:?}");
        // A server host's counters missing one: that check withheld.
        let partial: std::collections::BTreeMap<String, i64> =
            [("Tcp.PassiveOpens".to_string(), 12)].into_iter().collect();
        let (checks, _, withheld) = judge_http(&total, 10, 50, Err("unread"), Ok(&partial));
        assert_eq!(checks[0].verdict, "agrees");
        assert!(
            withheld[0].contains("unread") && withheld[1].contains("Tcp.OutSegs"),
            "{withheld:?}"
        );
        // A listen queue that overflowed: the client's connections whose
        // last ACK it dropped are not the server's, and not a disagreement.
        let full: std::collections::BTreeMap<String, i64> = [
            ("Tcp.PassiveOpens".to_string(), 4),
            ("TcpExt.ListenOverflows".to_string(), 6),
        ]
        .into_iter()
        .collect();
        let (checks, _, _) = judge_http(&total, 10, 50, Err("unread"), Ok(&full));
        assert_eq!((checks[0].verdict.as_str(), checks[0].tolerance), ("agrees", 6));
    }

    #[test]
    fn one_machine_is_one_boot_whatever_the_namespaces() {
        let at = |scope: &str| WitnessReport {
            scope: Some(scope.into()),
            ..Default::default()
        };
        assert!(same_machine(Some(&at("b1/net:[1]")), Some(&at("b1/net:[2]"))));
        assert!(!same_machine(Some(&at("b1/net:[1]")), Some(&at("b2/net:[1]"))));
        assert!(!same_machine(Some(&at("b1/net:[1]")), None));
    }

    #[test]
    fn a_quiet_host_agrees_and_other_traffic_is_named() {
        let (r, warn) = judge(&udp_spec(), Some(&w(10_000, 10_000)), None, false, None);
        assert!(warn.is_empty(), "{warn:?}");
        assert_eq!(r.checks.len(), 1);
        assert_eq!(r.checks[0].verdict, "agrees");
        assert_eq!(r.checks[0].ratio, Some(1.0));
        // 5 % more sends than netrig made: other traffic, named.
        let (r, warn) = judge(&udp_spec(), Some(&w(10_000, 10_500)), None, false, None);
        assert_eq!(r.checks[0].other, Some(500));
        assert!(
            warn.len() == 1 && warn[0].contains("other traffic") && warn[0].contains("Udp.OutDatagrams"),
            "{warn:?}"
        );
        // netrig claims more than the kernel sent: disagreement.
        let (r, warn) = judge(&udp_spec(), Some(&w(10_000, 9_000)), None, false, None);
        assert_eq!(r.checks[0].verdict, "disagrees");
        assert!(warn[0].contains("one of them is wrong"), "{warn:?}");
    }

    #[test]
    fn shared_host_counters_are_judged_once_and_tcp_sockets_must_match() {
        let mut spec = udp_spec();
        spec.test = netrig_proto::KindSpec::TcpStream(netrig_proto::spec::TcpStreamSpec(
            netrig_proto::spec::StreamOptions {
                message_size: 1000,
                recv_size: 1000,
                ..Default::default()
            },
        ));
        let t = |netrig: u64, kernel: u64| WitnessReport {
            scope: Some("same".into()),
            tcp: Some(TcpWitness {
                flows: 1,
                netrig_sent: netrig,
                kernel_sent: kernel,
                ..Default::default()
            }),
            ..Default::default()
        };
        let (r, warn) = judge(&spec, Some(&t(1_000_000, 1_000_500)), Some(&t(5, 5)), false, None);
        assert!(r.shared_counters);
        assert!(warn.is_empty(), "{warn:?}");
        let (_, warn) = judge(&spec, Some(&t(1_000_000, 900_000)), None, false, None);
        assert!(warn.len() == 1 && warn[0].contains("must agree"), "{warn:?}");
    }

    /// TCP data segments are bounded by what left the sockets, not by what
    /// was written: a window in which 600 flows filled their socket buffers
    /// (540 MB written, 20 MB sent) sent 3,118 segments, not the 16,465 that
    /// 540 MB would need (a failure seen on a loaded machine).
    #[test]
    fn tcp_segments_are_bounded_by_the_payload_that_left_the_sockets() {
        let mut spec = udp_spec();
        spec.flows = 300;
        spec.test = netrig_proto::KindSpec::TcpStream(netrig_proto::spec::TcpStreamSpec(Default::default()));
        let t = |written: u64, out: u64, segments: i64| WitnessReport {
            scope: Some("a".into()),
            payload_sent: written,
            payload_out: out,
            tcp: Some(TcpWitness {
                flows: 256,
                netrig_sent: written,
                kernel_sent: written,
                ..Default::default()
            }),
            kernel: [("Tcp.OutSegs".to_string(), segments)].into_iter().collect(),
            ..Default::default()
        };
        let segments = |r: &WitnessReport| {
            let (j, _) = judge(&spec, Some(r), None, false, Some(32_768));
            j.checks.into_iter().find(|c| c.figure == "TCP data segments")
        };
        let c = segments(&t(539_543_552, 20_545_536, 3_118)).expect("judged");
        assert_eq!(c.verdict, "agrees", "{c:?}");
        assert_eq!(c.netrig, 20_545_536 / 32_768);
        // Fewer segments than the payload that left needs: a disagreement.
        let c = segments(&t(539_543_552, 539_543_552, 3_118)).expect("judged");
        assert_eq!(c.verdict, "disagrees", "{c:?}");
        // An older peer's report (no payload_out): not judged.
        assert!(segments(&t(539_543_552, 0, 3_118)).is_none());
    }

    /// tcp-rr: a flow's requests and responses together against its
    /// socket's bytes both ways; the tolerance is what a flow's count may
    /// lag by at each edge (request and response, times the transactions
    /// in flight), not a stream's 128 KiB.
    #[test]
    fn tcp_rr_payload_both_ways_must_match_within_a_burst() {
        let mut rr = netrig_proto::spec::TcpRrSpec::default();
        rr.transactions.request_size = 100;
        rr.transactions.response_size = 300;
        rr.transactions.load = netrig_proto::spec::Load::Closed { burst: 4 };
        let spec = TestSpec::new(
            netrig_proto::KindSpec::TcpRr(rr),
            netrig_proto::spec::Limit::Duration { seconds: 1.0 },
        );
        let t = |netrig: u64, kernel: u64| WitnessReport {
            tcp: Some(TcpWitness {
                flows: 2,
                netrig_both_ways: netrig,
                kernel_both_ways: kernel,
                read_spread_bytes: 10,
                ..Default::default()
            }),
            ..Default::default()
        };
        let (r, warn) = judge(&spec, Some(&t(400_000, 406_410)), None, false, None);
        assert!(warn.is_empty(), "{warn:?}");
        let c = &r.checks[0];
        assert!(c.figure.contains("both ways") && c.verdict == "agrees", "{c:?}");
        // 2 edges x 2 flows x 4 in flight x 400 bytes, and the reading's spread.
        assert_eq!(c.tolerance, 6_410);
        let (r, warn) = judge(&spec, Some(&t(400_000, 406_411)), None, false, None);
        assert_eq!(r.checks[0].verdict, "disagrees");
        assert!(warn.len() == 1 && warn[0].contains("must agree"), "{warn:?}");
    }
}
