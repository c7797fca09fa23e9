//! How an http run reads as a table: wrk's summary, with httperf's rates
//! and errors by cause.

use netrig_report::{IntervalResult, TableLayout, TestResult};
use std::fmt::Write;

pub struct HttpLayout;

pub static HTTP: HttpLayout = HttpLayout;

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

impl TableLayout for HttpLayout {
    fn render(&self, r: &TestResult) -> String {
        let mut o = String::new();
        let Some(h) = &r.summary.http else {
            return "no http figures in this result\n".into();
        };
        let load = match h.rate_asked {
            Some(rate) => format!("open loop at {rate} requests/s"),
            None => "closed loop".into(),
        };
        let _ = writeln!(
            o,
            "HTTP TEST to {}: {load}, {} connection(s) on {} thread(s), {}{}",
            r.agent.address,
            h.connections,
            h.threads,
            if h.new_conn {
                "a new connection per request"
            } else {
                "keep-alive"
            },
            if h.window_start_s > 0.0 {
                format!(", first {} s omitted", h.window_start_s)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            o,
            "window {:.3} s (ended by {}): {} requests sent, {} responses, {} errors",
            h.window_s, h.ended, h.requests_sent, h.responses, h.errors.total
        );
        let _ = writeln!(o, "  Requests/sec (sent)     {:>14.2}", h.requests_per_s);
        let _ = writeln!(o, "  Replies/sec (2xx, 3xx)  {:>14.2}", h.success_per_s);
        let _ = writeln!(
            o,
            "  Replies/sec (any)       {:>14.2}  (every status; 4xx {}, 5xx {})",
            h.replies_per_s, h.client_error_responses, h.server_error_responses
        );
        let _ = writeln!(
            o,
            "  Transfer/sec            {:>14.2} MB  (heads and bodies; bodies alone {:.2} MB)",
            h.transfer_bps / 8.0 / 1e6,
            h.body_bps / 8.0 / 1e6
        );
        match &r.summary.latency_us {
            Some(l) => {
                let _ = writeln!(
                    o,
                    "  Latency ms              mean {} stdev {} min {} max {}",
                    ms(l.mean),
                    ms(l.stddev),
                    ms(l.min),
                    ms(l.max)
                );
                let _ =
                    writeln!(
                    o,
                    "  Latency percentiles ms  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({} responses{})",
                    ms(l.p50),
                    ms(l.p90),
                    ms(l.p99),
                    ms(l.p999),
                    ms(l.max),
                    l.count,
                    if h.rate_asked.is_some() { ", timed from when each was due" } else { "" }
                );
            }
            None => {
                let _ = writeln!(o, "  Latency                 withheld: no response in the window");
            }
        }
        let statuses: Vec<String> = h.statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        let _ = writeln!(
            o,
            "  Responses by status     {}",
            if statuses.is_empty() {
                "none".into()
            } else {
                statuses.join(", ")
            }
        );
        if !h.status_classes.is_empty() {
            let classes: Vec<String> = h.status_classes.iter().map(|(c, n)| format!("{c} {n}")).collect();
            let _ = writeln!(o, "  Reply status            {}", classes.join(" "));
        }
        if h.non_success_responses > 0 {
            let _ = writeln!(o, "  Non-2xx or 3xx responses {}", h.non_success_responses);
        }
        let e = &h.errors;
        let _ = writeln!(
            o,
            "  Errors                  client-timo {} connrefused {} connreset {} addrunavail {} fd-unavail {} \
             bad-response {} other {}",
            e.client_timeout, e.connect_refused, e.connect_reset, e.no_local_port, e.no_descriptor, e.bad_response,
            e.other
        );
        for (reason, n) in &h.tls_errors {
            let _ = writeln!(o, "  TLS failures            {n}: {reason}");
        }
        if let (Some(sc), Some(u)) = (&r.summary.schedule, &h.unsent) {
            let _ = writeln!(
                o,
                "  Schedule                {} due, {} late (> 1 ms), {} unsent, {} skipped; behind by mean {:.1} us, \
                 max {:.1} us",
                sc.due, sc.late, u.unsent, u.skipped, sc.mean_behind_us, sc.max_behind_us
            );
        }
        if let Some(c) = &r.summary.cpu.local {
            let _ = writeln!(
                o,
                "  This host's CPU         {:.1} % (busiest CPU {:.1} %){}",
                c.busy_pct,
                c.busiest_cpu_pct,
                r.summary
                    .service_demand
                    .local
                    .map_or_else(String::new, |d| format!(", {d:.2} us/response"))
            );
        }
        let _ = writeln!(
            o,
            "  Whole run               {} sent, {} responses, {} bytes, {} connections, {} errors, {} abandoned",
            h.total.requests_sent,
            h.total.responses,
            h.total.response_bytes,
            h.total.connections_opened,
            h.total.errors,
            h.total.abandoned
        );
        for c in h.clients.iter().flatten() {
            let _ = writeln!(
                o,
                "  Client {:<3} {:<15} {} connection(s), {} sent, {} responses ({:.2}/s), {} errors",
                c.client, c.address, c.connections, c.requests_sent, c.responses, c.replies_per_s, c.errors
            );
        }
        // `--profile`: where this host's busy CPU went over the window, as other kinds show it.
        o.push_str(&netrig_report::table::profile(r));
        o.push_str(&netrig_report::table::witness_lines(
            r,
            "over the whole run (warm-up and drain included)",
        ));
        o
    }

    fn interval_header(&self) -> String {
        format!(
            "{:<16} {:>14} {:>12} {:>14} {:>8}",
            "Interval (s)", "2xx-3xx", "2xx-3xx/s", "10^6bits/sec", "Errors"
        )
    }

    fn interval_rows(&self, i: &IntervalResult, _per_flow: bool) -> String {
        let secs = i.end_s - i.start_s;
        let rps = i.transactions_per_s.unwrap_or(0.0);
        format!(
            "{:<16} {:>14} {:>12.1} {:>14.2} {:>8}\n",
            format!("{:.2}-{:.2}", i.start_s, i.end_s),
            (rps * secs).round() as u64,
            rps,
            i.throughput_bps / 1e6,
            i.failed_transactions.unwrap_or(0)
        )
    }
}
