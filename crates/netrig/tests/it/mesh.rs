//! `netrig mesh` (issue #43): agents in network namespaces on one bridge, each with the fleet's
//! key, tested against each other by agent-to-agent tests (protocol 8's `initiate`), found in a
//! real DNS server (Debian's dnsmasq, in the orchestrator's namespace) serving the SRV and A
//! records a Kubernetes headless Service would. The same code paths a pod takes: the agents
//! listen on their pod-like addresses, the orchestrator asks DNS, then the agents.

use crate::helpers::{netrig, Netns, NETRIG_LOG};
use crate::lab::{output_in, veth};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The service's names, as a cluster's DNS would publish them.
const SRV: &str = "_netrig._tcp.netrig-agents.netrig.svc.cluster.local";
const A_NAME: &str = "netrig-agents.netrig.svc.cluster.local";

/// A child killed on drop (agents, dnsmasq, an HTTP server).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Hosts on one bridge (10.78.0.0/24): agents `h0`.. at .1.., the orchestrator `o` at .100.
struct Fleet {
    br: Netns,
    o: Netns,
    hosts: Vec<Netns>,
    dir: PathBuf,
    kids: Vec<Kid>,
}

fn ip(i: usize) -> String {
    format!("10.78.0.{}", i + 1)
}

impl Fleet {
    fn build(tag: &str, n: usize) -> Result<Fleet, String> {
        let br = Netns::create(&format!("{tag}br"))?;
        br.exec(&["ip", "link", "add", "br0", "type", "bridge"])?;
        br.exec(&["ip", "link", "set", "br0", "up"])?;
        let join = |ns: &Netns, port: &str, address: &str| -> Result<(), String> {
            veth(ns, "eth0", &br, port)?;
            br.exec(&["ip", "link", "set", port, "master", "br0"])?;
            ns.exec(&["ip", "addr", "add", &format!("{address}/24"), "dev", "eth0"])
        };
        let o = Netns::create(&format!("{tag}o"))?;
        join(&o, "vo", "10.78.0.100")?;
        let mut hosts = Vec::new();
        for i in 0..n {
            let h = Netns::create(&format!("{tag}h{i}"))?;
            h.exec(&["ip", "link", "set", "lo", "up"])?;
            join(&h, &format!("v{i}"), &ip(i))?;
            hosts.push(h);
        }
        let dir = std::env::temp_dir().join(format!("netrig-mesh-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for k in ["agent", "orch", "stranger"] {
            let o = netrig()
                .args(["keygen", "-o"])
                .arg(dir.join(k))
                .output()
                .map_err(|e| e.to_string())?;
            if !o.status.success() {
                return Err(format!("keygen: {}", String::from_utf8_lossy(&o.stderr)));
            }
        }
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        std::fs::write(dir.join("authorized"), read("orch.pub") + &read("agent.pub")).unwrap();
        Ok(Fleet {
            br,
            o,
            hosts,
            dir,
            kids: Vec::new(),
        })
    }

    fn path(&self, f: &str) -> String {
        self.dir.join(f).display().to_string()
    }

    /// `netrig serve` in host `i`, with the fleet's keys and `extra`, waited for.
    fn serve(&mut self, i: usize, extra: &[&str]) {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.hosts[i].0,
            env!("CARGO_BIN_EXE_netrig"),
            "serve",
            "-q",
        ])
        .args([
            "--key",
            &self.path("agent"),
            "--authorized-keys",
            &self.path("authorized"),
        ])
        .args(["--name", &format!("node-{i}")])
        .args(extra)
        .env("RUST_LOG", NETRIG_LOG)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        self.kids.push(Kid(c.spawn().expect("spawn netrig serve")));
        listening(&self.hosts[i], 6387);
    }

    /// dnsmasq in the orchestrator's namespace, on its loopback, with the records a headless
    /// Service `netrig-agents` in namespace `netrig` publishes for the first `n` agents.
    fn dns(&mut self, n: usize) -> bool {
        let Some(dnsmasq) = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            crate::skip::missing("needs dnsmasq (Debian's dnsmasq-base) for the DNS records of the agents");
            return false;
        };
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.o.0, dnsmasq])
            .args([
                "-d",
                "-k",
                "--port",
                "53",
                "--listen-address",
                "127.0.0.1",
                "--bind-interfaces",
            ])
            .args([
                "--no-resolv",
                "--no-hosts",
                "-C",
                "/dev/null",
                "--user=root",
                "--pid-file=",
            ])
            // Authoritative for the cluster's domain, as its DNS is: NODATA, never REFUSED.
            .arg("--local=/cluster.local/");
        for i in 0..n {
            // The pod's own name under the service, as Kubernetes writes it (10-78-0-1.SERVICE).
            let pod = format!(
                "{}.netrig-agents.netrig.svc.cluster.local",
                ip(i).replace('.', "-")
            );
            c.arg(format!("--host-record={pod},{}", ip(i)));
            c.arg(format!("--srv-host={SRV},{pod},6387,0,{}", 100 / n));
            c.arg(format!("--host-record={A_NAME},{}", ip(i)));
        }
        c.stdout(Stdio::null()).stderr(Stdio::null());
        self.kids.push(Kid(c.spawn().expect("spawn dnsmasq")));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let o = output_in(&self.o, &["ss", "-Huln", "sport", "= :53"]);
            if !o.stdout.is_empty() {
                return true;
            }
            assert!(Instant::now() < deadline, "dnsmasq did not listen within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `netrig mesh ARGS` in the orchestrator's namespace, with its key.
    fn mesh(&self, args: &[&str]) -> std::process::Output {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.o.0, env!("CARGO_BIN_EXE_netrig"), "mesh"])
            .args([
                "--key",
                &self.path("orch"),
                "--agent-key",
                &self.path("agent.pub"),
            ])
            .args(args)
            .env("RUST_LOG", NETRIG_LOG);
        c.output().expect("netrig mesh")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.kids.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = &self.br;
    }
}

fn listening(ns: &Netns, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = output_in(ns, &["ss", "-Htln", "sport", &format!("= :{port}")]);
        if !o.stdout.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing listened on {port} in {} within 10 s",
            ns.0
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}); status {:?}; stderr: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

macro_rules! fleet_or_skip {
    ($tag:expr, $n:expr) => {
        match Fleet::build($tag, $n) {
            Ok(f) => f,
            Err(e) => {
                crate::skip::missing(format!("needs root, iproute2, bridges and veth ({e})"));
                return;
            }
        }
    };
}

#[test]
fn a_full_mesh_of_five_agents_found_in_dns_runs_in_five_rounds_every_pair_once() {
    let mut f = fleet_or_skip!("mf", 5);
    for i in 0..5 {
        f.serve(i, &["--allow-initiate", "10.78.0.0/24"]);
    }
    if !f.dns(5) {
        return;
    }
    // A records: the names and the schedule, nothing run.
    let o = f.mesh(&[
        "--discover",
        A_NAME,
        "--dns-server",
        "127.0.0.1",
        "--list",
        "--",
        "tcp-stream",
    ]);
    let listed = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for i in 0..5 {
        assert!(listed.contains(&format!("{}:6387", ip(i))), "{listed}");
    }
    assert_eq!(
        listed.lines().filter(|l| l.starts_with("round ")).count(),
        5,
        "{listed}"
    );
    // SRV records: the mesh itself, 2 s tests, with its HTML heat map.
    let html = f.dir.join("mesh.html");
    let o = f.mesh(&[
        "--discover",
        SRV,
        "--dns-server",
        "127.0.0.1",
        "--json",
        "--html",
        &html.display().to_string(),
        "--",
        "tcp-stream",
        "-l",
        "2",
    ]);
    let d = json(&o);
    assert!(o.status.success(), "{d}\n{}", String::from_utf8_lossy(&o.stderr));
    let hosts = d["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 5, "{d}");
    let mut labels: Vec<&str> = hosts.iter().map(|h| h["label"].as_str().unwrap()).collect();
    labels.sort();
    assert_eq!(labels, ["node-0", "node-1", "node-2", "node-3", "node-4"]);
    let rounds = d["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 5, "a full mesh of 5 takes 5 rounds: {d}");
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 10, "every pair once: {d}");
    let mut pairs = HashSet::new();
    for r in rounds {
        let in_round: Vec<usize> = r["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(in_round.len(), 2, "two tests a round: {r}");
        let mut busy = HashSet::new();
        for &c in &in_round {
            let cell = &cells[c];
            for end in ["client", "server"] {
                assert!(
                    busy.insert(cell[end].as_u64().unwrap()),
                    "a host in two tests of a round: {r}"
                );
            }
        }
    }
    for c in cells {
        assert!(c.get("error").is_none(), "{c}");
        let (a, b) = (c["client"].as_u64().unwrap(), c["server"].as_u64().unwrap());
        assert!(pairs.insert((a.min(b), a.max(b))), "pair tested twice: {c}");
        // The cell's figure is its result's, and the result is a whole netrig result.
        let t = c["throughput_bps"].as_f64().unwrap();
        assert!(t > 1e6, "{c}");
        assert_eq!(c["result"]["summary"]["throughput_bps"].as_f64(), Some(t));
        assert_eq!(c["result"]["test"], "tcp-stream");
        // The client agent ran it: its address is the client's end of the result.
        let agent = c["result"]["agent"]["address"].as_str().unwrap_or_default();
        let server_ip = ip(b as usize);
        assert!(
            agent.contains(&server_ip),
            "the test went to the server's address: {agent} vs {server_ip}"
        );
        assert!(c["clock_bound_ms"].as_f64().is_some(), "{c}");
    }
    // The matrix in every output: JSON above, the table and CSV from the same document, and
    // the HTML heat map the run wrote.
    let doc: netrig_fleet::matrix::MeshDocument = serde_json::from_value(d.clone()).unwrap();
    let table = netrig_fleet::render::table(&doc);
    let csv = netrig_fleet::render::csv(&doc);
    assert!(table.contains("node-0") && table.contains("node-4"), "{table}");
    assert_eq!(csv.lines().count(), 11, "a header and a row per test: {csv}");
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(page.contains("node-3") && page.contains("<table"), "the heat map");
}

#[test]
fn a_star_of_four_clients_to_one_server_starts_together_and_says_its_skew() {
    let mut f = fleet_or_skip!("ms", 5);
    for i in 0..5 {
        f.serve(i, &["--allow-initiate", "10.78.0.0/24"]);
    }
    let hosts: Vec<String> = (0..5).map(ip).collect();
    let mut args: Vec<&str> = hosts.iter().map(String::as_str).collect();
    args.extend([
        "--pattern",
        "star",
        "--server",
        "10.78.0.5",
        "--json",
        "--",
        "tcp-rr",
        "-l",
        "2",
        // Open loop at 2,000 a second each, sleeping between requests: five hosts' tests on this host's two CPUs would
        // otherwise start CPU-bound, the later clients' wake-ups queued behind the first ones'
        // workers (3 to 10 ms measured with closed-loop tcp-rr), which is this host, not the start.
        "--rate",
        "2000",
        "--spin-us",
        "0",
    ]);
    let o = f.mesh(&args);
    let d = json(&o);
    assert!(o.status.success(), "{d}\n{}", String::from_utf8_lossy(&o.stderr));
    let rounds = d["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "a star's clients start together: {d}");
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["server"], 4);
        assert!(c["transactions_per_s"].as_f64().unwrap() > 10.0, "{c}");
        assert!(c["latency_p50_us"].as_f64().is_some(), "{c}");
        // Its start against the agreed instant, on the orchestrator's clock.
        let off = c["start_offset_ms"].as_f64().expect("a start offset");
        assert!(off.abs() < 1000.0, "{c}");
    }
    let skew = rounds[0]["skew_ms"].as_f64().expect("the round's skew");
    eprintln!("star of 4: start skew {skew:.3} ms");
    for c in cells {
        eprintln!(
            "  client {}: start offset {:.3} ms, clock offset {:.3} ms ± {:.3}",
            c["client"],
            c["start_offset_ms"].as_f64().unwrap_or(f64::NAN),
            c["clock_offset_ms"].as_f64().unwrap_or(f64::NAN),
            c["clock_bound_ms"].as_f64().unwrap_or(f64::NAN)
        );
    }
    // Here it is about 1 ms (docs/FLEET.md); 25 ms leaves room for a busy CI machine, and is
    // still far below the lead of over a second that a start without agreement would show.
    assert!((0.0..25.0).contains(&skew), "start skew {skew} ms");
}

#[test]
fn agents_refuse_to_initiate_unless_allowed_and_only_towards_authenticated_agents() {
    let mut f = fleet_or_skip!("mr", 4);
    // h0 may initiate towards 10.78.0.0/30 (h0, h1, h2); h1 may not initiate at all; h2 is an
    // agent with no key; h3 an agent outside h0's networks.
    f.serve(0, &["--allow-initiate", "10.78.0.0/30"]);
    f.serve(1, &[]);
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        &f.hosts[2].0,
        env!("CARGO_BIN_EXE_netrig"),
        "serve",
        "-q",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    f.kids.push(Kid(c.spawn().unwrap()));
    listening(&f.hosts[2], 6387);
    f.serve(3, &[]);
    // An HTTP server where h0 may reach: not an agent.
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        &f.hosts[1].0,
        env!("CARGO_BIN_EXE_netrig"),
        "http-serve",
        "-p",
        "8080",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    f.kids.push(Kid(c.spawn().unwrap()));
    listening(&f.hosts[1], 8080);
    let o = f.mesh(&[
        "10.78.0.1",
        "10.78.0.2",
        "10.78.0.3",
        "10.78.0.4",
        "10.78.0.2:8080",
        "--pattern",
        "pairs",
        "--pairs",
        "10.78.0.2>10.78.0.1,10.78.0.1>10.78.0.2:8080,10.78.0.1>10.78.0.3,10.78.0.1>10.78.0.4",
        "--json",
        "--",
        "tcp-stream",
        "-l",
        "1",
    ]);
    let d = json(&o);
    assert!(!o.status.success(), "failed tests make the run fail: {d}");
    let cells = d["cells"].as_array().unwrap();
    let error = |client: u64, server: u64| -> String {
        cells
            .iter()
            .find(|c| c["client"] == client && c["server"] == server)
            .and_then(|c| c["error"].as_str())
            .unwrap_or_else(|| panic!("no error for {client}>{server}: {d}"))
            .to_string()
    };
    let e = error(1, 0);
    assert!(
        e.contains("--allow-initiate"),
        "an agent not allowed to initiate: {e}"
    );
    let e = error(0, 4);
    assert!(
        e.contains("not a netrig agent") && e.contains("HTTP"),
        "towards a non-agent: {e}"
    );
    let e = error(0, 2);
    assert!(
        e.contains("without a key"),
        "towards an agent that proves no key: {e}"
    );
    let e = error(0, 3);
    assert!(
        e.contains("neither in this agent's --allow-initiate"),
        "towards an agent outside: {e}"
    );
    // A client without a key of the agent's --authorized-keys is refused at its hello.
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &f.o.0, env!("CARGO_BIN_EXE_netrig"), "mesh"])
        .args([
            "--key",
            &f.path("stranger"),
            "10.78.0.1",
            "10.78.0.3",
            "--json",
            "--",
            "tcp-stream",
            "-l",
            "1",
        ]);
    let o = c.output().unwrap();
    let d = json(&o);
    let e = d["cells"][0]["error"].as_str().unwrap_or_default();
    assert!(
        e.contains("authentication failed") || e.contains("unknown key"),
        "{e}"
    );
}

/// The client's own end (`-s`, `--dscp`, `--mss`, and `--cc` both ends take) reaches the agent
/// that runs the client (protocol 8's `initiate` carries it) and its sockets, as `netrig KIND`
/// applies its own: the result's local end says what was requested and applied, the remote end
/// has the server's own (`-S`) and the shared ones.
#[test]
fn a_mesh_carries_the_client_s_own_socket_options_to_the_agent_that_runs_it() {
    let mut f = fleet_or_skip!("mo", 2);
    for i in 0..2 {
        f.serve(i, &["--allow-initiate", "10.78.0.0/24"]);
    }
    let o = f.mesh(&[
        "10.78.0.1",
        "10.78.0.2",
        "--json",
        "--",
        "tcp-stream",
        "-l",
        "1",
        "-s",
        "96K",
        "-S",
        "48K",
        "--dscp",
        "10",
        "--mss",
        "1000",
        "--cc",
        "reno",
    ]);
    let d = json(&o);
    assert!(o.status.success(), "{d}\n{}", String::from_utf8_lossy(&o.stderr));
    let r = &d["cells"][0]["result"];
    let flow = &r["flows"][0];
    let (local, remote) = (&flow["local"], &flow["remote"]);
    assert_eq!(local["socket_buffers"]["requested"]["snd"], 96 << 10, "{local}");
    assert_eq!(local["socket_buffers"]["requested"]["rcv"], 96 << 10, "{local}");
    assert_eq!(remote["socket_buffers"]["requested"]["rcv"], 48 << 10, "{remote}");
    for end in [local, remote] {
        assert_eq!(end["applied"]["tos"], 40, "DSCP 10 on both ends: {end}");
        assert_eq!(end["applied"]["congestion"], "reno", "{end}");
    }
    let mss = local["applied"]["mss"].as_u64().expect("the client's MSS");
    assert!(mss <= 1000, "--mss 1000 on the client: {mss}");
    assert!(r["summary"]["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_mesh_refuses_client_end_options_only_an_agent_here_could_have() {
    // --cpus and --profile are this host's, not the agent's that runs the client: refused,
    // naming why; the client's own sockets (-s, --dscp) are carried, and --list runs nothing.
    for opts in [&["tcp-stream", "--cpus", "0"][..], &["tcp-rr", "--profile"]] {
        let mut args = vec!["mesh", "127.0.0.1:1", "127.0.0.1:2", "--list", "--"];
        args.extend_from_slice(opts);
        let o = netrig().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{opts:?}: {err}");
        assert!(err.contains("not carried"), "{opts:?}: {err}");
    }
    let o = netrig()
        .args([
            "mesh",
            "127.0.0.1:1",
            "127.0.0.1:2",
            "--list",
            "--",
            "tcp-stream",
            "-S",
            "64K",
            "-s",
            "64K",
            "--dscp",
            "46",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("round 1: 127.0.0.1:1 > 127.0.0.1:2"));
}

/// A mesh plan in TOML (`--plan`): the hosts, the pattern and two tests, each run over the whole
/// schedule in turn; the JSON holds the plan and a mesh per test, the HTML a section per test;
/// `--list` names the tests; hosts on the command line join the plan's; a schedule on the command
/// line too, or a plan that cannot run, is refused, naming the file.
#[test]
fn a_mesh_plan_runs_each_of_its_tests_over_the_schedule() {
    let mut f = fleet_or_skip!("mp", 3);
    for i in 0..3 {
        f.serve(i, &["--allow-initiate", "10.78.0.0/24"]);
    }
    let plan = f.dir.join("nightly.toml");
    std::fs::write(
        &plan,
        r#"name = "nightly"
hosts = ["10.78.0.1", "10.78.0.2", "10.78.0.3"]
pattern = "full"

[[test]]
kind = "tcp-stream"
args = ["-l", "1"]

[[test]]
kind = "tcp-rr"
args = ["-l", "1", "--nodelay"]
"#,
    )
    .unwrap();
    let plan = plan.display().to_string();
    let list = f.mesh(&["--plan", &plan, "--list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    assert!(text.contains("round 3:") && !text.contains("round 4:"), "{text}");
    assert!(text.contains("test 2: tcp-rr -l 1 --nodelay"), "{text}");
    let html = f.dir.join("plan.html");
    let o = f.mesh(&["--plan", &plan, "--json", "--html", &html.display().to_string()]);
    let d = json(&o);
    assert!(o.status.success(), "{d}\n{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(d["plan"]["name"], "nightly");
    let meshes = d["meshes"].as_array().unwrap();
    assert_eq!(meshes.len(), 2, "a mesh per test: {d}");
    assert_eq!(meshes[0]["test"], "tcp-stream");
    assert_eq!(meshes[1]["test"], "tcp-rr");
    assert_eq!(meshes[1]["args"], serde_json::json!(["-l", "1", "--nodelay"]));
    for m in meshes {
        assert_eq!(m["rounds"].as_array().unwrap().len(), 3, "{m}");
        let pairs: HashSet<(u64, u64)> = m["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let (a, b) = (c["client"].as_u64().unwrap(), c["server"].as_u64().unwrap());
                (a.min(b), a.max(b))
            })
            .collect();
        assert_eq!(pairs.len(), 3, "every pair once: {m}");
    }
    for c in meshes[0]["cells"].as_array().unwrap() {
        assert!(c["throughput_bps"].as_f64().unwrap() > 0.0, "{c}");
    }
    for c in meshes[1]["cells"].as_array().unwrap() {
        assert!(c["latency_p50_us"].as_f64().unwrap() > 0.0, "{c}");
        assert_eq!(
            c["result"]["flows"][0]["local"]["applied"]["nodelay"], true,
            "{c}"
        );
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("netrig mesh plan nightly: 2 tests"));
    assert_eq!(page.matches("<section>").count(), 2);
    // Hosts given on the command line join the plan's (4 hosts: 3 rounds of 2).
    let o = f.mesh(&["--plan", &plan, "10.78.0.9", "--list"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("host 3: 10.78.0.9 (10.78.0.9:6387)"), "{text}");
    assert!(text.contains("round 3: ") && !text.contains("round 4:"), "{text}");
    // Refused before anything runs, naming why: the schedule is the plan's.
    let o = f.mesh(&["--plan", &plan, "--pattern", "star", "--list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    let bad = f.dir.join("bad.toml");
    std::fs::write(
        &bad,
        "hosts = [\"10.78.0.1\", \"10.78.0.2\"]\n[[test]]\nkind = \"tcp-stream\"\nargs = [\"-H\", \"x\"]\n",
    )
    .unwrap();
    let o = f.mesh(&["--plan", &bad.display().to_string(), "--list"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.toml: test 1 (tcp-stream -H x)") && err.contains("-H"),
        "{err}"
    );
}
