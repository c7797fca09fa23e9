//! Experiments, not runs: sweeps of any numeric option, iterations until
//! confident, interleaved comparisons of arms with set-up and tear-down
//! commands, saved results and regression checks, all on the run API.
//!
//! The experiment document, its plan and sweeps, and the analysis on them are
//! netrig-document's, re-exported here where they were; how an experiment is
//! printed (its table, CSV, HTML) is netrig-export's.

pub mod lab_counters;
pub mod lab_one_end;

pub mod command;
pub mod execute;
pub mod group;
pub mod multi;
pub mod runner;
pub mod store;
pub mod study;

/// The experiment document (netrig-document's `experiment`), where it was.
pub use netrig_document::experiment as document;
#[cfg(any(test, feature = "fixtures"))]
pub use netrig_document::fixtures;
pub use netrig_document::{analysis, metric, plan, profile_analysis, saturation, sweep};
