//! `--push URL`: a run's summary (netrig-export's `openmetrics`) to a Prometheus Pushgateway,
//! after the result is printed and saved, so a failed push never costs the result.
//!
//! Each group is PUT to URL/metrics/job/netrig/LABEL/VALUE/...: PUT replaces the group's
//! metrics whole, so a figure this run withheld does not linger from an earlier run's push (a
//! POST would keep it). Its body is the classic text format, which every Pushgateway reads.
//! ureq (blocking, without TLS: plain http:// only) sends it, within [`PUSH_TIMEOUT`].

use anyhow::{bail, Result};
use base64::Engine;
use netrig_export::openmetrics::Group;
use std::time::Duration;

/// The most one PUT (one group) may take, connection to answer.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Pushes every group to the Pushgateway at `url`; the first failure is the error, naming
/// --push, the URL and the group.
pub fn push(url: &str, groups: &[Group]) -> Result<()> {
    let base = base_url(url)?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(PUSH_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    for g in groups.iter().filter(|g| !g.families.is_empty()) {
        let to = format!("{base}/metrics/job/netrig{}", grouping_path(&g.labels));
        let body = netrig_openmetrics::classic(&g.families);
        let answer = agent
            .put(&to)
            .header("Content-Type", netrig_openmetrics::CLASSIC_CONTENT_TYPE)
            .send(body.as_bytes());
        match answer {
            Ok(r) if r.status().is_success() => {}
            Ok(mut r) => {
                let status = r.status();
                let why = r
                    .body_mut()
                    .with_config()
                    .limit(4096)
                    .read_to_string()
                    .unwrap_or_default();
                bail!(
                    "--push {url}: the Pushgateway answered {status} to PUT {to}: {} (the result above is \
                     printed and saved all the same)",
                    why.trim()
                );
            }
            Err(e) => bail!(
                "--push {url}: PUT {to} failed: {e} (within {} s; the result above is printed and saved \
                 all the same)",
                PUSH_TIMEOUT.as_secs()
            ),
        }
    }
    Ok(())
}

/// Refuses a URL this build cannot push to, before the run rather than after it.
pub fn check(url: &str) -> Result<(), crate::Usage> {
    base_url(url).map(|_| ()).map_err(|e| crate::Usage(e.to_string()))
}

/// `url` without a trailing slash, refused unless it is plain http.
fn base_url(url: &str) -> Result<&str> {
    let base = url.trim_end_matches('/');
    if !base.starts_with("http://") || base.len() <= "http://".len() {
        bail!(
            "--push {url}: give the Pushgateway's address as http://HOST:PORT (this build pushes over plain \
             HTTP; a Pushgateway behind TLS needs a proxy on this host)"
        );
    }
    Ok(base)
}

/// The grouping labels as the Pushgateway's URL path takes them: `/NAME/VALUE` each, a value
/// that is empty or holds anything but letters, digits, '-', '_' and '.' as
/// `/NAME@base64/BASE64URL` (its documented form for values with '/').
fn grouping_path(labels: &[(String, String)]) -> String {
    let plain = |v: &str| {
        !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    labels
        .iter()
        .map(|(k, v)| match plain(v) {
            true => format!("/{}/{v}", netrig_openmetrics::label_name(k)),
            false => format!(
                "/{}@base64/{}",
                netrig_openmetrics::label_name(k),
                match v.is_empty() {
                    true => "=".to_string(),
                    false => base64::engine::general_purpose::URL_SAFE.encode(v),
                }
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_values_that_are_not_plain_go_as_base64() {
        let labels = [
            ("kind".to_string(), "tcp-stream".to_string()),
            ("target".to_string(), "[::1]:6387".to_string()),
            ("point".to_string(), String::new()),
        ];
        assert_eq!(
            grouping_path(&labels),
            "/kind/tcp-stream/target@base64/Wzo6MV06NjM4Nw==/point@base64/="
        );
    }

    #[test]
    fn only_plain_http_is_pushed_to() {
        assert_eq!(
            base_url("http://127.0.0.1:9091/").unwrap(),
            "http://127.0.0.1:9091"
        );
        assert!(base_url("https://gw:9091").is_err());
        assert!(base_url("gw:9091").is_err());
    }
}
