//! `--profile` on the client's end: the watch of this end's window is netrig-profile's
//! ([`netrig_profile::watch::ProfileWatch`], the same on the agent's end); the client puts its
//! end beside the agent's in the result, the agent's only once it has checked it against the
//! wire's bounds (it comes from a peer).

use netrig_report::model::profile::{bounds, EndProfile, ProfileResult};

/// Why the agent's end has no profile when its report carries none, though the test asked.
pub const REMOTE_MISSING: &str =
    "profile withheld: the agent's report has no profile, though the test asked for one";

/// The result's `profile`: this end's, and the agent's from its report. An agent's profile
/// past a bound is withheld, saying which bound, rather than failing the test: the test's
/// own figures do not depend on it.
pub(crate) fn both_ends(local: EndProfile, remote: Option<EndProfile>) -> ProfileResult {
    let remote = match remote {
        None => withheld(REMOTE_MISSING.into()),
        Some(r) => match bounds::check(&r) {
            Ok(()) => r,
            Err(why) => {
                log::warn!("{why}");
                withheld(why)
            }
        },
    };
    ProfileResult { local, remote }
}

fn withheld(reason: String) -> EndProfile {
    EndProfile::Withheld { withheld: reason }
}
