//! Agents found in DNS, the way a Kubernetes headless Service publishes them: a name starting
//! with `_` (`_netrig._tcp.netrig-agents.netrig.svc.cluster.local`) is asked for its SRV
//! records, each target then for its A and AAAA records unless the answer's additional section
//! carries them, each address with the SRV record's port; any other name is asked for A and
//! AAAA records, each address with the port given.
//!
//! The messages are hickory-proto's; the exchange is ours: UDP to one server (the first
//! `nameserver` of /etc/resolv.conf unless one is given), the answer taken only from that
//! server's address and with the query's id and question, the query sent again after 1, 2, 4 s
//! without one, and asked again over TCP when the answer comes truncated. A name without a
//! trailing dot is tried with resolv.conf's `search` domains as a pod's resolver does (first
//! when it has fewer dots than `ndots`, default 1; a pod's is 5). The whole discovery, every
//! query included, ends within its timeout; at most [`MAX_RECORDS`] records of a section and
//! addresses in all are used, and a cut is said.

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
/// The record types [`query`] and [`Answer`] name, hickory-proto's.
pub use hickory_proto::rr::RecordType;
use hickory_proto::rr::{Name, RData};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// The most records of one section of an answer, and the most addresses a discovery returns.
pub const MAX_RECORDS: usize = 1024;

/// The UDP payload we say we take (EDNS), the size DNS flag day 2020 settled on.
const EDNS_PAYLOAD: u16 = 1232;

/// The file a pod's (and any Linux host's) resolver reads.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// An agent found: its host (an SRV target, or the address itself for A and AAAA records) and
/// its control address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Found {
    pub name: String,
    pub addr: SocketAddr,
}

/// What went wrong, naming the name and the server.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("--discover: {0:?} is not a DNS name: {1}")]
    BadName(String, String),
    #[error("{path}: {source}")]
    ResolvConf { path: String, source: std::io::Error },
    #[error("no nameserver in {0}: give --dns-server")]
    NoServer(String),
    #[error("--discover {name}: no such name (NXDOMAIN) at DNS server {server}{}", tried_note(.tried))]
    NxDomain {
        name: String,
        server: SocketAddr,
        tried: Vec<String>,
    },
    #[error("--discover {name}: no {what} records at DNS server {server}{}", tried_note(.tried))]
    Empty {
        name: String,
        what: &'static str,
        server: SocketAddr,
        tried: Vec<String>,
    },
    #[error("--discover {name}: DNS server {server} answered {rcode} for {asked}")]
    Failed {
        name: String,
        asked: String,
        server: SocketAddr,
        rcode: String,
    },
    #[error("--discover {name}: no answer from DNS server {server} within {timeout:?}")]
    Timeout {
        name: String,
        server: SocketAddr,
        timeout: Duration,
    },
    #[error("--discover {name}: DNS server {server}: {source}")]
    Io {
        name: String,
        server: SocketAddr,
        source: std::io::Error,
    },
    #[error("--discover {name}: DNS server {server} sent a malformed answer: {why}")]
    Malformed {
        name: String,
        server: SocketAddr,
        why: String,
    },
}

fn tried_note(tried: &[String]) -> String {
    if tried.len() > 1 {
        format!(" (asked {})", tried.join(", "))
    } else {
        String::new()
    }
}

/// `--dns-server ADDR[:PORT]`: `10.96.0.10`, `10.96.0.10:5353`, `fd00::a`, `[fd00::a]:5353`
/// (port 53 when none is given).
pub fn parse_dns_server(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    bare.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("--dns-server: {text:?} is not ADDR or ADDR:PORT (an IP address, [v6]:PORT)"))
}

/// What /etc/resolv.conf says a resolver should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<IpAddr>,
    /// The `search` list (or `domain`), without trailing dots.
    pub search: Vec<String>,
    /// `options ndots:N`: names with fewer dots are tried with the search domains first.
    pub ndots: usize,
}

impl Default for ResolvConf {
    fn default() -> Self {
        ResolvConf {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
        }
    }
}

/// The most search domains glibc takes (since 2.26 it has no limit; musl takes 6; a
/// Kubernetes pod has 3 to 6).
const MAX_SEARCH: usize = 32;

/// resolv.conf(5): `nameserver ADDR` (a scope `%eth0` is dropped), `search DOMAIN...` and
/// `domain DOMAIN` (the last of them wins), `options ndots:N` (at most 15). Unknown lines and
/// comments (`#`, `;`) are skipped.
pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => {
                if let Some(addr) = words.next() {
                    let addr = addr.split('%').next().unwrap_or(addr);
                    if let Ok(ip) = addr.parse() {
                        conf.nameservers.push(ip);
                    }
                }
            }
            Some("search") | Some("domain") => {
                conf.search = words
                    .take(MAX_SEARCH)
                    .map(|d| d.trim_end_matches('.').to_string())
                    .filter(|d| !d.is_empty())
                    .collect();
            }
            Some("options") => {
                for opt in words {
                    if let Some(n) = opt.strip_prefix("ndots:") {
                        if let Ok(n) = n.parse::<usize>() {
                            conf.ndots = n.min(15);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    conf
}

/// The names to ask, in order, for `name` (each fully qualified, with its trailing dot): a
/// name with a trailing dot alone; else, with fewer dots than `ndots`, each search domain
/// appended then the name itself, and with as many or more the name itself first.
pub fn candidates(name: &str, search: &[String], ndots: usize) -> Vec<String> {
    if name.ends_with('.') {
        return vec![name.to_string()];
    }
    let searched = search.iter().map(|d| format!("{name}.{d}."));
    let itself = format!("{name}.");
    if name.matches('.').count() >= ndots {
        std::iter::once(itself).chain(searched).collect()
    } else {
        searched.chain(std::iter::once(itself)).collect()
    }
}

/// An SRV record of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// Fully qualified, as hickory writes it in ASCII (`agent-0.netrig-agents.netrig.svc.cluster.local.`).
    pub target: String,
}

/// How the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rcode {
    NoError,
    NxDomain,
    /// Any other (SERVFAIL, REFUSED, ...), as hickory names it.
    Other(String),
}

/// An answer's parts that discovery uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The TC bit: the server cut the answer to fit UDP; ask over TCP.
    pub truncated: bool,
    pub rcode: Rcode,
    /// The question the answer repeats (name, type), when it has one.
    pub question: Option<(String, RecordType)>,
    /// The answer section's SRV records, at most [`MAX_RECORDS`].
    pub srv: Vec<Srv>,
    /// The answer section's A and AAAA records (owner, address), at most [`MAX_RECORDS`].
    pub addresses: Vec<(String, IpAddr)>,
    /// The additional section's A and AAAA records (owner, address), at most [`MAX_RECORDS`].
    pub additional: Vec<(String, IpAddr)>,
    /// Records of those kinds past the bound, not used.
    pub cut: usize,
}

/// Why bytes are not the answer to a query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("{0} bytes, shorter than a DNS header")]
    Short(usize),
    #[error("the answer's id is {got}, the query's {want}")]
    WrongId { want: u16, got: u16 },
    #[error("not a response to a query")]
    NotAResponse,
    #[error("{0}")]
    Malformed(String),
}

/// The answer to query `query_id` in `bytes` (a whole DNS message, as UDP carries it or TCP
/// after its length): its id checked first (a message for another query is
/// [`AnswerError::WrongId`], whatever follows), then parsed by hickory-proto. Pure.
pub fn parse_answer(query_id: u16, bytes: &[u8]) -> Result<Answer, AnswerError> {
    if bytes.len() < 12 {
        return Err(AnswerError::Short(bytes.len()));
    }
    let got = u16::from_be_bytes([bytes[0], bytes[1]]);
    if got != query_id {
        return Err(AnswerError::WrongId { want: query_id, got });
    }
    let msg = Message::from_vec(bytes).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if msg.metadata.message_type != MessageType::Response || msg.metadata.op_code != OpCode::Query {
        return Err(AnswerError::NotAResponse);
    }
    let rcode = match msg.metadata.response_code {
        ResponseCode::NoError => Rcode::NoError,
        ResponseCode::NXDomain => Rcode::NxDomain,
        other => Rcode::Other(other.to_str().to_string()),
    };
    let question = msg.queries.first().map(|q| (q.name().to_ascii(), q.query_type()));
    let mut answer = Answer {
        truncated: msg.metadata.truncation,
        rcode,
        question,
        srv: Vec::new(),
        addresses: Vec::new(),
        additional: Vec::new(),
        cut: 0,
    };
    for record in &msg.answers {
        match &record.data {
            RData::SRV(srv) => {
                if answer.srv.len() < MAX_RECORDS {
                    answer.srv.push(Srv {
                        priority: srv.priority,
                        weight: srv.weight,
                        port: srv.port,
                        target: srv.target.to_ascii(),
                    });
                } else {
                    answer.cut += 1;
                }
            }
            RData::A(_) | RData::AAAA(_) => push_address(&mut answer.addresses, &mut answer.cut, record),
            _ => {}
        }
    }
    for record in &msg.additionals {
        if matches!(record.data, RData::A(_) | RData::AAAA(_)) {
            push_address(&mut answer.additional, &mut answer.cut, record);
        }
    }
    Ok(answer)
}

fn push_address(to: &mut Vec<(String, IpAddr)>, cut: &mut usize, record: &hickory_proto::rr::Record) {
    let ip = match &record.data {
        RData::A(a) => IpAddr::V4(a.0),
        RData::AAAA(a) => IpAddr::V6(a.0),
        _ => return,
    };
    if to.len() < MAX_RECORDS {
        to.push((record.name.to_ascii(), ip));
    } else {
        *cut += 1;
    }
}

/// A DNS query of `name` (fully qualified) for `rtype`, with recursion desired and EDNS: its
/// id and its bytes.
pub fn query(name: &str, rtype: RecordType) -> Result<(u16, Vec<u8>), String> {
    let qname = Name::from_ascii(name).map_err(|e| e.to_string())?;
    let mut msg = Message::query();
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(qname, rtype));
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD);
    msg.set_edns(edns);
    let bytes = msg.to_vec().map_err(|e| e.to_string())?;
    Ok((msg.metadata.id, bytes))
}

/// Where and how to ask: a server, and the search list and ndots of resolv.conf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    pub server: SocketAddr,
    pub search: Vec<String>,
    pub ndots: usize,
}

impl Resolver {
    /// The system's: /etc/resolv.conf's first nameserver (port 53) unless `server` is given,
    /// and its search list and ndots either way.
    pub fn system(server: Option<SocketAddr>) -> Result<Resolver, DiscoverError> {
        let text = match std::fs::read_to_string(RESOLV_CONF) {
            Ok(t) => t,
            // Without the file, a given server still works (no search list).
            Err(_) if server.is_some() => String::new(),
            Err(source) => {
                return Err(DiscoverError::ResolvConf {
                    path: RESOLV_CONF.into(),
                    source,
                })
            }
        };
        let conf = parse_resolv_conf(&text);
        let server = match server {
            Some(s) => s,
            None => SocketAddr::new(
                *conf
                    .nameservers
                    .first()
                    .ok_or_else(|| DiscoverError::NoServer(RESOLV_CONF.into()))?,
                53,
            ),
        };
        Ok(Resolver {
            server,
            search: conf.search,
            ndots: conf.ndots,
        })
    }
}

/// What a discovery found, and what it has to say (records cut, targets without addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// Sorted, without duplicates, at most [`MAX_RECORDS`].
    pub found: Vec<Found>,
    /// The name that answered (fully qualified).
    pub answered: String,
    pub warnings: Vec<String>,
}

/// The agents `name` publishes, asked of `server` (default: /etc/resolv.conf's first
/// nameserver), sorted and without duplicates; `port` for A and AAAA records (SRV records
/// carry theirs). Everything within `timeout`. Warnings (records cut at [`MAX_RECORDS`], an SRV
/// target without an address) go to the log; [`discover_with`] returns them.
pub fn discover(
    name: &str,
    port: u16,
    server: Option<SocketAddr>,
    timeout: Duration,
) -> Result<Vec<Found>, DiscoverError> {
    let resolver = Resolver::system(server)?;
    let d = discover_with(name, port, &resolver, timeout)?;
    for w in &d.warnings {
        log::warn!("{w}");
    }
    Ok(d.found)
}

/// [`discover`] with the resolver given.
pub fn discover_with(
    name: &str,
    port: u16,
    resolver: &Resolver,
    timeout: Duration,
) -> Result<Discovery, DiscoverError> {
    let name = name.trim();
    if name.is_empty() || name == "." {
        return Err(DiscoverError::BadName(name.into(), "empty".into()));
    }
    let mut ask = Asker {
        name: name.to_string(),
        server: resolver.server,
        deadline: Instant::now() + timeout,
        timeout,
    };
    let srv = name.starts_with('_');
    let tried = candidates(name, &resolver.search, resolver.ndots);
    let mut last_empty = false;
    for qname in &tried {
        Name::from_ascii(qname).map_err(|e| DiscoverError::BadName(name.into(), e.to_string()))?;
        let got = if srv {
            discover_srv(&mut ask, qname)?
        } else {
            discover_addresses(&mut ask, qname, port)?
        };
        match got {
            Lookup::NxDomain => {}
            Lookup::Empty => last_empty = true,
            Lookup::Found(found, mut warnings) => {
                let mut found: Vec<Found> = found.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
                if found.len() > MAX_RECORDS {
                    warnings.push(format!(
                        "--discover {name}: {} addresses, the first {MAX_RECORDS} used",
                        found.len()
                    ));
                    found.truncate(MAX_RECORDS);
                }
                return Ok(Discovery {
                    found,
                    answered: qname.clone(),
                    warnings,
                });
            }
        }
    }
    let what = if srv { "SRV" } else { "A or AAAA" };
    if last_empty {
        Err(DiscoverError::Empty {
            name: name.into(),
            what,
            server: resolver.server,
            tried,
        })
    } else {
        Err(DiscoverError::NxDomain {
            name: name.into(),
            server: resolver.server,
            tried,
        })
    }
}

enum Lookup {
    NxDomain,
    /// The name exists but has no records of the kind asked (or none usable).
    Empty,
    Found(Vec<Found>, Vec<String>),
}

fn discover_srv(ask: &mut Asker, qname: &str) -> Result<Lookup, DiscoverError> {
    let answer = ask.ask(qname, RecordType::SRV)?;
    // (Other codes are ask()'s errors.)
    if answer.rcode == Rcode::NxDomain {
        return Ok(Lookup::NxDomain);
    }
    let mut warnings = Vec::new();
    if answer.cut > 0 {
        warnings.push(format!(
            "--discover {}: {} records past the first {MAX_RECORDS} of a section not used",
            ask.name, answer.cut
        ));
    }
    // RFC 2782: a target of "." says the service is not available there.
    let srvs: Vec<&Srv> = answer.srv.iter().filter(|s| s.target != ".").collect();
    if srvs.is_empty() {
        return Ok(Lookup::Empty);
    }
    let mut found = Vec::new();
    let mut resolved: std::collections::BTreeMap<String, Vec<IpAddr>> = Default::default();
    for s in &srvs {
        let key = s.target.to_ascii_lowercase();
        if !resolved.contains_key(&key) {
            let mut ips: Vec<IpAddr> = answer
                .additional
                .iter()
                .filter(|(owner, _)| owner.eq_ignore_ascii_case(&s.target))
                .map(|(_, ip)| *ip)
                .collect();
            if ips.is_empty() {
                ips = target_addresses(ask, &s.target, &mut warnings)?;
            }
            resolved.insert(key.clone(), ips);
        }
        let ips = &resolved[&key];
        if ips.is_empty() {
            warnings.push(format!(
                "--discover {}: SRV target {} has no A or AAAA record, left out",
                ask.name, s.target
            ));
        }
        let host = s.target.trim_end_matches('.').to_string();
        found.extend(ips.iter().map(|ip| Found {
            name: host.clone(),
            addr: SocketAddr::new(*ip, s.port),
        }));
        if found.len() > MAX_RECORDS {
            warnings.push(format!(
                "--discover {}: more than {MAX_RECORDS} addresses, the rest of the targets not asked",
                ask.name
            ));
            break;
        }
    }
    if found.is_empty() {
        return Ok(Lookup::Empty);
    }
    Ok(Lookup::Found(found, warnings))
}

/// An SRV target's A and AAAA records (no search list: targets are fully qualified).
fn target_addresses(
    ask: &mut Asker,
    target: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<IpAddr>, DiscoverError> {
    let mut ips = Vec::new();
    for rtype in [RecordType::A, RecordType::AAAA] {
        let a = ask.ask(target, rtype)?;
        if a.rcode == Rcode::NxDomain {
            break;
        }
        if a.cut > 0 {
            warnings.push(format!(
                "--discover {}: {target}: {} records past the first {MAX_RECORDS} not used",
                ask.name, a.cut
            ));
        }
        ips.extend(a.addresses.iter().map(|(_, ip)| *ip));
    }
    Ok(ips)
}

fn discover_addresses(ask: &mut Asker, qname: &str, port: u16) -> Result<Lookup, DiscoverError> {
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    for rtype in [RecordType::A, RecordType::AAAA] {
        let a = ask.ask(qname, rtype)?;
        if a.rcode == Rcode::NxDomain {
            return Ok(Lookup::NxDomain);
        }
        if a.cut > 0 {
            warnings.push(format!(
                "--discover {}: {} records past the first {MAX_RECORDS} not used",
                ask.name, a.cut
            ));
        }
        found.extend(a.addresses.iter().map(|(_, ip)| Found {
            name: ip.to_string(),
            addr: SocketAddr::new(*ip, port),
        }));
    }
    if found.is_empty() {
        return Ok(Lookup::Empty);
    }
    Ok(Lookup::Found(found, warnings))
}

/// Asks one server, within one deadline for all its queries.
struct Asker {
    /// The name as the user gave it, for messages.
    name: String,
    server: SocketAddr,
    deadline: Instant,
    timeout: Duration,
}

impl Asker {
    fn timeout(&self) -> DiscoverError {
        DiscoverError::Timeout {
            name: self.name.clone(),
            server: self.server,
            timeout: self.timeout,
        }
    }

    fn io(&self, source: std::io::Error) -> DiscoverError {
        DiscoverError::Io {
            name: self.name.clone(),
            server: self.server,
            source,
        }
    }

    fn remaining(&self) -> Result<Duration, DiscoverError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(self.timeout())
        } else {
            Ok(left)
        }
    }

    /// `qname`'s `rtype` records: NOERROR and NXDOMAIN answers; any other code is an error.
    fn ask(&mut self, qname: &str, rtype: RecordType) -> Result<Answer, DiscoverError> {
        let (id, bytes) = query(qname, rtype).map_err(|e| DiscoverError::BadName(qname.into(), e))?;
        let want_q = Name::from_ascii(qname)
            .map_err(|e| DiscoverError::BadName(qname.into(), e.to_string()))?
            .to_ascii();
        let mut answer = self.udp(id, &bytes, &want_q, rtype)?;
        if answer.truncated {
            answer = self.tcp(id, &bytes, &want_q, rtype)?;
        }
        match &answer.rcode {
            Rcode::NoError | Rcode::NxDomain => Ok(answer),
            Rcode::Other(code) => Err(DiscoverError::Failed {
                name: self.name.clone(),
                asked: format!("{qname} {rtype}"),
                server: self.server,
                rcode: code.clone(),
            }),
        }
    }

    fn malformed(&self, why: impl ToString) -> DiscoverError {
        DiscoverError::Malformed {
            name: self.name.clone(),
            server: self.server,
            why: why.to_string(),
        }
    }

    /// Whether `answer` repeats the question asked (a server need not, but one that repeats
    /// another question answered another query).
    fn same_question(answer: &Answer, want_q: &str, rtype: RecordType) -> bool {
        match &answer.question {
            None => true,
            Some((q, t)) => *t == rtype && q.eq_ignore_ascii_case(want_q),
        }
    }

    fn udp(&self, id: u16, query: &[u8], want_q: &str, rtype: RecordType) -> Result<Answer, DiscoverError> {
        let local: SocketAddr = if self.server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let sock = UdpSocket::bind(local).map_err(|e| self.io(e))?;
        let mut buf = vec![0u8; 65535];
        let mut resend = Duration::from_secs(1);
        loop {
            sock.send_to(query, self.server).map_err(|e| self.io(e))?;
            let resend_at = Instant::now() + resend;
            resend *= 2;
            loop {
                let left = self.remaining()?;
                let wait = left.min(resend_at.saturating_duration_since(Instant::now()));
                if wait.is_zero() {
                    break; // send again
                }
                sock.set_read_timeout(Some(wait)).map_err(|e| self.io(e))?;
                let (n, from) = match sock.recv_from(&mut buf) {
                    Ok(got) => got,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        continue
                    }
                    // A refusal (ICMP port unreachable) is worth saying at once.
                    Err(e) => return Err(self.io(e)),
                };
                if from != self.server {
                    continue;
                }
                match parse_answer(id, &buf[..n]) {
                    Ok(a) if Self::same_question(&a, want_q, rtype) => return Ok(a),
                    // Another query's answer, or not an answer: not ours, wait on.
                    Ok(_)
                    | Err(AnswerError::WrongId { .. })
                    | Err(AnswerError::Short(_))
                    | Err(AnswerError::NotAResponse) => continue,
                    Err(e) => return Err(self.malformed(e)),
                }
            }
        }
    }

    fn tcp(&self, id: u16, query: &[u8], want_q: &str, rtype: RecordType) -> Result<Answer, DiscoverError> {
        let map = |e: std::io::Error| {
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                self.timeout()
            } else {
                self.io(e)
            }
        };
        let mut stream = TcpStream::connect_timeout(&self.server, self.remaining()?).map_err(map)?;
        let mut framed = Vec::with_capacity(query.len() + 2);
        framed.extend_from_slice(&(query.len() as u16).to_be_bytes());
        framed.extend_from_slice(query);
        stream.set_write_timeout(Some(self.remaining()?)).map_err(map)?;
        stream.write_all(&framed).map_err(map)?;
        let mut read_exact = |buf: &mut [u8]| -> Result<(), DiscoverError> {
            let mut at = 0;
            while at < buf.len() {
                stream.set_read_timeout(Some(self.remaining()?)).map_err(map)?;
                match stream.read(&mut buf[at..]) {
                    Ok(0) => return Err(self.malformed("the TCP connection closed mid-answer")),
                    Ok(n) => at += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(map(e)),
                }
            }
            Ok(())
        };
        let mut len = [0u8; 2];
        read_exact(&mut len)?;
        // At most 65,535 bytes: the length's own bound.
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        read_exact(&mut buf)?;
        let answer = parse_answer(id, &buf).map_err(|e| self.malformed(e))?;
        if !Self::same_question(&answer, want_q, rtype) {
            return Err(self.malformed("the TCP answer is to another question"));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests;
