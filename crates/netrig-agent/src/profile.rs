//! The agent's end of `--profile` (docs/PROFILE.md): when a test's spec asks for a profile and
//! the agent's operator allows it (`netrig serve --allow-profile`), the same watch as the
//! client's samples every CPU of the agent's host over the agent's measured window; the report
//! carries it, cut to the wire's bounds, or the reason it is withheld.
//!
//! Off by default: a profile samples every process on the host, not only netrig's, and names
//! their functions and process names to the client, so it is the operator's choice (as netperf's
//! and iperf3's servers leave what they run to their operators).

use netrig_engine::runner::SideOutcome;
use netrig_engine::window_watch::WindowWatch;
use netrig_profile::watch::{ProfileWatch, Work};
use netrig_proto::report::profile::{bounds, EndProfile};
use netrig_proto::TestSpec;
use std::sync::Arc;

/// Why the agent's end is withheld when its operator did not allow it.
pub(crate) const NOT_ALLOWED: &str =
    "profile withheld: the agent's operator did not allow profiles (netrig serve --allow-profile)";

/// Why the agent's end is withheld from a client that did not authenticate to an agent that
/// tells such clients nothing of its host: a profile names the host's processes and functions.
pub(crate) const NOT_DISCLOSED: &str = "profile withheld: the agent tells clients that did not \
     authenticate nothing of its host (its --disclose minimal), and a profile names every process \
     on it: give this client's key with --key";

/// The words the sampler's reasons start with, and what the agent's end says in their place.
const WITHHELD: &str = "profile withheld: ";
const WITHHELD_HERE: &str = "profile withheld on the agent's host: ";

/// A test's profile of the agent's end.
pub(crate) enum AgentProfile {
    /// Not asked for.
    Off,
    /// Asked for, not taken: why.
    Withheld(&'static str),
    /// Sampling this host's window.
    Watching(Arc<ProfileWatch>),
}

impl AgentProfile {
    /// Opens the sampler now, before the test's `go` (reading /proc/kallsyms takes a while), if
    /// the spec asks for a profile and the agent may take it: `allowed` by its operator,
    /// `disclosed` to this client.
    pub(crate) fn open(spec: &TestSpec, allowed: bool, disclosed: bool) -> AgentProfile {
        match (spec.profile, allowed, disclosed) {
            (false, _, _) => AgentProfile::Off,
            (true, false, _) => AgentProfile::Withheld(NOT_ALLOWED),
            (true, true, false) => AgentProfile::Withheld(NOT_DISCLOSED),
            (true, true, true) => AgentProfile::Watching(ProfileWatch::new()),
        }
    }

    /// The engine's handle on the watch (none when nothing is sampled).
    pub(crate) fn watch(&self) -> WindowWatch {
        match self {
            AgentProfile::Watching(w) => w.watch(),
            _ => WindowWatch::default(),
        }
    }

    /// The report's `profile` once the run is over: the agent's end cut to the wire's bounds,
    /// or why it is withheld (the sampler's reason said as this end's).
    pub(crate) fn finish(self, spec: &TestSpec, outcome: &SideOutcome) -> Option<EndProfile> {
        let withheld = |reason: &str| EndProfile::Withheld {
            withheld: reason.to_string(),
        };
        Some(match self {
            AgentProfile::Off => return None,
            AgentProfile::Withheld(reason) => withheld(reason),
            AgentProfile::Watching(w) => match w.finish(Work::of_run(spec, outcome)) {
                EndProfile::Profiled(mut p) => {
                    bounds::fit(&mut p);
                    EndProfile::Profiled(p)
                }
                EndProfile::Withheld { withheld: reason } => {
                    let why = reason.strip_prefix(WITHHELD).unwrap_or(&reason);
                    let mut said = format!("{WITHHELD_HERE}{why}");
                    cut(&mut said, bounds::MAX_REASON_BYTES);
                    withheld(&said)
                }
            },
        })
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::spec::{KindSpec, Limit, TcpStreamSpec};

    fn asking(profile: bool) -> TestSpec {
        TestSpec {
            profile,
            ..TestSpec::new(
                KindSpec::TcpStream(TcpStreamSpec::default()),
                Limit::Duration { seconds: 1.0 },
            )
        }
    }

    fn withheld(p: &AgentProfile) -> Option<&'static str> {
        match p {
            AgentProfile::Withheld(r) => Some(r),
            _ => None,
        }
    }

    #[test]
    fn a_profile_is_taken_only_when_asked_allowed_and_disclosed() {
        assert!(matches!(
            AgentProfile::open(&asking(false), true, true),
            AgentProfile::Off
        ));
        assert!(matches!(
            AgentProfile::open(&asking(false), false, false),
            AgentProfile::Off
        ));
        assert_eq!(
            withheld(&AgentProfile::open(&asking(true), false, true)),
            Some(NOT_ALLOWED)
        );
        assert_eq!(
            withheld(&AgentProfile::open(&asking(true), true, false)),
            Some(NOT_DISCLOSED)
        );
        assert!(NOT_ALLOWED.contains("--allow-profile"));
    }
}
