//! tcp-crr's table (and tcp-cc's): the request/response kinds' (`txn/table.rs`), with how
//! its connections ended and were bound, and its failures in the interim
//! rows.

use super::CrrConfig;
use crate::txn::table::{interval_header, interval_rows, render};
use netrig_report::table::Layout;
use netrig_report::TestResult;
use std::fmt::Write;

/// Request/response with a connection per transaction: failures too.
pub(crate) static CONNECT_TRANSACTIONS: Layout = Layout {
    summary: |r| render(r, connection_lines),
    interval_header: || interval_header(true),
    interval_rows: |i, per_flow| interval_rows(i, per_flow, true),
};

/// Which end closed each connection first (`--close-first`), and the ports
/// the client bound them to (`--local-ports`).
fn connection_lines(out: &mut String, r: &TestResult) {
    let c: CrrConfig = r.config.kind_part().unwrap_or_default();
    // netperf's test of the same name: TCP_CRR, or TCP_CC (tcp-cc, its connections without data).
    let netperf = r.test.to_uppercase().replace('-', "_");
    match c.close_first.as_deref() {
        Some("responder") => {
            let _ = writeln!(
                out,
                "the agent closed each connection first (--close-first responder, as netperf {netperf}): \
                 TIME_WAIT on the agent's host; the client waited for that close"
            );
        }
        Some("requester-reset") => {
            let _ = writeln!(
                out,
                "the client ended each connection with a reset once it had the response (--close-first \
                 requester-reset, SO_LINGER 0, as neper tcp_crr's default): no TIME_WAIT on either host"
            );
        }
        Some(_) => {
            let _ = writeln!(
                out,
                "the client closed each connection first (--close-first requester, as neper tcp_crr --time-wait): \
                 TIME_WAIT on the client's host"
            );
        }
        None => {}
    }
    if let Some(range) = &c.local_ports {
        let _ = writeln!(
            out,
            "the client bound each connection to the next local port of {range} in turn (--local-ports, as \
             netperf {netperf}), instead of the kernel picking one inside connect()"
        );
    }
}
