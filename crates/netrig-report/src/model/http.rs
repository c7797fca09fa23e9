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
    /// Whole responses received in the window, and per second: the reply
    /// rate (`summary.transactions` is the same count).
    pub responses: u64,
    pub replies_per_s: f64,
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
        self.responses += o.responses;
        self.response_bytes += o.response_bytes;
        self.connections_opened += o.connections_opened;
        self.errors += o.errors;
        self.abandoned += o.abandoned;
    }
}
