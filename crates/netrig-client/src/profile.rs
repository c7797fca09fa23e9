//! `--profile` on the client's end: the watch of this end's window is netrig-profile's
//! ([`netrig_profile::watch::ProfileWatch`], the same on the agent's end); the client puts its
//! end beside the agent's in the result, the agent's only once it has checked it against the
//! wire's bounds (it comes from a peer: netrig-proto's `report::profile::bounds`).

use netrig_report::model::profile::{bounds, EndProfile, ProfileResult};

/// The result's `profile`: this end's, and the agent's from its report (withheld, saying
/// which bound, when it is past one).
pub(crate) fn both_ends(local: EndProfile, remote: Option<EndProfile>) -> ProfileResult {
    ProfileResult {
        local,
        remote: bounds::admit(remote),
    }
}
