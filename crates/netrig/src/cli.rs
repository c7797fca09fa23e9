//! The command line.

use clap::{Args, CommandFactory, Parser, Subcommand};
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
}

/// The whole command line: netrig's subcommands, then a subcommand per test
/// kind (its options, and where the test goes and how it is shown).
pub fn command() -> clap::Command {
    netrig_kinds::all().iter().fold(Cli::command(), |cmd, kind| {
        let sub = RunArgs::augment_args(kind.args(clap::Command::new(kind.name())));
        // Last: the option groups' doc comments would stand in for it.
        cmd.subcommand(sub.about(kind.about()).long_about(None))
    })
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

/// Where a test goes and how it is shown: what every kind's subcommand takes
/// besides its own options.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print one JSON document on stdout instead of the table (-J as iperf3).
    #[arg(long, short_alias = 'J')]
    pub json: bool,
    /// As iperf3's --json-stream: one JSON object per line on stdout as the test goes,
    /// {"event": "interval", "data": ...} for each -i interval, then {"event": "end", "data":
    /// <the --json document>}, or {"event": "error", "data": "..."} if the test fails.
    #[arg(long = "json-stream", conflicts_with = "json")]
    pub json_stream: bool,
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

    #[test]
    fn iperf3_spellings_are_accepted() {
        let m = command()
            .try_get_matches_from(["netrig", "tcp-stream", "-t", "3", "-O", "1", "-J"])
            .unwrap();
        let (name, sm) = m.subcommand().unwrap();
        assert_eq!(name, "tcp-stream");
        let plan = netrig_kinds::by_name(name).unwrap().plan(sm).unwrap();
        assert_eq!(
            plan.spec.limit,
            netrig_proto::spec::Limit::Duration { seconds: 3.0 }
        );
        assert_eq!(plan.spec.omit_s, 1.0);
        assert!(RunArgs::from_arg_matches(sm).unwrap().json);
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
