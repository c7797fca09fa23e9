//! http: an HTTP/1.1 load generator against any server (wrk, wrk2,
//! httperf). It runs from the client alone: an agent refuses it. Its
//! connections are the spec's flows (`-c`, netrig's `-P`), its threads the
//! spec's workers (`-t`, netrig's `-T`).

use super::{Exchange, KindBounds, KindRules, Line, Offered, TcpOptions, Transport};
use crate::spec::{is_default, out_of_range, Bounds, Direction, SpecError, MAX_RATE};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The default response timeout (wrk's `--timeout` is 2 s too).
pub const DEFAULT_HTTP_TIMEOUT_S: f64 = 2.0;
/// `--timeout`'s range, in seconds.
pub const HTTP_TIMEOUT_RANGE_S: (f64, f64) = (0.001, 600.0);
/// The longest path, Host header and extra header line.
pub const MAX_HTTP_LINE: usize = 8192;
/// Most extra headers (`--header`).
pub const MAX_HTTP_HEADERS: usize = 64;
/// `--max-header`'s range and default: the response head's bytes.
pub const HTTP_HEADER_RANGE: (u32, u32) = (256, 1 << 20);
pub const DEFAULT_MAX_HEADER: u32 = 64 * 1024;
/// `--max-body`'s bound and default: a response body's bytes.
pub const MAX_HTTP_BODY: u64 = 1 << 40;
pub const DEFAULT_MAX_BODY: u64 = 1 << 30;
/// Most requests `-n` may ask for.
pub const MAX_HTTP_REQUESTS: u64 = 1_000_000_000_000;

/// The request's method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    #[default]
    Get,
    /// No response has a body.
    Head,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Head => "HEAD",
        }
    }
}

/// How requests are offered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum HttpLoad {
    /// Each connection sends its next request when the last response ends (wrk).
    #[default]
    Closed,
    /// `--rate` requests/s in total on a schedule (wrk2, httperf); latency
    /// timed from when each request was due.
    Open {
        rate: f64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        poisson: bool,
    },
}

/// HTTPS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTls {
    /// `--insecure`: take any certificate (a self-signed test server's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// `--cacert` (alias `--ca-file`): the CAs to trust (PEM); the system's bundle otherwise.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::ca_file"
    )]
    pub ca_file: Option<String>,
}

/// http's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// The server's host and port from `--url`, when `-H` is not given.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::url_host"
    )]
    pub url_host: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::url_port"
    )]
    pub url_port: Option<u16>,
    /// The Host header (and TLS server name): `--host-header`, `--url`'s
    /// host, or the server's address.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::host_header"
    )]
    pub host_header: Option<String>,
    /// The request target, e.g. "/bytes/1024".
    pub path: String,
    #[serde(default, skip_serializing_if = "is_default")]
    pub method: HttpMethod,
    /// Extra header lines, "Name: value" (`--header`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// Stop after this many requests (`-n`), within `-l`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::requests"
    )]
    pub requests: Option<u64>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub load: HttpLoad,
    /// A new connection for each request (`--new-conn`, `--close`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_conn: bool,
    /// Longest wait for a connection or a whole response (`--timeout`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::timeout_s"
    )]
    pub timeout_s: Option<f64>,
    /// Bounds on a response's head and body (`--max-header`, `--max-body`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::max_header"
    )]
    pub max_header: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::max_body"
    )]
    pub max_body: Option<u64>,
    /// HTTPS (`--https`, or an https:// `--url`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::spec::not_null::tls"
    )]
    pub tls: Option<HttpTls>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub tcp: TcpOptions,
}

impl HttpSpec {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s.unwrap_or(DEFAULT_HTTP_TIMEOUT_S))
    }
    pub fn rate(&self) -> Option<f64> {
        match self.load {
            HttpLoad::Open { rate, .. } => Some(rate),
            HttpLoad::Closed => None,
        }
    }
}

/// Text that goes on a request line or a header line as it is: bounded, no
/// line breaks or other control bytes.
fn check_line(option: &'static str, v: &str, what: &str) -> Result<(), SpecError> {
    if v.is_empty() || v.len() > MAX_HTTP_LINE || v.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(out_of_range(
            option,
            format!("{:?}", v.chars().take(40).collect::<String>()),
            format!("{what} of 1 to {MAX_HTTP_LINE} bytes without control characters"),
        ));
    }
    Ok(())
}

impl KindRules for HttpSpec {
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        Transport::Tcp
    }
    fn exchange(&self) -> Exchange {
        Exchange::Transactions
    }
    fn tcp(&self) -> Option<&TcpOptions> {
        Some(&self.tcp)
    }
    fn call_sizes(&self) -> (u32, u32) {
        (1, 1)
    }
    fn check(&self, _: &Bounds<'_>) -> Result<(), SpecError> {
        check_line("--path", &self.path, "a path")?;
        if !(self.path.starts_with('/') || self.path == "*") || self.path.contains(' ') {
            return Err(out_of_range(
                "--path",
                &self.path,
                "a path starting with / and without spaces",
            ));
        }
        if let Some(h) = &self.host_header {
            check_line("--host-header", h, "a host")?;
        }
        if let Some(h) = &self.url_host {
            check_line("--url", h, "a host")?;
        }
        if self.headers.len() > MAX_HTTP_HEADERS {
            return Err(out_of_range(
                "--header",
                self.headers.len(),
                format!("at most {MAX_HTTP_HEADERS} headers"),
            ));
        }
        for h in &self.headers {
            check_line("--header", h, "a \"Name: value\" line")?;
            let name = h.split(':').next().unwrap_or("");
            if !h.contains(':') || name.is_empty() || name.bytes().any(|b| b == b' ' || b == b'\t') {
                return Err(out_of_range("--header", h, "\"Name: value\""));
            }
        }
        if let Some(n) = self.requests {
            if n == 0 || n > MAX_HTTP_REQUESTS {
                return Err(out_of_range(
                    "-n/--requests",
                    n,
                    format!("1..={MAX_HTTP_REQUESTS}"),
                ));
            }
        }
        if let HttpLoad::Open { rate, .. } = self.load {
            if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
                return Err(out_of_range(
                    "--rate",
                    rate,
                    format!("(0, {MAX_RATE}] requests/s"),
                ));
            }
        }
        let (lo, hi) = HTTP_TIMEOUT_RANGE_S;
        if let Some(t) = self
            .timeout_s
            .filter(|t| !(t.is_finite() && (lo..=hi).contains(t)))
        {
            return Err(out_of_range("--timeout", t, format!("[{lo}, {hi}] seconds")));
        }
        let (lo, hi) = HTTP_HEADER_RANGE;
        if let Some(h) = self.max_header.filter(|h| !(lo..=hi).contains(h)) {
            return Err(out_of_range("--max-header", h, format!("{lo}..={hi} bytes")));
        }
        if let Some(b) = self.max_body.filter(|b| *b > MAX_HTTP_BODY) {
            return Err(out_of_range(
                "--max-body",
                b,
                format!("0..={MAX_HTTP_BODY} bytes"),
            ));
        }
        if let Some(f) = self.tls.as_ref().and_then(|t| t.ca_file.as_ref()) {
            check_line("--cacert", f, "a file name")?;
        }
        if self.tcp.mptcp {
            // The HTTP server and load generator make their own sockets.
            return Err(crate::spec::SpecError::Invalid {
                option: "--mptcp",
                value: "with http".into(),
                rule: "MPTCP is for the TCP kinds (tcp-stream, tcp-maerts, tcp-bidir, tcp-rr, tcp-crr)"
                    .into(),
            });
        }
        self.tcp.check()
    }
    fn worker_buffer_bytes(&self) -> u64 {
        64 * 1024
    }
    /// What goes on its request and header lines, its load, timeout and
    /// bounds; 64 KiB of buffers.
    fn bounds(&self) -> KindBounds<'_> {
        let mut lines = vec![("--path", self.path.as_str(), MAX_HTTP_LINE, Line::Target)];
        lines.extend(
            self.host_header
                .as_deref()
                .map(|h| ("--host-header", h, MAX_HTTP_LINE, Line::Text)),
        );
        lines.extend(
            self.headers
                .iter()
                .map(|h| ("-H/--header", h.as_str(), MAX_HTTP_LINE, Line::Header)),
        );
        let mut ranges = vec![(
            "-H/--header (count)",
            self.headers.len() as f64,
            0.0,
            MAX_HTTP_HEADERS as f64,
        )];
        let (lo, hi) = HTTP_TIMEOUT_RANGE_S;
        ranges.extend(self.timeout_s.map(|t| ("--timeout", t, lo, hi)));
        let (lo, hi) = HTTP_HEADER_RANGE;
        ranges.extend(
            self.max_header
                .map(|m| ("--max-header", f64::from(m), f64::from(lo), f64::from(hi))),
        );
        ranges.extend(
            self.max_body
                .map(|m| ("--max-body", m as f64, 0.0, MAX_HTTP_BODY as f64)),
        );
        ranges.extend(
            self.requests
                .map(|n| ("--requests", n as f64, 1.0, MAX_HTTP_REQUESTS as f64)),
        );
        ranges.extend(
            self.rate()
                .map(|r| ("--rate", r, KindBounds::ABOVE_ZERO, crate::spec::MAX_RATE)),
        );
        KindBounds {
            lines,
            ranges,
            buffers: (0, 64 * 1024),
            ..KindBounds::default()
        }
    }
    fn offered(&self) -> Offered {
        Offered::SelfClocked
    }
}
