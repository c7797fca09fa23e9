//! [`AgentProbe`]: what a hostile case must leave behind in a `netrig serve`
//! (issue #11, "Tests"): the process alive and without a panic, its file
//! descriptors and threads back to what they were, its memory near it, the
//! listener accepting, and an honest client served right after.
//!
//! Everything is polled up to a deadline, never read at one instant: the
//! agent closes what a case opened on its own clock (a greeting timeout, a
//! session thread that notices a closed connection), and this machine is
//! shared with other builds and tests.

use crate::helpers::{run_json, u, Raw, Served, Waited};
use netrig_proto::AgentMsg;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the agent process holds, from /proc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Entries of /proc/PID/fd.
    pub fds: usize,
    /// `Threads:` of /proc/PID/status.
    pub threads: usize,
    /// `VmRSS:` of /proc/PID/status, in KiB.
    pub rss_kib: u64,
}

impl Usage {
    /// `None` once the process is gone or a zombie.
    pub fn of(pid: u32) -> Option<Usage> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| -> Option<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        let state = status.lines().find_map(|l| l.strip_prefix("State:"))?;
        if state.trim_start().starts_with('Z') || state.trim_start().starts_with('X') {
            return None;
        }
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
        Some(Usage {
            fds,
            threads: field("Threads:")? as usize,
            rss_kib: field("VmRSS:")?,
        })
    }

    fn same_holdings(&self, other: &Usage) -> bool {
        self.fds == other.fds && self.threads == other.threads
    }
}

/// How long the agent took to give back what a case had made it hold, and
/// what it held at most while the probe watched.
#[derive(Debug, Clone, Copy)]
pub struct Recovery {
    /// From the call of [`AgentProbe::check`] until fds and threads were
    /// back at the baseline.
    pub settled_after: Duration,
    pub usage: Usage,
}

/// Memory the agent may keep beyond its baseline after a case. Generous on
/// purpose: glibc's malloc keeps freed memory in per-thread arenas (up to
/// 8 per CPU, each a 64 MiB reservation of which the touched pages count in
/// RSS), so a test run on several worker threads leaves RSS higher without
/// any leak (the issue measured about 160 MB after large tests). A leak at
/// the scale of a case (a buffer per connection of thousands, a test's
/// buffers per session) still shows; smaller leaks show as descriptors or
/// threads, which must come back exactly.
pub const RSS_MARGIN_KIB: u64 = 64 << 10;
/// How long the agent has, by default, to give everything back: its own
/// bounds on cleaning up are immediate or a few seconds (a greeting timeout
/// is 5 s); the rest is for a machine busy with other work.
pub const SETTLE: Duration = Duration::from_secs(15);

/// Watches one `netrig serve` (see the module's documentation).
pub struct AgentProbe {
    pid: u32,
    port: u16,
    log: Arc<Mutex<String>>,
    /// The honest client's options beyond where the agent is (a key, say).
    honest: Vec<String>,
    pub baseline: Usage,
}

impl AgentProbe {
    /// Takes the agent's log (its standard error), serves one honest client
    /// so that whatever the first test sets up for good is in the baseline,
    /// then records the baseline once descriptors and threads hold still.
    pub fn attach(agent: &mut Served) -> AgentProbe {
        AgentProbe::attach_with(agent, &[])
    }

    /// [`AgentProbe::attach`] for an agent whose honest clients need
    /// options (`--key FILE` for one with `--authorized-keys`).
    pub fn attach_with(agent: &mut Served, honest: &[&str]) -> AgentProbe {
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(mut err) = agent.child.stderr.take() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    log.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let mut probe = AgentProbe {
            pid: agent.child.id(),
            port: agent.port,
            log,
            honest: honest.iter().map(|s| s.to_string()).collect(),
            baseline: Usage {
                fds: 0,
                threads: 0,
                rss_kib: 0,
            },
        };
        probe.honest_client();
        probe.baseline = probe.steady();
        eprintln!("agent {}: baseline {:?}", probe.pid, probe.baseline);
        probe
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What the agent holds now; panics if it is gone.
    pub fn usage(&self) -> Usage {
        Usage::of(self.pid).unwrap_or_else(|| self.fail("the agent is gone"))
    }

    /// The agent's log so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The agent's log once it holds every one of `needles` (or after 5 s:
    /// the agent writes a line after it acts, so a test must not race it).
    pub fn log_with(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log();
            if needles.iter().all(|n| log.contains(n)) || Instant::now() >= deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until two readings 200 ms apart agree (at most 10 s).
    fn steady(&self) -> Usage {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = self.usage();
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = self.usage();
            if now.same_holdings(&last) || Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    }

    /// Alive, and no thread of it panicked.
    pub fn assert_alive(&self, case: &str) {
        if Usage::of(self.pid).is_none() {
            self.fail(&format!("{case}: the agent exited"));
        }
        if self.log().contains("panicked") {
            self.fail(&format!("{case}: a thread of the agent panicked"));
        }
    }

    /// Polls until descriptors and threads are back at the baseline and
    /// memory within [`RSS_MARGIN_KIB`] of it, at most `within`.
    pub fn settles(&self, case: &str, within: Duration) -> Recovery {
        let t0 = Instant::now();
        loop {
            self.assert_alive(case);
            let now = self.usage();
            let rss_ok = now.rss_kib <= self.baseline.rss_kib + RSS_MARGIN_KIB;
            if now.same_holdings(&self.baseline) && rss_ok {
                return Recovery {
                    settled_after: t0.elapsed(),
                    usage: now,
                };
            }
            if t0.elapsed() > within {
                let fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", self.pid))
                    .map(|d| {
                        d.flatten()
                            .filter_map(|e| std::fs::read_link(e.path()).ok())
                            .map(|p| p.display().to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                self.fail(&format!(
                    "{case}: not back to the baseline {:?} within {within:?}: {now:?} (RSS margin {} KiB); \
                     descriptors: {fds:?}",
                    self.baseline, RSS_MARGIN_KIB
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The listener accepts and a session answers: a welcome (or a busy,
    /// which is an answer too) within 5 s.
    pub fn accepts(&self, case: &str) {
        let mut r = Raw::greet("127.0.0.1", self.port);
        match r.wait(Duration::from_secs(5)) {
            Waited::Msg(AgentMsg::Welcome { .. } | AgentMsg::Busy { .. }) => {}
            other => self.fail(&format!("{case}: the agent answered a greeting with {other:?}")),
        }
    }

    /// An honest `tcp-stream -l 0.3` is served.
    pub fn honest_client(&self) {
        let p = self.port.to_string();
        let mut args = vec!["tcp-stream", "-H", "127.0.0.1", "-p", &p, "-l", "0.3"];
        args.extend(self.honest.iter().map(String::as_str));
        let v = run_json(&args);
        assert!(u(&v, "/summary/bytes") > 0, "an honest client moved no bytes");
    }

    /// Everything a hostile case must leave, with [`SETTLE`] to get there.
    pub fn check(&self, case: &str) -> Recovery {
        self.check_within(case, SETTLE)
    }

    /// [`AgentProbe::check`] with a deadline of its own. Prints what it
    /// measured (for the record in docs/HOSTILE.md).
    pub fn check_within(&self, case: &str, within: Duration) -> Recovery {
        let r = self.settles(case, within);
        self.accepts(case);
        self.honest_client();
        // The honest client must leave nothing behind either.
        let after = self.settles(&format!("{case}, then an honest client"), within);
        self.assert_alive(case);
        eprintln!(
            "{case}: agent back to baseline after {:?} ({:?}); after an honest client {:?}",
            r.settled_after, r.usage, after.usage
        );
        r
    }

    fn fail(&self, what: &str) -> ! {
        let log = self.log();
        let tail: String = {
            let lines: Vec<&str> = log.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        panic!("{what}\nthe agent's log, last lines:\n{tail}");
    }
}
