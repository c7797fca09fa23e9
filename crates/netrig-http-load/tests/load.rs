//! The load generator against a server written here, which counts what it
//! got: counts agree exactly, open loop keeps its rate, a stall shows in
//! the open loop's percentiles, errors land under their causes, HTTPS works.

mod common;

use common::{config, run, Mode, Server};
use netrig_http_load::{Ended, Load};
use std::time::{Duration, Instant};

/// The server's counts once it has written everything it will.
fn settle(s: &Server, responses: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.responses() < responses && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn closed_loop_keep_alive_counts_agree_with_the_server() {
    let s = Server::start(Mode::Length(1024));
    let mut c = config(s.addr);
    c.requests = Some(2000);
    let r = run(&c);
    settle(&s, 2000);
    assert_eq!(r.ended, Ended::Count);
    assert_eq!(r.window.errors.total(), 0, "{:?}", r.window.errors);
    assert_eq!(r.window.sent, 2000);
    assert_eq!(r.window.responses, 2000);
    assert_eq!(s.requests(), 2000);
    assert_eq!(s.responses(), 2000);
    assert_eq!(
        r.window.bytes_in,
        s.bytes_sent(),
        "heads and bodies, as the server wrote them"
    );
    assert_eq!(r.window.body_bytes, 2000 * 1024);
    assert_eq!(r.window.statuses.get(&200), Some(&2000));
    assert_eq!(s.connections(), 4, "keep-alive: one connection each");
    assert_eq!(r.window.bytes_out, 2000 * c.request.len() as u64);
    assert_eq!(r.latency.len(), 2000);
    assert!(r.window_s > 0.0);
}

#[test]
fn closed_loop_new_connection_per_request_and_chunked_bodies() {
    let s = Server::start(Mode::Chunked(1000));
    let mut c = config(s.addr);
    c.requests = Some(300);
    c.new_conn = true;
    c.request = netrig_http_load::request("GET", "127.0.0.1", "/", &[], true);
    let r = run(&c);
    settle(&s, 300);
    assert_eq!(r.window.errors.total(), 0, "{:?}", r.window.errors);
    assert_eq!((r.window.responses, s.requests(), s.responses()), (300, 300, 300));
    assert_eq!(s.connections(), 300, "a connection per request");
    assert_eq!(r.window.connections, 300);
    assert_eq!(
        r.window.body_bytes,
        300 * 1000,
        "chunked payload, framing not counted"
    );
    assert_eq!(r.window.bytes_in, s.bytes_sent());
}

#[test]
fn timed_closed_loop_totals_match_the_server_and_intervals_come() {
    let s = Server::start(Mode::Length(100));
    let mut c = config(s.addr);
    c.duration = Duration::from_millis(1200);
    c.omit = Duration::from_millis(200);
    c.interval = Some(Duration::from_millis(300));
    let mut seen = Vec::new();
    let r = netrig_http_load::run(&c, &|| None, &mut |i| seen.push(i.clone())).unwrap();
    settle(&s, r.total.responses);
    assert_eq!(r.ended, Ended::Duration);
    assert!((r.window_s - 1.0).abs() < 1e-9, "{}", r.window_s);
    assert!(r.window.responses > 100, "{}", r.window.responses);
    assert!(r.window.responses < r.total.responses, "the warm-up is left out");
    assert_eq!(
        r.total.sent,
        s.requests(),
        "every request sent reached the server"
    );
    assert_eq!(
        r.total.responses,
        s.responses(),
        "drained: every response the server wrote was read"
    );
    assert_eq!(r.abandoned, 0);
    assert!(
        (3..=4).contains(&seen.len()),
        "{} samples at 0.3 s in 1.2 s",
        seen.len()
    );
    assert!(seen.iter().map(|i| i.responses).sum::<u64>() <= r.total.responses);
}

#[test]
fn open_loop_keeps_its_rate() {
    let s = Server::start(Mode::Length(1024));
    let mut c = config(s.addr);
    c.load = Load::Open {
        rate: 500.0,
        poisson: false,
    };
    c.connections = 8;
    c.duration = Duration::from_secs(2);
    let r = run(&c);
    let achieved = r.window.sent as f64 / r.window_s;
    let replies = r.window.responses as f64 / r.window_s;
    assert!(
        (achieved - 500.0).abs() < 500.0 * 0.05,
        "asked 500/s, sent {achieved:.1}/s"
    );
    assert!((replies - 500.0).abs() < 500.0 * 0.05, "replies {replies:.1}/s");
    let sch = r.schedule.unwrap();
    assert!((sch.due as i64 - 1000).abs() <= 2, "due {}", sch.due);
    assert_eq!(sch.skipped, 0);
    assert!(sch.late < sch.due / 10, "late {} of {}", sch.late, sch.due);
    settle(&s, r.total.responses);
    assert_eq!(r.total.sent, s.requests());
}

#[test]
fn poisson_arrivals_average_to_the_rate() {
    let s = Server::start(Mode::Length(10));
    let mut c = config(s.addr);
    c.load = Load::Open {
        rate: 1000.0,
        poisson: true,
    };
    c.duration = Duration::from_secs(1);
    let r = run(&c);
    let due = r.schedule.unwrap().due as f64;
    // 1000 arrivals expected; the sd of a Poisson count is sqrt(1000) ≈ 32.
    assert!((due - 1000.0).abs() < 200.0, "{due}");
}

/// The server pauses 300 ms under 1,000 requests/s: the open loop, timing
/// each request from when it was due, shows it in its 99th percentile; the
/// closed loop, whose connections simply wait (and send nothing meanwhile),
/// barely does: coordinated omission.
#[test]
fn a_stall_shows_in_the_open_loop_p99_not_in_the_closed_loop() {
    let p99 = |open: bool| {
        let s = Server::start(Mode::Length(100));
        let mut c = config(s.addr);
        c.connections = 10;
        c.duration = Duration::from_millis(2500);
        if open {
            c.load = Load::Open {
                rate: 1000.0,
                poisson: false,
            };
        }
        let from = Instant::now() + Duration::from_millis(1000);
        *s.stall.lock().unwrap() = Some((from, from + Duration::from_millis(300)));
        let r = run(&c);
        (r.latency.quantile_us(0.99), r.window.responses)
    };
    let (open, n_open) = p99(true);
    let (closed, n_closed) = p99(false);
    assert!(
        open >= 150_000.0,
        "open loop p99 {open} µs over {n_open} responses"
    );
    assert!(
        closed < open / 3.0,
        "closed loop p99 {closed} µs ({n_closed} responses) against open loop {open} µs"
    );
}

#[test]
fn a_closed_port_is_connect_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = config(format!("127.0.0.1:{port}").parse().unwrap());
    c.requests = Some(20);
    let r = run(&c);
    assert_eq!(r.window.errors.connect_refused, 20, "{:?}", r.window.errors);
    assert_eq!(r.window.responses, 0);
}

#[test]
fn a_resetting_server_is_connect_reset() {
    let s = Server::start(Mode::Reset);
    let mut c = config(s.addr);
    c.requests = Some(20);
    let r = run(&c);
    assert_eq!(r.window.errors.connect_reset, 20, "{:?}", r.window.errors);
    assert_eq!(s.requests(), 20);
}

#[test]
fn bytes_after_a_response_are_a_bad_response_of_that_request() {
    // Each response arrives with bytes after it: that request's exchange is bad. Charged to the
    // next request instead (written as soon as the response completed), half would count as
    // responses and half as errors.
    let s = Server::start(Mode::Trailing(10));
    let mut c = config(s.addr);
    c.requests = Some(20);
    let r = run(&c);
    assert_eq!(r.window.errors.bad_response, 20, "{:?}", r.window.errors);
    assert_eq!(r.window.responses, 0);
}

#[test]
fn a_silent_server_is_client_timeout() {
    let s = Server::start(Mode::Silent);
    let mut c = config(s.addr);
    c.requests = Some(4);
    c.timeout = Duration::from_millis(300);
    let t0 = Instant::now();
    let r = run(&c);
    assert_eq!(r.window.errors.client_timeout, 4, "{:?}", r.window.errors);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let mut c = config(s.addr);
    c.duration = Duration::from_millis(300);
    c.timeout = Duration::from_millis(200);
    c.load = Load::Open {
        rate: 100.0,
        poisson: false,
    };
    let r = run(&c);
    assert!(r.total.errors.client_timeout > 0, "{:?}", r.total.errors);
}
