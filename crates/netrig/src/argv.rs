//! The command line before clap reads it: a test's sweeps taken out (`-m 32,64` is a sweep, not a
//! value), and hints for habits from other tools that clap would only call unexpected.

use netrig_experiment::sweep::{self, Sweep};

/// A test's arguments with their sweeps taken out (`-m 32,64` is a sweep,
/// not a value the option's parser could read).
pub fn split_sweeps(argv: Vec<String>) -> (Vec<String>, Vec<Sweep>) {
    if argv.len() < 2 || netrig_kinds::by_name(&argv[1]).is_none() {
        return (argv, Vec::new());
    }
    match sweep::split_args(&argv[2..], sweep::SWEEPABLE) {
        Ok((rest, sweeps)) => (argv[..2].iter().cloned().chain(rest).collect(), sweeps),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

/// A hint for habits from other tools that clap would only call unexpected:
/// iperf3's `-c HOST` and `-s`, netperf's `-H` without a test, a bare host
/// after a test's name.
pub fn habit_hint(argv: &[String], e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let first = argv.get(1).map(String::as_str);
    match first {
        Some("-c") | Some("--client") => {
            let host = argv.get(2).map_or("HOST", String::as_str);
            return Some(format!(
                "netrig has no -c: name the test, then the agent's host with -H (iperf3's -c): `netrig tcp-stream -H {host}`"
            ));
        }
        Some("-s") | Some("--server") | Some("-D") => {
            return Some(
                "netrig has no -s: run the agent with `netrig serve` (iperf3's -s, netperf's netserver)"
                    .into(),
            );
        }
        Some("-H") => {
            let host = argv.get(2).map_or("HOST", String::as_str);
            return Some(format!(
                "name the test first: `netrig tcp-stream -H {host}` (see `netrig --help` for the tests)"
            ));
        }
        _ => {}
    }
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let test = first.filter(|t| netrig_kinds::by_name(t).is_some())?;
    // The options of kinds with one end, given to a kind with two: why it needs none.
    let option = arg.split('=').next().unwrap_or(arg);
    match option {
        "--server-agent" => return Some(netrig_run::server_agent_not_needed(test)),
        "--clients" | "--client-addrs" => {
            return Some(format!(
                "{option} is for kinds with one end (a load aimed at any server, as http): {test} runs                  against its agent, which takes more flows as -P N"
            ))
        }
        _ => {}
    }
    (!arg.starts_with('-')).then(|| {
        if arg.contains("://") {
            // wrk's and curl's habit: the URL as an argument.
            format!("unexpected argument {arg:?}: a URL goes after --url: `netrig {test} --url {arg}`")
        } else {
            format!("unexpected argument {arg:?}: the agent's host goes after -H: `netrig {test} -H {arg}`")
        }
    })
}
