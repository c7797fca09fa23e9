//! netrig: options → test run → export. The crates do the work; this file
//! only wires them (see docs/ARCHITECTURE.md).

mod agent;
mod argv;
mod cli;
mod deploy;
mod experiment;
mod http;
mod lab;
mod lab_overload;
mod mesh;
mod one_test;
mod plot;
mod progress;
mod push;
mod quick;
mod report;
mod values;

use clap::FromArgMatches;
use cli::{Cli, Command, QuickArgs};
use netrig_agent::AgentError;
use netrig_client::ClientError;
use netrig_experiment::sweep::Sweep;
use netrig_kinds::Kind;
use netrig_run::{Cancel, RunError};
use std::process::ExitCode;
use std::sync::OnceLock;

/// An error in what the user asked for (exit status 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Cancels the run in progress on Ctrl-C.
static CANCEL: OnceLock<Cancel> = OnceLock::new();

/// An experiment is running: Ctrl-C stops it between runs too.
pub(crate) static EXPERIMENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn cancel() -> &'static Cancel {
    CANCEL.get_or_init(Cancel::new)
}

/// Thousands of flows need thousands of descriptors: raise the soft limit
/// to the hard one, as neper does.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: valid pointer to an initialised struct.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
}

/// What the command line asks for: one of netrig's own commands, or a test
/// of a kind with its subcommand's matches, its own options as given and
/// the options it sweeps.
enum Job {
    Own(Command),
    Test(&'static dyn Kind, clap::ArgMatches, Vec<String>, Vec<Sweep>),
}

fn main() -> ExitCode {
    let (argv, sweeps) = argv::split_sweeps(std::env::args().collect());
    let matches = match cli::command().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => {
            if let Some(hint) = argv::habit_hint(&argv, &e) {
                eprintln!("error: {hint}");
                std::process::exit(2);
            }
            e.exit()
        }
    };
    let job = match matches.subcommand() {
        Some((name, sub)) if netrig_kinds::by_name(name).is_some() => Job::Test(
            netrig_kinds::by_name(name).expect("checked"),
            sub.clone(),
            cli::kind_args(&argv[2..]),
            sweeps,
        ),
        _ => match Cli::from_arg_matches(&matches) {
            Ok(cli) => Job::Own(cli.command.unwrap_or(Command::Quick(QuickArgs {
                length: 2.0,
                ipv6: false,
                json: false,
                html: None,
            }))),
            Err(e) => e.exit(),
        },
    };
    raise_fd_limit();
    let default_level = match &job {
        Job::Own(Command::Serve(a)) if a.quiet => "warn",
        Job::Own(Command::Serve(_)) | Job::Own(Command::HttpServe(_)) => "info",
        _ => "warn",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        // The PNG renderer's notes on SVG details are not the user's concern.
        .filter_module("usvg", log::LevelFilter::Error)
        .filter_module("resvg", log::LevelFilter::Error)
        .format_target(false)
        .init();
    let _ = ctrlc::set_handler(|| {
        // A lab being built or held is torn down by its own thread.
        if lab::RUNNING.load(std::sync::atomic::Ordering::SeqCst) {
            netrig_lab::interrupt();
            return;
        }
        // An experiment stops after the arm in hand is torn down.
        if cancel().is_running() || EXPERIMENT.load(std::sync::atomic::Ordering::Relaxed) {
            cancel().cancel("interrupted (Ctrl-C)");
        } else {
            std::process::exit(130);
        }
    });
    let done = match job {
        Job::Own(Command::Quick(a)) => quick::quick(a),
        Job::Own(Command::Serve(a)) => agent::serve(a),
        Job::Own(Command::HttpServe(a)) => http::serve(a),
        Job::Own(Command::Run(a)) => {
            EXPERIMENT.store(true, std::sync::atomic::Ordering::Relaxed);
            experiment::run_file(&a, cancel())
        }
        Job::Own(Command::Results(a)) => experiment::results(&a),
        Job::Own(Command::Compare(a)) => experiment::compare(&a),
        Job::Own(Command::Report(a)) => report::report(&a),
        Job::Own(Command::Plot(a)) => plot::plot(&a),
        Job::Own(Command::Completions(a)) => deploy::completions(&a),
        Job::Own(Command::Man(a)) => deploy::man(&a),
        Job::Own(Command::Keygen(a)) => agent::keygen(&a),
        Job::Own(Command::Mesh(a)) => mesh::mesh(a),
        Job::Own(Command::ClientShare) => one_test::client_share(),
        Job::Own(Command::Lab(a)) => lab::lab(a),
        Job::Test(kind, m, args, sweeps) => one_test::test(kind, &m, args, sweeps),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        // A lab's command ran and said its status (lab exec), or Ctrl-C ended a held lab.
        Err(e) if e.downcast_ref::<lab::Exit>().is_some() => {
            ExitCode::from(e.downcast_ref::<lab::Exit>().expect("checked").0)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_status(&e))
        }
    }
}

fn exit_status(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<experiment::Regressed>().is_some() {
        return experiment::REGRESSED;
    }
    if e.downcast_ref::<experiment::Interrupted>().is_some() {
        return experiment::INTERRUPTED;
    }
    if e.downcast_ref::<Usage>().is_some() || e.downcast_ref::<AgentError>().is_some() {
        return 2;
    }
    match (e.downcast_ref::<ClientError>(), e.downcast_ref::<RunError>()) {
        (Some(c), _) if c.is_setup() => 2,
        (_, Some(r)) if r.is_setup() => 2,
        _ => 1,
    }
}
