//! Tests, or parts of tests, that cannot run here. Two kinds:
//!
//! - [`missing`]: a prerequisite CI installs (root, iproute2, strace, nftables, nginx,
//!   chromium, ...). Where `CI` is set the test fails, naming it: a CI machine without it would
//!   otherwise go green having tested nothing of that part. Elsewhere it is skipped.
//! - [`not_here`]: a property of this host's kernel or limits that no package changes (a kernel
//!   older than a feature, a sysctl this kernel keeps host-wide). Skipped everywhere.
//!
//! Every skip is said on stderr as `skipped: ...` (shown with `--nocapture`, or under a failure)
//! and counted: when the test binary exits, it prints how many tests skipped what, and why, to
//! its own stderr, which the harness does not capture.

use std::sync::{Mutex, Once};

/// The skips of this run: (test, reason).
static SKIPS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// A prerequisite that CI installs is missing: fails under CI, else skips (the caller returns).
pub(crate) fn missing(why: impl std::fmt::Display) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and this test cannot run: {why}");
    }
    record(why.to_string());
}

/// This host lacks something no package provides: skips (the caller returns).
pub(crate) fn not_here(why: impl std::fmt::Display) {
    record(why.to_string());
}

fn record(why: String) {
    eprintln!("skipped: {why}");
    // libtest names each test's thread after the test.
    let test = std::thread::current().name().unwrap_or("(unnamed)").to_string();
    SKIPS.lock().unwrap_or_else(|e| e.into_inner()).push((test, why));
    AT_EXIT.call_once(|| {
        // SAFETY: registers a function without arguments, called once at exit.
        unsafe { libc::atexit(summary) };
    });
}

/// At exit: the count and every reason, on the process's stderr.
extern "C" fn summary() {
    let skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
    if skips.is_empty() {
        return;
    }
    let mut text = format!(
        "\n{} test{} skipped all or part of what they check, for want of what this host lacks:\n",
        skips.len(),
        if skips.len() == 1 { "" } else { "s" }
    );
    for (test, why) in skips.iter() {
        text.push_str(&format!("  {test}: {why}\n"));
    }
    eprint!("{text}");
}
