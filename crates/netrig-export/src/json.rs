//! `--json`: one pretty document on stdout when the test is over.

use super::Exporter;
use netrig_document::result::TestResult;
use serde::Serialize;
use std::io::{self, Write};

/// Pretty JSON of any result (a test, or the quick suite).
pub fn to_json<T: Serialize>(result: &T) -> String {
    serde_json::to_string_pretty(result).expect("results always serialize")
}

/// Writes the result document, nothing before it, straight to `out`: with
/// 19,000 flows the document is some 60 MB, which a `String` first would
/// hold (and, growing, copy) on top of the result itself.
#[derive(Debug, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(1 << 16, out);
        serde_json::to_writer_pretty(&mut out, result).map_err(io::Error::from)?;
        writeln!(out)?;
        out.flush()
    }
}
