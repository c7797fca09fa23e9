//! The http kind (issue #13) as a user runs it: against a server written
//! here, against nginx and its access log, and never through an agent.

use crate::helpers::*;
use netrig_proto::{AgentMsg, ClientMsg, TestSpec};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A keep-alive HTTP server on a thread per connection that counts the
/// requests it got and the bytes it sent; bodies of `body` bytes.
fn counting_server(body: usize) -> (u16, Arc<AtomicU64>, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (req, sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (r, s) = (req.clone(), sent.clone());
    std::thread::spawn(move || {
        for c in l.incoming().take(256) {
            let Ok(mut c) = c else { continue };
            let (r, s) = (r.clone(), s.clone());
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    r.fetch_add(1, Ordering::SeqCst);
                    let mut resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {body}\r\n\r\n").into_bytes();
                    resp.resize(resp.len() + body, b'z');
                    if c.write_all(&resp).is_err() {
                        return;
                    }
                    s.fetch_add(resp.len() as u64, Ordering::SeqCst);
                }
            });
        }
    });
    (port, req, sent)
}

#[test]
fn http_counts_agree_with_the_servers_and_the_result_holds_its_schema() {
    let (port, requests, sent) = counting_server(1024);
    let p = port.to_string();
    let v = run_json(&[
        "http",
        "-H",
        "127.0.0.1",
        "-p",
        &p,
        "--path",
        "/bytes/1024",
        "-c",
        "4",
        "-t",
        "2",
        "-n",
        "500",
    ]);
    assert_eq!(v["test"], "http");
    let h = &v["summary"]["http"];
    assert_eq!(u(&v, "/summary/http/responses"), 500, "{h}");
    assert_eq!(u(&v, "/summary/http/requests_sent"), 500);
    assert_eq!(
        u(&v, "/summary/transactions"),
        500,
        "transactions are completed responses"
    );
    assert_eq!(h["ended"], "count");
    assert_eq!(h["statuses"]["200"], 500);
    assert_eq!(u(&v, "/summary/http/errors/total"), 0);
    assert_eq!(requests.load(Ordering::SeqCst), 500, "the server's count");
    assert_eq!(u(&v, "/summary/http/response_bytes"), sent.load(Ordering::SeqCst));
    assert_eq!(u(&v, "/summary/http/body_bytes"), 500 * 1024);
    assert!(f(&v, "/summary/latency_us/p99") > 0.0);
    assert!(v["summary"]["latency_us"]["histogram"].is_string());

    // --url stands in for -H and -p; the table reads as wrk's.
    let o = run(&[
        "http",
        "--url",
        &format!("http://127.0.0.1:{port}/x"),
        "-c",
        "2",
        "-d",
        "0.5",
        "-i",
        "0.2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "HTTP TEST to 127.0.0.1:",
        "Requests/sec (sent)",
        "Replies/sec",
        "Latency percentiles ms",
        "connrefused",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
}

#[test]
fn http_errors_name_their_cause_and_options_their_bounds() {
    let port = free_port().to_string();
    let v = run_json(&["http", "-H", "127.0.0.1", "-p", &port, "-n", "10", "-c", "1"]);
    assert_eq!(u(&v, "/summary/http/errors/connect_refused"), 10);
    assert!(
        !warnings_about(&v, "connect refused 10").is_empty(),
        "{}",
        v["warnings"]
    );
    assert!(v["summary"]["latency_us"].is_null(), "no response: withheld");
    assert!(v["summary"]["http"]["withheld"]
        .to_string()
        .contains("no response completed"));
    let o = run(&["http", "-H", "127.0.0.1", "-p", &port, "--timeout", "999"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--timeout"), "{}", stderr(&o));
    let o = run(&["http", "-c", "1", "-d", "0.2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("-H"), "without a server: {}", stderr(&o));
}

/// The agent refuses an http spec by name: the kind runs from the client alone.
#[test]
fn an_agent_refuses_the_one_ended_http_kind() {
    let agent = Served::start(&[]);
    let mut raw = Raw::open(agent.port);
    let spec: TestSpec = serde_json::from_value(serde_json::json!({
        "test": {"kind": "http", "path": "/"},
        "limit": {"duration": {"seconds": 1.0}}, "flows": 1}))
    .unwrap();
    raw.send(&ClientMsg::TestRequest { spec, auth: None });
    match raw.next() {
        AgentMsg::TestRejected { reason } => {
            assert!(reason.contains("http runs from the client alone"), "{reason}")
        }
        m => panic!("{m:?}"),
    }
}

struct Nginx {
    child: Child,
    dir: TempDir,
    port: u16,
}

impl Nginx {
    /// nginx (Debian's nginx-light) on a loopback port with `workers`
    /// workers, serving a 1 KiB file, logging status and bytes sent; `None`
    /// when it is not installed.
    fn start(workers: u32) -> Option<Nginx> {
        if !std::path::Path::new("/usr/sbin/nginx").exists() {
            crate::skip::missing("/usr/sbin/nginx is absent (apt-get install nginx-light)");
            return None;
        }
        let dir = TempDir::new("nginx");
        let d = dir.path().display().to_string();
        std::fs::create_dir_all(dir.path().join("www/bytes")).unwrap();
        std::fs::write(dir.path().join("www/bytes/1024"), vec![b'n'; 1024]).unwrap();
        let port = free_port();
        let conf = format!(
            "daemon off; worker_processes {workers}; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ log_format counts '$status $bytes_sent'; access_log {d}/access.log counts;\n\
               client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;\n\
               uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp; keepalive_requests 1000000;\n\
               default_type application/octet-stream;\n\
               server {{ listen 127.0.0.1:{port}; root {d}/www; location / {{ }} }} }}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new("/usr/sbin/nginx")
            .args(["-c", &format!("{d}/nginx.conf"), "-p", &d])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nginx did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Nginx { child, dir, port })
    }

    /// (lines, their status counts, bytes sent) of the access log.
    fn log(&self) -> (u64, std::collections::BTreeMap<String, u64>, u64) {
        let text = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        let mut statuses = std::collections::BTreeMap::new();
        let (mut n, mut bytes) = (0, 0);
        for line in text.lines() {
            let mut w = line.split_whitespace();
            *statuses.entry(w.next().unwrap_or("").to_string()).or_insert(0) += 1;
            bytes += w.next().and_then(|b| b.parse::<u64>().ok()).unwrap_or(0);
            n += 1;
        }
        (n, statuses, bytes)
    }
}

impl Drop for Nginx {
    /// SIGTERM first: nginx's master stops its workers then, where SIGKILL
    /// would leave them running (orphaned, one per test run); SIGKILL only
    /// if it has not exited within 5 s.
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Against nginx, its access log agrees exactly: requests, statuses and
/// bytes, keep-alive and a connection per request, closed and open loop.
#[test]
fn http_against_nginx_agrees_with_its_access_log() {
    let Some(nginx) = Nginx::start(1) else { return };
    let p = nginx.port.to_string();
    let mut want = (0u64, 0u64, 0u64); // responses, 404s, bytes
    for args in [
        vec!["--path", "/bytes/1024", "-c", "8", "-t", "2", "-n", "3000"],
        vec!["--path", "/bytes/1024", "-c", "4", "-n", "300", "--new-conn"],
        vec!["--path", "/missing", "-c", "2", "-n", "50"],
        vec!["--path", "/bytes/1024", "-c", "4", "-R", "400", "-d", "1"],
    ] {
        let mut a = vec!["http", "-H", "127.0.0.1", "-p", &p];
        a.extend(args.iter().copied());
        let v = run_json(&a);
        let h = &v["summary"]["http"];
        assert_eq!(u(&v, "/summary/http/errors/total"), 0, "{args:?}: {h}");
        // The whole run (warm-up and drain included) is what nginx saw.
        let t = &h["total"];
        want.0 += t["responses"].as_u64().unwrap();
        want.1 += h["statuses"]["404"].as_u64().unwrap_or(0);
        want.2 += t["response_bytes"].as_u64().unwrap();
        assert_eq!(t["requests_sent"], t["responses"], "{args:?}");
        if args.contains(&"--new-conn") {
            assert_eq!(u(&v, "/summary/http/connections_opened"), 300);
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let (lines, statuses, bytes) = nginx.log();
    assert_eq!(lines, want.0, "access log lines against responses: {statuses:?}");
    assert_eq!(statuses.get("404").copied().unwrap_or(0), want.1);
    assert_eq!(statuses.get("200").copied().unwrap_or(0), want.0 - want.1);
    assert_eq!(bytes, want.2, "$bytes_sent against the response bytes read");
}

/// A server that answers 404 to everything (a wrong --path): the replies
/// are counted by status class, the headline and summary.transactions are
/// the successful ones (none), a warning says most replies were errors, and
/// a rate sweep against it saturates at its first point (its reply rate is
/// 0 % of the offered one), not a healthy line at y = x.
#[test]
fn replies_are_counted_by_status_class_and_mostly_404_is_named() {
    let srv = crate::http_server::start(&["http-serve", "--bind", "127.0.0.1", "-p", "0", "--threads", "1"]);
    let url = format!("http://{}/no/such/path", srv.addr);
    let v = run_json(&["http", "--url", &url, "-c", "2", "-t", "1", "-d", "1"]);
    let h = &v["summary"]["http"];
    let responses = u(&v, "/summary/http/responses");
    assert!(responses > 10, "{h}");
    assert_eq!(h["statuses"]["404"].as_u64(), Some(responses), "{h}");
    assert_eq!(h["status_classes"]["4xx"].as_u64(), Some(responses), "{h}");
    assert_eq!(h["status_classes"]["2xx"].as_u64(), Some(0), "{h}");
    assert_eq!(u(&v, "/summary/http/success_responses"), 0);
    assert_eq!(u(&v, "/summary/http/non_success_responses"), responses);
    assert_eq!(
        u(&v, "/summary/transactions"),
        0,
        "transactions are the successful replies"
    );
    assert_eq!(f(&v, "/summary/transactions_per_s"), 0.0);
    assert!(
        f(&v, "/summary/http/replies_per_s") > 0.0,
        "every reply is still counted"
    );
    let w = warnings_about(&v, "other than 2xx or 3xx");
    assert!(w.len() == 1 && w[0].contains("404: "), "{}", v["warnings"]);

    let o = run(&["http", "--url", &url, "-c", "2", "-t", "1", "-d", "0.5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "Replies/sec (2xx, 3xx)            0.00",
        "Replies/sec (any)",
        "Non-2xx or 3xx responses",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }

    // The rate sweep follows the successful replies: saturated at once.
    let o = run(&[
        "http", "--url", &url, "-c", "2", "-t", "1", "-d", "0.5", "--rate", "100,200", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let s = &v["tests"][0]["saturation"][0];
    assert_eq!(s["point"], 0, "{}", v["tests"][0]["saturation"]);
    assert!(s["reason"].as_str().unwrap_or("").contains("reply rate"), "{s}");
}

/// HTTPS against netrig's own server with a self-signed certificate: without
/// -k the run stops at once, naming the cause (untrusted issuer) once and
/// the options that change it; with --cacert (curl's name) and the name the
/// certificate holds it runs; so does -k.
#[test]
fn an_untrusted_certificate_is_named_and_stops_the_run() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = std::env::temp_dir().join(format!("netrig-it-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (crt, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    let (crt, key) = (crt.to_str().unwrap(), key.to_str().unwrap());
    let srv = crate::http_server::start(&[
        "http-serve",
        "--bind",
        "127.0.0.1",
        "-p",
        "0",
        "--threads",
        "1",
        "--tls-cert",
        crt,
        "--tls-key",
        key,
    ]);
    let port = srv.addr.port().to_string();
    let url = format!("https://localhost:{port}/bytes/100");
    let t = Instant::now();
    let o = run(&[
        "http",
        "--url",
        &url,
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "20",
    ]);
    let took = t.elapsed();
    let err = stderr(&o);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(
        took < Duration::from_secs(10),
        "it stopped early, not after -d 20: {took:?}"
    );
    assert_eq!(err.matches("untrusted issuer").count(), 1, "named once: {err}");
    assert!(
        err.contains("-k/--insecure") && err.contains("--cacert FILE"),
        "{err}"
    );

    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "--cacert",
        crt,
        "-c",
        "2",
        "-n",
        "20",
    ]);
    assert_eq!(
        u(&v, "/summary/http/success_responses"),
        20,
        "{}",
        v["summary"]["http"]
    );
    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-k",
        "-c",
        "2",
        "-n",
        "20",
    ]);
    assert_eq!(
        u(&v, "/summary/http/success_responses"),
        20,
        "{}",
        v["summary"]["http"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The http kind's witness: its whole run's counts beside this host's
/// kernel (Tcp.ActiveOpens, segments, the loopback's bytes) agree on a
/// normal run; the server host's checks are withheld, saying why, without
/// --server-agent, and made (Tcp.PassiveOpens) with it.
#[test]
fn the_http_witness_checks_the_run_against_the_kernel_and_the_server_host() {
    let srv = crate::http_server::start(&["http-serve", "--bind", "127.0.0.1", "-p", "0", "--threads", "1"]);
    let url = format!("http://{}/bytes/1024", srv.addr);
    let checks = |v: &serde_json::Value| -> Vec<(String, String, String)> {
        v["witness"]["checks"]
            .as_array()
            .expect("witness.checks")
            .iter()
            .map(|c| {
                (
                    c["end"].as_str().unwrap().to_string(),
                    c["kernel_source"].as_str().unwrap().to_string(),
                    c["verdict"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-c",
        "3",
        "-t",
        "1",
        "-n",
        "300",
        "--new-conn",
    ]);
    let c = checks(&v);
    for want in [
        "Tcp.ActiveOpens",
        "Tcp.OutSegs",
        "Tcp.InSegs",
        "lo tx_bytes",
        "lo rx_bytes",
    ] {
        assert!(
            c.iter()
                .any(|(e, s, verdict)| e == "local" && s == want && verdict == "agrees"),
            "{want} missing or not agreeing: {}",
            v["witness"]
        );
    }
    let opens = v["witness"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kernel_source"] == "Tcp.ActiveOpens")
        .unwrap();
    assert_eq!(opens["netrig"], 300, "a connection per request: {opens}");
    let withheld = v["witness"]["withheld"].to_string();
    assert!(
        withheld.contains("server host") && withheld.contains("--server-agent"),
        "{withheld}"
    );
    assert!(warnings_about(&v, "witness").is_empty(), "{}", v["warnings"]);

    let agent = Served::start(&[]);
    let at = format!("127.0.0.1:{}", agent.port);
    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-c",
        "3",
        "-t",
        "1",
        "-n",
        "300",
        "--new-conn",
        "--server-agent",
        &at,
    ]);
    let c = checks(&v);
    assert!(
        c.iter()
            .any(|(e, s, verdict)| e == "remote" && s == "Tcp.PassiveOpens" && verdict == "agrees"),
        "{}",
        v["witness"]
    );
    assert!(v["witness"]["withheld"].is_null(), "{}", v["witness"]);
}

/// `-H` without a port, beside a URL with one: the load goes to the URL's
/// port (the server's), not the agent's default 6387 (which refused it).
#[test]
fn a_host_without_a_port_takes_the_urls_port() {
    let srv = crate::http_server::start(&["http-serve", "--bind", "127.0.0.1", "-p", "0", "--threads", "1"]);
    let url = format!("http://localhost:{}/bytes/16", srv.addr.port());
    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-H",
        "127.0.0.1",
        "-c",
        "1",
        "-t",
        "1",
        "-d",
        "0.3",
    ]);
    assert_eq!(u(&v, "/config/port"), u64::from(srv.addr.port()));
    assert!(
        u(&v, "/summary/http/success_responses") > 0,
        "{}",
        v["summary"]["http"]
    );
    // A port given with -H still wins: nothing answers on port 1.
    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-H",
        "127.0.0.1:1",
        "-c",
        "1",
        "-t",
        "1",
        "-d",
        "0.3",
    ]);
    assert_eq!(u(&v, "/config/port"), 1);
    assert_eq!(
        u(&v, "/summary/http/success_responses"),
        0,
        "{}",
        v["summary"]["http"]
    );
}
