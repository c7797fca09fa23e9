//! netrig's lab (docs/LAB.md): a topology declared in TOML, built in network namespaces with
//! the `ip`, `tc`, `nft` and `sysctl` tools (every command's exit checked, the failing one named),
//! an agent (`netrig serve`) in each host, a witness that measures each shaped link, and a
//! teardown by run id that leaves nothing behind. Linux only; needs root or CAP_NET_ADMIN and
//! CAP_SYS_ADMIN.
//!
//! Where the kernel has no netem, netrig's own path element ([`element`]) builds delay, jitter,
//! loss, duplication and reordering on a link; [`topology`] builds parallel links, DSCP classes
//! and conntrack_max. Not built yet: RED, plan integration (tests naming lab hosts), groups,
//! one-way delay, the HTML diagram.

pub mod witness;

pub mod arm_path;
pub mod arm_shape;
pub mod build;
pub mod ctfill;
pub mod element;
pub mod element_plan;
pub mod lan_element;
pub mod model;
pub mod overload;
pub mod pathmodel;
pub mod pathsched;
pub mod plan;
#[cfg(test)]
mod port_tests;
pub mod steps;
pub mod topology;

pub use build::{down, down_stale, exec, list, status_text, up, LabState, UpOptions};
pub use model::{parse, Topology};
pub use plan::SYSCTLS;

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks a lab being built or held in the foreground to stop (and be torn down); the CLI calls it
/// from its Ctrl-C handler.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The lab's description is wrong.
    #[error("lab: {0}")]
    Spec(String),
    /// Properties this kernel cannot build, each by name.
    #[error("lab: refused (nothing was built):\n  {}", .0.join("\n  "))]
    Refused(Vec<String>),
    /// Not allowed to build labs.
    #[error("lab: {0}")]
    Rights(String),
    /// A command failed.
    #[error("lab: `{cmd}` failed ({status}): {stderr}")]
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("lab: {0}")]
    Other(String),
    #[error("lab: interrupted (Ctrl-C); the lab was torn down")]
    Interrupted,
}

impl LabError {
    /// An error in what the user asked for (exit status 2), not in building it.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            LabError::Spec(_) | LabError::Refused(_) | LabError::Rights(_)
        )
    }
}
