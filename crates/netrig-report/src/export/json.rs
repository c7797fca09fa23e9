//! `--json`: one pretty document on stdout when the test is over.

use super::Exporter;
use crate::TestResult;
use serde::Serialize;
use std::io::{self, Write};

/// Pretty JSON of any result (a test, or the quick suite).
pub fn to_json<T: Serialize>(result: &T) -> String {
    serde_json::to_string_pretty(result).expect("results always serialize")
}

/// Writes the result document, nothing before it.
#[derive(Debug, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()> {
        writeln!(out, "{}", to_json(result))
    }
}
