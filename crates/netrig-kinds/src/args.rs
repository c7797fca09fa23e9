//! The option groups kinds share on the command line, and how each turns
//! into its part of a spec. A kind's own options are in its module; it
//! flattens these.

use crate::kind::{LocalEnd, Planned};
use crate::units::{parse_seconds, parse_size, parse_size_u32};
use clap::Args;
use netrig_engine::sockopt::SocketSettings;
use netrig_proto::spec::{
    KindSpec, Limit, Load, Pace, RemoteHooks, SocketOptions, TcpOptions, Transactions, MAX_CPU, MAX_CPU_LIST,
};
use netrig_proto::TestSpec;

/// Seconds measured when neither `-l` nor `-t` is given (after `--omit`).
pub const DEFAULT_MEASURED_S: f64 = 10.0;

/// Options every test takes.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Test length in seconds, --omit included: -l 12 --omit 2 measures 10 s (netperf's -l).
    /// Default: 10 s measured, after --omit.
    #[arg(short = 'l', long = "length", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    pub length: Option<f64>,
    /// iperf3's -t: SECONDS measured after the omitted ones, so the test runs -O + -t
    /// (-t 2 -O 1: 3 s, the last 2 measured), as in iperf3.
    #[arg(short = 't', long = "time", value_parser = parse_seconds, value_name = "SECONDS", conflicts_with = "length", help_heading = "How long")]
    pub time: Option<f64>,
    /// Local SO_SNDBUF and SO_RCVBUF, K/M/G = 1024-based (the kernel doubles it and caps it at wmem_max/rmem_max).
    #[arg(short = 's', long = "local-sockbuf", value_parser = parse_size_u32, value_name = "SIZE", help_heading = "Sizes and buffers")]
    pub local_sockbuf: Option<u32>,
    /// Remote (agent) SO_SNDBUF and SO_RCVBUF.
    #[arg(short = 'S', long = "remote-sockbuf", value_parser = parse_size_u32, value_name = "SIZE", help_heading = "Sizes and buffers")]
    pub remote_sockbuf: Option<u32>,
    /// Parallel flows (per direction).
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000), help_heading = "Flows, workers and CPUs")]
    pub parallel: u32,
    /// Worker threads on each end, each with its own event loop (default: the number of CPUs).
    #[arg(short = 'T', long = "workers", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = "Flows, workers and CPUs")]
    pub workers: Option<u32>,
    /// Pin this end's worker threads to these CPUs, round robin: "1", "0-3", "0,2,4" (netperf's
    /// -T; only the workers, which carry the data, are pinned).
    #[arg(long = "cpus", value_name = "LIST", value_parser = parse_cpu_list, conflicts_with = "affinity", help_heading = "Flows, workers and CPUs")]
    pub cpus: Option<CpuList>,
    /// Pin the agent's worker threads to these CPUs of its host, round robin.
    #[arg(long = "remote-cpus", value_name = "LIST", value_parser = parse_cpu_list, conflicts_with = "affinity", help_heading = "Flows, workers and CPUs")]
    pub remote_cpus: Option<CpuList>,
    /// As iperf3's -A: this end's workers on CPU N and, with ",M", the agent's on CPU M.
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]", value_parser = parse_affinity, help_heading = "Flows, workers and CPUs")]
    pub affinity: Option<(u32, Option<u32>)>,
    /// DSCP (0-63) on the data packets of both directions.
    #[arg(long, value_name = "0-63", value_parser = clap::value_parser!(u8).range(0..=63), conflicts_with = "tos", help_heading = "Marking")]
    pub dscp: Option<u8>,
    /// Whole IP TOS / IPv6 traffic-class byte (0-255) on the data packets of both directions.
    #[arg(long, value_name = "BYTE", value_parser = clap::value_parser!(u8), help_heading = "Marking")]
    pub tos: Option<u8>,
    /// SO_PRIORITY (0-7) on both ends' data sockets.
    #[arg(long, value_name = "0-7", value_parser = clap::value_parser!(u32).range(0..=7), help_heading = "Marking")]
    pub priority: Option<u32>,
    /// TCP_NODELAY on both ends (TCP tests).
    #[arg(long, help_heading = "TCP")]
    pub nodelay: bool,
    /// Congestion control algorithm on both ends (TCP tests; e.g. cubic, bbr, reno).
    #[arg(long = "cc", value_name = "ALGO", help_heading = "TCP")]
    pub cc: Option<String>,
    /// Multipath TCP on both ends' data connections (iperf3's --mptcp; TCP tests): IPPROTO_MPTCP
    /// sockets, which fall back to TCP (with a warning) where the path does not take MPTCP.
    #[arg(long, help_heading = "TCP")]
    pub mptcp: bool,
    /// TCP_MAXSEG on the client's sockets, before connect (TCP tests; it caps both directions).
    #[arg(long, value_name = "BYTES", help_heading = "TCP")]
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE per data socket on both ends, bits/s with K/M/G as -b (iperf3's
    /// --fq-rate): the kernel paces each flow; TCP paces by itself, UDP needs the fq qdisc.
    #[arg(long = "max-pacing-rate", alias = "fq-rate", value_name = "RATE", value_parser = parse_rate, help_heading = "Rate")]
    pub max_pacing_rate: Option<u64>,
    /// Interim reports every SECONDS (at least 0.1): bytes, rate, retransmits and cwnd for TCP
    /// streams; jitter and lost/total for UDP streams; transactions/s for request/response.
    #[arg(short = 'i', long = "interval", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    pub interval: Option<f64>,
    /// Leave the first SECONDS out of the results (warm-up; -O as iperf3): inside -l's length,
    /// before -t's.
    #[arg(long, short_alias = 'O', default_value = "0", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    pub omit: f64,
    /// Report local CPU utilisation (measured by default; accepted as in netperf).
    #[arg(short = 'c', long = "local-cpu", help_heading = "CPU")]
    pub local_cpu: bool,
    /// Report remote CPU utilisation (measured by default; accepted as in netperf).
    #[arg(short = 'C', long = "remote-cpu", help_heading = "CPU")]
    pub remote_cpu: bool,
    /// Do not read /proc/stat on either end (to measure what measuring costs).
    #[arg(long = "no-cpu", conflicts_with_all = ["local_cpu", "remote_cpu"], help_heading = "CPU")]
    pub no_cpu: bool,
    /// Have the agent run its hook NAME on its host before the test (a script its operator put in
    /// its --hooks directory; the welcome lists them). If it fails, the agent refuses the test.
    #[arg(long = "remote-setup", value_name = "NAME", help_heading = "Agent hooks")]
    pub remote_setup: Option<String>,
    /// Have the agent run its hook NAME on its host after the test, however it ended.
    #[arg(long = "remote-teardown", value_name = "NAME", help_heading = "Agent hooks")]
    pub remote_teardown: Option<String>,
    /// Sample every CPU of this host over the measured window: where its CPU time went, by
    /// subsystem and function (docs/PROFILE.md). Needs root or CAP_PERFMON; else withheld.
    #[arg(long, help_heading = "CPU")]
    pub profile: bool,
    #[command(flatten)]
    pub peer: crate::peer::PeerArgs,
}

impl CommonArgs {
    /// The agent's TCP options, for a TCP kind's spec (`--nodelay`,
    /// `--cc` and `--mptcp` apply to both ends).
    pub fn tcp(&self) -> TcpOptions {
        TcpOptions {
            nodelay: self.nodelay,
            congestion: self.cc.clone(),
            mptcp: self.mptcp,
        }
    }

    /// The plan of a test of `test` (which holds the kind's options, and for
    /// a TCP kind [`CommonArgs::tcp`]) with the common options here. netrig's
    /// own bounds are checked (an agent checks its own limits again).
    pub fn plan(&self, test: KindSpec) -> Result<Planned, String> {
        let peer = self.peer.peer(&test)?;
        let tcp = test.rules().tcp().cloned();
        if tcp.is_none() {
            if self.cc.is_some() || self.nodelay {
                return Err(format!(
                    "--cc and --nodelay apply to TCP tests, not to UDP ({})",
                    test.name()
                ));
            }
            if self.mss.is_some() {
                return Err(format!(
                    "--mss applies to TCP tests, not to UDP ({})",
                    test.name()
                ));
            }
            if self.mptcp {
                return Err(format!("--mptcp applies to TCP tests, not to {}", test.name()));
            }
        }
        if self.cc.as_deref() == Some("") {
            return Err("--cc needs an algorithm name".into());
        }
        let shared = SocketOptions {
            tos: self.dscp.map(|d| d << 2).or(self.tos),
            priority: self.priority,
            max_pacing_rate_bps: self.max_pacing_rate,
            ..SocketOptions::default()
        };
        let tcp_opts = self.tcp();
        let mut local = SocketSettings::new(
            &SocketOptions {
                sndbuf: self.local_sockbuf,
                rcvbuf: self.local_sockbuf,
                ..shared.clone()
            },
            tcp.as_ref().map(|_| &tcp_opts),
        );
        local.mss = self.mss;
        let spec = TestSpec {
            omit_s: self.omit,
            interval_s: self.interval,
            flows: self.parallel,
            workers: self.workers,
            measure_cpu: !self.no_cpu,
            remote: SocketOptions {
                sndbuf: self.remote_sockbuf,
                rcvbuf: self.remote_sockbuf,
                ..shared
            },
            remote_cpus: self
                .remote_cpus
                .clone()
                .map(|c| c.0)
                .or(self.affinity.and_then(|(_, m)| m).map(|m| vec![m])),
            remote_hooks: RemoteHooks {
                setup: self.remote_setup.clone(),
                teardown: self.remote_teardown.clone(),
            },
            ..TestSpec::new(
                test,
                Limit::Duration {
                    seconds: self.seconds(),
                },
            )
        };
        // netrig's own bounds only: the agent's limits come in its welcome,
        // and the client checks those, naming the agent, once it has them.
        spec.validate_bounds().map_err(|e| e.to_string())?;
        local.validate("-s/--local-sockbuf").map_err(|e| e.to_string())?;
        Ok(Planned {
            spec,
            local: LocalEnd {
                sockets: local,
                bind: None,
                cpus: self
                    .cpus
                    .clone()
                    .map(|c| c.0)
                    .or(self.affinity.map(|(n, _)| vec![n])),
                cpus_option: if self.affinity.is_some() { "-A" } else { "--cpus" },
                // The client profiles a two-ended kind's end itself (`Planned::profile`).
                profile: false,
            },
            fit_to_path: false,
            peer,
            get_server_output: self.peer.get_server_output,
            profile: self.profile,
        })
    }

    /// The whole test's length, omitted seconds included: `-l` as given
    /// (netrig's and netperf's length), or `-t` after `--omit` (iperf3's
    /// measured time, 10 s by default).
    pub fn seconds(&self) -> f64 {
        self.length
            .unwrap_or_else(|| self.omit + self.time.unwrap_or(DEFAULT_MEASURED_S))
    }

    /// A byte count instead of a length (`-n`), for kinds that take one.
    pub fn byte_limit(&self, plan: &mut Planned, bytes: Option<u64>) -> Result<(), String> {
        let Some(bytes) = bytes else { return Ok(()) };
        if self.length.is_some() {
            return Err("-l/--length cannot be used with -n/--bytes: a test is timed or counted".into());
        }
        if self.time.is_some() {
            return Err("-t/--time cannot be used with -n/--bytes: a test is timed or counted".into());
        }
        if self.omit != 0.0 {
            return Err("--omit applies to timed tests (-l), not to -n/--bytes".into());
        }
        plan.spec.limit = Limit::Bytes { bytes };
        plan.spec.validate_bounds().map_err(|e| e.to_string())
    }
}

/// A sending rate for stream tests, kept by the sending application (the
/// kernel's own pacing is --max-pacing-rate).
#[derive(Debug, Clone, Args)]
pub struct PaceArgs {
    /// Rate per flow in bits/s of payload, K/M/G = 10^3/10^6/10^9 as iperf: 20M, 1G; 0 or absent:
    /// as fast as possible. Whichever end sends keeps it, message by message.
    #[arg(short = 'b', long = "bitrate", value_name = "RATE", value_parser = parse_rate, help_heading = "Rate")]
    pub bitrate: Option<u64>,
    /// With -b: the pacing quantum in µs. The sender wakes at most this often and sends what falls
    /// due within it, never ahead by more; smaller is smoother and costs more CPU (default 100;
    /// iperf3's --pacing-timer defaults to 1000).
    #[arg(long = "pacing-us", value_name = "US", help_heading = "Rate")]
    pub pacing_us: Option<u32>,
}

impl PaceArgs {
    /// The pace these options ask for; `None`: as fast as possible.
    pub fn pace(&self) -> Result<Option<Pace>, String> {
        match (self.bitrate.filter(|r| *r > 0), self.pacing_us) {
            (None, Some(_)) => Err("--pacing-us applies to stream tests with a rate (-b)".into()),
            (None, None) => Ok(None),
            (Some(rate_bps), pacing_us) => Ok(Some(Pace { rate_bps, pacing_us })),
        }
    }
}

/// A paced stream's rate and quantum (`-b`, `--pacing-us`) in the result's
/// config: the part the stream kinds (TCP and UDP) share.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PaceConfig {
    /// With `-b`: the pacing quantum in µs (`--pacing-us`, or its default); null otherwise.
    pub pacing_us: Option<u32>,
    /// `-b`, the rate each flow's sender keeps, in bits/s of payload; null:
    /// as fast as possible.
    pub rate_bps: Option<u64>,
}

impl PaceConfig {
    /// The config of `pace`.
    pub fn of(pace: Option<&Pace>) -> PaceConfig {
        PaceConfig {
            rate_bps: pace.map(|p| p.rate_bps),
            pacing_us: pace.map(|p| p.pacing().as_micros() as u32),
        }
    }
}

/// The options of every request/response kind.
#[derive(Debug, Clone, Args)]
pub struct TxnArgs {
    /// Request and response sizes in bytes, as netperf's -r: "1,1", "64,1K", "128" (both); K = 1024.
    #[arg(short = 'r', long = "request-response", value_name = "REQ[,RESP]", default_value = "1,1", value_parser = parse_req_resp, help_heading = "Sizes and buffers")]
    pub request_response: (u32, u32),
    #[command(flatten)]
    pub load: LoadArgs,
    /// Each end waits for the other by polling its socket (non-blocking receives in a loop)
    /// instead of sleeping in the kernel until woken, as sockperf's users compare modes: lower
    /// latency, a CPU kept busy per flow on each end (it shows in the CPU figures and service
    /// demand). Closed loop, --burst 1, one flow per worker thread (-T at least -P).
    #[arg(long = "busy-wait", conflicts_with = "rate", help_heading = "Rate")]
    pub busy_wait: bool,
}

impl TxnArgs {
    /// The transactions these options ask for.
    pub fn transactions(&self) -> Result<Transactions, String> {
        Ok(Transactions {
            request_size: self.request_response.0,
            response_size: self.request_response.1,
            load: self.load.load()?,
            busy_wait: self.busy_wait,
        })
    }
}

/// How the request/response kinds offer their transactions: closed loop
/// (`--burst`) or open (`--rate` and its shape); tcp-cc's too, which has
/// no sizes.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Transactions in flight per flow, closed loop (netperf's -b).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65_536), help_heading = "Rate")]
    pub burst: u32,
    /// Open loop: transactions per second per flow, sent on schedule whatever the responses do;
    /// latency is timed from when each request was due.
    #[arg(long, value_name = "TPS", help_heading = "Rate")]
    pub rate: Option<f64>,
    /// With --rate: exponential inter-arrival times (a Poisson process).
    #[arg(long, requires = "rate", help_heading = "Rate")]
    pub poisson: bool,
    /// With --rate: wake this many µs before each request is due and spin (polling the sockets)
    /// until it is, so the generator's own wake-up delay does not count as latency. 0: sleep until
    /// due. Default: learned from how late the timer wakes (10 to 500 µs, at most a quarter of the
    /// mean gap between a worker's requests). Spinning costs client CPU: it shows in the local CPU
    /// utilisation, service demand and the workers' busy %.
    #[arg(long = "spin-us", value_name = "US", requires = "rate", help_heading = "Rate")]
    pub spin_us: Option<u32>,
}

impl LoadArgs {
    /// The load these options ask for.
    pub fn load(&self) -> Result<Load, String> {
        match self.rate {
            Some(_) if self.burst != 1 => Err(
                "--burst sets the closed loop's transactions in flight; with --rate the schedule decides"
                    .into(),
            ),
            Some(rate) => Ok(Load::Open {
                rate,
                poisson: self.poisson,
                spin_us: self.spin_us,
            }),
            None => Ok(Load::Closed { burst: self.burst }),
        }
    }
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
        if lo > hi || hi > MAX_CPU {
            return Err(format!("{s:?}: CPUs are 0..={MAX_CPU} in rising ranges"));
        }
        cpus.extend(lo..=hi);
        if cpus.len() > MAX_CPU_LIST {
            return Err(format!("{s:?}: at most {MAX_CPU_LIST} CPUs"));
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
    if parts.next().is_some() || n > MAX_CPU || m.is_some_and(|m| m > MAX_CPU) {
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

/// A transaction timeout in seconds (`--timeout`).
pub fn parse_timeout(s: &str) -> Result<f64, String> {
    parse_seconds(s)
}

/// A byte count (`-n`) with size suffixes.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #37, item 11: `-t 2 -O 1` measured 1 s in 2 s; iperf3 runs
    /// 3 s and measures the last 2. `-t` is iperf3's measured time after
    /// the omitted one; `-l` netrig's (and netperf's) whole length.
    #[test]
    fn iperf3_s_time_is_measured_after_the_omitted_time_and_netrig_s_length_includes_it() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            common: CommonArgs,
        }
        let parse = |args: &[&str]| {
            use clap::Parser;
            Cli::try_parse_from(std::iter::once("netrig").chain(args.iter().copied())).map(|c| c.common)
        };
        let length = |args: &[&str]| {
            let c = parse(args).unwrap();
            (c.seconds(), c.omit)
        };
        assert_eq!(length(&["-t", "2", "-O", "1"]), (3.0, 1.0));
        assert_eq!(length(&["--time", "2", "--omit", "1"]), (3.0, 1.0));
        assert_eq!(length(&["-t", "2"]), (2.0, 0.0));
        assert_eq!(length(&["-l", "2", "-O", "1"]), (2.0, 1.0));
        assert_eq!(length(&["--length", "12", "--omit", "2"]), (12.0, 2.0));
        // Neither: 10 s measured, after the omitted seconds.
        assert_eq!(length(&[]), (10.0, 0.0));
        assert_eq!(length(&["-O", "2"]), (12.0, 2.0));
        let err = parse(&["-l", "2", "-t", "2"]).err().unwrap().to_string();
        assert!(err.contains("--time") && err.contains("--length"), "{err}");
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
    fn pace_and_load() {
        let pace = |bitrate, pacing_us| PaceArgs { bitrate, pacing_us }.pace();
        assert_eq!(pace(None, None), Ok(None));
        assert_eq!(pace(Some(0), None), Ok(None), "-b 0: as fast as possible");
        assert!(pace(None, Some(5)).unwrap_err().contains("--pacing-us applies"));
        assert_eq!(
            pace(Some(8), Some(5)),
            Ok(Some(Pace {
                rate_bps: 8,
                pacing_us: Some(5)
            }))
        );
        let t = |burst, rate| {
            TxnArgs {
                request_response: (1, 1),
                load: LoadArgs {
                    burst,
                    rate,
                    poisson: false,
                    spin_us: None,
                },
                busy_wait: false,
            }
            .transactions()
        };
        assert_eq!(t(4, None).unwrap().load, Load::Closed { burst: 4 });
        assert!(t(4, Some(10.0)).unwrap_err().contains("--burst"));
        assert_eq!(t(1, Some(10.0)).unwrap().rate(), Some(10.0));
    }
}
