//! The command line.

use crate::units::{parse_seconds, parse_size, parse_size_u32};
use clap::{Args, Parser, Subcommand};
use std::net::IpAddr;

#[derive(Debug, Parser)]
#[command(
    name = "netrig",
    version,
    about = "A network performance lab in one binary",
    long_about = "A network performance lab in one binary.\n\nWithout a subcommand, runs `netrig quick`: a short loopback suite against an in-process agent.\nOn a remote host run `netrig serve`, then `netrig tcp-stream -H HOST` here."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Short loopback suite against an in-process agent (the embedded default).
    Quick(QuickArgs),
    /// Run the agent (like netserver or iperf3 -s), in the foreground.
    Serve(ServeArgs),
    /// TCP stream, client to agent (netperf TCP_STREAM).
    TcpStream(StreamArgs),
    /// TCP stream, agent to client (netperf TCP_MAERTS).
    TcpMaerts(StreamArgs),
    /// TCP streams both ways at once, on separate connections.
    TcpBidir(StreamArgs),
    /// TCP request/response on persistent connections (netperf TCP_RR): transactions/s and latency.
    TcpRr(RrArgs),
    /// UDP datagrams at a set rate: loss, jitter, reordering, duplicates (iperf3 -u).
    UdpStream(UdpArgs),
    /// UDP request/response (netperf UDP_RR): lost datagrams are timed out, counted, and the flow goes on.
    UdpRr(UdpRrArgs),
    /// TCP connect/request/response/close, a new connection per transaction (netperf TCP_CRR):
    /// transactions/s, latency and failed connections by reason.
    TcpCrr(CrrArgs),
}

#[derive(Debug, Args)]
pub struct QuickArgs {
    /// Seconds per test.
    #[arg(short = 'l', long = "length", short_alias = 't', alias = "time", default_value = "2", value_parser = parse_seconds, value_name = "SECONDS")]
    pub length: f64,
    /// Use IPv6 loopback (::1) instead of 127.0.0.1.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long, short_alias = 'J')]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default: every IPv6 and IPv4 address).
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Port for control and data connections.
    #[arg(short = 'p', long = "port", default_value_t = netrig_proto::DEFAULT_PORT)]
    pub port: u16,
    /// Control sessions served at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_sessions: u32,
    /// Flows per direction in one test.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_flows: u32,
    /// Longest test, in seconds.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub max_duration: u64,
    /// Worker threads one test may ask for (-T).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_workers: u32,
    /// Buffer memory one test may make the agent allocate (workers x buffers of -m, -M, -r); K/M/G = 2^10/2^20/2^30.
    #[arg(long = "max-buffer", default_value = "1G", value_parser = parse_size, value_name = "SIZE")]
    pub max_buffer: u64,
    /// Log only warnings.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Agent host: a name, an IPv4 or an IPv6 literal. Without it, an in-process agent on loopback.
    #[arg(short = 'H', long = "host")]
    pub host: Option<String>,
    /// Agent port.
    #[arg(short = 'p', long = "port", default_value_t = netrig_proto::DEFAULT_PORT)]
    pub port: u16,
    /// IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Local address for every connection of this client.
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Seconds to wait for each connection to the agent.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub connect_timeout: f64,
}

/// Options every data test takes.
#[derive(Debug, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Test length in seconds (default 10; -t as iperf3).
    #[arg(short = 'l', long = "length", short_alias = 't', alias = "time", value_parser = parse_seconds, value_name = "SECONDS")]
    pub length: Option<f64>,
    /// Local SO_SNDBUF and SO_RCVBUF (the kernel doubles it and caps it at wmem_max/rmem_max).
    #[arg(short = 's', long = "local-sockbuf", value_parser = parse_size_u32)]
    pub local_sockbuf: Option<u32>,
    /// Remote (agent) SO_SNDBUF and SO_RCVBUF.
    #[arg(short = 'S', long = "remote-sockbuf", value_parser = parse_size_u32)]
    pub remote_sockbuf: Option<u32>,
    /// Parallel flows (per direction).
    #[arg(short = 'P', long = "parallel", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub parallel: u32,
    /// Worker threads on each end, each with its own event loop (default: the number of CPUs).
    #[arg(short = 'T', long = "workers", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub workers: Option<u32>,
    /// Pin this end's worker threads to these CPUs, round robin: "1", "0-3", "0,2,4" (netperf's
    /// -T; only the workers, which carry the data, are pinned).
    #[arg(long = "cpus", value_name = "LIST", value_parser = parse_cpu_list, conflicts_with = "affinity")]
    pub cpus: Option<CpuList>,
    /// Pin the agent's worker threads to these CPUs of its host, round robin.
    #[arg(long = "remote-cpus", value_name = "LIST", value_parser = parse_cpu_list, conflicts_with = "affinity")]
    pub remote_cpus: Option<CpuList>,
    /// As iperf3's -A: this end's workers on CPU N and, with ",M", the agent's on CPU M.
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]", value_parser = parse_affinity)]
    pub affinity: Option<(u32, Option<u32>)>,
    /// DSCP (0-63) on the data packets of both directions.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63), conflicts_with = "tos")]
    pub dscp: Option<u8>,
    /// Whole IP TOS / IPv6 traffic-class byte (0-255) on the data packets of both directions.
    #[arg(long, value_parser = clap::value_parser!(u8))]
    pub tos: Option<u8>,
    /// SO_PRIORITY (0-7) on both ends' data sockets.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=7))]
    pub priority: Option<u32>,
    /// TCP_NODELAY on both ends.
    #[arg(long)]
    pub nodelay: bool,
    /// Congestion control algorithm on both ends (e.g. cubic, bbr, reno).
    #[arg(long = "cc", value_name = "ALGO")]
    pub cc: Option<String>,
    /// TCP_MAXSEG on the client's sockets, before connect (it caps both directions).
    #[arg(long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE per data socket on both ends, bits/s with K/M/G as -b (iperf3's
    /// --fq-rate): the kernel paces each flow; TCP paces by itself, UDP needs the fq qdisc.
    #[arg(long = "max-pacing-rate", alias = "fq-rate", value_name = "RATE", value_parser = parse_rate)]
    pub max_pacing_rate: Option<u64>,
    /// Interim reports every SECONDS (at least 0.1): bytes, rate, retransmits and cwnd for TCP
    /// streams; jitter and lost/total for UDP streams; transactions/s for request/response.
    #[arg(short = 'i', long = "interval", value_parser = parse_seconds, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// Leave the first SECONDS out of the results (warm-up; -O as iperf3).
    #[arg(long, short_alias = 'O', default_value = "0", value_parser = parse_seconds, value_name = "SECONDS")]
    pub omit: f64,
    /// Report local CPU utilisation (measured by default; accepted as in netperf).
    #[arg(short = 'c', long = "local-cpu")]
    pub local_cpu: bool,
    /// Report remote CPU utilisation (measured by default; accepted as in netperf).
    #[arg(short = 'C', long = "remote-cpu")]
    pub remote_cpu: bool,
    /// Do not read /proc/stat on either end (to measure what measuring costs).
    #[arg(long = "no-cpu", conflicts_with_all = ["local_cpu", "remote_cpu"])]
    pub no_cpu: bool,
    /// Print one JSON document on stdout instead of the table (-J as iperf3).
    #[arg(long, short_alias = 'J')]
    pub json: bool,
    /// As iperf3's --json-stream: one JSON object per line on stdout as the test goes,
    /// {"event": "interval", "data": ...} for each -i interval, then {"event": "end", "data":
    /// <the --json document>}, or {"event": "error", "data": "..."} if the test fails.
    #[arg(long = "json-stream", conflicts_with = "json")]
    pub json_stream: bool,
}

#[derive(Debug, Args)]
pub struct StreamArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Send this many bytes per direction (spread over the flows) instead of a timed test.
    #[arg(short = 'n', long = "bytes", value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Bytes per send() call: 32, 16K, 1M.
    #[arg(short = 'm', long = "message-size", default_value = "128K", value_parser = parse_size_u32)]
    pub message_size: u32,
    /// Bytes per recv() call.
    #[arg(short = 'M', long = "recv-size", default_value = "128K", value_parser = parse_size_u32)]
    pub recv_size: u32,
    #[command(flatten)]
    pub pace: PaceArgs,
    /// Send each message with sendfile(2) from an in-memory file instead of send(2) from a buffer,
    /// as iperf3's -Z: the sending end (the client for tcp-stream, the agent for tcp-maerts, both
    /// for tcp-bidir) skips the copy from user memory. Receivers read as usual.
    #[arg(short = 'Z', long = "zerocopy")]
    pub zerocopy: bool,
}

/// A sending rate for stream tests, kept by the sending application (the
/// kernel's own pacing is --max-pacing-rate).
#[derive(Debug, Args)]
pub struct PaceArgs {
    /// Rate per flow in bits/s of payload, K/M/G = 10^3/10^6/10^9 as iperf: 20M, 1G; 0 or absent:
    /// as fast as possible. Whichever end sends keeps it, message by message.
    #[arg(short = 'b', long = "bitrate", value_parser = parse_rate)]
    pub bitrate: Option<u64>,
    /// With -b: the pacing quantum in µs. The sender wakes at most this often and sends what falls
    /// due within it, never ahead by more; smaller is smoother and costs more CPU (default 100;
    /// iperf3's --pacing-timer defaults to 1000).
    #[arg(long = "pacing-us", value_name = "US")]
    pub pacing_us: Option<u32>,
}

#[derive(Debug, Args)]
pub struct RrArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Request and response sizes in bytes, as netperf's -r: "1,1", "64,1K", "128" (both).
    #[arg(short = 'r', long = "request-response", default_value = "1,1", value_parser = parse_req_resp)]
    pub request_response: (u32, u32),
    /// Transactions in flight per flow, closed loop (netperf's -b).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub burst: u32,
    /// Open loop: transactions per second per flow, sent on schedule whatever the responses do;
    /// latency is timed from when each request was due.
    #[arg(long, value_name = "TPS")]
    pub rate: Option<f64>,
    /// With --rate: exponential inter-arrival times (a Poisson process).
    #[arg(long, requires = "rate")]
    pub poisson: bool,
    /// With --rate: wake this many µs before each request is due and spin (polling the sockets)
    /// until it is, so the generator's own wake-up delay does not count as latency. 0: sleep until
    /// due. Default: learned from how late the timer wakes (10 to 500 µs, at most a quarter of the
    /// mean gap between a worker's requests). Spinning costs client CPU: it shows in the local CPU
    /// utilisation, service demand and the workers' busy %.
    #[arg(long = "spin-us", value_name = "US", requires = "rate")]
    pub spin_us: Option<u32>,
}

#[derive(Debug, Args)]
pub struct CrrArgs {
    #[command(flatten)]
    pub rr: RrArgs,
    /// Longest a transaction may take, from connect to its last response byte; later counts as
    /// timed out (default 1; --connect-timeout is for the control connection).
    #[arg(long = "timeout", alias = "crr-timeout", value_name = "SECONDS", value_parser = parse_seconds)]
    pub timeout: Option<f64>,
}

#[derive(Debug, Args)]
pub struct UdpArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Datagram size in bytes (UDP payload, at least 28: each carries a header). Default: the
    /// largest payload of one unfragmented datagram on the path to the agent, at most an Ethernet
    /// frame's (1472 bytes over IPv4, 1452 over IPv6; e.g. 1232 over IPv6 on a 1280-byte MTU path).
    #[arg(short = 'm', long = "message-size", value_parser = parse_size_u32)]
    pub message_size: Option<u32>,
    #[command(flatten)]
    pub pace: PaceArgs,
    /// Reverse: the agent sends, the client receives.
    #[arg(short = 'R', long = "reverse")]
    pub reverse: bool,
    /// One datagram per send and receive, without UDP GSO/GRO (as iperf3 does; for paths where
    /// offload would not happen or to measure per-datagram cost).
    #[arg(long = "no-gso")]
    pub no_gso: bool,
}

#[derive(Debug, Args)]
pub struct UdpRrArgs {
    #[command(flatten)]
    pub rr: RrArgs,
    /// A request with no response after this many seconds counts as lost (default 1).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub timeout: Option<f64>,
}

/// A rate in bits/s with decimal suffixes (as iperf reads -b).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a rate: use bits/s with an optional K, M or G, e.g. 20M"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{s:?} must be a non-negative rate"));
    }
    Ok((v * mult).round() as u64)
}

/// A list of CPU numbers (`--cpus`, `--remote-cpus`), in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuList(pub Vec<u32>);

/// "1", "0-3", "0,2,4-5", as Linux writes CPU lists.
pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    let bad = || format!("{s:?} is not a CPU list: use numbers and ranges, e.g. 1, 0-3 or 0,2,4-5");
    let num = |x: &str| x.trim().parse::<u32>().map_err(|_| bad());
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi || hi > netrig_proto::spec::MAX_CPU {
            return Err(format!(
                "{s:?}: CPUs are 0..={} in rising ranges",
                netrig_proto::spec::MAX_CPU
            ));
        }
        cpus.extend(lo..=hi);
        if cpus.len() > netrig_proto::spec::MAX_CPU_LIST {
            return Err(format!(
                "{s:?}: at most {} CPUs",
                netrig_proto::spec::MAX_CPU_LIST
            ));
        }
    }
    Ok(CpuList(cpus))
}

/// iperf3's -A: "N" or "N,M".
pub fn parse_affinity(s: &str) -> Result<(u32, Option<u32>), String> {
    let bad = || format!("{s:?}: use N (this end's CPU) or N,M (and the agent's), e.g. 1,0");
    let mut parts = s.split(',');
    let n = parts.next().and_then(|x| x.trim().parse().ok()).ok_or_else(bad)?;
    let m = match parts.next() {
        Some(x) => Some(x.trim().parse().map_err(|_| bad())?),
        None => None,
    };
    if parts.next().is_some()
        || n > netrig_proto::spec::MAX_CPU
        || m.is_some_and(|m| m > netrig_proto::spec::MAX_CPU)
    {
        return Err(bad());
    }
    Ok((n, m))
}

/// "REQ,RESP" or "SIZE" with size suffixes.
pub fn parse_req_resp(s: &str) -> Result<(u32, u32), String> {
    let mut parts = s.split(',');
    let req = parse_size_u32(parts.next().unwrap_or(""))?;
    let resp = match parts.next() {
        Some(r) => parse_size_u32(r)?,
        None => req,
    };
    if parts.next().is_some() {
        return Err(format!("{s:?}: use REQ,RESP, e.g. 1,1 or 64,1K"));
    }
    Ok((req, resp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// clap's own consistency checks (duplicate short options, aliases
    /// that collide), which a release build does not run.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cpu_lists_and_affinity() {
        assert_eq!(parse_cpu_list("1").unwrap().0, vec![1]);
        assert_eq!(parse_cpu_list("0-2,5").unwrap().0, vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("3,1").unwrap().0, vec![3, 1], "the order given");
        for bad in ["", "a", "3-1", "0-5000", "1,,2", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_affinity("2").unwrap(), (2, None));
        assert_eq!(parse_affinity("2,3").unwrap(), (2, Some(3)));
        for bad in ["", "x", "1,2,3", "1,", "9999"] {
            assert!(parse_affinity(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn iperf3_spellings_are_accepted() {
        let c = Cli::try_parse_from(["netrig", "tcp-stream", "-t", "3", "-O", "1", "-J"]).unwrap();
        let Some(Command::TcpStream(a)) = c.command else {
            panic!("not tcp-stream")
        };
        assert_eq!(a.common.length, Some(3.0));
        assert_eq!(a.common.omit, 1.0);
        assert!(a.common.json);
    }
}
