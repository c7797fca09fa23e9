//! netrig's documents: the types only, and the pure computations on them.
//!
//! - [`result`]: one test's result, as `--json` prints it (a contract with scripts:
//!   docs/result.schema.json).
//! - [`experiment`]: an experiment, as `netrig experiment --json` prints it and `--save` keeps it:
//!   its [`plan`] (with its [`sweep`]s), every run's whole result, the set-up commands as they
//!   ran, each point's estimates and comparisons ([`analysis`], over the [`metric`]s), a rate
//!   sweep's [`saturation`] points.
//! - [`cell`]: text made safe for a CSV cell a spreadsheet will open.
//!
//! Plots and every exporter (netrig-plot, netrig-export) read these and depend on nothing that
//! runs a test; netrig-report builds a result, netrig-experiment runs an experiment.

pub mod analysis;
pub mod cell;
pub mod experiment;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod metric;
pub mod plan;
pub mod profile_analysis;
pub mod result;
pub mod saturation;
pub mod sweep;
