//! `--profile` on http: this host sampled over exactly the load's measured window (after
//! `--omit`, to its end), by the same watch as a two-ended kind's client
//! ([`netrig_profile::watch::ProfileWatch`]), told by netrig-http-load at the window's marks
//! (where it reads /proc/stat). The server's end is withheld: it is any HTTP server, not
//! netrig's agent, and the server host's view (`--server-agent`) carries no profile.

use netrig_http_load::Report;
use netrig_profile::watch::{ProfileWatch, Work};
use netrig_report::model::profile::{EndProfile, ProfileResult};
use std::sync::Arc;

/// Why the result's `remote` end has no profile.
pub(crate) const REMOTE_WITHHELD: &str =
    "profile withheld: the server of an http test is not netrig's agent; \
     its host is profiled only where netrig's agent runs a test's other end, and the server host's view \
     (--server-agent) does not carry a profile (not built, #42)";

/// The watch, opened now (before the load starts: reading /proc/kallsyms takes a while), when
/// `--profile` asks for it.
pub(crate) fn open(asked: bool) -> Option<Arc<ProfileWatch>> {
    asked.then(ProfileWatch::new)
}

/// The result's `profile`, once the run is over: this end's, its demand per successful (2xx or
/// 3xx) response in the window, as the result's own service demand counts them ("us/tran"),
/// so that the busy groups' demands add up to the busy share of that figure.
pub(crate) fn finish(watch: &ProfileWatch, report: &Report) -> ProfileResult {
    let work = Work {
        bytes: report.window.bytes_in + report.window.bytes_out,
        transactions: Some(report.window.successes),
    };
    ProfileResult {
        local: watch.finish(work),
        remote: EndProfile::Withheld {
            withheld: REMOTE_WITHHELD.into(),
        },
    }
}
