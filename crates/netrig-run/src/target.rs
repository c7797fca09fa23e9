//! Where tests go, as users write it: the one reading of a host (with its
//! port), of `--bind` and of the keys, for the command line's `-H`, `-p`,
//! `--server-agent`, `--bind`, `--key`, `--agent-key` and a plan's
//! `[target]` alike, so each takes the same spellings and says the same
//! things about them.

use crate::Target;
use netrig_client::Family;
use netrig_engine::addr::ScopedIp;
use netrig_proto::auth::{ClientAuth, PublicKey, SecretKey};
use std::path::PathBuf;

/// The names a target's parts go by where they were written (the command
/// line's options, or a plan's keys), for errors to name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    pub host: &'static str,
    pub port: &'static str,
    pub bind: &'static str,
    pub key: &'static str,
    pub agent_key: &'static str,
    pub server_agent: &'static str,
}

impl Names {
    /// A test's command line (and `netrig run`'s).
    pub const CLI: Names = Names {
        host: "-H",
        port: "-p",
        bind: "--bind",
        key: "--key",
        agent_key: "--agent-key",
        server_agent: "--server-agent",
    };
    /// A plan's `[target]`.
    pub const PLAN: Names = Names {
        host: "target.host",
        port: "target.port",
        bind: "target.bind",
        key: "target.key",
        agent_key: "target.agent_key",
        server_agent: "target.server_agent",
    };
}

impl Default for Names {
    fn default() -> Names {
        Names::CLI
    }
}

/// Where tests go, as written: read into a [`Target`] by [`TargetSpec::target`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetSpec {
    /// The agent's host: a name, an IPv4 address, an IPv6 address (bare, or
    /// in brackets; with `%interface` when link-local), each with `:PORT`
    /// (`[IPv6]:PORT`). None: an agent in this process.
    pub host: Option<String>,
    /// The port given on its own (`-p`).
    pub port: Option<u16>,
    /// The port when neither the host nor `-p` gives one (None: the
    /// agent's default port): an HTTP load's server port from its URL.
    pub default_port: Option<u16>,
    pub family: Family,
    /// The local address of every connection (`--bind`), as serve's
    /// `--bind` takes it.
    pub bind: Option<String>,
    /// This client's private key file.
    pub key: Option<PathBuf>,
    /// The agent's public key: the key itself or a file holding it.
    pub agent_key: Option<String>,
    pub names: Names,
}

/// A host with an optional port, as `-H`, `--server-agent` and a plan's
/// host take it: `NAME`, `NAME:PORT`, `IPv4`, `IPv4:PORT`, an IPv6 address
/// alone (its colons are the address's: it stays a host), `[IPv6]` and
/// `[IPv6]:PORT` (a scope inside the brackets). `port` is the port given
/// on its own (`-p`); a port in both that disagree is an error naming both.
/// Neither: the agent's default port. Errors start with `option text:`.
pub fn host_port(
    option: &str,
    text: &str,
    port_option: &str,
    port: Option<u16>,
) -> Result<(String, u16), String> {
    host_port_or(option, text, port_option, port, netrig_proto::DEFAULT_PORT)
}

/// [`host_port`] with the port to take when neither gives one: the
/// server's own (an HTTP load's URL) for a kind with one end.
pub fn host_port_or(
    option: &str,
    text: &str,
    port_option: &str,
    port: Option<u16>,
    default: u16,
) -> Result<(String, u16), String> {
    let bad = |why: String| Err(format!("{option} {text}: {why}"));
    let parse_port = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{option} {text}: {p:?} is not a port (1 to 65535)")),
    };
    if text.contains("://") {
        return bad(format!(
            "{option} takes a host name or address, not a URL (for HTTP load: `netrig http --url {text}`)"
        ));
    }
    let (host, given): (&str, Option<u16>) = if let Some(rest) = text.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return bad("a '[' without its ']'".into());
        };
        match after.strip_prefix(':') {
            Some(p) => (host, Some(parse_port(p)?)),
            None if after.is_empty() => (host, None),
            None => return bad("expected :PORT after ']'".into()),
        }
    } else {
        match text.matches(':').count() {
            0 => (text, None),
            1 => {
                let (h, p) = text.split_once(':').expect("one colon");
                (h, Some(parse_port(p)?))
            }
            // An IPv6 literal without a port.
            _ if text.parse::<std::net::Ipv6Addr>().is_ok() || text.contains('%') => (text, None),
            _ => {
                return bad(
                    "give HOST, HOST:PORT, an IPv6 address, or [IPv6]:PORT (an IPv6 address with a port \
                     goes in brackets)"
                        .into(),
                )
            }
        }
    };
    if host.is_empty() {
        return bad("no host".into());
    }
    let port = match (given, port) {
        (Some(a), Some(b)) if a != b => {
            return bad(format!(
                "its port {a} and {port_option} {b} disagree: give the port once"
            ))
        }
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => default,
    };
    Ok((host.to_string(), port))
}

/// A client's local address to bind (`--bind`), read as `serve --bind`
/// reads it: an IP address, an IPv6 one with its `%interface` or `%index`;
/// unlike serve's, a link-local one may go without it (it is used on the
/// agent address's interface). Errors say what is wrong; the caller names
/// the option.
pub fn local_ip(text: &str) -> Result<ScopedIp, String> {
    if let Ok(v6) = text.parse::<std::net::Ipv6Addr>() {
        return Ok(ScopedIp {
            ip: v6.into(),
            scope_id: 0,
        });
    }
    netrig_engine::addr::parse_ip(text)?.ok_or_else(|| {
        format!("{text:?} is not an IP address (give one of this host's addresses, not a name)")
    })
}

impl TargetSpec {
    /// The keys named, read (a key file that cannot be read or parsed is an
    /// error naming it).
    pub fn auth(&self) -> Result<ClientAuth, String> {
        let n = &self.names;
        let key = self
            .key
            .as_ref()
            .map(|p| {
                let text =
                    std::fs::read_to_string(p).map_err(|e| format!("{} {}: {e}", n.key, p.display()))?;
                SecretKey::parse(&text).map_err(|e| format!("{} {}: {e}", n.key, p.display()))
            })
            .transpose()?;
        let agent_key = self
            .agent_key
            .as_deref()
            .map(|k| {
                // A key itself, or a file holding one.
                PublicKey::parse(k).or_else(|_| {
                    let text = std::fs::read_to_string(k).map_err(|e| {
                        format!(
                            "{} {k}: neither a base64 key nor a readable file ({e})",
                            n.agent_key
                        )
                    })?;
                    PublicKey::parse(&text).map_err(|e| format!("{} {k}: {e}", n.agent_key))
                })
            })
            .transpose()?;
        Ok(ClientAuth { key, agent_key })
    }

    /// The `--bind` address, checked against the host's scope: a link-local
    /// address is used on the interface of the agent's address, so one
    /// naming another interface is refused rather than ignored.
    fn bind(&self, host: Option<&str>) -> Result<Option<std::net::IpAddr>, String> {
        let n = &self.names;
        let Some(text) = &self.bind else { return Ok(None) };
        let ip = local_ip(text).map_err(|e| format!("{} {text}: {e}", n.bind))?;
        if ip.scope_id != 0 {
            let peer = host.and_then(|h| netrig_engine::addr::parse_ip(h).ok().flatten());
            if let Some(peer) = peer.filter(|p| p.scope_id != ip.scope_id) {
                return Err(format!(
                    "{} {text}: its interface is not that of the agent's address {} (a link-local \
                     address is used on the link the agent is on)",
                    n.bind,
                    peer.with_port(0).ip()
                ));
            }
        }
        Ok(Some(ip.ip))
    }

    /// Where the tests go: the agent at the host (its port from the host or
    /// [`port`](Self::port)), or an agent in this process, which takes no
    /// port, keys or `--bind` of the user's.
    pub fn target(&self) -> Result<Target, String> {
        let n = &self.names;
        let auth = self.auth()?;
        let Some(h) = &self.host else {
            if let Some(p) = self.port {
                return Err(format!(
                    "{} {p} is the port of an agent given with {}; without {} the test runs against an \
                     agent in this process, on a port of its own",
                    n.port, n.host, n.host
                ));
            }
            if auth != ClientAuth::default() {
                return Err(format!(
                    "{} and {} are for an agent given with {}; the in-process agent needs none",
                    n.key, n.agent_key, n.host
                ));
            }
            let _ = self.bind(None)?;
            return Ok(Target::embedded(self.family == Family::V6));
        };
        let default = self.default_port.unwrap_or(netrig_proto::DEFAULT_PORT);
        let (host, port) = host_port_or(n.host, h, n.port, self.port, default)?;
        let bind = self.bind(Some(&host))?;
        Ok(Target::Agent {
            host,
            port,
            family: self.family,
            bind,
            auth,
        })
    }

    /// `--server-agent HOST[:PORT]` (kinds with one end), with these keys,
    /// family and `--bind`.
    pub fn server_agent(&self, text: &str) -> Result<Target, String> {
        let n = &self.names;
        let (host, port) = host_port(n.server_agent, text, n.port, None)?;
        Ok(Target::Agent {
            bind: self.bind(Some(&host))?,
            host,
            port,
            family: self.family,
            auth: self.auth()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(text: &str, port: Option<u16>) -> Result<(String, u16), String> {
        host_port("-H", text, "-p", port)
    }

    #[test]
    fn hosts_take_their_port_in_every_spelling() {
        let d = netrig_proto::DEFAULT_PORT;
        assert_eq!(hp("web1", None).unwrap(), ("web1".into(), d));
        assert_eq!(hp("web1", Some(7)).unwrap(), ("web1".into(), 7));
        assert_eq!(hp("127.0.0.1:41001", None).unwrap(), ("127.0.0.1".into(), 41001));
        assert_eq!(
            hp("10.0.0.2:7000", Some(7000)).unwrap(),
            ("10.0.0.2".into(), 7000)
        );
        // A bare IPv6 address stays a host: its last group is no port.
        assert_eq!(hp("::1", None).unwrap(), ("::1".into(), d));
        assert_eq!(hp("2001:db8::1", Some(9)).unwrap(), ("2001:db8::1".into(), 9));
        assert_eq!(hp("[::1]:7000", None).unwrap(), ("::1".into(), 7000));
        assert_eq!(hp("[::1]", Some(5)).unwrap(), ("::1".into(), 5));
        assert_eq!(hp("fe80::1%eth0", None).unwrap(), ("fe80::1%eth0".into(), d));
        assert_eq!(hp("[fe80::1%eth0]:8", None).unwrap(), ("fe80::1%eth0".into(), 8));
    }

    #[test]
    fn bad_hosts_and_ports_are_named() {
        for bad in [
            "", "h:x", "h:70000", "h:0", ":80", "[::1", "[::1]x", "a:b:c", "[]:80",
        ] {
            let e = hp(bad, None).unwrap_err();
            assert!(e.starts_with(&format!("-H {bad}:")), "{bad}: {e}");
        }
        let e = hp("127.0.0.1:41001", Some(6000)).unwrap_err();
        assert!(
            e.contains("41001") && e.contains("-p 6000") && e.contains("disagree"),
            "{e}"
        );
        let e = host_port("--server-agent", "[::1]:1", "-p", Some(2)).unwrap_err();
        assert!(e.starts_with("--server-agent [::1]:1:"), "{e}");
        let e = hp("http://h:80/x", None).unwrap_err();
        assert!(e.contains("not a URL"), "{e}");
    }

    #[test]
    fn a_target_reads_its_parts_or_names_the_one_that_is_wrong() {
        let spec = TargetSpec {
            host: Some("[::1]:7000".into()),
            bind: Some("::1".into()),
            family: Family::V6,
            ..TargetSpec::default()
        };
        assert_eq!(
            spec.target().unwrap(),
            Target::Agent {
                host: "::1".into(),
                port: 7000,
                family: Family::V6,
                bind: Some("::1".parse().unwrap()),
                auth: Default::default(),
            }
        );
        let e = TargetSpec {
            port: Some(7000),
            ..TargetSpec::default()
        }
        .target()
        .unwrap_err();
        assert!(
            e.starts_with("-p 7000 is the port of an agent given with -H"),
            "{e}"
        );
        let e = TargetSpec {
            host: Some("h".into()),
            bind: Some("h2".into()),
            names: Names::PLAN,
            ..TargetSpec::default()
        }
        .target()
        .unwrap_err();
        assert!(
            e.starts_with("target.bind h2: \"h2\" is not an IP address"),
            "{e}"
        );
        // serve's --bind spelling: a scoped link-local address (lo's index is 1).
        let t = TargetSpec {
            host: Some("fe80::2%1".into()),
            bind: Some("fe80::1%lo".into()),
            ..TargetSpec::default()
        }
        .target()
        .unwrap();
        assert!(
            matches!(t, Target::Agent { bind: Some(b), .. } if b.to_string() == "fe80::1"),
            "{t:?}"
        );
        let e = TargetSpec {
            host: Some("fe80::2%1".into()),
            bind: Some("fe80::1%7".into()),
            ..TargetSpec::default()
        }
        .target()
        .unwrap_err();
        assert!(
            e.contains("--bind fe80::1%7: its interface is not that of the agent's address"),
            "{e}"
        );
    }
}
