//! Hooks: scripts the agent's operator puts in a directory (`netrig serve
//! --hooks DIR`) for tests to run on the agent's host before and after
//! them, by name (docs/SECURITY.md, "Security model of hooks").
//!
//! A client never says what runs: a spec names a hook, and the agent runs
//! the file of that name in its directory, if it found it there when it
//! started. The file gets no arguments, a fixed environment the agent
//! writes ([`HookEnv`]), its directory as working directory and no input;
//! it runs without a shell, in a process group of its own, killed (the whole
//! group) when it overruns the hook timeout. Its output (stdout and stderr
//! as one stream) is kept up to [`OUTPUT_KEPT`] bytes, the last ones.
//!
//! Which files are hooks: regular files directly in the directory, with a
//! hook's name ([`netrig_proto::spec::is_hook_name`]), executable by
//! someone, and not writable by others. Symbolic links are refused, whatever
//! they point to (a link is a second name the operator would have to check
//! the target of; a copy or a hard link does the same and is what it says);
//! so are subdirectories. The directory is read once, at start; each hook
//! is checked again just before it runs, so one made a link or
//! non-executable since is refused, not run.

use netrig_proto::message::{MAX_HOOKS, MAX_HOOK_TIMEOUT_S};
use netrig_proto::spec::is_hook_name;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The most of a hook's output the agent keeps: the last bytes it wrote.
pub const OUTPUT_KEPT: usize = 64 * 1024;
/// The most of a failed set-up hook's output a refusal quotes.
pub const OUTPUT_QUOTED: usize = 2048;
/// The most of a failed tear-down hook's output a warning quotes.
const OUTPUT_WARNED: usize = 512;
/// How long the agent still reads a hook's output once it has ended (a
/// process it left behind may hold its output open).
const OUTPUT_GRACE: Duration = Duration::from_millis(200);
/// The `PATH` a hook gets: the system's directories, nothing of the agent's
/// own environment.
const HOOK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The hooks an agent offers: the directory they are in, their names
/// (sorted) and how long each may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Hooks {
    dir: PathBuf,
    names: Vec<String>,
    timeout: Duration,
}

/// Why `--hooks DIR` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("--hooks {dir}: {error}")]
    Dir { dir: String, error: io::Error },
    #[error("--hooks {dir}: {why}")]
    Unsafe { dir: String, why: String },
    #[error("--hook-timeout {0}: must be 1..={MAX_HOOK_TIMEOUT_S} seconds")]
    Timeout(u64),
}

impl Hooks {
    /// Finds the hooks in `dir` (see the module's doc); each may run for at
    /// most `timeout`. Files that are not hooks are skipped, each with a
    /// warning in the log saying why. A directory others may write to, or
    /// without a single hook, or with more than [`MAX_HOOKS`], is an error:
    /// an operator who asks for hooks and gets none should hear of it at once.
    pub fn discover(dir: &Path, timeout: Duration) -> Result<Hooks, HookError> {
        let shown = dir.display().to_string();
        if timeout.is_zero() || timeout > Duration::from_secs(MAX_HOOK_TIMEOUT_S) {
            return Err(HookError::Timeout(timeout.as_secs()));
        }
        let io_err = |error| HookError::Dir {
            dir: shown.clone(),
            error,
        };
        let unsafe_ = |why: String| HookError::Unsafe {
            dir: shown.clone(),
            why,
        };
        // Absolute, and the same directory whatever the agent's working directory later.
        let dir = dir.canonicalize().map_err(io_err)?;
        let meta = std::fs::metadata(&dir).map_err(io_err)?;
        if !meta.is_dir() {
            return Err(unsafe_("not a directory".into()));
        }
        if meta.permissions().mode() & 0o002 != 0 {
            return Err(unsafe_(
                "anyone may write to it, and so choose what the agent runs: make it writable by its owner only"
                    .into(),
            ));
        }
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io_err)? {
            let entry = entry.map_err(io_err)?;
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| is_hook_name(n)) else {
                log::warn!(
                    "--hooks {shown}: {:?} is not a hook: a hook's name is 1 to 64 letters, digits, '.', '_' and '-', \
                     starting with a letter or a digit",
                    entry.file_name()
                );
                continue;
            };
            // Of the entry itself: a symbolic link is not followed.
            let meta = entry.metadata().map_err(io_err)?;
            if let Err(why) = hook_file(&meta) {
                log::warn!("--hooks {shown}: {name} is not a hook: {why}");
                continue;
            }
            names.push(name.to_string());
        }
        if names.is_empty() {
            return Err(unsafe_(
                "holds no hook (an executable regular file named with letters, digits, '.', '_' and '-')"
                    .into(),
            ));
        }
        if names.len() > MAX_HOOKS {
            return Err(unsafe_(format!(
                "holds {} hooks, more than the {MAX_HOOKS} an agent offers",
                names.len()
            )));
        }
        names.sort();
        Ok(Hooks { dir, names, timeout })
    }

    /// The hooks' names, sorted: what the welcome offers.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The directory, as the agent resolved it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long a hook may run before it is killed.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs hook `name` for `phase` and waits for it, at most the timeout
    /// (then kills its process group). Never fails: what went wrong is in
    /// the run's status.
    pub(crate) fn run(&self, name: &str, phase: Phase, env: &HookEnv) -> HookRun {
        let start = Instant::now();
        let (status, output) = if !self.names.iter().any(|n| n == name) {
            // The session's validation refused it already; never reached.
            (
                Status::NotRun("the agent offers no hook of that name".into()),
                Tail::default(),
            )
        } else {
            let path = self.dir.join(name);
            match std::fs::symlink_metadata(&path)
                .map_err(|e| e.to_string())
                .and_then(|m| hook_file(&m))
            {
                Err(why) => (
                    Status::NotRun(format!(
                        "it is no longer a hook in {} ({why})",
                        self.dir.display()
                    )),
                    Tail::default(),
                ),
                Ok(()) => execute(&path, &self.dir, &env.vars(name, phase), self.timeout),
            }
        };
        HookRun {
            name: name.to_string(),
            phase,
            status,
            output,
            elapsed: start.elapsed(),
        }
    }
}

/// Whether a directory entry's own metadata (not its target's) is a hook's.
fn hook_file(meta: &std::fs::Metadata) -> Result<(), String> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err(
            "a symbolic link (hooks are regular files in the directory itself: copy it there)".into(),
        );
    }
    if !ft.is_file() {
        return Err("not a regular file".into());
    }
    let mode = meta.permissions().mode();
    if mode & 0o111 == 0 {
        return Err("not executable".into());
    }
    if mode & 0o002 != 0 {
        return Err("anyone may write to it".into());
    }
    Ok(())
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Setup,
    Teardown,
}

impl Phase {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Teardown => "teardown",
        }
    }

    /// As messages say it.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Phase::Setup => "set-up",
            Phase::Teardown => "tear-down",
        }
    }
}

/// How the test a tear-down hook follows ended (`NETRIG_TEST_OUTCOME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestOutcome {
    /// The test ran and its results were made.
    Completed,
    /// It failed or was aborted after it was accepted.
    Failed,
    /// It never ran: its set-up hook failed.
    NotRun,
}

/// What a hook learns of the test, all of it the agent's own knowledge: the
/// kind (a name the agent's registry knows), the client's address as the
/// agent's socket sees it, the agent's port.
#[derive(Debug, Clone)]
pub(crate) struct HookEnv {
    pub kind: &'static str,
    pub peer: Option<IpAddr>,
    pub agent_port: u16,
    /// Set for a tear-down hook.
    pub outcome: Option<TestOutcome>,
}

impl HookEnv {
    /// The hook's whole environment.
    fn vars(&self, name: &str, phase: Phase) -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("PATH", HOOK_PATH.to_string()),
            ("NETRIG_HOOK", name.to_string()),
            ("NETRIG_HOOK_PHASE", phase.name().to_string()),
            ("NETRIG_TEST_KIND", self.kind.to_string()),
            ("NETRIG_AGENT_PORT", self.agent_port.to_string()),
        ];
        if let Some(ip) = self.peer {
            v.push(("NETRIG_PEER", ip.to_string()));
        }
        if let Some(o) = self.outcome {
            let o = match o {
                TestOutcome::Completed => "completed",
                TestOutcome::Failed => "failed",
                TestOutcome::NotRun => "not-run",
            };
            v.push(("NETRIG_TEST_OUTCOME", o.to_string()));
        }
        v
    }
}

/// How a hook's run ended.
#[derive(Debug)]
pub(crate) enum Status {
    Exited(ExitStatus),
    /// Overran the timeout; its process group was killed.
    TimedOut(Duration),
    /// Could not be started (or was no longer a hook).
    NotRun(String),
}

/// One run of a hook.
#[derive(Debug)]
pub(crate) struct HookRun {
    pub name: String,
    pub phase: Phase,
    pub status: Status,
    pub output: Tail,
    pub elapsed: Duration,
}

impl HookRun {
    /// Exited with status 0.
    pub(crate) fn ok(&self) -> bool {
        matches!(&self.status, Status::Exited(s) if s.success())
    }

    /// How it ended, after "the set-up hook NAME ": "exited with status 3
    /// after 0.02 s", "was killed after its timeout of 30 s", ...
    pub(crate) fn ended(&self) -> String {
        let after = format!("after {:.2} s", self.elapsed.as_secs_f64());
        match &self.status {
            Status::Exited(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exited with status {c} {after}"),
                (None, Some(sig)) => format!("was killed by signal {sig} {after}"),
                _ => format!("ended ({s}) {after}"),
            },
            Status::TimedOut(t) => format!(
                "ran over its time limit of {} s (the agent's --hook-timeout) and was killed, with its process group",
                t.as_secs()
            ),
            Status::NotRun(why) => format!("could not be run: {why}"),
        }
    }

    /// "its output (the last 2048 bytes of 5000): ..." or "no output".
    pub(crate) fn quoted_output(&self, max: usize) -> String {
        if self.output.total == 0 {
            return "it wrote nothing".into();
        }
        let text = self.output.last(max);
        let quoted = self.output.kept.len().min(max);
        if self.output.total > quoted as u64 {
            format!(
                "the last {quoted} bytes of its output ({} in all):\n{text}",
                self.output.total
            )
        } else {
            format!("its output:\n{text}")
        }
    }

    /// The refusal of a test whose set-up hook failed.
    pub(crate) fn refusal(&self) -> String {
        format!(
            "--remote-setup {}: the agent's set-up hook {} {}; {}",
            self.name,
            self.name,
            self.ended(),
            self.quoted_output(OUTPUT_QUOTED)
        )
    }

    /// The warning of a failed tear-down, in the agent's report.
    pub(crate) fn warning(&self) -> String {
        let out = self.output.last(OUTPUT_WARNED).replace('\n', " | ");
        format!(
            "remote: the tear-down hook {} (--remote-teardown) {}{}",
            self.name,
            self.ended(),
            if out.is_empty() {
                String::new()
            } else {
                format!("; its output ends: {out}")
            }
        )
    }

    /// Into the agent's log: info when it succeeded, warn when not, with
    /// what it wrote.
    pub(crate) fn log(&self, peer: &str) {
        let out = self.output.last(OUTPUT_KEPT);
        let out = if out.is_empty() {
            String::new()
        } else {
            format!("; output:\n{out}")
        };
        let (phase, name, ended) = (self.phase.words(), &self.name, self.ended());
        if self.ok() {
            log::info!("{peer}: {phase} hook {name} {ended}{out}");
        } else {
            log::warn!("{peer}: {phase} hook {name} {ended}{out}");
        }
    }
}

/// The last [`OUTPUT_KEPT`] bytes of an output, and how many there were.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    kept: VecDeque<u8>,
    pub total: u64,
}

impl Tail {
    fn push(&mut self, b: &[u8]) {
        self.total += b.len() as u64;
        let b = &b[b.len().saturating_sub(OUTPUT_KEPT)..];
        let over = (self.kept.len() + b.len()).saturating_sub(OUTPUT_KEPT);
        self.kept.drain(..over);
        self.kept.extend(b);
    }

    /// The last `max` bytes kept, as text: invalid UTF-8 and control
    /// characters (but newlines and tabs) replaced, so that it prints safely
    /// on whatever terminal reads it; trimmed.
    pub(crate) fn last(&self, max: usize) -> String {
        let n = self.kept.len().min(max);
        let bytes: Vec<u8> = self.kept.iter().skip(self.kept.len() - n).copied().collect();
        String::from_utf8_lossy(&bytes)
            .chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    '\u{fffd}'
                } else {
                    c
                }
            })
            .collect::<String>()
            .trim()
            .to_string()
    }
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The child's end blocks, as programs expect of their stdout.
    // SAFETY: w is a valid descriptor.
    unsafe {
        let fl = libc::fcntl(w.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(w.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    Ok((r, w))
}

/// Reads what is there (at most 1 MiB, so a fast writer cannot keep the
/// caller from its deadline). False at end of file.
fn read_some(out: &mut File, tail: &mut Tail) -> bool {
    let mut buf = [0u8; 16 * 1024];
    for _ in 0..64 {
        match out.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => tail.push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Waits until `fd` is readable (or hung up), at most `wait`.
fn wait_readable(fd: &File, wait: Duration) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = wait.as_millis().clamp(1, 1000) as libc::c_int;
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Kills the hook's process group (it leads one of its own), and the hook
/// itself should it have left the group.
fn kill_group(child: &mut Child) {
    // SAFETY: a plain system call; the group is the child's, made at spawn.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    let _ = child.kill();
}

/// Starts `path` (no arguments, no shell) in `dir` with exactly `env`, in a
/// process group of its own, its stdout and stderr one pipe: the child and
/// the pipe's read end.
fn spawn(path: &Path, dir: &Path, env: &[(&'static str, String)]) -> io::Result<(Child, OwnedFd)> {
    let (out, w) = pipe()?;
    let mut cmd = Command::new(path);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w.try_clone()?))
        .stderr(Stdio::from(w))
        .process_group(0);
    let child = cmd.spawn();
    // The command holds this end's copies of the pipe's write end: closed
    // now, so the output ends when the hook's does.
    drop(cmd);
    Ok((child?, out))
}

/// Runs `path` (no arguments, no shell) in `dir` with exactly `env`, output
/// into one bounded tail, for at most `timeout`.
fn execute(path: &Path, dir: &Path, env: &[(&'static str, String)], timeout: Duration) -> (Status, Tail) {
    let mut tail = Tail::default();
    // A file just written may be open for writing a moment longer in a
    // process another thread is starting (ETXTBSY): tried again, briefly.
    let mut tries = 0;
    let (mut child, out) = loop {
        match spawn(path, dir, env) {
            Ok(x) => break x,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 10 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return (Status::NotRun(e.to_string()), tail),
        }
    };
    let deadline = Instant::now() + timeout;
    let mut out = File::from(out);
    let mut open = true;
    let status = loop {
        if open {
            open = read_some(&mut out, &mut tail);
        }
        match child.try_wait() {
            Ok(Some(s)) => break Status::Exited(s),
            Ok(None) => {}
            Err(e) => {
                kill_group(&mut child);
                let _ = child.wait();
                break Status::NotRun(format!("lost track of it: {e}"));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_group(&mut child);
            let _ = child.wait();
            break Status::TimedOut(timeout);
        }
        let wait = (deadline - now).min(Duration::from_millis(20));
        if open {
            wait_readable(&out, wait);
        } else {
            std::thread::sleep(wait);
        }
    };
    // What it wrote before it ended; a process it left behind holding the
    // pipe is not waited for past the grace.
    let grace = Instant::now() + OUTPUT_GRACE;
    while open && Instant::now() < grace {
        open = read_some(&mut out, &mut tail);
        if open {
            wait_readable(&out, grace.saturating_duration_since(Instant::now()));
        }
    }
    (status, tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A directory of its own under the system's temporary directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("netrig-hooks-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            TempDir(p)
        }

        fn script(&self, name: &str, body: &str, mode: u32) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn env() -> HookEnv {
        HookEnv {
            kind: "tcp-maerts",
            peer: Some("192.0.2.7".parse().unwrap()),
            agent_port: 6387,
            outcome: None,
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn discovery_takes_executable_regular_files_with_hook_names_only() {
        let d = TempDir::new("discover");
        d.script("nft-stateless", "true", 0o755);
        d.script("b.sh", "true", 0o700);
        d.script("not-executable", "true", 0o644);
        d.script("writable-by-all", "true", 0o757);
        d.script(".hidden", "true", 0o755);
        d.script("with space", "true", 0o755);
        std::fs::create_dir(d.0.join("subdir")).unwrap();
        // Links are refused, to a hook of the same directory as to anything else.
        symlink("/bin/sh", d.0.join("sh")).unwrap();
        symlink(d.0.join("nft-stateless"), d.0.join("alias")).unwrap();
        let h = Hooks::discover(&d.0, SECOND).unwrap();
        assert_eq!(h.names(), ["b.sh", "nft-stateless"]);
        assert!(h.dir().is_absolute());
        assert_eq!(h.timeout(), SECOND);
    }

    #[test]
    fn discovery_refuses_what_cannot_be_a_hooks_directory() {
        let d = TempDir::new("refuse");
        let e = Hooks::discover(&d.0, SECOND).unwrap_err().to_string();
        assert!(e.contains("holds no hook"), "{e}");
        d.script("x", "true", 0o755);
        std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Hooks::discover(&d.0, SECOND).unwrap_err().to_string();
        assert!(e.contains("anyone may write to it"), "{e}");
        std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = Hooks::discover(&d.0.join("x"), SECOND).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        let e = Hooks::discover(&d.0.join("missing"), SECOND)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--hooks "), "{e}");
        for t in [Duration::ZERO, Duration::from_secs(MAX_HOOK_TIMEOUT_S + 1)] {
            let e = Hooks::discover(&d.0, t).unwrap_err().to_string();
            assert!(e.contains("--hook-timeout"), "{e}");
        }
        assert!(Hooks::discover(&d.0, SECOND).is_ok());
    }

    #[test]
    fn a_hook_runs_with_the_agents_environment_only_in_its_directory() {
        let d = TempDir::new("env");
        d.script(
            "show",
            "echo \"$#|$PWD|$(env | sort | tr '\\n' ' ')\"; echo err >&2; exit 0",
            0o755,
        );
        let h = Hooks::discover(&d.0, 5 * SECOND).unwrap();
        let run = h.run(
            "show",
            Phase::Teardown,
            &HookEnv {
                outcome: Some(TestOutcome::Failed),
                ..env()
            },
        );
        assert!(run.ok(), "{run:?}");
        let out = run.output.last(OUTPUT_KEPT);
        let (args, rest) = out.split_once('|').unwrap();
        assert_eq!(args, "0", "no arguments");
        let (pwd, vars) = rest.split_once('|').unwrap();
        assert_eq!(Path::new(pwd), h.dir());
        // What the shell itself adds aside; then the stderr line, on the same stream.
        let vars: Vec<&str> = vars
            .split_whitespace()
            .filter(|v| {
                !["PWD=", "SHLVL=", "_=", "OLDPWD="]
                    .iter()
                    .any(|s| v.starts_with(s))
                    && *v != "err"
            })
            .collect();
        let path = format!("PATH={HOOK_PATH}");
        assert_eq!(
            vars,
            [
                "NETRIG_AGENT_PORT=6387",
                "NETRIG_HOOK=show",
                "NETRIG_HOOK_PHASE=teardown",
                "NETRIG_PEER=192.0.2.7",
                "NETRIG_TEST_KIND=tcp-maerts",
                "NETRIG_TEST_OUTCOME=failed",
                &path,
            ],
            "{out}"
        );
        assert!(out.ends_with("err"), "stderr is in the same output: {out}");
    }

    #[test]
    fn a_failing_hook_says_how_and_what_it_wrote() {
        let d = TempDir::new("fail");
        d.script("fail", "echo 'nft: no such table'; exit 3", 0o755);
        let h = Hooks::discover(&d.0, 5 * SECOND).unwrap();
        let run = h.run("fail", Phase::Setup, &env());
        assert!(!run.ok());
        let r = run.refusal();
        assert!(
            r.starts_with("--remote-setup fail: the agent's set-up hook fail exited with status 3"),
            "{r}"
        );
        assert!(r.ends_with("its output:\nnft: no such table"), "{r}");
        let w = run.warning();
        assert!(
            w.contains("exited with status 3") && w.ends_with("its output ends: nft: no such table"),
            "{w}"
        );
        let never = h.run("other", Phase::Setup, &env());
        assert!(matches!(never.status, Status::NotRun(_)), "{never:?}");
    }

    #[test]
    fn a_hanging_hook_is_killed_with_its_process_group_at_the_timeout() {
        let d = TempDir::new("hang");
        let marker = d.0.join("child-alive");
        // A child in the background keeps the output open, and would write
        // its marker after the timeout were it not killed with the group.
        d.script(
            "hang",
            &format!(
                "echo started; (sleep 2; echo alive > {}) & sleep 30",
                marker.display()
            ),
            0o755,
        );
        let h = Hooks::discover(&d.0, SECOND).unwrap();
        let t0 = Instant::now();
        let run = h.run("hang", Phase::Setup, &env());
        let took = t0.elapsed();
        assert!(matches!(run.status, Status::TimedOut(_)), "{run:?}");
        assert!(took >= SECOND && took < 3 * SECOND, "{took:?}");
        assert!(run.refusal().contains("was killed"), "{}", run.refusal());
        assert_eq!(run.output.last(100), "started");
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the hook's child outlived the kill");
    }

    #[test]
    fn a_hook_made_a_link_after_start_is_not_run() {
        let d = TempDir::new("swap");
        let p = d.script("x", "exit 0", 0o755);
        let h = Hooks::discover(&d.0, SECOND).unwrap();
        std::fs::remove_file(&p).unwrap();
        symlink("/bin/true", &p).unwrap();
        let run = h.run("x", Phase::Setup, &env());
        assert!(
            matches!(&run.status, Status::NotRun(w) if w.contains("symbolic link")),
            "{run:?}"
        );
    }

    #[test]
    fn output_is_bounded_to_its_tail_and_printable() {
        let mut t = Tail::default();
        for _ in 0..100 {
            t.push(&[b'a'; 1000]);
        }
        t.push(b"\x1b[2Jend\n");
        assert_eq!(t.total, 100_008);
        assert_eq!(t.kept.len(), OUTPUT_KEPT);
        assert_eq!(t.last(8), "\u{fffd}[2Jend");
        let mut big = Tail::default();
        big.push(&vec![b'b'; 3 * OUTPUT_KEPT]);
        assert_eq!(big.kept.len(), OUTPUT_KEPT);

        let d = TempDir::new("loud");
        d.script(
            "loud",
            "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo last",
            0o755,
        );
        let h = Hooks::discover(&d.0, 5 * SECOND).unwrap();
        let run = h.run("loud", Phase::Setup, &env());
        assert!(run.ok(), "{run:?}");
        assert_eq!(run.output.total, 1_000_006);
        assert_eq!(run.output.kept.len(), OUTPUT_KEPT);
        let q = run.quoted_output(OUTPUT_QUOTED);
        assert!(
            q.starts_with("the last ") && q.ends_with("x\nlast") && q.len() < OUTPUT_QUOTED + 100,
            "{q}"
        );
    }
}
