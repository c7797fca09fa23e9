//! `netrig http-serve` and `netrig serve --http-port` as a user runs them, and the hostile case
//! that needs a process of its own: 10,000 idle keep-alive connections (docs/HOSTILE.md).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A netrig process serving HTTP, killed when dropped.
pub(crate) struct HttpProc {
    child: Child,
    pub(crate) addr: SocketAddr,
    /// Its standard error after the startup line, read all along.
    log: std::sync::Arc<std::sync::Mutex<String>>,
    startup: String,
}

impl Drop for HttpProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `netrig ARGS...` and waits (10 s at most) for its HTTP server's startup line.
pub(crate) fn start(args: &[&str]) -> HttpProc {
    let mut child = super::helpers::netrig()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netrig");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let log2 = log.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        let mut sent = false;
        while err.read_line(&mut line).unwrap_or(0) > 0 {
            if !sent && line.contains("HTTP server on ") {
                let _ = tx.send(line.clone());
                sent = true;
            } else {
                log2.lock().unwrap().push_str(&line);
            }
            line.clear();
        }
    });
    let startup = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the HTTP server's startup line within 10 s");
    let addr = startup
        .split("HTTP server on ")
        .nth(1)
        .and_then(|r| r.split(": ").next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {startup:?}"));
    HttpProc {
        child,
        addr,
        log,
        startup,
    }
}

/// GET `path` on `t`; the response's status and body (Content-Length bodies only).
fn get(t: &mut TcpStream, path: &str) -> (u16, Vec<u8>) {
    t.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 16];
        let mut r = httparse::Response::new(&mut hs);
        if let Ok(httparse::Status::Complete(n)) = r.parse(&buf) {
            let len: usize = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .unwrap();
            let status = r.code.unwrap();
            while buf.len() < n + len {
                let k = t.read(&mut chunk).unwrap();
                assert!(k > 0, "closed mid-body");
                buf.extend_from_slice(&chunk[..k]);
            }
            return (status, buf[n..n + len].to_vec());
        }
        let k = t.read(&mut chunk).unwrap();
        assert!(k > 0, "closed mid-head");
        buf.extend_from_slice(&chunk[..k]);
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let t = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    t
}

fn status_kib(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

fn stats(addr: SocketAddr) -> serde_json::Value {
    let (status, body) = get(&mut connect(addr), "/.netrig/stats");
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn http_serve_alone_says_what_it_serves_and_serves_it() {
    let p = start(&[
        "http-serve",
        "--bind",
        "127.0.0.1",
        "-p",
        "0",
        "--threads",
        "2",
        "--max-body",
        "1M",
    ]);
    for words in [
        "2 worker threads",
        "/bytes/N",
        "1048576 bytes, --max-body",
        "--header-timeout",
        "--max-connections",
    ] {
        assert!(p.startup.contains(words), "{words:?} not in {:?}", p.startup);
    }
    let mut t = connect(p.addr);
    let (status, body) = get(&mut t, "/bytes/100000");
    assert_eq!(status, 200);
    assert!(body.iter().enumerate().all(|(i, &b)| b == b'a' + (i % 26) as u8));
    assert_eq!(get(&mut t, "/bytes/1048577").0, 413);
    let s = stats(p.addr);
    assert_eq!(s["requests"], 2);
    assert_eq!(s["responses"]["413"], 1);
}

#[test]
fn serve_with_an_http_port_runs_the_agent_and_the_http_server_together() {
    let agent_port = super::helpers::free_port();
    let p = start(&[
        "serve",
        "--bind",
        "127.0.0.1",
        "-p",
        &agent_port.to_string(),
        "--http-port",
        "0",
        "--threads",
        "1",
        "-q",
    ]);
    assert_eq!(get(&mut connect(p.addr), "/bytes/3"), (200, b"abc".to_vec()));
    // The agent beside it runs a test.
    let out = super::helpers::run(&super::helpers::strs(&super::helpers::at(
        &agent_port.to_string(),
        "tcp-rr -l 0.3",
    )));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn ten_thousand_idle_keepalive_connections_are_held_in_bounded_memory_and_an_honest_client_is_served() {
    const N: usize = 10_000;
    let _many = super::helpers::MANY_SOCKETS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // This process holds the client ends: it needs N descriptors and some.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer; then a valid pointer to an initialised struct.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if lim.rlim_max < (N + 200) as u64 {
        crate::skip::not_here(format!(
            "RLIMIT_NOFILE's hard limit is {} here, under {} (raise it to run this case)",
            lim.rlim_max,
            N + 200
        ));
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };

    let p = start(&[
        "http-serve",
        "--bind",
        "127.0.0.1",
        "-p",
        "0",
        "--threads",
        "2",
        "--max-connections",
        "10100",
    ]);
    let pid = p.child.id();
    // The baseline: after an honest client, once two readings 200 ms apart agree.
    let mut warm = connect(p.addr);
    get(&mut warm, "/bytes/1024");
    drop(warm);
    let mut base = status_kib(pid, "VmRSS:");
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let again = status_kib(pid, "VmRSS:");
        if again == base {
            break;
        }
        base = again;
    }
    let t0 = Instant::now();
    let mut held = Vec::with_capacity(N);
    for _ in 0..N {
        let mut t = connect(p.addr);
        assert_eq!(get(&mut t, "/bytes/1").0, 200);
        held.push(t);
    }
    let opened = t0.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    let rss = status_kib(pid, "VmRSS:");
    let hwm = status_kib(pid, "VmHWM:");
    // An honest client, while all of them are held.
    let t1 = Instant::now();
    let mut honest = connect(p.addr);
    let (status, body) = get(&mut honest, "/bytes/1024");
    let served_in = t1.elapsed();
    assert_eq!((status, body.len()), (200, 1024));
    let s = stats(p.addr);
    let per_conn = (rss.saturating_sub(base) * 1024) as f64 / N as f64;
    eprintln!(
        "{N} idle keep-alive connections (each after one request) held by netrig http-serve (2 workers): \
         VmRSS {base} KiB before, {rss} KiB with them ({per_conn:.0} bytes each), VmHWM {hwm} KiB; \
         opened and answered in {opened:?}; an honest client served in {served_in:?}"
    );
    assert!(s["connections_open"].as_u64().unwrap() >= N as u64, "{s}");
    assert!(
        per_conn < 4096.0,
        "{per_conn:.0} bytes of resident memory per idle connection"
    );
    assert!(
        served_in < Duration::from_secs(1),
        "the honest client waited {served_in:?}"
    );
    drop(held);
    drop(honest);
    let t2 = Instant::now();
    loop {
        let s = stats(p.addr);
        // The stats request's own connection is the one still open.
        if s["connections_open"] == 1 {
            break;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(15),
            "connections still counted open: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!p.log.lock().unwrap().contains("panicked"));
}

/// `--clients 2` (issue #13, item 5): the load from two client processes,
/// each from its own loopback address with half the connections, started
/// together and summed; the sum agrees with each client's part and with
/// the server's own count of the requests it answered.
#[test]
fn two_client_processes_from_their_own_addresses_are_summed_and_agree_with_the_server() {
    let p = start(&["http-serve", "--bind", "127.0.0.1", "-p", "0", "--threads", "1"]);
    let port = p.addr.port().to_string();
    let out = super::helpers::run(&[
        "http",
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "--path",
        "/bytes/100",
        "-c",
        "4",
        "-t",
        "2",
        "-d",
        "1",
        "--clients",
        "2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON result");
    let h = &v["summary"]["http"];
    let clients = h["clients"].as_array().expect("each client's part");
    assert_eq!(clients.len(), 2);
    let addrs: Vec<&str> = clients.iter().map(|c| c["address"].as_str().unwrap()).collect();
    assert_eq!(addrs, ["127.0.0.1", "127.0.0.2"]);
    for c in clients {
        assert_eq!(c["connections"], 2, "{c}");
        assert!(c["responses"].as_u64().unwrap() > 0, "{c}");
    }
    let parts: u64 = clients.iter().map(|c| c["responses"].as_u64().unwrap()).sum();
    assert_eq!(h["responses"].as_u64().unwrap(), parts);
    assert_eq!(v["summary"]["transactions"].as_u64().unwrap(), parts);
    // The sum is not judged against client 0's kernel readings, and says why.
    assert!(v["witness"]["checks"].as_array().unwrap().is_empty());
    assert!(
        v["witness"]["withheld"].to_string().contains("--clients"),
        "{}",
        v["witness"]
    );
    assert_eq!(h["connections"], 4);
    // The server answered every request of the whole run (the window's, the
    // warm-up's and the drain's) as the clients counted them, byte for byte
    // (its stats request is counted once answered, after this reading).
    let s = stats(p.addr);
    let t = &h["total"];
    assert_eq!(
        s["requests"], t["requests_sent"],
        "server {s} against the clients' {t}"
    );
    assert_eq!(
        s["responses"]["200"], t["responses"],
        "server {s} against the clients' {t}"
    );
    assert_eq!(
        s["bytes_sent"], t["response_bytes"],
        "server {s} against the clients' {t}"
    );
    assert_eq!(
        s["connections_accepted"].as_u64().unwrap(),
        t["connections_opened"].as_u64().unwrap() + 1
    );
    super::helpers::validate(&v);
}

/// `--clients`: a parent killed mid-run (SIGKILL: no clean-up of its own)
/// takes its client processes with it, instead of leaving their load running.
#[test]
fn client_processes_die_with_their_parent() {
    let p = start(&["http-serve", "--bind", "127.0.0.1", "-p", "0", "--threads", "1"]);
    let port = p.addr.port().to_string();
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_netrig"))
        .args([
            "http",
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "30",
            "--clients",
            "2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let children = |pid: u32| -> Vec<u32> {
        let path = format!("/proc/{pid}/task/{pid}/children");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut kids = Vec::new();
    while Instant::now() < deadline {
        kids = children(parent.id());
        if kids.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(kids.len(), 2, "the two client processes never started");
    parent.kill().unwrap();
    parent.wait().unwrap();
    let alive = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while kids.iter().any(alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<&u32> = kids.iter().filter(|k| alive(k)).collect();
    for k in &left {
        // SAFETY: kill(2) on a pid this test saw as the parent's child.
        unsafe { libc::kill(**k as i32, libc::SIGKILL) };
    }
    assert!(
        left.is_empty(),
        "client processes {left:?} outlived their killed parent"
    );
}
