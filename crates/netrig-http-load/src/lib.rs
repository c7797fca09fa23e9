//! netrig's HTTP/1.1 load generator: the engine of the `http` test kind.
//!
//! `-c` connections on `-t` threads, each thread one mio event loop owning
//! its connections; closed loop (wrk: each connection sends its next
//! request when the last response ends) or open loop (wrk2, httperf: a
//! schedule of requests at `--rate`, constant or Poisson, latency timed
//! from when each was due); keep-alive or a new connection per request.
//! Responses are parsed by [`parse::ResponseParser`] (httparse for the
//! head, the body framed and counted here, every length bounded); HTTPS
//! with rustls ([`tls`]).
//!
//! [`run`] takes a [`Config`] and returns a [`Report`]: counts over the
//! measured window and over the whole run, errors by cause, statuses, the
//! window's latency histogram, the schedule's lateness, interval samples.

pub mod parse;
pub mod tls;
mod worker;

pub use parse::{Bounds, ParseError, Response, ResponseParser};

use netrig_metrics::LatencyRecorder;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};
use thiserror::Error;

/// How requests are offered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Each connection sends its next request when its last response ends.
    Closed,
    /// `rate` requests per second in total, on a schedule; `poisson`:
    /// exponential gaps between them.
    Open { rate: f64, poisson: bool },
}

/// One load run.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: SocketAddr,
    /// The source address of every connection (`--clients`' 127.0.0.k,
    /// or the run's `--bind`); `None`: the kernel's choice.
    pub bind: Option<std::net::IpAddr>,
    /// The request's bytes, as sent (see [`request`]).
    pub request: Vec<u8>,
    /// It is a HEAD request: responses have no body.
    pub head_request: bool,
    /// Connections (`-c`); with `--rate` and `--new-conn`, the most in flight.
    pub connections: u32,
    /// Threads (`-t`), each one event loop.
    pub threads: u32,
    /// The run's length (`-l`); with `requests`, its longest.
    pub duration: Duration,
    /// Left out at the start (`--omit`); not with `requests`.
    pub omit: Duration,
    /// Stop after this many requests (`-n`), all threads together.
    pub requests: Option<u64>,
    pub load: Load,
    /// A new connection for each request (`--new-conn`).
    pub new_conn: bool,
    /// Longest a request may wait for its whole response (and a connection
    /// to open): later is a client timeout.
    pub timeout: Duration,
    pub bounds: Bounds,
    /// HTTPS.
    pub tls: Option<tls::Tls>,
    /// Interval samples every so often (`-i`).
    pub interval: Option<Duration>,
    /// TCP_NODELAY on the connections.
    pub nodelay: bool,
    /// Pin thread i to `cpus[i % len]`.
    pub cpus: Option<Vec<u32>>,
    /// Read /proc/stat at the window's edges.
    pub measure_cpu: bool,
    /// Told the instant the measured window opens (after `omit`) and closes (at the run's end),
    /// right after /proc/stat is read at each: a profiler samples exactly that window.
    pub watch: netrig_engine::window_watch::WindowWatch,
}

/// Most requests an open-loop thread keeps waiting for a connection; a
/// request due beyond that is skipped (counted, never sent).
pub const MAX_BACKLOG: usize = 1 << 20;
/// A request sent more than this after it was due counts as late.
pub const LATE: Duration = Duration::from_millis(1);

/// A GET (or HEAD) request for `path` on `host`, with `headers` ("Name:
/// value" each) and `Connection: close` when asked.
pub fn request(method: &str, host: &str, path: &str, headers: &[String], close: bool) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    if close {
        r.push_str("Connection: close\r\n");
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// Why a request failed, as httperf names the causes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Errors {
    /// No connection, or no whole response, within the timeout (or ETIMEDOUT).
    pub client_timeout: u64,
    /// ECONNREFUSED.
    pub connect_refused: u64,
    /// ECONNRESET or EPIPE, or the server closed before the response ended.
    pub connect_reset: u64,
    /// EADDRNOTAVAIL: no local port left.
    pub no_local_port: u64,
    /// EMFILE or ENFILE: no file descriptor left.
    pub no_descriptor: u64,
    /// A response that broke HTTP/1.1 or a bound (`--max-header`, `--max-body`), or
    /// bytes nobody asked for.
    pub bad_response: u64,
    /// Any other error (TLS, no route, ...).
    pub other: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.client_timeout
            + self.connect_refused
            + self.connect_reset
            + self.no_local_port
            + self.no_descriptor
            + self.bad_response
            + self.other
    }
    fn add(&mut self, o: &Errors) {
        self.client_timeout += o.client_timeout;
        self.connect_refused += o.connect_refused;
        self.connect_reset += o.connect_reset;
        self.no_local_port += o.no_local_port;
        self.no_descriptor += o.no_descriptor;
        self.bad_response += o.bad_response;
        self.other += o.other;
    }
    fn count(&mut self, cause: Cause) {
        *match cause {
            Cause::Timeout => &mut self.client_timeout,
            Cause::Refused => &mut self.connect_refused,
            Cause::Reset => &mut self.connect_reset,
            Cause::NoPort => &mut self.no_local_port,
            Cause::NoFd => &mut self.no_descriptor,
            Cause::BadResponse => &mut self.bad_response,
            Cause::Other => &mut self.other,
        } += 1;
    }
}

/// One failure's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    Timeout,
    Refused,
    Reset,
    NoPort,
    NoFd,
    BadResponse,
    Other,
}

impl Cause {
    pub(crate) fn of(e: &std::io::Error) -> Cause {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => Cause::Refused,
            Some(libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) => Cause::Reset,
            Some(libc::EADDRNOTAVAIL) => Cause::NoPort,
            Some(libc::EMFILE | libc::ENFILE) => Cause::NoFd,
            Some(libc::ETIMEDOUT) => Cause::Timeout,
            _ => Cause::Other,
        }
    }
}

/// Counts over a span of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests whose last byte was written.
    pub sent: u64,
    /// Whole responses received, whatever their status.
    pub responses: u64,
    /// Of those, the ones with a 2xx or 3xx status.
    pub successes: u64,
    /// Bytes received, heads and bodies (after TLS: HTTP bytes).
    pub bytes_in: u64,
    /// Of those, body payload bytes.
    pub body_bytes: u64,
    /// Request bytes written.
    pub bytes_out: u64,
    /// Connections opened (connect succeeded).
    pub connections: u64,
    pub errors: Errors,
    /// Responses by status code.
    pub statuses: BTreeMap<u16, u64>,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.responses += o.responses;
        self.successes += o.successes;
        self.bytes_in += o.bytes_in;
        self.body_bytes += o.body_bytes;
        self.bytes_out += o.bytes_out;
        self.connections += o.connections;
        self.errors.add(&o.errors);
        for (s, n) in &o.statuses {
            *self.statuses.entry(*s).or_default() += n;
        }
    }
}

/// How well an open-loop run kept to its schedule, over the window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    /// Requests due inside the window.
    pub due: u64,
    /// Sent more than [`LATE`] after they were due.
    pub late: u64,
    /// Never sent: due while [`MAX_BACKLOG`] requests already waited.
    pub skipped: u64,
    /// Due inside the window but not sent when it closed.
    pub unsent: u64,
    /// Largest and mean delay from due to sent, in µs.
    pub max_behind_us: f64,
    pub mean_behind_us: f64,
}

/// One interval's sample, read from the threads' running counts as the
/// requests flow.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalSample {
    pub index: u32,
    /// Seconds since the run's start.
    pub start_s: f64,
    pub end_s: f64,
    pub sent: u64,
    /// Responses, whatever their status, and those with a 2xx or 3xx one.
    pub responses: u64,
    pub successes: u64,
    pub bytes_in: u64,
    pub errors: u64,
}

/// What ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// `-l` ran out.
    Duration,
    /// `-n` requests were answered or failed.
    Count,
    /// `-n` was not reached within `-l`.
    CountCutShort,
}

/// CPU time of one load thread over the run.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCpu {
    pub thread: u32,
    pub connections: u32,
    pub cpu_s: f64,
    /// `cpu_s` over the thread's running time, × 100.
    pub busy_pct: f64,
}

/// A run's results.
#[derive(Debug)]
pub struct Report {
    /// The measured window: from `--omit` after the start to the end of
    /// `-l` (or, with `-n`, from the start to the last response).
    pub window_start_s: f64,
    pub window_s: f64,
    /// Events inside the window.
    pub window: Counts,
    /// Everything, warm-up and the drain after the window included: what
    /// the server saw.
    pub total: Counts,
    /// The latency of every response completed inside the window, in ns:
    /// from the request's first byte (closed loop), its connect
    /// (closed loop with `--new-conn`) or its due time (open loop).
    pub latency: LatencyRecorder,
    pub schedule: Option<Schedule>,
    pub intervals: Vec<IntervalSample>,
    pub threads: Vec<ThreadCpu>,
    pub ended: Ended,
    /// HTTPS: connections whose TLS failed (refused by rustls: the server's
    /// certificate, an alert, a peer not speaking TLS), by reason in words;
    /// these failures are counted in `errors.other` when a request was on
    /// the connection.
    pub tls_errors: BTreeMap<String, u64>,
    /// Requests still in flight when the drain ended (not answered).
    pub abandoned: u64,
    /// This host's CPU over the window (/proc/stat), when measured; the
    /// reason otherwise.
    pub cpu: Result<netrig_metrics::CpuUsage, String>,
}

#[derive(Debug, Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("stopped: {0}")]
    Stopped(String),
    #[error("load thread: {0}")]
    Thread(String),
    /// HTTPS: every connection failed its TLS handshake the same way before
    /// any succeeded, so the run stopped (as curl and wrk stop).
    #[error("{0}")]
    Tls(String),
}

/// HTTPS: TLS failures before any connection succeeded that stop a run
/// (at most this many, fewer with fewer connections).
pub const TLS_GIVE_UP: u64 = 8;

/// Running counts one thread publishes for interval samples.
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Live {
    pub sent: AtomicU64,
    pub responses: AtomicU64,
    pub successes: AtomicU64,
    pub bytes_in: AtomicU64,
    pub errors: AtomicU64,
}

/// What every thread shares.
pub(crate) struct Shared {
    pub stop: AtomicBool,
    pub start: OnceLock<Instant>,
    pub live: Vec<Live>,
    /// Requests left to start, with `-n`.
    pub budget: Option<AtomicU64>,
    /// HTTPS: a response came back over TLS (a handshake succeeded).
    pub tls_ok: AtomicBool,
    /// HTTPS: connections whose TLS failed, all threads.
    pub tls_failed: AtomicU64,
    /// HTTPS: TLS failures before any success that stop the run.
    pub tls_give_up: u64,
    /// Why the run stopped early: the TLS failure's reason, and whether it
    /// is the server's certificate.
    pub fatal: OnceLock<(String, bool)>,
}

impl Shared {
    /// Takes one request from the `-n` budget; false when none is left.
    pub fn take(&self) -> bool {
        match &self.budget {
            None => true,
            Some(b) => b
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }
}

/// Checks `c` before anything runs; the errors name the option.
pub fn check(c: &Config) -> Result<(), Error> {
    let bad = |s: String| Err(Error::Config(s));
    if c.connections == 0 || c.connections > 1_000_000 {
        return bad(format!("-c {} is out of range 1..=1000000", c.connections));
    }
    if c.threads == 0 || c.threads > 1024 {
        return bad(format!("-t {} is out of range 1..=1024", c.threads));
    }
    if let Load::Open { rate, .. } = c.load {
        if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
            return bad(format!("--rate {rate} is out of range (0, 10000000] requests/s"));
        }
    }
    if c.requests == Some(0) {
        return bad("-n 0: give at least one request".into());
    }
    if c.requests.is_some() && !c.omit.is_zero() {
        return bad("--omit applies to timed runs (-l), not to -n".into());
    }
    if c.omit >= c.duration {
        return bad(format!(
            "--omit {} s leaves nothing of -l {} s",
            c.omit.as_secs_f64(),
            c.duration.as_secs_f64()
        ));
    }
    Ok(())
}

/// Runs the load; `stop` (checked every few ms) ends it early with
/// [`Error::Stopped`] and its reason; `on_interval` sees each `-i` sample.
pub fn run(
    c: &Config,
    stop: &dyn Fn() -> Option<String>,
    on_interval: &mut dyn FnMut(&IntervalSample),
) -> Result<Report, Error> {
    check(c)?;
    let threads = c.threads.min(c.connections).max(1) as usize;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        start: OnceLock::new(),
        live: (0..threads).map(|_| Live::default()).collect(),
        budget: c.requests.map(AtomicU64::new),
        tls_ok: AtomicBool::new(false),
        tls_failed: AtomicU64::new(0),
        tls_give_up: TLS_GIVE_UP.min(u64::from(c.connections)),
        fatal: OnceLock::new(),
    });
    let ready = Arc::new(Barrier::new(threads + 1));
    let go = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let share = share_of(c.connections, threads, i);
        let plan = worker::Plan::new(c, i, threads, share);
        let (shared, ready, go) = (shared.clone(), ready.clone(), go.clone());
        let cpu = c.cpus.as_ref().map(|l| l[i % l.len()]);
        let h = std::thread::Builder::new()
            .name(format!("netrig-http-{i}"))
            .spawn(move || {
                if let Some(cpu) = cpu {
                    pin(cpu);
                }
                let w = worker::Worker::new(plan, i, &shared);
                ready.wait();
                go.wait();
                w.and_then(|w| w.run(&shared))
            })
            .map_err(|e| Error::Thread(e.to_string()))?;
        handles.push(h);
    }
    ready.wait();
    let start = Instant::now();
    let _ = shared.start.set(start);
    go.wait();
    let end = start + c.duration;
    let window_start = start + c.omit;
    let read_cpu = || -> Result<netrig_metrics::CpuSnapshot, String> {
        if !c.measure_cpu {
            return Err("not measured (--no-cpu)".into());
        }
        netrig_metrics::read_proc_stat().map_err(|e| format!("/proc/stat: {e}"))
    };
    // The window's marks, and the watch told of each right after it (the engine's order).
    let listener = c.watch.0.as_deref();
    let open_window = || {
        let cpu = read_cpu();
        if let Some(l) = listener {
            l.opened();
        }
        Some(cpu)
    };
    let mut cpu_first = if c.omit.is_zero() { open_window() } else { None };
    let mut stopped = None;
    let mut intervals = Vec::new();
    let mut last = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut tick = c.interval.map(|i| (start + i, i));
    loop {
        let now = Instant::now();
        if now >= end || shared.fatal.get().is_some() || handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if let Some(r) = stop() {
            stopped = Some(r);
            break;
        }
        if cpu_first.is_none() && now >= window_start {
            cpu_first = open_window();
        }
        if let Some((at, every)) = tick {
            if now >= at {
                let live = shared.live.iter().fold((0, 0, 0, 0, 0), |a, l| {
                    (
                        a.0 + l.sent.load(Ordering::Relaxed),
                        a.1 + l.responses.load(Ordering::Relaxed),
                        a.2 + l.bytes_in.load(Ordering::Relaxed),
                        a.3 + l.errors.load(Ordering::Relaxed),
                        a.4 + l.successes.load(Ordering::Relaxed),
                    )
                });
                let s = IntervalSample {
                    index: intervals.len() as u32,
                    start_s: (at - every - start).as_secs_f64(),
                    end_s: (now - start).as_secs_f64(),
                    sent: live.0 - last.0,
                    responses: live.1 - last.1,
                    successes: live.4 - last.4,
                    bytes_in: live.2 - last.2,
                    errors: live.3 - last.3,
                };
                last = live;
                on_interval(&s);
                intervals.push(s);
                tick = Some((at + every, every));
            }
        }
        let mut next = tick.map_or(end, |(at, _)| at.min(end));
        if cpu_first.is_none() {
            next = next.min(window_start);
        }
        std::thread::sleep(
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(5)),
        );
    }
    let cpu_last = read_cpu();
    // Closed only if it opened: a run stopped during --omit leaves the watch unopened, and
    // the watch says so.
    if let (Some(l), Some(_)) = (listener, &cpu_first) {
        l.closed();
    }
    shared.stop.store(true, Ordering::Relaxed);
    let mut ends = Vec::with_capacity(threads);
    for h in handles {
        ends.push(
            h.join()
                .map_err(|_| Error::Thread("a load thread panicked".into()))??,
        );
    }
    if let Some(r) = stopped {
        return Err(Error::Stopped(r));
    }
    if let Some((reason, certificate)) = shared.fatal.get() {
        return Err(tls_fatal(&shared, reason, *certificate));
    }
    let cpu = match (cpu_first, cpu_last) {
        (Some(Ok(a)), Ok(b)) => Ok(b.usage_since(&a)),
        (Some(Err(e)), _) | (_, Err(e)) => Err(e),
        (None, _) => Err("the run ended before the window began".into()),
    };
    let mut r = worker::merge(c, start, ends, intervals);
    r.cpu = cpu;
    Ok(r)
}

/// The error of a run stopped because every connection failed TLS the same way.
fn tls_fatal(shared: &Shared, reason: &str, certificate: bool) -> Error {
    let n = shared.tls_failed.load(Ordering::Relaxed);
    Error::Tls(format!(
        "HTTPS: {n} connection(s) failed TLS the same way and none succeeded, so the run stopped: {reason}{}",
        if certificate {
            "; to load a server with a self-signed or private-CA certificate, give -k/--insecure (take any \
             certificate) or --cacert FILE (trust the CA in FILE, PEM)"
        } else {
            ""
        }
    ))
}

/// Connections of thread `i` of `threads`.
pub(crate) fn share_of(total: u32, threads: usize, i: usize) -> u32 {
    let t = threads as u32;
    total / t + u32::from((i as u32) < total % t)
}

fn pin(cpu: u32) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if (cpu as usize) < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}
