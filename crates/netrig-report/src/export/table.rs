//! The default output: interim rows as each interval closes (per flow when
//! there are 2 to 16 flows, then a sum per direction), then netperf's table
//! ([`crate::table::render`]).

use super::Exporter;
use crate::table::{interval_header, interval_rows, render, IntervalColumns};
use crate::{IntervalResult, TestResult};
use netrig_proto::TestSpec;
use std::io::{self, Write};

#[derive(Debug)]
pub struct TableExporter {
    columns: IntervalColumns,
    per_flow: bool,
    header: bool,
}

impl TableExporter {
    pub fn for_spec(spec: &TestSpec) -> TableExporter {
        TableExporter::new(spec.kind, spec.flows as usize * spec.directions().len())
    }

    /// For a test of `kind` with `flows` flows in all directions.
    pub fn new(kind: netrig_proto::TestKind, flows: usize) -> TableExporter {
        TableExporter {
            columns: IntervalColumns::for_kind(kind),
            per_flow: (2..=16).contains(&flows),
            header: false,
        }
    }
}

impl Exporter for TableExporter {
    fn interval(&mut self, out: &mut dyn Write, interval: &IntervalResult) -> io::Result<()> {
        if !self.header {
            writeln!(out, "{}", interval_header(self.columns))?;
            self.header = true;
        }
        write!(out, "{}", interval_rows(self.columns, interval, self.per_flow))?;
        out.flush()
    }

    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()> {
        if self.header {
            writeln!(out)?;
        }
        write!(out, "{}", render(result))
    }

    fn error(&mut self, out: &mut dyn Write, _message: &str) -> io::Result<()> {
        if self.header {
            writeln!(out)?;
        }
        Ok(())
    }
}
