//! An arm's set-up and tear-down commands, run on this host with `sh -c`
//! (they are the plan's author's own, on the author's own machine: netrig
//! never runs a command a peer names; the agent's side is its hooks).
//! Every command has a time limit, after which its process group is killed,
//! and its output is kept up to a bound.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Output kept of one command (the end of it, where errors are).
pub const OUTPUT_KEPT: usize = 16 * 1024;

pub use netrig_document::experiment::command::CommandRun;

/// Keeps the last `OUTPUT_KEPT` bytes of a stream.
fn drain(mut r: impl Read) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * OUTPUT_KEPT {
            kept.drain(..kept.len() - OUTPUT_KEPT);
        }
    }
    if kept.len() > OUTPUT_KEPT {
        kept.drain(..kept.len() - OUTPUT_KEPT);
    }
    kept
}

/// Runs `command` with `sh -c` for `arm`'s `phase`, for at most `limit`.
pub fn run(phase: &str, arm: &str, command: &str, limit: Duration) -> CommandRun {
    run_with(phase, arm, command, limit, &[])
}

/// [`run`] with these variables in its environment besides NETRIG_ARM and
/// NETRIG_PHASE (the runner's NETRIG_AGENT_HOST and NETRIG_AGENT_PORT).
pub fn run_with(
    phase: &str,
    arm: &str,
    command: &str,
    limit: Duration,
    env: &[(&str, String)],
) -> CommandRun {
    run_in(phase, arm, command, limit, env, None)
}

/// [`run_with`] inside a lab host's namespace (`ip netns exec NS sh -c ...`): `in_ns` is the
/// host's name and its namespace.
pub fn run_in(
    phase: &str,
    arm: &str,
    command: &str,
    limit: Duration,
    env: &[(&str, String)],
    in_ns: Option<(&str, &str)>,
) -> CommandRun {
    let t0 = Instant::now();
    let mut done = CommandRun {
        phase: phase.into(),
        arm: arm.into(),
        command: command.into(),
        status: None,
        seconds: 0.0,
        output: String::new(),
        error: None,
        host: in_ns.map(|(h, _)| h.to_string()),
    };
    let mut cmd = match in_ns {
        Some((_, ns)) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "sh"]);
            c
        }
        None => Command::new("sh"),
    };
    let child = cmd
        .arg("-c")
        .arg(command)
        .env("NETRIG_ARM", arm)
        .env("NETRIG_PHASE", phase)
        // This netrig binary, for commands that run one of its tools (`"$NETRIG" lab ct-fill`).
        .env(
            "NETRIG",
            std::env::current_exe().unwrap_or_else(|_| "netrig".into()),
        )
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a time limit kills what it started too.
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            done.error = Some(format!("cannot start sh: {e}"));
            return done;
        }
    };
    let out = child.stdout.take().map(|o| std::thread::spawn(move || drain(o)));
    let err = child.stderr.take().map(|e| std::thread::spawn(move || drain(e)));
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t0.elapsed() >= limit => {
                // SAFETY: signalling the process group this child leads.
                unsafe { libc::killpg(child.id() as libc::pid_t, libc::SIGKILL) };
                let _ = child.wait();
                done.error = Some(format!(
                    "did not finish within {} s (killed)",
                    limit.as_secs_f64()
                ));
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                done.error = Some(format!("waiting for it: {e}"));
                break None;
            }
        }
    };
    done.status = status.and_then(|s| s.code());
    let mut output = out.and_then(|t| t.join().ok()).unwrap_or_default();
    output.extend(err.and_then(|t| t.join().ok()).unwrap_or_default());
    if output.len() > OUTPUT_KEPT {
        output.drain(..output.len() - OUTPUT_KEPT);
    }
    done.output = String::from_utf8_lossy(&output).into_owned();
    done.seconds = t0.elapsed().as_secs_f64();
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_runs_with_its_output_kept_and_its_status() {
        let r = run(
            "setup",
            "a",
            "echo hello; echo oops >&2; exit 3",
            Duration::from_secs(10),
        );
        assert_eq!(r.status, Some(3));
        assert!(r.output.contains("hello") && r.output.contains("oops"), "{r:?}");
        assert!(!r.ok());
        assert!(r.failure().contains("exit status 3"), "{}", r.failure());
        let ok = run(
            "teardown",
            "a",
            "test \"$NETRIG_ARM/$NETRIG_PHASE\" = a/teardown",
            Duration::from_secs(10),
        );
        assert!(ok.ok(), "{ok:?}");
    }

    #[test]
    fn a_command_past_its_limit_is_killed_with_what_it_started() {
        let t0 = Instant::now();
        let r = run("setup", "a", "sleep 30 & sleep 30", Duration::from_millis(300));
        assert!(t0.elapsed() < Duration::from_secs(10), "not killed");
        assert_eq!(r.status, None);
        assert!(
            r.failure().contains("did not finish within 0.3 s"),
            "{}",
            r.failure()
        );
    }

    #[test]
    fn output_is_bounded() {
        let r = run(
            "setup",
            "a",
            "head -c 1000000 /dev/zero | tr '\\0' x",
            Duration::from_secs(10),
        );
        assert!(r.ok());
        assert_eq!(r.output.len(), OUTPUT_KEPT);
    }
}
