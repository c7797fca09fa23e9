//! Issue #37: a single test shows its progress on a terminal (a bar with
//! the time left, on stderr) when it runs more than a few seconds, and
//! never in --json nor when its output is not a terminal; interim lines
//! (-i) are printed whole, the bar out of their way. The terminal is a
//! pseudo-terminal of util-linux's `script` (skipped, saying so, without it).

use crate::helpers::*;
use std::process::{Command, Stdio};

/// netrig `args` on a pseudo-terminal: everything it drew there, or None
/// without `script`.
fn on_a_terminal(args: &[&str]) -> Option<String> {
    let line = std::iter::once(env!("CARGO_BIN_EXE_netrig"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    assert!(
        o.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// What a terminal shows on each line's segments between carriage returns,
/// escape sequences taken out.
fn segments(screen: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte.
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split(['\n', '\r'])
        .map(|s| s.to_string())
        .filter(|s| !s.trim().is_empty())
        .collect()
}

#[test]
fn a_long_run_shows_its_time_left_on_a_terminal_only() {
    let Some(screen) = on_a_terminal(&["tcp-rr", "-l", "3", "-i", "1"]) else {
        crate::skip::missing("no `script` (util-linux) for a pseudo-terminal");
        return;
    };
    let seg = segments(&screen);
    assert!(
        seg.iter().any(|s| s.contains("tcp-rr") && s.contains(" s left")),
        "no progress on a terminal:\n{screen}"
    );
    // Each interval row stands alone: the bar never shares its line.
    let rows: Vec<&String> = seg.iter().filter(|s| s.contains(" sum ")).collect();
    assert!(rows.len() >= 2, "interval rows: {seg:?}");
    for r in rows {
        assert!(
            r.trim_start().starts_with(|c: char| c.is_ascii_digit()) && !r.contains("s left"),
            "an interval row with the bar in it: {r:?}"
        );
    }
    // The result follows, the bar cleared.
    assert!(seg.iter().any(|s| s.contains("TCP RR TEST")), "{screen}");
    // Never in --json, nor in a short run.
    for args in [&["tcp-rr", "-l", "3", "--json"][..], &["tcp-rr", "-l", "1"]] {
        let screen = on_a_terminal(args).unwrap();
        assert!(!screen.contains("s left"), "{args:?}:\n{screen}");
    }
    // Nor when stderr is not a terminal (captured here).
    let o = run(&["tcp-rr", "-l", "3", "-i", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("s left") && !stdout(&o).contains("s left"),
        "{}",
        stderr(&o)
    );
}
