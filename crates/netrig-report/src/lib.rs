//! One result model, many exporters.
//!
//! [`assemble()`] merges what the two ends measured into a [`TestResult`]:
//! for each flow the receiving end's count is the one reported, the sending
//! end's is kept beside it. Exporters ([`table`], [`json`]) only format.

pub mod assemble;
pub mod checks;
pub mod json;
pub mod model;
pub mod table;
pub mod witness;

pub use assemble::{assemble, merge_interval, Side};
pub use model::*;
