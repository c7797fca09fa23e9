//! Runs every committed fuzz input through its target under a plain `cargo
//! test`: `fuzz/seeds/<target>/` (the corpora the fuzzers start from) and
//! `fuzz/regressions/<target>/` (minimized inputs of crashes found and
//! fixed). Fails naming each file whose input panics, a target with no input
//! at all, and a fuzz target without its entry in `netrig_fuzz::TARGETS` (or
//! the reverse).
//!
//! `NETRIG_FUZZ_CORPUS=1` replays the grown, uncommitted `fuzz/corpus/<target>/`
//! too (after a fuzz run, to replay it on stable without the fuzzer).

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted; none if it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Runs each file through `run`; the files that panicked, with the message.
fn replay(run: fn(&[u8]), inputs: &[PathBuf]) -> Vec<String> {
    let mut failed = Vec::new();
    for path in inputs {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| run(&data))) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", path.display()));
        }
    }
    failed
}

fn replay_target(name: &str) {
    let (_, run) = netrig_fuzz::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{name} is not in netrig_fuzz::TARGETS"));
    check_target(&fuzz_dir(), name, *run);
}

/// Replays `dir`'s seeds and regressions of `name` through `run`.
fn check_target(dir: &Path, name: &str, run: fn(&[u8])) {
    let mut inputs = files(&dir.join("seeds").join(name));
    inputs.extend(files(&dir.join("regressions").join(name)));
    assert!(
        !inputs.is_empty(),
        "{name}: no inputs in fuzz/seeds/{name}/ or fuzz/regressions/{name}/ (a replay of nothing passes vacuously)"
    );
    if std::env::var_os("NETRIG_FUZZ_CORPUS").is_some() {
        inputs.extend(files(&dir.join("corpus").join(name)));
    }
    let failed = replay(run, &inputs);
    assert!(
        failed.is_empty(),
        "{name}: {} of {} inputs panicked:\n{}",
        failed.len(),
        inputs.len(),
        failed.join("\n")
    );
}

macro_rules! replay_tests {
    ($($name:ident)*) => {
        $(
            #[test]
            fn $name() {
                replay_target(stringify!($name));
            }
        )*

        /// The targets this file has a test for.
        const REPLAYED: &[&str] = &[$(stringify!($name)),*];
    };
}

replay_tests! {
    agent_report
    agent_session
    data_hello
    dns_answer
    frame
    http_request
    http_response
    initiate_result
    iperf3_control
    iperf3_params
    iperf3_results
    lab_frame
    latency_histogram
    message
    metrics_request
    msg_stamp
    preamble
    session
    spec
    udp_datagram
}

/// Every fuzz binary is a thin wrapper of a target here, and every target
/// has a fuzz binary and a replay test.
#[test]
fn every_fuzz_target_is_replayed() {
    let dir = fuzz_dir();
    let binaries: BTreeSet<String> = files(&dir.join("fuzz_targets"))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(!binaries.is_empty(), "no fuzz targets in {}", dir.display());
    let lib: BTreeSet<String> = netrig_fuzz::TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    let tests: BTreeSet<String> = REPLAYED.iter().map(|n| n.to_string()).collect();
    assert_eq!(binaries, lib, "fuzz/fuzz_targets/ against netrig_fuzz::TARGETS");
    assert_eq!(binaries, tests, "fuzz/fuzz_targets/ against the replay tests");

    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for name in &binaries {
        let src = std::fs::read_to_string(dir.join("fuzz_targets").join(format!("{name}.rs")))
            .expect("a fuzz target's source");
        assert!(
            src.contains(&format!("netrig_fuzz::{name}::run(data)")),
            "fuzz/fuzz_targets/{name}.rs does not call netrig_fuzz::{name}::run"
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
    }
    // Regressions only of targets that exist.
    for sub in ["seeds", "regressions"] {
        for d in std::fs::read_dir(dir.join(sub)).into_iter().flatten() {
            let name = d
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            assert!(
                binaries.contains(&name),
                "fuzz/{sub}/{name}/ belongs to no target"
            );
        }
    }
}

/// The replay catches a panicking input and names its file, and refuses a
/// target without inputs: it cannot pass by replaying nothing.
#[test]
fn replay_fails_on_a_panic_and_on_no_inputs() {
    fn target(data: &[u8]) {
        assert_ne!(data, b"boom", "exploded");
    }
    let panic_text = |r: std::thread::Result<()>| {
        let p = r.expect_err("the replay passed");
        p.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let dir = std::env::temp_dir().join(format!("netrig-replay-{}", std::process::id()));
    let seeds = dir.join("seeds").join("t");
    std::fs::create_dir_all(&seeds).unwrap();
    std::fs::create_dir_all(dir.join("regressions").join("t")).unwrap();

    let empty = panic_text(catch_unwind(|| check_target(&dir, "t", target)));
    std::fs::write(seeds.join("ok"), b"fine").unwrap();
    check_target(&dir, "t", target);
    std::fs::write(dir.join("regressions").join("t").join("crash-1"), b"boom").unwrap();
    let boom = panic_text(catch_unwind(|| check_target(&dir, "t", target)));
    std::fs::remove_dir_all(&dir).unwrap();

    assert!(empty.contains("no inputs"), "{empty}");
    assert!(boom.contains("1 of 2 inputs panicked"), "{boom}");
    assert!(boom.contains("crash-1: ") && boom.contains("exploded"), "{boom}");
}
