//! syn-flood's table: the SYNs sent against the rate asked, and the rate
//! in each interval.

use super::SynFloodConfig;
use netrig_report::{IntervalResult, TableLayout, TestResult};
use std::fmt::Write;

pub struct Layout;

pub static LAYOUT: Layout = Layout;

impl TableLayout for Layout {
    fn render(&self, r: &TestResult) -> String {
        let mut o = String::new();
        let s = &r.summary;
        let _ = writeln!(
            o,
            "SYN FLOOD to {} ({}): {} SYNs in {:.3} s = {:.0} SYNs/s (asked {:.0}/s)",
            r.agent.address,
            r.agent.software,
            s.transactions.unwrap_or(0),
            s.elapsed_s,
            s.transactions_per_s.unwrap_or(0.0),
            r.config
                .kind_part::<SynFloodConfig>()
                .and_then(|c| c.rate)
                .unwrap_or(0.0)
        );
        o
    }
    fn interval_header(&self) -> String {
        format!("{:>16} {:>12}", "Interval (s)", "SYNs/s")
    }
    fn interval_rows(&self, i: &IntervalResult, _: bool) -> String {
        format!(
            "{:>7.2}-{:<8.2} {:>12.0}\n",
            i.start_s,
            i.end_s,
            i.transactions_per_s.unwrap_or(0.0)
        )
    }
}
