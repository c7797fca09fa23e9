//! `--json-stream` (iperf3's): one compact JSON object per line,
//! `{"event": "interval", "data": I}` as each interval closes, then
//! `{"event": "end", "data": R}` or `{"event": "error", "data": "message"}`.

use super::Exporter;
use netrig_document::result::{IntervalResult, TestResult};
use serde::Serialize;
use std::io::{self, Write};

/// One line: `{"event": EVENT, "data": DATA}`, compact, without a newline.
pub fn event_line<T: Serialize>(event: &str, data: &T) -> String {
    #[derive(Serialize)]
    struct Event<'a, T> {
        event: &'a str,
        data: &'a T,
    }
    serde_json::to_string(&Event { event, data }).expect("results always serialize")
}

/// Writes a line per event, flushed as it comes.
#[derive(Debug, Default)]
pub struct JsonStreamExporter;

impl Exporter for JsonStreamExporter {
    fn interval(&mut self, out: &mut dyn Write, interval: &IntervalResult) -> io::Result<()> {
        writeln!(out, "{}", event_line("interval", interval))?;
        out.flush()
    }

    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()> {
        writeln!(out, "{}", event_line("end", result))
    }

    fn error(&mut self, out: &mut dyn Write, message: &str) -> io::Result<()> {
        writeln!(out, "{}", event_line("error", &message))
    }
}
