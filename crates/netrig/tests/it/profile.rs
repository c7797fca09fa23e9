//! `--profile` (docs/PROFILE.md): a real loopback test sampled over its window, its groups,
//! top functions and witness in the result; the agent's end profiled when its operator allows
//! it (`netrig serve --allow-profile`), withheld with its reason otherwise, or where its host
//! refuses, or when its report breaks a bound; no `profile` without the option.

use crate::helpers::*;
use serde_json::Value;

/// The agent's end when its operator did not allow a profile.
const REMOTE_WITHHELD: &str =
    "profile withheld: the agent's operator did not allow profiles (netrig serve --allow-profile)";

/// The local end's profile; None (said as a skip, after its reason is checked) where this
/// host refuses a system-wide profile.
fn local_profile(v: &Value) -> Option<&Value> {
    let p = &v["profile"];
    assert_eq!(p["remote"]["withheld"], REMOTE_WITHHELD, "{}", p["remote"]);
    end_profile(p, "local", "profile withheld: ")
}

/// One end's profile; None (said as a skip, after its reason is checked: the sampler's own
/// words, after `prefix`) where that end's host refuses a system-wide profile.
fn end_profile<'a>(p: &'a Value, end: &str, prefix: &str) -> Option<&'a Value> {
    let e = &p[end];
    if let Some(why) = e["withheld"].as_str() {
        assert!(sampler_words(why, prefix), "{end}: {why}");
        crate::skip::not_here(format!("this host refuses a profile ({end} end): {why}"));
        return None;
    }
    Some(e)
}

/// The sampler's own words, after `prefix`: which setting refused it.
fn sampler_words(why: &str, prefix: &str) -> bool {
    why.starts_with(prefix)
        && [
            "perf_event_paranoid",
            "kptr_restrict",
            "not available",
            "perf_event_open",
        ]
        .iter()
        .any(|w| why.contains(w))
}

/// No frame of the profile is an address: names only.
fn names_only(local: &Value) {
    let frames = local["folded"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["stack"].as_str().unwrap().split(';').map(str::to_string))
        .chain(
            local["top_functions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap().to_string()),
        );
    for f in frames {
        let hexish = f.starts_with("0x") || (f.len() >= 8 && f.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(!hexish, "a frame looks like an address: {f}");
    }
}

fn group<'a>(local: &'a Value, name: &str) -> &'a Value {
    local["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == name)
        .unwrap_or_else(|| panic!("no group {name}: {}", local["groups"]))
}

/// The sum of `key` over the groups that have it (idle has no share or demand).
fn groups_sum(local: &Value, key: &str) -> f64 {
    local["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g[key].as_f64())
        .sum()
}

fn top_names(local: &Value) -> Vec<String> {
    local["top_functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_stream_profile_names_tcp_and_the_copy_and_agrees_with_proc_stat() {
    let agent = Served::start(&[]);
    let port = agent.port_arg();
    let v = run_json(&strs(&at(&port, "tcp-stream -l 2.5 --omit 0.5 --profile")));
    let Some(local) = local_profile(&v) else { return };
    let (samples, window) = (u(local, "/samples"), f(local, "/window_s"));
    eprintln!(
        "profile: {samples} samples over {window:.2} s; witness {}",
        local["witness"]
    );
    // Sampled over the measured window (2 s after the omitted 0.5 s), not the set-up, the
    // omitted start or the agent's results.
    assert!(
        (window - f(&v, "/summary/elapsed_s")).abs() < 0.1,
        "{window} against {}",
        v["summary"]
    );
    let tcp = group(local, "tcp");
    eprintln!("tcp: {tcp}; memory-copy: {}", group(local, "memory-copy"));
    assert!(f(tcp, "/share_of_busy_pct") > 0.0, "{tcp}");
    assert!(f(tcp, "/demand") > 0.0, "{tcp}");
    assert_eq!(local["demand_unit"], "us/KB");
    let top = top_names(local);
    eprintln!("top: {:?}", &top[..top.len().min(10)]);
    assert!(
        top.iter().any(|n| n.starts_with("tcp_") || n.contains("copy")),
        "{top:?}"
    );
    names_only(local);
    // Every busy sample is in one group; the shares of busy sum to 100.
    let shares = groups_sum(local, "share_of_busy_pct");
    assert!((shares - 100.0).abs() < 0.01, "{shares}");
    let ratio = f(local, "/witness/ratio");
    assert!((0.5..=1.5).contains(&ratio), "witness {}", local["witness"]);
    // Judged: within 5 %, or within what /proc/stat's ticks resolve over this window where that
    // is wider; never a disagreement on a stream that keeps both CPUs busy.
    let w = &local["witness"];
    assert!(w["band_pct"].as_f64().unwrap() >= 5.0, "{w}");
    assert!(
        ["agrees", "unresolved"].contains(&w["verdict"].as_str().unwrap()),
        "{w}"
    );
    // The kernel's own count of the receive work: NET_RX softirqs ran in the window.
    assert!(
        local["softirqs"]["net_rx"].as_u64().unwrap() > 0,
        "{}",
        local["softirqs"]
    );
    // Without --profile: no profile key at all.
    let plain = run_json(&strs(&at(&port, "tcp-stream -l 0.3")));
    assert!(plain.get("profile").is_none(), "{}", plain["profile"]);
    // An experiment's runs are profiled too (docs/PROFILE.md, "Experiments"): each run keeps
    // its figures, the arm its stacks merged.
    let o = run(&strs(&at(
        &port,
        "tcp-stream -l 0.3 --iterations 2 --profile --json",
    )));
    assert!(o.status.success(), "{}", stderr(&o));
    let e: Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::experiment::validate_experiment(&e);
    let arm = &e["tests"][0]["points"][0]["arms"][0];
    assert_eq!(arm["profile"]["local"]["profiled_runs"], 2, "{}", arm["profile"]);
    for r in arm["runs"].as_array().unwrap() {
        assert!(r["profile"]["local"]["groups"].is_array(), "{}", r["profile"]);
    }
}

#[test]
fn a_crr_profile_names_the_connection_set_up_and_tear_down() {
    let agent = Served::start(&[]);
    let port = agent.port_arg();
    let v = run_json(&strs(&at(&port, "tcp-crr -l 2 --profile")));
    let Some(local) = local_profile(&v) else { return };
    assert_eq!(local["demand_unit"], "us/tran");
    let top = top_names(local);
    let paths = [
        "tcp_v4_connect",
        "__inet_hash_connect",
        "inet_stream_connect",
        "inet_csk_accept",
        "tcp_time_wait",
        "tcp_close",
        "tcp_conn_request",
        "tcp_v4_syn_recv_sock",
    ];
    let found: Vec<(usize, &String)> = top
        .iter()
        .enumerate()
        .filter(|(_, n)| paths.contains(&n.as_str()))
        .collect();
    eprintln!(
        "crr: set-up/tear-down among the top {}: {found:?}; witness {}",
        top.len(),
        local["witness"]
    );
    assert!(!found.is_empty(), "{top:?}");
    assert!(f(group(local, "tcp"), "/demand") > 0.0);
    names_only(local);
}

/// netrig run as uid nobody without capabilities (through setpriv), from a copy nobody may
/// run (the build's own directory may not be open to it); None (said as a skip) where this
/// test cannot drop privileges.
struct Nobody {
    _dir: TempDir,
    exe: std::path::PathBuf,
}

impl Nobody {
    fn new(name: &str) -> Option<Nobody> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let setpriv = std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok();
        if !root || !setpriv {
            crate::skip::not_here("dropping privileges needs root and setpriv");
            return None;
        }
        let dir = TempDir::new(name);
        let exe = dir.path().join("netrig");
        std::fs::copy(env!("CARGO_BIN_EXE_netrig"), &exe).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(Nobody { _dir: dir, exe })
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ]);
        cmd.arg(&self.exe);
        cmd
    }
}

/// A client without the privileges a system-wide profile needs (uid nobody, no capabilities,
/// through setpriv): the test runs, and its local profile is withheld in the sampler's words.
#[test]
fn an_unprivileged_client_gets_the_reason_its_profile_is_withheld() {
    let Some(nobody) = Nobody::new("profile-nobody") else {
        return;
    };
    let agent = Served::start(&[]);
    let cmd = nobody.command();
    let port = agent.port_arg();
    let args = at(&port, "tcp-stream -l 0.3 --profile --json");
    let o = run_cmd(cmd, &strs(&args));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&v);
    let why = v["profile"]["local"]["withheld"]
        .as_str()
        .unwrap_or_else(|| panic!("profiled without privileges: {}", v["profile"]));
    eprintln!("unprivileged: {why}");
    assert!(
        why.starts_with("profile withheld: ")
            && (why.contains("kptr_restrict") || why.contains("perf_event_paranoid")),
        "{why}"
    );
    assert_eq!(v["profile"]["remote"]["withheld"], REMOTE_WITHHELD);
}

/// `--profile --html`: the report's "Profile" section draws the local end's flame graph from
/// the run's own folded stacks (a real kernel function among its frames, its title the JSON's
/// count) and says in words why the agent's end has none; the page renders without a script
/// error in a browser.
#[test]
fn the_html_report_draws_the_local_flame_graph_and_says_why_the_remote_has_none() {
    let agent = Served::start(&[]);
    let port = agent.port_arg();
    let tmp = TempDir::new("profile-html");
    let page = tmp.path().join("run.html");
    let mut args = at(&port, "tcp-stream -l 1 --profile --html");
    args.push(page.to_str().unwrap().to_string());
    let v = run_json(&strs(&args));
    let html = std::fs::read_to_string(&page).unwrap();
    let remote = REMOTE_WITHHELD.replace('\'', "&#39;");
    assert!(
        html.contains(&format!(
            "<strong>remote (agent)</strong>: no flame graph: {remote}</p>"
        )),
        "{}",
        &html[html.find("<h2>Profile</h2>").expect("a Profile section")..][..2000]
    );
    let Some(local) = local_profile(&v) else { return };
    let fig = html
        .find("<figure class=\"flame\" id=\"flame-local\"><svg class=\"flamegraph\"")
        .expect("the local end's flame graph");
    let fig = fig + html[fig..].find("<svg").unwrap();
    let svg = &html[fig..fig + html[fig..].find("</figure>").unwrap()];
    // The title counts what the result counts.
    let title = format!(
        "local (client): {} samples of every CPU at 999 Hz over",
        u(local, "/samples")
            .to_string()
            .as_bytes()
            .rchunks(3)
            .rev()
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join(",")
    );
    assert!(
        svg.contains(&title),
        "{title} not in {}",
        &svg[..svg.len().min(1500)]
    );
    // A kernel function of the sender's path is a frame, with its samples in its tooltip.
    let frames: Vec<&str> = ["tcp_sendmsg", "tcp_sendmsg_locked", "tcp_recvmsg"]
        .into_iter()
        .filter(|n| svg.contains(&format!("<title>{n} (")))
        .collect();
    eprintln!("flame graph: {} bytes; frames found: {frames:?}", svg.len());
    assert!(frames.contains(&"tcp_sendmsg"), "{frames:?}");
    assert!(!svg.contains("<script") && !svg.contains(" id=\""));
    // Without --profile: no section.
    let plain_page = tmp.path().join("plain.html");
    let mut plain = at(&port, "tcp-stream -l 0.2 --html");
    plain.push(plain_page.to_str().unwrap().to_string());
    let o = run(&strs(&plain));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!std::fs::read_to_string(&plain_page)
        .unwrap()
        .contains("<h2>Profile</h2>"));
    // In a browser: every plot drawn, no console error (the graph has no script of its own).
    crate::report::check_in_browser(&page, html.matches("<figure class=\"plot\"").count());
}

/// An agent whose operator allows profiles (`--allow-profile`): the result's `remote` is the
/// agent's own profile of its host over its window, names only, within the wire's bounds; its
/// top functions name TCP's receive path (the agent receives a tcp-stream) and its groups have
/// demand per KB the agent received. Without the option, the same test's remote end is withheld
/// naming it.
#[test]
fn an_agent_allowed_to_profile_sends_its_end() {
    let agent = Served::start(&["--allow-profile"]);
    let port = agent.port_arg();
    let v = run_json(&strs(&at(&port, "tcp-stream -l 2.5 --omit 0.5 --profile")));
    let Some(remote) = end_profile(&v["profile"], "remote", "profile withheld on the agent's host: ") else {
        return;
    };
    let top = top_names(remote);
    eprintln!(
        "remote: {} samples over {:.2} s, {} of {} stacks; top {:?}; witness {}",
        remote["samples"],
        f(remote, "/window_s"),
        remote["folded"].as_array().unwrap().len(),
        remote["folded_total"],
        &top[..top.len().min(12)],
        remote["witness"]
    );
    let receive = [
        "tcp_recvmsg",
        "tcp_recvmsg_locked",
        "tcp_rcv_established",
        "tcp_v4_rcv",
    ];
    assert!(top.iter().any(|n| receive.contains(&n.as_str())), "{top:?}");
    assert_eq!(remote["demand_unit"], "us/KB");
    let tcp = group(remote, "tcp");
    assert!(
        f(tcp, "/share_of_busy_pct") > 0.0 && f(tcp, "/demand") > 0.0,
        "{tcp}"
    );
    // The agent's window: the measured one, as the client's (both ends' marks, within margins).
    let window = f(remote, "/window_s");
    assert!((window - 2.0).abs() < 0.3, "{window}");
    names_only(remote);
    // The wire's bounds (netrig_proto::report::profile::bounds).
    assert!(remote["folded"].as_array().unwrap().len() <= 500);
    assert!(top.len() <= 100 && top.iter().all(|n| n.len() <= 256));
    assert!(u(remote, "/busy_samples") <= u(remote, "/samples"));
    // The table shows the remote end's profile beside the local one.
    let table = stdout(&run(&strs(&at(&port, "tcp-stream -l 0.5 --profile"))));
    assert!(
        table.contains("remote ") && table.contains("samples over"),
        "{table}"
    );

    // The same test against an agent without the option: its end withheld, naming it.
    let plain = Served::start(&[]);
    let v = run_json(&strs(&at(&plain.port_arg(), "tcp-stream -l 0.5 --profile")));
    let why = v["profile"]["remote"]["withheld"].as_str().unwrap_or_default();
    assert_eq!(why, REMOTE_WITHHELD);
    assert!(why.contains("--allow-profile"));
}

/// An agent allowed to profile that its host does not let sample (uid nobody, no capabilities,
/// through setpriv): the test runs, and the remote end is withheld in the sampler's words, said
/// as the agent's host's.
#[test]
fn an_unprivileged_agent_gives_the_reason_its_end_is_withheld() {
    let Some(nobody) = Nobody::new("profile-nobody-agent") else {
        return;
    };
    let agent = Served::launch(|| nobody.command(), &["--allow-profile"]);
    let v = run_json(&strs(&at(&agent.port_arg(), "tcp-stream -l 0.5 --profile")));
    let why = v["profile"]["remote"]["withheld"]
        .as_str()
        .unwrap_or_else(|| panic!("an unprivileged agent profiled: {}", v["profile"]["remote"]));
    eprintln!("unprivileged agent: {why}");
    assert!(
        sampler_words(why, "profile withheld on the agent's host: ")
            && (why.contains("kptr_restrict") || why.contains("perf_event_paranoid")),
        "{why}"
    );
}

/// What a tampering relay does to the agent's profile (its report's `profile`).
type Tamper = fn(&mut Value);

/// A relay between the client and a real agent that passes everything through but the
/// agent's `results` message, whose report it changes with `tamper`: an agent that says what
/// the test wants. The first connection is the control connection (the client opens it first);
/// the others, data connections, pass as they are. It serves for 30 s at most.
fn tampering_relay(agent_port: u16, tamper: Tamper) -> u16 {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let pass = |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
        })
    };
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut control = true;
        while std::time::Instant::now() < deadline {
            let Ok((client, _)) = l.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            };
            client.set_nonblocking(false).unwrap();
            let agent = TcpStream::connect(("127.0.0.1", agent_port)).unwrap();
            pass(client.try_clone().unwrap(), agent.try_clone().unwrap());
            if !std::mem::take(&mut control) {
                pass(agent, client);
                continue;
            }
            // The agent's frames to the client, the results changed.
            let (mut from, mut to) = (agent, client);
            std::thread::spawn(move || {
                let mut len = [0u8; 4];
                while from.read_exact(&mut len).is_ok() {
                    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                    if from.read_exact(&mut body).is_err() {
                        break;
                    }
                    let mut v: Value = serde_json::from_slice(&body).unwrap();
                    if v["type"] == "results" {
                        tamper(&mut v["report"]["profile"]);
                        body = serde_json::to_vec(&v).unwrap();
                    }
                    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
                    frame.extend_from_slice(&body);
                    if to.write_all(&frame).is_err() {
                        break;
                    }
                }
                let _ = to.shutdown(Shutdown::Write);
            });
        }
    });
    port
}

/// docs/HOSTILE.md #61: an agent whose report's profile is past a bound the client holds it to
/// (more busy samples than samples; more folded stacks than an agent sends): the test's result
/// stands, and the agent's end is withheld naming the field and the bound.
#[test]
fn an_agents_profile_past_a_bound_is_withheld_naming_it() {
    let agent = Served::start(&["--allow-profile"]);
    let cases: [(Tamper, &str); 2] = [
        (
            |p| p["busy_samples"] = Value::from(p["samples"].as_u64().unwrap_or(0) + 1),
            "busy_samples is ",
        ),
        (
            |p| {
                let one = serde_json::json!({"stack": "netrig;tcp_recvmsg", "samples": 0});
                p["folded"] = Value::Array(vec![one; 501]);
                p["folded_total"] = Value::from(501);
            },
            "folded has 501, over the 500 an agent sends",
        ),
    ];
    for (tamper, words) in cases {
        let relay = tampering_relay(agent.port, tamper);
        let v = run_json(&strs(&at(&relay.to_string(), "tcp-stream -l 0.5 --profile")));
        assert!(u(&v, "/summary/bytes") > 0, "{}", v["summary"]);
        let remote = &v["profile"]["remote"];
        if let Some(why) = remote["withheld"]
            .as_str()
            .filter(|w| w.starts_with("profile withheld on"))
        {
            crate::skip::not_here(format!("this host refuses a profile (remote end): {why}"));
            return;
        }
        let why = remote["withheld"]
            .as_str()
            .unwrap_or_else(|| panic!("a profile past a bound was taken: {remote}"));
        eprintln!("past a bound: {why}");
        assert!(
            why.contains(words) && why.contains("the agent's profile is past a bound the client holds it to"),
            "{words}: {why}"
        );
    }
}

/// `http --profile` against netrig's own HTTP server on this host: this host sampled over the
/// load's measured window (after --omit), its demand per successful response ("us/tran", as the
/// result's own service demand counts them, which the busy groups' demands add up to); the
/// server's end withheld, saying why (it is any HTTP server, not netrig's agent).
#[test]
fn an_http_load_profiles_this_host_over_its_window() {
    let port = free_port().to_string();
    let srv =
        crate::http_server::start(&["http-serve", "--bind", "127.0.0.1", "-p", &port, "--threads", "1"]);
    let url = format!("http://{}/bytes/1024", srv.addr);
    let v = run_json(&[
        "http",
        "--url",
        &url,
        "-c",
        "4",
        "-t",
        "1",
        "-l",
        "2",
        "--omit",
        "0.5",
        "--profile",
    ]);
    let p = &v["profile"];
    let remote = p["remote"]["withheld"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", p["remote"]));
    assert!(
        remote.starts_with("profile withheld: the server of an http test is not netrig's agent"),
        "{remote}"
    );
    let Some(local) = end_profile(p, "local", "profile withheld: ") else {
        return;
    };
    let (samples, window) = (u(local, "/samples"), f(local, "/window_s"));
    eprintln!(
        "http profile: {samples} samples over {window:.2} s; witness {}",
        local["witness"]
    );
    assert!(samples > 0);
    // The load's measured window (1.5 s after the omitted 0.5 s), not its warm-up or drain.
    let measured = f(&v, "/summary/http/window_s");
    assert!((window - measured).abs() < 0.1, "{window} against {measured}");
    assert_eq!(local["demand_unit"], "us/tran");
    let tcp = group(local, "tcp");
    assert!(f(tcp, "/demand") > 0.0, "{tcp}");
    let top = top_names(local);
    eprintln!("top: {:?}", &top[..top.len().min(12)]);
    assert!(
        top.iter().any(|n| n == "tcp_sendmsg" || n == "tcp_recvmsg"),
        "{top:?}"
    );
    names_only(local);
    let w = &local["witness"];
    let ratio = f(local, "/witness/ratio");
    assert!((0.5..=1.5).contains(&ratio), "witness {w}");
    assert!(w["verdict"].is_string(), "{w}");
    // The busy groups' demands add up to the sampled share of the result's service demand
    // (/proc/stat's busy time per successful response): their ratio is the witness's.
    let demands = groups_sum(local, "demand");
    let sd = f(&v, "/summary/service_demand/local");
    assert!(
        (demands / sd - ratio).abs() < 0.1,
        "groups' demands {demands} against the service demand {sd} (witness ratio {ratio})"
    );
    // The table shows it as for other kinds.
    let o = run(&[
        "http",
        "--url",
        &url,
        "-c",
        "2",
        "-t",
        "1",
        "-l",
        "0.5",
        "--profile",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("Profile: where each host's busy CPU went") && table.contains("us/tran"),
        "{table}"
    );
    assert!(
        table.contains("remote  withheld: profile withheld: the server of an http test"),
        "{table}"
    );
}
