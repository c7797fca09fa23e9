//! Where the kernel spends its time (issue #42): a profile of every CPU over a window.
//!
//! [`Sampler`] opens a cpu-clock sampling event on every online CPU (perf_event_open, call
//! chains in kernel and user space), enables it exactly around a window and reads the ring
//! buffers; [`Running::stop`] gives a [`Profile`]: stacks of function names (kernel ones from
//! /proc/kallsyms, this process's from its own symbols) with their counts, split by this
//! test's threads against the rest of the host, by softirq against process context, and by
//! subsystem ([`groups`]), with the top functions, a witness against /proc/stat, and the
//! kernel's counts of network softirq work over the same window ([`softnet`]).
//!
//! `watch::ProfileWatch` (feature `watch`) samples one end's measured window (told by the engine's window
//! marks) and gives it as the result and the wire hold it (netrig-proto's `report::profile`);
//! the client and the agent both use it.
//!
//! Only names leave this crate: a [`Profile`] holds no address. Where the host does not allow
//! a profile, [`ProfileError`] says why, for the caller to withhold it with that reason.
//! docs/PROFILE.md.

mod error;
pub mod groups;
mod kallsyms;
mod profile;
mod sampler;
mod selfsyms;
pub mod softnet;
mod symbolize;
mod sys;
#[cfg(feature = "watch")]
pub mod watch;
pub mod witness;

pub use error::ProfileError;
pub use groups::Group;
pub use kallsyms::Kallsyms;
pub use profile::{Count, FunctionCount, Profile, Split, Stack};
pub use sampler::{online_cpus, Config, Halted, Ours, Running, Sampler};
pub use softnet::{NetCounts, SoftirqCpu, SoftnetCpu};
pub use witness::{Verdict, Witness};
