//! A test's result made from both ends' reports, and judged.
//!
//! [`assemble()`] merges what the two ends measured into a [`TestResult`]:
//! for each flow the receiving end's count is the one reported, the sending
//! end's is kept beside it. The witness's judging sits beside it: [`witness`]
//! (netrig's figures against the kernel's counts), [`checks`] (each end's
//! warnings), [`one_way`] (the one-way delay from both ends' stamps) and
//! [`server_host`] (the server host's view attached and judged). Each kind's
//! part ([`KindReport`]) and its table layouts ([`table`]) are here too.
//!
//! The result's types are netrig-document's, re-exported here ([`model`]); how a result
//! reaches a person or a program (the table, JSON, CSV, HTML) is netrig-export's.

pub mod assemble;
pub mod checks;
pub mod kind;
pub mod one_way;
pub mod server_host;
pub mod witness;

/// The result's types, where they were before they had a crate of their own.
pub use netrig_document::result as model;
pub use netrig_document::result::{half_close, path_element};
pub use netrig_export::json::to_json;
pub use netrig_export::json_stream::event_line;
/// The JSON helpers, where they were before the exporters had a crate.
/// The table kit the kinds' layouts are built of (netrig-export's).
pub use netrig_export::table::kit as table;

pub use assemble::{assemble, merge_interval};
pub use kind::{KindReport, NewConfig, Side, TableLayout};
pub use model::*;
