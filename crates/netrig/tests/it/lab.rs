//! Hosts for tests that need a path with properties of its own: network
//! namespaces the test creates, joined by veth pairs, each with an IPv4 and
//! an IPv6 address. The addresses exist only inside these namespaces, so
//! every pair uses the same ones. Everything is deleted on drop.
//!
//! - [`Lab::pair`]: client `a` (10.77.0.1, fd77::1) and agent `b`
//!   (10.77.0.2, fd77::2) on one veth link.
//! - [`Lab::routed`]: `a` (10.77.1.1, fd77:1::1) — router `r` — `b`
//!   (10.77.2.1, fd77:2::1), so a limit on the router's egress towards `b`
//!   drops what `a` sends too fast (a limit on the sender's own interface
//!   only back-pressures it).
//!
//! Tests that need a lab skip, saying why, when it cannot be made.
#![allow(dead_code)] // each test uses the parts it needs

use crate::helpers::{Netns, NETRIG_LOG};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Lab {
    /// The client's host.
    pub a: Netns,
    /// The agent's host.
    pub b: Netns,
    /// The router, in a routed lab.
    pub r: Option<Netns>,
    /// The agent's addresses as the client reaches them.
    pub b4: &'static str,
    pub b6: &'static str,
}

impl Lab {
    /// Two hosts on one veth link (`eth0` on each end).
    pub fn pair(tag: &str) -> Result<Lab, String> {
        let a = Netns::create(&format!("{tag}a"))?;
        let b = Netns::create(&format!("{tag}b"))?;
        veth(&a, "eth0", &b, "eth0")?;
        addr(&a, "eth0", "10.77.0.1/24", "fd77::1/64")?;
        addr(&b, "eth0", "10.77.0.2/24", "fd77::2/64")?;
        Ok(Lab {
            a,
            b,
            r: None,
            b4: "10.77.0.2",
            b6: "fd77::2",
        })
    }

    /// `a` — `r` — `b`: `a`'s eth0 to `r`'s `toa`, `r`'s `tob` to `b`'s eth0.
    pub fn routed(tag: &str) -> Result<Lab, String> {
        let a = Netns::create(&format!("{tag}a"))?;
        let r = Netns::create(&format!("{tag}r"))?;
        let b = Netns::create(&format!("{tag}b"))?;
        veth(&a, "eth0", &r, "toa")?;
        veth(&r, "tob", &b, "eth0")?;
        addr(&a, "eth0", "10.77.1.1/24", "fd77:1::1/64")?;
        addr(&r, "toa", "10.77.1.254/24", "fd77:1::fe/64")?;
        addr(&r, "tob", "10.77.2.254/24", "fd77:2::fe/64")?;
        addr(&b, "eth0", "10.77.2.1/24", "fd77:2::1/64")?;
        r.exec(&[
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
        ])?;
        a.exec(&["ip", "route", "add", "default", "via", "10.77.1.254"])?;
        a.exec(&["ip", "-6", "route", "add", "default", "via", "fd77:1::fe"])?;
        b.exec(&["ip", "route", "add", "default", "via", "10.77.2.254"])?;
        b.exec(&["ip", "-6", "route", "add", "default", "via", "fd77:2::fe"])?;
        Ok(Lab {
            a,
            b,
            r: Some(r),
            b4: "10.77.2.1",
            b6: "fd77:2::1",
        })
    }

    /// `netrig serve` on `b` (all addresses, port 6387), waited for.
    pub fn serve(&self, extra: &[&str]) -> Result<ServedIn, String> {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.b.0,
            env!("CARGO_BIN_EXE_netrig"),
            "serve",
            "-q",
        ])
        .args(extra)
        .env("RUST_LOG", NETRIG_LOG)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let child = c.spawn().map_err(|e| format!("spawn netrig serve: {e}"))?;
        let served = ServedIn { child };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let o = Command::new("ip")
                .args(["netns", "exec", &self.b.0, "ss", "-Htln", "sport", "= :6387"])
                .output()
                .map_err(|e| format!("ss: {e}"))?;
            if !o.stdout.is_empty() {
                return Ok(served);
            }
            if Instant::now() > deadline {
                return Err("the agent in the lab did not start listening within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The router, for a routed lab.
    pub fn router(&self) -> &Netns {
        self.r.as_ref().expect("a routed lab")
    }
}

/// An agent in a namespace, killed on drop.
pub struct ServedIn {
    child: Child,
}

impl Drop for ServedIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command in `ns` and returns its output whatever its status.
pub fn output_in(ns: &Netns, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .args(args)
        .output()
        .expect("ip netns exec")
}

pub fn veth(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str) -> Result<(), String> {
    // Made inside the namespaces, so parallel tests' names never collide.
    crate::helpers::sh(&[
        "ip", "link", "add", a_dev, "netns", &a.0, "type", "veth", "peer", "name", b_dev, "netns", &b.0,
    ])?;
    a.exec(&["ip", "link", "set", a_dev, "up"])?;
    b.exec(&["ip", "link", "set", b_dev, "up"])
}

fn addr(ns: &Netns, dev: &str, v4: &str, v6: &str) -> Result<(), String> {
    ns.exec(&["ip", "addr", "add", v4, "dev", dev])?;
    // nodad: usable at once, no duplicate-address detection wait.
    ns.exec(&["ip", "-6", "addr", "add", v6, "dev", dev, "nodad"])
}

/// Skips the calling test, saying why, when its lab cannot be made.
#[macro_export]
macro_rules! lab_or_skip {
    ($e:expr) => {
        match $e {
            Ok(lab) => lab,
            Err(e) => {
                $crate::skip::missing(format!(
                    "needs root, iproute2 and veth for namespaces of its own ({e})"
                ));
                return;
            }
        }
    };
}
