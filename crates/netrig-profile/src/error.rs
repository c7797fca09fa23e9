//! Why a profile cannot be taken: each reason is said in words the caller can put into a result
//! in place of the profile ("withheld: ...").

use std::io;

/// A profile cannot be taken, and why.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The kernel refused perf_event_open for a system-wide event: not root and no CAP_PERFMON,
    /// with perf_event_paranoid above 0.
    #[error(
        "profile withheld: the kernel refused to sample every CPU (perf_event_open: {errno}); \
         kernel.perf_event_paranoid is {paranoid} and this process has neither root nor \
         CAP_PERFMON (a system-wide profile needs one of them, or perf_event_paranoid <= 0)"
    )]
    NotAllowed { paranoid: String, errno: io::Error },
    /// /proc/kallsyms shows every address as zero (kernel.kptr_restrict, or no CAP_SYSLOG):
    /// kernel frames could not be named.
    #[error(
        "profile withheld: kernel addresses are hidden (/proc/kallsyms shows zeros; \
         kernel.kptr_restrict is {kptr_restrict}), so kernel frames cannot be named"
    )]
    KernelAddressesHidden { kptr_restrict: String },
    /// The kernel has no perf events, or not this one (a kernel without CONFIG_PERF_EVENTS, a
    /// seccomp filter that answers ENOSYS).
    #[error("profile withheld: perf_event_open is not available here ({0})")]
    Unsupported(io::Error),
    /// Anything else the sampler could not do, with what it was doing.
    #[error("profile withheld: {what}: {err}")]
    Io { what: String, err: io::Error },
}

impl ProfileError {
    pub(crate) fn io(what: impl Into<String>, err: io::Error) -> ProfileError {
        ProfileError::Io {
            what: what.into(),
            err,
        }
    }
}

/// A sysctl's value as text, or why it could not be read (for the error's words only).
pub(crate) fn sysctl(path: &str) -> String {
    match std::fs::read_to_string(path) {
        Ok(s) => s.trim().to_string(),
        Err(e) => format!("unreadable ({e})"),
    }
}
