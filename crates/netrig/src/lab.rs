//! `netrig lab`: thin glue over netrig_lab (docs/LAB.md).
//!
//! A plan's [lab] section is built by `netrig run` itself (experiment.rs, `build_lab`); `netrig
//! lab up PLAN` builds the same section by hand.

use crate::cli::{LabArgs, LabCommand};
use crate::Usage;
use anyhow::Result;
use netrig_lab::LabError;

/// A lab command is running: Ctrl-C asks it to tear down (see main's handler).
pub static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Exit status of `lab up --foreground` ended by Ctrl-C (as a shell's 128 + SIGINT).
const INTERRUPTED: u8 = 130;

#[derive(Debug)]
pub struct Exit(pub u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}

impl std::error::Error for Exit {}

fn lift(e: LabError) -> anyhow::Error {
    if e.is_usage() {
        Usage(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}

pub fn lab(a: LabArgs) -> Result<()> {
    RUNNING.store(true, std::sync::atomic::Ordering::SeqCst);
    let exe = std::env::current_exe()?;
    match a.command {
        LabCommand::Up(u) => {
            let o = netrig_lab::UpOptions {
                file: u.file,
                name: u.name,
                foreground: u.foreground,
                witness: u.no_witness.then_some(false),
                witness_length: u.witness_length,
                exe,
            };
            let state = match netrig_lab::up(&o, &mut |m| eprintln!("netrig lab: {m}")) {
                Ok(s) => s,
                Err(LabError::Interrupted) => {
                    eprintln!("netrig lab: interrupted while building; what was built is removed");
                    return Err(Exit(INTERRUPTED).into());
                }
                Err(e) => return Err(lift(e)),
            };
            print!("{}", netrig_lab::status_text(std::slice::from_ref(&state)));
            if u.foreground {
                println!(
                    "lab {} is up; Ctrl-C (or netrig lab down {}) removes it",
                    state.name, state.name
                );
                use std::io::Write;
                let _ = std::io::stdout().flush();
                match netrig_lab::build::hold(&state) {
                    Ok(()) => println!("lab {} was removed", state.name),
                    Err(LabError::Interrupted) => {
                        eprintln!("netrig lab: interrupted; lab {} removed", state.name);
                        return Err(Exit(INTERRUPTED).into());
                    }
                    Err(e) => return Err(lift(e)),
                }
            } else {
                println!(
                    "lab {} is up; netrig lab down {} removes it",
                    state.name, state.name
                );
            }
            Ok(())
        }
        LabCommand::Down(d) => {
            let done = if d.stale {
                netrig_lab::down_stale()
            } else {
                netrig_lab::down(if d.all { None } else { d.name.as_deref() })
            }
            .map_err(lift)?;
            if done.is_empty() {
                println!("no lab to remove");
            }
            for l in done {
                println!("removed lab {l}");
            }
            Ok(())
        }
        LabCommand::Status(s) => {
            let labs: Vec<_> = netrig_lab::list()
                .into_iter()
                .map(|mut l| {
                    l.refresh_counters();
                    l
                })
                .filter(|l| s.name.as_deref().is_none_or(|n| l.name == n || l.id == n))
                .collect();
            if let (Some(n), true) = (&s.name, labs.is_empty()) {
                return Err(Usage(format!("no lab named {n:?}")).into());
            }
            if s.json {
                println!("{}", serde_json::to_string_pretty(&labs)?);
            } else {
                print!("{}", netrig_lab::status_text(&labs));
            }
            Ok(())
        }
        LabCommand::Element(e) => {
            let text = std::fs::read(&e.config)?;
            let cfg: netrig_lab::element::Config = serde_json::from_slice(&text).map_err(|err| {
                anyhow::anyhow!("{}: not an element's configuration ({err})", e.config.display())
            })?;
            netrig_lab::element::run_from(&cfg, Some(&e.config))
                .map_err(|err| anyhow::anyhow!("path element of link {}: {err}", cfg.link))
        }
        LabCommand::Set(x) => {
            if x.set.is_empty() && !x.reset {
                return Err(Usage("lab set: nothing to set (key=value ..., or --reset)".into()).into());
            }
            for line in netrig_lab::arm_shape::set_by_hand(&x.name, &x.link, &x.host, &x.set, x.reset)
                .map_err(lift)?
            {
                println!("{line}");
            }
            Ok(())
        }
        LabCommand::Flood(x) => crate::lab_overload::flood(x),
        LabCommand::HalfClose(x) => crate::lab_overload::half_close(x),
        LabCommand::CtFill(f) => {
            netrig_lab::ctfill::in_lab_host().map_err(Usage)?;
            if f.flush {
                let (before, _) = netrig_lab::ctfill::count_and_max()?;
                netrig_lab::ctfill::flush().map_err(|e| anyhow::anyhow!("lab ct-fill --flush: {e}"))?;
                let (after, max) = netrig_lab::ctfill::count_and_max()?;
                println!("conntrack: flushed this host's table: {before} entries before, {after} after (nf_conntrack_max {max})");
                return Ok(());
            }
            let r = netrig_lab::ctfill::fill(f.leave, f.from, f.to, f.timeout)
                .map_err(|e| anyhow::anyhow!("lab ct-fill: {e}"))?;
            println!(
                "conntrack: this host's table holds {} of nf_conntrack_max {} ({} idle established entries inserted, {} there before; {} s to live), {} free",
                r.after,
                r.max,
                r.inserted,
                r.before,
                f.timeout,
                r.max.saturating_sub(r.after)
            );
            if let Some(s) = r.stopped {
                return Err(anyhow::anyhow!(
                    "lab ct-fill: stopped short of leaving {} free: {s}",
                    f.leave
                ));
            }
            Ok(())
        }
        LabCommand::Exec(x) => {
            let code = netrig_lab::exec(&x.name, &x.host, &x.cmd, &exe).map_err(lift)?;
            if code == 0 {
                Ok(())
            } else {
                Err(Exit(code.clamp(1, 255) as u8).into())
            }
        }
    }
}
