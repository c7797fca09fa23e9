//! half-close's table: the connections opened, the server's sockets from
//! them at their peak, and how long until they were gone; no interim rows.

use netrig_report::{IntervalResult, TableLayout, TestResult};
use std::fmt::Write;

pub struct Layout;

pub static LAYOUT: Layout = Layout;

impl TableLayout for Layout {
    fn render(&self, r: &TestResult) -> String {
        let mut o = String::new();
        let Some(h) = &r.summary.half_close else {
            return "no half-close figures in this result\n".into();
        };
        let _ = writeln!(
            o,
            "HALF-CLOSE to {} ({}), {}: {} of {} connections opened; the clients all gone {:.2} s in",
            r.agent.address, r.agent.software, h.how, h.opened, h.connections_asked, h.away_at_s
        );
        let _ = writeln!(
            o,
            "  the server's sockets from them (every 100 ms, {} samples): peak FIN_WAIT2 {}, CLOSE_WAIT {}, FIN_WAIT1 {}, LAST_ACK {}, ESTABLISHED {}",
            h.samples.len(),
            h.peak.fin_wait2,
            h.peak.close_wait,
            h.peak.fin_wait1,
            h.peak.last_ack,
            h.peak.established
        );
        let fin = h
            .server_fin_timeout_s
            .map_or("unread".to_string(), |t| format!("{t} s"));
        let _ = match (h.gone_after_s, &h.gone_withheld) {
            (Some(g), _) => writeln!(
                o,
                "  gone {g:.2} s after the clients went away (the server's tcp_fin_timeout: {fin})"
            ),
            (None, why) => writeln!(
                o,
                "  time until gone withheld: {} (tcp_fin_timeout: {fin})",
                why.as_deref().unwrap_or("not measured")
            ),
        };
        o
    }
    fn interval_header(&self) -> String {
        String::new()
    }
    fn interval_rows(&self, _: &IntervalResult, _: bool) -> String {
        String::new()
    }
}
