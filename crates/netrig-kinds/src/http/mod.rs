//! http: an HTTP/1.1 load generator against any server, from the client
//! alone (no agent): closed loop as wrk (`-c` connections on `-t` threads),
//! open loop as wrk2 and httperf (`--rate`, constant or Poisson arrivals,
//! latency from when each request was due), keep-alive or a new connection
//! per request (`--new-conn`); HTTPS with rustls. The engine is the
//! netrig-http-load crate; this module is its command line, its spec and
//! its result.

mod clients;
mod profile;
mod result;
mod table;
mod witness;

use crate::kind::{Ends, KindDef, LocalEnd, OneEnded, Planned, Workloads};
use crate::txn::TransactionsConfig;
use crate::units::{parse_seconds, parse_size};
use clap::{Args, ValueEnum};
use netrig_engine::{EngineError, Flow, RunControl, WorkerControl, WorkerEnd, Workload};
use netrig_proto::spec::kind::{HttpLoad, HttpMethod, HttpSpec, HttpTls};
use netrig_proto::spec::{KindSpec, Limit};
use netrig_proto::TestSpec;
use netrig_report::{IntervalResult, Side, TableLayout, TestConfig, TestResult};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct Http;

/// How open-loop requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Arrivals {
    /// Evenly spaced, as wrk2.
    Constant,
    /// Exponential gaps (a Poisson process), as httperf's --period=e.
    Poisson,
}

/// http's options: wrk's names where it has one (-c, -t, -d, --timeout,
/// --latency), wrk2's -R, httperf's --rate; netrig's -P, -T and -l work too.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// The server as a URL, http://HOST[:PORT]/PATH or https://...; it gives the path, the Host
    /// header and HTTPS, and the address unless -H/-p are given.
    #[arg(long = "url", value_name = "URL", help_heading = "Request")]
    url: Option<String>,
    /// The request target (default /, or --url's path).
    #[arg(long = "path", value_name = "PATH", help_heading = "Request")]
    path: Option<String>,
    /// The Host header and TLS server name (default: --url's host, or the server's address).
    #[arg(long = "host-header", value_name = "HOST", help_heading = "Request")]
    host_header: Option<String>,
    /// An extra request header "Name: value" (repeat it; wrk's -H, which netrig uses for the host).
    #[arg(long = "header", value_name = "LINE", help_heading = "Request")]
    header: Vec<String>,
    /// HEAD instead of GET.
    #[arg(long = "head", help_heading = "Request")]
    head: bool,
    /// Connections (wrk's -c; netrig's -P); with --rate and --new-conn, the most in flight.
    #[arg(short = 'c', long = "connections", visible_short_alias = 'P', alias = "parallel", value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000), help_heading = "Load")]
    connections: u32,
    /// Threads, each one event loop (wrk's -t; netrig's -T; default: the number of CPUs, at most -c).
    #[arg(short = 't', long = "threads", visible_short_alias = 'T', alias = "workers", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = "Load")]
    threads: Option<u32>,
    /// Run length in seconds (wrk's -d, netrig's -l; default 10; with -n, the longest it may take).
    #[arg(short = 'd', long = "duration", visible_short_alias = 'l', alias = "length", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "Load")]
    duration: Option<f64>,
    /// Stop after this many requests (answered or failed), all connections together (ab's and oha's -n).
    #[arg(short = 'n', long = "requests", value_parser = parse_size, value_name = "N", help_heading = "Load")]
    requests: Option<u64>,
    /// Open loop: requests per second in total, on schedule whatever the server does (wrk2's -R,
    /// httperf's --rate); latency is timed from when each request was due.
    #[arg(short = 'R', long = "rate", value_name = "PER_S", help_heading = "Load")]
    rate: Option<f64>,
    /// With --rate: how requests arrive.
    #[arg(
        long = "arrivals",
        value_enum,
        default_value = "constant",
        help_heading = "Load"
    )]
    arrivals: Arrivals,
    /// A new connection for each request, closed after its response (httperf's mode; with
    /// --rate, connection arrivals as in the IA64 study); sends Connection: close.
    #[arg(long = "new-conn", alias = "close", help_heading = "Load")]
    new_conn: bool,
    /// Longest wait for a connection or a whole response, in seconds; later is a client timeout
    /// (default 2, as wrk).
    #[arg(long = "timeout", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "Load")]
    timeout: Option<f64>,
    /// Accepted for wrk's command lines: the percentiles are always reported.
    #[arg(long = "latency", hide = true)]
    latency: bool,
    /// HTTPS (also from an https:// --url).
    #[arg(long = "https", help_heading = "HTTPS")]
    https: bool,
    /// Take any server certificate (a self-signed test server's); implies --https.
    #[arg(short = 'k', long = "insecure", help_heading = "HTTPS")]
    insecure: bool,
    /// Trust the CAs in this PEM file (curl's --cacert; default: the system's bundle); implies --https.
    #[arg(
        long = "cacert",
        visible_alias = "ca-file",
        value_name = "FILE",
        help_heading = "HTTPS"
    )]
    ca_file: Option<String>,
    /// Longest response head in bytes, K/M = 1024-based (default 64K).
    #[arg(long = "max-header", value_parser = parse_size, value_name = "SIZE", help_heading = "Bounds")]
    max_header: Option<u64>,
    /// Longest response body (default 1G).
    #[arg(long = "max-body", value_parser = parse_size, value_name = "SIZE", help_heading = "Bounds")]
    max_body: Option<u64>,
    /// Interval samples every SECONDS (at least 0.1): requests/s, replies/s, errors.
    #[arg(short = 'i', long = "interval", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    interval: Option<f64>,
    /// Leave the first SECONDS out of the results (warm-up).
    #[arg(long, default_value = "0", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    omit: f64,
    /// TCP_NODELAY on the connections.
    #[arg(long, help_heading = "TCP")]
    nodelay: bool,
    /// Pin the load threads to these CPUs, round robin: "1", "0-3", "0,2".
    #[arg(long = "cpus", value_name = "LIST", value_parser = crate::args::parse_cpu_list, help_heading = "CPU")]
    cpus: Option<crate::args::CpuList>,
    /// Do not read /proc/stat.
    #[arg(long = "no-cpu", help_heading = "CPU")]
    no_cpu: bool,
    /// Sample every CPU of this host over the measured window: where its CPU time went, by
    /// subsystem and function, per successful response (docs/PROFILE.md). Needs root or
    /// CAP_PERFMON; else withheld. The server's host is not profiled.
    #[arg(long, help_heading = "CPU")]
    profile: bool,
}

/// A URL's parts: https, host, port, path.
fn parse_url(url: &str) -> Result<(bool, String, u16, String), String> {
    let bad = |why: &str| format!("--url {url:?}: {why}");
    let (tls, rest) = if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else {
        return Err(bad("use http://HOST[:PORT]/PATH or https://..."));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(bad("credentials in a URL are not taken"));
    }
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 address needs its ]"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad("the port is not a number 1-65535"))?,
            None if after.is_empty() => default_port,
            None => return Err(bad("junk after the IPv6 address")),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse().map_err(|_| bad("the port is not a number 1-65535"))?,
            ),
            None => (authority.to_string(), default_port),
        }
    };
    if host.is_empty() || port == 0 {
        return Err(bad("no host, or port 0"));
    }
    Ok((tls, host, port, path.to_string()))
}

impl KindDef for Http {
    type Args = HttpArgs;
    type Spec = HttpSpec;

    fn name(&self) -> &'static str {
        "http"
    }
    fn about(&self) -> &'static str {
        "HTTP/1.1 load against any server (wrk, wrk2, httperf): closed or open loop, keep-alive or a \
         connection per request, HTTPS; requests/s, replies/s, latency percentiles, errors by cause"
    }
    fn own<'a>(&self, test: &'a KindSpec) -> Option<&'a HttpSpec> {
        match test {
            KindSpec::Http(s) => Some(s),
            _ => None,
        }
    }

    fn plan(&self, a: HttpArgs) -> Result<Planned, String> {
        let url = a.url.as_deref().map(parse_url).transpose()?;
        let path = match (&a.path, &url) {
            (Some(p), _) => p.clone(),
            (None, Some((_, _, _, p))) => p.clone(),
            (None, None) => "/".into(),
        };
        let https = a.https || a.insecure || a.ca_file.is_some() || url.as_ref().is_some_and(|u| u.0);
        let host_header = a.host_header.clone().or_else(|| {
            url.as_ref().map(|(tls, h, p, _)| {
                let bracketed = if h.contains(':') {
                    format!("[{h}]")
                } else {
                    h.clone()
                };
                if *p == if *tls { 443 } else { 80 } {
                    bracketed
                } else {
                    format!("{bracketed}:{p}")
                }
            })
        });
        if a.rate.is_none() && a.arrivals != Arrivals::Constant {
            return Err("--arrivals applies to the open loop: give --rate".into());
        }
        let load = match a.rate {
            Some(rate) => HttpLoad::Open {
                rate,
                poisson: a.arrivals == Arrivals::Poisson,
            },
            None => HttpLoad::Closed,
        };
        if a.requests.is_some() && a.omit != 0.0 {
            return Err("--omit applies to timed runs (-d/-l), not to -n".into());
        }
        let seconds = a
            .duration
            .unwrap_or(if a.requests.is_some() { 600.0 } else { 10.0 });
        let spec = TestSpec {
            omit_s: a.omit,
            interval_s: a.interval,
            flows: a.connections,
            workers: a.threads,
            measure_cpu: !a.no_cpu,
            ..TestSpec::new(
                KindSpec::Http(HttpSpec {
                    url_host: url.as_ref().map(|u| u.1.clone()),
                    url_port: url.as_ref().map(|u| u.2),
                    host_header,
                    path,
                    method: if a.head { HttpMethod::Head } else { HttpMethod::Get },
                    headers: a.header,
                    requests: a.requests,
                    load,
                    new_conn: a.new_conn,
                    timeout_s: a.timeout,
                    max_header: a.max_header.map(|h| u32::try_from(h).unwrap_or(u32::MAX)),
                    max_body: a.max_body,
                    tls: https.then(|| HttpTls {
                        insecure: a.insecure,
                        ca_file: a.ca_file.clone(),
                    }),
                    tcp: netrig_proto::spec::TcpOptions {
                        nodelay: a.nodelay,
                        congestion: None,
                        mptcp: false,
                    },
                }),
                Limit::Duration { seconds },
            )
        };
        let mut planned = Planned::one_ended(spec, a.cpus.map(|c| c.0))?;
        planned.profile = a.profile;
        Ok(planned)
    }

    /// An agent never runs it (it refuses the spec by name); this end that
    /// says so is what the registry hands out for it.
    fn workload(&self, _: &HttpSpec, _: &TestSpec) -> Workloads {
        Workloads::Connected(Arc::new(NoAgentEnd))
    }

    fn config(&self, s: &HttpSpec, c: &mut TestConfig) {
        let host = s.host_header.as_deref().unwrap_or("");
        c.message_size = request_of(s, host).len() as u32;
        c.recv_size = 64 * 1024;
        // The request/response kinds' options, those an HTTP load has: its
        // request's bytes, its rate and its timeout.
        c.set_kind_part(&TransactionsConfig {
            request_size: Some(c.message_size),
            rate: s.rate(),
            poisson: Some(matches!(s.load, HttpLoad::Open { poisson: true, .. })),
            timeout_s: Some(s.timeout().as_secs_f64()),
            ..Default::default()
        });
    }

    fn warnings(&self, s: &HttpSpec, _: &TestSpec, _: Side<'_>, r: &TestResult) -> Vec<String> {
        result::warnings(s, r)
    }

    fn table(&self) -> &'static dyn TableLayout {
        &table::HTTP
    }

    fn ends(&self) -> Ends<'_> {
        Ends::ClientOnly(self)
    }
}

/// The request `s` sends to `host`.
pub(crate) fn request_of(s: &HttpSpec, host: &str) -> Vec<u8> {
    netrig_http_load::request(s.method.as_str(), host, &s.path, &s.headers, s.new_conn)
}

impl OneEnded for Http {
    fn run(
        &self,
        spec: &TestSpec,
        server: SocketAddr,
        local: &LocalEnd,
        ctl: Arc<RunControl>,
        observer: &mut dyn FnMut(&IntervalResult),
    ) -> Result<TestResult, String> {
        let KindSpec::Http(s) = &spec.test else {
            return Err(format!("http was given a {} spec", spec.kind()));
        };
        let host = s.host_header.clone().unwrap_or_else(|| match server {
            SocketAddr::V4(a) => a.to_string(),
            SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
        });
        let tls = match &s.tls {
            None => None,
            Some(t) => {
                let name = s
                    .host_header
                    .as_deref()
                    .map(|h| strip_port(h).to_string())
                    .unwrap_or_else(|| server.ip().to_string());
                Some(netrig_http_load::tls::Tls::new(
                    &name,
                    t.ca_file.as_deref(),
                    t.insecure,
                )?)
            }
        };
        let threads = spec
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
            .min(spec.flows)
            .max(1);
        if let Some(c) = &local.cpus {
            netrig_engine::affinity::check_cpus(c, local.cpus_option)?;
        }
        // The descriptors this process may still open, for the connections.
        netrig_engine::files::check_open_files(u64::from(spec.flows), "this host")?;
        let Limit::Duration { seconds } = spec.limit else {
            return Err("http runs for -d/-l seconds (or to -n requests), not to a byte count".into());
        };
        let mut config = netrig_http_load::Config {
            server,
            bind: local.bind,
            request: request_of(s, &host),
            head_request: s.method == HttpMethod::Head,
            connections: spec.flows,
            threads,
            duration: Duration::from_secs_f64(seconds),
            omit: Duration::from_secs_f64(spec.omit_s),
            requests: s.requests,
            load: match s.load {
                HttpLoad::Closed => netrig_http_load::Load::Closed,
                HttpLoad::Open { rate, poisson } => netrig_http_load::Load::Open { rate, poisson },
            },
            new_conn: s.new_conn,
            timeout: s.timeout(),
            bounds: netrig_http_load::Bounds {
                max_header_bytes: s
                    .max_header
                    .unwrap_or(netrig_proto::spec::kind::DEFAULT_MAX_HEADER)
                    as usize,
                max_body_bytes: s.max_body.unwrap_or(netrig_proto::spec::kind::DEFAULT_MAX_BODY),
            },
            tls,
            interval: spec.interval_s.map(Duration::from_secs_f64),
            nodelay: s.tcp.nodelay,
            cpus: local.cpus.clone(),
            measure_cpu: spec.measure_cpu,
            watch: Default::default(),
        };
        // The witness's readings bracket the whole run (the threads start
        // after the first, and have ended before the last).
        let watch = profile::open(local.profile);
        config.watch = watch.as_ref().map(|w| w.watch()).unwrap_or_default();
        let witness = witness::Readings::before(server, local.bind);
        let counters_before = netrig_metrics::read_kernel_counters().ok();
        let stop = || ctl.abort_reason();
        let mut on_interval = |i: &netrig_http_load::IntervalSample| observer(&result::interval(i));
        let report = netrig_http_load::run(&config, &stop, &mut on_interval).map_err(|e| e.to_string())?;
        let counters = counters_before.and_then(|b| {
            netrig_metrics::read_kernel_counters().ok().map(|a| {
                netrig_proto::report::CounterReport::between(&b, &a, netrig_metrics::read_conntrack())
            })
        });
        let witness = witness.after(&report);
        let mut r = result::assemble(spec, s, &config, server, &report, counters);
        r.warnings.extend(result::warnings(s, &r));
        witness::judge(&mut r, witness);
        r.profile = watch.map(|w| profile::finish(&w, &report));
        Ok(r)
    }

    fn share(&self, spec: &TestSpec, k: u32, n: u32) -> Result<TestSpec, String> {
        clients::share(spec, k, n)
    }

    fn sum(&self, spec: &TestSpec, parts: Vec<(std::net::IpAddr, TestResult)>) -> Result<TestResult, String> {
        let (addrs, parts): (Vec<_>, Vec<_>) = parts.into_iter().map(|(a, r)| (a.to_string(), r)).unzip();
        clients::sum(spec, parts, &addrs)
    }

    fn own_server(&self, spec: &TestSpec) -> Option<(String, u16)> {
        match &spec.test {
            KindSpec::Http(HttpSpec {
                url_host: Some(h),
                url_port: Some(p),
                ..
            }) => Some((h.clone(), *p)),
            _ => None,
        }
    }
}

/// "host:port" or "[v6]:port" without the port (and brackets).
fn strip_port(h: &str) -> &str {
    if let Some(v6) = h.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    match h.rsplit_once(':') {
        Some((host, p)) if p.bytes().all(|b| b.is_ascii_digit()) && !host.contains(':') => host,
        _ => h,
    }
}

/// What an agent would run for an http spec: nothing (it refuses such
/// specs before any workload is asked for).
struct NoAgentEnd;

impl Workload for NoAgentEnd {
    fn run_worker(&self, _: Vec<Flow>, _: &WorkerControl) -> Result<WorkerEnd, EngineError> {
        Err(EngineError::Setup(
            "http runs from the client alone, against any server: an agent has no part in it".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:8080/bytes/1024").unwrap(),
            (false, "127.0.0.1".into(), 8080, "/bytes/1024".into())
        );
        assert_eq!(
            parse_url("https://example.org").unwrap(),
            (true, "example.org".into(), 443, "/".into())
        );
        assert_eq!(
            parse_url("http://[::1]:81/x").unwrap(),
            (false, "::1".into(), 81, "/x".into())
        );
        for bad in [
            "ftp://x/",
            "http://:80/",
            "http://h:0/",
            "http://h:99999/",
            "http://u@h/",
            "http://[::1/",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert_eq!(strip_port("a.b:80"), "a.b");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("a.b"), "a.b");
    }

    fn plan(args: &[&str]) -> Result<Planned, String> {
        use crate::Kind;
        let k = crate::Def(Http);
        let m = k
            .args(clap::Command::new("http"))
            .try_get_matches_from(std::iter::once("http").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        k.plan(&m)
    }

    #[test]
    fn wrk_names_map_onto_the_spec() {
        let p = plan(&["-c", "50", "-t", "2", "-d", "3", "--url", "http://h:81/a"]).unwrap();
        assert_eq!((p.spec.flows, p.spec.workers), (50, Some(2)));
        assert_eq!(p.spec.limit, Limit::Duration { seconds: 3.0 });
        let KindSpec::Http(s) = &p.spec.test else { panic!() };
        assert_eq!((s.path.as_str(), s.host_header.as_deref()), ("/a", Some("h:81")));
        let p = plan(&[
            "-P",
            "5",
            "-T",
            "1",
            "-l",
            "2",
            "-R",
            "100",
            "--arrivals",
            "poisson",
        ])
        .unwrap();
        assert_eq!((p.spec.flows, p.spec.workers), (5, Some(1)));
        let KindSpec::Http(s) = &p.spec.test else { panic!() };
        assert_eq!(
            s.load,
            HttpLoad::Open {
                rate: 100.0,
                poisson: true
            }
        );
        assert!(plan(&["--arrivals", "poisson"]).unwrap_err().contains("--rate"));
        assert!(plan(&["-n", "10", "--omit", "1"]).unwrap_err().contains("--omit"));
        assert!(plan(&["--path", "nope"]).unwrap_err().contains("--path"));
        assert!(plan(&["--header", "X-A: b\r\nEvil: 1"])
            .unwrap_err()
            .contains("--header"));
        assert!(plan(&["--timeout", "0"]).unwrap_err().contains("--timeout"));
        assert!(plan(&["-R", "0"]).unwrap_err().contains("--rate"));
    }
}
