//! Authentication: `netrig keygen`, `serve --authorized-keys/--key`, the
//! client's `--key` and `--agent-key`.

use crate::helpers::{run, stderr, Served};
use std::path::{Path, PathBuf};

/// A directory of the test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("netrig-it-auth-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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
