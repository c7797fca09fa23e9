//! Authentication: `netrig keygen`, `serve --authorized-keys/--key`, the
//! client's `--key` and `--agent-key`.

use crate::helpers::{run, stderr, Served, TempDir as Dir};
use std::path::{Path, PathBuf};

fn keygen(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join(name);
    let o = run(&["keygen", "-o", file.to_str().unwrap(), "-C", name]);
    assert!(o.status.success(), "{}", stderr(&o));
    file
}

fn public(file: &Path) -> String {
    std::fs::read_to_string(format!("{}.pub", file.display())).unwrap()
}

fn test(served: &Served, extra: &[&str]) -> std::process::Output {
    let port = served.port_arg();
    let mut args = vec!["tcp-stream", "-H", "127.0.0.1", "-p", &port, "-l", "0.2"];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn keygen_writes_a_private_key_0600_and_a_public_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("keygen");
    let k = keygen(dir.path(), "k");
    let mode = std::fs::metadata(&k).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(&k)
        .unwrap()
        .starts_with("netrig-ed25519-private "));
    let p = public(&k);
    assert!(
        p.starts_with("netrig-ed25519 ") && p.trim_end().ends_with(" k"),
        "{p}"
    );
    // Never overwritten.
    let o = run(&["keygen", "-o", k.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn an_agent_with_authorized_keys_serves_only_those_clients() {
    let dir = Dir::new("served");
    let agent = keygen(dir.path(), "agent");
    let alice = keygen(dir.path(), "alice");
    let mallory = keygen(dir.path(), "mallory");
    let auth = dir.path().join("authorized");
    std::fs::write(&auth, format!("# clients\n{}", public(&alice))).unwrap();
    let served = Served::start(&[
        "--authorized-keys",
        auth.to_str().unwrap(),
        "--key",
        agent.to_str().unwrap(),
    ]);
    let agent_pub = format!("{}.pub", agent.display());
    // The right key, and the agent's key checked (as a file and as base64).
    let o = test(
        &served,
        &["--key", alice.to_str().unwrap(), "--agent-key", &agent_pub],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let b64 = public(&agent).split_whitespace().nth(1).unwrap().to_string();
    let o = test(&served, &["--key", alice.to_str().unwrap(), "--agent-key", &b64]);
    assert!(o.status.success(), "{}", stderr(&o));
    // No key.
    let o = test(&served, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("requires authentication"), "{}", stderr(&o));
    // Another key.
    let o = test(&served, &["--key", mallory.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("refused this client") && stderr(&o).contains("unknown key"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_client_refuses_an_agent_whose_key_does_not_match() {
    let dir = Dir::new("agentkey");
    let agent = keygen(dir.path(), "agent");
    let other = keygen(dir.path(), "other");
    let served = Served::start(&["--key", agent.to_str().unwrap()]);
    let o = test(&served, &["--agent-key", &format!("{}.pub", other.display())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("agent key mismatch"), "{}", stderr(&o));
    // An agent without a key, when one is expected.
    let plain = Served::start(&[]);
    let o = test(&plain, &["--agent-key", &format!("{}.pub", agent.display())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("has no key"), "{}", stderr(&o));
    // Unauthenticated stays the default.
    let o = test(&served, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Experiments carry the keys too: a sweep from the command line, and a
/// plan whose target names them, against an agent that requires them.
#[test]
fn sweeps_and_plans_authenticate() {
    let dir = Dir::new("expauth");
    let agent = keygen(dir.path(), "agent");
    let alice = keygen(dir.path(), "alice");
    let auth = dir.path().join("authorized");
    std::fs::write(&auth, public(&alice)).unwrap();
    let served = Served::start(&[
        "--authorized-keys",
        auth.to_str().unwrap(),
        "--key",
        agent.to_str().unwrap(),
    ]);
    let agent_pub = format!("{}.pub", agent.display());
    let o = test(
        &served,
        &[
            "-m",
            "1K,4K",
            "--key",
            alice.to_str().unwrap(),
            "--agent-key",
            &agent_pub,
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tests"][0]["points"].as_array().unwrap().len(), 2);
    assert!(
        v["plan"]["target"]["key"].as_str().unwrap().ends_with("alice"),
        "the path, never the key"
    );
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"p\"\ntarget = {{ host = \"127.0.0.1\", port = {}, key = \"{}\", agent_key = \"{agent_pub}\" }}\n[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.2\"]\n",
            served.port,
            alice.display()
        ),
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Without a key the plan is refused by the agent, named.
    std::fs::write(
        &plan,
        format!(
            "name = \"p\"\ntarget = {{ host = \"127.0.0.1\", port = {} }}\n[[test]]\nkind = \"tcp-rr\"\nargs = [\"-l\", \"0.2\"]\n",
            served.port
        ),
    )
    .unwrap();
    let o = run(&["run", plan.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("requires authentication"), "{}", stderr(&o));
}
