//! The HTTP test server on the command line: `netrig http-serve` (alone) and `netrig serve
//! --http-port P` (beside the agent), sharing [`HttpOptions`]. The server is netrig-http's.

use anyhow::{Context, Result};
use clap::Args;
use netrig_engine::addr::ScopedIp;
use netrig_http::{Bounds, Handle, Listener, Server, ServerConfig};
use netrig_kinds::units::{parse_seconds, parse_size};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// `netrig http-serve`.
#[derive(Debug, Args)]
pub struct HttpServeArgs {
    /// Address to listen on (default: every IPv6 and IPv4 address).
    #[arg(long = "bind", value_name = "ADDR", value_parser = crate::values::parse_listen_ip, help_heading = "Where")]
    pub bind: Option<ScopedIp>,
    /// Port to serve HTTP on.
    #[arg(short = 'p', long = "port", default_value_t = 8080, help_heading = "Where")]
    pub port: u16,
    #[command(flatten)]
    pub options: HttpOptions,
}

/// The server's options, the same for `http-serve` and `serve --http-port`.
#[derive(Debug, Clone, Args)]
pub struct HttpOptions {
    /// Worker threads, each with its own event loop (default: one per CPU).
    #[arg(long = "threads", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = "HTTP server")]
    pub threads: Option<u32>,
    /// How workers listen: `reuseport` (a socket each, SO_REUSEPORT) or `shared` (one socket in
    /// every worker's loop).
    #[arg(long = "listener", value_enum, default_value_t = ListenerArg::Reuseport, help_heading = "HTTP server")]
    pub listener: ListenerArg,
    /// listen(2)'s backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long = "backlog", value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(i32).range(1..=1_000_000), help_heading = "HTTP server")]
    pub backlog: i32,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(
        long = "tls-cert",
        value_name = "FILE",
        requires = "tls_key",
        help_heading = "HTTP server"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(
        long = "tls-key",
        value_name = "FILE",
        requires = "tls_cert",
        help_heading = "HTTP server"
    )]
    pub tls_key: Option<PathBuf>,
    /// The largest body /bytes/N may ask for (beyond: 413); K/M/G = 2^10/2^20/2^30.
    #[arg(long = "max-body", value_name = "SIZE", default_value = "64M", value_parser = parse_size, help_heading = "HTTP bounds")]
    pub max_body: u64,
    /// Bytes of a request head (beyond: 431, or 414 for a request line without an end).
    #[arg(long = "max-header-bytes", value_name = "SIZE", default_value = "8K", value_parser = parse_header_bytes, help_heading = "HTTP bounds")]
    pub max_header_bytes: usize,
    /// Seconds from a head's first byte to its end (slow headers: 408, closed).
    #[arg(long = "header-timeout", value_name = "SECONDS", default_value = "10", value_parser = parse_timeout, help_heading = "HTTP bounds")]
    pub header_timeout: Duration,
    /// Seconds a connection may wait for its next request after an answer (or the accept).
    #[arg(long = "keepalive-timeout", value_name = "SECONDS", default_value = "60", value_parser = parse_timeout, help_heading = "HTTP bounds")]
    pub keepalive_timeout: Duration,
    /// Seconds an answer may make no progress (a client that does not read) before the
    /// connection is closed.
    #[arg(long = "send-timeout", value_name = "SECONDS", default_value = "30", value_parser = parse_timeout, help_heading = "HTTP bounds")]
    pub send_timeout: Duration,
    /// Connections open at once, all workers together; new ones beyond it get 503 and are closed.
    #[arg(long = "max-connections", value_name = "N", default_value_t = 16_384, value_parser = clap::value_parser!(u64).range(1..=10_000_000), help_heading = "HTTP bounds")]
    pub max_connections: u64,
    /// Requests one connection may make; the answer to the last says `Connection: close`.
    #[arg(long = "max-requests-per-connection", value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "HTTP bounds")]
    pub max_requests_per_connection: Option<u64>,
    /// The longest ?delay_ms=M a request may ask for, in seconds.
    #[arg(long = "max-delay", value_name = "SECONDS", default_value = "60", value_parser = parse_timeout, help_heading = "HTTP bounds")]
    pub max_delay: Duration,
    /// Stall the whole server (every worker) this long, --stall-after from the start.
    #[arg(long = "stall-for", value_name = "SECONDS", value_parser = parse_stall, requires = "stall_after", help_heading = "HTTP stalls")]
    pub stall_for: Option<Duration>,
    /// When the first stall begins, in seconds from the start.
    #[arg(long = "stall-after", value_name = "SECONDS", value_parser = parse_stall, requires = "stall_for", help_heading = "HTTP stalls")]
    pub stall_after: Option<Duration>,
    /// Stall again this often (start to start); without it, once.
    #[arg(long = "stall-every", value_name = "SECONDS", value_parser = parse_stall, requires = "stall_for", help_heading = "HTTP stalls")]
    pub stall_every: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListenerArg {
    Reuseport,
    Shared,
}

fn parse_header_bytes(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        n @ 256..=1_048_576 => Ok(n as usize),
        n => Err(format!("{n} bytes: must be between 256 and 1M")),
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    match parse_seconds(s)? {
        v if v > 0.0 && v <= 86_400.0 => Ok(Duration::from_secs_f64(v)),
        v => Err(format!("{v} s: must be more than 0 and at most 86400 s")),
    }
}

fn parse_stall(s: &str) -> Result<Duration, String> {
    match parse_seconds(s)? {
        v if v <= 3_600.0 => Ok(Duration::from_secs_f64(v)),
        v => Err(format!("{v} s: at most 3600 s")),
    }
}

impl HttpOptions {
    /// The server's configuration on `bind`.
    pub fn config(&self, bind: SocketAddr) -> Result<ServerConfig> {
        let threads = match self.threads {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => {
                Some(netrig_http::tls::server_config(c, k).map_err(|e| crate::Usage(e.to_string()))?)
            }
            _ => None,
        };
        Ok(ServerConfig {
            bind,
            threads,
            listener: match self.listener {
                ListenerArg::Reuseport => Listener::ReusePort,
                ListenerArg::Shared => Listener::Shared,
            },
            backlog: self.backlog,
            bounds: Bounds {
                max_body: self.max_body,
                max_header_bytes: self.max_header_bytes,
                header_timeout: self.header_timeout,
                idle_timeout: self.keepalive_timeout,
                send_timeout: self.send_timeout,
                max_connections: self.max_connections as usize,
                max_requests_per_connection: self.max_requests_per_connection,
                max_delay: self.max_delay,
            },
            tls,
            allow: Vec::new(),
        })
    }
}

/// `netrig http-serve`: runs until the process is stopped.
pub fn serve(a: HttpServeArgs) -> Result<()> {
    let bind = match a.bind {
        Some(ip) => ip.with_port(a.port),
        None => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), a.port),
    };
    let server = start(&a.options, bind, Vec::new())?;
    server.wait();
    Ok(())
}

/// `netrig serve --http-port P`: the server beside the agent, in its process, on the agent's
/// address. It runs as long as the returned server is held.
/// `allow`: the agent's --allow, which covers this port too.
pub fn beside_agent(bind: SocketAddr, options: &HttpOptions, allow: Vec<ipnet::IpNet>) -> Result<Server> {
    start(options, bind, allow)
}

fn start(o: &HttpOptions, bind: SocketAddr, allow: Vec<ipnet::IpNet>) -> Result<Server> {
    let mut config = o.config(bind)?;
    config.allow = allow;
    let line = startup_line(&config);
    let server = Server::start(config).map_err(|e| crate::Usage(e.to_string()))?;
    eprintln!(
        "netrig {} HTTP server on {}: {line}",
        netrig_proto::SOFTWARE_VERSION,
        server.local_addr()
    );
    if let (Some(after), Some(for_)) = (o.stall_after, o.stall_for) {
        stall_schedule(server.handle(), after, for_, o.stall_every);
    }
    Ok(server)
}

/// What the server serves and its bounds, in one line.
pub fn startup_line(c: &ServerConfig) -> String {
    let b = &c.bounds;
    format!(
        "{} on {} worker thread{} ({} listener{}); GET and HEAD of /bytes/N (N at most {} bytes, --max-body), \
         ?delay_ms=M (at most {} ms, --max-delay), /.netrig/stats (its counts, JSON); bounds: a head {} bytes \
         (--max-header-bytes) within {} s (--header-timeout), {} s idle between requests (--keepalive-timeout), \
         {} s without send progress (--send-timeout), {} connections (--max-connections), {}",
        if c.tls.is_some() { "HTTPS" } else { "HTTP/1.1" },
        c.threads,
        if c.threads == 1 { "" } else { "s" },
        match c.listener {
            Listener::ReusePort => "SO_REUSEPORT",
            Listener::Shared => "one shared",
        },
        if c.threads == 1 || c.listener == Listener::Shared { "" } else { "s" },
        b.max_body,
        b.max_delay.as_millis(),
        b.max_header_bytes,
        b.header_timeout.as_secs_f64(),
        b.idle_timeout.as_secs_f64(),
        b.send_timeout.as_secs_f64(),
        b.max_connections,
        match b.max_requests_per_connection {
            Some(n) => format!("{n} requests per connection (--max-requests-per-connection)"),
            None => "no cap on requests per connection".into(),
        }
    )
}

/// Stalls the server `for_` at `after` from now, then every `every` if given.
fn stall_schedule(h: Handle, after: Duration, for_: Duration, every: Option<Duration>) {
    std::thread::Builder::new()
        .name("http-stalls".into())
        .spawn(move || {
            std::thread::sleep(after);
            loop {
                log::info!("HTTP server: stalling every worker for {} ms", for_.as_millis());
                h.stall(for_);
                match every {
                    Some(e) if !e.is_zero() => std::thread::sleep(e),
                    _ => return,
                }
            }
        })
        .context("cannot start the stall schedule's thread")
        .map(|_| ())
        .unwrap_or_else(|e| log::warn!("{e:#}"));
}
