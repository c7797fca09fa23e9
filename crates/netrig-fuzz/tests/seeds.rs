//! The seeds made with netrig's own encoders (`seeds()` of `agent_session`
//! and `agent_report`): committed in `fuzz/seeds/<target>/` as generated,
//! and meaningful (they reach what they are meant to).
//!
//! `NETRIG_WRITE_SEEDS=1 cargo test -p netrig-fuzz --test seeds` writes them
//! anew (after a change to the protocol's messages, say).

use netrig_fuzz::agent_report::{self, Outcome};
use netrig_fuzz::agent_session::{self, states, whole_test};
use netrig_proto::spec::KindSpec;
use std::collections::BTreeMap;
use std::path::Path;

type Seeds = BTreeMap<String, Vec<u8>>;
/// A seed generator: the seeds by name.
type Generator = fn() -> Vec<(String, Vec<u8>)>;

/// The targets whose seeds are generated, and their generators.
const GENERATED: &[(&str, Generator)] = &[
    ("agent_report", agent_report::seeds),
    ("agent_session", agent_session::seeds),
];

#[test]
fn seeds_are_committed_as_generated() {
    for (target, make) in GENERATED {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds")
            .join(target);
        let want: Seeds = make().into_iter().collect();
        if std::env::var_os("NETRIG_WRITE_SEEDS").is_some() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &want {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
        }
        let have: Seeds = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| {
                let p = e.unwrap().path();
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        assert_eq!(
            have.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{target}: rewrite them with NETRIG_WRITE_SEEDS=1"
        );
        for (name, bytes) in &want {
            assert!(
                &have[name] == bytes,
                "{target}/{name} differs: rewrite with NETRIG_WRITE_SEEDS=1"
            );
        }
    }
}

#[test]
fn whole_tests_run_and_close() {
    for (i, kind) in KindSpec::NAMES.iter().enumerate() {
        // http, syn-flood and half-close run from the client alone: no agent session has them.
        if ["http", "syn-flood", "half-close"].contains(kind) {
            continue;
        }
        let s = states(&whole_test(i as u8).bytes());
        // A connection per transaction (tcp-crr, tcp-cc): none to await at set-up.
        let setup = if ["tcp-crr", "tcp-cc"].contains(kind) {
            "awaiting go"
        } else {
            "awaiting data connections"
        };
        assert_eq!(s, ["idle", setup, "running a test", "closed"], "{kind}");
    }
}

#[test]
fn the_other_session_seeds_end_where_the_agent_would() {
    let seeds: Seeds = agent_session::seeds().into_iter().collect();
    let at = |name: &str| states(&seeds[name]);
    // Go while the agent awaits data connections ends the session.
    assert_eq!(at("one-read"), ["idle", "awaiting data connections"]);
    assert_eq!(at("byte-by-byte"), ["idle", "closed"]);
    assert_eq!(
        at("truncated"),
        ["idle", "awaiting data connections", "running a test"]
    );
    assert_eq!(at("garbled"), ["idle", "awaiting data connections"]);
    assert_eq!(at("over-limit"), ["idle"]);
    assert_eq!(at("late"), ["idle", "awaiting data connections"]);
    assert_eq!(
        at("abort-reject-invalid-bye"),
        [
            "idle",
            "awaiting go",
            "running a test",
            "idle",
            "awaiting go",
            "idle",
            "closed"
        ]
    );
    assert_eq!(at("go-first"), ["idle"]);
    assert_eq!(at("duplicate-flow"), ["idle", "awaiting data connections"]);
    assert_eq!(at("hello-bad-signature"), ["idle"]);
    assert!(at("old-version").is_empty());
    assert!(at("data-magic").is_empty());
}

#[test]
fn report_seeds_merge_or_are_refused() {
    let seeds: Seeds = agent_report::seeds().into_iter().collect();
    let at = |name: &str| agent_report::outcome(&seeds[name]);
    for kind in KindSpec::NAMES {
        // http, syn-flood and half-close run from the client alone: no agent session has them.
        if ["http", "syn-flood", "half-close"].contains(kind) {
            continue;
        }
        let flows = if *kind == "tcp-bidir" { 4 } else { 2 };
        assert_eq!(
            at(&format!("whole-{kind}")),
            Outcome {
                intervals: 2,
                result: Some(Ok(flows)),
                remote_profile: None,
            },
            "{kind}"
        );
    }
    let refused = |o: Outcome| match o.result {
        Some(Err(e)) => e,
        other => panic!("{other:?}"),
    };
    assert!(refused(at("results-lacking-a-flow")).contains("the agent's report lacks flow 3"));
    assert!(refused(at("foreign-flows")).contains("the agent's report lacks flow 0"));
    assert_eq!(at("extreme-numbers").result, Some(Ok(4)));
    assert_eq!(at("results-with-a-profile").remote_profile, Some(Ok(())));
    let past = at("profile-past-a-bound").remote_profile.unwrap().unwrap_err();
    assert!(
        past.contains("busy_samples is 1999, more than samples (1998)"),
        "{past}"
    );
    let withheld = at("profile-withheld").remote_profile.unwrap().unwrap_err();
    assert!(withheld.contains("--allow-profile"), "{withheld}");
}
