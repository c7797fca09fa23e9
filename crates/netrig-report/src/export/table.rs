//! The default output: interim rows as each interval closes (per flow when
//! there are 2 to 16 flows, then a sum per direction), then the result's
//! table, both laid out as the test's kind says ([`TableLayout`]).

use super::Exporter;
use crate::kind::TableLayout;
use crate::{IntervalResult, TestResult};
use std::io::{self, Write};

pub struct TableExporter {
    layout: &'static dyn TableLayout,
    per_flow: bool,
    header: bool,
}

impl TableExporter {
    /// For a test laid out as `layout` with `flows` flows in all directions.
    pub fn new(layout: &'static dyn TableLayout, flows: usize) -> TableExporter {
        TableExporter {
            layout,
            per_flow: (2..=16).contains(&flows),
            header: false,
        }
    }
}

impl Exporter for TableExporter {
    fn interval(&mut self, out: &mut dyn Write, interval: &IntervalResult) -> io::Result<()> {
        if !self.header {
            writeln!(out, "{}", self.layout.interval_header())?;
            self.header = true;
        }
        write!(out, "{}", self.layout.interval_rows(interval, self.per_flow))?;
        out.flush()
    }

    fn result(&mut self, out: &mut dyn Write, result: &TestResult) -> io::Result<()> {
        if self.header {
            writeln!(out)?;
        }
        write!(out, "{}", self.layout.render(result))?;
        if let Some(h) = &result.server_host {
            write!(out, "{}", h.table())?;
        }
        Ok(())
    }

    fn error(&mut self, out: &mut dyn Write, _message: &str) -> io::Result<()> {
        if self.header {
            writeln!(out)?;
        }
        Ok(())
    }
}
