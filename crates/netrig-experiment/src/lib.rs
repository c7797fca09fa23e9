//! Experiments, not runs: sweeps of any numeric option, iterations until
//! confident, interleaved comparisons of arms with set-up and tear-down
//! commands, saved results and regression checks, all on the run API.

pub mod lab_counters;
pub mod lab_one_end;

pub mod analysis;
pub mod command;
pub mod document;
pub mod execute;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod group;
pub mod metric;
pub mod multi;
pub mod output;
pub mod plan;
pub mod runner;
pub mod saturation;
pub mod store;
pub mod study;
pub mod sweep;
