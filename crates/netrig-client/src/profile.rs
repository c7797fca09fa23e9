//! `--profile` on the client's end: the watch of this end's window is netrig-profile's
//! ([`netrig_profile::watch::ProfileWatch`], the same on the agent's end); the client puts its
//! end beside the agent's in the result. The agent's end is not profiled by this build: the
//! result says so in its place.

use netrig_report::model::profile::{EndProfile, ProfileResult};

/// Why the agent's end has no profile.
pub const REMOTE_WITHHELD: &str =
    "the agent's end is not profiled by this build (#42: netrig serve --allow-profile is not built yet)";

/// The result's `profile`: this end's and the agent's.
pub(crate) fn both_ends(local: EndProfile) -> ProfileResult {
    ProfileResult {
        local,
        remote: EndProfile::Withheld {
            withheld: REMOTE_WITHHELD.into(),
        },
    }
}
