//! `netrig quick` (the default): a short loopback suite against an agent in this process.

use crate::cancel;
use crate::cli::QuickArgs;
use crate::report::{command_line, write_report};
use anyhow::{Context, Result};
use netrig_export::json::to_json;
use netrig_report::{table, TestResult};
use netrig_run::{LocalOptions, Session, Target};

#[derive(serde::Serialize)]
struct Suite<'a> {
    suite: &'static str,
    results: &'a [TestResult],
}

pub fn quick(a: QuickArgs) -> Result<()> {
    let local = LocalOptions {
        // The suite's udp-stream uses the default size of `udp-stream` alone.
        udp_size_default: true,
        ..LocalOptions::default()
    };
    let mut session = Session::open(&Target::embedded(a.ipv6), local)?;
    if !a.json {
        println!(
            "netrig quick: loopback suite against an in-process agent at {}, {} s per test\n",
            session.agent_address(),
            a.length
        );
    }
    let mut results = Vec::new();
    for spec in netrig_run::suite::quick(a.length) {
        results.push(
            session
                .run(&spec, cancel(), &mut |_| {})
                .with_context(|| format!("{} failed", spec.kind()))?,
        );
    }
    session.close();
    if let Some(path) = &a.html {
        let rows: Vec<(TestResult, String)> = results
            .iter()
            .map(|r| {
                let t = netrig_kinds::by_name(&r.test).map_or_else(String::new, |k| k.table().render(r));
                (r.clone(), t)
            })
            .collect();
        write_report(
            path,
            &netrig_export::html::suite_report("quick", &rows, &command_line()),
        )?;
    }
    if a.json {
        println!(
            "{}",
            to_json(&Suite {
                suite: "quick",
                results: &results
            })
        );
    } else {
        print!("{}", table::render_suite(&results));
        println!(
            "\nKey: tx = this client to the agent, rx = the agent to this client (here both on this host, over\n\
             loopback). 10^6bits/s: payload megabits per second over the measured window. Trans/s: request/\n\
             response transactions per second; p99 us: their 99th-percentile latency in microseconds. loss %:\n\
             datagrams lost. CPU %: this host's CPUs busy over the window (100 = all). The second tcp-stream is\n\
             four flows; tcp-crr opens a connection per transaction; udp-stream offers 1 Gbit/s (-b 1G) of\n\
             path-sized datagrams; udp-rr sends 28-byte requests and responses; the others go as fast as they can."
        );
        for r in &results {
            for w in &r.warnings {
                eprintln!("warning: {}: {w}", r.test);
            }
        }
        println!(
            "\nNext: `netrig serve` on another host, then `netrig tcp-stream -H HOST` here (see --help)."
        );
    }
    Ok(())
}
