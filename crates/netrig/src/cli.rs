//! The command line.

use clap::{Args, CommandFactory, Parser, Subcommand};
use netrig_engine::addr::ScopedIp;
use netrig_kinds::units::{parse_seconds, parse_size};
use std::net::IpAddr;
use std::path::PathBuf;

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

/// netrig's own subcommands; each test kind adds its own (see [`command`]).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Short loopback suite against an in-process agent (the embedded default).
    Quick(QuickArgs),
    /// Run the agent (like netserver or iperf3 -s), in the foreground.
    Serve(ServeArgs),
    /// Serve HTTP/1.1 (and HTTPS) for load tests: /bytes/N, delays, stalls, bounds (docs/HTTP.md).
    HttpServe(crate::http::HttpServeArgs),
    /// Run an experiment's plan (TOML): tests, sweeps, arms with set-up commands, iterations.
    Run(PlanArgs),
    /// List the saved experiments (--save) in a directory.
    Results(ResultsArgs),
    /// Compare two saved experiments: exits 3 when a metric got significantly worse than the threshold.
    Compare(CompareArgs),
    /// Write the HTML report of a saved experiment or a test's --json result.
    Report(ReportArgs),
    /// Plot a saved experiment or one test's --json result as SVG files.
    Plot(PlotArgs),
    /// Print a shell's completion script on stdout (for packagers; see docs/DEPLOY.md).
    #[command(hide = true)]
    Completions(CompletionsArgs),
    /// Write the man pages: netrig.1 and one per subcommand (for packagers; see docs/DEPLOY.md).
    #[command(hide = true)]
    Man(ManArgs),
    /// Make a key pair for authentication: FILE (private, mode 0600) and FILE.pub.
    Keygen(KeygenArgs),
    /// Test agents against each other: a full mesh, pairs or a star, in rounds of disjoint
    /// tests started together, each run by one agent against another (their --allow-initiate);
    /// the matrix as a table, JSON, CSV and an HTML heat map (docs/FLEET.md).
    Mesh(MeshArgs),
    /// Build, list, use and remove labs: hosts in network namespaces joined by links with
    /// properties (docs/LAB.md). Linux; root or CAP_NET_ADMIN and CAP_SYS_ADMIN.
    Lab(LabArgs),
    /// One client process of a --clients run (started by netrig itself: reads its job as JSON on
    /// standard input, prints its result as JSON).
    #[command(hide = true)]
    ClientShare,
}

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build the lab of FILE (a plan's [lab] section or a lab file), start an agent in each host,
    /// measure each shaped link, and return (or hold it with --foreground).
    Up(LabUpArgs),
    /// Remove a lab (by name or id), every lab (--all), or those whose owner is gone (--stale).
    Down(LabDownArgs),
    /// List the labs: hosts, addresses, links, shaping, the witness's figures.
    Status(LabStatusArgs),
    /// Run a command in a lab host's namespace (a first word `netrig` runs this netrig).
    Exec(LabExecArgs),
    /// Change a link's direction by hand, as an arm's shape does: `lab set LAB c1-s1 c1
    /// delay=20ms loss=1` (over the lab's own properties), `--reset` puts the lab's own back.
    Set(LabSetArgs),
    /// A SYN flood from HOST towards another host of the lab (raw sockets, random sources in
    /// HOST's segments, bounded rate and length; refused outside a lab), with the target host's
    /// counters and SYN_RECV sockets over it.
    Flood(crate::lab_overload::FloodArgs),
    /// Half-closed connections from HOST to another host of the lab: clients that send a request,
    /// close their half (or wait for the server's close) and go away; the server's FIN_WAIT2 /
    /// CLOSE_WAIT sockets watched until gone.
    HalfClose(crate::lab_overload::HalfCloseArgs),
    /// netrig's path element (started by `lab up` in an element's namespace).
    #[command(hide = true)]
    Element(LabElementArgs),
    /// Fill the connection tracking table of the lab host this runs in (an arm's `in_host`
    /// set-up, or `lab exec LAB HOST -- netrig lab ct-fill`) with idle established entries,
    /// leaving --leave free; --flush empties it. Refused outside a lab host (docs/LAB.md).
    #[command(name = "ct-fill")]
    CtFill(LabCtFillArgs),
}

#[derive(Debug, Args)]
pub struct LabCtFillArgs {
    /// Entries left free: the table the host's own connections get.
    #[arg(long, default_value_t = 1000)]
    pub leave: u64,
    /// Empty the host's table instead (every IPv4 entry).
    #[arg(long, conflicts_with = "leave")]
    pub flush: bool,
    /// The filler entries' first source address (then the next, every 64,512 ports).
    #[arg(long, default_value = "198.18.255.1")]
    pub from: std::net::Ipv4Addr,
    /// Their destination (port 9).
    #[arg(long, default_value = "198.18.255.2")]
    pub to: std::net::Ipv4Addr,
    /// Seconds each filler entry lives unless flushed (at most a day).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=86400))]
    pub timeout: u32,
}

#[derive(Debug, Args)]
pub struct LabElementArgs {
    /// The element's configuration (JSON, netrig_lab::element::Config).
    pub config: PathBuf,
}

#[derive(Debug, Args)]
pub struct LabUpArgs {
    /// The plan or lab file (TOML).
    pub file: PathBuf,
    /// The lab's name (default: the [lab] section's name, else the file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Hold the lab until Ctrl-C (or `netrig lab down NAME`), then remove it.
    #[arg(long)]
    pub foreground: bool,
    /// Skip the witness (the measurement of each shaped link after building).
    #[arg(long)]
    pub no_witness: bool,
    /// Seconds of each witness stream.
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds)]
    pub witness_length: f64,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["name", "all", "stale"])))]
pub struct LabDownArgs {
    /// The lab's name or id.
    pub name: Option<String>,
    /// Every lab.
    #[arg(long)]
    pub all: bool,
    /// The labs whose owning process is gone (a crash, a killed `lab up --foreground`).
    #[arg(long)]
    pub stale: bool,
}

#[derive(Debug, Args)]
pub struct LabStatusArgs {
    /// One lab (name or id); default: all.
    pub name: Option<String>,
    /// The labs' state as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LabSetArgs {
    /// The lab (name or id).
    pub name: String,
    /// The link or LAN, as `lab status` names it.
    pub link: String,
    /// The direction, by its sending host.
    pub host: String,
    /// delay=, jitter=, loss=, duplicate=, reorder=, corrupt= (percent), rate=, limit_packets=,
    /// limit_bytes=.
    pub set: Vec<String>,
    /// Put the lab's own back (those keys, or everything on that direction without any).
    #[arg(long)]
    pub reset: bool,
}

#[derive(Debug, Args)]
pub struct LabExecArgs {
    /// The lab (name or id).
    pub name: String,
    /// The host.
    pub host: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub cmd: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write the pages to (made if missing).
    #[arg(short = 'o', long = "out-dir", value_name = "DIR", default_value = ".")]
    pub out_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct MeshArgs {
    /// The agents: HOST or HOST:PORT ([IPv6]:PORT), at least two (with --discover, more may
    /// be found).
    #[arg(value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Find the agents in DNS: a name starting with `_` is asked for SRV records (a
    /// Kubernetes headless Service's `_netrig._tcp.SERVICE.NAMESPACE.svc.cluster.local`),
    /// another for its A and AAAA records (with --port).
    #[arg(long, value_name = "NAME", help_heading = "Where")]
    pub discover: Option<String>,
    /// The DNS server to ask (ADDR or ADDR:PORT); default: the first nameserver of
    /// /etc/resolv.conf.
    #[arg(long = "dns-server", value_name = "ADDR", help_heading = "Where")]
    pub dns_server: Option<String>,
    /// The agents' port where a host or an A record gives none [default: a plan's `port`, else
    /// 6387].
    #[arg(short = 'p', long, help_heading = "Where")]
    pub port: Option<u16>,
    /// full: every pair once (by the circle method: N-1 rounds for even N, N for odd);
    /// pairs: those of --pairs; star: every other host against --server.
    #[arg(long, value_enum, default_value_t = MeshPattern::Full, help_heading = "Schedule")]
    pub pattern: MeshPattern,
    /// The star's server: a host as given (default: the first).
    #[arg(long, value_name = "HOST", help_heading = "Schedule")]
    pub server: Option<String>,
    /// The pairs of --pattern pairs: CLIENT>SERVER, comma-separated, hosts as given.
    #[arg(
        long,
        value_name = "A>B,...",
        value_delimiter = ',',
        help_heading = "Schedule"
    )]
    pub pairs: Vec<String>,
    /// Full mesh: test each pair both ways (every ordered pair once).
    #[arg(long = "both-directions", help_heading = "Schedule")]
    pub both_directions: bool,
    /// Tests at once per round, at most (default: as many as the pattern allows with each
    /// host in one test at a time; a star's clients all at once).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000), help_heading = "Schedule")]
    pub concurrency: Option<u32>,
    /// Print the hosts and the schedule, and run nothing.
    #[arg(long, help_heading = "Schedule")]
    pub list: bool,
    /// This client's private key: the agents it asks must have it in their --authorized-keys.
    #[arg(long = "key", value_name = "FILE", help_heading = "Where")]
    pub key: Option<PathBuf>,
    /// The agents' public key to expect (FILE.pub or base64): an agent that does not prove it is
    /// refused.
    #[arg(long = "agent-key", value_name = "FILE|BASE64", help_heading = "Where")]
    pub agent_key: Option<String>,
    /// Seconds to wait for each connection to an agent.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = parse_seconds, help_heading = "Where")]
    pub connect_timeout: f64,
    /// Print the mesh's document as JSON on stdout instead of the table.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Print one CSV row per test instead of the table.
    #[arg(long, conflicts_with = "json", help_heading = "Output")]
    pub csv: bool,
    /// Write the HTML report (the heat map) to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,
    /// The test, after `--`: a kind and its options, as `netrig KIND` takes them (no -H: the
    /// mesh names the hosts), e.g. `-- tcp-stream -l 10`.
    #[arg(last = true, value_name = "KIND ARGS", required_unless_present = "plan")]
    pub test: Vec<String>,
    /// Read the hosts, the schedule and the tests from a mesh plan in TOML (docs/FLEET.md,
    /// "Mesh plans"): each of its tests runs over the whole schedule in turn. Hosts given here
    /// join the plan's, and --discover, --dns-server and --port here win over its own; keys,
    /// the connection timeout and the outputs stay on the command line.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["pattern", "server", "pairs", "both_directions", "concurrency", "test"],
        help_heading = "Schedule"
    )]
    pub plan: Option<PathBuf>,
}

/// `netrig mesh --pattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MeshPattern {
    Full,
    Pairs,
    Star,
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// The private key file to write; the public key goes to FILE.pub.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// The comment after the public key (default: user@host).
    #[arg(short = 'C', long = "comment")]
    pub comment: Option<String>,
}

/// The whole command line: netrig's subcommands, then a subcommand per test
/// kind (its options, and where the test goes and how it is shown).
pub fn command() -> clap::Command {
    netrig_kinds::all().iter().fold(Cli::command(), |cmd, kind| {
        // The run's options first: "Where" heads the help.
        let mut sub = RunArgs::augment_args(clap::Command::new(kind.name()));
        // A kind with one end also takes what only it can use.
        if matches!(kind.ends(), netrig_kinds::Ends::ClientOnly(_)) {
            sub = OneEndArgs::augment_args(sub);
        }
        let sub = kind.args(sub);
        // Last: the option groups' doc comments would stand in for it.
        cmd.subcommand(sub.about(kind.about()).long_about(None))
    })
}

#[derive(Debug, Args)]
pub struct QuickArgs {
    /// Seconds per test.
    #[arg(short = 'l', long = "length", short_alias = 't', alias = "time", default_value = "2", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    pub length: f64,
    /// Use IPv6 loopback (::1) instead of 127.0.0.1.
    #[arg(short = '6', long = "ipv6", help_heading = "Where")]
    pub ipv6: bool,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long, short_alias = 'J', help_heading = "Output")]
    pub json: bool,
    /// Write the suite's HTML report (tables, warnings, plots, environment, JSON) to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default: every IPv6 and IPv4 address); a link-local IPv6 address with
    /// its interface, as fe80::1%eth0.
    #[arg(long = "bind", value_name = "ADDR", value_parser = crate::values::parse_listen_ip, help_heading = "Where")]
    pub bind: Option<ScopedIp>,
    /// Port for control and data connections.
    #[arg(short = 'p', long = "port", default_value_t = netrig_proto::DEFAULT_PORT, help_heading = "Where")]
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
    /// Worker threads of all running tests together (each test also has one thread of its own,
    /// counted here). Default: 4 per CPU, at least 16.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub max_threads: Option<u32>,
    /// Buffer memory of all running tests together. Default: a quarter of the host's memory,
    /// between 256M and 4G.
    #[arg(long = "max-memory", value_parser = parse_size, value_name = "SIZE")]
    pub max_memory: Option<u64>,
    /// Flows (sockets) of all running tests together.
    #[arg(long, value_name = "N", default_value_t = 40_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_total_flows: u64,
    /// Sessions one client may hold at once (one IPv4 address, or one IPv6 /64).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_sessions_per_client: u32,
    /// Seconds a session may go without asking for a test, from its welcome or from the end of its
    /// last test; nothing the client sends in between extends it.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub idle_timeout: u64,
    /// The most payload a test may offer in each direction, all its flows together, in bits/s
    /// (K/M/G = 10^3/10^6/10^9). Tests must then state their rate (-b, or --rate for open loop);
    /// closed-loop request/response runs. Whatever a test states, the agent holds its own sends
    /// to the cap (streams, answers, datagrams) and the result says when it did. Default: no cap.
    #[arg(long = "max-rate", value_name = "RATE", value_parser = parse_max_rate)]
    pub max_rate: Option<u64>,
    /// The most times larger than its request a UDP answer may be (udp-rr's -r REQ,RESP, each
    /// with netrig's 28-byte header): a UDP request does not prove its sender's address, so
    /// larger answers would make the agent an amplifier. Raise it only for clients you trust
    /// (with --allow or --authorized-keys) or under --max-rate.
    #[arg(long = "max-amplification", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_amplification: u32,
    /// Serve only clients in this network (CIDR, or one address); repeat for more, on every port
    /// the agent opens (--http-port too). Others are told so (a few a second) and closed before
    /// their greeting is read. Default: any.
    #[arg(long = "allow", value_name = "CIDR", value_parser = parse_network)]
    pub allow: Vec<ipnet::IpNet>,
    /// What results tell clients that did not authenticate about this host: `full` (its name,
    /// kernel, CPU model, sysctls, host-wide counters and the witness) or `minimal` (only the
    /// test's own figures; the result says what is withheld). Authenticated clients get `full`.
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = Disclose::Full)]
    pub disclose: Disclose,
    /// Offer the hooks in DIR: tests may ask the agent to run one of them before and one after
    /// (--remote-setup, --remote-teardown), by name. Hooks are the executable regular files
    /// directly in DIR named with letters, digits, '.', '_' and '-' (no symbolic links); each runs
    /// without arguments or shell, in DIR, with a fixed environment (NETRIG_HOOK_PHASE, ...). See
    /// docs/SECURITY.md.
    #[arg(long = "hooks", value_name = "DIR")]
    pub hooks: Option<PathBuf>,
    /// Seconds a hook may run before it is killed, with its process group.
    #[arg(long = "hook-timeout", value_name = "SECONDS", default_value_t = netrig_proto::message::DEFAULT_HOOK_TIMEOUT_S,
          value_parser = clap::value_parser!(u64).range(1..=netrig_proto::message::MAX_HOOK_TIMEOUT_S), requires = "hooks")]
    pub hook_timeout: u64,
    /// Serve only clients whose public key is in FILE (one `netrig-ed25519 BASE64 comment` line
    /// each, as `netrig keygen` writes them; '#' comments). See docs/SECURITY.md.
    #[arg(long = "authorized-keys", value_name = "FILE")]
    pub authorized_keys: Option<PathBuf>,
    /// The agent's private key (`netrig keygen`): it proves to clients that it is this agent
    /// (their --agent-key).
    #[arg(long = "key", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Give a test that asks for it (`--profile`) a profile of this host over the agent's
    /// measured window: every CPU sampled (perf_event_open), the functions and names of every
    /// process on the host told to the client. Off: such a test's agent end is withheld, saying
    /// so (docs/PROFILE.md).
    #[arg(long = "allow-profile")]
    pub allow_profile: bool,
    /// Also serve iperf3 clients on this port (TCP and UDP; iperf3's own is 5201), besides the
    /// agent's port, which serves them too (docs/IPERF3.md).
    #[arg(long = "iperf3-port", value_name = "PORT", help_heading = "iperf3")]
    pub iperf3_port: Option<u16>,
    /// With --authorized-keys: serve iperf3 clients all the same, unauthenticated (they cannot
    /// prove a netrig key). Without it such an agent refuses them ("test authorization failed").
    #[arg(long = "iperf3", help_heading = "iperf3")]
    pub iperf3: bool,
    /// Also serve HTTP on this port, in the agent's process, on its --bind address (the options
    /// under "HTTP server" and "HTTP bounds" apply; docs/HTTP.md).
    #[arg(long = "http-port", value_name = "PORT", help_heading = "HTTP server")]
    pub http_port: Option<u16>,
    #[command(flatten)]
    pub http: Box<crate::http::HttpOptions>,
    /// Serve the agent's own counters (sessions, tests by kind, refusals by reason, bytes, iperf3
    /// sessions, uptime, version) on this port, on its --bind address, at GET /metrics for
    /// Prometheus: OpenMetrics text, or the classic text format. No key needed and nothing secret
    /// in it; firewall the port as any exporter's (docs/FLEET.md).
    #[arg(long = "metrics-port", value_name = "PORT", help_heading = "Metrics")]
    pub metrics_port: Option<u16>,
    /// Let a client that proved a key of --authorized-keys ask this agent to test another agent
    /// as its client (`netrig mesh`; agent-to-agent tests), towards agents in this network (CIDR,
    /// or one address; repeat for more; 0.0.0.0/0 and ::/0 for any). The other agent must always
    /// prove a key of its own (its --key) before any test traffic goes to it. Needs --key and
    /// --authorized-keys (docs/FLEET.md).
    #[arg(long = "allow-initiate", value_name = "CIDR", value_parser = parse_network, help_heading = "Fleets")]
    pub allow_initiate: Vec<ipnet::IpNet>,
    /// As --allow-initiate, towards agents that prove one of the keys in FILE (authorized_keys
    /// format: `netrig-ed25519 BASE64 comment` lines), wherever they are.
    #[arg(long = "initiate-keys", value_name = "FILE", help_heading = "Fleets")]
    pub initiate_keys: Option<PathBuf>,
    /// This agent's name in its welcome (e.g. its node's: a mesh's matrix labels it so); at most
    /// 64 bytes, no control characters.
    #[arg(long = "name", value_name = "NAME", value_parser = parse_agent_name, help_heading = "Fleets")]
    pub name: Option<String>,
    /// Log only warnings.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `--disclose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Disclose {
    Full,
    Minimal,
}

fn parse_max_rate(s: &str) -> Result<u64, String> {
    match netrig_kinds::args::parse_rate(s)? {
        0 => Err("must be more than 0 bits/s (leave --max-rate out for no cap)".into()),
        r => Ok(r),
    }
}

/// `--name`: as the protocol bounds it.
fn parse_agent_name(s: &str) -> Result<String, String> {
    netrig_proto::initiate::check_name(s).map(|()| s.to_string())
}

/// A network in CIDR notation, or one address (a /32 or /128).
fn parse_network(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map(|n| n.trunc())
        .map_err(|_| format!("{s:?} is neither a network (10.0.0.0/8, fd00::/8) nor an address"))
}

#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Agent host: a name, an IPv4 or an IPv6 address, each with :PORT if you like ([IPv6]:PORT).
    /// Without it, an in-process agent on loopback.
    #[arg(
        short = 'H',
        long = "host",
        value_name = "HOST[:PORT]",
        help_heading = "Where"
    )]
    pub host: Option<String>,
    /// Agent port (default 6387), or give it with -H HOST:PORT.
    #[arg(short = 'p', long = "port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..), help_heading = "Where")]
    pub port: Option<u16>,
    /// IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6", help_heading = "Where")]
    pub ipv4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "ipv6", help_heading = "Where")]
    pub ipv6: bool,
    /// Local address for every connection of this client; a link-local IPv6 address with its
    /// interface, as fe80::1%eth0 (as serve's --bind).
    #[arg(long = "bind", value_name = "ADDR", value_parser = parse_bind, help_heading = "Where")]
    pub bind: Option<String>,
    /// Seconds to wait for each connection to the agent.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds, help_heading = "Where")]
    pub connect_timeout: f64,
    /// This client's private key (`netrig keygen`), for an agent that requires authentication.
    #[arg(long = "key", value_name = "FILE", help_heading = "Where")]
    pub key: Option<PathBuf>,
    /// The agent's public key to expect (its FILE.pub, or the base64 key): the client refuses an
    /// agent that does not prove it holds it.
    #[arg(long = "agent-key", value_name = "FILE|BASE64", help_heading = "Where")]
    pub agent_key: Option<String>,
}

impl TargetArgs {
    /// Where the test goes, as the run API reads it.
    pub fn spec(&self) -> netrig_run::TargetSpec {
        netrig_run::TargetSpec {
            host: self.host.clone(),
            port: self.port,
            default_port: None,
            family: match (self.ipv4, self.ipv6) {
                (true, _) => netrig_run::AddressFamily::V4,
                (_, true) => netrig_run::AddressFamily::V6,
                _ => netrig_run::AddressFamily::Any,
            },
            bind: self.bind.clone(),
            key: self.key.clone(),
            agent_key: self.agent_key.clone(),
            names: netrig_run::Names::CLI,
        }
    }
}

/// `--start-at`: a wall-clock instant no more than [`netrig_client::MAX_START_WAIT`] ahead.
fn parse_start_at(text: &str) -> Result<f64, String> {
    let t: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a time in seconds since the Unix epoch (date +%s.%N)"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let most = netrig_client::MAX_START_WAIT.as_secs_f64();
    if !t.is_finite() || t <= 0.0 {
        return Err(format!("{text:?} is not a time in seconds since the Unix epoch"));
    }
    if t > now + most {
        return Err(format!(
            "{t} is {:.1} s ahead; a client waits at most {most} s for its start",
            t - now
        ));
    }
    Ok(t)
}

/// `--bind` (a client's): an address of this host, read as serve's `--bind`
/// reads it (the run API's reading); kept as written, for a plan to hold.
fn parse_bind(text: &str) -> Result<String, String> {
    netrig_run::local_ip(text).map(|_| text.to_string())
}

/// Options of kinds with one end (a load aimed at any server): only their
/// subcommands take them.
#[derive(Debug, Clone, Default, Args)]
pub struct OneEndArgs {
    /// The netrig agent on the server's host (`netrig serve` there, port 6387 unless given), asked
    /// to watch that host over the run: its CPU, listen-queue overflows, SYN cookies, conntrack,
    /// sockets by state (`server_host` in --json). --key and --agent-key apply to it.
    #[arg(long = "server-agent", value_name = "HOST[:PORT]", help_heading = "Where")]
    pub server_agent: Option<String>,
    /// Run the load from N client processes at once, each with its share of the connections,
    /// threads, requests and rate, each from its own source address (127.0.0.1, .2, ... against a
    /// loopback server, or --client-addrs), started together and summed (`summary.http.clients`
    /// has each one's part).
    #[arg(long = "clients", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Where")]
    pub clients: Option<u32>,
    /// With --clients: each client process's source address, one per client.
    #[arg(
        long = "client-addrs",
        value_name = "ADDR,...",
        value_delimiter = ',',
        requires = "clients",
        help_heading = "Where"
    )]
    pub client_addrs: Vec<IpAddr>,
    /// Run only client K's share of N (0-based; its share of the connections, threads, requests
    /// and rate, as --clients splits them): a lab plan's several client hosts each offer their
    /// part of one load (`clients = ["c1", "c2"]`).
    #[arg(long = "share", value_name = "K/N", value_parser = parse_share, hide = true, conflicts_with = "clients")]
    pub share: Option<(u32, u32)>,
}

/// `K/N` of `--share`: client K (from 0) of N (1 to 64).
pub fn parse_share(text: &str) -> Result<(u32, u32), String> {
    let (k, n) = text
        .split_once('/')
        .ok_or_else(|| format!("--share {text:?}: K/N, client K (from 0) of N"))?;
    let k: u32 = k
        .trim()
        .parse()
        .map_err(|e| format!("--share {text:?}: K: {e}"))?;
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|e| format!("--share {text:?}: N: {e}"))?;
    if n == 0 || n > 64 || k >= n {
        return Err(format!("--share {text:?}: K from 0 to N-1, N from 1 to 64"));
    }
    Ok((k, n))
}

/// `args` (a kind's subcommand's, after its name) without the options
/// [`RunArgs`] takes (where the test goes, how it is shown): what is left is
/// the kind's own, as a plan's test holds them.
pub fn kind_args(args: &[String]) -> Vec<String> {
    let cmd = OneEndArgs::augment_args(RunArgs::augment_args(clap::Command::new("run")));
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let t = &args[i];
        let (name, inline) = match t.split_once('=') {
            Some((n, v)) if t.starts_with("--") => (n, Some(v)),
            _ => (t.as_str(), None),
        };
        let found = cmd.get_arguments().find(|a| {
            name.strip_prefix("--").is_some_and(|l| {
                a.get_long() == Some(l) || a.get_all_aliases().is_some_and(|al| al.contains(&l))
            }) || (name.len() == 2
                && name.starts_with('-')
                && name.chars().nth(1).is_some_and(|c| {
                    a.get_short() == Some(c) || a.get_all_short_aliases().is_some_and(|al| al.contains(&c))
                }))
        });
        match found {
            Some(a) if takes_value(a) && inline.is_none() => {
                // Optional values (--save [DIR]) take the next word only if it is not an option.
                let optional = a.get_num_args().is_some_and(|n| n.min_values() == 0);
                let next_is_value = args.get(i + 1).is_some_and(|v| !v.starts_with('-'));
                i += if !optional || next_is_value { 2 } else { 1 };
            }
            Some(_) => i += 1,
            None => {
                out.push(t.clone());
                i += 1;
            }
        }
    }
    out
}

/// Where a test goes and how it is shown: what every kind's subcommand takes
/// besides its own options.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print one JSON document on stdout instead of the table (-J as iperf3).
    #[arg(long, short_alias = 'J', help_heading = "Output")]
    pub json: bool,
    /// As iperf3's --json-stream: one JSON object per line on stdout as the test goes,
    /// {"event": "interval", "data": ...} for each -i interval, then {"event": "end", "data":
    /// <the --json document>}, or {"event": "error", "data": "..."} if the test fails.
    #[arg(long = "json-stream", conflicts_with = "json", help_heading = "Output")]
    pub json_stream: bool,
    /// Begin at this wall-clock instant (seconds since the Unix epoch, as `date +%s.%N`): set up
    /// first, then send `go` at it, so that clients on several hosts with one clock begin
    /// together (a lab plan's `clients` passes it); at most 10 s ahead. The result's
    /// `started_unix_s` is when this client began.
    #[arg(long = "start-at", value_name = "UNIX_SECONDS", value_parser = parse_start_at, help_heading = "Where")]
    pub start_at: Option<f64>,
    #[command(flatten)]
    pub experiment: ExperimentArgs,
}

/// Options of a test that make it an experiment (with a numeric option
/// given as a list or range, e.g. `-m 32,64,128`, `-P 1..4`, `--rate
/// 100..2000:100`, `-s 64K..1M*2`: a sweep, one point per value).
#[derive(Debug, Clone, Args)]
pub struct ExperimentArgs {
    /// Repeat each point up to MAX times, at least MIN (netperf's -i max,min; default min 3).
    #[arg(long, value_name = "MAX[,MIN]", value_parser = parse_iterations, help_heading = "Experiment")]
    pub iterations: Option<(u32, Option<u32>)>,
    /// Stop repeating a point when the LEVEL% confidence interval of its mean (above 50 and below
    /// 100; netperf takes 95 or 99) is WIDTH% of the mean wide or less (netperf's -I level,width,
    /// e.g. 99,5); WIDTH is also the margin within which two arms are called equal.
    #[arg(long, value_name = "LEVEL,WIDTH", value_parser = parse_confidence, help_heading = "Experiment")]
    pub confidence: Option<(f64, f64)>,
    /// CSV: a run's rows per flow and sum, of each interval (-i) and of the window; an
    /// experiment's, one row per point and arm (docs/RESULTS.md, docs/EXPERIMENTS.md).
    #[arg(long, help_heading = "Output")]
    pub csv: bool,
    /// Write the plots that fit what was measured (docs/PLOTS.md) into DIR, as SVG and PNG.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub plot: Option<PathBuf>,
    /// Write a self-contained HTML report (the command, environment, warnings, tables, plots
    /// and the JSON) to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,
    /// Save the experiment's whole result (every run, the plan, the environment) in DIR
    /// (default ./netrig-results).
    #[arg(long, value_name = "DIR", num_args = 0..=1, help_heading = "Output")]
    pub save: Option<Option<PathBuf>>,
    /// After the run, push its summary to the Prometheus Pushgateway at URL (http://HOST:PORT),
    /// job "netrig", grouped by kind and target (an experiment: one group per test, point and
    /// arm, each figure the mean of its runs). Figures withheld are not pushed (docs/FLEET.md).
    #[arg(long, value_name = "URL", help_heading = "Output")]
    pub push: Option<String>,
}

/// The regression gate's options.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// The metric checked: throughput, transactions_per_s, latency_p50, latency_p99, loss,
    /// cpu_local, cpu_remote, sd_local, sd_remote (default: each test's headline figure).
    #[arg(long)]
    pub metric: Option<String>,
    /// How much worse, in percent, counts as a regression (the whole confidence interval beyond it).
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// Confidence level of the check, in percent.
    #[arg(long, default_value_t = 95.0)]
    pub level: f64,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The plan file (TOML; see plans/ and docs/EXPERIMENTS.md).
    pub plan: PathBuf,
    /// Run the plan's tests against the agent on HOST instead of the plan's target (HOST:PORT or
    /// [IPv6]:PORT as a test's -H).
    #[arg(
        short = 'H',
        long = "host",
        value_name = "HOST[:PORT]",
        help_heading = "Where"
    )]
    pub host: Option<String>,
    /// The agent's port (default 6387), instead of the plan's.
    #[arg(short = 'p', long = "port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..), help_heading = "Where")]
    pub port: Option<u16>,
    /// Every test's length, in seconds, instead of the plan's (-l): a quick look at a long plan.
    #[arg(short = 'l', long = "length", value_parser = parse_seconds, value_name = "SECONDS", help_heading = "How long")]
    pub length: Option<f64>,
    /// The plan's quick form: what its `[study.quick]` reduces (without one: 1 s tests, one run
    /// per point, each sweep at its first and last value); a study's in at most 2 minutes.
    #[arg(long, help_heading = "How long")]
    pub quick: bool,
    /// Print the experiment document (JSON) on stdout instead of the table.
    #[arg(long, short_alias = 'J', help_heading = "Output")]
    pub json: bool,
    #[command(flatten)]
    pub output: ExperimentOutput,
    /// Compare with this saved experiment afterwards and exit 3 if it regressed.
    #[command(flatten)]
    pub gate: BaselineArgs,
}

/// How a plan's experiment is shown and kept (a test's command line has these in ExperimentArgs).
pub type ExperimentOutput = ExperimentArgs;

/// A plan's regression gate against a saved baseline.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// A saved experiment to check this one against (exit 3 on a regression).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub gate: GateArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A saved experiment (--save) or one test's --json output.
    pub file: PathBuf,
    /// The HTML file to write (default: FILE with .html).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Leave a saved experiment's JSON document out of the report (it names FILE instead): a
    /// long experiment's document is megabytes.
    #[arg(long = "no-data")]
    pub no_data: bool,
    /// Derive a study's answer again from the saved runs with this netrig's study code (the
    /// report shows it; the file is not changed).
    #[arg(long = "answer-again")]
    pub answer_again: bool,
}

#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// The directory (default ./netrig-results).
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A saved experiment (--save, or run's --json) or one test's --json result.
    pub file: PathBuf,
    /// The directory the .svg files go in (created if need be).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = ".")]
    pub output: PathBuf,
    /// A PNG beside each SVG.
    #[arg(long)]
    pub png: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The saved baseline.
    pub baseline: PathBuf,
    /// The saved experiment checked against it.
    pub new: PathBuf,
    #[command(flatten)]
    pub gate: GateArgs,
}

/// netperf's -i: "MAX" or "MAX,MIN".
pub fn parse_iterations(s: &str) -> Result<(u32, Option<u32>), String> {
    let bad = || format!("{s:?}: use MAX or MAX,MIN, e.g. 10,3");
    let mut parts = s.split(',');
    let max: u32 = parts.next().and_then(|x| x.trim().parse().ok()).ok_or_else(bad)?;
    let min = match parts.next() {
        Some(x) => Some(x.trim().parse::<u32>().map_err(|_| bad())?),
        None => None,
    };
    if parts.next().is_some() || max == 0 || min.is_some_and(|m| m == 0 || m > max) {
        return Err(bad());
    }
    Ok((max, min))
}

/// netperf's -I: "LEVEL,WIDTH".
pub fn parse_confidence(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("{s:?}: use LEVEL,WIDTH in percent, e.g. 99,5");
    let (l, w) = s.split_once(',').ok_or_else(bad)?;
    let l: f64 = l.trim().parse().map_err(|_| bad())?;
    let w: f64 = w.trim().parse().map_err(|_| bad())?;
    if !(l > 50.0 && l < 100.0 && w > 0.0 && w <= 100.0) {
        return Err(bad());
    }
    Ok((l, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    /// clap's own consistency checks (duplicate short options, aliases
    /// that collide), which a release build does not run.
    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    /// A lab client host's share of a load several hosts offer (`--share K/N`, hidden).
    #[test]
    fn a_share_is_client_k_of_n() {
        assert_eq!(parse_share("1/2"), Ok((1, 2)));
        assert_eq!(parse_share("0/1"), Ok((0, 1)));
        for bad in ["2/2", "0/0", "1", "a/2", "0/65"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
        let m = command()
            .try_get_matches_from([
                "netrig",
                "http",
                "--url",
                "http://h:8080/",
                "-R",
                "1000",
                "--share",
                "1/2",
            ])
            .unwrap();
        let (_, sm) = m.subcommand().unwrap();
        assert_eq!(OneEndArgs::from_arg_matches(sm).unwrap().share, Some((1, 2)));
        // Not with --clients, which splits among processes of its own.
        assert!(command()
            .try_get_matches_from([
                "netrig",
                "http",
                "--url",
                "http://h/",
                "--clients",
                "2",
                "--share",
                "0/2"
            ])
            .is_err());
    }

    #[test]
    fn iperf3_spellings_are_accepted() {
        let m = command()
            .try_get_matches_from(["netrig", "tcp-stream", "-t", "3", "-O", "1", "-J"])
            .unwrap();
        let (name, sm) = m.subcommand().unwrap();
        assert_eq!(name, "tcp-stream");
        let plan = netrig_kinds::by_name(name).unwrap().plan(sm).unwrap();
        // As iperf3: 3 s measured after the 1 s omitted (issue #37, item 11).
        assert_eq!(
            plan.spec.limit,
            netrig_proto::spec::Limit::Duration { seconds: 4.0 }
        );
        assert_eq!(plan.spec.omit_s, 1.0);
        assert!(RunArgs::from_arg_matches(sm).unwrap().json);
    }

    #[test]
    fn a_kinds_own_options_are_told_from_the_runs() {
        let args: Vec<String> = [
            "-l",
            "1",
            "-H",
            "h",
            "--json",
            "-m",
            "64",
            "--save",
            "-p",
            "7",
            "--iterations=5",
            "-P",
            "2",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(kind_args(&args), ["-l", "1", "-m", "64", "-P", "2"]);
        let args: Vec<String> = ["--save", "dir", "-J", "-6", "-l", "2"]
            .map(String::from)
            .to_vec();
        assert_eq!(kind_args(&args), ["-l", "2"]);
    }

    /// Every kind of the registry is a subcommand, described as the kind
    /// describes itself.
    #[test]
    fn every_kind_is_a_subcommand() {
        let cmd = command();
        for kind in netrig_kinds::all() {
            let sub = cmd
                .find_subcommand(kind.name())
                .unwrap_or_else(|| panic!("{}", kind.name()));
            assert_eq!(
                sub.get_about().map(|a| a.to_string()).as_deref(),
                Some(kind.about())
            );
        }
    }
}
