//! Hooks on the agent's host (`netrig serve --hooks DIR`, `--remote-setup`,
//! `--remote-teardown`): they run in order around the test, only by a name
//! the agent offers, never a path; a failing set-up refuses the test with
//! what it said; a hanging one is killed; an agent without hooks runs none.

use crate::helpers::*;
use netrig_proto::{AgentMsg, ClientMsg, TestSpec};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A directory of hooks and, beside it (not in it), the log they append to;
/// removed on drop.
struct HookDir {
    base: PathBuf,
}

impl HookDir {
    fn new(tag: &str) -> HookDir {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("netrig-it-hooks-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("hooks")).unwrap();
        for d in [&base, &base.join("hooks")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        HookDir { base }
    }

    fn dir(&self) -> String {
        self.base.join("hooks").display().to_string()
    }

    fn log_path(&self) -> PathBuf {
        self.base.join("calls.log")
    }

    /// A hook that appends one line to the log (its phase, what the agent
    /// told it, its arguments and working directory, the time in ns), then
    /// runs `then`.
    fn hook(&self, name: &str, then: &str) {
        let body = format!(
            "#!/bin/sh\n\
             echo \"$NETRIG_HOOK_PHASE hook=$NETRIG_HOOK kind=$NETRIG_TEST_KIND peer=$NETRIG_PEER \
             port=$NETRIG_AGENT_PORT outcome=${{NETRIG_TEST_OUTCOME:-none}} args=$# home=${{HOME:-none}} \
             pwd=$PWD t=$(date +%s%N)\" >> {log}\n\
             {then}\n",
            log = self.log_path().display()
        );
        let p = self.base.join("hooks").join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The log's lines.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn serve(&self, extra: &[&str]) -> Served {
        let dir = self.dir();
        let mut args = vec!["--hooks", dir.as_str()];
        args.extend_from_slice(extra);
        Served::start(&args)
    }
}

impl Drop for HookDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// The value of `key=` in a log line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let k = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(k.as_str()))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

fn maerts(port: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["tcp-maerts", "-H", "127.0.0.1", "-p", port, "-l", "0.5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn args(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

/// A one-flow tcp-stream spec with these hooks, as it goes on the wire.
fn spec_with(hooks: serde_json::Value) -> TestSpec {
    serde_json::from_value(serde_json::json!({
        "test": {"kind": "tcp-stream", "message_size": 1024, "recv_size": 1024},
        "limit": {"duration": {"seconds": 0.3}}, "flows": 1, "remote_hooks": hooks}))
    .unwrap()
}

/// Set-up before the test, tear-down after it, each with the agent's own
/// environment only (no arguments, HOME unset, the hooks' directory as its
/// working directory), for each test in turn.
#[test]
fn hooks_run_before_and_after_the_test_in_order() {
    let h = HookDir::new("order");
    h.hook("arm", "exit 0");
    h.hook("disarm", "exit 0");
    let agent = h.serve(&[]);
    let p = agent.port_arg();
    for _ in 0..2 {
        let a = maerts(&p, &["--remote-setup", "arm", "--remote-teardown", "disarm"]);
        let v = run_json(&args(&a));
        assert!(u(&v, "/summary/bytes") > 0);
        assert!(warnings_about(&v, "hook").is_empty(), "{:?}", v["warnings"]);
    }
    let calls = h.calls();
    assert_eq!(calls.len(), 4, "{calls:#?}");
    for pair in calls.chunks(2) {
        let (setup, teardown) = (&pair[0], &pair[1]);
        assert!(setup.starts_with("setup hook=arm "), "{setup}");
        assert!(teardown.starts_with("teardown hook=disarm "), "{teardown}");
        for line in pair {
            assert_eq!(field(line, "kind"), "tcp-maerts");
            assert_eq!(field(line, "peer"), "127.0.0.1");
            assert_eq!(field(line, "port"), p);
            assert_eq!(field(line, "args"), "0");
            assert_eq!(field(line, "home"), "none", "nothing of the agent's environment");
            assert_eq!(
                std::fs::canonicalize(field(line, "pwd")).unwrap(),
                std::fs::canonicalize(h.dir()).unwrap()
            );
        }
        assert_eq!(field(setup, "outcome"), "none");
        assert_eq!(field(teardown, "outcome"), "completed");
        // The 0.5-second test ran between them.
        let t = |l: &str| field(l, "t").parse::<u64>().unwrap();
        let between = t(teardown) - t(setup);
        assert!(
            between >= 500_000_000,
            "{between} ns between set-up and tear-down"
        );
    }
}

/// A name the agent does not offer is refused by the client, naming what the
/// agent offers, and by the agent itself when a client sends it anyway; in
/// neither case does any hook run, not even the valid one beside it.
#[test]
fn a_hook_not_offered_is_refused_and_nothing_runs() {
    let h = HookDir::new("offer");
    h.hook("arm", "exit 0");
    h.hook("disarm", "exit 0");
    let agent = h.serve(&[]);
    let p = agent.port_arg();
    let a = maerts(&p, &["--remote-setup", "arm", "--remote-teardown", "nft-flush"]);
    let o = run(&args(&a));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!(
        "--remote-teardown nft-flush: the agent at 127.0.0.1:{p} offers no hook of that name; it offers arm, disarm"
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    let mut raw = Raw::open(agent.port);
    raw.send(&ClientMsg::TestRequest {
        spec: spec_with(serde_json::json!({"setup": "arm", "teardown": "nft-flush"})),
        auth: None,
    });
    match raw.next() {
        AgentMsg::TestRejected { reason } => assert_eq!(
            reason,
            "--remote-teardown nft-flush: the agent offers no hook of that name; it offers arm, disarm"
        ),
        m => panic!("{m:?}"),
    }
    // The session is still usable; a hook offered runs.
    raw.send(&ClientMsg::TestRequest {
        spec: spec_with(serde_json::json!({"setup": "arm"})),
        auth: None,
    });
    assert!(matches!(raw.next(), AgentMsg::TestAccepted { .. }));
    // The set-up ran before the test was accepted.
    let calls = h.calls();
    assert_eq!(calls.len(), 1, "only the last request's set-up ran: {calls:#?}");
    assert!(calls[0].starts_with("setup hook=arm "), "{calls:#?}");
}

/// A path or a command is no hook's name: refused before anything is
/// connected to, and by the agent should a client send it.
#[test]
fn a_path_like_hook_name_is_refused_by_validate() {
    let h = HookDir::new("path");
    h.hook("x", "exit 0");
    let agent = h.serve(&[]);
    let p = agent.port_arg();
    for (option, name) in [
        ("--remote-setup", "../x"),
        ("--remote-teardown", "/bin/sh"),
        ("--remote-setup", "x; reboot"),
    ] {
        let a = maerts(&p, &[option, name]);
        let o = run(&args(&a));
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(&format!("{option} {name:?}: a hook is named by")) && !e.contains("the agent at"),
            "{e}"
        );
    }
    let mut raw = Raw::open(agent.port);
    for hooks in [
        serde_json::json!({"setup": "../hooks/x"}),
        serde_json::json!({"teardown": "/bin/sh"}),
    ] {
        raw.send(&ClientMsg::TestRequest {
            spec: spec_with(hooks.clone()),
            auth: None,
        });
        match raw.next() {
            AgentMsg::TestRejected { reason } => {
                assert!(reason.contains("never a path or a command"), "{hooks}: {reason}")
            }
            m => panic!("{m:?}"),
        }
    }
    // Neither are arguments: the spec has no room for them.
    let v = serde_json::json!({"type": "test_request", "spec": {
        "test": {"kind": "tcp-stream"}, "limit": {"duration": {"seconds": 0.3}}, "flows": 1,
        "remote_hooks": {"setup": "x", "args": ["-rf", "/"]}}});
    let body = serde_json::to_vec(&v).unwrap();
    raw.s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    raw.s.write_all(&body).unwrap();
    match raw.next() {
        AgentMsg::Error { message } => assert!(message.contains("unknown field `args`"), "{message}"),
        m => panic!("{m:?}"),
    }
    assert!(h.calls().is_empty(), "{:#?}", h.calls());
}

/// A set-up that fails refuses the test with its exit status and the end of
/// what it wrote (stdout and stderr); the tear-down runs all the same.
#[test]
fn a_failing_setup_rejects_the_test_with_its_output_and_runs_the_teardown() {
    let h = HookDir::new("fail");
    h.hook(
        "nft-stateless",
        "echo 'loading ruleset'; echo 'Error: Could not process rule: No such file or directory' >&2; exit 3",
    );
    h.hook("nft-flush", "exit 0");
    let agent = h.serve(&[]);
    let p = agent.port_arg();
    let a = maerts(
        &p,
        &[
            "--remote-setup",
            "nft-stateless",
            "--remote-teardown",
            "nft-flush",
        ],
    );
    let o = run(&args(&a));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "the agent at 127.0.0.1:{p} refused the test: --remote-setup nft-stateless: the agent's set-up hook \
             nft-stateless exited with status 3"
        )),
        "{e}"
    );
    assert!(
        e.contains("loading ruleset\nError: Could not process rule: No such file or directory"),
        "{e}"
    );
    assert!(e.contains("(the tear-down hook nft-flush ran after it)"), "{e}");
    let calls = h.calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls[0].starts_with("setup hook=nft-stateless "), "{calls:#?}");
    assert!(calls[1].starts_with("teardown hook=nft-flush "), "{calls:#?}");
    assert_eq!(field(&calls[1], "outcome"), "not-run");
    // The agent serves on.
    let v = run_json(&args(&maerts(&p, &[])));
    assert!(u(&v, "/summary/bytes") > 0);
}

/// A tear-down that fails is a warning of the result; one after a test the
/// client aborted runs all the same, told the test failed.
#[test]
fn a_failing_teardown_is_a_warning_and_an_aborted_test_is_torn_down() {
    let h = HookDir::new("teardown");
    h.hook("flush", "echo 'table busy' >&2; exit 1");
    h.hook("ok", "exit 0");
    let agent = h.serve(&[]);
    let p = agent.port_arg();
    let v = run_json(&args(&maerts(&p, &["--remote-teardown", "flush"])));
    let w = warnings_about(&v, "tear-down hook");
    assert_eq!(w.len(), 1, "{:?}", v["warnings"]);
    assert!(
        w[0].starts_with("remote: the tear-down hook flush (--remote-teardown) exited with status 1")
            && w[0].ends_with("its output ends: table busy"),
        "{w:?}"
    );
    let mut raw = Raw::open(agent.port);
    raw.send(&ClientMsg::TestRequest {
        spec: spec_with(serde_json::json!({"teardown": "ok"})),
        auth: None,
    });
    assert!(matches!(raw.next(), AgentMsg::TestAccepted { .. }));
    raw.send(&ClientMsg::Abort {
        reason: "interrupted".into(),
    });
    match raw.next() {
        AgentMsg::Error { message } => assert!(message.contains("aborted"), "{message}"),
        m => panic!("{m:?}"),
    }
    let calls = h.calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls[1].starts_with("teardown hook=ok "), "{calls:#?}");
    assert_eq!(field(&calls[1], "outcome"), "failed");
}

/// A set-up hook that hangs is killed at the agent's --hook-timeout with what
/// it started (its process group), the test refused saying so.
#[test]
fn a_hanging_hook_is_killed_at_the_timeout() {
    let h = HookDir::new("hang");
    let marker = h.base.join("survivor");
    h.hook(
        "hang",
        &format!("echo waiting; (sleep 3; touch {}) & sleep 60", marker.display()),
    );
    h.hook("ok", "exit 0");
    let agent = h.serve(&["--hook-timeout", "1"]);
    let p = agent.port_arg();
    let t0 = Instant::now();
    let o = run(&args(&maerts(
        &p,
        &["--remote-setup", "hang", "--remote-teardown", "ok"],
    )));
    let took = t0.elapsed();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(
            "set-up hook hang ran over its time limit of 1 s (the agent's --hook-timeout) and was killed"
        ),
        "{e}"
    );
    assert!(e.contains("its output:\nwaiting"), "{e}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(h.calls().len(), 2, "{:#?}", h.calls());
    std::thread::sleep(Duration::from_millis(3500).saturating_sub(t0.elapsed()));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "a process the hook started outlived the kill");
}

/// An agent started without --hooks offers none, runs none, and says how to
/// offer some: to netrig's client before it asks, and to any client that asks.
#[test]
fn an_agent_without_hooks_refuses_them() {
    let agent = Served::start(&[]);
    let p = agent.port_arg();
    let o = run(&args(&maerts(&p, &["--remote-teardown", "x"])));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!(
        "--remote-teardown x: the agent at 127.0.0.1:{p} offers no hooks (start it with --hooks DIR)"
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    let mut raw = Raw::open(agent.port);
    raw.send(&ClientMsg::TestRequest {
        spec: spec_with(serde_json::json!({"setup": "x"})),
        auth: None,
    });
    match raw.next() {
        AgentMsg::TestRejected { reason } => assert_eq!(
            reason,
            "--remote-setup x: the agent offers no hooks (start it with --hooks DIR)"
        ),
        m => panic!("{m:?}"),
    }
    // The embedded agent has none either.
    let o = run(&["tcp-stream", "-l", "0.3", "--remote-setup", "x"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("offers no hooks"), "{}", stderr(&o));
}

/// `--hooks` must name a directory with hooks in it, only its owner may
/// write to, or the agent does not start.
#[test]
fn serve_refuses_a_hooks_directory_it_cannot_trust() {
    let h = HookDir::new("serve");
    let o = run(&["serve", "-p", "0", "--hooks", &h.dir()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds no hook"), "{}", stderr(&o));
    h.hook("x", "exit 0");
    std::fs::set_permissions(h.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = run(&["serve", "-p", "0", "--hooks", &h.dir()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("anyone may write to it"), "{}", stderr(&o));
}
