//! Issue #43 item 4, results where fleets keep them: `netrig serve --metrics-port` scraped by
//! hand and by Prometheus, `--push` received by Debian's Pushgateway (docs/FLEET.md).

use crate::helpers::{at, free_port, run, run_json, stderr, stdout, strs, u, Served, TempDir};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An HTTP/1.0 answer: status, headers (names lower-cased) and body.
struct Answer {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

/// GET `path` (with its query, already encoded) on loopback `port`, HTTP/1.0 so the body is
/// neither chunked nor kept alive; every wait bounded.
fn get(port: u16, path: &str, accept: &str) -> Answer {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let accept = if accept.is_empty() {
        String::new()
    } else {
        format!("Accept: {accept}\r\n")
    };
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{accept}\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("GET {path} on {port}: {e}"));
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// The samples of a text exposition (classic or OpenMetrics): `name{labels}` as written, to value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample: {l:?}"));
            let v = value.parse().unwrap_or_else(|_| panic!("not a value: {l:?}"));
            (series.to_string(), v)
        })
        .collect()
}

fn scrape(metrics_port: u16) -> HashMap<String, f64> {
    let a = get(metrics_port, "/metrics", "");
    assert_eq!(a.status, 200, "{}", a.body);
    samples(&a.body)
}

fn value(s: &HashMap<String, f64>, series: &str) -> f64 {
    *s.get(series)
        .unwrap_or_else(|| panic!("{series} not scraped: {s:?}"))
}

/// A program found on PATH, or None.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Waits (bounded) until `port` answers GET `path` with 200.
fn wait_ready(port: u16, path: &str, what: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() && get(port, path, "").status == 200 {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before it was ready ({status})");
        }
        assert!(
            Instant::now() < deadline,
            "{what} not ready on port {port} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A process this test started, killed (and reaped) when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The agent's metrics port, with the agent's own port and the metrics port's number.
fn agent_with_metrics(extra: &[&str]) -> (Served, u16) {
    let mp = free_port();
    let mps = mp.to_string();
    let mut args = vec!["--bind", "127.0.0.1", "--metrics-port", &mps];
    args.extend_from_slice(extra);
    let mut agent = Served::start(&args);
    // The metrics thread starts with the accept loop: bounded wait for its port.
    wait_ready(mp, "/metrics", "the agent's metrics port", &mut agent.child);
    (agent, mp)
}

/// The payload the agent's flows counted in a result, by their role there.
fn remote_bytes(v: &Value, role: &str) -> u64 {
    v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["remote"]["role"] == role)
        .map(|f| f["remote"]["total_bytes"].as_u64().unwrap())
        .sum()
}

/// Two tests against an agent move its counters by exactly what they did: a test each, a
/// session each, the payload its flows counted (the results' `remote.total_bytes`, by role), a
/// refusal for a connection from outside --allow; the scrape is valid text (promtool), and
/// OpenMetrics when asked for.
#[test]
fn the_agents_counters_move_by_what_its_tests_did() {
    let (agent, mp) = agent_with_metrics(&["--allow", "127.0.0.1/32"]);
    let port = agent.port_arg();
    let before = scrape(mp);
    let stream = run_json(&strs(&at(&port, "tcp-stream -l 0.5")));
    let rr = run_json(&strs(&at(&port, "tcp-rr -l 0.5")));
    // From outside --allow: refused (and the metrics port, which --allow covers too, is closed
    // to it unanswered).
    let outsider = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    outsider
        .bind(&"127.0.0.2:0".parse::<std::net::SocketAddr>().unwrap().into())
        .unwrap();
    outsider
        .connect_timeout(
            &format!("127.0.0.1:{port}")
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
            Duration::from_secs(5),
        )
        .unwrap();
    let mut outsider: TcpStream = outsider.into();
    outsider.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = outsider.read_to_end(&mut Vec::new());
    // The sessions end as their clients go: the gauge is back to 0 within a bound.
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let s = scrape(mp);
        if value(&s, "netrig_agent_sessions") == 0.0 || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let moved = |series: &str| value(&after, series) - value(&before, series);
    assert_eq!(value(&after, "netrig_agent_sessions"), 0.0);
    assert_eq!(moved("netrig_agent_sessions_admitted_total"), 2.0);
    assert_eq!(
        moved("netrig_agent_tests_total{kind=\"tcp-stream\",outcome=\"completed\"}"),
        1.0
    );
    assert_eq!(
        moved("netrig_agent_tests_total{kind=\"tcp-rr\",outcome=\"completed\"}"),
        1.0
    );
    assert_eq!(
        moved("netrig_agent_tests_total{kind=\"tcp-stream\",outcome=\"failed\"}"),
        0.0
    );
    assert_eq!(moved("netrig_agent_refusals_total{reason=\"allow\"}"), 1.0);
    assert_eq!(moved("netrig_agent_refusals_total{reason=\"busy\"}"), 0.0);
    let received = remote_bytes(&stream, "receiver");
    assert!(
        received >= u(&stream, "/summary/bytes"),
        "the agent received the window's bytes at least"
    );
    assert_eq!(
        moved("netrig_agent_test_payload_bytes_total{role=\"receiver\"}"),
        received as f64
    );
    let answered = remote_bytes(&rr, "responder");
    assert!(answered > 0);
    assert_eq!(
        moved("netrig_agent_test_payload_bytes_total{role=\"responder\"}"),
        answered as f64
    );
    assert!(value(&after, "netrig_agent_uptime_seconds") > value(&before, "netrig_agent_uptime_seconds"));
    let build = format!(
        "netrig_agent_build_info{{version=\"{}\",protocol_min=",
        env!("CARGO_PKG_VERSION")
    );
    assert!(after.keys().any(|k| k.starts_with(&build)), "{after:?}");

    // OpenMetrics when asked for, as Prometheus asks; the classic text otherwise.
    let om = get(
        mp,
        "/metrics",
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    );
    assert_eq!(
        om.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(om.body.ends_with("# EOF\n"), "{}", om.body);
    let classic = get(mp, "/metrics", "text/plain");
    assert!(classic.headers["content-type"].starts_with("text/plain; version=0.0.4"));
    assert!(!classic.body.contains("# EOF"));
    promtool_accepts(&classic.body);
    an_iperf3_clients_test_is_counted(agent.port, mp);
}

/// An iperf3 client's test (Debian's iperf3 against the agent's port) is a session of its
/// own and a test of its kind, and its bytes are the agent's receivers'.
fn an_iperf3_clients_test_is_counted(port: u16, mp: u16) {
    let Some(iperf3) = on_path("iperf3") else {
        return crate::skip::missing("iperf3 is missing (apt-get install iperf3)");
    };
    let before = scrape(mp);
    let p = port.to_string();
    let o = crate::helpers::run_cmd(
        Command::new(iperf3),
        &["-c", "127.0.0.1", "-p", &p, "-t", "1", "-J"],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let received = u(&v, "/end/sum_received/bytes");
    let after = scrape(mp);
    let moved = |series: &str| value(&after, series) - value(&before, series);
    assert_eq!(moved("netrig_agent_iperf3_sessions_total"), 1.0);
    assert_eq!(
        moved("netrig_agent_tests_total{kind=\"tcp-stream\",outcome=\"completed\"}"),
        1.0
    );
    assert_eq!(
        moved("netrig_agent_sessions_admitted_total"),
        0.0,
        "not a netrig session"
    );
    let bytes = moved("netrig_agent_test_payload_bytes_total{role=\"receiver\"}");
    assert!(
        bytes >= received as f64 && received > 0,
        "{bytes} counted, iperf3 says {received} received"
    );
}

/// `promtool check metrics` (Debian's prometheus) reads the classic scrape without a complaint.
fn promtool_accepts(text: &str) {
    let Some(promtool) = on_path("promtool") else {
        return crate::skip::missing("promtool is missing (apt-get install prometheus)");
    };
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "promtool took over 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{text}"
    );
}

/// What a scraper may send that is not a scrape costs it its own connection and nothing more:
/// a head over the bound (431), a non-GET (405), another path (404), a client that stops
/// mid-request (closed after the deadline); the agent scrapes and serves tests after.
#[test]
fn hostile_scrapes_neither_hang_nor_kill_the_agent() {
    let (mut agent, mp) = agent_with_metrics(&[]);
    let huge = format!("GET /metrics HTTP/1.1\r\nX-Fill: {}\r\n\r\n", "a".repeat(100_000));
    let mut s = TcpStream::connect(("127.0.0.1", mp)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The agent may close before it has read all of it: the write's failure is fine.
    let _ = s.write_all(huge.as_bytes());
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    if !raw.is_empty() {
        assert_eq!(parse_answer(&raw).status, 431);
    }
    let mut post = TcpStream::connect(("127.0.0.1", mp)).unwrap();
    post.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    post.write_all(b"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    post.read_to_end(&mut raw).unwrap();
    assert_eq!(parse_answer(&raw).status, 405);
    assert_eq!(get(mp, "/", "").status, 404);
    assert_eq!(get(mp, "/metrics/../secret", "").status, 404);

    // A slow client: half a request line, then silence. It is closed within the agent's
    // 3 s deadline (with a margin for a busy machine), and a scrape after it is answered.
    let started = Instant::now();
    let mut slow = TcpStream::connect(("127.0.0.1", mp)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    slow.write_all(b"GET /met").unwrap();
    let mut raw = Vec::new();
    let _ = slow.read_to_end(&mut raw);
    let held = started.elapsed();
    assert!(raw.is_empty(), "{}", String::from_utf8_lossy(&raw));
    assert!(
        held >= Duration::from_millis(2500) && held < Duration::from_secs(15),
        "held {held:?}"
    );
    assert!(agent.child.try_wait().unwrap().is_none(), "the agent died");
    assert_eq!(value(&scrape(mp), "netrig_agent_sessions"), 0.0);
    let port = agent.port_arg();
    run_json(&strs(&at(&port, "tcp-stream -l 0.2")));
}

/// Debian's Pushgateway receives a run's summary (`--push`), a failed push keeps the result
/// and says so, and Debian's Prometheus scrapes both the Pushgateway and the agent's metrics
/// port: the series come back through its query API.
#[test]
fn the_pushgateway_receives_the_summary_and_prometheus_scrapes_it() {
    let (Some(pgw), Some(prom)) = (on_path("prometheus-pushgateway"), on_path("prometheus")) else {
        return crate::skip::missing(
            "prometheus-pushgateway or prometheus is missing (apt-get install prometheus prometheus-pushgateway)",
        );
    };
    let dir = TempDir::new("prometheus");
    let gp = free_port();
    let mut gateway = Killed(
        Command::new(pgw)
            .arg(format!("--web.listen-address=127.0.0.1:{gp}"))
            // In memory only: Debian's build persists to /var/lib/prometheus by default, which
            // would carry one run's pushes into the next (and into the host's own gateway).
            .arg("--persistence.file=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(gp, "/-/ready", "the Pushgateway", &mut gateway.0);
    let (agent, mp) = agent_with_metrics(&[]);
    let port = agent.port_arg();
    let push = format!("http://127.0.0.1:{gp}");
    let result = run_json(&strs(&at(&port, &format!("tcp-stream -l 0.5 --push {push}"))));
    let bps = result["summary"]["throughput_bps"].as_f64().unwrap();
    let pushed = samples(&get(gp, "/metrics", "").body);
    let series = "netrig_throughput_bits_per_second{instance=\"\",job=\"netrig\",kind=\"tcp-stream\",target=\"127.0.0.1\"}";
    assert_eq!(value(&pushed, series), bps, "{pushed:?}");
    assert!(
        !pushed.keys().any(|k| k.starts_with("netrig_rtt_")),
        "a stream has no latency to push: {pushed:?}"
    );

    // A push that fails: the result is printed all the same, and the error names --push.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let mut args = at(&port, "tcp-stream -l 0.2 --json --push");
    args.push(closed.clone());
    let o = run(&strs(&args));
    assert!(!o.status.success());
    assert!(
        serde_json::from_str::<Value>(&stdout(&o)).is_ok(),
        "the result is printed: {}",
        stdout(&o)
    );
    assert!(stderr(&o).contains(&format!("--push {closed}")), "{}", stderr(&o));

    // An experiment: one group per point (and arm), each the mean of its runs.
    let o = run(&strs(&at(
        &port,
        &format!("tcp-rr -l 0.2 -P 1,2 --iterations 2,2 --json --push {push}"),
    )));
    assert!(o.status.success(), "{}", stderr(&o));
    let pushed = samples(&get(gp, "/metrics", "").body);
    for point in ["-P 1", "-P 2"] {
        let runs = format!(
            "netrig_runs{{arm=\"default\",instance=\"\",job=\"netrig\",kind=\"tcp-rr\",plan=\"tcp-rr\",\
             point=\"{point}\",target=\"127.0.0.1\",test=\"0\"}}"
        );
        assert_eq!(value(&pushed, &runs), 2.0, "{pushed:?}");
    }

    let pp = free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n\
             - job_name: pushgateway\n  honor_labels: true\n  static_configs:\n  - targets: ['127.0.0.1:{gp}']\n\
             - job_name: netrig-agent\n  static_configs:\n  - targets: ['127.0.0.1:{mp}']\n"
        ),
    )
    .unwrap();
    let mut prometheus = Killed(
        Command::new(prom)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{pp}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(pp, "/-/ready", "Prometheus", &mut prometheus.0);
    let pushed = query_until(
        pp,
        "netrig_throughput_bits_per_second{job=\"netrig\",kind=\"tcp-stream\"}",
    );
    assert_eq!(pushed, bps);
    let tests = query_until(
        pp,
        "netrig_agent_tests_total{job=\"netrig-agent\",kind=\"tcp-stream\",outcome=\"completed\"}",
    );
    assert_eq!(tests, 2.0, "the agent ran two tcp-streams");
    let rr = query_until(
        pp,
        "netrig_agent_tests_total{job=\"netrig-agent\",kind=\"tcp-rr\",outcome=\"completed\"}",
    );
    assert_eq!(rr, 4.0, "the experiment's four tcp-rr runs");
}

/// The value of the one series `query` finds in Prometheus (HTTP API /api/v1/query), polled
/// until it is there (bounded: a scrape a second).
fn query_until(port: u16, query: &str) -> f64 {
    let encoded: String = query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = get(port, &format!("/api/v1/query?query={encoded}"), "");
        let v: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
        if let Some(x) = v["data"]["result"][0]["value"][1].as_str() {
            return x.parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus has no {query} after 60 s: {}",
            a.body
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A Pushgateway URL this build cannot push to (TLS, no scheme) is refused before the run,
/// naming --push, rather than after a run whose summary it would then lose.
#[test]
fn a_push_url_it_cannot_use_is_refused_before_the_run() {
    for url in ["https://127.0.0.1:9091", "127.0.0.1:9091"] {
        let started = Instant::now();
        let o = run(&["tcp-stream", "-l", "5", "--push", url]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!("--push {url}")), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "no run: {}", stdout(&o));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "refused before the 5 s run"
        );
    }
}
