//! Exporters: how a run reaches a person or a program, every output format in one place
//! (hyperfine's `export/`). Every format of a test implements [`Exporter`]: it sees each
//! interval as it closes, then the result (or the error that ended the run), and writes to the
//! stream it is given. Each format lives in its own module: the table ([`table`], laid out as
//! the kind says: [`TableLayout`]), [`json`], [`json_stream`], [`csv`] and `html` (feature
//! `html`, on by default: it draws plots); an experiment's table and CSV are [`experiment`]'s.
//!
//! It reads the documents (netrig-document) and nothing that runs a test.

pub mod csv;
pub mod experiment;
#[cfg(feature = "html")]
pub mod html;
pub mod json;
pub mod json_stream;
pub mod openmetrics;
pub mod table;

pub use table::TableLayout;

use netrig_document::result::{IntervalResult, TestResult};
use std::io::{self, Write};

/// One output format.
pub trait Exporter {
    /// An interval of the test in progress, as both ends closed it.
    fn interval(&mut self, _out: &mut dyn Write, _interval: &IntervalResult) -> io::Result<()> {
        Ok(())
    }

    /// The test's result.
    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()>;

    /// The run failed with `message` (the caller reports it on stderr too).
    fn error(&mut self, _out: &mut dyn Write, _message: &str) -> io::Result<()> {
        Ok(())
    }
}

/// The formats the CLI offers for one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Interim rows as they come, then netperf's table (the default).
    Table,
    /// One JSON document at the end (`--json`).
    Json,
    /// A JSON line per interval as it comes, then the result (`--json-stream`).
    JsonStream,
    /// A CSV row per flow and sum, of each interval and of the window (`--csv`).
    Csv,
}

/// The exporter of `format` for a run laid out as `layout` with `flows`
/// flows in all directions.
pub fn exporter(format: Format, layout: &'static dyn TableLayout, flows: usize) -> Box<dyn Exporter> {
    match format {
        Format::Table => Box::new(table::TableExporter::new(layout, flows)),
        Format::Json => Box::new(json::JsonExporter),
        Format::JsonStream => Box::new(json_stream::JsonStreamExporter),
        Format::Csv => Box::new(csv::CsvExporter::default()),
    }
}
