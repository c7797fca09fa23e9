//! The agent's own counters (`netrig serve --metrics-port`, docs/FLEET.md): sessions, tests
//! by kind and outcome, refusals by reason, the payload its tests moved, iperf3 sessions.
//!
//! Each is a relaxed atomic the code that decides bumps once per event (a session, a test, a
//! refusal: never per packet), so counting takes no lock and costs the data path nothing; a
//! scrape reads them all at that instant ([`Counters::families`]). They count from the agent's
//! start and never go down (Prometheus' counters); the current sessions are the admission's
//! own count, read at the scrape.

use netrig_openmetrics::{Family, Kind, Value};
use netrig_proto::report::Role;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Why the agent refused a client, a session or a test: the label `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A connection from outside `--allow`.
    Allow,
    /// A control connection whose protocol versions this agent does not speak.
    Version,
    /// A hello or a test request that failed authentication (`--authorized-keys`).
    Auth,
    /// No session place (`--max-sessions`, `--max-sessions-per-client`).
    Busy,
    /// A test spec the session's checks refused (malformed, or beyond the per-test limits:
    /// `--max-flows`, `--max-duration`, `--max-rate`, ...).
    Spec,
    /// A test the agent's totals or this host could not take (`--max-threads`,
    /// `--max-memory`, `--max-total-flows`, `--max-buffer`, descriptors, a missing transport).
    Caps,
    /// A test whose set-up hook failed (`--hooks`).
    Hook,
    /// A watch of the host refused (`--disclose minimal`, no thread to spare).
    Watch,
    /// An iperf3 client's test refused (its authentication, the agent's caps or this host).
    Iperf3,
    /// An agent-to-agent test refused (not allowed by `--allow-initiate`/`--initiate-keys`, a
    /// client that did not prove its key, a target that is not an authenticated agent).
    Initiate,
}

impl Refusal {
    const ALL: [Refusal; 10] = [
        Refusal::Allow,
        Refusal::Version,
        Refusal::Auth,
        Refusal::Busy,
        Refusal::Spec,
        Refusal::Caps,
        Refusal::Hook,
        Refusal::Watch,
        Refusal::Iperf3,
        Refusal::Initiate,
    ];

    fn label(self) -> &'static str {
        match self {
            Refusal::Allow => "allow",
            Refusal::Version => "version",
            Refusal::Auth => "auth",
            Refusal::Busy => "busy",
            Refusal::Spec => "spec",
            Refusal::Caps => "caps",
            Refusal::Hook => "hook",
            Refusal::Watch => "watch",
            Refusal::Iperf3 => "iperf3",
            Refusal::Initiate => "initiate",
        }
    }
}

const ROLES: [(Role, &str); 4] = [
    (Role::Sender, "sender"),
    (Role::Receiver, "receiver"),
    (Role::Requester, "requester"),
    (Role::Responder, "responder"),
];

/// Every count the agent keeps for its metrics.
pub(crate) struct Counters {
    started: Instant,
    started_unix_s: f64,
    sessions: AtomicU64,
    iperf3_sessions: AtomicU64,
    /// By the kinds' registry's order: (completed, failed).
    tests: Vec<[AtomicU64; 2]>,
    refusals: [AtomicU64; Refusal::ALL.len()],
    bytes: [AtomicU64; ROLES.len()],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            started: Instant::now(),
            started_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            sessions: AtomicU64::new(0),
            iperf3_sessions: AtomicU64::new(0),
            tests: netrig_kinds::registry::all()
                .iter()
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            refusals: Default::default(),
            bytes: Default::default(),
        }
    }
}

fn bump(a: &AtomicU64, by: u64) {
    a.fetch_add(by, Ordering::Relaxed);
}

impl Counters {
    /// A netrig session admitted (its hello in, a session place taken).
    pub(crate) fn session(&self) {
        bump(&self.sessions, 1);
    }

    /// An iperf3 client's control connection, come to a session thread.
    pub(crate) fn iperf3_session(&self) {
        bump(&self.iperf3_sessions, 1);
    }

    pub(crate) fn refused(&self, why: Refusal) {
        let i = Refusal::ALL.iter().position(|r| *r == why).unwrap_or(0);
        bump(&self.refusals[i], 1);
    }

    /// A test of `kind` ran to its end (`completed`) or failed once started; `flows`: the
    /// agent's flows, each with its role and the payload bytes it counted over the whole test.
    pub(crate) fn test(&self, kind: &str, completed: bool, flows: impl Iterator<Item = (Role, u64)>) {
        if let Some(i) = netrig_kinds::registry::all()
            .iter()
            .position(|k| k.name() == kind)
        {
            bump(&self.tests[i][usize::from(!completed)], 1);
        }
        for (role, bytes) in flows {
            if let Some(r) = ROLES.iter().position(|(x, _)| *x == role) {
                bump(&self.bytes[r], bytes);
            }
        }
    }

    /// Every family, as a scrape reads it now; `current_sessions`: the sessions held now.
    pub(crate) fn families(&self, current_sessions: usize) -> Vec<Family> {
        let get = |a: &AtomicU64| Value::Int(a.load(Ordering::Relaxed));
        let mut tests = Family::new(
            "netrig_agent_tests",
            "Tests the agent ran since it started (netrig's and iperf3 clients'), by kind and \
             outcome (completed: ran to its end; failed: ended in an error once accepted).",
            Kind::Counter,
        );
        // Kinds with one end (http, syn-flood, half-close) never run on an agent.
        let kinds = netrig_kinds::registry::all().iter().zip(&self.tests);
        for (k, counts) in kinds.filter(|(k, _)| matches!(k.ends(), netrig_kinds::Ends::Both)) {
            for (outcome, c) in ["completed", "failed"].iter().zip(counts) {
                tests.push(&[("kind", k.name()), ("outcome", outcome)], get(c));
            }
        }
        let mut refusals = Family::new(
            "netrig_agent_refusals",
            "Connections, sessions, tests and watches the agent refused since it started, by \
             reason (allow, version, auth, busy, spec, caps, hook, watch, iperf3).",
            Kind::Counter,
        );
        for (r, c) in Refusal::ALL.iter().zip(&self.refusals) {
            refusals.push(&[("reason", r.label())], get(c));
        }
        let mut bytes = Family::new(
            "netrig_agent_test_payload_bytes",
            "Payload bytes the agent's flows counted over whole tests (set-up to end, omitted \
             seconds included), by the flow's role on the agent: a sender's were sent, a \
             receiver's received, a responder's requests read and responses written.",
            Kind::Counter,
        );
        for ((_, name), c) in ROLES.iter().zip(&self.bytes) {
            bytes.push(&[("role", name)], get(c));
        }
        vec![
            Family::new(
                "netrig_agent_build",
                "The agent's netrig version and the protocol versions it speaks.",
                Kind::Info,
            )
            .with(
                &[
                    ("version", netrig_proto::SOFTWARE_VERSION),
                    ("protocol_min", &netrig_proto::MIN_PROTOCOL_VERSION.to_string()),
                    ("protocol_max", &netrig_proto::PROTOCOL_VERSION.to_string()),
                ],
                Value::Int(1),
            ),
            Family::new(
                "netrig_agent_start_time_seconds",
                "When the agent started, seconds since the Unix epoch (its clock).",
                Kind::Gauge,
            )
            .with(&[], Value::Float(self.started_unix_s)),
            Family::new(
                "netrig_agent_uptime_seconds",
                "Seconds since the agent started (a monotonic clock).",
                Kind::Gauge,
            )
            .with(&[], Value::Float(self.started.elapsed().as_secs_f64())),
            Family::new(
                "netrig_agent_sessions",
                "Sessions (netrig and iperf3) holding a place now (at most --max-sessions).",
                Kind::Gauge,
            )
            .with(&[], Value::Int(current_sessions as u64)),
            Family::new(
                "netrig_agent_sessions_admitted",
                "netrig control sessions admitted since the agent started (hello accepted).",
                Kind::Counter,
            )
            .with(&[], get(&self.sessions)),
            Family::new(
                "netrig_agent_iperf3_sessions",
                "iperf3 clients' control connections served since the agent started.",
                Kind::Counter,
            )
            .with(&[], get(&self.iperf3_sessions)),
            tests,
            refusals,
            bytes,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_series() {
        let c = Counters::default();
        c.session();
        c.refused(Refusal::Busy);
        c.refused(Refusal::Busy);
        c.test(
            "tcp-rr",
            true,
            [(Role::Responder, 100), (Role::Responder, 20)].into_iter(),
        );
        c.test("tcp-rr", false, std::iter::empty());
        let t = netrig_openmetrics::openmetrics(&c.families(3));
        assert!(t.contains("netrig_agent_sessions 3\n"), "{t}");
        assert!(t.contains("netrig_agent_sessions_admitted_total 1\n"), "{t}");
        assert!(
            t.contains("netrig_agent_refusals_total{reason=\"busy\"} 2\n"),
            "{t}"
        );
        assert!(
            t.contains("netrig_agent_refusals_total{reason=\"auth\"} 0\n"),
            "{t}"
        );
        assert!(
            t.contains("netrig_agent_tests_total{kind=\"tcp-rr\",outcome=\"completed\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("netrig_agent_tests_total{kind=\"tcp-rr\",outcome=\"failed\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("netrig_agent_test_payload_bytes_total{role=\"responder\"} 120\n"),
            "{t}"
        );
        assert!(t.contains("netrig_agent_build_info{version=\""), "{t}");
    }
}
