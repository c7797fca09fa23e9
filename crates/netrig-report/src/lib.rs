//! One result model, many exporters.
//!
//! [`assemble()`] merges what the two ends measured into a [`TestResult`]:
//! for each flow the receiving end's count is the one reported, the sending
//! end's is kept beside it. Exporters ([`export`]: the table, JSON and the JSON stream, each an
//! [`export::Exporter`]) only format.

pub mod assemble;
pub mod checks;
pub mod export;
pub mod half_close;
pub mod kind;
pub mod model;
pub mod one_way;
pub mod path_element;
pub mod server_host;
pub mod table;
pub mod witness;

/// The JSON helpers, where they were before the exporters had a module.
pub use export::json::to_json;
pub use export::json_stream::event_line;

pub use assemble::{assemble, merge_interval};
pub use kind::{KindReport, Side, TableLayout};
pub use model::*;
