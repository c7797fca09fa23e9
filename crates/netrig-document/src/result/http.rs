//! The http kind's figures (`summary.http`): what a web load generator
//! reports, over the measured window, and the whole run's totals beside them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An HTTP load run over its measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpSummary {
    /// "closed" (wrk) or "open" (wrk2, httperf: `--rate`).
    pub load: String,
    /// A new connection for each request (`--new-conn`).
    pub new_conn: bool,
    /// Connections (`-c`; open loop with `--new-conn`: the most in flight) and threads (`-t`).
    pub connections: u32,
    pub threads: u32,
    /// The window: seconds from the start to its start, and its length.
    pub window_start_s: f64,
    pub window_s: f64,
    /// What ended the run: "duration" (-l), "count" (-n answered or
    /// failed), "count_cut_short" (-l ran out before -n).
    pub ended: String,
    /// Open loop: the rate asked for, requests/s (null: closed loop).
    pub rate_asked: Option<f64>,
    /// Requests whose last byte was written in the window, and per second
    /// of it: the achieved request rate.
    pub requests_sent: u64,
    pub requests_per_s: f64,
    /// Whole responses received in the window, whatever their status, and
    /// per second: httperf's reply rate (a 404 is a reply).
    pub responses: u64,
    pub replies_per_s: f64,
    /// Of those, the ones with a 2xx or 3xx status, and per second: the
    /// headline (`summary.transactions` and `transactions_per_s` are these,
    /// so a rate sweep's saturation and plots follow the successful replies).
    #[serde(default)]
    pub success_responses: u64,
    #[serde(default)]
    pub success_per_s: f64,
    /// Responses with any other status (wrk's "Non-2xx or 3xx responses").
    #[serde(default)]
    pub non_success_responses: u64,
    /// The window's responses by status class ("1xx" .. "5xx"; a code
    /// outside 100..=599 is counted under "other").
    #[serde(default)]
    pub status_classes: BTreeMap<String, u64>,
    /// Bytes of the window's responses, heads included (after TLS), and
    /// that × 8 per second: the transfer rate counts headers, as wrk's.
    pub response_bytes: u64,
    pub transfer_bps: f64,
    /// Of those, body payload bytes, and their rate.
    pub body_bytes: u64,
    pub body_bps: f64,
    /// Request bytes written in the window.
    pub request_bytes: u64,
    /// Connections opened in the window.
    pub connections_opened: u64,
    /// The window's responses by status code ("200": n).
    pub statuses: BTreeMap<String, u64>,
    /// Responses with a 4xx and a 5xx status (server errors by status are in `statuses`).
    pub client_error_responses: u64,
    pub server_error_responses: u64,
    /// Requests that failed in the window, by cause.
    pub errors: HttpErrors,
    /// Open loop: requests the schedule could not send on time (null:
    /// closed loop). `summary.schedule` has due, late and the delays.
    pub unsent: Option<HttpUnsent>,
    /// The whole run, warm-up and the drain after the window included:
    /// what the server saw.
    pub total: HttpTotals,
    /// HTTPS: connections whose TLS failed (the server's certificate
    /// refused, an alert, a peer not speaking TLS), by reason, over the
    /// whole run; those with a request on them are in `errors.other`.
    #[serde(default)]
    pub tls_errors: BTreeMap<String, u64>,
    /// Figures not measured, each with the reason.
    pub withheld: Vec<String>,
    /// `--clients N`: each client process's part (the figures above are
    /// their sum); absent for one client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<Vec<HttpClientPart>>,
}

/// One client process's part of a `--clients` run, over its own window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpClientPart {
    /// Which client (0-based) and its source address.
    pub client: u32,
    pub address: String,
    pub connections: u32,
    pub requests_sent: u64,
    pub responses: u64,
    pub replies_per_s: f64,
    /// Requests that failed, all causes.
    pub errors: u64,
}

/// Failed requests by cause, as httperf names them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpErrors {
    /// No connection, or no whole response, within `--timeout` (or ETIMEDOUT).
    pub client_timeout: u64,
    /// ECONNREFUSED.
    pub connect_refused: u64,
    /// ECONNRESET or EPIPE, or the server closed before the response ended.
    pub connect_reset: u64,
    /// EADDRNOTAVAIL: no local port left (httperf's addrunavail).
    pub no_local_port: u64,
    /// EMFILE or ENFILE: no file descriptor left (httperf's fd-unavail).
    pub no_descriptor: u64,
    /// A response that broke HTTP/1.1 or a bound (--max-header, --max-body), or bytes nobody asked for.
    pub bad_response: u64,
    /// Anything else (TLS, no route, ...).
    pub other: u64,
    pub total: u64,
}

/// Open loop: requests not sent on time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpUnsent {
    /// Due in the window but not sent when it closed (still waiting for a connection).
    pub unsent: u64,
    /// Never queued: due while 1,048,576 requests already waited on that thread.
    pub skipped: u64,
    /// The rule: "late" is sent more than 1 ms after due.
    pub rule: String,
}

/// The whole run's counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpTotals {
    pub requests_sent: u64,
    /// Request bytes written (HTTP bytes: the plaintext under TLS).
    #[serde(default)]
    pub request_bytes: u64,
    pub responses: u64,
    pub response_bytes: u64,
    pub connections_opened: u64,
    pub errors: u64,
    /// Requests still unanswered when the drain after the window ended.
    pub abandoned: u64,
}

impl HttpErrors {
    /// Another run's (a `--clients` process's) failures added to these.
    pub fn add(&mut self, o: &HttpErrors) {
        self.client_timeout += o.client_timeout;
        self.connect_refused += o.connect_refused;
        self.connect_reset += o.connect_reset;
        self.no_local_port += o.no_local_port;
        self.no_descriptor += o.no_descriptor;
        self.bad_response += o.bad_response;
        self.other += o.other;
        self.total += o.total;
    }
}

impl HttpTotals {
    /// Another run's whole-run counts added to these.
    pub fn add(&mut self, o: &HttpTotals) {
        self.requests_sent += o.requests_sent;
        self.request_bytes += o.request_bytes;
        self.responses += o.responses;
        self.response_bytes += o.response_bytes;
        self.connections_opened += o.connections_opened;
        self.errors += o.errors;
        self.abandoned += o.abandoned;
    }
}

/// A status code's class: "1xx" .. "5xx", or "other" outside 100..=599.
pub fn status_class(code: u16) -> &'static str {
    match code {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}

/// A successful response: 2xx or 3xx (what wrk does not count as "Non-2xx or 3xx").
pub fn is_success(code: u16) -> bool {
    (200..400).contains(&code)
}

impl HttpSummary {
    /// Fills the figures drawn from `statuses` and `window_s`: the classes,
    /// the successful responses and their rate, the 4xx and 5xx counts.
    pub fn classify(&mut self) {
        let mut classes: BTreeMap<String, u64> = ["1xx", "2xx", "3xx", "4xx", "5xx"]
            .iter()
            .map(|c| (c.to_string(), 0))
            .collect();
        let (mut ok, mut other) = (0u64, 0u64);
        for (s, n) in &self.statuses {
            let code: u16 = s.parse().unwrap_or(0);
            *classes.entry(status_class(code).to_string()).or_default() += n;
            if is_success(code) {
                ok += n;
            } else {
                other += n;
            }
        }
        self.client_error_responses = classes["4xx"];
        self.server_error_responses = classes["5xx"];
        self.status_classes = classes;
        self.success_responses = ok;
        self.non_success_responses = other;
        self.success_per_s = if self.window_s > 0.0 {
            ok as f64 / self.window_s
        } else {
            0.0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers 404 to everything: every reply counted, none
    /// of them a success, the classes say which.
    #[test]
    fn statuses_are_classified_and_only_2xx_3xx_succeed() {
        let mut h = HttpSummary {
            window_s: 2.0,
            responses: 1010,
            statuses: [("404", 1000), ("200", 6), ("301", 2), ("503", 1), ("999", 1)]
                .iter()
                .map(|(s, n)| (s.to_string(), *n))
                .collect(),
            ..Default::default()
        };
        h.classify();
        assert_eq!(h.success_responses, 8);
        assert_eq!(h.success_per_s, 4.0);
        assert_eq!(h.non_success_responses, 1002);
        assert_eq!((h.client_error_responses, h.server_error_responses), (1000, 1));
        assert_eq!(h.status_classes["4xx"], 1000);
        assert_eq!(h.status_classes["3xx"], 2);
        assert_eq!(h.status_classes["1xx"], 0);
        assert_eq!(h.status_classes["other"], 1);
    }
}
