//! A scraper's request head at the agent's metrics port (`--metrics-port`):
//! `netrig_openmetrics::scrape::request` on arbitrary bytes (the listener has already bounded
//! the head to 8 KiB and 3 s).
//!
//! Invariants: no panic; a refusal's status is one the port answers with, with words; the
//! metrics are served only for a GET whose path is /metrics (any query); OpenMetrics only when
//! an Accept header names `application/openmetrics-text`.

use netrig_openmetrics::scrape::{request, Scrape, REFUSALS};

pub fn run(data: &[u8]) {
    match request(data) {
        Scrape::Refused(status, words) => {
            assert!(REFUSALS.contains(&status), "status {status}");
            assert!(!words.is_empty());
        }
        Scrape::Metrics { openmetrics } => {
            assert!(data.starts_with(b"GET "), "served a request that is not a GET");
            let line_end = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
            let line = String::from_utf8_lossy(&data[..line_end]);
            let target = line.split_whitespace().nth(1).unwrap_or("");
            assert_eq!(target.split('?').next(), Some("/metrics"), "served {target}");
            if openmetrics {
                let text = String::from_utf8_lossy(data).to_ascii_lowercase();
                assert!(text.contains("application/openmetrics-text"));
            }
        }
    }
}
