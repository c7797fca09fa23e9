//! `netrig mesh`: agents tested against each other (issue #43). The hosts come from the command
//! line or DNS (netrig_fleet::discover), the schedule from the pattern (netrig_fleet::schedule),
//! the test from the options after `--` (parsed as `netrig KIND` parses them), and each test is
//! run by one agent against another (netrig_fleet::orchestrate, protocol 8's `initiate`); the
//! matrix is printed as a table, JSON or CSV, and written as an HTML heat map.

use crate::cli::{MeshArgs, MeshPattern, RunArgs};
use crate::{cancel, Usage};
use anyhow::{bail, Result};
use clap::FromArgMatches;
use netrig_fleet::matrix::{MeshHost, Pattern};
use netrig_fleet::plan::{MeshPlan, PlanPattern};
use netrig_fleet::schedule::{self, Pair};
use netrig_proto::initiate::ClientEnd;
use netrig_proto::TestSpec;
use std::time::Duration;

/// The test after `--`, as `netrig KIND ...` would read it: its spec, and the client's own end.
fn test_spec(args: &[String]) -> Result<(TestSpec, ClientEnd)> {
    let Some(name) = args.first() else {
        bail!(Usage(
            "netrig mesh: name the test after `--` (e.g. `-- tcp-stream -l 10`)".into()
        ));
    };
    let Some(kind) = netrig_kinds::by_name(name) else {
        bail!(Usage(format!(
            "netrig mesh: {name:?} after `--` is not a test kind"
        )));
    };
    if matches!(kind.ends(), netrig_kinds::Ends::ClientOnly(_)) {
        bail!(Usage(format!(
            "netrig mesh: {name} runs without an agent at its server: a mesh's tests are between agents"
        )));
    }
    let argv = std::iter::once("netrig".to_string()).chain(args.iter().cloned());
    let m = crate::cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| Usage(format!("netrig mesh: the test after `--`: {e}")))?;
    let (_, sub) = m.subcommand().expect("a kind's subcommand");
    let run = RunArgs::from_arg_matches(sub)?;
    if run.target.host.is_some() || run.target.key.is_some() || run.target.agent_key.is_some() {
        bail!(Usage(
            "netrig mesh: -H, --key and --agent-key go before `--`: the mesh names the hosts, and each \
             agent tests another with its own key"
                .into()
        ));
    }
    if run.json || run.json_stream || run.start_at.is_some() || run.experiment.iterations.is_some() {
        bail!(Usage(
            "netrig mesh: --json, --json-stream, --start-at and --iterations are the mesh's own (or not \
             its): give --json before `--`"
                .into()
        ));
    }
    let plan = kind.plan(sub).map_err(Usage)?;
    if plan.local.cpus.is_some() || plan.profile {
        bail!(Usage(
            "netrig mesh: --cpus and --profile set the client's own end, which an agent runs here: not \
             carried (give --remote-cpus for the server's end)"
                .into()
        ));
    }
    Ok((plan.spec, client_end(&plan.local.sockets)))
}

/// The client's own socket options (`-s`, `--dscp`/`--tos`, `--priority`, `--max-pacing-rate`,
/// `--mss`), sent with each test to the agent that runs its client; the TCP options both ends
/// take (`--cc`, `--nodelay`, `--mptcp`) are in the spec already.
fn client_end(s: &netrig_engine::sockopt::SocketSettings) -> ClientEnd {
    ClientEnd {
        socket: netrig_proto::spec::SocketOptions {
            sndbuf: s.sndbuf,
            rcvbuf: s.rcvbuf,
            tos: s.tos,
            priority: s.priority,
            max_pacing_rate_bps: s.max_pacing_rate_bps,
        },
        mss: s.mss,
    }
}

/// HOST or HOST:PORT as an address `host:port` (IPv6 bracketed).
fn address(host: &str, port: u16) -> Result<String> {
    let (h, p) =
        netrig_run::target::host_port_or("netrig mesh HOST", host, "--port", None, port).map_err(Usage)?;
    Ok(if h.contains(':') {
        format!("[{h}]:{p}")
    } else {
        format!("{h}:{p}")
    })
}

fn hosts(a: &MeshArgs) -> Result<Vec<MeshHost>> {
    let port = a.port.unwrap_or(netrig_proto::DEFAULT_PORT);
    let mut hosts = Vec::new();
    for h in &a.hosts {
        hosts.push(MeshHost {
            name: h.clone(),
            address: address(h, port)?,
            label: None,
        });
    }
    if let Some(name) = &a.discover {
        let server = a
            .dns_server
            .as_deref()
            .map(|s| netrig_fleet::discover::parse_dns_server(s).map_err(Usage))
            .transpose()?;
        let found = netrig_fleet::discover::discover(name, port, server, Duration::from_secs(5))
            .map_err(|e| Usage(format!("--discover {name}: {e}")))?;
        for f in found {
            let address = f.addr.to_string();
            if !hosts.iter().any(|h: &MeshHost| h.address == address) {
                hosts.push(MeshHost {
                    name: f.name,
                    address,
                    label: None,
                });
            }
        }
    }
    if hosts.len() < 2 {
        bail!(Usage(format!(
            "netrig mesh: {} agent(s) given or found; a mesh needs at least 2",
            hosts.len()
        )));
    }
    Ok(hosts)
}

/// A host as the user named it (its name, or its address).
fn index_of(hosts: &[MeshHost], named: &str, option: &str) -> Result<usize> {
    hosts
        .iter()
        .position(|h| h.name == named || h.address == named)
        .ok_or_else(|| {
            Usage(format!(
                "{option} {named}: not among the hosts ({})",
                hosts
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .into()
        })
}

fn plan(a: &MeshArgs, hosts: &[MeshHost]) -> Result<(Pattern, schedule::Plan)> {
    let concurrency = a.concurrency.map(|c| c as usize);
    Ok(match a.pattern {
        MeshPattern::Full => (
            Pattern::Full,
            schedule::Plan {
                shape: schedule::Shape::Full {
                    both_directions: a.both_directions,
                },
                concurrency,
            },
        ),
        MeshPattern::Star => (
            Pattern::Star,
            schedule::Plan {
                shape: schedule::Shape::Star {
                    server: a
                        .server
                        .as_deref()
                        .map_or(Ok(0), |s| index_of(hosts, s, "--server"))?,
                },
                concurrency,
            },
        ),
        MeshPattern::Pairs => {
            if a.pairs.is_empty() {
                bail!(Usage("--pattern pairs: give them with --pairs A>B,C>D".into()));
            }
            let mut pairs = Vec::new();
            for p in &a.pairs {
                let Some((c, s)) = p.split_once('>') else {
                    bail!(Usage(format!("--pairs {p}: write CLIENT>SERVER")));
                };
                pairs.push(Pair {
                    client: index_of(hosts, c.trim(), "--pairs")?,
                    server: index_of(hosts, s.trim(), "--pairs")?,
                });
            }
            (
                Pattern::Pairs,
                schedule::Plan {
                    shape: schedule::Shape::Pairs(pairs),
                    concurrency,
                },
            )
        }
    })
}

/// A plan's hosts and schedule, put where the command line's would be: hosts given there join
/// the plan's; its --discover, --dns-server and --port win.
fn apply_plan(a: &mut MeshArgs, p: &MeshPlan) {
    a.hosts = p.hosts.iter().chain(&a.hosts).cloned().collect();
    a.discover = a.discover.take().or_else(|| p.discover.clone());
    a.dns_server = a.dns_server.take().or_else(|| p.dns_server.clone());
    a.port = a.port.or(p.port);
    a.pattern = match p.pattern {
        PlanPattern::Full => MeshPattern::Full,
        PlanPattern::Pairs => MeshPattern::Pairs,
        PlanPattern::Star => MeshPattern::Star,
    };
    a.server = p.server.clone();
    a.pairs = p.pairs.clone();
    a.both_directions = p.both_directions;
    a.concurrency = p.concurrency;
}

/// `netrig mesh`.
pub fn mesh(mut a: MeshArgs) -> Result<()> {
    let plan_file = match &a.plan {
        Some(path) => Some(MeshPlan::read(path).map_err(|e| Usage(e.to_string()))?),
        None => None,
    };
    let tests: Vec<Vec<String>> = match &plan_file {
        Some(p) => {
            apply_plan(&mut a, p);
            p.tests.iter().map(|t| t.words()).collect()
        }
        None => vec![a.test.clone()],
    };
    // Every test is checked before anything runs.
    let mut specs = Vec::new();
    for (i, words) in tests.iter().enumerate() {
        specs.push(match &a.plan {
            Some(path) => test_spec(words).map_err(|e| {
                Usage(format!(
                    "mesh plan {}: test {} ({}): {e}",
                    path.display(),
                    i + 1,
                    words.join(" ")
                ))
            })?,
            None => test_spec(words)?,
        });
    }
    let hosts = hosts(&a)?;
    let (pattern, plan) = plan(&a, &hosts)?;
    let rounds = schedule::rounds(hosts.len(), &plan).map_err(|e| Usage(e.to_string()))?;
    if a.list {
        for (i, h) in hosts.iter().enumerate() {
            println!("host {i}: {} ({})", h.name, h.address);
        }
        for (i, r) in rounds.iter().enumerate() {
            let tests: Vec<String> = r
                .iter()
                .map(|p| format!("{} > {}", hosts[p.client].name, hosts[p.server].name))
                .collect();
            println!("round {}: {}", i + 1, tests.join(", "));
        }
        if plan_file.is_some() {
            for (i, words) in tests.iter().enumerate() {
                println!("test {}: {}", i + 1, words.join(" "));
            }
        }
        return Ok(());
    }
    let target = netrig_run::TargetSpec {
        key: a.key.clone(),
        agent_key: a.agent_key.clone(),
        ..netrig_run::TargetSpec::default()
    };
    let auth = target.auth().map_err(Usage)?;
    if auth.key.is_none() {
        bail!(Usage(
            "netrig mesh needs --key FILE: an agent runs a test for a client only once it proved a key of \
             the agent's --authorized-keys"
                .into()
        ));
    }
    let quiet = a.json || a.csv;
    let plan_name = plan_file.as_ref().and_then(|p| p.name.clone());
    let mut docs = Vec::new();
    for ((spec, client), words) in specs.into_iter().zip(&tests) {
        if cancel().is_cancelled() {
            break;
        }
        if tests.len() > 1 && !quiet {
            eprintln!(
                "netrig mesh: test {} of {}: {}",
                docs.len() + 1,
                tests.len(),
                words.join(" ")
            );
        }
        let mesh = netrig_fleet::orchestrate::Mesh {
            hosts: hosts.clone(),
            pattern,
            concurrency: a.concurrency.map(|c| c as usize),
            rounds: rounds.clone(),
            spec,
            args: words[1..].to_vec(),
            client,
            auth: auth.clone(),
            connect_timeout: Duration::from_secs_f64(a.connect_timeout.max(0.001)),
        };
        let doc = netrig_fleet::orchestrate::run(&mesh, &|| cancel().is_cancelled(), &mut |line| {
            if !quiet {
                eprintln!("netrig mesh: {line}");
            }
        });
        if quiet {
            // The document on stdout; the matrix for whoever reads the log (a Kubernetes Job's).
            eprint!("{}", netrig_fleet::render::table(&doc));
        } else {
            if !docs.is_empty() {
                println!();
            }
            print!("{}", netrig_fleet::render::table(&doc));
        }
        docs.push(doc);
    }
    if a.json {
        match plan_file {
            Some(plan) => println!(
                "{}",
                serde_json::to_string_pretty(&netrig_fleet::matrix::MeshPlanDocument {
                    netrig_version: netrig_proto::SOFTWARE_VERSION.into(),
                    plan,
                    meshes: docs.clone(),
                })?
            ),
            None => {
                for d in &docs {
                    println!("{}", serde_json::to_string_pretty(d)?);
                }
            }
        }
    } else if a.csv {
        print!("{}", netrig_fleet::render::csv_of(&docs));
    }
    if let Some(path) = &a.html {
        let page = match (&a.plan, docs.as_slice()) {
            (None, [doc]) => netrig_fleet::render::html(doc),
            _ => netrig_fleet::render::html_of(plan_name.as_deref(), &docs),
        };
        crate::report::write_report(path, &page)?;
    }
    let ran: usize = docs.iter().map(|d| d.cells.len()).sum();
    let failed = docs
        .iter()
        .flat_map(|d| &d.cells)
        .filter(|c| c.error.is_some())
        .count();
    if failed > 0 {
        bail!("{failed} of {ran} tests failed (their reasons are in the output)");
    }
    Ok(())
}
